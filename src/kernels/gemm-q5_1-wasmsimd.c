/* gemm-q5_1-wasmsimd.c -- Q5_1 weights in SIMD128 (gemm-q5_1-scalar.c has
 * the layout): codes 0..31, the mins times the activations' value sums.
 * The relaxed set compiles this file again with its dot
 * (gemm-q5_1-wasmrelaxed.c). */
#define KVC_Q32_TYPE q5_1
#define KVC_Q32_CODES(block) q32_fifth_bit_codes((block) + 8, (block) + 4)

#include "gemm-q32-wasmsimd.h"
