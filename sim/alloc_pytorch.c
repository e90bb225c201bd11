/*
 * alloc_pytorch.c - a model of PyTorch's CUDA caching allocator.
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
 * record_stream events (the trace's free is at free_completed). The
 * cudaMallocAsync backend is another model, sim/alloc_cuda_async.c, which
 * the engine picks when the settings say backend:cudaMallocAsync.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* libbsd's red-black tree (header only); its static generator marks the
 * functions __unused, which glibc's headers do not define. */
#ifndef __unused
#define __unused __attribute__((unused))
#endif
#include <bsd/sys/tree.h>

#include "alloc.h"
#include "policy.h"
#include "base/addrmap.h"
#include "traces/alloc_conf.h"

/* PyTorch's names for its constants (traces/alloc_conf.h). */
#define kMinBlockSize GM_PT_MIN_BLOCK_SIZE
#define kSmallSize GM_PT_SMALL_SIZE
#define kSmallBuffer GM_PT_SMALL_BUFFER

typedef struct pt_block pt_block;
typedef struct pt_segment pt_segment;
#define LF_K 4 /* free-block sizes a segment keeps for its largest_free */
typedef struct pt_pool pt_pool;
typedef struct pt_index pt_index;

struct pt_block {
    uint64_t ptr, size;
    pt_block *prev, *next; /* address-ordered neighbours in the segment */
    pt_segment *seg;
    RB_ENTRY(pt_block) node; /* in its bin's tree (free, mapped) or pool->unmapped */
    uint64_t requested, stream;
    uint64_t gc_base; /* pool lookup count when it entered the pool (GC age) */
    uint8_t allocated, mapped, category;
    uint8_t let_go; /* a free_requested was seen: PyTorch's free() ran, free_block not yet */
    uint16_t bin;   /* its size bin while in a free-block index (bin_of(size)) */
};

struct pt_segment {
    /* first, in one 64-byte line (segments are 64-byte aligned): what a
     * malloc or free of one of its blocks and the walk of the whole free
     * ones (the policies' ticks) touch */
    uint64_t base, size;       /* driver range (expandable: whole VA range) */
    uint64_t last_use_ns;      /* last malloc/free of a block in it */
    pt_segment *fprev, *fnext; /* pt_state.free_segs */
    pt_index *idx;             /* the free-block index of its pool and stream */
    uint32_t n_blocks, n_alloc;
    uint8_t small, expandable;
    uint8_t priv;       /* a private pool's: outside the default pools and the policy view */
    uint8_t whole_free; /* in pt_state.free_segs */
    /* its policy view (seg_info, below) is kept until a block of the
     * segment changes (view_stale; the GC age is filled in each time) */
    uint8_t view_stale;
    /* the sizes of a classic segment's largest free blocks, for its view's
     * largest_free (policies read views on every timer tick): while
     * lf_valid, lf[0..lf_n) are the lf_n largest (a multiset; every free
     * block when lf_all), kept as blocks enter and leave the free-block
     * index (lf_add, lf_del). When the last one leaves and others may
     * remain, lf_valid clears and the next view walks the blocks. */
    uint8_t lf_n, lf_all, lf_valid;
    uint64_t alloc_bytes;
    uint32_t cat_mask;
    uint8_t classed; /* counted in pt_state.cls (a classic segment of the policy view) */
    uint32_t cls_id; /* while classed: its class's record, pt_state.rec */
    uint32_t fb_at;  /* its brief's place in pt_state.fb + 1 (0: none) */
    pt_block *first; /* lowest-address block */
    uint64_t stream;
    uint64_t mapped_bytes; /* expandable: bytes of mapped pages; else size */
    uint64_t page_size;    /* expandable: mapping granularity */
    uint64_t lf[LF_K];
    gm_seg_info view;
    size_t arr_idx;            /* in pt_state.arr */
    pt_segment *lprev, *lnext; /* all segments of the allocator, newest first */
};
_Static_assert(offsetof(pt_segment, view_stale) < 64 && offsetof(pt_segment, lf_valid) < 64,
               "a block's malloc and free touch one line of its segment");

/*
 * The free-block index. PyTorch keeps a pool's free blocks in one std::set
 * ordered by (stream, size, address) and takes the first block not below
 * (stream, size, 0): the best fit, the lowest address among equal sizes
 * (BlockComparatorSize, get_free_block). Here each (pool, stream) has an
 * index of its own, whose blocks are filed in size bins: below 32 KiB one
 * bin per 512 B, above 64 bins per power of two (TLSF's two-level split).
 * Bins hold disjoint, increasing size ranges, so the first block >= (size,
 * 0) is the first such block of the request's own bin, or else the
 * smallest block of the next non-empty bin, which two bitmap levels find
 * in a few instructions. Inside a bin the blocks are a red-black tree by
 * (size, address), with its minimum kept at hand; bins are narrow, so the
 * trees are small (most hold one block) and a lookup rarely descends one.
 * The order and therefore every choice is the same as PyTorch's std::set
 * (tests/test_alloc_diff.c replays random traces and every snapshot through
 * this and the tree the model used before, comparing every decision).
 */
#define BIN_SUB 6   /* sub-bins per power of two: 2^BIN_SUB */
#define BIN_SHIFT 9 /* sizes in 512 B units (kMinBlockSize)  */
#define NBINS ((64 - BIN_SHIFT - BIN_SUB + 1) << BIN_SUB) /* 3200: any 64-bit size */
#define NWORDS ((NBINS + 63) / 64)
_Static_assert(NBINS <= 65536, "pt_block.bin holds a bin index");

RB_HEAD(pt_bin_tree, pt_block);

typedef struct pt_bin {
    struct pt_bin_tree t; /* by (size, ptr) */
    pt_block *min, *max;  /* its first and last blocks; min NULL: the bin is empty */
} pt_bin;

struct pt_index {
    uint64_t stream;
    uint64_t top;         /* bit w: map[w] != 0 */
    uint64_t map[NWORDS]; /* bit i of map[w]: bin 64 w + i is not empty */
    pt_bin bin[NBINS];
};

RB_HEAD(pt_addr_tree, pt_block);

struct pt_pool {
    pt_index **idx; /* one per stream that has had a segment here */
    size_t n_idx, cap_idx;
    pt_index *last;               /* the index malloc used last (one stream is common) */
    struct pt_addr_tree unmapped; /* unmapped expandable ranges, by (stream, ptr) */
    int small;
    uint64_t lookups; /* get_free_blocks_call_count (GC ages) */
};

static int cmp_bin(const pt_block *a, const pt_block *b)
{
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

RB_GENERATE_STATIC(pt_bin_tree, pt_block, node, cmp_bin)
RB_GENERATE_STATIC(pt_addr_tree, pt_block, node, cmp_addr)

static inline size_t bin_of(uint64_t size)
{
    uint64_t u = size >> BIN_SHIFT;
    if (u < (1u << BIN_SUB)) return (size_t)u;
    int fl = 63 - __builtin_clzll(u);
    return ((size_t)(fl - BIN_SUB + 1) << BIN_SUB) |
           (size_t)((u >> (fl - BIN_SUB)) & ((1u << BIN_SUB) - 1));
}

/* The first non-empty bin at or above `from`; NBINS if none. */
static inline size_t next_bin(const pt_index *x, size_t from)
{
    if (from >= NBINS) return NBINS;
    size_t w = from >> 6;
    uint64_t bits = x->map[w] & (~0ull << (from & 63));
    if (bits) return (w << 6) | (size_t)__builtin_ctzll(bits);
    uint64_t up = w + 1 < 64 ? x->top & (~0ull << (w + 1)) : 0;
    if (!up) return NBINS;
    w = (size_t)__builtin_ctzll(up);
    return (w << 6) | (size_t)__builtin_ctzll(x->map[w]);
}

/* A free block of `size` entered g (see pt_segment.lf). */
__attribute__((noinline)) static void lf_add(pt_segment *g, uint64_t size)
{
    size_t m = 0; /* the smallest kept */
    for (size_t i = 1; i < g->lf_n; i++)
        if (g->lf[i] < g->lf[m]) m = i;
    if (g->lf_n < LF_K && (g->lf_all || size >= g->lf[m])) {
        g->lf[g->lf_n++] = size; /* still the largest lf_n + 1 */
        return;
    }
    if (g->lf_n < LF_K) return; /* below the largest kept, none missing above */
    if (size > g->lf[m]) g->lf[m] = size;
    g->lf_all = 0; /* one left out: the smaller of the two */
}

/* A free block of `size` left g. */
__attribute__((noinline)) static void lf_del(pt_segment *g, uint64_t size)
{
    for (size_t i = 0; i < g->lf_n; i++)
        if (g->lf[i] == size) {
            g->lf[i] = g->lf[--g->lf_n];
            if (!g->lf_n && !g->lf_all) g->lf_valid = 0; /* the rest are unknown */
            return;
        }
    /* not kept: smaller than every kept one, unless they were all */
    if (g->lf_all) g->lf_valid = 0;
}

static inline void index_insert(pt_index *x, pt_block *b)
{
    if (b->seg->lf_valid) lf_add(b->seg, b->size);
    size_t i = bin_of(b->size);
    b->bin = (uint16_t)i; /* its size does not change while it is filed */
    pt_bin *bn = &x->bin[i];
    if (!bn->min) { /* an empty bin: the block is its tree */
        RB_SET(b, NULL, node);
        RB_COLOR(b, node) = RB_BLACK;
        RB_ROOT(&bn->t) = b;
        bn->min = bn->max = b;
        x->map[i >> 6] |= 1ull << (i & 63);
        x->top |= 1ull << (i >> 6);
        return;
    }
    /* A new first or last block hangs below the old one (which has no
     * child on that side), then the tree is rebalanced: no walk down from
     * the root, which in a bin of a million blocks is ~20 cold nodes
     * (frees in address order, or in reverse, file each block at an end). */
    if (cmp_bin(b, bn->min) < 0) {
        RB_SET(b, bn->min, node);
        RB_LEFT(bn->min, node) = b;
        bn->min = b;
    } else if (cmp_bin(b, bn->max) > 0) {
        RB_SET(b, bn->max, node);
        RB_RIGHT(bn->max, node) = b;
        bn->max = b;
    } else {
        pt_bin_tree_RB_INSERT(&bn->t, b);
        return;
    }
    pt_bin_tree_RB_INSERT_COLOR(&bn->t, b);
}

static inline void index_remove(pt_index *x, pt_block *b)
{
    if (b->seg->lf_valid) lf_del(b->seg, b->size);
    size_t i = b->bin;
    pt_bin *bn = &x->bin[i];
    if (RB_ROOT(&bn->t) == b && !RB_LEFT(b, node) && !RB_RIGHT(b, node)) { /* its only block */
        RB_ROOT(&bn->t) = NULL;
        bn->min = NULL;
        if (!(x->map[i >> 6] &= ~(1ull << (i & 63)))) x->top &= ~(1ull << (i >> 6));
        return;
    }
    if (bn->min == b) bn->min = pt_bin_tree_RB_NEXT(b);
    if (bn->max == b) bn->max = pt_bin_tree_RB_PREV(b);
    pt_bin_tree_RB_REMOVE(&bn->t, b);
}

/* The first block >= (size, 0): PyTorch's pool.blocks.lower_bound. */
static inline pt_block *index_lower_bound(const pt_index *x, uint64_t size)
{
    size_t i = bin_of(size);
    const pt_bin *bn = &x->bin[i];
    if (bn->min) {
        if (bn->min->size >= size) return bn->min;
        pt_block key = {.size = size, .ptr = 0};
        pt_block *c = pt_bin_tree_RB_NFIND((struct pt_bin_tree *)&bn->t, &key);
        if (c) return c;
    }
    i = next_bin(x, i + 1);
    return i < NBINS ? x->bin[i].min : NULL;
}

/* The block after b in (size, address) order, or NULL. */
static pt_block *index_next(const pt_index *x, pt_block *b)
{
    pt_block *n = pt_bin_tree_RB_NEXT(b);
    if (n) return n;
    size_t i = next_bin(x, (size_t)b->bin + 1);
    return i < NBINS ? x->bin[i].min : NULL;
}

/* The largest block, or 0 bytes. */
static uint64_t index_largest(const pt_index *x)
{
    if (!x->top) return 0;
    size_t w = (size_t)(63 - __builtin_clzll(x->top));
    size_t i = (w << 6) | (size_t)(63 - __builtin_clzll(x->map[w]));
    return x->bin[i].max->size;
}

static pt_index *index_find(pt_pool *p, uint64_t stream)
{
    if (p->last && p->last->stream == stream) return p->last;
    for (size_t i = 0; i < p->n_idx; i++)
        if (p->idx[i]->stream == stream) return p->last = p->idx[i];
    return NULL;
}

/* The index of (pool p, stream), made on first use; NULL when out of memory. */
static pt_index *index_get(pt_pool *p, uint64_t stream)
{
    pt_index *x = index_find(p, stream);
    if (x) return x;
    if (p->n_idx == p->cap_idx) {
        size_t cap = p->cap_idx ? 2 * p->cap_idx : 4;
        pt_index **v = realloc(p->idx, cap * sizeof *v);
        if (!v) return NULL;
        p->idx = v;
        p->cap_idx = cap;
    }
    x = calloc(1, sizeof *x);
    if (!x) return NULL;
    x->stream = stream;
    p->idx[p->n_idx++] = x;
    return x;
}

static void pool_free(pt_pool *p)
{
    for (size_t i = 0; i < p->n_idx; i++)
        free(p->idx[i]);
    free(p->idx);
    p->idx = NULL;
    p->n_idx = p->cap_idx = 0;
    p->last = NULL;
}

typedef struct pt_state {
    gm_pt_conf conf;
    pt_pool small, large;
    pt_pool priv_small, priv_large; /* private pools' blocks: never searched */
    pt_segment *segs;               /* list head */
    uint32_t n_segs;
    pt_segment **arr; /* the same segments in an array, oldest first (the view walks it) */
    size_t cap_arr;
    /* each segment's base address -> the segment, for segment_at: made on
     * its first call (a policy that never asks pays nothing), then kept */
    gm_addrmap by_base;
    int by_base_on;
    /* what a release can give back (pt_releasable): the whole free classic
     * segments of the default pools, and the expandable ones */
    pt_segment *free_segs;
    pt_segment **exp;
    size_t n_exp, cap_exp;
    pt_block *spare;       /* free list of block structs */
    struct pt_slab *slabs; /* every block struct is in one of these */
    pt_segment *spare_seg; /* free list of segment structs (through lnext): a
                              policy that releases often makes and frees
                              one per driver call */
    gm_alloc_stats st;     /* PyTorch's DeviceStats (stats below); they decide nothing */
    int divides;           /* some roundup_power2_divisions interval is on (> 1) */
    /* the classic segments of the policy view by (small, size), in that
     * order (gm_alloc_ops.class_counts; a count may be 0), kept from the
     * first such read on (cls_on): a run nobody asks (every policy but
     * predictive; the oracle makes ~150 driver calls an iteration) pays
     * one test a driver call */
    gm_seg_class *cls;
    size_t n_cls, cap_cls;
    int cls_lost; /* a segment could not be counted (out of memory) */
    uint8_t cls_on;
    /* with them, a stable record per class (cls[i]'s is rec[cls_rec[i]],
     * and a segment keeps its class's, cls_id): class_free's counts */
    uint32_t *cls_rec;
    struct pt_clsfree {
        uint32_t free, since;
    } * rec;
    size_t n_rec, cap_rec;
    /* while fb_on, the briefs of free_segs (a whole free segment's brief
     * stays as it is until it leaves the set), in no order: what the
     * policies' ticks read (pt_briefs), with no walk of the list. Made on
     * the first such read (a run nobody asks pays one test a change of
     * the set); fb_lost when a brief could not be kept (out of memory) */
    gm_seg_brief *fb;
    uint32_t *fb_cls; /* while cls_on, fb[i]'s segment's class record (cls_id) */
    uint32_t n_fb, cap_fb;
    uint8_t fb_on, fb_lost;
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

/* round_size without divisions: up to a multiple of kMinBlockSize, at least one. */
static inline uint64_t round_min(uint64_t size)
{
    if (size < kMinBlockSize) return kMinBlockSize;
    return kMinBlockSize * ((size + kMinBlockSize - 1) / kMinBlockSize);
}

static uint64_t round_size(const gm_pt_conf *c, uint64_t size)
{
    if (size < kMinBlockSize) return kMinBlockSize;
    uint64_t div = divisions_for(c, size);
    if (div > 1 && size > kMinBlockSize * div) return next_division(size, div);
    return round_min(size);
}

/* round_size for an allocation: without roundup_power2_divisions (the
 * default) it is round_min alone, inline. */
static inline uint64_t alloc_round(const pt_state *s, uint64_t size)
{
    return s->divides ? round_size(&s->conf, size) : round_min(size);
}

static uint64_t allocation_size(const pt_state *s, uint64_t size)
{
    return gm_pt_allocation_size(size, s->conf.large_segment_size);
}

/* ---------------- statistics ----------------
 *
 * PyTorch's DeviceStats, kept where CUDACachingAllocator.cpp updates them
 * (names are PyTorch's); counting only, no decision reads them:
 *  - alloc_block (a cudaMalloc): segment +1, reserved_bytes + size,
 *    oversize_segments +1 when size >= max_split_size; release_block the
 *    reverse. Expandable segments: map_block / unmap_block move
 *    reserved_bytes by the bytes mapped or unmapped, and no segment count.
 *  - alloc_found_block: allocation, active +1; allocated_bytes and
 *    active_bytes + block size; requested_bytes + the request;
 *    oversize_allocations +1 for a block >= max_split_size. inactive_split
 *    (free blocks of a split segment: cached but not releasable), outside
 *    expandable segments: a split of an unsplit block adds the remainder
 *    (+1, + its bytes); a split of an already split block removes the
 *    bytes handed out; taking a split block whole removes it (-1, - size).
 *  - free() (the program's free, a free_requested): allocation -1,
 *    allocated_bytes - size, oversize_allocations -1.
 *  - free_block (the free completes): active -1, active_bytes - the
 *    block's size before merging, requested_bytes - the request; the
 *    inactive_split change nets -1 and - its bytes per neighbour merged, +1
 *    and + the result's bytes when the result is still split.
 * Each applies to the aggregate and to the block's pool (StatType ALL and
 * SMALL_POOL or LARGE_POOL: get_stat_types_for_pool); increase_stat raises
 * the peak and `allocated`, decrease_stat adds to `freed`.
 */

static void stat_inc(gm_stat *x, uint64_t n)
{
    x->current += n;
    if (x->current > x->peak) x->peak = x->current;
    x->allocated += n;
}

static void stat_dec(gm_stat *x, uint64_t n)
{
    x->current -= n;
    x->freed += n;
}

static void stats_inc(gm_stat *arr, int small, uint64_t n)
{
    stat_inc(&arr[GM_STAT_ALL], n);
    stat_inc(&arr[small ? GM_STAT_SMALL : GM_STAT_LARGE], n);
}

static void stats_dec(gm_stat *arr, int small, uint64_t n)
{
    stat_dec(&arr[GM_STAT_ALL], n);
    stat_dec(&arr[small ? GM_STAT_SMALL : GM_STAT_LARGE], n);
}

/* A signed net change, applied once (free_block's net_change_*). */
static void stats_net(gm_stat *arr, int small, int64_t d)
{
    if (d > 0) stats_inc(arr, small, (uint64_t)d);
    if (d < 0) stats_dec(arr, small, (uint64_t)-d);
}

/* alloc_found_block's counts for block b handed out for `req` bytes. */
static void stats_alloc(pt_state *s, const pt_block *b, uint64_t req)
{
    gm_alloc_stats *st = &s->st;
    int small = b->seg->small;
    stats_inc(st->allocation, small, 1);
    stats_inc(st->allocated_bytes, small, b->size);
    stats_inc(st->active, small, 1);
    stats_inc(st->active_bytes, small, b->size);
    stats_inc(st->requested_bytes, small, req);
    if (b->size >= s->conf.max_split_size) stat_inc(&st->oversize_allocations, 1);
}

/* alloc_found_block's counts: b (split from rest, unless NULL) handed out
 * for `req` bytes; counted: b is in a classic segment; already_split: b
 * had neighbours before. */
static void stats_found(pt_state *s, const pt_block *b, const pt_block *rest, int counted,
                        int already_split, uint64_t req)
{
    gm_alloc_stats *st = &s->st;
    int small = b->seg->small;
    if (rest) {
        if (counted && already_split) {
            stats_dec(st->inactive_split_bytes, small, b->size);
        } else if (counted) {
            stats_inc(st->inactive_split_bytes, small, rest->size);
            stats_inc(st->inactive_split, small, 1);
        }
    } else if (counted && already_split) {
        stats_dec(st->inactive_split_bytes, small, b->size);
        stats_dec(st->inactive_split, small, 1);
    }
    stats_alloc(s, b, req);
}

/* free()'s counts: the program let go of b. */
static void stats_let_go(pt_state *s, const pt_block *b)
{
    gm_alloc_stats *st = &s->st;
    stats_dec(st->allocation, b->seg->small, 1);
    stats_dec(st->allocated_bytes, b->seg->small, b->size);
    if (b->size >= s->conf.max_split_size) stat_dec(&st->oversize_allocations, 1);
}

/* ---------------- blocks and segments ---------------- */

/* Block structs come in slabs, freed together when the allocator is:
 * a model with a million cached blocks made and freed a million
 * separate heap objects (the C library's free() of them at the end cost
 * as much as a tenth of such a run). */
#define SLAB_BLOCKS 256
typedef struct pt_slab {
    struct pt_slab *next;
    pt_block b[SLAB_BLOCKS];
} pt_slab;

static void block_put(pt_state *s, pt_block *b)
{
    b->next = s->spare;
    s->spare = b;
}

/* A block struct, its contents undefined (the caller sets them all). */
static pt_block *block_take(pt_state *s)
{
    if (!s->spare) {
        pt_slab *sl = malloc(sizeof *sl);
        if (!sl) return NULL;
        sl->next = s->slabs;
        s->slabs = sl;
        for (size_t i = SLAB_BLOCKS; i-- > 0;)
            block_put(s, &sl->b[i]);
    }
    pt_block *b = s->spare;
    s->spare = b->next;
    return b;
}

/* A zeroed block struct. */
static pt_block *block_new(pt_state *s)
{
    pt_block *b = block_take(s);
    if (b) memset(b, 0, sizeof *b);
    return b;
}

static pt_pool *pool_of(pt_state *s, const pt_segment *seg)
{
    if (seg->priv) return seg->small ? &s->priv_small : &s->priv_large;
    return seg->small ? &s->small : &s->large;
}

static inline void pool_insert(pt_pool *p, pt_block *b)
{
    b->gc_base = p->lookups;
    if (b->mapped)
        index_insert(b->seg->idx, b);
    else
        pt_addr_tree_RB_INSERT(&p->unmapped, b);
}

static inline void pool_remove(pt_pool *p, pt_block *b)
{
    if (b->mapped)
        index_remove(b->seg->idx, b);
    else
        pt_addr_tree_RB_REMOVE(&p->unmapped, b);
}

/* A segment of the default pool (small or large) on stream; NULL when out
 * of memory. */
static pt_segment *segment_new(pt_state *s, uint64_t base, uint64_t size, uint64_t stream,
                               int small)
{
    pt_index *x = index_get(small ? &s->small : &s->large, stream);
    if (!x) return NULL;
    if (s->n_segs == s->cap_arr) {
        size_t cap = s->cap_arr ? 2 * s->cap_arr : 64;
        pt_segment **v = realloc(s->arr, cap * sizeof *v);
        if (!v) return NULL;
        s->arr = v;
        s->cap_arr = cap;
    }
    pt_segment *g = s->spare_seg;
    if (g)
        s->spare_seg = g->lnext;
    else /* 64-byte aligned: the fields at its start share one cache line */
        g = aligned_alloc(64, (sizeof *g + 63) / 64 * 64);
    if (!g) return NULL;
    memset(g, 0, sizeof *g);
    if (s->by_base_on &&
        gm_addrmap_put(&s->by_base, gm_addrmap_key(base), (uint64_t)(uintptr_t)g) != GM_OK) {
        free(g);
        return NULL;
    }
    g->arr_idx = s->n_segs;
    s->arr[s->n_segs] = g;
    g->idx = x;
    g->view_stale = 1;
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

/* A whole free classic segment's brief (its one free block: releasable). */
static inline gm_seg_brief whole_brief(const pt_segment *g)
{
    return (gm_seg_brief){
        (uint64_t)(uintptr_t)g, g->base, g->size, g->last_use_ns, g->size, 0, g->small, 0};
}

/* Segment g enters s->fb (whole free) or leaves it (its place taken by the
 * last one). */
__attribute__((noinline)) static void fb_set(pt_state *s, pt_segment *g, int whole)
{
    if (!whole) {
        if (!g->fb_at) return;
        gm_seg_brief last = s->fb[--s->n_fb];
        if (g->fb_at - 1 < s->n_fb) {
            s->fb[g->fb_at - 1] = last;
            s->fb_cls[g->fb_at - 1] = s->fb_cls[s->n_fb];
            ((pt_segment *)(uintptr_t)last.id)->fb_at = g->fb_at;
        }
        g->fb_at = 0;
        return;
    }
    if (s->n_fb == s->cap_fb) {
        uint32_t cap = s->cap_fb ? 2 * s->cap_fb : 64;
        gm_seg_brief *v = realloc(s->fb, cap * sizeof *v);
        uint32_t *c = v ? realloc(s->fb_cls, cap * sizeof *c) : NULL;
        if (v) s->fb = v;
        if (!c) {
            s->fb_lost = 1;
            return;
        }
        s->fb_cls = c;
        s->cap_fb = cap;
    }
    s->fb_cls[s->n_fb] = g->cls_id; /* a classed one's (class_track) */
    s->fb[s->n_fb++] = whole_brief(g);
    g->fb_at = s->n_fb;
}

/* Keep s->free_segs the classic segments of the default pools with one
 * free block (PyTorch's releasable "non-split" blocks); called after every
 * operation that changes a segment's blocks. */
static void track_free_set(pt_state *s, pt_segment *g, int whole)
{
    if (whole == g->whole_free) return;
    g->whole_free = (uint8_t)whole;
    if (__builtin_expect(s->fb_on, 0)) fb_set(s, g, whole);
    if (whole) {
        g->fprev = NULL;
        g->fnext = s->free_segs;
        if (s->free_segs) s->free_segs->fprev = g;
        s->free_segs = g;
        return;
    }
    if (g->fprev)
        g->fprev->fnext = g->fnext;
    else
        s->free_segs = g->fnext;
    if (g->fnext) g->fnext->fprev = g->fprev;
}

static void track_free(pt_state *s, pt_segment *g)
{
    track_free_set(s, g, !g->expandable && !g->priv && g->n_alloc == 0 && g->n_blocks == 1);
}

/* Add (GM_OK or GM_ENOMEM) or remove an expandable segment of s->exp. */
static int track_expandable(pt_state *s, pt_segment *g, int add)
{
    if (add) {
        if (s->n_exp == s->cap_exp) {
            size_t cap = s->cap_exp ? 2 * s->cap_exp : 8;
            pt_segment **v = realloc(s->exp, cap * sizeof *v);
            if (!v) return GM_ENOMEM;
            s->exp = v;
            s->cap_exp = cap;
        }
        s->exp[s->n_exp++] = g;
        return GM_OK;
    }
    for (size_t i = 0; i < s->n_exp; i++)
        if (s->exp[i] == g) {
            s->exp[i] = s->exp[--s->n_exp];
            break;
        }
    return GM_OK;
}

/* Count segment g in s->cls, or not, as it is a classic segment of the
 * policy view (not expandable, not a private pool's) or not: after a
 * driver call made it, and before one gives it back. */
static void class_track(pt_state *s, pt_segment *g, int on)
{
    if (!s->cls_on) return;
    on = on && !g->expandable && !g->priv;
    if (on == g->classed) return;
    size_t i = 0;
    while (i < s->n_cls && (s->cls[i].small_pool < g->small ||
                            (s->cls[i].small_pool == g->small && s->cls[i].size < g->size)))
        i++;
    int found = i < s->n_cls && s->cls[i].small_pool == g->small && s->cls[i].size == g->size;
    if (!on) { /* it was counted: its class is there */
        s->cls[i].count--;
        g->classed = 0;
        return;
    }
    if (!found) {
        if (s->n_cls == s->cap_cls) {
            size_t cap = s->cap_cls ? 2 * s->cap_cls : 16;
            gm_seg_class *v = realloc(s->cls, cap * sizeof *v);
            uint32_t *r = v ? realloc(s->cls_rec, cap * sizeof *r) : NULL;
            if (v) s->cls = v;
            if (!r) {
                s->cls_lost = 1;
                return;
            }
            s->cls_rec = r;
            s->cap_cls = cap;
        }
        if (s->n_rec == s->cap_rec) {
            size_t cap = s->cap_rec ? 2 * s->cap_rec : 16;
            struct pt_clsfree *v = realloc(s->rec, cap * sizeof *v);
            if (!v) {
                s->cls_lost = 1;
                return;
            }
            s->rec = v;
            s->cap_rec = cap;
        }
        memmove(&s->cls[i + 1], &s->cls[i], (s->n_cls - i) * sizeof *s->cls);
        memmove(&s->cls_rec[i + 1], &s->cls_rec[i], (s->n_cls - i) * sizeof *s->cls_rec);
        s->n_cls++;
        s->cls[i] = (gm_seg_class){.size = g->size, .count = 0, .small_pool = g->small};
        s->cls_rec[i] = (uint32_t)s->n_rec++;
    }
    s->cls[i].count++;
    g->classed = 1;
    g->cls_id = s->cls_rec[i];
    if (g->fb_at) s->fb_cls[g->fb_at - 1] = g->cls_id;
}

static void segment_unlink(pt_state *s, pt_segment *g)
{
    class_track(s, g, 0);
    if (g->lprev)
        g->lprev->lnext = g->lnext;
    else
        s->segs = g->lnext;
    if (g->lnext) g->lnext->lprev = g->lprev;
    track_free_set(s, g, 0);
    if (g->expandable) track_expandable(s, g, 0);
    if (s->by_base_on) gm_addrmap_del(&s->by_base, gm_addrmap_key(g->base), NULL);
    for (size_t i = g->arr_idx + 1; i < s->n_segs; i++) { /* a driver call: rare */
        s->arr[i - 1] = s->arr[i];
        s->arr[i - 1]->arr_idx = i - 1;
    }
    s->n_segs--;
    g->lnext = s->spare_seg;
    s->spare_seg = g;
}

/* try_merge_blocks: absorb src into dst when src is free and alike;
 * returns the bytes absorbed (0: none). */
static inline uint64_t try_merge(pt_state *s, pt_block *dst, pt_block *src)
{
    if (!src || src->allocated || dst->mapped != src->mapped) return 0;
    dst->seg->view_stale = 1;
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
    uint64_t n = src->size;
    dst->size += n;
    dst->seg->n_blocks--;
    block_put(s, src);
    return n;
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
        if (b) block_put(s, b);
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
    class_track(s, g, 1);
    stats_inc(s->st.segment, small, 1);
    stats_inc(s->st.reserved_bytes, small, alloc_size);
    if (alloc_size >= s->conf.max_split_size) stat_inc(&s->st.oversize_segments, 1);
    if (alloc_size > a->c.largest_segment) a->c.largest_segment = alloc_size;
    a->ff_part[!small].driver++;
    return b;
}

/* release_block: give a whole free classic segment back to the driver. */
static uint64_t release_segment(gm_alloc *a, pt_state *s, pt_segment *g, uint64_t now)
{
    pt_block *b = g->first;
    uint64_t size = g->size;
    pool_remove(pool_of(s, g), b);
    gm_alloc_driver_free(a, g->base, size, g->stream, now);
    stats_dec(s->st.segment, g->small, 1);
    stats_dec(s->st.reserved_bytes, g->small, size);
    if (size >= s->conf.max_split_size) stat_dec(&s->st.oversize_segments, 1);
    a->ff_part[!g->small].driver++;
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
    pt_block *hi = block_take(s);
    if (!hi) return NULL;
    /* one store of each field, not a compound literal: GCC zero-fills one
     * with `rep stos`, whose start-up was most of this function's time.
     * The tree links and the bin are set when the block is filed
     * (index_insert, pt_addr_tree_RB_INSERT: RB_SET). */
    hi->ptr = b->ptr + at;
    hi->size = b->size - at;
    hi->prev = b;
    hi->next = b->next;
    hi->seg = b->seg;
    hi->requested = 0;
    hi->stream = b->stream;
    hi->gc_base = 0; /* pool_insert sets it */
    hi->allocated = 0;
    hi->mapped = b->mapped;
    hi->category = 0;
    hi->let_go = 0;
    if (b->next) b->next->prev = hi;
    b->next = hi;
    b->size = at;
    b->seg->n_blocks++;
    b->seg->view_stale = 1;
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
    stats_inc(s->st.reserved_bytes, g->small, len);
    if (len < b->size) {
        pt_block *rest = split_at(s, b, len);
        if (rest) pool_insert(p, rest);
    }
    b->mapped = 1;
    g->view_stale = 1;
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
    stats_dec(s->st.reserved_bytes, g->small, n);
    b->mapped = 0;
    g->view_stale = 1;
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
    uint64_t cap = gm_device_capacity(a->dev); /* the address range is sized from it */
    uint64_t va_size = (cap + cap / 8 + page - 1) / page * page, va;
    if (min_va > va_size) va_size = (min_va + page - 1) / page * page;
    if (a->dev->ops->va_reserve(a->dev, va_size, &va) != GM_OK) return NULL;
    pt_block *b = block_new(s);
    pt_segment *g = b ? segment_new(s, va, va_size, stream, small) : NULL;
    if (g && track_expandable(s, g, 1) != GM_OK) {
        segment_unlink(s, g);
        g = NULL;
    }
    if (!g) {
        if (b) block_put(s, b);
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
/* ff_live and the block's part's share (gm_ff_part: part 0 the small
 * pool, 1 the large), while a fast-forward reads them (a->ff_on); the
 * amounts wrap around for a block that goes (unsigned). */
static inline void ff_count(gm_alloc *a, const pt_segment *g, uint64_t mix, uint64_t req,
                            uint64_t bytes)
{
    gm_ff_part *q = &a->ff_part[!g->small];
    a->ff_live += mix;
    q->live += mix;
    q->requested += req;
    q->allocated += bytes;
}

/* The block get_free_block takes, left where it is (x: its index). */
static pt_block *find_free_block(const pt_state *s, pt_pool *p, uint64_t size, uint64_t stream,
                                 pt_index **xp)
{
    const gm_pt_conf *c = &s->conf;
    pt_index *x = index_find(p, stream);
    pt_block *b = x ? index_lower_bound(x, size) : NULL;
    if (!b) return NULL;
    if (b->seg->expandable) {
        /* best fit counts what a block can grow into: its size plus an
         * unmapped range right after it */
        pt_block *n = index_next(x, b);
#define EXP_SIZE(x) ((x)->size + ((x)->next && !(x)->next->mapped ? (x)->next->size : 0))
        while (b->seg->expandable && n && EXP_SIZE(n) < EXP_SIZE(b)) {
            b = n;
            n = index_next(x, n);
        }
#undef EXP_SIZE
    }
    if (size < c->max_split_size && b->size >= c->max_split_size)
        return NULL; /* do not hand an oversize block to a small request */
    if (size >= c->max_split_size && b->size >= size + c->max_non_split_rounding_size)
        return NULL; /* oversize requests may round up only a little */
    *xp = x;
    return b;
}

static pt_block *get_free_block(gm_alloc *a, pt_state *s, pt_pool *p, uint64_t size,
                                uint64_t stream)
{
    if (gc_enabled(a, s)) p->lookups++;
    pt_index *x;
    pt_block *b = find_free_block(s, p, size, stream, &x);
    if (b) index_remove(x, b);
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

/* PyTorch's alloc_found_block: block b, taken from pool p, serves the
 * request (split when should_split says). */
static inline __attribute__((always_inline)) int alloc_found(gm_alloc *a, pt_state *s, pt_pool *p,
                                                             pt_block *b, uint64_t size,
                                                             uint64_t req, uint8_t cat,
                                                             uint64_t now, uint64_t *handle)
{
    int counted = !b->seg->expandable, already_split = b->prev || b->next;
    pt_block *rest = NULL;
    if (should_split(s, b, size)) {
        rest = split_at(s, b, size);
        if (!rest) return GM_EOOM;
        pool_insert(p, rest);
    }
    if (!a->no_stats) stats_found(s, b, rest, counted, already_split, req);
    b->allocated = 1;
    b->requested = req;
    b->category = cat;
    pt_segment *g = b->seg;
    if (a->ff_on) ff_count(a, g, gm_ff_block_mix(b->ptr, b->size, req, cat), req, b->size);
    g->view_stale = 1;
    g->n_alloc++;
    g->alloc_bytes += b->size;
    g->last_use_ns = now;
    g->cat_mask |= 1u << cat;
    if (g->whole_free) track_free_set(s, g, 0); /* track_free: it holds a block now */
    a->c.requested_bytes += req;
    a->c.allocated_bytes += b->size;
    *handle = (uint64_t)(uintptr_t)b;
    return GM_OK;
}

static int pt_malloc(gm_alloc *a, uint64_t req, uint64_t stream, uint8_t cat, uint64_t now,
                     uint64_t *handle)
{
    pt_state *s = a->impl;
    uint64_t size = alloc_round(s, req);
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
            int r = gm_policy_ask(a, &pr);
            if (r == GM_POLICY_GIVE_UP) {
                s->st.num_ooms++; /* malloc's OutOfMemoryError */
                return GM_EOOM;
            }
            pr.attempt++;
            if (r == GM_POLICY_RETRY) {
                a->c.grow_retries++;
                if (a->c.n_cache_flushes != flushes) a->c.num_alloc_retries++;
                b = grow(a, s, p, size, pr.alloc_size, stream, now);
            }
        }
    }
    return alloc_found(a, s, p, b, size, req, cat, now, handle);
}

static void pt_free(gm_alloc *a, uint64_t handle, uint64_t now)
{
    pt_state *s = a->impl;
    pt_block *b = (pt_block *)(uintptr_t)handle;
    pt_segment *g = b->seg;
    int counting = !a->no_stats;
    if (counting && !b->let_go) stats_let_go(s, b); /* free(), unless a free_requested did it */
    uint64_t bytes = b->size, req = b->requested;
    if (a->ff_on) ff_count(a, g, -gm_ff_block_mix(b->ptr, bytes, req, b->category), -req, -bytes);
    a->c.requested_bytes -= b->requested;
    a->c.allocated_bytes -= b->size;
    g->n_alloc--;
    g->alloc_bytes -= b->size;
    g->last_use_ns = now;
    g->view_stale = 1;
    b->allocated = 0;
    b->requested = 0;
    b->let_go = 0;
    /* free_block */
    int64_t n_split = 0, split_bytes = 0;
    uint64_t m;
    if ((m = try_merge(s, b, b->prev))) n_split--, split_bytes -= (int64_t)m;
    if ((m = try_merge(s, b, b->next))) n_split--, split_bytes -= (int64_t)m;
    pool_insert(pool_of(s, g), b);
    /* track_free, asked of b: free and without neighbours it is the
     * segment's one block (n_blocks 1, n_alloc 0). Reading the two
     * counters just stored would be one 8-byte load over two 4-byte
     * stores in flight, which the CPU cannot forward from: a stall. */
    track_free_set(s, g, !g->expandable && !g->priv && !b->prev && !b->next);
    if (b->prev || b->next) n_split++, split_bytes += (int64_t)b->size;
    if (!counting) return;
    gm_alloc_stats *st = &s->st;
    if (!g->expandable) {
        stats_net(st->inactive_split, g->small, n_split);
        stats_net(st->inactive_split_bytes, g->small, split_bytes);
    }
    stats_dec(st->active, g->small, 1);
    stats_dec(st->active_bytes, g->small, bytes);
    stats_dec(st->requested_bytes, g->small, req);
}

/* gm_alloc_ops.prefetch_free: the block; then what pt_free reads through it. */
static void pt_prefetch_free(gm_alloc *a, uint64_t handle, int deep)
{
    (void)a;
    const pt_block *b = (const pt_block *)(uintptr_t)handle;
    if (!deep) {
        __builtin_prefetch(b);
        return;
    }
    __builtin_prefetch(b->seg);
    if (b->prev) __builtin_prefetch(b->prev);
    if (b->next) __builtin_prefetch(b->next);
}

/* The program's free of a block whose free_block comes later (record_stream). */
static void pt_free_requested(gm_alloc *a, uint64_t handle)
{
    pt_block *b = (pt_block *)(uintptr_t)handle;
    if (b->let_go || !b->allocated) return;
    stats_let_go(a->impl, b);
    b->let_go = 1;
}

static uint64_t largest_in(const pt_pool *p)
{
    uint64_t best = 0;
    for (size_t i = 0; i < p->n_idx; i++) {
        uint64_t x = index_largest(p->idx[i]);
        if (x > best) best = x;
    }
    return best;
}

static uint64_t pt_largest_free(gm_alloc *a)
{
    pt_state *s = a->impl;
    uint64_t x = largest_in(&s->small), y = largest_in(&s->large);
    return x > y ? x : y;
}

/* ---------------- policy view ---------------- */

/* Rebuild segment g's view (all but the GC age) from its blocks. */
static void view_build(pt_segment *g)
{
    gm_seg_info *o = &g->view;
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
    if (!g->expandable && !g->lf_valid && g->n_blocks - g->n_alloc <= 1) {
        /* at most one free block: it is all the free bytes */
        g->lf_n = g->n_blocks > g->n_alloc;
        g->lf[0] = g->size - g->alloc_bytes;
        g->lf_all = g->lf_valid = 1;
    }
    if (!g->expandable && g->lf_valid) {
        for (size_t i = 0; i < g->lf_n; i++)
            if (g->lf[i] > o->largest_free) o->largest_free = g->lf[i];
        if (g->n_alloc == 0 && g->n_blocks == 1) o->releasable = g->size;
        g->view_stale = 0;
#ifdef GM_LF_CHECK /* -DGM_LF_CHECK: check it against a walk of the blocks */
        uint64_t lf = 0;
        for (const pt_block *b = g->first; b; b = b->next)
            if (!b->allocated && b->mapped && b->size > lf) lf = b->size;
        if (lf != o->largest_free) abort();
#endif
        return;
    }
    g->lf_n = 0;
    g->lf_all = 1;
    for (const pt_block *b = g->first; b; b = b->next) {
        if (b->allocated || !b->mapped) continue;
        if (b->size > o->largest_free) o->largest_free = b->size;
        if (!g->expandable) lf_add(g, b->size);
        if (g->expandable) {
            uint64_t lo = page_ceil(g, b->ptr), hi = page_floor(g, b->ptr + b->size);
            if (hi > lo) o->releasable += hi - lo;
        }
    }
    if (!g->expandable && g->n_alloc == 0 && g->n_blocks == 1) o->releasable = g->size;
    g->lf_valid = !g->expandable;
    g->view_stale = 0;
}

static void seg_info(const pt_state *s, pt_segment *g, gm_seg_info *o)
{
    if (g->view_stale) view_build(g); /* only when a block changed since the last view */
    *o = g->view;
    if (!g->expandable && g->n_alloc == 0 && g->n_blocks == 1) {
        const pt_pool *p = g->small ? &s->small : &s->large;
        o->gc_age = p->lookups - g->first->gc_base;
    }
}

static size_t pt_segments(gm_alloc *a, gm_seg_info *buf, size_t cap)
{
    pt_state *s = a->impl;
    size_t i = 0;
    for (size_t k = s->n_segs; k-- > 0;) { /* newest first */
        pt_segment *g = s->arr[k];
        if (g->priv) continue; /* a captured graph's memory: not the policy's to give back */
        if (i < cap) seg_info(s, g, &buf[i]);
        i++;
    }
    return i;
}

/* gm_alloc_ops.whole_free: the whole free classic segments. */
static size_t pt_whole_free(gm_alloc *a, gm_seg_info *buf, size_t cap)
{
    pt_state *s = a->impl;
    size_t i = 0;
    for (pt_segment *g = s->free_segs; g; g = g->fnext, i++)
        if (i < cap) seg_info(s, g, &buf[i]);
    return i;
}

/* What a release can give back now: the whole free classic segments, then
 * the expandable segments with a free page (segments()' figures). */
static size_t pt_releasable(gm_alloc *a, gm_seg_info *buf, size_t cap)
{
    pt_state *s = a->impl;
    size_t i = pt_whole_free(a, buf, cap);
    for (size_t k = 0; k < s->n_exp; k++) {
        gm_seg_info o;
        seg_info(s, s->exp[k], &o);
        if (!o.releasable) continue;
        if (i < cap) buf[i] = o;
        i++;
    }
    return i;
}

/* A segment's brief: a classic one's are its own fields (view_build's),
 * an expandable one's (free pages) come from its view. */
static gm_seg_brief brief_of(const pt_state *s, pt_segment *g)
{
    if (!g->expandable)
        return (gm_seg_brief){(uint64_t)(uintptr_t)g,
                              g->base,
                              g->size,
                              g->last_use_ns,
                              g->n_alloc == 0 && g->n_blocks == 1 ? g->size : 0,
                              g->n_alloc,
                              g->small,
                              0};
    gm_seg_info o;
    seg_info(s, g, &o);
    return gm_seg_brief_of(&o);
}

/* gm_alloc_ops.class_counts: the classes with a segment. */
static size_t pt_class_counts(gm_alloc *a, gm_seg_class *buf, size_t cap)
{
    pt_state *s = a->impl;
    size_t n = 0;
    if (!s->cls_on) { /* from now on: every segment there is (none counted yet) */
        s->cls_on = 1;
        for (size_t k = 0; k < s->n_segs; k++)
            class_track(s, s->arr[k], !s->arr[k]->priv);
    }
    if (s->cls_lost) return SIZE_MAX;
    for (size_t i = 0; i < s->n_cls; i++)
        if (s->cls[i].count) {
            if (n < cap) buf[n] = s->cls[i];
            n++;
        }
    return n;
}

/* gm_alloc_ops.class_free: of pt_class_counts' classes, in its order,
 * from the whole free segments' briefs (fb) and their classes' records
 * (fb_cls): no look-up of a class, as a policy walking its view needs. */
static size_t pt_class_free(gm_alloc *a, uint64_t mark_ns, uint32_t *free, uint32_t *since,
                            size_t cap)
{
    pt_state *s = a->impl;
    if (!s->cls_on || s->cls_lost || !s->fb_on || s->fb_lost) return SIZE_MAX;
    struct pt_clsfree *c = s->rec;
    if (s->n_rec) memset(c, 0, s->n_rec * sizeof *c); /* none yet: rec is NULL */
    for (uint32_t i = 0; i < s->n_fb; i++) {
        c[s->fb_cls[i]].free++;
        c[s->fb_cls[i]].since += s->fb[i].last_use_ns > mark_ns;
    }
    size_t n = 0;
    for (size_t k = 0; k < s->n_cls; k++)
        if (s->cls[k].count) {
            if (n < cap) {
                free[n] = c[s->cls_rec[k]].free;
                since[n] = c[s->cls_rec[k]].since;
            }
            n++;
        }
    return n;
}

/* The whole free segments' briefs kept from now on (again, after one
 * could not be kept). */
static void fb_start(pt_state *s)
{
    if (s->fb_on && !s->fb_lost) return;
    for (size_t k = 0; k < s->n_segs; k++)
        s->arr[k]->fb_at = 0;
    s->n_fb = 0;
    s->fb_on = 1;
    s->fb_lost = 0;
    for (pt_segment *g = s->free_segs; g; g = g->fnext)
        fb_set(s, g, 1);
}

/* pt_segments or pt_releasable in short. */
static size_t pt_briefs(gm_alloc *a, int releasable_only, gm_seg_brief *buf, size_t cap)
{
    pt_state *s = a->impl;
    size_t i = 0;
    if (!releasable_only) {
        for (size_t k = s->n_segs; k-- > 0;) { /* newest first */
            pt_segment *g = s->arr[k];
            if (g->priv) continue;
            if (i < cap) buf[i] = brief_of(s, g);
            i++;
        }
        return i;
    }
    fb_start(s);
    if (!s->fb_lost) { /* classic, whole free */
        i = s->n_fb;
        if (i && cap) memcpy(buf, s->fb, (i < cap ? i : cap) * sizeof *buf);
    } else {
        for (pt_segment *g = s->free_segs; g; g = g->fnext, i++)
            if (i < cap) buf[i] = whole_brief(g);
    }
    for (size_t k = 0; k < s->n_exp; k++) {
        gm_seg_brief o = brief_of(s, s->exp[k]);
        if (!o.releasable) continue;
        if (i < cap) buf[i] = o;
        i++;
    }
    return i;
}

/* briefs(a, 1, ...) in place: the whole free briefs' array, while it is
 * all of them (no expandable segment, whose briefs briefs() appends). */
static const gm_seg_brief *pt_releasable_briefs(gm_alloc *a, size_t *n)
{
    static const gm_seg_brief none[1]; /* before the first whole free segment */
    pt_state *s = a->impl;
    fb_start(s);
    if (s->fb_lost || s->n_exp) return NULL;
    *n = s->n_fb;
    return s->fb ? s->fb : none;
}

/* A classic segment with no allocated block has one free block (free
 * neighbours always merge: try_merge), so it is whole free and releasable:
 * the promise segment_at makes (alloc.h). */
static int pt_segment_at(gm_alloc *a, uint64_t addr, gm_seg_brief *out)
{
    pt_state *s = a->impl;
    if (!s->by_base_on && gm_addrmap_init(&s->by_base, 2 * (size_t)s->n_segs + 16) == GM_OK) {
        s->by_base_on = 1;
        for (size_t k = 0; k < s->n_segs && s->by_base_on; k++)
            if (gm_addrmap_put(&s->by_base, gm_addrmap_key(s->arr[k]->base),
                               (uint64_t)(uintptr_t)s->arr[k]) != GM_OK) {
                gm_addrmap_free(&s->by_base);
                s->by_base_on = 0;
            }
    }
    pt_segment *g = NULL;
    if (s->by_base_on) {
        const uint64_t *x = gm_addrmap_get(&s->by_base, gm_addrmap_key(addr));
        g = x ? (pt_segment *)(uintptr_t)*x : NULL;
    } else { /* out of memory for the map: a walk */
        for (size_t k = 0; k < s->n_segs && !g; k++)
            if (s->arr[k]->base == addr) g = s->arr[k];
    }
    if (!g || g->priv) return 0;
    *out = brief_of(s, g);
    return 1;
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
    class_track(s, g, !g->priv);
    if (g->priv && !(g->idx = index_get(pool_of(s, g), g->stream))) return GM_ENOMEM;
    if (g->priv && g->expandable) track_expandable(s, g, 0); /* not the policy's */
    pool_insert(pool_of(s, g), g->first);
    track_free(s, g);
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
    if (a->ff_on)
        ff_count(a, g, gm_ff_block_mix(b->ptr, b->size, r->size, r->category), r->size, b->size);
    g->view_stale = 1;
    g->n_alloc++;
    g->alloc_bytes += b->size;
    g->cat_mask |= 1u << r->category;
    track_free(s, g);
    stats_alloc(s, b, r->size);
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

/* Carving leaves free blocks between the live ones: make inactive_split
 * what the rebuilt segments hold (their free blocks of split classic
 * segments), as PyTorch's counts were when the snapshot was taken. */
static void stats_rebase_split(pt_state *s)
{
    uint64_t n[2] = {0, 0}, bytes[2] = {0, 0};
    for (size_t k = 0; k < s->n_segs; k++) {
        const pt_segment *g = s->arr[k];
        if (g->expandable || g->n_blocks < 2) continue;
        for (const pt_block *b = g->first; b; b = b->next)
            if (!b->allocated) n[g->small]++, bytes[g->small] += b->size;
    }
    for (int small = 0; small <= 1; small++) {
        int t = small ? GM_STAT_SMALL : GM_STAT_LARGE;
        stats_net(s->st.inactive_split, small,
                  (int64_t)n[small] - (int64_t)s->st.inactive_split[t].current);
        stats_net(s->st.inactive_split_bytes, small,
                  (int64_t)bytes[small] - (int64_t)s->st.inactive_split_bytes[t].current);
    }
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
    if (n > 1) qsort(ord, n, sizeof *ord, cmp_rows);
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
    stats_rebase_split(s);
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
    for (size_t i = 0; i < GM_PT_ROUNDUP_INTERVALS; i++)
        s->divides |= s->conf.roundup_divisions[i] > 1;
    if (s->conf.backend_async) {
        free(s);
        return gm_errf(err, GM_EINVAL,
                       "alloc conf '%s': backend:cudaMallocAsync is PyTorch's other backend, "
                       "modelled by --allocator cuda-async (without --allocator the setting "
                       "chooses it)",
                       conf);
    }
    RB_INIT(&s->small.unmapped);
    RB_INIT(&s->large.unmapped);
    RB_INIT(&s->priv_small.unmapped);
    RB_INIT(&s->priv_large.unmapped);
    s->small.small = 1;
    s->priv_small.small = 1;
    a->limits.max_split_size = s->conf.max_split_size;
    a->limits.gc_threshold = s->conf.gc_threshold;
    /* per_process_memory_fraction (2.10 on): the constructor's
     * setMemoryFraction; a later set_per_process_memory_fraction (the
     * run's --memory-fraction) wins */
    if (s->conf.memory_fraction > 0 && !a->limits.memory_limit) {
        a->limits.memory_limit =
            (uint64_t)(s->conf.memory_fraction * (double)gm_device_capacity(a->dev));
    }
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
        uint64_t dummy;
        if (g->expandable) {
            if (g->mapped_bytes) /* mapped pages, as one range: the device counts bytes */
                a->dev->ops->mem_unmap(a->dev, g->base, g->mapped_bytes, &dummy);
            a->dev->ops->va_release(a->dev, g->base, g->size);
        } else {
            a->dev->ops->mem_free(a->dev, g->base, g->size, &dummy);
        }
        free(g);
        g = next;
    }
    while (s->slabs) { /* every block struct, the segments' and the spare ones */
        pt_slab *sn = s->slabs->next;
        free(s->slabs);
        s->slabs = sn;
    }
    while (s->spare_seg) {
        pt_segment *gn = s->spare_seg->lnext;
        free(s->spare_seg);
        s->spare_seg = gn;
    }
    free(s->arr);
    free(s->exp);
    free(s->cls);
    free(s->cls_rec);
    free(s->rec);
    free(s->fb);
    free(s->fb_cls);
    if (s->by_base_on) gm_addrmap_free(&s->by_base);
    pool_free(&s->small);
    pool_free(&s->large);
    pool_free(&s->priv_small);
    pool_free(&s->priv_large);
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

/* ---------------- fast-forward (alloc.h, ff_state; sim/ffwd.h) ---------------- */

/* Everything a later decision reads, in a fixed order: per segment (oldest
 * first) its range, stream, kind and the categories that used it, then
 * each of its blocks in address order (address, size, allocated, mapped;
 * an allocated block's request and category); then the whole-free list in
 * its order (releases walk it) and the expandable segments in theirs. Not
 * written: the last use (ff_touch), the caches of views and largest free
 * blocks (they follow the blocks), which block struct holds a block, the
 * GC ages (pool lookups and each block's gc_base: they decide only when
 * the model grows, which a cycle does not; ff_clock, ff_seg_age and
 * ff_touch move them as the cycle would). PyTorch's statistics decide
 * nothing (pt_ff_stats). */
#define PUT(x)                                                                                     \
    do {                                                                                           \
        if (n < cap) buf[n] = (uint64_t)(x);                                                       \
        n++;                                                                                       \
    } while (0)

/* The segments of part `part` (-1: every segment) in pt_ff_state's form,
 * into buf from word n on: the word count after them, or, once it is past
 * cap, a count above cap (ff_state: the rest is not walked). */
static size_t ff_put_segments(const pt_state *s, int part, uint64_t *buf, size_t cap, size_t n)
{
    for (size_t k = 0; k < s->n_segs && n <= cap; k++) {
        const pt_segment *g = s->arr[k];
        if (part >= 0 && part != !g->small) continue;
        PUT(g->base);
        PUT(g->size);
        PUT(g->stream);
        PUT((uint64_t)g->small | (uint64_t)g->expandable << 8 | (uint64_t)g->priv << 16 |
            (uint64_t)g->cat_mask << 32);
        PUT(g->mapped_bytes);
        PUT(g->n_blocks);
        for (const pt_block *b = g->first; b && n <= cap; b = b->next) {
            PUT(b->ptr);
            PUT(b->size);
            PUT((uint64_t)b->allocated | (uint64_t)b->mapped << 1 | (uint64_t)b->let_go << 2 |
                (b->allocated ? (uint64_t)b->category << 8 : 0));
            if (b->allocated) PUT(b->requested);
        }
    }
    return n;
}

static size_t pt_ff_state(gm_alloc *a, uint64_t *buf, size_t cap)
{
    const pt_state *s = a->impl;
    size_t n = 0;
    PUT(s->n_segs);
    n = ff_put_segments(s, -1, buf, cap, n);
    if (n > cap) return n; /* it does not fit: not the rest (ff_state) */
    size_t n_free = 0;
    for (const pt_segment *g = s->free_segs; g; g = g->fnext)
        n_free++;
    PUT(n_free);
    for (const pt_segment *g = s->free_segs; g; g = g->fnext)
        PUT(g->base);
    PUT(s->n_exp);
    for (size_t k = 0; k < s->n_exp; k++)
        PUT(s->exp[k]->base);
    return n;
}

/* One pool's part of pt_ff_state: its segments and their blocks. The
 * whole-free list's order is left out: only the policies' views show it
 * (pt_releasable, pt_briefs), and they sort them by orders of their own
 * (alloc.h, ff_part_state). The pools share nothing that a malloc served
 * from a pool, or a free, reads or changes: a pool's own free-block
 * index, lookups (GC clock) and segments; the rounding is the settings'.
 * Expandable segments map pages as they grow, even when a malloc finds a
 * block: no promise with them. */
static size_t pt_ff_part_state(gm_alloc *a, int part, uint64_t *buf, size_t cap)
{
    const pt_state *s = a->impl;
    if (s->conf.expandable_segments || s->n_exp) return SIZE_MAX;
    size_t n = 0, segs = 0;
    for (size_t k = 0; k < s->n_segs; k++)
        segs += part == !s->arr[k]->small;
    PUT(segs);
    return ff_put_segments(s, part, buf, cap, n);
}
#undef PUT

static int pt_ff_part_of(gm_alloc *a, uint64_t req)
{
    return alloc_round(a->impl, req) > kSmallSize;
}

static int pt_ff_part_block(gm_alloc *a, uint64_t handle)
{
    (void)a;
    return !((const pt_block *)(uintptr_t)handle)->seg->small;
}

/* pt_malloc when the pool serves the request from a cached block (the
 * lookup counts as get_free_block's); else 1, and nothing changed. */
static int pt_ff_part_malloc(gm_alloc *a, uint64_t req, uint64_t stream, uint8_t cat, uint64_t now,
                             uint64_t *handle)
{
    pt_state *s = a->impl;
    uint64_t size = alloc_round(s, req);
    pt_pool *p = size <= kSmallSize ? &s->small : &s->large;
    pt_index *x;
    pt_block *b = find_free_block(s, p, size, stream, &x);
    if (!b) return 1;
    if (gc_enabled(a, s)) p->lookups++;
    index_remove(x, b);
    return alloc_found(a, s, p, b, size, req, cat, now, handle);
}

static gm_alloc_stats *pt_ff_part_stats_live(gm_alloc *a)
{
    return &((pt_state *)a->impl)->st;
}

/* A part's share of d: its pool's figures, which are also its share of
 * the all-pools ones; the oversize figures are the large pool's (a small
 * block is below any max_split_size: 20 MiB at least). */
static void pt_ff_part_stats(gm_alloc *a, int part, gm_alloc_stats *d)
{
    (void)a;
    gm_stat *x = (gm_stat *)d;
    int mine = GM_STAT_SMALL + part, other = GM_STAT_SMALL + !part;
    for (size_t k = 0; k < GM_ALLOC_N_STAT_ARRAYS; k++) {
        gm_stat *v = &x[k * GM_STAT_TYPES];
        v[GM_STAT_ALL].allocated = v[mine].allocated;
        v[GM_STAT_ALL].freed = v[mine].freed;
        v[other].allocated = v[other].freed = 0;
    }
    if (!part) {
        d->oversize_allocations.allocated = d->oversize_allocations.freed = 0;
        d->oversize_segments.allocated = d->oversize_segments.freed = 0;
    }
}

static uint64_t pt_ff_part_largest_free(gm_alloc *a, int part)
{
    pt_state *s = a->impl;
    return largest_in(part ? &s->large : &s->small);
}

static uint64_t pt_ff_segment(gm_alloc *a, uint64_t handle)
{
    (void)a;
    return (uint64_t)(uintptr_t)((const pt_block *)(uintptr_t)handle)->seg;
}

/* What pt_malloc and pt_free leave in a segment besides its blocks: its
 * last use, and (age: 1 + the lookups of its pool from the cycle's start
 * to when its one free block entered the pool) that block's GC base. */
static void pt_ff_touch(gm_alloc *a, uint64_t seg, uint64_t now, uint64_t age)
{
    pt_state *s = a->impl;
    pt_segment *g = (pt_segment *)(uintptr_t)seg;
    g->last_use_ns = now;
    g->view_stale = 1;
    if (g->fb_at) s->fb[g->fb_at - 1].last_use_ns = now;
    if (age) g->first->gc_base = pool_of(s, g)->lookups + age - 1;
}

/* The clocks GC ages count by: the default pools' lookups (small, large). */
static void pt_ff_clock(gm_alloc *a, uint64_t clock[])
{
    const pt_state *s = a->impl;
    clock[0] = s->small.lookups;
    clock[1] = s->large.lookups;
}

static void pt_ff_advance(gm_alloc *a, const uint64_t d[])
{
    pt_state *s = a->impl;
    s->small.lookups += d[0];
    s->large.lookups += d[1];
}

/* Only a whole free segment's GC age decides anything (garbage
 * collection releases those, oldest first: the pytorch policy; they are
 * the ones in free_segs, track_free); a block that enters a pool later
 * takes the clock of then. */
static uint64_t pt_ff_seg_age(gm_alloc *a, uint64_t seg, const uint64_t since[])
{
    (void)a;
    const pt_segment *g = (const pt_segment *)(uintptr_t)seg;
    if (!g->whole_free) return 0;
    return 1 + g->first->gc_base - (g->small ? since[0] : since[1]);
}

static void pt_ff_stats(gm_alloc *a, const gm_alloc_stats *d)
{
    pt_state *s = a->impl;
    gm_stat *x = (gm_stat *)&s->st;
    const gm_stat *y = (const gm_stat *)d;
    for (size_t i = 0; i < GM_ALLOC_N_STATS; i++) {
        x[i].allocated += y[i].allocated;
        x[i].freed += y[i].freed;
    }
}

static void pt_stats(gm_alloc *a, gm_alloc_stats *out)
{
    const pt_state *s = a->impl;
    *out = s->st;
    out->num_alloc_retries = a->c.num_alloc_retries;
    out->num_device_alloc = a->c.n_driver_alloc;
    out->num_device_free = a->c.n_driver_free;
    /* DeviceStats.max_split_size: the setting as int64_t, -1 when unset (SIZE_MAX) */
    out->max_split_size =
        s->conf.max_split_size == UINT64_MAX ? -1 : (int64_t)s->conf.max_split_size;
}

const gm_alloc_ops gm_alloc_pytorch = {
    .version = GM_ALLOC_VERSION,
    .free_is_local = 1, /* free() touches only the model's state; destroy() frees all */
    .prefetch_free = pt_prefetch_free,
    .name = "pytorch",
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
    .releasable = pt_releasable,
    .whole_free = pt_whole_free,
    .stats = pt_stats,
    .free_requested = pt_free_requested,
    .segment_at = pt_segment_at,
    .releasable_briefs = pt_releasable_briefs,
    .briefs = pt_briefs,
    .class_counts = pt_class_counts,
    .class_free = pt_class_free,
    .ff_state = pt_ff_state,
    .ff_segment = pt_ff_segment,
    .ff_touch = pt_ff_touch,
    .ff_stats = pt_ff_stats,
    .ff_clock = pt_ff_clock,
    .ff_advance = pt_ff_advance,
    .ff_seg_age = pt_ff_seg_age,
    .ff_part_state = pt_ff_part_state,
    .ff_part_of = pt_ff_part_of,
    .ff_part_block = pt_ff_part_block,
    .ff_part_malloc = pt_ff_part_malloc,
    .ff_part_largest_free = pt_ff_part_largest_free,
    .ff_part_stats_live = pt_ff_part_stats_live,
    .ff_part_stats = pt_ff_part_stats,
};
