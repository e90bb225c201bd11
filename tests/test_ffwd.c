/*
 * test_ffwd.c - fast-forward (sim/ffwd.h) gives the results of simulating
 * every event: runs of periodic traces with it and without it
 * (gm_sim_config.no_fast_forward) compared figure by figure, timeline
 * bucket by bucket, statistic by statistic and driver call by driver call,
 * in the configurations it applies to and in some it must leave alone; and
 * in the periodic ones it does fast-forward most events.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cu.h"
#include "same_run.h"
#include "sim/engine.h"
#include "study/simulate.h"
#include "traces/event_ids.h"
#include "traces/trace.h"

#define MiB GM_MiB
#define GiB GM_GiB

/* ---------------- a periodic training-like trace ---------------- */

typedef struct gen {
    gm_event *ev;
    size_t n, cap;
    uint64_t t, addr;
    unsigned rng; /* times: differ from one iteration to the next */
} gen;

static unsigned lcg(unsigned *x)
{
    *x = *x * 1103515245u + 12345u;
    return *x >> 8;
}

static void put(gen *g, int op, uint64_t addr, uint64_t size, uint64_t stream, int cat)
{
    if (g->n == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 4096;
        g->ev = realloc(g->ev, g->cap * sizeof *g->ev);
        CU_ASSERT_PTR_NOT_NULL_FATAL(g->ev);
    }
    g->t += 1 + lcg(&g->rng) % 997;
    g->ev[g->n++] = (gm_event){.t_ns = g->t,
                               .addr = addr,
                               .size = size,
                               .stream = stream,
                               .op = (uint8_t)op,
                               .category = (uint8_t)cat};
}

static uint64_t alloc(gen *g, uint64_t size, uint64_t stream, int cat)
{
    uint64_t a = ++g->addr << 12;
    put(g, GM_OP_ALLOC, a, size, stream, cat);
    return a;
}

/* n small tensors of 512 KiB at once, then gone: the small pool grows. */
static void burst(gen *g, size_t n)
{
    uint64_t v[60];
    for (size_t i = 0; i < n; i++)
        v[i] = alloc(g, 512 * 1024, 0, GM_CAT_TEMPORARY);
    for (size_t i = 0; i < n; i++)
        put(g, GM_OP_FREE, v[i], 0, 0, GM_CAT_TEMPORARY);
}

/* One iteration of shape `shape`: the last one's gradients freed
 * (zero_grad, with a buffer made after the first), a forward of
 * activations with temporaries on two streams, a backward that frees them
 * and makes the new gradients, which live into the next iteration. The
 * sizes depend on the shape only. odd 1 changes one of them; odd 2 frees
 * the first two gradients the other way round: the same events but for
 * which block a free names (frees carry no size), and the buffer goes
 * where the other one was; odd 3 adds a burst of small tensors after the
 * forward (20 MiB of them: the small pool grows there), odd 4 after the
 * backward (the large pool's use then well below its peak), odd 5 30 MiB
 * of them there; odd 6 makes the last gradient 1 MiB larger and odd 7 the
 * backward's middle temporary 3 MiB larger (late in the iteration: its
 * first allocations are the usual ones); odd 8 adds 400 tiny temporaries
 * after the forward, one at a time (800 events more, from the small pool's
 * cache). */
static void iteration(gen *g, int shape, uint64_t *grad, size_t n_grad, int odd)
{
    unsigned r = 1000u + (unsigned)shape * 7919u;
    uint64_t act[24], buffer = 0;
    size_t n_act = 12 + (size_t)shape * 4;
    for (size_t k = 0; k < n_grad; k++) {
        size_t i = odd == 2 && k < 2 ? 1 - k : k;
        if (grad[i]) put(g, GM_OP_FREE, grad[i], 0, 0, GM_CAT_GRADIENT);
        if (k == 0) buffer = alloc(g, 2 * MiB, 0, GM_CAT_TEMPORARY);
    }
    for (size_t i = 0; i < n_act; i++) {
        uint64_t big = (1 + lcg(&r) % 24) * MiB + lcg(&r) % 4096;
        act[i] = alloc(g, odd == 1 && i == 5 ? big + 512 * 1024 : big, 0, GM_CAT_ACTIVATION);
        uint64_t tmp = alloc(g, 512 + lcg(&r) % (900 * 1024), i % 3 ? 0 : 7, GM_CAT_TEMPORARY);
        uint64_t tmp2 = alloc(g, (1 + lcg(&r) % 3) * MiB, 0, GM_CAT_TEMPORARY);
        put(g, GM_OP_FREE, tmp, 0, i % 3 ? 0 : 7, GM_CAT_TEMPORARY);
        put(g, GM_OP_FREE, tmp2, 0, 0, GM_CAT_TEMPORARY);
    }
    if (odd == 3) burst(g, 40);
    for (int q = 0; odd == 8 && q < 400; q++)
        put(g, GM_OP_FREE, alloc(g, 512, 0, GM_CAT_TEMPORARY), 0, 0, GM_CAT_TEMPORARY);
    put(g, GM_OP_FREE, buffer, 0, 0, GM_CAT_TEMPORARY);
    for (size_t i = n_act; i-- > 0;) {
        uint64_t more = odd == 7 && i == n_act / 2 ? 3 * MiB : 0;
        uint64_t tmp = alloc(g, 4096 + lcg(&r) % (2 * MiB) + more, 0, GM_CAT_TEMPORARY);
        put(g, GM_OP_FREE, act[i], 0, 0, GM_CAT_ACTIVATION);
        put(g, GM_OP_FREE, tmp, 0, 0, GM_CAT_TEMPORARY);
    }
    if (odd >= 4) burst(g, odd == 4 ? 40 : 60);
    for (size_t i = 0; i < n_grad; i++)
        grad[i] = alloc(g, (2 + i % 5) * MiB + 4096 * i + (odd == 6 && i == n_grad - 1 ? MiB : 0),
                        0, GM_CAT_GRADIENT);
}

/* `iters` iterations whose shapes follow `shapes` (cycled), with ids;
 * iteration `odd_at` (if not -1) is odd `odd` (iteration()). */
static gm_event *periodic_odd(size_t iters, const char *shapes, long odd_at, int odd, size_t *n)
{
    gen g = {.rng = 99};
    uint64_t weights[8], grad[10] = {0};
    for (size_t i = 0; i < 8; i++)
        weights[i] = alloc(&g, (3 + i) * MiB, 0, GM_CAT_PARAMETER);
    size_t ns = strlen(shapes);
    for (size_t k = 0; k < iters; k++)
        iteration(&g, shapes[k % ns] - 'a', grad, 10, (long)k == odd_at ? odd : 0);
    for (size_t i = 0; i < 10; i++)
        if (grad[i]) put(&g, GM_OP_FREE, grad[i], 0, 0, GM_CAT_GRADIENT);
    for (size_t i = 0; i < 8; i++)
        put(&g, GM_OP_FREE, weights[i], 0, 0, GM_CAT_PARAMETER);
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_ids_assign(g.ev, g.n, &err), GM_OK);
    *n = g.n;
    return g.ev;
}

static gm_event *periodic(size_t iters, const char *shapes, long odd_at, size_t *n)
{
    return periodic_odd(iters, shapes, odd_at, 1, n);
}

/* Iterations as periodic()'s, each with small tensors of sizes of its own
 * (drawn per iteration) before it, one of which (the loss) lives into the
 * next iteration: the small pool's free blocks lie differently in every
 * iteration, so the model's state never comes back, while the large
 * pool's does (ffwd.h, "One part"). With grow_at (not -1), iteration 150
 * is odd 4 (the small pool grows 20 MiB there, with the large pool's use
 * low) and iteration grow_at odd 3 when even, odd 5 when odd: the small
 * pool grows in its middle (odd 5: after 20 MiB of it were served from
 * the cache, at a moment below the peak). With big, those tensors are the
 * large pool's: then the small pool's state comes back, not the large's.
 * With odd_at (not -1), iteration odd_at is odd `odd_kind` instead, and
 * with odd_every every odd_every-th iteration after it. With `cached`,
 * that many isolated free 512 B blocks lie in the small pool throughout
 * (2 * cached allocations first, every other one freed at once, the rest
 * freed at the end). */
static gm_event *drifting_odd(size_t iters, const char *shapes, long grow_at, int big, long odd_at,
                              long odd_every, int odd_kind, size_t cached, size_t *n)
{
    gen g = {.rng = 31};
    unsigned x = 4242;
    uint64_t weights[8], grad[10] = {0}, loss = 0;
    for (size_t i = 0; i < 8; i++)
        weights[i] = alloc(&g, (3 + i) * MiB, 0, GM_CAT_PARAMETER);
    uint64_t *keep = calloc(cached + 1, sizeof *keep);
    CU_ASSERT_PTR_NOT_NULL_FATAL(keep);
    for (size_t i = 0; i < cached; i++) {
        keep[i] = alloc(&g, 512, 0, GM_CAT_TEMPORARY);
        put(&g, GM_OP_FREE, alloc(&g, 512, 0, GM_CAT_TEMPORARY), 0, 0, GM_CAT_TEMPORARY);
    }
    size_t ns = strlen(shapes);
    for (size_t k = 0; k < iters; k++) {
        uint64_t small[6];
        size_t m = 2 + lcg(&x) % 5;
        for (size_t i = 0; i < m; i++)
            small[i] =
                alloc(&g, (big ? 2 * MiB : 0) + 512 * (1 + lcg(&x) % 300), 0, GM_CAT_TEMPORARY);
        if (loss) put(&g, GM_OP_FREE, loss, 0, 0, GM_CAT_TEMPORARY);
        loss = alloc(&g, (big ? 2 * MiB : 0) + 4 + lcg(&x) % 2048, 0, GM_CAT_TEMPORARY);
        long ka = (long)k;
        int at_odd = odd_at >= 0 &&
                     (ka == odd_at || (odd_every && ka > odd_at && (ka - odd_at) % odd_every == 0));
        int odd = at_odd                     ? odd_kind
                  : ka == grow_at            ? (k % 2 ? 5 : 3)
                  : grow_at >= 0 && k == 150 ? 4
                                             : 0;
        iteration(&g, shapes[k % ns] - 'a', grad, 10, odd);
        for (size_t i = 0; i < m; i++)
            put(&g, GM_OP_FREE, small[i], 0, 0, GM_CAT_TEMPORARY);
    }
    put(&g, GM_OP_FREE, loss, 0, 0, GM_CAT_TEMPORARY);
    for (size_t i = 0; i < 10; i++)
        if (grad[i]) put(&g, GM_OP_FREE, grad[i], 0, 0, GM_CAT_GRADIENT);
    for (size_t i = 0; i < 8; i++)
        put(&g, GM_OP_FREE, weights[i], 0, 0, GM_CAT_PARAMETER);
    for (size_t i = 0; i < cached; i++)
        put(&g, GM_OP_FREE, keep[i], 0, 0, GM_CAT_TEMPORARY);
    free(keep);
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_ids_assign(g.ev, g.n, &err), GM_OK);
    *n = g.n;
    return g.ev;
}

static gm_event *drifting(size_t iters, const char *shapes, long grow_at, int big, size_t *n)
{
    return drifting_odd(iters, shapes, grow_at, big, -1, 0, 0, 0, n);
}

/* ---------------- two runs compared ---------------- */

typedef struct drv_log {
    size_t n;
    uint64_t h;    /* every driver call: a running hash of (op, addr, size, time) */
    uint64_t view; /* the segments as a policy sees them at the end (last use too) */
    size_t n_seg;
} drv_log;

static void mix(uint64_t *h, uint64_t v)
{
    *h = (*h ^ v) * 0x100000001b3ull;
}

/* The tenant's last moment with its allocator: every segment's view. */
static void end_views(void *ctx, int tenant, gm_alloc *a, int status)
{
    drv_log *l = ctx;
    (void)tenant, (void)status;
    size_t n = a->ops->segments(a, NULL, 0);
    gm_seg_info *v = calloc(n + 1, sizeof *v);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    a->ops->segments(a, v, n);
    for (size_t i = 0; i < n; i++) {
        const gm_seg_info *x = &v[i];
        uint64_t f[] = {x->addr,         x->size,       x->stream,      x->small_pool,
                        x->expandable,   x->n_blocks,   x->n_allocated, x->allocated_bytes,
                        x->largest_free, x->releasable, x->last_use_ns, x->gc_age,
                        x->category_mask};
        for (size_t k = 0; k < sizeof f / sizeof f[0]; k++)
            mix(&l->view, f[k]);
    }
    l->n_seg = n;
    free(v);
    if (a->ops->ff_clock) { /* the GC ages' clocks (a fast-forward moves them on) */
        uint64_t clock[GM_FF_CLOCKS];
        a->ops->ff_clock(a, clock);
        for (size_t k = 0; k < GM_FF_CLOCKS; k++)
            mix(&l->view, clock[k]);
    }
}

static void log_call(void *ctx, int tenant, uint64_t event_index, const gm_seg_event *ev)
{
    drv_log *l = ctx;
    (void)tenant;
    uint64_t v[] = {(uint64_t)ev->op, ev->addr, ev->size, ev->t_ns, event_index};
    for (size_t i = 0; i < 5; i++)
        mix(&l->h, v[i]);
    l->n++;
}

static void count_progress(void *ctx, uint64_t done)
{
    uint64_t *r = ctx;
    r[0]++;
    r[1] ^= done * 0x9e3779b97f4a7c15ull;
}

typedef struct run_case {
    const char *policy, *conf;
    uint64_t capacity;
    int skip, repeat, stats, progress;
    uint64_t patience; /* gm_sim_config.ff_patience (0: the default) */
} run_case;

/* Run spec under c with fast-forward and without; both must agree on
 * everything. Returns the events fast-forwarded. */
static uint64_t both(const gm_tenant_spec *spec, const run_case *c)
{
    gm_sim_result *r[2] = {NULL, NULL};
    drv_log log[2] = {{0}, {0}};
    uint64_t prog[2][2] = {{0}};
    for (int no_ff = 0; no_ff < 2; no_ff++) {
        static const gm_latency lat = GM_LATENCY_DEFAULT;
        gm_tenant_spec t = *spec;
        t.repeat = (uint32_t)(c->repeat ? c->repeat : 1);
        gm_sim_config cfg = {.tenants = &t,
                             .n_tenants = 1,
                             .capacity_bytes = c->capacity,
                             .latency = lat,
                             .policy = c->policy,
                             .alloc_conf = c->conf,
                             .on_oom_skip = c->skip,
                             .no_device_stats = !c->stats,
                             .no_fast_forward = no_ff,
                             .ff_patience = c->patience,
                             .seg_hook = log_call,
                             .seg_hook_ctx = &log[no_ff],
                             .end_hook = end_views,
                             .end_hook_ctx = &log[no_ff]};
        if (c->progress) {
            cfg.progress = count_progress;
            cfg.progress_ctx = prog[no_ff];
        }
        gm_err err = {0};
        int rc = gm_simulate(&cfg, &r[no_ff], &err);
        if (rc) fprintf(stderr, "\n  %s %s: %s\n", c->policy, c->conf ? c->conf : "", err.msg);
        CU_ASSERT_EQUAL_FATAL(rc, GM_OK);
    }
    const gm_tenant_result *a = &r[0]->t[0], *b = &r[1]->t[0];
    CU_ASSERT_EQUAL(b->fast_forwarded_events, 0);
    CU_ASSERT_EQUAL(r[0]->events, r[1]->events);
    CU_ASSERT_EQUAL(a->status, b->status);
    CU_ASSERT_EQUAL(a->events_done, b->events_done);
    CU_ASSERT(same_metrics(&a->m, &b->m));
    CU_ASSERT(same_metrics(&r[0]->device, &r[1]->device));
    CU_ASSERT_EQUAL(memcmp(&a->c, &b->c, sizeof a->c), 0);
    CU_ASSERT_EQUAL(a->has_stats, b->has_stats);
    CU_ASSERT_EQUAL(a->has_stats, c->stats);
    CU_ASSERT_EQUAL(memcmp(&a->stats, &b->stats, sizeof a->stats), 0);
    CU_ASSERT_EQUAL(r[0]->peak_device_used, r[1]->peak_device_used);
    CU_ASSERT_EQUAL(a->peak_torch_allocated_bytes, b->peak_torch_allocated_bytes);
    CU_ASSERT_EQUAL(a->repeat_leftover_bytes, b->repeat_leftover_bytes);
    CU_ASSERT_STRING_EQUAL(a->trace_hash, b->trace_hash);
    CU_ASSERT_EQUAL(log[0].n, log[1].n);
    CU_ASSERT_EQUAL(log[0].h, log[1].h);
    CU_ASSERT_EQUAL(log[0].n_seg, log[1].n_seg);
    CU_ASSERT_EQUAL(log[0].view, log[1].view);
    CU_ASSERT_EQUAL(memcmp(prog[0], prog[1], sizeof prog[0]), 0);
    if (c->progress) CU_ASSERT(prog[0][0] > 0);
    uint64_t ff = a->fast_forwarded_events;
    gm_sim_result_free(r[0]);
    gm_sim_result_free(r[1]);
    return ff;
}

/* The configurations fast-forward applies to, on one trace: each gives
 * the same results with it, and (periodic) fast-forwards most events. */
static void cases_on(const gm_tenant_spec *spec, size_t n, double want)
{
    static const run_case cases[] = {
        {"pytorch", NULL, 80 * GiB, 0, 0, 0, 0, 0},
        {"pytorch", NULL, 80 * GiB, 0, 0, 1, 0, 0}, /* memory_stats() kept (ff_stats) */
        {"lru", NULL, 80 * GiB, 0, 0, 0, 0, 0},
        {"priority", NULL, 80 * GiB, 0, 0, 1, 0, 0},
        {"pytorch", "expandable_segments:True", 80 * GiB, 0, 0, 1, 0, 0},
        {"pytorch", "roundup_power2_divisions:4", 80 * GiB, 0, 0, 0, 0, 0},
        {"pytorch", NULL, 80 * GiB, 0, 3, 1, 0, 0}, /* --repeat: each pass from the start */
        /* GC ages (ff_clock): kept as simulating keeps them, never used here */
        {"pytorch", "garbage_collection_threshold:0.6,per_process_memory_fraction:0.99", 80 * GiB,
         0, 0, 1, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint64_t ff = both(spec, &cases[i]);
        size_t total = n * (size_t)(cases[i].repeat ? cases[i].repeat : 1);
        if ((double)ff < want * (double)total)
            fprintf(stderr, "\n  case %zu: %llu of %zu events fast-forwarded\n", i,
                    (unsigned long long)ff, total);
        CU_ASSERT((double)ff >= want * (double)total);
    }
}

/* The ones it must leave alone, or where the results decide: under
 * pressure (driver calls, OOMs) and with a timer policy. */
static void cases_off(const gm_tenant_spec *spec)
{
    static const run_case cases[] = {
        {"pytorch", NULL, 700 * MiB, 1, 0, 1, 0, 0},
        {"lru", NULL, 600 * MiB, 1, 0, 0, 0, 0},
        {"predictive", NULL, 80 * GiB, 0, 0, 0, 0, 0},
        /* oversize blocks: the cache grows every iteration here, no state comes back */
        {"pytorch", "max_split_size_mb:20", 80 * GiB, 0, 0, 0, 0, 0},
        {"pytorch", "garbage_collection_threshold:0.5,per_process_memory_fraction:0.5", 2 * GiB, 1,
         0, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        both(spec, &cases[i]);
}

static gm_tenant_spec mem_spec(const gm_event *ev, size_t n, gm_trace_meta *meta)
{
    gm_trace_meta_init(meta);
    meta->dense_ids = 1;
    return (gm_tenant_spec){
        .path = "periodic", .events = ev, .n_events = n, .meta = meta, .repeat = 1};
}

/* The segments' last use after fast-forwarded iterations is what
 * simulating them leaves (ff_touch): lru, made to release part of the
 * cache at the end, picks the same segments (the driver-call log). One
 * iteration of another shape, simulated, uses segments the others do not
 * between records and the last cycles applied: without the last uses
 * those cycles leave, lru would take theirs for older. */
/* ev with one more allocation (and its free) after the last gradient's
 * free, before the weights go, that needs half of the cache that lru
 * reserves for ev released, at a capacity of what that run reserved + 1
 * GiB (*capacity): n + 2 events, with ids. */
static gm_event *with_big_alloc(const gm_event *ev, size_t n, uint64_t *capacity)
{
    gm_trace_meta meta;
    gm_tenant_spec t = mem_spec(ev, n, &meta);
    /* the cache at the end, with room to spare */
    static const gm_latency lat = GM_LATENCY_DEFAULT;
    gm_sim_config cfg = {.tenants = &t, .n_tenants = 1, .capacity_bytes = 80 * GiB, .latency = lat};
    cfg.no_device_stats = 1;
    cfg.policy = "lru";
    gm_sim_result *r;
    gm_err err = {0};
    int rc = gm_simulate(&cfg, &r, &err);
    if (rc) fprintf(stderr, "\n  %s\n", err.msg);
    CU_ASSERT_EQUAL_FATAL(rc, GM_OK);
    uint64_t reserved = r->t[0].m.peak_r;
    gm_sim_result_free(r);
    gm_trace_meta_free(&meta);
    size_t k = n;
    while (k > 0 && !(ev[k - 1].op == GM_OP_FREE && ev[k - 1].category == GM_CAT_GRADIENT))
        k--; /* after the last gradient's free */
    gm_event *e2 = malloc((n + 2) * sizeof *e2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e2);
    memcpy(e2, ev, k * sizeof *e2);
    uint64_t big = 1 * GiB + (reserved - 120 * MiB) / 2;
    e2[k] =
        (gm_event){.t_ns = ev[k - 1].t_ns + 1, .addr = 1ull << 40, .size = big, .op = GM_OP_ALLOC};
    e2[k + 1] = e2[k];
    e2[k + 1].op = GM_OP_FREE;
    e2[k + 1].t_ns++;
    memcpy(e2 + k + 2, ev + k, (n - k) * sizeof *e2);
    for (size_t i = 0; i < n + 2; i++)
        e2[i].id = 0;
    CU_ASSERT_EQUAL_FATAL(gm_ids_assign(e2, n + 2, &err), GM_OK);
    *capacity = reserved + 1 * GiB;
    return e2;
}

static void test_last_use(void)
{
    size_t n;
    char shapes[301];
    memset(shapes, 'a', 300);
    shapes[300] = 0;
    shapes[150] = 'c';
    gm_event *ev = periodic(300, shapes, -1, &n);
    gm_trace_meta meta;
    gm_tenant_spec t = mem_spec(ev, n, &meta);
    uint64_t cap;
    gm_event *e2 = with_big_alloc(ev, n, &cap);
    t.events = e2;
    t.n_events = n + 2;
    for (int stats = 0; stats < 2; stats++) {
        run_case c = {"lru", NULL, cap, 1, 0, stats, 0, 0};
        CU_ASSERT(both(&t, &c) > 8 * n / 10);
    }
    /* and PyTorch's garbage collection, which releases the whole free
     * segments that have waited longest in their pool (their GC ages:
     * ff_clock, ff_seg_age) */
    run_case gc = {"pytorch", "garbage_collection_threshold:0.3,per_process_memory_fraction:1.0",
                   cap,       1,
                   0,         0,
                   0,         0};
    CU_ASSERT(both(&t, &gc) > 8 * n / 10);
    gm_trace_meta_free(&meta);
    free(e2);
    free(ev);
}

/* One shape repeated: after a few iterations everything is applied. */
static void test_one_shape(void)
{
    size_t n;
    gm_event *ev = periodic(400, "a", -1, &n);
    gm_trace_meta meta;
    gm_tenant_spec t = mem_spec(ev, n, &meta);
    cases_on(&t, n, 0.8);
    cases_off(&t);
    gm_trace_meta_free(&meta);
    free(ev);
}

/* Shapes in a pattern (dynamic padding with few lengths): a state with
 * several cycles; and one iteration changed in the middle, which must be
 * simulated (its cycle does not match) while the rest are applied. */
static void test_shapes_and_a_change(void)
{
    size_t n;
    gm_event *ev = periodic(600, "abacab", 300, &n);
    gm_trace_meta meta;
    gm_tenant_spec t = mem_spec(ev, n, &meta);
    cases_on(&t, n, 0.6);
    gm_trace_meta_free(&meta);
    free(ev);
}

/* An iteration whose frees name other blocks than the cycle it otherwise
 * matches (the gradients freed the other way round): it must be simulated
 * (check() compares each freed block's address with the record's), and
 * the iterations after it, from wherever it left the model, too. */
static void test_other_blocks(void)
{
    for (long at = 150; at <= 152; at++) {
        size_t n;
        gm_event *ev = periodic_odd(300, "a", at, 2, &n);
        gm_trace_meta meta;
        gm_tenant_spec t = mem_spec(ev, n, &meta);
        run_case c = {"pytorch", NULL, 80 * GiB, 0, 0, 1, 0, 0};
        CU_ASSERT(both(&t, &c) > n / 2);
        gm_trace_meta_free(&meta);
        free(ev);
    }
}

/* From a file: cycles cut by the reader's chunks (64 Ki events) are read
 * on with the chunk's rest kept (engine.c, refill_keep), hashed as before. */
static void write_trace(const char *path, const gm_event *ev, size_t n)
{
    gm_trace_meta m;
    gm_trace_meta_init(&m);
    gm_trace_meta_set(&m.source, "synthetic:test");
    m.device_total_bytes = 80 * GiB;
    gm_trace_writer *w;
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_trace_create(path, &m, NULL, &w, &err), GM_OK);
    CU_ASSERT_EQUAL_FATAL(gm_trace_append(w, ev, n, &err), GM_OK);
    CU_ASSERT_EQUAL_FATAL(gm_trace_finish(w, &err), GM_OK);
    gm_trace_meta_free(&m);
}

static void test_file_chunks(void)
{
    size_t n;
    gm_event *ev = periodic(2500, "aab", -1, &n);
    CU_ASSERT_FATAL(n > 3 * GM_TRACE_CHUNK_EVENTS);
    const char *path = gm_test_tmp("ffwd.h5");
    write_trace(path, ev, n);
    gm_tenant_spec t = {.path = path};
    run_case c = {"pytorch", NULL, 80 * GiB, 0, 0, 1, 0, 0};
    CU_ASSERT(both(&t, &c) > 9 * n / 10);
    c.repeat = 2; /* the rewind between passes, with a record at hand */
    CU_ASSERT(both(&t, &c) > 2 * 9 * n / 10);
    /* the same events in memory: the window over them widens instead */
    gm_trace_meta meta;
    gm_tenant_spec mt = mem_spec(ev, n, &meta);
    c.repeat = 0;
    CU_ASSERT(both(&mt, &c) > 9 * n / 10);
    gm_trace_meta_free(&meta);
    remove(path);
    free(ev);
}

/* Progress reports (every 2^20 events) stop a stretch where they are due,
 * as they stop the simulation of every event. */
static void test_progress(void)
{
    size_t n;
    gm_event *ev = periodic(10000, "ab", -1, &n);
    CU_ASSERT_FATAL(n > (1u << 20));
    gm_trace_meta meta;
    gm_tenant_spec t = mem_spec(ev, n, &meta);
    run_case c = {"pytorch", NULL, 80 * GiB, 0, 0, 0, 1, 0};
    CU_ASSERT(both(&t, &c) > 9 * n / 10);
    gm_trace_meta_free(&meta);
    free(ev);
}

/* A trace that never comes back to a state (every size differs) is
 * simulated event by event, with the same results. */
static void test_no_cycle(void)
{
    gen g = {.rng = 5};
    uint64_t live[64] = {0};
    unsigned x = 17;
    for (size_t i = 0; i < 60000; i++) {
        size_t k = lcg(&x) % 64;
        if (live[k]) {
            put(&g, GM_OP_FREE, live[k], 0, 0, 0);
            live[k] = 0;
        } else {
            live[k] = alloc(&g, 512 + lcg(&x) % (30 * MiB), lcg(&x) % 2, GM_CAT_TEMPORARY);
        }
    }
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_ids_assign(g.ev, g.n, &err), GM_OK);
    gm_trace_meta meta;
    gm_tenant_spec t = mem_spec(g.ev, g.n, &meta);
    run_case c = {"pytorch", NULL, 80 * GiB, 0, 0, 1, 0, 0};
    CU_ASSERT_EQUAL(both(&t, &c), 0);
    gm_trace_meta_free(&meta);
    free(g.ev);
}

/* One part (ffwd.h): a trace whose small pool never comes back to a state
 * (so that the whole model never does) but whose large pool does has its
 * large pool's events fast-forwarded, the small pool's simulated among
 * them, with the same results, memory_stats() included (the all-pools
 * figures and their peaks kept the sums event by event). The search gives
 * the whole model 3000 events here (GM_FF_PATIENCE in a run). */
static void test_one_part(void)
{
    size_t n;
    gm_event *ev = drifting(400, "a", -1, 0, &n);
    gm_trace_meta meta;
    gm_tenant_spec t = mem_spec(ev, n, &meta);
    static const run_case cases[] = {
        {"pytorch", NULL, 80 * GiB, 0, 0, 0, 0, 3000},
        {"pytorch", NULL, 80 * GiB, 0, 0, 1, 0, 3000}, /* memory_stats() kept */
        {"lru", NULL, 80 * GiB, 0, 0, 0, 0, 3000},
        {"priority", NULL, 80 * GiB, 0, 0, 1, 0, 3000},
        {"pytorch", "roundup_power2_divisions:4", 80 * GiB, 0, 0, 0, 0, 3000},
        {"pytorch", "max_split_size_mb:200", 80 * GiB, 0, 0, 1, 0, 3000},
        {"pytorch", NULL, 80 * GiB, 0, 3, 1, 0, 3000},
        {"pytorch", "garbage_collection_threshold:0.6,per_process_memory_fraction:0.99", 80 * GiB,
         0, 0, 1, 0, 3000},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint64_t ff = both(&t, &cases[i]);
        size_t total = n * (size_t)(cases[i].repeat ? cases[i].repeat : 1);
        if (ff < total / 4)
            fprintf(stderr, "\n  case %zu: %llu of %zu events fast-forwarded\n", i,
                    (unsigned long long)ff, total);
        CU_ASSERT(ff >= total / 4);
    }
    /* under pressure (driver calls, OOMs skipped): whatever it does, the same */
    run_case tight = {"pytorch", NULL, 700 * MiB, 1, 0, 0, 0, 3000};
    both(&t, &tight);
    gm_trace_meta_free(&meta);
    free(ev);
}

/* The small pool's part, after the whole model and then the large pool's
 * part came to nothing: its events are fewer, its largest free block is
 * the other part's (the metrics' largest free block: the two parts'
 * largest). */
static void test_small_part(void)
{
    size_t n;
    gm_event *ev = drifting(500, "ab", -1, 1, &n);
    gm_trace_meta meta;
    gm_tenant_spec t = mem_spec(ev, n, &meta);
    run_case c = {"pytorch", NULL, 80 * GiB, 0, 0, 0, 0, 3000};
    CU_ASSERT(both(&t, &c) > n / 8);
    c.policy = "priority";
    c.conf = "garbage_collection_threshold:0.6,per_process_memory_fraction:0.99";
    CU_ASSERT(both(&t, &c) > n / 8);
    c.stats = 1;
    CU_ASSERT(both(&t, &c) > n / 8);
    gm_trace_meta_free(&meta);
    free(ev);
}

/* One part: an iteration that starts as a cycle walked whole before (its
 * first allocations' sizes the same) but differs further on is walked
 * without a check first, up to the event that differs (ffwd.c, run_part):
 * the frees of the first two gradients the other way round (the first
 * events), a late temporary or the last gradient larger, a change within
 * the first allocations (checked first: another signature); the part's
 * events up to there are then simulated (materialize), the search starts
 * again, and the next time that cycle is checked first. Every figure as
 * without fast-forward, with memory_stats() and --repeat too. */
static void test_part_differs(void)
{
    static const int kinds[] = {2, 7, 6, 1};
    for (size_t q = 0; q < sizeof kinds / sizeof kinds[0]; q++)
        for (long at = 200; at <= 201; at++) {
            size_t n;
            gm_event *ev = drifting_odd(400, "a", -1, 0, at, 0, kinds[q], 0, &n);
            gm_trace_meta meta;
            gm_tenant_spec t = mem_spec(ev, n, &meta);
            run_case c = {"pytorch", NULL, 80 * GiB, 0, 0, 0, 0, 3000};
            CU_ASSERT(both(&t, &c) > n / 4);
            c.stats = 1;
            c.repeat = 2;
            CU_ASSERT(both(&t, &c) > n / 2);
            gm_trace_meta_free(&meta);
            free(ev);
        }
}

/* One part over a file's chunks: every other iteration has 800 more of
 * the small pool's events in the large pool's window, so a window walked
 * without a check first may need more events than the chunk has left (the
 * engine then keeps the rest and reads the next chunk after it) or run
 * past them before the cycle's end (ffwd.c, run_part: the end of the
 * events given, and the part's events simulated). */
static void test_part_file_chunks(void)
{
    size_t n;
    gm_event *ev = drifting_odd(1000, "a", -1, 0, 100, 2, 8, 0, &n);
    CU_ASSERT_FATAL(n > 3 * GM_TRACE_CHUNK_EVENTS);
    const char *path = gm_test_tmp("ffwd_part.h5");
    write_trace(path, ev, n);
    gm_tenant_spec t = {.path = path};
    run_case c = {"pytorch", NULL, 80 * GiB, 0, 0, 0, 0, 3000};
    CU_ASSERT(both(&t, &c) > n / 10); /* the large pool's events: 74 an iteration */
    c.stats = 1;
    CU_ASSERT(both(&t, &c) > n / 10);
    remove(path);
    free(ev);
}

/* A state far larger than its iteration (20 000 cached blocks in the
 * small pool, an iteration of ~125 events) is not kept, nor written out
 * whole to find that out (ffwd.c, state_most; alloc.h, ff_state): the
 * whole model's and the small pool's; the large pool's part is
 * fast-forwarded as without them, and every figure is as without
 * fast-forward. */
static void test_large_state(void)
{
    size_t n, n0;
    gm_event *ev = drifting_odd(400, "a", -1, 0, -1, 0, 0, 20000, &n);
    gm_event *ev0 = drifting_odd(400, "a", -1, 0, -1, 0, 0, 0, &n0);
    gm_trace_meta meta, meta0;
    gm_tenant_spec t = mem_spec(ev, n, &meta), t0 = mem_spec(ev0, n0, &meta0);
    run_case c = {"pytorch", NULL, 80 * GiB, 0, 0, 0, 0, 3000};
    uint64_t ff = both(&t, &c), ff0 = both(&t0, &c);
    CU_ASSERT(ff > n0 / 4);
    CU_ASSERT(10 * ff >= 8 * ff0); /* the large pool's, about as without the cached blocks */
    c.stats = 1;
    CU_ASSERT(both(&t, &c) > n0 / 4);
    gm_trace_meta_free(&meta);
    gm_trace_meta_free(&meta0);
    free(ev);
    free(ev0);
}

/* One part, and the other part's allocation that needs the model to grow
 * in the middle of a cycle's window: the part's events before it are
 * simulated there (ffwd.c, materialize), at every point of the iteration
 * in turn, and the search starts again from there. lru, made to release
 * the cache at the end, and GC see the segments' last uses and ages. */
static void test_one_part_grows(void)
{
    for (long at = 200; at <= 202; at++) {
        size_t n;
        gm_event *ev = drifting(400, "ab", at, 0, &n);
        uint64_t cap;
        gm_event *e2 = with_big_alloc(ev, n, &cap);
        gm_trace_meta meta;
        gm_tenant_spec t = mem_spec(e2, n + 2, &meta);
        run_case c = {"lru", NULL, cap, 1, 0, 0, 0, 3000};
        CU_ASSERT(both(&t, &c) > n / 4);
        run_case gc = {
            "pytorch", "garbage_collection_threshold:0.3,per_process_memory_fraction:1.0",
            cap,       1,
            0,         0,
            0,         3000};
        CU_ASSERT(both(&t, &gc) > n / 4);
        gc.stats = 1; /* the all-pools peaks where the part's events are simulated late */
        CU_ASSERT(both(&t, &gc) > n / 4);
        gm_trace_meta_free(&meta);
        free(e2);
        free(ev);
    }
}

int gm_test_register(void)
{
    CU_pSuite s = CU_add_suite("ffwd", NULL, NULL);
    if (!s) return CU_get_error();
    GM_ADD_TEST(s, test_one_shape);
    GM_ADD_TEST(s, test_shapes_and_a_change);
    GM_ADD_TEST(s, test_other_blocks);
    GM_ADD_TEST(s, test_file_chunks);
    GM_ADD_TEST(s, test_last_use);
    GM_ADD_TEST(s, test_progress);
    GM_ADD_TEST(s, test_no_cycle);
    GM_ADD_TEST(s, test_one_part);
    GM_ADD_TEST(s, test_one_part_grows);
    GM_ADD_TEST(s, test_part_differs);
    GM_ADD_TEST(s, test_part_file_chunks);
    GM_ADD_TEST(s, test_large_state);
    GM_ADD_TEST(s, test_small_part);
    return CUE_SUCCESS;
}
