/* scores-i8-wasmsimd.h -- what the q8 and q4 score kernels share: a
 * query's i16 codes against i8 row codes with i32x4.dot_i16x8_s, eight products
 * per instruction, summed exactly in i32; and a row's scores from its dots. */
#ifndef KVC_SCORES_I8_WASMSIMD_H
#define KVC_SCORES_I8_WASMSIMD_H

#include <string.h>
#include <wasm_simd128.h>

#include "kernels.h"

/* Lane i of the result: the sum of the four lanes of v[i] (exact:
 * integers, in any order).  Unpacks only (punpck{l,h}{dq,qdq}), one
 * instruction each: V8 lowers the other two-input shuffles to three (two
 * pshufd and a pblendw). */
static inline v128_t kvc_horizontal_sums4_i32(const v128_t v[4]) {
    /* a = (v0[0] + v0[2], v1[0] + v1[2], v0[1] + v0[3], v1[1] + v1[3]), b the same of v2, v3 */
    const v128_t a = wasm_i32x4_add(wasm_i32x4_shuffle(v[0], v[1], 0, 4, 1, 5), wasm_i32x4_shuffle(v[0], v[1], 2, 6, 3, 7));
    const v128_t b = wasm_i32x4_add(wasm_i32x4_shuffle(v[2], v[3], 0, 4, 1, 5), wasm_i32x4_shuffle(v[2], v[3], 2, 6, 3, 7));
    return wasm_i32x4_add(wasm_i32x4_shuffle(a, b, 0, 1, 4, 5), wasm_i32x4_shuffle(a, b, 2, 3, 6, 7));
}

/* acc[qi] += the products of 16 channels' codes as i16 (channels j..j+7 in
 * lo, j+8..j+15 in hi) with q16[qi] + j, for nq queries. */
static inline void kvc_dot16_i16(size_t nq, const int16_t *const *q16, size_t j, v128_t lo, v128_t hi,
                                 v128_t *acc) {
    for (size_t qi = 0; qi < nq; qi++) {
        acc[qi] = wasm_i32x4_add(acc[qi], wasm_i32x4_dot_i16x8(wasm_v128_load(q16[qi] + j), lo));
        acc[qi] = wasm_i32x4_add(acc[qi], wasm_i32x4_dot_i16x8(wasm_v128_load(q16[qi] + j + 8), hi));
    }
}

/* The same with the codes as i8x16 (c), widened once for all the queries. */
static inline void kvc_dot16_i8(size_t nq, const int16_t *const *q16, size_t j, v128_t c, v128_t *acc) {
    kvc_dot16_i16(nq, q16, j, wasm_i16x8_extend_low_i8x16(c), wasm_i16x8_extend_high_i8x16(c), acc);
}

/* The same for count (1..15) channels from j: zero codes add nothing. */
static inline void kvc_dot_tail_i8(size_t nq, const int16_t *const *q16, size_t j, size_t count,
                                   const int8_t *codes, v128_t *acc) {
    int8_t codes_tail[16] = {0};
    memcpy(codes_tail, codes, count);
    const v128_t lo = wasm_i16x8_extend_low_i8x16(wasm_v128_load(codes_tail));
    const v128_t hi = wasm_i16x8_extend_high_i8x16(wasm_v128_load(codes_tail));
    for (size_t qi = 0; qi < nq; qi++) {
        int16_t q_tail[16] = {0};
        memcpy(q_tail, q16[qi] + j, count * sizeof(int16_t));
        acc[qi] = wasm_i32x4_add(acc[qi], wasm_i32x4_dot_i16x8(wasm_v128_load(q_tail), lo));
        acc[qi] = wasm_i32x4_add(acc[qi], wasm_i32x4_dot_i16x8(wasm_v128_load(q_tail + 8), hi));
    }
}

/* Up to four queries: their code vectors and their scales, one a lane. */
typedef struct kvc_query_codes4 {
    size_t nq;
    const int16_t *q16[4];
    v128_t scale;
} kvc_query_codes4;

static inline kvc_query_codes4 kvc_query_codes4_of(size_t G, size_t g, size_t d, const int16_t *codes,
                                                   const float *scales) {
    kvc_query_codes4 queries;
    queries.nq = G - g < 4 ? G - g : 4;
    float lane_scales[4] = {0.0f};
    for (size_t qi = 0; qi < queries.nq; qi++) {
        queries.q16[qi] = codes + (g + qi) * d;
        lane_scales[qi] = scales[g + qi];
    }
    queries.scale = wasm_v128_load(lane_scales);
    return queries;
}

/* Queries g.. + nq's lanes of v to z at row p: their scores, or where a
 * kernel adds a row's blocks in z, their sums so far. */
static inline void kvc_store_lanes4(const kvc_query_codes4 *queries, v128_t v, size_t g, size_t p, float *z,
                                    size_t z_stride) {
    float lanes[4];
    wasm_v128_store(lanes, v);
    for (size_t qi = 0; qi < queries->nq; qi++) z[(g + qi) * z_stride + p] = lanes[qi];
}

/* Queries g.. + nq's scores of row p with scale row_scale from their dots:
 * dot * (s_p * scale). */
static inline void kvc_store_scores4(const kvc_query_codes4 *queries, v128_t dots, v128_t row_scale,
                                     size_t g, size_t p, float *z, size_t z_stride) {
    kvc_store_lanes4(queries, wasm_f32x4_mul(dots, wasm_f32x4_mul(row_scale, queries->scale)), g, p, z, z_stride);
}

/* The lanes kvc_store_lanes4 stored: a row's sums so far, one query a lane. */
static inline v128_t kvc_load_lanes4(const kvc_query_codes4 *queries, size_t g, size_t p, const float *z,
                                     size_t z_stride) {
    float lanes[4] = {0.0f};
    for (size_t qi = 0; qi < queries->nq; qi++) lanes[qi] = z[(g + qi) * z_stride + p];
    return wasm_v128_load(lanes);
}

#endif /* KVC_SCORES_I8_WASMSIMD_H */
