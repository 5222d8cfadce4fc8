// Operations: operator interventions (cooldowns, affinity, scores) and channel selection.
import { html, useState, useEffect } from '../lib.js';
import { api } from '../api.js';
import { useApi, useConfirm, useAction, Loading, ErrorBox, PageHeader, Card, Button, Field } from '../ui.js';

const SELECTIONS = [
  { value: 'smart', label: 'Smart', desc: 'By score (latency × recent success), with some exploration.' },
  { value: 'order', label: 'Order', desc: 'Config order (chain order for AUTO).' },
  { value: 'priority', label: 'Priority', desc: 'By priority_orders per model; unlisted sources follow in config order.' },
  { value: 'cheapest', label: 'Cheapest', desc: 'The lowest price (input + output per 1M tokens) first; unpriced models last.' },
];

const count = (r) => r?.cleared ?? r?.reset ?? 0;

/** A global action plus the same action for one source picked from a list. */
function Intervention({ title, desc, all, one, run, busy, sources, path, noun, done }) {
  const [confirm, dialog] = useConfirm();
  const [source, setSource] = useState('');
  useEffect(() => { if (sources?.length && !sources.includes(source)) setSource(sources[0]); }, [sources]);
  const go = async (body, what) => {
    const ok = await confirm({ title: `${what}?`, message: body.source ? `${desc} Only source “${body.source}”.` : desc, confirmLabel: what, danger: true });
    if (!ok) return;
    await run(() => api('POST', path, body), (r) => `${done}: ${count(r)}${body.source ? ` (source ${body.source})` : ''}`);
  };
  return html`<${Card} title=${title}>
    <p class="muted">${desc}</p>
    <div><${Button} variant="danger" busy=${busy} onClick=${() => go({}, all)}>${all}<//></div>
    ${sources ? html`<div class="form-row">
      <${Field} label=${`Source (${noun})`} class="grow">
        <select value=${source} onChange=${(e) => setSource(e.currentTarget.value)} disabled=${!sources.length}>
          ${sources.length ? sources.map((s) => html`<option key=${s} value=${s}>${s}</option>`) : html`<option value="">No sources</option>`}
        </select>
      <//>
      <${Button} busy=${busy} disabled=${!source} onClick=${() => go({ source }, one)}>${one}<//>
    </div>` : null}
    ${dialog}
  <//>`;
}

function ChannelSelection() {
  const settings = useApi('/settings');
  const [value, setValue] = useState(null);
  const [run, busy] = useAction();
  useEffect(() => { if (settings.data) setValue(settings.data.channel_selection); }, [settings.data]);
  const choose = async (v) => {
    const before = value;
    setValue(v);
    const r = await run(() => api('PUT', '/settings', { channel_selection: v }), `Channel selection: ${v}`);
    if (r === undefined) setValue(before);
    else if (r && typeof r === 'object' && r.channel_selection) setValue(r.channel_selection);
  };
  let body;
  if (settings.error && !settings.data) body = html`<${ErrorBox} error=${settings.error} onRetry=${settings.reload} />`;
  else if (!settings.data) body = html`<${Loading} />`;
  else {
    body = html`<fieldset class="radio-list" disabled=${busy}>
      <legend class="sr-only">Channel selection</legend>
      ${SELECTIONS.map((s) => html`<div key=${s.value} class="radio-item">
        <label><input type="radio" name="channel_selection" value=${s.value} checked=${value === s.value}
          aria-describedby=${`cs-${s.value}-desc`} onChange=${() => choose(s.value)} /><strong>${s.label}</strong></label>
        <div class="desc" id=${`cs-${s.value}-desc`}>${s.desc}</div>
      </div>`)}
    </fieldset>
    ${settings.data.default_model ? html`<p class="small muted">Default model: <code>${settings.data.default_model}</code></p>` : null}`;
  }
  return html`<${Card} title="Channel selection">
    <p class="muted">How healthy candidates of one tier are ordered. Saved at once and used by the next request.</p>
    ${body}
  <//>`;
}

export default function OperationsPage() {
  const list = useApi('/sources');
  const [run, busy] = useAction();
  const sources = list.data ? (list.data.sources ?? []).filter((s) => !s.deleted).map((s) => s.name) : null;
  return html`<div class="stack">
    <${PageHeader} title="Operations" />
    ${list.error ? html`<${ErrorBox} title="Could not list sources" error=${list.error} onRetry=${list.reload} />` : null}
    ${list.loading && !list.data ? html`<${Loading} label="Loading sources…" />` : null}
    <div class="ops">
      <${Intervention} title="Cooldowns" noun="cooldowns" path="/cooldowns/clear" run=${run} busy=${busy} sources=${sources}
        desc="Clears cooling windows and failure counts: the slots take traffic again at once."
        all="Clear all cooldowns" one="Clear source cooldowns" done="Cooldowns cleared" />
      <${Intervention} title="Session affinity" noun="affinity" path="/affinity/clear" run=${run} busy=${busy} sources=${sources}
        desc="Drops session bindings: the next request of each session picks a slot afresh."
        all="Clear all affinity" one="Clear source affinity" done="Affinity bindings cleared" />
      <${Intervention} title="Scores" noun="scores" path="/stats/reset" run=${run} busy=${busy} sources=${sources}
        desc="Forgets the smart-ordering scores (latency and success history); request logs are kept."
        all="Reset stats" one="Reset source stats" done="Scores reset" />
      <${ChannelSelection} />
    </div>
  </div>`;
}
