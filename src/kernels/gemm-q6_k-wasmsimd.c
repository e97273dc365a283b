/*
 * gemm-q6_k-wasmsimd.c -- Q6_K weights in SIMD128 (gemm-q6_k-scalar.c has
 * the layout): codes 0..63 put together from their nibble and their two
 * high bits, each sub-block of 16 dotted and scaled exactly, the offset 32
 * taken back with the activation sums.  Decode takes a row's super-blocks
 * four at a time (lane k: super-block 4 i + k), prefill one against four
 * tokens, in four accumulators by super-block index: the scalar kernel's
 * values lane for lane.  The relaxed set compiles this file again with its
 * dot (gemm-q6_k-wasmrelaxed.c).
 */
#ifndef KVC_Q6_K_NAME
#include "dot-codes-wasmsimd.h"
#define KVC_Q6_K_NAME kvc_gemm_q6_k__wasmsimd
#endif
#include "weights-wasmsimd.h"


/* The codes of sub-blocks i, 2 + i, 4 + i and 6 + i of half h (i < 2), 16
 * per vector: three loads make all four.  The shifts are 16-bit ones (one
 * instruction; an 8-bit shift is three more on x86, for its mask): the bits
 * they carry across a byte boundary fall outside the mask that follows. */
static inline void q6_k_codes(const uint8_t *block, size_t h, size_t i, v128_t q[4]) {
    const uint8_t *ql = block + 64 * h + 16 * i, *qh = block + 128 + 32 * h + 16 * i;
    const v128_t nibble = wasm_i8x16_const_splat(15), pair = wasm_i8x16_const_splat(0x30);
    const v128_t low0 = wasm_v128_load(ql), low1 = wasm_v128_load(ql + 32), high = wasm_v128_load(qh);
    q[0] = wasm_v128_or(wasm_v128_and(low0, nibble), wasm_v128_and(wasm_i16x8_shl(high, 4), pair));
    q[1] = wasm_v128_or(wasm_v128_and(low1, nibble), wasm_v128_and(wasm_i16x8_shl(high, 2), pair));
    q[2] = wasm_v128_or(wasm_v128_and(wasm_u16x8_shr(low0, 4), nibble), wasm_v128_and(high, pair));
    q[3] = wasm_v128_or(wasm_v128_and(wasm_u16x8_shr(low1, 4), nibble), wasm_v128_and(wasm_u16x8_shr(high, 2), pair));
}

/* 32 sum_g sc_g A_g: the offset's share of S. */
static inline v128_t q6_k_offset(const uint8_t *block, const uint8_t *sums) {
    const v128_t sc = wasm_v128_load(block + 192);
    const v128_t offset = wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_i16x8_extend_low_i8x16(sc), wasm_v128_load(sums)),
                                         wasm_i32x4_dot_i16x8(wasm_i16x8_extend_high_i8x16(sc), wasm_v128_load(sums + 16)));
    return wasm_i32x4_shl(offset, 5);
}

/* Sub-block g, its codes q, into S[i] against block b of activation rows
 * a[i], i < count: the codes scaled once for every row. */
static inline void q6_k_subblock(v128_t q, const uint8_t *block, size_t g, const kvc_act_q8_row *a, size_t count,
                                 size_t b, v128_t *S) {
    /* The scale read as a scalar and splat: taken from a vector of them by
     * shuffles instead, prefill ran 25% slower here. */
    const kvc_codes16 c = kvc_codes16_scaled(q, wasm_i16x8_splat(((const int8_t *)block)[192 + g]));
    const size_t at = 256 * b + 16 * g;
    for (size_t i = 0; i < count; i++) S[i] = wasm_i32x4_add(S[i], kvc_dot16(&c, a[i].codes + at, a[i].codes16 + at));
}

/* S[i] = lanes summing to S of one super-block against block b of
 * activation rows a[i], i < count (1, or a tile's 4), four sub-blocks a
 * loop turn (unrolled, the engine would load all the activations at once
 * and spill them). */
static inline void q6_k_dots(const uint8_t *block, const kvc_act_q8_row *a, size_t count, size_t b, v128_t *S) {
    for (size_t i = 0; i < count; i++) S[i] = wasm_i32x4_const_splat(0);
#pragma clang loop unroll(disable)
    for (size_t j = 0; j < 4; j++) {
        const size_t h = j >> 1, i = j & 1;
        v128_t q[4];
        q6_k_codes(block, h, i, q);
        if (count == 1) {
            /* Decode: the four sub-blocks one after another, their codes in
             * registers (a loop turn each read them back from memory: 28%
             * slower). */
            for (size_t k = 0; k < 4; k++) q6_k_subblock(q[k], block, 8 * h + 2 * k + i, a, count, b, S);
        } else {
            /* A tile: a sub-block a loop turn against its four tokens
             * (unrolled, their activation loads spill: 15% slower). */
#pragma clang loop unroll(disable)
            for (size_t k = 0; k < 4; k++) q6_k_subblock(q[k], block, 8 * h + 2 * k + i, a, count, b, S);
        }
    }
    for (size_t i = 0; i < count; i++) S[i] = wasm_i32x4_sub(S[i], q6_k_offset(block, a[i].sums + 32 * b));
}

static inline v128_t q6_k_block_partial(const uint8_t *block, const kvc_act_q8_row *a, size_t b) {
    v128_t S;
    q6_k_dots(block, a, 1, b, &S);
    return S;
}

static inline v128_t q6_k_values(v128_t S, v128_t d, v128_t da) {
    return wasm_f32x4_mul(wasm_f32x4_mul(d, da), wasm_f32x4_convert_i32x4(S));
}

static v128_t q6_k_values4(const uint8_t *block, const kvc_act_q8_row *a, size_t b) {
    v128_t S[4];
    KVC_DECODE_GROUP_LOOP
    for (size_t k = 0; k < 4; k++) S[k] = q6_k_block_partial(block + k * KVC_BLOCK_BYTES_q6_k, a, b + k);
    return q6_k_values(kvc_horizontal_sums4_i32(S), kvc_f16_gather4(block + 208, KVC_BLOCK_BYTES_q6_k),
                       wasm_v128_load(a->scales + 4 * b));
}

static float q6_k_value1(const uint8_t *block, const kvc_act_q8_row *a, size_t b) {
    const v128_t S = q6_k_block_partial(block, a, b);
    const v128_t v = q6_k_values(kvc_sum_i32x4(S), kvc_f16_splat(block + 208), wasm_v128_load32_splat(a->scales + 4 * b));
    return wasm_f32x4_extract_lane(v, 0);
}

static v128_t q6_k_tile_value(const uint8_t *block, const kvc_act_q8_row a[4], const kvc_token_tile *tile,
                              size_t n, size_t b) {
    v128_t S[4];
    q6_k_dots(block, a, 4, b, S);
    return q6_k_values(kvc_horizontal_sums4_i32(S), kvc_f16_splat(block + 208),
                       kvc_gather32(tile->row, KVC_ACT_Q8_SCALES_AT(n) + 4 * b));
}

void KVC_Q6_K_NAME(size_t n, size_t rows, size_t T, const uint8_t *w, size_t row_bytes,
                   const uint8_t *xa, size_t xa_stride, float *y, size_t y_stride) {
    kvc_gemm_blocks(q6_k_values4, q6_k_value1, q6_k_tile_value, 256, KVC_BLOCK_BYTES_q6_k, n, rows, T, w, row_bytes,
                    xa, xa_stride, y, y_stride);
}
