#include "kernels.h"

void kvc_dequantize_row__scalar(size_t d, const int8_t *codes, float scale, const float *field,
                                float *x) {
    for (size_t j = 0; j < d; j++) {
        x[j] = ((float)codes[j] * scale) * field[j];
    }
}
