/*
 * test_none.c -- the none layer kind (Nemotron-H's MLP-only blocks): a layer
 * that holds nothing and takes no positions.  Calls on rows or a state
 * refuse it; in a model beside layers of rows -- first in the list, too --
 * it costs no memory, never limits the model's positions or drafts, and
 * every model call (append, verify and accept, truncation, eviction, clear,
 * forks, snapshots) leaves it as it is while the other layers go on as a
 * model without it.
 */
#include <stdlib.h>
#include <string.h>

#include "test.h"

enum { H = 2, D = 16, LEN = 100 };
/* The model of these tests: none, a q8 full layer, none, an f32 full layer. */
enum { LAYERS = 4, ROWS = 2 };
static const int is_none[LAYERS] = {1, 0, 1, 0};

/* The layers of rows, alone (with_none 0) or among the none layers, holding
 * positions [0, len) of data. */
static kvc_model *model_with(const test_data *data, size_t len, int with_none) {
    kvc_layer *layers[LAYERS] = {0};
    size_t n = 0, rows = 0;
    kvc_status status = KVC_OK;
    for (size_t i = 0; i < LAYERS && status == KVC_OK; i++) {
        if (is_none[i] && !with_none) continue;
        status = is_none[i] ? kvc_layer_create_none(&layers[n])
                            : kvc_layer_create(H, D, rows++ ? KVC_MODE_F32 : KVC_MODE_Q8, &layers[n]);
        if (status == KVC_OK && !is_none[i] && len) status = test_data_append(layers[n], data, 0, len);
        if (layers[n]) n++;
    }
    kvc_model *model = NULL;
    if (status == KVC_OK) status = kvc_model_create(layers, n, &model);
    if (status != KVC_OK) {
        printf("  model_with: %s\n", kvc_status_name(status));
        for (size_t i = 0; i < n; i++) kvc_layer_free(layers[i]);
    }
    return model;
}

/* Appends positions [first, first + n) of data to the layers of rows. */
static kvc_status append_to_rows(kvc_model *model, const test_data *data, size_t first, size_t n) {
    kvc_status status = KVC_OK;
    for (size_t i = 0; i < kvc_model_num_layers(model) && status == KVC_OK; i++) {
        kvc_layer *layer = kvc_model_layer(model, i);
        if (kvc_layer_kind(layer) != KVC_KIND_NONE) status = test_data_append(layer, data, first, n);
    }
    return status;
}

/* 1 if the model's layers of rows equal the plain model's, in order, and
 * its none layers are still empty none layers. */
static int rows_as_plain(const kvc_model *model, const kvc_model *plain) {
    size_t p = 0;
    for (size_t i = 0; i < LAYERS; i++) {
        const kvc_layer *layer = kvc_model_layer(model, i);
        if (is_none[i]) {
            if (kvc_layer_kind(layer) != KVC_KIND_NONE || kvc_layer_memory_bytes(layer) != 0 || kvc_layer_verifying(layer))
                return 0;
        } else if (!test_layers_equal(layer, kvc_model_layer(plain, p++))) {
            return 0;
        }
    }
    return kvc_model_seq_len(model) == kvc_model_seq_len(plain) &&
           kvc_model_memory_bytes(model) == kvc_model_memory_bytes(plain);
}

TEST(create_none_should_make_a_layer_that_holds_nothing) {
    kvc_layer *none = NULL, *copy = NULL;
    CHECK_STATUS(kvc_layer_create_none(NULL), KVC_E_NULL_POINTER);
    CHECK_OK(kvc_layer_create_none(&none));
    CHECK(kvc_layer_kind(none) == KVC_KIND_NONE && kvc_layer_owner(none) == SIZE_MAX);
    test_check_holds_nothing(none, "kind=none");
    /* It forks, round-trips a snapshot of its kind alone, and clears. */
    CHECK_OK(kvc_layer_clone(none, &copy));
    CHECK(kvc_layer_kind(copy) == KVC_KIND_NONE && test_layers_equal(copy, none));
    CHECK(test_layer_round_trips(none));
    kvc_layer_clear(copy);
    CHECK(test_layers_equal(copy, none));
    kvc_layer_free(copy);
    kvc_layer_free(none);
}

TEST(calls_on_rows_and_states_should_refuse_a_none_layer_and_change_nothing) {
    test_data data = test_data_make(5, 4, H, D, 0);
    kvc_layer *layer = NULL;
    CHECK_OK(kvc_layer_create_none(&layer));
    float q[H * D] = {0}, out[H * D], probs[4];
    uint32_t positions[4];
    CHECK_REFUSED(layer, kvc_layer_append(layer, data.k, data.v, NULL), KVC_E_KIND);
    CHECK_REFUSED(layer, test_data_append(layer, &data, 0, 4), KVC_E_KIND);
    CHECK_REFUSED(layer, kvc_layer_truncate_last(layer, 0), KVC_E_KIND);
    CHECK_REFUSED(layer, kvc_layer_attend(layer, q, 0, out, probs), KVC_E_KIND);
    CHECK_REFUSED(layer, kvc_layer_head_keys(layer, 0, out, H * D), KVC_E_KIND);
    CHECK_REFUSED(layer, kvc_layer_positions(layer, positions, 4), KVC_E_KIND);
    CHECK_REFUSED(layer, kvc_layer_evict(layer, 4, 1, 1), KVC_E_KIND);
    CHECK_REFUSED(layer, kvc_layer_set_max_rows(layer, 8, 1, 1), KVC_E_KIND);
    CHECK_REFUSED(layer, kvc_layer_linear_step(layer, NULL, q, q, q, out), KVC_E_KIND);
    CHECK_REFUSED(layer, kvc_layer_conv_n(layer, 1, q, q, out), KVC_E_KIND);
    CHECK_REFUSED(layer, kvc_layer_mamba2_n(layer, 1, q, q, NULL, q, q, q, q, out), KVC_E_KIND);
    CHECK_REFUSED(layer, kvc_layer_recurrent_state(layer, out, H * D), KVC_E_KIND);
    /* No drafts of its own. */
    CHECK_OK(kvc_layer_begin_verify(layer));
    CHECK(kvc_layer_draft_len(layer) == 0);
    CHECK_REFUSED(layer, kvc_layer_accept(layer, 1), KVC_E_ACCEPT);
    CHECK_OK(kvc_layer_accept(layer, 0));
    CHECK(!kvc_layer_verifying(layer));
    kvc_layer_free(layer);
    test_data_free(&data);
}

TEST(a_model_with_none_layers_should_go_on_as_its_layers_of_rows) {
    test_data data = test_data_make(11, LEN, H, D, 1);
    kvc_model *model = model_with(&data, 0, 1), *plain = model_with(&data, 0, 0);
    CHECK(model && plain);
    CHECK(kvc_model_num_layers(model) == LAYERS && kvc_model_num_layers(plain) == ROWS);
    for (size_t at = 0; at < 60; at += 20) {
        CHECK_OK(append_to_rows(model, &data, at, 20));
        CHECK_OK(append_to_rows(plain, &data, at, 20));
        CHECK(kvc_model_seq_len(model) == at + 20 && rows_as_plain(model, plain));
    }
    /* A verify of 5 drafts, 3 kept: the drafts counted past the none layer first in the list. */
    CHECK_OK(kvc_model_begin_verify(model));
    CHECK_OK(kvc_model_begin_verify(plain));
    CHECK_OK(append_to_rows(model, &data, 60, 5));
    CHECK_OK(append_to_rows(plain, &data, 60, 5));
    CHECK(kvc_model_draft_len(model) == 5 && kvc_model_draft_len(plain) == 5);
    CHECK_MODEL_REFUSED(model, kvc_model_accept(model, 6), KVC_E_ACCEPT);
    CHECK_OK(kvc_model_accept(model, 3));
    CHECK_OK(kvc_model_accept(plain, 3));
    CHECK(kvc_model_draft_len(model) == 0 && kvc_model_seq_len(model) == 63 && rows_as_plain(model, plain));
    CHECK_OK(kvc_model_truncate_last(model, 4));
    CHECK_OK(kvc_model_truncate_last(plain, 4));
    CHECK(kvc_model_seq_len(model) == 59 && rows_as_plain(model, plain));
    CHECK_OK(kvc_model_evict(model, 40, 4, 20));
    CHECK_OK(kvc_model_evict(plain, 40, 4, 20));
    CHECK(rows_as_plain(model, plain));
    /* A fork goes on as the original. */
    kvc_model *fork = NULL, *plain_fork = NULL;
    CHECK_OK(kvc_model_clone(model, &fork));
    CHECK_OK(kvc_model_clone(plain, &plain_fork));
    CHECK_OK(append_to_rows(fork, &data, 59, 10));
    CHECK_OK(append_to_rows(plain_fork, &data, 59, 10));
    CHECK(rows_as_plain(fork, plain_fork) && rows_as_plain(model, plain));
    kvc_model_clear(fork);
    CHECK(kvc_model_seq_len(fork) == 0 && kvc_model_memory_bytes(fork) == 0);
    CHECK(kvc_layer_kind(kvc_model_layer(fork, 0)) == KVC_KIND_NONE);
    kvc_model_free(fork);
    kvc_model_free(plain_fork);
    kvc_model_free(model);
    kvc_model_free(plain);
    test_data_free(&data);
}

TEST(a_model_snapshot_should_carry_the_none_layers_and_re_serialize_byte_identical) {
    test_data data = test_data_make(15, LEN, H, D, 1);
    kvc_model *model = model_with(&data, LEN, 1), *restored = NULL;
    CHECK(model);
    size_t len, len2;
    uint8_t *bytes = test_model_snapshot(model, &len);
    CHECK(bytes);
    CHECK_OK(kvc_model_deserialize(bytes, len, &restored));
    CHECK(test_models_equal(restored, model));
    for (size_t i = 0; i < LAYERS; i++) CHECK((kvc_layer_kind(kvc_model_layer(restored, i)) == KVC_KIND_NONE) == is_none[i]);
    uint8_t *bytes2 = test_model_snapshot(restored, &len2);
    CHECK(bytes2 && len2 == len && memcmp(bytes, bytes2, len) == 0);
    free(bytes);
    free(bytes2);
    kvc_model_free(restored);
    kvc_model_free(model);
    test_data_free(&data);
}

TEST(a_model_of_none_layers_alone_should_hold_no_positions) {
    kvc_layer *layers[2] = {0};
    CHECK_OK(kvc_layer_create_none(&layers[0]));
    CHECK_OK(kvc_layer_create_none(&layers[1]));
    kvc_model *model = NULL;
    CHECK_OK(kvc_model_create(layers, 2, &model));
    CHECK(kvc_model_seq_len(model) == 0 && kvc_model_memory_bytes(model) == 0);
    CHECK_OK(kvc_model_begin_verify(model));
    CHECK(kvc_model_draft_len(model) == 0);
    CHECK_OK(kvc_model_accept(model, 0));
    CHECK_OK(kvc_model_truncate_last(model, 0));
    kvc_model_free(model);
}

RUN_TESTS(CASE(create_none_should_make_a_layer_that_holds_nothing),
          CASE(calls_on_rows_and_states_should_refuse_a_none_layer_and_change_nothing),
          CASE(a_model_with_none_layers_should_go_on_as_its_layers_of_rows),
          CASE(a_model_snapshot_should_carry_the_none_layers_and_re_serialize_byte_identical),
          CASE(a_model_of_none_layers_alone_should_hold_no_positions))
