/*
 * sigmoid-f32-wasmsimd.h -- kvc_times_sigmoid_f32 (sigmoid-f32.h) on four
 * lanes: the same operations, lane by lane, so the same bits.
 */
#ifndef KVC_SIGMOID_F32_WASMSIMD_H
#define KVC_SIGMOID_F32_WASMSIMD_H

#include <wasm_simd128.h>

#include "exp-f32-wasmsimd.h"

static inline v128_t kvc_times_sigmoid4_f32(v128_t x, v128_t z) {
    const v128_t t = kvc_exp4_f32(wasm_f32x4_neg(wasm_f32x4_abs(z)));
    const v128_t numerator = wasm_v128_bitselect(x, wasm_f32x4_mul(x, t), wasm_f32x4_ge(z, wasm_f32x4_const_splat(0.0f)));
    return wasm_f32x4_div(numerator, wasm_f32x4_add(wasm_f32x4_const_splat(1.0f), t));
}

#endif /* KVC_SIGMOID_F32_WASMSIMD_H */
