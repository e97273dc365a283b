/*
 * check.h -- the invariants the fuzz harnesses check after every call.  A
 * violated one prints what the harness was doing and aborts: that is how
 * libFuzzer reports it (the library itself never aborts or prints).
 */
#ifndef KVC_FUZZ_CHECK_H
#define KVC_FUZZ_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "kvcache.h"
#include "reference.h"

/* What the harness is doing, printed with a violation (printf format). */
void fuzz_context(const char *format, ...);
/* A detail of the last call checked (its status), printed with a violation. */
void fuzz_detail(const char *text);
void fuzz_fail(const char *file, int line, const char *what);

#define FUZZ_REQUIRE(cond) ((cond) ? (void)0 : fuzz_fail(__FILE__, __LINE__, #cond))

/* The harnesses' own memory, zeroed, of exactly `bytes`: ASan then sees the
 * library read or write past a length it was given.  Running out of it
 * aborts (not the library's failure). */
void *fuzz_buffer(size_t bytes);

/* 1 if no element of x[n] is NaN or +-Inf. */
int check_finite(const float *x, size_t n);

/* A set of kvc_status values. */
typedef uint64_t status_set;
#define STATUS(s) ((status_set)1 << (s))

/* The status a call returned against the errors that apply to it (0: none,
 * the call must succeed), `nomem` whether the call may allocate and `fault`
 * whether an injected allocation failure hit it: an error from the set, or
 * KVC_E_NOMEM exactly when a fault hit an allocating call.
 * @return : 1 if the call succeeded (apply it to the reference). */
int check_status(kvc_status got, status_set errors, int nomem, int fault);

/* The layer holds what the reference says: geometry, slots, positions, imp,
 * rows per head and their contents (exact where f32, within the q8 step
 * where int8), the field frozen or not, the verify, memory_bytes by the
 * formula of kvcache.h; a linear layer's state and tentative states bit for
 * bit. */
void check_layer(const kvc_layer *layer, const ref_layer *ref);

/* memory_bytes by the formula of kvcache.h, from what the public accessors
 * say the layer holds (rows and positions per head, seq_len, the field). */
void check_memory_formula(const kvc_layer *layer);

/* One query's attention over the first n rows of head h: `out` [d], `probs`
 * [n] (or NULL).  Zeros without rows; probabilities in [0, 1] summing to 1
 * and the output finite and within the rows' range (a convex combination)
 * when no intermediate can overflow f32; in f32 mode bit for bit
 * kvc_attention_head over the rows read back, in q8 modes close to it.
 * `ref` (may be NULL: a restored snapshot) gives the q8 fields and the rows
 * as appended, which decide whether an intermediate can overflow. */
void check_attention(const kvc_layer *layer, const ref_layer *ref, size_t h, const float *q,
                     const float *out, const float *probs, size_t n);

/* The layer's snapshot: `size` bytes, written by kvc_layer_serialize.  The
 * caller frees it. */
uint8_t *check_serialize(const kvc_layer *layer, size_t *size);
uint8_t *check_serialize_model(const kvc_model *model, size_t *size);

/* Attends every head of a layer with two fixed queries, each call returning
 * KVC_OK, and checks the results (check_attention). */
void check_attend_every_head(const kvc_layer *layer, const ref_layer *ref);

#endif /* KVC_FUZZ_CHECK_H */
