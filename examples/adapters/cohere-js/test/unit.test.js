// Unit tests for the mapping module, for what the recorded cases do not show.
//   node --test test/
import test from 'node:test';
import assert from 'node:assert/strict';
import { CohereSession, chatBody, classify, parseRetryAfterMs, usageOf } from '../cohere.js';

const NOW = 1700000000000;
const context = (over = {}) => ({
  operation: 'chat',
  sourceName: 'test',
  baseUrl: 'https://api.cohere.com',
  apiKey: 'k',
  upstreamModel: 'command-a-03-2025',
  settings: [],
  ...over,
});
const session = (over) => new CohereSession(context(over), { now: () => NOW });
const body = (req) => JSON.parse(new TextDecoder().decode(req.body));
const payloadOf = (fn) => {
  try {
    fn();
  } catch (e) {
    assert.ok(Object.hasOwn(e, 'payload'), 'a failure carries its adapter-error as an own `payload`');
    return e.payload;
  }
  assert.fail('expected an adapter error');
};

test('statuses map to the kinds Cohere documents', () => {
  const kinds = Object.fromEntries(
    [400, 401, 402, 403, 404, 409, 413, 422, 498, 499, 500, 501, 502, 503, 504, 529, 307, 418].map((s) => [s, classify(s, '')]),
  );
  assert.deepEqual(kinds, {
    400: 'bad-request', 401: 'auth', 402: 'quota', 403: 'permission', 404: 'not-found', 409: 'bad-request',
    413: 'bad-request', 422: 'bad-request', 498: 'content-policy', 499: 'server', 500: 'server',
    501: 'unsupported', 502: 'server', 503: 'overloaded', 504: 'server', 529: 'overloaded', 307: 'server',
    418: 'bad-request',
  });
  assert.equal(classify(429, 'You are past the per minute request limit'), 'rate-limit');
  assert.equal(classify(429, 'limited to 1000 API calls / month'), 'quota');
});

test('Retry-After in seconds or as an HTTP date', () => {
  assert.equal(parseRetryAfterMs('1.5', NOW), 1500n);
  assert.equal(parseRetryAfterMs(new Date(NOW + 20000).toUTCString(), NOW), 20000n);
  assert.equal(parseRetryAfterMs('soon', NOW), undefined);
  assert.equal(parseRetryAfterMs(undefined, NOW), undefined);
});

test('errors without a JSON body keep the status and a readable message', () => {
  const e = payloadOf(() =>
    session().transformResponse({ status: 502, headers: [], body: new TextEncoder().encode('<html>bad gateway</html>') }),
  );
  assert.deepEqual([e.kind, e.status, e.message], ['server', 502, '<html>bad gateway</html>']);
  const empty = payloadOf(() => session().transformResponse({ status: 503, headers: [], body: new Uint8Array() }));
  assert.deepEqual([empty.kind, empty.message], ['overloaded', 'upstream returned HTTP 503']);
});

test('usage: tokens first, billed units as the fallback, null when not reported', () => {
  assert.deepEqual(usageOf({ billed_units: { input_tokens: 5, output_tokens: 2 } }), {
    prompt_tokens: 5, completion_tokens: 2, total_tokens: 7,
  });
  assert.deepEqual(usageOf({ tokens: { input_tokens: 9 } }), { prompt_tokens: 9, completion_tokens: null, total_tokens: null });
  assert.deepEqual(usageOf(undefined), { prompt_tokens: null, completion_tokens: null, total_tokens: null });
  assert.deepEqual(usageOf({ tokens: { input_tokens: 1661.0, output_tokens: 19.0 }, cached_tokens: 1024 }), {
    prompt_tokens: 1661, completion_tokens: 19, total_tokens: 1680, prompt_tokens_details: { cached_tokens: 1024 },
  });
});

test('request details: tool_choice none, json_object, thinking off, empty assistant turns, n', () => {
  const b = chatBody(
    {
      messages: [
        { role: 'user', content: 'Hi' },
        { role: 'assistant', content: null },
        { role: 'assistant', content: [{ type: 'text', text: 'Hello' }] },
      ],
      tools: [{ type: 'function', function: { name: 'f' } }],
      tool_choice: 'none',
      response_format: { type: 'json_object' },
      disable_thinking: true,
      stop: ['a', 'b'],
    },
    'm',
  );
  assert.deepEqual(b, {
    model: 'm',
    messages: [{ role: 'user', content: 'Hi' }, { role: 'assistant', content: 'Hello' }],
    tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: {} } } }],
    tool_choice: 'NONE',
    response_format: { type: 'json_object' },
    thinking: { type: 'disabled' },
    stop_sequences: ['a', 'b'],
  });
  assert.equal(payloadOf(() => chatBody({ messages: [], n: 2 }, 'm')).kind, 'unsupported');
  assert.equal(payloadOf(() => chatBody({ messages: [{ role: 'user', content: [{ type: 'input_audio' }] }] }, 'm')).kind, 'unsupported');
  assert.equal(payloadOf(() => session().transformRequest('[1]')).kind, 'bad-request');
});

test('a base_url that already ends in /v2, and the path settings', () => {
  assert.equal(session({ baseUrl: 'https://api.cohere.com/v2' }).transformRequest('{"messages":[]}').url, 'https://api.cohere.com/v2/chat');
  assert.equal(
    session({ baseUrl: 'https://proxy.example/', settings: [['path', '/cohere/v2/chat']] }).transformRequest('{"messages":[]}').url,
    'https://proxy.example/cohere/v2/chat',
  );
  const req = session({ apiKey: '' }).transformRequest('{"messages":[]}');
  assert.ok(!req.headers.some(([k]) => k === 'authorization'), 'no key, no authorization header');
});

test('embeddings as base64 when asked', () => {
  const s = session({ operation: 'embedding', upstreamModel: 'embed-v4.0' });
  assert.deepEqual(body(s.transformRequest('{"input":"hi","encoding_format":"base64"}')).texts, ['hi']);
  const out = JSON.parse(
    s.transformResponse({
      status: 200,
      headers: [],
      body: new TextEncoder().encode(JSON.stringify({ id: 'x', embeddings: { float: [[1, -2]] }, meta: {} })),
    }),
  );
  const bytes = Uint8Array.from(atob(out.data[0].embedding), (c) => c.charCodeAt(0));
  assert.deepEqual(Array.from(new Float32Array(bytes.buffer)), [1, -2]);
  assert.deepEqual(out.usage, { prompt_tokens: null, total_tokens: null });
  assert.equal(payloadOf(() => s.transformRequest('{"input":[[1,2,3]]}')).kind, 'unsupported');
});

test('a stream: [DONE] and unknown events are ignored, a thinking delta is reasoning_content', () => {
  const s = session();
  s.transformRequest('{"stream":true,"messages":[]}');
  const ev = (data) => s.transformStreamChunk({ event: 'message', data: JSON.stringify(data) });
  assert.equal(ev({ type: 'message-start', id: 'm1' }).chunks.length, 1);
  const thinking = ev({ type: 'content-delta', index: 0, delta: { message: { content: { thinking: 'hmm' } } } });
  assert.deepEqual(JSON.parse(thinking.chunks[0]).choices[0].delta, { reasoning_content: 'hmm' });
  assert.deepEqual(ev({ type: 'debug', prompt: 'x' }), { chunks: [], done: false });
  assert.deepEqual(s.transformStreamChunk({ event: 'message', data: '[DONE]' }), { chunks: [], done: false });
  const end = ev({ type: 'message-end', delta: { finish_reason: 'MAX_TOKENS' } });
  assert.equal(end.done, true);
  assert.equal(end.chunks.length, 1, 'no usage chunk unless include_usage was asked for');
  assert.equal(JSON.parse(end.chunks[0]).choices[0].finish_reason, 'length');
  assert.deepEqual(s.finishStream(), { chunks: [], done: true });
  assert.equal(payloadOf(() => session().transformStreamChunk({ event: 'message', data: '{oops' })).kind, 'invalid-response');
});
