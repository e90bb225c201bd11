/*
 * alloc_rmm_arena.c - RAPIDS RMM's arena_memory_resource: one global arena
 * taken from upstream at once, per-stream arenas that borrow superblocks
 * from it.
 *
 * Rules, from rmm/mr/device/arena_memory_resource.hpp and
 * detail/arena.hpp (RMM 24.x; names are RMM's):
 *  - global_arena: one upstream allocation of arena_size (default: half the
 *    free device memory), aligned down to 256 B, at least 1 MiB; it is one
 *    superblock at first, and it is never given back before the resource is
 *    destroyed;
 *  - requests are aligned up to 256 B; a request above 1 MiB
 *    (superblock::minimum_size; global_arena::handles) is served by the
 *    global arena directly, any other by the arena of its stream (one per
 *    stream; a per-thread default stream would get a per-thread arena,
 *    which a trace does not record);
 *  - every search is address-ordered first fit: the first superblock with a
 *    free block that fits, then the first such block in it; the request
 *    takes its low part;
 *  - global_arena::first_fit takes the superblock out of the global set; if
 *    it is empty and at least max(1 MiB, size) + 1 MiB, it is split and the
 *    tail goes back. The direct (large) path puts the superblock back into
 *    the global set; the arena path (acquire, for requests <= 1 MiB) keeps
 *    it in the stream's arena;
 *  - a freed block coalesces with its free neighbours in its superblock; a
 *    superblock of the global set that becomes empty coalesces with empty
 *    contiguous neighbours there; an arena keeps its superblocks, empty or
 *    not;
 *  - when an arena's search fails, defragment(): cudaDeviceSynchronize,
 *    every arena gives every superblock back to the global arena (clean()),
 *    then the search is tried once more; then "Maximum pool size exceeded"
 *    (rmm::out_of_memory, thrown at once: alloc.h library_handles_oom).
 * Arenas are visited in stream order (RMM's std::map by stream handle).
 *
 * Settings (--alloc-conf): arena_size:SIZE. --quota / --memory-fraction
 * cap the arena's size.
 */
#include <stdlib.h>
#include <string.h>

/* The sets of superblocks are red-black trees by address whose nodes keep
 * the largest free span of their subtree (sub_max), so first fit goes down
 * one path instead of along the whole set (RMM walks its std::set; the
 * answer is the same). RB_AUGMENT is tree.h's hook for a node whose
 * children changed. */
#define RB_AUGMENT(x) sb_aug(x)
#ifndef __unused /* libbsd's static generator marks functions so; glibc does not define it */
#define __unused __attribute__((unused))
#endif
#include <bsd/sys/tree.h>

#include "alloc.h"
#include "alloc_settings.h"
#include "policy.h"

#define AR_ALIGN 256ull
#define AR_SUPER_MIN (1ull << 20) /* superblock::minimum_size */

typedef struct ar_span ar_span;
typedef struct ar_super ar_super;
typedef struct ar_arena ar_arena;

struct ar_span { /* a free block in a superblock, or a live allocation */
    uint64_t ptr, size, requested, stream;
    ar_span *prev, *next; /* free: the superblock's spans, address order; live: st->live */
    ar_super *sb;         /* live allocations: where they are */
    uint8_t category;
};

struct ar_super {
    uint64_t ptr, size;
    ar_span *free;     /* address-ordered free spans */
    uint64_t max_free; /* the largest of them (0: none): "fits" without a walk */
    uint64_t sub_max;  /* the largest max_free in its subtree of its set */
    uint32_t n_alloc;
    uint8_t in_set;  /* in a set (global_first_fit takes one out for an arena) */
    ar_arena *owner; /* NULL: the global arena */
    RB_ENTRY(ar_super) node;
};

RB_HEAD(ar_set, ar_super);

struct ar_arena {
    uint64_t stream;
    struct ar_set supers; /* by address */
    ar_arena *next;       /* stream order */
};

typedef struct ar_state {
    uint64_t size; /* arena_size asked for (0: default) */
    int started;
    uint64_t base, bytes, driver_bytes; /* the upstream allocation */
    struct ar_set global;               /* by address */
    ar_arena *arenas;
    ar_span *live; /* live allocations (for destroy) */
    uint64_t last_use_ns;
    uint32_t cat_mask, n_alloc;
} ar_state;

static uint64_t align_up(uint64_t v)
{
    return (v + AR_ALIGN - 1) / AR_ALIGN * AR_ALIGN;
}

/* ---------------- superblocks ---------------- */

static int sb_empty(const ar_super *b)
{
    return b->free && !b->free->next && b->free->size == b->size;
}

static ar_super *sb_new(uint64_t ptr, uint64_t size)
{
    ar_super *b = calloc(1, sizeof *b);
    ar_span *f = calloc(1, sizeof *f);
    if (!b || !f) {
        free(b);
        free(f);
        return NULL;
    }
    b->ptr = ptr;
    b->size = size;
    f->ptr = ptr;
    f->size = size;
    b->free = f;
    b->max_free = size;
    return b;
}

static void sb_free(ar_super *b)
{
    for (ar_span *f = b->free, *n; f; f = n) {
        n = f->next;
        free(f);
    }
    free(b);
}

/* x's sub_max from its own and its children's. */
static void sb_aug(ar_super *x)
{
    uint64_t m = x->max_free;
    const ar_super *l = RB_LEFT(x, node), *r = RB_RIGHT(x, node);
    if (l && l->sub_max > m) m = l->sub_max;
    if (r && r->sub_max > m) m = r->sub_max;
    x->sub_max = m;
}

/* x (in a set) changed, or a child of it did: every sub_max up to the root. */
static void sb_aug_up(ar_super *x)
{
    for (; x; x = RB_PARENT(x, node))
        sb_aug(x);
}

static int cmp_ptr(const ar_super *a, const ar_super *b)
{
    return a->ptr < b->ptr ? -1 : a->ptr > b->ptr;
}

RB_GENERATE_STATIC(ar_set, ar_super, node, cmp_ptr)

static void set_insert(struct ar_set *set, ar_super *b)
{
    b->sub_max = b->max_free;
    ar_set_RB_INSERT(set, b);
    b->in_set = 1;
    sb_aug_up(b);
}

static void set_remove(struct ar_set *set, ar_super *b)
{
    ar_super *p = RB_PARENT(b, node);
    ar_set_RB_REMOVE(set, b);
    b->in_set = 0;
    sb_aug_up(p == NULL ? RB_ROOT(set) : p); /* the old parent's path to the root */
}

/* The first superblock of set, by address, with a free span of at least
 * size: left whenever the left subtree has one. */
static ar_super *set_first_fit(struct ar_set *set, uint64_t size)
{
    ar_super *x = RB_ROOT(set);
    if (!x || x->sub_max < size) return NULL;
    for (;;) {
        ar_super *l = RB_LEFT(x, node);
        if (l && l->sub_max >= size)
            x = l;
        else if (x->max_free >= size)
            return x;
        else
            x = RB_RIGHT(x, node); /* its sub_max is at least size */
    }
}

/* b's largest free span changed to m. */
static void sb_set_max(ar_super *b, uint64_t m)
{
    if (m == b->max_free) return;
    b->max_free = m;
    if (b->in_set) sb_aug_up(b);
}

/* b's largest free span shrank or left: find the largest again. */
static void sb_max_again(ar_super *b)
{
    uint64_t m = 0;
    for (const ar_span *f = b->free; f; f = f->next)
        m = f->size > m ? f->size : m;
    sb_set_max(b, m);
}

/* superblock::first_fit: the first free span that fits, split; the low
 * part is returned as a live span (not in the list). */
static ar_span *sb_first_fit(ar_super *b, uint64_t size)
{
    ar_span *f = b->free;
    while (f && f->size < size)
        f = f->next;
    if (!f) return NULL;
    ar_span *out;
    int was_max = f->size == b->max_free;
    if (f->size > size) {
        out = calloc(1, sizeof *out);
        if (!out) return NULL;
        out->ptr = f->ptr;
        out->size = size;
        f->ptr += size;
        f->size -= size;
    } else {
        out = f;
        if (f->prev)
            f->prev->next = f->next;
        else
            b->free = f->next;
        if (f->next) f->next->prev = f->prev;
        out->prev = out->next = NULL;
    }
    if (was_max) sb_max_again(b);
    out->sb = b;
    b->n_alloc++;
    return out;
}

/* superblock::coalesce: put a freed span back, merging with neighbours. */
static void sb_coalesce(ar_super *b, ar_span *s)
{
    ar_span *prev = NULL, *next = b->free;
    while (next && next->ptr < s->ptr) {
        prev = next;
        next = next->next;
    }
    s->sb = NULL;
    s->prev = prev;
    s->next = next;
    if (prev)
        prev->next = s;
    else
        b->free = s;
    if (next) next->prev = s;
    if (prev && prev->ptr + prev->size == s->ptr) { /* merge into prev */
        prev->size += s->size;
        prev->next = next;
        if (next) next->prev = prev;
        free(s);
        s = prev;
    }
    if (next && s->ptr + s->size == next->ptr) {
        s->size += next->size;
        s->next = next->next;
        if (s->next) s->next->prev = s;
        free(next);
    }
    if (s->size > b->max_free) sb_set_max(b, s->size);
    b->n_alloc--;
}

/* global_arena::coalesce: an empty superblock joins empty contiguous
 * neighbours in the global set. */
static void global_put(ar_state *st, ar_super *b)
{
    b->owner = NULL;
    if (!b->in_set) set_insert(&st->global, b);
    if (!sb_empty(b)) return;
    ar_super *p = ar_set_RB_PREV(b), *n = ar_set_RB_NEXT(b);
    if (n && sb_empty(n) && b->ptr + b->size == n->ptr) {
        set_remove(&st->global, n);
        b->size += n->size;
        b->free->size = b->size;
        sb_set_max(b, b->size);
        sb_free(n);
    }
    if (p && sb_empty(p) && p->ptr + p->size == b->ptr) {
        set_remove(&st->global, b);
        p->size += b->size;
        p->free->size = p->size;
        sb_set_max(p, p->size);
        sb_free(b);
    }
}

/* global_arena::first_fit: the first superblock that fits, taken out of
 * the set when `take` (an arena acquires it; RMM's direct path takes it
 * out and puts it back, so here it stays); an empty one large enough is
 * split and its tail stays. */
static ar_super *global_first_fit(ar_state *st, uint64_t size, int take)
{
    ar_super *b = set_first_fit(&st->global, size);
    if (!b) return NULL;
    if (take) set_remove(&st->global, b);
    uint64_t min_size = size > AR_SUPER_MIN ? size : AR_SUPER_MIN;
    if (sb_empty(b) && b->size >= min_size + AR_SUPER_MIN) {
        ar_super *tail = sb_new(b->ptr + min_size, b->size - min_size);
        if (tail) {
            b->size = min_size;
            b->free->size = min_size;
            sb_set_max(b, min_size);
            set_insert(&st->global, tail);
        }
    }
    return b;
}

/* ---------------- arenas ---------------- */

static ar_arena *arena_get(ar_state *st, uint64_t stream)
{
    ar_arena **pp = &st->arenas;
    while (*pp && (*pp)->stream < stream)
        pp = &(*pp)->next;
    if (*pp && (*pp)->stream == stream) return *pp;
    ar_arena *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->stream = stream;
    r->next = *pp;
    *pp = r;
    return r;
}

/* arena::allocate */
static ar_span *arena_allocate(ar_state *st, ar_arena *r, uint64_t size)
{
    if (size > AR_SUPER_MIN) { /* global_arena::allocate */
        /* RMM takes the superblock out and puts it back: it stays */
        ar_super *b = global_first_fit(st, size, 0);
        return b ? sb_first_fit(b, size) : NULL;
    }
    ar_super *b = set_first_fit(&r->supers, size); /* arena::first_fit */
    if (b) return sb_first_fit(b, size);
    b = global_first_fit(st, size, 1); /* expand_arena: acquire */
    if (!b) return NULL;
    b->owner = r;
    set_insert(&r->supers, b);
    return sb_first_fit(b, size);
}

/* defragment: every arena's superblocks back to the global arena. */
static void defragment(ar_state *st)
{
    for (ar_arena *r = st->arenas; r; r = r->next) {
        ar_super *b;
        while ((b = RB_MIN(ar_set, &r->supers))) {
            set_remove(&r->supers, b);
            global_put(st, b);
        }
    }
}

/* ---------------- the allocator ---------------- */

static int start(gm_alloc *a, ar_state *st)
{
    if (st->started) return GM_OK;
    uint64_t size = st->size;
    if (!size) { /* default_size: half the free device memory */
        const gm_device *d = a->dev;
        uint64_t cap = gm_device_capacity(a->dev), used = d->used_bytes + d->overhead_bytes;
        size = (cap > used ? cap - used : 0) / 2;
    }
    if (a->limits.memory_limit && size > a->limits.memory_limit) size = a->limits.memory_limit;
    size = size / AR_ALIGN * AR_ALIGN;
    if (size < AR_SUPER_MIN) return GM_EOOM;
    uint64_t drv = gm_device_round(size), ptr;
    if (gm_alloc_driver_malloc(a, drv, 0, 0, &ptr) != GM_OK) return GM_EOOM;
    ar_super *b = sb_new(ptr, size);
    if (!b) {
        gm_alloc_driver_free(a, ptr, drv, 0, 0);
        return GM_EOOM;
    }
    st->base = ptr;
    st->bytes = size;
    st->driver_bytes = drv;
    set_insert(&st->global, b);
    st->started = 1;
    return GM_OK;
}

typedef struct grow_ctx {
    ar_state *st;
    ar_arena *r;
    uint64_t size;
    ar_span *got;
} grow_ctx;

/* The global arena never grows: defragment and look again. */
static int retry(gm_alloc *a, void *ctx)
{
    (void)a;
    grow_ctx *g = ctx;
    defragment(g->st);
    g->got = arena_allocate(g->st, g->r, g->size);
    return g->got ? GM_OK : GM_EOOM;
}

static int ar_malloc(gm_alloc *a, uint64_t req, uint64_t stream, uint8_t cat, uint64_t now,
                     uint64_t *handle)
{
    ar_state *st = a->impl;
    if (start(a, st) != GM_OK) return GM_EOOM;
    uint64_t size = align_up(req ? req : 1);
    ar_arena *r = arena_get(st, stream);
    if (!r) return GM_EOOM;
    ar_span *s = arena_allocate(st, r, size);
    if (!s) {
        gm_pressure pr = {.size = size, .alloc_size = size, .stream = stream, .now_ns = now};
        grow_ctx g = {.st = st, .r = r, .size = size};
        if (gm_policy_grow(a, &pr, retry, &g) != GM_OK) return GM_EOOM;
        s = g.got;
    }
    s->requested = req;
    s->stream = stream;
    s->category = cat;
    s->prev = NULL;
    s->next = st->live;
    if (st->live) st->live->prev = s;
    st->live = s;
    st->n_alloc++;
    st->last_use_ns = now;
    st->cat_mask |= 1u << cat;
    a->c.requested_bytes += req;
    a->c.allocated_bytes += s->size;
    *handle = (uint64_t)(uintptr_t)s;
    return GM_OK;
}

static void ar_free(gm_alloc *a, uint64_t handle, uint64_t now)
{
    ar_state *st = a->impl;
    ar_span *s = (ar_span *)(uintptr_t)handle;
    ar_super *b = s->sb;
    a->c.requested_bytes -= s->requested;
    a->c.allocated_bytes -= s->size;
    st->n_alloc--;
    st->last_use_ns = now;
    s->requested = 0;
    if (s->prev)
        s->prev->next = s->next;
    else
        st->live = s->next;
    if (s->next) s->next->prev = s->prev;
    sb_coalesce(b, s);
    if (!b->owner && sb_empty(b)) global_put(st, b); /* global_arena::deallocate: coalesce */
}

static uint64_t max_free_in(const struct ar_set *set, uint64_t best)
{
    const ar_super *root = RB_ROOT(set);
    return root && root->sub_max > best ? root->sub_max : best;
}

static uint64_t ar_largest_free(gm_alloc *a)
{
    ar_state *st = a->impl;
    uint64_t best = max_free_in(&st->global, 0);
    for (const ar_arena *r = st->arenas; r; r = r->next)
        best = max_free_in(&r->supers, best);
    return best;
}

/* The free spans of a set's superblocks. */
static uint32_t free_spans(struct ar_set *set)
{
    uint32_t n = 0;
    ar_super *b;
    RB_FOREACH(b, ar_set, set)
    {
        for (const ar_span *f = b->free; f; f = f->next)
            n++;
    }
    return n;
}

static size_t ar_segments(gm_alloc *a, gm_seg_info *buf, size_t cap)
{
    ar_state *st = a->impl;
    if (!st->started) return 0;
    if (cap) {
        gm_seg_info *o = &buf[0];
        memset(o, 0, sizeof *o);
        o->id = 1;
        o->addr = st->base;
        o->size = st->bytes;
        o->n_allocated = st->n_alloc;
        o->n_blocks = st->n_alloc;
        o->n_blocks += free_spans(&st->global);
        for (ar_arena *r = st->arenas; r; r = r->next)
            o->n_blocks += free_spans(&r->supers);
        o->allocated_bytes = a->c.allocated_bytes;
        o->largest_free = ar_largest_free(a);
        o->last_use_ns = st->last_use_ns;
        o->category_mask = st->cat_mask;
        /* releasable stays 0: the global arena is given back only when destroyed */
    }
    return 1;
}

static uint64_t ar_release(gm_alloc *a, uint64_t id, uint64_t now)
{
    (void)a, (void)id, (void)now;
    return 0;
}

static uint64_t ar_empty_cache(gm_alloc *a, uint64_t now)
{
    (void)a, (void)now;
    return 0;
}

static uint64_t ar_block_size(gm_alloc *a, uint64_t size)
{
    (void)a;
    return align_up(size ? size : 1);
}

static uint64_t ar_segment_size(gm_alloc *a, uint64_t size, int *small_pool)
{
    *small_pool = ar_block_size(a, size) <= AR_SUPER_MIN;
    return ar_block_size(a, size); /* the arena never asks the driver again */
}

static uint64_t ar_block_addr(gm_alloc *a, uint64_t handle)
{
    (void)a;
    return ((const ar_span *)(uintptr_t)handle)->ptr;
}

static int ar_restore(gm_alloc *a, const gm_init_row *rows, size_t n, uint64_t *handles,
                      gm_err *err)
{
    if (start(a, a->impl) != GM_OK)
        return gm_errf(err, GM_EOOM,
                       "allocator rmm-arena: the global arena does not fit on the device (or is "
                       "under 1 MiB); give a smaller arena_size or a larger --capacity");
    return gm_alloc_restore_live(a, rows, n, handles, err);
}

static int ar_create(gm_alloc *a, const char *conf, gm_err *err)
{
    gm_settings st;
    if (gm_settings_parse("allocator rmm-arena", conf, &st, err)) return err->code;
    uint64_t size = 0;
    if (gm_settings_size(&st, "arena_size", &size, err) < 0) return err->code;
    if (gm_settings_check(&st, "arena_size", err)) return err->code;
    if (st.n && size / AR_ALIGN * AR_ALIGN < AR_SUPER_MIN)
        return gm_errf(err, GM_EINVAL,
                       "allocator rmm-arena: arena_size must be at least 1 MiB (RMM: \"Arena size "
                       "smaller than minimum superblock size.\"), got '%s'",
                       conf);
    ar_state *s = calloc(1, sizeof *s);
    if (!s) return gm_errf(err, GM_ENOMEM, "out of memory");
    s->size = size;
    a->limits.library_handles_oom = 1;
    a->impl = s;
    return GM_OK;
}

static void set_free_all(struct ar_set *set)
{
    ar_super *b;
    while ((b = RB_ROOT(set))) {
        ar_set_RB_REMOVE(set, b);
        sb_free(b);
    }
}

static void ar_destroy(gm_alloc *a)
{
    ar_state *st = a->impl;
    if (!st) return;
    if (st->started) {
        uint64_t ns;
        a->dev->ops->mem_free(a->dev, st->base, st->driver_bytes, &ns);
    }
    set_free_all(&st->global);
    for (ar_span *s = st->live, *n; s; s = n) {
        n = s->next;
        free(s);
    }
    for (ar_arena *r = st->arenas, *n; r; r = n) {
        n = r->next;
        set_free_all(&r->supers);
        free(r);
    }
    free(st);
    a->impl = NULL;
}

const gm_alloc_ops gm_alloc_rmm_arena = {
    .version = GM_ALLOC_VERSION,
    .name = "rmm-arena",
    .summary = "RAPIDS RMM arena_memory_resource (global arena, per-stream arenas, superblocks)",
    .cost = 1.4,
    .create = ar_create,
    .destroy = ar_destroy,
    .malloc = ar_malloc,
    .free = ar_free,
    .largest_free = ar_largest_free,
    .restore = ar_restore,
    .segments = ar_segments,
    .release = ar_release,
    .empty_cache = ar_empty_cache,
    .block_size = ar_block_size,
    .segment_size = ar_segment_size,
    .block_addr = ar_block_addr,
};
