/*
 * pool.h - the thread pool behind compare and fit: fn(ctx, i) for every i,
 * on a few threads that take the next index from a shared counter. Nothing
 * else is shared; results go to slot i, so the thread count never changes
 * them.
 */
#ifndef GM_POOL_H
#define GM_POOL_H

#include <stddef.h>

/* Run fn(ctx, i) for i in [0, n) on `threads` threads (0 = one per core). */
void gm_parallel_for(size_t n, int threads, void (*fn)(void *ctx, size_t i), void *ctx);
/* The same, starting the indices in the order given (order[0] first; a
 * permutation of [0, n), or NULL for 0, 1, ...): the longest jobs first, so
 * that none starts last and runs alone. */
void gm_parallel_for_order(size_t n, const size_t *order, int threads,
                           void (*fn)(void *ctx, size_t i), void *ctx);
int gm_default_threads(void);

/*
 * Time-sliced: every job gets a thread of its own at once, but only
 * `threads` of them run at a time. A job passes gm_slice_yield (with the
 * gm_slicer it is given) as its simulation's slice hook (sim/engine.h,
 * GM_SLICE_EVENTS): when a job waits, the running one gives its turn to
 * the job that has waited longest (first come, first served) and queues
 * again. So jobs of unequal length share the cores to the end, instead of
 * the longest starting last and running alone: five policies of 0.5, 0.46,
 * 0.31, 0.30 and 0.29 s on 2 threads take ~0.93 s, where the best start
 * order leaves one thread 1.06 s of work. For few jobs (compare); the
 * results are the same as gm_parallel_for's.
 */
typedef struct gm_slicer gm_slicer;
void gm_slice_yield(void *slicer);
void gm_parallel_sliced(size_t n, int threads, void (*fn)(void *ctx, size_t i, gm_slicer *sl),
                        void *ctx);
/* Jobs above which gm_parallel_sliced falls back to gm_parallel_for (then
 * each job is a small share of the whole and the pool balances well). */
#define GM_SLICED_MAX_JOBS 64

#endif
