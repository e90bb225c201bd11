/* trace_stats.c - see trace_stats.h. */
#include "trace_stats.h"

#include <gsl/gsl_histogram.h>
#include <stdlib.h>
#include <string.h>

#include "sim/addrmap.h"
#include "traces/trace.h"

/* Bin 0 is [0, 512 B), bin k >= 1 is [2^(8+k), 2^(9+k)), up to 2^49 so that
 * GM_TRACE_MAX_SIZE (2^48) falls in the last bin (as `gmsim info`). */
#define TS_BINS 41
/* A live entry packs the requested size (< 2^48) and the category (top byte). */
#define TS_CAT_SHIFT 56
#define TS_SIZE_MASK ((1ull << 48) - 1)

typedef struct ts {
    gm_addrmap map;                    /* addr -> size | category << TS_CAT_SHIFT */
    gsl_histogram *h_allocs, *h_bytes; /* by requested size                 */
    gsl_histogram *c_allocs, *c_bytes; /* by category: one unit bin each     */
    uint64_t live_cat[GM_CAT_COUNT], peak_cat[GM_CAT_COUNT];
    uint64_t live, peak, peak_t, events, allocs, alloc_bytes;
} ts;

static gsl_histogram *hist(size_t n, const double *edges)
{
    gsl_histogram *h = gsl_histogram_alloc(n);
    if (h) gsl_histogram_set_ranges(h, edges, n + 1);
    return h;
}

static int ts_init(ts *s, gm_err *err)
{
    memset(s, 0, sizeof *s);
    double e[TS_BINS + 1], c[GM_CAT_COUNT + 1];
    e[0] = 0;
    for (int k = 1; k <= TS_BINS; k++)
        e[k] = (double)(1ull << (8 + k));
    for (int k = 0; k <= GM_CAT_COUNT; k++)
        c[k] = k;
    s->h_allocs = hist(TS_BINS, e);
    s->h_bytes = hist(TS_BINS, e);
    s->c_allocs = hist(GM_CAT_COUNT, c);
    s->c_bytes = hist(GM_CAT_COUNT, c);
    if (!s->h_allocs || !s->h_bytes || !s->c_allocs || !s->c_bytes ||
        gm_addrmap_init(&s->map, 4096) != GM_OK)
        return gm_errf(err, GM_ENOMEM, "out of host memory");
    return GM_OK;
}

static void ts_free(ts *s)
{
    gm_addrmap_free(&s->map);
    gsl_histogram *h[] = {s->h_allocs, s->h_bytes, s->c_allocs, s->c_bytes};
    for (size_t i = 0; i < 4; i++)
        if (h[i]) gsl_histogram_free(h[i]);
}

static void note_peak(ts *s, uint64_t t_ns)
{
    if (s->live > s->peak) {
        s->peak = s->live;
        s->peak_t = t_ns;
        memcpy(s->peak_cat, s->live_cat, sizeof s->peak_cat);
    }
}

static int make_live(ts *s, uint64_t addr, uint64_t size, int cat)
{
    uint64_t key = gm_addrmap_key(addr), old;
    if (gm_addrmap_del(&s->map, key, &old)) { /* re-use of a live address: replace */
        s->live -= old & TS_SIZE_MASK;
        s->live_cat[old >> TS_CAT_SHIFT] -= old & TS_SIZE_MASK;
    }
    size &= TS_SIZE_MASK;
    if (gm_addrmap_put(&s->map, key, size | ((uint64_t)cat << TS_CAT_SHIFT)) != GM_OK)
        return GM_ENOMEM;
    s->live += size;
    s->live_cat[cat] += size;
    return GM_OK;
}

static int ts_event(ts *s, const gm_event *e)
{
    int cat = e->category < GM_CAT_COUNT ? e->category : GM_CAT_UNKNOWN;
    uint64_t v;
    s->events++;
    if (e->op == GM_OP_ALLOC) {
        s->allocs++;
        s->alloc_bytes += e->size;
        gsl_histogram_increment(s->h_allocs, (double)e->size);
        gsl_histogram_accumulate(s->h_bytes, (double)e->size, (double)e->size);
        gsl_histogram_increment(s->c_allocs, cat + 0.5);
        gsl_histogram_accumulate(s->c_bytes, cat + 0.5, (double)e->size);
        if (make_live(s, e->addr, e->size, cat) != GM_OK) return GM_ENOMEM;
        note_peak(s, e->t_ns);
    } else if (e->op == GM_OP_FREE && gm_addrmap_del(&s->map, gm_addrmap_key(e->addr), &v)) {
        s->live -= v & TS_SIZE_MASK;
        s->live_cat[v >> TS_CAT_SHIFT] -= v & TS_SIZE_MASK;
    }
    return GM_OK;
}

static int ts_scan(ts *s, gm_trace_reader *r, gm_err *err)
{
    gm_init_row *rows;
    size_t n;
    int rc = gm_trace_read_initial(r, &rows, &n, err);
    if (rc != GM_OK) return rc;
    for (size_t i = 0; i < n && rc == GM_OK; i++)
        if (rows[i].kind == GM_INIT_BLOCK)
            rc = make_live(s, rows[i].addr, rows[i].size,
                           rows[i].category < GM_CAT_COUNT ? rows[i].category : 0);
    free(rows);
    note_peak(s, 0);
    gm_event *buf = malloc(GM_TRACE_CHUNK_EVENTS * sizeof *buf);
    if (rc != GM_OK || !buf) {
        free(buf);
        return gm_errf(err, GM_ENOMEM, "out of host memory");
    }
    for (;;) {
        int64_t got = gm_trace_read(r, buf, GM_TRACE_CHUNK_EVENTS, err);
        if (got <= 0) {
            rc = (int)got;
            break;
        }
        for (int64_t i = 0; i < got && rc == GM_OK; i++)
            rc = ts_event(s, &buf[i]);
        if (rc != GM_OK) {
            rc = gm_errf(err, GM_ENOMEM, "out of host memory");
            break;
        }
    }
    free(buf);
    return rc;
}

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

static json_t *size_hist_json(const ts *s)
{
    size_t lo = TS_BINS, hi = 0;
    for (size_t i = 0; i < TS_BINS; i++)
        if (gsl_histogram_get(s->h_allocs, i) > 0) {
            lo = i < lo ? i : lo;
            hi = i;
        }
    json_t *edges = json_array(), *allocs = json_array(), *bytes = json_array();
    for (size_t i = lo; i <= hi && lo < TS_BINS; i++) {
        double a, b;
        gsl_histogram_get_range(s->h_allocs, i, &a, &b);
        if (i == lo) json_array_append_new(edges, json_integer((json_int_t)a));
        json_array_append_new(edges, json_integer((json_int_t)b));
        json_array_append_new(allocs, json_integer((json_int_t)gsl_histogram_get(s->h_allocs, i)));
        json_array_append_new(bytes, json_integer((json_int_t)gsl_histogram_get(s->h_bytes, i)));
    }
    return json_pack("{s:o,s:o,s:o}", "edges_bytes", edges, "allocs", allocs, "bytes", bytes);
}

static json_t *categories_json(const ts *s)
{
    json_t *a = json_array();
    for (int c = 0; c < GM_CAT_COUNT; c++) {
        double n = gsl_histogram_get(s->c_allocs, (size_t)c);
        if (n == 0 && s->peak_cat[c] == 0) continue;
        json_array_append_new(a, json_pack("{s:s,s:I,s:I,s:I}", "category", gm_category_name(c),
                                           "allocs", (json_int_t)n, "bytes",
                                           (json_int_t)gsl_histogram_get(s->c_bytes, (size_t)c),
                                           "live_at_peak_bytes", (json_int_t)s->peak_cat[c]));
    }
    return a;
}

int gm_trace_stats_json(const char *path, json_t **out, gm_err *err)
{
    *out = NULL;
    gm_trace_reader *r;
    int rc = gm_trace_open(path, &r, err);
    if (rc != GM_OK) return rc;
    ts s;
    rc = ts_init(&s, err);
    if (rc == GM_OK) rc = ts_scan(&s, r, err);
    if (rc == GM_OK) {
        json_t *o = json_object();
        json_object_set_new(o, "path", jstr(path));
        json_object_set_new(o, "meta", meta_json(gm_trace_meta_get(r)));
        json_object_set_new(o, "events", json_integer((json_int_t)s.events));
        json_object_set_new(o, "allocations", json_integer((json_int_t)s.allocs));
        json_object_set_new(o, "alloc_bytes", json_integer((json_int_t)s.alloc_bytes));
        json_object_set_new(o, "peak_live_bytes", json_integer((json_int_t)s.peak));
        json_object_set_new(o, "peak_live_t_ns", json_integer((json_int_t)s.peak_t));
        json_object_set_new(o, "size_histogram", size_hist_json(&s));
        json_object_set_new(o, "categories", categories_json(&s));
        *out = o;
    }
    ts_free(&s);
    gm_trace_close(r);
    return rc;
}

/* Attach to the tenants of one gmsim-result/1; cache maps path -> stats. */
static int attach_result(json_t *res, json_t *cache, gm_err *err)
{
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(res, "tenants"), i, t)
    {
        const char *path = json_string_value(json_object_get(t, "trace"));
        if (!path || json_object_get(t, "trace_stats")) continue;
        json_t *st = json_object_get(cache, path);
        if (!st) {
            int rc = gm_trace_stats_json(path, &st, err);
            if (rc != GM_OK) return rc;
            json_object_set_new(cache, path, st);
        }
        json_object_set(t, "trace_stats", st);
    }
    return GM_OK;
}

int gm_trace_stats_attach(json_t *result, gm_err *err)
{
    json_t *cache = json_object();
    int rc = GM_OK;
    json_t *results = json_object_get(result, "results");
    if (json_is_array(results)) {
        size_t i;
        json_t *r;
        json_array_foreach(results, i, r)
        {
            if ((rc = attach_result(r, cache, err)) != GM_OK) break;
        }
    } else {
        rc = attach_result(result, cache, err);
    }
    json_decref(cache);
    return rc;
}
