/* compare_json.c - gmsim-compare/1 and gmsim-fit/1 (results.h). */
#include "results.h"

#include <stdlib.h>

#include "base/clock.h"
#include "base/version.h"

json_t *gm_compare_inputs_json(const gm_sim_config *base, char *const *specs, size_t n,
                               const gm_sim_result *any)
{
    json_t *in = json_object();
    json_t *tr = json_array();
    for (size_t i = 0; i < base->n_tenants; i++) {
        const gm_tenant_spec *t = &base->tenants[i];
        /* the snapshot's name, not the temporary trace it was imported into */
        json_t *o =
            json_pack("{s:o,s:I,s:I,s:I}", "trace", gm_json_text(t->name ? t->name : t->path),
                      "offset_ns", (json_int_t)t->offset_ns, "repeat", (json_int_t)t->repeat,
                      "quota_bytes", (json_int_t)t->quota_bytes);
        if (any && i < any->n_tenants)
            json_object_set_new(o, "trace_hash", json_string(any->t[i].trace_hash));
        json_array_append_new(tr, o);
    }
    json_object_set_new(in, "traces", tr);
    if (any) {
        json_object_set_new(in, "capacity_bytes", json_integer((json_int_t)any->capacity_bytes));
        json_object_set_new(in, "allocator", gm_json_text(any->allocator));
    } else {
        json_object_set_new(in, "capacity_bytes", json_integer((json_int_t)base->capacity_bytes));
        json_object_set_new(in, "allocator",
                            json_string(base->allocator ? base->allocator : "pytorch"));
    }
    json_object_set_new(in, "overhead_bytes", json_integer((json_int_t)base->overhead_bytes));
    json_object_set_new(in, "alloc_conf_given",
                        base->alloc_conf ? gm_json_text(base->alloc_conf) : json_null());
    json_object_set_new(in, "memory_fraction", json_real(base->memory_fraction));
    json_object_set_new(in, "on_oom",
                        json_string(base->on_oom_chain  ? "chain"
                                    : base->on_oom_skip ? "skip"
                                                        : "abort"));
    if (base->host_tier)
        json_object_set_new(in, "host_tier",
                            json_pack("{s:s,s:f,s:I,s:s}", "link", base->host_tier->name,
                                      "bytes_per_s", base->host_tier->bytes_per_s, "size_bytes",
                                      (json_int_t)base->host_tier->size, "touch",
                                      gm_touch_name(base->host_tier->touch)));
    json_object_set_new(in, "lenient", json_boolean(base->lenient));
    json_object_set_new(in, "scope", json_string(base->scope_device ? "device" : "self"));
    if (base->share || base->mps) {
        json_object_set_new(in, "share", json_string(gm_share_mode_name(base->share)));
        json_object_set_new(in, "mps", json_boolean(base->mps));
    }
    json_t *ps = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(ps, gm_json_text(specs[i]));
    json_object_set_new(in, "policies", ps);
    return in;
}

static json_t *rank_row(const gm_compare *c, size_t i, long rank)
{
    const gm_compare_entry *e = &c->e[i];
    const gm_sim_result *r = e->r;
    json_t *o = json_object();
    if (rank > 0) json_object_set_new(o, "rank", json_integer(rank));
    json_object_set_new(o, "index", json_integer((json_int_t)i)); /* in "results" */
    json_object_set_new(o, "policy", gm_json_text(e->spec));
    if (c->by_allocator) {
        json_object_set_new(o, "label", gm_json_text(e->label));
        json_object_set_new(o, "allocator", json_string(r->allocator));
        json_object_set_new(o, "alloc_conf",
                            json_string(r->n_tenants ? r->t[0].alloc_conf : e->alloc_conf));
    }
    json_object_set_new(o, "realizable", json_boolean(e->realizable));
    json_object_set_new(o, "deployable", json_boolean(e->deployable));
    json_object_set_new(o, "oom_count", json_integer((json_int_t)r->device.n_oom));
    if (c->fitted && e->realizable) /* the winner ran out of memory: fit's answer */
        json_object_set_new(o, "smallest_capacity_bytes",
                            e->fit_found ? json_integer((json_int_t)e->fit_capacity) : json_null());
    json_object_set_new(o, "tenants_completed", json_integer((json_int_t)gm_sim_completed(r)));
    json_object_set_new(o, "tenants", json_integer((json_int_t)r->n_tenants));
    json_object_set_new(o, "fragmentation", json_real(gm_metrics_fragmentation(&r->device)));
    json_object_set_new(o, "utilization", json_real(gm_metrics_utilization(&r->device)));
    gm_alloc_counters tot = gm_sim_totals(r);
    json_object_set_new(o, "driver_ns", json_integer((json_int_t)gm_counters_driver_ns(&tot)));
    json_object_set_new(o, "peak_reserved_bytes", json_integer((json_int_t)r->device.peak_r));
    json_object_set_new(o, "peak_live_bytes", json_integer((json_int_t)r->device.peak_q));
    return o;
}

json_t *gm_compare_json(const gm_sim_config *base, const gm_compare *c)
{
    char now[32];
    gm_utc_now(now, sizeof now);
    json_t *root = json_object();
    json_object_set_new(root, "schema", json_string(GM_COMPARE_SCHEMA));
    json_object_set_new(root, "gmsim_version", json_string(GM_VERSION));
    json_object_set_new(root, "command", json_string("compare"));
    json_object_set_new(root, "created_utc", json_string(now));
    char **specs = malloc((c->n ? c->n : 1) * sizeof *specs);
    for (size_t i = 0; specs && i < c->n; i++)
        specs[i] = c->e[i].spec;
    json_t *in = gm_compare_inputs_json(base, specs, specs ? c->n : 0, c->n ? c->e[0].r : NULL);
    free(specs);
    if (c->by_allocator) { /* each run's allocator: its label, in run order */
        json_t *al = json_array();
        for (size_t i = 0; i < c->n; i++)
            json_array_append_new(al, json_string(c->e[i].label));
        json_object_set_new(in, "runs", al);
        json_object_set_new(in, "allocator", json_string("(several: see runs)"));
    }
    json_object_set_new(root, "inputs", in);
    json_t *ranking = json_array();
    for (size_t k = 0; k < c->n_ranked; k++)
        json_array_append_new(ranking, rank_row(c, c->rank[k], (long)k + 1));
    json_object_set_new(root, "ranking", ranking);
    if (c->bound >= 0) {
        json_t *b = rank_row(c, (size_t)c->bound, 0);
        json_object_set_new(b, "note",
                            json_string("UNREALIZABLE: uses the trace's future; the "
                                        "bound, never the winner"));
        json_object_set_new(root, "bound", b);
    } else {
        json_object_set_new(root, "bound", json_null());
    }
    json_object_set_new(root, "timing",
                        json_pack("{s:i,s:f}", "threads", c->threads, "wall_s", c->wall_s));
    json_t *res = json_array();
    for (size_t i = 0; i < c->n; i++) {
        gm_sim_config cfg = *base;
        cfg.policy = c->e[i].spec;
        if (c->e[i].allocator[0]) cfg.allocator = c->e[i].allocator;
        if (c->e[i].conf_given) cfg.alloc_conf = c->e[i].alloc_conf;
        json_array_append_new(res, gm_result_json(&cfg, c->e[i].r, "compare"));
    }
    json_object_set_new(root, "results", res);
    /* the winner: its policy spec; with --allocators, one policy runs under
     * several allocators, so the winner is its row with the result itself
     * (what gmreplay --winner and the HTML report look up) */
    if (c->winner < 0) {
        json_object_set_new(root, "winner", json_null());
    } else if (!c->by_allocator) {
        json_object_set_new(root, "winner", json_string(c->e[c->winner].spec));
    } else {
        json_t *w = rank_row(c, (size_t)c->winner, 0);
        json_object_set(w, "result", json_array_get(res, (size_t)c->winner));
        json_object_set_new(root, "winner", w);
    }
    /* the verdict a script reads (exit status 3 when "oom") */
    long v = gm_compare_verdict_entry(c);
    int fits = v >= 0 && !c->e[v].r->device.n_oom;
    json_object_set_new(root, "verdict", json_string(fits ? "fits" : "oom"));
    json_object_set_new(root, "best_deployable",
                        c->best_deployable >= 0 ? json_string(c->e[c->best_deployable].label)
                                                : json_null());
    json_object_set_new(root, "best_custom_allocator",
                        c->best_custom >= 0 ? json_string(c->e[c->best_custom].label)
                                            : json_null());
    return root;
}

json_t *gm_fit_json(const gm_sim_config *base, const gm_fit *f)
{
    char now[32];
    gm_utc_now(now, sizeof now);
    json_t *root = json_object();
    json_object_set_new(root, "schema", json_string(GM_FIT_SCHEMA));
    json_object_set_new(root, "gmsim_version", json_string(GM_VERSION));
    json_object_set_new(root, "command", json_string("fit"));
    json_object_set_new(root, "created_utc", json_string(now));
    json_object_set_new(root, "mode",
                        json_string(f->density        ? "density"
                                    : f->tenants_mode ? "tenants"
                                                      : "capacity"));
    char **specs = malloc((f->n ? f->n : 1) * sizeof *specs);
    for (size_t i = 0; specs && i < f->n; i++)
        specs[i] = f->e[i].spec;
    json_t *in = gm_compare_inputs_json(base, specs, specs ? f->n : 0, NULL);
    free(specs);
    if (f->tenants_mode) {
        json_object_set_new(in, "max_copies", json_integer(f->max_copies));
        json_object_set_new(in, "stagger_ns", json_integer((json_int_t)f->stagger_ns));
        json_object_set_new(in, "capacity_bytes", json_integer((json_int_t)f->capacity_bytes));
    } else {
        json_object_set_new(in, "resolution_bytes", json_integer((json_int_t)GM_FIT_STEP));
    }
    json_object_set_new(root, "inputs", in);
    if (f->density) /* whose OOMs decide whether a copy fits */
        json_object_set_new(root, "protected",
                            json_string(f->protected_class ? "guaranteed tenants" : "all tenants"));
    json_t *rows = json_array();
    for (size_t i = 0; i < f->n; i++) {
        const gm_fit_entry *e = &f->e[i];
        json_t *o = json_object();
        json_object_set_new(o, "policy", gm_json_text(e->spec));
        json_object_set_new(o, "realizable", json_boolean(e->realizable));
        json_object_set_new(o, "deployable", json_boolean(e->deployable));
        if (f->density) { /* gm_fit_density: one row per scheduling mode */
            static const char *const modes[] = {"one-per-gpu", "hard-cap", "requests",
                                                "device-scope"};
            json_object_set_new(o, "mode", json_string(modes[e->mode]));
            json_object_set_new(o, "label", json_string(e->label));
            json_object_set_new(o, "jobs", json_integer(e->jobs));
            json_object_set_new(o, "slowdown", json_real(e->slowdown));
            json_object_set_new(o, "utilization", json_real(e->utilization));
            json_object_set_new(o, "other_ooms", json_integer((json_int_t)e->other_ooms));
            json_object_set_new(o, "at_one_more_copy", gm_json_text(e->refusal));
        }
        if (f->tenants_mode) {
            json_object_set_new(o, "copies_fit", json_integer(e->copies_fit));
            json_object_set_new(o, "copies_tried", json_integer(e->copies_tried));
            json_object_set_new(o, "completed_at_first_failure",
                                json_integer(e->first_fail_completed));
        } else {
            json_object_set_new(o, "found", json_boolean(e->found));
            json_object_set_new(o, "capacity_bytes",
                                e->found ? json_integer((json_int_t)e->capacity) : json_null());
            json_object_set_new(o, "oom_capacity_bytes", json_integer((json_int_t)e->oom_capacity));
            json_object_set_new(o, "max_capacity_tried_bytes",
                                json_integer((json_int_t)e->max_capacity));
            json_object_set_new(o, "peak_live_bytes", json_integer((json_int_t)e->peak_live));
            json_object_set_new(o, "peak_reserved_bytes",
                                json_integer((json_int_t)e->peak_reserved));
        }
        json_object_set_new(o, "runs", json_integer(e->runs));
        json_array_append_new(rows, o);
    }
    json_object_set_new(root, "results", rows);
    json_object_set_new(root, "timing",
                        json_pack("{s:i,s:f}", "threads", f->threads, "wall_s", f->wall_s));
    return root;
}
