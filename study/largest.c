/* largest.c - see largest.h. */
#include "largest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simulate.h"

/* Run value x: 1 fits, 0 does not, < 0 an error. */
static int try_value(const gm_sim_config *base, gm_scale *s, int64_t x, gm_largest *out,
                     gm_err *err)
{
    gm_event *ev;
    size_t n;
    int rc = gm_scale_events_at(s, x, &ev, &n, err);
    if (rc) return rc;
    char name[64];
    snprintf(name, sizeof name, "scaled to %lld", (long long)x);
    gm_tenant_spec t = {
        .path = name, .events = ev, .n_events = n, .meta = gm_scale_meta(s, x), .repeat = 1};
    gm_sim_config cfg = *base;
    cfg.tenants = &t;
    cfg.n_tenants = 1;
    cfg.progress = NULL;
    cfg.device = NULL;
    cfg.no_device_stats = 1; /* a verdict or a row: no memory_stats() (engine.h) */
    gm_sim_result *r = NULL;
    out->runs++;
    rc = gm_simulate(&cfg, &r, err);
    free(ev);
    if (rc == GM_EOOM) return 0; /* the context alone does not fit */
    if (rc) return rc;
    int ok = r->device.n_oom == 0 && gm_sim_completed(r) == r->n_tenants;
    if (ok) {
        out->peak_reserved = r->device.peak_r;
        out->peak_live = r->device.peak_q;
    }
    out->capacity_bytes = r->capacity_bytes;
    out->usable_bytes =
        r->capacity_bytes > r->overhead_bytes ? r->capacity_bytes - r->overhead_bytes : 0;
    gm_sim_result_free(r);
    return ok;
}

int gm_fit_largest(const gm_sim_config *base, gm_scale *s, const char *spec, int64_t max_x,
                   gm_largest *out, gm_err *err)
{
    memset(out, 0, sizeof *out);
    snprintf(out->spec, sizeof out->spec, "%s", spec ? spec : "pytorch");
    gm_sim_config cfg = *base;
    cfg.policy = out->spec;
    if (max_x < 1 || max_x > GM_SCALE_MAX_X) max_x = GM_SCALE_MAX_X;
    /* start at the largest recording and double while it fits */
    int64_t lo = 0, hi = 0, x = gm_scale_max_input(s);
    if (x > max_x) x = max_x;
    gm_largest at_lo = *out;
    for (;;) {
        gm_largest tmp = *out;
        int ok = try_value(&cfg, s, x, &tmp, err);
        out->runs = tmp.runs;
        out->capacity_bytes = tmp.capacity_bytes;
        out->usable_bytes = tmp.usable_bytes;
        if (ok < 0) return ok;
        if (!ok) {
            hi = x;
            break;
        }
        lo = x;
        at_lo = tmp;
        if (x == max_x) break;
        x = x * 2 > max_x ? max_x : x * 2;
    }
    /* lo fits (or 0), hi fails (or 0: everything up to max_x fits) */
    while (hi && hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        gm_largest tmp = *out;
        int ok = try_value(&cfg, s, mid, &tmp, err);
        out->runs = tmp.runs;
        if (ok < 0) return ok;
        if (ok) {
            lo = mid;
            at_lo = tmp;
        } else {
            hi = mid;
        }
    }
    out->found = lo > 0;
    out->largest = lo;
    out->first_fail = hi;
    out->peak_reserved = lo ? at_lo.peak_reserved : 0;
    out->peak_live = lo ? at_lo.peak_live : 0;
    return GM_OK;
}
