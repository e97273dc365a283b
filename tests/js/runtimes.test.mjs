// The same smoke test (tests/runtimes/smoke.mjs: a q8 layer of 1000
// positions, attention, truncateLast, snapshot round trips) in every runtime
// the package supports: Node, headless Chromium, Deno, Bun and Cloudflare's
// workerd, the last three from their npm packages. They run the same wasm on
// the same data, so every summary must equal Node's bit for bit. Each run is
// bounded: a runtime that hangs is killed.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
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

test('Node runs the smoke test on the package imported by its name', (t) => {
  assert.equal(node.summary.kernelIsa, 'wasm-simd128');
  assert.equal(node.summary.seqLen, 990);
  t.diagnostic(`Node ${process.version}: ${seconds(node.ms)}, attend checksum ${node.summary.attendChecksum}`);
});

test('Deno, with read access to the .wasm only, agrees with Node bit for bit', async (t) => {
  const deno = findBinary('deno');
  if (deno.missing) return t.skip(deno.missing);
  const { summary, ms } = await runEntry(deno.path, ['run', `--allow-read=${WASM}`, '--no-prompt', '--no-lock'],
    { DENO_NO_UPDATE_CHECK: '1', NO_COLOR: '1' });
  assert.deepEqual(summary, node.summary);
  t.diagnostic(`${deno.version}: ${seconds(ms)}`);
});

test('Bun agrees with Node bit for bit', async (t) => {
  const bun = findBinary('bun');
  if (bun.missing) return t.skip(bun.missing);
  const { summary, ms } = await runEntry(bun.path, ['run']);
  assert.deepEqual(summary, node.summary);
  t.diagnostic(`Bun ${bun.version}: ${seconds(ms)}`);
});

test('headless Chromium, loading the package through an import map, agrees with Node bit for bit', { timeout: TEST_TIMEOUT_MS }, async (t) => {
  if (!existsSync(CHROMIUM)) return t.skip(`Chromium is not installed at ${CHROMIUM} (Debian package chromium)`);
  let chromium;
  try {
    ({ chromium } = await import('playwright-core'));
  } catch {
    return t.skip('playwright-core is not installed (npm ci)');
  }
  const started = performance.now();
  const { summary, version } = await smokeInChromium(chromium, { timeoutMs: RUN_TIMEOUT_MS });
  assert.deepEqual(summary, node.summary);
  t.diagnostic(`Chromium ${version}: ${seconds(performance.now() - started)} with the browser's start`);
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
  assert.deepEqual(await askWorker('module', '/smoke'), node.summary);
  t.diagnostic(`${workerdBinary.version}: ${seconds(performance.now() - started)} with workerd's start`);
});

test('workerd, on the Worker entry\'s own init(), agrees with Node bit for bit', { timeout: TEST_TIMEOUT_MS }, async (t) => {
  if (workerdBinary.missing) return t.skip(workerdBinary.missing);
  assert.deepEqual(await askWorker('default', '/smoke'), node.summary);
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
