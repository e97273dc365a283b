/* gemm-q8_0-wasmsimd.c -- Q8_0 weights in SIMD128 (gemm-q8_0-scalar.c has
 * the layout).  Its codes are signed (-128..127), so the relaxed i8 x i7
 * dot product cannot take them: the relaxed set runs this kernel. */
#include "weights-wasmsimd.h"

#define KVC_Q32_NAME kvc_gemm_q8_0__wasmsimd
#define KVC_Q32_BYTES 34
#define KVC_Q32_OFFSET 0
#define KVC_Q32_MIN 0

static inline void q8_0_codes(const uint8_t *block, v128_t *q0, v128_t *q1) {
    *q0 = wasm_v128_load(block + 2);
    *q1 = wasm_v128_load(block + 18);
}
#define KVC_Q32_CODES q8_0_codes

/* i8 x i8 products (|w a| <= 128 * 127) two to an i16 lane, then widened. */
static inline v128_t q8_0_dot(v128_t w0, v128_t w1, v128_t a0, v128_t a1) {
    const v128_t p0 = wasm_i16x8_add(wasm_i16x8_extmul_low_i8x16(w0, a0), wasm_i16x8_extmul_high_i8x16(w0, a0));
    const v128_t p1 = wasm_i16x8_add(wasm_i16x8_extmul_low_i8x16(w1, a1), wasm_i16x8_extmul_high_i8x16(w1, a1));
    return wasm_i32x4_add(wasm_i32x4_extadd_pairwise_i16x8(p0), wasm_i32x4_extadd_pairwise_i16x8(p1));
}
#define KVC_Q32_DOT q8_0_dot

#include "gemm-q32-wasmsimd.h"
