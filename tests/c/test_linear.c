/*
 * test_linear.c -- linear-attention layers: the recurrence against a plain
 * f64 reference written here (generic and vmf_phase features), tentative
 * steps and accept during a verify, byte counts, refused input, the calls
 * that belong to the other kind of layer, clone, clear and running out of
 * memory.
 *
 * Why the comparisons can be bit for bit: every operation of a step is an
 * IEEE-754 basic operation (f32 -> f64 widening, which is exact; f64 multiply
 * and add, each correctly rounded; the final f64 -> f32 rounding), and the
 * reference does the very same operations on the very same operands in the
 * documented order: S = (decay * S) + (phi_k * v), the two products first,
 * then the add; out = sum over f in order starting from 0.0, then rounded to
 * f32.  Nothing may reorder or fuse them: the library and the tests are
 * built with -ffp-contract=off and without fast-math, and the SIMD128
 * kernels put their lanes across the value index, so each element still
 * sees the scalar sequence.  The vmf_phase features are cos / sin of
 * m * theta in f64, computed here with the same libm on the same arguments.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

/* ---- the f64 reference ---- */

#define MAX_F 128

typedef struct reference {
    size_t H, F, dv;
    double m;  /* 1 / (1 + phase_mass) */
    double *S; /* [H x F x dv] */
} reference;

static reference reference_new(const test_steps *steps, double phase_mass) {
    reference r = {steps->H, steps->F, steps->dv, 1.0 / (1.0 + phase_mass), NULL};
    r.S = test_alloc(r.H * r.F * r.dv * sizeof(double));
    return r;
}

/* phi [F] of one head: the features widened to f64, or from phases
 * [cos(m theta_1..P), sin(m theta_1..P)], P = F / 2, in f64 (never rounded
 * to f32: the library does not round them either). */
static void reference_features(const test_steps *steps, double m, const float *in, double *phi) {
    if (!steps->phase) {
        for (size_t f = 0; f < steps->F; f++) phi[f] = (double)in[f];
        return;
    }
    const size_t P = steps->F / 2;
    for (size_t i = 0; i < P; i++) {
        phi[i] = cos(m * (double)in[i]);
        phi[P + i] = sin(m * (double)in[i]);
    }
}

/* Step i of `steps` on r->S; out [H x dv] (may be NULL). */
static void reference_step(reference *r, const test_steps *steps, size_t i, float *out) {
    const size_t H = r->H, F = r->F, dv = r->dv, in_len = steps->in_len;
    double phi_k[MAX_F], phi_q[MAX_F];
    for (size_t h = 0; h < H; h++) {
        reference_features(steps, r->m, steps->key + (i * H + h) * in_len, phi_k);
        reference_features(steps, r->m, steps->query + (i * H + h) * in_len, phi_q);
        const float *v = steps->v + (i * H + h) * dv;
        double *S = r->S + h * F * dv;
        for (size_t f = 0; f < F; f++) {
            const double decay = steps->decay ? (double)steps->decay[(i * H + h) * F + f] : 1.0;
            for (size_t j = 0; j < dv; j++) {
                const double kept = decay * S[f * dv + j];
                const double added = phi_k[f] * (double)v[j];
                S[f * dv + j] = kept + added;
            }
        }
        for (size_t j = 0; out && j < dv; j++) {
            double acc = 0.0;
            for (size_t f = 0; f < F; f++) acc += phi_q[f] * S[f * dv + j];
            out[h * dv + j] = (float)acc;
        }
    }
}

static size_t state_len(const reference *r) {
    return r->H * r->F * r->dv;
}

/* 1 if `got` [state_len] holds r's state bit for bit. */
static int state_is(const double *got, const reference *r) {
    return memcmp(got, r->S, state_len(r) * sizeof(double)) == 0;
}

/* 1 if the layer's committed state is r's, bit for bit. */
static int layer_state_is(const kvc_layer *layer, const reference *r) {
    double *got = test_alloc(state_len(r) * sizeof(double));
    const int ok = kvc_layer_linear_state(layer, got, state_len(r)) == KVC_OK && state_is(got, r);
    free(got);
    return ok;
}

/* ---- shapes ---- */

typedef struct shape {
    size_t H, F, dv;
} shape;

/* Odd and even sizes; the SIMD kernels take value dims in pairs and eights. */
static const shape shapes[] = {{1, 1, 1}, {2, 3, 5}, {3, 8, 17}, {4, 16, 9}, {2, 33, 64}};
/* Even feature counts for vmf_phase. */
static const shape phase_shapes[] = {{1, 2, 1}, {2, 6, 5}, {3, 16, 17}, {2, 64, 33}};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Runs n steps of a fresh layer against the reference, checking the state
 * and the outputs after every step.
 * @return : 1 if every step matched bit for bit. */
static int matches_reference(const test_steps *steps, double phase_mass) {
    const size_t H = steps->H, dv = steps->dv;
    kvc_layer *layer = test_linear_with(steps, 0, phase_mass);
    reference r = reference_new(steps, phase_mass);
    float *out = test_alloc(H * dv * sizeof(float)), *want = test_alloc(H * dv * sizeof(float));
    int ok = layer != NULL;
    for (size_t i = 0; i < steps->n && ok; i++) {
        ok = test_steps_take(layer, steps, i, 1, out) == KVC_OK;
        reference_step(&r, steps, i, want);
        ok = ok && layer_state_is(layer, &r) && test_bits_equal(out, want, H * dv) &&
             kvc_layer_steps(layer) == i + 1;
        if (!ok) printf("  H=%zu F=%zu dv=%zu: step %zu differs\n", H, steps->F, dv, i);
    }
    kvc_layer_free(layer);
    free(r.S);
    free(out);
    free(want);
    return ok;
}

/* ---- the recurrence ---- */

TEST(step_should_match_f64_reference_bit_for_bit_after_every_step) {
    for (size_t si = 0; si < COUNT(shapes); si++) {
        for (int decay = 0; decay < 2; decay++) {
            const shape s = shapes[si];
            test_steps steps = test_steps_make(200 + si * 2 + (size_t)decay, 150, s.H, s.F,
                                               s.dv, 0, decay);
            CHECK(matches_reference(&steps, 0.0));
            test_steps_free(&steps);
        }
    }
}

TEST(phase_step_should_match_f64_reference_of_cos_sin_features) {
    static const double masses[] = {0.0, 0.5, 3.0};
    for (size_t si = 0; si < COUNT(phase_shapes); si++) {
        for (size_t mi = 0; mi < COUNT(masses); mi++) {
            const shape s = phase_shapes[si];
            const int decay = (int)((si + mi) % 2);
            test_steps steps = test_steps_make(220 + si * 3 + mi, 100, s.H, s.F, s.dv, 1, decay);
            CHECK(matches_reference(&steps, masses[mi]));
            test_steps_free(&steps);
        }
    }
}

TEST(phase_step_should_use_m_of_the_layer_phase_mass) {
    /* One head, F = 2, dv = 1, no decay, v = 1: the state after one step is
     * (cos(m theta_k), sin(m theta_k)), m = 1 / (1 + phase_mass). */
    const float theta_k = 1.25f, theta_q = -0.5f, v = 1.0f;
    static const double masses[] = {0.0, 0.5};
    for (size_t mi = 0; mi < 2; mi++) {
        kvc_layer *layer;
        double S[2];
        float out;
        CHECK_OK(kvc_layer_create_linear(1, 2, 1, masses[mi], &layer));
        CHECK(kvc_layer_phase_mass(layer) == masses[mi]);
        CHECK_OK(kvc_layer_linear_step_phase(layer, NULL, &theta_k, &theta_q, &v, &out));
        CHECK_OK(kvc_layer_linear_state(layer, S, 2));
        const double m = 1.0 / (1.0 + masses[mi]);
        CHECK(S[0] == cos(m * 1.25) && S[1] == sin(m * 1.25));
        CHECK(out == (float)(cos(m * -0.5) * S[0] + sin(m * -0.5) * S[1]));
        kvc_layer_free(layer);
    }
}

TEST(phase_step_should_refuse_odd_num_features) {
    static const size_t odd[] = {1, 5};
    for (size_t i = 0; i < 2; i++) {
        test_steps phases = test_steps_make(230 + i, 1, 2, odd[i] + 1, 3, 1, 1);
        test_steps features = test_steps_make(232 + i, 1, 2, odd[i], 3, 0, 1);
        kvc_layer *layer;
        float out[6];
        CHECK_OK(kvc_layer_create_linear(2, odd[i], 3, 0.0, &layer));
        CHECK_REFUSED(layer,
                      kvc_layer_linear_step_phase(layer, features.decay, phases.key,
                                                  phases.query, phases.v, out),
                      KVC_E_NUM_FEATURES);
        /* The generic step is fine with any feature count. */
        CHECK_OK(test_steps_take(layer, &features, 0, 1, out));
        CHECK(kvc_layer_steps(layer) == 1);
        kvc_layer_free(layer);
        test_steps_free(&phases);
        test_steps_free(&features);
    }
}

TEST(step_output_should_sum_features_in_order_from_zero) {
    /* Random data rarely shows the f64 order of the read once the output is
     * rounded to f32; these values do.  One head, dv = 1, no decay, v = 1:
     * after one step S = phi_k. */
    static const float one = 1.0f;
    float out;
    kvc_layer *layer;
    /* S = (1, 1, 1); phi_q = (1, 2^60, -2^60): in order (0 + 1 + 2^60) - 2^60
     * = 0, the 1 absorbed; in reverse order the 1 would survive. */
    const float phi_k[3] = {1.0f, 1.0f, 1.0f}, phi_q[3] = {1.0f, 0x1p60f, -0x1p60f};
    CHECK_OK(kvc_layer_create_linear(1, 3, 1, 0.0, &layer));
    CHECK_OK(kvc_layer_linear_step(layer, NULL, phi_k, phi_q, &one, &out));
    CHECK(out == 0.0f);
    kvc_layer_free(layer);
    /* S = (0); phi_q = (-1): the one term is -0.0, and 0.0 + -0.0 = +0.0 (a
     * sum started from the first term would give -0.0). */
    const float zero = 0.0f, minus_one = -1.0f;
    CHECK_OK(kvc_layer_create_linear(1, 1, 1, 0.0, &layer));
    CHECK_OK(kvc_layer_linear_step(layer, NULL, &zero, &minus_one, &one, &out));
    CHECK(out == 0.0f && !signbit(out));
    kvc_layer_free(layer);
}

/* ---- create, accessors, bytes ---- */

TEST(create_linear_should_report_geometry_and_a_zero_state) {
    kvc_layer *layer;
    double state[2 * 3 * 5];
    CHECK_OK(kvc_layer_create_linear(2, 3, 5, 0.25, &layer));
    CHECK(kvc_layer_kind(layer) == KVC_KIND_LINEAR);
    CHECK(kvc_layer_num_heads(layer) == 2);
    CHECK(kvc_layer_num_features(layer) == 3);
    CHECK(kvc_layer_value_dim(layer) == 5);
    CHECK(kvc_layer_phase_mass(layer) == 0.25);
    CHECK(kvc_layer_steps(layer) == 0);
    CHECK(kvc_layer_verifying(layer) == 0 && kvc_layer_draft_len(layer) == 0);
    CHECK_OK(kvc_layer_linear_state(layer, state, 30));
    for (size_t i = 0; i < 30; i++) CHECK(state[i] == 0.0 && !signbit(state[i]));
    CHECK_OK(kvc_layer_linear_scratch(layer, NULL, 0));
    /* Full-layer accessors read 0 on it. */
    CHECK(kvc_layer_seq_len(layer) == 0);
    CHECK(kvc_layer_num_kv_heads(layer) == 0 && kvc_layer_head_dim(layer) == 0);
    CHECK(kvc_layer_head_len(layer, 0) == 0 && kvc_layer_field_frozen(layer) == 0);
    CHECK(kvc_layer_capacity_bytes(layer) >= kvc_layer_memory_bytes(layer));
    kvc_layer_free(layer);
}

TEST(memory_bytes_of_linear_layer_should_be_state_size_times_one_plus_tentative) {
    /* H = 16, F = 128, dv = 128: 16 * 128 * 128 f64 = 2 MiB of state. */
    const size_t H = 16, F = 128, dv = 128, state_bytes = H * F * dv * 8;
    CHECK(state_bytes == 2097152);
    test_steps steps = test_steps_make(240, 4, H, F, dv, 0, 1);
    kvc_layer *layer = test_linear_with(&steps, 1, 0.0);
    CHECK(layer != NULL);
    CHECK(kvc_layer_memory_bytes(layer) == 2097152);
    CHECK_OK(kvc_layer_begin_verify(layer));
    CHECK(kvc_layer_memory_bytes(layer) == 2097152);
    for (size_t t = 1; t <= 3; t++) {
        CHECK_OK(test_steps_take(layer, &steps, t, 1, NULL));
        CHECK(kvc_layer_memory_bytes(layer) == (1 + t) * 2097152);
        CHECK(kvc_layer_capacity_bytes(layer) >= kvc_layer_memory_bytes(layer));
    }
    CHECK_OK(kvc_layer_accept(layer, 2));
    CHECK(kvc_layer_memory_bytes(layer) == 2097152);
    kvc_layer_free(layer);
    test_steps_free(&steps);
    /* Other shapes follow the same formula. */
    for (size_t si = 0; si < COUNT(shapes); si++) {
        const shape s = shapes[si];
        CHECK_OK(kvc_layer_create_linear(s.H, s.F, s.dv, 0.0, &layer));
        CHECK(kvc_layer_memory_bytes(layer) == s.H * s.F * s.dv * 8);
        kvc_layer_free(layer);
    }
}

/* A non-NULL pointer that create must overwrite with NULL on error. */
static kvc_layer *const sentinel = (kvc_layer *)&shapes;

/* 1 if create_linear refuses the arguments with `expected` and sets *out NULL. */
static int create_refused(size_t H, size_t F, size_t dv, double phase_mass,
                          kvc_status expected) {
    kvc_layer *layer = sentinel;
    const kvc_status status = kvc_layer_create_linear(H, F, dv, phase_mass, &layer);
    if (status != expected || layer != NULL) {
        printf("  create_linear(%zu, %zu, %zu, %g) returned %s\n", H, F, dv, phase_mass,
               kvc_status_name(status));
        return 0;
    }
    return 1;
}

TEST(create_linear_should_refuse_bad_geometry) {
    CHECK(create_refused(0, 4, 4, 0.0, KVC_E_NUM_HEADS));
    CHECK(create_refused(KVC_MAX_KV_HEADS + 1, 4, 4, 0.0, KVC_E_NUM_HEADS));
    CHECK(create_refused((size_t)-1, 4, 4, 0.0, KVC_E_NUM_HEADS));
    CHECK(create_refused(2, 0, 4, 0.0, KVC_E_NUM_FEATURES));
    CHECK(create_refused(2, KVC_MAX_HEAD_DIM + 1, 4, 0.0, KVC_E_NUM_FEATURES));
    CHECK(create_refused(2, 4, 0, 0.0, KVC_E_VALUE_DIM));
    CHECK(create_refused(2, 4, KVC_MAX_HEAD_DIM + 1, 0.0, KVC_E_VALUE_DIM));
    CHECK_STATUS(kvc_layer_create_linear(2, 4, 4, 0.0, NULL), KVC_E_NULL_POINTER);
}

TEST(create_linear_should_refuse_negative_or_nonfinite_phase_mass) {
    CHECK(create_refused(2, 4, 4, -1.0, KVC_E_PHASE_MASS));
    CHECK(create_refused(2, 4, 4, -DBL_MIN, KVC_E_PHASE_MASS));
    CHECK(create_refused(2, 4, 4, NAN, KVC_E_PHASE_MASS));
    CHECK(create_refused(2, 4, 4, INFINITY, KVC_E_PHASE_MASS));
    CHECK(create_refused(2, 4, 4, -INFINITY, KVC_E_PHASE_MASS));
    /* Any finite phase_mass >= 0 is fine. */
    kvc_layer *layer;
    CHECK_OK(kvc_layer_create_linear(2, 4, 4, 1e300, &layer));
    CHECK(kvc_layer_phase_mass(layer) == 1e300);
    kvc_layer_free(layer);
}

/* ---- refused input ---- */

/* Puts `bad` into element `at` of step 0's input `which` (0 decay, 1 key,
 * 2 query, 3 v) and checks that the step is refused with `expected` and
 * changes nothing. */
static int step_refused(kvc_layer *layer, test_steps *steps, int which, size_t at, float bad,
                        kvc_status expected) {
    float *inputs[4] = {steps->decay, steps->key, steps->query, steps->v};
    float *x = inputs[which] + at;
    const float keep = *x;
    float *out = test_alloc(steps->H * steps->dv * sizeof(float));
    test_state *before = test_state_take(layer);
    *x = bad;
    const kvc_status status = test_steps_take(layer, steps, 0, 1, out);
    *x = keep;
    const int ok = status == expected && test_state_matches(layer, before);
    if (!ok) printf("  input %d [%zu] = %g: step returned %s\n", which, at, (double)bad,
                    kvc_status_name(status));
    test_state_free(before);
    free(out);
    return ok;
}

/* Every non-finite value, at the first and the last element of every input,
 * refused with its status, outside and during a verify. */
static int refuses_nonfinite(test_steps *steps) {
    static const kvc_status expected[4] = {KVC_E_NONFINITE_DECAY, KVC_E_NONFINITE_KEY,
                                           KVC_E_NONFINITE_QUERY, KVC_E_NONFINITE_VALUE};
    const size_t lengths[4] = {steps->H * steps->F, steps->H * steps->in_len,
                               steps->H * steps->in_len, steps->H * steps->dv};
    kvc_layer *layer = test_linear_with(steps, 3, 0.5);
    int ok = layer != NULL;
    for (int verifying = 0; verifying < 2 && ok; verifying++) {
        if (verifying) {
            ok = kvc_layer_begin_verify(layer) == KVC_OK &&
                 test_steps_take(layer, steps, 3, 2, NULL) == KVC_OK;
        }
        for (int which = 0; which < 4; which++) {
            for (int b = 0; b < 3; b++) {
                ok = ok && step_refused(layer, steps, which, 0, test_nonfinite[b], expected[which]);
                ok = ok && step_refused(layer, steps, which, lengths[which] - 1, test_nonfinite[b],
                                        expected[which]);
            }
        }
    }
    ok = ok && kvc_layer_steps(layer) == 5 && kvc_layer_draft_len(layer) == 2;
    kvc_layer_free(layer);
    return ok;
}

TEST(step_should_refuse_nonfinite_inputs_and_change_nothing) {
    test_steps steps = test_steps_make(250, 5, 3, 7, 5, 0, 1);
    CHECK(refuses_nonfinite(&steps));
    test_steps_free(&steps);
}

TEST(phase_step_should_refuse_nonfinite_inputs_and_change_nothing) {
    test_steps steps = test_steps_make(251, 5, 3, 8, 5, 1, 1);
    CHECK(refuses_nonfinite(&steps));
    test_steps_free(&steps);
}

TEST(step_should_refuse_null_pointers) {
    float phi[4] = {1, 2, 3, 4}, v[2] = {1, 2}, out[2];
    kvc_layer *layer;
    CHECK_OK(kvc_layer_create_linear(1, 4, 2, 0.0, &layer));
    CHECK_STATUS(kvc_layer_linear_step(NULL, NULL, phi, phi, v, out), KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_layer_linear_step(layer, NULL, NULL, phi, v, out), KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_layer_linear_step(layer, NULL, phi, NULL, v, out), KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_layer_linear_step(layer, NULL, phi, phi, NULL, out), KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_layer_linear_step(layer, NULL, phi, phi, v, NULL), KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_layer_linear_step_phase(layer, NULL, NULL, phi, v, out),
                 KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_layer_linear_step_phase(NULL, NULL, phi, phi, v, out), KVC_E_NULL_POINTER);
    CHECK(kvc_layer_steps(layer) == 0);
    /* decay NULL is no decay. */
    CHECK_OK(kvc_layer_linear_step(layer, NULL, phi, phi, v, out));
    CHECK(kvc_layer_steps(layer) == 1);
    kvc_layer_free(layer);
}

TEST(state_reads_should_refuse_short_buffer_and_null) {
    test_steps steps = test_steps_make(252, 3, 2, 3, 4, 0, 1);
    double state[2 * 3 * 4 * 2];
    kvc_layer *layer = test_linear_with(&steps, 1, 0.0);
    CHECK(layer != NULL);
    CHECK_STATUS(kvc_layer_linear_state(layer, state, 23), KVC_E_LENGTH);
    CHECK_STATUS(kvc_layer_linear_state(layer, NULL, 24), KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_layer_linear_state(NULL, state, 24), KVC_E_NULL_POINTER);
    CHECK_OK(kvc_layer_linear_state(layer, state, 24));
    CHECK_OK(kvc_layer_begin_verify(layer));
    CHECK_OK(test_steps_take(layer, &steps, 1, 2, NULL));
    CHECK_STATUS(kvc_layer_linear_scratch(layer, state, 47), KVC_E_LENGTH);
    CHECK_STATUS(kvc_layer_linear_scratch(layer, NULL, 48), KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_layer_linear_scratch(NULL, state, 48), KVC_E_NULL_POINTER);
    CHECK_OK(kvc_layer_linear_scratch(layer, state, 48));
    kvc_layer_free(layer);
    test_steps_free(&steps);
}

/* ---- the other kind ---- */

TEST(full_layer_calls_on_linear_layer_should_return_kind) {
    float x[8] = {0}, out[8], probs[8];
    uint32_t positions[8];
    test_steps steps = test_steps_make(253, 2, 2, 4, 4, 0, 1);
    kvc_layer *layer = test_linear_with(&steps, 2, 0.0);
    CHECK(layer != NULL);
    CHECK_REFUSED(layer, kvc_layer_append(layer, x, x, NULL), KVC_E_KIND);
    CHECK_REFUSED(layer, kvc_layer_append_n(layer, 1, x, x, NULL), KVC_E_KIND);
    CHECK_REFUSED(layer, kvc_layer_attend(layer, x, 0, out, probs), KVC_E_KIND);
    CHECK_REFUSED(layer, kvc_layer_attend_causal(layer, x, 1, 0, out, probs), KVC_E_KIND);
    CHECK_REFUSED(layer, kvc_layer_truncate_last(layer, 1), KVC_E_KIND);
    CHECK_REFUSED(layer, kvc_layer_head_keys(layer, 0, x, 8), KVC_E_KIND);
    CHECK_REFUSED(layer, kvc_layer_head_values(layer, 0, x, 8), KVC_E_KIND);
    CHECK_REFUSED(layer, kvc_layer_head_positions(layer, 0, positions, 8), KVC_E_KIND);
    CHECK_REFUSED(layer, kvc_layer_accumulate_imp(layer, probs, 0), KVC_E_KIND);
    CHECK_REFUSED(layer, kvc_layer_accumulate_imp_head(layer, 0, probs, 0), KVC_E_KIND);
    CHECK_REFUSED(layer, kvc_layer_imp(layer, probs, 8), KVC_E_KIND);
    kvc_layer_free(layer);
    test_steps_free(&steps);
}

TEST(linear_calls_on_full_layer_should_return_kind) {
    test_steps steps = test_steps_make(254, 1, 2, 4, 4, 0, 1);
    test_steps phases = test_steps_make(255, 1, 2, 4, 4, 1, 1);
    test_data data = test_data_make(254, 70, 2, 4, 1);
    double state[32];
    float out[8];
    for (size_t mi = 0; mi < TEST_MODE_COUNT; mi++) {
        kvc_layer *layer = test_layer_with(&data, 70, test_modes[mi]);
        CHECK(layer != NULL);
        CHECK_REFUSED(layer, test_steps_take(layer, &steps, 0, 1, out), KVC_E_KIND);
        CHECK_REFUSED(layer, test_steps_take(layer, &phases, 0, 1, out), KVC_E_KIND);
        CHECK_REFUSED(layer, kvc_layer_linear_state(layer, state, 32), KVC_E_KIND);
        CHECK_REFUSED(layer, kvc_layer_linear_scratch(layer, state, 32), KVC_E_KIND);
        /* Linear accessors read 0 on it. */
        CHECK(kvc_layer_kind(layer) == KVC_KIND_FULL);
        CHECK(kvc_layer_num_heads(layer) == 0 && kvc_layer_num_features(layer) == 0);
        CHECK(kvc_layer_value_dim(layer) == 0 && kvc_layer_phase_mass(layer) == 0.0);
        CHECK(kvc_layer_steps(layer) == 0);
        kvc_layer_free(layer);
    }
    CHECK(kvc_layer_kind(NULL) == KVC_KIND_FULL && kvc_layer_steps(NULL) == 0);
    test_data_free(&data);
    test_steps_free(&steps);
    test_steps_free(&phases);
}

/* ---- verify ---- */

TEST(tentative_steps_should_leave_state_and_fill_scratch_one_snapshot_per_step) {
    const size_t base = 7, k = 5;
    for (int phase = 0; phase < 2; phase++) {
        test_steps steps = test_steps_make(260 + (uint64_t)phase, base + k, 3, 6, 9, phase, 1);
        const double phase_mass = phase ? 0.5 : 0.0;
        kvc_layer *layer = test_linear_with(&steps, base, phase_mass);
        CHECK(layer != NULL);
        reference r = reference_new(&steps, phase_mass);
        for (size_t i = 0; i < base; i++) reference_step(&r, &steps, i, NULL);
        double *committed = test_alloc(state_len(&r) * sizeof(double));
        double *scratch = test_alloc(k * state_len(&r) * sizeof(double));
        float out[3 * 9], want[3 * 9];
        memcpy(committed, r.S, state_len(&r) * sizeof(double));
        CHECK_OK(kvc_layer_begin_verify(layer));
        for (size_t t = 1; t <= k; t++) {
            CHECK_OK(test_steps_take(layer, &steps, base + t - 1, 1, out));
            reference_step(&r, &steps, base + t - 1, want);
            CHECK(test_bits_equal(out, want, 3 * 9));
            CHECK(kvc_layer_draft_len(layer) == t);
            /* The committed state stays; snapshot t is the state after t steps. */
            CHECK_OK(kvc_layer_linear_state(layer, scratch, state_len(&r)));
            CHECK(memcmp(scratch, committed, state_len(&r) * sizeof(double)) == 0);
            CHECK_STATUS(kvc_layer_linear_scratch(layer, scratch, t * state_len(&r) - 1),
                         KVC_E_LENGTH);
            CHECK_OK(kvc_layer_linear_scratch(layer, scratch, t * state_len(&r)));
            CHECK(state_is(scratch + (t - 1) * state_len(&r), &r));
        }
        kvc_layer_free(layer);
        free(committed);
        free(scratch);
        free(r.S);
        test_steps_free(&steps);
    }
}

TEST(steps_should_count_tentative_steps) {
    test_steps steps = test_steps_make(262, 20, 2, 3, 4, 0, 1);
    kvc_layer *layer = test_linear_with(&steps, 4, 0.0);
    CHECK(layer != NULL);
    CHECK(kvc_layer_steps(layer) == 4);
    CHECK_OK(kvc_layer_begin_verify(layer));
    CHECK(kvc_layer_steps(layer) == 4);
    CHECK_OK(test_steps_take(layer, &steps, 4, 3, NULL));
    CHECK(kvc_layer_steps(layer) == 7);
    CHECK_OK(kvc_layer_accept(layer, 2));
    CHECK(kvc_layer_steps(layer) == 6);
    CHECK_OK(kvc_layer_begin_verify(layer));
    CHECK_OK(test_steps_take(layer, &steps, 6, 4, NULL));
    CHECK(kvc_layer_steps(layer) == 10);
    CHECK_OK(kvc_layer_accept(layer, 0));
    CHECK(kvc_layer_steps(layer) == 6);
    kvc_layer_free(layer);
    test_steps_free(&steps);
}

TEST(accept_j_should_equal_taking_only_the_first_j_steps) {
    const size_t base = 5, k = 6;
    for (int phase = 0; phase < 2; phase++) {
        for (int decay = 0; decay < 2; decay++) {
            test_steps steps = test_steps_make(270 + (uint64_t)(phase * 2 + decay), base + k,
                                               2, 4, 7, phase, decay);
            const double phase_mass = phase ? 0.5 : 0.0;
            float *out = test_alloc(k * 2 * 7 * sizeof(float));
            for (size_t j = 0; j <= k; j++) {
                kvc_layer *layer = test_linear_with(&steps, base, phase_mass);
                kvc_layer *plain = test_linear_with(&steps, base, phase_mass);
                CHECK(layer != NULL && plain != NULL);
                CHECK_OK(kvc_layer_begin_verify(layer));
                CHECK_OK(test_steps_take(layer, &steps, base, k, out));
                CHECK_OK(kvc_layer_accept(layer, j));
                CHECK(kvc_layer_verifying(layer) == 0 && kvc_layer_draft_len(layer) == 0);
                /* The plain layer's outputs are the first j tentative ones. */
                float *plain_out = test_alloc(j * 2 * 7 * sizeof(float) + 1);
                CHECK_OK(test_steps_take(plain, &steps, base, j, plain_out));
                CHECK(test_bits_equal(plain_out, out, j * 2 * 7));
                CHECK(test_layers_equal(layer, plain));
                free(plain_out);
                kvc_layer_free(layer);
                kvc_layer_free(plain);
            }
            free(out);
            test_steps_free(&steps);
        }
    }
}

TEST(accept_zero_should_leave_the_state_untouched) {
    test_steps steps = test_steps_make(275, 12, 3, 5, 3, 0, 1);
    kvc_layer *layer = test_linear_with(&steps, 6, 0.0);
    CHECK(layer != NULL);
    test_state *before = test_state_take(layer);
    CHECK_OK(kvc_layer_begin_verify(layer));
    CHECK_OK(test_steps_take(layer, &steps, 6, 6, NULL));
    CHECK_OK(kvc_layer_accept(layer, 0));
    CHECK(test_state_matches(layer, before));
    test_state_free(before);
    kvc_layer_free(layer);
    test_steps_free(&steps);
}

/* ---- clone and clear ---- */

TEST(clone_of_linear_layer_should_evolve_independently) {
    test_steps steps = test_steps_make(280, 30, 2, 6, 5, 1, 1);
    kvc_layer *copy, *layer = test_linear_with(&steps, 10, 0.5);
    CHECK(layer != NULL);
    CHECK_OK(kvc_layer_clone(layer, &copy));
    CHECK(test_layers_equal(copy, layer));
    test_state *original = test_state_take(layer);
    /* The clone steps on; the original stays. */
    CHECK_OK(test_steps_take(copy, &steps, 10, 10, NULL));
    CHECK(test_state_matches(layer, original));
    /* The original steps on; the clone stays. */
    test_state *cloned = test_state_take(copy);
    CHECK_OK(test_steps_take(layer, &steps, 20, 5, NULL));
    CHECK(test_state_matches(copy, cloned));
    /* The clone outlives the original and is the layer of its 20 steps. */
    kvc_layer_free(layer);
    kvc_layer *plain = test_linear_with(&steps, 20, 0.5);
    CHECK(plain != NULL && test_layers_equal(copy, plain));
    kvc_layer_free(plain);
    kvc_layer_free(copy);
    test_state_free(original);
    test_state_free(cloned);
    test_steps_free(&steps);
}

TEST(clear_should_zero_state_and_steps_and_end_a_verify) {
    test_steps steps = test_steps_make(281, 20, 3, 4, 6, 0, 1);
    kvc_layer *layer = test_linear_with(&steps, 8, 0.0);
    kvc_layer *fresh = test_linear_with(&steps, 0, 0.0);
    CHECK(layer != NULL && fresh != NULL);
    CHECK_OK(kvc_layer_begin_verify(layer));
    CHECK_OK(test_steps_take(layer, &steps, 8, 4, NULL));
    kvc_layer_clear(layer);
    CHECK(kvc_layer_verifying(layer) == 0 && kvc_layer_draft_len(layer) == 0);
    CHECK(kvc_layer_steps(layer) == 0);
    CHECK(kvc_layer_memory_bytes(layer) == 3 * 4 * 6 * 8);
    CHECK(test_layers_equal(layer, fresh));
    /* It steps on as a fresh layer, committing (no verify is left open). */
    CHECK_OK(test_steps_take(layer, &steps, 0, 10, NULL));
    CHECK_OK(test_steps_take(fresh, &steps, 0, 10, NULL));
    CHECK(test_layers_equal(layer, fresh));
    CHECK(kvc_layer_steps(layer) == 10);
    kvc_layer_free(layer);
    kvc_layer_free(fresh);
    test_steps_free(&steps);
}

TEST(describe_should_name_linear_kind_and_steps) {
    test_steps steps = test_steps_make(282, 3, 2, 4, 4, 0, 0);
    kvc_layer *layer = test_linear_with(&steps, 3, 0.0);
    CHECK(layer != NULL);
    char buf[512];
    CHECK(kvc_layer_describe(layer, buf, sizeof buf) == strlen(buf));
    CHECK(strstr(buf, "kind=linear") != NULL);
    CHECK(strstr(buf, "steps=3") != NULL);
    kvc_layer_free(layer);
    test_steps_free(&steps);
}

/* ---- out of memory ---- */

typedef struct step_ctx {
    kvc_layer *layer;
    const test_steps *steps;
    size_t at;
} step_ctx;

static kvc_status op_step(void *ctx) {
    step_ctx *s = ctx;
    return test_steps_take(s->layer, s->steps, s->at, 1, NULL);
}

TEST(tentative_step_should_fail_cleanly_on_allocation_failure) {
    const size_t base = 3, k = 20;
    test_steps steps = test_steps_make(290, base + k, 2, 5, 3, 0, 1);
    CHECK_OK(test_fault_install());
    kvc_layer *layer = test_linear_with(&steps, base, 0.0);
    CHECK(layer != NULL);
    CHECK_OK(kvc_layer_begin_verify(layer));
    long failed = 0;
    for (size_t t = 0; t < k; t++) {
        step_ctx s = {layer, &steps, base + t};
        const long f = test_run_with_faults(op_step, &s, layer, (int)(t % 2), TEST_KEEPS_NONE);
        CHECK(f >= 0);
        failed += f;
    }
    /* The scratch grew a few times over 20 snapshots, each growth failed once. */
    CHECK(failed > 1);
    CHECK(kvc_layer_draft_len(layer) == k);
    CHECK_OK(kvc_layer_accept(layer, 11));
    kvc_layer *plain = test_linear_with(&steps, base + 11, 0.0);
    CHECK(plain != NULL && test_layers_equal(layer, plain));
    kvc_layer_free(plain);
    kvc_layer_free(layer);
    CHECK(test_fault_remove() == 0);
    test_steps_free(&steps);
}

typedef struct create_ctx {
    const kvc_layer *source; /* clone it, or create a layer when NULL */
    kvc_layer *out;
} create_ctx;

static kvc_status op_create_or_clone(void *ctx) {
    create_ctx *c = ctx;
    c->out = (kvc_layer *)c;
    const kvc_status status = c->source ? kvc_layer_clone(c->source, &c->out)
                                        : kvc_layer_create_linear(3, 4, 5, 0.5, &c->out);
    return test_out_rule(status, c->out);
}

TEST(create_linear_and_clone_should_fail_cleanly_on_allocation_failure) {
    test_steps steps = test_steps_make(291, 6, 3, 4, 5, 1, 1);
    CHECK_OK(test_fault_install());
    for (int persistent = 0; persistent < 2; persistent++) {
        create_ctx c = {NULL, NULL};
        CHECK(test_run_with_faults(op_create_or_clone, &c, NULL, persistent, TEST_KEEPS_NONE) >=
              2);
        CHECK(c.out != NULL && kvc_layer_steps(c.out) == 0);
        CHECK_OK(test_steps_take(c.out, &steps, 0, 6, NULL));
        create_ctx copy = {c.out, NULL};
        CHECK(test_run_with_faults(op_create_or_clone, &copy, c.out, persistent,
                                   TEST_KEEPS_NONE) >= 2);
        CHECK(test_layers_equal(copy.out, c.out));
        kvc_layer_free(c.out);
        kvc_layer_free(copy.out);
    }
    CHECK(test_fault_remove() == 0);
    test_steps_free(&steps);
}

RUN_TESTS(CASE(step_should_match_f64_reference_bit_for_bit_after_every_step),
          CASE(phase_step_should_match_f64_reference_of_cos_sin_features),
          CASE(step_output_should_sum_features_in_order_from_zero),
          CASE(phase_step_should_use_m_of_the_layer_phase_mass),
          CASE(phase_step_should_refuse_odd_num_features),
          CASE(create_linear_should_report_geometry_and_a_zero_state),
          CASE(memory_bytes_of_linear_layer_should_be_state_size_times_one_plus_tentative),
          CASE(create_linear_should_refuse_bad_geometry),
          CASE(create_linear_should_refuse_negative_or_nonfinite_phase_mass),
          CASE(step_should_refuse_nonfinite_inputs_and_change_nothing),
          CASE(phase_step_should_refuse_nonfinite_inputs_and_change_nothing),
          CASE(step_should_refuse_null_pointers),
          CASE(state_reads_should_refuse_short_buffer_and_null),
          CASE(full_layer_calls_on_linear_layer_should_return_kind),
          CASE(linear_calls_on_full_layer_should_return_kind),
          CASE(tentative_steps_should_leave_state_and_fill_scratch_one_snapshot_per_step),
          CASE(steps_should_count_tentative_steps),
          CASE(accept_j_should_equal_taking_only_the_first_j_steps),
          CASE(accept_zero_should_leave_the_state_untouched),
          CASE(clone_of_linear_layer_should_evolve_independently),
          CASE(clear_should_zero_state_and_steps_and_end_a_verify),
          CASE(describe_should_name_linear_kind_and_steps),
          CASE(tentative_step_should_fail_cleanly_on_allocation_failure),
          CASE(create_linear_and_clone_should_fail_cleanly_on_allocation_failure))
