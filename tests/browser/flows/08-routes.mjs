// Routes: an auto-select route `smart` over alpha and beta made in the page; a provider switched
// off and a priority changed in the route's table, each felt by the next request; the route
// deleted (clients get 404 again).
import assert from 'node:assert/strict';
import { tabToNavLink } from '../lib.mjs';

const ALPHA = 'alpha/gpt-4o-mini in smart';
const BETA = 'beta/gpt-4o-mini in smart';

export default async function (ctx) {
  const page = await ctx.page();
  await page.goto(`${ctx.env.gateway}/ui/#/routes`);
  await page.reload();
  await page.getByRole('heading', { level: 1, name: 'Routes' }).waitFor();
  await tabToNavLink(page, 'Logs');
  assert.equal((await ctx.chat('smart')).status, 404, 'no route yet');

  await page.getByRole('button', { name: 'Add route' }).click();
  const dialog = page.getByRole('dialog');
  await dialog.getByRole('heading', { name: 'Add route' }).waitFor();
  await dialog.getByLabel('Alias').fill('smart');
  await dialog.getByLabel('Mode').selectOption('auto-select');
  await dialog.getByRole('button', { name: 'Add provider' }).click();
  await dialog.getByLabel('Provider 1 source').selectOption('alpha');
  assert.equal(await dialog.getByLabel('Provider 1 model').inputValue(), 'gpt-4o-mini', 'the source\'s model is picked');
  await dialog.getByRole('button', { name: 'Add provider' }).click();
  await dialog.getByLabel('Provider 2 source').selectOption('beta');
  assert.equal(await dialog.getByLabel('Provider 1 priority').inputValue(), '0');
  assert.equal(await dialog.getByLabel('Provider 2 priority').inputValue(), '1');
  await dialog.getByRole('button', { name: 'Add route' }).click();
  await dialog.waitFor({ state: 'detached' });

  const card = page.getByRole('region', { name: 'Route smart' });
  await card.waitFor();
  await card.getByText('auto-select', { exact: true }).waitFor();
  const route = (await ctx.admin('GET', '/routes')).routes.find((r) => r.alias === 'smart');
  assert.equal(route.mode, 'auto-select');
  assert.equal(route.group, 'default');
  assert.deepEqual(route.providers.map((p) => [p.source, p.model, p.priority, p.enabled]),
    [['alpha', 'gpt-4o-mini', 0, true], ['beta', 'gpt-4o-mini', 1, true]]);
  let r = await ctx.chat('smart');
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.equal(r.source, 'alpha', 'priority 0 first');

  // Switch alpha off: the route serves from beta.
  const alphaSwitch = card.getByRole('switch', { name: `Enabled: ${ALPHA}` });
  assert.ok(await alphaSwitch.isChecked());
  await Promise.all([
    page.waitForResponse((res) => res.url().includes('/admin/api/route-providers/') && res.ok()),
    alphaSwitch.click(),
  ]);
  await card.locator('tr.row-disabled', { hasText: 'alpha/gpt-4o-mini' }).waitFor();
  assert.equal(await alphaSwitch.isChecked(), false);
  assert.equal(providerOf(await ctx.admin('GET', '/routes'), 'alpha').enabled, false);
  r = await ctx.chat('smart');
  assert.equal(r.status, 200);
  assert.equal(r.source, 'beta', 'a disabled provider gets nothing');

  // On again (keyboard: Space on the switch); then alpha's priority goes past beta's (typed, Enter).
  await alphaSwitch.focus();
  await Promise.all([
    page.waitForResponse((res) => res.url().includes('/admin/api/route-providers/') && res.ok()),
    page.keyboard.press('Space'),
  ]);
  await card.locator('tr.row-disabled').waitFor({ state: 'detached' });
  const priority = card.getByRole('spinbutton', { name: `Priority of ${ALPHA}` });
  await priority.fill('5');
  const patches = [];
  const count = (req) => { if (req.url().includes('/admin/api/route-providers/')) patches.push(req.postData()); };
  page.on('request', count);
  await Promise.all([
    page.waitForResponse((res) => res.url().includes('/admin/api/route-providers/') && res.ok()),
    page.waitForResponse((res) => res.url().endsWith('/admin/api/routes') && res.request().method() === 'GET'),
    priority.press('Enter'),
  ]);
  // The table is ordered by priority: beta first now.
  await page.waitForFunction(() => {
    const rows = [...document.querySelectorAll('[aria-label="Route smart"] tbody tr')];
    return rows.length === 2 && rows[0].textContent.includes('beta/gpt-4o-mini');
  });
  assert.equal(await card.getByRole('spinbutton', { name: `Priority of ${ALPHA}` }).inputValue(), '5');
  page.off('request', count);
  assert.deepEqual(patches, ['{"priority":5}'], 'Enter saves the priority once');
  assert.equal(await card.getByRole('spinbutton', { name: `Priority of ${BETA}` }).inputValue(), '1');
  const saved = providerOf(await ctx.admin('GET', '/routes'), 'alpha');
  assert.deepEqual([saved.priority, saved.enabled], [5, true]);
  r = await ctx.chat('smart');
  assert.equal(r.status, 200);
  assert.equal(r.source, 'beta', 'the lower priority number goes first');
  await ctx.shot(page, 'routes');

  // Delete it.
  await page.getByRole('button', { name: 'Delete route smart' }).click();
  await dialog.getByRole('heading', { name: 'Delete route smart' }).waitFor();
  await dialog.getByRole('button', { name: 'Delete route' }).click();
  await dialog.waitFor({ state: 'detached' });
  await card.waitFor({ state: 'detached' });
  assert.equal((await ctx.admin('GET', '/routes')).routes.length, 0);
  assert.equal((await ctx.chat('smart')).status, 404, 'gone for clients too');
}

function providerOf(routes, source) {
  return routes.routes.find((r) => r.alias === 'smart').providers.find((p) => p.source === source);
}
