#include <string.h>
#include <wasm_simd128.h>

#include "kernels.h"
#include "q8-rows.h"
#include "wasmsimd-convert.h"

void kvc_widen_q8__wasmsimd(size_t n, size_t d, const uint8_t *qrows, float *rows, float *scales) {
    for (size_t p = 0; p < n; p++) {
        const uint8_t *qrow = qrows + p * kvc_q8_row_bytes(d);
        const int8_t *codes = kvc_q8_row_codes(qrow);
        float *x = rows + p * d;
        scales[p] = kvc_q8_row_scale(qrow);
        size_t j = 0;
        for (; j + 16 <= d; j += 16) {
            const v128_t c = wasm_v128_load(codes + j);
            const v128_t lo = wasm_i16x8_extend_low_i8x16(c);
            const v128_t hi = wasm_i16x8_extend_high_i8x16(c);
            wasm_v128_store(x + j, kvc_low_i16x8_to_f32x4(lo));
            wasm_v128_store(x + j + 4, kvc_high_i16x8_to_f32x4(lo));
            wasm_v128_store(x + j + 8, kvc_low_i16x8_to_f32x4(hi));
            wasm_v128_store(x + j + 12, kvc_high_i16x8_to_f32x4(hi));
        }
        if (j < d) {
            /* 1..15 left, through a padded vector (a scalar loop here would be
             * vectorised by LLVM 14 into lane-by-lane conversions). */
            int8_t codes_tail[16] = {0};
            float x_tail[16];
            memcpy(codes_tail, codes + j, d - j);
            const v128_t c = wasm_v128_load(codes_tail);
            const v128_t lo = wasm_i16x8_extend_low_i8x16(c);
            const v128_t hi = wasm_i16x8_extend_high_i8x16(c);
            wasm_v128_store(x_tail, kvc_low_i16x8_to_f32x4(lo));
            wasm_v128_store(x_tail + 4, kvc_high_i16x8_to_f32x4(lo));
            wasm_v128_store(x_tail + 8, kvc_low_i16x8_to_f32x4(hi));
            wasm_v128_store(x_tail + 12, kvc_high_i16x8_to_f32x4(hi));
            memcpy(x + j, x_tail, (d - j) * sizeof(float));
        }
    }
}
