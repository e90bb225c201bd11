/*
 * alloc_tf_bfc.c - TensorFlow's GPU BFC allocator ("best-fit with
 * coalescing", GPUBFCAllocator over cudaMalloc).
 *
 * Rules, from tensorflow/tsl/framework/bfc_allocator.{h,cc} and
 * tensorflow/core/common_runtime/gpu/gpu_device.cc (TF 2.x; names are
 * TensorFlow's):
 *  - RoundedBytes: requests are rounded up to 256 B (kMinAllocationSize);
 *  - 21 bins (kNumBins): bin b holds free chunks of [256 << b, 256 << (b+1))
 *    bytes, the last one everything larger; each bin is ordered by size, then
 *    address. FindChunkPtr searches from the request's bin upward and takes
 *    the first chunk that fits: the smallest, lowest-addressed;
 *  - a found chunk is split (SplitChunk: the request keeps the low part, the
 *    remainder goes to its bin without coalescing) when it is at least twice
 *    the request, or when the waste would be >= 128 MiB
 *    (max_internal_fragmentation_bytes; fragmentation_fraction * memory
 *    limit when that option is set);
 *  - a freed chunk merges with a free next and a free previous chunk of its
 *    region (TryToCoalesce);
 *  - Extend: fail if the request exceeds memory_limit - what is allocated
 *    (rounded down to 256 B); double curr_region_allocation_bytes until it
 *    holds the request; allocate min(that, available); if the driver refuses,
 *    the first time only (started_backpedal_), retry with 90 % of the size
 *    (kBackpedalFactor, in float) until it is below the request; after a
 *    success that did not need doubling, double the next region size;
 *  - curr_region_allocation_bytes starts at 2 MiB with allow_growth (capped
 *    by the limit), else at the whole limit: without memory growth the first
 *    allocation takes all of it;
 *  - regions from separate cudaMalloc calls are not merged (the CUDA
 *    sub-allocator does not SupportsCoalescing; the VMM one does:
 *    coalesce_regions:True);
 *  - garbage collection (TF_ENABLE_GPU_GARBAGE_COLLECTION, on by default):
 *    when a request cannot be served after Extend, DeallocateFreeRegions
 *    frees every region with no chunk in use, if that plus what is left
 *    under the limit covers the request, and Extend is tried again; then the
 *    allocation fails (alloc.h library_handles_oom: the `pytorch` policy adds
 *    nothing);
 *  - memory limit (SingleVirtualDeviceMemoryLimit): total memory *
 *    per_process_gpu_memory_fraction when that is set, else the free memory
 *    minus MinSystemMemory (225 MiB below 2 GiB free, else 500 / 1050 /
 *    1536 / 1800 MiB for compute capability <= 6 / 7 / 8 / above).
 * Not modelled: AllocateRawInternalWithRetry's wait (up to 10 s) for other
 * threads' frees, and timestamped (freed_by_count) chunks: a replay has one
 * thread and no stream timestamps.
 *
 * Settings (--alloc-conf): allow_growth:True|False (default False, TF's
 * default), per_process_gpu_memory_fraction:F (default 0: free memory minus
 * the reserve), garbage_collection:True|False (default True),
 * fragmentation_fraction:F (default 0), coalesce_regions:True|False
 * (default False), compute_capability:N (major version for the reserve,
 * default 8). --memory-fraction and --quota cap the memory limit; the trace's
 * empty_cache events free every region with no chunk in use.
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

#define TF_MIN_ALLOC 256ull /* kMinAllocationSize */
#define TF_NUM_BINS 21      /* kNumBins */

typedef struct tf_chunk tf_chunk;
typedef struct tf_region tf_region;

struct tf_chunk {
    RB_ENTRY(tf_chunk) node; /* in bins[bin] when free */
    uint64_t ptr, size, requested, stream;
    tf_chunk *prev, *next; /* address neighbours in the region */
    tf_region *region;
    int bin; /* -1: not in a bin */
    uint8_t in_use, category;
};

static int cmp_chunk(const tf_chunk *a, const tf_chunk *b)
{
    if (a->size != b->size) return a->size < b->size ? -1 : 1;
    return a->ptr < b->ptr ? -1 : a->ptr > b->ptr;
}

RB_HEAD(tf_bin, tf_chunk);
RB_GENERATE_STATIC(tf_bin, tf_chunk, node, cmp_chunk)

struct tf_region {
    uint64_t ptr, size, driver_bytes;
    tf_chunk *first;
    uint32_t n_chunks, n_alloc;
    uint64_t alloc_bytes, last_use_ns;
    uint32_t cat_mask;
    tf_region *prev, *next; /* address order */
};

typedef struct tf_state {
    struct tf_bin bins[TF_NUM_BINS];
    tf_region *regions;
    int allow_growth, gc, coalesce, cc_major, started, backpedal;
    double fraction, frag_fraction;
    uint64_t limit, curr_region, total_allocated;
} tf_state;

static uint64_t rounded_bytes(uint64_t n)
{
    return (n + TF_MIN_ALLOC - 1) / TF_MIN_ALLOC * TF_MIN_ALLOC;
}

static int bin_for(uint64_t bytes)
{
    uint64_t v = (bytes > 256 ? bytes : 256) >> 8;
    int b = 63 - __builtin_clzll(v);
    return b < TF_NUM_BINS - 1 ? b : TF_NUM_BINS - 1;
}

static void bin_insert(tf_state *s, tf_chunk *c)
{
    c->bin = bin_for(c->size);
    tf_bin_RB_INSERT(&s->bins[c->bin], c);
}

static void bin_remove(tf_state *s, tf_chunk *c)
{
    tf_bin_RB_REMOVE(&s->bins[c->bin], c);
    c->bin = -1;
}

/* MinSystemMemory (optimized build) */
static uint64_t min_system_memory(uint64_t available, int cc_major)
{
    if (available < (1ull << 31)) return 225 * GM_MiB;
    if (cc_major <= 6) return 500 * GM_MiB;
    if (cc_major <= 7) return 1050 * GM_MiB;
    if (cc_major <= 8) return 1536 * GM_MiB;
    return 1800 * GM_MiB;
}

/* The GPU device's memory limit and the first region size, when the
 * allocator is built (here: at the tenant's first event). */
static void start(gm_alloc *a, tf_state *s)
{
    if (s->started) return;
    const gm_device *d = a->dev;
    uint64_t cap = gm_device_capacity(a->dev), used = d->used_bytes + d->overhead_bytes;
    uint64_t available = cap > used ? cap - used : 0;
    uint64_t limit;
    if (s->fraction > 0) {
        limit = (uint64_t)((double)cap * s->fraction);
    } else {
        limit = available;
        uint64_t reserve = min_system_memory(available, s->cc_major);
        if (reserve < limit) limit -= reserve;
    }
    if (a->limits.memory_limit && a->limits.memory_limit < limit) limit = a->limits.memory_limit;
    s->limit = limit;
    s->curr_region = rounded_bytes(s->allow_growth && limit > 2 * GM_MiB ? 2 * GM_MiB : limit);
    s->started = 1;
}

/* ---------------- regions ---------------- */

static tf_region *region_add(tf_state *s, uint64_t ptr, uint64_t bytes, uint64_t drv)
{
    tf_region *prev = NULL, *cur = s->regions;
    while (cur && cur->ptr < ptr) {
        prev = cur;
        cur = cur->next;
    }
    if (s->coalesce && prev && prev->ptr + prev->size == ptr) { /* AddOrExtendAllocationRegion */
        prev->size += bytes;
        prev->driver_bytes += drv;
        return prev;
    }
    tf_region *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->ptr = ptr;
    r->size = bytes;
    r->driver_bytes = drv;
    r->prev = prev;
    r->next = cur;
    if (cur) cur->prev = r;
    if (prev)
        prev->next = r;
    else
        s->regions = r;
    return r;
}

static void region_free(gm_alloc *a, tf_state *s, tf_region *r, uint64_t now)
{
    for (tf_chunk *c = r->first, *n; c; c = n) {
        n = c->next;
        if (c->bin >= 0) bin_remove(s, c);
        free(c);
    }
    if (r->prev)
        r->prev->next = r->next;
    else
        s->regions = r->next;
    if (r->next) r->next->prev = r->prev;
    gm_alloc_driver_free(a, r->ptr, r->driver_bytes, 0, now);
    s->total_allocated -= r->size;
    free(r);
}

/* Merge c->next into c (both free, out of their bins). */
static void merge_next(tf_chunk *c)
{
    tf_chunk *n = c->next;
    c->size += n->size;
    c->next = n->next;
    if (c->next) c->next->prev = c;
    c->region->n_chunks--;
    free(n);
}

/* TryToCoalesce, then InsertFreeChunkIntoBin. */
static void coalesce_insert(tf_state *s, tf_chunk *c)
{
    if (c->next && !c->next->in_use) {
        bin_remove(s, c->next);
        merge_next(c);
    }
    if (c->prev && !c->prev->in_use) {
        tf_chunk *p = c->prev;
        bin_remove(s, p);
        merge_next(p);
        c = p;
    }
    bin_insert(s, c);
}

/* SubAllocator::Alloc: one cudaMalloc (the driver takes 2 MiB pages). */
static int sub_alloc(gm_alloc *a, uint64_t bytes, uint64_t now, uint64_t *ptr)
{
    return gm_alloc_driver_malloc(a, gm_device_round(bytes), 0, now, ptr);
}

/* Extend */
static int extend(gm_alloc *a, tf_state *s, uint64_t rounded, uint64_t now)
{
    uint64_t available = s->limit > s->total_allocated ? s->limit - s->total_allocated : 0;
    available = available / TF_MIN_ALLOC * TF_MIN_ALLOC;
    if (rounded > available) return 0;
    int increased = 0;
    while (rounded > s->curr_region) {
        s->curr_region *= 2;
        increased = 1;
    }
    uint64_t bytes = s->curr_region < available ? s->curr_region : available, ptr;
    int rc = sub_alloc(a, bytes, now, &ptr);
    if (rc != GM_OK && !s->backpedal) {
        s->backpedal = 1; /* only backpedal once */
        while (rc != GM_OK) {
            bytes = rounded_bytes((uint64_t)((float)bytes * 0.9f)); /* kBackpedalFactor */
            if (bytes < rounded) break;
            rc = sub_alloc(a, bytes, now, &ptr);
        }
    }
    if (rc != GM_OK) return 0;
    if (!increased) s->curr_region *= 2;
    tf_chunk *c = calloc(1, sizeof *c);
    tf_region *r = c ? region_add(s, ptr, bytes, gm_device_round(bytes)) : NULL;
    if (!r) {
        free(c);
        gm_alloc_driver_free(a, ptr, gm_device_round(bytes), 0, now);
        return 0;
    }
    s->total_allocated += bytes;
    c->ptr = ptr;
    c->size = bytes;
    c->region = r;
    c->bin = -1;
    r->n_chunks++;
    if (!r->first) {
        r->first = c;
    } else { /* an extended region: after its last chunk */
        tf_chunk *last = r->first;
        while (last->next)
            last = last->next;
        last->next = c;
        c->prev = last;
    }
    coalesce_insert(s, c);
    return 1;
}

/* FindChunkPtr */
static tf_chunk *find_chunk(tf_state *s, uint64_t rounded)
{
    for (int b = bin_for(rounded); b < TF_NUM_BINS; b++) {
        tf_chunk key = {.size = rounded, .ptr = 0};
        tf_chunk *c = tf_bin_RB_NFIND(&s->bins[b], &key);
        if (!c) continue;
        bin_remove(s, c);
        uint64_t max_frag =
            s->frag_fraction > 0 ? (uint64_t)(s->frag_fraction * (double)s->limit) : 128 * GM_MiB;
        if (c->size >= rounded * 2 || c->size - rounded >= max_frag) { /* SplitChunk */
            tf_chunk *n = calloc(1, sizeof *n);
            if (n) {
                n->ptr = c->ptr + rounded;
                n->size = c->size - rounded;
                n->region = c->region;
                n->prev = c;
                n->next = c->next;
                if (c->next) c->next->prev = n;
                c->next = n;
                c->size = rounded;
                c->region->n_chunks++;
                bin_insert(s, n);
            }
        }
        return c;
    }
    return NULL;
}

/* DeallocateFreeRegions: every region with no chunk in use, if that can
 * make room for the request. */
static int free_regions(gm_alloc *a, tf_state *s, uint64_t rounded, int check, uint64_t now,
                        uint64_t *freed)
{
    uint64_t total_free = 0;
    for (tf_region *r = s->regions; r; r = r->next)
        if (!r->n_alloc) total_free += r->size;
    if (total_free == 0) return 0;
    if (check && rounded > s->limit - s->total_allocated + total_free) return 0;
    for (tf_region *r = s->regions, *n; r; r = n) {
        n = r->next;
        if (!r->n_alloc) {
            *freed += r->size;
            region_free(a, s, r, now);
        }
    }
    return 1;
}

typedef struct grow_ctx {
    tf_state *s;
    uint64_t rounded, now;
    int gc_done;
    tf_chunk *got;
} grow_ctx;

static int grow(gm_alloc *a, void *ctx)
{
    grow_ctx *g = ctx;
    tf_state *s = g->s;
    if ((g->got = find_chunk(s, g->rounded))) return GM_OK; /* a policy freed room */
    if (extend(a, s, g->rounded, g->now) && (g->got = find_chunk(s, g->rounded))) return GM_OK;
    uint64_t freed = 0;
    if (s->gc && !g->gc_done) {
        g->gc_done = 1;
        if (free_regions(a, s, g->rounded, 1, g->now, &freed) && extend(a, s, g->rounded, g->now) &&
            (g->got = find_chunk(s, g->rounded)))
            return GM_OK;
    }
    return GM_EOOM;
}

static int tf_malloc(gm_alloc *a, uint64_t req, uint64_t stream, uint8_t cat, uint64_t now,
                     uint64_t *handle)
{
    tf_state *s = a->impl;
    start(a, s);
    uint64_t rounded = rounded_bytes(req ? req : 1);
    tf_chunk *c = find_chunk(s, rounded);
    if (!c) {
        gm_pressure pr = {.size = rounded, .alloc_size = rounded, .stream = stream, .now_ns = now};
        grow_ctx g = {.s = s, .rounded = rounded, .now = now};
        if (gm_policy_grow(a, &pr, grow, &g) != GM_OK) return GM_EOOM;
        c = g.got;
    }
    tf_region *r = c->region;
    c->in_use = 1;
    c->requested = req;
    c->stream = stream;
    c->category = cat;
    r->n_alloc++;
    r->alloc_bytes += c->size;
    r->last_use_ns = now;
    r->cat_mask |= 1u << cat;
    a->c.requested_bytes += req;
    a->c.allocated_bytes += c->size;
    *handle = (uint64_t)(uintptr_t)c;
    return GM_OK;
}

static void tf_free(gm_alloc *a, uint64_t handle, uint64_t now)
{
    tf_state *s = a->impl;
    tf_chunk *c = (tf_chunk *)(uintptr_t)handle;
    tf_region *r = c->region;
    a->c.requested_bytes -= c->requested;
    a->c.allocated_bytes -= c->size;
    r->n_alloc--;
    r->alloc_bytes -= c->size;
    r->last_use_ns = now;
    c->in_use = 0;
    c->requested = 0;
    coalesce_insert(s, c);
}

/* LargestFreeChunk */
static uint64_t tf_largest_free(gm_alloc *a)
{
    tf_state *s = a->impl;
    for (int b = TF_NUM_BINS - 1; b >= 0; b--) {
        tf_chunk *c = RB_MAX(tf_bin, &s->bins[b]);
        if (c) return c->size;
    }
    return 0;
}

static size_t tf_segments(gm_alloc *a, gm_seg_info *buf, size_t cap)
{
    tf_state *s = a->impl;
    size_t i = 0;
    for (const tf_region *r = s->regions; r; r = r->next, i++) {
        if (i >= cap) continue;
        gm_seg_info *o = &buf[i];
        memset(o, 0, sizeof *o);
        o->id = (uint64_t)(uintptr_t)r;
        o->addr = r->ptr;
        o->size = r->size;
        o->n_blocks = r->n_chunks;
        o->n_allocated = r->n_alloc;
        o->allocated_bytes = r->alloc_bytes;
        o->last_use_ns = r->last_use_ns;
        o->category_mask = r->cat_mask;
        for (const tf_chunk *c = r->first; c; c = c->next)
            if (!c->in_use && c->size > o->largest_free) o->largest_free = c->size;
        if (!r->n_alloc) o->releasable = r->size;
    }
    return i;
}

/* DeallocateRegions of one region with no chunk in use. */
static uint64_t tf_release(gm_alloc *a, uint64_t id, uint64_t now)
{
    tf_state *s = a->impl;
    tf_region *r = (tf_region *)(uintptr_t)id;
    if (r->n_alloc) return 0;
    uint64_t n = r->size;
    region_free(a, s, r, now);
    a->c.released_bytes += n;
    return n;
}

static uint64_t tf_empty_cache(gm_alloc *a, uint64_t now)
{
    tf_state *s = a->impl;
    uint64_t freed = 0;
    free_regions(a, s, 0, 0, now, &freed);
    a->c.released_bytes += freed;
    return freed;
}

static uint64_t tf_block_size(gm_alloc *a, uint64_t size)
{
    (void)a;
    return rounded_bytes(size ? size : 1);
}

/* What Extend would ask the driver for now. */
static uint64_t tf_segment_size(gm_alloc *a, uint64_t size, int *small_pool)
{
    tf_state *s = a->impl;
    start(a, s);
    *small_pool = 0;
    uint64_t rounded = tf_block_size(a, size), curr = s->curr_region ? s->curr_region : rounded;
    while (rounded > curr)
        curr *= 2;
    uint64_t available = s->limit > s->total_allocated ? s->limit - s->total_allocated : 0;
    return gm_device_round(curr < available ? curr : available > rounded ? available : rounded);
}

static uint64_t tf_block_addr(gm_alloc *a, uint64_t handle)
{
    (void)a;
    return ((const tf_chunk *)(uintptr_t)handle)->ptr;
}

static int tf_create(gm_alloc *a, const char *conf, gm_err *err)
{
    gm_settings st;
    if (gm_settings_parse("allocator tf-bfc", conf, &st, err)) return err->code;
    tf_state *s = calloc(1, sizeof *s);
    if (!s) return gm_errf(err, GM_ENOMEM, "out of memory");
    for (int b = 0; b < TF_NUM_BINS; b++)
        RB_INIT(&s->bins[b]);
    s->gc = 1;
    long cc = 8;
    if (gm_settings_bool(&st, "allow_growth", &s->allow_growth, err) < 0 ||
        gm_settings_double(&st, "per_process_gpu_memory_fraction", 0, 1, &s->fraction, err) < 0 ||
        gm_settings_bool(&st, "garbage_collection", &s->gc, err) < 0 ||
        gm_settings_double(&st, "fragmentation_fraction", 0, 1, &s->frag_fraction, err) < 0 ||
        gm_settings_bool(&st, "coalesce_regions", &s->coalesce, err) < 0 ||
        gm_settings_int(&st, "compute_capability", 1, 99, &cc, err) < 0 ||
        gm_settings_check(&st,
                          "allow_growth, per_process_gpu_memory_fraction, garbage_collection, "
                          "fragmentation_fraction, coalesce_regions, compute_capability",
                          err)) {
        free(s);
        return err->code;
    }
    s->cc_major = (int)cc;
    a->limits.library_handles_oom = 1;
    a->impl = s;
    return GM_OK;
}

static void tf_destroy(gm_alloc *a)
{
    tf_state *s = a->impl;
    if (!s) return;
    for (tf_region *r = s->regions, *n; r; r = n) {
        n = r->next;
        uint64_t ns;
        a->dev->ops->mem_free(a->dev, r->ptr, r->driver_bytes, &ns);
        for (tf_chunk *c = r->first, *cn; c; c = cn) {
            cn = c->next;
            free(c);
        }
        free(r);
    }
    free(s);
    a->impl = NULL;
}

const gm_alloc_ops gm_alloc_tf_bfc = {
    .version = GM_ALLOC_VERSION,
    .free_is_local = 1, /* free() touches only the model's state; destroy() frees all */
    .name = "tf-bfc",
    .summary = "TensorFlow's GPU BFC allocator (allow_growth, per_process_gpu_memory_fraction)",
    .cost = 0.75,
    .create = tf_create,
    .destroy = tf_destroy,
    .malloc = tf_malloc,
    .free = tf_free,
    .largest_free = tf_largest_free,
    .restore = gm_alloc_restore_live,
    .segments = tf_segments,
    .release = tf_release,
    .empty_cache = tf_empty_cache,
    .block_size = tf_block_size,
    .segment_size = tf_segment_size,
    .block_addr = tf_block_addr,
};
