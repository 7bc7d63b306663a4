// chromium.cjs - Debian's Chromium started headless through playwright-core
// (no browser download) for the page tests, browser.cjs and history.cjs: a
// profile directory of its own, console errors and page errors collected,
// and everything closed and removed afterwards.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const { chromium } = require('playwright-core');

// How long one page state may take; a delta of 1 s adds its second.
const STEP_MS = 20000;

// The flags that work on these machines (no GPU, no network but loopback).
const CHROMIUM_ARGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

// Runs `steps(page, out)` in a fresh browser and returns `out`, which
// starts as { console_errors: [] } and collects them as the page runs.
async function withPage(steps) {
  const profileDir = fs.mkdtempSync(path.join(os.tmpdir(), 'heapprof-chromium-'));
  const context = await chromium.launchPersistentContext(profileDir, {
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: CHROMIUM_ARGS,
    viewport: { width: 1280, height: 800 },
  });
  const out = { console_errors: [] };
  try {
    const page = context.pages()[0] || await context.newPage();
    page.on('console', (m) => { if (m.type() === 'error') out.console_errors.push(m.text()); });
    page.on('pageerror', (e) => out.console_errors.push(String(e)));
    await steps(page, out);
  } finally {
    await context.close();
    fs.rmSync(profileDir, { recursive: true, force: true });
  }
  return out;
}

// Opens the index at `base` and waits for the row of process `pid`.
async function indexRow(page, base, pid) {
  await page.goto(base + '/', { timeout: STEP_MS });
  await page.waitForSelector('body[data-state=ready]', { timeout: STEP_MS });
  const row = page.locator(`#targets tbody tr[data-pid="${pid}"]`);
  await row.waitFor({ timeout: STEP_MS });
  return row;
}

module.exports = { STEP_MS, withPage, indexRow };
