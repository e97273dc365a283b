/* alloc.c -- every allocation of the library goes through one hook, so that a
 * test (or an embedder) can make any of them fail. */
#include <stdint.h>
#include <stdlib.h>

#include "internal.h"

static void *default_malloc(void *user, size_t bytes) {
    (void)user;
    return malloc(bytes);
}

static void *default_realloc(void *user, void *block, size_t bytes) {
    (void)user;
    return realloc(block, bytes);
}

static void default_free(void *user, void *block) {
    (void)user;
    free(block);
}

static kvc_allocator allocator = {default_malloc, default_realloc, default_free, NULL};

kvc_status kvc_set_allocator(const kvc_allocator *hook) {
    if (hook == NULL) {
        allocator = (kvc_allocator){default_malloc, default_realloc, default_free, NULL};
        return KVC_OK;
    }
    if (!hook->malloc_fn || !hook->realloc_fn || !hook->free_fn) return KVC_E_NULL_POINTER;
    allocator = *hook;
    return KVC_OK;
}

void *kvc_malloc(size_t bytes) {
    return allocator.malloc_fn(allocator.user, bytes);
}

void kvc_free(void *block) {
    if (block) allocator.free_fn(allocator.user, block);
}

void *kvc_realloc_array(void *block, size_t count, size_t elem_bytes) {
    if (count == 0 || elem_bytes == 0 || count > SIZE_MAX / elem_bytes) return NULL;
    if (block == NULL) return allocator.malloc_fn(allocator.user, count * elem_bytes);
    return allocator.realloc_fn(allocator.user, block, count * elem_bytes);
}

size_t kvc_grown_capacity(size_t cap, size_t needed, size_t limit) {
    if (needed <= cap) return 0;
    /* Half as much again keeps appends amortised O(1) at 1.5x the space. */
    size_t grown = cap < 8 ? 8 : cap + cap / 2;
    if (grown < cap) grown = needed; /* overflow */
    if (grown > limit) grown = limit;
    return grown < needed ? needed : grown;
}
