#include "kernels.h"

void kvc_scale_f32__scalar(size_t n, float a, float *x) {
    for (size_t j = 0; j < n; j++) x[j] = x[j] * a;
}
