/*
 * test_pool.c - the time-sliced pool compare runs its simulations on
 * (study/pool.h, gm_parallel_sliced): never more jobs running than threads,
 * every job gets turns while others wait (a job that waits for all the
 * others to start finishes, which a plain pool of two threads never lets
 * happen with five jobs), and a compare whose runs take turns ranks and
 * measures exactly as one that runs them one after the other.
 */
#include <CUnit/CUnit.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cu.h"
#include "base/units.h"
#include "study/compare.h"
#include "study/pool.h"
#include "traces/gen_bert.h"

#define JOBS 5
#define THREADS 2

typedef struct turns {
    atomic_int running, max_running, started, gave_up;
    int done[JOBS];
} turns;

/* The job holds a turn between enter and leave. */
static void enter(turns *t)
{
    int now = atomic_fetch_add(&t->running, 1) + 1, seen = atomic_load(&t->max_running);
    while (now > seen && !atomic_compare_exchange_weak(&t->max_running, &seen, now)) {
    }
}

static void job(void *ctx, size_t i, gm_slicer *sl)
{
    turns *t = ctx;
    CU_ASSERT_PTR_NOT_NULL(sl); /* more jobs than threads: sliced */
    enter(t);
    atomic_fetch_add(&t->started, 1);
    /* wait, turn by turn, for every job to have started: only a pool that
     * hands the turns on lets the last ones start while these wait */
    for (long k = 0; sl && atomic_load(&t->started) < JOBS && k < 50000000L; k++) {
        atomic_fetch_sub(&t->running, 1);
        gm_slice_yield(sl);
        enter(t);
    }
    if (atomic_load(&t->started) < JOBS) atomic_fetch_add(&t->gave_up, 1);
    t->done[i]++;
    atomic_fetch_sub(&t->running, 1);
}

static void test_turns(void)
{
    turns t;
    memset(&t, 0, sizeof t);
    gm_parallel_sliced(JOBS, THREADS, job, &t);
    CU_ASSERT_EQUAL(atomic_load(&t.gave_up), 0);
    CU_ASSERT_EQUAL(atomic_load(&t.started), JOBS);
    CU_ASSERT(atomic_load(&t.max_running) <= THREADS);
    for (int i = 0; i < JOBS; i++)
        CU_ASSERT_EQUAL(t.done[i], 1); /* each job exactly once */
}

/* One thread, or no more jobs than threads: a plain pool, no slicer. */
static void plain_job(void *ctx, size_t i, gm_slicer *sl)
{
    int *done = ctx;
    CU_ASSERT_PTR_NULL(sl);
    done[i]++;
}

static void test_no_slicing_needed(void)
{
    int done[JOBS] = {0};
    gm_parallel_sliced(JOBS, 1, plain_job, done);
    gm_parallel_sliced(2, THREADS, plain_job, done);
    for (int i = 0; i < JOBS; i++)
        CU_ASSERT_EQUAL(done[i], i < 2 ? 2 : 1);
}

typedef struct vec {
    gm_event *v;
    size_t n, cap;
} vec;

static int sink(void *ctx, const gm_event *e, size_t n, gm_err *err)
{
    vec *v = ctx;
    if (v->n + n > v->cap) {
        size_t cap = v->cap ? 2 * v->cap : 4096;
        while (cap < v->n + n)
            cap *= 2;
        gm_event *p = realloc(v->v, cap * sizeof *p);
        if (!p) return gm_errf(err, GM_ENOMEM, "out of memory");
        v->v = p;
        v->cap = cap;
    }
    memcpy(v->v + v->n, e, n * sizeof *e);
    v->n += n;
    return GM_OK;
}

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
        CU_ASSERT(x->events > 3 * GM_SLICE_EVENTS); /* several turns each */
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

/* Five policies over a trace long enough for several turns each
 * (GM_SLICE_EVENTS), at a capacity that makes the policies differ. */
static void test_compare_same_in_turns(void)
{
    gm_bert_params p;
    gm_bert_defaults(&p);
    p.iterations = 4;
    vec ev = {0};
    gm_err err = {0};
    gm_bert_stats st;
    CU_ASSERT_EQUAL_FATAL(gm_bert_generate(&p, sink, NULL, &ev, &st, &err), GM_OK);
    while (ev.n <= 3 * GM_SLICE_EVENTS) { /* iterations are alike: about 3 turns' worth */
        p.iterations *= 2;
        ev.n = 0;
        CU_ASSERT_EQUAL_FATAL(gm_bert_generate(&p, sink, NULL, &ev, &st, &err), GM_OK);
    }
    CU_ASSERT_FATAL(ev.n > 3 * GM_SLICE_EVENTS);

    static const gm_latency lat = GM_LATENCY_DEFAULT;
    gm_tenant_spec spec = {.path = "bert", .events = ev.v, .n_events = ev.n, .repeat = 1};
    gm_sim_config cfg = {.tenants = &spec,
                         .n_tenants = 1,
                         .capacity_bytes = st.peak_live_bytes + st.peak_live_bytes / 10,
                         .overhead_bytes = GM_DEFAULT_OVERHEAD,
                         .latency = lat,
                         .on_oom_skip = 1}; /* every run to the end, OOMs or not */
    static const char *const pol[] = {"pytorch", "lru", "priority", "predictive", "oracle"};
    gm_compare *one = NULL, *turns3 = NULL;
    CU_ASSERT_EQUAL_FATAL(gm_compare_run(&cfg, (char *const *)pol, 5, 1, &one, &err), GM_OK);
    CU_ASSERT_EQUAL_FATAL(gm_compare_run(&cfg, (char *const *)pol, 5, 3, &turns3, &err), GM_OK);
    same_compare(one, turns3);
    gm_compare_free(one);
    gm_compare_free(turns3);
    free(ev.v);
}

int gm_test_register(void)
{
    CU_pSuite s = CU_add_suite("pool", NULL, NULL);
    if (!s) return CU_get_error();
    CU_add_test(s, "sliced: turns handed on, never more than threads", test_turns);
    CU_add_test(s, "sliced: one thread or few jobs, a plain pool", test_no_slicing_needed);
    CU_add_test(s, "compare in turns is the same compare", test_compare_same_in_turns);
    return CU_get_error();
}
