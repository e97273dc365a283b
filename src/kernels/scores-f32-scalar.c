#include "kernels.h"

void kvc_scores_f32__scalar(size_t G, size_t n, size_t d, const float *q, const float *keys,
                            float sqrt_d, float *z, size_t z_stride) {
    for (size_t g = 0; g < G; g++) {
        for (size_t p = 0; p < n; p++) {
            float sum = 0.0f;
            for (size_t j = 0; j < d; j++) sum += q[g * d + j] * keys[p * d + j];
            z[g * z_stride + p] = sum / sqrt_d;
        }
    }
}
