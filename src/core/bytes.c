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
 * next to the megabytes a snapshot holds, and no shared state to race on.
 *
 * One chain of table lookups waits on the last; a long run is cut in four
 * blocks whose chains interleave (2.4 times the speed in wasm), and their
 * CRCs are joined as the CRC of their concatenation: CRC(A B) is CRC(A)
 * times x^(8 |B|) modulo the polynomial, plus CRC(B) -- what a streaming
 * reader joins its pieces' CRCs with too. */

#define CRC_POLY 0xEDB88320u
/* Runs shorter than this go through one chain: the joins cost ~100 steps. */
#define CRC_INTERLEAVE_BYTES 4096u

typedef uint32_t crc_tables[8][256];

static void build_tables(crc_tables table) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? CRC_POLY ^ (c >> 1) : c >> 1;
        table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++) {
        for (int k = 1; k < 8; k++) table[k][i] = (table[k - 1][i] >> 8) ^ table[0][table[k - 1][i] & 0xFF];
    }
}

/* Eight bytes into a running (unconditioned) CRC. */
static inline uint32_t step8(const crc_tables table, uint32_t crc, const uint8_t *data) {
    const uint32_t lo = crc ^ ((uint32_t)data[0] | (uint32_t)data[1] << 8 | (uint32_t)data[2] << 16 | (uint32_t)data[3] << 24);
    const uint32_t hi = (uint32_t)data[4] | (uint32_t)data[5] << 8 | (uint32_t)data[6] << 16 | (uint32_t)data[7] << 24;
    return table[7][lo & 0xFF] ^ table[6][(lo >> 8) & 0xFF] ^ table[5][(lo >> 16) & 0xFF] ^ table[4][lo >> 24] ^
           table[3][hi & 0xFF] ^ table[2][(hi >> 8) & 0xFF] ^ table[1][(hi >> 16) & 0xFF] ^ table[0][hi >> 24];
}

/* a times b modulo the polynomial, both reflected (bit 31 is x^0). */
static uint32_t multiply_mod(uint32_t a, uint32_t b) {
    uint32_t product = 0;
    for (uint32_t bit = 1u << 31; bit; bit >>= 1) {
        if (a & bit) product ^= b;
        b = (b & 1) ? (b >> 1) ^ CRC_POLY : b >> 1;
    }
    return product;
}

/* x^(8 n) modulo the polynomial: n zero bytes' shift, by squaring. */
static uint32_t shift_of_bytes(uint64_t n) {
    uint32_t shift = 1u << 31, square = 1u << 23; /* x^0, x^8 */
    for (; n; n >>= 1) {
        if (n & 1) shift = multiply_mod(square, shift);
        square = multiply_mod(square, square);
    }
    return shift;
}

uint32_t kvc_crc32_join(uint32_t crc_a, uint32_t crc_b, uint64_t len_b) {
    return multiply_mod(shift_of_bytes(len_b), crc_a) ^ crc_b;
}

uint32_t kvc_crc32_update(uint32_t crc, const uint8_t *data, size_t n) {
    crc_tables table;
    build_tables(table);
    if (n >= CRC_INTERLEAVE_BYTES) {
        const size_t block = (n / 4) & ~(size_t)7;
        uint32_t c0 = ~crc, c1 = ~0u, c2 = ~0u, c3 = ~0u;
        for (size_t i = 0; i < block; i += 8) {
            c0 = step8(table, c0, data + i);
            c1 = step8(table, c1, data + block + i);
            c2 = step8(table, c2, data + 2 * block + i);
            c3 = step8(table, c3, data + 3 * block + i);
        }
        crc = kvc_crc32_join(kvc_crc32_join(kvc_crc32_join(~c0, ~c1, block), ~c2, block), ~c3, block);
        data += 4 * block;
        n -= 4 * block;
    }
    crc = ~crc;
    for (; n >= 8; n -= 8, data += 8) crc = step8(table, crc, data);
    for (; n > 0; n--, data++) crc = table[0][(crc ^ *data) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

uint32_t kvc_crc32(const uint8_t *data, size_t n) {
    return kvc_crc32_update(0, data, n);
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

/* ---- kvc_digest: XXH64 ----
 * xxHash's 64-bit digest, as its specification defines it: four lanes of
 * multiply-rotate rounds over 32-byte stripes, merged, the tail, a final
 * mix.  Gigabytes a second in wasm, so a model's tensor data is checked at
 * every load.  Words are read little-endian on any host. */
static const uint64_t DIGEST_P1 = 0x9E3779B185EBCA87ull, DIGEST_P2 = 0xC2B2AE3D27D4EB4Full,
                      DIGEST_P3 = 0x165667B19E3779F9ull, DIGEST_P4 = 0x85EBCA77C2B2AE63ull,
                      DIGEST_P5 = 0x27D4EB2F165667C5ull;

static uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static uint64_t load_le64(const uint8_t *p) {
    uint64_t x;
    memcpy(&x, p, 8);
#if KVC_HOST_BIG_ENDIAN
    x = __builtin_bswap64(x);
#endif
    return x;
}

static uint64_t digest_round(uint64_t acc, uint64_t word) {
    return rotl64(acc + word * DIGEST_P2, 31) * DIGEST_P1;
}

static uint64_t digest_merge(uint64_t h, uint64_t lane) {
    return (h ^ digest_round(0, lane)) * DIGEST_P1 + DIGEST_P4;
}

void kvc_digest_begin(kvc_digest_state *state, uint64_t seed) {
    state->lane[0] = seed + DIGEST_P1 + DIGEST_P2;
    state->lane[1] = seed + DIGEST_P2;
    state->lane[2] = seed;
    state->lane[3] = seed - DIGEST_P1;
    state->seed = seed;
    state->total = 0;
    state->held = 0;
}

static void digest_stripe(kvc_digest_state *state, const uint8_t *p) {
    for (int i = 0; i < 4; i++) state->lane[i] = digest_round(state->lane[i], load_le64(p + 8 * i));
}

void kvc_digest_add(kvc_digest_state *state, const uint8_t *data, size_t n) {
    state->total += n;
    if (state->held) {
        const size_t take = 32 - state->held < n ? 32 - state->held : n;
        memcpy(state->stripe + state->held, data, take);
        state->held += take, data += take, n -= take;
        if (state->held < 32) return;
        digest_stripe(state, state->stripe);
        state->held = 0;
    }
    /* The lanes in locals: stores through state could alias data (bytes). */
    uint64_t lane[4] = {state->lane[0], state->lane[1], state->lane[2], state->lane[3]};
    for (; n >= 32; data += 32, n -= 32) {
        for (int i = 0; i < 4; i++) lane[i] = digest_round(lane[i], load_le64(data + 8 * i));
    }
    memcpy(state->lane, lane, sizeof lane);
    memcpy(state->stripe, data, n);
    state->held = n;
}

uint64_t kvc_digest_end(const kvc_digest_state *state) {
    const uint8_t *p = state->stripe, *const end = p + state->held;
    uint64_t h;
    if (state->total >= 32) {
        h = rotl64(state->lane[0], 1) + rotl64(state->lane[1], 7) + rotl64(state->lane[2], 12) + rotl64(state->lane[3], 18);
        for (int i = 0; i < 4; i++) h = digest_merge(h, state->lane[i]);
    } else {
        h = state->seed + DIGEST_P5;
    }
    h += state->total;
    for (; end - p >= 8; p += 8) h = rotl64(h ^ digest_round(0, load_le64(p)), 27) * DIGEST_P1 + DIGEST_P4;
    if (end - p >= 4) {
        const uint64_t word = (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24;
        h = rotl64(h ^ word * DIGEST_P1, 23) * DIGEST_P2 + DIGEST_P3;
        p += 4;
    }
    for (; p < end; p++) h = rotl64(h ^ (*p * DIGEST_P5), 11) * DIGEST_P1;
    h ^= h >> 33;
    h *= DIGEST_P2;
    h ^= h >> 29;
    h *= DIGEST_P3;
    h ^= h >> 32;
    return h;
}

uint64_t kvc_digest(const void *data, size_t n, uint64_t seed) {
    kvc_digest_state state;
    kvc_digest_begin(&state, seed);
    if (data) kvc_digest_add(&state, data, n);
    return kvc_digest_end(&state);
}
