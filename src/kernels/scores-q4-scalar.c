#include "kernels.h"
#include "q8-rows.h"

/* The definition: each row unpacked to its int8 codes, then scored as an
 * int8 row. */
void kvc_scores_q4__scalar(size_t G, size_t n, size_t d, const int16_t *codes, const float *scales,
                           const uint8_t *q4rows, float *z, size_t z_stride) {
    uint8_t row[sizeof(float) + KVC_KERNEL_MAX_DIM];
    for (size_t p = 0; p < n; p++) {
        kvc_unpack_q4__scalar(1, d, q4rows + p * kvc_q4_row_bytes(d), row);
        kvc_scores_q8__scalar(G, 1, d, codes, scales, row, z + p, z_stride);
    }
}
