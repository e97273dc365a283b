#include <wasm_simd128.h>

#include "kernels.h"

/*
 * out[g] += sum_p w[g][p] * rows[p], each element added in row order (as the
 * scalar kernel).  Rows are taken in tiles that stay in L1 while a block of
 * up to four queries x eight channels of `out` stays in registers across the
 * tile: every row is read from memory once per block of four queries.
 */

/* Rows per tile: about 32 KiB of them. */
static size_t tile_rows(size_t d) {
    size_t rows = 8192 / d;
    return rows < 8 ? 8 : rows;
}

/* The multiply-add of every lane: mul then add here; the relaxed-SIMD set
 * compiles this file again with a fused one (weighted-sum-f32-wasmrelaxed.c). */
#ifndef MAC
#define MAC(acc, a, b) acc = wasm_f32x4_add(acc, wasm_f32x4_mul(a, b))
#define KVC_WEIGHTED_SUM_F32_NAME kvc_weighted_sum_f32__wasmsimd
#endif

/* Channels [j, j + 8) of NQ queries over rows [0, n) of a tile; pointers
 * step through rows and weights so that no index is multiplied per row. */
#define SUM_BLOCK8(NQ)                                                                       \
    static void sum8_##NQ(size_t n, size_t d, size_t j, const float *const *w,              \
                          const float *rows, float *const *out) {                           \
        v128_t acc0[NQ], acc1[NQ];                                                          \
        const float *wp[NQ];                                                                \
        for (int qi = 0; qi < NQ; qi++) {                                                   \
            acc0[qi] = wasm_v128_load(out[qi] + j);                                         \
            acc1[qi] = wasm_v128_load(out[qi] + j + 4);                                     \
            wp[qi] = w[qi];                                                                 \
        }                                                                                   \
        const float *x = rows + j;                                                          \
        for (size_t p = 0; p < n; p++, x += d) {                                            \
            const v128_t x0 = wasm_v128_load(x);                                            \
            const v128_t x1 = wasm_v128_load(x + 4);                                        \
            for (int qi = 0; qi < NQ; qi++) {                                               \
                const v128_t weight = wasm_v128_load32_splat(wp[qi]++);                     \
                MAC(acc0[qi], weight, x0);                                                  \
                MAC(acc1[qi], weight, x1);                                                  \
            }                                                                               \
        }                                                                                   \
        for (int qi = 0; qi < NQ; qi++) {                                                   \
            wasm_v128_store(out[qi] + j, acc0[qi]);                                         \
            wasm_v128_store(out[qi] + j + 4, acc1[qi]);                                     \
        }                                                                                   \
    }

SUM_BLOCK8(4)
SUM_BLOCK8(3)
SUM_BLOCK8(2)
SUM_BLOCK8(1)

/* Channels [j, j + 4) of nq queries, and single channels, for what eight-wide blocks leave. */
static void sum4(size_t nq, size_t n, size_t d, size_t j, const float *const *w, const float *rows,
                 float *const *out) {
    for (size_t qi = 0; qi < nq; qi++) {
        v128_t acc = wasm_v128_load(out[qi] + j);
        for (size_t p = 0; p < n; p++) MAC(acc, wasm_v128_load32_splat(w[qi] + p), wasm_v128_load(rows + p * d + j));
        wasm_v128_store(out[qi] + j, acc);
    }
}

static void sum1(size_t nq, size_t n, size_t d, size_t j, const float *const *w, const float *rows,
                 float *const *out) {
    for (size_t qi = 0; qi < nq; qi++) {
        float acc = out[qi][j];
        for (size_t p = 0; p < n; p++) acc += w[qi][p] * rows[p * d + j];
        out[qi][j] = acc;
    }
}

void KVC_WEIGHTED_SUM_F32_NAME(size_t G, size_t n, size_t d, const float *w,
                                    size_t w_stride, const float *rows, float *out) {
    const size_t tile = tile_rows(d);
    for (size_t g = 0; g < G; g += 4) {
        const size_t nq = G - g < 4 ? G - g : 4;
        for (size_t p = 0; p < n; p += tile) {
            const size_t np = n - p < tile ? n - p : tile;
            const float *ws[4];
            float *outs[4];
            for (size_t qi = 0; qi < nq; qi++) {
                ws[qi] = w + (g + qi) * w_stride + p;
                outs[qi] = out + (g + qi) * d;
            }
            const float *tile_rows_at = rows + p * d;
            size_t j = 0;
            for (; j + 8 <= d; j += 8) {
                switch (nq) {
                case 4: sum8_4(np, d, j, ws, tile_rows_at, outs); break;
                case 3: sum8_3(np, d, j, ws, tile_rows_at, outs); break;
                case 2: sum8_2(np, d, j, ws, tile_rows_at, outs); break;
                default: sum8_1(np, d, j, ws, tile_rows_at, outs); break;
                }
            }
            if (j + 4 <= d) {
                sum4(nq, np, d, j, ws, tile_rows_at, outs);
                j += 4;
            }
            for (; j < d; j++) sum1(nq, np, d, j, ws, tile_rows_at, outs);
        }
    }
}
