/* gemm-q4_k-scalar.c -- Q4_K weights (ggml type 12): super-blocks of 256,
 * f16 d and dmin, 12 bytes of scales and mins (weights-scalar.h), then 128
 * bytes of 4-bit codes: for each 64 values c, byte 32 c + l holds value
 * 64 c + l in its low nibble and 64 c + 32 + l in its high one.  The
 * reference dequantize and the scalar gemms, of the file's layout and of
 * Q4_Kx4 (pack-q4_kx4.c; v_b as weights.c says). */
#include "weights-scalar.h"

static void q4_k_codes(const uint8_t *block, uint8_t q[256]) {
    const uint8_t *qs = block + 16;
    for (size_t c = 0; c < 4; c++) {
        for (size_t l = 0; l < 32; l++) {
            q[64 * c + l] = qs[32 * c + l] & 15;
            q[64 * c + 32 + l] = qs[32 * c + l] >> 4;
        }
    }
}

KVC_SCALAR_KMIN_TYPE(q4_k)
KVC_SCALAR_PACKED_GEMM(q4_kx4, q4_k, 4, 256)
