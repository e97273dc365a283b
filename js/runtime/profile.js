// Where the time of forward passes goes, operation by operation
// (kvc_profile_start): what the benchmark's profile of a decode step and a
// prefill chunk reads, and what an app can read about its own calls.
import { C_CODES } from './constants.js';
import { checkStatus, heap, lib, outOfMemory } from './runtime.js';

const PREFIX = 'KVC_PROFILE_';

/** The operations a profile times, by their kvc_profile_op: 'embed', 'norm', 'quantize', 'qkv', …, 'poolWait'. */
export const PROFILE_OPERATIONS = Object.freeze(Object.entries(C_CODES)
  .filter(([name]) => name.startsWith(PREFIX) && name !== `${PREFIX}OPS`)
  .sort((a, b) => a[1] - b[1])
  .map(([name]) => name.slice(PREFIX.length).toLowerCase().replace(/_(.)/g, (_, c) => c.toUpperCase())));

let running = false;

/**
 * Runs `run` (sync or async) with a profile on and returns
 * { value, totalMs, ms }: what run returned, its wall time, and the
 * milliseconds each operation of the forward passes made on this thread
 * took, by name (PROFILE_OPERATIONS). Operations exclude the wait for pool
 * threads (`poolWait`), so their sum is the time of those passes; the rest
 * of totalMs is the caller's own (sampling, tokenizing, JS). Calls another
 * session makes on this thread meanwhile are counted too. One profile at a
 * time.
 */
export async function profile(run) {
  const where = 'profile';
  if (typeof run !== 'function') throw new TypeError(`${where}: run must be a function`);
  if (running) throw new Error(`${where}: a profile is running already`);
  const count = C_CODES.KVC_PROFILE_OPS;
  const ptr = lib().malloc(8 * count) >>> 0;
  if (!ptr) throw outOfMemory(where);
  running = true;
  let value;
  let totalMs;
  try {
    checkStatus(where, lib().kvc_profile_start(ptr, count));
    const started = performance.now();
    try {
      value = await run();
    } finally {
      totalMs = performance.now() - started;
      lib().kvc_profile_stop();
    }
    const totals = heap().f64.subarray(ptr / 8, ptr / 8 + count);
    return { value, totalMs, ms: Object.fromEntries(PROFILE_OPERATIONS.map((name, i) => [name, totals[i]])) };
  } finally {
    running = false;
    lib().free(ptr);
  }
}
