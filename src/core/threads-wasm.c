/*
 * threads-wasm.c -- the pool's sleep and wake in WebAssembly: the memory's
 * own wait and notify.  The threads themselves are workers that the JS
 * loader starts, each running kvc_pool_worker_run in its instance of the
 * module (src/wasm/workers.c); C cannot start them.
 */
#include "internal.h"

void kvc_thread_wait(_Atomic uint32_t *word, uint32_t expected) {
    /* Only pool threads sleep, and only workers are pool threads: a
     * browser's main thread, which may not wait, never gets here. */
    __builtin_wasm_memory_atomic_wait32((int *)word, (int)expected, -1);
}

void kvc_thread_wake_all(_Atomic uint32_t *word) {
    /* On a memory that is not shared (no workers) this wakes nobody. */
    __builtin_wasm_memory_atomic_notify((int *)word, UINT32_MAX);
}

kvc_status kvc_set_threads(size_t count) {
    return count == 1 ? KVC_OK : KVC_E_THREADS;
}

size_t kvc_thread_count(void) {
    return kvc_pool_running_threads();
}
