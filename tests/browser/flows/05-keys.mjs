// Keys: a key made in the page shows its secret once; a client can use it at once; the table
// shows it masked only; revoked in the page, the same key is refused (401).
import assert from 'node:assert/strict';
import { tabToNavLink } from '../lib.mjs';

export default async function (ctx) {
  const page = await ctx.page();
  await page.goto(`${ctx.env.gateway}/ui/#/keys`);
  await page.reload();
  await page.getByRole('heading', { level: 1, name: 'Keys' }).waitFor();
  await tabToNavLink(page, 'Routes');

  const table = page.getByRole('table', { name: 'Gateway keys' });
  await keyRow(page, 'tester').waitFor();

  await page.getByRole('button', { name: 'Create key' }).click();
  const dialog = page.getByRole('dialog');
  await dialog.getByRole('heading', { name: 'Create key' }).waitFor();
  // The name field has the focus; the scope starts as `*`.
  assert.equal(await page.evaluate(() => document.activeElement?.closest('.field')?.querySelector('label')?.textContent), 'Name');
  await page.keyboard.type('ui-made');
  assert.ok(await dialog.getByRole('checkbox', { name: /^\* \(every model\)/ }).isChecked(), 'scope * by default');
  const [created] = await Promise.all([
    page.waitForResponse((r) => r.url().endsWith('/admin/api/keys') && r.request().method() === 'POST'),
    dialog.getByRole('button', { name: 'Create key' }).click(),
  ]);
  assert.ok(created.ok(), `created: ${created.status()}`);
  const body = await created.json();
  assert.deepEqual(body.models, ['*']);

  // The one-time dialog.
  await dialog.getByRole('heading', { name: 'Key ui-made created' }).waitFor();
  await dialog.getByText('Copy the key now: it will not be shown again.').waitFor();
  const secret = await dialog.getByLabel('New key').inputValue();
  assert.equal(secret, body.key, 'the dialog shows the key the gateway made');
  assert.ok(secret.length >= 20, secret);
  // A stray Escape or backdrop click must not lose the secret: only Done closes it.
  await page.keyboard.press('Escape');
  await page.mouse.click(5, 5);
  assert.equal(await dialog.getByLabel('New key').inputValue(), body.key, 'the one-time dialog stays open');
  await dialog.getByRole('button', { name: 'Done' }).click();
  await dialog.waitFor({ state: 'detached' });

  // The table has it, masked; the secret is nowhere on the page any more.
  const row = keyRow(page, 'ui-made');
  await row.waitFor();
  assert.equal(await row.locator('td').nth(1).innerText(), `${secret.slice(0, 3)}…${secret.slice(-4)}`);
  await row.getByText('runtime', { exact: true }).waitFor();
  assert.ok(!(await page.content()).includes(secret), 'the secret is shown once only');

  // A client uses it.
  const ok = await ctx.chat('gpt-4o-mini', secret);
  assert.equal(ok.status, 200, JSON.stringify(ok.body));
  assert.equal(ok.body.choices[0].message.content, 'Hello from the mock upstream.');
  await ctx.shot(page, 'keys');

  // Revoked in the page: refused at once.
  await page.getByRole('button', { name: 'Revoke ui-made' }).click();
  await dialog.getByRole('heading', { name: 'Revoke key ui-made' }).waitFor();
  await dialog.getByRole('button', { name: 'Revoke key' }).click();
  await dialog.waitFor({ state: 'detached' });
  await row.waitFor({ state: 'detached' });
  assert.ok(!(await ctx.admin('GET', '/keys')).keys.some((k) => k.name === 'ui-made'));
  const refused = await ctx.chat('gpt-4o-mini', secret);
  assert.equal(refused.status, 401, JSON.stringify(refused.body));
  // The config key still works.
  assert.equal((await ctx.chat('gpt-4o-mini')).status, 200);
  assert.ok(await table.isVisible());
}

function keyRow(page, name) {
  return page.getByRole('table', { name: 'Gateway keys' }).getByRole('row')
    .filter({ has: page.locator('td:first-child').getByText(name, { exact: true }) });
}
