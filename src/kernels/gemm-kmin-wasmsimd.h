/*
 * gemm-kmin-wasmsimd.h -- Q4_K's and Q5_K's sub-blocks of 32 for the gemm
 * of a k-quant with scales and mins (gemm-kmin-values-wasmsimd.h): a type's
 * file defines
 *   KVC_KMIN_NAME             the function
 *   KVC_KMIN_BYTES            bytes per super-block (f16 d, f16 dmin, 12
 *                             bytes of scales and mins, then codes)
 *   KVC_KMIN_CODES(b, k, q)   the 64 codes k of super-block b (sub-blocks
 *                             2 k and 2 k + 1) as q[0..3], 16 each, 0..31
 * and includes this file, after one of the dot-codes headers.
 */
#include "weights-wasmsimd.h"

#define KVC_KMIN_D_AT 0

/* The eight scales then the eight mins of the 12 bytes at block + 4. */
static inline v128_t kmin_scales_mins(const uint8_t *block) {
    return kvc_k_scales_mins(block + 4);
}

/* Lanes summing to M = sum_j m_j A_j: the mins (bytes 8..15 of
 * scales_mins) as i16, each twice, against the 16 sums of 16. */
static inline v128_t kmin_min_sums(v128_t scales_mins, const uint8_t *sums) {
    /* widened, then each i16 twice: unpacks, one instruction each */
    const v128_t mins = wasm_u16x8_extend_high_u8x16(scales_mins);
    const v128_t m_low = wasm_i16x8_shuffle(mins, mins, 0, 8, 1, 9, 2, 10, 3, 11);
    const v128_t m_high = wasm_i16x8_shuffle(mins, mins, 4, 12, 5, 13, 6, 14, 7, 15);
    return wasm_i32x4_add(wasm_i32x4_dot_i16x8(m_low, wasm_v128_load(sums)),
                          wasm_i32x4_dot_i16x8(m_high, wasm_v128_load(sums + 16)));
}

/* S[i] = lanes summing to sum_j sc_j dot_j of one super-block against
 * block b of activation rows a[i], i < count (1, or a tile's 4): each 64
 * codes unpacked and scaled once for every row, one chunk per loop turn
 * (unrolled, the engine would load every chunk's activations at once and
 * spill them). */
static inline void kmin_dots(const uint8_t *block, v128_t scales_mins, const kvc_act_q8_row *a,
                             size_t count, size_t b, v128_t *S) {
    v128_t scales = wasm_u16x8_extend_low_u8x16(scales_mins); /* sub-blocks 2 k, 2 k + 1 in lanes 0, 1 */
    for (size_t i = 0; i < count; i++) S[i] = wasm_i32x4_const_splat(0);
#pragma clang loop unroll(disable)
    for (size_t k = 0; k < 4; k++) {
        v128_t q[4];
        KVC_KMIN_CODES(block, k, q);
        const kvc_codes32 even = kvc_codes32_scaled(q[0], q[1], kvc_i16_splat_lane0(scales));
        const kvc_codes32 odd = kvc_codes32_scaled(q[2], q[3], kvc_i16_splat_lane1(scales));
        scales = kvc_i16_down2(scales);
        for (size_t i = 0; i < count; i++) {
            const size_t at = 256 * b + 64 * k;
            S[i] = wasm_i32x4_add(S[i], wasm_i32x4_add(kvc_dot32(&even, a[i].codes + at, a[i].codes16 + at),
                                                       kvc_dot32(&odd, a[i].codes + at + 32, a[i].codes16 + at + 32)));
        }
    }
}

#include "gemm-kmin-values-wasmsimd.h"
