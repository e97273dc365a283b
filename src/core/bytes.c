/*
 * bytes.c -- little-endian bytes out and in, and their CRC-32 (bytes.h).
 */
#include <string.h>

#include "bytes.h"

/* ---- CRC-32 ----
 *
 * Slicing-by-8: eight bytes per step through eight tables, about five times
 * the speed of the byte-at-a-time loop, which alone cost most of a
 * serialize.  table[0] is the classic table; table[k][i] is the CRC of byte
 * i followed by k zero bytes.  The tables (8 KiB) are built per call: cheap
 * next to the megabytes a snapshot holds, and no shared state to race on. */

uint32_t kvc_crc32(const uint8_t *data, size_t n) {
    uint32_t table[8][256];
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++) {
        for (int k = 1; k < 8; k++) table[k][i] = (table[k - 1][i] >> 8) ^ table[0][table[k - 1][i] & 0xFF];
    }
    uint32_t crc = 0xFFFFFFFFu;
    for (; n >= 8; n -= 8, data += 8) {
        const uint32_t lo = crc ^ ((uint32_t)data[0] | (uint32_t)data[1] << 8 | (uint32_t)data[2] << 16 | (uint32_t)data[3] << 24);
        const uint32_t hi = (uint32_t)data[4] | (uint32_t)data[5] << 8 | (uint32_t)data[6] << 16 | (uint32_t)data[7] << 24;
        crc = table[7][lo & 0xFF] ^ table[6][(lo >> 8) & 0xFF] ^ table[5][(lo >> 16) & 0xFF] ^ table[4][lo >> 24] ^
              table[3][hi & 0xFF] ^ table[2][(hi >> 8) & 0xFF] ^ table[1][(hi >> 16) & 0xFF] ^ table[0][hi >> 24];
    }
    for (; n > 0; n--, data++) crc = table[0][(crc ^ *data) & 0xFF] ^ (crc >> 8);
    return crc ^ 0xFFFFFFFFu;
}

void kvc_copy_little_endian(uint8_t *dst, const uint8_t *src, size_t n, size_t size) {
    if (!KVC_HOST_BIG_ENDIAN) {
        if (n) memcpy(dst, src, n * size);
        return;
    }
    for (size_t i = 0; i < n * size; i += size) {
        for (size_t b = 0; b < size; b++) dst[i + b] = src[i + size - 1 - b];
    }
}

/* ---- writing ---- */

void kvc_put_bytes(kvc_writer *w, const void *src, size_t n) {
    if (w->at) {
        if (n) memcpy(w->at, src, n);
        w->at += n;
    }
    w->bytes += n;
}

void kvc_put_u32(kvc_writer *w, uint32_t x) {
    const uint8_t b[4] = {(uint8_t)x, (uint8_t)(x >> 8), (uint8_t)(x >> 16), (uint8_t)(x >> 24)};
    kvc_put_bytes(w, b, 4);
}

void kvc_put_u64(kvc_writer *w, uint64_t x) {
    kvc_put_u32(w, (uint32_t)x);
    kvc_put_u32(w, (uint32_t)(x >> 32));
}

void kvc_put_array(kvc_writer *w, const void *src, size_t n, size_t size) {
    if (w->at) {
        kvc_copy_little_endian(w->at, src, n, size);
        w->at += n * size;
    }
    w->bytes += n * size;
}

/* ---- reading ---- */

int kvc_has(kvc_reader *r, size_t n) {
    if (r->failed || kvc_left(r) < n) {
        r->failed = 1;
        return 0;
    }
    return 1;
}

uint32_t kvc_get_u32(kvc_reader *r) {
    if (!kvc_has(r, 4)) return 0;
    const uint8_t *b = r->at;
    r->at += 4;
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

uint64_t kvc_get_u64(kvc_reader *r) {
    const uint64_t lo = kvc_get_u32(r);
    return lo | (uint64_t)kvc_get_u32(r) << 32;
}

int kvc_get_array(kvc_reader *r, void *dst, size_t n, size_t size) {
    if (!kvc_has(r, n * size)) return 0;
    kvc_copy_little_endian(dst, r->at, n, size);
    r->at += n * size;
    return 1;
}

/* ---- fixed fields ---- */

void kvc_put_fields(kvc_writer *w, const uint8_t *widths, size_t count, const uint64_t *values) {
    for (size_t i = 0; i < count; i++) {
        if (widths[i] == 8) kvc_put_u64(w, values[i]);
        else kvc_put_u32(w, (uint32_t)values[i]);
    }
}

void kvc_get_fields(kvc_reader *r, const uint8_t *widths, size_t count, uint64_t *values) {
    for (size_t i = 0; i < count; i++) values[i] = widths[i] == 8 ? kvc_get_u64(r) : kvc_get_u32(r);
}

size_t kvc_fields_bytes(const uint8_t *widths, size_t count) {
    size_t bytes = 0;
    for (size_t i = 0; i < count; i++) bytes += widths[i];
    return bytes;
}
