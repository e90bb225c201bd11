/* metrics.c - see metrics.h for what each number means. */
#include "metrics.h"

#include <math.h>
#include <string.h>

#define INITIAL_WIDTH_NS 1000ull

void gm_metrics_init(gm_metrics *m)
{
    memset(m, 0, sizeof *m);
    m->tl.width_ns = INITIAL_WIDTH_NS;
    m->ext_frag_max = 0;
}

static void bucket_reset(gm_tl_point *p, uint64_t t, uint64_t q, uint64_t a, uint64_t r)
{
    p->t_ns = t;
    p->q_max = p->q_min = p->q_end = q;
    p->a_max = p->a_min = p->a_end = a;
    p->r_max = p->r_min = p->r_end = r;
    p->ext_frag = -1;
}

#define MAX(x, y) ((x) > (y) ? (x) : (y))
#define MIN(x, y) ((x) < (y) ? (x) : (y))

/* Fold one value into the bucket's extremes and make it the end value. */
static inline void bucket_add(gm_tl_point *p, uint64_t q, uint64_t a, uint64_t r)
{
    p->q_max = MAX(p->q_max, q);
    p->a_max = MAX(p->a_max, a);
    p->r_max = MAX(p->r_max, r);
    p->q_min = MIN(p->q_min, q);
    p->a_min = MIN(p->a_min, a);
    p->r_min = MIN(p->r_min, r);
    p->q_end = q;
    p->a_end = a;
    p->r_end = r;
}

/* Halve the resolution: merge bucket pairs, double the width. */
static void tl_coarsen(gm_timeline *tl)
{
    size_t n = 0;
    for (size_t i = 0; i < tl->n; i += 2, n++) {
        gm_tl_point m = tl->p[i];
        if (i + 1 < tl->n) {
            const gm_tl_point *b = &tl->p[i + 1];
            m.q_max = MAX(m.q_max, b->q_max);
            m.a_max = MAX(m.a_max, b->a_max);
            m.r_max = MAX(m.r_max, b->r_max);
            m.q_min = MIN(m.q_min, b->q_min);
            m.a_min = MIN(m.a_min, b->a_min);
            m.r_min = MIN(m.r_min, b->r_min);
            m.q_end = b->q_end;
            m.a_end = b->a_end;
            m.r_end = b->r_end;
            if (b->ext_frag > m.ext_frag) m.ext_frag = b->ext_frag;
        }
        tl->p[n] = m;
    }
    tl->n = n;
    tl->width_ns *= 2;
    tl->end_t = tl->t0 + tl->n * tl->width_ns;
}

static int tl_add(gm_timeline *tl, uint64_t t, uint64_t q, uint64_t a, uint64_t r)
{
    if (t < tl->end_t) { /* the common case: still in the last bucket */
        bucket_add(&tl->p[tl->n - 1], q, a, r);
        return 0;
    }
    if (tl->n == 0) {
        tl->t0 = t;
        tl->n = 1;
        tl->end_t = t + tl->width_ns;
        bucket_reset(&tl->p[0], t, q, a, r);
        return 1;
    }
    uint64_t idx = (t - tl->t0) / tl->width_ns;
    while (idx >= GM_TIMELINE_POINTS) {
        tl_coarsen(tl);
        idx = (t - tl->t0) / tl->width_ns;
    }
    int fresh = 0;
    while (tl->n <= idx) { /* quiet buckets carry the last state */
        gm_tl_point *prev = &tl->p[tl->n - 1];
        bucket_reset(&tl->p[tl->n], tl->t0 + tl->n * tl->width_ns, prev->q_end, prev->a_end,
                     prev->r_end);
        tl->n++;
        fresh = 1;
    }
    tl->end_t = tl->t0 + tl->n * tl->width_ns;
    bucket_add(&tl->p[idx], q, a, r);
    return fresh;
}

void gm_metrics_timeline_end(gm_metrics *m)
{
    if (!m->tl.n) return;
    gm_tl_point *p = &m->tl.p[m->tl.n - 1];
    p->q_end = m->q;
    p->a_end = m->a;
    p->r_end = m->r;
}

int gm_metrics_step_slow(gm_metrics *m, uint64_t t, uint64_t q, uint64_t a, uint64_t r)
{
    if (!m->started) {
        m->started = 1;
        m->t_first = m->t_last = t;
    }
    gm_metrics_timeline_end(m); /* the fast steps since the last slow one left them */
    if (t > m->t_last) {
        double dt = (double)(t - m->t_last);
        m->int_a += (double)m->a * dt;
        m->int_r += (double)m->r * dt;
        m->t_last = t;
    }
    m->q = q;
    m->a = a;
    m->r = r;
    m->n_events++;
    if (q > m->peak_q) {
        m->peak_q = q;
        m->peak_q_t = t;
    }
    if (a > m->peak_a) m->peak_a = a;
    if (r > m->peak_r) {
        m->peak_r = r;
        m->peak_r_t = t;
    }
    return tl_add(&m->tl, t, q, a, r);
}

/* gm_metrics_step's fast path over the steps [*i, n) that stay in the
 * last bucket, with the running values in locals; *i moves past them. */
static void steps_in_bucket(gm_metrics *m, const uint64_t *t, size_t stride, uint64_t shift,
                            const uint64_t *q, const uint64_t *a, uint64_t r, size_t *i, size_t n)
{
    gm_tl_point *p = &m->tl.p[m->tl.n - 1];
    const uint64_t end = m->tl.end_t;
    uint64_t t_last = m->t_last, prev_a = m->a, prev_r = m->r;
    uint64_t q_max = p->q_max, q_min = p->q_min, a_max = p->a_max, a_min = p->a_min;
    double int_a = m->int_a, int_r = m->int_r;
    size_t k = *i;
    if (r > p->r_max) { /* r does not change: its step once, at the first */
        p->r_max = r;
        if (r > m->peak_r) {
            m->peak_r = r;
            m->peak_r_t = t[k * stride] + shift;
        }
    }
    if (r < p->r_min) p->r_min = r;
    for (; k < n; k++) {
        uint64_t tk = t[k * stride] + shift;
        if (tk >= end) break;
        if (tk > t_last) {
            double dt = (double)(int64_t)(tk - t_last);
            int_a += (double)(int64_t)prev_a * dt;
            int_r += (double)(int64_t)prev_r * dt;
            t_last = tk;
        }
        prev_a = a[k];
        prev_r = r;
        uint64_t qk = q[k], ak = a[k];
        if (qk > q_max) {
            q_max = qk;
            if (qk > m->peak_q) {
                m->peak_q = qk;
                m->peak_q_t = tk;
            }
        }
        if (ak > a_max) {
            a_max = ak;
            if (ak > m->peak_a) m->peak_a = ak;
        }
        q_min = qk < q_min ? qk : q_min;
        a_min = ak < a_min ? ak : a_min;
    }
    m->n_events += k - *i;
    m->t_last = t_last;
    m->int_a = int_a;
    m->int_r = int_r;
    m->q = q[k - 1];
    m->a = a[k - 1];
    m->r = r;
    p->q_max = q_max;
    p->q_min = q_min;
    p->a_max = a_max;
    p->a_min = a_min;
    *i = k;
}

void gm_metrics_steps(gm_metrics *m, const uint64_t *t, size_t stride, uint64_t shift,
                      const uint64_t *q, const uint64_t *a, uint64_t r, const uint64_t *lf,
                      size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint64_t ti = t[i * stride] + shift;
        if (ti >= m->tl.end_t) { /* the first step, or a new bucket */
            if (gm_metrics_step_slow(m, ti, q[i], a[i], r)) gm_metrics_ext_sample(m, lf[i]);
            i++;
        } else {
            steps_in_bucket(m, t, stride, shift, q, a, r, &i, n);
        }
    }
}

void gm_metrics_ext_sample(gm_metrics *m, uint64_t largest_free)
{
    if (m->r <= m->a) return; /* nothing cached: external fragmentation undefined */
    float f = (float)(1.0 - (double)largest_free / (double)(m->r - m->a));
    m->ext_frag_sum += f;
    m->ext_frag_n++;
    if (f > m->ext_frag_max) m->ext_frag_max = f;
    if (m->tl.n) {
        gm_tl_point *p = &m->tl.p[m->tl.n - 1];
        if (f > p->ext_frag) p->ext_frag = f;
    }
}

void gm_metrics_oom(gm_metrics *m, const gm_oom *o)
{
    m->n_oom++;
    if (m->n_oom_kept < GM_OOM_RECORDS) m->ooms[m->n_oom_kept++] = *o;
}

double gm_metrics_fragmentation(const gm_metrics *m)
{
    return m->peak_r ? 1.0 - (double)m->peak_a / (double)m->peak_r : 0.0;
}

double gm_metrics_utilization(const gm_metrics *m)
{
    if (m->int_r > 0) return m->int_a / m->int_r;
    return m->r ? (double)m->a / (double)m->r : 0.0; /* zero-length run */
}

double gm_metrics_frag_time_weighted(const gm_metrics *m)
{
    return m->int_r > 0 || m->r ? 1.0 - gm_metrics_utilization(m) : 0.0;
}

double gm_metrics_ext_frag_mean(const gm_metrics *m)
{
    return m->ext_frag_n ? m->ext_frag_sum / (double)m->ext_frag_n : 0.0;
}

/* ---------------- the ranking ---------------- */

/* -1 when a is better, 1 when b is, 0 when equal; NaN (unknown) is worse
 * than any number, two NaNs are equal. */
static int better(double a, double b, int lower_is_better)
{
    if (isnan(a) || isnan(b)) return isnan(a) - isnan(b);
    if (a == b) return 0;
    return (a < b) == lower_is_better ? -1 : 1;
}

/* A ratio to 0.01 %, as the tables print it. */
static double pct_key(double v)
{
    return isnan(v) ? v : (double)lround(v * 1e4);
}

int gm_oom_classify(const gm_oom *o)
{
    uint64_t need = o->allocated + o->size;
    if (o->initial || need > o->limit || need < o->allocated) return GM_OOM_SHORTAGE;
    /* free on the device for this job now, and had it been alone */
    uint64_t alone = o->limit > o->reserved ? o->limit - o->reserved : 0;
    uint64_t now = alone > o->others ? alone - o->others : 0;
    if (o->others && now < o->size && o->size <= alone) return GM_OOM_OTHER_TENANT;
    uint64_t cache_free = o->reserved > o->allocated ? o->reserved - o->allocated : 0;
    uint64_t grow = o->grow > o->size ? o->grow : o->size;
    if (cache_free < o->size && now >= grow) return GM_OOM_ALLOCATOR_LIMIT;
    return GM_OOM_FRAGMENTATION;
}

const char *gm_oom_verdict_name(int verdict)
{
    static const char *const names[GM_OOM_VERDICTS] = {"shortage", "fragmentation", "other tenant",
                                                       "allocator limit"};
    return verdict >= 0 && verdict < GM_OOM_VERDICTS ? names[verdict] : "?";
}

int gm_rank_cmp(const gm_rank_key *a, const gm_rank_key *b, int *by)
{
    int c, k = GM_RANK_TIE;
    if ((c = better(a->oom_count, b->oom_count, 1)))
        k = GM_RANK_OOMS;
    else if ((c = better(pct_key(a->fragmentation), pct_key(b->fragmentation), 1)))
        k = GM_RANK_FRAGMENTATION;
    else if ((c = better(pct_key(a->utilization), pct_key(b->utilization), 0)))
        k = GM_RANK_UTILIZATION;
    else if ((c = better(a->driver_ns, b->driver_ns, 1)))
        k = GM_RANK_DRIVER_TIME;
    if (by) *by = k;
    return c;
}

const char *gm_rank_by_name(int by)
{
    static const char *const names[] = {NULL, "OOMs", "fragmentation", "utilization",
                                        "driver time"};
    return by > 0 && by <= GM_RANK_DRIVER_TIME ? names[by] : NULL;
}
