#include "kernels.h"
#include "quantize-codes-wasmsimd.h"

float kvc_quantize_row__wasmsimd(size_t d, const float *x, const float *field, int8_t *codes) {
    return kvc_quantize_codes_wasmsimd(d, x, field, KVC_Q8_CODE_MAX, codes);
}
