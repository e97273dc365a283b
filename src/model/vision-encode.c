/*
 * vision-encode.c -- a tile through an image encoder (vision.c reads it):
 * the patches embedded by the patch kernel as a product, the position
 * table added (resized to the tile's grid where the design says), the
 * pre-norm blocks, then the projector's steps, as llama.cpp's clip graph
 * computes them (clip.cpp's build_inp, build_vit, build_attn,
 * build_patch_merge_permute, resize_position_embeddings; siglip.cpp's
 * projectors), operation by operation in its order: LayerNorm as ggml_norm
 * (then times the weight, then plus the bias), biases added after their
 * products, GELU through ggml's table of f16, the patches and the patch
 * kernel multiplied in f16 (ggml_conv_2d).  The products go through
 * kvc_matmul; the attention over the patches, non-causal, is llama.cpp's
 * flash attention (keys and values in f16; fewer than 64 patches a query
 * at a time with its sum in f16, more through the core's kernels: scores,
 * softmax, weighted sum) on the pool, a task a head and a chunk of queries,
 * each computed alike whichever thread takes it: no result depends on the
 * thread count.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "../core/internal.h"
#include "../kernels/kernels.h"
#include "../kernels/weights-scalar.h"
#include "vision.h"

/* Queries a task of the attention takes: its scores [chunk x patches]. */
#define KVC_VISION_QUERY_CHUNK 32

/* ---- the element-wise arithmetic ---- */

/* A vector weight as f32: its data when F32, else dequantized into tmp. */
static const float *vector_of(const kvc_tensor *t, float *tmp) {
    if (t->type->ggml_id == 0) return (const float *)(const void *)t->data;
    t->type->dequantize(t->data, 0, t->cols, tmp);
    return tmp;
}

/* ggml_norm of each of T rows of n, at eps: the mean (summed in double),
 * the deviations, their variance (summed in double), the deviations times
 * 1 / sqrt(variance + eps); then times w, then plus b (each where present). */
static void layernorm(size_t T, size_t n, float *x, const kvc_tensor *w, const kvc_tensor *b, float eps, float *tmp) {
    for (size_t t = 0; t < T; t++) {
        float *row = x + t * n;
        double sum = 0.0;
        for (size_t i = 0; i < n; i++) sum += (double)row[i];
        const float mean = (float)(sum / (double)n);
        double squares = 0.0;
        for (size_t i = 0; i < n; i++) {
            row[i] -= mean;
            squares += (double)(row[i] * row[i]);
        }
        const float scale = 1.0f / sqrtf((float)(squares / (double)n) + eps);
        for (size_t i = 0; i < n; i++) row[i] *= scale;
    }
    if (w->type) {
        const float *weight = vector_of(w, tmp);
        for (size_t t = 0; t < T; t++)
            for (size_t i = 0; i < n; i++) x[t * n + i] *= weight[i];
    }
    if (b->type) {
        const float *bias = vector_of(b, tmp);
        for (size_t t = 0; t < T; t++) kvc_add(n, x + t * n, bias);
    }
}

/* Each of T rows of n plus the bias (absent: nothing). */
static void add_bias(size_t T, size_t n, float *x, const kvc_tensor *b, float *tmp) {
    if (!b->type) return;
    const float *bias = vector_of(b, tmp);
    for (size_t t = 0; t < T; t++) kvc_add(n, x + t * n, bias);
}

/* The blocks' norm of each of T rows of n: LayerNorm (times w, plus b), or
 * ggml_rms_norm times w (then plus b), each where present. */
static void block_norm(kvc_vision_norm norm, size_t T, size_t n, float *x, const kvc_tensor *w, const kvc_tensor *b, float eps,
                       float *tmp) {
    if (norm == KVC_VISION_LAYERNORM_BLOCKS) {
        layernorm(T, n, x, w, b, eps, tmp);
        return;
    }
    const float *weight = w->type ? vector_of(w, tmp) : NULL;
    for (size_t t = 0; t < T; t++) kvc_rmsnorm(n, x + t * n, weight, eps, x + t * n);
    add_bias(T, n, x, b, tmp);
}

/* ggml's CPU quick GELU: the input rounded to f16, ggml_gelu_quick_f32 of
 * that rounded to f16 -- an entry of its table of every f16, which this
 * one is too (GELU's, kvc_gelu_table_fill's, beside it). */
static float gelu_quick_of(float h) { return kvc_f16_round(h * (1.0f / (1.0f + expf(-1.702f * h)))); }

/* The two tables (GELU's, then quick GELU's), once. */
static kvc_status make_gelu_tables(kvc_vision *v) {
    if (v->scratch.gelu) return KVC_OK;
    float *table = kvc_realloc_array(NULL, KVC_VISION_GELU_TABLES, sizeof *table);
    if (!table) return KVC_E_NOMEM;
    kvc_gelu_table_fill(table);
    for (uint32_t h = 0; h < KVC_GELU_TABLE; h++) table[KVC_GELU_TABLE + h] = gelu_quick_of(kvc_f16_to_f32((uint16_t)h));
    v->scratch.gelu = table;
    return KVC_OK;
}

static void activate(const kvc_vision *v, kvc_vision_act act, size_t n, float *x) {
    const float *quick = v->scratch.gelu + KVC_GELU_TABLE;
    if (act == KVC_VISION_GELU) kvc_gelu(v->scratch.gelu, n, x);
    else if (act == KVC_VISION_GELU_QUICK)
        for (size_t i = 0; i < n; i++) x[i] = quick[kvc_f32_to_f16(x[i])];
    else
        for (size_t i = 0; i < n; i++) x[i] = x[i] / (1.0f + expf(-x[i]));
}

/* ---- the scratch ---- */

/* The arrays of an encode, carved from one arena. */
enum { S_X, S_XB, S_Q, S_K, S_V, S_QH, S_KH, S_VH, S_FFN, S_GATE, S_PATCHES, S_TABLE, S_PROBS, S_STATS, S_VECTOR, S_ROPE,
       S_CLAMPED, S_PING, S_PONG, S_DEEP, S_DEEP_HIDDEN, S_COUNT };

typedef struct vision_work {
    float *at[S_COUNT];
    size_t gx, gy, T; /* the patch grid */
} vision_work;

void kvc_vision_scratch_free(kvc_vision_scratch *scratch) {
    kvc_free(scratch->arena);
    kvc_free(scratch->codes);
    kvc_free(scratch->transposed);
    kvc_free(scratch->kernels);
    kvc_free(scratch->gelu);
    memset(scratch, 0, sizeof *scratch);
}

/* ggml_conv_2d, which llama.cpp embeds the patches with, lays them out
 * (im2col) in f16 and multiplies them with the kernel read as f16 -- of
 * whatever type it is but BF16 (ggml type 30), whose im2col is f32 and
 * whose product is in f32.  The products of two f16 are exact in f32; for
 * an F32 kernel the embedding is some 7e-4 (rms, relative) off the exact
 * one, enough to move a Q8_0 encoder's activation codes. */
static int conv_in_f16(const kvc_vision *v) { return v->patch_w.type->ggml_id != 30; }

/* The patch kernels (the second where present) as f16 (ggml type 1), once. */
static kvc_status round_kernels(kvc_vision *v) {
    if (!conv_in_f16(v) || v->scratch.kernels) return KVC_OK;
    const kvc_tensor *kernels[2] = {&v->patch_w, &v->patch_w2};
    const size_t cols = v->patch_w.cols, rows = v->patch_w.rows, count = v->patch_w2.type ? 2 : 1;
    /* each at most 2^16 x 3 x 256 x 256 (vision.c): their product may pass a 32-bit size_t */
    const uint64_t values = (uint64_t)count * rows * cols;
    uint16_t *h = values <= SIZE_MAX / sizeof *h ? kvc_realloc_array(NULL, (size_t)values, sizeof *h) : NULL;
    float *row = kvc_realloc_array(NULL, cols, sizeof *row);
    if (!h || !row) {
        kvc_free(h), kvc_free(row);
        return KVC_E_NOMEM;
    }
    for (size_t k = 0; k < count; k++)
        for (size_t r = 0; r < rows; r++) {
            kernels[k]->type->dequantize(kernels[k]->data + r * kernels[k]->row_bytes, 0, cols, row);
            for (size_t c = 0; c < cols; c++) h[(k * rows + r) * cols + c] = kvc_f32_to_f16(row[c]);
        }
    kvc_free(row);
    v->scratch.kernels = h;
    return KVC_OK;
}

/* Patch kernel k (0 or 1) as the product multiplies it. */
static kvc_tensor kernel_of(const kvc_vision *v, size_t k) {
    const kvc_tensor *kernel = k ? &v->patch_w2 : &v->patch_w;
    if (!conv_in_f16(v)) return *kernel;
    const size_t cols = kernel->cols, rows = kernel->rows;
    /* Before the first encode makes the copies, only the kernel's shape is read (reserve's sizes). */
    const uint8_t *data = v->scratch.kernels ? (const uint8_t *)(v->scratch.kernels + k * rows * cols) : NULL;
    return (kvc_tensor){.type = kvc_weight_type_of(1), .data = data, .cols = cols, .rows = rows, .row_bytes = cols * sizeof(uint16_t)};
}

/* Bytes kvc_matmul's codes take for these weights' products with T rows. */
static uint64_t codes_of(const kvc_tensor *const *w, size_t count, size_t T) {
    uint64_t bytes = 0;
    for (size_t i = 0; i < count; i++) bytes += kvc_matmul_codes_bytes(w[i]->type, w[i]->cols, 1) * (uint64_t)T;
    return bytes;
}

static uint64_t larger(uint64_t a, uint64_t b) { return a > b ? a : b; }

/* A thread's floats of the attention's scores: a chunk of queries' scores,
 * or a query in f16 (attend_by_query). */
static size_t probs_stride(const kvc_vision *v, size_t T) {
    return KVC_VISION_QUERY_CHUNK * T > v->head_dim ? KVC_VISION_QUERY_CHUNK * T : v->head_dim;
}

/* Sizes the arena and the codes for a grid of gx x gy patches, growing them
 * when smaller; nothing changes on failure. */
static kvc_status reserve(kvc_vision *v, vision_work *work) {
    const uint64_t T = work->T, D = v->dim, P = v->patch_size;
    const size_t threads = kvc_pool_threads();
    uint64_t floats[S_COUNT] = {0};
    floats[S_X] = floats[S_XB] = floats[S_Q] = floats[S_K] = floats[S_V] = T * D;
    floats[S_QH] = floats[S_KH] = floats[S_VH] = T * D;
    floats[S_FFN] = floats[S_GATE] = T * v->ffn_dim;
    floats[S_ROPE] = 2 * v->head_dim;
    floats[S_PATCHES] = T * 3 * P * P;
    floats[S_TABLE] = (v->design->positions == KVC_VISION_POS_XY ? 2 : (uint64_t)v->side) * v->side * D;
    floats[S_PROBS] = (uint64_t)threads * probs_stride(v, work->T);
    floats[S_STATS] = (uint64_t)threads * 2 * KVC_VISION_QUERY_CHUNK;
    /* The projector's tokens, step by step, ping-ponging; the vector slot
     * holds the widest vector weight or row. */
    uint64_t widest = larger(D, v->ffn_dim), tokens = T, head = T * D;
    size_t gx = work->gx, gy = work->gy;
    const kvc_tensor kernel = kernel_of(v, 0);
    uint64_t codes = codes_of((const kvc_tensor *[]){&kernel}, 1, work->T);
    for (size_t i = 0; i < v->design->steps; i++) {
        const kvc_vision_step *s = &v->design->step[i];
        if (s->op == KVC_VISION_SHUFFLE) gx = (gx + v->merge - 1) / v->merge, gy = (gy + v->merge - 1) / v->merge;
        if (s->op == KVC_VISION_POOL) gx /= v->merge, gy /= v->merge;
        tokens = (uint64_t)gx * gy;
        head = larger(head, tokens * v->step_width[i + 1]);
        widest = larger(widest, v->step_width[i + 1]);
        if (s->op == KVC_VISION_LINEAR) codes = larger(codes, codes_of((const kvc_tensor *[]){&v->step_w[i]}, 1, (size_t)tokens));
        if (s->op == KVC_VISION_LINEAR_T)
            codes = larger(codes, tokens * kvc_matmul_codes_bytes(kvc_weight_type_of(0), v->step_width[i], 1));
    }
    floats[S_VECTOR] = widest;
    floats[S_PING] = floats[S_PONG] = head;
    floats[S_CLAMPED] = larger(head, T * larger(D, v->ffn_dim));
    const uint64_t blocks = T / ((uint64_t)v->merge * v->merge); /* deepstack's rows */
    floats[S_DEEP] = blocks * v->deepstack_layers * v->deepstack_width;
    for (size_t l = 0; l < v->layers; l++) {
        const kvc_vision_block *b = &v->blocks[l];
        if (!b->ds_fc1.type) continue;
        floats[S_DEEP_HIDDEN] = larger(floats[S_DEEP_HIDDEN], blocks * b->ds_fc1.rows);
        codes = larger(codes, codes_of((const kvc_tensor *[]){&b->ds_fc1}, 1, (size_t)blocks));
        codes = larger(codes, codes_of((const kvc_tensor *[]){&b->ds_fc2}, 1, (size_t)blocks));
        widest = larger(widest, larger(b->ds_fc1.cols, b->ds_fc1.rows));
    }
    floats[S_VECTOR] = widest;
    for (size_t l = 0; l < v->layers; l++) {
        const kvc_tensor *w = v->blocks[l].w;
        codes = larger(codes, codes_of((const kvc_tensor *[]){&w[KVC_VISION_Q], &w[KVC_VISION_K], &w[KVC_VISION_V]}, 3, work->T));
        for (size_t i = KVC_VISION_O; i < KVC_VISION_PRODUCTS; i++)
            if (w[i].type) codes = larger(codes, codes_of((const kvc_tensor *[]){&w[i]}, 1, work->T));
    }
    uint64_t total = 0;
    for (size_t i = 0; i < S_COUNT; i++) total += floats[i];
    if (total > SIZE_MAX / sizeof(float) || codes > SIZE_MAX) return KVC_E_NOMEM;
    kvc_vision_scratch *s = &v->scratch;
    if (total > s->arena_floats) {
        float *grown = kvc_realloc_array(s->arena, (size_t)total, sizeof(float));
        if (!grown) return KVC_E_NOMEM;
        s->arena = grown;
        s->arena_floats = (size_t)total;
    }
    if (codes > s->codes_bytes) {
        uint8_t *grown = kvc_realloc_array(s->codes, (size_t)codes, 1);
        if (!grown) return KVC_E_NOMEM;
        s->codes = grown;
        s->codes_bytes = (size_t)codes;
    }
    float *at = s->arena;
    for (size_t i = 0; i < S_COUNT; i++) work->at[i] = at, at += floats[i];
    return KVC_OK;
}

/* LINEAR_T's weights as f32 [out x in], once. */
static kvc_status transpose_weights(kvc_vision *v) {
    for (size_t i = 0; i < v->design->steps; i++) {
        if (v->design->step[i].op != KVC_VISION_LINEAR_T || v->scratch.transposed) continue;
        const kvc_tensor *w = &v->step_w[i]; /* rows: the inputs; cols: the outputs */
        const size_t in = w->rows, out = w->cols;
        /* both at most 2^16 (vision.c): their product may pass a 32-bit size_t */
        const uint64_t values = (uint64_t)in * out + out;
        float *t = values <= SIZE_MAX / sizeof(float) ? kvc_realloc_array(NULL, (size_t)values, sizeof(float)) : NULL;
        if (!t) return KVC_E_NOMEM;
        float *row = t + in * out;
        for (size_t r = 0; r < in; r++) {
            w->type->dequantize(w->data + r * w->row_bytes, 0, out, row);
            for (size_t j = 0; j < out; j++) t[j * in + r] = row[j];
        }
        v->scratch.transposed = t;
    }
    return KVC_OK;
}

/* y [T x w.rows] = x [T x w.cols] times w's rows. */
static void product(kvc_vision *v, kvc_profile_op op, const kvc_tensor *w, const float *x, size_t T, float *y) {
    const kvc_product p = {.w = w, .y = y, .y_stride = w->rows};
    kvc_matmul(op, 1, &p, x, T, v->scratch.codes);
}

/* A bound of a clamped product, or `none` where the file has none. */
static float bound(const kvc_tensor *t, float none, float *tmp) {
    return t->type ? vector_of(t, tmp)[0] : none;
}

/* ggml_clamp: each of n values into [low, high]. */
static void clamp(size_t n, float *x, float low, float high) {
    for (size_t i = 0; i < n; i++) x[i] = fmaxf(fminf(x[i], high), low);
}

/* Whether ggml's CPU reads the activations of a product with w in f16: an
 * F16 weight's (ggml type 1; its vec_dot_type), where kvc_matmul keeps them
 * f32. */
static int reads_f16(const kvc_tensor *w) { return w->type->ggml_id == 1; }

/* The n activations of a product with w, in place, as ggml's CPU reads them. */
static void read_as(const kvc_tensor *w, size_t n, float *x) {
    if (!reads_f16(w)) return;
    for (size_t i = 0; i < n; i++) x[i] = kvc_f16_round(x[i]);
}

/* product() as llama.cpp's graph computes it: Gemma4ClippableLinear's
 * input clamped and its output clamped where the file has the bounds, the
 * input read as ggml does (read_as) -- both into a copy, as other products
 * read x as it is; neither: product() itself. */
static void clamped_product(kvc_vision *v, kvc_profile_op op, const kvc_tensor *w, const kvc_tensor *bounds, const float *x,
                            size_t T, float *y, float *copy, float *tmp) {
    int bounded = 0;
    for (size_t i = 0; bounds && i < KVC_VISION_BOUNDS; i++) bounded |= bounds[i].type != NULL;
    if (!bounded && !reads_f16(w)) {
        product(v, op, w, x, T, y);
        return;
    }
    memcpy(copy, x, T * w->cols * sizeof *copy);
    if (bounded)
        clamp(T * w->cols, copy, bound(&bounds[KVC_VISION_INPUT_MIN], -FLT_MAX, tmp), bound(&bounds[KVC_VISION_INPUT_MAX], FLT_MAX, tmp));
    read_as(w, T * w->cols, copy);
    product(v, op, w, copy, T, y);
    if (bounded)
        clamp(T * w->rows, y, bound(&bounds[KVC_VISION_OUTPUT_MIN], -FLT_MAX, tmp), bound(&bounds[KVC_VISION_OUTPUT_MAX], FLT_MAX, tmp));
}

/* ---- the encoder ---- */

/* The patches as rows of the patch kernel's layout (ggml_conv_2d's im2col:
 * channel, then row, then column of the patch, in f16 where it is), a row
 * per patch, row-major. */
static void embed_patches(kvc_vision *v, vision_work *w, const float *pixels) {
    const size_t P = v->patch_size, width = w->gx * P, cols = 3 * P * P;
    const float scale = v->design->pixel_scale ? v->design->pixel_scale : 1.0f, shift = v->design->pixel_bias;
    const int f16 = conv_in_f16(v);
    for (size_t py = 0; py < w->gy; py++) {
        for (size_t px = 0; px < w->gx; px++) {
            float *row = w->at[S_PATCHES] + (py * w->gx + px) * cols;
            for (size_t c = 0; c < 3; c++)
                for (size_t ky = 0; ky < P; ky++)
                    for (size_t kx = 0; kx < P; kx++) {
                        const float value = pixels[((py * P + ky) * width + px * P + kx) * 3 + c] * scale + shift;
                        row[(c * P + ky) * P + kx] = f16 ? kvc_f16_round(value) : value;
                    }
        }
    }
    const kvc_tensor kernel = kernel_of(v, 0);
    product(v, KVC_PROFILE_EMBED, &kernel, w->at[S_PATCHES], w->T, w->at[S_X]);
    if (v->patch_w2.type) { /* the second kernel's product added (qwen3vl's two conv2d) */
        const kvc_tensor second = kernel_of(v, 1);
        product(v, KVC_PROFILE_EMBED, &second, w->at[S_PATCHES], w->T, w->at[S_Q]);
        kvc_add(w->T * v->dim, w->at[S_X], w->at[S_Q]);
    }
    add_bias(w->T, v->dim, w->at[S_X], &v->patch_b, w->at[S_VECTOR]);
}

/* ggml_interpolate's bilinear resize with antialiasing, from a side x side
 * grid to gx x gy, added to the patches: per output its source window,
 * triangle weights of support max(1, 1 / scale) summed in source order
 * (row outer), the weighted values divided by the weights' sum. */
static void add_resized_positions(kvc_vision *v, vision_work *w) {
    const size_t D = v->dim, n = v->side;
    const float *table = w->at[S_TABLE];
    const float sf0 = (float)w->gx / (float)n, sf1 = (float)w->gy / (float)n;
    const float support0 = fmaxf(1.0f, 1.0f / sf0), support1 = fmaxf(1.0f, 1.0f / sf1);
    const float inv0 = 1.0f / support0, inv1 = 1.0f / support1;
    float *val = w->at[S_VECTOR];
    for (size_t oy = 0; oy < w->gy; oy++) {
        const float y = ((float)oy + 0.5f) / sf1;
        const int64_t y0 = (int64_t)(y - support1 + 0.5f), y1 = (int64_t)(y + support1 + 0.5f);
        for (size_t ox = 0; ox < w->gx; ox++) {
            const float x = ((float)ox + 0.5f) / sf0;
            const int64_t x0 = (int64_t)(x - support0 + 0.5f), x1 = (int64_t)(x + support0 + 0.5f);
            float total = 0.0f;
            memset(val, 0, D * sizeof *val);
            for (int64_t sy = y0 < 0 ? 0 : y0; sy < y1 && sy < (int64_t)n; sy++) {
                const float wy = fmaxf(1.0f - fabsf(((float)sy - y + 0.5f) * inv1), 0.0f);
                for (int64_t sx = x0 < 0 ? 0 : x0; sx < x1 && sx < (int64_t)n; sx++) {
                    const float wx = fmaxf(1.0f - fabsf(((float)sx - x + 0.5f) * inv0), 0.0f);
                    const float weight = wx * wy;
                    if (weight <= 0.0f) continue;
                    const float *src = table + ((size_t)sy * n + (size_t)sx) * D;
                    for (size_t c = 0; c < D; c++) val[c] += src[c] * weight;
                    total += weight;
                }
            }
            float *row = w->at[S_X] + (oy * w->gx + ox) * D;
            for (size_t c = 0; c < D; c++) row[c] += total > 0.0f ? val[c] / total : val[c];
        }
    }
}

/* ggml_interpolate's bilinear resize with aligned corners, no antialias,
 * from a side x side grid to gx x gy, added to the patches: output (x, y)
 * reads the source at (x (side - 1) / (gx - 1), y (side - 1) / (gy - 1))
 * (scale side / g where a side is 1), its four neighbours (clamped to the
 * grid) weighted a (1 - dx)(1 - dy) + b dx (1 - dy) + c (1 - dx) dy + d dx dy. */
static void add_corner_positions(kvc_vision *v, vision_work *w) {
    const size_t D = v->dim, n = v->side;
    const float *table = w->at[S_TABLE];
    const float sf0 = w->gx > 1 && n > 1 ? (float)(w->gx - 1) / (float)(n - 1) : (float)w->gx / (float)n;
    const float sf1 = w->gy > 1 && n > 1 ? (float)(w->gy - 1) / (float)(n - 1) : (float)w->gy / (float)n;
    for (size_t oy = 0; oy < w->gy; oy++) {
        const float y = (float)oy / sf1, dy = fminf(fmaxf(y - floorf(y), 0.0f), 1.0f);
        const int64_t last = (int64_t)n - 1, fy = (int64_t)floorf(y);
        const int64_t y0 = fy < 0 ? 0 : fy > last ? last : fy, y1 = fy + 1 < 0 ? 0 : fy + 1 > last ? last : fy + 1;
        for (size_t ox = 0; ox < w->gx; ox++) {
            const float x = (float)ox / sf0, dx = fminf(fmaxf(x - floorf(x), 0.0f), 1.0f);
            const int64_t fx = (int64_t)floorf(x);
            const int64_t x0 = fx < 0 ? 0 : fx > last ? last : fx, x1 = fx + 1 < 0 ? 0 : fx + 1 > last ? last : fx + 1;
            const float *a = table + (size_t)(y0 * (int64_t)n + x0) * D, *b = table + (size_t)(y0 * (int64_t)n + x1) * D;
            const float *c = table + (size_t)(y1 * (int64_t)n + x0) * D, *d = table + (size_t)(y1 * (int64_t)n + x1) * D;
            float *row = w->at[S_X] + (oy * w->gx + ox) * D;
            for (size_t i = 0; i < D; i++)
                row[i] += a[i] * (1 - dx) * (1 - dy) + b[i] * dx * (1 - dy) + c[i] * (1 - dx) * dy + d[i] * dx * dy;
        }
    }
}

static void add_positions(kvc_vision *v, vision_work *w) {
    const kvc_tensor *t = &v->position;
    t->type->dequantize(t->data, 0, t->cols * t->rows, w->at[S_TABLE]);
    if (v->design->positions == KVC_VISION_POS_RESIZED) {
        add_resized_positions(v, w);
        return;
    }
    if (v->design->positions == KVC_VISION_POS_RESIZED_CORNERS) {
        add_corner_positions(v, w);
        return;
    }
    if (v->design->positions == KVC_VISION_POS_XY) {
        /* the column's row of the first table, then the row's of the second */
        const size_t D = v->dim;
        for (size_t p = 0; p < w->T; p++) kvc_add(D, w->at[S_X] + p * D, w->at[S_TABLE] + (p % w->gx) * D);
        for (size_t p = 0; p < w->T; p++) kvc_add(D, w->at[S_X] + p * D, w->at[S_TABLE] + (v->side + p / w->gx) * D);
        return;
    }
    kvc_add(w->T * v->dim, w->at[S_X], w->at[S_TABLE]); /* the grid is the table's */
}

/* ggml's CPU flash attention takes fewer queries than a tile of
 * GGML_FA_TILE_Q (64) one at a time (attend_by_query); a tile of them in
 * f32 but for the keys and values, as the core's kernels do.  (A build of
 * ggml with SIMD also takes them one at a time where a head is not a whole
 * number of its vectors; the reference build, plain x86-64, has none.) */
#define KVC_VISION_FLASH_TILE 64

typedef struct attention_job {
    size_t T, head_dim, chunks;
    float divisor; /* the scores are q.k / divisor */
    float scale;   /* or, query by query, q.k times scale */
    int by_query;  /* fewer queries than KVC_VISION_FLASH_TILE */
    const float *qh, *kh, *vh;
    float *oh, *probs, *stats;
    size_t probs_stride; /* a thread's floats of probs */
} attention_job;

/* One query over T keys as ggml's CPU flash attention takes a query alone
 * (ggml_compute_forward_flash_attn_ext_f16_one_chunk, keys and values in
 * f16): q rounded to f16; each score q.k summed in double, times the
 * scale; an online softmax whose running sum of the values stays in f16,
 * rounded at every step (ggml_vec_scale_f16, ggml_vec_mad_f16); at the end
 * over the sum of the weights.  k and v: [T x d], already f16 values; q16:
 * d floats of room. */
static void attend_by_query(size_t T, size_t d, float scale, const float *q, const float *k, const float *v, float *q16,
                            float *out) {
    for (size_t i = 0; i < d; i++) q16[i] = kvc_f16_round(q[i]), out[i] = 0.0f;
    float S = 0.0f, M = -INFINITY;
    for (size_t c = 0; c < T; c++) {
        double dot = 0.0;
        for (size_t i = 0; i < d; i++) dot += (double)(q16[i] * k[c * d + i]);
        const float s = (float)dot * scale;
        float ms = 1.0f, vs = 1.0f;
        if (s > M) {
            const float old = M;
            M = s;
            ms = expf(old - M);
            for (size_t i = 0; i < d; i++) out[i] = kvc_f16_round(out[i] * ms);
        } else {
            vs = expf(s - M);
        }
        for (size_t i = 0; i < d; i++) out[i] = kvc_f16_round(out[i] + v[c * d + i] * vs);
        S = S * ms + vs;
    }
    const float inv = S == 0.0f ? 0.0f : 1.0f / S;
    for (size_t i = 0; i < d; i++) out[i] *= inv;
}

/* Task (head, chunk of queries): their scores over every patch, softmax,
 * the values' weighted sum -- or each query by itself (attend_by_query). */
static void attention_task(void *context, size_t task, size_t thread) {
    const attention_job *job = context;
    const size_t T = job->T, d = job->head_dim, h = task / job->chunks;
    const size_t q0 = (task % job->chunks) * KVC_VISION_QUERY_CHUNK;
    const size_t G = T - q0 < KVC_VISION_QUERY_CHUNK ? T - q0 : KVC_VISION_QUERY_CHUNK;
    const float *q = job->qh + (h * T + q0) * d, *keys = job->kh + h * T * d, *values = job->vh + h * T * d;
    float *z = job->probs + thread * job->probs_stride, *out = job->oh + (h * T + q0) * d;
    if (job->by_query) {
        for (size_t g = 0; g < G; g++) attend_by_query(T, d, job->scale, q + g * d, keys, values, z, out + g * d);
        return;
    }
    const kvc_kernels *k = kvc_kernels_active();
    float *max = job->stats + thread * 2 * KVC_VISION_QUERY_CHUNK, *sum = max + KVC_VISION_QUERY_CHUNK;
    k->scores_f32(G, T, d, q, keys, job->divisor, z, T);
    k->softmax(G, T, z, T, max, sum);
    memset(out, 0, G * d * sizeof *out);
    k->weighted_sum_f32(G, T, d, z, T, values, out);
}

/* [T x heads x d] to [heads x T x d] and back. */
static void to_heads(size_t T, size_t heads, size_t d, const float *x, float *h) {
    for (size_t t = 0; t < T; t++)
        for (size_t i = 0; i < heads; i++) memcpy(h + (i * T + t) * d, x + (t * heads + i) * d, d * sizeof *h);
}

static void from_heads(size_t T, size_t heads, size_t d, const float *h, float *x) {
    for (size_t t = 0; t < T; t++)
        for (size_t i = 0; i < heads; i++) memcpy(x + (t * heads + i) * d, h + (i * T + t) * d, d * sizeof *x);
}

/* Where token t of the grid lies: row-major, or in block order (each
 * merge x merge block consecutive, row by row). */
static void place_of(const kvc_vision *v, const vision_work *w, size_t t, size_t *x, size_t *y) {
    if (!v->design->block_order) {
        *x = t % w->gx, *y = t / w->gx;
        return;
    }
    const size_t m = v->merge, block = t / (m * m), in = t % (m * m);
    *x = block % (w->gx / m) * m + in % m;
    *y = block / (w->gx / m) * m + in / m;
}

/* The rows of x, row-major, to block order (through tmp). */
static void to_block_order(const kvc_vision *v, const vision_work *w, float *x, float *tmp) {
    const size_t D = v->dim;
    for (size_t t = 0; t < w->T; t++) {
        size_t px, py;
        place_of(v, w, t, &px, &py);
        memcpy(tmp + t * D, x + (py * w->gx + px) * D, D * sizeof *tmp);
    }
    memcpy(x, tmp, w->T * D * sizeof *x);
}

/* q or k of each patch turned by the design's 2D RoPE (kvc_vision_rope). */
static void rope_2d(const kvc_vision *v, const vision_work *w, float *q) {
    const size_t H = v->heads, d = v->head_dim, D = v->dim;
    const kvc_rope_params rope = {.dims = d / 2, .base = v->design->rope_theta, .scale = 1.0f, .freq_scale = 1.0f};
    float *by_x = w->at[S_ROPE], *by_y = by_x + d / 2, *both = by_y + d / 2;
    for (size_t t = 0; t < w->T; t++) {
        size_t x, y;
        place_of(v, w, t, &x, &y);
        kvc_rope_table(&rope, x, by_x); /* d/4 cosines, then d/4 sines */
        kvc_rope_table(&rope, y, by_y);
        if (v->design->rope == KVC_VISION_ROPE_HALVES_XY) {
            kvc_rope_apply(H, d, d / 2, KVC_ROPE_HALVES, by_x, q + t * D);
            kvc_rope_apply(H, d, d / 2, KVC_ROPE_HALVES, by_y, q + t * D + d / 2);
            continue;
        }
        /* pairs (i, i + d/2): the first quarter's angles by y, the second's by x */
        for (size_t i = 0; i < d / 4; i++) {
            both[i] = by_y[i], both[d / 4 + i] = by_x[i];
            both[d / 2 + i] = by_y[d / 4 + i], both[3 * d / 4 + i] = by_x[d / 4 + i];
        }
        kvc_rope_apply(H, d, d, KVC_ROPE_HALVES, both, q + t * D);
    }
}

/* A q or k norm: over each head where it is a head's size, else the row. */
static void qk_norm(const kvc_vision *v, size_t T, float *x, const kvc_tensor *norm, float *tmp) {
    if (!norm->type) return;
    const size_t n = norm->cols;
    block_norm(v->design->norm, T * (v->dim / n), n, x, norm, &(kvc_tensor){0}, v->eps, tmp);
}

/* Block l's deepstack features, the k-th, of its output x: each block of
 * merge x merge patches (consecutive, in block order) one row through
 * LayerNorm, fc1, GELU, fc2, to columns k of the deepstack rows. */
static void deepstack(kvc_vision *v, vision_work *w, const kvc_vision_block *b, size_t k) {
    const size_t m2 = v->merge * v->merge, rows = w->T / m2, in = v->dim * m2, hidden = b->ds_fc1.rows;
    const size_t width = v->deepstack_width, stride = v->deepstack_layers * width;
    float *feat = w->at[S_XB], *h = w->at[S_DEEP_HIDDEN], *out = w->at[S_DEEP] + k * width, *tmp = w->at[S_VECTOR];
    memcpy(feat, w->at[S_X], w->T * v->dim * sizeof *feat);
    block_norm(v->design->norm, rows, in, feat, &b->ds_norm_w, &b->ds_norm_b, v->eps, tmp);
    read_as(&b->ds_fc1, rows * in, feat);
    product(v, KVC_PROFILE_GATE_UP, &b->ds_fc1, feat, rows, h);
    add_bias(rows, hidden, h, &b->ds_fc1_b, tmp);
    activate(v, KVC_VISION_GELU, rows * hidden, h);
    read_as(&b->ds_fc2, rows * hidden, h);
    const kvc_product p = {.w = &b->ds_fc2, .y = out, .y_stride = stride};
    kvc_matmul(KVC_PROFILE_DOWN, 1, &p, h, rows, v->scratch.codes);
    if (b->ds_fc2_b.type) {
        const float *bias = vector_of(&b->ds_fc2_b, tmp);
        for (size_t r = 0; r < rows; r++) kvc_add(width, out + r * stride, bias);
    }
}

/* Block l on the patches in x (build_vit's loop body). */
static void run_block(kvc_vision *v, vision_work *w, size_t l) {
    const kvc_vision_design *design = v->design;
    const kvc_vision_block *b = &v->blocks[l];
    const size_t T = w->T, D = v->dim, F = v->ffn_dim, H = v->heads, d = v->head_dim;
    float *x = w->at[S_X], *xb = w->at[S_XB], *tmp = w->at[S_VECTOR], *copy = w->at[S_CLAMPED];
    const kvc_tensor *bounds[KVC_VISION_PRODUCTS];
    for (size_t i = 0; i < KVC_VISION_PRODUCTS; i++) bounds[i] = design->clamps ? b->clamp[i] : NULL;
    memcpy(xb, x, T * D * sizeof *xb);
    block_norm(design->norm, T, D, xb, &b->ln1_w, &b->ln1_b, v->eps, tmp);
    float *qkv[3] = {w->at[S_Q], w->at[S_K], w->at[S_V]};
    if (design->clamps || reads_f16(&b->w[KVC_VISION_Q]) || reads_f16(&b->w[KVC_VISION_K]) || reads_f16(&b->w[KVC_VISION_V])) {
        for (size_t i = 0; i < 3; i++) clamped_product(v, KVC_PROFILE_QKV, &b->w[i], bounds[i], xb, T, qkv[i], copy, tmp);
    } else {
        const kvc_product products[3] = {{&b->w[KVC_VISION_Q], qkv[0], D}, {&b->w[KVC_VISION_K], qkv[1], D},
                                         {&b->w[KVC_VISION_V], qkv[2], D}};
        kvc_matmul(KVC_PROFILE_QKV, 3, products, xb, T, v->scratch.codes);
    }
    for (size_t i = 0; i < 3; i++) add_bias(T, D, qkv[i], &b->b[i], tmp);
    qk_norm(v, T, qkv[0], &b->q_norm, tmp);
    qk_norm(v, T, qkv[1], &b->k_norm, tmp);
    if (design->rope) rope_2d(v, w, qkv[0]), rope_2d(v, w, qkv[1]);
    if (design->v_norm)
        for (size_t i = 0; i < T * H; i++) kvc_rmsnorm(d, qkv[2] + i * d, NULL, v->eps, qkv[2] + i * d);
    /* llama.cpp's encoder attends by flash attention (mtmd turns it on where
     * the backend has it, as the CPU does), its keys and values cast to f16 */
    for (size_t i = 0; i < T * D; i++) qkv[1][i] = kvc_f16_round(qkv[1][i]), qkv[2][i] = kvc_f16_round(qkv[2][i]);
    to_heads(T, H, d, qkv[0], w->at[S_QH]);
    to_heads(T, H, d, qkv[1], w->at[S_KH]);
    to_heads(T, H, d, qkv[2], w->at[S_VH]);
    kvc_profile_mark(KVC_PROFILE_ROPE);
    /* The heads' outputs go where q was: it is in qh now. */
    attention_job job = {.T = T, .head_dim = d, .chunks = (T + KVC_VISION_QUERY_CHUNK - 1) / KVC_VISION_QUERY_CHUNK,
                         .divisor = design->attention_scale ? 1.0f / design->attention_scale : sqrtf((float)d),
                         .scale = design->attention_scale ? design->attention_scale : 1.0f / sqrtf((float)d),
                         .by_query = T < KVC_VISION_FLASH_TILE,
                         .qh = w->at[S_QH], .kh = w->at[S_KH], .vh = w->at[S_VH], .oh = w->at[S_Q],
                         .probs = w->at[S_PROBS], .stats = w->at[S_STATS], .probs_stride = probs_stride(v, T)};
    kvc_pool_run(attention_task, &job, H * job.chunks, kvc_pool_threads(), (uint64_t)2 * T * T * D);
    from_heads(T, H, d, w->at[S_Q], xb);
    kvc_profile_mark(KVC_PROFILE_ATTEND);
    float *added = w->at[S_K];
    clamped_product(v, KVC_PROFILE_WO, &b->w[KVC_VISION_O], bounds[KVC_VISION_O], xb, T, added, copy, tmp);
    add_bias(T, D, added, &b->b[KVC_VISION_O], tmp);
    if (b->attn_post_norm.type) block_norm(design->norm, T, D, added, &b->attn_post_norm, &(kvc_tensor){0}, v->eps, tmp);
    kvc_add(T * D, x, added);
    memcpy(xb, x, T * D * sizeof *xb);
    block_norm(design->norm, T, D, xb, &b->ln2_w, &b->ln2_b, v->eps, tmp);
    float *up = w->at[S_FFN], *gate = w->at[S_GATE];
    clamped_product(v, KVC_PROFILE_GATE_UP, &b->w[KVC_VISION_UP], bounds[KVC_VISION_UP], xb, T, up, copy, tmp);
    add_bias(T, F, up, &b->b[KVC_VISION_UP], tmp);
    if (b->w[KVC_VISION_GATE].type) {
        /* ggml_geglu_split: act(gate) * up */
        clamped_product(v, KVC_PROFILE_GATE_UP, &b->w[KVC_VISION_GATE], bounds[KVC_VISION_GATE], xb, T, gate, copy, tmp);
        add_bias(T, F, gate, &b->b[KVC_VISION_GATE], tmp);
        activate(v, v->act, T * F, gate);
        for (size_t i = 0; i < T * F; i++) up[i] = gate[i] * up[i];
    } else {
        activate(v, v->act, T * F, up);
    }
    kvc_profile_mark(KVC_PROFILE_ACTIVATION);
    clamped_product(v, KVC_PROFILE_DOWN, &b->w[KVC_VISION_DOWN], bounds[KVC_VISION_DOWN], up, T, added, copy, tmp);
    add_bias(T, D, added, &b->b[KVC_VISION_DOWN], tmp);
    if (b->ffn_post_norm.type) block_norm(design->norm, T, D, added, &b->ffn_post_norm, &(kvc_tensor){0}, v->eps, tmp);
    kvc_add(T * D, x, added);
    if (b->out_scale.type) { /* a scale per channel, or one for all */
        const float *scale = vector_of(&b->out_scale, tmp);
        const size_t step = b->out_scale.cols == 1 ? 0 : 1;
        for (size_t t = 0; t < T; t++)
            for (size_t i = 0; i < D; i++) x[t * D + i] *= scale[i * step];
    }
    kvc_profile_mark(KVC_PROFILE_RESIDUAL);
}

/* ---- the projector ---- */

/* Pixel shuffle of a gx x gy grid of rows of n into ceil(gx / m) x
 * ceil(gy / m) rows of m m n: output (ox, oy) the rows of patches
 * (oy m + dy, ox m + dx), dy outer, zeros past the grid. */
static void shuffle(size_t gx, size_t gy, size_t n, size_t m, const float *in, float *out) {
    const size_t ogx = (gx + m - 1) / m, ogy = (gy + m - 1) / m;
    for (size_t oy = 0; oy < ogy; oy++)
        for (size_t ox = 0; ox < ogx; ox++)
            for (size_t dy = 0; dy < m; dy++)
                for (size_t dx = 0; dx < m; dx++) {
                    const size_t y = oy * m + dy, x = ox * m + dx;
                    float *dst = out + ((oy * ogx + ox) * m * m + dy * m + dx) * n;
                    if (y < gy && x < gx) memcpy(dst, in + (y * gx + x) * n, n * sizeof *dst);
                    else memset(dst, 0, n * sizeof *dst);
                }
}

/* ggml_pool_2d's average, kernel and stride m, no padding. */
static void pool(size_t gx, size_t gy, size_t n, size_t m, const float *in, float *out) {
    const size_t ogx = gx / m, ogy = gy / m;
    for (size_t oy = 0; oy < ogy; oy++)
        for (size_t ox = 0; ox < ogx; ox++)
            for (size_t c = 0; c < n; c++) {
                float sum = 0.0f;
                for (size_t ky = 0; ky < m; ky++)
                    for (size_t kx = 0; kx < m; kx++) sum += in[((oy * m + ky) * gx + ox * m + kx) * n + c];
                out[(oy * ogx + ox) * n + c] = sum / (float)(m * m);
            }
}

/* The design's steps on the encoder's rows (in x); the last step's rows to out. */
static void run_steps(kvc_vision *v, vision_work *w, float *out) {
    size_t gx = w->gx, gy = w->gy;
    float *cur = w->at[S_X], *next = w->at[S_PING], *tmp = w->at[S_VECTOR];
    for (size_t i = 0; i < v->design->steps; i++) {
        const kvc_vision_step *s = &v->design->step[i];
        const size_t n = v->step_width[i], T = gx * gy, m = v->merge;
        int in_place = 0;
        switch (s->op) {
        case KVC_VISION_GROUP: /* the rows of a block are consecutive: read them as one */
            gx /= m, gy /= m;
            in_place = 1;
            break;
        case KVC_VISION_SHUFFLE:
            shuffle(gx, gy, n, m, cur, next);
            gx = (gx + m - 1) / m, gy = (gy + m - 1) / m;
            break;
        case KVC_VISION_POOL:
            pool(gx, gy, n, m, cur, next);
            gx /= m, gy /= m;
            break;
        case KVC_VISION_LAYERNORM:
            if (v->step_w[i].type) layernorm(T, n, cur, &v->step_w[i], &(kvc_tensor){0}, s->eps ? s->eps : v->eps, tmp);
            add_bias(T, n, cur, &v->step_b[i], tmp); /* llama.cpp adds it with the weight absent too */
            in_place = 1;
            break;
        case KVC_VISION_RMSNORM:
            block_norm(KVC_VISION_RMSNORM_BLOCKS, T, n, cur, &v->step_w[i], &(kvc_tensor){0}, v->eps, tmp);
            in_place = 1;
            break;
        case KVC_VISION_SCALE: {
            const float scale = sqrtf((float)n);
            for (size_t j = 0; j < T * n; j++) cur[j] *= scale;
            in_place = 1;
            break;
        }
        case KVC_VISION_STANDARDIZE:
            if (v->step_b[i].type && v->step_w[i].type) {
                float *centre = w->at[S_CLAMPED]; /* free between products */
                memcpy(centre, vector_of(&v->step_b[i], tmp), n * sizeof *centre);
                const float *scale = vector_of(&v->step_w[i], tmp);
                for (size_t t = 0; t < T; t++)
                    for (size_t j = 0; j < n; j++) cur[t * n + j] = (cur[t * n + j] - centre[j]) * scale[j];
            }
            in_place = 1;
            break;
        case KVC_VISION_LINEAR:
            clamped_product(v, KVC_PROFILE_LOGITS, &v->step_w[i], v->design->clamps ? v->step_clamp[i] : NULL, cur, T, next,
                            w->at[S_CLAMPED], tmp);
            add_bias(T, v->step_width[i + 1], next, &v->step_b[i], tmp);
            break;
        case KVC_VISION_LINEAR_T: {
            const size_t outs = v->step_width[i + 1];
            read_as(&v->step_w[i], T * n, cur); /* as the file's weight is read, transposed or not */
            const kvc_tensor t = {.type = kvc_weight_type_of(0), .data = (const uint8_t *)v->scratch.transposed,
                                  .cols = n, .rows = outs, .row_bytes = n * sizeof(float)};
            product(v, KVC_PROFILE_LOGITS, &t, cur, T, next);
            break;
        }
        case KVC_VISION_ACT:
            activate(v, v->design->head_act, T * n, cur);
            in_place = 1;
            break;
        }
        if (!in_place) {
            float *done = cur;
            cur = next;
            next = done == w->at[S_X] ? w->at[S_PONG] : done;
        }
    }
    /* each row: the projector's, then its deepstack features */
    const size_t projected = v->step_width[v->design->steps], deep = v->out_dim - projected;
    for (size_t t = 0; t < gx * gy; t++) {
        memcpy(out + t * v->out_dim, cur + t * projected, projected * sizeof *out);
        memcpy(out + t * v->out_dim + projected, w->at[S_DEEP] + t * deep, deep * sizeof *out);
    }
}

kvc_status kvc_vision_encode(kvc_vision *vision, const float *pixels, size_t width, size_t height, float *out) {
    if (!vision || !pixels || !out || !vision->weights) return KVC_E_NULL_POINTER;
    if (!kvc_vision_tokens(vision, width, height)) return KVC_E_LENGTH;
    vision_work work = {.gx = width / vision->patch_size, .gy = height / vision->patch_size};
    work.T = work.gx * work.gy;
    kvc_status status = reserve(vision, &work);
    if (status == KVC_OK) status = transpose_weights(vision);
    if (status == KVC_OK) status = round_kernels(vision);
    if (status == KVC_OK) status = make_gelu_tables(vision);
    if (status != KVC_OK) return status;
    embed_patches(vision, &work, pixels);
    add_positions(vision, &work);
    if (vision->design->block_order) to_block_order(vision, &work, work.at[S_X], work.at[S_XB]);
    kvc_profile_mark(KVC_PROFILE_EMBED);
    float *tmp = work.at[S_VECTOR];
    /* The outer norms where their weight is (build_vit). */
    if (vision->pre_ln_w.type)
        layernorm(work.T, vision->dim, work.at[S_X], &vision->pre_ln_w, &vision->pre_ln_b, vision->eps, tmp);
    for (size_t l = 0, k = 0; l < vision->layers; l++) {
        run_block(vision, &work, l);
        if (vision->blocks[l].ds_fc1.type) deepstack(vision, &work, &vision->blocks[l], k++);
    }
    if (vision->post_ln_w.type)
        layernorm(work.T, vision->dim, work.at[S_X], &vision->post_ln_w, &vision->post_ln_b, vision->eps, tmp);
    kvc_profile_mark(KVC_PROFILE_NORM);
    run_steps(vision, &work, out);
    return KVC_OK;
}
