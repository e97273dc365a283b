/* gguf_builder.c -- GGUF files for the tests and the fuzz seeds. */
#include "gguf_builder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gb_bytes(gb_file *b, const void *src, size_t n) {
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2;
        b->bytes = realloc(b->bytes, b->cap);
        if (!b->bytes) {
            printf("test harness: out of memory\n");
            exit(3);
        }
    }
    if (n) memcpy(b->bytes + b->len, src, n);
    b->len += n;
}

void gb_le(gb_file *b, uint64_t x, int bytes) {
    for (int i = 0; i < bytes; i++) {
        const uint8_t byte = (uint8_t)(x >> (8 * i));
        gb_bytes(b, &byte, 1);
    }
}

void gb_u32(gb_file *b, uint32_t x) {
    gb_le(b, x, 4);
}

void gb_u64(gb_file *b, uint64_t x) {
    gb_le(b, x, 8);
}

/* A count or string length: u32 in version 1, u64 after. */
void gb_count(gb_file *b, uint64_t x) {
    gb_le(b, x, b->version == 1 ? 4 : 8);
}

void gb_string(gb_file *b, const char *s) {
    gb_count(b, strlen(s));
    gb_bytes(b, s, strlen(s));
}

void gb_key(gb_file *b, const char *key, uint32_t type) {
    gb_string(b, key);
    gb_u32(b, type);
}

void gb_f32(gb_file *b, float f) {
    uint32_t bits;
    memcpy(&bits, &f, 4);
    gb_u32(b, bits);
}

void gb_f64(gb_file *b, double f) {
    uint64_t bits;
    memcpy(&bits, &f, 8);
    gb_u64(b, bits);
}

void gb_array(gb_file *b, uint32_t item_type, uint64_t count) {
    gb_u32(b, item_type);
    gb_count(b, count);
}

uint64_t gb_align_up(uint64_t x, uint64_t a) {
    return (x + a - 1) / a * a;
}

gb_file gb_build(uint32_t version, gb_metadata_fn *metadata, const gb_tensor *tensors,
                 size_t tensor_count, uint64_t alignment, size_t *header_bytes) {
    gb_file b = {NULL, 0, 0, version};
    gb_bytes(&b, "GGUF", 4);
    gb_u32(&b, version);
    gb_count(&b, tensor_count);
    const size_t count_at = b.len;
    gb_count(&b, 0);
    size_t entries = metadata ? metadata(&b) : 0;
    if (alignment != KVC_GGUF_DEFAULT_ALIGNMENT) {
        gb_key(&b, "general.alignment", KVC_GGUF_UINT32);
        gb_u32(&b, (uint32_t)alignment);
        entries++;
    }
    for (int i = 0; i < (version == 1 ? 4 : 8); i++) b.bytes[count_at + i] = (uint8_t)((uint64_t)entries >> (8 * i));
    uint64_t next = 0, end = 0;
    for (size_t t = 0; t < tensor_count; t++) {
        const gb_tensor *s = &tensors[t];
        gb_string(&b, s->name);
        gb_u32(&b, s->n_dims);
        for (uint32_t d = 0; d < s->n_dims; d++) gb_count(&b, s->dims[d]);
        gb_u32(&b, s->type);
        const uint64_t offset = s->offset == GB_AUTO ? next : s->offset;
        gb_u64(&b, offset);
        next = gb_align_up(offset + s->bytes, alignment);
        if (offset + s->bytes > end) end = offset + s->bytes;
    }
    *header_bytes = b.len;
    const size_t data_at = (size_t)gb_align_up(b.len, alignment);
    while (b.len < data_at) gb_le(&b, 0, 1);
    /* The data (a file of far-off tensors gets none: the reader never reads it). */
    if (end <= 1u << 20) {
        for (uint64_t i = 0; i < gb_align_up(end, alignment); i++) gb_le(&b, i * 7 + 1, 1);
    }
    return b;
}

/* ---- the fixture ---- */

float gb_score(size_t i) {
    return (float)i * -0.25f + 0.5f;
}

size_t gb_every_type(gb_file *b) {
    gb_key(b, "general.architecture", KVC_GGUF_STRING), gb_string(b, "llama");
    gb_key(b, "t.u8", KVC_GGUF_UINT8), gb_le(b, 200, 1);
    gb_key(b, "t.i8", KVC_GGUF_INT8), gb_le(b, (uint8_t)-100, 1);
    gb_key(b, "t.u16", KVC_GGUF_UINT16), gb_le(b, 60000, 2);
    gb_key(b, "t.i16", KVC_GGUF_INT16), gb_le(b, (uint16_t)-30000, 2);
    gb_key(b, "t.u32", KVC_GGUF_UINT32), gb_u32(b, 4000000000u);
    gb_key(b, "t.i32", KVC_GGUF_INT32), gb_u32(b, (uint32_t)-2000000000);
    gb_key(b, "t.f32", KVC_GGUF_FLOAT32), gb_f32(b, 1.5f);
    gb_key(b, "t.bool", KVC_GGUF_BOOL), gb_le(b, 1, 1);
    gb_key(b, "t.bool2", KVC_GGUF_BOOL), gb_le(b, 2, 1); /* any nonzero byte is true */
    gb_key(b, "t.str", KVC_GGUF_STRING), gb_string(b, "h\xc3\xa9llo");
    gb_key(b, "t.u64", KVC_GGUF_UINT64), gb_u64(b, GB_U64_BIG);
    gb_key(b, "t.i64", KVC_GGUF_INT64), gb_u64(b, (uint64_t)GB_I64_BIG);
    gb_key(b, "t.i64min", KVC_GGUF_INT64), gb_u64(b, (uint64_t)INT64_MIN);
    gb_key(b, "t.f64", KVC_GGUF_FLOAT64), gb_f64(b, 3.25);
    gb_key(b, "a.u8", KVC_GGUF_ARRAY), gb_array(b, KVC_GGUF_UINT8, 3);
    gb_le(b, 1, 1), gb_le(b, 2, 1), gb_le(b, 255, 1);
    gb_key(b, "a.scores", KVC_GGUF_ARRAY), gb_array(b, KVC_GGUF_FLOAT32, GB_SCORES);
    for (size_t i = 0; i < GB_SCORES; i++) gb_f32(b, gb_score(i));
    gb_key(b, "a.str", KVC_GGUF_ARRAY), gb_array(b, KVC_GGUF_STRING, 3);
    gb_string(b, ""), gb_string(b, "a"), gb_string(b, "<0x0A>");
    gb_key(b, "a.empty", KVC_GGUF_ARRAY), gb_array(b, KVC_GGUF_UINT32, 0);
    gb_key(b, "a.i64", KVC_GGUF_ARRAY), gb_array(b, KVC_GGUF_INT64, 2);
    gb_u64(b, (uint64_t)-1), gb_u64(b, (uint64_t)INT64_MAX);
    /* [[1, 2], [-3]] of i16, and [[["x"]]] */
    gb_key(b, "a.nested", KVC_GGUF_ARRAY), gb_array(b, KVC_GGUF_ARRAY, 2);
    gb_array(b, KVC_GGUF_INT16, 2), gb_le(b, 1, 2), gb_le(b, 2, 2);
    gb_array(b, KVC_GGUF_INT16, 1), gb_le(b, (uint16_t)-3, 2);
    gb_key(b, "a.deep", KVC_GGUF_ARRAY), gb_array(b, KVC_GGUF_ARRAY, 1);
    gb_array(b, KVC_GGUF_ARRAY, 1), gb_array(b, KVC_GGUF_STRING, 1), gb_string(b, "x");
    return GB_FIXTURE_ENTRIES;
}

const gb_tensor gb_fixture_tensors[GB_FIXTURE_TENSORS] = {
    {"token_embd.weight", 0, 2, {8, 3}, GB_AUTO, 96},
    {"blk.0.q8", 8, 2, {64, 2}, GB_AUTO, 136},
    {"blk.0.q4k", 12, 1, {256}, GB_AUTO, 144},
    {"blk.0.f16", 1, 1, {5}, GB_AUTO, 10},
    {"blk.0.iq2", 16, 3, {256, 2, 3}, GB_AUTO, 0},
    {"blk.0.removed", 4, 4, {32, 1, 1, 2}, GB_AUTO, 0},
};
gb_file gb_fixture(uint32_t version, uint64_t alignment, size_t *header_bytes) {
    return gb_build(version, gb_every_type, gb_fixture_tensors, GB_FIXTURE_TENSORS, alignment, header_bytes);
}


/* ---- a small llama model ---- */

/* The spec gb_llama_build writes (gb_metadata_fn takes no context). */
static const gb_llama_spec *llama_spec;

static size_t llama_metadata(gb_file *b) {
    char key[96];
    size_t n = 0;
    gb_key(b, "general.architecture", KVC_GGUF_STRING);
    gb_string(b, llama_spec->arch);
    n++;
    const struct { const char *name; uint32_t value; } sizes[] = {
        {"block_count", llama_spec->block_count ? llama_spec->block_count : GB_LAYERS}, {"embedding_length", GB_DIM}, {"feed_forward_length", GB_FFN},
        {"attention.head_count", llama_spec->head_count ? llama_spec->head_count : GB_HEADS},
        {"attention.head_count_kv", GB_KV_HEADS}, {"context_length", GB_CONTEXT},
        {"attention.key_length", llama_spec->key_length},
    };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        if (llama_spec->omit_head_count && strcmp(sizes[i].name, "attention.head_count") == 0) continue;
        if (sizes[i].value == 0) continue; /* a key_length not asked for */
        snprintf(key, sizeof key, "%s.%s", llama_spec->arch, sizes[i].name);
        gb_key(b, key, KVC_GGUF_UINT32);
        gb_u32(b, sizes[i].value);
        n++;
    }
    static const char *const poolings[] = {"none", "mean", "cls", "last", "rank"};
    for (uint32_t p = 0; llama_spec->pooling && p < 5; p++) {
        if (strcmp(llama_spec->pooling, poolings[p]) != 0) continue;
        snprintf(key, sizeof key, "%s.pooling_type", llama_spec->arch);
        gb_key(b, key, KVC_GGUF_UINT32);
        gb_u32(b, p);
        n++;
    }
    if (llama_spec->bidirectional) {
        snprintf(key, sizeof key, "%s.attention.causal", llama_spec->arch);
        gb_key(b, key, KVC_GGUF_BOOL);
        gb_le(b, 0, 1);
        n++;
    }
    snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", llama_spec->arch);
    gb_key(b, key, KVC_GGUF_FLOAT32);
    gb_f32(b, 1e-5f);
    return n + 1;
}

static void add_tensor(gb_llama *m, const char *name, uint32_t type, uint64_t cols, uint64_t rows) {
    gb_tensor *t = &m->t[m->count++];
    memset(t, 0, sizeof *t);
    t->name = name;
    t->type = rows ? type : 0;
    t->n_dims = rows ? 2 : 1;
    t->dims[0] = cols;
    t->dims[1] = rows;
    t->offset = GB_AUTO;
    const uint64_t values = cols * (rows ? rows : 1);
    t->bytes = t->type == 0 ? 4 * values : values / 32 * 34; /* F32 or Q8_0 */
}

void gb_llama_tensors(gb_llama *m, uint32_t matrix_type, int tied) {
    static const struct { const char *name; int cols, rows; } block[] = {
        {"attn_norm.weight", GB_DIM, 0}, {"attn_q.weight", GB_DIM, GB_HEADS * GB_HEAD_DIM},
        {"attn_k.weight", GB_DIM, GB_KV_HEADS * GB_HEAD_DIM}, {"attn_v.weight", GB_DIM, GB_KV_HEADS * GB_HEAD_DIM},
        {"attn_output.weight", GB_HEADS * GB_HEAD_DIM, GB_DIM}, {"ffn_norm.weight", GB_DIM, 0},
        {"ffn_gate.weight", GB_DIM, GB_FFN}, {"ffn_up.weight", GB_DIM, GB_FFN}, {"ffn_down.weight", GB_FFN, GB_DIM},
    };
    m->count = 0;
    add_tensor(m, "token_embd.weight", matrix_type, GB_DIM, GB_VOCAB);
    add_tensor(m, "output_norm.weight", matrix_type, GB_DIM, 0);
    for (size_t l = 0; l < GB_LAYERS; l++) {
        for (size_t i = 0; i < 9; i++) {
            char *name = m->names[l * 9 + i];
            snprintf(name, sizeof m->names[0], "blk.%zu.%s", l, block[i].name);
            add_tensor(m, name, matrix_type, (uint64_t)block[i].cols, (uint64_t)block[i].rows);
        }
    }
    if (!tied) add_tensor(m, "output.weight", matrix_type, GB_DIM, GB_VOCAB);
}

void gb_llama_rank_head(gb_llama *m) {
    add_tensor(m, "cls.output.weight", 0, GB_DIM, 1);
}

gb_file gb_llama_build(const gb_llama_spec *spec, const gb_llama *m) {
    llama_spec = spec;
    size_t header;
    return gb_build(3, llama_metadata, m->t, m->count, KVC_GGUF_DEFAULT_ALIGNMENT, &header);
}

/* ---- a small projector ---- */

gb_projector gb_projector_spec(const char *projector, uint32_t matrix_type) {
    gb_projector p = {.arch = "clip", .projector = projector, .dim = 64, .ffn = 128, .layers = 2, .heads = 4,
                      .patch = 4, .merge = 2, .out = 80, .matrix_type = matrix_type, .patch_type = GB_F16};
    if (strcmp(projector, "lfm2") == 0) {
        /* A 4 x 4 table, resized to any tile's grid. */
        p.image_size = 16, p.side = 4, p.hidden = 96, p.out = 48, p.patch_type = GB_F32;
    } else if (strcmp(projector, "qwen3vl_merger") == 0) {
        /* A 4 x 4 table resized; three blocks, the first and the last with deepstack. */
        p.image_size = 16, p.side = 4, p.hidden = 96, p.out = 48, p.layers = 3;
    } else if (strcmp(projector, "gemma4v") == 0) {
        /* Column and row tables of 10: grids up to 10 x 10, pooled 3 x 3. */
        p.image_size = 40, p.side = 10, p.merge = 3;
    } else {
        p.image_size = 32, p.side = 8;
        if (strcmp(projector, "gemma3") == 0) p.merge = 4;
    }
    return p;
}

/* The spec gb_projector_build writes. */
static const gb_projector *projector_spec;

static size_t projector_metadata(gb_file *b) {
    const gb_projector *s = projector_spec;
    size_t n = 0;
    gb_key(b, "general.architecture", KVC_GGUF_STRING), gb_string(b, s->arch), n++;
    gb_key(b, "clip.has_vision_encoder", KVC_GGUF_BOOL), gb_le(b, 1, 1), n++;
    gb_key(b, "clip.use_gelu", KVC_GGUF_BOOL), gb_le(b, 1, 1), n++;
    gb_key(b, "clip.projector_type", KVC_GGUF_STRING), gb_string(b, s->projector), n++;
    const struct { const char *key; uint32_t value; } sizes[] = {
        {"clip.vision.embedding_length", s->dim}, {"clip.vision.feed_forward_length", s->ffn},
        {"clip.vision.block_count", s->block_count ? s->block_count : s->layers},
        {"clip.vision.attention.head_count", s->heads}, {"clip.vision.image_size", s->image_size},
        {"clip.vision.patch_size", s->patch}, {"clip.vision.projection_dim", s->out},
        {strcmp(s->projector, "qwen3vl_merger") == 0 ? "clip.vision.spatial_merge_size" : "clip.vision.projector.scale_factor",
         s->omit_merge ? 0 : s->merge},
    };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        if (!sizes[i].value) continue;
        gb_key(b, sizes[i].key, KVC_GGUF_UINT32), gb_u32(b, sizes[i].value), n++;
    }
    gb_key(b, "clip.vision.attention.layer_norm_epsilon", KVC_GGUF_FLOAT32), gb_f32(b, 1e-6f), n++;
    /* preprocessing's (llama.cpp refuses a projector without them) */
    const char *normalisation[] = {"clip.vision.image_mean", "clip.vision.image_std"};
    for (size_t i = 0; i < 2; i++) {
        gb_key(b, normalisation[i], KVC_GGUF_ARRAY), gb_array(b, KVC_GGUF_FLOAT32, 3), n++;
        for (size_t c = 0; c < 3; c++) gb_f32(b, 0.5f);
    }
    return n;
}

typedef struct projector_tensors {
    gb_tensor t[128];
    char names[128][160];
    size_t count;
} projector_tensors;

static void projector_tensor(projector_tensors *l, const gb_projector *s, const char *name, uint32_t type, uint32_t n_dims,
                             uint64_t d0, uint64_t d1, uint64_t d2, uint64_t d3) {
    if (s->drop && strcmp(s->drop, name) == 0) return;
    gb_tensor *t = &l->t[l->count];
    memset(t, 0, sizeof *t);
    snprintf(l->names[l->count], sizeof l->names[0], "%s", name);
    t->name = l->names[l->count++];
    t->type = type;
    t->n_dims = n_dims;
    const uint64_t dims[4] = {d0, d1, d2, d3};
    uint64_t values = 1;
    for (uint32_t i = 0; i < n_dims; i++) t->dims[i] = dims[i], values *= dims[i];
    if (s->narrow && strcmp(s->narrow, name) == 0) values -= values / t->dims[n_dims - 1], t->dims[n_dims - 1]--;
    t->offset = GB_AUTO;
    t->bytes = type == GB_F32 ? 4 * values : type == GB_F16 ? 2 * values : values / 32 * 34;
}

static void projector_vector(projector_tensors *l, const gb_projector *s, const char *name, uint64_t n) {
    projector_tensor(l, s, name, GB_F32, 1, n, 0, 0, 0);
}

static void projector_matrix(projector_tensors *l, const gb_projector *s, const char *name, uint64_t cols, uint64_t rows) {
    projector_tensor(l, s, name, s->matrix_type, 2, cols, rows, 0, 0);
}

/* A part of a block: its weight (rows 0: a vector of cols) and a bias of
 * `bias` values (0: none). */
typedef struct projector_part {
    const char *part;
    uint64_t cols, rows, bias;
} projector_part;

/* <prefix>.<part>.weight and .bias of each of `count` parts. */
static void projector_parts(projector_tensors *l, const gb_projector *s, const char *prefix, const projector_part *parts,
                            size_t count) {
    char name[160];
    for (size_t i = 0; i < count; i++) {
        snprintf(name, sizeof name, "%s.%s.weight", prefix, parts[i].part);
        if (parts[i].rows) projector_matrix(l, s, name, parts[i].cols, parts[i].rows);
        else projector_vector(l, s, name, parts[i].cols);
        snprintf(name, sizeof name, "%s.%s.bias", prefix, parts[i].part);
        if (parts[i].bias) projector_vector(l, s, name, parts[i].bias);
    }
}

/* Gemma 4's vision tower: RMSNorm blocks without biases, q and k norms of a
 * head, post norms, a gated FFN, clamps on some products. */
static void gemma4v_tensors(projector_tensors *l, const gb_projector *s) {
    const uint64_t D = s->dim, F = s->ffn, hd = s->dim / s->heads;
    char name[64];
    projector_tensor(l, s, "v.patch_embd.weight", s->patch_type, 4, s->patch, s->patch, 3, D);
    projector_tensor(l, s, "v.position_embd.weight", GB_F32, 3, D, s->side, 2, 0);
    for (uint32_t b = 0; b < s->layers; b++) {
        const projector_part parts[] = {
            {"ln1", D, 0, 0}, {"attn_q", D, D, 0}, {"attn_k", D, D, 0}, {"attn_v", D, D, 0}, {"attn_out", D, D, 0},
            {"attn_q_norm", hd, 0, 0}, {"attn_k_norm", hd, 0, 0}, {"attn_post_norm", D, 0, 0}, {"ln2", D, 0, 0},
            {"ffn_gate", D, F, 0}, {"ffn_up", D, F, 0}, {"ffn_down", F, D, 0}, {"ffn_post_norm", D, 0, 0},
        };
        snprintf(name, sizeof name, "v.blk.%u", b);
        projector_parts(l, s, name, parts, sizeof parts / sizeof parts[0]);
        snprintf(name, sizeof name, "v.blk.%u.out_scale.weight", b);
        if (s->out_scale) projector_vector(l, s, name, s->out_scale);
        const char *bounds[] = {"attn_q.input_min", "attn_q.input_max", "ffn_gate.input_max", "ffn_down.output_min",
                                "ffn_down.output_max"};
        for (size_t i = 0; i < sizeof bounds / sizeof bounds[0]; i++) {
            snprintf(name, sizeof name, "v.blk.%u.%s", b, bounds[i]);
            projector_vector(l, s, name, 1);
        }
    }
    projector_vector(l, s, "v.std_bias", D);
    projector_vector(l, s, "v.std_scale", D);
    projector_matrix(l, s, "mm.input_projection.weight", D, s->out);
    projector_vector(l, s, "mm.input_projection.input_min", 1);
    projector_vector(l, s, "mm.input_projection.output_max", 1);
}

/* Qwen3-VL's tower: two patch kernels, LayerNorm blocks with a fused qkv,
 * deepstack after the first and the last block, the merger's MLP. */
static void qwen3vl_tensors(projector_tensors *l, const gb_projector *s) {
    const uint64_t D = s->dim, F = s->ffn, in = 4 * s->dim;
    char name[64];
    projector_tensor(l, s, "v.patch_embd.weight", s->patch_type, 4, s->patch, s->patch, 3, D);
    projector_tensor(l, s, "v.patch_embd.weight.1", s->patch_type, 4, s->patch, s->patch, 3, D);
    projector_vector(l, s, "v.patch_embd.bias", D);
    projector_tensor(l, s, "v.position_embd.weight", GB_F32, 2, D, (uint64_t)s->side * s->side, 0, 0);
    for (uint32_t b = 0; b < s->layers; b++) {
        const projector_part parts[] = {
            {"ln1", D, 0, D}, {"attn_qkv", D, 3 * D, 3 * D}, {"attn_out", D, D, D}, {"ln2", D, 0, D},
            {"ffn_up", D, F, F}, {"ffn_down", F, D, D},
        };
        snprintf(name, sizeof name, "v.blk.%u", b);
        projector_parts(l, s, name, parts, sizeof parts / sizeof parts[0]);
        if (b != 0 && b + 1 != s->layers) continue;
        const projector_part deep[] = {{"norm", in, 0, in}, {"fc1", in, s->hidden, s->hidden}, {"fc2", s->hidden, s->out, s->out}};
        snprintf(name, sizeof name, "v.deepstack.%u", b);
        projector_parts(l, s, name, deep, sizeof deep / sizeof deep[0]);
    }
    projector_vector(l, s, "v.post_ln.weight", D);
    projector_vector(l, s, "v.post_ln.bias", D);
    projector_matrix(l, s, "mm.0.weight", in, s->hidden);
    projector_vector(l, s, "mm.0.bias", s->hidden);
    projector_matrix(l, s, "mm.2.weight", s->hidden, s->out);
    projector_vector(l, s, "mm.2.bias", s->out);
}

/* SigLIP's tower (LayerNorm blocks with biases) and the projector of
 * idefics3, lfm2 or gemma3. */
static void siglip_tensors(projector_tensors *l, const gb_projector *s) {
    const uint64_t D = s->dim, F = s->ffn, m = s->merge;
    char name[48];
    projector_tensor(l, s, "v.patch_embd.weight", s->patch_type, 4, s->patch, s->patch, 3, D);
    projector_vector(l, s, "v.patch_embd.bias", D);
    projector_tensor(l, s, "v.position_embd.weight", GB_F32, 2, D, (uint64_t)s->side * s->side, 0, 0);
    for (uint32_t b = 0; b < s->layers; b++) {
        const char *up = s->swapped_ffn ? "ffn_down" : "ffn_up", *down = s->swapped_ffn ? "ffn_up" : "ffn_down";
        const projector_part parts[] = {
            {"ln1", D, 0, D}, {"attn_q", D, D, D}, {"attn_k", D, D, D}, {"attn_v", D, D, D}, {"attn_out", D, D, D},
            {"ln2", D, 0, D}, {up, D, F, F}, {down, F, D, D},
        };
        snprintf(name, sizeof name, "v.blk.%u", b);
        projector_parts(l, s, name, parts, sizeof parts / sizeof parts[0]);
    }
    projector_vector(l, s, "v.post_ln.weight", D);
    projector_vector(l, s, "v.post_ln.bias", D);
    if (strcmp(s->projector, "lfm2") == 0) {
        projector_vector(l, s, "mm.input_norm.weight", D * m * m);
        projector_vector(l, s, "mm.input_norm.bias", D * m * m);
        projector_matrix(l, s, "mm.1.weight", D * m * m, s->hidden);
        projector_vector(l, s, "mm.1.bias", s->hidden);
        projector_matrix(l, s, "mm.2.weight", s->hidden, s->out);
        projector_vector(l, s, "mm.2.bias", s->out);
    } else if (strcmp(s->projector, "gemma3") == 0) {
        projector_vector(l, s, "mm.soft_emb_norm.weight", D);
        projector_tensor(l, s, "mm.input_projection.weight", s->patch_type, 2, s->out, D, 0, 0); /* stored [out, in] */
    } else {
        projector_matrix(l, s, "mm.model.fc.weight", D * m * m, s->out);
    }
}

gb_file gb_projector_build(const gb_projector *s) {
    static projector_tensors l;
    l.count = 0;
    if (strcmp(s->projector, "gemma4v") == 0) gemma4v_tensors(&l, s);
    else if (strcmp(s->projector, "qwen3vl_merger") == 0) qwen3vl_tensors(&l, s);
    else siglip_tensors(&l, s);
    projector_spec = s;
    size_t header;
    return gb_build(3, projector_metadata, l.t, l.count, KVC_GGUF_DEFAULT_ALIGNMENT, &header);
}
