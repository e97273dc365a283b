/* gemm-q5_1-scalar.c -- Q5_1 weights (ggml type 7): blocks of 32, f16 d and
 * m, a u32 of fifth bits, 16 bytes of low nibbles (as Q5_0's); value =
 * q * d + m.  The reference dequantize and the scalar gemm (llama.cpp's
 * q5_1 x q8_1): v_b = (d * d_a) * S + m * s_a. */
#include "weights-scalar.h"

static void q5_1_codes(const uint8_t *block, uint8_t q[32]) {
    kvc_nibble_codes32(block + 8, q);
    kvc_add_fifth_bits32(block + 4, q);
}

KVC_SCALAR_Q32_TYPE(q5_1)
