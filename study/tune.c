/* tune.c - see tune.h. */
#include "tune.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fit.h"
#include "pool.h"
#include "same_run.h"
#include "simulate.h"
#include "base/clock.h"
#include "traces/alloc_conf.h"

/* The grid. Values are the ones PyTorch's documentation and users reach
 * for: max_split_size_mb from 64 to 512 MiB (it must exceed 20),
 * garbage_collection_threshold 0.6 and 0.8, and roundup_power2_divisions as
 * one value for every size or the per-interval list of PyTorch's own
 * example (notes/cuda.rst, "Optimizing memory usage with
 * PYTORCH_CUDA_ALLOC_CONF"). */
static const char *const expandable[] = {NULL, "expandable_segments:True"};
static const char *const max_split[] = {NULL, "max_split_size_mb:64", "max_split_size_mb:128",
                                        "max_split_size_mb:256", "max_split_size_mb:512"};
static const char *const gc[] = {NULL, "garbage_collection_threshold:0.6",
                                 "garbage_collection_threshold:0.8"};
static const char *const roundup[] = {NULL, "roundup_power2_divisions:4",
                                      "roundup_power2_divisions:8",
                                      "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]"};
#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static void join(char *buf, size_t len, const char *piece)
{
    if (!piece) return;
    size_t n = strlen(buf);
    snprintf(buf + n, len - n, "%s%s", n ? "," : "", piece);
}

/* The PyTorch whose rules apply: the run's, else the first trace's, else
 * the newest. */
static int torch_version_of(const gm_sim_config *base, char *recorded, size_t len)
{
    recorded[0] = 0;
    if (!base->n_tenants) return base->torch_version ? base->torch_version : GM_TORCH_NEWEST;
    const gm_tenant_spec *t = &base->tenants[0];
    const gm_trace_meta *m = t->meta;
    gm_trace_reader *r = NULL;
    gm_err ignored;
    if (!t->events && gm_trace_open(t->path, &r, &ignored) == GM_OK) m = gm_trace_meta_get(r);
    int v = base->torch_version;
    if (m) {
        if (!v) v = gm_torch_version_parse(m->torch_version);
        if (m->alloc_conf) snprintf(recorded, len, "%s", m->alloc_conf);
    }
    gm_trace_close(r);
    return v ? v : GM_TORCH_NEWEST;
}

/* How an entry's run may be another's (shared): the same settings with
 * garbage_collection_threshold 0.6 instead of none or 0.8 (LEAD_GC), or
 * without max_split_size_mb (LEAD_SPLIT). */
enum { LEAD_NONE = 0, LEAD_GC = 1, LEAD_SPLIT = 2 };

typedef struct grid {
    gm_tune *t;
    size_t cap;
    long *lead;          /* per entry: the entry whose run may be its, -1 */
    uint8_t *rule;       /* per entry: LEAD_* */
    uint64_t *max_split; /* per entry: its max_split_size in bytes, as build read it */
} grid;

static void grid_free(grid *g)
{
    free(g->lead);
    free(g->rule);
    free(g->max_split);
}

static gm_tune_entry *add(grid *g, const char *conf, double fraction)
{
    for (size_t i = 0; i < g->t->n; i++) /* the recorded settings may be a grid point */
        if (!strcmp(g->t->e[i].conf, conf) && g->t->e[i].memory_fraction == fraction)
            return &g->t->e[i];
    if (g->t->n == g->cap) return NULL;
    gm_tune_entry *e = &g->t->e[g->t->n++];
    snprintf(e->conf, sizeof e->conf, "%s", conf);
    e->memory_fraction = fraction;
    return e;
}

static int build(grid *g, const gm_sim_config *base, const char *recorded)
{
    gm_tune *t = g->t;
    g->cap = N_OF(expandable) * N_OF(max_split) * N_OF(gc) * N_OF(roundup) + 1;
    if (!(t->e = calloc(g->cap, sizeof *t->e))) return GM_ENOMEM;
    int fraction_key = t->torch_version >= GM_TORCH_2_10; /* per_process_memory_fraction */
    g->lead = malloc(g->cap * sizeof *g->lead);
    g->rule = calloc(g->cap, 1);
    g->max_split = calloc(g->cap, sizeof *g->max_split);
    if (!g->lead || !g->rule || !g->max_split) return GM_ENOMEM;
    for (size_t i = 0; i < g->cap; i++)
        g->lead[i] = -1;
    for (size_t x = 0; x < N_OF(expandable); x++)
        for (size_t m = 0; m < N_OF(max_split); m++)
            for (size_t c = 0; c < N_OF(gc); c++)
                for (size_t r = 0; r < N_OF(roundup); r++) {
                    char conf[320] = "";
                    double fraction = base->memory_fraction;
                    join(conf, sizeof conf, expandable[x]);
                    join(conf, sizeof conf, max_split[m]);
                    join(conf, sizeof conf, gc[c]);
                    join(conf, sizeof conf, roundup[r]);
                    if (gc[c] && fraction <= 0) { /* collection needs a fraction */
                        if (fraction_key)
                            join(conf, sizeof conf, "per_process_memory_fraction:0.99");
                        else
                            fraction = GM_TUNE_GC_FRACTION;
                    }
                    gm_tune_entry *e = add(g, conf, fraction);
                    if (e && !conf[0]) e->is_default = 1;
                        /* grid order: (x, m, c, r) is entry ((x * M + m) * C + c) * R + r */
#define AT(x, m, c, r) ((((x)*N_OF(max_split) + (m)) * N_OF(gc) + (c)) * N_OF(roundup) + (r))
                    if (!e || (size_t)(e - t->e) != AT(x, m, c, r)) continue;
                    if (c != 1) { /* led by the same with garbage collection 0.6 */
                        g->lead[AT(x, m, c, r)] = (long)AT(x, m, 1, r);
                        g->rule[AT(x, m, c, r)] = LEAD_GC;
                    } else if (m && !expandable[x]) { /* ... by the same without max_split */
                        g->lead[AT(x, m, c, r)] = (long)AT(x, 0, 1, r);
                        g->rule[AT(x, m, c, r)] = LEAD_SPLIT;
                    }
#undef AT
                }
    if (recorded[0]) {
        gm_tune_entry *e = add(g, recorded, base->memory_fraction);
        if (e) e->is_recorded = 1;
    }
    snprintf(t->dims, sizeof t->dims,
             "%zu expandable_segments x %zu max_split_size_mb x %zu "
             "garbage_collection_threshold x %zu roundup_power2_divisions%s",
             N_OF(expandable), N_OF(max_split), N_OF(gc), N_OF(roundup),
             recorded[0] ? ", and the recorded settings" : "");
    /* what this PyTorch refuses is shown, not run */
    for (size_t i = 0; i < t->n; i++) {
        gm_pt_conf pc;
        gm_tune_entry *e = &t->e[i];
        if (gm_pt_conf_parse_for(e->conf, t->torch_version, &pc, &e->err) != GM_OK) {
            e->skipped = 1;
            t->n_skipped++;
        } else {
            g->max_split[i] = pc.max_split_size;
        }
    }
    return GM_OK;
}

typedef struct tune_ctx {
    const gm_sim_config *base;
    gm_tune *t;
    size_t done;             /* settings simulated (atomic): for step_done */
    const size_t *job;       /* this round's entries */
    struct run_facts *facts; /* per entry: what its run says about the others' */
    long device_of;          /* the entry besides the defaults whose run names the device */
} tune_ctx;

static void summarize(gm_tune_entry *e, const gm_sim_result *r)
{
    const gm_metrics *d = &r->device;
    gm_alloc_counters tot = gm_sim_totals(r);
    e->ooms = d->n_oom;
    e->first_oom_index = d->n_oom_kept ? d->ooms[0].event_index : 0;
    e->first_oom_size = d->n_oom_kept ? d->ooms[0].size : 0;
    e->peak_live = d->peak_q;
    e->peak_reserved = d->peak_r;
    e->peak_allocated = d->peak_a;
    e->fragmentation = gm_metrics_fragmentation(d);
    e->driver_calls = tot.n_driver_alloc + tot.n_driver_free;
    e->driver_ns = gm_counters_driver_ns(&tot);
}

/* What an entry's run says about the runs of the settings it leads
 * (shared): no driver call or memory limit refused (the policy was never
 * asked, no OOM, every tenant done); the policy released nothing; the
 * largest classic segment of any tenant. */
typedef struct run_facts {
    uint8_t refused_none, released_none;
    uint64_t largest_segment;
} run_facts;

static run_facts facts_of(const gm_sim_result *r)
{
    run_facts f = {
        r->device.n_oom == 0 && gm_sim_completed(r) == r->n_tenants && !gm_same_run_asked(r), 1, 0};
    for (size_t k = 0; k < r->n_tenants; k++) {
        f.released_none &= r->t[k].c.released_bytes == 0;
        if (r->t[k].c.largest_segment > f.largest_segment)
            f.largest_segment = r->t[k].c.largest_segment;
    }
    return f;
}

static void progress_step(tune_ctx *x)
{
    if (!x->base->step_done) return;
    char line[64];
    snprintf(line, sizeof line, "%zu of %zu settings simulated",
             __atomic_add_fetch(&x->done, 1, __ATOMIC_RELAXED), x->t->n);
    x->base->step_done(x->base->step_ctx, line);
}

static void tune_one(void *arg, size_t k)
{
    tune_ctx *x = arg;
    size_t i = x->job[k];
    gm_tune_entry *e = &x->t->e[i];
    if (e->skipped) return;
    gm_sim_config cfg = *x->base;
    cfg.alloc_conf = e->conf;
    cfg.memory_fraction = e->memory_fraction;
    cfg.torch_version = x->t->torch_version;
    cfg.progress = NULL;
    cfg.no_device_stats = 1; /* a verdict or a row: no memory_stats() (engine.h) */
    gm_sim_result *r = NULL;
    e->rc = gm_simulate(&cfg, &r, &e->err);
    if (e->rc == GM_OK) summarize(e, r);
    /* every run has the same device: the defaults' run names it, or the
     * run the defaults take theirs from (the rounds never overlap) */
    if (e->rc == GM_OK && (e->is_default || (long)i == x->device_of)) {
        x->t->capacity_bytes = r->capacity_bytes;
        snprintf(x->t->capacity_source, sizeof x->t->capacity_source, "%s", r->capacity_source);
        snprintf(x->t->policy, sizeof x->t->policy, "%s", r->policy);
    }
    if (e->rc == GM_OK) x->facts[i] = facts_of(r);
    gm_sim_result_free(r); /* 120 runs: keep the figures, not the timelines */
    progress_step(x);
}

/*
 * Whether entry i's run is the run of its lead l (grid.lead), which ran
 * or took its own: the policy is the `pytorch` policy and the model
 * PyTorch's, nothing refused in l's run (no ask, no OOM), and
 *  - LEAD_GC (l: i's settings with garbage_collection_threshold 0.6 and a
 *    memory fraction; i: with 0.8, or with no collection): the collection
 *    released nothing in l's run. Then at no grow did it find a whole free
 *    large segment (with one, the oldest is at least the average age and
 *    goes), so at 0.8 it finds none either; without the collection (and
 *    the fraction, which never refused: the model's only other use of the
 *    limit, sim/alloc_pytorch.c) every decision is the same.
 *  - LEAD_SPLIT (l: i's settings without max_split_size_mb, classic
 *    segments): l's largest segment is below i's max_split_size. The model
 *    compares only request and block sizes with it (the oversize checks,
 *    should_split, the statistics), none of which reached it in l's run, so
 *    every comparison goes the same way with i's size as with none; the
 *    policy reads it only when asked. The collection does not read it.
 */
static int shared(const gm_sim_config *base, const gm_tune *t, const run_facts *f, long l, int rule,
                  uint64_t max_split)
{
    const char *pol = base->policy ? base->policy : "pytorch";
    const char *al = base->allocator ? base->allocator : "pytorch";
    if (l < 0 || strcmp(pol, "pytorch") || strcmp(al, "pytorch") || t->e[l].skipped ||
        t->e[l].rc != GM_OK || !f[l].refused_none)
        return 0;
    if (rule == LEAD_GC) return f[l].released_none;
    return rule == LEAD_SPLIT && f[l].largest_segment < max_split;
}

static uint64_t three_digits(uint64_t v)
{
    uint64_t scale = 1;
    while (v / scale >= 1000)
        scale *= 10;
    return (v + scale / 2) / scale * scale;
}

static int cmp_u64(uint64_t a, uint64_t b)
{
    return a < b ? -1 : a > b;
}

int gm_tune_cmp(const gm_tune_entry *a, const gm_tune_entry *b)
{
    int c;
    if ((c = cmp_u64(a->ooms, b->ooms))) return c;
    if ((c = cmp_u64(a->peak_reserved, b->peak_reserved))) return c;
    /* fragmentation at the 0.1 % tune's table prints */
    long fa = (long)(a->fragmentation * 1000.0 + 0.5), fb = (long)(b->fragmentation * 1000.0 + 0.5);
    if (fa != fb) return fa < fb ? -1 : 1;
    /* driver time at the three digits the table prints: a difference no
     * one can see leaves the simpler setting (grid order) first */
    return cmp_u64(three_digits(a->driver_ns), three_digits(b->driver_ns));
}

static void rank(gm_tune *t)
{
    t->n_ranked = 0;
    for (size_t i = 0; i < t->n; i++)
        if (!t->e[i].skipped && t->e[i].rc == GM_OK) t->rank[t->n_ranked++] = i;
    for (size_t i = 1; i < t->n_ranked; i++) { /* stable: grid order breaks ties */
        size_t v = t->rank[i], j = i;
        while (j > 0 && gm_tune_cmp(&t->e[t->rank[j - 1]], &t->e[v]) > 0) {
            t->rank[j] = t->rank[j - 1];
            j--;
        }
        t->rank[j] = v;
    }
    t->best = t->n_ranked ? (long)t->rank[0] : -1;
    t->dflt = -1;
    for (size_t i = 0; i < t->n; i++)
        if (t->e[i].is_default) t->dflt = (long)i;
}

int gm_tune_run(const gm_sim_config *base, int threads, gm_tune **out, gm_err *err)
{
    *out = NULL;
    gm_tune *t = calloc(1, sizeof *t);
    if (!t) return gm_errf(err, GM_ENOMEM, "out of memory");
    char recorded[256];
    t->torch_version = torch_version_of(base, recorded, sizeof recorded);
    grid g = {t, 0, NULL, NULL, NULL};
    if (build(&g, base, recorded) != GM_OK || !(t->rank = calloc(t->n, sizeof *t->rank))) {
        grid_free(&g);
        gm_tune_free(t);
        return gm_errf(err, GM_ENOMEM, "out of memory");
    }
    t->threads = threads > 0 ? threads : gm_default_threads();
    size_t *job = malloc(t->n * sizeof *job);
    run_facts *facts = calloc(t->n, sizeof *facts);
    if (!job || !facts) {
        free(job);
        free(facts);
        grid_free(&g);
        gm_tune_free(t);
        return gm_errf(err, GM_ENOMEM, "out of memory");
    }
    double t0 = gm_monotonic_s();
    tune_ctx x = {base, t, 0, job, facts, -1};
    for (size_t i = 0; i < t->n; i++)
        if (t->e[i].is_default) x.device_of = g.lead[i];
    /* round 0: the settings that lead none; 1: those led by the same
     * without max_split_size_mb; 2: those led by the same with garbage
     * collection 0.6 (which ran, or took theirs, in round 0 or 1). A
     * setting takes its lead's figures where its lead's run is its
     * (shared), and runs otherwise */
    for (int round = 0; round < 3; round++) {
        size_t m = 0;
        for (size_t i = 0; i < t->n; i++) {
            int depth = g.rule[i] == LEAD_GC ? 2 : g.rule[i] == LEAD_SPLIT ? 1 : 0;
            if (t->e[i].skipped || depth != round) continue;
            if (round && shared(base, t, facts, g.lead[i], g.rule[i], g.max_split[i])) {
                long l = g.lead[i];
                gm_tune_entry *e = &t->e[i];
                const gm_tune_entry *le = &t->e[l];
                e->rc = GM_OK;
                e->ooms = le->ooms;
                e->first_oom_index = le->first_oom_index;
                e->first_oom_size = le->first_oom_size;
                e->peak_live = le->peak_live;
                e->peak_reserved = le->peak_reserved;
                e->peak_allocated = le->peak_allocated;
                e->fragmentation = le->fragmentation;
                e->driver_calls = le->driver_calls;
                e->driver_ns = le->driver_ns;
                facts[i] = facts[l]; /* the same run, for those i leads */
                t->n_shared++;
                progress_step(&x);
                continue;
            }
            job[m++] = i;
        }
        gm_parallel_for(m, t->threads, tune_one, &x);
    }
    t->wall_s = gm_monotonic_s() - t0;
    free(job);
    free(facts);
    grid_free(&g);
    for (size_t i = 0; i < t->n; i++) /* the defaults must run: else the input is bad */
        if (t->e[i].is_default && t->e[i].rc != GM_OK) {
            int rc = gm_errf(err, t->e[i].rc, "%s", t->e[i].err.msg);
            gm_tune_free(t);
            return rc;
        }
    rank(t);
    *out = t;
    return GM_OK;
}

static int fit_one(const gm_sim_config *base, const gm_tune_entry *e, int threads,
                   uint64_t max_capacity, int *found, uint64_t *cap, uint64_t *tried, gm_err *err)
{
    gm_sim_config cfg = *base;
    cfg.alloc_conf = e->conf;
    cfg.memory_fraction = e->memory_fraction;
    char spec[320];
    snprintf(spec, sizeof spec, "%s", base->policy ? base->policy : "pytorch");
    char *specs[] = {spec};
    gm_fit *f = NULL;
    int rc = gm_fit_capacity(&cfg, specs, 1, threads, max_capacity, &f, err);
    if (rc == GM_OK && f->e[0].rc != GM_OK) rc = gm_errf(err, f->e[0].rc, "%s", f->e[0].err.msg);
    if (rc == GM_OK) {
        *found = f->e[0].found;
        *cap = f->e[0].capacity;
        *tried = f->e[0].max_capacity;
    }
    gm_fit_free(f);
    return rc;
}

/* One of gm_tune_fit's two fits, on a thread of its own. */
typedef struct tune_fit_job {
    const gm_sim_config *base;
    const gm_tune_entry *e;
    uint64_t max_capacity;
    int found, rc;
    uint64_t cap, tried;
    gm_err err;
} tune_fit_job;

static void tune_fit_run(void *ctx, size_t i)
{
    tune_fit_job *j = &((tune_fit_job *)ctx)[i];
    j->rc = fit_one(j->base, j->e, 1, j->max_capacity, &j->found, &j->cap, &j->tried, &j->err);
}

int gm_tune_fit(const gm_sim_config *base, gm_tune *t, int threads, uint64_t max_capacity,
                gm_err *err)
{
    if (t->best < 0 || t->dflt < 0) return GM_OK;
    double t0 = gm_monotonic_s();
    /* the best settings' fit and the defaults' side by side (each one
     * search: a thread each); the same settings twice are fitted once */
    tune_fit_job job[2] = {{.base = base, .e = &t->e[t->best], .max_capacity = max_capacity},
                           {.base = base, .e = &t->e[t->dflt], .max_capacity = max_capacity}};
    size_t n = t->best == t->dflt ? 1 : 2;
    gm_parallel_for(n, threads, tune_fit_run, job);
    if (n == 1) job[1] = job[0];
    int rc = job[0].rc != GM_OK ? job[0].rc : job[1].rc; /* the best's error first */
    if (rc != GM_OK) *err = job[0].rc != GM_OK ? job[0].err : job[1].err;
    if (rc == GM_OK) {
        t->fit_best_found = job[0].found;
        t->fit_best = job[0].cap;
        t->fit_dflt_found = job[1].found;
        t->fit_dflt = job[1].cap;
        t->fit_max = job[1].tried;
    }
    t->fitted = rc == GM_OK;
    t->fit_wall_s = gm_monotonic_s() - t0;
    return rc;
}

void gm_tune_free(gm_tune *t)
{
    if (!t) return;
    free(t->e);
    free(t->rank);
    free(t);
}
