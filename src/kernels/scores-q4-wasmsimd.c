#include <wasm_simd128.h>

#include "kernels.h"
#include "q4-pack.h"
#include "q8-rows.h"
#include "scores-i8-wasmsimd.h"

/*
 * The q8 scores (scores-q8-wasmsimd.c) with each row's codes decoded from
 * their nibbles in registers, straight to i16 lanes: the 16 bytes of a
 * 32-channel block zero-extended to two i16x8, each nibble (the high ones
 * masked) moved to the top of its lane and shifted back arithmetically -- by
 * fewer bits for a group's shift, which multiplies it by 2^shift on the way.  (i16
 * shifts are single instructions where i8 ones are not.)  The codes are
 * decoded once for up to eight i16 code vectors (four queries' hi and lo),
 * nothing is written back, and the sums are exact in i32 within blocks of
 * KVC_Q8_DOT_BLOCK channels, as the q8 kernels': the bits of the scalar
 * definition (unpack, score as int8).
 */

/* One row's dots over channels [begin, end) (begin a multiple of 32), into acc[8]. */
static void row_dots(const kvc_query_codes4 *queries, size_t d, const uint8_t *shifts,
                     const uint8_t *packed, size_t begin, size_t end, v128_t *acc) {
    size_t j = begin;
    for (; j + KVC_Q4_BLOCK <= end; j += KVC_Q4_BLOCK) {
        const size_t g = j / KVC_Q4_GROUP;
        /* bytes 0..7 hold channels 0..7 (low nibbles) and 16..23 (high),
         * bytes 8..15 channels 8..15 and 24..31 */
        const v128_t bytes = wasm_v128_load(packed + j / 2);
        const v128_t first = wasm_u16x8_extend_low_u8x16(bytes), second = wasm_u16x8_extend_high_u8x16(bytes);
        const v128_t low_factor = wasm_i16x8_splat((int16_t)(1 << kvc_q4_shift(shifts, g)));
        const v128_t high_factor = wasm_i16x8_splat((int16_t)(1 << kvc_q4_shift(shifts, g + 1)));
        const v128_t c0 = wasm_i16x8_mul(wasm_i16x8_shr(wasm_i16x8_shl(first, 12), 12), low_factor);
        const v128_t c8 = wasm_i16x8_mul(wasm_i16x8_shr(wasm_i16x8_shl(second, 12), 12), low_factor);
        const v128_t c16 = wasm_i16x8_mul(wasm_i16x8_shr(wasm_i16x8_shl(first, 8), 12), high_factor);
        const v128_t c24 = wasm_i16x8_mul(wasm_i16x8_shr(wasm_i16x8_shl(second, 8), 12), high_factor);
        kvc_dot16_i16(queries->nq, queries->q16, j, c0, c8, acc);
        kvc_dot16_i16(queries->nq, queries->q16 + 4, j, c0, c8, acc + 4);
        kvc_dot16_i16(queries->nq, queries->q16, j + 16, c16, c24, acc);
        kvc_dot16_i16(queries->nq, queries->q16 + 4, j + 16, c16, c24, acc + 4);
    }
    if (j < end) {
        /* A last block of fewer than 32 channels, decoded as the scalar does. */
        int8_t codes[KVC_KERNEL_MAX_DIM];
        kvc_q4_unpack_block(d, j, shifts, packed, codes);
        for (size_t at = j; at < end; at += 16) {
            const size_t count = end - at < 16 ? end - at : 16;
            kvc_dot_tail_i8(queries->nq, queries->q16, at, count, codes + at, acc);
            kvc_dot_tail_i8(queries->nq, queries->q16 + 4, at, count, codes + at, acc + 4);
        }
    }
}

void kvc_scores_q4__wasmsimd(size_t G, size_t n, size_t d, const uint8_t *codes, const float *scales,
                             const uint8_t *q4rows, float sqrt_d, float *z, size_t z_stride) {
    const size_t stride = kvc_q4_row_bytes(d), shift_bytes = kvc_q4_shift_bytes(d);
    const v128_t divisor = wasm_f32x4_splat(sqrt_d);
    for (size_t g = 0; g < G; g += 4) {
        const kvc_query_codes4 queries = kvc_query_codes4_of(G, g, d, codes, scales);
        const uint8_t *qrow = q4rows;
        for (size_t p = 0; p < n; p++, qrow += stride) {
            const uint8_t *shifts = qrow + sizeof(float), *packed = shifts + shift_bytes;
            v128_t dots[2] = {wasm_f32x4_const_splat(0.0f), wasm_f32x4_const_splat(0.0f)};
            for (size_t block = 0; block < d; block += KVC_Q8_DOT_BLOCK) {
                const size_t end = block + KVC_Q8_DOT_BLOCK < d ? block + KVC_Q8_DOT_BLOCK : d;
                v128_t acc[8];
                for (int qi = 0; qi < 8; qi++) acc[qi] = wasm_i32x4_const_splat(0);
                row_dots(&queries, d, shifts, packed, block, end, acc);
                dots[0] = wasm_f32x4_add(dots[0], wasm_f32x4_convert_i32x4(kvc_horizontal_sums4_i32(acc)));
                dots[1] = wasm_f32x4_add(dots[1], wasm_f32x4_convert_i32x4(kvc_horizontal_sums4_i32(acc + 4)));
            }
            kvc_store_scores4(&queries, dots, wasm_v128_load32_splat(qrow), divisor, g, p, z, z_stride);
        }
    }
}
