/*
 * gguf-explain.c -- a refused GGUF header in one sentence: what is wrong,
 * with the key or tensor name it belongs to and the value or bound at
 * fault, e.g. "corrupt: tensor blk.0.attn_q.weight has 9 dimensions (1 to
 * 4 allowed)".  No printf: a few appenders of text and decimal numbers.
 */
#include "gguf-internal.h"
#include "../kernels/weights.h"

typedef struct text {
    char *buf;
    size_t size, len; /* len counts what would be written: bytes past size are dropped */
} text;

static void put_char(text *t, char c) {
    if (t->len + 1 < t->size) t->buf[t->len] = c;
    t->len++;
}

static void put(text *t, const char *s) {
    for (; *s; s++) put_char(t, *s);
}

static void put_u64(text *t, uint64_t x) {
    char digits[20];
    int n = 0;
    do digits[n++] = (char)('0' + x % 10), x /= 10;
    while (x);
    while (n) put_char(t, digits[--n]);
}

/* A key or name from the file: control bytes shown as '?', and cut after
 * 80 bytes (a key may be 65535). */
#define SHOWN_NAME_BYTES 80

static void put_span(text *t, const uint8_t *bytes, gguf_span span) {
    const uint32_t shown = span.len < SHOWN_NAME_BYTES ? span.len : SHOWN_NAME_BYTES;
    for (uint32_t i = 0; i < shown; i++) {
        const uint8_t c = bytes[span.at + i];
        put_char(t, c < 0x20 || c == 0x7f ? '?' : (char)c);
    }
    if (shown < span.len) put(t, "...");
}

static int is_tensor_field(gguf_field field) {
    return field >= GGUF_FIELD_NAME && field != GGUF_FIELD_DUPLICATE_KEY;
}

/* The entry or tensor a field belongs to: its key or name once read, else
 * its index. */
static void put_owner(text *t, const uint8_t *bytes, const gguf_fault *f) {
    const int tensor = is_tensor_field(f->field);
    if (tensor) put(t, "tensor ");
    if (f->name.len) {
        put_span(t, bytes, f->name);
        return;
    }
    if (!tensor) put(t, "metadata entry ");
    put_u64(t, f->item);
}

static void put_element(text *t, const gguf_fault *f) {
    if (f->element == GGUF_NO_ELEMENT) return;
    put(t, " (element ");
    put_u64(t, f->element);
    put(t, ")");
}

/* What the field is, as the subject of a sentence. */
static void put_field(text *t, const uint8_t *bytes, const gguf_fault *f) {
    static const char *const headers[] = {"the magic", "the version", "the tensor count", "the metadata count"};
    switch (f->field) {
    case GGUF_FIELD_MAGIC:
    case GGUF_FIELD_VERSION:
    case GGUF_FIELD_TENSOR_COUNT:
    case GGUF_FIELD_METADATA_COUNT: put(t, headers[f->field]); return;
    case GGUF_FIELD_KEY: put(t, "the key of metadata entry "), put_u64(t, f->item); return;
    case GGUF_FIELD_NAME: put(t, "the name of tensor "), put_u64(t, f->item); return;
    case GGUF_FIELD_VALUE_TYPE: put(t, "the value type of "); break;
    case GGUF_FIELD_VALUE: put(t, "the value of "); break;
    case GGUF_FIELD_ITEM_TYPE: put(t, "the item type of "); break;
    case GGUF_FIELD_ARRAY_LENGTH: put(t, "the length of "); break;
    case GGUF_FIELD_STRING: put(t, "a string of "); break;
    case GGUF_FIELD_DIM_COUNT: put(t, "the dimension count of "); break;
    case GGUF_FIELD_DIM: put(t, "dimension "), put_u64(t, f->element), put(t, " of "); break;
    case GGUF_FIELD_ELEMENTS: put(t, "the element count of "); break;
    case GGUF_FIELD_TENSOR_TYPE: put(t, "the type of "); break;
    case GGUF_FIELD_OFFSET: put(t, "the data offset of "); break;
    default: break;
    }
    put_owner(t, bytes, f);
    if (f->field != GGUF_FIELD_DIM) put_element(t, f);
}

static void put_truncated(text *t, const uint8_t *bytes, size_t len, const gguf_fault *f) {
    put(t, "truncated: ");
    put_field(t, bytes, f);
    put(t, " at offset ");
    put_u64(t, f->at);
    put(t, " runs past the ");
    put_u64(t, len);
    put(t, " bytes given (the header takes at least ");
    put_u64(t, f->bound);
    put(t, ")");
}

static void put_version(text *t, const gguf_fault *f) {
    const uint32_t v = (uint32_t)f->value;
    const uint32_t swapped = v >> 24 | (v >> 8 & 0xff00) | (v << 8 & 0xff0000) | v << 24;
    if (swapped >= 1 && swapped <= f->bound) {
        put(t, "big-endian GGUF files are not supported (version ");
        put_u64(t, swapped);
        put(t, " byte-swapped)");
        return;
    }
    put(t, "unsupported GGUF version ");
    put_u64(t, v);
    put(t, " (this reader knows 1 to ");
    put_u64(t, f->bound);
    put(t, ")");
}

static void put_too_large(text *t, const uint8_t *bytes, const gguf_fault *f) {
    put(t, "too large: ");
    switch (f->field) {
    case GGUF_FIELD_TENSOR_COUNT:
    case GGUF_FIELD_METADATA_COUNT:
        put_field(t, bytes, f), put(t, " is "), put_u64(t, f->value);
        put(t, ", more than the "), put_u64(t, f->bound), put(t, " this reader allows");
        return;
    case GGUF_FIELD_NESTING:
        put_owner(t, bytes, f), put(t, " nests arrays deeper than "), put_u64(t, f->bound), put(t, " levels");
        return;
    case GGUF_FIELD_ELEMENTS:
        put(t, "the dims of "), put_owner(t, bytes, f), put(t, " make more than "), put_u64(t, f->bound);
        put(t, " elements");
        return;
    case GGUF_FIELD_OFFSET: /* where a tensor starts, or (extent) where it ends */
    case GGUF_FIELD_EXTENT:
        if (f->field == GGUF_FIELD_OFFSET) put_field(t, bytes, f), put(t, " is ");
        else put_owner(t, bytes, f), put(t, " ends at data byte ");
        put_u64(t, f->value), put(t, ", past the data limit of "), put_u64(t, f->bound), put(t, " bytes");
        return;
    default: /* a length or count past the header limit */
        put_field(t, bytes, f);
        if (f->value) put(t, " ("), put_u64(t, f->value), put(t, ")");
        put(t, " at offset "), put_u64(t, f->at);
        put(t, " would take the header past "), put_u64(t, f->bound), put(t, " bytes, this reader's limit");
        return;
    }
}

static void put_type_name(text *t, uint32_t type) {
    const char *name = kvc_ggml_type_name(type);
    if (name) put(t, name);
    else put(t, "type "), put_u64(t, type);
}

static void put_corrupt(text *t, const uint8_t *bytes, const gguf_fault *f) {
    put(t, "corrupt: ");
    switch (f->field) {
    case GGUF_FIELD_KEY:
    case GGUF_FIELD_NAME:
        put_field(t, bytes, f), put(t, " is "), put_u64(t, f->value), put(t, " bytes long, more than the ");
        put_u64(t, f->bound), put(t, f->field == GGUF_FIELD_KEY ? " GGUF allows" : " ggml allows");
        return;
    case GGUF_FIELD_VALUE_TYPE:
        put_owner(t, bytes, f), put(t, " has unknown value type "), put_u64(t, f->value);
        return;
    case GGUF_FIELD_ITEM_TYPE:
        put_owner(t, bytes, f), put_element(t, f), put(t, " is an array of unknown value type ");
        put_u64(t, f->value);
        return;
    case GGUF_FIELD_ALIGNMENT_TYPE: {
        const char *name = kvc_gguf_type_name((uint32_t)f->value);
        put(t, "general.alignment is "), put(t, name ? name : "?"), put(t, ", not uint32");
        return;
    }
    case GGUF_FIELD_ALIGNMENT:
        put(t, "general.alignment is "), put_u64(t, f->value), put(t, ", not a power of two");
        return;
    case GGUF_FIELD_DIM_COUNT:
        put_owner(t, bytes, f), put(t, " has "), put_u64(t, f->value), put(t, " dimensions (1 to ");
        put_u64(t, f->bound), put(t, " allowed)");
        return;
    case GGUF_FIELD_DIM:
        put_field(t, bytes, f), put(t, " is 0");
        return;
    case GGUF_FIELD_ROW:
        put_owner(t, bytes, f), put(t, " ("), put_type_name(t, f->type), put(t, ") has rows of ");
        put_u64(t, f->value), put(t, " values, not a whole number of its blocks of "), put_u64(t, f->bound);
        return;
    case GGUF_FIELD_OFFSET:
        put_owner(t, bytes, f), put(t, " starts at data offset "), put_u64(t, f->value);
        put(t, ", off its "), put_u64(t, f->bound), put(t, "-byte alignment");
        return;
    case GGUF_FIELD_DUPLICATE_KEY:
    case GGUF_FIELD_DUPLICATE_NAME:
        put(t, f->field == GGUF_FIELD_DUPLICATE_KEY ? "metadata key " : "");
        put_owner(t, bytes, f), put(t, " appears twice ("), put(t, f->field == GGUF_FIELD_DUPLICATE_KEY ? "entries " : "tensors ");
        put_u64(t, f->other), put(t, " and "), put_u64(t, f->item), put(t, ")");
        return;
    case GGUF_FIELD_OVERLAP:
        put_owner(t, bytes, f), put(t, " starts at data byte "), put_u64(t, f->value), put(t, ", inside tensor ");
        put_span(t, bytes, f->other_name), put(t, ", which ends at "), put_u64(t, f->bound);
        return;
    default:
        put_field(t, bytes, f), put(t, " is not valid");
        return;
    }
}

kvc_status kvc_gguf_explain(const uint8_t *bytes, size_t len, char *buf, size_t size) {
    if (!buf && size > 0) return KVC_E_NULL_POINTER;
    text t = {buf, size, 0};
    gguf_fault f;
    kvc_gguf *g = NULL;
    const kvc_status status = kvc_gguf_read(bytes, len, &g, NULL, &f);
    kvc_gguf_free(g);
    switch (status) {
    case KVC_OK: put(&t, "ok"); break;
    case KVC_E_GGUF_MAGIC: put(&t, "not a GGUF file: its first bytes are not \"GGUF\""); break;
    case KVC_E_GGUF_VERSION: put_version(&t, &f); break;
    case KVC_E_GGUF_TRUNCATED: put_truncated(&t, bytes, len, &f); break;
    case KVC_E_GGUF_TOO_LARGE: put_too_large(&t, bytes, &f); break;
    case KVC_E_GGUF_CORRUPT: put_corrupt(&t, bytes, &f); break;
    default: put(&t, kvc_status_name(status)); break;
    }
    if (size) buf[t.len < size ? t.len : size - 1] = '\0';
    return status;
}
