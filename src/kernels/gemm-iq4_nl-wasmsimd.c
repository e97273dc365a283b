/* gemm-iq4_nl-wasmsimd.c -- IQ4_NL weights in SIMD128 (gemm-iq4_nl-scalar.c
 * has the layout): the nibbles looked up in the table by a swizzle, the
 * values sign-extended for the i16 dot.  The table's values are signed
 * (-127..113), so the relaxed i8 x i7 dot product cannot take them: the
 * relaxed set runs this kernel. */
#include "dot-codes-wasmsimd.h"
#include "weights-wasmsimd.h"

#define KVC_Q32_TYPE iq4_nl

static inline kvc_codes32 iq4_nl_codes(const uint8_t *block) {
    v128_t t0, t1;
    kvc_iq4_i8x16(wasm_v128_load(block + 2), &t0, &t1);
    return kvc_codes32_of_i8(t0, t1);
}
#define KVC_Q32_CODES iq4_nl_codes

#include "gemm-q32-wasmsimd.h"
