/*
 * test_pool.c - the thread pool (study/pool.h): the plan splits jobs of
 * known cost with the least makespan, as a search over every split finds;
 * every job runs once on any thread count; a thread whose own jobs are
 * done takes the others' not yet started ones.
 */
#include <CUnit/CUnit.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "cu.h"
#include "study/pool.h"

static double span_of(const double *cost, const int *share, size_t n, int threads)
{
    double load[16] = {0}, m = 0;
    for (size_t i = 0; i < n; i++) {
        CU_ASSERT_FATAL(share[i] >= 0 && share[i] < threads);
        load[share[i]] += cost[i];
    }
    for (int b = 0; b < threads; b++)
        m = load[b] > m ? load[b] : m;
    return m;
}

/* The least makespan over all threads^n splits. */
static double brute(const double *cost, size_t n, int threads)
{
    size_t total = 1;
    for (size_t i = 0; i < n; i++)
        total *= (size_t)threads;
    double best = -1;
    int share[16];
    for (size_t code = 0; code < total; code++) {
        size_t c = code;
        for (size_t i = 0; i < n; i++, c /= (size_t)threads)
            share[i] = (int)(c % (size_t)threads);
        double load[16] = {0}, m = 0;
        for (size_t i = 0; i < n; i++)
            load[share[i]] += cost[i];
        for (int b = 0; b < threads; b++)
            m = load[b] > m ? load[b] : m;
        if (best < 0 || m < best) best = m;
    }
    return best;
}

/* compare's five policies on two threads: the two timed ones together
 * (3.0), where the greedy split, costliest first, gives 3.4. */
static void test_plan_compare(void)
{
    const double cost[5] = {1, 1, 1, 1.4, 1.3}; /* pytorch lru priority predictive oracle */
    int share[5];
    double m = gm_pool_plan(5, cost, 2, share);
    CU_ASSERT_DOUBLE_EQUAL(m, 3.0, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(span_of(cost, share, 5, 2), m, 1e-9);
    CU_ASSERT_EQUAL(share[3], share[4]);
    CU_ASSERT_EQUAL(share[0], share[1]);
    CU_ASSERT_EQUAL(share[1], share[2]);
    CU_ASSERT_NOT_EQUAL(share[0], share[3]);
    /* one thread: everything on it; more threads than jobs: one each */
    CU_ASSERT_DOUBLE_EQUAL(gm_pool_plan(5, cost, 1, share), 5.7, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(gm_pool_plan(5, cost, 9, share), 1.4, 1e-9);
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < i; j++)
            CU_ASSERT_NOT_EQUAL(share[i], share[j]);
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double next_cost(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return 0.5 + (double)(rng >> 40) / (double)(1ull << 24) * 2; /* [0.5, 2.5) */
}

/* Random lists of up to 8 jobs on 2 to 4 threads: the plan's makespan is
 * the least any split has. */
static void test_plan_exact(void)
{
    double cost[16];
    int share[16];
    for (int round = 0; round < 300; round++) {
        size_t n = 1 + (size_t)(round % 8);
        int threads = 2 + round % 3;
        for (size_t i = 0; i < n; i++)
            cost[i] = round % 5 ? next_cost() : (double)(1 + i % 3); /* ties too */
        double m = gm_pool_plan(n, cost, threads, share);
        double b = brute(cost, n, threads);
        CU_ASSERT_DOUBLE_EQUAL(m, b, 1e-9);
        CU_ASSERT_DOUBLE_EQUAL(span_of(cost, share, n, threads < (int)n ? threads : (int)n), m,
                               1e-9);
    }
}

/* Beyond GM_POOL_EXACT_JOBS the plan is the greedy split: every job on a
 * thread, within the greedy's bound of 4/3 of the even share plus one job. */
static void test_plan_greedy(void)
{
    double cost[40], sum = 0, most = 0;
    int share[40];
    for (size_t i = 0; i < 40; i++) {
        cost[i] = next_cost();
        sum += cost[i];
        most = cost[i] > most ? cost[i] : most;
    }
    double m = gm_pool_plan(40, cost, 3, share);
    CU_ASSERT_DOUBLE_EQUAL(span_of(cost, share, 40, 3), m, 1e-9);
    CU_ASSERT(m >= sum / 3 - 1e-9);
    CU_ASSERT(m <= sum / 3 + most);
}

typedef struct ran {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int count[64];
    int done;
    int timed_out;
} ran;

static void count_one(void *ctx, size_t i)
{
    ran *r = ctx;
    pthread_mutex_lock(&r->mu);
    r->count[i]++;
    r->done++;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

static void test_every_job_once(void)
{
    double cost[64];
    for (size_t i = 0; i < 64; i++)
        cost[i] = next_cost();
    static const int threads[] = {0, 1, 2, 3, 8, 100};
    for (size_t t = 0; t < sizeof threads / sizeof *threads; t++)
        for (int weighted = 0; weighted < 2; weighted++) {
            ran r = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
            size_t n = 3 + 12 * t; /* up to 63 jobs */
            if (weighted)
                gm_parallel_for_cost(n, cost, threads[t], count_one, &r);
            else
                gm_parallel_for(n, threads[t], count_one, &r);
            for (size_t i = 0; i < 64; i++)
                CU_ASSERT_EQUAL(r.count[i], i < n ? 1 : 0);
        }
}

/* Job 0 (thread 0's first) waits until the three others are done: one of
 * them is thread 0's own second job, which only a steal by thread 1 can
 * run. Without stealing the wait times out. */
static void wait_or_count(void *ctx, size_t i)
{
    ran *r = ctx;
    if (i == 0) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 20;
        pthread_mutex_lock(&r->mu);
        while (r->done < 3 && !r->timed_out)
            if (pthread_cond_timedwait(&r->cv, &r->mu, &until) == ETIMEDOUT) r->timed_out = 1;
        pthread_mutex_unlock(&r->mu);
    }
    count_one(ctx, i);
}

static void test_steal(void)
{
    const double cost[4] = {1, 1, 1, 1};
    int share[4];
    gm_pool_plan(4, cost, 2, share);
    CU_ASSERT_EQUAL(share[0], share[2]); /* thread 0: jobs 0 and 2 */
    ran r = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    gm_parallel_for_cost(4, cost, 2, wait_or_count, &r);
    CU_ASSERT_FALSE(r.timed_out);
    for (size_t i = 0; i < 4; i++)
        CU_ASSERT_EQUAL(r.count[i], 1);
}

static void note_order(void *ctx, size_t i)
{
    ran *r = ctx;
    pthread_mutex_lock(&r->mu);
    r->count[r->done++] = (int)i;
    pthread_mutex_unlock(&r->mu);
}

/* Ranked jobs: on one thread by rank, then by index; on more, each once. */
static void test_ranked(void)
{
    const double cost[6] = {1, 2, 3, 0.5, 4, 1};
    const int rank[6] = {2, 0, 1, 0, 1, 2};
    static const int order[6] = {1, 3, 2, 4, 0, 5};
    ran r = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    gm_parallel_for_ranked(6, cost, rank, 1, note_order, &r);
    CU_ASSERT_EQUAL_FATAL(r.done, 6);
    for (size_t i = 0; i < 6; i++)
        CU_ASSERT_EQUAL(r.count[i], order[i]);
    for (int threads = 2; threads <= 7; threads++) {
        ran c = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
        gm_parallel_for_ranked(6, cost, rank, threads, count_one, &c);
        for (size_t i = 0; i < 6; i++)
            CU_ASSERT_EQUAL(c.count[i], 1);
    }
}

int gm_test_register(void)
{
    CU_pSuite s = CU_add_suite("pool", NULL, NULL);
    if (!s) return CU_get_error();
    GM_ADD_TEST(s, test_plan_compare);
    GM_ADD_TEST(s, test_plan_exact);
    GM_ADD_TEST(s, test_plan_greedy);
    GM_ADD_TEST(s, test_every_job_once);
    GM_ADD_TEST(s, test_steal);
    GM_ADD_TEST(s, test_ranked);
    return CU_get_error();
}
