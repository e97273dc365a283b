/* gemm-q5_k-wasmrelaxed.c -- Q5_K weights with the relaxed i8 x i7 dot
 * product: gemm-q5_k-wasmsimd.c on dot-codes-wasmrelaxed.h. */
#include "dot-codes-wasmrelaxed.h"
#define KVC_KMIN_NAME kvc_gemm_q5_k__wasmrelaxed
#include "gemm-q5_k-wasmsimd.c"
