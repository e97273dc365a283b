/* gemm-q5_0-scalar.c -- Q5_0 weights (ggml type 6): blocks of 32, an f16
 * scale d, a u32 of fifth bits (bit i for code i), then 16 bytes of low
 * nibbles as Q4_0's; value = (q - 16) * d.  The reference dequantize and
 * the scalar gemm: v_b = (d * d_a) * (S - 16 A). */
#include "weights-scalar.h"

static void q5_0_codes(const uint8_t *block, uint8_t q[32]) {
    kvc_nibble_codes32(block + 6, q);
    kvc_add_fifth_bits32(block + 2, q);
}

KVC_SCALAR_Q32_TYPE(q5_0)
