/*
 * exp-f32-wasmsimd.h -- kvc_exp_f32 (exp-f32.h) on four lanes: the same
 * operations, lane by lane, so the same bits.
 */
#ifndef KVC_EXP_F32_WASMSIMD_H
#define KVC_EXP_F32_WASMSIMD_H

#include <wasm_simd128.h>

#include "exp-f32.h"

static inline v128_t kvc_exp4_f32(v128_t x) {
    const v128_t n = wasm_f32x4_sub(
        wasm_f32x4_add(wasm_f32x4_mul(x, wasm_f32x4_const_splat(KVC_EXP_LOG2E)),
                       wasm_f32x4_const_splat(KVC_EXP_ROUND)),
        wasm_f32x4_const_splat(KVC_EXP_ROUND));
    v128_t r = wasm_f32x4_sub(x, wasm_f32x4_mul(n, wasm_f32x4_const_splat(KVC_EXP_LN2_HI)));
    r = wasm_f32x4_sub(r, wasm_f32x4_mul(n, wasm_f32x4_const_splat(KVC_EXP_LN2_LO)));
    v128_t p = wasm_f32x4_add(wasm_f32x4_mul(wasm_f32x4_const_splat(KVC_EXP_C5), r),
                              wasm_f32x4_const_splat(KVC_EXP_C4));
    p = wasm_f32x4_add(wasm_f32x4_mul(p, r), wasm_f32x4_const_splat(KVC_EXP_C3));
    p = wasm_f32x4_add(wasm_f32x4_mul(p, r), wasm_f32x4_const_splat(KVC_EXP_C2));
    p = wasm_f32x4_add(wasm_f32x4_mul(p, r), wasm_f32x4_const_splat(KVC_EXP_C1));
    const v128_t scale = wasm_i32x4_shl(
        wasm_i32x4_add(wasm_i32x4_trunc_sat_f32x4(n), wasm_i32x4_const_splat(127)), 23);
    const v128_t e = wasm_f32x4_add(wasm_f32x4_mul(wasm_f32x4_mul(r, scale), p), scale);
    /* Below KVC_EXP_MIN (and for NaN): 0. */
    return wasm_v128_and(e, wasm_f32x4_ge(x, wasm_f32x4_const_splat(KVC_EXP_MIN)));
}

#endif /* KVC_EXP_F32_WASMSIMD_H */
