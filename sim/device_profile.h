/*
 * device_profile.h - what `gmreplay --calibrate` measured on a real GPU, in
 * the form the simulator uses (`gmsim run --device-profile FILE`).
 *
 * A profile is JSON, schema "gmsim-device-profile/1":
 *   { "schema", "gmsim_version", "created_utc",
 *     "device": { "name", "total_bytes", "granularity_bytes", "driver_version" },
 *     "context_overhead_bytes",      what the process's CUDA context takes
 *     "latency": { "malloc_base_ns", "malloc_ns_per_gib",
 *                  "free_base_ns", "free_ns_per_gib" },       gm_latency
 *     "fit": { "malloc": {"r2", "points"}, "free": {...} },   quality of the fit
 *     "samples": [ { "size_bytes", "malloc_ns": {stats}, "free_ns": {stats} } ],
 *     "vmm": { ... } }                                         informational
 * Only "device.total_bytes", "context_overhead_bytes" and "latency" are read
 * back; the rest documents how they were obtained.
 *
 * Using a profile sets the latency model, the per-tenant context overhead
 * (unless --overhead is given) and the device capacity (unless --capacity
 * is given), whatever the order of the options.
 */
#ifndef GM_DEVICE_PROFILE_H
#define GM_DEVICE_PROFILE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "device.h"
#include "base/err.h"

#define GM_DEVICE_PROFILE_SCHEMA "gmsim-device-profile/1"

typedef struct gm_device_profile {
    char device_name[128];
    uint64_t total_bytes;            /* cuDeviceTotalMem                       */
    uint64_t granularity_bytes;      /* cuMemGetAllocationGranularity (minimum) */
    int driver_version;              /* cuDriverGetVersion, e.g. 13000         */
    uint64_t context_overhead_bytes; /* total - free once the context exists   */
    gm_latency latency;              /* the fitted driver latency model        */
} gm_device_profile;

/* Read a profile file; GM_EINVAL/GM_EIO with a message naming the file. */
int gm_device_profile_load(const char *path, gm_device_profile *p, gm_err *err);

/* The fields above as a JSON object (the caller adds "fit", "samples"...). */
json_t *gm_device_profile_json(const gm_device_profile *p);

/* Least-squares fit (GSL) of cost_ns = base + bytes * per_gib / 2^30 to n
 * points. Negative coefficients (noise on a flat curve) are clamped to 0 and
 * the other one refitted. *r2 is the coefficient of determination (1 when
 * every point is on the line; 0 when y is constant). Needs n >= 2 points
 * with at least two different sizes; GM_EINVAL otherwise. */
int gm_latency_fit(const uint64_t *bytes, const double *ns, size_t n, uint64_t *base_ns,
                   uint64_t *ns_per_gib, double *r2, gm_err *err);

#endif
