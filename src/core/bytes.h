/*
 * bytes.h -- little-endian bytes out and in, and their CRC-32: what the
 * snapshot format (snapshot.c) is written and read with.
 *
 * A writer whose destination is NULL writes nothing and counts: the size of
 * a snapshot is what writing it would take, from the code that writes it.
 * A reader never reads past its end: a read that would stops it (`failed`)
 * and gives zeros from then on, so a run of reads is checked once.  Fixed
 * fields go through a list of their widths (kvc_put_fields, kvc_get_fields),
 * one list read by both sides.
 */
#ifndef KVC_BYTES_H
#define KVC_BYTES_H

#include <stddef.h>
#include <stdint.h>

#if defined(__BYTE_ORDER__) && defined(__ORDER_BIG_ENDIAN__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define KVC_HOST_BIG_ENDIAN 1
#else
#define KVC_HOST_BIG_ENDIAN 0
#endif

/* CRC-32 (IEEE 802.3, reflected, as zlib's crc32) of n bytes; the CRC of
 * bytes before them followed by these (zlib's crc32(crc, data, n)); and the
 * CRC of two runs of bytes from theirs, len_b the second's length. */
uint32_t kvc_crc32(const uint8_t *data, size_t n);
uint32_t kvc_crc32_update(uint32_t crc, const uint8_t *data, size_t n);
uint32_t kvc_crc32_join(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

/* XXH64 (kvc_digest) of bytes added in pieces of any size: the digest of
 * their concatenation. */
typedef struct kvc_digest_state {
    uint64_t lane[4];
    uint64_t seed, total;
    uint8_t stripe[32]; /* the bytes of a stripe not yet complete */
    size_t held;
} kvc_digest_state;

void kvc_digest_begin(kvc_digest_state *state, uint64_t seed);
void kvc_digest_add(kvc_digest_state *state, const uint8_t *data, size_t n);
uint64_t kvc_digest_end(const kvc_digest_state *state);

typedef struct kvc_writer {
    uint8_t *at;  /* the next byte; NULL: counting only */
    size_t bytes; /* written (or counted) so far */
} kvc_writer;

void kvc_put_bytes(kvc_writer *w, const void *src, size_t n);
void kvc_put_u32(kvc_writer *w, uint32_t x);
void kvc_put_u64(kvc_writer *w, uint64_t x);
/* n numbers of `size` bytes (u32, f32, f64) from host order. */
void kvc_put_array(kvc_writer *w, const void *src, size_t n, size_t size);

typedef struct kvc_reader {
    const uint8_t *at, *end;
    int failed; /* a read went past the end */
} kvc_reader;

/* 1 if n more bytes are there; else 0, and the reader has failed. */
int kvc_has(kvc_reader *r, size_t n);
uint32_t kvc_get_u32(kvc_reader *r);
uint64_t kvc_get_u64(kvc_reader *r);
/* n numbers of `size` bytes into dst in host order (as kvc_put_array wrote
 * them); 0 when the bytes run out. */
int kvc_get_array(kvc_reader *r, void *dst, size_t n, size_t size);
/* Bytes left. */
static inline size_t kvc_left(const kvc_reader *r) {
    return (size_t)(r->end - r->at);
}

/* n numbers of `size` bytes between little-endian and host order: one copy
 * on a little-endian host, which every build target is (wasm by
 * definition); reversed element by element on a big-endian one. */
void kvc_copy_little_endian(uint8_t *dst, const uint8_t *src, size_t n, size_t size);

/* A run of fixed fields: count fields of widths[i] bytes (4 or 8) holding
 * values[i].  Its bytes are kvc_fields_bytes. */
void kvc_put_fields(kvc_writer *w, const uint8_t *widths, size_t count, const uint64_t *values);
void kvc_get_fields(kvc_reader *r, const uint8_t *widths, size_t count, uint64_t *values);
size_t kvc_fields_bytes(const uint8_t *widths, size_t count);

#endif /* KVC_BYTES_H */
