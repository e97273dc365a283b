/*
 * test_threads.c -- the pool: every parallel call gives the same bits on 1,
 * 2, 3 and 8 threads (more threads than this machine has cores included),
 * in every mode, for heads long enough to span several segments, and for a
 * prompt within one segment (its queries shared out between threads).
 *
 * Natively the pool is pthreads (kvc_set_threads).  In a wasm build the
 * threads are workers the JS loader starts, which these C programs cannot:
 * kvc_set_threads accepts only 1 there, and the comparisons across thread
 * counts say so and run in the JS tests (tests/js/threads.test.mjs).
 */
#include <stdlib.h>
#include <string.h>

#include "test.h"

static const size_t thread_counts[] = {2, 3, 8};
#define NUM_THREAD_COUNTS (sizeof thread_counts / sizeof thread_counts[0])

/* Two and a half segments of 1024 rows, four heads (one never alive, one
 * alive at about half the positions), three queries per KV head. */
enum { LEN = 2600, H = 4, D = 24, G = 3, M = 7 };
/* A prompt's rows: within one segment. */
enum { SHORT_LEN = 300 };

/* Everything the parallel calls give for one layer, as bytes. */
typedef struct results {
    float *heads_out, *heads_probs, *heads_out_only;
    float *group_out[H], *group_probs[H];
    float *causal_out[H], *causal_probs[H];
    float *prompt_out[H], *prompt_probs[H]; /* causal over SHORT_LEN rows */
    float *head_out, *head_probs;
    uint8_t *snapshot;
    size_t snapshot_len;
} results;

static void results_free(results *r) {
    free(r->heads_out), free(r->heads_probs), free(r->heads_out_only);
    for (size_t h = 0; h < H; h++) {
        free(r->group_out[h]), free(r->group_probs[h]);
        free(r->causal_out[h]), free(r->causal_probs[h]);
        free(r->prompt_out[h]), free(r->prompt_probs[h]);
    }
    free(r->head_out), free(r->head_probs), free(r->snapshot);
    memset(r, 0, sizeof *r);
}

/* Appends data in a few batches (a prefill and decode steps) and runs every
 * parallel call on the layer; 0 if a call failed. */
static int take_results(const test_data *data, kvc_mode mode, const float *q, results *r) {
    kvc_layer *layer;
    if (kvc_layer_create(H, D, mode, &layer) != KVC_OK) return 0;
    int ok = test_data_append(layer, data, 0, 2000) == KVC_OK &&
             test_data_append(layer, data, 2000, 1) == KVC_OK &&
             test_data_append(layer, data, 2001, LEN - 2001) == KVC_OK;
    const size_t L = LEN, n0 = kvc_layer_head_len(layer, 0);
    r->heads_out = test_alloc(H * G * D * sizeof(float));
    r->heads_out_only = test_alloc(H * G * D * sizeof(float));
    r->heads_probs = test_alloc(H * G * L * sizeof(float));
    ok = ok && kvc_layer_attend_heads(layer, q, H * G, r->heads_out, r->heads_probs) == KVC_OK;
    ok = ok && kvc_layer_attend_heads(layer, q, H * G, r->heads_out_only, NULL) == KVC_OK;
    for (size_t h = 0; h < H && ok; h++) {
        const size_t n = kvc_layer_head_len(layer, h);
        r->group_out[h] = test_alloc(G * D * sizeof(float));
        r->group_probs[h] = test_alloc((G * n + 1) * sizeof(float));
        r->causal_out[h] = test_alloc(M * D * sizeof(float));
        r->causal_probs[h] = test_alloc((M * n + 1) * sizeof(float));
        ok = kvc_layer_attend_group(layer, q + h * G * D, G, h, r->group_out[h], r->group_probs[h]) == KVC_OK &&
             kvc_layer_attend_causal(layer, q, M, h, r->causal_out[h], r->causal_probs[h]) == KVC_OK;
    }
    /* kvc_attention_head over head 0's rows as stored. */
    float *keys = test_alloc(n0 * D * sizeof(float)), *values = test_alloc(n0 * D * sizeof(float));
    r->head_out = test_alloc(D * sizeof(float));
    r->head_probs = test_alloc(n0 * sizeof(float));
    ok = ok && kvc_layer_head_keys(layer, 0, keys, n0 * D) == KVC_OK &&
         kvc_layer_head_values(layer, 0, values, n0 * D) == KVC_OK &&
         kvc_attention_head(q, keys, values, n0, D, r->head_out, r->head_probs) == KVC_OK;
    free(keys), free(values);
    r->snapshot_len = kvc_layer_snapshot_size(layer);
    r->snapshot = test_alloc(r->snapshot_len);
    ok = ok && kvc_layer_serialize(layer, r->snapshot, r->snapshot_len) == KVC_OK;
    kvc_layer_free(layer);
    kvc_layer *prompt;
    if (!ok || kvc_layer_create(H, D, mode, &prompt) != KVC_OK) return 0;
    ok = test_data_append(prompt, data, 0, SHORT_LEN) == KVC_OK;
    for (size_t h = 0; h < H && ok; h++) {
        const size_t n = kvc_layer_head_len(prompt, h);
        r->prompt_out[h] = test_alloc(M * D * sizeof(float));
        r->prompt_probs[h] = test_alloc((M * n + 1) * sizeof(float));
        ok = kvc_layer_attend_causal(prompt, q, M, h, r->prompt_out[h], r->prompt_probs[h]) == KVC_OK;
    }
    kvc_layer_free(prompt);
    return ok;
}

static int results_equal(const results *a, const results *b, const test_data *data) {
    const size_t L = LEN;
    if (!test_bits_equal(a->heads_out, b->heads_out, H * G * D) ||
        !test_bits_equal(a->heads_out_only, b->heads_out_only, H * G * D) ||
        !test_bits_equal(a->heads_probs, b->heads_probs, H * G * L) ||
        !test_bits_equal(a->head_out, b->head_out, D) ||
        !test_bits_equal(a->head_probs, b->head_probs, test_data_rows(data, 0, 0, L)))
        return 0;
    for (size_t h = 0; h < H; h++) {
        const size_t n = test_data_rows(data, h, 0, L);
        if (!test_bits_equal(a->group_out[h], b->group_out[h], G * D) ||
            !test_bits_equal(a->group_probs[h], b->group_probs[h], G * n) ||
            !test_bits_equal(a->causal_out[h], b->causal_out[h], M * D) ||
            !test_bits_equal(a->causal_probs[h], b->causal_probs[h], M * n))
            return 0;
        const size_t prompt_n = test_data_rows(data, h, 0, SHORT_LEN);
        if (!test_bits_equal(a->prompt_out[h], b->prompt_out[h], M * D) ||
            !test_bits_equal(a->prompt_probs[h], b->prompt_probs[h], M * prompt_n))
            return 0;
    }
    return a->snapshot_len == b->snapshot_len && memcmp(a->snapshot, b->snapshot, a->snapshot_len) == 0;
}

TEST(every_parallel_call_should_give_the_same_bits_on_any_number_of_threads) {
    test_data data = test_data_make(301, LEN, H, D, 1);
    test_rng rng = test_rng_new(301);
    float q[H * G * D];
    test_fill_normal(&rng, q, H * G * D);
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        results one = {0};
        CHECK_OK(kvc_set_threads(1));
        CHECK(take_results(&data, test_modes[mi], q, &one));
        for (size_t t = 0; t < NUM_THREAD_COUNTS; t++) {
            const kvc_status status = kvc_set_threads(thread_counts[t]);
            if (status == KVC_E_THREADS) {
                test_skip("kvc_set_threads: this build's threads are started by the JS loader "
                          "(wasm); tests/js/threads.test.mjs compares thread counts");
                break;
            }
            CHECK_OK(status);
            CHECK(kvc_thread_count() == thread_counts[t]);
            results many = {0};
            CHECK(take_results(&data, test_modes[mi], q, &many));
            CHECK(results_equal(&one, &many, &data));
            results_free(&many);
        }
        results_free(&one);
    }
    CHECK_OK(kvc_set_threads(1));
    test_data_free(&data);
}

TEST(set_threads_should_refuse_zero_and_more_than_64_and_change_nothing) {
    const size_t before = kvc_thread_count();
    CHECK_STATUS(kvc_set_threads(0), KVC_E_THREADS);
    CHECK_STATUS(kvc_set_threads(65), KVC_E_THREADS);
    CHECK(kvc_thread_count() == before);
    CHECK_OK(kvc_set_threads(1));
    CHECK(kvc_thread_count() == 1);
}

TEST(set_threads_should_stop_the_pool_when_set_back_to_one) {
    if (kvc_set_threads(4) == KVC_E_THREADS) {
        test_skip("kvc_set_threads: this build's threads are started by the JS loader (wasm)");
        return;
    }
    CHECK(kvc_thread_count() == 4);
    CHECK_OK(kvc_set_threads(2));
    CHECK(kvc_thread_count() == 2);
    CHECK_OK(kvc_set_threads(1));
    CHECK(kvc_thread_count() == 1);
}

/* Many callers at once on one layer (reading it is thread-safe): the pool
 * serves one call at a time and the others run inline, each with its own
 * result, all equal. */
#if !defined(__EMSCRIPTEN__)
#include <pthread.h>

typedef struct caller {
    const kvc_layer *layer;
    const float *q;
    float out[H * G * D];
    kvc_status status;
} caller;

static void *call_heads(void *arg) {
    caller *c = arg;
    for (int i = 0; i < 20 && c->status == KVC_OK; i++)
        c->status = kvc_layer_attend_heads(c->layer, c->q, H * G, c->out, NULL);
    return NULL;
}
#endif

TEST(concurrent_callers_should_each_get_the_single_thread_result) {
#if defined(__EMSCRIPTEN__)
    test_skip("wasm: these test programs have no threads of their own to call from");
#else
    test_data data = test_data_make(302, LEN, H, D, 1);
    test_rng rng = test_rng_new(302);
    float q[H * G * D], want[H * G * D];
    test_fill_normal(&rng, q, H * G * D);
    kvc_layer *layer = test_layer_with(&data, LEN, KVC_MODE_Q8);
    CHECK(layer != NULL);
    CHECK_OK(kvc_set_threads(1));
    CHECK_OK(kvc_layer_attend_heads(layer, q, H * G, want, NULL));
    CHECK_OK(kvc_set_threads(3));
    enum { CALLERS = 4 };
    caller callers[CALLERS];
    pthread_t threads[CALLERS];
    for (int i = 0; i < CALLERS; i++) {
        callers[i] = (caller){layer, q, {0}, KVC_OK};
        CHECK(pthread_create(&threads[i], NULL, call_heads, &callers[i]) == 0);
    }
    for (int i = 0; i < CALLERS; i++) pthread_join(threads[i], NULL);
    for (int i = 0; i < CALLERS; i++) {
        CHECK_OK(callers[i].status);
        CHECK(test_bits_equal(callers[i].out, want, H * G * D));
    }
    CHECK_OK(kvc_set_threads(1));
    kvc_layer_free(layer);
    test_data_free(&data);
#endif
}

RUN_TESTS(CASE(every_parallel_call_should_give_the_same_bits_on_any_number_of_threads),
          CASE(set_threads_should_refuse_zero_and_more_than_64_and_change_nothing),
          CASE(set_threads_should_stop_the_pool_when_set_back_to_one),
          CASE(concurrent_callers_should_each_get_the_single_thread_result))
