/*
 * test_replay.c - everything of gmreplay but the driver calls, without a GPU:
 * the device-backend contract the engine keeps (with a test double in place
 * of the CUDA backend), the ballast arithmetic, the latency fit and device
 * profiles (--device-profile), latency statistics and the device-used series,
 * `gmsim validate` on hand-made pairs, and gmreplay's result having the
 * schema of `gmsim run --json` plus the measured-only fields.
 * (replay/tests/ drives the CUDA backend itself against a stand-in driver.)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cu.h"
#include "replay/ballast.h"
#include "reports/results.h"
#include "reports/validate.h"
#include "sim/device_profile.h"
#include "sim/engine.h"
#include "sim/measured.h"
#include "study/run_opts.h"
#include "study/simulate.h"

#define MiB GM_MiB
#define GiB GM_GiB

/* ---------------- the backend contract, with a test double ---------------- */

/* Wraps the simulated GPU; checks what the engine and allocators do to a
 * backend, and can refuse the n-th allocation as a real driver would. */
typedef struct dbl {
    gm_device *model;
    uint64_t live[4096], live_bytes[4096];
    size_t n_live;
    uint64_t mapped, reserved_ranges, calls, refuse_from, refused;
    int bad, destroyed;
} dbl;

static dbl *D(gm_device *d)
{
    return d->impl;
}

static void sync_used(gm_device *d)
{
    d->used_bytes = D(d)->model->used_bytes;
    d->peak_used_bytes = D(d)->model->peak_used_bytes;
}

static int refuse(dbl *x)
{
    if (++x->calls >= x->refuse_from && x->refuse_from) { /* a full card stays full */
        x->refused++;
        return 1;
    }
    return 0;
}

static int d_alloc(gm_device *d, uint64_t bytes, uint64_t *p, uint64_t *ns)
{
    dbl *x = D(d);
    x->model->overhead_bytes = d->overhead_bytes;
    if (refuse(x)) return GM_EOOM;
    int rc = x->model->ops->mem_alloc(x->model, bytes, p, ns);
    if (rc == GM_OK && x->n_live < 4096) {
        x->live[x->n_live] = *p;
        x->live_bytes[x->n_live++] = bytes;
    }
    sync_used(d);
    return rc;
}

static void d_free(gm_device *d, uint64_t p, uint64_t bytes, uint64_t *ns)
{
    dbl *x = D(d);
    size_t i = 0;
    while (i < x->n_live && x->live[i] != p)
        i++;
    if (i == x->n_live || x->live_bytes[i] != bytes)
        x->bad++; /* a free of something not allocated, or with another size */
    else {
        x->live[i] = x->live[--x->n_live];
        x->live_bytes[i] = x->live_bytes[x->n_live];
    }
    x->model->ops->mem_free(x->model, p, bytes, ns);
    sync_used(d);
}

static int d_va_reserve(gm_device *d, uint64_t bytes, uint64_t *va)
{
    D(d)->reserved_ranges++;
    return D(d)->model->ops->va_reserve(D(d)->model, bytes, va);
}

static void d_va_release(gm_device *d, uint64_t va, uint64_t bytes)
{
    D(d)->reserved_ranges--;
    D(d)->model->ops->va_release(D(d)->model, va, bytes);
}

static int d_map(gm_device *d, uint64_t va, uint64_t bytes, uint64_t *ns)
{
    dbl *x = D(d);
    x->model->overhead_bytes = d->overhead_bytes;
    if (bytes % GM_DRIVER_GRANULARITY) x->bad++;
    if (refuse(x)) return GM_EOOM;
    int rc = x->model->ops->mem_map(x->model, va, bytes, ns);
    if (rc == GM_OK) x->mapped += bytes;
    sync_used(d);
    return rc;
}

static void d_unmap(gm_device *d, uint64_t va, uint64_t bytes, uint64_t *ns)
{
    dbl *x = D(d);
    if (bytes > x->mapped || bytes % GM_DRIVER_GRANULARITY) x->bad++;
    x->mapped -= bytes;
    x->model->ops->mem_unmap(x->model, va, bytes, ns);
    sync_used(d);
}

static void d_destroy(gm_device *d)
{
    D(d)->destroyed++;
}

static const gm_device_ops dbl_ops = {"double",     d_alloc, d_free,  d_va_reserve,
                                      d_va_release, d_map,   d_unmap, d_destroy};

static void dbl_init(gm_device *d, dbl *x, uint64_t capacity, const gm_latency *lat)
{
    memset(x, 0, sizeof *x);
    memset(d, 0, sizeof *d);
    gm_err err = {0};
    CU_ASSERT_FATAL(gm_device_model_create(capacity, lat, &x->model, &err) == GM_OK);
    d->ops = &dbl_ops;
    d->impl = x;
    d->capacity_bytes = capacity;
}

static gm_sim_result *sim_bert(const char *conf, const char *allocator, uint64_t cap,
                               gm_device *dev, gm_sim_config *cfg_out)
{
    static gm_tenant_spec t = {.repeat = 1};
    static const gm_latency lat = GM_LATENCY_DEFAULT;
    t.path = gm_test_path("traces/bert.h5");
    gm_sim_config cfg = {.tenants = &t,
                         .n_tenants = 1,
                         .alloc_conf = conf,
                         .allocator = allocator,
                         .capacity_bytes = cap,
                         .overhead_bytes = 512 * MiB,
                         .latency = lat,
                         .device = dev};
    gm_sim_result *r = NULL;
    gm_err err = {0};
    int rc = gm_simulate(&cfg, &r, &err);
    if (rc) fprintf(stderr, "gm_simulate: %s\n", err.msg);
    CU_ASSERT_FATAL(rc == GM_OK);
    if (cfg_out) *cfg_out = cfg;
    return r;
}

/* The same run on the model and on a backend behaving like it: identical
 * results; the backend ends with nothing allocated, mapped or reserved, and
 * is not destroyed by the engine (gmreplay owns it). */
static void contract_same(const char *conf, const char *allocator, uint64_t cap)
{
    static const gm_latency lat = GM_LATENCY_DEFAULT;
    gm_device d;
    dbl x;
    dbl_init(&d, &x, cap, &lat);
    gm_sim_result *a = sim_bert(conf, allocator, cap, NULL, NULL);
    gm_sim_result *b = sim_bert(conf, allocator, cap, &d, NULL);
    CU_ASSERT_EQUAL(a->device.peak_r, b->device.peak_r);
    CU_ASSERT_EQUAL(a->device.peak_a, b->device.peak_a);
    CU_ASSERT_EQUAL(a->device.n_oom, b->device.n_oom);
    CU_ASSERT_EQUAL(a->device.n_oom_kept ? a->device.ooms[0].event_index : 0,
                    b->device.n_oom_kept ? b->device.ooms[0].event_index : 0);
    CU_ASSERT_EQUAL(a->t[0].c.n_driver_alloc, b->t[0].c.n_driver_alloc);
    CU_ASSERT_EQUAL(a->t[0].c.n_driver_free, b->t[0].c.n_driver_free);
    CU_ASSERT_EQUAL(a->t[0].c.driver_alloc_ns, b->t[0].c.driver_alloc_ns);
    CU_ASSERT_EQUAL(a->peak_device_used, b->peak_device_used);
    CU_ASSERT_EQUAL(b->capacity_bytes, cap);
    CU_ASSERT_EQUAL(x.bad, 0);
    CU_ASSERT_EQUAL(x.n_live, 0);
    CU_ASSERT_EQUAL(x.mapped, 0);
    CU_ASSERT_EQUAL(x.reserved_ranges, 0);
    CU_ASSERT_EQUAL(d.used_bytes, 0);
    CU_ASSERT_EQUAL(d.overhead_bytes, 0);
    CU_ASSERT_EQUAL(x.destroyed, 0);
    gm_sim_result_free(a);
    gm_sim_result_free(b);
    gm_device_destroy(x.model);
}

static void test_contract_same_results(void)
{
    contract_same(NULL, "pytorch", 80 * GiB);
    contract_same(NULL, "pytorch", 4 * GiB);
    contract_same("expandable_segments:True", "pytorch", 4 * GiB);
    contract_same("max_split_size_mb:64,garbage_collection_threshold:0.6", "pytorch", 4 * GiB);
    contract_same(NULL, "direct", 3 * GiB);
}

/* A backend that refuses (CUDA_ERROR_OUT_OF_MEMORY) is an OOM of the event
 * that asked, after the policy's retries; the tenant stops and gives back
 * everything. */
static void test_contract_refusal_is_oom(void)
{
    static const gm_latency lat = GM_LATENCY_DEFAULT;
    gm_event ev[8];
    /* over 10 MiB: each its own driver allocation, in either allocator */
    static const uint64_t sizes[4] = {11 * MiB, 13 * MiB, 15 * MiB, 17 * MiB};
    for (int i = 0; i < 4; i++)
        ev[i] = (gm_event){.t_ns = 10u * (unsigned)i,
                           .op = GM_OP_ALLOC,
                           .addr = 0x1000 + 0x100000ull * (unsigned)i,
                           .size = sizes[i]};
    for (int i = 0; i < 4; i++)
        ev[4 + i] = (gm_event){.t_ns = 100u + (unsigned)i, .op = GM_OP_FREE, .addr = ev[i].addr};
    gm_tenant_spec t = {.path = "memory", .events = ev, .n_events = 8, .repeat = 1};
    for (int alloc = 0; alloc < 2; alloc++) {
        gm_device d;
        dbl x;
        dbl_init(&d, &x, 1 * GiB, &lat);
        x.refuse_from = 3; /* the third driver allocation on */
        gm_sim_config cfg = {.tenants = &t,
                             .n_tenants = 1,
                             .latency = lat,
                             .device = &d,
                             .allocator = alloc ? "pytorch" : "direct"};
        gm_sim_result *r = NULL;
        gm_err err = {0};
        CU_ASSERT_FATAL(gm_simulate(&cfg, &r, &err) == GM_OK);
        CU_ASSERT(x.refused >= 1);
        CU_ASSERT_EQUAL(r->device.n_oom, 1);
        CU_ASSERT_EQUAL(r->device.ooms[0].event_index, 2);
        CU_ASSERT_EQUAL(r->device.ooms[0].size, 15 * MiB);
        CU_ASSERT_EQUAL(r->t[0].status, GM_TENANT_ABORTED);
        CU_ASSERT_EQUAL(x.n_live, 0);
        CU_ASSERT_EQUAL(d.used_bytes, 0);
        CU_ASSERT_EQUAL(x.bad, 0);
        gm_sim_result_free(r);
        gm_device_destroy(x.model);
    }
}

/* ---------------- ballast arithmetic ---------------- */

static void test_ballast_target(void)
{
    gm_err err = {0};
    uint64_t t = 0, total = 141 * GiB, free_b = 140 * GiB;
    CU_ASSERT_EQUAL(gm_ballast_target(24 * GiB, 1, 1 * GiB, free_b, total, &t, &err), GM_OK);
    CU_ASSERT_EQUAL(t, 23 * GiB);
    CU_ASSERT_EQUAL(gm_ballast_target(24 * GiB, 3, 1 * GiB, free_b, total, &t, &err), GM_OK);
    CU_ASSERT_EQUAL(t, 21 * GiB);
    /* the whole card, one tenant, overhead = the context: no ballast */
    CU_ASSERT_EQUAL(gm_ballast_target(total, 1, total - free_b, free_b, total, &t, &err), GM_OK);
    CU_ASSERT_EQUAL(t, free_b);
    /* bigger than the card */
    CU_ASSERT_EQUAL(gm_ballast_target(200 * GiB, 1, 0, free_b, total, &t, &err), GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "more than this GPU has"));
    /* contexts alone do not fit */
    CU_ASSERT_EQUAL(gm_ballast_target(2 * GiB, 3, 1 * GiB, free_b, total, &t, &err), GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "do not fit"));
    /* emulated overhead smaller than the real context: more free needed than there is */
    CU_ASSERT_EQUAL(gm_ballast_target(total, 1, 100 * MiB, free_b, total, &t, &err), GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "--overhead"));
}

static void test_ballast_chunks(void)
{
    const uint64_t g = 2 * MiB, max = 4 * GiB;
    CU_ASSERT_EQUAL(gm_ballast_next_chunk(10 * GiB, 10 * GiB, g, max), 0);
    CU_ASSERT_EQUAL(gm_ballast_next_chunk(9 * GiB, 10 * GiB, g, max), 0);
    CU_ASSERT_EQUAL(gm_ballast_next_chunk(10 * GiB, 8 * GiB, g, max), 2 * GiB);
    CU_ASSERT_EQUAL(gm_ballast_next_chunk(20 * GiB, 8 * GiB, g, max), 4 * GiB);
    /* less than a granule apart: nothing to take */
    CU_ASSERT_EQUAL(gm_ballast_next_chunk(8 * GiB + MiB, 8 * GiB, g, max), 0);
    /* target between granules: free ends on the same whole granule count */
    CU_ASSERT_EQUAL(gm_ballast_next_chunk(10 * GiB, 8 * GiB + 3 * MiB, g, max), 2 * GiB - 2 * MiB);
    CU_ASSERT_EQUAL(gm_ballast_next_chunk(0, 0, 0, max), 0);

    /* the loop against a driver that charges 64 KiB extra per block and
     * reports free memory that is not granule-aligned: it converges, and ends
     * with exactly floor(target / g) whole granules free */
    uint64_t targets[] = {23 * GiB, 23 * GiB + 5 * MiB, 1 * MiB, 100 * GiB + 1};
    for (size_t k = 0; k < 4; k++) {
        uint64_t free_b = 140 * GiB + 768 * 1024, chunks = 0, c;
        while ((c = gm_ballast_next_chunk(free_b, targets[k], g, max)) != 0) {
            CU_ASSERT_FATAL(c <= free_b && chunks < 1000);
            free_b -= c + 64 * 1024;
            chunks++;
        }
        CU_ASSERT(free_b / g <= targets[k] / g);
        CU_ASSERT(free_b / g + 1 >= targets[k] / g); /* within a granule of driver extras */
        CU_ASSERT(chunks >= (140 * GiB - targets[k]) / max);
    }
}

/* ---------------- latency fit and device profiles ---------------- */

static void test_latency_fit(void)
{
    gm_err err = {0};
    uint64_t x[5] = {2 * MiB, 64 * MiB, 512 * MiB, 1 * GiB, 4 * GiB}, base, per;
    double y[5], r2;
    for (int i = 0; i < 5; i++)
        y[i] = 20000 + 100000.0 * (double)x[i] / (double)GiB;
    CU_ASSERT_EQUAL(gm_latency_fit(x, y, 5, &base, &per, &r2, &err), GM_OK);
    CU_ASSERT_EQUAL(base, 20000);
    CU_ASSERT_EQUAL(per, 100000);
    CU_ASSERT_DOUBLE_EQUAL(r2, 1.0, 1e-9);
    /* falling with size (noise on a flat curve): slope 0, the mean */
    double flat[5] = {30, 28, 26, 24, 22};
    CU_ASSERT_EQUAL(gm_latency_fit(x, flat, 5, &base, &per, &r2, &err), GM_OK);
    CU_ASSERT_EQUAL(per, 0);
    CU_ASSERT_EQUAL(base, 26);
    /* a line through below zero: intercept 0, refitted through the origin */
    double steep[2] = {0, 1000};
    uint64_t xs[2] = {1 * GiB, 2 * GiB};
    CU_ASSERT_EQUAL(gm_latency_fit(xs, steep, 2, &base, &per, &r2, &err), GM_OK);
    CU_ASSERT_EQUAL(base, 0);
    CU_ASSERT(per > 0 && per < 1000);
    /* not enough information */
    CU_ASSERT_EQUAL(gm_latency_fit(x, y, 1, &base, &per, &r2, &err), GM_EINVAL);
    uint64_t same[3] = {4096, 4096, 4096};
    CU_ASSERT_EQUAL(gm_latency_fit(same, y, 3, &base, &per, &r2, &err), GM_EINVAL);
}

static const char *write_profile(uint64_t total, uint64_t ctx)
{
    gm_device_profile p = {.total_bytes = total,
                           .granularity_bytes = 2 * MiB,
                           .driver_version = 13000,
                           .context_overhead_bytes = ctx,
                           .latency = {11, 22, 33, 44}};
    snprintf(p.device_name, sizeof p.device_name, "Test GPU");
    json_t *j = gm_device_profile_json(&p);
    const char *path = gm_test_tmp("profile.json");
    gm_err err = {0};
    CU_ASSERT_FATAL(gm_json_write(j, path, &err) == GM_OK);
    json_decref(j);
    return path;
}

static void test_device_profile(void)
{
    const char *path = write_profile(141 * GiB, 600 * MiB);
    gm_device_profile p;
    gm_err err = {0};
    CU_ASSERT_EQUAL(gm_device_profile_load(path, &p, &err), GM_OK);
    CU_ASSERT_EQUAL(p.total_bytes, 141 * GiB);
    CU_ASSERT_EQUAL(p.context_overhead_bytes, 600 * MiB);
    CU_ASSERT_EQUAL(p.latency.free_ns_per_gib, 44);
    CU_ASSERT_STRING_EQUAL(p.device_name, "Test GPU");
    CU_ASSERT_EQUAL(p.driver_version, 13000);

    CU_ASSERT_EQUAL(gm_device_profile_load("/nonexistent/p.json", &p, &err), GM_EIO);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "gmreplay --calibrate"));
    const char *bad = gm_test_tmp("bad.json");
    FILE *f = fopen(bad, "w");
    fputs("{\"schema\": \"gmsim-result/1\"}", f);
    fclose(f);
    CU_ASSERT_EQUAL(gm_device_profile_load(bad, &p, &err), GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "not a device profile"));
    f = fopen(bad, "w");
    fputs("{\"schema\": \"gmsim-device-profile/1\", \"device\": {\"total_bytes\": 100}, "
          "\"context_overhead_bytes\": 10, \"latency\": {\"malloc_base_ns\": -1}}",
          f);
    fclose(f);
    CU_ASSERT_EQUAL(gm_device_profile_load(bad, &p, &err), GM_EINVAL);
    remove(bad);
    remove(path);
}

/* --device-profile: latency always; overhead and capacity unless given,
 * whatever the order. */
static void test_run_opts_profile(void)
{
    const char *path = write_profile(141 * GiB, 600 * MiB);
    gm_err err = {0};
    for (int order = 0; order < 3; order++) {
        gm_run_opts o;
        gm_run_opts_init(&o);
        struct option lo[GM_RUN_OPTS_LONGOPTS];
        CU_ASSERT_FATAL(gm_run_opts_longopts(lo, GM_RUN_OPTS_LONGOPTS, NULL));
        int c_prof = 0, c_ovh = 0, c_cap = 0;
        for (int i = 0; lo[i].name; i++) {
            c_prof = !strcmp(lo[i].name, "device-profile") ? lo[i].val : c_prof;
            c_ovh = !strcmp(lo[i].name, "overhead") ? lo[i].val : c_ovh;
            c_cap = !strcmp(lo[i].name, "capacity") ? lo[i].val : c_cap;
        }
        CU_ASSERT_FATAL(c_prof && c_ovh && c_cap);
        if (order == 1) {
            CU_ASSERT_EQUAL(gm_run_opts_parse(&o, c_ovh, "1GiB", &err), GM_OK);
            CU_ASSERT_EQUAL(gm_run_opts_parse(&o, c_cap, "24GiB", &err), GM_OK);
        }
        CU_ASSERT_EQUAL(gm_run_opts_parse(&o, c_prof, path, &err), GM_OK);
        if (order == 2) {
            CU_ASSERT_EQUAL(gm_run_opts_parse(&o, c_ovh, "1GiB", &err), GM_OK);
            CU_ASSERT_EQUAL(gm_run_opts_parse(&o, c_cap, "24GiB", &err), GM_OK);
        }
        CU_ASSERT_EQUAL(o.latency.malloc_base_ns, 11);
        CU_ASSERT_EQUAL(o.latency.free_ns_per_gib, 44);
        CU_ASSERT_EQUAL(o.overhead, order ? 1 * GiB : 600 * MiB);
        gm_sim_config cfg;
        gm_run_opts_config(&o, &cfg); /* the capacity the run gets */
        CU_ASSERT_EQUAL(cfg.capacity_bytes, order ? 24 * GiB : 141 * GiB);
        /* --gpu comes before the profile's device too, and --capacity before both */
        int c_gpu = 0;
        for (int i = 0; lo[i].name; i++)
            c_gpu = !strcmp(lo[i].name, "gpu") ? lo[i].val : c_gpu;
        CU_ASSERT_EQUAL(gm_run_opts_parse(&o, c_gpu, "l4", &err), GM_OK);
        gm_run_opts_config(&o, &cfg);
        CU_ASSERT_EQUAL(cfg.capacity_bytes, order ? 24 * GiB : 23570219008ull);
        gm_run_opts_free(&o);
    }
    gm_run_opts o;
    gm_run_opts_init(&o);
    struct option lo[GM_RUN_OPTS_LONGOPTS];
    CU_ASSERT_FATAL(gm_run_opts_longopts(lo, GM_RUN_OPTS_LONGOPTS, NULL));
    for (int i = 0; lo[i].name; i++)
        if (!strcmp(lo[i].name, "device-profile"))
            CU_ASSERT_EQUAL(gm_run_opts_parse(&o, lo[i].val, "/nonexistent.json", &err), GM_EIO);
    gm_run_opts_free(&o);
    remove(path);
}

/* ---------------- measured statistics ---------------- */

static void test_latency_stats(void)
{
    gm_lat_samples s;
    gm_lat_init(&s);
    for (int i = 100; i >= 1; i--)
        gm_lat_add(&s, (uint64_t)i * 1000);
    json_t *j = gm_lat_json(&s);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "calls")), 100);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "total_ns")), 5050000);
    CU_ASSERT_DOUBLE_EQUAL(json_real_value(json_object_get(j, "mean_ns")), 50500, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(json_real_value(json_object_get(j, "p50_ns")), 50500, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(json_real_value(json_object_get(j, "p90_ns")), 90100, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(json_real_value(json_object_get(j, "p99_ns")), 99010, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(json_real_value(json_object_get(j, "min_ns")), 1000, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(json_real_value(json_object_get(j, "max_ns")), 100000, 1e-6);
    json_decref(j);
    gm_lat_free(&s);
    /* past the sample cap: counts and extremes exact, the sample bounded */
    gm_lat_init(&s);
    for (uint64_t i = 0; i < GM_LAT_MAX_SAMPLES + 1000; i++)
        gm_lat_add(&s, 7 + (i % 3));
    CU_ASSERT_EQUAL(s.seen, GM_LAT_MAX_SAMPLES + 1000);
    CU_ASSERT_EQUAL(s.n, GM_LAT_MAX_SAMPLES);
    CU_ASSERT_DOUBLE_EQUAL(s.max, 9, 0);
    gm_lat_free(&s);
    /* nothing measured */
    gm_lat_init(&s);
    j = gm_lat_json(&s);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "calls")), 0);
    json_decref(j);
}

static void test_used_series(void)
{
    gm_used_series *s = calloc(1, sizeof *s);
    for (uint64_t i = 0; i < 5000; i++) {
        gm_used_point p = {i * 10, i, (i * 7919) % 4999 * MiB, i};
        gm_used_add(s, &p);
    }
    CU_ASSERT_EQUAL(s->samples, 5000);
    CU_ASSERT(s->n <= GM_USED_POINTS && s->n >= GM_USED_POINTS / 4);
    CU_ASSERT_EQUAL(s->peak.used_bytes, 4998 * MiB);
    uint64_t mx = 0, last_t = 0;
    for (size_t i = 0; i < s->n; i++) {
        mx = s->p[i].used_bytes > mx ? s->p[i].used_bytes : mx;
        CU_ASSERT(i == 0 || s->p[i].t_ns > last_t);
        last_t = s->p[i].t_ns;
    }
    CU_ASSERT_EQUAL(mx, s->peak.used_bytes); /* merging keeps the maxima */
    free(s);
}

/* ---------------- validate on hand-made pairs ---------------- */

static json_t *result(uint64_t peak_r, uint64_t oom_event, int n_oom)
{
    json_t *ooms = json_array();
    for (int i = 0; i < n_oom; i++)
        json_array_append_new(ooms, json_pack("{s:i,s:i,s:I,s:I}", "tenant", 0, "pass", 0,
                                              "event_index", (json_int_t)(oom_event + (unsigned)i),
                                              "size_bytes", (json_int_t)(4 * MiB)));
    return json_pack(
        "{s:s,s:s,s:{s:I,s:I,s:s,s:s,s:f,s:s,s:s},"
        "s:{s:I,s:I,s:I,s:f,s:f,s:I,s:i,s:o,s:{s:i,s:i,s:I,s:I,s:I}},"
        "s:[{s:s,s:s,s:s,s:I,s:i,s:I,s:{s:I}}],s:I}",
        "schema", "gmsim-result/1", "backend", "model", "inputs", "capacity_bytes",
        (json_int_t)(24 * GiB), "overhead_bytes", (json_int_t)(512 * MiB), "allocator", "pytorch",
        "policy", "lru", "memory_fraction", 0.0, "on_oom", "abort", "scope", "self", "device",
        "peak_live_bytes", (json_int_t)(peak_r / 2), "peak_allocated_bytes",
        (json_int_t)(peak_r * 3 / 4), "peak_reserved_bytes", (json_int_t)peak_r, "fragmentation",
        0.25, "utilization", 0.7, "peak_device_used_bytes", (json_int_t)(peak_r + 512 * MiB),
        "oom_count", n_oom, "ooms", ooms, "driver", "malloc_calls", 10, "free_calls", 2,
        "malloc_ns", (json_int_t)200000, "free_ns", (json_int_t)30000, "total_ns",
        (json_int_t)230000, "tenants", "trace", "a.h5", "trace_hash", "0123456789abcdef",
        "alloc_conf", "", "offset_ns", (json_int_t)0, "repeat", 1, "quota_bytes", (json_int_t)0,
        "metrics", "peak_reserved_bytes", (json_int_t)peak_r, "events", (json_int_t)1000);
}

static json_t *measured(json_t *r, int signal, int had_room)
{
    json_object_set_new(r, "backend", json_string("cuda"));
    json_object_set_new(
        r, "measured",
        json_pack("{s:i,s:n,s:b,s:I,s:{s:I},s:{s:I,s:I,s:i}}", "interrupted_by_signal", signal,
                  "error", "freed_all", 1, "leaked_bytes", (json_int_t)0, "device_used",
                  "peak_bytes", (json_int_t)(10 * GiB), "oom", "driver_oom_returns", (json_int_t)0,
                  "cap_refusals", (json_int_t)1, "cap_refusals_driver_had_room", had_room));
    return r;
}

static int validate_pair(json_t *p, json_t *m, gm_validation *v)
{
    gm_err err = {0};
    int rc = gm_validate(p, m, v, &err);
    json_decref(p);
    json_decref(m);
    return rc;
}

static void test_validate_pass(void)
{
    gm_validation v;
    CU_ASSERT_FATAL(validate_pair(result(1000 * MiB, 42, 1),
                                  measured(result(1019 * MiB, 42, 1), 0, 0), &v) == GM_OK);
    CU_ASSERT_EQUAL(v.n_failed, 0);
    CU_ASSERT_EQUAL(v.n_checks, 4); /* inputs, OOM events, peak reserved, replay */
    CU_ASSERT_STRING_EQUAL(v.backend, "cuda");
    const gm_vrow *r = gm_validation_row(&v, "peak reserved");
    CU_ASSERT_FATAL(r != NULL);
    CU_ASSERT_DOUBLE_EQUAL(r->rel_err, 0.019, 1e-9);
    CU_ASSERT(r->check && r->pass);
    r = gm_validation_row(&v, "driver time");
    CU_ASSERT_FATAL(r != NULL);
    CU_ASSERT_FALSE(r->check); /* reported, no verdict */
    CU_ASSERT_DOUBLE_EQUAL(r->rel_err, 0, 1e-12);
    CU_ASSERT_PTR_NOT_NULL(gm_validation_row(&v, "peak device used (cuMemGetInfo)"));
    json_t *j = gm_validation_json(&v);
    CU_ASSERT(json_is_true(json_object_get(j, "pass")));
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "schema")), GM_VALIDATE_SCHEMA);
    json_decref(j);
    gm_validation_free(&v);
}

static void test_validate_failures(void)
{
    gm_validation v;
    /* peak reserved off by 2.1 % */
    CU_ASSERT_FATAL(validate_pair(result(1000 * MiB, 42, 1),
                                  measured(result(1021 * MiB, 42, 1), 0, 0), &v) == GM_OK);
    CU_ASSERT_EQUAL(v.n_failed, 1);
    CU_ASSERT_FALSE(gm_validation_row(&v, "peak reserved")->pass);
    gm_validation_free(&v);
    /* the OOM at another event */
    CU_ASSERT_FATAL(validate_pair(result(1000 * MiB, 42, 1),
                                  measured(result(1000 * MiB, 41, 1), 0, 0), &v) == GM_OK);
    CU_ASSERT_EQUAL(v.n_failed, 1);
    const gm_vrow *r = gm_validation_row(&v, "OOM events");
    CU_ASSERT_FALSE(r->pass);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->note, "event 42"));
    gm_validation_free(&v);
    /* an OOM the prediction did not have */
    CU_ASSERT_FATAL(validate_pair(result(1000 * MiB, 42, 0),
                                  measured(result(1000 * MiB, 42, 1), 0, 0), &v) == GM_OK);
    CU_ASSERT_FALSE(gm_validation_row(&v, "OOM events")->pass);
    gm_validation_free(&v);
    /* the guard refused where the driver still had room */
    CU_ASSERT_FATAL(validate_pair(result(1000 * MiB, 42, 1),
                                  measured(result(1000 * MiB, 42, 1), 0, 2), &v) == GM_OK);
    CU_ASSERT_FALSE(gm_validation_row(&v, "OOM events")->pass);
    gm_validation_free(&v);
    /* interrupted */
    CU_ASSERT_FATAL(validate_pair(result(1000 * MiB, 42, 1),
                                  measured(result(1000 * MiB, 42, 1), 15, 0), &v) == GM_OK);
    r = gm_validation_row(&v, "replay ran to the end");
    CU_ASSERT_FALSE(r->pass);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->note, "signal 15"));
    gm_validation_free(&v);
    /* other inputs: another capacity and policy */
    json_t *m = measured(result(1000 * MiB, 42, 1), 0, 0);
    json_object_set_new(json_object_get(m, "inputs"), "capacity_bytes", json_integer(1));
    json_object_set_new(json_object_get(m, "inputs"), "policy", json_string("pytorch"));
    CU_ASSERT_FATAL(validate_pair(result(1000 * MiB, 42, 1), m, &v) == GM_OK);
    r = gm_validation_row(&v, "inputs");
    CU_ASSERT_FALSE(r->pass);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->note, "capacity_bytes"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r->note, "policy"));
    gm_validation_free(&v);
}

static void test_validate_not_comparable(void)
{
    gm_validation v;
    gm_err err = {0};
    json_t *p = result(1000 * MiB, 42, 1), *m = measured(result(1000 * MiB, 42, 1), 0, 0);
    json_object_set_new(json_array_get(json_object_get(m, "tenants"), 0), "trace_hash",
                        json_string("ffffffffffffffff"));
    CU_ASSERT_EQUAL(gm_validate(p, m, &v, &err), GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "same trace"));
    json_object_set_new(m, "schema", json_string("gmsim-compare/1"));
    CU_ASSERT_EQUAL(gm_validate(p, m, &v, &err), GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "not a gmsim result"));
    json_decref(p);
    json_decref(m);
    CU_ASSERT_EQUAL(gm_validate_files("/nonexistent/a.json", "/nonexistent/b.json", &v, &err),
                    GM_EIO);
}

/* ---------------- schema parity with `gmsim run --json` ---------------- */

/* Every key of `a` is in `b` with the same JSON type (numbers: integer vs
 * real allowed to match only themselves); arrays by their first element. */
static int same_shape(json_t *a, json_t *b, char *path, size_t n)
{
    if (json_typeof(a) != json_typeof(b) && !(json_is_number(a) && json_is_number(b)) &&
        !json_is_null(a) && !json_is_null(b))
        return 0;
    if (json_is_object(a)) {
        const char *k;
        json_t *v;
        json_object_foreach(a, k, v)
        {
            size_t len = strlen(path);
            snprintf(path + len, n - len, ".%s", k);
            if (!json_object_get(b, k) || !same_shape(v, json_object_get(b, k), path, n)) return 0;
            path[len] = 0;
        }
    } else if (json_is_array(a) && json_array_size(a) && json_array_size(b)) {
        return same_shape(json_array_get(a, 0), json_array_get(b, 0), path, n);
    }
    return 1;
}

static void test_schema_parity(void)
{
    gm_sim_config cfg;
    gm_sim_result *r = sim_bert(NULL, "pytorch", 4 * GiB, NULL, &cfg);
    json_t *pred = gm_result_json(&cfg, r, "run");
    gm_measured *m = malloc(sizeof *m);
    gm_measured_init(m);
    snprintf(m->device_name, sizeof m->device_name, "Test GPU");
    gm_lat_add(&m->malloc_lat, 1000);
    gm_used_point pt = {1, 2, 3 * GiB, 2 * GiB};
    gm_used_add(&m->used, &pt);
    gm_backend_oom o = {GM_BOOM_CAP, 4 * MiB, 1 * MiB, 3 * GiB, 5};
    gm_measured_oom(m, &o);
    m->freed_all = 1;
    json_t *meas = gm_replay_result_json(&cfg, r, m);

    char path[512] = "";
    CU_ASSERT(same_shape(pred, meas, path, sizeof path));
    if (path[0]) fprintf(stderr, "schema differs at %s\n", path);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(pred, "backend")), "model");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(meas, "backend")), "cuda");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(meas, "command")), "replay");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(meas, "schema")), GM_RESULT_SCHEMA);
    json_t *mo = json_object_get(meas, "measured");
    CU_ASSERT_FATAL(json_is_object(mo));
    static const char *const keys[] = {"library",   "driver_version",
                                       "device",    "context_overhead_bytes",
                                       "capacity",  "oom",
                                       "latency",   "device_used",
                                       "paced",     "interrupted_by_signal",
                                       "freed_all", "leaked_bytes",
                                       "error",     "wall_s"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        CU_ASSERT_PTR_NOT_NULL(json_object_get(mo, keys[i]));
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(json_object_get(mo, "oom"), "cap_refusals")),
                    1);
    CU_ASSERT_FALSE(json_object_get(pred, "measured") != NULL);

    /* the file round trip: validate reads what gmreplay writes, and a
     * result validated against itself passes every check */
    const char *pp = gm_test_tmp("pred.json"), *mp = gm_test_tmp("meas.json");
    gm_err err = {0};
    CU_ASSERT_EQUAL(gm_json_write(pred, pp, &err), GM_OK);
    CU_ASSERT_EQUAL(gm_json_write(meas, mp, &err), GM_OK);
    gm_validation v;
    CU_ASSERT_FATAL(gm_validate_files(pp, mp, &v, &err) == GM_OK);
    CU_ASSERT_EQUAL(v.n_failed, 0);
    CU_ASSERT(gm_validation_row(&v, "OOM events")->pred > 0); /* 4 GiB: bert OOMs */
    gm_validation_free(&v);
    remove(pp);
    remove(mp);
    json_decref(pred);
    json_decref(meas);
    gm_measured_free(m);
    free(m);
    gm_sim_result_free(r);
}

int gm_test_register(void)
{
    CU_pSuite s = CU_add_suite("replay", NULL, NULL);
    if (!s) return CU_get_error();
    GM_ADD_TEST(s, test_contract_same_results);
    GM_ADD_TEST(s, test_contract_refusal_is_oom);
    GM_ADD_TEST(s, test_ballast_target);
    GM_ADD_TEST(s, test_ballast_chunks);
    GM_ADD_TEST(s, test_latency_fit);
    GM_ADD_TEST(s, test_device_profile);
    GM_ADD_TEST(s, test_run_opts_profile);
    GM_ADD_TEST(s, test_latency_stats);
    GM_ADD_TEST(s, test_used_series);
    GM_ADD_TEST(s, test_validate_pass);
    GM_ADD_TEST(s, test_validate_failures);
    GM_ADD_TEST(s, test_validate_not_comparable);
    GM_ADD_TEST(s, test_schema_parity);
    return CUE_SUCCESS;
}
