/* quantize-act-q8-wasmsimd.c -- activations to q8x32 and q8x256 rows in
 * SIMD128: the bytes of quantize-act-q8-scalar.c.  The maxima are exact in
 * any order, the codes the same f32 product and rounding lane by lane, and
 * a block's d_b and s_b the scalar code's.  Written for what V8 makes of it
 * on x86: f32x4.min and max (NaN and -0 exact) take it several
 * instructions, f32x4.pmin and pmax one, so the maxima take pmax and pmin,
 * which pass a NaN over (a NaN lane is noted apart and makes the block's
 * maximum NaN, as the scalar kernel's), and the codes are clamped as
 * integers: trunc_sat (a NaN to 0, as the scalar kernel's code_of) and the
 * saturating narrows keep every value's side of +-127. */
#include <wasm_simd128.h>

#include "weights-scalar.h"

/* A NaN for a block with a NaN lane (any NaN: what is stored is canonical),
 * else the lane 0 of the block's reduced maximum. */
static float unless_nan(v128_t nan, v128_t reduced) {
    return wasm_v128_any_true(nan) ? NAN : wasm_f32x4_extract_lane(reduced, 0);
}

static float block_amax(size_t B, const float *x) {
    v128_t amax = wasm_f32x4_const_splat(0.0f), nan = wasm_i32x4_const_splat(0);
    for (size_t i = 0; i < B; i += 4) {
        const v128_t v = wasm_v128_load(x + i);
        amax = wasm_f32x4_pmax(amax, wasm_f32x4_abs(v));
        nan = wasm_v128_or(nan, wasm_f32x4_ne(v, v));
    }
    amax = wasm_f32x4_pmax(amax, wasm_i32x4_shuffle(amax, amax, 2, 3, 0, 1));
    amax = wasm_f32x4_pmax(amax, wasm_i32x4_shuffle(amax, amax, 1, 0, 3, 2));
    return unless_nan(nan, amax);
}

/* max x and min x, both from 0 (pmax(max, x) is the scalar kernel's
 * x > max ? x : max, pmin its x < min ? x : min), then its choice. */
static float block_signed_max(size_t B, const float *x) {
    v128_t max = wasm_f32x4_const_splat(0.0f), min = max, nan = wasm_i32x4_const_splat(0);
    for (size_t i = 0; i < B; i += 4) {
        const v128_t v = wasm_v128_load(x + i);
        max = wasm_f32x4_pmax(max, v);
        min = wasm_f32x4_pmin(min, v);
        nan = wasm_v128_or(nan, wasm_f32x4_ne(v, v));
    }
    max = wasm_f32x4_pmax(max, wasm_i32x4_shuffle(max, max, 2, 3, 0, 1));
    max = wasm_f32x4_pmax(max, wasm_i32x4_shuffle(max, max, 1, 0, 3, 2));
    min = wasm_f32x4_pmin(min, wasm_i32x4_shuffle(min, min, 2, 3, 0, 1));
    min = wasm_f32x4_pmin(min, wasm_i32x4_shuffle(min, min, 1, 0, 3, 2));
    const float hi = unless_nan(nan, max), lo = wasm_f32x4_extract_lane(min, 0);
    return -lo > hi ? lo : hi;
}

/* roundf lane-wise (SIMD128 has no such rounding): the truncation of
 * v + copysign(0.5 - 2^-25, v), the same as roundf for every f32 v (checked
 * over all of them: the sum never rounds up to the next integer from below
 * a half, and reaches it from a half or more); a NaN stays NaN. */
static inline v128_t round_half_away(v128_t v) {
    const v128_t half = wasm_v128_or(wasm_f32x4_const_splat(0x1.fffffep-2f),
                                     wasm_v128_and(v, wasm_i32x4_const_splat(INT32_MIN)));
    return wasm_f32x4_trunc(wasm_f32x4_add(v, half));
}

/* Four codes as i32: x * scale rounded half away from zero (q8x32) or to
 * even (q8x256), truncated with saturation (a NaN to 0). */
static inline v128_t codes_i32x4(const float *x, v128_t scale, int half_away) {
    const v128_t v = wasm_f32x4_mul(wasm_v128_load(x), scale);
    return wasm_i32x4_trunc_sat_f32x4(half_away ? round_half_away(v) : wasm_f32x4_nearest(v));
}

/* Eight codes as i16, clamped to +-127 (the narrow saturates what is past
 * the i16 range to its end, beyond 127 all the same). */
static inline v128_t codes_i16x8(const float *x, v128_t scale, int half_away) {
    const v128_t codes = wasm_i16x8_narrow_i32x4(codes_i32x4(x, scale, half_away), codes_i32x4(x + 4, scale, half_away));
    return wasm_i16x8_max(wasm_i16x8_min(codes, wasm_i16x8_const_splat(127)), wasm_i16x8_const_splat(-127));
}

/* Block b of B values coded with `scale`: its codes, codes16 and sums of
 * 16 stored; returns the sum of its codes. */
static int32_t put_block(size_t B, size_t n, size_t b, const float *x, float scale, int half_away, uint8_t *xa) {
    const v128_t vscale = wasm_f32x4_splat(scale);
    v128_t block_sum = wasm_i32x4_const_splat(0);
    for (size_t i = B * b; i < B * b + B; i += 16) {
        const v128_t low = codes_i16x8(x + i, vscale, half_away), high = codes_i16x8(x + i + 8, vscale, half_away);
        wasm_v128_store(xa + i, wasm_i8x16_narrow_i16x8(low, high));
        wasm_v128_store(xa + KVC_ACT_Q8_CODES16_AT(n) + 2 * i, low);
        wasm_v128_store(xa + KVC_ACT_Q8_CODES16_AT(n) + 2 * i + 16, high);
        /* the sum of 16 in every lane (pairs of codes within i16) */
        v128_t sum = wasm_i32x4_extadd_pairwise_i16x8(wasm_i16x8_add(low, high));
        sum = wasm_i32x4_add(sum, wasm_i32x4_shuffle(sum, sum, 2, 3, 0, 1));
        sum = wasm_i32x4_add(sum, wasm_i32x4_shuffle(sum, sum, 1, 0, 3, 2));
        wasm_v128_store16_lane(xa + KVC_ACT_Q8_SUMS_AT(n, B) + 2 * (i / 16), sum, 0);
        block_sum = wasm_i32x4_add(block_sum, sum);
    }
    return wasm_i32x4_extract_lane(block_sum, 0);
}

void kvc_quantize_act_q8_32__wasmsimd(size_t n, const float *x, uint8_t *xa) {
    for (size_t b = 0; b < n / 32; b++) {
        const float d = block_amax(32, x + 32 * b) / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        kvc_put_act_q8_32_block(xa, n, b, d, put_block(32, n, b, x, id, 1, xa));
    }
}

void kvc_quantize_act_q8_256__wasmsimd(size_t n, const float *x, uint8_t *xa) {
    for (size_t b = 0; b < n / 256; b++) {
        const float m = block_signed_max(256, x + 256 * b);
        const float iscale = m != 0.0f ? -127.0f / m : 0.0f;
        put_block(256, n, b, x, iscale, 0, xa);
        kvc_put_act_q8_256_block(xa, n, b, m != 0.0f ? 1.0f / iscale : 0.0f);
    }
}
