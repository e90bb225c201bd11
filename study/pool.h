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

#endif
