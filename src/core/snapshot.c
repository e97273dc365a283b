/*
 * snapshot.c -- a layer or a model as bytes, and back.
 *
 * The format (docs/snapshot-format.md) is little-endian and versioned, and
 * ends with a CRC-32 of everything before it.  Reading trusts nothing: the
 * checksum first, then every count against the bytes left before anything is
 * allocated (so a short snapshot cannot ask for a large allocation), then
 * every invariant the layer keeps (rows per head against the alive map, the
 * f32/int8 split against the window, codes in range, finite values), and a
 * layer is only built once the whole snapshot has passed.
 */
#include <math.h>
#include <string.h>

#include "internal.h"
#include "../kernels/q4-pack.h"
#include "../kernels/q8-rows.h"

#define LAYER_MAGIC "KVCL"
#define MODEL_MAGIC "KVCM"
/* Version 2 added the q4 components: the modes after KVC_MODE_Q8V, the
 * residual window (in what was a reserved word) and a q4 store's window
 * rows.  Version 1 snapshots still load. */
#define SNAPSHOT_VERSION 2u
#define SNAPSHOT_OLDEST_VERSION 1u
/* magic, version, payload length; the CRC-32 after the payload */
#define HEADER_BYTES 16u
#define TRAILER_BYTES 4u

#if defined(__BYTE_ORDER__) && defined(__ORDER_BIG_ENDIAN__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define HOST_BIG_ENDIAN 1
#else
#define HOST_BIG_ENDIAN 0
#endif

/* ---- CRC-32 (IEEE 802.3, reflected, as zlib's crc32) ----
 *
 * Slicing-by-8: eight bytes per step through eight tables, about five times
 * the speed of the byte-at-a-time loop, which alone cost most of a
 * serialize.  table[0] is the classic table; table[k][i] is the CRC of byte
 * i followed by k zero bytes.  The tables (8 KiB) are built per call: cheap
 * next to the megabytes a snapshot holds, and no shared state to race on. */

static uint32_t crc32_bytes(const uint8_t *data, size_t n) {
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

/* ---- writing ---- */

typedef struct writer {
    uint8_t *at;
} writer;

static void put_bytes(writer *w, const void *src, size_t n) {
    if (n) memcpy(w->at, src, n);
    w->at += n;
}

static void put_u32(writer *w, uint32_t x) {
    const uint8_t b[4] = {(uint8_t)x, (uint8_t)(x >> 8), (uint8_t)(x >> 16), (uint8_t)(x >> 24)};
    put_bytes(w, b, 4);
}

static void put_u64(writer *w, uint64_t x) {
    put_u32(w, (uint32_t)x);
    put_u32(w, (uint32_t)(x >> 32));
}

/* Arrays of n numbers of `size` bytes (u32, f32, f64) in little-endian
 * order: one copy on a little-endian host, which every build target is (wasm
 * by definition); reversed element by element on a big-endian one. */
static void copy_little_endian(uint8_t *dst, const uint8_t *src, size_t n, size_t size) {
    if (!HOST_BIG_ENDIAN) {
        if (n) memcpy(dst, src, n * size);
        return;
    }
    for (size_t i = 0; i < n * size; i += size) {
        for (size_t b = 0; b < size; b++) dst[i + b] = src[i + size - 1 - b];
    }
}

static void put_array(writer *w, const void *src, size_t n, size_t size) {
    copy_little_endian(w->at, src, n, size);
    w->at += n * size;
}

/* A paged sequence whose elements are numbers of `size` bytes, page by page. */
static void put_paged(writer *w, const kvc_paged *a, size_t size) {
    for (size_t i = 0; i < a->len;) {
        const size_t run = kvc_paged_run(a, i, a->len - i);
        put_array(w, kvc_paged_at(a, i), run * a->elem_bytes / size, size);
        i += run;
    }
}

/* Quantized rows of row_bytes, each its f32 scale then its codes: the
 * layout in memory too. */
static void put_quantized_rows(writer *w, const uint8_t *qrows, size_t n, size_t row_bytes) {
    if (!HOST_BIG_ENDIAN) {
        put_bytes(w, qrows, n * row_bytes);
        return;
    }
    for (size_t r = 0; r < n; r++) {
        put_array(w, qrows + r * row_bytes, 1, sizeof(float));
        put_bytes(w, qrows + r * row_bytes + sizeof(float), row_bytes - sizeof(float));
    }
}

/* ---- reading ---- */

typedef struct reader {
    const uint8_t *at, *end;
    int failed;       /* KVC_E_SNAPSHOT_TRUNCATED once a read went past the end */
    uint32_t version; /* of the format */
} reader;

static int has(reader *r, size_t n) {
    if (r->failed || (size_t)(r->end - r->at) < n) {
        r->failed = 1;
        return 0;
    }
    return 1;
}

static uint32_t get_u32(reader *r) {
    if (!has(r, 4)) return 0;
    const uint8_t *b = r->at;
    r->at += 4;
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static uint64_t get_u64(reader *r) {
    const uint64_t lo = get_u32(r);
    return lo | (uint64_t)get_u32(r) << 32;
}

static double get_f64(reader *r) {
    const uint64_t bits = get_u64(r);
    double x;
    memcpy(&x, &bits, 8);
    return x;
}

/* n numbers of `size` bytes into dst (as put_array wrote them); 0 when the
 * bytes run out. */
static int get_array(reader *r, void *dst, size_t n, size_t size) {
    if (!has(r, n * size)) return 0;
    copy_little_endian(dst, r->at, n, size);
    r->at += n * size;
    return 1;
}

/* Bytes left, for checking counts before anything is allocated. */
static size_t left(const reader *r) {
    return (size_t)(r->end - r->at);
}

/* ---- the layer payload ---- */

static const kvc_store *store_of(const kvc_layer *layer, size_t h, int is_values) {
    return is_values ? &layer->heads[h].values : &layer->heads[h].keys;
}

/* A q4 store keeps the f32 copies of its residual window only: its
 * rollback rows are not content (a snapshot of a layer truncated exactly is
 * the snapshot of one that never held the positions). */
static size_t window_rows(const kvc_layer *layer, const kvc_store *store) {
    return store->qrows.len - kvc_store_window_first(store, layer->residual_rows);
}

static size_t full_payload_bytes(const kvc_layer *layer) {
    const size_t d = layer->head_dim, L = layer->seq_len;
    size_t bytes = 4 * 4 + 8 * 2 + 4 * 2 + 8 * 3 + L * (4 + 4 + layer->map_bytes);
    for (size_t h = 0; h < layer->num_kv_heads; h++) {
        for (int is_values = 0; is_values < 2; is_values++) {
            const kvc_store *store = store_of(layer, h, is_values);
            bytes += 8 * 2 + store->rows.len * d * 4 + store->qrows.len * store->qrows.elem_bytes + 4;
            if (store->type == KVC_COMPONENT_Q4) bytes += 8 + window_rows(layer, store) * d * 4;
            if (layer->field_frozen && kvc_component_quantized(layer->mode, is_values)) bytes += d * 4;
        }
    }
    return bytes;
}

static size_t linear_payload_bytes(const kvc_linear *linear) {
    return 4 * 4 + 8 + 8 + kvc_linear_state_len(linear) * 8;
}

static size_t layer_payload_bytes(const kvc_layer *layer) {
    return layer->linear ? linear_payload_bytes(layer->linear) : full_payload_bytes(layer);
}

static void write_full(writer *w, const kvc_layer *layer) {
    const size_t d = layer->head_dim, L = layer->seq_len;
    put_u32(w, KVC_KIND_FULL);
    put_u32(w, (uint32_t)layer->mode);
    put_u32(w, (uint32_t)layer->num_kv_heads);
    put_u32(w, (uint32_t)d);
    put_u64(w, L);
    put_u64(w, layer->next_position);
    put_u32(w, (uint32_t)layer->field_frozen);
    put_u32(w, (uint32_t)layer->residual_rows);
    put_u64(w, layer->max_rows);
    put_u64(w, layer->evict_sinks);
    put_u64(w, layer->evict_recent);
    put_paged(w, &layer->imp, sizeof(float));
    put_paged(w, &layer->positions, sizeof(uint32_t));
    put_paged(w, &layer->alive, 1);
    for (size_t h = 0; h < layer->num_kv_heads; h++) {
        for (int is_values = 0; is_values < 2; is_values++) {
            const kvc_store *store = store_of(layer, h, is_values);
            const int has_field = layer->field_frozen && kvc_component_quantized(layer->mode, is_values);
            put_u64(w, store->rows.len);
            put_u64(w, store->qrows.len);
            put_paged(w, &store->rows, sizeof(float));
            for (size_t i = 0; i < store->qrows.len;) {
                const size_t run = kvc_paged_run(&store->qrows, i, store->qrows.len - i);
                put_quantized_rows(w, kvc_paged_at(&store->qrows, i), run, store->qrows.elem_bytes);
                i += run;
            }
            if (store->type == KVC_COMPONENT_Q4) {
                const size_t count = window_rows(layer, store);
                const size_t first = store->qrows.len - count - store->recent_base;
                put_u64(w, count);
                for (size_t i = first; i < first + count;) {
                    const size_t run = kvc_paged_run(&store->recent, i, first + count - i);
                    put_array(w, kvc_paged_at(&store->recent, i), run * d, sizeof(float));
                    i += run;
                }
            }
            put_u32(w, (uint32_t)has_field);
            if (has_field) put_paged(w, &store->field, sizeof(float));
        }
    }
}

static void write_linear(writer *w, const kvc_linear *linear) {
    put_u32(w, KVC_KIND_LINEAR);
    put_u32(w, (uint32_t)linear->num_heads);
    put_u32(w, (uint32_t)linear->num_features);
    put_u32(w, (uint32_t)linear->value_dim);
    put_array(w, &linear->phase_mass, 1, sizeof(double));
    put_u64(w, linear->steps);
    put_array(w, linear->state, kvc_linear_state_len(linear), sizeof(double));
}

/* magic, version, payload length, payload (by `write`), CRC-32. */
static void write_framed(uint8_t *dst, const char *magic, size_t payload, void (*write)(writer *, const void *),
                         const void *what) {
    writer w = {dst};
    put_bytes(&w, magic, 4);
    put_u32(&w, SNAPSHOT_VERSION);
    put_u64(&w, payload);
    write(&w, what);
    put_u32(&w, crc32_bytes(dst, HEADER_BYTES + payload));
}

static void write_layer(writer *w, const void *what) {
    const kvc_layer *layer = what;
    if (layer->linear) write_linear(w, layer->linear);
    else write_full(w, layer);
}

size_t kvc_layer_snapshot_size(const kvc_layer *layer) {
    if (!layer || layer->verifying) return 0;
    return HEADER_BYTES + layer_payload_bytes(layer) + TRAILER_BYTES;
}

kvc_status kvc_layer_serialize(const kvc_layer *layer, uint8_t *dst, size_t dst_len) {
    if (!layer || !dst) return KVC_E_NULL_POINTER;
    if (layer->verifying) return KVC_E_VERIFYING;
    const size_t payload = layer_payload_bytes(layer);
    if (dst_len < HEADER_BYTES + payload + TRAILER_BYTES) return KVC_E_LENGTH;
    write_framed(dst, LAYER_MAGIC, payload, write_layer, layer);
    return KVC_OK;
}

/* ---- reading a layer ---- */

/* Checks the frame (magic, version, length, CRC) and returns a reader over
 * the payload. */
static kvc_status open_frame(const uint8_t *src, size_t len, const char *magic, reader *payload) {
    if (len < 4 || memcmp(src, magic, 4) != 0) return KVC_E_SNAPSHOT_MAGIC;
    reader r = {src + 4, src + len, 0, 0};
    const uint32_t version = get_u32(&r);
    if (r.failed) return KVC_E_SNAPSHOT_TRUNCATED;
    if (version < SNAPSHOT_OLDEST_VERSION || version > SNAPSHOT_VERSION) return KVC_E_SNAPSHOT_VERSION;
    const uint64_t payload_len = get_u64(&r);
    if (r.failed || payload_len > left(&r) || left(&r) - payload_len < TRAILER_BYTES)
        return KVC_E_SNAPSHOT_TRUNCATED;
    if (left(&r) - payload_len != TRAILER_BYTES) return KVC_E_SNAPSHOT_CORRUPT; /* bytes after it */
    reader crc = {r.at + payload_len, r.end, 0, 0};
    if (get_u32(&crc) != crc32_bytes(src, HEADER_BYTES + (size_t)payload_len)) return KVC_E_SNAPSHOT_CHECKSUM;
    *payload = (reader){r.at, r.at + payload_len, 0, version};
    return KVC_OK;
}

/* The bits a q4 row's shift bytes may not set: those past its groups. */
static uint8_t unused_shift_bits(size_t d) {
    const size_t used = kvc_q4_groups(d) % 4;
    return used ? (uint8_t)(0xFF << (2 * used)) : 0;
}

/* Reads n quantized rows: each scale finite and positive, codes within
 * +-127 (q8), or within +-7 with unused shift bits and a pad nibble 0 (q4). */
static kvc_status read_quantized_rows(reader *r, kvc_store *store, size_t first, size_t n, size_t d) {
    const size_t row_bytes = store->qrows.elem_bytes, code_bytes = row_bytes - sizeof(float);
    const int q4 = store->type == KVC_COMPONENT_Q4;
    const size_t shift_bytes = q4 ? kvc_q4_shift_bytes(d) : 0;
    const uint8_t unused = q4 ? unused_shift_bits(d) : 0;
    /* The byte of a q4 row whose high nibble pads an odd last block. */
    const size_t pad_byte = (d % KVC_Q4_BLOCK) % 2 ? code_bytes - 1 : SIZE_MAX;
    if (!has(r, n * row_bytes)) return KVC_E_SNAPSHOT_TRUNCATED;
    for (size_t q = 0; q < n; q++, r->at += row_bytes) {
        uint8_t *qrow = kvc_paged_at(&store->qrows, first + q);
        copy_little_endian(qrow, r->at, 1, sizeof(float));
        memcpy(qrow + sizeof(float), r->at + sizeof(float), code_bytes);
        const float scale = kvc_q8_row_scale(qrow);
        if (!isfinite(scale) || !(scale > 0.0f)) return KVC_E_SNAPSHOT_CORRUPT;
        int below = 0; /* no branch per code: a loop the compiler vectorizes */
        const uint8_t *codes = qrow + sizeof(float);
        if (q4) {
            below |= (codes[shift_bytes - 1] & unused) != 0;
            for (size_t j = shift_bytes; j < code_bytes; j++) below |= (codes[j] & 0x0F) == 8 || (codes[j] >> 4) == 8;
            if (pad_byte != SIZE_MAX) below |= (codes[pad_byte] >> 4) != 0;
        } else {
            for (size_t j = 0; j < d; j++) below |= (int8_t)codes[j] == -128;
        }
        if (below) return KVC_E_SNAPSHOT_CORRUPT;
    }
    return KVC_OK;
}

/* The geometry and counts of a full layer, checked, before any allocation. */
typedef struct full_header {
    size_t mode, H, d, L, next_position, frozen, residual_rows, max_rows, sinks, recent;
} full_header;

static kvc_status read_full_header(reader *r, full_header *f) {
    f->mode = get_u32(r);
    f->H = get_u32(r);
    f->d = get_u32(r);
    /* 64-bit fields are checked before they become a size_t, which may be
     * 32 bits (wasm): no high word may be dropped unseen. */
    const uint64_t L = get_u64(r), next_position = get_u64(r);
    f->frozen = get_u32(r);
    /* Reserved (0) in version 1, whose modes had no q4 component. */
    const uint32_t residual_rows = get_u32(r);
    const uint64_t max_rows = get_u64(r), sinks = get_u64(r), recent = get_u64(r);
    if (r->failed) return KVC_E_SNAPSHOT_TRUNCATED;
    const size_t modes = r->version == 1 ? KVC_MODE_Q8V + 1 : KVC_MODE_COUNT;
    if (f->mode >= modes || f->H == 0 || f->H > KVC_MAX_KV_HEADS || f->d == 0 ||
        f->d > KVC_MAX_HEAD_DIM || f->frozen > 1 || next_position > KVC_MAX_POSITIONS ||
        L > next_position || (r->version == 1 ? residual_rows != 0 : residual_rows > KVC_Q4_MAX_RESIDUAL_ROWS))
        return KVC_E_SNAPSHOT_CORRUPT;
    f->residual_rows = r->version == 1 ? KVC_Q4_RESIDUAL_ROWS : residual_rows;
    /* kvc_layer_set_max_rows keeps max_rows within KVC_MAX_POSITIONS, so a
     * snapshot from any build restores in every other. */
    if (max_rows > KVC_MAX_POSITIONS || sinks > max_rows || recent > max_rows)
        return KVC_E_SNAPSHOT_CORRUPT;
    f->L = (size_t)L;
    f->next_position = (size_t)next_position;
    f->max_rows = (size_t)max_rows;
    f->sinks = (size_t)sinks;
    f->recent = (size_t)recent;
    const int quantized = kvc_quantized_components((kvc_mode)f->mode) > 0;
    if ((size_t)f->frozen != (size_t)(quantized && f->next_position > KVC_Q8_WINDOW))
        return KVC_E_SNAPSHOT_CORRUPT;
    if (f->max_rows && (f->sinks > f->max_rows || f->recent > f->max_rows - f->sinks))
        return KVC_E_SNAPSHOT_CORRUPT;
    if (!f->max_rows && (f->sinks || f->recent)) return KVC_E_SNAPSHOT_CORRUPT;
    /* The per-slot arrays and the stores' fixed fields (rows_len, qrows_len,
     * has_field) must fit in what is left, before the heads are allocated. */
    const size_t map_bytes = (f->H + 7) / 8, store_bytes = 2 * (8 + 8 + 4);
    if (f->L > left(r) / (8 + map_bytes)) return KVC_E_SNAPSHOT_TOO_LARGE;
    if (f->H > (left(r) - f->L * (8 + map_bytes)) / store_bytes) return KVC_E_SNAPSHOT_TOO_LARGE;
    return KVC_OK;
}

/* Reads n elements of numbers of `size` bytes into a reserved sequence
 * from element `first` on, page by page; 0 when the bytes run out. */
static int get_paged(reader *r, kvc_paged *a, size_t first, size_t n, size_t size) {
    for (size_t done = 0; done < n;) {
        const size_t run = kvc_paged_run(a, first + done, n - done);
        if (!get_array(r, kvc_paged_at(a, first + done), run * a->elem_bytes / size, size)) return 0;
        done += run;
    }
    return 1;
}

/* Reads n rows of f32 values that must be finite (and positive when
 * `positive`) into a reserved sequence: the elements [len, len + n) become
 * its own. */
static kvc_status read_f32_rows(reader *r, kvc_paged *a, size_t n, int positive) {
    const size_t first = a->len, d = a->elem_bytes / sizeof(float);
    if (!get_paged(r, a, first, n, sizeof(float))) return KVC_E_SNAPSHOT_TRUNCATED;
    for (size_t i = 0; i < n; i++) {
        const float *row = (const float *)(const void *)kvc_paged_at(a, first + i);
        for (size_t j = 0; j < d; j++) {
            if (!isfinite(row[j]) || (positive && !(row[j] > 0.0f))) return KVC_E_SNAPSHOT_CORRUPT;
        }
    }
    kvc_paged_set_len(a, first + n);
    return KVC_OK;
}

/* Reads one store after its slot arrays are in place; its rows must be
 * exactly head h's rows, split at the window as the mode wants. */
static kvc_status read_store(reader *r, kvc_layer *layer, size_t h, int is_values) {
    kvc_store *store = is_values ? &layer->heads[h].values : &layer->heads[h].keys;
    const size_t d = layer->head_dim;
    const int quantized = store->type != KVC_COMPONENT_F32;
    const uint64_t rows_count = get_u64(r), qrows_count = get_u64(r);
    if (r->failed) return KVC_E_SNAPSHOT_TRUNCATED;
    const size_t split = kvc_first_slot_from(layer, 0, layer->seq_len, KVC_Q8_WINDOW);
    const size_t below = kvc_head_rows_between(layer, h, 0, split);
    const size_t from = kvc_head_rows_between(layer, h, split, layer->seq_len);
    /* Compared as read (64 bits), so they fit a size_t once they match. */
    if (quantized ? rows_count != below || qrows_count != from
                  : rows_count != below + from || qrows_count != 0)
        return KVC_E_SNAPSHOT_CORRUPT;
    const size_t rows_len = (size_t)rows_count, qrows_len = (size_t)qrows_count;
    if (rows_len > left(r) / (d * 4) || qrows_len > left(r) / store->qrows.elem_bytes)
        return KVC_E_SNAPSHOT_TRUNCATED;
    if (kvc_paged_reserve(&store->rows, rows_len) != KVC_OK ||
        kvc_paged_reserve(&store->qrows, qrows_len) != KVC_OK)
        return KVC_E_NOMEM;
    kvc_status status = read_f32_rows(r, &store->rows, rows_len, 0);
    if (status == KVC_OK) status = read_quantized_rows(r, store, 0, qrows_len, d);
    if (status != KVC_OK) return status;
    kvc_paged_set_len(&store->qrows, qrows_len);
    if (store->type == KVC_COMPONENT_Q4) {
        /* The window's f32 copies: at most residual_rows, the newest rows'. */
        const uint64_t copies = get_u64(r);
        if (r->failed) return KVC_E_SNAPSHOT_TRUNCATED;
        if (copies > qrows_len || copies > layer->residual_rows) return KVC_E_SNAPSHOT_CORRUPT;
        if ((size_t)copies > left(r) / (d * 4)) return KVC_E_SNAPSHOT_TRUNCATED;
        store->recent_base = qrows_len - (size_t)copies;
        if (kvc_paged_reserve(&store->recent, (size_t)copies) != KVC_OK) return KVC_E_NOMEM;
        status = read_f32_rows(r, &store->recent, (size_t)copies, 0);
        if (status != KVC_OK) return status;
    }
    const uint32_t has_field = get_u32(r);
    if (r->failed) return KVC_E_SNAPSHOT_TRUNCATED;
    if (has_field != (uint32_t)(layer->field_frozen && quantized)) return KVC_E_SNAPSHOT_CORRUPT;
    if (has_field) {
        if (kvc_paged_reserve(&store->field, 1) != KVC_OK) return KVC_E_NOMEM;
        return read_f32_rows(r, &store->field, 1, 1);
    }
    return KVC_OK;
}

static kvc_status read_full(reader *r, kvc_layer **out) {
    full_header f;
    kvc_status status = read_full_header(r, &f);
    if (status != KVC_OK) return status;
    kvc_layer *layer;
    if (kvc_layer_create(f.H, f.d, (kvc_mode)f.mode, &layer) != KVC_OK) return KVC_E_NOMEM;
    const size_t L = f.L;
    if (kvc_slots_reserve(layer, L) != KVC_OK) {
        kvc_layer_free(layer);
        return KVC_E_NOMEM;
    }
    kvc_slots_set_len(layer, L);
    status = KVC_OK;
    if (!get_paged(r, &layer->imp, 0, L, sizeof(float)) || !get_paged(r, &layer->positions, 0, L, sizeof(uint32_t)))
        status = KVC_E_SNAPSHOT_TRUNCATED;
    for (size_t s = 0; s < L && status == KVC_OK; s++) {
        if (!(*kvc_slot_imp(layer, s) >= 0.0f)) status = KVC_E_SNAPSHOT_CORRUPT; /* +Inf: sums can overflow */
    }
    for (size_t s = 0; s < L && status == KVC_OK; s++) {
        const uint32_t position = kvc_slot_position(layer, s);
        if (position >= f.next_position || (s && position <= kvc_slot_position(layer, s - 1)))
            status = KVC_E_SNAPSHOT_CORRUPT; /* increasing, and before the next one */
    }
    if (status == KVC_OK && get_paged(r, &layer->alive, 0, L, 1)) {
        /* No bits for heads that do not exist. */
        const unsigned spare = (unsigned)(layer->map_bytes * 8 - f.H);
        for (size_t s = 0; s < L && spare; s++) {
            if (kvc_paged_at(&layer->alive, s)[layer->map_bytes - 1] >> (8 - spare)) status = KVC_E_SNAPSHOT_CORRUPT;
        }
    } else if (status == KVC_OK) {
        status = KVC_E_SNAPSHOT_TRUNCATED;
    }
    layer->next_position = f.next_position;
    layer->field_frozen = (int)f.frozen;
    layer->residual_rows = f.residual_rows;
    layer->max_rows = f.max_rows;
    layer->evict_sinks = f.sinks;
    layer->evict_recent = f.recent;
    for (size_t h = 0; h < f.H && status == KVC_OK; h++) {
        status = read_store(r, layer, h, 0);
        if (status == KVC_OK) status = read_store(r, layer, h, 1);
    }
    if (status == KVC_OK && left(r) != 0) status = KVC_E_SNAPSHOT_CORRUPT;
    if (status != KVC_OK) {
        kvc_layer_free(layer);
        return status;
    }
    *out = layer;
    return KVC_OK;
}

static kvc_status read_linear(reader *r, kvc_layer **out) {
    const size_t H = get_u32(r), F = get_u32(r), dv = get_u32(r);
    const double phase_mass = get_f64(r);
    const uint64_t steps = get_u64(r);
    if (r->failed) return KVC_E_SNAPSHOT_TRUNCATED;
    if (H == 0 || H > KVC_MAX_KV_HEADS || F == 0 || F > KVC_MAX_HEAD_DIM || dv == 0 ||
        dv > KVC_MAX_HEAD_DIM || !(phase_mass >= 0.0) || !isfinite(phase_mass) ||
        steps > KVC_MAX_POSITIONS)
        return KVC_E_SNAPSHOT_CORRUPT;
    if (H * F > left(r) / 8 / dv) return KVC_E_SNAPSHOT_TOO_LARGE;
    if (left(r) != H * F * dv * 8) return KVC_E_SNAPSHOT_CORRUPT;
    kvc_layer *layer;
    if (kvc_layer_create_linear(H, F, dv, phase_mass, &layer) != KVC_OK) return KVC_E_NOMEM;
    kvc_linear *linear = layer->linear;
    /* Any f64: a state that overflowed (a decay above 1, say) restores as it was. */
    (void)get_array(r, linear->state, H * F * dv, sizeof(double)); /* its length is checked above */
    linear->steps = (size_t)steps;
    *out = layer;
    return KVC_OK;
}

static kvc_status read_layer(reader *r, kvc_layer **out) {
    const uint32_t kind = get_u32(r);
    if (r->failed) return KVC_E_SNAPSHOT_TRUNCATED;
    if (kind == KVC_KIND_FULL) return read_full(r, out);
    if (kind == KVC_KIND_LINEAR) return read_linear(r, out);
    return KVC_E_SNAPSHOT_CORRUPT;
}

kvc_status kvc_layer_deserialize(const uint8_t *src, size_t len, kvc_layer **out) {
    if (!out) return KVC_E_NULL_POINTER;
    *out = NULL;
    if (!src) return KVC_E_NULL_POINTER;
    reader payload;
    kvc_status status = open_frame(src, len, LAYER_MAGIC, &payload);
    if (status != KVC_OK) return status;
    return read_layer(&payload, out);
}

/* ---- models: the layers' own snapshots, one after another ---- */

static void write_model(writer *w, const void *what) {
    const kvc_model *model = what;
    const size_t count = kvc_model_num_layers(model);
    put_u32(w, (uint32_t)count);
    for (size_t i = 0; i < count; i++) {
        const kvc_layer *layer = kvc_model_layer(model, i);
        const size_t payload = layer_payload_bytes(layer);
        put_u64(w, HEADER_BYTES + payload + TRAILER_BYTES);
        write_framed(w->at, LAYER_MAGIC, payload, write_layer, layer);
        w->at += HEADER_BYTES + payload + TRAILER_BYTES;
    }
}

static size_t model_payload_bytes(const kvc_model *model) {
    size_t bytes = 4;
    for (size_t i = 0; i < kvc_model_num_layers(model); i++)
        bytes += 8 + HEADER_BYTES + layer_payload_bytes(kvc_model_layer(model, i)) + TRAILER_BYTES;
    return bytes;
}

size_t kvc_model_snapshot_size(const kvc_model *model) {
    if (!model || kvc_model_verifying(model)) return 0;
    return HEADER_BYTES + model_payload_bytes(model) + TRAILER_BYTES;
}

kvc_status kvc_model_serialize(const kvc_model *model, uint8_t *dst, size_t dst_len) {
    if (!model || !dst) return KVC_E_NULL_POINTER;
    if (kvc_model_verifying(model)) return KVC_E_VERIFYING;
    /* A reader refuses layers that took in different numbers of positions
     * (a runner between two layers of a step): so does the writer. */
    for (size_t i = 1; i < kvc_model_num_layers(model); i++) {
        if (kvc_layer_positions_taken(kvc_model_layer(model, i)) !=
            kvc_layer_positions_taken(kvc_model_layer(model, 0)))
            return KVC_E_LAYERS;
    }
    const size_t payload = model_payload_bytes(model);
    if (dst_len < HEADER_BYTES + payload + TRAILER_BYTES) return KVC_E_LENGTH;
    write_framed(dst, MODEL_MAGIC, payload, write_model, model);
    return KVC_OK;
}

kvc_status kvc_model_deserialize(const uint8_t *src, size_t len, kvc_model **out) {
    if (!out) return KVC_E_NULL_POINTER;
    *out = NULL;
    if (!src) return KVC_E_NULL_POINTER;
    reader r;
    kvc_status status = open_frame(src, len, MODEL_MAGIC, &r);
    if (status != KVC_OK) return status;
    const size_t count = get_u32(&r);
    if (r.failed) return KVC_E_SNAPSHOT_TRUNCATED;
    if (count == 0) return KVC_E_SNAPSHOT_CORRUPT;
    if (count > left(&r) / (8 + HEADER_BYTES + TRAILER_BYTES)) return KVC_E_SNAPSHOT_TOO_LARGE;
    kvc_layer **layers = kvc_realloc_array(NULL, count, sizeof(kvc_layer *));
    if (!layers) return KVC_E_NOMEM;
    size_t built = 0;
    while (built < count && status == KVC_OK) {
        const uint64_t bytes = get_u64(&r);
        if (r.failed || bytes > left(&r)) status = KVC_E_SNAPSHOT_TRUNCATED;
        else status = kvc_layer_deserialize(r.at, (size_t)bytes, &layers[built]);
        if (status == KVC_OK) {
            r.at += bytes;
            built++;
        }
    }
    if (status == KVC_OK && left(&r) != 0) status = KVC_E_SNAPSHOT_CORRUPT;
    if (status == KVC_OK) {
        status = kvc_model_create(layers, count, out);
        if (status == KVC_E_LAYERS) status = KVC_E_SNAPSHOT_CORRUPT; /* layers at different positions */
    }
    if (status != KVC_OK) {
        for (size_t i = 0; i < built; i++) kvc_layer_free(layers[i]);
    }
    kvc_free(layers);
    return status;
}
