/* gemm-q5_k-wasmsimd.c -- Q5_K weights in SIMD128 (gemm-q5_k-scalar.c has
 * the layout): codes 0..31, the nibbles with their fifth bits, the mins
 * through the activation sums.  The relaxed set compiles this file again
 * with its dot (gemm-q5_k-wasmrelaxed.c). */
#ifndef KVC_KMIN_NAME
#include "dot-codes-wasmsimd.h"
#define KVC_KMIN_NAME kvc_gemm_q5_k__wasmsimd
#endif
#include "weights-wasmsimd.h"

#define KVC_KMIN_BYTES KVC_BLOCK_BYTES_q5_k

static inline void q5_k_codes(const uint8_t *block, size_t c, v128_t q[4]) {
    const uint8_t *qh = block + 16, *qs = block + 48 + 32 * c;
    kvc_nibbles_i8x16(wasm_v128_load(qs), &q[0], &q[2]);
    kvc_nibbles_i8x16(wasm_v128_load(qs + 16), &q[1], &q[3]);
    const v128_t h0 = wasm_v128_load(qh), h1 = wasm_v128_load(qh + 16);
    const v128_t even = wasm_i8x16_splat((int8_t)(1 << (2 * c))), odd = wasm_i8x16_splat((int8_t)(2 << (2 * c)));
    q[0] = wasm_v128_or(q[0], kvc_bits_as_16(h0, even));
    q[1] = wasm_v128_or(q[1], kvc_bits_as_16(h1, even));
    q[2] = wasm_v128_or(q[2], kvc_bits_as_16(h0, odd));
    q[3] = wasm_v128_or(q[3], kvc_bits_as_16(h1, odd));
}
#define KVC_KMIN_CODES q5_k_codes

#include "gemm-kmin-wasmsimd.h"
