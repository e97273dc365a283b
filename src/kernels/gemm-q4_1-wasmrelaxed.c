/* gemm-q4_1-wasmrelaxed.c -- Q4_1 weights with the relaxed i8 x i7 dot
 * product: gemm-q4_1-wasmsimd.c on dot-codes-wasmrelaxed.h. */
#include "dot-codes-wasmrelaxed.h"
#define KVC_Q32_ISA wasmrelaxed
#include "gemm-q4_1-wasmsimd.c"
