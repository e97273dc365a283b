/* gemm-q4_kx4-wasmrelaxed.c -- Q4_Kx4 weights with the relaxed i8 x i7 dot
 * product: gemm-q4_kx4-wasmsimd.c with each sub-block's codes (0..15, where
 * i16x8.relaxed_dot_i8x16_i7x16_s is exact and the same on every engine)
 * against four activation codes splat, two products to an i16 lane, the
 * eight chunks' lanes added in i16 (8 x 2 x 127 x 15 < 2^15), then
 * i32x4.dot_i16x8_s by the row's scale: lane r row r's S. */
#include "weights-wasmsimd.h"

#define Q4_KX4_NAME kvc_gemm_q4_kx4__wasmrelaxed
#define Q4_KX4_FILE_GEMM kvc_gemm_q4_k__wasmrelaxed

/* A chunk's two groups of four codes of each row against the tokens'
 * activations at and at + 16, into their i16 pairs. */
static inline __attribute__((always_inline)) void q4_kx4_chunk(const uint8_t *chunk, const kvc_act_q8_row a[4], size_t at,
                                                               size_t tokens, v128_t pairs[4]) {
    v128_t low, high;
    kvc_nibbles_i8x16(wasm_v128_load(chunk), &low, &high);
    for (size_t i = 0; i < tokens; i++) {
        const v128_t x0 = wasm_v128_load32_splat(a[i].codes + at), x1 = wasm_v128_load32_splat(a[i].codes + at + 16);
        pairs[i] = wasm_i16x8_add(pairs[i], wasm_i16x8_add(wasm_i16x8_relaxed_dot_i8x16_i7x16(x0, low),
                                                           wasm_i16x8_relaxed_dot_i8x16_i7x16(x1, high)));
    }
}

static inline __attribute__((always_inline)) void q4_kx4_subblock(const uint8_t *chunks, v128_t scales, int odd,
                                                                  const kvc_act_q8_row a[4], size_t at, size_t tokens,
                                                                  v128_t p[4][2]) {
    const v128_t scale = odd ? wasm_i16x8_shuffle(scales, scales, 1, 1, 3, 3, 5, 5, 7, 7)
                             : wasm_i16x8_shuffle(scales, scales, 0, 0, 2, 2, 4, 4, 6, 6);
    v128_t pairs[4];
    for (size_t i = 0; i < tokens; i++) pairs[i] = wasm_i16x8_const_splat(0);
    if (tokens == 1) {
        for (size_t c = 0; c < 4; c++) q4_kx4_chunk(chunks + 16 * c, a, at + 4 * c, 1, pairs);
    } else {
        /* One chunk a loop turn: unrolled, clang loads every chunk's
         * activations first and the engine spills them (measured 40% slower). */
#pragma clang loop unroll(disable)
        for (size_t c = 0; c < 4; c++) q4_kx4_chunk(chunks + 16 * c, a, at + 4 * c, tokens, pairs);
    }
    for (size_t i = 0; i < tokens; i++) p[i][0] = wasm_i32x4_add(p[i][0], wasm_i32x4_dot_i16x8(pairs[i], scale));
}

static inline v128_t q4_kx4_sums(const v128_t p[2]) {
    return p[0];
}

#include "gemm-q4_kx4-wasmsimd.c"
