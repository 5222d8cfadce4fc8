// Helpers the WebUI flows and the sign-in script share (this file is outside flows/, so it is
// not run as a flow).
import assert from 'node:assert/strict';
import { chromium } from 'playwright-core';

/** Debian's Chromium, headless, with nothing that reaches out to the network on its own. */
export function launchChromium() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: [
      '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync',
    ],
  });
}

/** The header names who is logged in and their role. */
export async function whoami(page, name, role) {
  const who = page.getByTestId('whoami');
  await who.waitFor();
  assert.equal(await who.locator('.whoami-name').innerText(), name);
  assert.equal(await who.locator('[data-role]').innerText(), role);
}

/** Opens the page `label` from the nav and waits for its heading. */
export async function go(page, label) {
  await page.getByRole('navigation').getByRole('link', { name: label, exact: true }).click();
  await page.getByRole('heading', { level: 1, name: label }).waitFor();
}

/** The Sources table's row of source `name`. */
export function sourceRow(page, name) {
  return page.getByRole('table', { name: 'Sources' }).getByRole('row')
    .filter({ has: page.locator('td:first-child').getByText(name, { exact: true }) });
}


/** Presses Tab from the top of the page until the nav link `label` has the focus. */
export async function tabToNavLink(page, label) {
  for (let i = 0; i < 25; i++) {
    await page.keyboard.press('Tab');
    const at = await page.evaluate(() => {
      const a = document.activeElement;
      return a && a.closest('nav') && a.tagName === 'A' ? a.textContent.trim() : null;
    });
    if (at && at.endsWith(label)) return;
  }
  throw new Error(`Tab never reached the ${label} link of the nav`);
}

/** The admin API called from Node with `token` (to set up or check what a page did). */
export function adminApi(gateway, token) {
  return async (method, path, body) => {
    const res = await fetch(`${gateway}/admin/api${path}`, {
      method,
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
    return text ? JSON.parse(text) : null;
  };
}
