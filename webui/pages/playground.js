// Playground: chat with the gateway as a client would (/v1/chat/completions with a gateway key),
// streamed, multi-turn, with optional image attachments; shows which source answered.
import { html, useState, useEffect, useRef } from '../lib.js';
import { api, client } from '../api.js';
import { may } from '../access.js';
import {
  Loading, ErrorBox, PageHeader, Card, Button, Field, Toggle, IconButton, toast, useAction,
  fmtMs, fmtNum, hashLink,
} from '../ui.js';

const KEY = 'switchyard.playground_key';
const MODEL = 'switchyard.playground_model';
const MAX_IMAGE = 20 * 1024 * 1024;

const stored = (k) => { try { return sessionStorage.getItem(k) ?? ''; } catch { return ''; } };
const store = (k, v) => { try { if (v) sessionStorage.setItem(k, v); else sessionStorage.removeItem(k); } catch { /* ignore */ } };

function readAsDataUrl(file) {
  return new Promise((resolve, reject) => {
    const r = new FileReader();
    r.onload = () => resolve(r.result);
    r.onerror = () => reject(r.error ?? new Error('could not read the file'));
    r.readAsDataURL(file);
  });
}

/** The text of a message's content: a string, or OpenAI content parts. */
function textOf(content) {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.map((p) => (typeof p === 'string' ? p : p?.text ?? '')).join('');
  return '';
}

/** One conversation turn as the API wants it. */
function wire(m) {
  if (m.role === 'user' && m.images?.length) {
    return {
      role: 'user',
      content: [
        ...(m.text ? [{ type: 'text', text: m.text }] : []),
        ...m.images.map((url) => ({ type: 'image_url', image_url: { url } })),
      ],
    };
  }
  return { role: m.role, content: m.text };
}

function Usage({ u }) {
  if (!u) return null;
  const cached = u.prompt_tokens_details?.cached_tokens;
  return html`<span>usage: ${fmtNum(u.prompt_tokens)} in / ${fmtNum(u.completion_tokens)} out${cached ? ` (${fmtNum(cached)} cached)` : ''}</span>`;
}

function Message({ m, streaming }) {
  if (m.role === 'user') {
    return html`<div class="msg msg-user" data-testid="user-message">
      <div class="msg-role">You</div>
      <div class="msg-text">${m.text}</div>
      ${m.images?.length ? html`<div class="thumbs">${m.images.map((u, i) => html`<img key=${i} src=${u} alt=${`attachment ${i + 1}`} />`)}</div>` : null}
    </div>`;
  }
  const meta = m.meta ?? {};
  return html`<div class=${`msg msg-assistant ${m.error ? 'msg-error' : ''}`} data-testid="assistant-message" aria-busy=${streaming ? 'true' : 'false'}>
    <div class="msg-role">Assistant${meta.model ? html`<span class="tag">${meta.model}</span>` : null}</div>
    ${m.reasoning ? html`<details><summary class="small muted">Reasoning</summary><div class="msg-text muted small">${m.reasoning}</div></details>` : null}
    <div class=${`msg-text ${streaming ? 'cursor' : ''}`} data-testid="assistant-text">${m.text}</div>
    ${m.error ? html`<div role="alert" class="errormsg"><strong class="status-bad">Error${m.status ? ` ${m.status}` : ''}:</strong> ${m.error}</div>` : null}
    ${m.note ? html`<div class="small muted">${m.note}</div>` : null}
    ${!streaming && (meta.source || meta.requestId || meta.total != null) ? html`<div class="msg-meta" data-testid="answer-meta">
      ${meta.source ? html`<span>source: <strong data-testid="answer-source">${meta.source}</strong></span>` : null}
      ${meta.ttft != null ? html`<span>first token: ${fmtMs(meta.ttft)}</span>` : null}
      ${meta.total != null ? html`<span>total: ${fmtMs(meta.total)}</span>` : null}
      <${Usage} u=${meta.usage} />
      ${meta.requestId ? html`<a href=${hashLink('logs', { request_id: meta.requestId })}>request ${meta.requestId} in logs</a>` : null}
    </div>` : null}
  </div>`;
}

function KeyCard({ keyValue, setKey }) {
  const [show, setShow] = useState(false);
  // What is typed stays typed: a re-render before the change event (models arriving for the
  // previous key, or this effect's first run, which comes late on a busy machine) must not put
  // the old key back into the field. Only a new key from outside (Create) replaces it.
  const [typed, setTyped] = useState(keyValue);
  const shown = useRef(keyValue);
  useEffect(() => {
    if (shown.current !== keyValue) {
      shown.current = keyValue;
      setTyped(keyValue);
    }
  }, [keyValue]);
  const [run, busy] = useAction();
  // One playground key, made anew by the gateway on each click (its old secret stops working),
  // with a small hourly quota: clicks never pile up unlimited keys (POST /playground-key).
  const create = () => run(async () => {
    const res = await api('POST', '/playground-key');
    if (!res?.key) throw new Error('the gateway answered without a key');
    setKey(res.key);
    return res;
  }, (res) => `Made gateway key ${res.name ?? 'playground'}${res.token_quota
    ? ` (${Number(res.token_quota).toLocaleString('en')} tokens${res.period ? ` a${res.period === 'hour' ? 'n' : ''} ${res.period}` : ''})` : ''}`);
  return html`<div class="form-row">
    <${Field} label="Gateway key" class="grow" hint="Sent as a client would send it; kept in this tab only.">
      <input type=${show ? 'text' : 'password'} value=${typed} autocomplete="off" spellcheck="false" placeholder="sk-…"
        onInput=${(e) => setTyped(e.currentTarget.value)} onChange=${(e) => setKey(e.currentTarget.value.trim())} />
    <//>
    <${Button} size="sm" onClick=${() => setShow(!show)} aria-pressed=${show ? 'true' : 'false'}>${show ? 'Hide key' : 'Show key'}<//>
    <${Button} size="sm" busy=${busy} onClick=${create}>Create a playground key<//>
  </div>`;
}

/** A viewer's playground: it needs a gateway key, which operators make (POST /playground-key). */
function NeedsOperator() {
  return html`<div class="stack">
    <${PageHeader} title="Playground" />
    <${Card} title="Needs the operator role">
      <p data-testid="playground-role">The playground chats through a gateway key that it makes for you
        (<code>POST /admin/api/playground-key</code>): that needs the <strong>operator</strong> role, and yours is viewer.</p>
      <p class="muted">Ask an admin for an operator token, or use a gateway key from a client of your own.</p>
    <//>
  </div>`;
}

export default function PlaygroundPage() {
  return may('operator') ? html`<${Chat} />` : html`<${NeedsOperator} />`;
}

function Chat() {
  const [key, setKeyState] = useState(() => stored(KEY));
  const setKey = (k) => { store(KEY, k); setKeyState(k); };
  const [models, setModels] = useState({ list: null, error: null, loading: false });
  const [model, setModelState] = useState(() => stored(MODEL));
  const setModel = (m) => { store(MODEL, m); setModelState(m); };
  const [system, setSystem] = useState('');
  const [input, setInput] = useState('');
  const [stream, setStream] = useState(true);
  const [images, setImages] = useState([]);
  const [turns, setTurns] = useState([]);
  const [busy, setBusy] = useState(false);
  const abort = useRef(null);
  // Bumped by Clear: a stream still finishing must not write the cleared conversation back.
  const conversation = useRef(0);
  const logEnd = useRef(null);
  const fileInput = useRef(null);

  // Only the answer for the key asked last counts: an earlier key's may arrive after it.
  const modelsAsked = useRef(0);
  const loadModels = async () => {
    const asked = ++modelsAsked.current;
    if (!key) { setModels({ list: null, error: null, loading: false }); return; }
    setModels((m) => ({ ...m, loading: true }));
    try {
      const res = await client('GET', '/v1/models', key);
      const body = await res.json();
      if (asked !== modelsAsked.current) return;
      const list = (body.data ?? []).map((d) => d.id).filter((id) => typeof id === 'string');
      setModels({ list, error: null, loading: false });
      if (!list.includes(model) && list.length) setModel(list[0]);
    } catch (error) {
      if (asked === modelsAsked.current) setModels({ list: null, error, loading: false });
    }
  };
  useEffect(() => { loadModels(); }, [key]);
  useEffect(() => () => abort.current?.abort(), []);
  useEffect(() => { logEnd.current?.scrollIntoView?.({ block: 'nearest' }); }, [turns]);

  const attach = async (e) => {
    const files = [...(e.currentTarget.files ?? [])];
    e.currentTarget.value = '';
    const urls = [];
    for (const f of files) {
      if (!f.type.startsWith('image/')) { toast(`${f.name} is not an image`, 'warn'); continue; }
      if (f.size > MAX_IMAGE) { toast(`${f.name} is over 20 MB`, 'warn'); continue; }
      try { urls.push(await readAsDataUrl(f)); } catch (err) { toast(err.message, 'error'); }
    }
    setImages((cur) => [...cur, ...urls]);
  };

  const send = async (e) => {
    e?.preventDefault();
    if (busy) return;
    const text = input.trim();
    if (!key) { toast('Enter or create a gateway key first', 'warn'); return; }
    if (!model) { toast('Pick a model', 'warn'); return; }
    if (!text && images.length === 0) return;
    const user = { role: 'user', text, images };
    const history = [...turns.filter((t) => !t.error || t.text), user];
    const messages = [
      ...(system.trim() ? [{ role: 'system', content: system.trim() }] : []),
      ...history.filter((t) => t.role === 'user' || t.text).map(wire),
    ];
    const body = { model, messages, stream, ...(stream ? { stream_options: { include_usage: true } } : {}) };
    const assistant = { role: 'assistant', text: '', reasoning: '', meta: { model } };
    const mine = conversation.current;
    setTurns([...history, assistant]);
    setInput('');
    setImages([]);
    setBusy(true);

    const ctl = new AbortController();
    abort.current = ctl;
    const started = performance.now();
    const cur = { ...assistant, meta: { ...assistant.meta } };
    let raf = 0;
    const flush = () => { raf = 0; if (mine === conversation.current) setTurns([...history, { ...cur, meta: { ...cur.meta } }]); };
    const schedule = () => { if (!raf) raf = requestAnimationFrame(flush); };
    try {
      const res = await client('POST', '/v1/chat/completions', key, body, { signal: ctl.signal });
      cur.meta.source = res.headers.get('x-switchyard-source') ?? undefined;
      cur.meta.requestId = res.headers.get('x-request-id') ?? undefined;
      if (res.headers.get('x-switchyard-fusion-id')) cur.meta.fusion = res.headers.get('x-switchyard-fusion-id');
      const type = res.headers.get('content-type') ?? '';
      if (stream && type.includes('text/event-stream') && res.body) {
        const reader = res.body.getReader();
        const dec = new TextDecoder();
        let buf = '', done = false, event = '';
        const line = (l) => {
          if (l === '') { event = ''; return; }
          if (l.startsWith('event:')) { event = l.slice(6).trim(); return; }
          if (!l.startsWith('data:')) return;
          const data = l.slice(5).trim();
          if (data === '[DONE]') { done = true; return; }
          let obj;
          try { obj = JSON.parse(data); } catch { return; }
          if (obj?.error || event === 'error') {
            const err = obj?.error ?? obj;
            cur.error = (typeof err === 'string' ? err : err?.message) ?? 'the stream ended with an error';
            done = true;
            return;
          }
          const delta = obj?.choices?.[0]?.delta ?? {};
          const piece = textOf(delta.content);
          const thought = delta.reasoning_content ?? delta.reasoning ?? '';
          if ((piece || thought) && cur.meta.ttft == null) cur.meta.ttft = performance.now() - started;
          if (piece) cur.text += piece;
          if (typeof thought === 'string' && thought) cur.reasoning += thought;
          if (obj?.usage) cur.meta.usage = obj.usage;
          if (obj?.model) cur.meta.model = obj.model;
          schedule();
        };
        while (!done) {
          const { value, done: end } = await reader.read();
          if (end) break;
          buf += dec.decode(value, { stream: true });
          let i;
          while (!done && (i = buf.indexOf('\n')) >= 0) {
            line(buf.slice(0, i).replace(/\r$/, ''));
            buf = buf.slice(i + 1);
          }
        }
        if (!done && buf) line(buf.replace(/\r$/, ''));
        if (done) reader.cancel().catch(() => {});
        else if (!cur.error) cur.note = 'The stream ended without [DONE]: the answer may be cut short.';
      } else {
        const json = await res.json();
        const msg = json?.choices?.[0]?.message ?? {};
        cur.text = textOf(msg.content);
        if (msg.reasoning_content) cur.reasoning = msg.reasoning_content;
        cur.meta.ttft = performance.now() - started;
        cur.meta.usage = json?.usage;
        if (json?.model) cur.meta.model = json.model;
      }
    } catch (err) {
      if (err?.name === 'AbortError') cur.note = 'Stopped.';
      else { cur.error = err?.message ?? String(err); cur.status = err?.status; }
    } finally {
      cancelAnimationFrame(raf);
      cur.meta.total = performance.now() - started;
      if (abort.current === ctl) abort.current = null;
      if (mine === conversation.current) setTurns([...history, { ...cur, meta: { ...cur.meta } }]);
      setBusy(false);
    }
  };

  const stop = () => abort.current?.abort();
  const clear = () => { conversation.current += 1; stop(); setTurns([]); };

  let picker;
  if (!key) picker = html`<p class="muted small">Enter a gateway key to list its models.</p>`;
  else if (models.error) picker = html`<${ErrorBox} title="Could not list models" error=${models.error} onRetry=${loadModels} />`;
  else if (!models.list) picker = html`<${Loading} label="Loading models…" />`;
  else {
    picker = html`<div class="form-row">
      <${Field} label="Model">
        <select value=${model} onChange=${(e) => setModel(e.currentTarget.value)}>
          ${models.list.length === 0 ? html`<option value="">No models for this key</option>` : null}
          ${models.list.map((id) => html`<option key=${id} value=${id}>${id}</option>`)}
        </select>
      <//>
      <${IconButton} label="Refresh list" onClick=${loadModels}>↻<//>
      <${Toggle} label="Stream" checked=${stream} onChange=${setStream} />
    </div>`;
  }

  const last = turns.length - 1;
  return html`<div class="stack">
    <${PageHeader} title="Playground">
      <${Button} size="sm" onClick=${clear} disabled=${turns.length === 0 && !busy}>Clear<//>
    <//>
    <${Card} title="Client">
      <div class="stack">
        <${KeyCard} keyValue=${key} setKey=${setKey} />
        ${picker}
        <${Field} label="System prompt">
          <textarea rows="2" value=${system} onInput=${(e) => setSystem(e.currentTarget.value)} placeholder="Optional"></textarea>
        <//>
      </div>
    <//>
    <section class="card card-body chat" aria-label="Conversation">
      ${turns.length ? html`<div class="chat-log" aria-live="polite">
        ${turns.map((m, i) => html`<${Message} key=${i} m=${m} streaming=${busy && i === last && m.role === 'assistant'} />`)}
        <div ref=${logEnd}></div>
      </div>` : html`<p class="muted">No messages yet. Write one below; Ctrl+Enter sends.</p>`}
      <form class="stack" onSubmit=${send}>
        <${Field} label="Message">
          <textarea rows="3" value=${input} onInput=${(e) => setInput(e.currentTarget.value)}
            onKeyDown=${(e) => { if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) send(e); }}></textarea>
        <//>
        ${images.length ? html`<div class="thumbs">${images.map((u, i) => html`<div class="thumb" key=${i}>
          <img src=${u} alt=${`attachment ${i + 1}`} />
          <${IconButton} class="btn-sm" label=${`Remove attachment ${i + 1}`} onClick=${() => setImages(images.filter((_, j) => j !== i))}>✕<//>
        </div>`)}</div>` : null}
        <div class="row">
          <${Button} type="submit" variant="primary" busy=${busy}>Send<//>
          ${busy ? html`<${Button} variant="danger" onClick=${stop}>Stop<//>` : null}
          <label class="btn">Attach images<input ref=${fileInput} class="sr-only" type="file" accept="image/*" multiple onChange=${attach} /></label>
          <span class="small muted">Images are sent as <code>image_url</code> parts, for vision routes.</span>
        </div>
      </form>
    </section>
  </div>`;
}
