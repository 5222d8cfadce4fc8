// Access and roles: the admin makes two personal tokens on the Access page (a viewer owned by
// victor, an operator owned by olivia), each secret shown once. Logged in as the viewer, the UI
// offers no change (no source add / edit / delete / enable, no key creation), keys stay masked,
// the audit trail is readable, and a write sent anyway is refused (403). The operator gets the
// interventions and the source enable switch but no source editing, and disables and re-enables
// beta with it. Back as the admin, the audit trail names them: the token creations by admin, the
// operator's switch with beta's before and after, the viewer's refused write. The viewer's
// token, revoked on the page, logs in no more.
import assert from 'node:assert/strict';
import { go, sourceRow, whoami } from '../lib.mjs';

export default async function (ctx) {
  ctx.expectConsole(/status of 403/); // the viewer's write, refused
  ctx.expectConsole(/status of 401/); // the revoked token's login
  const page = await ctx.page({ login: false });
  const made = [];
  try {
    // The admin (the configured admin token) makes the two tokens.
    await logIn(ctx, page, ctx.env.adminToken, 'access');
    await whoami(page, 'admin', 'admin');
    await page.getByTestId('me-name').getByText('admin', { exact: true }).waitFor();
    const viewer = await createToken(page, { name: 'viewer-pat', role: 'viewer', owner: 'victor' });
    made.push(viewer);
    const operator = await createToken(page, { name: 'operator-pat', role: 'operator', owner: 'olivia' });
    made.push(operator);
    const listed = (await ctx.admin('GET', '/tokens')).tokens;
    for (const [t, owner, role] of [[viewer, 'victor', 'viewer'], [operator, 'olivia', 'operator']]) {
      const row = listed.find((x) => x.id === t.id);
      assert.ok(row, `token ${t.id} listed: ${JSON.stringify(listed)}`);
      assert.equal(row.owner, owner);
      assert.equal(row.role, role);
      assert.equal(row.expired, false);
      assert.ok(!JSON.stringify(row).includes(t.secret), 'the list never has the secret');
    }

    // ---- The viewer: looks, changes nothing.
    await logOut(page);
    await logIn(ctx, page, viewer.secret, 'sources');
    await whoami(page, 'victor', 'viewer');
    await page.getByRole('heading', { level: 1, name: 'Sources' }).waitFor();
    const sources = page.getByRole('table', { name: 'Sources' });
    await sourceRow(page, 'alpha').locator('[data-state]').waitFor();
    await sourceRow(page, 'beta').waitFor();
    assert.equal(await page.getByRole('button', { name: 'Add source' }).count(), 0, 'no Add source');
    assert.equal(await sources.getByRole('button').count(), 0, 'no test, edit, delete or restore button');
    assert.equal(await sources.getByRole('switch').count(), 0, 'no enable switch');
    assert.equal(await sources.getByRole('checkbox').count(), 0, 'no enable checkbox');
    assert.ok(!(await page.content()).includes('-secret-'), 'no upstream key in full');
    await page.getByRole('radio', { name: 'Templates' }).check();
    await page.getByRole('heading', { name: 'Templates' }).waitFor();
    assert.equal(await page.getByRole('button', { name: 'New template' }).count(), 0, 'no New template');

    await go(page, 'Keys');
    await page.getByRole('table', { name: 'Gateway keys' }).waitFor();
    assert.equal(await page.getByRole('button', { name: 'Create key' }).count(), 0, 'no Create key');
    assert.equal(await page.getByRole('table', { name: 'Gateway keys' }).getByRole('button').count(), 0, 'no key actions');

    await go(page, 'Playground');
    await page.getByTestId('playground-role').getByText(/operator/).waitFor();
    assert.equal(await page.getByRole('button', { name: 'Create a playground key' }).count(), 0);

    await go(page, 'Access');
    await page.getByRole('table', { name: 'Audit trail' }).getByTestId('audit-row').first().waitFor();
    await tokenRow(page, 'viewer-pat').waitFor();
    assert.equal(await tokenRow(page, 'operator-pat').count(), 0, "a viewer lists only their own tokens");
    // A viewer's new token can be a viewer's only, and names no other owner.
    await page.getByRole('button', { name: 'Create token' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByRole('heading', { name: 'Create personal token' }).waitFor();
    assert.deepEqual(await dialog.getByLabel('Role', { exact: true }).locator('option').allTextContents(), ['viewer']);
    assert.equal(await dialog.getByLabel('Owner').count(), 0, 'only an admin names the owner');
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await dialog.waitFor({ state: 'detached' });

    // A write sent anyway, with the viewer's token from the page: refused.
    const refused = await page.evaluate(async () => {
      const token = sessionStorage.getItem('switchyard.admin_token');
      const res = await fetch('/admin/api/cooldowns/clear', {
        method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' }, body: '{}',
      });
      return { status: res.status, body: await res.json() };
    });
    assert.equal(refused.status, 403, JSON.stringify(refused.body));
    assert.equal(refused.body.error.code, 'forbidden', JSON.stringify(refused.body));

    // ---- The operator: interventions and the enable switch, no source editing.
    await logOut(page);
    await logIn(ctx, page, operator.secret, 'operations');
    await whoami(page, 'olivia', 'operator');
    await page.getByRole('heading', { level: 1, name: 'Operations' }).waitFor();
    const cooldowns = page.locator('section.card', { has: page.getByRole('heading', { name: 'Cooldowns' }) });
    await cooldowns.getByRole('button', { name: 'Clear all cooldowns' }).waitFor();
    await cooldowns.getByRole('button', { name: 'Clear source cooldowns' }).waitFor();
    await page.getByRole('button', { name: 'Purge cache' }).waitFor();
    await page.getByTestId('channel-selection').waitFor();
    assert.equal(await page.getByRole('radio', { name: 'Smart' }).count(), 0, "the channel selection is the admin's");
    assert.equal(await page.getByRole('button', { name: 'Upload policy' }).count(), 0, "policies are the admin's");

    await go(page, 'Sources');
    const beta = sourceRow(page, 'beta');
    await beta.locator('[data-state]').waitFor();
    assert.equal(await page.getByRole('button', { name: 'Add source' }).count(), 0, 'no Add source');
    assert.equal(await page.getByRole('button', { name: /^(Edit|Delete) (alpha|beta)$/ }).count(), 0, 'no edit or delete');
    await page.getByRole('button', { name: 'Test alpha' }).waitFor();
    const enabled = page.getByRole('switch', { name: 'Enabled: beta' });
    assert.ok(await enabled.isChecked(), 'beta starts enabled');
    const [off] = await Promise.all([
      page.waitForResponse((r) => r.url().endsWith('/admin/api/sources/beta/disable') && r.request().method() === 'POST'),
      enabled.click(),
    ]);
    assert.ok(off.ok(), `disable: ${off.status()} ${await off.text()}`);
    await beta.locator('[data-state="disabled"]').waitFor();
    assert.equal(await enabled.isChecked(), false, 'the switch follows');
    assert.equal((await ctx.admin('GET', '/sources/beta')).enabled, false, 'beta is disabled');
    const [on] = await Promise.all([
      page.waitForResponse((r) => r.url().endsWith('/admin/api/sources/beta/enable') && r.request().method() === 'POST'),
      enabled.click(),
    ]);
    assert.ok(on.ok(), `enable: ${on.status()} ${await on.text()}`);
    await beta.locator('[data-state]:not([data-state="disabled"])').waitFor();
    assert.ok(await enabled.isChecked());
    assert.notEqual((await ctx.admin('GET', '/sources/beta')).enabled, false, 'beta is enabled again');

    // ---- The admin reads the audit trail.
    await logOut(page);
    await logIn(ctx, page, ctx.env.adminToken, 'access');
    await whoami(page, 'admin', 'admin');
    const rows = page.getByRole('table', { name: 'Audit trail' }).getByTestId('audit-row');

    await filter(page, { actor: 'admin', path: '/tokens' });
    const creations = rows.filter({ hasText: 'POST' }).filter({ hasText: '/admin/api/tokens' });
    await creations.nth(1).waitFor();
    for (const row of await creations.all()) {
      assert.equal(await row.getByTestId('audit-actor').locator('span').first().innerText(), 'admin');
      assert.equal(await row.getAttribute('data-outcome'), 'done');
    }

    await filter(page, { actor: 'olivia', path: '/sources/beta' });
    const disabled = rows.filter({ hasText: '/admin/api/sources/beta/disable' });
    const reenabled = rows.filter({ hasText: '/admin/api/sources/beta/enable' });
    await disabled.waitFor();
    await reenabled.waitFor();
    const order = (await rows.allInnerTexts()).map((t) => (t.includes('/beta/enable') ? 'enable' : t.includes('/beta/disable') ? 'disable' : '?'));
    assert.ok(order.indexOf('enable') < order.indexOf('disable'), `newest first: ${order}`);
    assert.equal(await disabled.getByTestId('audit-actor').locator('span').first().innerText(), 'olivia');
    assert.equal(await disabled.getAttribute('data-outcome'), 'done');
    await disabled.getByRole('button', { name: 'Show details' }).click();
    const before = page.locator('pre[aria-label="Before: sources beta"]');
    const after = page.locator('pre[aria-label="After: sources beta"]');
    await after.waitFor();
    assert.match(await after.innerText(), /"enabled": false/, 'the change after the disable');
    assert.doesNotMatch(await before.innerText(), /"enabled": false/, 'and before it');
    assert.equal(await page.locator('.audit-detail img, .audit-detail b, .audit-detail script').count(), 0, 'JSON shown as text');
    await after.scrollIntoViewIfNeeded();
    await ctx.shot(page, 'access');

    await filter(page, { actor: 'victor', outcome: 'refused', path: '' });
    const refusedRow = rows.filter({ hasText: '/admin/api/cooldowns/clear' });
    await refusedRow.waitFor();
    assert.equal(await refusedRow.getAttribute('data-outcome'), 'refused');
    assert.equal(await refusedRow.getByTestId('audit-actor').locator('span').first().innerText(), 'victor');
    await refusedRow.getByText('403', { exact: true }).waitFor();

    // Revoke the viewer's token on the page: it logs in no more.
    await tokenRow(page, 'viewer-pat').getByRole('button', { name: 'Revoke token viewer-pat' }).click();
    await dialog.getByRole('heading', { name: 'Revoke token viewer-pat' }).waitFor();
    const [revoked] = await Promise.all([
      page.waitForResponse((r) => r.url().endsWith(`/admin/api/tokens/${viewer.id}`) && r.request().method() === 'DELETE'),
      dialog.getByRole('button', { name: 'Revoke token', exact: true }).click(),
    ]);
    assert.equal(revoked.status(), 204);
    await dialog.waitFor({ state: 'detached' });
    await tokenRow(page, 'viewer-pat').waitFor({ state: 'detached' });
    assert.ok(!(await ctx.admin('GET', '/tokens')).tokens.some((t) => t.id === viewer.id), 'gone from the list');
    await logOut(page);
    await page.getByLabel(/admin token/i).fill(viewer.secret);
    await page.getByRole('button', { name: /log in/i }).click();
    await page.getByText(/refused/i).waitFor();
    assert.equal(await page.evaluate(() => sessionStorage.getItem('switchyard.admin_token')), null, 'a refused token is not kept');
  } finally {
    const left = (await ctx.admin('GET', '/tokens')).tokens.map((t) => t.id);
    for (const t of made) if (left.includes(t.id)) await ctx.admin('DELETE', `/tokens/${t.id}`);
  }
}

/** Logs in through the form with `token`, on page `hash`. */
async function logIn(ctx, page, token, hash) {
  await page.goto(`${ctx.env.gateway}/ui/#/${hash}`);
  await page.getByLabel(/admin token/i).fill(token);
  await page.getByRole('button', { name: /log in/i }).click();
  await page.getByRole('navigation').waitFor();
}

async function logOut(page) {
  await page.getByRole('button', { name: 'Log out' }).click();
  await page.getByLabel(/admin token/i).waitFor();
}

/** Makes a personal token on the Access page; answers {id, secret} as the one-time dialog showed it. */
async function createToken(page, { name, role, owner }) {
  await page.getByRole('button', { name: 'Create token' }).click();
  const dialog = page.getByRole('dialog');
  await dialog.getByRole('heading', { name: 'Create personal token' }).waitFor();
  await dialog.getByLabel('Name', { exact: true }).fill(name);
  await dialog.getByLabel('Role', { exact: true }).selectOption(role);
  await dialog.getByLabel('Expires after (days)').fill('30');
  await dialog.getByLabel('Owner').fill(owner);
  const [created] = await Promise.all([
    page.waitForResponse((r) => r.url().endsWith('/admin/api/tokens') && r.request().method() === 'POST'),
    dialog.getByRole('button', { name: 'Create token' }).click(),
  ]);
  assert.equal(created.status(), 201, await created.text());
  assert.deepEqual(JSON.parse(created.request().postData()), { name, role, expires_days: 30, owner });
  const body = await created.json();
  await dialog.getByRole('heading', { name: `Token ${name} created` }).waitFor();
  await dialog.getByText('Copy the token now: it will not be shown again.').waitFor();
  const secret = await dialog.getByLabel('New token').inputValue();
  assert.equal(secret, body.token, 'the dialog shows the token the gateway made');
  assert.match(secret, /^sya_[0-9a-f]+$/, secret);
  // A stray Escape must not lose the secret: only Done closes it.
  await page.keyboard.press('Escape');
  assert.equal(await dialog.getByLabel('New token').inputValue(), secret);
  await dialog.getByRole('button', { name: 'Done' }).click();
  await dialog.waitFor({ state: 'detached' });
  const row = tokenRow(page, name);
  await row.waitFor();
  await row.getByText(owner, { exact: true }).waitFor();
  await row.locator('[data-role]').getByText(role, { exact: true }).waitFor();
  if (body.hint) await row.getByText(body.hint, { exact: true }).waitFor();
  assert.ok(!(await page.content()).includes(secret), 'the secret is shown once only');
  return { id: body.id, secret };
}

/** Sets the audit filters and applies them (waiting for the answer). */
async function filter(page, { actor = '', outcome = '', path = '' }) {
  const form = page.getByRole('form', { name: 'Audit filters' });
  await form.getByLabel('Outcome').selectOption(outcome);
  await form.getByLabel('Actor').fill(actor);
  await form.getByLabel('Path contains').fill(path);
  await Promise.all([
    page.waitForResponse((r) => {
      if (!r.url().includes('/admin/api/audit')) return false;
      const q = new URL(r.url()).searchParams;
      return (q.get('actor') ?? '') === actor && (q.get('outcome') ?? '') === outcome && (q.get('path') ?? '') === path;
    }),
    form.getByRole('button', { name: 'Apply filters' }).click(),
  ]);
}

function tokenRow(page, name) {
  return page.getByRole('table', { name: 'Personal tokens' }).getByRole('row')
    .filter({ has: page.locator('td:first-child').getByText(name, { exact: true }) });
}
