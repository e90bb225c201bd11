/* leak.c - see leak.h. */
#include "leak.h"

#include <ctype.h>
#include <gsl/gsl_cdf.h>
#include <gsl/gsl_fit.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/addrmap.h"
#include "policies/period.h"
#include "traces/trace_scan.h"

#define FINE_BUCKETS 65536u /* live-bytes samples kept in the first pass */
#define CHUNK 65536u

/* ------------------------------------------------------------ groups */

/* The group an allocation's bytes are kept under: its call site when the
 * report groups by site (0: none recorded; a site beyond the table counts
 * as none), else its tensor category. */
static size_t group_of(const gm_leak_report *rep, uint8_t category, uint32_t site)
{
    if (rep->by_site) return site < rep->ngroups ? site : 0;
    return category < GM_CAT_COUNT ? category : GM_CAT_UNKNOWN;
}

static size_t leak_group(const gm_leak_report *rep, const gm_event *e)
{
    return group_of(rep, e->category, e->site);
}

/* Sites when the source has them and n boundaries x sites stay within
 * GM_LEAK_MAX_GROUP_CELLS, else categories. */
static void choose_groups(gm_leak_report *rep, const gm_leak_source *src, size_t n)
{
    size_t ns = src->sites ? src->sites->n : 0;
    rep->by_site = ns && (ns + 1) * (n ? n : 1) <= GM_LEAK_MAX_GROUP_CELLS;
    rep->ngroups = rep->by_site ? ns + 1 : GM_CAT_COUNT;
}

const char *gm_leak_group_kind(const gm_leak_report *rep)
{
    return rep->by_site ? "site" : "category";
}

const char *gm_leak_group_name(const gm_leak_report *rep, size_t g)
{
    if (!rep->by_site) return gm_category_name((int)g);
    const gm_sites *s = rep->site_names ? rep->site_names : &rep->sites;
    const char *n = g ? gm_sites_name(s, (uint32_t)g) : NULL;
    return n ? n : "(no site recorded)";
}

const char *gm_iter_source_name(int source)
{
    switch (source) {
    case GM_ITER_USER:
        return "--iteration-marker";
    case GM_ITER_MARKERS:
        return "iteration markers";
    case GM_ITER_NVTX:
        return "NVTX range";
    case GM_ITER_PERIOD:
        return "period of live bytes";
    default:
        return "none";
    }
}

const char *gm_leak_verdict_name(int verdict)
{
    switch (verdict) {
    case GM_LEAK_STEADY:
        return "steady";
    case GM_LEAK_GROWING:
        return "growing";
    case GM_LEAK_STOPPED:
        return "stopped growing";
    default:
        return "too few iterations";
    }
}

void gm_leak_report_free(gm_leak_report *rep)
{
    free(rep->pt);
    free(rep->group_bytes);
    free(rep->group_fit);
    gm_sites_free(&rep->sites);
    memset(rep, 0, sizeof *rep);
}

/* ------------------------------------------------------------ the fit */

void gm_leak_fit_line(const double *y, size_t first, size_t n, uint64_t min_growth, gm_leak_fit *f)
{
    memset(f, 0, sizeof *f);
    f->first = first;
    f->n = n;
    f->r2 = 1;
    if (n < 2) return;
    double *x = malloc(n * sizeof *x);
    if (!x) return;
    for (size_t i = 0; i < n; i++)
        x[i] = (double)(first + i);
    double c0, c1, cov00, cov01, cov11, sumsq;
    gsl_fit_linear(x, 1, y, 1, n, &c0, &c1, &cov00, &cov01, &cov11, &sumsq);
    free(x);
    f->intercept = c0;
    f->slope = c1;
    double tss = gsl_stats_tss(y, 1, n);
    /* an exact line leaves rounding in sumsq: relative to the data, 0 */
    double scale = fabs(gsl_stats_mean(y, 1, n)) + 1;
    if (sumsq < 1e-18 * scale * scale * (double)n) sumsq = 0, cov11 = 0;
    f->r2 = tss > 0 ? 1 - sumsq / tss : 1;
    f->sse = sumsq;
    f->slope_se = n > 2 ? sqrt(cov11) : 0;
    if (n < 3) return;
    f->t = f->slope_se > 0 ? c1 / f->slope_se : (c1 > 0 ? HUGE_VAL : 0);
    double growth = c1 * (double)(n - 1);
    uint64_t floor_b = min_growth ? min_growth : GM_LEAK_MIN_GROWTH;
    size_t ups = 0; /* a leak adds in many steps; one jump is a level shift */
    for (size_t i = 0; i + 1 < n; i++)
        ups += y[i + 1] > y[i];
    f->growing = c1 > 0 && growth >= (double)floor_b && 3 * ups >= n - 1 &&
                 (f->slope_se == 0 || f->t > gsl_cdf_tdist_Qinv(0.01, (double)(n - 2)));
}

/* ------------------------------------------------------------ boundaries */

typedef struct bounds {
    uint64_t *idx;
    size_t n, cap;
} bounds;

static int bounds_add(bounds *b, uint64_t i)
{
    if (b->n && b->idx[b->n - 1] >= i) return GM_OK; /* same event: one boundary */
    if (b->n == GM_LEAK_MAX_POINTS) return GM_OK;
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        uint64_t *v = realloc(b->idx, cap * sizeof *v);
        if (!v) return GM_ENOMEM;
        b->idx = v;
        b->cap = cap;
    }
    b->idx[b->n++] = i;
    return GM_OK;
}

/* Markers chosen as iteration starts, sorted by time. */
typedef struct mark_ref {
    uint64_t t_ns;
    size_t order;
} mark_ref;

static int cmp_mark(const void *x, const void *y)
{
    const mark_ref *a = x, *b = y;
    if (a->t_ns != b->t_ns) return a->t_ns < b->t_ns ? -1 : 1;
    return a->order < b->order ? -1 : a->order > b->order;
}

/* The name without trailing digits, spaces, '#', '_' or '-' ("step 12" -> "step"). */
static size_t stem_len(const char *s)
{
    size_t n = strnlen(s, GM_MARKER_NAME_LEN);
    while (n && (isdigit((unsigned char)s[n - 1]) || strchr(" #_-:", s[n - 1])))
        n--;
    return n ? n : strnlen(s, GM_MARKER_NAME_LEN);
}

static int user_match(const gm_marker *m, const char *name)
{
    return m->kind != GM_MARK_RANGE_POP && !strncmp(m->name, name, strlen(name));
}

/* The indices into marks of the markers that start iterations. */
static int choose_markers(const gm_leak_source *src, const gm_leak_opts *o, gm_leak_report *rep,
                          mark_ref **out, size_t *nout, gm_err *err)
{
    size_t nm = src->nmarks, k = 0;
    *out = NULL;
    *nout = 0;
    if (!nm && !(o && o->marker)) return GM_OK;
    mark_ref *v = malloc((nm ? nm : 1) * sizeof *v);
    if (!v) return gm_errf(err, GM_ENOMEM, "out of host memory");
    if (o && o->marker) {
        for (size_t i = 0; i < nm; i++)
            if (user_match(&src->marks[i], o->marker)) v[k++] = (mark_ref){src->marks[i].t_ns, i};
        if (!k) {
            char names[256] = "";
            size_t used = 0;
            for (size_t i = 0; i < nm && used + 70 < sizeof names; i++) {
                if (src->marks[i].kind == GM_MARK_RANGE_POP) continue;
                if (strstr(names, src->marks[i].name)) continue;
                used += (size_t)snprintf(names + used, sizeof names - used, "%s'%.*s'",
                                         used ? ", " : "", 60, src->marks[i].name);
            }
            free(v);
            return gm_errf(err, GM_EINVAL,
                           "--iteration-marker %s: no marker of the trace is named so (%s); "
                           "name one of them, or leave the option out to find iterations "
                           "by themselves",
                           o->marker, used ? names : "it has no markers");
        }
        rep->source = GM_ITER_USER;
        snprintf(rep->marker, sizeof rep->marker, "%s", o->marker);
    } else {
        for (size_t i = 0; i < nm; i++)
            if (src->marks[i].kind == GM_MARK_ITERATION) v[k++] = (mark_ref){src->marks[i].t_ns, i};
        if (k >= 2) {
            rep->source = GM_ITER_MARKERS;
            snprintf(rep->marker, sizeof rep->marker, "%.*s",
                     (int)stem_len(src->marks[v[0].order].name), src->marks[v[0].order].name);
        } else {
            k = 0;
            /* top-level range pushes, in time order */
            for (size_t i = 0; i < nm; i++)
                if (src->marks[i].kind == GM_MARK_RANGE_PUSH ||
                    src->marks[i].kind == GM_MARK_RANGE_POP)
                    v[k++] = (mark_ref){src->marks[i].t_ns, i};
            qsort(v, k, sizeof *v, cmp_mark);
            size_t top = 0;
            int depth = 0;
            for (size_t i = 0; i < k; i++) {
                const gm_marker *m = &src->marks[v[i].order];
                if (m->kind == GM_MARK_RANGE_POP) {
                    depth -= depth > 0;
                    continue;
                }
                if (depth++ == 0) v[top++] = v[i];
            }
            /* the most frequent stem among them */
            size_t best = 0, best_n = 0;
            for (size_t i = 0; i < top; i++) {
                const char *a = src->marks[v[i].order].name;
                size_t la = stem_len(a), c = 0;
                for (size_t j = 0; j < top; j++) {
                    const char *b = src->marks[v[j].order].name;
                    c += stem_len(b) == la && !strncmp(a, b, la);
                }
                if (c > best_n) best = i, best_n = c;
            }
            k = 0;
            if (best_n >= 2) {
                const char *a = src->marks[v[best].order].name;
                size_t la = stem_len(a);
                rep->source = GM_ITER_NVTX;
                snprintf(rep->marker, sizeof rep->marker, "%.*s", (int)la, a);
                for (size_t j = 0; j < top; j++) {
                    const char *b = src->marks[v[j].order].name;
                    if (stem_len(b) == la && !strncmp(a, b, la)) v[k++] = v[j];
                }
            }
        }
    }
    qsort(v, k, sizeof *v, cmp_mark);
    *out = v;
    *nout = k;
    return GM_OK;
}

/* ------------------------------------------------------------ pass 1 */

/* Pass 1: live bytes before each event, kept per fine bucket (mean, and
 * the least with where it was), and the chosen markers turned into event
 * indices. */
typedef struct pass1 {
    gm_live live; /* live allocations (traces/live_slots.h) -> requested bytes | LIVE */
    uint64_t live_bytes;
    size_t nb;
    double *sum;
    uint64_t *cnt, *min, *argmin;
} pass1;

static void pass1_free(pass1 *p)
{
    gm_live_free(&p->live);
    free(p->sum);
    free(p->cnt);
    free(p->min);
    free(p->argmin);
}

/* A live entry's value is never 0 (traces/live_slots.h): pass 1 keeps a
 * size with this bit set, pass 2 a slot's index + 1. */
#define LIVE (1ull << 63)

/* m: the blocks of /initial_state, each address once (by id where the
 * trace numbered them), their bytes added to *live_bytes; put, if given,
 * makes each one's value (an error when negative), else its size | LIVE. */
static int live_init(gm_live *m, const gm_leak_source *src, uint64_t *live_bytes,
                     int (*put)(void *ctx, const gm_init_row *row), void *ctx)
{
    if (gm_live_init(m, src->dense_ids)) return GM_ENOMEM;
    gm_live_seeded(m, src->init, src->ninit);
    uint32_t k = 0;
    for (size_t i = 0; i < src->ninit; i++) {
        const gm_init_row *w = &src->init[i];
        if (w->kind != GM_INIT_BLOCK) continue;
        uint32_t id = gm_live_block_id(m, &k);
        if (gm_live_get(m, id, w->addr)) continue;
        uint64_t v = w->size | LIVE;
        if (put) {
            int rc = put(ctx, w);
            if (rc < 0) return rc;
            v = (uint64_t)rc + 1;
        }
        if (gm_live_put(m, id, w->addr, v)) return GM_ENOMEM;
        *live_bytes += w->size;
    }
    return GM_OK;
}

static int run_pass1(const gm_leak_source *src, const mark_ref *mk, size_t nmk, pass1 *p, bounds *b,
                     gm_err *err)
{
    uint64_t N = src->nevents;
    p->nb = N < FINE_BUCKETS ? (size_t)N : FINE_BUCKETS;
    size_t nb = p->nb ? p->nb : 1;
    p->sum = calloc(nb, sizeof *p->sum);
    p->cnt = calloc(nb, sizeof *p->cnt);
    p->min = malloc(nb * sizeof *p->min);
    p->argmin = calloc(nb, sizeof *p->argmin);
    gm_event *buf = malloc(CHUNK * sizeof *buf);
    int rc = p->sum && p->cnt && p->min && p->argmin && buf ? GM_OK : GM_ENOMEM;
    if (rc == GM_OK) rc = live_init(&p->live, src, &p->live_bytes, NULL, NULL);
    if (rc != GM_OK) {
        free(buf);
        return gm_errf(err, GM_ENOMEM, "out of host memory");
    }
    for (size_t i = 0; i < nb; i++)
        p->min[i] = UINT64_MAX;
    size_t next_mark = 0;
    uint64_t index = 0;
    for (;;) {
        int64_t got = src->read(src->ctx, buf, CHUNK, err);
        if (got < 0) {
            rc = (int)got;
            break;
        }
        if (got == 0) break;
        for (int64_t j = 0; j < got && rc == GM_OK; j++, index++) {
            const gm_event *e = &buf[j];
            while (next_mark < nmk && mk[next_mark].t_ns <= e->t_ns) {
                rc = bounds_add(b, index);
                next_mark++;
            }
            if (index < N) {
                size_t k = (size_t)((double)index * (double)nb / (double)N);
                k = k < nb ? k : nb - 1;
                p->sum[k] += (double)p->live_bytes;
                p->cnt[k]++;
                if (p->live_bytes < p->min[k]) p->min[k] = p->live_bytes, p->argmin[k] = index;
            }
            uint64_t v;
            if (e->op == GM_OP_ALLOC) {
                gm_live_count_alloc(&p->live);
                if (gm_live_del(&p->live, e->id, e->addr, &v)) p->live_bytes -= v & ~LIVE;
                if (gm_live_put(&p->live, e->id, e->addr, e->size | LIVE)) rc = GM_ENOMEM;
                p->live_bytes += e->size;
            } else if (e->op == GM_OP_FREE && gm_live_del(&p->live, e->id, e->addr, &v)) {
                p->live_bytes -= v & ~LIVE;
            }
        }
        if (rc != GM_OK) break;
    }
    free(buf);
    if (rc == GM_ENOMEM) return gm_errf(err, GM_ENOMEM, "out of host memory");
    return rc;
}

/* ------------------------------------------------------------ period */

/* The fine bucket (and event) of least live bytes in events [lo, hi). */
static int least_in(const pass1 *p, uint64_t N, double lo, double hi, uint64_t *at)
{
    size_t nb = p->nb;
    size_t a = (size_t)(lo < 0 ? 0 : lo * (double)nb / (double)N);
    size_t z = (size_t)ceil(hi * (double)nb / (double)N);
    z = z < nb ? z : nb;
    uint64_t best = UINT64_MAX;
    for (size_t k = a; k < z; k++)
        if (p->cnt[k] && p->min[k] < best) best = p->min[k], *at = p->argmin[k];
    return best != UINT64_MAX;
}

static int period_bounds(const pass1 *p, uint64_t N, gm_leak_report *rep, bounds *b)
{
    if (p->nb < 32) return GM_OK;
    size_t d = (p->nb + GM_PERIOD_WIN - 1) / GM_PERIOD_WIN; /* fine buckets per sample */
    size_t ns = p->nb / d;
    double *x = malloc(ns * sizeof *x);
    gm_period_work *w = malloc(sizeof *w);
    int rc = x && w ? GM_OK : GM_ENOMEM;
    double lag = 0, conf = 0;
    if (rc == GM_OK) {
        for (size_t i = 0; i < ns; i++) {
            double s = 0, c = 0;
            for (size_t k = i * d; k < (i + 1) * d; k++)
                s += p->sum[k], c += (double)p->cnt[k];
            x[i] = c > 0 ? s / c : (i ? x[i - 1] : 0);
        }
        /* a leak's trend would correlate every lag: take the line out first */
        double *t = w->fft; /* scratch for the abscissae */
        for (size_t i = 0; i < ns; i++)
            t[i] = (double)i;
        double c0, c1, cov00, cov01, cov11, sumsq;
        gsl_fit_linear(t, 1, x, 1, ns, &c0, &c1, &cov00, &cov01, &cov11, &sumsq);
        for (size_t i = 0; i < ns; i++)
            x[i] -= c0 + c1 * (double)i;
        lag = gm_period_lag(w, x, ns, &conf);
    }
    free(x);
    free(w);
    if (rc != GM_OK || lag <= 0) return rc;
    double P = lag * (double)d * (double)N / (double)p->nb; /* events per iteration */
    if (P < 2) return GM_OK;
    uint64_t at = 0;
    if (!least_in(p, N, 0, P, &at)) return GM_OK;
    bounds tmp = {0};
    rc = bounds_add(&tmp, at);
    while (rc == GM_OK && (double)at + 1.25 * P <= (double)N) { /* a whole window */
        uint64_t next = 0;
        if (!least_in(p, N, (double)at + 0.75 * P, (double)at + 1.25 * P, &next) || next <= at)
            break;
        at = next;
        rc = bounds_add(&tmp, at);
    }
    if (rc == GM_OK && tmp.n >= GM_LEAK_MIN_POINTS) {
        free(b->idx);
        *b = tmp;
        rep->source = GM_ITER_PERIOD;
        rep->period_events = P;
        rep->period_r = conf;
    } else {
        free(tmp.idx);
    }
    return rc;
}

/* ------------------------------------------------------------ pass 2 */

typedef struct slot {
    uint64_t size;
    uint32_t group;
    uint32_t iter; /* 0: before the first boundary, k + 1: iteration k */
} slot;

typedef struct pass2 {
    gm_live live; /* live allocations (traces/live_slots.h) -> index into slots + 1 */
    slot *slots;
    size_t nslots, capslots;
    uint64_t *free_list;
    size_t nfree;
    uint64_t live_bytes, peak;
    uint64_t *group_live;
    uint64_t *iter_bytes, *iter_count; /* by iteration k: live bytes made in it */
    uint64_t old_bytes, old_count;     /* made in iterations <= cur - 2 */
    size_t cur;                        /* boundaries passed */
    const gm_leak_report *rep;         /* its grouping */
} pass2;

static int slot_new(pass2 *q, uint64_t size, size_t group, uint32_t iter)
{
    uint64_t i;
    if (q->nfree) {
        i = q->free_list[--q->nfree];
    } else {
        if (q->nslots == q->capslots) {
            size_t cap = q->capslots ? q->capslots * 2 : 4096;
            slot *s = realloc(q->slots, cap * sizeof *s);
            uint64_t *f = s ? realloc(q->free_list, cap * sizeof *f) : NULL;
            if (s) q->slots = s;
            if (!f) return GM_ENOMEM;
            q->free_list = f;
            q->capslots = cap;
        }
        i = q->nslots++;
    }
    q->slots[i] = (slot){size, (uint32_t)group, iter};
    q->live_bytes += size;
    q->group_live[group] += size;
    if (iter) {
        q->iter_bytes[iter - 1] += size;
        q->iter_count[iter - 1]++;
    }
    return i <= INT32_MAX ? (int)i : GM_ENOMEM;
}

static void slot_drop(pass2 *q, uint64_t i)
{
    slot *s = &q->slots[i];
    q->live_bytes -= s->size;
    q->group_live[s->group] -= s->size;
    if (s->iter) {
        q->iter_bytes[s->iter - 1] -= s->size;
        q->iter_count[s->iter - 1]--;
        if (s->iter + 2 <= q->cur) { /* iteration iter - 1 <= cur - 3: old (cur - 1 is running) */
            q->old_bytes -= s->size;
            q->old_count--;
        }
    }
    q->free_list[q->nfree++] = i;
}

static int put_init(void *ctx, const gm_init_row *w)
{
    pass2 *q = ctx;
    return slot_new(q, w->size, group_of(q->rep, w->category, w->site),
                    0); /* its index, or GM_ENOMEM */
}

static void at_boundary(pass2 *q, gm_leak_report *rep, const gm_event *e, uint64_t index)
{
    size_t k = q->cur;
    if (k) rep->pt[k - 1].peak_bytes = q->peak;
    if (k >= 2) { /* iteration k - 2 becomes old */
        q->old_bytes += q->iter_bytes[k - 2];
        q->old_count += q->iter_count[k - 2];
    }
    gm_iter_point *p = &rep->pt[k];
    p->event_index = index;
    p->t_ns = e ? e->t_ns : 0;
    p->live_bytes = q->live_bytes;
    p->carried_bytes = q->old_bytes;
    p->carried_count = q->old_count;
    memcpy(&rep->group_bytes[k * rep->ngroups], q->group_live,
           rep->ngroups * sizeof *q->group_live);
    q->peak = q->live_bytes;
    q->cur++;
}

static int run_pass2(const gm_leak_source *src, const bounds *b, gm_leak_report *rep, gm_err *err)
{
    pass2 q = {.rep = rep};
    size_t G = rep->ngroups, n = b->n;
    q.group_live = calloc(G, sizeof *q.group_live);
    q.iter_bytes = calloc(n, sizeof *q.iter_bytes);
    q.iter_count = calloc(n, sizeof *q.iter_count);
    rep->pt = calloc(n, sizeof *rep->pt);
    rep->group_bytes = calloc(n * G, sizeof *rep->group_bytes);
    gm_event *buf = malloc(CHUNK * sizeof *buf);
    int rc = q.group_live && q.iter_bytes && q.iter_count && rep->pt && rep->group_bytes && buf
                 ? GM_OK
                 : GM_ENOMEM;
    uint64_t ignored = 0;
    if (rc == GM_OK) rc = live_init(&q.live, src, &ignored, put_init, &q);
    q.peak = q.live_bytes;
    uint64_t index = 0;
    while (rc == GM_OK) {
        int64_t got = src->read(src->ctx, buf, CHUNK, err);
        if (got <= 0) {
            if (got < 0) rc = (int)got;
            break;
        }
        for (int64_t j = 0; j < got && rc == GM_OK; j++, index++) {
            const gm_event *e = &buf[j];
            if (q.cur < n && b->idx[q.cur] == index) at_boundary(&q, rep, e, index);
            uint64_t v;
            if (e->op == GM_OP_ALLOC) {
                gm_live_count_alloc(&q.live);
                if (gm_live_del(&q.live, e->id, e->addr, &v)) slot_drop(&q, v - 1);
                int i = slot_new(&q, e->size, leak_group(rep, e), (uint32_t)q.cur);
                if (i < 0 || gm_live_put(&q.live, e->id, e->addr, (uint64_t)i + 1)) rc = GM_ENOMEM;
                if (q.live_bytes > q.peak) q.peak = q.live_bytes;
            } else if (e->op == GM_OP_FREE && gm_live_del(&q.live, e->id, e->addr, &v)) {
                slot_drop(&q, v - 1);
            }
        }
    }
    if (rc == GM_OK && q.cur) rep->pt[q.cur - 1].peak_bytes = q.peak;
    rep->n = q.cur;
    free(buf);
    gm_live_free(&q.live);
    free(q.slots);
    free(q.free_list);
    free(q.group_live);
    free(q.iter_bytes);
    free(q.iter_count);
    if (rc == GM_ENOMEM) return gm_errf(err, GM_ENOMEM, "out of host memory");
    return rc;
}

/* ------------------------------------------------------------ judging */

/* A least-squares line's running sums (Welford's updates: co-moments about
 * the running means, which do not cancel as raw sums of squares would). */
typedef struct line_acc {
    double n, mx, my, sxx, sxy, syy;
} line_acc;

static void line_add(line_acc *a, double x, double y)
{
    a->n += 1;
    double dx = x - a->mx, dy = y - a->my;
    a->mx += dx / a->n;
    a->my += dy / a->n;
    a->sxx += dx * (x - a->mx);
    a->sxy += dx * (y - a->my);
    a->syy += dy * (y - a->my);
}

/* The line's sum of squared residuals, from its sums. */
static double line_sse(const line_acc *a)
{
    double r = a->sxx > 0 ? a->syy - a->sxy * a->sxy / a->sxx : a->syy;
    return r > 0 ? r : 0;
}

/*
 * The change point of judge(): the first j in [w + 2, n - GM_LEAK_MIN_POINTS]
 * whose two fits, y[w..j] and y[j..n) (gm_leak_fit_line), leave the least
 * sum of squared residuals; 0 when there is no such j.
 *
 * Fitting both lines at every j costs O(n) a j, O(n^2) in all: a 100 M-event
 * trace's 38 521 iterations took ~55 s (`gmsim info`, bench/README
 * "Twenty-first round"). Each line's sum comes instead from running sums in
 * O(1), the prefixes left to right and the tails right to left, which is the
 * same sum up to rounding. The rounding is bounded (tol below: the running
 * sums' error is a few ulps of the series' sum of squares, far under 1e-9 of
 * it, and gm_leak_fit_line rounds a near-exact line's sum down to 0 below
 * 1e-18 (|mean| + 1)^2 n), so the j that the scan of every j would choose is
 * among those whose approximate sum is within 2 tol of the least: only
 * those are fitted as before, first to last, keeping the first least as the
 * scan did. A least of exactly 0 cannot be beaten: the search stops there.
 */
size_t gm_leak_change_point(const double *y, size_t w, size_t n, uint64_t min_growth)
{
    if (n < GM_LEAK_MIN_POINTS || w + 2 + GM_LEAK_MIN_POINTS > n) return 0;
    size_t lo = w + 2, hi = n - GM_LEAK_MIN_POINTS; /* j in [lo, hi] */
    double *s = malloc((hi - lo + 1) * sizeof *s);  /* NULL (no memory): every j is fitted */
    double least = 0, tol = 0;
    if (s) {
        line_acc a = {0}, all = {0};
        double ymax = 0;
        for (size_t k = n; k-- > w;) { /* the tails y[j..n), and the whole */
            line_add(&a, (double)k, y[k]);
            line_add(&all, (double)k, y[k]);
            ymax = fmax(ymax, fabs(y[k]));
            if (k >= lo && k <= hi) s[k - lo] = line_sse(&a);
        }
        a = (line_acc){0};
        least = HUGE_VAL;
        for (size_t k = w; k <= hi; k++) { /* the prefixes y[w..j] */
            line_add(&a, (double)k, y[k]);
            if (k < lo) continue;
            s[k - lo] += line_sse(&a);
            least = fmin(least, s[k - lo]);
        }
        /* how far an approximate sum may be from gm_leak_fit_line's: the
         * running sums' rounding (at most ~n ulps of a segment's sum of
         * squares about its mean, which is at most the whole's), with room
         * to spare, and the rounding of a near-exact line's sum to 0 */
        tol = (1e-9 + 8 * (double)n * DBL_EPSILON) * (all.syy + 1) +
              2e-18 * (ymax + 1) * (ymax + 1) * (double)n;
    }
    size_t best_j = 0;
    double best = HUGE_VAL;
    gm_leak_fit pre, tail;
    for (size_t j = lo; j <= hi && best > 0; j++) {
        if (s && s[j - lo] > least + 2 * tol) continue;
        gm_leak_fit_line(y + w, w, j - w + 1, min_growth, &pre);
        gm_leak_fit_line(y + j, j, n - j, min_growth, &tail);
        if (pre.sse + tail.sse < best) best = pre.sse + tail.sse, best_j = j;
    }
    free(s);
    return best_j;
}

static double median(double *v, size_t n)
{
    gsl_sort(v, 1, n);
    return gsl_stats_median_from_sorted_data(v, 1, n);
}

/* Leading boundaries whose step out is unlike the steps after it. */
static size_t warmup(const double *y, size_t n)
{
    size_t w = 0;
    double *d = malloc(n * sizeof *d);
    if (!d) return 0;
    while (w < GM_LEAK_MAX_WARMUP && n - (w + 1) >= GM_LEAK_MIN_POINTS) {
        size_t m = 0;
        for (size_t k = w + 1; k + 1 < n; k++)
            d[m++] = y[k + 1] - y[k];
        double med = median(d, m);
        for (size_t i = 0; i < m; i++)
            d[i] = fabs(d[i] - med);
        double mad = median(d, m);
        double tol = fmax(64.0 * 1024, fmax(0.1 * fabs(med), 3 * mad));
        if (fabs(y[w + 1] - y[w] - med) <= tol) break;
        w++;
    }
    free(d);
    return w;
}

static void judge(gm_leak_report *rep, uint64_t min_growth)
{
    size_t n = rep->n;
    rep->runout_iteration = -1;
    if (n < GM_LEAK_MIN_POINTS) {
        rep->verdict = GM_LEAK_UNKNOWN;
        return;
    }
    double *y = malloc(n * sizeof *y);
    rep->group_fit = calloc(rep->ngroups, sizeof *rep->group_fit);
    if (!y || !rep->group_fit) {
        free(y);
        return;
    }
    for (size_t k = 0; k < n; k++)
        y[k] = (double)rep->pt[k].live_bytes;
    size_t w = rep->warmup = warmup(y, n);
    size_t m = n - w;
    gm_leak_fit_line(y + w, w, m, min_growth, &rep->fit);
    rep->verdict = rep->fit.growing ? GM_LEAK_GROWING : GM_LEAK_STEADY;
    /* stopped: the change point, a growing prefix [w, j], a tail [j, n) that is not */
    size_t best_j = gm_leak_change_point(y, w, n, min_growth);
    gm_leak_fit pre, tail;
    if (best_j) {
        gm_leak_fit_line(y + w, w, best_j - w + 1, min_growth, &pre);
        gm_leak_fit_line(y + best_j, best_j, n - best_j, min_growth, &tail);
        if (pre.growing && !tail.growing && tail.slope < 0.25 * pre.slope) {
            rep->verdict = GM_LEAK_STOPPED;
            rep->growth_end = best_j;
            rep->fit = pre;
        }
    }
    for (size_t g = 0; g < rep->ngroups; g++) {
        for (size_t k = 0; k < rep->fit.n; k++)
            y[k] = (double)rep->group_bytes[(rep->fit.first + k) * rep->ngroups + g];
        gm_leak_fit_line(y, rep->fit.first, rep->fit.n, min_growth, &rep->group_fit[g]);
    }
    free(y);
    for (size_t k = w; k < n; k++)
        if (rep->pt[k].peak_bytes - rep->pt[k].live_bytes > rep->rise_bytes)
            rep->rise_bytes = rep->pt[k].peak_bytes - rep->pt[k].live_bytes;
    if (rep->verdict == GM_LEAK_GROWING && rep->capacity_bytes) {
        double room = (double)rep->capacity_bytes - (double)rep->rise_bytes - rep->fit.intercept;
        double k = floor(room / rep->fit.slope) + 1;
        rep->runout_iteration = k < 0 ? 0 : (int64_t)fmin(k, 9e18);
    }
}

int gm_leak_analyze(const gm_leak_source *src, const gm_leak_opts *o, gm_leak_report *rep,
                    gm_err *err)
{
    memset(rep, 0, sizeof *rep);
    rep->nevents = src->nevents;
    rep->site_names = src->sites;
    rep->capacity_bytes = o ? o->capacity_bytes : 0;
    rep->runout_iteration = -1;
    mark_ref *mk;
    size_t nmk;
    int rc = choose_markers(src, o, rep, &mk, &nmk, err);
    if (rc != GM_OK) return rc;
    pass1 p = {0};
    bounds b = {0};
    rc = run_pass1(src, mk, nmk, &p, &b, err);
    free(mk);
    if (rc == GM_OK && b.n < 2) { /* markers that make no iteration: look for a period */
        b.n = 0;
        if (rep->source != GM_ITER_USER) {
            rep->source = GM_ITER_NONE;
            rep->marker[0] = '\0';
            if (period_bounds(&p, src->nevents, rep, &b) != GM_OK)
                rc = gm_errf(err, GM_ENOMEM, "out of host memory");
        }
    }
    pass1_free(&p);
    choose_groups(rep, src, b.n);
    if (rc == GM_OK && b.n) rc = src->rewind(src->ctx, err);
    if (rc == GM_OK && b.n) rc = run_pass2(src, &b, rep, err);
    free(b.idx);
    if (rc == GM_OK) judge(rep, o ? o->min_growth_bytes : 0);
    return rc;
}

/* ------------------------------------------------------------ sources */

/* A trace as a source; the tap, when given, sees every chunk the first
 * pass reads (the reads before the analysis rewinds for its second). */
typedef struct trace_src {
    gm_trace_reader *r;
    const gm_leak_tap *tap[2]; /* the first pass's, the second's */
    int rewinds;
    uint64_t tapped[2];
} trace_src;

static int64_t trace_read(void *ctx, gm_event *buf, size_t cap, gm_err *err)
{
    trace_src *t = ctx;
    uint64_t first = gm_trace_position(t->r);
    int64_t n = gm_trace_read(t->r, buf, cap, err);
    const gm_leak_tap *tap = t->rewinds < 2 ? t->tap[t->rewinds] : NULL;
    if (n > 0 && tap) {
        int rc = tap->fn(tap->ctx, buf, (size_t)n, first, err);
        if (rc != GM_OK) return rc;
        t->tapped[t->rewinds] += (uint64_t)n;
    }
    return n;
}

/* r back to its first event, or the error that says it cannot be. */
static int rewind_or_fail(gm_trace_reader *r, gm_err *err)
{
    if (gm_trace_rewind(r) != GM_OK)
        return gm_errf(err, GM_EIO, "%s: cannot read the trace again from its start",
                       gm_trace_path(r));
    return GM_OK;
}

static int trace_rewind(void *ctx, gm_err *err)
{
    trace_src *t = ctx;
    t->rewinds++;
    return rewind_or_fail(t->r, err);
}

int gm_leak_analyze_trace_tap(gm_trace_reader *r, const gm_leak_opts *o, gm_leak_report *rep,
                              const gm_leak_tap *first, const gm_leak_tap *second,
                              uint64_t tapped[2], gm_err *err)
{
    memset(rep, 0, sizeof *rep);
    gm_leak_opts oo = o ? *o : (gm_leak_opts){0};
    const gm_trace_meta *m = gm_trace_meta_get(r);
    if (!oo.capacity_bytes)
        oo.capacity_bytes = m->device_avail_bytes ? m->device_avail_bytes : m->device_total_bytes;
    trace_src ts = {.r = r, .tap = {first, second}};
    gm_leak_source src = {.nevents = gm_trace_nevents(r),
                          .read = trace_read,
                          .rewind = trace_rewind,
                          .ctx = &ts,
                          .dense_ids = m->dense_ids};
    gm_init_row *init = NULL;
    gm_marker *marks = NULL;
    gm_sites sites = {0};
    int rc = trace_rewind(&ts, err);
    ts.rewinds = 0; /* the first pass reads from here */
    if (rc == GM_OK) rc = gm_trace_read_initial(r, &init, &src.ninit, err);
    if (rc == GM_OK) rc = gm_trace_read_markers(r, &marks, &src.nmarks, err);
    if (rc == GM_OK) rc = gm_trace_read_sites(r, &sites, err);
    src.init = init;
    src.marks = marks;
    src.sites = &sites;
    if (rc == GM_OK) rc = gm_leak_analyze(&src, &oo, rep, err);
    rep->sites = sites; /* the report owns the names from here */
    rep->site_names = NULL;
    if (rc == GM_OK) rc = trace_rewind(&ts, err);
    free(init);
    free(marks);
    if (tapped) tapped[0] = ts.tapped[0], tapped[1] = ts.tapped[1];
    return rc;
}

int gm_leak_analyze_trace(gm_trace_reader *r, const gm_leak_opts *o, gm_leak_report *rep,
                          gm_err *err)
{
    return gm_leak_analyze_trace_tap(r, o, rep, NULL, NULL, NULL, err);
}

static int scan_tap(void *ctx, const gm_event *ev, size_t n, uint64_t first, gm_err *err)
{
    return gm_trace_scan_feed(ctx, ev, n, first, err);
}

int gm_leak_scan_trace(gm_trace_reader *r, const gm_leak_opts *o, gm_trace_scan *s,
                       gm_leak_report *rep, const gm_leak_tap *second, uint64_t *second_tapped,
                       gm_err *err)
{
    if (second_tapped) *second_tapped = 0;
    int rc = gm_trace_scan_begin(r, s, err);
    if (rc != GM_OK) return rc;
    gm_leak_tap tap = {scan_tap, s};
    uint64_t tapped[2] = {0, 0};
    gm_err lerr = {0};
    int lrc = gm_leak_analyze_trace_tap(r, o, rep, &tap, second, tapped, &lerr);
    if (second_tapped) *second_tapped = tapped[1];
    if (tapped[0] != gm_trace_nevents(r)) {
        /* the analysis stopped before its first pass read every event (an
         * error, or one it found before reading): the scan reads them
         * itself, and its error comes first, as when it ran first */
        gm_trace_scan_free(s);
        memset(s, 0, sizeof *s);
        rc = rewind_or_fail(r, err);
        if (rc == GM_OK) rc = gm_trace_scan_run(r, s, err);
        if (rc != GM_OK) return rc;
    }
    if (lrc != GM_OK) *err = lerr;
    return lrc;
}

typedef struct mem_src {
    const gm_event *ev;
    size_t n, pos;
} mem_src;

static int64_t mem_read(void *ctx, gm_event *buf, size_t cap, gm_err *err)
{
    mem_src *s = ctx;
    (void)err;
    size_t k = s->n - s->pos < cap ? s->n - s->pos : cap;
    memcpy(buf, s->ev + s->pos, k * sizeof *buf);
    s->pos += k;
    return (int64_t)k;
}

static int mem_rewind(void *ctx, gm_err *err)
{
    (void)err;
    ((mem_src *)ctx)->pos = 0;
    return GM_OK;
}

int gm_leak_analyze_events_sites(const gm_event *ev, size_t n, const gm_init_row *init,
                                 size_t ninit, const gm_marker *marks, size_t nmarks,
                                 const gm_sites *sites, const gm_leak_opts *o, gm_leak_report *rep,
                                 gm_err *err)
{
    mem_src ms = {ev, n, 0};
    gm_leak_source src = {n, init, ninit, marks, nmarks, mem_read, mem_rewind, &ms, sites, 0};
    return gm_leak_analyze(&src, o, rep, err);
}

int gm_leak_analyze_events(const gm_event *ev, size_t n, const gm_init_row *init, size_t ninit,
                           const gm_marker *marks, size_t nmarks, const gm_leak_opts *o,
                           gm_leak_report *rep, gm_err *err)
{
    return gm_leak_analyze_events_sites(ev, n, init, ninit, marks, nmarks, NULL, o, rep, err);
}
