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

/* Runs attend_rows with probs as its scratch, or a temporary one. */
static kvc_status attend_with_scratch(const float *q, const kvc_rows_view *keys,
                                      const kvc_rows_view *values, size_t d, float *out,
                                      float *probs) {
    const size_t n = keys->rows_len + keys->qrows_len;
    if (n == 0) {
        memset(out, 0, d * sizeof(float));
        return KVC_OK;
    }
    float *z = probs ? probs : kvc_realloc_array(NULL, n, sizeof(float));
    if (!z) return KVC_E_NOMEM;
    attend_rows(q, keys, values, d, out, z);
    if (!probs) kvc_free(z);
    return KVC_OK;
}

kvc_status kvc_attention_head(const float *q, const float *keys, const float *values, size_t n,
                              size_t d, float *out, float *probs) {
    if (!q || !out || (n && (!keys || !values))) return KVC_E_NULL_POINTER;
    if (d == 0 || d > KVC_MAX_HEAD_DIM) return KVC_E_HEAD_DIM;
    if (!kvc_kernels_active()->all_finite(d, q)) return KVC_E_NONFINITE_QUERY;
    const kvc_rows_view key_rows = {keys, n, NULL, 0, NULL};
    const kvc_rows_view value_rows = {values, n, NULL, 0, NULL};
    return attend_with_scratch(q, &key_rows, &value_rows, d, out, probs);
}

static kvc_rows_view view_of(const kvc_store *store) {
    return (kvc_rows_view){store->rows, store->rows_len, store->qrows, store->qrows_len,
                           store->field};
}

kvc_status kvc_layer_attend(const kvc_layer *layer, const float *q, size_t kv_head, float *out,
                            float *probs) {
    if (!layer || !q || !out) return KVC_E_NULL_POINTER;
    if (kv_head >= layer->num_kv_heads) return KVC_E_KV_HEAD;
    if (!kvc_kernels_active()->all_finite(layer->head_dim, q)) return KVC_E_NONFINITE_QUERY;
    const kvc_rows_view keys = view_of(&layer->heads[kv_head].keys);
    const kvc_rows_view values = view_of(&layer->heads[kv_head].values);
    return attend_with_scratch(q, &keys, &values, layer->head_dim, out, probs);
}
