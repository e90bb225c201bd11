/*
 * test_alloc_diff.c - the pytorch allocator model against its reference
 * (tests/ref/alloc_pytorch_ref.c: the model before its free blocks moved
 * from one tree per pool to size bins, issue 12). Both replay the same
 * operations side by side, each on its own simulated device and with its
 * own release policy, and every decision is compared as it is made: each
 * malloc's outcome and block address, every driver call (its kind, address,
 * size, stream and time), the counters after each operation, the largest
 * free block, and the policy view of every segment. Inputs: random traces
 * under several allocator settings (GM_DIFF_OPS operations each, default
 * 250000; small and large pools, several streams, OOMs, empty_cache) and
 * every snapshot in tests/data, at its own device size with the recorded
 * initial state and at a device just above its peak with the live one.
 * The rmm-arena model runs the random traces against its own reference
 * too (tests/ref/alloc_rmm_arena_ref.c: the model before its superblock
 * sets became trees).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cu.h"
#include "base/addrmap.h"
#include "policies/registry.h"
#include "sim/alloc.h"
#include "sim/device.h"
#include "traces/import_torch.h"

extern const gm_alloc_ops gm_alloc_pytorch_ref;
extern const gm_alloc_ops gm_alloc_rmm_arena_ref;

/* Driver calls one side made, in order. */
typedef struct dlog {
    gm_seg_event *v;
    size_t n, cap;
} dlog;

static void log_hook(void *ctx, const gm_seg_event *ev)
{
    dlog *l = ctx;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 256;
        gm_seg_event *v = realloc(l->v, cap * sizeof *v);
        if (!v) abort();
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = *ev;
}

typedef struct side {
    gm_device *dev;
    gm_policy *pol;
    gm_alloc *a;
    dlog log;
} side;

/* The model under test (s[0]) and the reference (s[1]). */
typedef struct pair {
    side s[2];
    uint64_t op;   /* operations so far */
    size_t logged; /* driver calls compared so far */
    const char *what;
    char diff[512]; /* the first difference, "" while none */
    gm_seg_info *view[2];
    size_t view_cap;
} pair;

/* model: the name of the model under test, NULL for pytorch; the
 * reference is its frozen copy. */
static int pair_open(pair *p, const char *what, uint64_t capacity, const char *conf,
                     double fraction, const char *policy, const char *model)
{
    if (!model) model = "pytorch";
    const gm_alloc_ops *ref =
        strcmp(model, "rmm-arena") ? &gm_alloc_pytorch_ref : &gm_alloc_rmm_arena_ref;
    memset(p, 0, sizeof *p);
    p->what = what;
    for (int i = 0; i < 2; i++) {
        side *s = &p->s[i];
        gm_err err = {0};
        const gm_alloc_ops *ops = i ? ref : gm_alloc_find(model);
        if (gm_device_model_create(capacity, NULL, &s->dev, &err) ||
            gm_policy_create(policy, &s->pol, &err) ||
            gm_alloc_create(ops, s->dev, conf, fraction, s->pol, &s->a, &err)) {
            fprintf(stderr, "%s: %s\n", what, err.msg);
            return -1;
        }
        s->a->seg_hook = log_hook;
        s->a->seg_hook_ctx = &s->log;
    }
    return 0;
}

static void pair_close(pair *p)
{
    for (int i = 0; i < 2; i++) {
        side *s = &p->s[i];
        gm_alloc_destroy(s->a);
        gm_policy_destroy(s->pol);
        gm_device_destroy(s->dev);
        free(s->log.v);
        free(p->view[i]);
    }
}

#define DIFF(p, ...)                                                                               \
    do {                                                                                           \
        if (!(p)->diff[0]) {                                                                       \
            int k_ = snprintf((p)->diff, sizeof(p)->diff, "%s, operation %" PRIu64 ": ",           \
                              (p)->what, (p)->op);                                                 \
            snprintf((p)->diff + k_, sizeof(p)->diff - (size_t)k_, __VA_ARGS__);                   \
        }                                                                                          \
    } while (0)

static int view_same(const gm_seg_info *x, const gm_seg_info *y)
{
    return x->addr == y->addr && x->size == y->size && x->stream == y->stream &&
           x->small_pool == y->small_pool && x->expandable == y->expandable &&
           x->n_blocks == y->n_blocks && x->n_allocated == y->n_allocated &&
           x->allocated_bytes == y->allocated_bytes && x->largest_free == y->largest_free &&
           x->releasable == y->releasable && x->last_use_ns == y->last_use_ns &&
           x->gc_age == y->gc_age && x->category_mask == y->category_mask;
}

static int cmp_view_addr(const void *x, const void *y)
{
    const gm_seg_info *a = x, *b = y;
    return a->addr < b->addr ? -1 : a->addr > b->addr;
}

static int seg_event_same(const gm_seg_event *x, const gm_seg_event *y)
{
    return x->op == y->op && x->addr == y->addr && x->size == y->size && x->stream == y->stream &&
           x->t_ns == y->t_ns;
}

/* Compare the two sides after an operation; `full`: also the largest free
 * block and the whole policy view. */
static void pair_check(pair *p, int full)
{
    gm_alloc *a = p->s[0].a, *b = p->s[1].a;
    const dlog *la = &p->s[0].log, *lb = &p->s[1].log;
    if (memcmp(&a->c, &b->c, sizeof a->c))
        DIFF(p,
             "counters differ (reserved %" PRIu64 " vs %" PRIu64 ", allocated %" PRIu64
             " vs %" PRIu64 ")",
             a->c.reserved_bytes, b->c.reserved_bytes, a->c.allocated_bytes, b->c.allocated_bytes);
    if (la->n != lb->n) DIFF(p, "%zu driver calls vs %zu", la->n, lb->n);
    for (size_t i = p->logged; i < la->n && i < lb->n; i++)
        if (!seg_event_same(&la->v[i], &lb->v[i])) {
            DIFF(p,
                 "driver call %zu differs (op %d at 0x%" PRIx64 ", %" PRIu64
                 " B vs op %d at 0x%" PRIx64 ", %" PRIu64 " B)",
                 i, la->v[i].op, la->v[i].addr, la->v[i].size, lb->v[i].op, lb->v[i].addr,
                 lb->v[i].size);
            break;
        }
    p->logged = la->n < lb->n ? la->n : lb->n;
    if (!full) return;
    uint64_t fa = a->ops->largest_free(a), fb = b->ops->largest_free(b);
    if (fa != fb) DIFF(p, "largest free block %" PRIu64 " vs %" PRIu64, fa, fb);
    size_t na = a->ops->segments(a, NULL, 0), nb = b->ops->segments(b, NULL, 0);
    if (na != nb) {
        DIFF(p, "%zu segments vs %zu", na, nb);
        return;
    }
    if (na > p->view_cap) {
        for (int i = 0; i < 2; i++) {
            free(p->view[i]);
            p->view[i] = malloc(na * 2 * sizeof *p->view[i]);
            if (!p->view[i]) abort();
        }
        p->view_cap = na * 2;
    }
    a->ops->segments(a, p->view[0], p->view_cap);
    b->ops->segments(b, p->view[1], p->view_cap);
    for (size_t i = 0; i < na; i++)
        if (!view_same(&p->view[0][i], &p->view[1][i])) {
            DIFF(p, "segment %zu (0x%" PRIx64 ") is seen differently by the policy", i,
                 p->view[0][i].addr);
            break;
        }
    if (!a->ops->releasable) return; /* optional (rmm-arena has none) */
    /* releasable(): the reference's releasable segments, in any order */
    size_t k = 0;
    for (size_t i = 0; i < nb; i++)
        if (p->view[1][i].releasable) p->view[1][k++] = p->view[1][i];
    size_t nr = a->ops->releasable(a, p->view[0], p->view_cap);
    if (nr != k) {
        DIFF(p, "%zu releasable segments vs %zu", nr, k);
        return;
    }
    if (nr > 1) qsort(p->view[0], nr, sizeof *p->view[0], cmp_view_addr);
    if (k > 1) qsort(p->view[1], k, sizeof *p->view[1], cmp_view_addr);
    for (size_t i = 0; i < nr; i++)
        if (!view_same(&p->view[0][i], &p->view[1][i])) {
            DIFF(p, "releasable segment 0x%" PRIx64 " differs", p->view[0][i].addr);
            break;
        }
}

/* malloc on both sides; returns 1 when both succeeded (h[] set), 0 when
 * both failed; a difference is recorded. */
static int pair_malloc(pair *p, uint64_t size, uint64_t stream, uint8_t cat, uint64_t now,
                       uint64_t h[2])
{
    int rc[2];
    for (int i = 0; i < 2; i++)
        rc[i] = p->s[i].a->ops->malloc(p->s[i].a, size, stream, cat, now, &h[i]);
    p->op++;
    if (rc[0] != rc[1]) {
        DIFF(p, "malloc(%" PRIu64 " B, stream %" PRIu64 "): rc %d vs %d", size, stream, rc[0],
             rc[1]);
        if (rc[0] == GM_OK) p->s[0].a->ops->free(p->s[0].a, h[0], now);
        if (rc[1] == GM_OK) p->s[1].a->ops->free(p->s[1].a, h[1], now);
        return 0;
    }
    if (rc[0] != GM_OK) return 0;
    uint64_t x = p->s[0].a->ops->block_addr(p->s[0].a, h[0]);
    uint64_t y = p->s[1].a->ops->block_addr(p->s[1].a, h[1]);
    if (x != y)
        DIFF(p, "malloc(%" PRIu64 " B, stream %" PRIu64 ") placed at 0x%" PRIx64 " vs 0x%" PRIx64,
             size, stream, x, y);
    uint64_t bx = gm_alloc_block_bytes(p->s[0].a, h[0], size);
    uint64_t by = gm_alloc_block_bytes(p->s[1].a, h[1], size);
    if (bx != by) DIFF(p, "block of %" PRIu64 " B vs %" PRIu64 " B", bx, by);
    return 1;
}

static void pair_free(pair *p, const uint64_t h[2], uint64_t now)
{
    for (int i = 0; i < 2; i++)
        p->s[i].a->ops->free(p->s[i].a, h[i], now);
    p->op++;
}

static void pair_empty_cache(pair *p, uint64_t now)
{
    uint64_t got[2];
    for (int i = 0; i < 2; i++)
        got[i] = p->s[i].a->ops->empty_cache(p->s[i].a, now);
    p->op++;
    if (got[0] != got[1])
        DIFF(p, "empty_cache released %" PRIu64 " B vs %" PRIu64 " B", got[0], got[1]);
}

static void report(const pair *p)
{
    if (p->diff[0]) fprintf(stderr, "\n  first difference: %s\n", p->diff);
    CU_ASSERT_STRING_EQUAL(p->diff, "");
}

/* ---------------- random traces ---------------- */

static uint64_t rnd(uint64_t *s) /* xorshift64* */
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545f4914f6cdd1dull;
}

/* A request size: small-pool sizes, large ones below and above the 10 MiB
 * segment rule, and a few big ones; odd byte counts included. */
static uint64_t rnd_size(uint64_t *s)
{
    uint64_t r = rnd(s) % 100, k;
    if (r < 45) {
        k = 9 + rnd(s) % 12; /* up to 1 MiB */
        return 1 + rnd(s) % (1ull << k);
    }
    if (r < 92) return GM_MiB + rnd(s) % (31 * GM_MiB);
    return 32 * GM_MiB + rnd(s) % (224 * GM_MiB);
}

static uint64_t diff_ops(void)
{
    const char *e = getenv("GM_DIFF_OPS");
    uint64_t n = e ? strtoull(e, NULL, 10) : 0;
    return n ? n : 250000;
}

typedef struct rnd_case {
    const char *model; /* NULL: pytorch */
    const char *conf;
    double fraction;
    const char *policy;
    uint64_t capacity;
    int streams;
    size_t max_live;
    uint64_t seed;
} rnd_case;

static void run_random(const rnd_case *c)
{
    pair p;
    char what[256];
    snprintf(what, sizeof what,
             "random trace, model %s, conf '%s', fraction %.2f, policy %s, %d stream(s)",
             c->model ? c->model : "pytorch", c->conf, c->fraction, c->policy, c->streams);
    CU_ASSERT_FATAL(pair_open(&p, what, c->capacity, c->conf, c->fraction, c->policy, c->model) ==
                    0);
    uint64_t(*live)[2] = calloc(c->max_live, sizeof *live);
    CU_ASSERT_FATAL(live != NULL);
    size_t n_live = 0;
    uint64_t seed = c->seed, now = 0, ops = diff_ops();
    for (uint64_t i = 0; i < ops && !p.diff[0]; i++) {
        now += 1000 + rnd(&seed) % 5000;
        uint64_t r = rnd(&seed) % 1000;
        if (r == 0) {
            pair_empty_cache(&p, now);
        } else if (n_live < c->max_live && (n_live == 0 || r < 520)) {
            uint64_t stream = (uint64_t)(rnd(&seed) % (uint64_t)c->streams) * 7;
            uint8_t cat = (uint8_t)(rnd(&seed) % GM_CAT_COUNT);
            if (pair_malloc(&p, rnd_size(&seed), stream, cat, now, live[n_live])) n_live++;
        } else {
            size_t k = (size_t)(rnd(&seed) % n_live);
            pair_free(&p, live[k], now);
            memcpy(live[k], live[--n_live], sizeof live[k]);
        }
        pair_check(&p, i % 16 == 0);
    }
    pair_check(&p, 1);
    report(&p);
    free(live);
    pair_close(&p);
}

static const rnd_case cases[] = {
    {NULL, "", 0, "pytorch", 3 * GM_GiB, 1, 400, 1},
    {NULL, "", 0, "pytorch", 16 * GM_GiB, 1, 4000, 2}, /* many free blocks, no pressure */
    {NULL, "expandable_segments:True", 0, "pytorch", 3 * GM_GiB, 2, 400, 3},
    {NULL, "max_split_size_mb:64", 0, "pytorch", 3 * GM_GiB, 2, 400, 4},
    {NULL, "roundup_power2_divisions:4", 0, "lru", 3 * GM_GiB, 1, 400, 5},
    {NULL, "garbage_collection_threshold:0.6", 0.8, "pytorch", 3 * GM_GiB, 1, 400, 6},
    {NULL, "max_split_size_mb:40,expandable_segments:True,roundup_power2_divisions:8", 0, "pytorch",
     2 * GM_GiB, 3, 300, 7},
    /* rmm-arena: the default arena (half the device) under pressure, so
     * defragment runs; a small arena over three streams; a large one with
     * thousands of superblocks */
    {"rmm-arena", "", 0, "pytorch", 3 * GM_GiB, 1, 400, 8},
    {"rmm-arena", "arena_size:512MiB", 0, "pytorch", 3 * GM_GiB, 3, 300, 9},
    {"rmm-arena", "", 0, "pytorch", 64 * GM_GiB, 2, 4000, 10},
};

static void test_random_traces(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_random(&cases[i]);
}

/* ---------------- snapshots ---------------- */

/* Which /initial_state rows a mode rebuilds (the engine's initial_rows). */
static size_t keep_rows(int recorded, gm_init_row *rows, size_t n)
{
    if (recorded) return n;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int priv = rows[i].kind == GM_INIT_SEGMENT && (rows[i].pool_id0 || rows[i].pool_id1);
        if (rows[i].kind == GM_INIT_BLOCK || priv) rows[k++] = rows[i];
    }
    return k;
}

/* Peak live requested bytes of a trace (initial blocks included). */
static uint64_t peak_live(const gm_import_trace *t)
{
    uint64_t q = 0, peak;
    gm_addrmap m;
    if (gm_addrmap_init(&m, 1024)) abort();
    for (size_t i = 0; i < t->n_init; i++)
        if (t->init[i].kind == GM_INIT_BLOCK) {
            q += t->init[i].size;
            gm_addrmap_put(&m, gm_addrmap_key(t->init[i].addr), t->init[i].size);
        }
    peak = q;
    for (size_t i = 0; i < t->n_events; i++) {
        const gm_event *e = &t->events[i];
        uint64_t key = gm_addrmap_key(e->addr), sz;
        if (e->op == GM_OP_ALLOC && !gm_addrmap_get(&m, key)) {
            gm_addrmap_put(&m, key, e->size);
            q += e->size;
            peak = q > peak ? q : peak;
        } else if (e->op == GM_OP_FREE && gm_addrmap_del(&m, key, &sz)) {
            q -= sz;
        }
    }
    gm_addrmap_free(&m);
    return peak;
}

/* Replay trace t through both models: the initial state (recorded or live)
 * then every alloc, free, empty_cache and recorded oom; an allocation that
 * fails is skipped, and so is its free. Returns the operations done. */
static uint64_t replay(const gm_import_trace *t, const char *name, int recorded, uint64_t capacity)
{
    char what[512];
    snprintf(what, sizeof what, "%s device %d, %s initial state, capacity %" PRIu64 " B", name,
             t->device, recorded ? "recorded" : "live", capacity);
    pair p;
    const char *conf = t->meta.alloc_conf ? t->meta.alloc_conf : "";
    if (pair_open(&p, what, capacity, conf, 0, "pytorch", NULL)) {
        CU_FAIL("cannot open the allocators");
        return 0;
    }
    gm_init_row *rows = malloc((t->n_init ? t->n_init : 1) * sizeof *rows);
    uint64_t *h[2] = {calloc(t->n_init + 1, sizeof(uint64_t)),
                      calloc(t->n_init + 1, sizeof(uint64_t))};
    CU_ASSERT_FATAL(rows && h[0] && h[1]);
    memcpy(rows, t->init, t->n_init * sizeof *rows);
    size_t n = keep_rows(recorded, rows, t->n_init);
    gm_addrmap live[2];
    CU_ASSERT_FATAL(!gm_addrmap_init(&live[0], 1024) && !gm_addrmap_init(&live[1], 1024));
    int rc[2];
    for (int i = 0; i < 2; i++) {
        gm_err err = {0};
        rc[i] = n ? p.s[i].a->ops->restore(p.s[i].a, rows, n, h[i], &err) : GM_OK;
    }
    if (rc[0] != rc[1]) DIFF(&p, "restore: rc %d vs %d", rc[0], rc[1]);
    for (size_t k = 0; rc[0] == GM_OK && k < n; k++)
        if (rows[k].kind == GM_INIT_BLOCK)
            for (int i = 0; i < 2; i++)
                gm_addrmap_put(&live[i], gm_addrmap_key(rows[k].addr), h[i][k]);
    pair_check(&p, 1);
    for (size_t k = 0; rc[0] == GM_OK && k < t->n_events && !p.diff[0]; k++) {
        const gm_event *e = &t->events[k];
        uint64_t key = gm_addrmap_key(e->addr), hh[2];
        switch (e->op) {
        case GM_OP_ALLOC:
            if (gm_addrmap_get(&live[0], key)) break; /* a realloc the trace repairs: skip */
            if (pair_malloc(&p, e->size, e->stream, e->category, e->t_ns, hh))
                for (int i = 0; i < 2; i++)
                    gm_addrmap_put(&live[i], key, hh[i]);
            break;
        case GM_OP_FREE:
            if (gm_addrmap_del(&live[0], key, &hh[0]) && gm_addrmap_del(&live[1], key, &hh[1]))
                pair_free(&p, hh, e->t_ns);
            break;
        case GM_OP_EMPTY_CACHE:
            pair_empty_cache(&p, e->t_ns);
            break;
        case GM_OP_OOM:
            if (pair_malloc(&p, e->size, e->stream, e->category, e->t_ns, hh))
                pair_free(&p, hh, e->t_ns);
            break;
        default:
            break;
        }
        pair_check(&p, k % 8 == 0);
    }
    pair_check(&p, 1);
    report(&p);
    uint64_t ops = p.op;
    gm_addrmap_free(&live[0]);
    gm_addrmap_free(&live[1]);
    free(h[0]);
    free(h[1]);
    free(rows);
    pair_close(&p);
    return ops;
}

static void replay_file(const char *rel)
{
    gm_torch_import *imp = NULL;
    gm_err err = {0};
    gm_torch_opts o = {.name = rel, .device = -1};
    if (gm_torch_import_file(gm_test_path(rel), &o, &imp, &err) != GM_OK) {
        fprintf(stderr, "%s: %s\n", rel, err.msg);
        CU_FAIL("snapshot does not import");
        return;
    }
    for (size_t d = 0; d < imp->n; d++) {
        const gm_import_trace *t = &imp->dev[d];
        uint64_t cap = t->meta.device_total_bytes   ? t->meta.device_total_bytes
                       : t->meta.device_avail_bytes ? t->meta.device_avail_bytes
                                                    : 80 * GM_GiB;
        uint64_t ops = replay(t, rel, 1, cap);
        uint64_t tight = gm_device_round(peak_live(t) + peak_live(t) / 16 + 64 * GM_MiB);
        ops += replay(t, rel, 0, tight);
        CU_ASSERT(ops >= t->n_events / 2); /* the trace's events were replayed */
    }
    gm_torch_import_free(imp);
}

static void test_snapshots(void)
{
    static const char *const files[] = {
        "tests/data/cuda-graph-pools-no-trace.pickle",
        "tests/data/device-full-retry-10-streams.pickle",
        "tests/data/empty-cache-bursts.pickle",
        "tests/data/expandable-mapped-3gpu-oom.pickle",
        "tests/data/expandable-segments-fwd.pickle",
        "tests/data/finetune-no-timestamps.pickle",
        "tests/data/forward-bf16-ctx128.pickle",
        "tests/data/gpt-medium-ctx128-train.pickle",
        "tests/data/gpt-medium-ctx512-infer.pickle",
        "tests/data/legacy-segment-list.pkl",
        "tests/data/oom-state-torch20.pickle",
        "tests/data/small-with-segments.pickle",
        "tests/data/tiny-segments-only.pickle",
        "tests/data/cases/device-full.pickle",
        "tests/data/cases/empty-cache-noframes.pickle",
        "tests/data/cases/empty-cache.pickle",
        "tests/data/cases/expandable-ranges.pickle",
        "tests/data/cases/expandable.pickle",
        "tests/data/cases/private-pool.pickle",
        "tests/data/cases/record-stream.pickle",
        "tests/data/cases/two-devices-one-bad.pickle",
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        replay_file(files[i]);
}

/* The test can fail: a reference that disagrees is reported. Two models
 * that place blocks differently (the pytorch model with and without
 * expandable segments) must be caught at the first differing malloc. */
static void test_detects_a_difference(void)
{
    pair p;
    CU_ASSERT_FATAL(pair_open(&p, "self-check", 4 * GM_GiB, "", 0, "pytorch", NULL) == 0);
    uint64_t h[2];
    CU_ASSERT(pair_malloc(&p, 3 * GM_MiB, 0, 0, 1, h) == 1);
    CU_ASSERT_STRING_EQUAL(p.diff, "");
    /* a block freed on one side only: the next decision differs */
    p.s[0].a->ops->free(p.s[0].a, h[0], 2);
    uint64_t g[2];
    pair_malloc(&p, 3 * GM_MiB, 0, 0, 3, g);
    pair_check(&p, 1);
    CU_ASSERT(strstr(p.diff, "operation 2") != NULL);
    pair_close(&p);
}

int gm_test_register(void)
{
    CU_pSuite s = CU_add_suite("alloc_diff", NULL, NULL);
    if (!s) return CU_get_error();
    GM_ADD_TEST(s, test_detects_a_difference);
    GM_ADD_TEST(s, test_random_traces);
    GM_ADD_TEST(s, test_snapshots);
    return CUE_SUCCESS;
}
