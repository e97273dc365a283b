#include <string.h>
#include <wasm_simd128.h>

#include "kernels.h"
#include "q4-decode-wasmsimd.h"
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
            wasm_v128_store(codes + block, kvc_q4_decode_group(shifts, packed, block / KVC_Q4_GROUP));
            wasm_v128_store(codes + block + 16, kvc_q4_decode_group(shifts, packed, block / KVC_Q4_GROUP + 1));
        }
        if (block < d) kvc_q4_unpack_block(d, block, shifts, packed, codes);
    }
}
