/*
 * oracle.c -- runs an operation script on the native build so that the JS
 * tests can hold the wasm module against it (tests/js/native-agreement.test.mjs).
 *
 * stdin, little-endian: u32 H, d, mode, then operations, each one byte:
 *   'A' u8 alive[H] f32 k[H*d] f32 v[H*d]   append one position
 *   'T' u32 n                               truncate_last(n)
 *   'Q' u32 head f32 q[d]                   attend -> writes f32 out[d], u32 rows, f32 probs[rows]
 *   'D'                                     dump -> writes u64 memory_bytes, u32 seq_len, u32 frozen,
 *                                           then per head: u32 rows, f32 keys[rows*d], f32 values[rows*d]
 *   'I' u32 n f32 probs[n]                  accumulate_imp of the first seq_len (n >= seq_len)
 *   'E' u32 budget u32 sinks u32 recent     evict
 *   'S'                                     snapshot -> writes u64 size, then the bytes
 * stdout: what Q and D write, in order.  Exit status 0, or 1 on a bad script
 * or a status other than KVC_OK.
 */
#include <stdio.h>
#include <stdlib.h>

#include "kvcache.h"

static int read_exact(void *dst, size_t bytes) {
    return fread(dst, 1, bytes, stdin) == bytes;
}

static int read_u32(uint32_t *x) {
    return read_exact(x, sizeof *x);
}

static void write_all(const void *src, size_t bytes) {
    fwrite(src, 1, bytes, stdout);
}

static void write_u32(uint32_t x) {
    write_all(&x, sizeof x);
}

static int dump(const kvc_layer *layer, float *rows) {
    uint64_t bytes = kvc_layer_memory_bytes(layer);
    write_all(&bytes, sizeof bytes);
    write_u32((uint32_t)kvc_layer_seq_len(layer));
    write_u32((uint32_t)kvc_layer_field_frozen(layer));
    const size_t d = kvc_layer_head_dim(layer);
    for (size_t h = 0; h < kvc_layer_num_kv_heads(layer); h++) {
        const size_t len = kvc_layer_head_len(layer, h);
        write_u32((uint32_t)len);
        if (kvc_layer_head_keys(layer, h, rows, len * d) != KVC_OK) return 0;
        write_all(rows, len * d * sizeof(float));
        if (kvc_layer_head_values(layer, h, rows, len * d) != KVC_OK) return 0;
        write_all(rows, len * d * sizeof(float));
    }
    return 1;
}

int main(void) {
    uint32_t H, d, mode;
    if (!read_u32(&H) || !read_u32(&d) || !read_u32(&mode)) return 1;
    kvc_layer *layer;
    if (kvc_layer_create(H, d, (kvc_mode)mode, &layer) != KVC_OK) return 1;
    size_t cap = 1 << 14; /* positions a script may hold */
    float *k = malloc(H * d * sizeof(float)), *v = malloc(H * d * sizeof(float));
    float *q = malloc(d * sizeof(float)), *out = malloc(d * sizeof(float));
    float *scratch = malloc(cap * d * sizeof(float));
    uint8_t *alive = malloc(H);
    int ok = k && v && q && out && scratch && alive;
    int op;
    while (ok && (op = getchar()) != EOF) {
        uint32_t n;
        if (op == 'A') {
            ok = read_exact(alive, H) && read_exact(k, H * d * sizeof(float)) &&
                 read_exact(v, H * d * sizeof(float)) &&
                 kvc_layer_append(layer, k, v, alive) == KVC_OK &&
                 kvc_layer_seq_len(layer) <= cap;
        } else if (op == 'T') {
            ok = read_u32(&n) && kvc_layer_truncate_last(layer, n) == KVC_OK;
        } else if (op == 'Q') {
            ok = read_u32(&n) && read_exact(q, d * sizeof(float)) &&
                 kvc_layer_attend(layer, q, n, out, scratch) == KVC_OK;
            if (ok) {
                const uint32_t rows = (uint32_t)kvc_layer_head_len(layer, n);
                write_all(out, d * sizeof(float));
                write_u32(rows);
                write_all(scratch, rows * sizeof(float));
            }
        } else if (op == 'D') {
            ok = dump(layer, scratch);
        } else if (op == 'I') {
            const size_t len = kvc_layer_seq_len(layer);
            ok = read_u32(&n) && n >= len && n <= cap && read_exact(scratch, n * sizeof(float)) &&
                 kvc_layer_accumulate_imp(layer, scratch, len) == KVC_OK;
        } else if (op == 'E') {
            uint32_t sinks, recent;
            ok = read_u32(&n) && read_u32(&sinks) && read_u32(&recent) &&
                 kvc_layer_evict(layer, n, sinks, recent) == KVC_OK;
        } else if (op == 'S') {
            const uint64_t size = kvc_layer_snapshot_size(layer);
            uint8_t *bytes = malloc(size ? size : 1);
            ok = bytes && kvc_layer_serialize(layer, bytes, size) == KVC_OK;
            if (ok) {
                write_all(&size, sizeof size);
                write_all(bytes, size);
            }
            free(bytes);
        } else {
            ok = 0;
        }
    }
    kvc_layer_free(layer);
    free(k), free(v), free(q), free(out), free(scratch), free(alive);
    return ok ? 0 : 1;
}
