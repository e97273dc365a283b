/*
 * embed.c -- an embedding model's vectors and a reranker's scores: many
 * texts in one pass of the weights (forward.c's kvc_lm_encode), each text's
 * tokens attending to their own text alone from position 0 -- both ways for
 * an encoder, up to themselves for a causal model, a window layer over its
 * window (symmetric for an encoder: llama.cpp's LLAMA_SWA_TYPE_SYMMETRIC)
 * -- then pooled (mean, first token, last token) and through the file's
 * dense layers, or (rank) through the classification head, as llama.cpp's
 * build_pooling and build_dense_out compute them.  No rows outlive the
 * call.
 */
#include <math.h>
#include <string.h>

#include "../core/internal.h"
#include "model.h"

kvc_pooling kvc_lm_pooling(const kvc_lm *lm) { return lm ? lm->pooling : KVC_POOLING_NONE; }
int kvc_lm_causal(const kvc_lm *lm) { return lm ? lm->causal : 0; }
size_t kvc_lm_embedding_dim(const kvc_lm *lm) { return lm ? lm->embedding_dim : 0; }
size_t kvc_lm_rank_outputs(const kvc_lm *lm) { return lm && lm->cls_out.type ? lm->rank_outputs : 0; }

/* What a pass over the texts works in, freed together. */
typedef struct embed_work {
    uint32_t *positions; /* [n x 4] */
    uint32_t *ranges;    /* [4 x n]: global first, end; window first, end */
    float *hidden;       /* [n x dim] */
    float *rows;         /* [count x dim]: each text's pooled row */
    float *wide, *narrow; /* the dense layers' and the head's outputs */
    float *vector;       /* a bias as f32 */
    uint8_t *codes;      /* the rows coded for a head's weights */
} embed_work;

static void work_free(embed_work *w) {
    void *arrays[] = {w->positions, w->ranges, w->hidden, w->rows, w->wide, w->narrow, w->vector, w->codes};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++) kvc_free(arrays[i]);
}

/* Each token's RoPE position in its text, and the slots it attends in a
 * global and in a window layer of `window` positions. */
static void plan_texts(const kvc_lm *lm, const uint32_t *lengths, size_t count, size_t n, size_t window,
                       embed_work *w) {
    uint32_t *global_first = w->ranges, *global_end = w->ranges + n;
    uint32_t *window_first = w->ranges + 2 * n, *window_end = w->ranges + 3 * n;
    const size_t half = window / 2;
    size_t start = 0;
    for (size_t j = 0; j < count; j++) {
        const size_t end = start + lengths[j];
        for (size_t at = start; at < end; at++) {
            const size_t i = at - start;
            for (size_t c = 0; c < 3; c++) w->positions[4 * at + c] = (uint32_t)i;
            w->positions[4 * at + 3] = 0;
            global_first[at] = (uint32_t)start;
            global_end[at] = (uint32_t)(lm->causal ? at + 1 : end);
            if (lm->causal) {
                window_first[at] = (uint32_t)(i + 1 > window ? at + 1 - window : start);
                window_end[at] = (uint32_t)(at + 1);
            } else {
                window_first[at] = (uint32_t)(i > half ? at - half : start);
                window_end[at] = (uint32_t)(at + half + 1 < end ? at + half + 1 : end);
            }
        }
        start = end;
    }
}

/* rows [T x cols] times weight t into y [T x t->rows], plus its bias (absent:
 * none). */
static kvc_status dense(const kvc_tensor *t, const kvc_tensor *bias, const float *rows, size_t T, float *y,
                        embed_work *w) {
    void *codes = kvc_realloc_array(w->codes, kvc_matmul_codes_bytes(t->type, t->cols, T) + 1, 1);
    if (!codes) return KVC_E_NOMEM;
    w->codes = codes;
    const kvc_product product = {t, y, t->rows};
    kvc_matmul(KVC_PROFILE_LOGITS, 1, &product, rows, T, w->codes);
    if (!bias->type) return KVC_OK;
    void *vector = kvc_realloc_array(w->vector, bias->cols, sizeof(float));
    if (!vector) return KVC_E_NOMEM;
    w->vector = vector;
    const float *b = kvc_vector_f32(bias, w->vector);
    for (size_t r = 0; r < T; r++) kvc_add(t->rows, y + r * t->rows, b);
    return KVC_OK;
}

/* Grows *array to count floats. */
static kvc_status floats(float **array, size_t count) {
    float *grown = kvc_realloc_array(*array, count ? count : 1, sizeof(float));
    if (!grown) return KVC_E_NOMEM;
    *array = grown;
    return KVC_OK;
}

/* Each text's pooled row of w->hidden into w->rows (count rows). */
static void pool(const kvc_lm *lm, const uint32_t *lengths, size_t count, kvc_pooling pooling, embed_work *w) {
    const size_t dim = lm->dim;
    const int last = pooling == KVC_POOLING_LAST || (pooling == KVC_POOLING_RANK && (lm->arch->flags & KVC_ARCH_RANK_LAST));
    size_t start = 0;
    for (size_t j = 0; j < count; j++) {
        float *row = w->rows + j * dim;
        if (pooling == KVC_POOLING_MEAN) {
            /* Summed in double: a long text's mean loses nothing to the order. */
            for (size_t c = 0; c < dim; c++) {
                double sum = 0;
                for (size_t t = start; t < start + lengths[j]; t++) sum += w->hidden[t * dim + c];
                row[c] = (float)(sum / lengths[j]);
            }
        } else {
            memcpy(row, w->hidden + (last ? start + lengths[j] - 1 : start) * dim, dim * sizeof(float));
        }
        start += lengths[j];
    }
}

/* The classification head on the pooled rows: cls (+ bias), tanh; then
 * cls.output (+ bias); softmaxed for KVC_ARCH_RANK_LAST. Into w->narrow. */
static kvc_status rank_head(const kvc_lm *lm, size_t count, embed_work *w) {
    const float *rows = w->rows;
    kvc_status status = KVC_OK;
    if (lm->cls.type) {
        if ((status = floats(&w->wide, count * lm->cls.rows)) != KVC_OK ||
            (status = dense(&lm->cls, &lm->cls_bias, rows, count, w->wide, w)) != KVC_OK)
            return status;
        for (size_t i = 0; i < count * lm->cls.rows; i++) w->wide[i] = tanhf(w->wide[i]);
        rows = w->wide;
    }
    const size_t k = lm->cls_out.rows;
    if ((status = floats(&w->narrow, count * k)) != KVC_OK ||
        (status = dense(&lm->cls_out, &lm->cls_out_bias, rows, count, w->narrow, w)) != KVC_OK)
        return status;
    for (size_t j = 0; (lm->arch->flags & KVC_ARCH_RANK_LAST) && j < count; j++) {
        float *z = w->narrow + j * k, top = z[0], sum = 0;
        for (size_t i = 1; i < k; i++) top = z[i] > top ? z[i] : top;
        for (size_t i = 0; i < k; i++) sum += z[i] = expf(z[i] - top);
        for (size_t i = 0; i < k; i++) z[i] /= sum;
    }
    return KVC_OK;
}

/* The dense layers on `T` rows: dense_2 (+ bias), then dense_3; the result
 * in *result (the rows themselves without them). */
static kvc_status dense_layers(const kvc_lm *lm, size_t T, float *rows, const float **result, embed_work *w) {
    *result = rows;
    kvc_status status = KVC_OK;
    if (lm->dense_2.type) {
        if ((status = floats(&w->wide, T * lm->dense_2.rows)) != KVC_OK ||
            (status = dense(&lm->dense_2, &lm->dense_2_bias, *result, T, w->wide, w)) != KVC_OK)
            return status;
        *result = w->wide;
    }
    if (lm->dense_3.type) {
        static const kvc_tensor no_bias;
        if ((status = floats(&w->narrow, T * lm->dense_3.rows)) != KVC_OK ||
            (status = dense(&lm->dense_3, &no_bias, *result, T, w->narrow, w)) != KVC_OK)
            return status;
        *result = w->narrow;
    }
    return KVC_OK;
}

/* KVC_OK when every block attends over rows of its own or convolves its
 * inputs (what a text alone can have), else KVC_E_KIND. */
static kvc_status every_block_embeds(const kvc_lm *lm) {
    if (lm->outside_bytes) return KVC_E_KIND;
    for (size_t l = 0; l < lm->num_layers; l++) {
        const kvc_kind kind = lm->plans[l].kind;
        if (kind != KVC_KIND_FULL && kind != KVC_KIND_WINDOW && kind != KVC_KIND_CONV) return KVC_E_KIND;
    }
    return KVC_OK;
}

kvc_status kvc_lm_embed(kvc_lm *lm, const uint32_t *tokens, const uint32_t *lengths, size_t count,
                        kvc_pooling pooling, float *out) {
    if (!lm || !tokens || !lengths || !out || !lm->weights) return KVC_E_NULL_POINTER;
    if (count == 0) return KVC_E_LENGTH;
    size_t n = 0;
    for (size_t j = 0; j < count; j++) {
        if (lengths[j] == 0 || lengths[j] > lm->context_length || lengths[j] > KVC_MAX_POSITIONS - n) return KVC_E_LENGTH;
        n += lengths[j];
    }
    for (size_t i = 0; i < n; i++) {
        if (tokens[i] >= lm->vocab_size) return KVC_E_TOKEN;
    }
    if ((unsigned)pooling > KVC_POOLING_RANK || (pooling == KVC_POOLING_RANK && !lm->cls_out.type)) return KVC_E_KIND;
    kvc_status status = every_block_embeds(lm);
    if (status != KVC_OK) return status;

    embed_work w;
    memset(&w, 0, sizeof w);
    const size_t dim = lm->dim, pooled = pooling == KVC_POOLING_NONE ? n : count;
    w.positions = kvc_realloc_array(NULL, n, 4 * sizeof(uint32_t));
    w.ranges = kvc_realloc_array(NULL, n, 4 * sizeof(uint32_t));
    w.hidden = kvc_realloc_array(NULL, n, dim * sizeof(float));
    w.rows = kvc_realloc_array(NULL, pooled, dim * sizeof(float));
    if (!w.positions || !w.ranges || !w.hidden || !w.rows) status = KVC_E_NOMEM;
    if (status == KVC_OK) {
        plan_texts(lm, lengths, count, n, lm->window, &w);
        status = kvc_lm_encode(lm, tokens, n, w.positions, w.ranges, w.hidden);
    }
    const float *result = NULL;
    size_t width = lm->embedding_dim;
    if (status == KVC_OK && pooling == KVC_POOLING_RANK) {
        pool(lm, lengths, count, pooling, &w);
        status = rank_head(lm, count, &w);
        result = w.narrow, width = lm->cls_out.rows;
    } else if (status == KVC_OK) {
        if (pooling == KVC_POOLING_NONE) memcpy(w.rows, w.hidden, n * dim * sizeof(float));
        else pool(lm, lengths, count, pooling, &w);
        status = dense_layers(lm, pooled, w.rows, &result, &w);
    }
    if (status == KVC_OK) memcpy(out, result, pooled * width * sizeof(float));
    work_free(&w);
    return status;
}
