// What the calling thread's instance of the module imports: the memory, a
// growth hook and WASI's clock, which a profile reads (kvc_profile_start).
// (A pool thread's instance, js/pool-worker.js, is given the same but a
// clock it never reads.)

/** The imports of the calling thread's instance of the module over `memory`. */
export function importsFor(memory) {
  let view = null; // over the memory's current buffer (a grown memory has a new one)
  return {
    env: {
      memory,
      // Views are refreshed lazily (see heap()), so growth needs no action here.
      emscripten_notify_memory_growth() {},
    },
    wasi_snapshot_preview1: {
      // Nanoseconds of performance.now(), whatever clock is asked for, into the
      // u64 at `out`: two words, no BigInt (a profile reads the clock a
      // thousand times a step, and garbage would put collections in its times).
      clock_time_get(id, precision, out) {
        const ns = performance.now() * 1e6;
        const high = Math.floor(ns / 2 ** 32);
        if (view?.buffer.byteLength !== memory.buffer.byteLength) view = new DataView(memory.buffer);
        view.setUint32(out >>> 0, ns - high * 2 ** 32, true);
        view.setUint32((out >>> 0) + 4, high, true);
        return 0;
      },
    },
  };
}
