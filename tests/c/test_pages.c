/*
 * test_pages.c -- pages and sharing: a fork (kvc_layer_clone) shares every
 * page and copies no row, behaves as a deep copy through anything done to
 * it or to the layer it came from, never changes another layer when it
 * writes, counts its bytes truthfully, and every page is freed with its last
 * holder.  A deep copy here is a fork whose every page was then copied: it
 * shares nothing.  (A restored snapshot shares nothing either, but keeps no
 * q4 rollback copies: its future truncations differ.)
 */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "test.h"

static kvc_memory_usage usage(void) {
    kvc_memory_usage u;
    kvc_memory_stats(&u);
    return u;
}

/* Importance a decoder could have summed. */
static kvc_status add_imp(kvc_layer *layer, float scale) {
    const size_t L = kvc_layer_seq_len(layer);
    float *probs = test_alloc((L ? L : 1) * sizeof(float));
    for (size_t s = 0; s < L; s++) probs[s] = scale * (float)((s * 7) % 11);
    const kvc_status status = kvc_layer_accumulate_imp(layer, probs, L);
    free(probs);
    return status;
}

/* A layer sharing nothing with `layer`, equal to it: a fork made to own
 * every page. */
static kvc_layer *deep_copy(const kvc_layer *layer) {
    kvc_layer *copy = NULL;
    if (kvc_layer_clone(layer, &copy) != KVC_OK) return NULL;
    kvc_paged *slots[3] = {&copy->imp, &copy->positions, &copy->alive};
    kvc_status status = KVC_OK;
    for (int i = 0; i < 3 && status == KVC_OK; i++) status = kvc_paged_make_writable(slots[i], 0, slots[i]->len);
    for (size_t h = 0; h < copy->num_kv_heads && status == KVC_OK; h++) {
        kvc_store *stores[2] = {&copy->heads[h].keys, &copy->heads[h].values};
        for (int c = 0; c < 2 && status == KVC_OK; c++) {
            kvc_paged *parts[4] = {&stores[c]->rows, &stores[c]->qrows, &stores[c]->recent, &stores[c]->field};
            for (int i = 0; i < 4 && status == KVC_OK; i++)
                status = kvc_paged_make_writable(parts[i], 0, parts[i]->len);
        }
    }
    if (status == KVC_OK && kvc_layer_shared_bytes(copy) == 0) return copy;
    kvc_layer_free(copy);
    return NULL;
}

/* The operations a fork may meet, each a write somewhere. */
enum { OP_APPEND, OP_APPEND_N, OP_TRUNCATE, OP_EVICT, OP_IMP, OP_WINDOW, OP_MAX_ROWS, OP_VERIFY,
       OP_CLEAR, OP_COUNT };

static kvc_status apply_op(kvc_layer *layer, int op, const test_data *data, size_t at) {
    kvc_status status;
    switch (op) {
    case OP_APPEND: return test_data_append(layer, data, at, 1);
    case OP_APPEND_N: return test_data_append(layer, data, at, 70);
    case OP_TRUNCATE: return kvc_layer_truncate_last(layer, 37);
    case OP_EVICT: return kvc_layer_evict(layer, 90, 4, 16);
    case OP_IMP: return add_imp(layer, 0.25f);
    case OP_WINDOW: return kvc_layer_slide_window(layer, 80, 3);
    case OP_MAX_ROWS:
        status = kvc_layer_set_max_rows(layer, 100, 4, 8);
        return status == KVC_OK ? test_data_append(layer, data, at, 5) : status;
    case OP_VERIFY:
        status = kvc_layer_begin_verify(layer);
        if (status == KVC_OK) status = test_data_append(layer, data, at, 4);
        return status == KVC_OK ? kvc_layer_accept(layer, 2) : status;
    default: kvc_layer_clear(layer); return KVC_OK;
    }
}

TEST(clone_should_share_every_page_and_copy_no_row) {
    const size_t H = 5, d = 12, len = 300;
    test_data data = test_data_make(301, len, H, d, 1);
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        kvc_layer *layer = test_layer_with(&data, len, test_modes[mi]), *fork;
        CHECK(layer != NULL);
        CHECK_OK(add_imp(layer, 0.5f));
        CHECK(kvc_layer_shared_bytes(layer) == 0);
        const kvc_memory_usage before = usage();
        CHECK_OK(kvc_layer_clone(layer, &fork));
        const kvc_memory_usage after = usage();
        CHECK(after.pages == before.pages);
        CHECK(after.cache_bytes == before.cache_bytes);
        CHECK(after.layers == before.layers + 1);
        CHECK(kvc_layer_memory_bytes(fork) == kvc_layer_memory_bytes(layer));
        CHECK(kvc_layer_shared_bytes(fork) == kvc_layer_memory_bytes(fork));
        CHECK(kvc_layer_shared_bytes(layer) == kvc_layer_memory_bytes(layer));
        CHECK(test_layers_equal(fork, layer));
        kvc_layer_free(layer);
        CHECK(kvc_layer_shared_bytes(fork) == 0);
        CHECK(usage().cache_bytes == kvc_layer_memory_bytes(fork));
        kvc_layer_free(fork);
    }
    CHECK(usage().pages == 0);
    test_data_free(&data);
}

TEST(a_write_to_a_fork_should_never_change_its_parent_or_siblings) {
    const size_t H = 4, d = 16, len = 150;
    test_data data = test_data_make(302, len + 80, H, d, 1);
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        kvc_layer *parent = test_layer_with(&data, len, test_modes[mi]);
        CHECK(parent != NULL);
        CHECK_OK(add_imp(parent, 0.5f));
        test_state *parent_state = test_state_take(parent);
        for (int op = 0; op < OP_COUNT; op++) {
            kvc_layer *fork, *sibling, *plain = deep_copy(parent);
            CHECK(plain != NULL);
            CHECK_OK(kvc_layer_clone(parent, &fork));
            CHECK_OK(kvc_layer_clone(parent, &sibling));
            CHECK_OK(apply_op(fork, op, &data, len));
            CHECK_OK(apply_op(plain, op, &data, len));
            CHECK(test_state_matches(parent, parent_state));
            CHECK(test_state_matches(sibling, parent_state));
            CHECK(test_layers_equal(fork, plain));
            /* And the other way: the parent writes, the fork stays. */
            test_state *fork_state = test_state_take(fork);
            CHECK_OK(apply_op(parent, op, &data, len));
            CHECK(test_state_matches(fork, fork_state));
            CHECK(test_state_matches(sibling, parent_state));
            test_state_free(fork_state);
            kvc_layer_free(parent);
            parent = sibling; /* equal to what the parent was */
            kvc_layer_free(fork);
            kvc_layer_free(plain);
        }
        test_state_free(parent_state);
        kvc_layer_free(parent);
    }
    CHECK(usage().pages == 0);
    test_data_free(&data);
}

TEST(forks_should_behave_as_deep_copies_through_any_sequence_of_writes) {
    /* A family of forks and their deep twins take the same random writes;
     * every fork stays equal to its twin, whatever its relatives do. */
    const size_t H = 3, d = 8, len = 700;
    test_data data = test_data_make(303, len, H, d, 1);
    test_rng rng = test_rng_new(303);
    enum { FAMILY = 5 };
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        kvc_layer *forks[FAMILY] = {0}, *twins[FAMILY] = {0};
        forks[0] = test_layer_with(&data, 130, test_modes[mi]);
        twins[0] = deep_copy(forks[0]);
        CHECK(forks[0] && twins[0]);
        for (int step = 0; step < 120; step++) {
            const size_t i = test_rng_u32(&rng) % FAMILY;
            if (!forks[i]) {
                /* A new fork of a living relative, or nothing. */
                const size_t from = test_rng_u32(&rng) % FAMILY;
                if (!forks[from]) continue;
                CHECK_OK(kvc_layer_clone(forks[from], &forks[i]));
                twins[i] = deep_copy(forks[from]);
                CHECK(twins[i] != NULL);
                continue;
            }
            const int op = (int)(test_rng_u32(&rng) % (OP_COUNT + 1));
            if (op == OP_COUNT) { /* its last holder gone: relatives keep their pages */
                kvc_layer_free(forks[i]);
                kvc_layer_free(twins[i]);
                forks[i] = twins[i] = NULL;
                continue;
            }
            const size_t at = kvc_layer_next_position(forks[i]);
            if (at + 80 > len) continue;
            const kvc_status status = apply_op(forks[i], op, &data, at);
            CHECK_STATUS(apply_op(twins[i], op, &data, at), status);
            for (size_t f = 0; f < FAMILY; f++) {
                if (forks[f]) CHECK(test_layers_equal(forks[f], twins[f]));
            }
        }
        for (size_t f = 0; f < FAMILY; f++) {
            kvc_layer_free(forks[f]);
            kvc_layer_free(twins[f]);
        }
        CHECK(usage().pages == 0);
    }
    test_data_free(&data);
}

TEST(a_snapshot_of_a_fork_should_be_the_bytes_of_its_parent) {
    const size_t H = 2, d = 32, len = 200;
    test_data data = test_data_make(304, len, H, d, 1);
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        kvc_layer *layer = test_layer_with(&data, len, test_modes[mi]), *fork;
        CHECK(layer != NULL);
        CHECK_OK(kvc_layer_clone(layer, &fork));
        const size_t n = kvc_layer_snapshot_size(layer);
        CHECK(kvc_layer_snapshot_size(fork) == n);
        uint8_t *a = test_alloc(n), *b = test_alloc(n);
        CHECK_OK(kvc_layer_serialize(layer, a, n));
        CHECK_OK(kvc_layer_serialize(fork, b, n));
        CHECK(memcmp(a, b, n) == 0);
        free(a);
        free(b);
        kvc_layer_free(layer);
        kvc_layer_free(fork);
    }
    test_data_free(&data);
}

TEST(memory_stats_should_count_a_shared_page_once) {
    const size_t H = 4, d = 16, len = 200;
    test_data data = test_data_make(305, len + 1, H, d, 0);
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        const kvc_memory_usage empty = usage();
        kvc_layer *parent = test_layer_with(&data, len, test_modes[mi]), *forks[8];
        CHECK(parent != NULL);
        const size_t one = kvc_layer_memory_bytes(parent);
        CHECK(usage().cache_bytes == empty.cache_bytes + one);
        for (size_t f = 0; f < 8; f++) CHECK_OK(kvc_layer_clone(parent, &forks[f]));
        CHECK(usage().cache_bytes == empty.cache_bytes + one);
        /* A fork that appends copies its last, partly filled pages: then it
         * holds the copies alone, and the parent's are counted once. */
        CHECK_OK(test_data_append(forks[3], &data, len, 1));
        const size_t own = kvc_layer_memory_bytes(forks[3]) - kvc_layer_shared_bytes(forks[3]);
        CHECK(own > 0 && own < one);
        CHECK(usage().cache_bytes == empty.cache_bytes + one + own);
        for (size_t f = 0; f < 8; f++) kvc_layer_free(forks[f]);
        CHECK(usage().cache_bytes == empty.cache_bytes + one);
        kvc_layer_free(parent);
        CHECK(usage().cache_bytes == empty.cache_bytes);
    }
    test_data_free(&data);
}

TEST(a_model_clone_should_share_every_layer_and_evolve_apart) {
    const size_t len = 150;
    test_hybrid h = test_hybrid_make(306, len + 20);
    kvc_model *model = test_hybrid_model(&h, len), *fork;
    CHECK(model != NULL);
    CHECK_OK(kvc_model_clone(model, &fork));
    /* The linear layer's state is copied: it is small and changes every step. */
    size_t linear_bytes = 0;
    for (size_t i = 0; i < kvc_model_num_layers(model); i++) {
        if (kvc_layer_kind(kvc_model_layer(model, i)) == KVC_KIND_LINEAR)
            linear_bytes += kvc_layer_memory_bytes(kvc_model_layer(model, i));
    }
    CHECK(kvc_model_shared_bytes(fork) == kvc_model_memory_bytes(fork) - linear_bytes);
    test_state **before = test_model_state_take(model);
    CHECK_OK(test_hybrid_append(fork, &h, len, 20));
    CHECK(test_model_state_matches(model, before));
    kvc_model *plain = test_hybrid_model(&h, len + 20);
    CHECK(plain != NULL && test_models_equal(fork, plain));
    test_model_state_free(before);
    kvc_model_free(model);
    kvc_model_free(fork);
    kvc_model_free(plain);
    CHECK(usage().pages == 0);
    test_hybrid_free(&h);
}

TEST(memory_stats_should_accept_null) {
    kvc_memory_stats(NULL); /* and does nothing */
    CHECK(usage().pages == 0);
}

RUN_TESTS(CASE(clone_should_share_every_page_and_copy_no_row),
          CASE(a_write_to_a_fork_should_never_change_its_parent_or_siblings),
          CASE(forks_should_behave_as_deep_copies_through_any_sequence_of_writes),
          CASE(a_snapshot_of_a_fork_should_be_the_bytes_of_its_parent),
          CASE(memory_stats_should_count_a_shared_page_once),
          CASE(a_model_clone_should_share_every_layer_and_evolve_apart),
          CASE(memory_stats_should_accept_null))
