#include "kernels.h"

float kvc_dot_f32_i8__scalar(size_t d, const float *a, const int8_t *codes) {
    float sum = 0.0f;
    for (size_t j = 0; j < d; j++) {
        sum += a[j] * (float)codes[j];
    }
    return sum;
}
