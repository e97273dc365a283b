/*
 * probe.c -- the memory floor the benchmark compares attention with: how
 * fast this module can stream bytes it does nothing else with, on one
 * thread and on the pool's threads.
 */
#include <emscripten.h>
#include <stddef.h>
#include <wasm_simd128.h>

#include "../core/internal.h"

/* Reads count floats (a multiple of 16) once, with four independent sums so
 * that the loads, not the adds, set the pace; returns a checksum so that
 * nothing is optimised away. */
EMSCRIPTEN_KEEPALIVE float kvc_wasm_read_probe(const float *data, size_t count) {
    v128_t a = wasm_f32x4_const_splat(0.0f), b = a, c = a, d = a;
    for (size_t i = 0; i + 16 <= count; i += 16) {
        a = wasm_f32x4_add(a, wasm_v128_load(data + i));
        b = wasm_f32x4_add(b, wasm_v128_load(data + i + 4));
        c = wasm_f32x4_add(c, wasm_v128_load(data + i + 8));
        d = wasm_f32x4_add(d, wasm_v128_load(data + i + 12));
    }
    const v128_t sum = wasm_f32x4_add(wasm_f32x4_add(a, b), wasm_f32x4_add(c, d));
    return wasm_f32x4_extract_lane(sum, 0) + wasm_f32x4_extract_lane(sum, 3);
}

/* The same read split into 64 slices run as one job on the pool (every
 * thread it has), as a step of attention is: returns the sum of the slices'
 * checksums. */
#define KVC_PROBE_SLICES 64

typedef struct probe_job {
    const float *data;
    size_t slice;                      /* floats per slice, a multiple of 16 */
    float sums[KVC_PROBE_SLICES];
} probe_job;

static void probe_task(void *context, size_t task, size_t thread) {
    (void)thread;
    probe_job *job = context;
    job->sums[task] = kvc_wasm_read_probe(job->data + task * job->slice, job->slice);
}

EMSCRIPTEN_KEEPALIVE float kvc_wasm_read_probe_threads(const float *data, size_t count) {
    probe_job job = {data, count / KVC_PROBE_SLICES / 16 * 16, {0}};
    kvc_pool_run(probe_task, &job, KVC_PROBE_SLICES, kvc_pool_threads(), SIZE_MAX);
    float sum = 0.0f;
    for (size_t i = 0; i < KVC_PROBE_SLICES; i++) sum += job.sums[i];
    return sum;
}
