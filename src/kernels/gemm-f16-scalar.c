/* gemm-f16-scalar.c -- F16 weights (ggml type 1, IEEE half): the reference
 * dequantize and the scalar gemm, each weight read exactly as f32. */
#include "weights-scalar.h"

static float f16_weight(const uint8_t *row, size_t j) {
    return kvc_load_f16(row + 2 * j);
}

KVC_SCALAR_FLOAT_TYPE(f16)
