/*
 * internal.h -- the layout of a layer, shared by the files of src/core.
 *
 * A layer holds, per position, a slot: an importance value, its absolute
 * position and one bit per head saying whether that head stored it (the
 * alive map); per head, two stores, one for keys and one for values.  A
 * store holds its rows in position order: first the f32 rows, then
 * (quantized component, field frozen) the int8 rows of positions >=
 * KVC_Q8_WINDOW.  Every one of these sequences lives in pages of
 * KVC_PAGE_ELEMS (pages.c), which forks of the layer share.
 */
#ifndef KVC_INTERNAL_H
#define KVC_INTERNAL_H

#include <math.h>
#include <stdatomic.h>

#include "kvcache.h"
#include "../kernels/kernels.h"

/* ---- pages.c: reference-counted pages, shared between forks ---- */

/* Elements per page of a layer's sequences: the q8 window, so that a
 * quantized store's f32 rows (its sinks, which freeze the field) are one
 * page.  (The benchmark builds a library of larger pages to measure what
 * pages cost against contiguous rows.) */
#ifndef KVC_PAGE_SHIFT
#define KVC_PAGE_SHIFT 6
#endif
#define KVC_PAGE_ELEMS ((size_t)1 << KVC_PAGE_SHIFT)

/* A sequence of `len` elements of elem_bytes, element i at byte
 * (i mod 2^shift) * elem_bytes of pages[i >> shift]. */
typedef struct kvc_paged {
    uint8_t **pages;   /* [page_cap]: those holding elements, then spare ones of ours */
    size_t page_count; /* pages held */
    size_t page_cap;
    size_t len;
    size_t elem_bytes;
    unsigned shift;
} kvc_paged;

static inline uint8_t *kvc_paged_at(const kvc_paged *a, size_t i) {
    return a->pages[i >> a->shift] + (i & (((size_t)1 << a->shift) - 1)) * a->elem_bytes;
}

/* The elements from i on that lie in i's page, at most `count`. */
static inline size_t kvc_paged_run(const kvc_paged *a, size_t i, size_t count) {
    const size_t left = ((size_t)1 << a->shift) - (i & (((size_t)1 << a->shift) - 1));
    return count < left ? count : left;
}

/* An empty sequence. */
void kvc_paged_init(kvc_paged *a, size_t elem_bytes, unsigned shift);
/* A read-only view of a caller's array as one page (`page` holds its pointer). */
void kvc_paged_borrow(kvc_paged *a, uint8_t **page, const void *elements, size_t len,
                      size_t elem_bytes);
/* Makes elements [len, len + extra) writable: the pages they need, and a
 * copy of the page of element len when it holds some of ours and is shared.
 * KVC_E_NOMEM: no element changed. */
kvc_status kvc_paged_reserve(kvc_paged *a, size_t extra);
/* Makes elements [first, last) writable, copying the shared pages they lie in.
 * KVC_E_NOMEM: no element changed (pages copied so far stay copied). */
kvc_status kvc_paged_make_writable(kvc_paged *a, size_t first, size_t last);
/* Sets len: up to reserved and written elements, or down (the shared pages
 * it no longer reaches are released; our own stay as spares). */
void kvc_paged_set_len(kvc_paged *a, size_t len);
/* dst (uninitialised) shares src's elements: a reference to each page. */
kvc_status kvc_paged_fork(kvc_paged *dst, const kvc_paged *src);
void kvc_paged_free(kvc_paged *a);
/* Bytes of our elements from element `first` on in pages another sequence
 * holds too. */
size_t kvc_paged_shared_bytes(const kvc_paged *a, size_t first);
/* Element `read` to `write` (<= read, writable): a compaction in order. */
void kvc_paged_move(kvc_paged *a, size_t write, size_t read);
/* Lets go of the first `pages` pages, which hold elements: element i becomes
 * element i - (pages << shift). */
void kvc_paged_drop_front(kvc_paged *a, size_t pages);
/* Bytes of pages held and of the page table. */
size_t kvc_paged_capacity_bytes(const kvc_paged *a);
/* Bytes of our elements from element `first` on, a shared page counted only
 * by the first sequence of walk `walk` to reach it (at the most elements any
 * of them holds in it); walks do not run concurrently (kvc_registry_lock). */
size_t kvc_paged_count_bytes(const kvc_paged *a, size_t first, uint32_t walk);
void kvc_paged_read(const kvc_paged *a, size_t first, size_t count, void *dst);
/* Pages allocated and not yet freed, over every sequence. */
size_t kvc_live_pages(void);

/* ---- component.c: the component formats, a traits row each ---- */
/* What the core knows of a component format.  A quantized format stores a
 * store's rows from KVC_Q8_WINDOW on as rows of row_bytes(d): a 4-byte f32
 * scale, then codes against the per-channel field. */
typedef struct kvc_component_traits {
    const char *name;              /* kvc_component_name's */
    int quantized;                 /* 0: every row f32 (and no kernels below) */
    int keeps_copies;              /* f32 copies of its newest rows: the residual
                                      window, and exact rollback into it */
    size_t (*row_bytes)(size_t d); /* a row of d channels in this format */
    /* Codes x (finite, d channels) against the field into `codes` (the row's
     * bytes after its scale) with `set`'s kernel; returns the row's scale. */
    float (*quantize)(const kvc_kernels *set, size_t d, const float *x, const float *field,
                      uint8_t *codes);
    /* Scores of coded queries against rows of this format, in `set`. */
    kvc_scores_q8_fn *(*scores)(const kvc_kernels *set);
    /* What turns rows of this format into the int8 rows the value sums
     * read, once per tile for every query; NULL: they are such rows. */
    kvc_unpack_q4_fn *(*unpack)(const kvc_kernels *set);
    /* The value sums over (unpacked) rows. */
    kvc_weighted_sum_q8_fn *(*values)(const kvc_kernels *set);
    /* 1 if a row's bytes after its scale are codes `quantize` can make (a
     * snapshot's rows are checked with it). */
    int (*codes_valid)(size_t d, const uint8_t *codes);
} kvc_component_traits;

/* The unpack kernel of a format in `set`; NULL when its rows are int8 rows as they are. */
static inline kvc_unpack_q4_fn *kvc_traits_unpack(const kvc_component_traits *traits, const kvc_kernels *set) {
    return traits->unpack ? traits->unpack(set) : NULL;
}

/* The row of a kvc_component; NULL for a value not in the enum. */
const kvc_component_traits *kvc_component_traits_of(kvc_component type);
/* The row of a mode's keys (is_values 0) or values (1). */
const kvc_component_traits *kvc_mode_traits(kvc_mode mode, int is_values);
/* Components the mode quantizes (each has a field): 0, 1 or 2. */
size_t kvc_quantized_components(kvc_mode mode);
/* 1 if a component keeps f32 copies (has a residual window). */
int kvc_mode_keeps_copies(kvc_mode mode);

/* One component (keys or values) of one head. */
typedef struct kvc_store {
    const kvc_component_traits *traits;
    kvc_paged rows;   /* f32 rows of d floats: every row of an f32 component, the
                         rows at positions < W of a quantized one */
    kvc_paged qrows;  /* quantized rows from W on, of traits->row_bytes(d) */
    kvc_paged recent; /* keeps_copies: f32 copies of qrows [recent_base, qrows.len),
                         for the residual window and exact truncation */
    size_t recent_base;
    kvc_paged field;  /* the per-channel field, d floats: one element while frozen */
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

/* A verify's drafts' inputs, kept so that accept(j) can step the state
 * again to draft j (recurrent.c's replay): per draft, its raw inputs x [C];
 * for a kind of heads also its convolved channels y [C] and two gates a
 * head [H each] (delta's alpha and beta, Mamba-2's dt and decay), a
 * replay's scratch (the heads' outputs, delta's d) [2 x H x dv], and marks:
 * mark m, a state's length, holds the heads' states after draft
 * (m + 1) x KVC_MARK_EVERY, where a later draft stepped past it. */
#define KVC_MARK_EVERY 4
typedef struct kvc_drafts {
    size_t cap; /* drafts each array holds */
    float *x, *y, *gates[2], *scratch;
    float **marks;
    size_t mark_cap;
} kvc_drafts;

/* The state of a recurrent layer (recurrent.c): conv, delta and Mamba-2 kinds. */
typedef struct kvc_recurrent {
    size_t channels, kernel;  /* the convolution: C channels, K taps */
    size_t key_heads, value_heads, key_dim, value_dim; /* the delta rule's (0: none) */
    kvc_kind rule;            /* the kind whose step it takes (a layer of rows and a state: Mamba-2) */
    size_t steps;             /* committed steps */
    size_t tentative;         /* a verify's steps: the lane holds their state, drafts their inputs */
    size_t undo;              /* steps the lane takes back (the last call's, outside a verify) */
    float *state;             /* [(K - 1) x C] newest inputs, then [value_heads x dv x dk] */
    float *lane;              /* state's length: where a call's steps go (NULL before the first) */
    kvc_drafts drafts;
} kvc_recurrent;

struct kvc_layer {
    kvc_kind kind;
    size_t window;          /* window layers: positions a query sees (0: every one) */
    size_t window_rollback; /* and those kept besides, for truncation */
    int verifying;       /* a speculative verify is open */
    size_t verify_base;  /* seq_len when it began (full layers) */
    int in_model;        /* owned by a kvc_model: kvc_layer_free leaves it alone */
    size_t owner;        /* shared layers: the index of the model's layer they read */
    void *state;         /* a state kind's (linear, conv, delta): its kind's row says what it is */
    size_t num_kv_heads;
    size_t head_dim;
    kvc_mode mode;
    size_t residual_rows;  /* of q4 components: the newest rows read in f32 */
    size_t seq_len;        /* positions held: the slots below */
    size_t next_position;  /* the absolute position the next append gets */
    int field_frozen;
    /* Per slot (one per position held, in order), seq_len elements each: */
    kvc_paged imp;       /* float: cumulative attention mass */
    kvc_paged positions; /* uint32_t: absolute position; slot s is position s until an eviction */
    kvc_paged alive;     /* map_bytes: bit h set if head h stored the slot */
    size_t map_bytes;    /* ceil(num_kv_heads / 8) */
    kvc_head *heads;     /* [num_kv_heads] */
    /* Automatic eviction on append (max_rows 0: off). */
    size_t max_rows, evict_sinks, evict_recent;
    /* Every live layer, for kvc_memory_stats (layer.c). */
    kvc_layer *registry_prev, *registry_next;
};

static inline float *kvc_slot_imp(const kvc_layer *layer, size_t slot) {
    return (float *)(void *)kvc_paged_at(&layer->imp, slot);
}

static inline uint32_t kvc_slot_position(const kvc_layer *layer, size_t slot) {
    return *(const uint32_t *)(const void *)kvc_paged_at(&layer->positions, slot);
}

/* ---- pool.c: the threads a call's tasks run on ---- */
/* Thread indices: 0 is the calling thread, 1 .. KVC_MAX_THREADS - 1 pool threads. */
/* A job smaller than this (in multiply-adds) runs on the calling thread:
 * waking the pool would cost more than it saves.  A job's work is 64-bit:
 * a prefill's products pass 2^32 multiply-adds, which a 32-bit size_t
 * (wasm32) wraps to a small number -- and a job it calls small runs on one
 * thread. */
#define KVC_POOL_MIN_WORK ((size_t)1 << 17)
typedef void kvc_task_fn(void *context, size_t task, size_t thread);
/* Runs fn(context, t, thread) for every t < count, on the calling thread and
 * the pool threads whose index is below `threads` (the scratches the caller
 * prepared), and returns when all are done.  Any task may run on any thread;
 * small jobs, or all when the pool is busy with another call or rests (its
 * threads took little of the last jobs), run inline. */
void kvc_pool_run(kvc_task_fn *fn, void *context, size_t count, size_t threads, uint64_t work);
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
 * to the pool (but those pool.c's rest keeps inline), so that small test
 * cases exercise it too, and SIZE_MAX none, which is the single-threaded
 * library.  Returns the value it replaces. */
size_t kvc_pool_set_min_work(size_t work);

/* ---- profile.c: the time of each operation while kvc_profile_start's ---- */
/* A pass begins: the next mark charges the time from here. */
void kvc_profile_pass_begin(void);
/* An operation ends: the time since the previous mark, less the pool's
 * waits in it, is added to op's total (no profile: nothing). */
void kvc_profile_mark(kvc_profile_op op);
/* The pool's wait, charged to KVC_PROFILE_POOL_WAIT and not to the
 * operation around it: what kvc_profile_wait_end takes (0 with no profile). */
double kvc_profile_wait_begin(void);
void kvc_profile_wait_end(double began);

/* ---- threads-pthread.c / threads-wasm.c: how idle pool threads sleep ---- */
/* Sleeps while *word == expected (may return early). */
void kvc_thread_wait(_Atomic uint32_t *word, uint32_t expected);
/* Wakes every thread sleeping on word (the caller changed it first). */
void kvc_thread_wake_all(_Atomic uint32_t *word);

/* ---- segment.c: attention over one segment of a head's rows ---- */
/* A head's rows split into segments at multiples of this, whatever the
 * number of threads: the split fixes every bit of a result. */
#define KVC_SEGMENT_ROWS 1024

/* A read-only view of one component's rows, in position order: f32 rows,
 * then quantized ones, then (keeps_copies) the residual window's f32 copies. */
typedef struct kvc_rows_view {
    const kvc_paged *rows;   /* f32 rows of d floats */
    const kvc_paged *qrows;  /* quantized rows, of which the first q_count are read */
    size_t q_count;
    const kvc_component_traits *traits; /* the format of qrows */
    const kvc_paged *recent; /* f32 rows [recent_first, + recent_count) follow them */
    size_t recent_first, recent_count;
    const float *field;      /* the field of the quantized rows (NULL when none are read) */
} kvc_rows_view;

/* Rows of a view. */
static inline size_t kvc_view_len(const kvc_rows_view *view) {
    return view->rows->len + view->q_count + view->recent_count;
}

/* The view attention reads of a store, with its layer's residual window;
 * and of its first `rows` rows, as the store held them when they were all it
 * held (the residual window a truncation to them would leave). */
kvc_rows_view kvc_store_view(const kvc_store *store, size_t residual_rows);
kvc_rows_view kvc_store_view_prefix(const kvc_store *store, size_t residual_rows, size_t rows);

/* The queries of a call, with their codes for quantized keys. */
typedef struct kvc_queries {
    const float *q;     /* [count x d] */
    int16_t *codes;     /* [count x d]: q * c_K in KVC_QUERY_CODE_MAX codes (segment.c) */
    float *code_scales; /* [count]: their scales, 1/sqrt(d) folded in */
} kvc_queries;

/* A thread's scratch for segments of up to G queries. */
typedef struct kvc_scratch {
    float *z;              /* [G x KVC_SEGMENT_ROWS]: scores that have no place of their own */
    int16_t *tile_w16;     /* [2G x tile_rows]: value weights as i16 codes, hi then lo */
    float *tile_w_scales;  /* [2G]: their scales */
    float *tile_w;         /* [G x tile_rows]: value weights */
    float *tile_scales;    /* [tile_rows]: the value rows' scales */
    uint8_t *tile_q8;      /* [tile_rows x kvc_q8_row_bytes(d)]: a tile's value rows, unpacked or gathered */
    float *row_f32;        /* [d]: a quantized row read as codes * scale */
    float *ones;           /* [d]: 1.0f, the field that leaves it so */
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
/* An empty store of rows of d channels in a format. */
void kvc_store_init(kvc_store *store, size_t d, const kvc_component_traits *traits);
/* Makes room for `below` more rows at positions < W and `from` more at
 * positions >= W (quantized in a quantized store, f32 otherwise), and for
 * the f32 copies of the new q4 rows that will stay: with `releasing` (not
 * in a verify), those kvc_store_release_copies leaves before the rows go in. */
kvc_status kvc_store_reserve(kvc_store *store, size_t below, size_t from, size_t residual_rows,
                             int releasing);
void kvc_store_push_f32(kvc_store *store, const float *x);
/* A row from W on of a quantized store: its codes (and, q4, its f32 copy). */
void kvc_store_push_quantized(kvc_store *store, size_t d, const float *x,
                              const kvc_kernels *kernels);
/* Lets go of the f32 copies a q4 store will not need once `upcoming` more
 * rows come: those of rows more than residual_rows + KVC_Q4_ROLLBACK_ROWS
 * from its newest then, a page at a time (the copies of upcoming rows that
 * old are then not made).  Not during a verify, whose drafts must not push
 * rows out. */
void kvc_store_release_copies(kvc_store *store, size_t residual_rows, size_t upcoming);
/* Drops the last f32_rows f32 rows (positions < W) and q_rows quantized ones. */
void kvc_store_drop(kvc_store *store, size_t f32_rows, size_t q_rows);
/* Makes the f32 rows from f32_first and the quantized rows (and their
 * copies) from q_first writable (KVC_E_NOMEM: no row changed). */
kvc_status kvc_store_make_writable(kvc_store *store, size_t f32_first, size_t q_first);
/* Moves quantized row `read` to `write` <= read, for a compaction in order
 * (evict.c), and its copy when it lies in the residual window (from
 * window_first, as before the compaction: a kept row is read as it was, and
 * the rollback copies go); kvc_store_compacted(store, f32_rows, q_rows,
 * copies) ends it with the rows and copies kept. */
void kvc_store_move_quantized(kvc_store *store, size_t write, size_t read, size_t window_first,
                              size_t *copies_write);
void kvc_store_compacted(kvc_store *store, size_t f32_rows, size_t q_rows, size_t copies);
/* The first quantized row read through its f32 copy (the residual window). */
size_t kvc_store_window_first(const kvc_store *store, size_t residual_rows);
/* Truncating this many rows brings back into the window only rows that have
 * their f32 copy (SIZE_MAX: any number). */
size_t kvc_store_exact_rollback(const kvc_store *store, size_t residual_rows);
/* Writes the store's rows as f32 (quantized ones dequantized, the window's
 * from their copies) to dst. */
void kvc_store_copy_rows(const kvc_store *store, size_t d, size_t residual_rows, float *dst,
                         const kvc_kernels *kernels);
size_t kvc_store_len(const kvc_store *store);
/* Bytes of rows and of the residual window's copies (the field is counted
 * by the layer; the rollback copies, like free capacity, are not). */
size_t kvc_store_bytes(const kvc_store *store, size_t residual_rows);
/* Of those and of the field, what is held in pages shared with another store. */
size_t kvc_store_shared_bytes(const kvc_store *store, size_t residual_rows);
/* Rows, window copies and field, shared pages counted once per walk
 * (kvc_paged_count_bytes). */
size_t kvc_store_count_bytes(const kvc_store *store, size_t residual_rows, uint32_t walk);
size_t kvc_store_capacity_bytes(const kvc_store *store);
/* dst (uninitialised) shares src's rows and field. */
kvc_status kvc_store_fork(kvc_store *dst, const kvc_store *src);
void kvc_store_free(kvc_store *store);

/* ---- quant.c: the per-channel field ---- */
/* Makes the field of every quantized store writable. */
kvc_status kvc_field_reserve(kvc_layer *layer);
/* Freezes the field of every quantized store from its f32 rows. */
void kvc_field_freeze(kvc_layer *layer);
/* Unfreezes it (a truncation back to the window). */
void kvc_field_unfreeze(kvc_layer *layer);

/* ---- append.c ---- */
/* Lets every q4 store of the layer go of the copies it no longer needs (accept). */
void kvc_layer_release_copies(kvc_layer *layer);

/* ---- layer.c ---- */
/* A layer with everything zero but kind, in the registry of live layers;
 * NULL when out of memory. */
kvc_layer *kvc_layer_alloc(kvc_kind kind);
/* A walk over shared pages (kvc_paged_count_bytes): begin takes the lock
 * that keeps walks apart and returns the walk's number; end releases it. */
uint32_t kvc_walk_begin(void);
void kvc_walk_end(void);
/* The layer's content bytes (memory_bytes), shared pages counted once per walk. */
size_t kvc_layer_count_bytes(const kvc_layer *layer, uint32_t walk);
/* Swaps what two layers of the same geometry hold -- slots, rows, positions
 * -- leaving each its place in a model and the registry (a window layer
 * taking back a fork's rows: kvc_model_give_back). */
void kvc_layer_swap_rows(kvc_layer *a, kvc_layer *b);

/* What a kind that keeps a state instead of rows does with it, one row
 * per family of state (linear.c's f64 state with its scratch, recurrent.c's
 * f32 state with its lanes); the kinds' rows name theirs. */
typedef struct kvc_state_traits {
    void (*free)(void *state);                       /* NULL: nothing */
    kvc_status (*clone)(void **dst, const void *src); /* a deep copy of the committed state */
    void (*clear)(void *state);                      /* zero steps */
    size_t (*len)(const void *state);                /* the elements of one state */
    size_t (*memory_bytes)(const void *state);       /* the state and a verify's tentative ones */
    size_t (*capacity_bytes)(const void *state);
    void (*commit)(void *state, size_t j);           /* ends a verify keeping its first j steps */
    size_t (*steps)(const void *state);              /* taken, a verify's included */
    size_t (*tentative)(const void *state);          /* a verify's steps */
} kvc_state_traits;
extern const kvc_state_traits kvc_linear_states, kvc_recurrent_states;

/* The kinds of layer, a row each (layer.c). */
typedef struct kvc_kind_traits {
    const char *name;
    int rows;                      /* keys and values in rows (full, window) */
    const kvc_state_traits *state; /* a state (linear, conv, delta, mamba2); both: rows and a state; neither: shared, none */
    int positions;                 /* takes positions of its own (all but shared, none): a model's length counts it */
} kvc_kind_traits;
const kvc_kind_traits *kvc_kind_traits_of(kvc_kind kind);

static inline int kvc_has_rows(const kvc_layer *layer) {
    return kvc_kind_traits_of(layer->kind)->rows;
}

static inline int kvc_takes_positions(const kvc_layer *layer) {
    return kvc_kind_traits_of(layer->kind)->positions;
}

/* The layer's state if it keeps one of this family, else NULL (and for NULL). */
static inline void *kvc_state_of(const kvc_layer *layer, const kvc_state_traits *family) {
    return layer && kvc_kind_traits_of(layer->kind)->state == family ? layer->state : NULL;
}

static inline kvc_linear *kvc_linear_of(const kvc_layer *layer) {
    return (kvc_linear *)kvc_state_of(layer, &kvc_linear_states);
}

static inline kvc_recurrent *kvc_recurrent_of(const kvc_layer *layer) {
    return (kvc_recurrent *)kvc_state_of(layer, &kvc_recurrent_states);
}

/* ---- model.c: a long forward's way back ----
 * A forward of more than one chunk slides window layers past what
 * truncate_last can give back, and steps recurrent layers more than once.
 * kvc_model_hold sets *held to an array of a fork of each window and
 * recurrent layer of the model (NULL for other layers; a window fork shares
 * pages, so it costs the pages the forward writes -- about a window's rows
 * a layer; a recurrent one copies the state); KVC_E_NOMEM holds nothing.
 * kvc_model_give_back takes the last n positions back: window layers their
 * forks' rows, recurrent layers their forks' states, the others by
 * truncation.  kvc_model_release frees the forks and the array
 * (NULL: nothing). */
kvc_status kvc_model_hold(const kvc_model *model, kvc_layer ***held);
void kvc_model_give_back(kvc_model *model, kvc_layer **held, size_t n);
void kvc_model_release(const kvc_model *model, kvc_layer **held);
/* 1 if the layers that take positions (all but shared ones) have taken as
 * many: what a snapshot of the model needs. */
int kvc_model_aligned(const kvc_model *model);

/* ---- shared.c ---- */
/* 1 if layer i of a model's list is no shared layer, or one whose owner is
 * an earlier layer of rows of the list. */
int kvc_shared_owner_valid(kvc_layer *const *layers, size_t i);

/* ---- append.c ---- */
/* truncate_last without the checks: the slots at positions >= cut go, and
 * cut is the next position. */
void kvc_layer_drop_from(kvc_layer *layer, size_t cut);

/* ---- recurrent.c ---- */
/* ggml's softplus: log(1 + e^x), x itself above 20 (Mamba-2's and the
 * delta rule's time steps). */
static inline float kvc_softplus(float x) {
    return x > 20.0f ? x : logf(1.0f + expf(x));
}

/* Takes back the last call's n steps outside a verify (n = 0: nothing);
 * 0 when that is not what lane 0 holds. */
int kvc_recurrent_take_back(kvc_recurrent *r, size_t n);

/* ---- evict.c ---- */
/* Evicts down to `budget` slots if the layer holds more; the kept slots
 * follow the policy of kvc_layer_evict.  KVC_E_NOMEM (nothing changed) when
 * the selection's scratch or a page cannot be allocated. */
kvc_status kvc_evict_to(kvc_layer *layer, size_t budget, size_t sinks, size_t recent);
/* What an eviction of a layer holding L slots needs, and the eviction with
 * it (kvc_evict_with cannot fail), for callers that must allocate before
 * they change anything: a scratch of kvc_evict_scratch_bytes(L), and the
 * pages from slot `sinks` on writable (kvc_evict_prepare; KVC_E_NOMEM
 * changes no row). */
size_t kvc_evict_scratch_bytes(size_t L);
kvc_status kvc_evict_prepare(kvc_layer *layer, size_t sinks);
void kvc_evict_with(kvc_layer *layer, size_t budget, size_t sinks, size_t recent, uint8_t *block);
/* A window layer after an append whose first position is `first` (or an
 * accept whose last kept position is `first`): lets go of the positions no
 * query from `first` on sees, beyond its rollback, once a page's worth has
 * slid out (kvc_layer_create_window).  Out of memory keeps the rows: the
 * next append tries again.  Nothing for other kinds. */
void kvc_window_slide(kvc_layer *layer, size_t first);
/* How many positions a truncation of the layer may take: those after
 * which the new newest position's window is still held (SIZE_MAX while no
 * row slid out, and for other kinds). */
size_t kvc_window_truncatable(const kvc_layer *layer);
/* The first position the query at `position` of a window layer sees (0 for
 * other kinds). */
size_t kvc_window_start(const kvc_layer *layer, size_t position);

/* ---- verify.c ---- */
/* What accept(j) needs (for the max_rows eviction of the drafts it keeps):
 * a scratch of kvc_accept_scratch_bytes (0: none) and kvc_accept_prepare's
 * writable pages (KVC_E_NOMEM changes nothing).  kvc_accept_with then
 * accepts, checked, and cannot fail. */
size_t kvc_accept_scratch_bytes(const kvc_layer *layer, size_t j);
kvc_status kvc_accept_prepare(kvc_layer *layer, size_t j);
void kvc_accept_with(kvc_layer *layer, size_t j, uint8_t *scratch);

/* ---- positions.c: the slots and the alive map ---- */
/* Positions a layer has taken in: a full layer's next position (its seq_len
 * until it evicts), or a linear layer's steps; of a layer of rows and a
 * state, the fewer.  A model's layers agree on it between two steps of a
 * runner. */
size_t kvc_layer_positions_taken(const kvc_layer *layer);
/* 1 unless the layer holds rows and a state that have taken different
 * numbers of positions (a runner between its two parts of a step). */
int kvc_layer_parts_agree(const kvc_layer *layer);
/* Makes room for n more slots (KVC_E_NOMEM: nothing changed). */
kvc_status kvc_slots_reserve(kvc_layer *layer, size_t n);
/* seq_len and every slot sequence to `len` (up to reserved slots, or down). */
void kvc_slots_set_len(kvc_layer *layer, size_t len);
/* Makes the slots from `first` on writable (KVC_E_NOMEM: nothing changed). */
kvc_status kvc_slots_make_writable(kvc_layer *layer, size_t first);

int kvc_head_stored(const kvc_layer *layer, size_t position, size_t kv_head);
/* Rows head kv_head stored at slots [first, last). */
size_t kvc_head_rows_between(const kvc_layer *layer, size_t kv_head, size_t first, size_t last);
/* The first slot at or after `first` whose absolute position is >= `position`
 * (positions increase with slots), `last` if none before it. */
size_t kvc_first_slot_from(const kvc_layer *layer, size_t first, size_t last, size_t position);

#endif /* KVC_INTERNAL_H */
