/* pack-q4_kx4.c -- Q4_Kx4, the layout Q4_K matrices are packed into at load
 * (weights.h): four rows a tile, super-block b of the four rows together in
 * the 4 x 144 bytes the four took --
 *   bytes 0..7      the rows' f16 d, row r's at 2 r
 *   bytes 8..15     their f16 dmin
 *   bytes 16..63    their 12 bytes of scales and mins, row r's at 16 + 12 r
 *   bytes 64..575   each sub-block j of 32 values in 64 bytes, four chunks
 *                   c of 16: byte 64 j + 16 c + 4 r + i holds row r's code
 *                   32 j + 4 c + i in its low nibble, 32 j + 16 + 4 c + i
 *                   in its high one
 * -- so that a chunk's nibbles hold four codes of each row twice over,
 * which multiply-adds against the token's four codes splat across the
 * lanes turn into the four rows' partial dots, lane r row r's. */
#include <string.h>

#include "weights.h"

#define Q4_KX4_BLOCK (4 * KVC_BLOCK_BYTES_q4_k)

/* Sub-block j's 32 codes are the low (j even) or high (j odd) nibbles of
 * bytes 32 (j / 2) .. 32 (j / 2) + 31 of a Q4_K super-block's codes (ggml:
 * for each 64 values c, byte 32 c + l holds value 64 c + l in its low nibble
 * and 64 c + 32 + l in its high one).  Chunk c of sub-block j holds code
 * 4 c + i of each row in the low nibble of byte 4 r + i, 16 + 4 c + i in
 * the high one. */
void kvc_pack_q4_kx4(size_t n, size_t row_bytes, uint8_t *tile, uint8_t *scratch) {
    memcpy(scratch, tile, 4 * row_bytes);
    for (size_t b = 0; b < n / 256; b++) {
        uint8_t *out = tile + b * Q4_KX4_BLOCK;
        for (size_t r = 0; r < 4; r++) {
            const uint8_t *block = scratch + r * row_bytes + b * KVC_BLOCK_BYTES_q4_k;
            memcpy(out + 2 * r, block, 2);
            memcpy(out + 8 + 2 * r, block + 2, 2);
            memcpy(out + 16 + 12 * r, block + 4, 12);
            for (size_t j = 0; j < 8; j++) {
                /* Eight bytes at a time: codes 4 c + i and 16 + 4 c + i of two chunks. */
                const uint8_t *qs = block + 16 + 32 * (j / 2);
                const unsigned shift = 4 * (j % 2);
                for (size_t half = 0; half < 2; half++) {
                    uint64_t low, high;
                    memcpy(&low, qs + 8 * half, 8);
                    memcpy(&high, qs + 16 + 8 * half, 8);
                    const uint64_t nibbles = 0x0f0f0f0f0f0f0f0full;
                    const uint64_t both = ((low >> shift) & nibbles) | (((high >> shift) & nibbles) << 4);
                    uint8_t *chunk = out + 64 + 64 * j + 32 * half + 4 * r;
                    memcpy(chunk, &both, 4);
                    memcpy(chunk + 16, (const uint8_t *)&both + 4, 4);
                }
            }
        }
    }
}

void kvc_unpack_block_q4_kx4(const uint8_t *tile, size_t lane, size_t b, uint8_t *block) {
    const uint8_t *in = tile + b * Q4_KX4_BLOCK;
    memcpy(block, in + 2 * lane, 2);
    memcpy(block + 2, in + 8 + 2 * lane, 2);
    memcpy(block + 4, in + 16 + 12 * lane, 12);
    memset(block + 16, 0, 128);
    for (size_t j = 0; j < 8; j++) {
        uint8_t *qs = block + 16 + 32 * (j / 2);
        const unsigned shift = 4 * (j % 2);
        const uint8_t *chunks = in + 64 + 64 * j + 4 * lane;
        for (size_t c = 0; c < 4; c++) {
            for (size_t i = 0; i < 4; i++) {
                qs[4 * c + i] |= (uint8_t)((chunks[16 * c + i] & 15) << shift);
                qs[16 + 4 * c + i] |= (uint8_t)((chunks[16 * c + i] >> 4) << shift);
            }
        }
    }
}
