/* trace_stats.c - see trace_stats.h. */
#include "trace_stats.h"

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

int gm_trace_stats_json(const char *path, json_t **out, gm_err *err)
{
    *out = NULL;
    gm_trace_reader *r;
    int rc = gm_trace_open(path, &r, err);
    if (rc != GM_OK) return rc;
    gm_trace_scan s = {0};
    rc = gm_trace_scan_run(r, &s, err);
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
        /* iterations and the leak verdict, as `gmsim info --json` has them
         * (the report's chart of live bytes per boundary) */
        gm_leak_opts lo = {0};
        gm_leak_report lk = {0};
        rc = gm_leak_analyze_trace(r, &lo, &lk, err);
        if (rc == GM_OK) json_object_set_new(o, "iterations", gm_leak_json(&lk));
        gm_leak_report_free(&lk);
        json_t *top = NULL;
        if (rc == GM_OK)
            rc = gm_trace_allocs_json(r, GM_TOP_ALLOCS, s.t_first, s.t_last, &top, err);
        if (rc == GM_OK) {
            json_object_set_new(o, "allocations_top", top);
            *out = o;
        } else {
            json_decref(o);
        }
    }
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

/* Attach to the tenants of one gmsim-result/1; cache maps path -> stats. */
static int attach_result(json_t *res, json_t *cache, const gm_sim_config *cfg, gm_err *err)
{
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(res, "tenants"), i, t)
    {
        const char *path = json_string_value(json_object_get(t, "trace"));
        if (!path || json_object_get(t, "trace_stats")) continue;
        json_t *st = json_object_get(cache, path);
        if (!st) {
            int rc = gm_trace_stats_json(file_of(path, cfg), &st, err);
            if (rc != GM_OK) return rc;
            json_object_set_new(cache, path, st);
        }
        json_object_set(t, "trace_stats", st);
    }
    return GM_OK;
}

int gm_trace_stats_attach(json_t *result, const gm_sim_config *cfg, gm_err *err)
{
    json_t *cache = json_object();
    int rc = GM_OK;
    json_t *results = json_object_get(result, "results");
    if (json_is_array(results)) {
        size_t i;
        json_t *r;
        json_array_foreach(results, i, r)
        {
            if ((rc = attach_result(r, cache, cfg, err)) != GM_OK) break;
        }
    } else {
        rc = attach_result(result, cache, cfg, err);
    }
    json_decref(cache);
    return rc;
}
