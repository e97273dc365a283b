/*
 * prefix.c -- caches of token prefixes: forks of model caches kept under the
 * tokens they hold, found again by the longest common prefix (vLLM's
 * automatic prefix caching, SGLang's radix cache, for one device or one
 * edge isolate).
 *
 * An entry is a fork (kvc_model_clone), so it costs the pages it keeps
 * alive, which the caches forked from it share in turn.  Entries are few
 * (a budget of bytes bounds them): a match compares the tokens with each,
 * and the budget drops the least recently used until the entries' pages --
 * each counted once -- fit.  An entry of a hybrid model (recurrent layers:
 * a state cannot be cut back) matches only whole: where a conversation
 * returns to what it held, at a turn boundary.
 */
#include <string.h>

#include "internal.h"

typedef struct prefix_entry {
    uint32_t *tokens;
    size_t len;
    kvc_model *model;
    uint64_t used; /* the tick of its last add or match */
} prefix_entry;

struct kvc_prefix_cache {
    size_t budget_bytes;
    prefix_entry *entries;
    size_t count, cap;
    uint64_t tick;
};

kvc_status kvc_prefix_cache_create(size_t budget_bytes, kvc_prefix_cache **out) {
    if (!out) return KVC_E_NULL_POINTER;
    *out = NULL;
    kvc_prefix_cache *cache = kvc_malloc(sizeof *cache);
    if (!cache) return KVC_E_NOMEM;
    memset(cache, 0, sizeof *cache);
    cache->budget_bytes = budget_bytes;
    *out = cache;
    return KVC_OK;
}

static void drop(kvc_prefix_cache *cache, size_t i) {
    kvc_free(cache->entries[i].tokens);
    kvc_model_free(cache->entries[i].model);
    cache->entries[i] = cache->entries[--cache->count];
}

void kvc_prefix_cache_clear(kvc_prefix_cache *cache) {
    while (cache && cache->count) drop(cache, cache->count - 1);
}

void kvc_prefix_cache_free(kvc_prefix_cache *cache) {
    if (!cache) return;
    kvc_prefix_cache_clear(cache);
    kvc_free(cache->entries);
    kvc_free(cache);
}

size_t kvc_prefix_cache_size(const kvc_prefix_cache *cache) {
    return cache ? cache->count : 0;
}

size_t kvc_prefix_cache_bytes(const kvc_prefix_cache *cache) {
    if (!cache) return 0;
    size_t bytes = 0;
    const uint32_t walk = kvc_walk_begin();
    for (size_t i = 0; i < cache->count; i++) {
        const kvc_model *model = cache->entries[i].model;
        for (size_t l = 0; l < kvc_model_num_layers(model); l++)
            bytes += kvc_layer_count_bytes(kvc_model_layer(model, l), walk);
    }
    kvc_walk_end();
    return bytes;
}

/* Whether a model has layers of a state (conv, delta): its entry matches whole only. */
static int stateful(const kvc_model *model) {
    for (size_t i = 0; i < kvc_model_num_layers(model); i++) {
        if (kvc_recurrent_of(kvc_model_layer(model, i))) return 1;
    }
    return 0;
}

/* A model an entry can hold: full, recurrent (conv, delta, Mamba-2, and
 * Mamba-2 beside rows), shared and none layers only (a match truncates the
 * full ones), none evicted (slot s must be token s),
 * and, when there are entries, their layers' kinds and geometry, mode and
 * residual window. */
static kvc_status check_model(const kvc_prefix_cache *cache, const kvc_model *model) {
    const size_t L = kvc_model_num_layers(model);
    const kvc_model *other = cache->count ? cache->entries[0].model : NULL;
    if (other && kvc_model_num_layers(other) != L) return KVC_E_PREFIX;
    for (size_t i = 0; i < L; i++) {
        const kvc_layer *layer = kvc_model_layer(model, i);
        if (layer->kind == KVC_KIND_SHARED) { /* its owner's rows are checked as that layer */
            if (other && kvc_layer_owner(kvc_model_layer(other, i)) != layer->owner) return KVC_E_PREFIX;
            continue;
        }
        if (layer->kind == KVC_KIND_NONE) {
            if (other && kvc_model_layer(other, i)->kind != KVC_KIND_NONE) return KVC_E_PREFIX;
            continue;
        }
        const kvc_recurrent *r = kvc_recurrent_of(layer);
        if (r) {
            const kvc_recurrent *like = other ? kvc_recurrent_of(kvc_model_layer(other, i)) : NULL;
            if (other && (!like || kvc_model_layer(other, i)->kind != layer->kind ||
                          kvc_recurrent_states.len(like) != kvc_recurrent_states.len(r) || like->channels != r->channels ||
                          like->key_heads != r->key_heads || like->value_heads != r->value_heads))
                return KVC_E_PREFIX;
        } else if (layer->kind != KVC_KIND_FULL) {
            return KVC_E_KIND;
        }
        if (!kvc_has_rows(layer)) continue; /* a state alone */
        if (other && kvc_model_layer(other, i)->kind != layer->kind) return KVC_E_PREFIX;
        if (layer->seq_len != layer->next_position) return KVC_E_PREFIX;
        if (!other) continue;
        const kvc_layer *like = kvc_model_layer(other, i);
        if (layer->num_kv_heads != like->num_kv_heads || layer->head_dim != like->head_dim ||
            layer->mode != like->mode || layer->residual_rows != like->residual_rows)
            return KVC_E_PREFIX;
    }
    return KVC_OK;
}

static size_t common_prefix(const uint32_t *a, size_t a_len, const uint32_t *b, size_t b_len) {
    const size_t n = a_len < b_len ? a_len : b_len;
    size_t i = 0;
    while (i < n && a[i] == b[i]) i++;
    return i;
}

/* The entry holding exactly these tokens, or count. */
static size_t find(const kvc_prefix_cache *cache, const uint32_t *tokens, size_t n) {
    for (size_t i = 0; i < cache->count; i++) {
        const prefix_entry *e = &cache->entries[i];
        if (e->len == n && common_prefix(e->tokens, e->len, tokens, n) == n) return i;
    }
    return cache->count;
}

/* Drops the least recently used entries until the rest fit the budget. */
static void fit_budget(kvc_prefix_cache *cache) {
    while (cache->count && kvc_prefix_cache_bytes(cache) > cache->budget_bytes) {
        size_t oldest = 0;
        for (size_t i = 1; i < cache->count; i++) {
            if (cache->entries[i].used < cache->entries[oldest].used) oldest = i;
        }
        drop(cache, oldest);
    }
}

kvc_status kvc_prefix_cache_add(kvc_prefix_cache *cache, const uint32_t *tokens, size_t n,
                                const kvc_model *model, int *kept) {
    if (kept) *kept = 0;
    if (!cache || !model || (n && !tokens)) return KVC_E_NULL_POINTER;
    if (kvc_model_verifying(model)) return KVC_E_VERIFYING;
    if (n == 0 || n != kvc_model_seq_len(model)) return KVC_E_LENGTH;
    kvc_status status = check_model(cache, model);
    if (status != KVC_OK) return status;
    const size_t same = find(cache, tokens, n);
    if (same == cache->count && cache->count == cache->cap) {
        const size_t cap = kvc_grown_capacity(cache->cap, cache->count + 1, SIZE_MAX);
        prefix_entry *entries = kvc_realloc_array(cache->entries, cap, sizeof *entries);
        if (!entries) return KVC_E_NOMEM;
        cache->entries = entries;
        cache->cap = cap;
    }
    kvc_model *fork;
    status = kvc_model_clone(model, &fork);
    if (status != KVC_OK) return status;
    if (same < cache->count) { /* the same tokens again: the newer cache replaces it */
        kvc_model_free(cache->entries[same].model);
        cache->entries[same].model = fork;
        cache->entries[same].used = ++cache->tick;
    } else {
        uint32_t *copy = kvc_realloc_array(NULL, n, sizeof(uint32_t));
        if (!copy) {
            kvc_model_free(fork);
            return KVC_E_NOMEM;
        }
        memcpy(copy, tokens, n * sizeof(uint32_t));
        cache->entries[cache->count++] = (prefix_entry){copy, n, fork, ++cache->tick};
    }
    fit_budget(cache);
    if (kept) *kept = find(cache, tokens, n) < cache->count;
    return KVC_OK;
}

kvc_status kvc_prefix_cache_match(kvc_prefix_cache *cache, const uint32_t *tokens, size_t n,
                                  size_t *length, kvc_model **out) {
    if (out) *out = NULL;
    if (length) *length = 0;
    if (!cache || !length || !out || (n && !tokens)) return KVC_E_NULL_POINTER;
    size_t best = cache->count, best_len = 0;
    for (size_t i = 0; i < cache->count; i++) {
        const prefix_entry *e = &cache->entries[i];
        size_t common = common_prefix(e->tokens, e->len, tokens, n);
        if (common < e->len && stateful(e->model)) common = 0; /* whole or nothing */
        if (common > best_len || (common == best_len && best < cache->count &&
                                  e->used > cache->entries[best].used)) {
            best = i;
            best_len = common;
        }
    }
    if (best == cache->count || best_len < KVC_Q8_WINDOW) return KVC_OK; /* no match */
    prefix_entry *e = &cache->entries[best];
    kvc_model *fork;
    kvc_status status = kvc_model_clone(e->model, &fork);
    if (status != KVC_OK) return status;
    (void)kvc_model_truncate_last(fork, e->len - best_len); /* full layers (a stateful entry: by 0), not verifying */
    e->used = ++cache->tick;
    *length = best_len;
    *out = fork;
    return KVC_OK;
}

kvc_status kvc_prefix_cache_delete(kvc_prefix_cache *cache, const uint32_t *tokens, size_t n,
                                   int *deleted) {
    if (deleted) *deleted = 0;
    if (!cache || (n && !tokens)) return KVC_E_NULL_POINTER;
    const size_t i = find(cache, tokens, n);
    if (i == cache->count) return KVC_OK;
    drop(cache, i);
    if (deleted) *deleted = 1;
    return KVC_OK;
}
