/* q4-decode-wasmsimd.h -- a full 32-channel block of a 4-bit row (q4-pack.h)
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

/* Entry u of table k: the two's complement nibble u times 2^k. */
#define KVC_Q4_TABLE(k)                                                                          \
    wasm_i8x16_const(0, 1 << k, 2 << k, 3 << k, 4 << k, 5 << k, 6 << k, 7 << k, -8 * (1 << k),  \
                     -7 * (1 << k), -6 * (1 << k), -5 * (1 << k), -4 * (1 << k), -3 * (1 << k), \
                     -2 * (1 << k), -1 * (1 << k))

static inline v128_t kvc_q4_table(unsigned shift) {
    switch (shift) {
    case 0: return KVC_Q4_TABLE(0);
    case 1: return KVC_Q4_TABLE(1);
    case 2: return KVC_Q4_TABLE(2);
    default: return KVC_Q4_TABLE(3);
    }
}

/* The block from channel j (a multiple of KVC_Q4_BLOCK, j + 32 <= d): its
 * channels j..j+15 (the low nibbles of its 16 bytes, group j / 16) to *first,
 * j+16..j+31 (the high nibbles, the next group) to *second. */
static inline void kvc_q4_decode_block(const uint8_t *shifts, const uint8_t *packed, size_t j,
                                       v128_t *first, v128_t *second) {
    const size_t g = j / KVC_Q4_GROUP;
    const v128_t bytes = wasm_v128_load(packed + j / 2);
    *first = KVC_Q4_LOOKUP(kvc_q4_table(kvc_q4_shift(shifts, g)), wasm_v128_and(bytes, wasm_i8x16_const_splat(15)));
    *second = KVC_Q4_LOOKUP(kvc_q4_table(kvc_q4_shift(shifts, g + 1)), wasm_u8x16_shr(bytes, 4));
}

#endif /* KVC_Q4_DECODE_WASMSIMD_H */
