/* gemm-iq4_xs-scalar.c -- IQ4_XS weights (ggml type 23): super-blocks of
 * 256, an f16 d, the u16 scales_h, 4 bytes scales_l (eight 6-bit sub-block
 * scales ls_j, weights-scalar.h), then 128 bytes of 4-bit indices q, 16
 * bytes per sub-block of 32 in Q4_0's packing, into ggml's table
 * kvalues_iq4nl (weights.h); value = (d * (ls_j - 32)) * table[q], as
 * ggml's dequantize_row_iq4_xs.  The reference dequantize and the scalar
 * gemm: v_b = (d * d_a) * S, S = sum_j (ls_j - 32) sum_{i in j} table[q_i]
 * a_i (llama.cpp's vec_dot against q8_K, in integers as its AVX2 code). */
#include "weights-scalar.h"

static void iq4_xs_decode(const uint8_t *block, float *out) {
    const float d = kvc_load_f16(block);
    for (size_t j = 0; j < 8; j++) {
        const float d_j = d * (float)kvc_iq4_xs_scale(block, j);
        int8_t t[32];
        kvc_iq4_codes32(block + 8 + 16 * j, t);
        for (size_t i = 0; i < 32; i++) out[32 * j + i] = d_j * (float)t[i];
    }
}

static float iq4_xs_value(const uint8_t *block, const kvc_act_q8_row *a, size_t b) {
    int32_t S = 0;
    for (size_t j = 0; j < 8; j++) {
        int8_t t[32];
        kvc_iq4_codes32(block + 8 + 16 * j, t);
        S += kvc_iq4_xs_scale(block, j) * kvc_dot_signed_codes(32, t, a->codes + 256 * b + 32 * j);
    }
    return (kvc_load_f16(block) * kvc_act_scale(a, b)) * (float)S;
}

KVC_SCALAR_BLOCK_TYPE(iq4_xs, 256)
