/* sweep_out.c - see sweep_out.h. */
#include "sweep_out.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hdf5.h>
#include <jansson.h>

#include "results.h"
#include "base/version.h"

/* ---------------- JSON ---------------- */

static json_t *real_or_null(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

static json_t *u64(uint64_t v)
{
    return json_integer((json_int_t)v);
}

static json_t *case_json(const gm_sweep_plan *p, const gm_sweep_row *r)
{
    gm_sweep_case c = gm_sweep_case_at(p, r->index);
    const gm_sweep_mix *m = &p->mixes[c.mix];
    const gm_alloc_choice *al = &p->allocs[c.alloc];
    char key[GM_SWEEP_KEY];
    gm_sweep_case_key(p, r->index, key, sizeof key);
    json_t *o = json_object();
    json_object_set_new(o, "index", u64(r->index));
    json_object_set_new(o, "key", json_string(key));
    json_object_set_new(o, "mix", json_string(m->name));
    json_t *tr = json_array();
    for (size_t k = 0; k < m->n; k++)
        json_array_append_new(tr, json_string(m->t[k].trace));
    json_object_set_new(o, "traces", tr);
    json_object_set_new(o, "device", json_string(p->devices[c.device].label));
    json_object_set_new(o, "allocator", json_string(al->name));
    json_object_set_new(o, "alloc_conf", al->conf_given ? json_string(al->conf) : json_null());
    json_object_set_new(o, "policy", json_string(p->policies[c.policy]));
    json_object_set_new(o, "realizable", json_boolean(r->realizable));
    json_object_set_new(o, "status", json_string(r->status == GM_OK ? "ok" : "failed"));
    if (r->status != GM_OK) {
        json_object_set_new(o, "error", json_string(r->error));
        return o;
    }
    json_object_set_new(o, "allocator_used", json_string(r->allocator));
    json_object_set_new(o, "trace_hash", json_string(r->trace_hash));
    json_object_set_new(o, "rank", json_integer(r->rank));
    json_object_set_new(o, "capacity_bytes", u64(r->capacity_bytes));
    json_object_set_new(o, "tenants", u64(r->n_tenants));
    json_object_set_new(o, "tenants_completed", u64(r->tenants_completed));
    json_object_set_new(o, "oom_count", u64(r->oom_count));
    json_object_set_new(o, "peak_live_bytes", u64(r->peak_live));
    json_object_set_new(o, "peak_allocated_bytes", u64(r->peak_allocated));
    json_object_set_new(o, "peak_reserved_bytes", u64(r->peak_reserved));
    json_object_set_new(o, "peak_device_used_bytes", u64(r->peak_device_used));
    json_object_set_new(o, "fragmentation", real_or_null(r->fragmentation));
    json_object_set_new(o, "fragmentation_time_weighted", real_or_null(r->frag_time_weighted));
    json_object_set_new(o, "utilization", real_or_null(r->utilization));
    json_object_set_new(o, "external_fragmentation_mean", real_or_null(r->ext_frag_mean));
    json_object_set_new(o, "driver_allocs", u64(r->driver_allocs));
    json_object_set_new(o, "driver_frees", u64(r->driver_frees));
    json_object_set_new(o, "driver_ns", u64(r->driver_ns));
    json_object_set_new(o, "events", u64(r->events));
    return o;
}

int gm_sweep_write_json(const gm_sweep_plan *p, const gm_sweep_row *rows, const char *path,
                        gm_err *err)
{
    json_t *root = json_object();
    json_object_set_new(root, "schema", json_string(GM_SWEEP_SCHEMA));
    json_object_set_new(root, "gmsim_version", json_string(GM_VERSION));
    json_object_set(root, "spec", p->spec);
    size_t failed = 0;
    json_t *cases = json_array();
    for (size_t i = 0; i < p->n_cases; i++) {
        json_array_append_new(cases, case_json(p, &rows[i]));
        failed += rows[i].status != GM_OK;
    }
    json_object_set_new(root, "summary",
                        json_pack("{s:I,s:I,s:I}", "cases", (json_int_t)p->n_cases, "ok",
                                  (json_int_t)(p->n_cases - failed), "failed", (json_int_t)failed));
    json_object_set_new(root, "cases", cases);
    int rc = gm_json_write(root, path, err);
    json_decref(root);
    return rc;
}

static uint64_t get_u64(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_integer(v) && json_integer_value(v) >= 0 ? (uint64_t)json_integer_value(v) : 0;
}

static double get_real(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

int gm_sweep_read_done(const gm_sweep_plan *p, const char *path, gm_sweep_row *rows,
                       unsigned char *done, size_t *n_done, gm_err *err)
{
    *n_done = 0;
    if (access(path, F_OK) != 0) return GM_OK; /* nothing ran yet */
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root)
        return gm_errf(err, GM_EINVAL, "--resume: %s: line %d: %s; remove it to start afresh", path,
                       je.line, je.text);
    const char *schema = json_string_value(json_object_get(root, "schema"));
    if (!schema || strcmp(schema, GM_SWEEP_SCHEMA)) {
        json_decref(root);
        return gm_errf(err, GM_EINVAL,
                       "--resume: %s is not a 'gmsim sweep' result (schema %s); give the -o "
                       "of an earlier sweep",
                       path, schema ? schema : "(none)");
    }
    /* keys of the plan, to find each saved case */
    char(*keys)[GM_SWEEP_KEY] = malloc((p->n_cases ? p->n_cases : 1) * sizeof *keys);
    if (!keys) {
        json_decref(root);
        return gm_errf(err, GM_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < p->n_cases; i++)
        gm_sweep_case_key(p, i, keys[i], sizeof keys[i]);
    json_t *cases = json_object_get(root, "cases"), *c;
    size_t k;
    json_array_foreach(cases, k, c)
    {
        const char *key = json_string_value(json_object_get(c, "key"));
        const char *status = json_string_value(json_object_get(c, "status"));
        if (!key || !status || strcmp(status, "ok")) continue;
        /* case i sits at index i when the spec is the same: look there first */
        size_t i = (size_t)get_u64(c, "index");
        if (i >= p->n_cases || strcmp(keys[i], key))
            for (i = 0; i < p->n_cases && strcmp(keys[i], key); i++)
                ;
        if (i == p->n_cases || done[i]) continue;
        gm_sweep_row *r = &rows[i];
        memset(r, 0, sizeof *r);
        r->index = (uint32_t)i;
        r->status = GM_OK;
        snprintf(r->allocator, sizeof r->allocator, "%s",
                 json_string_value(json_object_get(c, "allocator_used"))
                     ? json_string_value(json_object_get(c, "allocator_used"))
                     : "");
        snprintf(r->trace_hash, sizeof r->trace_hash, "%s",
                 json_string_value(json_object_get(c, "trace_hash"))
                     ? json_string_value(json_object_get(c, "trace_hash"))
                     : "");
        r->realizable = json_is_true(json_object_get(c, "realizable"));
        r->capacity_bytes = get_u64(c, "capacity_bytes");
        r->n_tenants = (uint32_t)get_u64(c, "tenants");
        r->tenants_completed = (uint32_t)get_u64(c, "tenants_completed");
        r->oom_count = get_u64(c, "oom_count");
        r->peak_live = get_u64(c, "peak_live_bytes");
        r->peak_allocated = get_u64(c, "peak_allocated_bytes");
        r->peak_reserved = get_u64(c, "peak_reserved_bytes");
        r->peak_device_used = get_u64(c, "peak_device_used_bytes");
        r->fragmentation = get_real(c, "fragmentation");
        r->frag_time_weighted = get_real(c, "fragmentation_time_weighted");
        r->utilization = get_real(c, "utilization");
        r->ext_frag_mean = get_real(c, "external_fragmentation_mean");
        r->driver_allocs = get_u64(c, "driver_allocs");
        r->driver_frees = get_u64(c, "driver_frees");
        r->driver_ns = get_u64(c, "driver_ns");
        r->events = get_u64(c, "events");
        done[i] = 1;
        (*n_done)++;
    }
    free(keys);
    json_decref(root);
    return GM_OK;
}

/* ---------------- HDF5 ---------------- */

/* One row of /cases, as it is in memory; the file type is packed. */
typedef struct h5_case {
    uint32_t index;
    char key[GM_SWEEP_KEY];
    char mix[256];
    uint32_t tenants;
    char device[64];
    uint64_t capacity_bytes;
    char allocator[32];
    char alloc_conf[512];
    char allocator_used[32];
    char policy[320];
    uint8_t realizable;
    char status[8];
    char error[512];
    int32_t rank;
    uint64_t oom_count;
    uint32_t tenants_completed;
    uint64_t peak_live_bytes, peak_allocated_bytes, peak_reserved_bytes, peak_device_used_bytes;
    double fragmentation, fragmentation_time_weighted, utilization, external_fragmentation_mean;
    uint64_t driver_allocs, driver_frees, driver_ns, events;
    char trace_hash[17];
} h5_case;

static hid_t str_type(size_t n)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, n);
    H5Tset_strpad(t, H5T_STR_NULLTERM);
    return t;
}

static hid_t case_type(void)
{
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(h5_case));
    hid_t s[9] = {str_type(GM_SWEEP_KEY), str_type(256), str_type(64), str_type(32), str_type(512),
                  str_type(32),           str_type(320), str_type(8),  str_type(512)};
    hid_t hash = str_type(17);
#define F(name, type) H5Tinsert(t, #name, HOFFSET(h5_case, name), type)
    F(index, H5T_NATIVE_UINT32);
    F(key, s[0]);
    F(mix, s[1]);
    F(tenants, H5T_NATIVE_UINT32);
    F(device, s[2]);
    F(capacity_bytes, H5T_NATIVE_UINT64);
    F(allocator, s[3]);
    F(alloc_conf, s[4]);
    F(allocator_used, s[5]);
    F(policy, s[6]);
    F(realizable, H5T_NATIVE_UINT8);
    F(status, s[7]);
    F(error, s[8]);
    F(rank, H5T_NATIVE_INT32);
    F(oom_count, H5T_NATIVE_UINT64);
    F(tenants_completed, H5T_NATIVE_UINT32);
    F(peak_live_bytes, H5T_NATIVE_UINT64);
    F(peak_allocated_bytes, H5T_NATIVE_UINT64);
    F(peak_reserved_bytes, H5T_NATIVE_UINT64);
    F(peak_device_used_bytes, H5T_NATIVE_UINT64);
    F(fragmentation, H5T_NATIVE_DOUBLE);
    F(fragmentation_time_weighted, H5T_NATIVE_DOUBLE);
    F(utilization, H5T_NATIVE_DOUBLE);
    F(external_fragmentation_mean, H5T_NATIVE_DOUBLE);
    F(driver_allocs, H5T_NATIVE_UINT64);
    F(driver_frees, H5T_NATIVE_UINT64);
    F(driver_ns, H5T_NATIVE_UINT64);
    F(events, H5T_NATIVE_UINT64);
    F(trace_hash, hash);
#undef F
    for (int i = 0; i < 9; i++)
        H5Tclose(s[i]);
    H5Tclose(hash);
    return t;
}

static void fill(const gm_sweep_plan *p, const gm_sweep_row *r, h5_case *h)
{
    gm_sweep_case c = gm_sweep_case_at(p, r->index);
    const gm_alloc_choice *al = &p->allocs[c.alloc];
    h->index = r->index;
    gm_sweep_case_key(p, r->index, h->key, sizeof h->key);
    snprintf(h->mix, sizeof h->mix, "%s", p->mixes[c.mix].name);
    h->tenants = (uint32_t)p->mixes[c.mix].n;
    snprintf(h->device, sizeof h->device, "%s", p->devices[c.device].label);
    snprintf(h->allocator, sizeof h->allocator, "%s", al->name);
    snprintf(h->alloc_conf, sizeof h->alloc_conf, "%s", al->conf_given ? al->conf : "");
    snprintf(h->policy, sizeof h->policy, "%s", p->policies[c.policy]);
    h->realizable = r->realizable;
    snprintf(h->status, sizeof h->status, "%s", r->status == GM_OK ? "ok" : "failed");
    if (r->status != GM_OK) {
        snprintf(h->error, sizeof h->error, "%s", r->error);
        h->fragmentation = h->fragmentation_time_weighted = h->utilization =
            h->external_fragmentation_mean = NAN;
        return;
    }
    snprintf(h->allocator_used, sizeof h->allocator_used, "%s", r->allocator);
    h->capacity_bytes = r->capacity_bytes;
    h->rank = r->rank;
    h->oom_count = r->oom_count;
    h->tenants_completed = r->tenants_completed;
    h->peak_live_bytes = r->peak_live;
    h->peak_allocated_bytes = r->peak_allocated;
    h->peak_reserved_bytes = r->peak_reserved;
    h->peak_device_used_bytes = r->peak_device_used;
    h->fragmentation = r->fragmentation;
    h->fragmentation_time_weighted = r->frag_time_weighted;
    h->utilization = r->utilization;
    h->external_fragmentation_mean = r->ext_frag_mean;
    h->driver_allocs = r->driver_allocs;
    h->driver_frees = r->driver_frees;
    h->driver_ns = r->driver_ns;
    h->events = r->events;
    snprintf(h->trace_hash, sizeof h->trace_hash, "%s", r->trace_hash);
}

static int put_attr(hid_t obj, const char *name, const char *value)
{
    hid_t t = str_type(strlen(value) + 1), sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(obj, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
    int ok = a >= 0 && H5Awrite(a, t, value) >= 0;
    if (a >= 0) H5Aclose(a);
    H5Sclose(sp);
    H5Tclose(t);
    return ok;
}

int gm_sweep_write_h5(const gm_sweep_plan *p, const gm_sweep_row *rows, const char *path,
                      gm_err *err)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    size_t n = p->n_cases;
    h5_case *v = calloc(n ? n : 1, sizeof *v); /* zeroed: padding and string tails */
    if (!v) return gm_errf(err, GM_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        fill(p, &rows[i], &v[i]);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    /* no modification times in the object headers: the same rows make the
     * same bytes */
    hid_t fcpl = H5Pcreate(H5P_FILE_CREATE), fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_obj_track_times(fcpl, 0);
#if H5_VERSION_GE(1, 10, 7)
    H5Pset_file_locking(fapl, 0, 1);
#endif
    hid_t f = H5Fcreate(tmp, H5F_ACC_TRUNC, fcpl, fapl);
    H5Pclose(fcpl);
    H5Pclose(fapl);
    int ok = f >= 0;
    hid_t t = case_type(), ft = ok ? H5Tcopy(t) : -1;
    if (ft >= 0) H5Tpack(ft);
    hsize_t dims[1] = {n};
    hid_t sp = H5Screate_simple(1, dims, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_obj_track_times(dcpl, 0);
    hid_t d = ok ? H5Dcreate2(f, "cases", ft, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT) : -1;
    ok = d >= 0 && (n == 0 || H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0);
    ok = ok && put_attr(d, "schema", GM_SWEEP_SCHEMA) && put_attr(d, "gmsim_version", GM_VERSION);
    if (d >= 0) H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(sp);
    if (ft >= 0) H5Tclose(ft);
    H5Tclose(t);
    if (f >= 0 && H5Fclose(f) < 0) ok = 0;
    free(v);
    if (!ok || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return gm_errf(err, GM_EIO, "%s: cannot write the sweep's HDF5 table (%s)", path,
                       ok ? strerror(e) : "HDF5 error; is the directory writable?");
    }
    return GM_OK;
}
