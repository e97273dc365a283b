/* q8-rows.h -- reading a quantized row: a 4-byte f32 scale, then d codes
 * (q8), or their shifts and ceil(d / 2) bytes of 4-bit codes (q4, q4-pack.h). */
#ifndef KVC_Q8_ROWS_H
#define KVC_Q8_ROWS_H

#include <stdint.h>
#include <string.h>

static inline size_t kvc_q8_row_bytes(size_t d) {
    return sizeof(float) + d;
}

/* A 4-bit row: its scale, a 2-bit shift per 16 channels, the codes (q4-pack.h). */
static inline size_t kvc_q4_row_bytes(size_t d) {
    return sizeof(float) + ((d + 15) / 16 + 3) / 4 + (d + 1) / 2;
}

static inline float kvc_q8_row_scale(const uint8_t *qrow) {
    float scale;
    memcpy(&scale, qrow, sizeof scale);
    return scale;
}

static inline const int8_t *kvc_q8_row_codes(const uint8_t *qrow) {
    return (const int8_t *)(qrow + sizeof(float));
}

#endif /* KVC_Q8_ROWS_H */
