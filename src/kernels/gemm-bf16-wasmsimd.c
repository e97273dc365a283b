/* gemm-bf16-wasmsimd.c -- BF16 weights in SIMD128: each weight moved to the
 * high half of an f32 lane, one unpack per four; the relaxed set compiles
 * this file again with a fused multiply-add (gemm-bf16-wasmrelaxed.c). */
#ifndef KVC_FLOAT_NAME
#define KVC_FLOAT_NAME kvc_gemm_bf16__wasmsimd
#define KVC_FLOAT_MAC(acc, w, x) acc = wasm_f32x4_add(acc, wasm_f32x4_mul(w, x))
#endif
#include <wasm_simd128.h>

#define KVC_FLOAT_BYTES 2

/* Zero's 16-bit lanes interleaved with the weights': the patterns of x86's
 * punpcklwd / punpckhwd, which engines emit for them (an arbitrary shuffle
 * costs a pshufb and its mask). */
static inline void bf16_load8(const uint8_t *p, v128_t *low, v128_t *high) {
    const v128_t h = wasm_v128_load(p), zero = wasm_i32x4_const_splat(0);
    *low = wasm_i16x8_shuffle(zero, h, 0, 8, 1, 9, 2, 10, 3, 11);
    *high = wasm_i16x8_shuffle(zero, h, 4, 12, 5, 13, 6, 14, 7, 15);
}
#define KVC_FLOAT_LOAD8 bf16_load8

#include "gemm-float-wasmsimd.h"
