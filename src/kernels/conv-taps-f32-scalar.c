#include "kernels.h"

void kvc_conv_taps_f32__scalar(size_t C, size_t K, const float *x, const float *w, float *y) {
    for (size_t c = 0; c < C; c++) {
        float acc = 0.0f;
        for (size_t k = 0; k < K; k++) acc = acc + x[k * C + c] * w[k * C + c];
        y[c] = acc;
    }
}
