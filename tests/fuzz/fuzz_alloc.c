/* fuzz_alloc.c -- a fault-injecting allocator hook for the harnesses. */
#include "fuzz_alloc.h"

#include <stdlib.h>

#include "kvcache.h"

static struct {
    unsigned fail_at, calls;
    int persistent, failed;
} fault;

static int fail_now(void) {
    if (fault.fail_at == 0) return 0;
    fault.calls++;
    const int fail = fault.persistent ? fault.calls >= fault.fail_at : fault.calls == fault.fail_at;
    fault.failed |= fail;
    return fail;
}

static void *hook_malloc(void *user, size_t bytes) {
    (void)user;
    return fail_now() ? NULL : malloc(bytes);
}

static void *hook_realloc(void *user, void *block, size_t bytes) {
    (void)user;
    return fail_now() ? NULL : realloc(block, bytes);
}

static void hook_free(void *user, void *block) {
    (void)user;
    free(block);
}

void fuzz_alloc_install(void) {
    static const kvc_allocator hook = {hook_malloc, hook_realloc, hook_free, NULL};
    if (kvc_set_allocator(&hook) != KVC_OK) abort();
}

void fuzz_alloc_arm(unsigned nth, int persistent) {
    fault.fail_at = nth;
    fault.calls = 0;
    fault.persistent = persistent;
    fault.failed = 0;
}

int fuzz_alloc_disarm(void) {
    const int failed = fault.failed;
    fault.fail_at = 0;
    fault.failed = 0;
    return failed;
}
