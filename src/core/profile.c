/*
 * profile.c -- where the calling thread's time goes, operation by
 * operation, while an app asks (kvc_profile_start): a clock read where each
 * operation of a forward pass ends (a mark), the time since the previous
 * one added to the operation's total.  Off (the default) a mark pays one
 * load and a branch.
 *
 * Only the calling thread records: pool threads run the tasks of the
 * operation the caller is timing, and the caller's wait for them is an
 * operation of its own (KVC_PROFILE_POOL_WAIT).
 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime under -std=c11 */
#include <time.h>

#include "internal.h"

static double *totals; /* ms per operation, [KVC_PROFILE_OPS]; NULL: off */
static double marked;  /* clock_less_waits() at the previous mark */

/* Milliseconds from an arbitrary origin: natively the monotonic clock, in
 * WebAssembly WASI's, which the loader answers from performance.now
 * (js/runtime/imports.js).  (Emscripten's standalone emscripten_get_now
 * overflows a 32-bit clock_t two seconds into a process.) */
static double now_ms(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec * 1e3 + (double)now.tv_nsec * 1e-6;
}

/* The clock less the pool's waits so far: an operation that waited on the
 * pool since the previous mark is charged the rest. */
static double clock_less_waits(void) {
    return now_ms() - totals[KVC_PROFILE_POOL_WAIT];
}

kvc_status kvc_profile_start(double *ms, size_t count) {
    if (!ms) return KVC_E_NULL_POINTER;
    if (count != KVC_PROFILE_OPS) return KVC_E_LENGTH;
    for (size_t i = 0; i < count; i++) ms[i] = 0.0;
    totals = ms;
    marked = clock_less_waits();
    return KVC_OK;
}

void kvc_profile_stop(void) {
    totals = NULL;
}

void kvc_profile_pass_begin(void) {
    if (totals) marked = clock_less_waits();
}

void kvc_profile_mark(kvc_profile_op op) {
    if (!totals) return;
    const double now = clock_less_waits();
    totals[op] += now - marked;
    marked = now;
}

double kvc_profile_wait_begin(void) {
    return totals ? now_ms() : 0.0;
}

void kvc_profile_wait_end(double began) {
    if (totals) totals[KVC_PROFILE_POOL_WAIT] += now_ms() - began;
}
