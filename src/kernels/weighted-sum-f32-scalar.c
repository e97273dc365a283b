#include "kernels.h"

void kvc_weighted_sum_f32__scalar(size_t G, size_t n, size_t d, const float *w, size_t w_stride,
                                  const float *rows, float *out) {
    for (size_t g = 0; g < G; g++) {
        for (size_t p = 0; p < n; p++) {
            const float weight = w[g * w_stride + p];
            for (size_t j = 0; j < d; j++) out[g * d + j] += weight * rows[p * d + j];
        }
    }
}
