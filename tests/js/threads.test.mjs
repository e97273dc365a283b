// The module's threads (issue #11): init({ threads }) runs the calls that
// split into tasks -- attendHeads, attendCausal, appendBatch and the
// single-head calls that share the split -- on workers over one shared
// memory, and every result is bit-identical whatever the thread count, more
// threads than cores included. Workers that fail to start, die mid-task or
// are shut down cost speed, never answers; idle ones never keep the process
// alive; a call racing free() is refused. Each init() runs in a process of
// its own (tests/runtimes/threads-child.mjs, cli-entry.mjs).
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { availableParallelism } from 'node:os';
import init, { LayerKvCache, KvCache, threadCount, threadInfo } from '../../js/index.js';
import { normals, rng } from './helpers.mjs';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const ENTRY = fileURLToPath(new URL('../runtimes/cli-entry.mjs', import.meta.url));
const CHILD = fileURLToPath(new URL('../runtimes/threads-child.mjs', import.meta.url));
const TIMEOUT_MS = 60000;

async function runNode(script, args) {
  const { NODE_TEST_CONTEXT, ...env } = process.env;
  const started = performance.now();
  const { stdout } = await promisify(execFile)(process.execPath, [script, ...args], {
    cwd: ROOT, env, timeout: TIMEOUT_MS, killSignal: 'SIGKILL',
  });
  return { result: JSON.parse(stdout.trim().split('\n').at(-1)), ms: performance.now() - started };
}

test('init() rejects a threads option that is not an integer from 1 to 64, naming it, and can be called again', async () => {
  await assert.rejects(init({ threads: 0 }), { name: 'RangeError', message: /options\.threads must be between 1 and 64 \(got 0\)/ });
  await assert.rejects(init({ threads: 65 }), { name: 'RangeError', message: /options\.threads/ });
  await assert.rejects(init({ threads: 1.5 }), { name: 'TypeError', message: /options\.threads must be an integer \(got 1\.5\)/ });
  await assert.rejects(init({ threads: '2' }), { name: 'TypeError', message: /options\.threads must be an integer \(got "2"\)/ });
  await assert.rejects(init({ maxMemory: 1000 }), { name: 'RangeError', message: /options\.maxMemory/ });
  await init(); // nothing was loaded by the refused calls
  assert.equal(threadCount(), Math.min(availableParallelism(), 8));
});

test('every parallel call gives the same bits on 1, 2, 3 and 8 threads in every mode', { timeout: 4 * TIMEOUT_MS }, async (t) => {
  const runs = {};
  for (const threads of [1, 2, 3, 8]) {
    const { result, ms } = await runNode(ENTRY, [String(threads)]);
    assert.equal(result.threads, threads, `init({ threads: ${threads} }) runs ${result.threads}`);
    runs[threads] = result.results;
    t.diagnostic(`${threads} threads: ${(ms / 1000).toFixed(2)} s`);
  }
  for (const threads of [2, 3, 8]) assert.deepEqual(runs[threads], runs[1], `${threads} threads against 1`);
});

test('shutdown() stops the workers; later calls run on one thread with the same bits', async () => {
  const { result } = await runNode(CHILD, ['shutdown']);
  assert.equal(result.before.threads, 3);
  assert.equal(result.after.threads, 1);
  assert.deepEqual(result.after.digests, result.before.digests);
});

test('a worker that dies mid-task costs a thread, never a result: the call finishes on the others', async () => {
  const { result } = await runNode(CHILD, ['fault']);
  assert.equal(result.threads, 3);
  assert.equal(result.after, 2, 'the dead worker no longer counts');
  assert.match(result.reason, /worker/);
  assert.ok(result.same, 'every call gave the bits of the calls before the fault');
});

test('a job of more than 2^32 multiply-adds runs on the pool, not on the calling thread alone', async (t) => {
  if (availableParallelism() < 2) return t.skip('one core: the default is one thread and starts no worker');
  const { result } = await runNode(CHILD, ['largeJob']);
  assert.equal(result.threads, 2);
  assert.equal(result.after, 1, 'worker 1 took a task of the job (and trapped, as set)');
  assert.ok(result.finite);
});

test('a worker script that cannot load makes an explicit threads option reject, naming why', async () => {
  const { result } = await runNode(CHILD, ['explicitFailure']);
  assert.ok(result.rejected);
  assert.match(result.message, /options\.threads = 2 cannot run here: 1 of 1 workers did not start: .*fails on purpose/);
});

test('a worker script that cannot load makes the default run on the calling thread and say why', async (t) => {
  if (availableParallelism() < 2) return t.skip('one core: the default is one thread and starts no worker');
  const { result } = await runNode(CHILD, ['defaultFailure']);
  assert.equal(result.info.threads, 1);
  assert.match(result.info.reason, /did not start: .*fails on purpose/);
  const { result: plain } = await runNode(ENTRY, ['1']);
  for (const [mode, digests] of Object.entries(result.digests)) {
    assert.equal(digests.snapshot, plain.results.storage.parallelSnapshots[mode]);
    assert.deepEqual({ heads: digests.heads, perHead: digests.perHead }, plain.results.attention.parallel[mode]);
  }
});

test('idle workers never keep the process alive', async () => {
  const { result, ms } = await runNode(CHILD, ['idle']);
  assert.equal(result.threads, 4);
  assert.ok(ms < TIMEOUT_MS, 'the process ended by itself');
});

before(() => init());

// A getter of `into` (or a policy, or a proxy for alive) is the caller's
// code running inside a call: if it frees the cache, the call must stop.
test('a call whose arguments free the cache on the same thread is refused with a TypeError, and nothing breaks', () => {
  const r = rng(11);
  const H = 2, d = 8, n = 1500;
  const make = () => {
    const cache = new LayerKvCache({ numKvHeads: H, headDim: d, mode: 'q8' });
    cache.appendBatch(normals(r, n * H * d), normals(r, n * H * d));
    return cache;
  };
  const freeing = (cache, value) => ({ get out() { cache.free(); return value; } });
  let cache = make();
  assert.throws(() => cache.attendHeads(normals(r, 2 * H * d), freeing(cache, new Float32Array(2 * H * d))),
    { name: 'TypeError', message: /attendHeads: the cache was freed/ });
  cache = make();
  assert.throws(() => cache.attend(normals(r, d), 0, freeing(cache, new Float32Array(d))),
    { name: 'TypeError', message: /attend: the cache was freed/ });
  cache = make();
  assert.throws(() => cache.attendCausal(normals(r, 3 * d), 1, freeing(cache, new Float32Array(3 * d))),
    { name: 'TypeError', message: /attendCausal: the cache was freed/ });
  cache = make();
  const policy = { get budget() { cache.free(); return 10; } };
  assert.throws(() => cache.evict(policy), { name: 'TypeError', message: /evict: the cache was freed/ });
  cache = make();
  const alive = new Proxy([true, true], { get(target, key) { if (key === 'length') cache.free(); return Reflect.get(target, key); } });
  assert.throws(() => cache.append(normals(r, H * d), normals(r, H * d), alive), { name: 'TypeError', message: /the cache was freed/ });
  const model = new KvCache({ numLayers: 2, numKvHeads: H, headDim: d });
  assert.throws(() => model.evict({ get budget() { model.free(); return 4; } }), { name: 'TypeError', message: /KvCache\.evict: the cache was freed/ });
  // The module goes on: a new cache attends as any other.
  const after = make();
  assert.equal(after.attendHeads(normals(r, H * d)).out.length, H * d);
  after.free();
  assert.equal(threadInfo().threads, threadCount());
});
