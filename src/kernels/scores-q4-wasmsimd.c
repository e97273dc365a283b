#include <wasm_simd128.h>

#include "kernels.h"
#include "q4-pack.h"
#include "q8-rows.h"
#include "scores-i8-wasmsimd.h"

/*
 * The q8 scores (scores-q8-wasmsimd.c) with each row's codes decoded from
 * their nibbles in i16 lanes: a full block's 16 bytes read as eight i16
 * lanes hold, from bit 0, channels 2k, 16 + 2k, 2k + 1 and 17 + 2k of the
 * block in lane k, so two i16 shifts bring each nibble down sign-extended
 * (one for the top one), and a multiply by its group's 2^shift makes it
 * its int8 code, for all of a row's queries.  That is seven shifts and four
 * multiplies for 32 channels, where looking nibbles up in a table takes a
 * variable i8 shift, a swizzle and two widenings per 16.  The lanes come
 * out with each group's even channels before its odd ones, so the queries'
 * codes are put in that order once per call and block.  The sums are exact
 * in i32 within blocks of KVC_Q8_DOT_BLOCK channels, as the q8 kernels',
 * and integer sums do not depend on their order: the bits of the scalar
 * definition (unpack, score as int8).
 */

/* 2^shift in every i16 lane, by shift. */
static const int16_t shift_multipliers[KVC_Q4_MAX_SHIFT + 1][8] = {
    {1, 1, 1, 1, 1, 1, 1, 1}, {2, 2, 2, 2, 2, 2, 2, 2}, {4, 4, 4, 4, 4, 4, 4, 4}, {8, 8, 8, 8, 8, 8, 8, 8},
};

/* A query's codes [begin, begin + count) (count a multiple of 32), each 16
 * channels' even ones then their odd ones, to `ordered`. */
static void order_codes(const int16_t *q16, size_t begin, size_t count, int16_t *ordered) {
    for (size_t j = 0; j < count; j += 16) {
        const v128_t lo = wasm_v128_load(q16 + begin + j), hi = wasm_v128_load(q16 + begin + j + 8);
        wasm_v128_store(ordered + j, wasm_i16x8_shuffle(lo, hi, 0, 2, 4, 6, 8, 10, 12, 14));
        wasm_v128_store(ordered + j + 8, wasm_i16x8_shuffle(lo, hi, 1, 3, 5, 7, 9, 11, 13, 15));
    }
}

/* acc[qi] += the dots of one full block of a row (`bytes` its packed
 * codes, `shift_pair` its two groups' shifts, kvc_q4_block_shifts) with
 * ordered[qi] + at, its codes' place in the ordered block, for nq queries. */
static inline void block_dots(size_t nq, int16_t (*ordered)[KVC_Q8_DOT_BLOCK], size_t at, v128_t bytes,
                              unsigned shift_pair, v128_t *acc) {
    const v128_t mul_a = wasm_v128_load(shift_multipliers[shift_pair & 3u]);
    const v128_t mul_b = wasm_v128_load(shift_multipliers[shift_pair >> 2]);
    const v128_t a_even = wasm_i16x8_mul(wasm_i16x8_shr(wasm_i16x8_shl(bytes, 12), 12), mul_a);
    const v128_t a_odd = wasm_i16x8_mul(wasm_i16x8_shr(wasm_i16x8_shl(bytes, 4), 12), mul_a);
    const v128_t b_even = wasm_i16x8_mul(wasm_i16x8_shr(wasm_i16x8_shl(bytes, 8), 12), mul_b);
    const v128_t b_odd = wasm_i16x8_mul(wasm_i16x8_shr(bytes, 12), mul_b);
    for (size_t qi = 0; qi < nq; qi++) {
        const int16_t *q = ordered[qi] + at;
        acc[qi] = wasm_i32x4_add(acc[qi], wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_v128_load(q), a_even),
                                                         wasm_i32x4_dot_i16x8(wasm_v128_load(q + 8), a_odd)));
        acc[qi] = wasm_i32x4_add(acc[qi], wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_v128_load(q + 16), b_even),
                                                         wasm_i32x4_dot_i16x8(wasm_v128_load(q + 24), b_odd)));
    }
}

/* One row's dots over channels [begin, end) (begin a multiple of 32) for nq
 * queries, into acc[nq]: full blocks from the ordered codes, a last block of
 * fewer than 32 channels decoded as the scalar does, against the codes in
 * their own order.  Inlined with nq = 4 as a constant. */
static inline void row_dots(size_t nq, int16_t (*ordered)[KVC_Q8_DOT_BLOCK], const int16_t *const *q16,
                            size_t d, const uint8_t *shifts, const uint8_t *packed, size_t begin,
                            size_t end, v128_t *acc) {
    size_t j = begin;
    const size_t full = begin + (end - begin) / KVC_Q4_BLOCK * KVC_Q4_BLOCK;
    _Pragma("clang loop unroll(disable)")
    for (; j < full; j += KVC_Q4_BLOCK) {
        block_dots(nq, ordered, j - begin, wasm_v128_load(packed + j / 2),
                   kvc_q4_block_shifts(shifts, j / KVC_Q4_BLOCK), acc);
    }
    if (j < end) {
        int8_t codes[KVC_KERNEL_MAX_DIM];
        kvc_q4_unpack_block(d, j, shifts, packed, codes);
        for (size_t at = j; at < end; at += 16)
            kvc_dot_tail_i8(nq, q16, at, end - at < 16 ? end - at : 16, codes + at, acc);
    }
}

void kvc_scores_q4__wasmsimd(size_t G, size_t n, size_t d, const int16_t *codes, const float *scales,
                             const uint8_t *q4rows, float *z, size_t z_stride) {
    const size_t stride = kvc_q4_row_bytes(d), shift_bytes = kvc_q4_shift_bytes(d);
    int16_t ordered[4][KVC_Q8_DOT_BLOCK];
    for (size_t g = 0; g < G; g += 4) {
        const kvc_query_codes4 queries = kvc_query_codes4_of(G, g, d, codes, scales);
        for (size_t block = 0; block < d; block += KVC_Q8_DOT_BLOCK) {
            const size_t end = block + KVC_Q8_DOT_BLOCK < d ? block + KVC_Q8_DOT_BLOCK : d;
            const size_t full = (end - block) / KVC_Q4_BLOCK * KVC_Q4_BLOCK;
            for (size_t qi = 0; qi < queries.nq; qi++) order_codes(queries.q16[qi], block, full, ordered[qi]);
            const uint8_t *qrow = q4rows;
            for (size_t p = 0; p < n; p++, qrow += stride) {
                const uint8_t *shifts = qrow + sizeof(float), *packed = shifts + shift_bytes;
                v128_t acc[4];
                for (int qi = 0; qi < 4; qi++) acc[qi] = wasm_i32x4_const_splat(0);
                if (queries.nq == 4) row_dots(4, ordered, queries.q16, d, shifts, packed, block, end, acc);
                else row_dots(queries.nq, ordered, queries.q16, d, shifts, packed, block, end, acc);
                /* The blocks' sums added in f32 in order, in z until the last. */
                v128_t dots = wasm_f32x4_convert_i32x4(kvc_horizontal_sums4_i32(acc));
                if (block > 0) dots = wasm_f32x4_add(kvc_load_lanes4(&queries, g, p, z, z_stride), dots);
                if (end == d) kvc_store_scores4(&queries, dots, wasm_v128_load32_splat(qrow), g, p, z, z_stride);
                else kvc_store_lanes4(&queries, dots, g, p, z, z_stride);
            }
        }
    }
}
