/*
 * store.c -- the rows of one component (keys or values) of one head.
 *
 * f32 rows sit in one paged sequence; quantized rows in another, each row a
 * 4-byte scale followed by d int8 codes, so that attention streams scale and
 * codes together from one page; the field is a sequence of one element
 * while frozen.  Rows only ever leave from the end (evict.c moves the kept
 * ones forward first).
 */
#include <string.h>

#include "internal.h"
#include "../kernels/q8-rows.h"

int kvc_component_quantized(kvc_mode mode, int is_values) {
    if (mode == KVC_MODE_Q8) return 1;
    return is_values ? mode == KVC_MODE_Q8V : mode == KVC_MODE_Q8K;
}

void kvc_store_init(kvc_store *store, size_t d) {
    kvc_paged_init(&store->rows, d * sizeof(float), KVC_PAGE_SHIFT);
    kvc_paged_init(&store->qrows, kvc_q8_row_bytes(d), KVC_PAGE_SHIFT);
    kvc_paged_init(&store->field, d * sizeof(float), 0);
}

kvc_status kvc_store_reserve(kvc_store *store, int quantized, size_t below, size_t from) {
    /* A quantized store keeps f32 rows for positions < W only. */
    kvc_status status = kvc_paged_reserve(&store->rows, quantized ? below : below + from);
    if (status == KVC_OK && quantized) status = kvc_paged_reserve(&store->qrows, from);
    return status;
}

void kvc_store_push_f32(kvc_store *store, const float *x) {
    memcpy(kvc_paged_at(&store->rows, store->rows.len), x, store->rows.elem_bytes);
    kvc_paged_set_len(&store->rows, store->rows.len + 1);
}

void kvc_store_push_quantized(kvc_store *store, size_t d, const float *x,
                              const kvc_kernels *kernels) {
    uint8_t *qrow = kvc_paged_at(&store->qrows, store->qrows.len);
    const float *field = (const float *)(const void *)kvc_paged_at(&store->field, 0);
    float scale = kernels->quantize_row(d, x, field, (int8_t *)(qrow + sizeof(float)));
    memcpy(qrow, &scale, sizeof(float));
    kvc_paged_set_len(&store->qrows, store->qrows.len + 1);
}

void kvc_store_drop(kvc_store *store, size_t f32_rows, size_t q_rows) {
    kvc_paged_set_len(&store->rows, store->rows.len - f32_rows);
    kvc_paged_set_len(&store->qrows, store->qrows.len - q_rows);
}

kvc_status kvc_store_make_writable(kvc_store *store, size_t f32_first, size_t q_first) {
    kvc_status status = kvc_paged_make_writable(&store->rows, f32_first, store->rows.len);
    if (status == KVC_OK) status = kvc_paged_make_writable(&store->qrows, q_first, store->qrows.len);
    return status;
}

void kvc_store_copy_rows(const kvc_store *store, size_t d, float *dst,
                         const kvc_kernels *kernels) {
    /* dst may be NULL when the store is empty: no arithmetic on it then. */
    if (store->rows.len) {
        kvc_paged_read(&store->rows, 0, store->rows.len, dst);
        dst += store->rows.len * d;
    }
    if (!store->qrows.len) return;
    const float *field = (const float *)(const void *)kvc_paged_at(&store->field, 0);
    for (size_t r = 0; r < store->qrows.len; r++) {
        const uint8_t *qrow = kvc_paged_at(&store->qrows, r);
        kernels->dequantize_row(d, kvc_q8_row_codes(qrow), kvc_q8_row_scale(qrow), field,
                                dst + r * d);
    }
}

size_t kvc_store_len(const kvc_store *store) {
    return store->rows.len + store->qrows.len;
}

size_t kvc_store_bytes(const kvc_store *store) {
    return store->rows.len * store->rows.elem_bytes + store->qrows.len * store->qrows.elem_bytes;
}

size_t kvc_store_shared_bytes(const kvc_store *store) {
    return kvc_paged_shared_bytes(&store->rows) + kvc_paged_shared_bytes(&store->qrows) +
           kvc_paged_shared_bytes(&store->field);
}

size_t kvc_store_count_bytes(const kvc_store *store, uint32_t walk) {
    return kvc_paged_count_bytes(&store->rows, walk) + kvc_paged_count_bytes(&store->qrows, walk) +
           kvc_paged_count_bytes(&store->field, walk);
}

size_t kvc_store_capacity_bytes(const kvc_store *store) {
    return kvc_paged_capacity_bytes(&store->rows) + kvc_paged_capacity_bytes(&store->qrows) +
           kvc_paged_capacity_bytes(&store->field);
}

kvc_status kvc_store_fork(kvc_store *dst, const kvc_store *src) {
    kvc_status status = kvc_paged_fork(&dst->rows, &src->rows);
    kvc_paged_init(&dst->qrows, src->qrows.elem_bytes, src->qrows.shift);
    kvc_paged_init(&dst->field, src->field.elem_bytes, src->field.shift);
    if (status == KVC_OK) status = kvc_paged_fork(&dst->qrows, &src->qrows);
    if (status == KVC_OK) status = kvc_paged_fork(&dst->field, &src->field);
    return status;
}

void kvc_store_free(kvc_store *store) {
    kvc_paged_free(&store->rows);
    kvc_paged_free(&store->qrows);
    kvc_paged_free(&store->field);
}
