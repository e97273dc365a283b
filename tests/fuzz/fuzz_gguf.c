/*
 * fuzz_gguf.c -- libFuzzer harness: arbitrary bytes as the start of a GGUF
 * file.
 *
 * A refused header must come back with a GGUF status and nothing built
 * (LeakSanitizer checks that nothing leaked), a truncation with a `needed`
 * past the bytes given, and kvc_gguf_explain must say the same status in a
 * sentence that fits any buffer.  An accepted one must hold together
 * through every accessor: the header alone parses again and every shorter
 * prefix is a truncation asking for no more than the header; keys and
 * tensor names are found at their own index; every value reads as its type
 * says (numbers agree with their raw bytes, exact integers with their
 * doubles, strings and arrays of arrays within bounds, and reads past the
 * end refused); tensors have 1 to 4 dims of at least 1, aligned offsets,
 * bytes exactly when the weight table knows the type, lie within the data
 * and do not overlap; a tensor whose data the input holds dequantizes; and
 * a failed allocation is KVC_E_NOMEM with nothing left.  The runner then
 * reads the accepted header as a model: refused with a model status and a
 * message, or a model whose shape its accessors report, its weights region
 * the data's size (allocated and freed when small), with nothing left; and
 * the image encoder reads it as a projector, alike.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fuzz_alloc.h"
#include "kvcache.h"

static int gguf_error(kvc_status status) {
    return status >= KVC_E_GGUF_MAGIC && status <= KVC_E_GGUF_TOO_LARGE;
}

/* explain() says `status` again, into buffers of several sizes, each
 * exactly its size so that ASan sees a write past it. */
static void check_explained(const uint8_t *bytes, size_t len, kvc_status status) {
    static const size_t sizes[] = {1, 7, 64, 600};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char *sentence = fuzz_buffer(sizes[i]);
        FUZZ_REQUIRE(kvc_gguf_explain(bytes, len, sentence, sizes[i]) == status);
        FUZZ_REQUIRE(memchr(sentence, '\0', sizes[i]) != NULL);
        if (sizes[i] == 600) FUZZ_REQUIRE(status != KVC_OK || strcmp(sentence, "ok") == 0);
        free(sentence);
    }
}

static size_t type_size(kvc_gguf_type type) {
    switch (type) {
    case KVC_GGUF_UINT8: case KVC_GGUF_INT8: case KVC_GGUF_BOOL: return 1;
    case KVC_GGUF_UINT16: case KVC_GGUF_INT16: return 2;
    case KVC_GGUF_UINT32: case KVC_GGUF_INT32: case KVC_GGUF_FLOAT32: return 4;
    case KVC_GGUF_UINT64: case KVC_GGUF_INT64: case KVC_GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

/* Element j of a raw little-endian array as a double, as this harness
 * reads the format. */
static double raw_number(kvc_gguf_type type, const uint8_t *p) {
    uint64_t u = 0;
    for (size_t b = type_size(type); b-- > 0;) u = u << 8 | p[b];
    switch (type) {
    case KVC_GGUF_INT8: return (int8_t)u;
    case KVC_GGUF_INT16: return (int16_t)u;
    case KVC_GGUF_INT32: return (int32_t)u;
    case KVC_GGUF_INT64: return (double)(int64_t)u;
    case KVC_GGUF_BOOL: return u != 0;
    case KVC_GGUF_FLOAT32: {
        const uint32_t bits = (uint32_t)u;
        float f;
        memcpy(&f, &bits, 4);
        return f;
    }
    case KVC_GGUF_FLOAT64: {
        double f;
        memcpy(&f, &u, 8);
        return f;
    }
    default: return (double)u;
    }
}

static int same_number(double a, double b) {
    return a == b || (isnan(a) && isnan(b));
}

/* Value v and, for arrays of arrays, every item under it. */
static void check_value(const kvc_gguf *g, size_t v, size_t header, unsigned depth) {
    FUZZ_REQUIRE(depth <= KVC_GGUF_MAX_NESTING);
    kvc_gguf_type type, item;
    size_t count;
    FUZZ_REQUIRE(kvc_gguf_value(g, v, &type, &item, &count) == KVC_OK);
    FUZZ_REQUIRE(type <= KVC_GGUF_FLOAT64 && item <= KVC_GGUF_FLOAT64);
    FUZZ_REQUIRE(type == KVC_GGUF_ARRAY || (item == type && count == 1));
    FUZZ_REQUIRE(count <= header);
    const uint8_t *raw;
    size_t raw_bytes;
    const kvc_status raw_status = kvc_gguf_raw(g, v, &raw, &raw_bytes);
    double x;
    const char *s;
    size_t len, child;
    FUZZ_REQUIRE(kvc_gguf_number(g, v, count, &x) == KVC_E_GGUF_INDEX);
    FUZZ_REQUIRE(kvc_gguf_string(g, v, count, &s, &len) == KVC_E_GGUF_INDEX);
    if (item == KVC_GGUF_STRING) {
        FUZZ_REQUIRE(raw_status == KVC_E_GGUF_TYPE);
        for (size_t j = 0; j < count; j++) {
            FUZZ_REQUIRE(kvc_gguf_string(g, v, j, &s, &len) == KVC_OK && len <= header);
            char *copy = fuzz_buffer(len); /* ASan checks every byte is readable */
            memcpy(copy, s, len);
            free(copy);
            FUZZ_REQUIRE(kvc_gguf_number(g, v, j, &x) == KVC_E_GGUF_TYPE);
        }
    } else if (item == KVC_GGUF_ARRAY) {
        FUZZ_REQUIRE(raw_status == KVC_E_GGUF_TYPE);
        FUZZ_REQUIRE(kvc_gguf_array_item(g, v, count, &child) == KVC_E_GGUF_INDEX);
        for (size_t j = 0; j < count; j++) {
            FUZZ_REQUIRE(kvc_gguf_array_item(g, v, j, &child) == KVC_OK && child != v);
            check_value(g, child, header, depth + 1);
        }
    } else {
        FUZZ_REQUIRE(raw_status == KVC_OK && raw_bytes == count * type_size(item) && raw_bytes <= header);
        FUZZ_REQUIRE(kvc_gguf_array_item(g, v, 0, &child) != KVC_OK);
        const int integer = item != KVC_GGUF_FLOAT32 && item != KVC_GGUF_FLOAT64;
        for (size_t j = 0; j < count; j++) {
            FUZZ_REQUIRE(kvc_gguf_number(g, v, j, &x) == KVC_OK);
            FUZZ_REQUIRE(same_number(x, raw_number(item, raw + j * type_size(item))));
            FUZZ_REQUIRE(kvc_gguf_string(g, v, j, &s, &len) == KVC_E_GGUF_TYPE);
            int64_t i64;
            uint64_t u64;
            const kvc_status si = kvc_gguf_int64(g, v, j, &i64), su = kvc_gguf_uint64(g, v, j, &u64);
            FUZZ_REQUIRE(integer ? (si == KVC_OK || su == KVC_OK) : (si == KVC_E_GGUF_TYPE && su == KVC_E_GGUF_TYPE));
            if (si == KVC_OK) FUZZ_REQUIRE((double)i64 == x);
            if (su == KVC_OK) FUZZ_REQUIRE((double)u64 == x);
            if (si == KVC_OK && su == KVC_OK) FUZZ_REQUIRE((uint64_t)i64 == u64);
        }
    }
}

typedef struct extent {
    uint64_t start, end;
} extent;

static int by_start(const void *a, const void *b) {
    const extent *x = a, *y = b;
    return (x->start > y->start) - (x->start < y->start);
}

/* Every tensor, and the data of those the input holds converted to f32. */
static void check_tensors(const kvc_gguf *g, const uint8_t *bytes, size_t size) {
    const size_t n = kvc_gguf_tensor_count(g);
    const uint64_t alignment = kvc_gguf_alignment(g), data_offset = kvc_gguf_data_offset(g);
    const uint64_t data_bytes = kvc_gguf_data_bytes(g);
    FUZZ_REQUIRE(n <= KVC_GGUF_MAX_TENSORS);
    extent *extents = fuzz_buffer((n ? n : 1) * sizeof(extent));
    size_t known = 0;
    for (size_t t = 0; t < n; t++) {
        const char *name;
        size_t name_len, n_dims;
        uint32_t type;
        uint64_t dims[KVC_GGUF_MAX_DIMS], offset, bytes_of;
        FUZZ_REQUIRE(kvc_gguf_tensor(g, t, &name, &name_len, &type, &n_dims, dims, &offset, &bytes_of) == KVC_OK);
        FUZZ_REQUIRE(name_len <= KVC_GGUF_MAX_NAME_BYTES);
        FUZZ_REQUIRE(kvc_gguf_find_tensor(g, name, name_len) == t);
        FUZZ_REQUIRE(n_dims >= 1 && n_dims <= KVC_GGUF_MAX_DIMS);
        uint64_t elements = 1;
        for (size_t d = 0; d < n_dims; d++) {
            FUZZ_REQUIRE(dims[d] >= 1 && dims[d] <= KVC_GGUF_MAX_ELEMENTS / elements);
            elements *= dims[d];
        }
        FUZZ_REQUIRE(offset % alignment == 0 && offset <= KVC_GGUF_MAX_DATA_BYTES);
        const int is_known = kvc_weight_dequantize(type, NULL, 0, 0, NULL) == KVC_OK;
        FUZZ_REQUIRE(is_known == (bytes_of > 0));
        FUZZ_REQUIRE(offset + bytes_of <= data_bytes);
        if (!is_known) continue;
        extents[known++] = (extent){offset, offset + bytes_of};
        /* The data of a tensor the input holds, to f32 (a few thousand
         * elements at most: any value, NaN included, is the file's). */
        if (data_offset + offset + bytes_of <= size && elements <= 4096) {
            float *out = fuzz_buffer((size_t)elements * sizeof(float));
            FUZZ_REQUIRE(kvc_weight_dequantize(type, bytes + data_offset + offset, 0, (size_t)elements, out) == KVC_OK);
            free(out);
        }
    }
    qsort(extents, known, sizeof extents[0], by_start);
    for (size_t k = 1; k < known; k++) FUZZ_REQUIRE(extents[k].start >= extents[k - 1].end);
    free(extents);
    FUZZ_REQUIRE(kvc_gguf_tensor(g, n, NULL, NULL, NULL, NULL, NULL, NULL, NULL) == KVC_E_GGUF_INDEX);
}

static void check_accepted(const kvc_gguf *g, const uint8_t *bytes, size_t size) {
    const size_t header = kvc_gguf_header_bytes(g);
    const uint32_t alignment = kvc_gguf_alignment(g);
    FUZZ_REQUIRE(kvc_gguf_version(g) >= 1 && kvc_gguf_version(g) <= 3);
    FUZZ_REQUIRE(header >= 16 && header <= size && header <= KVC_GGUF_MAX_HEADER_BYTES);
    FUZZ_REQUIRE(alignment != 0 && (alignment & (alignment - 1)) == 0);
    FUZZ_REQUIRE(kvc_gguf_data_offset(g) >= header && kvc_gguf_data_offset(g) - header < alignment);
    FUZZ_REQUIRE(kvc_gguf_data_offset(g) % alignment == 0 && kvc_gguf_data_bytes(g) % alignment == 0);
    const size_t entries = kvc_gguf_metadata_count(g);
    FUZZ_REQUIRE(entries <= KVC_GGUF_MAX_METADATA);
    for (size_t i = 0; i < entries; i++) {
        const char *key;
        size_t len;
        FUZZ_REQUIRE(kvc_gguf_key(g, i, &key, &len) == KVC_OK && len <= KVC_GGUF_MAX_KEY_BYTES);
        FUZZ_REQUIRE(kvc_gguf_find(g, key, len) == i);
        check_value(g, i, header, 0);
    }
    FUZZ_REQUIRE(kvc_gguf_key(g, entries, &(const char *){NULL}, &(size_t){0}) == KVC_E_GGUF_INDEX);
    check_tensors(g, bytes, size);
}

/* The header alone parses; shorter prefixes are truncations asking for
 * more than they have and no more than the header. */
static void check_prefixes(const uint8_t *bytes, size_t header) {
    const size_t lens[] = {header, header - 1, header / 2, header / 3, 0};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        fuzz_context("kvc_gguf_parse of the first %zu bytes of a %zu-byte header", lens[i], header);
        uint8_t *prefix = fuzz_buffer(lens[i]);
        if (lens[i]) memcpy(prefix, bytes, lens[i]);
        kvc_gguf *g = NULL;
        size_t needed = 0;
        const kvc_status status = kvc_gguf_parse(prefix, lens[i], &g, &needed);
        if (i == 0) {
            FUZZ_REQUIRE(status == KVC_OK && kvc_gguf_header_bytes(g) == header);
        } else {
            FUZZ_REQUIRE(status == KVC_E_GGUF_TRUNCATED && g == NULL && needed > lens[i] && needed <= header);
        }
        kvc_gguf_free(g);
        free(prefix);
    }
}

/* The accepted header as a model for the runner. */
static void check_model(const kvc_gguf *g) {
    fuzz_context("kvc_lm_create of an accepted header");
    char message[160];
    kvc_lm *lm = (kvc_lm *)1;
    const kvc_status status = kvc_lm_create(g, &lm, message, sizeof message);
    if (status != KVC_OK) {
        FUZZ_REQUIRE(lm == NULL && message[0] != '\0');
        FUZZ_REQUIRE(status == KVC_E_ARCH || status == KVC_E_MODEL_FILE || status == KVC_E_WEIGHT_TYPE || status == KVC_E_NOMEM);
        return;
    }
    FUZZ_REQUIRE(kvc_lm_num_layers(lm) >= 1 && kvc_lm_num_heads(lm) % kvc_lm_num_kv_heads(lm) == 0);
    FUZZ_REQUIRE(kvc_lm_head_dim(lm) % 2 == 0 && kvc_lm_vocab_size(lm) >= 1 && kvc_lm_weights(lm) == NULL);
    /* An embedding model's reading: a pooling of the table, vectors of some width, a head's outputs its labels'. */
    FUZZ_REQUIRE((unsigned)kvc_lm_pooling(lm) <= KVC_POOLING_RANK && kvc_lm_embedding_dim(lm) >= 1);
    FUZZ_REQUIRE(kvc_lm_weights_bytes(lm) == kvc_gguf_data_bytes(g) || kvc_gguf_data_bytes(g) > SIZE_MAX);
    if (kvc_lm_weights_bytes(lm) <= (1u << 20)) {
        const kvc_status allocated = kvc_lm_alloc_weights(lm);
        FUZZ_REQUIRE(allocated == KVC_OK || allocated == KVC_E_NOMEM);
        FUZZ_REQUIRE((kvc_lm_weights(lm) != NULL) == (allocated == KVC_OK));
    }
    kvc_lm_free(lm);
}

/* The accepted header as a projector for the image encoder: refused with
 * an encoder status and a message, or an encoder whose accessors hold
 * together, its weights region the data's size (allocated and freed when
 * small), with nothing left. */
static void check_vision(const kvc_gguf *g) {
    fuzz_context("kvc_vision_create of an accepted header");
    char message[160];
    kvc_vision *v = (kvc_vision *)1;
    const kvc_status status = kvc_vision_create(g, &v, message, sizeof message);
    if (status != KVC_OK) {
        FUZZ_REQUIRE(v == NULL && message[0] != '\0');
        FUZZ_REQUIRE(status == KVC_E_ARCH || status == KVC_E_MODEL_FILE || status == KVC_E_WEIGHT_TYPE || status == KVC_E_NOMEM);
        return;
    }
    FUZZ_REQUIRE(kvc_vision_projector(v) != NULL && kvc_vision_output_dim(v) >= 1 && kvc_vision_weights(v) == NULL);
    FUZZ_REQUIRE(kvc_vision_merge(v) >= 2 && kvc_vision_patch_size(v) >= 1);
    FUZZ_REQUIRE(kvc_vision_weights_bytes(v) == kvc_gguf_data_bytes(g) || kvc_gguf_data_bytes(g) > SIZE_MAX);
    FUZZ_REQUIRE(kvc_vision_tokens(v, 0, 0) == 0 && kvc_vision_tokens(v, kvc_vision_patch_size(v) + 1, 1) == 0);
    if (kvc_vision_weights_bytes(v) <= (1u << 20)) {
        const kvc_status allocated = kvc_vision_alloc_weights(v);
        FUZZ_REQUIRE(allocated == KVC_OK || allocated == KVC_E_NOMEM);
        FUZZ_REQUIRE((kvc_vision_weights(v) != NULL) == (allocated == KVC_OK));
    }
    kvc_vision_free(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int installed;
    if (!installed) fuzz_alloc_install(), installed = 1;
    /* The bytes are copied to a block of their own size: ASan then sees a
     * read past the end. */
    uint8_t *bytes = fuzz_buffer(size);
    if (size) memcpy(bytes, data, size);
    fuzz_context("kvc_gguf_parse of %zu bytes", size);
    kvc_gguf *g = (kvc_gguf *)bytes;
    size_t needed = 0;
    const kvc_status status = kvc_gguf_parse(bytes, size, &g, &needed);
    check_explained(bytes, size, status);
    if (status == KVC_OK) {
        check_accepted(g, bytes, size);
        check_model(g);
        check_vision(g);
        const size_t header = kvc_gguf_header_bytes(g);
        kvc_gguf_free(g);
        check_prefixes(bytes, header);
        fuzz_context("kvc_gguf_parse of %zu bytes, its allocation failing", size);
        fuzz_alloc_arm(1, 0);
        g = (kvc_gguf *)bytes;
        FUZZ_REQUIRE(kvc_gguf_parse(bytes, size, &g, NULL) == KVC_E_NOMEM && g == NULL);
        FUZZ_REQUIRE(fuzz_alloc_disarm());
    } else {
        FUZZ_REQUIRE(gguf_error(status) && g == NULL);
        FUZZ_REQUIRE((status == KVC_E_GGUF_TRUNCATED) == (needed != 0));
        if (needed) FUZZ_REQUIRE(needed > size && needed <= KVC_GGUF_MAX_HEADER_BYTES);
    }
    free(bytes);
    return 0;
}
