/*
 * compare.h - `gmsim compare`: the same input simulated once per release
 * policy (and, with --allocators, per allocator and its settings), in
 * parallel threads (pool.h), and the runs ranked (sim/metrics.h:
 * gm_rank_cmp). fit.h is its sibling for `gmsim fit`.
 *
 * Threads share nothing but the read-only configuration: every simulation
 * owns its device, allocators, policies and trace readers (the library has
 * no global mutable state; HDF5 is used in its thread-safe build). Results
 * land in slots indexed by policy, and the ranking depends only on them, so
 * the output is the same whatever the thread count.
 */
#ifndef GM_COMPARE_H
#define GM_COMPARE_H

#include "alloc_list.h"
#include "sim/engine.h"

typedef struct gm_compare_entry {
    char spec[320];       /* the policy, NAME[:k=v,...]                          */
    char allocator[32];   /* the model ("" = the base configuration's)     */
    char alloc_conf[512]; /* its settings, when conf_given                 */
    int conf_given;
    char label[900]; /* "allocator[:settings] / policy" with --allocators, else spec */
    int realizable;
    int deployable;   /* the allocator's own behaviour (policy pytorch): what a user runs
                         today; the other realizable policies need a custom allocator */
    gm_sim_result *r; /* NULL if the run failed (rc, err) */
    /* gm_compare_fit: the smallest capacity without OOM (fit_found) */
    int fit_found;
    uint64_t fit_capacity, fit_max;
    int rc;
    gm_err err;
} gm_compare_entry;

typedef struct gm_compare {
    size_t n;
    gm_compare_entry *e; /* in the order the policies were given */
    size_t *rank;        /* indices of realizable entries, best first */
    size_t n_ranked;
    long winner;                       /* index of the best realizable policy, -1 if none */
    long best_deployable, best_custom; /* the best of each kind, -1 if none */
    int fitted;                        /* gm_compare_fit ran               */
    long bound;       /* index of the first unrealizable one (oracle), -1 if none */
    int by_allocator; /* entries are allocators x policies (--allocators) */
    int threads;
    double wall_s;
    /* entries whose result is another's run (study/same_run.h: no driver
     * call refused, neither policy asked), not simulated again */
    size_t n_shared;
} gm_compare;

/* The entry the verdict (fits / OOM, exit status 3) reads: the winner;
 * when no realizable policy was asked (--policies oracle), the bound,
 * whose answer is then the question's. -1 if neither. */
long gm_compare_verdict_entry(const gm_compare *c);

/* Simulate base once per spec (base->policy is ignored), each entry's
 * result its own run's; where that is another's (study/same_run.h) it is
 * copied from it, not simulated again. Fails only if a simulation fails
 * (the first failure's message, naming the policy). */
int gm_compare_run(const gm_sim_config *base, char *const *specs, size_t n, int threads,
                   gm_compare **out, gm_err *err);
/* `gmsim compare --allocators`: base simulated once per allocator x policy
 * (allocator-major order), ranked together (base->allocator is ignored; an
 * allocator without settings takes base->alloc_conf). Fails only if a
 * simulation fails, naming its allocator and policy. */
int gm_compare_run_allocators(const gm_sim_config *base, const gm_alloc_choice *allocs,
                              size_t n_allocs, char *const *specs, size_t n, int threads,
                              gm_compare **out, gm_err *err);
/* When even the winner has an OOM: gmsim fit's smallest capacity for every
 * realizable entry (up to max_capacity, 0 = fit's default), so the verdict
 * can name the smallest card that runs it. A no-op otherwise. */
int gm_compare_fit(const gm_sim_config *base, gm_compare *c, int threads, uint64_t max_capacity,
                   gm_err *err);
void gm_compare_free(gm_compare *c);

#endif
