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
