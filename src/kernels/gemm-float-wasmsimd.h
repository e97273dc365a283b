/*
 * gemm-float-wasmsimd.h -- the gemm of a float type (F32, F16, BF16) against
 * f32 activations, in SIMD128 or relaxed SIMD: a type's file defines
 *   KVC_FLOAT_NAME              the function
 *   KVC_FLOAT_BYTES             bytes per weight
 *   KVC_FLOAT_LOAD8(p, lo, hi)  the 8 weights at p as f32, exactly (zero
 *                               bytes must read as +0)
 *   KVC_FLOAT_MAC(acc, w, x)    acc + w * x lane-wise
 * and includes this file.  Each (row, token) has one accumulator vector,
 * lane k taking w_j * x_j for j = k mod 4 in order of j, and the scalar
 * kernel's closing sum (l0 + l1) + (l2 + l3): the SIMD128 set gives the
 * scalar bits; the relaxed one fuses as its engine does.  Decode runs four
 * rows at once, prefill two rows by four tokens: every accumulator its own
 * chain of adds, enough of them to hide their latency.
 */
#include <string.h>

#include "weights-wasmsimd.h"

/* R rows by TT tokens: out[r * TT + t] = the dot of w[r] with x[t]. */
#define KVC_FLOAT_TILE(R, TT)                                                                  \
    static void float_tile_##R##x##TT(size_t n, const uint8_t *const *w, const float *const *x, \
                                      float *out) {                                            \
        v128_t acc[R][TT];                                                                     \
        for (size_t r = 0; r < R; r++)                                                         \
            for (size_t t = 0; t < TT; t++) acc[r][t] = wasm_f32x4_const_splat(0.0f);          \
        size_t j = 0;                                                                          \
        for (; j + 8 <= n; j += 8) {                                                           \
            /* The weights once, each token's values as they are used: R x TT       \
             * accumulators, 2 R weights and two values live (2 x 4: 14 vectors). */ \
            v128_t w_low[R], w_high[R];                                                        \
            for (size_t r = 0; r < R; r++) KVC_FLOAT_LOAD8(w[r] + j * KVC_FLOAT_BYTES, &w_low[r], &w_high[r]); \
            for (size_t t = 0; t < TT; t++) {                                                  \
                const v128_t x_low = wasm_v128_load(x[t] + j), x_high = wasm_v128_load(x[t] + j + 4); \
                for (size_t r = 0; r < R; r++) {                                               \
                    KVC_FLOAT_MAC(acc[r][t], w_low[r], x_low);                                 \
                    KVC_FLOAT_MAC(acc[r][t], w_high[r], x_high);                               \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
        if (j < n) {                                                                           \
            /* 1..7 last values, zero-padded: +0 products leave every sum as it is. */         \
            float x_tail[TT][8];                                                               \
            uint8_t w_tail[8 * KVC_FLOAT_BYTES];                                               \
            memset(x_tail, 0, sizeof x_tail);                                                  \
            for (size_t t = 0; t < TT; t++) memcpy(x_tail[t], x[t] + j, (n - j) * sizeof(float)); \
            for (size_t r = 0; r < R; r++) {                                                   \
                memset(w_tail, 0, sizeof w_tail);                                              \
                memcpy(w_tail, w[r] + j * KVC_FLOAT_BYTES, (n - j) * KVC_FLOAT_BYTES);         \
                v128_t w_low, w_high;                                                          \
                KVC_FLOAT_LOAD8(w_tail, &w_low, &w_high);                                      \
                for (size_t t = 0; t < TT; t++) {                                              \
                    KVC_FLOAT_MAC(acc[r][t], w_low, wasm_v128_load(x_tail[t]));                \
                    KVC_FLOAT_MAC(acc[r][t], w_high, wasm_v128_load(x_tail[t] + 4));           \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
        for (size_t r = 0; r < R; r++)                                                         \
            for (size_t t = 0; t < TT; t++) out[r * TT + t] = kvc_combine_lanes(acc[r][t]);    \
    }

KVC_FLOAT_TILE(4, 1)
KVC_FLOAT_TILE(1, 1)
KVC_FLOAT_TILE(2, 4)
KVC_FLOAT_TILE(1, 4)

void KVC_FLOAT_NAME(size_t n, size_t rows, size_t T, const uint8_t *w, size_t row_bytes,
                    const uint8_t *xa, size_t xa_stride, float *y, size_t y_stride) {
    for (size_t t0 = 0; t0 < T; t0 += 4) {
        const kvc_token_tile tile = kvc_token_tile_at(xa, xa_stride, t0, T);
        const float *x[4];
        for (size_t i = 0; i < 4; i++) x[i] = (const float *)tile.row[i];
        size_t r = 0;
        if (tile.count == 1) {
            for (; r + 4 <= rows; r += 4) {
                const uint8_t *row4[4] = {w + r * row_bytes, w + (r + 1) * row_bytes,
                                          w + (r + 2) * row_bytes, w + (r + 3) * row_bytes};
                float out[4];
                float_tile_4x1(n, row4, x, out);
                for (size_t k = 0; k < 4; k++) y[t0 * y_stride + r + k] = out[k];
            }
            for (; r < rows; r++) {
                const uint8_t *row = w + r * row_bytes;
                float out;
                float_tile_1x1(n, &row, x, &out);
                y[t0 * y_stride + r] = out;
            }
            continue;
        }
        float out[8];
        for (; r + 2 <= rows; r += 2) {
            const uint8_t *row2[2] = {w + r * row_bytes, w + (r + 1) * row_bytes};
            float_tile_2x4(n, row2, x, out);
            for (size_t i = 0; i < tile.count; i++) {
                y[(t0 + i) * y_stride + r] = out[i];
                y[(t0 + i) * y_stride + r + 1] = out[4 + i];
            }
        }
        if (r < rows) {
            const uint8_t *row = w + r * row_bytes;
            float_tile_1x4(n, &row, x, out);
            for (size_t i = 0; i < tile.count; i++) y[(t0 + i) * y_stride + r] = out[i];
        }
    }
}
