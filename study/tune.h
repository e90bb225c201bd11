/*
 * tune.h - `gmsim tune`: PyTorch's own allocator settings searched for one
 * input. A grid of PYTORCH_CUDA_ALLOC_CONF strings (expandable_segments,
 * max_split_size_mb, garbage_collection_threshold, roundup_power2_divisions)
 * is simulated in parallel threads (pool.h) with one release policy, and
 * ranked: runs without OOM first, then the smallest peak reserved, then
 * fragmentation, then driver time, then grid order (the defaults first), so
 * the ranking is the same for any thread count.
 */
#ifndef GM_TUNE_H
#define GM_TUNE_H

#include "base/err.h"
#include "sim/engine.h"

/* The memory fraction garbage collection runs under when the run gives
 * none: PyTorch collects only below a per-process fraction (before 2.10 a
 * set_per_process_memory_fraction call, from 2.10 also the
 * per_process_memory_fraction key; traces/ALLOC_CONF.md). */
#define GM_TUNE_GC_FRACTION 0.99

typedef struct gm_tune_entry {
    char conf[320];         /* PYTORCH_CUDA_ALLOC_CONF ("" = PyTorch's defaults) */
    double memory_fraction; /* the run's, 0 = none                                */
    int is_default;         /* the defaults ("")                                  */
    int is_recorded;        /* the settings the trace recorded                    */
    int skipped;            /* not a setting this PyTorch accepts (err says why)  */
    int rc;                 /* GM_OK, or the failure of the simulation (err)      */
    gm_err err;
    /* what the run gave (device-wide) */
    uint64_t ooms, first_oom_index, first_oom_size;
    uint64_t peak_live, peak_reserved, peak_allocated;
    double fragmentation;
    uint64_t driver_calls, driver_ns;
} gm_tune_entry;

typedef struct gm_tune {
    size_t n;
    gm_tune_entry *e; /* grid order: the defaults first */
    size_t *rank;     /* indices of the entries that ran, best first */
    size_t n_ranked;
    size_t n_skipped;  /* settings this PyTorch refuses */
    long best, dflt;   /* indices, -1 if none */
    int torch_version; /* the GM_TORCH_* rules the grid was checked against */
    char dims[256];    /* the grid's shape, for people: "2 expandable_segments x ..." */
    int threads;
    double wall_s;
    size_t n_shared;           /* settings whose figures another setting's run gave (tune.c) */
    uint64_t capacity_bytes;   /* the device the grid ran on ... */
    char capacity_source[160]; /* ... and where its size came from */
    char policy[320];
    /* gm_tune_fit: the smallest card for the best setting and the defaults */
    int fitted;
    int fit_best_found, fit_dflt_found;
    uint64_t fit_best, fit_dflt, fit_max; /* bytes; fit_max: the largest tried */
    double fit_wall_s;
} gm_tune;

/* Simulate base once per grid setting with base->policy (NULL =
 * "pytorch"). Settings the trace's PyTorch refuses are kept as skipped;
 * fails only if the defaults' run fails (its message). */
int gm_tune_run(const gm_sim_config *base, int threads, gm_tune **out, gm_err *err);
/* gmsim fit's smallest capacity without OOM for the best setting and for
 * the defaults (base->policy), searched up to max_capacity (0: fit's
 * default). */
int gm_tune_fit(const gm_sim_config *base, gm_tune *t, int threads, uint64_t max_capacity,
                gm_err *err);
/* qsort-style order of two entries that ran (gm_tune's ranking). */
int gm_tune_cmp(const gm_tune_entry *a, const gm_tune_entry *b);
void gm_tune_free(gm_tune *t);

#endif
