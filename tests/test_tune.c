/*
 * test_tune.c - gmsim tune's grid takes a setting's figures from the run
 * of the same settings with garbage_collection_threshold:0.6 where that
 * run never collected and nothing refused, or without max_split_size_mb
 * where no segment reached it (study/tune.c, shared):
 * every entry's figures are those of its settings run alone, on a device
 * where nothing presses (shared) and on one where the collection acts and
 * calls are refused (each its own), on one thread and on two.
 */
#include <CUnit/CUnit.h>
#include <unistd.h>

#include "bert_trace.h"
#include "cu.h"
#include "base/units.h"
#include "study/preload.h"
#include "study/simulate.h"
#include "study/tune.h"

/* Entry e's settings run alone, figure by figure. */
static void same_as_alone(const gm_sim_config *base, const gm_tune *t, const gm_tune_entry *e)
{
    gm_sim_config cfg = *base;
    cfg.alloc_conf = e->conf;
    cfg.memory_fraction = e->memory_fraction;
    cfg.torch_version = t->torch_version;
    cfg.no_device_stats = 1;
    gm_sim_result *r = NULL;
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_simulate(&cfg, &r, &err), GM_OK);
    const gm_metrics *d = &r->device;
    gm_alloc_counters tot = gm_sim_totals(r);
    CU_ASSERT_EQUAL(e->ooms, d->n_oom);
    CU_ASSERT_EQUAL(e->first_oom_index, d->n_oom_kept ? d->ooms[0].event_index : 0);
    CU_ASSERT_EQUAL(e->first_oom_size, d->n_oom_kept ? d->ooms[0].size : 0);
    CU_ASSERT_EQUAL(e->peak_live, d->peak_q);
    CU_ASSERT_EQUAL(e->peak_reserved, d->peak_r);
    CU_ASSERT_EQUAL(e->peak_allocated, d->peak_a);
    CU_ASSERT_DOUBLE_EQUAL(e->fragmentation, gm_metrics_fragmentation(d), 0);
    CU_ASSERT_EQUAL(e->driver_calls, tot.n_driver_alloc + tot.n_driver_free);
    CU_ASSERT_EQUAL(e->driver_ns, gm_counters_driver_ns(&tot));
    gm_sim_result_free(r);
}

static void test_tune_shared(void)
{
    gm_bert_stats st;
    const char *path = bert_trace("tune_shared.h5", 6, &st);
    gm_tenant_spec spec = {.path = path, .repeat = 1};
    gm_sim_config cfg = bert_config(&spec, 1, 0);
    cfg.on_oom_skip = 1;
    gm_preload pre;
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(
        gm_preload_config(&cfg, &pre, GM_PRELOAD_MAX_EVENTS, GM_PRELOAD_MAX_PACKED_BYTES, &err),
        GM_OK);
    /* a device where nothing presses, one where the collection acts and
     * calls are refused */
    const uint64_t caps[] = {80 * GM_GiB, st.peak_live_bytes + st.peak_live_bytes / 5 + GM_GiB / 2};
    for (size_t k = 0; k < 2; k++)
        for (int threads = 1; threads <= 2; threads++) {
            gm_sim_config c = cfg;
            c.capacity_bytes = caps[k];
            gm_tune *t = NULL;
            CU_ASSERT_EQUAL_FATAL(gm_tune_run(&c, threads, &t, &err), GM_OK);
            CU_ASSERT_EQUAL(t->n, 120);
            /* on 80 GiB: every no-collection and 0.8 setting (80), and
             * max_split_size_mb 128, 256 and 512 without expandable segments
             * with collection 0.6 (12: the trace's largest segment is ~90 MiB) */
            if (k == 0) CU_ASSERT_EQUAL(t->n_shared, 92);
            if (k == 1) { /* the collection or the limit acted in some: each ran */
                CU_ASSERT(t->n_shared < 80);
                int differ = 0;
                for (size_t i = 0; i < 120; i++) /* i: no gc; i + 4: its gc 0.6 twin */
                    if (i % 12 < 4)
                        differ |= t->e[i].peak_reserved != t->e[i + 4].peak_reserved ||
                                  t->e[i].driver_calls != t->e[i + 4].driver_calls;
                CU_ASSERT(differ); /* grid order: ((x * 5 + m) * 3 + gc) * 4 + r */
            }
            for (size_t i = 0; i < t->n; i++)
                if (!t->e[i].skipped) same_as_alone(&c, t, &t->e[i]);
            gm_tune_free(t);
        }
    gm_preload_free(&pre);
    unlink(path);
}

int gm_test_register(void)
{
    CU_pSuite s = CU_add_suite("tune", NULL, NULL);
    if (!s) return CU_get_error();
    GM_ADD_TEST(s, test_tune_shared);
    return CU_get_error();
}
