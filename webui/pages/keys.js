// Keys: the gateway keys clients send (GET /keys, masked), their model scope, route group,
// token quota and USD budget with their use; create (the secret shown once), edit, budget, revoke.
import { html, useState, useMemo, useRef } from '../lib.js';
import { api } from '../api.js';
import { may } from '../access.js';
import {
  useApi, Loading, ErrorBox, Empty, Modal, Button, PageHeader, Card, Table, Pill, toast, fmtAgo, fmtTime, maskKey,
} from '../ui.js';
import {
  TextInput, SelectInput, QuotaInputs, quotaBody, FormError, ConfirmAction, useSubmit, newFormId, str, enc, periodText,
  modelCatalog, UsageBar, Chips, copyText, BudgetInputs, budgetBody, BudgetBar, PolicyPicker,
} from './forms.js';

const CACHE_CHOICES = [
  { value: '', label: 'as its routes and sources say' },
  { value: 'on', label: 'on' },
  { value: 'off', label: 'off' },
];

/** Splits free text into scope entries (commas, spaces or new lines). */
const splitEntries = (text) => text.split(/[\s,]+/).map((s) => s.trim()).filter(Boolean);

/**
 * ScopePicker({value, onChange, models, routes}) → checkboxes for `*`, AUTO, route aliases and
 * model names, plus free text for anything else (`source/model`, `claude-*`).
 */
function ScopePicker({ value, onChange, models, routes }) {
  const groups = [...new Set((routes ?? []).map((r) => r.group))];
  const aliases = [...new Set((routes ?? []).map((r) => r.alias))];
  const modelNames = models.map((m) => m.name).filter((n) => !aliases.includes(n));
  const known = new Set(['*', 'AUTO', ...aliases, ...modelNames]);
  const [other, setOther] = useState(() => value.filter((v) => !known.has(v)).join(', '));
  const checked = new Set(value);
  const toggle = (entry, on) => {
    const next = value.filter((v) => v !== entry);
    if (on) next.push(entry);
    onChange(next);
  };
  const setOtherText = (text) => {
    setOther(text);
    onChange([...value.filter((v) => known.has(v)), ...splitEntries(text).filter((v) => !known.has(v))]);
  };
  const box = (entry, label, desc) => html`<label class="check" key=${entry}>
    <input type="checkbox" checked=${checked.has(entry)} onChange=${(e) => toggle(entry, e.currentTarget.checked)} />
    <span>${label}${desc ? html` <span class="muted small">${desc}</span>` : null}</span>
  </label>`;
  const aliasGroups = (a) => (routes ?? []).filter((r) => r.alias === a).map((r) => r.group);
  return html`<fieldset class="fieldset scope-picker">
    <legend>Model scope</legend>
    <div class="row check-list">
      ${box('*', '* (every model)', 'all models, routes and AUTO')}
      ${box('AUTO', 'AUTO', 'the AUTO chains')}
    </div>
    ${aliases.length ? html`<div class="field-label">Routes</div><div class="row check-list">
      ${aliases.map((a) => box(a, a, groups.length > 1 ? `(group ${aliasGroups(a).join(', ')})` : 'route'))}
    </div>` : null}
    ${modelNames.length ? html`<div class="field-label">Models</div><div class="row check-list">
      ${modelNames.map((m) => box(m, m))}
    </div>` : null}
    <${TextInput} label="Other scope entries" value=${other} onValue=${setOtherText} autocomplete="off"
      placeholder="openai/gpt-4o, claude-*" hint="comma-separated: source/model names, or a prefix ending in *" />
    ${value.length === 0 ? html`<p class="small muted" role="note">An empty scope lets the key use nothing.</p>` : null}
  </fieldset>`;
}

function useScopeOptions() {
  const sources = useApi('/sources');
  const routes = useApi('/routes');
  const models = useMemo(() => modelCatalog(sources.data?.sources), [sources.data]);
  return { models, routes: routes.data?.routes ?? [] };
}

// ---------------------------------------------------------------------------------------------
// Create, show once, edit

function CreateDialog({ options, onCreated, onClose }) {
  const [name, setName] = useState('');
  const [models, setModels] = useState(['*']);
  const [group, setGroup] = useState('default');
  const [quota, setQuota] = useState({ token_quota: '', period: '', hours: '' });
  const [budget, setBudget] = useState({ usd: '', period: 'month' });
  const [cache, setCache] = useState('');
  const [policies, setPolicies] = useState([]);
  const { busy, error, submit } = useSubmit();
  const [formId] = useState(newFormId);
  const groups = [...new Set(options.routes.map((r) => r.group))];
  const create = async (e) => {
    e?.preventDefault();
    const r = await submit(async () => {
      const n = name.trim();
      if (!n) throw new Error('Name: required (shown in logs; never the key itself)');
      if (models.length === 0) throw new Error('Model scope: choose at least one entry, or the key could use nothing');
      const body = { name: n, models, group: group.trim() || 'default', ...quotaBody(quota) };
      const b = budgetBody(budget);
      if (b) body.budget = b;
      if (cache) body.cache = cache === 'on';
      if (policies.length) body.policies = policies;
      return api('POST', '/keys', body);
    });
    if (r) onCreated(r);
  };
  return html`<${Modal} wide title="Create key" onClose=${onClose} footer=${html`
      <${Button} onClick=${onClose}>Cancel<//>
      <${Button} variant="primary" type="submit" form=${formId} busy=${busy}>Create key<//>`}>
    <form id=${formId} class="stack" onSubmit=${create} novalidate>
      <div class="form-grid">
        <${TextInput} label="Name" value=${name} onValue=${setName} required autofocus autocomplete="off" hint="shown in logs" />
        <${TextInput} label="Group" value=${group} onValue=${setGroup} autocomplete="off" list=${`${formId}-groups`}
          hint="the route group whose routes the key sees" />
        <datalist id=${`${formId}-groups`}>${groups.map((g) => html`<option key=${g} value=${g} />`)}</datalist>
        <${SelectInput} label="Response cache" value=${cache} onValue=${setCache} options=${CACHE_CHOICES}
          hint="repeated requests answered from the cache (over its routes' and sources' say)" />
      </div>
      <${ScopePicker} value=${models} onChange=${setModels} models=${options.models} routes=${options.routes} />
      <${PolicyPicker} value=${policies} onChange=${setPolicies}
        hint="Checks this key's requests and answers pass after the global policies." />
      <${QuotaInputs} value=${quota} onChange=${setQuota} />
      <${BudgetInputs} value=${budget} onChange=${setBudget} />
      <p class="small muted">Past its quota or budget in a period the key gets 429 until the window rolls over.</p>
      <${FormError} error=${error} />
    </form>
  <//>`;
}

function SecretDialog({ created, onClose }) {
  const input = useRef(null);
  const [copied, setCopied] = useState(null);
  const copy = async () => {
    const ok = await copyText(created.key, input.current);
    setCopied(ok);
    if (ok) toast('Key copied', 'ok', 1500);
  };
  return html`<${Modal} title=${`Key ${created.name} created`} onClose=${onClose} dismissable=${false} footer=${html`
      <${Button} variant="primary" onClick=${onClose}>Done<//>`}>
    <div class="state warnbox" role="alert">
      <strong>Copy the key now: it will not be shown again.</strong> Only a digest of it is kept; if it is lost, revoke it and create another.
    </div>
    <div class="field">
      <label for="new-key-secret">New key</label>
      <div class="row">
        <input id="new-key-secret" ref=${input} class="mono secret" readonly value=${created.key}
          onFocus=${(e) => e.currentTarget.select()} style=${{ flex: '1 1 240px' }} />
        <${Button} onClick=${copy} aria-label="Copy key">Copy<//>
      </div>
      ${copied === false ? html`<div class="hint" role="status">The clipboard is not available here: the key is selected, copy it with Ctrl+C (⌘C).</div>` : null}
    </div>
    <p class="small muted">Clients send it as <code>Authorization: Bearer …</code>. Scope: ${(created.models ?? []).join(', ')}.</p>
  <//>`;
}

function EditDialog({ keyRow, options, onSaved, onClose }) {
  const isConfig = keyRow.origin === 'config';
  const [models, setModels] = useState(keyRow.models ?? []);
  const [group, setGroup] = useState(keyRow.group ?? 'default');
  const [quota, setQuota] = useState({ token_quota: str(keyRow.token_quota), period: keyRow.period ?? '', hours: str(keyRow.hours) });
  const { busy, error, submit } = useSubmit();
  const [formId] = useState(newFormId);
  const save = async (e) => {
    e?.preventDefault();
    const r = await submit(async () => {
      if (models.length === 0) throw new Error('Model scope: choose at least one entry, or the key could use nothing');
      const body = { models };
      if (!isConfig) {
        body.group = group.trim() || 'default';
        const q = quotaBody(quota);
        // Leaving the quota empty means unlimited: 0 (an absent field would keep the old quota).
        body.token_quota = q.token_quota ?? 0;
        body.period = q.period;
        if (q.hours !== undefined) body.hours = q.hours;
      }
      return api('PATCH', `/keys/${enc(keyRow.name)}`, body);
    });
    if (r) {
      toast(`Key ${keyRow.name} saved`, 'ok');
      onSaved();
    }
  };
  return html`<${Modal} wide title=${isConfig ? `Edit scope of ${keyRow.name}` : `Edit key ${keyRow.name}`} onClose=${onClose} footer=${html`
      <${Button} onClick=${onClose}>Cancel<//>
      <${Button} variant="primary" type="submit" form=${formId} busy=${busy}>Save<//>`}>
    <form id=${formId} class="stack" onSubmit=${save} novalidate>
      ${isConfig ? html`<p class="small muted">This key comes from config.yaml: only its model scope can change here.</p>` : null}
      <${ScopePicker} value=${models} onChange=${setModels} models=${options.models} routes=${options.routes} />
      ${isConfig ? null : html`
        <${TextInput} label="Group" value=${group} onValue=${setGroup} autocomplete="off" hint="the route group whose routes the key sees" />
        <${QuotaInputs} value=${quota} onChange=${setQuota} />`}
      <${FormError} error=${error} />
    </form>
  <//>`;
}

/** BudgetDialog: set (`PATCH {budget: {usd, period}}`) or lift (`{budget: null}`) a key's budget; config keys too. */
function BudgetDialog({ keyRow, onSaved, onClose }) {
  const [budget, setBudget] = useState({ usd: keyRow.budget?.usd ?? '', period: keyRow.budget?.period ?? 'month' });
  const { busy, error, submit } = useSubmit();
  const [formId] = useState(newFormId);
  const patch = async (budgetOf, done) => {
    const r = await submit(async () => api('PATCH', `/keys/${enc(keyRow.name)}`, { budget: budgetOf() }));
    if (r) {
      toast(done, 'ok');
      onSaved();
    }
  };
  const save = (e) => {
    e?.preventDefault();
    return patch(() => {
      const b = budgetBody(budget);
      if (!b) throw new Error('Budget (USD): give an amount, or lift the budget');
      return b;
    }, `Budget of ${keyRow.name} saved`);
  };
  return html`<${Modal} title=${`Budget of ${keyRow.name}`} onClose=${onClose} footer=${html`
      <${Button} onClick=${onClose}>Cancel<//>
      ${keyRow.budget ? html`<${Button} variant="danger" busy=${busy}
        onClick=${() => patch(() => null, `Budget of ${keyRow.name} lifted`)}>Lift budget<//>` : null}
      <${Button} variant="primary" type="submit" form=${formId} busy=${busy}>Save budget<//>`}>
    <form id=${formId} class="stack" onSubmit=${save} novalidate>
      ${keyRow.budget ? html`<${BudgetBar} budget=${keyRow.budget} label=${`Budget use of ${keyRow.name}`} />` : null}
      <${BudgetInputs} value=${budget} onChange=${setBudget} hint="USD the key may spend in each period" />
      <p class="small muted">Past its budget the key gets 429 (<code>budget_exceeded</code>) until the window rolls over.
        Calls of models without a price are not counted.</p>
      <${FormError} error=${error} />
    </form>
  <//>`;
}

// ---------------------------------------------------------------------------------------------

function budgetCell(k) {
  if (!k.budget) return html`<span class="muted">no budget</span>`;
  const b = k.budget;
  return html`<div>
    <${BudgetBar} budget=${b} label=${`Budget use of ${k.name}`} />
    ${b.resets_at_ms ? html`<div class="small muted"><span title=${fmtTime(b.resets_at_ms)}>resets ${fmtAgo(b.resets_at_ms)}</span></div>` : null}
  </div>`;
}

function usageCell(k) {
  if (!k.token_quota) {
    return html`<span class="muted">no quota</span>`;
  }
  const resets = k.resets_at_ms ? html`<span title=${fmtTime(k.resets_at_ms)}>resets ${fmtAgo(k.resets_at_ms)}</span>` : 'lifetime';
  return html`<div>
    <${UsageBar} used=${k.used ?? 0} total=${k.token_quota} label=${`Token use of ${k.name}`}
      detail=${`per ${periodText(k.period, k.hours)}`} />
    <div class="small muted">${resets}</div>
  </div>`;
}

export default function KeysPage() {
  const keys = useApi('/keys', [], { refreshMs: 15000 });
  const options = useScopeOptions();
  const [dialog, setDialog] = useState(null);
  const list = keys.data?.keys ?? [];
  const close = () => setDialog(null);
  // Gateway keys are the admin's to make, change and revoke; other roles see them masked.
  const admin = may('admin');

  const columns = [
    { key: 'name', label: 'Name', render: (k) => html`<strong>${k.name}</strong>` },
    { key: 'key', label: 'Key', render: (k) => html`<span class="mono nowrap">${k.key ? maskKey(k.key) : '—'}</span>` },
    { key: 'origin', label: 'Origin', render: (k) => html`<${Pill} kind=${k.origin === 'config' ? 'off' : 'info'}>${k.origin}<//>` },
    { key: 'models', label: 'Models', render: (k) => html`<${Chips} items=${k.models} empty="none" />` },
    { key: 'group', label: 'Group', render: (k) => k.group ?? 'default' },
    { key: 'usage', label: 'Usage', render: usageCell },
    { key: 'budget', label: 'Budget', render: budgetCell },
    admin && { key: 'actions', label: 'Actions', class: 'actions', render: (k) => html`<div class="btn-group">
      <${Button} size="sm" aria-label=${k.origin === 'config' ? `Edit scope of ${k.name}` : `Edit key ${k.name}`}
        onClick=${() => setDialog({ kind: 'edit', k })}>${k.origin === 'config' ? 'Edit scope' : 'Edit'}<//>
      <${Button} size="sm" aria-label=${`Budget of ${k.name}`} onClick=${() => setDialog({ kind: 'budget', k })}>Budget<//>
      <${Button} size="sm" variant="danger" aria-label=${`Revoke ${k.name}`} onClick=${() => setDialog({ kind: 'revoke', k })}>Revoke<//>
    </div>` },
  ].filter(Boolean);

  let body;
  if (keys.loading && !keys.data) body = html`<${Loading} label="Loading keys…" />`;
  else if (keys.error && !keys.data) body = html`<${ErrorBox} error=${keys.error} onRetry=${keys.reload} />`;
  else if (list.length === 0) body = html`<${Empty}>No keys: every /v1 request is refused until a key exists.${admin ? ' Create one.' : ''}<//>`;
  else body = html`<${Table} caption="Gateway keys" rows=${list} columns=${columns} rowKey=${(k) => k.name} />`;

  const d = dialog;
  return html`<div class="page page-keys">
    <${PageHeader} title="Keys">${admin ? html`<${Button} variant="primary" onClick=${() => setDialog({ kind: 'create' })}>Create key<//>` : null}<//>
    <${Card}>
      ${keys.error && keys.data ? html`<${ErrorBox} error=${keys.error} onRetry=${keys.reload} />` : null}
      ${body}
    <//>
    ${d?.kind === 'create' ? html`<${CreateDialog} options=${options} onClose=${close}
      onCreated=${(created) => { setDialog({ kind: 'secret', created }); keys.reload(); }} />` : null}
    ${d?.kind === 'secret' ? html`<${SecretDialog} created=${d.created} onClose=${close} />` : null}
    ${d?.kind === 'edit' ? html`<${EditDialog} keyRow=${d.k} options=${options} onClose=${close}
      onSaved=${() => { close(); keys.reload(); }} />` : null}
    ${d?.kind === 'budget' ? html`<${BudgetDialog} keyRow=${d.k} onClose=${close}
      onSaved=${() => { close(); keys.reload(); }} />` : null}
    ${d?.kind === 'revoke' ? html`<${ConfirmAction} danger title=${`Revoke key ${d.k.name}`} confirmLabel="Revoke key"
      message=${d.k.origin === 'config'
        ? `Revoke ${d.k.name}? It comes from config.yaml: it is refused at once and stays revoked across restarts (the runtime file keeps a tombstone).`
        : `Revoke ${d.k.name}? Clients using it are refused at once; this cannot be undone.`}
      action=${() => api('DELETE', `/keys/${enc(d.k.name)}`)}
      onDone=${() => { toast(`Key ${d.k.name} revoked`, 'ok'); close(); keys.reload(); }} onCancel=${close} />` : null}
  </div>`;
}
