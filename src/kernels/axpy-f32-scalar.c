#include "kernels.h"

void kvc_axpy_f32__scalar(size_t d, float alpha, const float *x, float *y) {
    for (size_t j = 0; j < d; j++) {
        y[j] += alpha * x[j];
    }
}
