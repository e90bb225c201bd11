/*
 * lru.c - release the least recently used cached segments first, and only
 * as much as the failed request needs.
 *
 *  attempt 0     release whole free segments (and free expandable pages) in
 *                order of last use, oldest first (ties: lower address),
 *                until the request fits: the device's shortfall or the
 *                memory limit's (pressure.h). Retry if that was enough.
 *  attempt 1     release everything cached, like PyTorch's
 *                release_cached_blocks, and retry: LRU gives up on an
 *                allocation only where PyTorch would too.
 *  attempt 2     out of memory.
 *  threshold=F   (optional, 0 < F <= 1) proactive: before the allocator
 *                grows, if the tenant's reserved memory would exceed F * its
 *                memory limit, or the device's used memory F * capacity,
 *                release LRU segments until it would not. Checked before the
 *                grow (never after it: the new segment is whole-free then).
 *  --scope device: when another tenant cannot allocate, release LRU
 *                segments until it has what it asked for.
 */
#include <stdio.h>
#include <stdlib.h>

#include "pressure.h"
#include "sim/policy.h"

typedef struct lru_policy {
    double threshold;
    gm_seglist segs;
    gm_addr_list order;
    uint64_t fail_releases, fail_bytes; /* attempt-0 releases */
    uint64_t proactive_bytes, foreign_bytes, flushes;
} lru_policy;

static int create(const char *params, void **state, gm_err *err)
{
    static const char *const known[] = {"threshold", NULL};
    if (gm_policy_check_params("lru", params, known, err)) return err->code;
    lru_policy *p = calloc(1, sizeof *p);
    if (!p) return gm_errf(err, GM_ENOMEM, "out of memory");
    char v[64];
    if (gm_policy_param(params, "threshold", v, sizeof v) &&
        gm_parse_double(v, "--policy lru:threshold", 0.0, 1.0, &p->threshold, err)) {
        free(p);
        return err->code;
    }
    *state = p;
    return GM_OK;
}

static void destroy(void *state)
{
    lru_policy *p = state;
    gm_seglist_free(&p->segs);
    gm_addr_list_free(&p->order);
    free(p);
}

static uint64_t release_lru(lru_policy *p, gm_alloc *a, uint64_t need, uint64_t now)
{
    return gm_release_lru(a, &p->segs, &p->order, need, now);
}

static void before_grow(void *state, gm_alloc *a, const gm_pressure *pr)
{
    lru_policy *p = state;
    uint64_t over = gm_pressure_over(a, p->threshold, gm_device_round(pr->alloc_size));
    if (over) p->proactive_bytes += release_lru(p, a, over, pr->now_ns);
}

static int on_alloc_fail(void *state, gm_alloc *a, const gm_pressure *pr)
{
    lru_policy *p = state;
    return gm_lru_fail_chain(a, pr, &p->segs, &p->order, &p->fail_releases, &p->fail_bytes,
                             &p->flushes);
}

static uint64_t on_foreign_pressure(void *state, gm_alloc *a, uint64_t need, uint64_t now)
{
    lru_policy *p = state;
    uint64_t got = release_lru(p, a, need, now);
    p->foreign_bytes += got;
    return got;
}

static void report(void *state, gm_report *o)
{
    lru_policy *p = state;
    gm_report_real(o, "threshold", GM_KV_PLAIN, p->threshold);
    gm_report_int(o, "failure_releases", GM_KV_PLAIN, (int64_t)p->fail_releases);
    gm_report_int(o, "failure_released_bytes", GM_KV_BYTES, (int64_t)p->fail_bytes);
    gm_report_int(o, "cache_flushes", GM_KV_PLAIN, (int64_t)p->flushes);
    gm_report_int(o, "proactive_released_bytes", GM_KV_BYTES, (int64_t)p->proactive_bytes);
    gm_report_int(o, "foreign_released_bytes", GM_KV_BYTES, (int64_t)p->foreign_bytes);
}

const gm_policy_ops gm_policy_lru = {
    .version = GM_POLICY_VERSION,
    .name = "lru",
    .summary = "least recently used segments first, only as much as needed; threshold=F",
    .realizable = 1,
    .cost = 1.0,
    .create = create,
    .destroy = destroy,
    .before_grow = before_grow,
    .on_alloc_fail = on_alloc_fail,
    .report = report,
    .on_foreign_pressure = on_foreign_pressure,
    .inert = gm_threshold_inert,
};
