/* largest_json.c - `gmsim fit --largest` as JSON (results.h). */
#include "results.h"
#include "base/version.h"

static json_t *u64(uint64_t v)
{
    return json_integer((json_int_t)v);
}

json_t *gm_largest_json(const char *dim, const gm_scale_input *in, size_t n_in,
                        const gm_scale_stats *st, const gm_largest *r, size_t n)
{
    json_t *o = json_object();
    json_object_set_new(o, "schema", json_string(GM_LARGEST_SCHEMA));
    json_object_set_new(o, "gmsim_version", json_string(GM_VERSION));
    json_object_set_new(o, "dimension", json_string(dim));
    json_t *recs = json_array();
    for (size_t i = 0; i < n_in; i++) {
        json_t *e = json_object();
        json_object_set_new(e, "path", json_string(in[i].path));
        json_object_set_new(e, "value", json_integer((json_int_t)in[i].x));
        json_array_append_new(recs, e);
    }
    json_object_set_new(o, "recordings", recs);
    json_t *fit = json_object();
    json_object_set_new(fit, "allocations", u64(st->allocs));
    json_object_set_new(fit, "constant", u64(st->constant));
    json_object_set_new(fit, "linear", u64(st->linear));
    json_object_set_new(fit, "quadratic", u64(st->quadratic));
    json_object_set_new(o, "fit", fit);
    json_t *res = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_object();
        json_object_set_new(e, "policy", json_string(r[i].spec));
        json_object_set_new(e, "found", json_boolean(r[i].found));
        json_object_set_new(e, "largest", json_integer((json_int_t)r[i].largest));
        json_object_set_new(e, "first_fail", json_integer((json_int_t)r[i].first_fail));
        json_object_set_new(e, "capacity_bytes", u64(r[i].capacity_bytes));
        json_object_set_new(e, "usable_bytes", u64(r[i].usable_bytes));
        json_object_set_new(e, "peak_reserved_bytes", u64(r[i].peak_reserved));
        json_object_set_new(e, "peak_live_bytes", u64(r[i].peak_live));
        json_object_set_new(e, "simulations", json_integer(r[i].runs));
        json_array_append_new(res, e);
    }
    json_object_set_new(o, "results", res);
    return o;
}
