#include "kernels.h"

void kvc_delta_step_f32__scalar(size_t dk, size_t dv, float alpha, float beta, const float *k, const float *v,
                                const float *q, const float *src, float *dst, float *d, float *out) {
    for (size_t j = 0; j < dv; j++) d[j] = 0.0f;
    for (size_t i = 0; i < dk; i++) {
        for (size_t j = 0; j < dv; j++) d[j] = d[j] + (alpha * src[i * dv + j]) * k[i];
    }
    for (size_t j = 0; j < dv; j++) {
        d[j] = (v[j] - d[j]) * beta;
        out[j] = 0.0f;
    }
    for (size_t i = 0; i < dk; i++) {
        for (size_t j = 0; j < dv; j++) {
            const float s = alpha * src[i * dv + j] + k[i] * d[j];
            dst[i * dv + j] = s;
            out[j] = out[j] + s * q[i];
        }
    }
}
