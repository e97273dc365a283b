#include <math.h>

#include "kernels.h"

void kvc_softmax__scalar(size_t n, float *z) {
    float max = z[0];
    for (size_t p = 1; p < n; p++) {
        if (max < z[p]) max = z[p];
    }
    float sum = 0.0f;
    for (size_t p = 0; p < n; p++) {
        z[p] = expf(z[p] - max);
        sum += z[p];
    }
    for (size_t p = 0; p < n; p++) {
        z[p] = z[p] / sum;
    }
}
