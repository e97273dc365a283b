/*
 * model.c -- a model's cache: its layers, full and linear, and the
 * operations that must reach all of them or none.  A shared layer and a
 * none layer hold nothing and take no positions of its own: the operations
 * on rows and positions pass them by (a shared layer's are those of the
 * layer it reads, reached as any other).
 */
#include <string.h>

#include "internal.h"

struct kvc_model {
    size_t num_layers;
    kvc_layer **layers;
};

/* A model owning `layers`, unchecked: create checks them first; a clone's
 * copies are the layers of a model already, aligned or not (a runner
 * between two layers of a step). */
static kvc_status model_of(kvc_layer *const *layers, size_t num_layers, kvc_model **out) {
    kvc_model *model = kvc_malloc(sizeof *model);
    if (!model) return KVC_E_NOMEM;
    model->layers = kvc_realloc_array(NULL, num_layers, sizeof(kvc_layer *));
    if (!model->layers) {
        kvc_free(model);
        return KVC_E_NOMEM;
    }
    memcpy(model->layers, layers, num_layers * sizeof(kvc_layer *));
    model->num_layers = num_layers;
    for (size_t i = 0; i < num_layers; i++) layers[i]->in_model = 1;
    *out = model;
    return KVC_OK;
}

/* The first of the layers that take positions (num_layers: none does). */
static size_t first_positioned(kvc_layer *const *layers, size_t num_layers) {
    size_t i = 0;
    while (i < num_layers && !kvc_takes_positions(layers[i])) i++;
    return i;
}

/* 1 if every layer that takes positions has taken in as many as the first,
 * the rows and the state of a layer that holds both included. */
static int layers_aligned(kvc_layer *const *layers, size_t num_layers) {
    for (size_t i = 0; i < num_layers; i++) {
        if (!kvc_layer_parts_agree(layers[i])) return 0;
    }
    const size_t first = first_positioned(layers, num_layers);
    for (size_t i = first + 1; i < num_layers; i++) {
        if (kvc_takes_positions(layers[i]) &&
            kvc_layer_positions_taken(layers[i]) != kvc_layer_positions_taken(layers[first]))
            return 0;
    }
    return 1;
}

int kvc_model_aligned(const kvc_model *model) {
    return layers_aligned(model->layers, model->num_layers);
}

kvc_status kvc_model_create(kvc_layer *const *layers, size_t num_layers, kvc_model **out) {
    if (!out) return KVC_E_NULL_POINTER;
    *out = NULL;
    if (!layers) return KVC_E_NULL_POINTER;
    if (num_layers == 0) return KVC_E_LAYERS;
    for (size_t i = 0; i < num_layers; i++) {
        if (!layers[i]) return KVC_E_NULL_POINTER;
        if (layers[i]->verifying) return KVC_E_VERIFYING;
        if (layers[i]->in_model) return KVC_E_LAYERS;
        for (size_t other = 0; other < i; other++) {
            if (layers[other] == layers[i]) return KVC_E_LAYERS;
        }
    }
    for (size_t i = 0; i < num_layers; i++) {
        if (!kvc_shared_owner_valid(layers, i)) return KVC_E_LAYERS;
    }
    if (!layers_aligned(layers, num_layers)) return KVC_E_LAYERS;
    return model_of(layers, num_layers, out);
}

void kvc_model_free(kvc_model *model) {
    if (!model) return;
    for (size_t i = 0; i < model->num_layers; i++) {
        model->layers[i]->in_model = 0;
        kvc_layer_free(model->layers[i]);
    }
    kvc_free(model->layers);
    kvc_free(model);
}

kvc_status kvc_model_clone(const kvc_model *model, kvc_model **out) {
    if (!out) return KVC_E_NULL_POINTER;
    *out = NULL;
    if (!model) return KVC_E_NULL_POINTER;
    if (kvc_model_verifying(model)) return KVC_E_VERIFYING;
    kvc_layer **copies = kvc_realloc_array(NULL, model->num_layers, sizeof(kvc_layer *));
    if (!copies) return KVC_E_NOMEM;
    size_t cloned = 0;
    kvc_status status = KVC_OK;
    while (cloned < model->num_layers && status == KVC_OK) {
        status = kvc_layer_clone(model->layers[cloned], &copies[cloned]);
        if (status == KVC_OK) cloned++;
    }
    if (status == KVC_OK) status = model_of(copies, cloned, out);
    if (status != KVC_OK) {
        for (size_t i = 0; i < cloned; i++) kvc_layer_free(copies[i]);
    }
    kvc_free(copies);
    return status;
}

kvc_layer *kvc_model_layer(const kvc_model *model, size_t i) {
    return model && i < model->num_layers ? model->layers[i] : NULL;
}

size_t kvc_model_num_layers(const kvc_model *model) {
    return model ? model->num_layers : 0;
}

size_t kvc_model_seq_len(const kvc_model *model) {
    if (!model) return 0;
    const size_t first = first_positioned(model->layers, model->num_layers);
    if (first == model->num_layers) return 0;
    size_t least = kvc_layer_positions_taken(model->layers[first]);
    for (size_t i = first + 1; i < model->num_layers; i++) {
        if (!kvc_takes_positions(model->layers[i])) continue; /* a shared layer's are its owner's */
        const size_t positions = kvc_layer_positions_taken(model->layers[i]);
        if (positions < least) least = positions;
    }
    return least;
}

size_t kvc_model_memory_bytes(const kvc_model *model) {
    size_t bytes = 0;
    for (size_t i = 0; i < kvc_model_num_layers(model); i++)
        bytes += kvc_layer_memory_bytes(model->layers[i]);
    return bytes;
}

size_t kvc_model_shared_bytes(const kvc_model *model) {
    size_t bytes = 0;
    for (size_t i = 0; i < kvc_model_num_layers(model); i++)
        bytes += kvc_layer_shared_bytes(model->layers[i]);
    return bytes;
}

size_t kvc_model_capacity_bytes(const kvc_model *model) {
    if (!model) return 0;
    size_t bytes = sizeof *model + model->num_layers * sizeof(kvc_layer *);
    for (size_t i = 0; i < model->num_layers; i++)
        bytes += kvc_layer_capacity_bytes(model->layers[i]);
    return bytes;
}

kvc_status kvc_model_truncate_last(kvc_model *model, size_t n) {
    if (!model) return KVC_E_NULL_POINTER;
    for (size_t i = 0; i < model->num_layers; i++) {
        const kvc_layer *layer = model->layers[i];
        if (layer->verifying) return KVC_E_VERIFYING;
        if (!kvc_takes_positions(layer)) continue;
        /* A recurrent layer takes back its last call, nothing else. */
        const kvc_recurrent *r = kvc_recurrent_of(layer);
        if (r ? n > 0 && n != r->undo : !kvc_has_rows(layer)) return KVC_E_KIND;
        if (n > kvc_window_truncatable(layer)) return KVC_E_WINDOW;
    }
    for (size_t i = 0; i < model->num_layers; i++) {
        if (kvc_takes_positions(model->layers[i])) (void)kvc_layer_truncate_last(model->layers[i], n); /* checked above */
    }
    return KVC_OK;
}

kvc_status kvc_model_hold(const kvc_model *model, kvc_layer ***held) {
    kvc_layer **forks = kvc_realloc_array(NULL, model->num_layers, sizeof *forks);
    *held = NULL;
    if (!forks) return KVC_E_NOMEM;
    for (size_t i = 0; i < model->num_layers; i++) forks[i] = NULL;
    for (size_t i = 0; i < model->num_layers; i++) {
        /* Window layers slide past what truncation gives back; recurrent ones take back one call. */
        if (model->layers[i]->kind != KVC_KIND_WINDOW && !kvc_recurrent_of(model->layers[i])) continue;
        const kvc_status status = kvc_layer_clone(model->layers[i], &forks[i]);
        if (status != KVC_OK) {
            kvc_model_release(model, forks);
            return status;
        }
    }
    *held = forks;
    return KVC_OK;
}

void kvc_model_give_back(kvc_model *model, kvc_layer **held, size_t n) {
    for (size_t i = 0; i < model->num_layers; i++) {
        if (kvc_recurrent_of(held[i])) {
            void *taken = model->layers[i]->state;
            model->layers[i]->state = held[i]->state;
            held[i]->state = taken;
        }
        if (held[i] && kvc_has_rows(held[i])) { /* a window layer's, or those beside a state */
            kvc_layer_swap_rows(model->layers[i], held[i]);
        } else if (!held[i] && kvc_has_rows(model->layers[i])) {
            (void)kvc_layer_truncate_last(model->layers[i], n); /* a full layer can */
        }
    }
}

void kvc_model_release(const kvc_model *model, kvc_layer **held) {
    for (size_t i = 0; held && i < model->num_layers; i++) kvc_layer_free(held[i]);
    kvc_free(held);
}

void kvc_model_clear(kvc_model *model) {
    for (size_t i = 0; i < kvc_model_num_layers(model); i++) kvc_layer_clear(model->layers[i]);
}

int kvc_model_verifying(const kvc_model *model) {
    for (size_t i = 0; i < kvc_model_num_layers(model); i++) {
        if (model->layers[i]->verifying) return 1;
    }
    return 0;
}

kvc_status kvc_model_begin_verify(kvc_model *model) {
    if (!model) return KVC_E_NULL_POINTER;
    if (kvc_model_verifying(model)) return KVC_E_VERIFYING;
    for (size_t i = 0; i < model->num_layers; i++) kvc_layer_begin_verify(model->layers[i]);
    return KVC_OK;
}

size_t kvc_model_draft_len(const kvc_model *model) {
    if (!model) return 0;
    const size_t first = first_positioned(model->layers, model->num_layers);
    return first < model->num_layers ? kvc_layer_draft_len(model->layers[first]) : 0;
}

kvc_status kvc_model_accept(kvc_model *model, size_t j) {
    if (!model) return KVC_E_NULL_POINTER;
    const size_t drafts = kvc_model_draft_len(model);
    for (size_t i = 0; i < model->num_layers; i++) {
        if (!model->layers[i]->verifying) return KVC_E_NOT_VERIFYING;
        /* A shared layer's drafts are its owner's rows; a none layer has none. */
        if (kvc_takes_positions(model->layers[i]) && kvc_layer_draft_len(model->layers[i]) != drafts)
            return KVC_E_ACCEPT;
    }
    if (j > drafts) return KVC_E_ACCEPT;
    /* One scratch for every layer's max_rows eviction, and every page it
     * moves rows into writable, before any layer changes: all or nothing. */
    size_t scratch_bytes = 0;
    for (size_t i = 0; i < model->num_layers; i++) {
        const size_t bytes = kvc_accept_scratch_bytes(model->layers[i], j);
        if (bytes > scratch_bytes) scratch_bytes = bytes;
        if (kvc_accept_prepare(model->layers[i], j) != KVC_OK) return KVC_E_NOMEM;
    }
    uint8_t *scratch = scratch_bytes ? kvc_realloc_array(NULL, scratch_bytes, 1) : NULL;
    if (scratch_bytes && !scratch) return KVC_E_NOMEM;
    for (size_t i = 0; i < model->num_layers; i++) kvc_accept_with(model->layers[i], j, scratch);
    kvc_free(scratch);
    return KVC_OK;
}

kvc_status kvc_model_evict(kvc_model *model, size_t budget, size_t sinks, size_t recent) {
    if (!model) return KVC_E_NULL_POINTER;
    if (budget == 0 || sinks > budget || recent > budget - sinks) return KVC_E_BUDGET;
    if (kvc_model_verifying(model)) return KVC_E_VERIFYING;
    /* One scratch for every layer, and every page the evictions move rows
     * into writable, before any layer changes: all or nothing. */
    size_t longest = 0;
    for (size_t i = 0; i < model->num_layers; i++) {
        kvc_layer *layer = model->layers[i];
        if (layer->kind != KVC_KIND_FULL || layer->seq_len <= budget) continue;
        if (layer->seq_len > longest) longest = layer->seq_len;
        if (kvc_evict_prepare(layer, sinks) != KVC_OK) return KVC_E_NOMEM;
    }
    if (longest == 0) return KVC_OK;
    uint8_t *block = kvc_realloc_array(NULL, kvc_evict_scratch_bytes(longest), 1);
    if (!block) return KVC_E_NOMEM;
    /* Each full layer decides from its own importance; linear layers hold no rows. */
    for (size_t i = 0; i < model->num_layers; i++) {
        kvc_layer *layer = model->layers[i];
        if (layer->kind == KVC_KIND_FULL) kvc_evict_with(layer, budget, sinks, recent, block);
    }
    kvc_free(block);
    return KVC_OK;
}
