/* gemm-f16-wasmsimd.c -- F16 weights in SIMD128, each half read exactly as
 * f32 (the value of kvc_f16_to_f32, in fewer instructions than the scales'
 * kvc_f16_lanes_to_f32x4: the weights' conversion is the kernel's work);
 * the relaxed set compiles this file again with a fused multiply-add
 * (gemm-f16-wasmrelaxed.c). */
#ifndef KVC_FLOAT_NAME
#define KVC_FLOAT_NAME kvc_gemm_f16__wasmsimd
#define KVC_FLOAT_MAC(acc, w, x) acc = wasm_f32x4_add(acc, wasm_f32x4_mul(w, x))
#endif
#include "weights-wasmsimd.h"

#define KVC_FLOAT_BYTES 2

/* Four halves in the high halves of i32 lanes (x = h << 16) as f32,
 * exactly: the magnitude moved into f32 place (x << 1 >> 4) and scaled by
 * 2^112 (subnormal halves included), then for exponent 31 (Inf, NaN) the
 * f32 exponent raised by the 112 the scaling lacks there (adjust: 112 << 23
 * in those lanes, 0 elsewhere), then the sign. */
static inline v128_t f16_high_halves_to_f32x4(v128_t x, v128_t adjust) {
    const v128_t magnitude = wasm_u32x4_shr(wasm_i32x4_shl(x, 1), 4);
    const v128_t finite = wasm_f32x4_mul(magnitude, wasm_f32x4_const_splat(0x1p112f));
    const v128_t sign = wasm_v128_and(x, wasm_i32x4_const_splat((int32_t)0x80000000u));
    return wasm_v128_or(wasm_i32x4_add(finite, adjust), sign);
}

/* The 8 halves at p: lanes interleaved with zero (unpack patterns, one
 * instruction each), the Inf/NaN adjustment found for all 8 at once. */
static inline void f16_load8(const uint8_t *p, v128_t *low, v128_t *high) {
    const v128_t h = wasm_v128_load(p), zero = wasm_i32x4_const_splat(0);
    const v128_t exponent = wasm_i16x8_const_splat(0x7c00);
    const v128_t adjust = wasm_v128_and(wasm_i16x8_eq(wasm_v128_and(h, exponent), exponent),
                                        wasm_i16x8_const_splat(112 << 7));
    *low = f16_high_halves_to_f32x4(wasm_i16x8_shuffle(zero, h, 0, 8, 1, 9, 2, 10, 3, 11),
                                    wasm_i16x8_shuffle(zero, adjust, 0, 8, 1, 9, 2, 10, 3, 11));
    *high = f16_high_halves_to_f32x4(wasm_i16x8_shuffle(zero, h, 4, 12, 5, 13, 6, 14, 7, 15),
                                     wasm_i16x8_shuffle(zero, adjust, 4, 12, 5, 13, 6, 14, 7, 15));
}
#define KVC_FLOAT_LOAD8 f16_load8

#include "gemm-float-wasmsimd.h"
