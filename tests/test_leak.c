/* test_leak.c - study/leak.h: iterations found four ways, and the leak
 * verdict on generated training loops with and without planted leaks. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_histogram.h>

#include "cu.h"
#include "base/units.h"
#include "study/leak.h"

/* A training loop: parameters before the first iteration; per iteration an
 * input, then the planted leak (kept), then activations (freed at its end);
 * optimizer states made in iteration 0 and kept (warm-up). */
typedef struct loop {
    int iters;
    uint64_t params, opt, act; /* bytes                                       */
    int nact;                  /* activations per iteration                   */
    uint64_t leak;             /* planted per iteration, category leak_cat     */
    int leak_until;            /* iterations that leak (0: all)               */
    int leak_cat;
    uint64_t noise; /* 0..noise bytes of input kept over a boundary */
    int marks;      /* 0 none, 1 iteration markers, 2 "step N" instants, 3 NVTX */
} loop;

typedef struct built {
    gm_event *ev;
    size_t n, cap;
    gm_marker *mk;
    size_t nm, capm;
    uint64_t t, addr;
} built;

static void push(built *b, int op, uint64_t addr, uint64_t size, int cat)
{
    if (b->n == b->cap) {
        b->cap = b->cap ? b->cap * 2 : 1024;
        b->ev = realloc(b->ev, b->cap * sizeof *b->ev);
    }
    gm_event e = {.t_ns = b->t += 10,
                  .addr = addr,
                  .size = size,
                  .op = (uint8_t)op,
                  .category = (uint8_t)cat};
    b->ev[b->n++] = e;
}

static void mark(built *b, int kind, const char *name)
{
    if (b->nm == b->capm) {
        b->capm = b->capm ? b->capm * 2 : 64;
        b->mk = realloc(b->mk, b->capm * sizeof *b->mk);
    }
    gm_marker m = {.t_ns = b->t + 1, .kind = (uint8_t)kind};
    snprintf(m.name, sizeof m.name, "%s", name);
    b->mk[b->nm++] = m;
}

static uint64_t alloc(built *b, uint64_t size, int cat)
{
    uint64_t a = b->addr += 1ull << 32;
    push(b, GM_OP_ALLOC, a, size, cat);
    return a;
}

static void build(const loop *L, built *b)
{
    memset(b, 0, sizeof *b);
    uint32_t rng = 12345;
    alloc(b, L->params, GM_CAT_PARAMETER);
    uint64_t kept = 0; /* the input kept over the previous boundary (noise) */
    for (int i = 0; i < L->iters; i++) {
        char name[32];
        snprintf(name, sizeof name, L->marks == 3 ? "train_step" : "step %d", i);
        if (L->marks == 1) mark(b, GM_MARK_ITERATION, name);
        if (L->marks == 2) mark(b, GM_MARK_INSTANT, name);
        if (L->marks == 3) mark(b, GM_MARK_RANGE_PUSH, name);
        if (kept) push(b, GM_OP_FREE, kept, 0, GM_CAT_INPUT);
        kept = 0;
        uint64_t in = alloc(b, 1 << 20, GM_CAT_INPUT);
        if (L->leak && (!L->leak_until || i < L->leak_until)) alloc(b, L->leak, L->leak_cat);
        uint64_t acts[64];
        for (int k = 0; k < L->nact; k++) {
            if (L->marks == 3 && k == 0) mark(b, GM_MARK_RANGE_PUSH, "forward");
            acts[k] = alloc(b, L->act, GM_CAT_ACTIVATION);
            if (L->marks == 3 && k == 0) mark(b, GM_MARK_RANGE_POP, "forward");
        }
        for (int k = L->nact - 1; k >= 0; k--)
            push(b, GM_OP_FREE, acts[k], 0, GM_CAT_ACTIVATION);
        if (i == 0 && L->opt) alloc(b, L->opt, GM_CAT_OPTIMIZER_STATE);
        push(b, GM_OP_FREE, in, 0, GM_CAT_INPUT);
        if (L->noise) {
            rng = rng * 1103515245u + 12345u;
            kept = alloc(b, 512 + (rng >> 8) % L->noise, GM_CAT_INPUT);
        }
        if (L->marks == 3) mark(b, GM_MARK_RANGE_POP, name);
    }
}

static void built_free(built *b)
{
    free(b->ev);
    free(b->mk);
}

static loop base_loop(void)
{
    loop L = {.iters = 12,
              .params = 400 * GM_MiB,
              .opt = 800 * GM_MiB,
              .act = 30 * GM_MiB,
              .nact = 20,
              .leak_cat = GM_CAT_ACTIVATION,
              .marks = 1};
    return L;
}

static int analyze(const loop *L, const gm_leak_opts *o, gm_leak_report *r)
{
    built b;
    build(L, &b);
    gm_err err;
    int rc = gm_leak_analyze_events(b.ev, b.n, NULL, 0, b.mk, b.nm, o, r, &err);
    built_free(&b);
    return rc;
}

/* Steady with warm-up: the optimizer's states at the first step are not a leak. */
static void test_steady_warmup(void)
{
    for (int marks = 0; marks <= 1; marks++) {
        loop L = base_loop();
        L.marks = marks;
        gm_leak_report r;
        CU_ASSERT_EQUAL_FATAL(analyze(&L, NULL, &r), GM_OK);
        CU_ASSERT_EQUAL(r.source, marks ? GM_ITER_MARKERS : GM_ITER_PERIOD);
        CU_ASSERT(r.n >= 10);
        /* markers: iteration 0 makes the states; by period, the first
         * boundary is also the empty start, before the parameters */
        CU_ASSERT_EQUAL(r.warmup, marks ? 1 : 2);
        CU_ASSERT_EQUAL(r.verdict, GM_LEAK_STEADY);
        CU_ASSERT(fabs(r.fit.slope) < 1);
        CU_ASSERT_EQUAL(r.runout_iteration, -1);
        /* boundary 1 on: parameters and optimizer states, nothing else */
        CU_ASSERT_EQUAL(r.pt[3].live_bytes, L.params + L.opt);
        CU_ASSERT_EQUAL(r.group_bytes[3 * r.ngroups + GM_CAT_OPTIMIZER_STATE], L.opt);
        /* the optimizer states were made in iteration 0: carried from boundary 2 */
        if (marks) {
            CU_ASSERT_EQUAL(r.pt[1].carried_bytes, 0);
            CU_ASSERT_EQUAL(r.pt[2].carried_bytes, L.opt);
            CU_ASSERT_EQUAL(r.pt[2].carried_count, 1);
        }
        gm_leak_report_free(&r);
    }
}

/* Several planted rates, with markers and without: each found, at its rate. */
static void test_leak_rates(void)
{
    const uint64_t rates[] = {2 * GM_MiB, 8 * GM_MiB, 118 * GM_MiB};
    for (int marks = 0; marks <= 1; marks++)
        for (size_t i = 0; i < sizeof rates / sizeof *rates; i++) {
            loop L = base_loop();
            L.marks = marks;
            L.leak = rates[i];
            L.leak_cat = GM_CAT_TEMPORARY;
            gm_leak_report r;
            CU_ASSERT_EQUAL_FATAL(analyze(&L, NULL, &r), GM_OK);
            CU_ASSERT_EQUAL_FATAL(r.verdict, GM_LEAK_GROWING);
            CU_ASSERT(fabs(r.fit.slope - (double)rates[i]) < 1);
            CU_ASSERT(r.fit.r2 > 0.999);
            /* only the planted group grows */
            for (size_t g = 0; g < r.ngroups; g++)
                CU_ASSERT_EQUAL(r.group_fit[g].growing, g == GM_CAT_TEMPORARY);
            /* carried: the leaks of iterations before the previous one */
            if (marks) CU_ASSERT_EQUAL(r.pt[5].carried_bytes, L.opt + 4 * rates[i]);
            gm_leak_report_free(&r);
        }
}

/* A leak that stops growing is told so, at the boundary where it stopped. */
static void test_leak_stops(void)
{
    for (int marks = 0; marks <= 1; marks++) {
        loop L = base_loop();
        L.iters = 16;
        L.marks = marks;
        L.leak = 16 * GM_MiB;
        L.leak_until = 6;
        gm_leak_report r;
        CU_ASSERT_EQUAL_FATAL(analyze(&L, NULL, &r), GM_OK);
        CU_ASSERT_EQUAL(r.verdict, GM_LEAK_STOPPED);
        if (marks) CU_ASSERT_EQUAL(r.growth_end, 6);
        CU_ASSERT(fabs(r.fit.slope - (double)L.leak) < 1);
        gm_leak_report_free(&r);
    }
}

/* Boundaries that wander (an input of random size kept over each) are not a
 * leak; a leak under that noise still is. */
static void test_noise(void)
{
    loop L = base_loop();
    L.iters = 24;
    L.noise = 4 * GM_MiB;
    gm_leak_report r;
    CU_ASSERT_EQUAL_FATAL(analyze(&L, NULL, &r), GM_OK);
    CU_ASSERT_EQUAL(r.verdict, GM_LEAK_STEADY);
    CU_ASSERT(r.fit.slope_se > 0);
    gm_leak_report_free(&r);
    L.leak = 3 * GM_MiB;
    CU_ASSERT_EQUAL_FATAL(analyze(&L, NULL, &r), GM_OK);
    CU_ASSERT_EQUAL(r.verdict, GM_LEAK_GROWING);
    CU_ASSERT(fabs(r.fit.slope - (double)L.leak) < 1.5 * GM_MiB);
    gm_leak_report_free(&r);
}

/* "at +118 MiB per iteration, a 24 GiB card runs out at iteration K". */
static void test_runout(void)
{
    loop L = base_loop();
    L.leak = 118 * GM_MiB;
    gm_leak_opts o = {.capacity_bytes = 24 * GM_GiB};
    gm_leak_report r;
    CU_ASSERT_EQUAL_FATAL(analyze(&L, &o, &r), GM_OK);
    CU_ASSERT_EQUAL_FATAL(r.verdict, GM_LEAK_GROWING);
    /* boundary k holds params + opt + k leaks; within an iteration, the
     * input, this iteration's leak and the activations come on top */
    uint64_t rise = (1ull << 20) + L.leak + (uint64_t)L.nact * L.act;
    CU_ASSERT_EQUAL(r.rise_bytes, rise);
    int64_t k = (int64_t)((o.capacity_bytes - rise - L.params - L.opt) / L.leak) + 1;
    CU_ASSERT_EQUAL(r.runout_iteration, k);
    gm_leak_report_free(&r);
}

/* --iteration-marker, NVTX ranges, and a name that matches nothing. */
static void test_sources(void)
{
    loop L = base_loop();
    L.marks = 2;
    L.leak = 4 * GM_MiB;
    gm_leak_opts o = {.marker = "step"};
    gm_leak_report r;
    CU_ASSERT_EQUAL_FATAL(analyze(&L, &o, &r), GM_OK);
    CU_ASSERT_EQUAL(r.source, GM_ITER_USER);
    CU_ASSERT_EQUAL(r.n, (size_t)L.iters);
    CU_ASSERT_EQUAL(r.verdict, GM_LEAK_GROWING);
    gm_leak_report_free(&r);
    o.marker = "epoch";
    built b;
    build(&L, &b);
    gm_err err;
    CU_ASSERT_EQUAL(gm_leak_analyze_events(b.ev, b.n, NULL, 0, b.mk, b.nm, &o, &r, &err),
                    GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "'step 0'"));
    gm_leak_report_free(&r);
    built_free(&b);
    L.marks = 3; /* train_step ranges with a nested forward range */
    CU_ASSERT_EQUAL_FATAL(analyze(&L, NULL, &r), GM_OK);
    CU_ASSERT_EQUAL(r.source, GM_ITER_NVTX);
    CU_ASSERT_STRING_EQUAL(r.marker, "train_step");
    CU_ASSERT_EQUAL(r.n, (size_t)L.iters);
    CU_ASSERT_EQUAL(r.verdict, GM_LEAK_GROWING);
    gm_leak_report_free(&r);
}

/* Too little to judge, and nothing periodic. */
static void test_too_few(void)
{
    loop L = base_loop();
    L.iters = 3;
    L.opt = 0; /* no warm-up: three points on a line */
    L.leak = 64 * GM_MiB;
    gm_leak_report r;
    CU_ASSERT_EQUAL_FATAL(analyze(&L, NULL, &r), GM_OK);
    CU_ASSERT_EQUAL(r.n, 3);
    CU_ASSERT_EQUAL(r.verdict, GM_LEAK_GROWING);
    gm_leak_report_free(&r);
    L.iters = 2;
    CU_ASSERT_EQUAL_FATAL(analyze(&L, NULL, &r), GM_OK);
    CU_ASSERT_EQUAL(r.verdict, GM_LEAK_UNKNOWN);
    gm_leak_report_free(&r);
    gm_event one = {.t_ns = 1, .addr = 4096, .size = 10, .op = GM_OP_ALLOC};
    gm_err err;
    CU_ASSERT_EQUAL(gm_leak_analyze_events(&one, 1, NULL, 0, NULL, 0, NULL, &r, &err), GM_OK);
    CU_ASSERT_EQUAL(r.source, GM_ITER_NONE);
    CU_ASSERT_EQUAL(r.n, 0);
    gm_leak_report_free(&r);
}

/* Call sites for a built loop: parameters 1, inputs 2, activations 3 and 4
 * (alternating), optimizer states 5, the planted leak 6 (the one
 * allocation of L->leak bytes, an activation by category, like the others). */
#define SITE_LEAK 6
static const gm_site site_rows[] = {
    {"model.py:10 in __init__", ""}, {"train.py:20 in load", ""}, {"model.py:30 in attn", ""},
    {"model.py:31 in mlp", ""},      {"adam.py:40 in step", ""},  {"train.py:99 in log_loss", ""},
};
static const gm_sites sites6 = {6, (gm_site *)site_rows, NULL};

static void give_sites(const loop *L, built *b)
{
    size_t nact = 0;
    for (size_t i = 0; i < b->n; i++) {
        gm_event *e = &b->ev[i];
        if (e->op != GM_OP_ALLOC) continue;
        e->site = L->leak && e->size == L->leak           ? SITE_LEAK
                  : e->category == GM_CAT_PARAMETER       ? 1
                  : e->category == GM_CAT_INPUT           ? 2
                  : e->category == GM_CAT_ACTIVATION      ? (uint32_t)(3 + nact++ % 2)
                  : e->category == GM_CAT_OPTIMIZER_STATE ? 5
                                                          : 0;
    }
}

static int analyze_sites(const loop *L, const gm_sites *sites, gm_leak_report *r)
{
    built b;
    build(L, &b);
    give_sites(L, &b);
    gm_err err;
    int rc = gm_leak_analyze_events_sites(b.ev, b.n, NULL, 0, b.mk, b.nm, sites, NULL, r, &err);
    built_free(&b);
    return rc;
}

/* Sites: a leak in one call site among several (the same category as two
 * others) is found at exactly that site, at its rate, with markers and by
 * the period; a steady loop names no site; without a site table, the
 * groups are the categories. */
static void test_site_leak(void)
{
    const uint64_t rates[] = {0, 2 * GM_MiB, 8 * GM_MiB, 118 * GM_MiB};
    for (int marks = 0; marks <= 1; marks++)
        for (size_t i = 0; i < sizeof rates / sizeof *rates; i++) {
            loop L = base_loop();
            L.marks = marks;
            L.leak = rates[i];
            gm_leak_report r;
            CU_ASSERT_EQUAL_FATAL(analyze_sites(&L, &sites6, &r), GM_OK);
            CU_ASSERT_EQUAL(r.by_site, 1);
            CU_ASSERT_EQUAL_FATAL(r.ngroups, 7);
            CU_ASSERT_STRING_EQUAL(gm_leak_group_kind(&r), "site");
            CU_ASSERT_STRING_EQUAL(gm_leak_group_name(&r, SITE_LEAK), "train.py:99 in log_loss");
            CU_ASSERT_STRING_EQUAL(gm_leak_group_name(&r, 0), "(no site recorded)");
            CU_ASSERT_EQUAL_FATAL(r.verdict, rates[i] ? GM_LEAK_GROWING : GM_LEAK_STEADY);
            for (size_t g = 0; g < r.ngroups; g++)
                CU_ASSERT_EQUAL(r.group_fit[g].growing, rates[i] && g == SITE_LEAK);
            if (rates[i]) CU_ASSERT(fabs(r.group_fit[SITE_LEAK].slope - (double)rates[i]) < 1);
            /* the optimizer states sit at their own site from boundary 2 on */
            CU_ASSERT_EQUAL(r.group_bytes[3 * r.ngroups + 5], L.opt);
            gm_leak_report_free(&r);
        }
    /* one that stops: still that site */
    loop L = base_loop();
    L.iters = 16;
    L.marks = 1;
    L.leak = 16 * GM_MiB;
    L.leak_until = 6;
    gm_leak_report r;
    CU_ASSERT_EQUAL_FATAL(analyze_sites(&L, &sites6, &r), GM_OK);
    CU_ASSERT_EQUAL(r.verdict, GM_LEAK_STOPPED);
    for (size_t g = 0; g < r.ngroups; g++)
        CU_ASSERT_EQUAL(r.group_fit[g].growing, g == SITE_LEAK);
    gm_leak_report_free(&r);
    /* no table: categories (the leak is one more activation) */
    L = base_loop();
    L.leak = 8 * GM_MiB;
    CU_ASSERT_EQUAL_FATAL(analyze_sites(&L, NULL, &r), GM_OK);
    CU_ASSERT_EQUAL(r.by_site, 0);
    CU_ASSERT_EQUAL(r.ngroups, GM_CAT_COUNT);
    CU_ASSERT_STRING_EQUAL(gm_leak_group_kind(&r), "category");
    for (size_t g = 0; g < r.ngroups; g++)
        CU_ASSERT_EQUAL(r.group_fit[g].growing, g == GM_CAT_ACTIVATION);
    gm_leak_report_free(&r);
}

/* The change point every j's two fits would choose (the scan that
 * gm_leak_change_point replaces). */
static size_t change_point_scan(const double *y, size_t w, size_t n)
{
    size_t best_j = 0;
    double best = HUGE_VAL;
    gm_leak_fit pre, tail;
    for (size_t j = w + 2; j + GM_LEAK_MIN_POINTS <= n; j++) {
        gm_leak_fit_line(y + w, w, j - w + 1, 0, &pre);
        gm_leak_fit_line(y + j, j, n - j, 0, &tail);
        if (pre.sse + tail.sse < best) best = pre.sse + tail.sse, best_j = j;
    }
    return best_j;
}

/* gm_leak_change_point chooses the j the scan of every j chooses: on
 * series that grow then stop (exactly, and under noise of several sizes),
 * flat and exactly linear ones (every j ties: the first), steps, series too
 * short to split, and bytes on the scale of real ones (GiB, 2 MiB grains). */
static void test_change_point_is_scan(void)
{
    enum { N = 600 };
    double *y = malloc(N * sizeof *y);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    uint64_t x = 12345;
    size_t cases = 0, stops_found = 0;
    for (int shape = 0; shape < 6; shape++)
        for (int noise = 0; noise < 4; noise++)
            for (size_t n = 0; n <= N; n += n < 12 ? 1 : 97) {
                size_t stop = n / 3 + 1;
                for (size_t k = 0; k < n; k++) {
                    x = x * 6364136223846793005ull + 1442695040888963407ull;
                    double r = (double)(x >> 40) / (double)(1ull << 24); /* [0, 1) */
                    double v = 3.0 * GM_GiB;
                    if (shape == 0) v += 64.0 * GM_MiB * (double)(k < stop ? k : stop);
                    if (shape == 1) v += 1.5 * GM_MiB * (double)k;      /* exact line */
                    if (shape == 3) v += k < stop ? 0 : 512.0 * GM_MiB; /* a step */
                    if (shape == 4) v += 2.0 * GM_MiB * (double)(k < stop ? k * k : stop * stop);
                    if (shape == 5) v = (double)((x >> 20) & 0xff) * 2 * GM_MiB; /* grains */
                    if (noise) v += r * (noise == 1 ? 1 : noise == 2 ? GM_MiB : 256.0 * GM_MiB);
                    y[k] = v;
                }
                for (size_t w = 0; w < 3 && w <= n; w++) {
                    size_t want = change_point_scan(y, w, n);
                    CU_ASSERT_EQUAL(gm_leak_change_point(y, w, n, 0), want);
                    cases++;
                    stops_found += shape == 0 && !noise && n > 12 && want == stop;
                }
            }
    CU_ASSERT(cases > 1000);
    CU_ASSERT(stops_found > 5); /* the exact stops are found where they are */
    free(y);
}

/* gm_leak_scan_trace (cmd_info, the pages' statistics) gives what the scan
 * and the analysis give run one after the other, from one read of the
 * events; where the analysis stops before reading them (an
 * --iteration-marker the trace has not), the scan still reads them all and
 * the analysis's error is the one returned. */
static void test_scan_and_leak_in_one_read(void)
{
    loop L = base_loop();
    L.leak = 8 * GM_MiB;
    built b;
    build(&L, &b);
    const char *path = gm_test_tmp("leakscan.h5");
    gm_err err = {0};
    gm_trace_writer *w = NULL;
    CU_ASSERT_EQUAL_FATAL(gm_trace_create(path, NULL, NULL, &w, &err), GM_OK);
    CU_ASSERT_EQUAL_FATAL(gm_trace_append(w, b.ev, b.n, &err), GM_OK);
    CU_ASSERT_EQUAL_FATAL(gm_trace_finish(w, &err), GM_OK);
    gm_trace_reader *r = NULL;
    CU_ASSERT_EQUAL_FATAL(gm_trace_open(path, &r, &err), GM_OK);
    gm_trace_scan s1 = {0}, s2 = {0};
    gm_leak_report r1, r2;
    CU_ASSERT_EQUAL(gm_trace_scan_run(r, &s1, &err), GM_OK);
    CU_ASSERT_EQUAL(gm_leak_analyze_trace(r, NULL, &r1, &err), GM_OK);
    CU_ASSERT_EQUAL(gm_trace_rewind(r), GM_OK);
    CU_ASSERT_EQUAL(gm_leak_scan_trace(r, NULL, &s2, &r2, NULL, NULL, &err), GM_OK);
    CU_ASSERT_EQUAL(s2.nevents, b.n);
    CU_ASSERT_EQUAL(s1.nevents, s2.nevents);
    CU_ASSERT_EQUAL(memcmp(s1.by_op, s2.by_op, sizeof s1.by_op), 0);
    CU_ASSERT_EQUAL(s1.alloc_bytes, s2.alloc_bytes);
    CU_ASSERT_EQUAL(s1.peak_live, s2.peak_live);
    CU_ASSERT_EQUAL(s1.peak_t, s2.peak_t);
    CU_ASSERT_EQUAL(s1.t_last, s2.t_last);
    for (size_t k = 0; k < GM_SCAN_HIST_BINS; k++)
        CU_ASSERT_EQUAL(gsl_histogram_get(s1.h_bytes, k), gsl_histogram_get(s2.h_bytes, k));
    CU_ASSERT_EQUAL(r2.verdict, GM_LEAK_GROWING);
    CU_ASSERT_EQUAL(r1.verdict, r2.verdict);
    CU_ASSERT_EQUAL(r1.source, r2.source);
    CU_ASSERT_EQUAL(r1.n, r2.n);
    CU_ASSERT_EQUAL(r1.fit.slope, r2.fit.slope);
    gm_trace_scan_free(&s2);
    gm_leak_report_free(&r1);
    gm_leak_report_free(&r2);
    /* a marker the trace has not: the analysis fails before its first pass */
    gm_leak_opts o = {.marker = "epoch"};
    gm_err e1 = {0}, e2 = {0};
    CU_ASSERT_EQUAL(gm_leak_analyze_trace(r, &o, &r1, &e1), GM_EINVAL);
    gm_trace_scan s3 = {0};
    CU_ASSERT_EQUAL(gm_leak_scan_trace(r, &o, &s3, &r2, NULL, NULL, &e2), GM_EINVAL);
    CU_ASSERT_STRING_EQUAL(e1.msg, e2.msg);
    CU_ASSERT_EQUAL(s3.nevents, b.n);
    CU_ASSERT_EQUAL(s3.alloc_bytes, s1.alloc_bytes);
    gm_trace_scan_free(&s1);
    gm_trace_scan_free(&s3);
    gm_leak_report_free(&r1);
    gm_leak_report_free(&r2);
    gm_trace_close(r);
    built_free(&b);
}

int gm_test_register(void)
{
    CU_pSuite s = CU_add_suite("leak", NULL, NULL);
    if (!s) return CU_get_error();
    GM_ADD_TEST(s, test_steady_warmup);
    GM_ADD_TEST(s, test_leak_rates);
    GM_ADD_TEST(s, test_leak_stops);
    GM_ADD_TEST(s, test_noise);
    GM_ADD_TEST(s, test_runout);
    GM_ADD_TEST(s, test_sources);
    GM_ADD_TEST(s, test_too_few);
    GM_ADD_TEST(s, test_site_leak);
    GM_ADD_TEST(s, test_change_point_is_scan);
    GM_ADD_TEST(s, test_scan_and_leak_in_one_read);
    return 0;
}
