/* device_profile.c - see device_profile.h. */
#include "device_profile.h"
#include "base/clock.h"
#include "base/version.h"

#include <gsl/gsl_errno.h>
#include <gsl/gsl_fit.h>
#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int get_u64(json_t *obj, const char *key, uint64_t *out)
{
    json_t *v = json_object_get(obj, key);
    if (!json_is_integer(v) || json_integer_value(v) < 0) return 0;
    *out = (uint64_t)json_integer_value(v);
    return 1;
}

int gm_device_profile_load(const char *path, gm_device_profile *p, gm_err *err)
{
    json_error_t je;
    memset(p, 0, sizeof *p);
    json_t *root = json_load_file(path, 0, &je);
    if (!root)
        return gm_errf(err, je.line <= 0 ? GM_EIO : GM_EINVAL,
                       "--device-profile %s: %s (line %d); make one with 'gmreplay "
                       "--calibrate -o %s' on the GPU",
                       path, je.text, je.line, path);
    const char *schema = json_string_value(json_object_get(root, "schema"));
    json_t *dev = json_object_get(root, "device");
    json_t *lat = json_object_get(root, "latency");
    int rc = GM_OK;
    if (!schema || strcmp(schema, GM_DEVICE_PROFILE_SCHEMA) != 0) {
        rc = gm_errf(err, GM_EINVAL,
                     "--device-profile %s: not a device profile (schema '%s', expected '%s'); "
                     "make one with 'gmreplay --calibrate'",
                     path, schema ? schema : "(none)", GM_DEVICE_PROFILE_SCHEMA);
    } else if (!json_is_object(dev) || !get_u64(dev, "total_bytes", &p->total_bytes) ||
               p->total_bytes == 0 ||
               !get_u64(root, "context_overhead_bytes", &p->context_overhead_bytes) ||
               !json_is_object(lat) ||
               !get_u64(lat, "malloc_base_ns", &p->latency.malloc_base_ns) ||
               !get_u64(lat, "malloc_ns_per_gib", &p->latency.malloc_ns_per_gib) ||
               !get_u64(lat, "free_base_ns", &p->latency.free_base_ns) ||
               !get_u64(lat, "free_ns_per_gib", &p->latency.free_ns_per_gib)) {
        rc = gm_errf(err, GM_EINVAL,
                     "--device-profile %s: device.total_bytes, context_overhead_bytes or a "
                     "latency field is missing or not a non-negative integer; re-run "
                     "'gmreplay --calibrate'",
                     path);
    } else if (p->context_overhead_bytes >= p->total_bytes) {
        rc = gm_errf(err, GM_EINVAL,
                     "--device-profile %s: the context overhead is not smaller than the "
                     "device; re-run 'gmreplay --calibrate' on an idle GPU",
                     path);
    } else {
        const char *name = json_string_value(json_object_get(dev, "name"));
        snprintf(p->device_name, sizeof p->device_name, "%s", name ? name : "");
        get_u64(dev, "granularity_bytes", &p->granularity_bytes);
        uint64_t v = 0;
        if (get_u64(dev, "driver_version", &v)) p->driver_version = (int)v;
    }
    json_decref(root);
    return rc;
}

json_t *gm_device_profile_json(const gm_device_profile *p)
{
    char now[32];
    gm_utc_now(now, sizeof now);
    const gm_latency *l = &p->latency;
    return json_pack("{s:s,s:s,s:s,s:{s:s,s:I,s:I,s:i},s:I,s:{s:I,s:I,s:I,s:I}}", "schema",
                     GM_DEVICE_PROFILE_SCHEMA, "gmsim_version", GM_VERSION, "created_utc", now,
                     "device", "name", p->device_name, "total_bytes", (json_int_t)p->total_bytes,
                     "granularity_bytes", (json_int_t)p->granularity_bytes, "driver_version",
                     p->driver_version, "context_overhead_bytes",
                     (json_int_t)p->context_overhead_bytes, "latency", "malloc_base_ns",
                     (json_int_t)l->malloc_base_ns, "malloc_ns_per_gib",
                     (json_int_t)l->malloc_ns_per_gib, "free_base_ns", (json_int_t)l->free_base_ns,
                     "free_ns_per_gib", (json_int_t)l->free_ns_per_gib);
}

static uint64_t to_ns(double v)
{
    return v <= 0 || !isfinite(v) ? 0 : (uint64_t)llround(v);
}

int gm_latency_fit(const uint64_t *bytes, const double *ns, size_t n, uint64_t *base_ns,
                   uint64_t *ns_per_gib, double *r2, gm_err *err)
{
    if (n < 2)
        return gm_errf(err, GM_EINVAL, "latency fit: %zu point(s); need at least 2 sizes", n);
    double *x = malloc(n * sizeof *x);
    if (!x) return gm_errf(err, GM_ENOMEM, "out of memory");
    int distinct = 0;
    for (size_t i = 0; i < n; i++) {
        x[i] = (double)bytes[i] / (double)GM_GiB;
        distinct |= bytes[i] != bytes[0];
    }
    if (!distinct) {
        free(x);
        return gm_errf(err, GM_EINVAL,
                       "latency fit: every point has the same size; need at "
                       "least 2 different sizes");
    }
    gsl_error_handler_t *old = gsl_set_error_handler_off();
    double c0 = 0, c1 = 0, cov00, cov01, cov11, sumsq;
    gsl_fit_linear(x, 1, ns, 1, n, &c0, &c1, &cov00, &cov01, &cov11, &sumsq);
    if (c1 < 0) { /* flat: the best constant */
        c1 = 0;
        c0 = gsl_stats_mean(ns, 1, n);
    } else if (c0 < 0) { /* through the origin */
        c0 = 0;
        gsl_fit_mul(x, 1, ns, 1, n, &c1, &cov11, &sumsq);
        if (c1 < 0) c1 = 0;
    }
    gsl_set_error_handler(old);
    double mean = gsl_stats_mean(ns, 1, n), ss_res = 0, ss_tot = 0;
    for (size_t i = 0; i < n; i++) {
        double e = ns[i] - (c0 + c1 * x[i]), d = ns[i] - mean;
        ss_res += e * e;
        ss_tot += d * d;
    }
    free(x);
    *base_ns = to_ns(c0);
    *ns_per_gib = to_ns(c1);
    if (r2) *r2 = ss_tot > 0 ? 1.0 - ss_res / ss_tot : (ss_res > 0 ? 0.0 : 1.0);
    return GM_OK;
}
