/*
 * test_policies.c - the release policies (policies/) on hand-built cases
 * whose right answer is known, --scope device, and the compare / fit
 * machinery (study/compare.c, study/fit.c): determinism across thread counts, and fit's
 * capacity C running without OOM while C - 2 MiB does not.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cu.h"
#include "same_run.h"
#include "policies/registry.h"
#include "reports/kv.h"
#include "reports/results.h"
#include "sim/engine.h"
#include "study/compare.h"
#include "study/fit.h"
#include "study/policy_list.h"
#include "study/simulate.h"
#include "traces/trace.h"

#define MiB GM_MiB
#define GiB GM_GiB
#define US 1000ull
#define MS 1000000ull

static gm_event ev_alloc(uint64_t t, uint64_t addr, uint64_t size, int cat)
{
    gm_event e = {
        .t_ns = t, .addr = addr, .size = size, .op = GM_OP_ALLOC, .category = (uint8_t)cat};
    return e;
}

static gm_event ev_free(uint64_t t, uint64_t addr)
{
    gm_event e = {.t_ns = t, .addr = addr, .op = GM_OP_FREE};
    return e;
}

static void config(gm_sim_config *c, gm_tenant_spec *t, size_t n, uint64_t capacity,
                   const char *policy)
{
    static const gm_latency lat = GM_LATENCY_DEFAULT;
    memset(c, 0, sizeof *c);
    c->tenants = t;
    c->n_tenants = n;
    c->capacity_bytes = capacity;
    c->overhead_bytes = 0;
    c->latency = lat;
    c->policy = policy;
}

/* ---------------- driving one allocator directly ---------------- */

typedef struct rig {
    gm_device *dev;
    gm_policy *pol;
    gm_alloc *a;
} rig;

static void rig_open(rig *r, uint64_t capacity, const char *policy)
{
    gm_err err = {0};
    static const gm_latency lat = GM_LATENCY_DEFAULT;
    memset(r, 0, sizeof *r);
    CU_ASSERT_EQUAL_FATAL(gm_device_model_create(capacity, &lat, &r->dev, &err), GM_OK);
    CU_ASSERT_EQUAL_FATAL(gm_policy_create(policy, &r->pol, &err), GM_OK);
    CU_ASSERT_EQUAL_FATAL(
        gm_alloc_create(gm_alloc_find("pytorch"), r->dev, "", 0, r->pol, &r->a, &err), GM_OK);
}

static void rig_close(rig *r)
{
    gm_alloc_destroy(r->a);
    gm_policy_destroy(r->pol);
    gm_device_destroy(r->dev);
}

static uint64_t rig_malloc(rig *r, uint64_t size, int cat, uint64_t now)
{
    uint64_t h = 0;
    CU_ASSERT_EQUAL(r->a->ops->malloc(r->a, size, 0, (uint8_t)cat, now, &h), GM_OK);
    return h;
}

/* Is there a segment at addr? */
static int has_seg(rig *r, uint64_t addr)
{
    gm_seg_info v[64];
    size_t n = gm_alloc_segments(r->a, v, 64);
    for (size_t i = 0; i < n && i < 64; i++)
        if (v[i].addr == addr) return 1;
    return 0;
}

/* Address of the segment that is not in `known` (the newest one). */
static uint64_t new_seg(rig *r, const uint64_t *known, size_t nk)
{
    gm_seg_info v[64];
    size_t n = gm_alloc_segments(r->a, v, 64);
    for (size_t i = 0; i < n && i < 64; i++) {
        int old = 0;
        for (size_t j = 0; j < nk; j++)
            old |= v[i].addr == known[j];
        if (!old) return v[i].addr;
    }
    return 0;
}

/* Two 20 MiB segments freed at t=3 (X) and t=4 (Y) on a 50 MiB device; a
 * 30 MiB request needs 20 MiB back. */
static void two_free_segments(rig *r, const char *policy, int cat_x, int cat_y, uint64_t *x,
                              uint64_t *y)
{
    rig_open(r, 50 * MiB, policy);
    uint64_t hx = rig_malloc(r, 20 * MiB, cat_x, 1);
    *x = new_seg(r, NULL, 0);
    uint64_t hy = rig_malloc(r, 20 * MiB, cat_y, 2);
    *y = new_seg(r, x, 1);
    r->a->ops->free(r->a, hx, 3);
    r->a->ops->free(r->a, hy, 4);
    rig_malloc(r, 30 * MiB, GM_CAT_TEMPORARY, 5);
}

static void test_lru_releases_older(void)
{
    rig r;
    uint64_t x, y;
    two_free_segments(&r, "lru", GM_CAT_ACTIVATION, GM_CAT_ACTIVATION, &x, &y);
    CU_ASSERT(!has_seg(&r, x)); /* the older one went */
    CU_ASSERT(has_seg(&r, y));  /* the newer one stays cached */
    CU_ASSERT_EQUAL(r.a->c.n_driver_free, 1);
    CU_ASSERT_EQUAL(r.a->c.released_bytes, 20 * MiB);
    rig_close(&r);
    /* PyTorch's own policy flushes both */
    two_free_segments(&r, "pytorch", GM_CAT_ACTIVATION, GM_CAT_ACTIVATION, &x, &y);
    CU_ASSERT(!has_seg(&r, x));
    CU_ASSERT(!has_seg(&r, y));
    CU_ASSERT_EQUAL(r.a->c.n_driver_free, 2);
    rig_close(&r);
}

/* Only as much as needed: 3 free segments, a request that needs 2 back. */
static void test_lru_only_as_needed(void)
{
    rig r;
    rig_open(&r, 60 * MiB, "lru");
    uint64_t h[3], s[3];
    for (int i = 0; i < 3; i++) {
        h[i] = rig_malloc(&r, 20 * MiB, GM_CAT_TEMPORARY, 1 + (uint64_t)i);
        s[i] = new_seg(&r, s, (size_t)i);
    }
    for (int i = 0; i < 3; i++)
        r.a->ops->free(r.a, h[i], 10 + (uint64_t)i);
    rig_malloc(&r, 40 * MiB, GM_CAT_TEMPORARY, 20);
    CU_ASSERT(!has_seg(&r, s[0]));
    CU_ASSERT(!has_seg(&r, s[1]));
    CU_ASSERT(has_seg(&r, s[2]));
    CU_ASSERT_EQUAL(r.a->c.n_cache_flushes, 0);
    rig_close(&r);
}

/* threshold=0.5 on 100 MiB: a grow that would pass 50 MiB releases LRU first. */
static void test_lru_threshold(void)
{
    rig r;
    rig_open(&r, 100 * MiB, "lru:threshold=0.5");
    uint64_t hx = rig_malloc(&r, 20 * MiB, GM_CAT_TEMPORARY, 1);
    uint64_t x = new_seg(&r, NULL, 0);
    uint64_t hy = rig_malloc(&r, 20 * MiB, GM_CAT_TEMPORARY, 2);
    uint64_t y = new_seg(&r, &x, 1);
    r.a->ops->free(r.a, hx, 3);
    r.a->ops->free(r.a, hy, 4);
    rig_malloc(&r, 30 * MiB, GM_CAT_TEMPORARY, 5); /* 40 + 30 > 50: 20 over */
    CU_ASSERT(!has_seg(&r, x));
    CU_ASSERT(has_seg(&r, y));
    CU_ASSERT_EQUAL(r.a->c.num_alloc_retries, 0); /* proactive: no failure happened */
    rig_close(&r);
}

static void test_priority_category(void)
{
    rig r;
    uint64_t p, act;
    /* the parameter segment is older: LRU would release it; priority keeps it */
    two_free_segments(&r, "priority", GM_CAT_PARAMETER, GM_CAT_ACTIVATION, &p, &act);
    CU_ASSERT(!has_seg(&r, act));
    CU_ASSERT(has_seg(&r, p));
    rig_close(&r);
    two_free_segments(&r, "lru", GM_CAT_PARAMETER, GM_CAT_ACTIVATION, &p, &act);
    CU_ASSERT(!has_seg(&r, p));
    CU_ASSERT(has_seg(&r, act));
    rig_close(&r);
    /* a configured order turns it round */
    two_free_segments(&r, "priority:order=parameter>activation", GM_CAT_PARAMETER,
                      GM_CAT_ACTIVATION, &p, &act);
    CU_ASSERT(!has_seg(&r, p));
    CU_ASSERT(has_seg(&r, act));
    rig_close(&r);
    /* same category: ties by LRU */
    two_free_segments(&r, "priority", GM_CAT_GRADIENT, GM_CAT_GRADIENT, &p, &act);
    CU_ASSERT(!has_seg(&r, p));
    CU_ASSERT(has_seg(&r, act));
    rig_close(&r);
}

/* The registries' name lists are spelled from their one-line lists: each
 * name listed is the name of the plug-in at that place. */
static void test_registry_names(void)
{
    char want[256] = "";
    for (size_t i = 0; gm_policy_at(i); i++)
        snprintf(want + strlen(want), sizeof want - strlen(want), "%s%s", i ? ", " : "",
                 gm_policy_at(i)->name);
    CU_ASSERT_STRING_EQUAL(gm_policy_names(), want);
    want[0] = '\0';
    for (size_t i = 0; gm_alloc_at(i); i++)
        snprintf(want + strlen(want), sizeof want - strlen(want), "%s%s", i ? ", " : "",
                 gm_alloc_at(i)->name);
    CU_ASSERT_STRING_EQUAL(gm_alloc_names(), want);
    CU_ASSERT_PTR_EQUAL(gm_alloc_find("direct"), gm_alloc_at(1));
}

static void test_bad_params(void)
{
    static const char *const bad[] = {
        "lru:threshold=2",
        "lru:bogus=1",
        "priority:order=activation>foo",
        "priority:order=activation>activation",
        "predictive:horizon=x",
        "predictive:sample=0",
        "oracle:horizon=soon",
        "oracle:what=1",
        "nosuch",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        gm_policy *p = NULL;
        gm_err err = {0};
        CU_ASSERT_NOT_EQUAL(gm_policy_create(bad[i], &p, &err), GM_OK);
        CU_ASSERT(p == NULL);
        CU_ASSERT(err.msg[0] != 0);
    }
    static const char *const good[] = {"lru",
                                       "lru:threshold=0.8",
                                       "priority",
                                       "priority:order=temporary>activation,threshold=0.9",
                                       "predictive:horizon=20ms,sample=500us,proactive=0",
                                       "oracle:horizon=never",
                                       "pytorch"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        gm_policy *p = NULL;
        gm_err err = {0};
        CU_ASSERT_EQUAL(gm_policy_create(good[i], &p, &err), GM_OK);
        gm_policy_destroy(p);
    }
}

/* ---------------- the oracle ---------------- */

typedef struct seglog {
    int n_alloc, n_free;
    uint64_t first_free_size;
} seglog;

static void log_seg(void *ctx, int tenant, uint64_t index, const gm_seg_event *ev)
{
    seglog *l = ctx;
    (void)tenant, (void)index;
    if (ev->op == GM_OP_SEGMENT_ALLOC) {
        l->n_alloc++;
    } else {
        if (!l->n_free) l->first_free_size = ev->size;
        l->n_free++;
    }
}

/* A (30 MiB) is freed after B (50 MiB), then a 70 MiB request needs one of
 * them back. B is reused next (event 5), A later (event 7): the oracle
 * keeps B; LRU releases B (older) and has to grow it again. */
static const gm_event oracle_case[] = {
    {.t_ns = 1, .addr = 1, .size = 30 * MiB, .op = GM_OP_ALLOC},
    {.t_ns = 2, .addr = 2, .size = 50 * MiB, .op = GM_OP_ALLOC},
    {.t_ns = 3, .addr = 2, .op = GM_OP_FREE},
    {.t_ns = 4, .addr = 1, .op = GM_OP_FREE},
    {.t_ns = 5, .addr = 3, .size = 70 * MiB, .op = GM_OP_ALLOC},
    {.t_ns = 6, .addr = 4, .size = 50 * MiB, .op = GM_OP_ALLOC},
    {.t_ns = 7, .addr = 4, .op = GM_OP_FREE},
    {.t_ns = 8, .addr = 5, .size = 30 * MiB, .op = GM_OP_ALLOC},
};
#define N_ORACLE_CASE (sizeof oracle_case / sizeof oracle_case[0])

static gm_sim_result *run_case(gm_tenant_spec *t, const char *policy, seglog *l)
{
    gm_sim_config c;
    config(&c, t, 1, 130 * MiB, policy);
    c.seg_hook = log_seg;
    c.seg_hook_ctx = l;
    gm_sim_result *r = NULL;
    gm_err err = {0};
    int rc = gm_simulate(&c, &r, &err);
    if (rc) fprintf(stderr, "%s\n", err.msg);
    CU_ASSERT_EQUAL(rc, GM_OK);
    return r;
}

static void check_oracle(gm_tenant_spec *t)
{
    seglog lo = {0}, ll = {0};
    gm_sim_result *ro = run_case(t, "oracle:proactive=0", &lo);
    gm_sim_result *rl = run_case(t, "lru", &ll);
    CU_ASSERT_FATAL(ro && rl);
    CU_ASSERT_EQUAL(ro->device.n_oom, 0);
    CU_ASSERT_EQUAL(rl->device.n_oom, 0);
    CU_ASSERT_EQUAL(lo.first_free_size, 30 * MiB); /* released A, kept B */
    CU_ASSERT_EQUAL(ll.first_free_size, 50 * MiB); /* LRU released B */
    CU_ASSERT_EQUAL(lo.n_alloc, 3);                /* A, B, the 70 MiB one */
    CU_ASSERT_EQUAL(ll.n_alloc, 4);                /* and B again */
    CU_ASSERT_EQUAL(ro->policy_realizable, 0);
    CU_ASSERT_EQUAL(rl->policy_realizable, 1);
    json_t *rep = gm_report_json(ro->t[0].policy_report); /* as in the result JSON */
    CU_ASSERT_FATAL(rep != NULL);
    CU_ASSERT(json_is_false(json_object_get(rep, "realizable")));
    json_decref(rep);
    gm_sim_result_free(ro);
    gm_sim_result_free(rl);
}

static void test_oracle_keeps_next(void)
{
    gm_tenant_spec t = {
        .path = "oracle-case", .events = oracle_case, .n_events = N_ORACLE_CASE, .repeat = 1};
    check_oracle(&t);
}

/* The same, with the future read from an HDF5 file. */
static void test_oracle_from_file(void)
{
    const char *path = gm_test_tmp("oracle.h5");
    gm_err err = {0};
    gm_trace_writer *w = NULL;
    int rc = gm_trace_create(path, NULL, NULL, &w, &err);
    if (!rc) rc = gm_trace_append(w, oracle_case, N_ORACLE_CASE, &err);
    if (!rc) rc = gm_trace_finish(w, &err);
    CU_ASSERT_EQUAL_FATAL(rc, GM_OK);
    gm_tenant_spec t = {.path = path, .repeat = 1};
    check_oracle(&t);
    /* a horizon-0 oracle releases every idle segment: A and B go before the
     * 70 MiB grow, so it never fails */
    seglog l = {0};
    gm_sim_result *r = run_case(&t, "oracle", &l);
    CU_ASSERT_FATAL(r != NULL);
    CU_ASSERT_EQUAL(r->t[0].c.num_alloc_retries, 0);
    CU_ASSERT(r->t[0].c.released_bytes >= 80 * MiB);
    gm_sim_result_free(r);
    remove(path);
}

/* ---------------- predictive ---------------- */

/*
 * Period 3: every 1 ms a request of 30, 60 or 90 MiB in rotation, freed
 * 0.5 ms later; 150 MiB hold any two cached segments but not three, so
 * each step that misses must release one. max_split_size keeps a request
 * out of a larger free segment. The furthest-reused one is the right pick
 * (a hit every other step); LRU always picks the one needed next.
 */
#define P3_STEPS 600
static gm_event p3[2 * P3_STEPS];

static void make_period3(void)
{
    static const uint64_t size[3] = {30 * MiB, 60 * MiB, 90 * MiB};
    for (int k = 0; k < P3_STEPS; k++) {
        p3[2 * k] = ev_alloc((uint64_t)k * MS, 100 + (uint64_t)k, size[k % 3], GM_CAT_ACTIVATION);
        p3[2 * k + 1] = ev_free((uint64_t)k * MS + 500 * US, 100 + (uint64_t)k);
    }
}

static gm_sim_result *run_p3(const char *policy)
{
    gm_tenant_spec t = {.path = "period3", .events = p3, .n_events = 2 * P3_STEPS, .repeat = 1};
    gm_sim_config c;
    config(&c, &t, 1, 150 * MiB, policy);
    c.alloc_conf = "max_split_size_mb:25";
    gm_sim_result *r = NULL;
    gm_err err = {0};
    int rc = gm_simulate(&c, &r, &err);
    if (rc) fprintf(stderr, "%s\n", err.msg);
    CU_ASSERT_EQUAL_FATAL(rc, GM_OK);
    CU_ASSERT_EQUAL(r->device.n_oom, 0);
    return r;
}

static void test_predictive_period3(void)
{
    make_period3();
    gm_sim_result *rp = run_p3("predictive:sample=100us,horizon=1500us,proactive=0");
    gm_sim_result *rl = run_p3("lru");
    gm_sim_result *ro = run_p3("oracle:proactive=0");
    json_t *rep = gm_report_json(rp->t[0].policy_report); /* as in the result JSON */
    CU_ASSERT_FATAL(rep != NULL);
    if (getenv("GM_TEST_VERBOSE")) {
        char *d = json_dumps(rep, JSON_COMPACT);
        fprintf(stderr, "%s\n", d);
        free(d);
    }
    double period = (double)json_integer_value(json_object_get(rep, "period_ns"));
    CU_ASSERT(period > 2.94e6 && period < 3.06e6);
    json_t *prec = json_object_get(rep, "precision"), *rec = json_object_get(rep, "recall");
    CU_ASSERT_FATAL(json_is_real(prec) && json_is_real(rec));
    CU_ASSERT(json_real_value(prec) >= 0.9);
    CU_ASSERT(json_real_value(rec) >= 0.9);
    CU_ASSERT(json_integer_value(json_object_get(rep, "predictions")) >= 100);
    uint64_t mp = rp->t[0].c.n_driver_alloc, ml = rl->t[0].c.n_driver_alloc,
             mo = ro->t[0].c.n_driver_alloc;
    if (!(mp * 10 < ml * 7) || !(mp <= mo + mo / 10))
        fprintf(stderr, "driver mallocs: predictive %llu, lru %llu, oracle %llu\n",
                (unsigned long long)mp, (unsigned long long)ml, (unsigned long long)mo);
    CU_ASSERT(ml >= P3_STEPS - 5); /* LRU misses every step */
    CU_ASSERT(mp * 10 < ml * 7);   /* predictive learned the rotation */
    CU_ASSERT(mp <= mo + mo / 10); /* and is near the oracle */
    json_decref(rep);
    gm_sim_result_free(rp);
    gm_sim_result_free(rl);
    gm_sim_result_free(ro);
}

/*
 * What predictive reads on a tick between driver calls: the model's counts
 * of its segments by pool and size (gm_alloc_ops.class_counts), of the
 * releasable ones among them (class_free), and its releasable segments in
 * the model's order, read in place (releasable_briefs); or, with none of these, a view of every
 * segment after each driver call and the releasable segments in another order, counted by the
 * policy. The decisions are the same either way (bench/policy_diff.sh holds it on real traces too):
 * a workload of 8 ms iterations whose sizes change every iteration, the timer ticked every 1 ms, on
 * the pytorch model and on a copy of it without class_counts and class_free whose briefs come
 * reversed.
 */
static const gm_alloc_ops *pt_ops;
static gm_alloc_ops views_ops; /* pt_ops without class_counts, class_free, releasable_briefs;
                                  briefs reversed */

static size_t briefs_reversed(gm_alloc *a, int releasable_only, gm_seg_brief *buf, size_t cap)
{
    size_t n = pt_ops->briefs(a, releasable_only, buf, cap);
    for (size_t i = 0, j = n - 1; n <= cap && n && i < j; i++, j--) {
        gm_seg_brief x = buf[i];
        buf[i] = buf[j];
        buf[j] = x;
    }
    return n;
}

/* The workload on one allocator (ops) with predictive; its counters and
 * the policy's report. */
static gm_report *run_ticked(const gm_alloc_ops *ops, gm_alloc_counters *c)
{
    gm_err err = {0};
    static const gm_latency lat = GM_LATENCY_DEFAULT;
    gm_device *dev;
    gm_policy *pol;
    gm_alloc *a;
    CU_ASSERT_EQUAL_FATAL(gm_device_model_create(2 * GiB, &lat, &dev, &err), GM_OK);
    CU_ASSERT_EQUAL_FATAL(gm_policy_create("predictive", &pol, &err), GM_OK);
    CU_ASSERT_EQUAL_FATAL(gm_alloc_create(ops, dev, "", 0, pol, &a, &err), GM_OK);
    enum { ITERS = 60, PER = 40 };
    uint64_t h[PER], s = 99, tick = MS;
    for (int it = 0; it < ITERS; it++) {
        uint64_t t0 = (uint64_t)it * 8 * MS;
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t scale = 60 + (s >> 33) % 41; /* this iteration's length: 60-100 % */
        for (int k = 0; k < 2 * PER; k++) {
            uint64_t now = t0 + (uint64_t)k * 90 * US;
            while (tick <= now) { /* the ticks before this event */
                pol->ops->on_timer(pol->state, a, tick);
                tick += MS;
            }
            if (k < PER) { /* sizes from 2 KiB to ~48 MiB, scaled */
                uint64_t base = k % 4 == 0 ? 48 * MiB : k % 4 == 1 ? 3 * MiB : (2048ull << (k % 9));
                CU_ASSERT_EQUAL(
                    a->ops->malloc(a, base * scale / 100, 0, GM_CAT_ACTIVATION, now, &h[k]), GM_OK);
            } else { /* freed in another order (7 and PER share no factor) */
                a->ops->free(a, h[(k - PER) * 7 % PER], now);
            }
        }
    }
    *c = a->c;
    gm_report *rep = gm_report_new();
    CU_ASSERT_FATAL(rep != NULL);
    pol->ops->report(pol->state, rep);
    gm_alloc_destroy(a);
    gm_policy_destroy(pol);
    gm_device_destroy(dev);
    return rep;
}

static int64_t report_int(const gm_report *r, const char *key)
{
    const gm_kv *kv = gm_report_get(r, key);
    return kv && kv->type == GM_KV_INT ? kv->v.i : -1;
}

static void test_predictive_counts_or_views(void)
{
    pt_ops = gm_alloc_find("pytorch");
    CU_ASSERT_FATAL(pt_ops && pt_ops->class_counts && pt_ops->class_free && pt_ops->briefs &&
                    pt_ops->releasable_briefs);
    views_ops = *pt_ops;
    views_ops.class_counts = NULL;
    views_ops.class_free = NULL;
    views_ops.releasable_briefs = NULL; /* copied, reversed */
    views_ops.briefs = briefs_reversed;
    gm_alloc_counters c1, c2;
    gm_report *r1 = run_ticked(pt_ops, &c1), *r2 = run_ticked(&views_ops, &c2);
    /* the workload makes predictive decide: it learns the period, predicts,
     * releases what it predicts idle, and grows again */
    CU_ASSERT(report_int(r1, "period_ns") > 0);
    CU_ASSERT(report_int(r1, "predictions") > 100);
    CU_ASSERT(report_int(r1, "proactive_released_bytes") > 0);
    CU_ASSERT(c1.n_driver_free > 0);
    /* and decides the same */
    CU_ASSERT_EQUAL(c1.n_driver_alloc, c2.n_driver_alloc);
    CU_ASSERT_EQUAL(c1.n_driver_free, c2.n_driver_free);
    CU_ASSERT_EQUAL(c1.reserved_bytes, c2.reserved_bytes);
    CU_ASSERT_EQUAL(c1.allocated_bytes, c2.allocated_bytes);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r1);
    CU_ASSERT(same_report(r1, r2));
    gm_report_free(r1);
    gm_report_free(r2);
}

/* ---------------- --scope device ---------------- */

static void test_scope_device(void)
{
    /* tenant 0 caches 100 MiB it no longer uses; tenant 1 needs 100 MiB */
    gm_event a[] = {ev_alloc(0, 1, 100 * MiB, 0), ev_free(1, 1), ev_alloc(100 * MS, 2, 1024, 0)};
    gm_event b[] = {ev_alloc(0, 1, 100 * MiB, 0), ev_free(10, 1)};
    gm_tenant_spec t[2] = {
        {.path = "a", .events = a, .n_events = 3, .repeat = 1},
        {.path = "b", .events = b, .n_events = 2, .repeat = 1, .offset_ns = 2 * MS},
    };
    static const char *const pols[] = {"pytorch", "lru", "priority", "predictive", "oracle"};
    for (size_t i = 0; i < sizeof pols / sizeof pols[0]; i++)
        for (int scope = 0; scope < 2; scope++) {
            gm_sim_config c;
            config(&c, t, 2, 150 * MiB, pols[i]);
            c.scope_device = scope;
            gm_sim_result *r = NULL;
            gm_err err = {0};
            CU_ASSERT_EQUAL_FATAL(gm_simulate(&c, &r, &err), GM_OK);
            /* the oracle (horizon 0) releases the idle segment on its 1 ms timer,
             * before tenant b asks at 2 ms */
            int ok = scope || !strcmp(pols[i], "oracle");
            if (r->device.n_oom != (ok ? 0u : 1u))
                fprintf(stderr, "scope %d %s: %llu OOMs\n", scope, pols[i],
                        (unsigned long long)r->device.n_oom);
            CU_ASSERT_EQUAL(r->device.n_oom, ok ? 0 : 1);
            CU_ASSERT_EQUAL(gm_sim_completed(r), ok ? 2u : 1u);
            if (scope && strcmp(pols[i], "oracle")) {
                CU_ASSERT_EQUAL(r->t[0].scope_released_bytes, 100 * MiB);
                CU_ASSERT_EQUAL(r->t[1].scope_rescues, 1);
            }
            gm_sim_result_free(r);
        }
}

/* ---------------- every policy under pressure (sanitizers) ---------------- */

static void test_all_under_pressure(void)
{
    static const char *const confs[] = {"", "expandable_segments:True",
                                        "max_split_size_mb:64,garbage_collection_threshold:0.6"};
    gm_tenant_spec t = {.path = gm_test_path("traces/bert.h5"), .repeat = 1};
    for (size_t k = 0; k < sizeof confs / sizeof confs[0]; k++)
        for (size_t i = 0; gm_policy_at(i); i++) {
            gm_sim_config c;
            config(&c, &t, 1, 4608 * MiB, gm_policy_at(i)->name);
            c.alloc_conf = confs[k];
            c.on_oom_skip = 1;
            c.memory_fraction = k == 2 ? 0.95 : 0;
            gm_sim_result *r = NULL;
            gm_err err = {0};
            int rc = gm_simulate(&c, &r, &err);
            if (rc) fprintf(stderr, "%s / %s: %s\n", gm_policy_at(i)->name, confs[k], err.msg);
            CU_ASSERT_EQUAL_FATAL(rc, GM_OK);
            CU_ASSERT(r->device.peak_r <= 4608 * MiB);
            CU_ASSERT(r->device.peak_a <= r->device.peak_r);
            CU_ASSERT(r->events == r->t[0].trace_events);
            gm_sim_result_free(r);
        }
}

/* ---------------- policy lists, names ---------------- */

static void test_policy_lists(void)
{
    char **v;
    size_t n;
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_policy_list_split("lru:threshold=0.8,priority", &v, &n, &err), GM_OK);
    CU_ASSERT_EQUAL_FATAL(n, 2);
    CU_ASSERT_STRING_EQUAL(v[0], "lru:threshold=0.8");
    CU_ASSERT_STRING_EQUAL(v[1], "priority");
    free(v);
    CU_ASSERT_EQUAL_FATAL(
        gm_policy_list_split("predictive:horizon=20ms,sample=1ms,oracle", &v, &n, &err), GM_OK);
    CU_ASSERT_EQUAL_FATAL(n, 2);
    CU_ASSERT_STRING_EQUAL(v[0], "predictive:horizon=20ms,sample=1ms");
    CU_ASSERT_STRING_EQUAL(v[1], "oracle");
    free(v);
    CU_ASSERT_EQUAL_FATAL(gm_policy_list_split(NULL, &v, &n, &err), GM_OK);
    CU_ASSERT_EQUAL(n, 5);
    CU_ASSERT_STRING_EQUAL(v[0], "pytorch");
    CU_ASSERT_STRING_EQUAL(v[4], "oracle");
    free(v);
    CU_ASSERT_NOT_EQUAL(gm_policy_list_split("lru,bogus", &v, &n, &err), GM_OK);
    CU_ASSERT(strstr(err.msg, "bogus") != NULL);
    CU_ASSERT_NOT_EQUAL(gm_policy_list_split("lru,lru", &v, &n, &err), GM_OK);
    CU_ASSERT_NOT_EQUAL(gm_policy_list_split(",", &v, &n, &err), GM_OK);
}

static void *names_thread(void *arg)
{
    (void)arg;
    return (void *)gm_policy_names();
}

static void test_names_threads(void)
{
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&th[i], NULL, names_thread, NULL);
    for (int i = 0; i < 4; i++) {
        void *s;
        pthread_join(th[i], &s);
        CU_ASSERT_STRING_EQUAL((const char *)s,
                               "pytorch, lru, priority, predictive, oracle, tiered, defrag");
    }
}

/* ---------------- compare ---------------- */

/* Remove what legitimately differs between runs: clocks. */
static void strip_timing(json_t *j)
{
    if (json_is_object(j)) {
        json_object_del(j, "timing");
        json_object_del(j, "wall_s");
        json_object_del(j, "created_utc");
        const char *k;
        json_t *v;
        json_object_foreach(j, k, v) strip_timing(v);
    } else if (json_is_array(j)) {
        size_t i;
        json_t *v;
        json_array_foreach(j, i, v) strip_timing(v);
    }
}

static json_t *compare_json(const gm_sim_config *c, int threads)
{
    char **specs;
    size_t n;
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_policy_list_split(NULL, &specs, &n, &err), GM_OK);
    gm_compare *cmp = NULL;
    int rc = gm_compare_run(c, specs, n, threads, &cmp, &err);
    if (rc) fprintf(stderr, "%s\n", err.msg);
    CU_ASSERT_EQUAL_FATAL(rc, GM_OK);
    CU_ASSERT_EQUAL(cmp->threads, threads);
    CU_ASSERT(cmp->winner >= 0 && cmp->e[cmp->winner].realizable);
    CU_ASSERT(cmp->bound >= 0 && !strcmp(cmp->e[cmp->bound].spec, "oracle"));
    CU_ASSERT_EQUAL(cmp->n_ranked, 4);
    for (size_t k = 1; k < cmp->n_ranked; k++)
        CU_ASSERT(gm_result_rank_cmp(cmp->e[cmp->rank[k - 1]].r, cmp->e[cmp->rank[k]].r) <= 0);
    json_t *j = gm_compare_json(c, cmp);
    gm_compare_free(cmp);
    free(specs);
    strip_timing(j);
    return j;
}

static void test_compare_deterministic(void)
{
    /* three BERT tenants, staggered, on a device too small to cache freely */
    gm_tenant_spec t[3];
    for (int i = 0; i < 3; i++)
        t[i] = (gm_tenant_spec){.path = gm_test_path("traces/bert.h5"),
                                .repeat = 1,
                                .offset_ns = (uint64_t)i * 20 * MS};
    gm_sim_config c;
    config(&c, t, 3, 13 * GiB, NULL);
    c.overhead_bytes = 512 * MiB;
    c.scope_device = 1;
    json_t *a = compare_json(&c, 1), *b = compare_json(&c, 4);
    CU_ASSERT(json_equal(a, b));
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(a, "schema")), "gmsim-compare/1");
    CU_ASSERT_EQUAL(json_array_size(json_object_get(a, "results")), 5);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(a, "ranking")), 4);
    CU_ASSERT(json_is_string(json_object_get(a, "winner")));
    CU_ASSERT(strcmp(json_string_value(json_object_get(a, "winner")), "oracle") != 0);
    json_decref(a);
    json_decref(b);
}

/* ---------------- fit ---------------- */

static int oom_at(const gm_sim_config *base, const char *policy, uint64_t cap)
{
    gm_sim_config c = *base;
    c.policy = policy;
    c.capacity_bytes = cap;
    gm_sim_result *r = NULL;
    gm_err err = {0};
    int rc = gm_simulate(&c, &r, &err);
    if (rc == GM_EOOM) return 1;
    CU_ASSERT_EQUAL_FATAL(rc, GM_OK);
    int oom = r->device.n_oom > 0;
    gm_sim_result_free(r);
    return oom;
}

static void test_fit_capacity(void)
{
    gm_tenant_spec t = {.path = gm_test_path("traces/bert.h5"), .repeat = 1};
    gm_sim_config c;
    config(&c, &t, 1, 0, NULL);
    c.overhead_bytes = 512 * MiB;
    char *specs[] = {"pytorch", "lru", "oracle"};
    gm_fit *f = NULL;
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_fit_capacity(&c, specs, 3, 2, 0, &f, &err), GM_OK);
    for (size_t i = 0; i < 3; i++) {
        const gm_fit_entry *e = &f->e[i];
        CU_ASSERT_FATAL(e->found);
        CU_ASSERT_EQUAL(e->capacity % (2 * MiB), 0);
        CU_ASSERT_EQUAL(e->oom_capacity, e->capacity - 2 * MiB);
        CU_ASSERT(e->capacity >= e->peak_live + c.overhead_bytes);
        CU_ASSERT(!oom_at(&c, e->spec, e->capacity));
        CU_ASSERT(oom_at(&c, e->spec, e->capacity - 2 * MiB));
    }
    json_t *j = gm_fit_json(&c, f);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "schema")), "gmsim-fit/1");
    json_decref(j);
    gm_fit_free(f);
}

/* Models that size their pool from the device (rmm-pool, rmm-arena:
 * half the free memory; tf-bfc: all of it less a reserve) say so
 * (sim/device.h, capacity_reads), so fit does not take a run as the same
 * run on smaller devices: the search ends (it went on without end for
 * rmm-pool) and its answer is a capacity the trace runs on (it was not,
 * for rmm-arena and tf-bfc). */
static void test_fit_pool_models(void)
{
    gm_tenant_spec t = {.path = gm_test_path("traces/bert.h5"), .repeat = 1};
    gm_sim_config c;
    config(&c, &t, 1, 4 * GiB, NULL);
    char *specs[] = {"pytorch"};
    static const char *const models[] = {"rmm-pool", "rmm-arena", "tf-bfc"};
    for (size_t m = 0; m < 3; m++) {
        c.allocator = models[m];
        gm_fit *f = NULL;
        gm_err err = {0};
        CU_ASSERT_EQUAL_FATAL(gm_fit_capacity(&c, specs, 1, 1, 0, &f, &err), GM_OK);
        const gm_fit_entry *e = &f->e[0];
        CU_ASSERT_FATAL(e->found);
        CU_ASSERT(e->runs < 40);
        CU_ASSERT(e->oom_capacity < e->capacity);
        CU_ASSERT(!oom_at(&c, "pytorch", e->capacity));
        CU_ASSERT(oom_at(&c, "pytorch", e->oom_capacity));
        gm_fit_free(f);
    }
}

/* The same trace fitted with few simulations: on 1 GiB it reaches 70 MiB
 * and nothing else depends on the size, so 70 MiB fits unsimulated; 68 MiB
 * fits by flushing the cached 30 MiB (peak 40 MiB, which so fits too), and
 * 38 MiB, below the live 40 MiB, does not: 40 MiB in 3 simulations. */
static void test_fit_few_runs(void)
{
    gm_event a[] = {ev_alloc(0, 1, 30 * MiB, 0), ev_free(10, 1), ev_alloc(20, 2, 40 * MiB, 0)};
    gm_tenant_spec t = {.path = "a", .events = a, .n_events = 3, .repeat = 1};
    gm_sim_config c;
    config(&c, &t, 1, GiB, NULL);
    char *specs[] = {"pytorch"};
    gm_fit *f = NULL;
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_fit_capacity(&c, specs, 1, 1, 0, &f, &err), GM_OK);
    CU_ASSERT(f->e[0].found);
    CU_ASSERT_EQUAL(f->e[0].capacity, 40 * MiB);
    CU_ASSERT_EQUAL(f->e[0].oom_capacity, 38 * MiB);
    CU_ASSERT_EQUAL(f->e[0].runs, 3);
    CU_ASSERT_EQUAL(f->e[0].peak_reserved, 40 * MiB);
    CU_ASSERT(!oom_at(&c, "pytorch", 40 * MiB));
    CU_ASSERT(oom_at(&c, "pytorch", 38 * MiB));
    gm_fit_free(f);
}

static void test_fit_tenants(void)
{
    gm_event a[] = {ev_alloc(0, 1, 100 * MiB, 0), ev_free(10 * MS, 1)};
    gm_tenant_spec t = {.path = "a", .events = a, .n_events = 2, .repeat = 1};
    gm_sim_config c;
    config(&c, &t, 1, 350 * MiB, NULL);
    char *specs[] = {"pytorch", "lru"};
    gm_fit *f = NULL;
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_fit_tenants(&c, specs, 2, 1, 5, 0, &f, &err), GM_OK);
    CU_ASSERT_EQUAL(f->e[0].copies_fit, 3); /* all at once: 3 x 100 MiB */
    CU_ASSERT_EQUAL(f->e[0].copies_tried, 4);
    CU_ASSERT_EQUAL(f->e[0].first_fail_completed, 3);
    gm_fit_free(f);
    CU_ASSERT_EQUAL_FATAL(gm_fit_tenants(&c, specs, 2, 2, 5, 20 * MS, &f, &err), GM_OK);
    CU_ASSERT_EQUAL(f->e[1].copies_fit, 5); /* one after another */
    gm_fit_free(f);
}

/* fit --tenants by a scan k = 1, 2, ...: the copies before the first k
 * with an OOM, that k, and its tenants that completed. */
static void tenants_by_scan(const gm_sim_config *base, const char *policy, uint32_t max,
                            uint64_t stagger, uint32_t out[3])
{
    gm_tenant_spec ts[32];
    CU_ASSERT_FATAL(max <= 32);
    for (uint32_t k = 0; k < max; k++) {
        ts[k] = base->tenants[0];
        ts[k].offset_ns += k * stagger;
    }
    out[0] = out[1] = out[2] = 0;
    for (uint32_t k = 1; k <= max; k++) {
        gm_sim_config c = *base;
        c.policy = policy;
        c.tenants = ts;
        c.n_tenants = k;
        gm_sim_result *r = NULL;
        gm_err err = {0};
        int rc = gm_simulate(&c, &r, &err);
        CU_ASSERT_FATAL(rc == GM_OK || rc == GM_EOOM);
        out[1] = k;
        int ok = rc == GM_OK && r->device.n_oom == 0 && gm_sim_completed(r) == k;
        if (!ok) {
            out[2] = r ? (uint32_t)gm_sim_completed(r) : 0;
            gm_sim_result_free(r);
            return;
        }
        out[0] = k;
        gm_sim_result_free(r);
    }
}

/* fit --tenants searches (doubling, then halving the span, one by one
 * where runs fit under pressure) and answers as the scan: on iterations
 * of three sizes, copies 0.4 ms apart on 1 GiB, under policies that never
 * read the device's size, one that reads it on every grow (lru with a
 * threshold) and timer ones; and with fewer runs where nothing presses. */
static void test_fit_tenants_search(void)
{
    enum { IT = 60 };
    gm_event ev[6 * IT];
    size_t n = 0;
    for (uint64_t i = 0; i < IT; i++) {
        uint64_t t = i * MS, b = 1 + 4 * i;
        ev[n++] = ev_alloc(t, b, (30 + 2 * (i % 3)) * MiB, 0);
        ev[n++] = ev_alloc(t + 100000, b + 1, 8 * MiB, 0);
        ev[n++] = ev_free(t + 200000, b + 1);
        ev[n++] = ev_alloc(t + 300000, b + 2, 50 * MiB, 0);
        ev[n++] = ev_free(t + 600000, b);
        ev[n++] = ev_free(t + 800000, b + 2);
    }
    gm_tenant_spec t = {.path = "a", .events = ev, .n_events = n, .repeat = 1};
    static const struct {
        uint64_t capacity;
        uint32_t max;
    } cases[] = {{1 * GiB, 24}, {2 * GiB, 30}, {300 * MiB, 8}, {64 * GiB, 5}};
    char *specs[] = {"pytorch", "lru", "lru:threshold=0.5", "predictive", "oracle"};
    const size_t ns = sizeof specs / sizeof specs[0];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gm_sim_config c;
        config(&c, &t, 1, cases[i].capacity, NULL);
        gm_fit *f = NULL;
        gm_err err = {0};
        CU_ASSERT_EQUAL_FATAL(gm_fit_tenants(&c, specs, ns, 1, cases[i].max, 400000, &f, &err),
                              GM_OK);
        for (size_t k = 0; k < ns; k++) {
            uint32_t want[3];
            tenants_by_scan(&c, specs[k], cases[i].max, 400000, want);
            CU_ASSERT_EQUAL(f->e[k].copies_fit, want[0]);
            CU_ASSERT_EQUAL(f->e[k].copies_tried, want[1]);
            if (want[0] < want[1]) CU_ASSERT_EQUAL(f->e[k].first_fail_completed, want[2]);
            /* with room: 1, 4 (one copy's peak says many more fit; 4
             * times at most) and 5 copies, not 5 runs; lru with a
             * threshold reads the device's use on every grow, and finds
             * it under the threshold (room: sim/device.h, room_reads), so
             * 4 copies say 2 and 3 fit too */
            if (cases[i].capacity == 64 * GiB) CU_ASSERT_EQUAL(f->e[k].runs, 3);
        }
        gm_fit_free(f);
    }
    /* the flag that says so: lru's threshold read under it is room, over
     * it (the device's use decides what it releases) is not */
    static const struct {
        uint64_t capacity;
        int independent;
    } one[] = {{64 * GiB, 1}, {160 * MiB, 0}};
    for (size_t i = 0; i < sizeof one / sizeof one[0]; i++) {
        gm_sim_config c;
        config(&c, &t, 1, one[i].capacity, "lru:threshold=0.5");
        gm_sim_result *r = NULL;
        gm_err err = {0};
        CU_ASSERT_EQUAL_FATAL(gm_simulate(&c, &r, &err), GM_OK);
        CU_ASSERT_EQUAL(r->device.n_oom, 0);
        CU_ASSERT_EQUAL(r->capacity_free, 0); /* it read the size */
        CU_ASSERT_EQUAL(r->independent, one[i].independent);
        gm_sim_result_free(r);
    }
}

/* ---------------- tiered and defrag ---------------- */

static int64_t rep_int(const gm_sim_result *r, const char *key)
{
    const gm_kv *kv = gm_report_get(r->t[0].policy_report, key);
    CU_ASSERT_FATAL(kv != NULL && kv->type == GM_KV_INT);
    return kv->v.i;
}

static double rep_real(const gm_sim_result *r, const char *key)
{
    const gm_kv *kv = gm_report_get(r->t[0].policy_report, key);
    CU_ASSERT_FATAL(kv != NULL && kv->type == GM_KV_REAL);
    return kv->v.d;
}

/* Quotas of a 1000 MiB device at base 0.2, dynamic 0.3, buffer 0.1: 200,
 * 300 and 100 MiB. By hand (MiB, ms): A param 150 -> base 150; B param 100
 * -> base full (250 > 200), buffer 100; C act 250 -> dynamic 250; D act
 * 100 -> dynamic 350 > 300 and buffer 200 > 100: refused; B freed (buffer
 * 0); E act 100 -> buffer 100; D's free skipped; F param 60 -> base 210,
 * buffer 160: refused. 2 OOMs, where pytorch has none. Allocated bytes:
 * 150 for 1 ms, 250 for 1, 500 for 2, 400 for 1, 500 for 2: 2800 MiB ms over
 * 7 ms, mean 400 MiB = 2/3 of the 600 MiB a static reservation holds. */
static void test_tiered_quotas(void)
{
    gm_event e[] = {ev_alloc(0, 1, 150 * MiB, GM_CAT_PARAMETER),
                    ev_alloc(1 * MS, 2, 100 * MiB, GM_CAT_PARAMETER),
                    ev_alloc(2 * MS, 3, 250 * MiB, GM_CAT_ACTIVATION),
                    ev_alloc(3 * MS, 4, 100 * MiB, GM_CAT_ACTIVATION),
                    ev_free(4 * MS, 2),
                    ev_alloc(5 * MS, 5, 100 * MiB, GM_CAT_ACTIVATION),
                    ev_free(6 * MS, 4),
                    ev_alloc(7 * MS, 6, 60 * MiB, GM_CAT_PARAMETER)};
    gm_tenant_spec t = {.path = "serve", .events = e, .n_events = 8, .repeat = 1};
    gm_sim_config c;
    gm_err err = {0};
    gm_sim_result *r = NULL;
    config(&c, &t, 1, 1000 * MiB, "pytorch");
    c.on_oom_skip = 1;
    CU_ASSERT_EQUAL_FATAL(gm_simulate(&c, &r, &err), GM_OK);
    CU_ASSERT_EQUAL(r->t[0].m.n_oom, 0);
    gm_sim_result_free(r);
    config(&c, &t, 1, 1000 * MiB, "tiered:base=0.2,dynamic=0.3,buffer=0.1");
    c.on_oom_skip = 1;
    CU_ASSERT_EQUAL_FATAL(gm_simulate(&c, &r, &err), GM_OK);
    CU_ASSERT_EQUAL(r->t[0].m.n_oom, 2);
    CU_ASSERT_EQUAL(rep_int(r, "refused"), 2);
    CU_ASSERT_EQUAL(rep_int(r, "base.refused"), 1);
    CU_ASSERT_EQUAL(rep_int(r, "dynamic.refused"), 1);
    CU_ASSERT_EQUAL(rep_int(r, "base.quota_bytes"), (int64_t)(200 * MiB));
    CU_ASSERT_EQUAL(rep_int(r, "base.peak_bytes"), (int64_t)(150 * MiB));
    CU_ASSERT_EQUAL(rep_int(r, "dynamic.peak_bytes"), (int64_t)(250 * MiB));
    CU_ASSERT_EQUAL(rep_int(r, "buffer.peak_bytes"), (int64_t)(100 * MiB));
    CU_ASSERT_EQUAL(rep_int(r, "buffer.admitted"), 2);
    CU_ASSERT_EQUAL(rep_int(r, "static_reservation_bytes"), (int64_t)(600 * MiB));
    CU_ASSERT_DOUBLE_EQUAL(rep_real(r, "static_utilization"), 2.0 / 3.0, 1e-9);
    CU_ASSERT_EQUAL(r->t[0].m.peak_a, 500 * MiB);
    gm_sim_result_free(r);
    /* without --on-oom skip the first refusal stops the tenant, at D */
    config(&c, &t, 1, 1000 * MiB, "tiered:base=0.2,dynamic=0.3,buffer=0.1");
    CU_ASSERT_EQUAL_FATAL(gm_simulate(&c, &r, &err), GM_OK);
    CU_ASSERT_EQUAL(r->t[0].m.n_oom, 1);
    CU_ASSERT_EQUAL(r->t[0].status, GM_TENANT_ABORTED);
    gm_sim_result_free(r);
    /* more than the device, unknown keys: refused with the fix */
    gm_policy *p = NULL;
    CU_ASSERT_NOT_EQUAL(gm_policy_create("tiered:base=0.6,dynamic=0.5", &p, &err), GM_OK);
    CU_ASSERT(strstr(err.msg, "at most 1") != NULL);
    CU_ASSERT_NOT_EQUAL(gm_policy_create("tiered:kv=0.5", &p, &err), GM_OK);
}

/* Three segments of 30, 40 and 50 MiB at t=0; the first two freed at
 * 0.5 ms: reserved 120, allocated 50, free 70 in blocks of 30 and 40, so
 * external fragmentation is 1 - 40/70 = 3/7 = 0.43. With sample 1 ms it is
 * seen above 0.3 at the 1 ms tick; it has stayed (1 ms) at 2 ms, but the
 * last allocation (t=0) is quiet for 5 ms only at the 5 ms tick: both free
 * segments (70 MiB, 2 cudaFree) go then, and the fragmentation is 0. A
 * 1 KiB allocation at 10 ms keeps the timer going. */
static gm_sim_result *run_defrag(const char *spec)
{
    static gm_event e[6];
    e[0] = ev_alloc(0, 1, 30 * MiB, GM_CAT_ACTIVATION);
    e[1] = ev_alloc(0, 2, 40 * MiB, GM_CAT_ACTIVATION);
    e[2] = ev_alloc(0, 3, 50 * MiB, GM_CAT_ACTIVATION);
    e[3] = ev_free(500 * US, 1);
    e[4] = ev_free(500 * US, 2);
    e[5] = ev_alloc(10 * MS, 4, 1024, GM_CAT_TEMPORARY);
    gm_tenant_spec t = {.path = "frag", .events = e, .n_events = 6, .repeat = 1};
    gm_sim_config c;
    gm_err err = {0};
    gm_sim_result *r = NULL;
    config(&c, &t, 1, 1 * GiB, spec);
    CU_ASSERT_EQUAL_FATAL(gm_simulate(&c, &r, &err), GM_OK);
    return r;
}

static void test_defrag_quiet(void)
{
    gm_sim_result *r = run_defrag("defrag:threshold=0.3,quiet=5ms,sample=1ms");
    CU_ASSERT_EQUAL(rep_int(r, "defrags"), 1);
    CU_ASSERT_EQUAL(rep_int(r, "defrag_released_bytes"), (int64_t)(70 * MiB));
    CU_ASSERT_EQUAL(r->t[0].c.n_driver_free, 2);
    CU_ASSERT_EQUAL(rep_int(r, "defrag_driver_ns"), (int64_t)r->t[0].c.driver_free_ns);
    CU_ASSERT(r->t[0].c.driver_free_ns > 0);
    CU_ASSERT_DOUBLE_EQUAL(rep_real(r, "frag.before_defrag"), 3.0 / 7.0, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(rep_real(r, "frag.after_defrag"), 0.0, 1e-12);
    CU_ASSERT_EQUAL(rep_int(r, "samples"), 10); /* ticks at 1, 2, ... 10 ms */
    CU_ASSERT_DOUBLE_EQUAL(rep_real(r, "frag.above_share"), 0.5, 1e-12); /* 1..5 ms */
    gm_sim_result_free(r);
    /* never quiet enough before the end: nothing released */
    r = run_defrag("defrag:threshold=0.3,quiet=20ms,sample=1ms");
    CU_ASSERT_EQUAL(rep_int(r, "defrags"), 0);
    CU_ASSERT_EQUAL(r->t[0].c.n_driver_free, 0);
    gm_sim_result_free(r);
    /* 3/7 is under a 0.5 threshold */
    r = run_defrag("defrag:threshold=0.5,quiet=5ms,sample=1ms");
    CU_ASSERT_EQUAL(rep_int(r, "defrags"), 0);
    CU_ASSERT_DOUBLE_EQUAL(rep_real(r, "frag.above_share"), 0.0, 1e-12);
    gm_sim_result_free(r);
    /* above only from 1 ms: stay=5ms waits until the 6 ms tick */
    r = run_defrag("defrag:threshold=0.3,quiet=0,sample=1ms,stay=5ms");
    CU_ASSERT_EQUAL(rep_int(r, "defrags"), 1);
    CU_ASSERT_DOUBLE_EQUAL(rep_real(r, "frag.above_share"), 0.6, 1e-12); /* 1..6 ms */
    gm_sim_result_free(r);
}

int gm_test_register(void)
{
    CU_pSuite s = CU_add_suite("policies", NULL, NULL);
    if (!s) return CU_get_error();
    GM_ADD_TEST(s, test_registry_names);
    GM_ADD_TEST(s, test_lru_releases_older);
    GM_ADD_TEST(s, test_lru_only_as_needed);
    GM_ADD_TEST(s, test_lru_threshold);
    GM_ADD_TEST(s, test_priority_category);
    GM_ADD_TEST(s, test_bad_params);
    GM_ADD_TEST(s, test_oracle_keeps_next);
    GM_ADD_TEST(s, test_oracle_from_file);
    GM_ADD_TEST(s, test_predictive_period3);
    GM_ADD_TEST(s, test_predictive_counts_or_views);
    GM_ADD_TEST(s, test_scope_device);
    GM_ADD_TEST(s, test_all_under_pressure);
    GM_ADD_TEST(s, test_policy_lists);
    GM_ADD_TEST(s, test_names_threads);
    GM_ADD_TEST(s, test_compare_deterministic);
    GM_ADD_TEST(s, test_fit_capacity);
    GM_ADD_TEST(s, test_fit_few_runs);
    GM_ADD_TEST(s, test_fit_pool_models);
    GM_ADD_TEST(s, test_fit_tenants);
    GM_ADD_TEST(s, test_fit_tenants_search);
    GM_ADD_TEST(s, test_tiered_quotas);
    GM_ADD_TEST(s, test_defrag_quiet);
    return CUE_SUCCESS;
}
