/* gemm-q5_0-wasmsimd.c -- Q5_0 weights in SIMD128 (gemm-q5_0-scalar.c has
 * the layout): codes 0..31, the offset 16 taken back with the activation
 * sums.  The relaxed set compiles this file again with its
 * dot (gemm-q5_0-wasmrelaxed.c). */
#ifndef KVC_Q32_NAME
#include "dot-codes-wasmsimd.h"
#define KVC_Q32_NAME kvc_gemm_q5_0__wasmsimd
#endif
#include "weights-wasmsimd.h"

#define KVC_Q32_BYTES 22
#define KVC_Q32_OFFSET 16
#define KVC_Q32_MIN 0

static inline kvc_codes32 q5_0_codes(const uint8_t *block) {
    v128_t q0, q1;
    kvc_nibbles_i8x16(wasm_v128_load(block + 6), &q0, &q1);
    kvc_fifth_bits_i8x16(block + 2, &q0, &q1);
    return kvc_codes32_of(q0, q1);
}
#define KVC_Q32_CODES q5_0_codes

#include "gemm-q32-wasmsimd.h"
