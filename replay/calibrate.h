/*
 * calibrate.h - `gmreplay --calibrate`: measure the driver on this GPU and
 * write a device profile (sim/device_profile.h) for `gmsim --device-profile`.
 *
 * Context overhead: total - free right after gmreplay's context exists (run
 * it on an otherwise idle GPU: other processes' memory counts too).
 * Latency: cuMemAlloc and cuMemFree of 2 MiB, 4 MiB, ... up to 4 GiB (or a
 * quarter of the free memory), `reps` times each after a warm-up; the median
 * of each size is fitted with cost = base + bytes * ns_per_GiB / 2^30 (GSL
 * least squares), separately for malloc and free.
 * VMM (when supported): cuMemCreate + cuMemMap + cuMemSetAccess and
 * cuMemUnmap + cuMemRelease of a few sizes, for the record.
 */
#ifndef GM_REPLAY_CALIBRATE_H
#define GM_REPLAY_CALIBRATE_H

#include <jansson.h>
#include <stdio.h>

#include "device_cuda.h"

#define GM_CALIBRATE_REPS 15
#define GM_CALIBRATE_MAX_SIZE (4ull * GM_GiB)

/* Measure and build the profile JSON (*out); progress lines go to `log`
 * (may be NULL). */
int gm_calibrate(gm_cuda *c, int reps, FILE *log, json_t **out, gm_err *err);

#endif
