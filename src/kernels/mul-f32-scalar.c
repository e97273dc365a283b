#include "kernels.h"

void kvc_mul_f32__scalar(size_t d, const float *a, const float *b, float *y) {
    for (size_t j = 0; j < d; j++) {
        y[j] = a[j] * b[j];
    }
}
