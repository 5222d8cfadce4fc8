// Cohere Chat v2 <-> Switchyard's unified form (OpenAI Chat Completions JSON).
//
// Pure mapping logic: no imports, so it runs in plain Node for tests as well as inside the
// component (adapter.js wires it to the WIT exports). Values follow the componentize-js
// conventions for the WIT types: records are objects with camelCase fields, enums are their
// kebab-case names as strings, option<T> is undefined/null, list<u8> is a Uint8Array,
// u64 is a BigInt, tuples are arrays.

export const NAME = 'cohere';
export const VERSION = '0.1.0';
const PROTOCOL = 'cohere-chat-v2';
const CHAT_PATH = '/v2/chat';
const EMBED_PATH = '/v2/embed';
const DEFAULT_INPUT_TYPE = 'search_document';
const MAX_MESSAGE_CHARS = 512;

/** An adapter-error to throw from a session method. componentize-js turns a thrown value
 *  with an own `payload` property into the `err` of the function's `result`; anything else
 *  thrown (a bug) traps the call instead. */
export class AdapterFailure extends Error {
  constructor(kind, message, extra = {}) {
    super(message);
    this.payload = {
      kind,
      message,
      status: extra.status,
      retryAfterMs: extra.retryAfterMs,
      code: extra.code,
    };
  }
}

const fail = (kind, message, extra) => new AdapterFailure(kind, message, extra);

export function describe() {
  return { name: NAME, version: VERSION, protocol: PROTOCOL, streamFraming: 'sse' };
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
const num = (v) => (typeof v === 'number' && Number.isFinite(v) ? v : null);
const count = (v) => (num(v) === null ? null : Math.round(v)); // Cohere may send 1661.0

function setting(ctx, key) {
  for (const [k, v] of ctx.settings || []) if (k === key) return v;
  return undefined;
}

function header(headers, name) {
  const lower = name.toLowerCase();
  for (const [k, v] of headers || []) if (k.toLowerCase() === lower) return v;
  return undefined;
}

function joinUrl(base, path) {
  return `${base.replace(/\/+$/, '')}/${path.replace(/^\/+/, '')}`;
}

/** `path` for a source whose base_url is the API root (https://api.cohere.com); one that
 *  already ends in /v2 gets the path without its /v2. */
function endpoint(ctx, key, fallback) {
  const configured = setting(ctx, key);
  if (configured) return joinUrl(ctx.baseUrl, configured);
  if (/\/v2\/*$/.test(ctx.baseUrl)) return joinUrl(ctx.baseUrl, fallback.replace(/^\/v2/, ''));
  return joinUrl(ctx.baseUrl, fallback);
}

function truncate(text, max) {
  const chars = Array.from(text);
  return chars.length > max ? `${chars.slice(0, max).join('')}…` : text;
}

/** The text of a unified `content`: a string, or its text parts joined. */
function contentText(content) {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    return content.map((p) => (isObject(p) && typeof p.text === 'string' ? p.text : '')).join('');
  }
  return '';
}

// ---------------------------------------------------------------- errors

/** `Retry-After` as delta-seconds (fractions allowed) or an HTTP date, in milliseconds. */
export function parseRetryAfterMs(value, nowMs) {
  if (value === undefined || value === null) return undefined;
  const text = String(value).trim();
  if (text === '') return undefined;
  if (/^\d+(\.\d+)?$/.test(text)) return BigInt(Math.floor(Number(text) * 1000));
  const at = Date.parse(text);
  if (Number.isNaN(at) || nowMs === undefined) return undefined;
  return BigInt(Math.max(0, at - nowMs));
}

/** Status (and message) -> error kind, per Cohere's documented status codes. */
export function classify(status, message) {
  const m = (message || '').toLowerCase();
  if (status === 429) {
    // A trial key's monthly allowance is spent: waiting a minute will not help.
    return /per month|\/ ?month|monthly|quota|billing/.test(m) ? 'quota' : 'rate-limit';
  }
  switch (status) {
    case 400:
    case 409:
    case 413:
    case 422:
      return 'bad-request';
    case 401:
      return 'auth';
    case 402:
      return 'quota';
    case 403:
      return 'permission';
    case 404:
      return 'not-found';
    case 498: // a deny-listed token in the request or the response
      return 'content-policy';
    case 499: // "request cancelled": Cohere says to try again
      return 'server';
    case 501:
      return 'unsupported';
    case 503:
    case 529:
      return 'overloaded';
    default:
      if (status >= 300 && status < 400) return 'server'; // a redirect the host would not follow
      return status >= 500 ? 'server' : 'bad-request';
  }
}

/** A non-2xx Cohere answer (`{"id": ..., "message": ...}`) -> a classified adapter error. */
export function upstreamError(response, nowMs) {
  const text = decoder.decode(response.body || new Uint8Array());
  let parsed;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  let message;
  if (isObject(parsed)) {
    if (typeof parsed.message === 'string') message = parsed.message;
    else if (typeof parsed.error === 'string') message = parsed.error;
    else if (isObject(parsed.error) && typeof parsed.error.message === 'string') message = parsed.error.message;
  }
  if (!message) {
    const trimmed = text.trim();
    message = trimmed ? truncate(trimmed, MAX_MESSAGE_CHARS) : `upstream returned HTTP ${response.status}`;
  }
  // Cohere's error bodies carry no code; the one agents act on is derived from the message.
  let code;
  if (isObject(parsed) && isObject(parsed.error) && typeof parsed.error.code === 'string') {
    code = parsed.error.code;
  } else if (response.status === 400 && /^too many tokens/i.test(message) && !/max[ _]tokens/i.test(message)) {
    code = 'context_length_exceeded';
  }
  return fail(classify(response.status, message), message, {
    status: response.status,
    retryAfterMs: parseRetryAfterMs(header(response.headers, 'retry-after'), nowMs),
    code,
  });
}

// ---------------------------------------------------------------- request

function parseRequest(request) {
  let value;
  try {
    value = JSON.parse(request);
  } catch (e) {
    throw fail('bad-request', `request body is not JSON: ${e.message}`);
  }
  if (!isObject(value)) throw fail('bad-request', 'request body must be a JSON object');
  return value;
}

function userContent(content) {
  if (typeof content === 'string') return content;
  if (content === null || content === undefined) return '';
  if (!Array.isArray(content)) throw fail('bad-request', 'message content must be a string or an array of parts');
  const parts = [];
  for (const part of content) {
    if (!isObject(part)) continue;
    switch (part.type) {
      case 'text':
        parts.push({ type: 'text', text: typeof part.text === 'string' ? part.text : '' });
        break;
      case 'image_url': {
        const image = typeof part.image_url === 'string' ? { url: part.image_url } : part.image_url;
        if (!isObject(image) || typeof image.url !== 'string') {
          throw fail('bad-request', 'an image_url part needs image_url.url');
        }
        const out = { url: image.url };
        if (['auto', 'low', 'high'].includes(image.detail)) out.detail = image.detail;
        parts.push({ type: 'image_url', image_url: out });
        break;
      }
      default:
        throw fail('unsupported', `content part \`${part.type}\` is not supported by Cohere`);
    }
  }
  return parts;
}

function assistantMessage(message) {
  const text = contentText(message.content);
  const calls = Array.isArray(message.tool_calls) ? message.tool_calls : [];
  const out = { role: 'assistant' };
  if (calls.length > 0) {
    // Cohere's text before tool calls is its `tool_plan` (mapped to `content` on the way back).
    if (text) out.tool_plan = text;
    out.tool_calls = calls.map((call) => {
      const fn = isObject(call.function) ? call.function : {};
      return {
        id: String(call.id ?? ''),
        type: 'function',
        function: {
          name: String(fn.name ?? ''),
          arguments: typeof fn.arguments === 'string' ? fn.arguments : JSON.stringify(fn.arguments ?? {}),
        },
      };
    });
  } else if (text) {
    out.content = text;
  } else {
    return null; // Cohere refuses empty turns
  }
  return out;
}

/** A tool result goes back as a document, as Cohere's tool-use guide sends it: the model can
 *  then cite it. */
function toolMessage(message) {
  return {
    role: 'tool',
    tool_call_id: String(message.tool_call_id ?? ''),
    content: [{ type: 'document', document: { data: contentText(message.content) } }],
  };
}

function tool(t) {
  if (!isObject(t) || !isObject(t.function) || typeof t.function.name !== 'string') return null;
  const fn = { name: t.function.name };
  if (typeof t.function.description === 'string') fn.description = t.function.description;
  fn.parameters = isObject(t.function.parameters) ? t.function.parameters : { type: 'object', properties: {} };
  return { type: 'function', function: fn };
}

/** `thinking.budget_tokens` / `reasoning_effort` / `disable_thinking` -> Cohere `thinking`. */
function thinking(unified) {
  if (unified.disable_thinking === true) return { type: 'disabled' };
  const t = unified.thinking;
  if (isObject(t)) {
    if (t.type === 'disabled') return { type: 'disabled' };
    const budget = num(t.budget_tokens) ?? num(t.token_budget);
    if (budget !== null) return { type: 'enabled', token_budget: budget };
    if (t.type === 'enabled') return { type: 'enabled' };
  }
  const effort = { minimal: 1024, low: 2048, medium: 8192, high: 24576 }[unified.reasoning_effort];
  if (effort) return { type: 'enabled', token_budget: effort };
  return undefined;
}

/** The unified chat request -> a Cohere `/v2/chat` body. */
export function chatBody(unified, model) {
  if (!Array.isArray(unified.messages)) throw fail('bad-request', '`messages` must be an array');
  if (num(unified.n) !== null && unified.n > 1) throw fail('unsupported', 'Cohere returns one choice (`n` must be 1)');

  const messages = [];
  for (const message of unified.messages) {
    if (!isObject(message)) continue;
    switch (message.role) {
      case 'system':
      case 'developer':
        messages.push({ role: 'system', content: contentText(message.content) });
        break;
      case 'assistant': {
        const out = assistantMessage(message);
        if (out) messages.push(out);
        break;
      }
      case 'tool':
      case 'function':
        messages.push(toolMessage(message));
        break;
      default:
        messages.push({ role: 'user', content: userContent(message.content) });
    }
  }

  const body = { model, messages };
  if (typeof unified.stream === 'boolean') body.stream = unified.stream;

  let tools = Array.isArray(unified.tools) ? unified.tools.map(tool).filter(Boolean) : [];
  const choice = unified.tool_choice;
  if (choice === 'required') body.tool_choice = 'REQUIRED';
  else if (choice === 'none') body.tool_choice = 'NONE';
  else if (isObject(choice) && isObject(choice.function) && typeof choice.function.name === 'string') {
    // Cohere cannot name the tool to call: offer only that one and require a call.
    tools = tools.filter((t) => t.function.name === choice.function.name);
    body.tool_choice = 'REQUIRED';
  }
  if (tools.length > 0) body.tools = tools;
  if (body.tool_choice === 'REQUIRED' && tools.length === 0) delete body.tool_choice;

  const maxTokens = num(unified.max_tokens) ?? num(unified.max_completion_tokens);
  if (maxTokens !== null) body.max_tokens = maxTokens;
  if (typeof unified.stop === 'string') body.stop_sequences = [unified.stop];
  else if (Array.isArray(unified.stop)) body.stop_sequences = unified.stop.filter((s) => typeof s === 'string');
  for (const [from, to] of [
    ['temperature', 'temperature'],
    ['top_p', 'p'],
    ['top_k', 'k'],
    ['seed', 'seed'],
    ['frequency_penalty', 'frequency_penalty'],
    ['presence_penalty', 'presence_penalty'],
  ]) {
    if (num(unified[from]) !== null) body[to] = unified[from];
  }

  const format = unified.response_format;
  if (isObject(format)) {
    if (format.type === 'json_object') body.response_format = { type: 'json_object' };
    else if (format.type === 'json_schema') {
      const schema = isObject(format.json_schema) ? format.json_schema.schema : undefined;
      body.response_format = isObject(schema) ? { type: 'json_object', json_schema: schema } : { type: 'json_object' };
    }
  }

  const think = thinking(unified);
  if (think) body.thinking = think;

  // Cohere-only fields a client may send through the gateway.
  for (const key of ['documents', 'citation_options', 'safety_mode', 'priority', 'strict_tools']) {
    if (unified[key] !== undefined && unified[key] !== null) body[key] = unified[key];
  }
  return body;
}

/** The unified (OpenAI) embeddings request -> a Cohere `/v2/embed` body. */
export function embedBody(unified, model, ctx) {
  let texts;
  if (typeof unified.input === 'string') texts = [unified.input];
  else if (Array.isArray(unified.input) && unified.input.every((s) => typeof s === 'string')) texts = unified.input;
  else throw fail('unsupported', 'Cohere embeds text: `input` must be a string or a list of strings');
  const body = {
    model,
    texts,
    input_type: setting(ctx, 'input_type') || DEFAULT_INPUT_TYPE,
    embedding_types: ['float'],
  };
  if (num(unified.dimensions) !== null) body.output_dimension = unified.dimensions;
  const truncateSetting = setting(ctx, 'truncate');
  if (truncateSetting) body.truncate = truncateSetting;
  return body;
}

// ---------------------------------------------------------------- response

const FINISH = { COMPLETE: 'stop', STOP_SEQUENCE: 'stop', MAX_TOKENS: 'length', TOOL_CALL: 'tool_calls' };

/** Cohere finish_reason -> OpenAI finish_reason; ERROR and TIMEOUT end in an error instead. */
function finishReason(reason, errorText) {
  if (reason === 'ERROR' || reason === 'TIMEOUT') {
    const what = reason === 'ERROR' ? 'failed' : 'timed out';
    throw fail('server', errorText ? `Cohere generation ${what}: ${errorText}` : `Cohere generation ${what}`, {
      code: reason === 'ERROR' ? 'generation_error' : 'generation_timeout',
    });
  }
  return FINISH[reason] || 'stop';
}

/** Cohere usage -> unified usage: `tokens` (what the model saw), else `billed_units`; a count
 *  that was not reported stays null, never 0. */
export function usageOf(usage) {
  const tokens = isObject(usage) && isObject(usage.tokens) ? usage.tokens : {};
  const billed = isObject(usage) && isObject(usage.billed_units) ? usage.billed_units : {};
  const prompt = count(tokens.input_tokens) ?? count(billed.input_tokens);
  const completion = count(tokens.output_tokens) ?? count(billed.output_tokens);
  const out = {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt !== null && completion !== null ? prompt + completion : null,
  };
  if (isObject(usage) && num(usage.cached_tokens) !== null) {
    out.prompt_tokens_details = { cached_tokens: count(usage.cached_tokens) };
  }
  return out;
}

function parseBody(bytes) {
  try {
    return JSON.parse(decoder.decode(bytes));
  } catch (e) {
    throw fail('invalid-response', `upstream body is not JSON: ${e.message}`);
  }
}

function chatResponse(response, ctx, created) {
  const body = parseBody(response.body);
  if (!isObject(body) || !isObject(body.message)) {
    throw fail('invalid-response', 'upstream response has no `message` object');
  }
  const message = body.message;
  let text = typeof message.tool_plan === 'string' ? message.tool_plan : '';
  let reasoning = '';
  for (const item of Array.isArray(message.content) ? message.content : []) {
    if (!isObject(item)) continue;
    if (item.type === 'text' && typeof item.text === 'string') text += item.text;
    else if (item.type === 'thinking' && typeof item.thinking === 'string') reasoning += item.thinking;
  }
  const toolCalls = (Array.isArray(message.tool_calls) ? message.tool_calls : []).map((call) => ({
    id: call.id ?? null,
    type: 'function',
    function: {
      name: call.function?.name ?? null,
      arguments: typeof call.function?.arguments === 'string' ? call.function.arguments : '{}',
    },
  }));
  const finish = finishReason(body.finish_reason, typeof body.error === 'string' ? body.error : undefined);
  const out = { role: 'assistant', content: text === '' && toolCalls.length > 0 ? null : text };
  if (reasoning) out.reasoning_content = reasoning;
  if (toolCalls.length > 0) out.tool_calls = toolCalls;
  const result = {
    id: typeof body.id === 'string' ? body.id : '',
    object: 'chat.completion',
    created,
    model: ctx.upstreamModel,
    choices: [{ index: 0, message: out, logprobs: null, finish_reason: finish }],
  };
  if (isObject(body.usage)) result.usage = usageOf(body.usage);
  return JSON.stringify(result);
}

function floatsToBase64(floats) {
  const bytes = new Uint8Array(new Float32Array(floats).buffer);
  let binary = '';
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

function embedResponse(response, ctx, encoding) {
  const body = parseBody(response.body);
  const vectors = isObject(body) && isObject(body.embeddings) ? body.embeddings.float : undefined;
  if (!Array.isArray(vectors)) throw fail('invalid-response', 'upstream response has no `embeddings.float` array');
  const meta = isObject(body.meta) ? body.meta : {};
  const prompt =
    (isObject(meta.tokens) ? count(meta.tokens.input_tokens) : null) ??
    (isObject(meta.billed_units) ? count(meta.billed_units.input_tokens) : null);
  return JSON.stringify({
    object: 'list',
    data: vectors.map((v, index) => ({
      object: 'embedding',
      index,
      embedding: encoding === 'base64' ? floatsToBase64(v) : v,
    })),
    model: ctx.upstreamModel,
    usage: { prompt_tokens: prompt, total_tokens: prompt },
  });
}

// ---------------------------------------------------------------- session

/** One request's translation state. `host` supplies `now()` (ms since the epoch, a Number). */
export class CohereSession {
  constructor(ctx, host) {
    this.ctx = ctx;
    this.host = host;
    this.includeUsage = false;
    this.encoding = 'float';
    // stream state
    this.done = false;
    this.id = '';
    this.created = 0;
    this.toolIndex = new Map(); // Cohere's tool-call index -> the OpenAI index
    this.toolCalls = 0;
  }

  transformRequest(request) {
    const { ctx } = this;
    if (ctx.operation === 'image') throw fail('unsupported', 'Cohere has no image generation API');
    const unified = parseRequest(request);
    let url;
    let body;
    if (ctx.operation === 'embedding') {
      url = endpoint(ctx, 'embed_path', EMBED_PATH);
      body = embedBody(unified, ctx.upstreamModel, ctx);
      if (unified.encoding_format === 'base64') this.encoding = 'base64';
    } else {
      url = endpoint(ctx, 'path', CHAT_PATH);
      body = chatBody(unified, ctx.upstreamModel);
      this.includeUsage = isObject(unified.stream_options) && unified.stream_options.include_usage === true;
    }
    const headers = [['content-type', 'application/json']];
    if (ctx.apiKey) headers.push(['authorization', `Bearer ${ctx.apiKey}`]);
    headers.push(['accept', body.stream === true ? 'text/event-stream' : 'application/json']);
    for (const [k, v] of ctx.settings || []) {
      if (k.startsWith('header.') && k.length > 7) headers.push([k.slice(7), v]);
    }
    return { method: 'POST', url, headers, body: encoder.encode(JSON.stringify(body)) };
  }

  transformResponse(response) {
    if (response.status < 200 || response.status >= 300) throw upstreamError(response, this.host.now());
    if (this.ctx.operation === 'embedding') return embedResponse(response, this.ctx, this.encoding);
    return chatResponse(response, this.ctx, Math.floor(this.host.now() / 1000));
  }

  chunk(delta, finish = null) {
    return JSON.stringify({
      id: this.id,
      object: 'chat.completion.chunk',
      created: this.created,
      model: this.ctx.upstreamModel,
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
    });
  }

  usageChunk(usage) {
    return JSON.stringify({
      id: this.id,
      object: 'chat.completion.chunk',
      created: this.created,
      model: this.ctx.upstreamModel,
      choices: [],
      usage,
    });
  }

  transformStreamChunk(event) {
    const raw = event.data.trim();
    if (raw === '' || raw === '[DONE]') return { chunks: [], done: this.done };
    let data;
    try {
      data = JSON.parse(raw);
    } catch (e) {
      throw fail('invalid-response', `stream event is not JSON: ${e.message}`);
    }
    if (!isObject(data)) throw fail('invalid-response', 'stream event is not a JSON object');
    const type = typeof data.type === 'string' ? data.type : event.event;
    const message = isObject(data.delta) && isObject(data.delta.message) ? data.delta.message : {};
    const chunks = [];
    switch (type) {
      case 'message-start':
        this.id = typeof data.id === 'string' ? data.id : '';
        this.created = Math.floor(this.host.now() / 1000);
        chunks.push(this.chunk({ role: 'assistant', content: '' }));
        break;
      case 'content-start':
      case 'content-delta': {
        const content = isObject(message.content) ? message.content : {};
        if (typeof content.text === 'string' && content.text !== '') chunks.push(this.chunk({ content: content.text }));
        if (typeof content.thinking === 'string' && content.thinking !== '') {
          chunks.push(this.chunk({ reasoning_content: content.thinking }));
        }
        break;
      }
      case 'tool-plan-delta':
        if (typeof message.tool_plan === 'string' && message.tool_plan !== '') {
          chunks.push(this.chunk({ content: message.tool_plan }));
        }
        break;
      case 'tool-call-start': {
        const call = isObject(message.tool_calls) ? message.tool_calls : {};
        const fn = isObject(call.function) ? call.function : {};
        const index = this.toolCalls++;
        this.toolIndex.set(data.index ?? index, index);
        chunks.push(
          this.chunk({
            tool_calls: [
              {
                index,
                id: call.id ?? null,
                type: 'function',
                function: { name: fn.name ?? null, arguments: typeof fn.arguments === 'string' ? fn.arguments : '' },
              },
            ],
          }),
        );
        break;
      }
      case 'tool-call-delta': {
        const index = this.toolIndex.get(data.index ?? this.toolCalls - 1);
        if (index === undefined) throw fail('invalid-response', 'tool-call-delta for a tool call that never started');
        const fragment = message.tool_calls?.function?.arguments;
        if (typeof fragment === 'string' && fragment !== '') {
          chunks.push(this.chunk({ tool_calls: [{ index, function: { arguments: fragment } }] }));
        }
        break;
      }
      case 'message-end': {
        const delta = isObject(data.delta) ? data.delta : {};
        const finish = finishReason(delta.finish_reason, typeof delta.error === 'string' ? delta.error : undefined);
        chunks.push(this.chunk({}, finish));
        if (this.includeUsage) chunks.push(this.usageChunk(usageOf(delta.usage)));
        this.done = true;
        return { chunks, done: true };
      }
      default:
        // content-end, tool-call-end, citation-start/-end (citations have no unified form), debug
        if (typeof data.type !== 'string' && typeof data.message === 'string') {
          throw fail('server', data.message); // an error object sent in place of an event
        }
        break;
    }
    return { chunks, done: false };
  }

  finishStream() {
    if (!this.done) throw fail('truncated', 'upstream stream ended before message-end');
    return { chunks: [], done: true };
  }
}
