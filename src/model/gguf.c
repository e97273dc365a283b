/*
 * gguf.c -- the GGUF header parser.
 *
 * One walk over the header checks every field as it goes.  It runs twice:
 * first to measure (how many values and strings, how many header bytes)
 * with nothing allocated, which is where every refusal but three is found;
 * then, into the one block the first walk sized, to fill.  The three need
 * the whole header and the block: duplicate keys, duplicate tensor names,
 * overlapping tensors.
 *
 * Bounds.  The walk keeps `pending`, the fewest bytes that what the header
 * has announced but not yet begun (entries, tensor infos, array elements)
 * can take, and holds at + pending <= KVC_GGUF_MAX_HEADER_BYTES: a count is
 * refused when its items could not fit under the limit, before any loop
 * runs over it, and a truncation's `needed` is at + (the field) + pending,
 * a length the header cannot be shorter than.
 */
#include <string.h>

#include "gguf-internal.h"
#include "../core/internal.h"
#include "../kernels/weights.h"

#define MAGIC "GGUF"
#define NEWEST_VERSION 3u

/* The bytes of each value type's element; 0 for strings and arrays. */
static const struct {
    const char *name;
    uint8_t size;
} value_types[] = {
    {"uint8", 1}, {"int8", 1}, {"uint16", 2}, {"int16", 2}, {"uint32", 4}, {"int32", 4},
    {"float32", 4}, {"bool", 1}, {"string", 0}, {"array", 0}, {"uint64", 8}, {"int64", 8},
    {"float64", 8},
};
#define VALUE_TYPE_COUNT (sizeof value_types / sizeof value_types[0])

unsigned kvc_gguf_type_size(uint32_t type) {
    return type < VALUE_TYPE_COUNT ? value_types[type].size : 0;
}

const char *kvc_gguf_type_name(uint32_t type) {
    return type < VALUE_TYPE_COUNT ? value_types[type].name : NULL;
}

typedef struct walk {
    const uint8_t *bytes;
    size_t len;
    uint64_t at;      /* the next field's offset */
    uint64_t pending; /* see the top of the file */
    uint32_t version;
    uint32_t count_bytes; /* counts and string lengths: u32 in version 1, u64 after */
    kvc_gguf *g;          /* NULL while measuring */
    size_t values, strings; /* reserved so far */
    uint64_t metadata_count, tensor_count;
    uint32_t alignment;
    uint64_t data_end;
    /* what is being read, for a fault */
    uint64_t item, element;
    gguf_span name;
    gguf_fault *fault;
    size_t *needed;
} walk;

static kvc_status fail(walk *w, kvc_status status, gguf_field field, uint64_t at, uint64_t value,
                       uint64_t bound) {
    if (w->fault) {
        *w->fault = (gguf_fault){field, at, value, bound, w->item, w->element, w->name, 0, {0, 0}, 0};
    }
    return status;
}

/* The n bytes of `field` at w->at are present and fit under the limit. */
static kvc_status need(walk *w, uint64_t n, gguf_field field, uint64_t value) {
    if (n > KVC_GGUF_MAX_HEADER_BYTES - w->at - w->pending) {
        return fail(w, KVC_E_GGUF_TOO_LARGE, field, w->at, value, KVC_GGUF_MAX_HEADER_BYTES);
    }
    if (w->at + n > w->len) {
        const uint64_t needed = w->at + n + w->pending;
        if (w->needed) *w->needed = (size_t)needed;
        return fail(w, KVC_E_GGUF_TRUNCATED, field, w->at, value, needed);
    }
    return KVC_OK;
}

static kvc_status take(walk *w, uint64_t n, gguf_field field, uint64_t value, const uint8_t **p) {
    const kvc_status status = need(w, n, field, value);
    if (status != KVC_OK) return status;
    *p = w->bytes + w->at;
    w->at += n;
    return KVC_OK;
}

static kvc_status read_u32(walk *w, gguf_field field, uint32_t *x) {
    const uint8_t *p;
    const kvc_status status = take(w, 4, field, 0, &p);
    if (status == KVC_OK) *x = gguf_le32(p);
    return status;
}

static kvc_status read_u64(walk *w, gguf_field field, uint64_t *x) {
    const uint8_t *p;
    const kvc_status status = take(w, 8, field, 0, &p);
    if (status == KVC_OK) *x = gguf_le64(p);
    return status;
}

/* A count or a string length: u32 in version 1, u64 from version 2 on. */
static kvc_status read_count(walk *w, gguf_field field, uint64_t *x) {
    if (w->count_bytes == 8) return read_u64(w, field, x);
    uint32_t x32 = 0;
    const kvc_status status = read_u32(w, field, &x32);
    *x = x32;
    return status;
}

/* A string: its length, at most max_len (else `too_long`), then its bytes. */
static kvc_status read_string(walk *w, gguf_field field, uint64_t max_len, kvc_status too_long,
                              gguf_span *span) {
    const uint64_t at = w->at;
    uint64_t len = 0;
    kvc_status status = read_count(w, field, &len);
    if (status != KVC_OK) return status;
    if (len > max_len) return fail(w, too_long, field, at, len, max_len);
    const uint8_t *p;
    status = take(w, len, field, len, &p);
    if (status != KVC_OK) return status;
    *span = (gguf_span){(uint32_t)(p - w->bytes), (uint32_t)len};
    return KVC_OK;
}

/* The fewest bytes an element of `type` takes in an array. */
static uint64_t min_element_bytes(const walk *w, uint32_t type) {
    if (type == KVC_GGUF_STRING) return w->count_bytes;
    if (type == KVC_GGUF_ARRAY) return 4 + w->count_bytes;
    return kvc_gguf_type_size(type);
}

static int value_type_valid(uint32_t type) {
    return type < VALUE_TYPE_COUNT;
}

/* A string value (or element), its span stored at strings[slot]. */
static kvc_status walk_string(walk *w, size_t slot) {
    gguf_span span;
    const kvc_status status =
        read_string(w, GGUF_FIELD_STRING, KVC_GGUF_MAX_HEADER_BYTES, KVC_E_GGUF_TOO_LARGE, &span);
    if (status == KVC_OK && w->g) w->g->strings[slot] = span;
    return status;
}

/* A value of a valid `type` at nesting `depth` (0: an entry's), stored at
 * values[slot]; *value (may be NULL) receives it. */
static kvc_status walk_value(walk *w, uint32_t type, unsigned depth, size_t slot, gguf_value *value) {
    gguf_value v = {(uint8_t)type, (uint8_t)type, 1, 0};
    const uint64_t at = w->at;
    kvc_status status = KVC_OK;
    if (type == KVC_GGUF_STRING) {
        v.first = (uint32_t)w->strings++;
        status = walk_string(w, v.first);
    } else if (type != KVC_GGUF_ARRAY) {
        const uint8_t *p;
        v.first = (uint32_t)at;
        status = take(w, kvc_gguf_type_size(type), GGUF_FIELD_VALUE, 0, &p);
    } else {
        if (depth == KVC_GGUF_MAX_NESTING) {
            return fail(w, KVC_E_GGUF_TOO_LARGE, GGUF_FIELD_NESTING, at, depth + 1, KVC_GGUF_MAX_NESTING);
        }
        uint32_t item_type = 0;
        uint64_t count = 0;
        status = read_u32(w, GGUF_FIELD_ITEM_TYPE, &item_type);
        if (status != KVC_OK) return status;
        if (!value_type_valid(item_type)) return fail(w, KVC_E_GGUF_CORRUPT, GGUF_FIELD_ITEM_TYPE, at, item_type, 0);
        const uint64_t count_at = w->at;
        status = read_count(w, GGUF_FIELD_ARRAY_LENGTH, &count);
        if (status != KVC_OK) return status;
        const uint64_t min_bytes = min_element_bytes(w, item_type);
        if (count > (KVC_GGUF_MAX_HEADER_BYTES - w->at - w->pending) / min_bytes) {
            return fail(w, KVC_E_GGUF_TOO_LARGE, GGUF_FIELD_ARRAY_LENGTH, count_at, count,
                        KVC_GGUF_MAX_HEADER_BYTES);
        }
        v.item_type = (uint8_t)item_type;
        v.count = (uint32_t)count;
        if (item_type == KVC_GGUF_STRING || item_type == KVC_GGUF_ARRAY) {
            /* Each element takes its share of pending back as it begins. */
            const int strings = item_type == KVC_GGUF_STRING;
            size_t *next = strings ? &w->strings : &w->values;
            v.first = (uint32_t)*next;
            *next += (size_t)count;
            w->pending += count * min_bytes;
            const uint64_t element = w->element;
            for (uint64_t k = 0; k < count && status == KVC_OK; k++) {
                w->pending -= min_bytes;
                w->element = k;
                status = strings ? walk_string(w, v.first + (size_t)k)
                                 : walk_value(w, KVC_GGUF_ARRAY, depth + 1, v.first + (size_t)k, NULL);
            }
            if (status == KVC_OK) w->element = element;
        } else {
            const uint8_t *p;
            v.first = (uint32_t)w->at;
            status = take(w, count * min_bytes, GGUF_FIELD_VALUE, count, &p);
        }
    }
    if (status != KVC_OK) return status;
    if (w->g) w->g->values[slot] = v;
    if (value) *value = v;
    return KVC_OK;
}

static int is_alignment_key(const walk *w, gguf_span key) {
    static const char name[] = "general.alignment";
    return key.len == sizeof name - 1 && memcmp(w->bytes + key.at, name, key.len) == 0;
}

/* general.alignment: a u32 power of two, as ggml reads it. */
static kvc_status take_alignment(walk *w, const gguf_value *v, uint64_t at) {
    if (v->type != KVC_GGUF_UINT32) return fail(w, KVC_E_GGUF_CORRUPT, GGUF_FIELD_ALIGNMENT_TYPE, at, v->type, 0);
    const uint32_t alignment = gguf_le32(w->bytes + v->first);
    if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
        return fail(w, KVC_E_GGUF_CORRUPT, GGUF_FIELD_ALIGNMENT, v->first, alignment, 0);
    }
    w->alignment = alignment;
    return KVC_OK;
}

/* The fewest bytes of a metadata entry (key length, type, a one-byte
 * value) and of a tensor info (name length, dim count, one dim, type,
 * offset). */
static uint64_t min_entry_bytes(const walk *w) {
    return w->count_bytes + 4 + 1;
}

static uint64_t min_tensor_bytes(const walk *w) {
    return 2 * (uint64_t)w->count_bytes + 16;
}

static kvc_status walk_entry(walk *w, size_t i) {
    gguf_span key;
    kvc_status status = read_string(w, GGUF_FIELD_KEY, KVC_GGUF_MAX_KEY_BYTES, KVC_E_GGUF_CORRUPT, &key);
    if (status != KVC_OK) return status;
    w->name = key;
    if (w->g) w->g->keys[i] = key;
    const uint64_t type_at = w->at;
    uint32_t type = 0;
    status = read_u32(w, GGUF_FIELD_VALUE_TYPE, &type);
    if (status != KVC_OK) return status;
    if (!value_type_valid(type)) return fail(w, KVC_E_GGUF_CORRUPT, GGUF_FIELD_VALUE_TYPE, type_at, type, 0);
    gguf_value v;
    status = walk_value(w, type, 0, i, &v);
    if (status == KVC_OK && is_alignment_key(w, key)) status = take_alignment(w, &v, type_at);
    return status;
}

static kvc_status walk_tensor(walk *w, size_t t) {
    gguf_tensor info = {{0, 0}, 0, 0, {0, 0, 0, 0}, 0, 0};
    kvc_status status = read_string(w, GGUF_FIELD_NAME, KVC_GGUF_MAX_NAME_BYTES, KVC_E_GGUF_CORRUPT, &info.name);
    if (status != KVC_OK) return status;
    w->name = info.name;
    uint64_t at = w->at;
    if ((status = read_u32(w, GGUF_FIELD_DIM_COUNT, &info.n_dims)) != KVC_OK) return status;
    if (info.n_dims < 1 || info.n_dims > KVC_GGUF_MAX_DIMS) {
        return fail(w, KVC_E_GGUF_CORRUPT, GGUF_FIELD_DIM_COUNT, at, info.n_dims, KVC_GGUF_MAX_DIMS);
    }
    uint64_t elements = 1;
    for (uint32_t d = 0; d < info.n_dims; d++) {
        at = w->at;
        w->element = d;
        uint64_t dim = 0;
        if ((status = read_count(w, GGUF_FIELD_DIM, &dim)) != KVC_OK) return status;
        if (dim == 0) return fail(w, KVC_E_GGUF_CORRUPT, GGUF_FIELD_DIM, at, 0, 1);
        if (dim > KVC_GGUF_MAX_ELEMENTS / elements) {
            return fail(w, KVC_E_GGUF_TOO_LARGE, GGUF_FIELD_ELEMENTS, at, dim, KVC_GGUF_MAX_ELEMENTS);
        }
        elements *= dim;
        info.dims[d] = dim;
    }
    w->element = GGUF_NO_ELEMENT;
    if ((status = read_u32(w, GGUF_FIELD_TENSOR_TYPE, &info.type)) != KVC_OK) return status;
    at = w->at;
    if ((status = read_u64(w, GGUF_FIELD_OFFSET, &info.offset)) != KVC_OK) return status;
    if (info.offset > KVC_GGUF_MAX_DATA_BYTES) {
        return fail(w, KVC_E_GGUF_TOO_LARGE, GGUF_FIELD_OFFSET, at, info.offset, KVC_GGUF_MAX_DATA_BYTES);
    }
    if (info.offset % w->alignment != 0) {
        return fail(w, KVC_E_GGUF_CORRUPT, GGUF_FIELD_OFFSET, at, info.offset, w->alignment);
    }
    /* A type the weight table has is checked to its last byte; another one
     * only so far (see kvcache.h): its size is not known here. */
    const kvc_weight_type *type = kvc_weight_type_of(info.type);
    if (type) {
        if (info.dims[0] % type->block_values != 0) {
            kvc_status refused = fail(w, KVC_E_GGUF_CORRUPT, GGUF_FIELD_ROW, at, info.dims[0], type->block_values);
            if (w->fault) w->fault->type = info.type;
            return refused;
        }
        /* elements <= 2^48 and block_bytes / block_values <= 4: no overflow */
        info.bytes = elements / type->block_values * type->block_bytes;
        if (info.bytes > KVC_GGUF_MAX_DATA_BYTES - info.offset) {
            return fail(w, KVC_E_GGUF_TOO_LARGE, GGUF_FIELD_EXTENT, at, info.offset + info.bytes,
                        KVC_GGUF_MAX_DATA_BYTES);
        }
    }
    if (info.offset + info.bytes > w->data_end) w->data_end = info.offset + info.bytes;
    if (w->g) w->g->tensors[t] = info;
    return KVC_OK;
}

static uint64_t align_up(uint64_t x, uint32_t alignment) {
    return (x + alignment - 1) / alignment * alignment;
}

/* The whole header: magic, version, counts, entries, tensor infos.  Into
 * w->g when it is set (its arrays sized by a measuring walk). */
static kvc_status walk_header(walk *w) {
    const uint8_t *p;
    /* Bytes that differ from the magic refuse a file shorter than it too. */
    const size_t magic_present = w->len < 4 ? w->len : 4;
    if (memcmp(w->bytes, MAGIC, magic_present) != 0) return fail(w, KVC_E_GGUF_MAGIC, GGUF_FIELD_MAGIC, 0, 0, 0);
    kvc_status status = take(w, 4, GGUF_FIELD_MAGIC, 0, &p);
    if (status != KVC_OK) return status;
    if ((status = read_u32(w, GGUF_FIELD_VERSION, &w->version)) != KVC_OK) return status;
    if (w->version < 1 || w->version > NEWEST_VERSION) {
        return fail(w, KVC_E_GGUF_VERSION, GGUF_FIELD_VERSION, 4, w->version, NEWEST_VERSION);
    }
    w->count_bytes = w->version == 1 ? 4 : 8;
    uint64_t tensor_count = 0, metadata_count = 0;
    uint64_t at = w->at;
    if ((status = read_count(w, GGUF_FIELD_TENSOR_COUNT, &tensor_count)) != KVC_OK) return status;
    if (tensor_count > KVC_GGUF_MAX_TENSORS) {
        return fail(w, KVC_E_GGUF_TOO_LARGE, GGUF_FIELD_TENSOR_COUNT, at, tensor_count, KVC_GGUF_MAX_TENSORS);
    }
    at = w->at;
    if ((status = read_count(w, GGUF_FIELD_METADATA_COUNT, &metadata_count)) != KVC_OK) return status;
    if (metadata_count > KVC_GGUF_MAX_METADATA) {
        return fail(w, KVC_E_GGUF_TOO_LARGE, GGUF_FIELD_METADATA_COUNT, at, metadata_count, KVC_GGUF_MAX_METADATA);
    }
    /* At most 2^20 * 32 + 2^16 * 13 bytes: well under the header limit. */
    w->pending = tensor_count * min_tensor_bytes(w) + metadata_count * min_entry_bytes(w);
    w->metadata_count = metadata_count;
    w->tensor_count = tensor_count;
    w->values = (size_t)metadata_count; /* the entries' values come first */
    for (uint64_t i = 0; i < metadata_count; i++) {
        w->pending -= min_entry_bytes(w);
        w->item = i;
        w->name = (gguf_span){0, 0};
        if ((status = walk_entry(w, (size_t)i)) != KVC_OK) return status;
    }
    for (uint64_t t = 0; t < tensor_count; t++) {
        w->pending -= min_tensor_bytes(w);
        w->item = t;
        w->name = (gguf_span){0, 0};
        if ((status = walk_tensor(w, (size_t)t)) != KVC_OK) return status;
    }
    if (w->g) {
        kvc_gguf *g = w->g;
        g->version = w->version;
        g->alignment = w->alignment;
        g->header_bytes = (size_t)w->at;
        g->data_offset = align_up(w->at, w->alignment);
        g->data_bytes = align_up(w->data_end, w->alignment);
        g->metadata_count = (size_t)metadata_count;
        g->tensor_count = (size_t)tensor_count;
    }
    return KVC_OK;
}

static void walk_init(walk *w, const uint8_t *bytes, size_t len, size_t *needed, gguf_fault *fault) {
    *w = (walk){bytes, len, 0, 0, 0, 4, NULL, 0, 0, 0, 0, KVC_GGUF_DEFAULT_ALIGNMENT, 0,
                0, GGUF_NO_ELEMENT, {0, 0}, fault, needed};
}

/* ---- the block ---- */

static size_t align8(size_t x) {
    return (x + 7) & ~(size_t)7;
}

/* One block holding the struct, its arrays and the header's copy, laid out
 * for the counts of a measuring walk; NULL when it cannot be had.  Each
 * count is bounded by the header's bytes (at most 2^28), so the sum fits
 * a 32-bit size_t with room to spare. */
static kvc_gguf *block_for(const walk *m) {
    const uint64_t metadata_count = m->metadata_count, tensor_count = m->tensor_count;
    const uint64_t parts[] = {
        sizeof(kvc_gguf),
        tensor_count * sizeof(gguf_tensor),
        (uint64_t)m->values * sizeof(gguf_value),
        (uint64_t)m->strings * sizeof(gguf_span),
        metadata_count * sizeof(gguf_span),
        metadata_count * sizeof(uint32_t),
        tensor_count * sizeof(uint32_t),
        m->at,
    };
    uint64_t total = 0;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) total += align8((size_t)parts[i]);
    if (total != (size_t)total) return NULL;
    uint8_t *block = kvc_malloc((size_t)total);
    if (!block) return NULL;
    kvc_gguf *g = (kvc_gguf *)block;
    memset(g, 0, sizeof *g);
    size_t at = align8(sizeof(kvc_gguf));
#define CARVE(field, i) (g->field = (void *)(block + at), at += align8((size_t)parts[i]))
    CARVE(tensors, 1);
    CARVE(values, 2);
    CARVE(strings, 3);
    CARVE(keys, 4);
    CARVE(key_order, 5);
    CARVE(tensor_order, 6);
#undef CARVE
    g->copy = block + at;
    g->value_count = m->values;
    g->string_count = m->strings;
    return g;
}

/* ---- the checks that need the whole header ---- */

static int compare_spans(const uint8_t *copy, gguf_span a, gguf_span b) {
    const int c = memcmp(copy + a.at, copy + b.at, a.len < b.len ? a.len : b.len);
    return c != 0 ? c : (a.len > b.len) - (a.len < b.len);
}

/* Orders of the index arrays: by key, by tensor name, by tensor offset;
 * ties by index, so that a pair of equals lies earlier one first. */
typedef int before_fn(const kvc_gguf *g, uint32_t a, uint32_t b);

static int key_before(const kvc_gguf *g, uint32_t a, uint32_t b) {
    const int c = compare_spans(g->copy, g->keys[a], g->keys[b]);
    return c != 0 ? c < 0 : a < b;
}

static int name_before(const kvc_gguf *g, uint32_t a, uint32_t b) {
    const int c = compare_spans(g->copy, g->tensors[a].name, g->tensors[b].name);
    return c != 0 ? c < 0 : a < b;
}

static int offset_before(const kvc_gguf *g, uint32_t a, uint32_t b) {
    const uint64_t x = g->tensors[a].offset, y = g->tensors[b].offset;
    return x != y ? x < y : a < b;
}

/* Heapsort: in place, no allocation, O(n log n) whatever the input. */
static void sift_down(uint32_t *idx, size_t root, size_t n, before_fn *before, const kvc_gguf *g) {
    for (;;) {
        size_t child = 2 * root + 1;
        if (child >= n) return;
        if (child + 1 < n && before(g, idx[child], idx[child + 1])) child++;
        if (!before(g, idx[root], idx[child])) return;
        const uint32_t swap = idx[root];
        idx[root] = idx[child];
        idx[child] = swap;
        root = child;
    }
}

static void sort_indices(uint32_t *idx, size_t n, before_fn *before, const kvc_gguf *g) {
    for (size_t i = 0; i < n; i++) idx[i] = (uint32_t)i;
    for (size_t i = n / 2; i-- > 0;) sift_down(idx, i, n, before, g);
    for (size_t end = n; end-- > 1;) {
        const uint32_t swap = idx[0];
        idx[0] = idx[end];
        idx[end] = swap;
        sift_down(idx, 0, end, before, g);
    }
}

static kvc_status refuse_pair(gguf_fault *fault, gguf_field field, uint64_t item, gguf_span name,
                              uint64_t other, gguf_span other_name, uint64_t at) {
    if (fault) {
        *fault = (gguf_fault){field, at, 0, 0, item, GGUF_NO_ELEMENT, name, other, other_name, 0};
    }
    return KVC_E_GGUF_CORRUPT;
}

/* Sorts key_order and tensor_order (by name, as the finds want them) and
 * refuses duplicates and overlapping tensors. */
static kvc_status check_whole(kvc_gguf *g, gguf_fault *fault) {
    sort_indices(g->key_order, g->metadata_count, key_before, g);
    for (size_t k = 1; k < g->metadata_count; k++) {
        const uint32_t a = g->key_order[k - 1], b = g->key_order[k];
        if (compare_spans(g->copy, g->keys[a], g->keys[b]) == 0) {
            return refuse_pair(fault, GGUF_FIELD_DUPLICATE_KEY, b, g->keys[b], a, g->keys[a], g->keys[b].at);
        }
    }
    sort_indices(g->tensor_order, g->tensor_count, name_before, g);
    for (size_t k = 1; k < g->tensor_count; k++) {
        const uint32_t a = g->tensor_order[k - 1], b = g->tensor_order[k];
        if (compare_spans(g->copy, g->tensors[a].name, g->tensors[b].name) == 0) {
            return refuse_pair(fault, GGUF_FIELD_DUPLICATE_NAME, b, g->tensors[b].name, a, g->tensors[a].name,
                               g->tensors[b].name.at);
        }
    }
    /* Overlaps among the tensors of known size, in offset order: each must
     * start at or after the furthest end before it. */
    sort_indices(g->tensor_order, g->tensor_count, offset_before, g);
    int seen = 0;
    uint32_t furthest = 0;
    for (size_t k = 0; k < g->tensor_count; k++) {
        const uint32_t t = g->tensor_order[k];
        const gguf_tensor *x = &g->tensors[t];
        if (x->bytes == 0) continue;
        const gguf_tensor *f = &g->tensors[furthest];
        if (seen && x->offset < f->offset + f->bytes) {
            const kvc_status refused = refuse_pair(fault, GGUF_FIELD_OVERLAP, t, x->name, furthest, f->name, x->name.at);
            if (fault) fault->value = x->offset, fault->bound = f->offset + f->bytes;
            return refused;
        }
        if (!seen || x->offset + x->bytes > f->offset + f->bytes) furthest = t;
        seen = 1;
    }
    sort_indices(g->tensor_order, g->tensor_count, name_before, g);
    return KVC_OK;
}

kvc_status kvc_gguf_read(const uint8_t *bytes, size_t len, kvc_gguf **out, size_t *needed,
                         gguf_fault *fault) {
    if (out) *out = NULL;
    if (needed) *needed = 0;
    if (!out || (!bytes && len > 0)) return KVC_E_NULL_POINTER;
    static const uint8_t nothing[1] = {0};
    if (!bytes) bytes = nothing; /* len 0: no byte is read */
    walk m;
    walk_init(&m, bytes, len, needed, fault);
    kvc_status status = walk_header(&m);
    if (status != KVC_OK) return status;
    /* The header is all there and every field checked: now the block. */
    kvc_gguf *g = block_for(&m);
    if (!g) return KVC_E_NOMEM;
    memcpy(g->copy, bytes, (size_t)m.at);
    walk w;
    walk_init(&w, g->copy, (size_t)m.at, needed, fault);
    w.g = g;
    status = walk_header(&w);
    if (status == KVC_OK) status = check_whole(g, fault);
    if (status != KVC_OK) {
        kvc_free(g);
        return status;
    }
    *out = g;
    return KVC_OK;
}

kvc_status kvc_gguf_parse(const uint8_t *bytes, size_t len, kvc_gguf **out, size_t *needed) {
    return kvc_gguf_read(bytes, len, out, needed, NULL);
}

void kvc_gguf_free(kvc_gguf *gguf) {
    kvc_free(gguf);
}
