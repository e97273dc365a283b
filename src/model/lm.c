/*
 * lm.c -- a language model from a parsed GGUF file: its architecture's
 * descriptor, its hyperparameters from the metadata, and every tensor of
 * its blocks bound to where it will lie in the weights -- one region, the
 * file's tensor data byte for byte, which the caller fills (streamed from
 * the file) after creation.  Nothing is converted: matrices stay in their
 * GGUF encoding (a fused one is bound as row ranges: q, k, v; gate, up);
 * vectors (norms, biases) are F32 in every file llama.cpp's converter
 * writes, and required to be.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../core/internal.h"
#include "model.h"

/* ---- what the GGUF file says ---- */

typedef struct lm_source {
    const kvc_gguf *gguf;
    const kvc_arch *arch;
    kvc_says says; /* what is wrong, for the caller */
} lm_source;

/* The metadata entry `<arch>.<name>`, or KVC_GGUF_NONE. */
static size_t arch_key(const lm_source *src, const char *name) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", src->arch->name, name);
    return kvc_gguf_find(src->gguf, key, strlen(key));
}

/* The largest size a file may give: a dimension, a count, the vocabulary,
 * the query's width (heads x head size).  No model needs more. */
#define KVC_LM_MAX_SIZE ((size_t)1 << 24)

/* A size from `<arch>.<name>`: a whole number from 1 to KVC_LM_MAX_SIZE, or
 * `fallback` when absent (0: required). */
static kvc_status size_param(lm_source *src, const char *name, size_t fallback, size_t *out) {
    const size_t i = arch_key(src, name);
    if (i == KVC_GGUF_NONE) {
        if (fallback) {
            *out = fallback;
            return KVC_OK;
        }
        return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "metadata %s.%s is missing", src->arch->name, name);
    }
    double value;
    if (kvc_gguf_number(src->gguf, i, 0, &value) != KVC_OK || !(value >= 1 && value <= KVC_LM_MAX_SIZE) ||
        value != (double)(size_t)value) {
        return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "metadata %s.%s is not a usable size", src->arch->name, name);
    }
    *out = (size_t)value;
    return KVC_OK;
}

/* A positive finite number from `<arch>.<name>`, or `fallback` when absent
 * (0: required). */
static kvc_status real_param(lm_source *src, const char *name, float fallback, float *out) {
    const size_t i = arch_key(src, name);
    if (i == KVC_GGUF_NONE) {
        if (fallback > 0) {
            *out = fallback;
            return KVC_OK;
        }
        return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "metadata %s.%s is missing", src->arch->name, name);
    }
    double value;
    if (kvc_gguf_number(src->gguf, i, 0, &value) != KVC_OK || !(value > 0 && value < 1e30)) {
        return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "metadata %s.%s is not a positive number", src->arch->name, name);
    }
    *out = (float)value;
    return KVC_OK;
}

/* Binds tensor `name` (dims innermost first: cols, rows; rows 0: a vector of
 * cols) at its place in the weights, checking its shape and type.  An
 * absent tensor is refused unless `optional`. */
static kvc_status bind(lm_source *src, const char *name, size_t cols, size_t rows, int optional,
                       kvc_tensor *out) {
    memset(out, 0, sizeof *out);
    const size_t t = kvc_gguf_find_tensor(src->gguf, name, strlen(name));
    if (t == KVC_GGUF_NONE) return optional ? KVC_OK : kvc_refuse(&src->says, KVC_E_MODEL_FILE, "tensor %s is missing", name);
    uint64_t dims[KVC_GGUF_MAX_DIMS];
    uint64_t offset;
    uint32_t id;
    size_t n_dims;
    kvc_gguf_tensor(src->gguf, t, NULL, NULL, &id, &n_dims, dims, &offset, NULL);
    const int vector = rows == 0;
    if (n_dims != (vector ? 1u : 2u) || dims[0] != cols || (!vector && dims[1] != rows)) {
        char shape[64];
        size_t at = 0;
        for (size_t i = 0; i < n_dims && at < sizeof shape; i++) {
            at += (size_t)snprintf(shape + at, sizeof shape - at, "%s%llu", i ? ", " : "", (unsigned long long)dims[i]);
        }
        if (vector) return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "tensor %s is [%s], expected [%zu]", name, shape, cols);
        return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "tensor %s is [%s], expected [%zu, %zu]", name, shape, cols, rows);
    }
    const kvc_weight_type *type = kvc_tensor_type(&src->says, name, id);
    if (!type) return KVC_E_WEIGHT_TYPE;
    /* A row is a whole number of the type's blocks: the reader refuses any
     * other tensor of a type the weight table knows. */
    out->type = type;
    out->offset = offset;
    out->cols = cols;
    out->rows = vector ? 1 : rows;
    out->row_bytes = cols / type->block_values * type->block_bytes;
    return KVC_OK;
}

/* Rows [first, first + rows) of t: a weight of its own to the forward pass. */
static kvc_tensor row_range(const kvc_tensor *t, size_t first, size_t rows) {
    kvc_tensor range = *t;
    range.offset += first * t->row_bytes;
    range.rows = rows;
    return range;
}

/* Whether the file holds tensor `name`. */
static int has_tensor(const lm_source *src, const char *name) {
    return kvc_gguf_find_tensor(src->gguf, name, strlen(name)) != KVC_GGUF_NONE;
}

/* Binds the tensors of block l.  A fused tensor is bound whole, then split
 * into row ranges (llama.cpp's views): the forward pass sees q, k, v, gate
 * and up as they are in any other file.  A recurrent layer has its mixer's
 * tensors in place of attention's. */
static kvc_status bind_block(lm_source *src, kvc_lm *lm, size_t l) {
    kvc_block *b = &lm->blocks[l];
    const kvc_layer_plan *plan = &lm->plans[l];
    const size_t hd = plan->head_dim, ffn = plan->ffn_dim;
    const size_t q_dim = lm->num_heads * hd;
    const size_t kv_dim = plan->kv_heads * hd;
    const unsigned flags = lm->arch->flags;
    const kvc_kind kind = plan->kind;
    const int owns_rows = kvc_kind_traits_of(kind)->rows;
    const int attends = owns_rows || kind == KVC_KIND_SHARED;
    const int conv = kind == KVC_KIND_CONV, delta = kind == KVC_KIND_DELTA;
    const int mamba = kind == KVC_KIND_MAMBA2 || kind == KVC_KIND_ATTN_MAMBA2;
    const int per_layer = lm->per_layer_dim > 0;
    const kvc_recurrent_shape *r = &lm->recurrent;
    const size_t inner = r->value_heads * r->value_dim;
    char name[96];
    snprintf(name, sizeof name, "blk.%zu.attn_qkv.weight", l);
    const int fused_qkv = attends && (flags & KVC_ARCH_FUSED_QKV) && has_tensor(src, name);
    const int fused_up = (flags & KVC_ARCH_FUSED_GATE_UP) != 0;
    const size_t q_rows = (flags & KVC_ARCH_GATED_ATTN ? 2 : 1) * q_dim;
    /* gemma4: a block without attn_v takes V from attn_k's product. */
    snprintf(name, sizeof name, "blk.%zu.attn_v.weight", l);
    const int has_v = owns_rows && !fused_qkv && (!(flags & KVC_ARCH_V_NORM) || has_tensor(src, name));
    const int after = (flags & KVC_ARCH_NORM_AFTER) != 0, layer_norm = (flags & KVC_ARCH_LAYER_NORM) != 0;
    /* A bias: required (qwen2's q, k, v), or read where the file has it (bert's). */
    const int bias = attends ? ((flags & KVC_ARCH_QKV_BIAS) ? 1 : (flags & KVC_ARCH_BIASES) ? 2 : 0) : 0;
    const int gated = lm->arch->activation == KVC_ACT_SWIGLU || lm->arch->activation == KVC_ACT_GEGLU_TANH;
    const int has_ffn = ffn > 0; /* nemotron_h: a mixer's block has none */
    const size_t groups = mamba ? r->key_heads : 1;
    kvc_tensor qkv, qkv_bias;
    memset(b, 0, sizeof *b);
    memset(&qkv_bias, 0, sizeof qkv_bias);
    /* present: 1 required, 2 where the file has it, 0 absent or not read (a
     * shared block's k and v, which llama.cpp does not read either). */
    const struct {
        const char *name;
        size_t cols, rows;
        int present;
        kvc_tensor *out;
    } tensors[] = {
        {"attn_norm.weight", lm->dim, 0, !after, &b->attn_norm},
        {"attn_qkv.weight", lm->dim, q_dim + 2 * kv_dim, fused_qkv, &qkv},
        {"attn_qkv.bias", q_dim + 2 * kv_dim, 0, fused_qkv && bias ? 2 : 0, &qkv_bias},
        {"attn_q.weight", lm->dim, q_rows, attends && !fused_qkv, &b->wq},
        {"attn_k.weight", lm->dim, kv_dim, owns_rows && !fused_qkv, &b->wk},
        {"attn_v.weight", lm->dim, kv_dim, has_v, &b->wv},
        {"attn_output.weight", q_dim, lm->dim, attends, &b->wo},
        {"attn_q.bias", q_dim, 0, fused_qkv ? 0 : bias, &b->bq},
        {"attn_k.bias", kv_dim, 0, fused_qkv ? 0 : bias, &b->bk},
        {"attn_v.bias", kv_dim, 0, fused_qkv ? 0 : bias, &b->bv},
        {"attn_output.bias", lm->dim, 0, attends && (flags & KVC_ARCH_BIASES) ? 2 : 0, &b->bo},
        {"attn_q_norm.weight", hd, 0, attends && (flags & KVC_ARCH_QK_NORM) != 0, &b->q_norm},
        {"attn_k_norm.weight", hd, 0, owns_rows && (flags & KVC_ARCH_QK_NORM) != 0, &b->k_norm},
        {"shortconv.in_proj.weight", lm->dim, 3 * r->channels, conv, &b->in_proj},
        {"shortconv.conv.weight", r->kernel, r->channels, conv, &b->conv},
        {"shortconv.out_proj.weight", r->channels, lm->dim, conv, &b->out_proj},
        {"attn_qkv.weight", lm->dim, r->channels, delta, &b->in_proj},
        {"attn_gate.weight", lm->dim, inner, delta, &b->z_proj},
        {"ssm_beta.weight", lm->dim, r->value_heads, delta, &b->beta_proj},
        {"ssm_alpha.weight", lm->dim, r->value_heads, delta, &b->alpha_proj},
        {"ssm_in.weight", lm->dim, 2 * inner + 2 * r->key_heads * r->key_dim + r->value_heads, mamba, &b->in_proj},
        {"ssm_conv1d.weight", r->kernel, r->channels, delta || mamba, &b->conv},
        {"ssm_conv1d.bias", r->channels, 0, mamba ? 2 : 0, &b->conv_bias},
        {"ssm_dt.bias", r->value_heads, 0, delta || mamba, &b->dt_bias},
        {"ssm_a", r->value_heads, 0, delta, &b->decay_rate},
        {"ssm_a", 1, r->value_heads, mamba, &b->decay_rate},
        {"ssm_d", 1, r->value_heads, mamba, &b->skip},
        {"ssm_norm.weight", r->value_dim, 0, delta, &b->head_norm},
        {"ssm_norm.weight", inner / groups, groups, mamba ? 2 : 0, &b->head_norm},
        {"ssm_out.weight", inner, lm->dim, delta || mamba, &b->out_proj},
        {"post_attention_norm.weight", lm->dim, 0, (flags & KVC_ARCH_POST_NORMS) != 0, &b->post_attn_norm},
        {"post_ffw_norm.weight", lm->dim, 0, (flags & KVC_ARCH_POST_NORMS) != 0, &b->post_ffn_norm},
        {"attn_output_norm.weight", lm->dim, 0, after, &b->post_attn_norm},
        {"attn_output_norm.bias", lm->dim, 0, after && layer_norm, &b->post_attn_norm_bias},
        {"layer_output_norm.weight", lm->dim, 0, after, &b->post_ffn_norm},
        {"layer_output_norm.bias", lm->dim, 0, after && layer_norm, &b->post_ffn_norm_bias},
        {lm->arch->ffn_norm ? lm->arch->ffn_norm : "ffn_norm.weight", lm->dim, 0, !after && has_ffn, &b->ffn_norm},
        {"ffn_gate.weight", lm->dim, ffn, has_ffn && gated && !fused_up, &b->w_gate},
        {"ffn_up.weight", lm->dim, (fused_up ? 2 : 1) * ffn, has_ffn, &b->w_up},
        {"ffn_up.bias", ffn, 0, has_ffn && (flags & KVC_ARCH_BIASES) ? 2 : 0, &b->b_up},
        {"ffn_down.weight", ffn, lm->dim, has_ffn, &b->w_down},
        {"ffn_down.bias", lm->dim, 0, has_ffn && (flags & KVC_ARCH_BIASES) ? 2 : 0, &b->b_down},
        {"inp_gate.weight", lm->dim, lm->per_layer_dim, per_layer, &b->ple_gate},
        {"proj.weight", lm->per_layer_dim, lm->dim, per_layer, &b->ple_proj},
        {"post_norm.weight", lm->dim, 0, per_layer, &b->ple_norm},
    };
    for (size_t i = 0; i < sizeof tensors / sizeof tensors[0]; i++) {
        if (!tensors[i].present) continue; /* absent: left zero (two kinds bind in_proj, conv, out_proj) */
        snprintf(name, sizeof name, "blk.%zu.%s", l, tensors[i].name);
        kvc_status status = bind(src, name, tensors[i].cols, tensors[i].rows, tensors[i].present == 2, tensors[i].out);
        if (status != KVC_OK) return status;
    }
    snprintf(name, sizeof name, "blk.%zu.layer_output_scale.weight", l);
    kvc_status status = flags & KVC_ARCH_OUTPUT_SCALE ? bind(src, name, 1, 0, 1, &b->out_scale) : KVC_OK;
    if (status != KVC_OK) return status;
    /* Gemma 4's 26B-A4B routes its FFN to experts beside the dense one. */
    snprintf(name, sizeof name, "blk.%zu.ffn_gate_inp.weight", l);
    if (has_tensor(src, name))
        return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "tensor %s: a mixture-of-experts FFN, which this runner does not compute", name);
    if (fused_qkv) {
        b->wq = row_range(&qkv, 0, q_dim);
        b->wk = row_range(&qkv, q_dim, kv_dim);
        b->wv = row_range(&qkv, q_dim + kv_dim, kv_dim);
    }
    if (qkv_bias.type) {
        /* Its values in three ranges, as the weight's rows: an F32 vector's bytes split. */
        if (qkv_bias.type->ggml_id != 0)
            return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "tensor blk.%zu.attn_qkv.bias is not F32", l);
        b->bq = qkv_bias, b->bk = qkv_bias, b->bv = qkv_bias;
        b->bq.cols = q_dim, b->bk.cols = kv_dim, b->bv.cols = kv_dim;
        b->bk.offset += 4 * q_dim, b->bv.offset += 4 * (q_dim + kv_dim);
    }
    if (mamba) {
        /* ssm_in's rows: z, then x, B and C (the convolution's), then dt. */
        const kvc_tensor ssm_in = b->in_proj;
        b->z_proj = row_range(&ssm_in, 0, inner);
        b->in_proj = row_range(&ssm_in, inner, r->channels);
        b->dt_proj = row_range(&ssm_in, inner + r->channels, r->value_heads);
        /* ggml's ssm_conv and ssm_scan read these in f32 only. */
        const struct { const char *name; const kvc_tensor *t; } vectors[] = {
            {"ssm_conv1d.bias", &b->conv_bias}, {"ssm_dt.bias", &b->dt_bias}, {"ssm_a", &b->decay_rate}, {"ssm_d", &b->skip},
            {"ssm_norm.weight", &b->head_norm}};
        for (size_t i = 0; i < sizeof vectors / sizeof vectors[0]; i++) {
            if (vectors[i].t->type && vectors[i].t->type->ggml_id != 0)
                return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "tensor blk.%zu.%s is not F32, as Mamba-2's vectors are", l, vectors[i].name);
        }
    }
    if (fused_up) {
        /* llama.cpp's swiglu of one product: silu of its first half times the second. */
        const kvc_tensor gate_up = b->w_up;
        b->w_gate = row_range(&gate_up, 0, ffn);
        b->w_up = row_range(&gate_up, ffn, ffn);
    }
    return KVC_OK;
}

/* RoPE's factors, the divisors of each pair's angle, as llama.cpp's
 * get_rope_factors picks them: Llama 3's rope_freqs.weight when the file has
 * it; else LongRoPE's (phi3) rope_factors_long.weight when the context
 * served passes rope.scaling.original_context_length, rope_factors_short
 * otherwise; else none.  llama.cpp decides once, by the context it is
 * created with (n_ctx_seq), so that every key in its cache turned with the
 * same factors.  A cache of ours has no configured context: it takes every
 * position up to the model's context_length, which is llama.cpp's context
 * when created at the trained size (n_ctx 0): Phi-3.5-mini's and
 * Phi-4-mini's 131072 against 4096 pick the long factors.  (A llama.cpp
 * context of 4096 or less picks the short ones, and computes other logits.)
 * Deciding per position instead would leave the keys already cached turned
 * by the other factors. */
static kvc_status bind_rope_factors(lm_source *src, kvc_lm *lm) {
    const size_t pairs = lm->rope_dims / 2;
    size_t original;
    kvc_tensor longer, shorter;
    kvc_status status;
    if ((status = size_param(src, "rope.scaling.original_context_length", lm->context_length, &original)) ||
        (status = bind(src, "rope_freqs.weight", pairs, 0, 1, &lm->rope_freqs)) ||
        (status = bind(src, "rope_factors_long.weight", pairs, 0, 1, &longer)) ||
        (status = bind(src, "rope_factors_short.weight", pairs, 0, 1, &shorter))) {
        return status;
    }
    if (!lm->rope_freqs.type) lm->rope_freqs = lm->context_length > original ? longer : shorter;
    return KVC_OK;
}

/* Entry j of `<arch>.<name>` as a whole number below 2^24 (a list's entry,
 * or the scalar itself for any j), to *out; absent: `fallback`. */
static kvc_status layer_param(lm_source *src, const char *name, size_t j, size_t fallback, size_t *out) {
    const size_t i = arch_key(src, name);
    size_t count = 1;
    if (i == KVC_GGUF_NONE) {
        *out = fallback;
        return KVC_OK;
    }
    (void)kvc_gguf_value(src->gguf, i, NULL, NULL, &count);
    double value;
    if (kvc_gguf_number(src->gguf, i, count == 1 ? 0 : j, &value) != KVC_OK || !(value >= 0 && value <= KVC_LM_MAX_SIZE) ||
        value != (double)(size_t)value) {
        return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "metadata %s.%s has no usable entry for layer %zu", src->arch->name, name, j);
    }
    *out = (size_t)value;
    return KVC_OK;
}

/* Whether `<arch>.<name>` is a list of `count` entries (a scalar: 0; a list
 * of another length: refused). */
static kvc_status per_layer(lm_source *src, const char *name, size_t count, int *listed) {
    const size_t i = arch_key(src, name);
    kvc_gguf_type type = KVC_GGUF_UINT32;
    size_t entries = 1;
    if (i != KVC_GGUF_NONE) (void)kvc_gguf_value(src->gguf, i, &type, NULL, &entries);
    *listed = i != KVC_GGUF_NONE && type == KVC_GGUF_ARRAY;
    if (*listed && entries != count)
        return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "metadata %s.%s lists %zu layers, not %zu", src->arch->name, name, entries, count);
    return KVC_OK;
}

/* The most KV heads any layer has: head_count_kv, one count or one entry a
 * layer (lfm2: 0 for a recurrent layer; gemma4's larger files: fewer in
 * the global layers); plan_layers reads each layer's. */
static kvc_status read_kv_heads(lm_source *src, kvc_lm *lm, size_t blocks) {
    int listed;
    kvc_status status = per_layer(src, "attention.head_count_kv", blocks, &listed);
    if (status != KVC_OK) return status;
    if (!listed) return size_param(src, "attention.head_count_kv", lm->num_heads, &lm->num_kv_heads);
    lm->num_kv_heads = 0;
    for (size_t l = 0; l < blocks; l++) {
        size_t heads;
        if ((status = layer_param(src, "attention.head_count_kv", l, 0, &heads)) != KVC_OK) return status;
        if (heads > lm->num_kv_heads) lm->num_kv_heads = heads;
    }
    if (!lm->num_kv_heads) return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "metadata %s.attention.head_count_kv gives no layer attention", src->arch->name);
    return KVC_OK;
}

/* The widest FFN: feed_forward_length, one size or one a layer (gemma4's
 * shared-KV blocks twice the others'); plan_layers reads each layer's. */
static kvc_status read_ffn(lm_source *src, kvc_lm *lm, size_t blocks) {
    int listed;
    kvc_status status = per_layer(src, "feed_forward_length", blocks, &listed);
    if (status != KVC_OK || !listed) return status != KVC_OK ? status : size_param(src, "feed_forward_length", 0, &lm->ffn_dim);
    lm->ffn_dim = 0;
    for (size_t l = 0; l < blocks && status == KVC_OK; l++) {
        size_t ffn = 0;
        status = layer_param(src, "feed_forward_length", l, 0, &ffn);
        /* 0: a block without an FFN, where that is what it says (nemotron_h's mixers). */
        if (status == KVC_OK && ffn == 0 && src->arch->recurrent_layers != KVC_RECURRENT_WITHOUT_KV_OR_FFN)
            status = kvc_refuse(&src->says, KVC_E_MODEL_FILE, "metadata %s.feed_forward_length is 0 for layer %zu", src->arch->name, l);
        if (ffn > lm->ffn_dim) lm->ffn_dim = ffn;
    }
    return status;
}

/* The angle's scale at which a pair turns `turns` times over `context`
 * positions: ggml's ggml_rope_yarn_corr_dim. */
static float yarn_corr_dim(size_t dims, size_t context, float turns, float base) {
    return (float)dims * logf((float)context / (turns * 2.0f * 3.14159265358979323846f)) / (2.0f * logf(base));
}

/* ggml's YaRN magnitude of a scaling factor: 1 + 0.1 m ln(factor) past 1. */
static float yarn_mscale(float factor, float m) {
    return factor <= 1.0f ? 1.0f : 0.1f * m * logf(factor) + 1.0f;
}

/* rope.dimension_sections (qwen35's multimodal RoPE): 4 counts of pairs,
 * together at most the head's channels (ggml's bound; a pair takes its
 * sector modulo their sum), else refused. */
static kvc_status read_rope_sections(lm_source *src, kvc_lm *lm) {
    if (arch_key(src, "rope.dimension_sections") == KVC_GGUF_NONE) return KVC_OK;
    size_t sum = 0;
    for (size_t j = 0; j < 4; j++) {
        size_t count;
        kvc_status status = layer_param(src, "rope.dimension_sections", j, 0, &count);
        if (status != KVC_OK) return status;
        lm->rope_global.sections[j] = (uint32_t)count;
        sum += count;
    }
    if (sum == 0 || sum > lm->head_dim)
        return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "metadata %s.rope.dimension_sections sums to %zu, not 1 to the head's %zu",
                      src->arch->name, sum, lm->head_dim);
    return KVC_OK;
}

/* RoPE's scaling (rope.scaling.type: none, linear or yarn, with
 * rope.scaling.factor) into the global and window layers' tables, as
 * llama.cpp's context sets them up: linear divides every angle by the
 * factor; YaRN (Ministral 3) interpolates the slow pairs only, between the
 * correction pairs of rope.scaling.yarn_beta_fast and _slow turns over
 * rope.scaling.original_context_length, and scales cos and sin by
 * mscale(factor) / mscale(factor, yarn_log_multiplier) (1 when they are
 * equal, as Ministral 3's are) times attn_factor.  The window layers keep
 * their angles unscaled (llama.cpp's rope_freq_scale_train_swa).  Then
 * attention.temperature_scale (KVC_ARCH_QUERY_TEMPERATURE). */
static kvc_status read_rope_scaling(lm_source *src, kvc_lm *lm) {
    const kvc_rope_params unscaled = {.dims = lm->rope_dims, .base = lm->rope_base, .scale = lm->rope_scale, .freq_scale = 1.0f};
    lm->rope_global = unscaled;
    kvc_status status = read_rope_sections(src, lm);
    if (status != KVC_OK) return status;
    lm->rope_window = unscaled;
    lm->rope_window.dims = lm->window_rope_dims;
    lm->rope_window.base = lm->window_rope_base;
    const size_t scaling = arch_key(src, "rope.scaling.type");
    const char *type = "none";
    size_t type_len = 4;
    if (scaling != KVC_GGUF_NONE && kvc_gguf_string(src->gguf, scaling, 0, &type, &type_len) != KVC_OK)
        return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "metadata %s.rope.scaling.type is not a string", lm->arch->name);
    const int linear = type_len == 6 && memcmp(type, "linear", 6) == 0, yarn = type_len == 4 && memcmp(type, "yarn", 4) == 0;
    if (!linear && !yarn && !(type_len == 4 && memcmp(type, "none", 4) == 0)) {
        return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "RoPE scaling %.*s is not supported (none, linear and yarn are; Llama 3's comes as rope_freqs.weight, which is)",
                      (int)(type_len < 32 ? type_len : 32), type);
    }
    size_t original = lm->context_length;
    float factor = 1.0f, beta_fast = 32.0f, beta_slow = 1.0f, log_multiplier = 0.0f;
    if ((linear || yarn) &&
        ((status = real_param(src, "rope.scaling.factor", 1.0f, &factor)) ||
         (status = size_param(src, "rope.scaling.original_context_length", lm->context_length, &original)) ||
         (status = real_param(src, "rope.scaling.yarn_beta_fast", beta_fast, &beta_fast)) ||
         (status = real_param(src, "rope.scaling.yarn_beta_slow", beta_slow, &beta_slow))))
        return status;
    if (yarn && arch_key(src, "rope.scaling.yarn_log_multiplier") != KVC_GGUF_NONE &&
        (status = real_param(src, "rope.scaling.yarn_log_multiplier", 0, &log_multiplier)))
        return status;
    kvc_rope_params *rope = &lm->rope_global;
    rope->freq_scale = 1.0f / factor;
    if (yarn) {
        rope->ext_factor = 1.0f;
        const float mscale = log_multiplier != 0.0f ? yarn_mscale(factor, 1.0f) / yarn_mscale(factor, log_multiplier)
                                                    : yarn_mscale(factor, 1.0f);
        /* ggml scales by 1 + 0.1 ln(factor) again where it mixes the angles: llama.cpp divides it out. */
        rope->scale = mscale * (1.0f / (1.0f + 0.1f * logf(factor))) * lm->rope_scale;
        const float low = floorf(yarn_corr_dim(rope->dims, original, beta_fast, rope->base));
        const float high = ceilf(yarn_corr_dim(rope->dims, original, beta_slow, rope->base));
        rope->corr_low = fmaxf(0.0f, low);
        rope->corr_high = fminf((float)rope->dims - 1.0f, high);
    }
    if ((lm->arch->flags & KVC_ARCH_QUERY_TEMPERATURE) && arch_key(src, "attention.temperature_scale") != KVC_GGUF_NONE) {
        if ((status = real_param(src, "attention.temperature_scale", 0, &lm->temperature_scale))) return status;
        lm->temperature_floor = original;
    }
    return KVC_OK;
}

/* The embeddings' scale (gemma's sqrt(dim)), q.k's (the architecture's),
 * and (KVC_ARCH_MULTIPLIERS) each of Granite's where the file has it. */
static kvc_status read_multipliers(lm_source *src, kvc_lm *lm) {
    lm->embed_scale = lm->arch->flags & KVC_ARCH_EMBED_SCALE ? sqrtf((float)lm->dim) : 0.0f;
    lm->attention_scale = lm->arch->attention_scale;
    if (!(lm->arch->flags & KVC_ARCH_MULTIPLIERS)) return KVC_OK;
    const struct { const char *key; float *out; } multipliers[] = {
        {"embedding_scale", &lm->embed_scale}, {"residual_scale", &lm->residual_scale},
        {"attention.scale", &lm->attention_scale}, {"logit_scale", &lm->logit_scale}};
    for (size_t i = 0; i < sizeof multipliers / sizeof multipliers[0]; i++) {
        kvc_status status;
        if (arch_key(src, multipliers[i].key) != KVC_GGUF_NONE && (status = real_param(src, multipliers[i].key, 0, multipliers[i].out)))
            return status;
    }
    return KVC_OK;
}

/* The norms' eps: a LayerNorm's layer_norm_epsilon, an RMSNorm's
 * layer_norm_rms_epsilon, or (KVC_ARCH_EPS_FALLBACK) the latter where the
 * file has it and the former, required, otherwise. */
static kvc_status read_eps(lm_source *src, kvc_lm *lm) {
    const unsigned flags = lm->arch->flags;
    if (!(flags & (KVC_ARCH_LAYER_NORM | KVC_ARCH_EPS_FALLBACK)))
        return real_param(src, "attention.layer_norm_rms_epsilon", 0, &lm->rms_eps);
    kvc_status status = real_param(src, "attention.layer_norm_epsilon", 0, &lm->rms_eps);
    if (status == KVC_OK && (flags & KVC_ARCH_EPS_FALLBACK))
        status = real_param(src, "attention.layer_norm_rms_epsilon", lm->rms_eps, &lm->rms_eps);
    return status;
}

/* The architecture and hyperparameters. */
static kvc_status read_params(lm_source *src, kvc_lm *lm) {
    const size_t a = kvc_gguf_find(src->gguf, "general.architecture", strlen("general.architecture"));
    const char *name = NULL;
    size_t len = 0;
    if (kvc_gguf_string(src->gguf, a, 0, &name, &len) != KVC_OK) {
        return kvc_refuse(&src->says, KVC_E_ARCH, "metadata general.architecture is missing");
    }
    src->arch = lm->arch = kvc_arch_of(name, len);
    /* llama.cpp's converter writes a model's vision or audio encoder (LFM2-VL's,
     * Qwen3.5's) to a file of its own, a projector of architecture clip. */
    if (!lm->arch && len == 4 && memcmp(name, "clip", 4) == 0) {
        return kvc_refuse(&src->says, KVC_E_ARCH, "this file is a vision or audio encoder (a multimodal projector, architecture clip); "
                                       "this runner reads text: load the language model's GGUF");
    }
    if (!lm->arch) {
        size_t count;
        const kvc_arch *archs = kvc_archs(&count);
        char list[256] = "";
        for (size_t i = 0; i < count; i++) {
            strncat(list, i ? ", " : "", sizeof list - strlen(list) - 1);
            strncat(list, archs[i].name, sizeof list - strlen(list) - 1);
        }
        return kvc_refuse(&src->says, KVC_E_ARCH, "architecture %.*s is not supported; this runner reads %s", (int)(len < 64 ? len : 64), name, list);
    }
    kvc_status status;
    size_t nextn = 0;
    if ((status = size_param(src, "block_count", 0, &lm->num_layers)) ||
        (status = layer_param(src, "nextn_predict_layers", 0, 0, &nextn)) ||
        (status = size_param(src, "embedding_length", 0, &lm->dim)) ||
        (status = size_param(src, "attention.head_count", 0, &lm->num_heads)) ||
        (status = read_kv_heads(src, lm, lm->num_layers)) ||
        (status = size_param(src, "context_length", 0, &lm->context_length)) ||
        (status = read_eps(src, lm)) ||
        (status = real_param(src, "rope.freq_base", 10000.0f, &lm->rope_base))) {
        return status;
    }
    /* Qwen3.5's block count holds its multi-token prediction block after the
     * stack (llama.cpp does not run it in the main pass, nor do we). */
    if (nextn >= lm->num_layers)
        return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "metadata %s.nextn_predict_layers is %zu of %zu blocks", src->arch->name, nextn, lm->num_layers);
    lm->num_layers -= nextn;
    if ((status = read_ffn(src, lm, lm->num_layers))) return status;
    size_t experts = 0;
    if ((status = layer_param(src, "expert_count", 0, 0, &experts))) return status;
    if (experts)
        return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "metadata %s.expert_count is %zu: a mixture-of-experts FFN, which this runner does not compute",
                          src->arch->name, experts);
    if (lm->dim % lm->num_heads && arch_key(src, "attention.key_length") == KVC_GGUF_NONE) {
        return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "%zu channels do not split into %zu heads", lm->dim, lm->num_heads);
    }
    size_t value_dim, window_value_dim;
    if ((status = size_param(src, "attention.key_length", lm->dim / lm->num_heads, &lm->head_dim)) ||
        (status = size_param(src, "attention.value_length", lm->head_dim, &value_dim))) {
        return status;
    }
    /* RoPE turns the first rope_dims channels of a head (llama.cpp's n_rot;
     * Phi-4-mini 96 of 128) by rope.scaling.attn_factor's scale (the
     * converter's LongRoPE magnitude; llama.cpp multiplies cos and sin by it
     * whatever the factors, and takes 1 without the key).  Window layers may
     * have a head size and RoPE channels of their own (gemma4: 256 and 256,
     * against 512 and 512 of which factors leave 384 unturned); llama.cpp
     * takes the global layers' where the file does not say. */
    if ((status = size_param(src, "rope.dimension_count", lm->head_dim, &lm->rope_dims)) ||
        (status = real_param(src, "rope.scaling.attn_factor", 1.0f, &lm->rope_scale)) ||
        (status = size_param(src, "attention.key_length_swa", lm->head_dim, &lm->window_head_dim)) ||
        (status = size_param(src, "attention.value_length_swa", lm->window_head_dim, &window_value_dim)) ||
        (status = size_param(src, "rope.dimension_count_swa", lm->rope_dims, &lm->window_rope_dims))) {
        return status;
    }
    /* The query's width is a size like the others: a product of two that
     * passed 32 bits would wrap in wasm32 to a width a small attn_q.weight
     * matches. */
    const size_t widest_head = lm->head_dim > lm->window_head_dim ? lm->head_dim : lm->window_head_dim;
    if (value_dim != lm->head_dim || window_value_dim != lm->window_head_dim || lm->rope_dims % 2 ||
        lm->rope_dims > lm->head_dim || lm->window_rope_dims % 2 || lm->window_rope_dims > lm->window_head_dim ||
        lm->head_dim % 2 || lm->window_head_dim % 2 || widest_head > KVC_MAX_HEAD_DIM ||
        lm->num_kv_heads > KVC_MAX_KV_HEADS || lm->num_heads > KVC_LM_MAX_SIZE / widest_head) {
        return kvc_refuse(&src->says, KVC_E_MODEL_FILE,
                      "an attention shape this runner does not compute: %zu heads of %zu (values %zu, RoPE on %zu), %zu KV heads",
                      lm->num_heads, lm->head_dim, value_dim, lm->rope_dims, lm->num_kv_heads);
    }
    lm->widest_head = widest_head;
    /* The sliding window, where the architecture has windowed layers and
     * the file gives one (llama.cpp attends globally everywhere without it). */
    if (lm->arch->global_every && arch_key(src, "attention.sliding_window") != KVC_GGUF_NONE &&
        (status = size_param(src, "attention.sliding_window", 0, &lm->window))) {
        return status;
    }
    if ((status = real_param(src, "rope.freq_base_swa", lm->arch->window_rope_base > 0 ? lm->arch->window_rope_base : lm->rope_base,
                             &lm->window_rope_base)))
        return status;
    /* The logits' cap: the file's, else the architecture's (llama.cpp's
     * hparams default of 30, which gemma4 keeps and gemma3 sets to none). */
    lm->logit_softcap = lm->arch->logit_softcap;
    if ((status = read_multipliers(src, lm))) return status;
    if ((lm->arch->flags & KVC_ARCH_LOGIT_SOFTCAP) && arch_key(src, "final_logit_softcapping") != KVC_GGUF_NONE &&
        (status = real_param(src, "final_logit_softcapping", 0, &lm->logit_softcap)))
        return status;
    if ((lm->arch->flags & KVC_ARCH_PER_LAYER_INPUT) &&
        (status = layer_param(src, "embedding_length_per_layer_input", 0, 0, &lm->per_layer_dim)))
        return status;
    return read_rope_scaling(src, lm);
}

/* The shape of the recurrent layers, from the file: lfm2's convolution over
 * the model's channels (shortconv.l_cache taps); qwen35's delta rule
 * (ssm.*: group_count key heads of state_size, time_step_rank value heads
 * sharing inner_size, conv_kernel taps); Mamba-2's the same keys
 * (group_count groups of B and C of state_size, time_step_rank heads
 * sharing inner_size).  Checked as the cache's creators check it, by
 * making one. */
static kvc_status read_recurrent_shape(lm_source *src, kvc_lm *lm) {
    kvc_recurrent_shape *r = &lm->recurrent;
    const int conv = lm->arch->recurrent == KVC_KIND_CONV, delta = lm->arch->recurrent == KVC_KIND_DELTA;
    kvc_status status;
    size_t inner = 0;
    if (conv) {
        r->channels = lm->dim;
        if ((status = size_param(src, "shortconv.l_cache", 0, &r->kernel))) return status;
    } else if ((status = size_param(src, "ssm.conv_kernel", 0, &r->kernel)) ||
               (status = size_param(src, "ssm.state_size", 0, &r->key_dim)) ||
               (status = size_param(src, "ssm.group_count", 0, &r->key_heads)) ||
               (status = size_param(src, "ssm.time_step_rank", 0, &r->value_heads)) ||
               (status = size_param(src, "ssm.inner_size", 0, &inner))) {
        return status;
    }
    kvc_layer *probe = NULL;
    if (conv) {
        status = kvc_layer_create_conv(r->channels, r->kernel, &probe);
    } else {
        r->value_dim = inner / r->value_heads;
        status = inner % r->value_heads ? KVC_E_VALUE_DIM
                 : delta ? kvc_layer_create_delta(r->key_heads, r->value_heads, r->key_dim, r->value_dim, r->kernel, &probe)
                         : kvc_layer_create_mamba2(r->value_heads, r->value_dim, r->key_heads, r->key_dim, r->kernel, &probe);
        if (probe) r->channels = kvc_layer_channels(probe);
    }
    r->state_len = kvc_layer_state_len(probe);
    kvc_layer_free(probe);
    if (status == KVC_E_NOMEM) return status;
    if (status != KVC_OK) {
        if (conv)
            return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "a convolution this runner does not compute: %zu channels, %zu taps", r->channels, r->kernel);
        return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "a %s layer this runner does not compute: %zu %s of %zu, %zu heads sharing %zu, %zu taps",
                          delta ? "delta rule" : "Mamba-2", r->key_heads, delta ? "key heads" : "groups", r->key_dim,
                          r->value_heads, inner, r->kernel);
    }
    return KVC_OK;
}

/* Which layers attend over a window (before the window itself is known to
 * be there): attention.sliding_window_pattern, where the architecture reads
 * it, a list (*listed: layer l's entry, read by windowed_layer) or a period
 * (*period); else the architecture's period, every global_every-th layer
 * global. */
static kvc_status window_pattern(lm_source *src, const kvc_lm *lm, int *listed, size_t *period) {
    const kvc_arch *arch = lm->arch;
    *listed = 0;
    *period = arch->global_every;
    if (!(arch->flags & KVC_ARCH_WINDOW_PATTERN) || arch_key(src, "attention.sliding_window_pattern") == KVC_GGUF_NONE) return KVC_OK;
    const kvc_status status = per_layer(src, "attention.sliding_window_pattern", lm->num_layers, listed);
    if (status != KVC_OK || *listed) return status;
    return size_param(src, "attention.sliding_window_pattern", 0, period);
}

/* Whether layer l attends over a window, by window_pattern's list or period. */
static kvc_status windowed_layer(lm_source *src, size_t l, int listed, size_t period, int *windowed) {
    size_t entry = 0;
    const kvc_status status = listed ? layer_param(src, "attention.sliding_window_pattern", l, 0, &entry) : KVC_OK;
    *windowed = listed ? entry != 0 : period && (l + 1) % period != 0;
    return status;
}

/* Each layer's kind (full, window, shared, or the architecture's recurrent
 * kind: lfm2's where head_count_kv is 0, qwen35's where
 * full_attention_interval does not fall), window, RoPE table and sizes;
 * the recurrent layers' shape.  A shared layer (the last
 * attention.shared_kv_layers) attends over the last layer before them of
 * its own kind, window or global: llama.cpp's n_layer_kv_from_start - 2 and
 * - 1 in the files it reads, whose last two layers with rows are a window
 * and a global one. */
static kvc_status plan_layers(lm_source *src, kvc_lm *lm) {
    const kvc_arch *arch = lm->arch;
    size_t interval = arch->attention_every, shared = 0;
    kvc_status status;
    if (arch->recurrent_layers == KVC_RECURRENT_BUT_INTERVAL &&
        (status = size_param(src, "full_attention_interval", interval, &interval)))
        return status;
    /* Granite 4.0-H: no positions where rope.scaling.finetuned is false (llama.cpp's default true). */
    double rotates = 1;
    const size_t switch_key = arch->flags & KVC_ARCH_ROPE_SWITCH ? arch_key(src, "rope.scaling.finetuned") : KVC_GGUF_NONE;
    if (switch_key != KVC_GGUF_NONE && kvc_gguf_number(src->gguf, switch_key, 0, &rotates) != KVC_OK)
        return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "metadata %s.rope.scaling.finetuned is not a bool", arch->name);
    if ((arch->flags & KVC_ARCH_SHARED_KV) && (status = layer_param(src, "attention.shared_kv_layers", 0, 0, &shared)))
        return status;
    if (shared >= lm->num_layers)
        return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "metadata %s.attention.shared_kv_layers is %zu of %zu blocks", arch->name, shared, lm->num_layers);
    const size_t owning = lm->num_layers - shared;
    int listed;
    size_t period;
    if ((status = window_pattern(src, lm, &listed, &period))) return status;
    size_t recurrent = 0;
    for (size_t l = 0; l < lm->num_layers; l++) {
        kvc_layer_plan *plan = &lm->plans[l];
        size_t kv_heads = 1;
        int windowed_kind = 0;
        if ((status = layer_param(src, "attention.head_count_kv", l, lm->num_heads, &kv_heads)) ||
            (status = layer_param(src, "feed_forward_length", l, 0, &plan->ffn_dim)) ||
            (status = windowed_layer(src, l, listed, period, &windowed_kind)))
            return status;
        /* nemotron_h: a block with an FFN has no mixer. */
        const int mlp_alone = arch->recurrent_layers == KVC_RECURRENT_WITHOUT_KV_OR_FFN && plan->ffn_dim > 0;
        /* falcon-h1: every layer attends beside its state. */
        const int beside = arch->recurrent_layers == KVC_RECURRENT_BESIDE_ATTENTION;
        const int is_recurrent = arch->recurrent == KVC_KIND_FULL || mlp_alone             ? 0
                                 : beside                                                  ? 1
                                 : arch->recurrent_layers == KVC_RECURRENT_BUT_INTERVAL ? (l + 1) % interval != 0
                                                                                        : kv_heads == 0;
        const int attends = beside || (!is_recurrent && !mlp_alone);
        const int windowed = !is_recurrent && lm->window && windowed_kind;
        plan->kind = mlp_alone ? KVC_KIND_NONE : is_recurrent ? arch->recurrent : windowed ? KVC_KIND_WINDOW : KVC_KIND_FULL;
        plan->window = windowed ? lm->window : 0;
        plan->rope_table = !rotates || (arch->nope_every && (l + 1) % arch->nope_every == 0) ? KVC_ROPE_NONE
                           : windowed                                          ? KVC_ROPE_WINDOW
                                                                               : KVC_ROPE_GLOBAL;
        plan->head_dim = windowed ? lm->window_head_dim : lm->head_dim;
        plan->rope_dims = windowed ? lm->window_rope_dims : lm->rope_dims;
        plan->kv_heads = attends ? kv_heads : 0;
        plan->owner = SIZE_MAX;
        if (attends && (kv_heads == 0 || kv_heads > KVC_MAX_KV_HEADS || lm->num_heads % kv_heads))
            return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "layer %zu: %zu query heads do not share %zu KV heads", l, lm->num_heads, kv_heads);
        if (l >= owning) {
            for (size_t o = owning; o-- > 0 && plan->owner == SIZE_MAX;)
                if (lm->plans[o].kind == plan->kind) plan->owner = o;
            if (plan->owner == SIZE_MAX || lm->plans[plan->owner].kv_heads != plan->kv_heads)
                return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "layer %zu shares keys and values, and no layer with rows before it is of its kind and shape", l);
            plan->kind = KVC_KIND_SHARED;
        }
        recurrent += is_recurrent;
    }
    return recurrent ? read_recurrent_shape(src, lm) : KVC_OK;
}

/* The per-layer input's tables: a row of every block's slice a token
 * (per_layer_token_embd), the projection of the embedding beside it and
 * that projection's norm. */
static kvc_status bind_per_layer_input(lm_source *src, kvc_lm *lm) {
    if (lm->per_layer_dim > KVC_LM_MAX_SIZE / lm->num_layers)
        return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "metadata %s.embedding_length_per_layer_input is %zu: too wide for %zu blocks",
                      lm->arch->name, lm->per_layer_dim, lm->num_layers);
    const size_t width = lm->per_layer_dim * lm->num_layers;
    kvc_status status = bind(src, "per_layer_token_embd.weight", width, lm->vocab_size, 0, &lm->per_layer_embd);
    if (status == KVC_OK) status = bind(src, "per_layer_model_proj.weight", lm->dim, width, 0, &lm->per_layer_proj);
    if (status == KVC_OK) status = bind(src, "per_layer_proj_norm.weight", lm->per_layer_dim, 0, 0, &lm->per_layer_norm);
    return status;
}

/* A whole number from `<arch>.<name>` up to `most` (absent: *out unchanged). */
static kvc_status count_param(lm_source *src, const char *name, size_t most, size_t *out) {
    const size_t i = arch_key(src, name);
    if (i == KVC_GGUF_NONE) return KVC_OK;
    double value;
    if (kvc_gguf_number(src->gguf, i, 0, &value) != KVC_OK || !(value >= 0 && value <= (double)most) ||
        value != (double)(size_t)value)
        return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "metadata %s.%s is not a whole number up to %zu", src->arch->name, name, most);
    *out = (size_t)value;
    return KVC_OK;
}

/* Binds matrix `name` of `cols` columns and whatever rows the file gives
 * (absent: left absent), and its bias of as many values when `bias` is
 * given. */
static kvc_status bind_head(lm_source *src, const char *name, size_t cols, kvc_tensor *out, kvc_tensor *bias) {
    char key[64];
    snprintf(key, sizeof key, "%s.weight", name);
    const size_t t = kvc_gguf_find_tensor(src->gguf, key, strlen(key));
    memset(out, 0, sizeof *out);
    if (bias) memset(bias, 0, sizeof *bias);
    if (t == KVC_GGUF_NONE) return KVC_OK;
    uint64_t dims[KVC_GGUF_MAX_DIMS] = {0, 0, 0, 0};
    kvc_gguf_tensor(src->gguf, t, NULL, NULL, NULL, NULL, dims, NULL, NULL);
    const size_t rows = dims[1] >= 1 && dims[1] <= KVC_LM_MAX_SIZE ? (size_t)dims[1] : 0;
    if (!rows) return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "tensor %s has no usable rows", key);
    kvc_status status = bind(src, key, cols, rows, 0, out);
    snprintf(key, sizeof key, "%s.bias", name);
    if (status == KVC_OK && bias) status = bind(src, key, rows, 0, 1, bias);
    return status;
}

/* bert's additions to a token's embedding: its position's row, the first
 * token type's, and the norm after them. */
static kvc_status bind_embedding_extras(lm_source *src, kvc_lm *lm) {
    const unsigned flags = lm->arch->flags;
    kvc_status status = KVC_OK;
    if (flags & KVC_ARCH_POSITION_EMBD) status = bind(src, "position_embd.weight", lm->dim, lm->context_length, 0, &lm->position_embd);
    if (status == KVC_OK && (flags & KVC_ARCH_TOKEN_TYPES)) status = bind_head(src, "token_types", lm->dim, &lm->token_types, NULL);
    if (status == KVC_OK && (flags & KVC_ARCH_LAYER_NORM)) status = bind(src, "token_embd_norm.weight", lm->dim, 0, 0, &lm->embd_norm);
    if (status == KVC_OK && (flags & KVC_ARCH_LAYER_NORM)) status = bind(src, "token_embd_norm.bias", lm->dim, 0, 0, &lm->embd_norm_bias);
    return status;
}

/* What makes an embedding model or a reranker of the file: its pooling,
 * its attention's direction, the dense layers after pooling
 * (sentence-transformers' Dense modules, as llama.cpp's converter writes
 * them: dense_2 from dim, dense_3 back), and the classification head
 * (cls, cls.output: classifier.output_labels rows, 1 without them). */
static kvc_status read_embedding(lm_source *src, kvc_lm *lm) {
    size_t pooling = KVC_POOLING_NONE, causal = !(lm->arch->flags & KVC_ARCH_BIDIRECTIONAL);
    kvc_status status;
    if ((status = count_param(src, "pooling_type", KVC_POOLING_RANK, &pooling)) ||
        (status = count_param(src, "attention.causal", 1, &causal)))
        return status;
    lm->pooling = (kvc_pooling)pooling;
    lm->causal = (int)causal;
    const size_t labels = arch_key(src, "classifier.output_labels");
    lm->rank_outputs = 1;
    if (labels != KVC_GGUF_NONE && kvc_gguf_value(src->gguf, labels, NULL, NULL, &lm->rank_outputs) != KVC_OK)
        return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "metadata %s.classifier.output_labels is unreadable", src->arch->name);
    if ((status = bind_head(src, "dense_2", lm->dim, &lm->dense_2, &lm->dense_2_bias)) ||
        (status = bind_head(src, "dense_3", lm->dense_2.type ? lm->dense_2.rows : lm->dim, &lm->dense_3, NULL)) ||
        (status = bind_head(src, "cls", lm->dim, &lm->cls, &lm->cls_bias)) ||
        (status = bind_head(src, "cls.output", lm->cls.type ? lm->cls.rows : lm->dim, &lm->cls_out, &lm->cls_out_bias)))
        return status;
    if (lm->cls_out.type && lm->cls_out.rows != lm->rank_outputs)
        return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "tensor cls.output.weight has %zu rows for %zu classifier labels",
                          lm->cls_out.rows, lm->rank_outputs);
    lm->embedding_dim = lm->dense_3.type ? lm->dense_3.rows : lm->dense_2.type ? lm->dense_2.rows : lm->dim;
    return KVC_OK;
}

kvc_status kvc_lm_create(const kvc_gguf *gguf, kvc_lm **out, char *message, size_t message_len) {
    if (message && message_len) message[0] = '\0';
    if (!out) return KVC_E_NULL_POINTER;
    *out = NULL;
    if (!gguf) return KVC_E_NULL_POINTER;
    lm_source src = {.gguf = gguf, .says = {message, message_len}};
    kvc_lm *lm = kvc_malloc(sizeof *lm);
    if (!lm) return KVC_E_NOMEM;
    memset(lm, 0, sizeof *lm);
    kvc_status status = read_params(&src, lm);
    /* six tensors a block at least (phi3's, fused) */
    if (status == KVC_OK) {
        char key[64];
        snprintf(key, sizeof key, "%s.block_count", lm->arch->name);
        status = kvc_refuse_block_count(&src.says, gguf, key, lm->num_layers);
    }
    const uint64_t data_bytes = kvc_gguf_data_bytes(gguf);
    if (status == KVC_OK) {
        /* More than the address space: kvc_lm_alloc_weights refuses it. */
        lm->data_bytes = data_bytes;
        lm->weights_bytes = data_bytes > SIZE_MAX ? SIZE_MAX : (size_t)data_bytes;
        lm->blocks = kvc_realloc_array(NULL, lm->num_layers, sizeof *lm->blocks);
        lm->plans = kvc_realloc_array(NULL, lm->num_layers, sizeof *lm->plans);
        if (!lm->blocks || !lm->plans) status = KVC_E_NOMEM;
    }
    if (status == KVC_OK) status = plan_layers(&src, lm);
    if (status == KVC_OK) {
        /* The vocabulary is token_embd's rows. */
        const size_t t = kvc_gguf_find_tensor(gguf, "token_embd.weight", strlen("token_embd.weight"));
        uint64_t dims[KVC_GGUF_MAX_DIMS] = {0, 0, 0, 0};
        if (t != KVC_GGUF_NONE) kvc_gguf_tensor(gguf, t, NULL, NULL, NULL, NULL, dims, NULL, NULL);
        lm->vocab_size = dims[1] >= 1 && dims[1] <= KVC_LM_MAX_SIZE ? (size_t)dims[1] : 0;
        status = lm->vocab_size ? bind(&src, "token_embd.weight", lm->dim, lm->vocab_size, 0, &lm->token_embd)
                                : kvc_refuse(&src.says, KVC_E_MODEL_FILE, "tensor token_embd.weight is missing or has no rows");
    }
    if (status == KVC_OK && !(lm->arch->flags & KVC_ARCH_NORM_AFTER)) {
        const char *norm = lm->arch->output_norm ? lm->arch->output_norm : "output_norm.weight";
        status = bind(&src, norm, lm->dim, 0, 0, &lm->output_norm);
    }
    if (status == KVC_OK) status = bind_embedding_extras(&src, lm);
    if (status == KVC_OK) status = bind(&src, "output.weight", lm->dim, lm->vocab_size, 1, &lm->output);
    if (status == KVC_OK && !lm->output.type) lm->output = lm->token_embd; /* tied embeddings */
    if (status == KVC_OK && lm->per_layer_dim) status = bind_per_layer_input(&src, lm);
    if (status == KVC_OK) status = bind_rope_factors(&src, lm);
    for (size_t l = 0; status == KVC_OK && l < lm->num_layers; l++) status = bind_block(&src, lm, l);
    if (status == KVC_OK) status = read_embedding(&src, lm);
    if (status == KVC_OK) *out = lm;
    else kvc_lm_free(lm);
    return status;
}

void kvc_lm_free(kvc_lm *lm) {
    if (!lm) return;
    kvc_lm_scratch_free(&lm->scratch);
    kvc_free(lm->pending.mass);
    kvc_free(lm->pending.positions);
    kvc_free(lm->blocks);
    kvc_free(lm->plans);
    kvc_free(lm->weights);
    kvc_free(lm);
}

void kvc_lm_each_tensor(kvc_lm *lm, void (*fn)(kvc_tensor *t, void *context), void *context) {
    kvc_tensor *model[] = {&lm->token_embd, &lm->output_norm, &lm->output, &lm->rope_freqs,
                           &lm->per_layer_embd, &lm->per_layer_proj, &lm->per_layer_norm,
                           &lm->dense_2, &lm->dense_2_bias, &lm->dense_3, &lm->cls, &lm->cls_bias,
                           &lm->cls_out, &lm->cls_out_bias, &lm->position_embd, &lm->token_types,
                           &lm->embd_norm, &lm->embd_norm_bias};
    for (size_t i = 0; i < sizeof model / sizeof model[0]; i++) fn(model[i], context);
    for (size_t l = 0; l < lm->num_layers; l++) {
        kvc_block *b = &lm->blocks[l];
        kvc_tensor *block[] = {&b->attn_norm, &b->wq, &b->wk, &b->wv, &b->wo, &b->ffn_norm, &b->w_gate, &b->w_up,
                               &b->w_down, &b->bq, &b->bk, &b->bv, &b->q_norm, &b->k_norm,
                               &b->post_attn_norm, &b->post_ffn_norm, &b->in_proj, &b->conv, &b->out_proj,
                               &b->z_proj, &b->beta_proj, &b->alpha_proj, &b->dt_bias, &b->decay_rate, &b->head_norm,
                               &b->ple_gate, &b->ple_proj, &b->ple_norm, &b->out_scale, &b->bo, &b->b_up, &b->b_down,
                               &b->post_attn_norm_bias, &b->post_ffn_norm_bias, &b->dt_proj, &b->conv_bias, &b->skip};
        for (size_t i = 0; i < sizeof block / sizeof block[0]; i++) fn(block[i], context);
    }
}

/* A tensor after the per-layer table, moved down by the table's bytes. */
static void move_down_past_table(kvc_tensor *t, void *context) {
    const kvc_lm *lm = context;
    if (t->type && t->offset >= lm->outside_offset + lm->outside_bytes) t->offset -= lm->outside_bytes;
}

kvc_status kvc_lm_keep_per_layer_outside(kvc_lm *lm) {
    if (!lm) return KVC_E_NULL_POINTER;
    if (!lm->per_layer_embd.type || lm->weights) return KVC_E_KIND;
    if (lm->outside_bytes) return KVC_OK;
    const kvc_tensor *table = &lm->per_layer_embd;
    lm->outside_offset = table->offset;
    lm->outside_bytes = table->rows * table->row_bytes;
    /* Every tensor past the table moves down by its bytes; the table
     * itself keeps its file offset, which only forward's rows stand for. */
    kvc_lm_each_tensor(lm, move_down_past_table, lm);
    /* What is left may fit the address space where the whole did not (E4B). */
    const uint64_t inside = lm->data_bytes - lm->outside_bytes;
    lm->weights_bytes = inside > SIZE_MAX ? SIZE_MAX : (size_t)inside;
    return KVC_OK;
}

size_t kvc_lm_per_layer_row_bytes(const kvc_lm *lm) {
    return lm && lm->per_layer_embd.type ? lm->per_layer_embd.row_bytes : 0;
}

void kvc_lm_per_layer_outside_range(const kvc_lm *lm, uint64_t *offset, uint64_t *bytes) {
    if (offset) *offset = lm ? lm->outside_offset : 0;
    if (bytes) *bytes = lm ? lm->outside_bytes : 0;
}

/* A tensor's data, once the weights are there. */
static void place(kvc_tensor *t, void *weights) {
    t->data = t->type ? (const uint8_t *)weights + (size_t)t->offset : NULL; /* below weights_bytes: kvc_lm_alloc_weights */
}

kvc_status kvc_lm_alloc_weights(kvc_lm *lm) {
    if (!lm) return KVC_E_NULL_POINTER;
    if (lm->weights) return KVC_OK;
    /* At least a byte, so that a model of no tensor data has a pointer. */
    lm->weights = lm->weights_bytes < SIZE_MAX ? kvc_malloc(lm->weights_bytes ? lm->weights_bytes : 1) : NULL;
    if (!lm->weights) return KVC_E_NOMEM;
    kvc_lm_each_tensor(lm, place, lm->weights);
    if (lm->outside_bytes) lm->per_layer_embd.data = NULL; /* forward's rows stand for it */
    return KVC_OK;
}

uint8_t *kvc_lm_weights(kvc_lm *lm) {
    return lm ? lm->weights : NULL;
}

size_t kvc_lm_weights_bytes(const kvc_lm *lm) {
    return lm ? lm->weights_bytes : 0;
}

const char *kvc_lm_architecture(const kvc_lm *lm) {
    return lm ? lm->arch->name : NULL;
}

size_t kvc_lm_num_layers(const kvc_lm *lm) { return lm ? lm->num_layers : 0; }
size_t kvc_lm_dim(const kvc_lm *lm) { return lm ? lm->dim : 0; }
size_t kvc_lm_num_heads(const kvc_lm *lm) { return lm ? lm->num_heads : 0; }
size_t kvc_lm_num_kv_heads(const kvc_lm *lm) { return lm ? lm->num_kv_heads : 0; }
size_t kvc_lm_head_dim(const kvc_lm *lm) { return lm ? lm->head_dim : 0; }
size_t kvc_lm_ffn_dim(const kvc_lm *lm) { return lm ? lm->ffn_dim : 0; }
size_t kvc_lm_vocab_size(const kvc_lm *lm) { return lm ? lm->vocab_size : 0; }
size_t kvc_lm_context_length(const kvc_lm *lm) { return lm ? lm->context_length : 0; }
float kvc_lm_rms_eps(const kvc_lm *lm) { return lm ? lm->rms_eps : 0.0f; }
float kvc_lm_rope_base(const kvc_lm *lm) { return lm ? lm->rope_base : 0.0f; }
size_t kvc_lm_layer_window(const kvc_lm *lm, size_t layer) {
    return lm && layer < lm->num_layers ? lm->plans[layer].window : 0;
}
kvc_kind kvc_lm_layer_kind(const kvc_lm *lm, size_t layer) {
    return lm && layer < lm->num_layers ? lm->plans[layer].kind : KVC_KIND_FULL;
}
size_t kvc_lm_layer_head_dim(const kvc_lm *lm, size_t layer) {
    return lm && layer < lm->num_layers ? lm->plans[layer].head_dim : 0;
}
size_t kvc_lm_layer_kv_heads(const kvc_lm *lm, size_t layer) {
    return lm && layer < lm->num_layers ? lm->plans[layer].kv_heads : 0;
}
size_t kvc_lm_layer_owner(const kvc_lm *lm, size_t layer) {
    return lm && layer < lm->num_layers ? lm->plans[layer].owner : SIZE_MAX;
}
size_t kvc_lm_per_layer_dim(const kvc_lm *lm) { return lm ? lm->per_layer_dim : 0; }
size_t kvc_lm_recurrent_channels(const kvc_lm *lm) { return lm ? lm->recurrent.channels : 0; }
size_t kvc_lm_recurrent_kernel(const kvc_lm *lm) { return lm ? lm->recurrent.kernel : 0; }
size_t kvc_lm_recurrent_key_heads(const kvc_lm *lm) { return lm ? lm->recurrent.key_heads : 0; }
size_t kvc_lm_recurrent_value_heads(const kvc_lm *lm) { return lm ? lm->recurrent.value_heads : 0; }
size_t kvc_lm_recurrent_key_dim(const kvc_lm *lm) { return lm ? lm->recurrent.key_dim : 0; }
size_t kvc_lm_recurrent_value_dim(const kvc_lm *lm) { return lm ? lm->recurrent.value_dim : 0; }
size_t kvc_lm_recurrent_state_len(const kvc_lm *lm) { return lm ? lm->recurrent.state_len : 0; }
size_t kvc_lm_scratch_bytes(const kvc_lm *lm) {
    return lm ? lm->scratch.bytes + 4 * (lm->pending.capacity + lm->pending.position_capacity) : 0;
}
