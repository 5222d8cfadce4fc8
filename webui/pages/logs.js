// Request logs: server-side paging and filters kept in the hash (#/logs?key=ci&range=24h),
// fusion attempts grouped under their fusion id, a detail drawer, and a live tail.
import { html, useState, useEffect, useRef, useMemo } from '../lib.js';
import { api, query } from '../api.js';
import {
  Loading, Empty, ErrorBox, PageHeader, Button, Field, Toggle, Drawer, KV, StatusCode, Pill, Copy,
  fmtMs, fmtTokens, fmtNum, fmtTime, fmtAgo, hashLink, useHashParams,
} from '../ui.js';

const MODES = ['model', 'auto', 'direct', 'auto-select', 'adapter', 'fusion'];
const RANGES = [
  { value: '', label: 'Any time' },
  { value: '1h', label: 'Last 1 h', ms: 3_600_000 },
  { value: '24h', label: 'Last 24 h', ms: 86_400_000 },
  { value: '7d', label: 'Last 7 d', ms: 7 * 86_400_000 },
  { value: 'custom', label: 'Custom…' },
];
const TEXT_FILTERS = [
  ['key', 'Key'], ['route', 'Route'], ['source', 'Source'], ['model', 'Model'], ['request_id', 'Request id'], ['fusion_id', 'Fusion id'],
];
const SIZES = [50, 100, 200, 500];
const TAIL_MS = 2000;

/** The filters in the hash, normalised. */
function readFilters(p) {
  const f = {};
  for (const [k] of TEXT_FILTERS) f[k] = p.get(k) ?? '';
  f.mode = p.get('mode') ?? '';
  f.status = p.get('status') ?? '';
  f.errors = p.get('errors') ?? '';
  f.since_ms = p.get('since_ms') ?? '';
  f.until_ms = p.get('until_ms') ?? '';
  f.range = p.get('range') ?? (f.since_ms || f.until_ms ? 'custom' : '');
  f.limit = SIZES.includes(Number(p.get('limit'))) ? Number(p.get('limit')) : 100;
  f.offset = Math.max(0, Number(p.get('offset')) || 0);
  return f;
}

function writeFilters(f) {
  const out = { ...f };
  if (out.range !== 'custom') { delete out.since_ms; delete out.until_ms; }
  if (out.limit === 100) delete out.limit;
  if (!out.offset) delete out.offset;
  location.hash = hashLink('logs', out);
}

/** The API query for filters, relative ranges resolved against now. */
function apiQuery(f, now) {
  const q = {
    key: f.key, route: f.route, source: f.source, model: f.model, request_id: f.request_id, fusion_id: f.fusion_id,
    mode: f.mode, status: /^\d{3}$/.test(f.status) ? f.status : '', errors: f.errors, limit: f.limit, offset: f.offset,
  };
  const r = RANGES.find((x) => x.value === f.range);
  if (r?.ms) q.since_ms = now - r.ms;
  if (f.range === 'custom') { q.since_ms = f.since_ms; q.until_ms = f.until_ms; }
  return query(q);
}

// datetime-local values in the browser's zone <-> epoch ms.
const pad = (n) => String(n).padStart(2, '0');
function toLocalInput(ms) {
  if (!ms) return '';
  const d = new Date(Number(ms));
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}
function fromLocalInput(v) {
  if (!v) return '';
  const t = new Date(v).getTime();
  return Number.isFinite(t) ? String(t) : '';
}

/** Page rows grouped: rows sharing a fusion id follow the first (newest) of them. */
function group(rows) {
  const out = [];
  const byFusion = new Map();
  for (const r of rows) {
    if (r.fusion_id) {
      const g = byFusion.get(r.fusion_id);
      if (g) { g.children.push(r); continue; }
      const ng = { head: r, children: [] };
      byFusion.set(r.fusion_id, ng);
      out.push(ng);
    } else out.push({ head: r, children: [] });
  }
  return out;
}

function tokens(r) {
  if (r.tokens_in == null && r.tokens_out == null) return '—';
  const t = `${fmtTokens(r.tokens_in, r.usage_estimated)} / ${fmtTokens(r.tokens_out, r.usage_estimated)}`;
  return r.usage_estimated ? html`<span title="estimated by the gateway: the upstream reported no usage">${t}</span>` : t;
}

/** The attempt's cost as the API wrote it: '$0.0000054', '~$…' when estimated, 'unknown' without a price. */
function cost(r) {
  if (r.cost_unknown) return html`<span class="status-warn" title="the model has no price: not counted in spend or budgets">unknown</span>`;
  if (r.cost_usd == null) return '—';
  const t = `${r.cost_estimated ? '~' : ''}$${r.cost_usd}`;
  return r.cost_estimated ? html`<span title="estimated: priced on usage the gateway estimated">${t}</span>` : t;
}

function LogRowView({ r, child, group: g, expanded, onToggle, onOpen, now }) {
  const failed = r.error || (r.status != null && r.status >= 400);
  return html`<tr class=${`clickable ${failed ? 'row-error' : ''} ${child ? 'group-child' : ''}`} tabindex="0"
      data-testid=${`log-row-${r.id}`}
      onClick=${() => onOpen(r)} onKeyDown=${(e) => { if (e.key === 'Enter' && e.target === e.currentTarget) onOpen(r); }}>
    <td>${g && g.children.length ? html`<button type="button" class="expander" aria-expanded=${expanded ? 'true' : 'false'}
        aria-label=${`${expanded ? 'Hide' : 'Show'} ${g.children.length} more rows of fusion ${r.fusion_id}`}
        onClick=${(e) => { e.stopPropagation(); onToggle(); }}>${expanded ? '▾' : '▸'}</button>` : null}</td>
    <td class="nowrap" title=${fmtTime(r.at_ms)}>${fmtAgo(r.at_ms, now)}</td>
    <td><${StatusCode} status=${r.status} /></td>
    <td class="trunc" title=${r.key}>${r.key}</td>
    <td class="nowrap"><span class="tag">${r.mode}</span>${r.route ? html` <span class="wrap-any">${r.route}</span>` : null}
      ${g && g.children.length ? html` <${Pill} kind="info" title=${`fusion ${r.fusion_id}`}>fusion ×${g.children.length + 1}<//>` : null}</td>
    <td class="trunc" title=${r.cache_hit ? 'answered from the response cache' : `${r.source}/${r.model}`}>${r.cache_hit ? html`<${Pill} kind="ok">cache hit<//> ` : null}${r.policy ? html`<${Pill} kind="warn" title=${`policies: ${r.policy}`}>policy<//> ` : null}<span>${r.source || '—'}</span><span class="faint"> / </span><span>${r.model || '—'}</span></td>
    <td class="num nowrap">${tokens(r)}</td>
    <td class="num nowrap">${cost(r)}</td>
    <td class="num nowrap">${fmtMs(r.first_byte_ms)}</td>
    <td class="num nowrap">${fmtMs(r.total_ms)}</td>
    <td class="trunc" title=${r.message ?? ''}>${r.error ? html`<code>${r.error}</code> ` : null}<span class="muted">${r.message ?? ''}</span></td>
  </tr>`;
}

function Detail({ row: r, onClose }) {
  const yes = (b) => (b ? 'yes' : 'no');
  return html`<${Drawer} title=${`Request ${r.request_id}`} onClose=${onClose}>
    <div class="row">
      <a class="btn btn-sm" href=${hashLink('logs', { request_id: r.request_id })} onClick=${onClose}>Same request</a>
      ${r.fusion_id ? html`<a class="btn btn-sm" href=${hashLink('logs', { fusion_id: r.fusion_id })} onClick=${onClose}>Same fusion</a>` : null}
      <${Copy} text=${r.request_id} label="Copy request id" />
    </div>
    <${KV} items=${[
      ['Time', `${fmtTime(r.at_ms)} (${r.at_ms})`],
      ['Request id', html`<code>${r.request_id}</code>`],
      ['Status', html`<${StatusCode} status=${r.status} />`],
      ['Error', r.error ? html`<code>${r.error}</code>` : '—'],
      ['Key', r.key],
      ['Route', r.route ?? '—'],
      ['Mode', r.mode],
      ['Source', r.source || '—'],
      ['Model', r.model || '—'],
      ['First byte', fmtMs(r.first_byte_ms)],
      ['Total', fmtMs(r.total_ms)],
      ['Tokens in', r.tokens_in == null ? '—' : `${fmtNum(r.tokens_in)}${r.usage_estimated ? ' (estimated)' : ''}`],
      ['Tokens out', r.tokens_out == null ? '—' : `${fmtNum(r.tokens_out)}${r.usage_estimated ? ' (estimated)' : ''}`],
      ['Tokens cached', r.tokens_cached == null ? '—' : fmtNum(r.tokens_cached)],
      ['Tokens cache write', r.tokens_cache_write == null ? '—' : fmtNum(r.tokens_cache_write)],
      ['Cost', r.cost_unknown ? 'unknown (the model has no price)'
        : r.cost_usd == null ? '—' : `${r.cost_estimated ? '~' : ''}$${r.cost_usd}${r.cost_estimated ? ' (estimated)' : ''}`],
      ['Usage estimated', yes(r.usage_estimated)],
      ['Stream', yes(r.stream)],
      ['Affinity hit', yes(r.affinity_hit)],
      ['Cache hit', yes(r.cache_hit)],
      ['Policies', r.policy ? html`<code data-testid="log-policy">${r.policy}</code>` : '—'],
      ['Fusion id', r.fusion_id ? html`<code>${r.fusion_id}</code>` : '—'],
      ['Row id', String(r.id)],
    ]} />
    <div><h3>Message</h3>${r.message ? html`<pre data-testid="log-message">${r.message}</pre>` : html`<p class="muted">No message.</p>`}</div>
  <//>`;
}

function Filters({ f }) {
  const [draft, setDraft] = useState(f);
  useEffect(() => setDraft(f), [JSON.stringify(f)]);
  const set = (k) => (e) => setDraft({ ...draft, [k]: e.currentTarget.value });
  const apply = (next) => { setDraft(next); writeFilters({ ...next, offset: 0 }); };
  const submit = (e) => { e.preventDefault(); apply(draft); };
  const now = (ms) => draft.since_ms || String(Date.now() - ms);
  return html`<form class="card card-body" onSubmit=${submit} aria-label="Log filters">
    <div class="filters">
      ${TEXT_FILTERS.map(([k, label]) => html`<${Field} key=${k} label=${label}>
        <input type="search" value=${draft[k]} onInput=${set(k)} spellcheck="false" autocomplete="off" /><//>`)}
      <${Field} label="Mode">
        <select value=${draft.mode} onChange=${(e) => apply({ ...draft, mode: e.currentTarget.value })}>
          <option value="">Any</option>${MODES.map((m) => html`<option value=${m}>${m}</option>`)}
        </select><//>
      <${Field} label="Status">
        <input type="text" inputmode="numeric" pattern="[0-9]{3}" placeholder="e.g. 429" value=${draft.status} onInput=${set('status')} /><//>
      <${Field} label="Time range">
        <select value=${draft.range} onChange=${(e) => {
          const range = e.currentTarget.value;
          if (range === 'custom') setDraft({ ...draft, range, since_ms: now(86_400_000), until_ms: '' });
          else apply({ ...draft, range });
        }}>${RANGES.map((r) => html`<option value=${r.value}>${r.label}</option>`)}</select><//>
      ${draft.range === 'custom' ? html`
        <${Field} label="Since"><input type="datetime-local" value=${toLocalInput(draft.since_ms)}
          onChange=${(e) => setDraft({ ...draft, since_ms: fromLocalInput(e.currentTarget.value) })} /><//>
        <${Field} label="Until"><input type="datetime-local" value=${toLocalInput(draft.until_ms)}
          onChange=${(e) => setDraft({ ...draft, until_ms: fromLocalInput(e.currentTarget.value) })} /><//>` : null}
      <div class="field"><span class="field-label" aria-hidden="true"> </span>
        <label class="row"><input type="checkbox" checked=${draft.errors === 'true'}
          onChange=${(e) => apply({ ...draft, errors: e.currentTarget.checked ? 'true' : '' })} /> Errors only</label></div>
    </div>
    <div class="row filters-actions">
      <${Button} type="submit" variant="primary" size="sm">Apply filters<//>
      <${Button} size="sm" onClick=${() => writeFilters({ limit: f.limit })}>Clear filters<//>
    </div>
  </form>`;
}

export default function LogsPage() {
  const params = useHashParams();
  const f = useMemo(() => readFilters(params), [params.toString()]);
  const [page, setPage] = useState({ data: null, error: null, loading: true });
  const [tail, setTail] = useState(false);
  const [open, setOpen] = useState(null);
  const [expanded, setExpanded] = useState(() => new Set());
  const [now, setNow] = useState(Date.now());
  const ctl = useRef(null);
  const inflight = useRef(false);

  const load = async (quiet) => {
    ctl.current?.abort();
    const c = new AbortController();
    ctl.current = c;
    inflight.current = true;
    if (!quiet) setPage((p) => ({ ...p, loading: true }));
    try {
      const t = Date.now();
      const data = await api('GET', `/logs${apiQuery(tail ? { ...f, offset: 0 } : f, t)}`, undefined, { signal: c.signal });
      if (ctl.current === c) { setNow(t); setPage({ data, error: null, loading: false }); }
    } catch (error) {
      if (error?.name === 'AbortError') return;
      if (ctl.current === c) setPage((p) => ({ ...p, error, loading: false }));
    } finally {
      if (ctl.current === c) inflight.current = false;
    }
  };

  useEffect(() => { load(false); }, [params.toString(), tail]);
  useEffect(() => () => ctl.current?.abort(), []);
  useEffect(() => {
    if (!tail) return undefined;
    if (f.offset) writeFilters({ ...f, offset: 0 });
    const t = setInterval(() => { if (!document.hidden && !inflight.current) load(true); }, TAIL_MS);
    return () => clearInterval(t);
  }, [tail, params.toString()]);

  const data = page.data;
  const groups = useMemo(() => group(data?.rows ?? []), [data]);
  const toggle = (id) => setExpanded((s) => { const n = new Set(s); if (n.has(id)) n.delete(id); else n.add(id); return n; });
  const go = (offset) => writeFilters({ ...f, offset: Math.max(0, offset) });
  const filtered = TEXT_FILTERS.some(([k]) => f[k]) || f.mode || f.status || f.errors || f.range;

  let table;
  if (page.error && !data) table = html`<${ErrorBox} error=${page.error} onRetry=${() => load(false)} />`;
  else if (!data) table = html`<${Loading} label="Loading logs…" />`;
  else if (data.rows.length === 0) {
    table = html`<${Empty}>${filtered ? 'No log rows match these filters.' : 'No requests logged yet.'}<//>`;
  } else {
    const first = data.offset + 1, last = data.offset + data.rows.length;
    table = html`
      <div class="pager">
        <span role="status" data-testid="log-total">Rows ${fmtNum(first)}–${fmtNum(last)} of ${fmtNum(data.total)}</span>
        <span class="spacer"></span>
        <label class="row small">Per page
          <select value=${f.limit} onChange=${(e) => writeFilters({ ...f, limit: Number(e.currentTarget.value), offset: 0 })}>
            ${SIZES.map((n) => html`<option value=${n}>${n}</option>`)}</select></label>
        <${Button} size="sm" disabled=${tail || data.offset === 0} onClick=${() => go(0)}>First<//>
        <${Button} size="sm" disabled=${tail || data.offset === 0} onClick=${() => go(data.offset - data.limit)}>Previous<//>
        <span class="small muted">Page ${fmtNum(Math.floor(data.offset / data.limit) + 1)} of ${fmtNum(Math.max(1, Math.ceil(data.total / data.limit)))}</span>
        <${Button} size="sm" disabled=${tail || last >= data.total} onClick=${() => go(data.offset + data.limit)}>Next<//>
      </div>
      ${page.error ? html`<${ErrorBox} error=${page.error} />` : null}
      <div class="table-wrap"><table class="table">
        <caption class="sr-only">Request log rows, newest first</caption>
        <thead><tr>
          <th scope="col"><span class="sr-only">Group</span></th><th scope="col">Time</th><th scope="col">Status</th>
          <th scope="col">Key</th><th scope="col">Mode / route</th><th scope="col">Source / model</th>
          <th scope="col" class="num">Tokens in / out</th><th scope="col" class="num">Cost</th><th scope="col" class="num">First byte</th>
          <th scope="col" class="num">Total</th><th scope="col">Error</th>
        </tr></thead>
        <tbody>${groups.map((g) => {
          const id = g.head.fusion_id ?? g.head.id;
          const isOpen = expanded.has(id);
          return [
            html`<${LogRowView} key=${g.head.id} r=${g.head} group=${g} expanded=${isOpen} onToggle=${() => toggle(id)} onOpen=${setOpen} now=${now} />`,
            ...(isOpen ? g.children.map((c) => html`<${LogRowView} key=${c.id} r=${c} child onOpen=${setOpen} now=${now} />`) : []),
          ];
        })}</tbody>
      </table></div>`;
  }

  return html`<div class="stack">
    <${PageHeader} title="Logs">
      ${tail ? html`<span class="row small"><span class="live-dot" aria-hidden="true"></span>live</span>` : null}
      ${page.loading && data ? html`<span class="spinner" role="status" aria-label="Refreshing"></span>` : null}
      <${Toggle} label="Live tail" checked=${tail} onChange=${setTail} />
      <${Button} size="sm" onClick=${() => load(false)}>Refresh<//>
    <//>
    <${Filters} f=${f} />
    ${table}
    ${open ? html`<${Detail} row=${open} onClose=${() => setOpen(null)} />` : null}
  </div>`;
}
