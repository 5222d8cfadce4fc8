// The overview after some traffic: the request count is the gateway's, the three charts draw,
// the range switch (mouse and arrow keys) asks for the new range and says so; the nav is
// reachable with Tab.
import assert from 'node:assert/strict';
import { tabToNavLink } from '../lib.mjs';

const SENT = 3;
const HOUR = 3_600_000;
const DAY = 86_400_000;

export default async function (ctx) {
  for (let i = 0; i < SENT; i++) {
    const r = await ctx.chat('gpt-4o-mini');
    assert.equal(r.status, 200, JSON.stringify(r.body));
  }
  // The request log is written behind the answer: wait until the gateway counts them all.
  let counted = 0;
  for (let i = 0; i < 50 && counted < SENT; i++) {
    const stats = await ctx.admin('GET', '/stats');
    counted = stats.sources.reduce((n, r) => n + r.requests, 0);
  }
  assert.ok(counted >= SENT, `the gateway counts the requests (${counted})`);

  const page = await ctx.page();
  await page.goto(`${ctx.env.gateway}/ui/#/overview`);
  await page.reload();
  await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();

  // Keyboard: Tab from the top of the page reaches the nav; Enter follows a link.
  await tabToNavLink(page, 'Sources');
  await page.keyboard.press('Enter');
  await page.getByRole('heading', { level: 1, name: 'Sources' }).waitFor();
  await page.goBack();
  await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();

  const requests = page.locator('.stat', { has: page.locator('.stat-label', { hasText: /^Requests$/ }) });
  await requests.waitFor();
  const shown = Number((await requests.locator('.stat-value').innerText()).replace(/[^\d]/g, ''));
  assert.ok(shown >= SENT, `the overview shows the requests: ${shown}`);
  assert.equal(shown, counted, 'the count is the gateway\'s own');
  assert.match(await requests.locator('.stat-sub').innerText(), /last 1 h/);

  // Three charts, each drawn into a canvas by uPlot.
  for (const title of ['Requests', 'Tokens', 'Latency']) {
    await page.getByRole('img', { name: `${title} chart` }).locator('canvas').first().waitFor();
  }
  assert.ok(await page.locator('.chart-box canvas').count() >= 3, 'a canvas per chart');
  // The top tables name the source that served.
  await page.getByRole('table', { name: 'Top sources' }).getByRole('link', { name: 'alpha' }).waitFor();
  await page.getByRole('table', { name: 'Top models' }).getByRole('link', { name: 'gpt-4o-mini' }).waitFor();
  await ctx.shot(page, 'overview');

  // Range 24 h by mouse: a series for a day is asked for, and the stats say so.
  const range = page.getByRole('radiogroup', { name: 'Time range' });
  await Promise.all([series(page, DAY), range.getByRole('radio', { name: '24 h' }).click()]);
  await requests.locator('.stat-sub', { hasText: 'last 24 h' }).waitFor();
  assert.ok(await range.getByRole('radio', { name: '24 h' }).isChecked());

  // Range 7 d by keyboard: arrow keys move along the radio group.
  await range.getByRole('radio', { name: '24 h' }).focus();
  await Promise.all([series(page, 7 * DAY), page.keyboard.press('ArrowRight')]);
  await requests.locator('.stat-sub', { hasText: 'last 7 d' }).waitFor();
  assert.ok(await range.getByRole('radio', { name: '7 d' }).isChecked());
  const week = Number((await requests.locator('.stat-value').innerText()).replace(/[^\d]/g, ''));
  assert.ok(week >= shown, `a week holds at least the hour's requests (${week} >= ${shown})`);

  // The range is remembered across a reload; back to 1 h.
  await page.reload();
  await requests.locator('.stat-sub', { hasText: 'last 7 d' }).waitFor();
  await Promise.all([series(page, HOUR), range.getByRole('radio', { name: '1 h' }).click()]);
  await requests.locator('.stat-sub', { hasText: 'last 1 h' }).waitFor();
}

/** Resolves when the page has fetched a /stats/series answer spanning `span` ms (until − since). */
function series(page, span) {
  return page.waitForResponse((r) => {
    if (!r.url().includes('/admin/api/stats/series') || !r.ok()) return false;
    const q = new URL(r.url()).searchParams;
    return Number(q.get('until_ms')) - Number(q.get('since_ms')) === span;
  });
}
