/* weights-scalar.h -- what the scalar weight kernels share: exact f16 and
 * bf16 reads, f32 rounded to f16, unaligned little-endian loads, the q8
 * activation row's parts (and what both quantizers write of a block), and
 * the two loops every scalar gemm is (block types and float types), each
 * the definition of its types' arithmetic (weights.h). */
#ifndef KVC_WEIGHTS_SCALAR_H
#define KVC_WEIGHTS_SCALAR_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "weights.h"

static inline uint16_t kvc_load_u16(const uint8_t *p) {
    return (uint16_t)(p[0] | (p[1] << 8));
}

static inline float kvc_load_f32(const uint8_t *p) {
    float f;
    memcpy(&f, p, sizeof f);
    return f;
}

static inline float kvc_f32_of_bits(uint32_t bits) {
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static inline uint32_t kvc_bits_of_f32(float f) {
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    return bits;
}

/* IEEE half to f32, exactly: exponent and mantissa moved into f32 place
 * then scaled by 2^112 (exact, subnormal halves included); Inf and NaN
 * (exponent 31) keep their mantissa under an all-ones exponent.  The SIMD
 * kernels do the same lane-wise. */
static inline float kvc_f16_to_f32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t magnitude = (uint32_t)(h & 0x7fffu) << 13;
    if ((h & 0x7c00u) == 0x7c00u) return kvc_f32_of_bits(sign | 0x7f800000u | magnitude);
    return kvc_f32_of_bits(kvc_bits_of_f32(kvc_f32_of_bits(magnitude) * 0x1p112f) | sign);
}

static inline float kvc_bf16_to_f32(uint16_t h) {
    return kvc_f32_of_bits((uint32_t)h << 16);
}

static inline float kvc_load_f16(const uint8_t *p) {
    return kvc_f16_to_f32(kvc_load_u16(p));
}

/* f32 to the nearest IEEE half, ties to even, as ggml's GGML_FP32_TO_FP16:
 * subnormal halves kept, 65520 and up (the tie above 65504) Inf; a NaN to
 * the quiet NaN 0x7e00, whatever its sign and payload (which wasm leaves
 * to the engine). */
static inline uint16_t kvc_f32_to_f16(float f) {
    const uint32_t bits = kvc_bits_of_f32(f), magnitude = bits & 0x7fffffffu;
    const uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
    if (magnitude > 0x7f800000u) return 0x7e00;
    if (magnitude >= 0x477ff000u) return sign | 0x7c00;
    /* below 2^-14: a subnormal half, the value in units of 2^-24 rounded
     * (exact: a power-of-two scaling; 1024 is the smallest normal's bits) */
    if (magnitude < 0x38800000u) return sign | (uint16_t)rintf(kvc_f32_of_bits(magnitude) * 0x1p24f);
    /* a normal half: the 13 dropped bits rounded, ties to even, a carry
     * moving into the exponent; the exponent rebiased from 127 to 15 */
    return sign | (uint16_t)((magnitude + 0xfffu + ((magnitude >> 13) & 1u) - (112u << 23)) >> 13);
}

/* f rounded to f16 and read back. */
static inline float kvc_f16_round(float f) {
    return kvc_f16_to_f32(kvc_f32_to_f16(f));
}

/* ---- a q8 activation row (weights.h) ---- */
typedef struct kvc_act_q8_row {
    const int8_t *codes;
    const int16_t *codes16;    /* the SIMD128 kernels' (wasm: any alignment loads) */
    const uint8_t *scales;     /* f32, unaligned */
    const uint8_t *sums;       /* i16, unaligned */
    const uint8_t *value_sums; /* f32, unaligned; NULL in blocks of 256 */
} kvc_act_q8_row;

static inline kvc_act_q8_row kvc_act_q8_row_at(const uint8_t *xa, size_t n, size_t B) {
    kvc_act_q8_row row = {(const int8_t *)xa, (const int16_t *)(const void *)(xa + KVC_ACT_Q8_CODES16_AT(n)),
                          xa + KVC_ACT_Q8_SCALES_AT(n), xa + KVC_ACT_Q8_SUMS_AT(n, B),
                          B == 32 ? xa + KVC_ACT_Q8_VALUE_SUMS_AT(n) : NULL};
    return row;
}

static inline float kvc_act_scale(const kvc_act_q8_row *a, size_t b) {
    return kvc_load_f32(a->scales + 4 * b);
}

/* Block b's s_b (blocks of 32). */
static inline float kvc_act_value_sum(const kvc_act_q8_row *a, size_t b) {
    return kvc_load_f32(a->value_sums + 4 * b);
}

/* What each quantizer writes of block b besides its codes: a q8x32 block's
 * d_b and s_b from its unrounded d and the sum of its codes; a q8x256
 * block's d_b (a NaN as 0x7fc00000: the same bytes from every set). */
static inline void kvc_put_act_q8_32_block(uint8_t *xa, size_t n, size_t b, float d, int32_t code_sum) {
    const float scale = kvc_f16_round(d), value_sum = kvc_f16_round(d * (float)code_sum);
    memcpy(xa + KVC_ACT_Q8_SCALES_AT(n) + 4 * b, &scale, sizeof scale);
    memcpy(xa + KVC_ACT_Q8_VALUE_SUMS_AT(n) + 4 * b, &value_sum, sizeof value_sum);
}

static inline void kvc_put_act_q8_256_block(uint8_t *xa, size_t n, size_t b, float d) {
    const float scale = d == d ? d : kvc_f32_of_bits(0x7fc00000u);
    memcpy(xa + KVC_ACT_Q8_SCALES_AT(n) + 4 * b, &scale, sizeof scale);
}

/* The sum of codes 16 g .. 16 g + 15. */
static inline int32_t kvc_act_sum16(const kvc_act_q8_row *a, size_t g) {
    return (int16_t)kvc_load_u16(a->sums + 2 * g);
}

/* The sum of the 32 codes of block b (blocks of 32). */
static inline int32_t kvc_act_sum32(const kvc_act_q8_row *a, size_t b) {
    return kvc_act_sum16(a, 2 * b) + kvc_act_sum16(a, 2 * b + 1);
}

/* ---- codes of the 32-value blocks ---- */

/* ggml's 4-bit packing of 32 codes in 16 bytes: code i < 16 in the low
 * nibble of byte i, code 16 + i in its high nibble. */
static inline void kvc_nibble_codes32(const uint8_t *qs, uint8_t q[32]) {
    for (size_t i = 0; i < 16; i++) {
        q[i] = qs[i] & 15;
        q[16 + i] = qs[i] >> 4;
    }
}

/* Q5_0 / Q5_1: bit i of the little-endian u32 at qh is bit 4 of code i. */
static inline void kvc_add_fifth_bits32(const uint8_t *qh, uint8_t q[32]) {
    for (size_t i = 0; i < 32; i++) q[i] |= (uint8_t)(((qh[i / 8] >> (i % 8)) & 1) << 4);
}

/* sum_i q[i] * a[i], exact. */
static inline int32_t kvc_dot_codes(size_t count, const uint8_t *q, const int8_t *a) {
    int32_t sum = 0;
    for (size_t i = 0; i < count; i++) sum += (int32_t)q[i] * a[i];
    return sum;
}

/* The 32-value types' values and block values from their codes q: an f16
 * d at block[0], and either an offset (Q4_0 8, Q5_0 16) or an f16 m at
 * block[2] (Q4_1, Q5_1). */
static inline void kvc_decode_offset32(const uint8_t *block, const uint8_t q[32], int offset,
                                       float *out) {
    const float d = kvc_load_f16(block);
    for (size_t i = 0; i < 32; i++) out[i] = (float)(q[i] - offset) * d;
}

static inline void kvc_decode_min32(const uint8_t *block, const uint8_t q[32], float *out) {
    const float d = kvc_load_f16(block), m = kvc_load_f16(block + 2);
    for (size_t i = 0; i < 32; i++) out[i] = (float)q[i] * d + m;
}

/* (d * d_a) * (S - offset * A) */
static inline float kvc_value_offset32(const uint8_t *block, const uint8_t q[32],
                                       const kvc_act_q8_row *a, size_t b, int32_t offset) {
    const int32_t S = kvc_dot_codes(32, q, a->codes + 32 * b);
    return (kvc_load_f16(block) * kvc_act_scale(a, b)) * (float)(S - offset * kvc_act_sum32(a, b));
}

/* (d * d_a) * S + m * s_a */
static inline float kvc_value_min32(const uint8_t *block, const uint8_t q[32],
                                    const kvc_act_q8_row *a, size_t b) {
    const float S = (float)kvc_dot_codes(32, q, a->codes + 32 * b);
    return (kvc_load_f16(block) * kvc_act_scale(a, b)) * S + kvc_load_f16(block + 2) * kvc_act_value_sum(a, b);
}

/* ---- IQ4_NL and IQ4_XS: each nibble indexes ggml's table kvalues_iq4nl ---- */

/* The table values of the 32 nibbles at qs, in ggml's packing. */
static inline void kvc_iq4_codes32(const uint8_t *qs, int8_t t[32]) {
    static const int8_t values[16] = {KVC_IQ4_VALUES};
    for (size_t i = 0; i < 16; i++) {
        t[i] = values[qs[i] & 15];
        t[16 + i] = values[qs[i] >> 4];
    }
}

/* sum_i t[i] * a[i] of signed codes, exact. */
static inline int32_t kvc_dot_signed_codes(size_t count, const int8_t *t, const int8_t *a) {
    int32_t sum = 0;
    for (size_t i = 0; i < count; i++) sum += (int32_t)t[i] * a[i];
    return sum;
}

/* IQ4_XS: sub-block j's scale ls_j - 32 (-32..31): the low 4 bits of ls_j
 * in nibble j % 2 of scales_l[j / 2] (byte 4 + j / 2), the high 2 in bits
 * 2 j, 2 j + 1 of the u16 scales_h (byte 2). */
static inline int32_t kvc_iq4_xs_scale(const uint8_t *block, size_t j) {
    const uint32_t low = (block[4 + j / 2] >> (4 * (j % 2))) & 15, high = (kvc_load_u16(block + 2) >> (2 * j)) & 3;
    return (int32_t)(low | (high << 4)) - 32;
}

/* ---- Q4_K and Q5_K: super-blocks of 256, f16 d and dmin, 12 bytes of
 * 6-bit scales and mins for eight sub-blocks of 32, then codes ---- */

/* Sub-block j's scale and min (ggml's packing: j < 4 in the low 6 bits of
 * bytes j and 4 + j; j >= 4 low 4 bits from byte 4 + j, high 2 from the top
 * bits of bytes j - 4 and j). */
static inline void kvc_k_scale_min(size_t j, const uint8_t *scales, int32_t *sc, int32_t *m) {
    if (j < 4) {
        *sc = scales[j] & 63;
        *m = scales[j + 4] & 63;
    } else {
        *sc = (scales[j + 4] & 15) | ((scales[j - 4] >> 6) << 4);
        *m = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
    }
}

/* value = (d * sc_j) * q - dmin * m_j, as ggml's dequantize_row_q4_K. */
static inline void kvc_decode_k_min(const uint8_t *block, const uint8_t q[256], float *out) {
    const float d = kvc_load_f16(block), dmin = kvc_load_f16(block + 2);
    for (size_t j = 0; j < 8; j++) {
        int32_t sc, m;
        kvc_k_scale_min(j, block + 4, &sc, &m);
        const float d_j = d * (float)sc, m_j = dmin * (float)m;
        for (size_t i = 32 * j; i < 32 * j + 32; i++) out[i] = d_j * (float)q[i] - m_j;
    }
}

/* (d * d_a) * S - (dmin * d_a) * M, d and dmin the f16 pair at dm (Q2_K,
 * Q4_K, Q5_K). */
static inline float kvc_k_min_value(const uint8_t *dm, float da, int32_t S, int32_t M) {
    return (kvc_load_f16(dm) * da) * (float)S - (kvc_load_f16(dm + 2) * da) * (float)M;
}

static inline float kvc_value_k_min(const uint8_t *block, const uint8_t q[256],
                                    const kvc_act_q8_row *a, size_t b) {
    int32_t S = 0, M = 0;
    for (size_t j = 0; j < 8; j++) {
        int32_t sc, m;
        kvc_k_scale_min(j, block + 4, &sc, &m);
        S += sc * kvc_dot_codes(32, q + 32 * j, a->codes + 256 * b + 32 * j);
        M += m * (kvc_act_sum16(a, 16 * b + 2 * j) + kvc_act_sum16(a, 16 * b + 2 * j + 1));
    }
    return kvc_k_min_value(block, kvc_act_scale(a, b), S, M);
}

/* ---- Q2_K and Q3_K: super-blocks of 256, 2-bit codes packed four to a
 * byte: in each half h of 128 values, value 128 h + 32 k + l (l < 32) is
 * bits 2 k, 2 k + 1 of byte 32 h + l ---- */
static inline void kvc_k_2bit_codes(const uint8_t *qs, uint8_t q[256]) {
    for (size_t i = 0; i < 256; i++) q[i] = (qs[32 * (i / 128) + i % 32] >> (2 * (i / 32 % 4))) & 3;
}

/* ---- the loops ---- */

/* v_b of a block type: weight block `block` (block b of its row) against
 * activation row a. */
typedef float kvc_block_value_fn(const uint8_t *block, const kvc_act_q8_row *a, size_t b);

static inline float kvc_combine4(const float acc[4]) {
    return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

/* A block type's gemm: v_b into accumulator b mod 4, in block order. */
static inline void kvc_gemm_blocks_scalar(size_t B, size_t block_bytes, kvc_block_value_fn *value,
                                          size_t n, size_t rows, size_t T, const uint8_t *w,
                                          size_t row_bytes, const uint8_t *xa, size_t xa_stride,
                                          float *y, size_t y_stride) {
    const size_t nb = n / B;
    for (size_t r = 0; r < rows; r++) {
        const uint8_t *row = w + r * row_bytes;
        for (size_t t = 0; t < T; t++) {
            const kvc_act_q8_row a = kvc_act_q8_row_at(xa + t * xa_stride, n, B);
            float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            for (size_t b = 0; b < nb; b++) acc[b & 3] += value(row + b * block_bytes, &a, b);
            y[t * y_stride + r] = kvc_combine4(acc);
        }
    }
}

/* A packed layout's gemm (weights.h): tile by tile, each row's blocks
 * unpacked to the file's layout one at a time and valued as the type's
 * scalar gemm values them, into the same accumulators in the same order;
 * the matrix's last rows, which keep the file's layout, by that gemm. */
static inline void kvc_gemm_packed_scalar(size_t R, size_t B, kvc_unpack_block_fn *unpack,
                                          kvc_block_value_fn *value, kvc_gemm_fn *file_gemm,
                                          size_t n, size_t rows, size_t T, const uint8_t *w,
                                          size_t row_bytes, const uint8_t *xa, size_t xa_stride,
                                          float *y, size_t y_stride) {
    const size_t nb = n / B, tiles = rows / R;
    uint8_t block[KVC_MAX_BLOCK_BYTES];
    for (size_t k = 0; k < tiles; k++) {
        const uint8_t *tile = w + k * R * row_bytes;
        for (size_t lane = 0; lane < R; lane++) {
            for (size_t t = 0; t < T; t++) {
                const kvc_act_q8_row a = kvc_act_q8_row_at(xa + t * xa_stride, n, B);
                float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                for (size_t b = 0; b < nb; b++) {
                    unpack(tile, lane, b, block);
                    acc[b & 3] += value(block, &a, b);
                }
                y[t * y_stride + k * R + lane] = kvc_combine4(acc);
            }
        }
    }
    if (rows % R) file_gemm(n, rows % R, T, w + tiles * R * row_bytes, row_bytes, xa, xa_stride, y + tiles * R, y_stride);
}

/* The scalar gemm of packed layout `layout` of block type t (in t's file). */
#define KVC_SCALAR_PACKED_GEMM(layout, t, R, B)                                                   \
    void kvc_gemm_##layout##__scalar(size_t n, size_t rows, size_t T, const uint8_t *w,           \
                                     size_t row_bytes, const uint8_t *xa, size_t xa_stride,       \
                                     float *y, size_t y_stride) {                                 \
        kvc_gemm_packed_scalar(R, B, kvc_unpack_block_##layout, t##_value, kvc_gemm_##t##__scalar, \
                               n, rows, T, w, row_bytes, xa, xa_stride, y, y_stride);             \
    }

/* Weight j of a float type's row, as f32 (exactly). */
typedef float kvc_weight_value_fn(const uint8_t *row, size_t j);

/* A float type's gemm: w_j * x_j into accumulator j mod 4, in order of j. */
static inline void kvc_gemm_floats_scalar(kvc_weight_value_fn *weight, size_t n, size_t rows,
                                          size_t T, const uint8_t *w, size_t row_bytes,
                                          const uint8_t *xa, size_t xa_stride, float *y,
                                          size_t y_stride) {
    for (size_t r = 0; r < rows; r++) {
        const uint8_t *row = w + r * row_bytes;
        for (size_t t = 0; t < T; t++) {
            const uint8_t *x = xa + t * xa_stride;
            float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            for (size_t j = 0; j < n; j++) acc[j & 3] += weight(row, j) * kvc_load_f32(x + 4 * j);
            y[t * y_stride + r] = kvc_combine4(acc);
        }
    }
}

/* A float type's dequantize: out[i] = weight(row, first + i). */
static inline void kvc_dequantize_floats(kvc_weight_value_fn *weight, const uint8_t *row,
                                         size_t first, size_t count, float *out) {
    for (size_t i = 0; i < count; i++) out[i] = weight(row, first + i);
}

/* Decodes one block of B values into f32. */
typedef void kvc_block_decode_fn(const uint8_t *block, float *out);

/* A block type's dequantize: whole blocks decoded, the range copied out. */
static inline void kvc_dequantize_blocks(size_t B, size_t block_bytes, kvc_block_decode_fn *decode,
                                         const uint8_t *row, size_t first, size_t count,
                                         float *out) {
    float values[256];
    while (count > 0) {
        const size_t b = first / B, within = first % B;
        const size_t take = B - within < count ? B - within : count;
        decode(row + b * block_bytes, values);
        memcpy(out, values + within, take * sizeof(float));
        out += take, first += take, count -= take;
    }
}

/* ---- a type's two entry points, from its file's static functions ---- */

/* A block type with t##_decode and t##_value (weights.h has its bytes). */
#define KVC_SCALAR_BLOCK_TYPE(t, B)                                                               \
    void kvc_dequantize_##t(const uint8_t *row, size_t first, size_t count, float *out) {         \
        kvc_dequantize_blocks(B, KVC_BLOCK_BYTES_##t, t##_decode, row, first, count, out);        \
    }                                                                                             \
    void kvc_gemm_##t##__scalar(size_t n, size_t rows, size_t T, const uint8_t *w,                \
                                size_t row_bytes, const uint8_t *xa, size_t xa_stride, float *y,  \
                                size_t y_stride) {                                                \
        kvc_gemm_blocks_scalar(B, KVC_BLOCK_BYTES_##t, t##_value, n, rows, T, w, row_bytes, xa,   \
                               xa_stride, y, y_stride);                                           \
    }

/* A 32-value type from t##_codes: value (q - offset) * d, or q * d + m
 * (its offset and whether it has a min from weights.h). */
#define KVC_SCALAR_Q32_TYPE(t)                                                                    \
    static void t##_decode(const uint8_t *block, float *out) {                                    \
        uint8_t q[32];                                                                            \
        t##_codes(block, q);                                                                      \
        if (KVC_HAS_MIN_##t) kvc_decode_min32(block, q, out);                                     \
        else kvc_decode_offset32(block, q, KVC_CODE_OFFSET_##t, out);                             \
    }                                                                                             \
    static float t##_value(const uint8_t *block, const kvc_act_q8_row *a, size_t b) {             \
        uint8_t q[32];                                                                            \
        t##_codes(block, q);                                                                      \
        return KVC_HAS_MIN_##t ? kvc_value_min32(block, q, a, b)                                  \
                               : kvc_value_offset32(block, q, a, b, KVC_CODE_OFFSET_##t);         \
    }                                                                                             \
    KVC_SCALAR_BLOCK_TYPE(t, 32)

/* Q4_K / Q5_K from t##_codes. */
#define KVC_SCALAR_KMIN_TYPE(t)                                                                   \
    static void t##_decode(const uint8_t *block, float *out) {                                    \
        uint8_t q[256];                                                                           \
        t##_codes(block, q);                                                                      \
        kvc_decode_k_min(block, q, out);                                                          \
    }                                                                                             \
    static float t##_value(const uint8_t *block, const kvc_act_q8_row *a, size_t b) {             \
        uint8_t q[256];                                                                           \
        t##_codes(block, q);                                                                      \
        return kvc_value_k_min(block, q, a, b);                                                   \
    }                                                                                             \
    KVC_SCALAR_BLOCK_TYPE(t, 256)

/* A float type with t##_weight. */
#define KVC_SCALAR_FLOAT_TYPE(t)                                                                  \
    void kvc_dequantize_##t(const uint8_t *row, size_t first, size_t count, float *out) {         \
        kvc_dequantize_floats(t##_weight, row, first, count, out);                                \
    }                                                                                             \
    void kvc_gemm_##t##__scalar(size_t n, size_t rows, size_t T, const uint8_t *w,                \
                                size_t row_bytes, const uint8_t *xa, size_t xa_stride, float *y,  \
                                size_t y_stride) {                                                \
        kvc_gemm_floats_scalar(t##_weight, n, rows, T, w, row_bytes, xa, xa_stride, y, y_stride); \
    }

#endif /* KVC_WEIGHTS_SCALAR_H */
