/* explain_json.c - the "explain" object of a run's JSON (results.h): the
 * live set at the first OOM and at the peak, and the single changes
 * re-simulated (study/explain.h). */
#include "results.h"

static json_t *live_json(const gm_live_set *s)
{
    json_t *o = json_object(), *cats = json_object();
    json_object_set_new(o, "tenant", json_integer(s->tenant));
    json_object_set_new(o, "event_index", json_integer((json_int_t)s->event_index));
    json_object_set_new(o, "live_bytes", json_integer((json_int_t)s->total));
    json_object_set_new(o, "live_tensors", json_integer((json_int_t)s->n));
    for (int c = 0; c < GM_CAT_COUNT; c++)
        if (s->count[c])
            json_object_set_new(cats, gm_category_name(c),
                                json_pack("{s:I,s:I}", "bytes", (json_int_t)s->bytes[c], "count",
                                          (json_int_t)s->count[c]));
    json_object_set_new(o, "by_category", cats);
    if (s->n_trace_sites) { /* the trace names call sites: the top ones, largest first */
        json_t *a = json_array();
        for (size_t i = 0; i < s->n_sites; i++)
            json_array_append_new(a,
                                  json_pack("{s:o,s:I,s:I}", "site", gm_json_text(s->sites[i].name),
                                            "bytes", (json_int_t)s->sites[i].bytes, "count",
                                            (json_int_t)s->sites[i].count));
        json_object_set_new(o, "top_sites", a);
        json_object_set_new(o, "unknown_site_bytes",
                            json_integer((json_int_t)s->unknown_site_bytes));
        json_object_set_new(o, "unknown_site_count",
                            json_integer((json_int_t)s->unknown_site_count));
    }
    return o;
}

json_t *gm_explain_json(const gm_live_set *at, const gm_live_set *peak, const gm_fixes *fx)
{
    json_t *o = json_object();
    json_object_set_new(o, "live_at_first_oom", live_json(at));
    if (peak) json_object_set_new(o, "live_at_peak", live_json(peak));
    json_t *arr = json_array();
    for (size_t i = 0; fx && i < fx->n; i++) {
        const gm_fix *x = &fx->f[i];
        json_t *j = json_object();
        json_object_set_new(j, "change", json_string(x->what));
        json_object_set_new(j, "alloc_conf", json_string(x->conf));
        json_object_set_new(j, "memory_fraction", json_real(x->memory_fraction));
        json_object_set_new(j, "empty_cache_at_phase", json_boolean(x->phase_empty_cache));
        if (x->rc != GM_OK) {
            json_object_set_new(j, "failed", json_string(x->err.msg));
        } else {
            json_object_set_new(j, "oom_count", json_integer((json_int_t)x->ooms));
            json_object_set_new(j, "avoids_oom", json_boolean(x->ooms == 0));
            json_object_set_new(j, "peak_reserved_bytes",
                                json_integer((json_int_t)x->peak_reserved));
            json_object_set_new(j, "driver_calls", json_integer((json_int_t)x->driver_calls));
            json_object_set_new(j, "driver_ns", json_integer((json_int_t)x->driver_ns));
        }
        json_array_append_new(arr, j);
    }
    json_object_set_new(o, "fixes", arr);
    return o;
}
