#include <math.h>

#include "kernels.h"

/* x / c, saturated so that a huge x over a tiny field value stays finite. */
static float channel_ratio(float x, float c) {
    float t = x / c;
    if (t > KVC_Q8_RATIO_MAX) t = KVC_Q8_RATIO_MAX;
    if (t < -KVC_Q8_RATIO_MAX) t = -KVC_Q8_RATIO_MAX;
    return t;
}

float kvc_quantize_row__scalar(size_t d, const float *x, const float *field, int8_t *codes) {
    float max_abs = 0.0f;
    for (size_t j = 0; j < d; j++) {
        float t = fabsf(channel_ratio(x[j], field[j]));
        if (max_abs < t) max_abs = t;
    }
    float scale = max_abs / KVC_Q8_CODE_MAX;
    if (scale < KVC_Q8_SCALE_FLOOR) scale = KVC_Q8_SCALE_FLOOR;
    for (size_t j = 0; j < d; j++) {
        /* rintf rounds half to even in the default rounding mode. */
        float r = rintf(channel_ratio(x[j], field[j]) / scale);
        if (r > KVC_Q8_CODE_MAX) r = KVC_Q8_CODE_MAX;
        if (r < -KVC_Q8_CODE_MAX) r = -KVC_Q8_CODE_MAX;
        codes[j] = (int8_t)r;
    }
    return scale;
}
