/*
 * test_quant.c -- the q8 "2f" scheme: f32 sink rows below the window, the
 * per-channel field frozen from them when position W is appended, rows from
 * W on stored as codes x scale x field, and truncation back below W undoing
 * the freeze so that rollback is bit-identical to plain decoding.
 *
 * What a quantized row must read back as is derived here from the appended
 * data alone: the field as the RMS (summed in double, in row order) of the
 * head's window rows, then the scalar kernels' quantize and dequantize.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "test.h"

#define W KVC_Q8_WINDOW


/* c[j] = RMS of channel j over head h's rows at positions < W (floored at
 * 1e-30 and at 2^-12 of the largest c); all ones when the head stored none
 * of them. */
static void window_field(const test_data *data, size_t h, int is_values, float *field) {
    const size_t d = data->d;
    const float *src = is_values ? data->v : data->k;
    const size_t rows = test_data_rows(data, h, 0, W);
    for (size_t j = 0; j < d; j++) {
        if (rows == 0) {
            field[j] = 1.0f;
            continue;
        }
        double sum_sq = 0.0;
        for (size_t p = 0; p < W; p++) {
            if (!data->alive[p * data->H + h]) continue;
            const double x = src[(p * data->H + h) * d + j];
            sum_sq += x * x;
        }
        field[j] = (float)sqrt(sum_sq / (double)rows);
        if (field[j] < 1e-30f) field[j] = 1e-30f;
    }
    float max_c = 0.0f;
    for (size_t j = 0; j < d; j++) max_c = fmaxf(max_c, field[j]);
    for (size_t j = 0; j < d; j++) field[j] = fmaxf(field[j], ldexpf(max_c, -12));
}

/* x read back after quantization against `field`, in 8 or 4 bits. */
static void quantize_round_trip(size_t d, kvc_component type, const float *x, const float *field,
                                float *out) {
    uint8_t row[4 + KVC_MAX_HEAD_DIM], unpacked[4 + KVC_MAX_HEAD_DIM];
    float scale;
    if (type == KVC_COMPONENT_Q4) {
        scale = kvc_kernels_scalar.quantize_row_q4(d, x, field, row + 4);
        memcpy(row, &scale, 4);
        kvc_kernels_scalar.unpack_q4(1, d, row, unpacked);
    } else {
        scale = kvc_kernels_scalar.quantize_row(d, x, field, (int8_t *)unpacked + 4);
    }
    kvc_kernels_scalar.dequantize_row(d, (const int8_t *)unpacked + 4, scale, field, out);
}

/* What head_keys (is_values = 0) or head_values (1) of head h must return
 * after positions 0..len-1 of data were appended in `mode`.
 * @return : the number of rows. */
static size_t expected_rows(const test_data *data, size_t len, kvc_mode mode, size_t h,
                            int is_values, float *rows) {
    const size_t d = data->d;
    uint32_t *positions = test_alloc(len * sizeof(uint32_t) + 1);
    const size_t n = test_data_head(data, len, h, is_values, rows, positions);
    const kvc_component type = kvc_mode_component(mode, is_values);
    if (type != KVC_COMPONENT_F32 && len > W) {
        float *field = test_alloc(d * sizeof(float));
        window_field(data, h, is_values, field);
        /* q4: the newest KVC_Q4_RESIDUAL_ROWS rows stay exact */
        size_t exact_from = n;
        if (type == KVC_COMPONENT_Q4)
            exact_from = n > KVC_Q4_RESIDUAL_ROWS ? n - KVC_Q4_RESIDUAL_ROWS : 0;
        for (size_t r = 0; r < n; r++) {
            if (positions[r] >= W && r < exact_from)
                quantize_round_trip(d, type, rows + r * d, field, rows + r * d);
        }
        free(field);
    }
    free(positions);
    return n;
}

/* 1 if every head's keys and values of `layer` are what data's first len
 * positions give in mode, bit for bit. */
static int rows_as_expected(const kvc_layer *layer, const test_data *data, size_t len,
                            kvc_mode mode) {
    const size_t d = data->d;
    float *want = test_alloc(len * d * sizeof(float) + 1);
    float *got = test_alloc(len * d * sizeof(float) + 1);
    int ok = 1;
    for (size_t h = 0; h < data->H && ok; h++) {
        for (int is_values = 0; is_values < 2 && ok; is_values++) {
            const size_t n = expected_rows(data, len, mode, h, is_values, want);
            kvc_status status = test_head_rows(layer, h, is_values, got, len * d);
            ok = status == KVC_OK && kvc_layer_head_len(layer, h) == n &&
                 test_bits_equal(got, want, n * d);
            if (!ok) printf("  head %zu %s differ\n", h, is_values ? "values" : "keys");
        }
    }
    free(want);
    free(got);
    return ok;
}

TEST(rows_below_window_should_stay_exact_in_quantized_modes) {
    const size_t H = 4, d = 32, len = 100;
    test_data data = test_data_make(51, len, H, d, 1);
    float *got = test_alloc(len * d * sizeof(float));
    float *want = test_alloc(len * d * sizeof(float));
    for (size_t mi = 0; mi < TEST_QUANTIZED_MODE_COUNT; mi++) {
        kvc_layer *layer = test_layer_with(&data, len, test_quantized_modes[mi]);
        CHECK(layer != NULL);
        CHECK(kvc_layer_field_frozen(layer) == 1);
        for (size_t h = 0; h < H; h++) {
            const size_t below = test_data_rows(&data, h, 0, W);
            for (int is_values = 0; is_values < 2; is_values++) {
                test_data_head(&data, len, h, is_values, want, NULL);
                CHECK_OK(test_head_rows(layer, h, is_values, got, len * d));
                CHECK(test_bits_equal(got, want, below * d));
            }
        }
        kvc_layer_free(layer);
    }
    free(got);
    free(want);
    test_data_free(&data);
}

TEST(field_should_freeze_exactly_when_position_64_is_appended) {
    test_data data = test_data_make(52, W + 8, 2, 16, 0);
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        const kvc_mode mode = test_modes[mi];
        kvc_layer *layer;
        CHECK_OK(kvc_layer_create(2, 16, mode, &layer));
        for (size_t p = 0; p < W + 8; p++) {
            CHECK_OK(test_data_append(layer, &data, p, 1));
            const int frozen = kvc_layer_field_frozen(layer);
            if (mode == KVC_MODE_F32) CHECK(frozen == 0);
            else if (kvc_layer_seq_len(layer) <= W) CHECK(frozen == 0);
            else CHECK(frozen == 1);
        }
        /* The same by append_n: ending at W leaves it thawed, one more freezes. */
        kvc_layer_clear(layer);
        CHECK_OK(test_data_append(layer, &data, 0, W));
        CHECK(kvc_layer_field_frozen(layer) == 0);
        kvc_layer_clear(layer);
        CHECK_OK(test_data_append(layer, &data, 0, W + 1));
        CHECK(kvc_layer_field_frozen(layer) == (mode != KVC_MODE_F32));
        kvc_layer_free(layer);
    }
    test_data_free(&data);
}

TEST(quantized_rows_should_follow_the_rms_field_of_window_rows) {
    static const size_t dims[] = {17, 64};
    for (size_t di = 0; di < 2; di++) {
        const size_t H = 5, d = dims[di], len = 200;
        test_data data = test_data_make(53 + di, len, H, d, 1);
        for (size_t mi = 0; mi < TEST_QUANTIZED_MODE_COUNT; mi++) {
            kvc_layer *layer = test_layer_with(&data, len, test_quantized_modes[mi]);
            CHECK(layer != NULL);
            CHECK(rows_as_expected(layer, &data, len, test_quantized_modes[mi]));
            kvc_layer_free(layer);
        }
        test_data_free(&data);
    }
}

/* In a mode that quantizes only one component, the other comes back exact
 * at every position and the quantized one differs from the input. */
static int only_component_quantized(kvc_mode mode, int quantized_is_values) {
    const size_t H = 3, d = 40, len = 150;
    test_data data = test_data_make(55 + (uint64_t)mode, len, H, d, 1);
    float *got = test_alloc(len * d * sizeof(float));
    float *input = test_alloc(len * d * sizeof(float));
    kvc_layer *layer = test_layer_with(&data, len, mode);
    int ok = layer && rows_as_expected(layer, &data, len, mode);
    for (size_t h = 0; h < H && ok; h++) {
        const size_t n = kvc_layer_head_len(layer, h), below = test_data_rows(&data, h, 0, W);
        for (int is_values = 0; is_values < 2 && ok; is_values++) {
            test_data_head(&data, len, h, is_values, input, NULL);
            ok = (test_head_rows(layer, h, is_values, got, len * d)) == KVC_OK;
            const int exact = test_bits_equal(got, input, n * d);
            /* The exact component is exact everywhere; the quantized one
             * (which has rows from W on in every head here) is not. */
            if (ok) ok = is_values == quantized_is_values ? !exact && n > below : exact;
        }
    }
    kvc_layer_free(layer);
    free(got);
    free(input);
    test_data_free(&data);
    return ok;
}

TEST(q8k_should_quantize_keys_only) {
    CHECK(only_component_quantized(KVC_MODE_Q8K, 0));
}

TEST(q8v_should_quantize_values_only) {
    CHECK(only_component_quantized(KVC_MODE_Q8V, 1));
}

TEST(field_should_be_all_ones_for_head_dead_in_window) {
    const size_t H = 2, d = 24, len = 200;
    test_data data = test_data_make(57, len, H, d, 0);
    /* Head 1 stores nothing at positions < W, everything after. */
    for (size_t p = 0; p < W; p++) data.alive[p * H + 1] = 0;
    float ones[24], want[24];
    for (size_t j = 0; j < d; j++) ones[j] = 1.0f;
    float *got = test_alloc(len * d * sizeof(float));
    for (size_t mi = 0; mi < TEST_QUANTIZED_MODE_COUNT; mi++) {
        const kvc_mode mode = test_quantized_modes[mi];
        kvc_layer *layer = test_layer_with(&data, len, mode);
        CHECK(layer != NULL);
        CHECK(kvc_layer_head_len(layer, 1) == len - W);
        for (int is_values = 0; is_values < 2; is_values++) {
            if (!test_mode_quantizes(mode, is_values)) continue;
            CHECK_OK(test_head_rows(layer, 1, is_values, got, len * d));
            const kvc_component type = kvc_mode_component(mode, is_values);
            /* (q4: the newest rows, the residual window, come back exact) */
            const size_t read_back = type == KVC_COMPONENT_Q4 ? len - W - KVC_Q4_RESIDUAL_ROWS : len - W;
            CHECK(len - W > KVC_Q4_RESIDUAL_ROWS);
            for (size_t r = 0; r < len - W; r++) {
                const float *x = (is_values ? data.v : data.k) + ((W + r) * H + 1) * d;
                if (r < read_back) quantize_round_trip(d, type, x, ones, want);
                else memcpy(want, x, d * sizeof(float));
                CHECK(test_bits_equal(got + r * d, want, d));
            }
        }
        kvc_layer_free(layer);
    }
    free(got);
    test_data_free(&data);
}

TEST(truncate_should_unfreeze_field_below_window) {
    test_data data = test_data_make(58, 100, 2, 16, 0);
    for (size_t mi = 0; mi < TEST_QUANTIZED_MODE_COUNT; mi++) {
        kvc_layer *layer = test_layer_with(&data, 100, test_quantized_modes[mi]);
        CHECK(layer != NULL);
        CHECK_OK(kvc_layer_truncate_last(layer, 100 - (W + 1)));
        CHECK(kvc_layer_seq_len(layer) == W + 1);
        CHECK(kvc_layer_field_frozen(layer) == 1);
        CHECK_OK(kvc_layer_truncate_last(layer, 1));
        CHECK(kvc_layer_seq_len(layer) == W);
        CHECK(kvc_layer_field_frozen(layer) == 0);
        CHECK_OK(test_data_append(layer, &data, W, 1));
        CHECK(kvc_layer_field_frozen(layer) == 1);
        CHECK_OK(kvc_layer_truncate_last(layer, 40));
        CHECK(kvc_layer_field_frozen(layer) == 0);
        kvc_layer_free(layer);
    }
    test_data_free(&data);
}

/* A rollback scenario: append `good` true positions, then `junk` positions of
 * other data, truncate back to `back` (<= good), then append the true positions from
 * there to the end.  After the truncation the layer must equal a fresh one
 * holding the first `back` true positions, at the end one that appended
 * every true position, bit for bit. */
typedef struct rollback {
    size_t good, junk, back;
} rollback;

static int rollback_is_invisible(kvc_mode mode, const test_data *truth, const test_data *junk,
                                 rollback r) {
    const size_t len = truth->n;
    kvc_layer *layer = test_layer_with(truth, r.good, mode);
    kvc_layer *prefix = test_layer_with(truth, r.back, mode);
    kvc_layer *plain = test_layer_with(truth, 0, mode);
    int ok = layer && prefix && plain &&
             test_data_append(layer, junk, r.good, r.junk) == KVC_OK &&
             kvc_layer_truncate_last(layer, r.good + r.junk - r.back) == KVC_OK &&
             test_layers_equal(layer, prefix);
    /* Plain decoding: one position at a time. */
    for (size_t p = 0; p < len && ok; p++) ok = test_data_append(plain, truth, p, 1) == KVC_OK;
    ok = ok && test_data_append(layer, truth, r.back, len - r.back) == KVC_OK &&
         test_layers_equal(layer, plain);
    if (!ok) printf("  mode %d rollback good=%zu junk=%zu back=%zu differs\n", (int)mode,
                    r.good, r.junk, r.back);
    kvc_layer_free(layer);
    kvc_layer_free(prefix);
    kvc_layer_free(plain);
    return ok;
}

TEST(rollback_across_window_should_be_bit_identical_to_plain_decoding) {
    static const rollback scenarios[] = {
        {50, 30, 50},  /* junk froze the field from junk rows; back below W */
        {100, 0, 40},  /* frozen from true rows; back below W */
        {64, 7, 64},   /* back to exactly W */
        {70, 10, 65},  /* back to W + 1: the field from true rows stays */
        {120, 9, 90},  /* never below W: the field stays */
        {0, 70, 0},    /* everything junk */
    };
    const size_t H = 4, d = 20, len = 160;
    test_data truth = test_data_make(59, len, H, d, 1);
    test_data junk = test_data_make(60, len, H, d, 1);
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        for (size_t s = 0; s < sizeof scenarios / sizeof scenarios[0]; s++) {
            CHECK(rollback_is_invisible(test_modes[mi], &truth, &junk, scenarios[s]));
        }
    }
    test_data_free(&truth);
    test_data_free(&junk);
}

TEST(quantized_rows_should_reconstruct_within_half_a_step) {
    const size_t H = 4, d = 64, len = 400;
    test_data data = test_data_make(61, len, H, d, 0);
    float *got = test_alloc(len * d * sizeof(float));
    float field[64];
    kvc_layer *layer = test_layer_with(&data, len, KVC_MODE_Q8);
    CHECK(layer != NULL);
    double worst = 0.0;
    for (size_t h = 0; h < H; h++) {
        for (int is_values = 0; is_values < 2; is_values++) {
            window_field(&data, h, is_values, field);
            CHECK_OK(test_head_rows(layer, h, is_values, got, len * d));
            for (size_t p = W; p < len; p++) {
                const float *x = (is_values ? data.v : data.k) + (p * H + h) * d;
                /* One step of the row is s * c[j], s = max_j |x[j] / c[j]| / 127:
                 * rounding to the nearest code misses by half a step at most. */
                double s = 0.0;
                for (size_t j = 0; j < d; j++) s = fmax(s, fabs((double)x[j] / field[j]) / 127.0);
                for (size_t j = 0; j < d; j++) {
                    const double miss = fabs((double)got[p * d + j] - (double)x[j]);
                    const double step = s * field[j];
                    CHECK(miss <= 0.5 * step * (1.0 + 1e-4) + 4.0 * FLT_EPSILON * fabs(x[j]));
                    worst = fmax(worst, miss / step);
                }
            }
        }
    }
    printf("  q8 reconstruction: largest miss %.4f of a step\n", worst);
    kvc_layer_free(layer);
    free(got);
    test_data_free(&data);
}

/* Appends `len` positions of N(0, 1) rows to a one-head layer, with channels
 * 0..silent-1 zero below the window and, from the window on, channel 0 times
 * `late`. */
static void append_silent_channels(kvc_layer *layer, size_t d, size_t silent, size_t len, float late,
                                   uint64_t seed) {
    test_rng rng = test_rng_new(seed);
    float k[16], v[16];
    for (size_t p = 0; p < len; p++) {
        test_fill_normal(&rng, k, d);
        test_fill_normal(&rng, v, d);
        for (size_t j = 0; j < silent && p < W; j++) k[j] = v[j] = 0.0f;
        if (p >= W) k[0] = v[0] = late * test_rng_normal(&rng);
        CHECK_OK(kvc_layer_append(layer, k, v, NULL));
    }
}

/* In q8 and q8k, on 200 positions with `silent` channels zero over the window
 * (append_silent_channels): attend within 1e-2 (output, relative) and 1e-3
 * (probabilities) of attention over the rows read back, over 20 N(0, 1)
 * queries with channel 0 three times larger -- what the query's 14-bit code
 * leaves a channel at the field's range floor (measured 4.8e-3 and 3.1e-4;
 * with the floor 2^12 below the largest c instead of 2^6 the channel's code
 * kept 2 bits and the output was off by 0.39). */
static void check_attend_as_read_back(size_t silent, uint64_t seed) {
    const size_t d = 16, len = 200;
    static const kvc_mode modes[] = {KVC_MODE_Q8, KVC_MODE_Q8K};
    float *K = test_alloc(len * d * sizeof(float)), *V = test_alloc(len * d * sizeof(float));
    float *probs = test_alloc(len * sizeof(float)), *probs_def = test_alloc(len * sizeof(float));
    for (size_t m = 0; m < 2; m++) {
        kvc_layer *layer = NULL;
        CHECK_OK(kvc_layer_create(1, d, modes[m], &layer));
        append_silent_channels(layer, d, silent, len, 1.0f, seed);
        CHECK_OK(kvc_layer_head_keys(layer, 0, K, len * d));
        CHECK_OK(kvc_layer_head_values(layer, 0, V, len * d));
        test_rng rng = test_rng_new(72);
        float q[16], out[16], out_def[16];
        double out_error = 0.0, probs_error = 0.0;
        for (int trial = 0; trial < 20; trial++) {
            test_fill_normal(&rng, q, d);
            q[0] *= 3.0f;
            CHECK_OK(kvc_layer_attend(layer, q, 0, out, probs));
            CHECK_OK(kvc_attention_head(q, K, V, len, d, out_def, probs_def));
            for (size_t p = 0; p < len; p++) probs_error = fmax(probs_error, fabs((double)probs[p] - probs_def[p]));
            out_error = fmax(out_error, test_rel_error(out, out_def, d));
        }
        printf("  %s: output %.1e, probabilities %.1e\n", modes[m] == KVC_MODE_Q8 ? "q8" : "q8k", out_error,
               probs_error);
        CHECK(out_error < 1e-2 && probs_error < 1e-3);
        kvc_layer_free(layer);
    }
    free(K);
    free(V);
    free(probs);
    free(probs_def);
}

TEST(a_channel_silent_over_the_window_should_keep_its_share_of_the_scores) {
    /* Its field would sit at 1e-30 with the others near 1: the query codes
     * q[j] * c[j] span about 2^30, so attend would score that channel as 0
     * while the keys read back carry it.  The field's range floor keeps
     * attend equal to attention over the keys read back. */
    check_attend_as_read_back(1, 71);
}

TEST(a_head_silent_over_the_window_should_score_as_its_keys_read_back) {
    /* Every c at its 1e-30 floor: q * c is about 1e-30, and its codes must
     * not meet their own scale floor (1e-30), which would round q to
     * integers. */
    check_attend_as_read_back(16, 74);
}

TEST(a_huge_value_over_a_silent_channel_should_read_back_finite) {
    /* 1e9 over a field of 1e-30 saturates x / c (at 2^127); the row must read
     * back, and attend, finite. */
    const size_t d = 4, len = 80;
    kvc_layer *layer = NULL;
    CHECK_OK(kvc_layer_create(1, d, KVC_MODE_Q8V, &layer));
    append_silent_channels(layer, d, 1, len, 1e9f, 73);
    float V[80 * 4], out[4], q[4] = {0.5f, -1.0f, 0.25f, 2.0f};
    CHECK_OK(kvc_layer_head_values(layer, 0, V, len * d));
    for (size_t i = 0; i < len * d; i++) CHECK(isfinite(V[i]));
    CHECK_OK(kvc_layer_attend(layer, q, 0, out, NULL));
    for (size_t j = 0; j < d; j++) CHECK(isfinite(out[j]));
    kvc_layer_free(layer);
}

TEST(attend_should_stay_finite_when_q_times_the_field_passes_flt_max) {
    /* Channel 0 is 1e10 over the window (c = 1e10) and zero after it; the
     * window rows are evicted.  A query of 1e30 there makes q * c = 1e40,
     * past FLT_MAX, while every score stays finite: the query codes must not
     * be formed from an overflowed q * c (NaN codes; undefined behaviour in
     * the conversion, which the sanitized run reports). */
    const size_t d = 8, len = 160;
    kvc_layer *layer = NULL;
    CHECK_OK(kvc_layer_create(1, d, KVC_MODE_Q8K, &layer));
    test_rng rng = test_rng_new(75);
    float k[8], v[8];
    for (size_t p = 0; p < len; p++) {
        test_fill_normal(&rng, k, d);
        test_fill_normal(&rng, v, d);
        k[0] = p < W ? 1e10f : 0.0f;
        CHECK_OK(kvc_layer_append(layer, k, v, NULL));
    }
    CHECK_OK(kvc_layer_evict(layer, len - W, 0, len - W));
    CHECK(kvc_layer_field_frozen(layer) && kvc_layer_seq_len(layer) == len - W);
    float q[8], out[8], probs[160];
    test_fill_normal(&rng, q, d);
    q[0] = 1e30f;
    CHECK_OK(kvc_layer_attend(layer, q, 0, out, probs));
    double sum = 0.0;
    for (size_t p = 0; p < len - W; p++) {
        CHECK(probs[p] >= 0.0f && probs[p] <= 1.0f);
        sum += probs[p];
    }
    CHECK(fabs(sum - 1.0) < 1e-4);
    for (size_t j = 0; j < d; j++) CHECK(isfinite(out[j]));
    kvc_layer_free(layer);
}

TEST(q8_should_hold_fewer_bytes_than_f32_at_4096_positions) {
    static const size_t dims[] = {64, 128};
    for (size_t di = 0; di < 2; di++) {
        const size_t H = 8, d = dims[di], len = 4096;
        test_data data = test_data_make(62 + di, len, H, d, 0);
        kvc_layer *exact = test_layer_with(&data, len, KVC_MODE_F32);
        kvc_layer *quantized = test_layer_with(&data, len, KVC_MODE_Q8);
        CHECK(exact != NULL && quantized != NULL);
        const size_t f32_bytes = kvc_layer_memory_bytes(exact);
        const size_t q8_bytes = kvc_layer_memory_bytes(quantized);
        CHECK(f32_bytes == test_expected_memory(&data, len, KVC_MODE_F32));
        CHECK(q8_bytes == test_expected_memory(&data, len, KVC_MODE_Q8));
        const double ratio = (double)f32_bytes / (double)q8_bytes;
        printf("  H=8 d=%zu L=4096: f32 %zu B, q8 %zu B, ratio f32/q8 %.3f\n", d, f32_bytes,
               q8_bytes, ratio);
        /* Rows alone: 4d / (d + 4); the f32 sink rows, imp, map and field
         * take a little off that. */
        CHECK(ratio > 0.95 * 4.0 * (double)d / (double)(d + 4));
        CHECK(ratio < 4.0 * (double)d / (double)(d + 4));
        kvc_layer_free(exact);
        kvc_layer_free(quantized);
        test_data_free(&data);
    }
}

RUN_TESTS(CASE(rows_below_window_should_stay_exact_in_quantized_modes),
          CASE(field_should_freeze_exactly_when_position_64_is_appended),
          CASE(quantized_rows_should_follow_the_rms_field_of_window_rows),
          CASE(q8k_should_quantize_keys_only),
          CASE(q8v_should_quantize_values_only),
          CASE(field_should_be_all_ones_for_head_dead_in_window),
          CASE(truncate_should_unfreeze_field_below_window),
          CASE(rollback_across_window_should_be_bit_identical_to_plain_decoding),
          CASE(quantized_rows_should_reconstruct_within_half_a_step),
          CASE(a_channel_silent_over_the_window_should_keep_its_share_of_the_scores),
          CASE(a_head_silent_over_the_window_should_score_as_its_keys_read_back),
          CASE(a_huge_value_over_a_silent_channel_should_read_back_finite),
          CASE(attend_should_stay_finite_when_q_times_the_field_passes_flt_max),
          CASE(q8_should_hold_fewer_bytes_than_f32_at_4096_positions))
