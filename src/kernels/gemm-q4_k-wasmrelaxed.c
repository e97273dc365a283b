/* gemm-q4_k-wasmrelaxed.c -- Q4_K weights with the relaxed i8 x i7 dot
 * product: gemm-q4_k-wasmsimd.c on dot-codes-wasmrelaxed.h. */
#include "dot-codes-wasmrelaxed.h"
#define KVC_KMIN_NAME kvc_gemm_q4_k__wasmrelaxed
#include "gemm-q4_k-wasmsimd.c"
