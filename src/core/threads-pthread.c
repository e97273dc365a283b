/*
 * threads-pthread.c -- the native executor of the pool: pthreads, and the
 * sleep and wake of idle ones with a mutex and a condition variable.
 */
#include <pthread.h>

#include "internal.h"

static pthread_mutex_t sleep_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sleep_cond = PTHREAD_COND_INITIALIZER;
static pthread_t threads[KVC_MAX_THREADS];
static size_t started; /* pool threads running kvc_pool_worker_run */

void kvc_thread_wait(_Atomic uint32_t *word, uint32_t expected) {
    pthread_mutex_lock(&sleep_lock);
    while (atomic_load(word) == expected) pthread_cond_wait(&sleep_cond, &sleep_lock);
    pthread_mutex_unlock(&sleep_lock);
}

void kvc_thread_wake_all(_Atomic uint32_t *word) {
    (void)word; /* bumped by the caller before: a sleeper checks it under the lock */
    pthread_mutex_lock(&sleep_lock);
    pthread_cond_broadcast(&sleep_cond);
    pthread_mutex_unlock(&sleep_lock);
}

static void *worker_main(void *index) {
    kvc_pool_worker_run((size_t)(uintptr_t)index);
    return NULL;
}

/* Joins the slot before the thread starts, so that kvc_thread_count counts
 * it as soon as kvc_set_threads returns. */
static int start_thread(size_t index) {
    if (kvc_pool_worker_join(index) != KVC_OK) return -1;
    if (pthread_create(&threads[index], NULL, worker_main, (void *)(uintptr_t)index) == 0) return 0;
    kvc_pool_worker_failed(index);
    return -1;
}

static void stop_threads(void) {
    kvc_pool_close();
    for (size_t i = 1; i <= started; i++) pthread_join(threads[i], NULL);
    started = 0;
}

kvc_status kvc_set_threads(size_t count) {
    if (count == 0 || count > KVC_MAX_THREADS) return KVC_E_THREADS;
    stop_threads();
    if (count == 1) return KVC_OK;
    kvc_status status = kvc_pool_open(count - 1);
    if (status != KVC_OK) return status;
    for (size_t i = 1; i < count; i++) {
        if (start_thread(i) != 0) {
            stop_threads();
            return KVC_E_THREADS;
        }
        started = i;
    }
    return KVC_OK;
}

size_t kvc_thread_count(void) {
    return kvc_pool_running_threads();
}
