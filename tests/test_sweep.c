/*
 * test_sweep.c - the sweep spec (study/SWEEP.md) and its results: cases in
 * their documented order with unique keys, specs refused with the fault
 * named, the per-group ranking (the one ranking, ties by case order), and
 * the JSON read back by --resume giving rows equal to the ones written.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bert_trace.h"
#include "cu.h"
#include "base/units.h"
#include "reports/sweep_out.h"
#include "study/sweep.h"

static const char *write_spec(const char *name, const char *text)
{
    const char *path = gm_test_tmp(name);
    FILE *f = fopen(path, "w");
    CU_ASSERT_FATAL(f != NULL);
    fputs(text, f);
    fclose(f);
    return path;
}

static void test_cases(void)
{
    const char *path = write_spec("s.json", "{\"traces\": [\"a.h5\", \"/abs/b.h5\"],"
                                            " \"capacities\": [\"16GiB\", 1048576],"
                                            " \"gpus\": [\"h100-80gb\"],"
                                            " \"allocators\": [\"pytorch\", \"rmm-pool:initial_"
                                            "pool_size:1GiB\", {\"name\": \"tf-bfc\"}],"
                                            " \"policies\": [\"pytorch\", \"lru\"]}");
    gm_sweep_plan *p = NULL;
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_sweep_plan_load(path, &p, &err), GM_OK);
    CU_ASSERT_EQUAL(p->n_cases, 2 * 3 * 3 * 2); /* mixes x devices x allocators x policies */
    /* mix-major, then device, allocator, policy */
    gm_sweep_case c = gm_sweep_case_at(p, 0);
    CU_ASSERT(c.mix == 0 && c.device == 0 && c.alloc == 0 && c.policy == 0);
    c = gm_sweep_case_at(p, 1);
    CU_ASSERT(c.mix == 0 && c.device == 0 && c.alloc == 0 && c.policy == 1);
    c = gm_sweep_case_at(p, 2);
    CU_ASSERT(c.mix == 0 && c.device == 0 && c.alloc == 1 && c.policy == 0);
    c = gm_sweep_case_at(p, 6);
    CU_ASSERT(c.mix == 0 && c.device == 1 && c.alloc == 0 && c.policy == 0);
    c = gm_sweep_case_at(p, 18);
    CU_ASSERT(c.mix == 1 && c.device == 0 && c.alloc == 0 && c.policy == 0);
    char key[GM_SWEEP_KEY];
    gm_sweep_case_key(p, 3, key, sizeof key);
    CU_ASSERT_STRING_EQUAL(key, "a.h5 | 16GiB | rmm-pool:initial_pool_size:1GiB | lru");
    gm_sweep_case_key(p, 35, key, sizeof key);
    CU_ASSERT_STRING_EQUAL(key, "/abs/b.h5 | h100-80gb | tf-bfc | lru");
    CU_ASSERT_EQUAL(p->devices[1].capacity, 1048576);
    CU_ASSERT_STRING_EQUAL(p->devices[1].label, "1048576");
    CU_ASSERT_EQUAL(p->devices[2].capacity, 85045477376ull); /* the GPU table's figure */
    /* relative paths are the spec's folder's; absolute ones stay */
    CU_ASSERT_STRING_EQUAL(p->mixes[0].t[0].path, GM_BINARY_DIR "/tests/a.h5");
    CU_ASSERT_STRING_EQUAL(p->mixes[1].t[0].path, "/abs/b.h5");
    for (size_t i = 0; i < p->n_cases; i++)
        for (size_t j = 0; j < i; j++) {
            char k2[GM_SWEEP_KEY];
            gm_sweep_case_key(p, i, key, sizeof key);
            gm_sweep_case_key(p, j, k2, sizeof k2);
            CU_ASSERT(strcmp(key, k2) != 0);
        }
    gm_sweep_plan_free(p);
    remove(path);
}

static void test_bad_specs(void)
{
    static const struct {
        const char *text, *says;
    } cases[] = {
        {"[1]", "JSON object"},
        {"{\"traces\": []}", "no trace"},
        {"{\"traces\": [\"a.h5\"], \"polices\": []}", "unknown key \"polices\""},
        {"{\"traces\": [\"a.h5\", \"a.h5\"]}", "listed twice"},
        {"{\"traces\": [\"a.h5\"], \"allocators\": [\"jemalloc\"]}", "rmm-pool"},
        {"{\"traces\": [\"a.h5\"], \"policies\": [\"best\"]}", "lru"},
        {"{\"traces\": [\"a.h5\"], \"gpus\": [\"z80\"]}", "a100-40gb"},
        {"{\"traces\": [\"a.h5\"], \"capacities\": [\"lots\"]}", "capacities[0]"},
        {"{\"traces\": [{\"trace\": \"a.h5\", \"repeat\": 0}]}", "repeat"},
        {"{\"traces\": [{\"trace\": \"a.h5\", \"offset\": \"soon\"}]}", "offset"},
        {"{\"mixes\": [{\"tenants\": []}]}", "mixes[0]"},
        {"{\"traces\": [\"a.h5\"], \"on_oom\": \"retry\"}", "on_oom"},
        {"{\"traces\": [\"a.h5\"],}", "line 1"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *path = write_spec("bad.json", cases[i].text);
        gm_sweep_plan *p = NULL;
        gm_err err = {0};
        CU_ASSERT_EQUAL(gm_sweep_plan_load(path, &p, &err), GM_EINVAL);
        CU_ASSERT_PTR_NULL(p);
        if (!strstr(err.msg, cases[i].says))
            fprintf(stderr, "spec %s: message '%s' lacks '%s'\n", cases[i].text, err.msg,
                    cases[i].says);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, cases[i].says));
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, path));
        remove(path);
    }
}

/* Ranking within each (mix, device) group: fewer OOMs, then lower
 * fragmentation (to 0.01 %), then higher utilization, then less driver
 * time; ties by case order; failed cases and the oracle get 0. */
static void test_rank(void)
{
    const char *path = write_spec("r.json", "{\"traces\": [\"a.h5\"], \"capacities\": [\"1GiB\", "
                                            "\"2GiB\"], \"policies\": [\"pytorch\", \"lru\", "
                                            "\"priority\", \"oracle\"]}");
    gm_sweep_plan *p = NULL;
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_sweep_plan_load(path, &p, &err), GM_OK);
    CU_ASSERT_EQUAL_FATAL(p->n_cases, 8);
    gm_sweep_row r[8];
    memset(r, 0, sizeof r);
    for (int i = 0; i < 8; i++) {
        r[i].index = (uint32_t)i;
        r[i].realizable = (i % 4) != 3; /* the oracle */
        r[i].utilization = 0.5;
    }
    /* group 1 GiB: pytorch 1 OOM; lru 0 OOMs frag 0.20; priority 0 OOMs frag 0.10 */
    r[0].oom_count = 1;
    r[1].fragmentation = 0.20;
    r[2].fragmentation = 0.10;
    r[3].oom_count = 0; /* the oracle: best figures, but a bound */
    /* group 2 GiB: all equal but priority failed; ties keep the case order */
    r[6].status = GM_EINVAL;
    /* 0.100004 and 0.10 are the same to 0.01 %: utilization decides */
    r[4].fragmentation = 0.100004;
    r[5].fragmentation = 0.10;
    r[5].utilization = 0.6;
    gm_sweep_rank(p, r);
    CU_ASSERT_EQUAL(r[2].rank, 1);
    CU_ASSERT_EQUAL(r[1].rank, 2);
    CU_ASSERT_EQUAL(r[0].rank, 3);
    CU_ASSERT_EQUAL(r[3].rank, 0);
    CU_ASSERT_EQUAL(r[5].rank, 1);
    CU_ASSERT_EQUAL(r[4].rank, 2);
    CU_ASSERT_EQUAL(r[6].rank, 0);
    CU_ASSERT_EQUAL(r[7].rank, 0);
    gm_sweep_plan_free(p);
    remove(path);
}

/* gm_sweep_progress counting the rows taken from another case's run
 * (reported as done in no time). */
static void count_copied(void *ctx, const gm_sweep_row *row, double seconds)
{
    (void)row;
    *(int *)ctx += seconds == 0;
}

/* A sweep's cases whose runs are one (pytorch's, lru's and priority's
 * where no driver call is refused, study/same_run.h) are simulated once:
 * every row is the row of its case run alone, on 1 thread and on 3, on a
 * device that fits, one that refuses calls, with two tenants. */
static void test_shared_rows(void)
{
    gm_bert_stats st;
    const char *trace = bert_trace("sweep_shared.h5", 8, &st);
    char text[2048];
    snprintf(text, sizeof text,
             "{\"traces\": [\"%s\"], \"mixes\": [{\"name\": \"two\", \"tenants\": [\"%s\", "
             "{\"trace\": \"%s\", \"offset\": \"2ms\"}]}], \"capacities\": [\"80GiB\", %llu],"
             " \"policies\": [\"pytorch\", \"predictive\", \"lru\", \"priority\", "
             "\"lru:threshold=0.5\"]}",
             trace, trace, trace,
             (unsigned long long)(st.peak_live_bytes + st.peak_live_bytes / 10 + 512ull * GM_MiB));
    const char *path = write_spec("shared.json", text);
    gm_sweep_plan *p = NULL;
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_sweep_plan_load(path, &p, &err), GM_OK);
    size_t n = p->n_cases;
    CU_ASSERT_EQUAL_FATAL(n, 20);
    gm_sweep_row *alone = calloc(n, sizeof *alone), *rows = calloc(n, sizeof *rows);
    size_t *todo = calloc(n, sizeof *todo);
    CU_ASSERT_FATAL(alone && rows && todo);
    for (size_t i = 0; i < n; i++) {
        todo[i] = i;
        gm_sweep_run_case(p, i, &alone[i]);
        CU_ASSERT_EQUAL(alone[i].status, GM_OK);
    }
    int refused = 0;
    for (size_t i = 0; i < n; i++)
        refused |= alone[i].oom_count > 0;
    CU_ASSERT(refused); /* the tight device has OOMs: nothing shared there */
    for (int threads = 1; threads <= 3; threads += 2) {
        memset(rows, 0, n * sizeof *rows);
        int copied = 0;
        gm_sweep_run(p, todo, n, threads, rows, count_copied, &copied);
        for (size_t i = 0; i < n; i++)
            CU_ASSERT(!memcmp(&rows[i], &alone[i], sizeof rows[i]));
        CU_ASSERT_EQUAL(copied, 4); /* lru and priority on 80 GiB, alone and two */
    }
    free(alone);
    free(rows);
    free(todo);
    gm_sweep_plan_free(p);
    remove(path);
    remove(trace);
}

/* --resume reads back exactly what was written (doubles included). */
static void test_resume_roundtrip(void)
{
    const char *path = write_spec("rt.json", "{\"traces\": [\"a.h5\"], \"capacities\": [\"1GiB\"], "
                                             "\"allocators\": [\"pytorch\", \"cuda-async\"]}");
    gm_sweep_plan *p = NULL;
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_sweep_plan_load(path, &p, &err), GM_OK);
    gm_sweep_row w[2], rd[2];
    memset(w, 0, sizeof w);
    memset(rd, 0, sizeof rd);
    for (int i = 0; i < 2; i++) {
        w[i].index = (uint32_t)i;
        w[i].realizable = 1;
        snprintf(w[i].allocator, sizeof w[i].allocator, "%s", i ? "cuda-async" : "pytorch");
        snprintf(w[i].trace_hash, sizeof w[i].trace_hash, "0123456789abcdef");
        w[i].capacity_bytes = 1ull << 30;
        w[i].n_tenants = w[i].tenants_completed = 1;
        w[i].oom_count = (uint64_t)i;
        w[i].peak_live = 123456789 + (uint64_t)i;
        w[i].peak_allocated = w[i].peak_reserved = w[i].peak_device_used = 987654321;
        w[i].fragmentation = 1.0 / 3.0;
        w[i].frag_time_weighted = 0.1 + 0.2;
        w[i].utilization = 2.0 / 3.0;
        w[i].ext_frag_mean = 1e-17;
        w[i].driver_allocs = 7, w[i].driver_frees = 5, w[i].driver_ns = 1234567, w[i].events = 99;
    }
    gm_sweep_rank(p, w);
    const char *out = gm_test_tmp("rt-out.json");
    CU_ASSERT_EQUAL_FATAL(gm_sweep_write_json(p, w, out, &err), GM_OK);
    unsigned char done[2] = {0, 0};
    size_t n = 0;
    CU_ASSERT_EQUAL_FATAL(gm_sweep_read_done(p, out, rd, done, &n, &err), GM_OK);
    CU_ASSERT_EQUAL(n, 2);
    gm_sweep_rank(p, rd);
    for (int i = 0; i < 2; i++) {
        CU_ASSERT_EQUAL(done[i], 1);
        CU_ASSERT_EQUAL(memcmp(&w[i], &rd[i], sizeof w[i]), 0); /* bit for bit */
    }
    /* a missing file: nothing done; another schema: refused */
    n = 9;
    CU_ASSERT_EQUAL(gm_sweep_read_done(p, gm_test_tmp("none.json"), rd, done, &n, &err), GM_OK);
    CU_ASSERT_EQUAL(n, 0);
    CU_ASSERT_EQUAL(gm_sweep_read_done(p, path, rd, done, &n, &err), GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "gmsim sweep"));
    remove(out);
    remove(path);
    gm_sweep_plan_free(p);
}

int gm_test_register(void)
{
    CU_pSuite s = CU_add_suite("sweep", NULL, NULL);
    if (!s) return CU_get_error();
    GM_ADD_TEST(s, test_cases);
    GM_ADD_TEST(s, test_bad_specs);
    GM_ADD_TEST(s, test_rank);
    GM_ADD_TEST(s, test_resume_roundtrip);
    GM_ADD_TEST(s, test_shared_rows);
    return CUE_SUCCESS;
}
