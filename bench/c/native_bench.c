/*
 * native_bench.c -- the library's own C, built natively (-O3 -march=native),
 * timing one layer's decode attention (kvc_layer_attend_heads) as the wasm
 * benchmark does.  Prints one JSON line per shape and mode:
 *   kvc_bench_native REPS d:n [d:n ...]
 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "kvcache.h"

#define NUM_KV_HEADS 8
#define NUM_Q_HEADS 32

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static float uniform(uint64_t *state) {
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((*state >> 40) & 0xffffff) / 8388608.0f - 1.0f;
}

static int run(int reps, size_t d, size_t n, kvc_mode mode) {
    static const char *names[] = {"f32", "q8", "q8k", "q8v"};
    kvc_layer *layer;
    if (kvc_layer_create(NUM_KV_HEADS, d, mode, &layer) != KVC_OK) return 1;
    const size_t chunk = 256, width = NUM_KV_HEADS * d;
    float *k = malloc(chunk * width * sizeof(float)), *v = malloc(chunk * width * sizeof(float));
    float *q = malloc(NUM_Q_HEADS * d * sizeof(float)), *out = malloc(NUM_Q_HEADS * d * sizeof(float));
    if (!k || !v || !q || !out) return 1;
    uint64_t state = 7;
    for (size_t at = 0; at < n; at += chunk) {
        const size_t m = n - at < chunk ? n - at : chunk;
        for (size_t i = 0; i < m * width; i++) {
            k[i] = uniform(&state);
            v[i] = uniform(&state);
        }
        if (kvc_layer_append_n(layer, m, k, v, NULL) != KVC_OK) return 1;
    }
    for (size_t i = 0; i < NUM_Q_HEADS * d; i++) q[i] = uniform(&state);
    double best = 1e30;
    for (int r = 0; r < reps + 1; r++) {
        const double t0 = now_ms();
        if (kvc_layer_attend_heads(layer, q, NUM_Q_HEADS, out, NULL) != KVC_OK) return 1;
        const double t = now_ms() - t0;
        if (r > 0 && t < best) best = t; /* the first run warms the caches */
    }
    printf("{\"d\":%zu,\"n\":%zu,\"mode\":\"%s\",\"ms\":%.4f,\"bytes\":%zu}\n", d, n, names[mode], best,
           kvc_layer_memory_bytes(layer));
    kvc_layer_free(layer);
    free(k), free(v), free(q), free(out);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: kvc_bench_native REPS d:n [d:n ...]\n");
        return 2;
    }
    const int reps = atoi(argv[1]);
    for (int i = 2; i < argc; i++) {
        size_t d, n;
        if (sscanf(argv[i], "%zu:%zu", &d, &n) != 2) return 2;
        for (int mode = KVC_MODE_F32; mode <= KVC_MODE_Q8V; mode++) {
            if (run(reps, d, n, (kvc_mode)mode) != 0) {
                fprintf(stderr, "kvc_bench_native: failed at d=%zu n=%zu\n", d, n);
                return 1;
            }
            fflush(stdout);
        }
    }
    return 0;
}
