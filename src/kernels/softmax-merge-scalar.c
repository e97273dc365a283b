#include "exp-f32.h"
#include "kernels.h"

void kvc_softmax_merge__scalar(size_t S, const float *max, const float *sum, float *weight) {
    float m = max[0];
    for (size_t s = 1; s < S; s++) {
        if (m < max[s]) m = max[s];
    }
    float total = 0.0f;
    for (size_t s = 0; s < S; s++) {
        weight[s] = kvc_exp_f32(max[s] - m) * sum[s];
        total += weight[s];
    }
    for (size_t s = 0; s < S; s++) weight[s] = weight[s] / total;
}
