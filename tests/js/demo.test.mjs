// The live demo in every browser engine (tests/runtimes/browsers.mjs:
// Chromium, Firefox, WebKit): both sources run, the charts and the page's
// numbers match the caches, rollbacks happen, branches share their prefix,
// the page (served cross-origin isolated) runs the package on worker
// threads where the engine can, and nothing errs. Screenshots go to test-artifacts/demo-<browser>-*.png.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { startServer } from '../../web-demo/server.mjs';
import { BROWSERS, browserMissing, launchBrowser } from '../runtimes/browsers.mjs';
import { MODEL_MISSING, MODEL_PATH } from './helpers.mjs';

const ARTIFACTS = fileURLToPath(new URL('../../test-artifacts/', import.meta.url));
const TOKENS = 100;
const WAIT_MS = 120000;
// What each engine loads and how many threads it can run (the runtime
// matrix, tests/js/runtimes.test.mjs, says why).
const EXPECTED = {
  chromium: { isa: 'wasm-relaxed-simd', threaded: true },
  firefox: { isa: 'wasm-relaxed-simd', threaded: true },
  webkit: { isa: 'wasm-simd128', threaded: false },
};

let server;
before(async () => {
  server = await startServer({ port: 0, modelPath: MODEL_PATH });
  mkdirSync(ARTIFACTS, { recursive: true });
});
after(() => server?.close());

for (const name of BROWSERS) {
  describe(`the demo in ${name}`, () => {
    let skipWhy = null;
    let browser;
    let page;

    before(async () => {
      skipWhy = await browserMissing(name);
      if (skipWhy) return;
      browser = await launchBrowser(name);
      page = await browser.open(server.url);
      await page.evaluate('async () => window.demo.ready');
    });
    after(() => browser?.close());

    const snapshot = () => page.evaluate('async () => window.demo.snapshot()');
    const text = (selector) => page.evaluate('async (s) => document.querySelector(s).textContent', selector);
    /** The state once the page has drawn it: charts redraw on the next animation frame, not on each step. */
    const drawnSnapshot = async () => {
      await page.evaluate('async () => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)))');
      return snapshot();
    };
    /** Polls the page until `done(snapshot)` holds. */
    async function waitFor(done, what) {
      const deadline = Date.now() + WAIT_MS;
      for (;;) {
        const state = await snapshot();
        if (done(state)) return state;
        if (Date.now() > deadline) assert.fail(`${name}: waited ${WAIT_MS} ms for ${what}; last state ${JSON.stringify(state).slice(0, 400)}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
    async function noProblems() {
      const state = await snapshot();
      assert.deepEqual([...page.problems(), ...state.errors], [], 'no console errors, page errors or failed requests');
    }
    async function screenshot(t, what, detail) {
      const file = `demo-${name}-${what}.png`;
      await page.screenshot(`${ARTIFACTS}${file}`);
      t.diagnostic(`screenshot: test-artifacts/${file} (${detail})`);
    }

    /** Selects a source, runs it fast until `tokens` tokens and a rollback, pauses, returns the state. */
    async function runSource(source) {
      await page.select('#source', source);
      await page.fill('#speed', '200');
      await page.click('#start');
      await waitFor((s) => s.tokens >= TOKENS && s.stats.rollbacks > 0 && s.seqLenWentDown, `${TOKENS} tokens and a rollback`);
      await page.click('#start'); // pause
      return drawnSnapshot();
    }

    function checkState(state, source) {
      assert.equal(state.source, source);
      assert.equal(state.running, false);
      assert.ok(state.tokens >= TOKENS, `${state.tokens} tokens`);
      for (const mode of ['f32', 'q8', 'q8k', 'q8v', 'q4', 'q8k+q4v']) {
        assert.ok(state.chartPoints[mode] > 0, `the memory chart has points for ${mode}`);
        assert.ok(state.memoryBytes[mode] > 0);
        assert.equal(state.displayedBytes[mode], state.memoryBytes[mode], `the page shows ${mode}'s memoryBytes`);
      }
      assert.ok(state.memoryBytes.q8 < state.memoryBytes.f32, 'q8 holds fewer bytes than f32');
      // (Not so q4 at a demo's hundred or two positions: its 64 newest rows are kept in f32
      // beside their codes, so it holds less than f32 only past ~140 positions and less than
      // q8 past ~600 at head_dim 128 -- README, Storage.)
      assert.ok(state.stats.rollbacks >= 1, 'a rollback happened');
      assert.ok(state.seqLenWentDown, 'the cache length went down');
    }

    test('runs the synthetic stream: memory per mode, rollbacks, a step timed on all threads and on one, no errors', async (t) => {
      if (skipWhy) return t.skip(skipWhy);
      const state = await runSource('synthetic');
      checkState(state, 'synthetic');
      if (EXPECTED[name].threaded) {
        assert.ok(state.threads.threads > 1 || availableParallelism() === 1, `the page runs ${state.threads.threads} threads (${state.threads.reason})`);
      } else {
        assert.equal(state.threads.threads, 1);
        assert.match(await text('#threads-note'), /^Fewer threads than cores: .+\.$/, 'the page says why one thread');
      }
      assert.ok(state.timing.all > 0 && state.timing.one > 0, `step timed: ${JSON.stringify(state.timing)}`);
      assert.equal(await text('#threads'), String(state.threads.threads));
      assert.match(await text('#speedup'), /^\d+\.\d\d×$/);
      await screenshot(t, 'synthetic', `${state.tokens} positions, ${state.stats.rollbacks} rollbacks, ${state.threads.threads} threads`);
      await noProblems();
    });

    test('runs the stories260K model: text, memory per mode, rollbacks, the build the engine supports, no errors', async (t) => {
      if (skipWhy) return t.skip(skipWhy);
      if (MODEL_MISSING) return t.skip(MODEL_MISSING);
      const state = await runSource('model');
      checkState(state, 'model');
      assert.match(await text('#stream'), /Once upon a time/);
      assert.equal(await page.evaluate('async () => document.body.dataset.kernels'), EXPECTED[name].isa);
      await screenshot(t, 'model', `${state.tokens} tokens, ${state.stats.rollbacks} rollbacks`);
      await noProblems();
    });

    test('the shared-prefix panel branches conversations that hold the prefix once', async (t) => {
      if (skipWhy) return t.skip(skipWhy);
      const source = MODEL_MISSING ? 'synthetic' : 'model';
      await page.select('#source', source);
      await page.fill('#speed', '200');
      await page.click('#start');
      await waitFor((s) => s.position >= 150, '150 positions');
      await page.fill('#branch-count', '8');
      await page.fill('#branch-tokens', '16');
      await page.click('#branch');
      const { branches } = await drawnSnapshot();
      assert.equal(branches.count, 8);
      assert.equal(branches.texts.length, 8);
      assert.ok(branches.sharedBytes > 0, 'the branches hold what they wrote');
      // Each branch copies at most the partly filled last page of each
      // sequence (63 positions) besides its own 16: from 150 positions on,
      // under half of what a deep copy holds.
      assert.ok(branches.deepBytes > 2 * branches.sharedBytes,
        `8 branches hold ${branches.sharedBytes} bytes shared, ${branches.deepBytes} as deep copies`);
      if (source === 'model') assert.ok(new Set(branches.texts).size > 1, `the branches went their own ways: ${JSON.stringify(branches.texts)}`);
      assert.match(await text('#branch-ratio'), /^\d+\.\d×$/);
      assert.equal(await text('#branches'), '8');
      await screenshot(t, 'branches', `${source}: ${(branches.deepBytes / branches.sharedBytes).toFixed(1)}x less than deep copies`);
      await noProblems();
    });

    test('the eviction panel evicts for real: it shows the cache\'s own plan, evicts to it, and maxRows keeps every cache within the budget', async (t) => {
      if (skipWhy) return t.skip(skipWhy);
      const source = MODEL_MISSING ? 'synthetic' : 'model';
      const BUDGET = 48;
      await runSource(source);
      await page.fill('#budget', String(BUDGET));
      // Step past an open verify: eviction waits for accept.
      for (let i = 0; i < 20 && (await snapshot()).verifying; i++) await page.click('#step');
      const before = await drawnSnapshot();
      assert.equal(before.verifying, false);
      assert.deepEqual(before.importance.positions, before.shownPositions, 'the panel draws the positions the cache holds');
      assert.equal(before.importance.kept.length, BUDGET, 'the plan keeps the budget');
      assert.ok(before.rows.every((rows) => rows > BUDGET), `rows before: ${before.rows}`);
      await page.click('#evict');
      const after = await drawnSnapshot();
      assert.equal(after.evictions, 1);
      assert.ok(after.rows.every((rows) => rows === BUDGET), `rows after: ${after.rows}`);
      assert.deepEqual(after.shownPositions, before.importance.kept, 'evict kept what the panel showed');
      assert.deepEqual(after.shownPositions.slice(0, 4), [0, 1, 2, 3], 'the sinks stay');
      assert.equal(after.shownPositions.at(-1), before.position - 1, 'the newest stays');
      assert.equal(after.position, before.position, 'positions go on where they were');
      for (const mode of ['f32', 'q8']) assert.ok(after.memoryBytes[mode] < before.memoryBytes[mode], `${mode} memory went down`);
      // Bounded: appends evict first; only an open verify's drafts (at most 8) go past the budget.
      await page.check('#bound');
      await page.click('#start');
      await waitFor((s) => s.position >= after.position + 60, '60 more positions');
      await page.click('#start');
      const bounded = await snapshot();
      assert.ok(bounded.rows.every((rows) => rows <= BUDGET + 8), `rows while bounded: ${bounded.rows}`);
      assert.ok(bounded.memoryBytes.f32 <= after.memoryBytes.f32 * (BUDGET + 8) / BUDGET, 'memory stays flat');
      await screenshot(t, 'eviction', `${source}, budget ${BUDGET}, position ${bounded.position}, rows ${Math.max(...bounded.rows)}`);
      await noProblems();
    });
  });
}

test('the demo server serves the package files with the right MIME types and nothing outside them', async () => {
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
});
