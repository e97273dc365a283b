/* gemm-q8_0-wasmsimd.c -- Q8_0 weights in SIMD128 (gemm-q8_0-scalar.c has
 * the layout).  Its codes are signed (-128..127), so the relaxed i8 x i7
 * dot product cannot take them: the relaxed set runs this kernel. */
#include "dot-codes-wasmsimd.h"
#include "weights-wasmsimd.h"

#define KVC_Q32_TYPE q8_0

/* The codes sign-extended to i16 (-128..127), for the SIMD128 dot. */
static inline kvc_codes32 q8_0_codes(const uint8_t *block) {
    const v128_t w0 = wasm_v128_load(block + 2), w1 = wasm_v128_load(block + 18);
    kvc_codes32 c = {{wasm_i16x8_extend_low_i8x16(w0), wasm_i16x8_extend_high_i8x16(w0),
                      wasm_i16x8_extend_low_i8x16(w1), wasm_i16x8_extend_high_i8x16(w1)}};
    return c;
}
#define KVC_Q32_CODES q8_0_codes

#include "gemm-q32-wasmsimd.h"
