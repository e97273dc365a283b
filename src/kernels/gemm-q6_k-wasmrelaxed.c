/* gemm-q6_k-wasmrelaxed.c -- Q6_K weights with the relaxed i8 x i7 dot
 * product: gemm-q6_k-wasmsimd.c on dot-codes-wasmrelaxed.h. */
#include "dot-codes-wasmrelaxed.h"
#define KVC_KOFFSET_NAME kvc_gemm_q6_k__wasmrelaxed
#include "gemm-q6_k-wasmsimd.c"
