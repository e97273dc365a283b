#include "kernels.h"

void kvc_ssm_step_f32__scalar(size_t ds, size_t dv, float dA, float dt, const float *x, const float *B,
                              const float *C, const float *src, float *dst, float *out) {
    for (size_t j = 0; j < dv; j++) out[j] = 0.0f;
    for (size_t i = 0; i < ds; i++) {
        for (size_t j = 0; j < dv; j++) {
            /* x[j] dt rounded first, as llama.cpp's ssm_scan rounds it: its bits. */
            const float s = dA * src[i * dv + j] + B[i] * (x[j] * dt);
            dst[i * dv + j] = s;
            out[j] = out[j] + s * C[i];
        }
    }
}
