/*
 * metrics.h - every number gmsim reports, computed in one place (DESIGN §6).
 *
 * At each instant: requested Q (live requested bytes), allocated A (live
 * blocks, rounded), reserved R (held from the driver). A gm_metrics follows
 * one series (a tenant, or the whole device) event by event:
 *  - peaks of Q ("peak live bytes": no allocator can reserve less), A, R;
 *  - fragmentation = 1 - peak A / peak R (GMLake's definition);
 *  - utilization = time-weighted A / R = integral(A dt) / integral(R dt), and
 *    time-weighted fragmentation = 1 - utilization;
 *  - external fragmentation at an instant = 1 - largest free block / (R - A),
 *    sampled once per timeline bucket and at every OOM;
 *  - OOMs with their context; a bounded timeline (GM_TIMELINE_POINTS buckets
 *    whose width doubles as the run grows) for charts.
 * Driver calls and their time come from the allocator counters (alloc.h).
 */
#ifndef GM_METRICS_H
#define GM_METRICS_H

#include <stddef.h>
#include <stdint.h>

#define GM_TIMELINE_POINTS 1024
#define GM_OOM_RECORDS 256 /* OOMs kept in detail; all are counted */

/*
 * A timeline bucket [t_ns, t_ns + width). Its maxima and minima are over
 * every value the series held during it: the values set by its events and
 * the value carried in from before its first event (the previous bucket's
 * end), so a quiet bucket has min = max = end, and minima show the troughs
 * between iterations that maxima alone hide on a long trace.
 */
typedef struct gm_tl_point {
    uint64_t t_ns;                /* bucket start                               */
    uint64_t q_max, a_max, r_max; /* maxima within the bucket                   */
    uint64_t q_end, a_end, r_end; /* values at the end of the bucket            */
    uint64_t q_min, a_min, r_min; /* minima within the bucket                   */
    float ext_frag;               /* external fragmentation sampled in the bucket, -1 = none */
} gm_tl_point;

typedef struct gm_timeline {
    gm_tl_point p[GM_TIMELINE_POINTS];
    size_t n;          /* buckets in use                                  */
    uint64_t t0;       /* time of bucket 0                                */
    uint64_t width_ns; /* bucket width                                    */
    uint64_t end_t;    /* t0 + n * width_ns: events before it need no division */
} gm_timeline;

/* Why an allocation failed (gm_oom_classify). */
enum gm_oom_verdict {
    GM_OOM_SHORTAGE = 0,        /* live bytes + the request exceed what the job may hold */
    GM_OOM_FRAGMENTATION = 1,   /* enough is free (in the cache and on the device), but in
                                   no piece the request fits: the cache holds it split */
    GM_OOM_OTHER_TENANT = 2,    /* alone the job would have room: other tenants hold it */
    GM_OOM_ALLOCATOR_LIMIT = 3, /* the device had room for the allocation the allocator
                                   needed, but it would not grow (a pool's maximum) */
    GM_OOM_VERDICTS
};

typedef struct gm_oom {
    uint64_t t_ns;
    uint64_t event_index; /* index in the tenant's trace (pass-local)     */
    uint32_t pass;        /* --repeat pass (0-based)                      */
    int tenant;
    uint64_t size; /* requested bytes                              */
    uint64_t reserved, allocated, largest_free, device_used, device_capacity;
    uint64_t limit;  /* what this job may hold: the device less its context,
                        or its memory fraction or quota if lower            */
    uint64_t others; /* device memory other tenants use (with their context) */
    uint64_t grow;   /* the driver allocation the request needed (0 = unknown) */
    int verdict;     /* enum gm_oom_verdict                                */
    int initial;     /* 1: not an event's: what existed before the first event
                        (size: its bytes) did not fit at all                 */
} gm_oom;

/* The verdict for o from its numbers: shortage when allocated + size
 * exceeds the limit (or the initial live set did not fit); else another
 * tenant's when the device had room for the request beside this job's
 * reserve (limit - reserved) but not after the others' (limit - reserved -
 * others); else the allocator's limit when the cache had less free than
 * the request but the device had room for the driver allocation it needed;
 * else fragmentation: the free bytes exist, in no piece that fits. */
int gm_oom_classify(const gm_oom *o);
/* "shortage", "fragmentation", "other tenant" */
const char *gm_oom_verdict_name(int verdict);

typedef struct gm_metrics {
    uint64_t t_first, t_last;
    uint64_t q, a, r; /* current values                       */
    uint64_t peak_q, peak_a, peak_r;
    uint64_t peak_q_t, peak_r_t; /* when the peaks happened              */
    double int_a, int_r;         /* integrals over time (byte * ns)      */
    uint64_t n_events;
    double ext_frag_sum; /* sum and count of samples             */
    uint64_t ext_frag_n;
    float ext_frag_max;
    uint64_t n_oom;
    size_t n_oom_kept;
    gm_oom ooms[GM_OOM_RECORDS];
    gm_timeline tl;
    int started;
} gm_metrics;

void gm_metrics_init(gm_metrics *m);

/* Advance to time t and set the new values; returns 1 when a new timeline
 * bucket began (the caller may then sample external fragmentation). */
static inline int gm_metrics_step(gm_metrics *m, uint64_t t, uint64_t q, uint64_t a, uint64_t r);
/* The same, for the rare cases: the first step, and a step that leaves the
 * last timeline bucket. */
int gm_metrics_step_slow(gm_metrics *m, uint64_t t, uint64_t q, uint64_t a, uint64_t r);
/* Record an external-fragmentation sample (largest free block now). */
void gm_metrics_ext_sample(gm_metrics *m, uint64_t largest_free);
void gm_metrics_oom(gm_metrics *m, const gm_oom *o);

/* The common step, once per event of every run: time moves within the last
 * timeline bucket. Bytes and times are below 2^63, so converting them
 * through int64_t gives the same doubles as converting them unsigned, in
 * one instruction. A peak is at least the last bucket's maximum (it is the
 * maximum of every value held, the bucket's among them), so it can rise
 * only where the bucket's maximum does: the peaks are looked at only then.
 * The last bucket's end values are the current ones (m->q, m->a, m->r):
 * they are written into it only when it is left (gm_metrics_step_slow) or
 * read (gm_metrics_timeline_end). */
static inline int gm_metrics_step(gm_metrics *m, uint64_t t, uint64_t q, uint64_t a, uint64_t r)
{
    /* before the first step tl.end_t is 0 (gm_metrics_init): the slow step starts the series */
    if (__builtin_expect(t >= m->tl.end_t, 0)) return gm_metrics_step_slow(m, t, q, a, r);
    if (t > m->t_last) {
        double dt = (double)(int64_t)(t - m->t_last);
        m->int_a += (double)(int64_t)m->a * dt;
        m->int_r += (double)(int64_t)m->r * dt;
        m->t_last = t;
    }
    m->q = q;
    m->a = a;
    m->r = r;
    m->n_events++;
    gm_tl_point *p = &m->tl.p[m->tl.n - 1];
    if (q > p->q_max) {
        p->q_max = q;
        if (q > m->peak_q) {
            m->peak_q = q;
            m->peak_q_t = t;
        }
    }
    if (a > p->a_max) {
        p->a_max = a;
        if (a > m->peak_a) m->peak_a = a;
    }
    if (r > p->r_max) {
        p->r_max = r;
        if (r > m->peak_r) {
            m->peak_r = r;
            m->peak_r_t = t;
        }
    }
    p->q_min = q < p->q_min ? q : p->q_min;
    p->a_min = a < p->a_min ? a : p->a_min;
    p->r_min = r < p->r_min ? r : p->r_min;
    return 0;
}

/* n steps whose values are known before (a fast-forwarded cycle,
 * sim/ffwd.h): step i at time t[i * stride] + shift with values q[i],
 * a[i] and r, and an external-fragmentation sample of lf[i] where it
 * begins a timeline bucket. The same as n gm_metrics_step calls (and
 * gm_metrics_ext_sample where one returns 1), bit for bit, with the
 * running values kept in registers while the bucket stays. */
void gm_metrics_steps(gm_metrics *m, const uint64_t *t, size_t stride, uint64_t shift,
                      const uint64_t *q, const uint64_t *a, uint64_t r, const uint64_t *lf,
                      size_t n);

/* Write the current values into the last timeline bucket as its end
 * values (gm_metrics_step leaves them there); for readers of the
 * buckets' end values. */
void gm_metrics_timeline_end(gm_metrics *m);

/* Derived figures. */
double gm_metrics_fragmentation(const gm_metrics *m);      /* 1 - peak A / peak R */
double gm_metrics_utilization(const gm_metrics *m);        /* integral A / integral R */
double gm_metrics_frag_time_weighted(const gm_metrics *m); /* 1 - utilization */
double gm_metrics_ext_frag_mean(const gm_metrics *m);

/*
 * The ranking: the one order in which gmsim compares runs (`gmsim compare`,
 * its winner, and the HTML report of several results): fewer OOMs, then
 * lower fragmentation, then higher utilization, both rounded to 0.01 % (the
 * precision the tables print, so a difference nobody can see decides
 * nothing), then less driver time. A figure a saved result lacks is NaN and
 * ranks after every known one. Counts and times are exact below 2^53.
 */
typedef struct gm_rank_key {
    double oom_count;     /* device OOMs                           */
    double fragmentation; /* 1 - peak A / peak R                   */
    double utilization;   /* time-weighted A / R                   */
    double driver_ns;     /* driver call time, all tenants         */
} gm_rank_key;

/* What decided an order (gm_rank_cmp's *by). */
enum gm_rank_by {
    GM_RANK_TIE = 0, /* equal on every criterion */
    GM_RANK_OOMS,
    GM_RANK_FRAGMENTATION,
    GM_RANK_UTILIZATION,
    GM_RANK_DRIVER_TIME,
};

/* qsort-style: < 0 when a ranks before b, 0 on a tie. by (may be NULL)
 * receives the criterion that decided. */
int gm_rank_cmp(const gm_rank_key *a, const gm_rank_key *b, int *by);
/* "OOMs", "fragmentation", "utilization", "driver time"; NULL for a tie. */
const char *gm_rank_by_name(int by);

#endif
