/*
 * vision.c -- an image encoder from a parsed projector GGUF file (llama.cpp's
 * mtmd, general.architecture "clip"): the projector type's row of the
 * table below, the encoder's hyperparameters from the metadata, and every
 * tensor bound to where it will lie in the weights -- one region, the
 * file's tensor data byte for byte, which the caller fills after creation,
 * as for a language model (lm.c).  The names and keys are llama.cpp's
 * (clip-impl.h's TN_* and KEY_*), read as its clip.cpp reads them: every
 * block tensor but attn_out, ffn_up and ffn_down optional, applied when
 * present.
 */
#include <stdio.h>
#include <string.h>

#include "../core/internal.h"
#include "vision.h"

/* ---- the projector types: what each does after the encoder's blocks ---- */

static const kvc_vision_design designs[] = {
    /* SmolVLM, SmolVLM2 (SigLIP): pixel shuffle by the scale factor, one
     * product without bias (siglip.cpp's IDEFICS3 branch). */
    {.name = "idefics3", .kind = KVC_PROJECTOR_IDEFICS3, .positions = KVC_VISION_POS_TABLE,
     .merge_key = "clip.vision.projector.scale_factor", .ffn_swappable = 1, .head_act = KVC_VISION_GELU,
     .steps = 2, .step = {{KVC_VISION_SHUFFLE, NULL, 0}, {KVC_VISION_LINEAR, "mm.model.fc", 0}}},
    /* LFM2-VL (SigLIP2 NaFlex): the position table resized to the tile's
     * grid, pixel unshuffle, LayerNorm at nn.LayerNorm's 1e-5 (not the
     * file's eps), a two-layer MLP with GELU. */
    {.name = "lfm2", .kind = KVC_PROJECTOR_LFM2, .positions = KVC_VISION_POS_RESIZED,
     .merge_key = "clip.vision.projector.scale_factor", .head_act = KVC_VISION_GELU,
     .steps = 5, .step = {{KVC_VISION_SHUFFLE, NULL, 0}, {KVC_VISION_LAYERNORM, "mm.input_norm", 1e-5f},
                          {KVC_VISION_LINEAR, "mm.1", 0}, {KVC_VISION_ACT, NULL, 0}, {KVC_VISION_LINEAR, "mm.2", 0}}},
    /* Gemma 3 (SigLIP at 896): a 4x4 average pool (the scale factor where
     * the file says one), RMSNorm, the projection stored transposed. */
    {.name = "gemma3", .kind = KVC_PROJECTOR_GEMMA3, .positions = KVC_VISION_POS_TABLE,
     .merge_key = "clip.vision.projector.scale_factor", .merge = 4, .ffn_swappable = 1, .head_act = KVC_VISION_GELU,
     .steps = 3, .step = {{KVC_VISION_POOL, NULL, 0}, {KVC_VISION_RMSNORM, "mm.soft_emb_norm", 0},
                          {KVC_VISION_LINEAR_T, "mm.input_projection", 0}}},
    /* Gemma 4 (gemma4v.cpp): the pixels as 2x - 1, a column and a row
     * table, RMSNorm blocks with q, k and post norms, 2D RoPE at 100, V
     * normed, q.k unscaled, GELU-gated FFN, clamped products; a 3x3
     * average pool times sqrt(width), the optional standardisation, RMSNorm
     * without weight, the projection. */
    {.name = "gemma4v", .kind = KVC_PROJECTOR_GEMMA4V, .positions = KVC_VISION_POS_XY,
     .merge_key = "clip.vision.projector.scale_factor", .merge = 3, .head_act = KVC_VISION_GELU,
     .norm = KVC_VISION_RMSNORM_BLOCKS, .pixel_scale = 2.0f, .pixel_bias = -1.0f,
     .rope = KVC_VISION_ROPE_HALVES_XY, .rope_theta = 100.0f,
     .attention_scale = 1.0f, .v_norm = 1, .clamps = 1,
     .steps = 5, .step = {{KVC_VISION_POOL, NULL, 0}, {KVC_VISION_SCALE, NULL, 0}, {KVC_VISION_STANDARDIZE, "v.std", 0},
                          {KVC_VISION_RMSNORM, NULL, 0}, {KVC_VISION_LINEAR, "mm.input_projection", 0}}},
    /* Qwen3-VL, Qwen3.5 (qwen3vl.cpp): two patch kernels summed, the patches
     * in 2x2 block order, the position table resized (aligned corners, no
     * antialiasing: llama.cpp b10257's result), LayerNorm blocks with
     * a fused qkv and M-RoPE; each 2x2 block one row through a two-layer
     * MLP with GELU; the deepstack blocks' features appended. */
    {.name = "qwen3vl_merger", .kind = KVC_PROJECTOR_QWEN3VL, .positions = KVC_VISION_POS_RESIZED_CORNERS,
     .merge_key = "clip.vision.spatial_merge_size", .merge = 2, .head_act = KVC_VISION_GELU,
     .rope = KVC_VISION_ROPE_QUARTERS_YX, .rope_theta = 10000.0f, .block_order = 1, .deepstack = 1,
     .steps = 4, .step = {{KVC_VISION_GROUP, NULL, 0}, {KVC_VISION_LINEAR, "mm.0", 0}, {KVC_VISION_ACT, NULL, 0},
                          {KVC_VISION_LINEAR, "mm.2", 0}}},
};

/* ---- what the GGUF file says ---- */

typedef struct vision_source {
    const kvc_gguf *gguf;
    kvc_says says; /* what is wrong, for the caller */
} vision_source;

/* The largest width, count or size a file may give: no encoder needs more,
 * and products of two stay within 2^32. */
#define KVC_VISION_MAX_SIZE ((size_t)1 << 16)

static size_t find_key(const vision_source *src, const char *key) {
    return kvc_gguf_find(src->gguf, key, strlen(key));
}

/* A whole number from 1 to KVC_VISION_MAX_SIZE under `key`, or `fallback`
 * when absent (0: required). */
static kvc_status size_key(vision_source *src, const char *key, size_t fallback, size_t *out) {
    const size_t i = find_key(src, key);
    if (i == KVC_GGUF_NONE) {
        if (fallback) {
            *out = fallback;
            return KVC_OK;
        }
        return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "metadata %s is missing", key);
    }
    double value;
    if (kvc_gguf_number(src->gguf, i, 0, &value) != KVC_OK || !(value >= 1 && value <= KVC_VISION_MAX_SIZE) ||
        value != (double)(size_t)value) {
        return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "metadata %s is not a usable size", key);
    }
    *out = (size_t)value;
    return KVC_OK;
}

/* A bool under `key` (absent: 0). */
static kvc_status flag_key(vision_source *src, const char *key, int *out) {
    const size_t i = find_key(src, key);
    double value = 0;
    if (i != KVC_GGUF_NONE && kvc_gguf_number(src->gguf, i, 0, &value) != KVC_OK)
        return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "metadata %s is not a bool", key);
    *out = value != 0;
    return KVC_OK;
}

/* The projector type's row: clip.projector_type, or for a file of mixed
 * modalities clip.vision.projector_type (clip.cpp's load_hparams). */
static kvc_status read_design(vision_source *src, const kvc_vision_design **out) {
    const char *name = NULL;
    size_t len = 0;
    const size_t a = find_key(src, "general.architecture");
    if (kvc_gguf_string(src->gguf, a, 0, &name, &len) != KVC_OK || len != 4 || memcmp(name, "clip", 4) != 0)
        return kvc_refuse(&src->says, KVC_E_ARCH, "this file is not a projector (general.architecture is not clip): load the vision encoder's mmproj GGUF");
    int has_vision = 0;
    kvc_status status = flag_key(src, "clip.has_vision_encoder", &has_vision);
    if (status != KVC_OK) return status;
    if (!has_vision) return kvc_refuse(&src->says, KVC_E_ARCH, "this projector has no vision encoder (clip.has_vision_encoder is not true)");
    size_t t = find_key(src, "clip.projector_type");
    if (kvc_gguf_string(src->gguf, t, 0, &name, &len) != KVC_OK || len == 0) {
        t = find_key(src, "clip.vision.projector_type");
        if (kvc_gguf_string(src->gguf, t, 0, &name, &len) != KVC_OK)
            return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "metadata clip.projector_type is missing");
    }
    for (size_t i = 0; i < sizeof designs / sizeof designs[0]; i++) {
        if (strlen(designs[i].name) == len && memcmp(designs[i].name, name, len) == 0) {
            *out = &designs[i];
            return KVC_OK;
        }
    }
    char list[128] = "";
    for (size_t i = 0, at = 0; i < sizeof designs / sizeof designs[0] && at < sizeof list; i++)
        at += (size_t)snprintf(list + at, sizeof list - at, "%s%s", i ? ", " : "", designs[i].name);
    return kvc_refuse(&src->says, KVC_E_ARCH, "projector type %.*s is not one this library encodes (%s)", (int)(len > 64 ? 64 : len), name, list);
}

/* Binds tensor `name` of n_dims dims, each dims[i] (0: any size from 1 to
 * KVC_VISION_MAX_SIZE, written back), as a matrix: its last dim the rows,
 * the others' product the columns (a conv kernel's row: one output
 * channel's weights); a vector is one row.  An absent tensor is refused
 * unless `optional`. */
static kvc_status bind(vision_source *src, const char *name, size_t n_dims, size_t *dims, int optional,
                       kvc_tensor *out) {
    memset(out, 0, sizeof *out);
    const size_t t = kvc_gguf_find_tensor(src->gguf, name, strlen(name));
    if (t == KVC_GGUF_NONE) return optional ? KVC_OK : kvc_refuse(&src->says, KVC_E_MODEL_FILE, "tensor %s is missing", name);
    uint64_t found[KVC_GGUF_MAX_DIMS];
    uint64_t offset;
    uint32_t id;
    size_t found_dims;
    kvc_gguf_tensor(src->gguf, t, NULL, NULL, &id, &found_dims, found, &offset, NULL);
    int fits = found_dims == n_dims;
    for (size_t i = 0; fits && i < n_dims; i++)
        fits = dims[i] ? found[i] == dims[i] : found[i] >= 1 && found[i] <= KVC_VISION_MAX_SIZE;
    if (!fits) {
        char shape[96], expected[96];
        size_t at = 0, at_expected = 0;
        for (size_t i = 0; i < found_dims && at < sizeof shape; i++)
            at += (size_t)snprintf(shape + at, sizeof shape - at, "%s%llu", i ? ", " : "", (unsigned long long)found[i]);
        for (size_t i = 0; i < n_dims && at_expected < sizeof expected; i++) {
            at_expected += dims[i] ? (size_t)snprintf(expected + at_expected, sizeof expected - at_expected, "%s%zu", i ? ", " : "", dims[i])
                                   : (size_t)snprintf(expected + at_expected, sizeof expected - at_expected, "%s?", i ? ", " : "");
        }
        return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "tensor %s is [%s], expected [%s]", name, shape, expected);
    }
    const kvc_weight_type *type = kvc_tensor_type(&src->says, name, id);
    if (!type) return KVC_E_WEIGHT_TYPE;
    size_t cols = 1;
    for (size_t i = 0; i < n_dims; i++) dims[i] = (size_t)found[i];
    for (size_t i = 0; i + 1 < n_dims; i++) cols *= dims[i];
    /* The reader holds a row of dims[0] to whole blocks, so cols is too. */
    out->type = type;
    out->offset = offset;
    out->cols = n_dims == 1 ? dims[0] : cols;
    out->rows = n_dims == 1 ? 1 : dims[n_dims - 1];
    out->row_bytes = out->cols / type->block_values * type->block_bytes;
    return KVC_OK;
}

/* Tensor `name` as a vector of n values, or a matrix of cols columns and
 * *rows rows (0: any, written back). */
static kvc_status bind_vector(vision_source *src, const char *name, size_t n, int optional, kvc_tensor *out) {
    size_t dims[1] = {n};
    return bind(src, name, 1, dims, optional, out);
}

static kvc_status bind_matrix(vision_source *src, const char *name, size_t cols, size_t *rows, kvc_tensor *out) {
    size_t dims[2] = {cols, *rows};
    const kvc_status status = bind(src, name, 2, dims, 0, out);
    *rows = dims[1];
    return status;
}

/* The hyperparameters (clip.cpp's load_hparams, KEY_*). */
static kvc_status read_params(vision_source *src, kvc_vision *v) {
    const kvc_vision_design *d = v->design;
    size_t image_size;
    kvc_status status;
    if ((status = size_key(src, "clip.vision.embedding_length", 0, &v->dim)) ||
        (status = size_key(src, "clip.vision.feed_forward_length", 0, &v->ffn_dim)) ||
        (status = size_key(src, "clip.vision.block_count", 0, &v->layers)) ||
        (status = size_key(src, "clip.vision.attention.head_count", 0, &v->heads)) ||
        (status = size_key(src, "clip.vision.image_size", 0, &image_size)) ||
        (status = size_key(src, "clip.vision.patch_size", 0, &v->patch_size)) ||
        (status = size_key(src, d->merge_key, d->merge, &v->merge)))
        return status;
    const size_t e = find_key(src, "clip.vision.attention.layer_norm_epsilon");
    double eps;
    if (e == KVC_GGUF_NONE) return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "metadata clip.vision.attention.layer_norm_epsilon is missing");
    if (kvc_gguf_number(src->gguf, e, 0, &eps) != KVC_OK || !(eps > 0 && eps < 1))
        return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "metadata clip.vision.attention.layer_norm_epsilon is not a small positive number");
    v->eps = (float)eps;
    if (v->dim % v->heads)
        return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "clip.vision.embedding_length %zu is not a whole number of %zu heads", v->dim, v->heads);
    v->head_dim = v->dim / v->heads;
    if (v->head_dim > KVC_MAX_HEAD_DIM)
        return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "a head of %zu channels: the attention takes %d at most", v->head_dim, KVC_MAX_HEAD_DIM);
    if (d->block_order && v->merge != 2)
        return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "metadata %s is %zu: this projector merges 2 x 2 patches", d->merge_key, v->merge);
    if (d->rope && v->head_dim % 4)
        return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "a head of %zu channels does not split into the quarters 2D RoPE turns", v->head_dim);
    if (v->merge < 2) return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "metadata %s is %zu: this projector merges 2 or more patches a side", d->merge_key, v->merge);
    if (v->patch_size > 256) return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "metadata clip.vision.patch_size is %zu: too large", v->patch_size);
    int gelu, silu;
    if ((status = flag_key(src, "clip.use_gelu", &gelu)) || (status = flag_key(src, "clip.use_silu", &silu))) return status;
    if (gelu && silu) return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "metadata clip.use_gelu and clip.use_silu are both true");
    v->act = gelu ? KVC_VISION_GELU : silu ? KVC_VISION_SILU : KVC_VISION_GELU_QUICK;
    v->image = (kvc_image_params){.kind = d->kind, .image_size = image_size, .patch_size = v->patch_size, .merge = v->merge};
    return KVC_OK;
}

static int has_tensor(const vision_source *src, const char *name) {
    return kvc_gguf_find_tensor(src->gguf, name, strlen(name)) != KVC_GGUF_NONE;
}

/* The first dim of tensor `name` (0: absent). */
static uint64_t first_dim(const vision_source *src, const char *name) {
    const size_t t = kvc_gguf_find_tensor(src->gguf, name, strlen(name));
    uint64_t dims[KVC_GGUF_MAX_DIMS] = {0};
    if (t != KVC_GGUF_NONE) kvc_gguf_tensor(src->gguf, t, NULL, NULL, NULL, NULL, dims, NULL, NULL);
    return dims[0];
}

/* The clamps of the product whose weight is `weight` ("<name>.weight"):
 * its four scalars, each optional. */
static kvc_status bind_clamps(vision_source *src, const char *weight, kvc_tensor *bounds) {
    static const char *const names[KVC_VISION_BOUNDS] = {"input_min", "input_max", "output_min", "output_max"};
    const size_t stem = strlen(weight) - strlen("weight");
    char name[112];
    for (size_t i = 0; i < KVC_VISION_BOUNDS; i++) {
        snprintf(name, sizeof name, "%.*s%s", (int)stem, weight, names[i]);
        const kvc_status status = bind_vector(src, name, 1, 1, &bounds[i]);
        if (status != KVC_OK) return status;
    }
    return KVC_OK;
}

/* Rows [first, first + rows) of t: a weight of its own (lm.c's row_range). */
static kvc_tensor row_range(const kvc_tensor *t, size_t first, size_t rows) {
    kvc_tensor range = *t;
    range.offset += first * t->row_bytes;
    range.rows = rows;
    return range;
}

/* Values [first, first + n) of the vector t, a whole number of its blocks. */
static kvc_tensor vector_range(const kvc_tensor *t, size_t first, size_t n) {
    kvc_tensor range = *t;
    range.offset += first / t->type->block_values * t->type->block_bytes;
    range.cols = n;
    range.row_bytes = n / t->type->block_values * t->type->block_bytes;
    return range;
}

/* Block l's deepstack (v.deepstack.<l>.*): every one as wide as the first. */
static kvc_status bind_deepstack(vision_source *src, kvc_vision *v, size_t l) {
    kvc_vision_block *b = &v->blocks[l];
    const size_t in = v->dim * v->merge * v->merge;
    size_t hidden = 0, out = v->deepstack_width;
    char name[64];
    kvc_status status;
    snprintf(name, sizeof name, "v.deepstack.%zu.norm.weight", l);
    if ((status = bind_vector(src, name, in, 1, &b->ds_norm_w))) return status;
    snprintf(name, sizeof name, "v.deepstack.%zu.norm.bias", l);
    if ((status = bind_vector(src, name, in, 1, &b->ds_norm_b))) return status;
    snprintf(name, sizeof name, "v.deepstack.%zu.fc1.weight", l);
    if ((status = bind_matrix(src, name, in, &hidden, &b->ds_fc1))) return status;
    snprintf(name, sizeof name, "v.deepstack.%zu.fc1.bias", l);
    if ((status = bind_vector(src, name, hidden, 1, &b->ds_fc1_b))) return status;
    snprintf(name, sizeof name, "v.deepstack.%zu.fc2.weight", l);
    if ((status = bind_matrix(src, name, hidden, &out, &b->ds_fc2))) return status;
    snprintf(name, sizeof name, "v.deepstack.%zu.fc2.bias", l);
    if ((status = bind_vector(src, name, out, 1, &b->ds_fc2_b))) return status;
    v->deepstack_width = out;
    v->deepstack_layers++;
    return KVC_OK;
}

/* Block l's tensors (clip.cpp's load_tensors: v.blk.<l>.*). */
static kvc_status bind_block(vision_source *src, kvc_vision *v, size_t l) {
    kvc_vision_block *b = &v->blocks[l];
    const size_t D = v->dim, F = v->ffn_dim;
    char name[96];
    memset(b, 0, sizeof *b); /* what the file lacks stays absent */
    /* An older converter's ffn_down is the up projection: it takes D. */
    snprintf(name, sizeof name, "v.blk.%zu.ffn_down.weight", l);
    const int swapped = v->design->ffn_swappable && first_dim(src, name) == D;
    const struct {
        const char *part;
        size_t cols, rows;
        int optional;
    } products[KVC_VISION_PRODUCTS] = {
        [KVC_VISION_Q] = {"attn_q", D, D, 0},       [KVC_VISION_K] = {"attn_k", D, D, 0},
        [KVC_VISION_V] = {"attn_v", D, D, 0},       [KVC_VISION_O] = {"attn_out", D, D, 0},
        [KVC_VISION_GATE] = {"ffn_gate", D, F, 1},  [KVC_VISION_UP] = {swapped ? "ffn_down" : "ffn_up", D, F, 0},
        [KVC_VISION_DOWN] = {swapped ? "ffn_up" : "ffn_down", F, D, 0},
    };
    kvc_status status = KVC_OK;
    /* A fused attn_qkv: q's rows, then k's, then v's (build_vit's views). */
    snprintf(name, sizeof name, "v.blk.%zu.attn_qkv.weight", l);
    const int fused = has_tensor(src, name);
    if (fused) {
        size_t rows = 3 * D;
        kvc_tensor qkv, qkv_b;
        status = bind_matrix(src, name, D, &rows, &qkv);
        snprintf(name, sizeof name, "v.blk.%zu.attn_qkv.bias", l);
        if (status == KVC_OK) status = bind_vector(src, name, 3 * D, 1, &qkv_b);
        for (size_t i = 0; status == KVC_OK && i < 3; i++) {
            b->w[i] = row_range(&qkv, i * D, D);
            if (qkv_b.type) b->b[i] = vector_range(&qkv_b, i * D, D);
        }
    }
    for (size_t i = fused ? KVC_VISION_O : 0; status == KVC_OK && i < KVC_VISION_PRODUCTS; i++) {
        snprintf(name, sizeof name, "v.blk.%zu.%s.weight", l, products[i].part);
        if (products[i].optional && !has_tensor(src, name)) continue;
        size_t rows = products[i].rows;
        status = bind_matrix(src, name, products[i].cols, &rows, &b->w[i]);
        if (status == KVC_OK && v->design->clamps) status = bind_clamps(src, name, b->clamp[i]);
        snprintf(name, sizeof name, "v.blk.%zu.%s.bias", l, products[i].part);
        if (status == KVC_OK) status = bind_vector(src, name, products[i].rows, 1, &b->b[i]);
    }
    const struct {
        const char *part;
        size_t n; /* 0: a head's size or the width */
        int scalar; /* one value, for all channels, serves as well (ggml_mul broadcasts it) */
        kvc_tensor *out;
    } vectors[] = {
        {"ln1.weight", D, 0, &b->ln1_w}, {"ln1.bias", D, 0, &b->ln1_b}, {"ln2.weight", D, 0, &b->ln2_w}, {"ln2.bias", D, 0, &b->ln2_b},
        {"attn_q_norm.weight", 0, 0, &b->q_norm}, {"attn_k_norm.weight", 0, 0, &b->k_norm},
        {"attn_post_norm.weight", D, 0, &b->attn_post_norm}, {"ffn_post_norm.weight", D, 0, &b->ffn_post_norm},
        /* Gemma 4's layer_scalar: a scalar as the converter writes it */
        {"out_scale.weight", D, 1, &b->out_scale},
    };
    for (size_t i = 0; status == KVC_OK && i < sizeof vectors / sizeof vectors[0]; i++) {
        snprintf(name, sizeof name, "v.blk.%zu.%s", l, vectors[i].part);
        const uint64_t found = first_dim(src, name);
        /* q and k norms: over each head when a head's size, else the row. */
        size_t n = vectors[i].n ? vectors[i].n : found == v->head_dim ? v->head_dim : D;
        if (vectors[i].scalar && found == 1) n = 1;
        status = bind_vector(src, name, n, 1, vectors[i].out);
    }
    snprintf(name, sizeof name, "v.deepstack.%zu.fc1.weight", l);
    if (status == KVC_OK && v->design->deepstack && has_tensor(src, name)) status = bind_deepstack(src, v, l);
    return status;
}

/* The patch embedding, the position table and the encoder's outer norms. */
static kvc_status bind_stem(vision_source *src, kvc_vision *v) {
    const size_t P = v->patch_size, D = v->dim;
    const int xy = v->design->positions == KVC_VISION_POS_XY;
    size_t kernel[4] = {P, P, 3, D}, table[3] = {D, 0, 2};
    kvc_status status;
    if ((status = bind(src, "v.patch_embd.weight", 4, kernel, 0, &v->patch_w)) ||
        (status = bind_vector(src, "v.patch_embd.bias", D, 1, &v->patch_b)) ||
        (status = bind(src, "v.position_embd.weight", xy ? 3 : 2, table, 0, &v->position)) ||
        (status = bind_vector(src, "v.pre_ln.weight", D, 1, &v->pre_ln_w)) ||
        (status = bind_vector(src, "v.pre_ln.bias", D, 1, &v->pre_ln_b)) ||
        (status = bind_vector(src, "v.post_ln.weight", D, 1, &v->post_ln_w)) ||
        (status = bind_vector(src, "v.post_ln.bias", D, 1, &v->post_ln_b)))
        return status;
    size_t second[4] = {P, P, 3, D};
    if ((status = bind(src, "v.patch_embd.weight.1", 4, second, 1, &v->patch_w2))) return status;
    if (xy) {
        v->side = table[1];
        return KVC_OK;
    }
    /* The table is a square grid of patches (clip.cpp takes its side as
     * sqrt of its rows). */
    size_t side = 1;
    while (side * side < table[1]) side++;
    if (side * side != table[1])
        return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "tensor v.position_embd.weight has %zu rows: not a square grid of patches", table[1]);
    v->side = side;
    return KVC_OK;
}

/* The projector's tensors, step by step, and the width of a token after each. */
static kvc_status bind_steps(vision_source *src, kvc_vision *v) {
    const kvc_vision_design *d = v->design;
    size_t width = v->dim;
    char name[96];
    for (size_t i = 0; i < d->steps; i++) {
        const kvc_vision_step *s = &d->step[i];
        v->step_width[i] = width;
        kvc_status status = KVC_OK;
        size_t rows = 0;
        switch (s->op) {
        case KVC_VISION_GROUP:
        case KVC_VISION_SHUFFLE:
            if (width * v->merge * v->merge > KVC_VISION_MAX_SIZE)
                return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "a token of %zu x %zu patches of %zu is too wide", v->merge, v->merge, width);
            width *= v->merge * v->merge;
            break;
        case KVC_VISION_POOL:
        case KVC_VISION_ACT:
        case KVC_VISION_SCALE:
            break;
        case KVC_VISION_LAYERNORM:
        case KVC_VISION_RMSNORM:
            if (!s->tensor) break; /* a norm without weight */
            snprintf(name, sizeof name, "%s.weight", s->tensor);
            status = bind_vector(src, name, width, s->op == KVC_VISION_LAYERNORM, &v->step_w[i]);
            snprintf(name, sizeof name, "%s.bias", s->tensor);
            if (status == KVC_OK && s->op == KVC_VISION_LAYERNORM) status = bind_vector(src, name, width, 1, &v->step_b[i]);
            break;
        case KVC_VISION_STANDARDIZE:
            snprintf(name, sizeof name, "%s_bias", s->tensor);
            status = bind_vector(src, name, width, 1, &v->step_b[i]);
            snprintf(name, sizeof name, "%s_scale", s->tensor);
            if (status == KVC_OK) status = bind_vector(src, name, width, 1, &v->step_w[i]);
            break;
        case KVC_VISION_LINEAR:
            snprintf(name, sizeof name, "%s.weight", s->tensor);
            status = bind_matrix(src, name, width, &rows, &v->step_w[i]);
            if (status == KVC_OK && d->clamps) status = bind_clamps(src, name, v->step_clamp[i]);
            snprintf(name, sizeof name, "%s.bias", s->tensor);
            if (status == KVC_OK) status = bind_vector(src, name, rows, 1, &v->step_b[i]);
            width = rows;
            break;
        case KVC_VISION_LINEAR_T: {
            size_t dims[2] = {0, width};
            snprintf(name, sizeof name, "%s.weight", s->tensor);
            status = bind(src, name, 2, dims, 0, &v->step_w[i]);
            width = dims[0];
            break;
        }
        }
        if (status != KVC_OK) return status;
    }
    v->step_width[d->steps] = width;
    if (v->deepstack_width && v->deepstack_layers > (KVC_VISION_MAX_SIZE - width) / v->deepstack_width)
        return kvc_refuse(&src->says, KVC_E_MODEL_FILE, "rows of %zu and %zu deepstack features of %zu are too wide", width, v->deepstack_layers, v->deepstack_width);
    v->out_dim = width + v->deepstack_layers * v->deepstack_width;
    return KVC_OK;
}

kvc_status kvc_vision_create(const kvc_gguf *gguf, kvc_vision **out, char *message, size_t message_len) {
    if (message && message_len) message[0] = '\0';
    if (!out) return KVC_E_NULL_POINTER;
    *out = NULL;
    if (!gguf) return KVC_E_NULL_POINTER;
    vision_source src = {.gguf = gguf, .says = {message, message_len}};
    kvc_vision *v = kvc_malloc(sizeof *v);
    if (!v) return KVC_E_NOMEM;
    memset(v, 0, sizeof *v);
    kvc_status status = read_design(&src, &v->design);
    if (status == KVC_OK) status = read_params(&src, v);
    /* attn_q, attn_k, attn_v, attn_out, ffn_up, ffn_down a block at least */
    if (status == KVC_OK) status = kvc_refuse_block_count(&src.says, gguf, "clip.vision.block_count", v->layers);
    if (status == KVC_OK) {
        const uint64_t data_bytes = kvc_gguf_data_bytes(gguf);
        v->weights_bytes = data_bytes > SIZE_MAX ? SIZE_MAX : (size_t)data_bytes;
        v->blocks = kvc_realloc_array(NULL, v->layers, sizeof *v->blocks);
        if (!v->blocks) status = KVC_E_NOMEM;
    }
    if (status == KVC_OK) status = bind_stem(&src, v);
    for (size_t l = 0; status == KVC_OK && l < v->layers; l++) status = bind_block(&src, v, l);
    if (status == KVC_OK) status = bind_steps(&src, v);
    /* What preprocessing reads of the file (image.c), checked as surely. */
    if (status == KVC_OK) status = kvc_image_params_read(gguf, &v->image, message, message_len);
    if (status == KVC_OK) *out = v;
    else kvc_vision_free(v);
    return status;
}

void kvc_vision_free(kvc_vision *vision) {
    if (!vision) return;
    kvc_vision_scratch_free(&vision->scratch);
    kvc_free(vision->blocks);
    kvc_free(vision->weights);
    kvc_free(vision);
}

/* A tensor's data, once the weights are there (its offset and bytes lie
 * within the file's data: the reader checked). */
static void place(kvc_tensor *t, uint8_t *weights) {
    t->data = t->type ? weights + (size_t)t->offset : NULL;
}

kvc_status kvc_vision_alloc_weights(kvc_vision *vision) {
    if (!vision) return KVC_E_NULL_POINTER;
    if (vision->weights) return KVC_OK;
    uint8_t *w = vision->weights_bytes < SIZE_MAX ? kvc_malloc(vision->weights_bytes ? vision->weights_bytes : 1) : NULL;
    if (!w) return KVC_E_NOMEM;
    vision->weights = w;
    kvc_tensor *stem[] = {&vision->patch_w, &vision->patch_w2, &vision->patch_b, &vision->position, &vision->pre_ln_w,
                          &vision->pre_ln_b, &vision->post_ln_w, &vision->post_ln_b};
    for (size_t i = 0; i < sizeof stem / sizeof stem[0]; i++) place(stem[i], w);
    for (size_t l = 0; l < vision->layers; l++) {
        kvc_vision_block *b = &vision->blocks[l];
        kvc_tensor *block[] = {&b->ln1_w, &b->ln1_b, &b->ln2_w, &b->ln2_b, &b->q_norm, &b->k_norm,
                               &b->attn_post_norm, &b->ffn_post_norm, &b->out_scale, &b->ds_norm_w, &b->ds_norm_b,
                               &b->ds_fc1, &b->ds_fc1_b, &b->ds_fc2, &b->ds_fc2_b};
        for (size_t i = 0; i < sizeof block / sizeof block[0]; i++) place(block[i], w);
        for (size_t i = 0; i < KVC_VISION_PRODUCTS; i++) {
            place(&b->w[i], w), place(&b->b[i], w);
            for (size_t j = 0; j < KVC_VISION_BOUNDS; j++) place(&b->clamp[i][j], w);
        }
    }
    for (size_t i = 0; i < vision->design->steps; i++) {
        place(&vision->step_w[i], w), place(&vision->step_b[i], w);
        for (size_t j = 0; j < KVC_VISION_BOUNDS; j++) place(&vision->step_clamp[i][j], w);
    }
    return KVC_OK;
}

uint8_t *kvc_vision_weights(kvc_vision *vision) { return vision ? vision->weights : NULL; }
size_t kvc_vision_weights_bytes(const kvc_vision *vision) { return vision ? vision->weights_bytes : 0; }
const char *kvc_vision_projector(const kvc_vision *vision) { return vision ? vision->design->name : NULL; }
size_t kvc_vision_output_dim(const kvc_vision *vision) { return vision ? vision->out_dim : 0; }
size_t kvc_vision_patch_size(const kvc_vision *vision) { return vision ? vision->patch_size : 0; }
size_t kvc_vision_merge(const kvc_vision *vision) { return vision ? vision->merge : 0; }
size_t kvc_vision_scratch_bytes(const kvc_vision *vision) {
    if (!vision) return 0;
    const kvc_vision_scratch *s = &vision->scratch;
    return 4 * s->arena_floats + s->codes_bytes + (s->gelu ? KVC_VISION_GELU_TABLES * sizeof *s->gelu : 0);
}

/* The largest grid an encode takes, in patches. */
#define KVC_VISION_MAX_PATCHES ((size_t)1 << 14)

size_t kvc_vision_grid_tokens(const kvc_vision *vision, size_t *gx, size_t *gy) {
    const size_t m = vision->merge;
    if (*gx == 0 || *gy == 0 || *gx > KVC_VISION_MAX_PATCHES / *gy) return 0;
    if (vision->design->positions == KVC_VISION_POS_TABLE && (*gx != vision->side || *gy != vision->side)) return 0;
    if (vision->design->positions == KVC_VISION_POS_XY && (*gx > vision->side || *gy > vision->side)) return 0;
    for (size_t i = 0; i < vision->design->steps; i++) {
        const kvc_vision_op op = vision->design->step[i].op;
        if (op == KVC_VISION_GROUP && (*gx % m || *gy % m)) return 0; /* whole blocks only */
        if (op == KVC_VISION_SHUFFLE || op == KVC_VISION_GROUP) *gx = (*gx + m - 1) / m, *gy = (*gy + m - 1) / m;
        if (op == KVC_VISION_POOL) *gx /= m, *gy /= m;
    }
    return *gx * *gy;
}

size_t kvc_vision_tokens(const kvc_vision *vision, size_t width, size_t height) {
    if (!vision || width % vision->patch_size || height % vision->patch_size) return 0;
    size_t gx = width / vision->patch_size, gy = height / vision->patch_size;
    return kvc_vision_grid_tokens(vision, &gx, &gy);
}
