/*
 * pages.c -- sequences of fixed-size elements in reference-counted pages,
 * shared between forks of a cache (vLLM's PagedAttention blocks, for one
 * device).
 *
 * A kvc_paged holds its elements in pages of 2^shift each: element i lies in
 * page i >> shift.  A fork takes a reference to every page that holds some
 * of its elements and copies nothing; a page is copied the first time a
 * holder writes into it while another holds it too (copy on write), and
 * freed when its last holder lets it go.  Only the holder's own elements of
 * the page are copied.  Since a copy holds the very bytes it replaces, a
 * failed allocation midway through making pages writable leaves every
 * element as it was: callers make room first and change nothing until it
 * has all succeeded.
 *
 * Invariant: every page at an index at or past the one holding element len
 * (spare pages, kept for the next appends as a buffer keeps its capacity)
 * is the holder's alone.  So an append only ever copies the page of its
 * first element, and a fork shares exactly the pages that hold elements.
 */
#include <limits.h>
#include <stdatomic.h>
#include <string.h>

#include "internal.h"

/* In front of each page's elements, 16 bytes so that they stay aligned. */
typedef struct page_header {
    _Atomic uint32_t refs; /* holders */
    uint32_t walk;         /* kvc_paged_count_bytes: the walk that last counted it */
    uint32_t counted;      /* and the elements that walk counted */
    uint32_t reserved;
} page_header;

static _Atomic size_t live_pages;

static page_header *header_of(uint8_t *page) {
    return (page_header *)(void *)(page - sizeof(page_header));
}

static size_t page_elems(const kvc_paged *a) {
    return (size_t)1 << a->shift;
}

/* Pages that hold at least one of the elements. */
static size_t pages_in_use(const kvc_paged *a) {
    return a->len ? ((a->len - 1) >> a->shift) + 1 : 0;
}

static uint8_t *page_new(const kvc_paged *a) {
    uint8_t *block = kvc_malloc(sizeof(page_header) + page_elems(a) * a->elem_bytes);
    if (!block) return NULL;
    page_header *header = (page_header *)(void *)block;
    atomic_init(&header->refs, 1);
    header->walk = 0;
    header->counted = 0;
    header->reserved = 0;
    atomic_fetch_add_explicit(&live_pages, 1, memory_order_relaxed);
    return block + sizeof(page_header);
}

static void page_release(uint8_t *page) {
    page_header *header = header_of(page);
    if (atomic_fetch_sub_explicit(&header->refs, 1, memory_order_acq_rel) == 1) {
        atomic_fetch_sub_explicit(&live_pages, 1, memory_order_relaxed);
        kvc_free(header);
    }
}

static int page_shared(uint8_t *page) {
    return atomic_load_explicit(&header_of(page)->refs, memory_order_acquire) > 1;
}

size_t kvc_live_pages(void) {
    return atomic_load_explicit(&live_pages, memory_order_relaxed);
}

void kvc_paged_init(kvc_paged *a, size_t elem_bytes, unsigned shift) {
    memset(a, 0, sizeof *a);
    a->elem_bytes = elem_bytes;
    a->shift = shift;
}

void kvc_paged_borrow(kvc_paged *a, uint8_t **page, const void *elements, size_t len,
                      size_t elem_bytes) {
    kvc_paged_init(a, elem_bytes, sizeof(size_t) * CHAR_BIT - 1);
    *page = (uint8_t *)(uintptr_t)elements; /* read only: a borrowed array is never written */
    a->pages = page;
    a->page_count = a->page_cap = len ? 1 : 0;
    a->len = len;
}

/* The element count of ours in page p. */
static size_t ours_in(const kvc_paged *a, size_t p) {
    const size_t first = p << a->shift;
    if (a->len <= first) return 0;
    return a->len - first < page_elems(a) ? a->len - first : page_elems(a);
}

/* Page p, shared, replaced by a copy of our elements in it. */
static kvc_status unshare(kvc_paged *a, size_t p) {
    uint8_t *copy = page_new(a);
    if (!copy) return KVC_E_NOMEM;
    memcpy(copy, a->pages[p], ours_in(a, p) * a->elem_bytes);
    page_release(a->pages[p]);
    a->pages[p] = copy;
    return KVC_OK;
}

kvc_status kvc_paged_reserve(kvc_paged *a, size_t extra) {
    if (extra == 0) return KVC_OK;
    if (extra > SIZE_MAX - a->len) return KVC_E_NOMEM;
    const size_t needed = ((a->len + extra - 1) >> a->shift) + 1;
    if (needed > a->page_cap) {
        const size_t cap = kvc_grown_capacity(a->page_cap, needed, SIZE_MAX);
        uint8_t **pages = kvc_realloc_array(a->pages, cap, sizeof(uint8_t *));
        if (!pages) return KVC_E_NOMEM;
        a->pages = pages;
        a->page_cap = cap;
    }
    while (a->page_count < needed) {
        uint8_t *page = page_new(a);
        if (!page) return KVC_E_NOMEM;
        a->pages[a->page_count++] = page;
    }
    /* The page of element len, when it holds some of ours already. */
    const size_t p = a->len >> a->shift;
    if ((a->len & (page_elems(a) - 1)) && page_shared(a->pages[p])) return unshare(a, p);
    return KVC_OK;
}

kvc_status kvc_paged_make_writable(kvc_paged *a, size_t first, size_t last) {
    if (last > a->len) last = a->len;
    if (first >= last) return KVC_OK;
    for (size_t p = first >> a->shift; p <= (last - 1) >> a->shift; p++) {
        if (page_shared(a->pages[p])) {
            const kvc_status status = unshare(a, p);
            if (status != KVC_OK) return status;
        }
    }
    return KVC_OK;
}

void kvc_paged_set_len(kvc_paged *a, size_t len) {
    if (len < a->len) {
        /* Pages that no longer hold any of ours: shared ones go, our own
         * stay as spares (after the pages in use, in any order). */
        const size_t keep = len ? ((len - 1) >> a->shift) + 1 : 0, used = pages_in_use(a);
        size_t write = keep;
        for (size_t p = keep; p < a->page_count; p++) {
            if (p < used && page_shared(a->pages[p])) page_release(a->pages[p]);
            else a->pages[write++] = a->pages[p];
        }
        a->page_count = write;
    }
    a->len = len;
}

kvc_status kvc_paged_fork(kvc_paged *dst, const kvc_paged *src) {
    kvc_paged_init(dst, src->elem_bytes, src->shift);
    const size_t used = pages_in_use(src);
    if (used == 0) return KVC_OK;
    dst->pages = kvc_realloc_array(NULL, used, sizeof(uint8_t *));
    if (!dst->pages) return KVC_E_NOMEM;
    for (size_t p = 0; p < used; p++) {
        atomic_fetch_add_explicit(&header_of(src->pages[p])->refs, 1, memory_order_relaxed);
        dst->pages[p] = src->pages[p];
    }
    dst->page_count = dst->page_cap = used;
    dst->len = src->len;
    return KVC_OK;
}

void kvc_paged_free(kvc_paged *a) {
    for (size_t p = 0; p < a->page_count; p++) page_release(a->pages[p]);
    kvc_free(a->pages);
    kvc_paged_init(a, a->elem_bytes, a->shift);
}

void kvc_paged_move(kvc_paged *a, size_t write, size_t read) {
    if (write != read) memcpy(kvc_paged_at(a, write), kvc_paged_at(a, read), a->elem_bytes);
}

void kvc_paged_drop_front(kvc_paged *a, size_t pages) {
    if (pages == 0) return; /* (and a sequence that never had pages has no table) */
    for (size_t p = 0; p < pages; p++) page_release(a->pages[p]);
    memmove(a->pages, a->pages + pages, (a->page_count - pages) * sizeof(uint8_t *));
    a->page_count -= pages;
    a->len -= pages << a->shift;
}

/* Our elements in page p from element `first` on. */
static size_t ours_from(const kvc_paged *a, size_t p, size_t first) {
    const size_t page_first = p << a->shift, ours = ours_in(a, p);
    if (first <= page_first) return ours;
    const size_t skipped = first - page_first;
    return skipped < ours ? ours - skipped : 0;
}

size_t kvc_paged_shared_bytes(const kvc_paged *a, size_t first) {
    size_t elems = 0;
    for (size_t p = first >> a->shift; p < pages_in_use(a); p++) {
        if (page_shared(a->pages[p])) elems += ours_from(a, p, first);
    }
    return elems * a->elem_bytes;
}

size_t kvc_paged_capacity_bytes(const kvc_paged *a) {
    return a->page_cap * sizeof(uint8_t *) +
           a->page_count * (sizeof(page_header) + page_elems(a) * a->elem_bytes);
}

size_t kvc_paged_count_bytes(const kvc_paged *a, size_t first, uint32_t walk) {
    size_t elems = 0;
    for (size_t p = first >> a->shift; p < pages_in_use(a); p++) {
        const size_t ours = ours_from(a, p, first);
        if (!page_shared(a->pages[p])) {
            elems += ours;
            continue;
        }
        /* A shared page counts once, at the most elements any holder has in it. */
        page_header *header = header_of(a->pages[p]);
        if (header->walk != walk) {
            header->walk = walk;
            header->counted = 0;
        }
        if (ours > header->counted) {
            elems += ours - header->counted;
            header->counted = (uint32_t)ours;
        }
    }
    return elems * a->elem_bytes;
}

void kvc_paged_read(const kvc_paged *a, size_t first, size_t count, void *dst) {
    uint8_t *to = dst;
    while (count) {
        const size_t run = kvc_paged_run(a, first, count);
        memcpy(to, kvc_paged_at(a, first), run * a->elem_bytes);
        to += run * a->elem_bytes;
        first += run;
        count -= run;
    }
}

