/* quantize-codes-scalar.h -- the definition of a quantized row's codes,
 * shared by the q8 and q4 scalar quantizers: they differ only in the
 * largest code. */
#ifndef KVC_QUANTIZE_CODES_SCALAR_H
#define KVC_QUANTIZE_CODES_SCALAR_H

#include <math.h>

#include "kernels.h"

/* x / c, saturated so that a huge x over a tiny field value stays finite. */
static inline float kvc_channel_ratio(float x, float c) {
    float t = x / c;
    if (t > KVC_Q8_RATIO_MAX) t = KVC_Q8_RATIO_MAX;
    if (t < -KVC_Q8_RATIO_MAX) t = -KVC_Q8_RATIO_MAX;
    return t;
}

/* s = max(max|t| / code_max, floor), codes = clamp(round_half_even(t / s),
 * -code_max, code_max); returns s. */
static inline float kvc_quantize_codes_scalar(size_t d, const float *x, const float *field,
                                              float code_max, int8_t *codes) {
    float max_abs = 0.0f;
    for (size_t j = 0; j < d; j++) {
        float t = fabsf(kvc_channel_ratio(x[j], field[j]));
        if (max_abs < t) max_abs = t;
    }
    float scale = max_abs / code_max;
    if (scale < KVC_Q8_SCALE_FLOOR) scale = KVC_Q8_SCALE_FLOOR;
    for (size_t j = 0; j < d; j++) {
        /* rintf rounds half to even in the default rounding mode. */
        float r = rintf(kvc_channel_ratio(x[j], field[j]) / scale);
        if (r > code_max) r = code_max;
        if (r < -code_max) r = -code_max;
        codes[j] = (int8_t)r;
    }
    return scale;
}

#endif /* KVC_QUANTIZE_CODES_SCALAR_H */
