/*
 * test_layer.c -- a layer's life through its public face: creation and its
 * argument errors, appends (masks, append_n, refused input), positions and
 * importance, truncation, byte counts, clone, clear, status names and the
 * description.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

#define W KVC_Q8_WINDOW

static const char *const mode_names[TEST_MODE_COUNT] = {"f32", "q8", "q8k", "q8v", "q4",
                                                        "q4k", "q4v", "q8k+q4v", "q4k+q8v"};

/* A non-NULL pointer that create must overwrite with NULL on error. */
static kvc_layer *const sentinel = (kvc_layer *)&test_modes;

/* ---- create ---- */

TEST(create_should_refuse_zero_and_too_many_heads) {
    kvc_layer *layer = sentinel;
    CHECK_STATUS(kvc_layer_create(0, 16, KVC_MODE_F32, &layer), KVC_E_NUM_KV_HEADS);
    CHECK(layer == NULL);
    layer = sentinel;
    CHECK_STATUS(kvc_layer_create(KVC_MAX_KV_HEADS + 1, 16, KVC_MODE_Q8, &layer),
                 KVC_E_NUM_KV_HEADS);
    CHECK(layer == NULL);
    CHECK_STATUS(kvc_layer_create((size_t)-1, 16, KVC_MODE_Q8, &layer), KVC_E_NUM_KV_HEADS);
}

TEST(create_should_refuse_zero_and_too_large_head_dim) {
    kvc_layer *layer = sentinel;
    CHECK_STATUS(kvc_layer_create(2, 0, KVC_MODE_F32, &layer), KVC_E_HEAD_DIM);
    CHECK(layer == NULL);
    layer = sentinel;
    CHECK_STATUS(kvc_layer_create(2, KVC_MAX_HEAD_DIM + 1, KVC_MODE_Q8, &layer), KVC_E_HEAD_DIM);
    CHECK(layer == NULL);
}

TEST(create_should_refuse_unknown_mode) {
    kvc_layer *layer = sentinel;
    CHECK_STATUS(kvc_layer_create(2, 16, (kvc_mode)KVC_MODE_COUNT, &layer), KVC_E_MODE);
    CHECK(layer == NULL);
    layer = sentinel;
    CHECK_STATUS(kvc_layer_create(2, 16, (kvc_mode)-1, &layer), KVC_E_MODE);
    CHECK(layer == NULL);
}

TEST(create_should_refuse_null_out) {
    CHECK_STATUS(kvc_layer_create(2, 16, KVC_MODE_F32, NULL), KVC_E_NULL_POINTER);
}

TEST(create_should_accept_the_largest_geometry_and_report_it) {
    kvc_layer *layer;
    CHECK_OK(kvc_layer_create(KVC_MAX_KV_HEADS, KVC_MAX_HEAD_DIM, KVC_MODE_Q8V, &layer));
    CHECK(kvc_layer_num_kv_heads(layer) == KVC_MAX_KV_HEADS);
    CHECK(kvc_layer_head_dim(layer) == KVC_MAX_HEAD_DIM);
    CHECK(kvc_layer_mode(layer) == KVC_MODE_Q8V);
    CHECK(kvc_layer_seq_len(layer) == 0);
    CHECK(kvc_layer_memory_bytes(layer) == 0);
    kvc_layer_free(layer);
    kvc_layer_free(NULL);
}

/* ---- append ---- */

TEST(append_n_should_equal_single_appends) {
    static const size_t chunks[] = {10, 50, 1, 30, 40, 19}; /* 60 -> 61, 61 -> 91 cross W */
    const size_t H = 5, d = 24, len = 150;
    test_data data = test_data_make(71, len, H, d, 1);
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        kvc_layer *single = test_layer_with(&data, 0, test_modes[mi]);
        kvc_layer *batched = test_layer_with(&data, 0, test_modes[mi]);
        CHECK(single != NULL && batched != NULL);
        for (size_t p = 0; p < len; p++) CHECK_OK(test_data_append(single, &data, p, 1));
        size_t at = 0;
        for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
            CHECK_OK(test_data_append(batched, &data, at, chunks[c]));
            at += chunks[c];
        }
        CHECK(at == len);
        CHECK(test_layers_equal(batched, single));
        kvc_layer_free(single);
        kvc_layer_free(batched);
    }
    test_data_free(&data);
}

TEST(append_n_of_zero_positions_should_change_nothing) {
    test_data data = test_data_make(72, 10, 2, 8, 0);
    kvc_layer *layer = test_layer_with(&data, 10, KVC_MODE_Q8);
    CHECK(layer != NULL);
    test_state *before = test_state_take(layer);
    CHECK_OK(kvc_layer_append_n(layer, 0, data.k, data.v, NULL));
    CHECK(test_state_matches(layer, before));
    test_state_free(before);
    kvc_layer_free(layer);
    test_data_free(&data);
}

TEST(head_positions_should_follow_alive_masks) {
    const size_t H = 6, d = 8, len = 130;
    test_data data = test_data_make(73, len, H, d, 1);
    uint32_t want[130], got[130];
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        kvc_layer *layer = test_layer_with(&data, 0, test_modes[mi]);
        CHECK(layer != NULL);
        for (size_t p = 0; p < len; p++) {
            CHECK_OK(test_data_append(layer, &data, p, 1));
            CHECK(kvc_layer_seq_len(layer) == p + 1);
            for (size_t h = 0; h < H; h++) {
                const size_t n = test_data_head(&data, p + 1, h, 0, NULL, want);
                CHECK(kvc_layer_head_len(layer, h) == n);
                CHECK_OK(kvc_layer_head_positions(layer, h, got, 130));
                CHECK(memcmp(got, want, n * sizeof(uint32_t)) == 0);
            }
        }
        /* The scripted masks give: head 0 everything, head 3 nothing. */
        CHECK(kvc_layer_head_len(layer, 0) == len);
        CHECK(kvc_layer_head_len(layer, 3) == 0);
        kvc_layer_free(layer);
    }
    test_data_free(&data);
}

/* Keys whose score grows with the position: head h's row at position p has
 * channel 0 = 0.02 p and zeros elsewhere, so with q = (sqrt d, 0, ...) the
 * score is 0.02 p and log(probs[i+1] / probs[i]) = 0.02 (pos[i+1] - pos[i]). */
static void fill_position_keys(test_data *data) {
    for (size_t p = 0; p < data->n; p++) {
        for (size_t h = 0; h < data->H; h++) {
            float *k = data->k + (p * data->H + h) * data->d;
            memset(k, 0, data->d * sizeof(float));
            k[0] = 0.02f * (float)p;
        }
    }
}

TEST(attend_probs_should_line_up_with_head_positions) {
    const size_t H = 4, d = 8, len = 120;
    test_data data = test_data_make(74, len, H, d, 1);
    fill_position_keys(&data);
    float q[8] = {0}, out[8], probs[120];
    uint32_t positions[120];
    q[0] = sqrtf((float)d);
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        kvc_layer *layer = test_layer_with(&data, len, test_modes[mi]);
        CHECK(layer != NULL);
        for (size_t h = 0; h < H; h++) {
            const size_t n = kvc_layer_head_len(layer, h);
            CHECK_OK(kvc_layer_head_positions(layer, h, positions, len));
            CHECK_OK(kvc_layer_attend(layer, q, h, out, probs));
            for (size_t i = 0; i + 1 < n; i++) {
                const double gap = (double)positions[i + 1] - (double)positions[i];
                const double slope = log((double)probs[i + 1] / (double)probs[i]) / gap;
                CHECK(fabs(slope - 0.02) <= 1e-3);
            }
        }
        kvc_layer_free(layer);
    }
    test_data_free(&data);
}

/* ---- importance ---- */

TEST(accumulate_imp_head_should_add_at_the_head_positions) {
    const size_t H = 4, d = 16, len = 100;
    test_data data = test_data_make(75, len, H, d, 1);
    test_rng rng = test_rng_new(75);
    float q[16], out[16], probs0[100], probs1[100], imp[100];
    uint32_t pos0[100], pos1[100];
    kvc_layer *layer = test_layer_with(&data, len, KVC_MODE_Q8);
    CHECK(layer != NULL);
    test_fill_normal(&rng, q, d);
    const size_t n0 = kvc_layer_head_len(layer, 2), n1 = kvc_layer_head_len(layer, 1);
    CHECK_OK(kvc_layer_head_positions(layer, 2, pos0, len));
    CHECK_OK(kvc_layer_head_positions(layer, 1, pos1, len));
    CHECK_OK(kvc_layer_attend(layer, q, 2, out, probs0));
    CHECK_OK(kvc_layer_attend(layer, q, 1, out, probs1));
    CHECK_OK(kvc_layer_accumulate_imp_head(layer, 2, probs0, n0));
    CHECK_OK(kvc_layer_imp(layer, imp, len));
    float want[100] = {0};
    for (size_t i = 0; i < n0; i++) want[pos0[i]] += probs0[i];
    CHECK(test_bits_equal(imp, want, len));
    CHECK_OK(kvc_layer_accumulate_imp_head(layer, 1, probs1, n1));
    CHECK_OK(kvc_layer_imp(layer, imp, len));
    for (size_t i = 0; i < n1; i++) want[pos1[i]] += probs1[i];
    CHECK(test_bits_equal(imp, want, len));
    /* A head with no rows adds nothing. */
    CHECK_OK(kvc_layer_accumulate_imp_head(layer, 3, NULL, 0));
    CHECK_OK(kvc_layer_imp(layer, imp, len));
    CHECK(test_bits_equal(imp, want, len));
    kvc_layer_free(layer);
    test_data_free(&data);
}

TEST(accumulate_imp_should_add_per_position_and_start_new_slots_at_zero) {
    test_data data = test_data_make(76, 40, 2, 8, 1);
    test_rng rng = test_rng_new(76);
    float a[40], b[40], imp[40], want[40];
    kvc_layer *layer = test_layer_with(&data, 30, KVC_MODE_F32);
    CHECK(layer != NULL);
    for (size_t p = 0; p < 30; p++) {
        a[p] = test_rng_unit(&rng);
        b[p] = test_rng_unit(&rng);
        want[p] = a[p] + b[p];
    }
    CHECK_OK(kvc_layer_accumulate_imp(layer, a, 30));
    CHECK_OK(kvc_layer_accumulate_imp(layer, b, 30));
    CHECK_OK(kvc_layer_imp(layer, imp, 40));
    CHECK(test_bits_equal(imp, want, 30));
    /* Truncate and re-append: the slots come back at 0, not at old values. */
    CHECK_OK(kvc_layer_truncate_last(layer, 10));
    CHECK_OK(test_data_append(layer, &data, 20, 20));
    CHECK_OK(kvc_layer_imp(layer, imp, 40));
    CHECK(test_bits_equal(imp, want, 20));
    for (size_t p = 20; p < 40; p++) CHECK(imp[p] == 0.0f);
    kvc_layer_free(layer);
    test_data_free(&data);
}

TEST(accumulate_imp_should_refuse_length_other_than_seq_len) {
    test_data data = test_data_make(77, 20, 3, 8, 1);
    float probs[21] = {0};
    kvc_layer *layer = test_layer_with(&data, 20, KVC_MODE_Q8K);
    CHECK(layer != NULL);
    CHECK_STATUS(kvc_layer_accumulate_imp(layer, probs, 19), KVC_E_LENGTH);
    CHECK_STATUS(kvc_layer_accumulate_imp(layer, probs, 21), KVC_E_LENGTH);
    CHECK_STATUS(kvc_layer_accumulate_imp(layer, probs, 0), KVC_E_LENGTH);
    const size_t n1 = kvc_layer_head_len(layer, 1);
    CHECK(n1 < 20);
    CHECK_STATUS(kvc_layer_accumulate_imp_head(layer, 1, probs, n1 + 1), KVC_E_LENGTH);
    CHECK_STATUS(kvc_layer_accumulate_imp_head(layer, 1, probs, 20), KVC_E_LENGTH);
    CHECK_STATUS(kvc_layer_accumulate_imp_head(layer, 3, probs, 1), KVC_E_KV_HEAD);
    CHECK_STATUS(kvc_layer_accumulate_imp(NULL, probs, 20), KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_layer_accumulate_imp(layer, NULL, 20), KVC_E_NULL_POINTER);
    kvc_layer_free(layer);
    test_data_free(&data);
}

TEST(accumulate_imp_should_refuse_bad_probs_and_keep_imp) {
    const float bad[4] = {-1e-6f, NAN, INFINITY, -INFINITY};
    test_data data = test_data_make(78, 20, 2, 8, 0);
    float probs[20], before[20], after[20];
    kvc_layer *layer = test_layer_with(&data, 20, KVC_MODE_Q8);
    CHECK(layer != NULL);
    for (size_t p = 0; p < 20; p++) probs[p] = 0.05f;
    CHECK_OK(kvc_layer_accumulate_imp(layer, probs, 20));
    CHECK_OK(kvc_layer_imp(layer, before, 20));
    for (int b = 0; b < 4; b++) {
        for (size_t at = 0; at < 20; at += 19) { /* first and last slot */
            probs[at] = bad[b];
            CHECK_STATUS(kvc_layer_accumulate_imp(layer, probs, 20), KVC_E_PROBS);
            CHECK_STATUS(kvc_layer_accumulate_imp_head(layer, 0, probs, 20), KVC_E_PROBS);
            probs[at] = 0.05f;
            CHECK_OK(kvc_layer_imp(layer, after, 20));
            CHECK(test_bits_equal(after, before, 20));
        }
    }
    kvc_layer_free(layer);
    test_data_free(&data);
}

TEST(imp_should_refuse_short_buffer) {
    test_data data = test_data_make(79, 5, 1, 4, 0);
    float imp[5];
    kvc_layer *layer;
    CHECK_OK(kvc_layer_create(1, 4, KVC_MODE_F32, &layer));
    CHECK_OK(kvc_layer_imp(layer, NULL, 0));
    CHECK_OK(test_data_append(layer, &data, 0, 5));
    CHECK_STATUS(kvc_layer_imp(layer, imp, 4), KVC_E_LENGTH);
    CHECK_STATUS(kvc_layer_imp(layer, NULL, 5), KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_layer_imp(NULL, imp, 5), KVC_E_NULL_POINTER);
    CHECK_OK(kvc_layer_imp(layer, imp, 5));
    kvc_layer_free(layer);
    test_data_free(&data);
}

/* ---- truncate ---- */

/* 1 if every head of `layer` holds the first rows of `full` (a state taken
 * at data's full length) that data's first len positions give. */
static int holds_prefix(const kvc_layer *layer, const test_state *full, const test_data *data,
                        size_t len, kvc_mode mode) {
    test_state *now = test_state_take(layer);
    const size_t d = data->d;
    int ok = now->seq_len == len && now->memory_bytes == test_expected_memory(data, len, mode) &&
             now->field_frozen == (mode != KVC_MODE_F32 && len > W);
    /* A q4 window that comes back holds its rows' f32 copies: the rows of
     * a layer that never held more, not the 4-bit rows the full one read. */
    if (test_mode_has_q4(mode)) {
        kvc_layer *fresh = test_layer_with(data, len, mode);
        ok = ok && fresh && test_layers_equal(layer, fresh);
        kvc_layer_free(fresh);
    }
    for (size_t h = 0; h < data->H && ok; h++) {
        const size_t n = test_data_rows(data, h, 0, len);
        const int rows_kept = !test_mode_has_q4(mode);
        ok = now->head_len[h] == n &&
             (!rows_kept || memcmp(now->keys[h], full->keys[h], n * d * sizeof(float)) == 0) &&
             (!rows_kept || memcmp(now->values[h], full->values[h], n * d * sizeof(float)) == 0) &&
             memcmp(now->positions[h], full->positions[h], n * sizeof(uint32_t)) == 0;
        if (!ok) printf("  head %zu differs at len %zu\n", h, len);
    }
    test_state_free(now);
    return ok;
}

TEST(truncate_should_drop_exactly_each_store_own_rows) {
    /* 150 -> 130 -> 100 -> 66 -> 64 -> 63 -> 40 -> 0, and 150 -> 30 at once. */
    static const size_t cuts[] = {20, 30, 34, 2, 1, 23, 40};
    const size_t H = 5, d = 12, len = 150;
    test_data data = test_data_make(80, len, H, d, 1);
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        kvc_layer *layer = test_layer_with(&data, len, test_modes[mi]);
        CHECK(layer != NULL);
        test_state *full = test_state_take(layer);
        size_t now = len;
        for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
            CHECK_OK(kvc_layer_truncate_last(layer, cuts[c]));
            now -= cuts[c];
            CHECK(holds_prefix(layer, full, &data, now, test_modes[mi]));
        }
        CHECK_OK(test_data_append(layer, &data, 0, len));
        CHECK_OK(kvc_layer_truncate_last(layer, 120));
        CHECK(holds_prefix(layer, full, &data, 30, test_modes[mi]));
        test_state_free(full);
        kvc_layer_free(layer);
    }
    test_data_free(&data);
}

TEST(truncate_should_drop_everything_when_n_exceeds_seq_len) {
    test_data data = test_data_make(81, 90, 3, 8, 1);
    static const size_t too_many[] = {91, 1000, (size_t)-1};
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        kvc_layer *layer = test_layer_with(&data, 0, test_modes[mi]);
        CHECK(layer != NULL);
        CHECK_OK(kvc_layer_truncate_last(layer, 5)); /* empty: nothing to drop */
        for (int i = 0; i < 3; i++) {
            CHECK_OK(test_data_append(layer, &data, 0, 90));
            CHECK_OK(kvc_layer_truncate_last(layer, too_many[i]));
            CHECK(kvc_layer_seq_len(layer) == 0);
            CHECK(kvc_layer_memory_bytes(layer) == 0);
            CHECK(kvc_layer_field_frozen(layer) == 0);
            for (size_t h = 0; h < 3; h++) CHECK(kvc_layer_head_len(layer, h) == 0);
        }
        kvc_layer_free(layer);
    }
    CHECK_STATUS(kvc_layer_truncate_last(NULL, 1), KVC_E_NULL_POINTER);
    test_data_free(&data);
}

/* ---- byte counts ---- */

TEST(memory_bytes_should_follow_the_formula_in_every_mode) {
    /* 11 heads: the alive map takes two bytes a position. */
    static const size_t cuts[] = {7, 50, 30, 1, 62};
    const size_t H = 11, d = 8, len = 150;
    test_data data = test_data_make(82, len, H, d, 1);
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        const kvc_mode mode = test_modes[mi];
        kvc_layer *layer;
        CHECK_OK(kvc_layer_create(H, d, mode, &layer));
        CHECK(kvc_layer_memory_bytes(layer) == 0);
        for (size_t p = 0; p < len; p++) {
            CHECK_OK(test_data_append(layer, &data, p, 1));
            CHECK(kvc_layer_memory_bytes(layer) == test_expected_memory(&data, p + 1, mode));
        }
        size_t now = len;
        for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
            CHECK_OK(kvc_layer_truncate_last(layer, cuts[c]));
            now -= cuts[c];
            CHECK(kvc_layer_memory_bytes(layer) == test_expected_memory(&data, now, mode));
        }
        kvc_layer_free(layer);
    }
    test_data_free(&data);
}

TEST(bytes_for_should_be_what_a_layer_of_live_heads_holds_at_each_length) {
    const size_t H = 3, d = 12, len = 220;
    test_data data = test_data_make(84, len, H, d, 0);
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        kvc_layer *layer;
        CHECK_OK(kvc_layer_create(H, d, test_modes[mi], &layer));
        CHECK(kvc_layer_bytes_for(H, d, test_modes[mi], 0) == 0);
        for (size_t p = 0; p < len; p++) {
            CHECK_OK(test_data_append(layer, &data, p, 1));
            CHECK(kvc_layer_bytes_for(H, d, test_modes[mi], p + 1) == kvc_layer_memory_bytes(layer));
        }
        kvc_layer_free(layer);
    }
    CHECK(kvc_layer_bytes_for(0, d, KVC_MODE_Q8, 10) == 0 && kvc_layer_bytes_for(H, 0, KVC_MODE_Q8, 10) == 0);
    CHECK(kvc_layer_bytes_for(H, d, (kvc_mode)KVC_MODE_COUNT, 10) == 0);
    test_data_free(&data);
}

/* 8 heads of 128 channels hold 8 KiB of f32 rows a position (2 KiB in q8):
 * 2^19 positions pass 4 GiB, what a 32-bit size_t (wasm32) can say. */
TEST(bytes_for_should_saturate_past_the_address_space_rather_than_wrap) {
    const kvc_mode modes[] = {KVC_MODE_F32, KVC_MODE_Q8};
    for (size_t mi = 0; mi < 2; mi++) {
        size_t previous = 0;
        for (size_t positions = (size_t)1 << 16; positions <= (size_t)1 << 26; positions <<= 1) {
            const size_t bytes = kvc_layer_bytes_for(8, 128, modes[mi], positions);
            const uint64_t rows = (uint64_t)positions * 8 * (mi == 0 ? 128 * sizeof(float) : 128) * 2;
            CHECK(bytes >= previous);
            CHECK(rows > SIZE_MAX ? bytes == SIZE_MAX : bytes >= rows);
            previous = bytes;
        }
    }
}

TEST(capacity_bytes_should_cover_memory_bytes) {
    const size_t H = 4, d = 16, len = 140;
    test_data data = test_data_make(83, len, H, d, 1);
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        kvc_layer *layer, *copy;
        CHECK_OK(kvc_layer_create(H, d, test_modes[mi], &layer));
        CHECK(kvc_layer_capacity_bytes(layer) > 0);
        for (size_t p = 0; p < len; p++) {
            CHECK_OK(test_data_append(layer, &data, p, 1));
            CHECK(kvc_layer_capacity_bytes(layer) >= kvc_layer_memory_bytes(layer));
        }
        CHECK_OK(kvc_layer_clone(layer, &copy));
        CHECK(kvc_layer_capacity_bytes(copy) >= kvc_layer_memory_bytes(copy));
        kvc_layer_free(copy);
        if (test_forks_kept()) { /* its pages are shared: a truncation lets those go */
            kvc_layer_free(layer);
            continue;
        }
        /* Truncation keeps the allocation (of pages no other layer holds). */
        const size_t reserved = kvc_layer_capacity_bytes(layer);
        CHECK_OK(kvc_layer_truncate_last(layer, 100));
        CHECK(kvc_layer_capacity_bytes(layer) == reserved);
        CHECK(kvc_layer_capacity_bytes(layer) >= kvc_layer_memory_bytes(layer));
        kvc_layer_clear(layer);
        CHECK(kvc_layer_capacity_bytes(layer) == reserved);
        kvc_layer_free(layer);
    }
    CHECK(kvc_layer_capacity_bytes(NULL) == 0);
    CHECK(kvc_layer_memory_bytes(NULL) == 0);
    test_data_free(&data);
}

/* ---- clone and clear ---- */

TEST(clone_should_equal_the_original) {
    static const size_t lengths[] = {0, 40, 100};
    const size_t H = 4, d = 20;
    test_data data = test_data_make(84, 100, H, d, 1);
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        for (size_t li = 0; li < 3; li++) {
            kvc_layer *copy, *layer = test_layer_with(&data, lengths[li], test_modes[mi]);
            CHECK(layer != NULL);
            float probs[100];
            for (size_t p = 0; p < lengths[li]; p++) probs[p] = 0.01f * (float)p;
            CHECK_OK(kvc_layer_accumulate_imp(layer, probs, lengths[li]));
            CHECK_OK(kvc_layer_clone(layer, &copy));
            CHECK(test_layers_equal(copy, layer));
            kvc_layer_free(layer);
            kvc_layer_free(copy);
        }
    }
    test_data_free(&data);
}

/* Appends other data across the window, accumulates imp, truncates below
 * the window and appends again (re-freezing the field from other rows). */
static kvc_status mutate(kvc_layer *layer, const test_data *other) {
    const size_t len = kvc_layer_seq_len(layer);
    kvc_status status = test_data_append(layer, other, 0, 30);
    float *probs = test_alloc((len + 30) * sizeof(float));
    for (size_t p = 0; p < len + 30; p++) probs[p] = 0.5f;
    if (status == KVC_OK) status = kvc_layer_accumulate_imp(layer, probs, len + 30);
    if (status == KVC_OK) status = kvc_layer_truncate_last(layer, len + 30 - 10);
    if (status == KVC_OK) status = test_data_append(layer, other, 30, 80);
    free(probs);
    return status;
}

TEST(clone_should_evolve_independently_of_the_original) {
    const size_t H = 4, d = 20;
    test_data data = test_data_make(85, 100, H, d, 1);
    test_data other = test_data_make(86, 110, H, d, 1);
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        kvc_layer *copy, *layer = test_layer_with(&data, 100, test_modes[mi]);
        CHECK(layer != NULL);
        CHECK_OK(kvc_layer_clone(layer, &copy));
        test_state *original = test_state_take(layer);
        /* The clone changes; the original does not. */
        CHECK_OK(mutate(copy, &other));
        CHECK(test_state_matches(layer, original));
        /* The original changes; the clone does not. */
        test_state *cloned = test_state_take(copy);
        CHECK_OK(mutate(layer, &other));
        CHECK(test_state_matches(copy, cloned));
        kvc_layer_clear(copy);
        CHECK(kvc_layer_seq_len(layer) == 90);
        test_state_free(original);
        test_state_free(cloned);
        kvc_layer_free(layer);
        /* The clone outlives the original. */
        CHECK_OK(test_data_append(copy, &data, 0, 100));
        kvc_layer_free(copy);
    }
    CHECK_STATUS(kvc_layer_clone(NULL, &(kvc_layer *){NULL}), KVC_E_NULL_POINTER);
    test_data_free(&data);
    test_data_free(&other);
}

TEST(clear_should_empty_everything_and_keep_geometry_and_mode) {
    const size_t H = 3, d = 16;
    test_data data = test_data_make(87, 100, H, d, 1);
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        kvc_layer *layer = test_layer_with(&data, 100, test_modes[mi]);
        CHECK(layer != NULL);
        kvc_layer_clear(layer);
        CHECK(kvc_layer_seq_len(layer) == 0);
        CHECK(kvc_layer_memory_bytes(layer) == 0);
        CHECK(kvc_layer_field_frozen(layer) == 0);
        CHECK(kvc_layer_num_kv_heads(layer) == H);
        CHECK(kvc_layer_head_dim(layer) == d);
        CHECK(kvc_layer_mode(layer) == test_modes[mi]);
        for (size_t h = 0; h < H; h++) CHECK(kvc_layer_head_len(layer, h) == 0);
        /* Refilled, it is a fresh layer: the field re-freezes from new rows. */
        kvc_layer *fresh = test_layer_with(&data, 0, test_modes[mi]);
        CHECK(fresh != NULL);
        CHECK_OK(test_data_append(layer, &data, 30, 70));
        CHECK_OK(test_data_append(fresh, &data, 30, 70));
        CHECK(test_layers_equal(layer, fresh));
        kvc_layer_free(layer);
        kvc_layer_free(fresh);
    }
    kvc_layer_clear(NULL);
    test_data_free(&data);
}

/* ---- refused input ---- */

/* Puts `bad` into element `at` of head h's slice of k (is_values = 0) or v
 * at position p of data, and checks that appending positions [first, p]
 * is refused with `expected` and changes nothing. */
static int append_refused(kvc_layer *layer, test_data *data, size_t first, size_t p, size_t h,
                          size_t at, int is_values, float bad, kvc_status expected) {
    float *x = (is_values ? data->v : data->k) + (p * data->H + h) * data->d + at;
    const float keep = *x;
    test_state *before = test_state_take(layer);
    *x = bad;
    const kvc_status status = test_data_append(layer, data, first, p + 1 - first);
    *x = keep;
    const int ok = status == expected && test_state_matches(layer, before);
    if (!ok) printf("  append returned %s\n", kvc_status_name(status));
    test_state_free(before);
    return ok;
}

TEST(append_should_refuse_nonfinite_key_or_value_of_live_head) {
    const size_t H = 3, d = 17;
    static const size_t lengths[] = {10, 64, 70};
    test_data data = test_data_make(88, 71, H, d, 0);
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        for (size_t li = 0; li < 3; li++) {
            const size_t len = lengths[li];
            kvc_layer *layer = test_layer_with(&data, len, test_modes[mi]);
            CHECK(layer != NULL);
            for (int b = 0; b < 3; b++) {
                const float bad = test_nonfinite[b];
                for (size_t at = 0; at < d; at += 8) {
                    CHECK(append_refused(layer, &data, len, len, b % H, at, 0, bad,
                                         KVC_E_NONFINITE_KEY));
                    CHECK(append_refused(layer, &data, len, len, (b + 1) % H, at, 1, bad,
                                         KVC_E_NONFINITE_VALUE));
                }
            }
            kvc_layer_free(layer);
        }
    }
    test_data_free(&data);
}

TEST(append_n_should_store_nothing_when_a_later_position_is_nonfinite) {
    const size_t H = 3, d = 16;
    test_data data = test_data_make(89, 80, H, d, 0);
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        kvc_layer *layer = test_layer_with(&data, 58, test_modes[mi]);
        CHECK(layer != NULL);
        /* Positions 58..79 cross W; the bad element sits in the last one. */
        CHECK(append_refused(layer, &data, 58, 79, 2, d - 1, 0, NAN, KVC_E_NONFINITE_KEY));
        CHECK(append_refused(layer, &data, 58, 79, 0, 0, 1, INFINITY, KVC_E_NONFINITE_VALUE));
        CHECK(kvc_layer_field_frozen(layer) == 0);
        CHECK(kvc_layer_seq_len(layer) == 58);
        kvc_layer_free(layer);
    }
    test_data_free(&data);
}

TEST(append_should_accept_nonfinite_in_dead_head_slice) {
    const size_t H = 3, d = 8;
    test_data data = test_data_make(90, 100, H, d, 0);
    /* Head 1 is dead at every position, and its slices hold NaN and Inf. */
    for (size_t p = 0; p < 100; p++) {
        data.alive[p * H + 1] = 0;
        for (size_t j = 0; j < d; j++) {
            data.k[(p * H + 1) * d + j] = NAN;
            data.v[(p * H + 1) * d + j] = (j % 2) ? INFINITY : -INFINITY;
        }
    }
    float q[8], out[8], probs[100];
    test_rng rng = test_rng_new(90);
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        kvc_layer *layer = test_layer_with(&data, 30, test_modes[mi]);
        CHECK(layer != NULL);
        for (size_t p = 30; p < 100; p++) CHECK_OK(test_data_append(layer, &data, p, 1));
        CHECK(kvc_layer_seq_len(layer) == 100);
        CHECK(kvc_layer_head_len(layer, 1) == 0);
        CHECK(kvc_layer_memory_bytes(layer) == test_expected_memory(&data, 100, test_modes[mi]));
        for (size_t h = 0; h < H; h++) {
            test_fill_normal(&rng, q, d);
            CHECK_OK(kvc_layer_attend(layer, q, h, out, probs));
            for (size_t j = 0; j < d; j++) CHECK(isfinite(out[j]));
        }
        kvc_layer_free(layer);
    }
    test_data_free(&data);
}

TEST(append_should_refuse_null_pointers) {
    float k[8] = {0}, v[8] = {0};
    kvc_layer *layer;
    CHECK_OK(kvc_layer_create(1, 8, KVC_MODE_Q8, &layer));
    CHECK_STATUS(kvc_layer_append(NULL, k, v, NULL), KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_layer_append(layer, NULL, v, NULL), KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_layer_append(layer, k, NULL, NULL), KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_layer_append_n(layer, 2, NULL, v, NULL), KVC_E_NULL_POINTER);
    CHECK(kvc_layer_seq_len(layer) == 0);
    kvc_layer_free(layer);
}

TEST(append_n_should_refuse_more_than_max_positions) {
    float k[8] = {0}, v[8] = {0};
    kvc_layer *layer;
    CHECK_OK(kvc_layer_create(1, 8, KVC_MODE_F32, &layer));
    CHECK_OK(kvc_layer_append(layer, k, v, NULL));
    /* Refused before any element is read: k and v hold one position only. */
    CHECK_STATUS(kvc_layer_append_n(layer, KVC_MAX_POSITIONS, k, v, NULL), KVC_E_TOO_LONG);
    CHECK_STATUS(kvc_layer_append_n(layer, (size_t)-1, k, v, NULL), KVC_E_TOO_LONG);
    CHECK(kvc_layer_seq_len(layer) == 1);
    kvc_layer_free(layer);
}

/* ---- reads ---- */

TEST(accessors_should_read_zero_for_null_layer_or_bad_head) {
    kvc_layer *layer;
    CHECK_OK(kvc_layer_create(2, 8, KVC_MODE_Q8, &layer));
    float k[16] = {0}, v[16] = {0};
    CHECK_OK(kvc_layer_append(layer, k, v, NULL));
    CHECK(kvc_layer_head_len(layer, 0) == 1);
    CHECK(kvc_layer_head_len(layer, 2) == 0);
    CHECK(kvc_layer_head_len(layer, (size_t)-1) == 0);
    CHECK(kvc_layer_head_len(NULL, 0) == 0);
    CHECK(kvc_layer_num_kv_heads(NULL) == 0);
    CHECK(kvc_layer_head_dim(NULL) == 0);
    CHECK(kvc_layer_seq_len(NULL) == 0);
    CHECK(kvc_layer_field_frozen(NULL) == 0);
    CHECK(kvc_layer_mode(NULL) == KVC_MODE_F32);
    kvc_layer_free(layer);
}

TEST(head_reads_should_refuse_bad_head_short_buffer_and_null) {
    test_data data = test_data_make(91, 70, 2, 8, 0);
    float rows[70 * 8];
    uint32_t positions[70];
    kvc_layer *layer;
    CHECK_OK(kvc_layer_create(2, 8, KVC_MODE_Q8, &layer));
    /* An empty head accepts a NULL buffer. */
    CHECK_OK(kvc_layer_head_keys(layer, 0, NULL, 0));
    CHECK_OK(kvc_layer_head_values(layer, 0, NULL, 0));
    CHECK_OK(kvc_layer_head_positions(layer, 0, NULL, 0));
    CHECK_OK(test_data_append(layer, &data, 0, 70));
    CHECK_STATUS(kvc_layer_head_keys(layer, 2, rows, 70 * 8), KVC_E_KV_HEAD);
    CHECK_STATUS(kvc_layer_head_values(layer, 2, rows, 70 * 8), KVC_E_KV_HEAD);
    CHECK_STATUS(kvc_layer_head_positions(layer, 2, positions, 70), KVC_E_KV_HEAD);
    CHECK_STATUS(kvc_layer_head_keys(layer, 1, rows, 70 * 8 - 1), KVC_E_LENGTH);
    CHECK_STATUS(kvc_layer_head_values(layer, 1, rows, 70 * 8 - 1), KVC_E_LENGTH);
    CHECK_STATUS(kvc_layer_head_positions(layer, 1, positions, 69), KVC_E_LENGTH);
    CHECK_STATUS(kvc_layer_head_keys(layer, 1, NULL, 70 * 8), KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_layer_head_values(layer, 1, NULL, 70 * 8), KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_layer_head_positions(layer, 1, NULL, 70), KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_layer_head_keys(NULL, 0, rows, 70 * 8), KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_layer_head_positions(NULL, 0, positions, 70), KVC_E_NULL_POINTER);
    kvc_layer_free(layer);
    test_data_free(&data);
}

/* The highest value of kvc_status. */
#define LAST_STATUS KVC_E_NONFINITE_INPUT

TEST(status_name_should_give_distinct_text_for_every_status) {
    for (int a = KVC_OK; a <= LAST_STATUS; a++) {
        const char *name = kvc_status_name((kvc_status)a);
        CHECK(name != NULL && name[0] != '\0');
        CHECK(strcmp(name, "unknown status") != 0);
        for (int b = KVC_OK; b < a; b++) CHECK(strcmp(name, kvc_status_name((kvc_status)b)) != 0);
    }
    CHECK(strcmp(kvc_status_name(KVC_E_NOMEM), "out of memory") == 0);
}

TEST(status_name_should_say_unknown_status_for_other_values) {
    static const int others[] = {LAST_STATUS + 1, 100, -1, 0x7fffffff};
    for (size_t i = 0; i < 4; i++)
        CHECK(strcmp(kvc_status_name((kvc_status)others[i]), "unknown status") == 0);
}

TEST(version_should_be_the_header_version) {
    CHECK(strcmp(kvc_version(), KVC_VERSION_STRING) == 0);
}

TEST(describe_should_name_mode_and_seq_len) {
    test_data data = test_data_make(92, 70, 3, 16, 1);
    char buf[512], want[64];
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        kvc_layer *layer = test_layer_with(&data, 70, test_modes[mi]);
        CHECK(layer != NULL);
        const size_t needed = kvc_layer_describe(layer, buf, sizeof buf);
        CHECK(needed == strlen(buf));
        snprintf(want, sizeof want, "mode=%s ", mode_names[mi]);
        CHECK(strstr(buf, want) != NULL);
        CHECK(strstr(buf, "seq_len=70") != NULL);
        kvc_layer_free(layer);
    }
    test_data_free(&data);
}

TEST(describe_should_return_needed_length_when_buffer_is_short) {
    char full[512], part[16];
    kvc_layer *layer;
    CHECK_OK(kvc_layer_create(8, 128, KVC_MODE_Q8, &layer));
    const size_t needed = kvc_layer_describe(layer, full, sizeof full);
    CHECK(needed > sizeof part);
    memset(part, 'x', sizeof part);
    CHECK(kvc_layer_describe(layer, part, sizeof part) == needed);
    CHECK(part[sizeof part - 1] == '\0');
    CHECK(strncmp(part, full, sizeof part - 1) == 0);
    CHECK(kvc_layer_describe(layer, NULL, 0) == needed);
    CHECK(kvc_layer_describe(NULL, full, sizeof full) == 0);
    kvc_layer_free(layer);
}

RUN_TESTS(CASE(create_should_refuse_zero_and_too_many_heads),
          CASE(bytes_for_should_be_what_a_layer_of_live_heads_holds_at_each_length),
          CASE(bytes_for_should_saturate_past_the_address_space_rather_than_wrap),
          CASE(create_should_refuse_zero_and_too_large_head_dim),
          CASE(create_should_refuse_unknown_mode),
          CASE(create_should_refuse_null_out),
          CASE(create_should_accept_the_largest_geometry_and_report_it),
          CASE(append_n_should_equal_single_appends),
          CASE(append_n_of_zero_positions_should_change_nothing),
          CASE(head_positions_should_follow_alive_masks),
          CASE(attend_probs_should_line_up_with_head_positions),
          CASE(accumulate_imp_head_should_add_at_the_head_positions),
          CASE(accumulate_imp_should_add_per_position_and_start_new_slots_at_zero),
          CASE(accumulate_imp_should_refuse_length_other_than_seq_len),
          CASE(accumulate_imp_should_refuse_bad_probs_and_keep_imp),
          CASE(imp_should_refuse_short_buffer),
          CASE(truncate_should_drop_exactly_each_store_own_rows),
          CASE(truncate_should_drop_everything_when_n_exceeds_seq_len),
          CASE(memory_bytes_should_follow_the_formula_in_every_mode),
          CASE(capacity_bytes_should_cover_memory_bytes),
          CASE(clone_should_equal_the_original),
          CASE(clone_should_evolve_independently_of_the_original),
          CASE(clear_should_empty_everything_and_keep_geometry_and_mode),
          CASE(append_should_refuse_nonfinite_key_or_value_of_live_head),
          CASE(append_n_should_store_nothing_when_a_later_position_is_nonfinite),
          CASE(append_should_accept_nonfinite_in_dead_head_slice),
          CASE(append_should_refuse_null_pointers),
          CASE(append_n_should_refuse_more_than_max_positions),
          CASE(accessors_should_read_zero_for_null_layer_or_bad_head),
          CASE(head_reads_should_refuse_bad_head_short_buffer_and_null),
          CASE(status_name_should_give_distinct_text_for_every_status),
          CASE(status_name_should_say_unknown_status_for_other_values),
          CASE(version_should_be_the_header_version),
          CASE(describe_should_name_mode_and_seq_len),
          CASE(describe_should_return_needed_length_when_buffer_is_short))
