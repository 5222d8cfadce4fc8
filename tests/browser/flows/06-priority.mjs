// Priority: the AUTO chat chain as tiers of cards; reordered with the keyboard (the move
// buttons) so beta goes first, saved, and the next AUTO request goes to beta; reordered back by
// drag and drop, saved, and AUTO goes to alpha again.
import assert from 'node:assert/strict';
import { tabToNavLink } from '../lib.mjs';

const ALPHA = 'gpt-4o-mini @ alpha';
const BETA = 'gpt-4o-mini @ beta';

export default async function (ctx) {
  const page = await ctx.page();
  await page.goto(`${ctx.env.gateway}/ui/#/priority`);
  await page.reload();
  await page.getByRole('heading', { level: 1, name: 'Priority' }).waitFor();
  await tabToNavLink(page, 'Keys');

  await expectTiers(page, [[ALPHA], [BETA]]);
  await page.getByRole('region', { name: 'Tier 1' }).getByText('tried first').waitFor();
  for (const card of [ALPHA, BETA]) await page.getByRole('article', { name: card }).locator('[data-state="healthy"]').waitFor();
  const save = page.getByRole('button', { name: 'Save', exact: true });
  assert.ok(await save.isDisabled(), 'nothing to save yet');
  assert.equal((await ctx.chat('AUTO')).source, 'alpha', 'AUTO starts on alpha');

  // Keyboard: focus beta's "up" button; Enter moves it into tier 1, Space above it (a new tier 1).
  const up = page.getByRole('button', { name: `Move ${BETA} up` });
  await up.focus();
  await page.keyboard.press('Enter');
  await expectTiers(page, [[ALPHA, BETA]]);
  const status = page.locator('.sr-only[role="status"]');
  await status.getByText(`${BETA} moved to tier 1, position 2`, { exact: true }).waitFor();
  // The focus comes back in an effect after the render that announced the move.
  await page
    .waitForFunction((label) => document.activeElement?.getAttribute('aria-label') === label, `Move ${BETA} up`, { timeout: 5000 })
    .catch(async () => assert.fail(`the focus stays on the moved card's button, not ${await focusedLabel(page)}`));
  await page.keyboard.press('Space');
  await expectTiers(page, [[BETA], [ALPHA]]);
  await status.getByText(`${BETA} moved to tier 1, position 1`, { exact: true }).waitFor();
  await page.getByText('unsaved changes').waitFor();
  assert.equal((await ctx.admin('GET', '/auto')).slots[0].source, 'alpha', 'nothing is saved before Save');

  await Promise.all([
    page.waitForResponse((r) => r.url().endsWith('/admin/api/auto') && r.request().method() === 'PUT' && r.ok()),
    save.click(),
  ]);
  await page.getByText('unsaved changes').waitFor({ state: 'detached' });
  assert.deepEqual(slotsOf(await ctx.admin('GET', '/auto')), [['beta', 1], ['alpha', 2]]);
  const first = await ctx.chat('AUTO');
  assert.equal(first.status, 200);
  assert.equal(first.source, 'beta', 'AUTO goes to beta first now');
  await ctx.shot(page, 'priority-keyboard');

  // Drag and drop: beta onto the "new tier" zone below the last tier: alpha is tier 1 again.
  await page.getByRole('article', { name: BETA }).dragTo(page.locator('.tier-new'));
  await expectTiers(page, [[ALPHA], [BETA]]);
  await Promise.all([
    page.waitForResponse((r) => r.url().endsWith('/admin/api/auto') && r.request().method() === 'PUT' && r.ok()),
    save.click(),
  ]);
  await page.getByText('unsaved changes').waitFor({ state: 'detached' });
  assert.deepEqual(slotsOf(await ctx.admin('GET', '/auto')), [['alpha', 1], ['beta', 2]]);
  const back = await ctx.chat('AUTO');
  assert.equal(back.source, 'alpha', 'AUTO goes to alpha again');

  // Dropping one card onto another puts them in one tier (alpha before beta): not saved, discarded.
  const alphaCard = page.getByRole('article', { name: ALPHA });
  const box = await alphaCard.boundingBox();
  await page.getByRole('article', { name: BETA }).dragTo(alphaCard, { targetPosition: { x: box.width - 8, y: 10 } });
  await expectTiers(page, [[ALPHA, BETA]]);
  await page.getByRole('button', { name: 'Discard changes' }).click();
  await expectTiers(page, [[ALPHA], [BETA]]);
  await ctx.shot(page, 'priority');
}

/** Waits until the page shows the chain as `want`: each tier's card labels, in order. */
async function expectTiers(page, want) {
  const read = () => [...document.querySelectorAll('section.tier')]
    .map((t) => [...t.querySelectorAll('article')].map((a) => a.getAttribute('aria-label')));
  try {
    await page.waitForFunction(`JSON.stringify((${read})()) === ${JSON.stringify(JSON.stringify(want))}`, null, { timeout: 5000 });
  } catch {
    assert.deepEqual(await page.evaluate(read), want, 'the tiers on the page');
  }
}

const slotsOf = (chain) => chain.slots.map((s) => [s.source, s.tier]);

function focusedLabel(page) {
  return page.evaluate(() => document.activeElement?.getAttribute('aria-label'));
}
