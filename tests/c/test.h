/*
 * test.h -- a very small test harness for the C tests.
 *
 * A test file defines cases with TEST(name) and ends with
 * RUN_TESTS(CASE(a), CASE(b), ...).  Run with no argument it runs every case;
 * with a case name, that case only (ctest registers one entry per case).
 */
#ifndef KVC_TEST_H
#define KVC_TEST_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kvcache.h"

typedef struct test_case {
    const char *name;
    void (*run)(void);
} test_case;

#define TEST(name) static void name(void)
#define CASE(name) {#name, name}
/* The program's entry.  clang 15 and later name main(argc, argv)
 * __main_argc_argv, which emcc 3.1.6 never calls (the relaxed-SIMD build runs
 * it on clang 19: its tests would pass without running): in wasm the entry
 * is exported as "main" by name. */
#if defined(__EMSCRIPTEN__)
#define KVC_TEST_ENTRY __attribute__((export_name("main"), used)) int kvc_test_entry
#else
#define KVC_TEST_ENTRY int main
#endif
#define RUN_TESTS(...)                                                           \
    KVC_TEST_ENTRY(int argc, char **argv) {                                      \
        static const test_case cases[] = {__VA_ARGS__};                          \
        return test_main(argc, argv, cases, sizeof cases / sizeof cases[0]);     \
    }

int test_main(int argc, char **argv, const test_case *cases, size_t count);
void test_fail(const char *file, int line, const char *what);
/* Prints why a part of a case could not run; the case still passes. */
void test_skip(const char *why);

/* Each CHECK returns from the case on failure. */
#define CHECK(cond)                                                              \
    do {                                                                         \
        if (!(cond)) {                                                           \
            test_fail(__FILE__, __LINE__, #cond);                                \
            return;                                                              \
        }                                                                        \
    } while (0)

#define CHECK_STATUS(expr, expected)                                             \
    do {                                                                         \
        kvc_status got_ = (expr);                                                \
        if (got_ != (expected)) {                                                \
            char what_[256];                                                     \
            snprintf(what_, sizeof what_, "%s returned %d (%s), expected %s",    \
                     #expr, (int)got_, kvc_status_name(got_), #expected);        \
            test_fail(__FILE__, __LINE__, what_);                                \
            return;                                                              \
        }                                                                        \
    } while (0)

#define CHECK_OK(expr) CHECK_STATUS(expr, KVC_OK)

/* ---- deterministic random data ---- */
typedef struct test_rng {
    uint64_t state;
} test_rng;

test_rng test_rng_new(uint64_t seed);
uint32_t test_rng_u32(test_rng *rng);
/* uniform in [0, 1) */
float test_rng_unit(test_rng *rng);
/* standard normal */
float test_rng_normal(test_rng *rng);

/* Fills [rows x H x d] keys with key-like statistics: normal entries, a few
 * outlier channels per head (x10..x40) and a RoPE-like rotation of channel
 * pairs by position. */
void test_fill_keys(test_rng *rng, float *k, size_t rows, size_t first_position, size_t H,
                    size_t d);
/* Fills n values with normal entries. */
void test_fill_normal(test_rng *rng, float *x, size_t n);

/* ---- comparisons ---- */
/* max_j |a[j] - b[j]| / max(max_j |b[j]|, tiny) */
double test_rel_error(const float *a, const float *b, size_t n);
int test_bits_equal(const float *a, const float *b, size_t n);

/* ---- scripted data: what a test appends, kept so that it can derive what
 * the layer must hold ---- */
typedef struct test_data {
    size_t n, H, d;
    float *k, *v;   /* [n x H x d]: keys from test_fill_keys, normal values */
    uint8_t *alive; /* [n x H] */
} test_data;

/* Masks of test_data_make(.., masked = 1): head 0 always alive; head 1 alive
 * at about 70% of positions; head 2 dead at every position < KVC_Q8_WINDOW
 * and at about 30% of the later ones; head 3 never alive; further heads at
 * about 50%.  masked = 0: every head alive everywhere. */
test_data test_data_make(uint64_t seed, size_t n, size_t H, size_t d, int masked);
void test_data_free(test_data *data);
/* kvc_layer_append_n of positions [first, first + count) of data. */
kvc_status test_data_append(kvc_layer *layer, const test_data *data, size_t first, size_t count);
/* 1 when KVC_TEST_FORKS is set: test_data_append then keeps a fork of every
 * layer it appended to (test.c), so that the layer's pages are shared. */
int test_forks_kept(void);
/* Rows head h stored among positions [first, last). */
size_t test_data_rows(const test_data *data, size_t h, size_t first, size_t last);
/* What head h must hold after positions 0..len-1 were appended: its key (or
 * value) rows [rows x d] and positions, either pointer may be NULL.
 * @return : the number of rows. */
size_t test_data_head(const test_data *data, size_t len, size_t h, int is_values, float *rows,
                      uint32_t *positions);
/* A new layer in `mode` holding positions 0..len-1 of data; NULL (after
 * printing why) if a call failed. */
kvc_layer *test_layer_with(const test_data *data, size_t len, kvc_mode mode);
/* A check of a layer, for test_grown_in_every_mode: 1 when it holds. */
typedef int (*test_layer_check)(const kvc_layer *layer, void *ctx);
/* For each mode, grows a layer through data's positions to each of
 * lengths[0..count) in turn (ascending) and calls check(layer, ctx) there.
 * @return : 1 if every check held; 0 at the first that did not, or (after
 *           printing why) when a layer call failed. */
int test_grown_in_every_mode(const test_data *data, const size_t *lengths, size_t count,
                             test_layer_check check, void *ctx);
/* kvc_layer_memory_bytes as the formula of kvcache.h gives it for the first
 * len positions of data in `mode`, derived from the masks alone. */
size_t test_expected_memory(const test_data *data, size_t len, kvc_mode mode);
/* The same for a layer holding `count` of data's positions (`positions`,
 * increasing; NULL: 0..count-1), its field frozen or not. */
size_t test_expected_memory_of(const test_data *data, const uint32_t *positions, size_t count,
                               int frozen, kvc_mode mode);
/* And with the rows of each q4 component's residual window given
 * (windows[2 h + is_values]; NULL: min(rows from W on, KVC_Q4_RESIDUAL_ROWS),
 * what appends leave) -- fewer after an eviction. */
size_t test_expected_memory_with(const test_data *data, const uint32_t *positions, size_t count,
                                 int frozen, kvc_mode mode, const size_t *windows);
/* The rows of each q4 component's residual window (windows[2 H]): its rows
 * from W on that read back exactly as data's (those read through 4-bit codes
 * never do here). */
void test_window_rows(const kvc_layer *layer, const test_data *data, size_t *windows);
/* 1 if keys (is_values = 0) or values (1) are quantized (q8 or q4) in mode. */
int test_mode_quantizes(kvc_mode mode, int is_values);
/* 1 if keys or values are q4 in mode: rows read back through the residual window. */
int test_mode_has_q4(kvc_mode mode);
/* Every mode (f32, q8, q8k, q8v, q4, q4k, q4v, q8k+q4v, q4k+q8v), and the
 * eight that quantize. */
#define TEST_MODE_COUNT 9
#define TEST_QUANTIZED_MODE_COUNT 8
extern const kvc_mode test_modes[TEST_MODE_COUNT];
extern const kvc_mode test_quantized_modes[TEST_QUANTIZED_MODE_COUNT];
/* NaN, +Inf, -Inf. */
extern const float test_nonfinite[3];
/* What a layer that holds nothing (shared, none) shows: no memory and no
 * shared pages, no rows, no KV heads, no steps, and a description that
 * holds `described`. */
void test_check_holds_nothing(const kvc_layer *layer, const char *described);
/* kvc_layer_head_keys (is_values = 0) or kvc_layer_head_values (1). */
kvc_status test_head_rows(const kvc_layer *layer, size_t h, int is_values, float *dst,
                          size_t dst_len);

/* ---- scripted linear steps: what a test feeds a linear layer, kept so
 * that it can derive what the layer must hold ---- */
typedef struct test_steps {
    size_t n, H, F, dv;
    size_t in_len;      /* per head: F features, or F / 2 phases (phase = 1) */
    int phase;          /* 1: key and query are phases for linear_step_phase */
    float *decay;       /* [n x H x F] in [0.5, 1), or NULL: no decay */
    float *key, *query; /* [n x H x in_len]: normal features, or phases in about [-9, 9] */
    float *v;           /* [n x H x dv], normal */
} test_steps;

test_steps test_steps_make(uint64_t seed, size_t n, size_t H, size_t F, size_t dv, int phase,
                           int with_decay);
void test_steps_free(test_steps *steps);
/* Takes steps [first, first + count) of `steps` (linear_step, or
 * linear_step_phase when steps->phase), one call each, writing the outputs
 * to out [count x H x dv] (may be NULL); stops at the first error. */
kvc_status test_steps_take(kvc_layer *layer, const test_steps *steps, size_t first,
                           size_t count, float *out);
/* A new linear layer (phase_mass given) that took the first `count` steps;
 * NULL (after printing why) if a call failed. */
kvc_layer *test_linear_with(const test_steps *steps, size_t count, double phase_mass);

/* ---- a hybrid model's data: a q8 layer of data[0] (5 heads x 8) and an
 * f32 layer of data[1] (3 heads x 6), both masked, then a vmf_phase linear
 * layer (2 heads, 4 features, value_dim 3, phase_mass 0.25) of steps ---- */
typedef struct test_hybrid {
    test_data data[2];
    test_steps steps;
} test_hybrid;

/* The data of len positions. */
test_hybrid test_hybrid_make(uint64_t seed, size_t len);
void test_hybrid_free(test_hybrid *h);
/* The model of the three layers at `len` positions; NULL if a call failed. */
kvc_model *test_hybrid_model(const test_hybrid *h, size_t len);
/* Appends positions [at, at + n) to every layer of a test_hybrid_model. */
kvc_status test_hybrid_append(kvc_model *model, const test_hybrid *h, size_t at, size_t n);

/* ---- what can be observed of a layer, to compare two layers or a layer
 * before and after a call ---- */
typedef struct test_state {
    int kind, verifying;
    size_t draft_len;
    size_t owner;        /* kvc_layer_owner: a shared layer's, SIZE_MAX for the rest */
    size_t num_kv_heads, head_dim, seq_len, memory_bytes;
    size_t next_position;
    int mode, field_frozen;
    int read_errors;     /* calls that did not return KVC_OK: never equal then */
    float *imp;          /* [seq_len] */
    uint32_t *slots;     /* [seq_len]: the absolute position of each slot */
    size_t *head_len;    /* [H] */
    float **keys;        /* [H][head_len x d], as head_keys gives them */
    float **values;      /* [H][head_len x d] */
    uint32_t **positions;
    float **out;         /* [H][d]: attend output for a fixed query per head */
    float **probs;       /* [H][head_len] */
    /* linear layers: geometry, steps, the state and the tentative states */
    size_t num_heads, num_features, value_dim, steps;
    double phase_mass;
    size_t state_len;    /* num_heads x num_features x value_dim */
    double *state;       /* [state_len] */
    double *scratch;     /* [draft_len x state_len] */
    /* recurrent layers (alone or beside rows): steps (above) and the committed f32 state */
    size_t recurrent_len;
    float *recurrent;    /* [recurrent_len] */
} test_state;

/* Reads everything through the public API (no allocation of the library:
 * attend gets a probs buffer).  Free with test_state_free. */
test_state *test_state_take(const kvc_layer *layer);
/* 1 if a and b are bit-for-bit equal; else prints the first difference. */
int test_state_equal(const test_state *a, const test_state *b);
/* test_state_equal(test_state_take(layer), before). */
int test_state_matches(const kvc_layer *layer, const test_state *before);
/* 1 if the two layers are observably identical, bit for bit. */
int test_layers_equal(const kvc_layer *a, const kvc_layer *b);
void test_state_free(test_state *state);

/* 1 if the two models have as many layers, the same seq_len, memory_bytes
 * and verifying, and their layers are pairwise test_layers_equal. */
int test_models_equal(const kvc_model *a, const kvc_model *b);
/* 1 if the layer's snapshot restores a layer test_layers_equal to it, whose
 * own snapshot is byte-identical. */
int test_layer_round_trips(const kvc_layer *layer);
/* The model's snapshot in a new buffer of *len bytes (free it), or NULL. */
uint8_t *test_model_snapshot(const kvc_model *model, size_t *len);
/* test_state_take of every layer of a model: a NULL-terminated array. */
test_state **test_model_state_take(const kvc_model *model);
/* 1 if every layer of the model still matches its state in `before`. */
int test_model_state_matches(const kvc_model *model, test_state *const *before);
void test_model_state_free(test_state **states);

/* Reports a refused call: 1 if it returned `expected` and left what it was
 * called on unchanged, else prints why and counts a failure. */
int test_refused(const char *file, int line, const char *what, kvc_status got,
                 kvc_status expected, int unchanged);

/* CHECK_STATUS(expr, expected), and that expr left `layer` (or every layer
 * of `model`) observably as it was. */
#define CHECK_REFUSED(layer, expr, expected)                                     \
    do {                                                                         \
        test_state *before_ = test_state_take(layer);                            \
        const kvc_status got_ = (expr);                                          \
        const int same_ = test_state_matches(layer, before_);                    \
        test_state_free(before_);                                                \
        if (!test_refused(__FILE__, __LINE__, #expr, got_, expected, same_))     \
            return;                                                              \
    } while (0)

#define CHECK_MODEL_REFUSED(model, expr, expected)                               \
    do {                                                                         \
        test_state **before_ = test_model_state_take(model);                     \
        const kvc_status got_ = (expr);                                          \
        const int same_ = test_model_state_matches(model, before_);              \
        test_model_state_free(before_);                                          \
        if (!test_refused(__FILE__, __LINE__, #expr, got_, expected, same_))     \
            return;                                                              \
    } while (0)

/* CRC-32 as zlib's crc32 (reflected, polynomial 0xEDB88320), bit by bit: a
 * snapshot's checksum, for tests that change its bytes. */
uint32_t test_crc32(const uint8_t *p, size_t n);

/* The f16 bits of x, a normal half's value or 0 (truncated: for writing
 * test weights, not for rounding). */
uint16_t test_f16_bits(float x);

/* Allocation that the test stops on if it fails (the tests' own memory). */
void *test_alloc(size_t bytes);

/* ---- running out of memory, SQLite style: an allocator hook that counts
 * the blocks it hands out and fails the N-th allocation (transient: that one
 * only; persistent: that one and every later one) ---- */

/* Routes the library through the hook, failing nothing yet.  The hook uses
 * malloc/realloc/free underneath, so blocks it hands out can also be freed
 * after kvc_set_allocator(NULL). */
kvc_status test_fault_install(void);
/* Restores the C library's allocator.
 * @return : the hook's blocks still live (0: nothing leaked). */
long test_fault_remove(void);
/* Fails allocation fail_at (0: none) counted from now. */
void test_fault_arm(long fail_at, int persistent);
/* Blocks the hook handed out and that are not yet freed. */
long test_fault_live(void);
/* The hook itself (to build variants of it). */
const kvc_allocator *test_fault_allocator(void);

typedef kvc_status (*test_fallible)(void *ctx);

/* For a test_fallible that creates or clones: a failed call must also leave
 * *out NULL, so one that did not is turned into a status such calls never
 * return (KVC_E_LENGTH). */
kvc_status test_out_rule(kvc_status status, const void *out);

/* How a failed run may leave the allocations. */
enum {
    TEST_KEEPS_NONE,  /* create, clone, attend: everything the call took is freed */
    TEST_KEEPS_OWNED  /* append: a buffer grown before the failing allocation may stay
                         with the layer (capacity, not data; freed with the layer) */
};

/* Runs op with allocation N failing, N = 1, 2, ..., until it succeeds with
 * no allocation failed.  Every failed run must return KVC_E_NOMEM and leave
 * `watched` (may be NULL) as it was; with TEST_KEEPS_NONE, hold no more
 * live blocks than before.  Needs test_fault_install.
 * @return : the number of failed runs, or -1 when a run broke a rule. */
long test_run_with_faults(test_fallible op, void *ctx, const kvc_layer *watched,
                          int persistent, int keeps);
/* test_run_with_faults watching every layer of a model. */
long test_run_with_faults_on_model(test_fallible op, void *ctx, const kvc_model *watched,
                                   int persistent, int keeps);

#endif /* KVC_TEST_H */
