#include <string.h>
#include <wasm_simd128.h>

#include "kernels.h"
#include "q4-pack.h"
#include "q8-rows.h"

void kvc_unpack_q4__wasmsimd(size_t n, size_t d, const uint8_t *q4rows, uint8_t *q8rows) {
    for (size_t p = 0; p < n; p++) {
        const uint8_t *from = q4rows + p * kvc_q4_row_bytes(d), *shifts = from + sizeof(float);
        const uint8_t *packed = shifts + kvc_q4_shift_bytes(d);
        uint8_t *to = q8rows + p * kvc_q8_row_bytes(d);
        memcpy(to, from, sizeof(float));
        int8_t *codes = (int8_t *)(to + sizeof(float));
        size_t block = 0;
        for (; block + KVC_Q4_BLOCK <= d; block += KVC_Q4_BLOCK) {
            /* Two's complement nibbles: the low one shifted up and back, the
             * high one shifted down, both arithmetic; then each half (a
             * group) by its shift. */
            const size_t g = block / KVC_Q4_GROUP;
            const v128_t bytes = wasm_v128_load(packed + block / 2);
            const v128_t lo = wasm_i8x16_shr(wasm_i8x16_shl(bytes, 4), 4);
            const v128_t hi = wasm_i8x16_shr(bytes, 4);
            wasm_v128_store(codes + block, wasm_i8x16_shl(lo, kvc_q4_shift(shifts, g)));
            wasm_v128_store(codes + block + 16, wasm_i8x16_shl(hi, kvc_q4_shift(shifts, g + 1)));
        }
        if (block < d) kvc_q4_unpack_block(d, block, shifts, packed, codes);
    }
}
