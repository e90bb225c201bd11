/* sweep.c - see sweep.h; the spec format is study/SWEEP.md. */
#include "sweep.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy_list.h"
#include "pool.h"
#include "preload.h"
#include "same_run.h"
#include "simulate.h"
#include "base/clock.h"
#include "base/units.h"
#include "policies/registry.h"
#include "sim/alloc.h"
#include "sim/metrics.h"
#include "traces/gpus.h"

/* ---------------- reading the spec ---------------- */

static const char *const top_keys[] = {"traces",     "mixes",   "allocators", "policies",
                                       "capacities", "gpus",    "overhead",   "on_oom",
                                       "scope",      "lenient", "comment",    NULL};

/* strcpy cut to cap bytes (names longer than a field are cut, not refused) */
static void cpy(char *dst, size_t cap, const char *src)
{
    size_t n = strlen(src);
    if (n >= cap) n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = 0;
}

static int known(const char *k, const char *const *list)
{
    for (size_t i = 0; list[i]; i++)
        if (!strcmp(k, list[i])) return 1;
    return 0;
}

/* A size: "24GiB" or a number of bytes. */
static int get_size(const char *path, const char *what, json_t *v, uint64_t *out, gm_err *err)
{
    if (json_is_integer(v) && json_integer_value(v) >= 0) {
        *out = (uint64_t)json_integer_value(v);
        return GM_OK;
    }
    char w[1400];
    snprintf(w, sizeof w, "%s: %s", path, what);
    if (json_is_string(v)) return gm_parse_size(json_string_value(v), w, out, err);
    return gm_errf(err, GM_EINVAL, "%s: %s must be a size such as \"24GiB\" or a number of bytes",
                   path, what);
}

static int get_time(const char *path, const char *what, json_t *v, uint64_t *out, gm_err *err)
{
    if (json_is_integer(v) && json_integer_value(v) >= 0) {
        *out = (uint64_t)json_integer_value(v);
        return GM_OK;
    }
    char w[1400];
    snprintf(w, sizeof w, "%s: %s", path, what);
    if (json_is_string(v)) return gm_parse_time(json_string_value(v), w, out, err);
    return gm_errf(err, GM_EINVAL, "%s: %s must be a duration such as \"20ms\" or ns", path, what);
}

/* The folder of path, with a trailing '/', or "" for a bare name. */
static void dir_of(const char *path, char *buf, size_t len)
{
    const char *slash = strrchr(path, '/');
    size_t n = slash ? (size_t)(slash - path) + 1 : 0;
    if (n >= len) n = len - 1;
    memcpy(buf, path, n);
    buf[n] = 0;
}

/* One tenant: "path" or {"trace": path, "offset", "repeat", "quota"}. */
static int read_tenant(const char *path, const char *dir, const char *where, json_t *v,
                       gm_sweep_tenant *t, gm_err *err)
{
    memset(t, 0, sizeof *t);
    t->repeat = 1;
    json_t *tr = json_is_object(v) ? json_object_get(v, "trace") : v;
    if (!json_is_string(tr) || !json_string_length(tr))
        return gm_errf(err, GM_EINVAL,
                       "%s: %s: give a trace path, or {\"trace\": PATH, \"offset\": \"20ms\", "
                       "\"repeat\": N, \"quota\": \"8GiB\"}",
                       path, where);
    cpy(t->trace, sizeof t->trace, json_string_value(tr));
    snprintf(t->path, sizeof t->path, "%s%s", t->trace[0] == '/' ? "" : dir, t->trace);
    if (!json_is_object(v)) return GM_OK;
    const char *k;
    json_t *x;
    static const char *const keys[] = {"trace", "offset", "repeat", "quota", NULL};
    json_object_foreach(v, k, x)
    {
        if (!known(k, keys))
            return gm_errf(err, GM_EINVAL,
                           "%s: %s: unknown key \"%s\"; known: trace, offset, "
                           "repeat, quota",
                           path, where, k);
    }
    char w[300];
    snprintf(w, sizeof w, "%s: offset", where);
    if ((x = json_object_get(v, "offset")) && get_time(path, w, x, &t->offset_ns, err))
        return err->code;
    snprintf(w, sizeof w, "%s: quota", where);
    if ((x = json_object_get(v, "quota")) && get_size(path, w, x, &t->quota_bytes, err))
        return err->code;
    if ((x = json_object_get(v, "repeat"))) {
        if (!json_is_integer(x) || json_integer_value(x) < 1 || json_integer_value(x) > 1000000)
            return gm_errf(err, GM_EINVAL, "%s: %s: repeat must be a whole number >= 1", path,
                           where);
        t->repeat = (uint32_t)json_integer_value(x);
    }
    return GM_OK;
}

static int read_mixes(const char *path, const char *dir, json_t *root, gm_sweep_plan *p,
                      gm_err *err)
{
    json_t *traces = json_object_get(root, "traces"), *mixes = json_object_get(root, "mixes");
    if ((traces && !json_is_array(traces)) || (mixes && !json_is_array(mixes)))
        return gm_errf(err, GM_EINVAL, "%s: \"traces\" and \"mixes\" must be lists", path);
    size_t n = json_array_size(traces) + json_array_size(mixes);
    if (n == 0)
        return gm_errf(err, GM_EINVAL,
                       "%s: no trace: give \"traces\": [\"run.h5\", ...] or \"mixes\": "
                       "[{\"name\": ..., \"tenants\": [...]}]",
                       path);
    p->mixes = calloc(n, sizeof *p->mixes);
    if (!p->mixes) return gm_errf(err, GM_ENOMEM, "out of memory");
    size_t i;
    json_t *v;
    char where[300];
    json_array_foreach(traces, i, v)
    {
        gm_sweep_mix *m = &p->mixes[p->n_mixes++];
        m->t = calloc(1, sizeof *m->t);
        if (!m->t) return gm_errf(err, GM_ENOMEM, "out of memory");
        m->n = 1;
        snprintf(where, sizeof where, "traces[%zu]", i);
        if (read_tenant(path, dir, where, v, m->t, err)) return err->code;
        cpy(m->name, sizeof m->name, m->t->trace);
    }
    json_array_foreach(mixes, i, v)
    {
        gm_sweep_mix *m = &p->mixes[p->n_mixes++];
        json_t *ts = json_object_get(v, "tenants"), *name = json_object_get(v, "name");
        if (!json_is_object(v) || !json_is_array(ts) || !json_array_size(ts))
            return gm_errf(err, GM_EINVAL,
                           "%s: mixes[%zu]: give {\"name\": NAME, \"tenants\": [trace, ...]}", path,
                           i);
        const char *k;
        json_t *x;
        json_object_foreach(v, k, x)
        {
            if (strcmp(k, "name") && strcmp(k, "tenants"))
                return gm_errf(err, GM_EINVAL, "%s: mixes[%zu]: unknown key \"%s\"", path, i, k);
        }
        if (name && !json_is_string(name))
            return gm_errf(err, GM_EINVAL, "%s: mixes[%zu]: name must be a string", path, i);
        m->n = json_array_size(ts);
        m->t = calloc(m->n, sizeof *m->t);
        if (!m->t) return gm_errf(err, GM_ENOMEM, "out of memory");
        size_t j;
        json_t *tv;
        json_array_foreach(ts, j, tv)
        {
            snprintf(where, sizeof where, "mixes[%zu].tenants[%zu]", i, j);
            if (read_tenant(path, dir, where, tv, &m->t[j], err)) return err->code;
        }
        if (name)
            cpy(m->name, sizeof m->name, json_string_value(name));
        else
            snprintf(m->name, sizeof m->name, "mix %zu", i + 1);
    }
    for (size_t a = 0; a < p->n_mixes; a++)
        for (size_t b = 0; b < a; b++)
            if (!strcmp(p->mixes[a].name, p->mixes[b].name))
                return gm_errf(err, GM_EINVAL,
                               "%s: the trace or mix \"%s\" is listed twice; give mixes "
                               "distinct names",
                               path, p->mixes[a].name);
    return GM_OK;
}

static int read_devices(const char *path, json_t *root, gm_sweep_plan *p, gm_err *err)
{
    json_t *caps = json_object_get(root, "capacities"), *gpus = json_object_get(root, "gpus");
    if ((caps && !json_is_array(caps)) || (gpus && !json_is_array(gpus)))
        return gm_errf(err, GM_EINVAL, "%s: \"capacities\" and \"gpus\" must be lists", path);
    size_t n = json_array_size(caps) + json_array_size(gpus);
    p->devices = calloc(n ? n : 1, sizeof *p->devices);
    if (!p->devices) return gm_errf(err, GM_ENOMEM, "out of memory");
    size_t i;
    json_t *v;
    json_array_foreach(caps, i, v)
    {
        gm_sweep_device *d = &p->devices[p->n_devices++];
        char what[64];
        snprintf(what, sizeof what, "capacities[%zu]", i);
        if (get_size(path, what, v, &d->capacity, err)) return err->code;
        if (!d->capacity) return gm_errf(err, GM_EINVAL, "%s: %s is 0 bytes", path, what);
        if (json_is_string(v))
            cpy(d->label, sizeof d->label, json_string_value(v));
        else
            snprintf(d->label, sizeof d->label, "%llu", (unsigned long long)d->capacity);
    }
    json_array_foreach(gpus, i, v)
    {
        const gm_gpu *g = json_is_string(v) ? gm_gpu_find(json_string_value(v)) : NULL;
        if (!g) {
            char keys[1024];
            gm_gpu_keys(keys, sizeof keys);
            return gm_errf(err, GM_EINVAL, "%s: gpus[%zu] is not a GPU gmsim knows; one of: %s",
                           path, i, keys);
        }
        gm_sweep_device *d = &p->devices[p->n_devices++];
        snprintf(d->label, sizeof d->label, "%s", g->key);
        d->capacity = g->cuda_bytes;
    }
    if (!p->n_devices) { /* the trace's own device */
        snprintf(p->devices[0].label, sizeof p->devices[0].label, "trace");
        p->n_devices = 1;
    }
    for (size_t a = 0; a < p->n_devices; a++)
        for (size_t b = 0; b < a; b++)
            if (!strcmp(p->devices[a].label, p->devices[b].label))
                return gm_errf(err, GM_EINVAL, "%s: the device \"%s\" is listed twice", path,
                               p->devices[a].label);
    return GM_OK;
}

/* "allocators": ["NAME[:SETTINGS]", {"name": NAME, "settings": S}, ...] */
static int read_allocators(const char *path, json_t *root, gm_sweep_plan *p, gm_err *err)
{
    json_t *al = json_object_get(root, "allocators");
    if (al && !json_is_array(al))
        return gm_errf(err, GM_EINVAL, "%s: \"allocators\" must be a list", path);
    size_t n = json_array_size(al);
    p->allocs = calloc(n ? n : 1, sizeof *p->allocs);
    if (!p->allocs) return gm_errf(err, GM_ENOMEM, "out of memory");
    if (!n) {
        snprintf(p->allocs[0].name, sizeof p->allocs[0].name, "pytorch");
        p->n_allocs = 1;
        return GM_OK;
    }
    size_t i;
    json_t *v;
    json_array_foreach(al, i, v)
    {
        gm_alloc_choice *c = &p->allocs[p->n_allocs++];
        const char *name = NULL, *conf = NULL;
        char buf[600];
        if (json_is_string(v)) {
            snprintf(buf, sizeof buf, "%s", json_string_value(v));
            char *colon = strchr(buf, ':');
            if (colon) {
                *colon = 0;
                conf = colon + 1;
            }
            name = buf;
        } else if (json_is_object(v) && json_is_string(json_object_get(v, "name"))) {
            name = json_string_value(json_object_get(v, "name"));
            json_t *s = json_object_get(v, "settings");
            if (s && !json_is_string(s))
                return gm_errf(err, GM_EINVAL, "%s: allocators[%zu].settings must be a string",
                               path, i);
            conf = s ? json_string_value(s) : NULL;
        }
        if (!name || !gm_alloc_find(name))
            return gm_errf(err, GM_EINVAL,
                           "%s: allocators[%zu] is not an allocator; give \"NAME[:SETTINGS]\" "
                           "with NAME one of: %s",
                           path, i, gm_alloc_names());
        cpy(c->name, sizeof c->name, name);
        if (conf) {
            c->conf_given = 1;
            cpy(c->conf, sizeof c->conf, conf);
        }
        for (size_t j = 0; j + 1 < p->n_allocs; j++)
            if (!strcmp(p->allocs[j].name, c->name) && p->allocs[j].conf_given == c->conf_given &&
                !strcmp(p->allocs[j].conf, c->conf))
                return gm_errf(err, GM_EINVAL, "%s: allocators[%zu] is listed twice", path, i);
    }
    return GM_OK;
}

static int read_policies(const char *path, json_t *root, gm_sweep_plan *p, gm_err *err)
{
    json_t *pl = json_object_get(root, "policies");
    if (pl && !json_is_array(pl))
        return gm_errf(err, GM_EINVAL, "%s: \"policies\" must be a list", path);
    size_t n = json_array_size(pl);
    p->policies = calloc(n ? n : 1, sizeof *p->policies);
    if (!p->policies) return gm_errf(err, GM_ENOMEM, "out of memory");
    if (!n) {
        snprintf(p->policies[0], sizeof p->policies[0], "pytorch");
        p->n_policies = 1;
        return GM_OK;
    }
    size_t i;
    json_t *v;
    json_array_foreach(pl, i, v)
    {
        const gm_policy_ops *ops;
        const char *params;
        gm_err e2 = {0};
        if (!json_is_string(v) ||
            gm_policy_lookup(json_string_value(v), &ops, &params, &e2) != GM_OK)
            return gm_errf(err, GM_EINVAL,
                           "%s: policies[%zu] is not a policy; give \"NAME[:k=v,...]\" with NAME "
                           "one of: %s",
                           path, i, gm_policy_names());
        cpy(p->policies[p->n_policies++], sizeof p->policies[0], json_string_value(v));
        for (size_t j = 0; j + 1 < p->n_policies; j++)
            if (!strcmp(p->policies[j], p->policies[p->n_policies - 1]))
                return gm_errf(err, GM_EINVAL, "%s: policies[%zu] is listed twice", path, i);
    }
    return GM_OK;
}

static int read_options(const char *path, json_t *root, gm_sweep_plan *p, gm_err *err)
{
    json_t *v;
    p->overhead = 512 * GM_MiB; /* GM_DEFAULT_OVERHEAD */
    if ((v = json_object_get(root, "overhead"))) {
        if (get_size(path, "overhead", v, &p->overhead, err)) return err->code;
        p->overhead_given = 1;
    }
    if ((v = json_object_get(root, "on_oom"))) {
        const char *s = json_string_value(v);
        if (!s || (strcmp(s, "abort") && strcmp(s, "skip")))
            return gm_errf(err, GM_EINVAL, "%s: on_oom is \"abort\" or \"skip\"", path);
        p->on_oom_skip = !strcmp(s, "skip");
    }
    if ((v = json_object_get(root, "scope"))) {
        const char *s = json_string_value(v);
        if (!s || (strcmp(s, "self") && strcmp(s, "device")))
            return gm_errf(err, GM_EINVAL, "%s: scope is \"self\" or \"device\"", path);
        p->scope_device = !strcmp(s, "device");
    }
    if ((v = json_object_get(root, "lenient"))) {
        if (!json_is_boolean(v))
            return gm_errf(err, GM_EINVAL, "%s: lenient is true or false", path);
        p->lenient = json_is_true(v);
    }
    return GM_OK;
}

int gm_sweep_plan_load(const char *path, gm_sweep_plan **out, gm_err *err)
{
    *out = NULL;
    json_error_t je;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return gm_errf(err, GM_EINVAL, "%s: line %d: %s (a sweep spec is JSON: study/SWEEP.md)",
                       path, je.line, je.text);
    gm_sweep_plan *p = calloc(1, sizeof *p);
    if (!p) {
        json_decref(root);
        return gm_errf(err, GM_ENOMEM, "out of memory");
    }
    p->spec = root;
    int rc = GM_OK;
    if (!json_is_object(root)) {
        rc = gm_errf(err, GM_EINVAL, "%s: a sweep spec is a JSON object (study/SWEEP.md)", path);
    } else {
        const char *k;
        json_t *v;
        json_object_foreach(root, k, v)
        {
            if (!known(k, top_keys)) {
                rc = gm_errf(err, GM_EINVAL,
                             "%s: unknown key \"%s\"; known: traces, mixes, allocators, "
                             "policies, capacities, gpus, overhead, on_oom, scope, lenient, "
                             "comment",
                             path, k);
                break;
            }
        }
    }
    char dir[2048];
    dir_of(path, dir, sizeof dir);
    if (rc == GM_OK) rc = read_mixes(path, dir, root, p, err);
    if (rc == GM_OK) rc = read_devices(path, root, p, err);
    if (rc == GM_OK) rc = read_allocators(path, root, p, err);
    if (rc == GM_OK) rc = read_policies(path, root, p, err);
    if (rc == GM_OK) rc = read_options(path, root, p, err);
    if (rc != GM_OK) {
        gm_sweep_plan_free(p);
        return rc;
    }
    p->n_cases = p->n_mixes * p->n_devices * p->n_allocs * p->n_policies;
    *out = p;
    return GM_OK;
}

void gm_sweep_plan_free(gm_sweep_plan *p)
{
    if (!p) return;
    for (size_t i = 0; p->mixes && i < p->n_mixes; i++)
        free(p->mixes[i].t);
    free(p->mixes);
    free(p->devices);
    free(p->allocs);
    free(p->policies);
    json_decref(p->spec);
    free(p);
}

/* ---------------- cases ---------------- */

gm_sweep_case gm_sweep_case_at(const gm_sweep_plan *p, size_t i)
{
    gm_sweep_case c;
    c.policy = i % p->n_policies;
    i /= p->n_policies;
    c.alloc = i % p->n_allocs;
    i /= p->n_allocs;
    c.device = i % p->n_devices;
    c.mix = i / p->n_devices;
    return c;
}

void gm_sweep_case_key(const gm_sweep_plan *p, size_t i, char *buf, size_t len)
{
    gm_sweep_case c = gm_sweep_case_at(p, i);
    char al[600];
    gm_alloc_choice_label(&p->allocs[c.alloc], al, sizeof al);
    snprintf(buf, len, "%s | %s | %s | %s", p->mixes[c.mix].name, p->devices[c.device].label, al,
             p->policies[c.policy]);
}

/* Tenant k of mix m as a run's spec (its trace read from the file). */
static gm_tenant_spec mix_tenant(const gm_sweep_mix *m, size_t k)
{
    return (gm_tenant_spec){.path = m->t[k].path,
                            .offset_ns = m->t[k].offset_ns,
                            .repeat = m->t[k].repeat,
                            .quota_bytes = m->t[k].quota_bytes};
}

/* gm_sweep_run_case, the run's result to *keep when keep is given (the
 * caller frees it; NULL when the run failed); pre: the mix's tenants
 * preloaded (study/preload.h), or NULL (the run reads its traces). */
static void run_case(const gm_sweep_plan *p, size_t i, const gm_tenant_spec *pre, gm_sweep_row *row,
                     gm_sim_result **keep)
{
    if (keep) *keep = NULL;
    memset(row, 0, sizeof *row);
    row->index = (uint32_t)i;
    gm_sweep_case c = gm_sweep_case_at(p, i);
    const gm_sweep_mix *m = &p->mixes[c.mix];
    const gm_alloc_choice *al = &p->allocs[c.alloc];
    row->realizable = (uint8_t)gm_policy_spec_realizable(p->policies[c.policy]);
    row->n_tenants = (uint32_t)m->n;
    gm_tenant_spec *ts = calloc(m->n, sizeof *ts);
    if (!ts) {
        row->status = GM_ENOMEM;
        snprintf(row->error, sizeof row->error, "out of memory");
        return;
    }
    for (size_t k = 0; k < m->n; k++)
        ts[k] = pre ? pre[k] : mix_tenant(m, k);
    static const gm_latency lat = GM_LATENCY_DEFAULT;
    gm_sim_config cfg = {.tenants = ts,
                         .n_tenants = m->n,
                         .allocator = al->name,
                         .alloc_conf = al->conf_given ? al->conf : NULL,
                         .policy = p->policies[c.policy],
                         .capacity_bytes = p->devices[c.device].capacity,
                         .overhead_bytes = p->overhead,
                         .overhead_given = p->overhead_given,
                         .latency = lat,
                         .on_oom_skip = p->on_oom_skip,
                         .lenient = p->lenient,
                         .scope_device = p->scope_device,
                         .no_device_stats = 1}; /* a row: no memory_stats() */
    gm_sim_result *r = NULL;
    gm_err err = {0};
    row->status = gm_simulate(&cfg, &r, &err);
    free(ts);
    if (row->status != GM_OK) {
        cpy(row->error, sizeof row->error, err.msg);
        return;
    }
    const gm_metrics *d = &r->device;
    gm_alloc_counters tot = gm_sim_totals(r);
    snprintf(row->allocator, sizeof row->allocator, "%s", r->allocator);
    snprintf(row->trace_hash, sizeof row->trace_hash, "%s", r->t[0].trace_hash);
    row->capacity_bytes = r->capacity_bytes;
    row->tenants_completed = (uint32_t)gm_sim_completed(r);
    row->oom_count = d->n_oom;
    row->peak_live = d->peak_q;
    row->peak_allocated = d->peak_a;
    row->peak_reserved = d->peak_r;
    row->peak_device_used = r->peak_device_used;
    row->fragmentation = gm_metrics_fragmentation(d);
    row->frag_time_weighted = gm_metrics_frag_time_weighted(d);
    row->utilization = gm_metrics_utilization(d);
    row->ext_frag_mean = gm_metrics_ext_frag_mean(d);
    row->driver_allocs = tot.n_driver_alloc;
    row->driver_frees = tot.n_driver_free;
    row->driver_ns = gm_counters_driver_ns(&tot);
    row->events = r->events;
    if (keep)
        *keep = r;
    else
        gm_sim_result_free(r);
}

void gm_sweep_run_case(const gm_sweep_plan *p, size_t i, gm_sweep_row *row)
{
    run_case(p, i, NULL, row, NULL);
}

/* ---------------- the pool ---------------- */

typedef struct run_ctx {
    const gm_sweep_plan *p;
    const size_t *todo;
    gm_sweep_row *rows;
    gm_sweep_progress progress;
    void *pctx;
    pthread_mutex_t mu;
    size_t n;
    const long *lead;  /* per todo index: the case whose run may be its (study/same_run.h), -1 */
    uint8_t *same;     /* per todo index: its lead's run is its (set when the lead ran) */
    const size_t *job; /* this round's todo indices */
    const gm_tenant_spec *pre; /* the mix's tenants preloaded, or NULL */
} run_ctx;

static void report(run_ctx *x, size_t i, double dt)
{
    if (!x->progress) return;
    pthread_mutex_lock(&x->mu);
    x->progress(x->pctx, &x->rows[i], dt);
    pthread_mutex_unlock(&x->mu);
}

static void run_one(void *arg, size_t j)
{
    run_ctx *x = arg;
    size_t k = x->job[j], i = x->todo[k];
    double t0 = gm_monotonic_s();
    gm_sim_result *r = NULL; /* a lead's run, for its followers */
    run_case(x->p, i, x->pre, &x->rows[i], x->lead[k] == (long)k ? &r : NULL);
    for (size_t f = k + 1; r && f < x->n; f++) /* which followers' runs this is */
        if (x->lead[f] == (long)k)
            x->same[f] =
                (uint8_t)gm_same_run(r, x->p->policies[gm_sweep_case_at(x->p, x->todo[f]).policy]);
    gm_sim_result_free(r);
    report(x, i, gm_monotonic_s() - t0);
}

/* gm_same_run_leads' questions of the cases todo[0..n). */
static const char *case_spec(const void *ctx, size_t k)
{
    const run_ctx *x = ctx;
    return x->p->policies[gm_sweep_case_at(x->p, x->todo[k]).policy];
}

static int case_same_config(const void *ctx, size_t l, size_t k)
{
    const run_ctx *x = ctx;
    gm_sweep_case c = gm_sweep_case_at(x->p, x->todo[k]), d = gm_sweep_case_at(x->p, x->todo[l]);
    return d.mix == c.mix && d.device == c.device && d.alloc == c.alloc;
}

/* A follower (same mix, device and allocator as its lead, a policy that
 * may share a run) whose lead's run is its: the lead's row, as its own. */
static void copy_row(run_ctx *x, size_t k)
{
    size_t i = x->todo[k];
    gm_sweep_row *row = &x->rows[i];
    *row = x->rows[x->todo[x->lead[k]]];
    row->index = (uint32_t)i;
    row->realizable =
        (uint8_t)gm_policy_spec_realizable(x->p->policies[gm_sweep_case_at(x->p, i).policy]);
    report(x, i, 0);
}

/* The cases todo[0..n), of one mix, whose tenants pre holds (or NULL). */
static void run_group(const gm_sweep_plan *p, const size_t *todo, size_t n, int threads,
                      const gm_tenant_spec *pre, gm_sweep_row *rows, gm_sweep_progress progress,
                      void *ctx)
{
    run_ctx x = {
        .p = p, .todo = todo, .rows = rows, .progress = progress, .pctx = ctx, .n = n, .pre = pre};
    long *lead = malloc((n ? n : 1) * sizeof *lead);
    uint8_t *same = calloc(n ? n : 1, 1);
    size_t *job = malloc((n ? n : 1) * sizeof *job);
    pthread_mutex_init(&x.mu, NULL);
    if (!lead || !same || !job) { /* out of memory: every case its own */
        free(lead);
        free(same);
        free(job);
        for (size_t k = 0; k < n; k++) {
            double t0 = gm_monotonic_s();
            run_case(p, todo[k], pre, &rows[todo[k]], NULL);
            report(&x, todo[k], gm_monotonic_s() - t0);
        }
        pthread_mutex_destroy(&x.mu);
        return;
    }
    /* of the cases of one mix, device and allocator here, the first whose
     * policy may share a run (study/same_run.h) leads the later ones: they
     * take its row where its run is theirs, and run after it otherwise */
    gm_same_run_leads(n, case_spec, case_same_config, &x, lead);
    x.lead = lead;
    x.same = same;
    x.job = job;
    for (int round = 0; round < 2; round++) {
        size_t m = 0;
        for (size_t k = 0; k < n; k++) {
            int follows = lead[k] >= 0 && lead[k] != (long)k;
            if (round == 0 ? follows : !follows) continue;
            if (round == 1 && same[k] && rows[todo[lead[k]]].status == GM_OK) {
                copy_row(&x, k);
                continue;
            }
            job[m++] = k;
        }
        gm_parallel_for(m, threads, run_one, &x);
    }
    free(lead);
    free(same);
    free(job);
    pthread_mutex_destroy(&x.mu);
}

/* The cases a mix at a time (consecutive todo entries of one mix), its
 * traces read once for all its cases (study/preload.h: in memory, a large
 * one packed; the runs of a case read the file where that does not fit):
 * a sweep's cases are mostly the same few traces run many times, and each
 * run opened and read them from the file (80 cases of two traces: 68
 * opens). One mix's traces at a time, so memory stays that of a mix. */
void gm_sweep_run(const gm_sweep_plan *p, const size_t *todo, size_t n, int threads,
                  gm_sweep_row *rows, gm_sweep_progress progress, void *ctx)
{
    for (size_t a = 0, b; a < n; a = b) {
        size_t mix = gm_sweep_case_at(p, todo[a]).mix;
        for (b = a + 1; b < n && gm_sweep_case_at(p, todo[b]).mix == mix; b++)
            ;
        const gm_sweep_mix *m = &p->mixes[mix];
        gm_tenant_spec *ts = calloc(m->n ? m->n : 1, sizeof *ts);
        gm_preload pre = {0};
        gm_err err = {0};
        const gm_tenant_spec *loaded = NULL;
        for (size_t k = 0; ts && k < m->n; k++)
            ts[k] = mix_tenant(m, k);
        gm_sim_config cfg = {.tenants = ts, .n_tenants = m->n};
        if (ts && gm_preload_config(&cfg, &pre, GM_PRELOAD_MAX_EVENTS, GM_PRELOAD_MAX_PACKED_BYTES,
                                    &err) == GM_OK)
            loaded = cfg.tenants; /* out of memory: each run reads its own */
        run_group(p, todo + a, b - a, threads, loaded, rows, progress, ctx);
        gm_preload_free(&pre);
        free(ts);
    }
}

/* ---------------- ranking ---------------- */

static gm_rank_key row_key(const gm_sweep_row *r)
{
    gm_rank_key k = {.oom_count = (double)r->oom_count,
                     .fragmentation = r->fragmentation,
                     .utilization = r->utilization,
                     .driver_ns = (double)r->driver_ns};
    return k;
}

void gm_sweep_rank(const gm_sweep_plan *p, gm_sweep_row *rows)
{
    size_t group = p->n_allocs * p->n_policies; /* cases of one (mix, device), consecutive */
    size_t *ord = malloc((group ? group : 1) * sizeof *ord);
    if (!ord) return;
    for (size_t g0 = 0; g0 < p->n_cases; g0 += group) {
        size_t n = 0;
        for (size_t i = g0; i < g0 + group; i++) {
            rows[i].rank = 0;
            if (rows[i].status == GM_OK && rows[i].realizable) ord[n++] = i;
        }
        /* insertion sort: the case order breaks ties */
        for (size_t a = 1; a < n; a++) {
            size_t v = ord[a], b = a;
            gm_rank_key kv = row_key(&rows[v]);
            while (b > 0) {
                gm_rank_key ku = row_key(&rows[ord[b - 1]]);
                if (gm_rank_cmp(&ku, &kv, NULL) <= 0) break;
                ord[b] = ord[b - 1];
                b--;
            }
            ord[b] = v;
        }
        for (size_t a = 0; a < n; a++)
            rows[ord[a]].rank = (int32_t)a + 1;
    }
    free(ord);
}
