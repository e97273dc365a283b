/* gemm-f16-wasmsimd.c -- F16 weights in SIMD128, each half read exactly as
 * f32 (kvc_f16_lanes_to_f32x4); the relaxed set compiles this file again
 * with a fused multiply-add (gemm-f16-wasmrelaxed.c). */
#ifndef KVC_FLOAT_NAME
#define KVC_FLOAT_NAME kvc_gemm_f16__wasmsimd
#define KVC_FLOAT_MAC(acc, w, x) acc = wasm_f32x4_add(acc, wasm_f32x4_mul(w, x))
#endif
#include "weights-wasmsimd.h"

#define KVC_FLOAT_BYTES 2

static inline void f16_load8(const uint8_t *p, v128_t *low, v128_t *high) {
    const v128_t h = wasm_v128_load(p);
    *low = kvc_f16_lanes_to_f32x4(wasm_u32x4_extend_low_u16x8(h));
    *high = kvc_f16_lanes_to_f32x4(wasm_u32x4_extend_high_u16x8(h));
}
#define KVC_FLOAT_LOAD8 f16_load8

#include "gemm-float-wasmsimd.h"
