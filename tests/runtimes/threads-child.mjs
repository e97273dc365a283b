// What tests/js/threads.test.mjs runs in a process of its own (init() runs
// once per process): `node threads-child.mjs <scenario>`; prints one line of
// JSON with what happened.
import * as kv from '../../js/index.js';
import { injectWorkerFault, setPoolMinWork, workerScriptOption } from '../../js/runtime/threads.js';
import { parallelDigests } from './parallel.mjs';

const FAILING = new URL('./failing-worker.mjs', import.meta.url);

const scenarios = {
  // Threads that stop early (shutdown) or a worker that dies mid-task (a
  // trap): every later call still gives the single-thread bits.
  async shutdown() {
    await kv.init({ threads: 3 });
    const before = { threads: kv.threadCount(), digests: parallelDigests(kv) };
    await kv.shutdown();
    return { before, after: { threads: kv.threadCount(), digests: parallelDigests(kv) } };
  },
  async fault() {
    await kv.init({ threads: 3 });
    const threads = kv.threadCount();
    const reference = parallelDigests(kv);
    injectWorkerFault(1);
    const runs = [];
    // Worker 1 traps at the first task it takes, whichever call that is.
    for (let i = 0; i < 20 && kv.threadCount() === threads; i++) runs.push(parallelDigests(kv));
    runs.push(parallelDigests(kv));
    const info = kv.threadInfo();
    return { threads, after: info.threads, reason: info.reason, same: runs.every((r) => JSON.stringify(r) === JSON.stringify(reference)) };
  },
  // A job of 2^32 multiply-adds and more goes to the pool (a 32-bit count of
  // its work would wrap to 0 and call it small): the scores of a causal
  // attention of 1024 queries over 8192 positions of 256 channels, with
  // every job below 2^31 multiply-adds (the call's others) kept on the
  // calling thread and worker 1 set to trap at the first task it takes. The
  // pool loses worker 1 only if a task of that job reached it.
  async largeJob() {
    await kv.init({ threads: 2 });
    const threads = kv.threadCount();
    const d = 256, n = 8192, m = 1024;
    const layer = new kv.LayerKvCache({ numKvHeads: 1, headDim: d, mode: 'f32' });
    const rows = new Float32Array(n * d).map((_, i) => Math.sin(i * 0.37));
    layer.appendBatch(rows, rows);
    setPoolMinWork(2 ** 31);
    injectWorkerFault(1);
    const { out } = layer.attendCausal(rows.subarray((n - m) * d), 0);
    layer.free();
    return { threads, after: kv.threadCount(), finite: out.every(Number.isFinite) };
  },
  // A worker script that cannot load: an explicit count rejects, naming why;
  // the default falls back to the calling thread and says why.
  async explicitFailure() {
    try {
      await kv.init({ threads: 2, [workerScriptOption]: FAILING });
      return { rejected: false };
    } catch (error) {
      return { rejected: true, name: error.name, message: error.message };
    }
  },
  async defaultFailure() {
    await kv.init({ [workerScriptOption]: FAILING });
    return { info: kv.threadInfo(), digests: parallelDigests(kv) };
  },
  // Idle workers must not keep the process alive: this returns, and the
  // process ends without shutdown().
  async idle() {
    await kv.init({ threads: 4 });
    return { threads: kv.threadCount() };
  },
};

console.log(JSON.stringify(await scenarios[process.argv[2]]()));
