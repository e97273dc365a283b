#include <string.h>

#include "kernels.h"
#include "q4-pack.h"
#include "q8-rows.h"

void kvc_unpack_q4__scalar(size_t n, size_t d, const uint8_t *q4rows, uint8_t *q8rows) {
    for (size_t p = 0; p < n; p++) {
        const uint8_t *from = q4rows + p * kvc_q4_row_bytes(d), *shifts = from + sizeof(float);
        uint8_t *to = q8rows + p * kvc_q8_row_bytes(d);
        memcpy(to, from, sizeof(float));
        for (size_t block = 0; block < d; block += KVC_Q4_BLOCK)
            kvc_q4_unpack_block(d, block, shifts, shifts + kvc_q4_shift_bytes(d), (int8_t *)(to + sizeof(float)));
    }
}
