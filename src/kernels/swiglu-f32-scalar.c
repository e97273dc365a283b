#include <math.h>

#include "exp-f32.h"
#include "kernels.h"

void kvc_swiglu_f32__scalar(size_t n, float *gate, const float *up) {
    for (size_t i = 0; i < n; i++) {
        const float x = gate[i];
        const float t = kvc_exp_f32(-fabsf(x));
        const float numerator = x >= 0.0f ? x : x * t;
        gate[i] = (numerator / (1.0f + t)) * up[i];
    }
}
