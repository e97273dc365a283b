/*
 * abi.c -- the only C that knows about the JS side.
 *
 * The module exports the public kvc_* functions listed in exports.txt plus
 * malloc/free for the loader's staging buffers.  The loader checks
 * kvc_wasm_abi() so that a js/ and a .wasm from different builds refuse to
 * run together instead of misreading each other.
 */
#include <emscripten.h>
#include <malloc.h>
#include <stddef.h>

#include "kvcache.h"

/* Bump when an exported signature or a status value changes, or the loader
 * needs an export an older module lacks. */
#define KVC_WASM_ABI 12

/* The heap grows by at least 1 MiB at a time, not dlmalloc's 64 KiB: each
 * grow of a memory no worker shares costs about 0.2 ms here, and a 93 MB
 * cache restored into fresh memory took 1,450 of them (300 ms), now 93.  An
 * allocation near maxMemory may fail up to 1 MiB before the last byte. */
__attribute__((constructor)) static void grow_heap_in_steps(void) {
    mallopt(M_GRANULARITY, 1 << 20);
}

EMSCRIPTEN_KEEPALIVE int kvc_wasm_abi(void) {
    return KVC_WASM_ABI;
}

/* Bytes the allocator holds free inside the heap: with what the memory can
 * still grow by, the room a model loader checks a model and its cache
 * against (js/model/llama.js). */
EMSCRIPTEN_KEEPALIVE size_t kvc_wasm_heap_free_bytes(void) {
    return mallinfo().fordblks;
}

/* kvc_memory_stats for the loader, which reads no C struct by its layout:
 * the bytes a kvc_memory_usage takes, and each field of one. */
EMSCRIPTEN_KEEPALIVE size_t kvc_wasm_memory_usage_bytes(void) {
    return sizeof(kvc_memory_usage);
}

EMSCRIPTEN_KEEPALIVE size_t kvc_wasm_memory_usage_cache_bytes(const kvc_memory_usage *usage) {
    return usage->cache_bytes;
}

EMSCRIPTEN_KEEPALIVE size_t kvc_wasm_memory_usage_layers(const kvc_memory_usage *usage) {
    return usage->layers;
}

EMSCRIPTEN_KEEPALIVE size_t kvc_wasm_memory_usage_pages(const kvc_memory_usage *usage) {
    return usage->pages;
}
