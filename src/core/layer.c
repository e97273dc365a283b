/*
 * layer.c -- a layer's life: create, clone, clear, free, and what can be read
 * off it (lengths, rows, byte counts, a description).
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"

static const char *const mode_names[] = {"f32", "q8", "q8k", "q8v"};

kvc_layer *kvc_layer_alloc(kvc_kind kind) {
    kvc_layer *layer = kvc_malloc(sizeof *layer);
    if (layer) {
        memset(layer, 0, sizeof *layer);
        layer->kind = kind;
    }
    return layer;
}

kvc_status kvc_layer_create(size_t num_kv_heads, size_t head_dim, kvc_mode mode,
                            kvc_layer **out) {
    if (!out) return KVC_E_NULL_POINTER;
    *out = NULL;
    if (num_kv_heads == 0 || num_kv_heads > KVC_MAX_KV_HEADS) return KVC_E_NUM_KV_HEADS;
    if (head_dim == 0 || head_dim > KVC_MAX_HEAD_DIM) return KVC_E_HEAD_DIM;
    if ((unsigned)mode > KVC_MODE_Q8V) return KVC_E_MODE;

    kvc_layer *layer = kvc_layer_alloc(KVC_KIND_FULL);
    if (!layer) return KVC_E_NOMEM;
    layer->num_kv_heads = num_kv_heads;
    layer->head_dim = head_dim;
    layer->mode = mode;
    layer->map_bytes = (num_kv_heads + 7) / 8;
    layer->heads = kvc_realloc_array(NULL, num_kv_heads, sizeof(kvc_head));
    if (!layer->heads) {
        kvc_free(layer);
        return KVC_E_NOMEM;
    }
    memset(layer->heads, 0, num_kv_heads * sizeof(kvc_head));
    *out = layer;
    return KVC_OK;
}

void kvc_layer_free(kvc_layer *layer) {
    if (!layer || layer->in_model) return;
    kvc_linear_free(layer->linear);
    if (layer->heads) {
        for (size_t h = 0; h < layer->num_kv_heads; h++) {
            kvc_store_free(&layer->heads[h].keys);
            kvc_store_free(&layer->heads[h].values);
        }
    }
    kvc_free(layer->heads);
    kvc_free(layer->imp);
    kvc_free(layer->alive_map);
    kvc_free(layer->positions);
    kvc_free(layer);
}

kvc_status kvc_layer_clone(const kvc_layer *layer, kvc_layer **out) {
    if (!out) return KVC_E_NULL_POINTER;
    *out = NULL;
    if (!layer) return KVC_E_NULL_POINTER;
    if (layer->verifying) return KVC_E_VERIFYING;
    if (layer->kind == KVC_KIND_LINEAR) {
        kvc_layer *copy = kvc_layer_alloc(KVC_KIND_LINEAR);
        if (!copy) return KVC_E_NOMEM;
        kvc_status status = kvc_linear_clone(&copy->linear, layer->linear);
        if (status != KVC_OK) {
            kvc_layer_free(copy);
            return status;
        }
        *out = copy;
        return KVC_OK;
    }
    kvc_layer *copy;
    kvc_status status = kvc_layer_create(layer->num_kv_heads, layer->head_dim, layer->mode, &copy);
    if (status != KVC_OK) return status;
    copy->seq_len = layer->seq_len;
    copy->next_position = layer->next_position;
    copy->field_frozen = layer->field_frozen;
    copy->max_rows = layer->max_rows;
    copy->evict_sinks = layer->evict_sinks;
    copy->evict_recent = layer->evict_recent;
    if (layer->seq_len) {
        const size_t L = layer->seq_len;
        copy->imp = kvc_realloc_array(NULL, L, sizeof(float));
        copy->alive_map = kvc_realloc_array(NULL, L, layer->map_bytes);
        copy->positions = kvc_realloc_array(NULL, L, sizeof(uint32_t));
        if (!copy->imp || !copy->alive_map || !copy->positions) status = KVC_E_NOMEM;
        else {
            copy->imp_cap = copy->map_cap = copy->positions_cap = L;
            memcpy(copy->imp, layer->imp, L * sizeof(float));
            memcpy(copy->alive_map, layer->alive_map, L * layer->map_bytes);
            memcpy(copy->positions, layer->positions, L * sizeof(uint32_t));
        }
    }
    for (size_t h = 0; h < layer->num_kv_heads && status == KVC_OK; h++) {
        status = kvc_store_clone(&copy->heads[h].keys, &layer->heads[h].keys, layer->head_dim);
        if (status == KVC_OK)
            status = kvc_store_clone(&copy->heads[h].values, &layer->heads[h].values, layer->head_dim);
    }
    if (status != KVC_OK) {
        kvc_layer_free(copy);
        return status;
    }
    *out = copy;
    return KVC_OK;
}

void kvc_layer_clear(kvc_layer *layer) {
    if (!layer) return;
    layer->verifying = 0;
    if (layer->linear) kvc_linear_clear(layer->linear);
    for (size_t h = 0; h < layer->num_kv_heads; h++) {
        kvc_head *head = &layer->heads[h];
        kvc_store_drop(&head->keys, head->keys.rows_len, head->keys.qrows_len);
        kvc_store_drop(&head->values, head->values.rows_len, head->values.qrows_len);
    }
    layer->seq_len = 0;
    layer->next_position = 0;
    layer->field_frozen = 0;
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

/* Components stored as int8 in this mode: 0, 1 or 2. */
static size_t quantized_components(kvc_mode mode) {
    return (size_t)kvc_component_quantized(mode, 0) + (size_t)kvc_component_quantized(mode, 1);
}

size_t kvc_layer_memory_bytes(const kvc_layer *layer) {
    if (!layer) return 0;
    if (layer->linear) return kvc_linear_memory_bytes(layer->linear);
    const size_t d = layer->head_dim;
    size_t bytes = layer->seq_len * (sizeof(float) + sizeof(uint32_t) + layer->map_bytes);
    for (size_t h = 0; h < layer->num_kv_heads; h++) {
        bytes += kvc_store_bytes(&layer->heads[h].keys, d);
        bytes += kvc_store_bytes(&layer->heads[h].values, d);
    }
    if (layer->field_frozen)
        bytes += quantized_components(layer->mode) * layer->num_kv_heads * d * sizeof(float);
    return bytes;
}

size_t kvc_layer_capacity_bytes(const kvc_layer *layer) {
    if (!layer) return 0;
    const size_t d = layer->head_dim;
    size_t bytes = sizeof *layer + layer->num_kv_heads * sizeof(kvc_head);
    if (layer->linear) bytes += kvc_linear_capacity_bytes(layer->linear);
    bytes += layer->imp_cap * sizeof(float) + layer->map_cap * layer->map_bytes +
             layer->positions_cap * sizeof(uint32_t);
    for (size_t h = 0; h < layer->num_kv_heads; h++) {
        bytes += kvc_store_capacity_bytes(&layer->heads[h].keys, d);
        bytes += kvc_store_capacity_bytes(&layer->heads[h].values, d);
    }
    return bytes;
}

/* Shared by head_keys and head_values: the checks, then the copy. */
static kvc_status copy_head_rows(const kvc_layer *layer, size_t kv_head, int is_values,
                                 float *dst, size_t dst_len) {
    if (!layer) return KVC_E_NULL_POINTER;
    if (layer->kind != KVC_KIND_FULL) return KVC_E_KIND;
    if (kv_head >= layer->num_kv_heads) return KVC_E_KV_HEAD;
    const kvc_head *head = &layer->heads[kv_head];
    const kvc_store *store = is_values ? &head->values : &head->keys;
    const size_t count = kvc_store_len(store) * layer->head_dim;
    if (count && !dst) return KVC_E_NULL_POINTER;
    if (dst_len < count) return KVC_E_LENGTH;
    kvc_store_copy_rows(store, layer->head_dim, dst, kvc_kernels_active());
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

size_t kvc_layer_describe(const kvc_layer *layer, char *buf, size_t buf_len) {
    if (!layer) return 0;
    if (!buf) buf_len = 0;
    int written;
    if (layer->linear) {
        const kvc_linear *linear = layer->linear;
        written = snprintf(buf, buf_len,
                           "kvc_layer{kind=linear num_heads=%zu num_features=%zu value_dim=%zu "
                           "phase_mass=%g steps=%zu verifying=%d memory_bytes=%zu "
                           "capacity_bytes=%zu}",
                           linear->num_heads, linear->num_features, linear->value_dim,
                           linear->phase_mass, kvc_layer_steps(layer), layer->verifying,
                           kvc_layer_memory_bytes(layer), kvc_layer_capacity_bytes(layer));
        return written < 0 ? 0 : (size_t)written;
    }
    written = snprintf(buf, buf_len,
                       "kvc_layer{mode=%s num_kv_heads=%zu head_dim=%zu seq_len=%zu "
                       "field_frozen=%d verifying=%d memory_bytes=%zu capacity_bytes=%zu}",
                       mode_names[layer->mode], layer->num_kv_heads, layer->head_dim,
                       layer->seq_len, layer->field_frozen, layer->verifying,
                       kvc_layer_memory_bytes(layer), kvc_layer_capacity_bytes(layer));
    return written < 0 ? 0 : (size_t)written;
}
