/*
 * reference.h -- what a layer must hold, kept by the fuzz harness beside the
 * library's layer and updated by the rules of include/kvcache.h only: every
 * appended row as given, the slots' positions, importance and alive heads,
 * the next position, the q8 field a freeze computes (RMS in double over the
 * head's rows at positions < KVC_Q8_WINDOW), a linear layer's state in f64
 * with the step formula, the verify and the eviction policy.
 *
 * Each ref_* mutator applies a call that the library returned KVC_OK for;
 * a refused call leaves the reference alone, and the checks then find the
 * layer unchanged.
 */
#ifndef KVC_FUZZ_REFERENCE_H
#define KVC_FUZZ_REFERENCE_H

#include <stddef.h>
#include <stdint.h>

#include "kvcache.h"

typedef struct ref_full {
    size_t H, d;
    kvc_mode mode;
    size_t len, cap;     /* slots held, and room */
    uint32_t *position;  /* [cap] */
    float *imp;          /* [cap] */
    uint8_t *alive;      /* [cap x H]: 1 if the head stored the slot */
    float *k, *v;        /* [cap x H x d]: the rows as appended (dead heads: 0) */
    size_t next_position;
    float *field[2];     /* [H x d] of keys and values: what the last freeze computed */
    size_t verify_base;
    size_t max_rows, sinks, recent;
} ref_full;

typedef struct ref_linear {
    size_t H, F, dv;
    double phase_mass;
    size_t steps, tentative;
    double *state;       /* [H x F x dv] */
    double *scratch;     /* [tentative x H x F x dv], grown as needed */
    size_t scratch_cap;
} ref_linear;

typedef struct ref_layer {
    kvc_kind kind;
    int verifying;
    ref_full full;
    ref_linear linear;
} ref_layer;

void ref_init_full(ref_layer *ref, size_t H, size_t d, kvc_mode mode);
void ref_init_linear(ref_layer *ref, size_t H, size_t F, size_t dv, double phase_mass);
void ref_free(ref_layer *ref);
/* dst (uninitialised) becomes an independent copy of src. */
void ref_copy(ref_layer *dst, const ref_layer *src);

/* ---- full layers ---- */
int ref_quantized(kvc_mode mode, int is_values);
int ref_frozen(const ref_full *full);
/* Positions a layer has taken in: next position, or steps (tentative too). */
size_t ref_positions_taken(const ref_layer *ref);
size_t ref_head_len(const ref_full *full, size_t h);
/* The row of slot s of head h (keys, or values when is_values). */
const float *ref_row(const ref_full *full, size_t s, size_t h, int is_values);
size_t ref_memory_bytes(const ref_layer *ref);
/* How far below ref_memory_bytes a layer may hold: the f32 copies of its q4
 * residual windows, which a truncation past them or an eviction leaves
 * fewer (the reference does not follow the copies).  0 without q4. */
size_t ref_memory_slack(const ref_layer *ref);
/* 1 if the component is q4 in mode. */
int ref_q4(kvc_mode mode, int is_values);
size_t ref_draft_len(const ref_layer *ref);

/* k, v: [n x H x d]; alive: [n x H] or NULL.  Evicts first under max_rows. */
void ref_append(ref_full *full, int verifying, size_t n, const float *k, const float *v,
                const uint8_t *alive);
void ref_truncate(ref_full *full, size_t n);
void ref_clear(ref_layer *ref);
void ref_accumulate(ref_full *full, const float *probs);
void ref_accumulate_head(ref_full *full, size_t h, const float *probs);
/* keep[s] for the slots kvc_layer_evict keeps (sinks + recent <= budget). */
void ref_plan(const ref_full *full, size_t budget, size_t sinks, size_t recent, uint8_t *keep);
void ref_evict(ref_full *full, size_t budget, size_t sinks, size_t recent);
void ref_begin_verify(ref_layer *ref);
void ref_accept(ref_layer *ref, size_t j);

/* ---- linear layers ---- */
size_t ref_state_len(const ref_linear *linear);
/* One step; key_in / query_in are features, or phases when `phase`.  out: [H x dv]. */
void ref_step(ref_linear *linear, int verifying, const float *decay, const float *key_in,
              const float *query_in, const float *v, int phase, float *out);

#endif /* KVC_FUZZ_REFERENCE_H */
