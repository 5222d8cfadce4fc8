// WebUI single sign-on in headless Chromium, through a real OpenID provider (idp.mjs: the
// provider's own login and consent pages), against a real gateway configured for it. Run by a
// Rust test with, in the environment:
//   GATEWAY_URL   the gateway (http://127.0.0.1:PORT; the browser reaches it by this address,
//                 so its redirect_uri is GATEWAY_URL/auth/callback)
//   IDP_CONTROL   idp.mjs's `control` (its issuer's origin: POST /__mode, GET|POST /__client)
//   ADMIN_TOKEN   the gateway's admin_token (the audit trail is read with it, from here)
//   SHOT_DIR      optional: a screenshot per failed step goes there
//   CHROMIUM      optional: the browser (default /usr/bin/chromium)
// The gateway maps the groups `gateway-admins` to admin and `gateway-viewers` to viewer, and has
// a source named `beta`. Each person signs in in a fresh browser context (the provider remembers
// a sign-in per cookie jar). Exits 0 when every step passed; prints each failure and exits 1.
//
//   1. alice (gateway-admins): admin; HttpOnly SameSite=Lax session cookie, nothing in storage;
//      switches beta off and on from the Sources page (with the CSRF token); a write without the
//      token is refused (403 csrf); logging out ends the session here and at the gateway.
//   2. bob (gateway-viewers): viewer; the Sources page offers no change.
//   3. carol (no group): back on the login page, "no role".
//   4. per bad ID token the provider can send (expired, tampered, wrong audience, issuer or
//      nonce, a key it does not publish): back on the login page with why; no session.
//   5. the audit trail: the failed sign-ins (via session, why in the note), alice's sign-in and
//      her switches (via session).

import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { adminApi, go, launchChromium, sourceRow, whoami } from './lib.mjs';

const env = {
  gateway: need('GATEWAY_URL').replace(/\/+$/, ''),
  control: need('IDP_CONTROL').replace(/\/+$/, ''),
  adminToken: need('ADMIN_TOKEN'),
  shots: process.env.SHOT_DIR || null,
};

/** The admin API with the admin token, from here (not the browser). */
const admin = adminApi(env.gateway, env.adminToken);

function need(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run this through the Rust test (cargo test --test it sso)`);
  return value;
}

const GATEWAY = new URL(env.gateway).origin;
const IDP = new URL(env.control).origin;
const CALLBACK = `${env.gateway}/auth/callback`;
// The provider's dev pages @import a web font: nothing leaves loopback.
const NOT_LOOPBACK = /^https?:\/\/(?!(127\.0\.0\.1|localhost|\[::1\])[:/])/;
const SSO_LINK = { name: 'Sign in with single sign-on' };

/** Each bad mode of idp.mjs, and a word the gateway's message must have. */
const BAD_TOKENS = [
  ['expired', /expired/i],
  ['tampered', /signature/i],
  ['wrong_aud', /audience/i],
  ['wrong_iss', /issuer/i],
  ['wrong_nonce', /nonce/i],
  ['foreign_key', /key/i],
];

if (env.shots) mkdirSync(env.shots, { recursive: true });

// The provider must send codes to this gateway: registered by the Rust test; again here, merged
// with what is there (so doing it twice changes nothing), and the ID tokens good to start with.
await registerCallback();
await idpMode('normal');

const browser = await launchChromium();

let failed = 0;
/** What the login page said for each refused sign-in (checked against the audit trail). */
const refusals = [];

await step('alice-admin', async ({ context, page }) => {
  // The sign-in request the gateway makes: authorization code with PKCE S256, state and nonce.
  const authorize = [];
  context.on('request', (r) => {
    const u = new URL(r.url());
    if (u.origin === IDP && u.searchParams.has('client_id') && u.searchParams.has('response_type')) authorize.push(u);
  });
  await page.goto(`${env.gateway}/ui/`);
  await page.getByRole('link', SSO_LINK).click();
  await atProvider(page);
  assert.equal(authorize.length, 1, `one authorization request: ${authorize.map(String)}`);
  const q = authorize[0].searchParams;
  assert.equal(q.get('response_type'), 'code');
  assert.equal(q.get('redirect_uri'), CALLBACK, 'the redirect_uri is this gateway as the browser reaches it');
  assert.equal(q.get('code_challenge_method'), 'S256');
  assert.match(q.get('code_challenge') ?? '', /^[A-Za-z0-9_-]{43}$/, 'a S256 challenge');
  assert.ok((q.get('state') ?? '').length >= 16, 'a state');
  assert.ok((q.get('nonce') ?? '').length >= 16, 'a nonce');
  assert.deepEqual(new Set((q.get('scope') ?? '').split(' ')), new Set(['openid', 'email', 'profile', 'groups']));
  const login = (await gatewayCookies(context)).find((c) => c.name === 'switchyard_login');
  assert.ok(login, 'the sign-in is bound to this browser by a cookie');
  assert.equal(login.httpOnly, true, 'switchyard_login is HttpOnly');
  assert.equal(login.sameSite, 'Lax', 'switchyard_login is SameSite=Lax (Strict would not come back from the provider)');
  assert.equal(login.path, '/auth');

  await providerSignIn(page, 'alice');
  await signedIn(page);
  await whoami(page, 'alice@example.test', 'admin');

  // The session cookie: HttpOnly, Lax, the whole gateway; the sign-in cookie is gone.
  const cookies = await gatewayCookies(context);
  const session = cookies.find((c) => c.name === 'switchyard_session');
  assert.ok(session?.value, `a session cookie: ${cookies.map((c) => c.name)}`);
  assert.equal(session.httpOnly, true, 'switchyard_session is HttpOnly');
  assert.equal(session.sameSite, 'Lax', 'switchyard_session is SameSite=Lax');
  assert.equal(session.path, '/');
  assert.equal(session.secure, GATEWAY.startsWith('https:'), 'Secure only on https');
  assert.ok(!cookies.some((c) => c.name === 'switchyard_login' && c.value), 'the sign-in cookie is cleared');

  const me = await pageFetch(page, '/admin/api/me');
  assert.equal(me.status, 200, JSON.stringify(me.body));
  assert.equal(me.body.name, 'alice@example.test');
  assert.equal(me.body.role, 'admin');
  assert.equal(me.body.via, 'session');
  assert.equal(me.body.token_id, null);
  assert.ok(typeof me.body.csrf === 'string' && me.body.csrf.length >= 16, 'a CSRF token');
  const csrf = me.body.csrf;

  // Nothing secret where scripts can read it: no cookie, token or CSRF token in web storage.
  const seen = await page.evaluate(() => ({
    cookie: document.cookie,
    stored: [...Object.entries(localStorage), ...Object.entries(sessionStorage)],
  }));
  assert.ok(!seen.cookie.includes('switchyard_session'), 'the page cannot read the session cookie');
  for (const [key, value] of seen.stored) {
    assert.ok(!value.includes(session.value), `the session id is not in storage (${key})`);
    assert.ok(!value.includes(csrf), `the CSRF token is not in storage (${key})`);
    assert.ok(!/token/i.test(key), `no token in storage (${key})`);
  }

  // One change from the UI: beta off and on with the Sources page's switch.
  await go(page, 'Sources');
  const beta = sourceRow(page, 'beta');
  await beta.locator('[data-state]').waitFor();
  const enabled = page.getByRole('switch', { name: 'Enabled: beta' });
  assert.ok(await enabled.isChecked(), 'beta starts enabled');
  const [off] = await Promise.all([
    page.waitForResponse((r) => r.url().endsWith('/admin/api/sources/beta/disable') && r.request().method() === 'POST'),
    enabled.click(),
  ]);
  assert.ok(off.ok(), `disable: ${off.status()} ${await off.text()}`);
  const sent = await off.request().allHeaders();
  assert.equal(sent['x-csrf-token'], csrf, 'the write carries the CSRF token');
  assert.equal(sent.authorization, undefined, 'and no Authorization header');
  await beta.locator('[data-state="disabled"]').waitFor();
  assert.equal((await admin('GET', '/sources/beta')).enabled, false, 'beta is disabled');
  const [on] = await Promise.all([
    page.waitForResponse((r) => r.url().endsWith('/admin/api/sources/beta/enable') && r.request().method() === 'POST'),
    enabled.click(),
  ]);
  assert.ok(on.ok(), `enable: ${on.status()} ${await on.text()}`);
  await beta.locator('[data-state]:not([data-state="disabled"])').waitFor();
  assert.notEqual((await admin('GET', '/sources/beta')).enabled, false, 'beta is enabled again');

  // A write the cookie authenticates but without the CSRF token (what another site could make
  // the browser send): refused.
  const forged = await page.evaluate(async () => {
    const res = await fetch('/admin/api/cooldowns/clear', {
      method: 'POST', body: '{}', headers: { 'content-type': 'application/json' },
    });
    return { status: res.status, body: await res.json().catch(() => null) };
  });
  assert.equal(forged.status, 403, JSON.stringify(forged.body));
  assert.equal(forged.body?.error?.code, 'csrf', JSON.stringify(forged.body));

  // The cookie works from outside the browser too (so the check after the logout means something).
  const replay = await fetch(`${env.gateway}/admin/api/me`, { headers: { cookie: `switchyard_session=${session.value}` } });
  assert.equal(replay.status, 200, 'the session cookie authenticates');

  // Log out from the UI: the login page, no cookie, and the session gone at the gateway.
  const [out] = await Promise.all([
    page.waitForResponse((r) => new URL(r.url()).pathname === '/auth/logout' && r.request().method() === 'POST'),
    page.getByRole('button', { name: 'Log out' }).click(),
  ]);
  assert.equal(out.status(), 204, 'the logout answers 204');
  assert.equal((await out.request().allHeaders())['x-csrf-token'], csrf, 'the logout carries the CSRF token');
  await page.getByLabel(/admin token/i).waitFor();
  await page.getByRole('link', SSO_LINK).waitFor();
  assert.ok(!(await gatewayCookies(context)).some((c) => c.name === 'switchyard_session' && c.value), 'the cookie is cleared');
  assert.equal((await pageFetch(page, '/admin/api/me')).status, 401, 'logged out');
  const stale = await fetch(`${env.gateway}/admin/api/me`, { headers: { cookie: `switchyard_session=${session.value}` } });
  assert.equal(stale.status, 401, 'the old cookie value opens nothing: the session is gone at the gateway');
});

await step('bob-viewer', async ({ page }) => {
  await signInAs(page, 'bob');
  await signedIn(page);
  await whoami(page, 'bob@example.test', 'viewer');
  await go(page, 'Sources');
  await sourceRow(page, 'alpha').locator('[data-state]').waitFor();
  await sourceRow(page, 'beta').waitFor();
  assert.equal(await page.getByRole('button', { name: 'Add source' }).count(), 0, 'no Add source');
  const sources = page.getByRole('table', { name: 'Sources' });
  assert.equal(await sources.getByRole('switch').count(), 0, 'no enable switch');
  assert.equal(await sources.getByRole('checkbox').count(), 0, 'no enable checkbox');
  const me = await pageFetch(page, '/admin/api/me');
  assert.deepEqual([me.body?.role, me.body?.via], ['viewer', 'session']);
});

await step('carol-no-role', async ({ page }) => {
  await signInAs(page, 'carol');
  const message = await refused(page, /no role/i);
  refusals.push(message);
  assert.equal((await pageFetch(page, '/admin/api/me')).status, 401, 'no session');
  // The message is text: markup in it stays text.
  await page.goto(`${env.gateway}/ui/?sso_error=${encodeURIComponent('<img src=x id=injected> no <b id=bold>role</b>')}`);
  const box = page.getByTestId('sso-error');
  await box.waitFor();
  assert.match(await box.innerText(), /<img src=x id=injected>/);
  assert.equal(await page.locator('#injected, #bold').count(), 0, 'not rendered as HTML');
});

const messages = new Map();
for (const [mode, word] of BAD_TOKENS) {
  await step(`bad-token-${mode}`, async ({ page }) => {
    await idpMode(mode);
    try {
      await signInAs(page, 'alice');
      const message = await refused(page, word);
      messages.set(mode, message);
      refusals.push(message);
      assert.equal((await pageFetch(page, '/admin/api/me')).status, 401, 'no session');
    } finally {
      await idpMode('normal');
    }
  });
}
await check('bad-token-messages-differ', async () => {
  // Each bad token breaks one check of its own: six different reasons.
  const distinct = new Set(messages.values());
  assert.equal(distinct.size, messages.size, `one reason per check: ${JSON.stringify(Object.fromEntries(messages))}`);
});

await check('audit-trail', async () => {
  await eventually(async () => {
    const failedLogins = (await admin('GET', '/audit?outcome=failed_login')).entries.filter((e) => e.via === 'session');
    assert.ok(failedLogins.length >= 6, `at least six failed sign-ins via session: ${failedLogins.length}`);
    for (const e of failedLogins) assert.ok(e.note, `a reason in the note: ${JSON.stringify(e)}`);
    for (const message of refusals) {
      assert.ok(failedLogins.some((e) => e.note.includes(message)), `a failed sign-in noted "${message}"`);
    }
    const alice = (await admin('GET', `/audit?actor=${encodeURIComponent('alice@example.test')}`)).entries;
    const signIn = alice.find((e) => e.outcome === 'done' && e.method === 'GET' && e.path === '/auth/callback');
    assert.ok(signIn, `alice's sign-in: ${JSON.stringify(alice.map((e) => [e.method, e.path, e.outcome]))}`);
    assert.equal(signIn.via, 'session');
    for (const what of ['disable', 'enable']) {
      const e = alice.find((x) => x.path.endsWith(`/sources/beta/${what}`) && x.outcome === 'done');
      assert.ok(e, `alice's ${what} of beta is audited`);
      assert.equal(e.via, 'session');
      assert.equal(e.method, 'POST');
    }
    const csrf = alice.find((x) => x.path.endsWith('/cooldowns/clear'));
    assert.ok(!csrf || csrf.outcome !== 'done', 'the write without a CSRF token did nothing');
  });
});

await browser.close();
console.log(failed ? `${failed} step(s) failed` : 'all single sign-on steps passed');
process.exit(failed ? 1 : 0);

// ---------------------------------------------------------------------------------------------

/** Runs `fn` in a fresh browser context; a failure is printed (and shot) and counted. */
async function step(name, fn) {
  const started = Date.now();
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, colorScheme: 'light' });
  context.setDefaultTimeout(20_000);
  await context.route(NOT_LOOPBACK, (route) => route.abort());
  const problems = [];
  context.on('page', (page) => {
    page.on('console', (m) => {
      if (m.type() !== 'error') return;
      const where = m.location()?.url ?? '';
      // Only the WebUI's own: the provider's pages are not ours; 401 (not signed in) and 403
      // (the refused write) are part of the steps.
      if (!where.startsWith(GATEWAY) || /status of 40[13]\b/.test(m.text())) return;
      problems.push(`console error: ${m.text()} (${where})`);
    });
    page.on('pageerror', (e) => { if (page.url().startsWith(GATEWAY)) problems.push(`page error: ${e.message}`); });
    page.on('dialog', (d) => problems.push(`unexpected dialog (${d.type()}): ${d.message()}`));
  });
  const page = await context.newPage();
  try {
    await fn({ context, page });
    if (problems.length) throw new Error(problems.join('\n'));
    console.log(`ok   ${name} (${Date.now() - started} ms)`);
  } catch (e) {
    failed += 1;
    console.log(`FAIL ${name} (${Date.now() - started} ms) at ${page.url()}\n${e.stack ?? e}`);
    if (problems.length) console.log(problems.join('\n'));
    if (env.shots) await page.screenshot({ path: join(env.shots, `FAILED-sso-${name}.png`) }).catch(() => {});
  } finally {
    await context.close();
  }
}

/** A step without a browser. */
async function check(name, fn) {
  try {
    await fn();
    console.log(`ok   ${name}`);
  } catch (e) {
    failed += 1;
    console.log(`FAIL ${name}\n${e.stack ?? e}`);
  }
}

/** From the WebUI's login page to the provider's login page, by the single sign-on link. */
async function signInAs(page, user) {
  await page.goto(`${env.gateway}/ui/`);
  await page.getByRole('link', SSO_LINK).click();
  await atProvider(page);
  await providerSignIn(page, user);
}

async function atProvider(page) {
  await page.locator('input[name="login"]').waitFor();
  assert.equal(new URL(page.url()).origin, IDP, 'the provider signs people in');
}

/** The provider's own pages: login (any password), then consent; back to the gateway. */
async function providerSignIn(page, user) {
  await page.locator('input[name="login"]').fill(user);
  await page.locator('input[name="password"]').fill('any password will do');
  await page.getByRole('button', { name: 'Sign-in' }).click();
  await page.getByRole('button', { name: 'Continue' }).click();
  await page.waitForURL((u) => u.origin === GATEWAY && u.pathname === '/ui/');
}

/** Landed in the WebUI, signed in. */
async function signedIn(page) {
  await page.getByRole('navigation').waitFor();
  assert.ok(!page.url().includes('code='), 'no code in the address');
}

/** Landed on the login page with why the sign-in was refused; answers the message. */
async function refused(page, word) {
  const box = page.getByTestId('sso-error');
  await box.waitFor();
  await page.getByLabel(/admin token/i).waitFor();
  await page.getByRole('link', SSO_LINK).waitFor();
  const message = (await box.locator('.errormsg').innerText()).trim();
  assert.match(message, word, `the login page says why: ${message}`);
  assert.ok(!new URL(page.url()).searchParams.has('sso_error'), `taken out of the address: ${page.url()}`);
  assert.equal(await page.getByRole('navigation').count(), 0, 'not signed in');
  return message;
}

/** The browser's cookies for the gateway's host (the provider's, on another host, left out). */
async function gatewayCookies(context) {
  const host = new URL(GATEWAY).hostname;
  return (await context.cookies()).filter((c) => c.domain === host);
}

/** A GET from the page (the cookie goes along, no token): {status, body}. */
function pageFetch(page, path) {
  return page.evaluate(async (p) => {
    const res = await fetch(p);
    return { status: res.status, body: await res.json().catch(() => null) };
  }, path);
}


async function idpMode(mode) {
  const res = await fetch(`${env.control}/__mode`, { method: 'POST', body: JSON.stringify({ mode }) });
  if (!res.ok) throw new Error(`idp mode ${mode}: ${res.status} ${await res.text()}`);
}

async function registerCallback() {
  const now = await fetch(`${env.control}/__client`).then((r) => (r.ok ? r.json() : { redirect_uris: [] }));
  const uris = [...new Set([...(now.redirect_uris ?? []), CALLBACK])];
  const res = await fetch(`${env.control}/__client`, { method: 'POST', body: JSON.stringify({ redirect_uris: uris }) });
  if (!res.ok) throw new Error(`registering ${CALLBACK} at the provider: ${res.status} ${await res.text()}`);
}

/** Retries `fn` until it passes (the audit trail is written after the answer), up to 10 s. */
async function eventually(fn) {
  const until = Date.now() + 10_000;
  for (;;) {
    try {
      return await fn();
    } catch (e) {
      if (Date.now() > until) throw e;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}
