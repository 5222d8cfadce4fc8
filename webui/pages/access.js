// Access: who is logged in (GET /me), their personal tokens (GET/POST/DELETE /tokens: the secret
// shown once; an admin sees and makes everyone's) and the admin API's audit trail (GET /audit:
// filtered, paged newest first, each entry's changes as before/after JSON). Every role sees
// this page; everything on it is rendered as text.
import { html, useState, useEffect, useRef, useCallback } from '../lib.js';
import { api, query } from '../api.js';
import { may, useMe, grantable, VIA } from '../access.js';
import {
  useApi, Loading, ErrorBox, Empty, Modal, Button, PageHeader, Card, Table, Pill, KV, StatusCode, toast, fmtTime, fmtAgo,
} from '../ui.js';
import {
  TextInput, NumberInput, SelectInput, FormError, ConfirmAction, useSubmit, newFormId, enc, parseNumber, copyText,
} from './forms.js';

const ROLE_KIND = { admin: 'warn', operator: 'info', viewer: 'off' };
const CAN = {
  viewer: 'look at every page; make and revoke your own personal tokens',
  operator: 'what a viewer may, plus clear cooldowns, affinity and scores, purge the response cache, pause serving, '
    + 'test, detect, enable and disable sources, and make the playground key',
  admin: 'everything: sources, keys, routes, adapters, prices, policies, settings, and everyone\'s personal tokens',
};
const OUTCOMES = [
  { value: '', label: 'any' },
  { value: 'done', label: 'done' },
  { value: 'failed', label: 'failed' },
  { value: 'refused', label: 'refused (role)' },
  { value: 'failed_login', label: 'failed login' },
];
const OUTCOME_KIND = { done: 'ok', failed: 'bad', refused: 'warn', failed_login: 'bad' };
const PAGE = 50;

function RolePill({ role }) {
  return html`<${Pill} kind=${ROLE_KIND[role] ?? 'off'} data-role=${role}>${role ?? '—'}<//>`;
}

// ---------------------------------------------------------------------------------------------
// Who you are

function WhoCard({ me }) {
  return html`<${Card} title="You">
    <${KV} items=${[
      ['Name', html`<span data-testid="me-name">${me.name}</span>`],
      ['Role', html`<${RolePill} role=${me.role} />`],
      ['Logged in with', VIA[me.via] ?? me.via ?? '—'],
      ['Your role may', CAN[me.role] ?? '—'],
    ]} />
  <//>`;
}

// ---------------------------------------------------------------------------------------------
// Personal tokens

function CreateTokenDialog({ me, onCreated, onClose }) {
  const roles = grantable(me);
  const admin = may('admin', me);
  const [name, setName] = useState('');
  const [role, setRole] = useState(roles[0] ?? 'viewer');
  const [days, setDays] = useState('30');
  const [owner, setOwner] = useState('');
  const { busy, error, submit } = useSubmit();
  const [formId] = useState(newFormId);
  const create = async (e) => {
    e?.preventDefault();
    const r = await submit(async () => {
      const n = name.trim();
      if (!n) throw new Error('Name: required (what the token is for, e.g. ci)');
      const expires = parseNumber('Expires after (days)', days, { int: true, min: 1, required: true });
      const body = { name: n, role, expires_days: expires };
      if (admin && owner.trim()) body.owner = owner.trim();
      return api('POST', '/tokens', body);
    });
    if (r) onCreated(r);
  };
  return html`<${Modal} title="Create personal token" onClose=${onClose} footer=${html`
      <${Button} onClick=${onClose}>Cancel<//>
      <${Button} variant="primary" type="submit" form=${formId} busy=${busy}>Create token<//>`}>
    <form id=${formId} class="stack" onSubmit=${create} novalidate>
      <p class="small muted">A personal token logs in to this UI and the admin API like the admin token, with its own role
        (at most yours) and an expiry. Its actions are audited under its owner's name.</p>
      <div class="form-grid">
        <${TextInput} label="Name" value=${name} onValue=${setName} required autofocus autocomplete="off" hint="what it is for" />
        <${SelectInput} label="Role" value=${role} onValue=${setRole} options=${roles}
          hint=${roles.length > 1 ? 'viewer < operator < admin' : 'the only role yours can give'} />
        <${NumberInput} label="Expires after (days)" value=${days} onValue=${setDays} step="1" min="1" required />
        ${admin ? html`<${TextInput} label="Owner" value=${owner} onValue=${setOwner} autocomplete="off"
          hint=${`whose token it is (audited as them); empty: ${me.name}`} />` : null}
      </div>
      <${FormError} error=${error} />
    </form>
  <//>`;
}

function TokenSecretDialog({ created, onClose }) {
  const input = useRef(null);
  const [copied, setCopied] = useState(null);
  const copy = async () => {
    const ok = await copyText(created.token, input.current);
    setCopied(ok);
    if (ok) toast('Token copied', 'ok', 1500);
  };
  return html`<${Modal} title=${`Token ${created.name} created`} onClose=${onClose} dismissable=${false} footer=${html`
      <${Button} variant="primary" onClick=${onClose}>Done<//>`}>
    <div class="state warnbox" role="alert">
      <strong>Copy the token now: it will not be shown again.</strong> Only a digest of it is kept; if it is lost, revoke it and create another.
    </div>
    <div class="field">
      <label for="new-token-secret">New token</label>
      <div class="row">
        <input id="new-token-secret" ref=${input} class="mono secret grow" readonly value=${created.token}
          onFocus=${(e) => e.currentTarget.select()} />
        <${Button} onClick=${copy} aria-label="Copy token">Copy<//>
      </div>
      ${copied === false ? html`<div class="hint" role="status">The clipboard is not available here: the token is selected, copy it with Ctrl+C (⌘C).</div>` : null}
    </div>
    <p class="small muted">Owner ${created.owner ?? '—'}, role ${created.role ?? '—'}${created.expires_ms ? `, expires ${fmtTime(created.expires_ms)}` : ''}.
      Log in with it here, or send it to the admin API as <code>Authorization: Bearer …</code>.</p>
  <//>`;
}

function Tokens({ me }) {
  const tokens = useApi('/tokens');
  const [dialog, setDialog] = useState(null);
  const list = tokens.data?.tokens ?? [];
  const close = () => setDialog(null);
  const columns = [
    { key: 'name', label: 'Name', class: 'name', render: (t) => html`<strong>${t.name}</strong>` },
    { key: 'owner', label: 'Owner', render: (t) => html`<span class="wrap-any">${t.owner ?? '—'}</span>` },
    { key: 'role', label: 'Role', render: (t) => html`<${RolePill} role=${t.role} />` },
    { key: 'hint', label: 'Token', render: (t) => html`<span class="mono nowrap">${t.hint ?? '—'}</span>` },
    { key: 'created', label: 'Created', render: (t) => html`<span class="nowrap" title=${fmtTime(t.created_ms)}>${fmtAgo(t.created_ms)}</span>` },
    { key: 'expires', label: 'Expires', render: (t) => {
      if (t.expired) return html`<${Pill} kind="bad" title=${`expired ${fmtTime(t.expires_ms)}`}>expired<//>`;
      if (t.expires_ms == null) return 'never';
      return html`<span class="nowrap" title=${fmtTime(t.expires_ms)}>${fmtAgo(t.expires_ms)}</span>`;
    } },
    { key: 'actions', label: 'Actions', class: 'actions', render: (t) => html`<${Button} size="sm" variant="danger"
      aria-label=${`Revoke token ${t.name}`} onClick=${() => setDialog({ kind: 'revoke', t })}>Revoke<//>` },
  ];

  let body;
  if (tokens.loading && !tokens.data) body = html`<${Loading} label="Loading tokens…" />`;
  else if (tokens.error && !tokens.data) body = html`<${ErrorBox} error=${tokens.error} onRetry=${tokens.reload} />`;
  else if (list.length === 0) body = html`<${Empty}>No personal tokens${may('admin', me) ? '' : ' of yours'} yet.<//>`;
  else {
    body = html`<${Table} caption="Personal tokens" rows=${list} columns=${columns} rowKey=${(t) => t.id}
      rowClass=${(t) => (t.expired ? 'row-disabled' : '')} />`;
  }

  const d = dialog;
  return html`<${Card} title=${may('admin', me) ? 'Personal tokens (everyone\'s)' : 'Your personal tokens'}
      actions=${html`<${Button} variant="primary" onClick=${() => setDialog({ kind: 'create' })}>Create token<//>`}>
    ${tokens.error && tokens.data ? html`<${ErrorBox} error=${tokens.error} onRetry=${tokens.reload} />` : null}
    ${body}
    ${d?.kind === 'create' ? html`<${CreateTokenDialog} me=${me} onClose=${close}
      onCreated=${(created) => { setDialog({ kind: 'secret', created }); tokens.reload(); }} />` : null}
    ${d?.kind === 'secret' ? html`<${TokenSecretDialog} created=${d.created} onClose=${close} />` : null}
    ${d?.kind === 'revoke' ? html`<${ConfirmAction} danger title=${`Revoke token ${d.t.name}`} confirmLabel="Revoke token"
      message=${`Revoke ${d.t.name} (owner ${d.t.owner}, ${d.t.role})? Logging in or calling the admin API with it fails at once; this cannot be undone.`}
      action=${() => api('DELETE', `/tokens/${enc(d.t.id)}`)}
      onDone=${() => { toast(`Token ${d.t.name} revoked`, 'ok'); close(); tokens.reload(); }} onCancel=${close} />` : null}
  <//>`;
}

// ---------------------------------------------------------------------------------------------
// Audit trail

/** One side of a change: its JSON, or "none" (created / deleted). */
function Pane({ title, label, value }) {
  return html`<div class="stack change-pane">
    <div class="field-label">${title}</div>
    ${value === null || value === undefined
      ? html`<p class="muted small" aria-label=${label}>none</p>`
      : html`<pre tabindex="0" aria-label=${label}>${JSON.stringify(value, null, 2)}</pre>`}
  </div>`;
}

/** The top-level fields two objects differ in ([] unless both are plain objects). */
function changedFields(before, after) {
  const plain = (x) => x && typeof x === 'object' && !Array.isArray(x);
  if (!plain(before) || !plain(after)) return [];
  return [...new Set([...Object.keys(before), ...Object.keys(after)])]
    .filter((k) => JSON.stringify(before[k]) !== JSON.stringify(after[k]));
}

function AuditDetail({ e }) {
  const changes = e.changes ?? [];
  return html`<div class="stack">
    <${KV} items=${[
      ['Entry', html`<code>${e.id}</code>`],
      ['Time', `${fmtTime(e.at_ms)} (${e.at_ms})`],
      ['Actor', `${e.actor ?? '—'} (${e.role ?? 'no role'}, ${VIA[e.via] ?? e.via ?? '—'})`],
      ['Peer', e.peer ?? '—'],
      e.replica ? ['Replica', e.replica] : null,
      ['Request', `${e.method} ${e.path}`],
      ['Outcome', `${e.outcome}${e.status != null ? ` (${e.status})` : ''}`],
      e.note ? ['Note', e.note] : null,
    ]} />
    ${changes.length ? html`<div class="changes">${changes.map((c, i) => {
      const what = `${c.section} ${c.name ?? ''}`.trim();
      const kind = c.before == null ? 'added' : c.after == null ? 'removed' : 'changed';
      const fields = changedFields(c.before, c.after);
      return html`<section key=${i} class="change" aria-label=${`Change ${what}`}>
        <h3>${c.section} <span class="mono wrap-any">${c.name ?? ''}</span> <span class="muted small">${kind}${fields.length
          ? html`: <span data-testid="change-fields">${fields.join(', ')}</span>` : null}</span></h3>
        <div class="change-panes">
          <${Pane} title="Before" label=${`Before: ${what}`} value=${c.before} />
          <${Pane} title="After" label=${`After: ${what}`} value=${c.after} />
        </div>
      </section>`;
    })}</div>` : html`<p class="muted small">No change recorded.</p>`}
  </div>`;
}

function AuditRow({ e, expanded, onToggle }) {
  const changes = e.changes ?? [];
  const detailId = `audit-${e.id}`;
  return [
    html`<tr key="row" class=${e.outcome === 'done' ? '' : 'row-error'} data-outcome=${e.outcome} data-testid="audit-row">
      <td><button type="button" class="expander" aria-expanded=${expanded ? 'true' : 'false'} aria-controls=${expanded ? detailId : undefined}
        aria-label=${expanded ? 'Hide details' : 'Show details'} onClick=${onToggle}>${expanded ? '▾' : '▸'}</button></td>
      <td class="nowrap" title=${fmtAgo(e.at_ms)}>${fmtTime(e.at_ms)}</td>
      <td data-testid="audit-actor"><span class="wrap-any">${e.actor ?? '—'}</span>${e.role ? html` <span class="small muted">${e.role}</span>` : null}</td>
      <td><span class="tag">${e.method}</span> <span class="mono wrap-any">${e.path}</span></td>
      <td><${Pill} kind=${OUTCOME_KIND[e.outcome] ?? 'off'}>${e.outcome}<//></td>
      <td class="num"><${StatusCode} status=${e.status} /></td>
      <td class="small">${changes.length ? changes.map((c) => `${c.section} ${c.name ?? ''}`.trim()).join(', ') : html`<span class="muted">—</span>`}</td>
    </tr>`,
    expanded ? html`<tr key="detail" class="audit-detail" id=${detailId}><td colspan="7"><${AuditDetail} e=${e} /></td></tr>` : null,
  ];
}

const NO_FILTERS = { actor: '', outcome: '', path: '' };

function Audit() {
  const [draft, setDraft] = useState(NO_FILTERS);
  const [filters, setFilters] = useState(NO_FILTERS);
  const [state, setState] = useState({ entries: null, next: null, loading: true, more: false, error: null });
  const [open, setOpen] = useState(() => new Set());
  const inFlight = useRef(null);

  // until: null for the first page (replacing what is shown), next_until_ms for the next one.
  const load = useCallback(async (f, until = null) => {
    inFlight.current?.abort();
    const ctl = new AbortController();
    inFlight.current = ctl;
    setState((s) => ({ ...s, loading: true, more: until !== null, error: null }));
    try {
      const path = `/audit${query({ actor: f.actor.trim(), outcome: f.outcome, path: f.path.trim(), until_ms: until, limit: PAGE })}`;
      const d = await api('GET', path, undefined, { signal: ctl.signal });
      const got = d?.entries ?? [];
      setState((s) => {
        let entries = got;
        if (until !== null) {
          // Pages meet at a millisecond: an entry on the edge is listed once.
          const seen = new Set((s.entries ?? []).map((x) => x.id));
          entries = [...(s.entries ?? []), ...got.filter((x) => !seen.has(x.id))];
        }
        return { entries, next: d?.next_until_ms ?? null, loading: false, more: false, error: null };
      });
    } catch (error) {
      if (error?.name === 'AbortError') return;
      setState((s) => ({ ...s, loading: false, more: false, error }));
    } finally {
      if (inFlight.current === ctl) inFlight.current = null;
    }
  }, []);
  useEffect(() => { load(filters); }, [filters, load]);
  useEffect(() => () => inFlight.current?.abort(), []);

  const set = (k) => (v) => setDraft({ ...draft, [k]: v });
  const apply = (e) => { e?.preventDefault(); setFilters({ ...draft }); };
  const clear = () => { setDraft(NO_FILTERS); setFilters({ ...NO_FILTERS }); };
  const toggle = (id) => setOpen((s) => { const n = new Set(s); if (n.has(id)) n.delete(id); else n.add(id); return n; });
  const filtered = filters.actor.trim() || filters.outcome || filters.path.trim();

  let body;
  const entries = state.entries;
  if (state.error && !entries) body = html`<${ErrorBox} error=${state.error} onRetry=${() => load(filters)} />`;
  else if (!entries) body = html`<${Loading} label="Loading the audit trail…" />`;
  else if (entries.length === 0) {
    body = html`<${Empty}>${filtered ? 'No audit entries match these filters.' : 'Nothing audited yet.'}<//>`;
  } else {
    body = html`<div class="table-wrap"><table class="table">
        <caption class="sr-only">Audit trail</caption>
        <thead><tr>
          <th scope="col"><span class="sr-only">Details</span></th><th scope="col">Time</th><th scope="col">Actor</th>
          <th scope="col">Request</th><th scope="col">Outcome</th><th scope="col" class="num">Status</th><th scope="col">Changes</th>
        </tr></thead>
        <tbody>${entries.map((e) => html`<${AuditRow} key=${e.id} e=${e} expanded=${open.has(e.id)} onToggle=${() => toggle(e.id)} />`)}</tbody>
      </table></div>
      <div class="pager">
        <span class="small muted" role="status" data-testid="audit-count">${entries.length} entr${entries.length === 1 ? 'y' : 'ies'}, newest first</span>
        <span class="spacer"></span>
        ${state.next !== null ? html`<${Button} size="sm" busy=${state.more} onClick=${() => load(filters, state.next)}>More<//>`
          : html`<span class="small muted">the end</span>`}
      </div>`;
  }

  return html`<${Card} title="Audit trail" actions=${html`
      ${state.loading && entries ? html`<span class="spinner" role="status" aria-label="Refreshing"></span>` : null}
      <${Button} size="sm" onClick=${() => load(filters)}>Refresh<//>`}>
    <div class="stack">
      <p class="small muted">Every call of the admin API that changes something, every refused one and every failed login: who, from
        where, and what each change was before and after. Secrets are never written here.</p>
      <form onSubmit=${apply} aria-label="Audit filters">
        <div class="filters">
          <${TextInput} label="Actor" value=${draft.actor} onValue=${set('actor')} type="search" autocomplete="off" spellcheck="false" />
          <${SelectInput} label="Outcome" value=${draft.outcome} onValue=${(v) => { const next = { ...draft, outcome: v }; setDraft(next); setFilters(next); }}
            options=${OUTCOMES} />
          <${TextInput} label="Path contains" value=${draft.path} onValue=${set('path')} type="search" autocomplete="off"
            spellcheck="false" placeholder="/sources/" />
        </div>
        <div class="row filters-actions">
          <${Button} type="submit" variant="primary" size="sm">Apply filters<//>
          <${Button} size="sm" onClick=${clear}>Clear filters<//>
        </div>
      </form>
      ${state.error && entries ? html`<${ErrorBox} error=${state.error} />` : null}
      ${body}
    </div>
  <//>`;
}

// ---------------------------------------------------------------------------------------------

export default function AccessPage() {
  const me = useMe();
  if (!me) return html`<${Loading} />`;
  return html`<div class="stack page-access">
    <${PageHeader} title="Access" />
    <${WhoCard} me=${me} />
    <${Tokens} me=${me} />
    <${Audit} />
  </div>`;
}
