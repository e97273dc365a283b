/*
 * positions.c -- the slots: which head stored which position.
 *
 * A layer holds its positions in slots, in order; each slot has its
 * absolute position (slot s is position s until an eviction drops some),
 * an importance value, and one bit per head saying whether that head stored
 * it, each kind in a paged sequence of its own.  A head that skipped positions (pruned, or masked in a GQA group)
 * keeps its rows aligned with the positions they came from, so its
 * probabilities land on the right importance slots.
 */
#include "internal.h"

size_t kvc_layer_positions_taken(const kvc_layer *layer) {
    if (!kvc_has_rows(layer)) return kvc_layer_steps(layer);
    const int stateful = kvc_kind_traits_of(layer->kind)->state != NULL;
    return stateful && kvc_layer_steps(layer) < layer->next_position ? kvc_layer_steps(layer) : layer->next_position;
}

int kvc_layer_parts_agree(const kvc_layer *layer) {
    return !kvc_has_rows(layer) || !kvc_kind_traits_of(layer->kind)->state ||
           kvc_layer_steps(layer) == layer->next_position;
}

kvc_status kvc_slots_reserve(kvc_layer *layer, size_t n) {
    kvc_status status = kvc_paged_reserve(&layer->imp, n);
    if (status == KVC_OK) status = kvc_paged_reserve(&layer->positions, n);
    if (status == KVC_OK) status = kvc_paged_reserve(&layer->alive, n);
    return status;
}

void kvc_slots_set_len(kvc_layer *layer, size_t len) {
    kvc_paged_set_len(&layer->imp, len);
    kvc_paged_set_len(&layer->positions, len);
    kvc_paged_set_len(&layer->alive, len);
    layer->seq_len = len;
}

kvc_status kvc_slots_make_writable(kvc_layer *layer, size_t first) {
    kvc_status status = kvc_paged_make_writable(&layer->imp, first, layer->seq_len);
    if (status == KVC_OK) status = kvc_paged_make_writable(&layer->positions, first, layer->seq_len);
    if (status == KVC_OK) status = kvc_paged_make_writable(&layer->alive, first, layer->seq_len);
    return status;
}

int kvc_head_stored(const kvc_layer *layer, size_t slot, size_t kv_head) {
    return (kvc_paged_at(&layer->alive, slot)[kv_head >> 3] >> (kv_head & 7)) & 1;
}

size_t kvc_head_rows_between(const kvc_layer *layer, size_t kv_head, size_t first, size_t last) {
    if (kvc_store_len(&layer->heads[kv_head].keys) == layer->seq_len) return last - first; /* stored every slot */
    size_t rows = 0;
    for (size_t s = first; s < last; s++) rows += (size_t)kvc_head_stored(layer, s, kv_head);
    return rows;
}

size_t kvc_first_slot_from(const kvc_layer *layer, size_t first, size_t last, size_t position) {
    /* Binary search: positions are strictly increasing. */
    while (first < last) {
        const size_t mid = first + (last - first) / 2;
        if (kvc_slot_position(layer, mid) < position) first = mid + 1;
        else last = mid;
    }
    return first;
}

/* Copies one value per slot of the paged sequence `slots` (the layer's
 * positions or importances) to dst, which holds dst_len of them. */
static kvc_status read_slots(const kvc_layer *layer, const kvc_paged *slots, void *dst, size_t dst_len) {
    if (!kvc_has_rows(layer)) return KVC_E_KIND;
    if (layer->seq_len && !dst) return KVC_E_NULL_POINTER;
    if (dst_len < layer->seq_len) return KVC_E_LENGTH;
    kvc_paged_read(slots, 0, layer->seq_len, dst);
    return KVC_OK;
}

kvc_status kvc_layer_positions(const kvc_layer *layer, uint32_t *dst, size_t dst_len) {
    return layer ? read_slots(layer, &layer->positions, dst, dst_len) : KVC_E_NULL_POINTER;
}

size_t kvc_layer_next_position(const kvc_layer *layer) {
    return layer ? layer->next_position : 0;
}

kvc_status kvc_layer_head_positions(const kvc_layer *layer, size_t kv_head, uint32_t *dst,
                                    size_t dst_len) {
    if (!layer) return KVC_E_NULL_POINTER;
    if (!kvc_has_rows(layer)) return KVC_E_KIND;
    if (kv_head >= layer->num_kv_heads) return KVC_E_KV_HEAD;
    size_t len = kvc_layer_head_len(layer, kv_head);
    if (len && !dst) return KVC_E_NULL_POINTER;
    if (dst_len < len) return KVC_E_LENGTH;
    size_t row = 0;
    for (size_t s = 0; s < layer->seq_len; s++) {
        if (kvc_head_stored(layer, s, kv_head)) dst[row++] = kvc_slot_position(layer, s);
    }
    return KVC_OK;
}

/* 1 if every probability is finite and not negative. */
static int probs_valid(const float *probs, size_t n) {
    if (!kvc_kernels_active()->all_finite(n, probs)) return 0;
    for (size_t p = 0; p < n; p++) {
        if (probs[p] < 0.0f) return 0;
    }
    return 1;
}

kvc_status kvc_layer_accumulate_imp(kvc_layer *layer, const float *probs, size_t n) {
    if (!layer) return KVC_E_NULL_POINTER;
    if (!kvc_has_rows(layer)) return KVC_E_KIND;
    if (n != layer->seq_len) return KVC_E_LENGTH;
    if (n && !probs) return KVC_E_NULL_POINTER;
    if (!probs_valid(probs, n)) return KVC_E_PROBS;
    if (kvc_paged_make_writable(&layer->imp, 0, n) != KVC_OK) return KVC_E_NOMEM;
    for (size_t p = 0; p < n; p++) *kvc_slot_imp(layer, p) += probs[p];
    return KVC_OK;
}

kvc_status kvc_layer_accumulate_imp_head(kvc_layer *layer, size_t kv_head, const float *probs,
                                         size_t n) {
    if (!layer) return KVC_E_NULL_POINTER;
    if (!kvc_has_rows(layer)) return KVC_E_KIND;
    if (kv_head >= layer->num_kv_heads) return KVC_E_KV_HEAD;
    if (n != kvc_layer_head_len(layer, kv_head)) return KVC_E_LENGTH;
    if (n && !probs) return KVC_E_NULL_POINTER;
    if (!probs_valid(probs, n)) return KVC_E_PROBS;
    if (kvc_paged_make_writable(&layer->imp, 0, layer->seq_len) != KVC_OK) return KVC_E_NOMEM;
    size_t row = 0;
    for (size_t p = 0; p < layer->seq_len; p++) {
        if (kvc_head_stored(layer, p, kv_head)) *kvc_slot_imp(layer, p) += probs[row++];
    }
    return KVC_OK;
}

kvc_status kvc_layer_imp(const kvc_layer *layer, float *dst, size_t dst_len) {
    return layer ? read_slots(layer, &layer->imp, dst, dst_len) : KVC_E_NULL_POINTER;
}
