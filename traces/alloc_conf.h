/*
 * alloc_conf.h - PYTORCH_CUDA_ALLOC_CONF (and PYTORCH_ALLOC_CONF), parsed as
 * the PyTorch version that ran parses it: the keys it knows, the checks it
 * makes, the messages it gives (traces/ALLOC_CONF.md has the table of every
 * key from 2.0 on, with what the model does with it, and the sources).
 *
 * Two parsers exist. PyTorch 2.0-2.9 (CachingAllocatorConfig, then
 * c10/cuda/CUDAAllocatorConfig.cpp, lexArgs + consumeToken): ',', ':', '['
 * and ']' are tokens, only the space character is dropped (so a space does
 * not separate options: "True max_split_size_mb" is one word), and keys and
 * values must alternate strictly. PyTorch 2.10 on (ConfigTokenizer,
 * c10/core/AllocatorConfig.h): every whitespace character is dropped and
 * separators are not checked. Booleans are exactly True or False in every
 * version. Keys PyTorch accepts that do not change device memory (host /
 * pinned memory, locking, graph capture) are accepted and listed in
 * gm_pt_conf.no_effect.
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
 * applied) needs when nothing cached fits: 2 MiB for the small pool, a large
 * segment (kLargeBuffer, 20 MiB, or large_segment_size_mb) below
 * kMinLargeAlloc, else the request rounded up to 2 MiB. */
static inline uint64_t gm_pt_allocation_size(uint64_t rounded, uint64_t large_segment)
{
    if (rounded <= GM_PT_SMALL_SIZE) return GM_PT_SMALL_BUFFER;
    if (rounded < GM_PT_MIN_LARGE_ALLOC) return large_segment;
    return GM_PT_ROUND_LARGE * ((rounded + GM_PT_ROUND_LARGE - 1) / GM_PT_ROUND_LARGE);
}

/* PyTorch splits rounding divisions into 16 power-of-two intervals from 1 MiB
 * to 64 GiB (kRoundUpPowerOfTwoIntervals, kRoundUpPowerOfTwoStart). */
#define GM_PT_ROUNDUP_INTERVALS 16

/* PyTorch versions as major * 100 + minor; the ones whose parser differs. */
#define GM_TORCH_2_0 200  /* CachingAllocatorConfig: max_split_size_mb, roundup, gc, backend */
#define GM_TORCH_2_1 201  /* + expandable_segments                                         */
#define GM_TORCH_2_2 202  /* + release_lock_on_cudamalloc, pinned_* (CUDAAllocatorConfig.cpp) */
#define GM_TORCH_2_3 203  /* roundup lists may hold 0; snapshots record allocator_settings */
#define GM_TORCH_2_5 205  /* + max_non_split_rounding_mb, pinned_use_background_threads    */
#define GM_TORCH_2_9 209  /* + graph_capture_record_stream_reuse                          */
#define GM_TORCH_2_10 210 /* ConfigTokenizer; PYTORCH_ALLOC_CONF; + per_process_memory_fraction */
#define GM_TORCH_2_11 211 /* + large_segment_size_mb, throw_on_cudamalloc_oom, ...         */
#define GM_TORCH_NEWEST GM_TORCH_2_11

typedef struct gm_pt_conf {
    uint64_t max_split_size;              /* bytes; UINT64_MAX = unset (PyTorch default) */
    uint64_t max_non_split_rounding_size; /* bytes; default = large_segment_size         */
    uint64_t large_segment_size;          /* kLargeBuffer, or large_segment_size_mb      */
    double gc_threshold;                  /* 0 = off */
    double memory_fraction;               /* per_process_memory_fraction; 0 = unset      */
    int expandable_segments;              /* 0/1 */
    int backend_async;                    /* backend:cudaMallocAsync */
    uint64_t roundup_divisions[GM_PT_ROUNDUP_INTERVALS]; /* 0 = off */
    int torch_version;   /* the rules it was parsed with              */
    char no_effect[256]; /* keys given that do not change the device allocator model,
                            ", "-separated ("" if none)                               */
} gm_pt_conf;

void gm_pt_conf_default(gm_pt_conf *c);
/* Parse a PYTORCH_CUDA_ALLOC_CONF string ("" or NULL = defaults) as PyTorch
 * `torch_version` (GM_TORCH_*; 0 = the newest) does; an error carries
 * PyTorch's own message for it. */
int gm_pt_conf_parse_for(const char *s, int torch_version, gm_pt_conf *c, gm_err *err);
/* The same as the newest PyTorch. */
int gm_pt_conf_parse(const char *s, gm_pt_conf *c, gm_err *err);

/* "2.10" -> GM_TORCH_2_10 (the newest rule set at or below it), "2.3-2.8" ->
 * the upper end; 0 for "" or anything else. */
int gm_torch_version_parse(const char *s);
/* The environment variable a CUDA process of PyTorch `torch_version` reads,
 * given the values of PYTORCH_CUDA_ALLOC_CONF and PYTORCH_ALLOC_CONF (NULL:
 * unset): 2.0-2.9 read only the first (2.9 parses the second for its
 * accelerator-wide settings and warns that the first is deprecated, but its
 * CUDA allocator ignores the second: PyTorch issue 183387); 2.10 on read
 * the first that is set, CUDA's first, so a set but empty
 * PYTORCH_CUDA_ALLOC_CONF hides PYTORCH_ALLOC_CONF. *which gets the name
 * read, or NULL when neither applies (traces/ALLOC_CONF.md). */
const char *gm_pt_conf_env(int torch_version, const char *cuda_conf, const char *alloc_conf,
                           const char **which);
/* 1 when a PYTORCH_CUDA_ALLOC_CONF string selects PyTorch's cudaMallocAsync
 * backend (backend:cudaMallocAsync, the last backend key winning), which
 * gmsim models with --allocator cuda-async; 0 otherwise (native, or no
 * backend key; a string that does not parse selects nothing). */
int gm_pt_conf_selects_async(const char *s);
/* Canonical string form (for results and reports). */
void gm_pt_conf_format(const gm_pt_conf *c, char *buf, size_t len);

#endif
