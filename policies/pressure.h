/*
 * pressure.h - what the realizable policies and the oracle share: how much
 * must be released for a failed request to fit, how far a tenant is over a
 * proactive threshold, and releasing segments in an order the policy chose.
 *
 * Segment ids are valid until the next malloc or free, and a release
 * changes only the segment it released (alloc.h), so one view serves a
 * whole ordered release; nothing here keeps an id across a malloc or free.
 */
#ifndef GM_POLICIES_PRESSURE_H
#define GM_POLICIES_PRESSURE_H

#include "seglist.h"
#include "sim/policy.h"

/* Bytes to give back so that the driver allocation of p->alloc_size fits:
 * the larger of the device's shortfall (capacity - overhead - used) and the
 * memory limit's (--memory-fraction / --quota). Never 0: when neither says
 * why the driver refused (a real device), it is the allocation size. */
uint64_t gm_pressure_need(const gm_alloc *a, const gm_pressure *p);

/* Bytes over a proactive threshold `frac` (0..1) if `incoming` more bytes
 * were reserved now: over frac * the tenant's memory limit, or over frac *
 * device capacity counting every tenant's memory (what cudaMemGetInfo
 * shows a process). 0 when under both, or frac <= 0. */
uint64_t gm_pressure_over(const gm_alloc *a, double frac, uint64_t incoming);

/* gm_policy_ops.inert for a policy whose one proactive part is
 * threshold=F, checked before a grow through gm_pressure_over (lru,
 * priority): inert when F is 0 or not given, whatever the limits. */
int gm_threshold_inert(const char *params, const gm_alloc_limits *limits);

/* Release releasable segments named by address, in the order given, until
 * at least `need` bytes were released (UINT64_MAX: all of them). When l's
 * first n entries are those addresses in that order and were taken from
 * the view since the last malloc or free (a policy's ranked copy), they are
 * used as they are; else l is refilled with the current view. Returns the
 * bytes released; with got_each (n entries, may be NULL), also what each
 * address gave. */
uint64_t gm_release_in_order(gm_alloc *a, gm_seglist *l, const uint64_t *addrs, size_t n,
                             uint64_t need, uint64_t now_ns, uint64_t *got_each);

/* Release everything releasable (PyTorch's release_cached_blocks) and count
 * a cache flush. Returns the bytes released. */
uint64_t gm_release_all(gm_alloc *a, uint64_t now_ns);

/* Keep only releasable segments (whole free ones, free expandable pages). */
void gm_seglist_keep_releasable(gm_seglist *l);

/* qsort of a view, safe for an empty one (qsort(NULL, 0) is undefined). */
void gm_seg_sort(gm_seg_info *v, size_t n, int (*cmp)(const void *, const void *));

/* qsort order: oldest last use first; ties by address (deterministic). */
int gm_seg_cmp_lru(const void *a, const void *b);

/* A growable array of addresses, the order a policy wants to release in. */
typedef struct gm_addr_list {
    uint64_t *v;
    size_t n, cap;
} gm_addr_list;
int gm_addr_list_from(gm_addr_list *o, const gm_seglist *l); /* l's addresses, in l's order */
void gm_addr_list_free(gm_addr_list *o);

/* Release releasable segments least recently used first (ties: lower
 * address) until at least `need` bytes were released; l and order are the
 * policy's reusable buffers. Returns the bytes released. */
uint64_t gm_release_lru(gm_alloc *a, gm_seglist *l, gm_addr_list *order, uint64_t need,
                        uint64_t now_ns);

/* The failure chain lru, tiered and defrag share: attempt 0 releases LRU
 * segments (gm_release_lru) until the request fits and retries if that was
 * enough; attempt 1 releases everything cached, as PyTorch's
 * release_cached_blocks, and retries; then out of memory. Counts attempt-0
 * releases (fail_releases may be NULL), their bytes, and the flushes. */
int gm_lru_fail_chain(gm_alloc *a, const gm_pressure *pr, gm_seglist *l, gm_addr_list *order,
                      uint64_t *fail_releases, uint64_t *fail_bytes, uint64_t *flushes);

#endif
