/*
 * test_compare.c - compare runs its policies on a pool of threads
 * (study/pool.h): on three threads it ranks and measures exactly as on
 * one. And a run shared between policies (study/same_run.h) is each one's
 * run, figure by figure.
 */
#include <CUnit/CUnit.h>
#include <unistd.h>

#include "bert_trace.h"
#include "cu.h"
#include "same_run.h"
#include "base/units.h"
#include "policies/registry.h"
#include "sim/policy.h"
#include "study/compare.h"
#include "study/fit.h"
#include "study/preload.h"
#include "study/prep.h"
#include "study/same_run.h"
#include "study/simulate.h"

static void same_compare(const gm_compare *a, const gm_compare *b)
{
    CU_ASSERT_EQUAL_FATAL(a->n, b->n);
    CU_ASSERT_EQUAL(a->winner, b->winner);
    CU_ASSERT_EQUAL_FATAL(a->n_ranked, b->n_ranked);
    for (size_t i = 0; i < a->n_ranked; i++)
        CU_ASSERT_EQUAL(a->rank[i], b->rank[i]);
    for (size_t i = 0; i < a->n; i++) {
        const gm_sim_result *x = a->e[i].r, *y = b->e[i].r;
        CU_ASSERT_EQUAL(x->events, y->events);
        CU_ASSERT_EQUAL(x->device.peak_r, y->device.peak_r);
        CU_ASSERT_EQUAL(x->device.peak_a, y->device.peak_a);
        CU_ASSERT_EQUAL(x->device.n_oom, y->device.n_oom);
        CU_ASSERT_DOUBLE_EQUAL(x->device.int_a, y->device.int_a, 0);
        CU_ASSERT_DOUBLE_EQUAL(x->device.int_r, y->device.int_r, 0);
        CU_ASSERT_EQUAL(x->t[0].c.n_driver_alloc, y->t[0].c.n_driver_alloc);
        CU_ASSERT_EQUAL(x->t[0].c.n_driver_free, y->t[0].c.n_driver_free);
        CU_ASSERT_STRING_EQUAL(x->t[0].trace_hash, y->t[0].trace_hash);
    }
}

/* Five policies over a trace file of ~310 k events, at a capacity that
 * makes the policies differ. */
static void test_compare_threads(void)
{
    gm_err err = {0};
    gm_bert_stats st;
    const char *path = bert_trace("compare.h5", 120, &st); /* ~310 k events */
    CU_ASSERT_FATAL(st.events > 300000);

    gm_tenant_spec spec = {.path = path, .repeat = 1};
    gm_sim_config cfg = bert_config(&spec, 1, st.peak_live_bytes + st.peak_live_bytes / 10);
    cfg.on_oom_skip = 1; /* every run to the end, OOMs or not */
    static const char *const pol[] = {"pytorch", "lru", "priority", "predictive", "oracle"};
    gm_compare *one = NULL, *three = NULL;
    CU_ASSERT_EQUAL_FATAL(gm_compare_run(&cfg, (char *const *)pol, 5, 1, &one, &err), GM_OK);
    CU_ASSERT_EQUAL_FATAL(gm_compare_run(&cfg, (char *const *)pol, 5, 3, &three, &err), GM_OK);
    same_compare(one, three);
    for (size_t i = 0; i < one->n; i++)
        CU_ASSERT_EQUAL(one->e[i].r->events, st.events); /* every run to the end */
    /* the trace in memory: on 3 threads the oracle's future is made by a
     * job of its own beside the runs (study/prep.h), on 1 by its run */
    gm_preload pre;
    CU_ASSERT_EQUAL_FATAL(gm_preload_config(&cfg, &pre, 1u << 20, 0, &err), GM_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(cfg.tenants[0].events);
    double share;
    gm_sim_config oc = cfg;
    oc.policy = "oracle";
    CU_ASSERT_TRUE(gm_prep_wanted(&oc, 0, &share));
    CU_ASSERT(share > 0 && share < 1);
    for (int threads = 1; threads <= 3; threads += 2) {
        gm_compare *mem = NULL;
        CU_ASSERT_EQUAL_FATAL(gm_compare_run(&cfg, (char *const *)pol, 5, threads, &mem, &err),
                              GM_OK);
        same_compare(one, mem);
        gm_compare_free(mem);
    }
    gm_preload_free(&pre);
    gm_compare_free(one);
    gm_compare_free(three);
    unlink(path);
}

static void same_result(const gm_sim_result *a, const gm_sim_result *b);

/* A run given its oracle's future made ahead (study/prep.h) is the run
 * that makes its own, whether the future was made before the run took
 * it or the run took it first (then the run makes its own, and the job
 * makes nothing); a policy that prepares nothing, or a trace on disk,
 * has nothing to prepare. */
static void test_prepared_run(void)
{
    gm_err err = {0};
    gm_bert_stats st;
    const char *path = bert_trace("prep.h5", 30, &st);
    gm_tenant_spec spec = {.path = path, .repeat = 1};
    gm_sim_config cfg = bert_config(&spec, 1, st.peak_live_bytes + st.peak_live_bytes / 10);
    cfg.on_oom_skip = 1;
    cfg.policy = "oracle";
    double share;
    CU_ASSERT_FALSE(gm_prep_wanted(&cfg, 0, &share)); /* on disk */
    gm_preload pre;
    CU_ASSERT_EQUAL_FATAL(gm_preload_config(&cfg, &pre, 1u << 20, 0, &err), GM_OK);
    CU_ASSERT_TRUE(gm_prep_wanted(&cfg, 0, &share));
    CU_ASSERT_FALSE(gm_prep_wanted(&cfg, 1, &share)); /* no such tenant */
    gm_sim_result *own = NULL;
    CU_ASSERT_EQUAL_FATAL(gm_simulate(&cfg, &own, &err), GM_OK);
    CU_ASSERT(own->t[0].c.n_driver_free > 0); /* the future decided releases */
    for (int made_first = 0; made_first < 2; made_first++) {
        gm_prep *p = gm_prep_new(&cfg, 0);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        if (made_first) gm_prep_make(p);
        gm_policy_prep *h = gm_prep_handle(p);
        gm_sim_config c = cfg;
        c.policy_prep = &h;
        gm_sim_result *r = NULL;
        CU_ASSERT_EQUAL_FATAL(gm_simulate(&c, &r, &err), GM_OK);
        same_result(r, own);
        gm_prep_make(p); /* taken: makes nothing */
        gm_sim_result_free(r);
        gm_prep_free(p);
    }
    /* made on a model that prepares nothing: nothing */
    const gm_policy_ops *ops;
    const char *params;
    gm_policy *made = NULL;
    CU_ASSERT_EQUAL_FATAL(gm_policy_lookup("predictive", &ops, &params, &err), GM_OK);
    CU_ASSERT_EQUAL(gm_engine_prepare(&cfg, ops, params, 0, &made, &err), GM_OK);
    CU_ASSERT_PTR_NULL(made);
    CU_ASSERT_EQUAL_FATAL(gm_policy_lookup("oracle", &ops, &params, &err), GM_OK);
    CU_ASSERT_EQUAL(gm_engine_prepare(&cfg, ops, params, 0, &made, &err), GM_OK);
    CU_ASSERT_PTR_NOT_NULL(made);
    gm_policy_destroy(made);
    gm_sim_result_free(own);
    gm_preload_free(&pre);
    unlink(path);
}

/* a and b the same run of the same policy, figure by figure. */
static void same_result(const gm_sim_result *a, const gm_sim_result *b)
{
    CU_ASSERT_STRING_EQUAL(a->policy, b->policy);
    CU_ASSERT_EQUAL(a->policy_realizable, b->policy_realizable);
    CU_ASSERT_EQUAL(a->events, b->events);
    CU_ASSERT(same_metrics(&a->device, &b->device));
    CU_ASSERT_EQUAL(a->peak_device_used, b->peak_device_used);
    CU_ASSERT_EQUAL(a->capacity_free, b->capacity_free);
    CU_ASSERT_EQUAL(a->refused_calls, b->refused_calls);
    CU_ASSERT_EQUAL(a->independent, b->independent);
    CU_ASSERT_EQUAL(a->policy_inert, b->policy_inert);
    CU_ASSERT_EQUAL_FATAL(a->n_tenants, b->n_tenants);
    for (size_t i = 0; i < a->n_tenants; i++) {
        const gm_tenant_result *x = &a->t[i], *y = &b->t[i];
        CU_ASSERT(same_metrics(&x->m, &y->m));
        CU_ASSERT(same_report(x->policy_report, y->policy_report));
        CU_ASSERT_EQUAL(x->status, y->status);
        CU_ASSERT_EQUAL(x->events_done, y->events_done);
        CU_ASSERT_EQUAL(x->policy_asks, y->policy_asks);
        CU_ASSERT_EQUAL(x->c.n_driver_alloc, y->c.n_driver_alloc);
        CU_ASSERT_EQUAL(x->c.n_driver_free, y->c.n_driver_free);
        CU_ASSERT_EQUAL(x->c.reserved_bytes, y->c.reserved_bytes);
        CU_ASSERT_EQUAL(x->c.driver_free_ns, y->c.driver_free_ns);
        CU_ASSERT_EQUAL(x->c.released_bytes, y->c.released_bytes);
        CU_ASSERT_EQUAL(x->has_stats, y->has_stats);
        CU_ASSERT(!memcmp(&x->stats, &y->stats, sizeof x->stats));
        CU_ASSERT_STRING_EQUAL(x->trace_hash, y->trace_hash);
    }
}

/* For each policy: whether r (run with its own policy) is its run too
 * (gm_same_run), and where it says so, the copy is what running it gives. */
static int shared_ok(const gm_sim_config *cfg, const gm_sim_result *r, const char *spec)
{
    int same = gm_same_run(r, spec);
    if (!same) return 0;
    gm_sim_config c = *cfg;
    c.policy = spec;
    gm_sim_result *direct = NULL, *copy = NULL;
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_simulate(&c, &direct, &err), GM_OK);
    CU_ASSERT_EQUAL_FATAL(gm_same_run_copy(r, spec, &copy, &err), GM_OK);
    same_result(copy, direct);
    gm_sim_result_free(direct);
    gm_sim_result_free(copy);
    return 1;
}

/* One run for several policies (study/same_run.h): where no driver call
 * was refused, pytorch's run is lru's and priority's, and the copy is
 * what running each gives; where one was refused, or a policy acts
 * before a grow (pytorch's garbage collection, a threshold), every run
 * is its own. compare, sharing, gives what each policy's run alone does. */
static void test_shared_runs(void)
{
    gm_err err = {0};
    gm_bert_stats st;
    const char *path = bert_trace("shared.h5", 30, &st);
    gm_tenant_spec spec[2] = {{.path = path, .repeat = 1},
                              {.path = path, .repeat = 1, .offset_ns = 3000000}};
    gm_sim_config cfg = bert_config(spec, 1, 80 * GM_GiB);
    cfg.on_oom_skip = 1;
    static const char *const pol[] = {"pytorch",
                                      "lru",
                                      "priority",
                                      "predictive",
                                      "oracle",
                                      "lru:threshold=0.5",
                                      "priority:order=parameter"};
    enum { NP = sizeof pol / sizeof pol[0] };
    /* what is shared in each case: pytorch's run for the policies marked */
    struct {
        int tenants;
        uint64_t capacity;
        const char *conf;
        double fraction;
        const char *lead;
        int shared[NP];
        const char *allocator;
        int scope;
    } cases[] = {
        {1, 80 * GM_GiB, NULL, 0, "pytorch", {1, 1, 1, 0, 0, 0, 1}, NULL, 0},
        {2, 80 * GM_GiB, NULL, 0, "pytorch", {1, 1, 1, 0, 0, 0, 1}, NULL, 0},
        /* refused driver calls: each its own */
        {1, st.peak_live_bytes + st.peak_live_bytes / 10, NULL, 0, "pytorch", {0}, NULL, 0},
        /* pytorch's garbage collection acts before grows: not pytorch's run,
         * but lru's is priority's */
        {1,
         80 * GM_GiB,
         "garbage_collection_threshold:0.5",
         0.1,
         "lru",
         {0, 1, 1, 0, 0, 0, 1},
         NULL,
         0},
        /* cudaMallocAsync's fraction refuses without asking the tenant's
         * policy; --scope device then asks the other tenant's: each its own */
        {2, 80 * GM_GiB, NULL, 0.04, "pytorch", {0}, "cuda-async", 1},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        gm_sim_config c = cfg;
        c.n_tenants = (size_t)cases[k].tenants;
        c.capacity_bytes = cases[k].capacity;
        c.alloc_conf = cases[k].conf;
        c.memory_fraction = cases[k].fraction;
        c.policy = cases[k].lead;
        c.allocator = cases[k].allocator;
        c.scope_device = cases[k].scope;
        gm_sim_result *r = NULL;
        CU_ASSERT_EQUAL_FATAL(gm_simulate(&c, &r, &err), GM_OK);
        if (!cases[k].shared[0] && !cases[k].shared[1]) /* refused: pytorch was asked */
            CU_ASSERT(r->t[0].policy_asks + (r->n_tenants > 1 ? r->t[1].policy_asks : 0) > 0);
        if (cases[k].conf) { /* the garbage collection released what lru keeps */
            gm_sim_config d = c;
            d.policy = "pytorch";
            gm_sim_result *gc = NULL;
            CU_ASSERT_EQUAL_FATAL(gm_simulate(&d, &gc, &err), GM_OK);
            CU_ASSERT(gc->t[0].c.n_driver_free > 0);
            CU_ASSERT_EQUAL(r->t[0].c.n_driver_free, 0);
            CU_ASSERT_EQUAL(gc->t[0].policy_asks, 0);
            gm_sim_result_free(gc);
        }
        for (size_t i = 0; i < NP; i++)
            CU_ASSERT_EQUAL(shared_ok(&c, r, pol[i]), cases[k].shared[i]);
        gm_sim_result_free(r);
        /* compare shares, and gives each policy's own run */
        gm_compare *cmp = NULL;
        CU_ASSERT_EQUAL_FATAL(gm_compare_run(&c, (char *const *)pol, NP, 2, &cmp, &err), GM_OK);
        /* shared: lru's and priority's runs (2, and the parameterless
         * priority's), or with the collection on, pytorch's is not theirs
         * but lru's is the two priorities' (compare leads with lru then) */
        size_t want = cases[k].conf ? 2 : cases[k].shared[1] ? 3 : 0;
        CU_ASSERT_EQUAL(cmp->n_shared, want);
        for (size_t i = 0; i < NP; i++) {
            gm_sim_config d = c;
            d.policy = pol[i];
            gm_sim_result *alone = NULL;
            CU_ASSERT_EQUAL_FATAL(gm_simulate(&d, &alone, &err), GM_OK);
            same_result(cmp->e[i].r, alone);
            gm_sim_result_free(alone);
        }
        gm_compare_free(cmp);
    }
    unlink(path);
}

/* fit's searches take the runs of the first policy that may share one
 * (study/same_run.h, fit.c's memo): every entry is what a fit of its
 * policy alone gives, on one thread and on three, and on one thread (the
 * lead's search first) lru and priority take its run on the trace's
 * device. With pytorch's garbage collection on, nothing is taken. */
static void test_fit_shared(void)
{
    gm_err err = {0};
    gm_bert_stats st;
    const char *path = bert_trace("fit_shared.h5", 20, &st);
    gm_tenant_spec spec = {.path = path, .repeat = 1};
    gm_sim_config cfg = bert_config(&spec, 1, 80 * GM_GiB);
    gm_preload pre; /* the runs replay it from memory, as fit's command does */
    CU_ASSERT_EQUAL_FATAL(
        gm_preload_config(&cfg, &pre, GM_PRELOAD_MAX_EVENTS, GM_PRELOAD_MAX_PACKED_BYTES, &err),
        GM_OK);
    static const char *const pol[] = {"pytorch", "lru", "predictive", "priority",
                                      "lru:threshold=0.5"};
    enum { NP = sizeof pol / sizeof pol[0] };
    for (int gc = 0; gc < 2; gc++) {
        gm_sim_config c = cfg;
        if (gc) c.alloc_conf = "garbage_collection_threshold:0.5", c.memory_fraction = 0.1;
        gm_fit *alone[NP];
        for (size_t i = 0; i < NP; i++) {
            char *one[] = {(char *)pol[i]};
            CU_ASSERT_EQUAL_FATAL(gm_fit_capacity(&c, one, 1, 1, 0, &alone[i], &err), GM_OK);
            CU_ASSERT_EQUAL(alone[i]->e[0].shared_runs, 0);
        }
        for (int threads = 1; threads <= 3; threads += 2) {
            gm_fit *f = NULL;
            CU_ASSERT_EQUAL_FATAL(gm_fit_capacity(&c, (char *const *)pol, NP, threads, 0, &f, &err),
                                  GM_OK);
            for (size_t i = 0; i < NP; i++) {
                const gm_fit_entry *x = &f->e[i], *y = &alone[i]->e[0];
                CU_ASSERT_EQUAL(x->found, y->found);
                CU_ASSERT_EQUAL(x->capacity, y->capacity);
                CU_ASSERT_EQUAL(x->oom_capacity, y->oom_capacity);
                CU_ASSERT_EQUAL(x->max_capacity, y->max_capacity);
                CU_ASSERT_EQUAL(x->peak_live, y->peak_live);
                CU_ASSERT_EQUAL(x->peak_reserved, y->peak_reserved);
                CU_ASSERT_EQUAL(x->runs, y->runs);
                int follower = i == 1 || i == 3; /* lru, priority */
                if (threads == 1) CU_ASSERT_EQUAL(x->shared_runs > 0, follower && !gc);
                if (!follower || gc) CU_ASSERT_EQUAL(x->shared_runs, 0);
            }
            gm_fit_free(f);
        }
        for (size_t i = 0; i < NP; i++)
            gm_fit_free(alone[i]);
        /* compare's fits, when even its winner has an OOM: one fit of the
         * ranked policies together, each answer its policy's alone */
        gm_sim_config tight = c;
        tight.capacity_bytes = st.peak_live_bytes;
        gm_compare *cmp = NULL;
        CU_ASSERT_EQUAL_FATAL(gm_compare_run(&tight, (char *const *)pol, NP, 2, &cmp, &err), GM_OK);
        CU_ASSERT_FATAL(cmp->winner >= 0 && cmp->e[cmp->winner].r->device.n_oom > 0);
        CU_ASSERT_EQUAL_FATAL(gm_compare_fit(&tight, cmp, 2, 0, &err), GM_OK);
        CU_ASSERT(cmp->fitted);
        CU_ASSERT_EQUAL(cmp->n_ranked, NP);
        for (size_t k = 0; k < cmp->n_ranked; k++) {
            const gm_compare_entry *x = &cmp->e[cmp->rank[k]];
            char *one[] = {(char *)x->spec};
            gm_fit *f1 = NULL;
            CU_ASSERT_EQUAL_FATAL(gm_fit_capacity(&tight, one, 1, 1, 0, &f1, &err), GM_OK);
            CU_ASSERT_EQUAL(x->fit_found, f1->e[0].found);
            CU_ASSERT_EQUAL(x->fit_capacity, f1->e[0].capacity);
            CU_ASSERT_EQUAL(x->fit_max, f1->e[0].max_capacity);
            gm_fit_free(f1);
        }
        gm_compare_free(cmp);
        /* the copies search (fit --tenants): its runs of k copies */
        gm_fit *talone[NP], *t = NULL;
        for (size_t i = 0; i < NP; i++) {
            char *one[] = {(char *)pol[i]};
            CU_ASSERT_EQUAL_FATAL(gm_fit_tenants(&c, one, 1, 1, 8, 0, &talone[i], &err), GM_OK);
        }
        CU_ASSERT_EQUAL_FATAL(gm_fit_tenants(&c, (char *const *)pol, NP, 1, 8, 0, &t, &err), GM_OK);
        for (size_t i = 0; i < NP; i++) {
            const gm_fit_entry *x = &t->e[i], *y = &talone[i]->e[0];
            CU_ASSERT_EQUAL(x->copies_fit, y->copies_fit);
            CU_ASSERT_EQUAL(x->copies_tried, y->copies_tried);
            CU_ASSERT_EQUAL(x->first_fail_completed, y->first_fail_completed);
            CU_ASSERT_EQUAL(x->runs, y->runs);
            int follower = i == 1 || i == 3;
            CU_ASSERT_EQUAL(x->shared_runs > 0, follower && !gc);
            gm_fit_free(talone[i]);
        }
        gm_fit_free(t);
    }
    gm_preload_free(&pre);
    unlink(path);
}

int gm_test_register(void)
{
    CU_pSuite s = CU_add_suite("compare", NULL, NULL);
    if (!s) return CU_get_error();
    CU_add_test(s, "compare on 3 threads is the compare on 1", test_compare_threads);
    CU_add_test(s, "a run shared between policies is each one's run", test_shared_runs);
    CU_add_test(s, "a run given its policy's preparation is its own run", test_prepared_run);
    CU_add_test(s, "fit's shared runs give each policy's own search", test_fit_shared);
    return CU_get_error();
}
