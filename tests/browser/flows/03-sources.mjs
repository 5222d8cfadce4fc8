// Sources: the table lists the config's sources with their health; a source is added through
// the form, edited (an empty key field keeps the key), tested live, saved as a template, a
// second source is made from the template, and both are deleted; all through the page, checked
// against the admin API.
import assert from 'node:assert/strict';
import { tabToNavLink } from '../lib.mjs';

export default async function (ctx) {
  const alpha = await ctx.admin('GET', '/sources/alpha');
  const page = await ctx.page();
  await page.goto(`${ctx.env.gateway}/ui/#/sources`);
  await page.reload();
  await page.getByRole('heading', { level: 1, name: 'Sources' }).waitFor();
  await tabToNavLink(page, 'Adapters');

  const table = page.getByRole('table', { name: 'Sources' });
  for (const name of ['alpha', 'beta']) {
    const row = sourceRow(page, name);
    await row.locator('[data-state="healthy"]').waitFor();
    assert.match(await row.locator('[data-state]').getAttribute('title'), /healthy/);
    await row.getByText('config', { exact: true }).waitFor();
  }
  // Keys are masked in the table, never shown whole.
  assert.ok(!(await table.innerText()).includes('sk-alpha-secret'), 'no key in the clear');

  // Add gamma through the form.
  const dialog = page.getByRole('dialog');
  await page.getByRole('button', { name: 'Add source' }).click();
  await dialog.getByRole('heading', { name: 'Add source' }).waitFor();
  await dialog.getByLabel('Name', { exact: true }).fill('gamma');
  await dialog.getByLabel('Base URL').fill(alpha.base_url);
  await dialog.getByLabel('API key').fill('sk-gamma-secret-5555');
  await dialog.getByLabel('Model 1 name').fill('gamma-model');
  await dialog.getByLabel('Model 1 upstream name').fill('gpt-4o-mini');
  const [added] = await Promise.all([
    page.waitForResponse((r) => r.url().endsWith('/admin/api/sources') && r.request().method() === 'POST'),
    dialog.getByRole('button', { name: 'Add source' }).click(),
  ]);
  assert.ok(added.ok(), `added: ${added.status()}`);
  await dialog.waitFor({ state: 'detached' });
  await sourceRow(page, 'gamma').waitFor();
  let gamma = await ctx.admin('GET', '/sources/gamma');
  assert.equal(gamma.base_url, alpha.base_url);
  assert.equal(gamma.origin, 'runtime');
  assert.deepEqual(gamma.models.map((m) => [m.name, m.upstream]), [['gamma-model', 'gpt-4o-mini']]);
  assert.match(gamma.api_key, /5555$/);
  assert.ok(!gamma.api_key.includes('secret'), `the API answers the key masked: ${gamma.api_key}`);
  const mask = gamma.api_key;
  await sourceRow(page, 'gamma').getByText(/…5555/).waitFor();

  // Settings the form does not show (set through the API) survive an edit in the form.
  const kept = { passthrough: { fields: ['service_tier'], betas: [], tools: [] }, stream_whole_answers: false, detect_models_share_names: true };
  await ctx.admin('PUT', '/sources/gamma', { ...gamma, ...kept });

  // Edit gamma: change a limit, leave the key field empty: the key stays.
  await page.reload();
  await page.getByRole('button', { name: 'Edit gamma' }).click();
  await dialog.getByRole('heading', { name: 'Edit source gamma' }).waitFor();
  assert.equal(await dialog.getByLabel('API key').inputValue(), '', 'the key is never sent to the page');
  await dialog.getByText(/leave empty to keep the current key \(sk-…5555\)/).waitFor();
  assert.equal(await dialog.getByLabel('Name', { exact: true }).isEditable(), false, 'no renaming');
  await dialog.getByLabel('Max concurrent requests').fill('3');
  assert.equal(await dialog.getByLabel('HTTP to the upstream').inputValue(), 'auto');
  await dialog.getByLabel('HTTP to the upstream').selectOption('http1');
  await dialog.getByRole('button', { name: 'Save', exact: true }).click();
  await dialog.waitFor({ state: 'detached' });
  gamma = await ctx.admin('GET', '/sources/gamma');
  assert.equal(gamma.max_concurrent, 3, 'the edit is saved');
  assert.equal(gamma.http_version, 'http1', 'the HTTP choice is saved');
  assert.equal(gamma.api_key, mask, 'an empty key field keeps the key');
  for (const [k, v] of Object.entries(kept)) assert.deepEqual(gamma[k], v, `${k} is kept by the form`);
  // A gamma-model request goes through gamma's stored key to the upstream.
  const served = await ctx.chat('gamma/gamma-model');
  assert.equal(served.status, 200, JSON.stringify(served.body));
  assert.equal(served.source, 'gamma');

  // A refused edit stays open with the reason.
  await page.getByRole('button', { name: 'Edit gamma' }).click();
  assert.equal(await dialog.getByLabel('HTTP to the upstream').inputValue(), 'http1', 'an edit starts from what is saved');
  await dialog.getByLabel('Max concurrent requests').fill('0');
  await dialog.getByRole('button', { name: 'Save', exact: true }).click();
  await dialog.getByRole('alert').getByText(/Max concurrent requests/).waitFor();
  await dialog.getByRole('button', { name: 'Cancel' }).click();
  await dialog.waitFor({ state: 'detached' });
  assert.equal((await ctx.admin('GET', '/sources/gamma')).max_concurrent, 3, 'nothing changed');

  // Test alpha: the upstream's answer and the latency.
  await page.getByRole('button', { name: 'Test alpha' }).click();
  await dialog.getByRole('heading', { name: 'Test source alpha' }).waitFor();
  await dialog.getByRole('button', { name: 'Run test' }).click();
  const result = dialog.locator('.test-result');
  await result.getByText('Test passed').waitFor();
  await result.getByText('Hello from the mock upstream.', { exact: true }).waitFor();
  const latency = await result.locator('.kv-row', { hasText: 'Latency' }).locator('dd').innerText();
  assert.match(latency, /^\d+(\.\d+)? (ms|s)$/, `latency shown: ${latency}`);
  assert.equal(await result.locator('.kv-row', { hasText: 'HTTP status' }).locator('dd').innerText(), '200');
  await ctx.shot(page, 'sources-test');
  await page.keyboard.press('Escape');
  await dialog.waitFor({ state: 'detached' });

  // Save gamma as a template; make delta from it.
  await page.getByRole('button', { name: 'Save gamma as template' }).click();
  await dialog.getByRole('heading', { name: 'Save as template' }).waitFor();
  assert.equal(await dialog.getByLabel('Template name').inputValue(), 'gamma-template');
  await dialog.getByRole('button', { name: 'Save template' }).click();
  await dialog.waitFor({ state: 'detached' });
  const templates = (await ctx.admin('GET', '/source-templates')).templates;
  const tpl = templates.find((t) => t.name === 'gamma-template');
  assert.ok(tpl, `template saved: ${JSON.stringify(templates)}`);
  assert.equal(tpl.base_url, alpha.base_url);
  assert.equal(tpl.max_concurrent, 3);
  assert.ok(!('api_key' in tpl) || !tpl.api_key, 'a template keeps no key');

  await page.getByRole('radio', { name: 'Templates' }).check();
  const tplTable = page.getByRole('table', { name: 'Source templates' });
  await tplTable.getByRole('row', { name: /gamma-template/ }).waitFor();
  await page.getByRole('button', { name: 'New source from template gamma-template' }).click();
  await dialog.getByLabel('Source name').fill('delta');
  await dialog.getByLabel('API key').fill('sk-delta-secret-7777');
  await dialog.getByRole('button', { name: 'Create source' }).click();
  await dialog.waitFor({ state: 'detached' });
  const delta = await ctx.admin('GET', '/sources/delta');
  assert.equal(delta.base_url, alpha.base_url);
  assert.equal(delta.max_concurrent, 3);
  assert.deepEqual(delta.models.map((m) => m.name), ['gamma-model']);
  assert.match(delta.api_key, /7777$/, 'its own key');

  await page.getByRole('radio', { name: 'Sources' }).check();
  await sourceRow(page, 'delta').waitFor();
  await ctx.shot(page, 'sources');

  // Delete both, and the template.
  for (const name of ['delta', 'gamma']) {
    await page.getByRole('button', { name: `Delete ${name}` }).click();
    await dialog.getByRole('heading', { name: `Delete source ${name}` }).waitFor();
    await dialog.getByRole('button', { name: 'Delete source' }).click();
    await dialog.waitFor({ state: 'detached' });
    await sourceRow(page, name).waitFor({ state: 'detached' });
  }
  const names = (await ctx.admin('GET', '/sources')).sources.map((s) => s.name);
  assert.ok(!names.includes('gamma') && !names.includes('delta'), `deleted: ${names}`);
  await page.getByRole('radio', { name: 'Templates' }).check();
  await page.getByRole('button', { name: 'Delete template gamma-template' }).click();
  await dialog.getByRole('button', { name: 'Delete template' }).click();
  await dialog.waitFor({ state: 'detached' });
  assert.equal((await ctx.admin('GET', '/source-templates')).templates.length, 0);
}

/** The table row of source `name` (matched by its name cell). */
function sourceRow(page, name) {
  return page.getByRole('table', { name: 'Sources' }).getByRole('row')
    .filter({ has: page.locator('td:first-child').getByText(name, { exact: true }) });
}
