// The WebUI flows in headless Chromium, run by tests/it/webui.rs against a real gateway and
// scripted upstreams (their addresses come in the environment). Exits non-zero on a failure.

import { mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { adminApi, launchChromium } from './lib.mjs';

const env = {
  gateway: need('GATEWAY_URL'),
  adminToken: need('ADMIN_TOKEN'),
  gatewayKey: need('GATEWAY_KEY'),
  control: need('CONTROL_URL'),
  shots: need('SHOT_DIR'),
  luaFixture: need('LUA_FIXTURE'),
  wasmFixture: need('WASM_FIXTURE'),
};

function need(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run this through cargo test --test it webui`);
  return value;
}

/** Every file in flows/, in name order (later ones may rely on what earlier ones changed). */
const ORDER = readdirSync(new URL('./flows/', import.meta.url)).filter((f) => f.endsWith('.mjs')).sort()
  .map((f) => f.replace(/\.mjs$/, ''));

const only = process.env.FLOWS ? process.env.FLOWS.split(',') : null;
mkdirSync(env.shots, { recursive: true });

const browser = await launchChromium();

let failed = 0;
for (const name of ORDER) {
  if (only && !only.some((o) => name.includes(o))) continue;
  const { default: flow } = await import(`./flows/${name}.mjs`);
  const started = Date.now();
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, colorScheme: 'light' });
  const problems = [];
  const expected = [];
  const watch = (page) => {
    page.on('console', (m) => {
      if (m.type() !== 'error') return;
      const text = m.text();
      if (!expected.some((re) => re.test(text))) problems.push(`console error: ${text}`);
    });
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
    page.on('dialog', (d) => problems.push(`unexpected dialog (${d.type()}): ${d.message()}`));
  };
  context.on('page', watch);
  const ctx = {
    env,
    context,
    /** A fresh page, logged in unless `{ login: false }`. */
    async page({ login = true } = {}) {
      const page = await context.newPage();
      if (login) await logIn(page);
      return page;
    },
    /** Console errors matching `re` are part of this flow (a refused call's 4xx). */
    expectConsole(re) { expected.push(re); },
    async shot(page, file) { await page.screenshot({ path: join(env.shots, `${file}.png`) }); },
    /** Tells the scripted upstream to fail (`fail`) or answer again (`recover`). */
    async control(what) {
      const res = await fetch(`${env.control}/${what}`, { method: 'POST' });
      if (!res.ok) throw new Error(`control ${what}: ${res.status}`);
    },
    /** The admin API directly (to set up or check what a page did). */
    admin: adminApi(env.gateway, env.adminToken),
    /** A chat request as a client sends it; answers `{status, source, body}`. */
    async chat(model, key = env.gatewayKey, extra = {}) {
      const res = await fetch(`${env.gateway}/v1/chat/completions`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
        body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], ...extra }),
      });
      return { status: res.status, source: res.headers.get('x-switchyard-source'), body: await res.json() };
    },
  };
  try {
    await flow(ctx);
    if (problems.length) throw new Error(problems.join('\n'));
    console.log(`ok   ${name} (${Date.now() - started} ms)`);
  } catch (e) {
    failed += 1;
    console.log(`FAIL ${name} (${Date.now() - started} ms)\n${e.stack ?? e}`);
    for (const page of context.pages()) {
      await page.screenshot({ path: join(env.shots, `FAILED-${name}.png`) }).catch(() => {});
    }
  } finally {
    await context.close();
  }
}
await browser.close();
process.exit(failed ? 1 : 0);

/** Logs in through the login form, as an operator does. */
async function logIn(page) {
  await page.goto(`${env.gateway}/ui/`);
  await page.getByLabel(/admin token/i).fill(env.adminToken);
  await page.getByRole('button', { name: /log in/i }).click();
  await page.getByRole('navigation').waitFor();
}
