/*
 * store.c -- the rows of one component (keys or values) of one head.
 *
 * f32 rows sit in one paged sequence; quantized rows in another, each row a
 * 4-byte scale followed by its codes (the format's row, component.c), so
 * that attention streams scale and codes together from one page; the field
 * is a sequence of one element while frozen.  A store whose format keeps
 * copies (q4) also keeps f32 copies of its newest quantized rows (`recent`,
 * from row recent_base on): the residual window is read from them, and a
 * truncation that brings rows back into the window finds them there.
 * Copies go from the front a page at a time; rows only ever leave from the
 * end (evict.c moves the kept ones forward first).
 */
#include <string.h>

#include "internal.h"
#include "../kernels/q8-rows.h"

_Static_assert(KVC_KERNEL_MAX_DIM == KVC_MAX_HEAD_DIM, "kernels take rows of every head_dim");

void kvc_store_init(kvc_store *store, size_t d, const kvc_component_traits *traits) {
    store->traits = traits;
    kvc_paged_init(&store->rows, d * sizeof(float), KVC_PAGE_SHIFT);
    kvc_paged_init(&store->qrows, traits->row_bytes(d), KVC_PAGE_SHIFT);
    kvc_paged_init(&store->recent, d * sizeof(float), KVC_PAGE_SHIFT);
    store->recent_base = 0;
    kvc_paged_init(&store->field, d * sizeof(float), 0);
}

/* The first row whose f32 copy a store that keeps copies keeps once it holds n quantized
 * rows: those of the newest residual_rows + KVC_Q4_ROLLBACK_ROWS at least,
 * the older ones let go a page (of copies) at a time. */
static size_t copies_from(const kvc_store *store, size_t n, size_t residual_rows) {
    const size_t keep = residual_rows + KVC_Q4_ROLLBACK_ROWS, base = store->recent_base;
    if (n < base + keep + KVC_PAGE_ELEMS) return base;
    return base + (((n - keep - base) >> KVC_PAGE_SHIFT) << KVC_PAGE_SHIFT);
}

kvc_status kvc_store_reserve(kvc_store *store, size_t below, size_t from, size_t residual_rows,
                             int releasing) {
    /* A quantized store keeps f32 rows for positions < W only. */
    if (!store->traits->quantized) return kvc_paged_reserve(&store->rows, below + from);
    kvc_status status = kvc_paged_reserve(&store->rows, below);
    if (status == KVC_OK) status = kvc_paged_reserve(&store->qrows, from);
    if (status == KVC_OK && store->traits->keeps_copies) {
        /* Copies of the new rows that stay once the old ones go
         * (kvc_store_release_copies): no more than the window and the
         * rollback rows, however long the append. */
        const size_t n = store->qrows.len, first = releasing ? copies_from(store, n + from, residual_rows)
                                                             : store->recent_base;
        status = kvc_paged_reserve(&store->recent, n + from - (first > n ? first : n));
    }
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
    const float scale = store->traits->quantize(kernels, d, x, field, qrow + sizeof(float));
    /* Its copy, unless it is among the rows whose copies go (an append
     * longer than the window and the rollback rows). */
    if (store->traits->keeps_copies && store->qrows.len >= store->recent_base) {
        memcpy(kvc_paged_at(&store->recent, store->recent.len), x, d * sizeof(float));
        kvc_paged_set_len(&store->recent, store->recent.len + 1);
    }
    memcpy(qrow, &scale, sizeof(float));
    kvc_paged_set_len(&store->qrows, store->qrows.len + 1);
}

void kvc_store_release_copies(kvc_store *store, size_t residual_rows, size_t upcoming) {
    if (!store->traits->keeps_copies) return;
    const size_t n = store->qrows.len, first = copies_from(store, n + upcoming, residual_rows);
    if (first <= n) {
        kvc_paged_drop_front(&store->recent, (first - store->recent_base) >> KVC_PAGE_SHIFT);
    } else {
        kvc_paged_set_len(&store->recent, 0);
    }
    store->recent_base = first;
}

void kvc_store_drop(kvc_store *store, size_t f32_rows, size_t q_rows) {
    kvc_paged_set_len(&store->rows, store->rows.len - f32_rows);
    kvc_paged_set_len(&store->qrows, store->qrows.len - q_rows);
    if (!store->traits->keeps_copies) return;
    /* Copies of the rows left stay; below the first copy, none come back. */
    if (store->qrows.len < store->recent_base) {
        kvc_paged_set_len(&store->recent, 0);
        store->recent_base = store->qrows.len;
    } else {
        kvc_paged_set_len(&store->recent, store->qrows.len - store->recent_base);
    }
}

kvc_status kvc_store_make_writable(kvc_store *store, size_t f32_first, size_t q_first) {
    kvc_status status = kvc_paged_make_writable(&store->rows, f32_first, store->rows.len);
    if (status == KVC_OK) status = kvc_paged_make_writable(&store->qrows, q_first, store->qrows.len);
    if (status == KVC_OK) {
        const size_t first = q_first > store->recent_base ? q_first - store->recent_base : 0;
        status = kvc_paged_make_writable(&store->recent, first, store->recent.len);
    }
    return status;
}

void kvc_store_move_quantized(kvc_store *store, size_t write, size_t read, size_t window_first,
                              size_t *copies_write) {
    kvc_paged_move(&store->qrows, write, read);
    if (read >= window_first && store->traits->keeps_copies)
        kvc_paged_move(&store->recent, (*copies_write)++, read - store->recent_base);
}

void kvc_store_compacted(kvc_store *store, size_t f32_rows, size_t q_rows, size_t copies) {
    kvc_paged_set_len(&store->rows, f32_rows);
    kvc_paged_set_len(&store->qrows, q_rows);
    kvc_paged_set_len(&store->recent, copies);
    /* The kept rows that have copies are the last ones kept. */
    store->recent_base = q_rows - copies;
}

/* The first of the store's first n quantized rows read from its f32 copy:
 * (keeps_copies) the newest residual_rows of them that still have their copies. */
static size_t first_copy_read(const kvc_store *store, size_t n, size_t residual_rows) {
    if (!store->traits->keeps_copies) return n;
    const size_t newest = n > residual_rows ? n - residual_rows : 0;
    const size_t first = newest > store->recent_base ? newest : store->recent_base;
    return first < n ? first : n;
}

size_t kvc_store_window_first(const kvc_store *store, size_t residual_rows) {
    return first_copy_read(store, store->qrows.len, residual_rows);
}

size_t kvc_store_exact_rollback(const kvc_store *store, size_t residual_rows) {
    if (!store->traits->keeps_copies || store->recent_base == 0) return SIZE_MAX;
    const size_t n = store->qrows.len;
    return n > residual_rows + store->recent_base ? n - residual_rows - store->recent_base : 0;
}

kvc_rows_view kvc_store_view_prefix(const kvc_store *store, size_t residual_rows, size_t rows) {
    /* The window of the store truncated to `rows`, as kvc_store_drop leaves it. */
    const size_t quantized = rows > store->rows.len ? rows - store->rows.len : 0;
    const size_t q_count = first_copy_read(store, quantized, residual_rows);
    const size_t recent_first = q_count > store->recent_base ? q_count - store->recent_base : 0;
    return (kvc_rows_view){
        .rows = &store->rows,
        .qrows = &store->qrows,
        .q_count = q_count,
        .traits = store->traits,
        .recent = &store->recent,
        .recent_first = recent_first,
        .recent_count = quantized - q_count,
        .field = q_count ? (const float *)(const void *)kvc_paged_at(&store->field, 0) : NULL,
    };
}

kvc_rows_view kvc_store_view(const kvc_store *store, size_t residual_rows) {
    return kvc_store_view_prefix(store, residual_rows, kvc_store_len(store));
}

void kvc_store_copy_rows(const kvc_store *store, size_t d, size_t residual_rows, float *dst,
                         const kvc_kernels *kernels) {
    /* dst may be NULL when the store is empty: no arithmetic on it then. */
    const kvc_rows_view view = kvc_store_view(store, residual_rows);
    if (store->rows.len) {
        kvc_paged_read(&store->rows, 0, store->rows.len, dst);
        dst += store->rows.len * d;
    }
    if (view.q_count) {
        uint8_t unpacked[sizeof(float) + KVC_KERNEL_MAX_DIM];
        kvc_unpack_q4_fn *unpack = kvc_traits_unpack(store->traits, kernels);
        for (size_t r = 0; r < view.q_count; r++) {
            const uint8_t *qrow = kvc_paged_at(&store->qrows, r);
            if (unpack) {
                unpack(1, d, qrow, unpacked);
                qrow = unpacked;
            }
            kernels->dequantize_row(d, kvc_q8_row_codes(qrow), kvc_q8_row_scale(qrow), view.field,
                                    dst + r * d);
        }
        dst += view.q_count * d;
    }
    if (view.recent_count) kvc_paged_read(&store->recent, view.recent_first, view.recent_count, dst);
}

size_t kvc_store_len(const kvc_store *store) {
    return store->rows.len + store->qrows.len;
}

/* The copies that are content: the residual window's (the rollback rows
 * before them are kept, like spare capacity, for a truncation to come). */
static size_t rollback_copies(const kvc_store *store, size_t residual_rows) {
    if (!store->traits->keeps_copies) return 0;
    return kvc_store_window_first(store, residual_rows) - store->recent_base;
}

size_t kvc_store_bytes(const kvc_store *store, size_t residual_rows) {
    return store->rows.len * store->rows.elem_bytes + store->qrows.len * store->qrows.elem_bytes +
           (store->recent.len - rollback_copies(store, residual_rows)) * store->recent.elem_bytes;
}

size_t kvc_store_shared_bytes(const kvc_store *store, size_t residual_rows) {
    return kvc_paged_shared_bytes(&store->rows, 0) + kvc_paged_shared_bytes(&store->qrows, 0) +
           kvc_paged_shared_bytes(&store->recent, rollback_copies(store, residual_rows)) +
           kvc_paged_shared_bytes(&store->field, 0);
}

size_t kvc_store_count_bytes(const kvc_store *store, size_t residual_rows, uint32_t walk) {
    return kvc_paged_count_bytes(&store->rows, 0, walk) + kvc_paged_count_bytes(&store->qrows, 0, walk) +
           kvc_paged_count_bytes(&store->recent, rollback_copies(store, residual_rows), walk) +
           kvc_paged_count_bytes(&store->field, 0, walk);
}

size_t kvc_store_capacity_bytes(const kvc_store *store) {
    return kvc_paged_capacity_bytes(&store->rows) + kvc_paged_capacity_bytes(&store->qrows) +
           kvc_paged_capacity_bytes(&store->recent) + kvc_paged_capacity_bytes(&store->field);
}

kvc_status kvc_store_fork(kvc_store *dst, const kvc_store *src) {
    dst->traits = src->traits;
    dst->recent_base = src->recent_base;
    kvc_status status = kvc_paged_fork(&dst->rows, &src->rows);
    kvc_paged_init(&dst->qrows, src->qrows.elem_bytes, src->qrows.shift);
    kvc_paged_init(&dst->recent, src->recent.elem_bytes, src->recent.shift);
    kvc_paged_init(&dst->field, src->field.elem_bytes, src->field.shift);
    if (status == KVC_OK) status = kvc_paged_fork(&dst->qrows, &src->qrows);
    if (status == KVC_OK) status = kvc_paged_fork(&dst->recent, &src->recent);
    if (status == KVC_OK) status = kvc_paged_fork(&dst->field, &src->field);
    return status;
}

void kvc_store_free(kvc_store *store) {
    kvc_paged_free(&store->rows);
    kvc_paged_free(&store->qrows);
    kvc_paged_free(&store->recent);
    kvc_paged_free(&store->field);
}
