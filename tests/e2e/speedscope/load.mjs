// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// Open a profile in speedscope's web app in headless Chromium and report
// what the page shows, as one JSON line on stdout:
//   node load.mjs CHROMIUM URL
// URL is speedscope's index.html with #profileURL=... (served over http:
// speedscope fetches the profile). The report: error text on the page, the
// toolbar's text (profile name, thread selector "N/M"), the names of the
// frames the sandwich view lists (a DOM table, where the flame chart is a
// canvas), whether its canvases were drawn, console errors and warnings.
import puppeteer from 'puppeteer-core';

const [chromium, url] = process.argv.slice(2);
const browser = await puppeteer.launch({
  executablePath: chromium,
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-dev-shm-usage'],
});
const out = { errors: [], console: [], warnings: [] };
try {
  const page = await browser.newPage();
  // tall: the sandwich table draws only the rows in view
  await page.setViewport({ width: 1400, height: 8000 });
  page.on('console', (m) => {
    if (m.type() === 'error') out.console.push(m.text());
    else if (m.type() === 'warn' || m.type() === 'warning') out.warnings.push(m.text());
  });
  page.on('pageerror', (e) => out.errors.push(String(e)));
  await page.goto(url, { waitUntil: 'networkidle0', timeout: 60000 });
  // loaded: the toolbar names the profile, or an error shows
  await page.waitForFunction(() => {
    const t = document.body.innerText;
    return /Something went wrong|\d+\/\d+/.test(t) || /Time Order|Left Heavy/.test(t) &&
      document.querySelectorAll('canvas').length > 0;
  }, { timeout: 60000 });
  await new Promise((r) => setTimeout(r, 500));
  out.text = await page.evaluate(() => document.body.innerText);
  out.canvases = await page.evaluate(() => Array.from(document.querySelectorAll('canvas'))
    .map((c) => ({ w: c.width, h: c.height })));
  // the sandwich view: a table of every frame name of the selected profile
  // (speedscope's key for it is 3)
  await page.keyboard.press('3');
  await page.waitForFunction(() => /Self/.test(document.body.innerText), { timeout: 30000 });
  await new Promise((r) => setTimeout(r, 500));
  out.sandwich = await page.evaluate(() => document.body.innerText);
} catch (e) {
  out.errors.push('driver: ' + String(e));
  try { out.text = await (await browser.pages())[1].evaluate(() => document.body.innerText); } catch (e2) { }
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
