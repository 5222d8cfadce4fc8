// Sources: the upstream endpoints (GET /sources) with their health (GET /health), add / edit /
// delete / restore, a live test per source, and source templates (many keys, one configuration).
// Roles: viewers look; operators also test and enable / disable a source; admins change them.
import { html, useState, useMemo } from '../lib.js';
import { api } from '../api.js';
import { may } from '../access.js';
import {
  useApi, Loading, ErrorBox, Empty, Modal, Button, Toggle, Segmented, PageHeader, Card, Table,
  HealthTag, Pill, KV, toast, fmtMs, maskKey,
} from '../ui.js';
import {
  TextInput, NumberInput, SelectInput, KeyValueEditor, FormError, ConfirmAction, useSubmit, newFormId,
  parseNumber, str, enc, worstState, healthIndex, slotKey, slotTitle, Chips,
} from './forms.js';

// The numeric fields of a source: [field, label, integer?, default shown as hint].
const NUMBERS = [
  ['max_concurrent', 'Max concurrent requests', true, '10'],
  ['queue_timeout_seconds', 'Queue timeout (s)', false, '10'],
  ['rpm', 'Requests per minute', true, 'no limit'],
  ['timeout_seconds', 'Request timeout (s)', true, '120'],
  ['connect_timeout_seconds', 'Connect timeout (s)', true, '10'],
  ['first_byte_timeout_seconds', 'First byte timeout (s)', false, '60'],
  ['idle_timeout_seconds', 'Stream idle timeout (s)', false, '60'],
  ['stream_timeout_seconds', 'Stream timeout (s)', false, '1800'],
];
const KINDS = ['chat', 'image', 'embedding'];
// `http_version`: how the gateway speaks to the upstream (docs/deployment.md#http2).
const HTTP_VERSIONS = [
  { value: 'auto', label: 'auto (HTTP/2 where TLS offers it)' },
  { value: 'http1', label: 'HTTP/1.1 only' },
  { value: 'http2', label: 'HTTP/2 only (h2c on http://)' },
];

// Source fields the form does not edit: carried through a save unchanged.
const KEPT = ['passthrough', 'stream_whole_answers', 'detect_models_share_names', 'cache'];

/** A source (or template) as the form edits it: every value a string. */
function toForm(s = {}) {
  const f = {
    name: s.name ?? '',
    base_url: s.base_url ?? '',
    api_key: '',
    adapter: s.adapter ?? 'openai',
    http_version: s.http_version ?? 'auto',
    settings: Object.entries(s.settings ?? {}).map(([k, v]) => ({ k, v: String(v) })),
    models: (s.models ?? []).map((m) => ({ name: m.name ?? '', upstream: m.upstream ?? '', kind: m.kind ?? 'chat' })),
    enabled: s.enabled !== false,
    detect_models: s.detect_models === true,
    detected: s.detected_models ?? [],
    kept: Object.fromEntries(KEPT.filter((k) => s[k] !== undefined).map((k) => [k, s[k]])),
  };
  for (const [k] of NUMBERS) f[k] = str(s[k]);
  return f;
}

/**
 * The form's fields (all but name and api_key) in the API's form; empty numbers are left out
 * (the gateway's defaults apply). Throws an Error naming the field when one is wrong.
 */
function formFields(f, { withEnabled }) {
  const out = { ...(f.kept ?? {}) };
  const url = f.base_url.trim();
  if (!url) throw new Error('Base URL: required, e.g. https://api.openai.com/v1');
  out.base_url = url;
  out.adapter = f.adapter || 'openai';
  if (f.http_version && f.http_version !== 'auto') out.http_version = f.http_version;
  for (const [k, label, int] of NUMBERS) {
    const n = parseNumber(label, f[k], { int, min: k === 'max_concurrent' ? 1 : 0 });
    if (n !== undefined) out[k] = n;
  }
  const settings = {};
  f.settings.forEach((r, i) => {
    const k = r.k.trim();
    if (!k && !r.v) return;
    if (!k) throw new Error(`Setting ${i + 1}: give it a name`);
    if (k in settings) throw new Error(`Setting ${i + 1}: "${k}" is set twice`);
    settings[k] = r.v;
  });
  if (Object.keys(settings).length) out.settings = settings;
  const names = new Set();
  out.models = [];
  f.models.forEach((m, i) => {
    const name = m.name.trim();
    if (!name && !m.upstream.trim()) return;
    if (!name) throw new Error(`Model ${i + 1}: give it a name (what clients ask for)`);
    if (names.has(name)) throw new Error(`Model ${i + 1}: "${name}" is listed twice`);
    names.add(name);
    const model = { name, kind: m.kind || 'chat' };
    if (m.upstream.trim()) model.upstream = m.upstream.trim();
    out.models.push(model);
  });
  if (withEnabled) out.enabled = f.enabled;
  if (f.detect_models) out.detect_models = true;
  return out;
}

/** The fields a template keeps of a source as the API lists it (all but name, api_key and annotations). */
function sourceFieldsOf(source) {
  const { name, api_key, origin, deleted, detected_models, ...fields } = source;
  for (const k of Object.keys(fields)) if (fields[k] === null) delete fields[k];
  fields.models = (fields.models ?? []).map((m) => {
    const out = { name: m.name, kind: m.kind ?? 'chat' };
    if (m.upstream) out.upstream = m.upstream;
    return out;
  });
  return fields;
}

/** A template from a source: its fields but `enabled` (a source made from it starts enabled). */
function templateFieldsOf(source) {
  const { enabled, ...fields } = sourceFieldsOf(source);
  return fields;
}

// ---------------------------------------------------------------------------------------------
// The fields of a source, shared by the source and template forms

function SourceFields({ form, set, adapters, withName, nameLabel = 'Name', nameReadOnly, withKey, keyHint, withEnabled }) {
  const field = (k) => (v) => set({ ...form, [k]: v });
  const adapterNames = (adapters ?? []).map((a) => a.name);
  if (form.adapter && !adapterNames.includes(form.adapter)) adapterNames.push(form.adapter);
  const setModel = (i, patch) => set({ ...form, models: form.models.map((m, j) => (j === i ? { ...m, ...patch } : m)) });
  return html`
    <div class="form-grid">
      ${withName ? html`<${TextInput} label=${nameLabel} value=${form.name} onValue=${field('name')} required
        readonly=${nameReadOnly} hint=${nameReadOnly ? 'cannot be renamed' : 'letters, digits, - and _'}
        autocomplete="off" />` : null}
      <${TextInput} label="Base URL" value=${form.base_url} onValue=${field('base_url')} required type="url"
        placeholder="https://api.openai.com/v1" autocomplete="off" />
      ${withKey ? html`<${TextInput} label="API key" type="password" value=${form.api_key} onValue=${field('api_key')}
        hint=${keyHint} autocomplete="new-password" />` : null}
      <${SelectInput} label="Adapter" value=${form.adapter} onValue=${field('adapter')}
        options=${adapterNames.length ? adapterNames : ['openai']} />
      <${SelectInput} label="HTTP to the upstream" value=${form.http_version} onValue=${field('http_version')}
        options=${HTTP_VERSIONS} />
      ${withEnabled ? html`<div class="field"><${Toggle} label="Enabled" checked=${form.enabled} onChange=${field('enabled')} /></div>` : null}
      <div class="field"><${Toggle} label="Detect the upstream's models" checked=${form.detect_models} onChange=${field('detect_models')} /></div>
    </div>
    ${form.detected.length ? html`<p class="muted">Detected: ${form.detected.join(', ')}</p>` : null}
    <fieldset class="fieldset">
      <legend>Models</legend>
      ${form.models.length === 0 ? html`<p class="muted">No models yet: a source serves the models listed here${form.detect_models ? ' and those its upstream lists' : ''}.</p>` : null}
      ${form.models.map((m, i) => html`<div class="form-row model-edit" key=${i}>
        <${TextInput} label=${`Model ${i + 1} name`} value=${m.name} onValue=${(v) => setModel(i, { name: v })} placeholder="gpt-4o-mini" />
        <${TextInput} label=${`Model ${i + 1} upstream name`} value=${m.upstream} onValue=${(v) => setModel(i, { upstream: v })}
          placeholder="same as the name" />
        <${SelectInput} label=${`Model ${i + 1} kind`} value=${m.kind} onValue=${(v) => setModel(i, { kind: v })} options=${KINDS} />
        <${Button} size="sm" variant="ghost" aria-label=${`Remove model ${i + 1}`}
          onClick=${() => set({ ...form, models: form.models.filter((_, j) => j !== i) })}>Remove<//>
      </div>`)}
      <${Button} size="sm" onClick=${() => set({ ...form, models: [...form.models, { name: '', upstream: '', kind: 'chat' }] })}>Add model<//>
    </fieldset>
    <fieldset class="fieldset">
      <legend>Limits and timeouts</legend>
      <div class="form-grid">
        ${NUMBERS.map(([k, label, int, def]) => html`<${NumberInput} key=${k} label=${label} value=${form[k]}
          onValue=${field(k)} step=${int ? '1' : 'any'} placeholder=${def} hint=${`empty: ${def}`} />`)}
      </div>
    </fieldset>
    <${KeyValueEditor} label="Adapter settings" item="Setting" rows=${form.settings} onChange=${field('settings')}
      keyPlaceholder="header.X-Org" valuePlaceholder="acme" />`;
}

// ---------------------------------------------------------------------------------------------
// Dialogs

/** Add (source null) or edit a source. */
function SourceDialog({ source, adapters, templates, withEnabled, onSaved, onTemplateSaved, onClose }) {
  const isNew = !source;
  const [form, setForm] = useState(() => toForm(source ?? { models: [{ name: '' }] }));
  const [saveAs, setSaveAs] = useState(null);
  const { busy, error, setError, submit } = useSubmit();
  const [formId] = useState(newFormId);
  const sendEnabled = withEnabled || !form.enabled;

  const fillFrom = (name) => {
    const t = (templates ?? []).find((x) => x.name === name);
    if (!t) return;
    const { name: _n, ...fields } = t;
    setForm({ ...toForm(fields), name: form.name, api_key: form.api_key });
    toast(`Filled from template ${name}: give the name and the key`, 'info');
  };

  const save = async (e) => {
    e?.preventDefault();
    const done = await submit(async () => {
      const name = form.name.trim();
      if (!name) throw new Error('Name: required');
      const body = { name, ...formFields(form, { withEnabled: sendEnabled }) };
      if (form.api_key) body.api_key = form.api_key;
      if (isNew) await api('POST', '/sources', body);
      else await api('PUT', `/sources/${enc(source.name)}`, body);
      return name;
    });
    if (done) {
      toast(isNew ? `Source ${done} added` : `Source ${done} saved`, 'ok');
      onSaved();
    }
  };

  const openSaveAs = () => {
    try {
      setError(null);
      setSaveAs(formFields(form, { withEnabled: false }));
    } catch (err) { setError(err); }
  };

  return html`<${Modal} wide title=${isNew ? 'Add source' : `Edit source ${source.name}`} onClose=${onClose} footer=${html`
      <${Button} onClick=${openSaveAs}>Save as template<//>
      <${Button} onClick=${onClose}>Cancel<//>
      <${Button} variant="primary" type="submit" form=${formId} busy=${busy}>${isNew ? 'Add source' : 'Save'}<//>`}>
    <form id=${formId} class="stack" onSubmit=${save} novalidate>
      ${isNew && templates?.length ? html`<div class="form-row">
        <${SelectInput} label="Fill from template" value="" onValue=${fillFrom}
          options=${[{ value: '', label: 'choose a template…' }, ...templates.map((t) => ({ value: t.name, label: t.name }))]} />
      </div>` : null}
      <${SourceFields} form=${form} set=${setForm} adapters=${adapters} withName nameReadOnly=${!isNew}
        withKey keyHint=${isNew ? 'empty: no key is sent' : `leave empty to keep the current key (${maskKey(source.api_key)})`}
        withEnabled />
      <${FormError} error=${error} />
    </form>
    ${saveAs ? html`<${SaveTemplateDialog} fields=${saveAs} onClose=${() => setSaveAs(null)}
      onSaved=${() => { setSaveAs(null); onTemplateSaved?.(); }} />` : null}
  <//>`;
}

/** Asks for a template name and saves `fields` under it. */
function SaveTemplateDialog({ fields, suggested = '', onSaved, onClose }) {
  const [name, setName] = useState(suggested);
  const { busy, error, submit } = useSubmit();
  const [formId] = useState(newFormId);
  const save = async (e) => {
    e?.preventDefault();
    const ok = await submit(async () => {
      const n = name.trim();
      if (!n) throw new Error('Template name: required');
      await api('POST', '/source-templates', { name: n, ...fields });
      return n;
    });
    if (ok) {
      toast(`Template ${ok} saved`, 'ok');
      onSaved(ok);
    }
  };
  return html`<${Modal} title="Save as template" onClose=${onClose} footer=${html`
      <${Button} onClick=${onClose}>Cancel<//>
      <${Button} variant="primary" type="submit" form=${formId} busy=${busy}>Save template<//>`}>
    <form id=${formId} class="stack" onSubmit=${save}>
      <p class="muted">A template keeps every field of the source but its name and API key.</p>
      <${TextInput} label="Template name" value=${name} onValue=${setName} required autofocus autocomplete="off" />
      <p class="muted">Base URL ${fields.base_url}, adapter ${fields.adapter}, ${fields.models?.length ?? 0} model(s).</p>
      <${FormError} error=${error} />
    </form>
  <//>`;
}

/** Tests a source: POST /sources/{name}/test with an optional model. */
function TestDialog({ source, onClose }) {
  const models = source.models ?? [];
  const firstChat = models.find((m) => (m.kind ?? 'chat') === 'chat');
  const [model, setModel] = useState(firstChat?.name ?? '');
  const [result, setResult] = useState(null);
  const { busy, error, submit } = useSubmit();
  const run = async () => {
    setResult(null);
    const r = await submit(() => api('POST', `/sources/${enc(source.name)}/test`, model ? { model } : {}));
    if (r) setResult(r);
  };
  return html`<${Modal} title=${`Test source ${source.name}`} onClose=${onClose} footer=${html`
      <${Button} onClick=${onClose}>Close<//>
      <${Button} variant="primary" busy=${busy} onClick=${run}>${busy ? 'Testing…' : 'Run test'}<//>`}>
    <p class="muted">Sends a short chat request to the upstream through the source's adapter.</p>
    <${SelectInput} label="Model to test" value=${model} onValue=${setModel}
      options=${[{ value: '', label: 'the gateway picks' }, ...models.map((m) => ({ value: m.name, label: `${m.name}${m.kind && m.kind !== 'chat' ? ` (${m.kind})` : ''}` }))]} />
    ${busy ? html`<${Loading} label="Waiting for the upstream…" />` : null}
    <${FormError} error=${error} />
    ${result ? html`<div class="stack test-result" role="status" aria-live="polite">
      <p>${result.ok ? html`<${Pill} kind="ok">Test passed<//>` : html`<${Pill} kind="bad">Test failed<//>`}</p>
      <${KV} items=${[
        ['Model', result.model ?? '—'],
        ['HTTP status', result.status ?? '—'],
        ['Latency', fmtMs(result.latency_ms)],
        ['First byte', fmtMs(result.first_byte_ms)],
      ]} />
      ${result.answer != null && result.answer !== '' ? html`<h3>Answer</h3><pre>${String(result.answer)}</pre>` : null}
      ${result.error ? html`<${ErrorBox} title="Upstream error" error=${{ message: result.error.message ?? String(result.error), code: result.error.code }} />` : null}
    </div>` : null}
  <//>`;
}

/** Restores a deleted config.yaml source (POSTs it back), optionally with a new key. */
function RestoreDialog({ source, withEnabled, onDone, onCancel }) {
  const [key, setKey] = useState('');
  const action = () => {
    const fields = sourceFieldsOf(source);
    if (!withEnabled) delete fields.enabled;
    const body = { name: source.name, ...fields };
    if (key) body.api_key = key;
    return api('POST', '/sources', body);
  };
  return html`<${ConfirmAction} title=${`Restore source ${source.name}`} confirmLabel="Restore" action=${action}
      onDone=${onDone} onCancel=${onCancel}
      message=${`Source ${source.name} comes from config.yaml and was deleted at run time. Restoring it adds it back with the fields it had.`}>
    <${TextInput} label="API key" type="password" value=${key} onValue=${setKey} autocomplete="new-password"
      hint=${`leave empty to keep config.yaml's key (${maskKey(source.api_key)})`} />
  <//>`;
}

// ---------------------------------------------------------------------------------------------
// Templates

function TemplateDialog({ template, adapters, onSaved, onClose }) {
  const isNew = !template;
  const [form, setForm] = useState(() => toForm(template ?? { models: [{ name: '' }] }));
  const { busy, error, submit } = useSubmit();
  const [formId] = useState(newFormId);
  const save = async (e) => {
    e?.preventDefault();
    const done = await submit(async () => {
      const name = form.name.trim();
      if (!name) throw new Error('Template name: required');
      const body = { name, ...formFields(form, { withEnabled: false }) };
      if (isNew) await api('POST', '/source-templates', body);
      else await api('PUT', `/source-templates/${enc(template.name)}`, body);
      return name;
    });
    if (done) {
      toast(`Template ${done} saved`, 'ok');
      onSaved();
    }
  };
  return html`<${Modal} wide title=${isNew ? 'New template' : `Edit template ${template.name}`} onClose=${onClose} footer=${html`
      <${Button} onClick=${onClose}>Cancel<//>
      <${Button} variant="primary" type="submit" form=${formId} busy=${busy}>${isNew ? 'Add template' : 'Save template'}<//>`}>
    <form id=${formId} class="stack" onSubmit=${save} novalidate>
      <p class="muted">Every source field but the name and the API key: sources made from it differ only in their key.</p>
      <${SourceFields} form=${form} set=${setForm} adapters=${adapters} withName nameLabel="Template name" nameReadOnly=${!isNew} />
      <${FormError} error=${error} />
    </form>
  <//>`;
}

/** POST /source-templates/{name}/sources with {name, api_key}. */
function FromTemplateDialog({ template, onSaved, onClose }) {
  const [name, setName] = useState('');
  const [key, setKey] = useState('');
  const { busy, error, submit } = useSubmit();
  const [formId] = useState(newFormId);
  const save = async (e) => {
    e?.preventDefault();
    const done = await submit(async () => {
      const n = name.trim();
      if (!n) throw new Error('Source name: required');
      await api('POST', `/source-templates/${enc(template.name)}/sources`, key ? { name: n, api_key: key } : { name: n });
      return n;
    });
    if (done) {
      toast(`Source ${done} created from template ${template.name}`, 'ok');
      onSaved();
    }
  };
  return html`<${Modal} title=${`New source from template ${template.name}`} onClose=${onClose} footer=${html`
      <${Button} onClick=${onClose}>Cancel<//>
      <${Button} variant="primary" type="submit" form=${formId} busy=${busy}>Create source<//>`}>
    <form id=${formId} class="stack" onSubmit=${save}>
      <${TextInput} label="Source name" value=${name} onValue=${setName} required autofocus autocomplete="off"
        hint="letters, digits, - and _" />
      <${TextInput} label="API key" type="password" value=${key} onValue=${setKey} autocomplete="new-password"
        hint="each source made from a template has its own key, cooldowns and score" />
      <${FormError} error=${error} />
    </form>
  <//>`;
}

function TemplatesTab({ templates, adapters, onSourcesChanged }) {
  const [dialog, setDialog] = useState(null);
  const admin = may('admin');
  const list = templates.data?.templates ?? [];
  const close = () => setDialog(null);
  const saved = () => { close(); templates.reload(); };

  let body;
  if (templates.loading && !templates.data) body = html`<${Loading} />`;
  else if (templates.error && !templates.data) body = html`<${ErrorBox} error=${templates.error} onRetry=${templates.reload} />`;
  else if (list.length === 0) {
    body = html`<${Empty}>No templates yet. A template holds a source's configuration without its name and key${admin
      ? '; make one here or with "Save as template" on a source.' : '.'}<//>`;
  }
  else {
    body = html`<${Table} caption="Source templates" rowKey=${(t) => t.name} rows=${list} columns=${[
      { key: 'name', label: 'Template', render: (t) => html`<strong>${t.name}</strong>` },
      { key: 'adapter', label: 'Adapter', render: (t) => t.adapter ?? 'openai' },
      { key: 'base_url', label: 'Base URL', render: (t) => html`<span class="mono wrap-any">${t.base_url ?? '—'}</span>` },
      { key: 'models', label: 'Models', render: (t) => html`<${Chips} items=${(t.models ?? []).map((m) => m.name)} />` },
      admin && { key: 'actions', label: 'Actions', class: 'actions', render: (t) => html`<div class="btn-group">
        <${Button} size="sm" variant="primary" aria-label=${`New source from template ${t.name}`} onClick=${() => setDialog({ kind: 'from', t })}>New source<//>
        <${Button} size="sm" aria-label=${`Edit template ${t.name}`} onClick=${() => setDialog({ kind: 'edit', t })}>Edit<//>
        <${Button} size="sm" variant="danger" aria-label=${`Delete template ${t.name}`} onClick=${() => setDialog({ kind: 'delete', t })}>Delete<//>
      </div>` },
    ].filter(Boolean)} />`;
  }

  return html`<${Card} title="Templates" actions=${admin ? html`<${Button} variant="primary" onClick=${() => setDialog({ kind: 'new' })}>New template<//>` : null}>
    ${templates.error && templates.data ? html`<${ErrorBox} error=${templates.error} onRetry=${templates.reload} />` : null}
    ${body}
    ${dialog?.kind === 'new' ? html`<${TemplateDialog} adapters=${adapters} onSaved=${saved} onClose=${close} />` : null}
    ${dialog?.kind === 'edit' ? html`<${TemplateDialog} template=${dialog.t} adapters=${adapters} onSaved=${saved} onClose=${close} />` : null}
    ${dialog?.kind === 'from' ? html`<${FromTemplateDialog} template=${dialog.t} onClose=${close}
      onSaved=${() => { close(); onSourcesChanged(); }} />` : null}
    ${dialog?.kind === 'delete' ? html`<${ConfirmAction} danger title=${`Delete template ${dialog.t.name}`} confirmLabel="Delete template"
      message=${`Delete template ${dialog.t.name}? Sources made from it stay as they are.`}
      action=${() => api('DELETE', `/source-templates/${enc(dialog.t.name)}`)}
      onDone=${() => { toast(`Template ${dialog.t.name} deleted`, 'ok'); saved(); }} onCancel=${close} />` : null}
  <//>`;
}

// ---------------------------------------------------------------------------------------------
// Sources

/** The worst state of a source's slots, and a tooltip listing each model that is not healthy. */
function sourceHealth(source, index, now) {
  if (source.enabled === false) return { state: 'disabled', title: `${source.name} is disabled: no requests go to it` };
  const slots = (source.models ?? []).map((m) => index.get(slotKey(source.name, m.name))).filter(Boolean);
  if (slots.length === 0) return { state: null, title: 'no health data' };
  const state = worstState(slots.map((s) => s.state));
  const bad = slots.filter((s) => s.state !== 'healthy');
  const title = bad.length === 0
    ? `all ${slots.length} model${slots.length === 1 ? '' : 's'} healthy`
    : bad.map((s) => slotTitle(s, now)).join('\n\n');
  return { state, title };
}

/**
 * The enabled switch of a source (operators and admins): POST /sources/{name}/enable or
 * /disable; it shows the wanted state until the list reloads, the old one when refused.
 */
function EnabledSwitch({ source, onChanged }) {
  const [want, setWant] = useState(null);
  const on = source.enabled !== false;
  const flip = async (v) => {
    setWant(v);
    try {
      await api('POST', `/sources/${enc(source.name)}/${v ? 'enable' : 'disable'}`);
      toast(`Source ${source.name} ${v ? 'enabled' : 'disabled'}`, 'ok');
      await onChanged();
    } catch (e) {
      toast(e.message, 'error');
    } finally {
      setWant(null);
    }
  };
  return html`<${Toggle} label=${html`<span class="sr-only">Enabled: ${source.name}</span>`} checked=${want ?? on}
    disabled=${want !== null} onChange=${flip} />`;
}

function SourcesTab({ sources, health, adapters, templates, reload, reloadTemplates }) {
  const [dialog, setDialog] = useState(null);
  const admin = may('admin');
  const operator = may('operator');
  const index = useMemo(() => healthIndex(health.data), [health.data]);
  const list = sources.data?.sources ?? [];
  const withEnabled = list.some((s) => 'enabled' in s);
  const gatewayNow = health.data?.now_ms ?? Date.now();
  const close = () => setDialog(null);
  const saved = () => { close(); reload(); };

  const columns = [
    { key: 'name', label: 'Name', render: (s) => html`<strong class=${s.deleted ? 'struck' : ''}>${s.name}</strong>
      ${s.deleted ? html` <${Pill} kind="off" title="deleted at run time; config.yaml still has it">deleted<//>` : null}` },
    { key: 'health', label: 'Health', render: (s) => {
      if (s.deleted) return html`<span class="muted">—</span>`;
      const h = sourceHealth(s, index, gatewayNow);
      return h.state ? html`<${HealthTag} state=${h.state} title=${h.title} />` : html`<span class="muted" title=${h.title}>—</span>`;
    } },
    operator && { key: 'enabled', label: 'Enabled', render: (s) => (s.deleted ? null
      : html`<${EnabledSwitch} source=${s} onChanged=${reload} />`) },
    { key: 'origin', label: 'Origin', render: (s) => s.origin ?? '—' },
    { key: 'adapter', label: 'Adapter', render: (s) => html`<span class="mono">${s.adapter}</span>` },
    { key: 'base_url', label: 'Base URL', render: (s) => html`<span class="mono wrap-any">${s.base_url}</span>` },
    { key: 'models', label: 'Models', render: (s) => html`<${Chips} items=${[...(s.models ?? []).map((m) => (m.kind && m.kind !== 'chat' ? `${m.name} (${m.kind})` : m.name)), ...(s.detected_models ?? []).map((m) => `${m} (detected)`)]} />` },
    { key: 'api_key', label: 'Key', render: (s) => html`<span class="mono nowrap">${s.api_key ? maskKey(s.api_key) : html`<span class="muted">none</span>`}</span>` },
    operator && { key: 'actions', label: 'Actions', class: 'actions', render: (s) => (s.deleted
      ? (admin ? html`<div class="btn-group"><${Button} size="sm" aria-label=${`Restore ${s.name}`} onClick=${() => setDialog({ kind: 'restore', s })}>Restore<//></div>` : null)
      : html`<div class="btn-group">
          <${Button} size="sm" aria-label=${`Test ${s.name}`} onClick=${() => setDialog({ kind: 'test', s })}>Test<//>
          ${admin ? html`
          <${Button} size="sm" aria-label=${`Edit ${s.name}`} onClick=${() => setDialog({ kind: 'edit', s })}>Edit<//>
          <${Button} size="sm" aria-label=${`Save ${s.name} as template`} onClick=${() => setDialog({ kind: 'template', s })}>Save as template<//>
          <${Button} size="sm" variant="danger" aria-label=${`Delete ${s.name}`} onClick=${() => setDialog({ kind: 'delete', s })}>Delete<//>` : null}
        </div>`) },
  ].filter(Boolean);

  let body;
  if (sources.loading && !sources.data) body = html`<${Loading} label="Loading sources…" />`;
  else if (sources.error && !sources.data) body = html`<${ErrorBox} error=${sources.error} onRetry=${reload} />`;
  else if (list.length === 0) body = html`<${Empty}>No sources yet. A source is one upstream endpoint and account${admin ? ': add one to start serving models' : ''}.<//>`;
  else body = html`<${Table} caption="Sources" rows=${list} columns=${columns} rowKey=${(s) => `${s.name}${s.deleted ? ':deleted' : ''}`}
    rowClass=${(s) => (s.deleted ? 'row-deleted' : s.enabled === false ? 'row-disabled' : '')} />`;

  const d = dialog;
  return html`<${Card} title="Sources" actions=${admin ? html`<${Button} variant="primary" onClick=${() => setDialog({ kind: 'new' })}>Add source<//>` : null}>
    ${sources.error && sources.data ? html`<${ErrorBox} error=${sources.error} onRetry=${reload} />` : null}
    ${health.error ? html`<p class="muted" role="status">Health unavailable: ${health.error.message}</p>` : null}
    ${body}
    ${d?.kind === 'new' ? html`<${SourceDialog} adapters=${adapters} templates=${templates} withEnabled=${withEnabled} onSaved=${saved}
      onTemplateSaved=${reloadTemplates} onClose=${close} />` : null}
    ${d?.kind === 'edit' ? html`<${SourceDialog} source=${d.s} adapters=${adapters} withEnabled=${withEnabled} onSaved=${saved}
      onTemplateSaved=${reloadTemplates} onClose=${close} />` : null}
    ${d?.kind === 'test' ? html`<${TestDialog} source=${d.s} onClose=${close} />` : null}
    ${d?.kind === 'template' ? html`<${SaveTemplateDialog} fields=${templateFieldsOf(d.s)} suggested=${`${d.s.name}-template`}
      onSaved=${() => { close(); reloadTemplates(); }} onClose=${close} />` : null}
    ${d?.kind === 'restore' ? html`<${RestoreDialog} source=${d.s} withEnabled=${withEnabled}
      onDone=${() => { toast(`Source ${d.s.name} restored`, 'ok'); saved(); }} onCancel=${close} />` : null}
    ${d?.kind === 'delete' ? html`<${ConfirmAction} danger title=${`Delete source ${d.s.name}`} confirmLabel="Delete source"
      message=${d.s.origin === 'runtime'
        ? `Delete source ${d.s.name}? Requests stop going to it at once.`
        : `Delete source ${d.s.name}? It comes from config.yaml, so it is hidden (and stays hidden across restarts) until you restore it.`}
      action=${() => api('DELETE', `/sources/${enc(d.s.name)}`)}
      onDone=${() => { toast(`Source ${d.s.name} deleted`, 'ok'); saved(); }} onCancel=${close}>
      <p class="muted">The gateway refuses while a route uses the source; AUTO slots naming it are checked too.</p>
    <//>` : null}
  <//>`;
}

export default function SourcesPage() {
  const [tab, setTab] = useState(() => (location.hash.includes('tab=templates') ? 'templates' : 'sources'));
  const sources = useApi('/sources');
  const health = useApi('/health', [], { refreshMs: 5000 });
  const adapters = useApi('/adapters');
  const templates = useApi('/source-templates');
  const reload = () => Promise.all([sources.reload(), health.reload(), adapters.reload(), templates.reload()]);
  return html`<div class="page page-sources">
    <${PageHeader} title="Sources">
      <${Segmented} label="Show" value=${tab} onChange=${setTab}
        options=${[{ value: 'sources', label: 'Sources' }, { value: 'templates', label: 'Templates' }]} />
    <//>
    ${tab === 'sources'
      ? html`<${SourcesTab} sources=${sources} health=${health} adapters=${adapters.data?.adapters}
          templates=${templates.data?.templates} reload=${reload} reloadTemplates=${templates.reload} />`
      : html`<${TemplatesTab} templates=${templates} adapters=${adapters.data?.adapters} onSourcesChanged=${reload} />`}
  </div>`;
}
