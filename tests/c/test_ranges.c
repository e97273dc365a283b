/*
 * test_ranges.c -- kvc_layer_attend_ranges, the attention of an embedding
 * model's pass over many texts at once: query i over slots [first[i],
 * end[i]) of the m newest.  Each query gets, bit for bit, what
 * kvc_layer_attend gives on a layer holding exactly the rows of its range
 * (and the definition, softmax(q.k / sqrt(d)) v in double, to f32
 * rounding), for the three shapes an embedding model has: each text's
 * tokens seeing their whole text (bidirectional), up to themselves
 * (causal), and within a symmetric window around themselves
 * (EmbeddingGemma).  The ranges that make attend_causal's and attend_span's
 * shapes give their bits in every mode.  ctest runs this at several thread
 * counts (KVC_TEST_THREADS), so the same bits also mean thread-count
 * identity.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

/* The three shapes, for queries at text-relative index i of a text of
 * `len` tokens. */
typedef enum shape { BIDIRECTIONAL, CAUSAL, SYMMETRIC } shape;

/* Ranges of the texts of `lengths` laid end to end (count texts), in shape
 * (SYMMETRIC: |i - j| <= half). */
static void ranges_of(const size_t *lengths, size_t count, shape s, size_t half, uint32_t *first, uint32_t *end) {
    size_t start = 0;
    for (size_t t = 0; t < count; t++) {
        for (size_t i = 0; i < lengths[t]; i++) {
            const size_t at = start + i;
            first[at] = (uint32_t)(s == BIDIRECTIONAL || s == CAUSAL ? start : (i > half ? at - half : start));
            end[at] = (uint32_t)(s == BIDIRECTIONAL ? start + lengths[t]
                                 : s == CAUSAL  ? at + 1
                                                : (i + half + 1 < lengths[t] ? at + half + 1 : start + lengths[t]));
        }
        start += lengths[t];
    }
}

/* The definition over the rows head h stored among data's positions
 * [from, to): out = sum_j softmax(q.k_j / sqrt(d)) v_j, in double. */
static void defined(const test_data *data, size_t h, size_t from, size_t to, const float *q, double *out) {
    const size_t d = data->d, H = data->H;
    double top = -INFINITY, sum = 0;
    for (size_t j = 0; j < d; j++) out[j] = 0;
    for (size_t p = from; p < to; p++) {
        if (!data->alive[p * H + h]) continue;
        double dot = 0;
        for (size_t j = 0; j < d; j++) dot += (double)q[j] * data->k[(p * H + h) * d + j];
        dot /= sqrt((double)d);
        if (dot > top) top = dot;
    }
    for (size_t p = from; p < to; p++) {
        if (!data->alive[p * H + h]) continue;
        double dot = 0;
        for (size_t j = 0; j < d; j++) dot += (double)q[j] * data->k[(p * H + h) * d + j];
        const double w = exp(dot / sqrt((double)d) - top);
        sum += w;
        for (size_t j = 0; j < d; j++) out[j] += w * data->v[(p * H + h) * d + j];
    }
    for (size_t j = 0; j < d && sum > 0; j++) out[j] /= sum;
}

/* 1 if every query of the texts of `lengths` (end to end, the layer's
 * newest) in shape s equals attend on an f32 layer of its range's rows,
 * bit for bit, and the definition to 1e-5. */
static int ranges_match(const test_data *data, size_t before, const size_t *lengths, size_t count, shape s,
                        size_t half, test_rng *rng) {
    const size_t H = data->H, d = data->d;
    size_t m = 0;
    for (size_t t = 0; t < count; t++) m += lengths[t];
    const size_t L = before + m;
    kvc_layer *layer = test_layer_with(data, L, KVC_MODE_F32);
    uint32_t *first = test_alloc(m * sizeof(uint32_t)), *end = test_alloc(m * sizeof(uint32_t));
    float *q = test_alloc(m * d * sizeof(float)), *out = test_alloc(m * d * sizeof(float));
    float *want = test_alloc(d * sizeof(float)), *probs = test_alloc(m * L * sizeof(float) + 1);
    float *want_probs = test_alloc(L * sizeof(float) + 1);
    double *exact = test_alloc(d * sizeof(double));
    ranges_of(lengths, count, s, half, first, end);
    int ok = layer != NULL;
    for (size_t h = 0; h < H && ok; h++) {
        const size_t n = kvc_layer_head_len(layer, h);
        test_fill_normal(rng, q, m * d);
        for (size_t r = 0; r < m * n; r++) probs[r] = -7.0f; /* what a query does not see must become 0 */
        ok = kvc_layer_attend_ranges(layer, q, m, h, first, end, out, probs) == KVC_OK;
        for (size_t i = 0; i < m && ok; i++) {
            const size_t from = before + first[i], to = before + end[i];
            kvc_layer *alone = NULL;
            ok = kvc_layer_create(H, d, KVC_MODE_F32, &alone) == KVC_OK &&
                 (from == to || test_data_append(alone, data, from, to - from) == KVC_OK) &&
                 kvc_layer_attend(alone, q + i * d, h, want, want_probs) == KVC_OK &&
                 test_bits_equal(out + i * d, want, d);
            const size_t skipped = test_data_rows(data, h, 0, from), seen = test_data_rows(data, h, from, to);
            ok = ok && test_bits_equal(probs + i * n + skipped, want_probs, seen);
            for (size_t r = 0; r < n && ok; r++) {
                if (r < skipped || r >= skipped + seen) ok = probs[i * n + r] == 0.0f;
            }
            defined(data, h, from, to, q + i * d, exact);
            for (size_t j = 0; j < d && ok; j++) ok = fabs(out[i * d + j] - exact[j]) <= 1e-5 * (1 + fabs(exact[j]));
            if (!ok) printf("  shape %d: query %zu of head %zu, range [%zu, %zu), differs\n", (int)s, i, h, from, to);
            kvc_layer_free(alone);
        }
    }
    kvc_layer_free(layer);
    free(first), free(end), free(q), free(out), free(want), free(probs), free(want_probs), free(exact);
    return ok;
}

TEST(attend_ranges_should_give_each_text_its_own_attention_in_every_shape) {
    /* Texts of 1 token, of a segment's rows and more (KVC_SEGMENT_ROWS is
     * 1024 in attend.c: 1100 crosses it), after older rows the ranges skip;
     * heads with gaps (masked data). */
    static const size_t texts[] = {1, 5, 37, 1, 1100, 64};
    const size_t count = sizeof texts / sizeof texts[0];
    size_t total = 9;
    for (size_t t = 0; t < count; t++) total += texts[t];
    test_data data = test_data_make(401, total, 4, 16, 1);
    test_rng rng = test_rng_new(401);
    CHECK(ranges_match(&data, 9, texts, count, BIDIRECTIONAL, 0, &rng));
    CHECK(ranges_match(&data, 9, texts, count, CAUSAL, 0, &rng));
    CHECK(ranges_match(&data, 9, texts, count, SYMMETRIC, 8, &rng));
    CHECK(ranges_match(&data, 9, texts, count, SYMMETRIC, 600, &rng));
    test_data_free(&data);
}

/* 1 if ranges of attend_causal's and attend_span's shapes over the whole
 * layer give their outputs and probabilities bit for bit. */
static int ranges_match_causal_and_span(const kvc_layer *layer, void *rng) {
    const size_t H = kvc_layer_num_kv_heads(layer), d = kvc_layer_head_dim(layer), m = kvc_layer_seq_len(layer);
    uint32_t *first = test_alloc(m * sizeof(uint32_t)), *causal_end = test_alloc(m * sizeof(uint32_t));
    uint32_t *whole_end = test_alloc(m * sizeof(uint32_t));
    float *q = test_alloc(m * d * sizeof(float)), *got = test_alloc(m * d * sizeof(float));
    float *want = test_alloc(m * d * sizeof(float));
    int ok = 1;
    for (size_t i = 0; i < m; i++) first[i] = 0, causal_end[i] = (uint32_t)(i + 1), whole_end[i] = (uint32_t)m;
    for (size_t h = 0; h < H && ok; h++) {
        const size_t n = m * kvc_layer_head_len(layer, h);
        float *got_probs = test_alloc(n * sizeof(float) + 1), *want_probs = test_alloc(n * sizeof(float) + 1);
        test_fill_normal(rng, q, m * d);
        ok = kvc_layer_attend_ranges(layer, q, m, h, first, causal_end, got, got_probs) == KVC_OK &&
             kvc_layer_attend_causal(layer, q, m, h, want, want_probs) == KVC_OK && test_bits_equal(got, want, m * d) &&
             test_bits_equal(got_probs, want_probs, n);
        ok = ok && kvc_layer_attend_ranges(layer, q, m, h, first, whole_end, got, got_probs) == KVC_OK &&
             kvc_layer_attend_span(layer, q, m, h, want, want_probs) == KVC_OK && test_bits_equal(got, want, m * d) &&
             test_bits_equal(got_probs, want_probs, n);
        if (!ok) printf("  mode %d, %zu positions: head %zu differs\n", (int)kvc_layer_mode(layer), m, h);
        free(got_probs), free(want_probs);
    }
    free(first), free(causal_end), free(whole_end), free(q), free(got), free(want);
    return ok;
}

TEST(attend_ranges_should_give_attend_causal_and_attend_span_bits_in_every_mode) {
    static const size_t lengths[] = {1, 2, 9, 63, 64, 65, 130};
    test_data data = test_data_make(402, 130, 3, 12, 1);
    test_rng rng = test_rng_new(402);
    CHECK(test_grown_in_every_mode(&data, lengths, sizeof lengths / sizeof lengths[0], ranges_match_causal_and_span, &rng));
    test_data_free(&data);
}

TEST(attend_ranges_should_refuse_ranges_out_of_order_or_past_the_queries) {
    test_data data = test_data_make(403, 6, 2, 8, 0);
    kvc_layer *layer = test_layer_with(&data, 6, KVC_MODE_F32);
    CHECK(layer != NULL);
    float q[4 * 8] = {0}, out[4 * 8];
    uint32_t first[4] = {0, 0, 2, 2}, end[4] = {2, 2, 4, 4};
    CHECK_OK(kvc_layer_attend_ranges(layer, q, 4, 1, first, end, out, NULL));
    end[3] = 5; /* past the 4 queries' slots */
    CHECK_STATUS(kvc_layer_attend_ranges(layer, q, 4, 1, first, end, out, NULL), KVC_E_LENGTH);
    end[3] = 4, first[2] = 3, end[2] = 2; /* out of order */
    CHECK_STATUS(kvc_layer_attend_ranges(layer, q, 4, 1, first, end, out, NULL), KVC_E_LENGTH);
    first[2] = 2, end[2] = 4;
    CHECK_STATUS(kvc_layer_attend_ranges(layer, q, 0, 1, first, end, out, NULL), KVC_E_LENGTH);
    CHECK_STATUS(kvc_layer_attend_ranges(layer, q, 7, 1, first, end, out, NULL), KVC_E_LENGTH);
    CHECK_STATUS(kvc_layer_attend_ranges(layer, q, 4, 2, first, end, out, NULL), KVC_E_KV_HEAD);
    CHECK_STATUS(kvc_layer_attend_ranges(layer, q, 4, 1, NULL, end, out, NULL), KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_layer_attend_ranges(layer, q, 4, 1, first, NULL, out, NULL), KVC_E_NULL_POINTER);
    q[5] = NAN;
    CHECK_STATUS(kvc_layer_attend_ranges(layer, q, 4, 1, first, end, out, NULL), KVC_E_NONFINITE_QUERY);
    kvc_layer_free(layer);
    test_data_free(&data);
}

RUN_TESTS(CASE(attend_ranges_should_give_each_text_its_own_attention_in_every_shape),
          CASE(attend_ranges_should_give_attend_causal_and_attend_span_bits_in_every_mode),
          CASE(attend_ranges_should_refuse_ranges_out_of_order_or_past_the_queries))
