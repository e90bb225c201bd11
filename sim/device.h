/*
 * device.h - the device backend seam.
 *
 * Allocator models call the GPU only through these few functions. The
 * simulator's backend (device_model.c) is a model of a GPU: capacity, CUDA
 * context overhead per tenant, 2 MiB driver granularity and a latency model.
 * gmreplay's backend (replay/device_cuda.c) calls the CUDA driver for real.
 * No allocator or policy code differs between the two.
 *
 * Every call reports the time it cost (modelled or measured) in *cost_ns, so
 * the allocator can account driver time per tenant.
 */
#ifndef GM_DEVICE_H
#define GM_DEVICE_H

#include <stdint.h>

#include "base/units.h"

/* CUDA's allocation granularity for cudaMalloc and cuMemCreate on current
 * GPUs: 2 MiB (cuMemGetAllocationGranularity reports 2 MiB on A100/H100). */
#define GM_DRIVER_GRANULARITY (2ull * GM_MiB)

typedef struct gm_device gm_device;

typedef struct gm_device_ops {
    const char *name;
    /* cudaMalloc: GM_OK, or GM_EOOM when the device has too little free memory. */
    int (*mem_alloc)(gm_device *d, uint64_t bytes, uint64_t *dptr, uint64_t *cost_ns);
    void (*mem_free)(gm_device *d, uint64_t dptr, uint64_t bytes, uint64_t *cost_ns);
    /* Virtual memory management (cuMemAddressReserve / cuMemCreate+cuMemMap /
     * cuMemUnmap+cuMemRelease), used by expandable segments. */
    int (*va_reserve)(gm_device *d, uint64_t bytes, uint64_t *va);
    void (*va_release)(gm_device *d, uint64_t va, uint64_t bytes);
    int (*mem_map)(gm_device *d, uint64_t va, uint64_t bytes, uint64_t *cost_ns);
    void (*mem_unmap)(gm_device *d, uint64_t va, uint64_t bytes, uint64_t *cost_ns);
    void (*destroy)(gm_device *d);
} gm_device_ops;

/* Driver latency model: cost = base_ns + bytes * ns_per_GiB / 2^30.
 * Defaults are rough figures for cudaMalloc/cudaFree on a data-center GPU
 * (tens of microseconds per call; cudaFree also synchronizes the device);
 * `gmreplay --calibrate` measures a real device and writes a profile. */
typedef struct gm_latency {
    uint64_t malloc_base_ns;
    uint64_t malloc_ns_per_gib;
    uint64_t free_base_ns;
    uint64_t free_ns_per_gib;
} gm_latency;

#define GM_LATENCY_DEFAULT                                                                         \
    {                                                                                              \
        20000, 100000, 15000, 50000                                                                \
    }

/* Default per-process CUDA context overhead when the trace does not say:
 * a CUDA 12 context with cuBLAS/cuDNN handles typically takes ~0.5 GiB. */
#define GM_DEFAULT_OVERHEAD (512ull * GM_MiB)

struct gm_device {
    const gm_device_ops *ops;
    void *impl;
    uint64_t capacity_bytes;  /* total device memory                           */
    uint64_t used_bytes;      /* physical memory held by all tenants' allocators */
    uint64_t overhead_bytes;  /* context overhead of all registered tenants      */
    uint64_t peak_used_bytes; /* max of used + overhead                          */
    /* --share requests: memory held back for other tenants' requests (their
     * request less what they hold), which the tenant now calling may not
     * take; the engine sets it before each of a tenant's events. 0 = none. */
    uint64_t withheld_bytes;
    /* What made the run depend on the device's size, so that `gmsim fit`
     * knows whether a run is the same on any device of at least
     * peak_used_bytes: driver calls refused for lack of memory
     * (gm_device_take), and decisions taken from capacity_bytes (a memory
     * fraction, a policy threshold, an address range sized from it). A
     * model or policy that decides from the device's size reads it with
     * gm_device_capacity, which counts it here. */
    uint64_t refused;
    uint64_t capacity_reads;
    /* Of capacity_reads, those that found room: a decision from the
     * device's free memory (capacity less every tenant's use) that came out
     * as it would on a device without end (gm_device_found_room). With
     * fewer tenants on the same device the free memory is as large or
     * larger, and the decision the same: fit --tenants (study/fit.c) reads
     * a run with no refusal and only such reads as one where every tenant
     * ran as it would alone. */
    uint64_t room_reads;
};

/* The device's size, for a decision taken from it: the read is counted
 * (capacity_reads), so the run is known to depend on the size. Read
 * capacity_bytes itself only for what decides nothing (a report). */
static inline uint64_t gm_device_capacity(gm_device *d)
{
    d->capacity_reads++;
    return d->capacity_bytes;
}

/* The last gm_device_capacity read found room (room_reads). */
static inline void gm_device_found_room(gm_device *d)
{
    d->room_reads++;
}

/* Bytes a driver allocation of `bytes` really takes (granularity applied). */
static inline uint64_t gm_device_round(uint64_t bytes)
{
    return (bytes + GM_DRIVER_GRANULARITY - 1) & ~(GM_DRIVER_GRANULARITY - 1);
}

/* Capacity accounting every simulated backend shares: take `bytes` (driver
 * granularity applied) if capacity - overhead - withheld - used allows, else GM_EOOM;
 * give them back. */
int gm_device_take(gm_device *d, uint64_t bytes);
void gm_device_give(gm_device *d, uint64_t bytes);

/* The simulated GPU. */
int gm_device_model_create(uint64_t capacity_bytes, const gm_latency *lat, gm_device **out,
                           gm_err *err);

/* Register a tenant's context overhead; GM_EOOM if it does not fit at all. */
int gm_device_add_context(gm_device *d, uint64_t overhead_bytes);
void gm_device_remove_context(gm_device *d, uint64_t overhead_bytes);

static inline void gm_device_destroy(gm_device *d)
{
    if (d) d->ops->destroy(d);
}

#endif
