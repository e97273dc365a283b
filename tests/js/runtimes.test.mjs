// The same smoke test (tests/runtimes/smoke.mjs: a q8 layer of 1000
// positions, attention, truncateLast, snapshot round trips, and every call
// that runs on threads) in every runtime the package supports: Node, headless
// Chromium served cross-origin isolated and not, Deno, Bun and Cloudflare's
// workerd, the last three from their npm packages. They run the same wasm on
// the same data -- on their worker threads where they have them, on one
// thread where they do not -- so every result must equal Node's bit for bit.
// Each run is bounded: a runtime that hangs is killed.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { availableParallelism } from 'node:os';
import init from 'kvcache-wasm';
import * as llama from 'kvcache-wasm/llama';
import { findBinary } from '../runtimes/binaries.mjs';
import { CHROMIUM, smokeInChromium } from '../runtimes/chromium.mjs';
import { llamaSmoke } from '../runtimes/llama-smoke.mjs';
import { startWorkerd } from '../runtimes/workerd.mjs';
import { MODEL_MISSING, MODEL_PATH } from './helpers.mjs';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const ENTRY = fileURLToPath(new URL('../runtimes/cli-entry.mjs', import.meta.url));
const WASM = fileURLToPath(new URL('../../dist/kvcache.wasm', import.meta.url));
const POOL_WORKER = fileURLToPath(new URL('../../js/pool-worker.js', import.meta.url));
// What init() runs on by default where workers and shared memory exist.
const DEFAULT_THREADS = Math.min(availableParallelism(), 8);
const RUN_TIMEOUT_MS = 60000;
const TEST_TIMEOUT_MS = 120000;

/** Runs cli-entry.mjs with `binary` and `args`; its summary and how long it took. */
async function runEntry(binary, args, env = {}) {
  const started = performance.now();
  // NODE_TEST_CONTEXT would make a child Node report to this test runner.
  const { NODE_TEST_CONTEXT, ...inherited } = process.env;
  const { stdout } = await promisify(execFile)(binary, [...args, ENTRY], {
    cwd: ROOT, env: { ...inherited, ...env }, timeout: RUN_TIMEOUT_MS, killSignal: 'SIGKILL',
  });
  return { summary: JSON.parse(stdout.trim().split('\n').at(-1)), ms: performance.now() - started };
}

const seconds = (ms) => `${(ms / 1000).toFixed(2)} s`;

let node; // Node's run: the reference

before(async () => {
  node = await runEntry(process.execPath, []);
});

test('Node runs the smoke test on the package imported by its name, on its default threads', (t) => {
  assert.equal(node.summary.kernelIsa, 'wasm-simd128');
  assert.equal(node.summary.results.seqLen, 990);
  assert.equal(node.summary.threads, DEFAULT_THREADS);
  t.diagnostic(`Node ${process.version}: ${seconds(node.ms)} on ${node.summary.threads} threads, attend checksum ${node.summary.results.attendChecksum}`);
});

test('Deno, with read access to the .wasm and the pool worker only, runs threaded and agrees with Node bit for bit', async (t) => {
  const deno = findBinary('deno');
  if (deno.missing) return t.skip(deno.missing);
  const { summary, ms } = await runEntry(deno.path, ['run', `--allow-read=${WASM},${POOL_WORKER}`, '--no-prompt', '--no-lock'],
    { DENO_NO_UPDATE_CHECK: '1', NO_COLOR: '1' });
  assert.deepEqual(summary.results, node.summary.results);
  assert.equal(summary.threads, DEFAULT_THREADS);
  t.diagnostic(`${deno.version}: ${seconds(ms)} on ${summary.threads} threads`);
});

test('Bun runs threaded and agrees with Node bit for bit', async (t) => {
  const bun = findBinary('bun');
  if (bun.missing) return t.skip(bun.missing);
  const { summary, ms } = await runEntry(bun.path, ['run']);
  assert.deepEqual(summary.results, node.summary.results);
  assert.equal(summary.threads, DEFAULT_THREADS);
  t.diagnostic(`Bun ${bun.version}: ${seconds(ms)} on ${summary.threads} threads`);
});

async function chromiumOrSkip(t) {
  if (!existsSync(CHROMIUM)) return t.skip(`Chromium is not installed at ${CHROMIUM} (Debian package chromium)`);
  try {
    return (await import('playwright-core')).chromium;
  } catch {
    return t.skip('playwright-core is not installed (npm ci)');
  }
}

test('headless Chromium, cross-origin isolated, runs threaded and agrees with Node bit for bit', { timeout: TEST_TIMEOUT_MS }, async (t) => {
  const chromium = await chromiumOrSkip(t);
  if (!chromium) return;
  const started = performance.now();
  const { summary, version } = await smokeInChromium(chromium, { timeoutMs: RUN_TIMEOUT_MS, isolated: true });
  assert.deepEqual(summary.results, node.summary.results);
  assert.ok(summary.threads > 1 || DEFAULT_THREADS === 1, `threads: ${summary.threads}`);
  t.diagnostic(`Chromium ${version}: ${seconds(performance.now() - started)} with the browser's start, ${summary.threads} threads`);
});

test('headless Chromium, not cross-origin isolated, runs on one thread and agrees with Node bit for bit', { timeout: TEST_TIMEOUT_MS }, async (t) => {
  const chromium = await chromiumOrSkip(t);
  if (!chromium) return;
  const { summary } = await smokeInChromium(chromium, { timeoutMs: RUN_TIMEOUT_MS, isolated: false });
  assert.deepEqual(summary.results, node.summary.results);
  assert.equal(summary.threads, 1);
});

// workerd: one server for the tests below, started by the first of them.
const workerdBinary = findBinary('workerd');
let workerd = null;
after(() => workerd?.then((server) => server.close(), () => {}));

/** GET or POST `path` on the Worker that loads the wasm the `init` way; the JSON it answers. */
async function askWorker(init, path, body) {
  workerd ??= startWorkerd(workerdBinary.path, { timeoutMs: RUN_TIMEOUT_MS });
  const { urls, stderr } = await workerd;
  const response = await fetch(`${urls[init]}${path}`, {
    method: body ? 'POST' : 'GET', body, signal: AbortSignal.timeout(RUN_TIMEOUT_MS),
  });
  const text = await response.text();
  assert.equal(response.status, 200, `${text}\n${stderr()}`);
  return JSON.parse(text);
}

test('workerd, given the wasm imported as a module through init({ module }), agrees with Node bit for bit', { timeout: TEST_TIMEOUT_MS }, async (t) => {
  if (workerdBinary.missing) return t.skip(workerdBinary.missing);
  const started = performance.now();
  const summary = await askWorker('module', '/smoke');
  assert.deepEqual(summary.results, node.summary.results);
  assert.equal(summary.threads, 1, 'workerd has no workers: one thread');
  t.diagnostic(`${workerdBinary.version}: ${seconds(performance.now() - started)} with workerd's start`);
});

test('workerd, on the Worker entry\'s own init(), agrees with Node bit for bit', { timeout: TEST_TIMEOUT_MS }, async (t) => {
  if (workerdBinary.missing) return t.skip(workerdBinary.missing);
  const summary = await askWorker('default', '/smoke');
  assert.deepEqual(summary.results, node.summary.results);
  assert.equal(summary.threads, 1);
});

test('workerd runs the llama entry on the Worker entry\'s init() and generates what Node generates', { timeout: TEST_TIMEOUT_MS }, async (t) => {
  if (workerdBinary.missing) return t.skip(workerdBinary.missing);
  if (MODEL_MISSING) return t.skip(MODEL_MISSING);
  const model = readFileSync(MODEL_PATH);
  await init();
  const expected = llamaSmoke(llama, model);
  assert.ok(expected.verifies > 0 && expected.rollbacks > 0, 'the run drafts, verifies and rolls back');
  assert.deepEqual(await askWorker('default', '/llama', model), expected);
  t.diagnostic(`workerd generated the same ${expected.tokens.length} tokens: "${expected.text.slice(0, 40)}…"`);
});
