#include <string.h>
#include <wasm_simd128.h>

#include "kernels.h"

float kvc_dot_f32__wasmsimd(size_t d, const float *a, const float *b) {
    v128_t acc0 = wasm_f32x4_const_splat(0.0f);
    v128_t acc1 = acc0, acc2 = acc0, acc3 = acc0;
    size_t j = 0;
    for (; j + 16 <= d; j += 16) {
        acc0 = wasm_f32x4_add(acc0, wasm_f32x4_mul(wasm_v128_load(a + j), wasm_v128_load(b + j)));
        acc1 = wasm_f32x4_add(acc1, wasm_f32x4_mul(wasm_v128_load(a + j + 4), wasm_v128_load(b + j + 4)));
        acc2 = wasm_f32x4_add(acc2, wasm_f32x4_mul(wasm_v128_load(a + j + 8), wasm_v128_load(b + j + 8)));
        acc3 = wasm_f32x4_add(acc3, wasm_f32x4_mul(wasm_v128_load(a + j + 12), wasm_v128_load(b + j + 12)));
    }
    for (; j + 4 <= d; j += 4) {
        acc0 = wasm_f32x4_add(acc0, wasm_f32x4_mul(wasm_v128_load(a + j), wasm_v128_load(b + j)));
    }
    if (j < d) {
        /* 1..3 left: zero padding adds exact zeros. */
        float a_tail[4] = {0.0f}, b_tail[4] = {0.0f};
        memcpy(a_tail, a + j, (d - j) * sizeof(float));
        memcpy(b_tail, b + j, (d - j) * sizeof(float));
        acc1 = wasm_f32x4_add(acc1, wasm_f32x4_mul(wasm_v128_load(a_tail), wasm_v128_load(b_tail)));
    }
    v128_t acc = wasm_f32x4_add(wasm_f32x4_add(acc0, acc1), wasm_f32x4_add(acc2, acc3));
    return (wasm_f32x4_extract_lane(acc, 0) + wasm_f32x4_extract_lane(acc, 1)) +
           (wasm_f32x4_extract_lane(acc, 2) + wasm_f32x4_extract_lane(acc, 3));
}
