/* gemm-q5_k-scalar.c -- Q5_K weights (ggml type 13): super-blocks of 256,
 * f16 d and dmin, 12 bytes of scales and mins (weights-scalar.h), 32 bytes
 * of fifth bits, 128 bytes of low nibbles placed as Q4_K's; value 64 c + l
 * takes bit 2 c of qh[l], value 64 c + 32 + l bit 2 c + 1.  The reference
 * dequantize and the scalar gemm (v_b as weights.c says). */
#include "weights-scalar.h"

static void q5_k_codes(const uint8_t *block, uint8_t q[256]) {
    const uint8_t *qh = block + 16, *qs = block + 48;
    for (size_t c = 0; c < 4; c++) {
        for (size_t l = 0; l < 32; l++) {
            q[64 * c + l] = (uint8_t)((qs[32 * c + l] & 15) | (((qh[l] >> (2 * c)) & 1) << 4));
            q[64 * c + 32 + l] = (uint8_t)((qs[32 * c + l] >> 4) | (((qh[l] >> (2 * c + 1)) & 1) << 4));
        }
    }
}

KVC_SCALAR_KMIN_TYPE(q5_k)
