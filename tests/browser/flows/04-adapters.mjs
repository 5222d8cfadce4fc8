// Adapters: a Lua script uploaded through the file input is installed; a new source made on the
// Sources page uses it, and a client's request through that source is answered by the script
// (upper-cased); its source can be read in the page. A broken .wasm uploaded under the same name
// is refused with the gateway's reason and changes nothing.
import assert from 'node:assert/strict';
import { tabToNavLink } from '../lib.mjs';
import { readFileSync } from 'node:fs';

const UPPER = 'HELLO FROM THE MOCK UPSTREAM.';

export default async function (ctx) {
  ctx.expectConsole(/Failed to load resource: the server responded with a status of 400/);
  const alpha = await ctx.admin('GET', '/sources/alpha');
  const page = await ctx.page();
  await page.goto(`${ctx.env.gateway}/ui/#/adapters`);
  await page.reload();
  await page.getByRole('heading', { level: 1, name: 'Adapters' }).waitFor();
  await tabToNavLink(page, 'Priority');

  const table = page.getByRole('table', { name: 'Adapters' });
  await table.waitFor();
  assert.equal(await adapterRow(page, 'upper').count(), 0, 'not installed yet');

  // Upload the Lua script; the name comes from the file name.
  // The shared legacy script (tests/fixtures/lua), picked as a file named upper.lua.
  const script = { name: 'upper.lua', mimeType: 'text/plain', buffer: readFileSync(ctx.env.luaFixture) };
  await page.getByLabel('Adapter file').setInputFiles(script);
  assert.equal(await page.getByLabel('Adapter name').inputValue(), 'upper');
  await page.getByRole('button', { name: /Drop zone/ }).getByText('upper.lua').waitFor();
  await page.getByRole('button', { name: 'Upload and install' }).click();
  const ok = page.locator('.okbox');
  await ok.getByText('Installed adapter upper').waitFor();
  assert.equal(await kv(ok, 'Version'), '2.3');
  assert.equal(await kv(ok, 'Kind'), 'Lua script');
  const row = adapterRow(page, 'upper');
  await row.waitFor();
  assert.equal(await row.locator('td').nth(1).innerText(), '2.3', 'version in the table');
  assert.equal(await row.locator('td').nth(4).innerText(), 'Lua');
  const installed = (await ctx.admin('GET', '/adapters')).adapters.find((a) => a.name === 'upper');
  assert.ok(installed && installed.lua && installed.version === '2.3' && installed.origin === 'file', JSON.stringify(installed));

  // A new source `shout` through the Sources page form, with adapter upper.
  await page.getByRole('navigation').getByRole('link', { name: 'Sources' }).click();
  await page.getByRole('heading', { level: 1, name: 'Sources' }).waitFor();
  await page.getByRole('button', { name: 'Add source' }).click();
  const dialog = page.getByRole('dialog');
  await dialog.getByLabel('Name', { exact: true }).fill('shout');
  await dialog.getByLabel('Base URL').fill(alpha.base_url);
  await dialog.getByLabel('API key').fill('sk-shout-secret-4242');
  await dialog.getByLabel('Adapter').selectOption('upper');
  await dialog.getByLabel('Model 1 name').fill('gpt-4o-mini');
  await dialog.getByRole('button', { name: 'Add source' }).click();
  await dialog.waitFor({ state: 'detached' });
  const shout = await ctx.admin('GET', '/sources/shout');
  assert.equal(shout.adapter, 'upper');
  assert.equal(shout.base_url, alpha.base_url);

  // A client's request through shout is answered by the script.
  const r = await ctx.chat('shout/gpt-4o-mini');
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.equal(r.source, 'shout');
  assert.equal(r.body.choices[0].message.content, UPPER);
  assert.equal(r.body.usage.prompt_tokens, 12, 'the script passes the usage on');

  // Back on the Adapters page: upper is used by shout; its Lua source reads in a dialog.
  await page.getByRole('navigation').getByRole('link', { name: 'Adapters' }).click();
  await adapterRow(page, 'upper').getByText('shout', { exact: true }).waitFor();
  await page.getByRole('button', { name: 'View source of upper' }).click();
  const code = dialog.getByLabel('Source of upper');
  await code.getByText(/string\.upper\(r\.choices\[1\]\.message\.content\)/).waitFor();
  assert.match(await code.innerText(), /^-- A legacy adapter/);
  await dialog.getByRole('button', { name: 'Close' }).last().click();
  await dialog.waitFor({ state: 'detached' });

  // A broken component under the same name: refused, nothing changes.
  const broken = Buffer.concat([Buffer.from('\0asm'), Buffer.from([1, 0, 0, 0]), Buffer.from('this is not a component at all')]);
  await page.getByLabel('Adapter file').setInputFiles({ name: 'broken.wasm', mimeType: 'application/wasm', buffer: broken });
  await page.getByLabel('Adapter name').fill('upper');
  await page.getByText('replaces the uploaded adapter upper').waitFor();
  const [refused] = await Promise.all([
    page.waitForResponse((res) => res.url().endsWith('/admin/api/adapters/upper') && res.request().method() === 'PUT'),
    page.getByRole('button', { name: 'Upload and install' }).click(),
  ]);
  assert.equal(refused.status(), 400);
  const reason = (await refused.json()).error.message;
  const alert = page.getByRole('alert').filter({ hasText: 'Refused (400)' });
  await alert.waitFor();
  assert.ok((await alert.innerText()).includes(reason), `the page shows the gateway's reason: ${reason}`);
  await Promise.all([
    page.waitForResponse((res) => res.url().endsWith('/admin/api/adapters') && res.ok()),
    page.getByRole('button', { name: 'Refresh' }).click(),
  ]);
  const after = adapterRow(page, 'upper');
  assert.equal(await after.locator('td').nth(1).innerText(), '2.3', 'still version 2.3');
  assert.equal(await after.locator('td').nth(4).innerText(), 'Lua', 'still the Lua script');
  const still = (await ctx.admin('GET', '/adapters')).adapters.find((a) => a.name === 'upper');
  assert.deepEqual({ ...still, pool: null }, { ...installed, pool: null, used_by: ['shout'] }, 'the adapter in place stays');
  const again = await ctx.chat('shout/gpt-4o-mini');
  assert.equal(again.body.choices[0].message.content, UPPER, 'still served by the script');
  await alert.scrollIntoViewIfNeeded();
  await ctx.shot(page, 'adapters');

  // A component uploaded under another name than its own: refused, naming both; installed
  // under the chosen name only when the operator says so.
  await page.getByLabel('Adapter file').setInputFiles(ctx.env.wasmFixture);
  await page.getByLabel('Adapter name').fill('renamed');
  const [mismatch] = await Promise.all([
    page.waitForResponse((res) => res.url().endsWith('/admin/api/adapters/renamed') && res.request().method() === 'PUT'),
    page.getByRole('button', { name: 'Upload and install' }).click(),
  ]);
  assert.equal(mismatch.status(), 400);
  await page.getByRole('alert').filter({ hasText: 'describes itself as `openai`' }).waitFor();
  assert.ok(!(await ctx.admin('GET', '/adapters')).adapters.some((a) => a.name === 'renamed'), 'nothing installed yet');
  const [renamed] = await Promise.all([
    page.waitForResponse((res) => res.url().endsWith('/admin/api/adapters/renamed?rename=true') && res.request().method() === 'PUT'),
    page.getByRole('button', { name: 'Install as renamed anyway' }).click(),
  ]);
  assert.equal(renamed.status(), 201);
  await page.getByText('Installed adapter renamed').waitFor();
  assert.ok((await ctx.admin('GET', '/adapters')).adapters.some((a) => a.name === 'renamed'));
  await ctx.admin('DELETE', '/adapters/renamed');
}

function adapterRow(page, name) {
  return page.getByRole('table', { name: 'Adapters' }).getByRole('row')
    .filter({ has: page.locator('td:first-child').getByText(name, { exact: true }) });
}

async function kv(scope, label) {
  return scope.locator('.kv-row').filter({ has: scope.page().getByText(label, { exact: true }) }).locator('dd').innerText();
}
