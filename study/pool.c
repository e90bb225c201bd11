/* pool.c - see pool.h. */
#include "pool.h"

#include <pthread.h>
#include <stdint.h>
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

/* A first-come, first-served semaphore of run turns: a job holds a turn
 * while it runs; ticket k may run once `served` passed it. */
struct gm_slicer {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t next_ticket, served; /* tickets handed out; turns granted so far */
};

static void turn_take(gm_slicer *sl)
{
    pthread_mutex_lock(&sl->mu);
    uint64_t k = sl->next_ticket++;
    while (k >= sl->served)
        pthread_cond_wait(&sl->cv, &sl->mu);
    pthread_mutex_unlock(&sl->mu);
}

static void turn_give(gm_slicer *sl)
{
    pthread_mutex_lock(&sl->mu);
    sl->served++;
    pthread_cond_broadcast(&sl->cv);
    pthread_mutex_unlock(&sl->mu);
}

void gm_slice_yield(void *slicer)
{
    gm_slicer *sl = slicer;
    pthread_mutex_lock(&sl->mu);
    int waiting = sl->next_ticket > sl->served; /* someone queued for a turn */
    pthread_mutex_unlock(&sl->mu);
    if (!waiting) return;
    turn_give(sl);
    turn_take(sl);
}

typedef struct sliced_job {
    gm_slicer *sl;
    size_t i;
    void (*fn)(void *ctx, size_t i, gm_slicer *sl);
    void *ctx;
} sliced_job;

static void *sliced_worker(void *arg)
{
    sliced_job *j = arg;
    turn_take(j->sl);
    j->fn(j->ctx, j->i, j->sl);
    turn_give(j->sl);
    return NULL;
}

typedef struct unsliced {
    void (*fn)(void *ctx, size_t i, gm_slicer *sl);
    void *ctx;
} unsliced;

static void unsliced_one(void *arg, size_t i)
{
    unsliced *u = arg;
    u->fn(u->ctx, i, NULL);
}

void gm_parallel_sliced(size_t n, int threads, void (*fn)(void *ctx, size_t i, gm_slicer *sl),
                        void *ctx)
{
    if (threads <= 0) threads = gm_default_threads();
    unsliced u = {fn, ctx};
    if (threads <= 1 || n <= (size_t)threads || n > GM_SLICED_MAX_JOBS) {
        gm_parallel_for(n, threads, unsliced_one, &u); /* nothing to share out */
        return;
    }
    gm_slicer sl = {.served = (uint64_t)threads};
    pthread_mutex_init(&sl.mu, NULL);
    pthread_cond_init(&sl.cv, NULL);
    sliced_job *jobs = calloc(n, sizeof *jobs);
    pthread_t *tid = calloc(n, sizeof *tid);
    char *up = calloc(n, 1);
    for (size_t i = 0; jobs && tid && up && i < n; i++) {
        jobs[i] = (sliced_job){&sl, i, fn, ctx};
        up[i] = pthread_create(&tid[i], NULL, sliced_worker, &jobs[i]) == 0;
    }
    for (size_t i = 0; i < n; i++) {
        if (up && up[i])
            pthread_join(tid[i], NULL);
        else /* no thread (or no memory for the list): run it here, in turn */
            sliced_worker(&(sliced_job){&sl, i, fn, ctx});
    }
    free(up);
    free(tid);
    free(jobs);
    pthread_cond_destroy(&sl.cv);
    pthread_mutex_destroy(&sl.mu);
}
