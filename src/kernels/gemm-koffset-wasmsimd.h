/*
 * gemm-koffset-wasmsimd.h -- the gemm of a k-quant with signed scales for
 * sub-blocks of 16 and a code offset (Q6_K, Q3_K), in SIMD128 or relaxed
 * SIMD: each sub-block of 16 dotted and scaled exactly, the offset taken
 * back with the activation sums.  A type's file defines
 *   KVC_KOFFSET_NAME, KVC_KOFFSET_BYTES  the function, bytes per super-block
 *   KVC_KOFFSET_D_AT                     where its f16 d sits
 *   KVC_KOFFSET_LOG2                     log2 of its code offset (32: 5, 4: 2)
 *   koffset_scales(block, buffer)        its 16 i8 scales: in the block, or
 *                                        decoded into buffer
 *   koffset_codes(block, h, i, q)        the codes of sub-blocks 8 h + 2 k + i
 *                                        (k < 4, i < 2) as q[k], 16 each
 * and includes this file, after one of the dot-codes headers.  Decode takes
 * a row's super-blocks four at a time (lane k: super-block 4 i + k), prefill
 * one against four tokens, in four accumulators by super-block index: the
 * scalar kernel's values lane for lane.
 */
#include "weights-wasmsimd.h"

/* offset * sum_g sc_g A_g: the offset's share of S. */
static inline v128_t koffset_offset(const int8_t *scales, const uint8_t *sums) {
    const v128_t sc = wasm_v128_load(scales);
    const v128_t offset = wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_i16x8_extend_low_i8x16(sc), wasm_v128_load(sums)),
                                         wasm_i32x4_dot_i16x8(wasm_i16x8_extend_high_i8x16(sc), wasm_v128_load(sums + 16)));
    return wasm_i32x4_shl(offset, KVC_KOFFSET_LOG2);
}

/* Sub-block g, its codes q, into S[i] against block b of activation rows
 * a[i], i < count: the codes scaled once for every row. */
static inline void koffset_subblock(v128_t q, const int8_t *scales, size_t g, const kvc_act_q8_row *a, size_t count,
                                    size_t b, v128_t *S) {
    /* The scale read as a scalar and splat: taken from a vector of them by
     * shuffles instead, Q6_K's prefill ran 25% slower here. */
    const kvc_codes16 c = kvc_codes16_scaled(q, wasm_i16x8_splat(scales[g]));
    const size_t at = 256 * b + 16 * g;
    for (size_t i = 0; i < count; i++) S[i] = wasm_i32x4_add(S[i], kvc_dot16(&c, a[i].codes + at, a[i].codes16 + at));
}

/* S[i] = lanes summing to S of one super-block against block b of
 * activation rows a[i], i < count (1, or a tile's 4), four sub-blocks a
 * loop turn (unrolled, the engine would load all the activations at once
 * and spill them). */
static inline void koffset_dots(const uint8_t *block, const kvc_act_q8_row *a, size_t count, size_t b, v128_t *S) {
    int8_t buffer[16];
    const int8_t *scales = koffset_scales(block, buffer);
    for (size_t i = 0; i < count; i++) S[i] = wasm_i32x4_const_splat(0);
#pragma clang loop unroll(disable)
    for (size_t j = 0; j < 4; j++) {
        const size_t h = j >> 1, i = j & 1;
        v128_t q[4];
        koffset_codes(block, h, i, q);
        if (count == 1) {
            /* Decode: the four sub-blocks one after another, their codes in
             * registers (a loop turn each read them back from memory: 28%
             * slower for Q6_K). */
            for (size_t k = 0; k < 4; k++) koffset_subblock(q[k], scales, 8 * h + 2 * k + i, a, count, b, S);
        } else {
            /* A tile: a sub-block a loop turn against its four tokens
             * (unrolled, their activation loads spill: 15% slower for Q6_K). */
#pragma clang loop unroll(disable)
            for (size_t k = 0; k < 4; k++) koffset_subblock(q[k], scales, 8 * h + 2 * k + i, a, count, b, S);
        }
    }
    for (size_t i = 0; i < count; i++) S[i] = wasm_i32x4_sub(S[i], koffset_offset(scales, a[i].sums + 32 * b));
}

static inline v128_t koffset_block_partial(const uint8_t *block, const kvc_act_q8_row *a, size_t b) {
    v128_t S;
    koffset_dots(block, a, 1, b, &S);
    return S;
}

static inline v128_t koffset_values(v128_t S, v128_t d, v128_t da) {
    return wasm_f32x4_mul(wasm_f32x4_mul(d, da), wasm_f32x4_convert_i32x4(S));
}

static v128_t koffset_values4(const uint8_t *block, const kvc_act_q8_row *a, size_t b) {
    v128_t S[4];
    KVC_DECODE_GROUP_LOOP
    for (size_t k = 0; k < 4; k++) S[k] = koffset_block_partial(block + k * KVC_KOFFSET_BYTES, a, b + k);
    return koffset_values(kvc_horizontal_sums4_i32(S), kvc_f16_gather4(block + KVC_KOFFSET_D_AT, KVC_KOFFSET_BYTES),
                          wasm_v128_load(a->scales + 4 * b));
}

static float koffset_value1(const uint8_t *block, const kvc_act_q8_row *a, size_t b) {
    const v128_t S = koffset_block_partial(block, a, b);
    const v128_t v = koffset_values(kvc_sum_i32x4(S), kvc_f16_splat(block + KVC_KOFFSET_D_AT),
                                    wasm_v128_load32_splat(a->scales + 4 * b));
    return wasm_f32x4_extract_lane(v, 0);
}

static v128_t koffset_tile_value(const uint8_t *block, const kvc_act_q8_row a[4], const kvc_token_tile *tile,
                                 size_t n, size_t b) {
    v128_t S[4];
    koffset_dots(block, a, 4, b, S);
    return koffset_values(kvc_horizontal_sums4_i32(S), kvc_f16_splat(block + KVC_KOFFSET_D_AT),
                          kvc_gather32(tile->row, KVC_ACT_Q8_SCALES_AT(n) + 4 * b));
}

void KVC_KOFFSET_NAME(size_t n, size_t rows, size_t T, const uint8_t *w, size_t row_bytes,
                      const uint8_t *xa, size_t xa_stride, float *y, size_t y_stride) {
    kvc_gemm_blocks(koffset_values4, koffset_value1, koffset_tile_value, 256, KVC_KOFFSET_BYTES, n, rows, T, w,
                    row_bytes, xa, xa_stride, y, y_stride);
}
