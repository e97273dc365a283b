#include <math.h>

#include "kernels.h"

float kvc_quantize_query__scalar(size_t d, const float *x, float code_max, int16_t *codes) {
    float max_abs = 0.0f;
    int nan = 0;
    for (size_t j = 0; j < d; j++) {
        if (max_abs < fabsf(x[j])) max_abs = fabsf(x[j]);
        nan |= x[j] != x[j];
    }
    if (nan) { /* NaN scales every product it meets */
        for (size_t j = 0; j < d; j++) codes[j] = 0;
        return NAN;
    }
    float scale = max_abs / code_max;
    if (scale < KVC_Q8_SCALE_FLOOR) scale = KVC_Q8_SCALE_FLOOR;
    for (size_t j = 0; j < d; j++) {
        float r = rintf(x[j] / scale);
        if (r > code_max) r = code_max;
        if (r < -code_max) r = -code_max;
        codes[j] = (int16_t)r;
    }
    return scale;
}
