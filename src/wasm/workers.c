/*
 * workers.c -- the thread pool's face to the JS loader (js/runtime/threads.js).
 *
 * The loader creates the module's memory shared, starts workers that each
 * instantiate the module over it, and gives each a stack of its own
 * (allocated here, by the calling thread, and set with the module's
 * stackRestore).  A worker then calls kvc_wasm_worker_run, which returns
 * only when the pool closes; a worker whose call traps reports it with
 * kvc_wasm_worker_failed, and the task it ran is done by the caller.
 */
#include <emscripten.h>

#include "../core/internal.h"

/* Bytes of stack per worker: the kernels use little (buffers come from the
 * caller's block), so this is ample. */
#define KVC_WASM_WORKER_STACK (64 * 1024)

EMSCRIPTEN_KEEPALIVE size_t kvc_wasm_worker_stack_bytes(void) {
    return KVC_WASM_WORKER_STACK;
}

/* Opens `workers` pool slots; KVC_E_THREADS when too many or already open. */
EMSCRIPTEN_KEEPALIVE kvc_status kvc_wasm_pool_open(size_t workers) {
    return kvc_pool_open(workers);
}

/* Makes every worker return from kvc_wasm_worker_run. */
EMSCRIPTEN_KEEPALIVE void kvc_wasm_pool_close(void) {
    kvc_pool_close();
}

/* A worker takes its slot (index 1 .. workers) before it reports ready,
 * then runs, on its own stack, until the pool closes. */
EMSCRIPTEN_KEEPALIVE kvc_status kvc_wasm_worker_join(size_t index) {
    return kvc_pool_worker_join(index);
}

EMSCRIPTEN_KEEPALIVE void kvc_wasm_worker_run(size_t index) {
    kvc_pool_worker_run(index);
}

EMSCRIPTEN_KEEPALIVE void kvc_wasm_worker_failed(size_t index) {
    kvc_pool_worker_failed(index);
}

/* Calls use at most `threads` threads (>= 1) from now on; returns the
 * limit replaced. */
EMSCRIPTEN_KEEPALIVE size_t kvc_wasm_thread_limit(size_t threads) {
    return kvc_pool_set_limit(threads);
}

/* Test hooks: worker `index` traps at its next task; jobs below `work`
 * multiply-adds run inline (0: every job goes to the pool), returning the
 * value replaced. */
EMSCRIPTEN_KEEPALIVE void kvc_wasm_inject_fault(size_t index) {
    kvc_pool_inject_fault(index);
}

EMSCRIPTEN_KEEPALIVE size_t kvc_wasm_pool_min_work(size_t work) {
    return kvc_pool_set_min_work(work);
}
