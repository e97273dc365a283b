/*
 * quant.c -- the per-channel field of the q8 "2f" scheme.
 *
 * A quantized row is read as r[j] * s * c[j].  The field c evens out the few
 * outlier channels that keys carry, so that one scale per row suffices.  It is
 * frozen once, when position KVC_Q8_WINDOW is appended, from the head's rows
 * at positions 0..W-1 -- which are exactly the store's f32 rows at that
 * moment -- and is kept until a truncation reaches back below W.
 */
#include <math.h>

#include "internal.h"

/* A channel that was zero in every window row still needs c > 0. */
#define KVC_Q8_FIELD_FLOOR 1e-30f

/* And no channel's c lies more than 2^6 below the head's largest.  attend
 * codes the query as q[j] * c[j] in 14 bits from its largest lane
 * (KVC_QUERY_CODE_MAX): a channel far below would lose its share of the
 * scores when it turns active after the window -- its key codes carry it
 * with a huge row scale, the query's code would carry nothing (12 bits below
 * left it 2 bits, and attend 0.39 off the rows read back in
 * tests/c/test_quant.c).  6 bits below leaves such a channel 8; a channel
 * that small in the window is noise to the scores, and raising its c moves
 * its read-back by less than a step of the largest. */
#define KVC_Q8_FIELD_RANGE_LOG2 6

/* freeze_store reads the window's rows from one page. */
_Static_assert(KVC_PAGE_ELEMS >= KVC_Q8_WINDOW, "the f32 rows of a quantized store fit a page");

kvc_status kvc_field_reserve(kvc_layer *layer) {
    for (size_t h = 0; h < layer->num_kv_heads; h++) {
        kvc_store *stores[2] = {&layer->heads[h].keys, &layer->heads[h].values};
        for (int is_values = 0; is_values < 2; is_values++) {
            if (!stores[is_values]->traits->quantized) continue;
            const kvc_status status = kvc_paged_reserve(&stores[is_values]->field, 1);
            if (status != KVC_OK) return status;
        }
    }
    return KVC_OK;
}

/* c[j] = RMS of channel j over the store's f32 rows, all ones when it has none,
 * floored as above.  Summed in double, in row order: the same bytes on every
 * build.  The f32 rows are the window's, all in the store's first page. */
static void freeze_store(kvc_store *store, size_t d) {
    const float *rows = store->rows.len ? (const float *)(const void *)kvc_paged_at(&store->rows, 0) : NULL;
    float *field = (float *)(void *)kvc_paged_at(&store->field, 0);
    for (size_t j = 0; j < d; j++) {
        float c = 1.0f;
        if (store->rows.len) {
            double sum_sq = 0.0;
            for (size_t r = 0; r < store->rows.len; r++) {
                double x = rows[r * d + j];
                sum_sq += x * x;
            }
            c = (float)sqrt(sum_sq / (double)store->rows.len);
            if (c < KVC_Q8_FIELD_FLOOR) c = KVC_Q8_FIELD_FLOOR;
        }
        field[j] = c;
    }
    float max_c = 0.0f;
    for (size_t j = 0; j < d; j++) max_c = fmaxf(max_c, field[j]);
    const float floor_c = ldexpf(max_c, -KVC_Q8_FIELD_RANGE_LOG2);
    for (size_t j = 0; j < d; j++) field[j] = fmaxf(field[j], floor_c);
    kvc_paged_set_len(&store->field, 1);
}

void kvc_field_freeze(kvc_layer *layer) {
    for (size_t h = 0; h < layer->num_kv_heads; h++) {
        if (layer->heads[h].keys.traits->quantized) freeze_store(&layer->heads[h].keys, layer->head_dim);
        if (layer->heads[h].values.traits->quantized) freeze_store(&layer->heads[h].values, layer->head_dim);
    }
    layer->field_frozen = 1;
}

void kvc_field_unfreeze(kvc_layer *layer) {
    for (size_t h = 0; h < layer->num_kv_heads; h++) {
        kvc_paged_set_len(&layer->heads[h].keys.field, 0);
        kvc_paged_set_len(&layer->heads[h].values.field, 0);
    }
    layer->field_frozen = 0;
}
