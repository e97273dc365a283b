/*
 * internal.h -- the layout of a layer, shared by the files of src/core.
 *
 * A layer holds, per position, an importance slot and one bit per head saying
 * whether that head stored the position (the alive map); per head, two
 * stores, one for keys and one for values.  A store holds its rows in
 * position order: first the f32 rows, then (quantized component, field
 * frozen) the int8 rows of positions >= KVC_Q8_WINDOW.
 */
#ifndef KVC_INTERNAL_H
#define KVC_INTERNAL_H

#include <stdatomic.h>

#include "kvcache.h"
#include "../kernels/kernels.h"

/* One component (keys or values) of one head. */
typedef struct kvc_store {
    float *rows;         /* f32 rows [rows_cap x d]: every row of an f32 component,
                            the rows at positions < W of a quantized one */
    size_t rows_len, rows_cap;
    uint8_t *qrows;      /* quantized rows [qrows_cap x (4 + d)]: f32 scale, then d codes */
    size_t qrows_len, qrows_cap;
    float *field;        /* [d] per-channel field; allocated at the first freeze */
} kvc_store;

typedef struct kvc_head {
    kvc_store keys;
    kvc_store values;
} kvc_head;

/* The state of a linear layer. */
typedef struct kvc_linear {
    size_t num_heads, num_features, value_dim;
    double phase_mass;
    size_t steps;          /* committed steps */
    double *state;         /* [H x F x dv] */
    double *scratch;       /* [scratch_cap x H x F x dv]: state after each tentative step */
    size_t tentative, scratch_cap;
    double *work;          /* one head's inputs in f64: decay, phi_k, phi_q [F] each, v, out [dv] */
} kvc_linear;

struct kvc_layer {
    kvc_kind kind;
    int verifying;       /* a speculative verify is open */
    size_t verify_base;  /* seq_len when it began (full layers) */
    int in_model;        /* owned by a kvc_model: kvc_layer_free leaves it alone */
    kvc_linear *linear;  /* linear layers only */
    size_t num_kv_heads;
    size_t head_dim;
    kvc_mode mode;
    size_t seq_len;        /* positions held: the slots below */
    size_t next_position;  /* the absolute position the next append gets */
    int field_frozen;
    /* Per slot (one per position held, in order): */
    float *imp;          /* [imp_cap] cumulative attention mass */
    size_t imp_cap;
    uint8_t *alive_map;  /* [map_cap x map_bytes]: bit h set if head h stored the slot */
    size_t map_cap;
    size_t map_bytes;    /* ceil(num_kv_heads / 8) */
    uint32_t *positions; /* [positions_cap] absolute position; slot s is position s until an eviction */
    size_t positions_cap;
    kvc_head *heads;     /* [num_kv_heads] */
    /* Automatic eviction on append (max_rows 0: off). */
    size_t max_rows, evict_sinks, evict_recent;
};

/* ---- pool.c: the threads a call's tasks run on ---- */
/* Thread indices: 0 is the calling thread, 1 .. KVC_MAX_THREADS - 1 pool threads. */
#define KVC_MAX_THREADS 64
/* A job smaller than this (in multiply-adds) runs on the calling thread:
 * waking the pool would cost more than it saves. */
#define KVC_POOL_MIN_WORK ((size_t)1 << 17)
typedef void kvc_task_fn(void *context, size_t task, size_t thread);
/* Runs fn(context, t, thread) for every t < count, on the calling thread and
 * the pool threads whose index is below `threads` (the scratches the caller
 * prepared), and returns when all are done.  Any task may run on any thread;
 * small jobs, or all when the pool is busy with another call, run inline. */
void kvc_pool_run(kvc_task_fn *fn, void *context, size_t count, size_t threads, size_t work);
/* 1 + the worker slots opened: the thread indices a job may see. */
size_t kvc_pool_threads(void);
/* 1 + the pool threads running now (opened, started, not failed). */
size_t kvc_pool_running_threads(void);
/* Opens `workers` slots (thread indices 1 .. workers), which threads then
 * take with kvc_pool_worker_run; KVC_E_THREADS if too many or already open. */
kvc_status kvc_pool_open(size_t workers);
/* Makes every pool thread leave kvc_pool_worker_run (after a call in
 * progress) and closes the slots. */
void kvc_pool_close(void);
/* A pool thread takes slot `index` (KVC_E_THREADS if it is not open), then
 * runs tasks until kvc_pool_close. */
kvc_status kvc_pool_worker_join(size_t index);
void kvc_pool_worker_run(size_t index);
/* A pool thread that died (a trap in a worker): the task it ran goes to the
 * calling thread, and it takes no more. */
void kvc_pool_worker_failed(size_t index);
/* Jobs use at most `threads` threads (>= 1) from now on, the calling one
 * included; returns the limit it replaces (KVC_MAX_THREADS at first). */
size_t kvc_pool_set_limit(size_t threads);
/* Test hook (WebAssembly only): pool thread `thread` traps at its next task. */
void kvc_pool_inject_fault(size_t thread);
/* Test and benchmark hook: jobs of fewer multiply-adds than `work` run
 * inline (default KVC_POOL_MIN_WORK); 0 sends every job of two or more tasks
 * to the pool, so that small test cases exercise it too, and SIZE_MAX none,
 * which is the single-threaded library.  Returns the value it replaces. */
size_t kvc_pool_set_min_work(size_t work);

/* ---- threads-pthread.c / threads-wasm.c: how idle pool threads sleep ---- */
/* Sleeps while *word == expected (may return early). */
void kvc_thread_wait(_Atomic uint32_t *word, uint32_t expected);
/* Wakes every thread sleeping on word (the caller changed it first). */
void kvc_thread_wake_all(_Atomic uint32_t *word);

/* ---- segment.c: attention over one segment of a head's rows ---- */
/* A head's rows split into segments at multiples of this, whatever the
 * number of threads: the split fixes every bit of a result. */
#define KVC_SEGMENT_ROWS 1024

/* A read-only view of one component's rows: f32 rows first, then quantized. */
typedef struct kvc_rows_view {
    const float *rows;
    size_t rows_len;
    const uint8_t *qrows;
    size_t qrows_len;
    const float *field; /* the field of the quantized rows (NULL when none) */
} kvc_rows_view;

/* The queries of a call, with their codes for quantized keys. */
typedef struct kvc_queries {
    const float *q;     /* [count x d] */
    uint8_t *codes;     /* [count x KVC_QUERY_CODE_BYTES(d)]: as the kernel set's code_query makes them */
    float *code_scales; /* [2 count] */
} kvc_queries;

/* A thread's scratch for segments of up to G queries. */
typedef struct kvc_scratch {
    float *z;              /* [G x KVC_SEGMENT_ROWS]: scores that have no place of their own */
    int16_t *tile_w16;     /* [2G x tile_rows]: value weights as i16 codes, hi then lo */
    float *tile_w_scales;  /* [2G]: their scales */
    float *tile_w;         /* [G x tile_rows]: value weights */
    float *tile_scales;    /* [tile_rows]: the value rows' scales */
    float *out;         /* [G x d] */
    float *max, *sum;   /* [G] */
    size_t tile_rows;
} kvc_scratch;

/* Where a segment leaves query g's results: max[g * stride], sum[g *
 * stride], out[g * stride * d .. + d]. */
typedef struct kvc_partials {
    float *max, *sum, *out;
    size_t stride;
} kvc_partials;

size_t kvc_scratch_bytes(size_t G, size_t d);
void kvc_scratch_init(kvc_scratch *scratch, void *block, size_t G, size_t d);
size_t kvc_queries_bytes(size_t count, size_t d);
/* Codes the queries against keys' field (nothing when it has none) in a
 * block of kvc_queries_bytes(count, d). */
void kvc_queries_prepare(kvc_queries *queries, const float *q, size_t count,
                         const kvc_rows_view *keys, size_t d, void *block);
/* Queries first_query .. + G over rows [first, first + count) (count >= 1):
 * their scores to z (row g at z + g * z_stride), turned into exponentials
 * less the segment's max, and the partial results to `partials`. */
void kvc_attend_segment(const kvc_queries *queries, size_t first_query, size_t G,
                        const kvc_rows_view *keys, const kvc_rows_view *values, size_t d,
                        size_t first, size_t count, float *z, size_t z_stride,
                        const kvc_partials *partials, kvc_scratch *scratch);
/* out [d] = one query's S segments merged, in order; weights [S] the factors
 * that turn each segment's exponentials into probabilities. */
void kvc_merge_segments(size_t S, size_t d, const float *max, const float *sum,
                        const float *outs, float *weights, float *out);

/* ---- alloc.c: every allocation of the library ---- */
void *kvc_malloc(size_t bytes);
void kvc_free(void *block);
/* realloc of count * elem_bytes, NULL on overflow or failure (block kept). */
void *kvc_realloc_array(void *block, size_t count, size_t elem_bytes);
/* The capacity to grow a buffer of `cap` elements to so that it holds `needed`
 * (half as much again, at least `needed`, at most max(limit, needed)), or 0
 * when it holds them already. */
size_t kvc_grown_capacity(size_t cap, size_t needed, size_t limit);

/* ---- store.c: one component of one head ---- */
/* Quantized rows are stored from position KVC_Q8_WINDOW on. */
int kvc_component_quantized(kvc_mode mode, int is_values);
/* Makes room for `below` more rows at positions < W and `from` more at
 * positions >= W (int8 in a quantized store, f32 otherwise). */
kvc_status kvc_store_reserve(kvc_store *store, size_t d, int quantized, size_t below,
                             size_t from);
void kvc_store_push_f32(kvc_store *store, size_t d, const float *x);
void kvc_store_push_quantized(kvc_store *store, size_t d, const float *x,
                              const kvc_kernels *kernels);
void kvc_store_drop(kvc_store *store, size_t f32_rows, size_t q_rows);
/* Writes the store's rows as f32 (quantized ones dequantized) to dst. */
void kvc_store_copy_rows(const kvc_store *store, size_t d, float *dst,
                         const kvc_kernels *kernels);
size_t kvc_store_len(const kvc_store *store);
/* Bytes of rows held (the field is counted by the layer). */
size_t kvc_store_bytes(const kvc_store *store, size_t d);
size_t kvc_store_capacity_bytes(const kvc_store *store, size_t d);
kvc_status kvc_store_clone(kvc_store *dst, const kvc_store *src, size_t d);
void kvc_store_free(kvc_store *store);

/* ---- quant.c: the per-channel field ---- */
/* Allocates the field of every quantized store that has none yet. */
kvc_status kvc_field_reserve(kvc_layer *layer);
/* Freezes the field of every quantized store from its f32 rows. */
void kvc_field_freeze(kvc_layer *layer);

/* ---- layer.c ---- */
/* A layer with everything zero but kind; NULL when out of memory. */
kvc_layer *kvc_layer_alloc(kvc_kind kind);

/* ---- append.c ---- */
/* truncate_last without the checks: the slots at positions >= cut go, and
 * cut is the next position. */
void kvc_layer_drop_from(kvc_layer *layer, size_t cut);

/* ---- linear.c ---- */
void kvc_linear_free(kvc_linear *linear);
kvc_status kvc_linear_clone(kvc_linear **dst, const kvc_linear *src);
void kvc_linear_clear(kvc_linear *linear);
size_t kvc_linear_state_len(const kvc_linear *linear);
size_t kvc_linear_memory_bytes(const kvc_linear *linear);
size_t kvc_linear_capacity_bytes(const kvc_linear *linear);
/* Makes the state the one after tentative step j (j = 0: unchanged), and
 * drops every tentative step. */
void kvc_linear_commit(kvc_linear *linear, size_t j);

/* ---- model.c ---- */
/* Positions a layer has taken in: a full layer's next position (its seq_len
 * until it evicts), or a linear layer's steps.  A model's layers agree on it
 * between two steps of a runner. */
size_t kvc_layer_positions_taken(const kvc_layer *layer);

/* ---- evict.c ---- */
/* Evicts down to `budget` slots if the layer holds more; the kept slots
 * follow the policy of kvc_layer_evict.  KVC_E_NOMEM (nothing changed) when
 * the selection's scratch cannot be allocated. */
kvc_status kvc_evict_to(kvc_layer *layer, size_t budget, size_t sinks, size_t recent);
/* The scratch an eviction of a layer holding L slots needs, and the eviction
 * with it (kvc_evict_with cannot fail): for callers that must allocate
 * before they change anything. */
size_t kvc_evict_scratch_bytes(size_t L);
void kvc_evict_with(kvc_layer *layer, size_t budget, size_t sinks, size_t recent, uint8_t *block);

/* ---- verify.c ---- */
/* The scratch accept(j) needs (0: none): for the max_rows eviction of the
 * drafts it keeps.  kvc_accept_with then accepts, checked, with a scratch
 * of at least that many bytes, and cannot fail. */
size_t kvc_accept_scratch_bytes(const kvc_layer *layer, size_t j);
void kvc_accept_with(kvc_layer *layer, size_t j, uint8_t *scratch);

/* ---- positions.c: the alive map ---- */
int kvc_head_stored(const kvc_layer *layer, size_t position, size_t kv_head);
/* Rows head kv_head stored at slots [first, last). */
size_t kvc_head_rows_between(const kvc_layer *layer, size_t kv_head, size_t first, size_t last);
/* The first slot at or after `first` whose absolute position is >= `position`
 * (positions increase with slots), `last` if none before it. */
size_t kvc_first_slot_from(const kvc_layer *layer, size_t first, size_t last, size_t position);

#endif /* KVC_INTERNAL_H */
