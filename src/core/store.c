/*
 * store.c -- the rows of one component (keys or values) of one head.
 *
 * f32 rows sit in one array; quantized rows in another, each row a 4-byte
 * scale followed by d int8 codes, so that attention streams scale and codes
 * together from one buffer.  Rows only ever leave from the end.
 */
#include <string.h>

#include "internal.h"
#include "../kernels/q8-rows.h"

int kvc_component_quantized(kvc_mode mode, int is_values) {
    if (mode == KVC_MODE_Q8) return 1;
    return is_values ? mode == KVC_MODE_Q8V : mode == KVC_MODE_Q8K;
}

kvc_status kvc_store_reserve(kvc_store *store, size_t d, int quantized, size_t below,
                             size_t from) {
    /* A quantized store keeps f32 rows for positions < W only. */
    const size_t f32_rows = quantized ? below : below + from;
    const size_t q_rows = quantized ? from : 0;
    size_t cap = kvc_grown_capacity(store->rows_cap, store->rows_len + f32_rows,
                                    quantized ? KVC_Q8_WINDOW : SIZE_MAX);
    if (cap) {
        float *rows = kvc_realloc_array(store->rows, cap, d * sizeof(float));
        if (!rows) return KVC_E_NOMEM;
        store->rows = rows;
        store->rows_cap = cap;
    }
    cap = kvc_grown_capacity(store->qrows_cap, store->qrows_len + q_rows, SIZE_MAX);
    if (cap) {
        uint8_t *qrows = kvc_realloc_array(store->qrows, cap, kvc_q8_row_bytes(d));
        if (!qrows) return KVC_E_NOMEM;
        store->qrows = qrows;
        store->qrows_cap = cap;
    }
    return KVC_OK;
}

void kvc_store_push_f32(kvc_store *store, size_t d, const float *x) {
    memcpy(store->rows + store->rows_len * d, x, d * sizeof(float));
    store->rows_len++;
}

void kvc_store_push_quantized(kvc_store *store, size_t d, const float *x,
                              const kvc_kernels *kernels) {
    uint8_t *qrow = store->qrows + store->qrows_len * kvc_q8_row_bytes(d);
    float scale = kernels->quantize_row(d, x, store->field, (int8_t *)(qrow + sizeof(float)));
    memcpy(qrow, &scale, sizeof(float));
    store->qrows_len++;
}

void kvc_store_drop(kvc_store *store, size_t f32_rows, size_t q_rows) {
    store->rows_len -= f32_rows;
    store->qrows_len -= q_rows;
}

void kvc_store_copy_rows(const kvc_store *store, size_t d, float *dst,
                         const kvc_kernels *kernels) {
    /* dst may be NULL when the store is empty: no arithmetic on it then. */
    if (store->rows_len) {
        memcpy(dst, store->rows, store->rows_len * d * sizeof(float));
        dst += store->rows_len * d;
    }
    for (size_t r = 0; r < store->qrows_len; r++) {
        const uint8_t *qrow = store->qrows + r * kvc_q8_row_bytes(d);
        float scale;
        memcpy(&scale, qrow, sizeof(float));
        kernels->dequantize_row(d, (const int8_t *)(qrow + sizeof(float)), scale, store->field,
                                dst + r * d);
    }
}

size_t kvc_store_len(const kvc_store *store) {
    return store->rows_len + store->qrows_len;
}

size_t kvc_store_bytes(const kvc_store *store, size_t d) {
    return store->rows_len * d * sizeof(float) + store->qrows_len * kvc_q8_row_bytes(d);
}

size_t kvc_store_capacity_bytes(const kvc_store *store, size_t d) {
    return store->rows_cap * d * sizeof(float) + store->qrows_cap * kvc_q8_row_bytes(d) +
           (store->field ? d * sizeof(float) : 0);
}

/* A copy of the first `count` elements of `src`, or NULL when count is 0. */
static void *copy_array(const void *src, size_t count, size_t elem_bytes, kvc_status *status) {
    if (count == 0) return NULL;
    void *copy = kvc_realloc_array(NULL, count, elem_bytes);
    if (!copy) {
        *status = KVC_E_NOMEM;
        return NULL;
    }
    memcpy(copy, src, count * elem_bytes);
    return copy;
}

kvc_status kvc_store_clone(kvc_store *dst, const kvc_store *src, size_t d) {
    kvc_status status = KVC_OK;
    memset(dst, 0, sizeof *dst);
    dst->rows = copy_array(src->rows, src->rows_len, d * sizeof(float), &status);
    dst->rows_len = dst->rows_cap = dst->rows ? src->rows_len : 0;
    dst->qrows = copy_array(src->qrows, src->qrows_len, kvc_q8_row_bytes(d), &status);
    dst->qrows_len = dst->qrows_cap = dst->qrows ? src->qrows_len : 0;
    if (src->field) dst->field = copy_array(src->field, d, sizeof(float), &status);
    return status;
}

void kvc_store_free(kvc_store *store) {
    kvc_free(store->rows);
    kvc_free(store->qrows);
    kvc_free(store->field);
    memset(store, 0, sizeof *store);
}
