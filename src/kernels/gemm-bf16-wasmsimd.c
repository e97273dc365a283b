/* gemm-bf16-wasmsimd.c -- BF16 weights in SIMD128: each weight moved to the
 * high half of an f32 lane, one shuffle per four; the relaxed set compiles
 * this file again with a fused multiply-add (gemm-bf16-wasmrelaxed.c). */
#ifndef KVC_FLOAT_NAME
#define KVC_FLOAT_NAME kvc_gemm_bf16__wasmsimd
#define KVC_FLOAT_MAC(acc, w, x) acc = wasm_f32x4_add(acc, wasm_f32x4_mul(w, x))
#endif
#include <wasm_simd128.h>

#define KVC_FLOAT_BYTES 2

static inline void bf16_load8(const uint8_t *p, v128_t *low, v128_t *high) {
    const v128_t h = wasm_v128_load(p), zero = wasm_i32x4_const_splat(0);
    *low = wasm_i8x16_shuffle(zero, h, 0, 0, 16, 17, 0, 0, 18, 19, 0, 0, 20, 21, 0, 0, 22, 23);
    *high = wasm_i8x16_shuffle(zero, h, 0, 0, 24, 25, 0, 0, 26, 27, 0, 0, 28, 29, 0, 0, 30, 31);
}
#define KVC_FLOAT_LOAD8 bf16_load8

#include "gemm-float-wasmsimd.h"
