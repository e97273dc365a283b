/*
 * test_gguf.c -- the GGUF reader: files written by gguf_builder.c (versions
 * 1 to 3; every value type, arrays and arrays of arrays, alignment, tensors
 * of known and unknown types) read back through every accessor; every
 * truncation of them asks for more and makes progress; corruptions are
 * refused with the status and sentence that name them, leaving nothing
 * allocated; every allocation can fail; and the two real models of
 * ../shared/data parse with the facts their README gives.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_builder.h"
#include "test.h"

/* ---- reading back ---- */

static size_t find(const kvc_gguf *g, const char *key) {
    return kvc_gguf_find(g, key, strlen(key));
}

static int string_is(const char *s, size_t len, const char *expected) {
    return len == strlen(expected) && memcmp(s, expected, len) == 0;
}

static int number_is(const kvc_gguf *g, const char *key, size_t j, double expected) {
    double x = NAN;
    return kvc_gguf_number(g, find(g, key), j, &x) == KVC_OK && x == expected;
}

/* The fixture's every value, tensor and fact, through the accessors. */
static void check_fixture(const kvc_gguf *g, uint32_t version, uint64_t alignment, size_t header) {
    CHECK(kvc_gguf_version(g) == version);
    CHECK(kvc_gguf_header_bytes(g) == header);
    CHECK(kvc_gguf_alignment(g) == alignment);
    CHECK(kvc_gguf_data_offset(g) == gb_align_up(header, alignment));
    const size_t entries = GB_FIXTURE_ENTRIES + (alignment != KVC_GGUF_DEFAULT_ALIGNMENT);
    CHECK(kvc_gguf_metadata_count(g) == entries);
    const char *key;
    size_t len;
    CHECK_OK(kvc_gguf_key(g, 1, &key, &len));
    CHECK(string_is(key, len, "t.u8"));
    CHECK_STATUS(kvc_gguf_key(g, entries, &key, &len), KVC_E_GGUF_INDEX);
    for (size_t i = 0; i < entries; i++) {
        CHECK_OK(kvc_gguf_key(g, i, &key, &len));
        CHECK(kvc_gguf_find(g, key, len) == i);
    }
    CHECK(find(g, "t.u9") == KVC_GGUF_NONE && find(g, "") == KVC_GGUF_NONE && find(g, "t.u") == KVC_GGUF_NONE);

    kvc_gguf_type type, item;
    size_t count;
    const char *s;
    CHECK_OK(kvc_gguf_value(g, find(g, "general.architecture"), &type, &item, &count));
    CHECK(type == KVC_GGUF_STRING && item == KVC_GGUF_STRING && count == 1);
    CHECK_OK(kvc_gguf_string(g, find(g, "general.architecture"), 0, &s, &len));
    CHECK(string_is(s, len, "llama"));
    CHECK_OK(kvc_gguf_string(g, find(g, "t.str"), 0, &s, &len));
    CHECK(string_is(s, len, "h\xc3\xa9llo"));
    CHECK(number_is(g, "t.u8", 0, 200) && number_is(g, "t.i8", 0, -100));
    CHECK(number_is(g, "t.u16", 0, 60000) && number_is(g, "t.i16", 0, -30000));
    CHECK(number_is(g, "t.u32", 0, 4000000000.0) && number_is(g, "t.i32", 0, -2000000000.0));
    CHECK(number_is(g, "t.f32", 0, 1.5) && number_is(g, "t.f64", 0, 3.25));
    CHECK(number_is(g, "t.bool", 0, 1) && number_is(g, "t.bool2", 0, 1));
    CHECK(number_is(g, "t.u64", 0, (double)GB_U64_BIG) && number_is(g, "t.i64", 0, (double)GB_I64_BIG));
    uint64_t u = 0;
    int64_t i64 = 0;
    CHECK_OK(kvc_gguf_uint64(g, find(g, "t.u64"), 0, &u));
    CHECK(u == GB_U64_BIG);
    CHECK_STATUS(kvc_gguf_int64(g, find(g, "t.u64"), 0, &i64), KVC_OK); /* 2^60 + 1 fits */
    CHECK(i64 == (int64_t)GB_U64_BIG);
    CHECK_OK(kvc_gguf_int64(g, find(g, "t.i64"), 0, &i64));
    CHECK(i64 == GB_I64_BIG);
    CHECK_OK(kvc_gguf_int64(g, find(g, "t.i64min"), 0, &i64));
    CHECK(i64 == INT64_MIN);
    CHECK_OK(kvc_gguf_int64(g, find(g, "t.i8"), 0, &i64));
    CHECK(i64 == -100);
    CHECK_STATUS(kvc_gguf_uint64(g, find(g, "t.i64"), 0, &u), KVC_E_GGUF_TYPE);
    CHECK_STATUS(kvc_gguf_int64(g, find(g, "t.f32"), 0, &i64), KVC_E_GGUF_TYPE);
    CHECK_STATUS(kvc_gguf_number(g, find(g, "t.str"), 0, &(double){0}), KVC_E_GGUF_TYPE);
    CHECK_STATUS(kvc_gguf_number(g, find(g, "t.u8"), 1, &(double){0}), KVC_E_GGUF_INDEX);
    CHECK_STATUS(kvc_gguf_string(g, find(g, "t.u8"), 0, &s, &len), KVC_E_GGUF_TYPE);
    CHECK_STATUS(kvc_gguf_value(g, 1u << 30, &type, &item, &count), KVC_E_GGUF_INDEX);

    /* arrays */
    const size_t scores = find(g, "a.scores");
    CHECK_OK(kvc_gguf_value(g, scores, &type, &item, &count));
    CHECK(type == KVC_GGUF_ARRAY && item == KVC_GGUF_FLOAT32 && count == GB_SCORES);
    const uint8_t *raw;
    size_t raw_bytes;
    CHECK_OK(kvc_gguf_raw(g, scores, &raw, &raw_bytes));
    CHECK(raw_bytes == 4 * GB_SCORES);
    for (size_t j = 0; j < GB_SCORES; j++) {
        float f;
        memcpy(&f, raw + 4 * j, 4);
        double x;
        CHECK_OK(kvc_gguf_number(g, scores, j, &x));
        CHECK(f == gb_score(j) && x == gb_score(j));
    }
    CHECK_STATUS(kvc_gguf_number(g, scores, GB_SCORES, &(double){0}), KVC_E_GGUF_INDEX);
    CHECK(number_is(g, "a.u8", 2, 255));
    CHECK_OK(kvc_gguf_raw(g, find(g, "t.u16"), &raw, &raw_bytes));
    CHECK(raw_bytes == 2 && raw[0] == (60000 & 0xff) && raw[1] == 60000 >> 8);
    const size_t strs = find(g, "a.str");
    CHECK_OK(kvc_gguf_value(g, strs, &type, &item, &count));
    CHECK(type == KVC_GGUF_ARRAY && item == KVC_GGUF_STRING && count == 3);
    CHECK_OK(kvc_gguf_string(g, strs, 0, &s, &len));
    CHECK(len == 0);
    CHECK_OK(kvc_gguf_string(g, strs, 2, &s, &len));
    CHECK(string_is(s, len, "<0x0A>"));
    CHECK_STATUS(kvc_gguf_string(g, strs, 3, &s, &len), KVC_E_GGUF_INDEX);
    CHECK_STATUS(kvc_gguf_raw(g, strs, &raw, &raw_bytes), KVC_E_GGUF_TYPE);
    CHECK_OK(kvc_gguf_value(g, find(g, "a.empty"), &type, &item, &count));
    CHECK(type == KVC_GGUF_ARRAY && item == KVC_GGUF_UINT32 && count == 0);
    CHECK_OK(kvc_gguf_raw(g, find(g, "a.empty"), &raw, &raw_bytes));
    CHECK(raw_bytes == 0);
    CHECK_OK(kvc_gguf_int64(g, find(g, "a.i64"), 0, &i64));
    CHECK(i64 == -1);
    CHECK_OK(kvc_gguf_uint64(g, find(g, "a.i64"), 1, &u));
    CHECK(u == (uint64_t)INT64_MAX);

    /* arrays of arrays: each item a value of its own */
    const size_t nested = find(g, "a.nested");
    CHECK_OK(kvc_gguf_value(g, nested, &type, &item, &count));
    CHECK(type == KVC_GGUF_ARRAY && item == KVC_GGUF_ARRAY && count == 2);
    size_t first, second;
    CHECK_OK(kvc_gguf_array_item(g, nested, 0, &first));
    CHECK_OK(kvc_gguf_array_item(g, nested, 1, &second));
    CHECK(first >= entries && second >= entries && first != second);
    CHECK_OK(kvc_gguf_value(g, first, &type, &item, &count));
    CHECK(type == KVC_GGUF_ARRAY && item == KVC_GGUF_INT16 && count == 2);
    double x;
    CHECK_OK(kvc_gguf_number(g, first, 1, &x));
    CHECK(x == 2);
    CHECK_OK(kvc_gguf_number(g, second, 0, &x));
    CHECK(x == -3);
    CHECK_STATUS(kvc_gguf_array_item(g, nested, 2, &first), KVC_E_GGUF_INDEX);
    CHECK_STATUS(kvc_gguf_array_item(g, first, 0, &second), KVC_E_GGUF_TYPE);
    CHECK_STATUS(kvc_gguf_number(g, nested, 0, &x), KVC_E_GGUF_TYPE);
    size_t deep = find(g, "a.deep");
    for (int level = 0; level < 2; level++) CHECK_OK(kvc_gguf_array_item(g, deep, 0, &deep));
    CHECK_OK(kvc_gguf_string(g, deep, 0, &s, &len));
    CHECK(string_is(s, len, "x"));

    /* tensors */
    CHECK(kvc_gguf_tensor_count(g) == GB_FIXTURE_TENSORS);
    uint64_t expected_offset = 0, end = 0;
    for (size_t t = 0; t < GB_FIXTURE_TENSORS; t++) {
        const gb_tensor *e = &gb_fixture_tensors[t];
        const char *name;
        uint32_t ggml_type;
        size_t n_dims;
        uint64_t dims[KVC_GGUF_MAX_DIMS], offset, bytes;
        CHECK_OK(kvc_gguf_tensor(g, t, &name, &len, &ggml_type, &n_dims, dims, &offset, &bytes));
        CHECK(string_is(name, len, e->name) && ggml_type == e->type && n_dims == e->n_dims);
        CHECK(memcmp(dims, e->dims, n_dims * sizeof dims[0]) == 0);
        CHECK(offset == expected_offset && bytes == e->bytes);
        CHECK(kvc_gguf_find_tensor(g, e->name, strlen(e->name)) == t);
        end = offset + bytes;
        expected_offset = gb_align_up(end, alignment);
    }
    CHECK(kvc_gguf_data_bytes(g) == gb_align_up(end, alignment));
    CHECK(strcmp(kvc_gguf_tensor_type_name(g, 0), "F32") == 0);
    CHECK(strcmp(kvc_gguf_tensor_type_name(g, 1), "Q8_0") == 0);
    CHECK(strcmp(kvc_gguf_tensor_type_name(g, 2), "Q4_K") == 0);
    CHECK(strcmp(kvc_gguf_tensor_type_name(g, 4), "IQ2_XXS") == 0);
    CHECK(kvc_gguf_tensor_type_name(g, 5) == NULL && kvc_gguf_tensor_type_name(g, 6) == NULL);
    CHECK_STATUS(kvc_gguf_tensor(g, GB_FIXTURE_TENSORS, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
                 KVC_E_GGUF_INDEX);
    CHECK(kvc_gguf_find_tensor(g, "blk.0", 5) == KVC_GGUF_NONE);
}

static const uint32_t versions[] = {1, 2, 3};

TEST(every_value_type_and_tensor_should_read_back_in_each_version) {
    for (size_t v = 0; v < 3; v++) {
        for (uint64_t alignment = 32; alignment <= 64; alignment *= 2) {
            size_t header;
            gb_file b = gb_fixture(versions[v], alignment, &header);
            /* The reader keeps its own copy: the caller's bytes may go. */
            uint8_t *bytes = test_alloc(b.len);
            memcpy(bytes, b.bytes, b.len);
            kvc_gguf *g = NULL;
            size_t needed = 99;
            CHECK_OK(kvc_gguf_parse(bytes, b.len, &g, &needed));
            CHECK(needed == 0);
            memset(bytes, 0xA5, b.len);
            free(bytes);
            check_fixture(g, versions[v], alignment, header);
            kvc_gguf_free(g);
            /* The header alone is enough. */
            CHECK_OK(kvc_gguf_parse(b.bytes, header, &g, NULL));
            check_fixture(g, versions[v], alignment, header);
            kvc_gguf_free(g);
            char sentence[64];
            CHECK_OK(kvc_gguf_explain(b.bytes, header, sentence, sizeof sentence));
            CHECK(strcmp(sentence, "ok") == 0);
            free(b.bytes);
        }
    }
}

TEST(null_arguments_should_be_refused) {
    kvc_gguf *g = (kvc_gguf *)&g;
    CHECK_STATUS(kvc_gguf_parse(NULL, 4, &g, NULL), KVC_E_NULL_POINTER);
    CHECK(g == NULL);
    CHECK_STATUS(kvc_gguf_parse((const uint8_t *)"GGUF", 4, NULL, NULL), KVC_E_NULL_POINTER);
    size_t needed = 0;
    CHECK_STATUS(kvc_gguf_parse(NULL, 0, &g, &needed), KVC_E_GGUF_TRUNCATED);
    CHECK(needed >= 1);
    CHECK_STATUS(kvc_gguf_explain((const uint8_t *)"GGUF", 4, NULL, 8), KVC_E_NULL_POINTER);
    kvc_gguf_free(NULL);
    CHECK(kvc_gguf_version(NULL) == 0 && kvc_gguf_metadata_count(NULL) == 0 && kvc_gguf_tensor_count(NULL) == 0);
    CHECK(kvc_gguf_find(NULL, "a", 1) == KVC_GGUF_NONE);
    CHECK_STATUS(kvc_gguf_value(NULL, 0, NULL, NULL, NULL), KVC_E_NULL_POINTER);
    CHECK_STATUS(kvc_weight_dequantize(0, NULL, 0, 1, NULL), KVC_E_NULL_POINTER);
}

/* ---- truncation ---- */

TEST(every_truncation_should_ask_for_more_bytes_that_make_progress) {
    for (size_t v = 0; v < 3; v++) {
        size_t header;
        gb_file b = gb_fixture(versions[v], 32, &header);
        /* The last field, the last tensor's offset, decides the header's size. */
        const size_t last_field = header - 8;
        for (size_t len = 0; len < header; len++) {
            uint8_t *prefix = test_alloc(len ? len : 1);
            memcpy(prefix, b.bytes, len);
            kvc_gguf *g = (kvc_gguf *)prefix;
            size_t needed = 0;
            CHECK_STATUS(kvc_gguf_parse(prefix, len, &g, &needed), KVC_E_GGUF_TRUNCATED);
            CHECK(g == NULL && needed > len && needed <= header);
            if (len >= last_field) CHECK(needed == header);
            /* Called again with what it asked for, it parses or asks for more. */
            kvc_gguf_free(g);
            size_t again = 0;
            const kvc_status status = kvc_gguf_parse(b.bytes, needed, &g, &again);
            CHECK(status == KVC_OK || (status == KVC_E_GGUF_TRUNCATED && again > needed));
            kvc_gguf_free(g);
            char sentence[256];
            CHECK_STATUS(kvc_gguf_explain(prefix, len, sentence, sizeof sentence), KVC_E_GGUF_TRUNCATED);
            CHECK(strncmp(sentence, "truncated: ", 11) == 0);
            free(prefix);
        }
        /* Following `needed` from nothing reaches the header in few calls. */
        size_t len = 0, calls = 0;
        kvc_gguf *g = NULL;
        while (kvc_gguf_parse(b.bytes, len, &g, &len) == KVC_E_GGUF_TRUNCATED) calls++;
        CHECK(g != NULL && calls < 32);
        kvc_gguf_free(g);
        free(b.bytes);
    }
}

TEST(explain_should_cut_its_sentence_to_the_buffer) {
    char sentence[12];
    memset(sentence, 'x', sizeof sentence);
    CHECK_STATUS(kvc_gguf_explain((const uint8_t *)"GGUF\x09\0\0\0", 8, sentence, 10), KVC_E_GGUF_VERSION);
    CHECK(strlen(sentence) == 9 && sentence[10] == 'x' && strncmp(sentence, "unsupport", 9) == 0);
    CHECK_STATUS(kvc_gguf_explain((const uint8_t *)"GGUF", 4, sentence, 0), KVC_E_GGUF_TRUNCATED);
    CHECK(sentence[0] == 'u');
}

/* ---- refusals ---- */

/* The bytes are refused with `expected`, nothing allocated is left, and
 * the sentence says `words`. */
static int refused_with(const gb_file *b, kvc_status expected, const char *words) {
    int ok = test_fault_install() == KVC_OK;
    kvc_gguf *g = (kvc_gguf *)b;
    const kvc_status status = kvc_gguf_parse(b->bytes, b->len, &g, NULL);
    char sentence[512];
    const kvc_status explained = kvc_gguf_explain(b->bytes, b->len, sentence, sizeof sentence);
    if (status == KVC_OK) kvc_gguf_free(g);
    const long live = test_fault_remove();
    ok = ok && status == expected && explained == expected && g == NULL && live == 0 &&
         strstr(sentence, words) != NULL;
    if (!ok) {
        printf("  expected %s saying \"%s\": got %s, \"%s\" (%ld blocks live)\n", kvc_status_name(expected),
               words, kvc_status_name(status), sentence, live);
    }
    return ok;
}

#define CHECK_REFUSES(b, expected, words)                                          \
    do {                                                                           \
        const int refused_ = refused_with(&(b), expected, words);                  \
        free((b).bytes);                                                           \
        CHECK(refused_);                                                           \
    } while (0)

/* A file of one metadata entry written by `entry` and the tensors given. */
static void (*entry_writer)(gb_file *b);

static size_t one_entry(gb_file *b) {
    entry_writer(b);
    return 1;
}

static gb_file with_entry(uint32_t version, void (*entry)(gb_file *b)) {
    size_t header;
    entry_writer = entry;
    return gb_build(version, one_entry, gb_fixture_tensors, 1, 32, &header);
}

static gb_file with_tensors(uint32_t version, const gb_tensor *tensors, size_t count, uint64_t alignment) {
    size_t header;
    return gb_build(version, NULL, tensors, count, alignment, &header);
}

static void patch_u32(gb_file *b, size_t at, uint32_t x) {
    for (int i = 0; i < 4; i++) b->bytes[at + i] = (uint8_t)(x >> (8 * i));
}

TEST(wrong_magic_and_versions_should_be_refused) {
    size_t header;
    gb_file b = gb_fixture(3, 32, &header);
    b.bytes[3] = 'X';
    CHECK_REFUSES(b, KVC_E_GGUF_MAGIC, "not a GGUF file");
    gb_file partial = {test_alloc(3), 3, 3, 3};
    memcpy(partial.bytes, "GGX", 3);
    CHECK_REFUSES(partial, KVC_E_GGUF_MAGIC, "not a GGUF file");
    gb_file short_magic = {test_alloc(3), 3, 3, 3};
    memcpy(short_magic.bytes, "GGU", 3);
    CHECK_REFUSES(short_magic, KVC_E_GGUF_TRUNCATED, "truncated: the magic");
    const uint32_t bad[] = {0, 4, 9};
    for (size_t i = 0; i < 3; i++) {
        b = gb_fixture(3, 32, &header);
        patch_u32(&b, 4, bad[i]);
        char words[64];
        snprintf(words, sizeof words, "unsupported GGUF version %u (this reader knows 1 to 3)", bad[i]);
        CHECK_REFUSES(b, KVC_E_GGUF_VERSION, words);
    }
    b = gb_fixture(3, 32, &header);
    patch_u32(&b, 4, 0x03000000u);
    CHECK_REFUSES(b, KVC_E_GGUF_VERSION, "big-endian");
}

TEST(counts_beyond_the_limits_or_the_bytes_should_be_refused) {
    for (size_t v = 0; v < 3; v++) {
        size_t header;
        gb_file b = gb_fixture(versions[v], 32, &header);
        patch_u32(&b, 8, 0x7fffffff); /* the tensor count */
        CHECK_REFUSES(b, KVC_E_GGUF_TOO_LARGE, "the tensor count is 2147483647, more than the 1048576");
        b = gb_fixture(versions[v], 32, &header);
        patch_u32(&b, versions[v] == 1 ? 12 : 16, 1u << 17); /* the metadata count */
        CHECK_REFUSES(b, KVC_E_GGUF_TOO_LARGE, "the metadata count is 131072");
        /* A count within the limits but past the bytes: a truncation. */
        b = gb_fixture(versions[v], 32, &header);
        patch_u32(&b, 8, GB_FIXTURE_TENSORS + 1);
        b.len = header;
        CHECK_REFUSES(b, KVC_E_GGUF_TRUNCATED, "truncated: the name of tensor 6");
    }
    /* A v3 count in the high word. */
    size_t header;
    gb_file b = gb_fixture(3, 32, &header);
    b.bytes[12] = 1;
    CHECK_REFUSES(b, KVC_E_GGUF_TOO_LARGE, "the tensor count is 4294967302");
}

/* A u8 entry whose key is key_length bytes. */
static size_t key_length;

static void key_of_length(gb_file *b) {
    char *key = test_alloc(key_length + 1);
    memset(key, 'k', key_length);
    gb_key(b, key, KVC_GGUF_UINT8);
    gb_le(b, 0, 1);
    free(key);
}

static void huge_string(gb_file *b) {
    gb_key(b, "general.name", KVC_GGUF_STRING);
    gb_count(b, 0x7ffffff0u);
    gb_bytes(b, "abc", 3);
}

static void short_string(gb_file *b) {
    gb_key(b, "general.name", KVC_GGUF_STRING);
    gb_count(b, 200);
    gb_bytes(b, "abc", 3);
}

static void bad_value_type(gb_file *b) {
    gb_key(b, "general.architecture", 13);
    gb_le(b, 0, 4);
}

static void bad_item_type(gb_file *b) {
    gb_key(b, "tokenizer.ggml.tokens", KVC_GGUF_ARRAY);
    gb_array(b, 99, 1);
}

static void huge_array(gb_file *b) {
    gb_key(b, "tokenizer.ggml.scores", KVC_GGUF_ARRAY);
    gb_array(b, KVC_GGUF_FLOAT32, 0x7fffffffu);
}

static void huge_string_array(gb_file *b) {
    gb_key(b, "tokenizer.ggml.tokens", KVC_GGUF_ARRAY);
    gb_array(b, KVC_GGUF_STRING, 0x7fffffffu);
}

/* Arrays nested `nesting_depth` deep around one u8. */
static unsigned nesting_depth;

static void nested_arrays(gb_file *b) {
    gb_key(b, "deep", KVC_GGUF_ARRAY);
    for (unsigned d = 1; d < nesting_depth; d++) gb_array(b, KVC_GGUF_ARRAY, 1);
    gb_array(b, KVC_GGUF_UINT8, 1);
    gb_le(b, 7, 1);
}

static void alignment_u64(gb_file *b) {
    gb_key(b, "general.alignment", KVC_GGUF_UINT64);
    gb_u64(b, 32);
}

static uint32_t alignment_value;

static void alignment_of(gb_file *b) {
    gb_key(b, "general.alignment", KVC_GGUF_UINT32);
    gb_u32(b, alignment_value);
}

static size_t two_same_keys(gb_file *b) {
    gb_key(b, "llama.block_count", KVC_GGUF_UINT32), gb_u32(b, 5);
    gb_key(b, "general.name", KVC_GGUF_STRING), gb_string(b, "x");
    gb_key(b, "llama.block_count", KVC_GGUF_UINT32), gb_u32(b, 6);
    return 3;
}

TEST(bad_metadata_should_be_refused_naming_the_key) {
    for (size_t v = 0; v < 3; v++) {
        const uint32_t version = versions[v];
        key_length = KVC_GGUF_MAX_KEY_BYTES + 1;
        gb_file b = with_entry(version, key_of_length);
        CHECK_REFUSES(b, KVC_E_GGUF_CORRUPT, "the key of metadata entry 0 is 65536 bytes long, more than the 65535");
        key_length = KVC_GGUF_MAX_KEY_BYTES;
        b = with_entry(version, key_of_length);
        kvc_gguf *g;
        CHECK_OK(kvc_gguf_parse(b.bytes, b.len, &g, NULL));
        kvc_gguf_free(g);
        free(b.bytes);
        b = with_entry(version, huge_string);
        CHECK_REFUSES(b, KVC_E_GGUF_TOO_LARGE, "a string of general.name (2147483632)");
        b = with_entry(version, short_string);
        CHECK_REFUSES(b, KVC_E_GGUF_TRUNCATED, "truncated: a string of general.name");
        b = with_entry(version, bad_value_type);
        CHECK_REFUSES(b, KVC_E_GGUF_CORRUPT, "general.architecture has unknown value type 13");
        b = with_entry(version, bad_item_type);
        CHECK_REFUSES(b, KVC_E_GGUF_CORRUPT, "tokenizer.ggml.tokens is an array of unknown value type 99");
        b = with_entry(version, huge_array);
        CHECK_REFUSES(b, KVC_E_GGUF_TOO_LARGE, "the length of tokenizer.ggml.scores (2147483647)");
        b = with_entry(version, huge_string_array);
        CHECK_REFUSES(b, KVC_E_GGUF_TOO_LARGE, "the length of tokenizer.ggml.tokens (2147483647)");
        nesting_depth = KVC_GGUF_MAX_NESTING;
        b = with_entry(version, nested_arrays);
        CHECK_OK(kvc_gguf_parse(b.bytes, b.len, &g, NULL));
        size_t item = kvc_gguf_find(g, "deep", 4);
        for (unsigned d = 1; d < nesting_depth; d++) CHECK_OK(kvc_gguf_array_item(g, item, 0, &item));
        double x;
        CHECK_OK(kvc_gguf_number(g, item, 0, &x));
        CHECK(x == 7);
        kvc_gguf_free(g);
        free(b.bytes);
        nesting_depth = KVC_GGUF_MAX_NESTING + 1;
        b = with_entry(version, nested_arrays);
        CHECK_REFUSES(b, KVC_E_GGUF_TOO_LARGE, "deep nests arrays deeper than 8 levels");
        b = with_entry(version, alignment_u64);
        CHECK_REFUSES(b, KVC_E_GGUF_CORRUPT, "general.alignment is uint64, not uint32");
        const uint32_t bad_alignments[] = {0, 3, 48};
        for (size_t i = 0; i < 3; i++) {
            alignment_value = bad_alignments[i];
            b = with_entry(version, alignment_of);
            char words[64];
            snprintf(words, sizeof words, "general.alignment is %u, not a power of two", bad_alignments[i]);
            CHECK_REFUSES(b, KVC_E_GGUF_CORRUPT, words);
        }
        size_t header;
        b = gb_build(version, two_same_keys, NULL, 0, 32, &header);
        CHECK_REFUSES(b, KVC_E_GGUF_CORRUPT, "metadata key llama.block_count appears twice (entries 0 and 2)");
    }
}

TEST(bad_tensor_infos_should_be_refused_naming_the_tensor) {
    for (size_t v = 0; v < 3; v++) {
        const uint32_t version = versions[v];
        const gb_tensor no_dims[] = {{"a", 0, 0, {1}, 0, 4}};
        gb_file b = with_tensors(version, no_dims, 1, 32);
        CHECK_REFUSES(b, KVC_E_GGUF_CORRUPT, "tensor a has 0 dimensions (1 to 4 allowed)");
        const gb_tensor five_dims[] = {{"token_embd.weight", 0, 5, {1, 1, 1, 1}, 0, 4}};
        b = with_tensors(version, five_dims, 1, 32);
        CHECK_REFUSES(b, KVC_E_GGUF_CORRUPT, "tensor token_embd.weight has 5 dimensions");
        const gb_tensor zero_dim[] = {{"a", 0, 3, {4, 0, 2}, 0, 0}};
        b = with_tensors(version, zero_dim, 1, 32);
        CHECK_REFUSES(b, KVC_E_GGUF_CORRUPT, "dimension 1 of tensor a is 0");
        const gb_tensor huge_dims[] = {{"a", 16, 2, {1u << 30, 1u << 30}, 0, 0}};
        b = with_tensors(version, huge_dims, 1, 32);
        CHECK_REFUSES(b, KVC_E_GGUF_TOO_LARGE, "the dims of tensor a make more than 281474976710656 elements");
        const gb_tensor bad_row[] = {{"blk.0.ffn_up.weight", 12, 2, {100, 4}, 0, 0}};
        b = with_tensors(version, bad_row, 1, 32);
        CHECK_REFUSES(b, KVC_E_GGUF_CORRUPT, "tensor blk.0.ffn_up.weight (Q4_K) has rows of 100 values, not a whole number of its blocks of 256");
        const gb_tensor misaligned[] = {{"a", 0, 1, {4}, 16, 16}};
        b = with_tensors(version, misaligned, 1, 32);
        CHECK_REFUSES(b, KVC_E_GGUF_CORRUPT, "tensor a starts at data offset 16, off its 32-byte alignment");
        b = with_tensors(version, misaligned, 1, 16); /* the same offset, aligned to 16 */
        kvc_gguf *g;
        CHECK_OK(kvc_gguf_parse(b.bytes, b.len, &g, NULL));
        kvc_gguf_free(g);
        free(b.bytes);
        const gb_tensor unknown_misaligned[] = {{"a", 16, 1, {256}, 40, 0}};
        b = with_tensors(version, unknown_misaligned, 1, 32);
        CHECK_REFUSES(b, KVC_E_GGUF_CORRUPT, "tensor a starts at data offset 40");
        const gb_tensor far[] = {{"a", 0, 1, {4}, (1ull << 48) + 32, 0}};
        b = with_tensors(version, far, 1, 32);
        CHECK_REFUSES(b, KVC_E_GGUF_TOO_LARGE, "the data offset of tensor a is 281474976710688");
        const gb_tensor past_limit[] = {{"a", 0, 2, {1u << 24, 1u << 23}, 1ull << 47, 0}};
        b = with_tensors(version, past_limit, 1, 32);
        CHECK_REFUSES(b, KVC_E_GGUF_TOO_LARGE, "tensor a ends at data byte 703687441776640");
        const gb_tensor overlapping[] = {{"a", 0, 1, {16}, 0, 64}, {"b", 8, 1, {32}, 32, 0}};
        b = with_tensors(version, overlapping, 2, 32);
        CHECK_REFUSES(b, KVC_E_GGUF_CORRUPT, "tensor b starts at data byte 32, inside tensor a, which ends at 64");
        /* Touching is fine; an unknown type is not checked for overlaps. */
        const gb_tensor touching[] = {{"a", 0, 1, {16}, 64, 64}, {"b", 8, 1, {32}, 0, 34},
                                        {"c", 16, 1, {256}, 64, 0}};
        b = with_tensors(version, touching, 3, 32);
        CHECK_OK(kvc_gguf_parse(b.bytes, b.len, &g, NULL));
        CHECK(kvc_gguf_data_bytes(g) == 128);
        kvc_gguf_free(g);
        free(b.bytes);
        const gb_tensor same_names[] = {{"a", 0, 1, {8}, GB_AUTO, 32}, {"blk.1.attn_q.weight", 0, 1, {8}, GB_AUTO, 32},
                                          {"blk.1.attn_q.weight", 0, 1, {8}, GB_AUTO, 32}};
        b = with_tensors(version, same_names, 3, 32);
        CHECK_REFUSES(b, KVC_E_GGUF_CORRUPT, "tensor blk.1.attn_q.weight appears twice (tensors 1 and 2)");
        char name[KVC_GGUF_MAX_NAME_BYTES + 2];
        memset(name, 'n', sizeof name - 1);
        name[sizeof name - 1] = '\0';
        const gb_tensor long_name[] = {{name, 0, 1, {8}, 0, 32}};
        b = with_tensors(version, long_name, 1, 32);
        CHECK_REFUSES(b, KVC_E_GGUF_CORRUPT, "the name of tensor 0 is 64 bytes long, more than the 63 ggml allows");
        name[KVC_GGUF_MAX_NAME_BYTES] = '\0';
        b = with_tensors(version, long_name, 1, 32);
        CHECK_OK(kvc_gguf_parse(b.bytes, b.len, &g, NULL));
        kvc_gguf_free(g);
        free(b.bytes);
    }
}

TEST(random_corruptions_should_parse_or_be_refused_cleanly) {
    test_rng rng = test_rng_new(20);
    for (size_t v = 0; v < 3; v++) {
        size_t header;
        gb_file b = gb_fixture(versions[v], 32, &header);
        for (int i = 0; i < 3000; i++) {
            uint8_t *copy = test_alloc(header);
            memcpy(copy, b.bytes, header);
            const int flips = 1 + (int)(test_rng_u32(&rng) % 4);
            for (int f = 0; f < flips; f++) copy[test_rng_u32(&rng) % header] ^= (uint8_t)(1u << (test_rng_u32(&rng) % 8));
            CHECK_OK(test_fault_install());
            kvc_gguf *g = NULL;
            size_t needed = 0;
            const kvc_status status = kvc_gguf_parse(copy, header, &g, &needed);
            if (status == KVC_OK) {
                CHECK(kvc_gguf_header_bytes(g) <= header);
                kvc_gguf_free(g);
            } else {
                CHECK(g == NULL && status >= KVC_E_GGUF_MAGIC && status <= KVC_E_GGUF_TOO_LARGE);
                CHECK(status != KVC_E_GGUF_TRUNCATED || (needed > header && needed <= KVC_GGUF_MAX_HEADER_BYTES));
            }
            CHECK(test_fault_remove() == 0);
            free(copy);
        }
        free(b.bytes);
    }
}

/* ---- running out of memory ---- */

typedef struct parse_ctx {
    const gb_file *b;
    kvc_gguf *out;
    int explain;
} parse_ctx;

static kvc_status op_parse(void *ctx) {
    parse_ctx *p = ctx;
    if (p->explain) {
        char sentence[64];
        return kvc_gguf_explain(p->b->bytes, p->b->len, sentence, sizeof sentence);
    }
    p->out = (kvc_gguf *)p;
    const kvc_status status = kvc_gguf_parse(p->b->bytes, p->b->len, &p->out, NULL);
    return test_out_rule(status, p->out);
}

TEST(parse_should_fail_cleanly_at_every_allocation) {
    for (size_t v = 0; v < 3; v++) {
        size_t header;
        gb_file b = gb_fixture(versions[v], 32, &header);
        for (int explain = 0; explain < 2; explain++) {
            for (int persistent = 0; persistent < 2; persistent++) {
                CHECK_OK(test_fault_install());
                parse_ctx ctx = {&b, NULL, explain};
                const long failures = test_run_with_faults(op_parse, &ctx, NULL, persistent, TEST_KEEPS_NONE);
                CHECK(failures >= 1); /* the one block */
                if (!explain) check_fixture(ctx.out, versions[v], 32, header);
                kvc_gguf_free(ctx.out);
                CHECK(test_fault_remove() == 0);
            }
        }
        free(b.bytes);
    }
}

/* ---- tensor data to f32 ---- */

TEST(dequantize_should_convert_known_types_and_refuse_others) {
    const float values[3] = {1.5f, -2.0f, 0.25f};
    float out[4] = {0};
    CHECK_OK(kvc_weight_dequantize(0, (const uint8_t *)values, 1, 2, out));
    CHECK(out[0] == -2.0f && out[1] == 0.25f);
    const uint8_t half[4] = {0x00, 0x3c, 0x00, 0xc0}; /* F16 1, -2 */
    CHECK_OK(kvc_weight_dequantize(1, half, 0, 2, out));
    CHECK(out[0] == 1.0f && out[1] == -2.0f);
    /* Q8_0: an f16 scale (0.5) and 32 codes; the second block's element 1 */
    uint8_t q8[68] = {0};
    q8[1] = 0x38, q8[35] = 0x38;
    for (int i = 0; i < 32; i++) q8[2 + i] = (uint8_t)(i - 16), q8[36 + i] = (uint8_t)(i * 3);
    CHECK_OK(kvc_weight_dequantize(8, q8, 30, 4, out));
    CHECK(out[0] == 7.0f && out[1] == 7.5f && out[2] == 0.0f && out[3] == 1.5f);
    CHECK_STATUS(kvc_weight_dequantize(16, q8, 0, 1, out), KVC_E_WEIGHT_TYPE);
    CHECK_STATUS(kvc_weight_dequantize(9999, q8, 0, 1, out), KVC_E_WEIGHT_TYPE);
    CHECK_OK(kvc_weight_dequantize(8, NULL, 0, 0, NULL));
}

/* ---- the real models ---- */

/* The data directory: KVC_TEST_DATA, else ../shared/data beside the project. */
static void data_path(char *path, size_t size, const char *file) {
    const char *dir = getenv("KVC_TEST_DATA");
    snprintf(path, size, "%s/%s", dir ? dir : KVC_TEST_DATA_DIR, file);
}

/* Parses a file's header as a streaming loader would: a prefix, grown to
 * max(needed, 2 x prefix).  NULL (after saying why) when the file is absent.
 * *read receives the bytes read, *file_bytes the file's size. */
static kvc_gguf *parse_streaming(const char *file, size_t *read, size_t *file_bytes) {
    char path[1024];
    data_path(path, sizeof path, file);
    FILE *f = fopen(path, "rb");
    if (!f) {
        /* The whole case is skipped: ctest reports it so (tests/c/CMakeLists.txt). */
        printf("  SKIP case: %s is absent (set KVC_TEST_DATA to its directory)\n", path);
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    *file_bytes = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *prefix = NULL;
    size_t have = 0, want = 4096;
    kvc_gguf *g = NULL;
    for (;;) {
        if (want > *file_bytes) want = *file_bytes;
        prefix = realloc(prefix, want);
        have += fread(prefix + have, 1, want - have, f);
        size_t needed = 0;
        const kvc_status status = kvc_gguf_parse(prefix, have, &g, &needed);
        if (status != KVC_E_GGUF_TRUNCATED || have == *file_bytes) {
            if (status != KVC_OK) printf("  %s: %s\n", file, kvc_status_name(status));
            break;
        }
        want = needed > 2 * have ? needed : 2 * have;
    }
    fclose(f);
    free(prefix);
    *read = have;
    return g;
}

static int tensor_is(const kvc_gguf *g, const char *name, size_t n_dims, uint64_t d0, uint64_t d1) {
    const size_t t = kvc_gguf_find_tensor(g, name, strlen(name));
    size_t n = 0;
    uint32_t type = 99;
    uint64_t dims[KVC_GGUF_MAX_DIMS] = {0}, bytes = 0;
    if (kvc_gguf_tensor(g, t, NULL, NULL, &type, &n, dims, NULL, &bytes) != KVC_OK) return 0;
    return type == 0 && n == n_dims && dims[0] == d0 && (n_dims == 1 || dims[1] == d1) &&
           bytes == 4 * d0 * (n_dims == 1 ? 1 : d1);
}

static int count_is(const kvc_gguf *g, const char *key, uint64_t expected) {
    uint64_t x = 0;
    return kvc_gguf_uint64(g, find(g, key), 0, &x) == KVC_OK && x == expected;
}

static int token_is(const kvc_gguf *g, size_t id, const char *expected) {
    const char *s;
    size_t len;
    return kvc_gguf_string(g, find(g, "tokenizer.ggml.tokens"), id, &s, &len) == KVC_OK && string_is(s, len, expected);
}

/* A llama file's shape: dim, layers, ffn, heads, KV heads, vocabulary, with
 * the tensors those imply and the data filling the file to its end. */
static void check_llama(const kvc_gguf *g, size_t file_bytes, uint64_t dim, uint64_t layers, uint64_t ffn,
                        uint64_t heads, uint64_t kv_heads, uint64_t vocab) {
    const char *s;
    size_t len;
    CHECK_OK(kvc_gguf_string(g, find(g, "general.architecture"), 0, &s, &len));
    CHECK(string_is(s, len, "llama"));
    CHECK(count_is(g, "llama.embedding_length", dim) && count_is(g, "llama.block_count", layers));
    CHECK(count_is(g, "llama.feed_forward_length", ffn) && count_is(g, "llama.attention.head_count", heads));
    CHECK(count_is(g, "llama.attention.head_count_kv", kv_heads) && count_is(g, "llama.context_length", 512));
    CHECK(count_is(g, "tokenizer.ggml.bos_token_id", 1) && count_is(g, "tokenizer.ggml.eos_token_id", 2));
    double eps = 0;
    CHECK_OK(kvc_gguf_number(g, find(g, "llama.attention.layer_norm_rms_epsilon"), 0, &eps));
    CHECK(fabs(eps - 1e-5) < 1e-11);
    kvc_gguf_type type, item;
    size_t count;
    CHECK_OK(kvc_gguf_value(g, find(g, "tokenizer.ggml.tokens"), &type, &item, &count));
    CHECK(type == KVC_GGUF_ARRAY && item == KVC_GGUF_STRING && count == vocab);
    CHECK_OK(kvc_gguf_value(g, find(g, "tokenizer.ggml.scores"), &type, &item, &count));
    CHECK(item == KVC_GGUF_FLOAT32 && count == vocab);
    CHECK(token_is(g, 0, "<unk>") && token_is(g, 1, "<s>") && token_is(g, 2, "</s>"));
    CHECK(token_is(g, 3, "<0x00>") && token_is(g, 3 + 0x0A, "<0x0A>") && token_is(g, 258, "<0xFF>"));
    const uint64_t head_dim = dim / heads;
    CHECK(kvc_gguf_tensor_count(g) == 9 * layers + 3);
    CHECK(tensor_is(g, "token_embd.weight", 2, dim, vocab) && tensor_is(g, "output.weight", 2, dim, vocab));
    CHECK(tensor_is(g, "output_norm.weight", 1, dim, 0));
    for (uint64_t l = 0; l < layers; l++) {
        char name[64];
        const struct {
            const char *part;
            size_t n;
            uint64_t d0, d1;
        } parts[] = {{"attn_q", 2, dim, dim}, {"attn_k", 2, dim, kv_heads * head_dim},
                     {"attn_v", 2, dim, kv_heads * head_dim}, {"attn_output", 2, dim, dim},
                     {"ffn_gate", 2, dim, ffn}, {"ffn_up", 2, dim, ffn}, {"ffn_down", 2, ffn, dim},
                     {"attn_norm", 1, dim, 0}, {"ffn_norm", 1, dim, 0}};
        for (size_t p = 0; p < sizeof parts / sizeof parts[0]; p++) {
            snprintf(name, sizeof name, "blk.%u.%s.weight", (unsigned)l, parts[p].part);
            CHECK(tensor_is(g, name, parts[p].n, parts[p].d0, parts[p].d1));
        }
    }
    CHECK(kvc_gguf_data_offset(g) == gb_align_up(kvc_gguf_header_bytes(g), 32));
    CHECK(kvc_gguf_data_offset(g) + kvc_gguf_data_bytes(g) == file_bytes);
}

TEST(stories260k_should_parse_with_its_readme_facts) {
    size_t read = 0, file_bytes = 0;
    kvc_gguf *g = parse_streaming("stories260k.gguf", &read, &file_bytes);
    if (!g) return;
    CHECK(kvc_gguf_version(g) == 1);
    CHECK(read < file_bytes / 10);
    const char *s;
    size_t len;
    CHECK_OK(kvc_gguf_string(g, find(g, "tokenizer.ggml.model"), 0, &s, &len));
    CHECK(string_is(s, len, "llama"));
    check_llama(g, file_bytes, 64, 5, 172, 8, 4, 512);
    kvc_gguf_free(g);
}

TEST(kjv_should_parse_with_its_readme_facts) {
    size_t read = 0, file_bytes = 0;
    kvc_gguf *g = parse_streaming("kjv-d512-h64.gguf", &read, &file_bytes);
    if (!g) return;
    CHECK(kvc_gguf_version(g) == 3);
    CHECK(read < 1u << 20); /* the header alone, of an 89 MB file */
    CHECK(count_is(g, "llama.vocab_size", 4096) && count_is(g, "general.alignment", 32));
    double base = 0;
    CHECK_OK(kvc_gguf_number(g, find(g, "llama.rope.freq_base"), 0, &base));
    CHECK(base == 10000);
    check_llama(g, file_bytes, 512, 6, 1536, 8, 2, 4096);
    kvc_gguf_free(g);
}

RUN_TESTS(CASE(every_value_type_and_tensor_should_read_back_in_each_version),
          CASE(null_arguments_should_be_refused),
          CASE(every_truncation_should_ask_for_more_bytes_that_make_progress),
          CASE(explain_should_cut_its_sentence_to_the_buffer),
          CASE(wrong_magic_and_versions_should_be_refused),
          CASE(counts_beyond_the_limits_or_the_bytes_should_be_refused),
          CASE(bad_metadata_should_be_refused_naming_the_key),
          CASE(bad_tensor_infos_should_be_refused_naming_the_tensor),
          CASE(random_corruptions_should_parse_or_be_refused_cleanly),
          CASE(parse_should_fail_cleanly_at_every_allocation),
          CASE(dequantize_should_convert_known_types_and_refuse_others),
          CASE(stories260k_should_parse_with_its_readme_facts),
          CASE(kjv_should_parse_with_its_readme_facts))
