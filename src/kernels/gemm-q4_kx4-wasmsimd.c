/*
 * gemm-q4_kx4-wasmsimd.c -- Q4_Kx4 weights (pack-q4_kx4.c) in SIMD128: a
 * tile's four rows against one token (decode) or four (prefill), lane r of
 * every sum row r's.  Per super-block: the rows' scales and mins gathered
 * into lanes once for every token; per sub-block, each chunk's nibbles
 * widened to i16 times their row's scale, and per token the four
 * activation codes they meet splat and multiply-added into the rows' lanes;
 * then S and M of the four rows and their values (d * d_a) * S - (dmin *
 * d_a) * M in lanes, into accumulators b mod 4 -- the scalar gemm's
 * arithmetic, lane for lane (weights.c).  The relaxed set compiles this
 * file again with its sub-block dots (gemm-q4_kx4-wasmrelaxed.c).
 */
#include "weights-wasmsimd.h"

#ifndef Q4_KX4_NAME
#define Q4_KX4_NAME kvc_gemm_q4_kx4__wasmsimd
#define Q4_KX4_FILE_GEMM kvc_gemm_q4_k__wasmsimd

/* The sum S of one sub-block j into p (two i32x4 per token, lanes (row 0:
 * codes 0, 1; row 0: codes 2, 3; row 1: ...), as i32x4.dot_i16x8_s leaves
 * them): chunks, its 64 bytes; scales, the rows' scales of sub-blocks j
 * and j + 1 or j - 1 in i16 lanes (row 0: 2, row 1: 2, ...), odd: j's the
 * second of each pair; at, the index of the sub-block's first activation. */
static inline __attribute__((always_inline)) void q4_kx4_subblock(const uint8_t *chunks, v128_t scales, int odd,
                                                                  const kvc_act_q8_row a[4], size_t at, size_t tokens,
                                                                  v128_t p[4][2]) {
    const v128_t scale01 = odd ? wasm_i16x8_shuffle(scales, scales, 1, 1, 1, 1, 3, 3, 3, 3)
                               : wasm_i16x8_shuffle(scales, scales, 0, 0, 0, 0, 2, 2, 2, 2);
    const v128_t scale23 = odd ? wasm_i16x8_shuffle(scales, scales, 5, 5, 5, 5, 7, 7, 7, 7)
                               : wasm_i16x8_shuffle(scales, scales, 4, 4, 4, 4, 6, 6, 6, 6);
    for (size_t c = 0; c < 4; c++) {
        v128_t low, high;
        kvc_nibbles_i8x16(wasm_v128_load(chunks + 16 * c), &low, &high);
        const v128_t w[2][2] = {{wasm_i16x8_mul(wasm_u16x8_extend_low_u8x16(low), scale01),
                                 wasm_i16x8_mul(wasm_u16x8_extend_high_u8x16(low), scale23)},
                                {wasm_i16x8_mul(wasm_u16x8_extend_low_u8x16(high), scale01),
                                 wasm_i16x8_mul(wasm_u16x8_extend_high_u8x16(high), scale23)}};
        for (size_t i = 0; i < tokens; i++) {
            for (size_t h = 0; h < 2; h++) {
                const v128_t x = wasm_v128_load64_splat(a[i].codes16 + at + 16 * h + 4 * c);
                p[i][0] = wasm_i32x4_add(p[i][0], wasm_i32x4_dot_i16x8(w[h][0], x));
                p[i][1] = wasm_i32x4_add(p[i][1], wasm_i32x4_dot_i16x8(w[h][1], x));
            }
        }
    }
}

/* Lane r: row r's S. */
static inline v128_t q4_kx4_sums(const v128_t p[2]) {
    return wasm_i32x4_add(wasm_i32x4_shuffle(p[0], p[1], 0, 2, 4, 6), wasm_i32x4_shuffle(p[0], p[1], 1, 3, 5, 7));
}
#endif

#define Q4_KX4_BLOCK (4 * KVC_BLOCK_BYTES_q4_k)

/* A super-block's rows' d and dmin in lanes, and their scales and mins of
 * sub-blocks 2 k and 2 k + 1 as i16 lanes (row 0: 2, row 1: 2, ...). */
typedef struct q4_kx4_head {
    v128_t d, dmin, scales[4], mins[4];
} q4_kx4_head;

static inline q4_kx4_head q4_kx4_head_at(const uint8_t *block) {
    q4_kx4_head h;
    h.d = kvc_f16_lanes_to_f32x4(wasm_u32x4_extend_low_u16x8(wasm_v128_load64_zero(block)));
    h.dmin = kvc_f16_lanes_to_f32x4(wasm_u32x4_extend_low_u16x8(wasm_v128_load64_zero(block + 8)));
    v128_t sm[4];
    for (size_t r = 0; r < 4; r++) sm[r] = kvc_k_scales_mins(block + 16 + 12 * r);
    /* Each row's bytes in pairs (sub-blocks 2 k, 2 k + 1), the rows' pairs
     * of k together: pairs k = 0, 1 in one vector, 2, 3 in the next. */
    const v128_t scales01 = wasm_i16x8_shuffle(sm[0], sm[1], 0, 8, 1, 9, 2, 10, 3, 11);
    const v128_t scales23 = wasm_i16x8_shuffle(sm[2], sm[3], 0, 8, 1, 9, 2, 10, 3, 11);
    const v128_t mins01 = wasm_i16x8_shuffle(sm[0], sm[1], 4, 12, 5, 13, 6, 14, 7, 15);
    const v128_t mins23 = wasm_i16x8_shuffle(sm[2], sm[3], 4, 12, 5, 13, 6, 14, 7, 15);
    const v128_t scale_pairs[2] = {wasm_i32x4_shuffle(scales01, scales23, 0, 4, 1, 5),
                                   wasm_i32x4_shuffle(scales01, scales23, 2, 6, 3, 7)};
    const v128_t min_pairs[2] = {wasm_i32x4_shuffle(mins01, mins23, 0, 4, 1, 5),
                                 wasm_i32x4_shuffle(mins01, mins23, 2, 6, 3, 7)};
    for (size_t k = 0; k < 2; k++) {
        h.scales[2 * k] = wasm_u16x8_extend_low_u8x16(scale_pairs[k]);
        h.scales[2 * k + 1] = wasm_u16x8_extend_high_u8x16(scale_pairs[k]);
        h.mins[2 * k] = wasm_u16x8_extend_low_u8x16(min_pairs[k]);
        h.mins[2 * k + 1] = wasm_u16x8_extend_high_u8x16(min_pairs[k]);
    }
    return h;
}

/* Lane r: row r's M = sum_j m_j A_j against block b of a. */
static inline v128_t q4_kx4_min_sums(const q4_kx4_head *h, const kvc_act_q8_row *a, size_t b) {
    const v128_t s0 = wasm_v128_load(a->sums + 32 * b), s1 = wasm_v128_load(a->sums + 32 * b + 16);
    /* A_j = the sums of codes 32 j .. 32 j + 15 and 32 j + 16 .. 32 j + 31 (|A_j| <= 4064) */
    const v128_t A = wasm_i16x8_add(wasm_i16x8_shuffle(s0, s1, 0, 2, 4, 6, 8, 10, 12, 14),
                                    wasm_i16x8_shuffle(s0, s1, 1, 3, 5, 7, 9, 11, 13, 15));
    v128_t M = wasm_i32x4_dot_i16x8(h->mins[0], wasm_i32x4_shuffle(A, A, 0, 0, 0, 0));
    M = wasm_i32x4_add(M, wasm_i32x4_dot_i16x8(h->mins[1], wasm_i32x4_shuffle(A, A, 1, 1, 1, 1)));
    M = wasm_i32x4_add(M, wasm_i32x4_dot_i16x8(h->mins[2], wasm_i32x4_shuffle(A, A, 2, 2, 2, 2)));
    return wasm_i32x4_add(M, wasm_i32x4_dot_i16x8(h->mins[3], wasm_i32x4_shuffle(A, A, 3, 3, 3, 3)));
}

/* out[i], lane r: row r of the tile against token i, i < tokens (1 or 4:
 * a constant where it is called, so that the token loops unroll). */
static inline __attribute__((always_inline)) void q4_kx4_tile(const uint8_t *tile, size_t nb,
                                                              const kvc_act_q8_row a[4], size_t tokens,
                                                              v128_t out[4]) {
    v128_t acc[4][4];
    for (size_t i = 0; i < tokens; i++) {
        for (size_t k = 0; k < 4; k++) acc[i][k] = wasm_f32x4_const_splat(0.0f);
    }
    for (size_t b = 0; b < nb; b++) {
        const uint8_t *block = tile + b * Q4_KX4_BLOCK;
        const q4_kx4_head h = q4_kx4_head_at(block);
        v128_t p[4][2];
        for (size_t i = 0; i < tokens; i++) p[i][0] = p[i][1] = wasm_i32x4_const_splat(0);
        /* Two sub-blocks a loop turn (their scales one vector); unrolled, the
         * engine would hold every sub-block's codes at once and spill them. */
#pragma clang loop unroll(disable)
        for (size_t k = 0; k < 4; k++) {
            q4_kx4_subblock(block + 64 + 128 * k, h.scales[k], 0, a, 256 * b + 64 * k, tokens, p);
            q4_kx4_subblock(block + 128 + 128 * k, h.scales[k], 1, a, 256 * b + 64 * k + 32, tokens, p);
        }
        for (size_t i = 0; i < tokens; i++) {
            const v128_t S = q4_kx4_sums(p[i]), M = q4_kx4_min_sums(&h, &a[i], b);
            const v128_t da = wasm_v128_load32_splat(a[i].scales + 4 * b);
            const v128_t v = wasm_f32x4_sub(wasm_f32x4_mul(wasm_f32x4_mul(h.d, da), wasm_f32x4_convert_i32x4(S)),
                                            wasm_f32x4_mul(wasm_f32x4_mul(h.dmin, da), wasm_f32x4_convert_i32x4(M)));
            acc[i][b & 3] = wasm_f32x4_add(acc[i][b & 3], v);
        }
    }
    for (size_t i = 0; i < tokens; i++) out[i] = kvc_combine_accumulators(acc[i]);
}

KVC_GEMM_PACKED4(Q4_KX4_NAME, q4_kx4_tile, Q4_KX4_FILE_GEMM, 256)
