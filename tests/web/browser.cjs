// browser.cjs - drives Debian's Chromium (through playwright-core, no
// browser download) over heapprofd's web page, for tests/integration/test_web.py.
//
//   node browser.cjs BASE_URL PID ARTIFACT_DIR NAME...
//
// Opens the index, finds the process's row and clicks through to its page;
// waits for the flame graph (the page sets data-state on #flame) and reads
// the names of its frames from the DOM (each frame's <title>); switches the
// sample type to alloc_objects, then to the leak view and to a delta. Saves
// screenshots of the index and of the process page in ARTIFACT_DIR. Prints
// one JSON object with what it saw; the Python test judges it. Any step
// that times out or fails exits non-zero with the reason.
'use strict';
const path = require('path');
const { STEP_MS, withPage, indexRow } = require('./chromium.cjs');

const [base, pid, artifacts, ...names] = process.argv.slice(2);

// Waits until #flame says it is done loading; returns its state and the status line.
async function settled(page) {
  // Loaded, and drawn: the graph's transitions have ended once the root
  // frame spans the whole width and the frames' labels carry their names.
  await page.waitForFunction(() => {
    const s = document.getElementById('flame').dataset.state;
    if (s === 'error') return true;
    if (s !== 'ready') return false;
    const svg = document.querySelector('#flame svg');
    if (!svg) return true; // nothing to draw
    const widths = [...svg.querySelectorAll('g rect')].map((r) => Number(r.getAttribute('width')));
    const labels = [...svg.querySelectorAll('.d3-flame-graph-label')].filter((l) => l.textContent);
    return widths.length && Math.max(...widths) >= 0.99 * Number(svg.getAttribute('width')) &&
      labels.length > 0;
  }, null, { timeout: STEP_MS });
  return page.evaluate(() => ({
    state: document.getElementById('flame').dataset.state,
    status: document.getElementById('status').textContent,
    // Every frame of the graph has a <title>: "name: value (pct%)".
    frames: [...document.querySelectorAll('#flame svg g title')].map((t) => t.textContent),
    // The names drawn on frames wide enough to show one.
    labels: [...document.querySelectorAll('#flame .d3-flame-graph-label')]
      .map((l) => l.textContent).filter((t) => t),
    top: [...document.querySelectorAll('#top tbody tr td.name')].map((td) => td.textContent),
    url: location.pathname + location.search,
  }));
}

async function main() {
  const out = await withPage(async (page, out) => {
    const row = await indexRow(page, base, pid);
    out.index_row = await row.locator('td').allTextContents();
    out.index_headers = await page.locator('#targets thead th').allTextContents();
    await page.screenshot({ path: path.join(artifacts, 'web-index.png'), fullPage: true });

    await row.locator('a').click();
    await page.waitForURL(/\/process\?pid=/, { timeout: STEP_MS });
    out.inuse = await settled(page);
    out.title = await page.locator('#title').textContent();
    await page.screenshot({ path: path.join(artifacts, 'web-process.png'), fullPage: true });

    await page.selectOption('select[name=sample_index]', 'alloc_objects');
    await page.waitForURL(/sample_index=alloc_objects/, { timeout: STEP_MS });
    out.alloc_objects = await settled(page);

    await page.fill('input[name=min_age]', '1s');
    await page.check('input[name=view][value=leak]');
    await page.waitForURL(/min_age=1s/, { timeout: STEP_MS });
    out.leak = await settled(page);

    await page.fill('input[name=seconds]', '1');
    await page.check('input[name=view][value=delta]');
    await page.waitForURL(/seconds=1/, { timeout: STEP_MS });
    out.delta = await settled(page);

    await page.check('input[name=icicle]');
    await page.check('input[name=view][value=all]');
    await page.selectOption('select[name=sample_index]', 'inuse_space');
    out.icicle = await settled(page);
    await page.screenshot({ path: path.join(artifacts, 'web-process-icicle.png'), fullPage: true });

    const bad = await page.goto(base + '/process?pid=abc', { timeout: STEP_MS });
    out.bad_pid = await settled(page);
    out.bad_pid.http_status = bad.status();
  });
  out.expected_names = names;
  process.stdout.write(JSON.stringify(out) + '\n');
}

main().catch((e) => {
  process.stderr.write('browser.cjs: ' + (e && e.stack || e) + '\n');
  process.exit(1);
});
