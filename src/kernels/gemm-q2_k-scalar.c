/* gemm-q2_k-scalar.c -- Q2_K weights (ggml type 10): super-blocks of 256,
 * 16 scale bytes (sub-block g of 16 values: its 4-bit scale sc_g in the low
 * nibble, its 4-bit min m_g in the high one), 64 bytes of 2-bit codes
 * (weights-scalar.h), then f16 d and dmin; value = (d * sc_g) * q -
 * dmin * m_g, as ggml's dequantize_row_q2_K.  The reference dequantize and
 * the scalar gemm (v_b as weights.c says). */
#include "weights-scalar.h"

static void q2_k_decode(const uint8_t *block, float *out) {
    const float d = kvc_load_f16(block + 80), dmin = kvc_load_f16(block + 82);
    uint8_t q[256];
    kvc_k_2bit_codes(block + 16, q);
    for (size_t g = 0; g < 16; g++) {
        const float d_g = d * (float)(block[g] & 15), m_g = dmin * (float)(block[g] >> 4);
        for (size_t i = 16 * g; i < 16 * g + 16; i++) out[i] = d_g * (float)q[i] - m_g;
    }
}

static float q2_k_value(const uint8_t *block, const kvc_act_q8_row *a, size_t b) {
    uint8_t q[256];
    kvc_k_2bit_codes(block + 16, q);
    int32_t S = 0, M = 0;
    for (size_t g = 0; g < 16; g++) {
        S += (block[g] & 15) * kvc_dot_codes(16, q + 16 * g, a->codes + 256 * b + 16 * g);
        M += (block[g] >> 4) * kvc_act_sum16(a, 16 * b + g);
    }
    return kvc_k_min_value(block + 80, kvc_act_scale(a, b), S, M);
}

KVC_SCALAR_BLOCK_TYPE(q2_k, 256)
