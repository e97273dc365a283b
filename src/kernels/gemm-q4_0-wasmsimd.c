/* gemm-q4_0-wasmsimd.c -- Q4_0 weights in SIMD128 (gemm-q4_0-scalar.c has
 * the layout): the nibbles as codes 0..15, the offset 8 taken back with the
 * activation sums.  The relaxed set compiles this file again with its
 * dot (gemm-q4_0-wasmrelaxed.c). */
#define KVC_Q32_TYPE q4_0
#define KVC_Q32_CODES(block) q32_nibble_codes((block) + 2)

#include "gemm-q32-wasmsimd.h"
