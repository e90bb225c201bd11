/* pool.c - see pool.h. */
#include "pool.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct pool {
    pthread_mutex_t mu;
    size_t next, n;
    const size_t *order;
    void (*fn)(void *ctx, size_t i);
    void *ctx;
} pool;

static void *worker(void *arg)
{
    pool *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        size_t i = p->next < p->n ? p->next++ : p->n;
        pthread_mutex_unlock(&p->mu);
        if (i == p->n) return NULL;
        p->fn(p->ctx, p->order ? p->order[i] : i);
    }
}

int gm_default_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

void gm_parallel_for(size_t n, int threads, void (*fn)(void *ctx, size_t i), void *ctx)
{
    gm_parallel_for_order(n, NULL, threads, fn, ctx);
}

void gm_parallel_for_order(size_t n, const size_t *order, int threads,
                           void (*fn)(void *ctx, size_t i), void *ctx)
{
    if (threads <= 0) threads = gm_default_threads();
    if ((size_t)threads > n) threads = (int)n;
    pool p = {.next = 0, .n = n, .order = order, .fn = fn, .ctx = ctx};
    if (threads <= 1) {
        for (size_t i = 0; i < n; i++)
            fn(ctx, order ? order[i] : i);
        return;
    }
    pthread_mutex_init(&p.mu, NULL);
    pthread_t *tid = calloc((size_t)threads, sizeof *tid);
    int started = 0;
    for (int i = 0; tid && i < threads; i++)
        if (pthread_create(&tid[i], NULL, worker, &p) == 0)
            started++;
        else
            break;
    if (started == 0) worker(&p); /* no thread could start: do it here */
    for (int i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    free(tid);
    pthread_mutex_destroy(&p.mu);
}
