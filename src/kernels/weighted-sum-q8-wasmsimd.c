#include <string.h>
#include <wasm_simd128.h>

#include "kernels.h"
#include "q8-rows.h"

/*
 * Two rows at a time share each 16-bit lane pair: their codes interleaved
 * (r_p[j], r_p+1[j], r_p[j+1], ...) and widened to i16, against the pair of
 * their weights (w_p, w_p+1) splatted, in i32x4.dot_i16x8_s -- two products
 * and their sum per lane, exact.  Channels go eight at a time (two i32
 * accumulators per query), up to four queries per pass over the rows, so
 * that the interleaved codes are made once for every query of the pass.  The
 * rows lie one after another, so a pass walks one pointer down them, and a
 * pair's four weight vectors lie side by side: the loop's addresses are
 * constant offsets from two pointers (V8 keeps no index arithmetic in it).
 * The loop over full pairs of rows and full strips of eight channels has no
 * branch; an odd last row and a last strip of fewer channels go apart.
 */

/* The weights of a pass: pairs[p / 2][qi] holds rows p and p + 1's weights
 * for query qi as two i16 in every lane pair (a missing row p + 1: 0). */
typedef struct weight_pairs {
    v128_t pairs[KVC_Q8_SUM_ROWS / 2][4];
} weight_pairs;

/* Eight codes of rows a and b interleaved and widened: lanes (a0 b0 a1 b1
 * a2 b2 a3 b3) to *lo and (a4 b4 ... a7 b7) to *hi. */
static inline void interleave8(v128_t a, v128_t b, v128_t *lo, v128_t *hi) {
    const v128_t mixed = wasm_i8x16_shuffle(a, b, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    *lo = wasm_i16x8_extend_low_i8x16(mixed);
    *hi = wasm_i16x8_extend_high_i8x16(mixed);
}

__attribute__((always_inline)) static inline void accumulate(size_t nq, const v128_t *pair, v128_t lo, v128_t hi,
                                                             v128_t *acc_lo, v128_t *acc_hi) {
    for (size_t qi = 0; qi < nq; qi++) {
        acc_lo[qi] = wasm_i32x4_add(acc_lo[qi], wasm_i32x4_dot_i16x8(lo, pair[qi]));
        acc_hi[qi] = wasm_i32x4_add(acc_hi[qi], wasm_i32x4_dot_i16x8(hi, pair[qi]));
    }
}

/* out[qi][j + c] += (float)acc * scale, lane by lane as the scalar kernel,
 * for c < count. */
static inline void add_out(size_t nq, size_t j, size_t count, const v128_t *acc_lo, const v128_t *acc_hi,
                           const float *w_scales, float *const *out) {
    for (size_t qi = 0; qi < nq; qi++) {
        const v128_t scale = wasm_f32x4_splat(w_scales[qi]);
        float sums[8];
        wasm_v128_store(sums, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(acc_lo[qi]), scale));
        wasm_v128_store(sums + 4, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(acc_hi[qi]), scale));
        for (size_t c = 0; c < count; c++) out[qi][j + c] = out[qi][j + c] + sums[c];
    }
}

/* Channels [j, j + 8) of nq <= 4 queries over n rows of row_bytes each
 * (codes: the first row's codes). */
__attribute__((always_inline)) static inline void sum8(size_t nq, size_t n, size_t row_bytes, size_t j,
                                                       const int8_t *codes, const weight_pairs *w,
                                                       const float *w_scales, float *const *out) {
    v128_t acc_lo[4], acc_hi[4];
    for (size_t qi = 0; qi < 4; qi++) acc_lo[qi] = acc_hi[qi] = wasm_i32x4_const_splat(0);
    const int8_t *row = codes + j;
    const v128_t *pair = w->pairs[0];
    for (const v128_t *const end = pair + 4 * (n / 2); pair < end; pair += 4, row += 2 * row_bytes) {
        v128_t lo, hi;
        interleave8(wasm_v128_load64_zero(row), wasm_v128_load64_zero(row + row_bytes), &lo, &hi);
        accumulate(nq, pair, lo, hi, acc_lo, acc_hi);
    }
    if (n % 2) {
        v128_t lo, hi;
        interleave8(wasm_v128_load64_zero(row), wasm_i32x4_const_splat(0), &lo, &hi);
        accumulate(nq, pair, lo, hi, acc_lo, acc_hi);
    }
    add_out(nq, j, 8, acc_lo, acc_hi, w_scales, out);
}

/* sum8 for each number of queries, a constant in each: its loop over the
 * queries unrolled without a branch.  Reached through a table: called by
 * `if (nq == 4)`, clang sinks the calls into one with nq again, and a
 * branch per query stays in the hot loop. */
typedef void sum8_fn(size_t n, size_t row_bytes, size_t j, const int8_t *codes, const weight_pairs *w,
                     const float *w_scales, float *const *out);
#define KVC_SUM8_FOR(NQ)                                                                              \
    static void sum8_for_##NQ(size_t n, size_t row_bytes, size_t j, const int8_t *codes,              \
                              const weight_pairs *w, const float *w_scales, float *const *out) {      \
        sum8(NQ, n, row_bytes, j, codes, w, w_scales, out);                                           \
    }
KVC_SUM8_FOR(1)
KVC_SUM8_FOR(2)
KVC_SUM8_FOR(3)
KVC_SUM8_FOR(4)
static sum8_fn *const sum8_for[5] = {NULL, sum8_for_1, sum8_for_2, sum8_for_3, sum8_for_4};

/* The last count < 8 channels from j, through zero-padded copies. */
static void sum_tail(size_t nq, size_t n, size_t row_bytes, size_t j, size_t count, const int8_t *codes,
                     const weight_pairs *w, const float *w_scales, float *const *out) {
    v128_t acc_lo[4], acc_hi[4];
    for (size_t qi = 0; qi < 4; qi++) acc_lo[qi] = acc_hi[qi] = wasm_i32x4_const_splat(0);
    for (size_t p = 0; p < n; p += 2) {
        int8_t a[8] = {0}, b[8] = {0};
        memcpy(a, codes + p * row_bytes + j, count);
        if (p + 1 < n) memcpy(b, codes + (p + 1) * row_bytes + j, count);
        v128_t lo, hi;
        interleave8(wasm_v128_load64_zero(a), wasm_v128_load64_zero(b), &lo, &hi);
        accumulate(nq, w->pairs[p / 2], lo, hi, acc_lo, acc_hi);
    }
    add_out(nq, j, count, acc_lo, acc_hi, w_scales, out);
}

void kvc_weighted_sum_q8__wasmsimd(size_t G, size_t n, size_t d, const int16_t *w16,
                                   size_t w_stride, const float *w_scales,
                                   const uint8_t *rows, float *out) {
    weight_pairs w;
    const int8_t *codes = kvc_q8_row_codes(rows);
    const size_t row_bytes = kvc_q8_row_bytes(d), d8 = d & ~(size_t)7;
    for (size_t g = 0; g < G; g += 4) {
        const size_t nq = G - g < 4 ? G - g : 4;
        float *outs[4];
        for (size_t qi = 0; qi < nq; qi++) {
            const int16_t *wq = w16 + (g + qi) * w_stride;
            for (size_t p = 0; p < n; p += 2) {
                const uint32_t pair = (uint16_t)wq[p] | (uint32_t)(uint16_t)(p + 1 < n ? wq[p + 1] : 0) << 16;
                w.pairs[p / 2][qi] = wasm_i32x4_splat((int32_t)pair);
            }
            outs[qi] = out + (g + qi) * d;
        }
        sum8_fn *const sum = sum8_for[nq];
        for (size_t j = 0; j < d8; j += 8) sum(n, row_bytes, j, codes, &w, w_scales + g, outs);
        if (d8 < d) sum_tail(nq, n, row_bytes, d8, d - d8, codes, &w, w_scales + g, outs);
    }
}
