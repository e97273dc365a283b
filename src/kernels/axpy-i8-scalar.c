#include "kernels.h"

void kvc_axpy_i8__scalar(size_t d, float alpha, const int8_t *codes, float *y) {
    for (size_t j = 0; j < d; j++) {
        y[j] += alpha * (float)codes[j];
    }
}
