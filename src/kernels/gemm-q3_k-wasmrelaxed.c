/* gemm-q3_k-wasmrelaxed.c -- Q3_K weights with the relaxed i8 x i7 dot
 * product: gemm-q3_k-wasmsimd.c on dot-codes-wasmrelaxed.h. */
#include "dot-codes-wasmrelaxed.h"
#define KVC_KOFFSET_NAME kvc_gemm_q3_k__wasmrelaxed
#include "gemm-q3_k-wasmsimd.c"
