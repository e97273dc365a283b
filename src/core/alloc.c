/* alloc.c -- every allocation of the library goes through one hook, so that a
 * test (or an embedder) can make any of them fail. */
#include <stdint.h>
#include <stdlib.h>

#include "internal.h"

#if defined(__EMSCRIPTEN__)
#include <malloc.h>

/* Emscripten's malloc (dlmalloc) grows the heap by less than 2 GiB a call
 * (its HALF_MAX_SIZE_T bound on sbrk), and once a growth fails it grows by
 * a whole block each time, never again by what its free end (the top)
 * lacks: a fresh heap refuses a block of 2 GiB or more -- a 1B model's F16
 * weights -- for good.  It never gives memory back (MORECORE_CANNOT_TRIM),
 * so a block of a GiB or more first grows the top, a GiB at a time, by
 * blocks freed at once (they join the top), until less than a GiB is
 * missing; the block then takes the top and what is missing. */
#define KVC_HEAP_STEP ((size_t)1 << 30)

static void *heap_malloc(size_t bytes) {
    for (int step = 0; bytes >= KVC_HEAP_STEP && step < 4; step++) {
        const size_t top = (size_t)mallinfo().keepcost;
        if (bytes - KVC_HEAP_STEP < top) break;
        /* volatile: a malloc freed unused is one the compiler may drop. */
        void *volatile grown = malloc(top + KVC_HEAP_STEP);
        if (!grown) return NULL;
        free(grown);
    }
    return malloc(bytes);
}
#else
#define heap_malloc malloc
#endif

static void *default_malloc(void *user, size_t bytes) {
    (void)user;
    return heap_malloc(bytes);
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
