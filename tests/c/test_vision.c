/*
 * test_vision.c -- the image encoders: projector files written here
 * (gguf_builder.c) at small geometries, their weights random, encoded by
 * kvc_vision_encode and by a reference written here apart from it -- plain
 * loops over the weights dequantized to f32, in double where llama.cpp's
 * graph leaves the order open, following that graph operation by operation
 * (clip.cpp's build_inp, build_vit, build_attn, build_patch_merge_permute as
 * its reshapes and permutes index memory; siglip.cpp's projectors): the
 * same rows within a tight tolerance, for F32, F16 and Q8_0 matrices; the
 * same bits on 1 and 3 threads; and files an encoder cannot read refused
 * with a status and a sentence, nothing left allocated.
 *
 * Where llama.cpp rounds, the reference rounds alike: GELU through ggml's
 * f16 table, and the activations of a Q8_0 product to ggml's q8_0 blocks
 * (the runner's F16 and F32 products keep f32 activations, as the runner
 * documents).  What llama.cpp itself gives is the JS tests' business
 * (tests/runtimes: the oracle).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "gguf_builder.h"
#include "model/vision.h"
#include "test.h"

#define GGML_F32 GB_F32
#define GGML_F16 GB_F16
#define GGML_Q8_0 GB_Q8_0

/* ---- a projector file (gguf_builder.h) ---- */

typedef gb_projector spec;

static spec idefics3_spec(uint32_t type) { return gb_projector_spec("idefics3", type); }
static spec lfm2_spec(uint32_t type) { return gb_projector_spec("lfm2", type); }
static spec gemma4v_spec(uint32_t type) { return gb_projector_spec("gemma4v", type); }
static spec qwen3vl_spec(uint32_t type) { return gb_projector_spec("qwen3vl_merger", type); }
static spec gemma3_spec(uint32_t type) {
    spec s = gb_projector_spec("gemma3", type);
    s.swapped_ffn = 1; /* an older converter's names */
    return s;
}

static gb_file build_file(const spec *s) { return gb_projector_build(s); }

/* ---- random weights of sane scale ---- */

/* Norm weights near 1, biases and positions small, matrices ~N(0, 1/sqrt(fan-in)). */
static void fill_tensor(uint8_t *weights, const kvc_gguf *g, size_t t, test_rng *rng) {
    const char *name;
    size_t name_len, n_dims;
    uint32_t type;
    uint64_t dims[KVC_GGUF_MAX_DIMS], offset;
    kvc_gguf_tensor(g, t, &name, &name_len, &type, &n_dims, dims, &offset, NULL);
    uint8_t *at = weights + offset;
    uint64_t values = 1, fan_in = 1;
    for (size_t i = 0; i < n_dims; i++) values *= dims[i];
    for (size_t i = 0; i + 1 < n_dims; i++) fan_in *= dims[i];
    int norm = n_dims == 1 && name_len > 7 && memcmp(name + name_len - 7, ".weight", 7) == 0;
    if (name_len > 26 && memcmp(name, "mm.input_projection.weight", 26) == 0) fan_in = dims[1];
    const float scale = n_dims == 1 ? 0.1f : 1.0f / sqrtf((float)fan_in);
    /* Gemma 4's clamps: bounds that bite (its activations are about 1). */
    const struct { const char *suffix; float value; } bounds[] = {
        {"input_min", -0.8f}, {"input_max", 0.8f}, {"output_min", -0.3f}, {"output_max", 0.3f}};
    for (size_t i = 0; i < 4; i++) {
        const size_t n = strlen(bounds[i].suffix);
        if (name_len > n && memcmp(name + name_len - n, bounds[i].suffix, n) == 0) {
            memcpy(at, &bounds[i].value, 4);
            return;
        }
    }
    if (type == GGML_Q8_0) {
        for (uint64_t b = 0; b < values / 32; b++, at += 34) {
            const uint16_t d = test_f16_bits(1.7f * scale / 127.0f);
            memcpy(at, &d, 2);
            for (size_t j = 0; j < 32; j++) at[2 + j] = (uint8_t)(int8_t)((int)(test_rng_u32(rng) % 255) - 127);
        }
        return;
    }
    for (uint64_t i = 0; i < values; i++) {
        float x = (norm ? 1.0f : 0.0f) + scale * test_rng_normal(rng);
        if (type == GGML_F32) memcpy(at + 4 * i, &x, 4);
        else {
            const uint16_t h = test_f16_bits(x);
            memcpy(at + 2 * i, &h, 2);
        }
    }
}

typedef struct test_encoder {
    kvc_vision *vision;
    kvc_gguf *gguf;
    gb_file file;
} test_encoder;

static kvc_status make_encoder(const spec *s, uint64_t seed, test_encoder *out, char *message, size_t message_len) {
    out->file = build_file(s);
    out->vision = NULL;
    out->gguf = NULL;
    kvc_status status = kvc_gguf_parse(out->file.bytes, out->file.len, &out->gguf, NULL);
    if (status != KVC_OK) return status;
    status = kvc_vision_create(out->gguf, &out->vision, message, message_len);
    if (status == KVC_OK && kvc_vision_weights(out->vision) != NULL) status = KVC_E_LENGTH; /* not allocated yet */
    if (status == KVC_OK) status = kvc_vision_alloc_weights(out->vision);
    if (status == KVC_OK) {
        test_rng rng = test_rng_new(seed);
        for (size_t t = 0; t < kvc_gguf_tensor_count(out->gguf); t++) fill_tensor(kvc_vision_weights(out->vision), out->gguf, t, &rng);
    }
    return status;
}

static void free_encoder(test_encoder *e) {
    kvc_vision_free(e->vision);
    kvc_gguf_free(e->gguf);
    free(e->file.bytes);
}

/* A normalised tile: values in about [-1, 1]. */
static float *tile(size_t width, size_t height, uint64_t seed) {
    test_rng rng = test_rng_new(seed);
    float *p = test_alloc(width * height * 3 * sizeof(float));
    for (size_t i = 0; i < width * height * 3; i++) p[i] = 2.0f * test_rng_unit(&rng) - 1.0f;
    return p;
}

/* ---- the reference ---- */

typedef struct reference {
    const test_encoder *e;
    const spec *s;
} reference;

/* Tensor `name` as f32 (malloc'd), or NULL when the file lacks it; *type its type. */
static float *weights_of(const reference *r, const char *name, uint32_t *type) {
    const size_t t = kvc_gguf_find_tensor(r->e->gguf, name, strlen(name));
    if (t == KVC_GGUF_NONE) return NULL;
    size_t n_dims;
    uint64_t dims[KVC_GGUF_MAX_DIMS], offset, values = 1;
    uint32_t id;
    kvc_gguf_tensor(r->e->gguf, t, NULL, NULL, &id, &n_dims, dims, &offset, NULL);
    for (size_t i = 0; i < n_dims; i++) values *= dims[i];
    float *f = test_alloc((size_t)values * sizeof(float));
    kvc_weight_dequantize(id, kvc_vision_weights(r->e->vision) + offset, 0, (size_t)values, f);
    if (type) *type = id;
    return f;
}

/* f32 to the nearest f16 and back (ties to even; normal and subnormal halves). */
static float f16_round(float x) {
    if (fabsf(x) < 6.103515625e-05f) return rintf(x * 16777216.0f) / 16777216.0f;
    int e;
    const float m = frexpf(x, &e);
    return ldexpf(rintf(ldexpf(m, 11)), e - 11);
}

/* ggml's q8_0 activation blocks: d = amax / 127, codes round(x / d), the
 * value code * f16(d). */
static void q8_round(size_t n, const float *x, float *out) {
    for (size_t b = 0; b < n; b += 32) {
        float amax = 0.0f;
        for (size_t j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[b + j]));
        const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        for (size_t j = 0; j < 32; j++) out[b + j] = roundf(x[b + j] * id) * f16_round(d);
    }
}

/* The bound `<stem>.<which>` of a product's clamps, or `none`. */
static float clamp_bound(const reference *r, const char *weight, const char *which, float none) {
    char name[96];
    snprintf(name, sizeof name, "%.*s%s", (int)(strlen(weight) - strlen("weight")), weight, which);
    float *value = weights_of(r, name, NULL);
    const float bound = value ? value[0] : none;
    free(value);
    return bound;
}

/* y [T x rows] = x [T x cols] times the rows of `name` (+ `bias` where it
 * is), Gemma4ClippableLinear's clamps of its input and output where the
 * file has them. */
static void linear(const reference *r, const char *name, const char *bias, size_t T, size_t cols, size_t rows, const float *x,
                   float *y) {
    uint32_t type;
    float *w = weights_of(r, name, &type);
    float *b = bias ? weights_of(r, bias, NULL) : NULL;
    float *xq = test_alloc(cols * sizeof(float));
    const float in_min = clamp_bound(r, name, "input_min", -INFINITY), in_max = clamp_bound(r, name, "input_max", INFINITY);
    const float out_min = clamp_bound(r, name, "output_min", -INFINITY), out_max = clamp_bound(r, name, "output_max", INFINITY);
    for (size_t t = 0; t < T; t++) {
        for (size_t i = 0; i < cols; i++) xq[i] = fminf(fmaxf(x[t * cols + i], in_min), in_max);
        if (type == GGML_Q8_0) q8_round(cols, xq, xq);
        if (type == GGML_F16) /* ggml reads an F16 weight's activations in f16 */
            for (size_t i = 0; i < cols; i++) xq[i] = f16_round(xq[i]);
        for (size_t o = 0; o < rows; o++) {
            double sum = 0.0;
            for (size_t i = 0; i < cols; i++) sum += (double)w[o * cols + i] * xq[i];
            y[t * rows + o] = fminf(fmaxf((float)sum, out_min), out_max) + (b ? b[o] : 0.0f);
        }
    }
    free(w), free(b), free(xq);
}

static void layer_norm(const reference *r, const char *w_name, const char *b_name, float eps, size_t T, size_t n, float *x) {
    float *w = weights_of(r, w_name, NULL), *b = weights_of(r, b_name, NULL);
    for (size_t t = 0; t < T; t++) {
        float *row = x + t * n;
        double mean = 0.0, var = 0.0;
        for (size_t i = 0; i < n; i++) mean += row[i];
        mean /= (double)n;
        for (size_t i = 0; i < n; i++) var += (row[i] - mean) * (row[i] - mean);
        var /= (double)n;
        for (size_t i = 0; i < n; i++) row[i] = (float)((row[i] - mean) / sqrt(var + eps)) * w[i] + b[i];
    }
    free(w), free(b);
}

/* ggml_gelu on the CPU: its f16 table. */
static float gelu_table(float x) {
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    const float h = f16_round(x);
    return f16_round(0.5f * h * (1.0f + tanhf(0.7978845608f * h * (1.0f + 0.044715f * h * h))));
}

/* RMSNorm of each of T rows of n, times w (NULL: none), in double. */
static void rms_rows(size_t T, size_t n, float *x, const float *w) {
    for (size_t t = 0; t < T; t++) {
        double ss = 0.0;
        for (size_t i = 0; i < n; i++) ss += (double)x[t * n + i] * x[t * n + i];
        const double scale = 1.0 / sqrt(ss / (double)n + 1e-6);
        for (size_t i = 0; i < n; i++) x[t * n + i] = (float)(x[t * n + i] * scale) * (w ? w[i] : 1.0f);
    }
}

/* The encoder's attention as llama.cpp computes it: flash attention on the
 * CPU (mtmd turns it on), the keys and values cast to f16.  Fewer than 64
 * queries it takes one at a time: q in f16, an online softmax in f32 whose
 * weighted sum of the values is kept in f16, rounded at every key; more, a
 * tile at a time in f32 (here in double). */
static void attend(size_t T, size_t D, size_t H, double scale, const float *q, const float *k, const float *v, float *o) {
    const size_t d = D / H;
    double *p = test_alloc(T * sizeof(double));
    float *sum16 = test_alloc(d * sizeof(float));
    for (size_t head = 0; head < H; head++)
        for (size_t i = 0; i < T; i++) {
            const float *qi = q + i * D + head * d;
            float *out = o + i * D + head * d;
            if (T < 64) {
                float M = -INFINITY, S = 0.0f;
                for (size_t c = 0; c < d; c++) sum16[c] = 0.0f;
                for (size_t j = 0; j < T; j++) {
                    double dot = 0.0;
                    for (size_t c = 0; c < d; c++) dot += (double)f16_round(qi[c]) * f16_round(k[j * D + head * d + c]);
                    const float score = (float)dot * (float)scale;
                    const float grown = score > M ? expf(M - score) : 1.0f, weight = score > M ? 1.0f : expf(score - M);
                    if (score > M) {
                        M = score;
                        for (size_t c = 0; c < d; c++) sum16[c] = f16_round(sum16[c] * grown);
                    }
                    for (size_t c = 0; c < d; c++) sum16[c] = f16_round(sum16[c] + f16_round(v[j * D + head * d + c]) * weight);
                    S = S * grown + weight;
                }
                for (size_t c = 0; c < d; c++) out[c] = sum16[c] * (1.0f / S);
                continue;
            }
            double max = -INFINITY, sum = 0.0;
            for (size_t j = 0; j < T; j++) {
                double dot = 0.0;
                for (size_t c = 0; c < d; c++) dot += (double)qi[c] * f16_round(k[j * D + head * d + c]);
                p[j] = dot * scale;
                max = fmax(max, p[j]);
            }
            for (size_t j = 0; j < T; j++) sum += p[j] = exp(p[j] - max);
            for (size_t c = 0; c < d; c++) {
                double acc = 0.0;
                for (size_t j = 0; j < T; j++) acc += p[j] / sum * f16_round(v[j * D + head * d + c]);
                out[c] = (float)acc;
            }
        }
    free(p), free(sum16);
}

/* The encoder's blocks on x [T x D] (build_vit). */
static void ref_blocks(const reference *r, size_t T, float *x) {
    const spec *s = r->s;
    const size_t D = s->dim, F = s->ffn, H = s->heads, d = D / H;
    float *h = test_alloc(T * D * 4), *q = test_alloc(T * D * 4), *k = test_alloc(T * D * 4), *v = test_alloc(T * D * 4);
    float *o = test_alloc(T * D * 4), *f = test_alloc(T * F * 4);
    char w[64], b[64];
    for (uint32_t l = 0; l < s->layers; l++) {
#define NAME(buf, part, what) snprintf(buf, sizeof buf, "v.blk.%u.%s.%s", l, part, what)
        memcpy(h, x, T * D * 4);
        NAME(w, "ln1", "weight"), NAME(b, "ln1", "bias"), layer_norm(r, w, b, 1e-6f, T, D, h);
        NAME(w, "attn_q", "weight"), NAME(b, "attn_q", "bias"), linear(r, w, b, T, D, D, h, q);
        NAME(w, "attn_k", "weight"), NAME(b, "attn_k", "bias"), linear(r, w, b, T, D, D, h, k);
        NAME(w, "attn_v", "weight"), NAME(b, "attn_v", "bias"), linear(r, w, b, T, D, D, h, v);
        attend(T, D, H, 1.0 / sqrt((double)d), q, k, v, o);
        NAME(w, "attn_out", "weight"), NAME(b, "attn_out", "bias"), linear(r, w, b, T, D, D, o, h);
        for (size_t i = 0; i < T * D; i++) x[i] += h[i];
        memcpy(h, x, T * D * 4);
        NAME(w, "ln2", "weight"), NAME(b, "ln2", "bias"), layer_norm(r, w, b, 1e-6f, T, D, h);
        const char *up = s->swapped_ffn ? "ffn_down" : "ffn_up", *down = s->swapped_ffn ? "ffn_up" : "ffn_down";
        NAME(w, up, "weight"), NAME(b, up, "bias"), linear(r, w, b, T, D, F, h, f);
        for (size_t i = 0; i < T * F; i++) f[i] = gelu_table(f[i]);
        NAME(w, down, "weight"), NAME(b, down, "bias"), linear(r, w, b, T, F, D, f, h);
        for (size_t i = 0; i < T * D; i++) x[i] += h[i];
#undef NAME
    }
    layer_norm(r, "v.post_ln.weight", "v.post_ln.bias", 1e-6f, T, D, x);
    free(h), free(q), free(k), free(v), free(o), free(f);
}

/* Gemma 4's blocks (gemma4v.cpp through build_vit): RMSNorms, q and k normed
 * per head, each head's halves turned by the patch's column and row (NeoX
 * pairs (i, i + d/4) at base 100), V normed, q.k unscaled, GELU(gate) * up,
 * post norms; the products clamped where the file says. */
static void ref_blocks_gemma4v(const reference *r, size_t gx, size_t gy, float *x) {
    const spec *s = r->s;
    const size_t T = gx * gy, D = s->dim, F = s->ffn, H = s->heads, d = D / H;
    float *h = test_alloc(T * D * 4), *q = test_alloc(T * D * 4), *k = test_alloc(T * D * 4), *v = test_alloc(T * D * 4);
    float *o = test_alloc(T * D * 4), *g = test_alloc(T * F * 4), *u = test_alloc(T * F * 4);
    char name[64];
#define W(part) (snprintf(name, sizeof name, "v.blk.%u.%s.weight", l, part), name)
#define NORM(part) weights_of(r, W(part), NULL)
    for (uint32_t l = 0; l < s->layers; l++) {
        float *ln1 = NORM("ln1"), *ln2 = NORM("ln2"), *qn = NORM("attn_q_norm"), *kn = NORM("attn_k_norm");
        float *post_attn = NORM("attn_post_norm"), *post_ffn = NORM("ffn_post_norm");
        memcpy(h, x, T * D * 4);
        rms_rows(T, D, h, ln1);
        linear(r, W("attn_q"), NULL, T, D, D, h, q);
        linear(r, W("attn_k"), NULL, T, D, D, h, k);
        linear(r, W("attn_v"), NULL, T, D, D, h, v);
        rms_rows(T * H, d, q, qn);
        rms_rows(T * H, d, k, kn);
        rms_rows(T * H, d, v, NULL);
        float *turned[2] = {q, k};
        for (size_t which = 0; which < 2; which++)
            for (size_t t = 0; t < T; t++)
                for (size_t head = 0; head < H; head++)
                    for (size_t half = 0; half < 2; half++) {
                        const double position = half ? (double)(t / gx) : (double)(t % gx);
                        float *c = turned[which] + t * D + head * d + half * d / 2;
                        for (size_t i = 0; i < d / 4; i++) {
                            const double angle = position * pow(100.0, -2.0 * (double)i / (double)(d / 2));
                            const double a = c[i], b = c[i + d / 4];
                            c[i] = (float)(a * cos(angle) - b * sin(angle));
                            c[i + d / 4] = (float)(a * sin(angle) + b * cos(angle));
                        }
                    }
        attend(T, D, H, 1.0, q, k, v, o);
        linear(r, W("attn_out"), NULL, T, D, D, o, h);
        rms_rows(T, D, h, post_attn);
        for (size_t i = 0; i < T * D; i++) x[i] += h[i];
        memcpy(h, x, T * D * 4);
        rms_rows(T, D, h, ln2);
        linear(r, W("ffn_gate"), NULL, T, D, F, h, g);
        linear(r, W("ffn_up"), NULL, T, D, F, h, u);
        for (size_t i = 0; i < T * F; i++) g[i] = gelu_table(g[i]) * u[i];
        linear(r, W("ffn_down"), NULL, T, F, D, g, h);
        rms_rows(T, D, h, post_ffn);
        for (size_t i = 0; i < T * D; i++) x[i] += h[i];
        float *out_scale = NORM("out_scale"); /* a scalar or a value per channel */
        for (size_t i = 0; out_scale && i < T * D; i++) x[i] *= out_scale[s->out_scale == 1 ? 0 : i % D];
        free(ln1), free(ln2), free(qn), free(kn), free(post_attn), free(post_ffn), free(out_scale);
    }
#undef W
#undef NORM
    free(h), free(q), free(k), free(v), free(o), free(g), free(u);
}

/* qwen3vl's spatial merge as its reshapes and permutes index memory:
 * [D, W, H] -> cont (2D, W/2, H) -> reshape (2D, W/2, 2, H/2) -> permute
 * (0, 2, 1, 3) -> cont (D, W H): patch (x, y) to row
 * x%2 + 2 (y%2) + 4 (x/2) + 2 W (y/2). */
static size_t merged_row(size_t x, size_t y, size_t W) {
    return x % 2 + 2 * (y % 2) + 4 * (x / 2) + 2 * W * (y / 2);
}

/* Qwen3-VL's blocks (qwen3vl.cpp) on x in merged order: LayerNorms, the
 * fused qkv, M-RoPE of the vision kind (pairs (i, i + d/2), the first d/4
 * turned by the patch's row, the next by its column, base 10000), GELU FFN;
 * each deepstack block's output, 4 rows a row, through LayerNorm, fc1,
 * GELU, fc2 into its columns of deep [T/4 x k width]. */
static void ref_blocks_qwen3vl(const reference *r, size_t gx, size_t gy, float *x, float *deep, size_t deep_stride) {
    const spec *s = r->s;
    const size_t T = gx * gy, D = s->dim, F = s->ffn, H = s->heads, d = D / H;
    float *h = test_alloc(T * D * 4), *qkv = test_alloc(T * 3 * D * 4), *q = test_alloc(T * D * 4), *k = test_alloc(T * D * 4);
    float *v = test_alloc(T * D * 4), *o = test_alloc(T * D * 4), *f = test_alloc(T * F * 4);
    size_t *px = test_alloc(T * sizeof(size_t)), *py = test_alloc(T * sizeof(size_t)), deeps = 0;
    for (size_t y = 0; y < gy; y++)
        for (size_t c = 0; c < gx; c++) px[merged_row(c, y, gx)] = c, py[merged_row(c, y, gx)] = y;
    char w[64], b[64];
    for (uint32_t l = 0; l < s->layers; l++) {
#define NAME(buf, part, what) snprintf(buf, sizeof buf, "v.blk.%u.%s.%s", l, part, what)
        memcpy(h, x, T * D * 4);
        NAME(w, "ln1", "weight"), NAME(b, "ln1", "bias"), layer_norm(r, w, b, 1e-6f, T, D, h);
        NAME(w, "attn_qkv", "weight"), NAME(b, "attn_qkv", "bias"), linear(r, w, b, T, D, 3 * D, h, qkv);
        for (size_t t = 0; t < T; t++) {
            memcpy(q + t * D, qkv + t * 3 * D, D * 4);
            memcpy(k + t * D, qkv + t * 3 * D + D, D * 4);
            memcpy(v + t * D, qkv + t * 3 * D + 2 * D, D * 4);
        }
        float *turned[2] = {q, k};
        for (size_t which = 0; which < 2; which++)
            for (size_t t = 0; t < T; t++)
                for (size_t head = 0; head < H; head++) {
                    float *c = turned[which] + t * D + head * d;
                    for (size_t i = 0; i < d / 2; i++) {
                        const double position = i < d / 4 ? (double)py[t] : (double)px[t];
                        const double angle = position * pow(10000.0, -2.0 * (double)(i % (d / 4)) / (double)(d / 2));
                        const double a = c[i], e = c[i + d / 2];
                        c[i] = (float)(a * cos(angle) - e * sin(angle));
                        c[i + d / 2] = (float)(a * sin(angle) + e * cos(angle));
                    }
                }
        attend(T, D, H, 1.0 / sqrt((double)d), q, k, v, o);
        NAME(w, "attn_out", "weight"), NAME(b, "attn_out", "bias"), linear(r, w, b, T, D, D, o, h);
        for (size_t i = 0; i < T * D; i++) x[i] += h[i];
        memcpy(h, x, T * D * 4);
        NAME(w, "ln2", "weight"), NAME(b, "ln2", "bias"), layer_norm(r, w, b, 1e-6f, T, D, h);
        NAME(w, "ffn_up", "weight"), NAME(b, "ffn_up", "bias"), linear(r, w, b, T, D, F, h, f);
        for (size_t i = 0; i < T * F; i++) f[i] = gelu_table(f[i]);
        NAME(w, "ffn_down", "weight"), NAME(b, "ffn_down", "bias"), linear(r, w, b, T, F, D, f, h);
        for (size_t i = 0; i < T * D; i++) x[i] += h[i];
#undef NAME
        snprintf(w, sizeof w, "v.deepstack.%u.fc1.weight", l);
        if (kvc_gguf_find_tensor(r->e->gguf, w, strlen(w)) == KVC_GGUF_NONE) continue;
        float *hidden = test_alloc(T / 4 * s->hidden * 4), *feat = test_alloc(T * D * 4), *projected = test_alloc(T / 4 * s->out * 4);
        memcpy(feat, x, T * D * 4);
        snprintf(w, sizeof w, "v.deepstack.%u.norm.weight", l), snprintf(b, sizeof b, "v.deepstack.%u.norm.bias", l);
        layer_norm(r, w, b, 1e-6f, T / 4, 4 * D, feat);
        snprintf(w, sizeof w, "v.deepstack.%u.fc1.weight", l), snprintf(b, sizeof b, "v.deepstack.%u.fc1.bias", l);
        linear(r, w, b, T / 4, 4 * D, s->hidden, feat, hidden);
        for (size_t i = 0; i < T / 4 * s->hidden; i++) hidden[i] = gelu_table(hidden[i]);
        snprintf(w, sizeof w, "v.deepstack.%u.fc2.weight", l), snprintf(b, sizeof b, "v.deepstack.%u.fc2.bias", l);
        linear(r, w, b, T / 4, s->hidden, s->out, hidden, projected);
        for (size_t t = 0; t < T / 4; t++) memcpy(deep + t * deep_stride + deeps * s->out, projected + t * s->out, s->out * 4);
        deeps++;
        free(hidden), free(feat), free(projected);
    }
    layer_norm(r, "v.post_ln.weight", "v.post_ln.bias", 1e-6f, T, D, x);
    free(h), free(qkv), free(q), free(k), free(v), free(o), free(f), free(px), free(py);
}

/* x [gx x gy x D] averaged over m x m patches (ggml_pool_2d on the
 * transposed rows), to (gx / m) (gy / m) rows. */
static float *ref_pool(const float *x, size_t gx, size_t gy, size_t D, size_t m, size_t *tokens) {
    const size_t ox = gx / m, oy = gy / m;
    *tokens = ox * oy;
    float *pooled = test_alloc(*tokens * D * 4);
    for (size_t c = 0; c < D; c++)
        for (size_t j = 0; j < oy; j++)
            for (size_t i = 0; i < ox; i++) {
                double sum = 0.0;
                for (size_t ky = 0; ky < m; ky++)
                    for (size_t kx = 0; kx < m; kx++) sum += x[((j * m + ky) * gx + i * m + kx) * D + c];
                pooled[(j * ox + i) * D + c] = (float)(sum / (double)(m * m));
            }
    return pooled;
}

/* The patches (conv2d, stride the patch) plus the positions: the table, or
 * torch's antialiased bilinear resize of it (separable triangle weights of
 * support max(1, 1 / scale), each axis normalised), or for qwen3vl its
 * bilinear resize with aligned corners. */
static float *ref_embed(const reference *r, const float *pixels, size_t W, size_t H) {
    const spec *s = r->s;
    const size_t P = s->patch, D = s->dim, gx = W / P, gy = H / P, n = s->side;
    const int gemma4v = strcmp(s->projector, "gemma4v") == 0;
    float *kernel = weights_of(r, "v.patch_embd.weight", NULL), *bias = weights_of(r, "v.patch_embd.bias", NULL);
    float *second = weights_of(r, "v.patch_embd.weight.1", NULL); /* qwen3vl: its conv added */
    float *table = weights_of(r, "v.position_embd.weight", NULL);
    float *x = test_alloc(gx * gy * D * 4);
    for (size_t py = 0; py < gy; py++)
        for (size_t px = 0; px < gx; px++)
            for (size_t o = 0; o < D; o++) {
                double sum = 0.0, sum2 = 0.0;
                for (size_t c = 0; c < 3; c++)
                    for (size_t ky = 0; ky < P; ky++)
                        for (size_t kx = 0; kx < P; kx++) {
                            /* ggml_conv_2d: the patches (its im2col) and the kernel in f16 */
                            const size_t k = ((o * 3 + c) * P + ky) * P + kx;
                            const float pixel = pixels[((py * P + ky) * W + px * P + kx) * 3 + c];
                            sum += (double)f16_round(kernel[k]) * f16_round(gemma4v ? 2.0f * pixel - 1.0f : pixel);
                            if (second) sum2 += (double)f16_round(second[k]) * f16_round(pixel);
                        }
                x[(py * gx + px) * D + o] = ((float)sum + (float)sum2) + (bias ? bias[o] : 0.0f);
            }
    if (gemma4v) {
        /* gemma4v: the column's row of the first table plus the row's of the second */
        for (size_t py = 0; py < gy; py++)
            for (size_t px = 0; px < gx; px++)
                for (size_t c = 0; c < D; c++) x[(py * gx + px) * D + c] += table[px * D + c] + table[(n + py) * D + c];
        free(kernel), free(bias), free(second), free(table);
        return x;
    }
    double *wx = test_alloc(gx * n * sizeof(double)), *wy = test_alloc(gy * n * sizeof(double));
    const struct { size_t out; double *w; } axes[2] = {{gx, wx}, {gy, wy}};
    const int corners = strcmp(s->projector, "qwen3vl_merger") == 0;
    for (size_t a = 0; a < 2; a++) {
        const double scale = (double)axes[a].out / (double)n, support = scale < 1 ? 1 / scale : 1;
        for (size_t i = 0; i < axes[a].out; i++) {
            if (corners) {
                /* qwen3vl: plain bilinear, corners aligned (source i (n - 1) / (out - 1)) */
                const double at = axes[a].out > 1 && n > 1 ? (double)i * (double)(n - 1) / (double)(axes[a].out - 1) : i / scale;
                const size_t j0 = (size_t)floor(at), j1 = j0 + 1 < n ? j0 + 1 : n - 1;
                for (size_t j = 0; j < n; j++) axes[a].w[i * n + j] = 0.0;
                axes[a].w[i * n + j0] += 1.0 - (at - floor(at));
                axes[a].w[i * n + j1] += at - floor(at);
                continue;
            }
            const double center = (i + 0.5) / scale;
            double total = 0.0;
            for (size_t j = 0; j < n; j++) total += axes[a].w[i * n + j] = fmax(0.0, 1.0 - fabs((j + 0.5 - center) / support));
            for (size_t j = 0; j < n; j++) axes[a].w[i * n + j] /= total;
        }
    }
    for (size_t py = 0; py < gy; py++)
        for (size_t px = 0; px < gx; px++)
            for (size_t c = 0; c < D; c++) {
                double sum = 0.0;
                for (size_t sy = 0; sy < n; sy++)
                    for (size_t sx = 0; sx < n; sx++) sum += wy[py * n + sy] * wx[px * n + sx] * table[(sy * n + sx) * D + c];
                x[(py * gx + px) * D + c] += (float)sum;
            }
    free(kernel), free(bias), free(second), free(table), free(wx), free(wy);
    return x;
}

/* build_patch_merge_permute as ggml lays it out: [n, W, H] padded with
 * zeros to multiples of s; reshape (n s, W/s, H); permute (0, 2, 1, 3);
 * cont to (n s s, H/s, W/s); permute (0, 2, 1, 3); cont. */
static float *ref_shuffle(size_t n, size_t W0, size_t H0, size_t s, const float *in, size_t *tokens) {
    const size_t W = (W0 + s - 1) / s * s, H = (H0 + s - 1) / s * s;
    float *a = test_alloc(n * W * H * 4), *c = test_alloc(n * W * H * 4), *out = test_alloc(n * W * H * 4);
    memset(a, 0, n * W * H * 4);
    for (size_t y = 0; y < H0; y++) memcpy(a + y * W * n, in + y * W0 * n, W0 * n * 4);
    /* A[y][b][i] = a[(y (W/s) + b) n s + i]; cont of its permute: C[(b H + y) n s + i]. */
    for (size_t y = 0; y < H; y++)
        for (size_t b = 0; b < W / s; b++)
            for (size_t i = 0; i < n * s; i++) c[(b * H + y) * n * s + i] = a[(y * (W / s) + b) * n * s + i];
    /* D[b][yb][j] = c[(b (H/s) + yb) n s s + j]; cont of its permute: out[(yb (W/s) + b) n s s + j]. */
    for (size_t b = 0; b < W / s; b++)
        for (size_t yb = 0; yb < H / s; yb++)
            for (size_t j = 0; j < n * s * s; j++) out[(yb * (W / s) + b) * n * s * s + j] = c[(b * (H / s) + yb) * n * s * s + j];
    free(a), free(c);
    *tokens = (W / s) * (H / s);
    return out;
}

/* The whole encoder, its rows to *tokens x out. */
static float *ref_encode(const reference *r, const float *pixels, size_t W, size_t H, size_t *tokens) {
    const spec *s = r->s;
    const size_t D = s->dim, m = s->merge, gx = W / s->patch, gy = H / s->patch;
    float *x = ref_embed(r, pixels, W, H);
    float *y = NULL;
    if (strcmp(s->projector, "qwen3vl_merger") == 0) {
        /* merged order; each 4 rows one through mm.0, GELU, mm.2; deepstack's columns after */
        float *merged = test_alloc(gx * gy * D * 4);
        for (size_t py = 0; py < gy; py++)
            for (size_t px = 0; px < gx; px++) memcpy(merged + merged_row(px, py, gx) * D, x + (py * gx + px) * D, D * 4);
        *tokens = gx * gy / 4;
        const size_t deeps = 2, width = s->out * (1 + deeps);
        float *deep = test_alloc(*tokens * deeps * s->out * 4), *hidden = test_alloc(*tokens * s->hidden * 4);
        float *main_rows = test_alloc(*tokens * s->out * 4);
        ref_blocks_qwen3vl(r, gx, gy, merged, deep, deeps * s->out);
        linear(r, "mm.0.weight", "mm.0.bias", *tokens, 4 * D, s->hidden, merged, hidden);
        for (size_t i = 0; i < *tokens * s->hidden; i++) hidden[i] = gelu_table(hidden[i]);
        linear(r, "mm.2.weight", "mm.2.bias", *tokens, s->hidden, s->out, hidden, main_rows);
        y = test_alloc(*tokens * width * 4);
        for (size_t t = 0; t < *tokens; t++) {
            memcpy(y + t * width, main_rows + t * s->out, s->out * 4);
            memcpy(y + t * width + s->out, deep + t * deeps * s->out, deeps * s->out * 4);
        }
        free(merged), free(deep), free(hidden), free(main_rows), free(x);
        return y;
    }
    if (strcmp(s->projector, "gemma4v") == 0) {
        /* the pool times sqrt(D), (x - std_bias) * std_scale, RMSNorm, the projection */
        ref_blocks_gemma4v(r, gx, gy, x);
        float *pooled = ref_pool(x, gx, gy, D, m, tokens);
        float *centre = weights_of(r, "v.std_bias", NULL), *scale = weights_of(r, "v.std_scale", NULL);
        for (size_t t = 0; t < *tokens; t++)
            for (size_t c = 0; c < D; c++)
                pooled[t * D + c] = (pooled[t * D + c] * sqrtf((float)D) - centre[c]) * scale[c];
        rms_rows(*tokens, D, pooled, NULL);
        y = test_alloc(*tokens * s->out * 4);
        linear(r, "mm.input_projection.weight", NULL, *tokens, D, s->out, pooled, y);
        free(pooled), free(centre), free(scale), free(x);
        return y;
    }
    ref_blocks(r, gx * gy, x);
    if (strcmp(s->projector, "idefics3") == 0) {
        float *merged = ref_shuffle(D, gx, gy, m, x, tokens);
        y = test_alloc(*tokens * s->out * 4);
        linear(r, "mm.model.fc.weight", NULL, *tokens, D * m * m, s->out, merged, y);
        free(merged);
    } else if (strcmp(s->projector, "lfm2") == 0) {
        float *merged = ref_shuffle(D, gx, gy, m, x, tokens);
        float *hidden = test_alloc(*tokens * s->hidden * 4);
        layer_norm(r, "mm.input_norm.weight", "mm.input_norm.bias", 1e-5f, *tokens, D * m * m, merged);
        linear(r, "mm.1.weight", "mm.1.bias", *tokens, D * m * m, s->hidden, merged, hidden);
        for (size_t i = 0; i < *tokens * s->hidden; i++) hidden[i] = gelu_table(hidden[i]);
        y = test_alloc(*tokens * s->out * 4);
        linear(r, "mm.2.weight", "mm.2.bias", *tokens, s->hidden, s->out, hidden, y);
        free(merged), free(hidden);
    } else {
        /* gemma3: x transposed to [gx, gy, D] planes, pool_2d average, back,
         * RMSNorm times soft_emb_norm, then the projection's transpose. */
        float *pooled = ref_pool(x, gx, gy, D, m, tokens), *norm = weights_of(r, "mm.soft_emb_norm.weight", NULL);
        rms_rows(*tokens, D, pooled, norm);
        uint32_t type;
        float *proj = weights_of(r, "mm.input_projection.weight", &type); /* [in][out] */
        y = test_alloc(*tokens * s->out * 4);
        if (type == GGML_F16) /* its transpose is F16 too: ggml reads the activations in f16 */
            for (size_t i = 0; i < *tokens * D; i++) pooled[i] = f16_round(pooled[i]);
        for (size_t t = 0; t < *tokens; t++)
            for (size_t o = 0; o < s->out; o++) {
                double sum = 0.0;
                for (size_t c = 0; c < D; c++) sum += (double)proj[c * s->out + o] * pooled[t * D + c];
                y[t * s->out + o] = (float)sum;
            }
        free(pooled), free(norm), free(proj);
    }
    free(x);
    return y;
}

/* How far a is from b: the largest |a - b| over the largest |b|, and the
 * share of elements further than 1e-4 of that. */
static double relative_error(const float *a, const float *b, size_t n, double *share_far) {
    *share_far = 1.0;
    double diff = 0.0, scale = 0.0;
    size_t far = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i]) || !isfinite(b[i])) return INFINITY;
        diff = fmax(diff, fabs((double)a[i] - b[i]));
        scale = fmax(scale, fabs((double)b[i]));
    }
    for (size_t i = 0; i < n; i++) far += fabs((double)a[i] - b[i]) > 1e-4 * scale;
    *share_far = (double)far / (double)n;
    return scale > 0 ? diff / scale : diff;
}

static const char *type_name(uint32_t type) {
    return type == GGML_F32 ? "F32" : type == GGML_F16 ? "F16" : "Q8_0";
}

/* Encodes a W x H tile with the encoder and the reference; the rows must
 * agree within `tolerance` of the largest (the share of them further than
 * 1e-4 is printed).  Where one of ggml's own roundings (GELU's f16 table, a
 * Q8_0 product's activation codes, the attention's keys, values and running
 * sum in f16) falls on either side of a step for values a rounding apart,
 * the two differ by that step, and the blocks after carry it: one
 * activation code of a Q8_0 product that flips in the first block moves
 * every row after it by about 1e-2 (where none flips the two agree to
 * 1e-7), a GELU step in an f32 product's rows by 1e-4, an f16 step of the
 * attention's sum (2^-11 of it) by up to 5e-4. */
#define Q8_TOLERANCE 3e-2
#define FLOAT_TOLERANCE 1e-3
static int agrees(const spec *s, size_t W, size_t H, uint64_t seed, double tolerance) {
    test_encoder e;
    char message[256] = "";
    const kvc_status made = make_encoder(s, seed, &e, message, sizeof message);
    int ok = made == KVC_OK;
    if (!ok) fprintf(stderr, "  make_encoder: %s (%s)\n", kvc_status_name(made), message);
    float *pixels = tile(W, H, seed + 1);
    const size_t tokens = ok ? kvc_vision_tokens(e.vision, W, H) : 0;
    const size_t dim = ok ? kvc_vision_output_dim(e.vision) : 0;
    const size_t deeps = strcmp(s->projector, "qwen3vl_merger") == 0 ? 2 : 0; /* its first and last blocks' */
    if (ok && (dim != s->out * (1 + deeps) || tokens == 0)) fprintf(stderr, "  %zu tokens of %zu\n", tokens, dim), ok = 0;
    if (ok) {
        float *out = test_alloc(tokens * dim * sizeof(float));
        const reference r = {&e, s};
        size_t ref_tokens = 0;
        const kvc_status encoded = kvc_vision_encode(e.vision, pixels, W, H, out);
        float *expected = ref_encode(&r, pixels, W, H, &ref_tokens);
        double far = 1.0;
        const double error = encoded == KVC_OK ? relative_error(out, expected, tokens * dim, &far) : INFINITY;
        printf("  %s (matrices %s, patch kernel %s) %zux%zu: %zu tokens, relative error %.2e, %.1f%% past 1e-4\n", s->projector,
               type_name(s->matrix_type), type_name(s->patch_type), W, H, tokens, error, 100 * far);
        ok = encoded == KVC_OK && ref_tokens == tokens && error <= tolerance;
        free(out), free(expected);
    }
    free(pixels);
    free_encoder(&e);
    return ok;
}

/* ---- encoding ---- */

TEST(idefics3_encodes_as_the_reference_for_f32_f16_and_q8_0_matrices) {
    const uint32_t types[] = {GGML_F32, GGML_F16, GGML_Q8_0};
    for (size_t i = 0; i < 3; i++) {
        spec s = idefics3_spec(types[i]);
        CHECK(agrees(&s, 32, 32, 10 + i, types[i] == GGML_Q8_0 ? Q8_TOLERANCE : FLOAT_TOLERANCE));
    }
    spec f32_patch = idefics3_spec(GGML_F16);
    f32_patch.patch_type = GGML_F32;
    CHECK(agrees(&f32_patch, 32, 32, 13, FLOAT_TOLERANCE));
}

TEST(idefics3_reads_an_older_converters_swapped_ffn_names) {
    spec s = idefics3_spec(GGML_F32);
    s.swapped_ffn = 1;
    CHECK(agrees(&s, 32, 32, 20, FLOAT_TOLERANCE));
}

TEST(lfm2_resizes_its_positions_to_any_grid_and_pads_the_unshuffle) {
    const struct { size_t W, H; } sizes[] = {{16, 16}, {24, 40}, {20, 28}, {8, 12}, {64, 8}, {4, 4}};
    const uint32_t types[] = {GGML_F32, GGML_F16, GGML_Q8_0};
    for (size_t t = 0; t < 3; t++)
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            spec s = lfm2_spec(types[t]);
            CHECK(agrees(&s, sizes[i].W, sizes[i].H, 30 + i, types[t] == GGML_Q8_0 ? Q8_TOLERANCE : FLOAT_TOLERANCE));
        }
}

TEST(gemma3_pools_norms_and_projects_through_the_transposed_weight) {
    const uint32_t types[] = {GGML_F32, GGML_F16, GGML_Q8_0};
    for (size_t i = 0; i < 3; i++) {
        spec s = gemma3_spec(types[i]);
        CHECK(agrees(&s, 32, 32, 40 + i, types[i] == GGML_Q8_0 ? Q8_TOLERANCE : FLOAT_TOLERANCE));
    }
}

TEST(gemma4v_turns_norms_clamps_and_pools_as_the_reference) {
    const struct { size_t W, H; } sizes[] = {{24, 36}, {36, 12}, {40, 40}};
    const uint32_t types[] = {GGML_F32, GGML_F16, GGML_Q8_0};
    for (size_t t = 0; t < 3; t++)
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            spec s = gemma4v_spec(types[t]);
            CHECK(agrees(&s, sizes[i].W, sizes[i].H, 80 + i, types[t] == GGML_Q8_0 ? Q8_TOLERANCE : FLOAT_TOLERANCE));
        }
    /* each block's out_scale: a scalar (the converter's layer_scalar) or a value per channel */
    const uint32_t out_scales[] = {1, 64};
    for (size_t i = 0; i < 2; i++) {
        spec scaled = gemma4v_spec(GGML_F32);
        scaled.out_scale = out_scales[i];
        CHECK(agrees(&scaled, 24, 36, 85 + i, FLOAT_TOLERANCE));
    }
    test_encoder e;
    const spec s = gemma4v_spec(GGML_F32);
    CHECK_OK(make_encoder(&s, 1, &e, NULL, 0));
    CHECK(kvc_vision_tokens(e.vision, 24, 36) == 2 * 3);
    CHECK(kvc_vision_tokens(e.vision, 44, 12) == 0); /* 11 columns: past the tables' 10 */
    free_encoder(&e);
}

TEST(qwen3vl_merges_turns_and_appends_its_deepstack_as_the_reference) {
    const struct { size_t W, H; } sizes[] = {{16, 16}, {24, 40}, {8, 40}, {32, 8}};
    const uint32_t types[] = {GGML_F32, GGML_F16, GGML_Q8_0};
    for (size_t t = 0; t < 3; t++)
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            spec s = qwen3vl_spec(types[t]);
            CHECK(agrees(&s, sizes[i].W, sizes[i].H, 90 + i, types[t] == GGML_Q8_0 ? Q8_TOLERANCE : FLOAT_TOLERANCE));
        }
    spec big = qwen3vl_spec(GGML_F16); /* a table of 12 x 12: resized down to the grid */
    big.image_size = 48, big.side = 12;
    CHECK(agrees(&big, 16, 40, 95, FLOAT_TOLERANCE));
    test_encoder e;
    const spec s = qwen3vl_spec(GGML_F32);
    CHECK_OK(make_encoder(&s, 1, &e, NULL, 0));
    CHECK(kvc_vision_tokens(e.vision, 24, 40) == 3 * 5);
    CHECK(kvc_vision_tokens(e.vision, 20, 40) == 0); /* 5 columns: not whole 2 x 2 blocks */
    CHECK(kvc_vision_output_dim(e.vision) == 3 * 48); /* the merger's 48, then two deepstack blocks' */
    free_encoder(&e);
}

TEST(tokens_follow_the_grid_and_refuse_sizes_the_encoder_cannot_take) {
    test_encoder e;
    spec s = lfm2_spec(GGML_F32);
    CHECK_OK(make_encoder(&s, 1, &e, NULL, 0));
    CHECK(kvc_vision_tokens(e.vision, 24, 40) == 3 * 5);  /* 6 x 10 patches, 2 x 2 a token */
    CHECK(kvc_vision_tokens(e.vision, 20, 28) == 3 * 4);  /* 5 x 7, padded to 6 x 8 */
    CHECK(kvc_vision_tokens(e.vision, 18, 16) == 0);      /* not a whole number of patches */
    CHECK(kvc_vision_tokens(e.vision, 0, 16) == 0);
    CHECK(kvc_vision_tokens(e.vision, 4 * 200, 4 * 200) == 0); /* more patches than an encode takes */
    CHECK(kvc_vision_patch_size(e.vision) == 4 && kvc_vision_merge(e.vision) == 2);
    CHECK(strcmp(kvc_vision_projector(e.vision), "lfm2") == 0);
    float pixels[18 * 16 * 3] = {0}, out[1];
    CHECK_STATUS(kvc_vision_encode(e.vision, pixels, 18, 16, out), KVC_E_LENGTH);
    CHECK_STATUS(kvc_vision_encode(e.vision, NULL, 16, 16, out), KVC_E_NULL_POINTER);
    free_encoder(&e);
    spec fixed = idefics3_spec(GGML_F32);
    CHECK_OK(make_encoder(&fixed, 1, &e, NULL, 0));
    CHECK(kvc_vision_tokens(e.vision, 32, 32) == 16);
    CHECK(kvc_vision_tokens(e.vision, 16, 32) == 0); /* the table is 8 x 8 patches */
    free_encoder(&e);
    CHECK(kvc_vision_tokens(NULL, 32, 32) == 0 && kvc_vision_output_dim(NULL) == 0 && kvc_vision_projector(NULL) == NULL);
}

TEST(encode_gives_the_same_bits_on_one_and_three_threads) {
    const spec specs[] = {lfm2_spec(GGML_Q8_0), gemma3_spec(GGML_F16)};
    for (size_t i = 0; i < 2; i++) {
        test_encoder e;
        CHECK_OK(make_encoder(&specs[i], 50 + i, &e, NULL, 0));
        const size_t W = 32, H = 32, n = kvc_vision_tokens(e.vision, W, H) * kvc_vision_output_dim(e.vision);
        float *pixels = tile(W, H, 60 + i), *one = test_alloc(n * 4), *many = test_alloc(n * 4);
        CHECK(n > 0);
        CHECK_OK(kvc_vision_encode(e.vision, pixels, W, H, one));
        if (kvc_set_threads(3) != KVC_OK) {
            test_skip("this build runs no pool threads of its own (in wasm the JS loader starts the workers)");
        } else {
            const size_t min_work = kvc_pool_set_min_work(0); /* every job on the pool, small as they are */
            const kvc_status status = kvc_vision_encode(e.vision, pixels, W, H, many);
            kvc_pool_set_min_work(min_work);
            kvc_set_threads(1);
            CHECK_OK(status);
            CHECK(memcmp(one, many, n * 4) == 0);
        }
        free(pixels), free(one), free(many);
        free_encoder(&e);
    }
}

/* ---- refusals ---- */

/* Creating from s fails with `expected` and a sentence containing `says`. */
static int refused(const spec *s, kvc_status expected, const char *says) {
    gb_file f = build_file(s);
    kvc_gguf *g = NULL;
    int ok = kvc_gguf_parse(f.bytes, f.len, &g, NULL) == KVC_OK;
    if (ok) {
        char message[256] = "";
        kvc_vision *v = (kvc_vision *)1;
        const kvc_status status = kvc_vision_create(g, &v, message, sizeof message);
        printf("  %s: %s\n", kvc_status_name(status), message);
        ok = status == expected && v == NULL && strstr(message, says) != NULL;
    }
    kvc_gguf_free(g);
    free(f.bytes);
    return ok;
}

TEST(create_refuses_what_it_cannot_encode_and_says_what) {
    spec s = idefics3_spec(GGML_F32);
    s.arch = "llama";
    CHECK(refused(&s, KVC_E_ARCH, "not a projector"));
    s = idefics3_spec(GGML_F32);
    s.projector = "ldp";
    CHECK(refused(&s, KVC_E_ARCH, "projector type ldp"));
    s = idefics3_spec(GGML_F32);
    s.drop = "v.blk.1.attn_k.weight";
    CHECK(refused(&s, KVC_E_MODEL_FILE, "v.blk.1.attn_k.weight is missing"));
    s = lfm2_spec(GGML_F32);
    s.drop = "mm.2.weight";
    CHECK(refused(&s, KVC_E_MODEL_FILE, "mm.2.weight is missing"));
    s = idefics3_spec(GGML_F32);
    s.narrow = "v.blk.0.attn_out.weight";
    CHECK(refused(&s, KVC_E_MODEL_FILE, "v.blk.0.attn_out.weight is [64, 63], expected [64, 64]"));
    s = gemma3_spec(GGML_F32);
    s.narrow = "v.position_embd.weight";
    CHECK(refused(&s, KVC_E_MODEL_FILE, "not a square grid"));
    s = idefics3_spec(GGML_F32);
    s.block_count = 1000000;
    CHECK(refused(&s, KVC_E_MODEL_FILE, "block_count"));
    s = idefics3_spec(GGML_F32);
    s.dim = 1u << 20;
    CHECK(refused(&s, KVC_E_MODEL_FILE, "embedding_length is not a usable size"));
    s = idefics3_spec(GGML_F32);
    s.heads = 5;
    CHECK(refused(&s, KVC_E_MODEL_FILE, "heads"));
    s = idefics3_spec(GGML_F32);
    s.omit_merge = 1;
    CHECK(refused(&s, KVC_E_MODEL_FILE, "scale_factor is missing"));
    s = idefics3_spec(GGML_F32);
    s.merge = 1;
    CHECK(refused(&s, KVC_E_MODEL_FILE, "merges 2 or more"));
    s = gemma4v_spec(GGML_F32);
    s.out_scale = 3; /* neither a scalar nor a value per channel */
    CHECK(refused(&s, KVC_E_MODEL_FILE, "v.blk.0.out_scale.weight is [3], expected [64]"));
}

TEST(a_truncated_file_is_refused_before_an_encoder_is_made) {
    spec s = idefics3_spec(GGML_F32);
    gb_file f = build_file(&s);
    kvc_gguf *g = (kvc_gguf *)1;
    size_t needed = 0;
    CHECK_STATUS(kvc_gguf_parse(f.bytes, 200, &g, &needed), KVC_E_GGUF_TRUNCATED);
    CHECK(g == NULL && needed > 200);
    free(f.bytes);
    kvc_vision *v = (kvc_vision *)1;
    CHECK_STATUS(kvc_vision_create(NULL, &v, NULL, 0), KVC_E_NULL_POINTER);
    CHECK(v == NULL);
}

typedef struct create_ctx {
    const kvc_gguf *gguf;
    kvc_vision *out;
} create_ctx;

static kvc_status op_create(void *context) {
    create_ctx *c = context;
    c->out = NULL;
    return test_out_rule(kvc_vision_create(c->gguf, &c->out, NULL, 0), c->out);
}

typedef struct encode_ctx {
    kvc_vision *vision;
    const float *pixels;
    float *out;
} encode_ctx;

static kvc_status op_encode(void *context) {
    encode_ctx *c = context;
    return kvc_vision_encode(c->vision, c->pixels, 32, 32, c->out);
}

TEST(out_of_memory_fails_cleanly_and_leaves_the_rows_untouched) {
    const spec s = gemma3_spec(GGML_F16);
    test_encoder e;
    CHECK_OK(make_encoder(&s, 70, &e, NULL, 0));
    const size_t n = kvc_vision_tokens(e.vision, 32, 32) * kvc_vision_output_dim(e.vision);
    float *pixels = tile(32, 32, 71), *out = test_alloc(n * 4);
    for (size_t i = 0; i < n; i++) out[i] = -7.0f;
    float *expected = test_alloc(n * 4);
    CHECK_OK(kvc_vision_encode(e.vision, pixels, 32, 32, expected));
    /* An encoder made, given weights and run with allocations failing, all
     * on the hook, which counts what is left. */
    CHECK_OK(test_fault_install());
    create_ctx c = {e.gguf, NULL};
    CHECK(test_run_with_faults(op_create, &c, NULL, 1, TEST_KEEPS_NONE) >= 1);
    test_fault_arm(1, 1);
    CHECK_STATUS(kvc_vision_alloc_weights(c.out), KVC_E_NOMEM);
    CHECK(kvc_vision_weights(c.out) == NULL);
    test_fault_arm(0, 0);
    CHECK_OK(kvc_vision_alloc_weights(c.out));
    memcpy(kvc_vision_weights(c.out), kvc_vision_weights(e.vision), kvc_vision_weights_bytes(e.vision));
    encode_ctx x = {c.out, pixels, out};
    test_fault_arm(1, 1);
    CHECK_STATUS(op_encode(&x), KVC_E_NOMEM);
    test_fault_arm(0, 0);
    for (size_t i = 0; i < n; i++) CHECK(out[i] == -7.0f);
    CHECK(test_run_with_faults(op_encode, &x, NULL, 1, TEST_KEEPS_OWNED) >= 1);
    CHECK(memcmp(out, expected, n * 4) == 0);
    kvc_vision_free(c.out);
    CHECK(test_fault_remove() == 0);
    free_encoder(&e);
    free(pixels), free(out), free(expected);
}

/* kvc_vision_plan flattens image.c's plan of the projector's own
 * parameters, and kvc_vision_encode_tile is image.c's tile through
 * kvc_vision_encode, bit for bit; both refuse what they cannot take. */
TEST(an_image_plans_and_encodes_a_tile_as_preprocessing_then_the_encoder) {
    const spec s = lfm2_spec(GGML_F32);
    test_encoder e;
    CHECK_OK(make_encoder(&s, 70, &e, NULL, 0));
    enum { W = 45, H = 30 };
    uint8_t *rgba = test_alloc(W * H * 4);
    test_rng rng = test_rng_new(71);
    for (size_t i = 0; i < W * H * 4; i++) rgba[i] = (uint8_t)(test_rng_u32(&rng) & 0xff);
    kvc_image_plan plan;
    CHECK_OK(kvc_image_plan_of(&e.vision->image, W, H, &plan));
    uint32_t flat[5 + 5 * KVC_IMAGE_MAX_TILES];
    CHECK_OK(kvc_vision_plan(e.vision, W, H, flat, 5 + 5 * KVC_IMAGE_MAX_TILES));
    CHECK(flat[0] == plan.tiles && flat[1] == plan.rows && flat[2] == plan.cols && flat[3] == (uint32_t)(plan.overview != 0) &&
          flat[4] == plan.tokens);
    for (size_t t = 0; t < plan.tiles; t++) {
        const kvc_image_tile *tile = &plan.tile[t];
        const uint32_t *got = flat + 5 + 5 * t;
        CHECK(got[0] == tile->width && got[1] == tile->height && got[2] == tile->tokens && got[3] == tile->grid_x &&
              got[4] == tile->grid_y);
        const size_t n = tile->tokens * kvc_vision_output_dim(e.vision);
        float *pixels = test_alloc(tile->width * tile->height * 3 * sizeof(float));
        float *want = test_alloc(n * sizeof(float)), *out = test_alloc(n * sizeof(float));
        CHECK_OK(kvc_image_tile_pixels(&e.vision->image, &plan, t, rgba, W, H, pixels));
        CHECK_OK(kvc_vision_encode(e.vision, pixels, tile->width, tile->height, want));
        CHECK_OK(kvc_vision_encode_tile(e.vision, rgba, W, H, t, out));
        CHECK(test_bits_equal(want, out, n));
        free(pixels), free(want), free(out);
    }
    float out[1];
    CHECK_STATUS(kvc_vision_plan(e.vision, W, H, flat, 5 + 5 * plan.tiles - 1), KVC_E_LENGTH);
    CHECK_STATUS(kvc_vision_plan(e.vision, 0, H, flat, 5 + 5 * KVC_IMAGE_MAX_TILES), KVC_E_LENGTH);
    CHECK_STATUS(kvc_vision_plan(NULL, W, H, flat, 5), KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_vision_encode_tile(e.vision, rgba, W, H, plan.tiles, out), KVC_E_LENGTH);
    CHECK_STATUS(kvc_vision_encode_tile(e.vision, NULL, W, H, 0, out), KVC_E_NULL_POINTER);
    free(rgba);
    free_encoder(&e);
}

RUN_TESTS(CASE(an_image_plans_and_encodes_a_tile_as_preprocessing_then_the_encoder),
          CASE(idefics3_encodes_as_the_reference_for_f32_f16_and_q8_0_matrices),
          CASE(idefics3_reads_an_older_converters_swapped_ffn_names),
          CASE(lfm2_resizes_its_positions_to_any_grid_and_pads_the_unshuffle),
          CASE(gemma3_pools_norms_and_projects_through_the_transposed_weight),
          CASE(gemma4v_turns_norms_clamps_and_pools_as_the_reference),
          CASE(qwen3vl_merges_turns_and_appends_its_deepstack_as_the_reference),
          CASE(tokens_follow_the_grid_and_refuse_sizes_the_encoder_cannot_take),
          CASE(encode_gives_the_same_bits_on_one_and_three_threads),
          CASE(create_refuses_what_it_cannot_encode_and_says_what),
          CASE(a_truncated_file_is_refused_before_an_encoder_is_made),
          CASE(out_of_memory_fails_cleanly_and_leaves_the_rows_untouched))
