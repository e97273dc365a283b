/* alloc.c -- every allocation of the library goes through one hook, so that a
 * test (or an embedder) can make any of them fail. */
#include <stdint.h>
#include <stdlib.h>

#include "internal.h"

#if defined(__EMSCRIPTEN__)
#include <malloc.h>

/* Emscripten's malloc (dlmalloc) grows the heap only by less than 2 GiB a
 * call (its HALF_MAX_SIZE_T bound on sbrk).  A block its free end (the top)
 * cannot hold grows the heap by what the top lacks -- until any growth has
 * been refused (a request lacking 2 GiB or more is refused so, and sets
 * it): from then on, for the module's life, by the whole block.  It never
 * gives memory back (MORECORE_CANNOT_TRIM), and wasm's sbrk is contiguous,
 * so what grows joins the top.  A fresh heap would refuse a 1B model's F16
 * weights (2.5 GB) for good, and after one refused growth even a block of
 * a GiB more than the top.  So a block of a GiB or more is asked for
 * directly only when that growth stays below 2 GiB in either way of
 * growing; otherwise blocks freed at once grow the top first, each asking
 * for the top plus at most a GiB of what it lacks (which grows it by that
 * much, or by all of the ask when it is below 2 GiB) or, once that is
 * refused, for what the top lacks or just past the top, whichever is
 * larger (which grows it by all of that), until the top holds the block.
 * A block freed and not adjoining the top (in the bins) serves the first
 * ask it fits. */
#define KVC_HEAP_STEP ((size_t)1 << 30)
#define KVC_HEAP_MAX_GROWTH (((size_t)1 << 31) - ((size_t)1 << 20)) /* under 2 GiB with dlmalloc's padding */
#define KVC_HEAP_STEPS 8 /* a 4 GiB heap grows in at most five steps either way */

static size_t heap_top(void) {
    return (size_t)mallinfo().keepcost;
}

/* Asks for bytes and gives them back at once: the heap grows and the top
 * gains what grew.  0 when refused. */
static int heap_grow(size_t ask) {
    /* volatile: a malloc freed unused is one the compiler may drop. */
    void *volatile grown = malloc(ask);
    if (!grown) return 0;
    free(grown);
    return 1;
}

static void *heap_malloc(size_t bytes) {
    if (bytes < KVC_HEAP_STEP || (bytes <= heap_top() + KVC_HEAP_STEP && bytes < KVC_HEAP_MAX_GROWTH)) return malloc(bytes);
    for (int step = 0; step < KVC_HEAP_STEPS; step++) {
        const size_t top = heap_top();
        if (top >= bytes) break;
        const size_t lacking = bytes - top;
        if (heap_grow(top + (lacking < KVC_HEAP_STEP ? lacking : KVC_HEAP_STEP))) continue;
        const size_t whole = lacking > top ? lacking : top + 1;
        if (whole >= KVC_HEAP_MAX_GROWTH || !heap_grow(whole)) return NULL;
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
