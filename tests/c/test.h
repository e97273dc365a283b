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
#define RUN_TESTS(...)                                                           \
    int main(int argc, char **argv) {                                            \
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
/* kvc_layer_memory_bytes as the formula of kvcache.h gives it for the first
 * len positions of data in `mode`, derived from the masks alone. */
size_t test_expected_memory(const test_data *data, size_t len, kvc_mode mode);
/* 1 if keys (is_values = 0) or values (1) are int8 in mode. */
int test_mode_quantizes(kvc_mode mode, int is_values);
/* Every mode (f32, q8, q8k, q8v), and the three that quantize. */
extern const kvc_mode test_modes[4];
extern const kvc_mode test_quantized_modes[3];
/* NaN, +Inf, -Inf. */
extern const float test_nonfinite[3];
/* kvc_layer_head_keys (is_values = 0) or kvc_layer_head_values (1). */
kvc_status test_head_rows(const kvc_layer *layer, size_t h, int is_values, float *dst,
                          size_t dst_len);

/* ---- what can be observed of a layer, to compare two layers or a layer
 * before and after a call ---- */
typedef struct test_state {
    size_t num_kv_heads, head_dim, seq_len, memory_bytes;
    int mode, field_frozen;
    int read_errors;     /* calls that did not return KVC_OK: never equal then */
    float *imp;          /* [seq_len] */
    size_t *head_len;    /* [H] */
    float **keys;        /* [H][head_len x d], as head_keys gives them */
    float **values;      /* [H][head_len x d] */
    uint32_t **positions;
    float **out;         /* [H][d]: attend output for a fixed query per head */
    float **probs;       /* [H][head_len] */
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

/* Allocation that the test stops on if it fails (the tests' own memory). */
void *test_alloc(size_t bytes);

#endif /* KVC_TEST_H */
