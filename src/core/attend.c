/*
 * attend.c -- single-query softmax attention over one head.
 *
 * Both kvc_attention_head (plain f32 slices) and kvc_layer_attend (a head's
 * stores) run attend_rows below: the f32 branch of a layer is an
 * attention_head call by construction, not a second loop that happens to
 * agree with it.
 */
#include <math.h>
#include <string.h>

#include "internal.h"

/* A read-only view of one component's rows, as the attention loop sees it. */
typedef struct kvc_rows_view {
    const float *rows;
    size_t rows_len;
    const uint8_t *qrows;
    size_t qrows_len;
    const float *field;
} kvc_rows_view;

/* z[p] = (q . rows[p]) / sqrt(d) */
static void score_f32_rows(const kvc_kernels *kernels, const float *q, const float *rows, size_t n,
                           size_t d, float sqrt_d, float *z) {
    for (size_t p = 0; p < n; p++) z[p] = kernels->dot_f32(d, q, rows + p * d) / sqrt_d;
}

/* z[p] = (s_p * <q~, r_p>) / sqrt(d), q~ = q * c_K */
static void score_quantized_rows(const kvc_kernels *kernels, const float *q_field,
                                 const uint8_t *qrows, size_t n, size_t d, float sqrt_d, float *z) {
    const size_t stride = kvc_qrow_bytes(d);
    for (size_t p = 0; p < n; p++) {
        const uint8_t *qrow = qrows + p * stride;
        float scale;
        memcpy(&scale, qrow, sizeof(float));
        z[p] = (scale * kernels->dot_f32_i8(d, q_field, (const int8_t *)(qrow + sizeof(float)))) /
               sqrt_d;
    }
}

/* out += sum_p pi[p] * rows[p] */
static void sum_f32_rows(const kvc_kernels *kernels, const float *pi, const float *rows, size_t n,
                         size_t d, float *out) {
    for (size_t p = 0; p < n; p++) kernels->axpy_f32(d, pi[p], rows + p * d, out);
}

/* out += sum_p (pi[p] * s_p) * r_p, the field applied afterwards by the caller */
static void sum_quantized_rows(const kvc_kernels *kernels, const float *pi, const uint8_t *qrows,
                               size_t n, size_t d, float *out) {
    const size_t stride = kvc_qrow_bytes(d);
    for (size_t p = 0; p < n; p++) {
        const uint8_t *qrow = qrows + p * stride;
        float scale;
        memcpy(&scale, qrow, sizeof(float));
        kernels->axpy_i8(d, pi[p] * scale, (const int8_t *)(qrow + sizeof(float)), out);
    }
}

/* The one attention loop.  z: scratch of n = rows_len + qrows_len floats,
 * left holding the probabilities. */
static void attend_rows(const float *q, const kvc_rows_view *keys, const kvc_rows_view *values,
                        size_t d, float *out, float *z) {
    const kvc_kernels *kernels = kvc_kernels_active();
    const float sqrt_d = sqrtf((float)d);
    const size_t n = keys->rows_len + keys->qrows_len;

    score_f32_rows(kernels, q, keys->rows, keys->rows_len, d, sqrt_d, z);
    if (keys->qrows_len) {
        float q_field[KVC_MAX_HEAD_DIM];
        kernels->mul_f32(d, q, keys->field, q_field);
        score_quantized_rows(kernels, q_field, keys->qrows, keys->qrows_len, d, sqrt_d,
                             z + keys->rows_len);
    }
    kernels->softmax(n, z);

    memset(out, 0, d * sizeof(float));
    if (values->qrows_len) {
        sum_quantized_rows(kernels, z + values->rows_len, values->qrows, values->qrows_len, d, out);
        kernels->mul_f32(d, out, values->field, out);
    }
    sum_f32_rows(kernels, z, values->rows, values->rows_len, d, out);
}

/* attend_rows, or zeros for a head with no rows. */
static void attend_views(const float *q, const kvc_rows_view *keys, const kvc_rows_view *values,
                         size_t d, float *out, float *z) {
    if (keys->rows_len + keys->qrows_len == 0) memset(out, 0, d * sizeof(float));
    else attend_rows(q, keys, values, d, out, z);
}

/* *z: where n scores go -- the caller's probs, or a temporary block (none
 * for n = 0) that release_scores frees. */
static kvc_status scores_buffer(float *probs, size_t n, float **z) {
    *z = probs;
    if (probs || n == 0) return KVC_OK;
    *z = kvc_realloc_array(NULL, n, sizeof(float));
    return *z ? KVC_OK : KVC_E_NOMEM;
}

static void release_scores(float *z, const float *probs) {
    if (z != probs) kvc_free(z);
}

kvc_status kvc_attention_head(const float *q, const float *keys, const float *values, size_t n,
                              size_t d, float *out, float *probs) {
    if (!q || !out || (n && (!keys || !values))) return KVC_E_NULL_POINTER;
    if (d == 0 || d > KVC_MAX_HEAD_DIM) return KVC_E_HEAD_DIM;
    if (!kvc_kernels_active()->all_finite(d, q)) return KVC_E_NONFINITE_QUERY;
    const kvc_rows_view key_rows = {keys, n, NULL, 0, NULL};
    const kvc_rows_view value_rows = {values, n, NULL, 0, NULL};
    float *z;
    if (scores_buffer(probs, n, &z) != KVC_OK) return KVC_E_NOMEM;
    attend_views(q, &key_rows, &value_rows, d, out, z);
    release_scores(z, probs);
    return KVC_OK;
}

static kvc_rows_view view_of(const kvc_store *store) {
    return (kvc_rows_view){store->rows, store->rows_len, store->qrows, store->qrows_len,
                           store->field};
}

/* The first n rows of a view: rows are in position order, f32 ones first. */
static kvc_rows_view prefix_of(kvc_rows_view view, size_t n) {
    if (view.rows_len > n) view.rows_len = n;
    view.qrows_len = n - view.rows_len;
    return view;
}

/* The checks every attend of a layer makes. */
static kvc_status check_attend(const kvc_layer *layer, const float *q, size_t q_len,
                               size_t kv_head, const float *out) {
    if (!layer || !q || !out) return KVC_E_NULL_POINTER;
    if (layer->kind != KVC_KIND_FULL) return KVC_E_KIND;
    if (kv_head >= layer->num_kv_heads) return KVC_E_KV_HEAD;
    if (!kvc_kernels_active()->all_finite(q_len, q)) return KVC_E_NONFINITE_QUERY;
    return KVC_OK;
}

kvc_status kvc_layer_attend(const kvc_layer *layer, const float *q, size_t kv_head, float *out,
                            float *probs) {
    kvc_status status = check_attend(layer, q, layer ? layer->head_dim : 0, kv_head, out);
    if (status != KVC_OK) return status;
    const kvc_head *head = &layer->heads[kv_head];
    const kvc_rows_view keys = view_of(&head->keys);
    const kvc_rows_view values = view_of(&head->values);
    float *z;
    if (scores_buffer(probs, kvc_store_len(&head->keys), &z) != KVC_OK) return KVC_E_NOMEM;
    attend_views(q, &keys, &values, layer->head_dim, out, z);
    release_scores(z, probs);
    return KVC_OK;
}

kvc_status kvc_layer_attend_causal(const kvc_layer *layer, const float *q, size_t m,
                                   size_t kv_head, float *out, float *probs) {
    if (!layer || !q || !out) return KVC_E_NULL_POINTER;
    if (layer->kind == KVC_KIND_FULL &&
        (m == 0 || m > layer->seq_len || m > SIZE_MAX / sizeof(float) / layer->head_dim))
        return KVC_E_LENGTH;
    kvc_status status = check_attend(layer, q, m * layer->head_dim, kv_head, out);
    if (status != KVC_OK) return status;
    const size_t d = layer->head_dim, seq_len = layer->seq_len;
    const kvc_head *head = &layer->heads[kv_head];
    const size_t head_len = kvc_store_len(&head->keys);
    const kvc_rows_view keys = view_of(&head->keys);
    const kvc_rows_view values = view_of(&head->values);
    float *z;
    if (scores_buffer(probs, head_len, &z) != KVC_OK) return KVC_E_NOMEM;
    /* Query i sees positions < seq_len - m + i + 1: the rows at later
     * positions are hidden from it, fewer for each next query. */
    size_t hidden = kvc_head_rows_between(layer, kv_head, seq_len - m + 1, seq_len);
    for (size_t i = 0; i < m; i++) {
        if (i > 0) hidden -= (size_t)kvc_head_stored(layer, seq_len - m + i, kv_head);
        const size_t seen = head_len - hidden;
        const kvc_rows_view seen_keys = prefix_of(keys, seen);
        const kvc_rows_view seen_values = prefix_of(values, seen);
        float *zi = probs ? probs + i * head_len : z;
        attend_views(q + i * d, &seen_keys, &seen_values, d, out + i * d, zi);
        if (probs) memset(zi + seen, 0, hidden * sizeof(float));
    }
    release_scores(z, probs);
    return KVC_OK;
}
