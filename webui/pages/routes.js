// Routes: aliases with a processing mode (direct, auto-select, adapter (vision), fusion), their
// providers (priority, enabled) and each provider's health and breaker state (GET /health).
import { html, useState, useMemo } from '../lib.js';
import { api } from '../api.js';
import { may } from '../access.js';
import {
  useApi, Loading, ErrorBox, Empty, Modal, Button, Toggle, PageHeader, Card, Table, Pill, KV,
  toast, fmtTime, fmtAgo, fmtNum,
} from '../ui.js';
import {
  TextInput, NumberInput, SelectInput, FormError, ConfirmAction, useSubmit, newFormId, parseNumber, str, enc,
  healthIndex, slotKey, SlotHealth, modelCatalog, PolicyPicker,
} from './forms.js';

const MODES = [
  { value: 'direct', label: 'direct: the first enabled provider, no failover' },
  { value: 'auto-select', label: 'auto-select: providers by priority, with failover' },
  { value: 'adapter', label: 'adapter (vision): images described as text, then auto-select' },
  { value: 'fusion', label: 'fusion: every provider answers, a judge writes the answer' },
];
const MODE_KIND = { direct: 'off', 'auto-select': 'ok', adapter: 'info', fusion: 'warn' };
const STRATEGIES = [
  { value: 'compare_and_synthesize', label: 'compare_and_synthesize: one answer from the best parts' },
  { value: 'majority_vote', label: 'majority_vote: the consensus answer' },
  { value: 'ranked', label: 'ranked: the best answer, verbatim' },
];
const FALLBACKS = [
  { value: 'error', label: 'error: a failed description fails the request' },
  { value: 'skip-image', label: 'skip-image: a placeholder replaces the image' },
];

// ---------------------------------------------------------------------------------------------
// Add / edit a route

function toForm(r) {
  const a = r?.adapter_config ?? {};
  const f = r?.fusion_config ?? {};
  return {
    alias: r?.alias ?? '',
    group: r?.group ?? 'default',
    mode: r?.mode ?? 'direct',
    vision_alias: a.vision_alias ?? '',
    fallback: a.fallback ?? 'error',
    max_images: str(a.max_images),
    judge_alias: f.judge_alias ?? '',
    strategy: f.strategy ?? 'compare_and_synthesize',
    min_candidates: str(f.min_candidates),
    timeout_seconds: str(f.timeout_seconds),
    providers: (r?.providers ?? []).map((p) => ({ source: p.source, model: p.model, priority: str(p.priority), enabled: p.enabled !== false })),
    cache: r?.cache === true ? 'on' : r?.cache === false ? 'off' : '',
    semantic_cache: r?.semantic_cache === true,
    policies: r?.policies ?? [],
  };
}

const CACHE_CHOICES = [
  { value: '', label: 'as its sources say' },
  { value: 'on', label: 'on' },
  { value: 'off', label: 'off' },
];

function routeBody(f) {
  const alias = f.alias.trim();
  if (!alias) throw new Error('Alias: required (what clients send as model)');
  const body = { alias, group: f.group.trim() || 'default', mode: f.mode };
  if (f.cache) body.cache = f.cache === 'on';
  if (f.semantic_cache) body.semantic_cache = true;
  if (f.policies.length) body.policies = f.policies;
  body.providers = f.providers.map((p, i) => {
    if (!p.source || !p.model) throw new Error(`Provider ${i + 1}: choose a source and a model`);
    return { source: p.source, model: p.model, priority: parseNumber(`Provider ${i + 1} priority`, p.priority, { int: true }) ?? 0, enabled: p.enabled };
  });
  if (f.mode === 'adapter') {
    if (!f.vision_alias.trim()) throw new Error('Vision alias: required for the adapter mode (the route or model describing images)');
    const c = { vision_alias: f.vision_alias.trim(), fallback: f.fallback };
    const max = parseNumber('Max images', f.max_images, { int: true, min: 1 });
    if (max !== undefined) c.max_images = max;
    body.adapter_config = c;
  }
  if (f.mode === 'fusion') {
    if (!f.judge_alias.trim()) throw new Error('Judge alias: required for the fusion mode (the route or model judging the answers)');
    const c = { judge_alias: f.judge_alias.trim(), strategy: f.strategy };
    const min = parseNumber('Min candidates', f.min_candidates, { int: true, min: 1 });
    if (min !== undefined) c.min_candidates = min;
    const t = parseNumber('Timeout per candidate (s)', f.timeout_seconds);
    if (t !== undefined) c.timeout_seconds = t;
    body.fusion_config = c;
  }
  return body;
}

function ProviderPicker({ sources, value, onChange, index, catalog }) {
  const src = (sources ?? []).find((s) => s.name === value.source);
  const models = (src?.models ?? []).map((m) => ({ value: m.name, label: m.kind && m.kind !== 'chat' ? `${m.name} (${m.kind})` : m.name }));
  if (value.model && !models.some((m) => m.value === value.model)) models.push({ value: value.model, label: `${value.model} (not served)` });
  const srcOptions = [{ value: '', label: 'choose…' }, ...(sources ?? []).filter((s) => !s.deleted).map((s) => ({ value: s.name, label: s.name }))];
  const n = index === undefined ? '' : ` ${index + 1}`;
  return html`
    <${SelectInput} label=${`Provider${n} source`} value=${value.source}
      onValue=${(v) => { const s = (sources ?? []).find((x) => x.name === v); onChange({ ...value, source: v, model: s?.models?.[0]?.name ?? '' }); }}
      options=${srcOptions} />
    <${SelectInput} label=${`Provider${n} model`} value=${value.model} onValue=${(v) => onChange({ ...value, model: v })}
      options=${[{ value: '', label: value.source ? 'choose…' : 'choose a source first' }, ...models]} />`;
}

function RouteDialog({ route, routes, sources, onSaved, onClose }) {
  const isNew = !route;
  const [form, setForm] = useState(() => toForm(route));
  const { busy, error, submit } = useSubmit();
  const [formId] = useState(newFormId);
  const listId = `${formId}-aliases`;
  const set = (k) => (v) => setForm({ ...form, [k]: v });
  const names = useMemo(() => {
    const s = new Set((routes ?? []).map((r) => r.alias));
    for (const m of modelCatalog(sources)) s.add(m.name);
    return [...s];
  }, [routes, sources]);

  const save = async (e) => {
    e?.preventDefault();
    const r = await submit(async () => {
      const body = routeBody(form);
      return isNew ? api('POST', '/routes', body) : api('PUT', `/routes/${enc(route.id)}`, body);
    });
    if (r) {
      toast(`Route ${r.alias ?? form.alias} ${isNew ? 'added' : 'saved'}`, 'ok');
      onSaved();
    }
  };
  const setProvider = (i, p) => setForm({ ...form, providers: form.providers.map((x, j) => (j === i ? p : x)) });

  return html`<${Modal} wide title=${isNew ? 'Add route' : `Edit route ${route.alias}`} onClose=${onClose} footer=${html`
      <${Button} onClick=${onClose}>Cancel<//>
      <${Button} variant="primary" type="submit" form=${formId} busy=${busy}>${isNew ? 'Add route' : 'Save route'}<//>`}>
    <form id=${formId} class="stack" onSubmit=${save} novalidate>
      <datalist id=${listId}>${names.map((n) => html`<option key=${n} value=${n} />`)}</datalist>
      <div class="form-grid">
        <${TextInput} label="Alias" value=${form.alias} onValue=${set('alias')} required autocomplete="off"
          hint="what clients send as model" />
        <${TextInput} label="Group" value=${form.group} onValue=${set('group')} autocomplete="off"
          hint="keys of this group see the route" />
        <${SelectInput} label="Mode" value=${form.mode} onValue=${set('mode')} options=${MODES} />
        <${SelectInput} label="Response cache" value=${form.cache} onValue=${set('cache')} options=${CACHE_CHOICES}
          hint="repeated requests answered from the cache (a key's own setting wins)" />
        <div class="field"><${Toggle} label="Semantic cache (paraphrases)" checked=${form.semantic_cache} onChange=${set('semantic_cache')} /></div>
      </div>
      <${PolicyPicker} value=${form.policies} onChange=${set('policies')}
        hint="Checks this route's requests and answers pass after the global and the key's." />
      ${!isNew && (form.alias !== route.alias || form.group !== route.group)
        ? html`<p class="small muted" role="note">Changing the alias or the group gives the route (and its providers) new ids.</p>` : null}
      ${form.mode === 'adapter' ? html`<fieldset class="fieldset"><legend>Vision (adapter mode)</legend><div class="form-grid">
        <${TextInput} label="Vision alias" value=${form.vision_alias} onValue=${set('vision_alias')} list=${listId}
          autocomplete="off" hint="the route or model that describes images" />
        <${SelectInput} label="Fallback" value=${form.fallback} onValue=${set('fallback')} options=${FALLBACKS} />
        <${NumberInput} label="Max images" value=${form.max_images} onValue=${set('max_images')} step="1" min="1" placeholder="8"
          hint="per request; more is refused with 400 (empty: 8)" />
      </div></fieldset>` : null}
      ${form.mode === 'fusion' ? html`<fieldset class="fieldset"><legend>Fusion</legend><div class="form-grid">
        <${TextInput} label="Judge alias" value=${form.judge_alias} onValue=${set('judge_alias')} list=${listId}
          autocomplete="off" hint="the route or model that judges the answers" />
        <${SelectInput} label="Strategy" value=${form.strategy} onValue=${set('strategy')} options=${STRATEGIES} />
        <${NumberInput} label="Min candidates" value=${form.min_candidates} onValue=${set('min_candidates')} step="1" min="1"
          placeholder="2" hint="fewer answers fail the request (empty: 2)" />
        <${NumberInput} label="Timeout per candidate (s)" value=${form.timeout_seconds} onValue=${set('timeout_seconds')}
          placeholder="30" hint="empty: 30" />
      </div></fieldset>` : null}
      ${isNew ? html`<fieldset class="fieldset"><legend>Providers</legend>
        ${form.providers.length === 0 ? html`<p class="muted small">No providers yet: a route needs at least one to serve.</p>` : null}
        ${form.providers.map((p, i) => html`<div class="form-row" key=${i}>
          <${ProviderPicker} sources=${sources} value=${p} index=${i} onChange=${(v) => setProvider(i, v)} />
          <${NumberInput} label=${`Provider ${i + 1} priority`} value=${p.priority} onValue=${(v) => setProvider(i, { ...p, priority: v })}
            step="1" placeholder="0" />
          <div class="field"><${Toggle} label=${`Provider ${i + 1} enabled`} checked=${p.enabled} onChange=${(v) => setProvider(i, { ...p, enabled: v })} /></div>
          <${Button} size="sm" variant="ghost" aria-label=${`Remove provider ${i + 1}`}
            onClick=${() => setForm({ ...form, providers: form.providers.filter((_, j) => j !== i) })}>Remove<//>
        </div>`)}
        <${Button} size="sm" onClick=${() => setForm({ ...form, providers: [...form.providers, { source: '', model: '', priority: String(form.providers.length), enabled: true }] })}>Add provider<//>
      </fieldset>` : html`<p class="small muted">Providers are changed in the route's table.</p>`}
      <${FormError} error=${error} />
    </form>
  <//>`;
}

// ---------------------------------------------------------------------------------------------
// Providers of one route

function PriorityCell({ provider, label, onSaved }) {
  const [value, setValue] = useState(String(provider.priority ?? 0));
  const [busy, setBusy] = useState(false);
  const commit = async () => {
    if (busy || value === String(provider.priority ?? 0)) return;
    let n;
    try { n = parseNumber('Priority', value, { int: true, required: true }); } catch (e) {
      toast(e.message, 'error');
      setValue(String(provider.priority ?? 0));
      return;
    }
    setBusy(true);
    try {
      await api('PATCH', `/route-providers/${enc(provider.id)}`, { priority: n });
      toast(`Priority of ${label} set to ${n}`, 'ok');
      onSaved();
    } catch (e) {
      toast(e.message, 'error');
      setValue(String(provider.priority ?? 0));
    } finally { setBusy(false); }
  };
  return html`<input class="num-input" style=${{ width: '6em' }} type="number" min="0" step="1" inputmode="numeric" value=${value} disabled=${busy}
    aria-label=${`Priority of ${label}`} onInput=${(e) => setValue(e.currentTarget.value)} onBlur=${commit}
    onKeyDown=${(e) => { if (e.key === 'Enter') { e.preventDefault(); commit(); } }} />`;
}

function AddProvider({ route, sources, onSaved, onClose }) {
  const [value, setValue] = useState({ source: '', model: '', priority: '', enabled: true });
  const { busy, error, submit } = useSubmit();
  const [formId] = useState(newFormId);
  const add = async (e) => {
    e?.preventDefault();
    const r = await submit(async () => {
      if (!value.source || !value.model) throw new Error('Choose a source and a model');
      const priority = parseNumber('Priority', value.priority, { int: true }) ??
        Math.max(-1, ...(route.providers ?? []).map((p) => p.priority ?? 0)) + 1;
      return api('POST', `/routes/${enc(route.id)}/providers`, { source: value.source, model: value.model, priority, enabled: value.enabled });
    });
    if (r) {
      toast(`Provider ${r.source}/${r.model} added to ${route.alias}`, 'ok');
      setValue({ source: '', model: '', priority: '', enabled: true });
      onSaved();
    }
  };
  return html`<form id=${formId} class="stack add-provider" onSubmit=${add} aria-label=${`Add a provider to ${route.alias}`}>
    <div class="form-row">
      <${ProviderPicker} sources=${sources} value=${value} onChange=${setValue} />
      <${NumberInput} label="Priority" value=${value.priority} onValue=${(v) => setValue({ ...value, priority: v })} step="1"
        placeholder="last" />
      <div class="field"><${Toggle} label="Enabled" checked=${value.enabled} onChange=${(v) => setValue({ ...value, enabled: v })} /></div>
      <${Button} type="submit" variant="primary" busy=${busy} aria-label=${`Add provider to ${route.alias}`}>Add provider<//>
      <${Button} onClick=${onClose}>Close<//>
    </div>
    <${FormError} error=${error} />
  </form>`;
}

function RouteCard({ route, routes, sources, index, now, onChanged, onEdit, onDelete }) {
  const [confirm, setConfirm] = useState(null);
  const [open, setOpen] = useState(false);
  // Changing routes is the admin's; resetting a breaker (clearing cooldowns) the operator's too.
  const admin = may('admin');
  const operator = may('operator');
  const providers = [...(route.providers ?? [])].sort((a, b) => (a.priority ?? 0) - (b.priority ?? 0));
  const first = providers.find((p) => p.enabled !== false);
  const toggle = async (p, enabled) => {
    try {
      await api('PATCH', `/route-providers/${enc(p.id)}`, { enabled });
      toast(`${p.source}/${p.model} ${enabled ? 'enabled' : 'disabled'} in ${route.alias}`, 'ok');
      onChanged();
    } catch (e) { toast(e.message, 'error'); }
  };
  const reset = async (p) => {
    try {
      const r = await api('POST', '/cooldowns/clear', { source: p.source, model: p.model });
      toast(`Cleared ${r.cleared ?? 0} cooldown(s) of ${p.source}/${p.model}`, 'ok');
      onChanged();
    } catch (e) { toast(e.message, 'error'); }
  };

  const columns = [
    { key: 'provider', label: 'Provider', render: (p) => html`<span class="mono wrap-any">${p.source}/${p.model}</span>
      ${route.mode === 'direct' && p === first ? html` <${Pill} kind="ok" title="direct mode sends every request to this provider">in use<//>` : null}` },
    { key: 'priority', label: 'Priority', render: (p) => (admin ? html`<${PriorityCell} key=${`${p.id}:${p.priority}`} provider=${p}
      label=${`${p.source}/${p.model} in ${route.alias}`} onSaved=${onChanged} />` : String(p.priority ?? 0)) },
    { key: 'enabled', label: 'Enabled', render: (p) => (admin ? html`<${Toggle} label=${html`<span class="sr-only">Enabled: ${p.source}/${p.model} in ${route.alias}</span>`}
      checked=${p.enabled !== false} onChange=${(v) => toggle(p, v)} />` : p.enabled !== false ? 'yes' : 'no') },
    { key: 'state', label: 'Health', render: (p) => html`<${SlotHealth} slot=${index.get(slotKey(p.source, p.model))} now=${now} />` },
    { key: 'failures', label: 'Failures', num: true, render: (p) => fmtNum(index.get(slotKey(p.source, p.model))?.failures ?? 0) },
    { key: 'recovers', label: 'Recovers at', render: (p) => {
      const h = index.get(slotKey(p.source, p.model));
      if (!h || h.state === 'healthy') return html`<span class="muted">—</span>`;
      if (h.recovers_at_ms == null) return html`<span title="until a probe succeeds or it is cleared">on a successful probe</span>`;
      return html`<span title=${fmtTime(h.recovers_at_ms)}>${fmtAgo(h.recovers_at_ms, now)}</span>`;
    } },
    { key: 'success', label: 'Success', num: true, render: (p) => {
      const h = index.get(slotKey(p.source, p.model));
      return h?.requests ? `${fmtNum(h.successes)} / ${fmtNum(h.requests)}` : '—';
    } },
    operator && { key: 'actions', label: 'Actions', class: 'actions', render: (p) => html`<div class="btn-group">
      <${Button} size="sm" aria-label=${`Reset breaker of ${p.source}/${p.model}`} onClick=${() => reset(p)}
        disabled=${(index.get(slotKey(p.source, p.model))?.state ?? 'healthy') === 'healthy'}>Reset<//>
      ${admin ? html`<${Button} size="sm" variant="danger" aria-label=${`Remove provider ${p.source}/${p.model} from ${route.alias}`}
        onClick=${() => setConfirm(p)}>Remove<//>` : null}
    </div>` },
  ].filter(Boolean);

  const cfg = route.mode === 'adapter' && route.adapter_config ? html`<${KV} items=${[
    ['Vision alias', route.adapter_config.vision_alias],
    ['Fallback', route.adapter_config.fallback ?? 'error'],
    ['Max images', String(route.adapter_config.max_images ?? 8)],
  ]} />` : route.mode === 'fusion' && route.fusion_config ? html`<${KV} items=${[
    ['Judge alias', route.fusion_config.judge_alias],
    ['Strategy', route.fusion_config.strategy ?? 'compare_and_synthesize'],
    ['Min candidates', String(route.fusion_config.min_candidates ?? 2)],
    ['Timeout per candidate', `${route.fusion_config.timeout_seconds ?? 30} s`],
  ]} />` : null;

  return html`<${Card} class="route-card" aria-label=${`Route ${route.alias}`}
      title=${html`<span class="wrap-any">${route.alias}</span> <span class="tag" title="group">${route.group}</span>
        <${Pill} kind=${MODE_KIND[route.mode] ?? 'off'}>${route.mode}<//>`}
      actions=${html`<span class="small faint mono" title="route id">${route.id}</span>
        ${admin ? html`<${Button} size="sm" aria-label=${`Edit route ${route.alias}`} onClick=${() => onEdit(route)}>Edit<//>
        <${Button} size="sm" variant="danger" aria-label=${`Delete route ${route.alias}`} onClick=${() => onDelete(route)}>Delete<//>` : null}`}>
    <div class="stack">
      ${cfg}
      <${Table} caption=${`Providers of ${route.alias}`} rows=${providers} columns=${columns} rowKey=${(p) => p.id}
        rowClass=${(p) => (p.enabled === false ? 'row-disabled' : '')}
        empty=${route.mode === 'direct' ? 'No providers: the alias serves nothing until one is added.' : 'No providers yet.'} />
      ${!admin ? null : open
        ? html`<${AddProvider} route=${route} sources=${sources} onSaved=${onChanged} onClose=${() => setOpen(false)} />`
        : html`<div><${Button} size="sm" aria-label=${`Add a provider to ${route.alias}`} onClick=${() => setOpen(true)}>Add provider…<//></div>`}
    </div>
    ${confirm ? html`<${ConfirmAction} danger title="Remove provider" confirmLabel="Remove provider"
      message=${`Remove ${confirm.source}/${confirm.model} from route ${route.alias}?`}
      action=${() => api('DELETE', `/route-providers/${enc(confirm.id)}`)}
      onDone=${() => { toast(`Removed ${confirm.source}/${confirm.model} from ${route.alias}`, 'ok'); setConfirm(null); onChanged(); }}
      onCancel=${() => setConfirm(null)} />` : null}
  <//>`;
}

export default function RoutesPage() {
  const routes = useApi('/routes');
  const sources = useApi('/sources');
  const health = useApi('/health', [], { refreshMs: 5000 });
  const [dialog, setDialog] = useState(null);
  const [group, setGroup] = useState('');
  const index = useMemo(() => healthIndex(health.data), [health.data]);
  const now = health.data?.now_ms ?? Date.now();
  const list = routes.data?.routes ?? [];
  const groups = [...new Set(list.map((r) => r.group))].sort();
  const shown = group ? list.filter((r) => r.group === group) : list;
  const srcList = sources.data?.sources;
  const reload = () => { routes.reload(); health.reload(); };
  const close = () => setDialog(null);

  let body;
  if (routes.loading && !routes.data) body = html`<${Loading} label="Loading routes…" />`;
  else if (routes.error && !routes.data) body = html`<${ErrorBox} error=${routes.error} onRetry=${routes.reload} />`;
  else if (list.length === 0) {
    body = html`<${Empty}>No routes yet. A route is an alias clients send as model, served by its providers in one of four modes
      (direct, auto-select, adapter for vision, fusion).<//>`;
  } else {
    body = html`<div class="stack">${shown.map((r) => html`<${RouteCard} key=${r.id} route=${r} routes=${list} sources=${srcList}
      index=${index} now=${now} onChanged=${reload} onEdit=${(x) => setDialog({ kind: 'edit', r: x })}
      onDelete=${(x) => setDialog({ kind: 'delete', r: x })} />`)}</div>`;
  }

  const d = dialog;
  return html`<div class="page page-routes">
    <${PageHeader} title="Routes">
      ${groups.length > 1 ? html`<label class="row small">Group
        <select aria-label="Show group" value=${group} onChange=${(e) => setGroup(e.currentTarget.value)}>
          <option value="">all groups</option>
          ${groups.map((g) => html`<option key=${g} value=${g}>${g}</option>`)}
        </select></label>` : null}
      ${may('admin') ? html`<${Button} variant="primary" onClick=${() => setDialog({ kind: 'new' })}>Add route<//>` : null}
    <//>
    ${routes.error && routes.data ? html`<${ErrorBox} error=${routes.error} onRetry=${routes.reload} />` : null}
    ${health.error && !health.data ? html`<p class="muted small" role="status">Health unavailable: ${health.error.message}</p>` : null}
    ${body}
    ${d?.kind === 'new' ? html`<${RouteDialog} routes=${list} sources=${srcList} onSaved=${() => { close(); reload(); }} onClose=${close} />` : null}
    ${d?.kind === 'edit' ? html`<${RouteDialog} route=${d.r} routes=${list} sources=${srcList} onSaved=${() => { close(); reload(); }} onClose=${close} />` : null}
    ${d?.kind === 'delete' ? html`<${ConfirmAction} danger title=${`Delete route ${d.r.alias}`} confirmLabel="Delete route"
      message=${`Delete route ${d.r.alias} (group ${d.r.group})? Clients asking for ${d.r.alias} get 404 unless a model of that name exists.`}
      action=${() => api('DELETE', `/routes/${enc(d.r.id)}`)}
      onDone=${() => { toast(`Route ${d.r.alias} deleted`, 'ok'); close(); reload(); }} onCancel=${close} />` : null}
  </div>`;
}
