/*
 * test_segmap.c - the allocator's segment maps (reports/segmap.h) and their
 * place on the page (reports/html_segmap.c): blocks where the PyTorch model
 * puts them at the peak, at an OOM and at a chosen time; merged runs within
 * the budget; call sites escaped.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bert_trace.h"
#include "cu.h"
#include "base/strbuf.h"
#include "base/units.h"
#include "reports/html.h"
#include "reports/results.h"
#include "reports/segmap.h"
#include "study/compare.h"
#include "study/simulate.h"
#include "traces/trace.h"

#define SEG_SITE "<script>alert('seg')</script>/model.py:3 in fwd"

/* 100 B, 1 MiB (call site 1) and 3000 B in the small pool's one 2 MiB
 * segment (PyTorch: requests <= 1 MiB, 512 B granules), the 100 B freed,
 * then 5 MiB in a 20 MiB large-pool segment (requests < 10 MiB), freed. */
static const char *small_trace(void)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s", gm_test_tmp("segmap.h5"));
    gm_trace_meta m;
    gm_trace_meta_init(&m);
    m.device_total_bytes = 16 * GM_GiB;
    gm_event ev[] = {
        {.t_ns = 0, .addr = 0x1000, .size = 100, .op = GM_OP_ALLOC, .category = GM_CAT_ACTIVATION},
        {.t_ns = 10,
         .addr = 0x2000,
         .size = GM_MiB,
         .op = GM_OP_ALLOC,
         .category = GM_CAT_PARAMETER,
         .site = 1},
        {.t_ns = 20,
         .addr = 0x3000,
         .size = 3000,
         .op = GM_OP_ALLOC,
         .category = GM_CAT_ACTIVATION},
        {.t_ns = 30, .addr = 0x1000, .op = GM_OP_FREE},
        {.t_ns = 40,
         .addr = 0x4000,
         .size = 5 * GM_MiB,
         .op = GM_OP_ALLOC,
         .category = GM_CAT_TEMPORARY},
        {.t_ns = 50, .addr = 0x4000, .op = GM_OP_FREE},
    };
    gm_trace_writer *w;
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_trace_create(path, &m, NULL, &w, &err), GM_OK);
    gm_site site = {SEG_SITE, "model.py:3\n"};
    CU_ASSERT_EQUAL(gm_trace_write_sites(w, &site, 1, &err), GM_OK);
    CU_ASSERT_EQUAL(gm_trace_append(w, ev, 6, &err), GM_OK);
    CU_ASSERT_EQUAL_FATAL(gm_trace_finish(w, &err), GM_OK);
    gm_trace_meta_free(&m);
    return path;
}

static void config(gm_sim_config *cfg, gm_tenant_spec *t)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->tenants = t;
    cfg->n_tenants = 1;
    cfg->latency = (gm_latency)GM_LATENCY_DEFAULT;
}

/* A run page's maps of t on `capacity` bytes (no context overhead), OOMs
 * skipped so that the run goes on past them; cfg is the run's, for a run
 * again. NULL when the maps could not be made. */
static json_t *oom_maps(gm_sim_config *cfg, gm_tenant_spec *t, uint64_t capacity, gm_err *err)
{
    config(cfg, t);
    cfg->capacity_bytes = capacity;
    cfg->overhead_given = 1;
    cfg->on_oom_skip = 1;
    gm_segmap_opts o;
    gm_segmap_opts_run(&o);
    json_t *sm = NULL;
    CU_ASSERT_EQUAL(gm_segmap_json(cfg, &o, &sm, err), GM_OK);
    return sm;
}

/* The run page of cfg with its maps sm (taken) in b; the page's JSON,
 * for the caller to free with b. */
static json_t *run_page(const gm_sim_config *cfg, json_t *sm, gm_strbuf *b)
{
    gm_sim_result *r;
    gm_err err = {0};
    gm_sb_init(b);
    CU_ASSERT_EQUAL_FATAL(gm_simulate(cfg, &r, &err), GM_OK);
    json_t *j = gm_result_json(cfg, r, "run");
    gm_sim_result_free(r);
    json_object_set_new(j, "segment_maps", sm);
    CU_ASSERT_EQUAL_FATAL(gm_html_render(j, b, &err), GM_OK);
    return j;
}

static json_t *map_of(json_t *sm, const char *kind, size_t nth)
{
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(sm, "maps"), i, m)
    {
        if (!strcmp(json_string_value(json_object_get(m, "kind")), kind) && !nth--) return m;
    }
    return NULL;
}

static json_int_t num(json_t *o, const char *key)
{
    return json_integer_value(json_object_get(o, key));
}

static json_int_t at(json_t *item, size_t i)
{
    return json_integer_value(json_array_get(item, i));
}

static void test_peak_and_time(void)
{
    const char *path = small_trace();
    gm_tenant_spec t = {.path = path, .repeat = 1};
    gm_sim_config cfg;
    config(&cfg, &t);
    gm_segmap_opts o;
    gm_segmap_opts_run(&o);
    o.at_given = 1;
    o.at_ns = 25; /* before the free at 30 */
    json_t *sm;
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_segmap_json(&cfg, &o, &sm, &err), GM_OK);
    CU_ASSERT_EQUAL(num(sm, "peak_reserved_bytes"), 22 * GM_MiB);
    CU_ASSERT_EQUAL(num(sm, "ooms_total"), 0);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(sm, "maps")), 2);
    /* the peak: after the 5 MiB allocation, before its free */
    json_t *pk = map_of(sm, "peak", 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(pk);
    CU_ASSERT_EQUAL(num(pk, "reserved"), 22 * GM_MiB);
    CU_ASSERT_EQUAL(num(pk, "allocated"), GM_MiB + 3072 + 5 * GM_MiB);
    CU_ASSERT_EQUAL(num(pk, "t_ns"), 40);
    CU_ASSERT_EQUAL(num(pk, "segments"), 2);
    json_t *rows = json_object_get(pk, "rows");
    CU_ASSERT_EQUAL_FATAL(json_array_size(rows), 2);
    json_t *sm0 = json_array_get(rows, 0), *lg = json_array_get(rows, 1);
    if (num(sm0, "size") != 2 * GM_MiB) { /* address order: either pool may come first */
        json_t *x = sm0;
        sm0 = lg;
        lg = x;
    }
    CU_ASSERT_EQUAL(num(sm0, "size"), 2 * GM_MiB);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(sm0, "pool")), "small");
    json_t *it = json_object_get(sm0, "items");
    CU_ASSERT_EQUAL_FATAL(json_array_size(it), 4);
    /* the freed 512 B block is a gap; the 1 MiB block carries its site */
    CU_ASSERT(at(json_array_get(it, 0), 0) == 0 && at(json_array_get(it, 0), 1) == 512 &&
              at(json_array_get(it, 0), 2) == 0);
    json_t *p = json_array_get(it, 1);
    CU_ASSERT(at(p, 0) == 512 && at(p, 1) == GM_MiB && at(p, 2) == 1 &&
              at(p, 3) == GM_CAT_PARAMETER && at(p, 4) == 1 && at(p, 5) == GM_MiB);
    p = json_array_get(it, 2);
    CU_ASSERT(at(p, 0) == 512 + GM_MiB && at(p, 1) == 3072 && at(p, 2) == 1 &&
              at(p, 3) == GM_CAT_ACTIVATION && at(p, 4) == 0 && at(p, 5) == 3000);
    p = json_array_get(it, 3);
    CU_ASSERT(at(p, 0) == 512 + GM_MiB + 3072 && at(p, 1) == 2 * GM_MiB - 3584 - GM_MiB &&
              at(p, 2) == 0);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_array_get(json_object_get(pk, "sites"), 0)),
                           SEG_SITE);
    it = json_object_get(lg, "items");
    CU_ASSERT_EQUAL(num(lg, "size"), 20 * GM_MiB);
    CU_ASSERT_EQUAL_FATAL(json_array_size(it), 2);
    p = json_array_get(it, 0);
    CU_ASSERT(at(p, 0) == 0 && at(p, 1) == 5 * GM_MiB && at(p, 3) == GM_CAT_TEMPORARY);
    p = json_array_get(it, 1);
    CU_ASSERT(at(p, 0) == 5 * GM_MiB && at(p, 1) == 15 * GM_MiB && at(p, 2) == 0);
    CU_ASSERT_EQUAL(num(lg, "largest_free"), 15 * GM_MiB);
    /* --segments-at 25ns: the 100 B block still there, no large segment yet */
    json_t *a = map_of(sm, "at", 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_EQUAL(num(a, "t_ns"), 25);
    CU_ASSERT_EQUAL(num(a, "reserved"), 2 * GM_MiB);
    CU_ASSERT_EQUAL(num(a, "allocated"), 512 + GM_MiB + 3072);
    json_decref(sm);
    /* a time after the last event: the end state, and it says so */
    o.at_ns = 1000;
    CU_ASSERT_EQUAL_FATAL(gm_segmap_json(&cfg, &o, &sm, &err), GM_OK);
    a = map_of(sm, "at", 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT(json_is_true(json_object_get(a, "after_end")));
    CU_ASSERT_EQUAL(num(a, "t_ns"), 50);
    CU_ASSERT_EQUAL(num(a, "asked_ns"), 1000);
    CU_ASSERT_EQUAL(num(a, "allocated"), GM_MiB + 3072); /* the 5 MiB block freed at 50 */
    json_decref(sm);
    unlink(path);
}

static void test_oom(void)
{
    const char *path = small_trace();
    gm_tenant_spec t = {.path = path, .repeat = 1};
    gm_sim_config cfg;
    gm_err err = {0};
    json_t *sm = oom_maps(&cfg, &t, 12 * GM_MiB, &err); /* the 20 MiB segment does not fit */
    CU_ASSERT_PTR_NOT_NULL_FATAL(sm);
    CU_ASSERT_EQUAL(num(sm, "ooms_total"), 1);
    CU_ASSERT_EQUAL(num(sm, "peak_reserved_bytes"), 2 * GM_MiB);
    json_t *m = map_of(sm, "oom", 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL(num(m, "request"), 5 * GM_MiB);
    CU_ASSERT_EQUAL(num(m, "request_block"), 5 * GM_MiB);
    CU_ASSERT_EQUAL(num(m, "t_ns"), 40);
    /* free in the small segment: the 512 B gap and the tail */
    CU_ASSERT_EQUAL(num(m, "tenant_largest_free"), 2 * GM_MiB - GM_MiB - 3584);
    CU_ASSERT_EQUAL(num(m, "tenant_free"), 2 * GM_MiB - GM_MiB - 3072);
    CU_ASSERT_EQUAL(num(m, "category"), GM_CAT_TEMPORARY);
    /* the request is for the large pool, which has no segment at all */
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(m, "request_pool")), "large");
    CU_ASSERT_EQUAL(num(m, "pool_largest_free"), 0);
    CU_ASSERT_EQUAL(num(m, "pool_free"), 0);
    CU_ASSERT_PTR_NOT_NULL(map_of(sm, "peak", 0));
    /* on the page: the verdict in words, the site escaped */
    gm_strbuf b;
    json_t *j = run_page(&cfg, sm, &b);
    const char *h = gm_sb_str(&b);
    CU_ASSERT_PTR_NOT_NULL(strstr(h, "request 5.00 MiB &gt; largest free gap 0 B; "
                                     "1021.00 KiB free in total"));
    CU_ASSERT_PTR_NOT_NULL(strstr(h, "<svg class=\"chart segmap\" id=\"segmap-0-"));
    CU_ASSERT_PTR_NOT_NULL(strstr(h, "id=\"segmap-0-0-tip\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(h, "1.00 MiB block (1.00 MiB requested) \xc2\xb7 parameter "
                                     "\xc2\xb7 &lt;script&gt;alert(&#39;seg&#39;)&lt;/script&gt;"
                                     "/model.py:3 in fwd</title>"));
    CU_ASSERT_PTR_NULL(strstr(h, "alert('seg')"));
    const char *s = h;
    int scripts = 0;
    while ((s = strstr(s, "<script")))
        scripts++, s++;
    CU_ASSERT_EQUAL(scripts, 1); /* the page's own */
    gm_sb_free(&b);
    json_decref(j);
    unlink(path);
}

/* 2000 blocks of 1.5 MiB: 13 to a 20 MiB segment; the map stays in its
 * budget by merging them, and counts every one. */
static void test_budget(void)
{
    enum { N = 2000 };
    gm_event *ev = calloc(N, sizeof *ev);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ev);
    for (int i = 0; i < N; i++)
        ev[i] = (gm_event){.t_ns = (uint64_t)i,
                           .addr = 0x100000ull * (i + 1),
                           .size = 3 * GM_MiB / 2,
                           .op = GM_OP_ALLOC,
                           .category = GM_CAT_ACTIVATION};
    gm_trace_meta m;
    gm_trace_meta_init(&m);
    m.device_total_bytes = 80 * GM_GiB;
    gm_tenant_spec t = {.path = "in-memory", .events = ev, .n_events = N, .meta = &m, .repeat = 1};
    gm_sim_config cfg;
    config(&cfg, &t);
    gm_segmap_opts o;
    gm_segmap_opts_run(&o);
    for (int pass = 0; pass < 2; pass++) {
        if (pass) o.max_rows = 10;
        json_t *sm;
        gm_err err = {0};
        CU_ASSERT_EQUAL_FATAL(gm_segmap_json(&cfg, &o, &sm, &err), GM_OK);
        json_t *pk = map_of(sm, "peak", 0);
        CU_ASSERT_PTR_NOT_NULL_FATAL(pk);
        size_t segs = (N + 12) / 13, items = 0, blocks = 0, k, q;
        CU_ASSERT_EQUAL(num(pk, "segments"), (json_int_t)segs);
        json_t *rows = json_object_get(pk, "rows"), *g, *it;
        CU_ASSERT_EQUAL(json_array_size(rows), pass ? 10 : segs);
        CU_ASSERT_EQUAL(num(pk, "hidden_segments"), pass ? (json_int_t)segs - 10 : 0);
        json_array_foreach(rows, k, g) json_array_foreach(json_object_get(g, "items"), q, it)
        {
            items++;
            blocks += at(it, 2) == 1 ? 1 : at(it, 2) == 2 ? (size_t)at(it, 3) : 0;
        }
        CU_ASSERT(items <= o.max_items);
        /* the peak is the event that first reached it: the 154th segment's
         * first block (153 * 13 + 1); of the 10 lowest segments, all full */
        CU_ASSERT_EQUAL(blocks, pass ? 10 * 13 : 153 * 13 + 1);
        json_decref(sm);
    }
    gm_trace_meta_free(&m);
    free(ev);
}

/* 40000 events, 10 ns apart: 1 MiB tensors allocated and freed in turn, a
 * 64 MiB one held over [10 us, 12 us) (the peak of reserved memory), and
 * a 1 GiB request that cannot fit at 200 us, at 300 us and 300 ns later
 * (OOMs far from the peak). The zoom pyramid has windows around the peak
 * and around each OOM, each 4x narrower, all holding their moment, the
 * finest ~40 events; the third OOM, next to the second, gets only the
 * windows the second's do not hold. */
/* ev[n] as a trace in memory on an 80 GiB device (m: its metadata, for
 * the caller to free). */
static gm_tenant_spec mem_tenant(gm_event *ev, size_t n, gm_trace_meta *m)
{
    gm_trace_meta_init(m);
    m->device_total_bytes = 80 * GM_GiB;
    return (gm_tenant_spec){
        .path = "in-memory", .events = ev, .n_events = n, .meta = m, .repeat = 1};
}

/* The s-th 1 MiB allocation and its free, 10 ns apart, at ev[*n]: the
 * background the zoom tests put their peaks and OOMs on. */
static void mib_pair(gm_event *ev, size_t *n, uint64_t s)
{
    uint64_t a = 0x100000ull * (s + 1);
    ev[*n] = (gm_event){.t_ns = *n * 10, .addr = a, .size = GM_MiB, .op = GM_OP_ALLOC};
    ++*n;
    ev[*n] = (gm_event){.t_ns = *n * 10, .addr = a, .op = GM_OP_FREE};
    ++*n;
}

static void test_zoom_oom(void)
{
    enum { N = 40000 };
    const uint64_t want[3] = {200000, 300000, 300300};
    uint64_t oom_t[3] = {0, 0, 0};
    gm_event *ev = calloc(N, sizeof *ev);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ev);
    size_t n = 0, k_oom = 0;
    int big = 0;
    for (uint64_t s = 0; n + 4 < N; s++) {
        if (big < 2 && n * 10 >= (big ? 12000u : 10000u)) {
            ev[n] = (gm_event){.t_ns = n * 10,
                               .addr = 0x7000000000ull,
                               .size = big ? 0 : 64 * GM_MiB,
                               .op = big ? GM_OP_FREE : GM_OP_ALLOC,
                               .category = GM_CAT_ACTIVATION};
            n++, big++;
        }
        if (k_oom < 3 && n * 10 >= want[k_oom]) {
            oom_t[k_oom] = n * 10;
            ev[n] = (gm_event){.t_ns = n * 10,
                               .addr = 0x8000000000ull + k_oom,
                               .size = GM_GiB,
                               .op = GM_OP_ALLOC,
                               .category = GM_CAT_TEMPORARY};
            n++, k_oom++;
        }
        mib_pair(ev, &n, s);
    }
    CU_ASSERT_EQUAL_FATAL(k_oom, 3);
    gm_trace_meta m;
    gm_tenant_spec t = mem_tenant(ev, n, &m);
    gm_sim_config cfg;
    gm_err err = {0};
    json_t *sm = oom_maps(&cfg, &t, 512 * GM_MiB, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(sm);
    CU_ASSERT_EQUAL(num(sm, "ooms_total"), 3);
    json_t *z = json_object_get(sm, "zoom"), *lv = json_object_get(z, "levels"), *l;
    CU_ASSERT_PTR_NOT_NULL_FATAL(lv);
    json_t *oo = json_object_get(z, "oom_ns");
    CU_ASSERT_EQUAL_FATAL(json_array_size(oo), 3);
    for (size_t k = 0; k < 3; k++)
        CU_ASSERT_EQUAL(json_integer_value(json_array_get(oo, k)), (json_int_t)oom_t[k]);
    uint64_t peak_t = (uint64_t)num(z, "center_ns");
    CU_ASSERT(peak_t >= 10000 && peak_t < 12000);
    /* per group (peak, OOM 0, 1, 2): its levels, each 4x narrower than the
     * one before it, every one holding its moment */
    uint64_t last_w[4] = {0}, fin_w[4] = {0}, span = (n - 1) * 10 + 1;
    size_t per[4] = {0}, i, k;
    json_array_foreach(lv, i, l)
    {
        const char *around = json_string_value(json_object_get(l, "around"));
        CU_ASSERT_PTR_NOT_NULL_FATAL(around);
        int g = !strcmp(around, "peak") ? 0 : 1 + (int)num(l, "oom");
        CU_ASSERT_FATAL(g >= 0 && g < 4);
        CU_ASSERT_EQUAL(!strcmp(around, "oom"), g > 0);
        uint64_t t0 = (uint64_t)num(l, "t0"), t1 = (uint64_t)num(l, "t1"), w = t1 - t0,
                 c = g ? oom_t[g - 1] : peak_t;
        CU_ASSERT(t0 <= c && c < t1);
        CU_ASSERT(t1 <= span);
        /* a quarter of the trace, then each a quarter of the one before */
        uint64_t expect = last_w[g] ? last_w[g] / 4 : span / 4;
        if (!(g == 3 && !last_w[g])) CU_ASSERT(w + 1 >= expect && w <= expect + 1);
        last_w[g] = fin_w[g] = w;
        per[g]++;
        CU_ASSERT_EQUAL(json_array_size(json_object_get(l, "reserved")), 400);
        json_t *l2; /* no two windows alike */
        json_array_foreach(lv, k, l2) if (k < i)
            CU_ASSERT(num(l2, "t0") != (json_int_t)t0 || num(l2, "t1") != (json_int_t)t1);
    }
    /* 40000 events: 10000, 2500, 625, 156, 39 events a window */
    CU_ASSERT_EQUAL(per[0], 5);
    CU_ASSERT_EQUAL(per[1], 5);
    CU_ASSERT_EQUAL(per[2], 5);
    CU_ASSERT_EQUAL(per[3], 2); /* the 3 coarser ones are the second OOM's */
    for (int g = 0; g < 4; g++)
        CU_ASSERT(fin_w[g] > 0 && fin_w[g] <= 1000); /* <= 100 events */
    /* on the page: data-lv carries every level, each with its group */
    gm_strbuf b;
    json_t *j = run_page(&cfg, sm, &b);
    const char *h = strstr(gm_sb_str(&b), " data-lv=\""), *e = h ? strchr(h + 10, '"') : NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    size_t levels = 1, groups[4] = {0};
    for (const char *q = h + 10; q < e; q++)
        levels += *q == '|';
    CU_ASSERT_EQUAL(levels, json_array_size(lv));
    for (const char *q = h + 10; q && q < e; q = strchr(q, '|'), q = q ? q + 1 : NULL) {
        double f0, f1, lo, hi;
        int g = -1;
        CU_ASSERT_EQUAL_FATAL(sscanf(q, "%lf,%lf,%lf,%lf,%d;", &f0, &f1, &lo, &hi, &g), 5);
        CU_ASSERT_FATAL(g >= 0 && g < 4);
        groups[g]++;
        CU_ASSERT(f0 >= 0 && f0 < f1 && f1 <= 1.0001 && lo < hi);
    }
    for (int g = 0; g < 4; g++)
        CU_ASSERT_EQUAL(groups[g], per[g]);
    CU_ASSERT((size_t)(e - h) < levels * 7000); /* 4 series of 400 values 0..999 a level */
    gm_sb_free(&b);
    json_decref(j);
    gm_trace_meta_free(&m);
    free(ev);
}

/* Without the zoom pyramid one pass finds the peak as it goes (segmap.c,
 * capture_peak): here the reserved bytes set four peaks (the last the
 * small pool's first 2 MiB segment), an OOM comes between the first two
 * and one after the last; the maps are those two passes give (the run
 * page's options, whose zoom asks for two), in their order, the peak's
 * the last one's. */
static void test_one_pass_is_two(void)
{
    const uint64_t M = GM_MiB;
    gm_event ev[] = {
        {.t_ns = 0, .addr = 0x100000, .size = 30 * M, .op = GM_OP_ALLOC},   /* peak 1 */
        {.t_ns = 10, .addr = 0x200000, .size = GM_GiB, .op = GM_OP_ALLOC},  /* OOM 1 */
        {.t_ns = 20, .addr = 0x300000, .size = 100 * M, .op = GM_OP_ALLOC}, /* peak 2 */
        {.t_ns = 30, .addr = 0x100000, .op = GM_OP_FREE},
        {.t_ns = 31, .addr = 0x300000, .op = GM_OP_FREE},
        {.t_ns = 40, .addr = 0x400000, .size = 200 * M, .op = GM_OP_ALLOC},    /* peak 3 */
        {.t_ns = 45, .addr = 0x500000, .size = 3000, .op = GM_OP_ALLOC},       /* peak 4 */
        {.t_ns = 50, .addr = 0x600000, .size = 2 * GM_GiB, .op = GM_OP_ALLOC}, /* OOM 2 */
        {.t_ns = 60, .addr = 0x400000, .op = GM_OP_FREE},
    };
    gm_trace_meta m;
    gm_tenant_spec t = mem_tenant(ev, sizeof ev / sizeof ev[0], &m);
    gm_sim_config cfg;
    config(&cfg, &t);
    cfg.capacity_bytes = 512 * M;
    cfg.overhead_given = 1;
    cfg.on_oom_skip = 1;
    gm_segmap_opts two, one;
    gm_segmap_opts_run(&two); /* zoom: two passes */
    one = two;
    one.zoom = 0;
    json_t *a = NULL, *b = NULL;
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_segmap_json(&cfg, &two, &a, &err), GM_OK);
    CU_ASSERT_EQUAL_FATAL(gm_segmap_json(&cfg, &one, &b, &err), GM_OK);
    CU_ASSERT_PTR_NULL(json_object_get(b, "zoom"));
    CU_ASSERT_TRUE(json_equal(json_object_get(a, "maps"), json_object_get(b, "maps")));
    CU_ASSERT_EQUAL(num(b, "peak_reserved_bytes"), num(a, "peak_reserved_bytes"));
    CU_ASSERT_EQUAL(num(b, "ooms_total"), 2);
    CU_ASSERT_EQUAL(num(b, "peak_reserved_bytes"), 332 * (json_int_t)M);
    json_t *maps = json_object_get(b, "maps");
    CU_ASSERT_EQUAL_FATAL(json_array_size(maps), 3);
    static const char *const kind[3] = {"oom", "peak", "oom"};
    static const json_int_t when[3] = {10, 45, 50};
    for (size_t i = 0; i < 3; i++) {
        json_t *x = json_array_get(maps, i);
        CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(x, "kind")), kind[i]);
        CU_ASSERT_EQUAL(num(x, "t_ns"), when[i]);
    }
    json_decref(a);
    json_decref(b);
    gm_trace_meta_free(&m);
}

/* A trace of at most cap events on mib_pair's background, the peak a 64
 * MiB block from event 1000 to 1200, and a 1 GiB request (an OOM on the
 * tests' 512 MiB device) at each of the n_oom places oom_at (in order):
 * the tests of where a pass ends. Its length. */
static size_t peak_trace(gm_event *ev, size_t cap, const size_t *oom_at, size_t n_oom)
{
    size_t n = 0, big = 0, k = 0;
    for (uint64_t s = 0; n + 4 < cap; s++) {
        if (big < 2 && n >= (big ? 1200u : 1000u)) { /* the peak: 64 MiB for 200 events */
            ev[n] = (gm_event){.t_ns = n * 10,
                               .addr = 0x7000000000ull,
                               .size = big ? 0 : 64 * GM_MiB,
                               .op = big ? GM_OP_FREE : GM_OP_ALLOC};
            n++, big++;
        }
        if (k < n_oom && n >= oom_at[k]) {
            ev[n] = (gm_event){
                .t_ns = n * 10, .addr = 0x8000000000ull + k, .size = GM_GiB, .op = GM_OP_ALLOC};
            n++, k++;
        }
        mib_pair(ev, &n, s);
    }
    return n;
}

/* A run page's second pass ends once it has every map and every zoom
 * window (segmap.c, halt_when_done): here the peak and the OOMs come in
 * the first eighth of 40 000 events. A --segments-at past the end keeps
 * the pass to the end (that map is made there); the zoom, the other maps
 * and the OOM count are the same either way. */
static void test_halt_is_whole(void)
{
    enum { N = 40000 };
    gm_event *ev = calloc(N, sizeof *ev);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ev);
    static const size_t oom_at[] = {3000, 4000};
    size_t n = peak_trace(ev, N, oom_at, 2);
    gm_trace_meta m;
    gm_tenant_spec t = mem_tenant(ev, n, &m);
    gm_sim_config cfg;
    gm_err err = {0};
    json_t *a = oom_maps(&cfg, &t, 512 * GM_MiB, &err);
    gm_segmap_opts o;
    gm_segmap_opts_run(&o);
    o.at_given = 1;
    o.at_ns = 10 * (uint64_t)N; /* after the last event */
    json_t *b = NULL;
    CU_ASSERT_EQUAL(gm_segmap_json(&cfg, &o, &b, &err), GM_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    CU_ASSERT_EQUAL(num(a, "ooms_total"), 2);
    CU_ASSERT_EQUAL(num(b, "ooms_total"), 2);
    CU_ASSERT_PTR_NOT_NULL(json_object_get(a, "zoom"));
    CU_ASSERT_TRUE(json_equal(json_object_get(a, "zoom"), json_object_get(b, "zoom")));
    json_t *bm = json_object_get(b, "maps");
    CU_ASSERT_PTR_NOT_NULL(map_of(b, "at", 0));
    size_t last = json_array_size(bm) - 1; /* the 'at' map, made at the end */
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_array_get(bm, last), "kind")),
                           "at");
    json_array_remove(bm, last);
    CU_ASSERT_TRUE(json_equal(json_object_get(a, "maps"), bm));
    CU_ASSERT_EQUAL(json_array_size(bm), 3); /* peak, two OOMs */
    json_decref(a);
    json_decref(b);
    gm_trace_meta_free(&m);
    free(ev);
}

/* The device's peak reserved bytes and OOM count of cfg's run, as its
 * result says them: what a page gives the maps (segmap.h, hinted). */
static void hint_of_run(const gm_sim_config *cfg, gm_segmap_opts *o)
{
    gm_sim_result *r = NULL;
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_simulate(cfg, &r, &err), GM_OK);
    json_t *j = gm_result_json(cfg, r, "run");
    gm_sim_result_free(r);
    gm_segmap_hint(o, j);
    CU_ASSERT_TRUE(o->hinted);
    json_decref(j);
}

/* The hint tests' trace: peak_trace's 40 000 events, an OOM's request
 * before the peak and two after it, as tenant *t (meta *m); the caller
 * frees the events and m. */
static gm_event *hint_trace(size_t *n, gm_trace_meta *m, gm_tenant_spec *t)
{
    enum { N = 40000 };
    static const size_t oom_at[] = {500, 3000, 4000};
    gm_event *ev = calloc(N, sizeof *ev);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ev);
    *n = peak_trace(ev, N, oom_at, 3);
    *t = mem_tenant(ev, *n, m);
    return ev;
}

/* The run of the hint tests: their trace on a tight device (OOMs skipped)
 * or a roomy one, and the maps' options for a comparison or (zoom) a run
 * page, as they are (whole) and with the run's hints (hinted). */
static void hint_case(gm_sim_config *cfg, gm_tenant_spec *t, int tight, int zoom,
                      gm_segmap_opts *whole, gm_segmap_opts *hinted)
{
    config(cfg, t);
    cfg->capacity_bytes = tight ? 512 * GM_MiB : 80 * GM_GiB;
    cfg->overhead_given = 1;
    cfg->on_oom_skip = 1;
    if (zoom)
        gm_segmap_opts_run(whole);
    else
        gm_segmap_opts_compare(whole);
    *hinted = *whole;
    hint_of_run(cfg, hinted);
}

/* A comparison's one pass ends where its run's result says the last peak
 * and the last OOM are (segmap.c, halt_when_done): the maps are those of a
 * pass to the end, with OOMs on both sides of the peak and with none. A
 * hint of one OOM, the one before the peak, ends it at the peak: the two
 * after it are never seen, so the pass did stop there. */
static void test_hint_ends_pass(void)
{
    size_t n;
    gm_trace_meta m;
    gm_tenant_spec t;
    gm_event *ev = hint_trace(&n, &m, &t);
    gm_sim_config cfg;
    gm_err err = {0};
    for (int tight = 1; tight >= 0; tight--) {
        gm_segmap_opts whole, hinted;
        hint_case(&cfg, &t, tight, 0, &whole, &hinted);
        CU_ASSERT_EQUAL(hinted.hint_ooms, tight ? 3 : 0);
        json_t *a = NULL, *b = NULL;
        CU_ASSERT_EQUAL_FATAL(gm_segmap_json(&cfg, &whole, &a, &err), GM_OK);
        CU_ASSERT_EQUAL_FATAL(gm_segmap_json(&cfg, &hinted, &b, &err), GM_OK);
        CU_ASSERT_TRUE(json_equal(a, b));
        CU_ASSERT_EQUAL(num(b, "ooms_total"), tight ? 3 : 0);
        CU_ASSERT_PTR_NOT_NULL(map_of(b, "peak", 0));
        if (tight) {              /* a hint of the first OOM only */
            hinted.hint_ooms = 1; /* the one before it */
            json_t *c = NULL;
            CU_ASSERT_EQUAL_FATAL(gm_segmap_json(&cfg, &hinted, &c, &err), GM_OK);
            CU_ASSERT_EQUAL(num(c, "ooms_total"), 1);
            CU_ASSERT_EQUAL(num(c, "peak_reserved_bytes"), num(a, "peak_reserved_bytes"));
            CU_ASSERT_TRUE(json_equal(json_object_get(map_of(c, "peak", 0), "t_ns"),
                                      json_object_get(map_of(a, "peak", 0), "t_ns")));
            CU_ASSERT_PTR_NULL(map_of(c, "oom", 1));
            json_decref(c);
        }
        json_decref(a);
        json_decref(b);
    }
    gm_trace_meta_free(&m);
    free(ev);
}

/* A run page's first pass (the zoom pyramid's) ends likewise where the
 * result says the last peak and OOM are, the span taken from the result:
 * the page is the one two whole passes make, with OOMs on both sides of the
 * peak and with none. A hint of one OOM ends pass 1 at the peak (one OOM
 * counted, not three), and a hint of half the events places the windows
 * from it: pass 1 did stop and use them. */
static void test_hint_ends_first_pass(void)
{
    size_t n;
    gm_trace_meta m;
    gm_tenant_spec t;
    gm_event *ev = hint_trace(&n, &m, &t);
    gm_sim_config cfg;
    gm_err err = {0};
    for (int tight = 1; tight >= 0; tight--) {
        gm_segmap_opts whole, hinted;
        hint_case(&cfg, &t, tight, 1, &whole, &hinted);
        CU_ASSERT_TRUE(hinted.hint_span);
        CU_ASSERT_EQUAL(hinted.hint_events, n);
        CU_ASSERT_EQUAL(hinted.hint_end_ns, ev[n - 1].t_ns);
        json_t *a = NULL, *b = NULL;
        CU_ASSERT_EQUAL_FATAL(gm_segmap_json(&cfg, &whole, &a, &err), GM_OK);
        CU_ASSERT_EQUAL_FATAL(gm_segmap_json(&cfg, &hinted, &b, &err), GM_OK);
        CU_ASSERT_TRUE(json_equal(a, b));
        CU_ASSERT_EQUAL(num(b, "ooms_total"), tight ? 3 : 0);
        CU_ASSERT_PTR_NOT_NULL(json_object_get(b, "zoom"));
        gm_segmap_opts short_ = hinted;
        if (tight)
            short_.hint_ooms = 1; /* the OOM before the peak only */
        else
            short_.hint_events = hinted.hint_events / 2;
        json_t *c = NULL;
        CU_ASSERT_EQUAL_FATAL(gm_segmap_json(&cfg, &short_, &c, &err), GM_OK);
        if (tight) {
            CU_ASSERT_EQUAL(num(c, "ooms_total"), 1);
        } else {
            CU_ASSERT_FALSE(json_equal(json_object_get(a, "zoom"), json_object_get(c, "zoom")));
        }
        CU_ASSERT_EQUAL(num(c, "peak_reserved_bytes"), num(a, "peak_reserved_bytes"));
        json_decref(a);
        json_decref(b);
        json_decref(c);
    }
    /* a tenant without events starts at its offset, after every event here:
     * the device's last time is not the last event's, and pass 1 runs whole */
    gm_trace_meta m0;
    gm_tenant_spec two[2] = {t, mem_tenant(ev, 0, &m0)};
    two[1].offset_ns = ev[n - 1].t_ns + 1000;
    config(&cfg, two);
    cfg.n_tenants = 2;
    cfg.overhead_given = 1;
    gm_segmap_opts whole, hinted;
    gm_segmap_opts_run(&whole);
    hinted = whole;
    hint_of_run(&cfg, &hinted);
    CU_ASSERT_FALSE(hinted.hint_span);
    json_t *a = NULL, *b = NULL;
    CU_ASSERT_EQUAL_FATAL(gm_segmap_json(&cfg, &whole, &a, &err), GM_OK);
    CU_ASSERT_EQUAL_FATAL(gm_segmap_json(&cfg, &hinted, &b, &err), GM_OK);
    CU_ASSERT_TRUE(json_equal(a, b));
    json_decref(a);
    json_decref(b);
    gm_trace_meta_free(&m0);
    gm_trace_meta_free(&m);
    free(ev);
}

/* A tenant that dies on an OOM gives its memory back (the engine retires
 * it, with no driver call said): its segments leave the maps' count of the
 * device's reserved bytes then, as they leave the device's series. Here
 * tenant 0 holds 300 MiB and dies at 10 ns; tenant 1 peaks at 402 MiB at
 * 100 ns. Counted on, the maps' peak would be 702 MiB, which the run never
 * had, and the page would drop them. */
static void test_retired_tenant(void)
{
    const uint64_t M = GM_MiB;
    gm_event e0[] = {
        {.t_ns = 0, .addr = 0x100000, .size = 300 * M, .op = GM_OP_ALLOC},
        {.t_ns = 10, .addr = 0x200000, .size = 2 * GM_GiB, .op = GM_OP_ALLOC}, /* dies */
    };
    gm_event e1[] = {
        {.t_ns = 0, .addr = 0x100000, .size = M, .op = GM_OP_ALLOC},
        {.t_ns = 100, .addr = 0x200000, .size = 400 * M, .op = GM_OP_ALLOC}, /* the peak */
        {.t_ns = 110, .addr = 0x200000, .op = GM_OP_FREE},
        {.t_ns = 120, .addr = 0x100000, .op = GM_OP_FREE},
    };
    gm_trace_meta m0, m1;
    gm_tenant_spec t[2] = {mem_tenant(e0, 2, &m0), mem_tenant(e1, 4, &m1)};
    gm_sim_config cfg;
    config(&cfg, t);
    cfg.n_tenants = 2;
    cfg.capacity_bytes = GM_GiB;
    cfg.overhead_given = 1;
    gm_segmap_opts o[2];
    gm_segmap_opts_run(&o[0]); /* two passes (the first finds the peak) */
    gm_segmap_opts_compare(&o[1]);
    hint_of_run(&cfg, &o[1]);
    CU_ASSERT_EQUAL(o[1].hint_peak, 402 * M);
    for (int k = 0; k < 2; k++) {
        json_t *sm = NULL;
        gm_err err = {0};
        CU_ASSERT_EQUAL_FATAL(gm_segmap_json(&cfg, &o[k], &sm, &err), GM_OK);
        CU_ASSERT_EQUAL(num(sm, "peak_reserved_bytes"), 402 * (json_int_t)M);
        CU_ASSERT_EQUAL(num(map_of(sm, "peak", 0), "t_ns"), 100);
        json_decref(sm);
    }
    gm_trace_meta_free(&m0);
    gm_trace_meta_free(&m1);
}

/* A comparison page's maps, where a policy's run is another's (pytorch's
 * is lru's and priority's when no driver call was refused, study/same_run.h)
 * taken from it, are each policy's own: what gm_segmap_json gives for it
 * alone. On a device where calls are refused, and with the zoom (two
 * passes) and without (one). */
static void test_shared_maps(void)
{
    gm_err err = {0};
    gm_bert_stats st;
    const char *path = bert_trace("shared_maps.h5", 12, &st);
    gm_tenant_spec t = {.path = path, .repeat = 1};
    static const char *const pol[] = {"pytorch", "lru", "predictive", "priority"};
    const uint64_t caps[] = {80 * GM_GiB, st.peak_live_bytes + st.peak_live_bytes / 20};
    for (size_t k = 0; k < 2; k++)
        for (int zoom = 0; zoom < 2; zoom++) {
            gm_sim_config cfg;
            config(&cfg, &t);
            cfg.capacity_bytes = caps[k];
            cfg.overhead_given = 1;
            cfg.on_oom_skip = 1;
            gm_compare *c = NULL;
            CU_ASSERT_EQUAL_FATAL(gm_compare_run(&cfg, (char *const *)pol, 4, 2, &c, &err), GM_OK);
            CU_ASSERT_EQUAL(c->e[0].r->t[0].policy_asks > 0, k == 1);
            json_t *j = gm_compare_json(&cfg, c);
            gm_compare_free(c);
            CU_ASSERT_PTR_NOT_NULL_FATAL(j);
            gm_segmap_opts o;
            gm_segmap_opts_compare(&o);
            o.zoom = zoom;
            CU_ASSERT_EQUAL_FATAL(gm_segmap_page_attach(j, &cfg, &o, 2, NULL, &err), GM_OK);
            json_t *results = json_object_get(j, "results");
            CU_ASSERT_EQUAL_FATAL(json_array_size(results), 4);
            for (size_t i = 0; i < 4; i++) {
                json_t *res = json_array_get(results, i);
                gm_sim_config one = cfg;
                one.policy =
                    json_string_value(json_object_get(json_object_get(res, "inputs"), "policy"));
                CU_ASSERT_PTR_NOT_NULL_FATAL(one.policy);
                gm_segmap_opts oo = o;
                gm_segmap_hint(&oo, res);
                json_t *alone = NULL;
                CU_ASSERT_EQUAL_FATAL(gm_segmap_json(&one, &oo, &alone, &err), GM_OK);
                json_t *got = json_object_get(res, "segment_maps");
                CU_ASSERT(json_array_size(json_object_get(got, "maps")) > 0);
                CU_ASSERT(json_equal(got, alone));
                json_decref(alone);
            }
            json_decref(j);
        }
    unlink(path);
}

int gm_test_register(void)
{
    CU_pSuite s = CU_add_suite("segmap", NULL, NULL);
    if (!s) return CU_get_error();
    GM_ADD_TEST(s, test_peak_and_time);
    GM_ADD_TEST(s, test_oom);
    GM_ADD_TEST(s, test_budget);
    GM_ADD_TEST(s, test_zoom_oom);
    GM_ADD_TEST(s, test_one_pass_is_two);
    GM_ADD_TEST(s, test_halt_is_whole);
    GM_ADD_TEST(s, test_hint_ends_pass);
    GM_ADD_TEST(s, test_hint_ends_first_pass);
    GM_ADD_TEST(s, test_retired_tenant);
    GM_ADD_TEST(s, test_shared_maps);
    return CUE_SUCCESS;
}
