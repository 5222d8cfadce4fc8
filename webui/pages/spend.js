// Spend: what traffic cost over a range (GET /spend by key, source, model or day, a chart per
// day), where each budget stands (/budgets), unpriced models serving, and the prices (/prices).
import { html, useState, useEffect, useRef, useMemo } from '../lib.js';
import uPlot from '../vendor/uPlot.esm.js';
import { api, query } from '../api.js';
import { may } from '../access.js';
import {
  useApi, Loading, ErrorBox, Card, PageHeader, Segmented, Table, Button, Pill, toast,
  fmtNum, fmtTokens, fmtTime, fmtAgo,
  fitWidth, useTheme,
} from '../ui.js';
import {
  TextInput, SelectInput, FormError, ConfirmAction, useSubmit, usd, BudgetBar,
} from './forms.js';

const DAY = 86_400_000;
const RANGES = [
  { value: '24h', label: '24 h', ms: DAY },
  { value: '7d', label: '7 d', ms: 7 * DAY },
  { value: '30d', label: '30 d', ms: 30 * DAY },
];
const BY = [
  { value: 'key', label: 'Key' },
  { value: 'source', label: 'Source' },
  { value: 'model', label: 'Model' },
  { value: 'day', label: 'Day' },
];
const RANGE_KEY = 'switchyard.spend_range';

const css = (name) => getComputedStyle(document.documentElement).getPropertyValue(name).trim();

/** A chart tick (a plain number, never money arithmetic): '$0.0000054', no exponent, '.' as the API writes it. */
const tick = (v) => (v === 0 ? '$0' : `$${v.toLocaleString('en', { maximumSignificantDigits: 3 })}`);

/** Every UTC day of [since, until) with its row of GET /spend?by=day (zero when none). */
function daySeries(rows, since, until) {
  const byName = new Map((rows ?? []).map((r) => [r.name, r]));
  const days = [];
  for (let t = since - (since % DAY); t < until; t += DAY) {
    const name = new Date(t).toISOString().slice(0, 10);
    days.push({ t, row: byName.get(name) ?? { name, cost_usd: '0', requests: 0 } });
  }
  return days;
}

/** SpendChart({days}) → uPlot bars of cost per UTC day; the legend shows the API's own strings. */
function SpendChart({ days }) {
  const box = useRef(null);
  const plot = useRef(null);
  const theme = useTheme();
  const daysRef = useRef(days);
  daysRef.current = days;
  // Numbers for drawing only (no bar for a day without spend); the text shown comes from the strings.
  const data = (list) => [list.map((d) => d.t / 1000), list.map((d) => Number(d.row.cost_usd) || null)];

  useEffect(() => {
    const el = box.current;
    if (!el) return undefined;
    const axis = css('--fg-muted'), grid = css('--border');
    const opts = {
      width: Math.max(200, el.clientWidth), height: 200,
      // Days are UTC days: the axis says so too.
      tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), 'UTC'),
      cursor: { drag: { x: false, y: false } },
      scales: {
        x: { time: true, range: (u, min, max) => [min - DAY / 2000, max + DAY / 2000] },
        y: { range: (u, min, max) => [0, max > 0 ? max * 1.1 : 1] },
      },
      axes: [
        { stroke: axis, grid: { show: false }, ticks: { stroke: grid, width: 1 } },
        { stroke: axis, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 }, size: 84, values: (u, vals) => vals.map(tick) },
      ],
      series: [
        { label: 'Day (UTC)', value: (u, v, si, i) => (i == null ? '—' : daysRef.current[i]?.row.name ?? '—') },
        {
          label: 'Spend', stroke: css('--accent'), fill: `${css('--accent')}88`, width: 1,
          paths: uPlot.paths.bars({ size: [0.7, 48] }), points: { show: false },
          value: (u, v, si, i) => (i == null ? '—' : usd(daysRef.current[i]?.row.cost_usd)),
        },
      ],
    };
    const u = new uPlot(opts, data(daysRef.current), el);
    plot.current = u;
    const unfit = fitWidth(el, u, 200);
    return () => {
      unfit();
      u.destroy();
      plot.current = null;
    };
  }, [theme]);

  useEffect(() => { plot.current?.setData(data(days)); }, [days]);

  return html`<div class="chart-box" ref=${box} role="img" aria-label="Spend per day chart"></div>`;
}

function Stat({ label, value, sub, ...rest }) {
  return html`<div class="stat" ...${rest}><div class="stat-label">${label}</div><div class="stat-value wrap-any">${value}</div>${sub ? html`<div class="stat-sub">${sub}</div>` : null}</div>`;
}

function spendColumns(by) {
  const label = BY.find((b) => b.value === by)?.label ?? 'Name';
  return [
    { key: 'name', label, class: 'name' },
    { key: 'cost', label: 'Cost', num: true, render: (r) => usd(r.cost_usd) },
    { key: 'requests', label: 'Requests', num: true, render: (r) => fmtNum(r.requests) },
    { key: 'tokens', label: 'Tokens in/out', num: true, render: (r) => `${fmtTokens(r.tokens_in)} / ${fmtTokens(r.tokens_out)}` },
    { key: 'estimated', label: html`<span title="attempts whose cost is (partly) an estimate: the upstream reported no usage">Estimated</span>`, num: true, render: (r) => fmtNum(r.estimated) },
    { key: 'unpriced', label: html`<span title="attempts of models without a price: not in the cost">Unpriced</span>`, num: true,
      render: (r) => html`<span class=${r.unpriced ? 'status-warn' : ''}>${fmtNum(r.unpriced)}</span>` },
  ];
}

// ---------------------------------------------------------------------------------------------
// Budgets

function Budgets({ budgets }) {
  const d = budgets.data;
  const rows = d ? [
    ...d.keys.map((b) => ({ ...b, id: `key\u0000${b.key}`, kind: 'key', name: b.key })),
    ...d.groups.map((b) => ({ ...b, id: `group\u0000${b.group}`, kind: 'group', name: b.group })),
  ] : [];
  let body;
  if (budgets.error && !d) body = html`<${ErrorBox} error=${budgets.error} onRetry=${budgets.reload} />`;
  else if (!d) body = html`<${Loading} />`;
  else {
    body = html`<${Table} caption="Budgets" rows=${rows} rowKey=${(b) => b.id}
        empty=${html`No budgets. Set a key's on the <a href="#/keys">Keys</a> page; group budgets live in config.yaml (<code>budgets:</code>).`}
        columns=${[
          { key: 'name', label: 'Budget of', class: 'name', render: (b) => html`<${Pill} kind=${b.kind === 'key' ? 'info' : 'off'}>${b.kind}<//> <span>${b.name}</span>` },
          { key: 'group', label: 'Group', render: (b) => (b.kind === 'key' ? b.group ?? 'default' : '—') },
          { key: 'use', label: 'Spent', render: (b) => html`<${BudgetBar} budget=${b} label=${`Budget use of ${b.kind} ${b.name}`} />` },
          { key: 'resets', label: 'Resets', render: (b) => (b.resets_at_ms == null ? 'never'
            : html`<span title=${fmtTime(b.resets_at_ms)}>${fmtAgo(b.resets_at_ms)}</span>`) },
        ]} />`;
  }
  return html`<${Card} title="Budgets" actions=${html`<a href="#/keys" class="small">Keys</a>`}>
    ${budgets.error && d ? html`<${ErrorBox} error=${budgets.error} />` : null}${body}<//>`;
}

// ---------------------------------------------------------------------------------------------
// Prices

/** The runtime override a model row is priced by: the most specific match, as the gateway picks it. */
function overrideOf(m, overrides) {
  const rank = (o) => (o.source ? 2 : 0) + (o.model !== '*' ? 1 : 0);
  return (overrides ?? [])
    .filter((o) => (!o.source || o.source === m.source) && (o.model === m.model || o.model === '*'))
    .reduce((best, o) => (!best || rank(o) >= rank(best) ? o : best), null);
}

function Origin({ origin: o }) {
  if (o?.from === 'table') {
    return html`<span title=${`price table: ${o.provider}/${o.model}, ${o.status}${o.checked ? `, checked ${o.checked}` : ''}`}>
      <${Pill} kind="off">table<//> <span class="small">${o.provider}${o.checked ? html` <span class="muted">· ${o.checked}</span>` : null}</span>
      ${o.status && o.status !== 'active' ? html` <${Pill} kind="warn">${o.status}<//>` : null}</span>`;
  }
  if (o?.from === 'config') return html`<${Pill} kind="ok" title="prices: in config.yaml">config<//>`;
  if (o?.from === 'runtime') return html`<${Pill} kind="info" title="set at run time (this page or the admin API)">runtime<//>`;
  return '—';
}

function extras(p) {
  const out = [];
  if (p.cache_write) out.push(`cache write ${usd(p.cache_write)}`);
  for (const t of p.tiers ?? []) out.push(`above ${fmtTokens(t.above_input_tokens)} in: ${usd(t.input)} / ${usd(t.output)}`);
  for (const [k, v] of Object.entries(p.images ?? {})) out.push(`${k} ${usd(v)}`);
  return out.length ? html`<span class="small">${out.map((s, i) => html`<span key=${i}>${i ? ' · ' : ''}${s}</span>`)}</span>` : '—';
}

function PriceForm({ sources, models, onSaved }) {
  const [f, setF] = useState({ source: '', model: '', input: '', output: '', cached_input: '' });
  const { busy, error, submit } = useSubmit();
  const set = (k) => (v) => setF({ ...f, [k]: v });
  const save = async (e) => {
    e.preventDefault();
    const r = await submit(async () => {
      const body = {};
      for (const [k, v] of Object.entries(f)) if (v.trim() !== '') body[k] = v.trim();
      if (!body.model) throw new Error('Model: required (as the source names it, or * for every model of the source)');
      return api('PUT', '/prices', body);
    });
    if (r) {
      toast(`Price of ${f.model.trim()}${f.source ? ` at ${f.source}` : ''} set`, 'ok');
      setF({ ...f, input: '', output: '', cached_input: '' });
      onSaved();
    }
  };
  return html`<form class="stack" onSubmit=${save} aria-label="Set a run-time price" novalidate>
    <h3>Set a run-time price</h3>
    <div class="form-grid">
      <${SelectInput} label="Source" value=${f.source} onValue=${set('source')}
        options=${[{ value: '', label: 'every source' }, ...sources.map((s) => ({ value: s, label: s }))]} />
      <${TextInput} label="Model" value=${f.model} onValue=${set('model')} list="price-models" autocomplete="off" required />
      <datalist id="price-models">${models.map((m) => html`<option key=${m} value=${m} />`)}</datalist>
      <${TextInput} label="Input" value=${f.input} onValue=${set('input')} inputmode="decimal" autocomplete="off" placeholder="0.15" />
      <${TextInput} label="Output" value=${f.output} onValue=${set('output')} inputmode="decimal" autocomplete="off" placeholder="0.60" />
      <${TextInput} label="Cached input" value=${f.cached_input} onValue=${set('cached_input')} inputmode="decimal" autocomplete="off" placeholder="optional" />
    </div>
    <div class="row"><${Button} type="submit" variant="primary" busy=${busy}>Set price<//>
      <span class="small muted">USD per 1M tokens. Replaces a run-time price of the same source and model; kept in the runtime file.</span></div>
    <${FormError} error=${error} />
  </form>`;
}

function Prices({ prices }) {
  const [removing, setRemoving] = useState(null);
  // Setting and removing prices is the admin's.
  const admin = may('admin');
  const d = prices.data;
  if (prices.error && !d) return html`<${Card} title="Prices"><${ErrorBox} error=${prices.error} onRetry=${prices.reload} /><//>`;
  if (!d) return html`<${Card} title="Prices"><${Loading} /><//>`;
  const sources = [...new Set([...d.models, ...d.unpriced].map((m) => m.source))];
  const models = [...new Set([...d.models, ...d.unpriced].map((m) => m.model))];
  const columns = [
    { key: 'source', label: 'Source', class: 'name' },
    { key: 'model', label: 'Model', class: 'name', render: (m) => html`<span>${m.model}</span>${m.upstream && m.upstream !== m.model
      ? html` <span class="muted small" title="the name sent upstream">→ ${m.upstream}</span>` : null}` },
    { key: 'input', label: 'Input /1M', num: true, render: (m) => usd(m.price.input) },
    { key: 'cached', label: 'Cached /1M', num: true, render: (m) => usd(m.price.cached_input) },
    { key: 'output', label: 'Output /1M', num: true, render: (m) => usd(m.price.output) },
    { key: 'more', label: 'Other', render: (m) => extras(m.price) },
    { key: 'origin', label: 'Origin', render: (m) => html`<${Origin} origin=${m.origin} />` },
    admin && { key: 'actions', label: 'Actions', class: 'actions', render: (m) => {
      const o = m.origin?.from === 'runtime' ? overrideOf(m, d.overrides) : null;
      return o ? html`<${Button} size="sm" variant="danger" aria-label=${`Remove run-time price of ${m.model} at ${m.source}`}
        onClick=${() => setRemoving(o)}>Remove<//>` : null;
    } },
  ].filter(Boolean);
  const r = removing;
  return html`<${Card} title="Prices" actions=${html`<span class="small muted">
      table of ${d.table?.updated ?? '?'} (${fmtNum(d.table?.models)} models${d.table?.file ? `, ${d.table.file}` : ''})</span>`}>
    <div class="stack">
      ${prices.error ? html`<${ErrorBox} error=${prices.error} />` : null}
      <${Table} caption="Model prices" rows=${d.models} rowKey=${(m) => `${m.source}\u0000${m.model}`} columns=${columns}
        empty="No model has a price." />
      ${d.unpriced.length ? html`<p class="small muted" data-testid="unpriced-configured">Configured without a price (not charged):
        ${d.unpriced.map((m, i) => html`<span key=${i}>${i ? ', ' : ' '}<span class="mono wrap-any">${m.source}/${m.model}</span></span>`)}</p>` : null}
      ${admin ? html`<${PriceForm} sources=${sources} models=${models} onSaved=${prices.reload} />` : null}
    </div>
    ${r ? html`<${ConfirmAction} danger title="Remove run-time price" confirmLabel="Remove price"
      message=${`Remove the run-time price of ${r.model}${r.source ? ` at ${r.source}` : ' (every source)'}? config.yaml's or the price table's applies again.`}
      action=${() => api('DELETE', `/prices${query({ model: r.model, source: r.source })}`)}
      onDone=${() => { toast('Price removed', 'ok'); setRemoving(null); prices.reload(); }} onCancel=${() => setRemoving(null)} />` : null}
  <//>`;
}

function UnpricedServing({ list }) {
  if (!list?.length) return null;
  return html`<div class="state warnbox" role="alert" data-testid="unpriced-serving">
    <strong>Unpriced models serving traffic</strong>
    <span>These served requests in the last 30 days without a price: their cost is in no total and no budget.${may('admin') ? ' Set a price below.' : ''}</span>
    <ul>${list.map((m, i) => html`<li key=${i} class="wrap-any"><span class="mono">${m.source}/${m.model}</span>
      <span class="muted"> · ${fmtNum(m.attempts)} attempt${m.attempts === 1 ? '' : 's'}, last <span title=${fmtTime(m.last_at_ms)}>${fmtAgo(m.last_at_ms)}</span></span></li>`)}</ul>
  </div>`;
}

// ---------------------------------------------------------------------------------------------

export default function SpendPage() {
  const [range, setRange] = useState(() => {
    try { return localStorage.getItem(RANGE_KEY) ?? '30d'; } catch { return '30d'; }
  });
  const [by, setBy] = useState('key');
  const [tickAt, setTick] = useState(() => Date.now());
  const r = RANGES.find((x) => x.value === range) ?? RANGES[2];
  const until = Math.ceil(tickAt / 1000) * 1000;
  const since = until - r.ms;
  const daily = useApi(`/spend${query({ by: 'day', since_ms: since, until_ms: until })}`);
  const grouped = useApi(by === 'day' ? null : `/spend${query({ by, since_ms: since, until_ms: until })}`);
  const prices = useApi('/prices');
  const budgets = useApi('/budgets');
  const shown = by === 'day' ? daily : grouped;
  const days = useMemo(() => daySeries(daily.data?.rows, since, until), [daily.data]);
  const sum = (f) => (daily.data?.rows ?? []).reduce((n, x) => n + f(x), 0);
  const refresh = () => { setTick(Date.now()); prices.reload(); budgets.reload(); };

  // Rows of another grouping (still loading the new one) are not shown under this one's name.
  const current = shown.data?.by === by ? shown.data : null;
  let table;
  if (!current) table = shown.error ? html`<${ErrorBox} error=${shown.error} onRetry=${shown.reload} />` : html`<${Loading} />`;
  else {
    table = html`${shown.error ? html`<${ErrorBox} error=${shown.error} />` : null}
      <${Table} caption=${`Spend by ${by}`} rows=${current.rows} rowKey=${(x) => x.name}
        columns=${spendColumns(by)} empty=${`No requests in the last ${r.label}.`} />`;
  }

  return html`<div class="stack">
    <${PageHeader} title="Spend">
      ${(daily.loading || shown.loading) && daily.data ? html`<span class="spinner" role="status" aria-label="Refreshing"></span>` : null}
      <${Segmented} label="Time range" options=${RANGES} value=${range}
        onChange=${(v) => { setRange(v); setTick(Date.now()); try { localStorage.setItem(RANGE_KEY, v); } catch { /* ignore */ } }} />
      <${Button} size="sm" onClick=${refresh}>Refresh<//>
    <//>
    ${prices.data?.costs === false ? html`<p class="small muted" role="note">Costs are off (<code>pricing.costs: false</code>):
      nothing is charged and budgets are not enforced.</p>` : null}
    <${UnpricedServing} list=${prices.data?.unpriced_serving} />
    ${daily.error && !daily.data ? html`<${ErrorBox} error=${daily.error} onRetry=${daily.reload} />` : null}
    ${daily.data ? html`<div class="grid grid-4">
      <${Stat} label="Total" value=${usd(daily.data.total_usd)} sub=${`last ${r.label}`} data-testid="spend-total" />
      <${Stat} label="Requests" value=${fmtNum(sum((x) => x.requests))} />
      <${Stat} label="Estimated" value=${fmtNum(sum((x) => x.estimated))} sub="attempts priced on estimated usage" />
      <${Stat} label="Unpriced" value=${fmtNum(daily.data.unpriced)} sub="attempts not in the total" />
    </div>
    <${Card} title="Spend per day" class="chart"><${SpendChart} days=${days} /><//>` : daily.error ? null : html`<${Loading} />`}
    <${Card} title=${`Spend by ${by}`} actions=${html`<${Segmented} label="Group by" options=${BY} value=${by} onChange=${setBy} />`}>
      ${table}
    <//>
    <${Budgets} budgets=${budgets} />
    <${Prices} prices=${prices} />
  </div>`;
}
