/*
 * test_weights.c -- the weight kernels (src/kernels/weights.h): the traits
 * table; every dequantize against a plain definition of its block layout
 * written here; the activation quantizers against theirs and against each
 * other; every gemm set against the scalar one and the scalar one against
 * the dot of what it reads; the (row, token) identity that threads and
 * speculative verification rely on; and what the activation coding costs in
 * accuracy beside what the weights' own quantization costs.
 *
 * Natively only the scalar set exists: comparisons with the SIMD sets say
 * so (test_skip).  The wasm build checks its SIMD128 set, the relaxed build
 * (run under Node 22) its relaxed set too.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/weights.h"
#include "test.h"

#define TYPE_COUNT 15
#define MAX_N 2048

/* ---- plain definitions: halves, and the block layouts of ggml-common.h ---- */

static float plain_f16(uint16_t h) {
    const int sign = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v;
    if (e == 0) v = ldexp(m, -24);
    else if (e == 31) v = m ? NAN : INFINITY;
    else v = ldexp(1024 + m, e - 25);
    return (float)(sign ? -v : v);
}

static float plain_bf16(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static uint16_t u16_at(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static void put_u16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8); }
static float f16_at(const uint8_t *p) { return plain_f16(u16_at(p)); }

/* f32 to the nearest half, ties to even (the test's quantizers). */
static uint16_t f16_of(float f) {
    const uint16_t sign = signbit(f) ? 0x8000 : 0;
    const float a = fabsf(f);
    if (a != a) return sign | 0x7e00;
    if (a >= 65520.0f) return sign | 0x7c00;
    if (a < 0x1p-14f) return sign | (uint16_t)rintf(a * 0x1p24f);
    int e;
    frexpf(a, &e);
    float m = rintf(ldexpf(a, 11 - e));
    int exponent = e - 1 + 15;
    if (m == 2048.0f) m = 1024.0f, exponent++;
    if (exponent >= 31) return sign | 0x7c00;
    return (uint16_t)(sign | (exponent << 10) | ((int)m - 1024));
}

static uint16_t bf16_of(float f) {
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    return (uint16_t)((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}

/* ggml's get_scale_min_k4. */
static void plain_scale_min_k4(int j, const uint8_t *q, int *d, int *m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4);
    }
}

/* ggml's kvalues_iq4nl. */
static const int8_t plain_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

/* One block (or, for the float types, one value) of a type, dequantized as
 * ggml's dequantize_row_* computes it. */
static void plain_block(uint32_t id, const uint8_t *x, float *y) {
    switch (id) {
    case 0: memcpy(y, x, 4); break;
    case 1: y[0] = f16_at(x); break;
    case 30: y[0] = plain_bf16(u16_at(x)); break;
    case 8: {
        const float d = f16_at(x);
        for (int j = 0; j < 32; j++) y[j] = (int8_t)x[2 + j] * d;
        break;
    }
    case 2: {
        const float d = f16_at(x);
        for (int j = 0; j < 16; j++) {
            y[j] = ((x[2 + j] & 0x0F) - 8) * d;
            y[j + 16] = ((x[2 + j] >> 4) - 8) * d;
        }
        break;
    }
    case 3: {
        const float d = f16_at(x), m = f16_at(x + 2);
        for (int j = 0; j < 16; j++) {
            y[j] = (x[4 + j] & 0x0F) * d + m;
            y[j + 16] = (x[4 + j] >> 4) * d + m;
        }
        break;
    }
    case 6: case 7: {
        const int one = id == 7;
        const float d = f16_at(x), m = one ? f16_at(x + 2) : 0.0f;
        const uint8_t *qh_bytes = x + (one ? 4 : 2), *qs = x + (one ? 8 : 6);
        const uint32_t qh = (uint32_t)qh_bytes[0] | ((uint32_t)qh_bytes[1] << 8) |
                            ((uint32_t)qh_bytes[2] << 16) | ((uint32_t)qh_bytes[3] << 24);
        for (int j = 0; j < 16; j++) {
            const int xh_0 = ((qh >> j) << 4) & 0x10, xh_1 = (qh >> (j + 12)) & 0x10;
            const int x0 = (qs[j] & 0x0F) | xh_0, x1 = (qs[j] >> 4) | xh_1;
            y[j] = one ? x0 * d + m : (x0 - 16) * d;
            y[j + 16] = one ? x1 * d + m : (x1 - 16) * d;
        }
        break;
    }
    case 12: case 13: {
        const int five = id == 13;
        const float d = f16_at(x), min = f16_at(x + 2);
        const uint8_t *scales = x + 4, *qh = x + 16, *ql = x + (five ? 48 : 16);
        int is = 0, sc, m;
        uint8_t u1 = 1, u2 = 2;
        for (int j = 0; j < 256; j += 64) {
            plain_scale_min_k4(is + 0, scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            plain_scale_min_k4(is + 1, scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; l++) *y++ = d1 * ((ql[l] & 0xF) + (five && (qh[l] & u1) ? 16 : 0)) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * ((ql[l] >> 4) + (five && (qh[l] & u2) ? 16 : 0)) - m2;
            ql += 32, is += 2, u1 <<= 2, u2 <<= 2;
        }
        break;
    }
    case 14: {
        const float d = f16_at(x + 208);
        const uint8_t *ql = x, *qh = x + 128;
        const int8_t *sc = (const int8_t *)(x + 192);
        for (int n = 0; n < 256; n += 128) {
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int8_t q1 = (int8_t)((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int8_t q2 = (int8_t)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int8_t q3 = (int8_t)((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int8_t q4 = (int8_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l + 0] = d * sc[is + 0] * q1;
                y[l + 32] = d * sc[is + 2] * q2;
                y[l + 64] = d * sc[is + 4] * q3;
                y[l + 96] = d * sc[is + 6] * q4;
            }
            y += 128, ql += 64, qh += 32, sc += 8;
        }
        break;
    }
    case 20: {
        const float d = f16_at(x);
        for (int j = 0; j < 16; j++) {
            y[j] = d * plain_iq4nl[x[2 + j] & 0xf];
            y[j + 16] = d * plain_iq4nl[x[2 + j] >> 4];
        }
        break;
    }
    case 23: {
        const float d = f16_at(x);
        const uint16_t scales_h = u16_at(x + 2);
        const uint8_t *scales_l = x + 4, *qs = x + 8;
        for (int ib = 0; ib < 8; ib++) {
            const int ls = ((scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((scales_h >> 2 * ib) & 3) << 4);
            const float dl = d * (ls - 32);
            for (int j = 0; j < 16; j++) {
                y[j] = dl * plain_iq4nl[qs[j] & 0xf];
                y[j + 16] = dl * plain_iq4nl[qs[j] >> 4];
            }
            y += 32, qs += 16;
        }
        break;
    }
    case 10: { /* block_q2_K: scales[16], qs[64], d, dmin */
        const float d = f16_at(x + 80), min = f16_at(x + 82);
        const uint8_t *q = x + 16;
        int is = 0;
        for (int n = 0; n < 256; n += 128) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int half = 0; half < 2; half++) {
                    const uint8_t sc = x[is++];
                    const float dl = d * (sc & 0xF), ml = min * (sc >> 4);
                    for (int l = 0; l < 16; l++) *y++ = dl * ((int8_t)((q[l + 16 * half] >> shift) & 3)) - ml;
                }
            }
            q += 32;
        }
        break;
    }
    case 11: { /* block_q3_K: hmask[32], qs[64], scales[12], d */
        const float d_all = f16_at(x + 108);
        const uint8_t *q = x + 32, *hm = x, *packed = x + 96;
        int8_t scales[16];
        for (int j = 0; j < 16; j++) {
            const int low = j < 8 ? packed[j] & 0xF : packed[j - 8] >> 4;
            scales[j] = (int8_t)(low | (((packed[8 + j % 4] >> (2 * (j / 4))) & 3) << 4));
        }
        int is = 0;
        uint8_t m = 1;
        for (int n = 0; n < 256; n += 128) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int half = 0; half < 2; half++) {
                    const float dl = d_all * (scales[is++] - 32);
                    for (int l = 16 * half; l < 16 * half + 16; l++)
                        *y++ = dl * ((int8_t)((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
                }
                m <<= 1;
            }
            q += 32;
        }
        break;
    }
    }
}

static void plain_row(const kvc_weight_type *type, const uint8_t *row, size_t n, float *out) {
    for (size_t b = 0; b < n / type->block_values; b++) {
        plain_block(type->ggml_id, row + b * type->block_bytes, out + b * type->block_values);
    }
}

/* ---- the types' facts (ggml-common.h, ggml.h) ---- */

typedef struct type_fact {
    uint32_t id;
    const char *name;
    uint32_t values, bytes;
    kvc_act_kind act;
    int d_at, m_at; /* byte of the f16 scale and of the f16 min / dmin (-1: none) */
} type_fact;

static const type_fact facts[TYPE_COUNT] = {
    {0, "F32", 1, 4, KVC_ACT_F32, -1, -1},       {1, "F16", 1, 2, KVC_ACT_F32, -1, -1},
    {30, "BF16", 1, 2, KVC_ACT_F32, -1, -1},     {8, "Q8_0", 32, 34, KVC_ACT_Q8_32, 0, -1},
    {2, "Q4_0", 32, 18, KVC_ACT_Q8_32, 0, -1},   {3, "Q4_1", 32, 20, KVC_ACT_Q8_32, 0, 2},
    {6, "Q5_0", 32, 22, KVC_ACT_Q8_32, 0, -1},   {7, "Q5_1", 32, 24, KVC_ACT_Q8_32, 0, 2},
    {12, "Q4_K", 256, 144, KVC_ACT_Q8_256, 0, 2}, {13, "Q5_K", 256, 176, KVC_ACT_Q8_256, 0, 2},
    {14, "Q6_K", 256, 210, KVC_ACT_Q8_256, 208, -1},
    {10, "Q2_K", 256, 84, KVC_ACT_Q8_256, 80, 82},
    {11, "Q3_K", 256, 110, KVC_ACT_Q8_256, 108, -1},
    {20, "IQ4_NL", 32, 18, KVC_ACT_Q8_32, 0, -1},
    {23, "IQ4_XS", 256, 136, KVC_ACT_Q8_256, 0, -1},
};

static const type_fact *fact_of(uint32_t id) {
    for (size_t i = 0; i < TYPE_COUNT; i++) {
        if (facts[i].id == id) return &facts[i];
    }
    return NULL;
}

static int is_float_type(const kvc_weight_type *type) { return type->act == KVC_ACT_F32; }

/* ---- the sets ---- */

/* The sets this build has beyond scalar, in order; 0 natively (after saying so). */
static size_t simd_sets(kvc_weight_set sets[2]) {
    size_t count = 0;
    (void)sets;
#if defined(KVC_WITH_WASMSIMD)
    sets[count++] = KVC_WEIGHT_WASMSIMD;
#endif
#if defined(KVC_WITH_WASMRELAXED)
    sets[count++] = KVC_WEIGHT_WASMRELAXED;
#else
    test_skip("not a relaxed-SIMD build: the relaxed kernels are checked in build-relaxed (Node 22)");
#endif
#if !defined(KVC_WITH_WASMSIMD)
    test_skip("native build: the scalar set only, no SIMD set to compare with");
#endif
    return count;
}

/* Whether set s must give the scalar bits for this type (weights.h). */
static int exact_against_scalar(const kvc_weight_type *type, kvc_weight_set set) {
    return !is_float_type(type) || set != KVC_WEIGHT_WASMRELAXED;
}

/* ---- random weights ---- */

enum block_kind { BLOCK_RANDOM, BLOCK_ZERO_SCALE, BLOCK_MAX_CODES, BLOCK_MIN_CODES, BLOCK_NEGATIVE_MIN,
                  BLOCK_SUBNORMAL_SCALE, BLOCK_KINDS };

static float sane_scale(test_rng *rng) {
    return ldexpf(0.5f + test_rng_unit(rng), -(int)(test_rng_u32(rng) % 7) - 4);
}

static float signed_unit(test_rng *rng) { return test_rng_u32(rng) & 1 ? 1.0f : -1.0f; }

/* A valid block of a quantized type: random codes and sane f16 scales, or
 * one of the edge kinds. */
static void random_block(const type_fact *fact, test_rng *rng, int kind, uint8_t *block) {
    for (uint32_t i = 0; i < fact->bytes; i++) block[i] = (uint8_t)test_rng_u32(rng);
    if (kind == BLOCK_MAX_CODES || kind == BLOCK_MIN_CODES) {
        /* Every code byte at its largest (nibbles and high bits all ones; Q8_0
         * 127) or smallest (all zeros; Q8_0 -128); sub-block scales stay random. */
        const uint8_t code = kind == BLOCK_MAX_CODES ? (fact->id == 8 ? 0x7f : 0xff) : (fact->id == 8 ? 0x80 : 0x00);
        const int first = fact->id == 14 || fact->id == 11 ? 0 : fact->id == 12 || fact->id == 13 || fact->id == 10 ? 16
                          : fact->id == 23 ? 8 : fact->m_at >= 0 ? 4 : 2;
        const int last = fact->id == 14 ? 192 : fact->id == 10 ? 80 : fact->id == 11 ? 96 : (int)fact->bytes;
        for (int i = first; i < last; i++) block[i] = code;
    }
    float d = signed_unit(rng) * sane_scale(rng), m = signed_unit(rng) * sane_scale(rng);
    if (fact->id == 12 || fact->id == 13 || fact->id == 10) d = fabsf(d), m = fabsf(m); /* ggml writes them >= 0 */
    if (kind == BLOCK_ZERO_SCALE) d = 0.0f, m = test_rng_u32(rng) & 1 ? 0.0f : m;
    if (kind == BLOCK_NEGATIVE_MIN) m = -fabsf(m);
    put_u16(block + fact->d_at, kind == BLOCK_SUBNORMAL_SCALE ? (uint16_t)(1 + test_rng_u32(rng) % 1023) : f16_of(d));
    if (fact->m_at >= 0) put_u16(block + fact->m_at, f16_of(m));
}

/* A float type's weight: normal values over a wide range, a few zeros and
 * subnormal halves. */
static void random_float_weight(const type_fact *fact, test_rng *rng, uint8_t *p) {
    float v = ldexpf(test_rng_normal(rng), (int)(test_rng_u32(rng) % 12) - 8);
    const uint32_t pick = test_rng_u32(rng) % 16;
    if (pick == 0) v = 0.0f;
    if (fact->id == 0) memcpy(p, &v, 4);
    else if (fact->id == 30) put_u16(p, bf16_of(v));
    else put_u16(p, pick == 1 ? (uint16_t)(test_rng_u32(rng) % 1024) : f16_of(v));
}

/* rows x n weights; edges: the share of edge blocks (0: none, 2: one in two). */
static uint8_t *random_matrix(const kvc_weight_type *type, size_t n, size_t rows, test_rng *rng, int edges) {
    const type_fact *fact = fact_of(type->ggml_id);
    const size_t nb = n / type->block_values, row_bytes = nb * type->block_bytes;
    uint8_t *w = test_alloc(rows * row_bytes + 1);
    for (size_t r = 0; r < rows; r++) {
        for (size_t b = 0; b < nb; b++) {
            uint8_t *block = w + r * row_bytes + b * type->block_bytes;
            if (is_float_type(type)) {
                random_float_weight(fact, rng, block);
            } else {
                const int kind = edges && test_rng_u32(rng) % (unsigned)edges == 0
                                     ? 1 + (int)(test_rng_u32(rng) % (BLOCK_KINDS - 1))
                                     : BLOCK_RANDOM;
                random_block(fact, rng, kind, block);
            }
        }
    }
    return w;
}

/* T activation rows of n values: normal, with outlier values, and in row 1
 * (when n >= 64) a zero block of 32. */
static float *random_activations(size_t n, size_t T, test_rng *rng) {
    float *x = test_alloc(n * T * sizeof(float));
    for (size_t i = 0; i < n * T; i++) {
        x[i] = test_rng_normal(rng);
        if (test_rng_u32(rng) % 61 == 0) x[i] *= 20.0f;
    }
    if (T > 1 && n >= 64) memset(x + n + 32, 0, 32 * sizeof(float));
    return x;
}

static size_t act_row_bytes(const kvc_weight_type *type, size_t n) {
    const kvc_act_encoding *e = kvc_act_encoding_of(type->act);
    return n / e->block_values * e->block_bytes;
}

/* The activations coded for type with set s's quantizer. */
static uint8_t *coded_activations(const kvc_weight_type *type, kvc_weight_set set, const float *x,
                                  size_t n, size_t T) {
    const size_t stride = act_row_bytes(type, n);
    uint8_t *xa = test_alloc(T * stride + 1);
    for (size_t t = 0; t < T; t++) kvc_act_encoding_of(type->act)->quantize[set](n, x + t * n, xa + t * stride);
    return xa;
}

/* What a coded activation row stands for: d_b * code (f32: itself). */
static void decoded_activations(const kvc_weight_type *type, const uint8_t *xa, size_t n, double *out) {
    const kvc_act_encoding *e = kvc_act_encoding_of(type->act);
    for (size_t i = 0; i < n; i++) {
        if (type->act == KVC_ACT_F32) {
            float v;
            memcpy(&v, xa + 4 * i, 4);
            out[i] = v;
        } else {
            float d;
            memcpy(&d, xa + KVC_ACT_Q8_SCALES_AT(n) + 4 * (i / e->block_values), 4);
            out[i] = (double)d * (int8_t)xa[i];
        }
    }
}

static size_t values_of(const kvc_weight_type *type, size_t blocks) {
    /* float types: "blocks" of 32 values, so that the sizes cross the kernels' steps of 8 */
    return is_float_type(type) ? blocks * 32 + (blocks == 3 ? 5 : 0) : blocks * type->block_values;
}

/* ---- the traits table ---- */

TEST(traits_should_give_each_type_its_ggml_layout_and_refuse_the_rest) {
    size_t count;
    const kvc_weight_type *types = kvc_weight_types(&count);
    CHECK(count == TYPE_COUNT);
    for (size_t i = 0; i < TYPE_COUNT; i++) {
        const type_fact *fact = &facts[i];
        const kvc_weight_type *type = kvc_weight_type_of(fact->id);
        CHECK(type == &types[i]);
        CHECK(type->ggml_id == fact->id && strcmp(type->name, fact->name) == 0);
        CHECK(type->block_values == fact->values && type->block_bytes == fact->bytes);
        CHECK(type->act == fact->act && type->dequantize != NULL);
        CHECK(strcmp(kvc_ggml_type_name(fact->id), fact->name) == 0);
        /* every set up to the one this build runs */
        for (int s = 0; s <= (int)kvc_weight_set_active(); s++) CHECK(type->gemm[s] != NULL);
        for (int s = (int)kvc_weight_set_active() + 1; s < KVC_WEIGHT_SETS; s++) CHECK(type->gemm[s] == NULL);
    }
    const uint32_t unsupported[] = {4, 5, 9, 15, 16, 21, 22, 24, 28, 29, 31, 34, 39, 42, 43, 1000, 0xffffffffu};
    for (size_t i = 0; i < sizeof unsupported / sizeof unsupported[0]; i++) {
        CHECK(kvc_weight_type_of(unsupported[i]) == NULL);
    }
    CHECK(strcmp(kvc_ggml_type_name(10), "Q2_K") == 0 && strcmp(kvc_ggml_type_name(23), "IQ4_XS") == 0);
    CHECK(kvc_ggml_type_name(4) == NULL && kvc_ggml_type_name(43) == NULL);

    const char *all = "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, Q2_K, Q3_K"
                      ", IQ4_NL, IQ4_XS";
    char list[128];
    CHECK(kvc_weight_type_list(list, sizeof list) == strlen(all) && strcmp(list, all) == 0);
    char short_list[9];
    memset(short_list, 'x', sizeof short_list);
    CHECK(kvc_weight_type_list(short_list, sizeof short_list) == strlen(all));
    CHECK(strcmp(short_list, "F32, F16") == 0);
    CHECK(kvc_weight_type_list(NULL, 0) == strlen(all));

    /* f32; i8 and i16 codes, an f32 scale, i16 sums of 16 (and q8x32's f32 value sum) */
    const uint32_t act_values[KVC_ACT_KINDS] = {1, 32, 256}, act_bytes[KVC_ACT_KINDS] = {4, 108, 804};
    for (int k = 0; k < KVC_ACT_KINDS; k++) {
        const kvc_act_encoding *e = kvc_act_encoding_of((kvc_act_kind)k);
        CHECK(e->kind == (kvc_act_kind)k && e->block_values == act_values[k] && e->block_bytes == act_bytes[k]);
        for (int s = 0; s <= (int)kvc_weight_set_active(); s++) CHECK(e->quantize[s] != NULL);
    }
    CHECK(kvc_act_encoding_of(KVC_ACT_KINDS) == NULL);
#if defined(KVC_WITH_WASMRELAXED)
    CHECK(kvc_weight_set_active() == KVC_WEIGHT_WASMRELAXED);
#elif defined(KVC_WITH_WASMSIMD)
    CHECK(kvc_weight_set_active() == KVC_WEIGHT_WASMSIMD);
#else
    CHECK(kvc_weight_set_active() == KVC_WEIGHT_SCALAR);
#endif
    CHECK(strcmp(kvc_weight_set_name(kvc_weight_set_active()),
                 kvc_weight_set_active() == KVC_WEIGHT_SCALAR ? "scalar"
                 : kvc_weight_set_active() == KVC_WEIGHT_WASMSIMD ? "wasm-simd128" : "wasm-relaxed-simd") == 0);
}

/* ---- dequantize ---- */

static int same_value(float a, float b) {
    return (a != a && b != b) || memcmp(&a, &b, sizeof a) == 0;
}

TEST(f16_and_bf16_should_read_every_half_exactly) {
    const kvc_weight_type *f16 = kvc_weight_type_of(1), *bf16 = kvc_weight_type_of(30);
    uint8_t *row = test_alloc(2 * 65536);
    float *out = test_alloc(65536 * sizeof(float));
    for (uint32_t h = 0; h < 65536; h++) put_u16(row + 2 * h, (uint16_t)h);
    f16->dequantize(row, 0, 65536, out);
    for (uint32_t h = 0; h < 65536; h++) {
        CHECK(same_value(out[h], plain_f16((uint16_t)h)));
        if (out[h] != out[h]) {
            /* a NaN keeps its sign and payload under the all-ones exponent */
            uint32_t bits;
            memcpy(&bits, &out[h], 4);
            CHECK(bits == (((h & 0x8000u) << 16) | 0x7f800000u | ((h & 0x3ffu) << 13)));
        }
    }
    bf16->dequantize(row, 0, 65536, out);
    for (uint32_t h = 0; h < 65536; h++) CHECK(same_value(out[h], plain_bf16((uint16_t)h)));
    free(row), free(out);
}

TEST(dequantize_should_give_the_values_of_the_block_layout) {
    test_rng rng = test_rng_new(11);
    for (size_t i = 0; i < TYPE_COUNT; i++) {
        const kvc_weight_type *type = kvc_weight_type_of(facts[i].id);
        const size_t n = is_float_type(type) ? 77 : 3 * type->block_values;
        uint8_t *w = random_matrix(type, n, 8, &rng, 2);
        const size_t row_bytes = n / type->block_values * type->block_bytes;
        float want[768], got[768];
        for (size_t r = 0; r < 8; r++) {
            plain_row(type, w + r * row_bytes, n, want);
            type->dequantize(w + r * row_bytes, 0, n, got);
            for (size_t j = 0; j < n; j++) CHECK(same_value(got[j], want[j]));
            /* ranges within and across blocks */
            const size_t ranges[][2] = {{0, 1}, {1, n - 2}, {n - 1, 1}, {n / 3, n / 3 + 1}, {5, 0}};
            for (size_t k = 0; k < sizeof ranges / sizeof ranges[0]; k++) {
                memset(got, 0xff, sizeof got);
                type->dequantize(w + r * row_bytes, ranges[k][0], ranges[k][1], got);
                for (size_t j = 0; j < ranges[k][1]; j++) CHECK(same_value(got[j], want[ranges[k][0] + j]));
                CHECK(ranges[k][1] == n || got[ranges[k][1]] != got[ranges[k][1]]); /* nothing past count */
            }
        }
        free(w);
    }
}

/* The float gemms' own reads of every half: row h holds half h then seven
 * zeros, against ones, so y[h] is the weight itself (+0 for -0: the sum
 * starts at +0), through each set's 8-wide loads. */
TEST(f16_and_bf16_gemms_should_read_every_half_exactly_in_every_set) {
    kvc_weight_set sets[3] = {KVC_WEIGHT_SCALAR};
    const size_t count = 1 + simd_sets(sets + 1);
    const uint32_t ids[2] = {1, 30};
    uint8_t *w = test_alloc(65536 * 16);
    float *y = test_alloc(65536 * sizeof(float)), ones[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    for (size_t k = 0; k < 2; k++) {
        const kvc_weight_type *type = kvc_weight_type_of(ids[k]);
        memset(w, 0, 65536 * 16);
        for (uint32_t h = 0; h < 65536; h++) put_u16(w + 16 * h, (uint16_t)h);
        for (size_t s = 0; s < count; s++) {
            type->gemm[sets[s]](8, 65536, 1, w, 16, (const uint8_t *)ones, 32, y, 65536);
            for (uint32_t h = 0; h < 65536; h++) {
                const float want = ids[k] == 1 ? plain_f16((uint16_t)h) : plain_bf16((uint16_t)h);
                CHECK(same_value(y[h], want + 0.0f)); /* + 0: -0 as the sum gives it */
            }
        }
    }
    free(w), free(y);
}

/* ---- activation quantizers ---- */

/* The encodings' definitions (weights.h), written plainly: ggml's
 * quantize_row_q8_0_ref and q8_1_ref (B = 32) and q8_K_ref (B = 256, m by
 * max and min), with ours for a NaN x (its block's d NaN, stored as
 * 0x7fc00000), and our layout. */
static float quiet_nan(void) {
    const uint32_t bits = 0x7fc00000u;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static float f16_rounded(float v) { return v != v ? quiet_nan() : plain_f16(f16_of(v)); }

static void put_f32(uint8_t *p, float v) { memcpy(p, &v, sizeof v); }

static int clamped_code(float r) { return r != r ? 0 : r > 127 ? 127 : r < -127 ? -127 : (int)r; }

static void plain_quantize(size_t B, size_t n, const float *x, uint8_t *xa) {
    for (size_t b = 0; b < n / B; b++) {
        const float *v = x + B * b;
        int nan = 0, code[256], sum = 0;
        float amax = 0.0f, max = 0.0f, min = 0.0f, d;
        for (size_t i = 0; i < B; i++) {
            nan |= v[i] != v[i];
            amax = fmaxf(amax, fabsf(v[i])), max = fmaxf(max, v[i]), min = fminf(min, v[i]);
        }
        if (B == 32) {
            d = nan ? NAN : amax / 127.0f;
            const float id = d != 0.0f ? 1.0f / d : 0.0f;
            for (size_t i = 0; i < B; i++) code[i] = clamped_code(roundf(v[i] * id));
        } else {
            const float m = nan ? NAN : -min > max ? min : max, iscale = m != 0.0f ? -127.0f / m : 0.0f;
            for (size_t i = 0; i < B; i++) code[i] = clamped_code(nearbyintf(v[i] * iscale));
            d = m != 0.0f ? 1.0f / iscale : 0.0f;
        }
        for (size_t i = 0; i < B; i++) {
            xa[B * b + i] = (uint8_t)(int8_t)code[i];
            put_u16(xa + n + 2 * (B * b + i), (uint16_t)(int16_t)code[i]);
            sum += code[i];
        }
        if (B == 32) {
            put_f32(xa + 3 * n + 4 * b, f16_rounded(d));
            put_f32(xa + 3 * n + 4 * (n / 32) + 2 * (n / 16) + 4 * b, f16_rounded(d * (float)sum));
        } else {
            put_f32(xa + 3 * n + 4 * b, d != d ? quiet_nan() : d);
        }
    }
    for (size_t g = 0; g < n / 16; g++) {
        int sum = 0;
        for (size_t i = 16 * g; i < 16 * g + 16; i++) sum += (int8_t)xa[i];
        put_u16(xa + 3 * n + 4 * (n / B) + 2 * g, (uint16_t)(int16_t)sum);
    }
}

/* A block of 32 whose d = amax / 127 falls on, or an f32 step or two
 * beside, the midpoint of two halves: normal and subnormal ones, 65504's
 * (65520, where d turns infinite), the largest subnormal's. */
static void fill_f16_boundary_block(test_rng *rng, float *x) {
    const uint32_t pick = test_rng_u32(rng) % 8;
    const uint16_t h = pick == 0 ? 0x7bff : pick == 1 ? 0x03ff : (uint16_t)(test_rng_u32(rng) % 0x7bff);
    const float next = h == 0x7bff ? 65536.0f : plain_f16((uint16_t)(h + 1));
    const float midpoint = (plain_f16(h) + next) / 2.0f; /* exact: 12 bits */
    float amax = midpoint * 127.0f;
    for (int step = (int)(test_rng_u32(rng) % 5) - 2; step != 0; step += step < 0 ? 1 : -1) {
        amax = nextafterf(amax, step < 0 ? 0.0f : INFINITY);
    }
    for (size_t i = 0; i < 32; i++) x[i] = amax * fminf(fmaxf(test_rng_normal(rng) / 3.0f, -1.0f), 1.0f);
    x[test_rng_u32(rng) % 32] = test_rng_u32(rng) & 1 ? amax : -amax;
}

/* Rows that stress the quantizers: normal, outliers, ties (x * id or
 * x * iscale = k + 1/2, +-127 in every block: a tie of max and -min for
 * q8x256), a wide range of magnitudes, tiny blocks (a subnormal d and an
 * infinite id or iscale), blocks about where 1 / d overflows, a zero block,
 * f16 rounding boundaries of d, NaN and infinite blocks. */
#define ACTIVATION_CASES 9
static void fill_activation_case(test_rng *rng, int which, size_t n, float *x) {
    for (size_t i = 0; i < n; i++) {
        const float g = test_rng_normal(rng);
        switch (which) {
        case 0: x[i] = g; break;
        case 1: x[i] = (i % 37 == 5) ? 300.0f * g : g; break;
        case 2: x[i] = i % 32 == 0 ? ((i / 32) % 3 ? 127.0f : -127.0f) : (float)((int)(test_rng_u32(rng) % 253) - 127) + 0.5f; break;
        case 3: x[i] = ldexpf(g, (int)(test_rng_u32(rng) % 80) - 40); break;
        case 4: x[i] = ldexpf(g, -140); break;
        case 5: x[i] = i < 256 ? 0.0f : g; break;
        case 6: x[i] = ldexpf(g, -116 - (int)((i / 32) % 12)); break;
        case 7: if (i % 32 == 0) fill_f16_boundary_block(rng, x + i); break;
        default: /* NaN in some blocks of 32 (of even blocks of 256), +-Inf in others */
            x[i] = (i / 32) % 5 == 1 && (i / 256) % 2 == 0 && i % 7 == 3 ? NAN
                   : (i / 32) % 5 == 3 && i % 11 == 4 ? (g < 0 ? -INFINITY : INFINITY) : g;
            break;
        }
    }
}

TEST(act_quantizers_should_give_the_bytes_of_their_definition_in_every_set) {
    kvc_weight_set sets[2];
    const size_t simd = simd_sets(sets);
    test_rng rng = test_rng_new(21);
    const kvc_act_kind kinds[2] = {KVC_ACT_Q8_32, KVC_ACT_Q8_256};
    float x[MAX_N];
    uint8_t want[KVC_ACT_Q8_ROW_BYTES(MAX_N, 32)], got[KVC_ACT_Q8_ROW_BYTES(MAX_N, 32)];
    for (size_t k = 0; k < 2; k++) {
        const kvc_act_encoding *e = kvc_act_encoding_of(kinds[k]);
        const size_t B = e->block_values;
        for (int which = 0; which < ACTIVATION_CASES; which++) {
            for (size_t n = B; n <= MAX_N; n *= 4) {
                fill_activation_case(&rng, which, n, x);
                const size_t bytes = KVC_ACT_Q8_ROW_BYTES(n, B);
                CHECK(bytes == n / B * e->block_bytes);
                plain_quantize(B, n, x, want);
                e->quantize[KVC_WEIGHT_SCALAR](n, x, got);
                CHECK(memcmp(got, want, bytes) == 0);
                for (size_t s = 0; s < simd; s++) {
                    memset(got, 0x5a, bytes);
                    e->quantize[sets[s]](n, x, got);
                    CHECK(memcmp(got, want, bytes) == 0);
                }
            }
        }
    }
    /* At scale one (amax 127): q8x32 rounds half away from zero (2.5 -> 3,
     * -2.5 -> -3; 0.5 - 2^-25 -> 0), q8x256 half to even, its codes negated
     * (m = +127: iscale = -1, d = -1); in every set. */
    float ties[256] = {127.0f, 2.5f, 3.5f, -2.5f, -3.5f, 0.5f, -0.5f, 1.5f, 0x1.fffffep-2f, -0x1.fffffep-2f, 0x1.000002p-1f};
    const int8_t away[11] = {127, 3, 4, -3, -4, 1, -1, 2, 0, 0, 1}, even[11] = {-127, -2, -4, 2, 4, 0, 0, -2, 0, 0, -1};
    float unit[32] = {1.0f};
    for (size_t s = 0; s <= simd; s++) {
        const kvc_weight_set set = s == 0 ? KVC_WEIGHT_SCALAR : sets[s - 1];
        float d, value_sum;
        kvc_act_encoding_of(KVC_ACT_Q8_32)->quantize[set](32, ties, got);
        memcpy(&d, got + KVC_ACT_Q8_SCALES_AT(32), 4), memcpy(&value_sum, got + KVC_ACT_Q8_VALUE_SUMS_AT(32), 4);
        CHECK(memcmp(got, away, 11) == 0 && d == 1.0f && value_sum == 130.0f);
        kvc_act_encoding_of(KVC_ACT_Q8_256)->quantize[set](256, ties, got);
        memcpy(&d, got + KVC_ACT_Q8_SCALES_AT(256), 4);
        CHECK(memcmp(got, even, 11) == 0 && d == -1.0f);
        /* d = 1 / 127 to the half 0x1.02p-7; s = d * 127 to the half 1 */
        kvc_act_encoding_of(KVC_ACT_Q8_32)->quantize[set](32, unit, got);
        memcpy(&d, got + KVC_ACT_Q8_SCALES_AT(32), 4), memcpy(&value_sum, got + KVC_ACT_Q8_VALUE_SUMS_AT(32), 4);
        CHECK(got[0] == 127 && d == 0x1.02p-7f && value_sum == 1.0f);
    }
}

/* A NaN or an Inf in a block: a NaN or infinite d_b (q8x32: s_b NaN), zero
 * codes, and a NaN product (Q4_1, Q4_K), in every set. */
TEST(act_quantizers_should_make_nan_and_inf_blocks_poison_their_products) {
    kvc_weight_set sets[3] = {KVC_WEIGHT_SCALAR};
    const size_t count = 1 + simd_sets(sets + 1);
    test_rng rng = test_rng_new(23);
    const kvc_act_kind kinds[2] = {KVC_ACT_Q8_32, KVC_ACT_Q8_256};
    const uint32_t type_ids[2] = {3, 12};
    for (size_t k = 0; k < 2; k++) {
        const kvc_act_encoding *e = kvc_act_encoding_of(kinds[k]);
        const kvc_weight_type *type = kvc_weight_type_of(type_ids[k]);
        const size_t B = e->block_values;
        uint8_t *w = random_matrix(type, B, 1, &rng, 0);
        for (int special = 0; special < 3; special++) {
            float x[256];
            for (size_t i = 0; i < B; i++) x[i] = (float)(i % 64) - 20.0f;
            x[3] = special == 0 ? NAN : special == 1 ? INFINITY : -INFINITY;
            uint8_t xa[KVC_ACT_Q8_ROW_BYTES(256, 256)];
            for (size_t s = 0; s < count; s++) {
                e->quantize[sets[s]](B, x, xa);
                float d, value_sum, y;
                memcpy(&d, xa + KVC_ACT_Q8_SCALES_AT(B), 4);
                CHECK(special == 0 ? d != d : isinf(d));
                if (B == 32) {
                    memcpy(&value_sum, xa + KVC_ACT_Q8_VALUE_SUMS_AT(B), 4);
                    CHECK(value_sum != value_sum);
                }
                for (size_t i = 0; i < 3 * B; i++) CHECK(xa[i] == 0); /* x * NaN, x * 0 (id of an Inf d): code 0 */
                type->gemm[sets[s]](B, 1, 1, w, type->block_bytes, xa, e->block_bytes, &y, 1);
                CHECK(y != y);
            }
        }
        free(w);
    }
}

/* ---- gemm ---- */

/* 1 if y [T x rows] is the double dot of what the gemm reads (the weights
 * dequantized, the activations as their codes times their scales; for Q4_1
 * and Q5_1 each block's min m times the activations' s_b in place of m
 * times the sum of the block's coded values) to 1e-5 of sum |w a|: only the
 * f32 roundings of the block values and of their sum lie between. */
static int near_plain_dot(const kvc_weight_type *type, const uint8_t *w, size_t n, size_t rows,
                          const uint8_t *xa, size_t T, const float *y) {
    const size_t row_bytes = n / type->block_values * type->block_bytes, stride = act_row_bytes(type, n);
    const int value_sums = type->block_values == 32 && fact_of(type->ggml_id)->m_at >= 0;
    float wr[MAX_N];
    double a[MAX_N];
    for (size_t t = 0; t < T; t++) {
        decoded_activations(type, xa + t * stride, n, a);
        for (size_t r = 0; r < rows; r++) {
            type->dequantize(w + r * row_bytes, 0, n, wr);
            double dot = 0.0, size = 0.0;
            for (size_t j = 0; j < n; j++) dot += wr[j] * a[j], size += fabs(wr[j] * a[j]);
            for (size_t b = 0; value_sums && b < n / 32; b++) {
                const double m = f16_at(w + r * row_bytes + b * type->block_bytes + 2);
                float s;
                memcpy(&s, xa + t * stride + KVC_ACT_Q8_VALUE_SUMS_AT(n) + 4 * b, 4);
                double coded = 0.0;
                for (size_t j = 32 * b; j < 32 * b + 32; j++) coded += a[j];
                dot += m * (s - coded), size += fabs(m * s);
            }
            if (!(fabs(y[t * rows + r] - dot) <= 1e-5 * size + 1e-30)) {
                printf("  %s: y[%zu][%zu] = %.9g, the plain dot %.9g\n", type->name, t, r, y[t * rows + r], dot);
                return 0;
            }
        }
    }
    return 1;
}

TEST(scalar_gemm_should_be_the_dot_of_its_weights_and_coded_activations) {
    test_rng rng = test_rng_new(31);
    for (size_t i = 0; i < TYPE_COUNT; i++) {
        const kvc_weight_type *type = kvc_weight_type_of(facts[i].id);
        const size_t n = values_of(type, 8), rows = 5, T = 3;
        uint8_t *w = random_matrix(type, n, rows, &rng, 3);
        float *x = random_activations(n, T, &rng);
        uint8_t *xa = coded_activations(type, KVC_WEIGHT_SCALAR, x, n, T);
        float y[5 * 3];
        type->gemm[KVC_WEIGHT_SCALAR](n, rows, T, w, n / type->block_values * type->block_bytes, xa,
                                      act_row_bytes(type, n), y, rows);
        CHECK(near_plain_dot(type, w, n, rows, xa, T, y));
        free(w), free(x), free(xa);
    }
}

static int check_set_against_scalar(const kvc_weight_type *type, kvc_weight_set set, size_t n, size_t rows,
                                    size_t T, test_rng *rng) {
    uint8_t *w = random_matrix(type, n, rows, rng, 4);
    float *x = random_activations(n, T, rng);
    uint8_t *xa = coded_activations(type, KVC_WEIGHT_SCALAR, x, n, T);
    const size_t row_bytes = n / type->block_values * type->block_bytes, stride = act_row_bytes(type, n);
    float *want = test_alloc(rows * T * sizeof(float)), *got = test_alloc(rows * T * sizeof(float));
    type->gemm[KVC_WEIGHT_SCALAR](n, rows, T, w, row_bytes, xa, stride, want, rows);
    type->gemm[set](n, rows, T, w, row_bytes, xa, stride, got, rows);
    int ok = 1;
    for (size_t i = 0; i < rows * T && ok; i++) {
        if (exact_against_scalar(type, set)) {
            ok = memcmp(&got[i], &want[i], sizeof(float)) == 0;
        } else {
            /* relaxed_madd: a rounding fewer per product, n / 4 of them a lane */
            const size_t r = i % rows;
            float wr[MAX_N];
            double size = 0.0;
            type->dequantize(w + r * row_bytes, 0, n, wr);
            for (size_t j = 0; j < n; j++) size += fabs((double)wr[j] * x[(i / rows) * n + j]);
            ok = fabs((double)got[i] - want[i]) <= (double)(n / 4 + 2) * 0x1p-23 * size;
        }
        if (!ok) {
            printf("  %s %s n=%zu rows=%zu T=%zu: y[%zu] = %.9g, scalar %.9g\n", type->name,
                   kvc_weight_set_name(set), n, rows, T, i, got[i], want[i]);
        }
    }
    free(w), free(x), free(xa), free(want), free(got);
    return ok;
}

TEST(every_set_should_give_the_scalar_gemm_at_every_shape) {
    kvc_weight_set sets[2];
    const size_t simd = simd_sets(sets);
    test_rng rng = test_rng_new(41);
    const size_t blocks[] = {1, 2, 3, 8}, row_counts[] = {1, 3, 5, 17}, tokens[] = {1, 2, 3, 4, 5, 8};
    for (size_t s = 0; s < simd; s++) {
        for (size_t i = 0; i < TYPE_COUNT; i++) {
            const kvc_weight_type *type = kvc_weight_type_of(facts[i].id);
            for (size_t bi = 0; bi < 4; bi++)
                for (size_t ri = 0; ri < 4; ri++)
                    for (size_t ti = 0; ti < 6; ti++)
                        CHECK(check_set_against_scalar(type, sets[s], values_of(type, blocks[bi]), row_counts[ri],
                                                       tokens[ti], &rng));
        }
    }
}

/* In one set: y for (r, t) from the whole call against r alone, r in a
 * chunk of rows, t alone and t within a smaller batch, y at another stride. */
static int check_call_shapes(const kvc_weight_type *type, kvc_weight_set set, size_t n, test_rng *rng) {
    const size_t rows = 11, T = 7;
    uint8_t *w = random_matrix(type, n, rows, rng, 4);
    float *x = random_activations(n, T, rng);
    uint8_t *xa = coded_activations(type, set, x, n, T);
    const size_t row_bytes = n / type->block_values * type->block_bytes, stride = act_row_bytes(type, n);
    kvc_gemm_fn *gemm = type->gemm[set];
    float all[11 * 7], part[16 * 8];
    gemm(n, rows, T, w, row_bytes, xa, stride, all, rows);
    int ok = 1;
    for (size_t r = 0; r < rows; r++) {                  /* each row alone, every token */
        gemm(n, 1, T, w + r * row_bytes, row_bytes, xa, stride, part, 1);
        for (size_t t = 0; t < T; t++) ok &= memcmp(&part[t], &all[t * rows + r], 4) == 0;
    }
    const size_t cuts[] = {0, 2, 3, 8, 11};             /* row chunks, as a pool splits them */
    for (size_t c = 0; c + 1 < 5; c++) {
        const size_t first = cuts[c], count = cuts[c + 1] - cuts[c];
        gemm(n, count, T, w + first * row_bytes, row_bytes, xa, stride, part, 16);
        for (size_t t = 0; t < T; t++)
            for (size_t r = 0; r < count; r++) ok &= memcmp(&part[t * 16 + r], &all[t * rows + first + r], 4) == 0;
    }
    for (size_t t = 0; t < T; t++) {                     /* each token alone: a decode step */
        gemm(n, rows, 1, w, row_bytes, xa + t * stride, stride, part, rows);
        ok &= memcmp(part, &all[t * rows], rows * 4) == 0;
    }
    const size_t batches[][2] = {{0, 2}, {2, 3}, {1, 5}, {3, 4}, {6, 1}};
    for (size_t k = 0; k < 5; k++) {                     /* sub-batches: a verify of k tokens */
        const size_t first = batches[k][0], count = batches[k][1];
        gemm(n, rows, count, w, row_bytes, xa + first * stride, stride, part, 13);
        for (size_t t = 0; t < count; t++) ok &= memcmp(&part[t * 13], &all[(first + t) * rows], rows * 4) == 0;
    }
    if (!ok) printf("  %s %s n=%zu: a result depends on the call's shape\n", type->name, kvc_weight_set_name(set), n);
    free(w), free(x), free(xa);
    return ok;
}

TEST(each_row_and_token_should_get_the_same_bits_whatever_the_call) {
    kvc_weight_set sets[3] = {KVC_WEIGHT_SCALAR};
    const size_t count = 1 + simd_sets(sets + 1);
    test_rng rng = test_rng_new(51);
    for (size_t s = 0; s < count; s++) {
        for (size_t i = 0; i < TYPE_COUNT; i++) {
            const kvc_weight_type *type = kvc_weight_type_of(facts[i].id);
            for (size_t blocks = 1; blocks <= 9; blocks += 4) CHECK(check_call_shapes(type, sets[s], values_of(type, blocks), &rng));
        }
    }
}

/* Blocks made only of edge kinds: zero scales, largest and smallest codes
 * (-128 in Q8_0), negative mins, subnormal scales; every set against the
 * scalar one and the scalar against its plain dot. */
TEST(edge_blocks_should_give_the_scalar_bits_in_every_set) {
    kvc_weight_set sets[2];
    const size_t simd = simd_sets(sets);
    test_rng rng = test_rng_new(61);
    for (size_t i = 0; i < TYPE_COUNT; i++) {
        const kvc_weight_type *type = kvc_weight_type_of(facts[i].id);
        if (is_float_type(type)) continue; /* their values are covered above, subnormal halves included */
        const type_fact *fact = &facts[i];
        for (int kind = 1; kind < BLOCK_KINDS; kind++) {
            const size_t n = 5 * type->block_values, rows = 6, T = 5;
            const size_t row_bytes = 5 * type->block_bytes, stride = act_row_bytes(type, n);
            uint8_t *w = test_alloc(rows * row_bytes);
            for (size_t b = 0; b < rows * 5; b++) random_block(fact, &rng, b % 3 ? kind : BLOCK_RANDOM, w + b * type->block_bytes);
            float *x = random_activations(n, T, &rng);
            uint8_t *xa = coded_activations(type, KVC_WEIGHT_SCALAR, x, n, T);
            float want[30], got[30];
            type->gemm[KVC_WEIGHT_SCALAR](n, rows, T, w, row_bytes, xa, stride, want, rows);
            CHECK(near_plain_dot(type, w, n, rows, xa, T, want));
            for (size_t s = 0; s < simd; s++) {
                type->gemm[sets[s]](n, rows, T, w, row_bytes, xa, stride, got, rows);
                CHECK(memcmp(got, want, sizeof want) == 0);
            }
            free(w), free(x), free(xa);
        }
    }
}

/* NaN and Inf scales need only not crash, and leave the other rows alone. */
TEST(nonfinite_scales_should_not_disturb_other_rows) {
    kvc_weight_set sets[3] = {KVC_WEIGHT_SCALAR};
    const size_t count = 1 + simd_sets(sets + 1);
    test_rng rng = test_rng_new(71);
    for (size_t i = 0; i < TYPE_COUNT; i++) {
        const kvc_weight_type *type = kvc_weight_type_of(facts[i].id);
        if (is_float_type(type)) continue;
        const type_fact *fact = &facts[i];
        const size_t n = 3 * type->block_values, rows = 6, T = 5;
        const size_t row_bytes = 3 * type->block_bytes, stride = act_row_bytes(type, n);
        uint8_t *w = random_matrix(type, n, rows, &rng, 0);
        uint8_t *clean = test_alloc(rows * row_bytes);
        memcpy(clean, w, rows * row_bytes);
        const uint16_t specials[3] = {0x7c00, 0xfc00, 0x7e01};
        for (size_t r = 0; r < rows; r += 2) {
            uint8_t *block = w + r * row_bytes + (r % 3) * type->block_bytes;
            put_u16(block + (r % 4 == 0 || fact->m_at < 0 ? fact->d_at : fact->m_at), specials[r % 3]);
        }
        float *x = random_activations(n, T, &rng);
        uint8_t *xa = coded_activations(type, KVC_WEIGHT_SCALAR, x, n, T);
        float want[30], got[30];
        type->gemm[KVC_WEIGHT_SCALAR](n, rows, T, clean, row_bytes, xa, stride, want, rows);
        for (size_t s = 0; s < count; s++) {
            type->gemm[sets[s]](n, rows, T, w, row_bytes, xa, stride, got, rows);
            for (size_t t = 0; t < T; t++)
                for (size_t r = 1; r < rows; r += 2) {
                    if (exact_against_scalar(type, sets[s])) CHECK(memcmp(&got[t * rows + r], &want[t * rows + r], 4) == 0);
                }
        }
        free(w), free(clean), free(x), free(xa);
    }
}

/* ---- packed layouts ---- */

/* Packs a copy of the rows x n matrix w of type (its whole tiles, as the
 * runner does at load); the copy has a guard byte past its end. */
static uint8_t *packed_copy(const kvc_weight_type *type, const uint8_t *w, size_t n, size_t rows) {
    const kvc_weight_packing *packing = type->packing;
    const size_t row_bytes = n / type->block_values * type->block_bytes, R = packing->rows;
    uint8_t *packed = test_alloc(rows * row_bytes + 1), *scratch = test_alloc(R * row_bytes);
    memcpy(packed, w, rows * row_bytes);
    packed[rows * row_bytes] = 0xa5;
    for (size_t r = 0; r + R <= rows; r += R) packing->pack(n, row_bytes, packed + r * row_bytes, scratch);
    free(scratch);
    return packed;
}

TEST(packing_should_keep_every_block_where_unpacking_finds_it) {
    test_rng rng = test_rng_new(81);
    size_t packed_types = 0;
    for (size_t i = 0; i < TYPE_COUNT; i++) {
        const kvc_weight_type *type = kvc_weight_type_of(facts[i].id);
        if (!type->packing) continue;
        packed_types++;
        const size_t R = type->packing->rows, row_counts[] = {R, 2 * R, 3 * R + 1, 3 * R + R - 1};
        for (size_t ri = 0; ri < 4; ri++) {
            const size_t rows = row_counts[ri], n = 3 * type->block_values, nb = 3;
            const size_t row_bytes = nb * type->block_bytes, tiles = rows / R;
            uint8_t *w = random_matrix(type, n, rows, &rng, 4), *packed = packed_copy(type, w, n, rows);
            uint8_t block[KVC_MAX_BLOCK_BYTES];
            for (size_t k = 0; k < tiles; k++)
                for (size_t lane = 0; lane < R; lane++)
                    for (size_t b = 0; b < nb; b++) {
                        type->packing->unpack_block(packed + k * R * row_bytes, lane, b, block);
                        CHECK(memcmp(block, w + (k * R + lane) * row_bytes + b * type->block_bytes, type->block_bytes) == 0);
                    }
            /* the rows past the last whole tile keep the file's layout; nothing past the matrix is touched */
            CHECK(memcmp(packed + tiles * R * row_bytes, w + tiles * R * row_bytes, (rows - tiles * R) * row_bytes) == 0);
            CHECK(packed[rows * row_bytes] == 0xa5);
            if (tiles) CHECK(memcmp(packed, w, tiles * R * row_bytes) != 0);
            free(w), free(packed);
        }
    }
    CHECK(packed_types > 0);
}

TEST(packed_gemms_should_give_the_file_layouts_scalar_bits_in_every_set) {
    kvc_weight_set sets[3] = {KVC_WEIGHT_SCALAR};
    const size_t count = 1 + simd_sets(sets + 1);
    test_rng rng = test_rng_new(83);
    const size_t blocks[] = {1, 2, 3, 8}, row_counts[] = {1, 3, 4, 5, 8, 13, 17}, tokens[] = {1, 2, 3, 4, 5, 8};
    for (size_t i = 0; i < TYPE_COUNT; i++) {
        const kvc_weight_type *type = kvc_weight_type_of(facts[i].id);
        if (!type->packing) continue;
        for (size_t bi = 0; bi < 4; bi++)
            for (size_t ri = 0; ri < 7; ri++)
                for (size_t ti = 0; ti < 6; ti++) {
                    const size_t n = blocks[bi] * type->block_values, rows = row_counts[ri], T = tokens[ti];
                    const size_t row_bytes = blocks[bi] * type->block_bytes, stride = act_row_bytes(type, n);
                    uint8_t *w = random_matrix(type, n, rows, &rng, 4), *packed = packed_copy(type, w, n, rows);
                    float *x = random_activations(n, T, &rng);
                    uint8_t *xa = coded_activations(type, KVC_WEIGHT_SCALAR, x, n, T);
                    float *want = test_alloc(rows * T * sizeof(float)), *got = test_alloc(rows * T * sizeof(float));
                    type->gemm[KVC_WEIGHT_SCALAR](n, rows, T, w, row_bytes, xa, stride, want, rows);
                    for (size_t s = 0; s < count; s++) {
                        type->packing->gemm[sets[s]](n, rows, T, packed, row_bytes, xa, stride, got, rows);
                        const int same = memcmp(got, want, rows * T * sizeof(float)) == 0;
                        if (!same) printf("  %s %s n=%zu rows=%zu T=%zu differs from %s's scalar gemm\n", type->packing->name,
                                          kvc_weight_set_name(sets[s]), n, rows, T, type->name);
                        CHECK(same);
                    }
                    free(w), free(packed), free(x), free(xa), free(want), free(got);
                }
    }
}

/* A packed gemm called as the pool calls it: chunks of whole tiles (the
 * last one with the matrix's unpacked rows), each token alone, sub-batches. */
TEST(packed_rows_and_tokens_should_get_the_same_bits_whatever_the_call) {
    kvc_weight_set sets[3] = {KVC_WEIGHT_SCALAR};
    const size_t count = 1 + simd_sets(sets + 1);
    test_rng rng = test_rng_new(85);
    for (size_t i = 0; i < TYPE_COUNT; i++) {
        const kvc_weight_type *type = kvc_weight_type_of(facts[i].id);
        if (!type->packing) continue;
        const size_t R = type->packing->rows, rows = 3 * R + 2, T = 7, n = 5 * type->block_values;
        const size_t row_bytes = 5 * type->block_bytes, stride = act_row_bytes(type, n);
        uint8_t *w = random_matrix(type, n, rows, &rng, 4), *packed = packed_copy(type, w, n, rows);
        float *x = random_activations(n, T, &rng);
        for (size_t s = 0; s < count; s++) {
            kvc_gemm_fn *gemm = type->packing->gemm[sets[s]];
            uint8_t *xa = coded_activations(type, sets[s], x, n, T);
            float *all = test_alloc(rows * T * sizeof(float)), *part = test_alloc((rows + 3) * T * sizeof(float));
            gemm(n, rows, T, packed, row_bytes, xa, stride, all, rows);
            const size_t cuts[] = {0, R, 3 * R, rows};
            for (size_t c = 0; c + 1 < 4; c++) {
                const size_t first = cuts[c], chunk = cuts[c + 1] - cuts[c];
                gemm(n, chunk, T, packed + first * row_bytes, row_bytes, xa, stride, part, rows + 3);
                for (size_t t = 0; t < T; t++) CHECK(memcmp(&part[t * (rows + 3)], &all[t * rows + first], chunk * 4) == 0);
            }
            for (size_t t = 0; t < T; t++) {
                gemm(n, rows, 1, packed, row_bytes, xa + t * stride, stride, part, rows);
                CHECK(memcmp(part, &all[t * rows], rows * 4) == 0);
            }
            const size_t batches[][2] = {{0, 2}, {2, 3}, {1, 5}, {3, 4}, {6, 1}};
            for (size_t k = 0; k < 5; k++) {
                gemm(n, rows, batches[k][1], packed, row_bytes, xa + batches[k][0] * stride, stride, part, rows + 3);
                for (size_t t = 0; t < batches[k][1]; t++)
                    CHECK(memcmp(&part[t * (rows + 3)], &all[(batches[k][0] + t) * rows], rows * 4) == 0);
            }
            free(xa), free(all), free(part);
        }
        free(w), free(packed), free(x);
    }
}

/* ---- accuracy ---- */

/* Simple quantizers of the test's own (round to nearest), for weights with
 * the statistics of real ones: block by block from f32 values. */
static uint8_t qcode(float v, int lo, int hi) {
    const float r = nearbyintf(v);
    return (uint8_t)(r < lo ? lo : r > hi ? hi : (int)r);
}

/* The index of the table value nearest x / d (0 where d is 0). */
static int nearest_iq4nl(float x, float d) {
    int best = 0;
    for (int k = 1; k < 16 && d != 0.0f; k++)
        if (fabsf(x - d * plain_iq4nl[k]) < fabsf(x - d * plain_iq4nl[best])) best = k;
    return best;
}

/* Each group of 16's scale, its value of largest |x| over -max_code (so
 * that the code -max_code lands on it, as ggml's signed k-quants do), and
 * the scale of largest |scale|, which the super-block's d divides. */
static float signed_group_scales(const float *x, float max_code, float scale[16]) {
    float max_scale = 0.0f, abs_max = 0.0f;
    for (size_t g = 0; g < 16; g++) {
        float ga = 0.0f, gm = 0.0f;
        for (size_t i = 16 * g; i < 16 * g + 16; i++)
            if (fabsf(x[i]) > ga) ga = fabsf(x[i]), gm = x[i];
        scale[g] = gm / -max_code;
        if (fabsf(scale[g]) > abs_max) abs_max = fabsf(scale[g]), max_scale = scale[g];
    }
    return max_scale;
}

static void quantize_block(uint32_t id, const float *x, uint8_t *out) {
    float amax = 0.0f, max = 0.0f, lo = x[0], hi = x[0];
    const size_t B = fact_of(id)->values;
    for (size_t i = 0; i < B; i++) {
        if (fabsf(x[i]) > amax) amax = fabsf(x[i]), max = x[i];
        if (x[i] < lo) lo = x[i];
        if (x[i] > hi) hi = x[i];
    }
    memset(out, 0, fact_of(id)->bytes);
    switch (id) {
    case 8: {
        const float d = plain_f16(f16_of(amax / 127.0f));
        put_u16(out, f16_of(d));
        for (size_t i = 0; i < 32; i++) out[2 + i] = (uint8_t)(int8_t)(d ? nearbyintf(x[i] / d) : 0.0f);
        break;
    }
    case 2: case 6: {
        const int offset = id == 2 ? 8 : 16;
        const float d = plain_f16(f16_of(max / -(float)offset));
        put_u16(out, f16_of(d));
        uint8_t q[32];
        for (size_t i = 0; i < 32; i++) q[i] = qcode(d ? x[i] / d + (float)offset : (float)offset, 0, 2 * offset - 1);
        uint8_t *qs = out + (id == 2 ? 2 : 6);
        for (size_t i = 0; i < 16; i++) qs[i] = (uint8_t)((q[i] & 15) | ((q[i + 16] & 15) << 4));
        if (id == 6)
            for (size_t i = 0; i < 32; i++) out[2 + i / 8] |= (uint8_t)(((q[i] >> 4) & 1) << (i % 8));
        break;
    }
    case 3: case 7: {
        const int top = id == 3 ? 15 : 31;
        const float d = plain_f16(f16_of((hi - lo) / (float)top)), m = plain_f16(f16_of(lo));
        put_u16(out, f16_of(d)), put_u16(out + 2, f16_of(m));
        uint8_t q[32];
        for (size_t i = 0; i < 32; i++) q[i] = qcode(d ? (x[i] - m) / d : 0.0f, 0, top);
        uint8_t *qs = out + (id == 3 ? 4 : 8);
        for (size_t i = 0; i < 16; i++) qs[i] = (uint8_t)((q[i] & 15) | ((q[i + 16] & 15) << 4));
        if (id == 7)
            for (size_t i = 0; i < 32; i++) out[4 + i / 8] |= (uint8_t)(((q[i] >> 4) & 1) << (i % 8));
        break;
    }
    case 12: case 13: {
        const int top = id == 12 ? 15 : 31;
        float scale[8], min[8], max_scale = 0.0f, max_min = 0.0f;
        for (size_t j = 0; j < 8; j++) {
            float l = x[32 * j], h = x[32 * j];
            for (size_t i = 32 * j; i < 32 * j + 32; i++) l = fminf(l, x[i]), h = fmaxf(h, x[i]);
            if (l > 0.0f) l = 0.0f;
            scale[j] = (h - l) / (float)top, min[j] = -l;
            max_scale = fmaxf(max_scale, scale[j]), max_min = fmaxf(max_min, min[j]);
        }
        const float d = plain_f16(f16_of(max_scale / 63.0f)), dmin = plain_f16(f16_of(max_min / 63.0f));
        put_u16(out, f16_of(d)), put_u16(out + 2, f16_of(dmin));
        uint8_t sc[8], m[8], q[256];
        for (size_t j = 0; j < 8; j++) {
            sc[j] = qcode(d ? scale[j] / d : 0.0f, 0, 63), m[j] = qcode(dmin ? min[j] / dmin : 0.0f, 0, 63);
            const float dj = d * sc[j], mj = dmin * m[j];
            for (size_t i = 32 * j; i < 32 * j + 32; i++) q[i] = qcode(dj ? (x[i] + mj) / dj : 0.0f, 0, top);
        }
        uint8_t *s = out + 4;
        for (size_t j = 0; j < 8; j++) {
            if (j < 4) {
                s[j] = sc[j], s[j + 4] = m[j];
            } else {
                s[j + 4] = (uint8_t)((sc[j] & 15) | ((m[j] & 15) << 4));
                s[j - 4] |= (uint8_t)((sc[j] >> 4) << 6);
                s[j] |= (uint8_t)((m[j] >> 4) << 6);
            }
        }
        uint8_t *qh = out + 16, *qs = out + (id == 12 ? 16 : 48);
        for (size_t c = 0; c < 4; c++)
            for (size_t l = 0; l < 32; l++) {
                const uint8_t a = q[64 * c + l], b = q[64 * c + 32 + l];
                qs[32 * c + l] = (uint8_t)((a & 15) | ((b & 15) << 4));
                if (id == 13) qh[l] |= (uint8_t)(((a >> 4) << (2 * c)) | ((b >> 4) << (2 * c + 1)));
            }
        break;
    }
    case 14: {
        float scale[16];
        const float max_scale = signed_group_scales(x, 32.0f, scale);
        const float d = plain_f16(f16_of(max_scale / -128.0f));
        put_u16(out + 208, f16_of(d));
        int8_t *sc = (int8_t *)(out + 192);
        uint8_t q[256];
        for (size_t g = 0; g < 16; g++) {
            const float r = d ? nearbyintf(scale[g] / d) : 0.0f;
            sc[g] = (int8_t)(r > 127 ? 127 : r < -128 ? -128 : r);
            const float dg = d * sc[g];
            for (size_t i = 16 * g; i < 16 * g + 16; i++) q[i] = qcode(dg ? x[i] / dg + 32.0f : 32.0f, 0, 63);
        }
        for (size_t h = 0; h < 2; h++)
            for (size_t l = 0; l < 32; l++) {
                const uint8_t *v = q + 128 * h + l;
                out[64 * h + l] = (uint8_t)((v[0] & 15) | ((v[64] & 15) << 4));
                out[64 * h + 32 + l] = (uint8_t)((v[32] & 15) | ((v[96] & 15) << 4));
                out[128 + 32 * h + l] = (uint8_t)((v[0] >> 4) | ((v[32] >> 4) << 2) | ((v[64] >> 4) << 4) | ((v[96] >> 4) << 6));
            }
        break;
    }
    case 20: {
        const float d = plain_f16(f16_of(max / -127.0f));
        put_u16(out, f16_of(d));
        for (size_t i = 0; i < 16; i++) out[2 + i] = (uint8_t)(nearest_iq4nl(x[i], d) | (nearest_iq4nl(x[i + 16], d) << 4));
        break;
    }
    case 23: {
        float scale[8], max_scale = 0.0f, abs_max = 0.0f;
        for (size_t j = 0; j < 8; j++) {
            float ja = 0.0f, jm = 0.0f;
            for (size_t i = 32 * j; i < 32 * j + 32; i++)
                if (fabsf(x[i]) > ja) ja = fabsf(x[i]), jm = x[i];
            scale[j] = jm / -127.0f;
            if (fabsf(scale[j]) > abs_max) abs_max = fabsf(scale[j]), max_scale = scale[j];
        }
        const float d = plain_f16(f16_of(max_scale / -32.0f));
        put_u16(out, f16_of(d));
        uint16_t scales_h = 0;
        for (size_t j = 0; j < 8; j++) {
            const uint8_t ls = qcode(d ? scale[j] / d + 32.0f : 32.0f, 0, 63);
            out[4 + j / 2] |= (uint8_t)((ls & 15) << (4 * (j % 2)));
            scales_h |= (uint16_t)((ls >> 4) << (2 * j));
            const float dj = d * (float)(ls - 32);
            for (size_t i = 0; i < 16; i++)
                out[8 + 16 * j + i] = (uint8_t)(nearest_iq4nl(x[32 * j + i], dj) | (nearest_iq4nl(x[32 * j + 16 + i], dj) << 4));
        }
        put_u16(out + 2, scales_h);
        break;
    }
    case 10: {
        float scale[16], min[16], max_scale = 0.0f, max_min = 0.0f;
        for (size_t g = 0; g < 16; g++) {
            float l = x[16 * g], h = x[16 * g];
            for (size_t i = 16 * g; i < 16 * g + 16; i++) l = fminf(l, x[i]), h = fmaxf(h, x[i]);
            if (l > 0.0f) l = 0.0f;
            scale[g] = (h - l) / 3.0f, min[g] = -l;
            max_scale = fmaxf(max_scale, scale[g]), max_min = fmaxf(max_min, min[g]);
        }
        const float d = plain_f16(f16_of(max_scale / 15.0f)), dmin = plain_f16(f16_of(max_min / 15.0f));
        put_u16(out + 80, f16_of(d)), put_u16(out + 82, f16_of(dmin));
        for (size_t g = 0; g < 16; g++) {
            const uint8_t sc = qcode(d ? scale[g] / d : 0.0f, 0, 15), m = qcode(dmin ? min[g] / dmin : 0.0f, 0, 15);
            out[g] = (uint8_t)(sc | (m << 4));
            const float dg = d * sc, mg = dmin * m;
            for (size_t i = 16 * g; i < 16 * g + 16; i++) {
                const uint8_t q = qcode(dg ? (x[i] + mg) / dg : 0.0f, 0, 3);
                out[16 + 32 * (i / 128) + i % 32] |= (uint8_t)(q << (2 * (i % 128 / 32)));
            }
        }
        break;
    }
    case 11: {
        float scale[16];
        const float max_scale = signed_group_scales(x, 4.0f, scale);
        const float d = plain_f16(f16_of(max_scale / -32.0f));
        put_u16(out + 108, f16_of(d));
        for (size_t g = 0; g < 16; g++) {
            const float r = d ? nearbyintf(scale[g] / d) : 0.0f;
            const int sc = r > 31 ? 31 : r < -32 ? -32 : (int)r, stored = sc + 32;
            out[96 + g % 8] |= (uint8_t)((stored & 15) << (g < 8 ? 0 : 4));
            out[96 + 8 + g % 4] |= (uint8_t)((stored >> 4) << (2 * (g / 4)));
            const float dg = d * (float)sc;
            for (size_t i = 16 * g; i < 16 * g + 16; i++) {
                const uint8_t q = qcode(dg ? x[i] / dg + 4.0f : 4.0f, 0, 7);
                out[32 + 32 * (i / 128) + i % 32] |= (uint8_t)((q & 3) << (2 * (i % 128 / 32)));
                out[i % 32] |= (uint8_t)((q >> 2) << (i / 32));
            }
        }
        break;
    }
    }
}

static void quantize_weights(const kvc_weight_type *type, const float *x, size_t count, uint8_t *out) {
    if (type->ggml_id == 0) memcpy(out, x, count * 4);
    else if (type->ggml_id == 1) for (size_t i = 0; i < count; i++) put_u16(out + 2 * i, f16_of(x[i]));
    else if (type->ggml_id == 30) for (size_t i = 0; i < count; i++) put_u16(out + 2 * i, bf16_of(x[i]));
    else for (size_t b = 0; b < count / type->block_values; b++) quantize_block(type->ggml_id, x + b * type->block_values, out + b * type->block_bytes);
}

/* ||a - b|| / ||b|| */
static double relative_l2(const double *a, const double *b, size_t count) {
    double diff = 0.0, size = 0.0;
    for (size_t i = 0; i < count; i++) diff += (a[i] - b[i]) * (a[i] - b[i]), size += b[i] * b[i];
    return sqrt(diff / size);
}

/* The gemm's y over activations x [T x n] against the exact dot of the
 * dequantized weights with x, and that against the exact dot of the f32
 * weights: (coding, weights) as relative L2 errors. */
/* For a k-quant: what q8 blocks of 32 (one scale per 32 values, not per
 * 256) would cost instead, as the exact dot of the dequantized weights with
 * the activations so coded, against the same with the f32 activations. */
static double coding_by_32(const kvc_weight_type *type, const uint8_t *w, size_t n, size_t rows, size_t T,
                           const float *x) {
    const kvc_weight_type *q8_0 = kvc_weight_type_of(8);
    const size_t row_bytes = n / type->block_values * type->block_bytes, stride = act_row_bytes(q8_0, n);
    uint8_t *xa = coded_activations(q8_0, KVC_WEIGHT_SCALAR, x, n, T);
    double *coded = test_alloc(rows * T * sizeof(double)), *exact = test_alloc(rows * T * sizeof(double));
    double *a = test_alloc(n * sizeof(double));
    float *wr = test_alloc(n * sizeof(float));
    for (size_t t = 0; t < T; t++) {
        decoded_activations(q8_0, xa + t * stride, n, a);
        for (size_t r = 0; r < rows; r++) {
            type->dequantize(w + r * row_bytes, 0, n, wr);
            double with_codes = 0.0, with_f32 = 0.0;
            for (size_t j = 0; j < n; j++) with_codes += wr[j] * a[j], with_f32 += (double)wr[j] * x[t * n + j];
            coded[t * rows + r] = with_codes, exact[t * rows + r] = with_f32;
        }
    }
    const double error = relative_l2(coded, exact, rows * T);
    free(xa), free(coded), free(exact), free(a), free(wr);
    return error;
}

static void accuracy_of(const kvc_weight_type *type, const float *w32, const uint8_t *w, size_t n, size_t rows,
                        size_t T, const float *x, double *coding, double *weights) {
    const size_t row_bytes = n / type->block_values * type->block_bytes, stride = act_row_bytes(type, n);
    const kvc_weight_set set = kvc_weight_set_active();
    double *y_exact = test_alloc(rows * T * sizeof(double)), *y_weights = test_alloc(rows * T * sizeof(double));
    double *y_gemm = test_alloc(rows * T * sizeof(double));
    float *y = test_alloc(rows * T * sizeof(float)), *wr = test_alloc(n * sizeof(float));
    uint8_t *xa = coded_activations(type, set, x, n, T);
    type->gemm[set](n, rows, T, w, row_bytes, xa, stride, y, rows);
    for (size_t r = 0; r < rows; r++) {
        type->dequantize(w + r * row_bytes, 0, n, wr);
        for (size_t t = 0; t < T; t++) {
            double exact = 0.0, dequantized = 0.0;
            for (size_t j = 0; j < n; j++) {
                exact += (double)w32[r * n + j] * x[t * n + j];
                dequantized += (double)wr[j] * x[t * n + j];
            }
            y_exact[t * rows + r] = exact, y_weights[t * rows + r] = dequantized;
            y_gemm[t * rows + r] = y[t * rows + r];
        }
    }
    *weights = relative_l2(y_weights, y_exact, rows * T);
    *coding = relative_l2(y_gemm, y_weights, rows * T);
    free(y_exact), free(y_weights), free(y_gemm), free(y), free(wr), free(xa);
}

/* Per type, N(0,1) weights [rows x n] quantized by the test's quantizer:
 *   weights: what the weight quantization costs (the exact dot of the
 *            dequantized weights against that of the f32 weights);
 *   coding:  what coding the activations (and the kernel's f32 sums) adds
 *            (the gemm's y against the exact dot of the same dequantized
 *            weights with the f32 activations),
 * for N(0,1) activations and for ones with outliers (one value in 61 times
 * 20, which widens its block's step).  Printed as a table.  q8 coding of
 * N(0,1) values in blocks of 32 or 256 costs about (2.3 .. 2.9) / 127 /
 * sqrt(12) = 5e-3 .. 7e-3: the bound; below 8 bits the weights cost more. */
TEST(activation_coding_should_cost_less_accuracy_than_the_weights) {
    test_rng rng = test_rng_new(81);
    const size_t n = 1024, rows = 64, T = 4;
    float *w32 = test_alloc(rows * n * sizeof(float)), *normal = test_alloc(n * T * sizeof(float));
    float *outliers = random_activations(n, T, &rng);
    test_fill_normal(&rng, w32, rows * n);
    test_fill_normal(&rng, normal, n * T);
    uint8_t *w = test_alloc(rows * n * 4);
    printf("  accuracy (relative L2 of y, n=%zu rows=%zu T=%zu, set %s):\n", n, rows, T,
           kvc_weight_set_name(kvc_weight_set_active()));
    printf("  %-6s %-7s %-9s %-15s %-17s %s\n", "type", "act", "weights", "coding (N(0,1))", "coding (outliers)",
           "(q8x32 instead: N(0,1), outliers)");
    for (size_t i = 0; i < TYPE_COUNT; i++) {
        const kvc_weight_type *type = kvc_weight_type_of(facts[i].id);
        const size_t row_bytes = n / type->block_values * type->block_bytes;
        for (size_t r = 0; r < rows; r++) quantize_weights(type, w32 + r * n, n, w + r * row_bytes);
        double coding, weights, coding_outliers, weights_outliers;
        accuracy_of(type, w32, w, n, rows, T, normal, &coding, &weights);
        accuracy_of(type, w32, w, n, rows, T, outliers, &coding_outliers, &weights_outliers);
        printf("  %-6s %-7s %-9.2e %-15.2e %-17.2e", type->name, kvc_act_encoding_of(type->act)->name, weights,
               coding, coding_outliers);
        if (type->act == KVC_ACT_Q8_256) {
            printf(" (%.2e, %.2e)", coding_by_32(type, w, n, rows, T, normal), coding_by_32(type, w, n, rows, T, outliers));
        }
        printf("\n");
        if (is_float_type(type)) {
            CHECK(coding < 1e-5 && coding_outliers < 1e-5); /* f32 sums only */
        } else {
            CHECK(coding < 8e-3 && coding_outliers < 3e-2);
            if (type->ggml_id != 8) CHECK(coding < weights);
        }
    }
    free(w32), free(normal), free(outliers), free(w);
}

RUN_TESTS(CASE(traits_should_give_each_type_its_ggml_layout_and_refuse_the_rest),
          CASE(f16_and_bf16_should_read_every_half_exactly),
          CASE(dequantize_should_give_the_values_of_the_block_layout),
          CASE(f16_and_bf16_gemms_should_read_every_half_exactly_in_every_set),
          CASE(act_quantizers_should_give_the_bytes_of_their_definition_in_every_set),
          CASE(act_quantizers_should_make_nan_and_inf_blocks_poison_their_products),
          CASE(scalar_gemm_should_be_the_dot_of_its_weights_and_coded_activations),
          CASE(every_set_should_give_the_scalar_gemm_at_every_shape),
          CASE(each_row_and_token_should_get_the_same_bits_whatever_the_call),
          CASE(edge_blocks_should_give_the_scalar_bits_in_every_set),
          CASE(nonfinite_scales_should_not_disturb_other_rows),
          CASE(activation_coding_should_cost_less_accuracy_than_the_weights),
          CASE(packing_should_keep_every_block_where_unpacking_finds_it),
          CASE(packed_gemms_should_give_the_file_layouts_scalar_bits_in_every_set),
          CASE(packed_rows_and_tokens_should_get_the_same_bits_whatever_the_call))
