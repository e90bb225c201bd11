/*
 * measured.h - what only a real GPU can tell: the measured-only part of a
 * `gmreplay` result. Its JSON (below) is written by reports/measured_json.c.
 *
 * gmreplay runs the very engine, allocator and policy code of `gmsim run`,
 * over the CUDA backend (replay/device_cuda.c) instead of the simulated GPU,
 * so its result is a "gmsim-result/1" object built by the same function
 * (reports/results.h), with
 *   "command": "replay", "backend": "cuda",
 *   driver times in "driver" measured (clock_gettime around each call), not
 *   modelled, and OOM records that are the driver's own refusals,
 * plus one object only it has, "measured":
 *   { "library", "driver_version", "device": {"name", "ordinal", "total_bytes",
 *     "granularity_bytes"}, "context_overhead_bytes", "free_at_start_bytes",
 *     "capacity": {"emulated_bytes", "target_free_bytes", "ballast_bytes",
 *                  "ballast_chunks", "free_after_ballast_bytes"},
 *     "oom": {"driver_oom_returns", "cap_refusals", "cap_refusals_driver_had_room",
 *             "events": [{"kind": "driver"|"cap", "size_bytes", "free_bytes",
 *                         "used_bytes", "wall_ns"}]},
 *     "latency": {"malloc"|"free"|"map"|"unmap": {"calls", "total_ns", "mean_ns",
 *                 "min_ns", "p50_ns", "p90_ns", "p99_ns", "max_ns"}},
 *     "device_used": {"peak_bytes", "peak_t_ns", "samples", "timeline":
 *                     {"columns": [...], "points": [[t_ns, wall_ns, used, reserved]]}},
 *     "paced", "pace_diverged", "interrupted_by_signal", "freed_all",
 *     "leaked_bytes", "error", "wall_s" }
 * "device used" there is what a card of the emulated capacity would show:
 * emulated capacity - cuMemGetInfo's free (the ballast is not counted), sampled
 * after every driver call.
 */
#ifndef GM_MEASURED_H
#define GM_MEASURED_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"

#define GM_LAT_MAX_SAMPLES (1u << 22) /* beyond: a uniform reservoir of this size */
#define GM_USED_POINTS 1024
#define GM_BACKEND_OOMS 64 /* refusals kept in detail; all are counted */

/* Latencies of one kind of driver call (ns). */
typedef struct gm_lat_samples {
    double *ns;
    size_t n, cap;
    uint64_t seen; /* calls measured                         */
    double sum, min, max;
    uint64_t rng; /* reservoir sampling state (fixed seed)  */
} gm_lat_samples;

void gm_lat_init(gm_lat_samples *s);
void gm_lat_free(gm_lat_samples *s);
void gm_lat_add(gm_lat_samples *s, uint64_t ns);

/* Device used over time, bounded: when full, neighbours merge (keeping the
 * larger use) and later points each stand for twice as many samples. */
typedef struct gm_used_point {
    uint64_t t_ns, wall_ns, used_bytes, reserved_bytes;
} gm_used_point;

typedef struct gm_used_series {
    gm_used_point p[GM_USED_POINTS];
    size_t n;
    uint64_t stride;  /* samples per point                       */
    uint64_t pending; /* samples folded into p[n] so far          */
    uint64_t samples;
    gm_used_point peak;
} gm_used_series;

void gm_used_add(gm_used_series *s, const gm_used_point *pt);

enum gm_backend_oom_kind { GM_BOOM_DRIVER = 0, GM_BOOM_CAP = 1 };

typedef struct gm_backend_oom {
    int kind;
    uint64_t size_bytes; /* what was asked                              */
    uint64_t free_bytes; /* cuMemGetInfo free right after the refusal    */
    uint64_t used_bytes; /* allocator memory held through the backend    */
    uint64_t wall_ns;    /* since the replay started                     */
} gm_backend_oom;

typedef struct gm_measured {
    char library[256];
    int driver_version;
    char device_name[128];
    int device_ordinal;
    uint64_t device_total_bytes, granularity_bytes;
    uint64_t context_overhead_bytes; /* total - free right after the context      */
    uint64_t free_at_start_bytes;
    uint64_t emulated_capacity_bytes;
    uint64_t target_free_bytes; /* emulated capacity - tenants * overhead     */
    uint64_t ballast_bytes;
    uint32_t ballast_chunks;
    uint64_t free_after_ballast_bytes;
    uint64_t driver_oom_returns; /* CUDA_ERROR_OUT_OF_MEMORY returned          */
    uint64_t cap_refusals;       /* refused before asking: over the capacity   */
    uint64_t cap_refusals_driver_had_room;
    gm_backend_oom ooms[GM_BACKEND_OOMS];
    size_t n_ooms_kept;
    gm_lat_samples malloc_lat, free_lat, map_lat, unmap_lat;
    gm_used_series used;
    int paced, pace_diverged;
    int interrupted_by; /* signal number, 0 = ran to the end        */
    int freed_all;      /* every driver allocation was given back   */
    uint64_t leaked_bytes;
    char error[512]; /* first driver failure other than OOM      */
    double wall_s;
} gm_measured;

/* Zero the record and set up its sample buffers. */
void gm_measured_init(gm_measured *m);
void gm_measured_free(gm_measured *m);
void gm_measured_oom(gm_measured *m, const gm_backend_oom *o);

#endif
