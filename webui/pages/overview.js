// Overview: traffic charts over a range, top sources and models, slots not healthy right now,
// and today's spend (with a warning when models without a price serve traffic).
import { html, useState, useEffect, useRef, useMemo } from '../lib.js';
import uPlot from '../vendor/uPlot.esm.js';
import {
  useApi, Loading, Empty, ErrorBox, Card, PageHeader, Segmented, HealthTag, Table, Button,
  fmtMs, fmtTokens, fmtNum, fmtPct, fmtTime, hashLink, useNow, LOCALE,
  fitWidth, useTheme,
} from '../ui.js';
import { may } from '../access.js';

const RANGES = [
  { value: '1h', label: '1 h', ms: 3_600_000 },
  { value: '24h', label: '24 h', ms: 86_400_000 },
  { value: '7d', label: '7 d', ms: 7 * 86_400_000 },
];
const REFRESH_MS = 10_000;
const RANGE_KEY = 'switchyard.overview_range';

const css = (name) => getComputedStyle(document.documentElement).getPropertyValue(name).trim();

/** A uPlot time chart sized from its container; re-created when the theme changes. */
const INT_INCRS = [1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1e3, 2e3, 2.5e3, 5e3, 1e4, 2e4, 2.5e4, 5e4, 1e5, 2e5, 2.5e5, 5e5,
  1e6, 2e6, 5e6, 1e7, 2e7, 5e7, 1e8, 1e9, 1e10];

/** Indices of points with no neighbour (a lone bucket draws no line, so it gets a dot). */
function lonePoints(u, si) {
  const d = u.data[si];
  const out = [];
  for (let i = 0; i < d.length; i++) if (d[i] != null && d[i - 1] == null && d[i + 1] == null) out.push(i);
  return out;
}

function Chart({ title, series, x, ys, fmt, integer }) {
  const box = useRef(null);
  const plot = useRef(null);
  const theme = useTheme();
  const data = [x, ...ys];
  const dataRef = useRef(data);
  dataRef.current = data;

  useEffect(() => {
    const el = box.current;
    if (!el) return undefined;
    const axis = css('--fg-muted'), grid = css('--border');
    const width = Math.max(200, el.clientWidth);
    const opts = {
      width, height: 200,
      cursor: { drag: { x: false, y: false } },
      legend: { live: true },
      scales: { x: { time: true }, y: { range: (u, min, max) => [0, max > 0 ? max * 1.1 : 1] } },
      axes: [
        { stroke: axis, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } },
        { stroke: axis, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 }, size: 66,
          ...(integer ? { incrs: INT_INCRS } : {}), values: (u, vals) => vals.map((v) => fmt(v)) },
      ],
      series: [
        { value: (u, v) => (v == null ? '—' : new Date(v * 1000).toLocaleString(LOCALE)) },
        ...series.map((s) => ({
          label: s.label, stroke: css(s.color), width: 1.5, fill: s.fill ? css(s.color) + '22' : undefined,
          points: { show: true, size: 5, filter: lonePoints }, spanGaps: false, value: (u, v) => (v == null ? '—' : fmt(v)),
        })),
      ],
    };
    const u = new uPlot(opts, dataRef.current, el);
    plot.current = u;
    const unfit = fitWidth(el, u, 200);
    return () => {
      unfit();
      u.destroy();
      plot.current = null;
    };
  }, [theme, series.length]);

  useEffect(() => { plot.current?.setData(data); }, [x, ...ys]);

  return html`<${Card} title=${title} class="chart">
    <div class="chart-box" ref=${box} role="img" aria-label=${`${title} chart`}></div>
  <//>`;
}

/** Rows of GET /stats summed per `by` (source or model), busiest first. */
function aggregate(rows, by) {
  const m = new Map();
  for (const r of rows) {
    const k = r[by];
    const a = m.get(k) ?? { name: k, requests: 0, errors: 0, tokens_in: 0, tokens_out: 0, fb_sum: 0, fb_n: 0, total_sum: 0, total_n: 0 };
    a.requests += r.requests; a.errors += r.errors; a.tokens_in += r.tokens_in; a.tokens_out += r.tokens_out;
    if (r.avg_first_byte_ms != null) { a.fb_sum += r.avg_first_byte_ms * r.requests; a.fb_n += r.requests; }
    if (r.avg_total_ms != null) { a.total_sum += r.avg_total_ms * r.requests; a.total_n += r.requests; }
    m.set(k, a);
  }
  return [...m.values()]
    .map((a) => ({ ...a, avg_first_byte_ms: a.fb_n ? a.fb_sum / a.fb_n : null, avg_total_ms: a.total_n ? a.total_sum / a.total_n : null }))
    .sort((a, b) => b.requests - a.requests || String(a.name).localeCompare(String(b.name)));
}

function topColumns(kind, since) {
  return [
    { key: 'name', label: kind, class: 'name', render: (r) => html`<a href=${hashLink('logs', { [kind.toLowerCase()]: r.name, since_ms: since })} class="wrap-any">${r.name || '—'}</a>` },
    { key: 'requests', label: 'Requests', num: true, render: (r) => fmtNum(r.requests) },
    { key: 'errors', label: 'Errors', num: true, render: (r) => html`<span class=${r.errors ? 'status-bad' : ''}>${fmtNum(r.errors)}</span> <span class="faint small">${r.requests ? fmtPct(r.errors / r.requests) : ''}</span>` },
    { key: 'tokens', label: 'Tokens in/out', num: true, render: (r) => `${fmtTokens(r.tokens_in)} / ${fmtTokens(r.tokens_out)}` },
    { key: 'lat', label: html`<span title="average time to first byte / average total time">Latency</span>`, num: true, render: (r) => html`<span title="first byte / total">${fmtMs(r.avg_first_byte_ms)} / ${fmtMs(r.avg_total_ms)}</span>` },
  ];
}

function Stat({ label, value, sub }) {
  return html`<div class="stat"><div class="stat-label">${label}</div><div class="stat-value">${value}</div>${sub ? html`<div class="stat-sub">${sub}</div>` : null}</div>`;
}

function slotTitle(s) {
  const parts = [s.state];
  if (s.failures) parts.push(`failures: ${s.failures}`);
  if (s.window_start_ms != null) parts.push(`window from ${fmtTime(s.window_start_ms)}`);
  if (s.probe_from_ms != null) parts.push(`probe allowed from ${fmtTime(s.probe_from_ms)}`);
  if (s.recovers_at_ms != null) parts.push(`fully recovers at ${fmtTime(s.recovers_at_ms)}`);
  return parts.join('\n');
}

function inFor(ms) {
  if (ms == null) return '—';
  if (ms <= 0) return 'now';
  const s = Math.ceil(ms / 1000);
  return s < 60 ? `in ${s}s` : s < 3600 ? `in ${Math.floor(s / 60)}m ${String(s % 60).padStart(2, '0')}s` : `in ${Math.round(s / 3600)}h`;
}

/** Spend since 00:00 UTC (one /spend call a tick) and, from /prices once, unpriced models serving. */
function SpendToday({ tick }) {
  const today = Math.floor(tick / 86_400_000) * 86_400_000;
  const spend = useApi(`/spend?by=day&since_ms=${today}`, [tick]);
  const prices = useApi('/prices');
  const serving = prices.data?.unpriced_serving ?? [];
  const requests = (spend.data?.rows ?? []).reduce((n, r) => n + r.requests, 0);
  let body;
  if (spend.error && !spend.data) body = html`<${ErrorBox} error=${spend.error} onRetry=${spend.reload} />`;
  else if (!spend.data) body = html`<${Loading} />`;
  else {
    body = html`<div class="row" data-testid="spend-today">
      <span class="stat-value">$${spend.data.total_usd}</span>
      <span class="stat-sub">since 00:00 UTC · ${fmtNum(requests)} requests${spend.data.unpriced ? ` · ${fmtNum(spend.data.unpriced)} unpriced` : ''}</span>
    </div>`;
  }
  return html`<${Card} title="Spend today" actions=${html`<a href="#/spend" class="small">Spend</a>`}>
    <div class="stack">
      ${body}
      ${serving.length ? html`<div class="state warnbox" role="alert">
        <span><strong>${serving.length === 1 ? '1 unpriced model' : `${serving.length} unpriced models`} serving traffic</strong>:
          their cost is counted nowhere. <a href="#/spend">${may('admin') ? 'Set a price on the Spend page' : 'See the Spend page'}</a>.</span>
      </div>` : null}
    </div>
  <//>`;
}

function CoolingNow() {
  const health = useApi('/health', [], { refreshMs: REFRESH_MS });
  const fetched = useRef({ at: Date.now(), data: null });
  if (health.data !== fetched.current.data) fetched.current = { at: Date.now(), data: health.data };
  const now = useNow(1000);
  const slots = (health.data?.slots ?? []).filter((s) => s.state !== 'healthy');
  // The scheduler's clock may differ from this browser's: count from its now_ms.
  const serverNow = health.data ? health.data.now_ms + (now - fetched.current.at) : 0;
  let body;
  if (health.error && !health.data) body = html`<${ErrorBox} error=${health.error} onRetry=${health.reload} />`;
  else if (!health.data) body = html`<${Loading} />`;
  else if (slots.length === 0) body = html`<${Empty}>Every slot is healthy.<//>`;
  else {
    body = html`<${Table} caption="Slots not healthy" rowKey=${(s) => `${s.source}\u0000${s.model}`} rows=${slots} columns=${[
      { key: 'source', label: 'Source', class: 'name' },
      { key: 'model', label: 'Model', class: 'name' },
      { key: 'state', label: 'State', render: (s) => html`<${HealthTag} state=${s.state} title=${slotTitle(s)} />` },
      { key: 'failures', label: 'Failures', num: true },
      { key: 'probe', label: 'Probe from', num: true, render: (s) => (s.probe_from_ms == null ? '—' : inFor(s.probe_from_ms - serverNow)) },
      { key: 'recovers', label: 'Recovers', num: true, render: (s) => html`<span title=${s.recovers_at_ms != null ? fmtTime(s.recovers_at_ms) : ''}>${s.recovers_at_ms == null ? '—' : inFor(s.recovers_at_ms - serverNow)}</span>` },
    ]} />`;
  }
  return html`<${Card} title=${`Cooling now${slots.length ? ` (${slots.length})` : ''}`}
    actions=${html`<a href="#/operations" class="small">Operations</a>`}>${health.error && health.data ? html`<${ErrorBox} error=${health.error} />` : null}${body}<//>`;
}

export default function OverviewPage() {
  const [range, setRange] = useState(() => {
    try { return localStorage.getItem(RANGE_KEY) ?? '1h'; } catch { return '1h'; }
  });
  const [tick, setTick] = useState(() => Date.now());
  useEffect(() => {
    const t = setInterval(() => { if (!document.hidden) setTick(Date.now()); }, REFRESH_MS);
    return () => clearInterval(t);
  }, []);
  const r = RANGES.find((x) => x.value === range) ?? RANGES[0];
  // Round to the second so one tick is one URL.
  const until = Math.ceil(tick / 1000) * 1000;
  const since = until - r.ms;
  const series = useApi(`/stats/series?since_ms=${since}&until_ms=${until}&buckets=60`);
  const stats = useApi(`/stats?since_ms=${since}`);

  const chart = useMemo(() => {
    const b = series.data?.buckets ?? [];
    const col = (f) => b.map(f);
    return {
      x: col((p) => p.at_ms / 1000),
      requests: col((p) => p.requests), errors: col((p) => p.errors),
      tin: col((p) => p.tokens_in), tout: col((p) => p.tokens_out),
      p50: col((p) => p.p50_ms ?? null), p95: col((p) => p.p95_ms ?? null),
    };
  }, [series.data]);

  const rows = stats.data?.sources ?? [];
  const bySource = useMemo(() => aggregate(rows, 'source'), [stats.data]);
  const byModel = useMemo(() => aggregate(rows, 'model'), [stats.data]);
  const totals = useMemo(() => bySource.reduce((t, a) => ({
    requests: t.requests + a.requests, errors: t.errors + a.errors,
    tokens_in: t.tokens_in + a.tokens_in, tokens_out: t.tokens_out + a.tokens_out,
    lat: t.lat + (a.avg_total_ms ?? 0) * a.total_n, latn: t.latn + a.total_n,
  }), { requests: 0, errors: 0, tokens_in: 0, tokens_out: 0, lat: 0, latn: 0 }), [bySource]);
  const p95max = chart.p95.reduce((m, v) => (v != null && v > m ? v : m), null);

  const firstLoad = (series.loading && !series.data) || (stats.loading && !stats.data);
  const noTraffic = stats.data && rows.length === 0 && !(series.data?.buckets ?? []).some((p) => p.requests > 0);

  const charts = series.error && !series.data
    ? html`<${ErrorBox} title="Charts unavailable" error=${series.error} onRetry=${series.reload} />`
    : series.data ? html`<div class="grid grid-3">
        <${Chart} title="Requests" integer x=${chart.x} ys=${[chart.requests, chart.errors]} fmt=${(v) => fmtTokens(Math.round(v))}
          series=${[{ label: 'Requests', color: '--accent', fill: true }, { label: 'Errors', color: '--bad' }]} />
        <${Chart} title="Tokens" integer x=${chart.x} ys=${[chart.tin, chart.tout]} fmt=${(v) => fmtTokens(Math.round(v))}
          series=${[{ label: 'In', color: '--accent', fill: true }, { label: 'Out', color: '--ok', fill: true }]} />
        <${Chart} title="Latency" x=${chart.x} ys=${[chart.p50, chart.p95]} fmt=${fmtMs}
          series=${[{ label: 'p50', color: '--accent' }, { label: 'p95', color: '--warn' }]} />
      </div>` : html`<${Loading} />`;

  return html`<div class="stack">
    <${PageHeader} title="Overview">
      ${(series.loading || stats.loading) && !firstLoad ? html`<span class="spinner" role="status" aria-label="Refreshing"></span>` : null}
      <${Segmented} label="Time range" options=${RANGES} value=${range}
        onChange=${(v) => { setRange(v); setTick(Date.now()); try { localStorage.setItem(RANGE_KEY, v); } catch { /* ignore */ } }} />
      <${Button} size="sm" onClick=${() => setTick(Date.now())}>Refresh<//>
    <//>
    <${SpendToday} tick=${tick} />
    ${stats.error && !stats.data ? html`<${ErrorBox} error=${stats.error} onRetry=${stats.reload} />` : null}
    ${firstLoad ? html`<${Loading} />` : noTraffic ? html`<${Empty}>
        No requests in the last ${r.label}. Send one from the <a href="#/playground">Playground</a> or point a client at <code>/v1/chat/completions</code>.
      <//>` : html`
      <div class="grid grid-4">
        <${Stat} label="Requests" value=${fmtNum(totals.requests)} sub=${`last ${r.label}`} />
        <${Stat} label="Errors" value=${fmtNum(totals.errors)} sub=${totals.requests ? `${fmtPct(totals.errors / totals.requests)} of attempts` : ''} />
        <${Stat} label="Tokens in / out" value=${`${fmtTokens(totals.tokens_in)} / ${fmtTokens(totals.tokens_out)}`} />
        <${Stat} label="Avg latency" value=${fmtMs(totals.latn ? totals.lat / totals.latn : null)} sub=${p95max != null ? `worst p95 ${fmtMs(p95max)}` : ''} />
      </div>
      ${charts}
      <div class="grid grid-2">
        <${Card} title="Top sources"><${Table} caption="Top sources" rows=${bySource.slice(0, 10)} rowKey=${(a) => a.name} columns=${topColumns('Source', since)} empty="No requests." /><//>
        <${Card} title="Top models"><${Table} caption="Top models" rows=${byModel.slice(0, 10)} rowKey=${(a) => a.name} columns=${topColumns('Model', since)} empty="No requests." /><//>
      </div>`}
    <${CoolingNow} />
  </div>`;
}
