/*
 * probe.c -- the memory floor the benchmark compares attention with: how
 * fast this module can stream bytes it does nothing else with (the
 * benchmark runs it on one thread and on several instances at once).
 */
#include <emscripten.h>
#include <stddef.h>
#include <wasm_simd128.h>

/* Reads count floats (a multiple of 16) once, with four independent sums so
 * that the loads, not the adds, set the pace; returns a checksum so that
 * nothing is optimised away. */
EMSCRIPTEN_KEEPALIVE float kvc_wasm_read_probe(const float *data, size_t count) {
    v128_t a = wasm_f32x4_const_splat(0.0f), b = a, c = a, d = a;
    for (size_t i = 0; i + 16 <= count; i += 16) {
        a = wasm_f32x4_add(a, wasm_v128_load(data + i));
        b = wasm_f32x4_add(b, wasm_v128_load(data + i + 4));
        c = wasm_f32x4_add(c, wasm_v128_load(data + i + 8));
        d = wasm_f32x4_add(d, wasm_v128_load(data + i + 12));
    }
    const v128_t sum = wasm_f32x4_add(wasm_f32x4_add(a, b), wasm_f32x4_add(c, d));
    return wasm_f32x4_extract_lane(sum, 0) + wasm_f32x4_extract_lane(sum, 3);
}
