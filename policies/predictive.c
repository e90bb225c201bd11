/*
 * predictive.c - learns the job's periodic demand from its own past and
 * releases cached segments it predicts will not be reused within a horizon,
 * keeping those it predicts will be. Realizable: it sees only the clock, the
 * allocator's counters and the segment view, as a running program could.
 *
 * Period. Every sample=TIME (default 1 ms) a timer records the tenant's
 * allocated bytes. The period is the lag of the autocorrelation peak of that
 * series (period.h, shared with study/leak.c): for each lag, the Pearson correlation of the series
 * with itself shifted (what gsl_stats_correlation gives, computed for all lags at once from an
 * FFT, FFTW's real-to-complex transform, and prefix sums). Past the first lag where it falls
 * below 0.2, the smallest local maximum within 70 % of the highest one, refined by a parabola
 * through its neighbours, is the period; accepted when that highest correlation is >= 0.5. The
 * series keeps 1024 samples; while no period is found, a full series is halved (pairs averaged), so
 * periods up to ~2^16 samples are found. Training iterations repeat, so this finds the iteration
 * length; an estimate more than 5 % away from the current period replaces it (and the profile below
 * starts again). Estimates run every 16 samples until four in a row agree, then every 256: an early
 * estimate that caught a harmonic (the series not yet two true periods long) is corrected quickly.
 *
 * Demand profile. The period is cut into 64 phase bins. For each segment
 * class (pool, segment size) the policy keeps, per bin, the most segments of
 * that class that were busy (holding a block, or used since the last tick)
 * in the previous and the current cycle.
 *
 * Prediction. A free segment of class C that is the j-th most recently used
 * free one of its class is "reused within the horizon" if some bin ahead
 * within horizon=TIME (default: one period) needed more than busy(C) + j
 * segments of class C. Its predicted next use is the first such bin.
 * Before a period and two full cycles of profile exist, there are no
 * predictions and the policy orders by least recent use.
 *
 *  proactive     (default 1) on each tick, release free segments predicted
 *                not reused within the horizon; with threshold=F only while
 *                the tenant or the device is over F (pressure.h), and only
 *                as much as it is over.
 *  attempt 0     release furthest predicted next use first (never first),
 *                ties by LRU, until the request fits; retry if enough.
 *  attempt 1     release everything cached and retry (as PyTorch).
 *  attempt 2     out of memory.
 *  --scope device: release furthest predicted next use first.
 *
 * Accuracy (reported in the results). Each free segment gets a prediction
 * when the policy decides about it (proactive tick, pressure), one
 * outstanding prediction per segment. Truth: a kept segment was reused if
 * it held a block again within the horizon (its last use moved); a released
 * one was "needed again" if the allocator grew a segment its size would have
 * served within the horizon (DESIGN §5: released memory needed again = a
 * miss). precision = TP / (TP + FP), recall = TP / (TP + FN) for the
 * positive "reused within horizon". Predictions still open at the end are
 * not counted. Expandable segments get no predictions (LRU order).
 *
 * The engine's replay position (env->event_index) is used only to skip
 * timer ticks at which no event happened since the previous tick.
 */
#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "period.h"
#include "pressure.h"
#include "base/addrmap.h"
#include "sim/policy.h"

#define NB 64             /* phase bins per period                    */
#define WIN GM_PERIOD_WIN /* samples kept for period detection      */
#define MAX_DECIM 65536   /* most ticks averaged into one sample      */
#define MAX_CLASSES 4096  /* tracked segment classes                  */
#define LARGE_BUFFER (20ull * GM_MiB)
#define NEVER UINT64_MAX
#define MOVED_FEW 8 /* resolve's moved predictions looked for one by one (find_moved) */

typedef struct pd_class {
    uint8_t small;
    uint64_t size;
    uint16_t prev[NB], cur[NB];
    uint16_t maxd; /* the highest of prev and cur over all bins */
} pd_class;

typedef struct pd_segclass {
    uint8_t small;
    uint64_t size;
    uint32_t total, free, since; /* segments; releasable ones; of those, used since the last tick */
    int32_t cls;                 /* its index in p->cls once found (sc_cls), else -1 */
} pd_segclass;

/* A prediction: what every tick reads (32 bytes, two to a cache line: a
 * tick walks them all), and beside it in pd_pend_cold what only an outcome
 * or a grow reads. */
typedef struct pd_pending {
    uint64_t addr, deadline, last_use;
    uint32_t hint; /* where its segment was in the view last time */
    uint8_t small;
    uint8_t predicted; /* 1: reused within the horizon */
    uint8_t released;  /* truth from grows (1) or from its last use (0) */
} pd_pending;

typedef struct pd_pend_cold {
    uint64_t size, t_dec;
} pd_pend_cold;

typedef struct pd_policy {
    /* parameters */
    uint64_t sample_ns, horizon_param_ns; /* 0 = one period */
    double threshold;
    int proactive;
    /* engine position (idle-tick skipping only) */
    const uint64_t *event_index;
    const uint32_t *pass;
    int ticked;
    uint64_t tick_index;
    uint32_t tick_pass;
    uint64_t last_tick_ns;
    /* period detection */
    double x[WIN];
    size_t nx, since_est;
    uint32_t decim, acc_n;
    double acc;
    gm_period_work pw; /* the autocorrelation's scratch (period.h) */
    uint64_t period_ns, anchor_ns, n_estimates, n_period_changes;
    uint32_t confirmed; /* consecutive estimates that agreed with period_ns */
    double period_r;
    /* demand profile */
    uint64_t cycle;
    int wraps; /* cycle wraps since the profile was reset */
    pd_class *cls;
    size_t ncls, capcls;
    uint32_t *busy_now, *busy_tick; /* per class, this tick */
    /* the classes last found, by a hash of (small, size): a tick looks up
     * every segment's class; 0 = empty, else the class index + 1 */
    uint64_t memo_size[64];
    uint32_t memo_cls[64];
    /* predictions */
    pd_pending *pend;
    pd_pend_cold *pendc; /* pend[i]'s size and time of decision */
    size_t npend, cappend;
    gm_addrmap moved; /* resolve's scratch: many moved predictions' addresses, to their index */
    uint64_t tp, fp, fn, tn, predictions;
    uint64_t released_bytes, released_needed_bytes;
    uint64_t proactive_bytes, fail_bytes, foreign_bytes, flushes;
    /* the classic segments per class (sorted by pool, then size), counted in
     * the last full view, at driver-call count sc_gen: while no driver call
     * happens they stay, and a tick reads only the releasable segments
     * (busy = the class's segments - its releasable ones); sc_ok when the
     * model makes segment_at's promise (alloc.h) and the view kept it */
    struct pd_segclass *sc;
    size_t nsc, capsc;
    gm_seg_class *cc; /* sc_fetch's scratch */
    size_t capcc;
    uint64_t sc_gen;
    int sc_ok;
    uint64_t sc_memo_key[64]; /* sc_find's memo, as cls_find's: index + 1, 0 = empty */
    uint32_t sc_memo[64];
    /* scratch */
    gm_brieflist bv; /* the current view in short: every segment, in address order
                        (descending when view_desc), or (view_partial) the releasable
                        segments in no order */
    int view_desc;
    int view_partial; /* the view holds only the releasable segments */
    gm_addr_list order;
    struct pd_key *keys, *keys_tmp; /* the ranking's sort keys */
    size_t cap_keys, nkeys;
    /* what the tick found in its view, for the ranking and the releases
     * that follow: while marks_ok, open_at[i] is 1 + the index in pend of
     * view entry i's open prediction, 0 when it has none (resolve, then
     * pending_add; marks_build for a view resolve did not read); while
     * free_ok, p->sc[k].free counts the view's entries of class k, and the
     * view holds only those (count_busy_partial) */
    uint32_t *open_at;
    size_t cap_open_at;
    uint32_t *mfree, *msince; /* count_free's scratch: the model's counts per class */
    size_t cap_mfree;
    int marks_ok, free_ok;
    /* the bins ahead within the horizon (all_reused), for dh_period, dh_h */
    uint64_t dh_period, dh_h;
    unsigned dh;
} pd_policy;

/* ---------------- lifecycle ---------------- */

static int create(const char *params, void **state, gm_err *err)
{
    static const char *const known[] = {"horizon", "sample", "threshold", "proactive", NULL};
    if (gm_policy_check_params("predictive", params, known, err)) return err->code;
    pd_policy *p = calloc(1, sizeof *p);
    if (!p) return gm_errf(err, GM_ENOMEM, "out of memory");
    p->sample_ns = 1000000;
    p->proactive = 1;
    p->decim = 1;
    char v[64];
    int rc = GM_OK;
    double d;
    if (gm_policy_param(params, "sample", v, sizeof v))
        rc = gm_parse_time(v, "--policy predictive:sample", &p->sample_ns, err);
    if (!rc && p->sample_ns == 0)
        rc = gm_errf(err, GM_EINVAL, "--policy predictive:sample must be more than 0");
    if (!rc && gm_policy_param(params, "horizon", v, sizeof v) && strcmp(v, "auto"))
        rc = gm_parse_time(v, "--policy predictive:horizon", &p->horizon_param_ns, err);
    if (!rc && gm_policy_param(params, "threshold", v, sizeof v))
        rc = gm_parse_double(v, "--policy predictive:threshold", 0, 1, &p->threshold, err);
    if (!rc && gm_policy_param(params, "proactive", v, sizeof v)) {
        rc = gm_parse_double(v, "--policy predictive:proactive", 0, 1, &d, err);
        p->proactive = d != 0;
    }
    if (!rc && gm_addrmap_init(&p->moved, 64)) rc = gm_errf(err, GM_ENOMEM, "out of memory");
    if (rc) {
        free(p);
        return rc;
    }
    *state = p;
    return GM_OK;
}

static void destroy(void *state)
{
    pd_policy *p = state;
    free(p->cls);
    free(p->busy_now);
    free(p->busy_tick);
    free(p->pend);
    free(p->pendc);
    gm_addrmap_free(&p->moved);
    gm_brieflist_free(&p->bv);
    gm_addr_list_free(&p->order);
    free(p->keys);
    free(p->keys_tmp);
    free(p->sc);
    free(p->cc);
    free(p->open_at);
    free(p->mfree);
    free(p->msince);
    free(p);
}

static int attach(void *state, gm_alloc *a, const gm_policy_env *env, gm_err *err)
{
    pd_policy *p = state;
    (void)a, (void)err;
    p->event_index = env->event_index;
    p->pass = env->pass;
    return GM_OK;
}

/* ---------------- period ---------------- */

static void reset_profile(pd_policy *p)
{
    for (size_t i = 0; i < p->ncls; i++) {
        memset(p->cls[i].prev, 0, sizeof p->cls[i].prev);
        memset(p->cls[i].cur, 0, sizeof p->cls[i].cur);
        p->cls[i].maxd = 0;
    }
    p->wraps = 0;
}

static void estimate(pd_policy *p, uint64_t now)
{
    double conf, lag = gm_period_lag(&p->pw, p->x, p->nx, &conf);
    p->since_est = 0;
    p->n_estimates++;
    if (lag <= 0) return;
    uint64_t P = (uint64_t)(lag * (double)p->decim * (double)p->sample_ns + 0.5);
    if (P == 0) return;
    double rel = p->period_ns ? fabs((double)P - (double)p->period_ns) / (double)p->period_ns : 1;
    p->period_r = conf;
    if (rel <= 0.05) {
        p->confirmed++;
        return; /* keep the phase stable */
    }
    p->confirmed = 0;
    p->period_ns = P;
    p->anchor_ns = now;
    p->cycle = 0;
    p->n_period_changes++;
    reset_profile(p);
}

static void add_sample(pd_policy *p, double v, uint64_t now)
{
    p->acc += v;
    if (++p->acc_n < p->decim) return;
    if (p->nx == WIN) {
        if (!p->period_ns && p->decim < MAX_DECIM) { /* halve: pairs averaged */
            for (size_t i = 0; i < WIN / 2; i++)
                p->x[i] = 0.5 * (p->x[2 * i] + p->x[2 * i + 1]);
            p->nx = WIN / 2;
            p->decim *= 2;
        } else { /* slide: drop the oldest quarter */
            memmove(p->x, p->x + WIN / 4, (WIN - WIN / 4) * sizeof *p->x);
            p->nx = WIN - WIN / 4;
        }
    }
    p->x[p->nx++] = p->acc / p->acc_n;
    p->acc = 0;
    p->acc_n = 0;
    p->since_est++;
    /* often until a period is found and confirmed 4 times, then rarely */
    if (p->since_est >= (p->period_ns && p->confirmed >= 4 ? 256u : 16u)) estimate(p, now);
}

static uint64_t horizon(const pd_policy *p)
{
    return p->horizon_param_ns ? p->horizon_param_ns : p->period_ns;
}

static int predicting(const pd_policy *p)
{
    return p->period_ns && p->wraps >= 2;
}

static unsigned bin_of(const pd_policy *p, uint64_t t)
{
    uint64_t ph = (t - p->anchor_ns) % p->period_ns;
    return (unsigned)((double)ph * NB / (double)p->period_ns);
}

/* ---------------- classes ---------------- */

static int cls_cmp(const pd_class *c, int small, uint64_t size)
{
    if (c->small != small) return c->small < small ? -1 : 1;
    return c->size < size ? -1 : c->size > size;
}

static size_t cls_lower(const pd_policy *p, int small, uint64_t size)
{
    size_t lo = 0, hi = p->ncls;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cls_cmp(&p->cls[mid], small, size) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static inline size_t memo_slot(uint64_t key)
{
    return (size_t)((key * 0x9e3779b97f4a7c15ull) >> 58);
}

/* cls_find past the memo. */
static long cls_find_slow(pd_policy *p, int small, uint64_t size, int add)
{
    uint64_t key = size ^ (uint64_t)small;
    size_t slot = memo_slot(key);
    size_t i = cls_lower(p, small, size);
    if (i < p->ncls && cls_cmp(&p->cls[i], small, size) == 0) {
        p->memo_size[slot] = key;
        p->memo_cls[slot] = (uint32_t)i + 1;
        return (long)i;
    }
    if (!add || p->ncls == MAX_CLASSES) return -1;
    memset(p->memo_cls, 0, sizeof p->memo_cls); /* indices above i move up */
    for (size_t k = 0; k < p->nsc; k++)         /* ... and sc_cls' too */
        p->sc[k].cls = -1;
    if (p->ncls == p->capcls) {
        size_t cap = p->capcls ? p->capcls * 2 : 32;
        pd_class *c = realloc(p->cls, cap * sizeof *c);
        if (!c) return -1;
        p->cls = c;
        uint32_t *b1 = realloc(p->busy_now, cap * sizeof *b1);
        if (b1) p->busy_now = b1;
        uint32_t *b2 = b1 ? realloc(p->busy_tick, cap * sizeof *b2) : NULL;
        if (!b2) return -1;
        p->busy_tick = b2;
        p->capcls = cap;
    }
    memmove(&p->cls[i + 1], &p->cls[i], (p->ncls - i) * sizeof *p->cls);
    memmove(&p->busy_now[i + 1], &p->busy_now[i], (p->ncls - i) * sizeof *p->busy_now);
    memmove(&p->busy_tick[i + 1], &p->busy_tick[i], (p->ncls - i) * sizeof *p->busy_tick);
    p->ncls++;
    memset(&p->cls[i], 0, sizeof p->cls[i]);
    p->cls[i].small = (uint8_t)small;
    p->cls[i].size = size;
    p->busy_now[i] = p->busy_tick[i] = 0;
    return (long)i;
}

/* The class index of (small, size), created when `add`; -1 if none. Every
 * tick looks up the class of every busy segment: the memo is inline. */
static inline long cls_find(pd_policy *p, int small, uint64_t size, int add)
{
    uint64_t key = size ^ (uint64_t)small; /* sizes are even: small is the low bit */
    size_t slot = memo_slot(key);
    if (p->memo_cls[slot] && p->memo_size[slot] == key) return (long)p->memo_cls[slot] - 1;
    return cls_find_slow(p, small, size, add);
}

/* The class index (cls_find) of segment class k of p->sc, kept in it: a
 * tick asks it of every class twice (count_busy_partial, all_reused_free),
 * and it changes only as classes are made (cls_find_slow forgets them). */
static inline long sc_cls(pd_policy *p, size_t k, int add)
{
    if (p->sc[k].cls >= 0) return p->sc[k].cls;
    long c = cls_find(p, p->sc[k].small, p->sc[k].size, add);
    if (c >= 0) p->sc[k].cls = (int32_t)c; /* after any forgetting cls_find did */
    return c;
}

/* ---------------- the view ---------------- */

static int cmp_addr(const void *x, const void *y)
{
    const gm_seg_brief *a = x, *b = y;
    return a->addr < b->addr ? -1 : a->addr > b->addr;
}

/* The view of every segment, in address order. */
static int view_fetch(pd_policy *p, gm_alloc *a)
{
    if (gm_brieflist_fetch(&p->bv, a) != GM_OK) return GM_ENOMEM;
    gm_seg_brief *v = p->bv.buf; /* every segment: the list's own */
    size_t n = p->bv.n, i = 1;
    /* segments() lists the newest first, and addresses mostly grow: often
     * in descending order already, kept as it is (view_desc) */
    while (i < n && v[i - 1].addr > v[i].addr)
        i++;
    p->view_desc = n > 1 && i == n;
    if (!p->view_desc && n > 1) qsort(v, n, sizeof *v, cmp_addr); /* addresses differ: any sort */
    p->view_partial = 0;
    p->marks_ok = p->free_ok = 0;
    return GM_OK;
}

/* The view of the releasable segments only, in the model's order: nothing
 * reads it by address (resolve finds a prediction where it was, else asks
 * the model; the ranking's keys end with the address). Read in place
 * where the model has it at hand (releasable_briefs): until the tick's
 * first release (release_ranked copies it) or its end (forgotten). */
static int view_fetch_releasable(pd_policy *p, gm_alloc *a)
{
    if (gm_brieflist_fetch_releasable(&p->bv, a) != GM_OK) return GM_ENOMEM;
    p->view_desc = 0;
    p->view_partial = 1;
    p->marks_ok = p->free_ok = 0;
    return GM_OK;
}

static uint64_t driver_calls(const gm_alloc *a)
{
    return a->c.n_driver_alloc + a->c.n_driver_free;
}

static int sc_cmp(const pd_segclass *c, int small, uint64_t size)
{
    if (c->small != small) return c->small < small ? -1 : 1;
    return c->size < size ? -1 : c->size > size;
}

/* The segment class of (small, size) in p->sc: its index, or p->nsc. */
static size_t sc_find_slow(pd_policy *p, int small, uint64_t size)
{
    size_t lo = 0, hi = p->nsc;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (sc_cmp(&p->sc[mid], small, size) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < p->nsc && sc_cmp(&p->sc[lo], small, size) == 0) {
        uint64_t key = size ^ (uint64_t)small;
        p->sc_memo_key[memo_slot(key)] = key;
        p->sc_memo[memo_slot(key)] = (uint32_t)lo + 1;
        return lo;
    }
    return p->nsc;
}

static inline size_t sc_find(pd_policy *p, int small, uint64_t size)
{
    uint64_t key = size ^ (uint64_t)small;
    size_t slot = memo_slot(key);
    if (p->sc_memo[slot] && p->sc_memo_key[slot] == key) return p->sc_memo[slot] - 1;
    return sc_find_slow(p, small, size);
}

/* Count the classic segments of the (fresh, full) view per class, and
 * whether the model's promise holds in it (segment_at, alloc.h). */
static void sc_build(pd_policy *p, gm_alloc *a)
{
    p->nsc = 0;
    memset(p->sc_memo, 0, sizeof p->sc_memo);
    p->sc_gen = driver_calls(a);
    p->sc_ok = a->ops->segment_at != NULL;
    for (size_t i = 0; i < p->bv.n && p->sc_ok; i++) {
        const gm_seg_brief *s = &p->bv.v[i];
        if (s->expandable) continue;
        if ((s->n_allocated == 0) != (s->releasable != 0)) {
            p->sc_ok = 0;
            break;
        }
        size_t k = sc_find(p, s->small_pool, s->size);
        if (k == p->nsc) {
            memset(p->sc_memo, 0, sizeof p->sc_memo); /* indices above k move up */
            if (p->nsc == p->capsc) {
                size_t cap = p->capsc ? 2 * p->capsc : 16;
                pd_segclass *v = realloc(p->sc, cap * sizeof *v);
                if (!v) {
                    p->sc_ok = 0;
                    break;
                }
                p->sc = v;
                p->capsc = cap;
            }
            k = 0;
            while (k < p->nsc && sc_cmp(&p->sc[k], s->small_pool, s->size) < 0)
                k++;
            memmove(&p->sc[k + 1], &p->sc[k], (p->nsc - k) * sizeof *p->sc);
            p->nsc++;
            p->sc[k] = (pd_segclass){s->small_pool, s->size, 0, 0, 0, -1};
        }
        p->sc[k].total++;
    }
    /* a class is made as its first busy segment is counted: with room for
     * every class there is, the order they are made in does not matter */
    if (p->ncls + p->nsc > MAX_CLASSES) p->sc_ok = 0;
}

/* sc_build from the model's counts of its classic segments
 * (gm_alloc_ops.class_counts), with no view: 1, or 0 when the model keeps
 * none (then a full view counts them). */
static int sc_fetch(pd_policy *p, gm_alloc *a)
{
    if (!a->ops->class_counts || !a->ops->segment_at) return 0;
    size_t n;
    while ((n = a->ops->class_counts(a, p->cc, p->capcc)) > p->capcc) {
        if (n == SIZE_MAX) return 0;
        gm_seg_class *v = realloc(p->cc, 2 * n * sizeof *v);
        if (!v) return 0;
        p->cc = v;
        p->capcc = 2 * n;
    }
    if (p->capsc < n) {
        pd_segclass *v = realloc(p->sc, 2 * n * sizeof *v);
        if (!v) return 0;
        p->sc = v;
        p->capsc = 2 * n;
    }
    for (size_t k = 0; k < n; k++) /* in (pool, size) order, as sc_build's */
        p->sc[k] = (pd_segclass){p->cc[k].small_pool, p->cc[k].size, p->cc[k].count, 0, 0, -1};
    p->nsc = n;
    memset(p->sc_memo, 0, sizeof p->sc_memo);
    p->sc_gen = driver_calls(a);
    p->sc_ok = p->ncls + p->nsc <= MAX_CLASSES; /* as sc_build decides */
    return 1;
}

/* The i-th view entry in address order: its index in p->bv.v. */
static inline size_t view_at(const pd_policy *p, size_t i)
{
    return p->view_desc ? p->bv.n - 1 - i : i;
}

/* The view entry of addr, trying first where it was (*hint, an index into
 * p->bv.v; views keep their order while no segment comes or goes); NULL
 * if none. */
static const gm_seg_brief *view_find_at(const pd_policy *p, uint64_t addr, uint32_t *hint)
{
    if (*hint < p->bv.n && p->bv.v[*hint].addr == addr) return &p->bv.v[*hint];
    size_t lo = 0, hi = p->bv.n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->bv.v[view_at(p, mid)].addr < addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < p->bv.n && p->bv.v[view_at(p, lo)].addr == addr) {
        *hint = (uint32_t)view_at(p, lo);
        return &p->bv.v[*hint];
    }
    return NULL;
}

static const gm_seg_brief *view_find(const pd_policy *p, uint64_t addr)
{
    uint32_t hint = UINT32_MAX;
    return view_find_at(p, addr, &hint);
}

/* Count busy segments per class (view must be fresh). */
static void count_busy(pd_policy *p)
{
    for (size_t i = 0; i < p->ncls; i++)
        p->busy_now[i] = p->busy_tick[i] = 0;
    for (size_t i = 0; i < p->bv.n; i++) {
        const gm_seg_brief *s = &p->bv.v[i];
        if (s->expandable) continue;
        int now = s->n_allocated > 0, since = now || s->last_use_ns > p->last_tick_ns;
        if (!since) continue;
        long c = cls_find(p, s->small_pool, s->size, 1);
        if (c < 0) continue;
        p->busy_now[c] += (uint32_t)now;
        p->busy_tick[c] += (uint32_t)since;
    }
}

/* The classes' releasable segments (p->sc[k].free), and of those the ones
 * used since the last tick (.since), as the model counts them
 * (gm_alloc_ops.class_free: the same classes as sc_fetch's, no driver
 * call since; it knows each one's class), with free_ok: the view holds
 * nothing else (no expandable segment) when its entries are as many. 1, or
 * 0 when the model cannot (count_free_view counts them). */
static int count_free_model(pd_policy *p, gm_alloc *a)
{
    if (!a->ops->class_free || !p->nsc) return 0;
    if (p->cap_mfree < p->nsc) {
        size_t cap = 2 * p->nsc;
        uint32_t *f = realloc(p->mfree, cap * sizeof *f);
        if (f) p->mfree = f;
        uint32_t *g = f ? realloc(p->msince, cap * sizeof *g) : NULL;
        if (!g) return 0;
        p->msince = g;
        p->cap_mfree = cap;
    }
    size_t n = a->ops->class_free(a, p->last_tick_ns, p->mfree, p->msince, p->cap_mfree);
    if (n != p->nsc) return 0;
    size_t sum = 0;
    for (size_t k = 0; k < n; k++) {
        p->sc[k].free = p->mfree[k];
        p->sc[k].since = p->msince[k];
        sum += p->mfree[k];
    }
    p->free_ok = sum == p->bv.n;
    return 1;
}

/* The same from the view of the releasable segments (every entry
 * releasable, classic and in the counts: free_ok). */
static void count_free_view(pd_policy *p)
{
    for (size_t k = 0; k < p->nsc; k++)
        p->sc[k].free = p->sc[k].since = 0;
    int all = 1;
    uint64_t last = p->last_tick_ns;
    for (size_t i = 0; i < p->bv.n; i++) {
        const gm_seg_brief *s = &p->bv.v[i];
        if (__builtin_expect(s->expandable || !s->releasable, 0)) {
            all = 0;
            if (s->expandable) continue;
        }
        size_t k = sc_find(p, s->small_pool, s->size);
        if (k == p->nsc) { /* not in the counts: cannot happen (no driver call) */
            all = 0;
            continue;
        }
        p->sc[k].free++;
        p->sc[k].since += s->last_use_ns > last;
    }
    p->free_ok = all;
}

/* count_busy from a view of the releasable segments only, with the
 * classes' segment counts of sc_build (no driver call since): a classic
 * segment is busy now unless it is releasable (the model's promise), and
 * busy this tick also when releasable and used since the last tick. */
static void count_busy_partial(pd_policy *p, gm_alloc *a)
{
    for (size_t i = 0; i < p->ncls; i++)
        p->busy_now[i] = p->busy_tick[i] = 0;
    if (!count_free_model(p, a)) count_free_view(p);
    for (size_t k = 0; k < p->nsc; k++) {
        const pd_segclass *x = &p->sc[k];
        uint32_t now = x->total - x->free, since = now + x->since;
        if (!since) continue;
        long c = sc_cls(p, k, 1);
        if (c < 0) continue;
        p->busy_now[c] += now;
        p->busy_tick[c] += since;
    }
}

/* ---------------- predictions ---------------- */

static void outcome(pd_policy *p, size_t i, int reused)
{
    const pd_pending *q = &p->pend[i];
    if (q->predicted)
        reused ? p->tp++ : p->fp++;
    else
        reused ? p->fn++ : p->tn++;
    if (q->released && reused) p->released_needed_bytes += p->pendc[i].size;
}

/* 1 + the index of the prediction not yet released of the segment at
 * addr, 0 if it has none: a walk of the predictions, for when there is no
 * room for the marks (open_marks) to say it. */
static size_t pending_scan(const pd_policy *p, uint64_t addr)
{
    for (size_t i = 0; i < p->npend; i++)
        if (p->pend[i].addr == addr && !p->pend[i].released) return i + 1;
    return 0;
}

static void pending_released(pd_pending *q)
{
    q->released = 1;
}

/* The last prediction moves to i, so the marks no longer hold (resolve,
 * which drops them as it walks and visits the moved one there, makes them
 * after). */
static void pending_drop(pd_policy *p, size_t i)
{
    p->pend[i] = p->pend[--p->npend];
    p->pendc[i] = p->pendc[p->npend];
    p->marks_ok = 0;
}

static void pending_add(pd_policy *p, const gm_seg_brief *s, int predicted, uint64_t now)
{
    if (p->npend == p->cappend) {
        size_t cap = p->cappend ? p->cappend * 2 : 64;
        pd_pending *v = realloc(p->pend, cap * sizeof *v);
        if (v) p->pend = v;
        pd_pend_cold *c = v ? realloc(p->pendc, cap * sizeof *c) : NULL;
        if (!c) return;
        p->pendc = c;
        p->cappend = cap;
    }
    size_t at = (size_t)(s - p->bv.v);
    if (p->marks_ok) p->open_at[at] = (uint32_t)p->npend + 1;
    p->pendc[p->npend] = (pd_pend_cold){s->size, now};
    pd_pending *q = &p->pend[p->npend++];
    q->addr = s->addr;
    q->small = s->small_pool;
    q->predicted = (uint8_t)predicted;
    q->released = 0;
    q->deadline = now + horizon(p);
    q->last_use = s->last_use_ns;
    q->hint = (uint32_t)at;
    p->predictions++;
}

/* Room in p->open_at for the fresh view (cleared when `clear`); 0 when
 * out of memory (then the ranking walks the predictions: pending_scan).
 * resolve leaves open_at[i] at 1 + the index of the prediction it keeps
 * open on view entry i, and pending_add marks the ones it opens, so that
 * neither the ranking nor the releases after it look a segment up. */
static int open_marks(pd_policy *p, int clear)
{
    size_t n = p->bv.n;
    if (p->cap_open_at < n) {
        uint32_t *v = realloc(p->open_at, 2 * n * sizeof *v);
        if (!v) return 0;
        p->open_at = v;
        p->cap_open_at = 2 * n;
    }
    if (clear && n) memset(p->open_at, 0, n * sizeof *p->open_at);
    return 1;
}

/* The marks of a view that resolve did not read (a pressure's, in
 * address order): each open prediction's segment found by address. */
static void marks_build(pd_policy *p)
{
    if (p->view_partial || !open_marks(p, 1)) return;
    for (size_t i = 0; i < p->npend; i++) {
        const pd_pending *q = &p->pend[i];
        uint32_t at = q->hint; /* the hint stays the last tick's */
        if (!q->released && view_find_at(p, q->addr, &at)) p->open_at[at] = (uint32_t)i + 1;
    }
    p->marks_ok = 1;
}

/* 1 + the index of view entry i's (segment addr's) open prediction, 0 if
 * it has none. */
static inline size_t open_at(const pd_policy *p, size_t i, uint64_t addr)
{
    return p->marks_ok ? p->open_at[i] : pending_scan(p, addr);
}

/* resolve's kept predictions whose segment moved in the (partial) view,
 * `moved` of them, the first MOVED_FEW at mv[]: each one's view entry
 * marked and its hint set. A few (~1 a tick, 0 on most) are each looked
 * for along the view; more (a release or a driver call reorders the
 * model's list) through a scratch map of the kept predictions not marked,
 * as the view is walked once. Their segments are in the view (the model
 * said them releasable), but one that is not is left unmarked. */
static void find_moved(pd_policy *p, const uint32_t *mv, size_t moved)
{
    const gm_seg_brief *v = p->bv.v;
    size_t n = p->bv.n;
    if (moved <= MOVED_FEW) {
        for (size_t k = 0; k < moved; k++) {
            pd_pending *q = &p->pend[mv[k]];
            for (size_t i = 0; i < n; i++)
                if (v[i].addr == q->addr) {
                    p->open_at[i] = mv[k] + 1;
                    q->hint = (uint32_t)i;
                    break;
                }
        }
        return;
    }
    gm_addrmap_clear(&p->moved);
    int mapped = 1;
    for (size_t j = 0; j < p->npend && mapped; j++) {
        const pd_pending *q = &p->pend[j];
        if (!q->released && !(q->hint < n && p->open_at[q->hint] == j + 1))
            mapped = gm_addrmap_put(&p->moved, gm_addrmap_key(q->addr), j) == GM_OK;
    }
    for (size_t i = 0; i < n && moved; i++) {
        if (p->open_at[i]) continue;
        size_t j;
        if (mapped) {
            const uint64_t *x = gm_addrmap_get(&p->moved, gm_addrmap_key(v[i].addr));
            if (!x) continue;
            j = (size_t)*x;
        } else if ((j = pending_scan(p, v[i].addr)) != 0) { /* no memory for the map */
            j--;
        } else {
            continue;
        }
        p->open_at[i] = (uint32_t)j + 1;
        p->pend[j].hint = (uint32_t)i;
        moved--;
    }
}

/* Resolve outstanding predictions from a fresh view at time now (a
 * partial one: a segment not in it is asked of the model). */
static void resolve(pd_policy *p, gm_alloc *a, uint64_t now, int view_fresh)
{
    int partial = view_fresh && p->view_partial;
    int marks = view_fresh && open_marks(p, 1);
    if (partial) {
        /* the view holds the releasable segments in no order. A prediction's
         * segment is most often where it was (views keep their order while
         * no segment goes or comes back: q->hint); else it is busy (not in
         * the view), gone, or moved in the view, and the model tells which
         * and its last use (segment_at: the brief the view would show). The
         * view entries of the kept ones that moved are found after. */
        size_t n = p->bv.n, moved = 0;
        uint32_t mv[MOVED_FEW];
        for (size_t i = 0; i < p->npend;) {
            pd_pending *q = &p->pend[i];
            int done = 0, reused = 0, at = 0, elsewhere = 0;
            if (!q->released) {
                uint64_t last_use;
                gm_seg_brief one;
                if (q->hint < n && p->bv.v[q->hint].addr == q->addr) {
                    at = 1;
                    last_use = p->bv.v[q->hint].last_use_ns;
                } else if (a->ops->segment_at(a, q->addr, &one)) {
                    last_use = one.last_use_ns;
                    elsewhere = one.releasable != 0; /* in the view, moved */
                } else {
                    /* gone without our knowing: no truth */
                    pending_drop(p, i);
                    continue;
                }
                if (last_use > q->last_use) {
                    done = 1;
                    reused = last_use <= q->deadline || p->last_tick_ns < q->deadline;
                }
            }
            if (!done && now > q->deadline) done = 1; /* reused = 0 */
            if (done) {
                outcome(p, i, reused);
                pending_drop(p, i);
                continue;
            }
            if (marks && at) p->open_at[q->hint] = (uint32_t)i + 1;
            if (elsewhere && moved < MOVED_FEW) mv[moved] = (uint32_t)i;
            moved += elsewhere;
            i++;
        }
        /* the view entries of kept predictions not at their hint: the view
         * holds exactly the releasable segments, so those whose segment is
         * releasable (a busy one is not in it, and is not looked for) */
        if (moved && marks) find_moved(p, mv, moved);
        p->marks_ok = marks;
        return;
    }
    for (size_t i = 0; i < p->npend;) {
        pd_pending *q = &p->pend[i];
        int done = 0, reused = 0;
        if (!q->released && view_fresh) {
            const gm_seg_brief *s = view_find_at(p, q->addr, &q->hint);
            if (!s) { /* gone without our knowing: no truth */
                pending_drop(p, i);
                continue;
            }
            if (s->last_use_ns > q->last_use) {
                done = 1;
                reused = s->last_use_ns <= q->deadline || p->last_tick_ns < q->deadline;
            }
        }
        if (!done && now > q->deadline) done = 1; /* reused = 0 */
        if (done) {
            outcome(p, i, reused);
            pending_drop(p, i);
        } else {
            if (marks && !q->released) p->open_at[q->hint] = (uint32_t)i + 1; /* in the view */
            i++;
        }
    }
    p->marks_ok = marks;
}

/* Kept predictions whose segment is no longer in the (fresh) view were
 * released: from now on their truth comes from grows. */
static void note_released(pd_policy *p)
{
    for (size_t i = 0; i < p->npend; i++) {
        pd_pending *q = &p->pend[i];
        if (!q->released && !view_find(p, q->addr)) {
            pending_released(q);
            p->released_bytes += p->pendc[i].size;
        }
    }
}

/* Predicted distances (ns) to the next use of the free segments of class c,
 * asked in order of j (the j-th most recent free one of the class), j = 0,
 * 1, ...: the first bin ahead within a period whose demand exceeds
 * busy(c) + j, else NEVER. j only grows, so one walk of the bins ahead,
 * keeping the highest demand seen so far, serves the whole class. */
typedef struct pd_walk {
    const pd_class *k;
    uint32_t busy;
    unsigned b0, d;   /* the bin now; the distance reached (1..NB+1) */
    uint32_t highest; /* the highest demand in bins 1..d-1 ahead */
} pd_walk;

static void walk_start(const pd_policy *p, pd_walk *w, long c, uint64_t now)
{
    w->k = c < 0 ? NULL : &p->cls[c];
    w->busy = c < 0 ? 0 : p->busy_now[c];
    w->b0 = bin_of(p, now);
    w->d = 1;
    w->highest = 0;
}

static uint64_t walk_next(const pd_policy *p, pd_walk *w, uint32_t j)
{
    if (!w->k) return 0; /* unknown class: assume it is needed (keep) */
    uint32_t need = w->busy + j;
    if (w->highest <= need && w->k->maxd <= need) return NEVER; /* no bin needs more */
    while (w->highest <= need && w->d <= NB) {
        unsigned b = (w->b0 + w->d) % NB;
        uint32_t demand = w->k->prev[b] > w->k->cur[b] ? w->k->prev[b] : w->k->cur[b];
        if (demand > w->highest) w->highest = demand;
        if (w->highest > need) break;
        w->d++;
    }
    if (w->highest > need) return (uint64_t)((double)w->d * (double)p->period_ns / NB);
    return NEVER;
}

/*
 * The ranking sorts small keys, not the 96-byte views: (k1, k2, k3)
 * ascending, stably, then the views in that order. The orders it uses
 * (each as the qsort comparators they replace defined them):
 *   least recent use: (last use, address);
 *   class, most recent first: (pool, size, -last use, address), the pool
 *     and size packed in k1;
 *   furthest predicted next use: (-distance, last use, address).
 */
typedef struct pd_key {
    uint64_t k1, k2, k3;
    uint32_t i; /* index into the view */
} pd_key;

static inline int key_less(const pd_key *a, const pd_key *b)
{
    if (a->k1 != b->k1) return a->k1 < b->k1;
    if (a->k2 != b->k2) return a->k2 < b->k2;
    return a->k3 < b->k3;
}

/* Stable sort of v[0..n) (merge sort, insertion sort below 16), tmp as
 * large as v. Keys are often in order already: O(n) then. */
static void key_sort(pd_key *v, pd_key *tmp, size_t n)
{
    if (n < 16) {
        for (size_t i = 1; i < n; i++) {
            pd_key x = v[i];
            size_t j = i;
            for (; j > 0 && key_less(&x, &v[j - 1]); j--)
                v[j] = v[j - 1];
            v[j] = x;
        }
        return;
    }
    size_t h = n / 2;
    key_sort(v, tmp, h);
    key_sort(v + h, tmp, n - h);
    if (!key_less(&v[h], &v[h - 1])) return; /* already in order */
    memcpy(tmp, v, h * sizeof *v);
    size_t i = 0, j = h, o = 0;
    while (i < h && j < n)
        v[o++] = key_less(&v[j], &tmp[i]) ? v[j++] : tmp[i++];
    while (i < h)
        v[o++] = tmp[i++];
}

/* Group keys by k1 (a few classes per tick) before key_sort, keeping their
 * order within a class: the releasable segments of a partial view come
 * most recently freed first, so each class is then in order already and
 * key_sort runs in O(n). The order the sort gives is total (k3 is the
 * address), so this changes its cost only. tmp holds n keys. */
static void key_group(pd_key *v, pd_key *tmp, size_t n)
{
    enum { MAXG = 16 };
    uint64_t g[MAXG];
    uint32_t cnt[MAXG], at[MAXG];
    uint8_t ord[MAXG];
    size_t ng = 0, last = 0;
    for (size_t i = 0; i < n; i++) { /* the classes, in order of appearance */
        size_t k = last;
        if (k >= ng || g[k] != v[i].k1)
            for (k = 0; k < ng && g[k] != v[i].k1; k++)
                ;
        if (k == ng) {
            if (ng == MAXG) return; /* too many classes: key_sort alone */
            g[ng] = v[i].k1;
            cnt[ng++] = 0;
        }
        cnt[k]++;
        last = k;
    }
    if (ng < 2) return;
    for (size_t k = 0; k < ng; k++) { /* the classes in k1 order */
        size_t j = k;
        for (; j > 0 && g[ord[j - 1]] > g[k]; j--)
            ord[j] = ord[j - 1];
        ord[j] = (uint8_t)k;
    }
    uint32_t o = 0;
    for (size_t r = 0; r < ng; r++) {
        at[ord[r]] = o;
        o += cnt[ord[r]];
    }
    last = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k = last;
        if (g[k] != v[i].k1)
            for (k = 0; g[k] != v[i].k1; k++)
                ;
        tmp[at[k]++] = v[i];
        last = k;
    }
    memcpy(v, tmp, n * sizeof *v);
}

/* The bins ahead within horizon h, 1..dh: the most d <= NB whose distance
 * (walk_next's, d * period / NB) is within h; kept while the period and h
 * stay. */
static unsigned bins_ahead(pd_policy *p, uint64_t h)
{
    if (p->dh_period != p->period_ns || p->dh_h != h) {
        unsigned dh = 0;
        while (dh < NB && (uint64_t)((double)(dh + 1) * (double)p->period_ns / NB) <= h)
            dh++;
        p->dh_period = p->period_ns;
        p->dh_h = h;
        p->dh = dh;
    }
    return p->dh;
}

/* Whether the last of cnt free segments of class c (cls_find's index; < 0:
 * unknown), j = cnt - 1, is predicted reused: the highest demand of the
 * bins 1..dh ahead of b0 exceeds busy + j (see all_reused). class_reused:
 * the same for the class of (small, size). */
static int class_reused_at(pd_policy *p, long c, uint32_t cnt, unsigned b0, unsigned dh)
{
    if (c < 0) return 1; /* unknown class: kept (walk_next) */
    const pd_class *x = &p->cls[c];
    uint32_t need = p->busy_now[c] + cnt - 1, highest = 0;
    if (x->maxd <= need) return 0;
    if (dh == NB) return 1; /* every bin: the highest is maxd */
    for (unsigned d = 1; d <= dh && highest <= need; d++) {
        unsigned b = (b0 + d) % NB;
        uint32_t demand = x->prev[b] > x->cur[b] ? x->prev[b] : x->cur[b];
        if (demand > highest) highest = demand;
    }
    return highest > need;
}

static int class_reused(pd_policy *p, int small, uint64_t size, uint32_t cnt, unsigned b0,
                        unsigned dh)
{
    return class_reused_at(p, cls_find(p, small, size, 0), cnt, b0, dh);
}

/*
 * Whether a proactive tick can skip the ranking: every releasable segment
 * (keys v[0..n), none expandable) predicted reused within the horizon. The
 * j-th most recent free segment of class c is reused when its walk
 * (walk_next) finds a bin within the horizon whose demand exceeds busy(c) +
 * j; distances only grow with the bin, so that is: the highest demand of
 * the bins within the horizon exceeds busy(c) + j. Checked for each class's
 * last j, its count - 1. 0 when not sure (then rank as usual). maxd is the
 * highest demand of all the bins (kept so by every change of prev and cur),
 * so a horizon of all NB bins needs no walk.
 */
static int all_reused(pd_policy *p, const pd_key *v, size_t n, uint64_t now, uint64_t h)
{
    enum { MAXG = 16 };
    uint64_t g[MAXG];
    uint32_t cnt[MAXG];
    size_t ng = 0, last = 0;
    if (h == NEVER) return 0; /* NEVER <= h: the walk's answer would count */
    for (size_t i = 0; i < n; i++) {
        size_t k = last;
        if (k >= ng || g[k] != v[i].k1)
            for (k = 0; k < ng && g[k] != v[i].k1; k++)
                ;
        if (k == ng) {
            if (ng == MAXG) return 0;
            g[ng] = v[i].k1;
            cnt[ng++] = 0;
        }
        cnt[k]++;
        last = k;
    }
    unsigned b0 = bin_of(p, now), dh = bins_ahead(p, h);
    for (size_t k = 0; k < ng; k++)
        if (!class_reused(p, (int)(g[k] >> 63), g[k] & ~(1ull << 63), cnt[k], b0, dh)) return 0;
    return 1;
}

/* all_reused from the classes' counts of releasable segments
 * (count_busy_partial, p->free_ok): the same test without keys. */
static int all_reused_free(pd_policy *p, uint64_t now, uint64_t h)
{
    if (h == NEVER) return 0;
    unsigned b0 = bin_of(p, now), dh = bins_ahead(p, h);
    for (size_t k = 0; k < p->nsc; k++)
        if (p->sc[k].free && !class_reused_at(p, sc_cls(p, k, 0), p->sc[k].free, b0, dh)) return 0;
    return 1;
}

/* Room for n keys in p->keys and p->keys_tmp: GM_OK or GM_ENOMEM. */
static int keys_room(pd_policy *p, size_t n)
{
    if (p->cap_keys >= n) return GM_OK;
    size_t cap = n * 2;
    pd_key *k = realloc(p->keys, cap * sizeof *k);
    pd_key *t = k ? realloc(p->keys_tmp, cap * sizeof *t) : NULL;
    if (k) p->keys = k;
    if (!t) return GM_ENOMEM;
    p->keys_tmp = t;
    p->cap_keys = cap;
    return GM_OK;
}

/* The ranking's key of view entry i when predicting: (class, most recent
 * first, address); sizes are far below 2^63: the pool goes in the top bit. */
static inline pd_key class_key(const gm_seg_brief *s, size_t i)
{
    return (pd_key){(uint64_t)s->small_pool << 63 | s->size, UINT64_MAX - s->last_use_ns, s->addr,
                    (uint32_t)i};
}

/* The predictions (all "reused") of the view's segments without an open
 * one, made in the ranking's order, which is total (the address ends it):
 * what ranking does when nothing is to be released. */
static void predict_reused(pd_policy *p, pd_key *key, size_t k, uint64_t now)
{
    key_sort(key, p->keys_tmp, k);
    for (size_t r = 0; r < k; r++)
        pending_add(p, &p->bv.v[key[r].i], 1, now);
}

/*
 * Rank the releasable classic segments of the fresh view into p->order
 * (and p->keys), furthest predicted next use first (with predictions and
 * not `all`, only those predicted not reused: what a proactive release
 * takes, and they would come first anyway),
 * recording a prediction for each one without an outstanding one. Without
 * predictions: LRU order. Returns how many are predicted not reused within
 * the horizon (they come first in the order).
 */
static size_t rank_segments(pd_policy *p, uint64_t now, int all)
{
    const gm_seg_brief *v = p->bv.v;
    size_t n = 0;
    int pred = predicting(p), counted = pred && !all && p->free_ok && p->marks_ok;
    p->nkeys = p->order.n = 0;
    if (!p->marks_ok) marks_build(p);
    if (counted && all_reused_free(p, now, horizon(p))) {
        /* nothing to release, known from the classes' counts (the view
         * holds only releasable classic segments): keys only for the
         * segments without an open prediction (resolve marked them) */
        if (keys_room(p, p->bv.n) != GM_OK) return 0;
        for (size_t i = 0; i < p->bv.n; i++)
            if (!p->open_at[i]) p->keys[n++] = class_key(&v[i], i);
        predict_reused(p, p->keys, n, now);
        return 0;
    }
    for (size_t i = 0; i < p->bv.n; i++)
        n += v[i].releasable != 0;
    if (keys_room(p, n) != GM_OK) return 0;
    pd_key *key = p->keys;
    size_t m = 0;
    int expandable = 0;
    for (size_t r = 0; r < p->bv.n; r++) {
        size_t i = view_at(p, r);
        if (!v[i].releasable) continue;
        if (pred)
            key[m] = class_key(&v[i], i);
        else
            key[m] = (pd_key){v[i].last_use_ns, v[i].addr, 0, (uint32_t)i};
        m++;
        expandable |= v[i].expandable;
    }
    if (pred && !all && !expandable && !counted && all_reused(p, key, n, now, horizon(p))) {
        /* nothing to release: only the new predictions */
        size_t k = 0;
        for (size_t r = 0; r < n; r++)
            if (!open_at(p, key[r].i, v[key[r].i].addr)) key[k++] = key[r];
        predict_reused(p, key, k, now);
        return 0;
    }
    if (pred) key_group(key, p->keys_tmp, n);
    key_sort(key, p->keys_tmp, n);
    size_t not_reused = 0;
    if (pred) {
        uint64_t h = horizon(p);
        uint32_t j = 0;
        pd_walk w;
        const gm_seg_brief *prev = NULL;
        size_t kept = 0;
        for (size_t r = 0; r < n; r++) {
            uint32_t i = key[r].i;
            const gm_seg_brief *s = &v[i];
            if (!prev || s->small_pool != prev->small_pool || s->size != prev->size) {
                j = 0;
                walk_start(p, &w, cls_find(p, s->small_pool, s->size, 0), now);
            }
            uint64_t d = s->expandable ? 0 : walk_next(p, &w, j++);
            int reused = d <= h;
            not_reused += !reused;
            if (!s->expandable && !open_at(p, i, s->addr)) pending_add(p, s, reused, now);
            if (all || !reused) /* kept <= r: key[r] was read */
                key[kept++] = (pd_key){UINT64_MAX - d, s->last_use_ns, s->addr, i};
            prev = s;
        }
        n = kept;
        key_sort(key, p->keys_tmp, n);
    }
    gm_addr_list *o = &p->order;
    o->n = 0;
    if (o->cap < n) {
        uint64_t *a = realloc(o->v, n * sizeof *a);
        if (!a) return 0;
        o->v = a;
        o->cap = n;
    }
    for (size_t r = 0; r < n; r++)
        o->v[r] = v[key[r].i].addr;
    o->n = n;
    p->nkeys = n;
    return not_reused;
}

/* Release the first n segments of the ranking (p->order, p->keys) in its
 * order until need, as gm_release_in_order does with a ranked list (a
 * release changes only the segment it releases: the others keep their id
 * and brief); keeps accounts. after_resolve: called from a tick right
 * after resolve, where every open prediction's segment is there (resolve
 * dropped those that went), so the released ones are the segments this
 * releases, marked as it goes, and the model's counts (sc_fetch) replace
 * the view after it; else (or a model without counts) a view after it
 * tells which predictions' segments went (note_released). */
static uint64_t release_ranked(pd_policy *p, gm_alloc *a, size_t n, uint64_t need, uint64_t now,
                               int after_resolve)
{
    int marks = after_resolve && a->ops->class_counts;
    uint64_t got = 0;
    if (gm_brieflist_own(&p->bv) != GM_OK) return 0; /* a release moves the model's briefs */
    for (size_t r = 0; r < n && r < p->nkeys && got < need; r++) {
        uint32_t i = p->keys[r].i;
        const gm_seg_brief *s = &p->bv.v[i];
        if (!s->releasable) continue;
        uint64_t one = gm_alloc_release(a, s->id, now);
        got += one;
        size_t x = marks && one && !s->expandable ? open_at(p, i, s->addr) : 0;
        if (x) { /* note_released's, for this one */
            p->released_bytes += p->pendc[x - 1].size;
            pending_released(&p->pend[x - 1]);
        }
    }
    if (!got || (marks && sc_fetch(p, a)) || view_fetch(p, a) != GM_OK) return got;
    if (!marks) note_released(p);
    sc_build(p, a); /* the counts after the release: the next tick reads less */
    return got;
}

/* ---------------- callbacks ---------------- */

static uint64_t timer_period_ns(void *state)
{
    return ((pd_policy *)state)->sample_ns;
}

static void on_timer(void *state, gm_alloc *a, uint64_t now)
{
    pd_policy *p = state;
    add_sample(p, (double)a->c.allocated_bytes, now);
    uint64_t idx = p->event_index ? *p->event_index : 0;
    uint32_t pass = p->pass ? *p->pass : 0;
    int idle = p->ticked && p->event_index && idx == p->tick_index && pass == p->tick_pass;
    p->ticked = 1;
    p->tick_index = idx;
    p->tick_pass = pass;
    if (idle) { /* nothing happened: only deadlines pass */
        resolve(p, a, now, 0);
        p->last_tick_ns = now;
        return;
    }
    if (!(p->sc_ok && p->sc_gen == driver_calls(a))) sc_fetch(p, a); /* a driver call since */
    if (p->sc_ok && p->sc_gen == driver_calls(a)) {
        if (view_fetch_releasable(p, a) != GM_OK) return;
        count_busy_partial(p, a);
    } else {
        if (view_fetch(p, a) != GM_OK) return;
        count_busy(p);
        sc_build(p, a);
    }
    if (p->period_ns) {
        uint64_t cyc = (now - p->anchor_ns) / p->period_ns;
        if (cyc != p->cycle) {
            for (size_t i = 0; i < p->ncls; i++) {
                pd_class *k = &p->cls[i];
                memcpy(k->prev, k->cur, sizeof k->prev);
                memset(k->cur, 0, sizeof k->cur);
                k->maxd = 0;
                for (size_t j = 0; j < NB; j++)
                    if (k->prev[j] > k->maxd) k->maxd = k->prev[j];
            }
            p->cycle = cyc;
            p->wraps++;
        }
        unsigned b = bin_of(p, now);
        for (size_t i = 0; i < p->ncls; i++)
            if (p->busy_tick[i] > p->cls[i].cur[b]) {
                pd_class *k = &p->cls[i];
                k->cur[b] = (uint16_t)(p->busy_tick[i] > 65535 ? 65535 : p->busy_tick[i]);
                if (k->cur[b] > k->maxd) k->maxd = k->cur[b];
            }
    }
    resolve(p, a, now, 1);
    if (p->proactive && predicting(p)) {
        uint64_t over = p->threshold > 0 ? gm_pressure_over(a, p->threshold, 0) : NEVER;
        if (over) {
            size_t n = rank_segments(p, now, 0);
            if (n) p->proactive_bytes += release_ranked(p, a, n, over, now, 1);
        }
    }
    if (p->bv.borrowed) { /* the model moves on: a later reader fetches again */
        gm_brieflist_forget(&p->bv);
        p->marks_ok = p->free_ok = 0;
    }
    p->last_tick_ns = now;
}

/* A grow is truth for released predictions: the oldest open one whose size
 * would have served it was needed again. */
static void before_grow(void *state, gm_alloc *a, const gm_pressure *pr)
{
    pd_policy *p = state;
    (void)a;
    size_t best = p->npend;
    for (size_t i = 0; i < p->npend; i++) {
        const pd_pending *q = &p->pend[i];
        if (!q->released || q->small != pr->small_pool || pr->now_ns > q->deadline) continue;
        uint64_t size = p->pendc[i].size;
        if (!q->small && (pr->alloc_size > size || pr->alloc_size + LARGE_BUFFER <= size)) continue;
        if (best == p->npend || p->pendc[i].t_dec < p->pendc[best].t_dec) best = i;
    }
    if (best < p->npend) {
        outcome(p, best, 1);
        pending_drop(p, best);
    }
}

static int on_alloc_fail(void *state, gm_alloc *a, const gm_pressure *pr)
{
    pd_policy *p = state;
    if (pr->attempt == 0) {
        uint64_t need = gm_pressure_need(a, pr);
        if (view_fetch(p, a) != GM_OK) return GM_POLICY_NEXT;
        rank_segments(p, pr->now_ns, 1);
        uint64_t got = 0;
        got = release_ranked(p, a, p->order.n, need, pr->now_ns, 0);
        p->fail_bytes += got;
        return got >= need ? GM_POLICY_RETRY : GM_POLICY_NEXT;
    }
    if (pr->attempt == 1) {
        p->flushes++;
        if (gm_release_all(a, pr->now_ns) && view_fetch(p, a) == GM_OK) note_released(p);
        return GM_POLICY_RETRY;
    }
    return GM_POLICY_GIVE_UP;
}

static uint64_t on_foreign_pressure(void *state, gm_alloc *a, uint64_t need, uint64_t now)
{
    pd_policy *p = state;
    if (view_fetch(p, a) != GM_OK) return 0;
    rank_segments(p, now, 1);
    uint64_t got = 0;
    got = release_ranked(p, a, p->order.n, need, now, 0);
    p->foreign_bytes += got;
    return got;
}

/* num / den as a ratio, or no value when den is 0. */
static void ratio(gm_report *o, const char *key, uint64_t num, uint64_t den)
{
    if (den)
        gm_report_real(o, key, GM_KV_RATIO, (double)num / (double)den);
    else
        gm_report_null(o, key, GM_KV_RATIO);
}

/* The line `gmsim compare` prints under its table: what was learned and how
 * well the "reused within the horizon" predictions did. */
static void summary(const pd_policy *p, gm_report *o)
{
    char per[32], hor[32], prec[32] = "n/a", rec[32] = "n/a";
    if (!p->period_ns) {
        gm_report_summary(o, "no period found (predictions need one; it ran as LRU)");
        return;
    }
    if (p->tp + p->fp) snprintf(prec, sizeof prec, "%.2f", (double)p->tp / (double)(p->tp + p->fp));
    if (p->tp + p->fn) snprintf(rec, sizeof rec, "%.2f", (double)p->tp / (double)(p->tp + p->fn));
    gm_report_summary(
        o,
        "learned period %s (autocorrelation %.2f); \"reused within %s\": precision %s, "
        "recall %s over %lld resolved predictions",
        gm_fmt_ns(p->period_ns, per, sizeof per), p->period_r,
        gm_fmt_ns(horizon(p), hor, sizeof hor), prec, rec,
        (long long)(p->tp + p->fp + p->fn + p->tn));
}

static void report(void *state, gm_report *o)
{
    pd_policy *p = state;
    gm_report_int(o, "period_ns", GM_KV_NS, (int64_t)p->period_ns);
    gm_report_real(o, "period_confidence", GM_KV_RATIO, p->period_r);
    gm_report_int(o, "period_estimates", GM_KV_PLAIN, (int64_t)p->n_estimates);
    gm_report_int(o, "period_changes", GM_KV_PLAIN, (int64_t)p->n_period_changes);
    gm_report_int(o, "sample_ns", GM_KV_NS, (int64_t)(p->sample_ns * p->decim));
    gm_report_int(o, "horizon_ns", GM_KV_NS, (int64_t)horizon(p));
    gm_report_bool(o, "horizon_auto", !p->horizon_param_ns);
    gm_report_bool(o, "proactive", p->proactive);
    gm_report_real(o, "threshold", GM_KV_PLAIN, p->threshold);
    gm_report_int(o, "predictions", GM_KV_PLAIN, (int64_t)p->predictions);
    gm_report_int(o, "true_positives", GM_KV_PLAIN, (int64_t)p->tp);
    gm_report_int(o, "false_positives", GM_KV_PLAIN, (int64_t)p->fp);
    gm_report_int(o, "false_negatives", GM_KV_PLAIN, (int64_t)p->fn);
    gm_report_int(o, "true_negatives", GM_KV_PLAIN, (int64_t)p->tn);
    ratio(o, "precision", p->tp, p->tp + p->fp);
    ratio(o, "recall", p->tp, p->tp + p->fn);
    ratio(o, "accuracy", p->tp + p->tn, p->tp + p->fp + p->fn + p->tn);
    gm_report_int(o, "predicted_released_bytes", GM_KV_BYTES, (int64_t)p->released_bytes);
    gm_report_int(o, "released_needed_again_bytes", GM_KV_BYTES, (int64_t)p->released_needed_bytes);
    gm_report_int(o, "proactive_released_bytes", GM_KV_BYTES, (int64_t)p->proactive_bytes);
    gm_report_int(o, "failure_released_bytes", GM_KV_BYTES, (int64_t)p->fail_bytes);
    gm_report_int(o, "foreign_released_bytes", GM_KV_BYTES, (int64_t)p->foreign_bytes);
    gm_report_int(o, "cache_flushes", GM_KV_PLAIN, (int64_t)p->flushes);
    summary(p, o);
}

const gm_policy_ops gm_policy_predictive = {
    .version = GM_POLICY_VERSION,
    .name = "predictive",
    .summary = "learns the iteration period; releases what it predicts is not reused within "
               "horizon",
    .realizable = 1,
    .cost = 2.7,
    .create = create,
    .destroy = destroy,
    .before_grow = before_grow,
    .on_alloc_fail = on_alloc_fail,
    .timer_period_ns = timer_period_ns,
    .on_timer = on_timer,
    .report = report,
    .attach = attach,
    .on_foreign_pressure = on_foreign_pressure,
};
