/* gemm-q5_1-wasmsimd.c -- Q5_1 weights in SIMD128 (gemm-q5_1-scalar.c has
 * the layout): codes 0..31, the mins times the activations' value sums.
 * The relaxed set compiles this file again with its dot
 * (gemm-q5_1-wasmrelaxed.c). */
#ifndef KVC_Q32_NAME
#include "dot-codes-wasmsimd.h"
#define KVC_Q32_NAME kvc_gemm_q5_1__wasmsimd
#endif
#include "weights-wasmsimd.h"

#define KVC_Q32_BYTES 24
#define KVC_Q32_OFFSET 0
#define KVC_Q32_MIN 1

static inline kvc_codes32 q5_1_codes(const uint8_t *block) {
    v128_t q0, q1;
    kvc_nibbles_i8x16(wasm_v128_load(block + 8), &q0, &q1);
    kvc_fifth_bits_i8x16(block + 4, &q0, &q1);
    return kvc_codes32_of(q0, q1);
}
#define KVC_Q32_CODES q5_1_codes

#include "gemm-q32-wasmsimd.h"
