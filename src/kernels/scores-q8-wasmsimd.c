#include <wasm_simd128.h>

#include "kernels.h"
#include "q8-rows.h"
#include "scores-i8-wasmsimd.h"

/*
 * i16 query codes against i8 row codes with i32x4.dot_i16x8_s: eight
 * products per instruction, summed exactly in i32 within a block of
 * KVC_Q8_DOT_BLOCK channels.  Integer sums do not depend on their order, so
 * these are the scalar kernel's bits.  Each row's codes are widened once and
 * used by up to four queries.
 */

/* One row's dots over channels [begin, end) for nq queries, into acc[nq]:
 * inlined with nq = 4, the group of a llama-style GQA, as a constant. */
static inline void row_dots(size_t nq, const int16_t *const *q16, const int8_t *codes, size_t begin,
                            size_t end, v128_t *acc) {
    size_t j = begin;
    for (; j + 16 <= end; j += 16) kvc_dot16_i8(nq, q16, j, wasm_v128_load(codes + j), acc);
    if (j < end) kvc_dot_tail_i8(nq, q16, j, end - j, codes + j, acc);
}

void kvc_scores_q8__wasmsimd(size_t G, size_t n, size_t d, const int16_t *codes,
                             const float *scales, const uint8_t *qrows, float *z, size_t z_stride) {
    const size_t stride = kvc_q8_row_bytes(d);
    for (size_t g = 0; g < G; g += 4) {
        const kvc_query_codes4 queries = kvc_query_codes4_of(G, g, d, codes, scales);
        const uint8_t *qrow = qrows;
        for (size_t p = 0; p < n; p++, qrow += stride) {
            /* Lane qi: query qi's dot, block by block. */
            v128_t dots = wasm_f32x4_const_splat(0.0f);
            for (size_t block = 0; block < d; block += KVC_Q8_DOT_BLOCK) {
                const size_t end = block + KVC_Q8_DOT_BLOCK < d ? block + KVC_Q8_DOT_BLOCK : d;
                v128_t acc[4];
                for (int qi = 0; qi < 4; qi++) acc[qi] = wasm_i32x4_const_splat(0);
                if (queries.nq == 4) row_dots(4, queries.q16, kvc_q8_row_codes(qrow), block, end, acc);
                else row_dots(queries.nq, queries.q16, kvc_q8_row_codes(qrow), block, end, acc);
                dots = wasm_f32x4_add(dots, wasm_f32x4_convert_i32x4(kvc_horizontal_sums4_i32(acc)));
            }
            kvc_store_scores4(&queries, dots, wasm_v128_load32_splat(qrow), g, p, z, z_stride);
        }
    }
}
