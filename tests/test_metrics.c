/*
 * test_metrics.c - sim/metrics.c on hand-checked series: timeline buckets
 * (maxima, minima, end values, quiet buckets), coarsening (bucket pairs
 * merged), the time-weighted utilization, fragmentation, external
 * fragmentation samples, and the timeline columns of the JSON results.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cu.h"
#include "reports/results.h"
#include "sim/metrics.h"

#define EPS 1e-9

static void expect_bucket(const gm_tl_point *p, uint64_t t_ns, uint64_t q_min, uint64_t q_max,
                          uint64_t q_end, uint64_t a_min, uint64_t a_max, uint64_t a_end,
                          uint64_t r_min, uint64_t r_max, uint64_t r_end)
{
    CU_ASSERT_EQUAL(p->t_ns, t_ns);
    CU_ASSERT_EQUAL(p->q_min, q_min);
    CU_ASSERT_EQUAL(p->q_max, q_max);
    CU_ASSERT_EQUAL(p->q_end, q_end);
    CU_ASSERT_EQUAL(p->a_min, a_min);
    CU_ASSERT_EQUAL(p->a_max, a_max);
    CU_ASSERT_EQUAL(p->a_end, a_end);
    CU_ASSERT_EQUAL(p->r_min, r_min);
    CU_ASSERT_EQUAL(p->r_max, r_max);
    CU_ASSERT_EQUAL(p->r_end, r_end);
}

/*
 * The series (buckets of 1000 ns at first):
 *   t     Q   A   R
 *   0    10  16  32   bucket 0 opens
 *   100  50  64  96   the peaks
 *   500  20  32  96
 *   2500  5  16  64   bucket 1 is quiet (carries 20/32/96), bucket 2 opens
 *   2600 40  48  64
 */
static void series(gm_metrics *m)
{
    gm_metrics_init(m);
    CU_ASSERT_EQUAL(gm_metrics_step(m, 0, 10, 16, 32), 1);
    CU_ASSERT_EQUAL(gm_metrics_step(m, 100, 50, 64, 96), 0);
    gm_metrics_ext_sample(m, 16); /* R - A = 32: 1 - 16/32 = 0.5 */
    CU_ASSERT_EQUAL(gm_metrics_step(m, 500, 20, 32, 96), 0);
    CU_ASSERT_EQUAL(gm_metrics_step(m, 2500, 5, 16, 64), 1);
    CU_ASSERT_EQUAL(gm_metrics_step(m, 2600, 40, 48, 64), 0);
    gm_metrics_ext_sample(m, 12); /* R - A = 16: 1 - 12/16 = 0.25 */
    gm_metrics_timeline_end(m);   /* 2600 was a fast step: the end values are written now */
}

static void test_buckets(void)
{
    gm_metrics m;
    series(&m);
    const gm_timeline *tl = &m.tl;
    CU_ASSERT_EQUAL_FATAL(tl->n, 3);
    CU_ASSERT_EQUAL(tl->t0, 0);
    CU_ASSERT_EQUAL(tl->width_ns, 1000);
    expect_bucket(&tl->p[0], 0, 10, 50, 20, 16, 64, 32, 32, 96, 96);
    /* quiet: the state carried in is its min, max and end */
    expect_bucket(&tl->p[1], 1000, 20, 20, 20, 32, 32, 32, 96, 96, 96);
    /* opens with the carried state (20/32/96) held until t = 2500 */
    expect_bucket(&tl->p[2], 2000, 5, 40, 40, 16, 48, 48, 64, 96, 64);
    CU_ASSERT_DOUBLE_EQUAL(tl->p[0].ext_frag, 0.5, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(tl->p[1].ext_frag, -1, 0);
    CU_ASSERT_DOUBLE_EQUAL(tl->p[2].ext_frag, 0.25, 1e-6);
}

static void test_peaks_and_ratios(void)
{
    gm_metrics m;
    series(&m);
    CU_ASSERT_EQUAL(m.peak_q, 50);
    CU_ASSERT_EQUAL(m.peak_q_t, 100);
    CU_ASSERT_EQUAL(m.peak_a, 64);
    CU_ASSERT_EQUAL(m.peak_r, 96);
    CU_ASSERT_EQUAL(m.peak_r_t, 100);
    CU_ASSERT_EQUAL(m.n_events, 5);
    CU_ASSERT_EQUAL(m.t_first, 0);
    CU_ASSERT_EQUAL(m.t_last, 2600);
    /* 1 - peak A / peak R = 1 - 64/96 */
    CU_ASSERT_DOUBLE_EQUAL(gm_metrics_fragmentation(&m), 1.0 / 3.0, EPS);
    /* integral A = 16*100 + 64*400 + 32*2000 + 16*100 = 92800
     * integral R = 32*100 + 96*400 + 96*2000 + 64*100 = 240000
     * (the value set at 2600 has held for no time yet) */
    CU_ASSERT_DOUBLE_EQUAL(m.int_a, 92800, 0);
    CU_ASSERT_DOUBLE_EQUAL(m.int_r, 240000, 0);
    CU_ASSERT_DOUBLE_EQUAL(gm_metrics_utilization(&m), 92800.0 / 240000.0, EPS);
    CU_ASSERT_DOUBLE_EQUAL(gm_metrics_frag_time_weighted(&m), 1 - 92800.0 / 240000.0, EPS);
    /* two samples, 0.5 and 0.25 */
    CU_ASSERT_EQUAL(m.ext_frag_n, 2);
    CU_ASSERT_DOUBLE_EQUAL(gm_metrics_ext_frag_mean(&m), 0.375, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(m.ext_frag_max, 0.5, 1e-6);
}

static void test_ext_frag_undefined(void)
{
    gm_metrics m;
    gm_metrics_init(&m);
    gm_metrics_step(&m, 0, 64, 64, 64); /* nothing cached */
    gm_metrics_ext_sample(&m, 0);
    CU_ASSERT_EQUAL(m.ext_frag_n, 0);
    CU_ASSERT_DOUBLE_EQUAL(m.tl.p[0].ext_frag, -1, 0);
    CU_ASSERT_DOUBLE_EQUAL(gm_metrics_ext_frag_mean(&m), 0, 0);
    gm_metrics_step(&m, 10, 32, 32, 64); /* 32 cached in one block: not fragmented */
    gm_metrics_ext_sample(&m, 32);
    CU_ASSERT_EQUAL(m.ext_frag_n, 1);
    CU_ASSERT_DOUBLE_EQUAL(m.tl.p[0].ext_frag, 0, 0);
    gm_metrics_step(&m, 20, 32, 32, 64); /* in four 8-byte pieces: 1 - 8/32 */
    gm_metrics_ext_sample(&m, 8);
    CU_ASSERT_DOUBLE_EQUAL(m.ext_frag_max, 0.75, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(m.tl.p[0].ext_frag, 0.75, 1e-6); /* the bucket keeps its max */
    CU_ASSERT_DOUBLE_EQUAL(gm_metrics_ext_frag_mean(&m), 0.375, 1e-6);
    /* integral A = 64*10 + 32*10, integral R = 64*20 */
    CU_ASSERT_DOUBLE_EQUAL(gm_metrics_utilization(&m), 0.75, EPS);
    /* a zero-length run: utilization is the ratio now */
    gm_metrics_init(&m);
    gm_metrics_step(&m, 5, 32, 32, 64);
    gm_metrics_step(&m, 5, 16, 16, 64);
    CU_ASSERT_DOUBLE_EQUAL(gm_metrics_utilization(&m), 0.25, 0);
    CU_ASSERT_DOUBLE_EQUAL(gm_metrics_frag_time_weighted(&m), 0.75, 0);
    gm_metrics empty;
    gm_metrics_init(&empty);
    CU_ASSERT_DOUBLE_EQUAL(gm_metrics_utilization(&empty), 0, 0);
    CU_ASSERT_DOUBLE_EQUAL(gm_metrics_fragmentation(&empty), 0, 0);
    CU_ASSERT_DOUBLE_EQUAL(gm_metrics_frag_time_weighted(&empty), 0, 0);
}

/* A zigzag: event j at t = 1000 j (one per bucket), Q = j for even j and
 * 1000 + j for odd j, A = Q, R = 4096. */
static uint64_t zig(uint64_t j)
{
    return j % 2 ? 1000 + j : j;
}

static void test_coarsen(void)
{
    static gm_metrics m; /* ~60 KB: off the stack */
    gm_metrics_init(&m);
    for (uint64_t j = 0; j < GM_TIMELINE_POINTS; j++) {
        gm_metrics_step(&m, 1000 * j, zig(j), zig(j), 4096);
        if (j == 6) gm_metrics_ext_sample(&m, 4096 - 6 - 1022);   /* 1 - 3068/4090 */
        if (j == 7) gm_metrics_ext_sample(&m, (4096 - 1007) / 2); /* 1 - 1544/3089 */
    }
    CU_ASSERT_EQUAL_FATAL(m.tl.n, GM_TIMELINE_POINTS);
    CU_ASSERT_EQUAL(m.tl.width_ns, 1000);
    /* old bucket j holds {zig(j-1) carried in, zig(j)} */
    expect_bucket(&m.tl.p[7], 7000, 6, 1007, 1007, 6, 1007, 1007, 4096, 4096, 4096);

    /* one more bucket does not fit: pairs merge, the width doubles */
    CU_ASSERT_EQUAL(gm_metrics_step(&m, 1000 * GM_TIMELINE_POINTS, 5, 5, 4096), 1);
    const gm_timeline *tl = &m.tl;
    CU_ASSERT_EQUAL_FATAL(tl->n, GM_TIMELINE_POINTS / 2 + 1);
    CU_ASSERT_EQUAL(tl->width_ns, 2000);
    CU_ASSERT_EQUAL(tl->t0, 0);
    CU_ASSERT_EQUAL(tl->end_t, 2000ull * (GM_TIMELINE_POINTS / 2 + 1));
    /* merged bucket k = old 2k and 2k+1: {zig(2k-1), zig(2k), zig(2k+1)} */
    expect_bucket(&tl->p[0], 0, 0, 1001, 1001, 0, 1001, 1001, 4096, 4096, 4096);
    expect_bucket(&tl->p[3], 6000, 6, 1007, 1007, 6, 1007, 1007, 4096, 4096, 4096);
    expect_bucket(&tl->p[511], 1022000, 1022, 2023, 2023, 1022, 2023, 2023, 4096, 4096, 4096);
    /* the new bucket opens with the carried 2023, then 5 */
    expect_bucket(&tl->p[512], 1024000, 5, 2023, 5, 5, 2023, 5, 4096, 4096, 4096);
    /* ext_frag: the larger sample of the pair (old 6 and 7) */
    double f6 = 1.0 - (4096.0 - 6 - 1022) / (4096.0 - 6);
    double f7 = 1.0 - (double)((4096 - 1007) / 2) / (4096.0 - 1007);
    CU_ASSERT_DOUBLE_EQUAL(tl->p[3].ext_frag, f6 > f7 ? f6 : f7, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(tl->p[2].ext_frag, -1, 0);

    /* a jump far ahead with an odd count (513): the last bucket merges alone */
    CU_ASSERT_EQUAL(gm_metrics_step(&m, 2000ull * 2000, 9, 9, 4096), 1);
    CU_ASSERT_EQUAL(tl->width_ns, 4000);
    CU_ASSERT_EQUAL_FATAL(tl->n, 1001);
    /* old 510 + 511 = {zig(1019) ... zig(1023)} */
    expect_bucket(&tl->p[255], 1020000, 1020, 2023, 2023, 1020, 2023, 2023, 4096, 4096, 4096);
    expect_bucket(&tl->p[256], 1024000, 5, 2023, 5, 5, 2023, 5, 4096, 4096, 4096);
    expect_bucket(&tl->p[999], 3996000, 5, 5, 5, 5, 5, 5, 4096, 4096, 4096); /* quiet */
    expect_bucket(&tl->p[1000], 4000000, 5, 9, 9, 5, 9, 9, 4096, 4096, 4096);
}

/* The JSON timeline: the five historical columns first, minima after. */
/* gm_metrics_steps (a fast-forwarded cycle's steps, sim/ffwd.h) is the
 * same as one gm_metrics_step per value, bit for bit: every figure, every
 * bucket, with the series started either way, across bucket changes and
 * coarsening, equal times, new peaks inside a run of steps and samples of
 * external fragmentation at each new bucket. */
static void test_steps_batch(void)
{
    enum { N = 200000 };
    uint64_t *t = malloc(N * sizeof *t), *q = malloc(N * sizeof *q), *a = malloc(N * sizeof *a),
             *lf = malloc(N * sizeof *lf);
    gm_metrics *one = malloc(sizeof *one), *batch = malloc(sizeof *batch);
    CU_ASSERT_FATAL(t && q && a && lf && one && batch);
    unsigned x = 3;
    uint64_t now = 1000;
    for (size_t i = 0; i < N; i++) {
        x = x * 1103515245u + 12345u;
        now += (x >> 8) % 5 == 0 ? 0 : (x >> 10) % 20000; /* some steps at the same time */
        t[i] = now;
        q[i] = (x >> 4) % (1u << 30) + i * 100; /* rising: peaks inside runs */
        a[i] = q[i] + (x >> 12) % 4096;
        lf[i] = (x >> 6) % (64u << 20);
    }
    for (int warm = 0; warm < 2; warm++) {
        gm_metrics_init(one);
        gm_metrics_init(batch);
        uint64_t r = 3ull << 30;
        size_t start = 0;
        if (warm) { /* the series already started, with a few steps */
            for (; start < 7; start++) {
                if (gm_metrics_step(one, t[start], q[start], a[start], r))
                    gm_metrics_ext_sample(one, lf[start]);
                if (gm_metrics_step(batch, t[start], q[start], a[start], r))
                    gm_metrics_ext_sample(batch, lf[start]);
            }
        }
        for (size_t i = start; i < N; i++)
            if (gm_metrics_step(one, t[i], q[i], a[i], r)) gm_metrics_ext_sample(one, lf[i]);
        /* in uneven pieces, as cycles come: with a shift on the times */
        for (size_t i = start, k = 1; i < N; k = k * 7 % 1001 + 1) {
            size_t n = N - i < k ? N - i : k;
            uint64_t shift = 5;
            for (size_t j = 0; j < n; j++)
                t[i + j] -= shift;
            gm_metrics_steps(batch, &t[i], 1, shift, &q[i], &a[i], r, &lf[i], n);
            for (size_t j = 0; j < n; j++)
                t[i + j] += shift;
            i += n;
        }
        gm_metrics_timeline_end(one);
        gm_metrics_timeline_end(batch);
        CU_ASSERT(one->tl.n > 100);       /* many buckets, coarsened */
        CU_ASSERT(one->ext_frag_n > 100); /* and sampled */
        CU_ASSERT_EQUAL(memcmp(one, batch, sizeof *one), 0);
    }
    free(t), free(q), free(a), free(lf), free(one), free(batch);
}

static void test_json_columns(void)
{
    gm_metrics m;
    series(&m);
    json_t *j = gm_metrics_json(&m, 1024);
    json_t *tl = json_object_get(j, "timeline");
    const char *want[] = {"t_ns",     "requested_max", "allocated_max", "reserved_max",
                          "ext_frag", "requested_min", "allocated_min", "reserved_min"};
    json_t *cols = json_object_get(tl, "columns"), *pts = json_object_get(tl, "points");
    CU_ASSERT_EQUAL_FATAL(json_array_size(cols), 8);
    for (size_t i = 0; i < 8; i++)
        CU_ASSERT_STRING_EQUAL(json_string_value(json_array_get(cols, i)), want[i]);
    CU_ASSERT_EQUAL_FATAL(json_array_size(pts), 3);
    json_t *row = json_array_get(pts, 2);
    CU_ASSERT_EQUAL_FATAL(json_array_size(row), 8);
    long long got[8], exp[8] = {2000, 40, 48, 96, 0, 5, 16, 64};
    for (size_t i = 0; i < 8; i++)
        got[i] = i == 4 ? 0 : (long long)json_integer_value(json_array_get(row, i));
    for (size_t i = 0; i < 8; i++)
        CU_ASSERT_EQUAL(got[i], exp[i]);
    CU_ASSERT_DOUBLE_EQUAL(json_real_value(json_array_get(row, 4)), 0.25, 1e-6);
    json_decref(j);
}

int gm_test_register(void)
{
    CU_pSuite s = CU_add_suite("metrics", NULL, NULL);
    if (!s) return CU_get_error();
    GM_ADD_TEST(s, test_buckets);
    GM_ADD_TEST(s, test_peaks_and_ratios);
    GM_ADD_TEST(s, test_ext_frag_undefined);
    GM_ADD_TEST(s, test_coarsen);
    GM_ADD_TEST(s, test_steps_batch);
    GM_ADD_TEST(s, test_json_columns);
    return CUE_SUCCESS;
}
