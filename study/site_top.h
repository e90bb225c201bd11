/*
 * site_top.h - `gmsim run --top-sites N` (and `gmsim info --top-sites N`):
 * the call sites (traces/trace.h, /sites) by bytes allocated over the run
 * and by live bytes at the run's peak, and the per-site figures of
 * PyTorch's profiler memory table (`prof.key_averages().table(
 * sort_by="cuda_memory_usage")`).
 *
 * Per site: allocations and their requested bytes over the run; of them,
 * the frees and their bytes; the same as the allocator rounded them (the
 * block bytes: what PyTorch's caching allocator reports to the profiler,
 * `reportMemoryUsageToProfiler(block, block->size)` at malloc and
 * `-block->size` at free, CUDACachingAllocator.cpp); and the requested
 * bytes live at the peak.
 *
 * The peak:
 *   simulated run  the first moment the run's allocated bytes (A: the sum
 *                  over its tenants of the model's allocated_bytes, PyTorch's
 *                  active bytes) reach their maximum, read through the
 *                  engine's hooks (sim/engine.h) while the run itself goes;
 *                  a moment after an allocation or the initial state, the
 *                  only times A rises.
 *   info           the trace's peak of live requested bytes (no allocator).
 *
 * With --repeat, blocks a pass leaves live are freed by the engine without
 * an event: they stay counted live at their sites (a leak across passes is
 * what --repeat looks for). Memory: O(sites + live allocations) per tenant.
 */
#ifndef GM_SITE_TOP_H
#define GM_SITE_TOP_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "sim/engine.h"
#include "traces/site_tally.h"
#include "traces/trace.h"

/* One site's figures (site 0: the allocations with no site recorded). */
typedef struct gm_site_row {
    uint32_t site;
    uint64_t alloc_count, alloc_bytes; /* over the run, requested bytes        */
    uint64_t free_count, freed_bytes;  /* frees of those allocations          */
    uint64_t alloc_block_bytes;        /* the same as the allocator rounded them */
    uint64_t freed_block_bytes;        /* (info: the requested bytes)          */
    uint64_t peak_bytes, peak_count;   /* live, requested bytes, at the peak   */
    int64_t cuda_mem;                  /* CUDA Mem: Self of every site whose stack holds
                                          this site's frame, its own included */
} gm_site_row;

/* Self CUDA Mem of PyTorch's profiler: block bytes allocated less freed. */
static inline int64_t gm_site_row_self(const gm_site_row *r)
{
    return (int64_t)r->alloc_block_bytes - (int64_t)r->freed_block_bytes;
}

enum gm_site_order {
    GM_SITE_BY_ALLOC = 0,    /* bytes allocated over the run              */
    GM_SITE_BY_PEAK = 1,     /* live bytes at the peak                    */
    GM_SITE_BY_SELF = 2,     /* Self CUDA Mem (allocated less freed blocks) */
    GM_SITE_BY_CUDA_MEM = 3, /* CUDA Mem (gm_top_sites_finish), the profiler's sort_by */
};

typedef struct gm_site_acc {
    gm_sites sites;                          /* the tenant's /sites (n = 0: it has none) */
    gm_site_tally tally;                     /* live requested bytes by site, now and at the peak */
    gm_addrmap req, blk;                     /* key(addr) -> requested bytes, block bytes */
    uint64_t *ac, *ab, *fc, *fb, *abb, *fbb; /* by site, as gm_site_row */
    int64_t *incl;                           /* by site: CUDA Mem (after finish) */
    gm_alloc *a;                             /* the tenant's allocator while it runs */
} gm_site_acc;

typedef struct gm_top_sites {
    size_t n; /* tenants */
    gm_site_acc *t;
    const char **names;  /* [tenant]: what the run calls each trace */
    int simulated;       /* 1: the peak is the simulated A; 0: live requested bytes */
    uint64_t peak_bytes; /* that peak */
    int peak_tenant;     /* the tenant whose event made it (-1: the initial state) */
    uint64_t peak_event; /* the event just after which it was reached */
    uint64_t now_bytes;  /* info: live requested bytes now */
    int rc;              /* GM_ENOMEM met in a hook */
} gm_top_sites;

/* Read each tenant's /sites and hook cfg (alloc, event, init and end hooks,
 * which must be unset) so that gm_simulate(cfg) fills ts. Unhook before
 * cfg is used again (gm_oom_fixes copies it into threads). */
int gm_top_sites_hook(gm_top_sites *ts, gm_sim_config *cfg, gm_err *err);
void gm_top_sites_unhook(gm_sim_config *cfg);
/* One pass over a trace (rewound first and after): the peak of live
 * requested bytes, /initial_state blocks included. name: what to call it. */
int gm_top_sites_trace(gm_trace_reader *r, const char *name, gm_top_sites *ts, gm_err *err);
void gm_top_sites_free(gm_top_sites *ts);
/* After the run: CUDA Mem per site, PyTorch's inclusive figure (an op's own
 * memory and its child ops'). A call site has no child operators, but its
 * frame is an outer frame of other sites' stacks: CUDA Mem of site S is
 * the Self CUDA Mem of every site whose stack (/sites keeps the stack of
 * the first allocation that named it) has S's frame, S's own included. A
 * stack line matches S when, with its file cut to the last path
 * component, it is S's name (the importer's rule, traces/IMPORT.md).
 * gm_top_sites_trace calls it itself. GM_OK or GM_ENOMEM. */
int gm_top_sites_finish(gm_top_sites *ts);

/* The k sites (site >= 1 with an allocation or live bytes) first in order,
 * ties by lower site; returns how many (<= k). */
size_t gm_top_sites_rows(const gm_top_sites *ts, size_t tenant, int order, gm_site_row *out,
                         size_t k);
/* Site s's row (0: no site recorded). */
gm_site_row gm_top_sites_row(const gm_top_sites *ts, size_t tenant, uint32_t s);

#endif
