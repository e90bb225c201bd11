/* table_sim.c - the tables of the simulating commands: run, compare, fit
 * (table.h). */
#include "table.h"

#include <string.h>

#include "kv.h"
#include "base/units.h"

/* A ratio as the tables print it: "12.3 %". */
static void pct(char *buf, size_t n, double v)
{
    snprintf(buf, n, "%.1f %%", v * 100.0);
}

/* ---------------------------------------------------------------- run */

static void print_series(FILE *f, const char *title, const gm_metrics *m)
{
    char q[32], a[32], r[32];
    fprintf(f, "  %-28s %12s %12s %12s\n", title, gm_fmt_bytes(m->peak_q, q, sizeof q),
            gm_fmt_bytes(m->peak_a, a, sizeof a), gm_fmt_bytes(m->peak_r, r, sizeof r));
}

/* The verdict of one OOM (sim/metrics.h) in words, with the numbers that
 * decide it. */
void gm_oom_cause(const gm_oom *o, char *buf, size_t len)
{
    char b1[32], b2[32], b3[32], b4[32], b5[32];
    uint64_t cache_free = o->reserved > o->allocated ? o->reserved - o->allocated : 0;
    uint64_t used = o->reserved + o->others;
    uint64_t dev_free = o->limit > used ? o->limit - used : 0;
    switch (o->verdict) {
    case GM_OOM_SHORTAGE:
        snprintf(buf, len, "shortage: %s allocated + %s requested > %s this job may hold",
                 gm_fmt_bytes(o->allocated, b1, sizeof b1), gm_fmt_bytes(o->size, b2, sizeof b2),
                 gm_fmt_bytes(o->limit, b3, sizeof b3));
        break;
    case GM_OOM_OTHER_TENANT:
        snprintf(buf, len,
                 "other tenant: the other tenants use %s, leaving %s on the device for %s "
                 "requested; alone, this job's %s reserved would leave %s",
                 gm_fmt_bytes(o->others, b1, sizeof b1), gm_fmt_bytes(dev_free, b2, sizeof b2),
                 gm_fmt_bytes(o->size, b3, sizeof b3), gm_fmt_bytes(o->reserved, b4, sizeof b4),
                 gm_fmt_bytes(o->limit > o->reserved ? o->limit - o->reserved : 0, b5, sizeof b5));
        break;
    case GM_OOM_ALLOCATOR_LIMIT:
        snprintf(buf, len,
                 "allocator limit: %s free on the device, but the allocator may not grow (a "
                 "pool's maximum size); it holds %s, %s of it free, %s requested",
                 gm_fmt_bytes(dev_free, b1, sizeof b1), gm_fmt_bytes(o->reserved, b2, sizeof b2),
                 gm_fmt_bytes(cache_free, b3, sizeof b3), gm_fmt_bytes(o->size, b4, sizeof b4));
        break;
    default:
        if (o->largest_free >= o->size)
            snprintf(buf, len,
                     "fragmentation: a free block of %s was there, but not usable by this "
                     "request (another stream's, or kept apart by the allocator's rules)",
                     gm_fmt_bytes(o->largest_free, b1, sizeof b1));
        else
            snprintf(buf, len,
                     "fragmentation: %s free in the cache (reserved - allocated) and %s on the "
                     "device, %s requested, but the largest free block is %s",
                     gm_fmt_bytes(cache_free, b1, sizeof b1), gm_fmt_bytes(dev_free, b2, sizeof b2),
                     gm_fmt_bytes(o->size, b3, sizeof b3),
                     gm_fmt_bytes(o->largest_free, b4, sizeof b4));
    }
}

void gm_oom_describe(const gm_oom *o, int tenant, char *buf, size_t len)
{
    char b1[32], b2[32], b3[32], t[32], who[32] = "", cause[400];
    if (tenant) snprintf(who, sizeof who, "tenant %d, ", o->tenant);
    if (o->initial) { /* not an event's OOM: the live set never fitted */
        snprintf(buf, len,
                 "%sbefore the first event: the %s alive at the start of the trace do not fit in "
                 "the %s this job may hold; nothing was replayed",
                 who, gm_fmt_bytes(o->size, b1, sizeof b1), gm_fmt_bytes(o->limit, b2, sizeof b2));
        return;
    }
    gm_oom_cause(o, cause, sizeof cause);
    snprintf(buf, len, "%sevent %llu of pass %u at %s: %s requested, %s reserved, %s allocated; %s",
             who, (unsigned long long)o->event_index, o->pass + 1, gm_fmt_ns(o->t_ns, t, sizeof t),
             gm_fmt_bytes(o->size, b1, sizeof b1), gm_fmt_bytes(o->reserved, b2, sizeof b2),
             gm_fmt_bytes(o->allocated, b3, sizeof b3), cause);
}

static void print_ooms(FILE *f, const gm_metrics *m)
{
    char b1[32], b2[32], b3[32], b4[32], b5[32], b6[32];
    size_t show = m->n_oom_kept < 5 ? m->n_oom_kept : 5;
    for (size_t i = 0; i < show; i++) {
        const gm_oom *o = &m->ooms[i];
        if (o->initial) {
            uint64_t usable = o->device_capacity > o->device_used - o->reserved
                                  ? o->device_capacity - (o->device_used - o->reserved)
                                  : 0;
            fprintf(f,
                    "    tenant %d: the %s alive at the start of the trace do not fit in %s "
                    "usable (device %s minus context and other tenants); nothing was replayed\n",
                    o->tenant, gm_fmt_bytes(o->size, b1, sizeof b1),
                    gm_fmt_bytes(usable, b2, sizeof b2),
                    gm_fmt_bytes(o->device_capacity, b3, sizeof b3));
            continue;
        }
        char pass[32] = "";
        if (o->pass) snprintf(pass, sizeof pass, " (repeat pass %u)", o->pass + 1);
        fprintf(f,
                "    OOM tenant %d event %llu%s at %s: %s requested; reserved %s, allocated %s, "
                "largest free block %s, device used %s\n",
                o->tenant, (unsigned long long)o->event_index, pass,
                gm_fmt_ns(o->t_ns, b5, sizeof b5), gm_fmt_bytes(o->size, b1, sizeof b1),
                gm_fmt_bytes(o->reserved, b2, sizeof b2), gm_fmt_bytes(o->allocated, b3, sizeof b3),
                gm_fmt_bytes(o->largest_free, b4, sizeof b4),
                gm_fmt_bytes(o->device_used, b6, sizeof b6));
        char cause[400];
        gm_oom_cause(o, cause, sizeof cause);
        fprintf(f, "      verdict: %s\n", cause);
    }
    if (m->n_oom > show)
        fprintf(f, "    ... %llu more (all in --json)\n", (unsigned long long)(m->n_oom - show));
}

/* Each policy report, short (reports/kv.h); everything is in --json. */
static void print_policy_reports(FILE *f, const gm_sim_result *r)
{
    for (size_t i = 0; i < r->n_tenants; i++) {
        const gm_report *rep = r->t[i].policy_report;
        if (!rep || rep->n == 0) continue;
        if (r->n_tenants > 1)
            fprintf(f, "\n  policy report (%s), tenant %zu\n", r->policy, i);
        else
            fprintf(f, "\n  policy report (%s)\n", r->policy);
        gm_report_print(f, rep);
    }
}

/* --share / --mps: each tenant's class, request, limit and OOMs. */
static void print_sharing(FILE *f, const gm_sim_result *r)
{
    if (r->share == GM_SHARE_NONE && !r->mps) return;
    char b1[32], b2[32];
    fprintf(f, "  %-44s %s%s\n", "sharing", gm_share_mode_name(r->share),
            r->mps ? ", MPS (one context for all tenants)" : "");
    for (size_t i = 0; i < r->n_tenants; i++) {
        const gm_tenant_result *t = &r->t[i];
        fprintf(f, "    tenant %zu: %-13s request %10s, limit %10s: %llu OOM%s, %s\n", i,
                gm_tenant_class_name(t->cls),
                t->request_bytes ? gm_fmt_bytes(t->request_bytes, b1, sizeof b1) : "none",
                t->limit_bytes ? gm_fmt_bytes(t->limit_bytes, b2, sizeof b2) : "none",
                (unsigned long long)t->m.n_oom, t->m.n_oom == 1 ? "" : "s",
                t->status == GM_TENANT_COMPLETED ? "completed" : "aborted");
    }
}

/* --host-tier and --on-oom chain (sim/host_tier.h): per tenant. */
static void print_tier(FILE *f, const gm_sim_result *r)
{
    if (!r->has_host_tier) return;
    char b1[32], b2[32], b3[32], b4[32], b5[32], b6[32];
    const gm_host_tier *h = &r->host_tier;
    fprintf(f, "  %-44s %s, %.1f GB/s each way, host %s, touch=%s\n", "host tier", h->name,
            h->bytes_per_s / 1e9, h->size ? gm_fmt_bytes(h->size, b1, sizeof b1) : "unlimited",
            gm_touch_name(h->touch));
    for (size_t i = 0; i < r->n_tenants; i++) {
        const gm_tier_stats *x = &r->t[i].tier;
        fprintf(f,
                "    tenant %zu: %llu spill%s (%s to host), %llu fetch%s (%s back), %llu "
                "dropped (%s); stall %s (%s out, %s in); %llu OOM%s resolved by spilling",
                i, (unsigned long long)x->spills, x->spills == 1 ? "" : "s",
                gm_fmt_bytes(x->spill_bytes, b1, sizeof b1), (unsigned long long)x->fetches,
                x->fetches == 1 ? "" : "es", gm_fmt_bytes(x->fetch_bytes, b2, sizeof b2),
                (unsigned long long)x->drops, gm_fmt_bytes(x->drop_bytes, b3, sizeof b3),
                gm_fmt_ns(x->spill_ns + x->fetch_ns, b4, sizeof b4),
                gm_fmt_ns(x->spill_ns, b5, sizeof b5), gm_fmt_ns(x->fetch_ns, b6, sizeof b6),
                (unsigned long long)x->oom_spill_resolved, x->oom_spill_resolved == 1 ? "" : "s");
        if (x->fetch_ooms)
            fprintf(f, "; %llu fetch(es) did not fit (OOMs)", (unsigned long long)x->fetch_ooms);
        fprintf(f, "\n");
    }
    if (!r->on_oom_chain) return;
    for (size_t i = 0; i < r->n_tenants; i++) {
        const gm_tenant_result *t = &r->t[i];
        const gm_tier_stats *x = &t->tier;
        double n = x->chain_ooms ? (double)x->chain_ooms : 1.0;
        fprintf(f,
                "    tenant %zu: OOM chain: %llu OOM%s: release %llu (%.1f %%), degrade %llu "
                "(%.1f %%), offload %llu (%.1f %%), unresolved %llu (%.1f %%)%s\n",
                i, (unsigned long long)x->chain_ooms, x->chain_ooms == 1 ? "" : "s",
                (unsigned long long)x->by_release, 100.0 * (double)x->by_release / n,
                (unsigned long long)x->by_degrade, 100.0 * (double)x->by_degrade / n,
                (unsigned long long)x->by_offload, 100.0 * (double)x->by_offload / n,
                (unsigned long long)x->unresolved, 100.0 * (double)x->unresolved / n,
                t->degraded ? "" : "; precision not degraded");
        if (t->degraded)
            fprintf(f,
                    "    tenant %zu: DEGRADED: %llu activation allocation(s) at half size (%s "
                    "less requested, summed over them): precision degraded\n",
                    i, (unsigned long long)x->degraded_allocs,
                    gm_fmt_bytes(x->degraded_bytes, b1, sizeof b1));
    }
}

void gm_table_run(FILE *f, const gm_sim_config *cfg, const gm_sim_result *r)
{
    char b1[32], b2[32], p[32];
    fprintf(f, "gmsim run: %zu trace%s on a %s device (%s context overhead per tenant)\n",
            r->n_tenants, r->n_tenants == 1 ? "" : "s",
            gm_fmt_bytes(r->capacity_bytes, b1, sizeof b1),
            gm_fmt_bytes(r->overhead_bytes, b2, sizeof b2));
    if (strcmp(r->capacity_source, "--capacity"))
        fprintf(f, "device size: %s\n", r->capacity_source);
    fprintf(f, "allocator %s, policy %s%s%s%s\n", r->allocator, r->policy,
            r->policy_realizable ? "" : " (UNREALIZABLE: uses the future; a bound)",
            r->on_oom_chain  ? ", OOM chain (release, degrade, offload)"
            : r->on_oom_skip ? ", OOMs skipped"
                             : "",
            cfg->scope_device ? ", scope device" : "");
    for (size_t i = 0; i < r->n_tenants; i++) {
        const gm_tenant_result *t = &r->t[i];
        fprintf(f, "  [%zu] %s  (%s, %llu events, hash %s, alloc conf '%s'%s)\n", i, t->path,
                t->source, (unsigned long long)t->trace_events, t->trace_hash, t->alloc_conf,
                cfg->tenants[i].repeat > 1 ? ", repeated" : "");
    }
    fprintf(f, "\n  %-28s %12s %12s %12s\n", "peak", "live (Q)", "allocated", "reserved");
    if (r->n_tenants > 1)
        for (size_t i = 0; i < r->n_tenants; i++) {
            char name[48];
            snprintf(name, sizeof name, "tenant %zu%s", i,
                     r->t[i].status == GM_TENANT_ABORTED ? " (aborted)" : "");
            print_series(f, name, &r->t[i].m);
        }
    print_series(f, r->n_tenants > 1 ? "device (all tenants)" : "", &r->device);
    const gm_metrics *d = &r->device;
    fprintf(f, "\n");
    pct(p, sizeof p, gm_metrics_fragmentation(d));
    fprintf(f, "  %-44s %s\n", "fragmentation (1 - peak A / peak R)", p);
    pct(p, sizeof p, gm_metrics_frag_time_weighted(d));
    fprintf(f, "  %-44s %s\n", "fragmentation, time-weighted", p);
    pct(p, sizeof p, gm_metrics_utilization(d));
    fprintf(f, "  %-44s %s\n", "utilization (time-weighted A / R)", p);
    char p2[32];
    pct(p, sizeof p, gm_metrics_ext_frag_mean(d));
    pct(p2, sizeof p2, d->ext_frag_max);
    fprintf(f, "  %-44s %s mean, %s max\n", "external fragmentation (1 - largest free/(R-A))", p,
            p2);
    pct(p, sizeof p, (double)r->peak_device_used / (double)r->capacity_bytes);
    fprintf(f, "  %-44s %s (%s)\n", "peak device used (R + overhead) / capacity", p,
            gm_fmt_bytes(r->peak_device_used, b1, sizeof b1));
    gm_alloc_counters tot = gm_sim_totals(r);
    fprintf(f, "  %-44s %llu malloc, %llu free, %s modelled\n", "driver calls",
            (unsigned long long)tot.n_driver_alloc, (unsigned long long)tot.n_driver_free,
            gm_fmt_ns(gm_counters_driver_ns(&tot), b1, sizeof b1));
    fprintf(f, "  %-44s %llu\n", "OOMs", (unsigned long long)d->n_oom);
    print_ooms(f, d);
    if (r->n_tenants > 1)
        fprintf(f, "  %-44s %zu of %zu\n", "tenants that ran to completion", gm_sim_completed(r),
                r->n_tenants);
    if (cfg->scope_device) {
        uint64_t rel = 0, resc = 0;
        for (size_t i = 0; i < r->n_tenants; i++) {
            rel += r->t[i].scope_released_bytes;
            resc += r->t[i].scope_rescues;
        }
        fprintf(f, "  %-44s %s released for others, %llu allocation(s) rescued\n",
                "scope device (tenants release for others)", gm_fmt_bytes(rel, b1, sizeof b1),
                (unsigned long long)resc);
    }
    print_sharing(f, r);
    print_tier(f, r);
    for (size_t i = 0; i < r->n_tenants; i++) {
        const gm_tenant_result *t = &r->t[i];
        if (t->init_live_bytes && r->initial_state == GM_INITIAL_LIVE)
            fprintf(f,
                    "  tenant %zu: %s alive before the first event, allocated through the model "
                    "(--initial-state live; the recorded cache, %s, is not used)\n",
                    i, gm_fmt_bytes(t->init_live_bytes, b1, sizeof b1),
                    gm_fmt_bytes(t->init_reserved_bytes, b2, sizeof b2));
        else if (t->init_live_bytes && r->initial_state == GM_INITIAL_RECORDED)
            fprintf(f,
                    "  tenant %zu: %s alive before the first event in the recorded allocator's "
                    "%s of segments (--initial-state recorded)\n",
                    i, gm_fmt_bytes(t->init_live_bytes, b1, sizeof b1),
                    gm_fmt_bytes(t->init_reserved_bytes, b2, sizeof b2));
        else if (t->init_skipped_blocks)
            fprintf(f,
                    "  tenant %zu: %s in %llu blocks alive before the first event left out "
                    "(--initial-state none); their frees are skipped\n",
                    i, gm_fmt_bytes(t->init_live_bytes, b1, sizeof b1),
                    (unsigned long long)t->init_skipped_blocks);
        if (t->conf_no_effect[0])
            fprintf(f, "  tenant %zu: alloc conf keys with no effect on the model: %s\n", i,
                    t->conf_no_effect);
        if (t->empty_cache_events)
            fprintf(f, "  tenant %zu: %llu torch.cuda.empty_cache() calls replayed, %s released\n",
                    i, (unsigned long long)t->empty_cache_events,
                    gm_fmt_bytes(t->empty_cache_bytes, b1, sizeof b1));
        if (t->phase_empty_caches)
            fprintf(f,
                    "  tenant %zu: %llu torch.cuda.empty_cache() calls at phase boundaries "
                    "(--empty-cache-at-phase), %s released\n",
                    i, (unsigned long long)t->phase_empty_caches,
                    gm_fmt_bytes(t->phase_empty_cache_bytes, b1, sizeof b1));
        if (t->free_requested_events)
            fprintf(f,
                    "  tenant %zu: %llu frees deferred past free_requested (record_stream): peak "
                    "allocated %s counts their blocks until the free, as PyTorch's active_bytes "
                    "does; PyTorch's allocated_bytes, which drops them at free_requested, peaked "
                    "at %s\n",
                    i, (unsigned long long)t->free_requested_events,
                    gm_fmt_bytes(t->m.peak_a, b1, sizeof b1),
                    gm_fmt_bytes(t->peak_torch_allocated_bytes, b2, sizeof b2));
        if (t->recorded_ooms)
            fprintf(f,
                    "  tenant %zu: %llu allocation%s that failed in the recording (oom events): "
                    "%llu fit here\n",
                    i, (unsigned long long)t->recorded_ooms, t->recorded_ooms == 1 ? "" : "s",
                    (unsigned long long)t->recorded_oom_fits);
        if (t->unknown_frees || t->live_reallocs)
            fprintf(f,
                    "  tenant %zu: repaired %llu free(s) of unknown addresses, %llu "
                    "re-allocation(s) of live addresses\n",
                    i, (unsigned long long)t->unknown_frees, (unsigned long long)t->live_reallocs);
        if (t->repeat_leftover_bytes)
            fprintf(f, "  tenant %zu: %s left allocated at pass ends were freed (--repeat)\n", i,
                    gm_fmt_bytes(t->repeat_leftover_bytes, b1, sizeof b1));
    }
    print_policy_reports(f, r);
    double rate = r->wall_s > 0 ? (double)r->events / r->wall_s : 0;
    fprintf(f, "\n  simulated %llu events in %.3f s (%.1f M events/s)\n",
            (unsigned long long)r->events, r->wall_s, rate / 1e6);
    uint64_t ff = 0;
    for (size_t i = 0; i < r->n_tenants; i++)
        ff += r->t[i].fast_forwarded_events;
    if (ff) /* sim/ffwd.h */
        fprintf(f,
                "  %llu of them fast-forwarded: iterations that repeat one already simulated "
                "from the same allocator state, applied from its record (the same results)\n",
                (unsigned long long)ff);
}

/* ------------------------------------------------------------ compare */

/* The first ranking criterion on which a beats b (NULL: a tie). */
static const char *criterion(const gm_sim_result *a, const gm_sim_result *b)
{
    gm_rank_key ka = gm_sim_rank_key(a), kb = gm_sim_rank_key(b);
    int by;
    gm_rank_cmp(&ka, &kb, &by);
    return gm_rank_by_name(by);
}

static void print_row(FILE *f, const char *label, int w, const gm_compare_entry *e)
{
    const gm_sim_result *r = e->r;
    char pr[32], fr[32], ut[32], ex[32], dt[32], calls[48];
    gm_alloc_counters tot = gm_sim_totals(r);
    snprintf(calls, sizeof calls, "%llu/%llu", (unsigned long long)tot.n_driver_alloc,
             (unsigned long long)tot.n_driver_free);
    gm_fmt_bytes(r->device.peak_r, pr, sizeof pr);
    pct(fr, sizeof fr, gm_metrics_fragmentation(&r->device));
    pct(ut, sizeof ut, gm_metrics_utilization(&r->device));
    pct(ex, sizeof ex, gm_metrics_ext_frag_mean(&r->device));
    gm_fmt_ns(gm_counters_driver_ns(&tot), dt, sizeof dt);
    fprintf(f, "  %5s  %-*s %5llu  %2zu/%-2zu %13s %7s %7s %8s %13s %10s  %s\n", label, w, e->label,
            (unsigned long long)r->device.n_oom, gm_sim_completed(r), r->n_tenants, pr, fr, ut, ex,
            calls, dt,
            !e->realizable  ? "bound"
            : e->deployable ? "deployable"
                            : "custom allocator");
}

/* "; the smallest card that does is 5.28 GiB (predictive, a custom
 * allocator); as PyTorch deploys it, 5.32 GiB (pytorch)" */
static void smallest_card(FILE *f, const gm_compare *c, long best)
{
    char b1[32];
    const gm_compare_entry *b = &c->e[best],
                           *d = c->best_deployable >= 0 ? &c->e[c->best_deployable] : NULL;
    fprintf(f, "; the smallest card that does is %s (%s%s)",
            gm_fmt_bytes(b->fit_capacity, b1, sizeof b1), b->label,
            b->deployable ? "" : ", a custom allocator");
    if (!b->deployable && d && d->fit_found)
        fprintf(f, "; as deployed today, %s (%s)", gm_fmt_bytes(d->fit_capacity, b1, sizeof b1),
                d->label);
}

void gm_compare_verdict(FILE *f, const gm_compare *c)
{
    char b1[32];
    long v = gm_compare_verdict_entry(c);
    if (v < 0) {
        fprintf(f, "OOM: no realizable policy was run\n");
        return;
    }
    if (c->winner < 0) { /* only unrealizable policies asked: the bound answers */
        const gm_sim_result *b = c->e[v].r;
        if (!b->device.n_oom)
            fprintf(f, "bound: no OOM, peak reserved %s",
                    gm_fmt_bytes(b->device.peak_r, b1, sizeof b1));
        else
            fprintf(f, "OOM: even the bound runs out of memory on %s",
                    gm_fmt_bytes(b->capacity_bytes, b1, sizeof b1));
        fprintf(f, " (%s, UNREALIZABLE: reads the trace's future; no realizable policy asked)\n",
                c->e[v].label);
        return;
    }
    const gm_compare_entry *w = &c->e[c->winner];
    if (!w->r->device.n_oom) {
        fprintf(f, "fits: %s, peak reserved %s\n", w->label,
                gm_fmt_bytes(w->r->device.peak_r, b1, sizeof b1));
        return;
    }
    fprintf(f, "OOM: nothing realizable runs on %s without OOM",
            gm_fmt_bytes(w->r->capacity_bytes, b1, sizeof b1));
    long best = -1;
    for (size_t k = 0; c->fitted && k < c->n_ranked; k++) {
        const gm_compare_entry *e = &c->e[c->rank[k]];
        if (e->fit_found && (best < 0 || e->fit_capacity < c->e[best].fit_capacity))
            best = (long)c->rank[k];
    }
    if (best >= 0) smallest_card(f, c, best);
    fprintf(f, "\n");
}

/* What a user can run today against what needs a custom allocator
 * (policies/README.md, "Deployable today"). */
static void print_kinds(FILE *f, const gm_compare *c)
{
    char b1[32], b2[32];
    const gm_compare_entry *d = c->best_deployable >= 0 ? &c->e[c->best_deployable] : NULL;
    const gm_compare_entry *u = c->best_custom >= 0 ? &c->e[c->best_custom] : NULL;
    if (d)
        fprintf(f,
                "deployable today (the allocator's own behaviour, its settings): %s, %llu OOM%s, "
                "peak reserved %s\n",
                d->label, (unsigned long long)d->r->device.n_oom,
                d->r->device.n_oom == 1 ? "" : "s",
                gm_fmt_bytes(d->r->device.peak_r, b1, sizeof b1));
    if (u) {
        fprintf(f, "with a custom allocator (policies/README.md): %s, %llu OOM%s, peak reserved %s",
                u->label, (unsigned long long)u->r->device.n_oom,
                u->r->device.n_oom == 1 ? "" : "s",
                gm_fmt_bytes(u->r->device.peak_r, b1, sizeof b1));
        if (d && u->r->device.peak_r < d->r->device.peak_r)
            fprintf(f, " (%s less than %s)",
                    gm_fmt_bytes(d->r->device.peak_r - u->r->device.peak_r, b2, sizeof b2),
                    d->label);
        fprintf(f, "\n");
    }
}

/* Each policy's one-line summary of its own report (sim/report.h), e.g. what
 * the predictive policy learned and how well it predicted. */
static void print_notes(FILE *f, const gm_compare *c)
{
    for (size_t i = 0; i < c->n; i++) {
        const gm_sim_result *r = c->e[i].r;
        for (size_t t = 0; t < r->n_tenants; t++) {
            const gm_report *rep = r->t[t].policy_report;
            if (!rep || !rep->summary[0]) continue;
            char who[32] = "";
            if (r->n_tenants > 1) snprintf(who, sizeof who, " tenant %zu", t);
            fprintf(f, "  %s%s: %s\n", c->e[i].label, who, rep->summary);
        }
    }
}

void gm_table_compare(FILE *f, const gm_sim_config *cfg, const gm_compare *c)
{
    const gm_sim_result *r0 = c->e[0].r;
    char b1[32], b2[32];
    fprintf(f,
            "gmsim compare: %zu trace%s on a %s device (%s context overhead per tenant), "
            "scope %s\n",
            r0->n_tenants, r0->n_tenants == 1 ? "" : "s",
            gm_fmt_bytes(r0->capacity_bytes, b1, sizeof b1),
            gm_fmt_bytes(r0->overhead_bytes, b2, sizeof b2), cfg->scope_device ? "device" : "self");
    for (size_t i = 0; i < r0->n_tenants; i++) {
        const gm_tenant_result *t = &r0->t[i];
        fprintf(f, "  [%zu] %s  (%s, %llu events, hash %s", i, t->path, t->source,
                (unsigned long long)t->trace_events, t->trace_hash);
        if (cfg->tenants[i].offset_ns)
            fprintf(f, ", offset %s", gm_fmt_ns(cfg->tenants[i].offset_ns, b1, sizeof b1));
        if (cfg->tenants[i].repeat > 1) fprintf(f, ", repeat %u", cfg->tenants[i].repeat);
        if (cfg->tenants[i].quota_bytes)
            fprintf(f, ", quota %s", gm_fmt_bytes(cfg->tenants[i].quota_bytes, b1, sizeof b1));
        fprintf(f, ")\n");
    }
    if (c->by_allocator)
        fprintf(f,
                "%zu allocator / policy runs ranked by OOMs, then fragmentation, then "
                "utilization (higher is better), then driver time\n\n",
                c->n);
    else
        fprintf(f,
                "allocator %s; %zu policies ranked by OOMs, then fragmentation, then utilization "
                "(higher is better), then driver time\n\n",
                r0->allocator, c->n);
    int w = 8;
    for (size_t i = 0; i < c->n; i++)
        w = (int)strlen(c->e[i].label) > w ? (int)strlen(c->e[i].label) : w;
    fprintf(f, "  %5s  %-*s %5s  %5s %13s %7s %7s %8s %13s %10s  %s\n", "rank", w,
            c->by_allocator ? "allocator / policy" : "policy", "OOMs", "done", "peak reserved",
            "frag", "util", "ext.frag", "malloc/free", "driver", "kind");
    for (size_t k = 0; k < c->n_ranked; k++) {
        char lab[24];
        snprintf(lab, sizeof lab, "%zu", k + 1);
        print_row(f, lab, w, &c->e[c->rank[k]]);
    }
    for (size_t i = 0; i < c->n; i++)
        if (!c->e[i].realizable) print_row(f, "bound", w, &c->e[i]);
    fprintf(f,
            "  (peak live bytes, the floor no policy beats: %s; frag = 1 - peak A / peak R; "
            "util = time-weighted A / R)\n\n",
            gm_fmt_bytes(r0->device.peak_q, b1, sizeof b1));
    print_kinds(f, c);
    if (c->winner >= 0 && c->e[c->winner].r->device.n_oom) {
        /* never a winner that OOMs: the smallest card that runs it instead */
        fprintf(f, "winner: none: nothing realizable runs on %s without OOM",
                gm_fmt_bytes(r0->capacity_bytes, b1, sizeof b1));
        long best = -1;
        for (size_t k = 0; c->fitted && k < c->n_ranked; k++) {
            const gm_compare_entry *e = &c->e[c->rank[k]];
            if (e->fit_found && (best < 0 || e->fit_capacity < c->e[best].fit_capacity))
                best = (long)c->rank[k];
        }
        if (best >= 0)
            smallest_card(f, c, best);
        else if (c->fitted)
            fprintf(f, "; none does up to %s",
                    gm_fmt_bytes(c->e[c->winner].fit_max, b1, sizeof b1));
        fprintf(f, "\n");
    } else if (c->winner >= 0) {
        const gm_compare_entry *w0 = &c->e[c->winner];
        fprintf(f, "winner: %s", w0->label);
        if (c->n_ranked > 1) {
            const gm_compare_entry *w1 = &c->e[c->rank[1]];
            const char *why = criterion(w0->r, w1->r);
            if (why)
                fprintf(f, " (ahead of %s on %s)", w1->label, why);
            else
                fprintf(f, " (tied with %s on every criterion; the order given breaks ties)",
                        w1->label);
        }
        fprintf(f, "\n");
    } else {
        fprintf(f, "winner: none (no realizable policy was run)\n");
    }
    if (c->bound >= 0) {
        const gm_sim_result *b = c->e[c->bound].r;
        char f1[32], u1[32];
        pct(f1, sizeof f1, gm_metrics_fragmentation(&b->device));
        pct(u1, sizeof u1, gm_metrics_utilization(&b->device));
        fprintf(f,
                "bound:  %s is UNREALIZABLE (it reads the trace's future): %llu OOMs, "
                "fragmentation %s, utilization %s\n",
                c->e[c->bound].label, (unsigned long long)b->device.n_oom, f1, u1);
    }
    print_notes(f, c);
}

/* ---------------------------------------------------------------- fit */

/* The best realizable entry (most copies, or the smallest capacity), only
 * among the deployable ones when deployable_only; -1 if none fits. */
/* Which answers fit_best weighs. */
enum { FIT_REALIZABLE, FIT_DEPLOYABLE, FIT_ANY };

static long fit_best(const gm_fit *fit, int which)
{
    long best = -1;
    for (size_t i = 0; i < fit->n; i++) {
        const gm_fit_entry *e = &fit->e[i];
        if ((which != FIT_ANY && !e->realizable) || e->rc != GM_OK ||
            (which == FIT_DEPLOYABLE && !e->deployable))
            continue;
        int better =
            fit->tenants_mode
                ? e->copies_fit > 0 && (best < 0 || e->copies_fit > fit->e[best].copies_fit)
                : e->found && (best < 0 || e->capacity < fit->e[best].capacity);
        if (better) best = (long)i;
    }
    return best;
}

static void print_capacity(FILE *f, const gm_sim_config *cfg, const gm_fit *fit)
{
    char b1[32], b2[32], b3[32], b4[32];
    uint64_t live = 0;
    for (size_t i = 0; i < fit->n; i++)
        if (fit->e[i].found && fit->e[i].peak_live > live) live = fit->e[i].peak_live;
    uint64_t ctx = cfg->overhead_bytes * cfg->n_tenants;
    fprintf(f, "gmsim fit: smallest device without OOM, per policy (binary search, 2 MiB steps)\n");
    for (size_t i = 0; i < cfg->n_tenants; i++)
        fprintf(f, "  [%zu] %s\n", i, cfg->tenants[i].path);
    fprintf(f,
            "peak live bytes (no allocator reserves less): %s; with %s of context overhead the "
            "floor is %s\n\n",
            gm_fmt_bytes(live, b1, sizeof b1), gm_fmt_bytes(ctx, b2, sizeof b2),
            gm_fmt_bytes(live + ctx, b3, sizeof b3));
    int w = 8;
    for (size_t i = 0; i < fit->n; i++)
        w = (int)strlen(fit->e[i].spec) + 15 > w ? (int)strlen(fit->e[i].spec) + 15 : w;
    fprintf(f, "  %-*s %14s %12s %14s %6s\n", w, "policy", "fits at", "over floor", "peak reserved",
            "runs");
    long best = -1, base = -1;
    for (size_t i = 0; i < fit->n; i++) {
        const gm_fit_entry *e = &fit->e[i];
        char name[400];
        snprintf(name, sizeof name, "%s%s", e->spec, e->realizable ? "" : " (UNREALIZABLE)");
        if (!e->found) {
            fprintf(f, "  %-*s %14s %12s %14s %6u\n", w, name, "no fit", "", "", e->runs);
            fprintf(f, "    (an OOM at every capacity up to %s)\n",
                    gm_fmt_bytes(e->max_capacity, b1, sizeof b1));
            continue;
        }
        uint64_t floor = live + ctx;
        snprintf(b4, sizeof b4, "+%s",
                 gm_fmt_bytes(e->capacity > floor ? e->capacity - floor : 0, b2, sizeof b2));
        fprintf(f, "  %-*s %14s %12s %14s %6u\n", w, name, gm_fmt_bytes(e->capacity, b1, sizeof b1),
                b4, gm_fmt_bytes(e->peak_reserved, b3, sizeof b3), e->runs);
        if (e->realizable && (best < 0 || e->capacity < fit->e[best].capacity)) best = (long)i;
        if (!strcmp(e->spec, "pytorch")) base = (long)i;
    }
    fprintf(f, "  (each fits at C with no OOM and has one at C - 2 MiB; capacities include the "
               "context overhead)\n");
    if (best >= 0) {
        /* the exact size too, which --capacity takes back (5.37 GiB may be below it) */
        fprintf(f, "\nsmallest device: %s at %s (%llu MiB)", fit->e[best].spec,
                gm_fmt_bytes(fit->e[best].capacity, b1, sizeof b1),
                (unsigned long long)(fit->e[best].capacity / GM_MiB));
        if (base >= 0 && base != best && fit->e[base].found &&
            fit->e[base].capacity > fit->e[best].capacity)
            fprintf(f, ", %s less than pytorch",
                    gm_fmt_bytes(fit->e[base].capacity - fit->e[best].capacity, b2, sizeof b2));
        fprintf(f, "\n");
        long dep = fit_best(fit, FIT_DEPLOYABLE);
        if (!fit->e[best].deployable) { /* a custom allocator's answer: and today? */
            char mib[48] = "";
            if (dep >= 0)
                snprintf(mib, sizeof mib, " (%llu MiB)",
                         (unsigned long long)(fit->e[dep].capacity / GM_MiB));
            fprintf(f, "  (%s needs a custom allocator; as deployed today: %s%s%s%s)\n",
                    fit->e[best].spec, dep >= 0 ? fit->e[dep].spec : "nothing fits",
                    dep >= 0 ? " at " : "",
                    dep >= 0 ? gm_fmt_bytes(fit->e[dep].capacity, b3, sizeof b3) : "", mib);
        }
    }
}

static void print_tenants(FILE *f, const gm_sim_config *cfg, const gm_fit *fit, uint64_t cap)
{
    char b1[32], b2[32], b3[32];
    fprintf(f, "gmsim fit --tenants %u: copies of", fit->max_copies);
    for (size_t i = 0; i < cfg->n_tenants; i++)
        fprintf(f, " %s", cfg->tenants[i].path);
    fprintf(f, " on a %s device (%s context overhead each), staggered by %s, scope %s\n\n",
            gm_fmt_bytes(cap, b1, sizeof b1), gm_fmt_bytes(cfg->overhead_bytes, b2, sizeof b2),
            gm_fmt_ns(fit->stagger_ns, b3, sizeof b3), cfg->scope_device ? "device" : "self");
    int w = 8;
    for (size_t i = 0; i < fit->n; i++)
        w = (int)strlen(fit->e[i].spec) + 15 > w ? (int)strlen(fit->e[i].spec) + 15 : w;
    fprintf(f, "  %-*s %12s  %s\n", w, "policy", "copies fit", "at one more copy");
    for (size_t i = 0; i < fit->n; i++) {
        const gm_fit_entry *e = &fit->e[i];
        char name[400], more[96];
        snprintf(name, sizeof name, "%s%s", e->spec, e->realizable ? "" : " (UNREALIZABLE)");
        if (e->copies_fit == e->copies_tried)
            snprintf(more, sizeof more, "(not tried: --tenants %u reached)", fit->max_copies);
        else
            snprintf(more, sizeof more, "%u of %zu tenants completed", e->first_fail_completed,
                     (size_t)e->copies_tried * cfg->n_tenants);
        fprintf(f, "  %-*s %12u  %s\n", w, name, e->copies_fit, more);
    }
}

/* Density: one row per scheduling mode. */
static void print_density(FILE *f, const gm_sim_config *cfg, const gm_fit *fit)
{
    char b1[32], b2[32], b3[32];
    fprintf(f, "gmsim fit --tenants %u: density of the mix", fit->max_copies);
    for (size_t i = 0; i < cfg->n_tenants; i++)
        fprintf(f, " %s", cfg->tenants[i].name ? cfg->tenants[i].name : cfg->tenants[i].path);
    fprintf(f, " on a %s device (%s context overhead each), staggered by %s\n",
            gm_fmt_bytes(fit->capacity_bytes, b1, sizeof b1),
            gm_fmt_bytes(cfg->overhead_bytes, b2, sizeof b2),
            gm_fmt_ns(fit->stagger_ns, b3, sizeof b3));
    for (size_t i = 0; i < cfg->n_tenants; i++) {
        const gm_tenant_spec *t = &cfg->tenants[i];
        int cls = 0;
        uint64_t req = 0, lim = 0;
        gm_err ignore;
        gm_tenant_class_resolve(t, &cls, &req, &lim, &ignore);
        fprintf(f, "  [%zu] %-13s request %10s, limit %10s\n", i, gm_tenant_class_name(cls),
                req ? gm_fmt_bytes(req, b1, sizeof b1) : "none",
                lim ? gm_fmt_bytes(lim, b2, sizeof b2) : "none");
    }
    const char *who = fit->protected_class ? "guaranteed tenants" : "all tenants";
    fprintf(f, "a copy fits when the %s complete without OOM\n\n", who);
    int w = 16;
    for (size_t i = 0; i < fit->n; i++)
        w = (int)strlen(fit->e[i].label) > w ? (int)strlen(fit->e[i].label) : w;
    fprintf(f, "  %-*s %6s %6s %9s %12s %11s  %s\n", w, "mode", "copies", "jobs", "slowdown",
            "utilization", "other OOMs", "at one more copy");
    for (size_t i = 0; i < fit->n; i++) {
        const gm_fit_entry *e = &fit->e[i];
        char copies[16], more[256], sl[32], ut[32];
        if (e->mode == GM_DENSITY_ONE_PER_GPU)
            snprintf(copies, sizeof copies, "-");
        else
            snprintf(copies, sizeof copies, "%u", e->copies_fit);
        if (e->mode == GM_DENSITY_ONE_PER_GPU)
            snprintf(more, sizeof more, "%s", e->refusal[0] ? e->refusal : "");
        else if (e->copies_fit == e->copies_tried && !e->refusal[0])
            snprintf(more, sizeof more, "(not tried: --tenants %u reached)", fit->max_copies);
        else
            snprintf(more, sizeof more, "%s", e->refusal);
        pct(sl, sizeof sl, e->slowdown);
        pct(ut, sizeof ut, e->utilization);
        int none = !e->jobs;
        fprintf(f, "  %-*s %6s %6u %9s %12s %11llu  %s\n", w, e->label, copies, e->jobs,
                none ? "-" : sl, none ? "-" : ut, (unsigned long long)e->other_ooms, more);
    }
    fprintf(f,
            "  (slowdown: the %s' modelled driver time, and host tier transfers with one, "
            "over their time on the device; "
            "utilization: time-weighted allocated bytes over the device)\n",
            who);
}

/* Density in one line: "one job per GPU: 1 per GPU; hard caps: 3 per GPU;
 * ...; guaranteed tenants 0 OOMs, slowdown 1.2 % (the densest mode)". */
static int density_verdict(FILE *f, const gm_fit *fit)
{
    long best = -1;
    for (size_t i = 0; i < fit->n; i++)
        if (fit->e[i].rc == GM_OK && fit->e[i].jobs &&
            (best < 0 || fit->e[i].jobs > fit->e[best].jobs))
            best = (long)i;
    if (!f) return best >= 0;
    if (best < 0) {
        fprintf(f, "OOM: not one job runs without OOM in any mode\n");
        return 0;
    }
    fprintf(f, "fits: ");
    for (size_t i = 0; i < fit->n; i++)
        fprintf(f, "%s: %u per GPU; ", fit->e[i].label, fit->e[i].jobs);
    char sl[32];
    pct(sl, sizeof sl, fit->e[best].slowdown);
    fprintf(f, "%s 0 OOMs, slowdown %s (%s)\n",
            fit->protected_class ? "guaranteed tenants" : "all tenants", sl, fit->e[best].label);
    return 1;
}

int gm_fit_verdict(FILE *f, const gm_fit *fit)
{
    char b1[32], b2[32];
    if (fit->density) return density_verdict(f, fit);
    long best = fit_best(fit, FIT_REALIZABLE), dep = fit_best(fit, FIT_DEPLOYABLE);
    /* only unrealizable policies asked (--policies oracle): the question
     * is the bound, and its answer is the verdict */
    int asked_realizable = 0;
    for (size_t i = 0; i < fit->n; i++)
        asked_realizable |= fit->e[i].realizable;
    long bound = asked_realizable ? -1 : fit_best(fit, FIT_ANY);
    if (!f) return best >= 0 || bound >= 0;
    if (bound >= 0 && fit->tenants_mode)
        fprintf(f,
                "bound: %u copies (%s, UNREALIZABLE: reads the trace's future; no realizable "
                "policy asked)\n",
                fit->e[bound].copies_fit, fit->e[bound].spec);
    else if (bound >= 0)
        fprintf(f,
                "bound: the smallest card is %s, %llu MiB (%s, UNREALIZABLE: reads the trace's "
                "future; no realizable policy asked)\n",
                gm_fmt_bytes(fit->e[bound].capacity, b1, sizeof b1),
                (unsigned long long)(fit->e[bound].capacity / GM_MiB), fit->e[bound].spec);
    else if (best < 0 && fit->tenants_mode)
        fprintf(f, "OOM: not even one copy runs without OOM on %s\n",
                gm_fmt_bytes(fit->capacity_bytes, b1, sizeof b1));
    else if (best < 0) {
        uint64_t max = 0;
        for (size_t i = 0; i < fit->n; i++)
            if (fit->e[i].max_capacity > max) max = fit->e[i].max_capacity;
        fprintf(f, "OOM: nothing%s runs without OOM up to %s\n",
                asked_realizable ? " realizable" : "", gm_fmt_bytes(max, b1, sizeof b1));
    } else if (fit->tenants_mode)
        fprintf(f, "fits: %u copies (%s)\n", fit->e[best].copies_fit, fit->e[best].spec);
    else if (best == dep || fit->e[best].deployable)
        fprintf(f, "fits: the smallest card is %s (%s)\n",
                gm_fmt_bytes(fit->e[best].capacity, b1, sizeof b1), fit->e[best].spec);
    else if (dep >= 0)
        fprintf(f,
                "fits: the smallest card is %s as deployed today (%s); %s with a custom "
                "allocator (%s)\n",
                gm_fmt_bytes(fit->e[dep].capacity, b1, sizeof b1), fit->e[dep].spec,
                gm_fmt_bytes(fit->e[best].capacity, b2, sizeof b2), fit->e[best].spec);
    else
        fprintf(f, "fits: the smallest card is %s with a custom allocator (%s)\n",
                gm_fmt_bytes(fit->e[best].capacity, b1, sizeof b1), fit->e[best].spec);
    return best >= 0 || bound >= 0;
}

void gm_table_fit(FILE *f, const gm_sim_config *cfg, const gm_fit *fit)
{
    if (fit->density) {
        print_density(f, cfg, fit);
        fprintf(f, "\n");
        density_verdict(f, fit);
    } else if (fit->tenants_mode)
        print_tenants(f, cfg, fit, fit->capacity_bytes);
    else
        print_capacity(f, cfg, fit);
}
