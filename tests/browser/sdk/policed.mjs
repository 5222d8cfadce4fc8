// The official SDKs against a gateway (the real binary) with policies: personal data redacted
// on the way up and across a stream's chunks, a secret refused as each SDK's own error. Run by
// tests/it/sdk.rs; prints one JSON object of what each SDK saw.
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';

const { GATEWAY, KEY } = process.env;
const openai = new OpenAI({ baseURL: `${GATEWAY}/v1`, apiKey: KEY, maxRetries: 0 });
const anthropic = new Anthropic({ baseURL: GATEWAY, apiKey: KEY, maxRetries: 0 });
const out = {};

const sent = await openai.chat.completions.create({
  model: 'fixture',
  messages: [{ role: 'user', content: 'Card 4111 1111 1111 1111, mail bob@example.com' }],
});
out.whole = { finish: sent.choices[0].finish_reason };

const stream = await openai.chat.completions.create({
  model: 'say3:Mail alice.smith@example.com now', stream: true, stream_options: { include_usage: true },
  messages: [{ role: 'user', content: 'hi' }],
});
const pieces = [];
let usage = null;
let finish = null;
for await (const chunk of stream) {
  const piece = chunk.choices[0]?.delta?.content;
  if (piece) pieces.push(piece);
  finish = chunk.choices[0]?.finish_reason ?? finish;
  usage = chunk.usage ?? usage;
}
out.stream = { pieces, text: pieces.join(''), finish, usage };

const refused = async (call) => {
  try {
    await call();
    return { refused: false };
  } catch (e) {
    return { refused: true, status: e.status, code: e.code ?? e.error?.error?.code ?? null, type: e.error?.error?.type ?? e.type ?? null, message: e.message };
  }
};
const leaky = 'deploy with AKIAIOSFODNN7EXAMPLE please';
out.openai = await refused(() => openai.chat.completions.create({ model: 'fixture', messages: [{ role: 'user', content: leaky }] }));
out.anthropic = await refused(() => anthropic.messages.create({ model: 'fixture', max_tokens: 64, messages: [{ role: 'user', content: leaky }] }));
console.log(JSON.stringify(out));
