/*
 * test_snapshot.c -- a layer or a model as bytes and back.  Round trips in
 * every mode and state (empty, below the window, at 64 and 65 positions, the
 * field frozen, thawed by a truncation, alive masks with dead heads, imp,
 * after an eviction, with max_rows; linear layers; hybrid models): the
 * restored cache is bit-identical, serializes to the same bytes and behaves
 * the same on what follows.  snapshot_size is what serialize needs.  What a
 * reader must refuse, each with its status: a foreign magic, another
 * version, a checksum mismatch, every truncation, and -- forged with a valid
 * CRC-32 -- counts, geometry and values that no cache holds; a sweep over
 * every byte of small snapshots (none accepted, none crashing); running out
 * of memory while reading.  A model read in pieces (kvc_model_reader) is
 * the model read whole, refuses what it refuses, and fails cleanly out of
 * memory; the CRC-32's interleaved blocks and joins are the bit-by-bit
 * CRC.  And the bytes of today's format, pinned.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/bytes.h"
#include "kernels/q4-pack.h"
#include "test.h"

#define W KVC_Q8_WINDOW
/* Frame: magic, version, payload length (16 bytes), then the CRC-32 after the payload. */
#define FRAME 20u
/* A full layer's fixed fields: kind, mode, H, d, L, next position, frozen,
 * reserved, max_rows, sinks, recent. */
#define FULL_HEADER 64u
/* A store's fixed fields: rows_len, qrows_len, has_field. */
#define STORE_HEADER 20u
/* A linear layer's fixed fields: kind, H, F, dv, phase_mass, steps. */
#define LINEAR_HEADER 32u

/* Offsets in a layer snapshot. */
enum { AT_VERSION = 4, AT_PAYLOAD_LEN = 8, AT_KIND = 16, AT_MODE = 20, AT_H = 24, AT_D = 28,
       AT_L = 32, AT_NEXT = 40, AT_FROZEN = 48, AT_RESIDUAL = 52, AT_MAX_ROWS = 56,
       AT_SINKS = 64, AT_RECENT = 72, AT_IMP = 80 };
/* ... of a linear one. */
enum { AT_LIN_H = 20, AT_LIN_F = 24, AT_LIN_DV = 28, AT_LIN_PHASE = 32, AT_LIN_STEPS = 40 };

/* ---- bytes ---- */

static uint32_t get32(const uint8_t *at) {
    return (uint32_t)at[0] | (uint32_t)at[1] << 8 | (uint32_t)at[2] << 16 | (uint32_t)at[3] << 24;
}

static uint64_t get64(const uint8_t *at) {
    return get32(at) | (uint64_t)get32(at + 4) << 32;
}

static void put32(uint8_t *at, uint32_t x) {
    for (int i = 0; i < 4; i++) at[i] = (uint8_t)(x >> (8 * i));
}

static void put64(uint8_t *at, uint64_t x) {
    put32(at, (uint32_t)x);
    put32(at + 4, (uint32_t)(x >> 32));
}

static void put_f32(uint8_t *at, float x) {
    uint32_t bits;
    memcpy(&bits, &x, 4);
    put32(at, bits);
}

/* Makes a changed snapshot of `len` bytes pass the frame checks again: the
 * payload length from len, and the CRC-32 of all before it. */
static void reframe(uint8_t *snap, size_t len) {
    put64(snap + AT_PAYLOAD_LEN, len - FRAME);
    put32(snap + len - 4, test_crc32(snap, len - 4));
}

static uint8_t *copy_bytes(const uint8_t *src, size_t len, size_t room) {
    uint8_t *copy = test_alloc(room > len ? room : len);
    memcpy(copy, src, len);
    return copy;
}

/* ---- taking and reading snapshots ---- */

/* A non-NULL pointer that deserialize must overwrite with NULL on error. */
static kvc_layer *const layer_sentinel = (kvc_layer *)&test_modes;
static kvc_model *const model_sentinel = (kvc_model *)&test_modes;

/* kvc_layer_serialize of `layer`, or (layer NULL) kvc_model_serialize of `model`. */
static kvc_status serialize(const kvc_layer *layer, const kvc_model *model, uint8_t *dst,
                            size_t dst_len) {
    return layer ? kvc_layer_serialize(layer, dst, dst_len)
                 : kvc_model_serialize(model, dst, dst_len);
}

/* The snapshot of a layer or (layer NULL) a model, checking that it takes
 * exactly snapshot_size bytes (one less is KVC_E_LENGTH and writes
 * nothing); NULL on failure. */
static uint8_t *take_snapshot(const kvc_layer *layer, const kvc_model *model, size_t *len) {
    const size_t size = layer ? kvc_layer_snapshot_size(layer) : kvc_model_snapshot_size(model);
    uint8_t *snap = test_alloc(size + 1);
    memset(snap, 0xA5, size + 1);
    kvc_status short_status = size ? serialize(layer, model, snap, size - 1) : KVC_E_LENGTH;
    int untouched = 1;
    for (size_t i = 0; i <= size; i++) untouched &= snap[i] == 0xA5;
    const kvc_status status = serialize(layer, model, snap, size);
    if (size == 0 || short_status != KVC_E_LENGTH || !untouched || status != KVC_OK ||
        snap[size] != 0xA5) {
        printf("  take_snapshot: size %zu, short %s, untouched %d, %s\n", size,
               kvc_status_name(short_status), untouched, kvc_status_name(status));
        free(snap);
        return NULL;
    }
    *len = size;
    return snap;
}

static uint8_t *layer_snapshot(const kvc_layer *layer, size_t *len) {
    return take_snapshot(layer, NULL, len);
}

static uint8_t *model_snapshot(const kvc_model *model, size_t *len) {
    return take_snapshot(NULL, model, len);
}

/* kvc_layer_deserialize, with *out NULL on every refusal checked: a refusal
 * that leaves anything else there becomes KVC_E_LENGTH (deserialize never
 * returns it). */
static kvc_status read_layer(const uint8_t *snap, size_t len, kvc_layer **out) {
    *out = layer_sentinel;
    const kvc_status status = kvc_layer_deserialize(snap, len, out);
    if (status != KVC_OK) return test_out_rule(status, *out);
    return *out ? KVC_OK : KVC_E_LENGTH;
}

static kvc_status read_model(const uint8_t *snap, size_t len, kvc_model **out) {
    *out = model_sentinel;
    const kvc_status status = kvc_model_deserialize(snap, len, out);
    if (status != KVC_OK) return test_out_rule(status, *out);
    return *out ? KVC_OK : KVC_E_LENGTH;
}

/* The model of snap read by a kvc_model_reader fed `piece` bytes at a time
 * (the last piece shorter), with read_model's rule for *out.  A refusal
 * that leaves anything else there, or a reader that asks for bytes past
 * the snapshot's end, becomes KVC_E_LENGTH. */
static kvc_status read_model_in_pieces(const uint8_t *snap, size_t len, size_t piece, kvc_model **out) {
    *out = model_sentinel;
    kvc_model_reader *reader = NULL;
    kvc_status status = kvc_model_reader_create(len, &reader);
    size_t at = 0;
    while (status == KVC_OK) {
        uint8_t *dst = NULL;
        size_t room = 0;
        status = kvc_model_reader_next(reader, &dst, &room);
        if (status != KVC_OK || room == 0) break;
        const size_t n = room < piece ? room : piece;
        if (n > len - at) {
            status = KVC_E_LENGTH;
            break;
        }
        memcpy(dst, snap + at, n);
        at += n;
        status = kvc_model_reader_wrote(reader, n);
    }
    if (status == KVC_OK) status = kvc_model_reader_finish(reader, out);
    else *out = NULL;
    kvc_model_reader_free(reader);
    if (status != KVC_OK) return test_out_rule(status, *out);
    if (at != len) return KVC_E_LENGTH;
    return *out ? KVC_OK : KVC_E_LENGTH;
}

/* Bytes a full layer's snapshot holds beyond its memory_bytes: the frame,
 * the fixed fields, and the fixed fields of 2 H stores, a q4 store's count
 * of window rows among them (docs/snapshot-format.md). */
static size_t full_overhead(size_t H, kvc_mode mode) {
    const size_t q4_stores = (kvc_mode_component(mode, 0) == KVC_COMPONENT_Q4) +
                             (kvc_mode_component(mode, 1) == KVC_COMPONENT_Q4);
    return FRAME + FULL_HEADER + 2 * H * STORE_HEADER + q4_stores * H * 8;
}

/* The round trip of a layer: a restored copy observably equal to it, whose
 * own snapshot is the same bytes, and a snapshot of memory_bytes plus the
 * fixed fields; NULL (after printing why) otherwise. */
static kvc_layer *round_trip(const kvc_layer *layer) {
    size_t len = 0, again_len = 0;
    uint8_t *snap = layer_snapshot(layer, &len), *again = NULL;
    kvc_layer *copy = NULL;
    int ok = snap && read_layer(snap, len, &copy) == KVC_OK && test_layers_equal(copy, layer);
    const size_t overhead = kvc_layer_kind(layer) == KVC_KIND_LINEAR
                                ? FRAME + LINEAR_HEADER
                                : full_overhead(kvc_layer_num_kv_heads(layer), kvc_layer_mode(layer));
    ok = ok && len == kvc_layer_memory_bytes(layer) + overhead;
    ok = ok && (again = layer_snapshot(copy, &again_len)) && again_len == len &&
         memcmp(again, snap, len) == 0;
    if (!ok) {
        printf("  round trip failed (%zu bytes)\n", len);
        kvc_layer_free(copy);
        copy = NULL;
    }
    free(snap);
    free(again);
    return copy;
}

/* 1 if a and b serialize to the same bytes. */
static int same_snapshots(const kvc_layer *a, const kvc_layer *b) {
    size_t la = 0, lb = 0;
    uint8_t *sa = layer_snapshot(a, &la), *sb = layer_snapshot(b, &lb);
    const int same = sa && sb && la == lb && memcmp(sa, sb, la) == 0;
    free(sa);
    free(sb);
    return same;
}

/* Does the same to two full layers and checks that they stay equal: appends
 * of data from their next position (one to five at a time), importance, a
 * truncation, an eviction, more appends; 1 if they did. */
static int same_future(kvc_layer *a, kvc_layer *b, const test_data *data, uint64_t seed) {
    test_rng rng = test_rng_new(seed);
    kvc_layer *both[2] = {a, b};
    static const size_t chunks[] = {1, 3, 5, 2, 4};
    int ok = 1;
    for (size_t c = 0; c < 5 && ok; c++) {
        const size_t at = kvc_layer_next_position(a);
        for (int i = 0; i < 2 && ok; i++)
            ok = test_data_append(both[i], data, at, chunks[c]) == KVC_OK;
        const size_t L = kvc_layer_seq_len(a); /* max_rows may have evicted */
        float *probs = test_alloc((L + 1) * sizeof(float));
        for (size_t s = 0; s < L; s++) probs[s] = test_rng_unit(&rng);
        for (int i = 0; i < 2 && ok; i++)
            ok = kvc_layer_accumulate_imp(both[i], probs, L) == KVC_OK;
        free(probs);
        ok = ok && test_layers_equal(a, b);
    }
    const size_t budget = kvc_layer_seq_len(a) / 2;
    /* A restored q4 layer keeps its window's f32 copies only: it rolls back
     * exactly what it appended since (kvc_layer_exact_rollback). */
    const size_t exact = kvc_layer_exact_rollback(b), cut = exact < 3 ? exact : 3;
    for (int i = 0; i < 2 && ok; i++) {
        ok = kvc_layer_truncate_last(both[i], cut) == KVC_OK &&
             kvc_layer_evict(both[i], budget, 1, 2) == KVC_OK &&
             test_data_append(both[i], data, kvc_layer_next_position(both[i]), 2) == KVC_OK;
    }
    ok = ok && test_layers_equal(a, b) && same_snapshots(a, b);
    if (!ok) printf("  the two layers went different ways\n");
    return ok;
}

/* ---- round trips of full layers ---- */

/* A state of a full layer to round-trip. */
typedef struct layer_state {
    const char *name;
    size_t len;       /* positions appended */
    size_t truncate;  /* then truncated by */
    int imp;          /* with importance */
    size_t budget;    /* then evicted to this budget (0: not), sinks 4, recent 8 */
    size_t max_rows;  /* appended under set_max_rows(max_rows, 2, 3), 5 at a time (0: not) */
} layer_state;

static const layer_state layer_states[] = {
    {"empty", 0, 0, 0, 0, 0},
    {"below the window", 30, 0, 1, 0, 0},
    {"64 positions", 64, 0, 0, 0, 0},
    {"65 positions: the field freezes", 65, 0, 1, 0, 0},
    {"frozen", 130, 0, 1, 0, 0},
    {"truncated back below the window: thawed", 130, 80, 1, 0, 0},
    {"truncated to 64", 130, 66, 0, 0, 0},
    {"evicted", 150, 0, 1, 40, 0},
    {"evicted below the window", 50, 0, 1, 12, 0},
    {"evicted then truncated", 150, 10, 1, 40, 0},
    {"under max_rows", 120, 0, 1, 0, 16},
};

#define NUM_LAYER_STATES (sizeof layer_states / sizeof layer_states[0])

/* A layer of data in `mode` in the given state; NULL if a call failed. */
static kvc_layer *layer_in_state(const test_data *data, kvc_mode mode, const layer_state *st,
                                 uint64_t seed) {
    test_rng rng = test_rng_new(seed);
    kvc_layer *layer = test_layer_with(data, st->max_rows ? 0 : st->len, mode);
    kvc_status status = layer ? KVC_OK : KVC_E_NOMEM;
    if (status == KVC_OK && st->max_rows) {
        status = kvc_layer_set_max_rows(layer, st->max_rows, 2, 3);
        for (size_t at = 0; at < st->len && status == KVC_OK; at += 5)
            status = test_data_append(layer, data, at, 5);
    }
    if (status == KVC_OK && st->imp) {
        const size_t L = kvc_layer_seq_len(layer);
        float *probs = test_alloc((L + 1) * sizeof(float));
        for (size_t s = 0; s < L; s++) probs[s] = test_rng_unit(&rng);
        status = kvc_layer_accumulate_imp(layer, probs, L);
        free(probs);
    }
    if (status == KVC_OK && st->budget) status = kvc_layer_evict(layer, st->budget, 4, 8);
    if (status == KVC_OK) status = kvc_layer_truncate_last(layer, st->truncate);
    if (status == KVC_OK) return layer;
    printf("  layer_in_state %s: %s\n", st->name, kvc_status_name(status));
    kvc_layer_free(layer);
    return NULL;
}

TEST(layer_round_trip_should_be_bit_identical_in_every_mode_and_state) {
    /* Nine heads: two bytes of alive map a slot, with bits to spare; masked
     * heads with gaps, one dead below the window, one never alive. */
    const size_t H = 9, d = 5;
    test_data data = test_data_make(2001, 200, H, d, 1);
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        for (size_t si = 0; si < NUM_LAYER_STATES; si++) {
            const layer_state *st = &layer_states[si];
            kvc_layer *layer = layer_in_state(&data, test_modes[mi], st, 2001 + si);
            CHECK(layer != NULL);
            kvc_layer *copy = round_trip(layer);
            if (!copy) printf("  mode %d, %s\n", (int)test_modes[mi], st->name);
            CHECK(copy != NULL);
            CHECK(kvc_layer_next_position(copy) == kvc_layer_next_position(layer));
            CHECK(same_future(layer, copy, &data, 2001 + si));
            kvc_layer_free(copy);
            kvc_layer_free(layer);
        }
    }
    test_data_free(&data);
}

TEST(layer_round_trip_should_keep_the_field_frozen_or_not) {
    const size_t H = 4, d = 8;
    test_data data = test_data_make(2002, 100, H, d, 1);
    static const size_t lengths[] = {63, 64, 65, 66, 100};
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        for (size_t li = 0; li < 5; li++) {
            kvc_layer *layer = test_layer_with(&data, lengths[li], test_modes[mi]);
            CHECK(layer != NULL);
            kvc_layer *copy = round_trip(layer);
            CHECK(copy != NULL);
            CHECK(kvc_layer_field_frozen(copy) ==
                  (test_modes[mi] != KVC_MODE_F32 && lengths[li] > W));
            /* Appending across the window from a restored layer: the same field. */
            CHECK_OK(test_data_append(copy, &data, lengths[li], 100 - lengths[li]));
            kvc_layer *plain = test_layer_with(&data, 100, test_modes[mi]);
            CHECK(plain != NULL && test_layers_equal(copy, plain));
            kvc_layer_free(plain);
            kvc_layer_free(copy);
            kvc_layer_free(layer);
        }
    }
    test_data_free(&data);
}

TEST(layer_round_trip_should_keep_max_rows_off_whatever_policy_came_with_zero) {
    test_data data = test_data_make(2003, 60, 2, 4, 1);
    kvc_layer *layer = test_layer_with(&data, 20, KVC_MODE_Q8);
    CHECK(layer != NULL);
    CHECK_OK(kvc_layer_set_max_rows(layer, 10, 2, 3));
    CHECK_OK(kvc_layer_set_max_rows(layer, 0, 2, 3));
    kvc_layer *copy = round_trip(layer);
    CHECK(copy != NULL);
    CHECK_OK(test_data_append(copy, &data, 20, 40));
    CHECK(kvc_layer_seq_len(copy) == 60);
    kvc_layer_free(copy);
    kvc_layer_free(layer);
    test_data_free(&data);
}

TEST(layer_snapshot_should_be_refused_during_a_verify) {
    test_data data = test_data_make(2004, 80, 3, 4, 1);
    kvc_layer *layer = test_layer_with(&data, 70, KVC_MODE_Q8);
    CHECK(layer != NULL);
    const size_t size = kvc_layer_snapshot_size(layer);
    uint8_t *snap = test_alloc(size + 64);
    CHECK_OK(kvc_layer_begin_verify(layer));
    CHECK_OK(test_data_append(layer, &data, 70, 2));
    CHECK(kvc_layer_snapshot_size(layer) == 0);
    CHECK_REFUSED(layer, kvc_layer_serialize(layer, snap, size + 64), KVC_E_VERIFYING);
    CHECK_OK(kvc_layer_accept(layer, 1));
    CHECK(kvc_layer_snapshot_size(layer) > size);
    free(snap);
    kvc_layer_free(layer);
    test_data_free(&data);
}

TEST(serialize_and_deserialize_should_refuse_null_pointers) {
    kvc_layer *layer, *out = layer_sentinel;
    CHECK_OK(kvc_layer_create(2, 4, KVC_MODE_F32, &layer));
    uint8_t snap[256];
    CHECK(kvc_layer_snapshot_size(NULL) == 0 && kvc_model_snapshot_size(NULL) == 0);
    CHECK_STATUS(kvc_layer_serialize(NULL, snap, 256), KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_layer_serialize(layer, NULL, 256), KVC_E_NULL_POINTER);
    CHECK_OK(kvc_layer_serialize(layer, snap, 256));
    CHECK_STATUS(kvc_layer_deserialize(NULL, 10, &out), KVC_E_NULL_POINTER);
    CHECK(out == NULL);
    CHECK_STATUS(kvc_layer_deserialize(snap, 10, NULL), KVC_E_NULL_POINTER);
    kvc_model *model = model_sentinel;
    CHECK_STATUS(kvc_model_serialize(NULL, snap, 256), KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_model_deserialize(NULL, 10, &model), KVC_E_NULL_POINTER);
    CHECK(model == NULL);
    CHECK_STATUS(kvc_model_deserialize(snap, 10, NULL), KVC_E_NULL_POINTER);
    kvc_layer_free(layer);
}

/* ---- linear layers ---- */

TEST(linear_round_trip_should_be_bit_identical_and_step_the_same) {
    static const double masses[] = {0.0, 0.5, 3.0};
    test_steps steps = test_steps_make(2005, 40, 3, 6, 5, 1, 1);
    test_steps plain = test_steps_make(2006, 40, 2, 3, 4, 0, 0);
    for (size_t mi = 0; mi < 3; mi++) {
        for (size_t count = 0; count < 20; count += 7) {
            const test_steps *s = mi == 1 ? &plain : &steps;
            kvc_layer *layer = test_linear_with(s, count, masses[mi]);
            CHECK(layer != NULL);
            /* A verify that ended: its tentative states are gone. */
            CHECK_OK(kvc_layer_begin_verify(layer));
            CHECK_OK(test_steps_take(layer, s, count, 2, NULL));
            CHECK(kvc_layer_snapshot_size(layer) == 0);
            CHECK_OK(kvc_layer_accept(layer, 1));
            kvc_layer *copy = round_trip(layer);
            CHECK(copy != NULL);
            CHECK(kvc_layer_steps(copy) == count + 1);
            /* The same outputs from here on, and the same verify. */
            float out[40 * 3 * 5], copy_out[40 * 3 * 5];
            CHECK_OK(test_steps_take(layer, s, count + 1, 5, out));
            CHECK_OK(test_steps_take(copy, s, count + 1, 5, copy_out));
            CHECK(test_bits_equal(out, copy_out, 5 * s->H * s->dv));
            CHECK_OK(kvc_layer_begin_verify(layer));
            CHECK_OK(kvc_layer_begin_verify(copy));
            CHECK_OK(test_steps_take(layer, s, count + 6, 3, out));
            CHECK_OK(test_steps_take(copy, s, count + 6, 3, copy_out));
            CHECK(test_bits_equal(out, copy_out, 3 * s->H * s->dv));
            CHECK_OK(kvc_layer_accept(layer, 2));
            CHECK_OK(kvc_layer_accept(copy, 2));
            CHECK(test_layers_equal(layer, copy) && same_snapshots(layer, copy));
            kvc_layer_free(copy);
            kvc_layer_free(layer);
        }
    }
    test_steps_free(&steps);
    test_steps_free(&plain);
}

TEST(linear_state_that_overflowed_should_restore_as_it_was) {
    /* A decay of 1e30 overflows the state to +-Inf (and Inf - Inf to NaN)
     * within a few steps: data a snapshot must carry, not refuse. */
    kvc_layer *layer;
    CHECK_OK(kvc_layer_create_linear(1, 2, 2, 0.0, &layer));
    const float decay[2] = {1e30f, 1e30f}, phi_k[2] = {1.0f, -1.0f}, phi_q[2] = {1.0f, 1.0f};
    const float v[2] = {1.0f, -1.0f};
    float out[2];
    for (int i = 0; i < 12; i++) CHECK_OK(kvc_layer_linear_step(layer, decay, phi_k, phi_q, v, out));
    double state[4];
    CHECK_OK(kvc_layer_linear_state(layer, state, 4));
    CHECK(!isfinite(state[0]));
    kvc_layer *copy = round_trip(layer);
    CHECK(copy != NULL);
    CHECK(test_layers_equal(layer, copy) && same_snapshots(layer, copy));
    kvc_layer_free(copy);
    kvc_layer_free(layer);
}

/* ---- models ---- */

/* A restored copy of model, equal to it, serializing to the same bytes,
 * its snapshot the layers' own snapshots in one frame; NULL otherwise. */
static kvc_model *model_round_trip(const kvc_model *model) {
    size_t len = 0, again_len = 0;
    uint8_t *snap = model_snapshot(model, &len), *again = NULL;
    kvc_model *copy = NULL;
    size_t layers_size = FRAME + 4;
    for (size_t i = 0; i < kvc_model_num_layers(model); i++)
        layers_size += 8 + kvc_layer_snapshot_size(kvc_model_layer(model, i));
    int ok = snap && len == layers_size && read_model(snap, len, &copy) == KVC_OK &&
             test_models_equal(copy, model);
    ok = ok && (again = model_snapshot(copy, &again_len)) && again_len == len &&
         memcmp(again, snap, len) == 0;
    if (!ok) {
        printf("  model round trip failed (%zu bytes)\n", len);
        kvc_model_free(copy);
        copy = NULL;
    }
    free(snap);
    free(again);
    return copy;
}

TEST(model_round_trip_should_be_bit_identical_with_eviction_and_go_on_the_same) {
    test_rng rng = test_rng_new(2007);
    test_hybrid h = test_hybrid_make(2007, 160);
    static const size_t lengths[] = {0, 40, 100};
    for (size_t li = 0; li < 3; li++) {
        kvc_model *model = test_hybrid_model(&h, lengths[li]);
        CHECK(model != NULL);
        if (lengths[li] == 100) {
            /* Each full layer its own importance, then an eviction. */
            for (size_t i = 0; i < 2; i++) {
                float probs[100];
                for (size_t s = 0; s < 100; s++) probs[s] = test_rng_unit(&rng);
                CHECK_OK(kvc_layer_accumulate_imp(kvc_model_layer(model, i), probs, 100));
            }
            CHECK_OK(kvc_model_evict(model, 30, 2, 5));
            CHECK_OK(kvc_layer_set_max_rows(kvc_model_layer(model, 1), 40, 1, 1));
        }
        kvc_model *copy = model_round_trip(model);
        CHECK(copy != NULL);
        /* The same from here on: appends (past max_rows), an eviction. */
        kvc_model *both[2] = {model, copy};
        for (int i = 0; i < 2; i++) {
            CHECK_OK(test_hybrid_append(both[i], &h, lengths[li], 20));
            CHECK_OK(kvc_model_evict(both[i], 25, 1, 3));
            CHECK_OK(test_hybrid_append(both[i], &h, lengths[li] + 20, 5));
        }
        CHECK(test_models_equal(model, copy));
        kvc_model *again = model_round_trip(copy);
        CHECK(again != NULL);
        kvc_model_free(again);
        kvc_model_free(copy);
        kvc_model_free(model);
    }
    test_hybrid_free(&h);
}

TEST(a_model_read_in_pieces_of_any_size_should_be_the_model_read_whole) {
    test_hybrid h = test_hybrid_make(2031, 160);
    static const size_t lengths[] = {0, 40, 100};
    static const size_t pieces[] = {1, 3, 17, 4096, SIZE_MAX};
    for (size_t li = 0; li < 3; li++) {
        kvc_model *model = test_hybrid_model(&h, lengths[li]);
        CHECK(model != NULL);
        if (lengths[li] == 100) CHECK_OK(kvc_model_evict(model, 30, 2, 5));
        size_t len = 0;
        uint8_t *snap = model_snapshot(model, &len);
        CHECK(snap != NULL);
        for (size_t pi = 0; pi < sizeof pieces / sizeof pieces[0]; pi++) {
            kvc_model *read = NULL;
            CHECK_OK(read_model_in_pieces(snap, len, pieces[pi], &read));
            CHECK(test_models_equal(read, model));
            size_t again_len = 0;
            uint8_t *again = model_snapshot(read, &again_len);
            CHECK(again && again_len == len && memcmp(again, snap, len) == 0);
            free(again);
            kvc_model_free(read);
        }
        free(snap);
        kvc_model_free(model);
    }
    test_hybrid_free(&h);
}

TEST(a_model_reader_should_refuse_every_truncation_a_wrong_total_and_a_piece_past_its_room) {
    test_hybrid h = test_hybrid_make(2032, 60);
    kvc_model *model = test_hybrid_model(&h, 60);
    CHECK(model != NULL);
    size_t len = 0;
    uint8_t *snap = model_snapshot(model, &len);
    CHECK(snap != NULL);
    for (size_t cut = 0; cut < len; cut++) {
        /* The first cut bytes, then no more: the reader still wants some. */
        kvc_model_reader *reader = NULL;
        kvc_status status = kvc_model_reader_create(len, &reader);
        for (size_t at = 0; status == KVC_OK && at < cut;) {
            uint8_t *dst;
            size_t room;
            CHECK_OK(kvc_model_reader_next(reader, &dst, &room));
            CHECK(room > 0);
            const size_t n = room < cut - at ? room : cut - at;
            memcpy(dst, snap + at, n);
            at += n;
            status = kvc_model_reader_wrote(reader, n);
        }
        kvc_model *out = model_sentinel;
        if (status == KVC_OK) CHECK(kvc_model_reader_finish(reader, &out) == KVC_E_SNAPSHOT_TRUNCATED && out == NULL);
        kvc_model_reader_free(reader);
    }
    /* A total that is not the snapshot's: refused before a layer is read. */
    kvc_model *out = NULL;
    CHECK(read_model_in_pieces(snap, len - 1, 4096, &out) == KVC_E_SNAPSHOT_CORRUPT && out == NULL);
    uint8_t *longer = test_alloc(len + 1);
    memcpy(longer, snap, len);
    longer[len] = 0;
    CHECK(read_model_in_pieces(longer, len + 1, 4096, &out) == KVC_E_SNAPSHOT_CORRUPT && out == NULL);
    free(longer);
    kvc_model_reader *reader = NULL;
    CHECK(kvc_model_reader_create(19, &reader) == KVC_E_SNAPSHOT_TRUNCATED && reader == NULL);
    /* More bytes than the room: refused, and the reader goes on as before. */
    CHECK_OK(kvc_model_reader_create(len, &reader));
    uint8_t *dst;
    size_t room;
    CHECK_OK(kvc_model_reader_next(reader, &dst, &room));
    CHECK(kvc_model_reader_wrote(reader, room + 1) == KVC_E_LENGTH);
    CHECK(kvc_model_reader_next(reader, NULL, &room) == KVC_E_NULL_POINTER);
    CHECK(kvc_model_reader_finish(reader, NULL) == KVC_E_NULL_POINTER);
    CHECK(kvc_model_reader_wrote(NULL, 1) == KVC_E_NULL_POINTER);
    kvc_model_reader_free(reader);
    kvc_model_reader_free(NULL);
    CHECK(read_model_in_pieces(snap, len, 5, &out) == KVC_OK && test_models_equal(out, model));
    kvc_model_free(out);
    free(snap);
    kvc_model_free(model);
    test_hybrid_free(&h);
}

TEST(crc32_in_interleaved_blocks_and_joined_should_be_the_bitwise_crc) {
    const size_t n = 100003;
    uint8_t *bytes = test_alloc(n);
    test_rng rng = test_rng_new(2033);
    for (size_t i = 0; i < n; i++) bytes[i] = (uint8_t)(test_rng_unit(&rng) * 256.0f);
    static const size_t lengths[] = {0, 1, 7, 8, 9, 63, 4095, 4096, 4097, 4103, 65536, 100003};
    for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
        const size_t len = lengths[li];
        const uint32_t want = test_crc32(bytes, len);
        CHECK(kvc_crc32(bytes, len) == want);
        for (size_t cut = 0; cut <= len; cut += len / 5 + 1) {
            const uint32_t a = kvc_crc32(bytes, cut), b = kvc_crc32(bytes + cut, len - cut);
            CHECK(kvc_crc32_update(a, bytes + cut, len - cut) == want);
            CHECK(kvc_crc32_join(a, b, len - cut) == want);
        }
    }
    free(bytes);
}

TEST(model_snapshot_should_be_refused_during_a_verify_or_with_layers_out_of_step) {
    test_hybrid h = test_hybrid_make(2008, 60);
    kvc_model *model = test_hybrid_model(&h, 50);
    CHECK(model != NULL);
    uint8_t *snap = test_alloc(kvc_model_snapshot_size(model) + 4096);
    const size_t room = kvc_model_snapshot_size(model) + 4096;
    CHECK_OK(kvc_model_begin_verify(model));
    CHECK(kvc_model_snapshot_size(model) == 0);
    CHECK_MODEL_REFUSED(model, kvc_model_serialize(model, snap, room), KVC_E_VERIFYING);
    CHECK_OK(kvc_model_accept(model, 0));
    /* A runner between two layers of one step: the first layer took
     * position 50, the others not yet.  A reader refuses layers that took
     * different numbers of positions, so the writer does too. */
    CHECK_OK(test_data_append(kvc_model_layer(model, 0), &h.data[0], 50, 1));
    CHECK_MODEL_REFUSED(model, kvc_model_serialize(model, snap, room), KVC_E_LAYERS);
    CHECK_OK(test_data_append(kvc_model_layer(model, 1), &h.data[1], 50, 1));
    CHECK_OK(test_steps_take(kvc_model_layer(model, 2), &h.steps, 50, 1, NULL));
    CHECK_OK(kvc_model_serialize(model, snap, room));
    free(snap);
    kvc_model_free(model);
    test_hybrid_free(&h);
}

/* ---- the small snapshots of the refusal tests ---- */

/* A q8 layer of a few hundred bytes past the window: two heads, the second
 * dead at every position, 70 positions evicted to 8 (so that both f32 and
 * int8 rows remain), with importance. */
static kvc_layer *small_layer(void) {
    test_data data = test_data_make(2009, 70, 2, 4, 1);
    for (size_t p = 0; p < 70; p++) data.alive[p * 2 + 1] = 0;
    kvc_layer *layer = test_layer_with(&data, 70, KVC_MODE_Q8);
    float probs[70];
    test_rng rng = test_rng_new(2009);
    for (size_t s = 0; s < 70; s++) probs[s] = test_rng_unit(&rng);
    if (layer && (kvc_layer_accumulate_imp(layer, probs, 70) != KVC_OK ||
                  kvc_layer_evict(layer, 8, 3, 3) != KVC_OK)) {
        kvc_layer_free(layer);
        layer = NULL;
    }
    test_data_free(&data);
    return layer;
}

/* A model of small_layer and a small linear layer at the same 70 positions. */
static kvc_model *small_model(void) {
    test_steps steps = test_steps_make(2010, 70, 1, 2, 2, 0, 1);
    kvc_layer *layers[2] = {small_layer(), test_linear_with(&steps, 70, 0.0)};
    test_steps_free(&steps);
    kvc_model *model = NULL;
    if (layers[0] && layers[1] && kvc_model_create(layers, 2, &model) == KVC_OK) return model;
    kvc_layer_free(layers[0]);
    kvc_layer_free(layers[1]);
    return NULL;
}

/* Offsets of a full layer snapshot's parts. */
typedef struct layout {
    size_t H, d, L, map_bytes;
    size_t positions, map, stores;
} layout;

static layout layout_of(const uint8_t *snap) {
    layout l;
    l.H = get32(snap + AT_H);
    l.d = get32(snap + AT_D);
    l.L = (size_t)get64(snap + AT_L);
    l.map_bytes = (l.H + 7) / 8;
    l.positions = AT_IMP + 4 * l.L;
    l.map = l.positions + 4 * l.L;
    l.stores = l.map + l.map_bytes * l.L;
    return l;
}

/* The offset of store (h, is_values) in a full layer snapshot. */
static size_t store_at(const uint8_t *snap, const layout *l, size_t h, int is_values) {
    size_t at = l->stores;
    for (size_t i = 0; i < 2 * h + (size_t)is_values; i++) {
        const size_t rows = (size_t)get64(snap + at), qrows = (size_t)get64(snap + at + 8);
        at += 16 + rows * l->d * 4 + qrows * (4 + l->d);
        at += 4 + get32(snap + at) * l->d * 4;
    }
    return at;
}

/* ---- refusals ---- */

TEST(deserialize_should_refuse_a_foreign_magic_and_another_version) {
    kvc_layer *layer = small_layer(), *out;
    kvc_model *model = small_model(), *model_out;
    CHECK(layer != NULL && model != NULL);
    size_t len = 0, model_len = 0;
    uint8_t *snap = layer_snapshot(layer, &len), *model_snap = model_snapshot(model, &model_len);
    CHECK(snap && model_snap);
    /* A model's snapshot is not a layer's, and the other way round. */
    CHECK_STATUS(read_layer(model_snap, model_len, &out), KVC_E_SNAPSHOT_MAGIC);
    CHECK_STATUS(read_model(snap, len, &model_out), KVC_E_SNAPSHOT_MAGIC);
    uint8_t *bad = copy_bytes(snap, len, 0);
    bad[0] = 'X';
    CHECK_STATUS(read_layer(bad, len, &out), KVC_E_SNAPSHOT_MAGIC);
    memcpy(bad, snap, len);
    bad[3] = 'M';
    CHECK_STATUS(read_layer(bad, len, &out), KVC_E_SNAPSHOT_MAGIC);
    /* Another version, with a checksum that matches it. */
    static const uint32_t versions[] = {0, 3, 0x100 + 2, 0xFFFFFFFFu};
    for (size_t i = 0; i < 4; i++) {
        memcpy(bad, snap, len);
        put32(bad + AT_VERSION, versions[i]);
        reframe(bad, len);
        CHECK_STATUS(read_layer(bad, len, &out), KVC_E_SNAPSHOT_VERSION);
        uint8_t *bad_model = copy_bytes(model_snap, model_len, 0);
        put32(bad_model + AT_VERSION, versions[i]);
        reframe(bad_model, model_len);
        CHECK_STATUS(read_model(bad_model, model_len, &model_out), KVC_E_SNAPSHOT_VERSION);
        free(bad_model);
    }
    free(bad);
    free(snap);
    free(model_snap);
    kvc_layer_free(layer);
    kvc_model_free(model);
}

TEST(deserialize_should_refuse_a_changed_byte_with_checksum) {
    kvc_layer *layer = small_layer(), *out;
    CHECK(layer != NULL);
    size_t len = 0;
    uint8_t *snap = layer_snapshot(layer, &len);
    CHECK(snap != NULL);
    static const size_t where[] = {AT_KIND, AT_L, AT_IMP, AT_IMP + 40, 0, 0};
    uint8_t *bad = copy_bytes(snap, len, 0);
    for (size_t i = 0; i < 6; i++) {
        const size_t at = i == 4 ? len - 5 : i == 5 ? len - 1 : where[i]; /* last payload, CRC */
        memcpy(bad, snap, len);
        bad[at] ^= 0x10;
        CHECK_STATUS(read_layer(bad, len, &out), KVC_E_SNAPSHOT_CHECKSUM);
    }
    free(bad);
    free(snap);
    kvc_layer_free(layer);
}

TEST(deserialize_should_refuse_every_truncation_and_trailing_bytes) {
    kvc_layer *layer = small_layer(), *out;
    kvc_model *model = small_model(), *model_out;
    CHECK(layer != NULL && model != NULL);
    size_t len = 0, model_len = 0;
    uint8_t *snap = layer_snapshot(layer, &len), *model_snap = model_snapshot(model, &model_len);
    CHECK(snap && model_snap);
    size_t tried = 0;
    for (size_t n = 0; n < len; n++, tried++) {
        /* In a buffer of exactly n bytes, so that a read past them shows
         * under a sanitizer. */
        uint8_t *cut = copy_bytes(snap, n, 1);
        const kvc_status status = read_layer(cut, n, &out);
        free(cut);
        CHECK(status == (n < 4 ? KVC_E_SNAPSHOT_MAGIC : KVC_E_SNAPSHOT_TRUNCATED));
    }
    for (size_t n = 0; n < model_len; n++, tried++) {
        uint8_t *cut = copy_bytes(model_snap, n, 1);
        const kvc_status status = read_model(cut, n, &model_out);
        free(cut);
        CHECK(status == (n < 4 ? KVC_E_SNAPSHOT_MAGIC : KVC_E_SNAPSHOT_TRUNCATED));
    }
    printf("  %zu truncations of a %zu-byte layer and a %zu-byte model snapshot: none accepted\n",
           tried, len, model_len);
    /* A byte too many, after the frame or (reframed) in the payload. */
    uint8_t *longer = copy_bytes(snap, len, len + 1);
    longer[len] = 0;
    CHECK_STATUS(read_layer(longer, len + 1, &out), KVC_E_SNAPSHOT_CORRUPT);
    memmove(longer + len - 3, longer + len - 4, 4);
    longer[len - 4] = 0;
    reframe(longer, len + 1);
    CHECK_STATUS(read_layer(longer, len + 1, &out), KVC_E_SNAPSHOT_CORRUPT);
    /* A byte too few in the payload, reframed: its contents end early. */
    memcpy(longer, snap, len);
    reframe(longer, len - 1);
    CHECK_STATUS(read_layer(longer, len - 1, &out), KVC_E_SNAPSHOT_TRUNCATED);
    uint8_t *model_longer = copy_bytes(model_snap, model_len, model_len + 1);
    model_longer[model_len] = 0;
    CHECK_STATUS(read_model(model_longer, model_len + 1, &model_out), KVC_E_SNAPSHOT_CORRUPT);
    free(model_longer);
    free(longer);
    free(snap);
    free(model_snap);
    kvc_layer_free(layer);
    kvc_model_free(model);
}

/* A forged change to a full layer's snapshot: what to write where. */
typedef struct forgery {
    const char *what;
    kvc_status expected;
} forgery;

/* Reads `bad` (len bytes) after reframing it; 1 if refused with expected. */
static int forged_refused(uint8_t *bad, size_t len, const char *what, kvc_status expected) {
    kvc_layer *out;
    reframe(bad, len);
    const kvc_status status = read_layer(bad, len, &out);
    if (status == KVC_OK) kvc_layer_free(out);
    if (status == expected) return 1;
    printf("  forged %s: %s, expected %s\n", what, kvc_status_name(status),
           kvc_status_name(expected));
    return 0;
}

TEST(deserialize_should_refuse_forged_counts_geometry_and_header_fields) {
    kvc_layer *layer = small_layer();
    CHECK(layer != NULL);
    size_t len = 0;
    uint8_t *snap = layer_snapshot(layer, &len);
    CHECK(snap != NULL);
    const layout l = layout_of(snap);
    CHECK(l.H == 2 && l.d == 4 && l.L == 8 && get64(snap + AT_NEXT) == 70);
    uint8_t *bad = test_alloc(len);
    /* Each case starts from the snapshot: field at offset, 32 or 64 bits. */
    struct {
        const char *what;
        size_t at;
        int bits;
        uint64_t value;
        kvc_status expected;
    } cases[] = {
        {"kind 2", AT_KIND, 32, 2, KVC_E_SNAPSHOT_CORRUPT},
        {"mode 9", AT_MODE, 32, KVC_MODE_COUNT, KVC_E_SNAPSHOT_CORRUPT},
        {"mode f32 with int8 rows and fields", AT_MODE, 32, KVC_MODE_F32, KVC_E_SNAPSHOT_CORRUPT},
        {"no heads", AT_H, 32, 0, KVC_E_SNAPSHOT_CORRUPT},
        {"too many heads", AT_H, 32, KVC_MAX_KV_HEADS + 1, KVC_E_SNAPSHOT_CORRUPT},
        {"a map too large for the bytes", AT_H, 32, KVC_MAX_KV_HEADS, KVC_E_SNAPSHOT_TOO_LARGE},
        {"head_dim 0", AT_D, 32, 0, KVC_E_SNAPSHOT_CORRUPT},
        {"head_dim too large", AT_D, 32, KVC_MAX_HEAD_DIM + 1, KVC_E_SNAPSHOT_CORRUPT},
        {"slots past the next position", AT_L, 64, 71, KVC_E_SNAPSHOT_CORRUPT},
        {"slots with a high word", AT_L, 64, ((uint64_t)1 << 32) + 8, KVC_E_SNAPSHOT_CORRUPT},
        {"more slots", AT_L, 64, 9, KVC_E_SNAPSHOT_CORRUPT},
        {"next position 2^31", AT_NEXT, 64, (uint64_t)1 << 31, KVC_E_SNAPSHOT_CORRUPT},
        {"next position with a high word", AT_NEXT, 64, ((uint64_t)1 << 32) + 70,
         KVC_E_SNAPSHOT_CORRUPT},
        {"next position at a kept one", AT_NEXT, 64, 69, KVC_E_SNAPSHOT_CORRUPT},
        {"next position <= 64 with the field frozen", AT_NEXT, 64, 64, KVC_E_SNAPSHOT_CORRUPT},
        {"field thawed past the window", AT_FROZEN, 32, 0, KVC_E_SNAPSHOT_CORRUPT},
        {"frozen 2", AT_FROZEN, 32, 2, KVC_E_SNAPSHOT_CORRUPT},
        {"residual rows above the most", AT_RESIDUAL, 32, KVC_Q4_MAX_RESIDUAL_ROWS + 1,
         KVC_E_SNAPSHOT_CORRUPT},
        {"sinks without max_rows", AT_SINKS, 64, 1, KVC_E_SNAPSHOT_CORRUPT},
        {"recent without max_rows", AT_RECENT, 64, 1, KVC_E_SNAPSHOT_CORRUPT},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memcpy(bad, snap, len);
        if (cases[i].bits == 32) put32(bad + cases[i].at, (uint32_t)cases[i].value);
        else put64(bad + cases[i].at, cases[i].value);
        CHECK(forged_refused(bad, len, cases[i].what, cases[i].expected));
    }
    /* More slots than the bytes can carry (and a next position past them). */
    memcpy(bad, snap, len);
    put64(bad + AT_L, 1000000);
    put64(bad + AT_NEXT, 2000000);
    CHECK(forged_refused(bad, len, "slots beyond the bytes", KVC_E_SNAPSHOT_TOO_LARGE));
    /* Another head_dim: the rows no longer line up (what gives first
     * depends on the bytes). */
    memcpy(bad, snap, len);
    put32(bad + AT_D, 5);
    kvc_layer *out;
    reframe(bad, len);
    CHECK(read_layer(bad, len, &out) != KVC_OK);
    /* max_rows with a policy that does not fit it; with one that does, fine. */
    memcpy(bad, snap, len);
    put64(bad + AT_MAX_ROWS, 5);
    put64(bad + AT_SINKS, 3);
    put64(bad + AT_RECENT, 3);
    CHECK(forged_refused(bad, len, "sinks + recent > max_rows", KVC_E_SNAPSHOT_CORRUPT));
    put64(bad + AT_RECENT, 2);
    reframe(bad, len);
    CHECK_OK(read_layer(bad, len, &out));
    kvc_layer_free(out);
    free(bad);
    free(snap);
    kvc_layer_free(layer);
}

TEST(deserialize_should_refuse_a_geometry_its_bytes_cannot_carry) {
    /* An empty layer: no slots, only the stores' fixed fields.  4096 heads
     * would need 8192 of them: refused before any allocation. */
    kvc_layer *layer, *out;
    CHECK_OK(kvc_layer_create(3, 4, KVC_MODE_Q8, &layer));
    size_t len = 0;
    uint8_t *snap = layer_snapshot(layer, &len);
    CHECK(snap != NULL);
    uint8_t *bad = copy_bytes(snap, len, 0);
    put32(bad + AT_H, KVC_MAX_KV_HEADS);
    CHECK(forged_refused(bad, len, "4096 heads", KVC_E_SNAPSHOT_TOO_LARGE));
    CHECK_OK(test_fault_install());
    const long live = test_fault_live();
    test_fault_arm(1, 1);
    CHECK_STATUS(read_layer(bad, len, &out), KVC_E_SNAPSHOT_TOO_LARGE);
    test_fault_arm(0, 0);
    CHECK(test_fault_live() == live);
    CHECK(test_fault_remove() == 0);
    /* Fewer heads than stores: bytes left over. */
    memcpy(bad, snap, len);
    put32(bad + AT_H, 2);
    CHECK(forged_refused(bad, len, "2 heads of 3 stores", KVC_E_SNAPSHOT_CORRUPT));
    /* A linear layer whose state the bytes cannot carry, or do not match. */
    kvc_layer *linear;
    CHECK_OK(kvc_layer_create_linear(2, 3, 4, 0.5, &linear));
    uint8_t *lin = layer_snapshot(linear, &len);
    CHECK(lin != NULL);
    uint8_t *bad_lin = copy_bytes(lin, len, len + 8);
    put32(bad_lin + AT_LIN_H, KVC_MAX_KV_HEADS);
    put32(bad_lin + AT_LIN_F, KVC_MAX_HEAD_DIM);
    put32(bad_lin + AT_LIN_DV, KVC_MAX_HEAD_DIM);
    CHECK(forged_refused(bad_lin, len, "a huge linear state", KVC_E_SNAPSHOT_TOO_LARGE));
    struct {
        const char *what;
        size_t at;
        int bits;
        uint64_t value;
        kvc_status expected;
    } cases[] = {
        {"linear heads 0", AT_LIN_H, 32, 0, KVC_E_SNAPSHOT_CORRUPT},
        {"linear heads too many", AT_LIN_H, 32, KVC_MAX_KV_HEADS + 1, KVC_E_SNAPSHOT_CORRUPT},
        {"features 0", AT_LIN_F, 32, 0, KVC_E_SNAPSHOT_CORRUPT},
        {"value_dim 0", AT_LIN_DV, 32, 0, KVC_E_SNAPSHOT_CORRUPT},
        {"another state size", AT_LIN_F, 32, 2, KVC_E_SNAPSHOT_CORRUPT},
        {"steps 2^31", AT_LIN_STEPS, 64, (uint64_t)1 << 31, KVC_E_SNAPSHOT_CORRUPT},
        {"phase_mass -1", AT_LIN_PHASE, 64, 0xBFF0000000000000ull, KVC_E_SNAPSHOT_CORRUPT},
        {"phase_mass NaN", AT_LIN_PHASE, 64, 0x7FF8000000000000ull, KVC_E_SNAPSHOT_CORRUPT},
        {"phase_mass Inf", AT_LIN_PHASE, 64, 0x7FF0000000000000ull, KVC_E_SNAPSHOT_CORRUPT},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memcpy(bad_lin, lin, len);
        if (cases[i].bits == 32) put32(bad_lin + cases[i].at, (uint32_t)cases[i].value);
        else put64(bad_lin + cases[i].at, cases[i].value);
        CHECK(forged_refused(bad_lin, len, cases[i].what, cases[i].expected));
    }
    /* A state with 8 bytes more than its geometry. */
    memcpy(bad_lin, lin, len - 4);
    memset(bad_lin + len - 4, 0, 8);
    CHECK(forged_refused(bad_lin, len + 4, "a longer state", KVC_E_SNAPSHOT_CORRUPT));
    free(bad_lin);
    free(lin);
    kvc_layer_free(linear);
    free(bad);
    free(snap);
    kvc_layer_free(layer);
}

TEST(deserialize_should_refuse_forged_slots_rows_codes_and_fields) {
    kvc_layer *layer = small_layer();
    CHECK(layer != NULL);
    size_t len = 0;
    uint8_t *snap = layer_snapshot(layer, &len);
    CHECK(snap != NULL);
    const layout l = layout_of(snap);
    uint8_t *bad = test_alloc(len);
    const size_t keys0 = store_at(snap, &l, 0, 0), values0 = store_at(snap, &l, 0, 1);
    const size_t keys1 = store_at(snap, &l, 1, 0);
    const size_t f32_rows = (size_t)get64(snap + keys0), q_rows = (size_t)get64(snap + keys0 + 8);
    /* Head 0 has both kinds of rows, head 1 none. */
    CHECK(f32_rows >= 3 && q_rows >= 3 && get64(snap + keys1) == 0 && get64(snap + keys1 + 8) == 0);
    const size_t first_f32 = keys0 + 16, first_q = first_f32 + f32_rows * l.d * 4;
    const size_t field = first_q + q_rows * (4 + l.d) + 4;
    CHECK(get32(snap + field - 4) == 1 && field + 4 * l.d == values0);
#define FORGE(what, expected, change)                                                      \
    do {                                                                                   \
        memcpy(bad, snap, len);                                                            \
        change;                                                                            \
        CHECK(forged_refused(bad, len, what, expected));                                   \
    } while (0)
    const kvc_status corrupt = KVC_E_SNAPSHOT_CORRUPT;
    /* Importance. */
    FORGE("negative imp", corrupt, put_f32(bad + AT_IMP + 4, -1.0f));
    FORGE("tiny negative imp", corrupt, put_f32(bad + AT_IMP, -1e-30f));
    FORGE("NaN imp", corrupt, put_f32(bad + AT_IMP + 8, NAN));
    FORGE("minus infinite imp", corrupt, put_f32(bad + AT_IMP + 28, -INFINITY));
    /* Positions. */
    FORGE("a repeated position", corrupt, put32(bad + l.positions + 4, get32(snap + l.positions)));
    FORGE("decreasing positions", corrupt,
          (put32(bad + l.positions + 16, get32(snap + l.positions + 20)),
           put32(bad + l.positions + 20, get32(snap + l.positions + 16))));
    FORGE("a position at the next one", corrupt, put32(bad + l.positions + 28, 70));
    FORGE("a position past 2^32", corrupt, put32(bad + l.positions + 28, 0xFFFFFFFFu));
    /* The alive map against the rows. */
    FORGE("a row missing from the map", corrupt, bad[l.map] &= (uint8_t)~1u);
    FORGE("a dead head with a slot", corrupt, bad[l.map] |= 2u);
    FORGE("a bit of no head", corrupt, bad[l.map] |= 0x80u);
    /* A store's counts. */
    FORGE("one f32 row more", corrupt, put64(bad + keys0, f32_rows + 1));
    FORGE("one f32 row less", corrupt, put64(bad + keys0, f32_rows - 1));
    FORGE("f32 rows with a high word", corrupt, put64(bad + keys0, ((uint64_t)1 << 32) + f32_rows));
    FORGE("one int8 row more", corrupt, put64(bad + keys0 + 8, q_rows + 1));
    FORGE("int8 rows with a high word", corrupt,
          put64(bad + keys0 + 8, ((uint64_t)1 << 32) + q_rows));
    FORGE("an f32 row moved to int8", corrupt,
          (put64(bad + keys0, f32_rows - 1), put64(bad + keys0 + 8, q_rows + 1)));
    FORGE("rows for a dead head", corrupt, put64(bad + keys1, 1));
    /* Values. */
    FORGE("a NaN row value", corrupt, put_f32(bad + first_f32 + 4, NAN));
    FORGE("an infinite row value", corrupt, put_f32(bad + first_f32 + 8 * l.d, -INFINITY));
    FORGE("a zero scale", corrupt, put_f32(bad + first_q, 0.0f));
    FORGE("a negative scale", corrupt, put_f32(bad + first_q + (4 + l.d), -1.0f));
    FORGE("a NaN scale", corrupt, put_f32(bad + first_q, NAN));
    FORGE("an infinite scale", corrupt, put_f32(bad + first_q, INFINITY));
    FORGE("a code of -128", corrupt, bad[first_q + 4 + 1] = 0x80);
    FORGE("a code of -128 in the last row", corrupt, bad[field - 4 - 1] = 0x80);
    FORGE("no field", corrupt, put32(bad + field - 4, 0));
    FORGE("field 2", corrupt, put32(bad + field - 4, 2));
    FORGE("a zero field value", corrupt, put_f32(bad + field, 0.0f));
    FORGE("a negative field value", corrupt, put_f32(bad + field + 4, -2.0f));
    FORGE("a NaN field value", corrupt, put_f32(bad + field + 8, NAN));
    FORGE("a dead head without a field", corrupt, put32(bad + keys1 + 16, 0));
#undef FORGE
    /* A code of -127 is a code. */
    memcpy(bad, snap, len);
    bad[first_q + 4 + 2] = 0x81;
    kvc_layer *out;
    reframe(bad, len);
    CHECK_OK(read_layer(bad, len, &out));
    kvc_layer_free(out);
    /* An importance of +Inf is one that overflowed: it restores as it was. */
    memcpy(bad, snap, len);
    put_f32(bad + AT_IMP + 28, INFINITY);
    reframe(bad, len);
    CHECK_OK(read_layer(bad, len, &out));
    float imp[8];
    CHECK_OK(kvc_layer_imp(out, imp, 8));
    CHECK(isinf(imp[7]) && imp[7] > 0.0f);
    kvc_layer_free(out);
    free(bad);
    free(snap);
    kvc_layer_free(layer);
}

/* A model snapshot of the given layer snapshots (count of them), each as
 * long as lens[i]; its length in *len. */
static uint8_t *model_frame(uint8_t *const *layers, const size_t *lens, size_t count, size_t *len) {
    size_t total = FRAME + 4;
    for (size_t i = 0; i < count; i++) total += 8 + lens[i];
    uint8_t *snap = test_alloc(total);
    memcpy(snap, "KVCM", 4);
    put32(snap + AT_VERSION, 2);
    put32(snap + 16, (uint32_t)count);
    size_t at = 20;
    for (size_t i = 0; i < count; i++) {
        put64(snap + at, lens[i]);
        memcpy(snap + at + 8, layers[i], lens[i]);
        at += 8 + lens[i];
    }
    reframe(snap, total);
    *len = total;
    return snap;
}

TEST(model_deserialize_should_refuse_forged_layer_counts_and_layers) {
    kvc_model *model = small_model(), *out;
    CHECK(model != NULL);
    uint8_t *parts[3];
    size_t lens[3], len = 0;
    for (size_t i = 0; i < 2; i++) {
        parts[i] = layer_snapshot(kvc_model_layer(model, i), &lens[i]);
        CHECK(parts[i] != NULL);
    }
    /* Rebuilt from its layers' snapshots: the model's own bytes. */
    size_t own_len = 0;
    uint8_t *own = model_snapshot(model, &own_len), *snap = model_frame(parts, lens, 2, &len);
    CHECK(own && len == own_len && memcmp(snap, own, len) == 0);
    CHECK_OK(read_model(snap, len, &out));
    kvc_model_free(out);
    /* The layer count. */
    put32(snap + 16, 0);
    reframe(snap, len);
    CHECK_STATUS(read_model(snap, len, &out), KVC_E_SNAPSHOT_CORRUPT);
    put32(snap + 16, 1000000);
    reframe(snap, len);
    CHECK_STATUS(read_model(snap, len, &out), KVC_E_SNAPSHOT_TOO_LARGE);
    put32(snap + 16, 3);
    reframe(snap, len);
    CHECK_STATUS(read_model(snap, len, &out), KVC_E_SNAPSHOT_TRUNCATED);
    put32(snap + 16, 1);
    reframe(snap, len);
    CHECK_STATUS(read_model(snap, len, &out), KVC_E_SNAPSHOT_CORRUPT); /* a layer left over */
    put32(snap + 16, 2);
    /* A layer's length past the end, or short of its frame. */
    put64(snap + 20, len);
    reframe(snap, len);
    CHECK_STATUS(read_model(snap, len, &out), KVC_E_SNAPSHOT_TRUNCATED);
    put64(snap + 20, lens[0] - 1);
    reframe(snap, len);
    CHECK(read_model(snap, len, &out) != KVC_OK);
    put64(snap + 20, lens[0]);
    /* A layer whose own checksum fails, inside a model whose checksum holds. */
    snap[20 + 8 + AT_IMP] ^= 1;
    reframe(snap, len);
    CHECK_STATUS(read_model(snap, len, &out), KVC_E_SNAPSHOT_CHECKSUM);
    free(snap);
    /* Layers that took different numbers of positions. */
    kvc_layer *other = small_layer();
    CHECK(other != NULL);
    test_data data = test_data_make(2011, 80, 2, 4, 1);
    CHECK_OK(test_data_append(other, &data, 70, 1));
    parts[2] = layer_snapshot(other, &lens[2]);
    CHECK(parts[2] != NULL);
    uint8_t *swapped[2] = {parts[2], parts[1]};
    size_t swapped_lens[2] = {lens[2], lens[1]};
    snap = model_frame(swapped, swapped_lens, 2, &len);
    CHECK_STATUS(read_model(snap, len, &out), KVC_E_SNAPSHOT_CORRUPT);
    free(snap);
    /* A model snapshot where a layer's should be. */
    uint8_t *nested[1] = {own};
    snap = model_frame(nested, &own_len, 1, &len);
    CHECK_STATUS(read_model(snap, len, &out), KVC_E_SNAPSHOT_MAGIC);
    free(snap);
    for (size_t i = 0; i < 3; i++) free(parts[i]);
    free(own);
    test_data_free(&data);
    kvc_layer_free(other);
    kvc_model_free(model);
}

/* ---- sweeps ---- */

static const uint8_t sweep_masks[3] = {0x01, 0x80, 0xFF};

/* 1 if every head of a full layer attends (and a linear layer is fine). */
static int attends(const kvc_layer *layer) {
    const size_t d = kvc_layer_head_dim(layer);
    float *q = test_alloc(d * sizeof(float)), *out = test_alloc(d * sizeof(float));
    int ok = 1;
    for (size_t j = 0; j < d; j++) q[j] = 0.5f - (float)j;
    for (size_t h = 0; h < kvc_layer_num_kv_heads(layer) && ok; h++)
        ok = kvc_layer_attend(layer, q, h, out, NULL) == KVC_OK;
    free(q);
    free(out);
    return ok;
}

typedef struct sweep_count {
    size_t tried, accepted;
} sweep_count;

/* Every byte of snap XORed with each mask, as it is (the checksum must catch
 * it) and reframed (a valid checksum over a changed byte: what the reader's
 * own checks must catch, or else accept a layer that serializes back to
 * exactly those bytes). */
static int sweep(const uint8_t *snap, size_t len, int is_model, sweep_count *plain,
                 sweep_count *forged) {
    uint8_t *bad = test_alloc(len);
    int ok = 1;
    for (size_t at = 0; at < len && ok; at++) {
        for (int m = 0; m < 3 && ok; m++) {
            for (int reframed = 0; reframed < 2 && ok; reframed++) {
                memcpy(bad, snap, len);
                bad[at] ^= sweep_masks[m];
                if (reframed) reframe(bad, len);
                kvc_layer *layer = NULL;
                kvc_model *model = NULL;
                const kvc_status status = is_model ? read_model(bad, len, &model)
                                                   : read_layer(bad, len, &layer);
                if (is_model) {
                    /* In pieces: refused exactly where the whole read refuses. */
                    kvc_model *streamed = NULL;
                    const kvc_status in_pieces = read_model_in_pieces(bad, len, 7, &streamed);
                    ok = in_pieces != KVC_E_LENGTH && (in_pieces == KVC_OK) == (status == KVC_OK) &&
                         (!streamed || test_models_equal(streamed, model));
                    kvc_model_free(streamed);
                }
                sweep_count *count = reframed ? forged : plain;
                count->tried++;
                count->accepted += status == KVC_OK;
                ok = status != KVC_E_LENGTH; /* *out was left non-NULL */
                if (status == KVC_OK && layer) ok = attends(layer);
                if (status == KVC_OK && ok) {
                    size_t again_len = 0;
                    uint8_t *again = is_model ? model_snapshot(model, &again_len)
                                              : layer_snapshot(layer, &again_len);
                    ok = reframed && again && again_len == len && memcmp(again, bad, len) == 0;
                    if (!ok) printf("  byte %zu ^ 0x%02x (%s) accepted\n", at, sweep_masks[m],
                                    reframed ? "reframed" : "as it is");
                    free(again);
                }
                kvc_layer_free(layer);
                kvc_model_free(model);
            }
        }
    }
    free(bad);
    return ok;
}

TEST(deserialize_should_accept_no_corrupted_byte_of_a_small_snapshot) {
    kvc_layer *layer = small_layer();
    kvc_model *model = small_model();
    CHECK(layer != NULL && model != NULL);
    size_t len = 0, model_len = 0;
    uint8_t *snap = layer_snapshot(layer, &len), *model_snap = model_snapshot(model, &model_len);
    CHECK(snap && model_snap);
    sweep_count plain = {0, 0}, forged = {0, 0};
    CHECK(sweep(snap, len, 0, &plain, &forged));
    CHECK(sweep(model_snap, model_len, 1, &plain, &forged));
    printf("  corrupted snapshots (a %zu-byte q8 layer, a %zu-byte model; every byte ^ 0x01, "
           "0x80, 0xFF): %zu tried, %zu accepted\n", len, model_len, plain.tried, plain.accepted);
    printf("  the same with the checksum recomputed: %zu tried, %zu accepted, each serializing "
           "back to its own bytes\n", forged.tried, forged.accepted);
    CHECK(plain.tried == 3 * (len + model_len) && plain.accepted == 0);
    free(snap);
    free(model_snap);
    kvc_layer_free(layer);
    kvc_model_free(model);
}

/* ---- out of memory ---- */

typedef struct read_ctx {
    const uint8_t *snap;
    size_t len;
    kvc_layer *layer;
    kvc_model *model;
} read_ctx;

static kvc_status op_read_layer(void *ctx) {
    read_ctx *r = ctx;
    return read_layer(r->snap, r->len, &r->layer);
}

static kvc_status op_read_model(void *ctx) {
    read_ctx *r = ctx;
    return read_model(r->snap, r->len, &r->model);
}

static kvc_status op_read_model_in_pieces(void *ctx) {
    read_ctx *r = ctx;
    return read_model_in_pieces(r->snap, r->len, 1000, &r->model);
}

TEST(deserialize_should_fail_cleanly_on_allocation_failure) {
    const size_t H = 9, d = 5;
    test_data data = test_data_make(2012, 200, H, d, 1);
    CHECK_OK(test_fault_install());
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        for (size_t si = 0; si < NUM_LAYER_STATES; si++) {
            kvc_layer *layer = layer_in_state(&data, test_modes[mi], &layer_states[si], 2012 + si);
            CHECK(layer != NULL);
            size_t len = 0;
            uint8_t *snap = layer_snapshot(layer, &len);
            CHECK(snap != NULL);
            for (int persistent = 0; persistent < 2; persistent++) {
                read_ctx r = {snap, len, NULL, NULL};
                CHECK(test_run_with_faults(op_read_layer, &r, NULL, persistent,
                                           TEST_KEEPS_NONE) >= 1);
                CHECK(test_layers_equal(r.layer, layer));
                kvc_layer_free(r.layer);
            }
            free(snap);
            kvc_layer_free(layer);
        }
    }
    /* Models. */
    test_hybrid h = test_hybrid_make(2013, 90);
    kvc_model *model = test_hybrid_model(&h, 90);
    CHECK(model != NULL);
    CHECK_OK(kvc_model_evict(model, 20, 1, 2));
    size_t len = 0;
    uint8_t *snap = model_snapshot(model, &len);
    CHECK(snap != NULL);
    for (int persistent = 0; persistent < 2; persistent++) {
        read_ctx r = {snap, len, NULL, NULL};
        CHECK(test_run_with_faults(op_read_model, &r, NULL, persistent, TEST_KEEPS_NONE) >= 4);
        CHECK(test_models_equal(r.model, model));
        kvc_model_free(r.model);
        read_ctx pieces = {snap, len, NULL, NULL};
        CHECK(test_run_with_faults(op_read_model_in_pieces, &pieces, NULL, persistent, TEST_KEEPS_NONE) >= 4);
        CHECK(test_models_equal(pieces.model, model));
        kvc_model_free(pieces.model);
    }
    free(snap);
    kvc_model_free(model);
    CHECK(test_fault_remove() == 0);
    test_hybrid_free(&h);
    test_data_free(&data);
}

/* ---- size ---- */

TEST(snapshot_of_a_q8_layer_should_cost_little_more_than_its_memory_bytes) {
    const size_t H = 8, d = 128, len = 4096;
    test_data data = test_data_make(2014, len, H, d, 0);
    kvc_layer *layer = test_layer_with(&data, len, KVC_MODE_Q8);
    CHECK(layer != NULL);
    const size_t memory = kvc_layer_memory_bytes(layer);
    kvc_layer *copy = round_trip(layer);
    CHECK(copy != NULL);
    const size_t size = kvc_layer_snapshot_size(layer);
    printf("  q8 layer, %zu KV heads x %zu at %zu positions: snapshot %zu B, memory_bytes %zu B "
           "(+%zu B, %.4f%%)\n", H, d, len, size, memory, size - memory,
           100.0 * (double)(size - memory) / (double)memory);
    CHECK(size == memory + full_overhead(H, KVC_MODE_Q8));
    kvc_layer_free(copy);
    kvc_layer_free(layer);
    test_data_free(&data);
}

/* ---- versions and 4-bit rows ---- */

TEST(a_version_1_snapshot_should_still_load) {
    /* A version-1 snapshot is a version-2 one of a mode that existed then,
     * with 0 where the residual window now is: rewritten so, it loads as
     * the same layer; a q4 mode or a window in version 1 is refused. */
    const size_t H = 2, d = 8, len = 90;
    test_data data = test_data_make(4008, len, H, d, 1);
    static const kvc_mode modes[] = {KVC_MODE_Q8, KVC_MODE_Q4};
    for (size_t mi = 0; mi < 2; mi++) {
        kvc_layer *layer = test_layer_with(&data, len, modes[mi]), *copy = NULL;
        const size_t size = kvc_layer_snapshot_size(layer);
        uint8_t *bytes = test_alloc(size);
        CHECK_OK(kvc_layer_serialize(layer, bytes, size));
        put32(bytes + AT_VERSION, 1);
        put32(bytes + AT_RESIDUAL, 0);
        reframe(bytes, size);
        if (modes[mi] == KVC_MODE_Q8) {
            CHECK_OK(kvc_layer_deserialize(bytes, size, &copy));
            CHECK(copy && test_layers_equal(copy, layer));
        } else {
            CHECK_STATUS(kvc_layer_deserialize(bytes, size, &copy), KVC_E_SNAPSHOT_CORRUPT);
        }
        kvc_layer_free(copy);
        free(bytes);
        kvc_layer_free(layer);
    }
    test_data_free(&data);
}

TEST(a_snapshot_should_refuse_q4_codes_of_minus_8_and_set_pad_or_unused_bits) {
    const size_t H = 1, d = 5, len = 70; /* 3 bytes of codes: the last high nibble pads */
    test_data data = test_data_make(4009, len, H, d, 0);
    kvc_layer *layer, *copy = NULL;
    CHECK_OK(kvc_layer_create(H, d, KVC_MODE_Q4K, &layer));
    CHECK_OK(kvc_layer_set_residual_rows(layer, 0));
    CHECK_OK(test_data_append(layer, &data, 0, len));
    const size_t size = kvc_layer_snapshot_size(layer);
    uint8_t *bytes = test_alloc(size), *bad = test_alloc(size);
    CHECK_OK(kvc_layer_serialize(layer, bytes, size));
    CHECK_OK(kvc_layer_deserialize(bytes, size, &copy));
    kvc_layer_free(copy);
    /* Head 0's keys after the slot arrays (imp, position, alive: 9 bytes a
     * slot): its two counts, its 64 f32 rows, then q4 rows of a scale, a
     * byte of shifts (one group: bits 2..7 unused) and 3 bytes of codes. */
    const size_t first_q4 = AT_IMP + len * 9 + 16 + KVC_Q8_WINDOW * d * 4;
    static const struct {
        size_t at;
        uint8_t keep, set;
        const char *what;
    } forged[] = {
        {5, 0xF0, 0x08, "a code of -8"},
        {7, 0xFF, 0x10, "a pad nibble set"},
        {4, 0xFF, 0x04, "an unused shift bit set"},
    };
    for (size_t i = 0; i < 3; i++) {
        memcpy(bad, bytes, size);
        uint8_t *at = bad + first_q4 + forged[i].at;
        *at = (uint8_t)((*at & forged[i].keep) | forged[i].set);
        reframe(bad, size);
        const kvc_status status = kvc_layer_deserialize(bad, size, &copy);
        if (status != KVC_E_SNAPSHOT_CORRUPT) printf("  %s: %s\n", forged[i].what, kvc_status_name(status));
        CHECK(status == KVC_E_SNAPSHOT_CORRUPT);
    }
    free(bad);
    free(bytes);
    kvc_layer_free(layer);
    test_data_free(&data);
}

TEST(a_snapshot_should_refuse_the_most_negative_code_at_every_place_of_a_long_row) {
    /* q4 at d = 72 (36 bytes of codes: words of eight, a tail of four, no
     * pad) and q8 at d = 75 (a tail of three): every nibble (q4) or byte
     * (q8) in turn set to -8 or -128 is refused; rows of the values beside
     * them (7 and -7, 0 and -1; 127 and -127: a word's borrows) are read. */
    static const struct {
        kvc_mode mode;
        size_t d, code_bytes, field_bits;
        uint8_t valid[8];
    } cases[] = {
        {KVC_MODE_Q4K, 72, 36, 4, {0x97, 0x79, 0x0F, 0xF0, 0x00, 0xFF, 0x77, 0x99}},
        {KVC_MODE_Q8K, 75, 75, 8, {0x7F, 0x81, 0x00, 0xFF, 0x7F, 0x7F, 0x81, 0x81}},
    };
    const size_t H = 1, len = 66;
    for (size_t ci = 0; ci < 2; ci++) {
        const size_t d = cases[ci].d, code_bytes = cases[ci].code_bytes;
        test_data data = test_data_make(4010 + ci, len, H, d, 0);
        kvc_layer *layer, *copy = NULL;
        CHECK_OK(kvc_layer_create(H, d, cases[ci].mode, &layer));
        CHECK_OK(kvc_layer_set_residual_rows(layer, 0));
        CHECK_OK(test_data_append(layer, &data, 0, len));
        const size_t size = kvc_layer_snapshot_size(layer);
        uint8_t *bytes = test_alloc(size), *bad = test_alloc(size);
        CHECK_OK(kvc_layer_serialize(layer, bytes, size));
        /* Head 0's first quantized key row (as in the case above), past its
         * scale and a q4 row's shifts. */
        const size_t shifts = cases[ci].field_bits == 4 ? kvc_q4_shift_bytes(d) : 0;
        const size_t codes_at = AT_IMP + len * 9 + 16 + KVC_Q8_WINDOW * d * 4 + 4 + shifts;
        const size_t fields = code_bytes * 8 / cases[ci].field_bits;
        for (size_t f = 0; f < fields; f++) {
            memcpy(bad, bytes, size);
            uint8_t *at = bad + codes_at + f * cases[ci].field_bits / 8;
            if (cases[ci].field_bits == 8) *at = 0x80;
            else *at = f % 2 ? (uint8_t)((*at & 0x0F) | 0x80) : (uint8_t)((*at & 0xF0) | 0x08);
            reframe(bad, size);
            const kvc_status status = kvc_layer_deserialize(bad, size, &copy);
            if (status != KVC_E_SNAPSHOT_CORRUPT) printf("  mode %d, field %zu: %s\n", (int)cases[ci].mode, f, kvc_status_name(status));
            CHECK(status == KVC_E_SNAPSHOT_CORRUPT);
        }
        for (size_t v = 0; v < 8; v++) {
            memcpy(bad, bytes, size);
            for (size_t j = 0; j < code_bytes; j++) bad[codes_at + j] = cases[ci].valid[(v + j) % 8];
            reframe(bad, size);
            CHECK_OK(kvc_layer_deserialize(bad, size, &copy));
            kvc_layer_free(copy);
            copy = NULL;
        }
        free(bad);
        free(bytes);
        kvc_layer_free(layer);
        test_data_free(&data);
    }
}

/* ---- the bytes of today's format ---- */

/* FNV-1a, 64 bits: a digest of snapshot bytes that shares no code with the
 * library's CRC-32. */
static uint64_t fnv1a(uint64_t h, const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001B3ull;
    return h;
}

/* Folds the length and bytes of the snapshot of `layer` (or, NULL, of
 * `model`) into *digest; 0 if it could not be taken. */
static int fold_snapshot(uint64_t *digest, const kvc_layer *layer, const kvc_model *model) {
    size_t len = 0;
    uint8_t *snap = take_snapshot(layer, model, &len);
    if (!snap) return 0;
    uint8_t len_bytes[8];
    put64(len_bytes, len);
    *digest = fnv1a(fnv1a(*digest, len_bytes, 8), snap, len);
    free(snap);
    return 1;
}

/* A value of sixty-fourths in [-4, 4) from integers alone: the same float
 * on every build (no libm between the seed and the bytes). */
static float golden_value(uint32_t i) {
    i = (i ^ 0x9E3779B9u) * 0x85EBCA6Bu;
    i ^= i >> 13;
    return (float)((int)((i >> 8) % 512u) - 256) / 64.0f;
}

/* Appends positions [at, at + n) of H heads of d: head 1 dead at every
 * third position, importance (s % 7) / 8 on every slot after. */
static kvc_status golden_append(kvc_layer *layer, size_t at, size_t n, size_t H, size_t d) {
    kvc_status status = KVC_OK;
    float k[3 * 5], v[3 * 5];
    uint8_t alive[3];
    for (size_t p = at; p < at + n && status == KVC_OK; p++) {
        for (size_t i = 0; i < H * d; i++) {
            k[i] = golden_value((uint32_t)(p * 64 + i));
            v[i] = golden_value((uint32_t)(p * 64 + i + 32));
        }
        for (size_t h = 0; h < H; h++) alive[h] = !(h == 1 && p % 3 == 0);
        status = kvc_layer_append(layer, k, v, alive);
    }
    const size_t L = kvc_layer_seq_len(layer);
    float probs[200];
    for (size_t s = 0; s < L; s++) probs[s] = (float)(s % 7) / 8.0f;
    return status == KVC_OK ? kvc_layer_accumulate_imp(layer, probs, L) : status;
}

TEST(snapshots_should_keep_the_bytes_of_format_version_2) {
    /* Digests of snapshots of fixed data, taken before the writer was
     * rewritten: the format is public, today's files must stay the same
     * bytes.  Per mode: empty; below the window; the field frozen; evicted;
     * under max_rows (3 KV heads of 5: spare map bits, an odd q4 block). */
    static const uint64_t layers[TEST_MODE_COUNT] = {
        0x1FC967128178CA5Cull, 0x1FE7A93814A409C3ull, 0x4DB71CD6CF799D16ull,
        0x069975B7459BD0DAull, 0xAD29EE795AB2A478ull, 0xF0132278700B32BAull,
        0xCB82CFB7BC67C706ull, 0x07223EB487D70699ull, 0x5545E47D697D15A2ull};
    static const uint64_t linear_digest = 0x87C9B66EA16D60F8ull, model_digest = 0xECC3825FEB275FC5ull;
    const size_t H = 3, d = 5;
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        uint64_t digest = 0xCBF29CE484222325ull;
        static const size_t lengths[] = {0, 30, 130, 150, 120};
        for (size_t ci = 0; ci < 5; ci++) {
            kvc_layer *layer;
            CHECK_OK(kvc_layer_create(H, d, test_modes[mi], &layer));
            if (ci == 4) CHECK_OK(kvc_layer_set_max_rows(layer, 16, 2, 3));
            CHECK_OK(golden_append(layer, 0, lengths[ci], H, d));
            if (ci == 3) CHECK_OK(kvc_layer_evict(layer, 40, 4, 8));
            CHECK(fold_snapshot(&digest, layer, NULL));
            kvc_layer_free(layer);
        }
        if (digest != layers[mi]) printf("  mode %d: 0x%016llX\n", (int)test_modes[mi], (unsigned long long)digest);
        CHECK(digest == layers[mi]);
    }
    /* A linear layer after 50 steps, and a model of it beside a q8 layer. */
    kvc_layer *linear, *full;
    CHECK_OK(kvc_layer_create_linear(2, 3, 4, 0.5, &linear));
    for (uint32_t t = 0; t < 50; t++) {
        float decay[6], phi_k[6], phi_q[6], v[8], out[8];
        for (uint32_t i = 0; i < 6; i++) {
            decay[i] = 0.5f + (float)((t + i) % 8) / 16.0f;
            phi_k[i] = golden_value(t * 32 + i);
            phi_q[i] = golden_value(t * 32 + i + 8);
        }
        for (uint32_t i = 0; i < 8; i++) v[i] = golden_value(t * 32 + i + 16);
        CHECK_OK(kvc_layer_linear_step(linear, decay, phi_k, phi_q, v, out));
    }
    uint64_t digest = 0xCBF29CE484222325ull;
    CHECK(fold_snapshot(&digest, linear, NULL));
    if (digest != linear_digest) printf("  linear: 0x%016llX\n", (unsigned long long)digest);
    CHECK(digest == linear_digest);
    CHECK_OK(kvc_layer_create(H, d, KVC_MODE_Q8, &full));
    CHECK_OK(golden_append(full, 0, 50, H, d));
    kvc_model *model;
    kvc_layer *both[2] = {full, linear};
    CHECK_OK(kvc_model_create(both, 2, &model));
    digest = 0xCBF29CE484222325ull;
    CHECK(fold_snapshot(&digest, NULL, model));
    if (digest != model_digest) printf("  model: 0x%016llX\n", (unsigned long long)digest);
    CHECK(digest == model_digest);
    kvc_model_free(model);
}

/* Values from xxHash's reference implementation (libxxhash 0.8.1) for the
 * bytes (7i + 3) mod 256: every tail length (8-, 4- and 1-byte steps) and
 * the 32-byte stripes, with and without a seed. */
TEST(digest_should_be_xxh64_of_the_reference_implementation) {
    uint8_t data[1000];
    for (size_t i = 0; i < sizeof data; i++) data[i] = (uint8_t)(i * 7 + 3);
    static const struct { size_t n; uint64_t seed, digest; } expected[] = {
        {0, 0, 0xef46db3751d8e999ull},    {1, 0, 0x1f25c8d0bc1f4bb6ull},    {3, 0, 0x31d2363f52e564c9ull},
        {4, 0, 0x9bb64b7d66ee9fdaull},    {7, 0, 0x9a7b149959ce60d8ull},    {8, 0, 0xdab99d95c6f90092ull},
        {31, 0, 0xa2aa5f33cc4a6119ull},   {32, 0, 0x23c3c17ef790fd97ull},   {33, 0, 0x50a7cfc7ba588784ull},
        {100, 0, 0xa61f8d4c170fe531ull},  {1000, 0, 0x5f235fa033f1a3fbull},
        {1000, 0x123456789abcdef0ull, 0x2c07c91f9c8937bdull},
    };
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++) {
        CHECK(kvc_digest(data, expected[i].n, expected[i].seed) == expected[i].digest);
    }
    CHECK(kvc_digest(NULL, 5, 0) == kvc_digest(data, 0, 0));
    data[500] ^= 1;
    CHECK(kvc_digest(data, 1000, 0) != 0x5f235fa033f1a3fbull);
}

RUN_TESTS(CASE(layer_round_trip_should_be_bit_identical_in_every_mode_and_state),
          CASE(digest_should_be_xxh64_of_the_reference_implementation),
          CASE(snapshots_should_keep_the_bytes_of_format_version_2),
          CASE(a_version_1_snapshot_should_still_load),
          CASE(a_snapshot_should_refuse_q4_codes_of_minus_8_and_set_pad_or_unused_bits),
          CASE(a_snapshot_should_refuse_the_most_negative_code_at_every_place_of_a_long_row),
          CASE(layer_round_trip_should_keep_the_field_frozen_or_not),
          CASE(layer_round_trip_should_keep_max_rows_off_whatever_policy_came_with_zero),
          CASE(layer_snapshot_should_be_refused_during_a_verify),
          CASE(serialize_and_deserialize_should_refuse_null_pointers),
          CASE(linear_round_trip_should_be_bit_identical_and_step_the_same),
          CASE(linear_state_that_overflowed_should_restore_as_it_was),
          CASE(model_round_trip_should_be_bit_identical_with_eviction_and_go_on_the_same),
          CASE(a_model_read_in_pieces_of_any_size_should_be_the_model_read_whole),
          CASE(a_model_reader_should_refuse_every_truncation_a_wrong_total_and_a_piece_past_its_room),
          CASE(crc32_in_interleaved_blocks_and_joined_should_be_the_bitwise_crc),
          CASE(model_snapshot_should_be_refused_during_a_verify_or_with_layers_out_of_step),
          CASE(deserialize_should_refuse_a_foreign_magic_and_another_version),
          CASE(deserialize_should_refuse_a_changed_byte_with_checksum),
          CASE(deserialize_should_refuse_every_truncation_and_trailing_bytes),
          CASE(deserialize_should_refuse_forged_counts_geometry_and_header_fields),
          CASE(deserialize_should_refuse_a_geometry_its_bytes_cannot_carry),
          CASE(deserialize_should_refuse_forged_slots_rows_codes_and_fields),
          CASE(model_deserialize_should_refuse_forged_layer_counts_and_layers),
          CASE(deserialize_should_accept_no_corrupted_byte_of_a_small_snapshot),
          CASE(deserialize_should_fail_cleanly_on_allocation_failure),
          CASE(snapshot_of_a_q8_layer_should_cost_little_more_than_its_memory_bytes))
