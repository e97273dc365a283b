#include <wasm_simd128.h>

#include "kernels.h"
#include "q8-rows.h"
#include "scores-i8-wasmsimd.h"

/*
 * i16 query codes against i8 row codes with i32x4.dot_i16x8_s: eight
 * products per instruction, summed exactly in i32 within a block of
 * KVC_Q8_DOT_BLOCK channels.  Integer sums do not depend on their order, so
 * these are the scalar kernel's bits.  Each row's codes are widened once and
 * used by up to eight code vectors (four queries' hi and lo).
 */

/* One row's dots over channels [begin, end), into acc[8] (hi, then lo). */
static void row_dots(const kvc_query_codes4 *queries, const int8_t *codes, size_t begin, size_t end,
                     v128_t *acc) {
    size_t j = begin;
    for (; j + 16 <= end; j += 16) {
        const v128_t c = wasm_v128_load(codes + j);
        kvc_dot16_i8(queries->nq, queries->q16, j, c, acc);
        kvc_dot16_i8(queries->nq, queries->q16 + 4, j, c, acc + 4);
    }
    if (j < end) {
        kvc_dot_tail_i8(queries->nq, queries->q16, j, end - j, codes + j, acc);
        kvc_dot_tail_i8(queries->nq, queries->q16 + 4, j, end - j, codes + j, acc + 4);
    }
}

void kvc_scores_q8__wasmsimd(size_t G, size_t n, size_t d, const uint8_t *codes,
                             const float *scales, const uint8_t *qrows, float sqrt_d, float *z,
                             size_t z_stride) {
    const size_t stride = kvc_q8_row_bytes(d);
    const v128_t divisor = wasm_f32x4_splat(sqrt_d);
    /* Up to four queries per pass over the rows, their hi and lo code
     * vectors in lanes 0..3 and 4..7: each row's codes are loaded and
     * widened once for all eight. */
    for (size_t g = 0; g < G; g += 4) {
        const kvc_query_codes4 queries = kvc_query_codes4_of(G, g, d, codes, scales);
        const uint8_t *qrow = qrows;
        for (size_t p = 0; p < n; p++, qrow += stride) {
            /* Lane qi of dots[0] (hi) and dots[1] (lo): the dot, block by block. */
            v128_t dots[2] = {wasm_f32x4_const_splat(0.0f), wasm_f32x4_const_splat(0.0f)};
            for (size_t block = 0; block < d; block += KVC_Q8_DOT_BLOCK) {
                const size_t end = block + KVC_Q8_DOT_BLOCK < d ? block + KVC_Q8_DOT_BLOCK : d;
                v128_t acc[8];
                for (int qi = 0; qi < 8; qi++) acc[qi] = wasm_i32x4_const_splat(0);
                row_dots(&queries, kvc_q8_row_codes(qrow), block, end, acc);
                dots[0] = wasm_f32x4_add(dots[0], wasm_f32x4_convert_i32x4(kvc_horizontal_sums4_i32(acc)));
                dots[1] = wasm_f32x4_add(dots[1], wasm_f32x4_convert_i32x4(kvc_horizontal_sums4_i32(acc + 4)));
            }
            kvc_store_scores4(&queries, dots, wasm_v128_load32_splat(qrow), divisor, g, p, z, z_stride);
        }
    }
}
