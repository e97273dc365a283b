/*
 * fuzz_alloc.h -- the library's allocator hook in the fuzz harnesses: plain
 * malloc, except that a call can be made to fail its N-th allocation
 * (transient: that one only; persistent: that one and every later one), so
 * that fuzz_ops also checks that KVC_E_NOMEM leaves everything unchanged.
 */
#ifndef KVC_FUZZ_ALLOC_H
#define KVC_FUZZ_ALLOC_H

/* Routes the library through the hook (once per process). */
void fuzz_alloc_install(void);
/* Fails allocation nth (counted from now, 1-based; 0: none). */
void fuzz_alloc_arm(unsigned nth, int persistent);
/* Stops failing.  @return : 1 if an allocation failed since fuzz_alloc_arm. */
int fuzz_alloc_disarm(void);

#endif /* KVC_FUZZ_ALLOC_H */
