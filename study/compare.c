/* compare.c - see compare.h. */
#include "compare.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "policies/registry.h"
#include "base/clock.h"
#include "base/version.h"
#include "simulate.h"

/* ---------------- policy lists ---------------- */

static int check_spec(const char *spec, gm_err *err)
{
    char name[64];
    const char *colon = strchr(spec, ':');
    size_t len = colon ? (size_t)(colon - spec) : strlen(spec);
    if (len == 0 || len >= sizeof name)
        return gm_errf(err, GM_EUSAGE,
                       "--policies: empty or malformed entry '%s'; expected "
                       "NAME[:key=value,...] separated by commas",
                       spec);
    memcpy(name, spec, len);
    name[len] = 0;
    if (!gm_policy_find(name))
        return gm_errf(err, GM_EINVAL, "--policies: unknown policy '%s'; choose from: %s", name,
                       gm_policy_names());
    return GM_OK;
}

int gm_policy_list_split(const char *list, char ***specs, size_t *n, gm_err *err)
{
    *specs = NULL;
    *n = 0;
    char buf[4096];
    if (!list || !*list) {
        size_t k = 0, len = 0;
        for (; gm_policy_at(k); k++)
            len += strlen(gm_policy_at(k)->name) + 1;
        char **v = malloc(k * sizeof *v + len);
        if (!v) return gm_errf(err, GM_ENOMEM, "out of memory");
        char *p = (char *)(v + k);
        for (size_t i = 0; i < k; i++) {
            v[i] = p;
            p += sprintf(p, "%s", gm_policy_at(i)->name) + 1;
        }
        *specs = v;
        *n = k;
        return GM_OK;
    }
    if (strlen(list) >= sizeof buf) return gm_errf(err, GM_EUSAGE, "--policies: list too long");
    /* pieces, then glue parameter continuations onto their spec */
    size_t cnt = 1;
    for (const char *q = list; *q; q++)
        cnt += *q == ',';
    char **v = malloc(cnt * sizeof *v + strlen(list) + 1);
    if (!v) return gm_errf(err, GM_ENOMEM, "out of memory");
    char *store = (char *)(v + cnt);
    strcpy(store, list);
    size_t k = 0;
    char *save = NULL;
    for (char *piece = strtok_r(store, ",", &save); piece; piece = strtok_r(NULL, ",", &save)) {
        if (k > 0 && strchr(piece, '=') && !strchr(piece, ':')) {
            piece[-1] = ','; /* rejoin with the previous spec */
            continue;
        }
        v[k++] = piece;
    }
    for (size_t i = 0; i < k; i++) {
        int rc = check_spec(v[i], err);
        if (rc) {
            free(v);
            return rc;
        }
        for (size_t j = 0; j < i; j++)
            if (!strcmp(v[i], v[j])) {
                gm_errf(err, GM_EUSAGE, "--policies: '%s' is listed twice", v[i]);
                free(v);
                return GM_EUSAGE;
            }
    }
    if (k == 0) {
        free(v);
        return gm_errf(err, GM_EUSAGE, "--policies: no policy given");
    }
    *specs = v;
    *n = k;
    return GM_OK;
}

static int spec_realizable(const char *spec)
{
    char name[64];
    const char *colon = strchr(spec, ':');
    size_t len = colon ? (size_t)(colon - spec) : strlen(spec);
    if (len >= sizeof name) return 1;
    memcpy(name, spec, len);
    name[len] = 0;
    const gm_policy_ops *o = gm_policy_find(name);
    return o ? o->realizable : 1;
}

/* ---------------- threads ---------------- */

typedef struct pool {
    pthread_mutex_t mu;
    size_t next, n;
    void (*fn)(void *ctx, size_t i);
    void *ctx;
} pool;

static void *worker(void *arg)
{
    pool *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        size_t i = p->next < p->n ? p->next++ : p->n;
        pthread_mutex_unlock(&p->mu);
        if (i == p->n) return NULL;
        p->fn(p->ctx, i);
    }
}

int gm_default_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

void gm_parallel_for(size_t n, int threads, void (*fn)(void *ctx, size_t i), void *ctx)
{
    if (threads <= 0) threads = gm_default_threads();
    if ((size_t)threads > n) threads = (int)n;
    pool p = {.next = 0, .n = n, .fn = fn, .ctx = ctx};
    if (threads <= 1) {
        for (size_t i = 0; i < n; i++)
            fn(ctx, i);
        return;
    }
    pthread_mutex_init(&p.mu, NULL);
    pthread_t *tid = calloc((size_t)threads, sizeof *tid);
    int started = 0;
    for (int i = 0; tid && i < threads; i++)
        if (pthread_create(&tid[i], NULL, worker, &p) == 0)
            started++;
        else
            break;
    if (started == 0) worker(&p); /* no thread could start: do it here */
    for (int i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    free(tid);
    pthread_mutex_destroy(&p.mu);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* ---------------- compare ---------------- */

typedef struct compare_ctx {
    const gm_sim_config *base;
    gm_compare *c;
} compare_ctx;

static void compare_one(void *arg, size_t i)
{
    compare_ctx *x = arg;
    gm_compare_entry *e = &x->c->e[i];
    gm_sim_config cfg = *x->base;
    cfg.policy = e->spec;
    cfg.progress = NULL;
    e->rc = gm_simulate(&cfg, &e->r, &e->err);
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
}

int gm_compare_run(const gm_sim_config *base, char *const *specs, size_t n, int threads,
                   gm_compare **out, gm_err *err)
{
    *out = NULL;
    gm_compare *c = calloc(1, sizeof *c);
    if (c) {
        c->e = calloc(n ? n : 1, sizeof *c->e);
        c->rank = calloc(n ? n : 1, sizeof *c->rank);
    }
    if (!c || !c->e || !c->rank) {
        gm_compare_free(c);
        return gm_errf(err, GM_ENOMEM, "out of memory");
    }
    c->n = n;
    c->threads = threads > 0 ? threads : gm_default_threads();
    for (size_t i = 0; i < n; i++) {
        snprintf(c->e[i].spec, sizeof c->e[i].spec, "%s", specs[i]);
        c->e[i].realizable = spec_realizable(specs[i]);
    }
    double t0 = now_s();
    compare_ctx x = {base, c};
    gm_parallel_for(n, c->threads, compare_one, &x);
    c->wall_s = now_s() - t0;
    for (size_t i = 0; i < n; i++)
        if (c->e[i].rc != GM_OK) {
            int rc = gm_errf(err, c->e[i].rc, "policy %s: %s", c->e[i].spec, c->e[i].err.msg);
            gm_compare_free(c);
            return rc;
        }
    rank_entries(c);
    *out = c;
    return GM_OK;
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

/* ---------------- fit ---------------- */

/* Outcome of one simulation for fit: 1 fits (no OOM, every tenant done),
 * 0 does not (an OOM, or the contexts alone do not fit), <0 an error. */
static int try_run(const gm_sim_config *cfg, gm_fit_entry *e, gm_sim_result **keep)
{
    gm_sim_result *r = NULL;
    gm_err err = {0};
    e->runs++;
    int rc = gm_simulate(cfg, &r, &err);
    if (rc == GM_EOOM) return 0; /* the CUDA contexts do not fit: the device is too small */
    if (rc != GM_OK) {
        e->rc = rc;
        e->err = err;
        return rc;
    }
    int ok = r->device.n_oom == 0 && gm_sim_completed(r) == r->n_tenants;
    if (keep) {
        gm_sim_result_free(*keep);
        *keep = r;
    } else {
        gm_sim_result_free(r);
    }
    return ok;
}

typedef struct fit_ctx {
    const gm_sim_config *base;
    gm_fit *f;
    uint64_t base_capacity, max_capacity;
} fit_ctx;

static uint64_t step_down(uint64_t v)
{
    return v / GM_FIT_STEP * GM_FIT_STEP;
}

static void fit_capacity_one(void *arg, size_t i)
{
    fit_ctx *x = arg;
    gm_fit_entry *e = &x->f->e[i];
    gm_sim_config cfg = *x->base;
    cfg.policy = e->spec;
    cfg.progress = NULL;
    cfg.device = NULL;
    gm_sim_result *best = NULL;
    /* an upper end that fits */
    uint64_t hi = (x->base_capacity + GM_FIT_STEP - 1) / GM_FIT_STEP * GM_FIT_STEP, lo = 0;
    int ok;
    for (;;) {
        cfg.capacity_bytes = hi;
        e->max_capacity = hi;
        if ((ok = try_run(&cfg, e, &best)) < 0) goto out;
        if (ok) break;
        lo = hi;
        if (hi >= x->max_capacity) goto out; /* not found */
        hi = hi * 2 > x->max_capacity ? step_down(x->max_capacity) : hi * 2;
        if (hi <= lo) goto out;
    }
    /* a lower end that does not: below peak live + contexts nothing fits */
    if (lo == 0) {
        uint64_t floor =
            step_down(best->device.peak_q + x->base->overhead_bytes * x->base->n_tenants);
        lo = floor >= hi ? hi - GM_FIT_STEP : floor;
        for (;;) {
            if (lo == 0) break; /* 0 bytes never fit */
            cfg.capacity_bytes = lo;
            if ((ok = try_run(&cfg, e, NULL)) < 0) goto out;
            if (!ok) break;
            hi = lo; /* fits lower than expected: keep going down */
            lo = step_down(lo / 2);
        }
    }
    while (hi - lo > GM_FIT_STEP) {
        uint64_t mid = lo + step_down((hi - lo) / 2);
        cfg.capacity_bytes = mid;
        if ((ok = try_run(&cfg, e, NULL)) < 0) goto out;
        if (ok)
            hi = mid;
        else
            lo = mid;
    }
    cfg.capacity_bytes = hi; /* the result's own figures */
    if ((ok = try_run(&cfg, e, &best)) < 0) goto out;
    e->found = ok == 1;
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
        f->e[i].realizable = spec_realizable(specs[i]);
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

/* The capacity the base configuration runs on (what the engine would pick). */
static int base_capacity(const gm_sim_config *base, uint64_t *cap, gm_err *err)
{
    *cap = base->capacity_bytes;
    if (*cap || base->n_tenants == 0) return GM_OK;
    const gm_tenant_spec *t = &base->tenants[0];
    if (t->events) {
        *cap = t->meta ? t->meta->device_total_bytes : 0;
    } else {
        gm_trace_reader *r;
        int rc = gm_trace_open(t->path, &r, err);
        if (rc) return rc;
        *cap = gm_trace_meta_get(r)->device_total_bytes;
        gm_trace_close(r);
    }
    if (!*cap)
        return gm_errf(err, GM_EINVAL,
                       "%s does not record the device's memory size; give a starting point "
                       "with --capacity",
                       t->path);
    return GM_OK;
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
    fit_ctx x = {base, f, cap, max_capacity ? max_capacity : cap * 16};
    double t0 = now_s();
    gm_parallel_for(n, f->threads, fit_capacity_one, &x);
    f->wall_s = now_s() - t0;
    return fit_finish(f, out, err);
}

static void fit_tenants_one(void *arg, size_t i)
{
    fit_ctx *x = arg;
    gm_fit *f = x->f;
    gm_fit_entry *e = &f->e[i];
    size_t group = x->base->n_tenants;
    gm_tenant_spec *ts = calloc(group * f->max_copies, sizeof *ts);
    if (!ts) {
        e->rc = gm_errf(&e->err, GM_ENOMEM, "out of memory");
        return;
    }
    for (uint32_t k = 0; k < f->max_copies; k++)
        for (size_t j = 0; j < group; j++) {
            ts[k * group + j] = x->base->tenants[j];
            ts[k * group + j].offset_ns += (uint64_t)k * f->stagger_ns;
        }
    gm_sim_config cfg = *x->base;
    cfg.policy = e->spec;
    cfg.progress = NULL;
    cfg.tenants = ts;
    cfg.capacity_bytes = x->base_capacity;
    for (uint32_t k = 1; k <= f->max_copies; k++) {
        cfg.n_tenants = group * k;
        gm_sim_result *r = NULL;
        int ok = try_run(&cfg, e, &r);
        e->copies_tried = k;
        if (ok < 0) break;
        if (!ok) {
            e->first_fail_completed = r ? (uint32_t)gm_sim_completed(r) : 0;
            gm_sim_result_free(r);
            break;
        }
        e->copies_fit = k;
        gm_sim_result_free(r);
    }
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
    fit_ctx x = {base, f, cap, 0};
    double t0 = now_s();
    gm_parallel_for(n, f->threads, fit_tenants_one, &x);
    f->wall_s = now_s() - t0;
    return fit_finish(f, out, err);
}

void gm_fit_free(gm_fit *f)
{
    if (!f) return;
    free(f->e);
    free(f);
}

int gm_policies_append(char *buf, size_t cap, const char *arg, gm_err *err)
{
    size_t n = strlen(buf);
    if (n + strlen(arg) + 2 > cap) return gm_errf(err, GM_EUSAGE, "--policies: list too long");
    snprintf(buf + n, cap - n, "%s%s", n ? "," : "", arg);
    return GM_OK;
}

int gm_parse_threads(const char *arg, int *out, gm_err *err)
{
    double v;
    if (gm_parse_double(arg, "--threads", 1, 4096, &v, err)) return GM_EUSAGE;
    if (v != (double)(int)v)
        return gm_errf(err, GM_EUSAGE, "--threads takes a whole number, not '%s'", arg);
    *out = (int)v;
    return GM_OK;
}
