/* dot-codes-wasmsimd.h -- integer dots of weight codes with activation
 * codes in SIMD128: the codes widened to i16 once (times their sub-block's
 * scale where there is one), then i32x4.dot_i16x8_s against the
 * activations' i16 copy, eight products per instruction, exact in i32.
 * dot-codes-wasmrelaxed.h defines the same with the relaxed i8 x i7 dot
 * product; every dot is an i32x4 whose lanes sum to the exact dot, however
 * the set splits it. */
#ifndef KVC_DOT_CODES_H
#define KVC_DOT_CODES_H

#include <wasm_simd128.h>

/* 32 weight codes ready for their dots: i16 lanes, code i in lane i % 8 of
 * v[i / 8]. */
typedef struct kvc_codes32 {
    v128_t v[4];
} kvc_codes32;

typedef struct kvc_codes16 {
    v128_t v[2];
} kvc_codes16;

/* Codes 0..63 (q0: codes 0..15, q1: 16..31). */
static inline kvc_codes32 kvc_codes32_of(v128_t q0, v128_t q1) {
    kvc_codes32 c = {{wasm_u16x8_extend_low_u8x16(q0), wasm_u16x8_extend_high_u8x16(q0),
                      wasm_u16x8_extend_low_u8x16(q1), wasm_u16x8_extend_high_u8x16(q1)}};
    return c;
}

/* Signed codes, -128..127 (q0: codes 0..15, q1: 16..31): this set only,
 * the relaxed dot takes no signed weight codes (Q8_0, IQ4_NL and IQ4_XS run
 * this set's kernels in the relaxed set). */
static inline kvc_codes32 kvc_codes32_of_i8(v128_t q0, v128_t q1) {
    kvc_codes32 c = {{wasm_i16x8_extend_low_i8x16(q0), wasm_i16x8_extend_high_i8x16(q0),
                      wasm_i16x8_extend_low_i8x16(q1), wasm_i16x8_extend_high_i8x16(q1)}};
    return c;
}

/* The same times the scale in every i16 lane of scale (|scale * code| <
 * 2^15: IQ4_XS's |ls - 32| <= 32 by |code| <= 127). */
static inline kvc_codes32 kvc_codes32_of_i8_scaled(v128_t q0, v128_t q1, v128_t scale) {
    kvc_codes32 c = kvc_codes32_of_i8(q0, q1);
    for (int i = 0; i < 4; i++) c.v[i] = wasm_i16x8_mul(c.v[i], scale);
    return c;
}

/* Codes 0..63 times the scale in every i16 lane of scale (|scale * code| <
 * 2^15: |scale| <= 128 by codes <= 63). */
static inline kvc_codes32 kvc_codes32_scaled(v128_t q0, v128_t q1, v128_t scale) {
    kvc_codes32 c = kvc_codes32_of(q0, q1);
    for (int i = 0; i < 4; i++) c.v[i] = wasm_i16x8_mul(c.v[i], scale);
    return c;
}

static inline kvc_codes16 kvc_codes16_scaled(v128_t q, v128_t scale) {
    kvc_codes16 c = {{wasm_i16x8_mul(wasm_u16x8_extend_low_u8x16(q), scale),
                      wasm_i16x8_mul(wasm_u16x8_extend_high_u8x16(q), scale)}};
    return c;
}

/* Lanes summing to sum_i code_i * a_i over 32 activation codes (a8 as i8,
 * a16 the same as i16: this set reads a16). */
static inline v128_t kvc_dot32(const kvc_codes32 *c, const int8_t *a8, const int16_t *a16) {
    (void)a8;
    return wasm_i32x4_add(wasm_i32x4_add(wasm_i32x4_dot_i16x8(c->v[0], wasm_v128_load(a16)),
                                         wasm_i32x4_dot_i16x8(c->v[1], wasm_v128_load(a16 + 8))),
                          wasm_i32x4_add(wasm_i32x4_dot_i16x8(c->v[2], wasm_v128_load(a16 + 16)),
                                         wasm_i32x4_dot_i16x8(c->v[3], wasm_v128_load(a16 + 24))));
}

static inline v128_t kvc_dot16(const kvc_codes16 *c, const int8_t *a8, const int16_t *a16) {
    (void)a8;
    return wasm_i32x4_add(wasm_i32x4_dot_i16x8(c->v[0], wasm_v128_load(a16)),
                          wasm_i32x4_dot_i16x8(c->v[1], wasm_v128_load(a16 + 8)));
}

/* How a decode loop takes a group's four blocks: one a loop turn.  Unrolled,
 * V8 (11 and 12) hoists all four blocks' loads of the activations' i16
 * codes and spills them: one a turn was measured 20% faster for Q4_0 (and
 * never slower) on this set. */
#define KVC_DECODE_GROUP_LOOP _Pragma("clang loop unroll(disable)")

#endif /* KVC_DOT_CODES_H */
