// kvcache-wasm: the KV cache of a transformer layer, in WebAssembly.
//
// The JavaScript side is thin: a loader for dist/kvcache.wasm (runtime.js),
// argument checks (checks.js) and one class per C object (layer.js,
// model.js). Every rule about the cache itself lives in C
// (include/kvcache.h).
import { heap, init, lib, readCString, unstage } from './runtime.js';
import { checkFloat32, checkInteger, checkStatus, staged } from './checks.js';
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
  const where = 'memoryStats';
  const exports = lib();
  try {
    const [usagePtr] = staged(where, 12); // kvc_memory_usage: three size_t
    exports.kvc_memory_stats(usagePtr);
    const { u32 } = heap();
    const at = usagePtr >>> 2;
    return { cacheBytes: u32[at], heapBytes: u32.buffer.byteLength, layers: u32[at + 1], pages: u32[at + 2] };
  } finally {
    unstage();
  }
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
  const [qPtr, kPtr, vPtr, outPtr, probsPtr] = staged(where, q.byteLength, keys.byteLength,
    values.byteLength, d * 4, n * 4);
  try {
    const { f32 } = heap();
    f32.set(q, qPtr >>> 2);
    f32.set(keys, kPtr >>> 2);
    f32.set(values, vPtr >>> 2);
    checkStatus(where, exports.kvc_attention_head(qPtr, kPtr, vPtr, n, d, outPtr, probsPtr));
    const views = heap();
    return {
      out: views.f32.slice(outPtr >>> 2, (outPtr >>> 2) + d),
      probs: views.f32.slice(probsPtr >>> 2, (probsPtr >>> 2) + n),
    };
  } finally {
    unstage();
  }
}
