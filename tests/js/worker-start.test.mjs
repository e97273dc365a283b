// LlamaWorker's start when the worker is stuck constructing a thread of its
// pool: Firefox, in a worker, at times never returns from a nested Worker's
// constructor (js/runtime/threads.js). The worker says when it constructs one and
// when that returned; here stand-in workers (the global Worker, or one the
// app passes) answer init as the package's worker would, or stop after
// saying they construct one.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { LlamaWorker } from '../../js/worker.js';

const READY = { kernelInfo: { isa: 'stand-in' }, threadInfo: { threads: 2 } };

/** A worker that answers init; `stuck` ones say they construct a pool thread and never go on. */
function standIn({ stuck }) {
  const worker = {
    terminated: false,
    onmessage: null,
    postMessage({ id, op }) {
      if (op !== 'init') return;
      const send = (data) => setTimeout(() => worker.onmessage?.({ data }), 5);
      send({ id, progress: { constructingThread: true } });
      if (stuck) return;
      send({ id, progress: { constructingThread: false } });
      send({ id, result: READY });
    },
    terminate() { worker.terminated = true; },
  };
  return worker;
}

/** The package's own workers, as the global Worker makes them: stuck while `stuck()` says so. */
function standInWorkers(stuck) {
  const made = [];
  let saved;
  before(() => {
    saved = globalThis.Worker;
    globalThis.Worker = function StandInWorker() {
      const worker = standIn({ stuck: stuck(made.length) });
      made.push(worker);
      return worker;
    };
  });
  after(() => { globalThis.Worker = saved; });
  return made;
}

describe('a worker stuck constructing a pool thread', { concurrency: true }, () => {
  // The first is stuck, the next answers.
  const made = standInWorkers((count) => count === 0);

  test('is ended and another worker started, whose init is the start\'s', async () => {
    const started = Date.now();
    const info = await new LlamaWorker().ready();
    assert.deepEqual(info, READY);
    assert.equal(made.length, 2, 'a second worker was started');
    assert.equal(made[0].terminated, true, 'the stuck one was ended');
    assert.equal(made[1].terminated, false);
    assert.ok(Date.now() - started >= 10000, 'the stuck one had its 10 s');
  });

  test('the app\'s function is called again for another worker when the first is stuck', async () => {
    const started = [];
    const info = await new LlamaWorker({
      worker: () => {
        started.push(standIn({ stuck: started.length === 0 }));
        return started.at(-1);
      },
    }).ready();
    assert.deepEqual(info, READY);
    assert.deepEqual(started.map((w) => w.terminated), [true, false]);
  });

  test('the app\'s own worker is ended and the start fails, naming why', async () => {
    const worker = standIn({ stuck: true });
    const remote = new LlamaWorker({ worker });
    await assert.rejects(remote.ready(), /constructing a thread of its pool did not return in 10 s \(Firefox/);
    assert.equal(worker.terminated, true);
    await assert.rejects(remote.load(new Uint8Array(8)), /did not return in 10 s/, 'later calls fail the same way');
  });
});

describe('a worker stuck constructing a pool thread, terminated meanwhile', () => {
  const made = standInWorkers(() => true);

  test('is ended, and no other worker is started', async () => {
    const remote = new LlamaWorker();
    remote.terminate();
    await assert.rejects(remote.ready(), /terminated/);
    await new Promise((resolve) => setTimeout(resolve, 10500));
    assert.equal(made.length, 1, 'no worker started after terminate()');
    assert.equal(made[0].terminated, true);
  });
});

test('options.worker must be a Worker or a function that starts one', async () => {
  assert.throws(() => new LlamaWorker({ worker: 7 }), /options.worker must be a Worker or a function that starts one \(got 7\)/);
  await assert.rejects(new LlamaWorker({ worker: () => null }).ready(), /options.worker\(\) must return a Worker \(got null\)/);
});
