// The official SDKs read the response cache's hits as they read live answers: run by
// tests/it/sdk.rs against a gateway whose sources are cached; prints one JSON object of what
// each SDK saw live and from the cache (with the `x-switchyard-cache` header of each).
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';

const { GATEWAY, KEY } = process.env;
const openai = new OpenAI({ baseURL: `${GATEWAY}/v1`, apiKey: KEY, maxRetries: 0 });
const anthropic = new Anthropic({ baseURL: GATEWAY, apiKey: KEY, maxRetries: 0 });
const out = {};

const said = (response) => response.headers.get('x-switchyard-cache');

// Chat Completions: live, then a hit as JSON and as a stream.
const chat = { model: 'gpt', messages: [{ role: 'user', content: 'Hello' }] };
const live = await openai.chat.completions.create(chat).withResponse();
const hit = await openai.chat.completions.create(chat).withResponse();
const stream = await openai.chat.completions.create({ ...chat, stream: true, stream_options: { include_usage: true } }).withResponse();
let text = '';
let usage = null;
let finish = null;
for await (const chunk of stream.data) {
  text += chunk.choices[0]?.delta?.content ?? '';
  finish = chunk.choices[0]?.finish_reason ?? finish;
  usage = chunk.usage ?? usage;
}
out.chat = {
  live: { cache: said(live.response), message: live.data.choices[0].message, usage: live.data.usage },
  hit: { cache: said(hit.response), message: hit.data.choices[0].message, usage: hit.data.usage },
  stream: { cache: said(stream.response), text, finish, usage },
};

// Anthropic: a streamed message with thinking, live, then its hit; then the same as JSON, live (a
// native answer is replayed in its own mode: Anthropic's has what the unified form cannot
// carry) and its hit.
const thinking = {
  model: 'claude-code', max_tokens: 4096, thinking: { type: 'enabled', budget_tokens: 2048 },
  messages: [{ role: 'user', content: 'Fix the failing test' }],
};
const blocks = (message) => message.content.map((b) => ({ type: b.type, text: b.text ?? null, thinking: b.thinking ?? null,
  signature: b.signature ?? null, name: b.name ?? null, input: b.input ?? null }));
const liveStream = anthropic.messages.stream(thinking);
const liveMessage = await liveStream.finalMessage();
const hitStream = anthropic.messages.stream(thinking);
const hitMessage = await hitStream.finalMessage();
const wholeLive = await anthropic.messages.create(thinking).withResponse();
const whole = await anthropic.messages.create(thinking).withResponse();
out.anthropic = {
  whole_live: { cache: said(wholeLive.response), blocks: blocks(wholeLive.data), stop: wholeLive.data.stop_reason },
  live: { cache: (await liveStream.withResponse()).response.headers.get('x-switchyard-cache'), blocks: blocks(liveMessage), stop: liveMessage.stop_reason, usage: liveMessage.usage },
  stream: { cache: (await hitStream.withResponse()).response.headers.get('x-switchyard-cache'), blocks: blocks(hitMessage), stop: hitMessage.stop_reason, usage: hitMessage.usage },
  whole: { cache: said(whole.response), blocks: blocks(whole.data), stop: whole.data.stop_reason },
};

// Responses: live, then the hit as JSON and as a stream.
const ask = { model: 'gpt', input: 'Hello again', max_output_tokens: 100 };
const first = await openai.responses.create(ask).withResponse();
const again = await openai.responses.create(ask).withResponse();
const events = await openai.responses.create({ ...ask, stream: true }).withResponse();
let streamedText = '';
let terminal = null;
for await (const event of events.data) {
  if (event.type === 'response.output_text.delta') streamedText += event.delta;
  if (event.type === 'response.completed') terminal = event.response;
}
out.responses = {
  live: { cache: said(first.response), text: first.data.output_text, status: first.data.status },
  hit: { cache: said(again.response), text: again.data.output_text, status: again.data.status, id: again.data.id, live_id: first.data.id },
  stream: { cache: said(events.response), text: streamedText, status: terminal?.status ?? null },
};

console.log(JSON.stringify(out));
