/*
 * test_window.c -- the sliding-window layer kind: each query attends the
 * positions of its window only (an f32 query's result is, bit for bit,
 * attention over those rows), prefill and decode give each query the same
 * bits, the layer lets go of what slid out and stays within its bound, a
 * verify's accept(j) is j plain appends, truncation is taken within the
 * rows still held and refused past them with nothing changed, snapshots and
 * forks carry it, and the calls a window layer does not take are refused.
 */
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "core/internal.h" /* kvc_pool_set_min_work: small jobs on the pool too */

#define H 3
#define D 16
#define WIN 40
#define ROLLBACK 8
#define LEN 300
#define QUERY_HEADS (2 * H)

/* Positions a window layer may hold after an append of n at once. */
#define BOUND(n) (WIN - 1 + ROLLBACK + 64 + (n))

static kvc_layer *window_layer(kvc_mode mode) {
    kvc_layer *layer = NULL;
    if (kvc_layer_create_window(H, D, mode, WIN, ROLLBACK, &layer) != KVC_OK) return NULL;
    return layer;
}

static void fill_queries(uint64_t seed, float *q, size_t n) {
    test_rng rng = test_rng_new(seed);
    test_fill_normal(&rng, q, n);
}

TEST(an_f32_query_attends_exactly_the_positions_of_its_window) {
    test_data data = test_data_make(1, LEN, H, D, 0);
    kvc_layer *layer = window_layer(KVC_MODE_F32);
    float *keys = malloc(LEN * D * sizeof(float)), *values = malloc(LEN * D * sizeof(float));
    float q[QUERY_HEADS * D], out[QUERY_HEADS * D], expected[D];
    CHECK(layer && keys && values);
    for (size_t p = 0; p < LEN; p++) {
        CHECK_OK(test_data_append(layer, &data, p, 1));
        fill_queries(100 + p, q, QUERY_HEADS * D);
        CHECK_OK(kvc_layer_attend_heads(layer, q, QUERY_HEADS, out, NULL));
        const size_t first = p + 1 > WIN ? p + 1 - WIN : 0;
        for (size_t i = 0; i < QUERY_HEADS; i++) {
            const size_t h = i / 2;
            for (size_t r = first; r <= p; r++) {
                memcpy(keys + (r - first) * D, data.k + (r * H + h) * D, D * sizeof(float));
                memcpy(values + (r - first) * D, data.v + (r * H + h) * D, D * sizeof(float));
            }
            CHECK_OK(kvc_attention_head(q + i * D, keys, values, p + 1 - first, D, expected, NULL));
            CHECK(test_bits_equal(out + i * D, expected, D));
        }
    }
    free(keys);
    free(values);
    kvc_layer_free(layer);
    test_data_free(&data);
}

/* Positions of head h's rows. */
static size_t head_positions(const kvc_layer *layer, size_t h, uint32_t *positions) {
    const size_t n = kvc_layer_head_len(layer, h);
    if (kvc_layer_head_positions(layer, h, positions, n) != KVC_OK) return SIZE_MAX;
    return n;
}

/* Chunks of a prefill, and single appends, give every query the same bits
 * (probabilities too, position by position), in every mode, with and
 * without masked heads. */
TEST(prefill_chunks_and_single_appends_give_each_query_the_same_bits) {
    static const size_t chunks[] = {1, 7, 64, 33, 90, 5, 100};
    enum { MOST = 100 };
    float *q = malloc(MOST * D * sizeof(float));
    float *outs = malloc(H * MOST * D * sizeof(float));
    float *probs = malloc(H * MOST * BOUND(MOST) * sizeof(float));
    uint32_t chunked_at[BOUND(MOST)], single_at[BOUND(1)];
    float one[D], one_probs[BOUND(1)];
    CHECK(q && outs && probs);
    for (int masked = 0; masked < 2; masked++) {
        test_data data = test_data_make(2 + masked, LEN, H, D, masked);
        for (size_t m = 0; m < TEST_MODE_COUNT; m++) {
            kvc_layer *chunked = window_layer(test_modes[m]), *single = window_layer(test_modes[m]);
            CHECK(chunked && single);
            size_t at = 0;
            for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
                const size_t n = chunks[c];
                fill_queries(200 + at, q, n * D);
                CHECK_OK(test_data_append(chunked, &data, at, n));
                CHECK(kvc_layer_seq_len(chunked) <= BOUND(n));
                size_t rows[H];
                for (size_t h = 0; h < H; h++) {
                    rows[h] = kvc_layer_head_len(chunked, h);
                    CHECK_OK(kvc_layer_attend_causal(chunked, q, n, h, outs + h * MOST * D, probs + h * MOST * BOUND(MOST)));
                }
                for (size_t i = 0; i < n; i++) {
                    CHECK_OK(test_data_append(single, &data, at + i, 1));
                    CHECK(kvc_layer_seq_len(single) <= BOUND(1));
                    for (size_t h = 0; h < H; h++) {
                        CHECK_OK(kvc_layer_attend(single, q + i * D, h, one, one_probs));
                        CHECK(test_bits_equal(one, outs + (h * MOST + i) * D, D));
                        /* Probabilities by position: the window's the same, 0 elsewhere. */
                        const size_t ns = head_positions(single, h, single_at), nc = head_positions(chunked, h, chunked_at);
                        CHECK(ns != SIZE_MAX && nc == rows[h]);
                        const float *row = probs + h * MOST * BOUND(MOST) + i * nc;
                        size_t s = 0;
                        for (size_t r = 0; r < nc; r++) {
                            while (s < ns && single_at[s] < chunked_at[r]) s++;
                            const int seen = chunked_at[r] <= at + i && chunked_at[r] + WIN > at + i;
                            const float expected = seen && s < ns && single_at[s] == chunked_at[r] ? one_probs[s] : 0.0f;
                            CHECK(memcmp(&row[r], &expected, sizeof expected) == 0);
                        }
                    }
                }
                at += n;
            }
            kvc_layer_free(chunked);
            kvc_layer_free(single);
        }
        test_data_free(&data);
    }
    free(q);
    free(outs);
    free(probs);
}

TEST(a_window_layer_lets_go_of_what_slid_out_and_costs_far_less_than_a_full_one) {
    test_data data = test_data_make(4, LEN, H, D, 0);
    for (size_t m = 0; m < TEST_MODE_COUNT; m++) {
        kvc_layer *layer = window_layer(test_modes[m]), *full = NULL;
        CHECK(layer);
        CHECK_OK(kvc_layer_create(H, D, test_modes[m], &full));
        size_t most = 0, capacity = 0;
        for (size_t p = 0; p < LEN; p++) {
            if (p == 200) capacity = kvc_layer_capacity_bytes(layer);
            CHECK_OK(test_data_append(layer, &data, p, 1));
            CHECK_OK(test_data_append(full, &data, p, 1));
            const size_t held = kvc_layer_seq_len(layer);
            if (held > most) most = held;
            /* Every position the next query sees, and its rollback, are held. */
            uint32_t positions[BOUND(1)];
            CHECK_OK(kvc_layer_positions(layer, positions, BOUND(1)));
            const size_t need = p + 1 >= WIN - 1 + ROLLBACK ? p + 2 - WIN - ROLLBACK : 0;
            CHECK(positions[0] <= need && positions[held - 1] == p);
            CHECK(kvc_layer_next_position(layer) == p + 1);
        }
        CHECK(most <= BOUND(1));
        CHECK(most > WIN + ROLLBACK); /* pages at a time, not row by row */
        CHECK(kvc_layer_memory_bytes(layer) * 2 < kvc_layer_memory_bytes(full));
        /* The capacity stops growing too: the pages are reused. */
        CHECK(kvc_layer_capacity_bytes(layer) == capacity);
        kvc_layer_free(layer);
        kvc_layer_free(full);
    }
    test_data_free(&data);
}

/* Everything a snapshot holds, as bytes (NULL on failure). */
static uint8_t *snapshot_of(const kvc_layer *layer, size_t *len) {
    *len = kvc_layer_snapshot_size(layer);
    uint8_t *bytes = malloc(*len);
    if (bytes && kvc_layer_serialize(layer, bytes, *len) != KVC_OK) {
        free(bytes);
        return NULL;
    }
    return bytes;
}

static int same_snapshots(const kvc_layer *a, const kvc_layer *b) {
    size_t la, lb;
    uint8_t *sa = snapshot_of(a, &la), *sb = snapshot_of(b, &lb);
    const int same = sa && sb && la == lb && memcmp(sa, sb, la) == 0;
    free(sa);
    free(sb);
    return same;
}

TEST(a_verify_that_keeps_j_drafts_leaves_the_layer_as_j_plain_appends) {
    test_data truth = test_data_make(5, LEN, H, D, 1), junk = test_data_make(6, LEN, H, D, 1);
    for (size_t m = 0; m < TEST_MODE_COUNT; m++) {
        kvc_layer *spec = window_layer(test_modes[m]), *plain = window_layer(test_modes[m]);
        CHECK(spec && plain);
        size_t at = 0, round = 0;
        while (at + 8 < LEN) {
            const size_t k = 1 + round % 7, j = round % (k + 1);
            CHECK_OK(kvc_layer_begin_verify(spec));
            CHECK_OK(test_data_append(spec, &truth, at, j));
            if (k > j) CHECK_OK(test_data_append(spec, &junk, at + j, k - j));
            CHECK_OK(kvc_layer_accept(spec, j));
            for (size_t i = 0; i < j; i++) CHECK_OK(test_data_append(plain, &truth, at + i, 1));
            at += j;
            if (j == 0) { /* the next position comes plainly */
                CHECK_OK(test_data_append(spec, &truth, at, 1));
                CHECK_OK(test_data_append(plain, &truth, at, 1));
                at++;
            }
            CHECK(kvc_layer_memory_bytes(spec) == kvc_layer_memory_bytes(plain));
            CHECK(same_snapshots(spec, plain));
            round++;
        }
        kvc_layer_free(spec);
        kvc_layer_free(plain);
    }
    test_data_free(&truth);
    test_data_free(&junk);
}

TEST(truncation_is_taken_within_the_rows_held_and_refused_past_them_changing_nothing) {
    test_data data = test_data_make(7, LEN, H, D, 0);
    float q[QUERY_HEADS * D], out[QUERY_HEADS * D], expected[QUERY_HEADS * D];
    fill_queries(7, q, QUERY_HEADS * D);
    for (size_t m = 0; m < TEST_MODE_COUNT; m++) {
        kvc_layer *layer = window_layer(test_modes[m]), *shorter = window_layer(test_modes[m]);
        CHECK(layer && shorter);
        CHECK_OK(test_data_append(layer, &data, 0, 20));
        CHECK_OK(kvc_layer_truncate_last(layer, 15)); /* nothing slid out yet: any depth */
        CHECK(kvc_layer_next_position(layer) == 5);
        for (size_t p = 5; p < 250; p++) CHECK_OK(test_data_append(layer, &data, p, 1));
        CHECK_OK(test_data_append(shorter, &data, 0, 250 - ROLLBACK));
        const size_t exact = kvc_layer_exact_rollback(layer);
        CHECK(exact >= ROLLBACK && exact < 64 + ROLLBACK);
        size_t len;
        uint8_t *before = snapshot_of(layer, &len);
        CHECK(before);
        CHECK_STATUS(kvc_layer_truncate_last(layer, exact + 1), KVC_E_WINDOW);
        CHECK_STATUS(kvc_layer_truncate_last(layer, 250), KVC_E_WINDOW);
        size_t after_len;
        uint8_t *after = snapshot_of(layer, &after_len);
        CHECK(after && after_len == len && memcmp(before, after, len) == 0);
        free(before);
        free(after);
        /* Within the rollback: attention as if the positions had never come. */
        CHECK_OK(kvc_layer_truncate_last(layer, ROLLBACK));
        CHECK(kvc_layer_next_position(layer) == 250 - ROLLBACK);
        CHECK_OK(kvc_layer_attend_heads(layer, q, QUERY_HEADS, out, NULL));
        CHECK_OK(kvc_layer_attend_heads(shorter, q, QUERY_HEADS, expected, NULL));
        CHECK(test_bits_equal(out, expected, QUERY_HEADS * D));
        /* And it goes on as the other. */
        CHECK_OK(test_data_append(layer, &data, 250 - ROLLBACK, 30));
        CHECK_OK(test_data_append(shorter, &data, 250 - ROLLBACK, 30));
        CHECK_OK(kvc_layer_attend_heads(layer, q, QUERY_HEADS, out, NULL));
        CHECK_OK(kvc_layer_attend_heads(shorter, q, QUERY_HEADS, expected, NULL));
        CHECK(test_bits_equal(out, expected, QUERY_HEADS * D));
        kvc_layer_free(layer);
        kvc_layer_free(shorter);
    }
    test_data_free(&data);
}

TEST(snapshots_and_forks_carry_a_window_layer) {
    test_data data = test_data_make(8, LEN, H, D, 1);
    float q[QUERY_HEADS * D], a[QUERY_HEADS * D], b[QUERY_HEADS * D];
    fill_queries(8, q, QUERY_HEADS * D);
    for (size_t m = 0; m < TEST_MODE_COUNT; m++) {
        kvc_layer *layer = window_layer(test_modes[m]), *restored = NULL, *fork = NULL;
        CHECK(layer);
        CHECK_OK(test_data_append(layer, &data, 0, 150));
        size_t len;
        uint8_t *bytes = snapshot_of(layer, &len);
        CHECK(bytes);
        CHECK_OK(kvc_layer_deserialize(bytes, len, &restored));
        free(bytes);
        CHECK_OK(kvc_layer_clone(layer, &fork));
        CHECK(kvc_layer_kind(restored) == KVC_KIND_WINDOW && kvc_layer_window(restored) == WIN &&
              kvc_layer_window_rollback(restored) == ROLLBACK && kvc_layer_kind(fork) == KVC_KIND_WINDOW);
        CHECK(same_snapshots(layer, restored) && same_snapshots(layer, fork));
        /* All three go on alike; the fork's pages are copied as they slide. */
        for (size_t p = 150; p < LEN; p++) {
            CHECK_OK(test_data_append(layer, &data, p, 1));
            CHECK_OK(test_data_append(restored, &data, p, 1));
            CHECK_OK(test_data_append(fork, &data, p, 1));
        }
        CHECK_OK(kvc_layer_attend_heads(layer, q, QUERY_HEADS, a, NULL));
        CHECK_OK(kvc_layer_attend_heads(fork, q, QUERY_HEADS, b, NULL));
        CHECK(test_bits_equal(a, b, QUERY_HEADS * D));
        CHECK(same_snapshots(layer, restored) && same_snapshots(layer, fork));
        kvc_layer_free(layer);
        kvc_layer_free(restored);
        kvc_layer_free(fork);
    }
    test_data_free(&data);
}

static struct {
    kvc_model *model;
    kvc_layer ***held;
} holding;

static kvc_status hold_call(void *ctx) {
    (void)ctx;
    return kvc_model_hold(holding.model, holding.held);
}

TEST(a_long_append_gives_back_every_layer_whole_from_the_window_layers_held_before_it) {
    test_data data = test_data_make(10, LEN, H, D, 1);
    for (size_t m = 0; m < TEST_MODE_COUNT; m++) {
        kvc_layer *layers[2] = {window_layer(test_modes[m]), NULL};
        CHECK(layers[0] && kvc_layer_create(H, D, test_modes[m], &layers[1]) == KVC_OK);
        kvc_model *model;
        CHECK_OK(kvc_model_create(layers, 2, &model));
        for (size_t l = 0; l < 2; l++) CHECK_OK(test_data_append(layers[l], &data, 0, 60));
        size_t len;
        uint8_t *before = snapshot_of(layers[0], &len);
        CHECK(before);
        const size_t full_rows = kvc_layer_seq_len(layers[1]);
        kvc_layer **held = NULL;
        /* Out of memory holds nothing and changes nothing. */
        CHECK_OK(test_fault_install());
        holding.model = model, holding.held = &held;
        CHECK(test_run_with_faults_on_model(hold_call, NULL, model, 0, TEST_KEEPS_NONE) > 0);
        CHECK(held && held[0] && !held[1]);
        kvc_model_release(model, held);
        CHECK(test_fault_remove() == 0); /* released, the forks leave nothing behind */
        CHECK_OK(kvc_model_hold(model, &held));
        /* 200 positions in two appends (a forward's chunks) slide the window
         * past what truncation gives back. */
        for (size_t l = 0; l < 2; l++) {
            CHECK_OK(test_data_append(layers[l], &data, 60, 100));
            CHECK_OK(test_data_append(layers[l], &data, 160, 100));
        }
        CHECK_STATUS(kvc_model_truncate_last(model, 200), KVC_E_WINDOW);
        kvc_model_give_back(model, held, 200);
        kvc_model_release(model, held);
        size_t after_len;
        uint8_t *after = snapshot_of(layers[0], &after_len);
        CHECK(after && after_len == len && memcmp(before, after, len) == 0);
        CHECK(kvc_layer_next_position(layers[1]) == 60 && kvc_layer_seq_len(layers[1]) == full_rows);
        free(before);
        free(after);
        /* And both go on as layers that never took the 200. */
        kvc_layer *fresh = window_layer(test_modes[m]);
        CHECK(fresh);
        CHECK_OK(test_data_append(fresh, &data, 0, 60));
        CHECK_OK(test_data_append(fresh, &data, 60, 100));
        CHECK_OK(test_data_append(layers[0], &data, 60, 100));
        CHECK(same_snapshots(layers[0], fresh));
        kvc_layer_free(fresh);
        kvc_model_free(model);
    }
    test_data_free(&data);
}

TEST(results_are_the_same_bits_at_any_thread_count) {
    test_data data = test_data_make(9, LEN, H, D, 0);
    kvc_layer *layer = window_layer(KVC_MODE_Q8);
    enum { M = 50 };
    float q[M * D], one[M * D], many[M * D];
    CHECK(layer);
    CHECK_OK(test_data_append(layer, &data, 0, 200));
    fill_queries(9, q, M * D);
    const size_t previous = kvc_pool_set_min_work(0);
    CHECK_OK(kvc_set_threads(1));
    CHECK_OK(kvc_layer_attend_causal(layer, q, M, 1, one, NULL));
    if (kvc_set_threads(3) == KVC_OK) {
        CHECK_OK(kvc_layer_attend_causal(layer, q, M, 1, many, NULL));
        CHECK(test_bits_equal(one, many, M * D));
        kvc_set_threads(1);
    } else {
        test_skip("kvc_set_threads: this build's threads are started by the JS loader (wasm); "
                  "tests/js/threads.test.mjs compares thread counts");
    }
    kvc_pool_set_min_work(previous);
    kvc_layer_free(layer);
    test_data_free(&data);
}

TEST(a_window_layer_refuses_bad_windows_and_the_calls_it_does_not_take) {
    kvc_layer *layer = NULL;
    CHECK_STATUS(kvc_layer_create_window(H, D, KVC_MODE_F32, 0, 0, &layer), KVC_E_WINDOW);
    CHECK(layer == NULL);
    CHECK_STATUS(kvc_layer_create_window(H, D, KVC_MODE_F32, (size_t)KVC_MAX_POSITIONS + 1, 0, &layer), KVC_E_WINDOW);
    CHECK_STATUS(kvc_layer_create_window(H, D, KVC_MODE_F32, 8, (size_t)KVC_MAX_POSITIONS + 1, &layer), KVC_E_WINDOW);
    CHECK_STATUS(kvc_layer_create_window(0, D, KVC_MODE_F32, 8, 0, &layer), KVC_E_NUM_KV_HEADS);
    CHECK_STATUS(kvc_layer_create_window(H, D, KVC_MODE_F32, 8, 0, NULL), KVC_E_NULL_POINTER);
    layer = window_layer(KVC_MODE_F32);
    CHECK(layer);
    CHECK_STATUS(kvc_layer_evict(layer, 10, 0, 10), KVC_E_KIND);
    CHECK_STATUS(kvc_layer_set_max_rows(layer, 10, 0, 10), KVC_E_KIND);
    CHECK(kvc_layer_window(layer) == WIN && kvc_layer_window(NULL) == 0);
    char description[512];
    kvc_layer_describe(layer, description, sizeof description);
    CHECK(strstr(description, "kind=window window=40 ") != NULL);
    kvc_layer_free(layer);
}

RUN_TESTS(CASE(an_f32_query_attends_exactly_the_positions_of_its_window),
          CASE(prefill_chunks_and_single_appends_give_each_query_the_same_bits),
          CASE(a_window_layer_lets_go_of_what_slid_out_and_costs_far_less_than_a_full_one),
          CASE(a_verify_that_keeps_j_drafts_leaves_the_layer_as_j_plain_appends),
          CASE(truncation_is_taken_within_the_rows_held_and_refused_past_them_changing_nothing),
          CASE(snapshots_and_forks_carry_a_window_layer),
          CASE(a_long_append_gives_back_every_layer_whole_from_the_window_layers_held_before_it),
          CASE(results_are_the_same_bits_at_any_thread_count),
          CASE(a_window_layer_refuses_bad_windows_and_the_calls_it_does_not_take))
