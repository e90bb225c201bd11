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
        a->limits.memory_limit = (uint64_t)(memory_fraction * (double)gm_device_capacity(dev));
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

static int cmp_row_addr(const void *x, const void *y)
{
    const gm_init_row *a = *(const gm_init_row *const *)x, *b = *(const gm_init_row *const *)y;
    return a->addr < b->addr ? -1 : a->addr > b->addr;
}

int gm_alloc_restore_live(gm_alloc *a, const gm_init_row *rows, size_t n, uint64_t *handles,
                          gm_err *err)
{
    const gm_init_row **ord = malloc((n ? n : 1) * sizeof *ord);
    if (!ord) return gm_errf(err, GM_ENOMEM, "out of memory restoring the initial state");
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        handles[i] = 0;
        if (rows[i].kind == GM_INIT_BLOCK) ord[m++] = &rows[i];
    }
    if (m > 1) qsort(ord, m, sizeof *ord, cmp_row_addr);
    int rc = GM_OK;
    for (size_t i = 0; i < m && rc == GM_OK; i++)
        if (a->ops->malloc(a, ord[i]->size, ord[i]->stream, ord[i]->category, 0,
                           &handles[ord[i] - rows]) != GM_OK)
            rc = gm_errf(err, GM_EOOM,
                         "initial state: the live block of %llu bytes at 0x%llx does not fit "
                         "under allocator %s; give a larger --capacity",
                         (unsigned long long)ord[i]->size, (unsigned long long)ord[i]->addr,
                         a->ops->name);
    free(ord);
    return rc;
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
