/*
 * test_group.c -- grouped-query attention: kvc_layer_attend_group (the G
 * query heads of one KV head in one pass) and kvc_layer_attend_heads (a
 * whole layer, query head i served by KV head i / G).  Each query must get,
 * bit for bit, what kvc_layer_attend gives it alone: out, and probs at the
 * head's positions (attend_heads: zeros at the positions its KV head did not
 * store).  In every mode, with masks that leave gaps and a dead head, at
 * lengths on both sides of the q8 window and of 64, and head dims below and
 * above the i32 block of the q8 dot (KVC_Q8_DOT_BLOCK).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

#define SENTINEL -7.0f

static const size_t group_sizes[] = {1, 2, 3, 4, 5, 8};
#define NUM_GROUP_SIZES (sizeof group_sizes / sizeof group_sizes[0])

/* G queries [G x d]: normal ones, and every third one key-like (outlier
 * channels as the keys have: peaky attention, large q * c_K channels). */
static void fill_queries(test_rng *rng, float *q, size_t G, size_t position, size_t d) {
    for (size_t g = 0; g < G; g++) {
        if (g % 3 == 2) test_fill_keys(rng, q + g * d, 1, position, 1, d);
        else test_fill_normal(rng, q + g * d, d);
    }
}

/* attend_heads instead of attend_group, for grouped_matches_single. */
#define ALL_HEADS ((size_t)-1)

/* 1 if row [len] holds probs [n] bit for bit: as they are (positions NULL,
 * len = n), or at the given positions with +0 everywhere else. */
static int probs_row_matches(const float *row, const float *probs, const uint32_t *positions,
                             size_t n, size_t len) {
    if (!positions) return test_bits_equal(row, probs, n);
    size_t r = 0;
    for (size_t p = 0; p < len; p++) {
        if (r < n && positions[r] == p) {
            if (memcmp(&row[p], &probs[r++], sizeof(float)) != 0) return 0;
        } else if (row[p] != 0.0f || signbit(row[p])) {
            return 0;
        }
    }
    return r == n;
}

/* One grouped call against single attends: attend_group of G queries on
 * head h, or (h = ALL_HEADS) attend_heads of G queries per KV head, query i
 * on KV head i / G.  1 if each query gets attend's out and probs bit for
 * bit (attend_heads: at its KV head's positions, +0 elsewhere), nothing is
 * written past the probs, and the call gives the same out without probs. */
static int grouped_matches_single(const kvc_layer *layer, size_t G, size_t h, test_rng *rng) {
    const size_t H = kvc_layer_num_kv_heads(layer), d = kvc_layer_head_dim(layer);
    const size_t L = kvc_layer_seq_len(layer);
    const int all = h == ALL_HEADS;
    const size_t count = all ? G * H : G, row_len = all ? L : kvc_layer_head_len(layer, h);
    float *q = test_alloc(count * d * sizeof(float));
    float *out = test_alloc(count * d * sizeof(float));
    float *without = test_alloc(count * d * sizeof(float));
    float *probs = test_alloc((count * row_len + 1) * sizeof(float));
    float *want_out = test_alloc(d * sizeof(float));
    float *want_probs = test_alloc((L + 1) * sizeof(float));
    uint32_t *positions = test_alloc((L + 1) * sizeof(uint32_t));
    fill_queries(rng, q, count, L, d);
    for (size_t i = 0; i <= count * row_len; i++) probs[i] = SENTINEL;
    int ok = all ? kvc_layer_attend_heads(layer, q, count, out, probs) == KVC_OK &&
                       kvc_layer_attend_heads(layer, q, count, without, NULL) == KVC_OK
                 : kvc_layer_attend_group(layer, q, G, h, out, probs) == KVC_OK &&
                       kvc_layer_attend_group(layer, q, G, h, without, NULL) == KVC_OK;
    ok = ok && test_bits_equal(out, without, count * d) && probs[count * row_len] == SENTINEL;
    for (size_t i = 0; i < count && ok; i++) {
        const size_t kv = all ? i / G : h, n = kvc_layer_head_len(layer, kv);
        ok = kvc_layer_attend(layer, q + i * d, kv, want_out, want_probs) == KVC_OK &&
             kvc_layer_head_positions(layer, kv, positions, L) == KVC_OK &&
             test_bits_equal(out + i * d, want_out, d) &&
             probs_row_matches(probs + i * row_len, want_probs, all ? positions : NULL, n, row_len);
        if (!ok) printf("  %s mode %d H=%zu d=%zu L=%zu G=%zu: query %zu (KV head %zu) differs\n",
                        all ? "attend_heads" : "attend_group", (int)kvc_layer_mode(layer), H, d, L,
                        G, i, kv);
    }
    free(q);
    free(out);
    free(without);
    free(probs);
    free(want_out);
    free(want_probs);
    free(positions);
    return ok;
}

/* check on layers grown in every mode through masked data of H heads of d
 * channels, to each of lengths[0..count). */
static int holds_on_grown_layers(uint64_t seed, size_t H, size_t d, const size_t *lengths,
                                 size_t count, test_layer_check check, test_rng *rng) {
    test_data data = test_data_make(seed, lengths[count - 1], H, d, 1);
    const int ok = test_grown_in_every_mode(&data, lengths, count, check, rng);
    test_data_free(&data);
    return ok;
}

/* grouped_matches_single of attend_group on every head for every G of group_sizes. */
static int every_group_matches_single(const kvc_layer *layer, void *rng) {
    for (size_t h = 0; h < kvc_layer_num_kv_heads(layer); h++)
        for (size_t gi = 0; gi < NUM_GROUP_SIZES; gi++)
            if (!grouped_matches_single(layer, group_sizes[gi], h, rng)) return 0;
    return 1;
}

TEST(attend_group_should_give_each_query_the_attend_result_bit_for_bit) {
    /* Lengths on both sides of W = 64 (the field freezes at 65). */
    static const size_t lengths[] = {1, 17, 63, 64, 65, 66, 130, 200};
    static const size_t dims[] = {17, 64, 600};
    test_rng rng = test_rng_new(800);
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++)
        CHECK(holds_on_grown_layers(800 + di, 5, dims[di], lengths,
                                    sizeof lengths / sizeof lengths[0],
                                    every_group_matches_single, &rng));
}

TEST(attend_group_should_give_zeros_and_no_probs_for_empty_head) {
    const size_t H = 4, d = 16, G = 5;
    test_data data = test_data_make(801, 90, H, d, 1);
    test_rng rng = test_rng_new(801);
    float q[5 * 16], out[5 * 16], probs[4];
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        kvc_layer *layer = test_layer_with(&data, 90, test_modes[mi]);
        CHECK(layer != NULL);
        CHECK(kvc_layer_head_len(layer, 3) == 0); /* never alive */
        fill_queries(&rng, q, G, 90, d);
        for (size_t p = 0; p < 4; p++) probs[p] = SENTINEL;
        for (size_t j = 0; j < G * d; j++) out[j] = NAN;
        CHECK_OK(kvc_layer_attend_group(layer, q, G, 3, out, probs));
        for (size_t j = 0; j < G * d; j++) CHECK(out[j] == 0.0f);
        for (size_t p = 0; p < 4; p++) CHECK(probs[p] == SENTINEL);
        for (size_t j = 0; j < G * d; j++) out[j] = NAN;
        CHECK_OK(kvc_layer_attend_group(layer, q, G, 3, out, NULL));
        for (size_t j = 0; j < G * d; j++) CHECK(out[j] == 0.0f);
        kvc_layer_free(layer);
    }
    test_data_free(&data);
}

/* grouped_matches_single of attend_heads for every G of group_sizes. */
static int every_heads_call_matches_single(const kvc_layer *layer, void *rng) {
    for (size_t gi = 0; gi < NUM_GROUP_SIZES; gi++)
        if (!grouped_matches_single(layer, group_sizes[gi], ALL_HEADS, rng)) return 0;
    return 1;
}

TEST(attend_heads_should_give_each_query_head_its_kv_head_attend_bit_for_bit) {
    /* H = 5: head 0 stores every position (its probs go straight into the
     * row), head 2 none below W (a gap), head 3 none at all (a zero row);
     * H = 1: every query head on one KV head (multi-query attention). */
    static const size_t lengths[] = {1, 40, 64, 65, 100, 150};
    static const size_t kv_heads[] = {5, 1};
    test_rng rng = test_rng_new(810);
    for (size_t hi = 0; hi < 2; hi++)
        CHECK(holds_on_grown_layers(810 + hi, kv_heads[hi], 24, lengths,
                                    sizeof lengths / sizeof lengths[0],
                                    every_heads_call_matches_single, &rng));
}

TEST(attend_group_and_heads_should_refuse_bad_arguments) {
    const size_t H = 3, d = 8, G = 4;
    test_data data = test_data_make(820, 70, H, d, 1);
    test_rng rng = test_rng_new(820);
    float q[3 * 4 * 8], out[3 * 4 * 8], before[3 * 4 * 8], probs[3 * 4 * 70];
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        kvc_layer *layer = test_layer_with(&data, 70, test_modes[mi]);
        CHECK(layer != NULL);
        test_fill_normal(&rng, q, H * G * d);
        test_fill_normal(&rng, out, H * G * d);
        memcpy(before, out, sizeof out);
        const kvc_status null = KVC_E_NULL_POINTER;
        CHECK_REFUSED(layer, kvc_layer_attend_group(NULL, q, G, 0, out, probs), null);
        CHECK_REFUSED(layer, kvc_layer_attend_group(layer, NULL, G, 0, out, probs), null);
        CHECK_REFUSED(layer, kvc_layer_attend_group(layer, q, G, 0, NULL, probs), null);
        CHECK_REFUSED(layer, kvc_layer_attend_group(layer, q, 0, 0, out, probs), KVC_E_LENGTH);
        CHECK_REFUSED(layer, kvc_layer_attend_group(layer, q, KVC_MAX_KV_HEADS + 1, 0, out, probs),
                      KVC_E_LENGTH);
        CHECK_REFUSED(layer, kvc_layer_attend_group(layer, q, G, H, out, probs), KVC_E_KV_HEAD);
        CHECK_REFUSED(layer, kvc_layer_attend_heads(NULL, q, G * H, out, probs), null);
        CHECK_REFUSED(layer, kvc_layer_attend_heads(layer, NULL, G * H, out, probs), null);
        CHECK_REFUSED(layer, kvc_layer_attend_heads(layer, q, G * H, NULL, probs), null);
        CHECK_REFUSED(layer, kvc_layer_attend_heads(layer, q, 0, out, probs), KVC_E_NUM_HEADS);
        for (size_t heads = 1; heads < G * H; heads++) {
            if (heads % H) CHECK_REFUSED(layer, kvc_layer_attend_heads(layer, q, heads, out, probs),
                                         KVC_E_NUM_HEADS);
        }
        CHECK_REFUSED(layer,
                      kvc_layer_attend_heads(layer, q, H * (KVC_MAX_KV_HEADS + 1), out, probs),
                      KVC_E_NUM_HEADS);
        /* A non-finite element in the first or the last query of the call. */
        for (int b = 0; b < 3; b++) {
            for (size_t at = 0; at < G * d; at += G * d - 1) {
                const float keep = q[at];
                q[at] = test_nonfinite[b];
                CHECK_REFUSED(layer, kvc_layer_attend_group(layer, q, G, 1, out, probs),
                              KVC_E_NONFINITE_QUERY);
                CHECK_REFUSED(layer, kvc_layer_attend_group(layer, q, G, 1, out, NULL),
                              KVC_E_NONFINITE_QUERY);
                q[at] = keep;
            }
            for (size_t at = 0; at < G * H * d; at += G * H * d - 1) {
                const float keep = q[at];
                q[at] = test_nonfinite[b];
                CHECK_REFUSED(layer, kvc_layer_attend_heads(layer, q, G * H, out, probs),
                              KVC_E_NONFINITE_QUERY);
                CHECK_REFUSED(layer, kvc_layer_attend_heads(layer, q, G * H, out, NULL),
                              KVC_E_NONFINITE_QUERY);
                q[at] = keep;
            }
        }
        CHECK(test_bits_equal(out, before, H * G * d));
        kvc_layer_free(layer);
    }
    test_data_free(&data);
}

TEST(attend_group_and_heads_should_refuse_a_linear_layer) {
    float q[2 * 4 * 3] = {0}, out[2 * 4 * 3], probs[8] = {0};
    kvc_layer *layer;
    CHECK_OK(kvc_layer_create_linear(2, 4, 3, 0.0, &layer));
    CHECK_REFUSED(layer, kvc_layer_attend_group(layer, q, 2, 0, out, probs), KVC_E_KIND);
    CHECK_REFUSED(layer, kvc_layer_attend_group(layer, q, 2, 0, out, NULL), KVC_E_KIND);
    CHECK_REFUSED(layer, kvc_layer_attend_heads(layer, q, 2, out, probs), KVC_E_KIND);
    CHECK_REFUSED(layer, kvc_layer_attend_heads(layer, q, 2, out, NULL), KVC_E_KIND);
    kvc_layer_free(layer);
}

RUN_TESTS(CASE(attend_group_should_give_each_query_the_attend_result_bit_for_bit),
          CASE(attend_group_should_give_zeros_and_no_probs_for_empty_head),
          CASE(attend_heads_should_give_each_query_head_its_kv_head_attend_bit_for_bit),
          CASE(attend_group_and_heads_should_refuse_bad_arguments),
          CASE(attend_group_and_heads_should_refuse_a_linear_layer))
