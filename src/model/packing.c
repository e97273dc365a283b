/*
 * packing.c -- the weights packed for the kernels at load (weights.h's
 * packed layouts), and what reads them back as the file has them: a row's
 * values (an embedding's token rows, a tied output's table) and the digest
 * that names the model's file.
 */
#include "../core/bytes.h"
#include "../core/internal.h"
#include "model.h"

/* Whether t is a matrix packed at load: a type with a packed layout, at
 * least one whole tile of rows, in the weights region (not the per-layer
 * table, which is only ever gathered row by row). */
static int packable(const kvc_lm *lm, const kvc_tensor *t) {
    return t->type && t->type->packing && t->data && t != &lm->per_layer_embd && t->rows >= t->type->packing->rows;
}

typedef struct pack_walk {
    kvc_lm *lm;
    uint8_t *scratch;
    size_t scratch_bytes; /* what the largest tile needs */
    const kvc_tensor *packed; /* a tensor packed so far whose bytes are those of ... */
    const uint8_t *data;      /* ... this one (the search for an alias) */
} pack_walk;

static void size_scratch(kvc_tensor *t, void *context) {
    pack_walk *walk = context;
    if (!packable(walk->lm, t)) return;
    const size_t bytes = t->type->packing->rows * t->row_bytes;
    if (bytes > walk->scratch_bytes) walk->scratch_bytes = bytes;
}

static void find_packed(kvc_tensor *t, void *context) {
    pack_walk *walk = context;
    if (!walk->packed && t->packing && t->data == walk->data) walk->packed = t;
}

static void pack_tensor(kvc_tensor *t, void *context) {
    pack_walk *walk = context;
    if (!packable(walk->lm, t)) return;
    /* The tied output copies token_embd: the same bytes, packed once. */
    walk->packed = NULL, walk->data = t->data;
    kvc_lm_each_tensor(walk->lm, find_packed, walk);
    const kvc_weight_packing *packing = t->type->packing;
    if (!walk->packed) {
        uint8_t *w = (uint8_t *)(uintptr_t)t->data; /* the weights region, the model's own */
        for (size_t r = 0; r + packing->rows <= t->rows; r += packing->rows) {
            packing->pack(t->cols, t->row_bytes, w + r * t->row_bytes, walk->scratch);
        }
    }
    t->packing = packing;
}

kvc_status kvc_lm_pack_weights(kvc_lm *lm) {
    if (!lm) return KVC_E_NULL_POINTER;
    if (!lm->weights) return KVC_E_KIND;
    if (lm->packed) return KVC_OK;
    pack_walk walk = {.lm = lm};
    kvc_lm_each_tensor(lm, size_scratch, &walk);
    if (walk.scratch_bytes) {
        walk.scratch = kvc_malloc(walk.scratch_bytes);
        if (!walk.scratch) return KVC_E_NOMEM;
        kvc_lm_each_tensor(lm, pack_tensor, &walk);
        kvc_free(walk.scratch);
    }
    lm->packed = 1;
    return KVC_OK;
}

/* The rows of t a packed layout holds: its whole tiles. */
static size_t packed_rows(const kvc_tensor *t) {
    return t->packing ? t->rows / t->packing->rows * t->packing->rows : 0;
}

void kvc_tensor_values(const kvc_tensor *t, size_t r, size_t first, size_t count, float *out) {
    if (r >= packed_rows(t)) {
        t->type->dequantize(t->data + r * t->row_bytes, first, count, out);
        return;
    }
    const size_t R = t->packing->rows, B = t->type->block_values;
    const uint8_t *tile = t->data + r / R * R * t->row_bytes;
    uint8_t block[KVC_MAX_BLOCK_BYTES];
    while (count > 0) {
        const size_t within = first % B, take = B - within < count ? B - within : count;
        t->packing->unpack_block(tile, r % R, first / B, block);
        t->type->dequantize(block, within, take, out);
        out += take, first += take, count -= take;
    }
}

/* ---- the digest: the file's bytes, packed tiles read back block by block ---- */

typedef struct digest_walk {
    const uint8_t *weights;
    size_t from;            /* the next byte to digest, in the region */
    const kvc_tensor *next; /* the packed tensor whose tiles hold the first packed byte from there on */
    size_t next_at;         /* that byte */
} digest_walk;

static void find_next_packed(kvc_tensor *t, void *context) {
    digest_walk *walk = context;
    if (!t->packing || !t->data) return;
    const size_t at = (size_t)(t->data - walk->weights), tiles_end = at + packed_rows(t) * t->row_bytes;
    if (tiles_end <= walk->from) return;
    const size_t first = at > walk->from ? at : walk->from;
    /* The tied output shares token_embd's bytes: either stands for them. */
    if (!walk->next || first < walk->next_at) walk->next = t, walk->next_at = first;
}

/* Bytes [from, to) of a packed tensor (offsets in it, within its whole tiles), as the file had them. */
static void digest_packed(kvc_digest_state *state, const kvc_tensor *t, size_t from, size_t to) {
    const size_t R = t->packing->rows, block_bytes = t->type->block_bytes;
    uint8_t block[KVC_MAX_BLOCK_BYTES];
    for (size_t at = from - from % block_bytes; at < to; at += block_bytes) {
        const size_t r = at / t->row_bytes, b = at % t->row_bytes / block_bytes;
        t->packing->unpack_block(t->data + r / R * R * t->row_bytes, r % R, b, block);
        const size_t lo = from > at ? from - at : 0, hi = to - at < block_bytes ? to - at : block_bytes;
        kvc_digest_add(state, block + lo, hi - lo);
    }
}

uint64_t kvc_lm_digest(const kvc_lm *lm, size_t offset, size_t n, uint64_t seed) {
    if (!lm || !lm->weights || offset > lm->weights_bytes || n > lm->weights_bytes - offset) return 0;
    kvc_digest_state state;
    kvc_digest_begin(&state, seed);
    const size_t end = offset + n;
    digest_walk walk = {.weights = lm->weights, .from = offset};
    while (walk.from < end) {
        walk.next = NULL;
        kvc_lm_each_tensor((kvc_lm *)(uintptr_t)lm, find_next_packed, &walk);
        if (!walk.next || walk.next_at >= end) {
            kvc_digest_add(&state, lm->weights + walk.from, end - walk.from);
            break;
        }
        const kvc_tensor *t = walk.next;
        const size_t at = (size_t)(t->data - lm->weights), tiles_end = at + packed_rows(t) * t->row_bytes;
        const size_t stop = tiles_end < end ? tiles_end : end;
        kvc_digest_add(&state, lm->weights + walk.from, walk.next_at - walk.from);
        digest_packed(&state, t, walk.next_at - at, stop - at);
        walk.from = stop;
    }
    return kvc_digest_end(&state);
}
