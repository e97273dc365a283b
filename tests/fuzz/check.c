/* check.c -- the invariants of the fuzz harnesses (check.h). */
#include "check.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char context[256], detail[256];

/* KVC_FUZZ_TRACE=1 prints every call and its status: what an input does. */
static int tracing(void) {
    static int trace = -1;
    if (trace < 0) trace = getenv("KVC_FUZZ_TRACE") != NULL;
    return trace;
}

void fuzz_context(const char *format, ...) {
    va_list args;
    va_start(args, format);
    vsnprintf(context, sizeof context, format, args);
    va_end(args);
    detail[0] = '\0';
    if (tracing()) fprintf(stderr, "%s\n", context);
}

void fuzz_detail(const char *text) {
    snprintf(detail, sizeof detail, "%s", text);
    if (tracing()) fprintf(stderr, "  %s\n", detail);
}

void fuzz_fail(const char *file, int line, const char *what) {
    fprintf(stderr, "\n%s:%d: invariant violated: %s\n  while: %s\n  last call: %s\n", file, line,
            what, context, detail);
    abort();
}

void *fuzz_buffer(size_t bytes) {
    void *block = calloc(bytes ? bytes : 1, 1);
    if (!block) abort();
    return block;
}

int check_status(kvc_status got, status_set errors, int nomem, int fault) {
    /* Said with a violation below: what came back and what could have. */
    char said[160];
    snprintf(said, sizeof said, "returned %d (%s); errors that apply: 0x%llx; allocation failed: %d",
             (int)got, kvc_status_name(got), (unsigned long long)errors, fault);
    fuzz_detail(said);
    if (fault && got == KVC_E_NOMEM) {
        FUZZ_REQUIRE(nomem);
        return 0;
    }
    /* An allocation failed and the call did not say so. */
    FUZZ_REQUIRE(!fault);
    if (errors) {
        FUZZ_REQUIRE(got != KVC_OK && (unsigned)got < 64 && (errors & STATUS(got)));
        return 0;
    }
    FUZZ_REQUIRE(got == KVC_OK);
    return 1;
}

static int bits_equal(const void *a, const void *b, size_t bytes) {
    return bytes == 0 || memcmp(a, b, bytes) == 0;
}

int check_finite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(x[i])) return 0;
    }
    return 1;
}

/* ---- the state of a layer ---- */

/* Checks head h's rows of one component against the rows appended: f32 rows
 * bit for bit; an int8 row (from the window on) within half a step of the
 * q8 scheme, x = r s c with s = max |x / c| / 127, unless the ratio
 * saturated (kvcache.h: |x / c| above 2^127 is taken as 2^127), when the
 * row need only read back finite.  A value within half a step of FLT_MAX
 * alone may read back as +-Inf (r rounds away from zero); attention over
 * such a head is not checked for finite results (check_attention). */
static void check_rows(const kvc_layer *layer, const ref_full *full, size_t h, int is_values) {
    const size_t d = full->d, n = ref_head_len(full, h);
    float *rows = fuzz_buffer(n * d * sizeof(float));
    const kvc_status status = is_values ? kvc_layer_head_values(layer, h, rows, n * d)
                                        : kvc_layer_head_keys(layer, h, rows, n * d);
    FUZZ_REQUIRE(status == KVC_OK);
    const int quantized = ref_quantized(full->mode, is_values);
    const float *field = full->field[is_values] + h * d;
    size_t r = 0;
    for (size_t s = 0; s < full->len; s++) {
        if (!full->alive[s * full->H + h]) continue;
        const float *x = ref_row(full, s, h, is_values), *got = rows + r++ * d;
        if (!quantized || full->position[s] < KVC_Q8_WINDOW) {
            FUZZ_REQUIRE(bits_equal(got, x, d * sizeof(float)));
            continue;
        }
        double ratio = 0.0;
        for (size_t j = 0; j < d; j++) {
            const double t = fabs((double)x[j] / (double)field[j]);
            if (t > ratio) ratio = t;
        }
        if (ratio > 0x1p127) {
            for (size_t j = 0; j < d; j++) FUZZ_REQUIRE(isfinite(got[j]) || fabs(x[j]) >= 0x1p127);
            continue;
        }
        /* q4: groups step finer than the row's largest, never coarser */
        const double step = fmax(ratio / (ref_q4(full->mode, is_values) ? 7.0 : 127.0), 1e-30);
        for (size_t j = 0; j < d; j++) {
            const double bound = 0.5001 * step * field[j] + 1e-6 * (fabs(x[j]) + fabs(got[j])) + 1e-44;
            if (!isfinite(got[j])) {
                FUZZ_REQUIRE(fabs(x[j]) + bound >= FLT_MAX);
                continue;
            }
            FUZZ_REQUIRE(fabs((double)got[j] - (double)x[j]) <= bound);
        }
    }
    free(rows);
}

static void check_full(const kvc_layer *layer, const ref_layer *ref) {
    const ref_full *full = &ref->full;
    const size_t H = full->H, d = full->d, L = full->len;
    FUZZ_REQUIRE(kvc_layer_kind(layer) == KVC_KIND_FULL);
    FUZZ_REQUIRE(kvc_layer_num_kv_heads(layer) == H && kvc_layer_head_dim(layer) == d);
    FUZZ_REQUIRE(kvc_layer_mode(layer) == full->mode);
    FUZZ_REQUIRE(kvc_layer_num_heads(layer) == 0 && kvc_layer_steps(layer) == 0);
    FUZZ_REQUIRE(kvc_layer_seq_len(layer) == L);
    FUZZ_REQUIRE(kvc_layer_next_position(layer) == full->next_position);
    FUZZ_REQUIRE(kvc_layer_field_frozen(layer) == ref_frozen(full));

    uint32_t *positions = fuzz_buffer(L * sizeof(uint32_t));
    FUZZ_REQUIRE(kvc_layer_positions(layer, positions, L) == KVC_OK);
    FUZZ_REQUIRE(bits_equal(positions, full->position, L * sizeof(uint32_t)));
    if (L) FUZZ_REQUIRE(kvc_layer_positions(layer, positions, L - 1) == KVC_E_LENGTH);
    free(positions);
    float *imp = fuzz_buffer(L * sizeof(float));
    FUZZ_REQUIRE(kvc_layer_imp(layer, imp, L) == KVC_OK);
    FUZZ_REQUIRE(bits_equal(imp, full->imp, L * sizeof(float)));
    free(imp);

    for (size_t h = 0; h < H; h++) {
        const size_t n = ref_head_len(full, h);
        FUZZ_REQUIRE(kvc_layer_head_len(layer, h) == n);
        uint32_t *head_positions = fuzz_buffer(n * sizeof(uint32_t));
        FUZZ_REQUIRE(kvc_layer_head_positions(layer, h, head_positions, n) == KVC_OK);
        size_t r = 0;
        for (size_t s = 0; s < L; s++) {
            if (full->alive[s * H + h]) FUZZ_REQUIRE(head_positions[r++] == full->position[s]);
        }
        free(head_positions);
        check_rows(layer, full, h, 0);
        check_rows(layer, full, h, 1);
    }
    FUZZ_REQUIRE(kvc_layer_head_len(layer, H) == 0);
    FUZZ_REQUIRE(kvc_layer_head_keys(layer, H, NULL, 0) == KVC_E_KV_HEAD);
}

static void check_linear(const kvc_layer *layer, const ref_layer *ref) {
    const ref_linear *linear = &ref->linear;
    const size_t len = ref_state_len(linear);
    FUZZ_REQUIRE(kvc_layer_kind(layer) == KVC_KIND_LINEAR);
    FUZZ_REQUIRE(kvc_layer_num_heads(layer) == linear->H);
    FUZZ_REQUIRE(kvc_layer_num_features(layer) == linear->F);
    FUZZ_REQUIRE(kvc_layer_value_dim(layer) == linear->dv);
    const double phase_mass = kvc_layer_phase_mass(layer);
    FUZZ_REQUIRE(bits_equal(&phase_mass, &linear->phase_mass, sizeof phase_mass));
    FUZZ_REQUIRE(kvc_layer_steps(layer) == linear->steps + linear->tentative);
    FUZZ_REQUIRE(kvc_layer_seq_len(layer) == 0 && kvc_layer_next_position(layer) == 0);
    FUZZ_REQUIRE(kvc_layer_num_kv_heads(layer) == 0 && kvc_layer_head_dim(layer) == 0);
    double *states = fuzz_buffer((1 + linear->tentative) * len * sizeof(double));
    FUZZ_REQUIRE(kvc_layer_linear_state(layer, states, len) == KVC_OK);
    FUZZ_REQUIRE(bits_equal(states, linear->state, len * sizeof(double)));
    FUZZ_REQUIRE(kvc_layer_linear_state(layer, states, len - 1) == KVC_E_LENGTH);
    FUZZ_REQUIRE(kvc_layer_linear_scratch(layer, states, linear->tentative * len) == KVC_OK);
    FUZZ_REQUIRE(bits_equal(states, linear->scratch, linear->tentative * len * sizeof(double)));
    free(states);
}

void check_memory_formula(const kvc_layer *layer) {
    const kvc_kind kind = kvc_layer_kind(layer);
    /* A recurrent state (conv, delta, Mamba-2; alone or beside rows): the
     * convolution's kernel - 1 rows of channels, then each value head's
     * key_dim x value_dim, and as many again for each draft. */
    size_t states = 0;
    if (kvc_layer_state_len(layer)) {
        const size_t state = ((kvc_layer_conv_kernel(layer) - 1) * kvc_layer_channels(layer) +
                              kvc_layer_value_heads(layer) * kvc_layer_key_dim(layer) * kvc_layer_value_dim(layer)) *
                             sizeof(float);
        FUZZ_REQUIRE(kvc_layer_state_len(layer) * sizeof(float) == state);
        states = (1 + kvc_layer_draft_len(layer)) * state;
    }
    if (kind == KVC_KIND_LINEAR) {
        const size_t state = kvc_layer_num_heads(layer) * kvc_layer_num_features(layer) *
                             kvc_layer_value_dim(layer) * sizeof(double);
        FUZZ_REQUIRE(kvc_layer_memory_bytes(layer) == (1 + kvc_layer_draft_len(layer)) * state);
        return;
    }
    const size_t H = kvc_layer_num_kv_heads(layer), d = kvc_layer_head_dim(layer);
    if (H == 0) { /* no rows */
        FUZZ_REQUIRE(kvc_layer_memory_bytes(layer) == states);
        return;
    }
    const kvc_mode mode = kvc_layer_mode(layer);
    const size_t q4_row = 4 + ((d + 15) / 16 + 3) / 4 + (d + 1) / 2, residual = kvc_layer_residual_rows(layer);
    size_t bytes = kvc_layer_seq_len(layer) * (8 + (H + 7) / 8), window = 0;
    for (size_t h = 0; h < H; h++) {
        const size_t n = kvc_layer_head_len(layer, h);
        uint32_t *positions = fuzz_buffer(n * sizeof(uint32_t));
        FUZZ_REQUIRE(kvc_layer_head_positions(layer, h, positions, n) == KVC_OK);
        size_t w = 0;
        for (size_t r = 0; r < n; r++) w += positions[r] < KVC_Q8_WINDOW;
        free(positions);
        for (int is_values = 0; is_values < 2; is_values++) {
            if (!ref_quantized(mode, is_values)) bytes += n * d * 4;
            else bytes += w * d * 4 + (n - w) * (ref_q4(mode, is_values) ? q4_row : d + 4);
            if (ref_q4(mode, is_values)) window += (n - w < residual ? n - w : residual) * d * 4;
        }
    }
    if (kvc_layer_field_frozen(layer))
        bytes += (size_t)(ref_quantized(mode, 0) + ref_quantized(mode, 1)) * H * d * 4;
    bytes += states;
    /* q4: its windows' f32 copies, at most min(rows from W on, R) a head */
    const size_t memory = kvc_layer_memory_bytes(layer);
    FUZZ_REQUIRE(memory >= bytes && memory <= bytes + window && (memory - bytes) % (d * 4) == 0);
}

void check_layer(const kvc_layer *layer, const ref_layer *ref) {
    FUZZ_REQUIRE(layer != NULL);
    if (ref->kind == KVC_KIND_LINEAR) check_linear(layer, ref);
    else check_full(layer, ref);
    FUZZ_REQUIRE(kvc_layer_verifying(layer) == ref->verifying);
    FUZZ_REQUIRE(kvc_layer_draft_len(layer) == ref_draft_len(ref));
    const size_t memory = kvc_layer_memory_bytes(layer), upper = ref_memory_bytes(ref);
    FUZZ_REQUIRE(memory <= upper && memory >= upper - ref_memory_slack(ref));
    if (ref->kind == KVC_KIND_FULL) FUZZ_REQUIRE((upper - memory) % (ref->full.d * 4) == 0);
    FUZZ_REQUIRE(kvc_layer_capacity_bytes(layer) >= memory);
    FUZZ_REQUIRE((kvc_layer_snapshot_size(layer) == 0) == ref->verifying);
    /* describe: snprintf's contract, truncated or not. */
    char line[48];
    const size_t needed = kvc_layer_describe(layer, line, sizeof line);
    FUZZ_REQUIRE(needed > 0 && strlen(line) == (needed < sizeof line ? needed : sizeof line - 1));
    FUZZ_REQUIRE(kvc_layer_describe(layer, NULL, 0) == needed);
}

/* ---- attention ---- */

static float max_abs(const float *x, size_t n) {
    float m = 0.0f;
    for (size_t i = 0; i < n; i++) m = fmaxf(m, fabsf(x[i]));
    return m;
}

/* 1 when no intermediate of the q8 path can overflow for the first n rows
 * of head h: q * c_K, and the scores and weighted sums that scale with
 * s * 127 = max |x / c| of a row (kvcache.h: the ratio saturates at
 * 2^127, so a row can carry far more than its values). */
static int q8_tame(const ref_full *full, size_t h, float max_q, size_t n) {
    const size_t d = full->d;
    for (int is_values = 0; is_values < 2; is_values++) {
        if (!ref_quantized(full->mode, is_values) || !ref_frozen(full)) continue;
        const float *field = full->field[is_values] + h * d;
        const double max_c = max_abs(field, d);
        if (!is_values && (double)max_q * max_c > 1e30) return 0;
        size_t r = 0;
        for (size_t s = 0; s < full->len && r < n; s++) {
            if (!full->alive[s * full->H + h]) continue;
            r++;
            if (full->position[s] < KVC_Q8_WINDOW) continue;
            const float *x = ref_row(full, s, h, is_values);
            for (size_t j = 0; j < d; j++) {
                const double ratio = fabs((double)x[j] / (double)field[j]);
                if (ratio * (double)n > 1e30) return 0;
                if (!is_values && ratio * max_c * (double)max_q * (double)d > 1e30) return 0;
            }
        }
    }
    return 1;
}

void check_attention(const kvc_layer *layer, const ref_layer *ref, size_t h, const float *q,
                     const float *out, const float *probs, size_t n) {
    const size_t d = kvc_layer_head_dim(layer), rows = kvc_layer_head_len(layer, h);
    const kvc_mode mode = kvc_layer_mode(layer);
    FUZZ_REQUIRE(n <= rows);
    if (n == 0) {
        for (size_t j = 0; j < d; j++) FUZZ_REQUIRE(out[j] == 0.0f);
        return;
    }
    float *K = fuzz_buffer(rows * d * sizeof(float)), *V = fuzz_buffer(rows * d * sizeof(float));
    FUZZ_REQUIRE(kvc_layer_head_keys(layer, h, K, rows * d) == KVC_OK);
    FUZZ_REQUIRE(kvc_layer_head_values(layer, h, V, rows * d) == KVC_OK);
    const float max_q = max_abs(q, d), max_k = max_abs(K, n * d), max_v = max_abs(V, n * d);
    int tame = (double)max_q * max_k * (double)d <= 1e30 && max_v <= 1e30 && check_finite(K, n * d) &&
               check_finite(V, n * d);
    const int quantized = ref_quantized(mode, 0) || ref_quantized(mode, 1);
    if (quantized && kvc_layer_field_frozen(layer)) tame = tame && ref && q8_tame(&ref->full, h, max_q, n);

    /* The definition over the rows read back (dequantized where int8). */
    float *out_def = fuzz_buffer(d * sizeof(float)), *probs_def = fuzz_buffer(n * sizeof(float));
    FUZZ_REQUIRE(kvc_attention_head(q, K, V, n, d, out_def, probs_def) == KVC_OK);
    if (!ref_quantized(mode, 0)) {
        /* f32 keys: the same scores and softmax, so the same probabilities. */
        if (probs) FUZZ_REQUIRE(bits_equal(probs, probs_def, n * sizeof(float)));
        if (!ref_quantized(mode, 1)) FUZZ_REQUIRE(bits_equal(out, out_def, d * sizeof(float)));
    }
    if (tame) {
        FUZZ_REQUIRE(check_finite(out, d));
        if (probs) {
            double sum = 0.0;
            for (size_t p = 0; p < n; p++) {
                FUZZ_REQUIRE(probs[p] >= 0.0f && probs[p] <= 1.0f);
                sum += probs[p];
            }
            FUZZ_REQUIRE(fabs(sum - 1.0) <= 1e-4);
        }
        /* A query of attend_causal that sees fewer rows than the head holds
         * reads a q4 component as the layer held it then: its residual
         * window reaches back further, so rows the head now reads through
         * 4 bits it may read as appended (the reference's rows). */
        const int own_window = ref && ref->kind == KVC_KIND_FULL && ref_q4(mode, 1) && n < rows;
        float *appended = own_window ? fuzz_buffer(n * d * sizeof(float)) : NULL;
        for (size_t s = 0, r = 0; own_window && r < n; s++) {
            if (!ref->full.alive[s * ref->full.H + h]) continue;
            memcpy(appended + r++ * d, ref_row(&ref->full, s, h, 1), d * sizeof(float));
        }
        for (size_t j = 0; j < d; j++) {
            float lo = V[j], hi = V[j], size = 0.0f;
            for (size_t p = 0; p < n; p++) {
                lo = fminf(lo, V[p * d + j]);
                hi = fmaxf(hi, V[p * d + j]);
                size = fmaxf(size, fabsf(V[p * d + j]));
                if (!appended) continue;
                lo = fminf(lo, appended[p * d + j]);
                hi = fmaxf(hi, appended[p * d + j]);
                size = fmaxf(size, fabsf(appended[p * d + j]));
            }
            const double slack = 1e-4 * size + 1e-37;
            FUZZ_REQUIRE(out[j] >= lo - slack && out[j] <= hi + slack);
        }
        free(appended);
        const int own_q4_window = (ref_q4(mode, 0) || ref_q4(mode, 1)) && n < rows;
        if (quantized && !own_q4_window) {
            /* Close to the definition while the scores are moderate and
             * the i16 codes of q~ resolve them: kvcache.h bounds their
             * error by about 2^-24 max |q~| a channel, which over a row is
             * 2^-24 max |q~| sum_j |r_j s| / sqrt(d), |r_j s| = |x_j| / c_j
             * (taken 4x here).  A field whose channels span more than
             * about 2^24 leaves the query's small channels unresolved: the
             * DESIGN's 1e-3 is not met there (open). */
            double largest = 0.0, unresolved = 0.0;
            const int coded = ref_quantized(mode, 0) && kvc_layer_field_frozen(layer);
            const float *field = coded ? ref->full.field[0] + h * d : NULL;
            double max_q_field = 0.0;
            for (size_t j = 0; coded && j < d; j++) max_q_field = fmax(max_q_field, fabs((double)q[j] * field[j]));
            for (size_t p = 0; p < n; p++) {
                double dot = 0.0, codes = 0.0;
                for (size_t j = 0; j < d; j++) {
                    dot += fabs((double)q[j] * K[p * d + j]);
                    if (coded) codes += fabs((double)K[p * d + j]) / field[j];
                }
                largest = fmax(largest, dot / sqrt((double)d));
                unresolved = fmax(unresolved, 0x1p-22 * max_q_field * codes / sqrt((double)d));
            }
            if (largest <= 50.0 && unresolved <= 1e-3) {
                const double slack = (ref_quantized(mode, 0) ? 1e-2 : 1e-4) * max_v + 1e-37;
                for (size_t j = 0; j < d; j++) FUZZ_REQUIRE(fabs((double)out[j] - out_def[j]) <= slack);
                for (size_t p = 0; probs && p < n; p++) FUZZ_REQUIRE(fabs((double)probs[p] - probs_def[p]) <= 1e-2);
            }
        }
    }
    free(out_def);
    free(probs_def);
    free(K);
    free(V);
}

void check_attend_every_head(const kvc_layer *layer, const ref_layer *ref) {
    const size_t H = kvc_layer_num_kv_heads(layer), d = kvc_layer_head_dim(layer);
    float *q = fuzz_buffer(d * sizeof(float)), *out = fuzz_buffer(d * sizeof(float));
    for (size_t h = 0; h < H; h++) {
        const size_t n = kvc_layer_head_len(layer, h);
        float *probs = fuzz_buffer(n * sizeof(float));
        for (int which = 0; which < 2; which++) {
            for (size_t j = 0; j < d; j++) q[j] = which ? (float)((int)(j % 7) - 3) * 0.25f : 0.5f;
            FUZZ_REQUIRE(kvc_layer_attend(layer, q, h, out, probs) == KVC_OK);
            check_attention(layer, ref, h, q, out, probs, n);
        }
        free(probs);
    }
    free(q);
    free(out);
}

/* ---- snapshots ---- */

uint8_t *check_serialize(const kvc_layer *layer, size_t *size) {
    *size = kvc_layer_snapshot_size(layer);
    FUZZ_REQUIRE(*size > 0);
    uint8_t *bytes = fuzz_buffer(*size);
    FUZZ_REQUIRE(kvc_layer_serialize(layer, bytes, *size - 1) == KVC_E_LENGTH);
    FUZZ_REQUIRE(kvc_layer_serialize(layer, bytes, *size) == KVC_OK);
    return bytes;
}

uint8_t *check_serialize_model(const kvc_model *model, size_t *size) {
    *size = kvc_model_snapshot_size(model);
    FUZZ_REQUIRE(*size > 0);
    uint8_t *bytes = fuzz_buffer(*size);
    FUZZ_REQUIRE(kvc_model_serialize(model, bytes, *size - 1) == KVC_E_LENGTH);
    FUZZ_REQUIRE(kvc_model_serialize(model, bytes, *size) == KVC_OK);
    return bytes;
}
