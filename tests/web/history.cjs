// history.cjs - drives Debian's Chromium (through playwright-core) over
// heapprofd's memory over time and diff view, for
// tests/integration/test_history.py.
//
//   node history.cjs BASE_URL PID ARTIFACT_DIR
//
// Reads the index row's sparkline; opens the process page and reads the
// chart of memory over time (its axis titles and tick labels); clicks
// "Mark as base", then prints `marked` and waits for a line on stdin (the
// test makes the workload allocate and free meanwhile); then refreshes and
// reads the diff: the frames' titles and colours, the top table's rows and
// their classes, the legend; goes back to the cumulative view and to the
// index. Saves web-diff.png, web-history.png (the chart and the flame
// graph) and web-history-index.png (the sparklines) in ARTIFACT_DIR. Prints one JSON object with what it saw
// as its last line; the Python test judges it.
'use strict';
const path = require('path');
const readline = require('readline');
const { STEP_MS, withPage, indexRow } = require('./chromium.cjs');

const [base, pid, artifacts] = process.argv.slice(2);

// Waits for the flame graph to be drawn (as browser.cjs does); returns what it shows.
async function settled(page) {
  await page.waitForFunction(() => {
    const s = document.getElementById('flame').dataset.state;
    if (s === 'error') return true;
    if (s !== 'ready') return false;
    const svg = document.querySelector('#flame svg');
    if (!svg) return true;
    const widths = [...svg.querySelectorAll('g rect')].map((r) => Number(r.getAttribute('width')));
    return widths.length && Math.max(...widths) >= 0.99 * Number(svg.getAttribute('width'));
  }, null, { timeout: STEP_MS });
  // The colours are set by a transition too: let it end.
  await page.waitForTimeout(600);
  return page.evaluate(() => ({
    state: document.getElementById('flame').dataset.state,
    status: document.getElementById('status').textContent,
    frames: [...document.querySelectorAll('#flame svg g')].filter((g) => g.querySelector('title'))
      .map((g) => ({ title: g.querySelector('title').textContent,
                     fill: getComputedStyle(g.querySelector('rect')).fill })),
    top: [...document.querySelectorAll('#top tbody tr')].map((tr) => ({
      cls: tr.className, flat: tr.cells[0].textContent, name: tr.cells[5].textContent })),
    legend_visible: !document.getElementById('legend').hidden,
    legend: document.getElementById('legend').textContent.replace(/\s+/g, ' ').trim(),
    base_info: document.getElementById('base-info').textContent,
    url: location.pathname + location.search,
  }));
}

// What the chart of memory over time shows.
async function chart(page) {
  await page.waitForFunction(() => document.getElementById('history').dataset.state !== 'loading',
    null, { timeout: STEP_MS });
  return page.evaluate(() => {
    const div = document.getElementById('history');
    const texts = (sel) => [...div.querySelectorAll(sel)].map((t) => t.textContent);
    return {
      state: div.dataset.state,
      text: div.textContent.slice(0, 300),
      titles: texts('.axis-title'),
      y_ticks: texts('.axis.y .tick text'),
      rate_ticks: texts('.axis.rate .tick text'),
      x_ticks: texts('.axis.x .tick text'),
      inuse_path: !!div.querySelector('path.inuse-line[d]'),
      note: texts('.chart-note').join(' '),
    };
  });
}

// The next line on stdin.
function nextLine() {
  const rl = readline.createInterface({ input: process.stdin });
  return new Promise((resolve) => rl.once('line', (l) => { rl.close(); resolve(l); }));
}

async function main() {
  const out = await withPage(async (page, out) => {
    const row = await indexRow(page, base, pid);
    out.index_headers = await page.locator('#targets thead th').allTextContents();
    out.spark_points = await row.locator('svg.spark polyline').evaluate(
      (p) => p.getAttribute('points').trim().split(/\s+/).length).catch(() => 0);
    out.spark_title = await row.locator('svg.spark title').textContent().catch(() => '');

    await row.locator('a').click();
    await page.waitForURL(/\/process\?pid=/, { timeout: STEP_MS });
    out.cumulative = await settled(page);
    out.chart = await chart(page);

    await page.evaluate(() => { document.getElementById('flame').dataset.state = 'stale'; });
    await page.click('#mark-base');
    await page.waitForURL(/view=diff/, { timeout: STEP_MS });
    out.just_marked = await settled(page);
    process.stdout.write('marked\n');
    await nextLine();

    // Marked stale first, so that settled() waits for the new load.
    await page.evaluate(() => { document.getElementById('flame').dataset.state = 'stale'; });
    await page.click('#controls button[type=submit]');
    out.diff = await settled(page);
    out.diff_chart = await chart(page);
    await page.screenshot({ path: path.join(artifacts, 'web-diff.png'), fullPage: true });

    // Back to the cumulative view, and to the index: both now show the growth.
    await page.evaluate(() => { document.getElementById('flame').dataset.state = 'stale'; });
    await page.check('input[name=view][value=all]');
    out.after = await settled(page);
    out.after_chart = await chart(page);
    await page.screenshot({ path: path.join(artifacts, 'web-history.png'), fullPage: true });
    await page.goto(base + '/', { timeout: STEP_MS });
    await page.waitForSelector('body[data-state=ready]', { timeout: STEP_MS });
    await page.screenshot({ path: path.join(artifacts, 'web-history-index.png'), fullPage: true });
  });
  process.stdout.write(JSON.stringify(out) + '\n');
}

main().catch((e) => {
  process.stderr.write('history.cjs: ' + (e && e.stack || e) + '\n');
  process.exit(1);
});
