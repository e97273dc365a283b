// What the caches of the whole module hold, for an app's memory budget.
import { callC, heap, lib } from '../runtime/runtime.js';

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
