#include "kernels.h"
#include "sigmoid-f32.h"

/* GELU's tanh form as x sigmoid(z), z = 2 sqrt(2/pi) (x + 0.044715 x^3). */
static inline float gelu(float x) {
    return kvc_times_sigmoid_f32(x, x * (KVC_GELU_Z1 + KVC_GELU_Z3 * (x * x)));
}

void kvc_geglu_f32__scalar(size_t n, float *gate, const float *up) {
    if (!up) {
        for (size_t i = 0; i < n; i++) gate[i] = gelu(gate[i]);
        return;
    }
    for (size_t i = 0; i < n; i++) gate[i] = gelu(gate[i]) * up[i];
}
