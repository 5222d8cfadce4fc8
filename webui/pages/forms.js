// Form pieces and helpers shared by the sources, adapters, priority, routes, keys and spend
// pages (what ui.js does not have). Everything is rendered as text through htm; no innerHTML.
import { html, useState, useCallback } from '../lib.js';
import { Field, IconButton, Button, HealthTag, Modal, fmtTime, fmtAgo, fmtTokens, useApi } from '../ui.js';

// ---------------------------------------------------------------------------------------------
// Inputs (each one labelled through ui.js's Field, so getByLabel finds it)

/** TextInput({label, hint, value, onValue, type, ...input props}) → a labelled <input>. */
export function TextInput({ label, hint, value, onValue, type = 'text', class: cls, ...rest }) {
  return html`<${Field} label=${label} hint=${hint} class=${cls}><input type=${type} value=${value ?? ''}
    onInput=${(e) => onValue(e.currentTarget.value)} ...${rest} /><//>`;
}

/** NumberInput: a TextInput with a numeric keyboard; the value stays a string (see parseNumber). */
export function NumberInput({ label, hint, value, onValue, step = 'any', min = '0', ...rest }) {
  return html`<${TextInput} label=${label} hint=${hint} value=${value} onValue=${onValue} type="number"
    inputmode="decimal" step=${step} min=${min} ...${rest} />`;
}

/** SelectInput({label, value, onValue, options: [{value, label, disabled}] | strings}) → a labelled <select>. */
export function SelectInput({ label, hint, value, onValue, options, class: cls, ...rest }) {
  const opts = options.map((o) => (typeof o === 'string' ? { value: o, label: o } : o));
  return html`<${Field} label=${label} hint=${hint} class=${cls}><select value=${value ?? ''}
    onChange=${(e) => onValue(e.currentTarget.value)} ...${rest}>
    ${opts.map((o) => html`<option key=${o.value} value=${o.value} disabled=${o.disabled}>${o.label}</option>`)}
  </select><//>`;
}

/** CheckInput({label, checked, onValue}) → a plain labelled checkbox. */
export function CheckInput({ label, checked, onValue, ...rest }) {
  return html`<label class="check"><input type="checkbox" checked=${!!checked}
    onChange=${(e) => onValue(e.currentTarget.checked)} ...${rest} /> <span>${label}</span></label>`;
}

export const PERIOD_OPTIONS = [
  { value: '', label: 'no period (lifetime total)' },
  { value: 'hour', label: 'hour' },
  { value: 'week', label: 'week (from Monday 00:00 UTC)' },
  { value: 'month', label: 'month (from the 1st, 00:00 UTC)' },
  { value: 'nhour', label: 'every N hours' },
];

/** A period for display: '', hour, week, month, nhour + hours. */
export function periodText(period, hours) {
  if (!period) return 'lifetime';
  if (period === 'nhour') return `${hours ?? '?'} h`;
  return period;
}

/**
 * QuotaInputs({value: {token_quota, period, hours}, onChange, prefix}) → token quota, period and
 * (for nhour) hours, as strings.
 */
export function QuotaInputs({ value, onChange, prefix = '' }) {
  const set = (k) => (v) => onChange({ ...value, [k]: v });
  return html`<div class="form-row">
    <${NumberInput} label=${`${prefix}Token quota`} hint="empty or 0: unlimited" value=${value.token_quota}
      onValue=${set('token_quota')} step="1" />
    <${SelectInput} label=${`${prefix}Period`} value=${value.period ?? ''} onValue=${set('period')} options=${PERIOD_OPTIONS} />
    ${value.period === 'nhour'
      ? html`<${NumberInput} label=${`${prefix}Hours per window`} value=${value.hours} onValue=${set('hours')} step="1" min="1" required />`
      : null}
  </div>`;
}

/** Quota fields of an object into their API form: {token_quota?, period, hours?}. Throws naming the field. */
export function quotaBody(q, { periodAlways = true } = {}) {
  const out = {};
  const tokens = parseNumber('Token quota', q.token_quota, { int: true });
  if (tokens !== undefined) out.token_quota = tokens;
  if (periodAlways || q.period) out.period = q.period ?? '';
  if (q.period === 'nhour') {
    const hours = parseNumber('Hours per window', q.hours, { int: true, min: 1 });
    if (hours === undefined) throw new Error('Hours per window: give the window length in hours for "every N hours"');
    out.hours = hours;
  }
  return out;
}

/** Budget periods (`PATCH /keys/{name}`'s `budget.period`); windows are UTC. */
export const BUDGET_PERIOD_OPTIONS = [
  { value: 'hour', label: 'hour' },
  { value: 'day', label: 'day (from 00:00 UTC)' },
  { value: 'week', label: 'week (from Monday 00:00 UTC)' },
  { value: 'month', label: 'month (from the 1st, 00:00 UTC)' },
  { value: 'never', label: 'never (lifetime total)' },
];

/** A budget period for display: 'per day', 'per 5 h', 'lifetime'. */
export function budgetPeriodText(period) {
  if (!period || period === 'never') return 'lifetime';
  const n = /^nhour:(\d+)$/.exec(period);
  return n ? `per ${n[1]} h` : `per ${period}`;
}

/**
 * BudgetInputs({value: {usd, period}, onChange, hint}) → the amount in USD (kept as the typed
 * decimal string: money is never turned into a float) and its period.
 */
/**
 * PolicyPicker({value, onChange, hint}) → checkboxes for the policies that are not global (the
 * global ones apply everywhere already); nothing when there are none.
 */
export function PolicyPicker({ value, onChange, hint }) {
  const defined = useApi('/policies');
  const attachable = (defined.data?.policies ?? []).filter((p) => !p.global);
  if (!attachable.length) return null;
  return html`<fieldset class="fieldset">
    <legend>Policies</legend>
    <div class="row check-list">
      ${attachable.map((p) => html`<label key=${p.name} class="check">
        <input type="checkbox" checked=${value.includes(p.name)}
          onChange=${(e) => onChange(e.currentTarget.checked ? [...value, p.name] : value.filter((n) => n !== p.name))} />
        <span>${p.name} <span class="muted small">${p.component} · ${p.hooks.join(', ')}</span></span>
      </label>`)}
    </div>
    <p class="small muted">${hint}</p>
  </fieldset>`;
}

export function BudgetInputs({ value, onChange, hint = 'USD; empty: no budget' }) {
  const set = (k) => (v) => onChange({ ...value, [k]: v });
  const known = BUDGET_PERIOD_OPTIONS.some((o) => o.value === value.period);
  const options = known || !value.period ? BUDGET_PERIOD_OPTIONS : [...BUDGET_PERIOD_OPTIONS, { value: value.period, label: value.period }];
  return html`<div class="form-row">
    <${TextInput} label="Budget (USD)" hint=${hint} value=${value.usd} onValue=${set('usd')}
      inputmode="decimal" autocomplete="off" placeholder="25" />
    <${SelectInput} label="Budget period" value=${value.period || 'month'} onValue=${set('period')} options=${options} />
  </div>`;
}

/** Budget fields into their API form: `{usd, period}`, or undefined for an empty amount. Throws naming the field. */
export function budgetBody(b) {
  const usd = String(b.usd ?? '').trim();
  if (usd === '') return undefined;
  if (!/^\d+(\.\d+)?$/.test(usd)) throw new Error(`Budget (USD): "${usd}" is not an amount in dollars (like 25 or 2.50)`);
  return { usd, period: b.period || 'month' };
}

/** usd(s) → '$0.0012' from the API's decimal string, shown as given ('—' for none). */
export const usd = (s) => (s === null || s === undefined || s === '' ? '—' : `$${s}`);

/**
 * parseNumber(label, text, {int, min, required}) → undefined for an empty field, else the number;
 * throws an Error naming the field when the text is not one.
 */
export function parseNumber(label, text, { int = false, min = 0, required = false } = {}) {
  const s = String(text ?? '').trim();
  if (s === '') {
    if (required) throw new Error(`${label}: required`);
    return undefined;
  }
  const n = Number(s);
  if (!Number.isFinite(n)) throw new Error(`${label}: "${s}" is not a number`);
  if (int && !Number.isInteger(n)) throw new Error(`${label}: must be a whole number`);
  if (n < min) throw new Error(`${label}: must be at least ${min}`);
  return n;
}

/** A number for a form field: '' for null/undefined. */
export const str = (v) => (v === null || v === undefined ? '' : String(v));

/**
 * KeyValueEditor({label, rows: [{k, v}], onChange, keyLabel, valueLabel}) → an editable list of
 * pairs with add/remove buttons (labelled by index: "Setting 1 name").
 */
export function KeyValueEditor({ label, item = 'Setting', rows, onChange, keyPlaceholder, valuePlaceholder }) {
  const set = (i, patch) => onChange(rows.map((r, j) => (j === i ? { ...r, ...patch } : r)));
  return html`<fieldset class="fieldset">
    <legend>${label}</legend>
    ${rows.length === 0 ? html`<p class="muted">None.</p>` : null}
    ${rows.map((r, i) => html`<div class="form-row kv-edit" key=${i}>
      <${TextInput} label=${`${item} ${i + 1} name`} value=${r.k} onValue=${(v) => set(i, { k: v })} placeholder=${keyPlaceholder} />
      <${TextInput} label=${`${item} ${i + 1} value`} value=${r.v} onValue=${(v) => set(i, { v })} placeholder=${valuePlaceholder} />
      <${IconButton} label=${`Remove ${item.toLowerCase()} ${i + 1}`} onClick=${() => onChange(rows.filter((_, j) => j !== i))}>✕<//>
    </div>`)}
    <${Button} size="sm" onClick=${() => onChange([...rows, { k: '', v: '' }])}>Add ${item.toLowerCase()}<//>
  </fieldset>`;
}

/** FormError({error}) → the submit error of a form (role=alert), or nothing. */
export function FormError({ error }) {
  if (!error) return null;
  const message = typeof error === 'string' ? error : error.message || String(error);
  return html`<div class="state errorbox" role="alert">
    ${error.status ? html`<div><strong>Refused (${error.status})</strong>${error.code ? html` <code>${error.code}</code>` : null}</div>` : null}
    <div class="errormsg">${message}</div>
  </div>`;
}

/**
 * useSubmit() → {busy, error, setError, submit(fn)}: runs an async submit, keeping its error
 * (the API's message) for the form to show instead of toasting it; resolves to fn's result or undefined.
 */
export function useSubmit() {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const submit = useCallback(async (fn) => {
    setBusy(true);
    setError(null);
    try {
      return await fn();
    } catch (e) {
      setError(e);
      return undefined;
    } finally {
      setBusy(false);
    }
  }, []);
  return { busy, error, setError, submit };
}

/**
 * ConfirmAction({title, message, confirmLabel, danger, action, onDone, onCancel, children}) → a
 * confirmation dialog that runs `action` itself and, when the API refuses, shows its message in the
 * dialog (and stays open); closes through onDone(result) on success.
 */
export function ConfirmAction({ title, message, confirmLabel = 'Confirm', danger, action, onDone, onCancel, children }) {
  const { busy, error, submit } = useSubmit();
  const go = async () => {
    const r = await submit(async () => ({ value: await action() }));
    if (r) onDone?.(r.value);
  };
  return html`<${Modal} title=${title} onClose=${onCancel} footer=${html`
      <${Button} onClick=${onCancel}>Cancel<//>
      <${Button} variant=${danger ? 'danger' : 'primary'} busy=${busy} onClick=${go}>${confirmLabel}<//>`}>
    ${message ? html`<p>${message}</p>` : null}
    ${children}
    <${FormError} error=${error} />
  <//>`;
}

let formSeq = 0;
/** A fresh id for a <form> whose submit button sits in a modal footer (`form=` attribute). */
export const newFormId = () => `form${++formSeq}`;

/** enc(segment) → a path segment, escaped. */
export const enc = (s) => encodeURIComponent(String(s));

// ---------------------------------------------------------------------------------------------
// Health of slots (GET /health)

/** Worse states rank higher: healthy < awaiting probe < probing < cooling; disabled above all. */
export const STATE_RANK = { healthy: 0, 'awaiting probe': 1, probing: 2, cooling: 3, disabled: 4 };

/** worstState(states) → the worst of the states, 'healthy' for none. */
export function worstState(states) {
  let worst = 'healthy';
  for (const s of states) if ((STATE_RANK[s] ?? 0) > (STATE_RANK[worst] ?? 0)) worst = s;
  return worst;
}

/** healthIndex(health) → Map 'source\0model' → slot, from GET /health's answer. */
export function healthIndex(health) {
  const m = new Map();
  for (const s of health?.slots ?? []) m.set(`${s.source}\u0000${s.model}`, s);
  return m;
}

export const slotKey = (source, model) => `${source}\u0000${model}`;

/**
 * slotTitle(slot, now) → a tooltip: the state, failures, when the window opened, when a probe is
 * admitted and when it recovers in full (times from the gateway's clock, `now` = health.now_ms).
 */
export function slotTitle(slot, now = Date.now()) {
  if (!slot) return 'no health data';
  const parts = [`${slot.source}/${slot.model}: ${slot.state}`];
  if (slot.failures) parts.push(`${slot.failures} consecutive failure${slot.failures === 1 ? '' : 's'}`);
  if (slot.window_start_ms != null) parts.push(`window opened ${fmtTime(slot.window_start_ms)} (${fmtAgo(slot.window_start_ms, now)})`);
  if (slot.probe_from_ms != null && slot.state !== 'healthy') {
    parts.push(`probe admitted from ${fmtTime(slot.probe_from_ms)} (${fmtAgo(slot.probe_from_ms, now)})`);
  }
  if (slot.recovers_at_ms != null) parts.push(`full recovery ${fmtTime(slot.recovers_at_ms)} (${fmtAgo(slot.recovers_at_ms, now)})`);
  else if (slot.window_start_ms != null) parts.push('no end: recovers when a probe succeeds or it is cleared');
  if (slot.probes_in_flight) parts.push(`${slot.probes_in_flight} of ${slot.probe_budget} probes in flight`);
  return parts.join('\n');
}

/** SlotHealth({slot, now}) → the slot's HealthTag with the window tooltip. */
export function SlotHealth({ slot, now }) {
  if (!slot) return html`<${HealthTag} state="unknown" title="no health data for this slot" />`;
  return html`<${HealthTag} state=${slot.state} title=${slotTitle(slot, now)} />`;
}

// ---------------------------------------------------------------------------------------------
// Display

/**
 * UsageBar({used, total, label}) → a progressbar (role=progressbar, aria-valuenow) with
 * "used / total" text; no total: just the use.
 */
export function UsageBar({ used, total, label, detail }) {
  const u = used ?? 0;
  if (!total) {
    return html`<span class="usage-text">${fmtTokens(u)} used${detail ? html` <span class="muted">${detail}</span>` : null}</span>`;
  }
  const pct = Math.min(100, Math.round((u / total) * 100));
  const kind = pct >= 100 ? 'bad' : pct >= 80 ? 'warn' : 'ok';
  return html`<div class="usage">
    <div class=${`bar bar-${kind}`} role="progressbar" aria-label=${label} aria-valuemin="0" aria-valuemax=${total}
      aria-valuenow=${Math.min(u, total)} aria-valuetext=${`${fmtTokens(u)} of ${fmtTokens(total)} tokens (${pct}%)`}>
      <div class="bar-fill" style=${{ width: `${pct}%` }}></div>
    </div>
    <span class="usage-text">${fmtTokens(u)} / ${fmtTokens(total)}${detail ? html` <span class="muted">${detail}</span>` : null}</span>
  </div>`;
}

/**
 * BudgetBar({budget: {usd, period, spent_usd, percent}, label}) → a progressbar at the API's
 * `percent` with "$spent / $usd per period" (the amounts as the API wrote them).
 */
export function BudgetBar({ budget: b, label }) {
  const pct = Math.max(0, Number(b.percent) || 0);
  const kind = pct >= 100 ? 'bad' : pct >= 80 ? 'warn' : 'ok';
  const text = `${usd(b.spent_usd)} of ${usd(b.usd)} ${budgetPeriodText(b.period)}`;
  return html`<div class="usage">
    <div class=${`bar bar-${kind}`} role="progressbar" aria-label=${label} aria-valuemin="0" aria-valuemax="100"
      aria-valuenow=${Math.min(pct, 100)} aria-valuetext=${`${text} (${pct}%)`}>
      <div class="bar-fill" style=${{ width: `${Math.min(pct, 100)}%` }}></div>
    </div>
    <span class="usage-text">${text} <span class="muted">${pct}%</span></span>
  </div>`;
}

/** Chips({items}) → a wrapped list of small code chips. */
export function Chips({ items, empty = '—' }) {
  if (!items || items.length === 0) return html`<span class="muted">${empty}</span>`;
  return html`<span class="row chips">${items.map((t, i) => html`<span key=${i} class="tag">${t}</span>`)}</span>`;
}

/** Copies text to the clipboard; falls back to selecting `input` (the user copies by hand). */
export async function copyText(text, input) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    if (input) {
      input.focus();
      input.select();
      try { if (document.execCommand('copy')) return true; } catch { /* not allowed */ }
    }
    return false;
  }
}

/** The models of the sources (GET /sources), each once: [{name, kind, sources: [names]}]. */
export function modelCatalog(sources) {
  const byName = new Map();
  for (const s of sources ?? []) {
    if (s.deleted) continue;
    for (const m of s.models ?? []) {
      const e = byName.get(m.name) ?? { name: m.name, kind: m.kind ?? 'chat', sources: [] };
      e.sources.push(s.name);
      byName.set(m.name, e);
    }
  }
  return [...byName.values()];
}
