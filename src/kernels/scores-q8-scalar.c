#include "kernels.h"
#include "q8-rows.h"

/* sum_j q16[j] * codes[j], exact in i32 within blocks of KVC_Q8_DOT_BLOCK
 * channels, the blocks added in f32 in order. */
static float block_dot(size_t d, const int16_t *q16, const int8_t *codes) {
    float dot = 0.0f;
    for (size_t block = 0; block < d; block += KVC_Q8_DOT_BLOCK) {
        const size_t end = block + KVC_Q8_DOT_BLOCK < d ? block + KVC_Q8_DOT_BLOCK : d;
        int32_t sum = 0;
        for (size_t j = block; j < end; j++) sum += (int32_t)q16[j] * codes[j];
        dot += (float)sum;
    }
    return dot;
}

void kvc_scores_q8__scalar(size_t G, size_t n, size_t d, const int16_t *codes, const float *scales,
                           const uint8_t *qrows, float *z, size_t z_stride) {
    const size_t stride = kvc_q8_row_bytes(d);
    for (size_t g = 0; g < G; g++) {
        for (size_t p = 0; p < n; p++) {
            const uint8_t *qrow = qrows + p * stride;
            z[g * z_stride + p] = block_dot(d, codes + g * d, kvc_q8_row_codes(qrow)) *
                                  (kvc_q8_row_scale(qrow) * scales[g]);
        }
    }
}
