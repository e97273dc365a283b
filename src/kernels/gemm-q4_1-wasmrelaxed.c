/* gemm-q4_1-wasmrelaxed.c -- Q4_1 weights with the relaxed i8 x i7 dot
 * product: gemm-q4_1-wasmsimd.c on dot-codes-wasmrelaxed.h. */
#include "dot-codes-wasmrelaxed.h"
#define KVC_Q32_NAME kvc_gemm_q4_1__wasmrelaxed
#include "gemm-q4_1-wasmsimd.c"
