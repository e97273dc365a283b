/*
 * gemm-kmin-values-wasmsimd.h -- the gemm of a k-quant with scales and mins
 * (Q2_K, Q4_K, Q5_K), in SIMD128 or relaxed SIMD, from its sub-blocks: a
 * type's file defines
 *   KVC_KMIN_NAME, KVC_KMIN_BYTES   the function, bytes per super-block
 *   KVC_KMIN_D_AT                   where its f16 d sits (dmin follows)
 *   kmin_scales_mins(block)         its sub-block scales and mins, as one
 *                                   vector the next two read
 *   kmin_min_sums(scales_mins, sums)  lanes summing to M against the 16
 *                                   i16 sums of 16 of an activation block
 *   kmin_dots(block, scales_mins, a, count, b, S)  S[i] lanes summing to
 *                                   S against block b of a[i], i < count
 * and includes this file.  Each super-block's value is the scalar kernel's,
 * lane for lane (weights.c): decode takes a row's super-blocks four at a
 * time, lane k holding super-block 4 i + k; prefill one super-block against
 * four tokens, in four accumulators by super-block index.
 */
#include "weights-wasmsimd.h"

/* Lanes summing to S and to M of one super-block against activation block
 * b of a. */
static inline void kmin_partials(const uint8_t *block, const kvc_act_q8_row *a, size_t b, v128_t *S,
                                 v128_t *M) {
    const v128_t scales_mins = kmin_scales_mins(block);
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
    const uint8_t *dm = block + KVC_KMIN_D_AT;
    return kmin_values(kvc_horizontal_sums4_i32(S), kvc_horizontal_sums4_i32(M), kvc_f16_gather4(dm, KVC_KMIN_BYTES),
                       kvc_f16_gather4(dm + 2, KVC_KMIN_BYTES), wasm_v128_load(a->scales + 4 * b));
}

static float kmin_value1(const uint8_t *block, const kvc_act_q8_row *a, size_t b) {
    v128_t S, M;
    kmin_partials(block, a, b, &S, &M);
    const uint8_t *dm = block + KVC_KMIN_D_AT;
    const v128_t v = kmin_values(kvc_sum_i32x4(S), kvc_sum_i32x4(M), kvc_f16_splat(dm), kvc_f16_splat(dm + 2),
                                 wasm_v128_load32_splat(a->scales + 4 * b));
    return wasm_f32x4_extract_lane(v, 0);
}

static v128_t kmin_tile_value(const uint8_t *block, const kvc_act_q8_row a[4], const kvc_token_tile *tile,
                              size_t n, size_t b) {
    const v128_t scales_mins = kmin_scales_mins(block);
    v128_t S[4], M[4];
    kmin_dots(block, scales_mins, a, 4, b, S);
    for (size_t i = 0; i < 4; i++) M[i] = kmin_min_sums(scales_mins, a[i].sums + 32 * b);
    const uint8_t *dm = block + KVC_KMIN_D_AT;
    return kmin_values(kvc_horizontal_sums4_i32(S), kvc_horizontal_sums4_i32(M), kvc_f16_splat(dm),
                       kvc_f16_splat(dm + 2), kvc_gather32(tile->row, KVC_ACT_Q8_SCALES_AT(n) + 4 * b));
}

void KVC_KMIN_NAME(size_t n, size_t rows, size_t T, const uint8_t *w, size_t row_bytes,
                   const uint8_t *xa, size_t xa_stride, float *y, size_t y_stride) {
    kvc_gemm_blocks(kmin_values4, kmin_value1, kmin_tile_value, 256, KVC_KMIN_BYTES, n, rows, T, w, row_bytes,
                    xa, xa_stride, y, y_stride);
}
