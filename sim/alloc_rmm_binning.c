/*
 * alloc_rmm_binning.c - RAPIDS RMM's binning_memory_resource: fixed-size
 * bins for small requests, cudaMalloc (cuda_memory_resource) for the rest.
 *
 * Rules, from rmm/mr/device/binning_memory_resource.hpp,
 * fixed_size_memory_resource.hpp, detail/fixed_size_free_list.hpp and
 * detail/stream_ordered_memory_resource.hpp (RMM 24.x):
 *  - binning_memory_resource(upstream, min_size_exponent, max_size_exponent)
 *    adds one bin per power of two 2^min .. 2^max (add_bin aligns each size
 *    up to 256 B); each bin is a fixed_size_memory_resource of that block
 *    size;
 *  - a request goes to the smallest bin whose size is >= the request
 *    (resource_bins_.lower_bound); larger requests go to the upstream
 *    resource directly (here cudaMalloc/cudaFree per allocation);
 *  - fixed_size_memory_resource allocates 128 blocks at a time
 *    (default_blocks_to_preallocate) in one upstream allocation, the first
 *    128 when it is constructed, then 128 more whenever a stream finds no
 *    free block; it never gives them back before it is destroyed;
 *  - its free lists are per stream and first-in first-out (free pushes to
 *    the back, allocate pops the front); a stream with an empty list takes
 *    the front block of another stream's list (waiting on that stream's
 *    event), else merges the other lists into its own, else grows.
 * An OOM is thrown at once (alloc.h: library_handles_oom); nothing cached
 * can be released by a policy.
 *
 * Settings (--alloc-conf): min_size_exponent:N (default 18, 256 KiB) and
 * max_size_exponent:N (default 22, 4 MiB), the example of RMM's own
 * documentation; 8 <= min <= max <= 40.
 */
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "alloc_settings.h"
#include "policy.h"

#define RB_ALIGN 256ull
#define RB_PREALLOC 128ull /* fixed_size_memory_resource::default_blocks_to_preallocate */
#define RB_MAX_BINS 33

typedef struct rb_block rb_block;
typedef struct rb_chunk rb_chunk;
typedef struct rb_fifo rb_fifo;

struct rb_block {
    uint64_t ptr, size, requested, stream;
    rb_block *prev, *next; /* in a stream's FIFO when free */
    rb_chunk *chunk;       /* NULL: a direct upstream allocation */
    rb_fifo *fifo;         /* free: the list holding it */
    uint8_t category;
};

struct rb_chunk { /* 128 blocks of one bin, one upstream allocation */
    uint64_t base, bytes, stream;
    int bin;
    rb_block *blocks; /* RB_PREALLOC of them; a direct allocation: one */
    uint32_t n_alloc;
    uint64_t last_use_ns;
    uint32_t cat_mask;
    rb_chunk *next;
};

struct rb_fifo {
    uint64_t stream;
    rb_block *head, *tail;
    uint64_t n;
    rb_fifo *next; /* first-seen order */
};

typedef struct rb_bin {
    uint64_t size;
    rb_fifo *lists;
} rb_bin;

typedef struct rb_state {
    rb_bin bins[RB_MAX_BINS];
    int n_bins;
    rb_chunk *chunks; /* bins' chunks and direct allocations */
    int started;
} rb_state;

/* ---------------- FIFO lists ---------------- */

static void fifo_push(rb_fifo *f, rb_block *b)
{
    b->next = NULL;
    b->prev = f->tail;
    if (f->tail)
        f->tail->next = b;
    else
        f->head = b;
    f->tail = b;
    b->fifo = f;
    f->n++;
}

static rb_block *fifo_pop(rb_fifo *f)
{
    rb_block *b = f->head;
    if (!b) return NULL;
    f->head = b->next;
    if (f->head)
        f->head->prev = NULL;
    else
        f->tail = NULL;
    b->next = b->prev = NULL;
    b->fifo = NULL;
    f->n--;
    return b;
}

static rb_fifo *fifo_find(rb_bin *bin, uint64_t stream)
{
    for (rb_fifo *f = bin->lists; f; f = f->next)
        if (f->stream == stream) return f;
    return NULL;
}

static rb_fifo *fifo_get(rb_bin *bin, uint64_t stream)
{
    rb_fifo *f = fifo_find(bin, stream), **pp = &bin->lists;
    if (f) return f;
    f = calloc(1, sizeof *f);
    if (!f) return NULL;
    f->stream = stream;
    while (*pp)
        pp = &(*pp)->next;
    *pp = f;
    return f;
}

/* fixed_size_free_list::insert(free_list&&): splice src at the end of dst. */
static void fifo_merge(rb_bin *bin, rb_fifo *dst, rb_fifo *src)
{
    rb_block *b;
    while ((b = fifo_pop(src)))
        fifo_push(dst, b);
    rb_fifo **pp = &bin->lists;
    while (*pp != src)
        pp = &(*pp)->next;
    *pp = src->next;
    free(src);
}

/* ---------------- upstream ---------------- */

static rb_chunk *chunk_new(gm_alloc *a, rb_state *s, int bin, uint64_t bytes, uint64_t nblocks,
                           uint64_t block_size, uint64_t stream, uint64_t now)
{
    uint64_t drv = gm_device_round(bytes), ptr;
    if (a->limits.memory_limit && a->c.reserved_bytes + drv > a->limits.memory_limit) return NULL;
    if (gm_alloc_driver_malloc(a, drv, stream, now, &ptr) != GM_OK) return NULL;
    rb_chunk *c = calloc(1, sizeof *c);
    rb_block *v = calloc(nblocks, sizeof *v);
    if (!c || !v) {
        free(c);
        free(v);
        gm_alloc_driver_free(a, ptr, drv, stream, now);
        return NULL;
    }
    c->base = ptr;
    c->bytes = drv;
    c->stream = stream;
    c->bin = bin;
    c->blocks = v;
    for (uint64_t i = 0; i < nblocks; i++) {
        v[i].ptr = ptr + i * block_size;
        v[i].size = block_size;
        v[i].chunk = c;
    }
    c->next = s->chunks;
    s->chunks = c;
    return c;
}

static void chunk_unlink_free(gm_alloc *a, rb_state *s, rb_chunk *c, uint64_t now)
{
    rb_chunk **pp = &s->chunks;
    while (*pp != c)
        pp = &(*pp)->next;
    *pp = c->next;
    gm_alloc_driver_free(a, c->base, c->bytes, c->stream, now);
    free(c->blocks);
    free(c);
}

/* blocks_from_upstream: 128 blocks into the stream's list. */
static int bin_grow(gm_alloc *a, rb_state *s, int bin, rb_fifo *f, uint64_t now)
{
    uint64_t bs = s->bins[bin].size;
    rb_chunk *c = chunk_new(a, s, bin, bs * RB_PREALLOC, RB_PREALLOC, bs, f->stream, now);
    if (!c) return GM_EOOM;
    for (uint64_t i = 0; i < RB_PREALLOC; i++)
        fifo_push(f, &c->blocks[i]);
    return GM_OK;
}

/* Each bin's first 128 blocks, allocated when the resource is built (here:
 * at the tenant's first event), in the default stream's list. */
static int start(gm_alloc *a, rb_state *s)
{
    if (s->started) return GM_OK;
    for (int i = 0; i < s->n_bins; i++) {
        rb_fifo *f = fifo_get(&s->bins[i], 0);
        if (!f || bin_grow(a, s, i, f, 0) != GM_OK) return GM_EOOM;
    }
    s->started = 1;
    return GM_OK;
}

/* ---------------- the allocator ---------------- */

typedef struct grow_ctx {
    rb_state *s;
    int bin;
    rb_fifo *own;
    uint64_t size, stream, now;
    rb_block *got;
} grow_ctx;

static int grow(gm_alloc *a, void *ctx)
{
    grow_ctx *g = ctx;
    if (g->bin < 0) { /* upstream: one cudaMalloc */
        rb_chunk *c = chunk_new(a, g->s, -1, g->size, 1, g->size, g->stream, g->now);
        if (!c) return GM_EOOM;
        g->got = &c->blocks[0];
        return GM_OK;
    }
    if (bin_grow(a, g->s, g->bin, g->own, g->now) != GM_OK) return GM_EOOM;
    g->got = fifo_pop(g->own);
    return GM_OK;
}

static int bin_for(const rb_state *s, uint64_t size)
{
    for (int i = 0; i < s->n_bins; i++)
        if (s->bins[i].size >= size) return i;
    return -1;
}

static int rbn_malloc(gm_alloc *a, uint64_t req, uint64_t stream, uint8_t cat, uint64_t now,
                      uint64_t *handle)
{
    rb_state *s = a->impl;
    if (start(a, s) != GM_OK) return GM_EOOM;
    uint64_t size = req ? req : 1;
    int bin = bin_for(s, size);
    rb_block *b = NULL;
    rb_fifo *own = NULL;
    if (bin >= 0) {
        rb_bin *B = &s->bins[bin];
        if (!(own = fifo_get(B, stream))) return GM_EOOM;
        b = fifo_pop(own);
        for (rb_fifo *o = B->lists; !b && o; o = o->next) /* another stream's front block */
            if (o != own) b = fifo_pop(o);
        /* (every other list is empty here: merging them changes nothing) */
        for (rb_fifo *o = B->lists, *next; !b && o; o = next) {
            next = o->next;
            if (o != own) fifo_merge(B, own, o);
        }
    } else {
        size = (size + RB_ALIGN - 1) / RB_ALIGN * RB_ALIGN;
    }
    if (!b) {
        gm_pressure pr = {.size = bin >= 0 ? s->bins[bin].size : size,
                          .alloc_size = bin >= 0 ? s->bins[bin].size * RB_PREALLOC : size,
                          .stream = stream,
                          .now_ns = now};
        grow_ctx g = {.s = s, .bin = bin, .own = own, .size = size, .stream = stream, .now = now};
        if (gm_policy_grow(a, &pr, grow, &g) != GM_OK) return GM_EOOM;
        b = g.got;
    }
    rb_chunk *c = b->chunk;
    b->stream = stream;
    b->requested = req;
    b->category = cat;
    c->n_alloc++;
    c->last_use_ns = now;
    c->cat_mask |= 1u << cat;
    a->c.requested_bytes += req;
    a->c.allocated_bytes += b->size;
    *handle = (uint64_t)(uintptr_t)b;
    return GM_OK;
}

static void rbn_free(gm_alloc *a, uint64_t handle, uint64_t now)
{
    rb_state *s = a->impl;
    rb_block *b = (rb_block *)(uintptr_t)handle;
    rb_chunk *c = b->chunk;
    a->c.requested_bytes -= b->requested;
    a->c.allocated_bytes -= b->size;
    b->requested = 0;
    c->n_alloc--;
    c->last_use_ns = now;
    if (c->bin < 0) { /* cuda_memory_resource: cudaFree at once */
        chunk_unlink_free(a, s, c, now);
        return;
    }
    rb_fifo *f = fifo_get(&s->bins[c->bin], b->stream);
    if (f) fifo_push(f, b);
}

static uint64_t rbn_largest_free(gm_alloc *a)
{
    rb_state *s = a->impl;
    for (int i = s->n_bins - 1; i >= 0; i--)
        for (rb_fifo *f = s->bins[i].lists; f; f = f->next)
            if (f->n) return s->bins[i].size;
    return 0;
}

static size_t rbn_segments(gm_alloc *a, gm_seg_info *buf, size_t cap)
{
    rb_state *s = a->impl;
    size_t i = 0;
    for (const rb_chunk *c = s->chunks; c; c = c->next, i++) {
        if (i >= cap) continue;
        gm_seg_info *o = &buf[i];
        memset(o, 0, sizeof *o);
        uint64_t nb = c->bin < 0 ? 1 : RB_PREALLOC, bs = c->blocks[0].size;
        o->id = (uint64_t)(uintptr_t)c;
        o->addr = c->base;
        o->size = c->bytes;
        o->stream = c->stream;
        o->small_pool = c->bin >= 0;
        o->n_blocks = (uint32_t)nb;
        o->n_allocated = c->n_alloc;
        o->allocated_bytes = c->n_alloc * bs;
        o->largest_free = c->n_alloc < nb ? bs : 0;
        o->last_use_ns = c->last_use_ns;
        o->category_mask = c->cat_mask;
        /* releasable stays 0: a bin keeps its blocks until it is destroyed */
    }
    return i;
}

static uint64_t rbn_release(gm_alloc *a, uint64_t id, uint64_t now)
{
    (void)a, (void)id, (void)now;
    return 0;
}

static uint64_t rbn_empty_cache(gm_alloc *a, uint64_t now)
{
    (void)a, (void)now;
    return 0;
}

static uint64_t rbn_block_size(gm_alloc *a, uint64_t size)
{
    rb_state *s = a->impl;
    int bin = bin_for(s, size ? size : 1);
    return bin >= 0 ? s->bins[bin].size : (size + RB_ALIGN - 1) / RB_ALIGN * RB_ALIGN;
}

static uint64_t rbn_segment_size(gm_alloc *a, uint64_t size, int *small_pool)
{
    rb_state *s = a->impl;
    int bin = bin_for(s, size ? size : 1);
    *small_pool = bin >= 0;
    return gm_device_round(bin >= 0 ? s->bins[bin].size * RB_PREALLOC : rbn_block_size(a, size));
}

static uint64_t rbn_block_addr(gm_alloc *a, uint64_t handle)
{
    (void)a;
    return ((const rb_block *)(uintptr_t)handle)->ptr;
}

static int rbn_restore(gm_alloc *a, const gm_init_row *rows, size_t n, uint64_t *handles,
                       gm_err *err)
{
    if (start(a, a->impl) != GM_OK)
        return gm_errf(err, GM_EOOM,
                       "allocator rmm-binning: the bins' first blocks do not fit on the device; "
                       "give a larger --capacity or fewer bins");
    return gm_alloc_restore_live(a, rows, n, handles, err);
}

static int rbn_create(gm_alloc *a, const char *conf, gm_err *err)
{
    gm_settings st;
    if (gm_settings_parse("allocator rmm-binning", conf, &st, err)) return err->code;
    long lo = 18, hi = 22;
    if (gm_settings_int(&st, "min_size_exponent", 8, 40, &lo, err) < 0) return err->code;
    if (gm_settings_int(&st, "max_size_exponent", 8, 40, &hi, err) < 0) return err->code;
    if (gm_settings_check(&st, "min_size_exponent, max_size_exponent", err)) return err->code;
    if (lo > hi)
        return gm_errf(err, GM_EINVAL,
                       "allocator rmm-binning: min_size_exponent %ld is above max_size_exponent "
                       "%ld in '%s'",
                       lo, hi, conf);
    rb_state *s = calloc(1, sizeof *s);
    if (!s) return gm_errf(err, GM_ENOMEM, "out of memory");
    for (long e = lo; e <= hi; e++) {
        uint64_t sz = 1ull << e;
        s->bins[s->n_bins++].size = (sz + RB_ALIGN - 1) / RB_ALIGN * RB_ALIGN;
    }
    a->limits.library_handles_oom = 1;
    a->impl = s;
    return GM_OK;
}

static void rbn_destroy(gm_alloc *a)
{
    rb_state *s = a->impl;
    if (!s) return;
    for (rb_chunk *c = s->chunks, *next; c; c = next) {
        next = c->next;
        uint64_t ns;
        a->dev->ops->mem_free(a->dev, c->base, c->bytes, &ns);
        free(c->blocks);
        free(c);
    }
    for (int i = 0; i < s->n_bins; i++)
        for (rb_fifo *f = s->bins[i].lists, *next; f; f = next) {
            next = f->next;
            free(f);
        }
    free(s);
    a->impl = NULL;
}

const gm_alloc_ops gm_alloc_rmm_binning = {
    .version = GM_ALLOC_VERSION,
    .name = "rmm-binning",
    .summary = "RAPIDS RMM binning_memory_resource (fixed-size bins, cudaMalloc above them)",
    .cost = 0.7,
    .create = rbn_create,
    .destroy = rbn_destroy,
    .malloc = rbn_malloc,
    .free = rbn_free,
    .largest_free = rbn_largest_free,
    .restore = rbn_restore,
    .segments = rbn_segments,
    .release = rbn_release,
    .empty_cache = rbn_empty_cache,
    .block_size = rbn_block_size,
    .segment_size = rbn_segment_size,
    .block_addr = rbn_block_addr,
};
