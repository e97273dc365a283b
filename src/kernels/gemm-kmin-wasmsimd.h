/*
 * gemm-kmin-wasmsimd.h -- the gemm of a k-quant with scales and mins (Q4_K,
 * Q5_K), in SIMD128 or relaxed SIMD: a type's file defines
 *   KVC_KMIN_NAME             the function
 *   KVC_KMIN_BYTES            bytes per super-block (f16 d, f16 dmin, 12
 *                             bytes of scales and mins, then codes)
 *   KVC_KMIN_CODES(b, k, q)   the 64 codes k of super-block b (sub-blocks
 *                             2 k and 2 k + 1) as q[0..3], 16 each, 0..31
 * and includes this file, after one of the dot-codes headers.  Each
 * super-block's value is the scalar kernel's, lane for lane (weights.c):
 * decode takes a row's super-blocks four at a time, lane k holding
 * super-block 4 i + k; prefill one super-block against four tokens, in four
 * accumulators by super-block index.
 */
#include "weights-wasmsimd.h"

/* Lanes summing to M = sum_j m_j A_j: the mins (bytes 8..15 of
 * scales_mins) as i16, each twice, against the 16 sums of 16. */
static inline v128_t kmin_min_sums(v128_t scales_mins, const uint8_t *sums) {
    /* widened, then each i16 twice: unpacks, one instruction each */
    const v128_t mins = wasm_u16x8_extend_high_u8x16(scales_mins);
    const v128_t m_low = wasm_i16x8_shuffle(mins, mins, 0, 8, 1, 9, 2, 10, 3, 11);
    const v128_t m_high = wasm_i16x8_shuffle(mins, mins, 4, 12, 5, 13, 6, 14, 7, 15);
    return wasm_i32x4_add(wasm_i32x4_dot_i16x8(m_low, wasm_v128_load(sums)),
                          wasm_i32x4_dot_i16x8(m_high, wasm_v128_load(sums + 16)));
}

/* S[i] = lanes summing to sum_j sc_j dot_j of one super-block against
 * block b of activation rows a[i], i < count (1, or a tile's 4): each 64
 * codes unpacked and scaled once for every row, one chunk per loop turn
 * (unrolled, the engine would load every chunk's activations at once and
 * spill them). */
static inline void kmin_dots(const uint8_t *block, v128_t scales_mins, const kvc_act_q8_row *a,
                             size_t count, size_t b, v128_t *S) {
    v128_t scales = wasm_u16x8_extend_low_u8x16(scales_mins); /* sub-blocks 2 k, 2 k + 1 in lanes 0, 1 */
    for (size_t i = 0; i < count; i++) S[i] = wasm_i32x4_const_splat(0);
#pragma clang loop unroll(disable)
    for (size_t k = 0; k < 4; k++) {
        v128_t q[4];
        KVC_KMIN_CODES(block, k, q);
        const kvc_codes32 even = kvc_codes32_scaled(q[0], q[1], kvc_i16_splat_lane0(scales));
        const kvc_codes32 odd = kvc_codes32_scaled(q[2], q[3], kvc_i16_splat_lane1(scales));
        scales = kvc_i16_down2(scales);
        for (size_t i = 0; i < count; i++) {
            const size_t at = 256 * b + 64 * k;
            S[i] = wasm_i32x4_add(S[i], wasm_i32x4_add(kvc_dot32(&even, a[i].codes + at, a[i].codes16 + at),
                                                       kvc_dot32(&odd, a[i].codes + at + 32, a[i].codes16 + at + 32)));
        }
    }
}

/* Lanes summing to S and to M of one super-block against activation block
 * b of a. */
static inline void kmin_partials(const uint8_t *block, const kvc_act_q8_row *a, size_t b, v128_t *S,
                                 v128_t *M) {
    const v128_t scales_mins = kvc_k_scales_mins(block + 4);
    kmin_dots(block, scales_mins, a, 1, b, S);
    *M = kmin_min_sums(scales_mins, a->sums + 32 * b);
}

/* (d * da) * S - (dmin * da) * M, lane by lane. */
static inline v128_t kmin_values(v128_t S, v128_t M, v128_t d, v128_t dmin, v128_t da) {
    return wasm_f32x4_sub(wasm_f32x4_mul(wasm_f32x4_mul(d, da), wasm_f32x4_convert_i32x4(S)),
                          wasm_f32x4_mul(wasm_f32x4_mul(dmin, da), wasm_f32x4_convert_i32x4(M)));
}

static v128_t kmin_values4(const uint8_t *block, const kvc_act_q8_row *a, size_t b) {
    v128_t S[4], M[4];
    KVC_DECODE_GROUP_LOOP
    for (size_t k = 0; k < 4; k++) kmin_partials(block + k * KVC_KMIN_BYTES, a, b + k, &S[k], &M[k]);
    return kmin_values(kvc_horizontal_sums4_i32(S), kvc_horizontal_sums4_i32(M), kvc_f16_gather4(block, KVC_KMIN_BYTES),
                       kvc_f16_gather4(block + 2, KVC_KMIN_BYTES), wasm_v128_load(a->scales + 4 * b));
}

static float kmin_value1(const uint8_t *block, const kvc_act_q8_row *a, size_t b) {
    v128_t S, M;
    kmin_partials(block, a, b, &S, &M);
    const v128_t v = kmin_values(kvc_sum_i32x4(S), kvc_sum_i32x4(M), kvc_f16_splat(block), kvc_f16_splat(block + 2),
                                 wasm_v128_load32_splat(a->scales + 4 * b));
    return wasm_f32x4_extract_lane(v, 0);
}

static v128_t kmin_tile_value(const uint8_t *block, const kvc_act_q8_row a[4], const kvc_token_tile *tile,
                              size_t n, size_t b) {
    const v128_t scales_mins = kvc_k_scales_mins(block + 4);
    v128_t S[4], M[4];
    kmin_dots(block, scales_mins, a, 4, b, S);
    for (size_t i = 0; i < 4; i++) M[i] = kmin_min_sums(scales_mins, a[i].sums + 32 * b);
    return kmin_values(kvc_horizontal_sums4_i32(S), kvc_horizontal_sums4_i32(M), kvc_f16_splat(block),
                       kvc_f16_splat(block + 2), kvc_gather32(tile->row, KVC_ACT_Q8_SCALES_AT(n) + 4 * b));
}

void KVC_KMIN_NAME(size_t n, size_t rows, size_t T, const uint8_t *w, size_t row_bytes,
                   const uint8_t *xa, size_t xa_stride, float *y, size_t y_stride) {
    kvc_gemm_blocks(kmin_values4, kmin_value1, kmin_tile_value, 256, KVC_KMIN_BYTES, n, rows, T, w, row_bytes,
                    xa, xa_stride, y, y_stride);
}
