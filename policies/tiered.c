/*
 * tiered.c - tiered reservation for an inference service: a base tier for
 * the weights, a dynamic tier for activations and the KV cache, a buffer
 * tier for bursts, each a fraction of the device (policies/README.md).
 *
 *  base=F      (default 0.4) tensors of category parameter
 *  dynamic=F   (default 0.5) every other tensor (activations, the KV
 *              cache, temporaries, inputs, unknown)
 *  buffer=F    (default 0.1) what either tier may borrow when it is full
 *
 * Admission (the admit hook, sim/policy.h): a tensor of B bytes (the block
 * the allocator would give it) goes to its tier when the tier's live bytes
 * + B fit in tier_fraction * (device capacity - context overheads, sized at
 * the first allocation), else to the buffer when the
 * buffer's live bytes + B fit in its share, else it is refused: an OOM
 * (with --on-oom skip the allocation is skipped, the request it belongs
 * to rejected). A freed tensor gives its bytes back to the tier it was
 * admitted to. The fractions must add up to at most 1.
 *
 * Releases: as lru (attempt 0: least recently used cached segments, as
 * much as the failed request needs; attempt 1: everything; then OOM).
 *
 * Its report: the tiers' quotas and peaks, refusals per tier, and what a
 * static reservation of the same total (the quotas reserved at start, as a
 * server that preallocates does) would have shown as utilization: the
 * time-averaged allocated bytes over that reservation.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "pressure.h"
#include "base/addrmap.h"
#include "sim/policy.h"

enum { T_BASE = 0, T_DYNAMIC = 1, T_BUFFER = 2, N_TIERS = 3 };
static const char *const tier_name[N_TIERS] = {"base", "dynamic", "buffer"};

typedef struct tiered_policy {
    double frac[N_TIERS];
    uint64_t quota[N_TIERS]; /* bytes, from the device's capacity at the first call */
    int sized;
    uint64_t live[N_TIERS], peak[N_TIERS];
    uint64_t admitted[N_TIERS], refused[N_TIERS]; /* refused: by the tensor's own tier */
    uint64_t pending;                             /* tier << 56 | bytes of the last admit */
    gm_addrmap tier_of;                           /* handle -> tier << 56 | bytes */
    gm_seglist segs;
    gm_addr_list order;
    /* time-weighted allocated bytes, for the static reservation's utilization */
    uint64_t t0, t_last;
    int started;
    double a_ns;
    uint64_t fail_bytes, flushes;
} tiered_policy;

static int create(const char *params, void **state, gm_err *err)
{
    static const char *const known[] = {"base", "dynamic", "buffer", NULL};
    if (gm_policy_check_params("tiered", params, known, err)) return err->code;
    tiered_policy *p = calloc(1, sizeof *p);
    if (!p) return gm_errf(err, GM_ENOMEM, "out of memory");
    p->frac[T_BASE] = 0.4;
    p->frac[T_DYNAMIC] = 0.5;
    p->frac[T_BUFFER] = 0.1;
    int rc = GM_OK;
    for (int i = 0; i < N_TIERS && !rc; i++) {
        char v[64], what[64];
        snprintf(what, sizeof what, "--policy tiered:%s", tier_name[i]);
        if (gm_policy_param(params, tier_name[i], v, sizeof v))
            rc = gm_parse_double(v, what, 0.0, 1.0, &p->frac[i], err);
    }
    double sum = p->frac[T_BASE] + p->frac[T_DYNAMIC] + p->frac[T_BUFFER];
    if (!rc && sum > 1.0 + 1e-9)
        rc = gm_errf(err, GM_EINVAL,
                     "--policy tiered:%s: base + dynamic + buffer is %.3g, more than the device; "
                     "make the fractions add up to at most 1",
                     params, sum);
    if (!rc && gm_addrmap_init(&p->tier_of, 1024)) rc = gm_errf(err, GM_ENOMEM, "out of memory");
    if (rc) {
        free(p);
        return rc;
    }
    *state = p;
    return GM_OK;
}

static void destroy(void *state)
{
    tiered_policy *p = state;
    gm_addrmap_free(&p->tier_of);
    gm_seglist_free(&p->segs);
    gm_addr_list_free(&p->order);
    free(p);
}

static void size_tiers(tiered_policy *p, gm_alloc *a)
{
    if (p->sized) return;
    /* the quotas are fractions of the device */
    uint64_t c = gm_device_capacity(a->dev), o = a->dev->overhead_bytes;
    uint64_t usable = c > o ? c - o : 0; /* what the processes can allocate: contexts excluded */
    for (int i = 0; i < N_TIERS; i++)
        p->quota[i] = (uint64_t)(p->frac[i] * (double)usable);
    p->sized = 1;
}

/* Time-weight the allocated bytes up to now (before they change). */
static void account(tiered_policy *p, const gm_alloc *a, uint64_t now)
{
    if (!p->started) {
        p->started = 1;
        p->t0 = p->t_last = now;
        return;
    }
    if (now > p->t_last) p->a_ns += (double)a->c.allocated_bytes * (double)(now - p->t_last);
    p->t_last = now;
}

static int admit(void *state, gm_alloc *a, uint64_t size, uint8_t category, uint64_t now)
{
    tiered_policy *p = state;
    size_tiers(p, a);
    account(p, a, now);
    int own = category == GM_CAT_PARAMETER ? T_BASE : T_DYNAMIC;
    uint64_t b = a->ops->block_size(a, size);
    int tier = p->live[own] + b <= p->quota[own]             ? own
               : p->live[T_BUFFER] + b <= p->quota[T_BUFFER] ? T_BUFFER
                                                             : -1;
    if (tier < 0) {
        p->refused[own]++;
        return 0;
    }
    p->pending = (uint64_t)tier << 56 | b;
    return 1;
}

static void on_tensor(void *state, gm_alloc *a, uint64_t handle, uint8_t category, int freed,
                      uint64_t now)
{
    tiered_policy *p = state;
    (void)category;
    account(p, a, now);
    uint64_t key = gm_addrmap_key(handle), v;
    if (freed) {
        if (!gm_addrmap_del(&p->tier_of, key, &v)) return; /* restored, never admitted */
    } else {
        v = p->pending;
        if (gm_addrmap_put(&p->tier_of, key, v)) return; /* out of memory: not tracked */
    }
    int tier = (int)(v >> 56);
    uint64_t b = v & ((1ull << 56) - 1);
    if (freed) {
        p->live[tier] -= b;
        return;
    }
    p->live[tier] += b;
    p->admitted[tier]++;
    if (p->live[tier] > p->peak[tier]) p->peak[tier] = p->live[tier];
}

static int on_alloc_fail(void *state, gm_alloc *a, const gm_pressure *pr)
{
    tiered_policy *p = state;
    return gm_lru_fail_chain(a, pr, &p->segs, &p->order, NULL, &p->fail_bytes, &p->flushes);
}

static uint64_t on_foreign_pressure(void *state, gm_alloc *a, uint64_t need, uint64_t now)
{
    tiered_policy *p = state;
    return gm_release_lru(a, &p->segs, &p->order, need, now);
}

static void report(void *state, gm_report *o)
{
    tiered_policy *p = state;
    uint64_t refused = 0, stat = 0;
    for (int i = 0; i < N_TIERS; i++) {
        char k[64];
        snprintf(k, sizeof k, "%s.quota_bytes", tier_name[i]);
        gm_report_int(o, k, GM_KV_BYTES, (int64_t)p->quota[i]);
        snprintf(k, sizeof k, "%s.peak_bytes", tier_name[i]);
        gm_report_int(o, k, GM_KV_BYTES, (int64_t)p->peak[i]);
        snprintf(k, sizeof k, "%s.admitted", tier_name[i]);
        gm_report_int(o, k, GM_KV_PLAIN, (int64_t)p->admitted[i]);
        if (i != T_BUFFER) {
            snprintf(k, sizeof k, "%s.refused", tier_name[i]);
            gm_report_int(o, k, GM_KV_PLAIN, (int64_t)p->refused[i]);
        }
        refused += p->refused[i];
        stat += p->quota[i];
    }
    double span = p->t_last > p->t0 ? (double)(p->t_last - p->t0) : 0;
    double util = span > 0 && stat ? p->a_ns / span / (double)stat : 0;
    gm_report_int(o, "refused", GM_KV_PLAIN, (int64_t)refused);
    gm_report_int(o, "static_reservation_bytes", GM_KV_BYTES, (int64_t)stat);
    gm_report_real(o, "static_utilization", GM_KV_RATIO, util);
    gm_report_int(o, "failure_released_bytes", GM_KV_BYTES, (int64_t)p->fail_bytes);
    gm_report_int(o, "cache_flushes", GM_KV_PLAIN, (int64_t)p->flushes);
    gm_report_summary(
        o,
        "tiered: %" PRIu64 " refused (base %" PRIu64 ", dynamic %" PRIu64
        "); peaks base %.2f / dynamic %.2f / buffer %.2f GiB; a static reservation "
        "of %.2f GiB would be %.1f %% used",
        refused, p->refused[T_BASE], p->refused[T_DYNAMIC], (double)p->peak[T_BASE] / (1ull << 30),
        (double)p->peak[T_DYNAMIC] / (1ull << 30), (double)p->peak[T_BUFFER] / (1ull << 30),
        (double)stat / (1ull << 30), 100 * util);
}

const gm_policy_ops gm_policy_tiered = {
    .version = GM_POLICY_VERSION,
    .name = "tiered",
    .summary = "inference tiers: weights in base, activations/KV in dynamic, bursts in buffer; "
               "over its tier a tensor is refused",
    .realizable = 1,
    .cost = 3.0,
    .create = create,
    .destroy = destroy,
    .on_alloc_fail = on_alloc_fail,
    .report = report,
    .on_foreign_pressure = on_foreign_pressure,
    .admit = admit,
    .on_tensor = on_tensor,
};
