/*
 * test_kernels.c -- every kernel of the active set against the scalar
 * reference, and the scalar kernels against plain definitions written here.
 *
 * Natively the active set is the scalar one: the SIMD-vs-scalar comparisons
 * say so (test_skip) and only the definitions are checked.  In the wasm build
 * the active set must be wasm-simd128 and every comparison runs.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "test.h"

#define MAX_D 256
#define TRIALS 6

static const size_t dims[] = {1, 3, 4, 15, 16, 17, 64, 80, 128, 256};
#define NUM_DIMS (sizeof dims / sizeof dims[0])

/* The set held against kvc_kernels_scalar: wasm SIMD128 in a wasm build. */
static const kvc_kernels *simd_set(void) {
#if defined(__wasm_simd128__)
    return &kvc_kernels_wasmsimd;
#else
    test_skip("native build: the active kernel set is scalar, no SIMD set to compare with; "
              "only the scalar kernels are checked against the plain definitions");
    return NULL;
#endif
}

/* The sets whose kernels a case checks against the plain definitions: the
 * scalar set, then the SIMD set when the build has one. */
typedef struct kernel_sets {
    const kvc_kernels *set[2];
    size_t count;
} kernel_sets;

static kernel_sets kernels_to_check(void) {
    const kvc_kernels *simd = simd_set();
    kernel_sets sets = {{&kvc_kernels_scalar, simd}, simd ? 2 : 1};
    return sets;
}

/* Row contents that stress a kernel differently per trial: normal, outlier
 * channels, a wide range of magnitudes, small integers, zeros of both signs. */
static void fill_row(test_rng *rng, float *x, size_t d, int trial) {
    for (size_t j = 0; j < d; j++) {
        float g = test_rng_normal(rng);
        switch (trial % 5) {
        case 0: x[j] = g; break;
        case 1: x[j] = (j % 7 == 3) ? 40.0f + g : g; break;
        case 2: x[j] = ldexpf(g, (int)(test_rng_u32(rng) % 61) - 30); break;
        case 3: x[j] = (float)((int)(test_rng_u32(rng) % 601) - 300); break;
        default: x[j] = (j % 3 == 0) ? ((j % 2) ? -0.0f : 0.0f) : g; break;
        }
    }
}

/* A positive per-channel field; trial 5 also has channels at the floor. */
static void fill_field(test_rng *rng, float *c, size_t d, int trial) {
    for (size_t j = 0; j < d; j++) {
        c[j] = expf(2.0f * test_rng_normal(rng));
        if (trial == 5 && j % 5 == 2) c[j] = 1e-30f;
    }
}

static void fill_codes(test_rng *rng, int8_t *codes, size_t d) {
    for (size_t j = 0; j < d; j++) codes[j] = (int8_t)((int)(test_rng_u32(rng) % 256) - 128);
}

/* ---- plain definitions ---- */

static float round_half_even(float v) {
    float f = floorf(v);
    float frac = v - f;
    if (frac > 0.5f) return f + 1.0f;
    if (frac < 0.5f) return f;
    return fmodf(f, 2.0f) == 0.0f ? f : f + 1.0f;
}

static float saturate(float t) {
    if (t > FLT_MAX) return FLT_MAX;
    if (t < -FLT_MAX) return -FLT_MAX;
    return t;
}

/* t = x/c (saturated), s = max|t|/127 floored at 1e-30, codes =
 * clamp(round_half_even(t/s), -127, 127). */
static float ref_quantize(size_t d, const float *x, const float *field, int8_t *codes) {
    float t[MAX_D];
    float max_abs = 0.0f;
    for (size_t j = 0; j < d; j++) {
        t[j] = saturate(x[j] / field[j]);
        if (fabsf(t[j]) > max_abs) max_abs = fabsf(t[j]);
    }
    float s = max_abs / 127.0f;
    if (s < 1e-30f) s = 1e-30f;
    for (size_t j = 0; j < d; j++) {
        float r = round_half_even(t[j] / s);
        if (r > 127.0f) r = 127.0f;
        if (r < -127.0f) r = -127.0f;
        codes[j] = (int8_t)r;
    }
    return s;
}

/* |computed - exact| <= gamma_d * sum |a_j b_j| for any summation order. */
static double dot_error_bound(size_t d, double sum_abs) {
    const double u = FLT_EPSILON / 2.0;
    return (double)d * u / (1.0 - (double)d * u) * sum_abs;
}

/* Checks one dot product against the exact one; returns 0 when out of bound. */
static int dot_within_bound(size_t d, float got, const float *a, const float *b) {
    double exact = 0.0, sum_abs = 0.0;
    for (size_t j = 0; j < d; j++) {
        exact += (double)a[j] * (double)b[j];
        sum_abs += fabs((double)a[j] * (double)b[j]);
    }
    return fabs((double)got - exact) <= dot_error_bound(d, sum_abs);
}

static double sum_abs_products(size_t d, const float *a, const float *b) {
    double sum_abs = 0.0;
    for (size_t j = 0; j < d; j++) sum_abs += fabs((double)a[j] * (double)b[j]);
    return sum_abs;
}

static void codes_as_floats(size_t d, const int8_t *codes, float *x) {
    for (size_t j = 0; j < d; j++) x[j] = (float)codes[j];
}

/* ---- the set this build runs ---- */

TEST(kernel_isa_should_be_wasm_simd128_in_wasm_builds_and_scalar_natively) {
#if defined(__wasm_simd128__)
    CHECK(strcmp(kvc_kernel_isa(), "wasm-simd128") == 0);
    CHECK(kvc_kernels_active() == &kvc_kernels_wasmsimd);
#else
    CHECK(strcmp(kvc_kernel_isa(), "scalar") == 0);
    CHECK(kvc_kernels_active() == &kvc_kernels_scalar);
#endif
    CHECK(strcmp(kvc_kernels_scalar.isa, "scalar") == 0);
}

#ifdef KVC_KERNEL_OPS
/* This file has a case for each of the eleven operations: one added to
 * KVC_KERNEL_OPS stops the build here until it has its case too. */
#define COUNT_OP(op) +1
_Static_assert(0 KVC_KERNEL_OPS(COUNT_OP) == 11, "a new kernel op needs its case in test_kernels.c");
#undef COUNT_OP
#endif

TEST(kernel_tables_should_fill_every_operation) {
#ifdef KVC_KERNEL_OPS
    const kernel_sets sets = kernels_to_check();
    for (size_t s = 0; s < sets.count; s++) {
#define CHECK_FILLED(op) CHECK(sets.set[s]->op != NULL);
        KVC_KERNEL_OPS(CHECK_FILLED)
#undef CHECK_FILLED
    }
    const kvc_kernels *active = kvc_kernels_active();
#define CHECK_ACTIVE_FILLED(op) CHECK(active->op != NULL);
    KVC_KERNEL_OPS(CHECK_ACTIVE_FILLED)
#undef CHECK_ACTIVE_FILLED
#else
    test_skip("kernels.h has no KVC_KERNEL_OPS list to walk");
#endif
}

/* ---- bit-identical kernels ---- */

TEST(quantize_row_should_give_the_bytes_of_its_definition_at_every_dim) {
    const kvc_kernels *simd = simd_set();
    test_rng rng = test_rng_new(11);
    float x[MAX_D], field[MAX_D];
    int8_t want[MAX_D], got[MAX_D], simd_codes[MAX_D];
    for (size_t i = 0; i < NUM_DIMS; i++) {
        const size_t d = dims[i];
        for (int trial = 0; trial < TRIALS; trial++) {
            fill_row(&rng, x, d, trial);
            fill_field(&rng, field, d, trial);
            float want_scale = ref_quantize(d, x, field, want);
            float scale = kvc_kernels_scalar.quantize_row(d, x, field, got);
            CHECK(memcmp(&scale, &want_scale, sizeof scale) == 0);
            CHECK(memcmp(got, want, d) == 0);
            if (!simd) continue;
            float simd_scale = simd->quantize_row(d, x, field, simd_codes);
            CHECK(memcmp(&simd_scale, &scale, sizeof scale) == 0);
            CHECK(memcmp(simd_codes, got, d) == 0);
        }
    }
}

TEST(dequantize_row_should_give_scalar_bits_at_every_dim) {
    const kvc_kernels *simd = simd_set();
    test_rng rng = test_rng_new(12);
    float field[MAX_D], want[MAX_D], got[MAX_D];
    int8_t codes[MAX_D];
    for (size_t i = 0; i < NUM_DIMS; i++) {
        const size_t d = dims[i];
        for (int trial = 0; trial < TRIALS; trial++) {
            fill_codes(&rng, codes, d);
            fill_field(&rng, field, d, trial);
            const int exponent = (int)(test_rng_u32(&rng) % 41) - 20;
            const float scale = ldexpf(test_rng_unit(&rng) + 0.5f, exponent);
            for (size_t j = 0; j < d; j++) want[j] = ((float)codes[j] * scale) * field[j];
            kvc_kernels_scalar.dequantize_row(d, codes, scale, field, got);
            CHECK(test_bits_equal(got, want, d));
            if (!simd) continue;
            simd->dequantize_row(d, codes, scale, field, got);
            CHECK(test_bits_equal(got, want, d));
        }
    }
}

TEST(mul_f32_should_give_scalar_bits_also_in_place) {
    const kernel_sets sets = kernels_to_check();
    test_rng rng = test_rng_new(13);
    float a[MAX_D], b[MAX_D], want[MAX_D], got[MAX_D];
    for (size_t i = 0; i < NUM_DIMS; i++) {
        const size_t d = dims[i];
        for (int trial = 0; trial < TRIALS; trial++) {
            fill_row(&rng, a, d, trial);
            fill_field(&rng, b, d, trial);
            for (size_t j = 0; j < d; j++) want[j] = a[j] * b[j];
            for (size_t s = 0; s < sets.count; s++) {
                sets.set[s]->mul_f32(d, a, b, got);
                CHECK(test_bits_equal(got, want, d));
                memcpy(got, a, d * sizeof(float));
                sets.set[s]->mul_f32(d, got, b, got); /* y aliases a */
                CHECK(test_bits_equal(got, want, d));
                memcpy(got, b, d * sizeof(float));
                sets.set[s]->mul_f32(d, a, got, got); /* y aliases b */
                CHECK(test_bits_equal(got, want, d));
            }
        }
    }
}

TEST(softmax_should_give_scalar_bits_at_every_length) {
    const kvc_kernels *simd = simd_set();
    static const size_t lengths[] = {1, 2, 3, 4, 5, 15, 16, 17, 64, 80, 128, 256, 1000};
    test_rng rng = test_rng_new(14);
    float *z = test_alloc(1000 * sizeof(float));
    float *want = test_alloc(1000 * sizeof(float));
    float *got = test_alloc(1000 * sizeof(float));
    for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++) {
        const size_t n = lengths[i];
        for (int trial = 0; trial < TRIALS; trial++) {
            for (size_t p = 0; p < n; p++) {
                float g = test_rng_normal(&rng);
                /* Scores in several regimes: flat, peaky, underflowing, tied. */
                z[p] = trial == 0 ? g : trial == 1 ? 30.0f * g : trial == 2 ? 200.0f * g
                     : trial == 3 ? (float)(p % 3) : trial == 4 ? -1e4f + g : 0.0f;
            }
            float max = z[0], sum = 0.0f;
            for (size_t p = 1; p < n; p++) max = z[p] > max ? z[p] : max;
            for (size_t p = 0; p < n; p++) {
                want[p] = expf(z[p] - max);
                sum += want[p];
            }
            for (size_t p = 0; p < n; p++) want[p] = want[p] / sum;
            memcpy(got, z, n * sizeof(float));
            kvc_kernels_scalar.softmax(n, got);
            CHECK(test_bits_equal(got, want, n));
            if (!simd) continue;
            memcpy(got, z, n * sizeof(float));
            simd->softmax(n, got);
            CHECK(test_bits_equal(got, want, n));
        }
    }
    free(z);
    free(want);
    free(got);
}

TEST(all_finite_should_match_scalar_on_finite_rows) {
    const kernel_sets sets = kernels_to_check();
    test_rng rng = test_rng_new(15);
    float x[MAX_D];
    for (size_t s = 0; s < sets.count; s++) {
        CHECK(sets.set[s]->all_finite(0, x) == 1);
        for (size_t i = 0; i < NUM_DIMS; i++) {
            const size_t d = dims[i];
            for (int trial = 0; trial < TRIALS; trial++) {
                fill_row(&rng, x, d, trial);
                x[d - 1] = (trial % 2) ? FLT_MAX : -FLT_MAX;
                x[0] = (trial % 3) ? FLT_TRUE_MIN : -0.0f;
                CHECK(sets.set[s]->all_finite(d, x) == 1);
            }
        }
    }
}

TEST(all_finite_should_reject_nan_and_inf_at_every_index) {
    const kernel_sets sets = kernels_to_check();
    test_rng rng = test_rng_new(16);
    float x[MAX_D];
    for (size_t s = 0; s < sets.count; s++) {
        for (size_t i = 0; i < NUM_DIMS; i++) {
            const size_t d = dims[i];
            fill_row(&rng, x, d, 0);
            for (size_t at = 0; at < d; at++) {
                for (int b = 0; b < 3; b++) {
                    const float keep = x[at];
                    x[at] = test_nonfinite[b];
                    const int verdict = sets.set[s]->all_finite(d, x);
                    x[at] = keep;
                    CHECK(verdict == 0);
                }
            }
        }
    }
}

/* axpy is element-wise (y[j] + alpha * x[j], one rounding each), so the
 * contract of kernels.h holds it bit-identical, not just close. */
TEST(axpy_f32_should_give_scalar_bits_at_every_dim) {
    const kernel_sets sets = kernels_to_check();
    test_rng rng = test_rng_new(17);
    float x[MAX_D], y0[MAX_D], want[MAX_D], got[MAX_D];
    for (size_t i = 0; i < NUM_DIMS; i++) {
        const size_t d = dims[i];
        for (int trial = 0; trial < TRIALS; trial++) {
            fill_row(&rng, x, d, trial);
            fill_row(&rng, y0, d, trial + 1);
            const float alpha = test_rng_normal(&rng);
            for (size_t j = 0; j < d; j++) want[j] = y0[j] + alpha * x[j];
            for (size_t s = 0; s < sets.count; s++) {
                memcpy(got, y0, d * sizeof(float));
                sets.set[s]->axpy_f32(d, alpha, x, got);
                CHECK(test_bits_equal(got, want, d));
            }
        }
    }
}

TEST(axpy_i8_should_give_scalar_bits_at_every_dim) {
    const kernel_sets sets = kernels_to_check();
    test_rng rng = test_rng_new(18);
    float y0[MAX_D], want[MAX_D], got[MAX_D];
    int8_t codes[MAX_D];
    for (size_t i = 0; i < NUM_DIMS; i++) {
        const size_t d = dims[i];
        for (int trial = 0; trial < TRIALS; trial++) {
            fill_codes(&rng, codes, d);
            fill_row(&rng, y0, d, trial);
            const float alpha = test_rng_normal(&rng) * 1e-3f;
            for (size_t j = 0; j < d; j++) want[j] = y0[j] + alpha * (float)codes[j];
            for (size_t s = 0; s < sets.count; s++) {
                memcpy(got, y0, d * sizeof(float));
                sets.set[s]->axpy_i8(d, alpha, codes, got);
                CHECK(test_bits_equal(got, want, d));
            }
        }
    }
}

/* ---- reductions: any summation order, so within the rounding bound ---- */

TEST(dot_f32_should_agree_with_scalar_to_rounding) {
    const kvc_kernels *simd = simd_set();
    test_rng rng = test_rng_new(19);
    float a[MAX_D], b[MAX_D];
    for (size_t i = 0; i < NUM_DIMS; i++) {
        const size_t d = dims[i];
        for (int trial = 0; trial < TRIALS; trial++) {
            fill_row(&rng, a, d, trial);
            fill_row(&rng, b, d, trial == 3 ? 3 : 0);
            const float scalar = kvc_kernels_scalar.dot_f32(d, a, b);
            CHECK(dot_within_bound(d, scalar, a, b));
            if (!simd) continue;
            const float got = simd->dot_f32(d, a, b);
            CHECK(dot_within_bound(d, got, a, b));
            CHECK(fabs((double)got - (double)scalar) <=
                  2.0 * dot_error_bound(d, sum_abs_products(d, a, b)));
        }
    }
}

TEST(dot_f32_i8_should_agree_with_scalar_to_rounding) {
    const kvc_kernels *simd = simd_set();
    test_rng rng = test_rng_new(20);
    float a[MAX_D], widened[MAX_D];
    int8_t codes[MAX_D];
    for (size_t i = 0; i < NUM_DIMS; i++) {
        const size_t d = dims[i];
        for (int trial = 0; trial < TRIALS; trial++) {
            fill_row(&rng, a, d, trial);
            fill_codes(&rng, codes, d);
            codes_as_floats(d, codes, widened);
            const float scalar = kvc_kernels_scalar.dot_f32_i8(d, a, codes);
            CHECK(dot_within_bound(d, scalar, a, widened));
            if (!simd) continue;
            const float got = simd->dot_f32_i8(d, a, codes);
            CHECK(dot_within_bound(d, got, a, widened));
            CHECK(fabs((double)got - (double)scalar) <=
                  2.0 * dot_error_bound(d, sum_abs_products(d, a, widened)));
        }
    }
}

/* ---- the quantizer's definition on crafted rows, in every set ---- */

TEST(quantize_row_should_round_ties_to_even) {
    const kernel_sets sets = kernels_to_check();
    /* t/s lands exactly on these halves; the even neighbour wins. */
    static const float ties[8] = {-3.5f, -2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f, 3.5f};
    static const int8_t even[8] = {-4, -2, -2, 0, 0, 2, 2, 4};
    float x[MAX_D], field[MAX_D];
    int8_t codes[MAX_D];
    for (size_t s = 0; s < sets.count; s++) {
        for (size_t i = 0; i < NUM_DIMS; i++) {
            const size_t d = dims[i];
            if (d < 2) continue;
            /* Scale 1 (max |t| = 127), then scale 2 (max |t| = 254), with some
             * ties reached through a field of 2 (x = 2t, c = 2). */
            for (int scale = 1; scale <= 2; scale++) {
                x[0] = 127.0f * (float)scale;
                field[0] = 1.0f;
                for (size_t j = 1; j < d; j++) {
                    field[j] = (j % 3 == 0) ? 2.0f : 1.0f;
                    x[j] = ties[j % 8] * (float)scale * field[j];
                }
                const float got_scale = sets.set[s]->quantize_row(d, x, field, codes);
                CHECK(got_scale == (float)scale);
                CHECK(codes[0] == 127);
                for (size_t j = 1; j < d; j++) CHECK(codes[j] == even[j % 8]);
            }
        }
    }
}

TEST(quantize_row_should_give_floor_scale_and_zero_codes_for_zero_row) {
    const kernel_sets sets = kernels_to_check();
    test_rng rng = test_rng_new(21);
    float x[MAX_D], field[MAX_D];
    int8_t codes[MAX_D + 1];
    for (size_t s = 0; s < sets.count; s++) {
        for (size_t i = 0; i < NUM_DIMS; i++) {
            const size_t d = dims[i];
            for (size_t j = 0; j < d; j++) x[j] = (j % 2) ? -0.0f : 0.0f;
            fill_field(&rng, field, d, 0);
            memset(codes, 0x55, sizeof codes);
            const float scale = sets.set[s]->quantize_row(d, x, field, codes);
            CHECK(scale == 1e-30f);
            CHECK(scale == KVC_Q8_SCALE_FLOOR);
            for (size_t j = 0; j < d; j++) CHECK(codes[j] == 0);
            CHECK(codes[d] == 0x55); /* nothing written past d */
        }
    }
}

TEST(quantize_row_should_saturate_huge_ratio_instead_of_nan) {
    const kernel_sets sets = kernels_to_check();
    test_rng rng = test_rng_new(22);
    float x[MAX_D], field[MAX_D];
    int8_t codes[MAX_D];
    for (size_t s = 0; s < sets.count; s++) {
        for (size_t i = 0; i < NUM_DIMS; i++) {
            const size_t d = dims[i];
            /* The huge channel first, then last (a SIMD tail lane for most d). */
            for (int where = 0; where < 2; where++) {
                const size_t at = where ? d - 1 : 0;
                const float sign = where ? -1.0f : 1.0f;
                for (size_t j = 0; j < d; j++) {
                    x[j] = test_rng_normal(&rng);
                    field[j] = 1.0f;
                }
                x[at] = sign * 1e30f; /* x / c = 1e60: +-Inf in f32 */
                field[at] = 1e-30f;
                const float scale = sets.set[s]->quantize_row(d, x, field, codes);
                CHECK(isfinite(scale));
                CHECK(scale == FLT_MAX / 127.0f);
                CHECK(codes[at] == (int8_t)(sign * 127.0f));
                for (size_t j = 0; j < d; j++) CHECK(j == at || codes[j] == 0);
            }
        }
    }
}

/* ---- linear attention, f64 ---- */

static const size_t feature_counts[] = {1, 3, 8, 17};
#define NUM_FEATURE_COUNTS (sizeof feature_counts / sizeof feature_counts[0])
#define MAX_F 17

static void fill_f64(test_rng *rng, double *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = (double)test_rng_normal(rng) * 0.75;
}

TEST(linear_update_f64_should_give_its_definition_bits_also_in_place) {
    const kernel_sets sets = kernels_to_check();
    test_rng rng = test_rng_new(31);
    static double src[MAX_F * MAX_D], want[MAX_F * MAX_D], got[MAX_F * MAX_D];
    double decay[MAX_F], phi[MAX_F], v[MAX_D];
    for (size_t fi = 0; fi < NUM_FEATURE_COUNTS; fi++) {
        for (size_t i = 0; i < NUM_DIMS; i++) {
            const size_t F = feature_counts[fi], dv = dims[i];
            fill_f64(&rng, src, F * dv);
            fill_f64(&rng, decay, F);
            fill_f64(&rng, phi, F);
            fill_f64(&rng, v, dv);
            for (size_t f = 0; f < F; f++)
                for (size_t j = 0; j < dv; j++)
                    want[f * dv + j] = decay[f] * src[f * dv + j] + phi[f] * v[j];
            for (size_t s = 0; s < sets.count; s++) {
                sets.set[s]->linear_update_f64(F, dv, decay, phi, v, src, got);
                CHECK(memcmp(got, want, F * dv * sizeof(double)) == 0);
                memcpy(got, src, F * dv * sizeof(double));
                sets.set[s]->linear_update_f64(F, dv, decay, phi, v, got, got);
                CHECK(memcmp(got, want, F * dv * sizeof(double)) == 0);
            }
        }
    }
}

TEST(linear_read_f64_should_sum_features_in_order_bit_for_bit) {
    const kernel_sets sets = kernels_to_check();
    test_rng rng = test_rng_new(32);
    static double S[MAX_F * MAX_D];
    double phi[MAX_F], want[MAX_D], got[MAX_D];
    for (size_t fi = 0; fi < NUM_FEATURE_COUNTS; fi++) {
        for (size_t i = 0; i < NUM_DIMS; i++) {
            const size_t F = feature_counts[fi], dv = dims[i];
            fill_f64(&rng, S, F * dv);
            fill_f64(&rng, phi, F);
            for (size_t j = 0; j < dv; j++) {
                double sum = 0.0;
                for (size_t f = 0; f < F; f++) sum += phi[f] * S[f * dv + j];
                want[j] = sum;
            }
            for (size_t s = 0; s < sets.count; s++) {
                sets.set[s]->linear_read_f64(F, dv, phi, S, got);
                CHECK(memcmp(got, want, dv * sizeof(double)) == 0);
            }
        }
    }
}

RUN_TESTS(CASE(kernel_isa_should_be_wasm_simd128_in_wasm_builds_and_scalar_natively),
          CASE(kernel_tables_should_fill_every_operation),
          CASE(quantize_row_should_give_the_bytes_of_its_definition_at_every_dim),
          CASE(dequantize_row_should_give_scalar_bits_at_every_dim),
          CASE(mul_f32_should_give_scalar_bits_also_in_place),
          CASE(softmax_should_give_scalar_bits_at_every_length),
          CASE(all_finite_should_match_scalar_on_finite_rows),
          CASE(all_finite_should_reject_nan_and_inf_at_every_index),
          CASE(axpy_f32_should_give_scalar_bits_at_every_dim),
          CASE(axpy_i8_should_give_scalar_bits_at_every_dim),
          CASE(dot_f32_should_agree_with_scalar_to_rounding),
          CASE(dot_f32_i8_should_agree_with_scalar_to_rounding),
          CASE(quantize_row_should_round_ties_to_even),
          CASE(quantize_row_should_give_floor_scale_and_zero_codes_for_zero_row),
          CASE(quantize_row_should_saturate_huge_ratio_instead_of_nan),
          CASE(linear_update_f64_should_give_its_definition_bits_also_in_place),
          CASE(linear_read_f64_should_sum_features_in_order_bit_for_bit))
