/*
 * alloc_conf.h - PYTORCH_CUDA_ALLOC_CONF, parsed as PyTorch parses it.
 *
 * Facts from PyTorch's c10/cuda/CUDAAllocatorConfig.{h,cpp} (v2.x): options
 * are "key:value" pairs separated by ',' (or spaces); roundup_power2_divisions
 * takes one power of two or a list "[256:1,512:2,>:8]" whose keys are sizes
 * in MiB; max_split_size_mb must be > 20; garbage_collection_threshold must be
 * in (0, 1); unknown keys are errors.
 */
#ifndef GM_ALLOC_CONF_H
#define GM_ALLOC_CONF_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "base/units.h"

/* PyTorch's allocator constants (c10/cuda/CUDACachingAllocator.cpp), in one
 * place for the model (sim/alloc_pytorch.c), the snapshot importer
 * (import_torch.c) and this parser. */
#define GM_PT_MIN_BLOCK_SIZE 512ull        /* kMinBlockSize: the rounding unit         */
#define GM_PT_SMALL_SIZE (1ull * GM_MiB)   /* kSmallSize: largest small-pool request   */
#define GM_PT_SMALL_BUFFER (2ull * GM_MiB) /* kSmallBuffer: a small-pool segment       */
#define GM_PT_LARGE_BUFFER                                                                         \
    (20ull * GM_MiB)                           /* kLargeBuffer: a large-pool segment; the          \
                                                  default max_non_split_rounding_size     */
#define GM_PT_MIN_LARGE_ALLOC (10ull * GM_MiB) /* kMinLargeAlloc: below it, a kLargeBuffer */
#define GM_PT_ROUND_LARGE (2ull * GM_MiB)      /* kRoundLarge: larger segments round to it */

/* get_allocation_size: the segment a request of `rounded` bytes (round_size
 * applied) needs when nothing cached fits: 2 MiB for the small pool, 20 MiB
 * below kMinLargeAlloc, else the request rounded up to 2 MiB. */
static inline uint64_t gm_pt_allocation_size(uint64_t rounded)
{
    if (rounded <= GM_PT_SMALL_SIZE) return GM_PT_SMALL_BUFFER;
    if (rounded < GM_PT_MIN_LARGE_ALLOC) return GM_PT_LARGE_BUFFER;
    return GM_PT_ROUND_LARGE * ((rounded + GM_PT_ROUND_LARGE - 1) / GM_PT_ROUND_LARGE);
}

/* PyTorch splits rounding divisions into 16 power-of-two intervals from 1 MiB
 * to 64 GiB (kRoundUpPowerOfTwoIntervals, kRoundUpPowerOfTwoStart). */
#define GM_PT_ROUNDUP_INTERVALS 16

typedef struct gm_pt_conf {
    uint64_t max_split_size;              /* bytes; UINT64_MAX = unset (PyTorch default) */
    uint64_t max_non_split_rounding_size; /* bytes; default kLargeBuffer (20 MiB) */
    double gc_threshold;                  /* 0 = off */
    int expandable_segments;              /* 0/1 */
    int backend_async;                    /* backend:cudaMallocAsync */
    uint64_t roundup_divisions[GM_PT_ROUNDUP_INTERVALS]; /* 0 = off */
} gm_pt_conf;

void gm_pt_conf_default(gm_pt_conf *c);
/* Parse a PYTORCH_CUDA_ALLOC_CONF string ("" or NULL = defaults). */
int gm_pt_conf_parse(const char *s, gm_pt_conf *c, gm_err *err);
/* 1 when a PYTORCH_CUDA_ALLOC_CONF string selects PyTorch's cudaMallocAsync
 * backend (backend:cudaMallocAsync, the last backend key winning), which
 * gmsim models with --allocator cuda-async; 0 otherwise (native, or no
 * backend key; a string that does not parse selects nothing). */
int gm_pt_conf_selects_async(const char *s);
/* Canonical string form (for results and reports). */
void gm_pt_conf_format(const gm_pt_conf *c, char *buf, size_t len);

#endif
