/*
 * abi.c -- the only C that knows about the JS side.
 *
 * The module exports the public kvc_* functions listed in exports.txt plus
 * malloc/free for the loader's staging buffers.  The loader checks
 * kvc_wasm_abi() so that a js/ and a .wasm from different builds refuse to
 * run together instead of misreading each other.
 */
#include <emscripten.h>

/* Bump when an exported signature or a status value changes. */
#define KVC_WASM_ABI 8

EMSCRIPTEN_KEEPALIVE int kvc_wasm_abi(void) {
    return KVC_WASM_ABI;
}
