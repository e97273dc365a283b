#include <wasm_simd128.h>

#include "kernels.h"
#include "q4-decode-wasmsimd.h"
#include "q4-pack.h"
#include "q8-rows.h"
#include "scores-i8-wasmsimd.h"

/*
 * The q8 scores (scores-q8-wasmsimd.c) with each row's codes decoded from
 * their nibbles in registers (q4-decode-wasmsimd.h), 16 channels a loop
 * turn, once for up to four queries, nothing written back; the sums exact in i32 within blocks of
 * KVC_Q8_DOT_BLOCK channels, as the q8 kernels': the bits of the scalar
 * definition (unpack, score as int8).
 */

/* One row's dots over channels [begin, end) (begin a multiple of 32) for nq
 * queries, into acc[nq]; inlined with nq = 4 as a constant. */
static inline void row_dots(size_t nq, const int16_t *const *q16, size_t d, const uint8_t *shifts,
                            const uint8_t *packed, size_t begin, size_t end, v128_t *acc) {
    size_t j = begin;
    const size_t full = begin + (end - begin) / KVC_Q4_BLOCK * KVC_Q4_BLOCK;
    _Pragma("clang loop unroll(disable)")
    for (; j < full; j += KVC_Q4_GROUP)
        kvc_dot16_i8(nq, q16, j, kvc_q4_decode_group(shifts, packed, j / KVC_Q4_GROUP), acc);
    if (j < end) {
        /* A last block of fewer than 32 channels, decoded as the scalar does. */
        int8_t codes[KVC_KERNEL_MAX_DIM];
        kvc_q4_unpack_block(d, j, shifts, packed, codes);
        for (size_t at = j; at < end; at += 16)
            kvc_dot_tail_i8(nq, q16, at, end - at < 16 ? end - at : 16, codes + at, acc);
    }
}

void kvc_scores_q4__wasmsimd(size_t G, size_t n, size_t d, const int16_t *codes, const float *scales,
                             const uint8_t *q4rows, float *z, size_t z_stride) {
    const size_t stride = kvc_q4_row_bytes(d), shift_bytes = kvc_q4_shift_bytes(d);
    for (size_t g = 0; g < G; g += 4) {
        const kvc_query_codes4 queries = kvc_query_codes4_of(G, g, d, codes, scales);
        const uint8_t *qrow = q4rows;
        for (size_t p = 0; p < n; p++, qrow += stride) {
            const uint8_t *shifts = qrow + sizeof(float), *packed = shifts + shift_bytes;
            v128_t dots = wasm_f32x4_const_splat(0.0f);
            for (size_t block = 0; block < d; block += KVC_Q8_DOT_BLOCK) {
                const size_t end = block + KVC_Q8_DOT_BLOCK < d ? block + KVC_Q8_DOT_BLOCK : d;
                v128_t acc[4];
                for (int qi = 0; qi < 4; qi++) acc[qi] = wasm_i32x4_const_splat(0);
                if (queries.nq == 4) row_dots(4, queries.q16, d, shifts, packed, block, end, acc);
                else row_dots(queries.nq, queries.q16, d, shifts, packed, block, end, acc);
                dots = wasm_f32x4_add(dots, wasm_f32x4_convert_i32x4(kvc_horizontal_sums4_i32(acc)));
            }
            kvc_store_scores4(&queries, dots, wasm_v128_load32_splat(qrow), g, p, z, z_stride);
        }
    }
}
