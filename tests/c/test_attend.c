/*
 * test_attend.c -- attention over a layer's rows: the f32 path against
 * kvc_attention_head and against a double-precision reference, the q8 modes
 * against the f32 path (measured error, honest bound) and against their own
 * definition, and the edges (empty heads, bad queries, probs NULL).
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

/* Largest relative error (test_rel_error: max |diff| / max |f32 out|) of
 * attend in a quantized mode against f32 attend over the same rows, on the
 * outlier-channel keys of test_fill_keys with normal values and standard
 * normal queries, per shape: H = 4 at 4096 positions (16 queries per head),
 * H = 2 at every length 65..300 (one query per head and length).  Each bound
 * sits a little above what this test measures and prints (native and wasm).
 * The key error is not small on this data: a row's scale follows its largest
 * |x/c|, so the outlier channels (c ~ 10..30) get coarse steps, and the RoPE
 * rotation slowly moves outlier energy into channels whose window field was
 * small, which raises that scale further at late positions (it is what sets
 * d = 64 apart: its outlier pairs turn slowly; with the rotation taken out
 * of the keys, d = 64 at 4096 measures about as d = 128).  q8v carries the
 * value error only. */
typedef struct attend_bound {
    kvc_mode mode;
    const char *name;
    double d64_long, d128_long, d64_short, d128_short;
} attend_bound;

static const attend_bound Q8_ATTEND_BOUND = {KVC_MODE_Q8, "q8", 0.45, 0.05, 0.12, 0.06};
static const attend_bound Q8K_ATTEND_BOUND = {KVC_MODE_Q8K, "q8k", 0.45, 0.05, 0.125, 0.06};
static const attend_bound Q8V_ATTEND_BOUND = {KVC_MODE_Q8V, "q8v", 0.014, 0.016, 0.012, 0.013};

/* A quantized layer's attend against double-precision attention over its own
 * dequantized rows (head_keys / head_values): the same math, so with int8
 * keys and values f32 rounding and the integer paths' codings separate them.
 * f32 keys and int8 values: the i16 step of the weights (pi_p s_p, coded per
 * tile of rows for the integer sums, src/core/segment.c), measured 1.8e-4.
 * Quantized keys add the 14-bit step of q~ = q * c_K (KVC_QUERY_CODE_MAX):
 * measured up to 2.6e-3 here (q8k), on normal queries at d = 16, where a few channels
 * carry q~; what that costs against f32, beside the rows' own error, is
 * attend_quantized_should_add_at_most_5_percent_to_the_error_of_exact_q_against_f32's
 * to check (a few thousandths of it). */
#define DEQUANTIZED_REFERENCE_BOUND 1e-5
#define DEQUANTIZED_VALUES_BOUND 3e-4
#define DEQUANTIZED_KEYS_BOUND 5e-3

/* f32 attend against double-precision attention over the appended rows
 * (normal queries; logits of a few units). */
#define F32_REFERENCE_BOUND 1e-5

/* The q8 key path against its definition (DESIGN.md section 1): the most
 * a faster kernel may cost. */
#define Q8_KEY_DEFINITION_BOUND 1e-3

/* Softmax attention in double: z_p = q.k_p / sqrt(d), out = sum_p pi_p v_p. */
static void reference_attention(const float *q, const float *keys, const float *values, size_t n,
                                size_t d, float *out, double *probs) {
    double max = -INFINITY, sum = 0.0;
    for (size_t p = 0; p < n; p++) {
        double z = 0.0;
        for (size_t j = 0; j < d; j++) z += (double)q[j] * (double)keys[p * d + j];
        probs[p] = z / sqrt((double)d);
        if (probs[p] > max) max = probs[p];
    }
    for (size_t p = 0; p < n; p++) {
        probs[p] = exp(probs[p] - max);
        sum += probs[p];
    }
    for (size_t j = 0; j < d; j++) {
        double acc = 0.0;
        for (size_t p = 0; p < n; p++) acc += probs[p] / sum * (double)values[p * d + j];
        out[j] = (float)acc;
    }
    for (size_t p = 0; p < n; p++) probs[p] /= sum;
}

/* Rows of head h as the layer returns them, in buffers the caller frees. */
static size_t head_rows(const kvc_layer *layer, size_t h, float **keys, float **values) {
    const size_t n = kvc_layer_head_len(layer, h), d = kvc_layer_head_dim(layer);
    *keys = test_alloc(n * d * sizeof(float));
    *values = test_alloc(n * d * sizeof(float));
    if (kvc_layer_head_keys(layer, h, *keys, n * d) != KVC_OK ||
        kvc_layer_head_values(layer, h, *values, n * d) != KVC_OK) {
        free(*keys);
        free(*values);
        *keys = *values = NULL;
    }
    return n;
}

/* A query that either looks like a key (outlier channels, peaky attention)
 * or is plain normal (diffuse attention). */
static void fill_query(test_rng *rng, float *q, size_t position, size_t d, int key_like) {
    if (key_like) test_fill_keys(rng, q, 1, position, 1, d);
    else test_fill_normal(rng, q, d);
}

/* ---- f32 ---- */

TEST(attend_f32_should_equal_attention_head_over_head_rows_bit_for_bit) {
    static const size_t dims[] = {8, 64, 80, 128, 256};
    static const size_t heads[] = {1, 4, 8};
    static const size_t lengths[] = {1, 2, 17, 64, 65, 130};
    test_rng rng = test_rng_new(31);
    float q[256], out[256], want_out[256], probs[130], want_probs[130];
    for (size_t di = 0; di < 5; di++) {
        for (size_t hi = 0; hi < 3; hi++) {
            const size_t d = dims[di], H = heads[hi];
            test_data data = test_data_make(100 + di * 3 + hi, 130, H, d, (di + hi) % 2);
            kvc_layer *layer;
            CHECK_OK(kvc_layer_create(H, d, KVC_MODE_F32, &layer));
            size_t len = 0;
            for (size_t li = 0; li < 6; li++) {
                CHECK_OK(test_data_append(layer, &data, len, lengths[li] - len));
                len = lengths[li];
                for (size_t h = 0; h < H; h++) {
                    float *keys, *values;
                    const size_t n = head_rows(layer, h, &keys, &values);
                    CHECK(keys != NULL);
                    fill_query(&rng, q, len, d, (int)(h % 2));
                    CHECK_OK(kvc_layer_attend(layer, q, h, out, probs));
                    CHECK_OK(kvc_attention_head(q, keys, values, n, d, want_out, want_probs));
                    CHECK(test_bits_equal(out, want_out, d));
                    CHECK(test_bits_equal(probs, want_probs, n));
                    free(keys);
                    free(values);
                }
            }
            kvc_layer_free(layer);
            test_data_free(&data);
        }
    }
}

TEST(attend_f32_should_match_double_precision_reference) {
    static const size_t dims[] = {8, 64, 80, 128, 256};
    static const size_t lengths[] = {1, 7, 64, 200};
    test_rng rng = test_rng_new(32);
    float q[256], out[256], want_out[256], probs[200];
    double want_probs[200];
    double worst = 0.0, worst_probs = 0.0;
    for (size_t di = 0; di < 5; di++) {
        const size_t d = dims[di], H = 4;
        test_data data = test_data_make(200 + di, 200, H, d, 1);
        kvc_layer *layer;
        CHECK_OK(kvc_layer_create(H, d, KVC_MODE_F32, &layer));
        size_t len = 0;
        for (size_t li = 0; li < 4; li++) {
            CHECK_OK(test_data_append(layer, &data, len, lengths[li] - len));
            len = lengths[li];
            float *keys = test_alloc(len * d * sizeof(float));
            float *values = test_alloc(len * d * sizeof(float));
            for (size_t h = 0; h < H; h++) {
                /* Reference over the rows as appended, not as read back. */
                const size_t n = test_data_head(&data, len, h, 0, keys, NULL);
                test_data_head(&data, len, h, 1, values, NULL);
                for (int i = 0; i < 2; i++) {
                    test_fill_normal(&rng, q, d);
                    CHECK_OK(kvc_layer_attend(layer, q, h, out, probs));
                    if (n == 0) continue;
                    reference_attention(q, keys, values, n, d, want_out, want_probs);
                    const double err = test_rel_error(out, want_out, d);
                    worst = err > worst ? err : worst;
                    for (size_t p = 0; p < n; p++) {
                        const double perr = fabs(probs[p] - want_probs[p]);
                        worst_probs = perr > worst_probs ? perr : worst_probs;
                    }
                }
            }
            free(keys);
            free(values);
        }
        kvc_layer_free(layer);
        test_data_free(&data);
    }
    printf("  f32 attend vs double reference: out %.3g, probs (absolute) %.3g\n", worst,
           worst_probs);
    CHECK(worst <= F32_REFERENCE_BOUND);
    CHECK(worst_probs <= F32_REFERENCE_BOUND);
}

/* ---- quantized modes against f32 ---- */

/* Max relative error of attend in `mode` against f32 attend over the same
 * rows: every head at every length first_len..last_len, `queries` standard
 * normal queries per head and length. */
static double measure_attend_error(kvc_mode mode, size_t H, size_t d, size_t first_len,
                                   size_t last_len, size_t queries, uint64_t seed) {
    test_data data = test_data_make(seed, last_len, H, d, 0);
    test_rng rng = test_rng_new(seed + 1);
    kvc_layer *exact = NULL, *quantized = NULL;
    double worst = INFINITY; /* stays so if anything fails */
    float *q = test_alloc(d * sizeof(float));
    float *want = test_alloc(d * sizeof(float));
    float *got = test_alloc(d * sizeof(float));
    exact = test_layer_with(&data, first_len, KVC_MODE_F32);
    quantized = test_layer_with(&data, first_len, mode);
    if (!exact || !quantized) goto done;
    worst = 0.0;
    for (size_t len = first_len; len <= last_len; len++) {
        if (len > first_len && (test_data_append(exact, &data, len - 1, 1) != KVC_OK ||
                                test_data_append(quantized, &data, len - 1, 1) != KVC_OK)) {
            worst = INFINITY;
            break;
        }
        for (size_t h = 0; h < H; h++) {
            for (size_t i = 0; i < queries; i++) {
                test_fill_normal(&rng, q, d);
                if (kvc_layer_attend(exact, q, h, want, NULL) != KVC_OK ||
                    kvc_layer_attend(quantized, q, h, got, NULL) != KVC_OK) {
                    worst = INFINITY;
                    goto done;
                }
                const double err = test_rel_error(got, want, d);
                if (!(err <= worst)) worst = err;
            }
        }
    }
done:
    kvc_layer_free(exact);
    kvc_layer_free(quantized);
    test_data_free(&data);
    free(q);
    free(want);
    free(got);
    return worst;
}

/* Measures the mode against f32 in the four shapes, prints, checks. */
static int attend_error_within(const attend_bound *bound) {
    const double d64_long = measure_attend_error(bound->mode, 4, 64, 4096, 4096, 16, 41);
    const double d128_long = measure_attend_error(bound->mode, 4, 128, 4096, 4096, 16, 42);
    const double d64_short = measure_attend_error(bound->mode, 2, 64, 65, 300, 1, 43);
    const double d128_short = measure_attend_error(bound->mode, 2, 128, 65, 300, 1, 44);
    printf("  %s attend vs f32, max relative error (bound): d=64 L=4096 %.3g (%.3g), "
           "d=128 L=4096 %.3g (%.3g), d=64 L=65..300 %.3g (%.3g), d=128 L=65..300 %.3g (%.3g)\n",
           bound->name, d64_long, bound->d64_long, d128_long, bound->d128_long, d64_short,
           bound->d64_short, d128_short, bound->d128_short);
    return d64_long <= bound->d64_long && d128_long <= bound->d128_long &&
           d64_short <= bound->d64_short && d128_short <= bound->d128_short;
}

TEST(attend_q8_should_stay_within_bound_of_f32_on_outlier_keys) {
    CHECK(attend_error_within(&Q8_ATTEND_BOUND));
}

TEST(attend_q8k_should_stay_within_bound_of_f32_on_outlier_keys) {
    CHECK(attend_error_within(&Q8K_ATTEND_BOUND));
}

TEST(attend_q8v_should_stay_within_bound_of_f32_on_outlier_keys) {
    CHECK(attend_error_within(&Q8V_ATTEND_BOUND));
}

/* ---- quantized modes against their definition ---- */

TEST(attend_quantized_should_match_double_attention_over_dequantized_rows) {
    static const size_t dims[] = {16, 64, 128};
    test_rng rng = test_rng_new(33);
    float q[128], out[128], want_out[128], probs[300];
    double want_probs[300];
    for (size_t mi = 0; mi < TEST_QUANTIZED_MODE_COUNT; mi++) {
        double worst = 0.0;
        for (size_t di = 0; di < 3; di++) {
            const size_t d = dims[di], H = 4;
            test_data data = test_data_make(300 + mi * 3 + di, 300, H, d, 1);
            kvc_layer *layer = test_layer_with(&data, 300, test_quantized_modes[mi]);
            CHECK(layer != NULL);
            for (size_t h = 0; h < H; h++) {
                float *keys, *values;
                const size_t n = head_rows(layer, h, &keys, &values);
                CHECK(keys != NULL);
                for (int i = 0; i < 8; i++) {
                    test_fill_normal(&rng, q, d);
                    CHECK_OK(kvc_layer_attend(layer, q, h, out, probs));
                    if (n == 0) continue;
                    reference_attention(q, keys, values, n, d, want_out, want_probs);
                    const double err = test_rel_error(out, want_out, d);
                    worst = err > worst ? err : worst;
                }
                free(keys);
                free(values);
            }
            kvc_layer_free(layer);
            test_data_free(&data);
        }
        printf("  mode %d attend vs double over dequantized rows: %.3g\n",
               (int)test_quantized_modes[mi], worst);
        const kvc_mode mode = test_quantized_modes[mi];
        CHECK(worst <= (test_mode_quantizes(mode, 0)   ? DEQUANTIZED_KEYS_BOUND
                        : test_mode_quantizes(mode, 1) ? DEQUANTIZED_VALUES_BOUND
                                                       : DEQUANTIZED_REFERENCE_BOUND));
    }
}

/* ---- the integer key path against f32, beside the exact-q~ definition ---- */

/* Errors (test_rel_error) against f32 attend over the same appended rows, of
 * attend in a quantized mode and of its definition with q~ exact: f32
 * attention_head over the rows as stored (head_keys / head_values, x_p =
 * (r_p s_p) c, the exact product q . x_p).  What the key path's coding of q~
 * adds is their difference. */
typedef struct coding_error {
    double mode_mean, mode_worst; /* attend in the mode */
    double exact_mean, exact_worst; /* the definition with q~ exact */
} coding_error;

/* On the outlier keys of test_fill_keys at head dim d, len positions, H = 4
 * heads, 16 queries per head: key-like ones (outlier channels where the
 * keys have theirs, scaled to logits of a few units: peaky attention, and
 * q~ = q * c_K with a few channels far above the others) and normal ones. */
static coding_error measure_coding_error(kvc_mode mode, size_t d, size_t len, uint64_t seed) {
    const size_t H = 4;
    coding_error e = {INFINITY, INFINITY, INFINITY, INFINITY}; /* stays so if anything fails */
    test_data data = test_data_make(seed, len, H, d, 0);
    test_rng rng = test_rng_new(seed);
    kvc_layer *layer = test_layer_with(&data, len, mode), *f32 = test_layer_with(&data, len, KVC_MODE_F32);
    float *q = test_alloc(d * sizeof(float)), *out = test_alloc(d * sizeof(float));
    float *exact = test_alloc(d * sizeof(float)), *want = test_alloc(d * sizeof(float));
    double sum_mode = 0.0, sum_exact = 0.0;
    size_t count = 0;
    if (!layer || !f32) goto done;
    e.mode_worst = e.exact_worst = 0.0;
    for (size_t h = 0; h < H; h++) {
        float *keys, *values;
        const size_t n = head_rows(layer, h, &keys, &values);
        for (int i = 0; i < 16 && keys; i++) {
            fill_query(&rng, q, len, d, i % 2);
            if (i % 2)
                for (size_t j = 0; j < d; j++) q[j] *= 0.05f;
            if (kvc_layer_attend(layer, q, h, out, NULL) != KVC_OK ||
                kvc_layer_attend(f32, q, h, want, NULL) != KVC_OK ||
                kvc_attention_head(q, keys, values, n, d, exact, NULL) != KVC_OK) {
                e.mode_worst = e.exact_worst = INFINITY;
                break;
            }
            const double err = test_rel_error(out, want, d), err_exact = test_rel_error(exact, want, d);
            sum_mode += err;
            sum_exact += err_exact;
            count++;
            if (!(err <= e.mode_worst)) e.mode_worst = err;
            if (!(err_exact <= e.exact_worst)) e.exact_worst = err_exact;
        }
        free(keys);
        free(values);
    }
    e.mode_mean = count ? sum_mode / (double)count : INFINITY;
    e.exact_mean = count ? sum_exact / (double)count : INFINITY;
done:
    kvc_layer_free(layer);
    kvc_layer_free(f32);
    test_data_free(&data);
    free(q);
    free(out);
    free(exact);
    free(want);
    return e;
}

/* DESIGN.md section 1: the key path may code q~ in fewer bits (and a value
 * sum its weights) as long as the attention error against f32 stays within
 * 1.05x that of the definition with q~ exact, on the outlier keys at d = 128.
 * Checked per mode with quantized keys or values, mean and worst, at d =
 * 128 and 64 (and 600: a full i32 block of KVC_Q8_DOT_BLOCK channels and a
 * tail); 300 positions (236 quantized rows, 64 of them q4's window). */
TEST(attend_quantized_should_add_at_most_5_percent_to_the_error_of_exact_q_against_f32) {
    static const size_t dims[] = {128, 64, 600};
    static const kvc_mode modes[] = {KVC_MODE_Q8, KVC_MODE_Q8K, KVC_MODE_Q8V, KVC_MODE_Q4, KVC_MODE_Q4K,
                                     KVC_MODE_Q4V, KVC_MODE_Q8K_Q4V};
    static const char *const names[] = {"q8", "q8k", "q8v", "q4", "q4k", "q4v", "q8k+q4v"};
    double q8_mean = 0.0;
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++) {
        for (size_t mi = 0; mi < sizeof modes / sizeof modes[0]; mi++) {
            const coding_error e = measure_coding_error(modes[mi], dims[di], 300, 900 + di * 8 + mi);
            /* 4-bit keys against 8-bit ones at d = 128, what README says to
             * expect: measured 13.6x (issue 23 hoped for 4x; a 4-bit code's
             * steps are 18x an 8-bit one's). */
            if (dims[di] == 128 && modes[mi] == KVC_MODE_Q8) q8_mean = e.mode_mean;
            if (dims[di] == 128 && modes[mi] == KVC_MODE_Q4) {
                printf("  d=128 q4 mean error / q8's: %.3g\n", e.mode_mean / q8_mean);
                CHECK(e.mode_mean <= 16.0 * q8_mean);
            }
            printf("  d=%zu %s vs f32, mean / worst: %.4g / %.4g; exact q~: %.4g / %.4g (ratio %.4f / %.4f)\n",
                   dims[di], names[mi], e.mode_mean, e.mode_worst, e.exact_mean, e.exact_worst,
                   e.mode_mean / e.exact_mean, e.mode_worst / e.exact_worst);
            CHECK(e.mode_mean <= 1.05 * e.exact_mean);
            CHECK(e.mode_worst <= 1.05 * e.exact_worst);
        }
    }
}

/* ---- probabilities and edges ---- */

TEST(attend_should_give_nonnegative_probs_that_sum_to_one) {
    test_rng rng = test_rng_new(34);
    float q[64], out[64], probs[200];
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        test_data data = test_data_make(400 + mi, 200, 5, 64, 1);
        kvc_layer *layer = test_layer_with(&data, 200, test_modes[mi]);
        CHECK(layer != NULL);
        for (size_t h = 0; h < 5; h++) {
            const size_t n = kvc_layer_head_len(layer, h);
            for (int i = 0; i < 4; i++) {
                fill_query(&rng, q, 200, 64, i % 2);
                if (i == 3)
                    for (size_t j = 0; j < 64; j++) q[j] *= 50.0f; /* very peaky */
                CHECK_OK(kvc_layer_attend(layer, q, h, out, probs));
                double sum = 0.0;
                for (size_t p = 0; p < n; p++) {
                    CHECK(probs[p] >= 0.0f && probs[p] <= 1.0f);
                    sum += probs[p];
                }
                if (n) CHECK(fabs(sum - 1.0) <= 1e-5);
            }
        }
        kvc_layer_free(layer);
        test_data_free(&data);
    }
}

TEST(attend_should_give_zeros_and_no_probs_for_empty_head) {
    test_rng rng = test_rng_new(35);
    float q[32], out[32], probs[4];
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        /* Head 3 is never alive in the scripted masks. */
        test_data data = test_data_make(500 + mi, 100, 4, 32, 1);
        kvc_layer *layer = test_layer_with(&data, 0, test_modes[mi]);
        CHECK(layer != NULL);
        for (int stage = 0; stage < 2; stage++) {
            /* stage 0: a fresh layer (every head empty); stage 1: head 3 after 100 appends */
            if (stage == 1) CHECK_OK(test_data_append(layer, &data, 0, 100));
            const size_t h = 3;
            CHECK(kvc_layer_head_len(layer, h) == 0);
            test_fill_normal(&rng, q, 32);
            for (size_t j = 0; j < 32; j++) out[j] = NAN;
            for (size_t p = 0; p < 4; p++) probs[p] = -7.0f;
            CHECK_OK(kvc_layer_attend(layer, q, h, out, probs));
            for (size_t j = 0; j < 32; j++) CHECK(out[j] == 0.0f);
            for (size_t p = 0; p < 4; p++) CHECK(probs[p] == -7.0f);
            for (size_t j = 0; j < 32; j++) out[j] = NAN;
            CHECK_OK(kvc_layer_attend(layer, q, h, out, NULL));
            for (size_t j = 0; j < 32; j++) CHECK(out[j] == 0.0f);
        }
        kvc_layer_free(layer);
        test_data_free(&data);
    }
}

/* A normal query with one element made non-finite: element k / 3 becomes
 * NaN, +Inf or -Inf as k % 3 says, for k in [0, 3d). */
static void fill_nonfinite_query(test_rng *rng, float *q, size_t d, size_t k) {
    test_fill_normal(rng, q, d);
    q[k / 3] = test_nonfinite[k % 3];
}

TEST(attend_should_refuse_nonfinite_query) {
    test_rng rng = test_rng_new(36);
    float q[17], out[17], probs[80];
    test_data data = test_data_make(600, 80, 2, 17, 0);
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        kvc_layer *layer = test_layer_with(&data, 80, test_modes[mi]);
        CHECK(layer != NULL);
        for (size_t k = 0; k < 3 * 17; k++) {
            fill_nonfinite_query(&rng, q, 17, k);
            for (size_t j = 0; j < 17; j++) out[j] = 5.0f;
            CHECK_STATUS(kvc_layer_attend(layer, q, 1, out, probs), KVC_E_NONFINITE_QUERY);
            CHECK_STATUS(kvc_layer_attend(layer, q, 1, out, NULL), KVC_E_NONFINITE_QUERY);
            for (size_t j = 0; j < 17; j++) CHECK(out[j] == 5.0f);
        }
        kvc_layer_free(layer);
    }
    test_data_free(&data);
}

TEST(attention_head_should_refuse_nonfinite_query) {
    test_rng rng = test_rng_new(37);
    float q[20], keys[5 * 20], values[5 * 20], out[20], probs[5];
    test_fill_normal(&rng, keys, 100);
    test_fill_normal(&rng, values, 100);
    for (size_t k = 0; k < 3 * 20; k++) {
        fill_nonfinite_query(&rng, q, 20, k);
        CHECK_STATUS(kvc_attention_head(q, keys, values, 5, 20, out, probs),
                     KVC_E_NONFINITE_QUERY);
        CHECK_STATUS(kvc_attention_head(q, keys, values, 0, 20, out, NULL),
                     KVC_E_NONFINITE_QUERY);
    }
}

TEST(attention_head_should_give_zeros_for_no_rows) {
    test_rng rng = test_rng_new(38);
    float q[24], out[24], probs[1] = {-3.0f};
    test_fill_normal(&rng, q, 24);
    for (size_t j = 0; j < 24; j++) out[j] = NAN;
    CHECK_OK(kvc_attention_head(q, NULL, NULL, 0, 24, out, probs));
    for (size_t j = 0; j < 24; j++) CHECK(out[j] == 0.0f);
    CHECK(probs[0] == -3.0f);
    for (size_t j = 0; j < 24; j++) out[j] = NAN;
    CHECK_OK(kvc_attention_head(q, NULL, NULL, 0, 24, out, NULL));
    for (size_t j = 0; j < 24; j++) CHECK(out[j] == 0.0f);
}

TEST(attention_head_should_refuse_bad_arguments) {
    float q[4] = {1, 2, 3, 4}, keys[8] = {0}, values[8] = {0}, out[4];
    CHECK_STATUS(kvc_attention_head(NULL, keys, values, 2, 4, out, NULL), KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_attention_head(q, NULL, values, 2, 4, out, NULL), KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_attention_head(q, keys, NULL, 2, 4, out, NULL), KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_attention_head(q, keys, values, 2, 4, NULL, NULL), KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_attention_head(q, keys, values, 2, 0, out, NULL), KVC_E_HEAD_DIM);
    CHECK_STATUS(kvc_attention_head(q, keys, values, 2, KVC_MAX_HEAD_DIM + 1, out, NULL),
                 KVC_E_HEAD_DIM);
}

TEST(attend_should_refuse_bad_arguments) {
    float q[8] = {0}, out[8];
    kvc_layer *layer;
    CHECK_OK(kvc_layer_create(2, 8, KVC_MODE_Q8, &layer));
    CHECK_STATUS(kvc_layer_attend(NULL, q, 0, out, NULL), KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_layer_attend(layer, NULL, 0, out, NULL), KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_layer_attend(layer, q, 0, NULL, NULL), KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_layer_attend(layer, q, 2, out, NULL), KVC_E_KV_HEAD);
    CHECK_STATUS(kvc_layer_attend(layer, q, (size_t)-1, out, NULL), KVC_E_KV_HEAD);
    kvc_layer_free(layer);
}

TEST(attend_without_probs_should_give_the_same_out) {
    test_rng rng = test_rng_new(39);
    float q[80], with[80], without[80], probs[150];
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        test_data data = test_data_make(700 + mi, 150, 3, 80, 1);
        kvc_layer *layer = test_layer_with(&data, 150, test_modes[mi]);
        CHECK(layer != NULL);
        for (size_t h = 0; h < 3; h++) {
            float *keys, *values;
            const size_t n = head_rows(layer, h, &keys, &values);
            CHECK(keys != NULL);
            fill_query(&rng, q, 150, 80, (int)(h % 2));
            CHECK_OK(kvc_layer_attend(layer, q, h, with, probs));
            CHECK_OK(kvc_layer_attend(layer, q, h, without, NULL));
            CHECK(test_bits_equal(with, without, 80));
            CHECK_OK(kvc_attention_head(q, keys, values, n, 80, with, probs));
            CHECK_OK(kvc_attention_head(q, keys, values, n, 80, without, NULL));
            CHECK(test_bits_equal(with, without, 80));
            free(keys);
            free(values);
        }
        kvc_layer_free(layer);
        test_data_free(&data);
    }
}

TEST(attend_should_sum_values_whose_row_scales_span_more_than_the_weight_codes_resolve) {
    /* Rows of values ~1 beside rows with one channel at 1e14: a tile's row
     * scales then span 1e14, past what the values' i16 weight codes (hi and
     * lo) resolve, so that tile is summed in f32; the attention (mostly on
     * the rows of ~1) must stay the convex combination of the rows read
     * back, to f32 rounding -- and, with quantized keys, to what the 14-bit
     * query code moves the probabilities (measured 4.6e-6). */
    const size_t d = 8, n = 200;
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        if (!test_mode_quantizes(test_modes[mi], 1)) continue;
        kvc_layer *layer;
        CHECK_OK(kvc_layer_create(1, d, test_modes[mi], &layer));
        CHECK_OK(kvc_layer_set_residual_rows(layer, 0));
        test_rng rng = test_rng_new(77);
        float k[8], v[8], q[8], out[8], want[8];
        double probs[200];
        for (size_t p = 0; p < n; p++) {
            test_fill_normal(&rng, k, d);
            test_fill_normal(&rng, v, d);
            if (p >= KVC_Q8_WINDOW && p % 3 == 0) {
                memset(v, 0, sizeof v);
                v[d - 1] = 1e14f;
                for (size_t j = 0; j < d; j++) k[j] = -4.0f; /* little attention */
            }
            CHECK_OK(kvc_layer_append(layer, k, v, NULL));
        }
        float *keys, *values;
        CHECK(head_rows(layer, 0, &keys, &values) == n);
        double worst = 0.0;
        for (int i = 0; i < 8; i++) {
            test_fill_normal(&rng, q, d);
            CHECK_OK(kvc_layer_attend(layer, q, 0, out, NULL));
            reference_attention(q, keys, values, n, d, want, probs);
            for (size_t j = 0; j + 1 < d; j++) { /* the channels of ~1 */
                double spread = 0.0;
                for (size_t p = 0; p < n; p++) spread = fmax(spread, fabs(values[p * d + j]));
                worst = fmax(worst, fabs((double)out[j] - want[j]) / spread);
            }
        }
        printf("  mode %d: worst error on the channels of ~1, relative to their largest value: %.3g\n",
               (int)test_modes[mi], worst);
        CHECK(worst < (test_mode_quantizes(test_modes[mi], 0) ? 1e-5 : 1e-6));
        free(keys);
        free(values);
        kvc_layer_free(layer);
    }
}

RUN_TESTS(CASE(attend_f32_should_equal_attention_head_over_head_rows_bit_for_bit),
          CASE(attend_should_sum_values_whose_row_scales_span_more_than_the_weight_codes_resolve),
          CASE(attend_f32_should_match_double_precision_reference),
          CASE(attend_q8_should_stay_within_bound_of_f32_on_outlier_keys),
          CASE(attend_q8k_should_stay_within_bound_of_f32_on_outlier_keys),
          CASE(attend_q8v_should_stay_within_bound_of_f32_on_outlier_keys),
          CASE(attend_quantized_should_match_double_attention_over_dequantized_rows),
          CASE(attend_quantized_should_add_at_most_5_percent_to_the_error_of_exact_q_against_f32),
          CASE(attend_should_give_nonnegative_probs_that_sum_to_one),
          CASE(attend_should_give_zeros_and_no_probs_for_empty_head),
          CASE(attend_should_refuse_nonfinite_query),
          CASE(attention_head_should_refuse_nonfinite_query),
          CASE(attention_head_should_give_zeros_for_no_rows),
          CASE(attention_head_should_refuse_bad_arguments),
          CASE(attend_should_refuse_bad_arguments),
          CASE(attend_without_probs_should_give_the_same_out))
