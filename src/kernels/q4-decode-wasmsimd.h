/* q4-decode-wasmsimd.h -- a group of 16 channels of a 4-bit row (q4-pack.h)
 * as its int8 codes, code << shift, in registers: what the q4 score kernel
 * and unpack_q4 share.  Each nibble is looked up in a table of the 16 codes
 * a group's shift makes of them (i8x16.swizzle; every index is below 16, so
 * the relaxed swizzle, where the build has it, gives the same bytes in one
 * instruction fewer), where sign-extending a nibble and shifting it by a
 * variable count takes several i8 instructions that wasm does not have. */
#ifndef KVC_Q4_DECODE_WASMSIMD_H
#define KVC_Q4_DECODE_WASMSIMD_H

#include <wasm_simd128.h>

#include "q4-pack.h"

#if defined(__wasm_relaxed_simd__)
#define KVC_Q4_LOOKUP wasm_i8x16_relaxed_swizzle
#else
#define KVC_Q4_LOOKUP wasm_i8x16_swizzle
#endif

/* Row k: the 16 two's complement nibbles u, times 2^k. */
static const int8_t kvc_q4_tables[4][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3, -2, -1},
    {0, 2, 4, 6, 8, 10, 12, 14, -16, -14, -12, -10, -8, -6, -4, -2},
    {0, 4, 8, 12, 16, 20, 24, 28, -32, -28, -24, -20, -16, -12, -8, -4},
    {0, 8, 16, 24, 32, 40, 48, 56, -64, -56, -48, -40, -32, -24, -16, -8},
};

/* The 16 int8 codes of group g (channels 16g..16g+15) of a row whose block
 * holding them is full (32 channels): the low nibbles of the block's 16
 * bytes for an even g, the high ones for an odd g, each looked up in its
 * shift's table.  One group a call, so that a loop over groups has the
 * shape of the q8 kernels' loop over 16 channels (two groups in one body:
 * V8 hoists both groups' loads of the query codes and spills them). */
static inline v128_t kvc_q4_decode_group(const uint8_t *shifts, const uint8_t *packed, size_t g) {
    const v128_t bytes = wasm_v128_load(packed + (g / 2) * (KVC_Q4_BLOCK / 2));
    const v128_t nibbles = wasm_v128_and(wasm_u8x16_shr(bytes, 4 * (unsigned)(g % 2)), wasm_i8x16_const_splat(15));
    return KVC_Q4_LOOKUP(wasm_v128_load(kvc_q4_tables[kvc_q4_shift(shifts, g)]), nibbles);
}

#endif /* KVC_Q4_DECODE_WASMSIMD_H */
