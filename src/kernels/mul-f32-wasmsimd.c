#include <string.h>
#include <wasm_simd128.h>

#include "kernels.h"

void kvc_mul_f32__wasmsimd(size_t d, const float *a, const float *b, float *y) {
    size_t j = 0;
    for (; j + 4 <= d; j += 4) {
        wasm_v128_store(y + j, wasm_f32x4_mul(wasm_v128_load(a + j), wasm_v128_load(b + j)));
    }
    if (j < d) {
        float a_tail[4] = {0.0f}, b_tail[4] = {0.0f};
        memcpy(a_tail, a + j, (d - j) * sizeof(float));
        memcpy(b_tail, b + j, (d - j) * sizeof(float));
        wasm_v128_store(a_tail, wasm_f32x4_mul(wasm_v128_load(a_tail), wasm_v128_load(b_tail)));
        memcpy(y + j, a_tail, (d - j) * sizeof(float));
    }
}
