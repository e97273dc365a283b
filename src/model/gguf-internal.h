/*
 * gguf-internal.h -- the layout of a parsed GGUF header, shared by the files
 * of the reader (gguf.c parses, gguf-read.c answers the accessors,
 * gguf-explain.c words a refusal).
 *
 * A kvc_gguf is one block: this struct, then its arrays, then a copy of the
 * file's header bytes, which every span points into.  Offsets in the copy
 * are the file's offsets (the copy starts at the magic), and fit 32 bits:
 * the header is at most KVC_GGUF_MAX_HEADER_BYTES.
 */
#ifndef KVC_GGUF_INTERNAL_H
#define KVC_GGUF_INTERNAL_H

#include <stdint.h>

#include "kvcache.h"

/* Bytes [at, at + len) of the header: a key, a tensor name, a string. */
typedef struct gguf_span {
    uint32_t at, len;
} gguf_span;

/* A metadata value: a scalar (count 1, item_type == type) or an array. */
typedef struct gguf_value {
    uint8_t type, item_type; /* kvc_gguf_type */
    uint32_t count;          /* elements */
    /* numbers and bools: the first element's offset in the copy; strings:
     * the first one's index in strings[]; arrays of arrays: the value index
     * of the first item (the items are consecutive values). */
    uint32_t first;
} gguf_value;

typedef struct gguf_tensor {
    gguf_span name;
    uint32_t type; /* ggml type id */
    uint32_t n_dims;
    uint64_t dims[KVC_GGUF_MAX_DIMS];
    uint64_t offset; /* from the data start */
    uint64_t bytes;  /* 0: a type the weight table does not have */
} gguf_tensor;

struct kvc_gguf {
    uint32_t version, alignment;
    size_t header_bytes;
    uint64_t data_offset, data_bytes;
    size_t metadata_count, value_count, string_count, tensor_count;
    gguf_span *keys;        /* [metadata_count], in the file's order */
    uint32_t *key_order;    /* [metadata_count]: the entries sorted by key */
    gguf_value *values;     /* [value_count]: the entries' first, then items of arrays of arrays */
    gguf_span *strings;     /* [string_count] */
    gguf_tensor *tensors;   /* [tensor_count], in the file's order */
    uint32_t *tensor_order; /* [tensor_count]: the tensors sorted by name */
    uint8_t *copy;          /* [header_bytes] */
};

/* The bytes of one element of a GGUF value type; 0 for strings, arrays and
 * ids that are no type. */
unsigned kvc_gguf_type_size(uint32_t type);
/* The type's name in the GGUF spec ("uint32"), or NULL. */
const char *kvc_gguf_type_name(uint32_t type);

static inline uint32_t gguf_le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t gguf_le64(const uint8_t *p) {
    return (uint64_t)gguf_le32(p) | (uint64_t)gguf_le32(p + 4) << 32;
}

/* ---- why a header was refused (kvc_gguf_explain words it) ---- */

/* The field at fault. */
typedef enum gguf_field {
    GGUF_FIELD_MAGIC,
    GGUF_FIELD_VERSION,
    GGUF_FIELD_TENSOR_COUNT,
    GGUF_FIELD_METADATA_COUNT,
    GGUF_FIELD_KEY,          /* a key's length or bytes */
    GGUF_FIELD_VALUE_TYPE,
    GGUF_FIELD_VALUE,        /* a number's bytes */
    GGUF_FIELD_ITEM_TYPE,    /* an array's element type */
    GGUF_FIELD_ARRAY_LENGTH,
    GGUF_FIELD_STRING,       /* a string value's length or bytes */
    GGUF_FIELD_NESTING,      /* arrays nested past KVC_GGUF_MAX_NESTING */
    GGUF_FIELD_ALIGNMENT_TYPE, /* general.alignment not a u32 */
    GGUF_FIELD_ALIGNMENT,    /* general.alignment not a power of two */
    GGUF_FIELD_NAME,         /* a tensor name's length or bytes */
    GGUF_FIELD_DIM_COUNT,
    GGUF_FIELD_DIM,
    GGUF_FIELD_ELEMENTS,     /* the product of the dims */
    GGUF_FIELD_TENSOR_TYPE,
    GGUF_FIELD_ROW,          /* dims[0] not a whole number of the type's blocks */
    GGUF_FIELD_OFFSET,       /* misaligned or beyond the data limit */
    GGUF_FIELD_EXTENT,       /* offset + bytes beyond the data limit */
    GGUF_FIELD_DUPLICATE_KEY,
    GGUF_FIELD_DUPLICATE_NAME,
    GGUF_FIELD_OVERLAP
} gguf_field;

#define GGUF_NO_ELEMENT UINT64_MAX

typedef struct gguf_fault {
    gguf_field field;
    uint64_t at;      /* the field's byte offset in the file */
    uint64_t value;   /* what it holds, where read (a count, length, type, version, dim, offset) */
    uint64_t bound;   /* the bound it breaks; for a truncation, the bytes needed */
    uint64_t item;    /* the metadata entry or tensor it belongs to */
    uint64_t element; /* the array element or dim (GGUF_NO_ELEMENT: none) */
    gguf_span name;   /* the entry's key or the tensor's name (len 0: not read yet) */
    uint64_t other;   /* duplicates and overlaps: the other entry or tensor */
    gguf_span other_name;
    uint32_t type;    /* the tensor's ggml type (GGUF_FIELD_ROW) */
} gguf_fault;

/* kvc_gguf_parse, with what is wrong written to *fault (may be NULL) on a
 * refusal. */
kvc_status kvc_gguf_read(const uint8_t *bytes, size_t len, kvc_gguf **out, size_t *needed,
                         gguf_fault *fault);

#endif /* KVC_GGUF_INTERNAL_H */
