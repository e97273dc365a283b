#include "exp-f32.h"
#include "kernels.h"

void kvc_softmax__scalar(size_t G, size_t n, float *z, size_t z_stride, float *max, float *sum) {
    for (size_t g = 0; g < G; g++) {
        float *row = z + g * z_stride;
        float m = row[0];
        for (size_t p = 1; p < n; p++) {
            if (m < row[p]) m = row[p];
        }
        /* Four lanes, as the SIMD kernel sums: the same bits. */
        float lanes[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (size_t p = 0; p < n; p++) {
            row[p] = kvc_exp_f32(row[p] - m);
            lanes[p % 4] += row[p];
        }
        const float total = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
        const float inverse = 1.0f / total;
        for (size_t p = 0; p < n; p++) row[p] = row[p] * inverse;
        max[g] = m;
        sum[g] = total;
    }
}
