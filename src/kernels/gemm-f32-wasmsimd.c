/* gemm-f32-wasmsimd.c -- F32 weights in SIMD128; the relaxed set compiles
 * this file again with a fused multiply-add (gemm-f32-wasmrelaxed.c). */
#ifndef KVC_FLOAT_NAME
#define KVC_FLOAT_NAME kvc_gemm_f32__wasmsimd
#define KVC_FLOAT_MAC(acc, w, x) acc = wasm_f32x4_add(acc, wasm_f32x4_mul(w, x))
#endif
#include <wasm_simd128.h>

#define KVC_FLOAT_BYTES 4

static inline void f32_load8(const uint8_t *p, v128_t *low, v128_t *high) {
    *low = wasm_v128_load(p);
    *high = wasm_v128_load(p + 16);
}
#define KVC_FLOAT_LOAD8 f32_load8

#include "gemm-float-wasmsimd.h"
