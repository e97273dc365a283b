/*
 * attend.c -- softmax attention of one or more queries over one head.
 *
 * Every entry point -- kvc_attention_head (plain f32 slices), attend,
 * attend_group, attend_heads, attend_causal -- runs attend_rows below, so
 * the f32 branch of a layer is an attention_head call by construction, a
 * group gives each of its queries the single-query result bit for bit, and
 * a causal query is a single attend at its length.
 *
 * attend_rows works on G queries that share a KV head, in three passes over
 * the head's rows: the scores of every query against every row (each key row
 * read once for the group), the softmax of each query's scores, and the
 * weighted sum of the value rows (each value row read once for the group).
 */
#include <math.h>
#include <string.h>

#include "internal.h"
#include "../kernels/q8-rows.h"

/* A read-only view of one component's rows, as the attention loop sees it. */
typedef struct kvc_rows_view {
    const float *rows;
    size_t rows_len;
    const uint8_t *qrows;
    size_t qrows_len;
    const float *field;
} kvc_rows_view;

/* What quantized rows need besides the scores: the queries' i16 codes (hi
 * then lo, see score_quantized_keys), and a tile of rows: value rows widened
 * to f32 with their weights, or the hi and lo scores of key rows. */
typedef struct workspace {
    float *q_field;     /* [G x d]  q * c_K, then [d] c_K scaled */
    int16_t *q16;       /* [2G x d] */
    float *q_scales;    /* [2G] */
    float *tile;        /* [tile_rows x d] */
    float *tile_scales; /* [tile_rows] */
    float *tile_w;      /* [2G x tile_rows] */
    size_t tile_rows;
    void *block;        /* the one allocation behind them */
} workspace;

/* Value rows widened per tile: about 32 KiB of f32, to stay in L1. */
static size_t value_tile_rows(size_t d) {
    const size_t rows = 8192 / d;
    return rows < 8 ? 8 : rows;
}

static size_t round_up16(size_t bytes) {
    return (bytes + 15) & ~(size_t)15;
}

/* Allocates the workspace for G queries of d channels; KVC_E_NOMEM on failure. */
static kvc_status workspace_init(workspace *w, size_t G, size_t d) {
    const size_t tile_rows = value_tile_rows(d);
    const size_t sizes[6] = {
        round_up16((G + 1) * d * sizeof(float)), round_up16(2 * G * d * sizeof(int16_t)),
        round_up16(2 * G * sizeof(float)), round_up16(tile_rows * d * sizeof(float)),
        round_up16(tile_rows * sizeof(float)), round_up16(2 * G * tile_rows * sizeof(float))};
    size_t total = 0;
    for (int i = 0; i < 6; i++) total += sizes[i];
    uint8_t *block = kvc_realloc_array(NULL, total, 1);
    if (!block) return KVC_E_NOMEM;
    w->block = block;
    w->q_field = (float *)block;
    w->q16 = (int16_t *)(block += sizes[0]);
    w->q_scales = (float *)(block += sizes[1]);
    w->tile = (float *)(block += sizes[2]);
    w->tile_scales = (float *)(block += sizes[3]);
    w->tile_w = (float *)(block + sizes[4]);
    w->tile_rows = tile_rows;
    return KVC_OK;
}

/* out[g] += c_V-less sum over the quantized value rows: (pi * s_p) * codes_p,
 * a tile of rows at a time. */
static void sum_quantized_values(const kvc_kernels *kernels, size_t G, const float *pi,
                                 size_t pi_stride, const kvc_rows_view *values, size_t d,
                                 float *out, workspace *w) {
    const size_t row_bytes = kvc_q8_row_bytes(d);
    for (size_t first = 0; first < values->qrows_len; first += w->tile_rows) {
        const size_t rows = values->qrows_len - first < w->tile_rows ? values->qrows_len - first
                                                                     : w->tile_rows;
        kernels->widen_q8(rows, d, values->qrows + first * row_bytes, w->tile, w->tile_scales);
        for (size_t g = 0; g < G; g++) {
            for (size_t t = 0; t < rows; t++)
                w->tile_w[g * w->tile_rows + t] = pi[g * pi_stride + first + t] * w->tile_scales[t];
        }
        kernels->weighted_sum_f32(G, rows, d, w->tile_w, w->tile_rows, w->tile, out);
    }
}

/* The exponent e of max |x[j]| (frexpf's: max |x| * 2^-e in [1/2, 1)); 0
 * when every x[j] is zero. */
static int exponent_of_max(const float *x, size_t n) {
    float max_abs = 0.0f;
    for (size_t j = 0; j < n; j++) {
        if (max_abs < fabsf(x[j])) max_abs = fabsf(x[j]);
    }
    int e = 0;
    frexpf(max_abs, &e);
    return e;
}

/* 2^k as a float, for k in [-126, 127]. */
static float pow2f(int k) {
    const uint32_t bits = (uint32_t)(k + 127) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* y[j] = x[j] * 2^-e, exact unless y[j] is subnormal, for the e of
 * exponent_of_max: two factors, since 2^-e alone may not be a float. */
static void scale_by_pow2(float *y, const float *x, size_t n, int e) {
    const int half = -e / 2;
    const float a = pow2f(half), b = pow2f(-e - half);
    for (size_t j = 0; j < n; j++) y[j] = (x[j] * a) * b;
}

/* z[g][p] = s_p <q~_g, r_p> / sqrt_d over the quantized key rows, q~ = q * c_K.
 * q~ goes to the integer dots as two i16 code vectors with a scale each: hi,
 * its codes, and lo, the codes of what hi leaves (q~ - hi * s_hi in f32).
 * One vector alone is off by up to s_hi / 2 = max|q~| / 65534 a channel,
 * which costs more than the 1e-3 the design allows when q~ has outlier
 * channels and attention is peaky (tests/c/test_attend.c measured 4.2e-3);
 * hi and lo together are off by about 2^-24 max|q~| (the f32 rounding of
 * hi * s_hi; the subtraction is exact, and lo's own step is 2^-17 smaller).
 * hi and lo go through one scores_q8 call as 2G queries, a tile of rows at a
 * time, and z = hi score + lo score: each (query, row) the same way whatever
 * G and the tiling. */
static void score_quantized_keys(const kvc_kernels *kernels, size_t G, const float *q,
                                 const kvc_rows_view *keys, size_t d, float sqrt_d, float *z,
                                 size_t z_stride, workspace *w) {
    /* q~ is coded at a power-of-two scale, its largest lane in [1/2, 1), and
     * the code scales are taken back by the same power: the codes are q~'s
     * own, but q~ cannot overflow (q and c_K each come scaled below 1 before
     * they are multiplied: an overflow would make NaN codes), and the codes'
     * scale floor (1e-30) is never met (a field at its own floor, a head
     * whose window rows were all zero, makes q~ about 1e-30: the floored
     * scale would round it to integers).  Only the scales taken back can
     * overflow, to scores of +-Inf or NaN, when q * c_K exceeds FLT_MAX. */
    float *field = w->q_field + G * d;
    const int e_field = exponent_of_max(keys->field, d);
    scale_by_pow2(field, keys->field, d, e_field);
    for (size_t g = 0; g < G; g++) {
        float *q_field = w->q_field + g * d;
        const int16_t *hi = w->q16 + g * d;
        const int e_q = exponent_of_max(q + g * d, d);
        scale_by_pow2(q_field, q + g * d, d, e_q);
        kernels->mul_f32(d, q_field, field, q_field);
        const int e = exponent_of_max(q_field, d);
        scale_by_pow2(q_field, q_field, d, e);
        const int e_total = e_q + e_field + e;
        const float s_hi = kernels->quantize_query(d, q_field, w->q16 + g * d);
        for (size_t j = 0; j < d; j++) q_field[j] = q_field[j] - (float)hi[j] * s_hi;
        w->q_scales[g] = ldexpf(s_hi, e_total);
        w->q_scales[G + g] = ldexpf(kernels->quantize_query(d, q_field, w->q16 + (G + g) * d), e_total);
    }
    const size_t row_bytes = kvc_q8_row_bytes(d), tile = w->tile_rows;
    for (size_t first = 0; first < keys->qrows_len; first += tile) {
        const size_t rows = keys->qrows_len - first < tile ? keys->qrows_len - first : tile;
        kernels->scores_q8(2 * G, rows, d, w->q16, w->q_scales, keys->qrows + first * row_bytes,
                           sqrt_d, w->tile_w, tile);
        for (size_t g = 0; g < G; g++) {
            const float *hi_z = w->tile_w + g * tile, *lo_z = w->tile_w + (G + g) * tile;
            for (size_t t = 0; t < rows; t++) z[g * z_stride + first + t] = hi_z[t] + lo_z[t];
        }
    }
}

/* The one attention loop: G queries [G x d] over the rows of a head.
 * z: [G x n] (row stride z_stride), left holding the probabilities; out
 * [G x d].  n = keys->rows_len + keys->qrows_len > 0; `w` is needed when a
 * component has quantized rows. */
static void attend_rows(size_t G, const float *q, const kvc_rows_view *keys,
                        const kvc_rows_view *values, size_t d, float *out, float *z,
                        size_t z_stride, workspace *w) {
    const kvc_kernels *kernels = kvc_kernels_active();
    const float sqrt_d = sqrtf((float)d);
    const size_t n = keys->rows_len + keys->qrows_len;

    kernels->scores_f32(G, keys->rows_len, d, q, keys->rows, sqrt_d, z, z_stride);
    if (keys->qrows_len)
        score_quantized_keys(kernels, G, q, keys, d, sqrt_d, z + keys->rows_len, z_stride, w);
    kernels->softmax(G, n, z, z_stride);

    memset(out, 0, G * d * sizeof(float));
    if (values->qrows_len) {
        sum_quantized_values(kernels, G, z + values->rows_len, z_stride, values, d, out, w);
        for (size_t g = 0; g < G; g++) kernels->mul_f32(d, out + g * d, values->field, out + g * d);
    }
    kernels->weighted_sum_f32(G, values->rows_len, d, z, z_stride, values->rows, out);
}

/* The allocations an attention call may need: a workspace when rows are
 * quantized, and the scores when the caller wants no probabilities. */
typedef struct call_memory {
    workspace w;
    float *scores;
} call_memory;

static kvc_status call_memory_init(call_memory *m, int quantized, size_t G, size_t d,
                                   size_t scores_len) {
    memset(m, 0, sizeof *m);
    if (quantized && workspace_init(&m->w, G, d) != KVC_OK) return KVC_E_NOMEM;
    if (scores_len) {
        m->scores = kvc_realloc_array(NULL, scores_len, sizeof(float));
        if (!m->scores) {
            kvc_free(m->w.block);
            return KVC_E_NOMEM;
        }
    }
    return KVC_OK;
}

static void call_memory_free(call_memory *m) {
    kvc_free(m->w.block);
    kvc_free(m->scores);
}

/* attend_rows for views that may be empty (zeros then). */
static void attend_views(size_t G, const float *q, const kvc_rows_view *keys,
                         const kvc_rows_view *values, size_t d, float *out, float *z,
                         size_t z_stride, workspace *w) {
    if (keys->rows_len + keys->qrows_len == 0) memset(out, 0, G * d * sizeof(float));
    else attend_rows(G, q, keys, values, d, out, z, z_stride, w);
}

kvc_status kvc_attention_head(const float *q, const float *keys, const float *values, size_t n,
                              size_t d, float *out, float *probs) {
    if (!q || !out || (n && (!keys || !values))) return KVC_E_NULL_POINTER;
    if (d == 0 || d > KVC_MAX_HEAD_DIM) return KVC_E_HEAD_DIM;
    if (!kvc_kernels_active()->all_finite(d, q)) return KVC_E_NONFINITE_QUERY;
    const kvc_rows_view key_rows = {keys, n, NULL, 0, NULL};
    const kvc_rows_view value_rows = {values, n, NULL, 0, NULL};
    call_memory m;
    if (call_memory_init(&m, 0, 1, d, probs ? 0 : n) != KVC_OK) return KVC_E_NOMEM;
    attend_views(1, q, &key_rows, &value_rows, d, out, probs ? probs : m.scores, n, &m.w);
    call_memory_free(&m);
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

static int head_quantized(const kvc_head *head) {
    return head->keys.qrows_len || head->values.qrows_len;
}

/* The checks every attend of a layer makes. */
static kvc_status check_attend(const kvc_layer *layer, const float *q, size_t q_len,
                               const float *out) {
    if (!layer || !q || !out) return KVC_E_NULL_POINTER;
    if (layer->kind != KVC_KIND_FULL) return KVC_E_KIND;
    if (!kvc_kernels_active()->all_finite(q_len, q)) return KVC_E_NONFINITE_QUERY;
    return KVC_OK;
}

kvc_status kvc_layer_attend_group(const kvc_layer *layer, const float *q, size_t G,
                                  size_t kv_head, float *out, float *probs) {
    if (!layer || !q || !out) return KVC_E_NULL_POINTER;
    if (layer->kind != KVC_KIND_FULL) return KVC_E_KIND;
    if (kv_head >= layer->num_kv_heads) return KVC_E_KV_HEAD;
    if (G == 0 || G > KVC_MAX_KV_HEADS) return KVC_E_LENGTH;
    kvc_status status = check_attend(layer, q, G * layer->head_dim, out);
    if (status != KVC_OK) return status;
    const kvc_head *head = &layer->heads[kv_head];
    const size_t n = kvc_store_len(&head->keys);
    const kvc_rows_view keys = view_of(&head->keys);
    const kvc_rows_view values = view_of(&head->values);
    call_memory m;
    if (call_memory_init(&m, head_quantized(head), G, layer->head_dim, probs ? 0 : G * n) != KVC_OK)
        return KVC_E_NOMEM;
    attend_views(G, q, &keys, &values, layer->head_dim, out, probs ? probs : m.scores, n, &m.w);
    call_memory_free(&m);
    return KVC_OK;
}

kvc_status kvc_layer_attend(const kvc_layer *layer, const float *q, size_t kv_head, float *out,
                            float *probs) {
    return kvc_layer_attend_group(layer, q, 1, kv_head, out, probs);
}

kvc_status kvc_layer_attend_heads(const kvc_layer *layer, const float *q, size_t num_query_heads,
                                  float *out, float *probs) {
    if (!layer || !q || !out) return KVC_E_NULL_POINTER;
    if (layer->kind != KVC_KIND_FULL) return KVC_E_KIND;
    const size_t H = layer->num_kv_heads, d = layer->head_dim, L = layer->seq_len;
    if (num_query_heads == 0 || num_query_heads % H != 0 || num_query_heads / H > KVC_MAX_KV_HEADS)
        return KVC_E_NUM_HEADS;
    const size_t G = num_query_heads / H;
    kvc_status status = check_attend(layer, q, num_query_heads * d, out);
    if (status != KVC_OK) return status;
    int quantized = 0;
    size_t longest = 0;
    for (size_t h = 0; h < H; h++) {
        quantized |= head_quantized(&layer->heads[h]);
        if (kvc_store_len(&layer->heads[h].keys) > longest) longest = kvc_store_len(&layer->heads[h].keys);
    }
    /* Scores go straight into probs for a head that stored every position;
     * for the others, through a buffer and then to their positions. */
    call_memory m;
    if (call_memory_init(&m, quantized, G, d, G * longest) != KVC_OK) return KVC_E_NOMEM;
    for (size_t h = 0; h < H; h++) {
        const kvc_head *head = &layer->heads[h];
        const size_t n = kvc_store_len(&head->keys);
        const kvc_rows_view keys = view_of(&head->keys);
        const kvc_rows_view values = view_of(&head->values);
        float *head_probs = probs ? probs + h * G * L : NULL;
        if (head_probs && n == L) {
            attend_views(G, q + h * G * d, &keys, &values, d, out + h * G * d, head_probs, L, &m.w);
            continue;
        }
        attend_views(G, q + h * G * d, &keys, &values, d, out + h * G * d, m.scores, n, &m.w);
        if (!head_probs) continue;
        for (size_t g = 0; g < G; g++) {
            float *row = head_probs + g * L;
            size_t r = 0;
            for (size_t p = 0; p < L; p++)
                row[p] = kvc_head_stored(layer, p, h) ? m.scores[g * n + r++] : 0.0f;
        }
    }
    call_memory_free(&m);
    return KVC_OK;
}

kvc_status kvc_layer_attend_causal(const kvc_layer *layer, const float *q, size_t m,
                                   size_t kv_head, float *out, float *probs) {
    if (!layer || !q || !out) return KVC_E_NULL_POINTER;
    if (layer->kind != KVC_KIND_FULL) return KVC_E_KIND;
    if (m == 0 || m > layer->seq_len || m > SIZE_MAX / sizeof(float) / layer->head_dim)
        return KVC_E_LENGTH;
    if (kv_head >= layer->num_kv_heads) return KVC_E_KV_HEAD;
    kvc_status status = check_attend(layer, q, m * layer->head_dim, out);
    if (status != KVC_OK) return status;
    const size_t d = layer->head_dim, seq_len = layer->seq_len;
    const kvc_head *head = &layer->heads[kv_head];
    const size_t head_len = kvc_store_len(&head->keys);
    const kvc_rows_view keys = view_of(&head->keys);
    const kvc_rows_view values = view_of(&head->values);
    call_memory mem;
    if (call_memory_init(&mem, head_quantized(head), 1, d, probs ? 0 : head_len) != KVC_OK)
        return KVC_E_NOMEM;
    /* Query i sees positions < seq_len - m + i + 1: the rows at later
     * positions are hidden from it, fewer for each next query. */
    size_t hidden = kvc_head_rows_between(layer, kv_head, seq_len - m + 1, seq_len);
    for (size_t i = 0; i < m; i++) {
        if (i > 0) hidden -= (size_t)kvc_head_stored(layer, seq_len - m + i, kv_head);
        const size_t seen = head_len - hidden;
        const kvc_rows_view seen_keys = prefix_of(keys, seen);
        const kvc_rows_view seen_values = prefix_of(values, seen);
        float *zi = probs ? probs + i * head_len : mem.scores;
        attend_views(1, q + i * d, &seen_keys, &seen_values, d, out + i * d, zi, seen, &mem.w);
        if (probs) memset(zi + seen, 0, hidden * sizeof(float));
    }
    call_memory_free(&mem);
    return KVC_OK;
}
