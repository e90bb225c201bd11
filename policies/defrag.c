/*
 * defrag.c - fragmentation-triggered defragmentation at a quiet moment.
 *
 * Every sample=TIME (default 1 ms) it measures the tenant's external
 * fragmentation, 1 - largest free block / (reserved - allocated) (sim/
 * metrics.h; 0 when nothing is free). When it has stayed above
 * threshold=F (default 0.3) for stay=TIME (default: one sample, i.e. at
 * two ticks in a row) and no tensor was allocated for quiet=TIME (default
 * 10 ms), it releases every releasable cached segment (least recently used
 * first): the caching allocator's "re-pack", since live blocks never move,
 * is to give back the free segments so that the next allocations carve
 * fresh, unfragmented ones. Then it waits until the fragmentation fell
 * below the threshold, or the allocator reserved more than it held right
 * after the release (new segments to re-pack), before it defragments anew.
 *
 * On allocation failure: as lru (attempt 0: least recently used segments,
 * as much as needed; attempt 1: everything; then OOM).
 *
 * Its report: defragmentations, the bytes and driver time (cudaFree calls)
 * they cost, and the fragmentation it sampled: mean, peak, the share of
 * samples above the threshold, and mean just before and just after a
 * defragmentation. The run's timeline has the fragmentation over time.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "pressure.h"
#include "sim/policy.h"

typedef struct defrag_policy {
    double threshold;
    uint64_t sample_ns, quiet_ns, stay_ns;
    uint64_t last_alloc_ns;
    int any_alloc;
    int above;               /* above the threshold since above_since */
    int armed;               /* 1: may defragment (fell below, or grew, since the last one) */
    uint64_t reserved_after; /* reserved bytes right after the last defragmentation */
    uint64_t above_since;    /* time of the first sample above */
    uint64_t samples, samples_above;
    double frag_sum, frag_peak, before_sum, after_sum;
    uint64_t defrags, defrag_bytes, defrag_driver_ns;
    gm_seglist segs;
    gm_addr_list order;
    uint64_t fail_bytes, flushes;
} defrag_policy;

static int create(const char *params, void **state, gm_err *err)
{
    static const char *const known[] = {"threshold", "quiet", "sample", "stay", NULL};
    if (gm_policy_check_params("defrag", params, known, err)) return err->code;
    defrag_policy *p = calloc(1, sizeof *p);
    if (!p) return gm_errf(err, GM_ENOMEM, "out of memory");
    p->threshold = 0.3;
    p->sample_ns = 1000000;
    p->quiet_ns = 10000000;
    p->armed = 1;
    char v[64];
    int rc = GM_OK, stay = 0;
    if (gm_policy_param(params, "threshold", v, sizeof v))
        rc = gm_parse_double(v, "--policy defrag:threshold", 0.0, 1.0, &p->threshold, err);
    if (!rc && gm_policy_param(params, "sample", v, sizeof v))
        rc = gm_parse_time(v, "--policy defrag:sample", &p->sample_ns, err);
    if (!rc && p->sample_ns == 0)
        rc = gm_errf(err, GM_EINVAL, "--policy defrag:sample must be more than 0");
    if (!rc && gm_policy_param(params, "quiet", v, sizeof v))
        rc = gm_parse_time(v, "--policy defrag:quiet", &p->quiet_ns, err);
    if (!rc && gm_policy_param(params, "stay", v, sizeof v)) {
        rc = gm_parse_time(v, "--policy defrag:stay", &p->stay_ns, err);
        stay = 1;
    }
    if (rc) {
        free(p);
        return rc;
    }
    if (!stay) p->stay_ns = p->sample_ns;
    *state = p;
    return GM_OK;
}

static void destroy(void *state)
{
    defrag_policy *p = state;
    gm_seglist_free(&p->segs);
    gm_addr_list_free(&p->order);
    free(p);
}

static double ext_frag(gm_alloc *a)
{
    uint64_t r = a->c.reserved_bytes, al = a->c.allocated_bytes;
    if (r <= al) return 0;
    uint64_t lf = a->ops->largest_free(a);
    return 1.0 - (double)lf / (double)(r - al);
}

static uint64_t timer_period(void *state)
{
    return ((defrag_policy *)state)->sample_ns;
}

static void on_timer(void *state, gm_alloc *a, uint64_t now)
{
    defrag_policy *p = state;
    double f = ext_frag(a);
    p->samples++;
    p->frag_sum += f;
    if (f > p->frag_peak) p->frag_peak = f;
    if (f <= p->threshold) {
        p->above = 0;
        p->armed = 1;
        return;
    }
    p->samples_above++;
    if (a->c.reserved_bytes > p->reserved_after) p->armed = 1; /* new segments to re-pack */
    if (!p->above) {
        p->above = 1;
        p->above_since = now;
    }
    int quiet = !p->any_alloc || now - p->last_alloc_ns >= p->quiet_ns;
    if (!p->armed || now - p->above_since < p->stay_ns || !quiet) return;
    uint64_t ns0 = a->c.driver_free_ns;
    uint64_t got = gm_release_lru(a, &p->segs, &p->order, UINT64_MAX, now);
    if (!got) return; /* nothing cached whole-free: nothing a release can re-pack */
    p->defrags++;
    p->defrag_bytes += got;
    p->defrag_driver_ns += a->c.driver_free_ns - ns0;
    p->before_sum += f;
    p->after_sum += ext_frag(a);
    p->armed = 0;
    p->reserved_after = a->c.reserved_bytes;
}

static void on_tensor(void *state, gm_alloc *a, uint64_t handle, uint8_t category, int freed,
                      uint64_t now)
{
    defrag_policy *p = state;
    (void)a, (void)handle, (void)category;
    if (freed) return;
    p->last_alloc_ns = now;
    p->any_alloc = 1;
}

static int on_alloc_fail(void *state, gm_alloc *a, const gm_pressure *pr)
{
    defrag_policy *p = state;
    return gm_lru_fail_chain(a, pr, &p->segs, &p->order, NULL, &p->fail_bytes, &p->flushes);
}

static uint64_t on_foreign_pressure(void *state, gm_alloc *a, uint64_t need, uint64_t now)
{
    defrag_policy *p = state;
    return gm_release_lru(a, &p->segs, &p->order, need, now);
}

static void report(void *state, gm_report *o)
{
    defrag_policy *p = state;
    double n = (double)p->samples, d = (double)p->defrags;
    gm_report_real(o, "threshold", GM_KV_RATIO, p->threshold);
    gm_report_int(o, "quiet_ns", GM_KV_NS, (int64_t)p->quiet_ns);
    gm_report_int(o, "defrags", GM_KV_PLAIN, (int64_t)p->defrags);
    gm_report_int(o, "defrag_released_bytes", GM_KV_BYTES, (int64_t)p->defrag_bytes);
    gm_report_int(o, "defrag_driver_ns", GM_KV_NS, (int64_t)p->defrag_driver_ns);
    gm_report_int(o, "samples", GM_KV_PLAIN, (int64_t)p->samples);
    if (p->samples) {
        gm_report_real(o, "frag.mean", GM_KV_RATIO, p->frag_sum / n);
        gm_report_real(o, "frag.peak", GM_KV_RATIO, p->frag_peak);
        gm_report_real(o, "frag.above_share", GM_KV_RATIO, (double)p->samples_above / n);
    } else {
        gm_report_null(o, "frag.mean", GM_KV_RATIO);
        gm_report_null(o, "frag.peak", GM_KV_RATIO);
        gm_report_null(o, "frag.above_share", GM_KV_RATIO);
    }
    if (p->defrags) {
        gm_report_real(o, "frag.before_defrag", GM_KV_RATIO, p->before_sum / d);
        gm_report_real(o, "frag.after_defrag", GM_KV_RATIO, p->after_sum / d);
    } else {
        gm_report_null(o, "frag.before_defrag", GM_KV_RATIO);
        gm_report_null(o, "frag.after_defrag", GM_KV_RATIO);
    }
    gm_report_int(o, "failure_released_bytes", GM_KV_BYTES, (int64_t)p->fail_bytes);
    gm_report_int(o, "cache_flushes", GM_KV_PLAIN, (int64_t)p->flushes);
    gm_report_summary(o,
                      "defrag: %" PRIu64 " defragmentations released %.2f GiB in %.3f ms of "
                      "driver time; external fragmentation mean %.1f %%, above %.0f %% in %.1f %% "
                      "of samples",
                      p->defrags, (double)p->defrag_bytes / (1ull << 30),
                      (double)p->defrag_driver_ns / 1e6, n ? 100 * p->frag_sum / n : 0,
                      100 * p->threshold, n ? 100 * (double)p->samples_above / n : 0);
}

const gm_policy_ops gm_policy_defrag = {
    .version = GM_POLICY_VERSION,
    .name = "defrag",
    .summary = "release cached segments when external fragmentation stays above threshold=F "
               "and no allocation came for quiet=TIME",
    .realizable = 1,
    .cost = 2.2,
    .create = create,
    .destroy = destroy,
    .on_alloc_fail = on_alloc_fail,
    .timer_period_ns = timer_period,
    .on_timer = on_timer,
    .report = report,
    .on_foreign_pressure = on_foreign_pressure,
    .on_tensor = on_tensor,
};
