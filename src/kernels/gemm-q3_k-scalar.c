/* gemm-q3_k-scalar.c -- Q3_K weights (ggml type 11): super-blocks of 256,
 * 32 bytes hmask, 64 bytes of 2-bit codes (weights-scalar.h), 12 bytes of
 * 6-bit scales, then an f16 d.  Value i's 3-bit code q is its two bits and,
 * as bit 2, bit 4 h + k of hmask[l] (i = 128 h + 32 k + l); value =
 * (d * (sc_g - 32)) * (q - 4), as ggml's dequantize_row_q3_K (which takes
 * 4 off where the hmask bit is clear).  Sub-block g's scale: its low 4 bits
 * are the low (g < 8) or high nibble of scale byte g mod 8, its high 2 bits
 * bits 2 (g / 4), 2 (g / 4) + 1 of byte 8 + g mod 4.  The reference
 * dequantize and the scalar gemm: v_b = (d * d_a) * S, S = sum_g sc_g
 * (sum q_i a_i - 4 A_g), sc_g the scale - 32. */
#include "weights-scalar.h"

static void q3_k_codes(const uint8_t *block, uint8_t q[256]) {
    const uint8_t *hmask = block;
    kvc_k_2bit_codes(block + 32, q);
    for (size_t i = 0; i < 256; i++) q[i] |= (uint8_t)(((hmask[i % 32] >> (i / 32)) & 1) << 2);
}

static int32_t q3_k_scale(const uint8_t *block, size_t g) {
    const uint8_t *scales = block + 96;
    const int32_t low = g < 8 ? scales[g] & 15 : scales[g - 8] >> 4;
    const int32_t high = (scales[8 + g % 4] >> (2 * (g / 4))) & 3;
    return (low | (high << 4)) - 32;
}

static void q3_k_decode(const uint8_t *block, float *out) {
    const float d = kvc_load_f16(block + 108);
    uint8_t q[256];
    q3_k_codes(block, q);
    for (size_t g = 0; g < 16; g++) {
        const float d_g = d * (float)q3_k_scale(block, g);
        for (size_t i = 16 * g; i < 16 * g + 16; i++) out[i] = d_g * (float)(q[i] - 4);
    }
}

static float q3_k_value(const uint8_t *block, const kvc_act_q8_row *a, size_t b) {
    uint8_t q[256];
    q3_k_codes(block, q);
    int32_t S = 0;
    for (size_t g = 0; g < 16; g++) {
        const int32_t dot = kvc_dot_codes(16, q + 16 * g, a->codes + 256 * b + 16 * g);
        S += q3_k_scale(block, g) * (dot - 4 * kvc_act_sum16(a, 16 * b + g));
    }
    return (kvc_load_f16(block + 108) * kvc_act_scale(a, b)) * (float)S;
}

KVC_SCALAR_BLOCK_TYPE(q3_k, 256)
