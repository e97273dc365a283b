// The module's thread pool: workers (web Workers in browsers, worker_threads
// in Node, Deno and Bun), each an instance of the module over its one shared
// memory, running the tasks the calling thread posts (src/core/pool.c). Nothing
// is copied to a worker: the caches live once, in that memory, and only the
// calling thread allocates. Which thread runs which task never changes a
// result, so a worker that fails to start, or dies, costs speed, not answers.

import { C_LIMITS } from './constants.js';
import { RUNTIME_FILES, builtin, locate } from './files.js';

const MAX_THREADS = C_LIMITS.KVC_MAX_THREADS;
const DEFAULT_MAX_THREADS = 8; // memory bandwidth, not cores, bounds a step beyond this
const START_TIMEOUT_MS = 30000;
// The worker's script beside this file, for worker_threads. (Web Workers name
// it literally, below, so that bundlers see it; this URL is not written that
// way, so that they do not take it for a second asset.)
const HERE = import.meta.url;
const POOL_WORKER = '../pool-worker.js';

/** Tests only: an option key naming another worker script (one that fails). */
export const workerScriptOption = Symbol('kvcache-wasm worker script');
/**
 * An option key for a function told `true` just before a pool worker is
 * constructed and `false` once its constructor has returned: Firefox, in a
 * worker, at times never returns from constructing one (a nested Worker;
 * seen in about one start in 60 of the chat's worker here), and nothing on
 * the stuck thread can notice. js/llama-worker.js reports the two to the
 * page, whose LlamaWorker starts the worker again when the second does not
 * follow the first.
 */
export const workerConstructionWatch = Symbol('kvcache-wasm worker construction watch');

let pool = null; // { exports, workers, wanted, reason }

/** options.threads: undefined (as many as the machine has cores, up to 8) or 1 ..  64. */
export function checkThreads(threads) {
  if (threads === undefined) return undefined;
  if (typeof threads !== 'number' || !Number.isInteger(threads)) {
    throw new TypeError(`init: options.threads must be an integer (got ${typeof threads === 'string' ? JSON.stringify(threads) : String(threads)})`);
  }
  if (threads < 1 || threads > MAX_THREADS) {
    throw new RangeError(`init: options.threads must be between 1 and ${MAX_THREADS} (got ${threads})`);
  }
  return threads;
}

function defaultThreads() {
  const cores = globalThis.navigator?.hardwareConcurrency ?? builtin('node:os')?.availableParallelism?.();
  return Number.isInteger(cores) && cores > 0 ? Math.min(cores, DEFAULT_MAX_THREADS) : 1;
}

/** Whether `memory` survives postMessage (the way it reaches each worker). */
function canPost(memory) {
  const channel = new MessageChannel();
  try {
    channel.port1.postMessage(memory);
    return true;
  } catch {
    return false;
  } finally {
    channel.port1.close();
    channel.port2.close();
  }
}

function isShared(memory) {
  return Object.prototype.toString.call(memory.buffer) === '[object SharedArrayBuffer]';
}

/** How this runtime starts a worker (running `script`, or the package's own), or a string saying why it cannot. */
function workerFactory(memory) {
  if (!isShared(memory)) return 'this runtime cannot create a shared WebAssembly.Memory';
  const threads = builtin('node:worker_threads');
  if (threads) return (script) => nodeWorker(threads.Worker, script ?? new URL(POOL_WORKER, HERE));
  if (typeof Worker !== 'function') return 'this runtime has no Worker';
  if (globalThis.crossOriginIsolated !== true && typeof document !== 'undefined') {
    return 'the page is not cross-origin isolated (serve it with the headers Cross-Origin-Opener-Policy: same-origin and Cross-Origin-Embedder-Policy: require-corp)';
  }
  if (!canPost(memory)) {
    // WebKitGTK: shared memory and cross-origin isolation, but no
    // SharedArrayBuffer to send to a worker.
    return 'this browser cannot send a shared WebAssembly.Memory to a worker (it has no SharedArrayBuffer)';
  }
  return (script) => webWorker(script);
}

// A worker as { post, terminate } whose messages (and failures, as
// { type: 'failed' }, and its end, as { type: 'exit' }) go to onEvent.
function nodeWorker(WorkerThread, script) {
  const worker = new WorkerThread(script);
  return (onEvent) => {
    worker.on('message', onEvent);
    worker.on('error', (error) => onEvent({ type: 'failed', message: error?.message ?? String(error) }));
    worker.on('exit', () => onEvent({ type: 'exit' }));
    // An idle pool never keeps the process alive (after the listeners,
    // which would take a reference again).
    worker.unref();
    return { post: (message) => worker.postMessage(message), terminate: () => worker.terminate() };
  };
}

// The package's own worker is named literally, `new Worker(new URL('…',
// import.meta.url), { type: 'module' })`, so that bundlers emit it.
function webWorker(script) {
  const worker = script
    ? new Worker(script, { type: 'module', name: 'kvcache-wasm pool' })
    : new Worker(new URL('../pool-worker.js', import.meta.url), { type: 'module', name: 'kvcache-wasm pool' });
  return (onEvent) => {
    worker.onmessage = (event) => onEvent(event.data);
    worker.onerror = (event) => {
      event.preventDefault?.();
      onEvent({ type: 'failed', message: event.message || 'the worker script failed to load' });
    };
    worker.onmessageerror = () => onEvent({ type: 'failed', message: 'the worker could not receive the module' });
    return { post: (message) => worker.postMessage(message), terminate: () => worker.terminate() };
  };
}

/**
 * Starts the pool for init(): `requested` threads (undefined: the default),
 * the calling thread being one. An explicit count that cannot be honoured
 * rejects, naming the reason; the default falls back to fewer threads (or
 * one) and threadInfo() says why.
 */
export async function startThreads(exports, module, memory, requested, options) {
  const wanted = requested ?? defaultThreads();
  pool = { exports, workers: [], wanted, reason: null, limit: MAX_THREADS };
  if (wanted === 1) return;
  const factory = workerFactory(memory);
  if (typeof factory === 'string') {
    pool.reason = factory;
    if (requested !== undefined) throw new Error(`init: options.threads = ${requested} cannot run here: ${factory}`);
    return;
  }
  const count = wanted - 1;
  if (exports.kvc_wasm_pool_open(count) !== 0) throw new Error('init: the thread pool is already open');
  const script = options[workerScriptOption] ??
    (options.locateFile ? locate(options, RUNTIME_FILES.poolWorker) : null);
  const stackBytes = exports.kvc_wasm_worker_stack_bytes() >>> 0;
  const watch = options[workerConstructionWatch];
  const construct = watch ? (name) => {
    watch(true);
    try {
      return factory(name);
    } finally {
      watch(false);
    }
  } : factory;
  const started = [];
  for (let index = 1; index <= count; index++) {
    const stack = exports.malloc(stackBytes) >>> 0;
    if (!stack) break;
    started.push(startWorker(construct, script, index, module, memory, stack, stackBytes));
  }
  const workers = await Promise.all(started);
  pool.workers = workers;
  const failed = workers.filter((w) => w.state !== 'ready');
  if (failed.length || workers.length < count) {
    const why = failed[0]?.message ?? 'out of memory for the workers\' stacks';
    pool.reason = `${count - workers.length + failed.length} of ${count} workers did not start: ${why}`;
    for (const w of failed) w.handle?.terminate();
    if (requested !== undefined) {
      await shutdown();
      throw new Error(`init: options.threads = ${requested} cannot run here: ${pool.reason}`);
    }
  }
}

// Resolves once the worker reports ready, fails, or times out.
function startWorker(factory, script, index, module, memory, stack, stackBytes) {
  return new Promise((resolve) => {
    const record = { index, stack, state: 'starting', message: null, handle: null, closed: null };
    let onClosed;
    record.closed = new Promise((done) => { onClosed = done; });
    const settle = (state, message) => {
      if (record.state === 'starting') {
        record.state = state;
        record.message = message;
        clearTimeout(timer);
        resolve(record);
      }
    };
    const timer = setTimeout(() => settle('failed', `no answer in ${START_TIMEOUT_MS / 1000} s`), START_TIMEOUT_MS);
    try {
      record.handle = factory(script)((event) => {
        if (event?.type === 'ready') return settle('ready', null);
        if (event?.type === 'failed' || event?.type === 'exit') {
          settle('failed', event.message ?? 'the worker ended');
          record.state = record.state === 'ready' ? 'dead' : record.state;
          onClosed();
        } else if (event?.type === 'closed') {
          onClosed();
        }
      });
      // The wasm ABI keeps the stack pointer 16-byte aligned (clang addresses
      // stack arrays as base | offset), and malloc promises only 8.
      record.handle.post({ module, memory, index, stackTop: (stack + stackBytes) & ~15 });
    } catch (error) {
      settle('failed', error?.message ?? String(error));
      onClosed();
    }
  });
}

/** The threads calls run on now: the calling thread and the pool's running workers. */
export function threadCount() {
  if (!pool) throw new Error('kvcache-wasm: call `await init()` before using the library');
  return pool.exports.kvc_thread_count() >>> 0;
}

/**
 * { threads, wanted, reason, limit }: the threads running now, the count
 * init() aimed for, why they differ (null when they do not), and the most a
 * call uses (setThreadLimit).
 */
export function threadInfo() {
  const threads = threadCount();
  return {
    threads,
    wanted: pool.wanted,
    reason: threads === pool.wanted ? null : pool.reason ?? 'a worker stopped',
    limit: Math.min(pool.limit, threads),
  };
}

/**
 * Calls use at most `limit` threads from now on, the calling thread
 * included: 1 is the single-threaded package, with the workers idle (and
 * still there for a later, higher limit). Results never depend on it.
 */
export function setThreadLimit(limit) {
  if (!pool) throw new Error('kvcache-wasm: call `await init()` before using the library');
  if (typeof limit !== 'number' || !Number.isInteger(limit)) {
    throw new TypeError(`setThreadLimit: limit must be an integer (got ${typeof limit === 'string' ? JSON.stringify(limit) : String(limit)})`);
  }
  if (limit < 1 || limit > MAX_THREADS) throw new RangeError(`setThreadLimit: limit must be between 1 and ${MAX_THREADS} (got ${limit})`);
  pool.exports.kvc_wasm_thread_limit(limit);
  pool.limit = limit;
}

/**
 * Stops the pool's workers and waits for them to end; calls made afterwards
 * run on the calling thread. Idle workers never keep a process alive, so
 * this is for releasing them early (or tidily), not a duty.
 */
export async function shutdown() {
  if (!pool || pool.workers.length === 0) return;
  const { exports, workers } = pool;
  pool.workers = [];
  exports.kvc_wasm_pool_close();
  const ended = workers.map((w) => (w.state === 'ready' ? w.closed : Promise.resolve()));
  await Promise.race([Promise.all(ended), new Promise((done) => setTimeout(done, 5000))]);
  for (const w of workers) {
    w.handle?.terminate();
    exports.free(w.stack);
  }
}

/** Tests only: worker `index` traps at its next task, as a worker that dies would. */
export function injectWorkerFault(index) {
  pool.exports.kvc_wasm_inject_fault(index);
}

/** Tests only: jobs below `work` multiply-adds run on the calling thread (0: none do). Returns the value it replaces. */
export function setPoolMinWork(work) {
  return pool.exports.kvc_wasm_pool_min_work(work) >>> 0;
}
