#include <string.h>
#include <wasm_simd128.h>

#include "kernels.h"
#include "wasmsimd-convert.h"

float kvc_dot_f32_i8__wasmsimd(size_t d, const float *a, const int8_t *codes) {
    v128_t acc0 = wasm_f32x4_const_splat(0.0f);
    v128_t acc1 = acc0, acc2 = acc0, acc3 = acc0;
    size_t j = 0;
    for (; j + 16 <= d; j += 16) {
        v128_t c = wasm_v128_load(codes + j);
        v128_t lo = wasm_i16x8_extend_low_i8x16(c);
        v128_t hi = wasm_i16x8_extend_high_i8x16(c);
        acc0 = wasm_f32x4_add(acc0, wasm_f32x4_mul(wasm_v128_load(a + j), kvc_low_i16x8_to_f32x4(lo)));
        acc1 = wasm_f32x4_add(acc1, wasm_f32x4_mul(wasm_v128_load(a + j + 4), kvc_high_i16x8_to_f32x4(lo)));
        acc2 = wasm_f32x4_add(acc2, wasm_f32x4_mul(wasm_v128_load(a + j + 8), kvc_low_i16x8_to_f32x4(hi)));
        acc3 = wasm_f32x4_add(acc3, wasm_f32x4_mul(wasm_v128_load(a + j + 12), kvc_high_i16x8_to_f32x4(hi)));
    }
    for (; j + 4 <= d; j += 4) {
        v128_t c = wasm_i16x8_extend_low_i8x16(wasm_v128_load32_zero(codes + j));
        acc0 = wasm_f32x4_add(acc0, wasm_f32x4_mul(wasm_v128_load(a + j), kvc_low_i16x8_to_f32x4(c)));
    }
    if (j < d) {
        float a_tail[4] = {0.0f};
        int8_t codes_tail[4] = {0};
        memcpy(a_tail, a + j, (d - j) * sizeof(float));
        memcpy(codes_tail, codes + j, d - j);
        v128_t c = wasm_i16x8_extend_low_i8x16(wasm_v128_load32_zero(codes_tail));
        acc1 = wasm_f32x4_add(acc1, wasm_f32x4_mul(wasm_v128_load(a_tail), kvc_low_i16x8_to_f32x4(c)));
    }
    v128_t acc = wasm_f32x4_add(wasm_f32x4_add(acc0, acc1), wasm_f32x4_add(acc2, acc3));
    return (wasm_f32x4_extract_lane(acc, 0) + wasm_f32x4_extract_lane(acc, 1)) +
           (wasm_f32x4_extract_lane(acc, 2) + wasm_f32x4_extract_lane(acc, 3));
}
