#include <string.h>
#include <wasm_simd128.h>

#include "kernels.h"
#include "q8-rows.h"

/*
 * i16 query codes against i8 row codes with i32x4.dot_i16x8_s: eight
 * products per instruction, summed exactly in i32 within a block of
 * KVC_Q8_DOT_BLOCK channels.  Integer sums do not depend on their order, so
 * these are the scalar kernel's bits.  Each row's codes are widened once and
 * used by up to eight code vectors (four queries' hi and lo).
 */

/* Lane i of the result: the sum of the four lanes of v[i] (exact: integers). */
static v128_t horizontal_sums4_i32(const v128_t v[4]) {
    const v128_t a = wasm_i32x4_add(wasm_i32x4_shuffle(v[0], v[1], 0, 4, 2, 6),
                                    wasm_i32x4_shuffle(v[0], v[1], 1, 5, 3, 7));
    const v128_t b = wasm_i32x4_add(wasm_i32x4_shuffle(v[2], v[3], 0, 4, 2, 6),
                                    wasm_i32x4_shuffle(v[2], v[3], 1, 5, 3, 7));
    return wasm_i32x4_add(wasm_i32x4_shuffle(a, b, 0, 1, 4, 5), wasm_i32x4_shuffle(a, b, 2, 3, 6, 7));
}

/* sum_j q16[qi][j] * codes[j] over [begin, end) for nq <= 8 queries, added to acc. */
static void block_dots(size_t nq, const int16_t *const *q16, const int8_t *codes, size_t begin,
                       size_t end, v128_t *acc) {
    size_t j = begin;
    for (; j + 16 <= end; j += 16) {
        const v128_t c = wasm_v128_load(codes + j);
        const v128_t lo = wasm_i16x8_extend_low_i8x16(c);
        const v128_t hi = wasm_i16x8_extend_high_i8x16(c);
        for (size_t qi = 0; qi < nq; qi++) {
            acc[qi] = wasm_i32x4_add(acc[qi], wasm_i32x4_dot_i16x8(wasm_v128_load(q16[qi] + j), lo));
            acc[qi] = wasm_i32x4_add(acc[qi], wasm_i32x4_dot_i16x8(wasm_v128_load(q16[qi] + j + 8), hi));
        }
    }
    if (j < end) {
        /* 1..15 left: zero codes add nothing. */
        int8_t codes_tail[16] = {0};
        memcpy(codes_tail, codes + j, end - j);
        const v128_t c = wasm_v128_load(codes_tail);
        const v128_t lo = wasm_i16x8_extend_low_i8x16(c);
        const v128_t hi = wasm_i16x8_extend_high_i8x16(c);
        for (size_t qi = 0; qi < nq; qi++) {
            int16_t q_tail[16] = {0};
            memcpy(q_tail, q16[qi] + j, (end - j) * sizeof(int16_t));
            acc[qi] = wasm_i32x4_add(acc[qi], wasm_i32x4_dot_i16x8(wasm_v128_load(q_tail), lo));
            acc[qi] = wasm_i32x4_add(acc[qi], wasm_i32x4_dot_i16x8(wasm_v128_load(q_tail + 8), hi));
        }
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
        const size_t nq = G - g < 4 ? G - g : 4;
        const int16_t *qs[8];
        float hi_scales[4] = {0.0f}, lo_scales[4] = {0.0f};
        for (size_t qi = 0; qi < nq; qi++) {
            qs[qi] = (const int16_t *)(codes + (g + qi) * KVC_QUERY_CODE_BYTES(d));
            qs[4 + qi] = qs[qi] + d;
            hi_scales[qi] = scales[2 * (g + qi)];
            lo_scales[qi] = scales[2 * (g + qi) + 1];
        }
        const v128_t hi_scale = wasm_v128_load(hi_scales), lo_scale = wasm_v128_load(lo_scales);
        const uint8_t *qrow = qrows;
        for (size_t p = 0; p < n; p++, qrow += stride) {
            const int8_t *row_codes = kvc_q8_row_codes(qrow);
            /* Lane qi of dots[0] (hi) and dots[1] (lo): the dot, block by block. */
            v128_t dots[2] = {wasm_f32x4_const_splat(0.0f), wasm_f32x4_const_splat(0.0f)};
            for (size_t block = 0; block < d; block += KVC_Q8_DOT_BLOCK) {
                const size_t end = block + KVC_Q8_DOT_BLOCK < d ? block + KVC_Q8_DOT_BLOCK : d;
                v128_t acc[8];
                for (int qi = 0; qi < 8; qi++) acc[qi] = wasm_i32x4_const_splat(0);
                block_dots(nq, qs, row_codes, block, end, acc);
                block_dots(nq, qs + 4, row_codes, block, end, acc + 4);
                dots[0] = wasm_f32x4_add(dots[0], wasm_f32x4_convert_i32x4(horizontal_sums4_i32(acc)));
                dots[1] = wasm_f32x4_add(dots[1], wasm_f32x4_convert_i32x4(horizontal_sums4_i32(acc + 4)));
            }
            /* (s_p * (dot * scale)) / sqrt_d for hi and for lo, then their sum. */
            const v128_t row_scale = wasm_v128_load32_splat(qrow);
            const v128_t hi_z = wasm_f32x4_div(wasm_f32x4_mul(row_scale, wasm_f32x4_mul(dots[0], hi_scale)), divisor);
            const v128_t lo_z = wasm_f32x4_div(wasm_f32x4_mul(row_scale, wasm_f32x4_mul(dots[1], lo_scale)), divisor);
            float lanes[4];
            wasm_v128_store(lanes, wasm_f32x4_add(hi_z, lo_z));
            for (size_t qi = 0; qi < nq; qi++) z[(g + qi) * z_stride + p] = lanes[qi];
        }
    }
}
