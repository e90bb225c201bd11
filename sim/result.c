/* result.c - what a finished run adds up to: see engine.h. The device's
 * totals are summed here and only here; every table, JSON and ranking reads
 * them from these functions. */
#include "engine.h"

#include <stdlib.h>

void gm_sim_result_free(gm_sim_result *r)
{
    if (!r) return;
    for (size_t i = 0; r->t && i < r->n_tenants; i++)
        gm_report_free(r->t[i].policy_report);
    free(r->t);
    free(r);
}

size_t gm_sim_completed(const gm_sim_result *r)
{
    size_t n = 0;
    for (size_t i = 0; i < r->n_tenants; i++)
        n += r->t[i].status == GM_TENANT_COMPLETED;
    return n;
}

gm_alloc_counters gm_sim_totals(const gm_sim_result *r)
{
    gm_alloc_counters sum = {0};
    for (size_t i = 0; i < r->n_tenants; i++) {
        const gm_alloc_counters *c = &r->t[i].c;
        sum.requested_bytes += c->requested_bytes;
        sum.allocated_bytes += c->allocated_bytes;
        sum.reserved_bytes += c->reserved_bytes;
        sum.n_driver_alloc += c->n_driver_alloc;
        sum.n_driver_free += c->n_driver_free;
        sum.driver_alloc_ns += c->driver_alloc_ns;
        sum.driver_free_ns += c->driver_free_ns;
        sum.num_alloc_retries += c->num_alloc_retries;
        sum.grow_retries += c->grow_retries;
        sum.n_cache_flushes += c->n_cache_flushes;
        sum.released_bytes += c->released_bytes;
        if (c->largest_segment > sum.largest_segment) sum.largest_segment = c->largest_segment;
    }
    return sum;
}

gm_rank_key gm_sim_rank_key(const gm_sim_result *r)
{
    gm_alloc_counters tot = gm_sim_totals(r);
    gm_rank_key k = {.oom_count = (double)r->device.n_oom,
                     .fragmentation = gm_metrics_fragmentation(&r->device),
                     .utilization = gm_metrics_utilization(&r->device),
                     .driver_ns = (double)gm_counters_driver_ns(&tot)};
    return k;
}

int gm_result_rank_cmp(const gm_sim_result *a, const gm_sim_result *b)
{
    gm_rank_key ka = gm_sim_rank_key(a), kb = gm_sim_rank_key(b);
    return gm_rank_cmp(&ka, &kb, NULL);
}
