// Operations: operator interventions (cooldowns, affinity, scores) and channel selection.
// Roles: the interventions and the cache purge are the operator's; the channel selection and
// the policies the admin's; a viewer sees what is set.
import { html, useState, useEffect } from '../lib.js';
import { api } from '../api.js';
import { may } from '../access.js';
import { useApi, useConfirm, useAction, Loading, ErrorBox, PageHeader, Card, Button, Field, KV, Toggle, toast, fmtNum } from '../ui.js';

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
  else if (!may('admin')) {
    // Shown, not offered: changing it is the admin's.
    const s = SELECTIONS.find((x) => x.value === value);
    body = html`<p data-testid="channel-selection"><strong>${s?.label ?? value ?? '—'}</strong>${s ? html` <span class="muted">${s.desc}</span>` : null}</p>
    ${settings.data.default_model ? html`<p class="small muted">Default model: <code>${settings.data.default_model}</code></p>` : null}`;
  } else {
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
    <p class="muted">How healthy candidates of one tier are ordered.${may('admin') ? ' Saved at once and used by the next request.' : ''}</p>
    ${body}
  <//>`;
}

const fmtSize = (bytes) => (bytes < 1048576 ? `${fmtNum(Math.ceil(bytes / 1024))} KiB` : `${(bytes / 1048576).toFixed(bytes < 10485760 ? 1 : 0)} MiB`);

/** The response cache: what it holds against its bounds, and a purge behind a confirmation. */
function ResponseCache() {
  const cache = useApi('/cache');
  const [confirm, dialog] = useConfirm();
  const [run, busy] = useAction();
  const purge = async () => {
    const ok = await confirm({
      title: 'Purge the response cache?',
      message: 'Every kept answer is forgotten (the replicas\' shared ones too): the next request for each goes upstream.',
      confirmLabel: 'Purge cache', danger: true,
    });
    if (!ok) return;
    await run(() => api('DELETE', '/cache'), (r) => `Cache purged: ${r?.purged ?? 0} ${r?.purged === 1 ? 'entry' : 'entries'}`);
    cache.reload();
  };
  let body;
  if (cache.error && !cache.data) body = html`<${ErrorBox} error=${cache.error} onRetry=${cache.reload} />`;
  else if (!cache.data) body = html`<${Loading} />`;
  else {
    const { config: c, entries, bytes, shared } = cache.data;
    body = html`<${KV} items=${[
      ['Entries', html`<span data-testid="cache-entries">${fmtNum(entries)}</span>`],
      ['Held', `${fmtSize(bytes)} of ${fmtNum(c.max_mb)} MiB`],
      shared ? ['Shared (Redis)', `${fmtNum(shared.entries)} entries, ${fmtSize(shared.bytes)}`] : null,
      ['Kept for', `${fmtNum(c.ttl_seconds)} s`],
      ['Largest answer kept', `${fmtNum(c.max_entry_kb)} KiB`],
      ['Groups sharing entries', c.shared_groups.length ? c.shared_groups.join(', ') : 'none (each key its own)'],
      ['Hits count against quotas', c.hits_count_against_quotas ? 'yes' : 'no'],
    ]} />
    ${may('operator') ? html`<div><${Button} variant="danger" busy=${busy} onClick=${purge}>Purge cache<//></div>` : null}`;
  }
  return html`<${Card} title="Response cache">
    <p class="muted">Answers kept for requests asked again, on for the keys, routes and sources that say <code>cache: true</code>.</p>
    ${body}
    ${dialog}
  <//>`;
}

/** `key=value` lines → settings; an empty line is skipped, a line without `=` is an error. */
function parseSettings(text) {
  const settings = {};
  for (const [i, line] of text.split('\n').entries()) {
    if (!line.trim()) continue;
    const at = line.indexOf('=');
    if (at < 1) throw new Error(`Settings, line ${i + 1}: write key=value`);
    settings[line.slice(0, at).trim()] = line.slice(at + 1).trim();
  }
  return settings;
}

/** Upload a policy component (checked by the gateway before it is used) with its settings. */
function PolicyUpload({ onDone }) {
  const [name, setName] = useState('');
  const [file, setFile] = useState(null);
  const [global, setGlobal] = useState(false);
  const [onError, setOnError] = useState('closed');
  const [settings, setSettings] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const upload = async (e) => {
    e.preventDefault();
    const form = e.currentTarget;
    setBusy(true);
    setError(null);
    try {
      const n = (name.trim() || (file?.name ?? '').replace(/\.wasm$/i, '')).replace(/[^A-Za-z0-9_-]+/g, '-');
      if (!file) throw new Error('Choose a .wasm policy component first');
      if (!n) throw new Error('Name: required');
      const parsed = parseSettings(settings);
      const path = `/policies/${encodeURIComponent(n)}`;
      const put = await api('PUT', `${path}/component?global=${global}&on_error=${onError}`, file);
      if (Object.keys(parsed).length) {
        await api('PUT', path, { plugin: put.plugin, settings: parsed, global, on_error: onError });
      }
      toast(`Policy ${n} installed`, 'ok');
      setFile(null);
      setName('');
      setSettings('');
      setGlobal(false);
      setOnError('closed');
      form.reset();
      onDone();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return html`<form class="stack" onSubmit=${upload} aria-label="Upload a policy">
    <div class="form-grid">
      <${Field} label="Policy name" hint="letters, digits, - and _; default: the file name">
        <input value=${name} onInput=${(e) => setName(e.currentTarget.value)} autocomplete="off" /><//>
      <${Field} label="Policy file" hint="a .wasm component built for switchyard:policy@0.1.0">
        <input type="file" accept=".wasm,application/wasm" onChange=${(e) => setFile(e.currentTarget.files?.[0] ?? null)} /><//>
      <${Field} label="On failure" hint="a trap or limit refuses the request (closed) or lets it pass (open)">
        <select value=${onError} onChange=${(e) => setOnError(e.currentTarget.value)}>
          <option value="closed">closed</option><option value="open">open</option></select><//>
      <div class="field"><${Toggle} label="Every request (global)" checked=${global} onChange=${setGlobal} /></div>
    </div>
    <${Field} label="Settings" hint="one key=value a line, handed to the policy as they are">
      <textarea rows="3" value=${settings} onInput=${(e) => setSettings(e.currentTarget.value)}></textarea><//>
    ${error ? html`<${ErrorBox} error=${error} />` : null}
    <div><${Button} variant="primary" type="submit" busy=${busy} disabled=${!file}>${busy ? 'Checking…' : 'Upload policy'}<//></div>
  </form>`;
}

/** The policies the gateway runs: what each checks and what its failure means; upload, delete. */
function Policies() {
  const list = useApi('/policies');
  const admin = may('admin');
  const [confirm, dialog] = useConfirm();
  const [run] = useAction();
  const remove = async (p) => {
    const ok = await confirm({
      title: `Delete policy ${p.name}?`,
      message: 'Its component and settings go; keys, routes and sources must not name it any more.',
      confirmLabel: 'Delete policy', danger: true,
    });
    if (!ok) return;
    await run(() => api('DELETE', `/policies/${encodeURIComponent(p.name)}`), () => `Policy ${p.name} deleted`);
    list.reload();
  };
  let body;
  if (list.error && !list.data) body = html`<${ErrorBox} error=${list.error} onRetry=${list.reload} />`;
  else if (!list.data) body = html`<${Loading} />`;
  else if (!list.data.policies.length) body = html`<p class="muted">None yet: ${admin ? 'upload one below, or ' : ''}define them under <code>policies:</code> in the config.</p>`;
  else body = html`<${KV} items=${list.data.policies.map((p) => [
    p.name,
    html`<span data-testid=${`policy-${p.name}`}>${p.component} ${p.version} · ${p.hooks.join(', ')}${p.global ? ' · every request' : ''} · fails ${p.on_error}</span>
      ${admin && p.origin === 'runtime' ? html` <${Button} size="sm" variant="danger" aria-label=${`Delete policy ${p.name}`} onClick=${() => remove(p)}>Delete<//>` : null}`,
  ])} />`;
  return html`<${Card} title="Policies">
    <p class="muted">Checks and rewrites on requests and answers; keys, routes and sources attach them (<a href="#/keys">Keys</a>, <a href="#/routes">Routes</a>).</p>
    ${body}
    ${admin ? html`<${PolicyUpload} onDone=${list.reload} />` : null}
    ${dialog}
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
    ${may('operator') ? null : html`<p class="muted" role="note">Your role (viewer) shows what is set here; clearing cooldowns,
      affinity and scores and purging the cache need the operator role.</p>`}
    <div class="ops">
      ${may('operator') ? html`<${Intervention} title="Cooldowns" noun="cooldowns" path="/cooldowns/clear" run=${run} busy=${busy} sources=${sources}
        desc="Clears cooling windows and failure counts: the slots take traffic again at once."
        all="Clear all cooldowns" one="Clear source cooldowns" done="Cooldowns cleared" />
      <${Intervention} title="Session affinity" noun="affinity" path="/affinity/clear" run=${run} busy=${busy} sources=${sources}
        desc="Drops session bindings: the next request of each session picks a slot afresh."
        all="Clear all affinity" one="Clear source affinity" done="Affinity bindings cleared" />
      <${Intervention} title="Scores" noun="scores" path="/stats/reset" run=${run} busy=${busy} sources=${sources}
        desc="Forgets the smart-ordering scores (latency and success history); request logs are kept."
        all="Reset stats" one="Reset source stats" done="Scores reset" />` : null}
      <${ChannelSelection} />
      <${ResponseCache} />
      <${Policies} />
    </div>
  </div>`;
}
