/*
 * layer.c -- a layer's life: create, clone, clear, free, and what can be read
 * off it (lengths, rows, byte counts, a description).
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "../kernels/q8-rows.h"

/* ---- the registry of live layers, for kvc_memory_stats ---- */

static atomic_flag registry_busy = ATOMIC_FLAG_INIT;
static kvc_layer *registry_first;
static uint32_t last_walk;

static void registry_lock(void) {
    while (atomic_flag_test_and_set_explicit(&registry_busy, memory_order_acquire)) {
    }
}

static void registry_unlock(void) {
    atomic_flag_clear_explicit(&registry_busy, memory_order_release);
}

uint32_t kvc_walk_begin(void) {
    registry_lock();
    return ++last_walk ? last_walk : ++last_walk; /* 0 is no walk's */
}

void kvc_walk_end(void) {
    registry_unlock();
}

static const kvc_kind_traits kinds[] = {
    [KVC_KIND_FULL] = {"full", 1, NULL, 1},
    [KVC_KIND_LINEAR] = {"linear", 0, &kvc_linear_states, 1},
    [KVC_KIND_WINDOW] = {"window", 1, NULL, 1},
    [KVC_KIND_CONV] = {"conv", 0, &kvc_recurrent_states, 1},
    [KVC_KIND_DELTA] = {"delta", 0, &kvc_recurrent_states, 1},
    [KVC_KIND_SHARED] = {"shared", 0, NULL, 0},
    [KVC_KIND_MAMBA2] = {"mamba2", 0, &kvc_recurrent_states, 1},
    [KVC_KIND_NONE] = {"none", 0, NULL, 0},
    [KVC_KIND_ATTN_MAMBA2] = {"attn_mamba2", 1, &kvc_recurrent_states, 1},
};

const kvc_kind_traits *kvc_kind_traits_of(kvc_kind kind) {
    return &kinds[(unsigned)kind < sizeof kinds / sizeof kinds[0] ? kind : KVC_KIND_FULL];
}

/* The layer's state family (NULL: rows, or shared). */
static const kvc_state_traits *states_of(const kvc_layer *layer) {
    return kvc_kind_traits_of(layer->kind)->state;
}

kvc_layer *kvc_layer_alloc(kvc_kind kind) {
    kvc_layer *layer = kvc_malloc(sizeof *layer);
    if (!layer) return NULL;
    memset(layer, 0, sizeof *layer);
    layer->kind = kind;
    kvc_paged_init(&layer->imp, sizeof(float), KVC_PAGE_SHIFT);
    kvc_paged_init(&layer->positions, sizeof(uint32_t), KVC_PAGE_SHIFT);
    kvc_paged_init(&layer->alive, 1, KVC_PAGE_SHIFT);
    registry_lock();
    layer->registry_next = registry_first;
    if (registry_first) registry_first->registry_prev = layer;
    registry_first = layer;
    registry_unlock();
    return layer;
}

kvc_status kvc_layer_create(size_t num_kv_heads, size_t head_dim, kvc_mode mode,
                            kvc_layer **out) {
    if (!out) return KVC_E_NULL_POINTER;
    *out = NULL;
    if (num_kv_heads == 0 || num_kv_heads > KVC_MAX_KV_HEADS) return KVC_E_NUM_KV_HEADS;
    if (head_dim == 0 || head_dim > KVC_MAX_HEAD_DIM) return KVC_E_HEAD_DIM;
    if ((unsigned)mode >= KVC_MODE_COUNT) return KVC_E_MODE;

    kvc_layer *layer = kvc_layer_alloc(KVC_KIND_FULL);
    if (!layer) return KVC_E_NOMEM;
    layer->num_kv_heads = num_kv_heads;
    layer->head_dim = head_dim;
    layer->mode = mode;
    layer->residual_rows = KVC_Q4_RESIDUAL_ROWS;
    layer->map_bytes = (num_kv_heads + 7) / 8;
    kvc_paged_init(&layer->alive, layer->map_bytes, KVC_PAGE_SHIFT);
    layer->heads = kvc_realloc_array(NULL, num_kv_heads, sizeof(kvc_head));
    if (!layer->heads) {
        kvc_layer_free(layer);
        return KVC_E_NOMEM;
    }
    for (size_t h = 0; h < num_kv_heads; h++) {
        kvc_store_init(&layer->heads[h].keys, head_dim, kvc_mode_traits(mode, 0));
        kvc_store_init(&layer->heads[h].values, head_dim, kvc_mode_traits(mode, 1));
    }
    *out = layer;
    return KVC_OK;
}

kvc_status kvc_layer_create_window(size_t num_kv_heads, size_t head_dim, kvc_mode mode,
                                   size_t window, size_t rollback, kvc_layer **out) {
    if (!out) return KVC_E_NULL_POINTER;
    *out = NULL;
    if (window == 0 || window > KVC_MAX_POSITIONS || rollback > KVC_MAX_POSITIONS) return KVC_E_WINDOW;
    kvc_status status = kvc_layer_create(num_kv_heads, head_dim, mode, out);
    if (status != KVC_OK) return status;
    (*out)->kind = KVC_KIND_WINDOW;
    (*out)->window = window;
    (*out)->window_rollback = rollback;
    return KVC_OK;
}

size_t kvc_layer_window(const kvc_layer *layer) {
    return layer ? layer->window : 0;
}

size_t kvc_layer_window_rollback(const kvc_layer *layer) {
    return layer ? layer->window_rollback : 0;
}

void kvc_layer_free(kvc_layer *layer) {
    if (!layer || layer->in_model) return;
    registry_lock();
    if (layer->registry_prev) layer->registry_prev->registry_next = layer->registry_next;
    else registry_first = layer->registry_next;
    if (layer->registry_next) layer->registry_next->registry_prev = layer->registry_prev;
    registry_unlock();
    if (states_of(layer) && layer->state) states_of(layer)->free(layer->state); /* NULL: a fork that failed to copy it */
    if (layer->heads) {
        for (size_t h = 0; h < layer->num_kv_heads; h++) {
            kvc_store_free(&layer->heads[h].keys);
            kvc_store_free(&layer->heads[h].values);
        }
    }
    kvc_free(layer->heads);
    kvc_paged_free(&layer->imp);
    kvc_paged_free(&layer->positions);
    kvc_paged_free(&layer->alive);
    kvc_free(layer);
}

/* A fork of a layer of rows: the same slots and rows, in the very same pages. */
static kvc_status fork_rows(const kvc_layer *layer, kvc_layer **out) {
    kvc_layer *copy;
    kvc_status status = kvc_layer_create(layer->num_kv_heads, layer->head_dim, layer->mode, &copy);
    if (status != KVC_OK) return status;
    copy->kind = layer->kind;
    copy->window = layer->window;
    copy->window_rollback = layer->window_rollback;
    copy->seq_len = layer->seq_len;
    copy->next_position = layer->next_position;
    copy->field_frozen = layer->field_frozen;
    copy->residual_rows = layer->residual_rows;
    copy->max_rows = layer->max_rows;
    copy->evict_sinks = layer->evict_sinks;
    copy->evict_recent = layer->evict_recent;
    status = kvc_paged_fork(&copy->imp, &layer->imp);
    if (status == KVC_OK) status = kvc_paged_fork(&copy->positions, &layer->positions);
    if (status == KVC_OK) status = kvc_paged_fork(&copy->alive, &layer->alive);
    for (size_t h = 0; h < layer->num_kv_heads && status == KVC_OK; h++) {
        kvc_store_free(&copy->heads[h].keys); /* empty: a fork replaces it */
        status = kvc_store_fork(&copy->heads[h].keys, &layer->heads[h].keys);
        if (status == KVC_OK) {
            kvc_store_free(&copy->heads[h].values);
            status = kvc_store_fork(&copy->heads[h].values, &layer->heads[h].values);
        }
    }
    if (status != KVC_OK) {
        kvc_layer_free(copy);
        return status;
    }
    *out = copy;
    return KVC_OK;
}

#define SWAP(type, x, y) \
    do { \
        type swapped_ = (x); \
        (x) = (y); \
        (y) = swapped_; \
    } while (0)

void kvc_layer_swap_rows(kvc_layer *a, kvc_layer *b) {
    SWAP(size_t, a->seq_len, b->seq_len);
    SWAP(size_t, a->next_position, b->next_position);
    SWAP(int, a->field_frozen, b->field_frozen);
    SWAP(kvc_paged, a->imp, b->imp);
    SWAP(kvc_paged, a->positions, b->positions);
    SWAP(kvc_paged, a->alive, b->alive);
    SWAP(kvc_head *, a->heads, b->heads);
}

kvc_status kvc_layer_clone(const kvc_layer *layer, kvc_layer **out) {
    if (!out) return KVC_E_NULL_POINTER;
    *out = NULL;
    if (!layer) return KVC_E_NULL_POINTER;
    if (layer->verifying) return KVC_E_VERIFYING;
    if (layer->kind == KVC_KIND_SHARED) return kvc_layer_create_shared(layer->owner, out);
    if (layer->kind == KVC_KIND_NONE) return kvc_layer_create_none(out);
    kvc_layer *copy = NULL;
    kvc_status status = kvc_has_rows(layer) ? fork_rows(layer, &copy) : KVC_OK;
    if (status == KVC_OK && !copy) copy = kvc_layer_alloc(layer->kind);
    if (!copy) return status == KVC_OK ? KVC_E_NOMEM : status;
    /* A recurrent state is a few MB at most: a fork copies it (beside rows too). */
    if (states_of(layer)) status = states_of(layer)->clone(&copy->state, layer->state);
    if (status == KVC_OK) *out = copy;
    else kvc_layer_free(copy);
    return status;
}

void kvc_layer_clear(kvc_layer *layer) {
    if (!layer) return;
    layer->verifying = 0;
    if (states_of(layer)) states_of(layer)->clear(layer->state);
    for (size_t h = 0; h < layer->num_kv_heads; h++) {
        kvc_head *head = &layer->heads[h];
        kvc_store_drop(&head->keys, head->keys.rows.len, head->keys.qrows.len);
        kvc_store_drop(&head->values, head->values.rows.len, head->values.qrows.len);
    }
    kvc_slots_set_len(layer, 0);
    kvc_field_unfreeze(layer);
    layer->next_position = 0;
}

size_t kvc_layer_num_kv_heads(const kvc_layer *layer) {
    return layer ? layer->num_kv_heads : 0;
}

size_t kvc_layer_head_dim(const kvc_layer *layer) {
    return layer ? layer->head_dim : 0;
}

kvc_mode kvc_layer_mode(const kvc_layer *layer) {
    return layer ? layer->mode : KVC_MODE_F32;
}

kvc_status kvc_layer_set_residual_rows(kvc_layer *layer, size_t rows) {
    if (!layer) return KVC_E_NULL_POINTER;
    if (!kvc_has_rows(layer)) return KVC_E_KIND;
    if (rows > KVC_Q4_MAX_RESIDUAL_ROWS || layer->seq_len > 0) return KVC_E_RESIDUAL;
    layer->residual_rows = rows;
    return KVC_OK;
}

size_t kvc_layer_residual_rows(const kvc_layer *layer) {
    return layer && kvc_has_rows(layer) ? layer->residual_rows : 0;
}

size_t kvc_layer_exact_rollback(const kvc_layer *layer) {
    if (!layer || !kvc_has_rows(layer)) return 0;
    size_t exact = SIZE_MAX;
    for (size_t h = 0; h < layer->num_kv_heads; h++) {
        const size_t k = kvc_store_exact_rollback(&layer->heads[h].keys, layer->residual_rows);
        const size_t v = kvc_store_exact_rollback(&layer->heads[h].values, layer->residual_rows);
        if (k < exact) exact = k;
        if (v < exact) exact = v;
    }
    const size_t truncatable = kvc_window_truncatable(layer);
    if (truncatable < exact) exact = truncatable;
    /* Rows beside a state: that state takes back its last call only. */
    const kvc_recurrent *r = kvc_recurrent_of(layer);
    return r && r->undo < exact ? r->undo : exact;
}

size_t kvc_layer_seq_len(const kvc_layer *layer) {
    return layer ? layer->seq_len : 0;
}

size_t kvc_layer_head_len(const kvc_layer *layer, size_t kv_head) {
    if (!layer || kv_head >= layer->num_kv_heads) return 0;
    return kvc_store_len(&layer->heads[kv_head].keys);
}

int kvc_layer_field_frozen(const kvc_layer *layer) {
    return layer ? layer->field_frozen : 0;
}

size_t kvc_layer_memory_bytes(const kvc_layer *layer) {
    if (!layer) return 0;
    const size_t d = layer->head_dim;
    size_t bytes = states_of(layer) ? states_of(layer)->memory_bytes(layer->state) : 0;
    bytes += layer->seq_len * (sizeof(float) + sizeof(uint32_t) + layer->map_bytes);
    for (size_t h = 0; h < layer->num_kv_heads; h++) {
        bytes += kvc_store_bytes(&layer->heads[h].keys, layer->residual_rows);
        bytes += kvc_store_bytes(&layer->heads[h].values, layer->residual_rows);
    }
    if (layer->field_frozen)
        bytes += kvc_quantized_components(layer->mode) * layer->num_kv_heads * d * sizeof(float);
    return bytes;
}

/* What one component of one head holds at n positions (all alive). */
/* In 64 bits: a long context's cache passes 2^32 bytes, which a 32-bit
 * size_t (wasm32) would wrap to a size that seems to fit. */
static uint64_t component_bytes_for(const kvc_component_traits *traits, size_t d, size_t n,
                                    size_t residual_rows) {
    if (!traits->quantized) return (uint64_t)n * traits->row_bytes(d);
    const size_t sinks = n < KVC_Q8_WINDOW ? n : KVC_Q8_WINDOW;
    const size_t quantized = n - sinks;
    const size_t copies = traits->keeps_copies ? (quantized < residual_rows ? quantized : residual_rows) : 0;
    return ((uint64_t)sinks + copies) * d * sizeof(float) + (uint64_t)quantized * traits->row_bytes(d);
}

size_t kvc_layer_bytes_for(size_t num_kv_heads, size_t head_dim, kvc_mode mode, size_t positions) {
    if (num_kv_heads == 0 || num_kv_heads > KVC_MAX_KV_HEADS || head_dim == 0 || head_dim > KVC_MAX_HEAD_DIM ||
        mode >= KVC_MODE_COUNT || positions > KVC_MAX_POSITIONS) {
        return 0;
    }
    const size_t slot = sizeof(float) + sizeof(uint32_t) + (num_kv_heads + 7) / 8;
    uint64_t bytes = (uint64_t)positions * slot;
    for (int values = 0; values < 2; values++) {
        bytes += num_kv_heads * component_bytes_for(kvc_mode_traits(mode, values), head_dim, positions,
                                                    KVC_Q4_RESIDUAL_ROWS);
    }
    if (positions > KVC_Q8_WINDOW) bytes += (uint64_t)kvc_quantized_components(mode) * num_kv_heads * head_dim * sizeof(float);
    return bytes > SIZE_MAX ? SIZE_MAX : (size_t)bytes;
}

size_t kvc_layer_shared_bytes(const kvc_layer *layer) {
    if (!layer || !kvc_has_rows(layer)) return 0;
    size_t bytes = kvc_paged_shared_bytes(&layer->imp, 0) + kvc_paged_shared_bytes(&layer->positions, 0) +
                   kvc_paged_shared_bytes(&layer->alive, 0);
    for (size_t h = 0; h < layer->num_kv_heads; h++) {
        bytes += kvc_store_shared_bytes(&layer->heads[h].keys, layer->residual_rows);
        bytes += kvc_store_shared_bytes(&layer->heads[h].values, layer->residual_rows);
    }
    return bytes;
}

size_t kvc_layer_count_bytes(const kvc_layer *layer, uint32_t walk) {
    size_t bytes = states_of(layer) ? states_of(layer)->memory_bytes(layer->state) : 0;
    bytes += kvc_paged_count_bytes(&layer->imp, 0, walk) +
                   kvc_paged_count_bytes(&layer->positions, 0, walk) +
                   kvc_paged_count_bytes(&layer->alive, 0, walk);
    for (size_t h = 0; h < layer->num_kv_heads; h++) {
        bytes += kvc_store_count_bytes(&layer->heads[h].keys, layer->residual_rows, walk);
        bytes += kvc_store_count_bytes(&layer->heads[h].values, layer->residual_rows, walk);
    }
    return bytes;
}

void kvc_memory_stats(kvc_memory_usage *usage) {
    if (!usage) return;
    size_t bytes = 0, caches = 0;
    const uint32_t walk = kvc_walk_begin();
    for (const kvc_layer *layer = registry_first; layer; layer = layer->registry_next) {
        bytes += kvc_layer_count_bytes(layer, walk);
        caches++;
    }
    kvc_walk_end();
    usage->cache_bytes = bytes;
    usage->layers = caches;
    usage->pages = kvc_live_pages();
}

size_t kvc_layer_capacity_bytes(const kvc_layer *layer) {
    if (!layer) return 0;
    size_t bytes = sizeof *layer + layer->num_kv_heads * sizeof(kvc_head);
    if (states_of(layer)) bytes += states_of(layer)->capacity_bytes(layer->state);
    bytes += kvc_paged_capacity_bytes(&layer->imp) + kvc_paged_capacity_bytes(&layer->positions) +
             kvc_paged_capacity_bytes(&layer->alive);
    for (size_t h = 0; h < layer->num_kv_heads; h++) {
        bytes += kvc_store_capacity_bytes(&layer->heads[h].keys);
        bytes += kvc_store_capacity_bytes(&layer->heads[h].values);
    }
    return bytes;
}

/* Shared by head_keys and head_values: the checks, then the copy. */
static kvc_status copy_head_rows(const kvc_layer *layer, size_t kv_head, int is_values,
                                 float *dst, size_t dst_len) {
    if (!layer) return KVC_E_NULL_POINTER;
    if (!kvc_has_rows(layer)) return KVC_E_KIND;
    if (kv_head >= layer->num_kv_heads) return KVC_E_KV_HEAD;
    const kvc_head *head = &layer->heads[kv_head];
    const kvc_store *store = is_values ? &head->values : &head->keys;
    const size_t count = kvc_store_len(store) * layer->head_dim;
    if (count && !dst) return KVC_E_NULL_POINTER;
    if (dst_len < count) return KVC_E_LENGTH;
    kvc_store_copy_rows(store, layer->head_dim, layer->residual_rows, dst, kvc_kernels_active());
    return KVC_OK;
}

kvc_status kvc_layer_head_keys(const kvc_layer *layer, size_t kv_head, float *dst,
                               size_t dst_len) {
    return copy_head_rows(layer, kv_head, 0, dst, dst_len);
}

kvc_status kvc_layer_head_values(const kvc_layer *layer, size_t kv_head, float *dst,
                                 size_t dst_len) {
    return copy_head_rows(layer, kv_head, 1, dst, dst_len);
}

/* snprintf at `at` of buf: what it wrote (or would have) is added to *at. */
#define APPEND(at, buf, buf_len, ...) \
    do { \
        const int written_ = snprintf((buf) && *(at) < (buf_len) ? (buf) + *(at) : NULL, \
                                      *(at) < (buf_len) ? (buf_len) - *(at) : 0, __VA_ARGS__); \
        if (written_ > 0) *(at) += (size_t)written_; \
    } while (0)

size_t kvc_layer_describe(const kvc_layer *layer, char *buf, size_t buf_len) {
    if (!layer) return 0;
    if (!buf) buf_len = 0;
    size_t at = 0;
    const kvc_linear *linear = kvc_linear_of(layer);
    const kvc_recurrent *r = kvc_recurrent_of(layer);
    APPEND(&at, buf, buf_len, "kvc_layer{kind=%s", kvc_kind_traits_of(layer->kind)->name);
    if (linear) {
        APPEND(&at, buf, buf_len, " num_heads=%zu num_features=%zu value_dim=%zu phase_mass=%g steps=%zu",
               linear->num_heads, linear->num_features, linear->value_dim, linear->phase_mass,
               kvc_layer_steps(layer));
    }
    if (layer->kind == KVC_KIND_SHARED) APPEND(&at, buf, buf_len, " owner=%zu", layer->owner);
    if (kvc_has_rows(layer)) {
        APPEND(&at, buf, buf_len,
               " window=%zu mode=%s num_kv_heads=%zu head_dim=%zu seq_len=%zu residual_rows=%zu field_frozen=%d",
               layer->window, kvc_mode_name(layer->mode), layer->num_kv_heads, layer->head_dim, layer->seq_len,
               layer->residual_rows, layer->field_frozen);
    }
    if (r) {
        APPEND(&at, buf, buf_len,
               " channels=%zu kernel=%zu key_heads=%zu value_heads=%zu key_dim=%zu value_dim=%zu steps=%zu",
               r->channels, r->kernel, r->key_heads, r->value_heads, r->key_dim, r->value_dim,
               kvc_layer_steps(layer));
    }
    APPEND(&at, buf, buf_len, " verifying=%d memory_bytes=%zu capacity_bytes=%zu}", layer->verifying,
           kvc_layer_memory_bytes(layer), kvc_layer_capacity_bytes(layer));
    return at;
}
