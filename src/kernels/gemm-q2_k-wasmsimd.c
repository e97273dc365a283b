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
 * block b of activation rows a[i], i < count (1, or a tile's 4).  Half h's
 * 32 code bytes hold its eight sub-blocks, two for each shift k: bytes
 * 0..15 sub-block 8 h + 2 k, bytes 16..31 sub-block 8 h + 2 k + 1; each
 * sub-block's codes scaled once for every row.  A half a loop turn
 * (unrolled, the engine would load both halves' activations at once and
 * spill them). */
static inline void kmin_dots(const uint8_t *block, v128_t scales_mins, const kvc_act_q8_row *a, size_t count,
                             size_t b, v128_t *S) {
    const v128_t pair = wasm_i8x16_const_splat(3);
    const v128_t sc = wasm_v128_and(scales_mins, wasm_i8x16_const_splat(15));
    for (size_t i = 0; i < count; i++) S[i] = wasm_i32x4_const_splat(0);
#pragma clang loop unroll(disable)
    for (size_t h = 0; h < 2; h++) {
        const v128_t low = wasm_v128_load(block + 16 + 32 * h), high = wasm_v128_load(block + 32 + 32 * h);
        /* sub-blocks 8 h + 2 k and 8 h + 2 k + 1 in lanes 0, 1 */
        v128_t scales = h ? wasm_u16x8_extend_high_u8x16(sc) : wasm_u16x8_extend_low_u8x16(sc);
        for (size_t k = 0; k < 4; k++) {
            /* 16-bit shifts: the bits they carry across a byte fall outside the mask */
            const kvc_codes16 even = kvc_codes16_scaled(wasm_v128_and(wasm_u16x8_shr(low, 2 * k), pair),
                                                        kvc_i16_splat_lane0(scales));
            const kvc_codes16 odd = kvc_codes16_scaled(wasm_v128_and(wasm_u16x8_shr(high, 2 * k), pair),
                                                       kvc_i16_splat_lane1(scales));
            scales = kvc_i16_down2(scales);
            const size_t at = 256 * b + 128 * h + 32 * k;
            for (size_t i = 0; i < count; i++) {
                S[i] = wasm_i32x4_add(S[i], wasm_i32x4_add(kvc_dot16(&even, a[i].codes + at, a[i].codes16 + at),
                                                           kvc_dot16(&odd, a[i].codes + at + 16, a[i].codes16 + at + 16)));
            }
        }
    }
}

#include "gemm-kmin-values-wasmsimd.h"
