/*
 * verify.c -- the speculative session of one layer.
 *
 * begin_verify marks where the drafts start; the drafts are ordinary appends
 * (full layers) or tentative steps (linear layers, see linear.c).  accept(j)
 * keeps the first j: a full layer truncates the rest, which the truncation
 * rules make bit-identical to never having appended them (rows, imp, q8
 * field, memory_bytes); a linear layer copies the snapshot of step j.
 */
#include "internal.h"

kvc_status kvc_layer_begin_verify(kvc_layer *layer) {
    if (!layer) return KVC_E_NULL_POINTER;
    if (layer->verifying) return KVC_E_VERIFYING;
    layer->verifying = 1;
    layer->verify_base = layer->seq_len;
    return KVC_OK;
}

size_t kvc_layer_draft_len(const kvc_layer *layer) {
    if (!layer || !layer->verifying) return 0;
    return layer->linear ? layer->linear->tentative : layer->seq_len - layer->verify_base;
}

kvc_status kvc_layer_accept(kvc_layer *layer, size_t j) {
    if (!layer) return KVC_E_NULL_POINTER;
    if (!layer->verifying) return KVC_E_NOT_VERIFYING;
    const size_t drafts = kvc_layer_draft_len(layer);
    if (j > drafts) return KVC_E_ACCEPT;
    if (layer->linear) kvc_linear_commit(layer->linear, j);
    else kvc_layer_drop_from(layer, layer->next_position - (drafts - j)); /* drafts are the newest */
    layer->verifying = 0;
    return KVC_OK;
}

int kvc_layer_verifying(const kvc_layer *layer) {
    return layer ? layer->verifying : 0;
}
