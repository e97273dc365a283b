/* q4-pack.h -- the layout of a 4-bit row (kvcache.h, kvc_mode), after its
 * 4-byte scale:
 *  - a 2-bit shift per group of 16 channels (group g = channels 16g..16g+15),
 *    four to a byte, group 4k + i at bits 2i of byte k, unused bits 0;
 *  - then the codes -7..7, two per byte in blocks of 32 channels: byte i of
 *    a block holds channel i (low nibble) and channel 16 + i (high nibble),
 *    two's complement; a last block of m < 32 channels pairs channel i with
 *    channel ceil(m / 2) + i, a missing partner's nibble 0.
 * Channel j reads back as code_j * 2^shift_g * scale * field_j: the row's int8
 * code is code_j << shift_g (at most 56), so 4-bit rows unpack into rows the
 * q8 kernels read, exactly. */
#ifndef KVC_Q4_PACK_H
#define KVC_Q4_PACK_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#define KVC_Q4_BLOCK 32
#define KVC_Q4_GROUP 16
#define KVC_Q4_MAX_SHIFT 3

static inline size_t kvc_q4_groups(size_t d) {
    return (d + KVC_Q4_GROUP - 1) / KVC_Q4_GROUP;
}

/* Bytes of the shifts, which the codes follow. */
static inline size_t kvc_q4_shift_bytes(size_t d) {
    return (kvc_q4_groups(d) + 3) / 4;
}

static inline unsigned kvc_q4_shift(const uint8_t *shifts, size_t g) {
    return (shifts[g / 4] >> (2 * (g % 4))) & 3u;
}

/* Both shifts of block b (channels 32b..32b+31): group 2b's in bits 0-1,
 * group 2b + 1's in bits 2-3 -- the two groups a byte's nibbles hold. */
static inline unsigned kvc_q4_block_shifts(const uint8_t *shifts, size_t b) {
    return (shifts[b / 2] >> (4 * (b % 2))) & 15u;
}

/* The shifts of a row from the largest |t| of each group and of the row,
 * and each group's step; returns the row's scale.  With scale = max(row_max
 * / 7, floor), group g steps by scale * 2^(shift_g - 3) for the smallest
 * shift_g whose steps still hold it, max_g <= row_max * 2^(shift_g - 3): a
 * group of small values gets finer steps than the row's largest allows.
 * The row's scale is scale / 8.  Scalar, shared by every kernel set: the
 * same bytes from all. */
static inline float kvc_q4_shifts(size_t d, const float *group_max, float row_max, float floor,
                                  uint8_t *shifts, float *steps) {
    float scale = row_max / 7.0f;
    if (scale < floor) scale = floor;
    for (size_t k = 0; k < kvc_q4_shift_bytes(d); k++) shifts[k] = 0;
    for (size_t g = 0; g < kvc_q4_groups(d); g++) {
        int shift = KVC_Q4_MAX_SHIFT;
        while (shift > 0 && group_max[g] <= ldexpf(row_max, shift - 1 - KVC_Q4_MAX_SHIFT)) shift--;
        shifts[g / 4] |= (uint8_t)(shift << (2 * (g % 4)));
        steps[g] = ldexpf(scale, shift - KVC_Q4_MAX_SHIFT);
    }
    return scale * 0.125f;
}

/* Bytes of a row's codes from channel `block` (a multiple of KVC_Q4_BLOCK)
 * on: the half of its block's channels that its bytes pair up. */
static inline size_t kvc_q4_half(size_t d, size_t block) {
    const size_t m = d - block < KVC_Q4_BLOCK ? d - block : KVC_Q4_BLOCK;
    return (m + 1) / 2;
}

/* The codes of the block from channel `block`, packed (scalar). */
static inline void kvc_q4_pack_block(size_t d, size_t block, const int8_t *codes, uint8_t *packed) {
    const size_t m = d - block, half = kvc_q4_half(d, block);
    for (size_t i = 0; i < half; i++) {
        const uint8_t lo = (uint8_t)codes[block + i] & 0x0F;
        const uint8_t hi = half + i < m ? (uint8_t)codes[block + half + i] & 0x0F : 0;
        packed[block / 2 + i] = (uint8_t)(lo | hi << 4);
    }
}

/* The inverse, each code shifted by its group's shift: int8 codes (scalar). */
static inline void kvc_q4_unpack_block(size_t d, size_t block, const uint8_t *shifts,
                                       const uint8_t *packed, int8_t *codes) {
    const size_t m = d - block, half = kvc_q4_half(d, block);
    for (size_t i = 0; i < half; i++) {
        const uint8_t byte = packed[block / 2 + i];
        const size_t lo = block + i, hi = block + half + i;
        codes[lo] = (int8_t)(((int8_t)(uint8_t)(byte << 4) >> 4) * (1 << kvc_q4_shift(shifts, lo / KVC_Q4_GROUP)));
        if (half + i < m)
            codes[hi] = (int8_t)(((int8_t)byte >> 4) * (1 << kvc_q4_shift(shifts, hi / KVC_Q4_GROUP)));
    }
}

#endif /* KVC_Q4_PACK_H */
