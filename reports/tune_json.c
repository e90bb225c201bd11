/* tune_json.c - `gmsim tune`'s result as JSON (schema gmsim-tune/1, results.h). */
#include <stdio.h>
#include <stdlib.h>

#include "results.h"

static json_t *entry_json(const gm_tune_entry *e, long rank)
{
    json_t *o = json_object();
    json_object_set_new(o, "alloc_conf", json_string(e->conf));
    json_object_set_new(o, "memory_fraction", json_real(e->memory_fraction));
    json_object_set_new(o, "default", json_boolean(e->is_default));
    json_object_set_new(o, "recorded", json_boolean(e->is_recorded));
    if (e->skipped || e->rc != GM_OK) {
        json_object_set_new(o, e->skipped ? "refused" : "failed", json_string(e->err.msg));
        return o;
    }
    json_object_set_new(o, "rank", json_integer(rank));
    json_object_set_new(o, "oom_count", json_integer((json_int_t)e->ooms));
    if (e->ooms) {
        json_object_set_new(o, "first_oom_event", json_integer((json_int_t)e->first_oom_index));
        json_object_set_new(o, "first_oom_bytes", json_integer((json_int_t)e->first_oom_size));
    }
    json_object_set_new(o, "peak_live_bytes", json_integer((json_int_t)e->peak_live));
    json_object_set_new(o, "peak_allocated_bytes", json_integer((json_int_t)e->peak_allocated));
    json_object_set_new(o, "peak_reserved_bytes", json_integer((json_int_t)e->peak_reserved));
    json_object_set_new(o, "fragmentation", json_real(e->fragmentation));
    json_object_set_new(o, "driver_calls", json_integer((json_int_t)e->driver_calls));
    json_object_set_new(o, "driver_ns", json_integer((json_int_t)e->driver_ns));
    return o;
}

json_t *gm_tune_json(const gm_sim_config *cfg, const gm_tune *t)
{
    json_t *root = json_object();
    json_object_set_new(root, "schema", json_string(GM_TUNE_SCHEMA));
    json_t *traces = json_array();
    for (size_t i = 0; i < cfg->n_tenants; i++)
        json_array_append_new(traces, json_string(cfg->tenants[i].name ? cfg->tenants[i].name
                                                                       : cfg->tenants[i].path));
    json_object_set_new(root, "traces", traces);
    json_object_set_new(root, "capacity_bytes", json_integer((json_int_t)t->capacity_bytes));
    json_object_set_new(root, "capacity_source", json_string(t->capacity_source));
    json_object_set_new(root, "policy", json_string(t->policy));
    char v[16];
    snprintf(v, sizeof v, "%d.%d", t->torch_version / 100, t->torch_version % 100);
    json_object_set_new(root, "torch_rules", json_string(v));
    json_object_set_new(root, "grid", json_string(t->dims));
    json_object_set_new(root, "threads", json_integer(t->threads));
    json_object_set_new(root, "wall_s", json_real(t->wall_s));
    long *rank_of = calloc(t->n ? t->n : 1, sizeof *rank_of);
    for (size_t k = 0; rank_of && k < t->n_ranked; k++)
        rank_of[t->rank[k]] = (long)k + 1;
    json_t *arr = json_array();
    for (size_t k = 0; k < t->n_ranked; k++) /* ranked first, then the others in grid order */
        json_array_append_new(arr, entry_json(&t->e[t->rank[k]], (long)k + 1));
    for (size_t i = 0; i < t->n; i++)
        if (!rank_of || !rank_of[i]) json_array_append_new(arr, entry_json(&t->e[i], 0));
    free(rank_of);
    json_object_set_new(root, "settings", arr);
    if (t->best >= 0) {
        const gm_tune_entry *b = &t->e[t->best];
        json_object_set_new(root, "best", json_string(b->conf));
        json_object_set_new(root, "best_runs_without_oom", json_boolean(b->ooms == 0));
        char line[400];
        snprintf(line, sizeof line, "export PYTORCH_CUDA_ALLOC_CONF=%s", b->conf);
        json_object_set_new(root, "paste", b->is_default ? json_null() : json_string(line));
    }
    if (t->fitted) {
        json_t *fit = json_object();
        json_object_set_new(fit, "best_bytes",
                            t->fit_best_found ? json_integer((json_int_t)t->fit_best)
                                              : json_null());
        json_object_set_new(fit, "default_bytes",
                            t->fit_dflt_found ? json_integer((json_int_t)t->fit_dflt)
                                              : json_null());
        json_object_set_new(fit, "max_capacity_bytes", json_integer((json_int_t)t->fit_max));
        json_object_set_new(root, "fit", fit);
    }
    return root;
}
