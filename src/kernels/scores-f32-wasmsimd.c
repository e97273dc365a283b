#include <string.h>
#include <wasm_simd128.h>

#include "kernels.h"

/*
 * Every (query, row) dot runs the same way: two accumulators over steps of
 * eight channels (the second also takes a padded tail of 1..3), summed as
 * ((a+b)[0] + (a+b)[1]) + ((a+b)[2] + (a+b)[3]).  Blocks of queries x rows
 * keep eight accumulators in flight, enough to hide the latency of the
 * adds, whatever G is: four queries on one row, two on two, or one on four.
 */

/* (x[0] + x[1], y[0] + y[1], x[2] + x[3], y[2] + y[3]) by unpacks only
 * (punpck{l,h}{dq,qdq}), one instruction each: V8 lowers the other
 * two-input shuffles to three (two pshufd and a pblendw). */
static inline v128_t pair_sums(v128_t x, v128_t y) {
    const v128_t low = wasm_i32x4_shuffle(x, y, 0, 4, 1, 5), high = wasm_i32x4_shuffle(x, y, 2, 6, 3, 7);
    return wasm_f32x4_add(wasm_i64x2_shuffle(low, high, 0, 2), wasm_i64x2_shuffle(low, high, 1, 3));
}

/* Lane i: (v[i][0] + v[i][1]) + (v[i][2] + v[i][3]), four sums at once. */
static v128_t horizontal_sums4(const v128_t v[4]) {
    const v128_t a = pair_sums(v[0], v[1]), b = pair_sums(v[2], v[3]);
    return wasm_f32x4_add(wasm_i64x2_shuffle(a, b, 0, 2), wasm_i64x2_shuffle(a, b, 1, 3));
}

static v128_t padded_tail(const float *x, size_t count) {
    float tail[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    memcpy(tail, x, count * sizeof(float));
    return wasm_v128_load(tail);
}

/* The multiply-add of every lane: mul then add here; the relaxed-SIMD set
 * compiles this file again with a fused one (scores-f32-wasmrelaxed.c). */
#ifndef MAC
#define MAC(acc, a, b) acc = wasm_f32x4_add(acc, wasm_f32x4_mul(a, b))
#define KVC_SCORES_F32_NAME kvc_scores_f32__wasmsimd
#endif

/* Lane qi * NR + r: (q[qi] . k[r]) / sqrt_d, for a block of NQ x NR <= 4. */
#define DOT_BLOCK(NQ, NR)                                                                    \
    static v128_t dots_##NQ##x##NR(size_t d, const float *const *q, const float *const *k,  \
                                   v128_t sqrt_d) {                                         \
        v128_t acc0[NQ][NR], acc1[NQ][NR];                                                  \
        for (int qi = 0; qi < NQ; qi++)                                                     \
            for (int r = 0; r < NR; r++) acc0[qi][r] = acc1[qi][r] = wasm_f32x4_const_splat(0.0f); \
        size_t j = 0;                                                                       \
        for (; j + 8 <= d; j += 8) {                                                        \
            v128_t ka[NR], kb[NR];                                                          \
            for (int r = 0; r < NR; r++) {                                                  \
                ka[r] = wasm_v128_load(k[r] + j);                                           \
                kb[r] = wasm_v128_load(k[r] + j + 4);                                       \
            }                                                                               \
            for (int qi = 0; qi < NQ; qi++) {                                               \
                const v128_t qa = wasm_v128_load(q[qi] + j), qb = wasm_v128_load(q[qi] + j + 4); \
                for (int r = 0; r < NR; r++) {                                              \
                    MAC(acc0[qi][r], qa, ka[r]);                                            \
                    MAC(acc1[qi][r], qb, kb[r]);                                            \
                }                                                                           \
            }                                                                               \
        }                                                                                   \
        if (j + 4 <= d) {                                                                   \
            for (int qi = 0; qi < NQ; qi++)                                                 \
                for (int r = 0; r < NR; r++)                                                \
                    MAC(acc0[qi][r], wasm_v128_load(q[qi] + j), wasm_v128_load(k[r] + j));  \
            j += 4;                                                                         \
        }                                                                                   \
        if (j < d) {                                                                        \
            for (int qi = 0; qi < NQ; qi++)                                                 \
                for (int r = 0; r < NR; r++)                                                \
                    MAC(acc1[qi][r], padded_tail(q[qi] + j, d - j), padded_tail(k[r] + j, d - j)); \
        }                                                                                   \
        v128_t sums[4] = {wasm_f32x4_const_splat(0.0f), wasm_f32x4_const_splat(0.0f),       \
                          wasm_f32x4_const_splat(0.0f), wasm_f32x4_const_splat(0.0f)};      \
        for (int qi = 0; qi < NQ; qi++)                                                     \
            for (int r = 0; r < NR; r++) sums[qi * NR + r] = wasm_f32x4_add(acc0[qi][r], acc1[qi][r]); \
        return wasm_f32x4_div(horizontal_sums4(sums), sqrt_d);                              \
    }

DOT_BLOCK(4, 1)
DOT_BLOCK(2, 2)
DOT_BLOCK(2, 1)
DOT_BLOCK(1, 4)
DOT_BLOCK(1, 1)

/* Scatters lane i of v to dst[i * stride], count lanes. */
static void scatter(v128_t v, size_t count, float *dst, size_t stride) {
    float lanes[4];
    wasm_v128_store(lanes, v);
    for (size_t i = 0; i < count; i++) dst[i * stride] = lanes[i];
}

void KVC_SCORES_F32_NAME(size_t G, size_t n, size_t d, const float *q, const float *keys,
                              float sqrt_d, float *z, size_t z_stride) {
    const v128_t divisor = wasm_f32x4_splat(sqrt_d);
    size_t g = 0;
    for (; g + 4 <= G; g += 4) {
        const float *qs[4] = {q + g * d, q + (g + 1) * d, q + (g + 2) * d, q + (g + 3) * d};
        const float *k = keys;
        for (size_t p = 0; p < n; p++, k += d) scatter(dots_4x1(d, qs, &k, divisor), 4, z + g * z_stride + p, z_stride);
    }
    for (; g + 2 <= G; g += 2) {
        const float *qs[2] = {q + g * d, q + (g + 1) * d};
        size_t p = 0;
        for (; p + 2 <= n; p += 2) {
            const float *ks[2] = {keys + p * d, keys + (p + 1) * d};
            float lanes[4];
            wasm_v128_store(lanes, dots_2x2(d, qs, ks, divisor));
            z[g * z_stride + p] = lanes[0];
            z[g * z_stride + p + 1] = lanes[1];
            z[(g + 1) * z_stride + p] = lanes[2];
            z[(g + 1) * z_stride + p + 1] = lanes[3];
        }
        if (p < n) {
            const float *k = keys + p * d;
            scatter(dots_2x1(d, qs, &k, divisor), 2, z + g * z_stride + p, z_stride);
        }
    }
    if (g < G) {
        const float *qs = q + g * d;
        size_t p = 0;
        for (; p + 4 <= n; p += 4) {
            const float *ks[4] = {keys + p * d, keys + (p + 1) * d, keys + (p + 2) * d, keys + (p + 3) * d};
            wasm_v128_store(z + g * z_stride + p, dots_1x4(d, &qs, ks, divisor));
        }
        for (; p < n; p++) {
            const float *k = keys + p * d;
            scatter(dots_1x1(d, &qs, &k, divisor), 1, z + g * z_stride + p, 1);
        }
    }
}
