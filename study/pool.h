/*
 * pool.h - the thread pool behind compare, fit, sweep, tune and explain:
 * fn(ctx, i) for every i, on a few threads. Nothing else is shared;
 * results go to slot i, so the thread count never changes them.
 */
#ifndef GM_POOL_H
#define GM_POOL_H

#include <stddef.h>

/* Run fn(ctx, i) for i in [0, n) on `threads` threads (0 = one per core),
 * each taking the next index from a shared counter. */
void gm_parallel_for(size_t n, int threads, void (*fn)(void *ctx, size_t i), void *ctx);

/* The same for jobs whose relative costs are known in advance (cost[i] > 0,
 * or cost NULL: all the same, which is gm_parallel_for;
 * compare's and fit's simulations: study/policy_list.h,
 * gm_policy_spec_cost). The jobs are first split between the threads so
 * that the most loaded thread has the least estimated work (gm_pool_plan);
 * each thread runs its own share, the costliest first, and a thread that
 * has run out takes the not yet started job of smallest cost from the
 * thread with the most estimated work left, so an estimate that is wrong
 * costs at most one job's time. (A shared queue, costliest first, cannot
 * find such a split: five jobs of costs 1.4, 1.3, 1, 1, 1 take 3.4 on two
 * threads that way, 3.0 split {1.4, 1.3} / {1, 1, 1}.) */
void gm_parallel_for_cost(size_t n, const double *cost, int threads,
                          void (*fn)(void *ctx, size_t i), void *ctx);

/* The same, each thread running its share in order of rank[i] (lower
 * first; rank NULL: all 0), the costliest first within a rank; on one
 * thread, in order of rank and then of i. compare ranks a policy's
 * preparation (study/prep.h) before the runs and the run that takes it
 * after them, so that the run seldom waits for it. */
void gm_parallel_for_ranked(size_t n, const double *cost, const int *rank, int threads,
                            void (*fn)(void *ctx, size_t i), void *ctx);

/* The split gm_parallel_for_cost starts from: job i goes to thread
 * share[i] (of min(threads, n) threads; threads >= 1). Exact (the least
 * possible estimated makespan) for up to GM_POOL_EXACT_JOBS jobs, found by
 * a depth-first search over the jobs, costliest first, that starts from
 * the longest-processing-time greedy split and keeps a better one only
 * (within 200 000 search steps, far more than such a list needs; past
 * them, the best found); beyond GM_POOL_EXACT_JOBS jobs, the greedy split.
 * Ties go to the lower thread, so the plan is the same on every run.
 * Returns the estimated makespan (0 when out of memory: a round-robin
 * split). */
#define GM_POOL_EXACT_JOBS 16
double gm_pool_plan(size_t n, const double *cost, int threads, int *share);

int gm_default_threads(void);

#endif
