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

/* Allocation that the test stops on if it fails (the tests' own memory). */
void *test_alloc(size_t bytes);

#endif /* KVC_TEST_H */
