/*
 * test_alloc.c -- running out of memory, SQLite style: an allocator hook
 * (test_fault_* in test.c) fails the N-th allocation (transient: that one
 * only; persistent: that one and every later one) for N = 1, 2, ... until
 * the call succeeds.  Every failed call must return KVC_E_NOMEM and leave the
 * layer as it was (rows, positions, imp, memory_bytes, attend output) with no
 * allocation leaked.
 */
#include <stdlib.h>
#include <string.h>

#include "test.h"

/* ---- operations ---- */

typedef struct append_ctx {
    kvc_layer *layer;
    const test_data *data;
    size_t first, count;
} append_ctx;

static kvc_status op_append(void *ctx) {
    append_ctx *a = ctx;
    return test_data_append(a->layer, a->data, a->first, a->count);
}

typedef struct create_ctx {
    size_t H, d;
    kvc_mode mode;
    kvc_layer *out;
} create_ctx;

static kvc_status op_create(void *ctx) {
    create_ctx *c = ctx;
    c->out = (kvc_layer *)c;
    const kvc_status status = kvc_layer_create(c->H, c->d, c->mode, &c->out);
    return test_out_rule(status, c->out);
}

typedef struct clone_ctx {
    const kvc_layer *layer;
    kvc_layer *out;
} clone_ctx;

static kvc_status op_clone(void *ctx) {
    clone_ctx *c = ctx;
    c->out = (kvc_layer *)c;
    const kvc_status status = kvc_layer_clone(c->layer, &c->out);
    return test_out_rule(status, c->out);
}

typedef struct attend_ctx {
    const kvc_layer *layer;
    const float *q, *keys, *values;
    size_t kv_head, n, d;
    float *out, *probs;
} attend_ctx;

static kvc_status op_attend(void *ctx) {
    attend_ctx *a = ctx;
    return kvc_layer_attend(a->layer, a->q, a->kv_head, a->out, a->probs);
}

static kvc_status op_attention_head(void *ctx) {
    attend_ctx *a = ctx;
    return kvc_attention_head(a->q, a->keys, a->values, a->n, a->d, a->out, a->probs);
}

/* attend_group of G queries on kv_head, or (heads = 1) attend_heads of G
 * queries per KV head. */
typedef struct group_ctx {
    const kvc_layer *layer;
    const float *q;
    size_t G, kv_head;
    int heads;
    float *out, *probs;
} group_ctx;

static kvc_status op_group(void *ctx) {
    group_ctx *a = ctx;
    if (a->heads)
        return kvc_layer_attend_heads(a->layer, a->q, a->G * kvc_layer_num_kv_heads(a->layer),
                                      a->out, a->probs);
    return kvc_layer_attend_group(a->layer, a->q, a->G, a->kv_head, a->out, a->probs);
}

/* 1 if layer equals one that appended data's first len positions with no
 * allocation failing. */
static int same_as_plain(const kvc_layer *layer, const test_data *data, size_t len) {
    kvc_layer *plain = test_layer_with(data, len, kvc_layer_mode(layer));
    const int equal = plain && test_layers_equal(layer, plain);
    kvc_layer_free(plain);
    return equal;
}

/* ---- cases ---- */

TEST(set_allocator_should_refuse_null_functions) {
    const kvc_allocator *fault = test_fault_allocator();
    kvc_allocator hook = *fault;
    hook.malloc_fn = NULL;
    CHECK_STATUS(kvc_set_allocator(&hook), KVC_E_NULL_POINTER);
    hook.malloc_fn = fault->malloc_fn;
    hook.realloc_fn = NULL;
    CHECK_STATUS(kvc_set_allocator(&hook), KVC_E_NULL_POINTER);
    hook.realloc_fn = fault->realloc_fn;
    hook.free_fn = NULL;
    CHECK_STATUS(kvc_set_allocator(&hook), KVC_E_NULL_POINTER);
    CHECK_OK(kvc_set_allocator(NULL));
}

TEST(create_should_fail_cleanly_on_allocation_failure) {
    CHECK_OK(test_fault_install());
    for (int persistent = 0; persistent < 2; persistent++) {
        for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
            create_ctx c = {7, 32, test_modes[mi], NULL};
            const long failed =
                test_run_with_faults(op_create, &c, NULL, persistent, TEST_KEEPS_NONE);
            CHECK(failed >= 1);
            CHECK(c.out != NULL && kvc_layer_seq_len(c.out) == 0);
            kvc_layer_free(c.out);
        }
    }
    CHECK(test_fault_remove() == 0);
}

TEST(append_should_fail_cleanly_on_allocation_failure) {
    const size_t H = 3, d = 16, len = 100;
    test_data data = test_data_make(111, len, H, d, 1);
    CHECK_OK(test_fault_install());
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        kvc_layer *layer = test_layer_with(&data, 0, test_modes[mi]);
        CHECK(layer != NULL);
        long failed = 0;
        for (size_t p = 0; p < len; p++) {
            append_ctx a = {layer, &data, p, 1};
            const long f =
                test_run_with_faults(op_append, &a, layer, (int)(p % 2), TEST_KEEPS_OWNED);
            CHECK(f >= 0);
            failed += f;
        }
        /* Growing buffers: some appends allocate, and each of those failed. */
        CHECK(failed > 0);
        CHECK(same_as_plain(layer, &data, len));
        kvc_layer_free(layer);
    }
    CHECK(test_fault_remove() == 0);
    test_data_free(&data);
}

TEST(append_n_across_window_should_fail_cleanly_on_allocation_failure) {
    const size_t H = 4, d = 16, len = 90;
    test_data data = test_data_make(112, len, H, d, 1);
    CHECK_OK(test_fault_install());
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        for (int persistent = 0; persistent < 2; persistent++) {
            kvc_layer *layer = test_layer_with(&data, 60, test_modes[mi]);
            CHECK(layer != NULL);
            /* 60 -> 90 freezes the field: the transient loop fails each
             * allocation of the call in turn, the fields' included. */
            append_ctx a = {layer, &data, 60, 30};
            CHECK(test_run_with_faults(op_append, &a, layer, persistent, TEST_KEEPS_OWNED) >= 1);
            CHECK(kvc_layer_field_frozen(layer) == (test_modes[mi] != KVC_MODE_F32));
            CHECK(same_as_plain(layer, &data, len));
            kvc_layer_free(layer);
        }
    }
    CHECK(test_fault_remove() == 0);
    test_data_free(&data);
}

TEST(append_under_max_rows_should_fail_cleanly_on_allocation_failure) {
    /* An append past max_rows grows the buffers, then evicts with a scratch
     * of its own: failing either leaves the layer as it was. */
    static const size_t chunks[] = {1, 5, 2, 7, 3};
    const size_t H = 3, d = 8, len = 160;
    test_data data = test_data_make(120, len, H, d, 1);
    CHECK_OK(test_fault_install());
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        kvc_layer *layer = test_layer_with(&data, 0, test_modes[mi]);
        kvc_layer *plain = test_layer_with(&data, 0, test_modes[mi]);
        CHECK(layer != NULL && plain != NULL);
        CHECK_OK(kvc_layer_set_max_rows(layer, 24, 2, 4));
        CHECK_OK(kvc_layer_set_max_rows(plain, 24, 2, 4));
        long failed = 0, evicting = 0;
        for (size_t p = 0, c = 0; p + 7 <= len; p += chunks[c++ % 5]) {
            const size_t n = chunks[c % 5];
            evicting += kvc_layer_seq_len(layer) + n > 24;
            append_ctx a = {layer, &data, p, n};
            const long f =
                test_run_with_faults(op_append, &a, layer, (int)(c % 2), TEST_KEEPS_OWNED);
            CHECK(f >= 0);
            failed += f;
            CHECK_OK(test_data_append(plain, &data, p, n));
            CHECK(kvc_layer_seq_len(layer) <= 24);
        }
        /* Each evicting append failed at least at its scratch. */
        CHECK(evicting > 10 && failed >= evicting);
        CHECK(test_layers_equal(layer, plain));
        kvc_layer_free(layer);
        kvc_layer_free(plain);
    }
    CHECK(test_fault_remove() == 0);
    test_data_free(&data);
}

TEST(clone_should_fail_cleanly_on_allocation_failure) {
    const size_t H = 5, d = 24;
    test_data data = test_data_make(114, 100, H, d, 1);
    CHECK_OK(test_fault_install());
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        for (int persistent = 0; persistent < 2; persistent++) {
            kvc_layer *layer = test_layer_with(&data, 100, test_modes[mi]);
            CHECK(layer != NULL);
            const long live = test_fault_live();
            clone_ctx c = {layer, NULL};
            CHECK(test_run_with_faults(op_clone, &c, layer, persistent, TEST_KEEPS_NONE) >= 2);
            CHECK(test_layers_equal(c.out, layer));
            kvc_layer_free(c.out);
            CHECK(test_fault_live() == live);
            kvc_layer_free(layer);
        }
    }
    CHECK(test_fault_remove() == 0);
    test_data_free(&data);
}

TEST(attend_should_fail_cleanly_on_allocation_failure) {
    const size_t H = 3, d = 32;
    test_data data = test_data_make(115, 90, H, d, 1);
    test_rng rng = test_rng_new(115);
    float q[32], out[32], want[32], probs[90];
    CHECK_OK(test_fault_install());
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        kvc_layer *layer = test_layer_with(&data, 90, test_modes[mi]);
        CHECK(layer != NULL);
        for (size_t h = 0; h < H; h++) {
            test_fill_normal(&rng, q, d);
            CHECK_OK(kvc_layer_attend(layer, q, h, want, probs));
            /* kvcache.h: one workspace per call, with probs or without. */
            attend_ctx a = {layer, q, NULL, NULL, h, 0, d, out, NULL};
            CHECK(test_run_with_faults(op_attend, &a, layer, 0, TEST_KEEPS_NONE) == 1);
            CHECK(test_bits_equal(out, want, d));
            a.probs = probs;
            CHECK(test_run_with_faults(op_attend, &a, layer, 1, TEST_KEEPS_NONE) == 1);
            CHECK(test_bits_equal(out, want, d));
        }
        kvc_layer_free(layer);
    }
    CHECK(test_fault_remove() == 0);
    test_data_free(&data);
}

TEST(attend_group_and_heads_should_fail_cleanly_on_allocation_failure) {
    const size_t H = 3, d = 24, G = 3, len = 90;
    test_data data = test_data_make(119, len, H, d, 1);
    test_rng rng = test_rng_new(119);
    float q[3 * 3 * 24], out[3 * 3 * 24], want[3 * 3 * 24], probs[3 * 3 * 90];
    CHECK_OK(test_fault_install());
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        kvc_layer *layer = test_layer_with(&data, len, test_modes[mi]);
        CHECK(layer != NULL);
        test_fill_normal(&rng, q, H * G * d);
        for (size_t h = 0; h < H; h++) {
            /* As attend: one workspace per call. */
            CHECK_OK(kvc_layer_attend_group(layer, q, G, h, want, probs));
            group_ctx a = {layer, q, G, h, 0, out, NULL};
            CHECK(test_run_with_faults(op_group, &a, layer, 0, TEST_KEEPS_NONE) == 1);
            CHECK(test_bits_equal(out, want, G * d));
            a.probs = probs;
            CHECK(test_run_with_faults(op_group, &a, layer, 1, TEST_KEEPS_NONE) == 1);
            CHECK(test_bits_equal(out, want, G * d));
        }
        /* A whole layer: every failure clean, then the result of no failure. */
        CHECK_OK(kvc_layer_attend_heads(layer, q, G * H, want, probs));
        for (int with_probs = 0; with_probs < 2; with_probs++) {
            for (int persistent = 0; persistent < 2; persistent++) {
                group_ctx a = {layer, q, G, 0, 1, out, with_probs ? probs : NULL};
                CHECK(test_run_with_faults(op_group, &a, layer, persistent, TEST_KEEPS_NONE) >= 1);
                CHECK(test_bits_equal(out, want, G * H * d));
            }
        }
        kvc_layer_free(layer);
    }
    CHECK(test_fault_remove() == 0);
    test_data_free(&data);
}

TEST(attention_head_should_fail_cleanly_on_allocation_failure) {
    const size_t n = 50, d = 20;
    test_rng rng = test_rng_new(116);
    float keys[50 * 20], values[50 * 20], q[20], out[20], want[20], probs[50];
    test_fill_normal(&rng, keys, n * d);
    test_fill_normal(&rng, values, n * d);
    test_fill_normal(&rng, q, d);
    CHECK_OK(kvc_attention_head(q, keys, values, n, d, want, probs));
    CHECK_OK(test_fault_install());
    attend_ctx a = {NULL, q, keys, values, 0, n, d, out, NULL};
    CHECK(test_run_with_faults(op_attention_head, &a, NULL, 0, TEST_KEEPS_NONE) == 1);
    CHECK(test_bits_equal(out, want, d));
    CHECK(test_run_with_faults(op_attention_head, &a, NULL, 1, TEST_KEEPS_NONE) == 1);
    a.probs = probs;
    CHECK(test_run_with_faults(op_attention_head, &a, NULL, 1, TEST_KEEPS_NONE) == 1);
    CHECK(test_bits_equal(out, want, d));
    /* No rows: nothing to allocate. */
    a.n = 0;
    a.probs = NULL;
    CHECK(test_run_with_faults(op_attention_head, &a, NULL, 1, TEST_KEEPS_NONE) == 0);
    CHECK(test_fault_remove() == 0);
}

TEST(layer_should_stay_usable_after_allocator_is_restored) {
    const size_t H = 3, d = 16, len = 160;
    test_data data = test_data_make(117, len, H, d, 1);
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        kvc_layer *layer, *copy;
        CHECK_OK(test_fault_install());
        CHECK_OK(kvc_layer_create(H, d, test_modes[mi], &layer));
        for (size_t p = 0; p < 80; p++) {
            append_ctx a = {layer, &data, p, 1};
            CHECK(test_run_with_faults(op_append, &a, layer, 1, TEST_KEEPS_OWNED) >= 0);
        }
        CHECK_OK(kvc_set_allocator(NULL));
        /* The hook's blocks are malloc's, so the default allocator carries on. */
        CHECK_OK(test_data_append(layer, &data, 80, len - 80));
        CHECK_OK(kvc_layer_clone(layer, &copy));
        CHECK(same_as_plain(layer, &data, len));
        CHECK(same_as_plain(copy, &data, len));
        kvc_layer_free(layer);
        kvc_layer_free(copy);
    }
    test_data_free(&data);
}

TEST(layer_life_should_leak_no_allocation) {
    const size_t H = 4, d = 16;
    test_data data = test_data_make(118, 200, H, d, 1);
    test_rng rng = test_rng_new(118);
    float q[16], out[16];
    CHECK_OK(test_fault_install());
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        kvc_layer *copy, *layer = test_layer_with(&data, 150, test_modes[mi]);
        CHECK(layer != NULL);
        CHECK_OK(kvc_layer_clone(layer, &copy));
        CHECK_OK(kvc_layer_truncate_last(layer, 120));
        CHECK_OK(test_data_append(layer, &data, 30, 170));
        /* Eviction, a bound on appends, a snapshot and its restored copy. */
        uint32_t kept[40];
        size_t count;
        CHECK_OK(kvc_layer_eviction_plan(layer, 40, 4, 8, kept, 40, &count));
        CHECK_OK(kvc_layer_evict(layer, 60, 4, 8));
        CHECK_OK(kvc_layer_set_max_rows(layer, 50, 4, 8));
        CHECK_OK(test_data_append(layer, &data, 0, 1)); /* the data's position 0 as position 200 */
        const size_t size = kvc_layer_snapshot_size(layer);
        uint8_t *snap = test_alloc(size);
        kvc_layer *restored, *refused;
        CHECK_OK(kvc_layer_serialize(layer, snap, size));
        CHECK_OK(kvc_layer_deserialize(snap, size, &restored));
        CHECK(test_layers_equal(restored, layer));
        snap[size / 2] ^= 1;
        CHECK_STATUS(kvc_layer_deserialize(snap, size, &refused), KVC_E_SNAPSHOT_CHECKSUM);
        kvc_layer_free(restored);
        free(snap);
        kvc_layer_clear(copy);
        CHECK_OK(test_data_append(copy, &data, 0, 100));
        for (size_t h = 0; h < H; h++) {
            test_fill_normal(&rng, q, d);
            CHECK_OK(kvc_layer_attend(layer, q, h, out, NULL));
            CHECK_OK(kvc_layer_attend(copy, q, h, out, NULL));
        }
        CHECK(test_fault_live() > 0);
        kvc_layer_free(layer);
        kvc_layer_free(copy);
        CHECK(test_fault_live() == 0);
    }
    CHECK_OK(kvc_set_allocator(NULL));
    test_data_free(&data);
}

/* ---- an out-of-memory episode: every allocation fails for a while ---- */

/* `expr`, run while every allocation fails, must return KVC_E_NOMEM and hold
 * no new block; `unchanged` (read once allocations work again, as attend on
 * int8 rows needs a workspace) must then hold. */
#define CHECK_OUT_OF_MEMORY(expr, unchanged)                                     \
    do {                                                                         \
        const long live_ = test_fault_live();                                    \
        test_fault_arm(1, 1);                                                    \
        const kvc_status status_ = (expr);                                       \
        test_fault_arm(0, 0);                                                    \
        CHECK_STATUS(status_, KVC_E_NOMEM);                                      \
        CHECK(test_fault_live() == live_);                                       \
        CHECK(unchanged);                                                        \
    } while (0)

/* Importance a decoder could have summed; fixed, so that two layers of as
 * many slots get the same. */
static kvc_status add_fixed_imp(kvc_layer *layer) {
    const size_t L = kvc_layer_seq_len(layer);
    float *probs = test_alloc(L * sizeof(float));
    for (size_t s = 0; s < L; s++) probs[s] = 0.125f * (float)(s % 7);
    const kvc_status status = kvc_layer_accumulate_imp(layer, probs, L);
    free(probs);
    return status;
}

/* A snapshot of the layer (or, layer NULL, of the model) in test_alloc'd
 * bytes; *len receives its length. */
static uint8_t *snapshot_of(const kvc_layer *layer, const kvc_model *model, size_t *len) {
    *len = layer ? kvc_layer_snapshot_size(layer) : kvc_model_snapshot_size(model);
    uint8_t *bytes = test_alloc(*len);
    const kvc_status status = layer ? kvc_layer_serialize(layer, bytes, *len)
                                    : kvc_model_serialize(model, bytes, *len);
    if (status != KVC_OK) {
        free(bytes);
        return NULL;
    }
    return bytes;
}

/* The layer (or model) serializes with every allocation failing, to the
 * bytes it gives on a healthy heap. */
static void check_serializes_without_allocating(const kvc_layer *layer, const kvc_model *model) {
    size_t len = 0, len_starved = 0;
    uint8_t *want = snapshot_of(layer, model, &len);
    test_fault_arm(1, 1);
    uint8_t *got = snapshot_of(layer, model, &len_starved);
    test_fault_arm(0, 0);
    const int same = want && got && len_starved == len && memcmp(got, want, len) == 0;
    free(want);
    free(got);
    CHECK(same);
}

TEST(serialize_should_succeed_while_every_allocation_fails) {
    /* kvcache.h lists no KVC_E_NOMEM for it: a cache can be saved when the
     * heap is exhausted, byte for byte the snapshot of a healthy heap. */
    test_data data = test_data_make(121, 150, 5, 12, 1);
    test_hybrid h = test_hybrid_make(122, 90);
    CHECK_OK(test_fault_install());
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        kvc_layer *layer = test_layer_with(&data, 150, test_modes[mi]);
        CHECK(layer != NULL);
        CHECK_OK(add_fixed_imp(layer));
        CHECK_OK(kvc_layer_evict(layer, 100, 4, 20));
        check_serializes_without_allocating(layer, NULL);
        kvc_layer_free(layer);
    }
    kvc_model *model = test_hybrid_model(&h, 90);
    CHECK(model != NULL);
    check_serializes_without_allocating(NULL, model);
    kvc_model_free(model);
    CHECK(test_fault_remove() == 0);
    test_hybrid_free(&h);
    test_data_free(&data);
}

/* A write into pages a fork shares with its parent: each kind of write. */
typedef struct shared_write_ctx {
    kvc_layer *layer;
    const test_data *data;
    int kind;
} shared_write_ctx;

enum { WRITE_APPEND, WRITE_APPEND_N, WRITE_IMP, WRITE_EVICT, WRITE_ACCEPT_EVICTING, WRITE_KINDS };

static kvc_status op_shared_write(void *ctx) {
    shared_write_ctx *w = ctx;
    const size_t at = kvc_layer_next_position(w->layer);
    switch (w->kind) {
    case WRITE_APPEND: return test_data_append(w->layer, w->data, at, 1);
    case WRITE_APPEND_N: return test_data_append(w->layer, w->data, at, 30);
    case WRITE_IMP: return add_fixed_imp(w->layer);
    case WRITE_EVICT: return kvc_layer_evict(w->layer, 90, 4, 16);
    default: return kvc_layer_accept(w->layer, 3); /* drafts past max_rows: an eviction */
    }
}

/* Sets up what a kind of write needs beforehand (a verify with drafts). */
static kvc_status before_shared_write(kvc_layer *layer, const test_data *data, int kind) {
    if (kind != WRITE_ACCEPT_EVICTING) return KVC_OK;
    kvc_status status = kvc_layer_set_max_rows(layer, 140, 4, 8);
    if (status == KVC_OK) status = kvc_layer_begin_verify(layer);
    return status == KVC_OK ? test_data_append(layer, data, kvc_layer_next_position(layer), 5) : status;
}

TEST(writes_into_shared_pages_should_fail_cleanly_on_allocation_failure) {
    /* The first write into a page another layer holds copies it: failing
     * that copy leaves both layers as they were. */
    const size_t H = 3, d = 16, len = 150;
    test_data data = test_data_make(125, len + 40, H, d, 1);
    CHECK_OK(test_fault_install());
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        kvc_layer *parent = test_layer_with(&data, len, test_modes[mi]);
        CHECK(parent != NULL);
        CHECK_OK(add_fixed_imp(parent));
        test_state *parent_state = test_state_take(parent);
        for (int kind = 0; kind < WRITE_KINDS; kind++) {
            kvc_layer *plain = test_layer_with(&data, len, test_modes[mi]), *fork;
            CHECK(plain != NULL);
            CHECK_OK(add_fixed_imp(plain));
            CHECK_OK(kvc_layer_clone(parent, &fork));
            CHECK_OK(before_shared_write(fork, &data, kind));
            CHECK_OK(before_shared_write(plain, &data, kind));
            shared_write_ctx w = {fork, &data, kind};
            CHECK(test_run_with_faults(op_shared_write, &w, fork, kind % 2, TEST_KEEPS_OWNED) >= 1);
            CHECK(test_state_matches(parent, parent_state));
            w.layer = plain;
            CHECK_OK(op_shared_write(&w));
            CHECK(test_layers_equal(fork, plain));
            kvc_layer_free(fork);
            kvc_layer_free(plain);
        }
        test_state_free(parent_state);
        kvc_layer_free(parent);
    }
    CHECK(test_fault_remove() == 0);
    test_data_free(&data);
}

TEST(layer_should_go_on_unchanged_after_an_out_of_memory_episode) {
    /* Every allocating call fails in turn, each on the state the last one
     * left; then memory comes back and the layer carries on exactly as a
     * layer that never ran out. */
    const size_t H = 4, d = 16, len = 128, more = 60;
    test_data data = test_data_make(123, len + more, H, d, 1);
    test_rng rng = test_rng_new(123);
    float q[4 * 16], out[4 * 16];
    test_fill_normal(&rng, q, H * d);
    CHECK_OK(test_fault_install());
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        /* Filled to a page boundary (two pages of 64 positions): the next
         * append needs new pages. */
        kvc_layer *layer = test_layer_with(&data, len, test_modes[mi]), *plain;
        CHECK(layer != NULL);
        CHECK_OK(add_fixed_imp(layer));
        size_t snap_len = 0;
        uint8_t *snap = snapshot_of(layer, NULL, &snap_len);
        CHECK(snap != NULL);
        test_state *before = test_state_take(layer);
        kvc_layer *copy = layer, *restored = layer;
        uint32_t kept[40];
        size_t count = 0;
        CHECK_OUT_OF_MEMORY(test_data_append(layer, &data, len, 1),
                            test_state_matches(layer, before));
        CHECK_OUT_OF_MEMORY(test_data_append(layer, &data, len, more),
                            test_state_matches(layer, before));
        CHECK_OUT_OF_MEMORY(kvc_layer_clone(layer, &copy), test_state_matches(layer, before));
        CHECK(copy == NULL);
        CHECK_OUT_OF_MEMORY(kvc_layer_deserialize(snap, snap_len, &restored),
                            test_state_matches(layer, before));
        CHECK(restored == NULL);
        CHECK_OUT_OF_MEMORY(kvc_layer_evict(layer, 40, 4, 8), test_state_matches(layer, before));
        CHECK_OUT_OF_MEMORY(kvc_layer_eviction_plan(layer, 40, 4, 8, kept, 40, &count),
                            test_state_matches(layer, before) && count == 0);
        CHECK_OUT_OF_MEMORY(kvc_layer_attend(layer, q, 1, out, NULL),
                            test_state_matches(layer, before));
        CHECK_OUT_OF_MEMORY(kvc_layer_attend_heads(layer, q, H, out, NULL),
                            test_state_matches(layer, before));
        /* Allocations work again. */
        CHECK_OK(test_data_append(layer, &data, len, more));
        plain = test_layer_with(&data, len, test_modes[mi]);
        CHECK(plain != NULL);
        CHECK_OK(add_fixed_imp(plain));
        CHECK_OK(test_data_append(plain, &data, len, more));
        CHECK(test_layers_equal(layer, plain));
        CHECK_OK(kvc_layer_clone(layer, &copy));
        CHECK(test_layers_equal(copy, plain));
        test_state_free(before);
        free(snap);
        kvc_layer_free(copy);
        kvc_layer_free(plain);
        kvc_layer_free(layer);
    }
    CHECK(test_fault_remove() == 0);
    test_data_free(&data);
}

TEST(accept_under_max_rows_should_fail_cleanly_on_allocation_failure) {
    /* accept(j > 0) evicts back to max_rows with a scratch of its own:
     * failing it leaves the verify open and the drafts in place; accept(0)
     * allocates nothing.  A model accepts in every layer or in none. */
    test_data data = test_data_make(125, 40, 3, 8, 1);
    CHECK_OK(test_fault_install());
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        kvc_layer *layer = test_layer_with(&data, 24, test_modes[mi]);
        CHECK(layer != NULL);
        CHECK_OK(kvc_layer_set_max_rows(layer, 24, 2, 4));
        CHECK_OK(kvc_layer_begin_verify(layer));
        CHECK_OK(test_data_append(layer, &data, 24, 5));
        test_state *before = test_state_take(layer);
        CHECK_OUT_OF_MEMORY(kvc_layer_accept(layer, 3),
                            test_state_matches(layer, before) && kvc_layer_draft_len(layer) == 5);
        test_fault_arm(1, 1);
        CHECK_OK(kvc_layer_accept(layer, 0));
        test_fault_arm(0, 0);
        CHECK(kvc_layer_seq_len(layer) == 24 && kvc_layer_next_position(layer) == 24);
        CHECK_OK(kvc_layer_begin_verify(layer));
        CHECK_OK(test_data_append(layer, &data, 24, 5));
        CHECK_OK(kvc_layer_accept(layer, 3));
        CHECK(kvc_layer_seq_len(layer) == 24 && kvc_layer_next_position(layer) == 27);
        test_state_free(before);
        kvc_layer_free(layer);
    }
    test_hybrid h = test_hybrid_make(126, 40);
    kvc_model *model = test_hybrid_model(&h, 30);
    CHECK(model != NULL);
    for (size_t i = 0; i < kvc_model_num_layers(model); i++) {
        kvc_layer *layer = kvc_model_layer(model, i);
        if (kvc_layer_kind(layer) == KVC_KIND_FULL) CHECK_OK(kvc_layer_set_max_rows(layer, 30, 2, 4));
    }
    CHECK_OK(kvc_model_begin_verify(model));
    CHECK_OK(test_hybrid_append(model, &h, 30, 4));
    test_state **before = test_model_state_take(model);
    CHECK_OUT_OF_MEMORY(kvc_model_accept(model, 2), test_model_state_matches(model, before));
    CHECK_OK(kvc_model_accept(model, 2));
    for (size_t i = 0; i < kvc_model_num_layers(model); i++) {
        const kvc_layer *layer = kvc_model_layer(model, i);
        CHECK(kvc_layer_kind(layer) != KVC_KIND_FULL || kvc_layer_seq_len(layer) == 30);
    }
    test_model_state_free(before);
    kvc_model_free(model);
    test_hybrid_free(&h);
    CHECK(test_fault_remove() == 0);
    test_data_free(&data);
}

TEST(model_should_go_on_unchanged_after_an_out_of_memory_episode) {
    const size_t len = 128, more = 30; /* a page boundary: the next append needs pages */
    test_hybrid h = test_hybrid_make(124, len + more);
    CHECK_OK(test_fault_install());
    kvc_model *model = test_hybrid_model(&h, len), *plain = test_hybrid_model(&h, len);
    CHECK(model != NULL && plain != NULL);
    for (size_t i = 0; i < 2; i++) {
        CHECK_OK(add_fixed_imp(kvc_model_layer(model, i)));
        CHECK_OK(add_fixed_imp(kvc_model_layer(plain, i)));
    }
    size_t snap_len = 0;
    uint8_t *snap = snapshot_of(NULL, model, &snap_len);
    CHECK(snap != NULL);
    test_state **before = test_model_state_take(model);
    kvc_model *copy = model, *restored = model;
    CHECK_OUT_OF_MEMORY(test_hybrid_append(model, &h, len, 1),
                        test_model_state_matches(model, before));
    CHECK_OUT_OF_MEMORY(kvc_model_clone(model, &copy), test_model_state_matches(model, before));
    CHECK(copy == NULL);
    CHECK_OUT_OF_MEMORY(kvc_model_deserialize(snap, snap_len, &restored),
                        test_model_state_matches(model, before));
    CHECK(restored == NULL);
    CHECK_OUT_OF_MEMORY(kvc_model_evict(model, 40, 4, 8), test_model_state_matches(model, before));
    /* Allocations work again. */
    CHECK_OK(test_hybrid_append(model, &h, len, more));
    CHECK_OK(test_hybrid_append(plain, &h, len, more));
    CHECK(test_models_equal(model, plain));
    CHECK_OK(kvc_model_clone(model, &copy));
    CHECK(test_models_equal(copy, plain));
    test_model_state_free(before);
    free(snap);
    kvc_model_free(copy);
    kvc_model_free(plain);
    kvc_model_free(model);
    CHECK(test_fault_remove() == 0);
    test_hybrid_free(&h);
}

RUN_TESTS(CASE(set_allocator_should_refuse_null_functions),
          CASE(create_should_fail_cleanly_on_allocation_failure),
          CASE(append_should_fail_cleanly_on_allocation_failure),
          CASE(append_n_across_window_should_fail_cleanly_on_allocation_failure),
          CASE(append_under_max_rows_should_fail_cleanly_on_allocation_failure),
          CASE(clone_should_fail_cleanly_on_allocation_failure),
          CASE(attend_should_fail_cleanly_on_allocation_failure),
          CASE(attend_group_and_heads_should_fail_cleanly_on_allocation_failure),
          CASE(attention_head_should_fail_cleanly_on_allocation_failure),
          CASE(layer_should_stay_usable_after_allocator_is_restored),
          CASE(layer_life_should_leak_no_allocation),
          CASE(serialize_should_succeed_while_every_allocation_fails),
          CASE(writes_into_shared_pages_should_fail_cleanly_on_allocation_failure),
          CASE(layer_should_go_on_unchanged_after_an_out_of_memory_episode),
          CASE(accept_under_max_rows_should_fail_cleanly_on_allocation_failure),
          CASE(model_should_go_on_unchanged_after_an_out_of_memory_episode))
