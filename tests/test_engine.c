/*
 * test_engine.c - the discrete-event engine: multi-tenant interleaving,
 * offsets, repeats, quotas, OOM handling, initial state, and the bad inputs
 * of DESIGN §3 reaching the user as clear errors.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/hash.h"
#include "cu.h"
#include "same_run.h"
#include "sim/engine.h"
#include "study/simulate.h"
#include "traces/event_ids.h"
#include "traces/trace.h"

#define MiB GM_MiB
#define GiB GM_GiB

static gm_event ev_alloc(uint64_t t, uint64_t addr, uint64_t size)
{
    gm_event e = {.t_ns = t, .addr = addr, .size = size, .op = GM_OP_ALLOC};
    return e;
}

static gm_event ev_free(uint64_t t, uint64_t addr)
{
    gm_event e = {.t_ns = t, .addr = addr, .op = GM_OP_FREE};
    return e;
}

typedef struct seen {
    int n;
    int tenant[64];
    uint64_t index[64];
    gm_seg_event ev[64];
} seen;

static void record(void *ctx, int tenant, uint64_t event_index, const gm_seg_event *ev)
{
    seen *s = ctx;
    if (s->n < 64) {
        s->tenant[s->n] = tenant;
        s->index[s->n] = event_index;
        s->ev[s->n++] = *ev;
    }
}

static void config(gm_sim_config *c, gm_tenant_spec *t, size_t n, uint64_t capacity)
{
    static const gm_latency lat = GM_LATENCY_DEFAULT;
    memset(c, 0, sizeof *c);
    c->tenants = t;
    c->n_tenants = n;
    c->capacity_bytes = capacity;
    c->overhead_bytes = 0;
    c->latency = lat;
}

/* Two tenants: events merge in time order; equal times go to tenant 0
 * first; --offset shifts a tenant. Each alloc makes its own segment (sizes
 * differ and nothing is freed), so the driver log shows the order. */
static void test_interleaving(void)
{
    gm_event a[] = {ev_alloc(0, 1, 12 * MiB), ev_alloc(10, 2, 14 * MiB), ev_alloc(20, 3, 16 * MiB)};
    gm_event b[] = {ev_alloc(0, 1, 22 * MiB), ev_alloc(5, 2, 24 * MiB), ev_alloc(10, 3, 26 * MiB)};
    gm_tenant_spec t[2] = {
        {.path = "a", .events = a, .n_events = 3, .repeat = 1},
        {.path = "b", .events = b, .n_events = 3, .repeat = 1, .offset_ns = 5},
    };
    gm_sim_config c;
    config(&c, t, 2, 80 * GiB);
    seen s = {0};
    c.seg_hook = record;
    c.seg_hook_ctx = &s;
    gm_sim_result *r;
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_simulate(&c, &r, &err), GM_OK);
    /* times: a 0,10,20; b 5,10,15 -> a0 b5 a10 b10 b15 a20 */
    static const int want_tenant[] = {0, 1, 0, 1, 1, 0};
    static const uint64_t want_t[] = {0, 5, 10, 10, 15, 20};
    static const uint64_t want_size[] = {12, 22, 14, 24, 26, 16};
    static const uint64_t want_index[] = {0, 0, 1, 1, 2, 2};
    CU_ASSERT_EQUAL_FATAL(s.n, 6);
    for (int i = 0; i < 6; i++) {
        CU_ASSERT_EQUAL(s.tenant[i], want_tenant[i]);
        CU_ASSERT_EQUAL(s.ev[i].t_ns, want_t[i]);
        CU_ASSERT_EQUAL(s.ev[i].size, want_size[i] * MiB);
        CU_ASSERT_EQUAL(s.index[i], want_index[i]);
    }
    /* tenant 1 ends at t=15 and gives its memory back before tenant 0's last
     * allocation: the device peak is at t=15, 12 + 14 + 22 + 24 + 26 MiB */
    CU_ASSERT_EQUAL(r->device.peak_r, (12 + 14 + 22 + 24 + 26) * MiB);
    CU_ASSERT_EQUAL(r->device.peak_r_t, 15);
    CU_ASSERT_EQUAL(gm_sim_completed(r), 2);
    gm_sim_result_free(r);
}

/* On OOM a tenant aborts by default and its memory goes back to the device,
 * so a later tenant fits; with --on-oom=skip every OOM is counted. */
static void test_oom_abort_and_skip(void)
{
    /* tenant 0 wants 3 x 400 MiB on a 1 GiB device: the third fails */
    gm_event a[] = {ev_alloc(0, 1, 400 * MiB),
                    ev_alloc(1, 2, 400 * MiB),
                    ev_alloc(2, 3, 400 * MiB),
                    ev_alloc(3, 4, 400 * MiB),
                    ev_free(4, 1),
                    ev_free(20, 2)};
    /* tenant 1 needs 900 MiB at t=10: fits only if tenant 0 gave everything back */
    gm_event b[] = {ev_alloc(10, 1, 900 * MiB), ev_free(11, 1)};
    gm_tenant_spec t[2] = {
        {.path = "a", .events = a, .n_events = 6, .repeat = 1},
        {.path = "b", .events = b, .n_events = 2, .repeat = 1},
    };
    gm_sim_config c;
    config(&c, t, 2, 1 * GiB);
    gm_sim_result *r;
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_simulate(&c, &r, &err), GM_OK);
    CU_ASSERT_EQUAL(r->t[0].status, GM_TENANT_ABORTED);
    CU_ASSERT_EQUAL(r->t[0].abort_t_ns, 2);
    CU_ASSERT_EQUAL(r->t[0].m.n_oom, 1);
    CU_ASSERT_EQUAL(r->t[0].m.ooms[0].event_index, 2);
    CU_ASSERT_EQUAL(r->t[0].m.ooms[0].size, 400 * MiB);
    CU_ASSERT_EQUAL(r->t[0].m.ooms[0].reserved, 800 * MiB);
    CU_ASSERT_EQUAL(r->t[1].status, GM_TENANT_COMPLETED);
    CU_ASSERT_EQUAL(r->device.n_oom, 1);
    CU_ASSERT_EQUAL(gm_sim_completed(r), 1);
    gm_sim_result_free(r);

    c.on_oom_skip = 1;
    CU_ASSERT_EQUAL_FATAL(gm_simulate(&c, &r, &err), GM_OK);
    CU_ASSERT_EQUAL(r->t[0].status, GM_TENANT_COMPLETED);
    CU_ASSERT_EQUAL(r->t[0].m.n_oom, 2); /* events 2 and 3 */
    CU_ASSERT_EQUAL(r->t[0].m.ooms[1].event_index, 3);
    /* at t=10 tenant 0 still runs and holds 400 MiB (event 1) plus 400 MiB
     * cached (event 0, freed): only 224 MiB are free and b may release only
     * its own cache (--scope self): b OOMs */
    CU_ASSERT_EQUAL(r->t[1].m.n_oom, 1);
    CU_ASSERT_EQUAL(r->device.n_oom, 3);
    gm_sim_result_free(r);
}

/* Each OOM gets a verdict from the numbers at that moment (metrics.h). */
static void test_oom_verdicts(void)
{
    gm_sim_config c;
    gm_sim_result *r;
    gm_err err = {0};
    /* shortage: 60 MiB live + 60 MiB more on a 100 MiB device */
    gm_event s[] = {ev_alloc(0, 1, 60 * MiB), ev_alloc(1, 2, 60 * MiB)};
    gm_tenant_spec ts = {.path = "shortage", .events = s, .n_events = 2, .repeat = 1};
    config(&c, &ts, 1, 100 * MiB);
    CU_ASSERT_EQUAL_FATAL(gm_simulate(&c, &r, &err), GM_OK);
    CU_ASSERT_EQUAL_FATAL(r->device.n_oom, 1);
    CU_ASSERT_EQUAL(r->device.ooms[0].verdict, GM_OOM_SHORTAGE);
    CU_ASSERT_EQUAL(r->device.ooms[0].limit, 100 * MiB);
    gm_sim_result_free(r);

    /* fragmentation: 20 x 5 MiB fill five 20 MiB segments (each splits its
     * kLargeBuffer segment); freeing the 1st and 3rd of every four leaves
     * 50 MiB free in 5 MiB holes that never merge, the device full, and no
     * whole free segment to release: an 8 MiB request fits nowhere */
    gm_event f[41];
    size_t n = 0;
    for (uint64_t i = 0; i < 20; i++)
        f[n++] = ev_alloc(i, 100 + i, 5 * MiB);
    for (uint64_t i = 0; i < 20; i += 2)
        f[n++] = ev_free(20 + i, 100 + i);
    f[n++] = ev_alloc(50, 999, 8 * MiB);
    gm_tenant_spec tf = {.path = "fragmented", .events = f, .n_events = n, .repeat = 1};
    config(&c, &tf, 1, 100 * MiB);
    CU_ASSERT_EQUAL_FATAL(gm_simulate(&c, &r, &err), GM_OK);
    CU_ASSERT_EQUAL_FATAL(r->device.n_oom, 1);
    const gm_oom *o = &r->device.ooms[0];
    CU_ASSERT_EQUAL(o->verdict, GM_OOM_FRAGMENTATION);
    CU_ASSERT_EQUAL(o->allocated, 50 * MiB);
    CU_ASSERT_EQUAL(o->reserved, 100 * MiB);
    CU_ASSERT_EQUAL(o->largest_free, 5 * MiB);
    gm_sim_result_free(r);

    /* other tenant: tenant 0 holds 70 MiB; tenant 1's 40 MiB would fit alone */
    gm_event a[] = {ev_alloc(0, 1, 70 * MiB), ev_free(10, 1)};
    gm_event b[] = {ev_alloc(5, 1, 40 * MiB), ev_free(6, 1)};
    gm_tenant_spec tt[2] = {
        {.path = "a", .events = a, .n_events = 2, .repeat = 1},
        {.path = "b", .events = b, .n_events = 2, .repeat = 1},
    };
    config(&c, tt, 2, 100 * MiB);
    CU_ASSERT_EQUAL_FATAL(gm_simulate(&c, &r, &err), GM_OK);
    CU_ASSERT_EQUAL_FATAL(r->t[1].m.n_oom, 1);
    o = &r->t[1].m.ooms[0];
    CU_ASSERT_EQUAL(o->verdict, GM_OOM_OTHER_TENANT);
    CU_ASSERT_EQUAL(o->others, 70 * MiB);
    CU_ASSERT_EQUAL(r->t[0].m.n_oom, 0);
    gm_sim_result_free(r);

    /* the rule itself, at its edges */
    gm_oom x = {.size = 10, .allocated = 90, .reserved = 95, .limit = 100};
    CU_ASSERT_EQUAL(gm_oom_classify(&x), GM_OOM_FRAGMENTATION); /* 90 + 10 = the limit */
    x.size = 11;
    CU_ASSERT_EQUAL(gm_oom_classify(&x), GM_OOM_SHORTAGE);
    x = (gm_oom){.size = 10, .allocated = 10, .reserved = 20, .limit = 100, .others = 75};
    CU_ASSERT_EQUAL(gm_oom_classify(&x), GM_OOM_OTHER_TENANT); /* 5 free now, 80 alone */
    x.others = 70;
    CU_ASSERT_EQUAL(gm_oom_classify(&x), GM_OOM_FRAGMENTATION); /* 10 free now */
    x = (gm_oom){.size = 10, .limit = 100, .initial = 1};
    CU_ASSERT_EQUAL(gm_oom_classify(&x), GM_OOM_SHORTAGE);
    CU_ASSERT_STRING_EQUAL(gm_oom_verdict_name(GM_OOM_OTHER_TENANT), "other tenant");
}

/* --repeat replays the trace back to back; what a pass leaves allocated is
 * freed at its end, so passes start from the same state. */
static void test_repeat(void)
{
    gm_event a[] = {ev_alloc(100, 1, 12 * MiB), ev_alloc(110, 2, 1000), ev_free(120, 1)};
    gm_tenant_spec t = {.path = "a", .events = a, .n_events = 3, .repeat = 3};
    gm_sim_config c;
    config(&c, &t, 1, 80 * GiB);
    gm_sim_result *r;
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_simulate(&c, &r, &err), GM_OK);
    CU_ASSERT_EQUAL(r->t[0].events_done, 9);
    CU_ASSERT_EQUAL(r->t[0].repeat_leftover_bytes, 2 * 1000);
    CU_ASSERT_EQUAL(r->device.peak_q, 12 * MiB + 1000);
    /* pass 2 starts 1 us after pass 1 ends (t=120 ns): its events are at
     * 1120, 1130, 1140 ns; pass 3 at 2140, 2150, 2160 */
    CU_ASSERT_EQUAL(r->t[0].m.t_last, 2160);
    /* the cache is reused: 2 segments (20 MiB large, 2 MiB small), no more */
    CU_ASSERT_EQUAL(r->t[0].c.n_driver_alloc, 2);
    gm_sim_result_free(r);
}

/* A tenant starts at its first event: before it, the device series holds
 * only the others; and memory freed at --repeat pass ends leaves the device
 * totals (allocated never exceeds reserved). */
static void test_late_start_and_repeat_totals(void)
{
    gm_event a[] = {ev_alloc(0, 1, 12 * MiB), ev_alloc(5, 2, 1000), ev_free(900000, 1)};
    gm_event b[] = {ev_alloc(0, 1, 30 * MiB), ev_free(10, 1)};
    gm_tenant_spec t[2] = {
        {.path = "a", .events = a, .n_events = 3, .repeat = 3},
        {.path = "b", .events = b, .n_events = 2, .repeat = 2, .offset_ns = 500000},
    };
    gm_sim_config c;
    config(&c, t, 2, 80 * GiB);
    gm_sim_result *r;
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_simulate(&c, &r, &err), GM_OK);
    const gm_timeline *tl = &r->device.tl;
    CU_ASSERT_EQUAL(tl->t0, 0);
    CU_ASSERT_EQUAL(tl->p[0].r_max, 12 * MiB + 2 * MiB); /* tenant a only */
    CU_ASSERT(r->device.peak_a <= r->device.peak_r);
    CU_ASSERT(r->device.a <= r->device.r);
    CU_ASSERT_EQUAL(r->device.q, 0); /* everything returned at the end */
    CU_ASSERT_EQUAL(r->device.peak_r, 12 * MiB + 2 * MiB + 30 * MiB);
    gm_sim_result_free(r);
}

/* A quota caps the tenant's reserved bytes like a memory fraction. */
static void test_quota(void)
{
    gm_event a[] = {ev_alloc(0, 1, 100 * MiB), ev_alloc(1, 2, 100 * MiB)};
    gm_tenant_spec t = {
        .path = "a", .events = a, .n_events = 2, .repeat = 1, .quota_bytes = 150 * MiB};
    gm_sim_config c;
    config(&c, &t, 1, 80 * GiB);
    gm_sim_result *r;
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_simulate(&c, &r, &err), GM_OK);
    CU_ASSERT_EQUAL(r->t[0].status, GM_TENANT_ABORTED);
    CU_ASSERT_EQUAL(r->t[0].m.ooms[0].event_index, 1);
    gm_sim_result_free(r);
}

/* Frees of unknown addresses and double frees stop the run with the event
 * index, unless --lenient counts and skips them. */
static void test_semantic_errors(void)
{
    gm_event dbl[] = {ev_alloc(0, 7, 1000), ev_free(1, 7), ev_free(2, 7)};
    gm_tenant_spec t = {.path = "dbl.h5", .events = dbl, .n_events = 3, .repeat = 1};
    gm_sim_config c;
    config(&c, &t, 1, 80 * GiB);
    gm_sim_result *r = NULL;
    gm_err err = {0};
    CU_ASSERT_EQUAL(gm_simulate(&c, &r, &err), GM_EINVAL);
    CU_ASSERT_PTR_NULL(r);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "dbl.h5: event 2"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "double free"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "--lenient"));
    c.lenient = 1;
    CU_ASSERT_EQUAL_FATAL(gm_simulate(&c, &r, &err), GM_OK);
    CU_ASSERT_EQUAL(r->t[0].unknown_frees, 1);
    gm_sim_result_free(r);

    gm_event live[] = {ev_alloc(0, 7, 1000), ev_alloc(1, 7, 2000)};
    t.events = live;
    t.n_events = 2;
    t.path = "live.h5";
    c.lenient = 0;
    CU_ASSERT_EQUAL(gm_simulate(&c, &r, &err), GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "live.h5: event 1"));
    c.lenient = 1;
    CU_ASSERT_EQUAL_FATAL(gm_simulate(&c, &r, &err), GM_OK);
    CU_ASSERT_EQUAL(r->t[0].live_reallocs, 1);
    CU_ASSERT_EQUAL(r->device.q, 0); /* everything returned at the end */
    CU_ASSERT_EQUAL(r->device.peak_q, 2000);
    gm_sim_result_free(r);
}

/* Helpers writing real trace files. */
static const char *write_trace(const char *name, const gm_event *ev, size_t n,
                               const gm_init_row *init, size_t ninit, uint64_t total)
{
    const char *path = gm_test_tmp(name);
    gm_trace_meta m;
    gm_trace_meta_init(&m);
    gm_trace_meta_set(&m.source, "synthetic:test");
    m.device_total_bytes = total;
    gm_trace_writer *w;
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_trace_create(path, &m, NULL, &w, &err), GM_OK);
    CU_ASSERT_EQUAL_FATAL(gm_trace_append(w, ev, n, &err), GM_OK);
    if (ninit) CU_ASSERT_EQUAL_FATAL(gm_trace_write_initial(w, init, ninit, &err), GM_OK);
    CU_ASSERT_EQUAL_FATAL(gm_trace_finish(w, &err), GM_OK);
    gm_trace_meta_free(&m);
    return path;
}

/* A trace's /initial_state is rebuilt before the first event: its live
 * blocks can be freed by the trace and count as pre-existing bytes. */
static void test_initial_state_file(void)
{
    gm_init_row init[] = {
        {.addr = 0x10000000, .size = 20 * MiB, .kind = GM_INIT_SEGMENT},
        {.addr = 0x10000000, .size = 5 * MiB, .block_size = 5 * MiB, .kind = GM_INIT_BLOCK},
    };
    gm_event ev[] = {ev_alloc(10, 0x20000000, 5 * MiB), ev_free(20, 0x10000000),
                     ev_free(30, 0x20000000)};
    const char *path = write_trace("init.h5", ev, 3, init, 2, 80 * GiB);
    gm_tenant_spec t = {.path = path, .repeat = 1};
    gm_sim_config c;
    config(&c, &t, 1, 0); /* capacity from the trace */
    gm_sim_result *r;
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_simulate(&c, &r, &err), GM_OK);
    CU_ASSERT_EQUAL(r->capacity_bytes, 80 * GiB);
    CU_ASSERT_EQUAL(r->t[0].init_live_bytes, 5 * MiB);
    CU_ASSERT_EQUAL(r->t[0].init_reserved_bytes, 20 * MiB);
    /* the new 5 MiB block fits the rebuilt segment: no driver call at all */
    CU_ASSERT_EQUAL(r->t[0].c.n_driver_alloc, 1); /* the restore itself */
    CU_ASSERT_EQUAL(r->device.peak_q, 10 * MiB);
    CU_ASSERT_EQUAL(r->device.peak_r, 20 * MiB);
    CU_ASSERT_EQUAL(strlen(r->t[0].trace_hash), 16);
    gm_sim_result_free(r);
    unlink(path);
}

/* File-level bad input surfaces through gm_simulate with the file named. */
static void test_bad_files(void)
{
    gm_tenant_spec t = {.path = "/nonexistent/x.h5", .repeat = 1};
    gm_sim_config c;
    config(&c, &t, 1, 0);
    gm_sim_result *r = NULL;
    gm_err err = {0};
    CU_ASSERT_NOT_EQUAL(gm_simulate(&c, &r, &err), GM_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "/nonexistent/x.h5"));

    /* time going backwards, reported with the event index */
    gm_event back[] = {ev_alloc(100, 1, 1000), ev_free(50, 1)};
    const char *p = write_trace("back.h5", back, 2, NULL, 0, 80 * GiB);
    t.path = p;
    CU_ASSERT_EQUAL(gm_simulate(&c, &r, &err), GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "event 1"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, p));
    unlink(p);

    /* a trace that does not record its device size needs --capacity */
    gm_event ok[] = {ev_alloc(0, 1, 1000)};
    p = write_trace("nocap.h5", ok, 1, NULL, 0, 0);
    t.path = p;
    CU_ASSERT_EQUAL(gm_simulate(&c, &r, &err), GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "--capacity"));
    c.capacity_bytes = GiB;
    CU_ASSERT_EQUAL(gm_simulate(&c, &r, &err), GM_OK);
    gm_sim_result_free(r);
    unlink(p);

    /* truncated file */
    gm_event many[2000];
    for (int i = 0; i < 1000; i++) {
        many[2 * i] = ev_alloc(2 * i, i + 1, 4096);
        many[2 * i + 1] = ev_free(2 * i + 1, i + 1);
    }
    p = write_trace("trunc.h5", many, 2000, NULL, 0, 80 * GiB);
    FILE *f = fopen(p, "r+");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fclose(f);
    CU_ASSERT_EQUAL_FATAL(truncate(p, len / 2), 0);
    t.path = p;
    CU_ASSERT_NOT_EQUAL(gm_simulate(&c, &r, &err), GM_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, p));
    unlink(p);
}

/* Unknown allocator, policy and bad allocator settings are reported. */
static void test_bad_settings(void)
{
    gm_event a[] = {ev_alloc(0, 1, 1000)};
    gm_tenant_spec t = {.path = "a", .events = a, .n_events = 1, .repeat = 1};
    gm_sim_config c;
    config(&c, &t, 1, GiB);
    gm_sim_result *r = NULL;
    gm_err err = {0};
    c.allocator = "tlsf";
    CU_ASSERT_EQUAL(gm_simulate(&c, &r, &err), GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "tlsf"));
    c.allocator = NULL;
    c.policy = "nosuch";
    CU_ASSERT_EQUAL(gm_simulate(&c, &r, &err), GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "nosuch"));
    c.policy = NULL;
    c.alloc_conf = "max_split_size_mb:1";
    CU_ASSERT_EQUAL(gm_simulate(&c, &r, &err), GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "max_split_size_mb"));
    c.alloc_conf = NULL;
    c.overhead_bytes = 2 * GiB; /* context larger than the card */
    CU_ASSERT_EQUAL(gm_simulate(&c, &r, &err), GM_EOOM);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "--capacity"));
}

/* What made a run depend on the device's size (engine.h: capacity_free,
 * refused_calls), and the claim behind fit's use of it: such a run is the
 * same on every device from its peak use up. A 30 MiB block is freed and
 * cached, then 40 MiB are needed: 70 MiB with no pressure; on 60 MiB the
 * driver refuses, PyTorch's policy flushes the cache and retries. */
static void test_capacity_dependence(void)
{
    gm_event a[] = {ev_alloc(0, 1, 30 * MiB), ev_free(10, 1), ev_alloc(20, 2, 40 * MiB)};
    gm_tenant_spec t = {.path = "a", .events = a, .n_events = 3, .repeat = 1};
    gm_sim_config c;
    gm_sim_result *r;
    gm_err err = {0};
    config(&c, &t, 1, GiB);
    CU_ASSERT_EQUAL_FATAL(gm_simulate(&c, &r, &err), GM_OK);
    CU_ASSERT_EQUAL(r->capacity_free, 1);
    CU_ASSERT_EQUAL(r->refused_calls, 0);
    CU_ASSERT_EQUAL(r->peak_device_used, 70 * MiB);
    gm_alloc_counters big = gm_sim_totals(r);
    gm_sim_result_free(r);
    c.capacity_bytes = 70 * MiB; /* at its peak use: the same run */
    CU_ASSERT_EQUAL_FATAL(gm_simulate(&c, &r, &err), GM_OK);
    gm_alloc_counters at_peak = gm_sim_totals(r);
    CU_ASSERT_EQUAL(r->refused_calls, 0);
    CU_ASSERT_EQUAL(at_peak.n_driver_alloc, big.n_driver_alloc);
    CU_ASSERT_EQUAL(at_peak.n_driver_free, big.n_driver_free);
    CU_ASSERT_EQUAL(r->device.peak_r, 70 * MiB);
    gm_sim_result_free(r);
    c.capacity_bytes = 60 * MiB; /* refused, flushed, retried: still only the calls decide */
    CU_ASSERT_EQUAL_FATAL(gm_simulate(&c, &r, &err), GM_OK);
    CU_ASSERT_EQUAL(r->device.n_oom, 0);
    CU_ASSERT_EQUAL(r->refused_calls, 1);
    CU_ASSERT_EQUAL(r->capacity_free, 1);
    CU_ASSERT_EQUAL(r->peak_device_used, 40 * MiB);
    gm_sim_result_free(r);
    c.policy = "lru"; /* it releases what the device lacks: read from its size */
    CU_ASSERT_EQUAL_FATAL(gm_simulate(&c, &r, &err), GM_OK);
    CU_ASSERT_EQUAL(r->capacity_free, 0);
    gm_sim_result_free(r);
    c.policy = NULL;
    c.capacity_bytes = GiB;
    c.memory_fraction = 0.5; /* a limit taken from the size */
    CU_ASSERT_EQUAL_FATAL(gm_simulate(&c, &r, &err), GM_OK);
    CU_ASSERT_EQUAL(r->capacity_free, 0);
    gm_sim_result_free(r);
    c.memory_fraction = 0;
    c.alloc_conf = "expandable_segments:True"; /* an address range sized from it */
    CU_ASSERT_EQUAL_FATAL(gm_simulate(&c, &r, &err), GM_OK);
    CU_ASSERT_EQUAL(r->capacity_free, 0);
    gm_sim_result_free(r);
}

/* --share requests (README, "Sharing a GPU"), worked by hand on a 1 GiB
 * device without context overhead: G guaranteed (request 600 MiB), B
 * burstable (request 200, limit 800), O opportunistic.
 *   t=0 O allocs 200: it may use 1024 - 600 - 200 (the requests held) = 224: fits
 *   t=1 O frees it: 200 MiB cached in O
 *   t=2 B allocs 400: 1024 - 200 (O's cache) - 600 (G's request) = 224 free for B: its
 *       allocator fails; O is asked first and releases its 200; then 424: fits (B above
 *       its request, on free memory)
 *   t=3 G allocs 600: held for it: fits (device 1000 MiB used)
 *   t=4 O allocs 100: 24 free; an opportunistic tenant may ask no burstable or guaranteed
 *       one: O dies (1 OOM)
 *   t=5 B frees its 400 (cached); t=6 B allocs 500: within its limit (800) only after
 *       its cache goes; the device has 1024 - 600 = 424; G is never asked: B dies
 * G completes with no OOM and never released anything. */
static void test_share_requests(void)
{
    gm_event o[] = {ev_alloc(0, 1, 200 * MiB), ev_free(1, 1), ev_alloc(4, 2, 100 * MiB),
                    ev_free(50, 2)};
    gm_event b[] = {ev_alloc(2, 1, 400 * MiB), ev_free(5, 1), ev_alloc(6, 2, 500 * MiB),
                    ev_free(50, 2)};
    gm_event g[] = {ev_alloc(3, 1, 600 * MiB), ev_free(60, 1)};
    gm_tenant_spec t[3] = {
        {.path = "g",
         .events = g,
         .n_events = 2,
         .repeat = 1,
         .cls = GM_CLASS_GUARANTEED,
         .request_bytes = 600 * MiB},
        {.path = "b",
         .events = b,
         .n_events = 4,
         .repeat = 1,
         .request_bytes = 200 * MiB,
         .limit_bytes = 800 * MiB},
        {.path = "o", .events = o, .n_events = 4, .repeat = 1},
    };
    gm_sim_config c;
    config(&c, t, 3, GiB);
    gm_sim_result *r;
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_simulate(&c, &r, &err), GM_OK);
    CU_ASSERT_EQUAL(r->share, GM_SHARE_REQUESTS); /* the default when a class is given */
    CU_ASSERT_EQUAL(r->t[0].cls, GM_CLASS_GUARANTEED);
    CU_ASSERT_EQUAL(r->t[0].limit_bytes, 600 * MiB);  /* a guaranteed limit is its request */
    CU_ASSERT_EQUAL(r->t[1].cls, GM_CLASS_BURSTABLE); /* derived: request < limit */
    CU_ASSERT_EQUAL(r->t[2].cls, GM_CLASS_OPPORTUNISTIC);
    CU_ASSERT_EQUAL(r->t[0].status, GM_TENANT_COMPLETED);
    CU_ASSERT_EQUAL(r->t[0].m.n_oom, 0);
    CU_ASSERT_EQUAL(r->t[0].scope_released_bytes, 0);
    CU_ASSERT_EQUAL(r->t[2].scope_released_bytes, 200 * MiB);
    CU_ASSERT_EQUAL(r->t[1].scope_rescues, 1);
    CU_ASSERT_EQUAL(r->t[2].status, GM_TENANT_ABORTED);
    CU_ASSERT_EQUAL(r->t[2].abort_t_ns, 4);
    CU_ASSERT_EQUAL(r->t[2].m.n_oom, 1);
    CU_ASSERT_EQUAL(r->t[1].status, GM_TENANT_ABORTED);
    CU_ASSERT_EQUAL(r->t[1].abort_t_ns, 6);
    CU_ASSERT_EQUAL(r->t[1].m.ooms[0].size, 500 * MiB);
    CU_ASSERT_EQUAL(r->peak_device_used, 1000 * MiB);
    gm_sim_result_free(r);

    /* the same with classes ignored (--share none, --scope self): nothing is
     * held for G, B's 400 fits beside O's cache at t=2 (824 free), and at t=3
     * G finds 1024 - 200 - 400 = 424 MiB for its 600: the guaranteed tenant dies */
    c.share = GM_SHARE_NONE;
    CU_ASSERT_EQUAL_FATAL(gm_simulate(&c, &r, &err), GM_OK);
    CU_ASSERT_EQUAL(r->t[0].status, GM_TENANT_ABORTED);
    CU_ASSERT_EQUAL(r->t[0].abort_t_ns, 3);
    CU_ASSERT_EQUAL(r->t[1].scope_rescues, 0);
    gm_sim_result_free(r);

    /* Kubernetes' rules: a request above the limit, a guaranteed tenant whose
     * limit differs, an opportunistic one with a request are refused */
    c.share = GM_SHARE_AUTO;
    t[1].request_bytes = 900 * MiB;
    CU_ASSERT_EQUAL(gm_simulate(&c, &r, &err), GM_EUSAGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "b: --request is more than --limit"));
    t[1].request_bytes = 200 * MiB;
    t[0].limit_bytes = 700 * MiB;
    CU_ASSERT_EQUAL(gm_simulate(&c, &r, &err), GM_EUSAGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "g: a guaranteed tenant's --limit is its --request"));
    t[0].limit_bytes = 0;
    t[2].cls = GM_CLASS_OPPORTUNISTIC;
    t[2].request_bytes = MiB;
    CU_ASSERT_EQUAL(gm_simulate(&c, &r, &err), GM_EUSAGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "o: an opportunistic tenant has no request"));
    t[2].request_bytes = 0;
    /* requests that do not fit together are not placed (admission) */
    t[1].request_bytes = 500 * MiB;
    CU_ASSERT_EQUAL(gm_simulate(&c, &r, &err), GM_EOOM);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "requests and contexts add up to 1.07 GiB"));
}

/* --share hard-cap: each tenant capped at its limit (HAMi, MPS), admission
 * by the caps. G (a request alone: capped at it) 600 MiB, B limit 300, O limit 100 = 1000 MiB <= 1
 * GiB: placed. O's 200 MiB at t=0 is over its cap (O dies at t=0), B's 400 at t=2 over its own (B
 * dies at t=2), G's 600 fits. Without O's cap it would take the whole device: not placed. */
static void test_share_hard_cap(void)
{
    gm_event o[] = {ev_alloc(0, 1, 200 * MiB), ev_free(1, 1)};
    gm_event b[] = {ev_alloc(2, 1, 400 * MiB), ev_free(5, 1)};
    gm_event g[] = {ev_alloc(3, 1, 600 * MiB), ev_free(60, 1)};
    gm_tenant_spec t[3] = {
        {.path = "g", .events = g, .n_events = 2, .repeat = 1, .request_bytes = 600 * MiB},
        {.path = "b",
         .events = b,
         .n_events = 2,
         .repeat = 1,
         .request_bytes = 200 * MiB,
         .limit_bytes = 300 * MiB},
        {.path = "o",
         .events = o,
         .n_events = 2,
         .repeat = 1,
         .cls = GM_CLASS_OPPORTUNISTIC,
         .limit_bytes = 100 * MiB},
    };
    gm_sim_config c;
    config(&c, t, 3, GiB);
    c.share = GM_SHARE_HARD_CAP;
    gm_sim_result *r;
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_simulate(&c, &r, &err), GM_OK);
    CU_ASSERT_EQUAL(r->t[0].cls, GM_CLASS_BURSTABLE); /* a request alone (Kubernetes) ... */
    CU_ASSERT_EQUAL(r->t[0].limit_bytes, 0);          /* ... capped at it under hard caps */
    CU_ASSERT_EQUAL(r->t[0].status, GM_TENANT_COMPLETED);
    CU_ASSERT_EQUAL(r->t[1].abort_t_ns, 2);
    CU_ASSERT_EQUAL(r->t[1].m.n_oom, 1);
    CU_ASSERT_EQUAL(r->t[2].status, GM_TENANT_ABORTED);
    CU_ASSERT_EQUAL(r->t[2].abort_t_ns, 0);
    CU_ASSERT_EQUAL(r->device.n_oom, 2);
    gm_sim_result_free(r);
    t[2].limit_bytes = 0;
    CU_ASSERT_EQUAL(gm_simulate(&c, &r, &err), GM_EOOM);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "caps and contexts add up to 1.88 GiB"));
}

/* --mps: one context for all tenants. Three tenants of 250 MiB each, held
 * together, with 100 MiB of context each on a 1 GiB device: 750 + 300 =
 * 1050 MiB, the third OOMs; under MPS 750 + 100 = 850 fits. A --limit is
 * then a hard cap (CUDA_MPS_PINNED_DEVICE_MEM_LIMIT): 200 MiB stops a 250. */
static void test_mps(void)
{
    gm_event a[] = {ev_alloc(0, 1, 250 * MiB), ev_free(10, 1)};
    gm_event b[] = {ev_alloc(1, 1, 250 * MiB), ev_free(10, 1)};
    gm_event d[] = {ev_alloc(2, 1, 250 * MiB), ev_free(10, 1)};
    gm_tenant_spec t[3] = {
        {.path = "a", .events = a, .n_events = 2, .repeat = 1},
        {.path = "b", .events = b, .n_events = 2, .repeat = 1},
        {.path = "d", .events = d, .n_events = 2, .repeat = 1},
    };
    gm_sim_config c;
    config(&c, t, 3, GiB);
    c.overhead_bytes = 100 * MiB;
    gm_sim_result *r;
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_simulate(&c, &r, &err), GM_OK);
    CU_ASSERT_EQUAL(r->t[2].status, GM_TENANT_ABORTED);
    CU_ASSERT_EQUAL(r->t[2].m.ooms[0].device_used, 800 * MiB); /* 500 + 3 contexts */
    gm_sim_result_free(r);
    c.mps = 1;
    CU_ASSERT_EQUAL_FATAL(gm_simulate(&c, &r, &err), GM_OK);
    CU_ASSERT_EQUAL(gm_sim_completed(r), 3);
    CU_ASSERT_EQUAL(r->peak_device_used, 850 * MiB);
    CU_ASSERT_EQUAL(r->share, GM_SHARE_NONE);
    gm_sim_result_free(r);
    t[1].limit_bytes = 200 * MiB;
    CU_ASSERT_EQUAL_FATAL(gm_simulate(&c, &r, &err), GM_OK);
    CU_ASSERT_EQUAL(r->t[1].status, GM_TENANT_ABORTED);
    CU_ASSERT_EQUAL(r->t[1].m.ooms[0].limit, 200 * MiB);
    CU_ASSERT_EQUAL(r->t[0].status, GM_TENANT_COMPLETED);
    gm_sim_result_free(r);
    c.share = GM_SHARE_REQUESTS; /* MPS holds no requests */
    CU_ASSERT_EQUAL(gm_simulate(&c, &r, &err), GM_EUSAGE);
}

/* no_device_stats skips PyTorch's memory_stats() and nothing else: a
 * random trace (frees deferred by free_requested among them, OOMs skipped)
 * gives the same run with and without them, under two policies. */
static void test_no_device_stats(void)
{
    enum { N = 20000 };
    gm_event *ev = calloc(2 * N + N / 4, sizeof *ev);
    uint64_t live[64] = {0};
    size_t n = 0;
    unsigned x = 12345;
    for (uint64_t t = 1; t <= N; t++) {
        x = x * 1103515245u + 12345u;
        size_t k = (x >> 8) % 64;
        if (live[k]) { /* free it, sometimes announced first */
            if ((x >> 20) % 4 == 0)
                ev[n++] = (gm_event){.t_ns = 10 * t, .addr = live[k], .op = GM_OP_FREE_REQUESTED};
            ev[n++] = ev_free(10 * t + 5, live[k]);
            live[k] = 0;
        } else {
            static const uint64_t sizes[] = {512, 4096, 700 * 1024, 3 * MiB, 12 * MiB, 48 * MiB};
            live[k] = (k + 1) << 32 | t << 12;
            ev[n++] = ev_alloc(10 * t, live[k], sizes[(x >> 16) % 6] + (x >> 24));
        }
    }
    static const char *const pol[] = {"pytorch", "lru"};
    for (int p = 0; p < 2; p++) {
        gm_sim_result *r[2] = {NULL, NULL};
        for (int off = 0; off < 2; off++) {
            gm_tenant_spec t = {.path = "random", .events = ev, .n_events = n, .repeat = 1};
            gm_sim_config c;
            config(&c, &t, 1, 400 * MiB);
            c.policy = pol[p];
            c.on_oom_skip = 1;
            c.no_device_stats = off;
            gm_err err = {0};
            CU_ASSERT_EQUAL_FATAL(gm_simulate(&c, &r[off], &err), GM_OK);
        }
        const gm_tenant_result *a = &r[0]->t[0], *b = &r[1]->t[0];
        CU_ASSERT_EQUAL(a->has_stats, 1);
        CU_ASSERT_EQUAL(b->has_stats, 0);
        CU_ASSERT(a->stats.allocation[GM_STAT_ALL].allocated > 0); /* they were kept */
        CU_ASSERT(r[0]->device.n_oom > 0);                         /* OOMs happened */
        CU_ASSERT_EQUAL(r[0]->device.n_oom, r[1]->device.n_oom);
        CU_ASSERT_EQUAL(r[0]->device.peak_r, r[1]->device.peak_r);
        CU_ASSERT_EQUAL(r[0]->device.peak_a, r[1]->device.peak_a);
        CU_ASSERT_DOUBLE_EQUAL(r[0]->device.int_a, r[1]->device.int_a, 0);
        CU_ASSERT_DOUBLE_EQUAL(r[0]->device.int_r, r[1]->device.int_r, 0);
        CU_ASSERT_EQUAL(memcmp(&a->c, &b->c, sizeof a->c), 0); /* every counter */
        CU_ASSERT_STRING_EQUAL(a->trace_hash, b->trace_hash);
        gm_sim_result_free(r[0]);
        gm_sim_result_free(r[1]);
    }
    free(ev);
}

/* An allocation hook that records nothing: with it the engine takes
 * every event through step(), without it through run_plain(). */
static void no_hook(void *ctx, int tenant, uint64_t index, const gm_event *e, gm_alloc *a,
                    uint64_t h)
{
    (void)tenant, (void)index, (void)e, (void)a, (void)h;
    ++*(size_t *)ctx;
}

static void count_progress(void *ctx, uint64_t events)
{
    uint64_t *v = ctx;
    v[v[0] + 1 < 16 ? ++v[0] : 0] = events;
}

/* Random allocations and frees over 512 slots (sizes from 512 B to 48 MiB,
 * every time step 100 ns from t0 on, seed x) into ev[*n..end): those live
 * at the end stay live. Returns the allocations. */
static size_t random_events(gm_event *ev, size_t *n, size_t end, uint64_t t0, unsigned x)
{
    uint64_t live[512] = {0};
    size_t allocs = 0;
    for (uint64_t t = t0; *n < end; t++) {
        x = x * 1103515245u + 12345u;
        size_t k = (x >> 8) % 512;
        if (live[k]) {
            ev[(*n)++] = ev_free(100 * t, live[k]);
            live[k] = 0;
        } else {
            static const uint64_t sizes[] = {512, 4096, 700 * 1024, 3 * MiB, 12 * MiB, 48 * MiB};
            live[k] = (k + 1) << 32 | t << 12;
            ev[(*n)++] = ev_alloc(100 * t, live[k], sizes[(x >> 16) % 6] + (x >> 22));
            allocs++;
        }
    }
    return allocs;
}

/* run_plain() (one tenant, allocations by id) does what step() does:
 * the same result, OOM for OOM and timeline bucket for bucket, and the
 * same progress reports, with OOMs that end the run or are skipped, a
 * policy with timer ticks, --repeat, and ids that need the slots to grow.
 * step() is forced by an allocation hook, which the plain path does not
 * take; the hook also shows that every allocation went through it. */
static void test_plain_path_is_step(void)
{
    enum { N = 600000 }; /* twice over: more than 2^20 events, a progress report */
    gm_event *ev = malloc(N * sizeof *ev);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ev);
    size_t n = 0;
    size_t allocs = random_events(ev, &n, N, 1, 777);
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_ids_assign(ev, n, &err), GM_OK);
    gm_trace_meta meta;
    gm_trace_meta_init(&meta);
    meta.dense_ids = 1;
    static const struct {
        const char *policy;
        uint64_t capacity;
        int skip, repeat;
    } cases[] = {
        {"pytorch", 80 * GiB, 0, 2},   {"pytorch", 3 * GiB, 0, 1}, {"pytorch", 3 * GiB, 1, 1},
        {"predictive", 3 * GiB, 1, 1}, {"oracle", 4 * GiB, 1, 2},  {"lru", 80 * GiB, 0, 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gm_sim_result *r[2] = {NULL, NULL};
        uint64_t reports[2][16] = {{0}};
        size_t hooked[2] = {0, 0};
        for (int forced = 0; forced < 2; forced++) {
            gm_tenant_spec t = {.path = "plain",
                                .events = ev,
                                .n_events = n,
                                .meta = &meta,
                                .repeat = (uint32_t)cases[i].repeat};
            gm_sim_config c;
            config(&c, &t, 1, cases[i].capacity);
            c.policy = cases[i].policy;
            c.on_oom_skip = cases[i].skip;
            c.progress = count_progress;
            c.progress_ctx = reports[forced];
            if (forced) {
                c.alloc_hook = no_hook;
                c.alloc_hook_ctx = &hooked[forced];
            }
            CU_ASSERT_EQUAL_FATAL(gm_simulate(&c, &r[forced], &err), GM_OK);
        }
        const gm_tenant_result *a = &r[0]->t[0], *b = &r[1]->t[0];
        CU_ASSERT(hooked[1] > 0);
        CU_ASSERT(hooked[1] <= allocs * (size_t)cases[i].repeat);
        CU_ASSERT_EQUAL(r[0]->events, r[1]->events);
        CU_ASSERT_EQUAL(a->status, b->status);
        CU_ASSERT_EQUAL(a->events_done, b->events_done);
        CU_ASSERT(same_metrics(&a->m, &b->m));
        CU_ASSERT(same_metrics(&r[0]->device, &r[1]->device));
        CU_ASSERT_EQUAL(memcmp(&a->c, &b->c, sizeof a->c), 0); /* every counter */
        CU_ASSERT_EQUAL(r[0]->peak_device_used, r[1]->peak_device_used);
        CU_ASSERT_EQUAL(a->peak_torch_allocated_bytes, b->peak_torch_allocated_bytes);
        CU_ASSERT_STRING_EQUAL(a->trace_hash, b->trace_hash);
        CU_ASSERT_EQUAL(memcmp(reports[0], reports[1], sizeof reports[0]), 0);
        if (cases[i].capacity < 80 * GiB) CU_ASSERT(a->m.n_oom > 0); /* the OOM paths ran */
        if (cases[i].repeat > 1) CU_ASSERT(reports[0][0] > 0);       /* 1.2 M events: reported */
        gm_sim_result_free(r[0]);
        gm_sim_result_free(r[1]);
    }
    gm_trace_meta_free(&meta);
    free(ev);
}

static void hash_call(void *ctx, int tenant, uint64_t event_index, const gm_seg_event *ev)
{
    uint64_t *h = ctx,
             v[] = {(uint64_t)tenant, event_index, (uint64_t)ev->op, ev->addr, ev->size, ev->t_ns};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        h[0] = (h[0] ^ v[i]) * 0x100000001b3ull;
    h[1]++;
}

/* The trace hash as FORMAT.md's reader gives the events: per chunk of
 * GM_TRACE_CHUNK_EVENTS, four lanes (t_ns; addr; size; stream with op,
 * category and phase in its top bytes) each mixed event by event, their
 * finals folded into the hash that starts from the source. Written out
 * here the plain way, against gm_trace_hash_events and what runs report:
 * from memory (chunks hashed two at a time as the run reads them),
 * fast-forwarded or not, aborted by an OOM (the rest hashed after), and
 * from a file. */
static void ref_trace_hash(const char *source, const gm_event *ev, size_t n, char out[17])
{
    gm_hash h;
    gm_hash_init(&h);
    gm_hash_bytes(&h, source, strlen(source));
    for (size_t i = 0; i < n; i += GM_TRACE_CHUNK_EVENTS) {
        gm_hash lane[4];
        for (int k = 0; k < 4; k++)
            gm_hash_init(&lane[k]);
        for (size_t j = i; j < n && j < i + GM_TRACE_CHUNK_EVENTS; j++) {
            const gm_event *e = &ev[j];
            gm_hash_u64(&lane[0], e->t_ns);
            gm_hash_u64(&lane[1], e->addr);
            gm_hash_u64(&lane[2], e->size);
            gm_hash_u64(&lane[3], e->stream ^ (uint64_t)e->op << 56 ^ (uint64_t)e->category << 48 ^
                                      (uint64_t)e->phase << 40);
        }
        for (int k = 0; k < 4; k++)
            gm_hash_u64(&h, gm_hash_final(&lane[k]));
    }
    snprintf(out, 17, "%016llx", (unsigned long long)gm_hash_final(&h));
}

static void test_trace_hash(void)
{
    enum { N = 5 * GM_TRACE_CHUNK_EVENTS + 1234 }; /* an even chunk last, alone */
    gm_event *ev = malloc(N * sizeof *ev);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ev);
    size_t n = 0;
    random_events(ev, &n, N, 1, 4242);
    for (size_t i = 0; i < n; i++) { /* every byte of the fourth lane moves */
        ev[i].category = (uint8_t)(i % GM_CAT_COUNT);
        ev[i].phase = (uint8_t)(i / 7 % GM_PHASE_COUNT);
        ev[i].stream = i / 1000 % 3;
    }
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_ids_assign(ev, n, &err), GM_OK);
    char want[17], got[17];
    ref_trace_hash("synthetic:test", ev, n, want);
    for (int simd = 0; simd < 2; simd++) { /* the portable loop, and the CPU's vectors */
        gm_trace_hash_simd(simd);
        gm_trace_hash_events("synthetic:test", ev, n, got);
        CU_ASSERT_STRING_EQUAL(got, want);
        gm_trace_hash_events("synthetic:test", ev, 3, got); /* fewer than a chunk */
        char few[17];
        ref_trace_hash("synthetic:test", ev, 3, few);
        CU_ASSERT_STRING_EQUAL(got, few);
    }
    gm_trace_meta meta;
    gm_trace_meta_init(&meta);
    CU_ASSERT_EQUAL_FATAL(gm_trace_meta_set(&meta.source, "synthetic:test"), GM_OK);
    meta.dense_ids = 1;
    const char *path = write_trace("hash.h5", ev, n, NULL, 0, 0);
    static const struct {
        int file, no_ff, simd;
        uint64_t capacity;
    } cases[] = {{0, 0, 1, 80 * GiB}, {0, 1, 1, 80 * GiB}, {0, 0, 1, 2 * GiB},
                 {1, 0, 1, 80 * GiB}, {0, 0, 0, 80 * GiB}, {1, 0, 0, 80 * GiB}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gm_trace_hash_simd(cases[i].simd);
        gm_tenant_spec t = {.path = path, .repeat = 2};
        if (!cases[i].file) {
            t.events = ev;
            t.n_events = n;
            t.meta = &meta;
        }
        gm_sim_config c;
        config(&c, &t, 1, cases[i].capacity);
        c.no_fast_forward = cases[i].no_ff;
        gm_sim_result *r = NULL;
        CU_ASSERT_EQUAL_FATAL(gm_simulate(&c, &r, &err), GM_OK);
        CU_ASSERT_STRING_EQUAL(r->t[0].trace_hash, want);
        if (cases[i].capacity < 80 * GiB) CU_ASSERT_EQUAL(r->t[0].status, GM_TENANT_ABORTED);
        gm_sim_result_free(r);
    }
    gm_trace_hash_simd(1);
    /* copies in memory: the first of each (events, source) hashes them for
     * the others (engine.c, hash_of), here with a copy of another source
     * between them, on a device with room and on one where they abort */
    gm_trace_meta other;
    gm_trace_meta_init(&other);
    CU_ASSERT_EQUAL_FATAL(gm_trace_meta_set(&other.source, "synthetic:other"), GM_OK);
    other.dense_ids = 1;
    char want_other[17];
    ref_trace_hash("synthetic:other", ev, n, want_other);
    const uint64_t caps[] = {80 * GiB, 2 * GiB};
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
        gm_tenant_spec t[4];
        for (size_t k = 0; k < 4; k++)
            t[k] = (gm_tenant_spec){.events = ev,
                                    .n_events = n,
                                    .meta = k == 1 ? &other : &meta,
                                    .offset_ns = k,
                                    .repeat = 1};
        gm_sim_config c;
        config(&c, t, 4, caps[i]);
        gm_sim_result *r = NULL;
        CU_ASSERT_EQUAL_FATAL(gm_simulate(&c, &r, &err), GM_OK);
        for (size_t k = 0; k < 4; k++)
            CU_ASSERT_STRING_EQUAL(r->t[k].trace_hash, k == 1 ? want_other : want);
        gm_sim_result_free(r);
    }
    gm_trace_meta_free(&other);
    { /* an error in the first tenant's spec ends the run with it, the others unopened */
        gm_tenant_spec t[2] = {{.events = ev, .n_events = n, .meta = &meta, .repeat = 0},
                               {.events = ev, .n_events = n, .meta = &meta, .repeat = 1}};
        gm_sim_config c;
        config(&c, t, 2, 80 * GiB);
        gm_sim_result *r = NULL;
        gm_err e2 = {0};
        CU_ASSERT_EQUAL(gm_simulate(&c, &r, &e2), GM_EINVAL);
        CU_ASSERT_PTR_NULL(r);
        CU_ASSERT_PTR_NOT_NULL(strstr(e2.msg, "--repeat must be at least 1"));
    }
    unlink(path);
    gm_trace_meta_free(&meta);
    free(ev);
}

/* Two runs of the same tenants that must agree (r[0], r[1]; calls: each
 * one's driver calls through hash_call, some made): the driver calls in
 * order, the events, the device's series and peak use, and every tenant's
 * status, events, figures, counters, statistics and trace hash. */
static void same_runs(gm_sim_result *const r[2], const uint64_t calls[2][2])
{
    CU_ASSERT(calls[0][1] > 0);
    CU_ASSERT_EQUAL(calls[0][0], calls[1][0]);
    CU_ASSERT_EQUAL(calls[0][1], calls[1][1]);
    CU_ASSERT_EQUAL(r[0]->events, r[1]->events);
    CU_ASSERT(same_metrics(&r[0]->device, &r[1]->device));
    CU_ASSERT_EQUAL(r[0]->peak_device_used, r[1]->peak_device_used);
    CU_ASSERT_EQUAL_FATAL(r[0]->n_tenants, r[1]->n_tenants);
    for (size_t k = 0; k < r[0]->n_tenants; k++) {
        const gm_tenant_result *a = &r[0]->t[k], *b = &r[1]->t[k];
        CU_ASSERT_EQUAL(a->status, b->status);
        CU_ASSERT_EQUAL(a->events_done, b->events_done);
        CU_ASSERT(same_metrics(&a->m, &b->m));
        CU_ASSERT_EQUAL(memcmp(&a->c, &b->c, sizeof a->c), 0);
        CU_ASSERT_EQUAL(a->has_stats, b->has_stats);
        CU_ASSERT_EQUAL(memcmp(&a->stats, &b->stats, sizeof a->stats), 0);
        CU_ASSERT_EQUAL(a->peak_torch_allocated_bytes, b->peak_torch_allocated_bytes);
        CU_ASSERT_STRING_EQUAL(a->trace_hash, b->trace_hash);
        CU_ASSERT(same_report(a->policy_report, b->policy_report));
    }
}

/* A tenant that ends with blocks live: the engine skips the model's frees
 * of them where they are local (gm_alloc_ops.free_is_local; the model is
 * destroyed next), and every result is what freeing them gives
 * (free_at_end): both tenants' figures, statistics and status, the device
 * series, every driver call. Two tenants, the second ending (or, short of
 * memory, aborted by an OOM) while the first goes on; 20 000 small blocks
 * live between free ones before a random stretch that leaves ~256 live;
 * the models that say their frees are local and one that does not. */
static void test_free_at_end(void)
{
    enum { PREFIX = 20000, N = 60000 };
    gm_event *ev = malloc((PREFIX * 3 / 2 + N) * sizeof *ev);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ev);
    size_t n = 0;
    for (uint64_t i = 0; i < PREFIX; i++)
        ev[n++] = ev_alloc(1 + i, (1ull << 40) + 512 * i, 512);
    for (uint64_t i = 0; i < PREFIX; i += 2)
        ev[n++] = ev_free(PREFIX + 1 + i, (1ull << 40) + 512 * i);
    random_events(ev, &n, PREFIX * 3 / 2 + N, 2 * PREFIX, 4242);
    static const struct {
        const char *allocator, *policy;
        uint64_t capacity;
    } cases[] = {
        {"pytorch", "pytorch", 80 * GiB},  {"pytorch", "defrag", 80 * GiB},
        {"pytorch", "lru", 5 * GiB},       {"tf-bfc", "pytorch", 80 * GiB},
        {"rmm-pool", "pytorch", 80 * GiB}, {"direct", "pytorch", 80 * GiB},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gm_sim_result *r[2] = {NULL, NULL};
        uint64_t calls[2][2] = {{0}};
        for (int model_frees = 0; model_frees < 2; model_frees++) {
            gm_tenant_spec t[2] = {
                {.path = "long", .events = ev, .n_events = n, .repeat = 1},
                {.path = "short", .events = ev, .n_events = n / 2, .repeat = 1, .offset_ns = 7},
            };
            gm_sim_config c;
            config(&c, t, 2, cases[i].capacity);
            c.allocator = cases[i].allocator;
            c.policy = cases[i].policy;
            c.free_at_end = model_frees;
            c.seg_hook = hash_call;
            c.seg_hook_ctx = calls[model_frees];
            gm_err err = {0};
            int rc = gm_simulate(&c, &r[model_frees], &err);
            if (rc)
                fprintf(stderr, "\n  %s/%s: %s\n", cases[i].allocator, cases[i].policy, err.msg);
            CU_ASSERT_EQUAL_FATAL(rc, GM_OK);
        }
        same_runs(r, calls);
        if (cases[i].capacity < 80 * GiB) /* short of memory: an OOM ended a tenant */
            CU_ASSERT(r[0]->t[0].status == GM_TENANT_ABORTED ||
                      r[0]->t[1].status == GM_TENANT_ABORTED);
        gm_sim_result_free(r[0]);
        gm_sim_result_free(r[1]);
    }
    free(ev);
}

/* Several tenants: stretches (each tenant's events that touch no other
 * run ahead, engine.c) give what one event at a time in time order gives
 * (gm_sim_config.no_stretch): the device's series bucket for bucket with
 * its largest-free samples, every tenant's figures, statistics and status,
 * every driver call in order, the progress reports. Copies of a random
 * stretch (3 chunks, by id) at offsets that interleave them (two at equal
 * times), with room and short of memory (OOMs that abort or are skipped),
 * --repeat, kept statistics, 64 tenants, lru, and a policy that turns
 * stretches off (predictive: timer ticks). */
static void test_stretch_is_step(void)
{
    enum { N = 150000 };
    gm_event *ev = malloc(N * sizeof *ev);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ev);
    size_t n = 0;
    random_events(ev, &n, N, 1, 31337);
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_ids_assign(ev, n, &err), GM_OK);
    gm_trace_meta meta;
    gm_trace_meta_init(&meta);
    meta.dense_ids = 1;
    static const struct {
        const char *policy;
        size_t tenants, events;
        uint64_t capacity;
        int skip, repeat, stats, stretched;
        int share;      /* enum gm_share_mode (0: AUTO, here none) */
        uint64_t limit; /* each tenant's --limit */
    } cases[] = {
        {"pytorch", 2, N, 80 * GiB, 0, 1, 0, 1, 0, 0},
        {"pytorch", 5, N, 80 * GiB, 0, 2, 1, 1, 0, 0},
        {"pytorch", 3, N, 7 * GiB, 0, 1, 0, 1, 0, 0},
        {"pytorch", 3, N, 7 * GiB, 1, 1, 0, 1, 0, 0},
        {"pytorch", 64, 20000, 1ull << 50, 0, 1, 0, 1, 0, 0},
        {"lru", 3, N, 7 * GiB, 1, 1, 0, 1, 0, 0},
        /* timer ticks: a stretch stops before its tenant's next tick, and
         * the others' due ticks fire before a merged event */
        {"predictive", 3, N, 7 * GiB, 1, 1, 0, 1, 0, 0},
        {"predictive", 4, N, 80 * GiB, 0, 2, 0, 1, 0, 0},
        {"oracle", 3, N, 7 * GiB, 1, 1, 0, 1, 0, 0},
        {"lru:threshold=0.5", 3, N, 7 * GiB, 1, 1, 0, 1, 0, 0},
        /* hard caps (HAMi): each tenant's own cap, no one asked for memory */
        {"pytorch", 3, N, 80 * GiB, 1, 1, 0, 1, GM_SHARE_HARD_CAP, 2 * GiB},
        {"predictive", 3, N, 80 * GiB, 1, 1, 0, 1, GM_SHARE_HARD_CAP, 2 * GiB},
        /* requests, every tenant guaranteed: withheld requests, no one asked */
        {"pytorch", 3, N, 7 * GiB, 1, 1, 0, 1, GM_SHARE_REQUESTS, 2 * GiB},
        {"predictive", 3, N, 7 * GiB, 1, 1, 0, 1, GM_SHARE_REQUESTS, 2 * GiB},
        /* requests with a burstable tenant: it may be asked, no stretch */
        {"pytorch", 3, N, 7 * GiB, 1, 1, 0, 0, GM_SHARE_REQUESTS, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gm_sim_result *r[2] = {NULL, NULL};
        uint64_t calls[2][2] = {{0}}, reports[2][16] = {{0}};
        gm_tenant_spec t[64];
        size_t k = cases[i].tenants;
        for (int off = 0; off < 2; off++) {
            for (size_t j = 0; j < k; j++)
                t[j] = (gm_tenant_spec){.path = "copy",
                                        .events = ev,
                                        .n_events = cases[i].events - 97 * j,
                                        .meta = &meta,
                                        .repeat = (uint32_t)cases[i].repeat,
                                        .offset_ns = j == 1 ? 0 : 3700 * j,
                                        .limit_bytes = cases[i].limit};
            for (size_t j = 0; cases[i].share == GM_SHARE_REQUESTS && j < k; j++) {
                /* guaranteed: request = limit; without a limit, tenant 0
                 * is burstable (a request of 1 GiB, no limit) */
                t[j].request_bytes = cases[i].limit ? cases[i].limit : 1 * GiB;
                t[j].cls = cases[i].limit || j ? GM_CLASS_GUARANTEED : GM_CLASS_BURSTABLE;
                if (!cases[i].limit && j) t[j].limit_bytes = t[j].request_bytes;
            }
            gm_sim_config c;
            config(&c, t, k, cases[i].capacity);
            c.policy = cases[i].policy;
            c.on_oom_skip = cases[i].skip;
            c.no_device_stats = !cases[i].stats;
            c.no_stretch = off;
            c.share = cases[i].share;
            c.seg_hook = hash_call;
            c.seg_hook_ctx = calls[off];
            c.progress = count_progress;
            c.progress_ctx = reports[off];
            CU_ASSERT_EQUAL_FATAL(gm_simulate(&c, &r[off], &err), GM_OK);
        }
        uint64_t stretched[2] = {0, 0};
        for (int off = 0; off < 2; off++)
            for (size_t j = 0; j < k; j++)
                stretched[off] += r[off]->t[j].stretched_events;
        CU_ASSERT_EQUAL(stretched[1], 0);
        if (cases[i].stretched) {
            CU_ASSERT(stretched[0] > r[0]->events / 2); /* most events ran in stretches */
        } else {
            CU_ASSERT_EQUAL(stretched[0], 0);
        }
        same_runs(r, calls);
        CU_ASSERT_EQUAL(memcmp(reports[0], reports[1], sizeof reports[0]), 0);
        CU_ASSERT(r[0]->device.ext_frag_n > 0);                /* buckets sampled the tenants */
        if (cases[i].limit) CU_ASSERT(r[0]->device.n_oom > 0); /* the caps bind */
        if (cases[i].capacity < 80 * GiB) CU_ASSERT(r[0]->device.n_oom > 0);
        if (cases[i].capacity < 80 * GiB && !cases[i].skip)
            CU_ASSERT(r[0]->t[0].status == GM_TENANT_ABORTED ||
                      r[0]->t[1].status == GM_TENANT_ABORTED ||
                      r[0]->t[2].status == GM_TENANT_ABORTED);
        gm_sim_result_free(r[0]);
        gm_sim_result_free(r[1]);
    }
    gm_trace_meta_free(&meta);
    free(ev);
}

int gm_test_register(void)
{
    CU_pSuite s = CU_add_suite("engine", NULL, NULL);
    if (!s) return CU_get_error();
    GM_ADD_TEST(s, test_interleaving);
    GM_ADD_TEST(s, test_plain_path_is_step);
    GM_ADD_TEST(s, test_free_at_end);
    GM_ADD_TEST(s, test_trace_hash);
    GM_ADD_TEST(s, test_stretch_is_step);
    GM_ADD_TEST(s, test_oom_abort_and_skip);
    GM_ADD_TEST(s, test_oom_verdicts);
    GM_ADD_TEST(s, test_repeat);
    GM_ADD_TEST(s, test_late_start_and_repeat_totals);
    GM_ADD_TEST(s, test_quota);
    GM_ADD_TEST(s, test_share_requests);
    GM_ADD_TEST(s, test_share_hard_cap);
    GM_ADD_TEST(s, test_mps);
    GM_ADD_TEST(s, test_semantic_errors);
    GM_ADD_TEST(s, test_initial_state_file);
    GM_ADD_TEST(s, test_bad_files);
    GM_ADD_TEST(s, test_bad_settings);
    GM_ADD_TEST(s, test_capacity_dependence);
    GM_ADD_TEST(s, test_no_device_stats);
    return CUE_SUCCESS;
}
