#include "kernels.h"
#include "q8-rows.h"

void kvc_weighted_sum_q8__scalar(size_t G, size_t n, size_t d, const int16_t *w16, size_t w_stride,
                                 const float *w_scales, const uint8_t *rows, float *out) {
    const size_t row_bytes = kvc_q8_row_bytes(d);
    for (size_t g = 0; g < G; g++) {
        const int16_t *w = w16 + g * w_stride;
        for (size_t j = 0; j < d; j++) {
            int32_t acc = 0;
            for (size_t p = 0; p < n; p++)
                acc += (int32_t)w[p] * kvc_q8_row_codes(rows + p * row_bytes)[j];
            out[g * d + j] = out[g * d + j] + (float)acc * w_scales[g];
        }
    }
}
