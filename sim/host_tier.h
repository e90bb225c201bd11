/*
 * host_tier.h - a host-memory tier behind the device (--host-tier) and the
 * OOM fallback chain (--on-oom chain); README, "Host tier and the OOM
 * fallback chain".
 *
 * Host tier: when an allocation would fail after the release policy and the
 * allocator did all they could, live blocks are moved to host memory (their
 * device bytes are freed in the allocator model) until it fits. The blocks
 * spilled first are those whose last use is oldest; the trace's events have
 * no reads (traces/trace.h: alloc, free, free_requested, ...), so a block's
 * last use is its allocation: oldest allocated first, for every policy (a
 * realizable rule; the oracle's "farthest next use" is not modelled). When
 * the trace next touches a spilled block, its free:
 *   touch=free (default)  the free stands for the block's last use (PyTorch
 *                         frees a tensor when its last reference goes, right
 *                         after the kernel that last read it): the block is
 *                         fetched back first (allocated again on the device,
 *                         the transfer a stall), then freed
 *   touch=none            frees are not uses: the host copy is dropped, no
 *                         fetch (the optimistic bound)
 * Transfers take bytes / bandwidth (the tensor's requested bytes, either
 * way); the time is reported as stall, the trace's clock is not moved.
 */
#ifndef GM_HOST_TIER_H
#define GM_HOST_TIER_H

#include <stdint.h>

#include "base/err.h"

enum gm_touch { GM_TOUCH_FREE = 0, GM_TOUCH_NONE = 1 };

typedef struct gm_host_tier {
    char name[32];      /* "pcie4", "pcie5", "c2c" or "12.5GB/s" as given */
    double bytes_per_s; /* one direction */
    uint64_t size;      /* host bytes the tier may hold, all tenants (0 = no limit) */
    int touch;          /* enum gm_touch */
} gm_host_tier;

/* Parse "pcie4|pcie5|c2c|N GB/s[,size=SIZE][,touch=free|none]". GM_EUSAGE
 * naming the bad part and the choices otherwise. */
int gm_host_tier_parse(const char *arg, gm_host_tier *out, gm_err *err);
/* The transfer time of `bytes` over the tier, in ns (rounded to nearest). */
uint64_t gm_host_tier_ns(const gm_host_tier *h, uint64_t bytes);
const char *gm_touch_name(int touch);

/* What the host tier and the fallback chain did for one tenant. */
typedef struct gm_tier_stats {
    uint64_t spills, spill_bytes;  /* blocks moved to host, their bytes          */
    uint64_t fetches, fetch_bytes; /* blocks moved back before their free        */
    uint64_t drops, drop_bytes;    /* host copies freed without a fetch           */
    uint64_t spill_ns, fetch_ns;   /* transfer time each way (stall)             */
    uint64_t fetch_ooms;           /* fetches that did not fit (counted as OOMs) */
    uint64_t oom_spill_resolved;   /* allocations saved by spilling              */
    uint64_t peak_host_bytes;      /* the most this tenant held on the host      */
    /* --on-oom chain: OOMs it saw, and which step resolved each */
    uint64_t chain_ooms, by_release, by_degrade, by_offload, unresolved;
    uint64_t degraded_allocs; /* activations allocated at half size         */
    uint64_t degraded_bytes;  /* bytes that halving left out                */
} gm_tier_stats;

#endif
