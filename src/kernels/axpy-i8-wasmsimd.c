#include <string.h>
#include <wasm_simd128.h>

#include "kernels.h"
#include "wasmsimd-convert.h"

/* y[0..3] += alpha * x */
static void axpy4(v128_t alpha, v128_t x, float *y) {
    wasm_v128_store(y, wasm_f32x4_add(wasm_v128_load(y), wasm_f32x4_mul(alpha, x)));
}

void kvc_axpy_i8__wasmsimd(size_t d, float alpha, const int8_t *codes, float *y) {
    const v128_t va = wasm_f32x4_splat(alpha);
    size_t j = 0;
    for (; j + 16 <= d; j += 16) {
        v128_t c = wasm_v128_load(codes + j);
        v128_t lo = wasm_i16x8_extend_low_i8x16(c);
        v128_t hi = wasm_i16x8_extend_high_i8x16(c);
        axpy4(va, kvc_low_i16x8_to_f32x4(lo), y + j);
        axpy4(va, kvc_high_i16x8_to_f32x4(lo), y + j + 4);
        axpy4(va, kvc_low_i16x8_to_f32x4(hi), y + j + 8);
        axpy4(va, kvc_high_i16x8_to_f32x4(hi), y + j + 12);
    }
    for (; j + 4 <= d; j += 4) {
        v128_t c = wasm_i16x8_extend_low_i8x16(wasm_v128_load32_zero(codes + j));
        axpy4(va, kvc_low_i16x8_to_f32x4(c), y + j);
    }
    if (j < d) {
        float y_tail[4] = {0.0f};
        int8_t codes_tail[4] = {0};
        memcpy(y_tail, y + j, (d - j) * sizeof(float));
        memcpy(codes_tail, codes + j, d - j);
        v128_t c = wasm_i16x8_extend_low_i8x16(wasm_v128_load32_zero(codes_tail));
        axpy4(va, kvc_low_i16x8_to_f32x4(c), y_tail);
        memcpy(y + j, y_tail, (d - j) * sizeof(float));
    }
}
