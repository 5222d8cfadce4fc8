// Logs: filtered by key, exactly that key's rows are shown (and the filter lives in the URL);
// a row opens its detail drawer by keyboard; "errors only" shows the failed requests, whose
// upstream message carries HTML that is shown as text, never run.
import assert from 'node:assert/strict';
import { tabToNavLink } from '../lib.mjs';

const HTML_MESSAGE = "upstream broke: <script>alert('log')</script><b>bold</b>";

export default async function (ctx) {
  const { key } = await ctx.admin('POST', '/keys', { name: 'logged', models: ['*'] });
  for (let i = 0; i < 2; i++) assert.equal((await ctx.chat('gpt-4o-mini', key)).status, 200);
  for (let i = 0; i < 2; i++) assert.equal((await ctx.chat('gpt-4o-mini')).status, 200);
  // Run alone (without 07), make the failed request 07 leaves behind.
  if ((await ctx.admin('GET', '/logs?errors=true')).total === 0) {
    await ctx.control('fail');
    try { assert.equal((await ctx.chat('alpha/gpt-4o-mini')).status, 500); } finally { await ctx.control('recover'); }
    await ctx.admin('POST', '/cooldowns/clear', {});
  }
  const expected = await waitForLogs(ctx, '?key=logged', 2);
  const failed = await waitForLogs(ctx, '?errors=true', 1);

  const page = await ctx.page();
  await page.goto(`${ctx.env.gateway}/ui/#/logs`);
  await page.reload();
  await page.getByRole('heading', { level: 1, name: 'Logs' }).waitFor();
  await tabToNavLink(page, 'Playground');
  await page.getByTestId('log-total').waitFor();

  // Filter by key: typed, submitted with Enter.
  const filters = page.getByRole('form', { name: 'Log filters' });
  await filters.getByLabel('Key', { exact: true }).fill('logged');
  await Promise.all([
    page.waitForResponse((r) => r.url().includes('/admin/api/logs?') && r.url().includes('key=logged') && r.ok()),
    filters.getByLabel('Key', { exact: true }).press('Enter'),
  ]);
  assert.match(page.url(), /#\/logs\?key=logged$/, 'the filter is in the URL');
  const total = page.getByTestId('log-total');
  await total.getByText('Rows 1–2 of 2').waitFor();
  const rows = page.locator('tr[data-testid^="log-row-"]');
  assert.equal(await rows.count(), 2);
  const shownIds = await rows.evaluateAll((trs) => trs.map((tr) => Number(tr.dataset.testid.replace('log-row-', ''))));
  assert.deepEqual(shownIds, expected.rows.map((r) => r.id), 'exactly the key\'s rows, newest first');
  for (let i = 0; i < 2; i++) assert.equal(await rows.nth(i).locator('td').nth(3).innerText(), 'logged');
  // A reload keeps the filter.
  await page.reload();
  await total.getByText('Rows 1–2 of 2').waitFor();
  assert.equal(await filters.getByLabel('Key', { exact: true }).inputValue(), 'logged');

  // The detail drawer, by keyboard: Enter on a row opens it, Escape closes it and gives the focus back.
  const newest = expected.rows[0];
  const row = page.getByTestId(`log-row-${newest.id}`);
  await row.focus();
  await page.keyboard.press('Enter');
  const drawer = page.getByRole('dialog', { name: `Request ${newest.request_id}` });
  await drawer.waitFor();
  assert.equal(await kv(drawer, 'Key'), 'logged');
  assert.equal(await kv(drawer, 'Source'), newest.source);
  assert.equal(await kv(drawer, 'Status'), '200');
  assert.equal(await kv(drawer, 'Tokens in'), '12');
  assert.equal(await kv(drawer, 'Row id'), String(newest.id));
  await ctx.shot(page, 'logs-detail');
  await page.keyboard.press('Escape');
  await drawer.waitFor({ state: 'detached' });
  assert.equal(await page.evaluate(() => document.activeElement?.dataset.testid), `log-row-${newest.id}`, 'focus back on the row');

  // Errors only (the key filter cleared): the failed rows, their HTML shown as text.
  await page.getByRole('button', { name: 'Clear filters' }).click();
  await page.waitForFunction(() => !location.hash.includes('key='));
  await Promise.all([
    page.waitForResponse((r) => r.url().includes('/admin/api/logs?') && r.url().includes('errors=true') && r.ok()),
    filters.getByRole('checkbox', { name: 'Errors only' }).check(),
  ]);
  await total.getByText(`of ${failed.total}`).waitFor();
  assert.equal(await rows.count(), failed.rows.length);
  for (const tr of await rows.all()) assert.match(await tr.getAttribute('class'), /row-error/);
  const htmlRows = rows.filter({ has: page.getByText(HTML_MESSAGE, { exact: true }) });
  assert.ok(await htmlRows.count() >= 1, 'the upstream\'s HTML message is shown literally');
  assert.equal(await page.locator('main script, main b').count(), 0, 'no element made from the message');
  await htmlRows.first().click();
  const errDrawer = page.getByRole('dialog', { name: /^Request / });
  const message = errDrawer.getByTestId('log-message');
  assert.equal(await message.innerText(), HTML_MESSAGE);
  assert.equal(await message.locator('*').count(), 0, 'the message is text only');
  assert.equal(await kv(errDrawer, 'Error'), 'upstream_server_error');
  await ctx.shot(page, 'logs-error');
  await errDrawer.getByRole('button', { name: 'Close' }).click();
  await errDrawer.waitFor({ state: 'detached' });
  await ctx.shot(page, 'logs');
}

/** The admin API's log page for `query` once it holds at least `n` rows (the log is written behind the answer). */
async function waitForLogs(ctx, query, n) {
  let page;
  for (let i = 0; i < 50; i++) {
    page = await ctx.admin('GET', `/logs${query}`);
    if (page.total >= n) return page;
  }
  throw new Error(`/logs${query} has ${page.total} rows, not ${n}`);
}

async function kv(scope, label) {
  return scope.locator('.kv-row').filter({ has: scope.page().getByText(label, { exact: true }) }).locator('dd').innerText();
}
