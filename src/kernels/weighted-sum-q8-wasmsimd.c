#include <string.h>
#include <wasm_simd128.h>

#include "kernels.h"
#include "q8-rows.h"
#include "wasmsimd-convert.h"

/*
 * Two rows at a time share each 16-bit lane pair: their codes interleaved
 * (r_p[j], r_p+1[j], r_p[j+1], ...) and widened to i16, against the pair of
 * their weights (w_p, w_p+1) repeated, in i32x4.dot_i16x8_s -- two products
 * and their sum per lane, exact.  Channels go eight at a time (two i32
 * accumulators per query), up to four queries per pass over the rows, so
 * that the interleaved codes are made once for every query of the pass.
 */

/* Eight codes of rows a and b (b may be NULL: zeros) interleaved and widened:
 * lanes (a0 b0 a1 b1 a2 b2 a3 b3) and (a4 b4 ... a7 b7). */
static void interleave8(const int8_t *a, const int8_t *b, size_t count, v128_t *lo, v128_t *hi) {
    int8_t ta[8] = {0}, tb[8] = {0};
    memcpy(ta, a, count);
    if (b) memcpy(tb, b, count);
    const v128_t va = wasm_v128_load64_zero(ta), vb = wasm_v128_load64_zero(tb);
    const v128_t mixed = wasm_i8x16_shuffle(va, vb, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    *lo = wasm_i16x8_extend_low_i8x16(mixed);
    *hi = wasm_i16x8_extend_high_i8x16(mixed);
}

/* The same for a full eight channels straight from the rows. */
static void interleave8_full(const int8_t *a, const int8_t *b, v128_t *lo, v128_t *hi) {
    const v128_t va = wasm_v128_load64_zero(a);
    const v128_t vb = b ? wasm_v128_load64_zero(b) : wasm_i32x4_const_splat(0);
    const v128_t mixed = wasm_i8x16_shuffle(va, vb, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    *lo = wasm_i16x8_extend_low_i8x16(mixed);
    *hi = wasm_i16x8_extend_high_i8x16(mixed);
}

/* Channels [j, j + count) (count <= 8) of nq <= 4 queries over n rows;
 * pairs[qi][p / 2] holds the weights of rows p and p + 1 as two i16. */
static void sum8(size_t nq, size_t n, size_t j, size_t count,
                 const uint32_t (*pairs)[KVC_Q8_SUM_ROWS / 2], const float *w_scales,
                 const uint8_t *const *rows, float *const *out) {
    v128_t acc_lo[4], acc_hi[4];
    for (size_t qi = 0; qi < nq; qi++) acc_lo[qi] = acc_hi[qi] = wasm_i32x4_const_splat(0);
    for (size_t p = 0; p < n; p += 2) {
        const int8_t *a = kvc_q8_row_codes(rows[p]) + j;
        const int8_t *b = p + 1 < n ? kvc_q8_row_codes(rows[p + 1]) + j : NULL;
        v128_t lo, hi;
        if (count == 8) interleave8_full(a, b, &lo, &hi);
        else interleave8(a, b, count, &lo, &hi);
        for (size_t qi = 0; qi < nq; qi++) {
            const v128_t weights = wasm_v128_load32_splat(&pairs[qi][p / 2]);
            acc_lo[qi] = wasm_i32x4_add(acc_lo[qi], wasm_i32x4_dot_i16x8(lo, weights));
            acc_hi[qi] = wasm_i32x4_add(acc_hi[qi], wasm_i32x4_dot_i16x8(hi, weights));
        }
    }
    for (size_t qi = 0; qi < nq; qi++) {
        /* out += (float)acc * scale, lane by lane as the scalar kernel. */
        const v128_t scale = wasm_f32x4_splat(w_scales[qi]);
        float sums[8];
        wasm_v128_store(sums, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(acc_lo[qi]), scale));
        wasm_v128_store(sums + 4, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(acc_hi[qi]), scale));
        for (size_t c = 0; c < count; c++) out[qi][j + c] = out[qi][j + c] + sums[c];
    }
}

void kvc_weighted_sum_q8__wasmsimd(size_t G, size_t n, size_t d, const int16_t *w16,
                                   size_t w_stride, const float *w_scales,
                                   const uint8_t *const *rows, float *out) {
    uint32_t pairs[4][KVC_Q8_SUM_ROWS / 2];
    for (size_t g = 0; g < G; g += 4) {
        const size_t nq = G - g < 4 ? G - g : 4;
        float *outs[4];
        for (size_t qi = 0; qi < nq; qi++) {
            const int16_t *w = w16 + (g + qi) * w_stride;
            for (size_t p = 0; p < n; p += 2)
                pairs[qi][p / 2] = (uint16_t)w[p] | (uint32_t)(uint16_t)(p + 1 < n ? w[p + 1] : 0) << 16;
            outs[qi] = out + (g + qi) * d;
        }
        for (size_t j = 0; j < d; j += 8)
            sum8(nq, n, j, d - j < 8 ? d - j : 8, pairs, w_scales + g, rows, outs);
    }
}
