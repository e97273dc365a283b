/*
 * pool.c -- the threads a call's tasks run on: one job at a time, its tasks
 * claimed one by one by the calling thread and by every pool thread.
 *
 * The same protocol serves both executors: natively, pthreads started by
 * kvc_set_threads (threads-pthread.c); in WebAssembly, workers that the JS
 * loader starts, each an instance of the module over the one shared memory
 * (src/wasm/workers.c).  Either way a pool thread runs kvc_pool_worker_run,
 * and only the calling thread allocates: a job's tasks write into memory the
 * caller prepared, each thread into its own scratch (the `thread` index).
 *
 * Which thread runs which task never changes a result: a task's output
 * depends on the task alone, and the caller merges outputs in task order
 * (attend.c).  That is also why a job may run on the caller alone -- when it
 * is small, when another call holds the pool, or when no worker is there.
 *
 * Publishing a job is a seqlock: the owner makes `seq` odd, writes the job,
 * then makes it even; a thread reads the job between two equal even values
 * of `seq`.  Tasks are claimed by a compare-and-swap on one word holding
 * the job's generation (seq / 2) and the next task, so that a thread that
 * read a job late cannot claim a task of the next one.
 */
#include <stdatomic.h>
#include <string.h>

#include "internal.h"

/* Iterations an idle thread polls for the next job before it sleeps: the
 * phases of one call follow each other within microseconds. */
#define KVC_POOL_SPIN 20000

/* A pool thread that another process keeps off its core takes few of a
 * job's tasks, and the caller then waits for the one it holds: a step on
 * two threads ran at 0.6x one thread's speed with the second core busy.
 * The caller keeps the share of tasks the pool threads took, averaged over
 * the last jobs (in 1/256ths); below a quarter of their fair share, the
 * next KVC_POOL_REST jobs run on the caller alone, and then the pool is
 * tried again.  Where tasks run never changes a result. */
#define KVC_POOL_SHARE_ONE 256u
#define KVC_POOL_REST 256u

typedef struct pool_slot {
    _Atomic uint32_t state;    /* SLOT_* */
    _Atomic uint64_t running;  /* claim word of the task it runs, + 1; 0 when none */
    _Atomic uint64_t orphan;   /* the task it dropped when it failed, as `running` */
} pool_slot;

enum { SLOT_CLOSED = 0, SLOT_OPEN, SLOT_RUNNING, SLOT_FAILED };

static struct {
    _Atomic uint32_t seq;          /* even: the job of generation seq / 2 is published */
    _Atomic(kvc_task_fn *) fn;
    _Atomic(void *) context;
    _Atomic size_t count;          /* tasks */
    _Atomic size_t threads;        /* thread indices with a scratch: 0 .. threads - 1 */
    _Atomic uint64_t claim;        /* generation << 32 | next task */
    _Atomic size_t done;           /* tasks finished */
    _Atomic uint32_t wake;         /* bumped to wake sleeping threads */
    _Atomic uint32_t quit;         /* set by kvc_pool_close */
    _Atomic uint32_t busy;         /* a caller owns the pool */
    _Atomic size_t slots;          /* worker slots opened (thread indices 1 .. slots) */
    _Atomic size_t fault_thread;   /* test hook: this thread traps at its next task */
    _Atomic size_t min_work;       /* smaller jobs run inline */
    _Atomic size_t limit;          /* threads a job may use at most */
    size_t help;                   /* the pool threads' share of recent jobs' tasks (caller only) */
    size_t rest;                   /* jobs to run on the caller alone before trying the pool again */
    pool_slot slot[KVC_MAX_THREADS];
} pool = {.min_work = KVC_POOL_MIN_WORK, .limit = KVC_MAX_THREADS, .help = KVC_POOL_SHARE_ONE};

size_t kvc_pool_threads(void) {
    return 1 + atomic_load(&pool.slots);
}

size_t kvc_pool_running_threads(void) {
    size_t running = 1;
    const size_t slots = atomic_load(&pool.slots);
    for (size_t i = 1; i <= slots; i++) running += atomic_load(&pool.slot[i].state) == SLOT_RUNNING;
    return running;
}

kvc_status kvc_pool_open(size_t workers) {
    if (workers >= KVC_MAX_THREADS) return KVC_E_THREADS;
    if (atomic_load(&pool.slots) != 0) return KVC_E_THREADS; /* close first */
    atomic_store(&pool.quit, 0);
    for (size_t i = 1; i <= workers; i++) {
        atomic_store(&pool.slot[i].running, 0);
        atomic_store(&pool.slot[i].orphan, 0);
        atomic_store(&pool.slot[i].state, SLOT_OPEN);
    }
    atomic_store(&pool.slots, workers);
    return KVC_OK;
}

void kvc_pool_close(void) {
    /* Waits for a call in progress, then for nothing: threads leave
     * kvc_pool_worker_run when they see `quit`, and the executor joins them. */
    uint32_t expected = 0;
    while (!atomic_compare_exchange_weak(&pool.busy, &expected, 1)) expected = 0;
    atomic_store(&pool.quit, 1);
    atomic_fetch_add(&pool.wake, 1);
    kvc_thread_wake_all(&pool.wake);
    atomic_store(&pool.slots, 0);
    atomic_store(&pool.busy, 0);
}

/* Reads the published job; returns its generation. */
static uint32_t read_job(kvc_task_fn **fn, void **context, size_t *count, size_t *threads) {
    for (;;) {
        const uint32_t seq = atomic_load(&pool.seq);
        if (seq & 1) continue;
        *fn = atomic_load(&pool.fn);
        *context = atomic_load(&pool.context);
        *count = atomic_load(&pool.count);
        *threads = atomic_load(&pool.threads);
        if (atomic_load(&pool.seq) == seq) return seq / 2;
    }
}

/* Claims the next task of generation `generation`; 0 when there is none,
 * else the claim word + 1. */
static uint64_t claim_task(uint32_t generation, size_t count) {
    uint64_t word = atomic_load(&pool.claim);
    for (;;) {
        if ((uint32_t)(word >> 32) != generation || (word & 0xffffffffu) >= count) return 0;
        if (atomic_compare_exchange_weak(&pool.claim, &word, word + 1)) return word + 1;
    }
}

static void run_task(kvc_task_fn *fn, void *context, uint64_t claimed, size_t thread) {
#if defined(__wasm__)
    /* kvc_pool_inject_fault: a worker dying mid-task traps, and its instance
     * reports it (kvc_pool_worker_failed).  Natively a trap ends the process,
     * so the hook is a WebAssembly one. */
    if (thread != 0 && atomic_load(&pool.fault_thread) == thread) {
        atomic_store(&pool.fault_thread, 0);
        __builtin_trap();
    }
#endif
    fn(context, (size_t)((claimed - 1) & 0xffffffffu), thread);
}

kvc_status kvc_pool_worker_join(size_t index) {
    uint32_t expected = SLOT_OPEN;
    if (index == 0 || index >= KVC_MAX_THREADS ||
        !atomic_compare_exchange_strong(&pool.slot[index].state, &expected, SLOT_RUNNING))
        return KVC_E_THREADS;
    return KVC_OK;
}

void kvc_pool_worker_run(size_t index) {
    if (index == 0 || index >= KVC_MAX_THREADS) return;
    pool_slot *slot = &pool.slot[index];
    if (atomic_load(&slot->state) != SLOT_RUNNING) return;
    uint32_t done_generation = UINT32_MAX;
    while (!atomic_load(&pool.quit)) {
        kvc_task_fn *fn;
        void *context;
        size_t count, threads;
        const uint32_t wake = atomic_load(&pool.wake);
        const uint32_t generation = read_job(&fn, &context, &count, &threads);
        if (generation != done_generation && fn && index < threads) {
            uint64_t claimed;
            while ((claimed = claim_task(generation, count)) != 0) {
                atomic_store(&slot->running, claimed);
                run_task(fn, context, claimed, index);
                atomic_store(&slot->running, 0);
                atomic_fetch_add(&pool.done, 1);
            }
        }
        done_generation = generation;
        /* Poll a while for the next job, then sleep until woken. */
        int spins = 0;
        while (atomic_load(&pool.wake) == wake && !atomic_load(&pool.quit)) {
            if (++spins < KVC_POOL_SPIN) continue;
            kvc_thread_wait(&pool.wake, wake);
        }
    }
    uint32_t running = SLOT_RUNNING;
    atomic_compare_exchange_strong(&slot->state, &running, SLOT_CLOSED);
}

void kvc_pool_worker_failed(size_t index) {
    if (index == 0 || index >= KVC_MAX_THREADS) return;
    pool_slot *slot = &pool.slot[index];
    atomic_store(&slot->state, SLOT_FAILED);
    atomic_store(&slot->orphan, atomic_exchange(&slot->running, 0));
}

void kvc_pool_inject_fault(size_t thread) {
    atomic_store(&pool.fault_thread, thread);
}

size_t kvc_pool_set_min_work(size_t work) {
    return atomic_exchange(&pool.min_work, work);
}

/* Runs the tasks a failed thread dropped; returns how many. */
static size_t adopt_orphans(kvc_task_fn *fn, void *context, uint32_t generation, size_t slots) {
    size_t adopted = 0;
    for (size_t i = 1; i <= slots; i++) {
        const uint64_t orphan = atomic_exchange(&pool.slot[i].orphan, 0);
        if (orphan == 0) continue;
        if ((uint32_t)((orphan - 1) >> 32) == generation) {
            run_task(fn, context, orphan, 0);
            atomic_fetch_add(&pool.done, 1);
            adopted++;
        }
    }
    return adopted;
}

static void run_inline(kvc_task_fn *fn, void *context, size_t count) {
    for (size_t t = 0; t < count; t++) fn(context, t, 0);
}

size_t kvc_pool_set_limit(size_t threads) {
    return atomic_exchange(&pool.limit, threads);
}

void kvc_pool_run(kvc_task_fn *fn, void *context, size_t count, size_t threads, uint64_t work) {
    const size_t slots = atomic_load(&pool.slots), limit = atomic_load(&pool.limit);
    if (threads > limit) threads = limit;
    uint32_t expected = 0;
    if (count < 2 || threads < 2 || slots == 0 || work < atomic_load(&pool.min_work) ||
        !atomic_compare_exchange_strong(&pool.busy, &expected, 1)) {
        run_inline(fn, context, count);
        return;
    }
    if (pool.rest > 0) {
        pool.rest--;
        atomic_store(&pool.busy, 0);
        run_inline(fn, context, count);
        return;
    }
    /* Publish: seq odd, the job, the claim word of the new generation, seq even. */
    const uint32_t seq = atomic_load(&pool.seq) + 1;
    atomic_store(&pool.seq, seq);
    atomic_store(&pool.fn, fn);
    atomic_store(&pool.context, context);
    atomic_store(&pool.count, count);
    atomic_store(&pool.threads, threads);
    atomic_store(&pool.done, 0);
    const uint32_t generation = (seq + 1) / 2;
    atomic_store(&pool.claim, (uint64_t)generation << 32);
    atomic_store(&pool.seq, seq + 1);
    atomic_fetch_add(&pool.wake, 1);
    kvc_thread_wake_all(&pool.wake);

    uint64_t claimed;
    size_t own = 0;
    while ((claimed = claim_task(generation, count)) != 0) {
        run_task(fn, context, claimed, 0);
        atomic_fetch_add(&pool.done, 1);
        own++;
    }
    /* The caller may not sleep (a browser's main thread cannot): it polls
     * until the last task is in, taking over any a failed thread dropped. */
    const double waiting = kvc_profile_wait_begin();
    while (atomic_load(&pool.done) < count) own += adopt_orphans(fn, context, generation, slots);
    kvc_profile_wait_end(waiting);
    const size_t share = (count - own) * KVC_POOL_SHARE_ONE / count;
    const size_t fair = (threads - 1) * KVC_POOL_SHARE_ONE / threads;
    pool.help = (7 * pool.help + share) / 8;
    if (pool.help < fair / 4) {
        pool.rest = KVC_POOL_REST;
        pool.help = KVC_POOL_SHARE_ONE; /* a fresh start when the pool is tried again */
    }
    atomic_store(&pool.busy, 0);
}
