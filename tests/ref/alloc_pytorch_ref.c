/*
 * tests/ref/alloc_pytorch_ref.c - the reference for tests/test_alloc_diff.c:
 * sim/alloc_pytorch.c as it was at be4cb52, before its free blocks moved
 * from one red-black tree per pool, ordered by (stream, size, address) like
 * PyTorch's std::set, to size bins (issue 12). Frozen on purpose: the
 * differential test replays the same traces through both and compares
 * every decision, so the faster index is shown to choose what this one
 * chose. Only the include paths and the ops' name differ from that file.
 * A change to the model's rules must be made here too (or this file
 * retired with the test) - the test says which event first differs.
 *
 * alloc_pytorch.c then: a model of PyTorch's CUDA caching allocator.
 *
 * Every rule below is PyTorch's, from c10/cuda/CUDACachingAllocator.cpp
 * (DeviceCachingAllocator, v2.1-2.5; names in comments are PyTorch's):
 *
 *  - round_size: requests < 512 B become 512 B; otherwise a multiple of 512 B,
 *    or, when roundup_power2_divisions applies (sizes above 512 B x N), the
 *    next of N equal divisions between two powers of two (9000 B with 4
 *    divisions -> 10240 B; 1200 B with 4 stays plain: 1536 B).
 *  - pools: rounded size <= 1 MiB (kSmallSize) uses the small pool, else the
 *    large pool. Blocks never move between pools.
 *  - get_allocation_size: small requests get a 2 MiB segment (kSmallBuffer);
 *    large ones < 10 MiB (kMinLargeAlloc) a 20 MiB segment (kLargeBuffer, or
 *    large_segment_size_mb in PyTorch 2.11);
 *    larger ones their size rounded up to 2 MiB (kRoundLarge).
 *  - get_free_block: best fit over free blocks ordered by (stream, size,
 *    address); a request < max_split_size never takes an oversize block
 *    (>= max_split_size), and an oversize request only takes a block smaller
 *    than size + max_non_split_rounding_size (default 20 MiB).
 *  - should_split: small pool, or expandable_segments configured (PyTorch
 *    tests the setting, not the segment): split when >= 512 B remain; large
 *    pool: when the request is < max_split_size and > 1 MiB remains. The
 *    request takes the low-address part.
 *  - free_block: merge with free neighbours in the same segment.
 *  - malloc retry order: free cached block; [garbage_collect_cached_blocks
 *    when a memory fraction and garbage_collection_threshold are set]; driver
 *    allocation; release_available_cached_blocks (oversize ones) + retry;
 *    release_cached_blocks (all unsplit cached) + retry; then OOM. Here the
 *    releasing steps are delegated to the release policy (policies/pytorch.c
 *    does exactly the above), so other policies can be compared.
 *  - memory fraction: an allocation fails when total reserved + the new
 *    segment would exceed fraction * device capacity (allowed_memory_maximum).
 *  - expandable_segments: one virtual range per (stream, pool) of 9/8 of
 *    the device's memory, mapped in pages of 2 MiB (small) or 20 MiB (large)
 *    on demand; releasing unmaps only whole free pages
 *    (ExpandableSegment::map/unmap, map_block/unmap_block), and a segment
 *    left with no page mapped gives its address range back
 *    (release_blocks -> release_expandable_segment).
 *  - empty_cache (emptyCache -> release_cached_blocks): every whole free
 *    segment of the large pool, then the small pool, goes back to the
 *    driver, and every free page of expandable segments is unmapped.
 *  - CUDA-graph / MemPool private pools (segment_pool_id other than (0, 0)):
 *    kept as the initial state recorded them, in pools of their own that no
 *    ordinary allocation searches (get_pool returns them only during a
 *    capture); empty_cache leaves them alone, as PyTorch does while the
 *    graph is alive (release_cached_blocks frees only pools whose use_count
 *    is 0, which a snapshot does not record). Policies do not see them.
 *
 * Not modelled: allocations during a graph capture, cross-stream
 * record_stream events (the trace's free is at free_completed), the
 * cudaMallocAsync backend (rejected with a message).
 */
#include <stdlib.h>
#include <string.h>

/* libbsd's red-black tree (header only); its static generator marks the
 * functions __unused, which glibc's headers do not define. */
#ifndef __unused
#define __unused __attribute__((unused))
#endif
#include <bsd/sys/tree.h>

#include "sim/alloc.h"
#include "sim/policy.h"
#include "traces/alloc_conf.h"

/* PyTorch's names for its constants (traces/alloc_conf.h). */
#define kMinBlockSize GM_PT_MIN_BLOCK_SIZE
#define kSmallSize GM_PT_SMALL_SIZE
#define kSmallBuffer GM_PT_SMALL_BUFFER

typedef struct pt_block pt_block;
typedef struct pt_segment pt_segment;
typedef struct pt_pool pt_pool;

struct pt_block {
    RB_ENTRY(pt_block) node; /* in pool->blocks (free, mapped) or pool->unmapped */
    uint64_t ptr, size, requested, stream;
    pt_block *prev, *next; /* address-ordered neighbours in the segment */
    pt_segment *seg;
    uint64_t gc_base; /* pool lookup count when it entered the pool (GC age) */
    uint8_t allocated, mapped, category;
};

struct pt_segment {
    uint64_t base, size, stream; /* driver range (expandable: whole VA range) */
    uint8_t small, expandable;
    uint8_t priv;          /* a private pool's: outside the default pools and the policy view */
    uint64_t mapped_bytes; /* expandable: bytes of mapped pages; else size */
    uint64_t page_size;    /* expandable: mapping granularity */
    pt_block *first;       /* lowest-address block */
    uint32_t n_blocks, n_alloc;
    uint64_t alloc_bytes, last_use_ns;
    uint32_t cat_mask;
    pt_segment *lprev, *lnext; /* all segments of the allocator */
};

RB_HEAD(pt_size_tree, pt_block);
RB_HEAD(pt_addr_tree, pt_block);

struct pt_pool {
    struct pt_size_tree blocks;   /* free mapped blocks, by (stream, size, ptr) */
    struct pt_addr_tree unmapped; /* unmapped expandable ranges, by (stream, ptr) */
    int small;
    uint64_t lookups; /* get_free_blocks_call_count (GC ages) */
};

static int cmp_size(const pt_block *a, const pt_block *b)
{
    if (a->stream != b->stream) return a->stream < b->stream ? -1 : 1;
    if (a->size != b->size) return a->size < b->size ? -1 : 1;
    if (a->ptr != b->ptr) return a->ptr < b->ptr ? -1 : 1;
    return 0;
}

static int cmp_addr(const pt_block *a, const pt_block *b)
{
    if (a->stream != b->stream) return a->stream < b->stream ? -1 : 1;
    if (a->ptr != b->ptr) return a->ptr < b->ptr ? -1 : 1;
    return 0;
}

RB_GENERATE_STATIC(pt_size_tree, pt_block, node, cmp_size)
RB_GENERATE_STATIC(pt_addr_tree, pt_block, node, cmp_addr)

typedef struct pt_state {
    gm_pt_conf conf;
    pt_pool small, large;
    pt_pool priv_small, priv_large; /* private pools' blocks: never searched */
    pt_segment *segs;               /* list head */
    uint32_t n_segs;
    pt_block *spare; /* free list of block structs */
} pt_state;

/* ---------------- sizes ---------------- */

/* CUDAAllocatorConfig::roundup_power2_divisions: intervals start at 1 MiB. */
static uint64_t divisions_for(const gm_pt_conf *c, uint64_t size)
{
    int log_size = 63 - __builtin_clzll(size);
    int idx = log_size - 20;
    if (idx < 0) idx = 0;
    if (idx > GM_PT_ROUNDUP_INTERVALS - 1) idx = GM_PT_ROUNDUP_INTERVALS - 1;
    return c->roundup_divisions[idx];
}

/* roundup_power2_next_division */
static uint64_t next_division(uint64_t size, uint64_t divisions)
{
    if ((size & (size - 1)) == 0) return size;
    uint64_t floor2 = 1ull << (63 - __builtin_clzll(size));
    uint64_t step = floor2 >> (63 - __builtin_clzll(divisions));
    if (step == 0) return floor2 << 1;
    uint64_t lo = size & ~(step - 1);
    return lo == size ? size : lo + step;
}

static uint64_t round_size(const gm_pt_conf *c, uint64_t size)
{
    if (size < kMinBlockSize) return kMinBlockSize;
    uint64_t div = divisions_for(c, size);
    if (div > 1 && size > kMinBlockSize * div) return next_division(size, div);
    return kMinBlockSize * ((size + kMinBlockSize - 1) / kMinBlockSize);
}

static uint64_t allocation_size(const pt_state *s, uint64_t size)
{
    return gm_pt_allocation_size(size, s->conf.large_segment_size);
}

/* ---------------- blocks and segments ---------------- */

static pt_block *block_new(pt_state *s)
{
    pt_block *b = s->spare;
    if (b)
        s->spare = b->next;
    else
        b = malloc(sizeof *b);
    if (b) memset(b, 0, sizeof *b);
    return b;
}

static void block_put(pt_state *s, pt_block *b)
{
    b->next = s->spare;
    s->spare = b;
}

static pt_pool *pool_of(pt_state *s, const pt_segment *seg)
{
    if (seg->priv) return seg->small ? &s->priv_small : &s->priv_large;
    return seg->small ? &s->small : &s->large;
}

static void pool_insert(pt_pool *p, pt_block *b)
{
    b->gc_base = p->lookups;
    if (b->mapped)
        pt_size_tree_RB_INSERT(&p->blocks, b);
    else
        pt_addr_tree_RB_INSERT(&p->unmapped, b);
}

static void pool_remove(pt_pool *p, pt_block *b)
{
    if (b->mapped)
        pt_size_tree_RB_REMOVE(&p->blocks, b);
    else
        pt_addr_tree_RB_REMOVE(&p->unmapped, b);
}

static pt_segment *segment_new(pt_state *s, uint64_t base, uint64_t size, uint64_t stream,
                               int small)
{
    pt_segment *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->base = base;
    g->size = size;
    g->mapped_bytes = size;
    g->stream = stream;
    g->small = (uint8_t)small;
    g->lnext = s->segs;
    if (s->segs) s->segs->lprev = g;
    s->segs = g;
    s->n_segs++;
    return g;
}

static void segment_unlink(pt_state *s, pt_segment *g)
{
    if (g->lprev)
        g->lprev->lnext = g->lnext;
    else
        s->segs = g->lnext;
    if (g->lnext) g->lnext->lprev = g->lprev;
    s->n_segs--;
    free(g);
}

/* try_merge_blocks: absorb src into dst when src is free and alike. */
static void try_merge(pt_state *s, pt_block *dst, pt_block *src)
{
    if (!src || src->allocated || dst->mapped != src->mapped) return;
    pool_remove(pool_of(s, dst->seg), src);
    if (dst->prev == src) {
        dst->ptr = src->ptr;
        dst->prev = src->prev;
        if (dst->prev)
            dst->prev->next = dst;
        else
            dst->seg->first = dst;
    } else {
        dst->next = src->next;
        if (dst->next) dst->next->prev = dst;
    }
    dst->size += src->size;
    dst->seg->n_blocks--;
    block_put(s, src);
}

/* ---------------- driver side ---------------- */

/* alloc_block for classic segments: one cudaMalloc of alloc_size. */
static pt_block *alloc_segment(gm_alloc *a, pt_state *s, uint64_t alloc_size, uint64_t stream,
                               int small, uint64_t now)
{
    uint64_t ptr;
    if (gm_alloc_driver_malloc(a, alloc_size, stream, now, &ptr) != GM_OK) return NULL;
    pt_block *b = block_new(s);
    pt_segment *g = b ? segment_new(s, ptr, alloc_size, stream, small) : NULL;
    if (!g) {
        free(b);
        gm_alloc_driver_free(a, ptr, alloc_size, stream, now);
        return NULL;
    }
    b->ptr = ptr;
    b->size = alloc_size;
    b->stream = stream;
    b->mapped = 1;
    b->seg = g;
    g->first = b;
    g->n_blocks = 1;
    if (alloc_size > a->c.largest_segment) a->c.largest_segment = alloc_size;
    return b;
}

/* release_block: give a whole free classic segment back to the driver. */
static uint64_t release_segment(gm_alloc *a, pt_state *s, pt_segment *g, uint64_t now)
{
    pt_block *b = g->first;
    uint64_t size = g->size;
    pool_remove(pool_of(s, g), b);
    gm_alloc_driver_free(a, g->base, size, g->stream, now);
    block_put(s, b);
    segment_unlink(s, g);
    return size;
}

/* ---- expandable segments (ExpandableSegment + map_block / unmap_block) ---- */

static uint64_t page_floor(const pt_segment *g, uint64_t p)
{
    return g->base + (p - g->base) / g->page_size * g->page_size;
}

static uint64_t page_ceil(const pt_segment *g, uint64_t p)
{
    return g->base + (p - g->base + g->page_size - 1) / g->page_size * g->page_size;
}

/* Split b at offset `at` bytes; the new upper part is returned (not pooled). */
static pt_block *split_at(pt_state *s, pt_block *b, uint64_t at)
{
    pt_block *hi = block_new(s);
    if (!hi) return NULL;
    hi->ptr = b->ptr + at;
    hi->size = b->size - at;
    hi->stream = b->stream;
    hi->seg = b->seg;
    hi->mapped = b->mapped;
    hi->prev = b;
    hi->next = b->next;
    if (b->next) b->next->prev = hi;
    b->next = hi;
    b->size = at;
    b->seg->n_blocks++;
    return hi;
}

/* map_block: map the first `size` bytes (page-rounded) of unmapped block b
 * (already out of the pool). Returns the mapped block (merged with free
 * mapped neighbours, in the pool), or NULL on OOM (b back in the pool). */
static pt_block *map_block(gm_alloc *a, pt_state *s, pt_block *b, uint64_t size, uint64_t now)
{
    pt_segment *g = b->seg;
    pt_pool *p = pool_of(s, g);
    uint64_t len = page_ceil(g, b->ptr + size) - b->ptr;
    if (len > b->size) len = b->size;
    if (gm_alloc_driver_map(a, b->ptr, len, g->stream, now) != GM_OK) {
        pool_insert(p, b);
        return NULL;
    }
    g->mapped_bytes += len;
    if (len < b->size) {
        pt_block *rest = split_at(s, b, len);
        if (rest) pool_insert(p, rest);
    }
    b->mapped = 1;
    try_merge(s, b, b->prev);
    try_merge(s, b, b->next);
    pool_insert(p, b);
    return b;
}

/* unmap_block: unmap the whole pages inside free block b (in the pool).
 * Returns the bytes unmapped. */
static uint64_t unmap_block(gm_alloc *a, pt_state *s, pt_block *b, uint64_t now)
{
    pt_segment *g = b->seg;
    pt_pool *p = pool_of(s, g);
    uint64_t lo = page_ceil(g, b->ptr), hi = page_floor(g, b->ptr + b->size);
    if (lo >= hi) return 0;
    pool_remove(p, b);
    if (lo > b->ptr) { /* keep the partial page below as a free mapped block */
        pt_block *mid = split_at(s, b, lo - b->ptr);
        if (!mid) {
            pool_insert(p, b);
            return 0;
        }
        pool_insert(p, b);
        b = mid;
    }
    if (hi < b->ptr + b->size) {
        pt_block *above = split_at(s, b, hi - b->ptr);
        if (above)
            pool_insert(p, above);
        else
            hi = b->ptr + b->size;
    }
    gm_alloc_driver_unmap(a, b->ptr, b->size, g->stream, now);
    g->mapped_bytes -= b->size;
    uint64_t n = b->size;
    b->mapped = 0;
    try_merge(s, b, b->prev);
    try_merge(s, b, b->next);
    pool_insert(p, b);
    return n;
}

/* A new expandable segment: its address range (ExpandableSegment: pages for
 * 9/8 of the device's memory, at least min_va bytes), one unmapped block
 * over all of it (not pooled). */
static pt_segment *new_expandable(gm_alloc *a, pt_state *s, int small, uint64_t stream,
                                  uint64_t min_va)
{
    uint64_t page = small ? kSmallBuffer : s->conf.large_segment_size;
    uint64_t cap = a->dev->capacity_bytes;
    uint64_t va_size = (cap + cap / 8 + page - 1) / page * page, va;
    if (min_va > va_size) va_size = (min_va + page - 1) / page * page;
    if (a->dev->ops->va_reserve(a->dev, va_size, &va) != GM_OK) return NULL;
    pt_block *b = block_new(s);
    pt_segment *g = b ? segment_new(s, va, va_size, stream, small) : NULL;
    if (!g) {
        free(b);
        a->dev->ops->va_release(a->dev, va, va_size);
        return NULL;
    }
    g->expandable = 1;
    g->mapped_bytes = 0;
    g->page_size = page;
    b->ptr = va;
    b->size = va_size;
    b->stream = stream;
    b->seg = g;
    g->first = b;
    g->n_blocks = 1;
    return g;
}

/* release_expandable_segment: a segment whose pages are all unmapped (one
 * unmapped block) gives its address range back. */
static void release_expandable(gm_alloc *a, pt_state *s, pt_segment *g)
{
    pt_block *b = g->first;
    pool_remove(pool_of(s, g), b);
    a->dev->ops->va_release(a->dev, g->base, g->size);
    block_put(s, b);
    segment_unlink(s, g);
}

/* find_expandable_block: an unmapped range of this stream/pool (possibly
 * preceded by a free mapped block) with room for size; else a new segment
 * reserving 9/8 of the device's memory in address space. */
static pt_block *find_expandable(gm_alloc *a, pt_state *s, pt_pool *p, uint64_t stream,
                                 uint64_t size)
{
    pt_block key = {.stream = stream, .ptr = 0};
    for (pt_block *c = pt_addr_tree_RB_NFIND(&p->unmapped, &key); c && c->stream == stream;
         c = pt_addr_tree_RB_NEXT(c)) {
        pt_block *start = c;
        if (c->prev && !c->prev->allocated) start = c->prev;
        uint64_t room = 0;
        for (pt_block *x = start; x && !x->allocated && room < size; x = x->next)
            room += x->size;
        if (room >= size) return start;
    }
    pt_segment *g = new_expandable(a, s, p->small, stream, 0);
    if (!g) return NULL;
    pool_insert(p, g->first);
    return g->first;
}

/* try_allocate_expandable_block */
static pt_block *alloc_expandable(gm_alloc *a, pt_state *s, pt_pool *p, uint64_t stream,
                                  uint64_t size, uint64_t now)
{
    pt_block *c = find_expandable(a, s, p, stream, size);
    if (!c) return NULL;
    if (!c->mapped) {
        pool_remove(p, c);
        c = map_block(a, s, c, size < c->size ? size : c->size, now);
        if (!c) return NULL;
    }
    while (c->size < size) {
        /* invariant: c is free and mapped, c->next is unmapped; map_block
         * maps part of it and absorbs c, so the mapped result is the new c */
        pt_block *n = c->next;
        uint64_t need = size - c->size;
        pool_remove(p, n);
        c = map_block(a, s, n, need < n->size ? need : n->size, now);
        if (!c) return NULL;
    }
    pool_remove(p, c);
    return c;
}

/* ---------------- the allocator ---------------- */

static int gc_enabled(const gm_alloc *a, const pt_state *s)
{
    return a->limits.memory_limit && s->conf.gc_threshold > 0;
}

/* get_free_block */
static pt_block *get_free_block(gm_alloc *a, pt_state *s, pt_pool *p, uint64_t size,
                                uint64_t stream)
{
    const gm_pt_conf *c = &s->conf;
    if (gc_enabled(a, s)) p->lookups++;
    pt_block key = {.stream = stream, .size = size, .ptr = 0};
    pt_block *b = pt_size_tree_RB_NFIND(&p->blocks, &key);
    if (!b || b->stream != stream) return NULL;
    if (b->seg->expandable) {
        /* best fit counts what a block can grow into: its size plus an
         * unmapped range right after it */
        pt_block *n = pt_size_tree_RB_NEXT(b);
#define EXP_SIZE(x) ((x)->size + ((x)->next && !(x)->next->mapped ? (x)->next->size : 0))
        while (b->seg->expandable && n && n->stream == stream && EXP_SIZE(n) < EXP_SIZE(b)) {
            b = n;
            n = pt_size_tree_RB_NEXT(n);
        }
#undef EXP_SIZE
    }
    if (size < c->max_split_size && b->size >= c->max_split_size)
        return NULL; /* do not hand an oversize block to a small request */
    if (size >= c->max_split_size && b->size >= size + c->max_non_split_rounding_size)
        return NULL; /* oversize requests may round up only a little */
    pt_size_tree_RB_REMOVE(&p->blocks, b);
    return b;
}

static int should_split(const pt_state *s, const pt_block *b, uint64_t size)
{
    uint64_t remaining = b->size - size;
    if (b->seg->small || s->conf.expandable_segments) return remaining >= kMinBlockSize;
    return size < s->conf.max_split_size && remaining > kSmallSize;
}

/* alloc_block: ask the driver (or map pages), respecting the memory fraction. */
static pt_block *grow(gm_alloc *a, pt_state *s, pt_pool *p, uint64_t size, uint64_t alloc_size,
                      uint64_t stream, uint64_t now)
{
    if (a->limits.memory_limit && a->c.reserved_bytes + alloc_size > a->limits.memory_limit)
        return NULL;
    if (s->conf.expandable_segments) return alloc_expandable(a, s, p, stream, size, now);
    return alloc_segment(a, s, alloc_size, stream, p->small, now);
}

static int pt_malloc(gm_alloc *a, uint64_t req, uint64_t stream, uint8_t cat, uint64_t now,
                     uint64_t *handle)
{
    pt_state *s = a->impl;
    uint64_t size = round_size(&s->conf, req);
    int small = size <= kSmallSize;
    pt_pool *p = small ? &s->small : &s->large;
    pt_block *b = get_free_block(a, s, p, size, stream);
    if (!b) {
        gm_pressure pr = {.size = size,
                          .alloc_size = allocation_size(s, size),
                          .stream = stream,
                          .small_pool = small,
                          .now_ns = now};
        const gm_policy_ops *po = a->policy->ops;
        if (po->before_grow) po->before_grow(a->policy->state, a, &pr);
        b = grow(a, s, p, size, pr.alloc_size, stream, now);
        while (!b) {
            uint64_t flushes = a->c.n_cache_flushes;
            int r = po->on_alloc_fail(a->policy->state, a, &pr);
            if (r == GM_POLICY_GIVE_UP) return GM_EOOM;
            pr.attempt++;
            if (r == GM_POLICY_RETRY) {
                a->c.grow_retries++;
                if (a->c.n_cache_flushes != flushes) a->c.num_alloc_retries++;
                b = grow(a, s, p, size, pr.alloc_size, stream, now);
            }
        }
    }
    /* alloc_found_block */
    if (should_split(s, b, size)) {
        pt_block *rest = split_at(s, b, size);
        if (!rest) return GM_EOOM;
        pool_insert(p, rest);
    }
    b->allocated = 1;
    b->requested = req;
    b->category = cat;
    pt_segment *g = b->seg;
    g->n_alloc++;
    g->alloc_bytes += b->size;
    g->last_use_ns = now;
    g->cat_mask |= 1u << cat;
    a->c.requested_bytes += req;
    a->c.allocated_bytes += b->size;
    *handle = (uint64_t)(uintptr_t)b;
    return GM_OK;
}

static void pt_free(gm_alloc *a, uint64_t handle, uint64_t now)
{
    pt_state *s = a->impl;
    pt_block *b = (pt_block *)(uintptr_t)handle;
    pt_segment *g = b->seg;
    a->c.requested_bytes -= b->requested;
    a->c.allocated_bytes -= b->size;
    g->n_alloc--;
    g->alloc_bytes -= b->size;
    g->last_use_ns = now;
    b->allocated = 0;
    b->requested = 0;
    try_merge(s, b, b->prev);
    try_merge(s, b, b->next);
    pool_insert(pool_of(s, g), b);
}

static uint64_t largest_in(const struct pt_size_tree *t)
{
    uint64_t best = 0;
    pt_block *m = pt_size_tree_RB_MINMAX((struct pt_size_tree *)t, RB_INF);
    if (!m) return 0;
    pt_block *lo = pt_size_tree_RB_MINMAX((struct pt_size_tree *)t, RB_NEGINF);
    if (lo->stream == m->stream) /* one stream: the maximum is the last block */
        return m->size;
    RB_FOREACH(m, pt_size_tree, (struct pt_size_tree *)t)
    if (m->size > best) best = m->size;
    return best;
}

static uint64_t pt_largest_free(gm_alloc *a)
{
    pt_state *s = a->impl;
    uint64_t x = largest_in(&s->small.blocks), y = largest_in(&s->large.blocks);
    return x > y ? x : y;
}

/* ---------------- policy view ---------------- */

static void seg_info(const pt_state *s, const pt_segment *g, gm_seg_info *o)
{
    memset(o, 0, sizeof *o);
    o->id = (uint64_t)(uintptr_t)g;
    o->addr = g->base;
    o->size = g->expandable ? g->mapped_bytes : g->size;
    o->stream = g->stream;
    o->small_pool = g->small;
    o->expandable = g->expandable;
    o->n_blocks = g->n_blocks;
    o->n_allocated = g->n_alloc;
    o->allocated_bytes = g->alloc_bytes;
    o->last_use_ns = g->last_use_ns;
    o->category_mask = g->cat_mask;
    for (const pt_block *b = g->first; b; b = b->next) {
        if (b->allocated || !b->mapped) continue;
        if (b->size > o->largest_free) o->largest_free = b->size;
        if (g->expandable) {
            uint64_t lo = page_ceil(g, b->ptr), hi = page_floor(g, b->ptr + b->size);
            if (hi > lo) o->releasable += hi - lo;
        }
    }
    if (!g->expandable && g->n_alloc == 0 && g->n_blocks == 1) {
        const pt_pool *p = g->small ? &s->small : &s->large;
        o->releasable = g->size;
        o->gc_age = p->lookups - g->first->gc_base;
    }
}

static size_t pt_segments(gm_alloc *a, gm_seg_info *buf, size_t cap)
{
    pt_state *s = a->impl;
    size_t i = 0;
    for (const pt_segment *g = s->segs; g; g = g->lnext) {
        if (g->priv) continue; /* a captured graph's memory: not the policy's to give back */
        if (i < cap) seg_info(s, g, &buf[i]);
        i++;
    }
    return i;
}

static uint64_t pt_release(gm_alloc *a, uint64_t id, uint64_t now)
{
    pt_state *s = a->impl;
    pt_segment *g = (pt_segment *)(uintptr_t)id;
    uint64_t n = 0;
    if (!g->expandable) {
        if (g->n_alloc == 0 && g->n_blocks == 1) n = release_segment(a, s, g, now);
    } else {
        pt_block *b = g->first;
        while (b) {
            pt_block *next = b->next;
            if (!b->allocated && b->mapped) {
                n += unmap_block(a, s, b, now);
                next = b->next; /* b may have merged with its neighbours */
            }
            b = next;
        }
        if (g->n_blocks == 1 && !g->first->mapped) release_expandable(a, s, g);
    }
    a->c.released_bytes += n;
    return n;
}

static uint64_t pt_empty_cache(gm_alloc *a, uint64_t now)
{
    pt_state *s = a->impl;
    uint64_t n = 0;
    for (int small = 0; small <= 1; small++) { /* release_cached_blocks: large pool first */
        pt_segment *g = s->segs;
        while (g) {
            pt_segment *next = g->lnext;
            if (!g->priv && g->small == small) n += pt_release(a, (uint64_t)(uintptr_t)g, now);
            g = next;
        }
    }
    return n;
}

static uint64_t pt_block_size(gm_alloc *a, uint64_t size)
{
    pt_state *s = a->impl;
    return round_size(&s->conf, size);
}

/* ---------------- initial state ---------------- */

/* Restore order: by address; at one address a segment before its mapped
 * ranges before the block that starts it. */
static int kind_rank(int kind)
{
    return kind == GM_INIT_SEGMENT ? 0 : kind == GM_INIT_MAPPED ? 1 : 2;
}

static int cmp_rows(const void *x, const void *y)
{
    const gm_init_row *a = *(const gm_init_row *const *)x, *b = *(const gm_init_row *const *)y;
    if (a->addr != b->addr) return a->addr < b->addr ? -1 : 1;
    return kind_rank(a->kind) - kind_rank(b->kind);
}

/* A recorded segment and the model segment rebuilt for it. */
typedef struct rseg {
    uint64_t addr, size; /* recorded range (expandable: address range) */
    pt_segment *g;
    pt_block *cursor; /* carving goes up the address range: the block to look at next
                         (NULL: the first; mapping may merge blocks, so it resets it) */
} rseg;

static int row_small(const gm_init_row *r)
{
    if (r->pool != GM_POOL_UNKNOWN) return r->pool == GM_POOL_SMALL;
    return r->size <= kSmallBuffer; /* version 1: kSmallBuffer segments are the small pool's */
}

/* Map the recorded range [off, off + len) of expandable segment g: the
 * unmapped block containing it is its last one so far (ranges come in
 * address order). */
static int restore_mapped(gm_alloc *a, pt_state *s, pt_segment *g, uint64_t off, uint64_t len)
{
    pt_block *b = g->first;
    while (b->next)
        b = b->next;
    uint64_t at = g->base + off;
    if (b->mapped || at < b->ptr || at + len > b->ptr + b->size) return GM_EINVAL;
    pt_pool *p = pool_of(s, g);
    pool_remove(p, b);
    if (at > b->ptr) {
        pt_block *hi = split_at(s, b, at - b->ptr);
        if (!hi) return GM_ENOMEM;
        pool_insert(p, b);
        b = hi;
    }
    return map_block(a, s, b, len, 0) ? GM_OK : GM_EOOM;
}

static int restore_segment(gm_alloc *a, pt_state *s, const gm_init_row *r, rseg *out)
{
    int small = row_small(r);
    pt_segment *g;
    if (r->expandable) {
        g = new_expandable(a, s, small, r->stream, r->size);
        if (!g) return GM_EOOM;
    } else {
        pt_block *b = alloc_segment(a, s, r->size, r->stream, small, 0);
        if (!b) return GM_EOOM;
        g = b->seg;
    }
    g->priv = r->pool_id0 || r->pool_id1;
    pool_insert(pool_of(s, g), g->first);
    *out = (rseg){.addr = r->addr, .size = r->size, .g = g, .cursor = NULL};
    return GM_OK;
}

/* Carve the live block of row r out of the free mapped block at its
 * recorded offset in segment rs. */
static int carve(gm_alloc *a, pt_state *s, rseg *rs, const gm_init_row *r, uint64_t *handle)
{
    pt_segment *g = rs->g;
    uint64_t at = g->base + (r->addr - rs->addr);
    uint64_t bsize = r->block_size ? r->block_size : round_size(&s->conf, r->size);
    pt_block *b = rs->cursor ? rs->cursor : g->first;
    while (b && b->ptr + b->size <= at)
        b = b->next;
    if (!b || b->allocated || !b->mapped || at < b->ptr || at + bsize > b->ptr + b->size)
        return GM_EINVAL;
    pt_pool *p = pool_of(s, g);
    pool_remove(p, b);
    if (at > b->ptr) {
        pt_block *hi = split_at(s, b, at - b->ptr);
        if (!hi) return GM_ENOMEM;
        pool_insert(p, b);
        b = hi;
    }
    if (b->size > bsize) {
        pt_block *rest = split_at(s, b, bsize);
        if (!rest) return GM_ENOMEM;
        pool_insert(p, rest);
    }
    b->allocated = 1;
    b->requested = r->size;
    b->category = r->category;
    g->n_alloc++;
    g->alloc_bytes += b->size;
    g->cat_mask |= 1u << r->category;
    a->c.requested_bytes += r->size;
    a->c.allocated_bytes += b->size;
    rs->cursor = b;
    *handle = (uint64_t)(uintptr_t)b;
    return GM_OK;
}

static int restore_err(gm_err *err, int rc, const gm_init_row *r, const char *what)
{
    if (rc == GM_ENOMEM) return gm_errf(err, rc, "out of memory restoring the initial state");
    if (rc == GM_EOOM)
        return gm_errf(err, rc,
                       "initial state: the %s of %llu bytes at 0x%llx does not fit on the device; "
                       "give a larger --capacity",
                       what, (unsigned long long)r->size, (unsigned long long)r->addr);
    return gm_errf(err, GM_EINVAL,
                   "initial state: the %s at 0x%llx (%llu bytes) overlaps another block, lies "
                   "outside its segment or in unmapped memory; re-import the trace",
                   what, (unsigned long long)r->addr, (unsigned long long)r->size);
}

/* Rebuild segments (as driver allocations; expandable ones as an address
 * range with their mapped pages) and carve the live blocks out of them at
 * their recorded offsets; gaps become free blocks. Blocks that no recorded
 * segment holds (an RMM log's, or every block under --initial-state live)
 * are allocated through the model, in address order, as if the process had
 * allocated them before the trace began. */
static int pt_restore(gm_alloc *a, const gm_init_row *rows, size_t n, uint64_t *handles,
                      gm_err *err)
{
    pt_state *s = a->impl;
    const gm_init_row **ord = malloc((n ? n : 1) * sizeof *ord);
    rseg *segs = malloc((n ? n : 1) * sizeof *segs);
    if (!ord || !segs) {
        free(ord);
        free(segs);
        return gm_errf(err, GM_ENOMEM, "out of memory restoring the initial state");
    }
    for (size_t i = 0; i < n; i++) {
        ord[i] = &rows[i];
        handles[i] = 0;
    }
    qsort(ord, n, sizeof *ord, cmp_rows);
    size_t nseg = 0, nloose = 0;
    rseg *cur = NULL; /* the last segment whose range starts at or below the row */
    int rc = GM_OK;
    for (size_t i = 0; i < n && rc == GM_OK; i++) {
        const gm_init_row *r = ord[i];
        if (r->kind == GM_INIT_SEGMENT) {
            rc = restore_segment(a, s, r, &segs[nseg]);
            if (rc) rc = restore_err(err, rc, r, r->expandable ? "expandable segment" : "segment");
            cur = &segs[nseg++];
            continue;
        }
        int inside = cur && r->addr >= cur->addr && r->addr < cur->addr + cur->size;
        if (r->kind == GM_INIT_MAPPED) {
            rc = inside && cur->g->expandable
                     ? restore_mapped(a, s, cur->g, r->addr - cur->addr, r->size)
                     : GM_EINVAL;
            if (cur) cur->cursor = NULL;
            if (rc) rc = restore_err(err, rc, r, "mapped range");
            continue;
        }
        if (!inside) {
            ord[nloose++] = r; /* (ord[0..i) is consumed: reuse it) */
            continue;
        }
        rc = carve(a, s, cur, r, &handles[r - rows]);
        if (rc) rc = restore_err(err, rc, r, "live block");
    }
    for (size_t i = 0; i < nloose && rc == GM_OK; i++) {
        const gm_init_row *r = ord[i];
        if (pt_malloc(a, r->size, r->stream, r->category, 0, &handles[r - rows]) != GM_OK)
            rc = gm_errf(err, GM_EOOM,
                         "initial state: live block of %llu bytes does not fit on the device; "
                         "give a larger --capacity",
                         (unsigned long long)r->size);
    }
    free(segs);
    free(ord);
    return rc;
}

/* ---------------- lifecycle ---------------- */

static int pt_create(gm_alloc *a, const char *conf, gm_err *err)
{
    pt_state *s = calloc(1, sizeof *s);
    if (!s) return gm_errf(err, GM_ENOMEM, "out of memory");
    int rc = gm_pt_conf_parse_for(conf, a->torch_version, &s->conf, err);
    if (rc != GM_OK) {
        free(s);
        return rc;
    }
    if (s->conf.backend_async) {
        free(s);
        return gm_errf(err, GM_EINVAL,
                       "alloc conf '%s': backend:cudaMallocAsync is not modelled yet; use "
                       "--allocator direct for one driver allocation per tensor",
                       conf);
    }
    RB_INIT(&s->small.blocks);
    RB_INIT(&s->small.unmapped);
    RB_INIT(&s->large.blocks);
    RB_INIT(&s->large.unmapped);
    RB_INIT(&s->priv_small.blocks);
    RB_INIT(&s->priv_small.unmapped);
    RB_INIT(&s->priv_large.blocks);
    RB_INIT(&s->priv_large.unmapped);
    s->small.small = 1;
    s->priv_small.small = 1;
    a->limits.max_split_size = s->conf.max_split_size;
    a->limits.gc_threshold = s->conf.gc_threshold;
    /* per_process_memory_fraction (2.10 on): the constructor's
     * setMemoryFraction; a later set_per_process_memory_fraction (the
     * run's --memory-fraction) wins */
    if (s->conf.memory_fraction > 0 && !a->limits.memory_limit)
        a->limits.memory_limit =
            (uint64_t)(s->conf.memory_fraction * (double)a->dev->capacity_bytes);
    a->impl = s;
    return GM_OK;
}

static void pt_destroy(gm_alloc *a)
{
    pt_state *s = a->impl;
    if (!s) return;
    pt_segment *g = s->segs;
    while (g) { /* give every segment back, then free the structs */
        pt_segment *next = g->lnext;
        pt_block *b = g->first;
        uint64_t dummy;
        if (g->expandable) {
            if (g->mapped_bytes) /* mapped pages, as one range: the device counts bytes */
                a->dev->ops->mem_unmap(a->dev, g->base, g->mapped_bytes, &dummy);
            a->dev->ops->va_release(a->dev, g->base, g->size);
        } else {
            a->dev->ops->mem_free(a->dev, g->base, g->size, &dummy);
        }
        b = g->first;
        while (b) {
            pt_block *bn = b->next;
            free(b);
            b = bn;
        }
        free(g);
        g = next;
    }
    pt_block *b = s->spare;
    while (b) {
        pt_block *bn = b->next;
        free(b);
        b = bn;
    }
    free(s);
    a->impl = NULL;
}

static uint64_t pt_segment_size(gm_alloc *a, uint64_t size, int *small_pool)
{
    pt_state *s = a->impl;
    uint64_t block = round_size(&s->conf, size);
    *small_pool = block <= kSmallSize;
    return allocation_size(s, block);
}

static uint64_t pt_block_addr(gm_alloc *a, uint64_t handle)
{
    (void)a;
    return ((const pt_block *)(uintptr_t)handle)->ptr;
}

static uint64_t pt_block_bytes(gm_alloc *a, uint64_t handle)
{
    (void)a;
    return ((const pt_block *)(uintptr_t)handle)->size;
}

const gm_alloc_ops gm_alloc_pytorch_ref;
const gm_alloc_ops gm_alloc_pytorch_ref = {
    .version = GM_ALLOC_VERSION,
    .name = "pytorch-ref",
    .summary = "PyTorch's CUDA caching allocator (native backend)",
    .create = pt_create,
    .destroy = pt_destroy,
    .malloc = pt_malloc,
    .free = pt_free,
    .largest_free = pt_largest_free,
    .restore = pt_restore,
    .segments = pt_segments,
    .release = pt_release,
    .empty_cache = pt_empty_cache,
    .block_size = pt_block_size,
    .segment_size = pt_segment_size,
    .block_addr = pt_block_addr,
    .block_bytes = pt_block_bytes,
};
