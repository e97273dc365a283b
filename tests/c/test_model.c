/*
 * test_model.c -- a model's cache: creation (ownership, and what it refuses
 * with the layers left to the caller), what it reads off its layers
 * (seq_len, byte counts), the operations that reach every layer or none
 * (truncate_last, clear, clone, begin_verify / accept) and running out of
 * memory.  Allocations are counted through the failing-allocator hook of
 * test.c, so that "freed", "not freed twice" and "leaked" can be seen.
 */
#include <stdlib.h>
#include <string.h>

#include "test.h"

#define LAYERS 3

/* The data of a hybrid model: a q8 and an f32 full layer, then a vmf_phase
 * linear layer. */
typedef struct hybrid {
    test_data data;
    test_steps steps;
} hybrid;

static hybrid hybrid_make(uint64_t seed) {
    hybrid h = {test_data_make(seed, 100, 5, 8, 1), test_steps_make(seed, 100, 2, 6, 3, 1, 1)};
    return h;
}

static void hybrid_free(hybrid *h) {
    test_data_free(&h->data);
    test_steps_free(&h->steps);
}

/* The three layers at `len` positions each; 1 if every call worked. */
static int hybrid_layers(const hybrid *h, size_t len, kvc_layer **layers) {
    layers[0] = test_layer_with(&h->data, len, KVC_MODE_Q8);
    layers[1] = test_layer_with(&h->data, len, KVC_MODE_F32);
    layers[2] = test_linear_with(&h->steps, len, 0.5);
    return layers[0] && layers[1] && layers[2];
}

/* A model of the three layers at `len` positions; NULL if a call failed. */
static kvc_model *hybrid_model(const hybrid *h, size_t len) {
    kvc_layer *layers[LAYERS];
    kvc_model *model = NULL;
    if (hybrid_layers(h, len, layers) && kvc_model_create(layers, LAYERS, &model) == KVC_OK)
        return model;
    for (size_t i = 0; i < LAYERS; i++) kvc_layer_free(layers[i]);
    return NULL;
}

/* Appends the positions [first, first + count) of the script to every layer. */
static kvc_status hybrid_append(kvc_model *model, const hybrid *h, size_t first, size_t count) {
    kvc_status status = KVC_OK;
    for (size_t i = 0; i < 2 && status == KVC_OK; i++)
        status = test_data_append(kvc_model_layer(model, i), &h->data, first, count);
    if (status == KVC_OK)
        status = test_steps_take(kvc_model_layer(model, 2), &h->steps, first, count, NULL);
    return status;
}

/* A non-NULL pointer that create and clone must overwrite with NULL on error. */
static kvc_model *const sentinel = (kvc_model *)&test_modes;

/* 1 if create refuses `layers` with `expected`, sets *out NULL and leaves
 * every (non-NULL) layer as it was. */
static int create_refused(kvc_layer *const *layers, size_t n, kvc_status expected) {
    test_state **before = test_alloc((n + 1) * sizeof(test_state *));
    for (size_t i = 0; i < n; i++) before[i] = layers[i] ? test_state_take(layers[i]) : NULL;
    kvc_model *model = sentinel;
    const kvc_status status = kvc_model_create(layers, n, &model);
    int ok = status == expected && model == NULL;
    for (size_t i = 0; i < n && ok; i++)
        ok = !layers[i] || test_state_matches(layers[i], before[i]);
    if (!ok) printf("  create returned %s\n", kvc_status_name(status));
    for (size_t i = 0; i < n; i++) test_state_free(before[i]);
    free(before);
    return ok;
}

/* ---- create and ownership ---- */

TEST(create_should_take_ownership_so_layer_free_is_a_no_op) {
    hybrid h = hybrid_make(500);
    kvc_layer *layers[LAYERS];
    kvc_model *model;
    CHECK_OK(test_fault_install());
    CHECK(hybrid_layers(&h, 20, layers));
    CHECK_OK(kvc_model_create(layers, LAYERS, &model));
    const long live = test_fault_live();
    /* Freeing an owned layer frees nothing: the model still holds it. */
    for (size_t i = 0; i < LAYERS; i++) {
        kvc_layer_free(layers[i]);
        CHECK(test_fault_live() == live);
        CHECK(kvc_model_layer(model, i) == layers[i]);
    }
    CHECK_OK(hybrid_append(model, &h, 20, 30));
    CHECK(kvc_model_seq_len(model) == 50);
    /* The model frees its layers, each once. */
    kvc_model_free(model);
    CHECK(test_fault_remove() == 0);
    hybrid_free(&h);
}

TEST(create_should_refuse_null_arguments_and_null_entries) {
    hybrid h = hybrid_make(501);
    kvc_layer *layers[LAYERS], *with_null[LAYERS];
    kvc_model *model = sentinel;
    CHECK_OK(test_fault_install());
    CHECK(hybrid_layers(&h, 5, layers));
    CHECK_STATUS(kvc_model_create(NULL, 2, &model), KVC_E_NULL_POINTER);
    CHECK(model == NULL);
    CHECK_STATUS(kvc_model_create(layers, LAYERS, NULL), KVC_E_NULL_POINTER);
    memcpy(with_null, layers, sizeof layers);
    with_null[2] = NULL;
    CHECK(create_refused(with_null, LAYERS, KVC_E_NULL_POINTER));
    with_null[0] = NULL;
    with_null[2] = layers[2];
    CHECK(create_refused(with_null, LAYERS, KVC_E_NULL_POINTER));
    /* The caller still owns them: freeing them frees everything. */
    for (size_t i = 0; i < LAYERS; i++) kvc_layer_free(layers[i]);
    CHECK(test_fault_remove() == 0);
    hybrid_free(&h);
}

TEST(create_should_refuse_zero_layers) {
    kvc_layer *layer;
    CHECK_OK(kvc_layer_create(2, 8, KVC_MODE_F32, &layer));
    CHECK(create_refused(&layer, 0, KVC_E_LAYERS));
    kvc_layer_free(layer);
}

TEST(create_should_refuse_a_repeated_layer_and_leave_the_layers_to_the_caller) {
    hybrid h = hybrid_make(502);
    kvc_layer *layers[LAYERS];
    CHECK_OK(test_fault_install());
    CHECK(hybrid_layers(&h, 5, layers));
    kvc_layer *repeated[4] = {layers[0], layers[1], layers[2], layers[1]};
    CHECK(create_refused(repeated, 4, KVC_E_LAYERS));
    kvc_layer *twice[2] = {layers[2], layers[2]};
    CHECK(create_refused(twice, 2, KVC_E_LAYERS));
    for (size_t i = 0; i < LAYERS; i++) kvc_layer_free(layers[i]);
    CHECK(test_fault_remove() == 0);
    hybrid_free(&h);
}

TEST(create_should_refuse_a_layer_already_in_another_model) {
    hybrid h = hybrid_make(503);
    kvc_layer *layers[LAYERS], *own;
    kvc_model *first;
    CHECK_OK(test_fault_install());
    CHECK(hybrid_layers(&h, 5, layers));
    CHECK_OK(kvc_model_create(layers, 2, &first));
    own = test_layer_with(&h.data, 5, KVC_MODE_Q8V);
    CHECK(own != NULL);
    kvc_layer *second[3] = {own, layers[2], layers[1]};
    CHECK(create_refused(second, 3, KVC_E_LAYERS));
    /* The first model keeps its layer; the refused ones are the caller's. */
    CHECK(kvc_model_layer(first, 1) == layers[1] && kvc_model_num_layers(first) == 2);
    kvc_model_free(first);
    kvc_layer_free(own);
    kvc_layer_free(layers[2]);
    CHECK(test_fault_remove() == 0);
    hybrid_free(&h);
}

TEST(create_should_refuse_layers_at_different_position_counts) {
    hybrid h = hybrid_make(504);
    kvc_layer *layers[LAYERS], *longer, *linear_longer;
    kvc_model *model;
    CHECK_OK(test_fault_install());
    CHECK(hybrid_layers(&h, 7, layers));
    longer = test_layer_with(&h.data, 8, KVC_MODE_F32);
    linear_longer = test_linear_with(&h.steps, 8, 0.0);
    CHECK(longer != NULL && linear_longer != NULL);
    kvc_layer *full_full[2] = {layers[0], longer};
    CHECK(create_refused(full_full, 2, KVC_E_LAYERS));
    kvc_layer *full_linear[2] = {layers[1], linear_longer};
    CHECK(create_refused(full_linear, 2, KVC_E_LAYERS));
    kvc_layer *linear_full[3] = {layers[2], layers[0], longer};
    CHECK(create_refused(linear_full, 3, KVC_E_LAYERS));
    kvc_layer_free(longer);
    kvc_layer_free(linear_longer);
    /* Full seq_len and linear steps that agree make a model. */
    CHECK_OK(kvc_model_create(layers, LAYERS, &model));
    CHECK(kvc_model_seq_len(model) == 7);
    kvc_model_free(model);
    CHECK(test_fault_remove() == 0);
    hybrid_free(&h);
}

TEST(create_should_refuse_a_verifying_layer) {
    hybrid h = hybrid_make(505);
    kvc_layer *layers[LAYERS];
    CHECK_OK(test_fault_install());
    CHECK(hybrid_layers(&h, 5, layers));
    for (size_t i = 0; i < LAYERS; i++) {
        CHECK_OK(kvc_layer_begin_verify(layers[i]));
        CHECK(create_refused(layers, LAYERS, KVC_E_VERIFYING));
        CHECK_OK(kvc_layer_accept(layers[i], 0));
    }
    for (size_t i = 0; i < LAYERS; i++) kvc_layer_free(layers[i]);
    CHECK(test_fault_remove() == 0);
    hybrid_free(&h);
}

/* ---- reads ---- */

TEST(seq_len_should_be_the_least_position_count) {
    hybrid h = hybrid_make(506);
    kvc_model *model = hybrid_model(&h, 10);
    CHECK(model != NULL);
    CHECK(kvc_model_num_layers(model) == LAYERS && kvc_model_seq_len(model) == 10);
    /* Layers are filled one at a time: the model holds what all of them do. */
    CHECK_OK(test_data_append(kvc_model_layer(model, 0), &h.data, 10, 3));
    CHECK(kvc_model_seq_len(model) == 10);
    CHECK_OK(test_data_append(kvc_model_layer(model, 1), &h.data, 10, 2));
    CHECK(kvc_model_seq_len(model) == 10);
    CHECK_OK(test_steps_take(kvc_model_layer(model, 2), &h.steps, 10, 4, NULL));
    CHECK(kvc_model_seq_len(model) == 12);
    /* Tentative steps count as the linear layer's positions. */
    CHECK_OK(kvc_layer_begin_verify(kvc_model_layer(model, 1)));
    CHECK_OK(test_data_append(kvc_model_layer(model, 1), &h.data, 12, 2));
    CHECK(kvc_model_seq_len(model) == 13);
    kvc_model_free(model);
    hybrid_free(&h);
}

TEST(layer_should_return_each_layer_in_order_and_null_out_of_range) {
    hybrid h = hybrid_make(507);
    kvc_layer *layers[LAYERS];
    kvc_model *model;
    CHECK(hybrid_layers(&h, 4, layers));
    CHECK_OK(kvc_model_create(layers, LAYERS, &model));
    for (size_t i = 0; i < LAYERS; i++) CHECK(kvc_model_layer(model, i) == layers[i]);
    CHECK(kvc_model_layer(model, LAYERS) == NULL);
    CHECK(kvc_model_layer(model, (size_t)-1) == NULL);
    CHECK(kvc_layer_kind(kvc_model_layer(model, 2)) == KVC_KIND_LINEAR);
    kvc_model_free(model);
    hybrid_free(&h);
}

TEST(model_reads_should_give_zero_for_null_model) {
    CHECK(kvc_model_layer(NULL, 0) == NULL);
    CHECK(kvc_model_num_layers(NULL) == 0);
    CHECK(kvc_model_seq_len(NULL) == 0);
    CHECK(kvc_model_memory_bytes(NULL) == 0);
    CHECK(kvc_model_capacity_bytes(NULL) == 0);
    CHECK(kvc_model_verifying(NULL) == 0);
    CHECK_STATUS(kvc_model_truncate_last(NULL, 1), KVC_E_NULL_POINTER);
    kvc_model *copy = sentinel;
    CHECK_STATUS(kvc_model_clone(NULL, &copy), KVC_E_NULL_POINTER);
    CHECK(copy == NULL);
    kvc_model_clear(NULL);
    kvc_model_free(NULL);
}

/* Sum over the layers of kvc_layer_memory_bytes (capacity = 0) or
 * kvc_layer_capacity_bytes (capacity = 1). */
static size_t layer_sum(const kvc_model *model, int capacity) {
    size_t bytes = 0;
    for (size_t i = 0; i < kvc_model_num_layers(model); i++) {
        const kvc_layer *layer = kvc_model_layer(model, i);
        bytes += capacity ? kvc_layer_capacity_bytes(layer) : kvc_layer_memory_bytes(layer);
    }
    return bytes;
}

TEST(memory_and_capacity_bytes_should_sum_over_layers) {
    hybrid h = hybrid_make(508);
    kvc_model *model = hybrid_model(&h, 0);
    CHECK(model != NULL);
    /* An empty model holds the linear state only. */
    CHECK(kvc_model_memory_bytes(model) == 2 * 6 * 3 * 8);
    /* Capacity adds the model's own bookkeeping, a fixed amount. */
    const size_t bookkeeping = kvc_model_capacity_bytes(model) - layer_sum(model, 1);
    CHECK(kvc_model_capacity_bytes(model) > layer_sum(model, 1));
    for (size_t len = 0; len + 33 < 100; len += 33) {
        CHECK_OK(hybrid_append(model, &h, len, 33));
        CHECK(kvc_model_memory_bytes(model) == layer_sum(model, 0));
        CHECK(kvc_model_capacity_bytes(model) == layer_sum(model, 1) + bookkeeping);
        CHECK(kvc_model_capacity_bytes(model) >= kvc_model_memory_bytes(model));
    }
    /* Drafts count while a verify holds them. */
    CHECK_OK(kvc_model_begin_verify(model));
    CHECK_OK(hybrid_append(model, &h, 99, 1));
    CHECK(kvc_model_memory_bytes(model) == layer_sum(model, 0));
    kvc_model_free(model);
    hybrid_free(&h);
}

/* ---- every layer or none ---- */

TEST(truncate_last_with_a_linear_layer_should_return_kind_and_change_nothing) {
    hybrid h = hybrid_make(509);
    kvc_model *model = hybrid_model(&h, 80);
    CHECK(model != NULL);
    CHECK_MODEL_REFUSED(model, kvc_model_truncate_last(model, 20), KVC_E_KIND);
    kvc_model_free(model);
    hybrid_free(&h);
}

TEST(truncate_last_should_truncate_every_full_layer) {
    test_data data = test_data_make(510, 100, 5, 8, 1);
    kvc_layer *layers[TEST_MODE_COUNT];
    kvc_model *model;
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) layers[mi] = test_layer_with(&data, 100, test_modes[mi]);
    CHECK_OK(kvc_model_create(layers, TEST_MODE_COUNT, &model));
    static const size_t cuts[] = {30, 10, 1000};
    size_t now = 100;
    for (size_t c = 0; c < 3; c++) {
        CHECK_OK(kvc_model_truncate_last(model, cuts[c]));
        now = cuts[c] < now ? now - cuts[c] : 0;
        CHECK(kvc_model_seq_len(model) == now);
        for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
            kvc_layer *plain = test_layer_with(&data, now, test_modes[mi]);
            CHECK(plain != NULL && test_layers_equal(kvc_model_layer(model, mi), plain));
            kvc_layer_free(plain);
        }
    }
    kvc_model_free(model);
    test_data_free(&data);
}

TEST(clone_should_be_deep_and_independent) {
    hybrid h = hybrid_make(511);
    kvc_model *copy, *model = hybrid_model(&h, 40);
    CHECK(model != NULL);
    CHECK_OK(kvc_model_clone(model, &copy));
    CHECK(test_models_equal(copy, model));
    for (size_t i = 0; i < LAYERS; i++)
        CHECK(kvc_model_layer(copy, i) != kvc_model_layer(model, i));
    /* The clone goes on; the original stays. */
    test_state **original = test_model_state_take(model);
    CHECK_OK(hybrid_append(copy, &h, 40, 30));
    CHECK(test_model_state_matches(model, original));
    test_model_state_free(original);
    /* The original goes on; the clone stays. */
    test_state **cloned = test_model_state_take(copy);
    CHECK_OK(hybrid_append(model, &h, 40, 5));
    CHECK(test_model_state_matches(copy, cloned));
    test_model_state_free(cloned);
    /* The clone outlives the original and is the model of its 70 positions. */
    kvc_model_free(model);
    kvc_model *plain = hybrid_model(&h, 70);
    CHECK(plain != NULL && test_models_equal(copy, plain));
    kvc_model_free(plain);
    kvc_model_free(copy);
    hybrid_free(&h);
}

TEST(clone_should_copy_a_model_between_two_layers_of_a_step) {
    /* A runner that stored layer 0's position of a step and not yet the
     * others' forks there: the clone holds the same layers, misaligned as
     * they are (found by tests/fuzz/fuzz_ops.c: it returned KVC_E_LAYERS). */
    hybrid h = hybrid_make(519);
    kvc_model *copy = NULL, *model = hybrid_model(&h, 40);
    CHECK(model != NULL);
    CHECK_OK(test_data_append(kvc_model_layer(model, 0), &h.data, 40, 1));
    CHECK_OK(kvc_model_clone(model, &copy));
    CHECK(test_models_equal(copy, model));
    CHECK(kvc_model_seq_len(copy) == 40);
    kvc_model_free(copy);
    kvc_model_free(model);
    hybrid_free(&h);
}

TEST(clear_should_clear_every_layer) {
    hybrid h = hybrid_make(512);
    kvc_model *model = hybrid_model(&h, 90), *fresh = hybrid_model(&h, 0);
    CHECK(model != NULL && fresh != NULL);
    kvc_model_clear(model);
    CHECK(kvc_model_seq_len(model) == 0 && kvc_model_num_layers(model) == LAYERS);
    CHECK(test_models_equal(model, fresh));
    /* Refilled, it is a fresh model: the q8 field re-freezes from new rows. */
    CHECK_OK(hybrid_append(model, &h, 0, 80));
    CHECK_OK(hybrid_append(fresh, &h, 0, 80));
    CHECK(test_models_equal(model, fresh));
    kvc_model_free(model);
    kvc_model_free(fresh);
    hybrid_free(&h);
}

TEST(accept_should_return_accept_and_change_nothing_when_layers_hold_different_drafts) {
    hybrid h = hybrid_make(513);
    kvc_model *model = hybrid_model(&h, 60);
    CHECK(model != NULL);
    CHECK_OK(kvc_model_begin_verify(model));
    CHECK_OK(test_data_append(kvc_model_layer(model, 0), &h.data, 60, 3));
    CHECK_OK(test_data_append(kvc_model_layer(model, 1), &h.data, 60, 2));
    CHECK_OK(test_steps_take(kvc_model_layer(model, 2), &h.steps, 60, 2, NULL));
    CHECK_MODEL_REFUSED(model, kvc_model_accept(model, 1), KVC_E_ACCEPT);
    CHECK_MODEL_REFUSED(model, kvc_model_accept(model, 0), KVC_E_ACCEPT);
    /* Every layer at 3 drafts: accept goes through. */
    CHECK_OK(test_data_append(kvc_model_layer(model, 1), &h.data, 62, 1));
    CHECK_OK(test_steps_take(kvc_model_layer(model, 2), &h.steps, 62, 1, NULL));
    CHECK_OK(kvc_model_accept(model, 2));
    kvc_model *plain = hybrid_model(&h, 62);
    CHECK(plain != NULL && test_models_equal(model, plain));
    kvc_model_free(plain);
    kvc_model_free(model);
    hybrid_free(&h);
}

TEST(accept_should_return_not_verifying_and_change_nothing_when_a_layer_ended_its_verify) {
    hybrid h = hybrid_make(514);
    kvc_model *model = hybrid_model(&h, 60);
    CHECK(model != NULL);
    CHECK_OK(kvc_model_begin_verify(model));
    CHECK_OK(hybrid_append(model, &h, 60, 2));
    CHECK_OK(kvc_layer_accept(kvc_model_layer(model, 1), 2));
    CHECK_MODEL_REFUSED(model, kvc_model_accept(model, 1), KVC_E_NOT_VERIFYING);
    kvc_model_free(model);
    hybrid_free(&h);
}

/* ---- out of memory ---- */

typedef struct create_ctx {
    kvc_layer *const *layers;
    const kvc_model *source; /* clone it, or create from layers when NULL */
    kvc_model *out;
} create_ctx;

static kvc_status op_create_or_clone(void *ctx) {
    create_ctx *c = ctx;
    c->out = sentinel;
    const kvc_status status = c->source ? kvc_model_clone(c->source, &c->out)
                                        : kvc_model_create(c->layers, LAYERS, &c->out);
    return test_out_rule(status, c->out);
}

TEST(create_should_fail_cleanly_on_allocation_failure) {
    hybrid h = hybrid_make(515);
    kvc_layer *layers[LAYERS];
    CHECK_OK(test_fault_install());
    for (int persistent = 0; persistent < 2; persistent++) {
        CHECK(hybrid_layers(&h, 70, layers));
        test_state **before = test_alloc((LAYERS + 1) * sizeof(test_state *));
        for (size_t i = 0; i < LAYERS; i++) before[i] = test_state_take(layers[i]);
        /* Each failed run leaves the layers the caller's: the next run could
         * not take them otherwise (a layer already in a model is refused). */
        create_ctx c = {layers, NULL, NULL};
        CHECK(test_run_with_faults(op_create_or_clone, &c, NULL, persistent, TEST_KEEPS_NONE) >=
              1);
        CHECK(test_model_state_matches(c.out, before));
        test_model_state_free(before);
        kvc_model_free(c.out);
    }
    CHECK(test_fault_remove() == 0);
    hybrid_free(&h);
}

TEST(clone_should_fail_cleanly_on_allocation_failure) {
    hybrid h = hybrid_make(516);
    CHECK_OK(test_fault_install());
    kvc_model *model = hybrid_model(&h, 70);
    CHECK(model != NULL);
    for (int persistent = 0; persistent < 2; persistent++) {
        create_ctx c = {NULL, model, NULL};
        /* Every layer's clone allocates, and so does the model: several runs fail. */
        CHECK(test_run_with_faults(op_create_or_clone, &c, NULL, persistent, TEST_KEEPS_NONE) >=
              LAYERS + 1);
        CHECK(test_models_equal(c.out, model));
        kvc_model_free(c.out);
    }
    kvc_model_free(model);
    CHECK(test_fault_remove() == 0);
    hybrid_free(&h);
}

RUN_TESTS(CASE(create_should_take_ownership_so_layer_free_is_a_no_op),
          CASE(create_should_refuse_null_arguments_and_null_entries),
          CASE(create_should_refuse_zero_layers),
          CASE(create_should_refuse_a_repeated_layer_and_leave_the_layers_to_the_caller),
          CASE(create_should_refuse_a_layer_already_in_another_model),
          CASE(create_should_refuse_layers_at_different_position_counts),
          CASE(create_should_refuse_a_verifying_layer),
          CASE(seq_len_should_be_the_least_position_count),
          CASE(layer_should_return_each_layer_in_order_and_null_out_of_range),
          CASE(model_reads_should_give_zero_for_null_model),
          CASE(memory_and_capacity_bytes_should_sum_over_layers),
          CASE(truncate_last_with_a_linear_layer_should_return_kind_and_change_nothing),
          CASE(truncate_last_should_truncate_every_full_layer),
          CASE(clone_should_be_deep_and_independent),
          CASE(clone_should_copy_a_model_between_two_layers_of_a_step),
          CASE(clear_should_clear_every_layer),
          CASE(accept_should_return_accept_and_change_nothing_when_layers_hold_different_drafts),
          CASE(accept_should_return_not_verifying_and_change_nothing_when_a_layer_ended_its_verify),
          CASE(create_should_fail_cleanly_on_allocation_failure),
          CASE(clone_should_fail_cleanly_on_allocation_failure))
