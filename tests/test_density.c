/*
 * test_density.c - gmsim fit --tenants by scheduling mode (study/fit.h,
 * gm_fit_density), every figure worked out by hand on a two-tenant mix.
 */
#include <stdio.h>
#include <string.h>

#include "cu.h"
#include "study/fit.h"
#include "study/simulate.h"

#define MiB GM_MiB
#define GiB GM_GiB
#define SEC 1000000000ull

/* The mix: G guaranteed (request 300 MiB) allocates 300 MiB at t=0 and frees
 * it at 1 s; O opportunistic (limit 400 MiB) allocates 400 MiB at t=0 and
 * frees it at 1 s. A 1 GiB device, no context overhead, copies at once.
 *
 * one job per GPU: each alone: 1 job; utilization (300 + 400) MiB over two
 *   1 GiB devices for 1 s each = 700/2048.
 * hard caps (300 + 400 per copy, placed by the caps): 1 copy (700 MiB); 2
 *   would need 1400 MiB: not placed. Utilization 700/1024.
 * requests/limits + lru (placed by the requests, 300 per copy): 3 copies;
 *   4 would need 1200 MiB. At 3, G0 (tenant 0) allocates with the two other
 *   requests held: 1024 - 600 = 424 for its 300; O0 finds 1024 - 300 - 600 =
 *   124 for its 400 and has no one to ask (no cache anywhere): it dies; so do
 *   O1 (124 free) and O2 (124). The three G complete: 900 MiB for 1 s,
 *   utilization 900/1024, 3 other OOMs.
 * device scope + lru (no classes applied): 2 copies: G0, O0, G1 hold 1000
 *   MiB, O1 dies; at 3 G2 finds 24 MiB for its 300: a guaranteed OOM.
 *   Utilization 1000/1024, 1 other OOM.
 * Slowdown: one 300 MiB cudaMalloc per G, 20 us + 300/1024 x 100 us (the
 *   default latency model, truncated to whole ns) = 49296 ns over 1 s. */
static void test_density_modes(void)
{
    gm_event g[] = {{.t_ns = 0, .addr = 1, .size = 300 * MiB, .op = GM_OP_ALLOC},
                    {.t_ns = SEC, .addr = 1, .op = GM_OP_FREE}};
    gm_event o[] = {{.t_ns = 0, .addr = 1, .size = 400 * MiB, .op = GM_OP_ALLOC},
                    {.t_ns = SEC, .addr = 1, .op = GM_OP_FREE}};
    gm_tenant_spec t[2] = {
        {.path = "g",
         .events = g,
         .n_events = 2,
         .repeat = 1,
         .cls = GM_CLASS_GUARANTEED,
         .request_bytes = 300 * MiB},
        {.path = "o",
         .events = o,
         .n_events = 2,
         .repeat = 1,
         .cls = GM_CLASS_OPPORTUNISTIC,
         .limit_bytes = 400 * MiB},
    };
    static const gm_latency lat = GM_LATENCY_DEFAULT;
    gm_sim_config c = {.tenants = t, .n_tenants = 2, .capacity_bytes = GiB, .latency = lat};
    CU_ASSERT_TRUE(gm_fit_wants_density(&c));
    char lru[] = "lru", *specs[] = {lru};
    gm_fit *f = NULL;
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_fit_density(&c, specs, 1, 1, 8, 0, &f, &err), GM_OK);
    CU_ASSERT_EQUAL_FATAL(f->n, 4);
    CU_ASSERT_EQUAL(f->protected_class, GM_CLASS_GUARANTEED);
    const gm_fit_entry *one = &f->e[0], *hard = &f->e[1], *req = &f->e[2], *scope = &f->e[3];
    CU_ASSERT_EQUAL(one->mode, GM_DENSITY_ONE_PER_GPU);
    CU_ASSERT_EQUAL(one->jobs, 1);
    CU_ASSERT_DOUBLE_EQUAL(one->utilization, 700.0 / 2048, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(one->slowdown, 49296.0 / SEC, 1e-12);
    CU_ASSERT_EQUAL(hard->mode, GM_DENSITY_HARD_CAP);
    CU_ASSERT_EQUAL(hard->copies_fit, 1);
    CU_ASSERT_EQUAL(hard->jobs, 2);
    CU_ASSERT_DOUBLE_EQUAL(hard->utilization, 700.0 / 1024, 1e-9);
    CU_ASSERT_PTR_NOT_NULL(strstr(hard->refusal, "caps and contexts add up to 1.37 GiB"));
    CU_ASSERT_EQUAL(req->mode, GM_DENSITY_REQUESTS);
    CU_ASSERT_STRING_EQUAL(req->label, "requests/limits + lru release");
    CU_ASSERT_EQUAL(req->copies_fit, 3);
    CU_ASSERT_EQUAL(req->jobs, 6);
    CU_ASSERT_EQUAL(req->other_ooms, 3);
    CU_ASSERT_DOUBLE_EQUAL(req->utilization, 900.0 / 1024, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(req->slowdown, 3 * 49296.0 / (3 * SEC), 1e-12);
    CU_ASSERT_PTR_NOT_NULL(strstr(req->refusal, "requests and contexts add up to 1.17 GiB"));
    CU_ASSERT_EQUAL(scope->mode, GM_DENSITY_SCOPE);
    CU_ASSERT_EQUAL(scope->copies_fit, 2);
    CU_ASSERT_EQUAL(scope->jobs, 4);
    CU_ASSERT_EQUAL(scope->other_ooms, 1);
    CU_ASSERT_DOUBLE_EQUAL(scope->utilization, 1000.0 / 1024, 1e-9);
    CU_ASSERT_PTR_NOT_NULL(strstr(scope->refusal, "tenant 4 (g, guaranteed) ran out of memory"));
    gm_fit_free(f);

    /* without a device size there is nothing to pack */
    c.capacity_bytes = 0;
    CU_ASSERT_EQUAL(gm_fit_density(&c, specs, 1, 1, 8, 0, &f, &err), GM_EUSAGE);
}

/* The host tier's transfers count in the slowdown. One guaranteed tenant
 * (request 100 MiB) on a 1 GiB device, no context overhead: A 600 MiB at 0,
 * B 600 MiB at 0.5 s, both freed at 1 s. Without a tier B does not fit: 0
 * copies in every mode. With a 1 GB/s tier (touch=none: a spilled block's
 * free drops its host copy) B's failure spills A (600 MiB = 629145600 B:
 * 629145600 ns at 1e9 B/s), and B takes A's cached segment. Driver time:
 * three cudaMalloc calls of 600 MiB at 20 us + 600/1024 x 100 us = 78593 ns
 * each (A's; B's, which fails, and its retry after PyTorch released its
 * cache, which fails too: a failed call costs its time). Slowdown of one
 * job per GPU: (3 x 78593 + 629145600) ns over its 1 s. */
static void test_density_host_tier_stall(void)
{
    gm_event g[] = {{.t_ns = 0, .addr = 1, .size = 600 * MiB, .op = GM_OP_ALLOC},
                    {.t_ns = SEC / 2, .addr = 2, .size = 600 * MiB, .op = GM_OP_ALLOC},
                    {.t_ns = SEC, .addr = 1, .op = GM_OP_FREE},
                    {.t_ns = SEC, .addr = 2, .op = GM_OP_FREE}};
    gm_tenant_spec t = {.path = "g",
                        .events = g,
                        .n_events = 4,
                        .repeat = 1,
                        .cls = GM_CLASS_GUARANTEED,
                        .request_bytes = 100 * MiB};
    static const gm_latency lat = GM_LATENCY_DEFAULT;
    gm_sim_config c = {.tenants = &t, .n_tenants = 1, .capacity_bytes = GiB, .latency = lat};
    char lru[] = "lru", *specs[] = {lru};
    gm_fit *f = NULL;
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_fit_density(&c, specs, 1, 1, 1, 0, &f, &err), GM_OK);
    CU_ASSERT_EQUAL(f->e[0].mode, GM_DENSITY_ONE_PER_GPU);
    CU_ASSERT_EQUAL(f->e[0].jobs, 0);
    gm_fit_free(f);
    gm_host_tier h = {.bytes_per_s = 1e9, .touch = GM_TOUCH_NONE};
    snprintf(h.name, sizeof h.name, "1GB/s");
    c.host_tier = &h;
    CU_ASSERT_EQUAL_FATAL(gm_fit_density(&c, specs, 1, 1, 1, 0, &f, &err), GM_OK);
    CU_ASSERT_EQUAL(f->e[0].jobs, 1);
    CU_ASSERT_DOUBLE_EQUAL(f->e[0].slowdown, (3 * 78593.0 + 629145600.0) / SEC, 1e-12);
    gm_fit_free(f);
}

/* What the scan k = 1, 2, ... gives for one row of density: the copies
 * that fit (every guaranteed tenant completes without OOM; a count not
 * placed does not fit), the first count that does not (or max), and the
 * answer run's utilization, slowdown and other tenants' OOMs, by their
 * definitions (study/fit.h). */
typedef struct density_want {
    uint32_t fit, tried;
    double utilization, slowdown;
    uint64_t other_ooms;
} density_want;

static density_want density_by_scan(const gm_sim_config *base, const gm_fit_entry *e, uint32_t max,
                                    uint64_t stagger)
{
    gm_tenant_spec ts[64];
    size_t group = base->n_tenants;
    CU_ASSERT_FATAL(max * group <= 64);
    for (uint32_t k = 0; k < max; k++)
        for (size_t j = 0; j < group; j++) {
            ts[k * group + j] = base->tenants[j];
            ts[k * group + j].offset_ns += k * stagger;
        }
    density_want w = {0};
    for (uint32_t k = 1; k <= max; k++) {
        gm_sim_config c = *base;
        c.policy = e->spec;
        c.tenants = ts;
        c.n_tenants = k * group;
        c.scope_device = e->mode == GM_DENSITY_SCOPE;
        c.share = e->mode == GM_DENSITY_HARD_CAP   ? GM_SHARE_HARD_CAP
                  : e->mode == GM_DENSITY_REQUESTS ? GM_SHARE_REQUESTS
                                                   : GM_SHARE_NONE;
        gm_sim_result *r = NULL;
        gm_err err = {0};
        int rc = gm_simulate(&c, &r, &err);
        CU_ASSERT_FATAL(rc == GM_OK || rc == GM_EOOM);
        w.tried = k;
        int ok = rc == GM_OK;
        double drv = 0, span = 0;
        uint64_t others = 0;
        for (size_t i = 0; ok && i < r->n_tenants; i++) {
            const gm_tenant_result *t = &r->t[i];
            if (t->cls != GM_CLASS_GUARANTEED) {
                others += t->m.n_oom;
                continue;
            }
            ok = !t->m.n_oom && t->status == GM_TENANT_COMPLETED;
            drv += (double)gm_counters_driver_ns(&t->c);
            span += (double)(t->m.t_last - t->m.t_first);
        }
        if (ok) {
            w.fit = k;
            w.other_ooms = others;
            w.slowdown = span > 0 ? drv / span : 0;
            double cs = (double)r->capacity_bytes * (double)(r->device.t_last - r->device.t_first);
            w.utilization = cs > 0 ? r->device.int_a / cs : 0;
        }
        gm_sim_result_free(r);
        if (!ok) break;
    }
    return w;
}

/* Density searches the copies as fit --tenants does and answers as the
 * scan, with the answer run's figures: a guaranteed tenant and a burstable
 * one whose iterations vary, copies 0.4 ms apart, on devices from room to
 * pressure (where the burstable ones OOM and are asked to release), under
 * lru and predictive; and with room, in fewer runs than a scan. */
static void test_density_search(void)
{
    enum { IT = 40 };
    gm_event g[4 * IT], b[4 * IT];
    size_t n = 0;
    for (uint64_t i = 0; i < IT; i++) {
        uint64_t t = i * 1000000, a = 1 + 2 * i;
        g[n] =
            (gm_event){.t_ns = t, .op = GM_OP_ALLOC, .addr = a, .size = (40 + 4 * (i % 3)) * MiB};
        b[n++] = (gm_event){
            .t_ns = t + 50000, .op = GM_OP_ALLOC, .addr = a, .size = (24 + 6 * (i % 4)) * MiB};
        g[n] = (gm_event){.t_ns = t + 200000, .op = GM_OP_ALLOC, .addr = a + 1, .size = 20 * MiB};
        b[n++] = (gm_event){.t_ns = t + 250000, .op = GM_OP_ALLOC, .addr = a + 1, .size = 8 * MiB};
        g[n] = (gm_event){.t_ns = t + 500000, .op = GM_OP_FREE, .addr = a + 1};
        b[n++] = (gm_event){.t_ns = t + 550000, .op = GM_OP_FREE, .addr = a};
        g[n] = (gm_event){.t_ns = t + 800000, .op = GM_OP_FREE, .addr = a};
        b[n++] = (gm_event){.t_ns = t + 850000, .op = GM_OP_FREE, .addr = a + 1};
    }
    gm_tenant_spec t[2] = {
        {.path = "g",
         .events = g,
         .n_events = n,
         .repeat = 1,
         .cls = GM_CLASS_GUARANTEED,
         .request_bytes = 80 * MiB,
         .limit_bytes = 80 * MiB},
        {.path = "b",
         .events = b,
         .n_events = n,
         .repeat = 1,
         .cls = GM_CLASS_BURSTABLE,
         .request_bytes = 20 * MiB,
         .limit_bytes = 64 * MiB},
    };
    static const gm_latency lat = GM_LATENCY_DEFAULT;
    static const uint64_t caps[] = {GiB, 600 * MiB, 300 * MiB, 64 * GiB};
    char lru[] = "lru", pred[] = "predictive", *specs[] = {lru, pred};
    const uint32_t max = 20;
    for (size_t ci = 0; ci < sizeof caps / sizeof caps[0]; ci++) {
        gm_sim_config c = {
            .tenants = t, .n_tenants = 2, .capacity_bytes = caps[ci], .latency = lat};
        gm_fit *f = NULL;
        gm_err err = {0};
        CU_ASSERT_EQUAL_FATAL(gm_fit_density(&c, specs, 2, 1, max, 400000, &f, &err), GM_OK);
        uint32_t runs = 0, tried = 0;
        for (size_t i = 1; i < f->n; i++) { /* row 0, one job per GPU, is no scan */
            const gm_fit_entry *e = &f->e[i];
            density_want w = density_by_scan(&c, e, max, 400000);
            CU_ASSERT_EQUAL(e->copies_fit, w.fit);
            CU_ASSERT_EQUAL(e->copies_tried, w.tried);
            CU_ASSERT_EQUAL(e->jobs, 2 * w.fit);
            CU_ASSERT_EQUAL(e->other_ooms, w.other_ooms);
            CU_ASSERT_DOUBLE_EQUAL(e->utilization, w.utilization, 1e-12);
            CU_ASSERT_DOUBLE_EQUAL(e->slowdown, w.slowdown, 1e-12);
            CU_ASSERT_EQUAL(e->refusal[0] != 0, w.fit < max);
            runs += e->runs;
            tried += w.tried;
        }
        if (caps[ci] == 64 * GiB) CU_ASSERT(runs < tried); /* with room: fewer runs than a scan */
        gm_fit_free(f);
    }
}

int gm_test_register(void)
{
    CU_pSuite s = CU_add_suite("density", NULL, NULL);
    if (!s) return CU_get_error();
    GM_ADD_TEST(s, test_density_modes);
    GM_ADD_TEST(s, test_density_host_tier_stall);
    GM_ADD_TEST(s, test_density_search);
    return CUE_SUCCESS;
}
