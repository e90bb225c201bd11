/*
 * test_alloc_models.c - what every allocator model owes the seam (alloc.h)
 * and every release policy, checked on every registered model with every
 * registered policy: the registry names them all; a random workload near
 * the device's capacity keeps the counters and the policy view consistent
 * after each call (requested <= allocated <= reserved = the device's use,
 * largest free <= reserved - allocated, live blocks inside the segments the
 * view lists, an OOM changes nothing; segment_at, where a model has it,
 * shows each segment as its brief, and briefs the segments and the
 * releasable ones as segments() and releasable() do, releasable_briefs
 * the latter in place; class_counts counts
 * the classic segments of the view by pool and size, class_free the
 * releasable ones and those used after a mark); everything returns
 * at the end; and
 * the engine runs each pair to completion (timers, the oracle's future).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_fx.h"
#include "study/simulate.h"

#define NOPS 3000
#define NLIVE 512

typedef struct rng {
    uint64_t s;
} rng;

static uint64_t next(rng *r)
{
    r->s = r->s * 6364136223846793005ull + 1442695040888963407ull;
    return r->s >> 33;
}

/* Sizes as a training step has them: many small, some medium, a few large. */
static uint64_t pick_size(rng *r)
{
    uint64_t k = next(r) % 100;
    if (k < 60) return 1 + next(r) % MiB;
    if (k < 95) return MiB + next(r) % (19 * MiB);
    return 20 * MiB + next(r) % (180 * MiB);
}

static void test_registry(void)
{
    char all[256] = "";
    size_t n = 0;
    for (size_t i = 0; gm_alloc_at(i); i++) {
        const gm_alloc_ops *o = gm_alloc_at(i);
        CU_ASSERT_EQUAL(o->version, GM_ALLOC_VERSION);
        CU_ASSERT_PTR_EQUAL(gm_alloc_find(o->name), o);
        CU_ASSERT(o->summary && o->summary[0]);
        n += (size_t)snprintf(all + n, sizeof all - n, "%s%s", i ? ", " : "", o->name);
    }
    CU_ASSERT_STRING_EQUAL(gm_alloc_names(), all);
    CU_ASSERT_PTR_NOT_NULL(strstr(all, "cuda-async"));
    CU_ASSERT_PTR_NOT_NULL(strstr(all, "rmm-pool"));
    CU_ASSERT_PTR_NOT_NULL(strstr(all, "rmm-arena"));
    CU_ASSERT_PTR_NOT_NULL(strstr(all, "rmm-binning"));
    CU_ASSERT_PTR_NOT_NULL(strstr(all, "tf-bfc"));
    CU_ASSERT_PTR_NULL(gm_alloc_find("rmm"));
}

static int by_addr(const void *x, const void *y)
{
    const gm_seg_info *a = x, *b = y;
    return a->addr < b->addr ? -1 : a->addr > b->addr;
}

static int brief_by_addr(const void *x, const void *y)
{
    const gm_seg_brief *a = x, *b = y;
    return a->addr < b->addr ? -1 : a->addr > b->addr;
}

/* briefs: segments()' segments (v[0..n)) in their order, and releasable()'s
 * in any (alloc.h), each cut short to its gm_seg_brief. */
/* Every field of a brief. */
static void check_brief(const gm_seg_brief *got, const gm_seg_brief *want)
{
    CU_ASSERT_EQUAL(got->id, want->id);
    CU_ASSERT_EQUAL(got->addr, want->addr);
    CU_ASSERT_EQUAL(got->size, want->size);
    CU_ASSERT_EQUAL(got->last_use_ns, want->last_use_ns);
    CU_ASSERT_EQUAL(got->releasable, want->releasable);
    CU_ASSERT_EQUAL(got->n_allocated, want->n_allocated);
    CU_ASSERT_EQUAL(got->small_pool, want->small_pool);
    CU_ASSERT_EQUAL(got->expandable, want->expandable);
}

static void check_briefs(fx *f, const gm_seg_info *v, size_t n, size_t cap)
{
    gm_seg_info *r = malloc(cap * sizeof *r);
    gm_seg_brief *b = malloc(cap * sizeof *b);
    CU_ASSERT_FATAL(r && b);
    for (int only = 0; only <= 1; only++) {
        size_t nr = 0;
        if (!only)
            for (size_t i = 0; i < n; i++)
                r[nr++] = v[i];
        else if (f->a->ops->releasable)
            nr = f->a->ops->releasable(f->a, r, cap);
        else
            for (size_t i = 0; i < n; i++)
                if (v[i].releasable) r[nr++] = v[i];
        size_t nb = f->a->ops->briefs(f->a, only, b, cap);
        CU_ASSERT_EQUAL(nb, nr);
        if (only && nb <= cap && nr <= cap) { /* the same segments, in any order */
            qsort(r, nr, sizeof *r, by_addr);
            qsort(b, nb, sizeof *b, brief_by_addr);
        }
        for (size_t i = 0; i < nb && i < nr && i < cap; i++) {
            gm_seg_brief want = gm_seg_brief_of(&r[i]);
            check_brief(&b[i], &want);
            if (only) CU_ASSERT(b[i].releasable != 0);
        }
        if (nb) CU_ASSERT_EQUAL(f->a->ops->briefs(f->a, only, b, nb - 1), nb); /* cap short */
    }
    free(r);
    free(b);
}

/* releasable_briefs: what briefs(a, 1, ...) copies, the same briefs in
 * the same order, read in place; NULL only where the model has no such
 * array (pytorch: with an expandable segment, whose briefs briefs()
 * appends). */
static void check_releasable_briefs(fx *f, const gm_seg_info *v, size_t n, size_t cap)
{
    gm_seg_brief *b = malloc(cap * sizeof *b);
    CU_ASSERT_FATAL(b != NULL);
    size_t nb = f->a->ops->briefs(f->a, 1, b, cap), no = SIZE_MAX;
    const gm_seg_brief *own = f->a->ops->releasable_briefs(f->a, &no);
    int expandable = 0;
    for (size_t i = 0; i < n; i++)
        expandable |= v[i].expandable;
    if (!strcmp(f->a->ops->name, "pytorch")) CU_ASSERT_EQUAL(own == NULL, expandable);
    if (own) {
        CU_ASSERT_EQUAL_FATAL(no, nb);
        for (size_t i = 0; i < nb && i < cap; i++)
            check_brief(&own[i], &b[i]);
    }
    free(b);
}

/* whole_free: the classic segments of v[0..n) that are one free block,
 * in any order (alloc.h), with segments()' figures. */
static void check_whole_free(fx *f, const gm_seg_info *v, size_t n, size_t cap)
{
    gm_seg_info *want = malloc(cap * sizeof *want), *got = malloc(cap * sizeof *got);
    CU_ASSERT_FATAL(want && got);
    size_t nw = 0;
    for (size_t i = 0; i < n; i++)
        if (!v[i].expandable && v[i].n_allocated == 0 && v[i].n_blocks == 1) want[nw++] = v[i];
    size_t ng = f->a->ops->whole_free(f->a, got, cap);
    CU_ASSERT_EQUAL_FATAL(ng, nw);
    qsort(want, nw, sizeof *want, by_addr);
    qsort(got, ng, sizeof *got, by_addr);
    for (size_t i = 0; i < ng; i++) {
        const gm_seg_info *g = &got[i], *w = &want[i];
        CU_ASSERT(g->id == w->id && g->addr == w->addr && g->size == w->size &&
                  g->stream == w->stream && g->small_pool == w->small_pool &&
                  g->releasable == w->releasable && g->largest_free == w->largest_free &&
                  g->last_use_ns == w->last_use_ns && g->gc_age == w->gc_age);
    }
    if (ng) CU_ASSERT_EQUAL(f->a->ops->whole_free(f->a, got, ng - 1), ng); /* cap short */
    free(want);
    free(got);
}

/* class_counts: the classic segments of v[0..n) by (pool, size), in that
 * order, none of count 0. */
static void check_classes(fx *f, const gm_seg_info *v, size_t n)
{
    gm_seg_class want[64], got[64];
    size_t nw = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i].expandable) continue;
        size_t k = 0;
        while (k < nw && (want[k].small_pool < v[i].small_pool ||
                          (want[k].small_pool == v[i].small_pool && want[k].size < v[i].size)))
            k++;
        if (k == nw || want[k].small_pool != v[i].small_pool || want[k].size != v[i].size) {
            CU_ASSERT_FATAL(nw < 64);
            memmove(&want[k + 1], &want[k], (nw - k) * sizeof *want);
            want[k] = (gm_seg_class){.size = v[i].size, .count = 0, .small_pool = v[i].small_pool};
            nw++;
        }
        want[k].count++;
    }
    size_t ng = f->a->ops->class_counts(f->a, got, 64);
    CU_ASSERT_EQUAL_FATAL(ng, nw);
    for (size_t k = 0; k < ng; k++) {
        CU_ASSERT_EQUAL(got[k].small_pool, want[k].small_pool);
        CU_ASSERT_EQUAL(got[k].size, want[k].size);
        CU_ASSERT_EQUAL(got[k].count, want[k].count);
    }
    if (ng) CU_ASSERT_EQUAL(f->a->ops->class_counts(f->a, got, ng - 1), ng); /* cap short */
}

/* class_free: of class_counts' classes, the releasable segments of
 * v[0..n) and of those the ones last used after a mark, for marks before,
 * among and after the last uses there are. */
static void check_class_free(fx *f, const gm_seg_info *v, size_t n)
{
    gm_seg_class cls[64];
    size_t nc = f->a->ops->class_counts(f->a, cls, 64);
    CU_ASSERT_FATAL(nc <= 64);
    uint64_t top = 0;
    for (size_t i = 0; i < n; i++)
        top = v[i].last_use_ns > top ? v[i].last_use_ns : top;
    const uint64_t marks[] = {0, top / 3, top / 2, top ? top - 1 : 0, top, top + 1};
    for (size_t m = 0; m < sizeof marks / sizeof *marks; m++) {
        uint32_t free_got[64], since_got[64], free_want[64] = {0}, since_want[64] = {0};
        for (size_t i = 0; i < n; i++) {
            if (v[i].expandable || !v[i].releasable) continue;
            size_t k = 0;
            while (k < nc && (cls[k].small_pool != v[i].small_pool || cls[k].size != v[i].size))
                k++;
            CU_ASSERT_FATAL(k < nc); /* a classic segment's class is counted */
            free_want[k]++;
            since_want[k] += v[i].last_use_ns > marks[m];
        }
        size_t ng = f->a->ops->class_free(f->a, marks[m], free_got, since_got, 64);
        CU_ASSERT_EQUAL_FATAL(ng, nc); /* the model keeps them (briefs and class_counts asked) */
        for (size_t k = 0; k < nc; k++) {
            CU_ASSERT_EQUAL(free_got[k], free_want[k]);
            CU_ASSERT_EQUAL(since_got[k], since_want[k]);
        }
        if (nc)
            CU_ASSERT_EQUAL(f->a->ops->class_free(f->a, marks[m], free_got, since_got, nc - 1), nc);
    }
}

/* The counters and the view after a call. */
static void check_state(fx *f, const uint64_t *live, size_t nlive, int deep)
{
    const gm_alloc_counters *c = &f->a->c;
    CU_ASSERT(c->requested_bytes <= c->allocated_bytes);
    CU_ASSERT(c->allocated_bytes <= c->reserved_bytes);
    CU_ASSERT_EQUAL(f->dev->used_bytes, c->reserved_bytes);
    CU_ASSERT(f->a->ops->largest_free(f->a) <= c->reserved_bytes - c->allocated_bytes);
    if (!deep) return;
    size_t cap = 4096;
    gm_seg_info *v = malloc(cap * sizeof *v);
    CU_ASSERT_FATAL(v != NULL);
    size_t n = f->a->ops->segments(f->a, v, cap);
    CU_ASSERT(n <= cap);
    uint64_t total = 0, n_alloc = 0;
    for (size_t i = 0; i < n && i < cap; i++) {
        total += v[i].size;
        n_alloc += v[i].n_allocated;
        CU_ASSERT(v[i].releasable <= v[i].size);
        CU_ASSERT(v[i].n_allocated <= v[i].n_blocks);
        if (!f->a->ops->segment_at) continue;
        /* segment_at: the view in short, and its promise (alloc.h) */
        CU_ASSERT_PTR_NOT_NULL(f->a->ops->briefs);
        gm_seg_brief one;
        CU_ASSERT_FATAL(f->a->ops->segment_at(f->a, v[i].addr, &one) == 1);
        gm_seg_brief want = gm_seg_brief_of(&v[i]);
        check_brief(&one, &want);
        CU_ASSERT_EQUAL(f->a->ops->segment_at(f->a, v[i].addr + 1, &one), 0);
        if (!v[i].expandable) CU_ASSERT_EQUAL(v[i].n_allocated == 0, v[i].releasable != 0);
    }
    if (f->a->ops->briefs) check_briefs(f, v, n < cap ? n : cap, cap);
    if (f->a->ops->class_counts) check_classes(f, v, n < cap ? n : cap);
    if (f->a->ops->class_free) check_class_free(f, v, n < cap ? n : cap);
    if (f->a->ops->releasable_briefs) check_releasable_briefs(f, v, n < cap ? n : cap, cap);
    if (f->a->ops->whole_free) check_whole_free(f, v, n < cap ? n : cap, cap);
    CU_ASSERT(total <= c->reserved_bytes);
    if (strcmp(f->a->ops->name, "direct")) CU_ASSERT_EQUAL(n_alloc, nlive);
    for (size_t k = 0; k < nlive; k++) {
        uint64_t p = fx_addr(f, live[k]);
        int inside = !strcmp(f->a->ops->name, "direct"); /* direct has no view */
        /* an expandable segment's size is its mapped bytes, not its range:
         * only its start bounds the blocks */
        for (size_t i = 0; i < n && i < cap && !inside; i++)
            inside = p >= v[i].addr && (p < v[i].addr + v[i].size || v[i].expandable);
        CU_ASSERT(inside);
    }
    free(v);
}

static void run_workload_conf(const char *alloc, const char *conf, const char *policy)
{
    fx f;
    int rc = fx_open_policy(&f, 2 * GiB, alloc, conf, 0, policy);
    CU_ASSERT_EQUAL_FATAL(rc, GM_OK);
    rng r = {.s = 12345};
    uint64_t live[NLIVE];
    size_t nlive = 0;
    uint64_t now = 0, ooms = 0;
    for (int op = 0; op < NOPS; op++) {
        now += 1000 + next(&r) % 100000;
        int do_free = nlive == NLIVE || (nlive > 0 && next(&r) % 100 < 45);
        if (do_free) {
            size_t k = next(&r) % nlive;
            f.a->ops->free(f.a, live[k], now);
            live[k] = live[--nlive];
        } else {
            gm_alloc_counters before = f.a->c;
            uint64_t h, size = pick_size(&r);
            if (f.a->ops->malloc(f.a, size, next(&r) % 2, GM_CAT_ACTIVATION, now, &h) == GM_OK) {
                live[nlive++] = h;
            } else {
                ooms++;
                CU_ASSERT_EQUAL(f.a->c.requested_bytes, before.requested_bytes);
                CU_ASSERT_EQUAL(f.a->c.allocated_bytes, before.allocated_bytes);
            }
        }
        if (op % 64 == 0 && f.a->ops->empty_cache && next(&r) % 4 == 0)
            f.a->ops->empty_cache(f.a, now);
        check_state(&f, live, nlive, op % 250 == 0);
    }
    check_state(&f, live, nlive, 1);
    while (nlive)
        f.a->ops->free(f.a, live[--nlive], now);
    CU_ASSERT_EQUAL(f.a->c.requested_bytes, 0);
    CU_ASSERT_EQUAL(f.a->c.allocated_bytes, 0);
    check_state(&f, live, 0, 1);
    CU_ASSERT(ooms > 0); /* the workload reaches the capacity with every model */
    fx_close(&f);
}

static void run_workload(const char *alloc, const char *policy)
{
    run_workload_conf(alloc, "", policy);
}

/* The views of expandable segments too (their releasable bytes are free
 * pages, not whole segments). */
static void test_pytorch_expandable_views(void)
{
    run_workload_conf("pytorch", "expandable_segments:True", "predictive");
}

static void test_every_model_every_policy(void)
{
    for (size_t i = 0; gm_alloc_at(i); i++)
        for (size_t j = 0; gm_policy_at(j); j++) {
            if (!strcmp(gm_policy_at(j)->name, "oracle")) continue; /* needs a trace: below */
            run_workload(gm_alloc_at(i)->name, gm_policy_at(j)->name);
        }
}

/* restore: the models other than pytorch rebuild no recorded segment or
 * mapped range (PyTorch's cache); the live blocks are allocated through
 * them, each with a handle, and free like any other. */
static void test_restore_live(void)
{
    gm_init_row rows[] = {
        {.addr = 0x10000000, .size = 64 * MiB, .kind = GM_INIT_SEGMENT, .expandable = 1},
        {.addr = 0x10000000, .size = 4 * MiB, .kind = GM_INIT_MAPPED},
        {.addr = 0x10200000, .size = 3 * MiB, .block_size = 3 * MiB, .kind = GM_INIT_BLOCK},
        {.addr = 0x10000000, .size = 1000, .kind = GM_INIT_BLOCK, .stream = 7},
    };
    static const char *const models[] = {"cuda-async", "rmm-pool", "rmm-arena", "rmm-binning",
                                         "tf-bfc"};
    for (size_t m = 0; m < sizeof models / sizeof models[0]; m++) {
        fx f;
        CU_ASSERT_EQUAL_FATAL(fx_open(&f, 4 * GiB, models[m], ""), GM_OK);
        uint64_t h[4] = {1, 1, 1, 1};
        gm_err err = {0};
        CU_ASSERT_EQUAL_FATAL(f.a->ops->restore(f.a, rows, 4, h, &err), GM_OK);
        CU_ASSERT(h[0] == 0 && h[1] == 0); /* segment, mapped range: no handle */
        CU_ASSERT(h[2] != 0 && h[3] != 0);
        CU_ASSERT_EQUAL(f.a->c.requested_bytes, 3 * MiB + 1000);
        uint64_t live[2] = {h[2], h[3]};
        check_state(&f, live, 2, 1);
        fx_free(&f, h[2], 1);
        fx_free(&f, h[3], 1);
        CU_ASSERT_EQUAL(f.a->c.requested_bytes, 0);
        fx_close(&f);
        /* a live set larger than the device is an OOM naming the block */
        gm_init_row big[] = {{.addr = 0x1000, .size = 8 * GiB, .kind = GM_INIT_BLOCK}};
        CU_ASSERT_EQUAL_FATAL(fx_open(&f, 4 * GiB, models[m], ""), GM_OK);
        CU_ASSERT_EQUAL(f.a->ops->restore(f.a, big, 1, h, &err), GM_EOOM);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "--capacity"));
        fx_close(&f);
    }
}

/* Through the engine: an in-memory trace that frees everything it
 * allocates, near a 3 GiB device, OOMs skipped; every pair completes and
 * nothing is left allocated. */
static void test_engine_every_pair(void)
{
    enum { N = 4000 };
    gm_event *ev = calloc(N, sizeof *ev);
    CU_ASSERT_FATAL(ev != NULL);
    rng r = {.s = 777};
    uint64_t live[NLIVE];
    size_t nlive = 0, n = 0;
    uint64_t t = 0, next_addr = 0x10000;
    while (n + nlive < N) {
        t += 1000 + next(&r) % 50000;
        if (nlive == NLIVE || (nlive && next(&r) % 100 < 45)) {
            size_t k = next(&r) % nlive;
            ev[n++] = (gm_event){.t_ns = t, .addr = live[k], .op = GM_OP_FREE};
            live[k] = live[--nlive];
        } else {
            live[nlive++] = next_addr;
            ev[n++] = (gm_event){.t_ns = t,
                                 .addr = next_addr,
                                 .size = pick_size(&r),
                                 .op = GM_OP_ALLOC,
                                 .category = GM_CAT_ACTIVATION};
            next_addr += 0x1000;
        }
    }
    while (nlive) {
        t += 1000;
        ev[n++] = (gm_event){.t_ns = t, .addr = live[--nlive], .op = GM_OP_FREE};
    }
    static const gm_latency lat = GM_LATENCY_DEFAULT;
    for (size_t i = 0; gm_alloc_at(i); i++)
        for (size_t j = 0; gm_policy_at(j); j++) {
            gm_tenant_spec ts = {.path = "mem", .events = ev, .n_events = n, .repeat = 2};
            gm_sim_config c = {.tenants = &ts,
                               .n_tenants = 1,
                               .capacity_bytes = 3 * GiB,
                               .latency = lat,
                               .allocator = gm_alloc_at(i)->name,
                               .policy = gm_policy_at(j)->name,
                               .on_oom_skip = 1};
            gm_sim_result *res = NULL;
            gm_err err = {0};
            int rc = gm_simulate(&c, &res, &err);
            if (rc != GM_OK) fprintf(stderr, "%s/%s: %s\n", c.allocator, c.policy, err.msg);
            CU_ASSERT_EQUAL_FATAL(rc, GM_OK);
            CU_ASSERT_STRING_EQUAL(res->allocator, gm_alloc_at(i)->name);
            CU_ASSERT_EQUAL(res->t[0].status, GM_TENANT_COMPLETED);
            CU_ASSERT_EQUAL(res->t[0].events_done, 2 * n);
            CU_ASSERT_EQUAL(res->t[0].c.requested_bytes, 0);
            CU_ASSERT(res->device.peak_a <= res->device.peak_r);
            CU_ASSERT(res->device.peak_q <= res->device.peak_a);
            gm_sim_result_free(res);
        }
    free(ev);
}

int gm_test_register(void)
{
    CU_pSuite s = CU_add_suite("alloc_models", NULL, NULL);
    if (!s) return CU_get_error();
    GM_ADD_TEST(s, test_registry);
    GM_ADD_TEST(s, test_every_model_every_policy);
    GM_ADD_TEST(s, test_pytorch_expandable_views);
    GM_ADD_TEST(s, test_restore_live);
    GM_ADD_TEST(s, test_engine_every_pair);
    return CUE_SUCCESS;
}
