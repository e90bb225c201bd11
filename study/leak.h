/*
 * leak.h - iterations in a trace, and live memory that grows from one to
 * the next (a leak: a list of loss tensors kept for logging, a cache never
 * cleared, gradients accumulated by mistake).
 *
 * Iterations, first found wins (README "Iterations and leaks"):
 *   1. --iteration-marker NAME: the markers (iteration, NVTX range push or
 *      instant) whose name is NAME or starts with it ("step" matches
 *      "step 3"); an error listing the names present when none does.
 *   2. the trace's iteration markers (/markers kind 0, GM_MARK_ITERATION:
 *      gmcapture's and the generators' "iteration N"), when there are two.
 *   3. a top-level NVTX range that repeats: range pushes at depth 0 grouped
 *      by name without trailing digits, the most frequent group seen at
 *      least twice.
 *   4. the period of live bytes (policies/period.h, the detector the
 *      predictive policy learns with) with its least-squares line taken out
 *      (a leak's trend correlates every lag), sampled per event (iterations repeat
 *      the same operations, so their length in events is steadier than in
 *      time): the first boundary is the least live memory within the first
 *      period, each next one the least live memory within +-25 % of one
 *      period after it, so the phase does not drift.
 * A boundary is the state just before the first event at or after the
 * marker's time. Live bytes are requested bytes of live tensors, the
 * /initial_state blocks included, as `gmsim info` counts them.
 *
 * At each boundary: live bytes, live bytes by group, the allocations made
 * in an iteration before the previous one and still live ("carried"), and
 * the most live bytes until the next boundary.
 *
 * Leak rule, on the series y_k of live bytes at boundary k:
 *   warm-up  up to GM_LEAK_MAX_WARMUP leading boundaries are dropped while
 *            the step out of them (y_{k+1} - y_k) is unlike the steps after
 *            it: more than max(64 KiB, 10 % of their median, 3 x their
 *            median absolute deviation) from that median. The optimizer's
 *            states (made at the first step()) and lazily built caches
 *            appear once, in the first one or two steps; a leak adds the
 *            same amount every step, so its first step is like the others
 *            and is kept.
 *   fit      least squares (gsl_fit_linear) of y_k on k over the rest:
 *            slope (bytes per iteration), its standard error from the
 *            scatter, R^2.
 *   growing  at least GM_LEAK_MIN_POINTS points, slope > 0, one-sided
 *            t-test slope / se above the t distribution's 99th percentile
 *            (gsl_cdf_tdist_Qinv(0.01, n - 2); an exact line counts), and
 *            the fitted growth over the points at least min_growth_bytes
 *            (default 1 MiB: a few bytes per step are noise, not an OOM),
 *            and live bytes rising in at least a third of the steps (a leak
 *            adds in many steps; one jump is a level shift, e.g. a buffer
 *            made once in a later phase, not a leak).
 *   stopped  the change point j (the split into a prefix [.., j] and a
 *            tail [j, ..] of >= 3 points each whose two lines leave the least
 *            squared residuals, first such j) has a growing prefix (the rule
 *            above) and a tail that is not growing, with a slope under a
 *            quarter of the prefix's: growth ended at iteration j.
 *   steady   otherwise.
 * Run-out: for a growing trace and a capacity, the first iteration k whose
 * projected boundary live bytes plus the largest rise within one observed
 * iteration after warm-up (peak - boundary) exceed the capacity.
 *
 * Groups: each allocation's live bytes are kept under a group key, and per
 * group the same fit (over the same boundaries as the whole) tells which
 * grows: its call site (trace.h, /sites; 0 = none recorded) when the trace
 * names sites, else its tensor category. The sites fall back to categories
 * when boundaries x (sites + 1) exceed GM_LEAK_MAX_GROUP_CELLS (the live
 * bytes of every group at every boundary are kept).
 */
#ifndef GM_LEAK_H
#define GM_LEAK_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "traces/trace.h"
#include "traces/trace_scan.h"

#define GM_LEAK_MAX_WARMUP 2      /* leading boundaries that may be warm-up        */
#define GM_LEAK_MIN_POINTS 3      /* boundaries a fit needs (after warm-up)        */
#define GM_LEAK_MAX_POINTS 100000 /* boundaries kept; later ones are not analyzed */
#define GM_LEAK_MIN_GROWTH (1ull << 20)
#define GM_LEAK_MAX_GROUP_CELLS (1u << 23) /* boundaries x groups kept (64 MiB) */

enum gm_iter_source {
    GM_ITER_NONE = 0,    /* no iterations found */
    GM_ITER_USER = 1,    /* --iteration-marker NAME */
    GM_ITER_MARKERS = 2, /* the trace's iteration markers */
    GM_ITER_NVTX = 3,    /* a repeated top-level NVTX range */
    GM_ITER_PERIOD = 4,  /* the period of live bytes */
};

enum gm_leak_verdict {
    GM_LEAK_UNKNOWN = 0, /* too few iterations to tell */
    GM_LEAK_STEADY = 1,
    GM_LEAK_GROWING = 2,
    GM_LEAK_STOPPED = 3, /* grew, then stopped growing at growth_end */
};

typedef struct gm_leak_opts {
    const char *marker;        /* --iteration-marker NAME; NULL: automatic */
    uint64_t capacity_bytes;   /* for the run-out iteration; 0: none        */
    uint64_t min_growth_bytes; /* 0: GM_LEAK_MIN_GROWTH                     */
} gm_leak_opts;

/* One iteration boundary. */
typedef struct gm_iter_point {
    uint64_t event_index; /* the state just before this event (nevents: the end) */
    uint64_t t_ns;        /* that event's time                                   */
    uint64_t live_bytes;
    uint64_t carried_bytes, carried_count; /* made before the previous boundary, after the first */
    uint64_t peak_bytes; /* most live bytes from here to the next boundary (or the end) */
} gm_iter_point;

/* A least-squares line through points [first, first + n) against their index. */
typedef struct gm_leak_fit {
    size_t first, n;
    double slope, intercept; /* bytes per iteration; bytes at iteration 0 */
    double slope_se, r2;     /* standard error of the slope; R^2 (1 for a flat series) */
    double sse;              /* sum of squared residuals                           */
    double t;                /* slope / slope_se; HUGE_VAL for an exact rising line */
    int growing;             /* the growing rule of the file comment */
} gm_leak_fit;

typedef struct gm_leak_report {
    int source;                      /* enum gm_iter_source */
    char marker[GM_MARKER_NAME_LEN]; /* the markers' name (sources 1-3) */
    double period_events, period_r;  /* source 4: events per iteration, its correlation */
    uint64_t nevents;
    size_t n;
    gm_iter_point *pt;
    size_t ngroups;
    uint64_t *group_bytes;  /* [k * ngroups + g]: live bytes of group g at boundary k */
    size_t warmup;          /* leading boundaries dropped as warm-up */
    int verdict;            /* enum gm_leak_verdict */
    gm_leak_fit fit;        /* growing/steady: over [warmup, n); stopped: the growing part */
    size_t growth_end;      /* stopped: the first boundary of the flat tail */
    gm_leak_fit *group_fit; /* [g], over fit's points */
    uint64_t capacity_bytes;
    uint64_t rise_bytes;      /* largest peak - boundary live within one iteration */
    int64_t runout_iteration; /* growing with a capacity: first iteration over it; -1 none */
    int by_site; /* groups are call sites (g = site, 0: none recorded), not categories */
    const gm_sites *site_names; /* their names (the source's), or NULL: sites below */
    gm_sites sites;             /* gm_leak_analyze_trace: the trace's /sites, owned */
} gm_leak_report;

/* Events from somewhere that can be read twice (two passes). */
typedef struct gm_leak_source {
    uint64_t nevents;
    const gm_init_row *init;
    size_t ninit;
    const gm_marker *marks;
    size_t nmarks;
    int64_t (*read)(void *ctx, gm_event *buf, size_t cap, gm_err *err); /* 0 at the end */
    int (*rewind)(void *ctx, gm_err *err);
    void *ctx;
    const gm_sites *sites; /* the call sites events name (NULL or n = 0: none); kept by the
                              report for their names, so it must outlive it */
    int dense_ids; /* the events' ids pair allocations (trace.h): kept by id (0: by address) */
} gm_leak_source;

/* Find the iterations and judge them. rep is filled (free it with
 * gm_leak_report_free whatever the result); no iterations is not an error
 * (source GM_ITER_NONE), an --iteration-marker that matches nothing is
 * (GM_EINVAL, naming the markers the trace has). */
int gm_leak_analyze(const gm_leak_source *src, const gm_leak_opts *o, gm_leak_report *rep,
                    gm_err *err);
/* The same over a whole trace (rewound first and after); capacity from o,
 * else the trace's device_avail_bytes, else its device_total_bytes. */
int gm_leak_analyze_trace(gm_trace_reader *r, const gm_leak_opts *o, gm_leak_report *rep,
                          gm_err *err);
/* What sees the events of one of the analysis's passes
 * (gm_leak_analyze_trace_tap): fn gets each chunk that pass reads, in
 * order, `first` the number of its first event; an error code it returns
 * (err set) ends the analysis. */
typedef struct gm_leak_tap {
    int (*fn)(void *ctx, const gm_event *ev, size_t n, uint64_t first, gm_err *err);
    void *ctx;
} gm_leak_tap;
/* gm_leak_analyze_trace with a tap on its first pass and one on its second
 * (each may be NULL); tapped (if given): the events each saw, the trace's
 * count when that pass read them all (a second pass is made only when
 * iterations were found). */
int gm_leak_analyze_trace_tap(gm_trace_reader *r, const gm_leak_opts *o, gm_leak_report *rep,
                              const gm_leak_tap *first, const gm_leak_tap *second,
                              uint64_t tapped[2], gm_err *err);
/* The trace's scan (gm_trace_scan_run into s) and its leak analysis (into
 * rep) from one read of the events: the scan is fed what the analysis's
 * first pass reads. The results and the error are those of the scan run
 * first and the analysis after it. `second`, if given, taps the analysis's
 * second pass (the scan is whole by then), *second_tapped the events it
 * saw. Free s and rep in every case. */
int gm_leak_scan_trace(gm_trace_reader *r, const gm_leak_opts *o, gm_trace_scan *s,
                       gm_leak_report *rep, const gm_leak_tap *second, uint64_t *second_tapped,
                       gm_err *err);
/* The same over events in memory. */
int gm_leak_analyze_events(const gm_event *ev, size_t n, const gm_init_row *init, size_t ninit,
                           const gm_marker *marks, size_t nmarks, const gm_leak_opts *o,
                           gm_leak_report *rep, gm_err *err);
/* The same with the call sites the events name (they must outlive rep). */
int gm_leak_analyze_events_sites(const gm_event *ev, size_t n, const gm_init_row *init,
                                 size_t ninit, const gm_marker *marks, size_t nmarks,
                                 const gm_sites *sites, const gm_leak_opts *o, gm_leak_report *rep,
                                 gm_err *err);
void gm_leak_report_free(gm_leak_report *rep);

/* Least squares of y[0..n) on first..first+n-1 with the growing rule
 * (min_growth 0: GM_LEAK_MIN_GROWTH). */
void gm_leak_fit_line(const double *y, size_t first, size_t n, uint64_t min_growth, gm_leak_fit *f);

/* Where a growing series stops: the first j in [w + 2, n - GM_LEAK_MIN_POINTS]
 * that least leaves squared residuals to the fits (gm_leak_fit_line) of
 * y[w..j] and y[j..n), as a scan of every j would find it, in O(n) for
 * most series; 0 when there is no such j. */
size_t gm_leak_change_point(const double *y, size_t w, size_t n, uint64_t min_growth);

const char *gm_iter_source_name(int source);               /* "markers", "period", ... */
const char *gm_leak_verdict_name(int verdict);             /* "steady", "growing", ... */
const char *gm_leak_group_kind(const gm_leak_report *rep); /* "site", "category" */
const char *gm_leak_group_name(const gm_leak_report *rep,
                               size_t g); /* "train.py:42 in f", "activation" */

#endif
