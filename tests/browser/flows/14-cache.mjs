// Response cache: a key created in the Keys page with its cache on asks twice and the second answer is a hit;
// the Logs page marks the hit; the Operations page shows the entry and purges it after a
// confirmation (a cancelled one purges nothing), and the next request goes upstream again.
// A route made in the Routes page with its response cache on caches any key's answers.
import assert from 'node:assert/strict';

const MODEL = 'gpt-4o-mini';

export default async function (ctx) {
  // The key is made in the Keys page with its response cache on.
  const keys = await ctx.page();
  await keys.goto(`${ctx.env.gateway}/ui/#/keys`);
  await keys.reload();
  await keys.getByRole('button', { name: 'Create key' }).click();
  const create = keys.getByRole('dialog');
  await create.getByLabel('Name').fill('cached-ui');
  await create.getByLabel('Response cache').selectOption('on');
  await create.getByRole('button', { name: 'Create key' }).click();
  await create.getByRole('heading', { name: 'Key cached-ui created' }).waitFor();
  const created = { key: await create.getByLabel('New key').inputValue() };
  await create.getByRole('button', { name: 'Done' }).click();
  assert.equal((await ctx.admin('GET', '/keys/cached-ui')).cache, true);
  await keys.close();
  const ask = async () => {
    const res = await fetch(`${ctx.env.gateway}/v1/chat/completions`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${created.key}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'cache me' }] }),
    });
    assert.equal(res.status, 200);
    await res.json();
    return res.headers.get('x-switchyard-cache');
  };
  try {
    assert.equal(await ask(), 'miss');
    assert.equal(await ask(), 'hit');

    const page = await ctx.page();
    await page.goto(`${ctx.env.gateway}/ui/#/logs?key=cached-ui`);
    await page.reload();
    await page.getByRole('heading', { level: 1, name: 'Logs' }).waitFor();
    await page.getByText('cache hit', { exact: true }).first().waitFor();

    await page.getByRole('navigation').getByRole('link', { name: 'Operations' }).click();
    await page.getByRole('heading', { level: 1, name: 'Operations' }).waitFor();
    const card = page.locator('section.card', { has: page.getByRole('heading', { name: 'Response cache' }) });
    const entries = card.getByTestId('cache-entries');
    await entries.waitFor();
    assert.equal(await entries.innerText(), '1');
    await ctx.shot(page, 'operations-cache');

    await card.getByRole('button', { name: 'Purge cache' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByRole('heading', { name: 'Purge the response cache?' }).waitFor();
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await dialog.waitFor({ state: 'detached' });
    assert.equal((await ctx.admin('GET', '/cache')).entries, 1, 'a cancelled purge keeps the entry');

    await card.getByRole('button', { name: 'Purge cache' }).click();
    await dialog.getByRole('button', { name: 'Purge cache' }).click();
    await page.getByText('Cache purged: 1 entry').waitFor();
    await page.waitForFunction(() => document.querySelector('[data-testid="cache-entries"]')?.textContent === '0');
    assert.equal((await ctx.admin('GET', '/cache')).entries, 0);
    assert.equal(await ask(), 'miss', 'after the purge the request goes upstream');

    // A route with its cache switched on in the page: the gateway's own key (no cache setting
    // of its own) gets a hit the second time.
    await page.getByRole('navigation').getByRole('link', { name: 'Routes' }).click();
    await page.getByRole('heading', { level: 1, name: 'Routes' }).waitFor();
    await page.getByRole('button', { name: 'Add route' }).click();
    const routeDialog = page.getByRole('dialog');
    await routeDialog.getByLabel('Alias').fill('cached-route');
    await routeDialog.getByLabel('Response cache').selectOption('on');
    await routeDialog.getByRole('button', { name: 'Add provider' }).click();
    await routeDialog.getByLabel('Provider 1 source').selectOption('alpha');
    await routeDialog.getByRole('button', { name: 'Add route' }).click();
    await routeDialog.waitFor({ state: 'detached' });
    const route = (await ctx.admin('GET', '/routes')).routes.find((r) => r.alias === 'cached-route');
    assert.equal(route.cache, true, JSON.stringify(route));
    const viaRoute = async () => {
      const res = await fetch(`${ctx.env.gateway}/v1/chat/completions`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${ctx.env.gatewayKey}`, 'Content-Type': 'application/json' },
        body: JSON.stringify({ model: 'cached-route', messages: [{ role: 'user', content: 'route cache' }] }),
      });
      assert.equal(res.status, 200);
      await res.json();
      return res.headers.get('x-switchyard-cache');
    };
    assert.equal(await viaRoute(), 'miss');
    assert.equal(await viaRoute(), 'hit');
  } finally {
    await ctx.admin('DELETE', '/keys/cached-ui');
    const route = (await ctx.admin('GET', '/routes')).routes.find((r) => r.alias === 'cached-route');
    if (route) await ctx.admin('DELETE', `/routes/${encodeURIComponent(route.id)}`);
  }
}
