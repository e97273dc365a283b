// What tests/js/threads.test.mjs runs in a process of its own (init() runs
// once per process): `node threads-child.mjs <scenario>`; prints one line of
// JSON with what happened.
import * as kv from '../../js/index.js';
import { injectWorkerFault, workerScriptOption } from '../../js/threads.js';
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
