/*
 * alloc_direct.c - no caching: one driver allocation per tensor, freed at
 * once, as PyTorch does with PYTORCH_NO_CUDA_MEMORY_CACHING=1. Each block
 * occupies its size rounded to the 2 MiB driver granularity, so A = R and
 * the gap to Q is the driver's rounding. There is nothing cached for a
 * policy to release.
 */
#include <stdlib.h>

#include "alloc.h"
#include "policy.h"

typedef struct direct_block {
    uint64_t ptr, size, requested, stream;
} direct_block;

static int d_create(gm_alloc *a, const char *conf, gm_err *err)
{
    if (conf && *conf)
        return gm_errf(err, GM_EINVAL,
                       "--alloc-conf '%s' has no effect on the direct allocator; drop it or use "
                       "--allocator pytorch",
                       conf);
    a->impl = NULL;
    return GM_OK;
}

static void d_destroy(gm_alloc *a)
{
    (void)a; /* live blocks are freed by the engine through d_free */
}

static int d_malloc(gm_alloc *a, uint64_t size, uint64_t stream, uint8_t cat, uint64_t now,
                    uint64_t *handle)
{
    (void)cat;
    direct_block *b = malloc(sizeof *b);
    if (!b) return GM_EOOM;
    uint64_t bytes = gm_device_round(size);
    int rc = gm_alloc_driver_malloc(a, bytes, stream, now, &b->ptr);
    for (int attempt = 0; rc != GM_OK; attempt++) {
        gm_pressure p = {.size = bytes,
                         .alloc_size = bytes,
                         .stream = stream,
                         .now_ns = now,
                         .attempt = attempt};
        int r = gm_policy_ask(a, &p);
        if (r == GM_POLICY_GIVE_UP) {
            free(b);
            return GM_EOOM;
        }
        if (r == GM_POLICY_RETRY) rc = gm_alloc_driver_malloc(a, bytes, stream, now, &b->ptr);
    }
    b->size = bytes;
    b->requested = size;
    b->stream = stream;
    a->c.requested_bytes += size;
    a->c.allocated_bytes += bytes;
    *handle = (uint64_t)(uintptr_t)b;
    return GM_OK;
}

static void d_free(gm_alloc *a, uint64_t handle, uint64_t now)
{
    direct_block *b = (direct_block *)(uintptr_t)handle;
    a->c.requested_bytes -= b->requested;
    a->c.allocated_bytes -= b->size;
    gm_alloc_driver_free(a, b->ptr, b->size, b->stream, now);
    free(b);
}

static uint64_t d_largest_free(gm_alloc *a)
{
    (void)a;
    return 0;
}

static int d_restore(gm_alloc *a, const gm_init_row *rows, size_t n, uint64_t *handles, gm_err *err)
{
    for (size_t i = 0; i < n; i++) {
        handles[i] = 0;
        if (rows[i].kind != GM_INIT_BLOCK) continue;
        if (d_malloc(a, rows[i].size, rows[i].stream, rows[i].category, 0, &handles[i]) != GM_OK)
            return gm_errf(err, GM_EOOM,
                           "initial state: live block of %llu bytes does not fit on the "
                           "device; give a larger --capacity",
                           (unsigned long long)rows[i].size);
    }
    return GM_OK;
}

static size_t d_segments(gm_alloc *a, gm_seg_info *buf, size_t cap)
{
    (void)a, (void)buf, (void)cap;
    return 0;
}

static uint64_t d_release(gm_alloc *a, uint64_t id, uint64_t now)
{
    (void)a, (void)id, (void)now;
    return 0;
}

static uint64_t d_empty_cache(gm_alloc *a, uint64_t now)
{
    (void)a, (void)now;
    return 0;
}

static uint64_t d_block_size(gm_alloc *a, uint64_t size)
{
    (void)a;
    return gm_device_round(size);
}

static uint64_t d_segment_size(gm_alloc *a, uint64_t size, int *small_pool)
{
    (void)a;
    *small_pool = 0;
    return gm_device_round(size);
}

static uint64_t d_block_addr(gm_alloc *a, uint64_t handle)
{
    (void)a;
    return ((const direct_block *)(uintptr_t)handle)->ptr;
}

static uint64_t d_block_bytes(gm_alloc *a, uint64_t handle)
{
    (void)a;
    return ((const direct_block *)(uintptr_t)handle)->size;
}

const gm_alloc_ops gm_alloc_direct = {
    .version = GM_ALLOC_VERSION,
    .name = "direct",
    .summary = "one driver allocation per tensor (PYTORCH_NO_CUDA_MEMORY_CACHING=1)",
    .cost = 0.55,
    .create = d_create,
    .destroy = d_destroy,
    .malloc = d_malloc,
    .free = d_free,
    .largest_free = d_largest_free,
    .restore = d_restore,
    .segments = d_segments,
    .release = d_release,
    .empty_cache = d_empty_cache,
    .block_size = d_block_size,
    .segment_size = d_segment_size,
    .block_addr = d_block_addr,
    .block_bytes = d_block_bytes,
};
