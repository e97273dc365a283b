/*
 * test_causal.c -- kvc_layer_attend_causal, m queries at once: query i sees
 * positions 0 .. seq_len - m + i and gets, bit for bit, what kvc_layer_attend
 * gives on the layer truncated to seq_len - m + i + 1 positions (probs row:
 * that layer's head_len weights, then exact zeros).  In every mode, with
 * masks that leave gaps in heads, at lengths on both sides of the q8 window
 * and windows of queries that straddle it.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

#define W KVC_Q8_WINDOW
#define MAX_M 9

/* 1 if attend_causal of m queries on every head of `layer` equals single
 * attends on clones truncated to each query's length, bit for bit. */
static int causal_matches_truncated(const kvc_layer *layer, size_t m, test_rng *rng) {
    const size_t H = kvc_layer_num_kv_heads(layer), d = kvc_layer_head_dim(layer);
    const size_t L = kvc_layer_seq_len(layer);
    float *q = test_alloc(H * m * d * sizeof(float));
    float *out = test_alloc(H * m * d * sizeof(float));
    float **probs = test_alloc(H * sizeof(float *));
    float *want_out = test_alloc(d * sizeof(float));
    float *want_probs = test_alloc(L * sizeof(float) + 1);
    int ok = 1;
    test_fill_normal(rng, q, H * m * d);
    for (size_t h = 0; h < H && ok; h++) {
        const size_t n = m * kvc_layer_head_len(layer, h);
        /* Not zeros: the rows a query does not see must be written as 0. */
        probs[h] = test_alloc(n * sizeof(float) + 1);
        for (size_t r = 0; r < n; r++) probs[h][r] = -7.0f;
        ok = kvc_layer_attend_causal(layer, q + h * m * d, m, h, out + h * m * d, probs[h]) ==
             KVC_OK;
    }
    /* Query i = m - 1 sees everything; each earlier one a position less. */
    kvc_layer *trunc = NULL;
    ok = ok && kvc_layer_clone(layer, &trunc) == KVC_OK;
    for (size_t i = m; i-- > 0 && ok;) {
        if (i + 1 < m) ok = kvc_layer_truncate_last(trunc, 1) == KVC_OK;
        for (size_t h = 0; h < H && ok; h++) {
            const size_t n = kvc_layer_head_len(trunc, h), head_len = kvc_layer_head_len(layer, h);
            const float *row = probs[h] + i * head_len;
            ok = kvc_layer_attend(trunc, q + (h * m + i) * d, h, want_out, want_probs) == KVC_OK &&
                 test_bits_equal(out + (h * m + i) * d, want_out, d) &&
                 test_bits_equal(row, want_probs, n);
            for (size_t r = n; r < head_len && ok; r++) ok = row[r] == 0.0f && !signbit(row[r]);
            if (!ok) printf("  mode %d L=%zu m=%zu: query %zu head %zu differs\n",
                            (int)kvc_layer_mode(layer), L, m, i, h);
        }
    }
    kvc_layer_free(trunc);
    for (size_t h = 0; h < H; h++) free(probs[h]);
    free(probs);
    free(q);
    free(out);
    free(want_out);
    free(want_probs);
    return ok;
}

/* causal_matches_truncated for every m = 1..MAX_M the layer's length allows. */
static int causal_matches_for_every_m(const kvc_layer *layer, void *rng) {
    for (size_t m = 1; m <= MAX_M && m <= kvc_layer_seq_len(layer); m++)
        if (!causal_matches_truncated(layer, m, rng)) return 0;
    return 1;
}

TEST(attend_causal_should_equal_attend_on_truncated_layer_in_every_mode) {
    /* Lengths on both sides of W; with m up to 9 the query windows of 65,
     * 66 and 70 straddle it (early queries unfrozen, late ones frozen). */
    static const size_t lengths[] = {1, 2, 9, 40, 63, 64, 65, 66, 70, 73, 130};
    const size_t H = 5, d = 12, len = 130;
    test_data data = test_data_make(300, len, H, d, 1);
    test_rng rng = test_rng_new(300);
    CHECK(test_grown_in_every_mode(&data, lengths, sizeof lengths / sizeof lengths[0],
                                   causal_matches_for_every_m, &rng));
    test_data_free(&data);
}

/* causal_matches_truncated for each m of ms, in every mode, on data's first
 * len positions. */
static int matches_in_every_mode(const test_data *data, size_t len, const size_t *ms,
                                 size_t count, test_rng *rng) {
    int ok = 1;
    for (size_t mi = 0; mi < TEST_MODE_COUNT && ok; mi++) {
        kvc_layer *layer = test_layer_with(data, len, test_modes[mi]);
        ok = layer != NULL;
        for (size_t i = 0; i < count && ok; i++) ok = causal_matches_truncated(layer, ms[i], rng);
        kvc_layer_free(layer);
    }
    return ok;
}

TEST(attend_causal_should_equal_attend_with_odd_head_dim_and_many_heads) {
    static const size_t ms[] = {1, 7, 17}; /* 17: from 64 to 80 */
    test_data data = test_data_make(301, 80, 11, 17, 1);
    test_rng rng = test_rng_new(301);
    CHECK(matches_in_every_mode(&data, 80, ms, 3, &rng));
    test_data_free(&data);
}

TEST(attend_causal_with_m_of_seq_len_should_start_from_one_position) {
    static const size_t ms[] = {70};
    test_data data = test_data_make(302, 70, 3, 8, 1);
    test_rng rng = test_rng_new(302);
    CHECK(matches_in_every_mode(&data, 70, ms, 1, &rng));
    test_data_free(&data);
}

TEST(attend_causal_without_probs_should_give_the_same_out) {
    const size_t H = 5, d = 16, len = 68, m = 6;
    test_data data = test_data_make(303, len, H, d, 1);
    test_rng rng = test_rng_new(303);
    float q[6 * 16], with[6 * 16], without[6 * 16], probs[6 * 68];
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        kvc_layer *layer = test_layer_with(&data, len, test_modes[mi]);
        CHECK(layer != NULL);
        for (size_t h = 0; h < H; h++) {
            test_fill_normal(&rng, q, m * d);
            CHECK_OK(kvc_layer_attend_causal(layer, q, m, h, with, probs));
            CHECK_OK(kvc_layer_attend_causal(layer, q, m, h, without, NULL));
            CHECK(test_bits_equal(with, without, m * d));
        }
        kvc_layer_free(layer);
    }
    test_data_free(&data);
}

TEST(attend_causal_should_refuse_m_of_zero_or_above_seq_len) {
    float q[10 * 8] = {0}, out[10 * 8], probs[10 * 9];
    test_data data = test_data_make(304, 9, 2, 8, 0);
    kvc_layer *layer;
    CHECK_OK(kvc_layer_create(2, 8, KVC_MODE_Q8, &layer));
    CHECK_STATUS(kvc_layer_attend_causal(layer, q, 1, 0, out, probs), KVC_E_LENGTH);
    CHECK_OK(test_data_append(layer, &data, 0, 9));
    CHECK_STATUS(kvc_layer_attend_causal(layer, q, 0, 0, out, probs), KVC_E_LENGTH);
    CHECK_STATUS(kvc_layer_attend_causal(layer, q, 10, 0, out, probs), KVC_E_LENGTH);
    CHECK_STATUS(kvc_layer_attend_causal(layer, q, (size_t)-1, 0, out, probs), KVC_E_LENGTH);
    CHECK_OK(kvc_layer_attend_causal(layer, q, 9, 0, out, probs));
    kvc_layer_free(layer);
    test_data_free(&data);
}

TEST(attend_causal_should_refuse_bad_head_and_null_pointers) {
    float q[2 * 8] = {0}, out[2 * 8];
    test_data data = test_data_make(305, 4, 2, 8, 0);
    kvc_layer *layer = test_layer_with(&data, 4, KVC_MODE_F32);
    CHECK(layer != NULL);
    CHECK_STATUS(kvc_layer_attend_causal(layer, q, 2, 2, out, NULL), KVC_E_KV_HEAD);
    CHECK_STATUS(kvc_layer_attend_causal(layer, q, 2, (size_t)-1, out, NULL), KVC_E_KV_HEAD);
    CHECK_STATUS(kvc_layer_attend_causal(NULL, q, 2, 0, out, NULL), KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_layer_attend_causal(layer, NULL, 2, 0, out, NULL), KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_layer_attend_causal(layer, q, 2, 0, NULL, NULL), KVC_E_NULL_POINTER);
    kvc_layer_free(layer);
    test_data_free(&data);
}

TEST(attend_causal_should_refuse_nonfinite_query_and_leave_out_and_probs) {
    const size_t H = 2, d = 8, m = 4;
    test_data data = test_data_make(306, 70, H, d, 0);
    test_rng rng = test_rng_new(306);
    float q[4 * 8], out[4 * 8], probs[4 * 70], out_before[4 * 8], probs_before[4 * 70];
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        kvc_layer *layer = test_layer_with(&data, 70, test_modes[mi]);
        CHECK(layer != NULL);
        for (int b = 0; b < 3; b++) {
            /* The bad element in the first, then in the last query. */
            for (size_t at = 0; at < m * d; at += m * d - 1) {
                test_fill_normal(&rng, q, m * d);
                test_fill_normal(&rng, out, m * d);
                test_fill_normal(&rng, probs, m * 70);
                memcpy(out_before, out, sizeof out);
                memcpy(probs_before, probs, sizeof probs);
                q[at] = test_nonfinite[b];
                CHECK_STATUS(kvc_layer_attend_causal(layer, q, m, 1, out, probs),
                             KVC_E_NONFINITE_QUERY);
                CHECK(test_bits_equal(out, out_before, m * d));
                CHECK(test_bits_equal(probs, probs_before, m * 70));
            }
        }
        kvc_layer_free(layer);
    }
    test_data_free(&data);
}

TEST(attend_causal_should_give_zeros_for_head_with_no_rows_in_view) {
    /* Head 2 of the scripted masks is dead below W: a query that sees only
     * positions < W gets zeros, later ones attend over the rows from W on. */
    const size_t H = 3, d = 8, m = 6, len = W + 3;
    test_data data = test_data_make(307, len, H, d, 1);
    float q[6 * 8], out[6 * 8], probs[6 * (W + 3)];
    test_rng rng = test_rng_new(307);
    test_fill_normal(&rng, q, m * d);
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        kvc_layer *layer = test_layer_with(&data, len, test_modes[mi]);
        CHECK(layer != NULL);
        const size_t n = kvc_layer_head_len(layer, 2);
        CHECK(n == test_data_rows(&data, 2, W, len) && n > 0);
        CHECK_OK(kvc_layer_attend_causal(layer, q, m, 2, out, probs));
        for (size_t i = 0; i < m; i++) {
            if (len - m + i + 1 > W) continue;
            for (size_t j = 0; j < d; j++) CHECK(out[i * d + j] == 0.0f);
            for (size_t r = 0; r < n; r++) CHECK(probs[i * n + r] == 0.0f);
        }
        kvc_layer_free(layer);
    }
    test_data_free(&data);
}

/* 1 if attend_span of m queries on every head of `layer` equals single
 * attends on the whole layer, bit for bit. */
static int span_matches_whole(const kvc_layer *layer, void *rng) {
    const size_t H = kvc_layer_num_kv_heads(layer), d = kvc_layer_head_dim(layer);
    const size_t m = kvc_layer_seq_len(layer) < MAX_M ? kvc_layer_seq_len(layer) : MAX_M;
    float *q = test_alloc(m * d * sizeof(float)), *out = test_alloc(m * d * sizeof(float));
    float *want = test_alloc(d * sizeof(float));
    int ok = 1;
    for (size_t h = 0; h < H && ok; h++) {
        const size_t n = kvc_layer_head_len(layer, h);
        float *probs = test_alloc(m * n * sizeof(float) + 1), *want_probs = test_alloc(n * sizeof(float) + 1);
        test_fill_normal(rng, q, m * d);
        ok = kvc_layer_attend_span(layer, q, m, h, out, probs) == KVC_OK;
        for (size_t i = 0; i < m && ok; i++) {
            ok = kvc_layer_attend(layer, q + i * d, h, want, want_probs) == KVC_OK && test_bits_equal(out + i * d, want, d) &&
                 test_bits_equal(probs + i * n, want_probs, n);
        }
        free(probs), free(want_probs);
    }
    free(q), free(out), free(want);
    return ok;
}

TEST(attend_span_should_give_every_query_the_whole_layer_in_every_mode) {
    static const size_t lengths[] = {1, 2, 9, 65, 130};
    const size_t H = 3, d = 12, len = 130;
    test_data data = test_data_make(301, len, H, d, 1);
    test_rng rng = test_rng_new(301);
    CHECK(test_grown_in_every_mode(&data, lengths, sizeof lengths / sizeof lengths[0], span_matches_whole, &rng));
    test_data_free(&data);
}

TEST(attend_span_should_refuse_what_attend_causal_refuses) {
    kvc_layer *layer;
    CHECK_OK(kvc_layer_create(1, 4, KVC_MODE_F32, &layer));
    const float k[4] = {1, 2, 3, 4}, q[8] = {0};
    float out[8];
    CHECK_OK(kvc_layer_append(layer, k, k, NULL));
    CHECK_STATUS(kvc_layer_attend_span(layer, q, 2, 0, out, NULL), KVC_E_LENGTH);
    CHECK_STATUS(kvc_layer_attend_span(layer, q, 0, 0, out, NULL), KVC_E_LENGTH);
    CHECK_STATUS(kvc_layer_attend_span(layer, q, 1, 1, out, NULL), KVC_E_KV_HEAD);
    CHECK_STATUS(kvc_layer_attend_span(layer, NULL, 1, 0, out, NULL), KVC_E_NULL_POINTER);
    kvc_layer_free(layer);
}

RUN_TESTS(CASE(attend_span_should_give_every_query_the_whole_layer_in_every_mode),
          CASE(attend_span_should_refuse_what_attend_causal_refuses),
          CASE(attend_causal_should_equal_attend_on_truncated_layer_in_every_mode),
          CASE(attend_causal_should_equal_attend_with_odd_head_dim_and_many_heads),
          CASE(attend_causal_with_m_of_seq_len_should_start_from_one_position),
          CASE(attend_causal_without_probs_should_give_the_same_out),
          CASE(attend_causal_should_refuse_m_of_zero_or_above_seq_len),
          CASE(attend_causal_should_refuse_bad_head_and_null_pointers),
          CASE(attend_causal_should_refuse_nonfinite_query_and_leave_out_and_probs),
          CASE(attend_causal_should_give_zeros_for_head_with_no_rows_in_view))
