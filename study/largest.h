/*
 * largest.h - `gmsim fit --largest DIM`: the largest value of a dimension
 * (batch size, sequence length) at which a program, known from recordings
 * at two or three values (scale.h), runs without OOM on the device: the
 * trace at each candidate value is made in memory and simulated; the
 * candidates are found by doubling from the largest recorded value until
 * one fails, then by bisection (integers).
 */
#ifndef GM_LARGEST_H
#define GM_LARGEST_H

#include <stdint.h>

#include "scale.h"
#include "sim/engine.h"

typedef struct gm_largest {
    char spec[320];          /* the release policy                         */
    int found;               /* some value >= 1 fits                        */
    int64_t largest;         /* the largest value that fits (0: none)       */
    int64_t first_fail;      /* the smallest that does not (0: none up to max) */
    uint64_t capacity_bytes; /* the device                                  */
    uint64_t usable_bytes;   /* what the allocator may use: capacity - context */
    uint64_t peak_reserved;  /* at `largest`                                */
    uint64_t peak_live;      /* at `largest`                                */
    int runs;                /* simulations                                 */
} gm_largest;

/* For release policy `spec` (NULL: pytorch): base gives the device and the
 * allocator (its tenants are ignored); values up to max_x are tried. */
int gm_fit_largest(const gm_sim_config *base, gm_scale *s, const char *spec, int64_t max_x,
                   gm_largest *out, gm_err *err);

#endif
