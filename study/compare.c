/* compare.c - see compare.h. */
#include "compare.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fit.h"

#include "policy_list.h"
#include "preload.h"
#include "pool.h"
#include "prep.h"
#include "same_run.h"
#include "simulate.h"
#include "base/clock.h"
#include "base/units.h"
#include "sim/alloc.h"

typedef struct compare_ctx {
    const gm_sim_config *base;
    gm_compare *c;
    const size_t *job; /* run_shared: the entry of each job it starts, or of each
                          preparation (entry * tenants + tenant) past `runs` */
    size_t runs;
    gm_prep **prep;           /* per entry and tenant: its policy's (study/prep.h), or NULL */
    gm_policy_prep **handles; /* the same, as the runs' configurations point at them */
    uint8_t *has_prep;        /* per entry: 1 when it has one */
} compare_ctx;

/* The progress line of entry e, done in secs (lead: the entry whose run
 * it is, study/same_run.h; NULL when it ran its own). */
static void done_line(const compare_ctx *x, const gm_compare_entry *e, double secs,
                      const gm_compare_entry *lead)
{
    if (!x->base->step_done || e->rc != GM_OK) return;
    char line[2048], b[32];
    const gm_sim_result *r = e->r;
    int n = snprintf(line, sizeof line, "%s: done in %.2f s, %llu OOM%s, peak reserved %s",
                     e->label, secs, (unsigned long long)r->device.n_oom,
                     r->device.n_oom == 1 ? "" : "s", gm_fmt_bytes(r->device.peak_r, b, sizeof b));
    if (lead && n > 0 && (size_t)n < sizeof line)
        snprintf(line + n, sizeof line - (size_t)n,
                 ": the run of %s (no driver call was refused, so neither policy acted)",
                 lead->label);
    x->base->step_done(x->base->step_ctx, line);
}

/* Entry e's run's configuration: the comparison's, with its policy,
 * allocator and settings. */
static gm_sim_config entry_config(const compare_ctx *x, const gm_compare_entry *e)
{
    gm_sim_config cfg = *x->base;
    cfg.policy = e->spec;
    if (e->allocator[0]) cfg.allocator = e->allocator;
    if (e->conf_given) cfg.alloc_conf = e->alloc_conf;
    cfg.progress = NULL;
    return cfg;
}

static void compare_one(void *arg, size_t i)
{
    compare_ctx *x = arg;
    gm_compare_entry *e = &x->c->e[i];
    gm_sim_config cfg = entry_config(x, e);
    if (x->has_prep && x->has_prep[i]) cfg.policy_prep = &x->handles[i * x->base->n_tenants];
    double t0 = gm_monotonic_s();
    e->rc = gm_simulate(&cfg, &e->r, &e->err);
    done_line(x, e, gm_monotonic_s() - t0, NULL);
}

static void compare_job(void *arg, size_t k)
{
    compare_ctx *x = arg;
    if (k < x->runs)
        compare_one(arg, x->job[k]);
    else
        gm_prep_make(x->prep[x->job[k]]);
}

/* With more than one thread, the preparations of the k runs job[0..k)
 * (study/prep.h) as jobs of their own after them (job, jc and rank have
 * room for k * (1 + tenants)), each with its part of its run's cost:
 * ranked first, before the runs (1), and the runs that take one after
 * them (2). Returns the jobs in all. Out of memory: fewer preparations
 * (their runs make their own). */
static size_t add_preps(compare_ctx *x, size_t k, size_t *job, double *jc, int *rank)
{
    size_t nt = x->base->n_tenants, m = k;
    for (size_t r = 0; r < k; r++)
        rank[r] = 1;
    if (x->c->threads < 2 || k < 2 || !x->prep) return k;
    for (size_t r = 0; r < k; r++) {
        size_t i = job[r];
        gm_sim_config cfg = entry_config(x, &x->c->e[i]);
        double cost = jc[r], share;
        for (size_t j = 0; j < nt; j++) {
            gm_prep *p = gm_prep_wanted(&cfg, j, &share) ? gm_prep_new(&cfg, j) : NULL;
            if (!p) continue;
            x->prep[i * nt + j] = p;
            x->handles[i * nt + j] = gm_prep_handle(p);
            x->has_prep[i] = 1;
            job[m] = i * nt + j;
            jc[m] = share * cost;
            rank[m++] = 0;
            jc[r] -= share * cost;
            rank[r] = 2;
        }
    }
    return m;
}

/* The preparations' arrays freed (then none are made). */
static void drop_prep_arrays(compare_ctx *x)
{
    free(x->prep);
    free(x->handles);
    free(x->has_prep);
    x->prep = NULL;
    x->handles = NULL;
    x->has_prep = NULL;
}

/* The preparations no longer needed (after the runs that took them). */
static void free_preps(compare_ctx *x, size_t total)
{
    size_t nt = x->base->n_tenants;
    for (size_t i = 0; x->prep && i < total * nt; i++) {
        gm_prep_free(x->prep[i]);
        x->prep[i] = NULL;
        x->handles[i] = NULL;
    }
    if (x->has_prep) memset(x->has_prep, 0, total);
}

/* The same allocator and settings: the same configuration but the policy. */
static int same_config(const gm_compare_entry *a, const gm_compare_entry *b)
{
    return !strcmp(a->allocator, b->allocator) && a->conf_given == b->conf_given &&
           (!a->conf_given || !strcmp(a->alloc_conf, b->alloc_conf));
}

/* Whether the followers of a lead with result r may share among themselves
 * though not with it: its policy was not inert in the configuration, and
 * it was never asked. */
static int relead(const gm_sim_result *r)
{
    return r && !r->policy_inert && !gm_same_run_asked(r);
}

/* gm_same_run_leads' questions of a comparison's entries. */
static const char *entry_spec(const void *ctx, size_t i)
{
    return ((const gm_compare *)ctx)->e[i].spec;
}

static int entry_same_config(const void *ctx, size_t j, size_t i)
{
    const gm_compare *c = ctx;
    return same_config(&c->e[j], &c->e[i]);
}

/*
 * Run the entries, sharing runs (study/same_run.h): of each allocator's
 * entries whose policy may share one, the first runs first (with every
 * entry that may not), and the others take its run where it is theirs
 * too, or run after it. The results are those of running each.
 */
static int run_shared(compare_ctx *x, size_t total, const double *cost, gm_err *err)
{
    gm_compare *c = x->c;
    size_t nt = x->base->n_tenants, room = (total ? total : 1) * (1 + nt);
    long *lead = malloc((total ? total : 1) * sizeof *lead);
    long *next = malloc((total ? total : 1) * sizeof *next); /* per lead: its successor */
    size_t *job = malloc(room * sizeof *job);
    double *jc = malloc(room * sizeof *jc);
    int *rank = malloc(room * sizeof *rank);
    /* the preparations: none without memory for them */
    x->prep = calloc(room, sizeof *x->prep);
    x->handles = calloc(room, sizeof *x->handles);
    x->has_prep = calloc(total ? total : 1, 1);
    if (!x->prep || !x->handles || !x->has_prep) drop_prep_arrays(x);
    int rc = GM_OK;
    if (!lead || !next || !job || !jc || !rank) {
        rc = gm_errf(err, GM_ENOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < total; i++)
        next[i] = -1;
    /* the configuration is the comparison's but the allocator and its
     * settings */
    gm_same_run_leads(total, entry_spec, entry_same_config, c, lead);
    x->job = job;
    /* phase 0: the leads and the entries that may not share; then each
     * phase, a follower takes its lead's run where it is its own, and the
     * rest run, but for one case: a lead whose own policy was not inert
     * (pytorch with its garbage collection) and that asked nothing. The
     * first of its followers then leads the others in the next phase
     * (their policies may well be inert there); where the lead asked, the
     * followers' runs come to the same ask, and all run at once. */
    for (int phase = 0;; phase++) {
        size_t k = 0;
        int more = 0;
        for (size_t i = 0; i < total; i++) {
            long l = lead[i];
            int follows = l >= 0 && l != (long)i;
            if (phase == 0 ? follows : !follows || c->e[i].r || c->e[i].rc) continue;
            if (phase > 0 && c->e[l].rc == GM_OK && gm_same_run(c->e[l].r, c->e[i].spec)) {
                gm_compare_entry *e = &c->e[i];
                double t0 = gm_monotonic_s();
                e->rc = gm_same_run_copy(c->e[l].r, e->spec, &e->r, &e->err);
                done_line(x, e, gm_monotonic_s() - t0, &c->e[l]);
                c->n_shared += e->rc == GM_OK;
                continue;
            }
            if (phase > 0 && c->e[l].rc == GM_OK && relead(c->e[l].r)) {
                if (next[l] >= 0) { /* l's first waiting follower leads the rest */
                    lead[i] = next[l];
                    more = 1;
                    continue;
                }
                next[l] = (long)i;
                lead[i] = (long)i; /* the new lead: runs now */
            }
            job[k] = i;
            jc[k++] = cost ? cost[i] : 1;
        }
        if (phase > 0 && !k && !more) break;
        x->runs = k;
        /* the first phase's runs are the most: their preparations run
         * beside them (study/prep.h) */
        size_t jobs = phase == 0 && cost ? add_preps(x, k, job, jc, rank) : k;
        if (jobs > k)
            gm_parallel_for_ranked(jobs, jc, rank, c->threads, compare_job, x);
        else
            gm_parallel_for_cost(k, jc, c->threads, compare_job, x);
        free_preps(x, total);
        if (phase > 0 && !more) break;
    }
done:
    free(lead);
    free(next);
    free(job);
    free(jc);
    free(rank);
    drop_prep_arrays(x);
    return rc;
}

static void rank_entries(gm_compare *c)
{
    c->n_ranked = 0;
    c->winner = c->bound = -1;
    for (size_t i = 0; i < c->n; i++) {
        if (c->e[i].realizable)
            c->rank[c->n_ranked++] = i;
        else if (c->bound < 0)
            c->bound = (long)i;
    }
    /* insertion sort: qsort would need the entries in a global, and the
     * policy order breaks ties, so the ranking is the same for any --threads */
    for (size_t i = 1; i < c->n_ranked; i++) {
        size_t v = c->rank[i], j = i;
        while (j > 0) {
            size_t u = c->rank[j - 1];
            int cmp = gm_result_rank_cmp(c->e[u].r, c->e[v].r);
            if (cmp < 0 || (cmp == 0 && u < v)) break;
            c->rank[j] = u;
            j--;
        }
        c->rank[j] = v;
    }
    if (c->n_ranked) c->winner = (long)c->rank[0];
    c->best_deployable = c->best_custom = -1;
    for (size_t k = 0; k < c->n_ranked; k++) {
        long i = (long)c->rank[k];
        long *best = c->e[i].deployable ? &c->best_deployable : &c->best_custom;
        if (*best < 0) *best = i;
    }
}

long gm_compare_verdict_entry(const gm_compare *c)
{
    if (c->winner >= 0) return c->winner;
    return c->bound >= 0 && c->e[c->bound].r ? c->bound : -1;
}

int gm_compare_fit(const gm_sim_config *base, gm_compare *c, int threads, uint64_t max_capacity,
                   gm_err *err)
{
    if (c->winner < 0 || !c->e[c->winner].r || !c->e[c->winner].r->device.n_oom) return GM_OK;
    /* the searches' many runs replay a trace still on disk packed (study/preload.h) */
    gm_sim_config loaded = *base;
    gm_preload pre;
    if (gm_preload_config(&loaded, &pre, GM_PRELOAD_MAX_EVENTS, GM_PRELOAD_MAX_PACKED_BYTES, err))
        return err->code;
    base = &loaded;
    /* one fit per allocator and settings, of its ranked entries' policies
     * together: its searches run on the threads side by side, and share
     * runs where they are one (study/fit.c); each answer is that of a fit
     * of its policy alone */
    size_t *group = malloc((c->n_ranked ? c->n_ranked : 1) * sizeof *group);
    char **specs = malloc((c->n_ranked ? c->n_ranked : 1) * sizeof *specs);
    uint8_t *done = calloc(c->n_ranked ? c->n_ranked : 1, 1);
    int rc = group && specs && done ? GM_OK : gm_errf(err, GM_ENOMEM, "out of memory");
    for (size_t k = 0; k < c->n_ranked && rc == GM_OK; k++) {
        if (done[k]) continue;
        const gm_compare_entry *first = &c->e[c->rank[k]];
        size_t m = 0;
        for (size_t j = k; j < c->n_ranked; j++)
            if (!done[j] && same_config(first, &c->e[c->rank[j]])) {
                done[j] = 1;
                group[m] = c->rank[j];
                specs[m++] = c->e[c->rank[j]].spec;
            }
        gm_sim_config cfg = *base;
        if (first->allocator[0]) cfg.allocator = first->allocator;
        if (first->conf_given) cfg.alloc_conf = first->alloc_conf;
        gm_fit *f = NULL;
        rc = gm_fit_capacity(&cfg, specs, m, threads, max_capacity, &f, err);
        for (size_t j = 0; j < m && rc == GM_OK; j++) {
            gm_compare_entry *e = &c->e[group[j]];
            e->fit_found = f->e[j].found;
            e->fit_capacity = f->e[j].capacity;
            e->fit_max = f->e[j].max_capacity;
        }
        gm_fit_free(f);
    }
    free(group);
    free(specs);
    free(done);
    gm_preload_free(&pre);
    if (rc != GM_OK) return rc;
    c->fitted = 1;
    return GM_OK;
}

int gm_compare_run_allocators(const gm_sim_config *base, const gm_alloc_choice *allocs,
                              size_t n_allocs, char *const *specs, size_t n, int threads,
                              gm_compare **out, gm_err *err)
{
    *out = NULL;
    size_t na = allocs ? n_allocs : 1, total = na * n;
    gm_compare *c = calloc(1, sizeof *c);
    if (c) {
        c->e = calloc(total ? total : 1, sizeof *c->e);
        c->rank = calloc(total ? total : 1, sizeof *c->rank);
    }
    if (!c || !c->e || !c->rank) {
        gm_compare_free(c);
        return gm_errf(err, GM_ENOMEM, "out of memory");
    }
    c->n = total;
    c->by_allocator = allocs != NULL;
    c->threads = threads > 0 ? threads : gm_default_threads();
    for (size_t a = 0; a < na; a++)
        for (size_t i = 0; i < n; i++) {
            gm_compare_entry *e = &c->e[a * n + i];
            snprintf(e->spec, sizeof e->spec, "%s", specs[i]);
            e->realizable = gm_policy_spec_realizable(specs[i]);
            e->deployable = e->realizable && gm_policy_spec_deployable(specs[i]);
            if (!allocs) {
                snprintf(e->label, sizeof e->label, "%s", specs[i]);
                continue;
            }
            snprintf(e->allocator, sizeof e->allocator, "%s", allocs[a].name);
            snprintf(e->alloc_conf, sizeof e->alloc_conf, "%s", allocs[a].conf);
            e->conf_given = allocs[a].conf_given;
            char lab[600];
            gm_alloc_choice_label(&allocs[a], lab, sizeof lab);
            snprintf(e->label, sizeof e->label, "%s / %s", lab, specs[i]);
        }
    /* split between the threads by each run's cost (study/pool.h): its
     * policy's, times its allocator model's */
    double *cost = gm_policy_spec_costs(specs, n, na);
    for (size_t a = 0; cost && allocs && a < na; a++) {
        const gm_alloc_ops *o = gm_alloc_find(allocs[a].name);
        for (size_t i = 0; o && o->cost > 0 && i < n; i++)
            cost[a * n + i] *= o->cost;
    }
    double t0 = gm_monotonic_s();
    compare_ctx x = {.base = base, .c = c};
    int rc = run_shared(&x, total, cost, err);
    c->wall_s = gm_monotonic_s() - t0;
    free(cost);
    if (rc != GM_OK) {
        gm_compare_free(c);
        return rc;
    }
    for (size_t i = 0; i < total; i++)
        if (c->e[i].rc != GM_OK) {
            int rc = c->by_allocator
                         ? gm_errf(err, c->e[i].rc, "allocator / policy %s: %s", c->e[i].label,
                                   c->e[i].err.msg)
                         : gm_errf(err, c->e[i].rc, "policy %s: %s", c->e[i].spec, c->e[i].err.msg);
            gm_compare_free(c);
            return rc;
        }
    rank_entries(c);
    *out = c;
    return GM_OK;
}

int gm_compare_run(const gm_sim_config *base, char *const *specs, size_t n, int threads,
                   gm_compare **out, gm_err *err)
{
    return gm_compare_run_allocators(base, NULL, 0, specs, n, threads, out, err);
}

void gm_compare_free(gm_compare *c)
{
    if (!c) return;
    for (size_t i = 0; c->e && i < c->n; i++)
        gm_sim_result_free(c->e[i].r);
    free(c->e);
    free(c->rank);
    free(c);
}
