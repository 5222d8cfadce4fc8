// Markup in operator- and client-supplied names is text: a model named like an <img> with an
// onerror handler, a key and a route alias with tags. Every page that shows them shows the literal
// text; no element is made from them, no dialog opens (webui.mjs fails the flow on one), no
// console error (a CSP refusal of an inline handler would be one).
import assert from 'node:assert/strict';

const MODEL = '<img src=x onerror=alert(1)>';
const KEY = '<b>xss-key</b>';
const ALIAS = '<i>xss-route</i>';

export default async function (ctx) {
  const chain = await ctx.admin('GET', '/auto');
  await ctx.admin('POST', '/sources', { name: 'xss', base_url: 'http://127.0.0.1:9/v1', models: [{ name: MODEL }] });
  const { key } = await ctx.admin('POST', '/keys', { name: KEY, models: ['*'] });
  const route = await ctx.admin('POST', '/routes', {
    alias: ALIAS, mode: 'auto-select', providers: [{ source: 'xss', model: MODEL, priority: 0, enabled: true }],
  });
  await ctx.admin('PUT', '/auto', { slots: [...chain.slots, { model: MODEL, source: 'xss', tier: chain.slots.length + 1 }] });
  try {
    // A request with that key for that model: the logs and the overview have both names.
    const r = await ctx.chat(MODEL, key);
    assert.equal(r.status, 502, JSON.stringify(r.body));
    for (let i = 0; i < 50; i++) {
      if ((await ctx.admin('GET', `/logs?model=${encodeURIComponent(MODEL)}`)).total >= 1) break;
    }

    const page = await ctx.page();
    const visit = async (id, heading, texts) => {
      await page.goto(`${ctx.env.gateway}/ui/#/${id}`);
      await page.getByRole('heading', { level: 1, name: heading }).waitFor();
      for (const t of texts) await page.getByText(t, { exact: true }).first().waitFor();
      await noMarkup(page, id);
    };
    await visit('sources', 'Sources', [MODEL]);
    await visit('priority', 'Priority', [MODEL]);
    // The card's label and tooltip carry the name as text too.
    await page.getByRole('article', { name: `${MODEL} @ xss` }).waitFor();
    await visit('routes', 'Routes', [ALIAS]);
    await page.getByRole('region', { name: `Route ${ALIAS}` }).getByText(`xss/${MODEL}`, { exact: true }).waitFor();
    await visit('keys', 'Keys', [KEY]);
    await visit('logs', 'Logs', [MODEL, KEY]);
    await ctx.shot(page, 'xss');
    await page.getByRole('row', { name: new RegExp(escape(KEY)) }).first().click();
    await page.getByRole('dialog').getByText(MODEL, { exact: true }).waitFor();
    await noMarkup(page, 'logs detail');
    await page.keyboard.press('Escape');
    await visit('overview', 'Overview', [MODEL]);
    await page.getByRole('table', { name: 'Top models' }).getByRole('link', { name: MODEL }).waitFor();
    await visit('operations', 'Operations', []);
    await page.getByLabel('Source (cooldowns)').locator('option', { hasText: 'xss' }).waitFor({ state: 'attached' });
    await noMarkup(page, 'operations');
    // The playground lists the model by its literal name.
    await page.goto(`${ctx.env.gateway}/ui/#/playground`);
    await page.getByLabel('Gateway key').fill(key);
    await page.getByLabel('Gateway key').press('Tab');
    await page.getByLabel('Model', { exact: true }).locator('option', { hasText: MODEL }).waitFor({ state: 'attached' });
    await noMarkup(page, 'playground');
  } finally {
    await ctx.admin('PUT', '/auto', { slots: chain.slots });
    await ctx.admin('DELETE', `/routes/${encodeURIComponent(route.id)}`);
    await ctx.admin('DELETE', '/sources/xss');
    await ctx.admin('DELETE', `/keys/${encodeURIComponent(KEY)}`);
    await ctx.admin('POST', '/cooldowns/clear', { source: 'xss' });
  }
  assert.ok(!(await ctx.admin('GET', '/sources')).sources.some((s) => s.name === 'xss'));
  assert.ok(!(await ctx.admin('GET', '/keys')).keys.some((k) => k.name === KEY));
}

/** No element was made from the names: no img[src=x], no <b>/<i> holding them, no script. */
async function noMarkup(page, where) {
  const found = await page.evaluate(() => ({
    img: document.querySelectorAll('img[src="x"], img[onerror]').length,
    tags: [...document.querySelectorAll('b, i')].filter((e) => e.textContent.includes('xss-')).length,
    scripts: [...document.querySelectorAll('script')].filter((s) => !s.src).length,
    handlers: [...document.querySelectorAll('*')].filter((e) => [...e.attributes].some((a) => a.name.startsWith('on'))).length,
  }));
  assert.deepEqual(found, { img: 0, tags: 0, scripts: 0, handlers: 0 }, `markup made into elements on ${where}`);
}

function escape(s) {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
