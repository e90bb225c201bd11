/*
 * device_model.c - the simulated GPU backend (see device.h).
 *
 * Memory: an allocation succeeds when capacity - overhead - withheld - used
 * (withheld: other tenants' requests, --share requests) covers its
 * size rounded to the 2 MiB driver granularity. Addresses: a bump pointer over
 * a 2^47-byte virtual space aligned to 2 MiB; freed ranges are not reused.
 * Real drivers do reuse virtual addresses, but gmsim's allocators only use
 * addresses to order blocks, and allocation order is what a bump pointer
 * preserves. Latency: the linear model in gm_latency.
 */
#include <stdlib.h>

#include "device.h"

typedef struct model {
    gm_latency lat;
    uint64_t next_va;
} model;

static uint64_t cost(uint64_t base, uint64_t per_gib, uint64_t bytes)
{
    return base + (uint64_t)((double)bytes * (double)per_gib / (double)GM_GiB);
}

int gm_device_take(gm_device *d, uint64_t bytes)
{
    uint64_t phys = gm_device_round(bytes), held = d->overhead_bytes + d->withheld_bytes;
    if (held > d->capacity_bytes || d->used_bytes > d->capacity_bytes - held ||
        phys > d->capacity_bytes - held - d->used_bytes) {
        d->refused++;
        return GM_EOOM;
    }
    d->used_bytes += phys;
    if (d->used_bytes + d->overhead_bytes > d->peak_used_bytes)
        d->peak_used_bytes = d->used_bytes + d->overhead_bytes;
    return GM_OK;
}

void gm_device_give(gm_device *d, uint64_t bytes)
{
    d->used_bytes -= gm_device_round(bytes);
}

static uint64_t next_va(model *m, uint64_t bytes)
{
    uint64_t va = m->next_va;
    m->next_va += gm_device_round(bytes);
    return va;
}

static int m_alloc(gm_device *d, uint64_t bytes, uint64_t *dptr, uint64_t *cost_ns)
{
    model *m = d->impl;
    *cost_ns = cost(m->lat.malloc_base_ns, m->lat.malloc_ns_per_gib, bytes);
    if (gm_device_take(d, bytes) != GM_OK) return GM_EOOM;
    *dptr = next_va(m, bytes);
    return GM_OK;
}

static void m_free(gm_device *d, uint64_t dptr, uint64_t bytes, uint64_t *cost_ns)
{
    model *m = d->impl;
    (void)dptr;
    gm_device_give(d, bytes);
    *cost_ns = cost(m->lat.free_base_ns, m->lat.free_ns_per_gib, bytes);
}

static int m_va_reserve(gm_device *d, uint64_t bytes, uint64_t *va)
{
    *va = next_va(d->impl, bytes);
    return GM_OK;
}

static void m_va_release(gm_device *d, uint64_t va, uint64_t bytes)
{
    (void)d, (void)va, (void)bytes;
}

static int m_map(gm_device *d, uint64_t va, uint64_t bytes, uint64_t *cost_ns)
{
    model *m = d->impl;
    (void)va;
    *cost_ns = cost(m->lat.malloc_base_ns, m->lat.malloc_ns_per_gib, bytes);
    return gm_device_take(d, bytes);
}

static void m_unmap(gm_device *d, uint64_t va, uint64_t bytes, uint64_t *cost_ns)
{
    m_free(d, va, bytes, cost_ns);
}

static void m_destroy(gm_device *d)
{
    free(d->impl);
    free(d);
}

static const gm_device_ops model_ops = {
    .name = "model",
    .mem_alloc = m_alloc,
    .mem_free = m_free,
    .va_reserve = m_va_reserve,
    .va_release = m_va_release,
    .mem_map = m_map,
    .mem_unmap = m_unmap,
    .destroy = m_destroy,
};

int gm_device_model_create(uint64_t capacity_bytes, const gm_latency *lat, gm_device **out,
                           gm_err *err)
{
    static const gm_latency def = GM_LATENCY_DEFAULT;
    gm_device *d = calloc(1, sizeof *d);
    model *m = calloc(1, sizeof *m);
    if (!d || !m) {
        free(d);
        free(m);
        return gm_errf(err, GM_ENOMEM, "out of host memory creating the device model");
    }
    m->lat = lat ? *lat : def;
    m->next_va = 0x7f0000000000ull; /* where CUDA's device heap usually starts */
    d->ops = &model_ops;
    d->impl = m;
    d->capacity_bytes = capacity_bytes;
    *out = d;
    return GM_OK;
}

int gm_device_add_context(gm_device *d, uint64_t overhead_bytes)
{
    if (d->overhead_bytes + overhead_bytes + d->used_bytes > d->capacity_bytes) {
        d->refused++;
        return GM_EOOM;
    }
    d->overhead_bytes += overhead_bytes;
    if (d->used_bytes + d->overhead_bytes > d->peak_used_bytes)
        d->peak_used_bytes = d->used_bytes + d->overhead_bytes;
    return GM_OK;
}

void gm_device_remove_context(gm_device *d, uint64_t overhead_bytes)
{
    d->overhead_bytes -= overhead_bytes;
}
