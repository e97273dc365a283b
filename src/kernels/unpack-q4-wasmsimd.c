#include <string.h>
#include <wasm_simd128.h>

#include "kernels.h"
#include "q4-pack.h"
#include "q8-rows.h"

/* Each nibble is looked up in a table of the 16 codes its group's shift
 * makes of them (i8x16.swizzle; every index is below 16, so the relaxed
 * swizzle, where the build has it, gives the same bytes in one instruction
 * fewer), where sign-extending a nibble and shifting it by a variable count
 * takes several i8 instructions that wasm does not have. */
#if defined(__wasm_relaxed_simd__)
#define Q4_LOOKUP wasm_i8x16_relaxed_swizzle
#else
#define Q4_LOOKUP wasm_i8x16_swizzle
#endif

/* Row k: the 16 two's complement nibbles u, times 2^k. */
static const int8_t code_tables[4][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3, -2, -1},
    {0, 2, 4, 6, 8, 10, 12, 14, -16, -14, -12, -10, -8, -6, -4, -2},
    {0, 4, 8, 12, 16, 20, 24, 28, -32, -28, -24, -20, -16, -12, -8, -4},
    {0, 8, 16, 24, 32, 40, 48, 56, -64, -56, -48, -40, -32, -24, -16, -8},
};

/* The 32 int8 codes of full block b (channels 32b..32b+31, groups 2b and
 * 2b + 1) of a row: the low nibbles of its 16 bytes, then the high ones,
 * each looked up in its group's shift's table. */
static inline void decode_block(const uint8_t *shifts, const uint8_t *packed, size_t b, v128_t *low_group,
                                v128_t *high_group) {
    const v128_t bytes = wasm_v128_load(packed + b * (KVC_Q4_BLOCK / 2));
    const unsigned shift_pair = kvc_q4_block_shifts(shifts, b);
    *low_group = Q4_LOOKUP(wasm_v128_load(code_tables[shift_pair & 3u]),
                           wasm_v128_and(bytes, wasm_i8x16_const_splat(15)));
    *high_group = Q4_LOOKUP(wasm_v128_load(code_tables[shift_pair >> 2]), wasm_u8x16_shr(bytes, 4));
}

void kvc_unpack_q4__wasmsimd(size_t n, size_t d, const uint8_t *q4rows, uint8_t *q8rows) {
    for (size_t p = 0; p < n; p++) {
        const uint8_t *from = q4rows + p * kvc_q4_row_bytes(d), *shifts = from + sizeof(float);
        const uint8_t *packed = shifts + kvc_q4_shift_bytes(d);
        uint8_t *to = q8rows + p * kvc_q8_row_bytes(d);
        memcpy(to, from, sizeof(float));
        int8_t *codes = (int8_t *)(to + sizeof(float));
        size_t block = 0;
        for (; block + KVC_Q4_BLOCK <= d; block += KVC_Q4_BLOCK) {
            v128_t low_group, high_group;
            decode_block(shifts, packed, block / KVC_Q4_BLOCK, &low_group, &high_group);
            wasm_v128_store(codes + block, low_group);
            wasm_v128_store(codes + block + KVC_Q4_GROUP, high_group);
        }
        if (block < d) kvc_q4_unpack_block(d, block, shifts, packed, codes);
    }
}
