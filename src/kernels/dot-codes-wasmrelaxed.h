/* dot-codes-wasmrelaxed.h -- dot-codes-wasmsimd.h's three dots with
 * i32x4.relaxed_dot_i8x16_i7x16_add_s: the activation codes as the first
 * (i8) operand, the weight codes (0..63, never 128 or more) as the second.
 * With its second operand in 0..127 the instruction is exact and the same
 * on every engine (no i16 pair can saturate: 2 * 128 * 127 < 2^15); fed
 * anything else it is not, so nothing else reaches it. */
#ifndef KVC_DOT_CODES_H
#define KVC_DOT_CODES_H

#include <wasm_simd128.h>

static inline v128_t kvc_dot32_codes(v128_t q0, v128_t q1, v128_t a0, v128_t a1) {
    const v128_t zero = wasm_i32x4_const_splat(0);
    return wasm_i32x4_relaxed_dot_i8x16_i7x16_add(a1, q1, wasm_i32x4_relaxed_dot_i8x16_i7x16_add(a0, q0, zero));
}

static inline v128_t kvc_dot32_codes_scaled(v128_t q0, v128_t q1, v128_t a0, v128_t a1, int32_t sc) {
    return wasm_i32x4_mul(kvc_dot32_codes(q0, q1, a0, a1), wasm_i32x4_splat(sc));
}

static inline v128_t kvc_dot16_codes_scaled(v128_t q, v128_t a, int32_t sc) {
    const v128_t zero = wasm_i32x4_const_splat(0);
    return wasm_i32x4_mul(wasm_i32x4_relaxed_dot_i8x16_i7x16_add(a, q, zero), wasm_i32x4_splat(sc));
}

#endif /* KVC_DOT_CODES_H */
