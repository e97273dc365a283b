/*
 * snapshot.c -- a layer or a model as bytes, and back.
 *
 * The format (docs/snapshot-format.md) is little-endian and versioned, and
 * ends with a CRC-32 of everything before it.  Reading trusts nothing: the
 * checksum first, then every count against the bytes left before anything is
 * allocated (so a short snapshot cannot ask for a large allocation), then
 * every invariant the layer keeps (rows per head against the alive map, the
 * f32/int8 split against the window, codes in range, finite values), and a
 * layer is only built once the whole snapshot has passed.  The bytes go out
 * and come in through bytes.c; the size of a snapshot is what its writer
 * counts.
 */
#include <math.h>
#include <string.h>

#include "bytes.h"
#include "internal.h"
#include "../kernels/q8-rows.h"

#define LAYER_MAGIC "KVCL"
#define MODEL_MAGIC "KVCM"
#define MAGIC_BYTES 4u
/* Version 2 added the q4 components: the modes after KVC_MODE_Q8V, the
 * residual window (in what was a reserved word) and a q4 store's window
 * rows.  Version 1 snapshots still load.  The recurrent kinds conv and
 * delta, and the shared kind, are layers of their own kind values (a reader
 * that predates them refuses them as corrupt), not a new version: every
 * other snapshot keeps its bytes.  So is a layer of rows and a Mamba-2
 * state: a full layer's fields and contents, then a Mamba-2 layer's. */
#define SNAPSHOT_VERSION 2u
#define SNAPSHOT_OLDEST_VERSION 1u
/* The CRC-32 after the payload. */
#define TRAILER_BYTES 4u

/* ---- the fixed fields, each run of them listed once ----
 *
 * The writer puts and the reader gets every fixed field through these lists
 * (bytes.h); the arrays between them are the writer's put_* and the
 * reader's get_* of the same element sizes.  Sizes are what the writer
 * counts (a NULL destination), so there is no third copy of the layout. */

/* After the magic: the version, the payload's length. */
enum { FRAME_VERSION, FRAME_PAYLOAD_LEN, FRAME_FIELDS };
static const uint8_t frame_widths[FRAME_FIELDS] = {4, 8};

/* The magic and the frame's fields: what precedes the payload. */
static size_t header_bytes(void) {
    return MAGIC_BYTES + kvc_fields_bytes(frame_widths, FRAME_FIELDS);
}

/* A full layer, after its kind: geometry, counts and the eviction policy. */
enum { FULL_MODE, FULL_H, FULL_D, FULL_L, FULL_NEXT_POSITION, FULL_FROZEN, FULL_RESIDUAL_ROWS,
       FULL_MAX_ROWS, FULL_SINKS, FULL_RECENT, FULL_FIELDS };
static const uint8_t full_widths[FULL_FIELDS] = {4, 4, 4, 8, 8, 4, 4, 8, 8, 8};

/* A window layer, after its kind: its window and rollback, then a full
 * layer's fields and contents. */
enum { WINDOW_SIZE, WINDOW_ROLLBACK, WINDOW_FIELDS };
static const uint8_t window_widths[WINDOW_FIELDS] = {8, 8};

/* A store: its f32 rows and quantized rows (then those rows); the f32
 * copies of its window, if its format keeps copies (then those); whether
 * its field follows. */
enum { STORE_ROWS, STORE_QROWS, STORE_COUNTS };
static const uint8_t store_count_widths[STORE_COUNTS] = {8, 8};
static const uint8_t window_count_width[1] = {8};
static const uint8_t field_flag_width[1] = {4};

/* A linear layer, after its kind (phase_mass: the f64's bits). */
enum { LINEAR_H, LINEAR_F, LINEAR_DV, LINEAR_PHASE_MASS, LINEAR_STEPS, LINEAR_FIELDS };
static const uint8_t linear_widths[LINEAR_FIELDS] = {4, 4, 4, 8, 8};

/* A conv or delta layer, after its kind: its geometry (a conv layer's
 * delta fields 0) and steps, then its f32 state. */
enum { RECURRENT_CHANNELS, RECURRENT_KERNEL, RECURRENT_KEY_HEADS, RECURRENT_VALUE_HEADS, RECURRENT_KEY_DIM,
       RECURRENT_VALUE_DIM, RECURRENT_STEPS, RECURRENT_FIELDS };
static const uint8_t recurrent_widths[RECURRENT_FIELDS] = {4, 4, 4, 4, 4, 4, 8};

/* A shared layer, after its kind: the index of the layer it reads. */
static const uint8_t owner_width[1] = {8};

/* A layer's kind; a model's count of layers; the length of each layer's
 * snapshot before it. */
static const uint8_t kind_width[1] = {4};
static const uint8_t layer_count_width[1] = {4};
static const uint8_t layer_length_width[1] = {8};

/* A slot's importance (f32) and position (u32), before its alive map. */
#define SLOT_NUMBER_BYTES (sizeof(float) + sizeof(uint32_t))

static void put_field(kvc_writer *w, const uint8_t *width, uint64_t value) {
    kvc_put_fields(w, width, 1, &value);
}

static uint64_t get_field(kvc_reader *r, const uint8_t *width) {
    uint64_t value;
    kvc_get_fields(r, width, 1, &value);
    return value;
}

/* ---- writing arrays ---- */

/* A paged sequence whose elements are numbers of `size` bytes, page by page. */
static void put_paged(kvc_writer *w, const kvc_paged *a, size_t size) {
    for (size_t i = 0; i < a->len;) {
        const size_t run = kvc_paged_run(a, i, a->len - i);
        kvc_put_array(w, kvc_paged_at(a, i), run * a->elem_bytes / size, size);
        i += run;
    }
}

/* Quantized rows of row_bytes, each its f32 scale then its codes: the
 * layout in memory too. */
static void put_quantized_rows(kvc_writer *w, const uint8_t *qrows, size_t n, size_t row_bytes) {
    if (!KVC_HOST_BIG_ENDIAN) {
        kvc_put_bytes(w, qrows, n * row_bytes);
        return;
    }
    for (size_t r = 0; r < n; r++) {
        kvc_put_array(w, qrows + r * row_bytes, 1, sizeof(float));
        kvc_put_bytes(w, qrows + r * row_bytes + sizeof(float), row_bytes - sizeof(float));
    }
}

/* ---- writing a layer ---- */

static const kvc_store *store_of(const kvc_layer *layer, size_t h, int is_values) {
    return is_values ? &layer->heads[h].values : &layer->heads[h].keys;
}

/* A store keeps the f32 copies of its residual window only: its
 * rollback rows are not content (a snapshot of a layer truncated exactly is
 * the snapshot of one that never held the positions). */
static size_t window_rows(const kvc_layer *layer, const kvc_store *store) {
    return store->qrows.len - kvc_store_window_first(store, layer->residual_rows);
}

static void write_store(kvc_writer *w, const kvc_layer *layer, size_t h, int is_values) {
    const kvc_store *store = store_of(layer, h, is_values);
    const size_t d = layer->head_dim;
    const int has_field = layer->field_frozen && store->traits->quantized;
    const uint64_t counts[STORE_COUNTS] = {[STORE_ROWS] = store->rows.len, [STORE_QROWS] = store->qrows.len};
    kvc_put_fields(w, store_count_widths, STORE_COUNTS, counts);
    put_paged(w, &store->rows, sizeof(float));
    for (size_t i = 0; i < store->qrows.len;) {
        const size_t run = kvc_paged_run(&store->qrows, i, store->qrows.len - i);
        put_quantized_rows(w, kvc_paged_at(&store->qrows, i), run, store->qrows.elem_bytes);
        i += run;
    }
    if (store->traits->keeps_copies) {
        const size_t count = window_rows(layer, store);
        const size_t first = store->qrows.len - count - store->recent_base;
        put_field(w, window_count_width, count);
        for (size_t i = first; i < first + count;) {
            const size_t run = kvc_paged_run(&store->recent, i, first + count - i);
            kvc_put_array(w, kvc_paged_at(&store->recent, i), run * d, sizeof(float));
            i += run;
        }
    }
    put_field(w, field_flag_width, (uint64_t)has_field);
    if (has_field) put_paged(w, &store->field, sizeof(float));
}

/* A layer of rows, after its kind: a window layer's window, then a full layer's fields and contents. */
static void write_rows(kvc_writer *w, const kvc_layer *layer) {
    const uint64_t header[FULL_FIELDS] = {
        [FULL_MODE] = (uint32_t)layer->mode,
        [FULL_H] = layer->num_kv_heads,
        [FULL_D] = layer->head_dim,
        [FULL_L] = layer->seq_len,
        [FULL_NEXT_POSITION] = layer->next_position,
        [FULL_FROZEN] = (uint32_t)layer->field_frozen,
        [FULL_RESIDUAL_ROWS] = layer->residual_rows,
        [FULL_MAX_ROWS] = layer->max_rows,
        [FULL_SINKS] = layer->evict_sinks,
        [FULL_RECENT] = layer->evict_recent,
    };
    if (layer->kind == KVC_KIND_WINDOW) {
        const uint64_t window[WINDOW_FIELDS] = {[WINDOW_SIZE] = layer->window, [WINDOW_ROLLBACK] = layer->window_rollback};
        kvc_put_fields(w, window_widths, WINDOW_FIELDS, window);
    }
    kvc_put_fields(w, full_widths, FULL_FIELDS, header);
    put_paged(w, &layer->imp, sizeof(float));
    put_paged(w, &layer->positions, sizeof(uint32_t));
    put_paged(w, &layer->alive, 1);
    for (size_t h = 0; h < layer->num_kv_heads; h++) {
        write_store(w, layer, h, 0);
        write_store(w, layer, h, 1);
    }
}

static void write_linear(kvc_writer *w, const kvc_linear *linear) {
    uint64_t phase_bits;
    memcpy(&phase_bits, &linear->phase_mass, sizeof phase_bits);
    const uint64_t header[LINEAR_FIELDS] = {
        [LINEAR_H] = linear->num_heads,
        [LINEAR_F] = linear->num_features,
        [LINEAR_DV] = linear->value_dim,
        [LINEAR_PHASE_MASS] = phase_bits,
        [LINEAR_STEPS] = linear->steps,
    };
    kvc_put_fields(w, linear_widths, LINEAR_FIELDS, header);
    kvc_put_array(w, linear->state, kvc_linear_states.len(linear), sizeof(double));
}

static void write_recurrent(kvc_writer *w, const kvc_recurrent *r) {
    const uint64_t header[RECURRENT_FIELDS] = {
        [RECURRENT_CHANNELS] = r->channels,   [RECURRENT_KERNEL] = r->kernel,
        [RECURRENT_KEY_HEADS] = r->key_heads, [RECURRENT_VALUE_HEADS] = r->value_heads,
        [RECURRENT_KEY_DIM] = r->key_dim,     [RECURRENT_VALUE_DIM] = r->value_dim,
        [RECURRENT_STEPS] = r->steps,
    };
    kvc_put_fields(w, recurrent_widths, RECURRENT_FIELDS, header);
    kvc_put_array(w, r->state, kvc_recurrent_states.len(r), sizeof(float));
}

/* Its kind, then what the layer holds: a linear state, an owner, or rows
 * and a recurrent state, one or both (a layer of both: rows first); a none
 * layer its kind alone. */
static void write_layer(kvc_writer *w, const void *what) {
    const kvc_layer *layer = what;
    put_field(w, kind_width, layer->kind);
    if (kvc_linear_of(layer)) write_linear(w, kvc_linear_of(layer));
    if (layer->kind == KVC_KIND_SHARED) put_field(w, owner_width, layer->owner);
    if (kvc_has_rows(layer)) write_rows(w, layer);
    if (kvc_recurrent_of(layer)) write_recurrent(w, kvc_recurrent_of(layer));
}

typedef void write_payload_fn(kvc_writer *w, const void *what);

/* magic, version, payload length, payload (by `write`), CRC-32 of all
 * before it.  The payload is counted first: its length precedes it. */
static void write_framed(kvc_writer *w, const char *magic, write_payload_fn *write, const void *what) {
    kvc_writer payload = {NULL, 0};
    write(&payload, what);
    uint8_t *start = w->at;
    const uint64_t frame[FRAME_FIELDS] = {[FRAME_VERSION] = SNAPSHOT_VERSION, [FRAME_PAYLOAD_LEN] = payload.bytes};
    kvc_put_bytes(w, magic, MAGIC_BYTES);
    kvc_put_fields(w, frame_widths, FRAME_FIELDS, frame);
    write(w, what);
    kvc_put_u32(w, start ? kvc_crc32(start, (size_t)(w->at - start)) : 0);
}

/* The bytes write_framed writes: it counted. */
static size_t framed_bytes(const char *magic, write_payload_fn *write, const void *what) {
    kvc_writer count = {NULL, 0};
    write_framed(&count, magic, write, what);
    return count.bytes;
}

/* Writes a snapshot into dst if it has room for all of it. */
static kvc_status serialize_framed(const char *magic, write_payload_fn *write, const void *what, uint8_t *dst,
                                   size_t dst_len) {
    if (dst_len < framed_bytes(magic, write, what)) return KVC_E_LENGTH;
    kvc_writer w = {dst, 0};
    write_framed(&w, magic, write, what);
    return KVC_OK;
}

size_t kvc_layer_snapshot_size(const kvc_layer *layer) {
    if (!layer || layer->verifying) return 0;
    return framed_bytes(LAYER_MAGIC, write_layer, layer);
}

kvc_status kvc_layer_serialize(const kvc_layer *layer, uint8_t *dst, size_t dst_len) {
    if (!layer || !dst) return KVC_E_NULL_POINTER;
    if (layer->verifying) return KVC_E_VERIFYING;
    return serialize_framed(LAYER_MAGIC, write_layer, layer, dst, dst_len);
}

/* ---- reading a layer ---- */

/* Checks the frame (magic, version, length, CRC) and returns a reader over
 * the payload. */
/* The payload of a frame of `magic`, its version; its CRC-32 checked
 * unless the caller has checked it (verify_crc 0). */
static kvc_status open_frame(const uint8_t *src, size_t len, const char *magic, int verify_crc, kvc_reader *payload,
                             uint32_t *version) {
    if (len < MAGIC_BYTES || memcmp(src, magic, MAGIC_BYTES) != 0) return KVC_E_SNAPSHOT_MAGIC;
    kvc_reader r = {src + MAGIC_BYTES, src + len, 0};
    uint64_t frame[FRAME_FIELDS];
    kvc_get_fields(&r, frame_widths, 1, &frame[FRAME_VERSION]); /* a version is judged before the rest */
    if (r.failed) return KVC_E_SNAPSHOT_TRUNCATED;
    if (frame[FRAME_VERSION] < SNAPSHOT_OLDEST_VERSION || frame[FRAME_VERSION] > SNAPSHOT_VERSION)
        return KVC_E_SNAPSHOT_VERSION;
    kvc_get_fields(&r, frame_widths + 1, FRAME_FIELDS - 1, &frame[FRAME_PAYLOAD_LEN]);
    const uint64_t payload_len = frame[FRAME_PAYLOAD_LEN];
    if (r.failed || payload_len > kvc_left(&r) || kvc_left(&r) - payload_len < TRAILER_BYTES)
        return KVC_E_SNAPSHOT_TRUNCATED;
    if (kvc_left(&r) - payload_len != TRAILER_BYTES) return KVC_E_SNAPSHOT_CORRUPT; /* bytes after it */
    const uint8_t *payload_end = r.at + payload_len;
    kvc_reader crc = {payload_end, r.end, 0};
    if (verify_crc && kvc_get_u32(&crc) != kvc_crc32(src, (size_t)(payload_end - src))) return KVC_E_SNAPSHOT_CHECKSUM;
    *payload = (kvc_reader){r.at, r.at + payload_len, 0};
    *version = (uint32_t)frame[FRAME_VERSION];
    return KVC_OK;
}

/* Reads n quantized rows: each scale finite and positive, codes such as
 * the store's format makes. */
static kvc_status read_quantized_rows(kvc_reader *r, kvc_store *store, size_t first, size_t n, size_t d) {
    const size_t row_bytes = store->qrows.elem_bytes, code_bytes = row_bytes - sizeof(float);
    if (!kvc_has(r, n * row_bytes)) return KVC_E_SNAPSHOT_TRUNCATED;
    for (size_t q = 0; q < n; q++, r->at += row_bytes) {
        uint8_t *qrow = kvc_paged_at(&store->qrows, first + q);
        kvc_copy_little_endian(qrow, r->at, 1, sizeof(float));
        memcpy(qrow + sizeof(float), r->at + sizeof(float), code_bytes);
        const float scale = kvc_q8_row_scale(qrow);
        if (!isfinite(scale) || !(scale > 0.0f)) return KVC_E_SNAPSHOT_CORRUPT;
        if (!store->traits->codes_valid(d, qrow + sizeof(float))) return KVC_E_SNAPSHOT_CORRUPT;
    }
    return KVC_OK;
}

/* The geometry and counts of a full layer, checked, before any allocation. */
typedef struct full_header {
    size_t mode, H, d, L, next_position, frozen, residual_rows, max_rows, sinks, recent;
} full_header;

static kvc_status read_full_header(kvc_reader *r, uint32_t version, full_header *f) {
    uint64_t field[FULL_FIELDS];
    kvc_get_fields(r, full_widths, FULL_FIELDS, field);
    if (r->failed) return KVC_E_SNAPSHOT_TRUNCATED;
    f->mode = (size_t)field[FULL_MODE];
    f->H = (size_t)field[FULL_H];
    f->d = (size_t)field[FULL_D];
    f->frozen = (size_t)field[FULL_FROZEN];
    /* 64-bit fields are checked before they become a size_t, which may be
     * 32 bits (wasm): no high word may be dropped unseen. */
    const uint64_t L = field[FULL_L], next_position = field[FULL_NEXT_POSITION];
    /* Reserved (0) in version 1, whose modes had no q4 component. */
    const uint64_t residual_rows = field[FULL_RESIDUAL_ROWS];
    const uint64_t max_rows = field[FULL_MAX_ROWS], sinks = field[FULL_SINKS], recent = field[FULL_RECENT];
    const size_t modes = version == 1 ? KVC_MODE_Q8V + 1 : KVC_MODE_COUNT;
    if (f->mode >= modes || f->H == 0 || f->H > KVC_MAX_KV_HEADS || f->d == 0 ||
        f->d > KVC_MAX_HEAD_DIM || f->frozen > 1 || next_position > KVC_MAX_POSITIONS ||
        L > next_position || (version == 1 ? residual_rows != 0 : residual_rows > KVC_Q4_MAX_RESIDUAL_ROWS))
        return KVC_E_SNAPSHOT_CORRUPT;
    f->residual_rows = version == 1 ? KVC_Q4_RESIDUAL_ROWS : (size_t)residual_rows;
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
    const size_t map_bytes = (f->H + 7) / 8, slot_bytes = SLOT_NUMBER_BYTES + map_bytes;
    const size_t store_bytes = 2 * (kvc_fields_bytes(store_count_widths, STORE_COUNTS) +
                                    kvc_fields_bytes(field_flag_width, 1));
    if (f->L > kvc_left(r) / slot_bytes) return KVC_E_SNAPSHOT_TOO_LARGE;
    if (f->H > (kvc_left(r) - f->L * slot_bytes) / store_bytes) return KVC_E_SNAPSHOT_TOO_LARGE;
    return KVC_OK;
}

/* Reads n elements of numbers of `size` bytes into a reserved sequence
 * from element `first` on, page by page; 0 when the bytes run out. */
static int get_paged(kvc_reader *r, kvc_paged *a, size_t first, size_t n, size_t size) {
    for (size_t done = 0; done < n;) {
        const size_t run = kvc_paged_run(a, first + done, n - done);
        if (!kvc_get_array(r, kvc_paged_at(a, first + done), run * a->elem_bytes / size, size)) return 0;
        done += run;
    }
    return 1;
}

/* Reads n rows of f32 values that must be finite (and positive when
 * `positive`) into a reserved sequence: the elements [len, len + n) become
 * its own. */
static kvc_status read_f32_rows(kvc_reader *r, kvc_paged *a, size_t n, int positive) {
    const size_t first = a->len, d = a->elem_bytes / sizeof(float);
    if (!get_paged(r, a, first, n, sizeof(float))) return KVC_E_SNAPSHOT_TRUNCATED;
    kvc_all_finite_fn *all_finite = kvc_kernels_active()->all_finite;
    for (size_t i = 0; i < n; i++) {
        const float *row = (const float *)(const void *)kvc_paged_at(a, first + i);
        if (!all_finite(d, row)) return KVC_E_SNAPSHOT_CORRUPT;
        for (size_t j = 0; positive && j < d; j++) {
            if (!(row[j] > 0.0f)) return KVC_E_SNAPSHOT_CORRUPT;
        }
    }
    kvc_paged_set_len(a, first + n);
    return KVC_OK;
}

/* Reads one store after its slot arrays are in place; its rows must be
 * exactly head h's rows, split at the window as the mode wants. */
static kvc_status read_store(kvc_reader *r, kvc_layer *layer, size_t h, int is_values) {
    kvc_store *store = is_values ? &layer->heads[h].values : &layer->heads[h].keys;
    const size_t d = layer->head_dim;
    const int quantized = store->traits->quantized;
    uint64_t counts[STORE_COUNTS];
    kvc_get_fields(r, store_count_widths, STORE_COUNTS, counts);
    if (r->failed) return KVC_E_SNAPSHOT_TRUNCATED;
    const uint64_t rows_count = counts[STORE_ROWS], qrows_count = counts[STORE_QROWS];
    const size_t split = kvc_first_slot_from(layer, 0, layer->seq_len, KVC_Q8_WINDOW);
    const size_t below = kvc_head_rows_between(layer, h, 0, split);
    const size_t from = kvc_head_rows_between(layer, h, split, layer->seq_len);
    /* Compared as read (64 bits), so they fit a size_t once they match. */
    if (quantized ? rows_count != below || qrows_count != from
                  : rows_count != below + from || qrows_count != 0)
        return KVC_E_SNAPSHOT_CORRUPT;
    const size_t rows_len = (size_t)rows_count, qrows_len = (size_t)qrows_count;
    if (rows_len > kvc_left(r) / (d * sizeof(float)) || qrows_len > kvc_left(r) / store->qrows.elem_bytes)
        return KVC_E_SNAPSHOT_TRUNCATED;
    if (kvc_paged_reserve(&store->rows, rows_len) != KVC_OK ||
        kvc_paged_reserve(&store->qrows, qrows_len) != KVC_OK)
        return KVC_E_NOMEM;
    kvc_status status = read_f32_rows(r, &store->rows, rows_len, 0);
    if (status == KVC_OK) status = read_quantized_rows(r, store, 0, qrows_len, d);
    if (status != KVC_OK) return status;
    kvc_paged_set_len(&store->qrows, qrows_len);
    if (store->traits->keeps_copies) {
        /* The window's f32 copies: at most residual_rows, the newest rows'. */
        const uint64_t copies = get_field(r, window_count_width);
        if (r->failed) return KVC_E_SNAPSHOT_TRUNCATED;
        if (copies > qrows_len || copies > layer->residual_rows) return KVC_E_SNAPSHOT_CORRUPT;
        if ((size_t)copies > kvc_left(r) / (d * sizeof(float))) return KVC_E_SNAPSHOT_TRUNCATED;
        store->recent_base = qrows_len - (size_t)copies;
        if (kvc_paged_reserve(&store->recent, (size_t)copies) != KVC_OK) return KVC_E_NOMEM;
        status = read_f32_rows(r, &store->recent, (size_t)copies, 0);
        if (status != KVC_OK) return status;
    }
    const uint64_t has_field = get_field(r, field_flag_width);
    if (r->failed) return KVC_E_SNAPSHOT_TRUNCATED;
    if (has_field != (uint64_t)(layer->field_frozen && quantized)) return KVC_E_SNAPSHOT_CORRUPT;
    if (has_field) {
        if (kvc_paged_reserve(&store->field, 1) != KVC_OK) return KVC_E_NOMEM;
        return read_f32_rows(r, &store->field, 1, 1);
    }
    return KVC_OK;
}

/* A full layer's fields and contents, which may be followed by more (a state). */
static kvc_status read_rows(kvc_reader *r, uint32_t version, kvc_layer **out) {
    full_header f;
    kvc_status status = read_full_header(r, version, &f);
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
    if (status != KVC_OK) {
        kvc_layer_free(layer);
        return status;
    }
    *out = layer;
    return KVC_OK;
}

static kvc_status read_full(kvc_reader *r, uint32_t version, kvc_layer **out) {
    kvc_status status = read_rows(r, version, out);
    if (status == KVC_OK && kvc_left(r) != 0) {
        kvc_layer_free(*out);
        *out = NULL;
        status = KVC_E_SNAPSHOT_CORRUPT;
    }
    return status;
}

static kvc_status read_window(kvc_reader *r, uint32_t version, kvc_layer **out) {
    uint64_t field[WINDOW_FIELDS];
    kvc_get_fields(r, window_widths, WINDOW_FIELDS, field);
    if (r->failed) return KVC_E_SNAPSHOT_TRUNCATED;
    if (field[WINDOW_SIZE] == 0 || field[WINDOW_SIZE] > KVC_MAX_POSITIONS || field[WINDOW_ROLLBACK] > KVC_MAX_POSITIONS)
        return KVC_E_SNAPSHOT_CORRUPT;
    kvc_layer *layer;
    kvc_status status = read_full(r, version, &layer);
    if (status != KVC_OK) return status;
    if (layer->max_rows) { /* a window layer bounds itself */
        kvc_layer_free(layer);
        return KVC_E_SNAPSHOT_CORRUPT;
    }
    layer->kind = KVC_KIND_WINDOW;
    layer->window = (size_t)field[WINDOW_SIZE];
    layer->window_rollback = (size_t)field[WINDOW_ROLLBACK];
    *out = layer;
    return KVC_OK;
}

static kvc_status read_linear(kvc_reader *r, kvc_layer **out) {
    uint64_t field[LINEAR_FIELDS];
    kvc_get_fields(r, linear_widths, LINEAR_FIELDS, field);
    if (r->failed) return KVC_E_SNAPSHOT_TRUNCATED;
    const size_t H = (size_t)field[LINEAR_H], F = (size_t)field[LINEAR_F], dv = (size_t)field[LINEAR_DV];
    double phase_mass;
    memcpy(&phase_mass, &field[LINEAR_PHASE_MASS], sizeof phase_mass);
    const uint64_t steps = field[LINEAR_STEPS];
    if (H == 0 || H > KVC_MAX_KV_HEADS || F == 0 || F > KVC_MAX_HEAD_DIM || dv == 0 ||
        dv > KVC_MAX_HEAD_DIM || !(phase_mass >= 0.0) || !isfinite(phase_mass) ||
        steps > KVC_MAX_POSITIONS)
        return KVC_E_SNAPSHOT_CORRUPT;
    if (H * F > kvc_left(r) / sizeof(double) / dv) return KVC_E_SNAPSHOT_TOO_LARGE;
    if (kvc_left(r) != H * F * dv * sizeof(double)) return KVC_E_SNAPSHOT_CORRUPT;
    kvc_layer *layer;
    if (kvc_layer_create_linear(H, F, dv, phase_mass, &layer) != KVC_OK) return KVC_E_NOMEM;
    kvc_linear *linear = kvc_linear_of(layer);
    /* Any f64: a state that overflowed (a decay above 1, say) restores as it was. */
    (void)kvc_get_array(r, linear->state, H * F * dv, sizeof(double)); /* its length is checked above */
    linear->steps = (size_t)steps;
    *out = layer;
    return KVC_OK;
}

static kvc_status read_recurrent(kvc_reader *r, kvc_kind kind, kvc_layer **out) {
    uint64_t field[RECURRENT_FIELDS];
    kvc_get_fields(r, recurrent_widths, RECURRENT_FIELDS, field);
    if (r->failed) return KVC_E_SNAPSHOT_TRUNCATED;
    const uint64_t steps = field[RECURRENT_STEPS];
    if (steps > KVC_MAX_POSITIONS) return KVC_E_SNAPSHOT_CORRUPT;
    /* The creators check the geometry (every field below 2^32) before they allocate. */
    for (int i = RECURRENT_CHANNELS; i <= RECURRENT_VALUE_DIM; i++) {
        if (field[i] > KVC_MAX_CHANNELS) return KVC_E_SNAPSHOT_CORRUPT;
    }
    const size_t C = (size_t)field[RECURRENT_CHANNELS], K = (size_t)field[RECURRENT_KERNEL];
    const size_t Hk = (size_t)field[RECURRENT_KEY_HEADS], Hv = (size_t)field[RECURRENT_VALUE_HEADS];
    const size_t dk = (size_t)field[RECURRENT_KEY_DIM], dv = (size_t)field[RECURRENT_VALUE_DIM];
    /* The state's length, before anything is allocated for it. */
    const uint64_t len = (uint64_t)(K > 0 ? K - 1 : 0) * C + (uint64_t)Hv * dk * dv;
    if (len > kvc_left(r) / sizeof(float)) return KVC_E_SNAPSHOT_TOO_LARGE;
    kvc_layer *layer = NULL;
    const kvc_status status = kind == KVC_KIND_CONV    ? (Hk || Hv || dk || dv ? KVC_E_CONV : kvc_layer_create_conv(C, K, &layer))
                              : kind == KVC_KIND_DELTA ? kvc_layer_create_delta(Hk, Hv, dk, dv, K, &layer)
                                                       : kvc_layer_create_mamba2(Hv, dv, Hk, dk, K, &layer);
    if (status == KVC_E_NOMEM) return KVC_E_NOMEM;
    if (status != KVC_OK) return KVC_E_SNAPSHOT_CORRUPT;
    kvc_recurrent *state = kvc_recurrent_of(layer);
    /* A delta layer's channels follow from its heads; the state fills the rest exactly, finite. */
    int valid = state->channels == C && kvc_left(r) == len * sizeof(float);
    if (valid) {
        (void)kvc_get_array(r, state->state, (size_t)len, sizeof(float)); /* its length is checked above */
        valid = kvc_kernels_active()->all_finite((size_t)len, state->state);
    }
    if (!valid) {
        kvc_layer_free(layer);
        return KVC_E_SNAPSHOT_CORRUPT;
    }
    state->steps = (size_t)steps;
    *out = layer;
    return KVC_OK;
}

/* A full layer's rows, then a Mamba-2 layer's state: what the rows are read
 * into takes the state's.  Such a layer does not evict. */
static kvc_status read_attn_mamba2(kvc_reader *r, uint32_t version, kvc_layer **out) {
    kvc_layer *layer, *state;
    kvc_status status = read_rows(r, version, &layer);
    if (status != KVC_OK) return status;
    status = layer->max_rows ? KVC_E_SNAPSHOT_CORRUPT : read_recurrent(r, KVC_KIND_MAMBA2, &state);
    if (status != KVC_OK) {
        kvc_layer_free(layer);
        return status;
    }
    layer->kind = KVC_KIND_ATTN_MAMBA2;
    layer->state = state->state;
    state->state = NULL;
    kvc_layer_free(state);
    *out = layer;
    return KVC_OK;
}

/* Whether the owner is an earlier layer of rows is the model's to check
 * (kvc_model_create): alone, a shared layer may name any layer. */
static kvc_status read_shared(kvc_reader *r, kvc_layer **out) {
    const uint64_t owner = get_field(r, owner_width);
    if (r->failed) return KVC_E_SNAPSHOT_TRUNCATED;
    if (kvc_left(r) != 0) return KVC_E_SNAPSHOT_CORRUPT;
    if (owner > SIZE_MAX) return KVC_E_SNAPSHOT_TOO_LARGE; /* no model of this build has that many layers */
    return kvc_layer_create_shared((size_t)owner, out);
}

static kvc_status read_layer(kvc_reader *r, uint32_t version, kvc_layer **out) {
    const uint64_t kind = get_field(r, kind_width);
    if (r->failed) return KVC_E_SNAPSHOT_TRUNCATED;
    if (kind == KVC_KIND_FULL) return read_full(r, version, out);
    if (kind == KVC_KIND_WINDOW) return read_window(r, version, out);
    if (kind == KVC_KIND_LINEAR) return read_linear(r, out);
    if (kind == KVC_KIND_CONV || kind == KVC_KIND_DELTA || kind == KVC_KIND_MAMBA2) return read_recurrent(r, (kvc_kind)kind, out);
    if (kind == KVC_KIND_SHARED) return read_shared(r, out);
    if (kind == KVC_KIND_NONE) return kvc_left(r) != 0 ? KVC_E_SNAPSHOT_CORRUPT : kvc_layer_create_none(out);
    if (kind == KVC_KIND_ATTN_MAMBA2) return read_attn_mamba2(r, version, out);
    return KVC_E_SNAPSHOT_CORRUPT;
}

/* A layer from its frame, whose CRC-32 is checked unless verify_crc is 0. */
static kvc_status layer_from_frame(const uint8_t *src, size_t len, int verify_crc, kvc_layer **out) {
    kvc_reader payload;
    uint32_t version;
    kvc_status status = open_frame(src, len, LAYER_MAGIC, verify_crc, &payload, &version);
    if (status != KVC_OK) return status;
    return read_layer(&payload, version, out);
}

kvc_status kvc_layer_deserialize(const uint8_t *src, size_t len, kvc_layer **out) {
    if (!out) return KVC_E_NULL_POINTER;
    *out = NULL;
    if (!src) return KVC_E_NULL_POINTER;
    return layer_from_frame(src, len, 1, out);
}

/* ---- models: the layers' own snapshots, one after another ---- */

static void write_model(kvc_writer *w, const void *what) {
    const kvc_model *model = what;
    const size_t count = kvc_model_num_layers(model);
    put_field(w, layer_count_width, count);
    for (size_t i = 0; i < count; i++) {
        const kvc_layer *layer = kvc_model_layer(model, i);
        put_field(w, layer_length_width, framed_bytes(LAYER_MAGIC, write_layer, layer));
        write_framed(w, LAYER_MAGIC, write_layer, layer);
    }
}

size_t kvc_model_snapshot_size(const kvc_model *model) {
    if (!model || kvc_model_verifying(model)) return 0;
    return framed_bytes(MODEL_MAGIC, write_model, model);
}

kvc_status kvc_model_serialize(const kvc_model *model, uint8_t *dst, size_t dst_len) {
    if (!model || !dst) return KVC_E_NULL_POINTER;
    if (kvc_model_verifying(model)) return KVC_E_VERIFYING;
    /* A reader refuses layers that took in different numbers of positions
     * (a runner between two layers of a step): so does the writer. */
    if (!kvc_model_aligned(model)) return KVC_E_LAYERS;
    return serialize_framed(MODEL_MAGIC, write_model, model, dst, dst_len);
}

kvc_status kvc_model_deserialize(const uint8_t *src, size_t len, kvc_model **out) {
    if (!out) return KVC_E_NULL_POINTER;
    *out = NULL;
    if (!src) return KVC_E_NULL_POINTER;
    kvc_reader r;
    uint32_t version; /* the layers carry their own */
    kvc_status status = open_frame(src, len, MODEL_MAGIC, 1, &r, &version);
    if (status != KVC_OK) return status;
    const uint64_t count = get_field(&r, layer_count_width);
    if (r.failed) return KVC_E_SNAPSHOT_TRUNCATED;
    if (count == 0) return KVC_E_SNAPSHOT_CORRUPT;
    /* Each layer: its length, then at least a frame. */
    const size_t least_layer_bytes = kvc_fields_bytes(layer_length_width, 1) + header_bytes() + TRAILER_BYTES;
    if (count > kvc_left(&r) / least_layer_bytes) return KVC_E_SNAPSHOT_TOO_LARGE;
    kvc_layer **layers = kvc_realloc_array(NULL, (size_t)count, sizeof(kvc_layer *));
    if (!layers) return KVC_E_NOMEM;
    size_t built = 0;
    while (built < count && status == KVC_OK) {
        const uint64_t bytes = get_field(&r, layer_length_width);
        if (r.failed || bytes > kvc_left(&r)) status = KVC_E_SNAPSHOT_TRUNCATED;
        else status = kvc_layer_deserialize(r.at, (size_t)bytes, &layers[built]);
        if (status == KVC_OK) {
            r.at += bytes;
            built++;
        }
    }
    if (status == KVC_OK && kvc_left(&r) != 0) status = KVC_E_SNAPSHOT_CORRUPT;
    if (status == KVC_OK) {
        status = kvc_model_create(layers, (size_t)count, out);
        if (status == KVC_E_LAYERS) status = KVC_E_SNAPSHOT_CORRUPT; /* layers at different positions */
    }
    if (status != KVC_OK) {
        for (size_t i = 0; i < built; i++) kvc_layer_free(layers[i]);
    }
    kvc_free(layers);
    return status;
}

/* ---- models read in pieces ----
 *
 * A reader takes a model snapshot as its bytes come (a file, a download)
 * and holds one layer's frame at a time: it tells where the next bytes go
 * (a small buffer for the fixed fields, a layer's frame), and each frame,
 * once whole, becomes a layer and its buffer is freed, so the next layer's
 * pages reuse that memory.  Each frame's CRC-32 is computed once: checked
 * against the frame's own and joined into the model's, which the last four
 * bytes must match before finish() gives the model.  What is refused is
 * what kvc_model_deserialize refuses; a damaged byte is found at the first
 * field or checksum it breaks. */

enum reader_phase { READ_HEAD, READ_LENGTH, READ_LAYER, READ_TRAILER, READ_DONE };

struct kvc_model_reader {
    size_t total, taken;         /* the snapshot's bytes, and how many came */
    enum reader_phase phase;
    uint8_t fixed[32];           /* the fields being read (head, a length, the trailer) */
    size_t fixed_len, fixed_at;
    uint8_t *frame;              /* the layer frame being read */
    size_t frame_len, frame_at;
    uint32_t crc;                /* of every byte before the trailer that came */
    kvc_status status;           /* the first failure, kept */
    kvc_layer **layers;
    size_t count, built;
};

/* The fixed bytes the snapshot starts with: the frame's header and the layer count. */
static size_t model_head_bytes(void) {
    return header_bytes() + kvc_fields_bytes(layer_count_width, 1);
}

kvc_status kvc_model_reader_create(size_t total, kvc_model_reader **out) {
    if (!out) return KVC_E_NULL_POINTER;
    *out = NULL;
    if (total < model_head_bytes() + TRAILER_BYTES) return KVC_E_SNAPSHOT_TRUNCATED;
    kvc_model_reader *reader = kvc_malloc(sizeof *reader);
    if (!reader) return KVC_E_NOMEM;
    memset(reader, 0, sizeof *reader);
    reader->total = total;
    reader->phase = READ_HEAD;
    reader->fixed_len = model_head_bytes();
    *out = reader;
    return KVC_OK;
}

/* The head read: magic, version, a payload that spans the snapshot, a count of layers its bytes can hold. */
static kvc_status reader_take_head(kvc_model_reader *reader) {
    const uint8_t *head = reader->fixed;
    if (memcmp(head, MODEL_MAGIC, MAGIC_BYTES) != 0) return KVC_E_SNAPSHOT_MAGIC;
    kvc_reader r = {head + MAGIC_BYTES, head + reader->fixed_len, 0};
    uint64_t frame[FRAME_FIELDS];
    kvc_get_fields(&r, frame_widths, FRAME_FIELDS, frame);
    if (frame[FRAME_VERSION] < SNAPSHOT_OLDEST_VERSION || frame[FRAME_VERSION] > SNAPSHOT_VERSION)
        return KVC_E_SNAPSHOT_VERSION;
    if (frame[FRAME_PAYLOAD_LEN] != reader->total - header_bytes() - TRAILER_BYTES) return KVC_E_SNAPSHOT_CORRUPT;
    const uint64_t count = get_field(&r, layer_count_width);
    const size_t least_layer_bytes = kvc_fields_bytes(layer_length_width, 1) + header_bytes() + TRAILER_BYTES;
    if (count == 0) return KVC_E_SNAPSHOT_CORRUPT;
    if (count > (reader->total - reader->fixed_len - TRAILER_BYTES) / least_layer_bytes) return KVC_E_SNAPSHOT_TOO_LARGE;
    reader->layers = kvc_realloc_array(NULL, (size_t)count, sizeof(kvc_layer *));
    if (!reader->layers) return KVC_E_NOMEM;
    reader->count = (size_t)count;
    return KVC_OK;
}

/* What follows the fixed bytes just read (reader->fixed, reader->fixed_len). */
static kvc_status reader_after_fixed(kvc_model_reader *reader) {
    if (reader->phase == READ_TRAILER) {
        kvc_reader r = {reader->fixed, reader->fixed + TRAILER_BYTES, 0};
        if (kvc_get_u32(&r) != reader->crc) return KVC_E_SNAPSHOT_CHECKSUM;
        reader->phase = READ_DONE;
        return KVC_OK;
    }
    reader->crc = kvc_crc32_update(reader->crc, reader->fixed, reader->fixed_len);
    if (reader->phase == READ_HEAD) {
        const kvc_status status = reader_take_head(reader);
        if (status != KVC_OK) return status;
    } else {
        kvc_reader r = {reader->fixed, reader->fixed + reader->fixed_len, 0};
        const uint64_t bytes = get_field(&r, layer_length_width);
        if (reader->total - reader->taken < TRAILER_BYTES || bytes > reader->total - reader->taken - TRAILER_BYTES)
            return KVC_E_SNAPSHOT_TRUNCATED;
        if (bytes < header_bytes() + TRAILER_BYTES) return KVC_E_SNAPSHOT_CORRUPT;
        reader->frame = kvc_malloc((size_t)bytes);
        if (!reader->frame) return KVC_E_NOMEM;
        reader->frame_len = (size_t)bytes;
        reader->frame_at = 0;
        reader->phase = READ_LAYER;
        return KVC_OK;
    }
    reader->phase = READ_LENGTH;
    reader->fixed_len = kvc_fields_bytes(layer_length_width, 1);
    return reader->fixed_len > reader->total - reader->taken ? KVC_E_SNAPSHOT_TRUNCATED : KVC_OK;
}

/* A whole layer frame: its CRC once (its own, then joined into the model's), then the layer. */
static kvc_status reader_after_frame(kvc_model_reader *reader) {
    const size_t body = reader->frame_len - TRAILER_BYTES;
    const uint32_t frame_crc = kvc_crc32(reader->frame, body);
    kvc_reader trailer = {reader->frame + body, reader->frame + reader->frame_len, 0};
    if (kvc_get_u32(&trailer) != frame_crc) return KVC_E_SNAPSHOT_CHECKSUM;
    reader->crc = kvc_crc32_update(kvc_crc32_join(reader->crc, frame_crc, body), reader->frame + body, TRAILER_BYTES);
    const kvc_status status = layer_from_frame(reader->frame, reader->frame_len, 0, &reader->layers[reader->built]);
    kvc_free(reader->frame);
    reader->frame = NULL;
    if (status != KVC_OK) return status;
    reader->built++;
    const int last = reader->built == reader->count;
    if (last && reader->total - reader->taken != TRAILER_BYTES) return KVC_E_SNAPSHOT_CORRUPT; /* bytes after the layers */
    reader->phase = last ? READ_TRAILER : READ_LENGTH;
    reader->fixed_len = last ? TRAILER_BYTES : kvc_fields_bytes(layer_length_width, 1);
    return reader->fixed_len > reader->total - reader->taken ? KVC_E_SNAPSHOT_TRUNCATED : KVC_OK;
}

kvc_status kvc_model_reader_next(kvc_model_reader *reader, uint8_t **dst, size_t *room) {
    if (!reader || !dst || !room) return KVC_E_NULL_POINTER;
    *dst = NULL;
    *room = 0;
    if (reader->status != KVC_OK) return reader->status;
    if (reader->phase == READ_DONE) return KVC_OK;
    if (reader->phase == READ_LAYER) {
        *dst = reader->frame + reader->frame_at;
        *room = reader->frame_len - reader->frame_at;
    } else {
        *dst = reader->fixed + reader->fixed_at;
        *room = reader->fixed_len - reader->fixed_at;
    }
    return KVC_OK;
}

kvc_status kvc_model_reader_wrote(kvc_model_reader *reader, size_t n) {
    if (!reader) return KVC_E_NULL_POINTER;
    if (reader->status != KVC_OK) return reader->status;
    uint8_t *dst;
    size_t room;
    kvc_model_reader_next(reader, &dst, &room);
    if (n > room) return KVC_E_LENGTH; /* the caller's mistake: the reader is as it was */
    reader->taken += n;
    kvc_status status = KVC_OK;
    if (reader->phase == READ_LAYER) {
        reader->frame_at += n;
        if (reader->frame_at == reader->frame_len) status = reader_after_frame(reader);
    } else {
        reader->fixed_at += n;
        if (reader->fixed_at == reader->fixed_len) {
            reader->fixed_at = 0;
            status = reader_after_fixed(reader);
        }
    }
    reader->status = status;
    return status;
}

kvc_status kvc_model_reader_finish(kvc_model_reader *reader, kvc_model **out) {
    if (!out) return KVC_E_NULL_POINTER;
    *out = NULL;
    if (!reader) return KVC_E_NULL_POINTER;
    if (reader->status != KVC_OK) return reader->status;
    if (reader->phase != READ_DONE) return KVC_E_SNAPSHOT_TRUNCATED;
    kvc_status status = kvc_model_create(reader->layers, reader->count, out);
    if (status == KVC_E_LAYERS) status = KVC_E_SNAPSHOT_CORRUPT; /* layers at different positions */
    if (status == KVC_OK) reader->built = 0; /* the model owns them */
    reader->status = status == KVC_OK ? KVC_E_SNAPSHOT_CORRUPT : status; /* finished: nothing more to give */
    return status;
}

void kvc_model_reader_free(kvc_model_reader *reader) {
    if (!reader) return;
    for (size_t i = 0; i < reader->built; i++) kvc_layer_free(reader->layers[i]);
    kvc_free(reader->layers);
    kvc_free(reader->frame);
    kvc_free(reader);
}
