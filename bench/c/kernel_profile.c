/*
 * kernel_profile.c -- where decode attention spends its time: the kernels
 * of one attend_heads step (32 query heads over 8 KV heads) timed one by
 * one on the same shapes, in the wasm build with the SIMD128 kernels.
 * Prints one JSON line per shape:  kernel-profile.js d:n [d:n ...]
 */
#include <emscripten.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/q8-rows.h"

#define NUM_KV_HEADS 8
#define GROUP 4
#define ROUNDS 5

static float uniform(unsigned *state) {
    *state = *state * 1664525u + 1013904223u;
    return (float)(*state >> 8) / 8388608.0f - 1.0f;
}

/* Best time (ms) over ROUNDS of running `work` for every KV head. */
#define BEST(result, work)                                                \
    do {                                                                  \
        double best_ = 1e30;                                              \
        for (int round_ = 0; round_ <= ROUNDS; round_++) {                \
            const double t0_ = emscripten_get_now();                      \
            for (size_t h = 0; h < NUM_KV_HEADS; h++) { work; }           \
            const double t_ = emscripten_get_now() - t0_;                 \
            if (round_ > 0 && t_ < best_) best_ = t_;                     \
        }                                                                 \
        result = best_;                                                   \
    } while (0)

/* One head's value sums over its n quantized rows (row_bytes apart) with
 * the weights z, tile by tile as attend takes them: each tile's weights as
 * i16 codes, its rows gathered from their pages (4-bit ones unpacked with
 * `unpack`), then the integer sums. */
static void value_sums(const kvc_kernels *k, size_t G, size_t n, size_t d, const float *z, const uint8_t *rows,
                       size_t row_bytes, kvc_unpack_q4_fn *unpack, float *tile_w, int16_t *w16, uint8_t *tile,
                       float *out) {
    const size_t tile_rows = KVC_Q8_SUM_ROWS;
    float w_scales[GROUP];
    for (size_t first = 0; first < n; first += tile_rows) {
        const size_t count = n - first < tile_rows ? n - first : tile_rows;
        for (size_t g = 0; g < G; g++) {
            for (size_t t = 0; t < count; t++)
                tile_w[g * tile_rows + t] = z[g * n + first + t] * kvc_q8_row_scale(rows + (first + t) * row_bytes);
            w_scales[g] = k->quantize_query(count, tile_w + g * tile_rows, KVC_Q16_CODE_MAX, w16 + g * tile_rows);
        }
        if (unpack) unpack(count, d, rows + first * row_bytes, tile);
        else memcpy(tile, rows + first * row_bytes, count * row_bytes);
        k->weighted_sum_q8(G, count, d, w16, tile_rows, w_scales, tile, out);
    }
}

static int profile(size_t d, size_t n) {
    const kvc_kernels *k = kvc_kernels_active();
    const size_t row_bytes = 4 + d, G = GROUP;
    float *keys = malloc(NUM_KV_HEADS * n * d * sizeof(float));
    float *values = malloc(NUM_KV_HEADS * n * d * sizeof(float));
    uint8_t *qrows = malloc(NUM_KV_HEADS * n * row_bytes);
    const size_t q4_row_bytes = kvc_q4_row_bytes(d);
    uint8_t *q4rows = malloc(NUM_KV_HEADS * n * q4_row_bytes);
    float *q = malloc(G * d * sizeof(float)), *z = malloc(2 * G * n * sizeof(float));
    float *out = malloc(G * d * sizeof(float)), *tile_w = malloc(G * 1024 * sizeof(float));
    int16_t *q_codes = malloc(G * d * sizeof(int16_t));
    float q_scales[GROUP];
    if (!keys || !values || !qrows || !q4rows || !q || !z || !out || !tile_w || !q_codes) return 1;
    unsigned state = 7;
    for (size_t i = 0; i < NUM_KV_HEADS * n * d; i++) {
        keys[i] = uniform(&state);
        values[i] = uniform(&state);
    }
    for (size_t i = 0; i < NUM_KV_HEADS * n * row_bytes; i++) qrows[i] = (uint8_t)(state = state * 1664525u + 1013904223u) ;
    for (size_t i = 0; i < NUM_KV_HEADS * n * q4_row_bytes; i++) q4rows[i] = (uint8_t)(state = state * 1664525u + 1013904223u);
    for (size_t p = 0; p < NUM_KV_HEADS * n; p++) {
        const float scale = 0.01f;
        memcpy(qrows + p * row_bytes, &scale, sizeof scale);
        memcpy(q4rows + p * q4_row_bytes, &scale, sizeof scale);
    }
    for (size_t i = 0; i < G * d; i++) q[i] = uniform(&state);
    /* The queries coded as attend codes them (segment.c): one code vector each. */
    for (size_t g = 0; g < G; g++)
        q_scales[g] = k->quantize_query(d, q + g * d, KVC_QUERY_CODE_MAX, q_codes + g * d) / 11.3137f;
    const size_t tile_rows = KVC_Q8_SUM_ROWS;
    int16_t *w16 = malloc(G * tile_rows * sizeof(int16_t));
    uint8_t *tile = malloc(tile_rows * row_bytes);
    if (!w16 || !tile) return 1;
    const float sqrt_d = 11.3137f;
    double scores_f32, softmax, values_f32, scores_q8, values_q8, scores_q4, values_q4;
    BEST(scores_f32, k->scores_f32(G, n, d, q, keys + h * n * d, sqrt_d, z, n));
    float maxes[GROUP], sums[GROUP];
    BEST(softmax, k->softmax(G, n, z, n, maxes, sums));
    BEST(values_f32, (memset(out, 0, G * d * sizeof(float)),
                      k->weighted_sum_f32(G, n, d, z, n, values + h * n * d, out)));
    /* q8 keys: every query's codes, as attend does. */
    BEST(scores_q8, k->scores_q8(G, n, d, q_codes, q_scales, qrows + h * n * row_bytes, z, n));
    /* q4 keys: the same codes against 4-bit rows, decoded in registers. */
    BEST(scores_q4, k->scores_q4(G, n, d, q_codes, q_scales, q4rows + h * n * q4_row_bytes, z, n));
    /* q8 and q4 values, as attend sums them. */
    BEST(values_q8, value_sums(k, G, n, d, z, qrows + h * n * row_bytes, row_bytes, NULL, tile_w, w16, tile, out));
    BEST(values_q4, value_sums(k, G, n, d, z, q4rows + h * n * q4_row_bytes, q4_row_bytes, k->unpack_q4,
                               tile_w, w16, tile, out));
    printf("{\"d\":%zu,\"n\":%zu,\"scores_f32\":%.4f,\"softmax\":%.4f,\"values_f32\":%.4f,"
           "\"scores_q8\":%.4f,\"values_q8\":%.4f,\"scores_q4\":%.4f,\"values_q4\":%.4f}\n",
           d, n, scores_f32, softmax, values_f32, scores_q8, values_q8, scores_q4, values_q4);
    free(keys), free(values), free(qrows), free(q4rows), free(q), free(z), free(out);
    free(tile_w), free(q_codes), free(w16), free(tile);
    return 0;
}

/* Exported as "main" by name: clang 15+ would call main(argc, argv)
 * __main_argc_argv, which emcc 3.1.6 never calls (the relaxed build). */
__attribute__((export_name("main"), used)) int kvc_profile_main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        size_t d, n;
        if (sscanf(argv[i], "%zu:%zu", &d, &n) != 2 || profile(d, n) != 0) return 1;
    }
    return 0;
}
