/*
 * gemm-q8_0x4-wasmsimd.c -- Q8_0x4 weights (pack-q8_0x4.c) in SIMD128: a
 * tile's four rows against one token (decode) or four (prefill), lane r of
 * every sum row r's.  Per group of four codes: the 16-byte load widened to
 * i16, then per token its four activation codes splat and multiply-added
 * into the rows' lanes; per block, the exact dots S of the four rows, then
 * their values (d * d_a) * S in lanes, into accumulators b mod 4 -- the
 * scalar gemm's arithmetic, lane for lane (weights.c).  The relaxed set
 * runs this kernel too: the codes are signed, where the relaxed i8 x i7
 * dot product is not exact, and splitting them into nibbles that it would
 * take costs two of its dot products for one of these (measured no faster).
 */
#include "weights-wasmsimd.h"

/* A group's 16 bytes of codes as i16: rows 0, 1 in w[0], rows 2, 3
 * in w[1]; i32x4.dot_i16x8_s against codes 4 g .. 4 g + 3 of the
 * activations, twice over, leaves lanes (row 0: codes 0, 1; row 0: codes
 * 2, 3; row 1: ...; ...). */
typedef struct q8_0x4_group {
    v128_t w[2];
} q8_0x4_group;

static inline q8_0x4_group q8_0x4_group_at(const uint8_t *p) {
    const v128_t bytes = wasm_v128_load(p);
    q8_0x4_group g = {{wasm_i16x8_extend_low_i8x16(bytes), wasm_i16x8_extend_high_i8x16(bytes)}};
    return g;
}

static inline void q8_0x4_group_add(v128_t p[2], const q8_0x4_group *g, const kvc_act_q8_row *a, size_t block,
                                    size_t group) {
    const v128_t x = wasm_v128_load64_splat(a->codes16 + 32 * block + 4 * group);
    p[0] = wasm_i32x4_add(p[0], wasm_i32x4_dot_i16x8(g->w[0], x));
    p[1] = wasm_i32x4_add(p[1], wasm_i32x4_dot_i16x8(g->w[1], x));
}

/* Lane r: row r's exact dot over the block. */
static inline v128_t q8_0x4_partial_sums(const v128_t p[2]) {
    return wasm_i32x4_add(wasm_i32x4_shuffle(p[0], p[1], 0, 2, 4, 6), wasm_i32x4_shuffle(p[0], p[1], 1, 3, 5, 7));
}

#define Q8_0X4_BLOCK (4 * KVC_BLOCK_BYTES_q8_0)

/* The rows' scales d of a tile's block, lane r row r's. */
static inline v128_t q8_0x4_scales(const uint8_t *block) {
    return kvc_f16_lanes_to_f32x4(wasm_u32x4_extend_low_u16x8(wasm_v128_load64_zero(block)));
}

/* out[i], lane r: row r of the tile against token i, i < tokens (1 or 4:
 * a constant where it is called, so that the token loops unroll). */
static inline __attribute__((always_inline)) void q8_0x4_tile(const uint8_t *tile, size_t nb,
                                                              const kvc_act_q8_row a[4], size_t tokens,
                                                              v128_t out[4]) {
    v128_t acc[4][4];
    for (size_t i = 0; i < tokens; i++) {
        for (size_t k = 0; k < 4; k++) acc[i][k] = wasm_f32x4_const_splat(0.0f);
    }
    for (size_t b = 0; b < nb; b++) {
        const uint8_t *block = tile + b * Q8_0X4_BLOCK;
        v128_t p[4][2];
        for (size_t i = 0; i < tokens; i++) p[i][0] = p[i][1] = wasm_i32x4_const_splat(0);
        /* Unrolled: each load and splat then takes its address as a
         * constant offset (a loop computed each one, measured 40% slower). */
#pragma clang loop unroll(full)
        for (size_t g = 0; g < 8; g++) {
            const q8_0x4_group codes = q8_0x4_group_at(block + 8 + 16 * g);
            for (size_t i = 0; i < tokens; i++) q8_0x4_group_add(p[i], &codes, &a[i], b, g);
        }
        const v128_t d = q8_0x4_scales(block);
        for (size_t i = 0; i < tokens; i++) {
            const v128_t S = q8_0x4_partial_sums(p[i]);
            const v128_t da = wasm_v128_load32_splat(a[i].scales + 4 * b);
            acc[i][b & 3] = wasm_f32x4_add(acc[i][b & 3], wasm_f32x4_mul(wasm_f32x4_mul(d, da), wasm_f32x4_convert_i32x4(S)));
        }
    }
    for (size_t i = 0; i < tokens; i++) out[i] = kvc_combine_accumulators(acc[i]);
}

KVC_GEMM_PACKED4(kvc_gemm_q8_0x4__wasmsimd, q8_0x4_tile, kvc_gemm_q8_0__wasmsimd, 32)
