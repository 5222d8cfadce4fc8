// Spend: a chat's cost shows on the Spend page (the total, the key's row, then by source, model
// and day with the chart); a key's budget set and lifted on the Keys page; a run-time price set
// on the Spend page for one source, shown as such, then removed.
import assert from 'node:assert/strict';

const KEY = 'tester'; // the config key whose secret is env.gatewayKey (tests/it/support/binary.rs)
const MODEL = 'gpt-4o-mini';
/** A dollar amount as the API writes it, not zero. */
const MONEY = /^\$(?=[\d.]*[1-9])\d+(\.\d+)?$/;

export default async function (ctx) {
  const requests = async () => (await ctx.admin('GET', '/spend?by=key')).rows.find((r) => r.name === KEY)?.requests ?? 0;
  const before = await requests();
  const served = await ctx.chat(MODEL);
  assert.equal(served.status, 200, JSON.stringify(served.body));
  const day = new Date().toISOString().slice(0, 10);
  // The request log (and its cost) is written behind the answer.
  let after = before;
  for (let i = 0; i < 50 && after <= before; i++) after = await requests();
  assert.ok(after > before, `the key's spend counts the request (${before} → ${after})`);

  const page = await ctx.page();
  await page.goto(`${ctx.env.gateway}/ui/#/spend`);
  await page.reload();
  await page.getByRole('heading', { level: 1, name: 'Spend' }).waitFor();

  // The total and the key's row: non-zero dollar amounts, as the API wrote them.
  const total = page.getByTestId('spend-total').locator('.stat-value');
  await total.waitFor();
  assert.match(await total.innerText(), MONEY);
  const byKey = page.getByRole('table', { name: 'Spend by key' });
  const keyRow = rowWith(byKey, KEY);
  await keyRow.waitFor();
  assert.match(await keyRow.locator('td').nth(1).innerText(), MONEY);
  await page.getByRole('img', { name: 'Spend per day chart' }).locator('canvas').first().waitFor();
  await ctx.shot(page, 'spend');

  // Grouped by source, model, day: other rows under another name; the chart stays.
  const groupBy = page.getByRole('radiogroup', { name: 'Group by' });
  for (const [label, by, name] of [
    ['Source', 'source', served.source], ['Model', 'model', `${served.source}/${MODEL}`], ['Day', 'day', day],
  ]) {
    await groupBy.getByRole('radio', { name: label, exact: true }).click();
    const table = page.getByRole('table', { name: `Spend by ${by}` });
    const row = rowWith(table, name);
    await row.waitFor();
    assert.match(await row.locator('td').nth(1).innerText(), MONEY, `${by} ${name}`);
    assert.equal(await byKey.count(), 0, 'the key rows are gone');
    assert.equal(await rowWith(table, KEY).count(), 0, `no key row by ${by}`);
  }
  assert.ok(await page.locator('.chart-box canvas').count() >= 1, 'the chart is drawn');

  // A budget of $5 a day on the key, from the Keys page; seen by GET /budgets and the Spend page.
  const nav = page.getByRole('navigation', { name: 'Main' });
  await nav.getByRole('link', { name: 'Keys' }).click();
  await page.getByRole('heading', { level: 1, name: 'Keys' }).waitFor();
  await setBudget(page, async (dialog) => {
    await dialog.getByLabel('Budget (USD)', { exact: true }).fill('5');
    await dialog.getByLabel('Budget period', { exact: true }).selectOption('day');
    await dialog.getByRole('button', { name: 'Save budget' }).click();
  });
  const set = (await ctx.admin('GET', '/budgets')).keys.find((b) => b.key === KEY);
  assert.equal(set?.usd, '5', JSON.stringify(set));
  assert.equal(set.period, 'day');
  const keysRow = page.getByRole('table', { name: 'Gateway keys' }).getByRole('row')
    .filter({ has: page.locator('td:first-child').getByText(KEY, { exact: true }) });
  await keysRow.getByText(/ of \$5 per day/).waitFor();
  await keysRow.getByRole('progressbar', { name: `Budget use of ${KEY}` }).waitFor();
  await ctx.shot(page, 'keys-budget');
  await nav.getByRole('link', { name: 'Spend' }).click();
  await page.getByRole('heading', { level: 1, name: 'Spend' }).waitFor();
  await page.getByRole('table', { name: 'Budgets' }).getByRole('progressbar', { name: `Budget use of key ${KEY}` }).waitFor();

  // Lifted again (later flows are unaffected).
  await nav.getByRole('link', { name: 'Keys' }).click();
  await page.getByRole('heading', { level: 1, name: 'Keys' }).waitFor();
  await setBudget(page, (dialog) => dialog.getByRole('button', { name: 'Lift budget' }).click());
  assert.ok(!(await ctx.admin('GET', '/budgets')).keys.some((b) => b.key === KEY), 'the budget is lifted');
  await keysRow.getByText('no budget', { exact: true }).waitFor();

  // A run-time price for beta's model, from the Spend page: shown with origin runtime.
  await nav.getByRole('link', { name: 'Spend' }).click();
  await page.getByRole('heading', { level: 1, name: 'Spend' }).waitFor();
  const form = page.getByRole('form', { name: 'Set a run-time price' });
  await form.getByLabel('Source', { exact: true }).locator('option', { hasText: 'beta' }).waitFor({ state: 'attached' });
  await form.getByLabel('Source', { exact: true }).selectOption('beta');
  await form.getByLabel('Model', { exact: true }).fill(MODEL);
  await form.getByLabel('Input', { exact: true }).fill('0.20');
  await form.getByLabel('Output', { exact: true }).fill('0.80');
  const [put] = await Promise.all([
    page.waitForResponse((r) => r.url().endsWith('/admin/api/prices') && r.request().method() === 'PUT'),
    form.getByRole('button', { name: 'Set price' }).click(),
  ]);
  assert.ok(put.ok(), `set: ${put.status()} ${await put.text()}`);
  const prices = page.getByRole('table', { name: 'Model prices' });
  const beta = rowWith(prices, 'beta', MODEL);
  await beta.getByText('runtime', { exact: true }).waitFor();
  assert.match(await beta.locator('td').nth(2).innerText(), /^\$0\.20?$/, 'the input price as set');
  assert.match(await beta.locator('td').nth(4).innerText(), /^\$0\.80?$/, 'the output price as set');
  const alpha = rowWith(prices, 'alpha', MODEL);
  assert.equal(await alpha.getByText('runtime', { exact: true }).count(), 0, 'alpha keeps its own price');
  const listed = (await ctx.admin('GET', '/prices')).models.find((m) => m.source === 'beta' && m.model === MODEL);
  assert.equal(listed?.origin.from, 'runtime', JSON.stringify(listed));
  await ctx.shot(page, 'spend-price');

  // Removed: the table's price applies again.
  await beta.getByRole('button', { name: `Remove run-time price of ${MODEL} at beta` }).click();
  const dialog = page.getByRole('dialog', { name: 'Remove run-time price' });
  const [removed] = await Promise.all([
    page.waitForResponse((r) => r.url().includes('/admin/api/prices?') && r.request().method() === 'DELETE'),
    dialog.getByRole('button', { name: 'Remove price' }).click(),
  ]);
  assert.equal(removed.status(), 204);
  await dialog.waitFor({ state: 'detached' });
  await beta.getByText('runtime', { exact: true }).waitFor({ state: 'detached' });
  const again = (await ctx.admin('GET', '/prices')).models.find((m) => m.source === 'beta' && m.model === MODEL);
  assert.notEqual(again?.origin.from, 'runtime', JSON.stringify(again));
}

/** The rows of `table` with, for each of `names`, a cell reading exactly that. */
function rowWith(table, ...names) {
  let rows = table.getByRole('row');
  for (const name of names) rows = rows.filter({ has: table.page().getByRole('cell', { name, exact: true }) });
  return rows;
}

/** Opens the key's budget dialog, runs `act` in it, waits for its PATCH and for it to close. */
async function setBudget(page, act) {
  await page.getByRole('button', { name: `Budget of ${KEY}`, exact: true }).click();
  const dialog = page.getByRole('dialog', { name: `Budget of ${KEY}` });
  await dialog.waitFor();
  const [patched] = await Promise.all([
    page.waitForResponse((r) => r.url().endsWith(`/admin/api/keys/${KEY}`) && r.request().method() === 'PATCH'),
    act(dialog),
  ]);
  assert.ok(patched.ok(), `budget: ${patched.status()} ${await patched.text()}`);
  await dialog.waitFor({ state: 'detached' });
}
