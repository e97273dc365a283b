/* quantize-act-q8-wasmsimd.c -- activations to q8 blocks in SIMD128: the
 * bytes of quantize-act-q8-scalar.c (the maximum is exact in any order, and
 * the codes are the same f32 division, rounding and clamp lane by lane;
 * f32x4.max carries a NaN as the scalar maximum does, and trunc_sat turns a
 * NaN into the scalar kernel's zero code). */
#include <wasm_simd128.h>

#include "weights.h"

static float block_amax(size_t B, const float *x) {
    v128_t amax = wasm_f32x4_const_splat(0.0f);
    for (size_t i = 0; i < B; i += 4) amax = wasm_f32x4_max(amax, wasm_f32x4_abs(wasm_v128_load(x + i)));
    amax = wasm_f32x4_max(amax, wasm_i32x4_shuffle(amax, amax, 2, 3, 0, 1));
    amax = wasm_f32x4_max(amax, wasm_i32x4_shuffle(amax, amax, 1, 0, 3, 2));
    return wasm_f32x4_extract_lane(amax, 0);
}

static v128_t codes_i32x4(const float *x, v128_t d) {
    v128_t r = wasm_f32x4_nearest(wasm_f32x4_div(wasm_v128_load(x), d));
    r = wasm_f32x4_min(r, wasm_f32x4_const_splat(127.0f));
    r = wasm_f32x4_max(r, wasm_f32x4_const_splat(-127.0f));
    return wasm_i32x4_trunc_sat_f32x4(r);
}

static void quantize_q8(size_t B, size_t n, const float *x, uint8_t *xa) {
    int8_t *codes = (int8_t *)xa;
    uint8_t *codes16 = xa + KVC_ACT_Q8_CODES16_AT(n), *scales = xa + KVC_ACT_Q8_SCALES_AT(n);
    uint8_t *sums = xa + KVC_ACT_Q8_SUMS_AT(n, B);
    for (size_t b = 0; b < n / B; b++) {
        const float d = block_amax(B, x + B * b) / 127.0f;
        wasm_v128_store32_lane(scales + 4 * b, wasm_f32x4_splat(d), 0);
        const v128_t vd = wasm_f32x4_splat(d);
        for (size_t i = B * b; i < B * b + B; i += 16) {
            const v128_t low = wasm_i16x8_narrow_i32x4(codes_i32x4(x + i, vd), codes_i32x4(x + i + 4, vd));
            const v128_t high = wasm_i16x8_narrow_i32x4(codes_i32x4(x + i + 8, vd), codes_i32x4(x + i + 12, vd));
            wasm_v128_store(codes + i, wasm_i8x16_narrow_i16x8(low, high));
            wasm_v128_store(codes16 + 2 * i, low);
            wasm_v128_store(codes16 + 2 * i + 16, high);
        }
    }
    for (size_t g = 0; g < n / 16; g++) {
        v128_t sum = wasm_i32x4_extadd_pairwise_i16x8(wasm_i16x8_extadd_pairwise_i8x16(wasm_v128_load(codes + 16 * g)));
        sum = wasm_i32x4_add(sum, wasm_i32x4_shuffle(sum, sum, 2, 3, 0, 1));
        sum = wasm_i32x4_add(sum, wasm_i32x4_shuffle(sum, sum, 1, 0, 3, 2));
        wasm_v128_store16_lane(sums + 2 * g, sum, 0);
    }
}

void kvc_quantize_act_q8_32__wasmsimd(size_t n, const float *x, uint8_t *xa) {
    quantize_q8(32, n, x, xa);
}

void kvc_quantize_act_q8_256__wasmsimd(size_t n, const float *x, uint8_t *xa) {
    quantize_q8(256, n, x, xa);
}
