/*
 * html_int.h - internals of the HTML report, shared by html.c (the page),
 * html_model.c (JSON -> what is drawn) and html_charts.c (inline SVG).
 *
 * The renderer reads JSON only (gmsim-result/1 or gmsim-compare/1), so the
 * same code serves `run --html`, `compare --html` and `gmsim report`. The
 * model turns it into runs in ranked order, every timeline resampled onto
 * one column grid over one time range, and shared y axes: all charts of a
 * kind are drawn on the same axes, so policies compare at a glance, and the
 * hover cursor (same column index everywhere) lines up across all of them.
 */
#ifndef GM_HTML_INT_H
#define GM_HTML_INT_H

#include <jansson.h>
#include <stddef.h>

#include "svg.h"
#include "traces/trace.h"
#include "base/strbuf.h"

/* Chart geometry (SVG user units; charts scale to the page width). */
#define REP_W 960.0
#define REP_PX0 72.0  /* left edge of the plot area (y labels left of it) */
#define REP_PX1 944.0 /* right edge                                       */
#define REP_NCOL 400  /* timeline columns: ~2.2 px each                    */
#define REP_MAX_OOM_MARKS 100

/* One series (the device or a tenant) on the column grid; NaN = no data. */
typedef struct rep_cols {
    double q[REP_NCOL]; /* requested (live) bytes, max per column         */
    double a[REP_NCOL]; /* allocated                                       */
    double r[REP_NCOL]; /* reserved                                        */
    double f[REP_NCOL]; /* external fragmentation 0..1, NaN = no sample    */
    /* minima per column (results without *_min columns: all NaN) */
    double q_min[REP_NCOL], a_min[REP_NCOL], r_min[REP_NCOL];
} rep_cols;

typedef struct rep_tenant {
    json_t *j;      /* the tenant object                                   */
    json_t *m;      /* its "metrics"                                       */
    rep_cols *cols; /* NULL when it has no timeline                         */
} rep_tenant;

typedef struct rep_run {
    json_t *j;          /* a gmsim-result/1                                  */
    json_t *m;          /* its device metrics                                */
    char label[384];    /* policy, plus the inputs that tell runs apart      */
    const char *policy; /* inputs.policy                                     */
    int realizable;     /* 0: the oracle, a bound                            */
    int rank;           /* 1.. among realizable runs in ranked order, 0 = bound */
    int color;          /* palette index                                     */
    double capacity;    /* its device capacity, bytes (NaN = not recorded)    */
    double usable;      /* capacity - context overhead of its tenants         */
    rep_cols *cols;     /* device series                                     */
    rep_tenant *t;
    size_t nt;
} rep_run;

typedef struct rep {
    json_t *root;
    int compare; /* the input was a gmsim-compare/1                    */
    rep_run *run;
    size_t n;
    size_t *order; /* run indexes in ranked order                         */
    int winner;    /* run index, -1 = none (a single run, or all bounds)  */
    int ranking_given;
    size_t multi;            /* most tenants in any run (> 1: multi-tenant)         */
    double t0, t1;           /* shared time range, ns                               */
    double ymax, ystep;      /* device memory axis top and tick step, bytes   */
    double ymin;             /* its bottom: 0, or fitted to the data (fit_axis) */
    double ymax_t, ystep_t;  /* tenant bands axis                             */
    gm_unit yu, yu_t, tu;    /* their units; time unit                        */
    double peak_live;        /* largest device peak live bytes: the limit     */
    double capacity, usable; /* shared by every run; NaN when runs differ     */
} rep;

/* html.c: the head (CSP with a fresh nonce written to nce, the style) and
 * the foot (the note, the hover script) of every page */
void rep_page_open(gm_strbuf *b, const char *title, char *nce, size_t len);
void rep_page_close(gm_strbuf *b, const char *nce);

/* html_search.c: the pages of `gmsim fit --html` (gmsim-fit/1) and
 * `gmsim tune --html` (gmsim-tune/1) */
#include "base/err.h"
int rep_fit_page(json_t *fit, gm_strbuf *out, gm_err *err);
/* The traces a search ran on, as <code> names; a fit document's header
 * trailer (allocator, gmsim version, date) closing the header. */
void rep_traces_line(gm_strbuf *b, json_t *traces);
void rep_fit_made(gm_strbuf *b, json_t *fit);
int rep_tune_page(json_t *tune, gm_strbuf *out, gm_err *err);
/* html_density.c: `gmsim fit --tenants --html` in density mode (per scheduling mode) */
int rep_density_page(json_t *fit, gm_strbuf *out, gm_err *err);

/* html_model.c */
int rep_build(rep *p, json_t *root, char *err, size_t errlen);
void rep_free(rep *p);
double rep_num(json_t *obj, const char *path);      /* "a.b.c"; NaN when absent */
const char *rep_str(json_t *obj, const char *path); /* NULL when absent */
int rep_same(json_t *a, json_t *b);                 /* equal JSON values, both absent included */
/* The tenants' trace statistics, one per distinct trace (borrowed refs). */
size_t rep_trace_stats(const rep *p, json_t **out, size_t cap);

/* html_charts.c */
void rep_chart_multiples(gm_strbuf *b, const rep *p); /* one strip per run, same axes */
void rep_chart_memory(gm_strbuf *b, const rep *p, size_t run);
void rep_chart_frag(gm_strbuf *b, const rep *p, size_t run);
void rep_chart_tenants(gm_strbuf *b, const rep *p, size_t run);
void rep_chart_sizes(gm_strbuf *b, json_t *stats);
/* trace_stats.iterations: live bytes per boundary, the fit, the verdict;
 * nothing when there are fewer than two boundaries. */
void rep_chart_iterations(gm_strbuf *b, json_t *stats);
/* A trace's "allocations_top" (trace_stats.h) as bands over the shared time
 * axis; offset_ns: the tenant's offset (trace time -> timeline time). */
void rep_chart_allocs(gm_strbuf *b, const rep *p, json_t *top, double offset_ns, const char *id);
const char *rep_color(int i); /* policy palette */

/* html_segmap.c: a run's "segment_maps" (reports/segmap.h), if it has any */
void rep_segmaps(gm_strbuf *b, const rep *p, size_t run);

#endif
