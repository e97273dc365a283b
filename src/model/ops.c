/*
 * ops.c -- the element-wise arithmetic of a transformer block, on f32 rows:
 * RMSNorm and LayerNorm, RoPE, SwiGLU, GeGLU and GELU, the residual add and the logits' soft cap.  Each costs O(dim) per token
 * against the O(dim^2) of the products around it, so they are plain C
 * (llama.cpp's choices where they matter to agree with it: the RMS summed
 * in double, RoPE's angles from powf, GELU from its table of f16) -- but
 * SwiGLU, whose exponential per value took 6% of a prompt's time: it is a
 * kernel (swiglu_f32).
 */
#include <math.h>

#include "../kernels/kernels.h"
#include "../kernels/weights-scalar.h"
#include "model.h"

void kvc_layernorm(size_t n, const float *x, const float *weight, const float *bias, float eps, float *out) {
    /* ggml_norm's steps: the mean and the variance about it summed in double. */
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) sum += (double)x[i];
    const float mean = (float)(sum / (double)n);
    double squares = 0.0;
    for (size_t i = 0; i < n; i++) {
        const float centred = x[i] - mean;
        out[i] = centred;
        squares += (double)(centred * centred);
    }
    const float scale = 1.0f / sqrtf((float)(squares / (double)n) + eps);
    for (size_t i = 0; i < n; i++) out[i] = out[i] * scale * weight[i] + bias[i];
}

void kvc_rmsnorm(size_t n, const float *x, const float *weight, float eps, float *out) {
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) sum += (double)x[i] * (double)x[i];
    const float mean = (float)(sum / (double)n);
    const float scale = 1.0f / sqrtf(mean + eps);
    if (!weight) {
        for (size_t i = 0; i < n; i++) out[i] = x[i] * scale;
        return;
    }
    for (size_t i = 0; i < n; i++) out[i] = (x[i] * scale) * weight[i];
}

/* ggml's rope_yarn_ramp: 1 for the pairs before low, 0 past high. */
static float yarn_ramp(float low, float high, size_t pair) {
    const float y = ((float)pair - low) / fmaxf(0.001f, high - low);
    return 1.0f - fminf(1.0f, fmaxf(0.0f, y));
}

/* The coordinate of a multimodal position pair i turns by (ggml's IMROPE). */
static uint32_t coordinate_of(const uint32_t *sections, size_t i) {
    const size_t sector = i % (sections[0] + sections[1] + sections[2] + sections[3]);
    if (sector % 3 == 1 && sector < 3 * sections[1]) return 1;
    if (sector % 3 == 2 && sector < 3 * sections[2]) return 2;
    if (sector % 3 == 0 && sector < 3 * sections[0]) return 0;
    return 3;
}

void kvc_rope_table(const kvc_rope_params *rope, size_t position, float *table) {
    const uint32_t at[4] = {(uint32_t)position, (uint32_t)position, (uint32_t)position, 0};
    kvc_rope_table_at(rope, at, table);
}

void kvc_rope_table_at(const kvc_rope_params *rope, const uint32_t position[4], float *table) {
    const size_t half = rope->dims / 2;
    const int sectioned = rope->sections[0] + rope->sections[1] + rope->sections[2] + rope->sections[3] != 0;
    float scale = rope->scale;
    if (rope->ext_factor != 0.0f) scale *= 1.0f + 0.1f * logf(1.0f / rope->freq_scale);
    for (size_t i = 0; i < half; i++) {
        const uint32_t p = position[sectioned ? coordinate_of(rope->sections, i) : 0];
        float extrapolated = (float)p * powf(rope->base, -2.0f * (float)i / (float)rope->dims);
        if (rope->factors) extrapolated /= rope->factors[i];
        const float interpolated = rope->freq_scale * extrapolated;
        float theta = interpolated;
        if (rope->ext_factor != 0.0f) {
            const float mix = yarn_ramp(rope->corr_low, rope->corr_high, i) * rope->ext_factor;
            theta = interpolated * (1.0f - mix) + extrapolated * mix;
        }
        table[i] = cosf(theta) * scale;
        table[half + i] = sinf(theta) * scale;
    }
}

void kvc_rope_apply(size_t heads, size_t head_dim, size_t rope_dims, kvc_rope_pairing pairing, const float *table,
                    float *x) {
    const size_t half = rope_dims / 2;
    const float *c = table;
    const float *s = table + half;
    for (size_t h = 0; h < heads; h++) {
        float *head = x + h * head_dim;
        for (size_t i = 0; i < half; i++) {
            /* ADJACENT rotates (2i, 2i + 1); HALVES (i, i + half), both
             * within the first rope_dims channels (ggml's partial RoPE). */
            float *a = pairing == KVC_ROPE_ADJACENT ? &head[2 * i] : &head[i];
            float *b = pairing == KVC_ROPE_ADJACENT ? &head[2 * i + 1] : &head[i + half];
            const float x0 = *a;
            const float x1 = *b;
            *a = x0 * c[i] - x1 * s[i];
            *b = x0 * s[i] + x1 * c[i];
        }
    }
}

void kvc_swiglu(size_t n, float *gate, const float *up) {
    kvc_kernels_active()->swiglu_f32(n, gate, up);
}

/* GELU's tanh form, x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as
 * ggml_gelu_f32 computes it, rounded to f16: the entry of ggml's table. */
static float gelu_entry(float h) {
    const float sqrt_2_over_pi = 0.79788456080286535587989211986876f;
    return kvc_f16_round(0.5f * h * (1.0f + tanhf(sqrt_2_over_pi * h * (1.0f + 0.044715f * h * h))));
}

void kvc_gelu_table_fill(float *table) {
    for (uint32_t h = 0; h < KVC_GELU_TABLE; h++) table[h] = gelu_entry(kvc_f16_to_f32((uint16_t)h));
}

/* ggml_vec_gelu_f32's branches: 0 at -10 and below, x at 10 and above. */
static inline float gelu_of(const float *table, float x) {
    return x <= -10.0f ? 0.0f : x >= 10.0f ? x : table[kvc_f32_to_f16(x)];
}

void kvc_geglu(const float *table, size_t n, float *gate, const float *up) {
    for (size_t i = 0; i < n; i++) gate[i] = gelu_of(table, gate[i]) * up[i];
}

void kvc_gelu(const float *table, size_t n, float *x) {
    for (size_t i = 0; i < n; i++) x[i] = gelu_of(table, x[i]);
}

void kvc_relu_squared(size_t n, float *x) {
    for (size_t i = 0; i < n; i++) {
        const float r = x[i] > 0.0f ? x[i] : 0.0f;
        x[i] = r * r;
    }
}

void kvc_add(size_t n, float *x, const float *y) {
    for (size_t i = 0; i < n; i++) x[i] += y[i];
}

void kvc_softcap(size_t n, float *x, float cap) {
    /* ggml's three steps: a scale by 1 / cap, tanh, a scale by cap. */
    const float inverse = 1.0f / cap;
    for (size_t i = 0; i < n; i++) x[i] = tanhf(x[i] * inverse) * cap;
}
