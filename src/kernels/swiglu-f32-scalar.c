#include "kernels.h"
#include "sigmoid-f32.h"

void kvc_swiglu_f32__scalar(size_t n, float *gate, const float *up) {
    for (size_t i = 0; i < n; i++) gate[i] = kvc_times_sigmoid_f32(gate[i], gate[i]) * up[i];
}
