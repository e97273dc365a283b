/* gemm-q5_0-wasmrelaxed.c -- Q5_0 weights with the relaxed i8 x i7 dot
 * product: gemm-q5_0-wasmsimd.c on dot-codes-wasmrelaxed.h. */
#include "dot-codes-wasmrelaxed.h"
#define KVC_Q32_ISA wasmrelaxed
#include "gemm-q5_0-wasmsimd.c"
