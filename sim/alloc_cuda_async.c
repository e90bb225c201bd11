/*
 * alloc_cuda_async.c - CUDA's stream-ordered allocator (cudaMallocAsync /
 * cudaFreeAsync on the device's default memory pool), as PyTorch drives it
 * with PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync.
 *
 * Documented rules (CUDA Runtime API, cudaMemPoolSetAttribute and
 * cudaMemPoolTrimTo; CUDA Programming Guide, "Stream Ordered Memory
 * Allocator": memory reuse policies, physical page caching):
 *  - the pool keeps memory freed with cudaFreeAsync for reuse; when it holds
 *    more than cudaMemPoolAttrReleaseThreshold bytes it releases memory to
 *    the OS at the next stream, event or context synchronization (the
 *    attribute's default is 0: release all it can at every synchronization);
 *  - it cannot release OS allocations that back outstanding allocations, and
 *    memory freed but whose completion the host has not observed (by a
 *    synchronize) can count as outstanding; the OS allocations may be at a
 *    coarser granularity than the user's;
 *  - a free is reusable at once by later work on the same stream (stream
 *    order); by another stream when a stream-ordered dependency exists
 *    (cudaMemPoolReuseFollowEventDependencies), or when the free has
 *    completed (cudaMemPoolReuseAllowOpportunistic; the guide: even with it
 *    off, memory becomes reusable once a stream is synchronized with the
 *    host); and, when the driver fails to get more physical memory, by
 *    inserting the missing dependency itself
 *    (cudaMemPoolReuseAllowInternalDependencies). All three default on.
 *
 * What PyTorch's backend does (c10/cuda/CUDAMallocAsyncAllocator.cpp):
 *  - lazy_init_device sets the release threshold to UINT64_MAX (the pool
 *    never trims on its own) and enables all three reuse policies;
 *  - mallocAsync: if pytorch_used_bytes + size > the limit that
 *    setMemoryFraction set (fraction * total memory) it is an OOM without
 *    touching the pool; a failed cudaMallocAsync is raised at once, with no
 *    release and retry (so here: alloc.h library_handles_oom);
 *  - emptyCache: cudaDeviceSynchronize, then cudaMemPoolTrimTo(pool, 0);
 *  - a block is freed with cudaFreeAsync on the stream that allocated it
 *    (record_stream uses go through a unifying stream, which a trace does
 *    not record).
 *
 * The model (choices where the documentation is silent, README "Allocator
 * models"):
 *  - user allocations are rounded to 256 B (CUDA's guaranteed alignment);
 *    the pool grows by an OS allocation of the request rounded up to 2 MiB
 *    (GM_DRIVER_GRANULARITY), one driver allocation each ("chunk"); blocks
 *    are carved best fit (smallest free block that fits, lowest address on
 *    ties) and merge with free neighbours in their chunk;
 *  - a free block is pending on the stream that freed it (usable by that
 *    stream) until a synchronization, after which it is ready (usable by
 *    every stream); pending and ready blocks, or blocks pending on two
 *    streams, do not merge until the synchronization;
 *  - synchronizations: the trace's empty_cache events, every sync_interval
 *    of trace time if that setting is given, and a policy's release (which
 *    PyTorch would do through emptyCache); at each, pending frees become
 *    ready, then whole free chunks are released (lowest address first)
 *    while the pool holds more than the release threshold;
 *  - an allocation takes, in order: the best fitting block usable by its
 *    stream; a new chunk; with internal dependencies, the best fitting
 *    block pending on another stream; then what the release policy frees.
 *
 * Settings (--alloc-conf): release_threshold:SIZE|max (default max, as
 * PyTorch sets it; 0 is CUDA's own default), sync_interval:TIME (default:
 * none), reuse_allow_internal_dependencies:True|False (default True);
 * backend:cudaMallocAsync and PyTorch's other keys are accepted (PyTorch's
 * async backend reads none of the native allocator's options).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef __unused
#define __unused __attribute__((unused))
#endif
#include <bsd/sys/tree.h>

#include "alloc.h"
#include "alloc_settings.h"
#include "policy.h"
#include "traces/alloc_conf.h"

#define CA_ALIGN 256ull
#define CA_KNOWN                                                                                   \
    "release_threshold, sync_interval, reuse_allow_internal_dependencies, backend, and "           \
    "PyTorch's PYTORCH_CUDA_ALLOC_CONF keys (accepted, no effect)"

enum { CA_ALLOCATED = 0, CA_PENDING = 1, CA_READY = 2 };

typedef struct ca_block ca_block;
typedef struct ca_chunk ca_chunk;

struct ca_block {
    RB_ENTRY(ca_block) node; /* pending tree or ready tree, by state */
    uint64_t ptr, size, requested;
    uint64_t stream; /* allocated: its stream; pending: the stream that freed it */
    ca_block *prev, *next;
    ca_chunk *chunk;
    uint8_t state, category;
};

struct ca_chunk {
    uint64_t base, size, stream;
    ca_block *first;
    uint32_t n_blocks, n_alloc;
    uint64_t alloc_bytes, last_use_ns;
    uint32_t cat_mask;
    ca_chunk *prev, *next; /* address order (the device hands out rising addresses) */
};

static int cmp_pending(const ca_block *a, const ca_block *b)
{
    if (a->stream != b->stream) return a->stream < b->stream ? -1 : 1;
    if (a->size != b->size) return a->size < b->size ? -1 : 1;
    return a->ptr < b->ptr ? -1 : a->ptr > b->ptr;
}

static int cmp_ready(const ca_block *a, const ca_block *b)
{
    if (a->size != b->size) return a->size < b->size ? -1 : 1;
    return a->ptr < b->ptr ? -1 : a->ptr > b->ptr;
}

RB_HEAD(ca_pending_tree, ca_block);
RB_HEAD(ca_ready_tree, ca_block);
RB_GENERATE_STATIC(ca_pending_tree, ca_block, node, cmp_pending)
RB_GENERATE_STATIC(ca_ready_tree, ca_block, node, cmp_ready)

typedef struct ca_state {
    struct ca_pending_tree pending;
    struct ca_ready_tree ready;
    ca_chunk *chunks, *last; /* address order */
    uint32_t n_chunks;
    uint64_t threshold;  /* cudaMemPoolAttrReleaseThreshold */
    uint64_t sync_every; /* ns of trace time, 0 = none */
    uint64_t next_sync;  /* next sync_interval boundary */
    int internal_deps;   /* cudaMemPoolReuseAllowInternalDependencies */
} ca_state;

static uint64_t align_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) / a * a;
}

/* ---------------- free blocks ---------------- */

static void tree_insert(ca_state *s, ca_block *b)
{
    if (b->state == CA_PENDING)
        ca_pending_tree_RB_INSERT(&s->pending, b);
    else
        ca_ready_tree_RB_INSERT(&s->ready, b);
}

static void tree_remove(ca_state *s, ca_block *b)
{
    if (b->state == CA_PENDING)
        ca_pending_tree_RB_REMOVE(&s->pending, b);
    else
        ca_ready_tree_RB_REMOVE(&s->ready, b);
}

/* Two free blocks merge when one stream may use both alike: both ready, or
 * both pending on the same stream. */
static int mergeable(const ca_block *a, const ca_block *b)
{
    if (!b || b->state == CA_ALLOCATED || a->state != b->state) return 0;
    return a->state == CA_READY || a->stream == b->stream;
}

/* Absorb free neighbour src (in a tree) into dst (in no tree). */
static void absorb(ca_state *s, ca_block *dst, ca_block *src)
{
    tree_remove(s, src);
    if (dst->prev == src) {
        dst->ptr = src->ptr;
        dst->prev = src->prev;
        if (dst->prev)
            dst->prev->next = dst;
        else
            dst->chunk->first = dst;
    } else {
        dst->next = src->next;
        if (dst->next) dst->next->prev = dst;
    }
    dst->size += src->size;
    dst->chunk->n_blocks--;
    free(src);
}

static void coalesce_insert(ca_state *s, ca_block *b)
{
    if (mergeable(b, b->prev)) absorb(s, b, b->prev);
    if (mergeable(b, b->next)) absorb(s, b, b->next);
    tree_insert(s, b);
}

/* The best fit among blocks stream may use without a new dependency:
 * pending on that stream, or ready. Not removed. */
static ca_block *best_usable(ca_state *s, uint64_t size, uint64_t stream)
{
    ca_block key = {.stream = stream, .size = size, .ptr = 0};
    ca_block *p = ca_pending_tree_RB_NFIND(&s->pending, &key);
    if (p && p->stream != stream) p = NULL;
    ca_block *r = ca_ready_tree_RB_NFIND(&s->ready, &key);
    if (!p) return r;
    if (!r) return p;
    return cmp_ready(p, r) <= 0 ? p : r;
}

/* The best fit among blocks pending on other streams (the driver would
 * insert a wait on the freeing stream). */
static ca_block *best_other_stream(ca_state *s, uint64_t size, uint64_t stream)
{
    ca_block *best = NULL;
    ca_block *b;
    RB_FOREACH(b, ca_pending_tree, &s->pending)
    {
        if (b->stream == stream || b->size < size) continue;
        if (!best || cmp_ready(b, best) < 0) best = b;
    }
    return best;
}

/* ---------------- chunks ---------------- */

static ca_chunk *chunk_new(gm_alloc *a, ca_state *s, uint64_t bytes, uint64_t stream, uint64_t now)
{
    uint64_t ptr;
    if (gm_alloc_driver_malloc(a, bytes, stream, now, &ptr) != GM_OK) return NULL;
    ca_chunk *c = calloc(1, sizeof *c);
    ca_block *b = calloc(1, sizeof *b);
    if (!c || !b) {
        free(c);
        free(b);
        gm_alloc_driver_free(a, ptr, bytes, stream, now);
        return NULL;
    }
    c->base = ptr;
    c->size = bytes;
    c->stream = stream;
    c->first = b;
    c->n_blocks = 1;
    b->ptr = ptr;
    b->size = bytes;
    b->chunk = c;
    b->state = CA_READY; /* never used: any stream */
    /* keep address order: the device's addresses rise, but be safe */
    ca_chunk *after = s->last;
    while (after && after->base > ptr)
        after = after->prev;
    c->prev = after;
    c->next = after ? after->next : s->chunks;
    if (c->next)
        c->next->prev = c;
    else
        s->last = c;
    if (after)
        after->next = c;
    else
        s->chunks = c;
    s->n_chunks++;
    return c;
}

/* Release a chunk whose blocks are all free and ready (one block then). */
static uint64_t chunk_release(gm_alloc *a, ca_state *s, ca_chunk *c, uint64_t now)
{
    uint64_t n = c->size;
    ca_block *b = c->first;
    tree_remove(s, b);
    free(b);
    if (c->prev)
        c->prev->next = c->next;
    else
        s->chunks = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        s->last = c->prev;
    s->n_chunks--;
    gm_alloc_driver_free(a, c->base, c->size, c->stream, now);
    free(c);
    return n;
}

/* A synchronization: every pending free becomes ready (and merges), then
 * whole free chunks go back while the pool holds more than keep bytes.
 * Returns the bytes released. */
static uint64_t sync_trim(gm_alloc *a, ca_state *s, uint64_t keep, uint64_t now)
{
    ca_block *b;
    while ((b = RB_MIN(ca_pending_tree, &s->pending))) {
        ca_pending_tree_RB_REMOVE(&s->pending, b);
        b->state = CA_READY;
        coalesce_insert(s, b);
    }
    uint64_t n = 0;
    for (ca_chunk *c = s->chunks, *next; c && a->c.reserved_bytes > keep; c = next) {
        next = c->next;
        if (c->n_alloc == 0) n += chunk_release(a, s, c, now);
    }
    return n;
}

/* sync_interval: a synchronization at each boundary the trace time passed. */
static void maybe_sync(gm_alloc *a, ca_state *s, uint64_t now)
{
    if (!s->sync_every || now < s->next_sync) return;
    sync_trim(a, s, s->threshold, now);
    s->next_sync = (now / s->sync_every + 1) * s->sync_every;
}

/* ---------------- the allocator ---------------- */

typedef struct grow_ctx {
    ca_state *s;
    uint64_t size, stream, now;
    ca_block *got;
} grow_ctx;

/* What cudaMallocAsync does when nothing usable fits: a new chunk, else
 * (internal dependencies) another stream's pending free. */
static int grow(gm_alloc *a, void *ctx)
{
    grow_ctx *g = ctx;
    ca_chunk *c = chunk_new(a, g->s, gm_device_round(g->size), g->stream, g->now);
    if (c) {
        g->got = c->first;
        return GM_OK;
    }
    if (g->s->internal_deps && (g->got = best_other_stream(g->s, g->size, g->stream))) {
        tree_remove(g->s, g->got);
        return GM_OK;
    }
    /* nothing usable: perhaps a policy released; look again */
    if ((g->got = best_usable(g->s, g->size, g->stream))) {
        tree_remove(g->s, g->got);
        return GM_OK;
    }
    return GM_EOOM;
}

static int ca_malloc(gm_alloc *a, uint64_t req, uint64_t stream, uint8_t cat, uint64_t now,
                     uint64_t *handle)
{
    ca_state *s = a->impl;
    maybe_sync(a, s, now);
    /* PyTorch's setMemoryFraction limit is on the bytes it handed out */
    if (a->limits.memory_limit && a->c.requested_bytes + req > a->limits.memory_limit)
        return GM_EOOM;
    uint64_t size = align_up(req ? req : 1, CA_ALIGN);
    ca_block *b = best_usable(s, size, stream);
    if (b) {
        tree_remove(s, b);
    } else {
        gm_pressure pr = {
            .size = size, .alloc_size = gm_device_round(size), .stream = stream, .now_ns = now};
        grow_ctx g = {.s = s, .size = size, .stream = stream, .now = now};
        if (gm_policy_grow(a, &pr, grow, &g) != GM_OK) return GM_EOOM;
        b = g.got;
    }
    if (b->size > size) { /* the request takes the low part; the rest stays as it was */
        ca_block *rest = calloc(1, sizeof *rest);
        if (!rest) {
            tree_insert(s, b);
            return GM_EOOM;
        }
        rest->ptr = b->ptr + size;
        rest->size = b->size - size;
        rest->stream = b->stream;
        rest->state = b->state;
        rest->chunk = b->chunk;
        rest->prev = b;
        rest->next = b->next;
        if (b->next) b->next->prev = rest;
        b->next = rest;
        b->size = size;
        b->chunk->n_blocks++;
        tree_insert(s, rest);
    }
    ca_chunk *c = b->chunk;
    b->state = CA_ALLOCATED;
    b->stream = stream;
    b->requested = req;
    b->category = cat;
    c->n_alloc++;
    c->alloc_bytes += b->size;
    c->last_use_ns = now;
    c->cat_mask |= 1u << cat;
    a->c.requested_bytes += req;
    a->c.allocated_bytes += b->size;
    *handle = (uint64_t)(uintptr_t)b;
    return GM_OK;
}

static void ca_free(gm_alloc *a, uint64_t handle, uint64_t now)
{
    ca_state *s = a->impl;
    maybe_sync(a, s, now);
    ca_block *b = (ca_block *)(uintptr_t)handle;
    ca_chunk *c = b->chunk;
    a->c.requested_bytes -= b->requested;
    a->c.allocated_bytes -= b->size;
    c->n_alloc--;
    c->alloc_bytes -= b->size;
    c->last_use_ns = now;
    b->requested = 0;
    b->state = CA_PENDING; /* cudaFreeAsync on its own stream */
    coalesce_insert(s, b);
}

static uint64_t ca_largest_free(gm_alloc *a)
{
    ca_state *s = a->impl;
    uint64_t best = 0;
    ca_block *r = RB_MAX(ca_ready_tree, &s->ready), *b;
    if (r) best = r->size;
    RB_FOREACH(b, ca_pending_tree, &s->pending)
    if (b->size > best) best = b->size;
    return best;
}

/* ---------------- policy view ---------------- */

static size_t ca_segments(gm_alloc *a, gm_seg_info *buf, size_t cap)
{
    ca_state *s = a->impl;
    size_t i = 0;
    for (const ca_chunk *c = s->chunks; c; c = c->next, i++) {
        if (i >= cap) continue;
        gm_seg_info *o = &buf[i];
        memset(o, 0, sizeof *o);
        o->id = (uint64_t)(uintptr_t)c;
        o->addr = c->base;
        o->size = c->size;
        o->stream = c->stream;
        o->n_blocks = c->n_blocks;
        o->n_allocated = c->n_alloc;
        o->allocated_bytes = c->alloc_bytes;
        o->last_use_ns = c->last_use_ns;
        o->category_mask = c->cat_mask;
        for (const ca_block *b = c->first; b; b = b->next)
            if (b->state != CA_ALLOCATED && b->size > o->largest_free) o->largest_free = b->size;
        if (c->n_alloc == 0) o->releasable = c->size; /* after the sync a release implies */
    }
    return i;
}

/* A policy's release of one chunk: a synchronization (pending frees become
 * ready), then cudaMemPoolTrimTo of that chunk. */
static uint64_t ca_release(gm_alloc *a, uint64_t id, uint64_t now)
{
    ca_state *s = a->impl;
    ca_chunk *c = (ca_chunk *)(uintptr_t)id;
    if (c->n_alloc) return 0;
    sync_trim(a, s, UINT64_MAX, now);
    uint64_t n = chunk_release(a, s, c, now);
    a->c.released_bytes += n;
    return n;
}

/* emptyCache: cudaDeviceSynchronize + cudaMemPoolTrimTo(pool, 0). */
static uint64_t ca_empty_cache(gm_alloc *a, uint64_t now)
{
    ca_state *s = a->impl;
    uint64_t n = sync_trim(a, s, 0, now);
    a->c.released_bytes += n;
    return n;
}

static uint64_t ca_block_size(gm_alloc *a, uint64_t size)
{
    (void)a;
    return align_up(size ? size : 1, CA_ALIGN);
}

static uint64_t ca_segment_size(gm_alloc *a, uint64_t size, int *small_pool)
{
    *small_pool = 0;
    return gm_device_round(ca_block_size(a, size));
}

static uint64_t ca_block_addr(gm_alloc *a, uint64_t handle)
{
    (void)a;
    return ((const ca_block *)(uintptr_t)handle)->ptr;
}

/* ---------------- lifecycle ---------------- */

static int ca_create(gm_alloc *a, const char *conf, gm_err *err)
{
    gm_settings st;
    if (gm_settings_parse("allocator cuda-async", conf, &st, err)) return err->code;
    ca_state *s = calloc(1, sizeof *s);
    if (!s) return gm_errf(err, GM_ENOMEM, "out of memory");
    RB_INIT(&s->pending);
    RB_INIT(&s->ready);
    s->threshold = UINT64_MAX;
    s->internal_deps = 1;
    int rc = GM_OK;
    const char *v = gm_settings_get(&st, "release_threshold");
    if (v && strcmp(v, "max") &&
        (rc = gm_settings_size(&st, "release_threshold", &s->threshold, err)) < 0)
        goto fail;
    if ((rc = gm_settings_time(&st, "sync_interval", &s->sync_every, err)) < 0) goto fail;
    if ((rc = gm_settings_bool(&st, "reuse_allow_internal_dependencies", &s->internal_deps, err)) <
        0)
        goto fail;
    v = gm_settings_get(&st, "backend");
    if (v && strcmp(v, "cudaMallocAsync")) {
        rc = gm_errf(err, GM_EINVAL,
                     "allocator cuda-async: backend:%s is not the cudaMallocAsync backend; use "
                     "--allocator pytorch for PyTorch's native allocator",
                     v);
        goto fail;
    }
    for (int i = 0; i < st.n; i++) { /* PyTorch's keys: valid, and ignored by this backend */
        if (st.v[i].used) continue;
        char one[330];
        gm_pt_conf c;
        gm_err e2 = {0};
        snprintf(one, sizeof one, "%s:%s", st.v[i].key, st.v[i].val);
        if (gm_pt_conf_parse(one, &c, &e2) == GM_OK) st.v[i].used = 1;
    }
    if ((rc = gm_settings_check(&st, CA_KNOWN, err))) goto fail;
    s->next_sync = s->sync_every;
    a->limits.library_handles_oom = 1;
    a->impl = s;
    return GM_OK;
fail:
    free(s);
    return rc;
}

static void ca_destroy(gm_alloc *a)
{
    ca_state *s = a->impl;
    if (!s) return;
    for (ca_chunk *c = s->chunks, *next; c; c = next) {
        next = c->next;
        uint64_t ns;
        a->dev->ops->mem_free(a->dev, c->base, c->size, &ns);
        for (ca_block *b = c->first, *bn; b; b = bn) {
            bn = b->next;
            free(b);
        }
        free(c);
    }
    free(s);
    a->impl = NULL;
}

const gm_alloc_ops gm_alloc_cuda_async = {
    .version = GM_ALLOC_VERSION,
    .name = "cuda-async",
    .summary = "CUDA's stream-ordered pool (cudaMallocAsync; PyTorch backend:cudaMallocAsync)",
    .cost = 1.45,
    .create = ca_create,
    .destroy = ca_destroy,
    .malloc = ca_malloc,
    .free = ca_free,
    .largest_free = ca_largest_free,
    .restore = gm_alloc_restore_live,
    .segments = ca_segments,
    .release = ca_release,
    .empty_cache = ca_empty_cache,
    .block_size = ca_block_size,
    .segment_size = ca_segment_size,
    .block_addr = ca_block_addr,
};
