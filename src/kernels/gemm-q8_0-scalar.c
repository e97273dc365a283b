/* gemm-q8_0-scalar.c -- Q8_0 weights (ggml type 8): blocks of 32, an f16
 * scale d then 32 i8 codes, value = code * d.  The reference dequantize and
 * the scalar gemms, of the file's layout and of Q8_0x4 (pack-q8_0x4.c):
 * v_b = (d * d_a) * S, S = sum w_i a_i. */
#include "weights-scalar.h"

static void q8_0_decode(const uint8_t *block, float *out) {
    const float d = kvc_load_f16(block);
    const int8_t *codes = (const int8_t *)(block + 2);
    for (size_t i = 0; i < 32; i++) out[i] = (float)codes[i] * d;
}

static float q8_0_value(const uint8_t *block, const kvc_act_q8_row *a, size_t b) {
    const int32_t S = kvc_dot_signed_codes(32, (const int8_t *)(block + 2), a->codes + 32 * b);
    return (kvc_load_f16(block) * kvc_act_scale(a, b)) * (float)S;
}

KVC_SCALAR_BLOCK_TYPE(q8_0, 32)
KVC_SCALAR_PACKED_GEMM(q8_0x4, q8_0, 4, 32)
