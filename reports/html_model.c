/*
 * html_model.c - from result JSON to what the report draws: runs in ranked
 * order with labels, timelines on one column grid, shared axes. See
 * html_int.h. Missing members are tolerated (shown as "—"); only a wrong
 * schema is an error, since then nothing on the page could be trusted.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "html_int.h"
#include "results.h"
#include "sim/metrics.h"

static json_t *jget(json_t *obj, const char *path)
{
    char key[128];
    while (obj && *path) {
        const char *dot = strchr(path, '.');
        size_t n = dot ? (size_t)(dot - path) : strlen(path);
        if (n >= sizeof key) return NULL;
        memcpy(key, path, n);
        key[n] = '\0';
        obj = json_object_get(obj, key);
        path += n + (dot ? 1 : 0);
    }
    return obj;
}

double rep_num(json_t *obj, const char *path)
{
    json_t *v = jget(obj, path);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

const char *rep_str(json_t *obj, const char *path)
{
    return json_string_value(jget(obj, path));
}

int rep_same(json_t *a, json_t *b)
{
    return a == b || json_equal(a, b); /* json_equal(NULL, NULL) is 0 */
}

/* ------------------------------------------------------------ timelines */

typedef struct tl_cols {
    int t, q, a, r, f, qn, an, rn;
} tl_cols;

static int column(json_t *names, const char *name, int dflt)
{
    size_t i;
    json_t *v;
    json_array_foreach(names, i, v)
    {
        const char *s = json_string_value(v);
        if (s && !strcmp(s, name)) return (int)i;
    }
    return json_array_size(names) ? -1 : dflt;
}

static double cell(json_t *row, int i)
{
    json_t *v = i >= 0 ? json_array_get(row, (size_t)i) : NULL;
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* The timeline of a metrics object on the report's column grid, or NULL. */
static rep_cols *resample(json_t *metrics, double t0, double t1)
{
    json_t *tl = json_object_get(metrics, "timeline");
    json_t *pts = json_object_get(tl, "points"), *names = json_object_get(tl, "columns");
    size_t n = json_array_size(pts);
    if (n == 0) return NULL;
    tl_cols c = {column(names, "t_ns", 0),          column(names, "requested_max", 1),
                 column(names, "allocated_max", 2), column(names, "reserved_max", 3),
                 column(names, "ext_frag", 4),      column(names, "requested_min", 5),
                 column(names, "allocated_min", 6), column(names, "reserved_min", 7)};
    double width = rep_num(tl, "width_ns");
    if (isnan(width) || width < 0) width = 0;
    double *v = malloc(8 * n * sizeof *v);
    rep_cols *out = malloc(sizeof *out);
    if (!v || !out) {
        free(v);
        free(out);
        return NULL;
    }
    double *t = v, *q = v + n, *a = v + 2 * n, *r = v + 3 * n, *f = v + 4 * n;
    double *qn = v + 5 * n, *an = v + 6 * n, *rn = v + 7 * n;
    for (size_t i = 0; i < n; i++) {
        json_t *row = json_array_get(pts, i);
        t[i] = cell(row, c.t);
        q[i] = cell(row, c.q);
        a[i] = cell(row, c.a);
        r[i] = cell(row, c.r);
        f[i] = cell(row, c.f);
        qn[i] = cell(row, c.qn);
        an[i] = cell(row, c.an);
        rn[i] = cell(row, c.rn);
        /* -1: no sample in the bucket. The engine samples when an event opens
         * a bucket, so a quiet bucket has none though its state (and its
         * external fragmentation) is the previous one's: carry that over,
         * unless nothing was cached (then it is undefined: a gap). */
        if (f[i] < 0) f[i] = i > 0 && r[i] > a[i] ? f[i - 1] : NAN;
        if (isnan(t[i])) q[i] = a[i] = r[i] = f[i] = qn[i] = an[i] = rn[i] = NAN;
    }
    gm_resample_max(t, q, n, width, t0, t1, out->q, REP_NCOL);
    gm_resample_max(t, a, n, width, t0, t1, out->a, REP_NCOL);
    gm_resample_max(t, r, n, width, t0, t1, out->r, REP_NCOL);
    gm_resample_max(t, f, n, width, t0, t1, out->f, REP_NCOL);
    gm_resample_min(t, qn, n, width, t0, t1, out->q_min, REP_NCOL);
    gm_resample_min(t, an, n, width, t0, t1, out->a_min, REP_NCOL);
    gm_resample_min(t, rn, n, width, t0, t1, out->r_min, REP_NCOL);
    free(v);
    return out;
}

/* --------------------------------------------------------------- labels */

/* Inputs that may tell runs apart, and how a label names them. */
static const char *const label_keys[][2] = {
    {"allocator", "allocator"},
    {"alloc_conf_given", "conf"},
    {"capacity_bytes", "capacity"},
    {"memory_fraction", "fraction"},
    {"on_oom", "on OOM"},
    {"scope", "scope"},
    {NULL, NULL},
};

static void make_labels(rep *p)
{
    for (size_t i = 0; i < p->n; i++) {
        const char *pol = p->run[i].policy;
        if (pol)
            snprintf(p->run[i].label, sizeof p->run[i].label, "%s", pol);
        else
            snprintf(p->run[i].label, sizeof p->run[i].label, "run %zu", i + 1);
    }
    /* Runs that differ in more than the policy (gmsim report a.json b.json)
     * say how: the inputs that vary are added to every label. */
    for (size_t kk = 0; label_keys[kk][0]; kk++) {
        const char *k = label_keys[kk][0];
        int differ = 0;
        json_t *v0 = json_object_get(json_object_get(p->run[0].j, "inputs"), k);
        for (size_t i = 1; i < p->n && !differ; i++)
            differ = !rep_same(v0, json_object_get(json_object_get(p->run[i].j, "inputs"), k));
        if (!differ) continue;
        for (size_t i = 0; i < p->n; i++) {
            rep_run *r = &p->run[i];
            json_t *v = json_object_get(json_object_get(r->j, "inputs"), k);
            char val[160], b[48];
            if (json_is_string(v))
                snprintf(val, sizeof val, "%s", json_string_value(v));
            else if (!strcmp(k, "capacity_bytes") && json_is_number(v))
                gm_fmt_unit(json_number_value(v), gm_unit_bytes(json_number_value(v)), 2, val,
                            sizeof val);
            else if (json_is_number(v))
                snprintf(val, sizeof val, "%s", gm_fmt_num(json_number_value(v), 3, b, sizeof b));
            else if (!strcmp(k, "alloc_conf_given"))
                snprintf(val, sizeof val, "the trace's");
            else
                snprintf(val, sizeof val, "default");
            size_t len = strlen(r->label);
            snprintf(r->label + len, sizeof r->label - len, " \xc2\xb7 %s %s", label_keys[kk][1],
                     val);
        }
    }
}

/* -------------------------------------------------------------- ranking */

/* A saved run's place in the ranking (sim/metrics.h); NaN where the
 * result lacks a figure. */
static gm_rank_key rank_key(const rep_run *r)
{
    gm_rank_key k = {rep_num(r->m, "oom_count"), rep_num(r->m, "fragmentation"),
                     rep_num(r->m, "utilization"), rep_num(r->m, "driver.total_ns")};
    return k;
}

/* compare's order (gm_rank_cmp); bounds (the oracle) after every realizable
 * run; the given order breaks ties. */
static int by_merit(const rep *p, size_t x, size_t y)
{
    const rep_run *a = &p->run[x], *b = &p->run[y];
    if (a->realizable != b->realizable) return a->realizable ? -1 : 1;
    gm_rank_key ka = rank_key(a), kb = rank_key(b);
    int c = gm_rank_cmp(&ka, &kb, NULL);
    if (c) return c;
    return x < y ? -1 : 1;
}

/* A ranking or winner entry of gmsim-compare/1 -> run index, or -1. Takes
 * an index, a policy/label string, or an object with index/result or
 * policy/name/label. */
static int find_run(const rep *p, json_t *e, const unsigned char *used)
{
    if (json_is_object(e)) {
        json_t *i = json_object_get(e, "index");
        if (!i) i = json_object_get(e, "result");
        if (json_is_integer(i))
            e = i;
        else if (json_object_get(e, "policy"))
            e = json_object_get(e, "policy");
        else if (json_object_get(e, "label"))
            e = json_object_get(e, "label");
        else
            e = json_object_get(e, "name");
    }
    if (json_is_integer(e)) {
        json_int_t i = json_integer_value(e);
        return i >= 0 && (size_t)i < p->n && !(used && used[i]) ? (int)i : -1;
    }
    const char *s = json_string_value(e);
    for (size_t i = 0; s && i < p->n; i++)
        if (!(used && used[i]) &&
            ((p->run[i].policy && !strcmp(p->run[i].policy, s)) || !strcmp(p->run[i].label, s)))
            return (int)i;
    return -1;
}

/* compare's ranking (realizable policies, best first; the bound may be
 * left out and named separately): mapped to run indexes, the runs it does
 * not list appended after it. 0 when absent or not understood. */
static int given_order(rep *p)
{
    json_t *rk = json_object_get(p->root, "ranking");
    size_t m = json_array_size(rk);
    if (!p->compare || m == 0 || m > p->n) return 0;
    unsigned char *used = calloc(p->n, 1);
    if (!used) return 0;
    size_t i, k = 0;
    json_t *e;
    int ok = 1;
    json_array_foreach(rk, i, e)
    {
        int r = find_run(p, e, used);
        if (r < 0) {
            ok = 0;
            break;
        }
        used[r] = 1;
        p->order[k++] = (size_t)r;
    }
    for (i = 0; ok && i < p->n; i++)
        if (!used[i]) p->order[k++] = i;
    free(used);
    return ok;
}

static void rank(rep *p)
{
    p->ranking_given = given_order(p);
    if (!p->ranking_given) {
        /* insertion sort: a handful of runs, and no global sort context */
        for (size_t i = 0; i < p->n; i++) {
            size_t j = i;
            for (; j > 0 && by_merit(p, p->order[j - 1], i) > 0; j--)
                p->order[j] = p->order[j - 1];
            p->order[j] = i;
        }
    }
    int k = 0, realizable = 0;
    for (size_t i = 0; i < p->n; i++) {
        rep_run *r = &p->run[p->order[i]];
        r->rank = r->realizable ? ++k : 0;
        r->color = r->realizable ? k - 1 : -1;
        realizable += r->realizable;
    }
    p->winner = -1;
    json_t *w = p->compare ? json_object_get(p->root, "winner") : NULL;
    if (w) /* compare named it (null: no winner) */
        p->winner = find_run(p, w, NULL);
    else if (realizable > 1)
        for (size_t i = 0; i < p->n && p->winner < 0; i++)
            if (p->run[p->order[i]].realizable) p->winner = (int)p->order[i];
}

/* ----------------------------------------------------------------- axes */

static void axis(double max, double *top, double *step, gm_unit *u)
{
    *u = gm_unit_bytes(max > 0 ? max : 1);
    double s;
    *top = gm_nice_top((max > 0 ? max : 1) / u->div, 5, &s) * u->div;
    *step = s * u->div;
}

static void shared_axes(rep *p)
{
    double t0 = INFINITY, t1 = -INFINITY, ymax = 0, ymax_t = 0;
    for (size_t i = 0; i < p->n; i++) {
        rep_run *r = &p->run[i];
        double a = rep_num(r->m, "timeline.t0_ns"), b = rep_num(r->m, "t_last_ns");
        if (isnan(a)) a = rep_num(r->m, "t_first_ns");
        if (!isnan(a) && a < t0) t0 = a;
        if (!isnan(b) && b > t1) t1 = b;
        double pr = rep_num(r->m, "peak_reserved_bytes"), pl = rep_num(r->m, "peak_live_bytes");
        ymax = fmax(ymax, fmax(isnan(pr) ? 0 : pr, isnan(pl) ? 0 : pl));
        p->peak_live = fmax(p->peak_live, isnan(pl) ? 0 : pl);
        for (size_t k = 0; k < r->nt; k++) {
            double tr = rep_num(r->t[k].m, "peak_reserved_bytes");
            ymax_t = fmax(ymax_t, isnan(tr) ? 0 : tr);
        }
    }
    if (!(t0 < INFINITY)) t0 = 0;
    if (!(t1 > t0)) t1 = t0 + 1;
    p->t0 = t0;
    p->t1 = t1;
    p->tu = gm_unit_time(t1 - t0);
    /* The usable capacity (what R may reach: capacity minus the tenants'
     * contexts) joins the axis when runs hit it (OOMs) or come close; an
     * 80 GiB card under a 5 GiB job would flatten every line. */
    double top = ymax;
    p->capacity = p->run[0].capacity;
    p->usable = p->run[0].usable;
    for (size_t i = 0; i < p->n; i++) {
        const rep_run *r = &p->run[i];
        if (!(r->capacity == p->capacity)) p->capacity = p->usable = NAN;
        if (r->usable > 0 && (rep_num(r->m, "oom_count") > 0 || r->usable <= 1.3 * top))
            ymax = fmax(ymax, r->usable);
    }
    axis(ymax, &p->ymax, &p->ystep, &p->yu);
    axis(ymax_t, &p->ymax_t, &p->ystep_t, &p->yu_t);
}

/* ---------------------------------------------------------------- build */

static int add_runs(rep *p, json_t *root, char *err, size_t errlen)
{
    const char *schema = rep_str(root, "schema");
    json_t *list = NULL;
    if (schema && !strcmp(schema, GM_RESULT_SCHEMA)) {
        p->n = 1;
    } else if (schema && !strcmp(schema, GM_COMPARE_SCHEMA)) {
        p->compare = 1;
        list = json_object_get(root, "results");
        p->n = json_array_size(list);
        if (p->n == 0) {
            snprintf(err, errlen, "a %s document without results", GM_COMPARE_SCHEMA);
            return -1;
        }
    } else {
        snprintf(err, errlen, "not gmsim results (schema '%s'; expected %s or %s)",
                 schema ? schema : "missing", GM_RESULT_SCHEMA, GM_COMPARE_SCHEMA);
        return -1;
    }
    p->run = calloc(p->n, sizeof *p->run);
    p->order = calloc(p->n, sizeof *p->order);
    if (!p->run || !p->order) {
        snprintf(err, errlen, "out of host memory");
        return -1;
    }
    for (size_t i = 0; i < p->n; i++) {
        rep_run *r = &p->run[i];
        r->j = list ? json_array_get(list, i) : root;
        const char *s = rep_str(r->j, "schema");
        if (!json_is_object(r->j) || (s && strcmp(s, GM_RESULT_SCHEMA))) {
            snprintf(err, errlen, "result %zu is not a %s object", i, GM_RESULT_SCHEMA);
            return -1;
        }
        r->m = json_object_get(r->j, "device");
        r->policy = rep_str(r->j, "inputs.policy");
        json_t *real = jget(r->j, "inputs.policy_realizable");
        r->realizable = real ? json_is_true(real) : 1;
        r->capacity = rep_num(r->j, "inputs.capacity_bytes");
        double over = rep_num(r->j, "inputs.overhead_bytes");
        size_t nt = json_array_size(json_object_get(r->j, "tenants"));
        r->usable = r->capacity - (isnan(over) ? 0 : over) * (double)(nt ? nt : 1);
        json_t *ts = json_object_get(r->j, "tenants");
        r->nt = json_array_size(ts);
        r->t = calloc(r->nt ? r->nt : 1, sizeof *r->t);
        if (!r->t) {
            snprintf(err, errlen, "out of host memory");
            return -1;
        }
        for (size_t k = 0; k < r->nt; k++) {
            r->t[k].j = json_array_get(ts, k);
            r->t[k].m = json_object_get(r->t[k].j, "metrics");
        }
        if (r->nt > p->multi) p->multi = r->nt;
    }
    return 0;
}

static void lo_hi(const double *v, int c, double *lo, double *hi)
{
    if (isnan(v[c])) return;
    *lo = fmin(*lo, v[c]);
    *hi = fmax(*hi, v[c]);
}

static int cmp_dbl(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* The memory axis fitted to what is drawn: when the series of 99 % of the
 * columns and the reference lines (peak live, the usable capacity when it
 * is on the axis) stay in the top 70 % of [0, max], the axis starts at a
 * tick just below them, so a 6.3-6.74 GiB band fills the chart instead of
 * being a hair at its top. A drop in the remaining columns (everything
 * freed at the end) runs out of the plot's bottom edge (it is clipped). */
static void fit_axis(rep *p)
{
    size_t m = 0, cap = p->n * REP_NCOL;
    double hi = 0, *mins = malloc((cap ? cap : 1) * sizeof *mins);
    if (!mins) return;
    for (size_t i = 0; i < p->n; i++) {
        const rep_run *r = &p->run[i];
        if (!r->cols) { /* a run drawn as "no timeline": keep 0 */
            free(mins);
            return;
        }
        for (int c = 0; c < REP_NCOL; c++) {
            double lo = INFINITY;
            lo_hi(r->cols->q, c, &lo, &hi);
            lo_hi(r->cols->a, c, &lo, &hi);
            lo_hi(r->cols->r, c, &lo, &hi);
            lo_hi(r->cols->q_min, c, &lo, &hi);
            lo_hi(r->cols->a_min, c, &lo, &hi);
            lo_hi(r->cols->r_min, c, &lo, &hi);
            if (lo < INFINITY) mins[m++] = lo;
        }
    }
    qsort(mins, m, sizeof *mins, cmp_dbl);
    double lo = m ? mins[m / 100] : INFINITY;
    free(mins);
    for (size_t i = 0; i < p->n; i++) {
        const rep_run *r = &p->run[i];
        if (r->usable > 0 && r->usable <= p->ymax) {
            lo = fmin(lo, r->usable);
            hi = fmax(hi, r->usable);
        }
    }
    if (p->peak_live > 0) {
        lo = fmin(lo, p->peak_live);
        hi = fmax(hi, p->peak_live);
    }
    if (!(lo < INFINITY) || !(hi > lo) || lo < 0.3 * hi) return;
    double step = gm_nice_step((hi - lo) / p->yu.div, 5) * p->yu.div;
    double y0 = floor(lo / step) * step, y1 = ceil(hi / step) * step;
    if (y1 - hi < 0.02 * (y1 - y0)) y1 += step; /* room for the top line's label */
    p->ymin = y0;
    p->ymax = y1;
    p->ystep = step;
}

int rep_build(rep *p, json_t *root, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    p->root = root;
    p->winner = -1;
    if (add_runs(p, root, err, errlen) != 0) return -1;
    make_labels(p);
    rank(p);
    shared_axes(p);
    for (size_t i = 0; i < p->n; i++) {
        rep_run *r = &p->run[i];
        r->cols = resample(r->m, p->t0, p->t1);
        if (p->multi > 1)
            for (size_t k = 0; k < r->nt; k++)
                r->t[k].cols = resample(r->t[k].m, p->t0, p->t1);
    }
    fit_axis(p);
    return 0;
}

void rep_free(rep *p)
{
    for (size_t i = 0; p->run && i < p->n; i++) {
        for (size_t k = 0; k < p->run[i].nt; k++)
            free(p->run[i].t[k].cols);
        free(p->run[i].t);
        free(p->run[i].cols);
    }
    free(p->run);
    free(p->order);
    memset(p, 0, sizeof *p);
}

size_t rep_trace_stats(const rep *p, json_t **out, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < p->n; i++)
        for (size_t k = 0; k < p->run[i].nt; k++) {
            json_t *st = json_object_get(p->run[i].t[k].j, "trace_stats");
            const char *path = rep_str(st, "path");
            if (!json_is_object(st)) continue;
            int seen = 0;
            for (size_t j = 0; j < n && !seen; j++)
                seen = out[j] == st ||
                       (path && rep_str(out[j], "path") && !strcmp(rep_str(out[j], "path"), path));
            if (!seen && n < cap) out[n++] = st;
        }
    return n;
}
