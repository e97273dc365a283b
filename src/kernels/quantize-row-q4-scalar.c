#include <math.h>

#include "kernels.h"
#include "q4-pack.h"
#include "quantize-codes-scalar.h"

float kvc_quantize_row_q4__scalar(size_t d, const float *x, const float *field, uint8_t *packed) {
    float group_max[KVC_KERNEL_MAX_DIM / KVC_Q4_GROUP], steps[KVC_KERNEL_MAX_DIM / KVC_Q4_GROUP];
    int8_t codes[KVC_KERNEL_MAX_DIM];
    float row_max = 0.0f;
    for (size_t g = 0; g < kvc_q4_groups(d); g++) group_max[g] = 0.0f;
    for (size_t j = 0; j < d; j++) {
        const float t = fabsf(kvc_channel_ratio(x[j], field[j]));
        if (group_max[j / KVC_Q4_GROUP] < t) group_max[j / KVC_Q4_GROUP] = t;
        if (row_max < t) row_max = t;
    }
    const float scale = kvc_q4_shifts(d, group_max, row_max, KVC_Q8_SCALE_FLOOR, packed, steps);
    for (size_t j = 0; j < d; j++) {
        /* rintf rounds half to even in the default rounding mode. */
        float r = rintf(kvc_channel_ratio(x[j], field[j]) / steps[j / KVC_Q4_GROUP]);
        if (r > KVC_Q4_CODE_MAX) r = KVC_Q4_CODE_MAX;
        if (r < -KVC_Q4_CODE_MAX) r = -KVC_Q4_CODE_MAX;
        codes[j] = (int8_t)r;
    }
    uint8_t *code_bytes = packed + kvc_q4_shift_bytes(d);
    for (size_t block = 0; block < d; block += KVC_Q4_BLOCK) kvc_q4_pack_block(d, block, codes, code_bytes);
    return scale;
}
