/*
 * gemm-q32-wasmsimd.h -- the gemm of a type with blocks of 32 (Q8_0, Q4_0,
 * Q4_1, Q5_0, Q5_1, IQ4_NL), in SIMD128 or relaxed SIMD: a type's file defines
 *   KVC_Q32_TYPE              its name as kernel files spell it (q4_0), by
 *                             which weights.h's layout gives the bytes per
 *                             block (an f16 d at byte 0), the code offset
 *                             (value = (q - offset) * d) and whether an f16
 *                             min m at byte 2 makes value = q * d + m (its
 *                             mins meet the activations' s_b)
 *   KVC_Q32_CODES(b)          block b's 32 codes as a kvc_codes32 (the 4-
 *                             and 5-bit types: q32_nibble_codes and
 *                             q32_fifth_bit_codes below)
 * and includes this file, which defines kvc_gemm_<type>__wasmsimd -- or
 * __wasmrelaxed, when the relaxed set's file has included
 * dot-codes-wasmrelaxed.h and defined KVC_Q32_ISA as wasmrelaxed first.
 * Each block's value is the scalar kernel's, lane for lane (weights.c):
 *   decode (T == 1): a row's blocks four at a time, lane k holding block
 *     4 i + k, so the four lanes are the accumulators b mod 4;
 *   prefill (T > 1): one block of a row against four tokens, lane i
 *     holding token i, in four accumulators by block index.
 */
#ifndef KVC_Q32_ISA
#define KVC_Q32_ISA wasmsimd
#include "dot-codes-wasmsimd.h"
#endif
#include "weights-wasmsimd.h"

#define KVC_Q32_CAT_(a, b, c, d) a##b##c##d
#define KVC_Q32_CAT(a, b, c, d) KVC_Q32_CAT_(a, b, c, d)
#define KVC_Q32_NAME KVC_Q32_CAT(kvc_gemm_, KVC_Q32_TYPE, __, KVC_Q32_ISA)
#define KVC_Q32_BYTES KVC_Q32_CAT(KVC_BLOCK_BYTES_, KVC_Q32_TYPE, , )
#define KVC_Q32_OFFSET KVC_Q32_CAT(KVC_CODE_OFFSET_, KVC_Q32_TYPE, , )
#define KVC_Q32_MIN KVC_Q32_CAT(KVC_HAS_MIN_, KVC_Q32_TYPE, , )

/* ggml's 4-bit packing of 32 codes in the 16 bytes at qs: code i < 16 in
 * the low nibble of byte i, code 16 + i in its high nibble. */
static inline kvc_codes32 q32_nibble_codes(const uint8_t *qs) {
    v128_t q0, q1;
    kvc_nibbles_i8x16(wasm_v128_load(qs), &q0, &q1);
    return kvc_codes32_of(q0, q1);
}

/* The same with bit i of the u32 at qh as bit 4 of code i (Q5_0, Q5_1). */
static inline kvc_codes32 q32_fifth_bit_codes(const uint8_t *qs, const uint8_t *qh) {
    v128_t q0, q1;
    kvc_nibbles_i8x16(wasm_v128_load(qs), &q0, &q1);
    kvc_fifth_bits_i8x16(qh, &q0, &q1);
    return kvc_codes32_of(q0, q1);
}

/* Blocks' values from their exact dots S, activation code sums A, weight
 * scales d (and mins m), activation scales da (and value sums s), lane by
 * lane.  What a type does not use is left dead, and its loads with it: the
 * code sums where there is no offset, the mins and value sums where there
 * is no min. */
static inline v128_t q32_values(v128_t S, v128_t A, v128_t d, v128_t m, v128_t da, v128_t s) {
#if KVC_Q32_OFFSET
    S = wasm_i32x4_sub(S, wasm_i32x4_mul(A, wasm_i32x4_const_splat(KVC_Q32_OFFSET)));
#else
    (void)A;
#endif
    v128_t v = wasm_f32x4_mul(wasm_f32x4_mul(d, da), wasm_f32x4_convert_i32x4(S));
#if KVC_Q32_MIN
    v = wasm_f32x4_add(v, wasm_f32x4_mul(m, s));
#else
    (void)m, (void)s;
#endif
    return v;
}

/* Block b's exact dot with its 32 activation codes, in lanes. */
static inline v128_t q32_dot(const uint8_t *block, const kvc_act_q8_row *a, size_t b) {
    const kvc_codes32 codes = KVC_Q32_CODES(block);
    return kvc_dot32(&codes, a->codes + 32 * b, a->codes16 + 32 * b);
}

static v128_t q32_values4(const uint8_t *block, const kvc_act_q8_row *a, size_t b) {
    v128_t dots[4];
    KVC_DECODE_GROUP_LOOP
    for (size_t k = 0; k < 4; k++) dots[k] = q32_dot(block + k * KVC_Q32_BYTES, a, b + k);
    const v128_t A = wasm_i32x4_extadd_pairwise_i16x8(wasm_v128_load(a->sums + 4 * b));
    return q32_values(kvc_horizontal_sums4_i32(dots), A, kvc_f16_gather4(block, KVC_Q32_BYTES),
                      kvc_f16_gather4(block + 2, KVC_Q32_BYTES), wasm_v128_load(a->scales + 4 * b),
                      wasm_v128_load(a->value_sums + 4 * b));
}

static float q32_value1(const uint8_t *block, const kvc_act_q8_row *a, size_t b) {
    const v128_t A = wasm_i32x4_extadd_pairwise_i16x8(wasm_v128_load32_splat(a->sums + 4 * b));
    const v128_t v = q32_values(kvc_sum_i32x4(q32_dot(block, a, b)), A, kvc_f16_splat(block),
                                kvc_f16_splat(block + 2), wasm_v128_load32_splat(a->scales + 4 * b),
                                wasm_v128_load32_splat(a->value_sums + 4 * b));
    return wasm_f32x4_extract_lane(v, 0);
}

static v128_t q32_tile_value(const uint8_t *block, const kvc_act_q8_row a[4], const kvc_token_tile *tile,
                             size_t n, size_t b) {
    const kvc_codes32 codes = KVC_Q32_CODES(block);
    v128_t dots[4];
    for (size_t i = 0; i < 4; i++) dots[i] = kvc_dot32(&codes, a[i].codes + 32 * b, a[i].codes16 + 32 * b);
    const v128_t A = wasm_i32x4_extadd_pairwise_i16x8(kvc_gather32(tile->row, KVC_ACT_Q8_SUMS_AT(n, 32) + 4 * b));
    return q32_values(kvc_horizontal_sums4_i32(dots), A, kvc_f16_splat(block), kvc_f16_splat(block + 2),
                      kvc_gather32(tile->row, KVC_ACT_Q8_SCALES_AT(n) + 4 * b),
                      kvc_gather32(tile->row, KVC_ACT_Q8_VALUE_SUMS_AT(n) + 4 * b));
}

void KVC_Q32_NAME(size_t n, size_t rows, size_t T, const uint8_t *w, size_t row_bytes,
                  const uint8_t *xa, size_t xa_stride, float *y, size_t y_stride) {
    kvc_gemm_blocks(q32_values4, q32_value1, q32_tile_value, 32, KVC_Q32_BYTES, n, rows, T, w, row_bytes,
                    xa, xa_stride, y, y_stride);
}
