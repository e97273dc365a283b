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

/* Code v of a Q4_K super-block (ggml: for each 64 values c, byte 32 c + l
 * holds value 64 c + l in its low nibble and 64 c + 32 + l in its high). */
static uint8_t file_code(const uint8_t *block, size_t v) {
    const uint8_t byte = block[16 + 32 * (v / 64) + v % 32];
    return v % 64 < 32 ? byte & 15 : byte >> 4;
}

/* The byte of a packed super-block holding code v of row r, and its shift. */
static size_t packed_at(size_t r, size_t v, unsigned *shift) {
    const size_t w = v % 32;
    *shift = w < 16 ? 0 : 4;
    return 64 + 64 * (v / 32) + 16 * (w % 16 / 4) + 4 * r + w % 4;
}

void kvc_pack_q4_kx4(size_t n, size_t row_bytes, uint8_t *tile, uint8_t *scratch) {
    memcpy(scratch, tile, 4 * row_bytes);
    for (size_t b = 0; b < n / 256; b++) {
        uint8_t *out = tile + b * Q4_KX4_BLOCK;
        memset(out + 64, 0, Q4_KX4_BLOCK - 64);
        for (size_t r = 0; r < 4; r++) {
            const uint8_t *block = scratch + r * row_bytes + b * KVC_BLOCK_BYTES_q4_k;
            memcpy(out + 2 * r, block, 2);
            memcpy(out + 8 + 2 * r, block + 2, 2);
            memcpy(out + 16 + 12 * r, block + 4, 12);
            for (size_t v = 0; v < 256; v++) {
                unsigned shift;
                const size_t at = packed_at(r, v, &shift);
                out[at] |= (uint8_t)(file_code(block, v) << shift);
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
    for (size_t v = 0; v < 256; v++) {
        unsigned shift;
        const size_t at = packed_at(lane, v, &shift);
        const uint8_t code = (in[at] >> shift) & 15;
        block[16 + 32 * (v / 64) + v % 32] |= (uint8_t)(v % 64 < 32 ? code : code << 4);
    }
}
