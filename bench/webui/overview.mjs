// Opens the WebUI's overview N times in headless Chromium and prints, for each, the time from
// navigation to the overview rendered with its data: charts drawn and top tables filled.
import { createRequire } from 'node:module';

const require = createRequire(new URL('../../tests/browser/package.json', import.meta.url));
const { chromium } = require('playwright-core');
const [url, token, runs = '5'] = process.argv.slice(2);

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
});
const times = [];
for (let i = 0; i < Number(runs); i++) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  await context.addInitScript((t) => sessionStorage.setItem('switchyard.admin_token', t), token);
  const page = await context.newPage();
  const started = Date.now();
  await page.goto(`${url}/ui/#/overview`);
  // Rendered: a chart canvas is drawn and the top-sources table has its rows.
  await page.locator('canvas').first().waitFor();
  await page.getByRole('cell', { name: 'alpha', exact: true }).first().waitFor();
  times.push(Date.now() - started);
  await context.close();
}
await browser.close();
times.sort((a, b) => a - b);
console.log(`overview first render with data (ms): ${times.join(', ')}; median ${times[Math.floor(times.length / 2)]}`);
