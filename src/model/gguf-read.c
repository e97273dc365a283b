/* gguf-read.c -- the accessors of a parsed GGUF header (kvcache.h). */
#include <string.h>

#include "gguf-internal.h"
#include "../kernels/weights.h"

/* The header's facts, each a field of the same name; 0 for a NULL handle. */
#define KVC_GGUF_FACT(type, field) \
    type kvc_gguf_##field(const kvc_gguf *gguf) { return gguf ? gguf->field : 0; }
KVC_GGUF_FACT(uint32_t, version)
KVC_GGUF_FACT(size_t, header_bytes)
KVC_GGUF_FACT(uint32_t, alignment)
KVC_GGUF_FACT(uint64_t, data_offset)
KVC_GGUF_FACT(uint64_t, data_bytes)
KVC_GGUF_FACT(size_t, metadata_count)
KVC_GGUF_FACT(size_t, tensor_count)
#undef KVC_GGUF_FACT

static void span_out(const kvc_gguf *g, gguf_span span, const char **text, size_t *len) {
    if (text) *text = (const char *)(g->copy + span.at);
    if (len) *len = span.len;
}

kvc_status kvc_gguf_key(const kvc_gguf *gguf, size_t i, const char **key, size_t *len) {
    if (!gguf) return KVC_E_NULL_POINTER;
    if (i >= gguf->metadata_count) return KVC_E_GGUF_INDEX;
    span_out(gguf, gguf->keys[i], key, len);
    return KVC_OK;
}

static gguf_span key_span(const kvc_gguf *g, uint32_t i) {
    return g->keys[i];
}

static gguf_span name_span(const kvc_gguf *g, uint32_t t) {
    return g->tensors[t].name;
}

/* The index among order[0 .. n) (sorted by span) whose span holds the len
 * bytes of text, by binary search; KVC_GGUF_NONE when none does. */
static size_t find_sorted(const kvc_gguf *g, const uint32_t *order, size_t n,
                          gguf_span (*span_of)(const kvc_gguf *, uint32_t), const char *text, size_t len) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        const gguf_span s = span_of(g, order[mid]);
        int c = len ? memcmp(g->copy + s.at, text, s.len < len ? s.len : len) : 0;
        if (c == 0) c = (s.len > len) - (s.len < len);
        if (c == 0) return order[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return KVC_GGUF_NONE;
}

size_t kvc_gguf_find(const kvc_gguf *gguf, const char *key, size_t len) {
    if (!gguf || (!key && len > 0)) return KVC_GGUF_NONE;
    return find_sorted(gguf, gguf->key_order, gguf->metadata_count, key_span, key, len);
}

size_t kvc_gguf_find_tensor(const kvc_gguf *gguf, const char *name, size_t len) {
    if (!gguf || (!name && len > 0)) return KVC_GGUF_NONE;
    return find_sorted(gguf, gguf->tensor_order, gguf->tensor_count, name_span, name, len);
}

/* Value v, or NULL. */
static const gguf_value *value_at(const kvc_gguf *g, size_t v) {
    return v < g->value_count ? &g->values[v] : NULL;
}

kvc_status kvc_gguf_value(const kvc_gguf *gguf, size_t v, kvc_gguf_type *type,
                          kvc_gguf_type *item_type, size_t *count) {
    if (!gguf) return KVC_E_NULL_POINTER;
    const gguf_value *x = value_at(gguf, v);
    if (!x) return KVC_E_GGUF_INDEX;
    if (type) *type = (kvc_gguf_type)x->type;
    if (item_type) *item_type = (kvc_gguf_type)x->item_type;
    if (count) *count = x->count;
    return KVC_OK;
}

/* Element j of value v when its elements are of a kind `accepts` takes:
 * *x the value; KVC_OK, KVC_E_GGUF_INDEX or KVC_E_GGUF_TYPE. */
static kvc_status element_of(const kvc_gguf *g, size_t v, size_t j, int (*accepts)(uint32_t type),
                             const gguf_value **x) {
    *x = value_at(g, v);
    if (!*x || j >= (*x)->count) return KVC_E_GGUF_INDEX;
    return accepts((*x)->item_type) ? KVC_OK : KVC_E_GGUF_TYPE;
}

static int is_number(uint32_t type) {
    return kvc_gguf_type_size(type) != 0; /* every type but strings and arrays */
}

static int is_integer(uint32_t type) {
    return is_number(type) && type != KVC_GGUF_FLOAT32 && type != KVC_GGUF_FLOAT64;
}

/* A number element widened: an integer as its sign and magnitude, a float
 * as a double. */
typedef struct number {
    int is_float, negative;
    uint64_t magnitude;
    double real;
} number;

static number element_number(const kvc_gguf *g, const gguf_value *x, size_t j) {
    const uint32_t type = x->item_type;
    const uint8_t *p = g->copy + x->first + j * kvc_gguf_type_size(type);
    number n = {0, 0, 0, 0.0};
    uint64_t bits = 0, sign_bit = 0;
    switch (type) {
    case KVC_GGUF_UINT8: bits = p[0]; break;
    case KVC_GGUF_BOOL: bits = p[0] != 0; break;
    case KVC_GGUF_INT8: bits = p[0], sign_bit = 1ull << 7; break;
    case KVC_GGUF_UINT16: bits = (uint64_t)p[0] | (uint64_t)p[1] << 8; break;
    case KVC_GGUF_INT16: bits = (uint64_t)p[0] | (uint64_t)p[1] << 8, sign_bit = 1ull << 15; break;
    case KVC_GGUF_UINT32: bits = gguf_le32(p); break;
    case KVC_GGUF_INT32: bits = gguf_le32(p), sign_bit = 1ull << 31; break;
    case KVC_GGUF_UINT64: bits = gguf_le64(p); break;
    case KVC_GGUF_INT64: bits = gguf_le64(p), sign_bit = 1ull << 63; break;
    case KVC_GGUF_FLOAT32: {
        const uint32_t b = gguf_le32(p);
        float f;
        memcpy(&f, &b, sizeof f);
        n.is_float = 1;
        n.real = f;
        return n;
    }
    default: { /* KVC_GGUF_FLOAT64 */
        const uint64_t b = gguf_le64(p);
        n.is_float = 1;
        memcpy(&n.real, &b, sizeof n.real);
        return n;
    }
    }
    /* two's complement: a set sign bit s stands for -(2s - bits) */
    n.negative = (bits & sign_bit) != 0;
    n.magnitude = n.negative ? (~bits + 1) & ((sign_bit << 1) - 1) : bits;
    n.real = n.negative ? -(double)n.magnitude : (double)n.magnitude;
    return n;
}

/* Element j of value v, a number of a kind `accepts` takes, as *n: KVC_OK,
 * KVC_E_GGUF_INDEX or KVC_E_GGUF_TYPE (*n unset). */
static kvc_status number_at(const kvc_gguf *g, size_t v, size_t j, int (*accepts)(uint32_t type), number *n) {
    const gguf_value *x;
    const kvc_status status = element_of(g, v, j, accepts, &x);
    if (status == KVC_OK) *n = element_number(g, x, j);
    return status;
}

kvc_status kvc_gguf_number(const kvc_gguf *gguf, size_t v, size_t j, double *out) {
    if (!gguf || !out) return KVC_E_NULL_POINTER;
    number n;
    const kvc_status status = number_at(gguf, v, j, is_number, &n);
    if (status == KVC_OK) *out = n.real;
    return status;
}

kvc_status kvc_gguf_int64(const kvc_gguf *gguf, size_t v, size_t j, int64_t *out) {
    if (!gguf || !out) return KVC_E_NULL_POINTER;
    number n;
    const kvc_status status = number_at(gguf, v, j, is_integer, &n);
    if (status != KVC_OK) return status;
    if (n.negative) {
        if (n.magnitude > (uint64_t)INT64_MAX + 1) return KVC_E_GGUF_TYPE;
        *out = n.magnitude == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)n.magnitude;
    } else {
        if (n.magnitude > (uint64_t)INT64_MAX) return KVC_E_GGUF_TYPE;
        *out = (int64_t)n.magnitude;
    }
    return KVC_OK;
}

kvc_status kvc_gguf_uint64(const kvc_gguf *gguf, size_t v, size_t j, uint64_t *out) {
    if (!gguf || !out) return KVC_E_NULL_POINTER;
    number n;
    const kvc_status status = number_at(gguf, v, j, is_integer, &n);
    if (status == KVC_OK && n.negative) return KVC_E_GGUF_TYPE;
    if (status == KVC_OK) *out = n.magnitude;
    return status;
}

static int is_string(uint32_t type) {
    return type == KVC_GGUF_STRING;
}

static int is_array(uint32_t type) {
    return type == KVC_GGUF_ARRAY;
}

kvc_status kvc_gguf_string(const kvc_gguf *gguf, size_t v, size_t j, const char **str,
                           size_t *len) {
    if (!gguf || !str || !len) return KVC_E_NULL_POINTER;
    const gguf_value *x;
    const kvc_status status = element_of(gguf, v, j, is_string, &x);
    if (status == KVC_OK) span_out(gguf, gguf->strings[x->first + j], str, len);
    return status;
}

kvc_status kvc_gguf_raw(const kvc_gguf *gguf, size_t v, const uint8_t **data, size_t *bytes) {
    if (!gguf || !data || !bytes) return KVC_E_NULL_POINTER;
    const gguf_value *x = value_at(gguf, v);
    if (!x) return KVC_E_GGUF_INDEX;
    if (!is_number(x->item_type)) return KVC_E_GGUF_TYPE;
    *data = gguf->copy + x->first;
    *bytes = (size_t)x->count * kvc_gguf_type_size(x->item_type);
    return KVC_OK;
}

kvc_status kvc_gguf_array_item(const kvc_gguf *gguf, size_t v, size_t j, size_t *item) {
    if (!gguf || !item) return KVC_E_NULL_POINTER;
    const gguf_value *x;
    const kvc_status status = element_of(gguf, v, j, is_array, &x);
    if (status == KVC_OK) *item = x->first + j;
    return status;
}

kvc_status kvc_gguf_tensor(const kvc_gguf *gguf, size_t t, const char **name, size_t *name_len,
                           uint32_t *type, size_t *n_dims, uint64_t *dims, uint64_t *offset,
                           uint64_t *bytes) {
    if (!gguf) return KVC_E_NULL_POINTER;
    if (t >= gguf->tensor_count) return KVC_E_GGUF_INDEX;
    const gguf_tensor *x = &gguf->tensors[t];
    span_out(gguf, x->name, name, name_len);
    if (type) *type = x->type;
    if (n_dims) *n_dims = x->n_dims;
    if (dims) memcpy(dims, x->dims, x->n_dims * sizeof dims[0]);
    if (offset) *offset = x->offset;
    if (bytes) *bytes = x->bytes;
    return KVC_OK;
}

const char *kvc_gguf_tensor_type_name(const kvc_gguf *gguf, size_t t) {
    if (!gguf || t >= gguf->tensor_count) return NULL;
    return kvc_ggml_type_name(gguf->tensors[t].type);
}
