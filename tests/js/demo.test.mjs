// The live demo in a real browser (Debian's Chromium, driven by
// playwright-core): both sources run, the charts and the page's numbers
// match the caches, rollbacks happen, the page (served cross-origin
// isolated) runs the package on its worker threads, and nothing errs.
// Screenshots go to test-artifacts/.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { startServer } from '../../web-demo/server.mjs';
import { CHROMIUM, CHROMIUM_FLAGS } from '../runtimes/chromium.mjs';
import { MODEL_MISSING, MODEL_PATH } from './helpers.mjs';

const ARTIFACTS = fileURLToPath(new URL('../../test-artifacts/', import.meta.url));
const TOKENS = 100;

let chromium = null;
const missing = !existsSync(CHROMIUM)
  ? `Chromium is not installed at ${CHROMIUM} (Debian package chromium; npm test installs it when run as root)`
  : null;
try {
  ({ chromium } = await import('playwright-core'));
} catch {
  // reported by the skip below
}
const skipWhy = missing ?? (chromium ? null : 'playwright-core is not installed (npm install)');

let server;
let browser;
let page;
const problems = [];

before(async () => {
  if (skipWhy) return;
  server = await startServer({ port: 0, modelPath: MODEL_PATH });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_FLAGS });
  page = await browser.newPage({ viewport: { width: 1400, height: 1100 } });
  page.on('console', (message) => message.type() === 'error' && problems.push(`console: ${message.text()}`));
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('requestfailed', (request) => problems.push(`request failed: ${request.url()}`));
  page.on('response', (response) => response.status() >= 400 && problems.push(`HTTP ${response.status()}: ${response.url()}`));
  await page.goto(server.url);
  await page.evaluate(() => window.demo.ready);
  mkdirSync(ARTIFACTS, { recursive: true });
});

after(async () => {
  await browser?.close();
  await server?.close();
});

const snapshot = () => page.evaluate(() => window.demo.snapshot());
/** The state once the page has drawn it: charts redraw on the next animation frame, not on each step. */
const drawnSnapshot = async () => {
  await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve))));
  return snapshot();
};

/** Selects a source, runs it fast until `tokens` tokens and a rollback, pauses, returns the state. */
async function runSource(name) {
  await page.selectOption('#source', name);
  await page.locator('#speed').fill('200');
  await page.locator('#start').click();
  await page.waitForFunction((n) => {
    const s = window.demo.snapshot();
    return s.tokens >= n && s.stats.rollbacks > 0 && s.seqLenWentDown;
  }, TOKENS, { timeout: 120000, polling: 100 });
  await page.locator('#start').click(); // pause
  return drawnSnapshot();
}

function checkState(state, name) {
  assert.equal(state.source, name);
  assert.equal(state.running, false);
  assert.ok(state.tokens >= TOKENS, `${state.tokens} tokens`);
  for (const mode of ['f32', 'q8', 'q8k', 'q8v']) {
    assert.ok(state.chartPoints[mode] > 0, `the memory chart has points for ${mode}`);
    assert.ok(state.memoryBytes[mode] > 0);
    assert.equal(state.displayedBytes[mode], state.memoryBytes[mode], `the page shows ${mode}'s memoryBytes`);
  }
  assert.ok(state.memoryBytes.q8 < state.memoryBytes.f32, 'q8 holds fewer bytes than f32');
  assert.ok(state.stats.rollbacks >= 1, 'a rollback happened');
  assert.ok(state.seqLenWentDown, 'the cache length went down');
}

test('the demo runs the synthetic stream: memory per mode, rollbacks, a step timed on all threads and on one, no errors', async (t) => {
  if (skipWhy) return t.skip(skipWhy);
  const state = await runSource('synthetic');
  checkState(state, 'synthetic');
  assert.ok(state.threads.threads > 1 || availableParallelism() === 1, `the page runs ${state.threads.threads} threads (${state.threads.reason})`);
  assert.ok(state.timing.all > 0 && state.timing.one > 0, `step timed: ${JSON.stringify(state.timing)}`);
  assert.equal(await page.locator('#threads').innerText(), String(state.threads.threads));
  assert.match(await page.locator('#speedup').innerText(), /^\d+\.\d\d×$/);
  await page.screenshot({ path: `${ARTIFACTS}demo-synthetic.png`, fullPage: true });
  t.diagnostic(`screenshot: test-artifacts/demo-synthetic.png (${state.tokens} positions, ${state.stats.rollbacks} rollbacks)`);
  assert.deepEqual(problems, []);
});

test('the demo runs the stories260K model: text, memory per mode, rollbacks, no errors', async (t) => {
  if (skipWhy) return t.skip(skipWhy);
  if (MODEL_MISSING) return t.skip(MODEL_MISSING);
  const state = await runSource('model');
  checkState(state, 'model');
  const text = await page.locator('#stream').innerText();
  assert.match(text, /Once upon a time/);
  assert.equal(await page.locator('body').getAttribute('data-kernels'), 'wasm-relaxed-simd', 'Chromium runs the relaxed-SIMD build');
  await page.screenshot({ path: `${ARTIFACTS}demo-model.png`, fullPage: true });
  t.diagnostic(`screenshot: test-artifacts/demo-model.png (${state.tokens} tokens, ${state.stats.rollbacks} rollbacks)`);
  assert.deepEqual(problems, []);
});

test('the eviction panel evicts for real: it shows the cache\'s own plan, evicts to it, and maxRows keeps every cache within the budget', async (t) => {
  if (skipWhy) return t.skip(skipWhy);
  const name = MODEL_MISSING ? 'synthetic' : 'model';
  const BUDGET = 48;
  await runSource(name);
  await page.locator('#budget').fill(String(BUDGET));
  // Step past an open verify: eviction waits for accept.
  for (let i = 0; i < 20 && (await snapshot()).verifying; i++) await page.locator('#step').click();
  const before = await drawnSnapshot();
  assert.equal(before.verifying, false);
  assert.deepEqual(before.importance.positions, before.shownPositions, 'the panel draws the positions the cache holds');
  assert.equal(before.importance.kept.length, BUDGET, 'the plan keeps the budget');
  assert.ok(before.rows.every((rows) => rows > BUDGET), `rows before: ${before.rows}`);
  await page.locator('#evict').click();
  const after = await drawnSnapshot();
  assert.equal(after.evictions, 1);
  assert.ok(after.rows.every((rows) => rows === BUDGET), `rows after: ${after.rows}`);
  assert.deepEqual(after.shownPositions, before.importance.kept, 'evict kept what the panel showed');
  assert.deepEqual(after.shownPositions.slice(0, 4), [0, 1, 2, 3], 'the sinks stay');
  assert.equal(after.shownPositions.at(-1), before.position - 1, 'the newest stays');
  assert.equal(after.position, before.position, 'positions go on where they were');
  for (const mode of ['f32', 'q8']) assert.ok(after.memoryBytes[mode] < before.memoryBytes[mode], `${mode} memory went down`);
  // Bounded: appends evict first; only an open verify's drafts (at most 8) go past the budget.
  await page.locator('#bound').check();
  await page.locator('#start').click();
  await page.waitForFunction((n) => window.demo.snapshot().position >= n, after.position + 60, { timeout: 120000, polling: 100 });
  await page.locator('#start').click();
  const bounded = await snapshot();
  assert.ok(bounded.rows.every((rows) => rows <= BUDGET + 8), `rows while bounded: ${bounded.rows}`);
  assert.ok(bounded.memoryBytes.f32 <= after.memoryBytes.f32 * (BUDGET + 8) / BUDGET, 'memory stays flat');
  await page.screenshot({ path: `${ARTIFACTS}demo-eviction.png`, fullPage: true });
  t.diagnostic(`screenshot: test-artifacts/demo-eviction.png (${name}, budget ${BUDGET}, position ${bounded.position}, rows ${Math.max(...bounded.rows)})`);
  assert.deepEqual(problems, []);
});

test('the demo server serves the package files with the right MIME types and nothing outside them', async (t) => {
  if (!server) {
    server = await startServer({ port: 0, modelPath: MODEL_PATH });
  }
  const get = (path) => fetch(new URL(path, server.url));
  const type = async (path) => (await get(path)).headers.get('content-type');
  assert.equal(await type('/pkg/dist/kvcache.wasm'), 'application/wasm');
  assert.match(await type('/pkg/js/index.js'), /^text\/javascript/);
  assert.match(await type('/support/synthetic.mjs'), /^text\/javascript/);
  assert.match(await type('/'), /^text\/html/);
  assert.equal((await get('/pkg/js/../../package.json')).status, 404);
  assert.equal((await get('/pkg/js/%2e%2e/%2e%2e/package.json')).status, 404);
  assert.equal((await get('/src/core/layer.c')).status, 404);
  const page = await get('/');
  assert.equal(page.headers.get('cross-origin-opener-policy'), 'same-origin', 'served cross-origin isolated');
  assert.equal(page.headers.get('cross-origin-embedder-policy'), 'require-corp');
  const models = await (await get('/api/models')).json();
  assert.equal(models['stories260k.gguf'], !MODEL_MISSING);
  if (skipWhy) t.diagnostic(`browser part skipped: ${skipWhy}`);
});
