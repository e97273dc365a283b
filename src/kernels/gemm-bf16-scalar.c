/* gemm-bf16-scalar.c -- BF16 weights (ggml type 30, the high half of an
 * f32): the reference dequantize and the scalar gemm. */
#include "weights-scalar.h"

static float bf16_weight(const uint8_t *row, size_t j) {
    return kvc_bf16_to_f32(kvc_load_u16(row + 2 * j));
}

KVC_SCALAR_FLOAT_TYPE(bf16)
