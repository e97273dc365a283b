#include <string.h>
#include <wasm_simd128.h>

#include "kernels.h"
#include "q4-pack.h"
#include "quantize-codes-wasmsimd.h"
#include "wasmsimd-reduce.h"

float kvc_quantize_row_q4__wasmsimd(size_t d, const float *x, const float *field, uint8_t *packed) {
    /* x and the field padded to whole groups: x = 0 over c = 1 gives t = 0,
     * which moves no maximum and codes as 0. */
    const size_t groups = kvc_q4_groups(d), padded = groups * KVC_Q4_GROUP;
    float xs[KVC_KERNEL_MAX_DIM], cs[KVC_KERNEL_MAX_DIM];
    float group_max[KVC_KERNEL_MAX_DIM / KVC_Q4_GROUP], steps[KVC_KERNEL_MAX_DIM / KVC_Q4_GROUP];
    int8_t codes[KVC_KERNEL_MAX_DIM];
    memcpy(xs, x, d * sizeof(float));
    memcpy(cs, field, d * sizeof(float));
    for (size_t j = d; j < padded; j++) {
        xs[j] = 0.0f;
        cs[j] = 1.0f;
    }
    float row_max = 0.0f;
    for (size_t g = 0; g < groups; g++) {
        v128_t vmax = wasm_f32x4_const_splat(0.0f);
        for (size_t j = g * KVC_Q4_GROUP; j < (g + 1) * KVC_Q4_GROUP; j += 4) {
            const v128_t t = kvc_channel_ratio_f32x4(wasm_v128_load(xs + j), wasm_v128_load(cs + j));
            vmax = wasm_f32x4_pmax(vmax, wasm_f32x4_abs(t));
        }
        group_max[g] = kvc_max_lanes_f32x4(vmax);
        if (row_max < group_max[g]) row_max = group_max[g];
    }
    const float scale = kvc_q4_shifts(d, group_max, row_max, KVC_Q8_SCALE_FLOOR, packed, steps);
    const v128_t code_max = wasm_f32x4_const_splat(KVC_Q4_CODE_MAX);
    for (size_t g = 0; g < groups; g++) {
        const v128_t step = wasm_f32x4_splat(steps[g]);
        const size_t j = g * KVC_Q4_GROUP;
        const v128_t c0 = kvc_codes_i32x4(wasm_v128_load(xs + j), wasm_v128_load(cs + j), step, code_max);
        const v128_t c1 = kvc_codes_i32x4(wasm_v128_load(xs + j + 4), wasm_v128_load(cs + j + 4), step, code_max);
        const v128_t c2 = kvc_codes_i32x4(wasm_v128_load(xs + j + 8), wasm_v128_load(cs + j + 8), step, code_max);
        const v128_t c3 = kvc_codes_i32x4(wasm_v128_load(xs + j + 12), wasm_v128_load(cs + j + 12), step, code_max);
        wasm_v128_store(codes + j, wasm_i8x16_narrow_i16x8(wasm_i16x8_narrow_i32x4(c0, c1),
                                                           wasm_i16x8_narrow_i32x4(c2, c3)));
    }
    uint8_t *code_bytes = packed + kvc_q4_shift_bytes(d);
    size_t block = 0;
    for (; block + KVC_Q4_BLOCK <= d; block += KVC_Q4_BLOCK) {
        const v128_t lo = wasm_v128_and(wasm_v128_load(codes + block), wasm_i8x16_const_splat(0x0F));
        const v128_t hi = wasm_i8x16_shl(wasm_v128_load(codes + block + 16), 4);
        wasm_v128_store(code_bytes + block / 2, wasm_v128_or(lo, hi));
    }
    if (block < d) kvc_q4_pack_block(d, block, codes, code_bytes);
    return scale;
}
