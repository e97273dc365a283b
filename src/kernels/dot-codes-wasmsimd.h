/* dot-codes-wasmsimd.h -- integer dots of weight codes 0..63 (unsigned,
 * before their offset) with i8 activation codes -127..127, in SIMD128: the
 * products summed exactly in i16 lanes (four per lane at most: 4 * 63 * 127
 * < 2^15), then widened.  dot-codes-wasmrelaxed.h defines the same three
 * with the relaxed i8 x i7 dot product; every result is an i32x4 whose
 * lanes sum to the exact dot, however the set splits it. */
#ifndef KVC_DOT_CODES_H
#define KVC_DOT_CODES_H

#include <wasm_simd128.h>

/* i16 lanes summing to sum_i q0[i] a0[i] + q1[i] a1[i]. */
static inline v128_t kvc_dot32_i16(v128_t q0, v128_t q1, v128_t a0, v128_t a1) {
    return wasm_i16x8_add(wasm_i16x8_add(wasm_i16x8_extmul_low_i8x16(q0, a0), wasm_i16x8_extmul_high_i8x16(q0, a0)),
                          wasm_i16x8_add(wasm_i16x8_extmul_low_i8x16(q1, a1), wasm_i16x8_extmul_high_i8x16(q1, a1)));
}

/* Lanes summing to sum_i q0[i] a0[i] + q1[i] a1[i] (32 codes). */
static inline v128_t kvc_dot32_codes(v128_t q0, v128_t q1, v128_t a0, v128_t a1) {
    return wasm_i32x4_extadd_pairwise_i16x8(kvc_dot32_i16(q0, q1, a0, a1));
}

/* The same times sc (|sc| <= 128). */
static inline v128_t kvc_dot32_codes_scaled(v128_t q0, v128_t q1, v128_t a0, v128_t a1, int32_t sc) {
    return wasm_i32x4_dot_i16x8(kvc_dot32_i16(q0, q1, a0, a1), wasm_i16x8_splat((int16_t)sc));
}

/* Lanes summing to sc * sum_i q[i] a[i] (16 codes, |sc| <= 128). */
static inline v128_t kvc_dot16_codes_scaled(v128_t q, v128_t a, int32_t sc) {
    const v128_t sums = wasm_i16x8_add(wasm_i16x8_extmul_low_i8x16(q, a), wasm_i16x8_extmul_high_i8x16(q, a));
    return wasm_i32x4_dot_i16x8(sums, wasm_i16x8_splat((int16_t)sc));
}

#endif /* KVC_DOT_CODES_H */
