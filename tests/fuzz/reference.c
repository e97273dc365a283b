/* reference.c -- the harness's model of a layer (reference.h). */
#include "reference.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The harness's own memory: running out of it is not the library's failure. */
static void *grow(void *block, size_t bytes) {
    void *grown = realloc(block, bytes ? bytes : 1);
    if (!grown) abort();
    return grown;
}

void ref_init_full(ref_layer *ref, size_t H, size_t d, kvc_mode mode) {
    memset(ref, 0, sizeof *ref);
    ref->kind = KVC_KIND_FULL;
    ref->full.H = H;
    ref->full.d = d;
    ref->full.mode = mode;
    ref->full.field[0] = grow(NULL, H * d * sizeof(float));
    ref->full.field[1] = grow(NULL, H * d * sizeof(float));
}

void ref_init_linear(ref_layer *ref, size_t H, size_t F, size_t dv, double phase_mass) {
    memset(ref, 0, sizeof *ref);
    ref->kind = KVC_KIND_LINEAR;
    ref->linear.H = H;
    ref->linear.F = F;
    ref->linear.dv = dv;
    ref->linear.phase_mass = phase_mass;
    ref->linear.state = grow(NULL, ref_state_len(&ref->linear) * sizeof(double));
    memset(ref->linear.state, 0, ref_state_len(&ref->linear) * sizeof(double));
}

/* A copy of n bytes of src in the harness's memory (NULL stays NULL). */
static void *copy_of(const void *src, size_t bytes) {
    if (!src) return NULL;
    void *copy = grow(NULL, bytes);
    memcpy(copy, src, bytes);
    return copy;
}

void ref_copy(ref_layer *dst, const ref_layer *src) {
    *dst = *src;
    const ref_full *f = &src->full;
    const size_t H = f->H, d = f->d;
    dst->full.position = copy_of(f->position, f->cap * sizeof(uint32_t));
    dst->full.imp = copy_of(f->imp, f->cap * sizeof(float));
    dst->full.alive = copy_of(f->alive, f->cap * H);
    dst->full.k = copy_of(f->k, f->cap * H * d * sizeof(float));
    dst->full.v = copy_of(f->v, f->cap * H * d * sizeof(float));
    dst->full.field[0] = copy_of(f->field[0], H * d * sizeof(float));
    dst->full.field[1] = copy_of(f->field[1], H * d * sizeof(float));
    const ref_linear *l = &src->linear;
    dst->linear.state = copy_of(l->state, ref_state_len(l) * sizeof(double));
    dst->linear.scratch = copy_of(l->scratch, l->scratch_cap * ref_state_len(l) * sizeof(double));
}

void ref_free(ref_layer *ref) {
    ref_full *full = &ref->full;
    free(full->position);
    free(full->imp);
    free(full->alive);
    free(full->k);
    free(full->v);
    free(full->field[0]);
    free(full->field[1]);
    free(ref->linear.state);
    free(ref->linear.scratch);
    memset(ref, 0, sizeof *ref);
}

/* ---- full layers ---- */

int ref_quantized(kvc_mode mode, int is_values) {
    return kvc_mode_component(mode, is_values) != KVC_COMPONENT_F32;
}

int ref_q4(kvc_mode mode, int is_values) {
    return kvc_mode_component(mode, is_values) == KVC_COMPONENT_Q4;
}

static int any_quantized(kvc_mode mode) {
    return ref_quantized(mode, 0) || ref_quantized(mode, 1);
}

/* kvc_mode: the field is frozen once position KVC_Q8_WINDOW is appended,
 * and unfrozen when the next position falls back to it or below. */
int ref_frozen(const ref_full *full) {
    return any_quantized(full->mode) && full->next_position > KVC_Q8_WINDOW;
}

size_t ref_positions_taken(const ref_layer *ref) {
    if (ref->kind == KVC_KIND_LINEAR) return ref->linear.steps + ref->linear.tentative;
    return ref->full.next_position;
}

size_t ref_head_len(const ref_full *full, size_t h) {
    size_t rows = 0;
    for (size_t s = 0; s < full->len; s++) rows += full->alive[s * full->H + h];
    return rows;
}

const float *ref_row(const ref_full *full, size_t s, size_t h, int is_values) {
    return (is_values ? full->v : full->k) + (s * full->H + h) * full->d;
}

size_t ref_draft_len(const ref_layer *ref) {
    if (!ref->verifying) return 0;
    return ref->kind == KVC_KIND_LINEAR ? ref->linear.tentative : ref->full.len - ref->full.verify_base;
}

/* kvc_layer_memory_bytes: L (8 + ceil(H / 8)), the rows (f32: d * 4; from
 * the window on q8: d + 4, q4: 4 + ceil(ceil(d / 16) / 4) + ceil(d / 2)),
 * the fields once frozen, and a q4 component's residual window at its
 * fullest: min(rows from the window on, KVC_Q4_RESIDUAL_ROWS) f32 copies a
 * head (fewer after a truncation past its copies or an eviction:
 * ref_memory_slack); a linear layer its state and one per tentative step. */
size_t ref_memory_bytes(const ref_layer *ref) {
    if (ref->kind == KVC_KIND_LINEAR)
        return (1 + ref->linear.tentative) * ref_state_len(&ref->linear) * sizeof(double);
    const ref_full *full = &ref->full;
    const size_t H = full->H, d = full->d;
    size_t bytes = full->len * (8 + (H + 7) / 8);
    for (int is_values = 0; is_values < 2; is_values++) {
        const int quantized = ref_quantized(full->mode, is_values), q4 = ref_q4(full->mode, is_values);
        const size_t row = q4 ? 4 + ((d + 15) / 16 + 3) / 4 + (d + 1) / 2 : d + 4;
        for (size_t s = 0; s < full->len; s++) {
            for (size_t h = 0; h < H; h++) {
                if (!full->alive[s * H + h]) continue;
                bytes += quantized && full->position[s] >= KVC_Q8_WINDOW ? row : d * 4;
            }
        }
        if (quantized && ref_frozen(full)) bytes += H * d * 4;
    }
    return bytes + ref_memory_slack(ref);
}

size_t ref_memory_slack(const ref_layer *ref) {
    if (ref->kind == KVC_KIND_LINEAR) return 0;
    const ref_full *full = &ref->full;
    size_t bytes = 0;
    for (int is_values = 0; is_values < 2; is_values++) {
        if (!ref_q4(full->mode, is_values)) continue;
        for (size_t h = 0; h < full->H; h++) {
            size_t from_w = 0;
            for (size_t s = 0; s < full->len; s++)
                from_w += full->alive[s * full->H + h] && full->position[s] >= KVC_Q8_WINDOW;
            bytes += (from_w < KVC_Q4_RESIDUAL_ROWS ? from_w : KVC_Q4_RESIDUAL_ROWS) * full->d * 4;
        }
    }
    return bytes;
}

static void reserve_slots(ref_full *full, size_t needed) {
    if (needed <= full->cap) return;
    size_t cap = full->cap ? full->cap : 16;
    while (cap < needed) cap *= 2;
    const size_t H = full->H, d = full->d;
    full->position = grow(full->position, cap * sizeof(uint32_t));
    full->imp = grow(full->imp, cap * sizeof(float));
    full->alive = grow(full->alive, cap * H);
    full->k = grow(full->k, cap * H * d * sizeof(float));
    full->v = grow(full->v, cap * H * d * sizeof(float));
    full->cap = cap;
}

/* c[j] = RMS of channel j over the head's rows at positions < W (the f32
 * rows it holds then), in double and row order, floored at 1e-30 and at
 * 2^-6 of the head's largest c (src/core/quant.c's KVC_Q8_FIELD_RANGE_LOG2);
 * all ones without rows. */
static void freeze(ref_full *full) {
    const size_t H = full->H, d = full->d;
    for (int is_values = 0; is_values < 2; is_values++) {
        if (!ref_quantized(full->mode, is_values)) continue;
        for (size_t h = 0; h < H; h++) {
            for (size_t j = 0; j < d; j++) {
                double sum_sq = 0.0;
                size_t rows = 0;
                for (size_t s = 0; s < full->len; s++) {
                    if (!full->alive[s * H + h] || full->position[s] >= KVC_Q8_WINDOW) continue;
                    const double x = ref_row(full, s, h, is_values)[j];
                    sum_sq += x * x;
                    rows++;
                }
                float c = 1.0f;
                if (rows) {
                    c = (float)sqrt(sum_sq / (double)rows);
                    if (c < 1e-30f) c = 1e-30f;
                }
                full->field[is_values][h * d + j] = c;
            }
            float *field = full->field[is_values] + h * d, max_c = 0.0f;
            for (size_t j = 0; j < d; j++) max_c = fmaxf(max_c, field[j]);
            for (size_t j = 0; j < d; j++) field[j] = fmaxf(field[j], ldexpf(max_c, -6));
        }
    }
}

/* Keeps the slots whose keep[] is set, in order. */
static void keep_slots(ref_full *full, const uint8_t *keep) {
    const size_t H = full->H, row = H * full->d;
    size_t write = 0;
    for (size_t s = 0; s < full->len; s++) {
        if (!keep[s]) continue;
        full->position[write] = full->position[s];
        full->imp[write] = full->imp[s];
        memmove(full->alive + write * H, full->alive + s * H, H);
        memmove(full->k + write * row, full->k + s * row, row * sizeof(float));
        memmove(full->v + write * row, full->v + s * row, row * sizeof(float));
        write++;
    }
    full->len = write;
}

static void evict_to(ref_full *full, size_t budget, size_t sinks, size_t recent) {
    if (full->len <= budget) return;
    uint8_t *keep = grow(NULL, full->len);
    ref_plan(full, budget, sinks, recent, keep);
    keep_slots(full, keep);
    free(keep);
}

void ref_append(ref_full *full, int verifying, size_t n, const float *k, const float *v,
                const uint8_t *alive) {
    const size_t H = full->H, row = H * full->d;
    /* kvc_layer_set_max_rows: room for the n new positions first, down to
     * max_rows - n with the policy (sinks first, then recent, within it). */
    if (full->max_rows && !verifying && full->len + n > full->max_rows) {
        const size_t budget = full->max_rows - n;
        const size_t sinks = full->sinks < budget ? full->sinks : budget;
        const size_t recent = full->recent < budget - sinks ? full->recent : budget - sinks;
        evict_to(full, budget, sinks, recent);
    }
    reserve_slots(full, full->len + n);
    for (size_t i = 0; i < n; i++) {
        if (any_quantized(full->mode) && full->next_position == KVC_Q8_WINDOW) freeze(full);
        const size_t s = full->len;
        full->position[s] = (uint32_t)full->next_position;
        full->imp[s] = 0.0f;
        for (size_t h = 0; h < H; h++) full->alive[s * H + h] = alive == NULL || alive[i * H + h] != 0;
        for (size_t x = 0; x < row; x++) {
            const int live = full->alive[s * H + x / full->d];
            full->k[s * row + x] = live ? k[i * row + x] : 0.0f;
            full->v[s * row + x] = live ? v[i * row + x] : 0.0f;
        }
        full->len = s + 1;
        full->next_position++;
    }
}

/* The slots at positions >= cut go; cut is the next position. */
static void drop_from(ref_full *full, size_t cut) {
    while (full->len > 0 && full->position[full->len - 1] >= cut) full->len--;
    full->next_position = cut;
}

void ref_truncate(ref_full *full, size_t n) {
    drop_from(full, n < full->next_position ? full->next_position - n : 0);
}

void ref_clear(ref_layer *ref) {
    ref->verifying = 0;
    if (ref->kind == KVC_KIND_LINEAR) {
        memset(ref->linear.state, 0, ref_state_len(&ref->linear) * sizeof(double));
        ref->linear.steps = 0;
        ref->linear.tentative = 0;
        return;
    }
    ref->full.len = 0;
    ref->full.next_position = 0;
}

void ref_accumulate(ref_full *full, const float *probs) {
    for (size_t s = 0; s < full->len; s++) full->imp[s] += probs[s];
}

void ref_accumulate_head(ref_full *full, size_t h, const float *probs) {
    size_t row = 0;
    for (size_t s = 0; s < full->len; s++) {
        if (full->alive[s * full->H + h]) full->imp[s] += probs[row++];
    }
}

/* Heavy hitters: more importance first, ties to the older slot. */
static const float *sort_imp;

static int by_rank(const void *a, const void *b) {
    const uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    if (sort_imp[x] != sort_imp[y]) return sort_imp[x] > sort_imp[y] ? -1 : 1;
    return x < y ? -1 : x > y;
}

void ref_plan(const ref_full *full, size_t budget, size_t sinks, size_t recent, uint8_t *keep) {
    const size_t L = full->len;
    if (L <= budget) {
        memset(keep, 1, L);
        return;
    }
    memset(keep, 0, L);
    for (size_t s = 0; s < sinks; s++) keep[s] = 1;
    for (size_t s = L - recent; s < L; s++) keep[s] = 1;
    const size_t middle = L - sinks - recent, heavy = budget - sinks - recent;
    uint32_t *order = grow(NULL, middle * sizeof(uint32_t));
    for (size_t i = 0; i < middle; i++) order[i] = (uint32_t)(sinks + i);
    sort_imp = full->imp;
    qsort(order, middle, sizeof *order, by_rank);
    for (size_t i = 0; i < heavy; i++) keep[order[i]] = 1;
    free(order);
}

void ref_evict(ref_full *full, size_t budget, size_t sinks, size_t recent) {
    evict_to(full, budget, sinks, recent);
}

void ref_begin_verify(ref_layer *ref) {
    ref->verifying = 1;
    ref->full.verify_base = ref->full.len;
}

void ref_accept(ref_layer *ref, size_t j) {
    const size_t drafts = ref_draft_len(ref);
    if (ref->kind == KVC_KIND_LINEAR) {
        ref_linear *linear = &ref->linear;
        const size_t len = ref_state_len(linear);
        if (j > 0) memcpy(linear->state, linear->scratch + (j - 1) * len, len * sizeof(double));
        linear->steps += j;
        linear->tentative = 0;
    } else {
        ref_full *full = &ref->full;
        drop_from(full, full->next_position - (drafts - j));
        /* kvc_layer_set_max_rows: the j kept drafts count as appended, back
         * down to max_rows keeping them (recent = max(recent, j)). */
        if (full->max_rows && j > 0 && full->len > full->max_rows) {
            size_t recent = full->recent > j ? full->recent : j;
            if (recent > full->max_rows) recent = full->max_rows;
            const size_t sinks = full->sinks < full->max_rows - recent ? full->sinks : full->max_rows - recent;
            evict_to(full, full->max_rows, sinks, recent);
        }
    }
    ref->verifying = 0;
}

/* ---- linear layers ---- */

size_t ref_state_len(const ref_linear *linear) {
    return linear->H * linear->F * linear->dv;
}

/* S[f] <- decay[f] S[f] + phi_k[f] v, then out = sum_f phi_q[f] S[f], per
 * head in f64 (the features of phases: cos and sin of m theta). */
void ref_step(ref_linear *linear, int verifying, const float *decay, const float *key_in,
              const float *query_in, const float *v, int phase, float *out) {
    const size_t H = linear->H, F = linear->F, dv = linear->dv, len = ref_state_len(linear);
    const size_t in_len = phase ? F / 2 : F;
    if (verifying && linear->tentative + 1 > linear->scratch_cap) {
        linear->scratch_cap = linear->tentative + 8;
        linear->scratch = grow(linear->scratch, linear->scratch_cap * len * sizeof(double));
    }
    const double *src = linear->tentative ? linear->scratch + (linear->tentative - 1) * len : linear->state;
    double *dst = verifying ? linear->scratch + linear->tentative * len : linear->state;
    const double m = 1.0 / (1.0 + linear->phase_mass);
    double *phi_k = grow(NULL, F * sizeof(double)), *phi_q = grow(NULL, F * sizeof(double));
    for (size_t h = 0; h < H; h++) {
        for (size_t f = 0; f < in_len; f++) {
            if (phase) {
                phi_k[f] = cos(m * (double)key_in[h * in_len + f]);
                phi_k[in_len + f] = sin(m * (double)key_in[h * in_len + f]);
                phi_q[f] = cos(m * (double)query_in[h * in_len + f]);
                phi_q[in_len + f] = sin(m * (double)query_in[h * in_len + f]);
            } else {
                phi_k[f] = key_in[h * F + f];
                phi_q[f] = query_in[h * F + f];
            }
        }
        const size_t at = h * F * dv;
        for (size_t f = 0; f < F; f++) {
            const double lambda = decay ? (double)decay[h * F + f] : 1.0;
            for (size_t j = 0; j < dv; j++)
                dst[at + f * dv + j] = lambda * src[at + f * dv + j] + phi_k[f] * (double)v[h * dv + j];
        }
        for (size_t j = 0; j < dv; j++) {
            double sum = 0.0;
            for (size_t f = 0; f < F; f++) sum += phi_q[f] * dst[at + f * dv + j];
            out[h * dv + j] = (float)sum;
        }
    }
    free(phi_k);
    free(phi_q);
    if (verifying) linear->tentative++;
    else linear->steps++;
}
