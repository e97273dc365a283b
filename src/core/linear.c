/*
 * linear.c -- linear-attention layers: a fixed-size recurrent state instead
 * of rows.
 *
 * Per head h and feature f, S[h][f] is a row of value_dim f64 values:
 *   S[h][f] <- decay[h][f] * S[h][f] + phi_k[h][f] * v[h],
 *   out[h]   = sum_f phi_q[h][f] * S[h][f]      (read after the update).
 * During a speculative verify each step writes a new snapshot into scratch
 * instead, so that accepting j steps is one copy and rejecting is nothing.
 */
#include <math.h>
#include <string.h>

#include "internal.h"

static size_t linear_len(const void *state) {
    const kvc_linear *linear = state;
    return linear->num_heads * linear->num_features * linear->value_dim;
}

static size_t work_len(size_t num_features, size_t value_dim) {
    return 3 * num_features + 2 * value_dim;
}

static void linear_free(void *state) {
    kvc_linear *linear = state;
    if (!linear) return;
    kvc_free(linear->state);
    kvc_free(linear->scratch);
    kvc_free(linear->work);
    kvc_free(linear);
}

/* A linear state with zero steps; NULL when out of memory. */
static kvc_linear *linear_alloc(size_t num_heads, size_t num_features, size_t value_dim,
                                double phase_mass) {
    kvc_linear *linear = kvc_malloc(sizeof *linear);
    if (!linear) return NULL;
    memset(linear, 0, sizeof *linear);
    linear->num_heads = num_heads;
    linear->num_features = num_features;
    linear->value_dim = value_dim;
    linear->phase_mass = phase_mass;
    const size_t per_head = num_features * value_dim; /* <= 2^24: no overflow */
    if (per_head > SIZE_MAX / num_heads) {
        kvc_free(linear);
        return NULL;
    }
    linear->state = kvc_realloc_array(NULL, num_heads * per_head, sizeof(double));
    linear->work = kvc_realloc_array(NULL, work_len(num_features, value_dim), sizeof(double));
    if (!linear->state || !linear->work) {
        linear_free(linear);
        return NULL;
    }
    return linear;
}

kvc_status kvc_layer_create_linear(size_t num_heads, size_t num_features, size_t value_dim,
                                   double phase_mass, kvc_layer **out) {
    if (!out) return KVC_E_NULL_POINTER;
    *out = NULL;
    if (num_heads == 0 || num_heads > KVC_MAX_KV_HEADS) return KVC_E_NUM_HEADS;
    if (num_features == 0 || num_features > KVC_MAX_HEAD_DIM) return KVC_E_NUM_FEATURES;
    if (value_dim == 0 || value_dim > KVC_MAX_HEAD_DIM) return KVC_E_VALUE_DIM;
    if (!(phase_mass >= 0.0) || !isfinite(phase_mass)) return KVC_E_PHASE_MASS;
    kvc_layer *layer = kvc_layer_alloc(KVC_KIND_LINEAR);
    if (!layer) return KVC_E_NOMEM;
    kvc_linear *linear = linear_alloc(num_heads, num_features, value_dim, phase_mass);
    if (!linear) {
        kvc_layer_free(layer);
        return KVC_E_NOMEM;
    }
    layer->state = linear;
    kvc_linear_states.clear(linear);
    *out = layer;
    return KVC_OK;
}

static kvc_status linear_clone(void **dst, const void *state) {
    const kvc_linear *src = state;
    kvc_linear *copy = linear_alloc(src->num_heads, src->num_features, src->value_dim,
                                    src->phase_mass);
    if (!copy) return KVC_E_NOMEM;
    memcpy(copy->state, src->state, linear_len(src) * sizeof(double));
    copy->steps = src->steps;
    *dst = copy;
    return KVC_OK;
}

static void linear_clear(void *state) {
    kvc_linear *linear = state;
    memset(linear->state, 0, linear_len(linear) * sizeof(double));
    linear->steps = 0;
    linear->tentative = 0;
}

static void linear_commit(void *state, size_t j) {
    kvc_linear *linear = state;
    const size_t len = linear_len(linear);
    if (j > 0) memcpy(linear->state, linear->scratch + (j - 1) * len, len * sizeof(double));
    linear->steps += j;
    linear->tentative = 0;
}

static size_t linear_memory_bytes(const void *state) {
    const kvc_linear *linear = state;
    return (1 + linear->tentative) * linear_len(linear) * sizeof(double);
}

static size_t linear_capacity_bytes(const void *state) {
    const kvc_linear *linear = state;
    return sizeof *linear + (1 + linear->scratch_cap) * linear_len(linear) * sizeof(double) +
           work_len(linear->num_features, linear->value_dim) * sizeof(double);
}

static size_t linear_steps(const void *state) {
    const kvc_linear *linear = state;
    return linear->steps + linear->tentative;
}

static size_t linear_tentative(const void *state) {
    return ((const kvc_linear *)state)->tentative;
}

const kvc_state_traits kvc_linear_states = {linear_free,   linear_clone,          linear_clear,
                                            linear_len,    linear_memory_bytes,   linear_capacity_bytes,
                                            linear_commit, linear_steps,          linear_tentative};

/* Where one head's f64 inputs and output live during a step. */
typedef struct head_work {
    double *decay, *phi_k, *phi_q, *v, *out;
} head_work;

static head_work work_of(const kvc_linear *linear) {
    const size_t F = linear->num_features;
    double *w = linear->work;
    return (head_work){w, w + F, w + 2 * F, w + 3 * F, w + 3 * F + linear->value_dim};
}

/* phi(theta) = [cos(m theta_1..P), sin(m theta_1..P)] in f64. */
static void phase_features(size_t P, double m, const float *theta, double *phi) {
    for (size_t i = 0; i < P; i++) {
        phi[i] = cos(m * (double)theta[i]);
        phi[P + i] = sin(m * (double)theta[i]);
    }
}

static void widen(size_t n, const float *x, double *y) {
    for (size_t i = 0; i < n; i++) y[i] = (double)x[i];
}

/* The step behind both entry points: `key_in` and `query_in` are features
 * (phase = 0) or phases (phase = 1). */
static kvc_status linear_step(kvc_layer *layer, const float *decay, const float *key_in,
                              const float *query_in, const float *v, float *out, int phase) {
    if (!layer || !key_in || !query_in || !v || !out) return KVC_E_NULL_POINTER;
    if (layer->kind != KVC_KIND_LINEAR) return KVC_E_KIND;
    kvc_linear *linear = kvc_linear_of(layer);
    const size_t H = linear->num_heads, F = linear->num_features, dv = linear->value_dim;
    const size_t in_len = phase ? F / 2 : F;
    if (phase && F % 2 != 0) return KVC_E_NUM_FEATURES;
    const kvc_kernels *kernels = kvc_kernels_active();
    if (decay && !kernels->all_finite(H * F, decay)) return KVC_E_NONFINITE_DECAY;
    if (!kernels->all_finite(H * in_len, key_in)) return KVC_E_NONFINITE_KEY;
    if (!kernels->all_finite(H * in_len, query_in)) return KVC_E_NONFINITE_QUERY;
    if (!kernels->all_finite(H * dv, v)) return KVC_E_NONFINITE_VALUE;
    if (linear->steps + linear->tentative >= KVC_MAX_POSITIONS) return KVC_E_TOO_LONG;

    const size_t len = linear_len(linear);
    if (layer->verifying) {
        size_t cap = kvc_grown_capacity(linear->scratch_cap, linear->tentative + 1, SIZE_MAX);
        if (cap) {
            double *scratch = kvc_realloc_array(linear->scratch, cap, len * sizeof(double));
            if (!scratch) return KVC_E_NOMEM;
            linear->scratch = scratch;
            linear->scratch_cap = cap;
        }
    }
    const double *src = linear->tentative ? linear->scratch + (linear->tentative - 1) * len
                                          : linear->state;
    double *dst = layer->verifying ? linear->scratch + linear->tentative * len : linear->state;
    const double m = 1.0 / (1.0 + linear->phase_mass);
    const head_work w = work_of(linear);
    for (size_t h = 0; h < H; h++) {
        for (size_t f = 0; f < F; f++) w.decay[f] = decay ? (double)decay[h * F + f] : 1.0;
        if (phase) {
            phase_features(in_len, m, key_in + h * in_len, w.phi_k);
            phase_features(in_len, m, query_in + h * in_len, w.phi_q);
        } else {
            widen(F, key_in + h * F, w.phi_k);
            widen(F, query_in + h * F, w.phi_q);
        }
        widen(dv, v + h * dv, w.v);
        const size_t at = h * F * dv;
        kernels->linear_update_f64(F, dv, w.decay, w.phi_k, w.v, src + at, dst + at);
        kernels->linear_read_f64(F, dv, w.phi_q, dst + at, w.out);
        for (size_t j = 0; j < dv; j++) out[h * dv + j] = (float)w.out[j];
    }
    if (layer->verifying) linear->tentative++;
    else linear->steps++;
    return KVC_OK;
}

kvc_status kvc_layer_linear_step(kvc_layer *layer, const float *decay, const float *phi_k,
                                 const float *phi_q, const float *v, float *out) {
    return linear_step(layer, decay, phi_k, phi_q, v, out, 0);
}

kvc_status kvc_layer_linear_step_phase(kvc_layer *layer, const float *decay,
                                       const float *theta_k, const float *theta_q,
                                       const float *v, float *out) {
    return linear_step(layer, decay, theta_k, theta_q, v, out, 1);
}

/* Shared by the two state reads: checks, then `count` states from `src`. */
static kvc_status copy_states(const kvc_layer *layer, int scratch, double *dst,
                              size_t dst_len) {
    if (!layer) return KVC_E_NULL_POINTER;
    if (layer->kind != KVC_KIND_LINEAR) return KVC_E_KIND;
    const kvc_linear *linear = kvc_linear_of(layer);
    const size_t count = (scratch ? linear->tentative : 1) * linear_len(linear);
    if (count && !dst) return KVC_E_NULL_POINTER;
    if (dst_len < count) return KVC_E_LENGTH;
    if (count) memcpy(dst, scratch ? linear->scratch : linear->state, count * sizeof(double));
    return KVC_OK;
}

kvc_status kvc_layer_linear_state(const kvc_layer *layer, double *dst, size_t dst_len) {
    return copy_states(layer, 0, dst, dst_len);
}

kvc_status kvc_layer_linear_scratch(const kvc_layer *layer, double *dst, size_t dst_len) {
    return copy_states(layer, 1, dst, dst_len);
}

kvc_kind kvc_layer_kind(const kvc_layer *layer) {
    return layer ? layer->kind : KVC_KIND_FULL;
}

size_t kvc_layer_num_heads(const kvc_layer *layer) {
    const kvc_linear *linear = layer ? kvc_linear_of(layer) : NULL;
    return linear ? linear->num_heads : 0;
}

size_t kvc_layer_num_features(const kvc_layer *layer) {
    const kvc_linear *linear = layer ? kvc_linear_of(layer) : NULL;
    return linear ? linear->num_features : 0;
}

size_t kvc_layer_value_dim(const kvc_layer *layer) {
    const kvc_recurrent *r = layer ? kvc_recurrent_of(layer) : NULL;
    const kvc_linear *linear = layer ? kvc_linear_of(layer) : NULL;
    return r ? r->value_dim : linear ? linear->value_dim : 0;
}

double kvc_layer_phase_mass(const kvc_layer *layer) {
    const kvc_linear *linear = layer ? kvc_linear_of(layer) : NULL;
    return linear ? linear->phase_mass : 0.0;
}

size_t kvc_layer_steps(const kvc_layer *layer) {
    const kvc_state_traits *states = layer ? kvc_kind_traits_of(layer->kind)->state : NULL;
    return states ? states->steps(layer->state) : 0;
}
