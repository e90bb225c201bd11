/*
 * test_scale.c - gmsim scale and fit --largest (study/scale.c,
 * study/largest.c): the size fit recovers lines and parabolas exactly,
 * rounds and clamps; recordings that do not align are refused with the
 * place and the reason; pre-existing blocks are matched; and the largest
 * value that fits is the one worked out by hand.
 */
#include "cu.h"

#include "base/units.h"
#include "study/largest.h"
#include "study/scale.h"
#include "traces/import_torch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* --------------------------------------------------------------- the fit */

static void test_fit_exact(void)
{
    int cl;
    /* a line: 4096 + 1000 x, known at 8 and 16: exact anywhere */
    int64_t xs[3] = {8, 16, 32};
    uint64_t lin[3] = {4096 + 8000, 4096 + 16000, 4096 + 32000};
    CU_ASSERT_EQUAL(gm_scale_fit(xs, lin, 2, 24, &cl), 4096 + 24000);
    CU_ASSERT_EQUAL(gm_scale_fit(xs, lin, 2, 1, &cl), 4096 + 1000);
    CU_ASSERT_EQUAL(gm_scale_fit(xs, lin, 2, 100000, &cl), 4096 + 100000000ull);
    CU_ASSERT_EQUAL(gm_scale_fit(xs, lin, 3, 24, &cl), 4096 + 24000); /* three: still the line */
    /* a parabola: 7 + 3 x + 5 x^2 (attention scores ~ seq^2) */
    uint64_t q[3];
    for (int i = 0; i < 3; i++)
        q[i] = 7 + 3 * (uint64_t)xs[i] + 5 * (uint64_t)(xs[i] * xs[i]);
    CU_ASSERT_EQUAL(gm_scale_fit(xs, q, 3, 24, &cl), 7 + 72 + 5 * 576);
    CU_ASSERT_EQUAL(gm_scale_fit(xs, q, 3, 4096, &cl), 7 + 3 * 4096ull + 5 * 4096ull * 4096);
    CU_ASSERT_EQUAL(cl, 0);
    /* batch x seq^2 sized at 2^40 bytes: no overflow in the exact arithmetic */
    int64_t s[3] = {1024, 2048, 4096};
    uint64_t big[3] = {1ull << 30, 1ull << 32, 1ull << 34};
    CU_ASSERT_EQUAL(gm_scale_fit(s, big, 3, 8192, &cl), 1ull << 36);
    /* constant: fixed */
    uint64_t c[3] = {123, 123, 123};
    CU_ASSERT_EQUAL(gm_scale_fit(xs, c, 3, 1000, &cl), 123);
}

static void test_fit_round_clamp(void)
{
    int cl;
    int64_t xs[2] = {2, 4};
    uint64_t y[2] = {10, 13};                            /* 7 + 1.5 x */
    CU_ASSERT_EQUAL(gm_scale_fit(xs, y, 2, 3, &cl), 12); /* 11.5 rounds up */
    CU_ASSERT_EQUAL(gm_scale_fit(xs, y, 2, 5, &cl), 15); /* 14.5 */
    CU_ASSERT_EQUAL(cl, 0);
    uint64_t d[2] = {100, 50}; /* shrinking: 150 - 25 x, negative past 6 */
    CU_ASSERT_EQUAL(gm_scale_fit(xs, d, 2, 8, &cl), 1);
    CU_ASSERT_EQUAL(cl, 1);
}

/* ----------------------------------------------------- synthetic traces */

/* A recording at value x: a parameter of 20 MiB (pre-existing, never
 * freed), a pre-existing buffer of x KiB freed by the first event, then
 * per iteration an activation of 4 x MiB and a temporary of x^2 KiB,
 * freed, on `stream`. */
static const char *write_rec(int64_t x, uint64_t stream, int iterations, int cat_act,
                             const char *name)
{
    gm_import_trace t;
    memset(&t, 0, sizeof t);
    gm_trace_meta_init(&t.meta);
    gm_trace_meta_set(&t.meta.source, "test");
    t.meta.device_total_bytes = 100 * GM_MiB;
    t.init = calloc(2, sizeof *t.init);
    t.init[0] = (gm_init_row){
        .addr = 0x1000, .size = 20 * GM_MiB, .kind = GM_INIT_BLOCK, .category = GM_CAT_PARAMETER};
    t.init[1] = (gm_init_row){.addr = 0x9000000,
                              .size = (uint64_t)x * GM_KiB,
                              .kind = GM_INIT_BLOCK,
                              .category = GM_CAT_TEMPORARY};
    t.n_init = 2;
    t.events = calloc(1 + 4 * (size_t)iterations, sizeof *t.events);
    size_t n = 0;
    uint64_t time = 1000;
    t.events[n++] = (gm_event){time,       0x9000000,        (uint64_t)x * GM_KiB, 0,
                               GM_OP_FREE, GM_CAT_TEMPORARY, GM_PHASE_FORWARD,     0,
                               0};
    for (int it = 0; it < iterations; it++) {
        uint64_t a = 0x20000000 + (uint64_t)it * 0x10000000, b = a + 0x8000000;
        time += 1000 * (uint64_t)x;
        t.events[n++] = (gm_event){time,
                                   a,
                                   4 * (uint64_t)x * GM_MiB,
                                   stream,
                                   GM_OP_ALLOC,
                                   (uint8_t)cat_act,
                                   GM_PHASE_FORWARD,
                                   0,
                                   0};
        t.events[n++] = (gm_event){time,
                                   b,
                                   (uint64_t)(x * x) * GM_KiB,
                                   stream,
                                   GM_OP_ALLOC,
                                   GM_CAT_TEMPORARY,
                                   GM_PHASE_FORWARD,
                                   0,
                                   0};
        time += 500;
        t.events[n++] = (gm_event){time,
                                   b,
                                   (uint64_t)(x * x) * GM_KiB,
                                   stream,
                                   GM_OP_FREE,
                                   GM_CAT_TEMPORARY,
                                   GM_PHASE_BACKWARD,
                                   0,
                                   0};
        t.events[n++] = (gm_event){time,
                                   a,
                                   4 * (uint64_t)x * GM_MiB,
                                   stream,
                                   GM_OP_FREE,
                                   (uint8_t)cat_act,
                                   GM_PHASE_BACKWARD,
                                   0,
                                   0};
    }
    t.n_events = n;
    const char *path = gm_test_tmp(name);
    gm_err err;
    int rc = gm_import_trace_write(&t, path, NULL, &err);
    if (rc) fprintf(stderr, "%s\n", err.msg);
    CU_ASSERT_FATAL(rc == GM_OK);
    gm_import_trace_free(&t);
    return path;
}

static void test_scale_recovers(void)
{
    char p3[3][512];
    snprintf(p3[0], sizeof p3[0], "%s", write_rec(3, 0, 2, GM_CAT_ACTIVATION, "s3.h5"));
    snprintf(p3[1], sizeof p3[1], "%s", write_rec(4, 0, 2, GM_CAT_ACTIVATION, "s4.h5"));
    snprintf(p3[2], sizeof p3[2], "%s", write_rec(6, 0, 2, GM_CAT_ACTIVATION, "s6.h5"));
    gm_scale_input in[3] = {{p3[0], 3}, {p3[1], 4}, {p3[2], 6}};
    gm_scale *s;
    gm_err err;
    CU_ASSERT_FATAL(gm_scale_open(in, 3, -1, &s, &err) == GM_OK);
    gm_scale_stats st;
    gm_scale_get_stats(s, &st);
    CU_ASSERT_EQUAL(st.allocs, 2 + 4); /* 2 pre-existing, 2 per iteration */
    CU_ASSERT_EQUAL(st.constant, 1);   /* the parameter */
    CU_ASSERT_EQUAL(st.linear, 3);     /* the x KiB buffer, the activations */
    CU_ASSERT_EQUAL(st.quadratic, 2);  /* the x^2 temporaries */
    gm_import_trace t;
    CU_ASSERT_FATAL(gm_scale_at(s, 10, &t, &err) == GM_OK);
    CU_ASSERT_EQUAL(t.n_init, 2);
    uint64_t pre = t.init[0].size + t.init[1].size;
    CU_ASSERT_EQUAL(pre, 20 * GM_MiB + 10 * GM_KiB);
    CU_ASSERT_EQUAL(t.n_events, 9);
    CU_ASSERT_EQUAL(t.events[1].size, 40 * GM_MiB);
    CU_ASSERT_EQUAL(t.events[2].size, 100 * GM_KiB);
    CU_ASSERT_EQUAL(t.events[0].op, GM_OP_FREE); /* the pre-existing buffer, 10 KiB */
    CU_ASSERT_EQUAL(t.events[0].size, 10 * GM_KiB);
    /* times: 1000 + 1000 x at the first alloc, on the line through 3 and 4 */
    CU_ASSERT_EQUAL(t.events[1].t_ns, 1000 + 10000);
    for (size_t i = 1; i < t.n_events; i++)
        CU_ASSERT(t.events[i].t_ns >= t.events[i - 1].t_ns);
    CU_ASSERT_EQUAL(strcmp(t.meta.source, "scaled"), 0);
    gm_import_trace_free(&t);
    /* at a recorded value the trace is that recording again */
    CU_ASSERT_FATAL(gm_scale_at(s, 4, &t, &err) == GM_OK);
    CU_ASSERT_EQUAL(t.events[1].size, 16 * GM_MiB);
    CU_ASSERT_EQUAL(t.events[2].size, 16 * GM_KiB);
    gm_import_trace_free(&t);
    gm_scale_free(s);
    for (int i = 0; i < 3; i++)
        unlink(p3[i]); /* the recordings: no file left behind */
}

static void expect_refusal(const char *a, const char *b, const char *what)
{
    gm_scale_input in[2] = {{a, 3}, {b, 4}};
    gm_scale *s = NULL;
    gm_err err;
    CU_ASSERT_EQUAL(gm_scale_open(in, 2, -1, &s, &err), GM_EINVAL);
    CU_ASSERT_PTR_NULL(s);
    CU_ASSERT(strstr(err.msg, "do not align") != NULL);
    CU_ASSERT(strstr(err.msg, what) != NULL);
    if (!strstr(err.msg, what)) fprintf(stderr, "message: %s\n", err.msg);
}

static void test_scale_refuses(void)
{
    char a[512], b[512], c[512], d[512];
    snprintf(a, sizeof a, "%s", write_rec(3, 0, 2, GM_CAT_ACTIVATION, "r3.h5"));
    snprintf(b, sizeof b, "%s", write_rec(4, 0, 3, GM_CAT_ACTIVATION, "r4-3it.h5"));
    snprintf(c, sizeof c, "%s", write_rec(4, 7, 2, GM_CAT_ACTIVATION, "r4-stream7.h5"));
    snprintf(d, sizeof d, "%s", write_rec(4, 0, 2, GM_CAT_UNKNOWN, "r4-unknown.h5"));
    /* different allocation counts: 4 against 6 allocations, where it ends */
    expect_refusal(a, b, "9 and 13 tensor events (4 and 6 allocations)");
    /* different streams: the allocation, both events and both streams */
    expect_refusal(a, c, "allocation 2 (events 1 and 1): stream 0 against stream 7");
    /* different categories */
    expect_refusal(a, d, "category activation against unknown");
    /* two recordings at one value; one recording only */
    gm_scale_input same[2] = {{a, 3}, {b, 3}};
    gm_scale *s;
    gm_err err;
    CU_ASSERT_EQUAL(gm_scale_open(same, 2, -1, &s, &err), GM_EUSAGE);
    CU_ASSERT(strstr(err.msg, "different values") != NULL);
    CU_ASSERT_EQUAL(gm_scale_open(same, 1, -1, &s, &err), GM_EUSAGE);
    /* a missing file */
    gm_scale_input miss[2] = {{a, 3}, {"/nonexistent/x.h5", 4}};
    CU_ASSERT_EQUAL(gm_scale_open(miss, 2, -1, &s, &err), GM_EIO);
    CU_ASSERT(strstr(err.msg, "/nonexistent/x.h5") != NULL);
    unlink(a);
    unlink(b);
    unlink(c);
    unlink(d);
}

static void test_input_parse(void)
{
    char path[64];
    int64_t x;
    gm_err err;
    CU_ASSERT(gm_scale_input_parse("a=b.pickle=16", path, sizeof path, &x, &err) == GM_OK);
    CU_ASSERT_STRING_EQUAL(path, "a=b.pickle");
    CU_ASSERT_EQUAL(x, 16);
    CU_ASSERT(gm_scale_input_parse("run.h5", path, sizeof path, &x, &err) == GM_EUSAGE);
    CU_ASSERT(gm_scale_input_parse("run.h5=0", path, sizeof path, &x, &err) == GM_EUSAGE);
    CU_ASSERT(gm_scale_input_parse("run.h5=8x", path, sizeof path, &x, &err) == GM_EUSAGE);
}

/*
 * fit --largest, by hand: the program holds a 20 MiB parameter and, at
 * value x, a 4x MiB activation (and an x^2 KiB temporary, a 2 MiB block at
 * most while x <= 45, freed before the next iteration). Above 10 MiB
 * PyTorch rounds a request to 2 MiB and gives it a segment of its own, so
 * at x the device holds 20 + 4x MiB of segments plus the small pool's
 * 2 MiB segments: on a 100 MiB device with no context overhead, x = 19
 * needs 20 + 76 + 2 (the temporary's segment) = 98 MiB and fits; x = 20
 * needs 20 + 80 + 2 = 102 MiB and does not.
 */
static void test_largest_by_hand(void)
{
    char a[512], b[512];
    snprintf(a, sizeof a, "%s", write_rec(3, 0, 2, GM_CAT_ACTIVATION, "l3.h5"));
    snprintf(b, sizeof b, "%s", write_rec(4, 0, 2, GM_CAT_ACTIVATION, "l4.h5"));
    gm_scale_input in[2] = {{a, 3}, {b, 4}};
    gm_scale *s;
    gm_err err;
    CU_ASSERT_FATAL(gm_scale_open(in, 2, -1, &s, &err) == GM_OK);
    gm_sim_config cfg;
    memset(&cfg, 0, sizeof cfg);
    static const gm_latency lat = GM_LATENCY_DEFAULT;
    cfg.latency = lat;
    cfg.capacity_bytes = 100 * GM_MiB;
    cfg.overhead_bytes = 0;
    gm_largest r;
    CU_ASSERT_FATAL(gm_fit_largest(&cfg, s, NULL, 0, &r, &err) == GM_OK);
    CU_ASSERT(r.found);
    CU_ASSERT_EQUAL(r.largest, 19);
    CU_ASSERT_EQUAL(r.first_fail, 20);
    CU_ASSERT_EQUAL(r.peak_reserved, 98 * GM_MiB);
    CU_ASSERT_EQUAL(r.usable_bytes, 100 * GM_MiB);
    /* with a 16 MiB context on the card: 20 + 4x + 2 <= 84: x = 15 */
    cfg.overhead_bytes = 16 * GM_MiB;
    CU_ASSERT_FATAL(gm_fit_largest(&cfg, s, "pytorch", 0, &r, &err) == GM_OK);
    CU_ASSERT_EQUAL(r.largest, 15);
    CU_ASSERT_EQUAL(r.usable_bytes, 84 * GM_MiB);
    /* a device too small for even x = 1 (20 + 4 + 2 MiB) */
    cfg.overhead_bytes = 0;
    cfg.capacity_bytes = 24 * GM_MiB;
    CU_ASSERT_FATAL(gm_fit_largest(&cfg, s, NULL, 0, &r, &err) == GM_OK);
    CU_ASSERT(!r.found);
    CU_ASSERT_EQUAL(r.largest, 0);
    gm_scale_free(s);
    unlink(a);
    unlink(b);
}

int gm_test_register(void)
{
    CU_pSuite s = CU_add_suite("scale", NULL, NULL);
    if (!s) return CU_get_error();
    GM_ADD_TEST(s, test_fit_exact);
    GM_ADD_TEST(s, test_fit_round_clamp);
    GM_ADD_TEST(s, test_scale_recovers);
    GM_ADD_TEST(s, test_scale_refuses);
    GM_ADD_TEST(s, test_input_parse);
    GM_ADD_TEST(s, test_largest_by_hand);
    return CUE_SUCCESS;
}
