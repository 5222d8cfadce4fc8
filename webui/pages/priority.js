// Priority: the AUTO chains (chat: GET/PUT /auto, image: GET/PUT /auto-image). Tiers as rows,
// slots as cards; reordered by drag and drop or by the move buttons on each card; saved whole
// with an explicit Save. Each card shows its quota use and its health (GET /health).
import { html, useState, useMemo, useEffect, useRef } from '../lib.js';
import { api } from '../api.js';
import { may } from '../access.js';
import {
  useApi, Loading, ErrorBox, Empty, Modal, Button, IconButton, Segmented, PageHeader, Card, HealthTag, Pill,
  toast, fmtTokens, fmtAgo,
} from '../ui.js';
import {
  SelectInput, QuotaInputs, quotaBody, FormError, ConfirmAction, useSubmit, newFormId, str,
  healthIndex, slotKey, slotTitle, worstState, periodText, modelCatalog, UsageBar,
} from './forms.js';

let uidSeq = 0;
const uid = () => `s${++uidSeq}`;

/** Server slots → rows of cards: one row per tier, lowest first, slots in chain order. */
function toRows(slots) {
  const byTier = new Map();
  for (const s of slots ?? []) {
    const t = s.tier ?? 1;
    if (!byTier.has(t)) byTier.set(t, []);
    byTier.get(t).push({
      uid: uid(), model: s.model, source: s.source ?? '', token_quota: s.token_quota ?? null,
      period: s.period ?? '', hours: s.hours ?? null,
    });
  }
  return [...byTier.keys()].sort((a, b) => a - b).map((t) => ({ uid: uid(), slots: byTier.get(t) }));
}

/** Rows → the API's slots, tiers numbered 1, 2, ... in row order. */
function toSlots(rows) {
  return rows.filter((r) => r.slots.length).flatMap((r, i) => r.slots.map((s) => {
    const out = { model: s.model };
    if (s.source) out.source = s.source;
    out.tier = i + 1;
    if (s.token_quota) out.token_quota = s.token_quota;
    out.period = s.period ?? '';
    if (s.period === 'nhour' && s.hours) out.hours = s.hours;
    return out;
  }));
}

const slotLabel = (s) => `${s.model} @ ${s.source || 'any source'}`;

/** Where the slot `id` is: [row index, position]. */
function locate(rows, id) {
  for (let r = 0; r < rows.length; r++) {
    const p = rows[r].slots.findIndex((s) => s.uid === id);
    if (p >= 0) return [r, p];
  }
  return [-1, -1];
}

/**
 * Moves slot `id` to row `toRow` at `toPos` (end when undefined). toRow -1 makes a new first
 * tier, rows.length a new last one. Empty rows are dropped.
 */
function moveSlot(rows, id, toRow, toPos) {
  const [r, p] = locate(rows, id);
  if (r < 0) return rows;
  const slot = rows[r].slots[p];
  let next = rows.map((row) => ({ ...row, slots: row.slots.filter((s) => s.uid !== id) }));
  if (toRow < 0) next = [{ uid: uid(), slots: [] }, ...next], toRow = 0;
  else if (toRow >= next.length) next = [...next, { uid: uid(), slots: [] }], toRow = next.length - 1;
  const target = next[toRow].slots;
  // Moving within one row: positions after the removed slot shift by one.
  let pos = toPos ?? target.length;
  if (r === toRow && toPos !== undefined && toPos > p) pos -= 1;
  target.splice(Math.max(0, Math.min(pos, target.length)), 0, slot);
  return next.filter((row) => row.slots.length);
}

/** The health period name of a slot: never | hour | week | month | nhour:N. */
const healthPeriod = (s) => (!s.period ? 'never' : s.period === 'nhour' ? `nhour:${s.hours}` : s.period);

// ---------------------------------------------------------------------------------------------
// A slot's health and quota

/** The health slots behind a card: its source's, or every source serving the model. */
function cardHealth(slot, index, catalog) {
  const sources = slot.source ? [slot.source] : (catalog.find((m) => m.name === slot.model)?.sources ?? []);
  return sources.map((src) => index.get(slotKey(src, slot.model))).filter(Boolean);
}

function QuotaLine({ slot, health, now }) {
  if (!slot.token_quota) return html`<div class="small muted">no token quota</div>`;
  const period = healthPeriod(slot);
  const per = periodText(slot.period, slot.hours);
  const uses = health.map((h) => ({ h, q: (h.quotas ?? []).find((q) => q.period === period) })).filter((u) => u.q);
  if (uses.length === 0) {
    return html`<div class="small">${fmtTokens(slot.token_quota)} tokens per ${per} <span class="muted">(use shown once saved)</span></div>`;
  }
  return html`<div>${uses.map(({ h, q }) => {
    const left = Math.max(0, slot.token_quota - (q.used ?? 0));
    const resets = q.resets_at_ms ? `resets ${fmtAgo(q.resets_at_ms, now)}` : 'lifetime total';
    return html`<div key=${h.source}>
      <${UsageBar} used=${q.used} total=${slot.token_quota} label=${`Quota of ${slot.model} @ ${h.source}`}
        detail=${`per ${per}`} />
      <div class="small muted">${uses.length > 1 ? `${h.source}: ` : ''}${fmtTokens(left)} left · ${resets}</div>
    </div>`;
  })}</div>`;
}

function SlotCard({ slot, row, pos, rows, index, catalog, now, onEdit, onRemove, onMove, dragging, setDragging, readOnly }) {
  const label = slotLabel(slot);
  const health = cardHealth(slot, index, catalog);
  const state = health.length ? worstState(health.map((h) => h.state)) : null;
  const title = health.length ? health.map((h) => slotTitle(h, now)).join('\n\n') : 'no health data (not saved yet, or no source serves the model)';
  const rowLen = rows[row].slots.length;
  const alone = rowLen === 1;
  const tierOptions = rows.map((_, i) => ({ value: String(i), label: `Tier ${i + 1}` }));
  if (!alone) tierOptions.push({ value: String(rows.length), label: `New tier ${rows.length + 1}` });
  if (readOnly) {
    return html`<article class="slot-card" data-uid=${slot.uid} data-state=${state ?? 'unknown'} aria-label=${label}>
      <div class="row slot-head">
        <strong class="wrap-any">${slot.model}</strong>
        <span class="muted wrap-any">@ ${slot.source || 'any source'}</span>
        ${state ? html`<${HealthTag} state=${state} title=${title} />` : html`<${Pill} kind="off" title=${title}>unknown<//>`}
      </div>
      <${QuotaLine} slot=${slot} health=${health} now=${now} />
    </article>`;
  }
  return html`<article class=${`slot-card ${dragging === slot.uid ? 'is-dragging' : ''}`} data-uid=${slot.uid}
      data-state=${state ?? 'unknown'} draggable="true" aria-label=${label}
      onDragStart=${(e) => { e.dataTransfer.setData('text/plain', slot.uid); e.dataTransfer.effectAllowed = 'move'; setDragging(slot.uid); }}
      onDragEnd=${() => setDragging(null)}>
    <div class="row slot-head">
      <span class="drag-handle" aria-hidden="true" title="Drag to reorder">⠿</span>
      <strong class="wrap-any">${slot.model}</strong>
      <span class="muted wrap-any">@ ${slot.source || 'any source'}</span>
      ${state ? html`<${HealthTag} state=${state} title=${title} />` : html`<${Pill} kind="off" title=${title}>unknown<//>`}
    </div>
    <${QuotaLine} slot=${slot} health=${health} now=${now} />
    <div class="row slot-actions">
      <${IconButton} label=${`Move ${label} up`} data-act="up" disabled=${row === 0 && alone} onClick=${() => onMove(slot.uid, 'up')}>↑<//>
      <${IconButton} label=${`Move ${label} down`} data-act="down" disabled=${row === rows.length - 1 && alone} onClick=${() => onMove(slot.uid, 'down')}>↓<//>
      <${IconButton} label=${`Move ${label} left`} data-act="left" disabled=${pos === 0} onClick=${() => onMove(slot.uid, 'left')}>←<//>
      <${IconButton} label=${`Move ${label} right`} data-act="right" disabled=${pos === rowLen - 1} onClick=${() => onMove(slot.uid, 'right')}>→<//>
      <select class="tier-select" aria-label=${`Move ${label} to tier`} data-act="tier" value=${String(row)}
        onChange=${(e) => onMove(slot.uid, 'tier', Number(e.currentTarget.value))}>
        ${tierOptions.map((o) => html`<option key=${o.value} value=${o.value}>${o.label}</option>`)}
      </select>
      <span class="spacer"></span>
      <${Button} size="sm" aria-label=${`Edit ${label}`} onClick=${() => onEdit(slot.uid)}>Edit<//>
      <${Button} size="sm" variant="danger" aria-label=${`Remove ${label}`} onClick=${() => onRemove(slot.uid)}>Remove<//>
    </div>
  </article>`;
}

// ---------------------------------------------------------------------------------------------
// Add / edit a slot

function SlotDialog({ slot, rows, row, kind, catalog, onSave, onClose }) {
  const models = catalog.filter((m) => m.kind === kind);
  const [model, setModel] = useState(slot?.model ?? models[0]?.name ?? '');
  const [source, setSource] = useState(slot?.source ?? '');
  const [tier, setTier] = useState(String(row ?? Math.max(0, rows.length - 1)));
  const [quota, setQuota] = useState({ token_quota: str(slot?.token_quota), period: slot?.period ?? '', hours: str(slot?.hours) });
  const [error, setError] = useState(null);
  const [formId] = useState(newFormId);
  const entry = catalog.find((m) => m.name === model);
  const modelOptions = models.map((m) => ({ value: m.name, label: m.name }));
  if (model && !modelOptions.some((o) => o.value === model)) modelOptions.unshift({ value: model, label: `${model} (no ${kind} source serves it)` });
  const sourceOptions = [{ value: '', label: 'any source serving it' }, ...(entry?.sources ?? []).map((s) => ({ value: s, label: s }))];
  if (source && !entry?.sources.includes(source)) sourceOptions.push({ value: source, label: `${source} (does not serve it)` });
  const tierOptions = rows.map((_, i) => ({ value: String(i), label: `Tier ${i + 1}` }));
  tierOptions.push({ value: String(rows.length), label: `New tier ${rows.length + 1}` });

  const save = (e) => {
    e?.preventDefault();
    try {
      if (!model) throw new Error('Model: choose one');
      const q = quotaBody(quota);
      onSave({
        uid: slot?.uid ?? uid(), model, source,
        token_quota: q.token_quota || null, period: q.period ?? '', hours: q.hours ?? null,
      }, Number(tier));
    } catch (err) { setError(err); }
  };
  return html`<${Modal} title=${slot ? `Edit ${slotLabel(slot)}` : 'Add a slot'} onClose=${onClose} footer=${html`
      <${Button} onClick=${onClose}>Cancel<//>
      <${Button} variant="primary" type="submit" form=${formId}>${slot ? 'Apply' : 'Add slot'}<//>`}>
    <form id=${formId} class="stack" onSubmit=${save} novalidate>
      ${models.length === 0 ? html`<p class="muted">No source serves a ${kind} model yet: add one on the Sources page.</p>` : null}
      <div class="form-grid">
        <${SelectInput} label="Model" value=${model} onValue=${(v) => { setModel(v); setSource(''); }} options=${modelOptions} />
        <${SelectInput} label="Source" value=${source} onValue=${setSource} options=${sourceOptions} />
        <${SelectInput} label="Tier" value=${tier} onValue=${setTier} options=${tierOptions} />
      </div>
      <${QuotaInputs} value=${quota} onChange=${setQuota} />
      <p class="small muted">Changes apply to the chain when you press Save.</p>
      <${FormError} error=${error} />
    </form>
  <//>`;
}

// ---------------------------------------------------------------------------------------------
// One chain

function ChainEditor({ kind, chain, draft, setDraft, catalog, index, now, onSaved }) {
  const serverSlots = chain.data?.slots;
  const isNull = !!chain.data && serverSlots === null;
  // Built once per answer, so cards keep their ids (and keys) across renders.
  const serverRows = useMemo(() => (isNull ? null : toRows(serverSlots ?? [])), [chain.data]);
  // Changing a chain is the admin's: other roles see it as saved, without the controls.
  const readOnly = !may('admin');
  const rows = readOnly ? serverRows : draft ?? serverRows;
  const dirty = !readOnly && draft !== null;
  const [dialog, setDialog] = useState(null);
  const [dragging, setDragging] = useState(null);
  const [dropTarget, setDropTarget] = useState(null);
  const [announce, setAnnounce] = useState('');
  const focusAfter = useRef(null);
  const { busy, error, setError, submit } = useSubmit();
  const title = kind === 'chat' ? 'AUTO chat chain' : 'AUTO image chain';

  useEffect(() => {
    const f = focusAfter.current;
    if (!f) return;
    focusAfter.current = null;
    const card = document.querySelector(`[data-uid="${f.uid}"]`);
    const el = card?.querySelector(`[data-act="${f.act}"]:not([disabled])`) ?? card?.querySelector('button:not([disabled])');
    el?.focus();
  });

  const change = (next, message) => {
    setDraft(next);
    setError(null);
    if (message) setAnnounce(message);
  };

  const onMove = (id, dir, value) => {
    const [r, p] = locate(rows, id);
    if (r < 0) return;
    const alone = rows[r].slots.length === 1;
    let next;
    if (dir === 'left') next = moveSlot(rows, id, r, p - 1);
    else if (dir === 'right') next = moveSlot(rows, id, r, p + 2);
    else if (dir === 'up') next = r === 0 ? (alone ? rows : moveSlot(rows, id, -1)) : moveSlot(rows, id, r - 1);
    else if (dir === 'down') next = r === rows.length - 1 ? (alone ? rows : moveSlot(rows, id, rows.length)) : moveSlot(rows, id, r + 1);
    else if (dir === 'tier') next = value === r ? rows : moveSlot(rows, id, value);
    if (!next || next === rows) return;
    const [nr, np] = locate(next, id);
    focusAfter.current = { uid: id, act: dir };
    change(next, `${slotLabel(rows[r].slots[p])} moved to tier ${nr + 1}, position ${np + 1}`);
  };

  const onDrop = (e, toRow, toPos) => {
    e.preventDefault();
    e.stopPropagation();
    const id = e.dataTransfer.getData('text/plain') || dragging;
    setDragging(null);
    setDropTarget(null);
    if (!id || locate(rows, id)[0] < 0) return;
    const next = moveSlot(rows, id, toRow, toPos);
    const [nr, np] = locate(next, id);
    const [r, p] = locate(rows, id);
    change(next, `${slotLabel(rows[r].slots[p])} moved to tier ${nr + 1}, position ${np + 1}`);
  };
  /** Dropping on a card puts the dragged slot before it (after it in the card's right half). */
  const cardDrop = (e, r) => {
    const card = e.target.closest?.('[data-uid]');
    if (!card) return onDrop(e, r);
    const [cr, cp] = locate(rows, card.dataset.uid);
    const box = card.getBoundingClientRect();
    const after = e.clientX > box.left + box.width / 2;
    return onDrop(e, cr, cp + (after ? 1 : 0));
  };
  const over = (key) => (e) => {
    e.preventDefault();
    if (e.dataTransfer) e.dataTransfer.dropEffect = 'move';
    if (dropTarget !== key) setDropTarget(key);
  };

  const save = async () => {
    const ok = await submit(async () => {
      await api('PUT', kind === 'chat' ? '/auto' : '/auto-image', { slots: toSlots(rows ?? []) });
      return true;
    });
    if (ok) {
      toast(`${title} saved`, 'ok');
      setDraft(null);
      onSaved();
    }
  };

  const applySlot = (slot, toRow) => {
    let next = rows ?? [];
    const [r] = locate(next, slot.uid);
    if (r >= 0) {
      next = next.map((row) => ({ ...row, slots: row.slots.map((s) => (s.uid === slot.uid ? slot : s)) }));
      if (toRow !== r) next = moveSlot(next, slot.uid, toRow);
    } else if (toRow >= next.length) {
      next = [...next, { uid: uid(), slots: [slot] }];
    } else {
      next = next.map((row, i) => (i === toRow ? { ...row, slots: [...row.slots, slot] } : row));
    }
    change(next, `${slotLabel(slot)} ${r >= 0 ? 'changed' : 'added'} (not saved yet)`);
    setDialog(null);
  };

  if (chain.loading && !chain.data) return html`<${Card} title=${title}><${Loading} label="Loading the chain…" /><//>`;
  if (chain.error && !chain.data) return html`<${Card} title=${title}><${ErrorBox} error=${chain.error} onRetry=${chain.reload} /><//>`;

  const actions = readOnly ? null : html`
    ${dirty ? html`<${Pill} kind="warn">unsaved changes<//>` : null}
    ${rows ? html`<${Button} onClick=${() => setDialog({ kind: 'add' })}>Add slot<//>` : null}
    ${dirty ? html`<${Button} onClick=${() => { setDraft(null); setError(null); }}>Discard changes<//>` : null}
    ${kind === 'image' && !isNull && !dirty ? html`<${Button} variant="danger" onClick=${() => setDialog({ kind: 'remove-chain' })}>Remove image chain<//>` : null}
    ${rows ? html`<${Button} variant="primary" busy=${busy} disabled=${!dirty} onClick=${save}>Save<//>` : null}`;

  let body;
  if (!rows) {
    body = html`<${Empty}>
      <p>No image chain: AUTO image requests go to every source's image models, in config order.</p>
      ${readOnly ? null : html`<${Button} variant="primary" onClick=${() => change([], 'image chain started (not saved yet)')}>Create an image chain<//>`}
    <//>`;
  } else if (rows.length === 0) {
    body = html`<${Empty}>
      ${kind === 'chat'
        ? `The chain is empty: requests for model AUTO find no slot.${readOnly ? '' : ' Add a slot to start it.'}`
        : `The image chain is empty: AUTO image requests find no slot.${readOnly ? '' : ' Add a slot, or remove the chain to fall back to every image model.'}`}
    <//>`;
  } else {
    body = html`<div class="stack tiers">
      ${rows.map((row, r) => html`<section key=${row.uid} class=${`tier ${dropTarget === row.uid ? 'drop-over' : ''}`}
          aria-labelledby=${`${kind}-tier-${r}`}
          onDragOver=${readOnly ? undefined : over(row.uid)} onDragLeave=${readOnly ? undefined : () => setDropTarget(null)}
          onDrop=${readOnly ? undefined : (e) => cardDrop(e, r)}>
        <header class="row tier-head">
          <h3 id=${`${kind}-tier-${r}`}>Tier ${r + 1}</h3>
          <span class="small muted">${row.slots.length} slot${row.slots.length === 1 ? '' : 's'}${r === 0 ? ' · tried first' : ''}</span>
        </header>
        <div class="slot-cards">
          ${row.slots.map((s, p) => html`<${SlotCard} key=${s.uid} slot=${s} row=${r} pos=${p} rows=${rows} index=${index} readOnly=${readOnly}
            catalog=${catalog} now=${now} dragging=${dragging} setDragging=${setDragging}
            onEdit=${(id) => setDialog({ kind: 'edit', id })}
            onRemove=${(id) => { const [rr, pp] = locate(rows, id); change(rows.map((x) => ({ ...x, slots: x.slots.filter((q) => q.uid !== id) })).filter((x) => x.slots.length), `${slotLabel(rows[rr].slots[pp])} removed (not saved yet)`); }}
            onMove=${onMove} />`)}
        </div>
      </section>`)}
      ${readOnly ? null : html`<div class=${`tier tier-new ${dragging ? 'visible' : ''} ${dropTarget === 'new' ? 'drop-over' : ''}`}
        onDragOver=${over('new')} onDragLeave=${() => setDropTarget(null)} onDrop=${(e) => onDrop(e, rows.length)}>
        <span class="muted small">${dragging ? `Drop here for a new tier ${rows.length + 1}` : `Drag a slot here (or use its "to tier" menu) for a new tier ${rows.length + 1}`}</span>
      </div>`}
    </div>`;
  }

  let d = null;
  if (dialog?.kind === 'add') {
    d = html`<${SlotDialog} rows=${rows ?? []} kind=${kind} catalog=${catalog} onSave=${applySlot} onClose=${() => setDialog(null)} />`;
  } else if (dialog?.kind === 'edit') {
    const [r, p] = locate(rows, dialog.id);
    if (r >= 0) {
      d = html`<${SlotDialog} slot=${rows[r].slots[p]} row=${r} rows=${rows} kind=${kind} catalog=${catalog}
        onSave=${applySlot} onClose=${() => setDialog(null)} />`;
    }
  } else if (dialog?.kind === 'remove-chain') {
    d = html`<${ConfirmAction} danger title="Remove the image chain" confirmLabel="Remove image chain"
      message="Without an image chain, AUTO image requests go to every source's image models in config order."
      action=${() => api('PUT', '/auto-image', { slots: null })}
      onDone=${() => { toast('Image chain removed', 'ok'); setDialog(null); setDraft(null); onSaved(); }}
      onCancel=${() => setDialog(null)} />`;
  }

  return html`<${Card} title=${title} actions=${actions}>
    <div class="stack">
      <p class="muted small">${kind === 'chat'
        ? 'Serves model AUTO on /v1/chat/completions and /v1/messages. Tiers are tried in order; the slots of a tier share it and are ordered by the channel selection. A slot is skipped while it cools down or its token quota is spent.'
        : 'Serves model AUTO on /v1/images/generations. Only image models count here.'}</p>
      <${FormError} error=${error} />
      ${chain.error && chain.data ? html`<${ErrorBox} error=${chain.error} onRetry=${chain.reload} />` : null}
      ${body}
      <div class="sr-only" aria-live="polite" role="status">${announce}</div>
    </div>
    ${d}
  <//>`;
}

/** Unsaved chain edits of this tab, kept across page changes (null: none). */
let keptDrafts = { chat: null, image: null };

export default function PriorityPage() {
  const [kind, setKind] = useState(() => (location.hash.includes('chain=image') ? 'image' : 'chat'));
  const chat = useApi('/auto');
  const image = useApi('/auto-image');
  const sources = useApi('/sources');
  const health = useApi('/health', [], { refreshMs: 5000 });
  // Drafts outlive the page: navigating away and back finds unsaved edits where they were.
  const [drafts, setDraftsState] = useState(keptDrafts);
  const setDrafts = (update) => setDraftsState((d) => {
    keptDrafts = typeof update === 'function' ? update(d) : update;
    return keptDrafts;
  });
  const catalog = useMemo(() => modelCatalog(sources.data?.sources), [sources.data]);
  const index = useMemo(() => healthIndex(health.data), [health.data]);
  const now = health.data?.now_ms ?? Date.now();
  const chain = kind === 'chat' ? chat : image;

  // Closing the tab with unsaved changes asks first (only an admin makes any).
  const admin = may('admin');
  const dirty = admin && (drafts.chat !== null || drafts.image !== null);
  useEffect(() => {
    if (!dirty) return undefined;
    const f = (e) => { e.preventDefault(); e.returnValue = ''; };
    window.addEventListener('beforeunload', f);
    return () => window.removeEventListener('beforeunload', f);
  }, [dirty]);

  return html`<div class="page page-priority">
    <${PageHeader} title="Priority">
      <${Segmented} label="Chain" value=${kind} onChange=${setKind}
        options=${[{ value: 'chat', label: 'Chat' }, { value: 'image', label: 'Image' }]} />
      ${admin && drafts[kind === 'chat' ? 'image' : 'chat'] !== null
        ? html`<${Pill} kind="warn">${kind === 'chat' ? 'Image' : 'Chat'} chain has unsaved changes<//>` : null}
    <//>
    ${sources.error ? html`<${ErrorBox} title="Sources unavailable" error=${sources.error} onRetry=${sources.reload} />` : null}
    ${health.error && !health.data ? html`<p class="muted small" role="status">Health unavailable: ${health.error.message}</p>` : null}
    <${ChainEditor} key=${kind} kind=${kind} chain=${chain} draft=${drafts[kind]} catalog=${catalog} index=${index} now=${now}
      setDraft=${(v) => setDrafts((d) => ({ ...d, [kind]: v }))}
      onSaved=${() => { chain.reload(); health.reload(); }} />
  </div>`;
}
