#include "test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int failures;

void test_fail(const char *file, int line, const char *what) {
    printf("  FAIL %s:%d: %s\n", file, line, what);
    failures++;
}

void test_skip(const char *why) {
    printf("  SKIP part: %s\n", why);
}

int test_main(int argc, char **argv, const test_case *cases, size_t count) {
    size_t ran = 0;
    for (size_t i = 0; i < count; i++) {
        if (argc > 1 && strcmp(argv[1], cases[i].name) != 0) continue;
        int before = failures;
        cases[i].run();
        printf("%s %s\n", failures == before ? "ok  " : "FAIL", cases[i].name);
        ran++;
    }
    if (ran == 0) {
        printf("no case named %s\n", argc > 1 ? argv[1] : "(any)");
        return 2;
    }
    return failures ? 1 : 0;
}

test_rng test_rng_new(uint64_t seed) {
    test_rng rng = {seed * 0x9E3779B97F4A7C15ull + 1};
    return rng;
}

uint32_t test_rng_u32(test_rng *rng) {
    /* splitmix64 */
    uint64_t z = (rng->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (uint32_t)((z ^ (z >> 31)) >> 32);
}

float test_rng_unit(test_rng *rng) {
    return (float)(test_rng_u32(rng) >> 8) / 16777216.0f;
}

float test_rng_normal(test_rng *rng) {
    double u1 = ((double)test_rng_u32(rng) + 1.0) / 4294967297.0;
    double u2 = (double)test_rng_u32(rng) / 4294967296.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

void test_fill_keys(test_rng *rng, float *k, size_t rows, size_t first_position, size_t H,
                    size_t d) {
    for (size_t r = 0; r < rows; r++) {
        double position = (double)(first_position + r);
        for (size_t h = 0; h < H; h++) {
            float *x = k + (r * H + h) * d;
            for (size_t j = 0; j < d; j++) x[j] = test_rng_normal(rng);
            /* Outlier channels: a fixed few per head, large and mostly one-signed. */
            for (size_t o = 0; o < 3 && o < d; o++) {
                size_t j = (h * 7 + o * 13 + 5) % d;
                x[j] = (float)(10.0 * (o + 1)) + 2.0f * x[j];
            }
            /* RoPE-like: rotate pair (2i, 2i+1) by position * 10000^(-2i/d). */
            for (size_t i = 0; 2 * i + 1 < d; i++) {
                double angle = position * pow(10000.0, -2.0 * (double)i / (double)d);
                double c = cos(angle), s = sin(angle);
                double a = x[2 * i], b = x[2 * i + 1];
                x[2 * i] = (float)(a * c - b * s);
                x[2 * i + 1] = (float)(a * s + b * c);
            }
        }
    }
}

void test_fill_normal(test_rng *rng, float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = test_rng_normal(rng);
}

double test_rel_error(const float *a, const float *b, size_t n) {
    double max_diff = 0.0, max_ref = 1e-30;
    for (size_t i = 0; i < n; i++) {
        double diff = fabs((double)a[i] - (double)b[i]);
        if (diff > max_diff || diff != diff) max_diff = diff;
        if (fabs((double)b[i]) > max_ref) max_ref = fabs((double)b[i]);
    }
    return max_diff / max_ref;
}

int test_bits_equal(const float *a, const float *b, size_t n) {
    return memcmp(a, b, n * sizeof(float)) == 0;
}

void *test_alloc(size_t bytes) {
    void *p = calloc(1, bytes ? bytes : 1);
    if (!p) {
        printf("test harness: out of memory\n");
        exit(3);
    }
    return p;
}
