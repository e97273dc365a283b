#include <string.h>
#include <wasm_simd128.h>

#include "kernels.h"
#include "wasmsimd-convert.h"

void kvc_dequantize_row__wasmsimd(size_t d, const int8_t *codes, float scale, const float *field,
                                  float *x) {
    const v128_t vscale = wasm_f32x4_splat(scale);
    size_t j = 0;
    for (; j + 4 <= d; j += 4) {
        v128_t c = wasm_i16x8_extend_low_i8x16(wasm_v128_load32_zero(codes + j));
        v128_t r = kvc_low_i16x8_to_f32x4(c);
        wasm_v128_store(x + j, wasm_f32x4_mul(wasm_f32x4_mul(r, vscale), wasm_v128_load(field + j)));
    }
    if (j < d) {
        int8_t codes_tail[4] = {0};
        float field_tail[4] = {0.0f};
        memcpy(codes_tail, codes + j, d - j);
        memcpy(field_tail, field + j, (d - j) * sizeof(float));
        v128_t c = wasm_i16x8_extend_low_i8x16(wasm_v128_load32_zero(codes_tail));
        v128_t r = kvc_low_i16x8_to_f32x4(c);
        wasm_v128_store(field_tail, wasm_f32x4_mul(wasm_f32x4_mul(r, vscale), wasm_v128_load(field_tail)));
        memcpy(x + j, field_tail, (d - j) * sizeof(float));
    }
}
