/*
 * fuzz_snapshot.c -- libFuzzer harness: arbitrary bytes as a layer snapshot
 * and as a model snapshot.
 *
 * Each input is tried twice: as it is, and with its checksums recomputed
 * (the model's and each framed layer's inside it), so that mutations get
 * past the CRC to the checks behind it (counts, geometry, positions, the
 * alive map, codes, scales, fields).
 *
 * A refused snapshot must come back with a snapshot error (or
 * KVC_E_NOMEM) and nothing built.  An accepted one must serialize back to
 * exactly the same bytes, clone to the same bytes, hold memory_bytes by the
 * formula of kvcache.h, attend every head without trouble, take a draft
 * position in a verify and reject it back to the same bytes, and free
 * cleanly (LeakSanitizer checks that nothing leaked, refused or not).
 * The same bytes read by a kvc_model_reader, in pieces of a size the input
 * picks, are accepted exactly when kvc_model_deserialize accepts them, and
 * make a model that serializes to the same bytes.
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kvcache.h"

static int snapshot_error(kvc_status status) {
    return (status >= KVC_E_SNAPSHOT_MAGIC && status <= KVC_E_SNAPSHOT_TOO_LARGE) ||
           status == KVC_E_NOMEM;
}

/* The layer serializes to `bytes` (size of them). */
static void check_serializes_to(const kvc_layer *layer, const uint8_t *bytes, size_t size) {
    size_t again_size;
    uint8_t *again = check_serialize(layer, &again_size);
    FUZZ_REQUIRE(again_size == size && memcmp(again, bytes, size) == 0);
    free(again);
}

/* begin_verify, one draft position (zeros: a step of a linear, conv, delta
 * or Mamba-2 state, a row of a layer of rows, both for a layer of both),
 * accept(0): the layer is back to `bytes`. */
static void check_draft_rejected(kvc_layer *layer, const uint8_t *bytes, size_t size) {
    FUZZ_REQUIRE(kvc_layer_begin_verify(layer) == KVC_OK);
    const kvc_kind kind = kvc_layer_kind(layer);
    if (kvc_layer_state_len(layer)) {
        const size_t C = kvc_layer_channels(layer), K = kvc_layer_conv_kernel(layer);
        const size_t H = kvc_layer_value_heads(layer), dv = kvc_layer_value_dim(layer);
        float *x = fuzz_buffer(C * sizeof(float)), *w = fuzz_buffer(C * K * sizeof(float));
        float *gates = fuzz_buffer((H ? H : 1) * sizeof(float));
        float *out = fuzz_buffer((C > H * dv ? C : H * dv) * sizeof(float));
        const kvc_status status = kind == KVC_KIND_CONV    ? kvc_layer_conv_n(layer, 1, x, w, out)
                                  : kind == KVC_KIND_DELTA ? kvc_layer_delta_n(layer, 1, x, w, gates, gates, 1e-6f, out)
                                                           : kvc_layer_mamba2_n(layer, 1, x, w, NULL, gates, gates, gates, gates, out);
        FUZZ_REQUIRE(status == KVC_OK || status == KVC_E_TOO_LONG || status == KVC_E_NOMEM);
        free(x);
        free(w);
        free(gates);
        free(out);
    } else if (kind == KVC_KIND_LINEAR) {
        const size_t H = kvc_layer_num_heads(layer), F = kvc_layer_num_features(layer);
        const size_t dv = kvc_layer_value_dim(layer);
        float *features = fuzz_buffer(H * F * sizeof(float)), *v = fuzz_buffer(H * dv * sizeof(float));
        float *out = fuzz_buffer(H * dv * sizeof(float));
        const kvc_status status = kvc_layer_linear_step(layer, NULL, features, features, v, out);
        FUZZ_REQUIRE(status == KVC_OK || status == KVC_E_TOO_LONG);
        free(features);
        free(v);
        free(out);
    }
    if (kvc_layer_num_kv_heads(layer)) {
        const size_t row = kvc_layer_num_kv_heads(layer) * kvc_layer_head_dim(layer);
        float *zeros = fuzz_buffer(row * sizeof(float));
        const kvc_status status = kvc_layer_append(layer, zeros, zeros, NULL);
        FUZZ_REQUIRE(status == KVC_OK || status == KVC_E_TOO_LONG);
        free(zeros);
    }
    FUZZ_REQUIRE(kvc_layer_accept(layer, 0) == KVC_OK);
    check_serializes_to(layer, bytes, size);
}

/* The format version this library writes (docs/snapshot-format.md), and a
 * snapshot's.  An older one restores, and serializes as the current one. */
#define SNAPSHOT_VERSION 2u

static uint32_t version_of(const uint8_t *bytes) {
    return (uint32_t)bytes[4] | (uint32_t)bytes[5] << 8 | (uint32_t)bytes[6] << 16 | (uint32_t)bytes[7] << 24;
}

/* Everything a restored layer must stand; `bytes` its snapshot alone
 * (NULL for a layer of a model: its bytes are inside the model's; and for
 * an older version, which serializes as the current one). */
static void check_restored_layer(kvc_layer *layer, const uint8_t *bytes, size_t size) {
    if (bytes && version_of(bytes) != SNAPSHOT_VERSION) bytes = NULL;
    check_memory_formula(layer);
    FUZZ_REQUIRE(kvc_layer_capacity_bytes(layer) >= kvc_layer_memory_bytes(layer));
    if (kvc_layer_kind(layer) == KVC_KIND_FULL) check_attend_every_head(layer, NULL);
    size_t own_size;
    uint8_t *own = NULL;
    if (!bytes) bytes = own = check_serialize(layer, &own_size), size = own_size;
    else check_serializes_to(layer, bytes, size);
    kvc_layer *copy;
    FUZZ_REQUIRE(kvc_layer_clone(layer, &copy) == KVC_OK);
    check_serializes_to(copy, bytes, size);
    kvc_layer_free(copy);
    check_draft_rejected(layer, bytes, size);
    free(own);
}

/* ---- checksums: the snapshot format's CRC-32 (IEEE 802.3, reflected, as
 * zlib's), which the library keeps to itself ---- */

static uint32_t crc32_ieee(const uint8_t *data, size_t n) {
    uint32_t crc = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        crc ^= data[i];
        for (int k = 0; k < 8; k++) crc = (crc & 1) ? 0xEDB88320u ^ (crc >> 1) : crc >> 1;
    }
    return crc ^ 0xFFFFFFFFu;
}

static uint64_t read_le(const uint8_t *at, int bytes) {
    uint64_t x = 0;
    for (int b = bytes - 1; b >= 0; b--) x = x << 8 | at[b];
    return x;
}

/* Rewrites the CRC that ends a frame of `size` bytes (magic, version,
 * payload length, payload, CRC) to match the bytes before it. */
static void fix_frame(uint8_t *frame, size_t size) {
    if (size < 20) return;
    const uint32_t crc = crc32_ieee(frame, size - 4);
    for (int b = 0; b < 4; b++) frame[size - 4 + b] = (uint8_t)(crc >> (8 * b));
}

/* Recomputes every checksum of a snapshot: a model's framed layers first
 * (as far as their lengths lie inside), then the outer frame. */
static void fix_checksums(uint8_t *bytes, size_t size) {
    if (size >= 20 && memcmp(bytes, "KVCM", 4) == 0) {
        size_t at = 20; /* header, then the u32 layer count */
        const size_t count = (size_t)read_le(bytes + 16, 4);
        for (size_t i = 0; i < count && at + 8 <= size; i++) {
            const uint64_t layer_size = read_le(bytes + at, 8);
            at += 8;
            if (layer_size > size - at) break;
            fix_frame(bytes + at, (size_t)layer_size);
            at += (size_t)layer_size;
        }
    }
    fix_frame(bytes, size);
}

/* ---- one try ---- */

/* The model a kvc_model_reader makes of `bytes`, fed `piece` bytes at a
 * time; NULL when it refuses them (with a snapshot error). */
static kvc_model *read_in_pieces(const uint8_t *bytes, size_t size, size_t piece) {
    kvc_model_reader *reader = NULL;
    kvc_status status = kvc_model_reader_create(size, &reader);
    size_t at = 0;
    while (status == KVC_OK) {
        uint8_t *dst;
        size_t room;
        status = kvc_model_reader_next(reader, &dst, &room);
        if (status != KVC_OK || room == 0) break;
        const size_t n = room < piece ? room : piece;
        FUZZ_REQUIRE(n <= size - at); /* the reader never asks past the end it was told */
        memcpy(dst, bytes + at, n);
        at += n;
        status = kvc_model_reader_wrote(reader, n);
    }
    kvc_model *model = (kvc_model *)bytes;
    if (status == KVC_OK) status = kvc_model_reader_finish(reader, &model);
    else model = NULL;
    kvc_model_reader_free(reader);
    FUZZ_REQUIRE(status == KVC_OK ? model != NULL && at == size : snapshot_error(status) && model == NULL);
    return model;
}

static void try_snapshot(const uint8_t *bytes, size_t size) {
    fuzz_context("kvc_layer_deserialize of %zu bytes", size);
    kvc_layer *layer = (kvc_layer *)bytes;
    kvc_status status = kvc_layer_deserialize(bytes, size, &layer);
    if (status == KVC_OK) {
        check_restored_layer(layer, bytes, size);
        kvc_layer_free(layer);
    } else {
        FUZZ_REQUIRE(snapshot_error(status) && layer == NULL);
    }

    fuzz_context("kvc_model_deserialize of %zu bytes", size);
    kvc_model *model = (kvc_model *)bytes;
    status = kvc_model_deserialize(bytes, size, &model);
    fuzz_context("kvc_model_reader of %zu bytes", size);
    kvc_model *streamed = read_in_pieces(bytes, size, size ? 1 + bytes[size - 1] % 64 : 1);
    FUZZ_REQUIRE((streamed != NULL) == (status == KVC_OK));
    if (streamed) {
        size_t streamed_size, whole_size;
        uint8_t *a = check_serialize_model(streamed, &streamed_size), *b = check_serialize_model(model, &whole_size);
        FUZZ_REQUIRE(streamed_size == whole_size && memcmp(a, b, whole_size) == 0);
        free(a);
        free(b);
        kvc_model_free(streamed);
    }
    if (status == KVC_OK) {
        /* An older version is held to its own serialization from here. */
        size_t again_size, own_size;
        uint8_t *own = version_of(bytes) == SNAPSHOT_VERSION ? NULL : check_serialize_model(model, &own_size);
        const uint8_t *expected = own ? own : bytes;
        const size_t expected_size = own ? own_size : size;
        uint8_t *again = check_serialize_model(model, &again_size);
        FUZZ_REQUIRE(again_size == expected_size && memcmp(again, expected, expected_size) == 0);
        free(again);
        kvc_model *copy;
        FUZZ_REQUIRE(kvc_model_clone(model, &copy) == KVC_OK);
        again = check_serialize_model(copy, &again_size);
        FUZZ_REQUIRE(again_size == expected_size && memcmp(again, expected, expected_size) == 0);
        free(again);
        free(own);
        kvc_model_free(copy);
        for (size_t i = 0; i < kvc_model_num_layers(model); i++)
            check_restored_layer(kvc_model_layer(model, i), NULL, 0);
        kvc_model_free(model);
    } else {
        FUZZ_REQUIRE(snapshot_error(status) && model == NULL);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* The bytes are copied to a block of their own size: ASan then sees a
     * read past the end. */
    uint8_t *bytes = fuzz_buffer(size);
    if (size) memcpy(bytes, data, size);
    try_snapshot(bytes, size);
    fix_checksums(bytes, size);
    if (size && memcmp(bytes, data, size) != 0) try_snapshot(bytes, size);
    free(bytes);
    return 0;
}
