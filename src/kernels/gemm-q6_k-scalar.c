/* gemm-q6_k-scalar.c -- Q6_K weights (ggml type 14): super-blocks of 256,
 * 128 bytes of low nibbles ql, 64 bytes of high 2-bit pairs qh, 16 i8
 * scales (one per 16 values), then an f16 d; value = (d * sc_g) * (q - 32).
 * In each half h of 128 values, for l < 32: value 32 k + l takes the low
 * (k = 0, 1) or high (k = 2, 3) nibble of ql[64 h + 32 (k & 1) + l] and bits
 * 2 k, 2 k + 1 of qh[32 h + l].  The reference dequantize and the scalar
 * gemm: v_b = (d * d_a) * S, S = sum_g sc_g (sum q_i a_i - 32 A_g). */
#include "weights-scalar.h"

static void q6_k_codes(const uint8_t *block, uint8_t q[256]) {
    for (size_t h = 0; h < 2; h++) {
        const uint8_t *ql = block + 64 * h, *qh = block + 128 + 32 * h;
        for (size_t k = 0; k < 4; k++) {
            for (size_t l = 0; l < 32; l++) {
                const uint8_t low = ql[32 * (k & 1) + l];
                q[128 * h + 32 * k + l] =
                    (uint8_t)(((k < 2 ? low : low >> 4) & 15) | (((qh[l] >> (2 * k)) & 3) << 4));
            }
        }
    }
}

static void q6_k_decode(const uint8_t *block, float *out) {
    const float d = kvc_load_f16(block + 208);
    const int8_t *sc = (const int8_t *)(block + 192);
    uint8_t q[256];
    q6_k_codes(block, q);
    for (size_t i = 0; i < 256; i++) out[i] = (d * (float)sc[i / 16]) * (float)(q[i] - 32);
}

static float q6_k_value(const uint8_t *block, const kvc_act_q8_row *a, size_t b) {
    const int8_t *sc = (const int8_t *)(block + 192);
    uint8_t q[256];
    q6_k_codes(block, q);
    int32_t S = 0;
    for (size_t g = 0; g < 16; g++) {
        const int32_t dot = kvc_dot_codes(16, q + 16 * g, a->codes + 256 * b + 16 * g);
        S += sc[g] * (dot - 32 * kvc_act_sum16(a, 16 * b + g));
    }
    return (kvc_load_f16(block + 208) * kvc_act_scale(a, b)) * (float)S;
}

KVC_SCALAR_BLOCK_TYPE(q6_k, 256)
