/*
 * compare.h - many simulations of the same input, one per release policy,
 * run in parallel threads: `gmsim compare` (rank the policies) and
 * `gmsim fit` (smallest capacity, most tenants, per policy).
 *
 * Threads share nothing but the read-only configuration: every simulation
 * owns its device, allocators, policies and trace readers (the library has
 * no global mutable state; HDF5 is used in its thread-safe build). Results
 * land in slots indexed by policy, and the ranking depends only on them, so
 * the output is the same whatever the thread count.
 */
#ifndef GM_COMPARE_H
#define GM_COMPARE_H

#include "sim/engine.h"

#define GM_FIT_STEP (2ull * GM_MiB) /* capacity resolution of fit */

/* Split "--policies" into specs. Specs are separated by ',' and a piece
 * that has '=' but no ':' continues the previous spec's parameters:
 * "lru:threshold=0.8,priority" -> {"lru:threshold=0.8", "priority"},
 * "predictive:horizon=20ms,sample=1ms,oracle" -> 2 specs. Empty or NULL
 * list: every registered policy. Each name is checked. *specs is one
 * allocation (free() it). */
int gm_policy_list_split(const char *list, char ***specs, size_t *n, gm_err *err);

/* Command-line pieces compare and fit share: append one --policies value to
 * the running list buf (cap bytes); parse --threads. GM_EUSAGE on error. */
int gm_policies_append(char *buf, size_t cap, const char *arg, gm_err *err);
int gm_parse_threads(const char *arg, int *out, gm_err *err);

/* Run fn(ctx, i) for i in [0, n) on `threads` threads (0 = one per core). */
void gm_parallel_for(size_t n, int threads, void (*fn)(void *ctx, size_t i), void *ctx);
int gm_default_threads(void);

/* ---------------- compare ---------------- */

typedef struct gm_compare_entry {
    char spec[320];
    int realizable;
    gm_sim_result *r; /* NULL if the run failed (rc, err) */
    int rc;
    gm_err err;
} gm_compare_entry;

typedef struct gm_compare {
    size_t n;
    gm_compare_entry *e; /* in the order the policies were given */
    size_t *rank;        /* indices of realizable entries, best first */
    size_t n_ranked;
    long winner; /* index of the best realizable policy, -1 if none */
    long bound;  /* index of the first unrealizable one (oracle), -1 if none */
    int threads;
    double wall_s;
} gm_compare;

/* Simulate base once per spec (base->policy is ignored). Fails only if a
 * simulation fails (the first failure's message, naming the policy). */
int gm_compare_run(const gm_sim_config *base, char *const *specs, size_t n, int threads,
                   gm_compare **out, gm_err *err);
void gm_compare_free(gm_compare *c);

/* ---------------- fit ---------------- */

typedef struct gm_fit_entry {
    char spec[320];
    int realizable;
    int rc; /* GM_OK or the error of a failed simulation (err) */
    gm_err err;
    /* capacity mode */
    int found;              /* a capacity without OOM exists up to max_capacity */
    uint64_t capacity;      /* smallest capacity without OOM (multiple of 2 MiB) */
    uint64_t oom_capacity;  /* capacity - 2 MiB: simulated, has an OOM */
    uint64_t max_capacity;  /* the largest capacity tried                  */
    uint64_t peak_live;     /* device peak live bytes (run at `capacity`)   */
    uint64_t peak_reserved; /* device peak reserved at `capacity`           */
    /* tenants mode */
    uint32_t copies_fit; /* most copies that all ran without OOM         */
    uint32_t copies_tried;
    uint32_t first_fail_completed; /* tenants that completed at copies_fit + 1 */
    uint32_t runs;                 /* simulations this entry needed                */
} gm_fit_entry;

typedef struct gm_fit {
    size_t n;
    gm_fit_entry *e;
    int tenants_mode;
    uint32_t max_copies;
    uint64_t stagger_ns;
    uint64_t capacity_bytes; /* tenants mode: the device; capacity mode: where the search began */
    int threads;
    double wall_s;
} gm_fit;

/* Capacity mode: for each spec, binary search (2 MiB steps) for the
 * smallest capacity at which base runs without OOM, searching up to
 * max_capacity (0: 16 x base's capacity). */
int gm_fit_capacity(const gm_sim_config *base, char *const *specs, size_t n, int threads,
                    uint64_t max_capacity, gm_fit **out, gm_err *err);
/* Tenants mode: for each spec, k = 1..max_copies copies of base's tenants
 * (copy i starts i * stagger_ns later) on base's capacity; the largest k
 * at which every tenant completes without OOM (stops at the first k that
 * fails). */
int gm_fit_tenants(const gm_sim_config *base, char *const *specs, size_t n, int threads,
                   uint32_t max_copies, uint64_t stagger_ns, gm_fit **out, gm_err *err);
void gm_fit_free(gm_fit *f);

#endif
