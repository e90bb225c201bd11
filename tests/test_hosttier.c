/*
 * test_hosttier.c - --host-tier and --on-oom chain (sim/host_tier.h) on
 * small traces whose answers are worked out by hand in the comments.
 */
#include <string.h>

#include "cu.h"
#include "sim/engine.h"
#include "sim/host_tier.h"
#include "study/simulate.h"
#include "traces/trace.h"

#define MiB GM_MiB

static gm_event ev(uint64_t t, int op, uint64_t addr, uint64_t size, int cat)
{
    gm_event e = {.t_ns = t,
                  .addr = addr,
                  .size = size,
                  .op = (uint8_t)op,
                  .category = (uint8_t)cat,
                  .phase = GM_PHASE_FORWARD};
    return e;
}
#define A(t, addr, mib, cat) ev(t, GM_OP_ALLOC, addr, (uint64_t)(mib)*MiB, cat)
#define F(t, addr) ev(t, GM_OP_FREE, addr, 0, 0)

static void config(gm_sim_config *c, gm_tenant_spec *t, size_t n, uint64_t capacity,
                   const char *allocator)
{
    static const gm_latency lat = GM_LATENCY_DEFAULT;
    memset(c, 0, sizeof *c);
    c->tenants = t;
    c->n_tenants = n;
    c->capacity_bytes = capacity;
    c->latency = lat;
    c->allocator = allocator;
}

/* The link names, a bandwidth, size and touch; bad values refused. */
static void test_parse(void)
{
    gm_host_tier h;
    gm_err err = {0};
    CU_ASSERT_EQUAL(gm_host_tier_parse("pcie4", &h, &err), GM_OK);
    CU_ASSERT_DOUBLE_EQUAL(h.bytes_per_s, 25e9, 1);
    CU_ASSERT_EQUAL(h.size, 0);
    CU_ASSERT_EQUAL(h.touch, GM_TOUCH_FREE);
    CU_ASSERT_EQUAL(gm_host_tier_parse("pcie5,size=64GiB,touch=none", &h, &err), GM_OK);
    CU_ASSERT_DOUBLE_EQUAL(h.bytes_per_s, 50e9, 1);
    CU_ASSERT_EQUAL(h.size, 64 * GM_GiB);
    CU_ASSERT_EQUAL(h.touch, GM_TOUCH_NONE);
    CU_ASSERT_EQUAL(gm_host_tier_parse("c2c", &h, &err), GM_OK);
    CU_ASSERT_DOUBLE_EQUAL(h.bytes_per_s, 450e9, 1);
    CU_ASSERT_EQUAL(gm_host_tier_parse("12.5GB/s", &h, &err), GM_OK);
    CU_ASSERT_DOUBLE_EQUAL(h.bytes_per_s, 12.5e9, 1);
    /* 25 GB/s: 1 MiB = 1048576 B in 41943.04 ns, rounded to nearest */
    CU_ASSERT_EQUAL(gm_host_tier_ns(&(gm_host_tier){.bytes_per_s = 25e9}, MiB), 41943);
    static const char *const bad[] = {"",
                                      "pcie3",
                                      "0GB/s",
                                      "-1GB/s",
                                      "fastGB/s",
                                      "pcie4,size=0",
                                      "pcie4,size=lots",
                                      "pcie4,touch=maybe",
                                      "pcie4,speed=1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CU_ASSERT_EQUAL(gm_host_tier_parse(bad[i], &h, &err), GM_EUSAGE);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "--host-tier"));
    }
}

/* Direct allocator (one cudaMalloc per tensor, 2 MiB tensors: 2 MiB each on
 * the device), an 8 MiB device, a 1 GB/s link (a byte takes a ns):
 *   t0..t3  A, B, C, D of 2 MiB: the device is full
 *   t4      E of 4 MiB fails: A (oldest) spilled, 2 MiB freed < 4 MiB,
 *           then B: 4 MiB, E fits. 2 spills, 4 MiB out, 4194304 ns.
 *   t5      C freed: on the device, nothing to do with the host
 *   t6, t7  A, B freed: touch=free fetches each back first (2 MiB free
 *           after C's free, then again after A's), 2 fetches, 4 MiB in,
 *           4194304 ns; touch=none drops them, no fetch.
 * Had the youngest (C, D) been spilled, C's free would fetch. */
static void run_spill(int touch, gm_sim_result **out)
{
    gm_event e[] = {A(0, 1, 2, GM_CAT_PARAMETER),
                    A(1, 2, 2, GM_CAT_ACTIVATION),
                    A(2, 3, 2, GM_CAT_ACTIVATION),
                    A(3, 4, 2, GM_CAT_ACTIVATION),
                    A(4, 5, 4, GM_CAT_ACTIVATION),
                    F(5, 3),
                    F(6, 1),
                    F(7, 2)};
    gm_tenant_spec t = {.path = "spill", .events = e, .n_events = 8, .repeat = 1};
    gm_sim_config c;
    config(&c, &t, 1, 8 * MiB, "direct");
    gm_host_tier h = {.bytes_per_s = 1e9, .touch = touch};
    snprintf(h.name, sizeof h.name, "1GB/s");
    c.host_tier = &h;
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_simulate(&c, out, &err), GM_OK);
}

static void test_spill_fetch_and_drop(void)
{
    gm_sim_result *r;
    run_spill(GM_TOUCH_FREE, &r);
    const gm_tier_stats *x = &r->t[0].tier;
    CU_ASSERT_EQUAL(r->device.n_oom, 0);
    CU_ASSERT_EQUAL(r->t[0].status, GM_TENANT_COMPLETED);
    CU_ASSERT_EQUAL(x->spills, 2);
    CU_ASSERT_EQUAL(x->spill_bytes, 4 * MiB);
    CU_ASSERT_EQUAL(x->spill_ns, 4 * MiB);
    CU_ASSERT_EQUAL(x->oom_spill_resolved, 1);
    CU_ASSERT_EQUAL(x->fetches, 2);
    CU_ASSERT_EQUAL(x->fetch_bytes, 4 * MiB);
    CU_ASSERT_EQUAL(x->fetch_ns, 4 * MiB);
    CU_ASSERT_EQUAL(x->drops, 0);
    CU_ASSERT_EQUAL(x->peak_host_bytes, 4 * MiB);
    CU_ASSERT_EQUAL(r->peak_device_used, 8 * MiB);
    gm_sim_result_free(r);

    run_spill(GM_TOUCH_NONE, &r);
    x = &r->t[0].tier;
    CU_ASSERT_EQUAL(r->device.n_oom, 0);
    CU_ASSERT_EQUAL(x->spills, 2);
    CU_ASSERT_EQUAL(x->fetches, 0);
    CU_ASSERT_EQUAL(x->fetch_ns, 0);
    CU_ASSERT_EQUAL(x->drops, 2);
    CU_ASSERT_EQUAL(x->drop_bytes, 4 * MiB);
    gm_sim_result_free(r);
}

/* A host tier of 2 MiB holds A only: E (4 MiB) cannot be made room for
 * (B does not fit on the host), the OOM stands; A stays spilled. */
static void test_host_size(void)
{
    gm_event e[] = {A(0, 1, 2, GM_CAT_PARAMETER), A(1, 2, 2, GM_CAT_ACTIVATION),
                    A(2, 3, 2, GM_CAT_ACTIVATION), A(3, 4, 2, GM_CAT_ACTIVATION),
                    A(4, 5, 4, GM_CAT_ACTIVATION)};
    gm_tenant_spec t = {.path = "small-host", .events = e, .n_events = 5, .repeat = 1};
    gm_sim_config c;
    config(&c, &t, 1, 8 * MiB, "direct");
    gm_host_tier h = {.bytes_per_s = 1e9, .size = 2 * MiB};
    c.host_tier = &h;
    gm_sim_result *r;
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_simulate(&c, &r, &err), GM_OK);
    CU_ASSERT_EQUAL(r->device.n_oom, 1);
    CU_ASSERT_EQUAL(r->t[0].tier.spills, 1);
    CU_ASSERT_EQUAL(r->t[0].tier.spill_bytes, 2 * MiB);
    CU_ASSERT_EQUAL(r->t[0].tier.oom_spill_resolved, 0);
    gm_sim_result_free(r);
}

/* --on-oom chain, PyTorch's allocator (tensors of 10 MiB and more get a
 * segment of their size rounded to 2 MiB), a 70 MiB device, no overhead.
 * Tenant 1 allocates X (20 MiB) at t0 and frees it at t1: it caches 20 MiB
 * (its last event at t100 keeps it alive). Tenant 0, all phase forward:
 *   t10 A 20 MiB parameter, t11 B 20 MiB activation: 60 MiB used, 10 free
 *   t12 C 20 activation fails; its own cache is empty; tenant 1's released
 *       (20 MiB): C fits                                   -> release
 *   t13 D 20 activation fails; no cache anywhere; at half size, 10 MiB, it
 *       fits: degraded from here                           -> degrade
 *   t14 E 12 parameter fails (not an activation); A (oldest) spilled: its
 *       20 MiB block is free in the cache, E is split from it -> offload
 *   t15 G 100 MiB parameter: more than the device; B, C, D (10 MiB), E
 *       spilled in vain                                    -> unresolved
 * 4 OOMs seen: 1 each; the tenant aborts at G with 1 OOM. Spilled: A 20,
 * then B 20, C 20, D 10, E 12 = 82 MiB in 5 spills; degraded: 1 allocation,
 * 10 MiB left out. */
static void test_chain(void)
{
    gm_event e0[] = {A(10, 1, 20, GM_CAT_PARAMETER),  A(11, 2, 20, GM_CAT_ACTIVATION),
                     A(12, 3, 20, GM_CAT_ACTIVATION), A(13, 4, 20, GM_CAT_ACTIVATION),
                     A(14, 5, 12, GM_CAT_PARAMETER),  A(15, 6, 100, GM_CAT_PARAMETER)};
    gm_event e1[] = {A(0, 1, 20, GM_CAT_ACTIVATION), F(1, 1), A(100, 2, 20, GM_CAT_ACTIVATION)};
    gm_tenant_spec t[2] = {{.path = "job", .events = e0, .n_events = 6, .repeat = 1},
                           {.path = "cache", .events = e1, .n_events = 3, .repeat = 1}};
    gm_sim_config c;
    config(&c, t, 2, 70 * MiB, "pytorch");
    c.on_oom_chain = 1;
    gm_sim_result *r;
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_simulate(&c, &r, &err), GM_OK);
    const gm_tier_stats *x = &r->t[0].tier;
    CU_ASSERT_EQUAL(x->chain_ooms, 4);
    CU_ASSERT_EQUAL(x->by_release, 1);
    CU_ASSERT_EQUAL(x->by_degrade, 1);
    CU_ASSERT_EQUAL(x->by_offload, 1);
    CU_ASSERT_EQUAL(x->unresolved, 1);
    CU_ASSERT_EQUAL(r->t[0].degraded, 1);
    CU_ASSERT_EQUAL(x->degraded_allocs, 1);
    CU_ASSERT_EQUAL(x->degraded_bytes, 10 * MiB);
    CU_ASSERT_EQUAL(x->spills, 5);
    CU_ASSERT_EQUAL(x->spill_bytes, 82 * MiB);
    CU_ASSERT_EQUAL(r->t[0].m.n_oom, 1);
    CU_ASSERT_EQUAL(r->t[0].status, GM_TENANT_ABORTED);
    CU_ASSERT_EQUAL(r->t[1].scope_released_bytes, 20 * MiB);
    CU_ASSERT_EQUAL(r->t[1].status, GM_TENANT_COMPLETED);
    CU_ASSERT_EQUAL(r->t[1].tier.chain_ooms, 0);
    /* the chain's host tier is PCIe Gen4 unless told */
    CU_ASSERT_EQUAL(r->has_host_tier, 1);
    CU_ASSERT_STRING_EQUAL(r->host_tier.name, "pcie4");
    gm_sim_result_free(r);

    /* without the chain: C is the first OOM and the job dies there */
    c.on_oom_chain = 0;
    CU_ASSERT_EQUAL_FATAL(gm_simulate(&c, &r, &err), GM_OK);
    CU_ASSERT_EQUAL(r->t[0].m.n_oom, 1);
    CU_ASSERT_EQUAL(r->t[0].events_done, 3); /* A, B, and C, its OOM */
    CU_ASSERT_EQUAL(r->has_host_tier, 0);
    gm_sim_result_free(r);
}

/* Both degradation cases below: events e through the direct allocator
 * (sizes round to 2 MiB) on 8 MiB under --on-oom chain. Each has one OOM,
 * which degradation resolves; two allocations are degraded, 3 + 1 MiB
 * left out, and no OOM remains. */
static gm_sim_result *run_degraded(gm_event *e, size_t n, const char *name)
{
    gm_tenant_spec t = {.path = name, .events = e, .n_events = n, .repeat = 1};
    gm_sim_config c;
    config(&c, &t, 1, 8 * MiB, "direct");
    c.on_oom_chain = 1;
    gm_sim_result *r;
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_simulate(&c, &r, &err), GM_OK);
    const gm_tier_stats *x = &r->t[0].tier;
    CU_ASSERT_EQUAL(x->chain_ooms, 1);
    CU_ASSERT_EQUAL(x->by_degrade, 1);
    CU_ASSERT_EQUAL(x->degraded_allocs, 2);
    CU_ASSERT_EQUAL(x->degraded_bytes, 3 * MiB + 1 * MiB);
    CU_ASSERT_EQUAL(r->device.n_oom, 0);
    return r;
}

/* Degradation ends with the iteration: where the phase comes back to
 * forward after backward. Direct allocator (sizes round to 2 MiB), 8 MiB:
 *   t0 A 4 MiB parameter
 *   t1 B 6 MiB activation fails; halved, 3 MiB (4 on the device) fits
 *      -> degrade, 3 MiB left out
 *   t2 B freed (backward)
 *   t3 C 2 MiB activation, backward: same iteration, halved: 1 MiB left out
 *   t4 D 2 MiB activation, forward: a new iteration, full size
 * 2 degraded allocations, 4 MiB left out (5 had D been halved). */
static void test_degrade_ends_with_iteration(void)
{
    gm_event e[] = {A(0, 1, 4, GM_CAT_PARAMETER), A(1, 2, 6, GM_CAT_ACTIVATION), F(2, 2),
                    A(3, 3, 2, GM_CAT_ACTIVATION), A(4, 4, 2, GM_CAT_ACTIVATION)};
    e[2].phase = e[3].phase = GM_PHASE_BACKWARD;
    /* B (at the OOM) and C (degraded, in the same iteration); not D */
    gm_sim_result *r = run_degraded(e, 5, "iter");
    CU_ASSERT_EQUAL(r->t[0].degraded, 1);
    gm_sim_result_free(r);
}

/* Without phases, degradation ends when the pressure has passed: the
 * allocated bytes are back to those at the OOM less the request. Direct
 * allocator (2 MiB rounding), 8 MiB, no phase on any event:
 *   t0 A 4 MiB activation
 *   t1 B 6 MiB activation fails (4 allocated at the OOM); halved, 3 MiB
 *      (4 on the device) fits -> degrade until allocated <= 4 - 6: 0
 *   t2 C 2 MiB activation: 8 allocated, halved (1 MiB, 2 on the device)
 *   t3 A, B and C freed: 0 allocated
 *   t6 D 6 MiB activation: the pressure passed, full size (fits: 6 <= 8)
 * 2 degraded allocations (B, C), 3 + 1 MiB left out. */
static void test_degrade_ends_with_pressure(void)
{
    gm_event e[] = {A(0, 1, 4, GM_CAT_ACTIVATION),
                    A(1, 2, 6, GM_CAT_ACTIVATION),
                    F(2, 1),
                    A(3, 3, 2, GM_CAT_ACTIVATION),
                    F(4, 2),
                    F(5, 3),
                    A(6, 4, 6, GM_CAT_ACTIVATION)};
    for (size_t i = 0; i < sizeof e / sizeof e[0]; i++)
        e[i].phase = GM_PHASE_UNKNOWN;
    gm_sim_result *r = run_degraded(e, 7, "serve");
    CU_ASSERT_EQUAL(r->t[0].status, GM_TENANT_COMPLETED);
    gm_sim_result_free(r);
}

/* Many spills, fetches and drops at reused addresses: records come and go
 * (a spilled block's free removes its record, moving the last into its
 * place), and the same addresses are allocated again. Each live block has
 * one record, so no spill frees a block twice (which crashed, or freed
 * another tensor's block), and every byte spilled is fetched back, dropped
 * or still on the host at the end: never more fetched or dropped than
 * spilled. The trace is a fixed pseudo-random one (a linear congruential
 * generator), 64 addresses of 1-3 MiB on a 16 MiB device. */
static void test_spill_records_reused_addresses(void)
{
    enum { N = 4000, ADDRS = 64 };
    static gm_event e[N];
    int live[ADDRS] = {0};
    uint64_t x = 12345;
    for (size_t i = 0; i < N; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        size_t k = (size_t)(x >> 33) % ADDRS;
        e[i] = live[k] ? F(i, 0x1000 + k) : A(i, 0x1000 + k, 1 + (x >> 20) % 3, GM_CAT_ACTIVATION);
        live[k] = !live[k];
    }
    for (int touch = GM_TOUCH_FREE; touch <= GM_TOUCH_NONE; touch++)
        for (int m = 0; m < 2; m++) {
            gm_tenant_spec t = {.path = "reuse", .events = e, .n_events = N, .repeat = 1};
            gm_sim_config c;
            config(&c, &t, 1, 16 * MiB, m ? "pytorch" : "direct");
            gm_host_tier h = {.bytes_per_s = 1e9, .touch = touch};
            snprintf(h.name, sizeof h.name, "1GB/s");
            c.host_tier = &h;
            c.on_oom_skip = 1;
            gm_sim_result *r;
            gm_err err = {0};
            CU_ASSERT_EQUAL_FATAL(gm_simulate(&c, &r, &err), GM_OK);
            const gm_tier_stats *st = &r->t[0].tier;
            CU_ASSERT_EQUAL(r->t[0].status, GM_TENANT_COMPLETED);
            CU_ASSERT(st->spills > 100); /* the test exercises what it says */
            CU_ASSERT(st->fetch_bytes + st->drop_bytes <= st->spill_bytes);
            if (touch == GM_TOUCH_NONE) CU_ASSERT(st->drops > 100);
            gm_sim_result_free(r);
        }
}

int gm_test_register(void)
{
    CU_pSuite s = CU_add_suite("hosttier", NULL, NULL);
    if (!s) return CU_get_error();
    GM_ADD_TEST(s, test_parse);
    GM_ADD_TEST(s, test_spill_fetch_and_drop);
    GM_ADD_TEST(s, test_host_size);
    GM_ADD_TEST(s, test_chain);
    GM_ADD_TEST(s, test_degrade_ends_with_iteration);
    GM_ADD_TEST(s, test_degrade_ends_with_pressure);
    GM_ADD_TEST(s, test_spill_records_reused_addresses);
    return 0;
}
