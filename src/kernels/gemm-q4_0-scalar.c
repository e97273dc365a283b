/* gemm-q4_0-scalar.c -- Q4_0 weights (ggml type 2): blocks of 32, an f16
 * scale d then 16 bytes of 4-bit codes q, value = (q - 8) * d.  The
 * reference dequantize and the scalar gemm: v_b = (d * d_a) * (S - 8 A). */
#include "weights-scalar.h"

static void q4_0_codes(const uint8_t *block, uint8_t q[32]) {
    kvc_nibble_codes32(block + 2, q);
}

KVC_SCALAR_Q32_TYPE(q4_0)
