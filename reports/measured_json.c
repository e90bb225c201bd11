/* measured_json.c - gmreplay's measurement as JSON (results.h). */
#include "results.h"

#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <math.h>

json_t *gm_lat_json(gm_lat_samples *s)
{
    double p50 = 0, p90 = 0, p99 = 0;
    if (s->n) {
        gsl_sort(s->ns, 1, s->n);
        p50 = gsl_stats_quantile_from_sorted_data(s->ns, 1, s->n, 0.50);
        p90 = gsl_stats_quantile_from_sorted_data(s->ns, 1, s->n, 0.90);
        p99 = gsl_stats_quantile_from_sorted_data(s->ns, 1, s->n, 0.99);
    }
    return json_pack("{s:I,s:I,s:f,s:f,s:f,s:f,s:f,s:f}", "calls", (json_int_t)s->seen, "total_ns",
                     (json_int_t)llround(s->sum), "mean_ns",
                     s->seen ? s->sum / (double)s->seen : 0.0, "min_ns", s->min, "p50_ns", p50,
                     "p90_ns", p90, "p99_ns", p99, "max_ns", s->max);
}

static json_t *used_json(const gm_used_series *s)
{
    json_t *pts = json_array();
    size_t n = s->n + (s->pending ? 1 : 0);
    for (size_t i = 0; i < n; i++) {
        const gm_used_point *p = &s->p[i];
        json_array_append_new(pts,
                              json_pack("[I,I,I,I]", (json_int_t)p->t_ns, (json_int_t)p->wall_ns,
                                        (json_int_t)p->used_bytes, (json_int_t)p->reserved_bytes));
    }
    return json_pack("{s:I,s:I,s:I,s:{s:[s,s,s,s],s:I,s:o}}", "peak_bytes",
                     (json_int_t)s->peak.used_bytes, "peak_t_ns", (json_int_t)s->peak.t_ns,
                     "samples", (json_int_t)s->samples, "timeline", "columns", "t_ns", "wall_ns",
                     "device_used_max", "reserved", "samples_per_point", (json_int_t)s->stride,
                     "points", pts);
}

static json_t *ooms_json(const gm_measured *m)
{
    json_t *ev = json_array();
    for (size_t i = 0; i < m->n_ooms_kept; i++) {
        const gm_backend_oom *o = &m->ooms[i];
        json_array_append_new(ev, json_pack("{s:s,s:I,s:I,s:I,s:I}", "kind",
                                            o->kind == GM_BOOM_DRIVER ? "driver" : "cap",
                                            "size_bytes", (json_int_t)o->size_bytes, "free_bytes",
                                            (json_int_t)o->free_bytes, "used_bytes",
                                            (json_int_t)o->used_bytes, "wall_ns",
                                            (json_int_t)o->wall_ns));
    }
    return json_pack("{s:I,s:I,s:I,s:o}", "driver_oom_returns", (json_int_t)m->driver_oom_returns,
                     "cap_refusals", (json_int_t)m->cap_refusals, "cap_refusals_driver_had_room",
                     (json_int_t)m->cap_refusals_driver_had_room, "events", ev);
}

json_t *gm_measured_json(gm_measured *m)
{
    json_t *o = json_object();
    json_object_set_new(o, "library", json_string(m->library));
    json_object_set_new(o, "driver_version", json_integer(m->driver_version));
    json_object_set_new(o, "device",
                        json_pack("{s:s,s:i,s:I,s:I}", "name", m->device_name, "ordinal",
                                  m->device_ordinal, "total_bytes",
                                  (json_int_t)m->device_total_bytes, "granularity_bytes",
                                  (json_int_t)m->granularity_bytes));
    json_object_set_new(o, "context_overhead_bytes",
                        json_integer((json_int_t)m->context_overhead_bytes));
    json_object_set_new(o, "free_at_start_bytes", json_integer((json_int_t)m->free_at_start_bytes));
    json_object_set_new(
        o, "capacity",
        json_pack("{s:I,s:I,s:I,s:I,s:I}", "emulated_bytes", (json_int_t)m->emulated_capacity_bytes,
                  "target_free_bytes", (json_int_t)m->target_free_bytes, "ballast_bytes",
                  (json_int_t)m->ballast_bytes, "ballast_chunks", (json_int_t)m->ballast_chunks,
                  "free_after_ballast_bytes", (json_int_t)m->free_after_ballast_bytes));
    json_object_set_new(o, "oom", ooms_json(m));
    json_object_set_new(o, "latency",
                        json_pack("{s:o,s:o,s:o,s:o}", "malloc", gm_lat_json(&m->malloc_lat),
                                  "free", gm_lat_json(&m->free_lat), "map",
                                  gm_lat_json(&m->map_lat), "unmap", gm_lat_json(&m->unmap_lat)));
    json_object_set_new(o, "device_used", used_json(&m->used));
    json_object_set_new(o, "paced", json_boolean(m->paced));
    json_object_set_new(o, "pace_diverged", json_boolean(m->pace_diverged));
    json_object_set_new(o, "interrupted_by_signal", json_integer(m->interrupted_by));
    json_object_set_new(o, "freed_all", json_boolean(m->freed_all));
    json_object_set_new(o, "leaked_bytes", json_integer((json_int_t)m->leaked_bytes));
    json_object_set_new(o, "error", m->error[0] ? json_string(m->error) : json_null());
    json_object_set_new(o, "wall_s", json_real(m->wall_s));
    return o;
}

json_t *gm_replay_result_json(const gm_sim_config *cfg, const gm_sim_result *r, gm_measured *m)
{
    json_t *root = gm_result_json(cfg, r, "replay");
    json_object_set_new(root, "backend", json_string("cuda"));
    json_object_set_new(root, "measured", gm_measured_json(m));
    return root;
}
