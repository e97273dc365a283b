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
#define KVC_WASM_ABI 10

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
