/* trace_stats.c - see trace_stats.h. */
#include "trace_stats.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "results.h"
#include "study/leak.h"
#include "traces/trace.h"
#include "traces/trace_scan.h"

/* A JSON string from bytes recorded in a trace: invalid UTF-8 becomes '?'
 * (jansson refuses it, and a report must still be written). */
static json_t *jstr(const char *s)
{
    if (!s) return json_string("");
    json_t *j = json_string(s);
    if (j) return j;
    char *c = strdup(s);
    if (!c) return json_string("");
    for (unsigned char *p = (unsigned char *)c; *p; p++)
        if (*p >= 0x80) *p = '?';
    j = json_string(c);
    free(c);
    return j;
}

static json_t *meta_json(const gm_trace_meta *m)
{
    json_t *o = json_object();
    json_object_set_new(o, "source", jstr(m->source));
    json_object_set_new(o, "device_name", jstr(m->device_name));
    json_object_set_new(o, "device_total_bytes", json_integer((json_int_t)m->device_total_bytes));
    json_object_set_new(o, "created_utc", jstr(m->created_utc));
    json_object_set_new(o, "command", jstr(m->command));
    json_object_set_new(o, "workload", jstr(m->workload));
    json_object_set_new(o, "alloc_conf", jstr(m->alloc_conf));
    return o;
}

static json_t *size_hist_json(const gm_trace_scan *s)
{
    size_t lo = GM_SCAN_HIST_BINS, hi = 0;
    for (size_t i = 0; i < GM_SCAN_HIST_BINS; i++)
        if (gsl_histogram_get(s->h_count, i) > 0) {
            lo = i < lo ? i : lo;
            hi = i;
        }
    json_t *edges = json_array(), *allocs = json_array(), *bytes = json_array();
    for (size_t i = lo; i <= hi && lo < GM_SCAN_HIST_BINS; i++) {
        double a, b;
        gsl_histogram_get_range(s->h_count, i, &a, &b);
        if (i == lo) json_array_append_new(edges, json_integer((json_int_t)a));
        json_array_append_new(edges, json_integer((json_int_t)b));
        json_array_append_new(allocs, json_integer((json_int_t)gsl_histogram_get(s->h_count, i)));
        json_array_append_new(bytes, json_integer((json_int_t)gsl_histogram_get(s->h_bytes, i)));
    }
    return json_pack("{s:o,s:o,s:o}", "edges_bytes", edges, "allocs", allocs, "bytes", bytes);
}

static json_t *categories_json(const gm_trace_scan *s)
{
    json_t *a = json_array();
    for (int c = 0; c < GM_CAT_COUNT; c++) {
        if (s->cat_count[c] == 0 && s->peak_cat[c] == 0) continue;
        json_array_append_new(a, json_pack("{s:s,s:I,s:I,s:I}", "category", gm_category_name(c),
                                           "allocs", (json_int_t)s->cat_count[c], "bytes",
                                           (json_int_t)s->cat_bytes[c], "live_at_peak_bytes",
                                           (json_int_t)s->peak_cat[c]));
    }
    return a;
}

/* The allocations chart's first pass, riding on the leak analysis's second
 * (gm_trace_stats_json): started at its first chunk, when the scan that
 * gives its time span is whole. */
typedef struct allocs_ride {
    gm_trace_reader *r;
    const gm_trace_scan *s;
    gm_trace_allocs *x;
} allocs_ride;

static int allocs_tap(void *ctx, const gm_event *ev, size_t n, uint64_t first, gm_err *err)
{
    allocs_ride *a = ctx;
    (void)first;
    int rc = GM_OK;
    if (!a->x)
        rc = gm_trace_allocs_begin(a->r, GM_TOP_ALLOCS, a->s->t_first, a->s->t_last, &a->x, err);
    return rc == GM_OK ? gm_trace_allocs_feed(a->x, ev, n, err) : rc;
}

/* "allocations_top" from allocs (its first pass whole when `whole`), else
 * both its passes now. */
static int allocs_top(gm_trace_reader *r, const gm_trace_scan *s, gm_trace_allocs *x, int whole,
                      json_t **top, gm_err *err)
{
    if (!whole) /* the analysis made no second pass (no iterations), or cut it short */
        return gm_trace_allocs_json(r, GM_TOP_ALLOCS, s->t_first, s->t_last, top, err);
    return gm_trace_allocs_finish(x, r, top, err);
}

int gm_trace_stats_json(const char *path, json_t **out, gm_err *err)
{
    *out = NULL;
    gm_trace_reader *r;
    int rc = gm_trace_open(path, &r, err);
    if (rc != GM_OK) return rc;
    gm_trace_scan s = {0};
    /* three reads of the events, not five: the scan and the leak analysis
     * (iterations, the verdict: the report's chart of live bytes per
     * boundary, as `gmsim info --json` has them) from one, the analysis's
     * second pass and the allocations chart's first from the next, the
     * chart's second from the last */
    gm_leak_opts lo = {0};
    gm_leak_report lk = {0};
    allocs_ride ride = {.r = r, .s = &s};
    gm_leak_tap tap = {allocs_tap, &ride};
    uint64_t rode = 0;
    rc = gm_leak_scan_trace(r, &lo, &s, &lk, &tap, &rode, err);
    if (rc == GM_OK) {
        json_t *o = json_object();
        json_object_set_new(o, "path", jstr(path));
        json_object_set_new(o, "meta", meta_json(gm_trace_meta_get(r)));
        json_object_set_new(o, "events", json_integer((json_int_t)s.nevents));
        json_object_set_new(o, "allocations", json_integer((json_int_t)s.by_op[GM_OP_ALLOC]));
        json_object_set_new(o, "alloc_bytes", json_integer((json_int_t)s.alloc_bytes));
        json_object_set_new(o, "peak_live_bytes", json_integer((json_int_t)s.peak_live));
        json_object_set_new(o, "peak_live_t_ns", json_integer((json_int_t)s.peak_t));
        json_object_set_new(o, "size_histogram", size_hist_json(&s));
        json_object_set_new(o, "categories", categories_json(&s));
        json_object_set_new(o, "iterations", gm_leak_json(&lk));
        json_t *top = NULL;
        rc = allocs_top(r, &s, ride.x, ride.x && rode == gm_trace_nevents(r), &top, err);
        if (rc == GM_OK) {
            json_object_set_new(o, "allocations_top", top);
            *out = o;
        } else {
            json_decref(o);
        }
    }
    gm_trace_allocs_free(ride.x);
    gm_leak_report_free(&lk);
    gm_trace_scan_free(&s);
    gm_trace_close(r);
    return rc;
}

/* The file a result's trace name stands for: a snapshot's temporary trace
 * (cfg's tenant named so), else the name itself. */
static const char *file_of(const char *name, const gm_sim_config *cfg)
{
    for (size_t i = 0; cfg && i < cfg->n_tenants; i++)
        if (cfg->tenants[i].name && !strcmp(cfg->tenants[i].name, name))
            return cfg->tenants[i].path;
    return name;
}

/* Statistics read ahead on a thread of their own (gm_trace_stats_start). */
struct gm_trace_stats_bg {
    pthread_t tid;
    int started;
    size_t n;
    const char **path; /* distinct trace files */
    json_t **st;
    int *rc;
    gm_err *err;
};

static void *bg_main(void *arg)
{
    gm_trace_stats_bg *bg = arg;
    for (size_t i = 0; i < bg->n; i++)
        bg->rc[i] = gm_trace_stats_json(bg->path[i], &bg->st[i], &bg->err[i]);
    return NULL;
}

static void bg_free(gm_trace_stats_bg *bg)
{
    if (!bg) return;
    for (size_t i = 0; i < bg->n; i++)
        json_decref(bg->st[i]);
    free(bg->path);
    free(bg->st);
    free(bg->rc);
    free(bg->err);
    free(bg);
}

int gm_trace_stats_start(const gm_sim_config *cfg, gm_trace_stats_bg **out)
{
    *out = NULL;
    size_t n = cfg ? cfg->n_tenants : 0;
    gm_trace_stats_bg *bg = calloc(1, sizeof *bg);
    if (!bg) return GM_ENOMEM;
    bg->path = calloc(n + 1, sizeof *bg->path);
    bg->st = calloc(n + 1, sizeof *bg->st);
    bg->rc = calloc(n + 1, sizeof *bg->rc);
    bg->err = calloc(n + 1, sizeof *bg->err);
    if (!bg->path || !bg->st || !bg->rc || !bg->err) {
        bg_free(bg);
        return GM_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        const char *p = cfg->tenants[i].path;
        size_t k = 0;
        while (p && k < bg->n && strcmp(bg->path[k], p))
            k++;
        if (p && k == bg->n) bg->path[bg->n++] = p;
    }
    if (pthread_create(&bg->tid, NULL, bg_main, bg) != 0) {
        bg_free(bg); /* no thread: gm_trace_stats_finish reads them itself */
        return GM_OK;
    }
    bg->started = 1;
    *out = bg;
    return GM_OK;
}

/* file's statistics from what bg read ahead (a new reference), else read
 * now; the error of either. */
static int stats_of(const char *file, gm_trace_stats_bg *bg, json_t **st, gm_err *err)
{
    for (size_t i = 0; bg && i < bg->n; i++)
        if (!strcmp(bg->path[i], file)) {
            if (bg->rc[i] != GM_OK) {
                *err = bg->err[i];
                return bg->rc[i];
            }
            *st = json_incref(bg->st[i]);
            return GM_OK;
        }
    return gm_trace_stats_json(file, st, err);
}

/* Attach to the tenants of one gmsim-result/1; cache maps path -> stats. */
static int attach_result(json_t *res, json_t *cache, const gm_sim_config *cfg,
                         gm_trace_stats_bg *bg, gm_err *err)
{
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(res, "tenants"), i, t)
    {
        const char *path = json_string_value(json_object_get(t, "trace"));
        if (!path || json_object_get(t, "trace_stats")) continue;
        json_t *st = json_object_get(cache, path);
        if (!st) {
            int rc = stats_of(file_of(path, cfg), bg, &st, err);
            if (rc != GM_OK) return rc;
            json_object_set_new(cache, path, st);
        }
        json_object_set(t, "trace_stats", st);
    }
    return GM_OK;
}

int gm_trace_stats_finish(gm_trace_stats_bg *bg, json_t *result, const gm_sim_config *cfg,
                          gm_err *err)
{
    if (bg && bg->started) pthread_join(bg->tid, NULL);
    int rc = GM_OK;
    json_t *cache = result ? json_object() : NULL;
    json_t *results = json_object_get(result, "results");
    if (json_is_array(results)) {
        size_t i;
        json_t *r;
        json_array_foreach(results, i, r)
        {
            if ((rc = attach_result(r, cache, cfg, bg, err)) != GM_OK) break;
        }
    } else if (result) {
        rc = attach_result(result, cache, cfg, bg, err);
    }
    json_decref(cache);
    bg_free(bg);
    return rc;
}

int gm_trace_stats_attach(json_t *result, const gm_sim_config *cfg, gm_err *err)
{
    return gm_trace_stats_finish(NULL, result, cfg, err);
}
