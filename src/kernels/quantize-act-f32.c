/* quantize-act-f32.c -- the activations of F32, F16 and BF16 weights: the
 * f32 values as they are (weights.h says why), for every set. */
#include <string.h>

#include "weights.h"

void kvc_quantize_act_f32(size_t n, const float *x, uint8_t *xa) {
    memcpy(xa, x, n * sizeof(float));
}
