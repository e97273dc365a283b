/* quantize-codes-wasmsimd.h -- the codes of a quantized row in SIMD128,
 * shared by the q8 and q4 quantizers: the scalar definition
 * (quantize-codes-scalar.h), lane for lane. */
#ifndef KVC_QUANTIZE_CODES_WASMSIMD_H
#define KVC_QUANTIZE_CODES_WASMSIMD_H

#include <string.h>
#include <wasm_simd128.h>

#include "kernels.h"
#include "wasmsimd-reduce.h"

/* x / c lane-wise, saturated to +-KVC_Q8_RATIO_MAX exactly as the scalar kernel. */
static inline v128_t kvc_channel_ratio_f32x4(v128_t x, v128_t c) {
    v128_t t = wasm_f32x4_div(x, c);
    t = wasm_f32x4_pmin(t, wasm_f32x4_const_splat(KVC_Q8_RATIO_MAX));
    return wasm_f32x4_pmax(t, wasm_f32x4_const_splat(-KVC_Q8_RATIO_MAX));
}

/* clamp(round_half_even(t / scale), -code_max, code_max) as i32 lanes. */
static inline v128_t kvc_codes_i32x4(v128_t x, v128_t c, v128_t scale, v128_t code_max) {
    v128_t r = wasm_f32x4_nearest(wasm_f32x4_div(kvc_channel_ratio_f32x4(x, c), scale));
    r = wasm_f32x4_pmin(r, code_max);
    r = wasm_f32x4_pmax(r, wasm_f32x4_neg(code_max));
    return wasm_i32x4_trunc_sat_f32x4(r);
}

static inline float kvc_quantize_codes_wasmsimd(size_t d, const float *x, const float *field,
                                                float code_max, int8_t *codes) {
    /* Zero padding (x = 0 over c = 1) gives t = 0: it moves no maximum. */
    float x_tail[4] = {0.0f}, field_tail[4] = {1.0f, 1.0f, 1.0f, 1.0f};
    const size_t d4 = d & ~(size_t)3;
    memcpy(x_tail, x + d4, (d - d4) * sizeof(float));
    memcpy(field_tail, field + d4, (d - d4) * sizeof(float));

    v128_t vmax = wasm_f32x4_const_splat(0.0f);
    for (size_t j = 0; j < d4; j += 4) {
        v128_t t = wasm_f32x4_abs(kvc_channel_ratio_f32x4(wasm_v128_load(x + j), wasm_v128_load(field + j)));
        vmax = wasm_f32x4_pmax(vmax, t);
    }
    vmax = wasm_f32x4_pmax(vmax, wasm_f32x4_abs(kvc_channel_ratio_f32x4(wasm_v128_load(x_tail),
                                                                        wasm_v128_load(field_tail))));
    float scale = kvc_max_lanes_f32x4(vmax) / code_max;
    if (scale < KVC_Q8_SCALE_FLOOR) scale = KVC_Q8_SCALE_FLOOR;

    const v128_t vscale = wasm_f32x4_splat(scale), vmax_code = wasm_f32x4_splat(code_max);
    size_t j = 0;
    for (; j + 16 <= d; j += 16) {
        v128_t c0 = kvc_codes_i32x4(wasm_v128_load(x + j), wasm_v128_load(field + j), vscale, vmax_code);
        v128_t c1 = kvc_codes_i32x4(wasm_v128_load(x + j + 4), wasm_v128_load(field + j + 4), vscale, vmax_code);
        v128_t c2 = kvc_codes_i32x4(wasm_v128_load(x + j + 8), wasm_v128_load(field + j + 8), vscale, vmax_code);
        v128_t c3 = kvc_codes_i32x4(wasm_v128_load(x + j + 12), wasm_v128_load(field + j + 12), vscale, vmax_code);
        v128_t c16 = wasm_i8x16_narrow_i16x8(wasm_i16x8_narrow_i32x4(c0, c1),
                                             wasm_i16x8_narrow_i32x4(c2, c3));
        wasm_v128_store(codes + j, c16);
    }
    for (; j + 4 <= d; j += 4) {
        v128_t c0 = kvc_codes_i32x4(wasm_v128_load(x + j), wasm_v128_load(field + j), vscale, vmax_code);
        v128_t c16 = wasm_i8x16_narrow_i16x8(wasm_i16x8_narrow_i32x4(c0, c0), c0);
        wasm_v128_store32_lane(codes + j, c16, 0);
    }
    if (j < d) {
        v128_t c0 = kvc_codes_i32x4(wasm_v128_load(x_tail), wasm_v128_load(field_tail), vscale, vmax_code);
        int8_t codes_tail[16];
        wasm_v128_store(codes_tail, wasm_i8x16_narrow_i16x8(wasm_i16x8_narrow_i32x4(c0, c0), c0));
        memcpy(codes + j, codes_tail, d - j);
    }
    return scale;
}

#endif /* KVC_QUANTIZE_CODES_WASMSIMD_H */
