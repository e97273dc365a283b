/* gemm-q4_1-scalar.c -- Q4_1 weights (ggml type 3): blocks of 32, f16 d and
 * m then 16 bytes of 4-bit codes q (as Q4_0's), value = q * d + m.  The
 * reference dequantize and the scalar gemm (llama.cpp's q4_1 x q8_1):
 * v_b = (d * d_a) * S + m * s_a. */
#include "weights-scalar.h"

static void q4_1_codes(const uint8_t *block, uint8_t q[32]) {
    kvc_nibble_codes32(block + 4, q);
}

KVC_SCALAR_Q32_TYPE(q4_1)
