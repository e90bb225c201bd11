/*
 * test_trace.c - the HDF5 trace (traces/trace.h): round trips, the names,
 * and every kind of bad input the reader must reject with a message naming
 * the file (and the event, where there is one).
 */
#include "cu.h"
#include "base/units.h"
#include "traces/site_tally.h"
#include "traces/trace.h"

#include <hdf5.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------- helpers ---------------- */

/* n valid events: time non-decreasing, allocs with a size, every enum used. */
static gm_event *make_events(size_t n)
{
    gm_event *ev = calloc(n ? n : 1, sizeof *ev);
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        ev[i].t_ns = (i / 2) * 10; /* equal times are allowed */
        ev[i].op = (uint8_t)(i % GM_OP_COUNT);
        ev[i].addr = 0x7f0000000000ull + (x & 0xfffffff) * 512;
        ev[i].size = (x >> 30) % (1ull << 34) + 1;
        ev[i].stream = (x >> 60) & 1 ? 0x5555aaaa : 0;
        ev[i].category = (uint8_t)((x >> 8) % GM_CAT_COUNT);
        ev[i].phase = (uint8_t)((x >> 16) % GM_PHASE_COUNT);
    }
    if (n) ev[n - 1].size = GM_TRACE_MAX_SIZE; /* the limit itself is valid */
    return ev;
}

static int event_eq(const gm_event *a, const gm_event *b)
{
    return a->t_ns == b->t_ns && a->op == b->op && a->addr == b->addr && a->size == b->size &&
           a->stream == b->stream && a->category == b->category && a->phase == b->phase &&
           a->site == b->site;
}

static int write_trace(const char *path, const gm_event *ev, size_t n,
                       const gm_trace_write_opts *opts)
{
    gm_err err = {0};
    gm_trace_writer *w = NULL;
    int rc = gm_trace_create(path, NULL, opts, &w, &err);
    if (!rc) rc = gm_trace_append(w, ev, n, &err);
    if (!rc) return gm_trace_finish(w, &err);
    if (w) gm_trace_abort(w);
    return rc;
}

/* Open path and read it through with buffers of cap; result of the first failure. */
static int read_all(const char *path, size_t cap, gm_err *err)
{
    gm_trace_reader *r;
    int rc = gm_trace_open(path, &r, err);
    if (rc) return rc;
    gm_event *buf = malloc(cap * sizeof *buf);
    int64_t k;
    while ((k = gm_trace_read(r, buf, cap, err)) > 0)
        ;
    free(buf);
    gm_trace_close(r);
    return (int)k;
}

/*
 * Write n events with ev[bad] replaced by *bad_ev (keeping its time unless
 * the test is about time), read with buffers of cap, and expect GM_EINVAL
 * with a message naming the file, the event and saying `words`.
 */
static void expect_bad_event(size_t n, size_t bad, const gm_event *bad_ev, int set_time, size_t cap,
                             const char *words)
{
    const char *path = gm_test_tmp("bad.h5");
    gm_event *ev = make_events(n);
    uint64_t t_ns = ev[bad].t_ns;
    ev[bad] = *bad_ev;
    if (!set_time) ev[bad].t_ns = t_ns;
    gm_trace_write_opts o = {.chunk_events = 1000};
    CU_ASSERT_EQUAL_FATAL(write_trace(path, ev, n, &o), GM_OK);
    gm_err err = {0};
    CU_ASSERT_EQUAL(read_all(path, cap, &err), GM_EINVAL);
    char want[64];
    snprintf(want, sizeof want, "event %zu:", bad);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, path));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, want));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, words));
    if (!strstr(err.msg, want) || !strstr(err.msg, words))
        fprintf(stderr, "\n  got: %s\n", err.msg);
    free(ev);
    unlink(path);
}

/* Open path with the HDF5 API to damage it; returns the file id. */
static hid_t h5_edit(const char *path)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    return H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
}

/* Expect gm_trace_open(path) to fail with code, naming the file and saying `words`. */
static void expect_open_fails(const char *path, int code, const char *words)
{
    gm_err err = {0};
    gm_trace_reader *r = (gm_trace_reader *)1;
    CU_ASSERT_EQUAL(gm_trace_open(path, &r, &err), code);
    CU_ASSERT_PTR_NULL(r);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, path));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, words));
    if (!strstr(err.msg, words)) fprintf(stderr, "\n  got: %s\n", err.msg);
}

/* ---------------- names and meta ---------------- */

static void test_names(void)
{
    CU_ASSERT_STRING_EQUAL(gm_op_name(GM_OP_ALLOC), "alloc");
    CU_ASSERT_STRING_EQUAL(gm_op_name(GM_OP_SEGMENT_FREE), "segment_free");
    CU_ASSERT_STRING_EQUAL(gm_category_name(GM_CAT_OPTIMIZER_STATE), "optimizer_state");
    CU_ASSERT_STRING_EQUAL(gm_category_name(GM_CAT_AUTOGRAD_DETAIL), "autograd_detail");
    CU_ASSERT_STRING_EQUAL(gm_phase_name(GM_PHASE_BACKWARD), "backward");
    for (int c = 0; c < GM_CAT_COUNT; c++)
        CU_ASSERT_EQUAL(gm_category_parse(gm_category_name(c)), c);
    CU_ASSERT_EQUAL(gm_category_parse("activations"), -1);
    CU_ASSERT_EQUAL(gm_category_parse(""), -1);
    CU_ASSERT_EQUAL(gm_category_parse(NULL), -1);
    CU_ASSERT_PTR_NOT_NULL(gm_op_name(GM_OP_COUNT));
    CU_ASSERT_PTR_NOT_NULL(gm_category_name(-1));
    CU_ASSERT_PTR_NOT_NULL(gm_phase_name(99));
}

static void test_meta(void)
{
    gm_trace_meta m;
    gm_trace_meta_init(&m);
    CU_ASSERT_EQUAL(m.version, GM_TRACE_VERSION);
    CU_ASSERT_STRING_EQUAL(m.source, "");
    CU_ASSERT_STRING_EQUAL(m.alloc_conf, "");
    CU_ASSERT_EQUAL(m.device_total_bytes, 0);
    CU_ASSERT_EQUAL(gm_trace_meta_set(&m.source, "cupti"), GM_OK);
    CU_ASSERT_EQUAL(gm_trace_meta_set(&m.source, "rmm-log"), GM_OK);
    CU_ASSERT_STRING_EQUAL(m.source, "rmm-log");
    CU_ASSERT_EQUAL(gm_trace_meta_set(&m.workload, NULL), GM_OK);
    CU_ASSERT_STRING_EQUAL(m.workload, "");
    gm_trace_meta_free(&m);
    gm_trace_meta_free(&m); /* zeroed: harmless twice */
}

/* ---------------- round trips ---------------- */

/* Write meta, events (n, in appends of odd sizes), initial state, markers; read back with cap. */
static void round_trip(size_t n, const gm_trace_write_opts *opts, size_t cap)
{
    const char *path = gm_test_tmp("rt.h5");
    gm_err err = {0};
    gm_trace_meta m;
    gm_trace_meta_init(&m);
    gm_trace_meta_set(&m.source, "synthetic:bert");
    gm_trace_meta_set(&m.device_name, "NVIDIA H200");
    gm_trace_meta_set(&m.created_utc, "2026-11-30T05:35:08Z");
    gm_trace_meta_set(&m.command, "gmsim gen bert --seed 1 -o 'x y.h5'");
    gm_trace_meta_set(&m.workload, "BERT-large, batch 32, \xc3\xa9t\xc3\xa9"); /* UTF-8 */
    gm_trace_meta_set(&m.alloc_conf, "expandable_segments:True");
    m.device_total_bytes = 150ull * GM_GiB;
    m.dropped_records = 3;
    m.device_avail_bytes = 21 * GM_GiB;
    m.device_avail_min_bytes = 20 * GM_GiB;
    m.device_avail_max_bytes = 22 * GM_GiB;
    gm_trace_meta_set(&m.device_avail_source, "2 release-and-retry bursts");
    gm_trace_meta_set(&m.torch_version, "2.3-2.8");

    gm_event *ev = make_events(n);
    gm_init_row init[4] = {
        {.addr = 0x1000,
         .size = 2 * GM_MiB,
         .kind = GM_INIT_SEGMENT,
         .pool = GM_POOL_SMALL,
         .expandable = 1,
         .pool_id0 = 0,
         .pool_id1 = 3},
        {.addr = 0x1000,
         .size = 1000,
         .block_size = 1024,
         .stream = 7,
         .kind = GM_INIT_BLOCK,
         .category = GM_CAT_PARAMETER},
        {.addr = 0x1400,
         .size = 1,
         .block_size = 512,
         .kind = GM_INIT_BLOCK,
         .category = GM_CAT_AUTOGRAD_DETAIL},
        {.addr = 0x1000, .size = 2 * GM_MiB, .kind = GM_INIT_MAPPED},
    };
    gm_marker mk[3] = {{.t_ns = 0, .kind = GM_MARK_ITERATION, .name = "iteration 0"},
                       {.t_ns = 50, .kind = GM_MARK_RANGE_PUSH, .name = "forward"},
                       {.t_ns = 90, .kind = GM_MARK_RANGE_POP}};
    memset(mk[2].name, 'x', sizeof mk[2].name - 1); /* longest name that fits */

    gm_trace_writer *w;
    CU_ASSERT_EQUAL_FATAL(gm_trace_create(path, &m, opts, &w, &err), GM_OK);
    for (size_t done = 0, step = 1; done < n; done += step, step = step * 3 + 1) {
        if (step > n - done) step = n - done;
        CU_ASSERT_EQUAL(gm_trace_append(w, ev + done, step, &err), GM_OK);
    }
    CU_ASSERT_EQUAL(gm_trace_write_initial(w, init, 1, &err), GM_OK);
    CU_ASSERT_EQUAL(gm_trace_write_initial(w, init + 1, 3, &err), GM_OK);
    CU_ASSERT_EQUAL(gm_trace_add_markers(w, mk, 3, &err), GM_OK);
    gm_trace_set_dropped(w, 42);
    CU_ASSERT_EQUAL_FATAL(gm_trace_finish(w, &err), GM_OK);

    gm_trace_reader *r;
    CU_ASSERT_EQUAL_FATAL(gm_trace_open(path, &r, &err), GM_OK);
    const gm_trace_meta *g = gm_trace_meta_get(r);
    CU_ASSERT_EQUAL(g->version, GM_TRACE_VERSION);
    CU_ASSERT_STRING_EQUAL(g->source, m.source);
    CU_ASSERT_STRING_EQUAL(g->device_name, m.device_name);
    CU_ASSERT_STRING_EQUAL(g->created_utc, m.created_utc);
    CU_ASSERT_STRING_EQUAL(g->command, m.command);
    CU_ASSERT_STRING_EQUAL(g->workload, m.workload);
    CU_ASSERT_STRING_EQUAL(g->alloc_conf, m.alloc_conf);
    CU_ASSERT_EQUAL(g->device_total_bytes, 150ull * GM_GiB);
    CU_ASSERT_EQUAL(g->dropped_records, 42);
    CU_ASSERT_EQUAL(g->device_avail_bytes, 21 * GM_GiB);
    CU_ASSERT_EQUAL(g->device_avail_min_bytes, 20 * GM_GiB);
    CU_ASSERT_EQUAL(g->device_avail_max_bytes, 22 * GM_GiB);
    CU_ASSERT_STRING_EQUAL(g->device_avail_source, "2 release-and-retry bursts");
    CU_ASSERT_STRING_EQUAL(g->torch_version, "2.3-2.8"); /* through the isolated reader too */
    CU_ASSERT_EQUAL(g->dense_ids, 1); /* gmsim's writer numbered them; the blocks of
                                         /initial_state came after events: not seeded */
    CU_ASSERT_STRING_EQUAL(gm_trace_path(r), path);
    CU_ASSERT_EQUAL(gm_trace_nevents(r), n);

    gm_event *buf = malloc(cap * sizeof *buf);
    size_t got = 0, same = 0;
    int64_t k;
    while ((k = gm_trace_read(r, buf, cap, &err)) > 0) {
        CU_ASSERT((size_t)k <= cap);
        for (int64_t i = 0; i < k && got + (size_t)i < n; i++)
            same += event_eq(&buf[i], &ev[got + (size_t)i]);
        got += (size_t)k;
        CU_ASSERT_EQUAL(gm_trace_position(r), got);
    }
    CU_ASSERT_EQUAL(k, 0);
    CU_ASSERT_EQUAL(got, n);
    CU_ASSERT_EQUAL(same, n);
    CU_ASSERT_EQUAL(gm_trace_read(r, buf, cap, &err), 0); /* stays at the end */

    gm_init_row *ir;
    size_t nir;
    CU_ASSERT_EQUAL_FATAL(gm_trace_read_initial(r, &ir, &nir, &err), GM_OK);
    CU_ASSERT_EQUAL_FATAL(nir, 4);
    for (size_t i = 0; i < 4; i++)
        CU_ASSERT(ir[i].addr == init[i].addr && ir[i].size == init[i].size &&
                  ir[i].block_size == init[i].block_size && ir[i].stream == init[i].stream &&
                  ir[i].kind == init[i].kind && ir[i].category == init[i].category &&
                  ir[i].pool == init[i].pool && ir[i].expandable == init[i].expandable &&
                  ir[i].pool_id0 == init[i].pool_id0 && ir[i].pool_id1 == init[i].pool_id1);
    free(ir);
    gm_marker *mr;
    size_t nmr;
    CU_ASSERT_EQUAL_FATAL(gm_trace_read_markers(r, &mr, &nmr, &err), GM_OK);
    CU_ASSERT_EQUAL_FATAL(nmr, 3);
    for (size_t i = 0; i < 3; i++) {
        CU_ASSERT_EQUAL(mr[i].t_ns, mk[i].t_ns);
        CU_ASSERT_EQUAL(mr[i].kind, mk[i].kind);
        CU_ASSERT_STRING_EQUAL(mr[i].name, mk[i].name);
    }
    free(mr);
    gm_trace_close(r);
    free(buf);
    free(ev);
    gm_trace_meta_free(&m);
    unlink(path);
}

/* /sites and the site columns, through the isolated reader and in process:
 * texts as written (a long stack cut at a line, bad bytes made '?'), every
 * event's and block's site; a site beyond the table is refused. */
static void check_sites_read(const char *path, int isolated, const gm_event *ev, size_t n,
                             const char *long_stack)
{
    gm_err err = {0};
    gm_trace_reader *r;
    int rc = isolated ? gm_trace_open(path, &r, &err) : gm_trace_open_inprocess(path, &r, &err);
    CU_ASSERT_EQUAL_FATAL(rc, GM_OK);
    CU_ASSERT_EQUAL(gm_trace_meta_get(r)->n_sites, 3);
    gm_sites st;
    CU_ASSERT_EQUAL_FATAL(gm_trace_read_sites(r, &st, &err), GM_OK);
    CU_ASSERT_EQUAL_FATAL(st.n, 3);
    CU_ASSERT_STRING_EQUAL(st.rows[0].name, "train.py:42 in forward");
    CU_ASSERT_STRING_EQUAL(st.rows[0].stack, "/home/u/train.py:42 in forward\n?? in at::empty");
    CU_ASSERT_STRING_EQUAL(st.rows[1].name, "bad?by?e.py:1 in f"); /* 0xff, a tab */
    CU_ASSERT_STRING_EQUAL(st.rows[1].stack, "");
    size_t l = strlen(st.rows[2].stack);
    CU_ASSERT(l < GM_SITE_STACK_MAX && l > GM_SITE_STACK_MAX - 200);
    CU_ASSERT(!strncmp(st.rows[2].stack, long_stack, l) && long_stack[l] == '\n'); /* at a line */
    CU_ASSERT_PTR_NULL(gm_sites_name(&st, 0));
    CU_ASSERT_PTR_NULL(gm_sites_name(&st, 4));
    CU_ASSERT_STRING_EQUAL(gm_sites_name(&st, 1), "train.py:42 in forward");
    gm_sites_free(&st);
    gm_event *buf = calloc(n, sizeof *buf);
    CU_ASSERT_EQUAL(gm_trace_read(r, buf, n, &err), (int64_t)n);
    size_t same = 0;
    for (size_t i = 0; i < n; i++)
        same += event_eq(&buf[i], &ev[i]);
    CU_ASSERT_EQUAL(same, n);
    gm_init_row *ir;
    size_t nir;
    CU_ASSERT_EQUAL_FATAL(gm_trace_read_initial(r, &ir, &nir, &err), GM_OK);
    CU_ASSERT_EQUAL_FATAL(nir, 1);
    CU_ASSERT_EQUAL(ir[0].site, 2);
    free(ir);
    free(buf);
    gm_trace_close(r);
}

static void test_sites(void)
{
    const char *path = gm_test_tmp("sites.h5");
    size_t n = 1000;
    gm_event *ev = make_events(n);
    for (size_t i = 0; i < n; i++)
        ev[i].site = (uint32_t)(i % 4);
    char *long_stack = malloc(2 * GM_SITE_STACK_MAX);
    size_t used = 0;
    for (int k = 0; used < 2 * GM_SITE_STACK_MAX - 64; k++)
        used += (size_t)snprintf(long_stack + used, 2 * GM_SITE_STACK_MAX - used,
                                 "%s/lib/frame%d.py:%d in f", k ? "\n" : "", k, k);
    gm_site sites[3] = {
        {"train.py:42 in forward", "/home/u/train.py:42 in forward\n?? in at::empty"},
        {"bad\xff"
         "by\te.py:1 in f",
         ""},
        {"deep.py:1 in g", long_stack}};
    gm_init_row init = {.addr = 0x100, .size = 64, .kind = GM_INIT_BLOCK, .site = 2};
    gm_err err = {0};
    gm_trace_writer *w;
    CU_ASSERT_EQUAL_FATAL(gm_trace_create(path, NULL, NULL, &w, &err), GM_OK);
    CU_ASSERT_EQUAL(gm_trace_append(w, ev, n, &err), GM_OK);
    CU_ASSERT_EQUAL(gm_trace_write_initial(w, &init, 1, &err), GM_OK);
    CU_ASSERT_EQUAL(gm_trace_write_sites(w, sites, 3, &err), GM_OK);
    CU_ASSERT_EQUAL(gm_trace_write_sites(w, sites, 3, &err), GM_EINVAL); /* once */
    CU_ASSERT_EQUAL_FATAL(gm_trace_finish(w, &err), GM_OK);
    check_sites_read(path, 1, ev, n, long_stack);
    check_sites_read(path, 0, ev, n, long_stack);

    /* a site with no table row: refused, naming the event */
    ev[7].site = 9;
    CU_ASSERT_EQUAL_FATAL(write_trace(path, ev, n, NULL), GM_OK); /* no /sites */
    CU_ASSERT_EQUAL(read_all(path, 100, &err), GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "event 1: site is 1 but /sites has 0 rows"));
    free(long_stack);
    free(ev);
    unlink(path);
}

/* Live bytes by site, now and at the last peak taken; top k largest first. */
static void test_site_tally(void)
{
    gm_site_tally t;
    CU_ASSERT_EQUAL_FATAL(gm_site_tally_init(&t, 4), GM_OK);
    CU_ASSERT_EQUAL(gm_site_tally_add(&t, 0x10, 100, 1), GM_OK);
    CU_ASSERT_EQUAL(gm_site_tally_add(&t, 0x20, 300, 2), GM_OK);
    CU_ASSERT_EQUAL(gm_site_tally_add(&t, 0x30, 50, 2), GM_OK);
    CU_ASSERT_EQUAL(gm_site_tally_add(&t, 0x40, 7, 0), GM_OK);  /* unknown */
    CU_ASSERT_EQUAL(gm_site_tally_add(&t, 0x50, 9, 99), GM_OK); /* beyond the table: unknown */
    gm_site_tally_peak(&t);
    gm_site_tally_drop(&t, 0x20, 300); /* after the peak */
    CU_ASSERT_EQUAL(gm_site_tally_add(&t, 0x60, 200, 3), GM_OK);
    CU_ASSERT_EQUAL(gm_site_tally_add(&t, 0x70, 200, 4), GM_OK);
    gm_site_live top[3];
    size_t n = gm_site_tally_top(&t, 1, top, 3); /* at the peak */
    CU_ASSERT_EQUAL_FATAL(n, 2);
    CU_ASSERT(top[0].site == 2 && top[0].bytes == 350 && top[0].count == 2);
    CU_ASSERT(top[1].site == 1 && top[1].bytes == 100 && top[1].count == 1);
    CU_ASSERT(t.pbytes[0] == 16 && t.pcount[0] == 2);
    n = gm_site_tally_top(&t, 0, top, 2); /* now: 3 and 4 tie at 200, the lower first */
    CU_ASSERT_EQUAL_FATAL(n, 2);
    CU_ASSERT(top[0].site == 3 && top[0].bytes == 200 && top[1].site == 4);
    n = gm_site_tally_top(&t, 0, top, 3);
    CU_ASSERT(n == 3 && top[2].site == 1 && top[2].bytes == 100);
    gm_site_tally_drop(&t, 0x50, 9); /* an unknown site's bytes leave unknown */
    CU_ASSERT(t.bytes[0] == 7 && t.count[0] == 1);
    gm_site_tally_peak(&t); /* the changed sites only are copied, all of them */
    n = gm_site_tally_top(&t, 1, top, 3);
    CU_ASSERT(n == 3 && top[0].site == 3 && top[2].site == 1 && t.pbytes[2] == 50);
    gm_site_tally_free(&t);
}

static void test_round_trip_small_chunks(void)
{
    /* chunks of 1000, reads of 777: reads straddle chunk boundaries */
    gm_trace_write_opts o = {.chunk_events = 1000};
    round_trip(3 * 1000 + 123, &o, 777);
    round_trip(3000, &o, 1000);
}

static void test_round_trip_default_chunks(void)
{
    /* the default 64 Ki chunk, with reads larger than one (split inside the reader) */
    round_trip(2 * GM_TRACE_CHUNK_EVENTS + 10, NULL, GM_TRACE_CHUNK_EVENTS + 5);
    round_trip(GM_TRACE_CHUNK_EVENTS + 1, NULL, 1);
}

static void test_round_trip_deflate(void)
{
    gm_trace_write_opts o = {
        .compress = GM_COMPRESS_DEFLATE, .deflate_level = 6, .chunk_events = 4096};
    round_trip(5 * 4096 + 17, &o, 1000);
    gm_trace_write_opts d = {.compress = GM_COMPRESS_DEFLATE};
    round_trip(GM_TRACE_CHUNK_EVENTS + 3, &d, 4096);
}

static void test_empty_trace(void)
{
    const char *path = gm_test_tmp("empty.h5");
    CU_ASSERT_EQUAL_FATAL(write_trace(path, NULL, 0, NULL), GM_OK);
    gm_err err = {0};
    gm_trace_reader *r;
    CU_ASSERT_EQUAL_FATAL(gm_trace_open(path, &r, &err), GM_OK);
    CU_ASSERT_EQUAL(gm_trace_nevents(r), 0);
    gm_event e;
    CU_ASSERT_EQUAL(gm_trace_read(r, &e, 1, &err), 0);
    CU_ASSERT_STRING_EQUAL(gm_trace_meta_get(r)->source, "");
    gm_trace_close(r);
    unlink(path);
}

/* A trace of 2 events is small (its /events chunk is 2 rows, not 64 Ki) and
 * round-trips; so does one that ends short of a second, smaller chunk. */
static void test_small_trace_small_file(void)
{
    const char *path = gm_test_tmp("small.h5");
    gm_event *ev = make_events(2);
    CU_ASSERT_EQUAL_FATAL(write_trace(path, ev, 2, NULL), GM_OK);
    struct stat st;
    CU_ASSERT_EQUAL_FATAL(stat(path, &st), 0);
    CU_ASSERT(st.st_size < 64 * 1024);
    if (st.st_size >= 64 * 1024)
        fprintf(stderr, "\n  2-event trace: %lld bytes\n", (long long)st.st_size);
    gm_err err = {0};
    gm_trace_reader *r;
    CU_ASSERT_EQUAL_FATAL(gm_trace_open(path, &r, &err), GM_OK);
    CU_ASSERT_EQUAL(gm_trace_nevents(r), 2);
    gm_event buf[4];
    CU_ASSERT_EQUAL(gm_trace_read(r, buf, 4, &err), 2);
    CU_ASSERT(event_eq(&buf[0], &ev[0]) && event_eq(&buf[1], &ev[1]));
    CU_ASSERT_EQUAL(gm_trace_read(r, buf, 4, &err), 0);
    gm_trace_close(r);
    /* the dataset stays chunked and extendible, chunk = the event count */
    hid_t f = h5_edit(path), ds = f >= 0 ? H5Dopen2(f, "events", H5P_DEFAULT) : -1;
    hid_t dcpl = ds >= 0 ? H5Dget_create_plist(ds) : -1, sp = ds >= 0 ? H5Dget_space(ds) : -1;
    hsize_t chunk = 0, dims = 0, maxdims = 0;
    CU_ASSERT_EQUAL(dcpl >= 0 ? H5Pget_layout(dcpl) : H5D_LAYOUT_ERROR, H5D_CHUNKED);
    CU_ASSERT_EQUAL(dcpl >= 0 ? H5Pget_chunk(dcpl, 1, &chunk) : -1, 1);
    CU_ASSERT_EQUAL(chunk, 2);
    CU_ASSERT_EQUAL(sp >= 0 ? H5Sget_simple_extent_dims(sp, &dims, &maxdims) : -1, 1);
    CU_ASSERT_EQUAL(maxdims, H5S_UNLIMITED);
    if (sp >= 0) H5Sclose(sp);
    if (dcpl >= 0) H5Pclose(dcpl);
    if (ds >= 0) H5Dclose(ds);
    if (f >= 0) H5Fclose(f);
    free(ev);
    unlink(path);

    /* one full chunk then a partial one: the chunk size is the configured one */
    gm_trace_write_opts o = {.chunk_events = 1000};
    round_trip(1000 + 7, &o, 333);
    round_trip(999, &o, 1000);
}

static void test_rewind(void)
{
    const char *path = gm_test_tmp("rewind.h5");
    size_t n = 2500;
    gm_event *ev = make_events(n);
    gm_trace_write_opts o = {.chunk_events = 1000};
    CU_ASSERT_EQUAL_FATAL(write_trace(path, ev, n, &o), GM_OK);
    gm_err err = {0};
    gm_trace_reader *r;
    CU_ASSERT_EQUAL_FATAL(gm_trace_open(path, &r, &err), GM_OK);
    gm_event *buf = calloc(n, sizeof *buf);
    CU_ASSERT_EQUAL(gm_trace_read(r, buf, 1700, &err), 1700);
    CU_ASSERT_EQUAL(gm_trace_rewind(r), GM_OK);
    CU_ASSERT_EQUAL(gm_trace_position(r), 0);
    /* time restarts with the trace: no "time goes backwards" after a rewind */
    for (int pass = 0; pass < 2; pass++) {
        CU_ASSERT_EQUAL(gm_trace_read(r, buf, n, &err), (int64_t)n);
        size_t same = 0;
        for (size_t i = 0; i < n; i++)
            same += event_eq(&buf[i], &ev[i]);
        CU_ASSERT_EQUAL(same, n);
        CU_ASSERT_EQUAL(gm_trace_read(r, buf, n, &err), 0);
        gm_trace_rewind(r);
    }
    gm_trace_close(r);
    free(buf);
    free(ev);
    unlink(path);
}

static void test_writer_temp_file(void)
{
    const char *path = gm_test_tmp("tmpfile.h5");
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    gm_err err = {0};
    gm_trace_writer *w;
    gm_event *ev = make_events(10);
    struct stat st;

    CU_ASSERT_EQUAL_FATAL(gm_trace_create(path, NULL, NULL, &w, &err), GM_OK);
    CU_ASSERT_EQUAL(gm_trace_append(w, ev, 10, &err), GM_OK);
    CU_ASSERT_EQUAL(stat(tmp, &st), 0); /* written under the temporary name */
    CU_ASSERT_NOT_EQUAL(stat(path, &st), 0);
    gm_trace_abort(w);
    CU_ASSERT_NOT_EQUAL(stat(tmp, &st), 0); /* abort leaves nothing */
    CU_ASSERT_NOT_EQUAL(stat(path, &st), 0);

    CU_ASSERT_EQUAL_FATAL(gm_trace_create(path, NULL, NULL, &w, &err), GM_OK);
    CU_ASSERT_EQUAL(gm_trace_append(w, ev, 10, &err), GM_OK);
    CU_ASSERT_EQUAL(gm_trace_finish(w, &err), GM_OK);
    CU_ASSERT_NOT_EQUAL(stat(tmp, &st), 0);
    CU_ASSERT_EQUAL(stat(path, &st), 0);
    unlink(path);

    /* a directory that does not exist: an I/O error naming the path */
    CU_ASSERT_EQUAL(gm_trace_create("/nonexistent-dir/x.h5", NULL, NULL, &w, &err), GM_EIO);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "/nonexistent-dir/x.h5"));
    gm_trace_write_opts bad = {.compress = GM_COMPRESS_DEFLATE, .deflate_level = 10};
    CU_ASSERT_EQUAL(gm_trace_create(path, NULL, &bad, &w, &err), GM_EINVAL);
    CU_ASSERT_NOT_EQUAL(stat(tmp, &st), 0);
    free(ev);
}

/*
 * A file whose /events has another layout: the columns in another order, a
 * column the reader does not know, wider types. HDF5 matches columns by name,
 * so it reads the same (through HDF5's conversion rather than the fast path).
 */
struct foreign_row {
    int64_t size;
    uint32_t phase;
    double extra;
    uint64_t addr;
    uint16_t category;
    uint64_t stream;
    int32_t op;
    uint64_t t_ns;
};

/* Write ev[0..n) in the foreign layout; row neg gets size -5 unless neg >= n. */
static void write_foreign_v(const char *path, const gm_event *ev, size_t n, size_t neg,
                            int64_t version)
{
    struct foreign_row *rows = calloc(n, sizeof *rows);
    for (size_t i = 0; i < n; i++)
        rows[i] = (struct foreign_row){(int64_t)ev[i].size, ev[i].phase,  0.5,      ev[i].addr,
                                       ev[i].category,      ev[i].stream, ev[i].op, ev[i].t_ns};
    if (neg < n) rows[neg].size = -5;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(struct foreign_row));
    H5Tinsert(t, "size", HOFFSET(struct foreign_row, size), H5T_NATIVE_INT64);
    H5Tinsert(t, "phase", HOFFSET(struct foreign_row, phase), H5T_NATIVE_UINT32);
    H5Tinsert(t, "extra", HOFFSET(struct foreign_row, extra), H5T_NATIVE_DOUBLE);
    H5Tinsert(t, "addr", HOFFSET(struct foreign_row, addr), H5T_NATIVE_UINT64);
    H5Tinsert(t, "category", HOFFSET(struct foreign_row, category), H5T_NATIVE_UINT16);
    H5Tinsert(t, "stream", HOFFSET(struct foreign_row, stream), H5T_NATIVE_UINT64);
    H5Tinsert(t, "op", HOFFSET(struct foreign_row, op), H5T_NATIVE_INT32);
    H5Tinsert(t, "t_ns", HOFFSET(struct foreign_row, t_ns), H5T_NATIVE_UINT64);
    hsize_t dims = n;
    hid_t sp = H5Screate_simple(1, &dims, NULL);
    hid_t ds = H5Dcreate2(f, "events", t, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    CU_ASSERT(H5Dwrite(ds, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows) >= 0);
    hid_t asp = H5Screate(H5S_SCALAR);
    /* an int64 attribute, as h5py writes a Python int */
    hid_t a = H5Acreate2(f, "gmtrace_version", H5T_STD_I64LE, asp, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_INT64, &version);
    H5Aclose(a);
    hid_t st = H5Tcopy(H5T_C_S1); /* a fixed-length string attribute */
    H5Tset_size(st, 5);
    a = H5Acreate2(f, "source", st, asp, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, st, "cupti");
    H5Aclose(a);
    H5Tclose(st);
    H5Sclose(asp);
    H5Dclose(ds);
    H5Sclose(sp);
    H5Tclose(t);
    H5Fclose(f);
    free(rows);
}

static void write_foreign(const char *path, const gm_event *ev, size_t n, size_t neg)
{
    write_foreign_v(path, ev, n, neg, GM_TRACE_VERSION);
}

static void test_foreign_layout(void)
{
    const char *path = gm_test_tmp("foreign.h5");
    size_t n = 3000;
    gm_event *ev = make_events(n);
    ev[n - 1].size = 4096;
    write_foreign(path, ev, n, n);
    gm_err err = {0};
    gm_trace_reader *r;
    CU_ASSERT_EQUAL_FATAL(gm_trace_open(path, &r, &err), GM_OK);
    CU_ASSERT_STRING_EQUAL(gm_trace_meta_get(r)->source, "cupti");
    CU_ASSERT_STRING_EQUAL(gm_trace_meta_get(r)->device_name, ""); /* absent: empty */
    gm_event *buf = calloc(n, sizeof *buf);
    CU_ASSERT_EQUAL(gm_trace_read(r, buf, 1234, &err), 1234);
    CU_ASSERT_EQUAL(gm_trace_read(r, buf + 1234, n - 1234, &err), (int64_t)(n - 1234));
    size_t same = 0;
    for (size_t i = 0; i < n; i++)
        same += event_eq(&buf[i], &ev[i]);
    CU_ASSERT_EQUAL(same, n);
    size_t nrows = 1;
    gm_init_row *ir = (gm_init_row *)1;
    CU_ASSERT_EQUAL(gm_trace_read_initial(r, &ir, &nrows, &err), GM_OK); /* absent: none */
    CU_ASSERT_EQUAL(nrows, 0);
    CU_ASSERT_PTR_NULL(ir);
    gm_marker *mr = (gm_marker *)1;
    CU_ASSERT_EQUAL(gm_trace_read_markers(r, &mr, &nrows, &err), GM_OK);
    CU_ASSERT_EQUAL(nrows, 0);
    CU_ASSERT_PTR_NULL(mr);
    gm_trace_close(r);
    free(buf);
    free(ev);
    unlink(path);
}

/* A version 1 file holds ops 0..3 only: op 4 (segment_map since version 2)
 * is refused there, and read in a version 2 file. */
static void test_v1_ops(void)
{
    const char *path = gm_test_tmp("v1ops.h5");
    gm_event ev[3] = {{.t_ns = 0, .op = GM_OP_SEGMENT_ALLOC, .addr = 0x1000, .size = 4096},
                      {.t_ns = 1, .op = GM_OP_ALLOC, .addr = 0x1000, .size = 64},
                      {.t_ns = 2, .op = GM_OP_SEGMENT_MAP, .addr = 0x2000, .size = 4096}};
    gm_err err = {0};
    write_foreign_v(path, ev, 3, 3, 1);
    CU_ASSERT_EQUAL(read_all(path, 16, &err), GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "event 2: op is 4"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "a version 1 trace has no other"));
    write_foreign_v(path, ev, 2, 3, 1); /* ops 0..3 read in a version 1 file */
    CU_ASSERT_EQUAL(read_all(path, 16, &err), GM_OK);
    write_foreign_v(path, ev, 3, 3, 2);
    CU_ASSERT_EQUAL(read_all(path, 16, &err), GM_OK);
    ev[2].op = GM_OP_COUNT;
    write_foreign_v(path, ev, 3, 3, 2);
    CU_ASSERT_EQUAL(read_all(path, 16, &err), GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "6 empty_cache, 7 oom"));
    unlink(path);
}

/* HDF5 would clamp a negative int64 to 0; the reader refuses it, naming the row. */
static void test_foreign_out_of_range(void)
{
    const char *path = gm_test_tmp("negative.h5");
    size_t n = 3000;
    gm_event *ev = make_events(n);
    write_foreign(path, ev, n, 1500);
    gm_err err = {0};
    CU_ASSERT_EQUAL(read_all(path, 1000, &err), GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, path));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "event 1500: a value does not fit its column"));
    CU_ASSERT_EQUAL(read_all(path, 4096, &err), GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "event 1500:"));
    write_foreign(path, ev, n, 0);
    CU_ASSERT_EQUAL(read_all(path, 1, &err), GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "event 0:"));
    free(ev);
    unlink(path);
}

/* ---------------- bad files ---------------- */

static void test_not_hdf5(void)
{
    const char *path = gm_test_tmp("text.h5");
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("t_ns,op,addr,size\n0,alloc,0x1000,512\n", f);
    fclose(f);

    /* HDF5 must print nothing: watch stderr while opening */
    const char *errpath = gm_test_tmp("stderr.txt");
    fflush(stderr);
    int saved = dup(2), fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 2);
    gm_err err = {0};
    gm_trace_reader *r;
    int rc = gm_trace_open(path, &r, &err);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(fd);
    struct stat st;
    CU_ASSERT_EQUAL(stat(errpath, &st), 0);
    CU_ASSERT_EQUAL(st.st_size, 0);
    unlink(errpath);

    CU_ASSERT_EQUAL(rc, GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, path));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "not an HDF5 file"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "gmsim import"));
    CU_ASSERT_EQUAL(truncate(path, 0), 0);
    expect_open_fails(path, GM_EINVAL, "not an HDF5 file");
    unlink(path);
    expect_open_fails(gm_test_tmp("missing.h5"), GM_EIO, "cannot open");
}

static void test_truncated(void)
{
    const char *path = gm_test_tmp("trunc.h5");
    size_t n = 5000;
    gm_event *ev = make_events(n);
    gm_trace_write_opts o = {.chunk_events = 1000};
    CU_ASSERT_EQUAL_FATAL(write_trace(path, ev, n, &o), GM_OK);
    struct stat st;
    CU_ASSERT_EQUAL_FATAL(stat(path, &st), 0);
    CU_ASSERT_EQUAL_FATAL(truncate(path, st.st_size / 2), 0);
    expect_open_fails(path, GM_EINVAL, "truncated");
    CU_ASSERT_EQUAL_FATAL(truncate(path, 1000), 0);
    expect_open_fails(path, GM_EINVAL, "truncated");
    free(ev);
    unlink(path);
}

static void test_wrong_version(void)
{
    const char *path = gm_test_tmp("v3.h5");
    gm_event *ev = make_events(10);
    CU_ASSERT_EQUAL_FATAL(write_trace(path, ev, 10, NULL), GM_OK);
    hid_t f = h5_edit(path);
    CU_ASSERT_FATAL(f >= 0);
    hid_t a = H5Aopen(f, "gmtrace_version", H5P_DEFAULT);
    int three = 3;
    CU_ASSERT(H5Awrite(a, H5T_NATIVE_INT, &three) >= 0);
    H5Aclose(a);
    H5Fclose(f);
    expect_open_fails(path, GM_EINVAL, "gmtrace_version is 3 but this gmsim reads versions 1 to 2");
    f = h5_edit(path);
    a = H5Aopen(f, "gmtrace_version", H5P_DEFAULT);
    int zero = 0;
    CU_ASSERT(H5Awrite(a, H5T_NATIVE_INT, &zero) >= 0);
    H5Aclose(a);
    H5Fclose(f);
    expect_open_fails(path, GM_EINVAL, "gmtrace_version is 0 but this gmsim reads versions 1 to 2");

    f = h5_edit(path);
    CU_ASSERT(H5Adelete(f, "gmtrace_version") >= 0);
    H5Fclose(f);
    expect_open_fails(path, GM_EINVAL, "no gmtrace_version attribute");
    free(ev);
    unlink(path);
}

static void test_missing_events(void)
{
    const char *path = gm_test_tmp("noevents.h5");
    gm_event *ev = make_events(10);
    CU_ASSERT_EQUAL_FATAL(write_trace(path, ev, 10, NULL), GM_OK);
    hid_t f = h5_edit(path);
    CU_ASSERT_FATAL(f >= 0);
    CU_ASSERT(H5Ldelete(f, "events", H5P_DEFAULT) >= 0);
    H5Fclose(f);
    expect_open_fails(path, GM_EINVAL, "no /events dataset");
    free(ev);
    unlink(path);
}

static void test_missing_column(void)
{
    const char *path = gm_test_tmp("nocol.h5");
    gm_event *ev = make_events(10);
    CU_ASSERT_EQUAL_FATAL(write_trace(path, ev, 10, NULL), GM_OK);
    hid_t f = h5_edit(path);
    CU_ASSERT_FATAL(f >= 0);
    H5Ldelete(f, "events", H5P_DEFAULT);
    hid_t t = H5Tcreate(H5T_COMPOUND, 16);
    H5Tinsert(t, "t_ns", 0, H5T_STD_U64LE);
    H5Tinsert(t, "size", 8, H5T_STD_U64LE);
    hsize_t dims = 0;
    hid_t sp = H5Screate_simple(1, &dims, NULL);
    hid_t ds = H5Dcreate2(f, "events", t, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    CU_ASSERT(ds >= 0);
    H5Dclose(ds);
    H5Sclose(sp);
    H5Tclose(t);
    H5Fclose(f);
    expect_open_fails(path, GM_EINVAL, "no column 'op'");
    free(ev);
    unlink(path);
}

static void test_time_backwards(void)
{
    gm_event e = {.t_ns = 3, .op = GM_OP_FREE, .addr = 1};
    expect_bad_event(5000, 1234, &e, 1, 777, "time goes backwards (t_ns 3 after");
    /* the bad event first in a read: the previous time comes from the call before */
    expect_bad_event(5000, 1234, &e, 1, 1234, "time goes backwards");
    /* and at a chunk boundary of the file */
    expect_bad_event(5000, 2000, &e, 1, 500, "sort /events");
    /* in one read of 9000 events, past the first 4096 (the isolated
     * reader copies and checks a piece 4096 events at a time): the first
     * event after them, and one further in */
    expect_bad_event(9000, 4096, &e, 1, 9000, "time goes backwards (t_ns 3 after");
    expect_bad_event(9000, 6001, &e, 1, 9000, "time goes backwards (t_ns 3 after");
}

static void test_bad_size(void)
{
    gm_event zero = {.t_ns = 1234 * 10 + 5, .op = GM_OP_ALLOC, .addr = 0x10, .size = 0};
    expect_bad_event(3000, 1234, &zero, 0, 1000, "alloc of size 0");
    zero.op = GM_OP_SEGMENT_ALLOC;
    expect_bad_event(3000, 1234, &zero, 0, 1000, "segment_alloc of size 0");
    gm_event big = {.t_ns = 999 * 10 + 5, .op = GM_OP_ALLOC, .size = GM_TRACE_MAX_SIZE + 1};
    expect_bad_event(3000, 999, &big, 0, 4096, "2^48");
    big.op = GM_OP_FREE;
    big.size = UINT64_MAX;
    expect_bad_event(3000, 999, &big, 0, 4096, "2^48");

    /* a free may carry size 0 (size unknown) */
    const char *path = gm_test_tmp("free0.h5");
    gm_event *ev = make_events(100);
    ev[50].op = GM_OP_FREE;
    ev[50].size = 0;
    ev[51].op = GM_OP_SEGMENT_FREE;
    ev[51].size = 0;
    CU_ASSERT_EQUAL(write_trace(path, ev, 100, NULL), GM_OK);
    gm_err err = {0};
    CU_ASSERT_EQUAL(read_all(path, 64, &err), 0);
    free(ev);
    unlink(path);
}

static void test_bad_enums(void)
{
    gm_event e = {.t_ns = 70, .op = GM_OP_COUNT, .size = 8};
    expect_bad_event(100, 7, &e, 0, 100, "op is 9");
    e.op = 255;
    expect_bad_event(100, 7, &e, 0, 3, "not an operation");
    e.op = GM_OP_ALLOC;
    e.category = GM_CAT_COUNT;
    expect_bad_event(100, 7, &e, 0, 100, "category is 8");
    e.category = GM_CAT_GRADIENT;
    e.phase = GM_PHASE_COUNT;
    expect_bad_event(100, 7, &e, 0, 100, "phase is 4");
}

/* A failed read does not move the reader; reads before the bad event succeed. */
static void test_error_position(void)
{
    const char *path = gm_test_tmp("pos.h5");
    gm_event *ev = make_events(300);
    ev[250].size = 0;
    ev[250].op = GM_OP_ALLOC;
    CU_ASSERT_EQUAL_FATAL(write_trace(path, ev, 300, NULL), GM_OK);
    gm_err err = {0};
    gm_trace_reader *r;
    CU_ASSERT_EQUAL_FATAL(gm_trace_open(path, &r, &err), GM_OK);
    gm_event buf[200];
    CU_ASSERT_EQUAL(gm_trace_read(r, buf, 200, &err), 200);
    CU_ASSERT_EQUAL(gm_trace_read(r, buf, 200, &err), GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "event 250:"));
    CU_ASSERT_EQUAL(gm_trace_position(r), 200);
    CU_ASSERT_EQUAL(gm_trace_read(r, buf, 50, &err), 50);
    gm_trace_close(r);
    free(ev);
    unlink(path);
}

/* Bad rows of the small tables are refused with the file and the row. */
static void test_bad_tables(void)
{
    const char *path = gm_test_tmp("badtables.h5");
    gm_err err = {0};
    gm_trace_writer *w;
    gm_init_row init[2] = {{.addr = 1, .size = 2, .kind = GM_INIT_SEGMENT},
                           {.addr = 1, .size = 2, .kind = 5}};
    gm_marker mk[2] = {{.kind = GM_MARK_INSTANT, .name = "oom"}, {.kind = 9, .name = "x"}};
    CU_ASSERT_EQUAL_FATAL(gm_trace_create(path, NULL, NULL, &w, &err), GM_OK);
    CU_ASSERT_EQUAL(gm_trace_write_initial(w, init, 2, &err), GM_OK);
    CU_ASSERT_EQUAL(gm_trace_add_markers(w, mk, 2, &err), GM_OK);
    CU_ASSERT_EQUAL_FATAL(gm_trace_finish(w, &err), GM_OK);
    gm_trace_reader *r;
    CU_ASSERT_EQUAL_FATAL(gm_trace_open(path, &r, &err), GM_OK);
    gm_init_row *ir = NULL;
    gm_marker *mr = NULL;
    size_t n = 7;
    CU_ASSERT_EQUAL(gm_trace_read_initial(r, &ir, &n, &err), GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "/initial_state row 1: kind"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, path));
    CU_ASSERT_EQUAL(n, 0);
    CU_ASSERT_EQUAL(gm_trace_read_markers(r, &mr, &n, &err), GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "/markers row 1: kind 9"));
    CU_ASSERT_EQUAL(n, 0);
    gm_trace_close(r);
    unlink(path);
}

/* A version 1 /initial_state has no pool columns: they read as 0 (pool
 * unknown, not expandable, default pool); a bad pool value is refused. */
static void test_initial_v1_layout(void)
{
    const char *path = gm_test_tmp("initv1.h5");
    gm_err err = {0};
    gm_trace_writer *w;
    CU_ASSERT_EQUAL_FATAL(gm_trace_create(path, NULL, NULL, &w, &err), GM_OK);
    CU_ASSERT_EQUAL_FATAL(gm_trace_finish(w, &err), GM_OK);
    struct v1row {
        uint64_t addr, size, block_size, stream;
        uint8_t kind, category;
    } rows[2] = {{0x200000, 2 * GM_MiB, 0, 0, GM_INIT_SEGMENT, 0},
                 {0x200000, 100, 512, 0, GM_INIT_BLOCK, GM_CAT_PARAMETER}};
    hid_t f = h5_edit(path);
    CU_ASSERT_FATAL(f >= 0);
    CU_ASSERT(H5Ldelete(f, "initial_state", H5P_DEFAULT) >= 0);
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(struct v1row));
    H5Tinsert(t, "addr", HOFFSET(struct v1row, addr), H5T_NATIVE_UINT64);
    H5Tinsert(t, "size", HOFFSET(struct v1row, size), H5T_NATIVE_UINT64);
    H5Tinsert(t, "block_size", HOFFSET(struct v1row, block_size), H5T_NATIVE_UINT64);
    H5Tinsert(t, "stream", HOFFSET(struct v1row, stream), H5T_NATIVE_UINT64);
    H5Tinsert(t, "kind", HOFFSET(struct v1row, kind), H5T_NATIVE_UINT8);
    H5Tinsert(t, "category", HOFFSET(struct v1row, category), H5T_NATIVE_UINT8);
    hsize_t dims = 2;
    hid_t sp = H5Screate_simple(1, &dims, NULL);
    hid_t ds = H5Dcreate2(f, "initial_state", t, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    CU_ASSERT(H5Dwrite(ds, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows) >= 0);
    H5Dclose(ds);
    H5Sclose(sp);
    H5Tclose(t);
    H5Fclose(f);
    gm_trace_reader *r;
    CU_ASSERT_EQUAL_FATAL(gm_trace_open(path, &r, &err), GM_OK);
    gm_init_row *ir = NULL;
    size_t n = 0;
    CU_ASSERT_EQUAL_FATAL(gm_trace_read_initial(r, &ir, &n, &err), GM_OK);
    CU_ASSERT_EQUAL_FATAL(n, 2);
    CU_ASSERT(ir[0].addr == 0x200000 && ir[0].size == 2 * GM_MiB && ir[0].pool == GM_POOL_UNKNOWN &&
              ir[0].expandable == 0 && ir[0].pool_id0 == 0 && ir[0].pool_id1 == 0);
    CU_ASSERT(ir[1].kind == GM_INIT_BLOCK && ir[1].block_size == 512 &&
              ir[1].category == GM_CAT_PARAMETER);
    free(ir);
    gm_trace_close(r);

    gm_init_row bad[1] = {{.addr = 1, .size = 2, .kind = GM_INIT_SEGMENT, .pool = 3}};
    CU_ASSERT_EQUAL_FATAL(gm_trace_create(path, NULL, NULL, &w, &err), GM_OK);
    CU_ASSERT_EQUAL(gm_trace_write_initial(w, bad, 1, &err), GM_OK);
    CU_ASSERT_EQUAL_FATAL(gm_trace_finish(w, &err), GM_OK);
    CU_ASSERT_EQUAL_FATAL(gm_trace_open(path, &r, &err), GM_OK);
    CU_ASSERT_EQUAL(gm_trace_read_initial(r, &ir, &n, &err), GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "/initial_state row 0: pool is not 0, 1 or 2"));
    gm_trace_close(r);
    unlink(path);
}

int gm_test_register(void)
{
    CU_pSuite s = CU_add_suite("trace", NULL, NULL);
    if (!s) return CU_get_error();
    GM_ADD_TEST(s, test_sites);
    GM_ADD_TEST(s, test_site_tally);
    GM_ADD_TEST(s, test_names);
    GM_ADD_TEST(s, test_meta);
    GM_ADD_TEST(s, test_round_trip_small_chunks);
    GM_ADD_TEST(s, test_round_trip_default_chunks);
    GM_ADD_TEST(s, test_round_trip_deflate);
    GM_ADD_TEST(s, test_empty_trace);
    GM_ADD_TEST(s, test_small_trace_small_file);
    GM_ADD_TEST(s, test_rewind);
    GM_ADD_TEST(s, test_writer_temp_file);
    GM_ADD_TEST(s, test_foreign_layout);
    GM_ADD_TEST(s, test_foreign_out_of_range);
    GM_ADD_TEST(s, test_v1_ops);
    GM_ADD_TEST(s, test_not_hdf5);
    GM_ADD_TEST(s, test_truncated);
    GM_ADD_TEST(s, test_wrong_version);
    GM_ADD_TEST(s, test_missing_events);
    GM_ADD_TEST(s, test_missing_column);
    GM_ADD_TEST(s, test_time_backwards);
    GM_ADD_TEST(s, test_bad_size);
    GM_ADD_TEST(s, test_bad_enums);
    GM_ADD_TEST(s, test_error_position);
    GM_ADD_TEST(s, test_bad_tables);
    GM_ADD_TEST(s, test_initial_v1_layout);
    return CUE_SUCCESS;
}
