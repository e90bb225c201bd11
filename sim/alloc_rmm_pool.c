/*
 * alloc_rmm_pool.c - RAPIDS RMM's pool_memory_resource over
 * cuda_memory_resource (cudaMalloc), the resource behind
 * rmm.reinitialize(pool_allocator=True) and RMM's replay benchmark's
 * "pool".
 *
 * Rules, from rmm/mr/device/pool_memory_resource.hpp,
 * detail/stream_ordered_memory_resource.hpp and
 * detail/coalescing_free_list.hpp (RMM 23.x-24.x; names are RMM's):
 *  - sizes are aligned up to 256 B (CUDA_ALLOCATION_ALIGNMENT);
 *    initial_pool_size and maximum_pool_size must be multiples of 256 and
 *    initial <= maximum ("Initial pool size exceeds the maximum pool size!");
 *  - initialize_pool: one upstream allocation of initial_pool_size, put in
 *    the free list of the default stream (cudaStreamLegacy). Without an
 *    initial size, older RMM (and its Python default) takes half the free
 *    device memory: align_up(min(free, total / 2), 256);
 *  - free lists are per stream (stream_free_blocks_); a list is address
 *    ordered and coalescing: a block inserted merges with the blocks just
 *    before and after it, unless the later one is the head of an upstream
 *    allocation (blocks never merge across two cudaMalloc'd ranges);
 *    get_block is best fit (the smallest block that fits; the lowest address
 *    among equal sizes);
 *  - get_block(size, stream): (1) best fit in the stream's own list; (2) the
 *    best fit in another stream's list, taken with a wait on that stream's
 *    event, its remainder left in that list; (3) merging the other lists into
 *    the stream's own one at a time, looking after each merge; (4)
 *    expand_pool; the request takes the low part of a block and the
 *    remainder goes back to the list it came from;
 *  - do_deallocate puts the block in the list of the stream it is freed on
 *    (here: the stream that allocated it; the seam does not carry the
 *    free's stream);
 *  - expand_pool = try_to_expand(size_to_grow(size), size): size_to_grow is,
 *    with a maximum, max(size, (maximum - pool size) / 2) if size fits in
 *    what remains (else 0: failure), without one max(size, pool size)
 *    (doubling); try_to_expand allocates try_size from upstream and on
 *    failure halves it, down to size, once each; then "Maximum pool size
 *    exceeded" (rmm::out_of_memory);
 *  - the pool never gives memory back before it is destroyed: there is
 *    nothing a release policy can release, and an OOM is thrown at once
 *    (alloc.h: library_handles_oom).
 * The order of the other streams' lists is RMM's std::map order (by event
 * handle, arbitrary); here the order the streams were first seen.
 *
 * Settings (--alloc-conf): initial_pool_size:SIZE, maximum_pool_size:SIZE.
 * --quota / --memory-fraction cap the pool's upstream allocations too.
 */
#include <stdlib.h>
#include <string.h>

#ifndef __unused
#define __unused __attribute__((unused))
#endif
#include <bsd/sys/tree.h>

#include "alloc.h"
#include "alloc_settings.h"
#include "policy.h"

#define RP_ALIGN 256ull /* rmm::CUDA_ALLOCATION_ALIGNMENT */

typedef struct rp_block rp_block;
typedef struct rp_list rp_list;
typedef struct rp_up rp_up;

struct rp_block {
    RB_ENTRY(rp_block) node; /* in list->free when free */
    uint64_t ptr, size, requested, stream;
    rp_block *prev, *next; /* address neighbours in the upstream allocation */
    rp_up *up;
    rp_list *list; /* free: the list holding it; NULL when allocated */
    uint8_t category;
};

static int cmp_fit(const rp_block *a, const rp_block *b)
{
    if (a->size != b->size) return a->size < b->size ? -1 : 1;
    return a->ptr < b->ptr ? -1 : a->ptr > b->ptr;
}

RB_HEAD(rp_tree, rp_block);
RB_GENERATE_STATIC(rp_tree, rp_block, node, cmp_fit)

struct rp_list { /* one stream's free list */
    struct rp_tree free;
    uint64_t stream;
    rp_list *next; /* in first-seen order */
};

struct rp_up { /* one upstream (cudaMalloc) allocation */
    uint64_t base, size, driver_bytes, stream;
    rp_block *first;
    uint32_t n_blocks, n_alloc;
    uint64_t alloc_bytes, last_use_ns;
    uint32_t cat_mask;
    rp_up *next;
};

typedef struct rp_state {
    rp_list *lists, *lists_tail;
    rp_up *ups;
    uint32_t n_ups;
    uint64_t initial, maximum; /* maximum UINT64_MAX: unset */
    int initial_given, started;
    uint64_t pool_size; /* current_pool_size_ */
} rp_state;

static uint64_t align_up(uint64_t v)
{
    return (v + RP_ALIGN - 1) / RP_ALIGN * RP_ALIGN;
}

static rp_list *list_find(rp_state *s, uint64_t stream)
{
    for (rp_list *l = s->lists; l; l = l->next)
        if (l->stream == stream) return l;
    return NULL;
}

static rp_list *list_get(rp_state *s, uint64_t stream)
{
    rp_list *l = list_find(s, stream);
    if (l) return l;
    l = calloc(1, sizeof *l);
    if (!l) return NULL;
    RB_INIT(&l->free);
    l->stream = stream;
    if (s->lists_tail)
        s->lists_tail->next = l;
    else
        s->lists = l;
    s->lists_tail = l;
    return l;
}

/* coalescing_free_list::insert: merge with the free neighbours held by the
 * same list (neighbours are within one upstream allocation, so a head is
 * never merged into the block before it). */
static void list_insert(rp_list *l, rp_block *b)
{
    rp_block *p = b->prev, *n = b->next;
    if (p && p->list == l) {
        rp_tree_RB_REMOVE(&l->free, p);
        b->ptr = p->ptr;
        b->size += p->size;
        b->prev = p->prev;
        if (b->prev)
            b->prev->next = b;
        else
            b->up->first = b;
        b->up->n_blocks--;
        free(p);
    }
    if (n && n->list == l) {
        rp_tree_RB_REMOVE(&l->free, n);
        b->size += n->size;
        b->next = n->next;
        if (b->next) b->next->prev = b;
        b->up->n_blocks--;
        free(n);
    }
    b->list = l;
    rp_tree_RB_INSERT(&l->free, b);
}

/* get_block of one list: best fit, removed from the list. */
static rp_block *list_take(rp_list *l, uint64_t size)
{
    rp_block key = {.size = size, .ptr = 0};
    rp_block *b = rp_tree_RB_NFIND(&l->free, &key);
    if (b) {
        rp_tree_RB_REMOVE(&l->free, b);
        b->list = NULL;
    }
    return b;
}

/* Move every block of src into dst (coalescing), then drop src. */
static void list_merge(rp_state *s, rp_list *dst, rp_list *src)
{
    rp_block *b;
    while ((b = RB_MIN(rp_tree, &src->free))) {
        rp_tree_RB_REMOVE(&src->free, b);
        b->list = NULL;
        list_insert(dst, b);
    }
    rp_list **pp = &s->lists;
    while (*pp != src)
        pp = &(*pp)->next;
    *pp = src->next;
    if (s->lists_tail == src) {
        s->lists_tail = NULL;
        for (rp_list *l = s->lists; l; l = l->next)
            s->lists_tail = l;
    }
    free(src);
}

/* allocate_and_insert_remainder: the low `size` bytes are the allocation;
 * the rest goes into list `into`. */
static int carve(rp_block *b, uint64_t size, rp_list *into)
{
    if (b->size > size) {
        rp_block *rest = calloc(1, sizeof *rest);
        if (!rest) return GM_ENOMEM;
        rest->ptr = b->ptr + size;
        rest->size = b->size - size;
        rest->up = b->up;
        rest->prev = b;
        rest->next = b->next;
        if (b->next) b->next->prev = rest;
        b->next = rest;
        b->size = size;
        b->up->n_blocks++;
        list_insert(into, rest);
    }
    return GM_OK;
}

/* block_from_upstream: one cudaMalloc of `size` (the driver takes it in
 * 2 MiB pages); --quota / --memory-fraction refuse it like the device. */
static rp_block *from_upstream(gm_alloc *a, rp_state *s, uint64_t size, uint64_t stream,
                               uint64_t now)
{
    uint64_t bytes = gm_device_round(size), ptr;
    if (a->limits.memory_limit && a->c.reserved_bytes + bytes > a->limits.memory_limit) return NULL;
    if (gm_alloc_driver_malloc(a, bytes, stream, now, &ptr) != GM_OK) return NULL;
    rp_up *u = calloc(1, sizeof *u);
    rp_block *b = calloc(1, sizeof *b);
    if (!u || !b) {
        free(u);
        free(b);
        gm_alloc_driver_free(a, ptr, bytes, stream, now);
        return NULL;
    }
    u->base = ptr;
    u->size = size;
    u->driver_bytes = bytes;
    u->stream = stream;
    u->first = b;
    u->n_blocks = 1;
    u->next = s->ups;
    s->ups = u;
    s->n_ups++;
    b->ptr = ptr;
    b->size = size;
    b->up = u;
    s->pool_size += size;
    return b;
}

/* try_to_expand(try_size, min_size) */
static rp_block *try_to_expand(gm_alloc *a, rp_state *s, uint64_t try_size, uint64_t min_size,
                               uint64_t stream, uint64_t now)
{
    while (try_size >= min_size && try_size > 0) {
        rp_block *b = from_upstream(a, s, try_size, stream, now);
        if (b) return b;
        if (try_size == min_size) break; /* only try `size` once */
        try_size = try_size / 2 > min_size ? try_size / 2 : min_size;
    }
    return NULL;
}

/* size_to_grow */
static uint64_t size_to_grow(const rp_state *s, uint64_t size)
{
    if (s->maximum != UINT64_MAX) {
        uint64_t remaining = align_up(s->maximum - s->pool_size);
        uint64_t aligned = align_up(size);
        if (aligned > remaining) return 0;
        return aligned > remaining / 2 ? aligned : remaining / 2;
    }
    return size > s->pool_size ? size : s->pool_size;
}

/* initialize_pool, at the first call (the tenant's first event): the
 * device's free memory is known then, and so is --quota. */
static int start(gm_alloc *a, rp_state *s)
{
    if (s->started) return GM_OK;
    uint64_t size = s->initial;
    if (!s->initial_given) {
        const gm_device *d = a->dev;
        uint64_t cap = gm_device_capacity(a->dev), used = d->used_bytes + d->overhead_bytes;
        uint64_t freeb = cap > used ? cap - used : 0;
        uint64_t half = cap / 2;
        size = align_up(freeb < half ? freeb : half);
        if (size > s->maximum) size = s->maximum / RP_ALIGN * RP_ALIGN;
    }
    if (size > 0) {
        rp_list *l = list_get(s, 0); /* cudaStreamLegacy */
        rp_block *b = l ? try_to_expand(a, s, size, size, 0, 0) : NULL;
        if (!b) return GM_EOOM; /* the constructor would throw */
        list_insert(l, b);
    }
    s->started = 1;
    return GM_OK;
}

typedef struct grow_ctx {
    rp_state *s;
    rp_list *own;
    uint64_t size, stream, now;
    rp_block *got;
} grow_ctx;

static int expand(gm_alloc *a, void *ctx)
{
    grow_ctx *g = ctx;
    rp_block *b = try_to_expand(a, g->s, size_to_grow(g->s, g->size), g->size, g->stream, g->now);
    if (!b) return GM_EOOM;
    if (carve(b, g->size, g->own)) {
        list_insert(g->own, b);
        return GM_EOOM;
    }
    g->got = b;
    return GM_OK;
}

/* get_block */
static rp_block *get_block(gm_alloc *a, rp_state *s, uint64_t size, uint64_t stream, uint64_t now)
{
    rp_list *own = list_find(s, stream);
    rp_block *b;
    if (own && (b = list_take(own, size))) return carve(b, size, own) ? NULL : b;
    if (!own && !(own = list_get(s, stream))) return NULL;
    for (rp_list *o = s->lists; o; o = o->next) /* taken from another stream */
        if (o != own && (b = list_take(o, size))) return carve(b, size, o) ? NULL : b;
    for (rp_list *o = s->lists, *next; o; o = next) { /* merged, one list at a time */
        next = o->next;
        if (o == own) continue;
        list_merge(s, own, o);
        if ((b = list_take(own, size))) return carve(b, size, own) ? NULL : b;
    }
    gm_pressure pr = {
        .size = size, .alloc_size = size_to_grow(s, size), .stream = stream, .now_ns = now};
    grow_ctx g = {.s = s, .own = own, .size = size, .stream = stream, .now = now};
    if (gm_policy_grow(a, &pr, expand, &g) != GM_OK) return NULL;
    return g.got;
}

static int rp_malloc(gm_alloc *a, uint64_t req, uint64_t stream, uint8_t cat, uint64_t now,
                     uint64_t *handle)
{
    rp_state *s = a->impl;
    if (start(a, s) != GM_OK) return GM_EOOM;
    uint64_t size = align_up(req ? req : 1);
    rp_block *b = get_block(a, s, size, stream, now);
    if (!b) return GM_EOOM;
    rp_up *u = b->up;
    b->stream = stream;
    b->requested = req;
    b->category = cat;
    u->n_alloc++;
    u->alloc_bytes += b->size;
    u->last_use_ns = now;
    u->cat_mask |= 1u << cat;
    a->c.requested_bytes += req;
    a->c.allocated_bytes += b->size;
    *handle = (uint64_t)(uintptr_t)b;
    return GM_OK;
}

static void rp_free(gm_alloc *a, uint64_t handle, uint64_t now)
{
    rp_state *s = a->impl;
    rp_block *b = (rp_block *)(uintptr_t)handle;
    rp_up *u = b->up;
    a->c.requested_bytes -= b->requested;
    a->c.allocated_bytes -= b->size;
    u->n_alloc--;
    u->alloc_bytes -= b->size;
    u->last_use_ns = now;
    b->requested = 0;
    rp_list *l = list_get(s, b->stream);
    if (l) list_insert(l, b);
}

static uint64_t rp_largest_free(gm_alloc *a)
{
    rp_state *s = a->impl;
    uint64_t best = 0;
    for (rp_list *l = s->lists; l; l = l->next) {
        rp_block *m = RB_MAX(rp_tree, &l->free);
        if (m && m->size > best) best = m->size;
    }
    return best;
}

static size_t rp_segments(gm_alloc *a, gm_seg_info *buf, size_t cap)
{
    rp_state *s = a->impl;
    size_t i = 0;
    for (const rp_up *u = s->ups; u; u = u->next, i++) {
        if (i >= cap) continue;
        gm_seg_info *o = &buf[i];
        memset(o, 0, sizeof *o);
        o->id = (uint64_t)(uintptr_t)u;
        o->addr = u->base;
        o->size = u->size;
        o->stream = u->stream;
        o->n_blocks = u->n_blocks;
        o->n_allocated = u->n_alloc;
        o->allocated_bytes = u->alloc_bytes;
        o->last_use_ns = u->last_use_ns;
        o->category_mask = u->cat_mask;
        for (const rp_block *b = u->first; b; b = b->next)
            if (b->list && b->size > o->largest_free) o->largest_free = b->size;
        /* releasable stays 0: the pool frees upstream memory only when destroyed */
    }
    return i;
}

static uint64_t rp_release(gm_alloc *a, uint64_t id, uint64_t now)
{
    (void)a, (void)id, (void)now;
    return 0; /* pool_memory_resource has no way to give memory back */
}

static uint64_t rp_empty_cache(gm_alloc *a, uint64_t now)
{
    (void)a, (void)now;
    return 0;
}

static uint64_t rp_block_size(gm_alloc *a, uint64_t size)
{
    (void)a;
    return align_up(size ? size : 1);
}

static uint64_t rp_segment_size(gm_alloc *a, uint64_t size, int *small_pool)
{
    rp_state *s = a->impl;
    *small_pool = 0;
    uint64_t g = size_to_grow(s, rp_block_size(a, size));
    return gm_device_round(g ? g : rp_block_size(a, size));
}

static uint64_t rp_block_addr(gm_alloc *a, uint64_t handle)
{
    (void)a;
    return ((const rp_block *)(uintptr_t)handle)->ptr;
}

static int rp_restore(gm_alloc *a, const gm_init_row *rows, size_t n, uint64_t *handles,
                      gm_err *err)
{
    rp_state *s = a->impl;
    if (start(a, s) != GM_OK)
        return gm_errf(err, GM_EOOM,
                       "allocator rmm-pool: the initial pool of %llu bytes does not fit on the "
                       "device; give a smaller initial_pool_size or a larger --capacity",
                       (unsigned long long)s->initial);
    return gm_alloc_restore_live(a, rows, n, handles, err);
}

static int rp_create(gm_alloc *a, const char *conf, gm_err *err)
{
    gm_settings st;
    if (gm_settings_parse("allocator rmm-pool", conf, &st, err)) return err->code;
    rp_state *s = calloc(1, sizeof *s);
    if (!s) return gm_errf(err, GM_ENOMEM, "out of memory");
    s->maximum = UINT64_MAX;
    int rc, got;
    if ((got = gm_settings_size(&st, "initial_pool_size", &s->initial, err)) < 0) goto fail;
    s->initial_given = got;
    if ((rc = gm_settings_size(&st, "maximum_pool_size", &s->maximum, err)) < 0) goto fail;
    if ((rc = gm_settings_check(&st, "initial_pool_size, maximum_pool_size", err))) goto fail;
    if (s->initial % RP_ALIGN || (s->maximum != UINT64_MAX && s->maximum % RP_ALIGN)) {
        rc = gm_errf(err, GM_EINVAL,
                     "allocator rmm-pool: initial_pool_size and maximum_pool_size must be "
                     "multiples of 256 bytes (RMM requires it), got '%s'",
                     conf);
        goto fail;
    }
    if (s->initial_given && s->initial > s->maximum) {
        rc = gm_errf(err, GM_EINVAL,
                     "allocator rmm-pool: initial_pool_size exceeds maximum_pool_size in '%s' "
                     "(RMM: \"Initial pool size exceeds the maximum pool size!\")",
                     conf);
        goto fail;
    }
    a->limits.library_handles_oom = 1;
    a->impl = s;
    return GM_OK;
fail:
    free(s);
    return err->code;
}

static void rp_destroy(gm_alloc *a)
{
    rp_state *s = a->impl;
    if (!s) return;
    for (rp_up *u = s->ups, *next; u; u = next) {
        next = u->next;
        uint64_t ns;
        a->dev->ops->mem_free(a->dev, u->base, u->driver_bytes, &ns);
        for (rp_block *b = u->first, *bn; b; b = bn) {
            bn = b->next;
            free(b);
        }
        free(u);
    }
    for (rp_list *l = s->lists, *next; l; l = next) {
        next = l->next;
        free(l);
    }
    free(s);
    a->impl = NULL;
}

const gm_alloc_ops gm_alloc_rmm_pool = {
    .version = GM_ALLOC_VERSION,
    .free_is_local = 1, /* free() touches only the model's state; destroy() frees all */
    .name = "rmm-pool",
    .summary = "RAPIDS RMM pool_memory_resource (coalescing best fit, per-stream free lists)",
    .create = rp_create,
    .destroy = rp_destroy,
    .malloc = rp_malloc,
    .free = rp_free,
    .largest_free = rp_largest_free,
    .restore = rp_restore,
    .segments = rp_segments,
    .release = rp_release,
    .empty_cache = rp_empty_cache,
    .block_size = rp_block_size,
    .segment_size = rp_segment_size,
    .block_addr = rp_block_addr,
};
