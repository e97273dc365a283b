/*
 * attend.c -- every attention call as tasks on the pool.
 *
 * A call splits each head's rows into segments of KVC_SEGMENT_ROWS
 * (segment.c) and runs them as independent tasks: the segments of every
 * head at once for attend_heads, of one head for attend / attend_group /
 * kvc_attention_head, and for attend_causal the segments each query sees.
 * Then, in further rounds of tasks, each query's segments are merged in
 * order, and the probabilities normalised where the caller wants them.
 * The split never depends on the thread count, so neither does any bit of
 * the result; and since every entry point runs the same split, a layer's
 * f32 attend is an attention_head call by construction, a group gives each
 * query its single-query result, and a causal query is a single attend at
 * its length.
 *
 * Each call allocates, on the calling thread and before anything runs, one
 * block: the queries' codes, the partial results, and a scratch per thread.
 */
#include <string.h>

#include "internal.h"

/* A plan of one block: sizes first (base NULL), then pointers. */
typedef struct carve {
    uint8_t *base;
    size_t used;
} carve;

static void *take(carve *c, size_t count, size_t elem_bytes) {
    void *at = c->base ? c->base + c->used : NULL;
    c->used += (count * elem_bytes + 15) & ~(size_t)15;
    return at;
}

/* Threads that get a scratch: no more than there are tasks. */
static size_t threads_for(size_t tasks) {
    const size_t threads = kvc_pool_threads();
    return tasks < threads ? (tasks ? tasks : 1) : threads;
}

static size_t segments_of(size_t rows) {
    return (rows + KVC_SEGMENT_ROWS - 1) / KVC_SEGMENT_ROWS;
}

/* ---- heads: G queries on each of H heads ---- */

typedef struct head_job {
    size_t H, G, d;
    const kvc_layer *layer;             /* the heads of a layer, or NULL: */
    const kvc_rows_view *one_keys, *one_values; /* the one head */
    kvc_rows_view *keys, *values;       /* [H] */
    const float *q;                     /* [H x G x d] */
    kvc_queries *queries;               /* [H] */
    size_t *first_task;                 /* [H + 1]: head h's segments */
    float **z;                          /* [H]: where head h's scores go; NULL: a scratch */
    size_t *z_stride;                   /* [H] */
    float *max, *sum, *weights;         /* head h, query g, segment s: first_task[h] G + g S_h + s */
    float *outs;                        /* the same, times d */
    float *out;                         /* [H x G x d] */
    float *probs;                       /* [H x G x L] with positions, or NULL */
    size_t L;
    kvc_scratch *scratch;               /* [threads] */
} head_job;

static size_t head_of(const head_job *job, size_t task) {
    size_t lo = 0, hi = job->H; /* the h with first_task[h] <= task < first_task[h + 1] */
    while (hi - lo > 1) {
        const size_t mid = lo + (hi - lo) / 2;
        if (job->first_task[mid] <= task) lo = mid;
        else hi = mid;
    }
    return lo;
}

static size_t head_rows(const head_job *job, size_t h) {
    if (job->layer) return kvc_store_len(&job->layer->heads[h].keys);
    return kvc_view_len(job->one_keys);
}

static void head_segment_task(void *context, size_t task, size_t thread) {
    const head_job *job = context;
    const size_t h = head_of(job, task), G = job->G, d = job->d;
    const size_t S = job->first_task[h + 1] - job->first_task[h], c = task - job->first_task[h];
    const size_t first = c * KVC_SEGMENT_ROWS, rows = head_rows(job, h);
    const size_t count = rows - first < KVC_SEGMENT_ROWS ? rows - first : KVC_SEGMENT_ROWS;
    kvc_scratch *scratch = &job->scratch[thread];
    float *z = job->z[h] ? job->z[h] + first : scratch->z;
    const size_t z_stride = job->z[h] ? job->z_stride[h] : KVC_SEGMENT_ROWS;
    const size_t at = job->first_task[h] * G + c;
    const kvc_partials partials = {job->max + at, job->sum + at, job->outs + at * d, S};
    kvc_attend_segment(&job->queries[h], 0, G, &job->keys[h], &job->values[h], d, first, count, z,
                       z_stride, &partials, scratch);
}

static void head_merge_task(void *context, size_t h, size_t thread) {
    (void)thread;
    const head_job *job = context;
    const size_t G = job->G, d = job->d, S = job->first_task[h + 1] - job->first_task[h];
    for (size_t g = 0; g < G; g++) {
        const size_t at = job->first_task[h] * G + g * S;
        kvc_merge_segments(S, d, job->max + at, job->sum + at, job->outs + at * d,
                           job->weights + at, job->out + (h * G + g) * d);
    }
}

static void head_normalise_task(void *context, size_t task, size_t thread) {
    (void)thread;
    const head_job *job = context;
    const size_t h = head_of(job, task), G = job->G;
    const size_t S = job->first_task[h + 1] - job->first_task[h], c = task - job->first_task[h];
    if (!job->z[h] || S == 1) return; /* one segment: its weight is 1 */
    const size_t first = c * KVC_SEGMENT_ROWS, rows = head_rows(job, h);
    const size_t count = rows - first < KVC_SEGMENT_ROWS ? rows - first : KVC_SEGMENT_ROWS;
    for (size_t g = 0; g < G; g++) {
        kvc_kernels_active()->scale_f32(count, job->weights[job->first_task[h] * G + g * S + c],
                                        job->z[h] + g * job->z_stride[h] + first);
    }
}

/* attend_heads' probabilities of a head that did not store every position:
 * from its rows to their positions, zeros between. */
static void head_scatter_task(void *context, size_t h, size_t thread) {
    (void)thread;
    const head_job *job = context;
    const size_t G = job->G, L = job->L, n = head_rows(job, h);
    if (!job->probs || n == L) return;
    for (size_t g = 0; g < G; g++) {
        float *row = job->probs + (h * G + g) * L;
        const float *compact = job->z[h] ? job->z[h] + g * n : NULL;
        size_t r = 0;
        for (size_t p = 0; p < L; p++)
            row[p] = kvc_head_stored(job->layer, p, h) ? compact[r++] : 0.0f;
    }
}

/* Sizes (base NULL) or lays out a job's block: a head job's or a window job's. */
typedef void plan_fn(void *job, carve *c, size_t threads, int flag);

/* A job's block, sized by `plan`, allocated, and the job laid out in it; NULL when out of memory. */
static uint8_t *lay_out(plan_fn *plan, void *job, size_t threads, int flag) {
    carve sizing = {NULL, 0};
    plan(job, &sizing, threads, flag);
    uint8_t *block = kvc_realloc_array(NULL, sizing.used, 1);
    if (!block) return NULL;
    carve layout = {block, 0};
    plan(job, &layout, threads, flag);
    return block;
}

/* Plans (or, with a base, lays out) the block of a head job. */
static void plan_heads(void *context, carve *c, size_t threads, int compact_probs) {
    head_job *job = context;
    const size_t H = job->H, G = job->G, d = job->d;
    job->keys = take(c, H, sizeof(kvc_rows_view));
    job->values = take(c, H, sizeof(kvc_rows_view));
    if (c->base) {
        for (size_t h = 0; h < H; h++) {
            const kvc_layer *layer = job->layer;
            job->keys[h] = layer ? kvc_store_view(&layer->heads[h].keys, layer->residual_rows) : *job->one_keys;
            job->values[h] = layer ? kvc_store_view(&layer->heads[h].values, layer->residual_rows) : *job->one_values;
        }
    }
    job->queries = take(c, H, sizeof(kvc_queries));
    job->first_task = take(c, H + 1, sizeof(size_t));
    job->z = take(c, H, sizeof(float *));
    job->z_stride = take(c, H, sizeof(size_t));
    job->scratch = take(c, threads, sizeof(kvc_scratch));
    size_t tasks = 0;
    for (size_t h = 0; h < H; h++) {
        const size_t rows = head_rows(job, h);
        if (job->first_task) job->first_task[h] = tasks;
        tasks += segments_of(rows);
        void *codes = take(c, 1, kvc_queries_bytes(G, d));
        if (c->base) kvc_queries_prepare(&job->queries[h], job->q + h * G * d, G, &job->keys[h], d, codes);
        float *compact = compact_probs && rows < job->L ? take(c, G * rows, sizeof(float)) : NULL;
        if (c->base) {
            job->z[h] = compact;
            job->z_stride[h] = rows;
            if (job->probs && rows == job->L) {
                job->z[h] = job->probs + h * G * job->L;
                job->z_stride[h] = job->L;
            }
        }
    }
    if (job->first_task) job->first_task[H] = tasks;
    job->max = take(c, tasks * G, sizeof(float));
    job->sum = take(c, tasks * G, sizeof(float));
    job->weights = take(c, tasks * G, sizeof(float));
    job->outs = take(c, tasks * G * d, sizeof(float));
    for (size_t t = 0; t < threads; t++) {
        void *block = take(c, 1, kvc_scratch_bytes(G, d));
        if (c->base) kvc_scratch_init(&job->scratch[t], block, G, d);
    }
}

/* Runs a head job whose H, G, d, layer (or one_keys and one_values), q,
 * out, probs and L are set: probs (or NULL) is [H x G x L], a head's
 * probabilities at its positions when it has fewer than L rows. */
static kvc_status run_heads(head_job *job) {
    const size_t H = job->H, G = job->G, d = job->d;
    int compact = 0;
    size_t rows = 0, tasks = 0;
    for (size_t h = 0; h < H; h++) {
        compact |= job->probs && head_rows(job, h) < job->L;
        rows += head_rows(job, h);
        tasks += segments_of(head_rows(job, h));
    }
    if (rows == 0) { /* nothing stored: zeros, and nothing to allocate */
        memset(job->out, 0, H * G * d * sizeof(float));
        if (job->probs) memset(job->probs, 0, H * G * job->L * sizeof(float));
        return KVC_OK;
    }
    const size_t threads = threads_for(tasks);
    uint8_t *block = lay_out(plan_heads, job, threads, compact);
    if (!block) return KVC_E_NOMEM;

    kvc_pool_run(head_segment_task, job, tasks, threads, (uint64_t)rows * G * d * 2);
    kvc_pool_run(head_merge_task, job, H, threads, (uint64_t)tasks * G * d);
    if (job->probs) {
        kvc_pool_run(head_normalise_task, job, tasks, threads, (uint64_t)rows * G);
        if (compact) kvc_pool_run(head_scatter_task, job, H, threads, (uint64_t)H * G * job->L);
    }
    kvc_free(block);
    return KVC_OK;
}

/* One head's G queries, probs [G x n] (or NULL). */
static kvc_status attend_one_head(const kvc_rows_view *keys, const kvc_rows_view *values,
                                  size_t G, size_t d, const float *q, float *out, float *probs) {
    const size_t n = kvc_view_len(keys);
    head_job job = {.H = 1, .G = G, .d = d, .one_keys = keys, .one_values = values, .q = q,
                    .out = out, .probs = probs, .L = n};
    return run_heads(&job);
}

kvc_status kvc_attention_head(const float *q, const float *keys, const float *values, size_t n,
                              size_t d, float *out, float *probs) {
    if (!q || !out || (n && (!keys || !values))) return KVC_E_NULL_POINTER;
    if (d == 0 || d > KVC_MAX_HEAD_DIM) return KVC_E_HEAD_DIM;
    if (!kvc_kernels_active()->all_finite(d, q)) return KVC_E_NONFINITE_QUERY;
    /* The caller's arrays, each as one page. */
    uint8_t *key_page, *value_page;
    kvc_paged key_rows, value_rows, no_rows;
    kvc_paged_borrow(&key_rows, &key_page, keys, n, d * sizeof(float));
    kvc_paged_borrow(&value_rows, &value_page, values, n, d * sizeof(float));
    kvc_paged_init(&no_rows, 1, KVC_PAGE_SHIFT);
    const kvc_rows_view key_view = {.rows = &key_rows, .qrows = &no_rows, .recent = &no_rows};
    const kvc_rows_view value_view = {.rows = &value_rows, .qrows = &no_rows, .recent = &no_rows};
    return attend_one_head(&key_view, &value_view, 1, d, q, out, probs);
}

/* ---- windows: each group of queries over its own rows [from, to) ---- */

/* G queries of one KV head that see the head's rows [from, to) (a window
 * layer's: those of the positions in the queries' window).  Their segments
 * start at `from`, whatever the call: a query gets the same bits from
 * attend_heads as from attend_causal, and at any thread count. */
typedef struct window_group {
    kvc_rows_view keys, values;
    kvc_queries queries;
    const float *q;  /* [G x d] */
    float *out;      /* [G x d] */
    size_t from, to, S;
    float *z;        /* [G x (to - from)] with probabilities wanted, else NULL */
    float *max, *sum, *weights, *outs; /* query g, segment s: g S + s (outs: times d) */
} window_group;

typedef struct window_job {
    size_t G, d, count;
    window_group *groups; /* [count] */
    kvc_scratch *scratch; /* [threads] */
} window_job;

static void window_task(void *context, size_t i, size_t thread) {
    const window_job *job = context;
    window_group *g = &job->groups[i];
    const size_t G = job->G, d = job->d, n = g->to - g->from;
    kvc_scratch *scratch = &job->scratch[thread];
    if (n == 0) { /* a head that stored none of the window's positions */
        memset(g->out, 0, G * d * sizeof(float));
        return;
    }
    for (size_t s = 0; s < g->S; s++) {
        const size_t first = g->from + s * KVC_SEGMENT_ROWS;
        const size_t count = g->to - first < KVC_SEGMENT_ROWS ? g->to - first : KVC_SEGMENT_ROWS;
        const kvc_partials partials = {g->max + s, g->sum + s, g->outs + s * d, g->S};
        float *z = g->z ? g->z + s * KVC_SEGMENT_ROWS : scratch->z;
        kvc_attend_segment(&g->queries, 0, G, &g->keys, &g->values, d, first, count, z,
                           g->z ? n : KVC_SEGMENT_ROWS, &partials, scratch);
    }
    for (size_t q = 0; q < G; q++) {
        const size_t at = q * g->S;
        kvc_merge_segments(g->S, d, g->max + at, g->sum + at, g->outs + at * d, g->weights + at,
                           g->out + q * d);
        for (size_t s = 0; g->z && g->S > 1 && s < g->S; s++) {
            const size_t first = s * KVC_SEGMENT_ROWS;
            const size_t count = n - first < KVC_SEGMENT_ROWS ? n - first : KVC_SEGMENT_ROWS;
            kvc_kernels_active()->scale_f32(count, g->weights[at + s], g->z + q * n + first);
        }
    }
}

/* Plans (or, with a base, lays out) a window job's block; the groups' q,
 * out, views, from and to are set by then. */
static void plan_window(void *context, carve *c, size_t threads, int probs) {
    window_job *job = context;
    const size_t G = job->G, d = job->d;
    job->scratch = take(c, threads, sizeof(kvc_scratch));
    for (size_t i = 0; i < job->count; i++) {
        window_group *g = &job->groups[i];
        g->S = segments_of(g->to - g->from);
        void *codes = take(c, 1, kvc_queries_bytes(G, d));
        if (c->base) kvc_queries_prepare(&g->queries, g->q, G, &g->keys, d, codes);
        g->z = take(c, probs ? G * (g->to - g->from) : 0, sizeof(float));
        g->max = take(c, G * g->S, sizeof(float));
        g->sum = take(c, G * g->S, sizeof(float));
        g->weights = take(c, G * g->S, sizeof(float));
        g->outs = take(c, G * g->S * d, sizeof(float));
        if (!probs) g->z = NULL;
    }
    for (size_t t = 0; t < threads; t++) {
        void *block = take(c, 1, kvc_scratch_bytes(G, d));
        if (c->base) kvc_scratch_init(&job->scratch[t], block, G, d);
    }
}

/* Runs the job's groups (one task each); with `probs`, each group's z then
 * holds its queries' probabilities over its rows. */
static kvc_status run_window(window_job *job, int probs, void **block_out) {
    size_t rows = 0;
    for (size_t i = 0; i < job->count; i++) rows += job->groups[i].to - job->groups[i].from;
    const size_t threads = threads_for(job->count);
    uint8_t *block = lay_out(plan_window, job, threads, probs);
    if (!block) return KVC_E_NOMEM;
    kvc_pool_run(window_task, job, job->count, threads, (uint64_t)rows * job->G * job->d * 2);
    *block_out = block;
    return KVC_OK;
}

/* The first slot of the positions the query at `position` sees. */
static size_t window_slot(const kvc_layer *layer, size_t position) {
    return kvc_first_slot_from(layer, 0, layer->seq_len, kvc_window_start(layer, position));
}

/* attend_group / attend_heads on a window layer: the G queries of each of
 * the heads [first_head, first_head + heads) at the newest position; probs
 * as those calls give them (per_slot: over the layer's slots, else over
 * the head's rows). */
static kvc_status attend_window_heads(const kvc_layer *layer, size_t first_head, size_t heads,
                                      size_t G, const float *q, float *out, float *probs, int per_slot) {
    const size_t d = layer->head_dim, L = layer->seq_len;
    if (L == 0) {
        memset(out, 0, heads * G * d * sizeof(float));
        return KVC_OK;
    }
    window_group *groups = kvc_realloc_array(NULL, heads, sizeof(window_group));
    if (!groups) return KVC_E_NOMEM;
    const size_t first_slot = window_slot(layer, kvc_slot_position(layer, L - 1)); /* every head's */
    for (size_t i = 0; i < heads; i++) {
        const kvc_head *head = &layer->heads[first_head + i];
        groups[i] = (window_group){
            .keys = kvc_store_view(&head->keys, layer->residual_rows),
            .values = kvc_store_view(&head->values, layer->residual_rows),
            .q = q + i * G * d, .out = out + i * G * d,
            .from = kvc_head_rows_between(layer, first_head + i, 0, first_slot), .to = kvc_store_len(&head->keys),
        };
    }
    window_job job = {.G = G, .d = d, .count = heads, .groups = groups};
    void *block = NULL;
    kvc_status status = run_window(&job, probs != NULL, &block);
    for (size_t i = 0; status == KVC_OK && probs && i < heads; i++) {
        const window_group *g = &groups[i];
        const size_t h = first_head + i, n = g->to - g->from, width = per_slot ? L : g->to;
        for (size_t k = 0; k < G; k++) {
            float *row = probs + (i * G + k) * width;
            memset(row, 0, width * sizeof(float));
            const float *z = g->z + k * n;
            if (!per_slot) {
                memcpy(row + g->from, z, n * sizeof(float));
                continue;
            }
            for (size_t slot = 0, r = 0; slot < L; slot++) {
                if (!kvc_head_stored(layer, slot, h)) continue;
                if (r >= g->from) row[slot] = z[r - g->from];
                r++;
            }
        }
    }
    kvc_free(block);
    kvc_free(groups);
    return status;
}

/* m queries, one a group, each over its group's rows [from, to) of a head
 * of n rows, into the groups' outputs, and (probs) each query's row of n
 * weights, zeros outside its rows.  Frees the groups. */
static kvc_status run_queries(window_group *groups, size_t m, size_t d, size_t n, float *probs) {
    window_job job = {.G = 1, .d = d, .count = m, .groups = groups};
    void *block = NULL;
    const kvc_status status = run_window(&job, probs != NULL, &block);
    for (size_t i = 0; status == KVC_OK && probs && i < m; i++) {
        const window_group *g = &groups[i];
        memset(probs + i * n, 0, n * sizeof(float));
        memcpy(probs + i * n + g->from, g->z, (g->to - g->from) * sizeof(float));
    }
    kvc_free(block);
    kvc_free(groups);
    return status;
}

/* attend_causal on a window layer: query i at slot L - m + i over the rows
 * of the positions in its window that it sees (whole: and every later one). */
static kvc_status attend_window_causal(const kvc_layer *layer, const float *q, size_t m, size_t kv_head,
                                       float *out, float *probs, int whole) {
    const size_t d = layer->head_dim, L = layer->seq_len;
    const kvc_head *head = &layer->heads[kv_head];
    const size_t n = kvc_store_len(&head->keys);
    window_group *groups = kvc_realloc_array(NULL, m, sizeof(window_group));
    if (!groups) return KVC_E_NOMEM;
    size_t hidden = whole ? 0 : kvc_head_rows_between(layer, kv_head, L - m + 1, L);
    for (size_t i = 0; i < m; i++) {
        if (i > 0 && !whole) hidden -= (size_t)kvc_head_stored(layer, L - m + i, kv_head);
        const size_t seen = n - hidden;
        groups[i] = (window_group){
            .keys = kvc_store_view_prefix(&head->keys, layer->residual_rows, seen),
            .values = kvc_store_view_prefix(&head->values, layer->residual_rows, seen),
            .q = q + i * d, .out = out + i * d,
            .from = kvc_head_rows_between(layer, kv_head, 0, window_slot(layer, kvc_slot_position(layer, L - m + i))), .to = seen,
        };
        if (groups[i].from > seen) groups[i].from = seen;
    }
    return run_queries(groups, m, d, n, probs);
}

/* The checks every attend of a layer makes. */
static kvc_status check_attend(const kvc_layer *layer, const float *q, size_t q_len,
                               const float *out) {
    if (!layer || !q || !out) return KVC_E_NULL_POINTER;
    if (!kvc_has_rows(layer)) return KVC_E_KIND;
    if (!kvc_kernels_active()->all_finite(q_len, q)) return KVC_E_NONFINITE_QUERY;
    return KVC_OK;
}

kvc_status kvc_layer_attend_group(const kvc_layer *layer, const float *q, size_t G,
                                  size_t kv_head, float *out, float *probs) {
    if (!layer || !q || !out) return KVC_E_NULL_POINTER;
    if (!kvc_has_rows(layer)) return KVC_E_KIND;
    if (kv_head >= layer->num_kv_heads) return KVC_E_KV_HEAD;
    if (G == 0 || G > KVC_MAX_KV_HEADS) return KVC_E_LENGTH;
    kvc_status status = check_attend(layer, q, G * layer->head_dim, out);
    if (status != KVC_OK) return status;
    if (layer->window) return attend_window_heads(layer, kv_head, 1, G, q, out, probs, 0);
    const kvc_head *head = &layer->heads[kv_head];
    const kvc_rows_view keys = kvc_store_view(&head->keys, layer->residual_rows);
    const kvc_rows_view values = kvc_store_view(&head->values, layer->residual_rows);
    return attend_one_head(&keys, &values, G, layer->head_dim, q, out, probs);
}

kvc_status kvc_layer_attend(const kvc_layer *layer, const float *q, size_t kv_head, float *out,
                            float *probs) {
    return kvc_layer_attend_group(layer, q, 1, kv_head, out, probs);
}

kvc_status kvc_layer_attend_heads(const kvc_layer *layer, const float *q, size_t num_query_heads,
                                  float *out, float *probs) {
    if (!layer || !q || !out) return KVC_E_NULL_POINTER;
    if (!kvc_has_rows(layer)) return KVC_E_KIND;
    const size_t H = layer->num_kv_heads, d = layer->head_dim;
    if (num_query_heads == 0 || num_query_heads % H != 0 || num_query_heads / H > KVC_MAX_KV_HEADS)
        return KVC_E_NUM_HEADS;
    kvc_status status = check_attend(layer, q, num_query_heads * d, out);
    if (status != KVC_OK) return status;
    if (layer->window) return attend_window_heads(layer, 0, H, num_query_heads / H, q, out, probs, 1);
    head_job job = {.H = H, .G = num_query_heads / H, .d = d, .layer = layer, .q = q,
                    .out = out, .probs = probs, .L = layer->seq_len};
    return run_heads(&job);
}

/* ---- causal: m queries on one head, query i seeing its first seen[i] rows ---- */

typedef struct causal_job {
    size_t m, d, S, n;                  /* queries, channels, segments, the head's rows */
    size_t chunks;                      /* the queries' chunks: a task is a segment's chunk */
    size_t *chunk_first;                /* [chunks + 1]: chunk k's queries [chunk_first[k], chunk_first[k + 1]) */
    const kvc_rows_view *keys, *values;
    /* With a component that keeps copies, query i reads the rows as the
     * layer held them when it was the newest (its own residual window):
     * views [m] each, and no query shares a segment's pass with another. */
    int per_query;
    kvc_rows_view *query_keys, *query_values;

    kvc_queries queries;
    size_t *seen;                       /* [m], nondecreasing */
    float *probs;                       /* [m x n] or NULL */
    float *max, *sum, *weights;         /* query i, segment s: i S + s */
    float *outs;                        /* the same, times d */
    float *out;                         /* [m x d] */
    kvc_scratch *scratch;               /* [threads] */
} causal_job;

/* Segment c's rows [first, end), and its scores' place for queries from i. */
static float *causal_z(const causal_job *job, size_t i, size_t first, kvc_scratch *scratch,
                       size_t *stride) {
    *stride = job->probs ? job->n : KVC_SEGMENT_ROWS;
    return job->probs ? job->probs + i * job->n + first : scratch->z;
}

/* Task t: segment t / chunks for the queries of chunk t mod chunks. */
static void causal_segment_task(void *context, size_t t, size_t thread) {
    const causal_job *job = context;
    const size_t d = job->d, S = job->S, c = t / job->chunks;
    const size_t lo = job->chunk_first[t % job->chunks], m = job->chunk_first[t % job->chunks + 1];
    const size_t first = c * KVC_SEGMENT_ROWS;
    const size_t end = job->n - first < KVC_SEGMENT_ROWS ? job->n : first + KVC_SEGMENT_ROWS;
    kvc_scratch *scratch = &job->scratch[thread];
    size_t stride;
    if (job->per_query) {
        for (size_t i = m; i-- > lo && job->seen[i] > first;) {
            float *z = causal_z(job, i, first, scratch, &stride);
            const kvc_partials partials = {job->max + i * S + c, job->sum + i * S + c,
                                           job->outs + (i * S + c) * d, S};
            const size_t to = job->seen[i] < end ? job->seen[i] : end;
            kvc_attend_segment(&job->queries, i, 1, &job->query_keys[i], &job->query_values[i], d,
                               first, to - first, z, stride, &partials, scratch);
        }
        return;
    }
    /* The queries that see the whole segment are the last ones: one group. */
    size_t whole = m;
    while (whole > lo && job->seen[whole - 1] >= end) whole--;
    if (whole < m) {
        float *z = causal_z(job, whole, first, scratch, &stride);
        const kvc_partials partials = {job->max + whole * S + c, job->sum + whole * S + c,
                                       job->outs + (whole * S + c) * d, S};
        kvc_attend_segment(&job->queries, whole, m - whole, job->keys, job->values, d, first,
                           end - first, z, stride, &partials, scratch);
    }
    /* Those that see part of it, one by one. */
    for (size_t i = whole; i-- > lo && job->seen[i] > first;) {
        float *z = causal_z(job, i, first, scratch, &stride);
        const kvc_partials partials = {job->max + i * S + c, job->sum + i * S + c,
                                       job->outs + (i * S + c) * d, S};
        kvc_attend_segment(&job->queries, i, 1, job->keys, job->values, d, first,
                           job->seen[i] - first, z, stride, &partials, scratch);
    }
}

static void causal_merge_task(void *context, size_t i, size_t thread) {
    (void)thread;
    const causal_job *job = context;
    const size_t at = i * job->S;
    kvc_merge_segments(segments_of(job->seen[i]), job->d, job->max + at, job->sum + at,
                       job->outs + at * job->d, job->weights + at, job->out + i * job->d);
}

static void causal_normalise_task(void *context, size_t c, size_t thread) {
    (void)thread;
    const causal_job *job = context;
    const size_t first = c * KVC_SEGMENT_ROWS;
    const size_t end = job->n - first < KVC_SEGMENT_ROWS ? job->n : first + KVC_SEGMENT_ROWS;
    for (size_t i = 0; i < job->m; i++) {
        float *row = job->probs + i * job->n;
        const size_t seen = job->seen[i];
        if (seen > first && segments_of(seen) > 1) {
            const size_t to = seen < end ? seen : end;
            kvc_kernels_active()->scale_f32(to - first, job->weights[i * job->S + c], row + first);
        }
        if (seen < end) {
            const size_t from = seen > first ? seen : first;
            memset(row + from, 0, (end - from) * sizeof(float));
        }
    }
}

static void plan_causal(causal_job *job, carve *c, size_t threads, const float *q) {
    const size_t m = job->m, d = job->d, S = job->S;
    job->seen = take(c, m, sizeof(size_t));
    job->chunk_first = take(c, job->chunks + 1, sizeof(size_t));
    if (job->per_query) {
        job->query_keys = take(c, m, sizeof(kvc_rows_view));
        job->query_values = take(c, m, sizeof(kvc_rows_view));
    }
    void *codes = take(c, 1, kvc_queries_bytes(m, d));
    if (c->base) kvc_queries_prepare(&job->queries, q, m, job->keys, d, codes);
    job->max = take(c, m * S, sizeof(float));
    job->sum = take(c, m * S, sizeof(float));
    job->weights = take(c, m * S, sizeof(float));
    job->outs = take(c, m * S * d, sizeof(float));
    job->scratch = take(c, threads, sizeof(kvc_scratch));
    for (size_t t = 0; t < threads; t++) {
        void *block = take(c, 1, kvc_scratch_bytes(m, d));
        if (c->base) kvc_scratch_init(&job->scratch[t], block, m, d);
    }
}

/* attend_causal, or (whole) attend_span: the m newest slots' queries, each
 * over the slots before its own and (whole) every one of the m. */
static kvc_status attend_queries(const kvc_layer *layer, const float *q, size_t m, size_t kv_head, float *out,
                                 float *probs, int whole) {
    if (!layer || !q || !out) return KVC_E_NULL_POINTER;
    if (!kvc_has_rows(layer)) return KVC_E_KIND;
    if (m == 0 || m > layer->seq_len || m > SIZE_MAX / sizeof(float) / layer->head_dim)
        return KVC_E_LENGTH;
    if (kv_head >= layer->num_kv_heads) return KVC_E_KV_HEAD;
    kvc_status status = check_attend(layer, q, m * layer->head_dim, out);
    if (status != KVC_OK) return status;
    if (layer->window) return attend_window_causal(layer, q, m, kv_head, out, probs, whole);
    const size_t d = layer->head_dim, seq_len = layer->seq_len;
    const kvc_head *head = &layer->heads[kv_head];
    const kvc_rows_view keys = kvc_store_view(&head->keys, layer->residual_rows);
    const kvc_rows_view values = kvc_store_view(&head->values, layer->residual_rows);
    causal_job job = {.m = m, .d = d, .n = kvc_store_len(&head->keys), .keys = &keys,
                      .values = &values, .probs = probs, .out = out};
    job.per_query = kvc_mode_keeps_copies(layer->mode);
    job.S = segments_of(job.n);
    if (job.n == 0) { /* nothing stored: zeros, and nothing to allocate */
        memset(out, 0, m * d * sizeof(float));
        return KVC_OK;
    }
    /* A prompt over fewer segments than threads (a 512-token prompt is one
     * segment) shares its queries out too, in chunks of equal rows seen. */
    const size_t pool_threads = kvc_pool_threads();
    job.chunks = job.S < pool_threads ? (m < pool_threads ? m : pool_threads) : 1;
    const size_t threads = threads_for(job.S * job.chunks);
    carve sizing = {NULL, 0};
    plan_causal(&job, &sizing, threads, q);
    uint8_t *block = kvc_realloc_array(NULL, sizing.used, 1);
    if (!block) return KVC_E_NOMEM;
    carve layout = {block, 0};
    plan_causal(&job, &layout, threads, q);
    /* Query i sees positions < seq_len - m + i + 1: the rows at later
     * positions are hidden from it, fewer for each next query. */
    size_t hidden = whole ? 0 : kvc_head_rows_between(layer, kv_head, seq_len - m + 1, seq_len);
    uint64_t rows_seen = 0;
    for (size_t i = 0; i < m; i++) {
        if (i > 0 && !whole) hidden -= (size_t)kvc_head_stored(layer, seq_len - m + i, kv_head);
        job.seen[i] = job.n - hidden;
        rows_seen += job.seen[i];
        if (job.per_query) {
            job.query_keys[i] = kvc_store_view_prefix(&head->keys, layer->residual_rows, job.seen[i]);
            job.query_values[i] = kvc_store_view_prefix(&head->values, layer->residual_rows, job.seen[i]);
        }
    }
    /* Chunk k ends at the first query by which k + 1 shares of the rows
     * seen are (which query computes a value changes none of its bits). */
    job.chunk_first[0] = 0;
    uint64_t seen_so_far = 0;
    for (size_t i = 0, k = 1; k < job.chunks; k++) {
        while (i < m - (job.chunks - k) && seen_so_far * job.chunks < rows_seen * k) seen_so_far += job.seen[i++];
        job.chunk_first[k] = i;
    }
    job.chunk_first[job.chunks] = m;
    kvc_pool_run(causal_segment_task, &job, job.S * job.chunks, threads, (uint64_t)job.n * m * d * 2);
    kvc_pool_run(causal_merge_task, &job, m, threads, (uint64_t)m * job.S * d);
    if (probs) kvc_pool_run(causal_normalise_task, &job, job.S, threads, (uint64_t)job.n * m);
    kvc_free(block);
    return KVC_OK;
}

kvc_status kvc_layer_attend_causal(const kvc_layer *layer, const float *q, size_t m, size_t kv_head, float *out,
                                   float *probs) {
    return attend_queries(layer, q, m, kv_head, out, probs, 0);
}

kvc_status kvc_layer_attend_span(const kvc_layer *layer, const float *q, size_t m, size_t kv_head, float *out,
                                 float *probs) {
    return attend_queries(layer, q, m, kv_head, out, probs, 1);
}

kvc_status kvc_layer_attend_ranges(const kvc_layer *layer, const float *q, size_t m, size_t kv_head,
                                   const uint32_t *first, const uint32_t *end, float *out, float *probs) {
    if (!layer || !q || !out || !first || !end) return KVC_E_NULL_POINTER;
    if (!kvc_has_rows(layer)) return KVC_E_KIND;
    if (m == 0 || m > layer->seq_len || m > SIZE_MAX / sizeof(float) / layer->head_dim) return KVC_E_LENGTH;
    for (size_t i = 0; i < m; i++) {
        if (first[i] > end[i] || end[i] > m) return KVC_E_LENGTH;
    }
    if (kv_head >= layer->num_kv_heads) return KVC_E_KV_HEAD;
    kvc_status status = check_attend(layer, q, m * layer->head_dim, out);
    if (status != KVC_OK) return status;
    const size_t d = layer->head_dim, oldest = layer->seq_len - m;
    const kvc_head *head = &layer->heads[kv_head];
    const size_t n = kvc_store_len(&head->keys);
    window_group *groups = kvc_realloc_array(NULL, m, sizeof(window_group));
    if (!groups) return KVC_E_NOMEM;
    for (size_t i = 0; i < m; i++) {
        /* The rows as the layer held them when the range's last slot came
         * (a quantized layer's residual rows are those of that moment). */
        const size_t to = kvc_head_rows_between(layer, kv_head, 0, oldest + end[i]);
        const size_t from = kvc_head_rows_between(layer, kv_head, 0, oldest + first[i]);
        groups[i] = (window_group){
            .keys = kvc_store_view_prefix(&head->keys, layer->residual_rows, to),
            .values = kvc_store_view_prefix(&head->values, layer->residual_rows, to),
            .q = q + i * d, .out = out + i * d, .from = from, .to = to,
        };
    }
    return run_queries(groups, m, d, n, probs);
}
