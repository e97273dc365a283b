/* pack-q8_0x4.c -- Q8_0x4, the layout Q8_0 matrices are packed into at load
 * (weights.h): four rows a tile, block b of the four rows together in the
 * 4 x 34 bytes the four blocks took --
 *   bytes 0..7     the rows' f16 scales d, row r's at 2 r
 *   bytes 8..135   eight groups g of 16 bytes: byte 16 g + 4 r + j holds
 *                  row r's code 4 g + j
 * -- so that one 16-byte load holds four codes of each row, which
 * multiply-adds against the token's four codes splat across the lanes turn
 * into the four rows' partial dots, lane r row r's. */
#include <string.h>

#include "weights.h"

#define Q8_0X4_BLOCK (4 * KVC_BLOCK_BYTES_q8_0)

void kvc_pack_q8_0x4(size_t n, size_t row_bytes, uint8_t *tile, uint8_t *scratch) {
    memcpy(scratch, tile, 4 * row_bytes);
    for (size_t b = 0; b < n / 32; b++) {
        uint8_t *out = tile + b * Q8_0X4_BLOCK;
        for (size_t r = 0; r < 4; r++) {
            const uint8_t *block = scratch + r * row_bytes + b * KVC_BLOCK_BYTES_q8_0;
            memcpy(out + 2 * r, block, 2);
            for (size_t g = 0; g < 8; g++) memcpy(out + 8 + 16 * g + 4 * r, block + 2 + 4 * g, 4);
        }
    }
}

void kvc_unpack_block_q8_0x4(const uint8_t *tile, size_t lane, size_t b, uint8_t *block) {
    const uint8_t *in = tile + b * Q8_0X4_BLOCK;
    memcpy(block, in + 2 * lane, 2);
    for (size_t g = 0; g < 8; g++) memcpy(block + 2 + 4 * g, in + 8 + 16 * g + 4 * lane, 4);
}
