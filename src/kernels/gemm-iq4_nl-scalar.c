/* gemm-iq4_nl-scalar.c -- IQ4_NL weights (ggml type 20): blocks of 32, an
 * f16 scale d then 16 bytes of 4-bit indices q (Q4_0's packing) into ggml's
 * non-linear table kvalues_iq4nl (weights.h), value = d * table[q].  The
 * reference dequantize and the scalar gemm: v_b = (d * d_a) * S,
 * S = sum table[q_i] a_i (llama.cpp's vec_dot against q8_0). */
#include "weights-scalar.h"

static void iq4_nl_decode(const uint8_t *block, float *out) {
    const float d = kvc_load_f16(block);
    int8_t t[32];
    kvc_iq4_codes32(block + 2, t);
    for (size_t i = 0; i < 32; i++) out[i] = d * (float)t[i];
}

static float iq4_nl_value(const uint8_t *block, const kvc_act_q8_row *a, size_t b) {
    int8_t t[32];
    kvc_iq4_codes32(block + 2, t);
    const int32_t S = kvc_dot_signed_codes(32, t, a->codes + 32 * b);
    return (kvc_load_f16(block) * kvc_act_scale(a, b)) * (float)S;
}

KVC_SCALAR_BLOCK_TYPE(iq4_nl, 32)
