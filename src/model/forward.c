/*
 * forward.c -- the forward pass: tokens through every block of the model,
 * their keys and values into the cache's layers, the logits of the last
 * ones out.
 *
 * Per block, on T tokens at once (a prefill goes in chunks of KVC_LM_BATCH):
 *   x = the tokens' embeddings (gemma3: times sqrt(dim))
 *   xb = RMSNorm(x) * attn_norm
 *   q, k, v = xb Wq, xb Wk, xb Wv (+ biases; qwen3, gemma3: RMSNorm per head)  one job
 *   (phi3's fused attn_qkv: the same three products, on its row ranges)
 *   RoPE on the first rope_dims channels of each head of q and k at the
 *   tokens' positions (the layer's table: its base, or none; cos and sin
 *   scaled by rope.scaling.attn_factor); k, v appended to the layer (full,
 *   or a window layer)
 *   att = the cache's attention (one token: attend_heads; T: attend_causal)
 *   x += att Wo (gemma3: RMSNorm'd first)
 *   xb = RMSNorm(x) * ffn_norm;  x += (act(xb Wgate) * xb Wup) Wdown (gemma3: RMSNorm'd first)
 * then logits = (RMSNorm(x) * output_norm) Wout for the rows asked for.
 * qwen35's gated attention: Wq gives each head's queries and as many
 * gates; the attention's output times sigmoid(gate) before Wo.
 * A recurrent layer mixes the tokens in place of attention (the cache's
 * conv and delta kinds hold the state):
 *   lfm2's short convolution: B, C, u = xb Win; x += (C * conv(B * u)) Wout
 *   qwen35's gated delta rule: qkv, z, b, a = xb Wqkv, xb Wz, xb Wbeta, xb Walpha;
 *     o = delta(qkv; alpha = exp(softplus(a + dt_bias) * ssm_a), beta = sigmoid(b));
 *     x += (RMSNorm(o_head) * ssm_norm * silu(z)) Wout
 *
 * Every step treats each token on its own (the weight kernels and the
 * cache's attention give a token the same bits alone or in a batch, on any
 * number of threads), so a verify of k tokens computes exactly the logits of
 * k single steps, and speculative decoding emits exactly plain decoding's
 * tokens.
 */
#include <math.h>
#include <string.h>

#include "../core/internal.h"
#include "model.h"

static size_t max3(size_t a, size_t b, size_t c) {
    const size_t ab = a > b ? a : b;
    return ab > c ? ab : c;
}

/* Grows *array to hold `count` elements of `elem_bytes` (contents not kept). */
static kvc_status grow(void **array, size_t count, size_t elem_bytes) {
    void *grown = kvc_realloc_array(*array, count ? count : 1, elem_bytes);
    if (!grown) return KVC_E_NOMEM;
    *array = grown;
    return KVC_OK;
}

/* a * b elements, or SIZE_MAX when that passes the address space, which
 * grow then refuses: in wasm32 a batch of a model's widest rows (sizes up
 * to 2^24, T up to KVC_LM_BATCH) or the probabilities of many heads at a
 * long context pass 2^32, and a wrapped count would allocate too little. */
static size_t elements(size_t a, size_t b) {
    return b && a > SIZE_MAX / b ? SIZE_MAX : a * b;
}

/* The scratch for T tokens (and, with attention probabilities, `positions`
 * slots a head), grown to it when smaller; nothing changes on failure but
 * capacity. */
static kvc_status scratch_reserve(kvc_lm *lm, size_t T, size_t positions) {
    kvc_lm_scratch *s = &lm->scratch;
    const size_t q_dim = lm->num_heads * lm->widest_head;
    const size_t kv_dim = lm->num_kv_heads * lm->widest_head;
    if (T > s->tokens) {
        /* Up to three encodings of a row of the widest input: at most four
         * bytes a value each (kvc_matmul_codes_bytes).  A delta layer's
         * output (value heads x value_dim) goes into a product too, and so
         * does a per-layer input's gated slice. */
        const kvc_recurrent_shape *r = &lm->recurrent;
        const size_t inner = r->value_heads * r->value_dim;
        const size_t widest = max3(lm->dim, q_dim, max3(lm->ffn_dim, inner, lm->per_layer_dim));
        /* Products wider than a token's q: gated queries, a recurrent input projection. */
        const size_t gated = lm->arch->flags & KVC_ARCH_GATED_ATTN ? 2 * q_dim : q_dim;
        const size_t wide = max3(gated, lm->arch->recurrent == KVC_KIND_CONV ? 3 * r->channels : r->channels, 1);
        kvc_status status = KVC_OK;
        struct { void **array; size_t count; size_t bytes; } arrays[] = {
            {(void **)&s->x, elements(T, lm->dim), 4},      {(void **)&s->xb, elements(T, lm->dim), 4},
            {(void **)&s->q, elements(T, q_dim), 4},        {(void **)&s->k, elements(T, kv_dim), 4},
            {(void **)&s->v, elements(T, kv_dim), 4},       {(void **)&s->att, elements(T, q_dim), 4},
            {(void **)&s->gate, elements(T, widest), 4},
            {(void **)&s->up, elements(T, lm->ffn_dim > lm->per_layer_dim ? lm->ffn_dim : lm->per_layer_dim), 4},
            {(void **)&s->wide, elements(T, wide), 4}, {(void **)&s->mixed, elements(T, widest), 4},
            {(void **)&s->rates, elements(2 * T, r->value_heads), 4}, {(void **)&s->taps, elements(r->channels, r->kernel), 4},
            {(void **)&s->rope, elements(2 * T, lm->widest_head), 4}, {(void **)&s->codes, elements(3 * T, widest), 4},
            {(void **)&s->qh, elements(T, lm->widest_head), 4}, {(void **)&s->oh, elements(T, lm->widest_head), 4},
            {(void **)&s->vector, 2 * widest, 4}, {(void **)&s->rope_factors, lm->widest_head / 2, 4},
            {(void **)&s->per_layer, elements(T, lm->per_layer_dim * lm->num_layers), 4},
            {(void **)&s->query_scale, T, 4},
        };
        size_t bytes = 0;
        for (size_t i = 0; i < sizeof arrays / sizeof arrays[0] && status == KVC_OK; i++) {
            status = grow(arrays[i].array, arrays[i].count, arrays[i].bytes);
            bytes += arrays[i].count * arrays[i].bytes;
        }
        if (status != KVC_OK) return status;
        /* GELU's table, once: a GeGLU, a bare GELU or gemma4's per-layer gate. */
        if (!s->gelu && (lm->arch->activation == KVC_ACT_GEGLU_TANH || lm->arch->activation == KVC_ACT_GELU_TANH ||
                         lm->per_layer_dim)) {
            if (!(s->gelu = kvc_realloc_array(NULL, KVC_GELU_TABLE, sizeof *s->gelu))) return KVC_E_NOMEM;
            kvc_gelu_table_fill(s->gelu);
        }
        s->bytes = bytes + (s->gelu ? KVC_GELU_TABLE * sizeof *s->gelu : 0);
        s->tokens = T;
        s->positions = 0; /* the attention arrays are sized for tokens x positions */
    }
    if (positions > s->positions) {
        /* Half as much again: a decode grows by a slot a step.  probs holds
         * one head's rows of T tokens (attend_causal) or every head's row
         * of one token (attend_heads). */
        const size_t slots = kvc_grown_capacity(s->positions, positions, SIZE_MAX);
        const size_t probs_rows = s->tokens > lm->num_heads ? s->tokens : lm->num_heads;
        if (grow((void **)&s->probs, elements(probs_rows, slots), 4) != KVC_OK ||
            grow((void **)&s->mass, elements(s->tokens, slots), 4) != KVC_OK) {
            return KVC_E_NOMEM;
        }
        s->bytes += 4 * (probs_rows + s->tokens) * (slots - s->positions);
        s->positions = slots;
    }
    return KVC_OK;
}

void kvc_lm_scratch_free(kvc_lm_scratch *s) {
    void *arrays[] = {s->x, s->xb, s->q, s->k, s->v, s->att, s->gate, s->up, s->rope, s->codes,
                      s->qh, s->oh, s->probs, s->mass, s->vector, s->rope_factors,
                      s->wide, s->mixed, s->rates, s->taps, s->per_layer, s->query_scale, s->gelu};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++) kvc_free(arrays[i]);
    memset(s, 0, sizeof *s);
}

/* ---- one block ---- */

/* The attention of the T tokens of block l over `layer` (its own, or a
 * shared block's owner's), with (importance) the mass each token gave each
 * of the layer's L slots, summed over the query heads in order, to s->mass
 * [T x L]; KVC_LM_SPAN: the T tokens see each other both ways; KVC_LM_RANGES:
 * each its range of s->ranges. */
static kvc_status attend(kvc_lm *lm, kvc_layer *layer, size_t l, size_t T, int importance, uint32_t flags) {
    kvc_lm_scratch *s = &lm->scratch;
    const size_t hd = lm->plans[l].head_dim;
    const size_t q_dim = lm->num_heads * hd;
    const size_t L = kvc_layer_seq_len(layer);
    const size_t G = lm->num_heads / lm->plans[l].kv_heads;
    float *probs = importance ? s->probs : NULL;
    if (importance) memset(s->mass, 0, T * L * sizeof(float));
    if (T == 1 && !(flags & KVC_LM_RANGES)) {
        kvc_status status = kvc_layer_attend_heads(layer, s->q, lm->num_heads, s->att, probs);
        if (status != KVC_OK) return status;
        for (size_t h = 0; importance && h < lm->num_heads; h++) kvc_add(L, s->mass, probs + h * L);
        return KVC_OK;
    }
    for (size_t h = 0; h < lm->num_heads; h++) {
        for (size_t t = 0; t < T; t++) memcpy(s->qh + t * hd, s->q + t * q_dim + h * hd, hd * sizeof(float));
        /* KVC_LM_RANGES: each token's range of its layer kind (kvc_lm_encode). */
        const uint32_t *first = (flags & KVC_LM_RANGES) ? s->ranges + (lm->plans[l].window ? 2 * T : 0) : NULL;
        kvc_status status = (flags & KVC_LM_RANGES) ? kvc_layer_attend_ranges(layer, s->qh, T, h / G, first, first + T, s->oh, probs)
                            : (flags & KVC_LM_SPAN) ? kvc_layer_attend_span(layer, s->qh, T, h / G, s->oh, probs)
                                                    : kvc_layer_attend_causal(layer, s->qh, T, h / G, s->oh, probs);
        if (status != KVC_OK) return status;
        for (size_t t = 0; t < T; t++) memcpy(s->att + t * q_dim + h * hd, s->oh + t * hd, hd * sizeof(float));
        for (size_t t = 0; importance && t < T; t++) kvc_add(L, s->mass + t * L, probs + t * L);
    }
    return KVC_OK;
}

const float *kvc_vector_f32(const kvc_tensor *t, float *buffer) {
    if (t->type->ggml_id == 0) return (const float *)t->data;
    t->type->dequantize(t->data, 0, t->cols, buffer);
    return buffer;
}

/* The same, into the scratch that the norms and biases take in turn. */
static const float *vector_of(kvc_lm *lm, const kvc_tensor *t) {
    return kvc_vector_f32(t, lm->scratch.vector);
}

/* Each row of x [T x n] RMS-normalised by `weight` into out. */
static void rmsnorm_rows(kvc_lm *lm, size_t T, size_t n, const float *x, const kvc_tensor *weight, float *out) {
    const float *w = vector_of(lm, weight);
    for (size_t t = 0; t < T; t++) kvc_rmsnorm(n, x + t * n, w, lm->rms_eps, out + t * n);
}

/* Each row of x [T x n] normed by the block's norm, `weight` and (a
 * LayerNorm's) `bias`, into out: an RMSNorm, or KVC_ARCH_LAYER_NORM's. */
static void norm_rows(kvc_lm *lm, size_t T, size_t n, const float *x, const kvc_tensor *weight, const kvc_tensor *bias,
                      float *out) {
    if (!(lm->arch->flags & KVC_ARCH_LAYER_NORM)) {
        rmsnorm_rows(lm, T, n, x, weight, out);
        return;
    }
    const float *w = kvc_vector_f32(weight, lm->scratch.vector), *b = kvc_vector_f32(bias, lm->scratch.vector + n);
    for (size_t t = 0; t < T; t++) kvc_layernorm(n, x + t * n, w, b, lm->rms_eps, out + t * n);
}

/* The rows of x [T x n], each + bias (absent: unchanged). */
static void add_bias(kvc_lm *lm, size_t T, size_t n, float *x, const kvc_tensor *bias) {
    if (!bias->type) return;
    const float *b = vector_of(lm, bias);
    for (size_t t = 0; t < T; t++) kvc_add(n, x + t * n, b);
}

/* Rows of x [T x n] RMS-normalised by weight in place (absent: unchanged). */
static void norm_rows_in_place(kvc_lm *lm, size_t T, size_t n, float *x, const kvc_tensor *weight) {
    if (weight->type) rmsnorm_rows(lm, T, n, x, weight, x);
}

/* Each of the `rows` rows of n values of x RMS-normalised in place by w
 * (NULL: no weight). */
static void norm_each(const kvc_lm *lm, size_t rows, size_t n, float *x, const float *w) {
    for (size_t i = 0; i < rows; i++) kvc_rmsnorm(n, x + i * n, w, lm->rms_eps, x + i * n);
}

/* qwen3: every head of x [T x heads x hd] RMS-normalised by weight [hd]. */
static void norm_heads(kvc_lm *lm, size_t T, size_t heads, size_t hd, float *x, const kvc_tensor *weight) {
    if (weight->type) norm_each(lm, T * heads, hd, x, vector_of(lm, weight));
}

/* 1 / (1 + e^-x) */
static float sigmoid(float x) {
    return 1.0f / (1.0f + expf(-x));
}

/* A convolution's taps [channels x kernel] as f32: the file's when F32 (what
 * llama.cpp's converter and quantizer keep), else converted. */
static const float *taps_of(kvc_lm *lm, const kvc_tensor *t) {
    if (t->type->ggml_id == 0) return (const float *)t->data;
    t->type->dequantize(t->data, 0, t->rows * t->cols, lm->scratch.taps);
    return lm->scratch.taps;
}

/* How block l mixes its T tokens (s->xb, normalised) into s->xb: attention
 * over the layer's rows, or the layer's recurrent step. */
typedef kvc_status mixer_fn(kvc_lm *lm, kvc_layer *layer, size_t l, size_t T, uint32_t flags, size_t offset);

/* An embedding pass's convolution (KVC_LM_RANGES): each token's over its
 * own text's inputs x [T x n] alone, those outside it 0 -- up to itself
 * (causal), or centred, (kernel - 1) / 2 either side (llama.cpp's
 * non-causal lfm2) -- the taps [n x kernel] summed in order, into y. */
static void conv_texts(const kvc_lm *lm, size_t T, size_t n, const float *taps, const float *x, float *y) {
    const size_t K = lm->recurrent.kernel, behind = lm->causal ? K - 1 : (K - 1) / 2;
    const uint32_t *first = lm->scratch.ranges, *end = first + T;
    for (size_t t = 0; t < T; t++) {
        for (size_t c = 0; c < n; c++) {
            float acc = 0.0f;
            for (size_t k = 0; k < K; k++) {
                const size_t at = t + k; /* the input at t - behind + k, shifted by behind */
                if (at >= first[t] + behind && at < (lm->causal ? t + 1 : end[t]) + behind)
                    acc = acc + x[(at - behind) * n + c] * taps[c * K + k];
            }
            y[t * n + c] = acc;
        }
    }
}

/* lfm2's short convolution: B, C, u = xb Win; xb = (C * conv(B * u)) Wout. */
static kvc_status mix_conv(kvc_lm *lm, kvc_layer *layer, size_t l, size_t T, uint32_t flags, size_t offset) {
    (void)offset;
    kvc_lm_scratch *s = &lm->scratch;
    const kvc_block *b = &lm->blocks[l];
    const size_t n = lm->recurrent.channels;
    const kvc_product in = {&b->in_proj, s->wide, 3 * n};
    kvc_matmul(KVC_PROFILE_RECURRENT, 1, &in, s->xb, T, s->codes);
    for (size_t t = 0; t < T; t++) {
        const float *bcu = s->wide + t * 3 * n;
        for (size_t c = 0; c < n; c++) s->mixed[t * n + c] = bcu[c] * bcu[2 * n + c];
    }
    kvc_status status = KVC_OK;
    if (flags & KVC_LM_RANGES) conv_texts(lm, T, n, taps_of(lm, &b->conv), s->mixed, s->xb);
    else status = kvc_layer_conv_n(layer, T, s->mixed, taps_of(lm, &b->conv), s->xb);
    if (status != KVC_OK) return status;
    for (size_t t = 0; t < T; t++) {
        const float *gates = s->wide + t * 3 * n + n;
        for (size_t c = 0; c < n; c++) s->mixed[t * n + c] = gates[c] * s->xb[t * n + c];
    }
    kvc_profile_mark(KVC_PROFILE_RECURRENT);
    const kvc_product out = {&b->out_proj, s->xb, lm->dim};
    kvc_matmul(KVC_PROFILE_RECURRENT, 1, &out, s->mixed, T, s->codes);
    return KVC_OK;
}

/* qwen35's gated delta rule (recurrent.c computes the rule itself). */
static kvc_status mix_delta(kvc_lm *lm, kvc_layer *layer, size_t l, size_t T, uint32_t flags, size_t offset) {
    (void)flags, (void)offset;
    kvc_lm_scratch *s = &lm->scratch;
    const kvc_block *b = &lm->blocks[l];
    const kvc_recurrent_shape *r = &lm->recurrent;
    const size_t H = r->value_heads, dv = r->value_dim, inner = H * dv;
    float *alpha = s->rates, *beta = s->rates + T * H;
    const kvc_product in[4] = {{&b->in_proj, s->wide, r->channels}, {&b->z_proj, s->gate, inner},
                               {&b->beta_proj, beta, H}, {&b->alpha_proj, alpha, H}};
    kvc_matmul(KVC_PROFILE_RECURRENT, 4, in, s->xb, T, s->codes);
    /* alpha = exp(softplus(a + dt_bias) * ssm_a), ssm_a = -exp(A_log) as the converter writes it. */
    const float *dt = vector_of(lm, &b->dt_bias);
    for (size_t i = 0; i < T * H; i++) alpha[i] = kvc_softplus(alpha[i] + dt[i % H]);
    const float *rate = vector_of(lm, &b->decay_rate);
    for (size_t i = 0; i < T * H; i++) alpha[i] = expf(alpha[i] * rate[i % H]);
    for (size_t i = 0; i < T * H; i++) beta[i] = sigmoid(beta[i]);
    const kvc_status status = kvc_layer_delta_n(layer, T, s->wide, taps_of(lm, &b->conv), alpha, beta, lm->rms_eps, s->mixed);
    if (status != KVC_OK) return status;
    /* Each head's output RMS-normalised by ssm_norm, times silu(z). */
    norm_heads(lm, T, H, dv, s->mixed, &b->head_norm);
    kvc_swiglu(T * inner, s->gate, s->mixed);
    kvc_profile_mark(KVC_PROFILE_RECURRENT);
    const kvc_product out = {&b->out_proj, s->xb, lm->dim};
    kvc_matmul(KVC_PROFILE_RECURRENT, 1, &out, s->gate, T, s->codes);
    return KVC_OK;
}

/* Mamba-2 (granitehybrid, nemotron_h, falcon-h1): z, x B C, dt = xb Win;
 * y = the scan of x B C and dt with the D skip (recurrent.c); out =
 * grouped RMSNorm(silu(z) * y) Wout [T x dim]. */
static kvc_status mamba2_into(kvc_lm *lm, kvc_layer *layer, size_t l, size_t T, float *out) {
    kvc_lm_scratch *s = &lm->scratch;
    const kvc_block *b = &lm->blocks[l];
    const kvc_recurrent_shape *r = &lm->recurrent;
    const size_t H = r->value_heads, inner = H * r->value_dim, G = r->key_heads;
    const kvc_product in[3] = {{&b->z_proj, s->gate, inner}, {&b->in_proj, s->wide, r->channels}, {&b->dt_proj, s->rates, H}};
    kvc_matmul(KVC_PROFILE_RECURRENT, 3, in, s->xb, T, s->codes);
    /* The vectors are F32 (lm.c checks), as ggml reads them. */
    const float *conv_bias = b->conv_bias.type ? (const float *)b->conv_bias.data : NULL;
    const kvc_status status = kvc_layer_mamba2_n(layer, T, s->wide, taps_of(lm, &b->conv), conv_bias, s->rates,
                                                 (const float *)b->dt_bias.data, (const float *)b->decay_rate.data,
                                                 (const float *)b->skip.data, s->mixed);
    if (status != KVC_OK) return status;
    kvc_swiglu(T * inner, s->gate, s->mixed);
    /* Each group's inner / G channels RMS-normalised by its row of ssm_norm. */
    if (b->head_norm.type) {
        const float *w = (const float *)b->head_norm.data;
        const size_t n = inner / G;
        for (size_t i = 0; i < T * G; i++) kvc_rmsnorm(n, s->gate + i * n, w + (i % G) * n, lm->rms_eps, s->gate + i * n);
    }
    kvc_profile_mark(KVC_PROFILE_RECURRENT);
    const kvc_product product = {&b->out_proj, out, lm->dim};
    kvc_matmul(KVC_PROFILE_RECURRENT, 1, &product, s->gate, T, s->codes);
    return KVC_OK;
}

static kvc_status mix_mamba2(kvc_lm *lm, kvc_layer *layer, size_t l, size_t T, uint32_t flags, size_t offset) {
    (void)flags, (void)offset;
    return mamba2_into(lm, layer, l, T, lm->scratch.xb);
}

/* The queries, keys and values of block l's T tokens: s->q (with its gates
 * in s->wide for gated attention), s->k, s->v, normed and turned.  A shared
 * block computes its queries alone. */
static void project_qkv(kvc_lm *lm, size_t l, size_t T) {
    kvc_lm_scratch *s = &lm->scratch;
    const kvc_block *b = &lm->blocks[l];
    const kvc_layer_plan *plan = &lm->plans[l];
    const size_t hd = plan->head_dim;
    const size_t q_dim = lm->num_heads * hd;
    const size_t kv_dim = plan->kv_heads * hd;
    const int gated = (lm->arch->flags & KVC_ARCH_GATED_ATTN) != 0;
    const int owns_rows = plan->kind != KVC_KIND_SHARED;
    /* gemma4: a block without attn_v takes V from attn_k's product. */
    const kvc_product qkv[3] = {{&b->wq, gated ? s->wide : s->q, gated ? 2 * q_dim : q_dim},
                                {&b->wk, s->k, kv_dim}, {b->wv.type ? &b->wv : &b->wk, s->v, kv_dim}};
    kvc_matmul(KVC_PROFILE_QKV, owns_rows ? 3 : 1, qkv, s->xb, T, s->codes);
    for (size_t t = 0; gated && t < T; t++) {
        for (size_t h = 0; h < lm->num_heads; h++)
            memcpy(s->q + t * q_dim + h * hd, s->wide + t * 2 * q_dim + 2 * h * hd, hd * sizeof(float));
    }
    add_bias(lm, T, q_dim, s->q, &b->bq);
    add_bias(lm, T, kv_dim, s->k, &b->bk);
    add_bias(lm, T, kv_dim, s->v, &b->bv);
    kvc_profile_mark(KVC_PROFILE_ROPE);
    norm_heads(lm, T, lm->num_heads, hd, s->q, &b->q_norm);
    norm_heads(lm, T, plan->kv_heads, hd, s->k, &b->k_norm);
    if (owns_rows && (lm->arch->flags & KVC_ARCH_V_NORM)) norm_each(lm, T * plan->kv_heads, hd, s->v, NULL);
    kvc_profile_mark(KVC_PROFILE_NORM);
    const int table = plan->rope_table;
    for (size_t t = 0; t < T && table != KVC_ROPE_NONE; t++) {
        const float *rope = s->rope + ((size_t)table * T + t) * lm->widest_head;
        kvc_rope_apply(lm->num_heads, hd, plan->rope_dims, lm->arch->rope, rope, s->q + t * q_dim);
        if (owns_rows) kvc_rope_apply(plan->kv_heads, hd, plan->rope_dims, lm->arch->rope, rope, s->k + t * kv_dim);
    }
    for (size_t t = 0; lm->temperature_scale > 0 && t < T; t++) {
        for (size_t i = 0; i < q_dim; i++) s->q[t * q_dim + i] *= s->query_scale[t];
    }
    /* The cache's attention scales q.k by 1 / sqrt(hd): an architecture of
     * another scale (gemma4's 1) has its queries scaled to make it so. */
    if (lm->attention_scale > 0) {
        const float scale = lm->attention_scale * sqrtf((float)hd);
        for (size_t i = 0; i < T * q_dim; i++) s->q[i] *= scale;
    }
    kvc_profile_mark(KVC_PROFILE_ROPE);
}

/* Attention over the rows of `layer`: block l's own, k and v appended to
 * it first; or (a shared block) its owner's, which it reads and leaves.
 * Importance as forward's flags say (pending: kept for kvc_lm_keep, at
 * token offset `offset` of the verify). */
static kvc_status mix_attention(kvc_lm *lm, kvc_layer *layer, size_t l, size_t T, uint32_t flags, size_t offset) {
    kvc_lm_scratch *s = &lm->scratch;
    const kvc_block *b = &lm->blocks[l];
    const size_t hd = lm->plans[l].head_dim;
    const size_t q_dim = lm->num_heads * hd;
    const int gated = (lm->arch->flags & KVC_ARCH_GATED_ATTN) != 0;
    const int owns_rows = lm->plans[l].kind != KVC_KIND_SHARED;

    project_qkv(lm, l, T);
    kvc_status status = owns_rows ? kvc_layer_append_n(layer, T, s->k, s->v, NULL) : KVC_OK;
    kvc_profile_mark(KVC_PROFILE_APPEND);
    if (status != KVC_OK) return status;

    /* A shared block's attention is not its owner's importance: each layer's
     * imp sums its own block's, a token at a time in any batching. */
    const int importance = (flags & KVC_LM_IMPORTANCE) != 0 && owns_rows;
    const size_t L = kvc_layer_seq_len(layer);
    status = scratch_reserve(lm, T, importance ? L : 0);
    if (status == KVC_OK) status = attend(lm, layer, l, T, importance, flags);
    if (status == KVC_OK && importance) {
        if (flags & KVC_LM_VERIFY) {
            kvc_lm_pending *p = &lm->pending;
            /* Each layer's L slots (fewer in a window layer) in rows of p->slots;
             * the positions past them never match one (kvc_lm_keep). */
            for (size_t t = 0; t < T; t++)
                memcpy(p->mass + (l * p->tokens + offset + t) * p->slots, s->mass + t * L, L * sizeof(float));
            uint32_t *positions = p->positions + l * p->slots;
            status = kvc_layer_positions(layer, positions, p->slots);
            for (size_t i = L; i < p->slots; i++) positions[i] = UINT32_MAX;
        } else {
            for (size_t t = 0; t < T && status == KVC_OK; t++) status = kvc_layer_accumulate_imp(layer, s->mass + t * L, L);
        }
    }
    if (status != KVC_OK) {
        /* This layer gives back its rows (a verify's reject takes them all). */
        if (owns_rows && !(flags & KVC_LM_VERIFY)) kvc_layer_truncate_last(layer, T);
        return status;
    }
    kvc_profile_mark(KVC_PROFILE_ATTEND);
    for (size_t t = 0; gated && t < T; t++) {
        for (size_t h = 0; h < lm->num_heads; h++) {
            const float *gate = s->wide + t * 2 * q_dim + (2 * h + 1) * hd;
            float *att = s->att + t * q_dim + h * hd;
            for (size_t i = 0; i < hd; i++) att[i] = att[i] * sigmoid(gate[i]);
        }
    }
    kvc_profile_mark(KVC_PROFILE_ROPE);
    const kvc_product out = {&b->wo, s->xb, lm->dim};
    kvc_matmul(KVC_PROFILE_WO, 1, &out, s->att, T, s->codes);
    return KVC_OK;
}

/* The mixer of each kind of layer. */
/* falcon-h1: Mamba-2 and attention on the same normed input (s->xb), xb =
 * attention's output + Mamba-2's, in a layer of both.  All or nothing: an
 * attention that fails after appending gives back its rows and, with them,
 * the state's step (the layer's last call); one that fails before, the
 * state's step alone goes back. */
static kvc_status mix_attn_mamba2(kvc_lm *lm, kvc_layer *layer, size_t l, size_t T, uint32_t flags, size_t offset) {
    kvc_lm_scratch *s = &lm->scratch;
    kvc_status status = mamba2_into(lm, layer, l, T, s->mixed);
    if (status != KVC_OK) return status;
    const size_t steps = kvc_layer_steps(layer);
    status = mix_attention(lm, layer, l, T, flags, offset);
    if (status != KVC_OK) {
        if (!(flags & KVC_LM_VERIFY) && kvc_layer_steps(layer) == steps) (void)kvc_recurrent_take_back(kvc_recurrent_of(layer), T);
        return status;
    }
    kvc_add(T * lm->dim, s->xb, s->mixed);
    return KVC_OK;
}

static mixer_fn *const mixers[] = {
    [KVC_KIND_FULL] = mix_attention,
    [KVC_KIND_WINDOW] = mix_attention,
    [KVC_KIND_CONV] = mix_conv,
    [KVC_KIND_DELTA] = mix_delta,
    [KVC_KIND_SHARED] = mix_attention,
    [KVC_KIND_MAMBA2] = mix_mamba2,
    [KVC_KIND_ATTN_MAMBA2] = mix_attn_mamba2,
    [KVC_KIND_NONE] = NULL, /* an MLP alone (nemotron_h) */
};

/* The cache layer block l's mixer works on: its own, or the one a shared
 * block attends over. */
static kvc_layer *layer_of(const kvc_lm *lm, const kvc_model *cache, size_t l) {
    const size_t owner = lm->plans[l].owner;
    return kvc_model_layer(cache, owner == SIZE_MAX ? l : owner);
}

/* gemma4's per-layer input, after block l's FFN: x += RMSNorm((gelu(x
 * Wgate) * the block's slice of the tokens' per-layer inputs) Wproj). */
static void add_per_layer_input(kvc_lm *lm, size_t l, size_t T) {
    kvc_lm_scratch *s = &lm->scratch;
    const kvc_block *b = &lm->blocks[l];
    const size_t n = lm->per_layer_dim;
    const kvc_product gate = {&b->ple_gate, s->gate, n};
    kvc_matmul(KVC_PROFILE_GATE_UP, 1, &gate, s->x, T, s->codes);
    for (size_t t = 0; t < T; t++) memcpy(s->up + t * n, s->per_layer + (t * lm->num_layers + l) * n, n * sizeof(float));
    kvc_geglu(s->gelu, T * n, s->gate, s->up);
    kvc_profile_mark(KVC_PROFILE_ACTIVATION);
    const kvc_product proj = {&b->ple_proj, s->xb, lm->dim};
    kvc_matmul(KVC_PROFILE_DOWN, 1, &proj, s->gate, T, s->codes);
    rmsnorm_rows(lm, T, lm->dim, s->xb, &b->ple_norm, s->xb);
    kvc_profile_mark(KVC_PROFILE_NORM);
    kvc_add(T * lm->dim, s->x, s->xb);
    kvc_profile_mark(KVC_PROFILE_RESIDUAL);
}

/* A sub-block's input into s->xb: x normed by `norm`, or (norms after) x. */
static void sub_block_input(kvc_lm *lm, size_t T, const kvc_tensor *norm) {
    kvc_lm_scratch *s = &lm->scratch;
    if (lm->arch->flags & KVC_ARCH_NORM_AFTER) memcpy(s->xb, s->x, T * lm->dim * sizeof(float));
    else rmsnorm_rows(lm, T, lm->dim, s->x, norm, s->xb);
    kvc_profile_mark(KVC_PROFILE_NORM);
}

/* x += what a sub-block gave (s->xb), normed by `norm` first where the
 * block has one (gemma3's post norms); or (norms after) x + it normed. */
static void residual(kvc_lm *lm, size_t T, const kvc_tensor *norm, const kvc_tensor *bias) {
    kvc_lm_scratch *s = &lm->scratch;
    if (lm->arch->flags & KVC_ARCH_NORM_AFTER) {
        kvc_add(T * lm->dim, s->x, s->xb);
        kvc_profile_mark(KVC_PROFILE_RESIDUAL);
        norm_rows(lm, T, lm->dim, s->x, norm, bias, s->x);
        kvc_profile_mark(KVC_PROFILE_NORM);
        return;
    }
    norm_rows_in_place(lm, T, lm->dim, s->xb, norm);
    for (size_t i = 0; lm->residual_scale > 0 && i < T * lm->dim; i++) s->xb[i] *= lm->residual_scale;
    kvc_profile_mark(KVC_PROFILE_NORM);
    kvc_add(T * lm->dim, s->x, s->xb);
    kvc_profile_mark(KVC_PROFILE_RESIDUAL);
}

/* Block l's FFN on the T tokens in s->x (x += FFN(x normed by ffn_norm)). */
static void feed_forward(kvc_lm *lm, size_t l, size_t T) {
    kvc_lm_scratch *s = &lm->scratch;
    const kvc_block *b = &lm->blocks[l];
    const size_t ffn = lm->plans[l].ffn_dim;
    sub_block_input(lm, T, &b->ffn_norm);
    if (b->w_gate.type) {
        const kvc_product products[2] = {{&b->w_gate, s->gate, ffn}, {&b->w_up, s->up, ffn}};
        kvc_matmul(KVC_PROFILE_GATE_UP, 2, products, s->xb, T, s->codes);
        add_bias(lm, T, ffn, s->up, &b->b_up);
        if (lm->arch->activation == KVC_ACT_GEGLU_TANH) kvc_geglu(s->gelu, T * ffn, s->gate, s->up);
        else kvc_swiglu(T * ffn, s->gate, s->up);
    } else { /* no gate: gelu(x Wup) or relu(x Wup)^2 */
        const kvc_product up = {&b->w_up, s->gate, ffn};
        kvc_matmul(KVC_PROFILE_GATE_UP, 1, &up, s->xb, T, s->codes);
        add_bias(lm, T, ffn, s->gate, &b->b_up);
        if (lm->arch->activation == KVC_ACT_RELU_SQUARED) kvc_relu_squared(T * ffn, s->gate);
        else kvc_gelu(s->gelu, T * ffn, s->gate);
    }
    kvc_profile_mark(KVC_PROFILE_ACTIVATION);
    const kvc_product down = {&b->w_down, s->xb, lm->dim};
    kvc_matmul(KVC_PROFILE_DOWN, 1, &down, s->gate, T, s->codes);
    add_bias(lm, T, lm->dim, s->xb, &b->b_down);
    residual(lm, T, &b->post_ffn_norm, &b->post_ffn_norm_bias);
}

/* Block l on the T tokens in s->x at positions first..: its mixer over
 * `layer` (layer_of's; none for an MLP alone), then its FFN (none where
 * its feed_forward_length is 0), then (gemma4) its per-layer input and
 * output scale. */
static kvc_status block(kvc_lm *lm, kvc_layer *layer, size_t l, size_t T, uint32_t flags, size_t offset) {
    kvc_lm_scratch *s = &lm->scratch;
    const kvc_block *b = &lm->blocks[l];
    mixer_fn *const mixer = mixers[lm->plans[l].kind];
    if (mixer) {
        sub_block_input(lm, T, &b->attn_norm);
        const kvc_status status = mixer(lm, layer, l, T, flags, offset);
        if (status != KVC_OK) return status;
        add_bias(lm, T, lm->dim, s->xb, &b->bo);
        residual(lm, T, &b->post_attn_norm, &b->post_attn_norm_bias);
    }
    if (lm->plans[l].ffn_dim) feed_forward(lm, l, T);
    if (lm->per_layer_dim) add_per_layer_input(lm, l, T);
    if (b->out_scale.type) {
        const float scale = *vector_of(lm, &b->out_scale);
        for (size_t i = 0; i < T * lm->dim; i++) s->x[i] *= scale;
    }
    return KVC_OK;
}

/* ---- the pass ---- */

/* Whether `cache` is a cache for lm: its layers of their plan's kind and
 * lm's geometry (full; a window layer of the plan's window; a recurrent
 * layer of lm's shape), at one next position. */
static int cache_fits(const kvc_lm *lm, const kvc_model *cache) {
    if (kvc_model_num_layers(cache) != lm->num_layers) return 0;
    const size_t next = kvc_model_seq_len(cache);
    const kvc_recurrent_shape *r = &lm->recurrent;
    for (size_t l = 0; l < lm->num_layers; l++) {
        const kvc_layer *layer = kvc_model_layer(cache, l);
        const kvc_layer_plan *plan = &lm->plans[l];
        if (kvc_layer_kind(layer) != plan->kind) return 0;
        /* A state of lm's shape, rows of the plan's, both (falcon-h1), or neither (shared, none). */
        const int state = kvc_kind_traits_of(plan->kind)->state != NULL;
        if (state && (kvc_layer_channels(layer) != r->channels || kvc_layer_conv_kernel(layer) != r->kernel ||
                      kvc_layer_key_heads(layer) != r->key_heads || kvc_layer_value_heads(layer) != r->value_heads ||
                      kvc_layer_key_dim(layer) != r->key_dim || kvc_layer_value_dim(layer) != r->value_dim ||
                      kvc_layer_steps(layer) != next))
            return 0;
        if (plan->kind == KVC_KIND_SHARED && kvc_layer_owner(layer) != plan->owner) return 0; /* the owner is checked as itself */
        if (kvc_kind_traits_of(plan->kind)->rows &&
            (kvc_layer_window(layer) != plan->window || kvc_layer_num_kv_heads(layer) != plan->kv_heads ||
             kvc_layer_head_dim(layer) != plan->head_dim || kvc_layer_next_position(layer) != next))
            return 0;
    }
    return 1;
}

/* Whether lm has layers a long forward cannot truncate (window, recurrent). */
static int holds_back(const kvc_lm *lm) {
    for (size_t l = 0; l < lm->num_layers; l++) {
        if (lm->plans[l].kind != KVC_KIND_FULL) return 1;
    }
    return 0;
}

/* Room for a verify's importance: n tokens over `slots` slots a layer. */
static kvc_status pending_reserve(kvc_lm *lm, size_t n, size_t slots) {
    kvc_lm_pending *p = &lm->pending;
    if (n * slots * lm->num_layers > p->capacity) {
        if (grow((void **)&p->mass, n * slots * lm->num_layers, 4) != KVC_OK) return KVC_E_NOMEM;
        p->capacity = n * slots * lm->num_layers;
    }
    if (slots * lm->num_layers > p->position_capacity) {
        if (grow((void **)&p->positions, slots * lm->num_layers, 4) != KVC_OK) return KVC_E_NOMEM;
        p->position_capacity = slots * lm->num_layers;
    }
    p->tokens = n;
    p->slots = slots;
    return KVC_OK;
}

/* The logits of tokens [from, from + count) of the chunk in s->x, into rows
 * of `logits`. */
static void logits_of(kvc_lm *lm, size_t from, size_t count, float *logits) {
    kvc_lm_scratch *s = &lm->scratch;
    rmsnorm_rows(lm, count, lm->dim, s->x + from * lm->dim, &lm->output_norm, s->xb);
    kvc_profile_mark(KVC_PROFILE_NORM);
    const kvc_product product = {&lm->output, logits, lm->vocab_size};
    kvc_matmul(KVC_PROFILE_LOGITS, 1, &product, s->xb, count, s->codes);
    if (lm->logit_softcap > 0) kvc_softcap(count * lm->vocab_size, logits, lm->logit_softcap);
    if (lm->logit_scale > 0) {
        const float scale = 1.0f / lm->logit_scale; /* ggml_scale by the reciprocal, as llama.cpp's Granite */
        for (size_t i = 0; i < count * lm->vocab_size; i++) logits[i] *= scale;
    }
}

/* gemma4: the per-layer inputs of the chunk's T tokens (their rows of the
 * table: `rows` where it stays outside the weights, else the weights';
 * token 0's for embeddings given in place of tokens, tokens NULL, as
 * llama.cpp's gemma4 takes an image's), from their embeddings in s->x (scaled) into s->per_layer [T x layers x
 * per_layer_dim]: each
 * block's slice of (RMSNorm(x Wproj / sqrt(dim)) + the token's row of
 * per_layer_token_embd * sqrt(per_layer_dim)) / sqrt(2). */
static void per_layer_inputs(kvc_lm *lm, const uint32_t *tokens, const uint8_t *rows, size_t T) {
    kvc_lm_scratch *s = &lm->scratch;
    const size_t n = lm->per_layer_dim, width = n * lm->num_layers;
    const kvc_product product = {&lm->per_layer_proj, s->per_layer, width};
    kvc_matmul(KVC_PROFILE_EMBED, 1, &product, s->x, T, s->codes);
    const float projection_scale = 1.0f / sqrtf((float)lm->dim);
    for (size_t i = 0; i < T * width; i++) s->per_layer[i] *= projection_scale;
    rmsnorm_rows(lm, T * lm->num_layers, n, s->per_layer, &lm->per_layer_norm, s->per_layer);
    const float row_scale = sqrtf((float)n), input_scale = 1.0f / sqrtf(2.0f);
    const kvc_tensor *table = &lm->per_layer_embd;
    for (size_t t = 0; t < T; t++) {
        float *row = s->mixed; /* widest >= per_layer_dim: a slice at a time */
        for (size_t l = 0; l < lm->num_layers; l++) {
            const uint32_t token = tokens ? tokens[t] : 0;
            const uint8_t *embedded = rows ? rows + t * table->row_bytes : table->data + token * table->row_bytes;
            table->type->dequantize(embedded, l * n, n, row);
            float *x = s->per_layer + (t * lm->num_layers + l) * n;
            for (size_t i = 0; i < n; i++) x[i] = (x[i] + row[i] * row_scale) * input_scale;
        }
    }
    kvc_profile_mark(KVC_PROFILE_EMBED);
}

/* The inputs of a pass: token ids, or rows of embeddings in their place
 * (an image's; their per-layer inputs those of token 0, as llama.cpp's
 * gemma4 takes them), their RoPE positions (NULL: the cache's), with the
 * per-layer rows where the table is outside. */
typedef struct pass_input {
    const uint32_t *tokens;
    const float *embeddings;
    const uint32_t *positions;
    const uint8_t *rows;
} pass_input;

static kvc_status pass(kvc_lm *lm, kvc_model *cache, const pass_input *in, size_t n, float *logits, size_t logit_rows,
                       uint32_t flags);

/* The global layers' RoPE with its frequency factors (Llama 3's rope_freqs,
 * LongRoPE's), apart from the scratch the block's norms use. */
static kvc_rope_params rope_of(kvc_lm *lm) {
    kvc_rope_params rope = lm->rope_global;
    rope.factors = lm->rope_freqs.type ? kvc_vector_f32(&lm->rope_freqs, lm->scratch.rope_factors) : NULL;
    return rope;
}

/* x [n] += row r of table t (dequantized into `row`). */
static void add_row(const kvc_tensor *t, size_t r, float *row, float *x, size_t n) {
    kvc_tensor_values(t, r, 0, n, row);
    kvc_add(n, x, row);
}

/* The T inputs from `start` on into s->x (embedded tokens, or the rows
 * given), with their RoPE tables, query scales and (gemma4) per-layer
 * inputs, at their positions: given, or the cache's next from `first`. */
static void take_inputs(kvc_lm *lm, const pass_input *in, const kvc_rope_params *rope_global, size_t first, size_t start,
                        size_t T) {
    kvc_lm_scratch *s = &lm->scratch;
    for (size_t t = 0; t < T; t++) {
        float *x = s->x + t * lm->dim;
        if (in->embeddings) {
            /* An encoder's rows are the model's embeddings as they are: no scale (llama.cpp scales token rows only). */
            memcpy(x, in->embeddings + (start + t) * lm->dim, lm->dim * sizeof(float));
        } else {
            kvc_tensor_values(&lm->token_embd, in->tokens[start + t], 0, lm->dim, x);
            for (size_t i = 0; lm->embed_scale > 0 && i < lm->dim; i++) x[i] *= lm->embed_scale;
        }
        if (lm->token_types.type) add_row(&lm->token_types, 0, s->xb, x, lm->dim);
        /* A token's RoPE position: the cache's, or (t, y, x, e) given. */
        const uint32_t next = (uint32_t)(first + start + t);
        const uint32_t cached[4] = {next, next, next, 0};
        const uint32_t *at = in->positions ? in->positions + 4 * (start + t) : cached;
        kvc_rope_table_at(rope_global, at, s->rope + ((size_t)KVC_ROPE_GLOBAL * T + t) * lm->widest_head);
        if (lm->window) kvc_rope_table_at(&lm->rope_window, at, s->rope + ((size_t)KVC_ROPE_WINDOW * T + t) * lm->widest_head);
        if (lm->temperature_scale > 0) {
            /* llama.cpp's llm_graph_input_attn_temp, its float and double steps as they are. */
            const float steps = floorf((float)at[0] / (float)lm->temperature_floor);
            s->query_scale[t] = (float)(log((double)steps + 1.0) * (double)lm->temperature_scale + 1.0);
        }
        /* A learned position's row, where the position is one of the table's (the embed pass's texts fit the context). */
        if (lm->position_embd.type && at[0] < lm->position_embd.rows) add_row(&lm->position_embd, at[0], s->xb, x, lm->dim);
    }
    if (lm->embd_norm.type) norm_rows(lm, T, lm->dim, s->x, &lm->embd_norm, &lm->embd_norm_bias, s->x);
    kvc_profile_mark(KVC_PROFILE_EMBED);
    if (lm->per_layer_dim)
        per_layer_inputs(lm, in->tokens ? in->tokens + start : NULL, in->rows ? in->rows + start * lm->per_layer_embd.row_bytes : NULL, T);
}

kvc_status kvc_lm_encode(kvc_lm *lm, const uint32_t *tokens, size_t n, const uint32_t *positions, const uint32_t *ranges,
                         float *hidden) {
    kvc_status status = scratch_reserve(lm, n, 0);
    if (status != KVC_OK) return status;
    kvc_lm_scratch *s = &lm->scratch;
    const kvc_rope_params rope_global = rope_of(lm);
    const pass_input in = {tokens, NULL, positions, NULL};
    kvc_profile_pass_begin();
    take_inputs(lm, &in, &rope_global, 0, 0, n);
    s->ranges = ranges;
    /* A block's rows serve that block alone: one layer at a time holds them
     * (a convolution keeps nothing: conv_texts). */
    for (size_t l = 0; l < lm->num_layers && status == KVC_OK; l++) {
        kvc_layer *layer = NULL;
        if (lm->plans[l].kind != KVC_KIND_CONV)
            status = kvc_layer_create(lm->plans[l].kv_heads, lm->plans[l].head_dim, KVC_MODE_F32, &layer);
        if (status == KVC_OK) status = block(lm, layer, l, n, KVC_LM_RANGES, 0);
        kvc_layer_free(layer);
    }
    s->ranges = NULL;
    if (status == KVC_OK && lm->output_norm.type) rmsnorm_rows(lm, n, lm->dim, s->x, &lm->output_norm, hidden);
    else if (status == KVC_OK) memcpy(hidden, s->x, n * lm->dim * sizeof(float)); /* norms after: the last one's */
    kvc_profile_mark(KVC_PROFILE_NORM);
    return status;
}

kvc_status kvc_lm_forward(kvc_lm *lm, kvc_model *cache, const uint32_t *tokens, size_t n, float *logits,
                          size_t logit_rows, uint32_t flags) {
    return kvc_lm_forward_rows(lm, cache, tokens, n, NULL, logits, logit_rows, flags);
}

kvc_status kvc_lm_forward_rows(kvc_lm *lm, kvc_model *cache, const uint32_t *tokens, size_t n, const uint8_t *rows,
                               float *logits, size_t logit_rows, uint32_t flags) {
    if (!tokens) return KVC_E_NULL_POINTER;
    const pass_input in = {tokens, NULL, NULL, rows};
    return pass(lm, cache, &in, n, logits, logit_rows, flags);
}

kvc_status kvc_lm_forward_input(kvc_lm *lm, kvc_model *cache, const uint32_t *tokens, const float *embeddings, size_t n,
                                const uint32_t *positions, const uint8_t *rows, float *logits, size_t logit_rows,
                                uint32_t flags) {
    if (!tokens == !embeddings) return tokens ? KVC_E_KIND : KVC_E_NULL_POINTER;
    const pass_input in = {tokens, embeddings, positions, rows};
    return pass(lm, cache, &in, n, logits, logit_rows, flags);
}

static kvc_status pass(kvc_lm *lm, kvc_model *cache, const pass_input *in, size_t n, float *logits, size_t logit_rows,
                       uint32_t flags) {
    const uint32_t *tokens = in->tokens;
    const uint8_t *rows = in->rows;
    if (!lm || !cache || (logit_rows && !logits) || !lm->weights) return KVC_E_NULL_POINTER;
    if (lm->outside_bytes ? !rows : rows != NULL) return rows ? KVC_E_KIND : KVC_E_NULL_POINTER;
    if (n == 0 || logit_rows > n || (flags & ~(uint32_t)(KVC_LM_IMPORTANCE | KVC_LM_VERIFY | KVC_LM_SPAN)))
        return KVC_E_LENGTH;
    /* A span sees itself whole in one pass, and is never a draft. */
    if ((flags & KVC_LM_SPAN) && (n > KVC_LM_BATCH || (flags & KVC_LM_VERIFY))) return KVC_E_LENGTH;
    /* A verify's drafts so far (a call that takes more into an open verify). */
    const int more = kvc_model_verifying(cache);
    const size_t drafts = kvc_model_draft_len(cache);
    if ((flags & KVC_LM_VERIFY) && n > KVC_LM_BATCH - drafts) return KVC_E_LENGTH;
    if (!cache_fits(lm, cache)) return KVC_E_LAYERS;
    if (more && (!(flags & KVC_LM_VERIFY) || (flags & KVC_LM_IMPORTANCE))) return KVC_E_VERIFYING;
    for (size_t i = 0; tokens && i < n; i++) {
        if (tokens[i] >= lm->vocab_size) return KVC_E_TOKEN;
    }
    const size_t first = kvc_model_seq_len(cache);
    if (first + n > KVC_MAX_POSITIONS) return KVC_E_TOO_LONG;
    kvc_status status = scratch_reserve(lm, n < KVC_LM_BATCH ? n : KVC_LM_BATCH, 0);
    if (status != KVC_OK) return status;
    lm->pending.tokens = 0;
    if (flags & KVC_LM_VERIFY) {
        if (flags & KVC_LM_IMPORTANCE) {
            /* Room for the layer that holds the most slots (window layers hold fewer). */
            size_t most = 0;
            for (size_t l = 0; l < lm->num_layers; l++) {
                const size_t held = kvc_layer_seq_len(layer_of(lm, cache, l));
                if (held > most) most = held;
            }
            status = pending_reserve(lm, n, most + n);
            if (status != KVC_OK) return status;
        }
        if (!more && (status = kvc_model_begin_verify(cache)) != KVC_OK) return status;
    }

    /* More than a chunk slides window layers past what truncation gives
     * back, and steps recurrent layers past the one call they take back:
     * forks of them, for a failure to return to. */
    kvc_layer **held = NULL;
    if (n > KVC_LM_BATCH && holds_back(lm) && !(flags & KVC_LM_VERIFY) && (status = kvc_model_hold(cache, &held)) != KVC_OK)
        return status;

    size_t done = 0; /* tokens of this call every layer holds */
    const kvc_rope_params rope_global = rope_of(lm);
    kvc_profile_pass_begin();
    for (size_t start = 0; start < n; start += KVC_LM_BATCH) {
        const size_t T = n - start < KVC_LM_BATCH ? n - start : KVC_LM_BATCH;
        take_inputs(lm, in, &rope_global, first, start, T);
        size_t l = 0;
        while (l < lm->num_layers && (status = block(lm, layer_of(lm, cache, l), l, T, flags, start)) == KVC_OK) l++;
        if (status != KVC_OK) {
            /* All or nothing: the layers before the one that failed give this
             * chunk's rows back (that one gave its own). */
            for (size_t k = 0; k < l && !(flags & KVC_LM_VERIFY); k++) kvc_layer_truncate_last(kvc_model_layer(cache, k), T);
            break;
        }
        done += T;
        /* The logits asked for are of the last logit_rows tokens. */
        const size_t want = n - logit_rows;
        if (start + T > want) {
            const size_t from = start > want ? start : want;
            logits_of(lm, from - start, start + T - from, logits + (from - want) * lm->vocab_size);
        }
    }
    if (status != KVC_OK) {
        lm->pending.tokens = 0;
        /* A verify ends rejected, layer by layer (the layers hold different
         * numbers of its drafts: kvc_model_accept would refuse). */
        for (size_t l = 0; (flags & KVC_LM_VERIFY) && l < lm->num_layers; l++) kvc_layer_accept(kvc_model_layer(cache, l), 0);
        if (held && done) kvc_model_give_back(cache, held, done);
        else if (!(flags & KVC_LM_VERIFY) && done) kvc_model_truncate_last(cache, done);
    }
    kvc_model_release(cache, held);
    return status;
}

kvc_status kvc_lm_keep(kvc_lm *lm, kvc_model *cache, size_t n) {
    if (!lm || !cache) return KVC_E_NULL_POINTER;
    if (!kvc_model_verifying(cache)) return KVC_E_NOT_VERIFYING;
    const kvc_lm_pending *p = &lm->pending;
    if (p->tokens && n > p->tokens) return KVC_E_ACCEPT;
    kvc_status status = kvc_model_accept(cache, n);
    if (status != KVC_OK || !p->tokens) return status;
    /* Each kept token's attention, at the slots that hold the positions it
     * saw (an accept that evicted back to maxRows holds fewer). */
    kvc_lm_scratch *s = &lm->scratch;
    for (size_t l = 0; l < lm->num_layers && status == KVC_OK; l++) {
        kvc_layer *layer = kvc_model_layer(cache, l);
        const kvc_kind kind = lm->plans[l].kind;
        if (!kvc_kind_traits_of(kind)->rows) continue; /* no rows of its own: a state, or a shared layer */
        const size_t L = kvc_layer_seq_len(layer);
        status = scratch_reserve(lm, s->tokens, L);
        if (status != KVC_OK) break;
        uint32_t *now = (uint32_t *)s->probs;
        status = kvc_layer_positions(layer, now, L);
        const uint32_t *then = p->positions + l * p->slots;
        for (size_t t = 0; t < n && status == KVC_OK; t++) {
            const float *mass = p->mass + (l * p->tokens + t) * p->slots;
            size_t j = 0;
            for (size_t i = 0; i < L; i++) {
                while (j < p->slots && then[j] < now[i]) j++;
                s->mass[i] = j < p->slots && then[j] == now[i] ? mass[j] : 0.0f;
            }
            status = kvc_layer_accumulate_imp(layer, s->mass, L);
        }
    }
    lm->pending.tokens = 0;
    return status;
}
