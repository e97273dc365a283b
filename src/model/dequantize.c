/* dequantize.c -- tensor data to f32 through the weight table's reference
 * dequantize of each type. */
#include "kvcache.h"
#include "../kernels/weights.h"

kvc_status kvc_weight_dequantize(uint32_t type, const uint8_t *src, size_t first, size_t count,
                                 float *dst) {
    const kvc_weight_type *traits = kvc_weight_type_of(type);
    if (!traits) return KVC_E_WEIGHT_TYPE;
    if (count == 0) return KVC_OK;
    if (!src || !dst) return KVC_E_NULL_POINTER;
    traits->dequantize(src, first, count, dst);
    return KVC_OK;
}
