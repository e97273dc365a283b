/* gemm-q4_1-wasmsimd.c -- Q4_1 weights in SIMD128 (gemm-q4_1-scalar.c has
 * the layout): the nibbles as codes 0..15, the mins times the activations'
 * value sums.  The relaxed set compiles this file again with its
 * dot (gemm-q4_1-wasmrelaxed.c). */
#define KVC_Q32_TYPE q4_1
#define KVC_Q32_CODES(block) q32_nibble_codes((block) + 4)

#include "gemm-q32-wasmsimd.h"
