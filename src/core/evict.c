/*
 * evict.c -- bounding a layer: keep `budget` of its positions and drop the
 * rest, in place.
 *
 * The kept positions are the first `sinks` (attention sinks, StreamingLLM),
 * the `recent` newest, and between them those with the highest importance
 * (the cumulative attention mass of kvc_layer_accumulate_imp: H2O's heavy
 * hitters), ties going to the older position.  Order is preserved, every
 * store of every head moves only the rows it keeps, quantized rows keep
 * their codes and scales, and the field stays: nothing is requantized, and
 * every kept row reads back as before (a row of the residual window keeps
 * its f32 copy, the others are read through their codes until they leave).
 * O(rows): a selection, not a sort, then one pass.  The pages the kept rows
 * move into are made writable first (copied when shared): from the first
 * slot past the sinks, where the first dropped one may lie.
 */
#include <string.h>

#include "internal.h"

/* a ranks before b: more attention, or as much and older. */
static int ranks_before(const float *imp, uint32_t a, uint32_t b) {
    return imp[a] > imp[b] || (imp[a] == imp[b] && a < b);
}

static void swap(uint32_t *x, uint32_t *y) {
    const uint32_t t = *x;
    *x = *y;
    *y = t;
}

/* Reorders slots[0, n) so that its first k are the k that rank first (in
 * some order).  Quickselect with a middle pivot: the ranking is a strict
 * total order, so the chosen set does not depend on the pivots. */
static void select_top(const float *imp, uint32_t *slots, size_t n, size_t k) {
    size_t lo = 0, hi = n;
    while (hi - lo > 1 && k > lo && k < hi) {
        swap(&slots[lo + (hi - lo) / 2], &slots[hi - 1]);
        const uint32_t pivot = slots[hi - 1];
        size_t store = lo;
        for (size_t i = lo; i + 1 < hi; i++) {
            if (ranks_before(imp, slots[i], pivot)) swap(&slots[i], &slots[store++]);
        }
        swap(&slots[store], &slots[hi - 1]);
        if (store < k) lo = store + 1;
        else hi = store;
    }
}

/* The scratch of a plan over L slots: the keep flags, then (4-byte aligned)
 * the selection's slot list and a copy of the importance values. */
size_t kvc_evict_scratch_bytes(size_t L) {
    return ((L + 3) & ~(size_t)3) + L * sizeof(uint32_t) + L * sizeof(float);
}

/* keep[s] = 1 for the slots the policy keeps; `block` is a plan's scratch. */
static void plan(const kvc_layer *layer, size_t budget, size_t sinks, size_t recent, uint8_t *block) {
    const size_t L = layer->seq_len;
    uint8_t *keep = block;
    if (L <= budget) {
        memset(keep, 1, L);
        return;
    }
    uint32_t *slots = (uint32_t *)(void *)(block + ((L + 3) & ~(size_t)3));
    float *imp = (float *)(void *)(slots + L);
    kvc_paged_read(&layer->imp, 0, L, imp);
    memset(keep, 0, L);
    memset(keep, 1, sinks);
    memset(keep + L - recent, 1, recent);
    const size_t middle = L - sinks - recent, heavy = budget - sinks - recent;
    for (size_t i = 0; i < middle; i++) slots[i] = (uint32_t)(sinks + i);
    select_top(imp, slots, middle, heavy);
    for (size_t i = 0; i < heavy; i++) keep[slots[i]] = 1;
}

/* Moves the kept rows of one store to the front, in order. */
static void compact_store(const kvc_layer *layer, size_t h, kvc_store *store, const uint8_t *keep) {
    const int quantized = store->traits->quantized;
    const size_t window_first = kvc_store_window_first(store, layer->residual_rows);
    size_t f32_read = 0, f32_write = 0, q_read = 0, q_write = 0, copies = 0;
    for (size_t s = 0; s < layer->seq_len; s++) {
        if (!kvc_head_stored(layer, s, h)) continue;
        if (quantized && kvc_slot_position(layer, s) >= KVC_Q8_WINDOW) {
            if (keep[s]) kvc_store_move_quantized(store, q_write++, q_read, window_first, &copies);
            q_read++;
        } else {
            if (keep[s]) kvc_paged_move(&store->rows, f32_write++, f32_read);
            f32_read++;
        }
    }
    kvc_store_compacted(store, f32_write, q_write, copies);
}

/* Drops every slot whose keep[] is 0; every page from the first dropped
 * slot on is writable. */
static void apply(kvc_layer *layer, const uint8_t *keep) {
    for (size_t h = 0; h < layer->num_kv_heads; h++) {
        compact_store(layer, h, &layer->heads[h].keys, keep);
        compact_store(layer, h, &layer->heads[h].values, keep);
    }
    size_t write = 0;
    for (size_t s = 0; s < layer->seq_len; s++) {
        if (!keep[s]) continue;
        kvc_paged_move(&layer->imp, write, s);
        kvc_paged_move(&layer->positions, write, s);
        kvc_paged_move(&layer->alive, write, s);
        write++;
    }
    kvc_slots_set_len(layer, write);
}

kvc_status kvc_evict_prepare(kvc_layer *layer, size_t sinks) {
    if (sinks >= layer->seq_len) return KVC_OK;
    kvc_status status = kvc_slots_make_writable(layer, sinks);
    for (size_t h = 0; h < layer->num_kv_heads && status == KVC_OK; h++) {
        /* Each store's rows from those of slot `sinks` on. */
        size_t below = 0, from = 0;
        for (size_t s = 0; s < sinks; s++) {
            if (!kvc_head_stored(layer, s, h)) continue;
            if (kvc_slot_position(layer, s) < KVC_Q8_WINDOW) below++;
            else from++;
        }
        for (int is_values = 0; is_values < 2 && status == KVC_OK; is_values++) {
            kvc_store *store = is_values ? &layer->heads[h].values : &layer->heads[h].keys;
            status = store->traits->quantized ? kvc_store_make_writable(store, below, from)
                                              : kvc_store_make_writable(store, below + from, 0);
        }
    }
    return status;
}

void kvc_evict_with(kvc_layer *layer, size_t budget, size_t sinks, size_t recent, uint8_t *block) {
    if (layer->seq_len <= budget) return;
    if (sinks > budget) sinks = budget;
    if (recent > budget - sinks) recent = budget - sinks;
    plan(layer, budget, sinks, recent, block);
    apply(layer, block);
}

kvc_status kvc_evict_to(kvc_layer *layer, size_t budget, size_t sinks, size_t recent) {
    if (layer->seq_len <= budget) return KVC_OK;
    if (kvc_evict_prepare(layer, sinks < budget ? sinks : budget) != KVC_OK) return KVC_E_NOMEM;
    uint8_t *block = kvc_realloc_array(NULL, kvc_evict_scratch_bytes(layer->seq_len), 1);
    if (!block) return KVC_E_NOMEM;
    kvc_evict_with(layer, budget, sinks, recent, block);
    kvc_free(block);
    return KVC_OK;
}

/* The checks of evict and eviction_plan. */
static kvc_status check_policy(const kvc_layer *layer, size_t budget, size_t sinks, size_t recent) {
    if (!layer) return KVC_E_NULL_POINTER;
    if (layer->kind != KVC_KIND_FULL) return KVC_E_KIND;
    if (budget == 0 || sinks > budget || recent > budget - sinks) return KVC_E_BUDGET;
    return KVC_OK;
}

kvc_status kvc_layer_evict(kvc_layer *layer, size_t budget, size_t sinks, size_t recent) {
    kvc_status status = check_policy(layer, budget, sinks, recent);
    if (status != KVC_OK) return status;
    if (layer->verifying) return KVC_E_VERIFYING;
    return kvc_evict_to(layer, budget, sinks, recent);
}

size_t kvc_window_start(const kvc_layer *layer, size_t position) {
    return layer->window && position >= layer->window ? position - layer->window + 1 : 0;
}

size_t kvc_window_truncatable(const kvc_layer *layer) {
    if (!layer->window || !layer->seq_len || kvc_slot_position(layer, 0) == 0) return SIZE_MAX;
    const size_t reach = kvc_slot_position(layer, 0) + layer->window - 1;
    return layer->next_position > reach ? layer->next_position - reach : 0;
}

void kvc_window_slide(kvc_layer *layer, size_t first) {
    const size_t reach = layer->window + layer->window_rollback - 1; /* back from `first` */
    if (!layer->window || first <= reach) return;
    const size_t from = (first - reach) & ~(KVC_PAGE_ELEMS - 1);
    const size_t gone = kvc_first_slot_from(layer, 0, layer->seq_len, from);
    if (gone) (void)kvc_evict_to(layer, layer->seq_len - gone, 0, layer->seq_len - gone);
}

kvc_status kvc_layer_slide_window(kvc_layer *layer, size_t window, size_t sinks) {
    if (sinks > window) return layer ? KVC_E_BUDGET : KVC_E_NULL_POINTER;
    return kvc_layer_evict(layer, window, sinks, window - sinks);
}

kvc_status kvc_layer_eviction_plan(const kvc_layer *layer, size_t budget, size_t sinks,
                                   size_t recent, uint32_t *kept, size_t kept_len, size_t *count) {
    kvc_status status = check_policy(layer, budget, sinks, recent);
    if (status != KVC_OK) return status;
    if (!count) return KVC_E_NULL_POINTER;
    const size_t L = layer->seq_len, n = L < budget ? L : budget;
    if (n && !kept) return KVC_E_NULL_POINTER;
    if (kept_len < n) return KVC_E_LENGTH;
    uint8_t *block = kvc_realloc_array(NULL, kvc_evict_scratch_bytes(L) + 1, 1);
    if (!block) return KVC_E_NOMEM;
    plan(layer, budget, sinks, recent, block);
    size_t written = 0;
    for (size_t s = 0; s < L; s++) {
        if (block[s]) kept[written++] = kvc_slot_position(layer, s);
    }
    kvc_free(block);
    *count = written;
    return KVC_OK;
}

kvc_status kvc_layer_set_max_rows(kvc_layer *layer, size_t max_rows, size_t sinks, size_t recent) {
    if (max_rows) {
        kvc_status status = check_policy(layer, max_rows, sinks, recent);
        if (status != KVC_OK) return status;
        if (max_rows > KVC_MAX_POSITIONS) return KVC_E_BUDGET; /* as the snapshot format holds it */
    } else if (!layer) {
        return KVC_E_NULL_POINTER;
    } else if (layer->kind != KVC_KIND_FULL) {
        return KVC_E_KIND;
    }
    /* Off means no policy either: a snapshot holds sinks = recent = 0 then. */
    layer->max_rows = max_rows;
    layer->evict_sinks = max_rows ? sinks : 0;
    layer->evict_recent = max_rows ? recent : 0;
    return KVC_OK;
}
