/* alloc.c - allocator instances and their accounted driver calls. */
#include "alloc.h"

#include <stdlib.h>
#include <string.h>

int gm_alloc_create(const gm_alloc_ops *ops, gm_device *dev, const char *conf,
                    double memory_fraction, struct gm_policy *policy, gm_alloc **out, gm_err *err)
{
    return gm_alloc_create_for(ops, dev, conf, 0, memory_fraction, policy, out, err);
}

int gm_alloc_create_for(const gm_alloc_ops *ops, gm_device *dev, const char *conf,
                        int torch_version, double memory_fraction, struct gm_policy *policy,
                        gm_alloc **out, gm_err *err)
{
    *out = NULL;
    if (ops->version != GM_ALLOC_VERSION)
        return gm_errf(err, GM_EINVAL,
                       "allocator %s implements version %d of the allocator interface, this "
                       "gmsim version %d; rebuild it against sim/alloc.h",
                       ops->name, ops->version, GM_ALLOC_VERSION);
    if (!policy) return gm_errf(err, GM_EINVAL, "allocator %s: no release policy given", ops->name);
    if (memory_fraction < 0 || memory_fraction > 1)
        return gm_errf(err, GM_EINVAL, "memory fraction %g is out of range; give a value in (0, 1]",
                       memory_fraction);
    gm_alloc *a = calloc(1, sizeof *a);
    if (!a) return gm_errf(err, GM_ENOMEM, "out of memory");
    a->ops = ops;
    a->dev = dev;
    a->limits.max_split_size = UINT64_MAX;
    a->limits.device_capacity = dev->capacity_bytes;
    /* setMemoryFraction: allowed_memory_maximum = fraction * total memory */
    if (memory_fraction > 0) {
        a->limits.memory_limit = (uint64_t)(memory_fraction * (double)dev->capacity_bytes);
        dev->capacity_reads++;
    }
    a->policy = policy;
    a->torch_version = torch_version;
    int rc = ops->create(a, conf ? conf : "", err);
    if (rc != GM_OK) {
        free(a);
        return rc;
    }
    *out = a;
    return GM_OK;
}

void gm_alloc_destroy(gm_alloc *a)
{
    if (!a) return;
    a->ops->destroy(a);
    free(a);
}

static void hook(gm_alloc *a, int op, uint64_t addr, uint64_t size, uint64_t stream, uint64_t now)
{
    if (a->seg_hook) {
        gm_seg_event ev = {op, addr, size, stream, now};
        a->seg_hook(a->seg_hook_ctx, &ev);
    }
}

int gm_alloc_driver_malloc(gm_alloc *a, uint64_t bytes, uint64_t stream, uint64_t now,
                           uint64_t *dptr)
{
    uint64_t ns = 0;
    int rc = a->dev->ops->mem_alloc(a->dev, bytes, dptr, &ns);
    a->c.driver_alloc_ns += ns;
    if (rc != GM_OK) return rc;
    a->c.n_driver_alloc++;
    a->c.reserved_bytes += bytes;
    hook(a, GM_OP_SEGMENT_ALLOC, *dptr, bytes, stream, now);
    return GM_OK;
}

void gm_alloc_driver_free(gm_alloc *a, uint64_t dptr, uint64_t bytes, uint64_t stream, uint64_t now)
{
    uint64_t ns = 0;
    a->dev->ops->mem_free(a->dev, dptr, bytes, &ns);
    a->c.driver_free_ns += ns;
    a->c.n_driver_free++;
    a->c.reserved_bytes -= bytes;
    hook(a, GM_OP_SEGMENT_FREE, dptr, bytes, stream, now);
}

int gm_alloc_driver_map(gm_alloc *a, uint64_t va, uint64_t bytes, uint64_t stream, uint64_t now)
{
    uint64_t ns = 0;
    int rc = a->dev->ops->mem_map(a->dev, va, bytes, &ns);
    a->c.driver_alloc_ns += ns;
    if (rc != GM_OK) return rc;
    a->c.n_driver_alloc++;
    a->c.reserved_bytes += bytes;
    hook(a, GM_OP_SEGMENT_MAP, va, bytes, stream, now);
    return GM_OK;
}

void gm_alloc_driver_unmap(gm_alloc *a, uint64_t va, uint64_t bytes, uint64_t stream, uint64_t now)
{
    uint64_t ns = 0;
    a->dev->ops->mem_unmap(a->dev, va, bytes, &ns);
    a->c.driver_free_ns += ns;
    a->c.n_driver_free++;
    a->c.reserved_bytes -= bytes;
    hook(a, GM_OP_SEGMENT_UNMAP, va, bytes, stream, now);
}
