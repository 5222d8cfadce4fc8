// Playground: with a pasted gateway key the page lists the key's models; a message sent with
// Ctrl+Enter, streamed, comes back as the upstream's answer, with the source that served it and
// the timings.
import assert from 'node:assert/strict';
import { tabToNavLink } from '../lib.mjs';

const ANSWER = 'Hello from the mock upstream.';

export default async function (ctx) {
  const page = await ctx.page();
  await page.goto(`${ctx.env.gateway}/ui/#/playground`);
  await page.reload();
  await page.getByRole('heading', { level: 1, name: 'Playground' }).waitFor();
  await tabToNavLink(page, 'Operations');

  await page.getByText('Enter a gateway key to list its models.').waitFor();
  const keyInput = page.getByLabel('Gateway key');
  assert.equal(await keyInput.getAttribute('type'), 'password', 'the key is hidden by default');
  // Pasted, then Tab out of the field: the key's models are listed.
  await keyInput.fill(ctx.env.gatewayKey);
  await Promise.all([
    page.waitForResponse((r) => r.url().endsWith('/v1/models') && r.ok()),
    keyInput.press('Tab'),
  ]);
  const model = page.getByLabel('Model', { exact: true });
  await model.waitFor();
  const offered = await model.locator('option').allTextContents();
  assert.ok(offered.includes('gpt-4o-mini'), `the key's models: ${offered}`);
  await model.selectOption('gpt-4o-mini');
  const stream = page.getByRole('switch', { name: 'Stream' });
  assert.ok(await stream.isChecked(), 'streaming is on by default');

  await page.getByLabel('Message', { exact: true }).fill('Say hello');
  const [response] = await Promise.all([
    page.waitForResponse((r) => r.url().endsWith('/v1/chat/completions')),
    page.getByLabel('Message', { exact: true }).press('Control+Enter'),
  ]);
  assert.equal(response.status(), 200);
  assert.match(response.headers()['content-type'], /^text\/event-stream/, 'the answer is streamed');
  const sent = JSON.parse(response.request().postData());
  assert.equal(sent.model, 'gpt-4o-mini');
  assert.equal(sent.stream, true);
  assert.deepEqual(sent.messages, [{ role: 'user', content: 'Say hello' }]);
  assert.equal(response.request().headers().authorization, `Bearer ${ctx.env.gatewayKey}`);

  await page.getByTestId('user-message').getByText('Say hello').waitFor();
  const answer = page.getByTestId('assistant-message');
  await answer.getByTestId('assistant-text').getByText(ANSWER, { exact: true }).waitFor();
  const meta = answer.getByTestId('answer-meta');
  await meta.waitFor();
  const source = await meta.getByTestId('answer-source').innerText();
  assert.ok(['alpha', 'beta'].includes(source), `the source that served: ${source}`);
  assert.equal(source, response.headers()['x-switchyard-source']);
  const text = await meta.innerText();
  assert.match(text, /first token: \d+(\.\d+)? (ms|s)/, text);
  assert.match(text, /total: \d+(\.\d+)? (ms|s)/, text);
  assert.match(text, /usage: 12 in \/ 6 out/, text);
  const requestId = response.headers()['x-request-id'];
  assert.ok(requestId, 'the gateway names the request');
  await meta.getByRole('link', { name: `request ${requestId} in logs` }).waitFor();
  assert.equal(await answer.getAttribute('aria-busy'), 'false');
  assert.equal(await page.getByLabel('Message', { exact: true }).inputValue(), '', 'the box is emptied');
  await ctx.shot(page, 'playground');

  // "Create a playground key" twice: one key named `playground`, with a small hourly quota;
  // the first secret stops working once the second is made.
  const made = [];
  for (let i = 0; i < 2; i++) {
    const [created] = await Promise.all([
      page.waitForResponse((r) => r.url().endsWith('/admin/api/playground-key') && r.request().method() === 'POST'),
      page.getByRole('button', { name: 'Create a playground key' }).click(),
    ]);
    assert.equal(created.status(), 201);
    made.push((await created.json()).key);
  }
  const { keys } = await ctx.admin('GET', '/keys');
  const playground = keys.filter((k) => k.name.startsWith('playground'));
  assert.equal(playground.length, 1, `one playground key: ${playground.map((k) => k.name)}`);
  assert.equal(playground[0].token_quota, 20000);
  assert.equal(playground[0].period, 'hour');
  // Asked from the test, not the page: a refused key is no error of the page's.
  const status = async (key) => (await fetch(`${ctx.env.gateway}/v1/models`, { headers: { Authorization: `Bearer ${key}` } })).status;
  assert.equal(await status(made[0]), 401, 'the first playground secret was replaced');
  assert.equal(await status(made[1]), 200);

  // The key stays in this tab only.
  assert.equal(await page.evaluate(() => Object.values(localStorage).some((v) => v.includes('sk-'))), false);
}
