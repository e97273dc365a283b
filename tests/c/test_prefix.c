/*
 * test_prefix.c -- prefix caches: an entry is a fork kept under its tokens;
 * a match hands back a fork of the longest common prefix, equal to a cache
 * that prefilled just those positions; the budget drops the least recently
 * used; bad input changes nothing.
 */
#include <stdlib.h>
#include <string.h>

#include "test.h"

enum { LAYERS = 3, H = 2, D = 16, LEN = 300 };

/* A model of LAYERS full layers holding positions [0, len) of `data`. */
static kvc_model *model_of(const test_data *data, size_t len, kvc_mode mode) {
    kvc_layer *layers[LAYERS] = {0};
    for (size_t i = 0; i < LAYERS; i++) {
        layers[i] = test_layer_with(data, len, mode);
        if (!layers[i]) return NULL;
    }
    kvc_model *model = NULL;
    if (kvc_model_create(layers, LAYERS, &model) != KVC_OK) return NULL;
    return model;
}

/* Tokens of a conversation: `shared` tokens every conversation starts with,
 * then its own. */
static void tokens_of(uint32_t *tokens, size_t n, size_t shared, uint32_t conversation) {
    for (size_t i = 0; i < n; i++) tokens[i] = i < shared ? (uint32_t)(i * 7 + 1) : conversation * 100000u + (uint32_t)i;
}

static size_t entry_bytes(const kvc_model *model) {
    return kvc_model_memory_bytes(model);
}

TEST(match_should_give_a_fork_of_the_longest_common_prefix) {
    test_data data = test_data_make(401, LEN, H, D, 1);
    kvc_prefix_cache *cache;
    CHECK_OK(kvc_prefix_cache_create(SIZE_MAX, &cache));
    uint32_t a[LEN], b[LEN], query[LEN];
    tokens_of(a, LEN, 200, 1);
    tokens_of(b, LEN, 120, 2);
    kvc_model *ma = model_of(&data, LEN, KVC_MODE_Q8), *mb = model_of(&data, LEN, KVC_MODE_Q8);
    CHECK(ma && mb);
    int kept = 0;
    CHECK_OK(kvc_prefix_cache_add(cache, a, LEN, ma, &kept));
    CHECK(kept);
    CHECK_OK(kvc_prefix_cache_add(cache, b, LEN, mb, &kept));
    CHECK(kvc_prefix_cache_size(cache) == 2);
    /* 250 tokens: the first 200 are a's (and 120 of them b's too). */
    tokens_of(query, 250, 200, 3);
    size_t length;
    kvc_model *fork;
    CHECK_OK(kvc_prefix_cache_match(cache, query, 250, &length, &fork));
    CHECK(length == 200 && fork != NULL);
    kvc_model *plain = model_of(&data, 200, KVC_MODE_Q8);
    CHECK(plain && test_models_equal(fork, plain));
    /* It is the caller's: appending to it changes no entry. */
    test_state **entry_before = test_model_state_take(ma);
    for (size_t i = 0; i < LAYERS; i++) CHECK_OK(test_data_append(kvc_model_layer(fork, i), &data, 200, 50));
    CHECK(test_model_state_matches(ma, entry_before));
    test_model_state_free(entry_before);
    kvc_model_free(fork);
    kvc_model_free(plain);
    kvc_model_free(ma); /* the entries keep their own forks */
    kvc_model_free(mb);
    CHECK_OK(kvc_prefix_cache_match(cache, a, LEN, &length, &fork));
    CHECK(length == LEN);
    plain = model_of(&data, LEN, KVC_MODE_Q8);
    CHECK(test_models_equal(fork, plain));
    kvc_model_free(fork);
    kvc_model_free(plain);
    kvc_prefix_cache_free(cache);
    kvc_memory_usage usage;
    kvc_memory_stats(&usage);
    CHECK(usage.pages == 0);
    test_data_free(&data);
}

TEST(match_below_the_sink_window_should_find_nothing) {
    test_data data = test_data_make(402, LEN, H, D, 0);
    kvc_prefix_cache *cache;
    CHECK_OK(kvc_prefix_cache_create(SIZE_MAX, &cache));
    uint32_t a[LEN], query[LEN];
    tokens_of(a, 100, 100, 1);
    kvc_model *model = model_of(&data, 100, KVC_MODE_F32);
    CHECK_OK(kvc_prefix_cache_add(cache, a, 100, model, NULL));
    size_t length = 7;
    kvc_model *fork = (kvc_model *)cache;
    tokens_of(query, 100, KVC_Q8_WINDOW - 1, 2);
    CHECK_OK(kvc_prefix_cache_match(cache, query, 100, &length, &fork));
    CHECK(length == 0 && fork == NULL);
    tokens_of(query, 100, KVC_Q8_WINDOW, 2);
    CHECK_OK(kvc_prefix_cache_match(cache, query, 100, &length, &fork));
    CHECK(length == KVC_Q8_WINDOW && fork != NULL);
    CHECK(kvc_model_seq_len(fork) == KVC_Q8_WINDOW);
    kvc_model_free(fork);
    kvc_model_free(model);
    kvc_prefix_cache_free(cache);
    test_data_free(&data);
}

TEST(entries_of_a_shared_prefix_should_count_its_pages_once) {
    test_data data = test_data_make(403, LEN, H, D, 0);
    kvc_model *base = model_of(&data, 256, KVC_MODE_Q8);
    kvc_prefix_cache *cache;
    CHECK_OK(kvc_prefix_cache_create(SIZE_MAX, &cache));
    uint32_t tokens[LEN];
    size_t separate = 0;
    for (uint32_t c = 0; c < 4; c++) {
        /* Each conversation: the same 256 tokens, then 20 of its own. */
        kvc_model *conversation;
        CHECK_OK(kvc_model_clone(base, &conversation));
        for (size_t i = 0; i < LAYERS; i++) CHECK_OK(test_data_append(kvc_model_layer(conversation, i), &data, 256, 20));
        tokens_of(tokens, 276, 256, c + 1);
        CHECK_OK(kvc_prefix_cache_add(cache, tokens, 276, conversation, NULL));
        separate += entry_bytes(conversation);
        kvc_model_free(conversation);
    }
    const size_t bytes = kvc_prefix_cache_bytes(cache);
    CHECK(bytes < separate / 3);
    CHECK(bytes >= entry_bytes(base));
    kvc_model_free(base);
    kvc_prefix_cache_free(cache);
    test_data_free(&data);
}

TEST(the_budget_should_drop_the_least_recently_used_entries) {
    test_data data = test_data_make(404, LEN, H, D, 0);
    kvc_model *models[4];
    uint32_t tokens[4][LEN];
    size_t one = 0;
    for (uint32_t c = 0; c < 4; c++) {
        models[c] = model_of(&data, 100, KVC_MODE_F32);
        CHECK(models[c] != NULL);
        tokens_of(tokens[c], 100, 0, c + 1); /* nothing shared: each entry its own pages */
        one = kvc_model_memory_bytes(models[c]);
    }
    /* Distinct models: room for three entries. */
    kvc_prefix_cache *cache;
    CHECK_OK(kvc_prefix_cache_create(3 * one + one / 2, &cache));
    for (int c = 0; c < 3; c++) CHECK_OK(kvc_prefix_cache_add(cache, tokens[c], 100, models[c], NULL));
    CHECK(kvc_prefix_cache_size(cache) == 3);
    /* Using entry 0 makes entry 1 the least recently used. */
    size_t length;
    kvc_model *fork;
    CHECK_OK(kvc_prefix_cache_match(cache, tokens[0], 100, &length, &fork));
    CHECK(length == 100);
    kvc_model_free(fork);
    int kept = 0;
    CHECK_OK(kvc_prefix_cache_add(cache, tokens[3], 100, models[3], &kept));
    CHECK(kept && kvc_prefix_cache_size(cache) == 3);
    CHECK(kvc_prefix_cache_bytes(cache) <= 3 * one + one / 2);
    CHECK_OK(kvc_prefix_cache_match(cache, tokens[1], 100, &length, &fork));
    CHECK(length == 0 && fork == NULL);
    for (int c = 0; c < 4; c += (c == 0 ? 2 : 1)) {
        CHECK_OK(kvc_prefix_cache_match(cache, tokens[c], 100, &length, &fork));
        CHECK(length == 100);
        kvc_model_free(fork);
    }
    /* An entry larger than the budget is not kept. */
    kvc_prefix_cache *small;
    CHECK_OK(kvc_prefix_cache_create(one / 2, &small));
    CHECK_OK(kvc_prefix_cache_add(small, tokens[0], 100, models[0], &kept));
    CHECK(!kept && kvc_prefix_cache_size(small) == 0);
    kvc_prefix_cache_free(small);
    for (int c = 0; c < 4; c++) kvc_model_free(models[c]);
    kvc_prefix_cache_free(cache);
    test_data_free(&data);
}

TEST(adding_the_same_tokens_should_replace_the_entry_and_delete_should_drop_it) {
    test_data data = test_data_make(405, LEN, H, D, 0);
    kvc_prefix_cache *cache;
    CHECK_OK(kvc_prefix_cache_create(SIZE_MAX, &cache));
    uint32_t tokens[LEN];
    tokens_of(tokens, 150, 150, 1);
    kvc_model *first = model_of(&data, 150, KVC_MODE_Q8), *again = model_of(&data, 150, KVC_MODE_Q8);
    CHECK_OK(kvc_prefix_cache_add(cache, tokens, 150, first, NULL));
    CHECK_OK(kvc_prefix_cache_add(cache, tokens, 150, again, NULL));
    CHECK(kvc_prefix_cache_size(cache) == 1);
    int deleted = 0;
    CHECK_OK(kvc_prefix_cache_delete(cache, tokens, 149, &deleted));
    CHECK(!deleted && kvc_prefix_cache_size(cache) == 1);
    CHECK_OK(kvc_prefix_cache_delete(cache, tokens, 150, &deleted));
    CHECK(deleted && kvc_prefix_cache_size(cache) == 0 && kvc_prefix_cache_bytes(cache) == 0);
    CHECK_OK(kvc_prefix_cache_add(cache, tokens, 150, first, NULL));
    kvc_prefix_cache_clear(cache);
    CHECK(kvc_prefix_cache_size(cache) == 0);
    kvc_model_free(first);
    kvc_model_free(again);
    kvc_prefix_cache_free(cache);
    kvc_prefix_cache_free(NULL);
    test_data_free(&data);
}

/* A refused add: the status, and neither the entries nor the model changed. */
#define CHECK_ADD_REFUSED(cache, tokens, n, model, expected)                    \
    do {                                                                         \
        const size_t size_ = kvc_prefix_cache_size(cache);                       \
        const size_t bytes_ = kvc_prefix_cache_bytes(cache);                     \
        CHECK_MODEL_REFUSED(model, kvc_prefix_cache_add(cache, tokens, n, model, NULL), expected); \
        CHECK(kvc_prefix_cache_size(cache) == size_ && kvc_prefix_cache_bytes(cache) == bytes_); \
    } while (0)

TEST(add_should_refuse_what_an_entry_cannot_be_and_change_nothing) {
    test_data data = test_data_make(406, LEN, H, D, 1);
    kvc_prefix_cache *cache;
    CHECK_OK(kvc_prefix_cache_create(SIZE_MAX, &cache));
    uint32_t tokens[LEN];
    tokens_of(tokens, LEN, 100, 1);
    kvc_model *model = model_of(&data, 100, KVC_MODE_Q8);
    CHECK_OK(kvc_prefix_cache_add(cache, tokens, 100, model, NULL));
    CHECK_ADD_REFUSED(cache, tokens, 99, model, KVC_E_LENGTH);
    CHECK_ADD_REFUSED(cache, tokens, 0, model, KVC_E_LENGTH);
    CHECK_ADD_REFUSED(cache, NULL, 100, model, KVC_E_NULL_POINTER);
    kvc_model *other_mode = model_of(&data, 100, KVC_MODE_F32);
    CHECK_ADD_REFUSED(cache, tokens, 100, other_mode, KVC_E_PREFIX);
    kvc_model *evicted = model_of(&data, 100, KVC_MODE_Q8);
    CHECK_OK(kvc_model_evict(evicted, 80, 4, 8));
    CHECK_ADD_REFUSED(cache, tokens, 100, evicted, KVC_E_PREFIX);
    CHECK_OK(kvc_model_begin_verify(model));
    CHECK_ADD_REFUSED(cache, tokens, 100, model, KVC_E_VERIFYING);
    CHECK_OK(kvc_model_accept(model, 0));
    test_hybrid h = test_hybrid_make(407, 100);
    kvc_model *hybrid = test_hybrid_model(&h, 100);
    kvc_prefix_cache *empty;
    CHECK_OK(kvc_prefix_cache_create(SIZE_MAX, &empty));
    CHECK_ADD_REFUSED(empty, tokens, kvc_model_seq_len(hybrid), hybrid, KVC_E_KIND);
    CHECK_STATUS(kvc_prefix_cache_create(1, NULL), KVC_E_NULL_POINTER);
    size_t length;
    kvc_model *fork;
    CHECK_STATUS(kvc_prefix_cache_match(cache, tokens, 100, NULL, &fork), KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_prefix_cache_match(cache, NULL, 100, &length, &fork), KVC_E_NULL_POINTER);
    kvc_prefix_cache_free(empty);
    kvc_model_free(hybrid);
    test_hybrid_free(&h);
    kvc_model_free(other_mode);
    kvc_model_free(evicted);
    kvc_model_free(model);
    kvc_prefix_cache_free(cache);
    test_data_free(&data);
}

/* A model of a conv layer (4 channels) beside a full layer holding
 * positions [0, len) of `data`, the conv stepped on a token's inputs. */
static kvc_model *conv_model_of(const test_data *data, size_t len) {
    kvc_layer *layers[2] = {NULL, test_layer_with(data, len, KVC_MODE_F32)};
    if (!layers[1] || kvc_layer_create_conv(4, 3, &layers[0]) != KVC_OK) return NULL;
    const float taps[12] = {0.5f, -0.25f, 1.0f, 0.75f, 0.5f, -1.0f, 0.25f, 0.5f, 0.5f, 1.0f, -0.5f, 0.25f};
    for (size_t t = 0; t < len; t++) {
        const float x[4] = {(float)t, 1.0f, -(float)t / 8.0f, 0.5f};
        float y[4];
        if (kvc_layer_conv_n(layers[0], 1, x, taps, y) != KVC_OK) return NULL;
    }
    kvc_model *model = NULL;
    if (kvc_model_create(layers, 2, &model) != KVC_OK) return NULL;
    return model;
}

TEST(a_hybrid_entry_should_match_only_whole_where_a_conversation_returns) {
    test_data data = test_data_make(408, LEN, H, D, 1);
    kvc_prefix_cache *cache;
    CHECK_OK(kvc_prefix_cache_create(SIZE_MAX, &cache));
    uint32_t tokens[LEN];
    tokens_of(tokens, LEN, 120, 1);
    kvc_model *turn = conv_model_of(&data, 120);
    CHECK(turn != NULL);
    CHECK_OK(kvc_prefix_cache_add(cache, tokens, 120, turn, NULL));
    size_t length;
    kvc_model *fork;
    /* The conversation goes on: the whole entry, its state as it was. */
    CHECK_OK(kvc_prefix_cache_match(cache, tokens, 200, &length, &fork));
    CHECK(length == 120 && fork && kvc_model_seq_len(fork) == 120);
    /* The same bytes as the entry's model: rows and state. */
    const size_t size = kvc_model_snapshot_size(turn);
    uint8_t *want = test_alloc(size), *got = test_alloc(size);
    CHECK(kvc_model_snapshot_size(fork) == size);
    CHECK_OK(kvc_model_serialize(turn, want, size));
    CHECK_OK(kvc_model_serialize(fork, got, size));
    CHECK(memcmp(want, got, size) == 0);
    free(want), free(got);
    kvc_model_free(fork);
    /* Another conversation sharing 100 of its tokens: a state cannot go back to 100. */
    uint32_t other[LEN];
    tokens_of(other, LEN, 100, 2);
    for (size_t i = 0; i < 100; i++) other[i] = tokens[i];
    CHECK_OK(kvc_prefix_cache_match(cache, other, 200, &length, &fork));
    CHECK(length == 0 && fork == NULL);
    /* Entries of another shape, or of full layers only, are refused beside it. */
    kvc_model *full = model_of(&data, 120, KVC_MODE_F32);
    CHECK_ADD_REFUSED(cache, tokens, 120, full, KVC_E_PREFIX);
    kvc_model_free(full);
    kvc_model_free(turn);
    kvc_prefix_cache_free(cache);
    test_data_free(&data);
}

RUN_TESTS(CASE(match_should_give_a_fork_of_the_longest_common_prefix),
          CASE(match_below_the_sink_window_should_find_nothing),
          CASE(entries_of_a_shared_prefix_should_count_its_pages_once),
          CASE(the_budget_should_drop_the_least_recently_used_entries),
          CASE(adding_the_same_tokens_should_replace_the_entry_and_delete_should_drop_it),
          CASE(add_should_refuse_what_an_entry_cannot_be_and_change_nothing),
          CASE(a_hybrid_entry_should_match_only_whole_where_a_conversation_returns))
