/*
 * recurrent.c -- the recurrent layers of 2026's hybrid models: a fixed-size
 * f32 state instead of rows, stepped by the layer's rule.
 *
 * A short convolution (KVC_KIND_CONV, LFM2's) keeps the last K - 1 inputs of
 * each of C channels; a step of input x gives
 *   y[c] = sum_k window[k][c] * w[c][k],   window = (the K - 1 kept rows, x)
 * and keeps the newest K - 1 rows.  A gated delta rule (KVC_KIND_DELTA,
 * Qwen3.5's Gated DeltaNet) has such a convolution in front, over the
 * channels of q, k and v, then SiLU, q and k L2-normalised per key head (and
 * q scaled by 1 / sqrt(dk)), and per value head h (key head h mod Hk) a
 * dk x dv matrix S, row i paired with k[i]:
 *   S <- alpha S;  d = beta (v - S^T k);  S += k d^T;  out = S^T q
 * (the DESIGN's S <- alpha S (I - beta k k^T) + beta v k^T, transposed, read
 * with q after the update).
 *
 * The state is f32, as llama.cpp keeps it.  A call's steps write a lane, a
 * second state of the same length, never the state: outside a verify the
 * lane starts from the state and is swapped in at the end, so the state
 * before the call stays in the lane until the next step -- what lets a
 * runner take back the call it just made (kvc_layer_truncate_last of
 * exactly its tokens) when a later layer fails.  During a verify the drafts
 * step the lane in turn and each draft's inputs are kept (the raw inputs
 * for the convolution, the convolved channels and the gates for the heads),
 * with a copy of the heads' states after every KVC_MARK_EVERY-th draft (a
 * mark): accept(j) of all of them swaps the lane in, of none leaves the
 * state as it was, and of 0 < j < k takes the mark at or below j and steps
 * it again to j from the kept inputs -- at most KVC_MARK_EVERY - 1 steps of
 * the scan alone, no product of the model, the same bits as the drafts'
 * (each head's steps in the same order through the same kernel).  A verify
 * so writes a state every KVC_MARK_EVERY drafts, not one a draft: a step
 * of the scan costs about what writing a state out does, and a state a
 * draft would be k states of memory.  Heads are independent, so a call's
 * heads go to the pool as tasks, each over every token in order: the same
 * bits whatever the number of threads.
 *
 * A Mamba-2 state may also sit beside a full layer's rows
 * (KVC_KIND_ATTN_MAMBA2, Falcon-H1's): the state's `rule` says which step it
 * takes, whatever kind its layer is, and the generic code (layer.c,
 * verify.c, append.c, model.c, snapshot.c) does to rows and state what it
 * does to each alone.
 */
#include <math.h>
#include <string.h>

#include "internal.h"

static size_t conv_len(const kvc_recurrent *r) {
    return (r->kernel - 1) * r->channels;
}

static size_t head_len(const kvc_recurrent *r) {
    return r->value_dim * r->key_dim;
}

static size_t recurrent_len(const void *state) {
    const kvc_recurrent *r = state;
    return conv_len(r) + r->value_heads * head_len(r);
}

static void recurrent_free(void *state) {
    kvc_recurrent *r = state;
    if (!r) return;
    kvc_free(r->lane);
    kvc_free(r->drafts.x);
    kvc_free(r->drafts.y);
    kvc_free(r->drafts.gates[0]);
    kvc_free(r->drafts.gates[1]);
    kvc_free(r->drafts.scratch);
    for (size_t m = 0; m < r->drafts.mark_cap; m++) kvc_free(r->drafts.marks[m]);
    kvc_free(r->drafts.marks);
    kvc_free(r->state);
    kvc_free(r);
}

static void recurrent_clear(void *state) {
    kvc_recurrent *r = state;
    memset(r->state, 0, recurrent_len(r) * sizeof(float));
    r->steps = 0;
    r->tentative = 0;
    r->undo = 0;
}

/* A zero state of this geometry, no lane; NULL when out of memory. */
static kvc_recurrent *recurrent_alloc(const kvc_recurrent *geometry) {
    kvc_recurrent *r = kvc_malloc(sizeof *r);
    if (!r) return NULL;
    *r = (kvc_recurrent){.channels = geometry->channels, .kernel = geometry->kernel,
                         .key_heads = geometry->key_heads, .value_heads = geometry->value_heads,
                         .key_dim = geometry->key_dim, .value_dim = geometry->value_dim, .rule = geometry->rule};
    r->state = kvc_realloc_array(NULL, recurrent_len(r), sizeof(float));
    if (!r->state) {
        kvc_free(r);
        return NULL;
    }
    recurrent_clear(r);
    return r;
}

static kvc_status recurrent_clone(void **dst, const void *state) {
    const kvc_recurrent *src = state;
    kvc_recurrent *copy = recurrent_alloc(src);
    if (!copy) return KVC_E_NOMEM;
    memcpy(copy->state, src->state, recurrent_len(src) * sizeof(float));
    copy->steps = src->steps;
    *dst = copy;
    return KVC_OK;
}

/* Values each draft's inputs take: its raw inputs (the convolution's), and
 * for a kind of heads its convolved channels and two gates a head. */
static size_t draft_len(const kvc_recurrent *r) {
    return r->rule == KVC_KIND_CONV ? r->channels : 2 * r->channels + 2 * r->value_heads;
}

/* Marks `drafts` drafts make: one a KVC_MARK_EVERY-th draft that a later
 * one steps past (a convolution's state has no heads: none). */
static size_t marks_of(const kvc_recurrent *r, size_t drafts) {
    return r->rule == KVC_KIND_CONV || drafts == 0 ? 0 : (drafts - 1) / KVC_MARK_EVERY;
}

/* The lane allocated, and during a verify room for `count` drafts' inputs
 * (and the heads' scratch of a replay); KVC_E_NOMEM keeps what there was. */
static kvc_status reserve(kvc_recurrent *r, int verifying, size_t count) {
    if (!r->lane) {
        r->lane = kvc_realloc_array(NULL, recurrent_len(r), sizeof(float));
        if (!r->lane) return KVC_E_NOMEM;
    }
    kvc_drafts *d = &r->drafts;
    if (!verifying || count <= d->cap) return KVC_OK;
    const size_t C = r->channels, H = r->value_heads;
    /* Each array grown alone: one that fails leaves the others larger, and cap as it was. */
    float *x = kvc_realloc_array(d->x, count, C * sizeof(float));
    if (!x) return KVC_E_NOMEM;
    d->x = x;
    const size_t marks = marks_of(r, count);
    if (marks > d->mark_cap) {
        float **grown = kvc_realloc_array(d->marks, marks, sizeof(float *));
        if (!grown) return KVC_E_NOMEM;
        d->marks = grown;
        while (d->mark_cap < marks) {
            float *mark = kvc_realloc_array(NULL, recurrent_len(r), sizeof(float));
            if (!mark) return KVC_E_NOMEM;
            d->marks[d->mark_cap++] = mark;
        }
    }
    if (r->rule != KVC_KIND_CONV) {
        if (!d->scratch) {
            d->scratch = kvc_realloc_array(NULL, 2 * H, r->value_dim * sizeof(float));
            if (!d->scratch) return KVC_E_NOMEM;
        }
        float *y = kvc_realloc_array(d->y, count, C * sizeof(float));
        if (!y) return KVC_E_NOMEM;
        d->y = y;
        for (int g = 0; g < 2; g++) {
            float *gates = kvc_realloc_array(d->gates[g], count, H * sizeof(float));
            if (!gates) return KVC_E_NOMEM;
            d->gates[g] = gates;
        }
    }
    d->cap = count;
    return KVC_OK;
}

#define SWAP_STATES(a, b) \
    do { \
        float *swapped_ = (a); \
        (a) = (b); \
        (b) = swapped_; \
    } while (0)

static void replay(kvc_recurrent *r, size_t j);

static void recurrent_commit(void *state, size_t j) {
    kvc_recurrent *r = state;
    if (j > 0 && j == r->tentative) SWAP_STATES(r->state, r->lane);
    else if (j > 0) replay(r, j);
    r->steps += j;
    r->tentative = 0;
    r->undo = 0;
}

int kvc_recurrent_take_back(kvc_recurrent *r, size_t n) {
    if (n == 0) return 1;
    if (n != r->undo || r->tentative) return 0;
    SWAP_STATES(r->state, r->lane);
    r->steps -= n;
    r->undo = 0;
    return 1;
}

static size_t recurrent_memory_bytes(const void *state) {
    const kvc_recurrent *r = state;
    const size_t states = r->tentative ? 1 + marks_of(r, r->tentative) : 0; /* the lane, the marks */
    const size_t verify = states * recurrent_len(r) + r->tentative * draft_len(r);
    return (recurrent_len(r) + verify) * sizeof(float);
}

static size_t recurrent_capacity_bytes(const void *state) {
    const kvc_recurrent *r = state;
    const size_t lane = r->lane ? recurrent_len(r) : 0;
    const size_t scratch = r->drafts.scratch ? 2 * r->value_heads * r->value_dim : 0;
    const size_t marks = r->drafts.mark_cap * recurrent_len(r);
    return sizeof *r + r->drafts.mark_cap * sizeof(float *) +
           (recurrent_len(r) + lane + marks + r->drafts.cap * draft_len(r) + scratch) * sizeof(float);
}

static size_t recurrent_steps(const void *state) {
    const kvc_recurrent *r = state;
    return r->steps + r->tentative;
}

static size_t recurrent_tentative(const void *state) {
    return ((const kvc_recurrent *)state)->tentative;
}

const kvc_state_traits kvc_recurrent_states = {recurrent_free,   recurrent_clone,        recurrent_clear,
                                               recurrent_len,    recurrent_memory_bytes, recurrent_capacity_bytes,
                                               recurrent_commit, recurrent_steps,        recurrent_tentative};

/* ---- creation ---- */

/* A layer of `kind` whose state has this geometry: `rows`, a layer of rows
 * to hold it beside them (taken: freed on failure), or NULL. */
static kvc_status create(const kvc_recurrent *geometry, kvc_kind kind, kvc_layer *rows, kvc_layer **out) {
    kvc_layer *layer = rows ? rows : kvc_layer_alloc(kind);
    if (!layer) return KVC_E_NOMEM;
    layer->kind = kind;
    layer->state = recurrent_alloc(geometry);
    if (!layer->state) {
        kvc_layer_free(layer);
        return KVC_E_NOMEM;
    }
    *out = layer;
    return KVC_OK;
}

static int conv_fits(size_t channels, size_t kernel) {
    return channels > 0 && channels <= KVC_MAX_CHANNELS && kernel >= 2 && kernel <= KVC_MAX_CONV_KERNEL;
}

kvc_status kvc_layer_create_conv(size_t channels, size_t kernel, kvc_layer **out) {
    if (!out) return KVC_E_NULL_POINTER;
    *out = NULL;
    if (!conv_fits(channels, kernel)) return KVC_E_CONV;
    const kvc_recurrent geometry = {.channels = channels, .kernel = kernel, .rule = KVC_KIND_CONV};
    return create(&geometry, KVC_KIND_CONV, NULL, out);
}

/* The geometry of a delta or Mamba-2 state (`rule`): value heads reading
 * key heads (groups), a key_dim x value_dim matrix each, a convolution over
 * both; KVC_OK if it fits. */
static kvc_status heads_geometry(kvc_kind rule, size_t key_heads, size_t value_heads, size_t key_dim,
                                 size_t value_dim, size_t kernel, kvc_recurrent *geometry) {
    if (key_heads == 0 || value_heads == 0 || value_heads > KVC_MAX_KV_HEADS || value_heads % key_heads != 0)
        return KVC_E_NUM_HEADS;
    if (key_dim == 0 || key_dim > KVC_MAX_HEAD_DIM) return KVC_E_NUM_FEATURES;
    if (value_dim == 0 || value_dim > KVC_MAX_HEAD_DIM) return KVC_E_VALUE_DIM;
    /* Each at most 2^12: the products stay far inside size_t. */
    const size_t channels = 2 * key_heads * key_dim + value_heads * value_dim;
    if (!conv_fits(channels, kernel) || value_heads * value_dim * key_dim > KVC_MAX_DELTA_STATE) return KVC_E_CONV;
    *geometry = (kvc_recurrent){.channels = channels, .kernel = kernel, .key_heads = key_heads,
                                .value_heads = value_heads, .key_dim = key_dim, .value_dim = value_dim, .rule = rule};
    return KVC_OK;
}

static kvc_status create_heads(kvc_kind kind, size_t key_heads, size_t value_heads, size_t key_dim, size_t value_dim,
                               size_t kernel, kvc_layer **out) {
    if (!out) return KVC_E_NULL_POINTER;
    *out = NULL;
    kvc_recurrent geometry;
    const kvc_status status = heads_geometry(kind, key_heads, value_heads, key_dim, value_dim, kernel, &geometry);
    return status == KVC_OK ? create(&geometry, kind, NULL, out) : status;
}

kvc_status kvc_layer_create_delta(size_t key_heads, size_t value_heads, size_t key_dim, size_t value_dim,
                                  size_t kernel, kvc_layer **out) {
    return create_heads(KVC_KIND_DELTA, key_heads, value_heads, key_dim, value_dim, kernel, out);
}

kvc_status kvc_layer_create_mamba2(size_t heads, size_t head_dim, size_t groups, size_t state_size, size_t kernel,
                                   kvc_layer **out) {
    return create_heads(KVC_KIND_MAMBA2, groups, heads, state_size, head_dim, kernel, out);
}

kvc_status kvc_layer_create_attn_mamba2(size_t num_kv_heads, size_t head_dim, kvc_mode mode, size_t heads,
                                        size_t ssm_head_dim, size_t groups, size_t state_size, size_t kernel,
                                        kvc_layer **out) {
    if (!out) return KVC_E_NULL_POINTER;
    *out = NULL;
    kvc_layer *rows;
    kvc_status status = kvc_layer_create(num_kv_heads, head_dim, mode, &rows);
    if (status != KVC_OK) return status;
    kvc_recurrent geometry;
    status = heads_geometry(KVC_KIND_MAMBA2, groups, heads, state_size, ssm_head_dim, kernel, &geometry);
    if (status != KVC_OK) {
        kvc_layer_free(rows);
        return status;
    }
    return create(&geometry, KVC_KIND_ATTN_MAMBA2, rows, out);
}

/* ---- a step of T tokens ---- */

/* What the heads' tasks read. */
typedef struct heads_job {
    const kvc_recurrent *r;
    const kvc_kernels *kernels;
    size_t T;
    const float *y;     /* [T x channels] convolved: delta's q and k normalised, q scaled, v; Mamba-2's x, B, C */
    const float *gates[2]; /* [T x value_heads] each: delta's alpha, beta; Mamba-2's dt (its softplus), decay */
    const float *skip;  /* Mamba-2's D [value_heads] */
    float *work;        /* [value_heads x value_dim]: each delta head's d */
    const float *first; /* the state the first token reads */
    float *dst;         /* the state every token writes (the lane; the state itself in a replay) */
    float *out;         /* [T x value_heads x value_dim]; a replay's [value_heads x value_dim], each token's in turn */
    size_t out_step;    /* heads between two tokens' outputs: value_heads, or 0 in a replay */
    size_t drafts;      /* during a verify, the drafts before the call (else 0) */
    float *const *marks; /* during a verify, the marks (else NULL) */
} heads_job;

/* During a verify, before draft g (the call's token t) steps a head from
 * `head`, its state at `at` of the state: that state, after g drafts,
 * copied to its mark where g is a KVC_MARK_EVERY-th. */
static void mark(const heads_job *job, size_t t, size_t at, const float *head) {
    const size_t g = job->drafts + t;
    if (job->marks && g > 0 && g % KVC_MARK_EVERY == 0)
        memcpy(job->marks[g / KVC_MARK_EVERY - 1] + at, head, head_len(job->r) * sizeof(float));
}

static void delta_task(void *context, size_t h, size_t thread) {
    (void)thread;
    const heads_job *job = context;
    const kvc_recurrent *r = job->r;
    const size_t dk = r->key_dim, dv = r->value_dim, C = r->channels, H = r->value_heads;
    const size_t kh = h % r->key_heads; /* value head h reads key head h mod Hk (llama.cpp's repeat) */
    const size_t at = conv_len(r) + h * head_len(r);
    const float *src = job->first + at;
    for (size_t t = 0; t < job->T; t++) {
        const float *row = job->y + t * C;
        const float *q = row + kh * dk;
        const float *k = row + r->key_heads * dk + kh * dk;
        const float *v = row + 2 * r->key_heads * dk + h * dv;
        float *dst = job->dst + at;
        mark(job, t, at, src);
        job->kernels->delta_step_f32(dk, dv, job->gates[0][t * H + h], job->gates[1][t * H + h], k, v, q, src, dst,
                                     job->work + h * dv, job->out + (t * job->out_step + h) * dv);
        src = dst;
    }
}

static void mamba2_task(void *context, size_t h, size_t thread) {
    (void)thread;
    const heads_job *job = context;
    const kvc_recurrent *r = job->r;
    const size_t ds = r->key_dim, dv = r->value_dim, C = r->channels, H = r->value_heads, G = r->key_heads;
    const size_t g = h / (H / G); /* head h reads group h / (H / G) (llama.cpp's repeat_interleave) */
    const size_t at = conv_len(r) + h * head_len(r);
    const float *src = job->first + at;
    for (size_t t = 0; t < job->T; t++) {
        const float *row = job->y + t * C;
        const float *x = row + h * dv, *B = row + H * dv + g * ds, *Cg = row + H * dv + (G + g) * ds;
        float *dst = job->dst + at, *out = job->out + (t * job->out_step + h) * dv;
        mark(job, t, at, src);
        job->kernels->ssm_step_f32(ds, dv, job->gates[1][t * H + h], job->gates[0][t * H + h], x, B, Cg, src, dst, out);
        if (job->skip) /* a replay's outputs are not read: no skip */
            for (size_t j = 0; j < dv; j++) out[j] = out[j] + x[j] * job->skip[h];
        src = dst;
    }
}

/* The heads' task of a kind of heads. */
static kvc_task_fn *task_of(kvc_kind rule) {
    return rule == KVC_KIND_DELTA ? delta_task : mamba2_task;
}

/* The pool's estimate of T steps of every head. */
static uint64_t cost_of(const kvc_recurrent *r, size_t T) {
    return (uint64_t)T * r->value_heads * head_len(r) * (r->rule == KVC_KIND_DELTA ? 4 : 3);
}

/* x / (1 + e^-x) */
static float silu(float x) {
    return x / (1.0f + expf(-x));
}

/* Each of `heads` rows of n values times 1 / max(|row|, eps) and `scale`,
 * the squares summed in double (ggml's l2_norm). */
static void l2_normalise(size_t heads, size_t n, float eps, float scale, float *x) {
    for (size_t h = 0; h < heads; h++) {
        double sum = 0.0;
        for (size_t i = 0; i < n; i++) sum += (double)(x[h * n + i] * x[h * n + i]);
        const float norm = sqrtf((float)sum);
        const float s = 1.0f / (norm > eps ? norm : eps);
        for (size_t i = 0; i < n; i++) x[h * n + i] = x[h * n + i] * s * scale;
    }
}

/* What a step reads beside its tokens' inputs and the taps: each kind's own. */
typedef struct step_inputs {
    const float *alpha, *beta; /* delta: [T x value_heads] */
    float eps;                 /* delta: the L2 norm's floor */
    const float *conv_bias;    /* Mamba-2: [channels] (NULL: none) */
    const float *dt, *dt_bias, *a, *d; /* Mamba-2: [T x heads], then [heads] each */
} step_inputs;

/* Whether the kind's inputs are there and finite (KVC_OK), else why not. */
static kvc_status check_inputs(kvc_kind kind, const kvc_kernels *kernels, size_t T, const kvc_recurrent *r,
                               const step_inputs *in) {
    const size_t H = r->value_heads;
    if (kind == KVC_KIND_DELTA) {
        if (!in->alpha || !in->beta) return KVC_E_NULL_POINTER;
        if (!(in->eps > 0.0f && isfinite(in->eps)) || !kernels->all_finite(T * H, in->alpha) ||
            !kernels->all_finite(T * H, in->beta))
            return KVC_E_NONFINITE_INPUT;
    } else if (kind == KVC_KIND_MAMBA2) {
        if (!in->dt || !in->dt_bias || !in->a || !in->d) return KVC_E_NULL_POINTER;
        if ((in->conv_bias && !kernels->all_finite(r->channels, in->conv_bias)) || !kernels->all_finite(T * H, in->dt) ||
            !kernels->all_finite(H, in->dt_bias) || !kernels->all_finite(H, in->a) || !kernels->all_finite(H, in->d))
            return KVC_E_NONFINITE_INPUT;
    }
    return KVC_OK;
}

/* The step behind every kind: checks, the convolution, then the kind's rule. */
static kvc_status step(kvc_layer *layer, kvc_kind kind, size_t T, const float *x, const float *weights,
                       const step_inputs *in, float *out) {
    if (!layer || !x || !weights || !out) return KVC_E_NULL_POINTER;
    kvc_recurrent *r = kvc_recurrent_of(layer);
    if (!r || r->rule != kind) return KVC_E_KIND;
    const size_t C = r->channels, K = r->kernel, H = r->value_heads;
    if (T == 0 || T > KVC_MAX_STEP_TOKENS) return KVC_E_LENGTH;
    const kvc_kernels *kernels = kvc_kernels_active();
    const kvc_status checked = check_inputs(kind, kernels, T, r, in);
    if (checked != KVC_OK) return checked;
    if (!kernels->all_finite(T * C, x) || !kernels->all_finite(C * K, weights)) return KVC_E_NONFINITE_INPUT;
    if (r->steps + r->tentative + T > KVC_MAX_POSITIONS) return KVC_E_TOO_LONG;

    /* The lane: a verify's later calls step it on, every other call starts it from the state. */
    const size_t base = layer->verifying ? r->tentative : 0;
    if (reserve(r, layer->verifying, base + T) != KVC_OK) return KVC_E_NOMEM;
    /* The window of inputs (the kept rows, then x), the weights tap-major,
     * the convolved channels, each head's d (delta) or two gates a token
     * (Mamba-2). */
    const size_t kept = K - 1;
    const size_t work = H * r->value_dim + 2 * T * H;
    float *window = kvc_realloc_array(NULL, (kept + T + K + T) * C + work, sizeof(float));
    if (!window) return KVC_E_NOMEM;
    float *taps = window + (kept + T) * C;
    float *y = taps + K * C;
    float *heads_work = y + T * C, *gates = heads_work + H * r->value_dim;
    const float *first = base ? r->lane : r->state;

    memcpy(window, first, kept * C * sizeof(float));
    memcpy(window + kept * C, x, T * C * sizeof(float));
    for (size_t c = 0; c < C; c++) {
        for (size_t k = 0; k < K; k++) taps[k * C + c] = weights[c * K + k];
    }
    for (size_t t = 0; t < T; t++) kernels->conv_taps_f32(C, K, window + t * C, taps, y + t * C);
    /* The lane keeps the K - 1 newest inputs. */
    memcpy(r->lane, window + T * C, kept * C * sizeof(float));

    heads_job job = {r,     kernels, T, y, {NULL, NULL}, in->d, heads_work, first, r->lane, out, H,
                     base, layer->verifying ? r->drafts.marks : NULL};
    if (kind == KVC_KIND_CONV) {
        memcpy(out, y, T * C * sizeof(float));
    } else if (kind == KVC_KIND_DELTA) {
        const size_t dk = r->key_dim;
        const float scale = 1.0f / sqrtf((float)dk);
        for (size_t i = 0; i < T * C; i++) y[i] = silu(y[i]);
        for (size_t t = 0; t < T; t++) {
            l2_normalise(r->key_heads, dk, in->eps, scale, y + t * C);
            l2_normalise(r->key_heads, dk, in->eps, 1.0f, y + t * C + r->key_heads * dk);
        }
        job.gates[0] = in->alpha;
        job.gates[1] = in->beta;
    } else { /* Mamba-2: the bias, SiLU; per head and token dt's softplus and the decay exp(dt a) */
        for (size_t t = 0; t < T; t++) {
            for (size_t c = 0; c < C; c++) y[t * C + c] = silu(in->conv_bias ? y[t * C + c] + in->conv_bias[c] : y[t * C + c]);
            for (size_t h = 0; h < H; h++) {
                const float dt = kvc_softplus(in->dt[t * H + h] + in->dt_bias[h]);
                gates[t * H + h] = dt;
                gates[T * H + t * H + h] = expf(dt * in->a[h]);
            }
        }
        job.gates[0] = gates;
        job.gates[1] = gates + T * H;
    }
    if (layer->verifying) { /* the drafts' inputs, for a replay */
        kvc_drafts *d = &r->drafts;
        memcpy(d->x + base * C, x, T * C * sizeof(float));
        if (kind != KVC_KIND_CONV) {
            memcpy(d->y + base * C, y, T * C * sizeof(float));
            for (int g = 0; g < 2; g++) memcpy(d->gates[g] + base * H, job.gates[g], T * H * sizeof(float));
        }
    }
    if (kind != KVC_KIND_CONV) kvc_pool_run(task_of(kind), &job, H, kvc_pool_threads(), cost_of(r, T));
    kvc_free(window);

    if (layer->verifying) {
        r->tentative += T;
    } else {
        SWAP_STATES(r->state, r->lane);
        r->steps += T;
        r->undo = T;
    }
    return KVC_OK;
}

/* accept(j) of a verify's k drafts, 0 < j < k: the state after draft j
 * from the mark at or below j (or the state itself), stepped again to j
 * from the drafts' inputs in place -- the convolution's kept inputs (the
 * newest K - 1 of the state's and the j drafts'), then each head's scan
 * over the drafts past the mark, the drafts' own steps (the same inputs,
 * kernels and order: the same bits).  Allocates nothing: reserve() made
 * room at the drafts. */
static void replay(kvc_recurrent *r, size_t j) {
    const size_t C = r->channels, kept = r->kernel - 1, H = r->value_heads, dv = r->value_dim;
    kvc_drafts *d = &r->drafts;
    const size_t marked = r->rule == KVC_KIND_CONV ? 0 : j / KVC_MARK_EVERY; /* marks at or below j */
    float *to = marked ? d->marks[marked - 1] : r->state;
    if (j >= kept) {
        memcpy(to, d->x + (j - kept) * C, kept * C * sizeof(float));
    } else { /* the state's newest inputs, then the drafts' (memmove: `to` may be the state) */
        memmove(to, r->state + j * C, (kept - j) * C * sizeof(float));
        memcpy(to + (kept - j) * C, d->x, j * C * sizeof(float));
    }
    if (marked) SWAP_STATES(r->state, d->marks[marked - 1]);
    const size_t from = marked * KVC_MARK_EVERY;
    if (r->rule == KVC_KIND_CONV || j == from) return;
    heads_job job = {r,     kvc_kernels_active(), j - from, d->y + from * C, {d->gates[0] + from * H, d->gates[1] + from * H},
                     NULL,  d->scratch + H * dv,  r->state, r->state,       d->scratch, 0, 0, NULL};
    kvc_pool_run(task_of(r->rule), &job, H, kvc_pool_threads(), cost_of(r, j - from));
}

kvc_status kvc_layer_conv_n(kvc_layer *layer, size_t T, const float *x, const float *weights, float *y) {
    const step_inputs none = {0};
    return step(layer, KVC_KIND_CONV, T, x, weights, &none, y);
}

kvc_status kvc_layer_delta_n(kvc_layer *layer, size_t T, const float *qkv, const float *conv_weights,
                             const float *alpha, const float *beta, float eps, float *out) {
    const step_inputs in = {.alpha = alpha, .beta = beta, .eps = eps};
    return step(layer, KVC_KIND_DELTA, T, qkv, conv_weights, &in, out);
}

kvc_status kvc_layer_mamba2_n(kvc_layer *layer, size_t T, const float *xbc, const float *conv_weights,
                              const float *conv_bias, const float *dt, const float *dt_bias, const float *a,
                              const float *d, float *out) {
    const step_inputs in = {.conv_bias = conv_bias, .dt = dt, .dt_bias = dt_bias, .a = a, .d = d};
    return step(layer, KVC_KIND_MAMBA2, T, xbc, conv_weights, &in, out);
}

/* ---- accessors ---- */

kvc_status kvc_layer_recurrent_state(const kvc_layer *layer, float *dst, size_t dst_len) {
    if (!layer) return KVC_E_NULL_POINTER;
    const kvc_recurrent *r = kvc_recurrent_of(layer);
    if (!r) return KVC_E_KIND;
    const size_t len = recurrent_len(r);
    if (!dst) return KVC_E_NULL_POINTER;
    if (dst_len < len) return KVC_E_LENGTH;
    memcpy(dst, r->state, len * sizeof(float));
    return KVC_OK;
}

/* The layer's recurrent state, or a geometry of zeros for other layers. */
static const kvc_recurrent *geometry_of(const kvc_layer *layer) {
    static const kvc_recurrent none;
    const kvc_recurrent *r = kvc_recurrent_of(layer);
    return r ? r : &none;
}

size_t kvc_layer_state_len(const kvc_layer *layer) {
    const kvc_recurrent *r = kvc_recurrent_of(layer);
    return r ? recurrent_len(r) : 0;
}

size_t kvc_layer_channels(const kvc_layer *layer) {
    return geometry_of(layer)->channels;
}

size_t kvc_layer_conv_kernel(const kvc_layer *layer) {
    return geometry_of(layer)->kernel;
}

size_t kvc_layer_key_heads(const kvc_layer *layer) {
    return geometry_of(layer)->key_heads;
}

size_t kvc_layer_value_heads(const kvc_layer *layer) {
    return geometry_of(layer)->value_heads;
}

size_t kvc_layer_key_dim(const kvc_layer *layer) {
    return geometry_of(layer)->key_dim;
}
