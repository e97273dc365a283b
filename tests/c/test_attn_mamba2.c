/*
 * test_attn_mamba2.c -- a layer that holds both (KVC_KIND_ATTN_MAMBA2,
 * Falcon-H1's blocks): full attention's rows and a Mamba-2 state.
 *
 * Its definition is its two parts: a full layer given the same appends and
 * a Mamba-2 layer given the same steps, bit for bit (rows, attention,
 * state, byte counts).  Then what it promises as one layer: a verify's
 * accept(j) is j plain positions of each, a reject changes nothing;
 * truncate_last takes back exactly the state's last call and the rows of
 * it, refusing any other count unchanged; forks, snapshots (and every
 * damaged or cut snapshot refused), a model's alignment, hold and give
 * back, a prefix entry, thread counts and running out of memory.
 */
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "core/internal.h"

/* Rows: H kv heads of D; the state: HV heads of DV reading HK groups of B
 * and C of DK, a convolution of TAPS taps over CH channels. */
#define H 2
#define D 8
#define HK 2
#define HV 4
#define DK 8
#define DV 6
#define TAPS 4
#define CH (HV * DV + 2 * HK * DK)
#define MAX_T 96 /* positions of the inputs: past the q8 window */

typedef struct inputs {
    float k[MAX_T * H * D], v[MAX_T * H * D];
    float x[MAX_T * CH], w[CH * TAPS], bias[CH], dt[MAX_T * HV], dt_bias[HV], a[HV], d[HV];
} inputs;

static inputs *make_inputs(uint64_t seed) {
    inputs *in = test_alloc(sizeof *in);
    test_rng rng = test_rng_new(seed);
    test_fill_normal(&rng, in->k, MAX_T * H * D);
    test_fill_normal(&rng, in->v, MAX_T * H * D);
    test_fill_normal(&rng, in->x, MAX_T * CH);
    test_fill_normal(&rng, in->w, CH * TAPS);
    test_fill_normal(&rng, in->bias, CH);
    test_fill_normal(&rng, in->dt, MAX_T * HV);
    for (size_t h = 0; h < HV; h++) {
        in->dt_bias[h] = test_rng_unit(&rng) - 0.5f;
        in->a[h] = -expf(2.0f * test_rng_unit(&rng) - 1.0f);
        in->d[h] = test_rng_unit(&rng);
    }
    return in;
}

static kvc_layer *new_both(kvc_mode mode) {
    kvc_layer *layer = NULL;
    (void)kvc_layer_create_attn_mamba2(H, D, mode, HV, DV, HK, DK, TAPS, &layer);
    return layer;
}

/* Positions [from, from + T) into the rows (any layer of rows). */
static kvc_status rows_of(kvc_layer *layer, const inputs *in, size_t from, size_t T) {
    return kvc_layer_append_n(layer, T, in->k + from * H * D, in->v + from * H * D, NULL);
}

/* Tokens [from, from + T) through the state (a Mamba-2 layer or one of both). */
static kvc_status steps_of(kvc_layer *layer, const inputs *in, size_t from, size_t T, float *out) {
    return kvc_layer_mamba2_n(layer, T, in->x + from * CH, in->w, in->bias, in->dt + from * HV, in->dt_bias, in->a,
                              in->d, out);
}

/* A runner's step of T tokens: the rows, then the state. */
static kvc_status both_of(kvc_layer *layer, const inputs *in, size_t from, size_t T, float *out) {
    kvc_status status = rows_of(layer, in, from, T);
    return status == KVC_OK ? steps_of(layer, in, from, T, out) : status;
}

/* A layer of both at `len` positions, taken in calls of 1, 2, 3, ... */
static kvc_layer *both_at(kvc_mode mode, const inputs *in, size_t len) {
    if (len > MAX_T) return NULL;
    kvc_layer *layer = new_both(mode);
    float out[MAX_T * HV * DV];
    for (size_t at = 0, T = 1; at < len; at += T, T++) {
        if (T > len - at) T = len - at;
        if (both_of(layer, in, at, T, out) != KVC_OK) {
            kvc_layer_free(layer);
            return NULL;
        }
    }
    return layer;
}

/* 1 if `both` holds what the full layer `rows` and the Mamba-2 layer `state` hold. */
static int same_as_parts(const kvc_layer *both, const kvc_layer *rows, const kvc_layer *state) {
    test_state *b = test_state_take(both), *r = test_state_take(rows), *s = test_state_take(state);
    /* The rows' view of both, as a full layer's: its kind and state set aside. */
    test_state rows_view = *b;
    rows_view.kind = r->kind;
    rows_view.memory_bytes = r->memory_bytes;
    rows_view.recurrent_len = 0;
    rows_view.steps = 0;
    int same = test_state_equal(&rows_view, r);
    same = same && b->memory_bytes == r->memory_bytes + s->memory_bytes;
    same = same && b->recurrent_len == s->recurrent_len && b->steps == s->steps &&
           memcmp(b->recurrent, s->recurrent, b->recurrent_len * sizeof(float)) == 0;
    test_state_free(b);
    test_state_free(r);
    test_state_free(s);
    return same;
}

static const kvc_mode MODES[] = {KVC_MODE_F32, KVC_MODE_Q8, KVC_MODE_Q4};
#define FOR_EACH_MODE(m) for (const kvc_mode *m = MODES; m < MODES + sizeof MODES / sizeof MODES[0]; m++)

TEST(a_layer_of_both_should_be_its_full_layer_and_its_mamba2_layer_bit_for_bit) {
    inputs *in = make_inputs(1);
    FOR_EACH_MODE(mode) {
        kvc_layer *both = new_both(*mode), *rows = NULL, *state = NULL;
        CHECK_OK(kvc_layer_create(H, D, *mode, &rows));
        CHECK_OK(kvc_layer_create_mamba2(HV, DV, HK, DK, TAPS, &state));
        CHECK(kvc_layer_kind(both) == KVC_KIND_ATTN_MAMBA2);
        float got[MAX_T * HV * DV], want[MAX_T * HV * DV];
        for (size_t at = 0, T = 1; at + T <= MAX_T; at += T, T++) { /* calls of 1, 2, ... 6 tokens */
            CHECK_OK(both_of(both, in, at, T, got));
            CHECK_OK(rows_of(rows, in, at, T));
            CHECK_OK(steps_of(state, in, at, T, want));
            CHECK(memcmp(got, want, T * HV * DV * sizeof(float)) == 0);
            CHECK(same_as_parts(both, rows, state));
            CHECK(kvc_layer_steps(both) == at + T && kvc_layer_next_position(both) == at + T);
        }
        CHECK(kvc_layer_capacity_bytes(both) >= kvc_layer_memory_bytes(both));
        char text[512];
        CHECK(kvc_layer_describe(both, text, sizeof text) < sizeof text);
        CHECK(strstr(text, "kind=attn_mamba2") && strstr(text, "num_kv_heads=2") && strstr(text, "value_heads=4"));
        /* Calls of the other kinds are refused. */
        CHECK_REFUSED(both, kvc_layer_conv_n(both, 1, in->x, in->w, got), KVC_E_KIND);
        CHECK_REFUSED(both, kvc_layer_delta_n(both, 1, in->x, in->w, in->a, in->d, 1e-6f, got), KVC_E_KIND);
        CHECK_REFUSED(both, kvc_layer_evict(both, 4, 1, 1), KVC_E_KIND);
        CHECK_REFUSED(both, kvc_layer_set_max_rows(both, 8, 1, 1), KVC_E_KIND);
        /* clear: both parts. */
        kvc_layer_clear(both);
        CHECK(kvc_layer_seq_len(both) == 0 && kvc_layer_steps(both) == 0);
        kvc_layer *fresh = new_both(*mode);
        CHECK(test_layers_equal(both, fresh));
        kvc_layer_free(fresh);
        kvc_layer_free(both);
        kvc_layer_free(rows);
        kvc_layer_free(state);
    }
    free(in);
}

TEST(create_should_refuse_either_geometry_and_make_nothing) {
    kvc_layer *layer = (kvc_layer *)1;
    CHECK_STATUS(kvc_layer_create_attn_mamba2(0, D, KVC_MODE_F32, HV, DV, HK, DK, TAPS, &layer), KVC_E_NUM_KV_HEADS);
    CHECK(layer == NULL);
    CHECK_STATUS(kvc_layer_create_attn_mamba2(H, 0, KVC_MODE_F32, HV, DV, HK, DK, TAPS, &layer), KVC_E_HEAD_DIM);
    CHECK_STATUS(kvc_layer_create_attn_mamba2(H, D, KVC_MODE_COUNT, HV, DV, HK, DK, TAPS, &layer), KVC_E_MODE);
    CHECK_STATUS(kvc_layer_create_attn_mamba2(H, D, KVC_MODE_F32, HV, DV, 3, DK, TAPS, &layer), KVC_E_NUM_HEADS);
    CHECK_STATUS(kvc_layer_create_attn_mamba2(H, D, KVC_MODE_F32, HV, DV, HK, 0, TAPS, &layer), KVC_E_NUM_FEATURES);
    CHECK_STATUS(kvc_layer_create_attn_mamba2(H, D, KVC_MODE_F32, HV, 0, HK, DK, TAPS, &layer), KVC_E_VALUE_DIM);
    CHECK_STATUS(kvc_layer_create_attn_mamba2(H, D, KVC_MODE_F32, HV, DV, HK, DK, 1, &layer), KVC_E_CONV);
    CHECK(layer == NULL);
    CHECK_STATUS(kvc_layer_create_attn_mamba2(H, D, KVC_MODE_F32, HV, DV, HK, DK, TAPS, NULL), KVC_E_NULL_POINTER);
    kvc_memory_usage usage;
    kvc_memory_stats(&usage);
    CHECK(usage.layers == 0); /* nothing left behind */
}

TEST(accept_j_of_k_drafts_should_be_j_plain_positions_of_both_and_reject_should_change_nothing) {
    inputs *in = make_inputs(2);
    const size_t prefix = 5;
    FOR_EACH_MODE(mode) {
        for (size_t k = 1; k <= 8; k++) {
            for (size_t j = 0; j <= k; j++) {
                kvc_layer *plain = both_at(*mode, in, prefix + j), *spec = both_at(*mode, in, prefix);
                test_state *before = test_state_take(spec);
                float drafts[MAX_T * HV * DV], want[MAX_T * HV * DV];
                CHECK_OK(kvc_layer_begin_verify(spec));
                CHECK_OK(both_of(spec, in, prefix, k, drafts));
                CHECK(kvc_layer_draft_len(spec) == k);
                kvc_layer *check = both_at(*mode, in, prefix);
                CHECK_OK(steps_of(check, in, prefix, k, want)); /* a draft's output is plain decoding's */
                CHECK(memcmp(drafts, want, k * HV * DV * sizeof(float)) == 0);
                kvc_layer_free(check);
                CHECK_OK(kvc_layer_accept(spec, j));
                CHECK(test_layers_equal(spec, plain));
                if (j == 0) CHECK(test_state_matches(spec, before));
                /* And it goes on as plain decoding does. */
                float a[HV * DV], b[HV * DV];
                CHECK_OK(both_of(plain, in, prefix + j, 1, a));
                CHECK_OK(both_of(spec, in, prefix + j, 1, b));
                CHECK(memcmp(a, b, sizeof a) == 0);
                CHECK(test_layers_equal(spec, plain));
                test_state_free(before);
                kvc_layer_free(plain);
                kvc_layer_free(spec);
            }
        }
    }
    /* Drafts the two parts took differently: the fewer count, and accept keeps j of each. */
    kvc_layer *spec = both_at(KVC_MODE_F32, in, prefix), *plain = both_at(KVC_MODE_F32, in, prefix + 2);
    float out[MAX_T * HV * DV];
    CHECK_OK(kvc_layer_begin_verify(spec));
    CHECK_OK(rows_of(spec, in, prefix, 4));
    CHECK_OK(steps_of(spec, in, prefix, 3, out));
    CHECK(kvc_layer_draft_len(spec) == 3);
    CHECK_REFUSED(spec, kvc_layer_accept(spec, 4), KVC_E_ACCEPT);
    CHECK_OK(kvc_layer_accept(spec, 2));
    CHECK(test_layers_equal(spec, plain));
    kvc_layer_free(spec);
    kvc_layer_free(plain);
    free(in);
}

TEST(truncate_last_should_take_back_the_last_call_of_both_and_refuse_any_other_count_unchanged) {
    inputs *in = make_inputs(3);
    FOR_EACH_MODE(mode) {
        kvc_layer *layer = both_at(*mode, in, 7), *before = both_at(*mode, in, 7);
        float out[MAX_T * HV * DV];
        CHECK_OK(both_of(layer, in, 7, 3, out));
        CHECK(kvc_layer_exact_rollback(layer) == 3);
        CHECK_REFUSED(layer, kvc_layer_truncate_last(layer, 2), KVC_E_KIND);
        CHECK_REFUSED(layer, kvc_layer_truncate_last(layer, 4), KVC_E_KIND);
        CHECK_OK(kvc_layer_truncate_last(layer, 0));
        CHECK_OK(kvc_layer_truncate_last(layer, 3));
        CHECK(test_layers_equal(layer, before));
        /* Once: the call before is not held. */
        CHECK_REFUSED(layer, kvc_layer_truncate_last(layer, 4), KVC_E_KIND);
        CHECK(kvc_layer_exact_rollback(layer) == 0);
        /* During a verify: accept or reject. */
        CHECK_OK(kvc_layer_begin_verify(layer));
        CHECK_REFUSED(layer, kvc_layer_truncate_last(layer, 0), KVC_E_VERIFYING);
        CHECK_OK(kvc_layer_accept(layer, 0));
        kvc_layer_free(layer);
        kvc_layer_free(before);
    }
    free(in);
}

TEST(a_fork_should_share_the_rows_copy_the_state_and_go_its_own_way) {
    inputs *in = make_inputs(4);
    FOR_EACH_MODE(mode) {
        kvc_layer *layer = both_at(*mode, in, 9), *fork = NULL, *same = both_at(*mode, in, 9);
        CHECK_OK(kvc_layer_clone(layer, &fork));
        CHECK(test_layers_equal(fork, layer));
        CHECK(kvc_layer_shared_bytes(fork) > 0);
        float out[MAX_T * HV * DV];
        CHECK_OK(both_of(fork, in, 12, 4, out)); /* other tokens */
        CHECK(test_layers_equal(layer, same));
        CHECK_OK(both_of(layer, in, 9, 2, out));
        CHECK_OK(both_of(same, in, 9, 2, out));
        CHECK(test_layers_equal(layer, same));
        CHECK_OK(kvc_layer_begin_verify(layer));
        CHECK_STATUS(kvc_layer_clone(layer, &fork), KVC_E_VERIFYING);
        kvc_layer_free(fork);
        kvc_layer_free(layer);
        kvc_layer_free(same);
    }
    free(in);
}

TEST(a_snapshot_should_restore_both_bit_for_bit_and_refuse_every_damaged_or_cut_byte) {
    inputs *in = make_inputs(5);
    FOR_EACH_MODE(mode) {
        kvc_layer *layer = both_at(*mode, in, KVC_Q8_WINDOW + 6); /* past the window: a frozen field, q rows */
        const size_t len = kvc_layer_snapshot_size(layer);
        uint8_t *snap = test_alloc(len);
        CHECK_OK(kvc_layer_serialize(layer, snap, len));
        kvc_layer *back = NULL;
        CHECK_OK(kvc_layer_deserialize(snap, len, &back));
        CHECK(test_layers_equal(back, layer));
        float a[HV * DV], b[HV * DV];
        CHECK_OK(both_of(layer, in, 0, 1, a));
        CHECK_OK(both_of(back, in, 0, 1, b));
        CHECK(memcmp(a, b, sizeof a) == 0 && test_layers_equal(back, layer));
        for (size_t i = 0; i < len; i++) {
            snap[i] ^= 0x10;
            kvc_layer *bad = NULL;
            CHECK(kvc_layer_deserialize(snap, len, &bad) != KVC_OK && bad == NULL);
            snap[i] ^= 0x10;
        }
        for (size_t cut = 0; cut < len; cut++) {
            kvc_layer *bad = NULL;
            CHECK(kvc_layer_deserialize(snap, cut, &bad) != KVC_OK && bad == NULL);
        }
        kvc_layer_free(back);
        kvc_layer_free(layer);
        free(snap);
    }
    free(in);
}

/* The payload's fields after the frame (magic 4, version 4, length 8): a
 * layer of both whose rows carry an eviction policy is refused, checksum
 * and all right. */
TEST(a_snapshot_of_both_with_an_eviction_policy_should_be_refused) {
    inputs *in = make_inputs(6);
    kvc_layer *full = NULL;
    CHECK_OK(kvc_layer_create(H, D, KVC_MODE_F32, &full));
    CHECK_OK(kvc_layer_set_max_rows(full, 64, 1, 1));
    CHECK_OK(rows_of(full, in, 0, 3));
    kvc_layer *state = NULL;
    CHECK_OK(kvc_layer_create_mamba2(HV, DV, HK, DK, TAPS, &state));
    float out[MAX_T * HV * DV];
    CHECK_OK(steps_of(state, in, 0, 3, out));
    /* A layer of both: the full layer's payload (its kind made 8), then the Mamba-2 layer's without its kind. */
    const size_t full_len = kvc_layer_snapshot_size(full), state_len = kvc_layer_snapshot_size(state);
    uint8_t *a = test_alloc(full_len), *b = test_alloc(state_len);
    CHECK_OK(kvc_layer_serialize(full, a, full_len));
    CHECK_OK(kvc_layer_serialize(state, b, state_len));
    const size_t head = 16, tail = 4;
    const size_t payload = (full_len - head - tail) + (state_len - head - tail - 4);
    const size_t len = head + payload + tail;
    uint8_t *snap = test_alloc(len);
    memcpy(snap, a, head);
    for (int i = 0; i < 8; i++) snap[8 + i] = (uint8_t)((uint64_t)payload >> (8 * i));
    memcpy(snap + head, a + head, full_len - head - tail);
    snap[head] = KVC_KIND_ATTN_MAMBA2;
    memcpy(snap + head + (full_len - head - tail), b + head + 4, state_len - head - tail - 4);
    const uint32_t crc = test_crc32(snap, len - tail);
    for (int i = 0; i < 4; i++) snap[len - tail + i] = (uint8_t)(crc >> (8 * i));
    kvc_layer *bad = NULL;
    CHECK_STATUS(kvc_layer_deserialize(snap, len, &bad), KVC_E_SNAPSHOT_CORRUPT);
    CHECK(bad == NULL);
    /* The same bytes without the policy load, and are the layer of both. */
    CHECK_OK(kvc_layer_set_max_rows(full, 0, 0, 0));
    CHECK_OK(kvc_layer_serialize(full, a, full_len));
    memcpy(snap + head, a + head, full_len - head - tail);
    snap[head] = KVC_KIND_ATTN_MAMBA2;
    const uint32_t crc2 = test_crc32(snap, len - tail);
    for (int i = 0; i < 4; i++) snap[len - tail + i] = (uint8_t)(crc2 >> (8 * i));
    CHECK_OK(kvc_layer_deserialize(snap, len, &bad));
    kvc_layer *want = new_both(KVC_MODE_F32);
    CHECK_OK(both_of(want, in, 0, 3, out));
    CHECK(test_layers_equal(bad, want));
    kvc_layer_free(want);
    kvc_layer_free(bad);
    kvc_layer_free(full);
    kvc_layer_free(state);
    free(a);
    free(b);
    free(snap);
    free(in);
}

TEST(a_model_should_be_aligned_only_when_rows_and_state_agree_and_give_both_back) {
    inputs *in = make_inputs(7);
    kvc_layer *layers[2] = {both_at(KVC_MODE_Q8, in, 6), NULL};
    CHECK_OK(kvc_layer_create(H, D, KVC_MODE_F32, &layers[1]));
    CHECK_OK(rows_of(layers[1], in, 0, 6));
    kvc_model *model = NULL;
    CHECK_OK(kvc_model_create(layers, 2, &model));
    CHECK(kvc_model_seq_len(model) == 6);
    /* Rows taken, the state not yet: not aligned. */
    CHECK_OK(rows_of(layers[0], in, 6, 2));
    CHECK_OK(rows_of(layers[1], in, 6, 2));
    CHECK(kvc_model_seq_len(model) == 6 && !kvc_model_aligned(model));
    uint8_t small[8];
    CHECK_STATUS(kvc_model_serialize(model, small, sizeof small), KVC_E_LAYERS);
    float out[MAX_T * HV * DV];
    CHECK_OK(steps_of(layers[0], in, 6, 2, out));
    CHECK(kvc_model_seq_len(model) == 8 && kvc_model_aligned(model));
    /* The model's snapshot and truncation. */
    const size_t len = kvc_model_snapshot_size(model);
    uint8_t *snap = test_alloc(len);
    CHECK_OK(kvc_model_serialize(model, snap, len));
    kvc_model *back = NULL;
    CHECK_OK(kvc_model_deserialize(snap, len, &back));
    CHECK(test_models_equal(back, model));
    kvc_model *fork = NULL;
    CHECK_OK(kvc_model_clone(model, &fork));
    CHECK_MODEL_REFUSED(model, kvc_model_truncate_last(model, 1), KVC_E_KIND);
    CHECK_OK(kvc_model_truncate_last(model, 2));
    CHECK(kvc_model_seq_len(model) == 6 && kvc_model_aligned(model));
    /* hold / give back: a long forward of two calls taken back whole. */
    kvc_layer **held = NULL;
    CHECK_OK(kvc_model_hold(back, &held));
    CHECK(held[0] != NULL && held[1] == NULL);
    for (size_t at = 8; at < 12; at += 2) {
        CHECK_OK(both_of(kvc_model_layer(back, 0), in, at, 2, out));
        CHECK_OK(rows_of(kvc_model_layer(back, 1), in, at, 2));
    }
    kvc_model_give_back(back, held, 4);
    kvc_model_release(back, held);
    CHECK(test_models_equal(back, fork));
    kvc_model_free(fork);
    kvc_model_free(back);
    kvc_model_free(model);
    free(snap);
    free(in);
}

TEST(a_prefix_entry_should_hold_a_layer_of_both_and_match_it_whole) {
    inputs *in = make_inputs(8);
    const size_t n = KVC_Q8_WINDOW + 4;
    kvc_layer *layer = both_at(KVC_MODE_F32, in, n);
    kvc_model *model = NULL;
    CHECK_OK(kvc_model_create(&layer, 1, &model));
    uint32_t tokens[KVC_Q8_WINDOW + 8];
    for (size_t i = 0; i < sizeof tokens / sizeof tokens[0]; i++) tokens[i] = (uint32_t)i;
    kvc_prefix_cache *cache = NULL;
    CHECK_OK(kvc_prefix_cache_create(SIZE_MAX, &cache));
    int kept = 0;
    CHECK_OK(kvc_prefix_cache_add(cache, tokens, n, model, &kept));
    CHECK(kept);
    size_t length = 0;
    kvc_model *match = NULL;
    CHECK_OK(kvc_prefix_cache_match(cache, tokens, n + 3, &length, &match));
    CHECK(length == n && match && test_models_equal(match, model));
    kvc_model_free(match);
    CHECK_OK(kvc_prefix_cache_match(cache, tokens, n - 1, &length, &match)); /* part of it: no match */
    CHECK(length == 0 && match == NULL);
    kvc_prefix_cache_free(cache);
    kvc_model_free(model);
    free(in);
}

TEST(a_layer_of_both_should_give_the_same_bits_on_any_number_of_threads) {
    inputs *in = make_inputs(9);
    CHECK_OK(kvc_set_threads(1));
    kvc_layer *want = both_at(KVC_MODE_Q4, in, MAX_T);
    const size_t min_work = kvc_pool_set_min_work(0); /* every call on the pool */
    for (size_t threads = 2; threads <= 4; threads++) {
        const kvc_status status = kvc_set_threads(threads);
        if (status == KVC_E_THREADS) {
            test_skip("kvc_set_threads: this build's threads are started by the JS loader (wasm)");
            break;
        }
        CHECK_OK(status);
        kvc_layer *got = both_at(KVC_MODE_Q4, in, MAX_T);
        CHECK(test_layers_equal(got, want));
        kvc_layer_free(got);
    }
    kvc_pool_set_min_work(min_work);
    CHECK_OK(kvc_set_threads(1));
    kvc_layer_free(want);
    free(in);
}

/* ---- running out of memory: every allocation of each call fails it in turn ---- */

typedef struct fallible {
    kvc_layer *layer;
    const inputs *in;
    size_t from, T;
    kvc_layer *out;
} fallible;

static kvc_status append_op(void *ctx) {
    fallible *f = ctx;
    return rows_of(f->layer, f->in, f->from, f->T);
}

static kvc_status step_op(void *ctx) {
    fallible *f = ctx;
    float out[MAX_T * HV * DV];
    return steps_of(f->layer, f->in, f->from, f->T, out);
}

static kvc_status clone_op(void *ctx) {
    fallible *f = ctx;
    return test_out_rule(kvc_layer_clone(f->layer, &f->out), f->out);
}

static kvc_status deserialize_op(void *ctx) {
    fallible *f = ctx;
    uint8_t *snap = test_alloc(kvc_layer_snapshot_size(f->layer));
    kvc_status status = kvc_layer_serialize(f->layer, snap, kvc_layer_snapshot_size(f->layer));
    if (status == KVC_OK) status = test_out_rule(kvc_layer_deserialize(snap, kvc_layer_snapshot_size(f->layer), &f->out), f->out);
    free(snap);
    return status;
}

TEST(out_of_memory_should_fail_each_call_and_keep_both) {
    inputs *in = make_inputs(10);
    CHECK_OK(test_fault_install());
    FOR_EACH_MODE(mode) {
        for (int verify = 0; verify < 2; verify++) {
            kvc_layer *layer = both_at(*mode, in, KVC_Q8_WINDOW + 3);
            if (verify) CHECK_OK(kvc_layer_begin_verify(layer));
            fallible f = {layer, in, KVC_Q8_WINDOW + 3, 5, NULL};
            CHECK(test_run_with_faults(append_op, &f, layer, 0, TEST_KEEPS_OWNED) >= 0);
            CHECK(test_run_with_faults(step_op, &f, layer, 0, TEST_KEEPS_OWNED) > 0);
            if (verify) {
                CHECK(kvc_layer_draft_len(layer) == 5);
                CHECK_OK(kvc_layer_accept(layer, 3));
            }
            CHECK(kvc_layer_positions_taken(layer) == KVC_Q8_WINDOW + 3 + (verify ? 3 : 5));
            CHECK(test_run_with_faults(clone_op, &f, layer, 0, TEST_KEEPS_NONE) > 0);
            kvc_layer_free(f.out);
            f.out = NULL;
            CHECK(test_run_with_faults(deserialize_op, &f, layer, 0, TEST_KEEPS_NONE) > 0);
            kvc_layer_free(f.out);
            kvc_layer_free(layer);
        }
    }
    CHECK(test_fault_remove() == 0);
    free(in);
}

RUN_TESTS(CASE(a_layer_of_both_should_be_its_full_layer_and_its_mamba2_layer_bit_for_bit),
          CASE(create_should_refuse_either_geometry_and_make_nothing),
          CASE(accept_j_of_k_drafts_should_be_j_plain_positions_of_both_and_reject_should_change_nothing),
          CASE(truncate_last_should_take_back_the_last_call_of_both_and_refuse_any_other_count_unchanged),
          CASE(a_fork_should_share_the_rows_copy_the_state_and_go_its_own_way),
          CASE(a_snapshot_should_restore_both_bit_for_bit_and_refuse_every_damaged_or_cut_byte),
          CASE(a_snapshot_of_both_with_an_eviction_policy_should_be_refused),
          CASE(a_model_should_be_aligned_only_when_rows_and_state_agree_and_give_both_back),
          CASE(a_prefix_entry_should_hold_a_layer_of_both_and_match_it_whole),
          CASE(a_layer_of_both_should_give_the_same_bits_on_any_number_of_threads),
          CASE(out_of_memory_should_fail_each_call_and_keep_both))
