/* gemm-q8_0-wasmsimd.c -- Q8_0 weights in SIMD128 (gemm-q8_0-scalar.c has
 * the layout).  Its codes are signed (-128..127), so the relaxed i8 x i7
 * dot product cannot take them: the relaxed set runs this kernel. */
#include "dot-codes-wasmsimd.h"
#include "weights-wasmsimd.h"

#define KVC_Q32_TYPE q8_0

static inline kvc_codes32 q8_0_codes(const uint8_t *block) {
    return kvc_codes32_of_i8(wasm_v128_load(block + 2), wasm_v128_load(block + 18));
}
#define KVC_Q32_CODES q8_0_codes

#include "gemm-q32-wasmsimd.h"
