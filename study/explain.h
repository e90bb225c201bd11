/*
 * explain.h - why a run ran out of memory, and what would have avoided it.
 *
 * What is live at an event is the trace's, not the allocator's: every
 * model holds the same tensors at the same event (they differ only in how
 * they cache). So the live set at the first OOM and at the trace's peak is
 * read back from the trace (initial-state blocks included), by category.
 * What would have avoided the OOM is answered by re-simulating the same
 * run with each single change PyTorch offers: expandable segments, a
 * max_split_size_mb, garbage collection, and torch.cuda.empty_cache() at
 * phase boundaries.
 */
#ifndef GM_EXPLAIN_H
#define GM_EXPLAIN_H

#include "base/err.h"
#include "sim/engine.h"

/* One call site of a live set (trace.h, /sites). */
#define GM_LIVE_TOP_SITES 5
typedef struct gm_live_site {
    char name[GM_SITE_NAME_MAX]; /* "train.py:42 in forward" */
    uint64_t bytes, count;
} gm_live_site;

/* Live tensors at one event of one tenant's trace. */
typedef struct gm_live_set {
    int tenant;
    uint64_t event_index;         /* the state just before this event           */
    uint64_t bytes[GM_CAT_COUNT]; /* requested bytes by category                */
    uint64_t count[GM_CAT_COUNT];
    uint64_t total, n;
    /* the call sites holding the most bytes, largest first (the trace names
     * n_trace_sites; 0: it records none, and the rest is empty) */
    uint64_t n_trace_sites;
    size_t n_sites;
    gm_live_site sites[GM_LIVE_TOP_SITES];
    uint64_t unknown_site_bytes, unknown_site_count; /* tensors with no site */
} gm_live_set;

/* The live set of tenant t (a spec of cfg) just before its event
 * `event_index` (pass 0), with the trace's initial-state blocks unless cfg
 * leaves them out (--initial-state none); *peak (may be NULL) gets the live
 * set at the trace's peak of live bytes up to the end of the trace. */
int gm_live_at(const gm_sim_config *cfg, int tenant, uint64_t event_index, gm_live_set *at,
               gm_live_set *peak, gm_err *err);

#define GM_FIXES_MAX 8

/* One single change, re-simulated. */
typedef struct gm_fix {
    char what[96];          /* "expandable_segments:True", "empty_cache() at phase boundaries" */
    char conf[400];         /* the run's settings with the change                             */
    double memory_fraction; /* the run's, or the one garbage collection needs                 */
    int phase_empty_cache;
    int rc; /* GM_OK, or the failure (err) */
    gm_err err;
    uint64_t ooms, first_oom_index;
    uint64_t peak_reserved, driver_calls, driver_ns;
} gm_fix;

typedef struct gm_fixes {
    size_t n;
    gm_fix f[GM_FIXES_MAX];
    /* the run they are measured against */
    uint64_t ooms, first_oom_index, peak_reserved, driver_calls, driver_ns;
    int threads;
    double wall_s;
} gm_fixes;

/* Re-simulate cfg (which gave r, with at least one OOM) once per single
 * change that r's settings do not already have, in parallel. */
int gm_oom_fixes(const gm_sim_config *cfg, const gm_sim_result *r, int threads, gm_fixes *out,
                 gm_err *err);

#endif
