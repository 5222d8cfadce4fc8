// Adapters: the protocol translators (GET /adapters), uploading a .wasm component or a .lua
// script (checked by the gateway before anything changes), viewing a Lua script, deleting an
// uploaded one.
import { html, useState, useRef } from '../lib.js';
import { api } from '../api.js';
import { may } from '../access.js';
import { useApi, Loading, ErrorBox, Empty, Modal, Button, PageHeader, Card, Table, Pill, KV, toast } from '../ui.js';
import { TextInput, FormError, ConfirmAction, useSubmit, newFormId, enc, Chips } from './forms.js';

const NAME_OK = /^[A-Za-z0-9_-]+$/;

/** A default adapter name from a file name: without its extension, other characters as '-'. */
function nameFromFile(fileName) {
  return fileName.replace(/\.(wasm|lua)$/i, '').replace(/[^A-Za-z0-9_-]+/g, '-').replace(/^-+|-+$/g, '');
}

function fmtSize(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1 << 20) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / (1 << 20)).toFixed(1)} MiB`;
}

function UploadCard({ adapters, onUploaded }) {
  const [file, setFile] = useState(null);
  const [name, setName] = useState('');
  const [nameTouched, setNameTouched] = useState(false);
  const [dragging, setDragging] = useState(false);
  const [result, setResult] = useState(null);
  const { busy, error, setError, submit } = useSubmit();
  const input = useRef(null);
  const [formId] = useState(newFormId);
  const existing = (adapters ?? []).find((a) => a.name === name.trim());

  const choose = (f) => {
    if (!f) return;
    setFile(f);
    setResult(null);
    setError(null);
    if (!nameTouched || !name) setName(nameFromFile(f.name));
  };
  const onDrop = (e) => {
    e.preventDefault();
    setDragging(false);
    const f = e.dataTransfer?.files?.[0];
    if (f) choose(f);
  };
  // `rename`: install a component under this name although it describes itself by another.
  const upload = async (e, rename = false) => {
    e?.preventDefault();
    setResult(null);
    const r = await submit(async () => {
      const n = name.trim();
      if (!file) throw new Error('Choose a .wasm component or a .lua script first');
      if (!n) throw new Error('Name: required');
      if (!NAME_OK.test(n)) throw new Error(`Name: "${n}" is not an adapter name: use letters, digits, - and _`);
      return api('PUT', `/adapters/${enc(n)}${rename ? '?rename=true' : ''}`, file);
    });
    if (r) {
      setResult(r);
      toast(`Adapter ${r.name} installed`, 'ok');
      // A component that names itself otherwise: the name in the upload is the one sources use.
      if (r.note) toast(r.note, 'info');
      setFile(null);
      if (input.current) input.current.value = '';
      onUploaded();
    }
  };

  return html`<${Card} title="Upload an adapter">
    <form id=${formId} class="stack upload-form" onSubmit=${upload}>
      <p class="muted">A WebAssembly component (<code>.wasm</code>) or a legacy Lua script (<code>.lua</code>), up to 64 MiB.
        The gateway compiles it, instantiates it and asks it to describe itself before anything changes: a bad one is refused and the
        adapter in place stays. A name of a built-in adapter overrides it.</p>
      <div class="form-row">
        <div class="field">
          <label for=${`${formId}-file`}>Adapter file</label>
          <input id=${`${formId}-file`} ref=${input} type="file" accept=".wasm,.lua,application/wasm,text/x-lua"
            onChange=${(e) => choose(e.currentTarget.files?.[0])} />
        </div>
        <${TextInput} label="Adapter name" value=${name} onValue=${(v) => { setName(v); setNameTouched(true); }}
          hint=${existing ? `replaces the ${existing.origin === 'builtin' ? 'built-in' : 'uploaded'} adapter ${existing.name}` : 'letters, digits, - and _; default: the file name'}
          autocomplete="off" />
      </div>
      <button type="button" class=${`dropzone ${dragging ? 'dragging' : ''}`}
        aria-label="Drop zone: drop a .wasm or .lua file here, or press to choose one"
        onClick=${() => input.current?.click()}
        onDragEnter=${(e) => { e.preventDefault(); setDragging(true); }}
        onDragOver=${(e) => { e.preventDefault(); if (e.dataTransfer) e.dataTransfer.dropEffect = 'copy'; }}
        onDragLeave=${() => setDragging(false)}
        onDrop=${onDrop}>
        ${file
          ? html`<span><strong>${file.name}</strong> (${fmtSize(file.size)})</span>`
          : html`<span>Drop a <code>.wasm</code> or <code>.lua</code> file here, or click to choose one</span>`}
      </button>
      <div class="row">
        <${Button} variant="primary" type="submit" busy=${busy} disabled=${!file}>${busy ? 'Checking…' : 'Upload and install'}<//>
      </div>
    </form>
    <${FormError} error=${error} />
    ${error?.code === 'adapter_name_mismatch' && file ? html`<div class="row">
      <${Button} busy=${busy} onClick=${() => upload(null, true)}>Install as ${name.trim()} anyway<//>
    </div>` : null}
    ${result ? html`<div class="state okbox" role="status">
      <strong>Installed adapter ${result.name}</strong>
      <${KV} items=${[['Name', result.name], ['Version', result.version ?? '—'], ['Protocol', result.protocol ?? '—'],
        ['Kind', result.lua ? 'Lua script' : 'WebAssembly component'], ['File', result.file ?? '—']]} />
    </div>` : null}
  <//>`;
}

function SourceDialog({ adapter, onClose }) {
  const src = useApi(`/adapters/${enc(adapter.name)}/source`);
  return html`<${Modal} wide title=${`Lua source of ${adapter.name}`} onClose=${onClose}
      footer=${html`<${Button} onClick=${onClose}>Close<//>`}>
    ${src.loading && src.data === undefined ? html`<${Loading} />` : null}
    <${ErrorBox} error=${src.error} onRetry=${src.reload} />
    ${typeof src.data === 'string'
      ? html`<pre class="code-view" tabindex="0" aria-label=${`Source of ${adapter.name}`}>${src.data}</pre>`
      : src.data !== undefined ? html`<pre class="code-view">${JSON.stringify(src.data, null, 2)}</pre>` : null}
  <//>`;
}

export default function AdaptersPage() {
  const adapters = useApi('/adapters');
  // Uploading and deleting adapters is the admin's.
  const admin = may('admin');
  const [dialog, setDialog] = useState(null);
  const list = adapters.data?.adapters ?? [];
  const close = () => setDialog(null);

  const columns = [
    { key: 'name', label: 'Name', render: (a) => html`<strong>${a.name}</strong>` },
    { key: 'version', label: 'Version', render: (a) => a.version ?? '—' },
    { key: 'protocol', label: 'Protocol', render: (a) => a.protocol ?? '—' },
    { key: 'origin', label: 'Origin', render: (a) => (a.origin === 'builtin'
      ? html`<${Pill} kind="info">built-in<//>`
      : html`<${Pill} kind="ok" title=${a.file ?? ''}>file<//> <span class="mono muted wrap-any">${a.file ?? ''}</span>`) },
    { key: 'lua', label: 'Kind', render: (a) => (a.lua ? 'Lua' : 'WASM') },
    { key: 'pool', label: 'In flight / instances', num: true, render: (a) => `${a.pool?.sessions ?? 0} / ${a.pool?.instances ?? 0}` },
    { key: 'used_by', label: 'Used by', render: (a) => html`<${Chips} items=${a.used_by ?? []} empty="no source" />` },
    { key: 'actions', label: 'Actions', class: 'actions', render: (a) => html`<div class="btn-group">
      ${a.lua ? html`<${Button} size="sm" aria-label=${`View source of ${a.name}`} onClick=${() => setDialog({ kind: 'source', a })}>View source<//>` : null}
      ${admin && a.origin === 'file' ? html`<${Button} size="sm" variant="danger" aria-label=${`Delete adapter ${a.name}`}
        onClick=${() => setDialog({ kind: 'delete', a })}>Delete<//>` : null}
    </div>` },
  ];

  let body;
  if (adapters.loading && !adapters.data) body = html`<${Loading} label="Loading adapters…" />`;
  else if (adapters.error && !adapters.data) body = html`<${ErrorBox} error=${adapters.error} onRetry=${adapters.reload} />`;
  else if (list.length === 0) body = html`<${Empty}>No adapters loaded.<//>`;
  else body = html`<${Table} caption="Adapters" rows=${list} columns=${columns} rowKey=${(a) => a.name} />`;

  const d = dialog;
  return html`<div class="page page-adapters">
    <${PageHeader} title="Adapters"><${Button} onClick=${adapters.reload} busy=${adapters.loading}>Refresh<//><//>
    <${Card} title="Installed adapters">
      ${adapters.error && adapters.data ? html`<${ErrorBox} error=${adapters.error} onRetry=${adapters.reload} />` : null}
      ${body}
    <//>
    ${admin ? html`<${UploadCard} adapters=${list} onUploaded=${adapters.reload} />` : null}
    ${d?.kind === 'source' ? html`<${SourceDialog} adapter=${d.a} onClose=${close} />` : null}
    ${d?.kind === 'delete' ? html`<${ConfirmAction} danger title=${`Delete adapter ${d.a.name}`} confirmLabel="Delete adapter"
        action=${() => api('DELETE', `/adapters/${enc(d.a.name)}`)}
        onDone=${() => { toast(`Adapter ${d.a.name} deleted`, 'ok'); close(); adapters.reload(); }} onCancel=${close}
        message=${`Delete the uploaded adapter ${d.a.name} (${d.a.file ?? 'its file'})? If it overrode a built-in adapter of the same name, the built-in comes back.`}>
      ${(d.a.used_by ?? []).length
        ? html`<div class="state warnbox" role="note">
            <strong>Used by ${d.a.used_by.length} source${d.a.used_by.length === 1 ? '' : 's'}:</strong>
            <${Chips} items=${d.a.used_by} />
            <p>Unless a built-in adapter of this name takes over, these sources would break: the gateway refuses the deletion until
              their adapter is changed.</p>
          </div>`
        : html`<p class="muted">No source uses it.</p>`}
    <//>` : null}
  </div>`;
}
