/* weights-wasmsimd.h -- what the SIMD128 (and relaxed) weight kernels
 * share: f16 scales read exactly in lanes, the lanes of four blocks or four
 * tokens gathered, and the f32 sum that closes every dot. */
#ifndef KVC_WEIGHTS_WASMSIMD_H
#define KVC_WEIGHTS_WASMSIMD_H

#include <wasm_simd128.h>

#include "scores-i8-wasmsimd.h"
#include "weights-scalar.h"

/* The IEEE half in the low 16 bits of each i32 lane (the high bits zero) as
 * f32, exactly: kvc_f16_to_f32 lane-wise. */
static inline v128_t kvc_f16_lanes_to_f32x4(v128_t h) {
    const v128_t magnitude = wasm_i32x4_shl(wasm_v128_and(h, wasm_i32x4_const_splat(0x7fff)), 13);
    const v128_t sign = wasm_i32x4_shl(wasm_v128_and(h, wasm_i32x4_const_splat(0x8000)), 16);
    const v128_t finite = wasm_f32x4_mul(magnitude, wasm_f32x4_const_splat(0x1p112f));
    /* Exponent 31: Inf or NaN.  (An equality: x86 has no unsigned compare,
     * which a greater-than on these non-negative lanes would become.) */
    const v128_t exponent = wasm_i32x4_const_splat(0x7c00);
    const v128_t special = wasm_i32x4_eq(wasm_v128_and(h, exponent), exponent);
    const v128_t inf_nan = wasm_v128_or(magnitude, wasm_i32x4_const_splat(0x7f800000));
    return wasm_v128_or(wasm_v128_bitselect(inf_nan, finite, special), sign);
}

/* The half at p, in every lane. */
static inline v128_t kvc_f16_splat(const uint8_t *p) {
    return kvc_f16_lanes_to_f32x4(wasm_i32x4_splat(kvc_load_u16(p)));
}

/* The halves at p, p + stride, p + 2 stride, p + 3 stride (four blocks' scales). */
static inline v128_t kvc_f16_gather4(const uint8_t *p, size_t stride) {
    v128_t h = wasm_i32x4_const_splat(0);
    h = wasm_v128_load16_lane(p, h, 0);
    h = wasm_v128_load16_lane(p + stride, h, 2);
    h = wasm_v128_load16_lane(p + 2 * stride, h, 4);
    h = wasm_v128_load16_lane(p + 3 * stride, h, 6);
    return kvc_f16_lanes_to_f32x4(h);
}

/* The 32-bit words at p[0..3] + offset, one per lane (four tokens' scales or sums). */
static inline v128_t kvc_gather32(const uint8_t *const p[4], size_t offset) {
    v128_t v = wasm_i32x4_const_splat(0);
    v = wasm_v128_load32_lane(p[0] + offset, v, 0);
    v = wasm_v128_load32_lane(p[1] + offset, v, 1);
    v = wasm_v128_load32_lane(p[2] + offset, v, 2);
    v = wasm_v128_load32_lane(p[3] + offset, v, 3);
    return v;
}

/* ggml's 16 bytes of nibbles (weights-scalar.h) as codes 0..15: codes
 * 0..15 in q0 (the low nibbles), 16..31 in q1 (the high ones).  The high
 * nibbles by a 16-bit shift and the mask: an 8-bit shift is the same shift
 * and a mask it makes each time (three instructions more on x86). */
static inline void kvc_nibbles_i8x16(v128_t packed, v128_t *q0, v128_t *q1) {
    const v128_t nibble = wasm_i8x16_const_splat(15);
    *q0 = wasm_v128_and(packed, nibble);
    *q1 = wasm_v128_and(wasm_u16x8_shr(packed, 4), nibble);
}

/* Q4_K's and Q5_K's eight 6-bit sub-block scales then eight mins from the
 * 12 bytes at p (16 read), as 16 bytes (kvc_k_scale_min's packing, one
 * 32-bit word of four at a time). */
static inline v128_t kvc_k_scales_mins(const uint8_t *p) {
    /* words w0 w1 w2: sc0..3, m0..3 (low 6 bits) and sc4..7, m4..7 (low 4
     * bits from w2, high 2 from the top of w0 and w1) */
    const v128_t w = wasm_v128_load(p);
    const v128_t low = wasm_v128_and(wasm_i32x4_shuffle(w, wasm_u32x4_shr(w, 4), 0, 2, 1, 6),
                                     wasm_i32x4_const(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f));
    const v128_t high = wasm_v128_and(wasm_u32x4_shr(wasm_i32x4_shuffle(w, w, 0, 0, 1, 1), 2),
                                      wasm_i32x4_const(0, 0x30303030, 0, 0x30303030));
    return wasm_v128_or(low, high);
}

/* IQ4_NL / IQ4_XS: the 16 bytes of nibbles at packed as their table values
 * (kvalues_iq4nl, i8), codes 0..15 in t0, 16..31 in t1: one swizzle each. */
static inline void kvc_iq4_i8x16(v128_t packed, v128_t *t0, v128_t *t1) {
    const v128_t values = wasm_i8x16_const(KVC_IQ4_VALUES);
    v128_t q0, q1;
    kvc_nibbles_i8x16(packed, &q0, &q1);
    *t0 = wasm_i8x16_swizzle(values, q0);
    *t1 = wasm_i8x16_swizzle(values, q1);
}

/* 16 in each byte of h that has its bit of mask set (one bit per byte), 0 elsewhere. */
static inline v128_t kvc_bits_as_16(v128_t h, v128_t mask) {
    return wasm_v128_and(wasm_i8x16_eq(wasm_v128_and(h, mask), mask), wasm_i8x16_const_splat(16));
}

/* Q5_0 / Q5_1: bit i of the u32 at qh, as 16, added to code i. */
static inline void kvc_fifth_bits_i8x16(const uint8_t *qh, v128_t *q0, v128_t *q1) {
    /* Byte k of qh into lanes 8 k .. 8 k + 7, by unpacks (one instruction
     * each where an arbitrary byte shuffle costs a pshufb and its mask). */
    const v128_t bits = wasm_v128_load32_zero(qh);
    const v128_t pairs = wasm_i8x16_shuffle(bits, bits, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const v128_t quads = wasm_i16x8_shuffle(pairs, pairs, 0, 8, 1, 9, 2, 10, 3, 11);
    const v128_t low = wasm_i32x4_shuffle(quads, quads, 0, 4, 1, 5), high = wasm_i32x4_shuffle(quads, quads, 2, 6, 3, 7);
    const v128_t mask = wasm_u8x16_const(1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128);
    *q0 = wasm_v128_or(*q0, kvc_bits_as_16(low, mask));
    *q1 = wasm_v128_or(*q1, kvc_bits_as_16(high, mask));
}

/* Sub-block scales as i16 lanes, taken one a loop turn: lane i in every
 * lane, and the lanes moved down by two for the next turn (one shuffle
 * each, where a scale stored and read back as a scalar cost a store, a load
 * and a splat). */
static inline v128_t kvc_i16_splat_lane0(v128_t scales) {
    return wasm_i16x8_shuffle(scales, scales, 0, 0, 0, 0, 0, 0, 0, 0);
}

static inline v128_t kvc_i16_splat_lane1(v128_t scales) {
    return wasm_i16x8_shuffle(scales, scales, 1, 1, 1, 1, 1, 1, 1, 1);
}

static inline v128_t kvc_i16_down2(v128_t scales) {
    return wasm_i16x8_shuffle(scales, scales, 2, 3, 4, 5, 6, 7, 0, 1);
}

/* (lane 0 + lane 1) + (lane 2 + lane 3): the four accumulators of one dot. */
static inline float kvc_combine_lanes(v128_t acc) {
    float lanes[4];
    wasm_v128_store(lanes, acc);
    return kvc_combine4(lanes);
}

/* The same for four dots at once, accumulator k of each in acc[k]. */
static inline v128_t kvc_combine_accumulators(const v128_t acc[4]) {
    return wasm_f32x4_add(wasm_f32x4_add(acc[0], acc[1]), wasm_f32x4_add(acc[2], acc[3]));
}

/* ---- tokens of a prefill tile: up to four activation rows, the last
 * repeated into the lanes past T (computed, never stored) ---- */
typedef struct kvc_token_tile {
    size_t count;           /* 1..4 real tokens */
    const uint8_t *row[4];  /* activation rows */
} kvc_token_tile;

static inline kvc_token_tile kvc_token_tile_at(const uint8_t *xa, size_t xa_stride, size_t t0,
                                               size_t T) {
    kvc_token_tile tile;
    tile.count = T - t0 < 4 ? T - t0 : 4;
    for (size_t i = 0; i < 4; i++) tile.row[i] = xa + (t0 + (i < tile.count ? i : tile.count - 1)) * xa_stride;
    return tile;
}

/* y[(t0 + i) * y_stride + r] = lane i of v, for the tile's real tokens. */
static inline void kvc_store_tile(const kvc_token_tile *tile, v128_t v, float *y, size_t t0,
                                  size_t y_stride, size_t r) {
    float lanes[4];
    wasm_v128_store(lanes, v);
    for (size_t i = 0; i < tile->count; i++) y[(t0 + i) * y_stride + r] = lanes[i];
}

/* ---- the gemm of a block type of B values, from a type's block values:
 * v_b of blocks b..b + 3 of a row against one token (lane k: block b + k),
 * of block b alone, and of block b against a tile's four tokens ---- */
typedef v128_t kvc_values4_fn(const uint8_t *block, const kvc_act_q8_row *a, size_t b);
typedef float kvc_value1_fn(const uint8_t *block, const kvc_act_q8_row *a, size_t b);
typedef v128_t kvc_tile_value_fn(const uint8_t *block, const kvc_act_q8_row a[4],
                                 const kvc_token_tile *tile, size_t n, size_t b);

/* Decode: lane k of the sum is accumulator k, taking blocks 4 i + k; the
 * last nb mod 4 blocks go to their accumulators one by one. */
static inline float kvc_row_blocks(kvc_values4_fn *values4, kvc_value1_fn *value1, size_t B,
                                   size_t block_bytes, size_t n, const uint8_t *row,
                                   const uint8_t *xa) {
    const size_t nb = n / B;
    const kvc_act_q8_row a = kvc_act_q8_row_at(xa, n, B);
    v128_t acc = wasm_f32x4_const_splat(0.0f);
    size_t b = 0;
    for (; b + 4 <= nb; b += 4) acc = wasm_f32x4_add(acc, values4(row + b * block_bytes, &a, b));
    float lanes[4];
    wasm_v128_store(lanes, acc);
    for (; b < nb; b++) lanes[b & 3] += value1(row + b * block_bytes, &a, b);
    return kvc_combine4(lanes);
}

/* Prefill: lane i is token i; the four accumulators vectors by block index. */
static inline v128_t kvc_tile_blocks(kvc_tile_value_fn *value, size_t B, size_t block_bytes,
                                     size_t n, const uint8_t *row, const kvc_token_tile *tile) {
    const size_t nb = n / B;
    kvc_act_q8_row a[4];
    for (size_t i = 0; i < 4; i++) a[i] = kvc_act_q8_row_at(tile->row[i], n, B);
    v128_t acc[4] = {wasm_f32x4_const_splat(0.0f), wasm_f32x4_const_splat(0.0f),
                     wasm_f32x4_const_splat(0.0f), wasm_f32x4_const_splat(0.0f)};
    /* One block a loop turn: unrolled, the engine would load several blocks'
     * activations at once and spill them. */
#pragma clang loop unroll(disable)
    for (size_t b = 0; b < nb; b++) acc[b & 3] = wasm_f32x4_add(acc[b & 3], value(row + b * block_bytes, a, tile, n, b));
    return kvc_combine_accumulators(acc);
}

/* The whole gemm: each tile of tokens against every row (one token alone
 * takes the decode path). */
static inline void kvc_gemm_blocks(kvc_values4_fn *values4, kvc_value1_fn *value1,
                                   kvc_tile_value_fn *tile_value, size_t B, size_t block_bytes,
                                   size_t n, size_t rows, size_t T, const uint8_t *w,
                                   size_t row_bytes, const uint8_t *xa, size_t xa_stride, float *y,
                                   size_t y_stride) {
    for (size_t t0 = 0; t0 < T; t0 += 4) {
        const kvc_token_tile tile = kvc_token_tile_at(xa, xa_stride, t0, T);
        for (size_t r = 0; r < rows; r++) {
            const uint8_t *row = w + r * row_bytes;
            if (tile.count == 1) {
                y[t0 * y_stride + r] = kvc_row_blocks(values4, value1, B, block_bytes, n, row, tile.row[0]);
            } else {
                kvc_store_tile(&tile, kvc_tile_blocks(tile_value, B, block_bytes, n, row, &tile), y, t0,
                               y_stride, r);
            }
        }
    }
}

/* ---- the gemm of a packed layout of four rows a tile (weights.h): each
 * tile of tokens against each tile of rows, lane r of a tile's sums row r's
 * ---- */
/* out[i], lane r: row r of the tile at `tile` (nb blocks a row) against the
 * activation row a[i]: i < 1 (decode) or i < 4 (prefill). */
typedef void kvc_packed_tile_fn(const uint8_t *tile, size_t nb, const kvc_act_q8_row a[4], v128_t out[4]);

static inline void kvc_gemm_packed4(kvc_packed_tile_fn *decode, kvc_packed_tile_fn *prefill, kvc_gemm_fn *file_gemm,
                                    size_t B, size_t n, size_t rows, size_t T, const uint8_t *w, size_t row_bytes,
                                    const uint8_t *xa, size_t xa_stride, float *y, size_t y_stride) {
    const size_t tiles = rows / 4;
    for (size_t t0 = 0; t0 < T; t0 += 4) {
        const kvc_token_tile tokens = kvc_token_tile_at(xa, xa_stride, t0, T);
        kvc_act_q8_row a[4];
        for (size_t i = 0; i < 4; i++) a[i] = kvc_act_q8_row_at(tokens.row[i], n, B);
        for (size_t k = 0; k < tiles; k++) {
            v128_t out[4];
            (tokens.count == 1 ? decode : prefill)(w + 4 * k * row_bytes, n / B, a, out);
            for (size_t i = 0; i < tokens.count; i++) wasm_v128_store(y + (t0 + i) * y_stride + 4 * k, out[i]);
        }
    }
    /* The matrix's last rows, in the file's layout. */
    if (rows % 4) file_gemm(n, rows % 4, T, w + 4 * tiles * row_bytes, row_bytes, xa, xa_stride, y + 4 * tiles, y_stride);
}

/* A packed layout's gemm `name` from its tile function `tile(tile, nb, a,
 * tokens, out)` (always inline, tokens 1 or 4) and its type's gemm of the
 * file's layout, for blocks of B. */
#define KVC_GEMM_PACKED4(name, tile, file_gemm, B)                                                       \
    static void tile##_decode(const uint8_t *at, size_t nb, const kvc_act_q8_row a[4], v128_t out[4]) {  \
        tile(at, nb, a, 1, out);                                                                         \
    }                                                                                                    \
    static void tile##_prefill(const uint8_t *at, size_t nb, const kvc_act_q8_row a[4], v128_t out[4]) { \
        tile(at, nb, a, 4, out);                                                                         \
    }                                                                                                    \
    void name(size_t n, size_t rows, size_t T, const uint8_t *w, size_t row_bytes, const uint8_t *xa,    \
              size_t xa_stride, float *y, size_t y_stride) {                                             \
        kvc_gemm_packed4(tile##_decode, tile##_prefill, file_gemm, B, n, rows, T, w, row_bytes, xa,      \
                         xa_stride, y, y_stride);                                                        \
    }

/* The four copies of one block's integer partial: its exact sum in every lane. */
static inline v128_t kvc_sum_i32x4(v128_t partial) {
    const v128_t copies[4] = {partial, partial, partial, partial};
    return kvc_horizontal_sums4_i32(copies);
}

#endif /* KVC_WEIGHTS_WASMSIMD_H */
