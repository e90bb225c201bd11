/* results_json.c - see results.h. */
#include "results.h"

#include "kv.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/outfile.h"
#include "base/strbuf.h"
#include "base/version.h"
#include "traces/trace.h"

static json_t *ju(uint64_t v)
{
    return json_integer((json_int_t)v);
}

/* One row per bucket. Readers find columns by name; new columns go at the
 * end, so rows read by position (the first five) keep their meaning. */
static json_t *timeline_json(const gm_timeline *tl)
{
    json_t *pts = json_array();
    for (size_t i = 0; i < tl->n; i++) {
        const gm_tl_point *p = &tl->p[i];
        json_array_append_new(
            pts, json_pack("[I,I,I,I,f,I,I,I]", (json_int_t)p->t_ns, (json_int_t)p->q_max,
                           (json_int_t)p->a_max, (json_int_t)p->r_max, (double)p->ext_frag,
                           (json_int_t)p->q_min, (json_int_t)p->a_min, (json_int_t)p->r_min));
    }
    return json_pack("{s:I,s:I,s:[s,s,s,s,s,s,s,s],s:o}", "t0_ns", (json_int_t)tl->t0, "width_ns",
                     (json_int_t)tl->width_ns, "columns", "t_ns", "requested_max", "allocated_max",
                     "reserved_max", "ext_frag", "requested_min", "allocated_min", "reserved_min",
                     "points", pts);
}

static json_t *oom_json(const gm_oom *o)
{
    return json_pack("{s:I,s:I,s:i,s:i,s:I,s:I,s:I,s:I,s:I,s:s,s:I,s:I,s:b}", "t_ns",
                     (json_int_t)o->t_ns, "event_index", (json_int_t)o->event_index, "pass",
                     (int)o->pass, "tenant", o->tenant, "size_bytes", (json_int_t)o->size,
                     "reserved_bytes", (json_int_t)o->reserved, "allocated_bytes",
                     (json_int_t)o->allocated, "largest_free_bytes", (json_int_t)o->largest_free,
                     "device_used_bytes", (json_int_t)o->device_used, "verdict",
                     gm_oom_verdict_name(o->verdict), "limit_bytes", (json_int_t)o->limit,
                     "other_tenants_bytes", (json_int_t)o->others, "initial", o->initial);
}

json_t *gm_metrics_json(const gm_metrics *m, uint64_t capacity)
{
    json_t *o = json_object();
    json_object_set_new(o, "peak_live_bytes", ju(m->peak_q));
    json_object_set_new(o, "peak_allocated_bytes", ju(m->peak_a));
    json_object_set_new(o, "peak_reserved_bytes", ju(m->peak_r));
    json_object_set_new(o, "peak_live_t_ns", ju(m->peak_q_t));
    json_object_set_new(o, "peak_reserved_t_ns", ju(m->peak_r_t));
    json_object_set_new(o, "fragmentation", json_real(gm_metrics_fragmentation(m)));
    json_object_set_new(o, "fragmentation_time_weighted",
                        json_real(gm_metrics_frag_time_weighted(m)));
    json_object_set_new(o, "utilization", json_real(gm_metrics_utilization(m)));
    json_object_set_new(o, "external_fragmentation_mean", json_real(gm_metrics_ext_frag_mean(m)));
    json_object_set_new(o, "external_fragmentation_max", json_real(m->ext_frag_max));
    double span = (double)(m->t_last - m->t_first);
    double dev_util = span > 0 && capacity ? m->int_r / (span * (double)capacity)
                      : capacity           ? (double)m->r / (double)capacity
                                           : 0.0;
    json_object_set_new(o, "device_utilization", json_real(dev_util));
    json_object_set_new(o, "t_first_ns", ju(m->t_first));
    json_object_set_new(o, "t_last_ns", ju(m->t_last));
    json_object_set_new(o, "events", ju(m->n_events));
    json_object_set_new(o, "oom_count", ju(m->n_oom));
    json_t *ooms = json_array();
    for (size_t i = 0; i < m->n_oom_kept; i++)
        json_array_append_new(ooms, oom_json(&m->ooms[i]));
    json_object_set_new(o, "ooms", ooms);
    json_object_set_new(o, "timeline", timeline_json(&m->tl));
    return o;
}

static json_t *driver_json(const gm_alloc_counters *c)
{
    return json_pack(
        "{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "malloc_calls", (json_int_t)c->n_driver_alloc,
        "free_calls", (json_int_t)c->n_driver_free, "malloc_ns", (json_int_t)c->driver_alloc_ns,
        "free_ns", (json_int_t)c->driver_free_ns, "total_ns", (json_int_t)gm_counters_driver_ns(c),
        "num_alloc_retries", (json_int_t)c->num_alloc_retries, "grow_retries",
        (json_int_t)c->grow_retries, "cache_flushes", (json_int_t)c->n_cache_flushes,
        "released_bytes", (json_int_t)c->released_bytes);
}

static json_t *tenant_json(const gm_sim_config *cfg, const gm_sim_result *r, size_t i)
{
    const gm_tenant_result *t = &r->t[i];
    const gm_tenant_spec *sp = &cfg->tenants[i];
    json_t *o = json_object();
    json_object_set_new(o, "trace", gm_json_text(t->path));
    json_object_set_new(o, "source", gm_json_text(t->source));
    json_object_set_new(o, "trace_hash", gm_json_text(t->trace_hash));
    json_object_set_new(o, "trace_events", ju(t->trace_events));
    json_object_set_new(o, "offset_ns", ju(sp->offset_ns));
    json_object_set_new(o, "repeat", ju(sp->repeat));
    json_object_set_new(o, "quota_bytes", ju(sp->quota_bytes));
    json_object_set_new(o, "alloc_conf", gm_json_text(t->alloc_conf));
    json_object_set_new(o, "status",
                        json_string(t->status == GM_TENANT_COMPLETED ? "completed" : "aborted"));
    if (t->status == GM_TENANT_ABORTED) json_object_set_new(o, "abort_t_ns", ju(t->abort_t_ns));
    json_object_set_new(o, "events_done", ju(t->events_done));
    json_object_set_new(o, "initial_live_bytes", ju(t->init_live_bytes));
    json_object_set_new(o, "initial_reserved_bytes", ju(t->init_reserved_bytes));
    json_object_set_new(o, "unknown_frees", ju(t->unknown_frees));
    json_object_set_new(o, "live_reallocs", ju(t->live_reallocs));
    json_object_set_new(o, "recorded_segment_events", ju(t->recorded_segment_events));
    json_object_set_new(o, "repeat_leftover_bytes", ju(t->repeat_leftover_bytes));
    json_object_set_new(o, "scope_released_bytes", ju(t->scope_released_bytes));
    json_object_set_new(o, "scope_rescues", ju(t->scope_rescues));
    if (r->share != GM_SHARE_NONE || r->mps) { /* --share, --mps (engine.h) */
        json_object_set_new(o, "class", json_string(gm_tenant_class_name(t->cls)));
        json_object_set_new(o, "request_bytes", ju(t->request_bytes));
        json_object_set_new(o, "limit_bytes", ju(t->limit_bytes));
        json_object_set_new(o, "ooms", ju(t->m.n_oom));
    }
    /* metrics.peak_allocated_bytes is PyTorch's active_bytes peak; this is
     * its allocated_bytes peak (frees at free_requested) */
    json_object_set_new(o, "phase_empty_caches", ju(t->phase_empty_caches));
    json_object_set_new(o, "phase_empty_cache_bytes", ju(t->phase_empty_cache_bytes));
    json_object_set_new(o, "free_requested_events", ju(t->free_requested_events));
    json_object_set_new(o, "peak_torch_allocated_bytes", ju(t->peak_torch_allocated_bytes));
    if (t->policy_report) json_object_set_new(o, "policy_report", gm_report_json(t->policy_report));
    if (r->has_host_tier) { /* --host-tier, --on-oom chain (sim/host_tier.h) */
        const gm_tier_stats *x = &t->tier;
        json_t *h = json_object();
        json_object_set_new(h, "spills", ju(x->spills));
        json_object_set_new(h, "spill_bytes", ju(x->spill_bytes));
        json_object_set_new(h, "fetches", ju(x->fetches));
        json_object_set_new(h, "fetch_bytes", ju(x->fetch_bytes));
        json_object_set_new(h, "drops", ju(x->drops));
        json_object_set_new(h, "drop_bytes", ju(x->drop_bytes));
        json_object_set_new(h, "spill_stall_ns", ju(x->spill_ns));
        json_object_set_new(h, "fetch_stall_ns", ju(x->fetch_ns));
        json_object_set_new(h, "stall_ns", ju(x->spill_ns + x->fetch_ns));
        json_object_set_new(h, "fetch_ooms", ju(x->fetch_ooms));
        json_object_set_new(h, "ooms_resolved_by_spill", ju(x->oom_spill_resolved));
        json_object_set_new(h, "peak_host_bytes", ju(x->peak_host_bytes));
        json_object_set_new(o, "host_tier", h);
    }
    if (r->on_oom_chain) {
        const gm_tier_stats *x = &t->tier;
        double n = x->chain_ooms ? (double)x->chain_ooms : 1.0;
        json_t *c = json_object();
        json_object_set_new(c, "ooms", ju(x->chain_ooms));
        json_object_set_new(c, "resolved_by_release", ju(x->by_release));
        json_object_set_new(c, "resolved_by_degrade", ju(x->by_degrade));
        json_object_set_new(c, "resolved_by_offload", ju(x->by_offload));
        json_object_set_new(c, "unresolved", ju(x->unresolved));
        json_object_set_new(c, "release_rate", json_real((double)x->by_release / n));
        json_object_set_new(c, "degrade_rate", json_real((double)x->by_degrade / n));
        json_object_set_new(c, "offload_rate", json_real((double)x->by_offload / n));
        json_object_set_new(c, "unresolved_rate", json_real((double)x->unresolved / n));
        json_object_set_new(c, "degraded", json_boolean(t->degraded));
        json_object_set_new(c, "degraded_allocs", ju(x->degraded_allocs));
        json_object_set_new(c, "degraded_bytes", ju(x->degraded_bytes));
        json_object_set_new(o, "oom_chain", c);
    }
    json_object_set_new(o, "metrics", gm_metrics_json(&t->m, r->capacity_bytes));
    json_object_set_new(o, "driver", driver_json(&t->c));
    /* PyTorch's memory_stats() at the end of the trace; absent for a model
     * that keeps no such statistics */
    if (t->has_stats) json_object_set_new(o, "memory_stats", gm_memory_stats_json(&t->stats));
    return o;
}

json_t *gm_result_json(const gm_sim_config *cfg, const gm_sim_result *r, const char *command)
{
    char now[32];
    gm_utc_now(now, sizeof now);
    json_t *root = json_object();
    json_object_set_new(root, "schema", json_string(GM_RESULT_SCHEMA));
    json_object_set_new(root, "gmsim_version", json_string(GM_VERSION));
    json_object_set_new(root, "command", json_string(command));
    json_object_set_new(root, "created_utc", json_string(now));
    json_object_set_new(root, "backend", json_string("model"));

    json_t *in = json_object();
    json_object_set_new(in, "capacity_bytes", ju(r->capacity_bytes));
    json_object_set_new(in, "overhead_bytes", ju(r->overhead_bytes));
    json_object_set_new(in, "allocator", gm_json_text(r->allocator));
    json_object_set_new(in, "alloc_conf_given",
                        cfg->alloc_conf ? gm_json_text(cfg->alloc_conf) : json_null());
    json_object_set_new(in, "policy", gm_json_text(r->policy));
    json_object_set_new(in, "policy_realizable", json_boolean(r->policy_realizable));
    json_object_set_new(in, "memory_fraction", json_real(r->memory_fraction));
    json_object_set_new(in, "on_oom",
                        json_string(r->on_oom_chain  ? "chain"
                                    : r->on_oom_skip ? "skip"
                                                     : "abort"));
    if (r->has_host_tier)
        json_object_set_new(in, "host_tier",
                            json_pack("{s:s,s:f,s:I,s:s}", "link", r->host_tier.name, "bytes_per_s",
                                      r->host_tier.bytes_per_s, "size_bytes",
                                      (json_int_t)r->host_tier.size, "touch",
                                      gm_touch_name(r->host_tier.touch)));
    json_object_set_new(in, "lenient", json_boolean(cfg->lenient));
    json_object_set_new(in, "scope", json_string(cfg->scope_device ? "device" : "self"));
    if (r->share != GM_SHARE_NONE || r->mps) {
        json_object_set_new(in, "share", json_string(gm_share_mode_name(r->share)));
        json_object_set_new(in, "mps", json_boolean(r->mps));
    }
    json_object_set_new(in, "latency",
                        json_pack("{s:I,s:I,s:I,s:I}", "malloc_base_ns",
                                  (json_int_t)cfg->latency.malloc_base_ns, "malloc_ns_per_gib",
                                  (json_int_t)cfg->latency.malloc_ns_per_gib, "free_base_ns",
                                  (json_int_t)cfg->latency.free_base_ns, "free_ns_per_gib",
                                  (json_int_t)cfg->latency.free_ns_per_gib));
    json_object_set_new(root, "inputs", in);

    json_t *dev = gm_metrics_json(&r->device, r->capacity_bytes);
    json_object_set_new(dev, "peak_device_used_bytes", ju(r->peak_device_used));
    json_object_set_new(dev, "tenants", ju(r->n_tenants));
    json_object_set_new(dev, "tenants_completed", ju(gm_sim_completed(r)));
    gm_alloc_counters sum = gm_sim_totals(r);
    json_object_set_new(dev, "driver", driver_json(&sum));
    json_object_set_new(root, "device", dev);

    json_t *ts = json_array();
    for (size_t i = 0; i < r->n_tenants; i++)
        json_array_append_new(ts, tenant_json(cfg, r, i));
    json_object_set_new(root, "tenants", ts);
    json_object_set_new(root, "events", ju(r->events));
    json_object_set_new(root, "wall_s", json_real(r->wall_s));
    return root;
}

json_t *gm_json_text(const char *s)
{
    json_t *j = json_string(s ? s : "");
    if (j) return j;
    gm_strbuf b;
    gm_sb_init(&b);
    gm_sb_utf8(&b, s);
    j = b.failed ? NULL : json_string(gm_sb_str(&b));
    gm_sb_free(&b);
    return j ? j : json_string("");
}

int gm_json_write(json_t *root, const char *path, gm_err *err)
{
    gm_outfile o;
    int rc = gm_out_open(&o, path, err);
    if (rc) return rc;
    if (json_dumpf(root, o.f, JSON_INDENT(1) | JSON_ENSURE_ASCII) != 0 || fputc('\n', o.f) == EOF) {
        gm_out_abort(&o);
        return gm_errf(err, GM_EIO, "%s: cannot write the JSON results: %s", path,
                       strerror(errno ? errno : EIO));
    }
    return gm_out_commit(&o, err);
}
