/* gemm-q2_k-wasmrelaxed.c -- Q2_K weights with the relaxed i8 x i7 dot
 * product: gemm-q2_k-wasmsimd.c on dot-codes-wasmrelaxed.h. */
#include "dot-codes-wasmrelaxed.h"
#define KVC_KMIN_NAME kvc_gemm_q2_k__wasmrelaxed
#include "gemm-q2_k-wasmsimd.c"
