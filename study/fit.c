/* fit.c - see fit.h. */
#include "fit.h"

#include "base/units.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "policy_list.h"
#include "pool.h"
#include "same_run.h"
#include "simulate.h"
#include "base/clock.h"
#include "traces/trace.h"

/*
 * Runs a search of one policy may take from another's (study/same_run.h):
 * the runs of a lead (the first policy that may share a run) that never
 * asked its policy, by the search's key (a capacity, or a count of
 * copies), for the searches of the policies after it that may share one. A search looks here before
 * it simulates and takes a run it finds where it is its policy's too; one not there yet (the lead
 * has not come to it) it simulates: the same result either way, so a search's answer and runs do
 * not depend on the threads' timing, only its CPU time does.
 */
typedef struct fit_memo {
    pthread_mutex_t mu;
    pthread_cond_t done;
    int busy; /* the lead simulates run `running` now */
    uint64_t running;
    uint64_t *cap;
    gm_sim_result **r;
    size_t n, room;
} fit_memo;

/* The lead begins its run c (its key: a capacity, or a count of copies):
 * a follower that comes to c waits for it (memo_find) rather than
 * simulate it too. */
static void memo_begin(fit_memo *m, uint64_t c)
{
    pthread_mutex_lock(&m->mu);
    m->busy = 1;
    m->running = c;
    pthread_mutex_unlock(&m->mu);
}

/* The lead's run c is done, with result r (NULL: none): a
 * copy into the memo when it never asked its policy (the run its
 * followers may take), and the followers waiting for it wake. */
static void memo_keep(fit_memo *m, uint64_t c, const gm_sim_result *r, const char *spec)
{
    gm_sim_result *copy = NULL;
    gm_err err = {0};
    if (r && gm_same_run(r, spec) && gm_same_run_copy(r, spec, &copy, &err) != GM_OK) copy = NULL;
    pthread_mutex_lock(&m->mu);
    m->busy = 0;
    pthread_cond_broadcast(&m->done);
    if (!copy) {
        pthread_mutex_unlock(&m->mu);
        return;
    }
    if (m->n == m->room) {
        size_t room = m->room ? 2 * m->room : 4;
        uint64_t *cap = realloc(m->cap, room * sizeof *cap);
        if (cap) m->cap = cap;
        gm_sim_result **v = cap ? realloc(m->r, room * sizeof *v) : NULL;
        if (v) {
            m->r = v;
            m->room = room;
        }
    }
    if (m->n < m->room) {
        m->cap[m->n] = c;
        m->r[m->n++] = copy;
        copy = NULL;
    }
    pthread_mutex_unlock(&m->mu);
    gm_sim_result_free(copy); /* no room: not kept */
}

/* The lead's run c, if it has one: waited for while the lead
 * simulates it (the lead never waits, so this ends); NULL when it has not
 * come to c (never freed before the fit ends, so it is read after the
 * lock). */
static const gm_sim_result *memo_find(fit_memo *m, uint64_t c)
{
    const gm_sim_result *r = NULL;
    if (!m) return NULL;
    pthread_mutex_lock(&m->mu);
    while (m->busy && m->running == c)
        pthread_cond_wait(&m->done, &m->mu);
    for (size_t i = 0; i < m->n && !r; i++)
        if (m->cap[i] == c) r = m->r[i];
    pthread_mutex_unlock(&m->mu);
    return r;
}

/* A search's memos: the one it fills (a lead's) and the one it reads (its
 * lead's); NULL when none. */
typedef struct fit_share {
    fit_memo *fill, *read;
} fit_share;

/* Outcome of one simulation for fit: 1 fits (no OOM, every tenant done),
 * 0 does not (an OOM, or the contexts alone do not fit), <0 an error. The
 * result goes to *keep when keep is given and it fits (or `always`),
 * replacing what was there; else it is freed. With sh (NULL: none), the
 * run is the lead's where that one is this policy's too, and a lead's
 * run goes into its memo; key names the run in the search (its capacity,
 * or its copies). */
static int try_run(const gm_sim_config *cfg, gm_fit_entry *e, gm_sim_result **keep, int always,
                   const fit_share *sh, uint64_t key)
{
    gm_sim_result *r = NULL;
    gm_err err = {0};
    e->runs++;
    const gm_sim_result *lead = sh ? memo_find(sh->read, key) : NULL;
    int rc;
    if (lead && gm_same_run(lead, e->spec)) {
        rc = gm_same_run_copy(lead, e->spec, &r, &err);
        e->shared_runs += rc == GM_OK;
    } else {
        if (sh && sh->fill) memo_begin(sh->fill, key);
        rc = gm_simulate(cfg, &r, &err);
        if (sh && sh->fill) memo_keep(sh->fill, key, rc == GM_OK ? r : NULL, e->spec);
        if (rc == GM_OK) e->events_simulated += r->events;
    }
    if (rc == GM_EOOM) return 0; /* the CUDA contexts do not fit: the device is too small */
    if (rc != GM_OK) {
        e->rc = rc;
        e->err = err;
        return rc;
    }
    int ok = r->device.n_oom == 0 && gm_sim_completed(r) == r->n_tenants;
    if (cfg->step_done) {
        char line[480];
        if (cfg->n_tenants > 1 || !cfg->capacity_bytes)
            snprintf(line, sizeof line, "%s: run %u: %s", e->spec, e->runs, ok ? "no OOM" : "OOM");
        else
            snprintf(line, sizeof line, "%s: run %u: %s at %.3f GiB", e->spec, e->runs,
                     ok ? "fits" : "OOM", (double)cfg->capacity_bytes / (double)GM_GiB);
        cfg->step_done(cfg->step_ctx, line);
    }
    if (keep && (ok || always)) {
        gm_sim_result_free(*keep);
        *keep = r;
    } else {
        gm_sim_result_free(r);
    }
    return ok;
}

/* try_run of a capacity search at capacity c (its key there). */
static int try_capacity(gm_sim_config *cfg, uint64_t c, gm_fit_entry *e, gm_sim_result **best,
                        const fit_share *sh)
{
    cfg->capacity_bytes = c;
    return try_run(cfg, e, best, 0, sh, c);
}

typedef struct fit_ctx {
    const gm_sim_config *base;
    gm_fit *f;
    uint64_t base_capacity, max_capacity;
    fit_share *share; /* per entry (capacity mode), or NULL */
} fit_ctx;

static uint64_t step_down(uint64_t v)
{
    return v / GM_FIT_STEP * GM_FIT_STEP;
}

static uint64_t step_up(uint64_t v)
{
    return (v + GM_FIT_STEP - 1) / GM_FIT_STEP * GM_FIT_STEP;
}

/* A run at capacity c fitted, with result r: the smallest capacity known
 * to fit. A run whose decisions the device's size changed only through
 * which driver calls fitted is the same run on every device from its peak
 * use up to c (sim/device.h: a call refused at c is refused below it, one
 * that fitted stays within the peak), so that fits too, unsimulated. */
static uint64_t fitted(uint64_t c, const gm_sim_result *r)
{
    if (!r->capacity_free) return c;
    uint64_t p = step_up(r->peak_device_used);
    return p < c ? p : c;
}

static void fit_capacity_one(void *arg, size_t i)
{
    fit_ctx *x = arg;
    gm_fit_entry *e = &x->f->e[i];
    gm_sim_config cfg = *x->base;
    cfg.policy = e->spec;
    cfg.progress = NULL;
    cfg.device = NULL;
    cfg.no_hash = 1;            /* fit reports no trace hash: the searches skip it */
    cfg.no_device_stats = 1;    /* a verdict or a row: no memory_stats() (engine.h) */
    gm_sim_result *best = NULL; /* the run that showed `hi` fits */
    int ok;
    uint64_t start = x->base_capacity, max_capacity = x->max_capacity;
    const fit_share *sh = x->share ? &x->share[i] : NULL;
    if (!start) { /* no device known: start from what the run uses on one that never runs out */
        if ((ok = try_capacity(&cfg, GM_FIT_PROBE_BYTES, e, &best, sh)) < 0) goto out;
        if (!ok) {
            e->max_capacity = GM_FIT_PROBE_BYTES;
            goto out; /* not even the probe fits */
        }
        start = best->peak_device_used + GM_FIT_STEP;
        if (!max_capacity) max_capacity = start * 16;
        if (best->capacity_free) { /* the same run on any device from its peak up */
            e->max_capacity = step_up(start);
            start = step_up(best->peak_device_used);
        } else {
            gm_sim_result_free(best);
            best = NULL;
        }
    }
    /* an upper end that fits */
    uint64_t hi = step_up(start), lo = 0;
    if (!best)
        for (;;) {
            e->max_capacity = hi;
            if ((ok = try_capacity(&cfg, hi, e, &best, sh)) < 0) goto out;
            if (ok) {
                hi = fitted(hi, best);
                break;
            }
            lo = hi;
            if (hi >= max_capacity) goto out; /* not found */
            hi = hi * 2 > max_capacity ? step_down(max_capacity) : hi * 2;
            if (hi <= lo) goto out;
        }
    /* just below it first: often the smallest device is the one the run
     * reaches when nothing presses it, and this one run (which fails late)
     * settles it; else a lower end, and the bisection */
    if (lo == 0 && hi > GM_FIT_STEP) {
        if ((ok = try_capacity(&cfg, hi - GM_FIT_STEP, e, &best, sh)) < 0) goto out;
        if (!ok)
            lo = hi - GM_FIT_STEP;
        else
            hi = fitted(hi - GM_FIT_STEP, best);
    }
    /* a lower end that does not: below peak live + contexts nothing fits */
    if (lo == 0) {
        uint64_t floor =
            step_down(best->device.peak_q + x->base->overhead_bytes * x->base->n_tenants);
        lo = floor >= hi ? hi - GM_FIT_STEP : floor;
        for (;;) {
            if (lo == 0) break; /* 0 bytes never fit */
            if ((ok = try_capacity(&cfg, lo, e, &best, sh)) < 0) goto out;
            if (!ok) break;
            hi = fitted(lo, best); /* fits lower than expected: keep going down */
            lo = step_down(lo / 2);
        }
    }
    while (hi > lo && hi - lo > GM_FIT_STEP) {
        uint64_t mid = lo + step_down((hi - lo) / 2);
        if ((ok = try_capacity(&cfg, mid, e, &best, sh)) < 0) goto out;
        if (ok) {
            uint64_t f = fitted(mid, best);
            /* never at or below a capacity that did not fit: a model that
             * sized itself from the device without saying so (device.h,
             * capacity_reads) would make fitted() claim that, and the
             * search would not end */
            hi = f > lo ? f : mid;
        } else {
            lo = mid;
        }
    }
    /* the result's own figures: those of the run that showed hi fits (the
     * same run as one at hi) */
    e->found = 1;
    e->capacity = hi;
    e->oom_capacity = lo;
    e->peak_live = best->device.peak_q;
    e->peak_reserved = best->device.peak_r;
out:
    gm_sim_result_free(best);
}

static gm_fit *fit_new(char *const *specs, size_t n)
{
    gm_fit *f = calloc(1, sizeof *f);
    if (f) f->e = calloc(n ? n : 1, sizeof *f->e);
    if (!f || !f->e) {
        free(f);
        return NULL;
    }
    f->n = n;
    for (size_t i = 0; i < n; i++) {
        snprintf(f->e[i].spec, sizeof f->e[i].spec, "%s", specs[i]);
        f->e[i].realizable = gm_policy_spec_realizable(specs[i]);
        f->e[i].deployable = f->e[i].realizable && gm_policy_spec_deployable(specs[i]);
    }
    return f;
}

static int fit_finish(gm_fit *f, gm_fit **out, gm_err *err)
{
    for (size_t i = 0; i < f->n; i++)
        if (f->e[i].rc != GM_OK) {
            int rc = gm_errf(err, f->e[i].rc, "policy %s: %s", f->e[i].spec, f->e[i].err.msg);
            gm_fit_free(f);
            return rc;
        }
    *out = f;
    return GM_OK;
}

/* Where the search begins: --capacity, else the card the trace records;
 * 0 = neither: each search then starts from its own probe run. */
static int base_capacity(const gm_sim_config *base, uint64_t *cap, gm_err *err)
{
    *cap = base->capacity_bytes;
    if (*cap || base->n_tenants == 0) return GM_OK;
    const gm_tenant_spec *t = &base->tenants[0];
    if (t->events || t->packed) { /* preloaded: its meta is there */
        *cap = t->meta ? t->meta->device_total_bytes : 0;
    } else {
        gm_trace_reader *r;
        int rc = gm_trace_open(t->path, &r, err);
        if (rc) return rc;
        *cap = gm_trace_meta_get(r)->device_total_bytes;
        gm_trace_close(r);
    }
    return GM_OK;
}

/* The searches' memos (fit_memo): the first policy that may share a run
 * (study/same_run.h) fills one, and the later such policies read it; with
 * one such policy or none, *share is NULL. A follower's cost goes just
 * under its lead's, so that a thread that has both runs the lead first
 * (study/pool.h). Returns the memo to free (share_free). */
static fit_memo *share_plan(char *const *specs, size_t n, double *cost, fit_share **share)
{
    *share = NULL;
    long lead = -1;
    size_t followers = 0;
    for (size_t i = 0; i < n; i++)
        if (gm_same_run_may(specs[i])) {
            if (lead < 0)
                lead = (long)i;
            else
                followers++;
        }
    if (!followers) return NULL;
    fit_memo *m = calloc(1, sizeof *m);
    fit_share *sh = m ? calloc(n, sizeof *sh) : NULL;
    if (!sh) { /* out of memory: every search its own */
        free(m);
        return NULL;
    }
    pthread_mutex_init(&m->mu, NULL);
    pthread_cond_init(&m->done, NULL);
    for (size_t i = 0; i < n; i++) {
        if ((long)i == lead) sh[i].fill = m;
        if ((long)i > lead && gm_same_run_may(specs[i])) {
            sh[i].read = m;
            if (cost && cost[i] >= cost[lead]) cost[i] = cost[lead] * 0.999;
        }
    }
    *share = sh;
    return m;
}

static void share_free(fit_memo *m, fit_share *sh)
{
    free(sh);
    if (!m) return;
    for (size_t i = 0; i < m->n; i++)
        gm_sim_result_free(m->r[i]);
    free(m->r);
    free(m->cap);
    pthread_mutex_destroy(&m->mu);
    pthread_cond_destroy(&m->done);
    free(m);
}

int gm_fit_capacity(const gm_sim_config *base, char *const *specs, size_t n, int threads,
                    uint64_t max_capacity, gm_fit **out, gm_err *err)
{
    *out = NULL;
    uint64_t cap;
    int rc = base_capacity(base, &cap, err);
    if (rc) return rc;
    gm_fit *f = fit_new(specs, n);
    if (!f) return gm_errf(err, GM_ENOMEM, "out of memory");
    f->threads = threads > 0 ? threads : gm_default_threads();
    f->capacity_bytes = cap;
    fit_ctx x = {base, f, cap, max_capacity ? max_capacity : cap * 16, NULL};
    f->probed = cap == 0;
    double *cost = gm_policy_spec_costs(specs, n, 1); /* study/pool.h */
    fit_memo *memo = share_plan(specs, n, cost, &x.share);
    double t0 = gm_monotonic_s();
    gm_parallel_for_cost(n, cost, f->threads, fit_capacity_one, &x);
    free(cost);
    f->wall_s = gm_monotonic_s() - t0;
    share_free(memo, x.share);
    return fit_finish(f, out, err);
}

/* One run of k copies for copies_search: 1 fits, 0 does not, <0 an
 * error. *alone: it fitted with no driver call refused and every decision
 * from the device's free memory as on a device without end (the result's
 * `independent`, sim/device.h: room_reads); *peak: the device's peak use. */
typedef int (*copies_run_fn)(void *ctx, uint32_t k, int *alone, uint64_t *peak);

/* The most copies, up to max, before the first count that does not fit,
 * as a scan k = 1, 2, ... finds it; *first_fail: that count (max + 1 when
 * every count up to max fits). A run of k copies that fitted alone (above)
 * is, for its first j < k copies, the run of j copies: each tenant
 * decides from its own allocator (its own cap or quota included) and the
 * device only said yes, and had room wherever it was asked how much (with
 * fewer copies, as much room or more: each copy holds what it held in the
 * k-run, up to the first difference, which never comes); addresses differ,
 * their order within a tenant does not (device.h). So every j < k fits
 * too, and while runs say that the search goes up, to as many copies as
 * the last run's peak says fit on `capacity` (at most 4 times as many),
 * then halves the span to the first failure; where a run fits without saying it (under pressure),
 * the copies between are simulated one by one from the last known, as the scan would. The last
 * count that fits and the first that does not were both simulated. Returns <0 on an error (the
 * copies known by then in *fit). */
static int copies_search(uint32_t max, uint64_t capacity, copies_run_fn run, void *ctx,
                         uint32_t *fit, uint32_t *first_fail)
{
    uint32_t lo = 0, hi = max + 1; /* 1..lo fit; hi does not (max + 1: none known) */
    uint64_t lo_peak = 0;          /* the device's peak use at lo (until one by one) */
    uint32_t known_fit = 0;        /* a k > lo that fits, below or not */
    int one_by_one = 0, rc = GM_OK;
    while (lo + 1 < hi) {
        uint32_t k = lo + 1;
        if (!one_by_one && hi <= max) {
            k = lo + (hi - lo) / 2;
        } else if (!one_by_one && lo && lo_peak) {
            double est = (double)lo * (double)capacity / (double)lo_peak;
            double most = 4.0 * lo < max ? 4.0 * lo : max;
            k = est >= most ? (uint32_t)most : est > lo + 1 ? (uint32_t)est : lo + 1;
        }
        if (k == known_fit) { /* fits (simulated before), not known below */
            lo = k;
            continue;
        }
        int alone = 0;
        uint64_t peak = 0;
        int ok = run(ctx, k, &alone, &peak);
        if (ok < 0) {
            rc = ok;
            hi = k;
            break;
        }
        if (!ok) {
            hi = k;
        } else if (k == lo + 1 || alone) {
            lo = k; /* every copy count up to k fits */
            lo_peak = peak;
        } else {
            known_fit = k; /* k fits; those between lo and k are simulated */
            one_by_one = 1;
        }
    }
    *fit = lo;
    *first_fail = hi;
    return rc;
}

/* Copies of the base's tenants, copy k starting k * stagger later. */
static gm_tenant_spec *copies_specs(const gm_sim_config *base, uint32_t max, uint64_t stagger)
{
    size_t group = base->n_tenants;
    gm_tenant_spec *ts = calloc(group * max, sizeof *ts);
    for (uint32_t k = 0; ts && k < max; k++)
        for (size_t j = 0; j < group; j++) {
            ts[k * group + j] = base->tenants[j];
            ts[k * group + j].offset_ns += (uint64_t)k * stagger;
        }
    return ts;
}

typedef struct tenants_run {
    gm_sim_config cfg;
    gm_fit_entry *e;
    size_t group;        /* tenants a copy */
    const fit_share *sh; /* the runs of k copies another policy's search made */
} tenants_run;

static int tenants_run_one(void *ctx, uint32_t k, int *alone, uint64_t *peak)
{
    tenants_run *x = ctx;
    x->cfg.n_tenants = x->group * k;
    gm_sim_result *r = NULL;
    int ok = try_run(&x->cfg, x->e, &r, 1, x->sh, k);
    if (ok == 0) x->e->first_fail_completed = r ? (uint32_t)gm_sim_completed(r) : 0;
    if (ok > 0) {
        *alone = r->independent;
        *peak = r->peak_device_used;
    }
    gm_sim_result_free(r);
    return ok;
}

static void fit_tenants_one(void *arg, size_t i)
{
    fit_ctx *x = arg;
    gm_fit *f = x->f;
    gm_fit_entry *e = &f->e[i];
    gm_tenant_spec *ts = copies_specs(x->base, f->max_copies, f->stagger_ns);
    if (!ts) {
        e->rc = gm_errf(&e->err, GM_ENOMEM, "out of memory");
        return;
    }
    tenants_run t = {*x->base, e, x->base->n_tenants, x->share ? &x->share[i] : NULL};
    t.cfg.policy = e->spec;
    t.cfg.progress = NULL;
    t.cfg.tenants = ts;
    t.cfg.capacity_bytes = x->base_capacity;
    t.cfg.no_hash = 1;         /* fit reports no trace hash */
    t.cfg.no_device_stats = 1; /* a verdict or a row: no memory_stats() (engine.h) */
    uint32_t hi;
    copies_search(f->max_copies, t.cfg.capacity_bytes, tenants_run_one, &t, &e->copies_fit, &hi);
    e->copies_tried = hi <= f->max_copies ? hi : f->max_copies;
    free(ts);
}

int gm_fit_tenants(const gm_sim_config *base, char *const *specs, size_t n, int threads,
                   uint32_t max_copies, uint64_t stagger_ns, gm_fit **out, gm_err *err)
{
    *out = NULL;
    uint64_t cap;
    int rc = base_capacity(base, &cap, err);
    if (rc) return rc;
    if (max_copies == 0) return gm_errf(err, GM_EUSAGE, "--tenants must be at least 1");
    gm_fit *f = fit_new(specs, n);
    if (!f) return gm_errf(err, GM_ENOMEM, "out of memory");
    f->tenants_mode = 1;
    f->max_copies = max_copies;
    f->stagger_ns = stagger_ns;
    f->capacity_bytes = cap;
    f->threads = threads > 0 ? threads : gm_default_threads();
    fit_ctx x = {base, f, cap, 0, NULL};
    double *cost = gm_policy_spec_costs(specs, n, 1); /* study/pool.h */
    fit_memo *memo = share_plan(specs, n, cost, &x.share);
    double t0 = gm_monotonic_s();
    gm_parallel_for_cost(n, cost, f->threads, fit_tenants_one, &x);
    free(cost);
    f->wall_s = gm_monotonic_s() - t0;
    share_free(memo, x.share);
    return fit_finish(f, out, err);
}

int gm_fit_wants_density(const gm_sim_config *base)
{
    for (size_t i = 0; i < base->n_tenants; i++) {
        const gm_tenant_spec *t = &base->tenants[i];
        if (t->cls || t->request_bytes || t->limit_bytes) return 1;
    }
    return 0;
}

typedef struct density_acc {
    double driver_ns, span_ns; /* protected tenants */
    double int_a, cap_span;    /* device */
    uint64_t other_ooms;
    int ok;
    char why[200];
} density_acc;

/* Add run r to acc: whether every protected tenant completed without OOM,
 * and its figures. */
static void density_add(const gm_sim_result *r, int protected_class, density_acc *acc)
{
    for (size_t i = 0; i < r->n_tenants; i++) {
        const gm_tenant_result *t = &r->t[i];
        int prot = protected_class == GM_CLASS_UNSET || t->cls == protected_class;
        if (!prot) {
            acc->other_ooms += t->m.n_oom;
            continue;
        }
        if ((t->m.n_oom || t->status != GM_TENANT_COMPLETED) && acc->ok) {
            acc->ok = 0;
            snprintf(acc->why, sizeof acc->why, "tenant %zu (%.120s, %s) ran out of memory", i,
                     t->path, gm_tenant_class_name(t->cls));
        }
        /* slowdown: time stalled on driver calls and on the host tier's
         * transfers (--host-tier, --on-oom chain), over the trace's span */
        acc->driver_ns += (double)gm_counters_driver_ns(&t->c) + (double)t->tier.spill_ns +
                          (double)t->tier.fetch_ns;
        acc->span_ns += (double)(t->m.t_last - t->m.t_first);
    }
    acc->int_a += r->device.int_a;
    acc->cap_span += (double)r->capacity_bytes * (double)(r->device.t_last - r->device.t_first);
}

/* One run for density; 1 fits, 0 does not (acc->why says why), <0 an
 * error. *alone and *peak as copies_run_fn's (r's, when it ran). */
static int density_run(const gm_sim_config *cfg, gm_fit *f, gm_fit_entry *e, density_acc *acc,
                       int *alone, uint64_t *peak)
{
    gm_sim_result *r = NULL;
    gm_err err = {0};
    e->runs++;
    int rc = gm_simulate(cfg, &r, &err);
    if (rc == GM_EOOM) { /* not placed: admission, or the contexts do not fit */
        acc->ok = 0;
        snprintf(acc->why, sizeof acc->why, "%.190s", err.msg);
        return 0;
    }
    if (rc != GM_OK) {
        e->rc = rc;
        e->err = err;
        return rc;
    }
    e->events_simulated += r->events;
    density_add(r, f->protected_class, acc);
    if (alone) *alone = r->independent;
    if (peak) *peak = r->peak_device_used;
    gm_sim_result_free(r);
    if (cfg->step_done) {
        char line[480];
        snprintf(line, sizeof line, "%s: %zu tenants: %s", e->label, cfg->n_tenants,
                 acc->ok ? "no OOM" : "OOM");
        cfg->step_done(cfg->step_ctx, line);
    }
    return acc->ok;
}

static void density_keep(gm_fit_entry *e, const density_acc *acc)
{
    e->slowdown = acc->span_ns > 0 ? acc->driver_ns / acc->span_ns : 0;
    e->utilization = acc->cap_span > 0 ? acc->int_a / acc->cap_span : 0;
    e->other_ooms = acc->other_ooms;
}

typedef struct density_fit {
    uint32_t k;
    density_acc acc;
} density_fit;

typedef struct density_runs {
    gm_sim_config cfg;
    gm_fit *f;
    gm_fit_entry *e;
    size_t group;
    density_fit *fits; /* every count simulated that fitted, and its figures */
    size_t nfits, capfits;
    density_acc fail; /* the last count that did not fit: copies_search's answer + 1 */
} density_runs;

/* copies_search's run for density: each run's figures kept for the count
 * the search ends at. */
static int density_run_one(void *ctx, uint32_t k, int *alone, uint64_t *peak)
{
    density_runs *d = ctx;
    d->cfg.n_tenants = d->group * k;
    density_acc acc = {.ok = 1};
    int ok = density_run(&d->cfg, d->f, d->e, &acc, alone, peak);
    if (ok == 0) d->fail = acc; /* hi only falls: the last failure is the answer's + 1 */
    if (ok <= 0) return ok;
    if (d->nfits == d->capfits) {
        size_t cap = d->capfits ? 2 * d->capfits : 16;
        density_fit *v = realloc(d->fits, cap * sizeof *v);
        if (!v) {
            d->e->rc = gm_errf(&d->e->err, GM_ENOMEM, "out of memory");
            return GM_ENOMEM;
        }
        d->fits = v;
        d->capfits = cap;
    }
    d->fits[d->nfits++] = (density_fit){k, acc};
    return ok;
}

static void fit_density_one(void *arg, size_t i)
{
    fit_ctx *x = arg;
    gm_fit *f = x->f;
    gm_fit_entry *e = &f->e[i];
    size_t group = x->base->n_tenants;
    gm_sim_config cfg = *x->base;
    cfg.policy = e->spec;
    cfg.progress = NULL;
    cfg.device = NULL;
    cfg.no_hash = 1;
    cfg.no_device_stats = 1; /* a verdict or a row: no memory_stats() (engine.h) */
    cfg.capacity_bytes = x->base_capacity;
    cfg.scope_device = e->mode == GM_DENSITY_SCOPE;
    cfg.share = e->mode == GM_DENSITY_HARD_CAP   ? GM_SHARE_HARD_CAP
                : e->mode == GM_DENSITY_REQUESTS ? GM_SHARE_REQUESTS
                                                 : GM_SHARE_NONE;
    cfg.mps = x->base->mps && e->mode != GM_DENSITY_REQUESTS; /* MPS holds no requests */
    if (e->mode == GM_DENSITY_ONE_PER_GPU) { /* each trace on a device of its own */
        density_acc acc = {.ok = 1};
        for (size_t j = 0; j < group; j++) {
            cfg.tenants = &x->base->tenants[j];
            cfg.n_tenants = 1;
            int ok = density_run(&cfg, f, e, &acc, NULL, NULL);
            if (ok < 0) return;
            if (!ok) {
                snprintf(e->refusal, sizeof e->refusal, "%s", acc.why);
                return;
            }
        }
        e->jobs = 1;
        density_keep(e, &acc);
        return;
    }
    gm_tenant_spec *ts = copies_specs(x->base, f->max_copies, f->stagger_ns);
    if (!ts) {
        e->rc = gm_errf(&e->err, GM_ENOMEM, "out of memory");
        return;
    }
    cfg.tenants = ts;
    /* the copies as fit --tenants searches them (copies_search: a run that
     * fitted with nobody refused and every look at the device's free memory
     * finding room says every smaller count fits; nobody is asked to
     * release, under any mode, without a refusal); the row's figures are
     * those of the run at the answer, its refusal that of the run one copy
     * up, both simulated */
    density_runs d = {cfg, f, e, group, NULL, 0, 0, {.ok = 1}};
    uint32_t fit, hi;
    int rc = copies_search(f->max_copies, cfg.capacity_bytes, density_run_one, &d, &fit, &hi);
    e->copies_tried = hi <= f->max_copies ? hi : f->max_copies;
    if (rc == GM_OK && hi <= f->max_copies)
        snprintf(e->refusal, sizeof e->refusal, "%s", d.fail.why);
    for (size_t j = 0; fit && j < d.nfits; j++)
        if (d.fits[j].k == fit) { /* copies_search simulated it */
            e->copies_fit = fit;
            e->jobs = (uint32_t)(fit * group);
            density_keep(e, &d.fits[j].acc);
        }
    free(d.fits);
    free(ts);
}

int gm_fit_density(const gm_sim_config *base, char *const *specs, size_t n, int threads,
                   uint32_t max_copies, uint64_t stagger_ns, gm_fit **out, gm_err *err)
{
    *out = NULL;
    uint64_t cap;
    int rc = base_capacity(base, &cap, err);
    if (rc) return rc;
    if (max_copies == 0) return gm_errf(err, GM_EUSAGE, "--tenants must be at least 1");
    if (!cap)
        return gm_errf(err, GM_EUSAGE,
                       "density needs the device's size: give --capacity SIZE or --gpu NAME");
    int prot = GM_CLASS_UNSET;
    for (size_t i = 0; i < base->n_tenants; i++) {
        int cls;
        uint64_t req, lim;
        if ((rc = gm_tenant_class_resolve(&base->tenants[i], &cls, &req, &lim, err))) return rc;
        if (cls == GM_CLASS_GUARANTEED) prot = GM_CLASS_GUARANTEED;
    }
    /* rows: one job per GPU and hard caps as deployed (pytorch), then per policy */
    size_t rows = 2 + 2 * n;
    char **sp = malloc(rows * sizeof *sp);
    if (!sp) return gm_errf(err, GM_ENOMEM, "out of memory");
    static char stock[] = "pytorch";
    sp[0] = sp[1] = stock;
    for (size_t i = 0; i < n; i++)
        sp[2 + 2 * i] = sp[3 + 2 * i] = specs[i];
    gm_fit *f = fit_new(sp, rows);
    free(sp);
    if (!f) return gm_errf(err, GM_ENOMEM, "out of memory");
    for (size_t i = 0; i < rows; i++) {
        gm_fit_entry *e = &f->e[i];
        e->mode = i == 0       ? GM_DENSITY_ONE_PER_GPU
                  : i == 1     ? GM_DENSITY_HARD_CAP
                  : i % 2 == 0 ? GM_DENSITY_REQUESTS
                               : GM_DENSITY_SCOPE;
        const char *mps = base->mps && e->mode != GM_DENSITY_REQUESTS ? " (MPS)" : "";
        if (e->mode == GM_DENSITY_ONE_PER_GPU)
            snprintf(e->label, sizeof e->label, "one job per GPU");
        else if (e->mode == GM_DENSITY_HARD_CAP)
            snprintf(e->label, sizeof e->label, "hard caps%s", mps);
        else
            snprintf(e->label, sizeof e->label, "%s + %.60s release%s",
                     e->mode == GM_DENSITY_REQUESTS ? "requests/limits" : "device scope", e->spec,
                     mps);
    }
    f->tenants_mode = 1;
    f->density = 1;
    f->protected_class = prot;
    f->max_copies = max_copies;
    f->stagger_ns = stagger_ns;
    f->capacity_bytes = cap;
    f->threads = threads > 0 ? threads : gm_default_threads();
    fit_ctx x = {base, f, cap, 0, NULL};
    double t0 = gm_monotonic_s();
    gm_parallel_for(rows, f->threads, fit_density_one, &x);
    f->wall_s = gm_monotonic_s() - t0;
    return fit_finish(f, out, err);
}

void gm_fit_free(gm_fit *f)
{
    if (!f) return;
    free(f->e);
    free(f);
}
