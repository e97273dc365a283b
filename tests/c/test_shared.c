/*
 * test_shared.c -- the shared layer kind (Gemma 4's shared-KV blocks): a
 * layer that holds nothing and names the earlier layer of rows of its model
 * it reads.  A model takes it only after such an owner; it costs no memory
 * and never limits the model's positions; verify, truncation, eviction,
 * clear, the forward's hold and give back, forks, snapshots and prefix
 * caches treat its owner once and leave it as it is; calls on rows refuse
 * it; out of memory leaves everything as it was.
 */
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "core/internal.h" /* kvc_model_hold, kvc_model_give_back */

enum { H = 3, D = 16, WIN = 40, ROLLBACK = 8, LEN = 150 };
/* The model of these tests: a q8 full layer, an f32 window layer, then
 * layers shared from each (the last two from the full one). */
enum { OWNERS = 2, LAYERS = 5 };
static const size_t shared_owner[LAYERS] = {SIZE_MAX, SIZE_MAX, 0, 1, 0};

/* The owners, alone or followed by the shared layers (with_shared), at
 * positions [0, len) of data. */
static kvc_model *model_with(const test_data *data, size_t len, int with_shared) {
    kvc_layer *layers[LAYERS] = {0};
    kvc_status status = kvc_layer_create(H, D, KVC_MODE_Q8, &layers[0]);
    if (status == KVC_OK) status = kvc_layer_create_window(H, D, KVC_MODE_F32, WIN, ROLLBACK, &layers[1]);
    for (size_t i = OWNERS; i < LAYERS && status == KVC_OK && with_shared; i++)
        status = kvc_layer_create_shared(shared_owner[i], &layers[i]);
    for (size_t i = 0; i < OWNERS && status == KVC_OK && len; i++) status = test_data_append(layers[i], data, 0, len);
    kvc_model *model = NULL;
    if (status == KVC_OK) status = kvc_model_create(layers, with_shared ? LAYERS : OWNERS, &model);
    if (status != KVC_OK) {
        if (status != KVC_E_NOMEM) printf("  model_with: %s\n", kvc_status_name(status)); /* the fault tests' own */
        for (size_t i = 0; i < LAYERS; i++) kvc_layer_free(layers[i]);
    }
    return model;
}

/* Appends positions [first, first + n) of data to the owners of a model. */
static kvc_status append_to_owners(kvc_model *model, const test_data *data, size_t first, size_t n) {
    kvc_status status = KVC_OK;
    for (size_t i = 0; i < OWNERS && status == KVC_OK; i++)
        status = test_data_append(kvc_model_layer(model, i), data, first, n);
    return status;
}

/* 1 if the model's owners equal the plain model's layers and its shared
 * layers are as model_with made them. */
static int owners_as_plain(const kvc_model *model, const kvc_model *plain) {
    for (size_t i = 0; i < OWNERS; i++) {
        if (!test_layers_equal(kvc_model_layer(model, i), kvc_model_layer(plain, i))) return 0;
    }
    for (size_t i = OWNERS; i < LAYERS; i++) {
        const kvc_layer *layer = kvc_model_layer(model, i);
        if (kvc_layer_kind(layer) != KVC_KIND_SHARED || kvc_layer_owner(layer) != shared_owner[i] ||
            kvc_layer_memory_bytes(layer) != 0 || kvc_layer_verifying(layer))
            return 0;
    }
    return kvc_model_seq_len(model) == kvc_model_seq_len(plain) &&
           kvc_model_memory_bytes(model) == kvc_model_memory_bytes(plain);
}

/* A model with shared layers beside one of its owners alone, on the same data. */
typedef struct side_by_side {
    test_data data;
    kvc_model *model, *plain;
} side_by_side;

/* seed's data of n positions; the model holding its first model_len, the
 * plain one its first plain_len.  1 if both were made. */
static int side_by_side_make(side_by_side *s, uint64_t seed, size_t n, size_t model_len, size_t plain_len) {
    s->data = test_data_make(seed, n, H, D, 1);
    s->model = model_with(&s->data, model_len, 1);
    s->plain = model_with(&s->data, plain_len, 0);
    return s->model && s->plain;
}

static void side_by_side_free(side_by_side *s) {
    kvc_model_free(s->model);
    kvc_model_free(s->plain);
    test_data_free(&s->data);
}

TEST(create_shared_should_make_a_layer_that_holds_nothing_and_names_its_owner) {
    kvc_layer *shared = NULL, *full = NULL;
    CHECK_STATUS(kvc_layer_create_shared(3, NULL), KVC_E_NULL_POINTER);
    CHECK_OK(kvc_layer_create_shared(3, &shared));
    CHECK_OK(kvc_layer_create(H, D, KVC_MODE_F32, &full));
    CHECK(kvc_layer_kind(shared) == KVC_KIND_SHARED && kvc_layer_owner(shared) == 3);
    CHECK(kvc_layer_owner(full) == SIZE_MAX && kvc_layer_owner(NULL) == SIZE_MAX);
    test_check_holds_nothing(shared, "kind=shared owner=3");
    /* Alone, it forks, round-trips a snapshot and clears. */
    kvc_layer *copy = NULL;
    CHECK_OK(kvc_layer_clone(shared, &copy));
    CHECK(test_layers_equal(copy, shared));
    CHECK(test_layer_round_trips(shared));
    kvc_layer_clear(copy);
    CHECK(test_layers_equal(copy, shared));
    kvc_layer_free(copy);
    kvc_layer_free(full);
    kvc_layer_free(shared);
}

TEST(calls_on_rows_should_refuse_a_shared_layer_and_change_nothing) {
    test_data data = test_data_make(5, 4, H, D, 0);
    kvc_layer *layer = NULL;
    CHECK_OK(kvc_layer_create_shared(0, &layer));
    float q[H * D] = {0}, out[H * D], probs[4];
    uint32_t positions[4];
    const float p[4] = {0};
    size_t count;
    CHECK_REFUSED(layer, kvc_layer_append(layer, data.k, data.v, NULL), KVC_E_KIND);
    CHECK_REFUSED(layer, test_data_append(layer, &data, 0, 4), KVC_E_KIND);
    CHECK_REFUSED(layer, kvc_layer_truncate_last(layer, 0), KVC_E_KIND);
    CHECK_REFUSED(layer, kvc_layer_attend(layer, q, 0, out, probs), KVC_E_KIND);
    CHECK_REFUSED(layer, kvc_layer_attend_group(layer, q, 1, 0, out, probs), KVC_E_KIND);
    CHECK_REFUSED(layer, kvc_layer_attend_heads(layer, q, H, out, NULL), KVC_E_KIND);
    CHECK_REFUSED(layer, kvc_layer_attend_causal(layer, q, 1, 0, out, probs), KVC_E_KIND);
    CHECK_REFUSED(layer, kvc_layer_head_keys(layer, 0, out, H * D), KVC_E_KIND);
    CHECK_REFUSED(layer, kvc_layer_head_positions(layer, 0, positions, 4), KVC_E_KIND);
    CHECK_REFUSED(layer, kvc_layer_positions(layer, positions, 4), KVC_E_KIND);
    CHECK_REFUSED(layer, kvc_layer_accumulate_imp(layer, p, 0), KVC_E_KIND);
    CHECK_REFUSED(layer, kvc_layer_evict(layer, 4, 1, 1), KVC_E_KIND);
    CHECK_REFUSED(layer, kvc_layer_eviction_plan(layer, 4, 1, 1, positions, 4, &count), KVC_E_KIND);
    CHECK_REFUSED(layer, kvc_layer_set_max_rows(layer, 8, 1, 1), KVC_E_KIND);
    CHECK_REFUSED(layer, kvc_layer_set_residual_rows(layer, 8), KVC_E_KIND);
    CHECK_REFUSED(layer, kvc_layer_linear_step(layer, NULL, q, q, q, out), KVC_E_KIND);
    CHECK_REFUSED(layer, kvc_layer_conv_n(layer, 1, q, q, out), KVC_E_KIND);
    CHECK_REFUSED(layer, kvc_layer_recurrent_state(layer, out, H * D), KVC_E_KIND);
    /* Not a layer with drafts of its own either. */
    CHECK_OK(kvc_layer_begin_verify(layer));
    CHECK(kvc_layer_draft_len(layer) == 0);
    CHECK_REFUSED(layer, kvc_layer_accept(layer, 1), KVC_E_ACCEPT);
    CHECK_OK(kvc_layer_accept(layer, 0));
    CHECK(!kvc_layer_verifying(layer) && kvc_layer_owner(layer) == 0);
    kvc_layer_free(layer);
    test_data_free(&data);
}

/* kvc_model_create of layers [full, window, extra...]: the caller keeps
 * them all. */
static kvc_status create_with(kvc_layer *const *extra, size_t n_extra, kvc_layer **owners, kvc_model **out) {
    kvc_layer *layers[6] = {owners[0], owners[1]};
    for (size_t i = 0; i < n_extra; i++) layers[OWNERS + i] = extra[i];
    return kvc_model_create(layers, OWNERS + n_extra, out);
}

TEST(model_create_should_refuse_a_shared_layer_without_an_earlier_layer_of_rows) {
    kvc_layer *owners[OWNERS] = {0}, *conv = NULL, *linear = NULL;
    kvc_layer *own = NULL, *later = NULL, *far = NULL, *of_conv = NULL, *of_linear = NULL, *of_shared = NULL, *good = NULL;
    CHECK_OK(kvc_layer_create(H, D, KVC_MODE_F32, &owners[0]));
    CHECK_OK(kvc_layer_create_window(H, D, KVC_MODE_F32, WIN, ROLLBACK, &owners[1]));
    CHECK_OK(kvc_layer_create_conv(8, 3, &conv));
    CHECK_OK(kvc_layer_create_linear(2, 4, 3, 0.0, &linear));
    CHECK_OK(kvc_layer_create_shared(OWNERS, &own));         /* itself, at index 2 */
    CHECK_OK(kvc_layer_create_shared(OWNERS + 1, &later));   /* the layer after it */
    CHECK_OK(kvc_layer_create_shared(SIZE_MAX, &far));
    CHECK_OK(kvc_layer_create_shared(OWNERS, &of_conv));     /* after conv at 2 */
    CHECK_OK(kvc_layer_create_shared(OWNERS, &of_linear));   /* after linear at 2 */
    CHECK_OK(kvc_layer_create_shared(OWNERS, &of_shared));   /* after good at 2 */
    CHECK_OK(kvc_layer_create_shared(0, &good));
    kvc_model *model = (kvc_model *)owners;
    CHECK_STATUS(create_with((kvc_layer *[]){own}, 1, owners, &model), KVC_E_LAYERS);
    CHECK(model == NULL);
    CHECK_STATUS(create_with((kvc_layer *[]){later, good}, 2, owners, &model), KVC_E_LAYERS);
    CHECK_STATUS(create_with((kvc_layer *[]){far}, 1, owners, &model), KVC_E_LAYERS);
    CHECK_STATUS(create_with((kvc_layer *[]){conv, of_conv}, 2, owners, &model), KVC_E_LAYERS);
    CHECK_STATUS(create_with((kvc_layer *[]){linear, of_linear}, 2, owners, &model), KVC_E_LAYERS);
    CHECK_STATUS(create_with((kvc_layer *[]){good, of_shared}, 2, owners, &model), KVC_E_LAYERS);
    /* First in the list: no layer comes before it. */
    kvc_layer *first[2] = {good, owners[0]};
    CHECK_STATUS(kvc_model_create(first, 2, &model), KVC_E_LAYERS);
    CHECK(model == NULL);
    /* Refused, every layer is still the caller's: the same ones make a model. */
    CHECK_OK(create_with((kvc_layer *[]){good, conv}, 2, owners, &model));
    CHECK(kvc_model_num_layers(model) == 4 && kvc_model_layer(model, 2) == good);
    kvc_model_free(model);
    kvc_layer *rest[] = {linear, own, later, far, of_conv, of_linear, of_shared};
    for (size_t i = 0; i < sizeof rest / sizeof rest[0]; i++) kvc_layer_free(rest[i]);
}

TEST(a_model_with_shared_layers_should_count_each_owner_once) {
    side_by_side s;
    CHECK(side_by_side_make(&s, 11, LEN, 0, 0));
    kvc_model *model = s.model, *plain = s.plain;
    const test_data *data = &s.data;
    for (size_t at = 0; at < LEN; at += 30) {
        CHECK_OK(append_to_owners(model, data, at, 30));
        CHECK_OK(append_to_owners(plain, data, at, 30));
        size_t owners_bytes = 0;
        for (size_t i = 0; i < OWNERS; i++) owners_bytes += kvc_layer_memory_bytes(kvc_model_layer(model, i));
        CHECK(owners_bytes > 0 && kvc_model_memory_bytes(model) == owners_bytes);
        CHECK(kvc_model_shared_bytes(model) == kvc_model_shared_bytes(plain));
        /* The shared layers take no positions: they never hold the model back. */
        CHECK(kvc_model_seq_len(model) == at + 30);
        CHECK(owners_as_plain(model, plain));
    }
    for (size_t i = OWNERS; i < LAYERS; i++) {
        CHECK(kvc_layer_memory_bytes(kvc_model_layer(model, i)) == 0);
        CHECK(kvc_layer_shared_bytes(kvc_model_layer(model, i)) == 0);
    }
    /* Capacity counts each shared layer's struct, no more than a few hundred bytes. */
    CHECK(kvc_model_capacity_bytes(model) > kvc_model_capacity_bytes(plain));
    CHECK(kvc_model_capacity_bytes(model) - kvc_model_capacity_bytes(plain) < (LAYERS - OWNERS) * 1024);
    side_by_side_free(&s);
}

TEST(accept_should_leave_the_owners_as_plain_appends_and_the_shared_layers_intact) {
    enum { START = 90, DRAFTS = 5 };
    for (size_t j = 0; j <= DRAFTS; j++) {
        side_by_side s;
        CHECK(side_by_side_make(&s, 12, START + DRAFTS, START, START + j));
        kvc_model *model = s.model;
        CHECK_OK(kvc_model_begin_verify(model));
        CHECK(kvc_model_verifying(model));
        CHECK_OK(append_to_owners(model, &s.data, START, DRAFTS));
        CHECK(kvc_layer_draft_len(kvc_model_layer(model, 0)) == DRAFTS);
        CHECK_MODEL_REFUSED(model, kvc_model_accept(model, DRAFTS + 1), KVC_E_ACCEPT);
        CHECK_OK(kvc_model_accept(model, j));
        CHECK(!kvc_model_verifying(model));
        CHECK(owners_as_plain(model, s.plain));
        side_by_side_free(&s);
    }
}

TEST(truncate_evict_and_clear_should_reach_the_owners_and_pass_the_shared_layers_by) {
    side_by_side s;
    CHECK(side_by_side_make(&s, 13, LEN, 0, 0));
    kvc_model *model = s.model, *plain = s.plain;
    /* Ten at a time: the window slides, and truncation meets its bound. */
    for (size_t at = 0; at < LEN; at += 10) {
        CHECK_OK(append_to_owners(model, &s.data, at, 10));
        CHECK_OK(append_to_owners(plain, &s.data, at, 10));
    }
    CHECK_OK(kvc_model_truncate_last(model, ROLLBACK));
    CHECK_OK(kvc_model_truncate_last(plain, ROLLBACK));
    CHECK(kvc_model_seq_len(model) == LEN - ROLLBACK && owners_as_plain(model, plain));
    /* Past the window's rollback: refused, nothing changed. */
    CHECK_MODEL_REFUSED(model, kvc_model_truncate_last(model, 3 * WIN), KVC_E_WINDOW);
    CHECK_OK(kvc_model_evict(model, 80, 4, 40));
    CHECK_OK(kvc_model_evict(plain, 80, 4, 40));
    CHECK(owners_as_plain(model, plain));
    kvc_model_clear(model);
    CHECK(kvc_model_seq_len(model) == 0 && kvc_model_memory_bytes(model) == 0);
    for (size_t i = OWNERS; i < LAYERS; i++) CHECK(kvc_layer_owner(kvc_model_layer(model, i)) == shared_owner[i]);
    side_by_side_free(&s);
}

TEST(hold_and_give_back_should_take_the_owners_back_and_pass_the_shared_layers_by) {
    side_by_side s;
    CHECK(side_by_side_make(&s, 14, LEN, 60, 60));
    kvc_model *model = s.model;
    kvc_layer **held = NULL;
    CHECK_OK(kvc_model_hold(model, &held));
    for (size_t i = OWNERS; i < LAYERS; i++) CHECK(held[i] == NULL);
    CHECK_OK(append_to_owners(model, &s.data, 60, 40));
    CHECK_OK(append_to_owners(model, &s.data, 100, 50));
    kvc_model_give_back(model, held, 90);
    kvc_model_release(model, held);
    CHECK(owners_as_plain(model, s.plain));
    side_by_side_free(&s);
}

TEST(a_snapshot_should_carry_the_shared_layers_and_re_serialize_byte_identical) {
    test_data data = test_data_make(15, LEN, H, D, 1);
    kvc_model *model = model_with(&data, LEN, 1), *restored = NULL, *again = NULL;
    CHECK(model);
    size_t len, len2;
    uint8_t *bytes = test_model_snapshot(model, &len);
    CHECK(bytes);
    CHECK_OK(kvc_model_deserialize(bytes, len, &restored));
    CHECK(test_models_equal(restored, model));
    uint8_t *bytes2 = test_model_snapshot(restored, &len2);
    CHECK(bytes2 && len2 == len && memcmp(bytes, bytes2, len) == 0);
    /* The restored model goes on as the original. */
    CHECK_OK(kvc_model_clone(restored, &again));
    kvc_model_free(restored);
    CHECK(test_models_equal(again, model));
    free(bytes);
    free(bytes2);
    kvc_model_free(again);
    kvc_model_free(model);
    test_data_free(&data);
}

static void put_le(uint8_t *at, uint64_t x, size_t bytes) {
    for (size_t i = 0; i < bytes; i++) at[i] = (uint8_t)(x >> (8 * i));
}

TEST(a_snapshot_naming_a_bad_owner_should_be_refused) {
    /* A layer frame: 16 bytes of magic, version and length; the kind (4);
     * the owner (8); its CRC-32 (4).  The model's last layer ends 4 bytes
     * (the model's CRC-32) before its end. */
    enum { SHARED_FRAME = 32, AT_OWNER = 20 };
    test_data data = test_data_make(16, 70, H, D, 0);
    kvc_model *model = model_with(&data, 70, 1);
    CHECK(model);
    size_t len;
    uint8_t *bytes = test_model_snapshot(model, &len);
    CHECK(bytes);
    uint8_t *last = bytes + len - 4 - SHARED_FRAME;
    CHECK(memcmp(last, "KVCL", 4) == 0 && last[16] == KVC_KIND_SHARED);
    /* Itself, a later layer, a shared layer, none at all. */
    const uint64_t bad[] = {LAYERS - 1, LAYERS, LAYERS - 2, (uint64_t)1 << 40};
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
        put_le(last + AT_OWNER, bad[b], 8);
        put_le(last + SHARED_FRAME - 4, test_crc32(last, SHARED_FRAME - 4), 4);
        put_le(bytes + len - 4, test_crc32(bytes, len - 4), 4);
        kvc_model *out = model;
        const kvc_status status = kvc_model_deserialize(bytes, len, &out);
        CHECK(status == KVC_E_SNAPSHOT_CORRUPT || (bad[b] > SIZE_MAX && status == KVC_E_SNAPSHOT_TOO_LARGE));
        CHECK(out == NULL);
    }
    /* A layer snapshot whose owner is cut short, or followed by more. */
    kvc_layer *shared = NULL, *out = NULL;
    CHECK_OK(kvc_layer_create_shared(1, &shared));
    uint8_t frame[SHARED_FRAME + 4];
    CHECK_OK(kvc_layer_serialize(shared, frame, SHARED_FRAME));
    for (size_t cut = 0; cut < 2; cut++) {
        const size_t n = cut ? SHARED_FRAME - 4 : SHARED_FRAME + 4; /* payload 8 or 16 bytes */
        memmove(frame + n - 4, frame + SHARED_FRAME - 4, 4);
        put_le(frame + 8, n - 20, 8);
        put_le(frame + n - 4, test_crc32(frame, n - 4), 4);
        CHECK(kvc_layer_deserialize(frame, n, &out) == (cut ? KVC_E_SNAPSHOT_TRUNCATED : KVC_E_SNAPSHOT_CORRUPT));
        CHECK(out == NULL);
        CHECK_OK(kvc_layer_serialize(shared, frame, SHARED_FRAME));
    }
    kvc_layer_free(shared);
    free(bytes);
    kvc_model_free(model);
    test_data_free(&data);
}

TEST(a_clone_should_be_copy_on_write_and_its_shared_layers_read_its_own_owners) {
    test_data data = test_data_make(17, LEN, H, D, 1);
    kvc_model *model = model_with(&data, 100, 1), *reference = model_with(&data, 100, 1), *fork = NULL;
    CHECK(model && reference);
    CHECK_OK(kvc_model_clone(model, &fork));
    CHECK(test_models_equal(fork, model));
    CHECK(kvc_model_shared_bytes(fork) > 0 && kvc_model_shared_bytes(model) > 0);
    for (size_t i = OWNERS; i < LAYERS; i++) {
        const kvc_layer *layer = kvc_model_layer(fork, i);
        CHECK(layer != kvc_model_layer(model, i) && kvc_layer_owner(layer) == shared_owner[i]);
        CHECK(kvc_model_layer(fork, kvc_layer_owner(layer)) != kvc_model_layer(model, shared_owner[i]));
    }
    /* The fork goes on; the original stays as a model that never forked. */
    CHECK_OK(append_to_owners(fork, &data, 100, 50));
    CHECK(test_models_equal(model, reference));
    kvc_model *grown = model_with(&data, 150, 1);
    CHECK(grown && test_models_equal(fork, grown));
    kvc_model_free(fork);
    CHECK(test_models_equal(model, reference));
    kvc_model_free(grown);
    kvc_model_free(reference);
    kvc_model_free(model);
    test_data_free(&data);
}

/* Prefix caches take full layers (and states): a q8 and an f32 full layer
 * holding positions [0, len) of data, then a layer shared from each, in the
 * order of `owners`; NULL if a call failed. */
static kvc_model *full_model_with(const test_data *data, size_t len, const size_t owners[2]) {
    kvc_layer *layers[4] = {0};
    kvc_status status = kvc_layer_create(H, D, KVC_MODE_Q8, &layers[0]);
    if (status == KVC_OK) status = kvc_layer_create(H, D, KVC_MODE_F32, &layers[1]);
    for (size_t i = 0; i < 2 && status == KVC_OK; i++) status = kvc_layer_create_shared(owners[i], &layers[2 + i]);
    for (size_t i = 0; i < 2 && status == KVC_OK; i++) status = test_data_append(layers[i], data, 0, len);
    kvc_model *model = NULL;
    if (status == KVC_OK) status = kvc_model_create(layers, 4, &model);
    if (status != KVC_OK) {
        for (size_t i = 0; i < 4; i++) kvc_layer_free(layers[i]);
    }
    return model;
}

TEST(a_prefix_cache_should_hold_and_match_models_with_shared_layers) {
    enum { PROMPT = 120, MATCHED = 80 };
    test_data data = test_data_make(18, PROMPT, H, D, 1);
    kvc_model *model = full_model_with(&data, PROMPT, (const size_t[]){0, 1}), *match = NULL;
    CHECK(model);
    uint32_t tokens[PROMPT];
    for (size_t i = 0; i < PROMPT; i++) tokens[i] = (uint32_t)(i * 3 + 1);
    kvc_prefix_cache *cache = NULL;
    CHECK_OK(kvc_prefix_cache_create(SIZE_MAX, &cache));
    int kept = 0;
    CHECK_OK(kvc_prefix_cache_add(cache, tokens, PROMPT, model, &kept));
    CHECK(kept && kvc_prefix_cache_bytes(cache) == kvc_model_memory_bytes(model));
    /* A conversation that shares MATCHED tokens gets a fork truncated to them. */
    uint32_t other[PROMPT];
    memcpy(other, tokens, sizeof other);
    other[MATCHED] = 7;
    size_t length = 0;
    CHECK_OK(kvc_prefix_cache_match(cache, other, PROMPT, &length, &match));
    CHECK(length == MATCHED && match && kvc_model_seq_len(match) == MATCHED);
    for (size_t i = 0; i < 2; i++) {
        kvc_layer *plain = test_layer_with(&data, MATCHED, kvc_layer_mode(kvc_model_layer(model, i)));
        CHECK(plain && test_layers_equal(kvc_model_layer(match, i), plain));
        kvc_layer_free(plain);
    }
    for (size_t i = 2; i < 4; i++) CHECK(kvc_layer_owner(kvc_model_layer(match, i)) == i - 2);
    /* Entries must agree on the shared layers too. */
    kvc_model *unlike = full_model_with(&data, PROMPT, (const size_t[]){1, 0});
    CHECK(unlike);
    CHECK_STATUS(kvc_prefix_cache_add(cache, other, PROMPT, unlike, NULL), KVC_E_PREFIX);
    CHECK(kvc_prefix_cache_size(cache) == 1);
    kvc_model_free(unlike);
    kvc_model_free(match);
    kvc_prefix_cache_free(cache);
    kvc_model_free(model);
    test_data_free(&data);
}

/* ---- out of memory ---- */

typedef struct shared_ctx {
    kvc_layer *out;
} shared_ctx;

static kvc_status op_create_shared(void *ctx) {
    shared_ctx *c = ctx;
    c->out = (kvc_layer *)c;
    const kvc_status status = kvc_layer_create_shared(1, &c->out);
    return test_out_rule(status, c->out);
}

typedef struct model_ctx {
    const test_data *data;
    const kvc_model *source;
    kvc_model *out;
} model_ctx;

/* model_with, whose layers are made and filled under the faults too. */
static kvc_status op_model_create(void *ctx) {
    model_ctx *c = ctx;
    c->out = model_with(c->data, 70, 1);
    return c->out ? KVC_OK : KVC_E_NOMEM;
}

static kvc_status op_model_clone(void *ctx) {
    model_ctx *c = ctx;
    c->out = (kvc_model *)c;
    const kvc_status status = kvc_model_clone(c->source, &c->out);
    return test_out_rule(status, c->out);
}

TEST(create_and_clone_should_fail_cleanly_on_allocation_failure) {
    test_data data = test_data_make(19, 70, H, D, 1);
    kvc_model *model = model_with(&data, 70, 1);
    CHECK(model);
    CHECK_OK(test_fault_install());
    for (int persistent = 0; persistent < 2; persistent++) {
        shared_ctx s = {NULL};
        CHECK(test_run_with_faults(op_create_shared, &s, NULL, persistent, TEST_KEEPS_NONE) >= 1);
        CHECK(s.out && kvc_layer_owner(s.out) == 1);
        kvc_layer_free(s.out);
        model_ctx created = {&data, NULL, NULL};
        CHECK(test_run_with_faults(op_model_create, &created, NULL, persistent, TEST_KEEPS_NONE) >= LAYERS);
        CHECK(created.out && test_models_equal(created.out, model));
        kvc_model_free(created.out);
        const long live = test_fault_live();
        model_ctx cloned = {&data, model, NULL};
        CHECK(test_run_with_faults_on_model(op_model_clone, &cloned, model, persistent, TEST_KEEPS_NONE) >= LAYERS);
        CHECK(cloned.out && test_models_equal(cloned.out, model));
        kvc_model_free(cloned.out);
        CHECK(test_fault_live() == live);
    }
    CHECK(test_fault_remove() == 0);
    kvc_model_free(model);
    test_data_free(&data);
}

RUN_TESTS(CASE(create_shared_should_make_a_layer_that_holds_nothing_and_names_its_owner),
          CASE(calls_on_rows_should_refuse_a_shared_layer_and_change_nothing),
          CASE(model_create_should_refuse_a_shared_layer_without_an_earlier_layer_of_rows),
          CASE(a_model_with_shared_layers_should_count_each_owner_once),
          CASE(accept_should_leave_the_owners_as_plain_appends_and_the_shared_layers_intact),
          CASE(truncate_evict_and_clear_should_reach_the_owners_and_pass_the_shared_layers_by),
          CASE(hold_and_give_back_should_take_the_owners_back_and_pass_the_shared_layers_by),
          CASE(a_snapshot_should_carry_the_shared_layers_and_re_serialize_byte_identical),
          CASE(a_snapshot_naming_a_bad_owner_should_be_refused),
          CASE(a_clone_should_be_copy_on_write_and_its_shared_layers_read_its_own_owners),
          CASE(a_prefix_cache_should_hold_and_match_models_with_shared_layers),
          CASE(create_and_clone_should_fail_cleanly_on_allocation_failure))
