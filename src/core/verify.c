/*
 * verify.c -- the speculative session of one layer.
 *
 * begin_verify marks where the drafts start; the drafts are ordinary appends
 * (full layers) or tentative steps (linear layers, see linear.c).  accept(j)
 * keeps the first j: a full layer truncates the rest, which the truncation
 * rules make bit-identical to never having appended them (rows, imp, the
 * field, memory_bytes: no f32 copy is let go while a verify is open, accept
 * lets go of those the rows it keeps no longer need); a linear layer copies
 * the snapshot of step j.
 */
#include "internal.h"

/* Drafts appended as rows since begin_verify. */
static size_t row_drafts(const kvc_layer *layer) {
    return layer->seq_len - layer->verify_base;
}

/* With max_rows, the j drafts kept count as appended: accept brings the
 * layer back down to max_rows, keeping them (as recent rows) and, room
 * allowing, the sinks -- or a decoder that only ever speculates would never
 * evict.  j = 0 changes nothing: a rejected verify leaves the layer as it
 * was.  This is the scratch that eviction needs. */
size_t kvc_accept_scratch_bytes(const kvc_layer *layer, size_t j) {
    if (!kvc_has_rows(layer) || !layer->max_rows || j == 0) return 0;
    const size_t kept = layer->seq_len - (row_drafts(layer) - j);
    return kept > layer->max_rows ? kvc_evict_scratch_bytes(kept) : 0;
}

/* The policy of that eviction: the drafts kept count among the recent. */
static void accept_policy(const kvc_layer *layer, size_t j, size_t *sinks, size_t *recent) {
    const size_t max_rows = layer->max_rows;
    *recent = layer->evict_recent > j ? layer->evict_recent : j;
    if (*recent > max_rows) *recent = max_rows;
    *sinks = layer->evict_sinks < max_rows - *recent ? layer->evict_sinks : max_rows - *recent;
}

kvc_status kvc_accept_prepare(kvc_layer *layer, size_t j) {
    if (kvc_accept_scratch_bytes(layer, j) == 0) return KVC_OK; /* no eviction */
    size_t sinks, recent;
    accept_policy(layer, j, &sinks, &recent);
    return kvc_evict_prepare(layer, sinks);
}

void kvc_accept_with(kvc_layer *layer, size_t j, uint8_t *scratch) {
    const size_t drafts = row_drafts(layer);
    const kvc_state_traits *states = kvc_kind_traits_of(layer->kind)->state;
    if (states) states->commit(layer->state, j);
    if (kvc_has_rows(layer)) { /* a shared layer has nothing to keep or drop: its owner does */
        kvc_layer_drop_from(layer, layer->next_position - (drafts - j)); /* drafts are the newest */
        if (layer->max_rows && j > 0 && layer->seq_len > layer->max_rows) {
            size_t sinks, recent;
            accept_policy(layer, j, &sinks, &recent);
            kvc_evict_with(layer, layer->max_rows, sinks, recent, scratch);
        }
        /* As the last of j single appends would. */
        if (j > 0) kvc_window_slide(layer, layer->next_position - 1);
    }
    layer->verifying = 0;
    if (kvc_has_rows(layer)) kvc_layer_release_copies(layer);
}

kvc_status kvc_layer_begin_verify(kvc_layer *layer) {
    if (!layer) return KVC_E_NULL_POINTER;
    if (layer->verifying) return KVC_E_VERIFYING;
    layer->verifying = 1;
    layer->verify_base = layer->seq_len;
    kvc_recurrent *r = kvc_recurrent_of(layer);
    if (r) r->undo = 0; /* the drafts overwrite the lane that would take it back */
    return KVC_OK;
}

size_t kvc_layer_draft_len(const kvc_layer *layer) {
    if (!layer || !layer->verifying) return 0;
    const kvc_state_traits *states = kvc_kind_traits_of(layer->kind)->state;
    if (!kvc_has_rows(layer)) return states ? states->tentative(layer->state) : 0;
    const size_t rows = row_drafts(layer);
    /* Rows beside a state: the drafts both took (accept keeps j of each). */
    return states && states->tentative(layer->state) < rows ? states->tentative(layer->state) : rows;
}

kvc_status kvc_layer_accept(kvc_layer *layer, size_t j) {
    if (!layer) return KVC_E_NULL_POINTER;
    if (!layer->verifying) return KVC_E_NOT_VERIFYING;
    if (j > kvc_layer_draft_len(layer)) return KVC_E_ACCEPT;
    if (kvc_accept_prepare(layer, j) != KVC_OK) return KVC_E_NOMEM;
    const size_t scratch_bytes = kvc_accept_scratch_bytes(layer, j);
    uint8_t *scratch = scratch_bytes ? kvc_realloc_array(NULL, scratch_bytes, 1) : NULL;
    if (scratch_bytes && !scratch) return KVC_E_NOMEM;
    kvc_accept_with(layer, j, scratch);
    kvc_free(scratch);
    return KVC_OK;
}

int kvc_layer_verifying(const kvc_layer *layer) {
    return layer ? layer->verifying : 0;
}
