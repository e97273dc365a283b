/*
 * append.c -- positions in and out: append, append_n, truncate_last.
 *
 * Appends are all or nothing: every live element is checked and every buffer
 * is grown before the first row is written, so a refused or out-of-memory
 * call leaves the layer as it was.
 */
#include <string.h>

#include "internal.h"

static int head_alive(const uint8_t *alive, size_t kv_head) {
    return alive == NULL || alive[kv_head] != 0;
}

static kvc_status check_finite(const kvc_layer *layer, size_t n, const float *k, const float *v,
                               const uint8_t *alive) {
    const kvc_kernels *kernels = kvc_kernels_active();
    const size_t H = layer->num_kv_heads, d = layer->head_dim;
    for (size_t i = 0; i < n; i++) {
        for (size_t h = 0; h < H; h++) {
            if (!head_alive(alive ? alive + i * H : NULL, h)) continue;
            const size_t at = (i * H + h) * d;
            if (!kernels->all_finite(d, k + at)) return KVC_E_NONFINITE_KEY;
            if (!kernels->all_finite(d, v + at)) return KVC_E_NONFINITE_VALUE;
        }
    }
    return KVC_OK;
}

/* Grows every buffer that the n positions will write to. */
static kvc_status reserve(kvc_layer *layer, size_t n, const uint8_t *alive) {
    const size_t H = layer->num_kv_heads, d = layer->head_dim;
    const size_t first = layer->seq_len, end = layer->seq_len + n;
    size_t cap = kvc_grown_capacity(layer->imp_cap, end, SIZE_MAX);
    if (cap) {
        float *imp = kvc_realloc_array(layer->imp, cap, sizeof(float));
        if (!imp) return KVC_E_NOMEM;
        layer->imp = imp;
        layer->imp_cap = cap;
    }
    cap = kvc_grown_capacity(layer->map_cap, end, SIZE_MAX);
    if (cap) {
        uint8_t *map = kvc_realloc_array(layer->alive_map, cap, layer->map_bytes);
        if (!map) return KVC_E_NOMEM;
        layer->alive_map = map;
        layer->map_cap = cap;
    }
    const int quantized_k = kvc_component_quantized(layer->mode, 0);
    const int quantized_v = kvc_component_quantized(layer->mode, 1);
    if ((quantized_k || quantized_v) && first <= KVC_Q8_WINDOW && KVC_Q8_WINDOW < end) {
        kvc_status status = kvc_field_reserve(layer);
        if (status != KVC_OK) return status;
    }
    for (size_t h = 0; h < H; h++) {
        /* Rows this head gains below the window and from it on. */
        size_t below = 0, from = 0;
        for (size_t i = 0; i < n; i++) {
            if (!head_alive(alive ? alive + i * H : NULL, h)) continue;
            if (first + i < KVC_Q8_WINDOW) below++;
            else from++;
        }
        kvc_head *head = &layer->heads[h];
        kvc_status status = kvc_store_reserve(&head->keys, d, quantized_k, below, from);
        if (status == KVC_OK) status = kvc_store_reserve(&head->values, d, quantized_v, below, from);
        if (status != KVC_OK) return status;
    }
    return KVC_OK;
}

static void push_row(kvc_store *store, int quantized, size_t position, size_t d, const float *x,
                     const kvc_kernels *kernels) {
    if (quantized && position >= KVC_Q8_WINDOW) kvc_store_push_quantized(store, d, x, kernels);
    else kvc_store_push_f32(store, d, x);
}

/* Writes one position; every buffer has room. */
static void append_one(kvc_layer *layer, const float *k, const float *v, const uint8_t *alive) {
    const kvc_kernels *kernels = kvc_kernels_active();
    const size_t H = layer->num_kv_heads, d = layer->head_dim;
    const size_t position = layer->seq_len;
    const int quantized_k = kvc_component_quantized(layer->mode, 0);
    const int quantized_v = kvc_component_quantized(layer->mode, 1);
    if ((quantized_k || quantized_v) && position == KVC_Q8_WINDOW) kvc_field_freeze(layer);

    uint8_t *map = layer->alive_map + position * layer->map_bytes;
    memset(map, 0, layer->map_bytes);
    for (size_t h = 0; h < H; h++) {
        if (!head_alive(alive, h)) continue;
        map[h >> 3] |= (uint8_t)(1u << (h & 7));
        push_row(&layer->heads[h].keys, quantized_k, position, d, k + h * d, kernels);
        push_row(&layer->heads[h].values, quantized_v, position, d, v + h * d, kernels);
    }
    layer->imp[position] = 0.0f;
    layer->seq_len = position + 1;
}

kvc_status kvc_layer_append_n(kvc_layer *layer, size_t n, const float *k, const float *v,
                              const uint8_t *alive) {
    if (!layer) return KVC_E_NULL_POINTER;
    if (layer->kind != KVC_KIND_FULL) return KVC_E_KIND;
    if (n == 0) return KVC_OK;
    if (!k || !v) return KVC_E_NULL_POINTER;
    if (n > KVC_MAX_POSITIONS - layer->seq_len) return KVC_E_TOO_LONG;
    kvc_status status = check_finite(layer, n, k, v, alive);
    if (status == KVC_OK) status = reserve(layer, n, alive);
    if (status != KVC_OK) return status;
    const size_t stride = layer->num_kv_heads * layer->head_dim;
    for (size_t i = 0; i < n; i++) {
        append_one(layer, k + i * stride, v + i * stride,
                   alive ? alive + i * layer->num_kv_heads : NULL);
    }
    return KVC_OK;
}

kvc_status kvc_layer_append(kvc_layer *layer, const float *k, const float *v,
                            const uint8_t *alive) {
    return kvc_layer_append_n(layer, 1, k, v, alive);
}

kvc_status kvc_layer_truncate_last(kvc_layer *layer, size_t n) {
    if (!layer) return KVC_E_NULL_POINTER;
    if (layer->kind != KVC_KIND_FULL) return KVC_E_KIND;
    if (layer->verifying) return KVC_E_VERIFYING;
    kvc_layer_drop_last(layer, n);
    return KVC_OK;
}

void kvc_layer_drop_last(kvc_layer *layer, size_t n) {
    if (n > layer->seq_len) n = layer->seq_len;
    const size_t new_len = layer->seq_len - n;
    /* Dropped positions below the window are f32 rows in every store; from
     * the window on they are quantized rows in a quantized store. */
    size_t split = new_len > KVC_Q8_WINDOW ? new_len : KVC_Q8_WINDOW;
    if (split > layer->seq_len) split = layer->seq_len;
    for (size_t h = 0; h < layer->num_kv_heads; h++) {
        const size_t below = kvc_head_rows_between(layer, h, new_len, split);
        const size_t from = kvc_head_rows_between(layer, h, split, layer->seq_len);
        kvc_head *head = &layer->heads[h];
        if (kvc_component_quantized(layer->mode, 0)) kvc_store_drop(&head->keys, below, from);
        else kvc_store_drop(&head->keys, below + from, 0);
        if (kvc_component_quantized(layer->mode, 1)) kvc_store_drop(&head->values, below, from);
        else kvc_store_drop(&head->values, below + from, 0);
    }
    layer->seq_len = new_len;
    if (new_len <= KVC_Q8_WINDOW) layer->field_frozen = 0;
}
