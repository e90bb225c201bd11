/* pool.c - see pool.h. */
#include "pool.h"

#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

int gm_default_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* glibc gives the free memory at the top of a thread's malloc arena back
 * to the kernel once it passes the trim threshold (128 KiB unless it has
 * grown with large frees), and the next run faults those pages in again;
 * in a process of several threads each such return (madvise) also flushes
 * the TLB of every other core running one of them. The pool's runs free
 * and allocate their models' megabytes over and over: keeping up to
 * KEEP_BYTES at an arena's top made compare on 2 threads 0.91-0.96x the
 * time, and compare of 100 M events 0.85x (bench/README.md,
 * "Twenty-sixth round"). Process-wide, once, when the pool is first
 * used. */
#define KEEP_BYTES (64 << 20)

static void keep_arenas(void)
{
#ifdef M_TRIM_THRESHOLD
    mallopt(M_TRIM_THRESHOLD, KEEP_BYTES);
#endif
}

/* What every entry point does first (also on one thread, so that the
 * runs are alike on any number). */
static void pool_init(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, keep_arenas);
}

/* Start `threads` workers, worker i on arg + i * size (size 0: all on
 * arg), and join them; any that cannot start run here, one after the
 * other. */
static void run_workers(int threads, void *(*worker)(void *), char *arg, size_t size)
{
    pthread_t *tid = calloc((size_t)threads, sizeof *tid);
    int started = 0;
    for (int i = 0; tid && i < threads; i++)
        if (pthread_create(&tid[i], NULL, worker, arg + (size_t)i * size) == 0)
            started++;
        else
            break;
    for (int i = started; i < threads; i++)
        worker(arg + (size_t)i * size);
    for (int i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    free(tid);
}

/* ---- a shared counter (gm_parallel_for) ---- */

typedef struct counter {
    pthread_mutex_t mu;
    size_t next, n;
    void (*fn)(void *ctx, size_t i);
    void *ctx;
} counter;

static void *count_worker(void *arg)
{
    counter *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        size_t i = p->next < p->n ? p->next++ : p->n;
        pthread_mutex_unlock(&p->mu);
        if (i == p->n) return NULL;
        p->fn(p->ctx, i);
    }
}

void gm_parallel_for(size_t n, int threads, void (*fn)(void *ctx, size_t i), void *ctx)
{
    pool_init();
    if (threads <= 0) threads = gm_default_threads();
    if ((size_t)threads > n) threads = (int)n;
    if (threads <= 1) {
        for (size_t i = 0; i < n; i++)
            fn(ctx, i);
        return;
    }
    counter p = {.next = 0, .n = n, .fn = fn, .ctx = ctx};
    pthread_mutex_init(&p.mu, NULL);
    run_workers(threads, count_worker, (char *)&p, 0); /* one counter for all */
    pthread_mutex_destroy(&p.mu);
}

/* ---- the plan (gm_pool_plan) ---- */

/* Search nodes allowed to the exact split: far more than 16 jobs of a
 * compare or fit need (a few hundred), and a bound on the time of any. */
#define SEARCH_NODES 200000

typedef struct search {
    const double *cost;
    const size_t *order; /* the jobs, costliest first */
    size_t n;
    int threads;
    double *load, best, bound, eps;
    int *cur, *share;
    long nodes;
} search;

static double max_load(const double *load, int threads)
{
    double m = 0;
    for (int b = 0; b < threads; b++)
        m = load[b] > m ? load[b] : m;
    return m;
}

static void dfs(search *s, size_t k)
{
    if (s->best <= s->bound + s->eps || ++s->nodes > SEARCH_NODES) return;
    if (k == s->n) {
        double m = max_load(s->load, s->threads);
        if (m < s->best - s->eps) {
            s->best = m;
            for (size_t i = 0; i < s->n; i++)
                s->share[i] = s->cur[i];
        }
        return;
    }
    size_t j = s->order[k];
    double c = s->cost[j];
    for (int b = 0; b < s->threads; b++) {
        if (s->load[b] + c >= s->best - s->eps) continue; /* cannot beat the best */
        int seen = 0; /* two threads with the same load are the same choice */
        for (int e = 0; e < b && !seen; e++)
            seen = s->load[e] == s->load[b];
        if (seen) continue;
        s->load[b] += c;
        s->cur[j] = b;
        dfs(s, k + 1);
        s->load[b] -= c;
    }
}

/* Job i before job j: costlier, or as costly and earlier. */
static int before(size_t i, size_t j, const double *c)
{
    return c[i] != c[j] ? c[i] > c[j] : i < j;
}

/* Insertion sort of the indices, costliest first, ties by index (n is a
 * list of policies: a few dozen at most). */
static void sort_by_cost(size_t *order, size_t n, const double *cost)
{
    for (size_t i = 0; i < n; i++)
        order[i] = i;
    for (size_t i = 1; i < n; i++) {
        size_t v = order[i], k = i;
        for (; k > 0 && before(v, order[k - 1], cost); k--)
            order[k] = order[k - 1];
        order[k] = v;
    }
}

/* gm_pool_plan, leaving the jobs costliest first in order[0..n) (order
 * NULL: no memory for it). */
static double plan(size_t n, const double *cost, int threads, int *share, size_t *order)
{
    if (threads < 1) threads = 1;
    if ((size_t)threads > n) threads = n ? (int)n : 1;
    if (order) sort_by_cost(order, n, cost);
    double *load = order ? calloc((size_t)threads, sizeof *load) : NULL;
    int *cur = order ? malloc((n ? n : 1) * sizeof *cur) : NULL;
    if (!load || !cur) { /* no memory: round robin, a valid split (returns 0) */
        for (size_t i = 0; i < n; i++)
            share[i] = (int)(i % (size_t)threads);
        free(load);
        free(cur);
        return 0;
    }
    double total = 0;
    for (size_t k = 0; k < n; k++) { /* the greedy split: each to the least loaded */
        size_t j = order[k];
        int b = 0;
        for (int e = 1; e < threads; e++)
            if (load[e] < load[b]) b = e;
        load[b] += cost[j];
        share[j] = b;
        total += cost[j];
    }
    search s = {.cost = cost,
                .order = order,
                .n = n,
                .threads = threads,
                .load = load,
                .best = max_load(load, threads),
                .eps = 1e-9 * total,
                .cur = cur,
                .share = share};
    /* no split beats the costliest job, or an even share of the total */
    s.bound = n ? cost[order[0]] : 0;
    if (total / threads > s.bound) s.bound = total / threads;
    if (n <= GM_POOL_EXACT_JOBS) {
        for (int b = 0; b < threads; b++)
            load[b] = 0;
        dfs(&s, 0);
    }
    free(load);
    free(cur);
    return s.best;
}

double gm_pool_plan(size_t n, const double *cost, int threads, int *share)
{
    size_t *order = malloc((n ? n : 1) * sizeof *order);
    double m = plan(n, cost, threads, share, order);
    free(order);
    return m;
}

/* ---- the planned pool (gm_parallel_for_cost) ---- */

typedef struct planned {
    pthread_mutex_t mu;
    const double *cost;
    size_t *job;        /* thread b's jobs, costliest first: job[head[b] .. end[b]) */
    size_t *head, *end; /* per thread: the next to start, one past the last not started */
    double *left;       /* per thread: the estimated cost of its jobs not started */
    int threads;
    void (*fn)(void *ctx, size_t i);
    void *ctx;
} planned;

typedef struct planned_arg {
    planned *p;
    int b;
} planned_arg;

/* Under the lock: the next job for thread b, or (size_t)-1 when none is left. */
static size_t take(planned *p, int b)
{
    if (p->head[b] < p->end[b]) {
        size_t j = p->job[p->head[b]++];
        p->left[b] -= p->cost[j];
        return j;
    }
    int v = -1; /* steal: the thread with the most left, its cheapest */
    for (int e = 0; e < p->threads; e++)
        if (p->head[e] < p->end[e] && (v < 0 || p->left[e] > p->left[v])) v = e;
    if (v < 0) return (size_t)-1;
    size_t j = p->job[--p->end[v]];
    p->left[v] -= p->cost[j];
    return j;
}

static void *planned_worker(void *arg)
{
    planned_arg *a = arg;
    planned *p = a->p;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        size_t j = take(p, a->b);
        pthread_mutex_unlock(&p->mu);
        if (j == (size_t)-1) return NULL;
        p->fn(p->ctx, j);
    }
}

/* The lowest rank above r among the n jobs (INT_MAX: none). */
static int rank_after(const int *rank, size_t n, int r)
{
    int m = INT_MAX;
    for (size_t i = 0; i < n; i++)
        if (rank[i] > r && rank[i] < m) m = rank[i];
    return m;
}

void gm_parallel_for_cost(size_t n, const double *cost, int threads,
                          void (*fn)(void *ctx, size_t i), void *ctx)
{
    gm_parallel_for_ranked(n, cost, NULL, threads, fn, ctx);
}

void gm_parallel_for_ranked(size_t n, const double *cost, const int *rank, int threads,
                            void (*fn)(void *ctx, size_t i), void *ctx)
{
    pool_init();
    if (threads <= 0) threads = gm_default_threads();
    if ((size_t)threads > n) threads = (int)n;
    if (threads <= 1 && rank) { /* one thread: by rank, then by index */
        for (int r = rank_after(rank, n, INT_MIN); r != INT_MAX; r = rank_after(rank, n, r))
            for (size_t i = 0; i < n; i++)
                if (rank[i] == r) fn(ctx, i);
        return;
    }
    if (threads <= 1 || !cost) { /* nothing to plan */
        gm_parallel_for(n, threads, fn, ctx);
        return;
    }
    size_t t = (size_t)threads; /* here 2 <= threads <= n */
    int *share = malloc(n * sizeof *share);
    size_t *order = malloc(n * sizeof *order), *job = malloc(n * sizeof *job);
    size_t *idx = calloc(2 * t, sizeof *idx);
    double *left = calloc(t, sizeof *left);
    planned_arg *arg = calloc(t, sizeof *arg);
    if (!share || !order || !job || !idx || !left || !arg) {
        gm_parallel_for(n, threads, fn, ctx); /* no memory to plan */
    } else {
        plan(n, cost, threads, share, order);
        size_t *head = idx, *end = idx + threads, k = 0;
        for (int b = 0; b < threads; b++) { /* each thread's jobs by rank, costliest first */
            head[b] = k;
            for (int r = rank ? rank_after(rank, n, INT_MIN) : 0; r != INT_MAX;
                 r = rank ? rank_after(rank, n, r) : INT_MAX)
                for (size_t i = 0; i < n; i++)
                    if (share[order[i]] == b && (!rank || rank[order[i]] == r)) {
                        job[k++] = order[i];
                        left[b] += cost[order[i]];
                    }
            end[b] = k;
        }
        planned p = {.cost = cost,
                     .job = job,
                     .head = head,
                     .end = end,
                     .left = left,
                     .threads = threads,
                     .fn = fn,
                     .ctx = ctx};
        pthread_mutex_init(&p.mu, NULL);
        for (int b = 0; b < threads; b++)
            arg[b] = (planned_arg){&p, b};
        run_workers(threads, planned_worker, (char *)arg, sizeof *arg);
        pthread_mutex_destroy(&p.mu);
    }
    free(share);
    free(order);
    free(job);
    free(idx);
    free(left);
    free(arg);
}
