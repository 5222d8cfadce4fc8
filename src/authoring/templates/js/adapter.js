// {{name}}: a Switchyard adapter in JavaScript, started by `switchyard adapter new {{name}} --lang js`.
//
// It is an OpenAI-compatible pass-through: the unified form *is* OpenAI Chat Completions JSON,
// so requests go upstream with the upstream model name and a bearer key, and answers come back
// as they are. Change it to speak your upstream's protocol (wit/adapter.wit is the contract).
//
// How componentize-js maps the WIT types:
//   record      -> object with camelCase fields (baseUrl, apiKey, upstreamModel, retryAfterMs)
//   enum        -> its name as a string ('chat', 'sse', 'rate-limit')
//   option<T>   -> the value, or undefined
//   list<u8>    -> Uint8Array
//   u64         -> BigInt (nowUnixMs() returns one; retryAfterMs must be one)
//   tuple       -> array ([name, value] headers and settings)
//   result<T,E> -> return T; throw an object whose own `payload` property is the E record
//   resource    -> a class exported in the interface object (Session below)
// The host's imports: the module name carries the WIT package version.
//   log('debug', 'something worth knowing');
//   const nowMs = Number(nowUnixMs()); // u64 -> BigInt
import { log, nowUnixMs } from 'switchyard:adapter/host@0.1.0';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Thrown from a session method; `payload` becomes the call's `adapter-error`. */
class AdapterFailure extends Error {
  constructor(kind, message, { status, retryAfterMs, code } = {}) {
    super(message);
    this.payload = { kind, message, status, retryAfterMs, code };
  }
}

/**
 * What an exception in a call becomes: an adapter error whose first line is what was thrown and
 * whose next lines are where (the gateway logs them; a client sees the first line). Anything but
 * an AdapterFailure thrown out of a call would trap it, and all anyone would read is
 * "wasm 'unreachable' instruction executed".
 */
function failureOf(e) {
  if (e instanceof AdapterFailure) return e;
  const what = e instanceof Error ? `${e.name}: ${e.message}` : `thrown: ${String(e)}`;
  const where = e instanceof Error && typeof e.stack === 'string' ? e.stack.trim().split('\n').slice(0, 8) : [];
  return new AdapterFailure('server', [what, ...where.map((line) => `  at ${line.trim()}`)].join('\n'));
}

function setting(ctx, key) {
  const found = ctx.settings.find(([k]) => k === key);
  return found ? found[1] : undefined;
}

function header(headers, name) {
  const found = headers.find(([k]) => k.toLowerCase() === name);
  return found ? found[1] : undefined;
}

/** HTTP status (and the upstream's error code) -> the error kind the gateway acts on. */
function classify(status, code) {
  if (code === 'insufficient_quota') return 'quota';
  if (code === 'content_filter' || code === 'content_policy_violation') return 'content-policy';
  if (status === 401) return 'auth';
  if (status === 402) return 'quota';
  if (status === 403) return 'permission';
  if (status === 404) return 'not-found';
  if (status === 429) return 'rate-limit';
  if (status === 503 || status === 529) return 'overloaded';
  if (status >= 500 || (status >= 300 && status < 400)) return 'server';
  return 'bad-request';
}

/** A non-2xx answer -> a classified error with the upstream's message, code and Retry-After. */
function upstreamError(response) {
  const text = decoder.decode(response.body);
  let body;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  const error = body && typeof body.error === 'object' && body.error !== null ? body.error : undefined;
  const message =
    (error && typeof error.message === 'string' && error.message) ||
    (body && typeof body.error === 'string' && body.error) ||
    (body && typeof body.message === 'string' && body.message) ||
    text.trim().slice(0, 512) ||
    `upstream returned HTTP ${response.status}`;
  const code = error && typeof error.code === 'string' ? error.code : undefined;
  const retryAfter = Number(header(response.headers, 'retry-after'));
  return new AdapterFailure(classify(response.status, code), message, {
    status: response.status,
    retryAfterMs: Number.isFinite(retryAfter) && retryAfter >= 0 ? BigInt(Math.floor(retryAfter * 1000)) : undefined,
    code,
  });
}

class Session {
  constructor(context) {
    this.ctx = context;
    this.finished = false; // a chunk carried a finish_reason
    this.done = false; // `data: [DONE]` arrived
  }

  transformRequest(request) {
    const { ctx } = this;
    let body;
    try {
      body = JSON.parse(request);
    } catch (e) {
      throw new AdapterFailure('bad-request', `request body is not JSON: ${e.message}`);
    }
    body.model = ctx.upstreamModel;
    if (body.stream === true && body.stream_options === undefined) {
      body.stream_options = { include_usage: true }; // the gateway's books need the usage
    }
    const path = { chat: '/chat/completions', embedding: '/embeddings', image: '/images/generations' }[ctx.operation];
    const headers = [['content-type', 'application/json']];
    if (ctx.apiKey) headers.push(['authorization', `Bearer ${ctx.apiKey}`]);
    for (const [key, value] of ctx.settings) {
      if (key.startsWith('header.')) headers.push([key.slice('header.'.length), value]);
    }
    return {
      method: 'POST',
      url: `${ctx.baseUrl.replace(/\/+$/, '')}${setting(ctx, 'path') || path}`,
      headers,
      body: encoder.encode(JSON.stringify(body)),
    };
  }

  transformResponse(response) {
    if (response.status < 200 || response.status >= 300) throw upstreamError(response);
    const text = decoder.decode(response.body);
    try {
      JSON.parse(text);
    } catch (e) {
      throw new AdapterFailure('invalid-response', `upstream body is not JSON: ${e.message}`);
    }
    return text; // already in the unified form
  }

  transformStreamChunk(event) {
    const data = event.data.trim();
    if (data === '[DONE]') {
      this.done = true;
      return { chunks: [], done: true };
    }
    if (data === '') return { chunks: [], done: false };
    let chunk;
    try {
      chunk = JSON.parse(data);
    } catch (e) {
      throw new AdapterFailure('invalid-response', `stream event is not JSON: ${e.message}`);
    }
    if (chunk.error) {
      throw new AdapterFailure('server', chunk.error.message || String(chunk.error));
    }
    if (Array.isArray(chunk.choices) && chunk.choices.some((c) => c.finish_reason)) this.finished = true;
    return { chunks: [data], done: false };
  }

  finishStream() {
    // A cut stream must never pass for a complete one.
    if (!this.done && !this.finished) {
      throw new AdapterFailure('truncated', 'upstream stream ended before [DONE] or a finish_reason');
    }
    return { chunks: [], done: true };
  }
}

// Every call answers what it throws as an adapter error (see failureOf).
for (const method of ['transformRequest', 'transformResponse', 'transformStreamChunk', 'finishStream']) {
  const call = Session.prototype[method];
  Session.prototype[method] = function guarded(...args) {
    try {
      return call.apply(this, args);
    } catch (e) {
      throw failureOf(e);
    }
  };
}

export const adapter = {
  describe() {
    return { name: '{{name}}', version: '0.1.0', protocol: 'openai-chat', streamFraming: 'sse' };
  },
  Session,
};
