// On a phone (390×844): the nav folds behind the Menu button (reachable by keyboard too), every
// page renders without widening the body past the screen, and the dark theme follows the system.
import assert from 'node:assert/strict';

const WIDTH = 390;
const PAGES = [
  ['overview', 'Overview'], ['sources', 'Sources'], ['adapters', 'Adapters'], ['priority', 'Priority'],
  ['routes', 'Routes'], ['keys', 'Keys'], ['spend', 'Spend'], ['logs', 'Logs'], ['playground', 'Playground'],
  ['operations', 'Operations'],
];

export default async function (ctx) {
  const page = await ctx.page();
  await page.setViewportSize({ width: WIDTH, height: 844 });
  await page.goto(`${ctx.env.gateway}/ui/#/overview`);
  await page.reload();
  await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();

  const menu = page.getByRole('button', { name: 'Menu' });
  const nav = page.getByRole('navigation', { name: 'Main' });
  await menu.waitFor();
  assert.equal(await menu.getAttribute('aria-expanded'), 'false');
  assert.equal(await nav.getByRole('link', { name: 'Sources' }).isVisible(), false, 'the nav is folded');

  // Keyboard: Tab reaches Menu, Enter opens it, Tab goes on into the links, Enter follows one.
  await tabTo(page, (el) => el.getAttribute('aria-label') === 'Menu');
  await page.keyboard.press('Enter');
  assert.equal(await menu.getAttribute('aria-expanded'), 'true');
  await nav.getByRole('link', { name: 'Sources' }).waitFor();
  await tabTo(page, (el) => el.tagName === 'A' && !!el.closest('nav') && el.textContent.trim().endsWith('Sources'));
  await page.keyboard.press('Enter');
  await page.getByRole('heading', { level: 1, name: 'Sources' }).waitFor();
  assert.equal(await menu.getAttribute('aria-expanded'), 'false', 'the menu closes on navigation');
  await nav.getByRole('link', { name: 'Sources' }).waitFor({ state: 'hidden' });

  for (const [id, label] of PAGES) {
    await menu.click();
    const link = nav.getByRole('link', { name: label });
    await link.click();
    await page.getByRole('heading', { level: 1, name: label }).waitFor();
    assert.match(page.url(), new RegExp(`#/${id}$`));
    await link.waitFor({ state: 'hidden' });
    // Wait for the page's data (no loading state left) before measuring.
    await page.waitForFunction(() => !document.querySelector('main .loading'));
    const width = await page.evaluate(() => document.documentElement.scrollWidth);
    assert.ok(width <= WIDTH + 1, `${label}: the page is ${width}px wide on a ${WIDTH}px screen`);
    const wide = await page.evaluate((w) => [...document.querySelectorAll('main *')]
      .filter((el) => el.getBoundingClientRect().right > w + 1 && !el.closest('.table-wrap, .code-view, pre'))
      .map((el) => `${el.tagName.toLowerCase()}.${el.className}`).slice(0, 5), WIDTH);
    assert.deepEqual(wide, [], `${label}: elements past the right edge`);
  }

  // Dark, as the system asks.
  await menu.click();
  await nav.getByRole('link', { name: 'Overview' }).click();
  await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
  await page.emulateMedia({ colorScheme: 'dark' });
  await page.waitForFunction(() => document.documentElement.dataset.theme === 'dark');
  const bg = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  const [r, g, b] = bg.match(/\d+/g).map(Number);
  assert.ok(0.2126 * r + 0.7152 * g + 0.0722 * b < 80, `a dark background: ${bg}`);
  await page.waitForFunction(() => !document.querySelector('main .loading'));
  await page.getByRole('button', { name: 'Switch to light theme' }).waitFor();
  await ctx.shot(page, 'overview-dark-phone');
  const width = await page.evaluate(() => document.documentElement.scrollWidth);
  assert.ok(width <= WIDTH + 1, `overview (dark): ${width}px wide`);
}

/** Presses Tab until `test(activeElement)` holds (at most 30 times). */
async function tabTo(page, test) {
  for (let i = 0; i < 30; i++) {
    await page.keyboard.press('Tab');
    if (await page.evaluate(`(${test})(document.activeElement)`)) return;
  }
  throw new Error(`Tab never reached ${test}`);
}
