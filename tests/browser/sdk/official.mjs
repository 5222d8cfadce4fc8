// The official SDKs (openai, @anthropic-ai/sdk; pinned in ../package-lock.json) against a
// gateway: run by tests/it/sdk.rs, which reads what this prints (one JSON object) and checks it.
// GATEWAY is the gateway's URL, KEY a gateway key; the models are those the test configures.
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';

const { GATEWAY, KEY } = process.env;
const openai = new OpenAI({ baseURL: `${GATEWAY}/v1`, apiKey: KEY, maxRetries: 0 });
const anthropic = new Anthropic({ baseURL: GATEWAY, apiKey: KEY, maxRetries: 0 });
const out = {};

const tools = [
  { type: 'function', name: 'get_weather', strict: false, parameters: { type: 'object', properties: { location: { type: 'string' } } } },
  { type: 'function', name: 'get_time', strict: false, parameters: { type: 'object', properties: { timezone: { type: 'string' } } } },
];

/** A stream's events as the SDK types them: text, function calls, terminal events, numbers. */
async function streamed(params) {
  const stream = await openai.responses.create({ ...params, stream: true });
  const seen = { text: '', calls: [], terminal: [], sequence: [], error: null };
  for await (const event of stream) {
    seen.sequence.push(event.sequence_number);
    if (event.type === 'response.output_text.delta') seen.text += event.delta;
    if (event.type === 'response.output_item.done' && event.item.type === 'function_call') {
      seen.calls.push({ call_id: event.item.call_id, name: event.item.name, arguments: JSON.parse(event.item.arguments) });
    }
    if (['response.completed', 'response.incomplete', 'response.failed'].includes(event.type)) {
      seen.terminal.push(event.type);
      seen.id = event.response.id;
      if (event.type === 'response.failed') seen.error = event.response.error;
    }
  }
  return seen;
}

// Responses: text, a continued conversation, streamed function calls and their results, a cut stream.
const first = await openai.responses.create({ model: 'gpt', input: 'Hello', max_output_tokens: 100 });
out.text = { output_text: first.output_text, usage: first.usage, status: first.status };
const second = await openai.responses.create({ model: 'gpt', input: 'And again?', previous_response_id: first.id });
out.continued = { previous_response_id: second.previous_response_id, status: second.status };
const calls = await streamed({ model: 'gpt-tools', input: 'Weather and time in Paris?', tools });
out.calls = calls;
const results = await openai.responses.create({
  model: 'gpt', tools,
  input: [
    { role: 'user', content: 'Weather and time in Paris?' },
    ...calls.calls.map((c) => ({ type: 'function_call', call_id: c.call_id, name: c.name, arguments: JSON.stringify(c.arguments) })),
    ...calls.calls.map((c) => ({ type: 'function_call_output', call_id: c.call_id, output: `${c.name}: fine` })),
  ],
});
out.results = { status: results.status, output_text: results.output_text };
out.cut = await streamed({ model: 'claude-cut', input: 'Hi' });
try {
  await openai.responses.create({ model: 'gpt', input: 'x', previous_response_id: 'resp_unknown' });
  out.unknown = 'answered';
} catch (e) {
  out.unknown = { status: e.status, code: e.code };
}

// Anthropic: a message, and a streamed one with thinking whose signature the SDK keeps.
const message = await anthropic.messages.create({ model: 'claude', max_tokens: 1024, messages: [{ role: 'user', content: 'Hi' }] });
out.message = { text: message.content[0].text, usage: message.usage };
const thinking = await anthropic.messages.stream({
  model: 'claude-code', max_tokens: 4096, thinking: { type: 'enabled', budget_tokens: 2048 },
  messages: [{ role: 'user', content: 'Fix the failing test' }],
}).finalMessage();
out.thinking = {
  blocks: thinking.content.map((b) => ({ type: b.type, signature: b.signature ?? null, data: b.data ?? null, input: b.input ?? null })),
  usage: thinking.usage,
  stop_reason: thinking.stop_reason,
};
const counted = await anthropic.messages.countTokens({ model: 'claude', messages: [{ role: 'user', content: 'Hi' }] });
out.counted = counted;

console.log(JSON.stringify(out));
