/*
 * gemm-q6_k-wasmsimd.c -- Q6_K weights in SIMD128 (gemm-q6_k-scalar.c has
 * the layout): codes 0..63 put together from their nibble and their two
 * high bits, the offset 32 taken back with the activation sums
 * (gemm-koffset-wasmsimd.h).  The relaxed set compiles this file again with
 * its dot (gemm-q6_k-wasmrelaxed.c).
 */
#ifndef KVC_KOFFSET_NAME
#include "dot-codes-wasmsimd.h"
#define KVC_KOFFSET_NAME kvc_gemm_q6_k__wasmsimd
#endif
#include "weights-wasmsimd.h"

#define KVC_KOFFSET_BYTES KVC_BLOCK_BYTES_q6_k
#define KVC_KOFFSET_D_AT 208
#define KVC_KOFFSET_LOG2 5

/* The i8 scales as the block stores them. */
static inline const int8_t *koffset_scales(const uint8_t *block, int8_t buffer[16]) {
    (void)buffer;
    return (const int8_t *)(block + 192);
}

/* The codes of sub-blocks i, 2 + i, 4 + i and 6 + i of half h (i < 2), 16
 * per vector: three loads make all four.  The shifts are 16-bit ones (one
 * instruction; an 8-bit shift is three more on x86, for its mask): the bits
 * they carry across a byte boundary fall outside the mask that follows. */
static inline void koffset_codes(const uint8_t *block, size_t h, size_t i, v128_t q[4]) {
    const uint8_t *ql = block + 64 * h + 16 * i, *qh = block + 128 + 32 * h + 16 * i;
    const v128_t nibble = wasm_i8x16_const_splat(15), pair = wasm_i8x16_const_splat(0x30);
    const v128_t low0 = wasm_v128_load(ql), low1 = wasm_v128_load(ql + 32), high = wasm_v128_load(qh);
    q[0] = wasm_v128_or(wasm_v128_and(low0, nibble), wasm_v128_and(wasm_i16x8_shl(high, 4), pair));
    q[1] = wasm_v128_or(wasm_v128_and(low1, nibble), wasm_v128_and(wasm_i16x8_shl(high, 2), pair));
    q[2] = wasm_v128_or(wasm_v128_and(wasm_u16x8_shr(low0, 4), nibble), wasm_v128_and(high, pair));
    q[3] = wasm_v128_or(wasm_v128_and(wasm_u16x8_shr(low1, 4), nibble), wasm_v128_and(wasm_u16x8_shr(high, 2), pair));
}

#include "gemm-koffset-wasmsimd.h"
