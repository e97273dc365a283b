// kvcache-wasm: the KV cache of a transformer layer, in WebAssembly.
//
// The JavaScript side is thin: a loader for dist/kvcache.wasm (runtime.js),
// argument checks (checks.js) and one class per C object (layer.js,
// model.js). Every rule about the cache itself lives in C
// (include/kvcache.h).
import { callC, copyOut, heap, init, lib, readCString } from './runtime.js';
import { checkFloat32, checkInteger } from './checks.js';
import { MAX_HEAD_DIM, MAX_POSITIONS } from './layer.js';

export default init;
export { init };
export { KvCacheError } from './checks.js';
export {
  LayerKvCache, MODES, COMPONENTS, Q8_WINDOW, Q4_RESIDUAL_ROWS, Q4_MAX_RESIDUAL_ROWS, MAX_KV_HEADS, MAX_HEAD_DIM, MAX_POSITIONS,
} from './layer.js';
export { KvCache } from './model.js';
export { PrefixCache } from './prefix.js';
export { threadCount, threadInfo, setThreadLimit, shutdown } from './threads.js';
export { kernelInfo } from './runtime.js';

/** The kernel set the module runs: 'wasm-simd128' for a SIMD build. */
export function kernelIsa() {
  return readCString(lib().kvc_kernel_isa() >>> 0);
}

/**
 * What the caches of this module hold: cacheBytes, the sum of every live
 * cache's memoryBytes but each page shared by forks counted once; heapBytes,
 * the size of the wasm memory (which never shrinks); layers and pages, the
 * live C layers and pages.
 */
export function memoryStats() {
  const exports = lib();
  return callC('memoryStats', [exports.kvc_wasm_memory_usage_bytes() >>> 0], (usage) => {
    exports.kvc_memory_stats(usage);
    return 0; // it returns nothing: it cannot fail
  }, ([usage]) => ({
    cacheBytes: exports.kvc_wasm_memory_usage_cache_bytes(usage) >>> 0,
    heapBytes: heap().buffer.byteLength,
    layers: exports.kvc_wasm_memory_usage_layers(usage) >>> 0,
    pages: exports.kvc_wasm_memory_usage_pages(usage) >>> 0,
  }));
}

/** The C library's version string. */
export function version() {
  return readCString(lib().kvc_version() >>> 0);
}

/**
 * Single-query f32 softmax attention over plain slices: keys and values are
 * [n × d] row-major. LayerKvCache#attend in f32 mode runs this very routine.
 */
export function attentionHead(q, keys, values, n, d) {
  const where = 'attentionHead';
  const exports = lib();
  checkInteger(where, 'd', d, 1, MAX_HEAD_DIM);
  checkInteger(where, 'n', n, 0, MAX_POSITIONS);
  checkFloat32(where, 'q', q, d);
  checkFloat32(where, 'keys', keys, n * d);
  checkFloat32(where, 'values', values, n * d);
  return callC(where, [q, keys, values, d * 4, n * 4],
    (qPtr, kPtr, vPtr, outPtr, probsPtr) => exports.kvc_attention_head(qPtr, kPtr, vPtr, n, d, outPtr, probsPtr),
    ([, , , outPtr, probsPtr]) => ({ out: copyOut('f32', outPtr, d), probs: copyOut('f32', probsPtr, n) }));
}
