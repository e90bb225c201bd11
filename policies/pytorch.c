/*
 * pytorch.c - the baseline release policy: exactly what PyTorch's caching
 * allocator does (c10/cuda/CUDACachingAllocator.cpp, DeviceCachingAllocator):
 *
 *  before_grow   garbage_collect_cached_blocks(), only when a per-process
 *                memory fraction and garbage_collection_threshold are set:
 *                if reserved > threshold * allowed maximum, release whole
 *                free large-pool segments whose age (pool lookups since they
 *                became free) is >= the average age, repeating with a new
 *                average until enough is reclaimed or nothing is freed.
 *  attempt 0     release_available_cached_blocks(): only with
 *                max_split_size set. Release the smallest whole free
 *                oversize segment of the request's pool and stream that is
 *                >= max(request, max_split_size); failing that, release
 *                oversize segments from the largest down until that much is
 *                freed. Retry only if enough was freed.
 *  attempt 1     release_cached_blocks(): release every whole free segment
 *                (large pool, then small pool, each in (stream, size,
 *                address) order) and every free page of expandable segments;
 *                retry.
 *  attempt 2     out of memory.
 *
 * Under a model whose library handles OOM itself (alloc.h:
 * library_handles_oom: cuda-async, rmm-*, tf-bfc) the policy is that
 * library's own behaviour, which the model already applied: it gives up.
 *
 * Whole free segment = PyTorch's "non-split" block (!prev && !next).
 */
#include <stdlib.h>

#include "seglist.h"
#include "sim/policy.h"

typedef struct pt_policy {
    gm_seglist segs;
} pt_policy;

static int create(const char *params, void **state, gm_err *err)
{
    static const char *const known[] = {NULL};
    if (gm_policy_check_params("pytorch", params, known, err)) return err->code;
    pt_policy *p = calloc(1, sizeof *p);
    if (!p) return gm_errf(err, GM_ENOMEM, "out of memory");
    *state = p;
    return GM_OK;
}

static void destroy(void *state)
{
    pt_policy *p = state;
    gm_seglist_free(&p->segs);
    free(p);
}

/* Of the whole free segments (gm_seglist_fetch_whole_free), the GC's. */
static int keep_gc(const gm_seg_info *s, const void *ctx)
{
    (void)ctx;
    return !s->small_pool;
}

static void before_grow(void *state, gm_alloc *a, const gm_pressure *pr)
{
    pt_policy *p = state;
    const gm_alloc_limits *L = &a->limits;
    if (!(L->memory_limit && L->gc_threshold > 0)) return;
    uint64_t threshold = (uint64_t)(L->gc_threshold * (double)L->memory_limit);
    if (a->c.reserved_bytes <= threshold) return;
    uint64_t target = a->c.reserved_bytes - threshold, reclaimed = 0;
    if (gm_seglist_fetch_whole_free(&p->segs, a)) return;
    gm_seglist_filter(&p->segs, keep_gc, NULL);
    if (p->segs.n > 1) qsort(p->segs.v, p->segs.n, sizeof *p->segs.v, gm_seg_cmp_pool_order);
    uint64_t total_age = 0;
    size_t count = p->segs.n;
    for (size_t i = 0; i < count; i++)
        total_age += p->segs.v[i].gc_age;
    int freed = 1;
    while (reclaimed < target && freed && count > 0) {
        double avg = (double)total_age / (double)count;
        freed = 0;
        for (size_t i = 0; i < p->segs.n; i++) {
            gm_seg_info *s = &p->segs.v[i];
            if (s->id == 0 || (double)s->gc_age < avg) continue;
            freed = 1;
            reclaimed += s->size;
            total_age -= s->gc_age;
            count--;
            gm_alloc_release(a, s->id, pr->now_ns);
            s->id = 0; /* released */
        }
    }
}

/* gm_policy_ops.inert: before_grow acts only where the garbage collection
 * is on (a memory limit and garbage_collection_threshold both set). */
static int inert(const char *params, const gm_alloc_limits *L)
{
    (void)params;
    return !(L->memory_limit && L->gc_threshold > 0);
}

typedef struct pool_key {
    uint64_t stream;
    int small;
    uint64_t min_size;
} pool_key;

/* Of the whole free segments, the request's pool and stream's oversize ones. */
static int keep_oversize(const gm_seg_info *s, const void *ctx)
{
    const pool_key *k = ctx;
    return s->small_pool == k->small && s->stream == k->stream && s->size >= k->min_size;
}

static int release_available(pt_policy *p, gm_alloc *a, const gm_pressure *pr)
{
    uint64_t max_split = a->limits.max_split_size;
    if (max_split == UINT64_MAX) return GM_POLICY_NEXT;
    uint64_t key = pr->size < max_split ? max_split : pr->size;
    pool_key k = {pr->stream, pr->small_pool, max_split};
    if (gm_seglist_fetch_whole_free(&p->segs, a)) return GM_POLICY_NEXT;
    gm_seglist_filter(&p->segs, keep_oversize, &k);
    if (p->segs.n > 1) qsort(p->segs.v, p->segs.n, sizeof *p->segs.v, gm_seg_cmp_pool_order);
    for (size_t i = 0; i < p->segs.n; i++) /* smallest one that is large enough */
        if (p->segs.v[i].size >= key) {
            gm_alloc_release(a, p->segs.v[i].id, pr->now_ns);
            return GM_POLICY_RETRY;
        }
    uint64_t released = 0; /* else largest first until enough */
    for (size_t i = p->segs.n; i-- > 0 && released < key;)
        released += gm_alloc_release(a, p->segs.v[i].id, pr->now_ns);
    return released >= key ? GM_POLICY_RETRY : GM_POLICY_NEXT;
}

static int cmp_flush_order(const void *x, const void *y)
{
    const gm_seg_info *a = x, *b = y;
    if (a->small_pool != b->small_pool) /* large pool first */
        return a->small_pool ? 1 : -1;
    return gm_seg_cmp_pool_order(x, y);
}

static int release_cached(pt_policy *p, gm_alloc *a, const gm_pressure *pr)
{
    a->c.n_cache_flushes++;
    if (gm_seglist_fetch_releasable(&p->segs, a)) return GM_POLICY_RETRY;
    if (p->segs.n > 1) qsort(p->segs.v, p->segs.n, sizeof *p->segs.v, cmp_flush_order);
    for (size_t i = 0; i < p->segs.n; i++)
        gm_alloc_release(a, p->segs.v[i].id, pr->now_ns);
    return GM_POLICY_RETRY;
}

static int on_alloc_fail(void *state, gm_alloc *a, const gm_pressure *pr)
{
    /* the library behind the model (cudaMallocAsync backend, RMM,
     * TensorFlow) does its own thing on OOM and the model did it */
    if (a->limits.library_handles_oom) return GM_POLICY_GIVE_UP;
    switch (pr->attempt) {
    case 0:
        return release_available(state, a, pr);
    case 1:
        return release_cached(state, a, pr);
    default:
        return GM_POLICY_GIVE_UP;
    }
}

const gm_policy_ops gm_policy_pytorch = {
    .version = GM_POLICY_VERSION,
    .name = "pytorch",
    .summary = "PyTorch's own behaviour: GC threshold, release oversize, then flush all",
    .realizable = 1,
    .create = create,
    .destroy = destroy,
    .before_grow = before_grow,
    .on_alloc_fail = on_alloc_fail,
    .report = NULL,
    .inert = inert,
};
