/* gemm-f32-scalar.c -- F32 weights (ggml type 0): the reference dequantize
 * and the scalar gemm, w_j * x_j in four accumulators (weights-scalar.h). */
#include "weights-scalar.h"

static float f32_weight(const uint8_t *row, size_t j) {
    return kvc_load_f32(row + 4 * j);
}

KVC_SCALAR_FLOAT_TYPE(f32)
