/*
 * shared.c -- the kinds that hold nothing.  Shared (Gemma 4's shared-KV
 * blocks): a layer that names the earlier layer of its model whose rows it
 * reads.  The model's operations (model.c) pass it by: its owner is the one
 * that truncates, verifies, evicts and counts its memory, once.  None
 * (Nemotron-H's MLP-only blocks): a layer that reads nothing either.
 */
#include "internal.h"

kvc_status kvc_layer_create_shared(size_t owner, kvc_layer **out) {
    if (!out) return KVC_E_NULL_POINTER;
    *out = kvc_layer_alloc(KVC_KIND_SHARED);
    if (!*out) return KVC_E_NOMEM;
    (*out)->owner = owner;
    return KVC_OK;
}

size_t kvc_layer_owner(const kvc_layer *layer) {
    return layer && layer->kind == KVC_KIND_SHARED ? layer->owner : SIZE_MAX;
}

int kvc_shared_owner_valid(kvc_layer *const *layers, size_t i) {
    if (layers[i]->kind != KVC_KIND_SHARED) return 1;
    return layers[i]->owner < i && kvc_has_rows(layers[layers[i]->owner]);
}

kvc_status kvc_layer_create_none(kvc_layer **out) {
    if (!out) return KVC_E_NULL_POINTER;
    *out = kvc_layer_alloc(KVC_KIND_NONE);
    return *out ? KVC_OK : KVC_E_NOMEM;
}
