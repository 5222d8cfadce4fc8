// Logging in: a wrong admin token is refused and nothing is stored; the right one opens the
// overview; the token lives in sessionStorage, never in the URL.
import assert from 'node:assert/strict';

export default async function (ctx) {
  ctx.expectConsole(/status of 401/);
  const page = await ctx.page({ login: false });
  await page.goto(`${ctx.env.gateway}/ui/`);
  await ctx.shot(page, 'login');
  await page.getByLabel(/admin token/i).fill('not-the-token');
  await page.getByRole('button', { name: /log in/i }).click();
  await page.getByText(/refused/i).waitFor();
  assert.equal(await page.evaluate(() => sessionStorage.length), 0, 'a refused token is not kept');

  await page.getByLabel(/admin token/i).fill(ctx.env.adminToken);
  await page.getByRole('button', { name: /log in/i }).click();
  await page.getByRole('navigation').waitFor();
  assert.ok(!page.url().includes(ctx.env.adminToken), 'the token is never in the URL');
  const stored = await page.evaluate(() => Object.values(sessionStorage));
  assert.ok(stored.includes(ctx.env.adminToken), 'the token is kept in sessionStorage');
}
