#include <string.h>
#include <wasm_simd128.h>

#include "kernels.h"

void kvc_axpy_f32__wasmsimd(size_t d, float alpha, const float *x, float *y) {
    const v128_t va = wasm_f32x4_splat(alpha);
    size_t j = 0;
    for (; j + 4 <= d; j += 4) {
        v128_t vy = wasm_f32x4_add(wasm_v128_load(y + j), wasm_f32x4_mul(va, wasm_v128_load(x + j)));
        wasm_v128_store(y + j, vy);
    }
    if (j < d) {
        float x_tail[4] = {0.0f}, y_tail[4] = {0.0f};
        memcpy(x_tail, x + j, (d - j) * sizeof(float));
        memcpy(y_tail, y + j, (d - j) * sizeof(float));
        v128_t vy = wasm_f32x4_add(wasm_v128_load(y_tail), wasm_f32x4_mul(va, wasm_v128_load(x_tail)));
        wasm_v128_store(y_tail, vy);
        memcpy(y + j, y_tail, (d - j) * sizeof(float));
    }
}
