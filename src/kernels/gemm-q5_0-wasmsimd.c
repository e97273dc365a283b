/* gemm-q5_0-wasmsimd.c -- Q5_0 weights in SIMD128 (gemm-q5_0-scalar.c has
 * the layout): codes 0..31, the offset 16 taken back with the activation
 * sums.  The relaxed set compiles this file again with its
 * dot (gemm-q5_0-wasmrelaxed.c). */
#define KVC_Q32_TYPE q5_0
#define KVC_Q32_CODES(block) q32_fifth_bit_codes((block) + 6, (block) + 2)

#include "gemm-q32-wasmsimd.h"
