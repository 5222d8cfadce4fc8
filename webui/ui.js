// Shared components and helpers for every page. Text is always rendered through htm/Preact
// (escaped); nothing here uses innerHTML.
import { html, h, useState, useEffect, useRef, useCallback } from './lib.js';
import { api } from './api.js';

// ---------------------------------------------------------------------------------------------
// Data loading

/** useApi(path, deps=[], {refreshMs}) → {data, error, loading, reload}: GET an admin path; keeps old data while reloading; path null/'' = skip. */
export function useApi(path, deps = [], { refreshMs } = {}) {
  const [state, setState] = useState({ data: undefined, error: null, loading: !!path });
  const seq = useRef(0);
  const live = useRef(true);
  // The call in flight: a newer load aborts it, and a timer tick never piles on a slow one.
  const inFlight = useRef(null);
  const load = useCallback(async (options) => {
    if (!path) { setState({ data: undefined, error: null, loading: false }); return; }
    if (options?.tick && inFlight.current) return;
    inFlight.current?.abort();
    const ctl = new AbortController();
    inFlight.current = ctl;
    const mine = ++seq.current;
    setState((s) => ({ ...s, loading: true }));
    try {
      const data = await api('GET', path, undefined, { signal: ctl.signal });
      if (live.current && mine === seq.current) setState({ data, error: null, loading: false });
    } catch (error) {
      if (error?.name === 'AbortError') return;
      if (live.current && mine === seq.current) setState((s) => ({ data: s.data, error, loading: false }));
    } finally {
      if (inFlight.current === ctl) inFlight.current = null;
    }
  }, [path, ...deps]);
  useEffect(() => { live.current = true; return () => { live.current = false; inFlight.current?.abort(); }; }, []);
  useEffect(() => {
    load();
    if (!refreshMs) return undefined;
    const t = setInterval(() => { if (!document.hidden) load({ tick: true }); }, refreshMs);
    return () => clearInterval(t);
  }, [load, refreshMs]);
  return { ...state, reload: () => load() };
}

/** useAction() → [run(fn, okMessage?), busy]: runs an async action, toasts its error (or okMessage), returns its result. */
export function useAction() {
  const [busy, setBusy] = useState(false);
  const run = useCallback(async (fn, ok) => {
    setBusy(true);
    try {
      const r = await fn();
      if (ok) toast(typeof ok === 'function' ? ok(r) : ok, 'ok');
      return r;
    } catch (e) {
      toast(e?.message ?? String(e), 'error');
      return undefined;
    } finally { setBusy(false); }
  }, []);
  return [run, busy];
}

// ---------------------------------------------------------------------------------------------
// States

/** Loading({label}) → a spinner with text (role=status). */
export function Loading({ label = 'Loading…' } = {}) {
  return html`<div class="state loading" role="status"><span class="spinner" aria-hidden="true"></span>${label}</div>`;
}

/** Empty({children}) → a muted empty-state box. */
export function Empty({ children }) {
  return html`<div class="state empty">${children ?? 'Nothing here yet.'}</div>`;
}

/** ErrorBox({error, onRetry}) → role=alert box with error.message (and status), optional Retry button. */
export function ErrorBox({ error, onRetry, title }) {
  if (!error) return null;
  const message = typeof error === 'string' ? error : error.message || String(error);
  return html`<div class="state errorbox" role="alert">
    <div><strong>${title ?? (error.status ? `Error ${error.status}` : 'Error')}</strong>${error.code ? html` <code>${error.code}</code>` : null}</div>
    <div class="errormsg">${message}</div>
    ${onRetry ? html`<${Button} size="sm" onClick=${onRetry}>Retry<//>` : null}
  </div>`;
}

// ---------------------------------------------------------------------------------------------
// Controls

/** Button({variant: 'primary'|'danger'|'ghost'|'default', size: 'sm', type, busy, ...props, children}) → a real <button>. */
export function Button({ variant = 'default', size, type = 'button', busy, disabled, class: cls, children, ...rest }) {
  const c = ['btn', `btn-${variant}`, size ? `btn-${size}` : '', cls ?? ''].join(' ').trim();
  return html`<button type=${type} class=${c} disabled=${disabled || busy} aria-busy=${busy ? 'true' : undefined} ...${rest}>${children}</button>`;
}

/** IconButton({label, children, ...}) → a small button whose accessible name is `label` (aria-label + title). */
export function IconButton({ label, children, class: cls, ...rest }) {
  return html`<button type="button" class=${`btn btn-ghost btn-icon ${cls ?? ''}`} aria-label=${label} title=${label} ...${rest}>${children}</button>`;
}

let fieldSeq = 0;
/** Field({label, hint, children, id}) → <label> + control + hint; give a single child control and it gets the id. */
export function Field({ label, hint, children, id, class: cls }) {
  const ref = useRef(null);
  if (!ref.current) ref.current = id ?? `f${++fieldSeq}`;
  const fid = ref.current;
  const kids = Array.isArray(children) ? children : [children];
  const k = kids[0];
  const withId = kids.length === 1 && k && typeof k === 'object' && typeof k.type === 'string' && k.props && !k.props.id
    ? [h(k.type, { ...k.props, key: k.key, ref: k.ref, id: fid, 'aria-describedby': hint ? `${fid}-hint` : k.props['aria-describedby'] })]
    : kids;
  const labelFor = kids.length === 1 && typeof k?.type === 'string' ? (k.props.id ?? fid) : undefined;
  const hintEl = hint ? html`<div class="hint" id=${`${fid}-hint`}>${hint}</div>` : null;
  if (labelFor) {
    return html`<div class=${`field ${cls ?? ''}`}><label for=${labelFor}>${label}</label>${withId}${hintEl}</div>`;
  }
  // Several controls (or a component): label the group instead.
  return html`<div class=${`field ${cls ?? ''}`} role="group" aria-labelledby=${`${fid}-label`}>
    <span class="field-label" id=${`${fid}-label`}>${label}</span>${kids}${hintEl}</div>`;
}

/** Toggle({label, checked, onChange}) → a labelled checkbox switch; onChange receives the boolean. */
export function Toggle({ label, checked, onChange, disabled, ...rest }) {
  return html`<label class="toggle">
    <input type="checkbox" role="switch" checked=${!!checked} disabled=${disabled}
      onChange=${(e) => onChange?.(e.currentTarget.checked)} ...${rest} /><span>${label}</span>
  </label>`;
}

/** Segmented({label, options: [{value, label}], value, onChange}) → a radio group styled as a segmented control. */
export function Segmented({ label, options, value, onChange, name }) {
  const n = useRef(name ?? `seg${++fieldSeq}`).current;
  return html`<div class="segmented" role="radiogroup" aria-label=${label}>
    ${options.map((o) => html`<label key=${o.value} class=${o.value === value ? 'on' : ''}>
      <input type="radio" name=${n} value=${o.value} checked=${o.value === value}
        onChange=${() => onChange?.(o.value)} /><span>${o.label}</span></label>`)}
  </div>`;
}

/** Card({title, actions, children, class}) → a bordered panel with a header row. */
export function Card({ title, actions, children, class: cls, ...rest }) {
  return html`<section class=${`card ${cls ?? ''}`} ...${rest}>
    ${title || actions ? html`<header class="card-head"><h2>${title}</h2><div class="actions">${actions}</div></header>` : null}
    <div class="card-body">${children}</div>
  </section>`;
}

/** PageHeader({title, children}) → the page's <h1> with actions at the right. */
export function PageHeader({ title, children }) {
  return html`<header class="page-head"><h1>${title}</h1><div class="actions">${children}</div></header>`;
}

// ---------------------------------------------------------------------------------------------
// Health

const STATE_CLASS = { healthy: 'ok', cooling: 'bad', 'awaiting probe': 'warn', probing: 'info', disabled: 'off' };
/** HealthTag({state, title}) → coloured pill with the state's text, data-state and a tooltip. */
export function HealthTag({ state, title }) {
  const s = state ?? 'unknown';
  return html`<span class=${`pill pill-${STATE_CLASS[s] ?? 'off'}`} data-state=${s} title=${title ?? s}>${s}</span>`;
}

/** Pill({kind: 'ok'|'warn'|'bad'|'info'|'off', title, children}) → a generic coloured pill. */
export function Pill({ kind = 'off', title, children, ...rest }) {
  return html`<span class=${`pill pill-${kind}`} title=${title} ...${rest}>${children}</span>`;
}

/** StatusCode({status}) → an HTTP status coloured by class (2xx ok, 4xx warn, 5xx bad, none off). */
export function StatusCode({ status }) {
  const kind = status == null ? 'off' : status < 300 ? 'ok' : status < 500 ? 'warn' : 'bad';
  return html`<span class=${`status status-${kind}`}>${status ?? '—'}</span>`;
}

// ---------------------------------------------------------------------------------------------
// Table

/**
 * Table({columns: [{key, label, render?(row), class?, num?}], rows, empty, rowKey?(row), onRow?(row), caption?})
 * → a horizontally scrollable table; onRow makes rows clickable (and Enter-activatable).
 */
export function Table({ columns, rows, empty, rowKey, onRow, caption, rowClass, ...rest }) {
  if (!rows || rows.length === 0) return html`<${Empty}>${empty ?? 'No rows.'}<//>`;
  return html`<div class="table-wrap" ...${rest}><table class="table">
    ${caption ? html`<caption class="sr-only">${caption}</caption>` : null}
    <thead><tr>${columns.map((c) => html`<th key=${c.key} scope="col" class=${(c.num ? 'num ' : '') + (c.class ?? '')}>${c.label}</th>`)}</tr></thead>
    <tbody>${rows.map((r, i) => html`<tr key=${rowKey ? rowKey(r) : i}
        class=${`${onRow ? 'clickable ' : ''}${rowClass ? rowClass(r) ?? '' : ''}`}
        tabindex=${onRow ? 0 : undefined}
        onClick=${onRow ? () => onRow(r) : undefined}
        onKeyDown=${onRow ? (e) => { if (e.key === 'Enter') onRow(r); } : undefined}>
      ${columns.map((c) => html`<td key=${c.key} class=${(c.num ? 'num ' : '') + (c.class ?? '')}>${c.render ? c.render(r) : fmtCell(r[c.key])}</td>`)}
    </tr>`)}</tbody>
  </table></div>`;
}

function fmtCell(v) {
  if (v === null || v === undefined || v === '') return '—';
  if (typeof v === 'boolean') return v ? 'yes' : 'no';
  if (typeof v === 'object') return JSON.stringify(v);
  return String(v);
}

// ---------------------------------------------------------------------------------------------
// Modal, drawer, confirm

const FOCUSABLE = 'a[href], button:not([disabled]), input:not([disabled]), select:not([disabled]), textarea:not([disabled]), [tabindex]:not([tabindex="-1"])';

function useDialogFocus(ref, onClose) {
  useEffect(() => {
    const before = document.activeElement;
    const el = ref.current;
    const first = el?.querySelector('[autofocus]') ?? el?.querySelector(FOCUSABLE) ?? el;
    first?.focus?.();
    const onKey = (e) => {
      if (!el || !el.isConnected) return;
      // Only the topmost dialog handles keys.
      const all = document.querySelectorAll('[aria-modal="true"]');
      if (all[all.length - 1] !== el) return;
      if (e.key === 'Escape') { e.preventDefault(); e.stopPropagation(); onClose?.(); return; }
      if (e.key !== 'Tab') return;
      const items = [...el.querySelectorAll(FOCUSABLE)].filter((n) => n.offsetParent !== null || n === document.activeElement);
      if (items.length === 0) { e.preventDefault(); el.focus(); return; }
      const a = items[0], z = items[items.length - 1];
      if (e.shiftKey && (document.activeElement === a || !el.contains(document.activeElement))) { e.preventDefault(); z.focus(); }
      else if (!e.shiftKey && (document.activeElement === z || !el.contains(document.activeElement))) { e.preventDefault(); a.focus(); }
    };
    document.addEventListener('keydown', onKey, true);
    return () => {
      document.removeEventListener('keydown', onKey, true);
      if (before && before.isConnected) before.focus?.();
    };
  }, []);
}

/** Modal({title, onClose, children, footer, wide}) → centred dialog (role=dialog aria-modal), Escape/backdrop close, focus trapped. */
export function Modal({ title, onClose, children, footer, wide, dismissable = true }) {
  const ref = useRef(null);
  const tid = useRef(`dlg${++fieldSeq}`).current;
  // Not dismissable: only its own buttons close it (a one-time secret must not vanish on a stray click).
  useDialogFocus(ref, dismissable ? onClose : null);
  return html`<div class="backdrop" onMouseDown=${(e) => { if (dismissable && e.target === e.currentTarget) onClose?.(); }}>
    <div class=${`modal ${wide ? 'modal-wide' : ''}`} role="dialog" aria-modal="true" aria-labelledby=${tid} tabindex="-1" ref=${ref}>
      <header class="modal-head"><h2 id=${tid}>${title}</h2>
        ${dismissable ? html`<${IconButton} label="Close" onClick=${onClose}>✕<//>` : null}</header>
      <div class="modal-body">${children}</div>
      ${footer ? html`<footer class="modal-foot">${footer}</footer>` : null}
    </div>
  </div>`;
}

/** Drawer({title, onClose, children}) → a right-hand side panel (.drawer), role=dialog aria-modal, Escape closes. */
export function Drawer({ title, onClose, children }) {
  const ref = useRef(null);
  const tid = useRef(`drw${++fieldSeq}`).current;
  useDialogFocus(ref, onClose);
  return html`<div class="backdrop backdrop-drawer" onMouseDown=${(e) => { if (e.target === e.currentTarget) onClose?.(); }}>
    <aside class="drawer" role="dialog" aria-modal="true" aria-labelledby=${tid} tabindex="-1" ref=${ref}>
      <header class="modal-head"><h2 id=${tid}>${title}</h2>
        <${IconButton} label="Close" onClick=${onClose}>✕<//></header>
      <div class="drawer-body">${children}</div>
    </aside>
  </div>`;
}

/** ConfirmDialog({title, message, confirmLabel, danger, onConfirm, onCancel}) → a Modal with Cancel/confirm buttons. */
export function ConfirmDialog({ title = 'Are you sure?', message, confirmLabel = 'Confirm', danger, onConfirm, onCancel, children }) {
  return html`<${Modal} title=${title} onClose=${onCancel} footer=${html`
      <${Button} onClick=${onCancel}>Cancel<//>
      <${Button} variant=${danger ? 'danger' : 'primary'} onClick=${onConfirm} autofocus>${confirmLabel}<//>`}>
    ${message ? html`<p>${message}</p>` : null}${children}
  <//>`;
}

/**
 * useConfirm() → [confirm, dialog]: `await confirm({title, message, confirmLabel, danger})` resolves true/false;
 * render `${dialog}` somewhere in the page.
 */
export function useConfirm() {
  const [req, setReq] = useState(null);
  const confirm = useCallback((opts) => new Promise((resolve) => setReq({ ...opts, resolve })), []);
  const done = (v) => { req?.resolve(v); setReq(null); };
  const dialog = req ? html`<${ConfirmDialog} ...${req} onConfirm=${() => done(true)} onCancel=${() => done(false)} />` : null;
  return [confirm, dialog];
}

// ---------------------------------------------------------------------------------------------
// Toasts

const toastListeners = new Set();
let toastList = [];
let toastSeq = 0;
function emitToasts() { toastListeners.forEach((f) => f(toastList)); }

/** toast(message, kind='info'|'ok'|'error'|'warn', ms=4000|8000 for errors) → shows a toast in <Toasts/>; returns its id. */
export function toast(message, kind = 'info', ms) {
  const id = ++toastSeq;
  toastList = [...toastList, { id, message: String(message), kind }];
  emitToasts();
  setTimeout(() => dismissToast(id), ms ?? (kind === 'error' ? 8000 : 4000));
  return id;
}

/** dismissToast(id) → removes a toast. */
export function dismissToast(id) {
  toastList = toastList.filter((t) => t.id !== id);
  emitToasts();
}

/** Toasts() → the toast host (render once, in the shell); polite live region, errors assertive. */
export function Toasts() {
  const [list, setList] = useState(toastList);
  useEffect(() => { toastListeners.add(setList); return () => toastListeners.delete(setList); }, []);
  return html`<div class="toasts" aria-live="polite">
    ${list.map((t) => html`<div key=${t.id} class=${`toast toast-${t.kind}`} role=${t.kind === 'error' ? 'alert' : 'status'}>
      <span>${t.message}</span>
      <${IconButton} label="Dismiss" onClick=${() => dismissToast(t.id)}>✕<//>
    </div>`)}
  </div>`;
}

// ---------------------------------------------------------------------------------------------
// Small display pieces

/** Copy({text, label}) → a button copying text to the clipboard (toasts the result). */
export function Copy({ text, label = 'Copy' }) {
  const copy = async () => {
    try { await navigator.clipboard.writeText(text); toast('Copied', 'ok', 1500); }
    catch { toast('Copy failed: select the text and copy it by hand', 'warn'); }
  };
  return html`<${Button} size="sm" onClick=${copy} aria-label=${label}>${label}<//>`;
}

/** KV({items: [[label, value], ...]}) → a definition list for detail views (values rendered as text/nodes). */
export function KV({ items }) {
  return html`<dl class="kv">${items.filter(Boolean).map(([k, v]) => html`<div class="kv-row" key=${k}><dt>${k}</dt><dd>${v ?? '—'}</dd></div>`)}</dl>`;
}

// ---------------------------------------------------------------------------------------------
// Formatters

/** fmtMs(ms) → '—' | '850 ms' | '1.25 s' | '2m 05s'. */
/** The colour theme in use, following the switch (charts redraw in its colours). */
export function useTheme() {
  const [theme, setTheme] = useState(document.documentElement.dataset.theme);
  useEffect(() => {
    const f = (e) => setTheme(e.detail);
    window.addEventListener('switchyard:theme', f);
    return () => window.removeEventListener('switchyard:theme', f);
  }, []);
  return theme;
}

/** Keeps uPlot chart `u` as wide as its element `el` (`height` tall); returns the undo. */
export function fitWidth(el, u, height) {
  let raf = 0;
  const resize = () => {
    cancelAnimationFrame(raf);
    raf = requestAnimationFrame(() => { if (el.clientWidth > 0) u.setSize({ width: el.clientWidth, height }); });
  };
  let ro;
  if (typeof ResizeObserver === 'function') { ro = new ResizeObserver(resize); ro.observe(el); }
  window.addEventListener('resize', resize);
  return () => {
    cancelAnimationFrame(raf);
    ro?.disconnect();
    window.removeEventListener('resize', resize);
  };
}

export function fmtMs(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return '—';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  const m = Math.floor(ms / 60_000), s = Math.round((ms % 60_000) / 1000);
  return `${m}m ${String(s).padStart(2, '0')}s`;
}

/** fmtTokens(n, estimated=false) → '—' | '950' | '12.3k' | '4.5M', prefixed '~' when estimated. */
export function fmtTokens(n, estimated = false) {
  if (n === null || n === undefined) return '—';
  let s;
  if (n < 1000) s = String(n);
  else if (n < 1e6) s = `${(n / 1e3).toFixed(n < 1e4 ? 2 : 1).replace(/\.?0+$/, '')}k`;
  else if (n < 1e9) s = `${(n / 1e6).toFixed(n < 1e7 ? 2 : 1).replace(/\.?0+$/, '')}M`;
  else s = `${(n / 1e9).toFixed(2).replace(/\.?0+$/, '')}G`;
  return estimated ? `~${s}` : s;
}

/** The browser's locale when Intl takes it; 'en' when it does not (a webview started with
 *  LANG=C reports "C", and every toLocaleString() would throw). */
export const LOCALE = (() => {
  try {
    new Intl.NumberFormat(undefined).format(1);
    return undefined;
  } catch {
    return 'en';
  }
})();

/** fmtNum(n) → locale-grouped integer or '—'. */
export function fmtNum(n) {
  return n === null || n === undefined ? '—' : Number(n).toLocaleString(LOCALE);
}

/** fmtPct(x) → '12.5%' from a 0..1 ratio ('—' for null/NaN). */
export function fmtPct(x) {
  return x === null || x === undefined || Number.isNaN(x) ? '—' : `${(x * 100).toFixed(x < 0.1 ? 1 : 0)}%`;
}

const pad = (n) => String(n).padStart(2, '0');
/** fmtTime(ms) → local 'YYYY-MM-DD HH:MM:SS' ('—' for null). */
export function fmtTime(ms) {
  if (ms === null || ms === undefined) return '—';
  const d = new Date(ms);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** fmtAgo(ms, now=Date.now()) → 'just now' | '5s ago' | '3m ago' | 'in 2m' (future) | '—'. */
export function fmtAgo(ms, now = Date.now()) {
  if (ms === null || ms === undefined) return '—';
  const d = now - ms, a = Math.abs(d);
  if (a < 1500) return 'just now';
  const s = Math.round(a / 1000);
  const t = s < 60 ? `${s}s` : s < 3600 ? `${Math.round(s / 60)}m` : s < 86400 ? `${Math.round(s / 3600)}h` : `${Math.round(s / 86400)}d`;
  return d >= 0 ? `${t} ago` : `in ${t}`;
}

/** maskKey(key) → 'sk-…wxyz' (already masked keys pass through; null → '—'). */
export function maskKey(key) {
  if (!key) return '—';
  if (key.includes('…') || key.includes('...')) return key;
  if (key.length <= 8) return '•'.repeat(key.length);
  const dash = key.indexOf('-');
  const prefix = dash > 0 && dash < 6 ? key.slice(0, dash + 1) : '';
  return `${prefix}…${key.slice(-4)}`;
}

/** randomId(n=6) → a short random lowercase id (for generated names). */
export function randomId(n = 6) {
  const b = new Uint8Array(n);
  crypto.getRandomValues(b);
  return [...b].map((x) => 'abcdefghijklmnopqrstuvwxyz0123456789'[x % 36]).join('');
}

// ---------------------------------------------------------------------------------------------
// Hash routing helpers

/** parseHash(hash=location.hash) → {page, params: URLSearchParams} from '#/logs?key=ci'. */
export function parseHash(hash = location.hash) {
  const h = hash.replace(/^#\/?/, '');
  const q = h.indexOf('?');
  const page = (q >= 0 ? h.slice(0, q) : h) || 'overview';
  return { page, params: new URLSearchParams(q >= 0 ? h.slice(q + 1) : '') };
}

/** hashLink(page, params={}) → '#/page?a=1' (empty values dropped), for hrefs. */
export function hashLink(page, params = {}) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '' && v !== false) q.set(k, String(v));
  const s = q.toString();
  return `#/${page}${s ? `?${s}` : ''}`;
}

/** useHashParams() → URLSearchParams of the current hash's query, updated on hashchange. */
export function useHashParams() {
  const [params, setParams] = useState(() => parseHash().params);
  useEffect(() => {
    const f = () => setParams(parseHash().params);
    window.addEventListener('hashchange', f);
    return () => window.removeEventListener('hashchange', f);
  }, []);
  return params;
}

/** useNow(ms=1000) → Date.now(), re-rendering every ms (for countdowns / "ago" labels). */
export function useNow(ms = 1000) {
  const [now, setNow] = useState(Date.now());
  useEffect(() => { const t = setInterval(() => setNow(Date.now()), ms); return () => clearInterval(t); }, [ms]);
  return now;
}
