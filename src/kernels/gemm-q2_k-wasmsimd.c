/* gemm-q2_k-wasmsimd.c -- Q2_K weights in SIMD128 (gemm-q2_k-scalar.c has
 * the layout): codes 0..3 shifted out of their bytes, each sub-block of 16
 * dotted and scaled exactly, the mins through the activation sums.  The
 * relaxed set compiles this file again with its dot
 * (gemm-q2_k-wasmrelaxed.c). */
#ifndef KVC_KMIN_NAME
#include "dot-codes-wasmsimd.h"
#define KVC_KMIN_NAME kvc_gemm_q2_k__wasmsimd
#endif
#include "weights-wasmsimd.h"

#define KVC_KMIN_BYTES KVC_BLOCK_BYTES_q2_k
#define KVC_KMIN_D_AT 80

/* The 16 scale bytes as they are: sub-block g's scale in the low nibble of
 * byte g, its min in the high one. */
static inline v128_t kmin_scales_mins(const uint8_t *block) {
    return wasm_v128_load(block);
}

/* Lanes summing to M = sum_g m_g A_g: the mins as i16 against the 16 sums
 * of 16 (the high nibbles by a 16-bit shift and a mask, as
 * kvc_nibbles_i8x16 takes them). */
static inline v128_t kmin_min_sums(v128_t scales_mins, const uint8_t *sums) {
    const v128_t mins = wasm_v128_and(wasm_u16x8_shr(scales_mins, 4), wasm_i8x16_const_splat(15));
    return wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_u16x8_extend_low_u8x16(mins), wasm_v128_load(sums)),
                          wasm_i32x4_dot_i16x8(wasm_u16x8_extend_high_u8x16(mins), wasm_v128_load(sums + 16)));
}

/* S[i] = lanes summing to sum_g sc_g dot_g of one super-block against
 * block b of activation rows a[i], i < count (1, or a tile's 4).  Values
 * 32 j .. 32 j + 31 (j = 4 h + k) are the codes at shift 2 k of half h's 32
 * code bytes: bytes 0..15 sub-block 2 j, bytes 16..31 sub-block 2 j + 1;
 * each sub-block's codes scaled once for every row (its scale read as a
 * scalar and splat, as gemm-koffset-wasmsimd.h does).  32 values a loop
 * turn: unrolled, the kernel took a quarter more code (the package's size)
 * and was no faster. */
static inline void kmin_dots(const uint8_t *block, v128_t scales_mins, const kvc_act_q8_row *a, size_t count,
                             size_t b, v128_t *S) {
    (void)scales_mins; /* the mins' vector: the scales are read one by one */
    const v128_t pair = wasm_i8x16_const_splat(3);
    for (size_t i = 0; i < count; i++) S[i] = wasm_i32x4_const_splat(0);
#pragma clang loop unroll(disable)
    for (size_t j = 0; j < 8; j++) {
        const uint8_t *qs = block + 16 + 32 * (j >> 2);
        const int shift = (int)(2 * (j & 3));
        /* 16-bit shifts: the bits they carry across a byte fall outside the mask */
        const kvc_codes16 even = kvc_codes16_scaled(wasm_v128_and(wasm_u16x8_shr(wasm_v128_load(qs), shift), pair),
                                                    wasm_i16x8_splat((int16_t)(block[2 * j] & 15)));
        const kvc_codes16 odd = kvc_codes16_scaled(wasm_v128_and(wasm_u16x8_shr(wasm_v128_load(qs + 16), shift), pair),
                                                   wasm_i16x8_splat((int16_t)(block[2 * j + 1] & 15)));
        const size_t at = 256 * b + 32 * j;
        for (size_t i = 0; i < count; i++) {
            S[i] = wasm_i32x4_add(S[i], wasm_i32x4_add(kvc_dot16(&even, a[i].codes + at, a[i].codes16 + at),
                                                       kvc_dot16(&odd, a[i].codes + at + 16, a[i].codes16 + at + 16)));
        }
    }
}

#include "gemm-kmin-values-wasmsimd.h"
