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

#include "kernels/exp-f32.h"
#include "kernels/kernels.h"
#include "test.h"

#define MAX_D 256
#define TRIALS 6

static const size_t dims[] = {1, 3, 4, 15, 16, 17, 64, 80, 128, 256};
#define NUM_DIMS (sizeof dims / sizeof dims[0])

/* The set held against kvc_kernels_scalar: wasm SIMD128 in a wasm build. */
static const kvc_kernels *simd_set(void) {
#if defined(KVC_WITH_WASMSIMD)
    return &kvc_kernels_wasmsimd;
#else
    test_skip("native build: the active kernel set is scalar, no SIMD set to compare with; "
              "only the scalar kernels are checked against the plain definitions");
    return NULL;
#endif
}

/* The relaxed-SIMD set in a relaxed build (run under an engine that has
 * relaxed SIMD), else NULL after saying so. */
static const kvc_kernels *relaxed_set(void) {
#if defined(KVC_WITH_WASMRELAXED)
    return &kvc_kernels_wasmrelaxed;
#else
    test_skip("not a relaxed-SIMD build: the relaxed kernels are checked in build-relaxed "
              "(tests/c under Node 22)");
    return NULL;
#endif
}

/* The sets whose kernels a case checks against the plain definitions: the
 * scalar set, then the SIMD set when the build has one. */
typedef struct kernel_sets {
    const kvc_kernels *set[3];
    size_t count;
} kernel_sets;

static kernel_sets kernels_to_check(void) {
    const kvc_kernels *simd = simd_set();
    kernel_sets sets = {{&kvc_kernels_scalar, simd, NULL}, simd ? 2 : 1};
    return sets;
}

/* The same, and the relaxed set in a relaxed build: for the kernels that
 * give the same bits in every set of a build (integer sums, quantizers). */
static kernel_sets exact_kernels_to_check(void) {
    kernel_sets sets = kernels_to_check();
#if defined(KVC_WITH_WASMRELAXED)
    sets.set[sets.count++] = &kvc_kernels_wasmrelaxed;
#endif
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
    if (t > 0x1p127f) return 0x1p127f;
    if (t < -0x1p127f) return -0x1p127f;
    return t;
}

/* t = x/c (saturated), s = max|t|/127 floored at 1e-30, codes =
 * clamp(round_half_even(t/s), -127, 127). */
static float ref_quantize_to(size_t d, const float *x, const float *field, float code_max,
                             int8_t *codes) {
    float t[MAX_D];
    float max_abs = 0.0f;
    for (size_t j = 0; j < d; j++) {
        t[j] = saturate(x[j] / field[j]);
        if (fabsf(t[j]) > max_abs) max_abs = fabsf(t[j]);
    }
    float s = max_abs / code_max;
    if (s < 1e-30f) s = 1e-30f;
    for (size_t j = 0; j < d; j++) {
        float r = round_half_even(t[j] / s);
        if (r > code_max) r = code_max;
        if (r < -code_max) r = -code_max;
        codes[j] = (int8_t)r;
    }
    return s;
}

static float ref_quantize(size_t d, const float *x, const float *field, int8_t *codes) {
    return ref_quantize_to(d, x, field, 127.0f, codes);
}

/* Where channel j's 4-bit code lies among a row's code bytes (kvcache.h,
 * kvc_mode): its byte, and whether it is the high nibble. */
static size_t q4_byte_of(size_t d, size_t j, int *high) {
    const size_t block = j / 32 * 32, k = j - block;
    const size_t m = d - block < 32 ? d - block : 32, half = (m + 1) / 2;
    *high = k >= half;
    return block / 2 + (k < half ? k : k - half);
}

/* The bytes of a 4-bit row after its scale: the 2-bit shift of each group
 * of 16 channels, then the codes -7..7 in that layout, unused bits zero. */
static size_t ref_pack_q4(size_t d, const int8_t *codes, const int *shifts, uint8_t *packed) {
    const size_t groups = (d + 15) / 16, shift_bytes = (groups + 3) / 4;
    memset(packed, 0, shift_bytes + (d + 1) / 2);
    for (size_t g = 0; g < groups; g++) packed[g / 4] |= (uint8_t)(shifts[g] << (2 * (g % 4)));
    for (size_t j = 0; j < d; j++) {
        int high;
        const size_t at = shift_bytes + q4_byte_of(d, j, &high);
        packed[at] |= (uint8_t)(((uint8_t)codes[j] & 0x0F) << (high ? 4 : 0));
    }
    return shift_bytes + (d + 1) / 2;
}

/* The 4-bit definition: scale = max(max|t| / 7, floor); group g (16
 * channels) steps by scale * 2^(shift - 3) for the smallest shift with its
 * max|t| <= max|t| * 2^(shift - 3); codes round half to even, within 7.
 * Returns the row scale, scale / 8; codes and shifts as written. */
static float ref_quantize_q4(size_t d, const float *x, const float *field, int8_t *codes,
                             int *shifts) {
    float t[MAX_D], group_max[MAX_D / 16 + 1] = {0};
    float max_abs = 0.0f;
    for (size_t j = 0; j < d; j++) {
        t[j] = saturate(x[j] / field[j]);
        max_abs = fmaxf(max_abs, fabsf(t[j]));
        group_max[j / 16] = fmaxf(group_max[j / 16], fabsf(t[j]));
    }
    float s = max_abs / 7.0f;
    if (s < 1e-30f) s = 1e-30f;
    for (size_t g = 0; g < (d + 15) / 16; g++) {
        shifts[g] = 3;
        while (shifts[g] > 0 && group_max[g] <= max_abs / (float)(1 << (4 - shifts[g]))) shifts[g]--;
    }
    for (size_t j = 0; j < d; j++) {
        const float step = s / (float)(1 << (3 - shifts[j / 16]));
        float r = round_half_even(t[j] / step);
        if (r > 7.0f) r = 7.0f;
        if (r < -7.0f) r = -7.0f;
        codes[j] = (int8_t)r;
    }
    return s / 8.0f;
}

/* |computed - exact| <= gamma_d * sum |a_j b_j| for any summation order. */
static double dot_error_bound(size_t d, double sum_abs) {
    const double u = FLT_EPSILON / 2.0;
    return (double)d * u / (1.0 - (double)d * u) * sum_abs;
}

/* How far an f32 score q.k / sqrt_d may be from the exact one: the dot's
 * rounding bound (any order), one more rounding for the division, and the
 * (tiny) rounding of the double reference itself. */
typedef struct score_check {
    double exact, bound;
} score_check;

static score_check score_reference(size_t d, const float *a, const float *b, float sqrt_d) {
    double dot = 0.0, sum_abs = 0.0;
    for (size_t j = 0; j < d; j++) {
        dot += (double)a[j] * (double)b[j];
        sum_abs += fabs((double)a[j] * (double)b[j]);
    }
    const double u = FLT_EPSILON / 2.0, B = dot_error_bound(d, sum_abs);
    const double exact = dot / (double)sqrt_d;
    const double slack =
        (double)d * DBL_EPSILON * sum_abs / (double)sqrt_d + DBL_EPSILON * fabs(exact);
    score_check check = {exact, (B + u * (fabs(dot) + B)) / (double)sqrt_d + slack};
    return check;
}

/* A score matrix [G x n] at row stride `stride` > n: the gaps between rows
 * hold this value before a kernel runs and must still hold it after. */
#define GAP_SENTINEL -1234.5f

static void fill_gaps(float *z, size_t G, size_t stride) {
    for (size_t i = 0; i < G * stride; i++) z[i] = GAP_SENTINEL;
}

static int gaps_untouched(const float *z, size_t G, size_t n, size_t stride) {
    for (size_t g = 0; g < G; g++)
        for (size_t p = n; p < stride; p++)
            if (z[g * stride + p] != GAP_SENTINEL) return 0;
    return 1;
}

/* n quantized rows as the kernels read them: each a 4-byte f32 scale, then
 * d codes.  extreme: every code +-127 (the sign alternating by row). */
static void fill_qrows(test_rng *rng, uint8_t *qrows, size_t n, size_t d, int extreme) {
    const size_t stride = sizeof(float) + d;
    for (size_t p = 0; p < n; p++) {
        uint8_t *row = qrows + p * stride;
        const float scale = ldexpf(test_rng_unit(rng) + 0.5f, (int)(test_rng_u32(rng) % 21) - 10);
        memcpy(row, &scale, sizeof scale);
        int8_t *codes = (int8_t *)(row + sizeof(float));
        if (extreme) {
            for (size_t j = 0; j < d; j++) codes[j] = (int8_t)((p % 2) ? -127 : 127);
        } else {
            fill_codes(rng, codes, d);
            for (size_t j = 0; j < d; j++)
                if (codes[j] == -128) codes[j] = -127; /* never produced */
        }
    }
}

/* G queries of d i16 codes: uniform, or (extreme) query g all +32767,
 * all -32767 or alternating in sign, as g % 3 says. */
static void fill_q16(test_rng *rng, int16_t *q16, size_t G, size_t d, int extreme, int max) {
    for (size_t g = 0; g < G; g++) {
        for (size_t j = 0; j < d; j++) {
            int16_t *c = &q16[g * d + j];
            if (!extreme) *c = (int16_t)((int)(test_rng_u32(rng) % (2 * (unsigned)max + 1)) - max);
            else if (g % 3 == 0) *c = (int16_t)max;
            else if (g % 3 == 1) *c = (int16_t)-max;
            else *c = (int16_t)((j % 2) ? -max : max);
        }
    }
}

/* ---- the set this build runs ---- */

TEST(kernel_isa_should_be_wasm_simd128_in_wasm_builds_and_scalar_natively) {
#if defined(KVC_WITH_WASMRELAXED)
    CHECK(strcmp(kvc_kernel_isa(), "wasm-relaxed-simd") == 0);
    CHECK(kvc_kernels_active() == &kvc_kernels_wasmrelaxed);
#elif defined(KVC_WITH_WASMSIMD)
    CHECK(strcmp(kvc_kernel_isa(), "wasm-simd128") == 0);
    CHECK(kvc_kernels_active() == &kvc_kernels_wasmsimd);
#else
    CHECK(strcmp(kvc_kernel_isa(), "scalar") == 0);
    CHECK(kvc_kernels_active() == &kvc_kernels_scalar);
#endif
    CHECK(strcmp(kvc_kernels_scalar.isa, "scalar") == 0);
}

/* This file has a case for each of the twenty-one operations: one added to
 * KVC_KERNEL_OPS stops the build here until it has its case too. */
#define COUNT_OP(op) +1
_Static_assert(0 KVC_KERNEL_OPS(COUNT_OP) == 21,
               "a new kernel op needs its case in test_kernels.c");
#undef COUNT_OP

TEST(kernel_tables_should_fill_every_operation) {
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

/* Every tail a 32-channel block can leave, odd and even. */
static const size_t q4_dims[] = {1, 2, 3, 15, 16, 17, 31, 32, 33, 47, 50, 63, 64, 65, 80, 127, 128, 256};
#define NUM_Q4_DIMS (sizeof q4_dims / sizeof q4_dims[0])

TEST(quantize_row_q4_should_give_the_bytes_of_its_definition_at_every_dim) {
    const kvc_kernels *simd = simd_set();
    test_rng rng = test_rng_new(31);
    float x[MAX_D], field[MAX_D];
    int8_t codes[MAX_D];
    int shifts[MAX_D / 16 + 1];
    uint8_t want[MAX_D], got[MAX_D], simd_packed[MAX_D];
    size_t finer = 0; /* groups stepped finer than the row's largest */
    for (size_t i = 0; i < NUM_Q4_DIMS; i++) {
        const size_t d = q4_dims[i];
        for (int trial = 0; trial < TRIALS; trial++) {
            fill_row(&rng, x, d, trial);
            fill_field(&rng, field, d, trial);
            /* a quiet group now and then: its steps go finer */
            if (trial % 2 && d > 16)
                for (size_t j = 0; j < 16; j++) x[j] *= 0.1f;
            const float want_scale = ref_quantize_q4(d, x, field, codes, shifts);
            const size_t bytes = ref_pack_q4(d, codes, shifts, want);
            for (size_t g = 0; g < (d + 15) / 16; g++) finer += shifts[g] < 3;
            memset(got, 0xAA, sizeof got);
            const float scale = kvc_kernels_scalar.quantize_row_q4(d, x, field, got);
            CHECK(memcmp(&scale, &want_scale, sizeof scale) == 0);
            CHECK(memcmp(got, want, bytes) == 0);
            CHECK(got[bytes] == 0xAA); /* nothing past the row */
            if (!simd) continue;
            memset(simd_packed, 0xAA, sizeof simd_packed);
            const float simd_scale = simd->quantize_row_q4(d, x, field, simd_packed);
            CHECK(memcmp(&simd_scale, &scale, sizeof scale) == 0);
            CHECK(memcmp(simd_packed, got, bytes) == 0);
            CHECK(simd_packed[bytes] == 0xAA);
        }
    }
    CHECK(finer > 0);
}

TEST(unpack_q4_should_give_every_code_times_its_group_shift_and_the_scale) {
    const kernel_sets sets = exact_kernels_to_check();
    test_rng rng = test_rng_new(32);
    enum { ROWS = 3 };
    int8_t codes[ROWS][MAX_D];
    int shifts[ROWS][MAX_D / 16 + 1];
    uint8_t q4rows[ROWS * (4 + MAX_D)], q8rows[ROWS * (4 + MAX_D) + 1];
    for (size_t i = 0; i < NUM_Q4_DIMS; i++) {
        const size_t d = q4_dims[i], q4_bytes = 4 + ((d + 15) / 16 + 3) / 4 + (d + 1) / 2, q8_bytes = 4 + d;
        for (int r = 0; r < ROWS; r++) {
            for (size_t j = 0; j < d; j++) codes[r][j] = (int8_t)((int)(test_rng_u32(&rng) % 15) - 7);
            for (size_t g = 0; g < (d + 15) / 16; g++) shifts[r][g] = (int)(test_rng_u32(&rng) % 4);
            const float scale = test_rng_unit(&rng) + 0.25f;
            memcpy(q4rows + r * q4_bytes, &scale, 4);
            CHECK(4 + ref_pack_q4(d, codes[r], shifts[r], q4rows + r * q4_bytes + 4) == q4_bytes);
        }
        for (size_t s = 0; s < sets.count; s++) {
            memset(q8rows, 0x55, sizeof q8rows);
            sets.set[s]->unpack_q4(ROWS, d, q4rows, q8rows);
            for (int r = 0; r < ROWS; r++) {
                CHECK(memcmp(q8rows + r * q8_bytes, q4rows + r * q4_bytes, 4) == 0);
                for (size_t j = 0; j < d; j++)
                    CHECK((int8_t)q8rows[r * q8_bytes + 4 + j] == codes[r][j] * (1 << shifts[r][j / 16]));
            }
            CHECK(q8rows[ROWS * q8_bytes] == 0x55);
        }
    }
}

TEST(quantize_row_q4_should_round_ties_to_even_and_keep_codes_within_7) {
    const kernel_sets sets = kernels_to_check();
    /* t = x / c with c = 1 and max|t| = 7 in every group: steps of 1, so
     * x = k + 0.5 is a tie. */
    const size_t d = 40;
    float x[40], field[40];
    for (size_t j = 0; j < d; j++) {
        field[j] = 1.0f;
        x[j] = (float)((int)(j % 15) - 7) + ((j % 3 == 0 && j % 15 != 0 && j % 15 != 14) ? 0.5f : 0.0f);
    }
    x[0] = 7.0f;
    x[16] = -7.0f;
    x[32] = 7.0f;
    int8_t want[40];
    int shifts[3];
    uint8_t packed_want[32], packed[32];
    const float want_scale = ref_quantize_q4(d, x, field, want, shifts);
    CHECK(want_scale == 0.125f && shifts[0] == 3 && shifts[1] == 3 && shifts[2] == 3);
    const size_t bytes = ref_pack_q4(d, want, shifts, packed_want);
    for (size_t s = 0; s < sets.count; s++) {
        const float scale = sets.set[s]->quantize_row_q4(d, x, field, packed);
        CHECK(scale == 0.125f);
        CHECK(memcmp(packed, packed_want, bytes) == 0);
        for (size_t b = 1; b < bytes; b++) CHECK((packed[b] & 0x0F) != 8 && (packed[b] >> 4) != 8);
    }
    CHECK(want[1] == -6 && want[3] == -4); /* -6.5 -> -6, -4.5 -> -4 */
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

/* ---- attention scores ---- */

static const size_t group_sizes[] = {1, 2, 3, 4, 5, 6};
#define NUM_GROUP_SIZES (sizeof group_sizes / sizeof group_sizes[0])
#define MAX_G 6
static const size_t row_counts[] = {1, 2, 3, 4, 5, 7, 9, 16, 33};
#define NUM_ROW_COUNTS (sizeof row_counts / sizeof row_counts[0])
#define MAX_N 33

/* scores_f32 is a dot product: each set may sum in its own order, so each
 * score is held to the rounding bound around the exact one, and the SIMD
 * set to twice that around the scalar set. */
/* The SIMD128 set, and the relaxed one in its build (its fused multiply-adds
 * round once or twice: within the same bound). */
static void check_scores_f32_to_rounding(const kvc_kernels *simd, uint64_t seed);

TEST(scores_f32_should_agree_with_exact_scores_to_rounding) {
    check_scores_f32_to_rounding(simd_set(), 19);
}

TEST(relaxed_scores_f32_should_agree_with_exact_scores_to_rounding) {
    const kvc_kernels *relaxed = relaxed_set();
    if (relaxed) check_scores_f32_to_rounding(relaxed, 119);
}

static void check_scores_f32_to_rounding(const kvc_kernels *simd, uint64_t seed) {
    test_rng rng = test_rng_new(seed);
    const size_t stride = MAX_N + 3;
    float *q = test_alloc(MAX_G * MAX_D * sizeof(float));
    float *keys = test_alloc(MAX_N * MAX_D * sizeof(float));
    float *scalar = test_alloc(MAX_G * stride * sizeof(float));
    float *got = test_alloc(MAX_G * stride * sizeof(float));
    for (size_t i = 0; i < NUM_DIMS; i++) {
        const size_t d = dims[i];
        const float sqrt_d = sqrtf((float)d);
        for (size_t ni = 0; ni < NUM_ROW_COUNTS; ni++) {
            const size_t n = row_counts[ni], z_stride = n + 3;
            for (size_t gi = 0; gi < NUM_GROUP_SIZES; gi++) {
                const size_t G = group_sizes[gi];
                const int trial = (int)(ni + gi) % TRIALS;
                for (size_t g = 0; g < G; g++) fill_row(&rng, q + g * d, d, trial);
                for (size_t p = 0; p < n; p++) fill_row(&rng, keys + p * d, d, trial == 3 ? 3 : 0);
                fill_gaps(scalar, G, z_stride);
                fill_gaps(got, G, z_stride);
                kvc_kernels_scalar.scores_f32(G, n, d, q, keys, sqrt_d, scalar, z_stride);
                CHECK(gaps_untouched(scalar, G, n, z_stride));
                if (simd) {
                    simd->scores_f32(G, n, d, q, keys, sqrt_d, got, z_stride);
                    CHECK(gaps_untouched(got, G, n, z_stride));
                }
                for (size_t g = 0; g < G; g++) {
                    for (size_t p = 0; p < n; p++) {
                        const score_check ref = score_reference(d, q + g * d, keys + p * d, sqrt_d);
                        const double s = scalar[g * z_stride + p];
                        CHECK(fabs(s - ref.exact) <= ref.bound);
                        if (!simd) continue;
                        const double v = got[g * z_stride + p];
                        CHECK(fabs(v - ref.exact) <= ref.bound);
                        CHECK(fabs(v - s) <= 2.0 * ref.bound);
                    }
                }
            }
        }
    }
    free(q);
    free(keys);
    free(scalar);
    free(got);
}

/* The contract that makes attend_group equal attend bit for bit: one
 * (query, row) dot comes out the same whether the kernel takes the query in
 * a block of four, of two or alone, and the row in a block of four, two or
 * one.  Every query of a G = 1..6 call against G = 1 calls, against the
 * queries from the second on, and every split of the rows in two calls. */
TEST(scores_f32_should_give_each_query_the_same_bits_whatever_g_and_n) {
    kernel_sets sets = kernels_to_check();
#if defined(KVC_WITH_WASMRELAXED)
    sets.set[sets.count++] = &kvc_kernels_wasmrelaxed; /* within its own build, the same contract */
#endif
    test_rng rng = test_rng_new(20);
    const size_t stride = MAX_N + 3;
    float *q = test_alloc(MAX_G * MAX_D * sizeof(float));
    float *keys = test_alloc(MAX_N * MAX_D * sizeof(float));
    float *whole = test_alloc(MAX_G * stride * sizeof(float));
    float *part = test_alloc(MAX_G * stride * sizeof(float));
    for (size_t s = 0; s < sets.count; s++) {
        const kvc_kernels *k = sets.set[s];
        for (size_t i = 0; i < NUM_DIMS; i++) {
            const size_t d = dims[i];
            const float sqrt_d = sqrtf((float)d);
            for (size_t ni = 0; ni < NUM_ROW_COUNTS; ni++) {
                const size_t n = row_counts[ni], z_stride = n + 3;
                for (size_t gi = 0; gi < NUM_GROUP_SIZES; gi++) {
                    const size_t G = group_sizes[gi];
                    const int trial = (int)(i + ni + gi) % TRIALS;
                    for (size_t g = 0; g < G; g++) fill_row(&rng, q + g * d, d, trial);
                    for (size_t p = 0; p < n; p++) fill_row(&rng, keys + p * d, d, 0);
                    k->scores_f32(G, n, d, q, keys, sqrt_d, whole, z_stride);
                    for (size_t g = 0; g < G; g++) {
                        k->scores_f32(1, n, d, q + g * d, keys, sqrt_d, part, z_stride);
                        CHECK(test_bits_equal(part, whole + g * z_stride, n));
                    }
                    if (G > 1) {
                        k->scores_f32(G - 1, n, d, q + d, keys, sqrt_d, part, z_stride);
                        for (size_t g = 1; g < G; g++)
                            CHECK(test_bits_equal(part + (g - 1) * z_stride,
                                                  whole + g * z_stride, n));
                    }
                    for (size_t split = 1; split < n; split++) {
                        k->scores_f32(G, split, d, q, keys, sqrt_d, part, z_stride);
                        k->scores_f32(G, n - split, d, q, keys + split * d, sqrt_d, part + split,
                                      z_stride);
                        for (size_t g = 0; g < G; g++)
                            CHECK(test_bits_equal(part + g * z_stride, whole + g * z_stride, n));
                    }
                }
            }
        }
    }
    free(q);
    free(keys);
    free(whole);
    free(part);
}

/* scores_q8 as kernels.h defines it: i16 x i8 products summed exactly
 * (here in i64, so that an overflow of the kernel's i32 would show) over
 * blocks of KVC_Q8_DOT_BLOCK channels, the blocks added in f32 in order,
 * then dot * (s_p * scale).  *ok = 0 if a block sum leaves i32. */
static float ref_q8_score(size_t d, const int16_t *q16, float scale, const uint8_t *row, int *ok) {
    const int8_t *codes = (const int8_t *)(row + sizeof(float));
    float s;
    memcpy(&s, row, sizeof s);
    float dot = 0.0f;
    for (size_t block = 0; block < d; block += KVC_Q8_DOT_BLOCK) {
        int64_t sum = 0;
        for (size_t j = block; j < d && j < block + KVC_Q8_DOT_BLOCK; j++) sum += (int64_t)q16[j] * (int64_t)codes[j];
        if (sum > INT32_MAX || sum < INT32_MIN) *ok = 0;
        dot += (float)sum;
    }
    return dot * (s * scale);
}

/* The dims of the scores, plus two above KVC_Q8_DOT_BLOCK: one block and a
 * tail, and two blocks and a tail of 6 (not a multiple of 16). */
static const size_t q8_dims[] = {1, 3, 4, 15, 16, 17, 64, 80, 128, 256, 600, 1030};
#define NUM_Q8_DIMS (sizeof q8_dims / sizeof q8_dims[0])
#define MAX_Q8_D 1030

/* 1 if every set's scores_q8 (q4: scores_q4) of the rows give `want`'s bits,
 * leaving the gaps between z rows alone. */
static int scores_of_every_set(const kernel_sets *sets, int q4, size_t G, size_t n, size_t d,
                               const int16_t *codes, const float *scales, const uint8_t *rows,
                               const float *want, float *got, size_t z_stride) {
    int ok = 1;
    for (size_t s = 0; s < sets->count; s++) {
        fill_gaps(got, G, z_stride);
        (q4 ? sets->set[s]->scores_q4 : sets->set[s]->scores_q8)(G, n, d, codes, scales, rows, got, z_stride);
        ok = ok && gaps_untouched(got, G, n, z_stride);
        for (size_t g = 0; g < G; g++) ok = ok && test_bits_equal(got + g * z_stride, want + g * z_stride, n);
    }
    return ok;
}

/* G queries' codes (at +-KVC_QUERY_CODE_MAX with `extreme`) and scales. */
static void fill_query_codes(test_rng *rng, int16_t *codes, float *scales, size_t G, size_t d, int extreme) {
    fill_q16(rng, codes, G, d, extreme, (int)KVC_QUERY_CODE_MAX);
    for (size_t g = 0; g < G; g++)
        scales[g] = ldexpf(test_rng_unit(rng) + 0.5f, (int)(test_rng_u32(rng) % 31) - 25);
}

TEST(scores_q8_should_give_the_bits_of_its_definition_without_overflow) {
    const kernel_sets sets = exact_kernels_to_check();
    test_rng rng = test_rng_new(21);
    const size_t stride = MAX_N + 3;
    int16_t *codes = test_alloc(MAX_G * MAX_Q8_D * sizeof(int16_t));
    uint8_t *qrows = test_alloc(MAX_N * (sizeof(float) + MAX_Q8_D));
    float scales[MAX_G];
    float *want = test_alloc(MAX_G * stride * sizeof(float));
    float *got = test_alloc(MAX_G * stride * sizeof(float));
    for (size_t i = 0; i < NUM_Q8_DIMS; i++) {
        const size_t d = q8_dims[i];
        for (size_t ni = 0; ni < NUM_ROW_COUNTS; ni++) {
            const size_t n = row_counts[ni], z_stride = n + 3;
            for (size_t gi = 0; gi < NUM_GROUP_SIZES; gi++) {
                const size_t G = group_sizes[gi];
                /* Every third call: codes at +-127 against +-8191, the
                 * largest block sums there are. */
                const int extreme = (ni + gi) % 3 == 0;
                fill_query_codes(&rng, codes, scales, G, d, extreme);
                fill_qrows(&rng, qrows, n, d, extreme);
                int ok = 1;
                for (size_t g = 0; g < G; g++) {
                    for (size_t p = 0; p < n; p++)
                        want[g * z_stride + p] = ref_q8_score(d, codes + g * d, scales[g], qrows + p * (sizeof(float) + d), &ok);
                }
                CHECK(ok);
                CHECK(scores_of_every_set(&sets, 0, G, n, d, codes, scales, qrows, want, got, z_stride));
            }
        }
    }
    free(codes);
    free(qrows);
    free(want);
    free(got);
}

TEST(scores_q4_should_give_the_bits_of_scores_q8_over_its_unpacked_rows) {
    /* Against the definition through the scalar q8 kernel (itself checked
     * above): every channel count's tail, blocks past 512 channels, and
     * every third call the extremes (codes +-7 shifted by 3 against +-32767). */
    static const size_t q4_score_dims[] = {1, 3, 16, 17, 31, 32, 33, 64, 80, 128, 600, 1030};
    const kernel_sets sets = exact_kernels_to_check();
    test_rng rng = test_rng_new(22);
    int16_t *codes = test_alloc(MAX_G * MAX_Q8_D * sizeof(int16_t));
    uint8_t *q4rows = test_alloc(MAX_N * (4 + MAX_Q8_D)), *q8rows = test_alloc(MAX_N * (4 + MAX_Q8_D));
    int8_t *row_codes = test_alloc(MAX_Q8_D);
    int *shifts = test_alloc((MAX_Q8_D / 16 + 1) * sizeof(int));
    float scales[MAX_G];
    const size_t stride = MAX_N + 3;
    float *want = test_alloc(MAX_G * stride * sizeof(float)), *got = test_alloc(MAX_G * stride * sizeof(float));
    for (size_t i = 0; i < sizeof q4_score_dims / sizeof q4_score_dims[0]; i++) {
        const size_t d = q4_score_dims[i], q4_bytes = 4 + ((d + 15) / 16 + 3) / 4 + (d + 1) / 2;
        for (size_t ni = 0; ni < NUM_ROW_COUNTS; ni++) {
            const size_t n = row_counts[ni], z_stride = n + 3;
            for (size_t gi = 0; gi < NUM_GROUP_SIZES; gi++) {
                const size_t G = group_sizes[gi];
                const int extreme = (ni + gi) % 3 == 0;
                fill_query_codes(&rng, codes, scales, G, d, extreme);
                for (size_t p = 0; p < n; p++) {
                    for (size_t j = 0; j < d; j++)
                        row_codes[j] = extreme ? (int8_t)(j % 2 ? 7 : -7) : (int8_t)((int)(test_rng_u32(&rng) % 15) - 7);
                    for (size_t g = 0; g < (d + 15) / 16; g++) shifts[g] = extreme ? 3 : (int)(test_rng_u32(&rng) % 4);
                    const float scale = ldexpf(test_rng_unit(&rng) + 0.5f, (int)(test_rng_u32(&rng) % 21) - 10);
                    memcpy(q4rows + p * q4_bytes, &scale, 4);
                    ref_pack_q4(d, row_codes, shifts, q4rows + p * q4_bytes + 4);
                }
                kvc_kernels_scalar.unpack_q4(n, d, q4rows, q8rows);
                fill_gaps(want, G, z_stride);
                kvc_kernels_scalar.scores_q8(G, n, d, codes, scales, q8rows, want, z_stride);
                CHECK(scores_of_every_set(&sets, 1, G, n, d, codes, scales, q4rows, want, got, z_stride));
            }
        }
    }
    free(codes);
    free(q4rows);
    free(q8rows);
    free(row_codes);
    free(shifts);
    free(want);
    free(got);
}

/* s = max(max|x| / code_max, 1e-30), codes = clamp(round_half_even(x / s), +-code_max). */
static float ref_quantize_query(size_t d, const float *x, float code_max, int16_t *codes) {
    float max_abs = 0.0f;
    for (size_t j = 0; j < d; j++)
        if (fabsf(x[j]) > max_abs) max_abs = fabsf(x[j]);
    float s = max_abs / code_max;
    if (s < 1e-30f) s = 1e-30f;
    for (size_t j = 0; j < d; j++) {
        float r = round_half_even(x[j] / s);
        if (r > code_max) r = code_max;
        if (r < -code_max) r = -code_max;
        codes[j] = (int16_t)r;
    }
    return s;
}

/* Queries as attend hands them over (q * c_K) and crafted ones: trials 0..4
 * of fill_row times a field, then a row of tiny values whose scale is the
 * floor (codes up to 1000), one of subnormals (all codes 0), one with
 * +-FLT_MAX, and a zero row. */
static void fill_query_row(test_rng *rng, float *x, size_t d, int trial) {
    if (trial < 5) {
        fill_row(rng, x, d, trial);
        for (size_t j = 0; j < d; j++) x[j] *= expf(2.0f * test_rng_normal(rng));
        return;
    }
    for (size_t j = 0; j < d; j++) {
        const float g = test_rng_normal(rng);
        switch (trial) {
        case 5: x[j] = j == d / 2 ? 1e-27f : g * 1e-28f; break;
        case 6: x[j] = g * FLT_TRUE_MIN * 64.0f; break;
        case 7: x[j] = j == 0 ? FLT_MAX : j == d - 1 ? -FLT_MAX : g * 1e37f; break;
        default: x[j] = (j % 2) ? -0.0f : 0.0f; break;
        }
    }
}
#define QUERY_TRIALS 9

TEST(quantize_query_should_give_the_bytes_of_its_definition_at_every_dim) {
    /* Both code sizes attend uses: the queries' and the value weights'. */
    static const float code_maxes[] = {KVC_QUERY_CODE_MAX, KVC_Q16_CODE_MAX};
    const kernel_sets sets = exact_kernels_to_check();
    test_rng rng = test_rng_new(22);
    float *x = test_alloc(MAX_Q8_D * sizeof(float));
    int16_t *want = test_alloc(MAX_Q8_D * sizeof(int16_t));
    int16_t *got = test_alloc((MAX_Q8_D + 1) * sizeof(int16_t));
    for (size_t i = 0; i < NUM_Q8_DIMS; i++) {
        const size_t d = q8_dims[i];
        for (int trial = 0; trial < 2 * QUERY_TRIALS; trial++) {
            const float code_max = code_maxes[trial % 2];
            fill_query_row(&rng, x, d, trial / 2);
            const float want_scale = ref_quantize_query(d, x, code_max, want);
            if (trial / 2 == 5) CHECK(want_scale == KVC_Q8_SCALE_FLOOR && want[d / 2] == 1000);
            for (size_t s = 0; s < sets.count; s++) {
                got[d] = 0x5555;
                const float scale = sets.set[s]->quantize_query(d, x, code_max, got);
                CHECK(memcmp(&scale, &want_scale, sizeof scale) == 0);
                CHECK(memcmp(got, want, d * sizeof(int16_t)) == 0);
                CHECK(got[d] == 0x5555); /* nothing written past d */
            }
        }
    }
    free(x);
    free(want);
    free(got);
}

TEST(quantize_query_should_round_ties_to_even_at_scale_one) {
    const kernel_sets sets = kernels_to_check();
    /* max |x| = 32767 makes the scale exactly 1: x / s lands on the halves. */
    static const float ties[8] = {-3.5f, -2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f, 32766.5f};
    static const int16_t even[8] = {-4, -2, -2, 0, 0, 2, 2, 32766};
    float x[MAX_D];
    int16_t codes[MAX_D];
    for (size_t s = 0; s < sets.count; s++) {
        for (size_t i = 0; i < NUM_DIMS; i++) {
            const size_t d = dims[i];
            x[0] = (i % 2) ? -32767.0f : 32767.0f;
            for (size_t j = 1; j < d; j++) x[j] = ties[j % 8];
            CHECK(sets.set[s]->quantize_query(d, x, KVC_Q16_CODE_MAX, codes) == 1.0f);
            CHECK(codes[0] == ((i % 2) ? -32767 : 32767));
            for (size_t j = 1; j < d; j++) CHECK(codes[j] == even[j % 8]);
        }
    }
}

TEST(quantize_query_should_give_nan_scale_and_zero_codes_for_nan_anywhere) {
    /* Weights of NaN scores (a query whose q * c overflowed): the sums they
     * scale must come out NaN, as f32 ones do, in every set alike. */
    const kernel_sets sets = kernels_to_check();
    float x[MAX_D];
    int16_t codes[MAX_D];
    for (size_t s = 0; s < sets.count; s++) {
        for (size_t i = 0; i < NUM_DIMS; i++) {
            const size_t d = dims[i];
            for (size_t at = 0; at < d; at += 1 + d / 5) {
                for (size_t j = 0; j < d; j++) x[j] = (float)j - 3.0f;
                x[at] = NAN;
                memset(codes, 0x55, sizeof codes);
                CHECK(isnan(sets.set[s]->quantize_query(d, x, at % 2 ? KVC_QUERY_CODE_MAX : KVC_Q16_CODE_MAX, codes)));
                for (size_t j = 0; j < d; j++) CHECK(codes[j] == 0);
            }
        }
    }
}

/* ---- weighted sums of rows ---- */

/* Rows per tile of the SIMD weighted sum (weighted-sum-f32-wasmsimd.c). */
static size_t simd_tile_rows(size_t d) {
    return 8192 / d < 8 ? 8 : 8192 / d;
}

/* out[g][j] += sum_p w[g][p] * rows[p][j], each element summed in row
 * order; a few row counts below, at and above the SIMD tile, and G = 1..6
 * (5 and 6 are a block of four and a rest). */
TEST(weighted_sum_f32_should_give_its_definition_bits_across_tiles) {
    const kernel_sets sets = kernels_to_check();
    test_rng rng = test_rng_new(23);
    for (size_t i = 0; i < NUM_DIMS; i++) {
        const size_t d = dims[i], tile = simd_tile_rows(d);
        const size_t counts[] = {1, 2, 7, 8, 9, 33, tile - 1, tile, tile + 3, 2 * tile + 1};
        for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
            const size_t n = counts[ci], w_stride = n + 5;
            float *w = test_alloc(MAX_G * w_stride * sizeof(float));
            float *rows = test_alloc(n * d * sizeof(float));
            float *out0 = test_alloc(MAX_G * d * sizeof(float));
            float *want = test_alloc(MAX_G * d * sizeof(float));
            float *got = test_alloc(MAX_G * d * sizeof(float));
            for (size_t gi = 0; gi < NUM_GROUP_SIZES; gi++) {
                const size_t G = group_sizes[gi];
                const int trial = (int)(ci + gi) % TRIALS;
                for (size_t k = 0; k < G * w_stride; k++) w[k] = test_rng_unit(&rng);
                for (size_t p = 0; p < n; p++) fill_row(&rng, rows + p * d, d, trial);
                fill_row(&rng, out0, G * d, 0);
                memcpy(want, out0, G * d * sizeof(float));
                for (size_t g = 0; g < G; g++)
                    for (size_t p = 0; p < n; p++)
                        for (size_t j = 0; j < d; j++)
                            want[g * d + j] += w[g * w_stride + p] * rows[p * d + j];
                for (size_t s = 0; s < sets.count; s++) {
                    memcpy(got, out0, G * d * sizeof(float));
                    sets.set[s]->weighted_sum_f32(G, n, d, w, w_stride, rows, got);
                    CHECK(test_bits_equal(got, want, G * d));
                }
            }
            free(w);
            free(rows);
            free(out0);
            free(want);
            free(got);
        }
    }
}

TEST(weighted_sum_q8_should_give_its_definition_bits_for_every_group_and_length) {
    const kernel_sets sets = exact_kernels_to_check();
    test_rng rng = test_rng_new(24);
    static const size_t counts[] = {1, 2, 3, 7, 64, KVC_Q8_SUM_ROWS};
    uint8_t *qrows = test_alloc(KVC_Q8_SUM_ROWS * (sizeof(float) + MAX_Q8_D));
    int16_t *w = test_alloc(MAX_G * (KVC_Q8_SUM_ROWS + 3) * sizeof(int16_t));
    float *out0 = test_alloc(MAX_G * MAX_Q8_D * sizeof(float));
    float *want = test_alloc(MAX_G * MAX_Q8_D * sizeof(float));
    float *got = test_alloc((MAX_G * MAX_Q8_D + 1) * sizeof(float));
    float scales[MAX_G];
    for (size_t i = 0; i < NUM_Q8_DIMS; i++) {
        const size_t d = q8_dims[i];
        for (size_t ni = 0; ni < sizeof counts / sizeof counts[0]; ni++) {
            const size_t n = counts[ni], w_stride = n + ni % 3;
            for (size_t gi = 0; gi < NUM_GROUP_SIZES; gi++) {
                const size_t G = group_sizes[gi];
                /* Codes at their extremes (+-127) in one case in three: the
                 * largest sums an i32 must hold. */
                fill_qrows(&rng, qrows, n, d, ni == 0);
                if (gi % 3 == 0) {
                    for (size_t p = 0; p < n; p++)
                        memset(qrows + p * (sizeof(float) + d) + sizeof(float), gi % 2 ? 0x81 : 0x7f, d);
                }
                for (size_t g = 0; g < G; g++) {
                    scales[g] = ldexpf(test_rng_unit(&rng) + 0.5f, (int)(g * 9) - 20);
                    for (size_t p = 0; p < w_stride; p++)
                        w[g * w_stride + p] = (int16_t)(gi % 3 == 0 ? 32767 : (int)(test_rng_u32(&rng) % 65535) - 32767);
                }
                test_fill_normal(&rng, out0, G * d);
                /* The definition: an exact integer sum, then one product and one add. */
                for (size_t g = 0; g < G; g++) {
                    for (size_t j = 0; j < d; j++) {
                        int64_t acc = 0;
                        for (size_t p = 0; p < n; p++)
                            acc += (int64_t)w[g * w_stride + p] * ((const int8_t *)(qrows + p * (sizeof(float) + d) + sizeof(float)))[j];
                        CHECK(acc >= INT32_MIN && acc <= INT32_MAX);
                        want[g * d + j] = out0[g * d + j] + (float)(int32_t)acc * scales[g];
                    }
                }
                for (size_t s = 0; s < sets.count; s++) {
                    memcpy(got, out0, G * d * sizeof(float));
                    got[G * d] = GAP_SENTINEL;
                    sets.set[s]->weighted_sum_q8(G, n, d, w, w_stride, scales, qrows, got);
                    CHECK(test_bits_equal(got, want, G * d));
                    CHECK(got[G * d] == GAP_SENTINEL);
                }
            }
        }
    }
    free(qrows);
    free(w);
    free(out0);
    free(want);
    free(got);
}

/* ---- softmax and its exponential ---- */

/* The softmax of kernels.h, row by row: e = kvc_exp_f32(z - max), the sum
 * in four lanes (p mod 4) added as (l0 + l1) + (l2 + l3), then e * (1 / sum);
 * max and sum reported. */
static void ref_softmax(size_t G, size_t n, float *z, size_t z_stride, float *max, float *sum) {
    for (size_t g = 0; g < G; g++) {
        float *row = z + g * z_stride;
        float m = row[0], lanes[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (size_t p = 1; p < n; p++) m = row[p] > m ? row[p] : m;
        for (size_t p = 0; p < n; p++) {
            row[p] = kvc_exp_f32(row[p] - m);
            lanes[p % 4] += row[p];
        }
        max[g] = m;
        sum[g] = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
        const float inverse = 1.0f / sum[g];
        for (size_t p = 0; p < n; p++) row[p] = row[p] * inverse;
    }
}

/* Scores in several regimes: flat, peaky, underflowing (the exp's zero
 * range), tied, far from zero, all equal; and spread over the exp's whole
 * range, [-100, 0]. */
static float score_in_regime(test_rng *rng, int regime, size_t p, size_t n) {
    const float x = test_rng_normal(rng);
    switch (regime % 7) {
    case 0: return x;
    case 1: return 30.0f * x;
    case 2: return 200.0f * x;
    case 3: return (float)(p % 3);
    case 4: return -1e4f + x;
    case 5: return 0.0f;
    default: return p == n / 2 ? 0.0f : -100.0f * test_rng_unit(rng);
    }
}

TEST(softmax_should_give_its_definition_bits_in_every_row) {
    const kernel_sets sets = kernels_to_check();
    static const size_t lengths[] = {1, 2, 3, 4, 5, 15, 16, 17, 64, 80, 128, 256, 1000};
    test_rng rng = test_rng_new(25);
    const size_t max_stride = 1000 + 5;
    float *z = test_alloc(MAX_G * max_stride * sizeof(float));
    float *want = test_alloc(MAX_G * max_stride * sizeof(float));
    float *got = test_alloc(MAX_G * max_stride * sizeof(float));
    float want_max[MAX_G], want_sum[MAX_G], got_max[MAX_G], got_sum[MAX_G];
    for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++) {
        const size_t n = lengths[i], z_stride = n + 1 + i % 5;
        for (size_t gi = 0; gi < NUM_GROUP_SIZES; gi++) {
            const size_t G = group_sizes[gi];
            fill_gaps(z, G, z_stride);
            for (size_t g = 0; g < G; g++) {
                for (size_t p = 0; p < n; p++)
                    z[g * z_stride + p] = score_in_regime(&rng, (int)(g + gi + i), p, n);
            }
            memcpy(want, z, G * z_stride * sizeof(float));
            ref_softmax(G, n, want, z_stride, want_max, want_sum);
            for (size_t s = 0; s < sets.count; s++) {
                memcpy(got, z, G * z_stride * sizeof(float));
                sets.set[s]->softmax(G, n, got, z_stride, got_max, got_sum);
                CHECK(memcmp(got, want, G * z_stride * sizeof(float)) == 0);
                CHECK(memcmp(got_max, want_max, G * sizeof(float)) == 0);
                CHECK(memcmp(got_sum, want_sum, G * sizeof(float)) == 0);
                CHECK(gaps_untouched(got, G, n, z_stride));
            }
            for (size_t g = 0; g < G; g++) {
                CHECK(want_sum[g] >= 1.0f); /* the max's own exponential is 1 */
                double total = 0.0;
                for (size_t p = 0; p < n; p++) {
                    const float w = want[g * z_stride + p];
                    CHECK(w >= 0.0f && w <= 1.0f);
                    total += w;
                }
                CHECK(fabs(total - 1.0) <= 1e-5);
            }
        }
    }
    free(z);
    free(want);
    free(got);
}

TEST(softmax_merge_should_give_its_definition_bits_and_weights_that_normalise) {
    const kernel_sets sets = kernels_to_check();
    static const size_t counts[] = {1, 2, 3, 4, 5, 7, 8, 9, 33};
    test_rng rng = test_rng_new(26);
    float max[33], sum[33], want[33], got[33];
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        const size_t S = counts[i];
        for (int regime = 0; regime < 7; regime++) {
            for (size_t s = 0; s < S; s++) {
                max[s] = score_in_regime(&rng, regime, s, S);
                sum[s] = 1.0f + 1000.0f * test_rng_unit(&rng);
            }
            /* The definition: M, exp(max_s - M) * sum_s, their total in
             * order, each divided by it. */
            float M = max[0], total = 0.0f;
            for (size_t s = 1; s < S; s++) M = max[s] > M ? max[s] : M;
            for (size_t s = 0; s < S; s++) {
                want[s] = kvc_exp_f32(max[s] - M) * sum[s];
                total += want[s];
            }
            for (size_t s = 0; s < S; s++) want[s] = want[s] / total;
            for (size_t k = 0; k < sets.count; k++) {
                sets.set[k]->softmax_merge(S, max, sum, got);
                CHECK(memcmp(got, want, S * sizeof(float)) == 0);
            }
            /* A convex combination; one segment's weight is exactly 1. */
            double mass = 0.0;
            for (size_t s = 0; s < S; s++) {
                CHECK(want[s] >= 0.0f && want[s] <= 1.0f);
                mass += want[s];
            }
            CHECK(fabs(mass - 1.0) <= 1e-5);
            if (S == 1) CHECK(want[0] == 1.0f);
        }
    }
}

TEST(scale_f32_should_give_scalar_bits_at_every_length) {
    const kernel_sets sets = kernels_to_check();
    test_rng rng = test_rng_new(27);
    float x[MAX_D], want[MAX_D], got[MAX_D];
    for (size_t i = 0; i < NUM_DIMS; i++) {
        const size_t n = dims[i];
        for (int trial = 0; trial < TRIALS; trial++) {
            fill_row(&rng, x, n, trial);
            const float a = ldexpf(test_rng_normal(&rng), trial * 7 - 20);
            for (size_t j = 0; j < n; j++) want[j] = x[j] * a;
            for (size_t s = 0; s < sets.count; s++) {
                memcpy(got, x, n * sizeof(float));
                sets.set[s]->scale_f32(n, a, got);
                CHECK(memcmp(got, want, n * sizeof(float)) == 0);
            }
        }
    }
}

/* silu(x) * up in double, the definition. */
static double swiglu_exact(float x, float up) {
    return (double)x / (1.0 + exp(-(double)x)) * (double)up;
}

TEST(swiglu_f32_should_be_within_4_ulp_of_silu_and_give_scalar_bits) {
    const kernel_sets sets = kernels_to_check();
    test_rng rng = test_rng_new(31);
    float gate[MAX_D], up[MAX_D], want[MAX_D], got[MAX_D];
    double worst = 0.0;
    for (size_t i = 0; i < NUM_DIMS; i++) {
        const size_t n = dims[i];
        for (int trial = 0; trial < TRIALS; trial++) {
            fill_row(&rng, gate, n, trial);
            for (size_t j = 0; j < n; j++) up[j] = test_rng_normal(&rng);
            memcpy(want, gate, n * sizeof(float));
            kvc_swiglu_f32__scalar(n, want, up);
            for (size_t j = 0; j < n; j++) {
                const double exact = swiglu_exact(gate[j], up[j]);
                if (gate[j] < KVC_EXP_MIN) { /* e^x below the normal floats: silu(x) under 1.1e-36 */
                    CHECK(want[j] == 0.0f && fabs(exact) < 1.1e-36 * fabs((double)up[j]));
                    continue;
                }
                if (fabs(exact) < FLT_MIN) {
                    CHECK(fabs((double)want[j] - exact) < 1e-37);
                    continue;
                }
                int exponent;
                frexp(exact, &exponent);
                const double err = fabs((double)want[j] - exact) / ldexp(1.0, exponent - 24);
                if (err > worst) worst = err;
            }
            for (size_t s = 0; s < sets.count; s++) {
                memcpy(got, gate, n * sizeof(float));
                sets.set[s]->swiglu_f32(n, got, up);
                CHECK(memcmp(got, want, n * sizeof(float)) == 0);
            }
        }
    }
    printf("  swiglu_f32 max error: %.3f ulp\n", worst);
    CHECK(worst <= 4.0);
    /* Far out on either side: x itself above, a zero of x's sign below (e^-|x| never
     * overflows); NaN for NaN and for -Inf, whose value is -Inf * 0. */
    static const float x[8] = {1e4f, INFINITY, -1e4f, -FLT_MAX, -0.0f, 0.0f, NAN, -INFINITY};
    for (size_t s = 0; s < sets.count; s++) {
        float g[8];
        const float ones[8] = {1, 1, 1, 1, 1, 1, 1, 1};
        memcpy(g, x, sizeof g);
        sets.set[s]->swiglu_f32(8, g, ones);
        CHECK(g[0] == 1e4f && g[1] == INFINITY);
        CHECK(g[2] == 0.0f && signbit(g[2]) && g[3] == 0.0f && signbit(g[3]));
        CHECK(g[4] == 0.0f && signbit(g[4]) && g[5] == 0.0f && !signbit(g[5]));
        CHECK(isnan(g[6]) && isnan(g[7]));
    }
}

/* Error of kvc_exp_f32(x) in units of the last place of the float nearest
 * e^x (double exp as the reference: its own error is far below 1e-6 ulp). */
static double exp_ulp_error(float x) {
    const double exact = exp((double)x);
    int exponent;
    frexp(exact, &exponent);
    const double ulp = ldexp(1.0, exponent - 24);
    return fabs((double)kvc_exp_f32(x) - exact) / ulp;
}

TEST(exp_f32_should_stay_within_2_5_ulp_and_give_zero_below_its_range) {
    test_rng rng = test_rng_new(26);
    /* Softmax arguments are <= 0; exp-f32.h also promises the bound up to 88. */
    static const float ranges[2][2] = {{-87.33f, 0.0f}, {0.0f, 88.0f}};
    double worst[2] = {0.0, 0.0};
    float worst_x[2] = {0.0f, 0.0f};
    const int steps = 1 << 20;
    for (int r = 0; r < 2; r++) {
        const float lo = ranges[r][0], hi = ranges[r][1];
        for (int i = 0; i <= steps + 4000; i++) {
            /* An even grid, then small arguments of every exponent down to 2^-40. */
            const float tiny = ldexpf(test_rng_unit(&rng), -(int)(test_rng_u32(&rng) % 40));
            const float x = i <= steps ? lo + (hi - lo) * (float)((double)i / steps)
                                       : (r ? tiny : -tiny);
            if (!(x >= lo && x <= hi)) continue;
            const double err = exp_ulp_error(x);
            if (err > worst[r]) {
                worst[r] = err;
                worst_x[r] = x;
            }
        }
    }
    printf("  kvc_exp_f32 max error: %.3f ulp on [-87.33, 0] (at %.9g), %.3f ulp on [0, 88] "
           "(at %.9g)\n", worst[0], (double)worst_x[0], worst[1], (double)worst_x[1]);
    CHECK(worst[0] <= 2.5);
    CHECK(worst[1] <= 2.5);
    CHECK(kvc_exp_f32(0.0f) == 1.0f);
    CHECK(kvc_exp_f32(-0.0f) == 1.0f);
    /* Below about -87.3365 e^x leaves the normal floats: exactly 0 there. */
    static const float below[] = {-87.34f, -87.35f, -88.0f, -100.0f, -1e4f, -FLT_MAX, -INFINITY};
    for (size_t i = 0; i < sizeof below / sizeof below[0]; i++)
        CHECK(kvc_exp_f32(below[i]) == 0.0f);
    for (float x = -87.34f; x > -87.5f; x = nextafterf(x, -INFINITY)) CHECK(kvc_exp_f32(x) == 0.0f);
    /* and above the cut, down to it, a positive normal float */
    for (float x = -87.33f; x >= KVC_EXP_MIN; x = nextafterf(x, -INFINITY))
        CHECK(kvc_exp_f32(x) >= FLT_MIN && kvc_exp_f32(x) < 1.2e-38f);
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

TEST(quantize_row_should_saturate_huge_ratio_and_read_back_finite) {
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
                CHECK(scale == 0x1p127f / 127.0f);
                CHECK(codes[at] == (int8_t)(sign * 127.0f));
                for (size_t j = 0; j < d; j++) CHECK(j == at || codes[j] == 0);
                /* The saturated channel reads back as 2^127 c, finite. */
                float back[MAX_D];
                sets.set[s]->dequantize_row(d, codes, scale, field, back);
                for (size_t j = 0; j < d; j++) CHECK(isfinite(back[j]));
                /* Even at the largest c that can saturate (x / c > 2^127 needs c < 2). */
                x[at] = sign * FLT_MAX;
                field[at] = 1.9999998f;
                const float top = sets.set[s]->quantize_row(d, x, field, codes);
                sets.set[s]->dequantize_row(d, codes, top, field, back);
                CHECK(isfinite(back[at]) && back[at] * sign > 3e38f);
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

static void fill_f32(test_rng *rng, float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = test_rng_normal(rng) * 0.5f;
}

TEST(delta_step_f32_should_give_its_definition_bits_in_every_set_also_in_place) {
    const kernel_sets sets = kernels_to_check();
    test_rng rng = test_rng_new(41);
    static float src[MAX_D * MAX_D], want[MAX_D * MAX_D], got[MAX_D * MAX_D];
    float k[MAX_D], q[MAX_D], v[MAX_D], d[MAX_D], want_out[MAX_D], got_out[MAX_D];
    static const size_t key_dims[] = {1, 4, 16, 17, 128};
    for (size_t ki = 0; ki < sizeof key_dims / sizeof key_dims[0]; ki++) {
        for (size_t i = 0; i < NUM_DIMS; i++) {
            const size_t dk = key_dims[ki], dv = dims[i];
            fill_f32(&rng, src, dk * dv);
            fill_f32(&rng, k, dk);
            fill_f32(&rng, q, dk);
            fill_f32(&rng, v, dv);
            const float alpha = 0.5f + 0.5f * test_rng_unit(&rng), beta = test_rng_unit(&rng);
            /* The definition, written out: d = beta (v - (alpha S)^T k), S' = alpha S + k d^T, out = S'^T q. */
            for (size_t j = 0; j < dv; j++) {
                float sk = 0.0f;
                for (size_t r = 0; r < dk; r++) sk = sk + (alpha * src[r * dv + j]) * k[r];
                const float dj = (v[j] - sk) * beta;
                float o = 0.0f;
                for (size_t r = 0; r < dk; r++) {
                    want[r * dv + j] = alpha * src[r * dv + j] + k[r] * dj;
                    o = o + want[r * dv + j] * q[r];
                }
                want_out[j] = o;
            }
            for (size_t s = 0; s < sets.count; s++) {
                sets.set[s]->delta_step_f32(dk, dv, alpha, beta, k, v, q, src, got, d, got_out);
                CHECK(memcmp(got, want, dk * dv * sizeof(float)) == 0);
                CHECK(memcmp(got_out, want_out, dv * sizeof(float)) == 0);
                memcpy(got, src, dk * dv * sizeof(float));
                sets.set[s]->delta_step_f32(dk, dv, alpha, beta, k, v, q, got, got, d, got_out);
                CHECK(memcmp(got, want, dk * dv * sizeof(float)) == 0);
                CHECK(memcmp(got_out, want_out, dv * sizeof(float)) == 0);
            }
        }
    }
}

TEST(ssm_step_f32_should_give_its_definition_bits_in_every_set_also_in_place) {
    const kernel_sets sets = exact_kernels_to_check();
    test_rng rng = test_rng_new(47);
    static float src[MAX_D * MAX_D], want[MAX_D * MAX_D], got[MAX_D * MAX_D];
    float x[MAX_D], B[MAX_D], C[MAX_D], want_out[MAX_D], got_out[MAX_D];
    static const size_t state_dims[] = {1, 4, 16, 17, 64, 128};
    for (size_t si = 0; si < sizeof state_dims / sizeof state_dims[0]; si++) {
        for (size_t i = 0; i < NUM_DIMS; i++) {
            const size_t ds = state_dims[si], dv = dims[i];
            fill_f32(&rng, src, ds * dv);
            fill_f32(&rng, x, dv);
            fill_f32(&rng, B, ds);
            fill_f32(&rng, C, ds);
            /* dA = exp(dt A) with A < 0 lies in (0, 1]; dt = softplus(.) > 0. */
            const float dA = 1.0f - 0.999f * test_rng_unit(&rng), dt = 0.01f + 2.0f * test_rng_unit(&rng);
            /* The definition, written out: S' = dA S + B (x dt)^T, out = S'^T C. */
            for (size_t j = 0; j < dv; j++) {
                const float xdt = x[j] * dt;
                float o = 0.0f;
                for (size_t r = 0; r < ds; r++) {
                    want[r * dv + j] = dA * src[r * dv + j] + B[r] * xdt;
                    o = o + want[r * dv + j] * C[r];
                }
                want_out[j] = o;
            }
            for (size_t s = 0; s < sets.count; s++) {
                sets.set[s]->ssm_step_f32(ds, dv, dA, dt, x, B, C, src, got, got_out);
                CHECK(memcmp(got, want, ds * dv * sizeof(float)) == 0);
                CHECK(memcmp(got_out, want_out, dv * sizeof(float)) == 0);
                memcpy(got, src, ds * dv * sizeof(float));
                sets.set[s]->ssm_step_f32(ds, dv, dA, dt, x, B, C, got, got, got_out);
                CHECK(memcmp(got, want, ds * dv * sizeof(float)) == 0);
                CHECK(memcmp(got_out, want_out, dv * sizeof(float)) == 0);
            }
        }
    }
}

TEST(conv_taps_f32_should_sum_taps_in_order_bit_for_bit) {
    const kernel_sets sets = kernels_to_check();
    test_rng rng = test_rng_new(43);
    static float x[4 * MAX_D], w[4 * MAX_D];
    float want[MAX_D], got[MAX_D];
    for (size_t K = 2; K <= 4; K++) {
        for (size_t i = 0; i < NUM_DIMS; i++) {
            const size_t C = dims[i];
            fill_f32(&rng, x, K * C);
            fill_f32(&rng, w, K * C);
            for (size_t c = 0; c < C; c++) {
                float acc = 0.0f;
                for (size_t t = 0; t < K; t++) acc = acc + x[t * C + c] * w[t * C + c];
                want[c] = acc;
            }
            for (size_t s = 0; s < sets.count; s++) {
                sets.set[s]->conv_taps_f32(C, K, x, w, got);
                CHECK(memcmp(got, want, C * sizeof(float)) == 0);
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

/* The relaxed weighted sum: fused multiply-adds in row order, so within
 * rounding of the sum (n u |terms| each way) and, whatever G, each query's
 * bits alone. */
TEST(relaxed_weighted_sum_f32_should_agree_to_rounding_and_give_each_query_its_own_bits) {
    const kvc_kernels *relaxed = relaxed_set();
    if (!relaxed) return;
    test_rng rng = test_rng_new(31);
    for (size_t i = 0; i < NUM_DIMS; i++) {
        const size_t d = dims[i];
        const size_t counts[] = {1, 7, 33, 300};
        for (size_t ci = 0; ci < 4; ci++) {
            const size_t n = counts[ci], G = 5;
            float *w = test_alloc(G * n * sizeof(float)), *rows = test_alloc(n * d * sizeof(float));
            float *all = test_alloc(G * d * sizeof(float)), *one = test_alloc(d * sizeof(float));
            for (size_t k = 0; k < G * n; k++) w[k] = test_rng_unit(&rng);
            for (size_t p = 0; p < n; p++) fill_row(&rng, rows + p * d, d, (int)ci);
            memset(all, 0, G * d * sizeof(float));
            relaxed->weighted_sum_f32(G, n, d, w, n, rows, all);
            for (size_t g = 0; g < G; g++) {
                memset(one, 0, d * sizeof(float));
                relaxed->weighted_sum_f32(1, n, d, w + g * n, n, rows, one);
                CHECK(test_bits_equal(one, all + g * d, d));
                for (size_t j = 0; j < d; j++) {
                    double exact = 0.0, magnitude = 0.0;
                    for (size_t p = 0; p < n; p++) {
                        exact += (double)w[g * n + p] * rows[p * d + j];
                        magnitude += fabs((double)w[g * n + p] * rows[p * d + j]);
                    }
                    CHECK(fabs(one[j] - exact) <= (double)(n + 2) * FLT_EPSILON * magnitude + 1e-37);
                }
            }
            free(w);
            free(rows);
            free(all);
            free(one);
        }
    }
}

RUN_TESTS(CASE(kernel_isa_should_be_wasm_simd128_in_wasm_builds_and_scalar_natively),
          CASE(kernel_tables_should_fill_every_operation),
          CASE(quantize_row_should_give_the_bytes_of_its_definition_at_every_dim),
          CASE(quantize_row_q4_should_give_the_bytes_of_its_definition_at_every_dim),
          CASE(unpack_q4_should_give_every_code_times_its_group_shift_and_the_scale),
          CASE(quantize_row_q4_should_round_ties_to_even_and_keep_codes_within_7),
          CASE(dequantize_row_should_give_scalar_bits_at_every_dim),
          CASE(mul_f32_should_give_scalar_bits_also_in_place),
          CASE(all_finite_should_match_scalar_on_finite_rows),
          CASE(all_finite_should_reject_nan_and_inf_at_every_index),
          CASE(scores_f32_should_agree_with_exact_scores_to_rounding),
          CASE(scores_f32_should_give_each_query_the_same_bits_whatever_g_and_n),
          CASE(scores_q8_should_give_the_bits_of_its_definition_without_overflow),
          CASE(scores_q4_should_give_the_bits_of_scores_q8_over_its_unpacked_rows),
          CASE(relaxed_scores_f32_should_agree_with_exact_scores_to_rounding),
          CASE(relaxed_weighted_sum_f32_should_agree_to_rounding_and_give_each_query_its_own_bits),
          CASE(quantize_query_should_give_the_bytes_of_its_definition_at_every_dim),
          CASE(quantize_query_should_round_ties_to_even_at_scale_one),
          CASE(quantize_query_should_give_nan_scale_and_zero_codes_for_nan_anywhere),
          CASE(weighted_sum_f32_should_give_its_definition_bits_across_tiles),
          CASE(weighted_sum_q8_should_give_its_definition_bits_for_every_group_and_length),
          CASE(softmax_should_give_its_definition_bits_in_every_row),
          CASE(softmax_merge_should_give_its_definition_bits_and_weights_that_normalise),
          CASE(scale_f32_should_give_scalar_bits_at_every_length),
          CASE(swiglu_f32_should_be_within_4_ulp_of_silu_and_give_scalar_bits),
          CASE(exp_f32_should_stay_within_2_5_ulp_and_give_zero_below_its_range),
          CASE(quantize_row_should_round_ties_to_even),
          CASE(quantize_row_should_give_floor_scale_and_zero_codes_for_zero_row),
          CASE(quantize_row_should_saturate_huge_ratio_and_read_back_finite),
          CASE(linear_update_f64_should_give_its_definition_bits_also_in_place),
          CASE(linear_read_f64_should_sum_features_in_order_bit_for_bit),
          CASE(delta_step_f32_should_give_its_definition_bits_in_every_set_also_in_place),
          CASE(ssm_step_f32_should_give_its_definition_bits_in_every_set_also_in_place),
          CASE(conv_taps_f32_should_sum_taps_in_order_bit_for_bit))
