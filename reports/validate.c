/* validate.c - see validate.h. */
#include "validate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "results.h"
#include "base/version.h"

/* ---------------- JSON access ---------------- */

/* Value at a dotted path ("device.driver.malloc_calls"), or NULL. */
static json_t *jpath(json_t *root, const char *path)
{
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    json_t *v = root;
    for (char *save = NULL, *k = strtok_r(buf, ".", &save); k && v; k = strtok_r(NULL, ".", &save))
        v = json_object_get(v, k);
    return v;
}

static double jnum(json_t *root, const char *path)
{
    json_t *v = jpath(root, path);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* Equal values; numbers by value (a JSON tool may write 0.0 as 0). */
static int jeq(json_t *a, json_t *b)
{
    if (json_is_number(a) && json_is_number(b)) return json_number_value(a) == json_number_value(b);
    return json_equal(a, b);
}

static const char *jstr(json_t *root, const char *path)
{
    json_t *v = jpath(root, path);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* ---------------- rows ---------------- */

static gm_vrow *add_row(gm_validation *v, const char *metric)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 32;
        gm_vrow *r = realloc(v->rows, cap * sizeof *r);
        if (!r) return NULL;
        v->rows = r;
        v->cap = cap;
    }
    gm_vrow *r = &v->rows[v->n++];
    memset(r, 0, sizeof *r);
    snprintf(r->metric, sizeof r->metric, "%s", metric);
    r->pred = r->meas = r->rel_err = NAN;
    return r;
}

static void set_check(gm_validation *v, gm_vrow *r, const char *tol, int pass)
{
    r->check = 1;
    r->pass = pass;
    snprintf(r->tolerance, sizeof r->tolerance, "%s", tol);
    v->n_checks++;
    v->n_failed += !pass;
}

static double rel_err(double pred, double meas)
{
    if (isnan(pred) || isnan(meas)) return NAN;
    if (pred == 0) return meas == 0 ? 0.0 : NAN;
    return (meas - pred) / pred;
}

enum fmt { F_BYTES, F_NS, F_RATIO, F_COUNT };

static void fmt(char *buf, size_t n, double v, enum fmt f)
{
    char tmp[32];
    if (isnan(v))
        snprintf(buf, n, "n/a");
    else if (f == F_BYTES)
        snprintf(buf, n, "%s", gm_fmt_bytes((uint64_t)v, tmp, sizeof tmp));
    else if (f == F_NS)
        snprintf(buf, n, "%s", gm_fmt_ns((uint64_t)v, tmp, sizeof tmp));
    else if (f == F_RATIO)
        snprintf(buf, n, "%.2f %%", v * 100.0);
    else
        snprintf(buf, n, "%.0f", v);
}

/* A numeric row; tol < 0: reported only. */
static gm_vrow *num_row(gm_validation *v, const char *metric, double pred, double meas, enum fmt f,
                        double tol)
{
    gm_vrow *r = add_row(v, metric);
    if (!r) return NULL;
    r->pred = pred;
    r->meas = meas;
    r->rel_err = rel_err(pred, meas);
    fmt(r->predicted, sizeof r->predicted, pred, f);
    fmt(r->measured, sizeof r->measured, meas, f);
    if (tol >= 0) {
        char t[16];
        snprintf(t, sizeof t, "%g %%", tol * 100);
        set_check(v, r, t, !isnan(r->rel_err) && fabs(r->rel_err) <= tol + 1e-12);
    }
    return r;
}

/* ---------------- checks ---------------- */

static int same_traces(json_t *p, json_t *m, gm_err *err)
{
    json_t *tp = json_object_get(p, "tenants"), *tm = json_object_get(m, "tenants");
    if (json_array_size(tp) != json_array_size(tm))
        return gm_errf(err, GM_EINVAL,
                       "the prediction has %zu trace(s), the measurement %zu: they are not "
                       "about the same run; replay with the same traces",
                       json_array_size(tp), json_array_size(tm));
    for (size_t i = 0; i < json_array_size(tp); i++) {
        const char *hp = jstr(json_array_get(tp, i), "trace_hash");
        const char *hm = jstr(json_array_get(tm, i), "trace_hash");
        if (!hp || !hm || strcmp(hp, hm) != 0)
            return gm_errf(err, GM_EINVAL,
                           "trace %zu differs: %s (hash %s) was predicted, %s (hash %s) "
                           "measured; give the same trace files in the same order",
                           i, jstr(json_array_get(tp, i), "trace"), hp ? hp : "?",
                           jstr(json_array_get(tm, i), "trace"), hm ? hm : "?");
    }
    return GM_OK;
}

static void note_add(char *note, size_t n, const char *what)
{
    size_t len = strlen(note);
    snprintf(note + len, n - len, "%s%s", len ? "; " : "", what);
}

/* Inputs that must be identical for the two runs to be the same experiment. */
static void check_inputs(gm_validation *v, json_t *p, json_t *m)
{
    static const char *const keys[] = {
        "inputs.capacity_bytes",  "inputs.overhead_bytes", "inputs.allocator", "inputs.policy",
        "inputs.memory_fraction", "inputs.on_oom",         "inputs.scope",
    };
    gm_vrow *r = add_row(v, "inputs");
    if (!r) return;
    snprintf(r->predicted, sizeof r->predicted, "%s", "(as run)");
    snprintf(r->measured, sizeof r->measured, "%s", "(as run)");
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        json_t *a = jpath(p, keys[i]), *b = jpath(m, keys[i]);
        if (!jeq(a, b)) {
            char *sa = a ? json_dumps(a, JSON_ENCODE_ANY) : NULL;
            char *sb = b ? json_dumps(b, JSON_ENCODE_ANY) : NULL;
            char what[160];
            snprintf(what, sizeof what, "%s %s vs %s", keys[i] + 7, sa ? sa : "missing",
                     sb ? sb : "missing");
            note_add(r->note, sizeof r->note, what);
            free(sa);
            free(sb);
        }
    }
    static const char *const tkeys[] = {"alloc_conf", "offset_ns", "repeat", "quota_bytes"};
    json_t *tp = json_object_get(p, "tenants"), *tm = json_object_get(m, "tenants");
    for (size_t i = 0; i < json_array_size(tp); i++)
        for (size_t k = 0; k < sizeof tkeys / sizeof tkeys[0]; k++)
            if (!jeq(json_object_get(json_array_get(tp, i), tkeys[k]),
                     json_object_get(json_array_get(tm, i), tkeys[k]))) {
                char what[96];
                snprintf(what, sizeof what, "tenant %zu %s differs", i, tkeys[k]);
                note_add(r->note, sizeof r->note, what);
            }
    set_check(v, r, "exact", r->note[0] == 0);
}

static void oom_text(char *buf, size_t n, json_t *res)
{
    json_t *first = json_array_get(jpath(res, "device.ooms"), 0);
    double count = jnum(res, "device.oom_count");
    if (isnan(count))
        snprintf(buf, n, "n/a");
    else if (!first)
        snprintf(buf, n, "%.0f", count);
    else if (jnum(first, "tenant") == 0)
        snprintf(buf, n, "%.0f (event %.0f)", count, jnum(first, "event_index"));
    else
        snprintf(buf, n, "%.0f (tenant %.0f event %.0f)", count, jnum(first, "tenant"),
                 jnum(first, "event_index"));
}

static void check_ooms(gm_validation *v, json_t *p, json_t *m)
{
    gm_vrow *r = add_row(v, "OOM events");
    if (!r) return;
    r->pred = jnum(p, "device.oom_count");
    r->meas = jnum(m, "device.oom_count");
    oom_text(r->predicted, sizeof r->predicted, p);
    oom_text(r->measured, sizeof r->measured, m);
    json_t *a = jpath(p, "device.ooms"), *b = jpath(m, "device.ooms");
    int same = !isnan(r->pred) && r->pred == r->meas && json_array_size(a) == json_array_size(b);
    static const char *const keys[] = {"tenant", "pass", "event_index", "size_bytes"};
    for (size_t i = 0; same && i < json_array_size(a); i++)
        for (size_t k = 0; k < 4; k++)
            if (!jeq(json_object_get(json_array_get(a, i), keys[k]),
                     json_object_get(json_array_get(b, i), keys[k]))) {
                snprintf(r->note, sizeof r->note,
                         "OOM %zu: predicted tenant %.0f event %.0f (%.0f B), measured tenant "
                         "%.0f event %.0f (%.0f B)",
                         i, jnum(json_array_get(a, i), "tenant"),
                         jnum(json_array_get(a, i), "event_index"),
                         jnum(json_array_get(a, i), "size_bytes"),
                         jnum(json_array_get(b, i), "tenant"),
                         jnum(json_array_get(b, i), "event_index"),
                         jnum(json_array_get(b, i), "size_bytes"));
                same = 0;
                break;
            }
    double drv = jnum(m, "measured.oom.driver_oom_returns");
    double cap = jnum(m, "measured.oom.cap_refusals");
    double room = jnum(m, "measured.oom.cap_refusals_driver_had_room");
    if (!isnan(drv)) {
        char what[128];
        snprintf(what, sizeof what, "driver refused %.0f call(s), capacity guard %.0f", drv,
                 isnan(cap) ? 0.0 : cap);
        note_add(r->note, sizeof r->note, what);
    }
    /* the guard refuses at the model's limit without asking the driver; if the
     * driver had room then, the real card would not have run out there */
    if (room > 0) {
        char what[160];
        snprintf(what, sizeof what,
                 "the driver had room for %.0f of the refused allocations "
                 "(the ballast left more free than the model)",
                 room);
        note_add(r->note, sizeof r->note, what);
        same = 0;
    }
    set_check(v, r, "exact", same);
}

static void check_replay(gm_validation *v, json_t *m)
{
    json_t *meas = json_object_get(m, "measured");
    if (!meas) return;
    gm_vrow *r = add_row(v, "replay ran to the end");
    if (!r) return;
    snprintf(r->predicted, sizeof r->predicted, "-");
    double sig = jnum(meas, "interrupted_by_signal");
    const char *error = jstr(meas, "error");
    int freed = json_is_true(json_object_get(meas, "freed_all"));
    if (sig > 0)
        snprintf(r->note, sizeof r->note, "interrupted by signal %.0f", sig);
    else if (error)
        snprintf(r->note, sizeof r->note, "driver error: %s", error);
    else if (!freed)
        snprintf(r->note, sizeof r->note, "%.0f bytes were not given back",
                 jnum(meas, "leaked_bytes"));
    snprintf(r->measured, sizeof r->measured, "%s", r->note[0] ? "no" : "yes");
    set_check(v, r, "exact", r->note[0] == 0);
}

static void reported(gm_validation *v, json_t *p, json_t *m)
{
    static const struct {
        const char *metric, *path;
        enum fmt f;
    } rows[] = {
        {"peak live (Q)", "device.peak_live_bytes", F_BYTES},
        {"peak allocated", "device.peak_allocated_bytes", F_BYTES},
        {"fragmentation", "device.fragmentation", F_RATIO},
        {"fragmentation, time-weighted", "device.fragmentation_time_weighted", F_RATIO},
        {"utilization", "device.utilization", F_RATIO},
        {"external fragmentation, mean", "device.external_fragmentation_mean", F_RATIO},
        {"device utilization", "device.device_utilization", F_RATIO},
        {"peak device used (accounted)", "device.peak_device_used_bytes", F_BYTES},
        {"driver malloc calls", "device.driver.malloc_calls", F_COUNT},
        {"driver free calls", "device.driver.free_calls", F_COUNT},
        {"driver malloc time", "device.driver.malloc_ns", F_NS},
        {"driver free time", "device.driver.free_ns", F_NS},
        {"driver time", "device.driver.total_ns", F_NS},
        {"tenants completed", "device.tenants_completed", F_COUNT},
        {"events", "events", F_COUNT},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        num_row(v, rows[i].metric, jnum(p, rows[i].path), jnum(m, rows[i].path), rows[i].f, -1);
    double used = jnum(m, "measured.device_used.peak_bytes");
    if (!isnan(used)) {
        gm_vrow *r = num_row(v, "peak device used (cuMemGetInfo)",
                             jnum(p, "device.peak_device_used_bytes"), used, F_BYTES, -1);
        if (r)
            snprintf(r->note, sizeof r->note,
                     "emulated capacity - free, sampled after each "
                     "driver call");
    }
    json_t *tp = json_object_get(p, "tenants"), *tm = json_object_get(m, "tenants");
    if (json_array_size(tp) > 1)
        for (size_t i = 0; i < json_array_size(tp); i++) {
            char name[64];
            snprintf(name, sizeof name, "tenant %zu peak reserved", i);
            num_row(v, name, jnum(json_array_get(tp, i), "metrics.peak_reserved_bytes"),
                    jnum(json_array_get(tm, i), "metrics.peak_reserved_bytes"), F_BYTES, -1);
        }
}

static int check_schema(json_t *root, const char *which, gm_err *err)
{
    const char *s = jstr(root, "schema");
    if (!s || strcmp(s, GM_RESULT_SCHEMA) != 0)
        return gm_errf(err, GM_EINVAL,
                       "%s is not a gmsim result (schema '%s', expected '%s'); write it with "
                       "'gmsim run --json' or 'gmreplay -o'",
                       which, s ? s : "(none)", GM_RESULT_SCHEMA);
    if (!json_is_object(json_object_get(root, "device")) ||
        !json_is_array(json_object_get(root, "tenants")))
        return gm_errf(err, GM_EINVAL, "%s: 'device' or 'tenants' is missing", which);
    return GM_OK;
}

int gm_validate(json_t *p, json_t *m, gm_validation *v, gm_err *err)
{
    memset(v, 0, sizeof *v);
    int rc = check_schema(p, "the prediction", err);
    if (!rc) rc = check_schema(m, "the measurement", err);
    if (!rc) rc = same_traces(p, m, err);
    if (rc) return rc;
    const char *b = jstr(m, "backend");
    snprintf(v->backend, sizeof v->backend, "%s", b ? b : "?");
    check_inputs(v, p, m);
    check_ooms(v, p, m);
    num_row(v, "peak reserved", jnum(p, "device.peak_reserved_bytes"),
            jnum(m, "device.peak_reserved_bytes"), F_BYTES, GM_VALIDATE_PEAK_RESERVED_TOL);
    check_replay(v, m);
    reported(v, p, m);
    if (v->n == 0 || !v->rows) return gm_errf(err, GM_ENOMEM, "out of memory");
    return GM_OK;
}

int gm_validate_files(const char *pp, const char *mp, gm_validation *v, gm_err *err)
{
    json_error_t je;
    memset(v, 0, sizeof *v);
    json_t *p = json_load_file(pp, 0, &je);
    if (!p)
        return gm_errf(err, je.line <= 0 ? GM_EIO : GM_EINVAL, "%s: %s (line %d)", pp, je.text,
                       je.line);
    json_t *m = json_load_file(mp, 0, &je);
    if (!m) {
        json_decref(p);
        return gm_errf(err, je.line <= 0 ? GM_EIO : GM_EINVAL, "%s: %s (line %d)", mp, je.text,
                       je.line);
    }
    int rc = gm_validate(p, m, v, err);
    if (rc && rc != GM_ENOMEM) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        gm_errf(err, rc, "%s vs %s: %s", pp, mp, msg);
    }
    json_decref(p);
    json_decref(m);
    return rc;
}

void gm_validation_free(gm_validation *v)
{
    free(v->rows);
    memset(v, 0, sizeof *v);
}

static json_t *num_or_null(double x)
{
    return isnan(x) || isinf(x) ? json_null() : json_real(x);
}

json_t *gm_validation_json(const gm_validation *v)
{
    json_t *rows = json_array();
    for (size_t i = 0; i < v->n; i++) {
        const gm_vrow *r = &v->rows[i];
        json_t *o = json_pack("{s:s,s:s,s:s,s:o,s:o,s:o,s:s,s:b,s:s}", "metric", r->metric,
                              "predicted_text", r->predicted, "measured_text", r->measured,
                              "predicted", num_or_null(r->pred), "measured", num_or_null(r->meas),
                              "relative_error", num_or_null(r->rel_err), "tolerance", r->tolerance,
                              "check", r->check, "note", r->note);
        if (r->check) json_object_set_new(o, "pass", json_boolean(r->pass));
        json_array_append_new(rows, o);
    }
    return json_pack("{s:s,s:s,s:b,s:i,s:i,s:s,s:o}", "schema", GM_VALIDATE_SCHEMA, "gmsim_version",
                     GM_VERSION, "pass", v->n_failed == 0, "checks", v->n_checks, "failed",
                     v->n_failed, "backend", v->backend, "rows", rows);
}

const gm_vrow *gm_validation_row(const gm_validation *v, const char *metric)
{
    for (size_t i = 0; i < v->n; i++)
        if (!strcmp(v->rows[i].metric, metric)) return &v->rows[i];
    return NULL;
}

void gm_vrow_rel_text(char *buf, size_t n, const gm_vrow *r)
{
    if (isnan(r->rel_err))
        snprintf(buf, n, "%s", isnan(r->pred) ? "" : "n/a");
    else
        snprintf(buf, n, "%+.2f %%", r->rel_err * 100.0);
}

const char *gm_vrow_verdict(const gm_vrow *r)
{
    return !r->check ? "" : r->pass ? "pass" : "FAIL";
}
