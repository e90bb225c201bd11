/*
 * test_preload.c - a study's runs replay their traces from memory
 * (study/preload.h), as they are or packed (traces/packed.h); that must be
 * the same run as from the file: same trace hash, events, peaks, driver
 * calls and OOMs, with the initial state rebuilt as live tensors or as
 * recorded, under a policy that reads the future (oracle) and one that does
 * not, and over --repeat passes; the trace hash is the preload's.
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cu.h"
#include "base/units.h"
#include "study/fit.h"
#include "study/preload.h"
#include "study/simulate.h"
#include "traces/import_torch.h"

static gm_sim_result *simulate(const gm_tenant_spec *spec, const char *policy, int initial,
                               uint64_t cap)
{
    static const gm_latency lat = GM_LATENCY_DEFAULT;
    gm_sim_config cfg = {.tenants = spec,
                         .n_tenants = 1,
                         .policy = policy,
                         .capacity_bytes = cap,
                         .overhead_bytes = GM_DEFAULT_OVERHEAD,
                         .latency = lat,
                         .initial_state = initial};
    gm_sim_result *r = NULL;
    gm_err err = {0};
    int rc = gm_simulate(&cfg, &r, &err);
    if (rc) fprintf(stderr, "simulate: %s\n", err.msg);
    CU_ASSERT_EQUAL(rc, GM_OK);
    return r;
}

static void same_runs(const char *path, uint64_t cap, int packed)
{
    gm_err err = {0};
    gm_tenant_spec file = {.path = path, .repeat = 2};
    gm_sim_config cfg = {.tenants = &file, .n_tenants = 1};
    gm_preload pre;
    /* packed: above max_events (0) */
    CU_ASSERT_EQUAL_FATAL(gm_preload_config(&cfg, &pre, packed ? 0 : GM_PRELOAD_MAX_EVENTS,
                                            GM_PRELOAD_MAX_PACKED_BYTES, &err),
                          GM_OK);
    if (packed) { /* it was loaded packed */
        CU_ASSERT_PTR_NULL(cfg.tenants[0].events);
        CU_ASSERT_PTR_NOT_NULL_FATAL(cfg.tenants[0].packed);
    } else { /* it was loaded */
        CU_ASSERT_PTR_NOT_NULL_FATAL(cfg.tenants[0].events);
        CU_ASSERT_PTR_NULL(cfg.tenants[0].packed);
    }
    CU_ASSERT_STRING_EQUAL(cfg.tenants[0].path, path); /* and keeps its name */

    static const char *const policies[] = {"pytorch", "oracle"};
    for (int initial = GM_INITIAL_LIVE; initial <= GM_INITIAL_RECORDED; initial++)
        for (size_t k = 0; k < 2; k++) {
            gm_sim_result *a = simulate(&file, policies[k], initial, cap);
            gm_sim_result *b = simulate(&cfg.tenants[0], policies[k], initial, cap);
            if (!a || !b) {
                gm_sim_result_free(a);
                gm_sim_result_free(b);
                continue;
            }
            CU_ASSERT_STRING_EQUAL(a->t[0].trace_hash, b->t[0].trace_hash);
            CU_ASSERT_EQUAL(a->events, b->events);
            CU_ASSERT_EQUAL(a->t[0].init_reserved_bytes, b->t[0].init_reserved_bytes);
            CU_ASSERT_EQUAL(a->device.peak_q, b->device.peak_q);
            CU_ASSERT_EQUAL(a->device.peak_a, b->device.peak_a);
            CU_ASSERT_EQUAL(a->device.peak_r, b->device.peak_r);
            CU_ASSERT_EQUAL(a->device.n_oom, b->device.n_oom);
            CU_ASSERT_EQUAL(a->device.n_events, b->device.n_events);
            CU_ASSERT_EQUAL(a->device.int_r, b->device.int_r); /* the whole reserved curve */
            if (initial == GM_INITIAL_RECORDED) /* a warm cache: the run starts from it */
                CU_ASSERT_TRUE(a->t[0].init_reserved_bytes > 0);
            gm_sim_result_free(a);
            gm_sim_result_free(b);
        }
    /* the hash comes from the preload (computed once), not from each run:
     * the same as the run's own, and a given one is what a run reports */
    CU_ASSERT_PTR_NOT_NULL_FATAL(cfg.tenants[0].trace_hash);
    gm_tenant_spec own = cfg.tenants[0];
    own.trace_hash = NULL;
    gm_sim_result *a = simulate(&own, "pytorch", GM_INITIAL_LIVE, cap);
    own.trace_hash = "0123456789abcdef";
    gm_sim_result *b = simulate(&own, "pytorch", GM_INITIAL_LIVE, cap);
    if (a && b) {
        CU_ASSERT_STRING_EQUAL(a->t[0].trace_hash, cfg.tenants[0].trace_hash);
        CU_ASSERT_STRING_EQUAL(b->t[0].trace_hash, "0123456789abcdef");
        CU_ASSERT_EQUAL(a->device.int_r, b->device.int_r);
    }
    gm_sim_result_free(a);
    gm_sim_result_free(b);
    gm_preload_free(&pre);
}

static void same_run(const char *snapshot, uint64_t cap)
{
    char rel[256];
    snprintf(rel, sizeof rel, "tests/data/%s", snapshot);
    gm_torch_import *imp;
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_torch_import_file(gm_test_path(rel), NULL, &imp, &err), GM_OK);
    const char *path = gm_test_tmp("preload.h5");
    CU_ASSERT_EQUAL_FATAL(gm_import_trace_write(&imp->dev[0], path, NULL, &err), GM_OK);
    gm_torch_import_free(imp);

    for (int packed = 0; packed < 2; packed++)
        same_runs(path, cap, packed);
    unlink(path);
}

static void test_same_as_file(void)
{
    same_run("device-full-retry-10-streams.pickle", 80 * GM_GiB); /* warm cache, streams */
    same_run("expandable-segments-fwd.pickle", 80 * GM_GiB);      /* expandable segments */
    same_run("gpt-medium-ctx128-train.pickle", 8 * GM_GiB);       /* OOMs on 8 GiB */
}

/* A hash computed for a run (gm_trace_hash_events) is the run's own, also
 * when the metadata's source is longer than a result keeps of it. */
static void test_hash_of_a_long_source(void)
{
    gm_event ev[] = {{.t_ns = 0, .addr = 1, .size = 4096, .op = GM_OP_ALLOC},
                     {.t_ns = 10, .addr = 1, .op = GM_OP_FREE}};
    char longer[200];
    memset(longer, 'x', sizeof longer - 1);
    longer[sizeof longer - 1] = 0;
    const char *sources[] = {"synthetic:test", longer};
    for (size_t i = 0; i < 2; i++) {
        gm_trace_meta m;
        gm_trace_meta_init(&m);
        CU_ASSERT_EQUAL_FATAL(gm_trace_meta_set(&m.source, sources[i]), GM_OK);
        gm_tenant_spec t = {.path = "mem", .events = ev, .n_events = 2, .meta = &m, .repeat = 1};
        gm_sim_result *r = simulate(&t, "pytorch", GM_INITIAL_LIVE, GM_GiB);
        char h[17];
        gm_trace_hash_events(m.source, ev, 2, h);
        if (r) CU_ASSERT_STRING_EQUAL(r->t[0].trace_hash, h);
        gm_sim_result_free(r);
        gm_trace_meta_free(&m);
    }
}

/* Above the limit a trace is kept packed where that fits, else it stays on
 * disk and the runs read the file. */
static void test_large_stays_on_disk(void)
{
    gm_tenant_spec file = {.path = gm_test_path("traces/bert.h5"), .repeat = 1};
    gm_preload pre;
    gm_err err = {0};
    static const uint64_t budgets[] = {0, 1000, 64ull << 20}; /* never; too small; enough */
    for (size_t i = 0; i < 3; i++) {
        gm_sim_config cfg = {.tenants = &file, .n_tenants = 1};
        CU_ASSERT_EQUAL_FATAL(gm_preload_config(&cfg, &pre, 1000, budgets[i], &err), GM_OK);
        CU_ASSERT_PTR_NULL(cfg.tenants[0].events);
        if (i < 2) {
            CU_ASSERT_PTR_NULL(cfg.tenants[0].packed);
            CU_ASSERT_PTR_NULL(cfg.tenants[0].trace_hash); /* a run on disk hashes its own */
        } else {
            CU_ASSERT_PTR_NOT_NULL(cfg.tenants[0].packed);
            CU_ASSERT_EQUAL(cfg.tenants[0].n_events, 21164);
        }
        gm_preload_free(&pre);
    }
    /* a file that cannot be read stays a path: the run reports its error */
    gm_tenant_spec missing = {.path = "/nonexistent/x.h5", .repeat = 1};
    gm_sim_config cfg = {.tenants = &missing, .n_tenants = 1};
    CU_ASSERT_EQUAL_FATAL(
        gm_preload_config(&cfg, &pre, GM_PRELOAD_MAX_EVENTS, GM_PRELOAD_MAX_PACKED_BYTES, &err),
        GM_OK);
    CU_ASSERT_PTR_NULL(cfg.tenants[0].events);
    CU_ASSERT_PTR_NULL(cfg.tenants[0].packed);
    gm_preload_free(&pre);
}

/* Tenants of one trace share its preload, and run as from the files. */
static void test_copies_share(void)
{
    const char *bert = gm_test_path("traces/bert.h5");
    for (int packed = 0; packed < 2; packed++) {
        gm_tenant_spec two[2] = {{.path = bert, .repeat = 1},
                                 {.path = bert, .repeat = 1, .offset_ns = 20000000}};
        gm_sim_config cfg = {.tenants = two, .n_tenants = 2};
        gm_preload pre;
        gm_err err = {0};
        CU_ASSERT_EQUAL_FATAL(gm_preload_config(&cfg, &pre, packed ? 0 : GM_PRELOAD_MAX_EVENTS,
                                                GM_PRELOAD_MAX_PACKED_BYTES, &err),
                              GM_OK);
        const gm_tenant_spec *t = cfg.tenants;
        CU_ASSERT_PTR_NOT_NULL(packed ? (const void *)t[0].packed : (const void *)t[0].events);
        CU_ASSERT_PTR_EQUAL(t[0].events, t[1].events);
        CU_ASSERT_PTR_EQUAL(t[0].packed, t[1].packed);
        CU_ASSERT_EQUAL(t[1].offset_ns, 20000000); /* its own options stay */
        static const gm_latency lat = GM_LATENCY_DEFAULT;
        gm_sim_config a = {.tenants = two,
                           .n_tenants = 2,
                           .policy = "pytorch",
                           .capacity_bytes = 8 * GM_GiB,
                           .overhead_bytes = GM_DEFAULT_OVERHEAD,
                           .latency = lat},
                      b = a;
        b.tenants = t;
        gm_sim_result *ra = NULL, *rb = NULL;
        CU_ASSERT_EQUAL(gm_simulate(&a, &ra, &err), GM_OK);
        CU_ASSERT_EQUAL(gm_simulate(&b, &rb, &err), GM_OK);
        if (ra && rb) {
            CU_ASSERT_EQUAL(ra->events, rb->events);
            CU_ASSERT_EQUAL(ra->device.peak_r, rb->device.peak_r);
            CU_ASSERT_EQUAL(ra->device.int_r, rb->device.int_r);
            CU_ASSERT_EQUAL(ra->device.n_oom, rb->device.n_oom);
            CU_ASSERT_STRING_EQUAL(ra->t[1].trace_hash, rb->t[1].trace_hash);
        }
        gm_sim_result_free(ra);
        gm_sim_result_free(rb);
        gm_preload_free(&pre);
    }
}

/* A tenant already in memory with no path (a benchmark's, a test's)
 * beside one read from a file: it keeps its events, and the file's is
 * loaded (the search for a path named again skips it; it compared its
 * NULL path before). */
static void test_in_memory_beside_a_file(void)
{
    static const gm_event ev[2] = {{.t_ns = 1, .size = 512, .addr = 0x1000, .op = GM_OP_ALLOC},
                                   {.t_ns = 2, .size = 512, .addr = 0x1000, .op = GM_OP_FREE}};
    gm_tenant_spec two[2] = {{.path = gm_test_path("traces/bert.h5"), .repeat = 1},
                             {.events = ev, .n_events = 2, .repeat = 1}};
    gm_sim_config cfg = {.tenants = two, .n_tenants = 2};
    gm_preload pre;
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(
        gm_preload_config(&cfg, &pre, GM_PRELOAD_MAX_EVENTS, GM_PRELOAD_MAX_PACKED_BYTES, &err),
        GM_OK);
    CU_ASSERT_PTR_NOT_NULL(cfg.tenants[0].events);
    CU_ASSERT_PTR_EQUAL(cfg.tenants[1].events, ev);
    CU_ASSERT_EQUAL(cfg.tenants[1].n_events, 2);
    gm_preload_free(&pre);
}

/* Searches on three threads read one packed trace at once (a cursor
 * each): the fit is the one of the trace as it is. */
static void test_packed_fit_threads(void)
{
    const char *bert = gm_test_path("traces/bert.h5");
    static char *const pol[] = {"pytorch", "lru", "predictive", "oracle"};
    gm_fit *f[2] = {NULL, NULL};
    for (int packed = 0; packed < 2; packed++) {
        gm_tenant_spec one = {.path = bert, .repeat = 1};
        static const gm_latency lat = GM_LATENCY_DEFAULT;
        gm_sim_config cfg = {.tenants = &one,
                             .n_tenants = 1,
                             .capacity_bytes = 8 * GM_GiB,
                             .overhead_bytes = GM_DEFAULT_OVERHEAD,
                             .latency = lat};
        gm_preload pre;
        gm_err err = {0};
        CU_ASSERT_EQUAL_FATAL(gm_preload_config(&cfg, &pre, packed ? 0 : GM_PRELOAD_MAX_EVENTS,
                                                GM_PRELOAD_MAX_PACKED_BYTES, &err),
                              GM_OK);
        CU_ASSERT_PTR_NOT_NULL(packed ? (const void *)cfg.tenants[0].packed
                                      : (const void *)cfg.tenants[0].events);
        CU_ASSERT_EQUAL(gm_fit_capacity(&cfg, pol, 4, 3, 0, &f[packed], &err), GM_OK);
        gm_preload_free(&pre);
    }
    for (size_t i = 0; f[0] && f[1] && i < 4; i++) {
        CU_ASSERT_EQUAL(f[0]->e[i].found, f[1]->e[i].found);
        CU_ASSERT_EQUAL(f[0]->e[i].capacity, f[1]->e[i].capacity);
        CU_ASSERT_EQUAL(f[0]->e[i].peak_reserved, f[1]->e[i].peak_reserved);
        CU_ASSERT_EQUAL(f[0]->e[i].runs, f[1]->e[i].runs);
        /* (not events_simulated: whether a follower takes its lead's run or
         * makes it first depends on the threads' timing, study/fit.c) */
    }
    gm_fit_free(f[0]);
    gm_fit_free(f[1]);
}

int gm_test_register(void)
{
    CU_pSuite s = CU_add_suite("preload", NULL, NULL);
    if (!s) return CU_get_error();
    GM_ADD_TEST(s, test_same_as_file);
    GM_ADD_TEST(s, test_hash_of_a_long_source);
    GM_ADD_TEST(s, test_large_stays_on_disk);
    GM_ADD_TEST(s, test_copies_share);
    GM_ADD_TEST(s, test_in_memory_beside_a_file);
    GM_ADD_TEST(s, test_packed_fit_threads);
    return CUE_SUCCESS;
}
