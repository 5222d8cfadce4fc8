// Health: a failing upstream cools alpha down; the Priority page's alpha card says so, with a
// tooltip on when it recovers. With the upstream back, the Operations page clears alpha's
// cooldowns (after a confirmation) and the card is healthy again, its failures forgotten.
import assert from 'node:assert/strict';
import { tabToNavLink } from '../lib.mjs';

const ALPHA = 'gpt-4o-mini @ alpha';
const NOT_HEALTHY = ['cooling', 'awaiting probe', 'probing'];

export default async function (ctx) {
  const page = await ctx.page();
  await page.goto(`${ctx.env.gateway}/ui/#/priority`);
  await page.reload();
  const card = page.getByRole('article', { name: ALPHA });
  await card.locator('[data-state="healthy"]').waitFor();
  await tabToNavLink(page, 'Operations');

  await ctx.control('fail');
  let tag;
  try {
    // A cooldown window lasts seconds: should the page be slower than the window, cool it again.
    for (let attempt = 1; ; attempt++) {
      const slot = await coolAlpha(ctx);
      await page.reload();
      tag = card.locator('[data-state]').first();
      await tag.waitFor();
      const state = await tag.getAttribute('data-state');
      if (NOT_HEALTHY.includes(state)) break;
      const now = (await ctx.admin('GET', '/health')).now_ms;
      assert.ok(now >= slot.recovers_at_ms && attempt < 3,
        `the card says ${state} while the gateway has alpha cooling until ${slot.recovers_at_ms} (now ${now})`);
    }
    assert.equal(await tag.innerText(), await tag.getAttribute('data-state'), 'the tag names the state');
    const title = await tag.getAttribute('title');
    assert.match(title, /^alpha\/gpt-4o-mini: (cooling|awaiting probe|probing)/, title);
    assert.match(title, /\d+ consecutive failures?/, title);
    assert.match(title, /full recovery \d{4}-\d\d-\d\d \d\d:\d\d:\d\d/, `the tooltip says when it recovers: ${title}`);
    // The card's border follows the state; beta was never touched.
    assert.ok(NOT_HEALTHY.includes(await card.getAttribute('data-state')));
    await page.getByRole('article', { name: 'gpt-4o-mini @ beta' }).locator('[data-state="healthy"]').waitFor();
    await ctx.shot(page, 'priority-cooling');
  } finally {
    await ctx.control('recover');
  }

  // Operations: clear alpha's cooldowns, confirmed in a dialog.
  await page.getByRole('navigation').getByRole('link', { name: 'Operations' }).click();
  await page.getByRole('heading', { level: 1, name: 'Operations' }).waitFor();
  const cooldowns = page.locator('section.card', { has: page.getByRole('heading', { name: 'Cooldowns' }) });
  await cooldowns.getByLabel('Source (cooldowns)').selectOption('alpha');
  await cooldowns.getByRole('button', { name: 'Clear source cooldowns' }).click();
  const dialog = page.getByRole('dialog');
  await dialog.getByRole('heading', { name: 'Clear source cooldowns?' }).waitFor();
  await dialog.getByText(/Only source “alpha”/).waitFor();
  // Cancel first: nothing is cleared.
  await dialog.getByRole('button', { name: 'Cancel' }).click();
  await dialog.waitFor({ state: 'detached' });
  assert.ok((await alphaSlot(ctx)).failures >= 1, 'a cancelled confirmation clears nothing');
  await cooldowns.getByRole('button', { name: 'Clear source cooldowns' }).click();
  const [cleared] = await Promise.all([
    page.waitForResponse((r) => r.url().endsWith('/admin/api/cooldowns/clear') && r.ok()),
    dialog.getByRole('button', { name: 'Clear source cooldowns' }).click(),
  ]);
  assert.deepEqual(JSON.parse(cleared.request().postData()), { source: 'alpha' });
  await page.getByRole('status').filter({ hasText: 'Cooldowns cleared: 1 (source alpha)' }).waitFor();
  const slot = await alphaSlot(ctx);
  assert.equal(slot.state, 'healthy');
  assert.equal(slot.failures, 0, 'the failures are forgotten');
  assert.equal(slot.window_start_ms, null);
  await ctx.shot(page, 'operations');

  // Back on Priority (reloaded): healthy, and the tooltip has no failure left.
  await page.getByRole('navigation').getByRole('link', { name: 'Priority' }).click();
  await page.reload();
  const healthy = card.locator('[data-state="healthy"]');
  await healthy.waitFor();
  assert.equal(await healthy.getAttribute('title'), 'alpha/gpt-4o-mini: healthy');
  assert.equal((await ctx.chat('alpha/gpt-4o-mini')).status, 200, 'alpha serves again');
}

/** Sends failing requests to alpha until the gateway cools it (at most 10); answers its slot. */
async function coolAlpha(ctx) {
  for (let i = 0; i < 10; i++) {
    const r = await ctx.chat('alpha/gpt-4o-mini');
    assert.notEqual(r.status, 200, 'the upstream fails now');
    const slot = await alphaSlot(ctx);
    if (slot.state !== 'healthy') return slot;
  }
  throw new Error('alpha never cooled down after 10 failed requests');
}

async function alphaSlot(ctx) {
  const health = await ctx.admin('GET', '/health');
  return health.slots.find((s) => s.source === 'alpha' && s.model === 'gpt-4o-mini');
}
