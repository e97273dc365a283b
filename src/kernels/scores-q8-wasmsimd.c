#include <string.h>
#include <wasm_simd128.h>

#include "kernels.h"
#include "q8-rows.h"

/*
 * i16 query codes against i8 row codes with i32x4.dot_i16x8_s: eight
 * products per instruction, summed exactly in i32 within a block of
 * KVC_Q8_DOT_BLOCK channels.  Integer sums do not depend on their order, so
 * these are the scalar kernel's bits.  Each row's codes are widened once and
 * used by up to eight queries (four heads' hi and lo code vectors).
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

/* (s_p * (dot * q_scale)) / sqrt_d for four lanes, each to its query's row of z. */
static void store_scores(v128_t dots, v128_t q_scale, v128_t row_scale, v128_t divisor, size_t count,
                         float *z, size_t z_stride) {
    float lanes[4];
    wasm_v128_store(lanes, wasm_f32x4_div(wasm_f32x4_mul(row_scale, wasm_f32x4_mul(dots, q_scale)), divisor));
    for (size_t qi = 0; qi < count; qi++) z[qi * z_stride] = lanes[qi];
}

void kvc_scores_q8__wasmsimd(size_t G, size_t n, size_t d, const int16_t *q16,
                             const float *q_scales, const uint8_t *qrows, float sqrt_d, float *z,
                             size_t z_stride) {
    const size_t stride = kvc_q8_row_bytes(d);
    const v128_t divisor = wasm_f32x4_splat(sqrt_d);
    /* Up to eight queries per pass over the rows: each row's codes are
     * loaded and widened once for all of them. */
    for (size_t g = 0; g < G; g += 8) {
        const size_t nq = G - g < 8 ? G - g : 8;
        const int16_t *qs[8];
        float scales[8] = {0.0f};
        for (size_t qi = 0; qi < nq; qi++) {
            qs[qi] = q16 + (g + qi) * d;
            scales[qi] = q_scales[g + qi];
        }
        const v128_t q_scale_lo = wasm_v128_load(scales), q_scale_hi = wasm_v128_load(scales + 4);
        const uint8_t *qrow = qrows;
        for (size_t p = 0; p < n; p++, qrow += stride) {
            const int8_t *codes = kvc_q8_row_codes(qrow);
            /* Lane qi of dots[0] (queries 0..3) and dots[1] (4..7): the dot, block by block. */
            v128_t dots[2] = {wasm_f32x4_const_splat(0.0f), wasm_f32x4_const_splat(0.0f)};
            for (size_t block = 0; block < d; block += KVC_Q8_DOT_BLOCK) {
                const size_t end = block + KVC_Q8_DOT_BLOCK < d ? block + KVC_Q8_DOT_BLOCK : d;
                v128_t acc[8];
                for (int qi = 0; qi < 8; qi++) acc[qi] = wasm_i32x4_const_splat(0);
                block_dots(nq, qs, codes, block, end, acc);
                dots[0] = wasm_f32x4_add(dots[0], wasm_f32x4_convert_i32x4(horizontal_sums4_i32(acc)));
                dots[1] = wasm_f32x4_add(dots[1], wasm_f32x4_convert_i32x4(horizontal_sums4_i32(acc + 4)));
            }
            const v128_t row_scale = wasm_v128_load32_splat(qrow);
            float *zp = z + g * z_stride + p;
            store_scores(dots[0], q_scale_lo, row_scale, divisor, nq < 4 ? nq : 4, zp, z_stride);
            if (nq > 4) store_scores(dots[1], q_scale_hi, row_scale, divisor, nq - 4, zp + 4 * z_stride, z_stride);
        }
    }
}
