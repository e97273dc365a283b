/* dot-codes-wasmrelaxed.h -- dot-codes-wasmsimd.h's dots with the relaxed
 * i8 x i7 dot product, i16x8.relaxed_dot_i8x16_i7x16_s: the activation
 * codes as the first (i8) operand, the weight codes as the second.  With
 * the second operand in 0..127 the instruction is exact and the same on
 * every engine; fed anything else it is not, so only codes 0..63 reach it.
 * Each i16 lane holds two products (|pair| <= 2 * 127 * 63), two such lanes
 * are added (<= 32004 < 2^15) and i32x4.dot_i16x8_s widens them, times the
 * sub-block's scale. */
#ifndef KVC_DOT_CODES_H
#define KVC_DOT_CODES_H

#include <wasm_simd128.h>

/* 32 weight codes 0..63 (q0: codes 0..15, q1: 16..31) and their scale as
 * i16 lanes. */
typedef struct kvc_codes32 {
    v128_t q0, q1, scale;
} kvc_codes32;

typedef struct kvc_codes16 {
    v128_t q, scale;
} kvc_codes16;

/* scale: the sub-block's scale in every i16 lane. */
static inline kvc_codes32 kvc_codes32_scaled(v128_t q0, v128_t q1, v128_t scale) {
    kvc_codes32 c = {q0, q1, scale};
    return c;
}

static inline kvc_codes32 kvc_codes32_of(v128_t q0, v128_t q1) {
    return kvc_codes32_scaled(q0, q1, wasm_i16x8_const_splat(1));
}

static inline kvc_codes16 kvc_codes16_scaled(v128_t q, v128_t scale) {
    kvc_codes16 c = {q, scale};
    return c;
}

/* Lanes summing to sc * sum_i code_i * a_i over 32 activation codes (a8 as
 * i8, a16 the same as i16: this set reads a8). */
static inline v128_t kvc_dot32(const kvc_codes32 *c, const int8_t *a8, const int16_t *a16) {
    (void)a16;
    const v128_t pairs = wasm_i16x8_add(wasm_i16x8_relaxed_dot_i8x16_i7x16(wasm_v128_load(a8), c->q0),
                                        wasm_i16x8_relaxed_dot_i8x16_i7x16(wasm_v128_load(a8 + 16), c->q1));
    return wasm_i32x4_dot_i16x8(pairs, c->scale);
}

static inline v128_t kvc_dot16(const kvc_codes16 *c, const int8_t *a8, const int16_t *a16) {
    (void)a16;
    return wasm_i32x4_dot_i16x8(wasm_i16x8_relaxed_dot_i8x16_i7x16(wasm_v128_load(a8), c->q), c->scale);
}

/* How a decode loop takes a group's four blocks: unrolled.  The i8 codes
 * this set reads leave V8 the registers to hold them; unrolled was measured
 * 20% faster for Q4_0 here (and no slower for the k-quants). */
#define KVC_DECODE_GROUP_LOOP _Pragma("clang loop unroll(full)")

#endif /* KVC_DOT_CODES_H */
