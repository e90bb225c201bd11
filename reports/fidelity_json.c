/* fidelity_json.c - `gmsim fidelity --json` (results.h). */
#include "results.h"

#include "traces/trace.h"

static json_t *calls_json(const gm_fid_call *c, size_t n, uint64_t only_event)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) {
        if (only_event != UINT64_MAX && c[i].event_index != only_event) continue;
        json_array_append_new(a, json_pack("{s:I, s:s, s:I, s:I, s:b}", "event_index",
                                           (json_int_t)c[i].event_index, "op", gm_op_name(c[i].op),
                                           "size", (json_int_t)c[i].size, "addr",
                                           (json_int_t)c[i].addr, "matched", c[i].matched));
    }
    return a;
}

static json_t *where_json(const gm_fid_where *w)
{
    if (!w->seg_addr)
        return json_pack("{s:I, s:n, s:n, s:n}", "addr", (json_int_t)w->addr, "segment_addr",
                         "segment_size", "offset");
    return json_pack("{s:I, s:I, s:I, s:I}", "addr", (json_int_t)w->addr, "segment_addr",
                     (json_int_t)w->seg_addr, "segment_size", (json_int_t)w->seg_size, "offset",
                     (json_int_t)(w->addr - w->seg_addr));
}

/* "block_placement": null when not checked (fresh addresses). */
static json_t *placement_json(const gm_fidelity *f)
{
    if (!f->placement_checked) return json_null();
    json_t *first = json_null();
    if (f->place_diverged)
        first = json_pack("{s:I, s:I, s:o, s:o}", "event_index", (json_int_t)f->place_event,
                          "requested_bytes", (json_int_t)f->place_size, "model",
                          where_json(&f->place_ours), "pytorch", where_json(&f->place_theirs));
    return json_pack("{s:b, s:I, s:I, s:I, s:o}", "exact", !f->place_diverged, "allocations",
                     (json_int_t)f->placed, "at_pytorch_address", (json_int_t)f->placed_same,
                     "elsewhere", (json_int_t)(f->placed - f->placed_same), "first_mismatch",
                     first);
}

static const char *cause_key(int cause)
{
    static const char *const keys[] = {"unknown", "empty_cache", "device_full", "model_full",
                                       "oom"};
    return cause >= 0 && cause <= GM_FID_CAUSE_OOM ? keys[cause] : "unknown";
}

json_t *gm_fidelity_json(const gm_fidelity *f)
{
    json_t *div = json_null();
    if (f->diverged)
        div = json_pack(
            "{s:I, s:s, s:I, s:s, s:s, s:o, s:o}", "event_index", (json_int_t)f->div_event,
            "event_op", f->div_event < f->n_events ? gm_op_name(f->div_op) : "end", "event_size",
            (json_int_t)f->div_size, "cause", cause_key(f->div_cause), "cause_text",
            gm_fid_cause_text(f->div_cause), "model", calls_json(f->ours, f->n_ours, f->div_event),
            "pytorch", calls_json(f->rec, f->n_rec, f->div_event));
    json_t *j = json_pack(
        "{s:b, s:I, s:I, s:s, s:o, s:s, s:{s:I, s:I, s:I, s:I}, s:I, s:I, s:I, s:I, s:I, s:o, "
        "s:{s:I, s:o}, s:I, s:{s:o, s:o}}",
        "exact", gm_fidelity_exact(f), "trace_events", (json_int_t)f->n_events, "capacity_bytes",
        (json_int_t)f->capacity_bytes, "capacity_source", f->capacity_source, "alloc_conf",
        gm_json_text(f->alloc_conf), "addresses", f->fresh_addresses ? "fresh" : "recorded",
        "initial_state", "segments", (json_int_t)f->init_segments, "expandable_segments",
        (json_int_t)f->init_expandable, "reserved_bytes", (json_int_t)f->init_reserved,
        "model_driver_calls", (json_int_t)f->model_init_calls, "pytorch_calls",
        (json_int_t)f->n_rec, "model_calls", (json_int_t)f->n_ours, "matched",
        (json_int_t)f->matched, "missing", (json_int_t)f->missing, "extra", (json_int_t)f->extra,
        "first_divergence", div, "reserved_error", "max_abs_bytes", (json_int_t)f->max_reserved_err,
        "at_event",
        f->max_err_event == UINT64_MAX ? json_null() : json_integer((json_int_t)f->max_err_event),
        "model_ooms", (json_int_t)f->model_ooms, "calls", "pytorch",
        calls_json(f->rec, f->n_rec, UINT64_MAX), "model",
        calls_json(f->ours, f->n_ours, UINT64_MAX));
    if (j) {
        json_object_set_new(j, "block_placement", placement_json(f));
        json_object_set_new(j, "ooms",
                            json_pack("{s:I, s:I, s:I}", "pytorch", (json_int_t)f->rec_ooms,
                                      "model_made_anyway", (json_int_t)f->oom_fits, "model",
                                      (json_int_t)f->model_ooms));
        json_object_set_new(j, "empty_cache_events", json_integer((json_int_t)f->empty_caches));
        json_object_set_new(
            j, "device_window",
            f->avail_min
                ? json_pack("{s:I, s:o}", "min_bytes", (json_int_t)f->avail_min, "max_bytes",
                            f->avail_max ? json_integer((json_int_t)f->avail_max) : json_null())
                : json_null());
    }
    return j;
}
