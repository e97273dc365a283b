/*
 * gemm-q3_k-wasmsimd.c -- Q3_K weights in SIMD128 (gemm-q3_k-scalar.c has
 * the layout): codes 0..7, two bits shifted out of their byte and the hmask
 * bit as 4, the offset 4 taken back with the activation sums
 * (gemm-koffset-wasmsimd.h).  The relaxed set compiles this file again with
 * its dot (gemm-q3_k-wasmrelaxed.c).
 */
#ifndef KVC_KOFFSET_NAME
#include "dot-codes-wasmsimd.h"
#define KVC_KOFFSET_NAME kvc_gemm_q3_k__wasmsimd
#endif
#include "weights-wasmsimd.h"

#define KVC_KOFFSET_BYTES KVC_BLOCK_BYTES_q3_k
#define KVC_KOFFSET_D_AT 108
#define KVC_KOFFSET_LOG2 2

/* The 16 scales - 32 of the 12 bytes at block + 96, decoded into buffer:
 * the low nibbles of bytes 0..7 (scales 0..7) then their high ones (8..15),
 * and the high two bits from the u32 x of bytes 8..11 -- scale 4 k + i's
 * are bits 2 k, 2 k + 1 of byte i of x, so byte i of lane k of
 * (x, x >> 2, x >> 4, x >> 6) has them as its low two bits. */
static inline const int8_t *koffset_scales(const uint8_t *block, int8_t buffer[16]) {
    const uint8_t *packed = block + 96;
    const v128_t nibble = wasm_i8x16_const_splat(15);
    const v128_t bytes = wasm_v128_load64_zero(packed);
    const v128_t low = wasm_i64x2_shuffle(wasm_v128_and(bytes, nibble),
                                          wasm_v128_and(wasm_u16x8_shr(bytes, 4), nibble), 0, 2);
    const v128_t x = wasm_v128_load32_splat(packed + 8);
    const v128_t x02 = wasm_i32x4_shuffle(x, wasm_u32x4_shr(x, 2), 0, 4, 1, 5);
    const v128_t shifted = wasm_i32x4_shuffle(x02, wasm_u32x4_shr(x02, 4), 0, 1, 4, 5);
    const v128_t high = wasm_i32x4_shl(wasm_v128_and(shifted, wasm_i8x16_const_splat(3)), 4);
    wasm_v128_store(buffer, wasm_i8x16_sub(wasm_v128_or(low, high), wasm_i8x16_const_splat(32)));
    return buffer;
}

/* The codes of sub-blocks i, 2 + i, 4 + i and 6 + i of half h (i < 2), 16
 * per vector, from 16 code bytes and 16 hmask bytes: sub-block 8 h + 2 k + i
 * takes bits 2 k, 2 k + 1 of the code bytes and bit 4 h + k of the hmask
 * ones.  16-bit shifts: the bits they carry across a byte fall outside the
 * masks that follow. */
static inline void koffset_codes(const uint8_t *block, size_t h, size_t i, v128_t q[4]) {
    const v128_t codes = wasm_v128_load(block + 32 + 32 * h + 16 * i);
    const v128_t hmask = wasm_u16x8_shr(wasm_v128_load(block + 16 * i), 4 * h); /* bit 4 h + k to bit k */
    const v128_t pair = wasm_i8x16_const_splat(3), four = wasm_i8x16_const_splat(4);
    q[0] = wasm_v128_or(wasm_v128_and(codes, pair), wasm_v128_and(wasm_i16x8_shl(hmask, 2), four));
    q[1] = wasm_v128_or(wasm_v128_and(wasm_u16x8_shr(codes, 2), pair), wasm_v128_and(wasm_i16x8_shl(hmask, 1), four));
    q[2] = wasm_v128_or(wasm_v128_and(wasm_u16x8_shr(codes, 4), pair), wasm_v128_and(hmask, four));
    q[3] = wasm_v128_or(wasm_v128_and(wasm_u16x8_shr(codes, 6), pair), wasm_v128_and(wasm_u16x8_shr(hmask, 1), four));
}

#include "gemm-koffset-wasmsimd.h"
