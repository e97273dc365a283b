/*
 * append.c -- positions in and out: append, append_n, truncate_last.
 *
 * Appends are all or nothing: every live element is checked and every page
 * the rows and slots go to is made writable (allocated, or copied when
 * shared) before the first row is written, so a refused or out-of-memory
 * call leaves the layer as it was.  Rows go to a store by absolute position:
 * below KVC_Q8_WINDOW as f32, from it on as codes in a quantized component
 * (and, in a format that keeps copies, an f32 copy: the newest rows' copies
 * are the residual window).
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

/* The rows head h gains from n positions, below the window and from it on. */
static void rows_gained(const kvc_layer *layer, size_t n, const uint8_t *alive, size_t h,
                        size_t *below, size_t *from) {
    const size_t H = layer->num_kv_heads, first = layer->next_position;
    *below = *from = 0;
    for (size_t i = 0; i < n; i++) {
        if (!head_alive(alive ? alive + i * H : NULL, h)) continue;
        if (first + i < KVC_Q8_WINDOW) ++*below;
        else ++*from;
    }
}

/* Makes every page that n more slots and their rows will need writable.
 * `releasing`: the f32 copies that go (kvc_store_release_copies) will go
 * before the rows come, so the new copies need no more room than stays. */
static kvc_status reserve(kvc_layer *layer, size_t n, const uint8_t *alive, int releasing) {
    kvc_status status = kvc_slots_reserve(layer, n);
    if (status != KVC_OK) return status;
    const size_t first = layer->next_position;
    if (kvc_quantized_components(layer->mode) && first <= KVC_Q8_WINDOW && KVC_Q8_WINDOW < first + n) {
        status = kvc_field_reserve(layer);
        if (status != KVC_OK) return status;
    }
    for (size_t h = 0; h < layer->num_kv_heads; h++) {
        size_t below, from;
        rows_gained(layer, n, alive, h, &below, &from);
        kvc_head *head = &layer->heads[h];
        status = kvc_store_reserve(&head->keys, below, from, layer->residual_rows, releasing);
        if (status == KVC_OK) status = kvc_store_reserve(&head->values, below, from, layer->residual_rows, releasing);
        if (status != KVC_OK) return status;
    }
    return KVC_OK;
}

static void push_row(kvc_store *store, size_t position, size_t d, const float *x,
                     const kvc_kernels *kernels) {
    if (store->traits->quantized && position >= KVC_Q8_WINDOW) kvc_store_push_quantized(store, d, x, kernels);
    else kvc_store_push_f32(store, x);
}

/* The slot of the next position: its alive bits, a zero importance, its
 * absolute position. */
static void take_slot(kvc_layer *layer, const uint8_t *alive) {
    const size_t slot = layer->seq_len;
    uint8_t *map = kvc_paged_at(&layer->alive, slot);
    memset(map, 0, layer->map_bytes);
    for (size_t h = 0; h < layer->num_kv_heads; h++) {
        if (head_alive(alive, h)) map[h >> 3] |= (uint8_t)(1u << (h & 7));
    }
    *kvc_slot_imp(layer, slot) = 0.0f;
    *(uint32_t *)(void *)kvc_paged_at(&layer->positions, slot) = (uint32_t)layer->next_position;
    kvc_slots_set_len(layer, slot + 1);
    layer->next_position++;
}

/* Writes one position; every page it needs is writable. */
static void append_one(kvc_layer *layer, const float *k, const float *v, const uint8_t *alive) {
    const kvc_kernels *kernels = kvc_kernels_active();
    const size_t H = layer->num_kv_heads, d = layer->head_dim;
    const size_t position = layer->next_position;
    if (kvc_quantized_components(layer->mode) && position == KVC_Q8_WINDOW) kvc_field_freeze(layer);
    for (size_t h = 0; h < H; h++) {
        if (!head_alive(alive, h)) continue;
        push_row(&layer->heads[h].keys, position, d, k + h * d, kernels);
        push_row(&layer->heads[h].values, position, d, v + h * d, kernels);
    }
    take_slot(layer, alive);
}

/* Positions from the window on, as tasks: each (head, component) pushes
 * its rows in order -- a prefill's quantization spread over the threads. */
typedef struct rows_job {
    kvc_layer *layer;
    size_t n, first_position;       /* positions first_position .. + n */
    const float *k, *v;             /* [n x H x d] */
    const uint8_t *alive;           /* [n x H] or NULL */
} rows_job;

static void push_rows_task(void *context, size_t task, size_t thread) {
    (void)thread;
    const rows_job *job = context;
    const kvc_layer *layer = job->layer;
    const size_t H = layer->num_kv_heads, d = layer->head_dim, h = task / 2;
    const int is_values = (int)(task % 2);
    kvc_store *store = is_values ? &layer->heads[h].values : &layer->heads[h].keys;
    const float *x = is_values ? job->v : job->k;
    for (size_t i = 0; i < job->n; i++) {
        if (!head_alive(job->alive ? job->alive + i * H : NULL, h)) continue;
        push_row(store, job->first_position + i, d, x + (i * H + h) * d, kvc_kernels_active());
    }
}

static void append_positions(kvc_layer *layer, size_t n, const float *k, const float *v,
                             const uint8_t *alive) {
    const size_t H = layer->num_kv_heads, stride = H * layer->head_dim;
    /* Below the window, one position at a time: the field freezes from
     * these rows when position W comes. */
    size_t i = 0;
    for (; i < n && layer->next_position < KVC_Q8_WINDOW; i++)
        append_one(layer, k + i * stride, v + i * stride, alive ? alive + i * H : NULL);
    if (i == n) return;
    if (layer->next_position == KVC_Q8_WINDOW && kvc_quantized_components(layer->mode)) kvc_field_freeze(layer);
    const rows_job job = {layer, n - i, layer->next_position, k + i * stride, v + i * stride,
                          alive ? alive + i * H : NULL};
    for (size_t j = i; j < n; j++) take_slot(layer, alive ? alive + j * H : NULL);
    kvc_pool_run(push_rows_task, (void *)&job, 2 * H, kvc_pool_threads(), (uint64_t)job.n * stride * 8);
}

/* Lets the stores that keep copies go of those they will not need once n
 * more positions come. */
static void release_copies(kvc_layer *layer, size_t n, const uint8_t *alive) {
    if (!kvc_mode_keeps_copies(layer->mode)) return; /* no copies: nothing to count */
    for (size_t h = 0; h < layer->num_kv_heads; h++) {
        size_t below, from;
        rows_gained(layer, n, alive, h, &below, &from);
        kvc_store_release_copies(&layer->heads[h].keys, layer->residual_rows, from);
        kvc_store_release_copies(&layer->heads[h].values, layer->residual_rows, from);
    }
}

kvc_status kvc_layer_append_n(kvc_layer *layer, size_t n, const float *k, const float *v,
                              const uint8_t *alive) {
    if (!layer) return KVC_E_NULL_POINTER;
    if (!kvc_has_rows(layer)) return KVC_E_KIND;
    if (n == 0) return KVC_OK;
    if (!k || !v) return KVC_E_NULL_POINTER;
    if (n > KVC_MAX_POSITIONS - layer->next_position) return KVC_E_TOO_LONG;
    if (layer->max_rows && !layer->verifying && n > layer->max_rows) return KVC_E_LENGTH;
    /* With max_rows, make room first: the new positions are always kept.
     * A verify's drafts go past it: a rejected draft must leave the layer as
     * it was, so accept bounds the layer again (verify.c). */
    const int evicts = layer->max_rows && !layer->verifying && layer->seq_len + n > layer->max_rows;
    /* (The room for f32 copies is reckoned on the layer as it is: after an
     * eviction every new row's copy is reserved.) */
    kvc_status status = check_finite(layer, n, k, v, alive);
    if (status == KVC_OK) status = reserve(layer, n, alive, !layer->verifying && !evicts);
    if (status == KVC_OK && evicts)
        status = kvc_evict_to(layer, layer->max_rows - n, layer->evict_sinks, layer->evict_recent);
    if (status != KVC_OK) return status;
    if (!layer->verifying) release_copies(layer, n, alive);
    const size_t first = layer->next_position;
    append_positions(layer, n, k, v, alive);
    /* A verify's drafts slide nothing: a reject must find the layer as it was. */
    if (!layer->verifying) kvc_window_slide(layer, first);
    return KVC_OK;
}

void kvc_layer_release_copies(kvc_layer *layer) {
    release_copies(layer, 0, NULL);
}

kvc_status kvc_layer_append(kvc_layer *layer, const float *k, const float *v,
                            const uint8_t *alive) {
    return kvc_layer_append_n(layer, 1, k, v, alive);
}

kvc_status kvc_layer_truncate_last(kvc_layer *layer, size_t n) {
    if (!layer) return KVC_E_NULL_POINTER;
    kvc_recurrent *r = kvc_recurrent_of(layer);
    if (layer->verifying && (kvc_has_rows(layer) || r)) return KVC_E_VERIFYING;
    if (!kvc_has_rows(layer)) return r && kvc_recurrent_take_back(r, n) ? KVC_OK : KVC_E_KIND;
    if (n > kvc_window_truncatable(layer)) return KVC_E_WINDOW; /* the rows the new newest position sees slid out */
    /* Rows beside a state: the state's last call or nothing, checked before the rows change. */
    if (r && !kvc_recurrent_take_back(r, n)) return KVC_E_KIND;
    kvc_layer_drop_from(layer, n < layer->next_position ? layer->next_position - n : 0);
    return KVC_OK;
}

void kvc_layer_drop_from(kvc_layer *layer, size_t cut) {
    /* The slots at or after the cut are the last ones (positions increase);
     * finding them costs what dropping them does. */
    size_t new_len = layer->seq_len;
    while (new_len > 0 && kvc_slot_position(layer, new_len - 1) >= cut) new_len--;
    /* Dropped slots at positions below the window are f32 rows in every
     * store; from the window on they are quantized rows in a quantized store. */
    const size_t split = kvc_first_slot_from(layer, new_len, layer->seq_len, KVC_Q8_WINDOW);
    for (size_t h = 0; h < layer->num_kv_heads; h++) {
        const size_t below = kvc_head_rows_between(layer, h, new_len, split);
        const size_t from = kvc_head_rows_between(layer, h, split, layer->seq_len);
        kvc_store *stores[2] = {&layer->heads[h].keys, &layer->heads[h].values};
        for (int c = 0; c < 2; c++) {
            if (stores[c]->traits->quantized) kvc_store_drop(stores[c], below, from);
            else kvc_store_drop(stores[c], below + from, 0);
        }
    }
    kvc_slots_set_len(layer, new_len);
    layer->next_position = cut;
    if (layer->next_position <= KVC_Q8_WINDOW) kvc_field_unfreeze(layer);
}
