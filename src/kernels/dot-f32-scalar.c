#include "kernels.h"

float kvc_dot_f32__scalar(size_t d, const float *a, const float *b) {
    float sum = 0.0f;
    for (size_t j = 0; j < d; j++) {
        sum += a[j] * b[j];
    }
    return sum;
}
