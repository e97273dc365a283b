/*
 * naive_attend.c -- the straightforward C a first port would write: one
 * fused loop per query head over plain [head][n][d] arrays, libm expf,
 * compiled with -O3 -msimd128 -ffast-math so that the compiler vectorises
 * what it can.  The benchmark's "plain C" column.
 */
#include <emscripten.h>
#include <math.h>

EMSCRIPTEN_KEEPALIVE void naive_gqa(const float *q, const float *k, const float *v, float *out,
                                    float *scores, int n, int d, int num_q_heads, int num_kv_heads) {
    const int group = num_q_heads / num_kv_heads;
    const float inv_sqrt_d = 1.0f / sqrtf((float)d);
    for (int h = 0; h < num_q_heads; h++) {
        const float *qh = q + h * d;
        const float *kh = k + (long)(h / group) * n * d;
        const float *vh = v + (long)(h / group) * n * d;
        float *oh = out + h * d;
        float max = -INFINITY;
        for (int p = 0; p < n; p++) {
            float dot = 0.0f;
            for (int j = 0; j < d; j++) dot += qh[j] * kh[(long)p * d + j];
            scores[p] = dot * inv_sqrt_d;
            max = fmaxf(max, scores[p]);
        }
        float sum = 0.0f;
        for (int p = 0; p < n; p++) {
            scores[p] = expf(scores[p] - max);
            sum += scores[p];
        }
        for (int j = 0; j < d; j++) oh[j] = 0.0f;
        for (int p = 0; p < n; p++) {
            const float w = scores[p] / sum;
            for (int j = 0; j < d; j++) oh[j] += w * vh[(long)p * d + j];
        }
    }
}
