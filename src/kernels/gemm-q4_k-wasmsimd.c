/* gemm-q4_k-wasmsimd.c -- Q4_K weights in SIMD128 (gemm-q4_k-scalar.c has
 * the layout): codes 0..15 straight from the nibbles, the mins through the
 * activation sums.  The relaxed set compiles this file again with its dot
 * (gemm-q4_k-wasmrelaxed.c). */
#ifndef KVC_KMIN_NAME
#include "dot-codes-wasmsimd.h"
#define KVC_KMIN_NAME kvc_gemm_q4_k__wasmsimd
#endif
#include "weights-wasmsimd.h"

#define KVC_KMIN_BYTES KVC_BLOCK_BYTES_q4_k

static inline void q4_k_codes(const uint8_t *block, size_t c, v128_t q[4]) {
    const uint8_t *qs = block + 16 + 32 * c;
    kvc_nibbles_i8x16(wasm_v128_load(qs), &q[0], &q[2]);
    kvc_nibbles_i8x16(wasm_v128_load(qs + 16), &q[1], &q[3]);
}
#define KVC_KMIN_CODES q4_k_codes

#include "gemm-kmin-wasmsimd.h"
