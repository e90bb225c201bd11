/*
 * test_compare.c - compare runs its policies on a pool of threads
 * (study/pool.h): on three threads it ranks and measures exactly as on
 * one.
 */
#include <CUnit/CUnit.h>
#include <unistd.h>

#include "cu.h"
#include "base/units.h"
#include "study/compare.h"
#include "traces/gen_bert.h"

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
    gm_bert_params p;
    gm_bert_defaults(&p);
    p.iterations = 120; /* ~310 k events */
    gm_err err = {0};
    gm_bert_stats st;
    const char *path = gm_test_tmp("compare.h5");
    CU_ASSERT_EQUAL_FATAL(gm_bert_write_trace(path, &p, NULL, NULL, &st, &err), GM_OK);
    CU_ASSERT_FATAL(st.events > 300000);

    static const gm_latency lat = GM_LATENCY_DEFAULT;
    gm_tenant_spec spec = {.path = path, .repeat = 1};
    gm_sim_config cfg = {.tenants = &spec,
                         .n_tenants = 1,
                         .capacity_bytes = st.peak_live_bytes + st.peak_live_bytes / 10,
                         .overhead_bytes = GM_DEFAULT_OVERHEAD,
                         .latency = lat,
                         .on_oom_skip = 1}; /* every run to the end, OOMs or not */
    static const char *const pol[] = {"pytorch", "lru", "priority", "predictive", "oracle"};
    gm_compare *one = NULL, *three = NULL;
    CU_ASSERT_EQUAL_FATAL(gm_compare_run(&cfg, (char *const *)pol, 5, 1, &one, &err), GM_OK);
    CU_ASSERT_EQUAL_FATAL(gm_compare_run(&cfg, (char *const *)pol, 5, 3, &three, &err), GM_OK);
    same_compare(one, three);
    for (size_t i = 0; i < one->n; i++)
        CU_ASSERT_EQUAL(one->e[i].r->events, st.events); /* every run to the end */
    gm_compare_free(one);
    gm_compare_free(three);
    unlink(path);
}

int gm_test_register(void)
{
    CU_pSuite s = CU_add_suite("compare", NULL, NULL);
    if (!s) return CU_get_error();
    CU_add_test(s, "compare on 3 threads is the compare on 1", test_compare_threads);
    return CU_get_error();
}
