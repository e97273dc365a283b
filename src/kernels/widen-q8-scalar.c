#include "kernels.h"
#include "q8-rows.h"

void kvc_widen_q8__scalar(size_t n, size_t d, const uint8_t *qrows, float *rows, float *scales) {
    for (size_t p = 0; p < n; p++) {
        const uint8_t *qrow = qrows + p * kvc_q8_row_bytes(d);
        const int8_t *codes = kvc_q8_row_codes(qrow);
        scales[p] = kvc_q8_row_scale(qrow);
        for (size_t j = 0; j < d; j++) rows[p * d + j] = (float)codes[j];
    }
}
