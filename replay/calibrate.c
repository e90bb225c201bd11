/* calibrate.c - see calibrate.h. */
#include "calibrate.h"

#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <stdio.h>
#include <stdlib.h>

#include "sim/device_profile.h"

#define MAX_SIZES 32

typedef struct size_stats {
    uint64_t size;
    double malloc_med, malloc_p10, malloc_p90, free_med, free_p10, free_p90;
} size_stats;

static void quantiles(double *v, size_t n, double *p10, double *med, double *p90)
{
    gsl_sort(v, 1, n);
    *p10 = gsl_stats_quantile_from_sorted_data(v, 1, n, 0.10);
    *med = gsl_stats_median_from_sorted_data(v, 1, n);
    *p90 = gsl_stats_quantile_from_sorted_data(v, 1, n, 0.90);
}

/* reps x (cuMemAlloc, cuMemFree) of one size. GM_EOOM: the size does not fit. */
static int measure_size(gm_cuda *c, uint64_t size, int reps, size_stats *s, gm_err *err)
{
    double ma[256], fr[256];
    if (reps > 256) reps = 256;
    for (int i = 0; i < reps; i++) {
        uint64_t p, ns_a, ns_f;
        int rc = gm_cuda_alloc_timed(c, size, &p, &ns_a, err);
        if (rc) return rc;
        if ((rc = gm_cuda_free_timed(c, p, &ns_f, err))) return rc;
        ma[i] = (double)ns_a;
        fr[i] = (double)ns_f;
    }
    s->size = size;
    quantiles(ma, (size_t)reps, &s->malloc_p10, &s->malloc_med, &s->malloc_p90);
    quantiles(fr, (size_t)reps, &s->free_p10, &s->free_med, &s->free_p90);
    return GM_OK;
}

static json_t *fit_json(double r2, size_t n)
{
    return json_pack("{s:f,s:I}", "r2", r2, "points", (json_int_t)n);
}

/* cost = base + bytes * per_gib over the medians. */
static int fit(const size_stats *s, size_t n, int use_free, uint64_t *base, uint64_t *per_gib,
               double *r2, gm_err *err)
{
    uint64_t x[MAX_SIZES];
    double y[MAX_SIZES];
    for (size_t i = 0; i < n; i++) {
        x[i] = s[i].size;
        y[i] = use_free ? s[i].free_med : s[i].malloc_med;
    }
    return gm_latency_fit(x, y, n, base, per_gib, r2, err);
}

static json_t *vmm_json(gm_cuda *c, int reps, FILE *log)
{
    static const uint64_t sizes[] = {2 * GM_MiB, 20 * GM_MiB, 200 * GM_MiB};
    const gm_cuda_info *in = gm_cuda_info_get(c);
    if (!in->vmm_supported) return json_pack("{s:b}", "supported", 0);
    json_t *rows = json_array();
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        double mp[64], up[64], p10, med_m, med_u, p90;
        int n = reps < 64 ? reps : 64, ok = 1;
        for (int i = 0; i < n && ok; i++) {
            uint64_t m_ns, u_ns;
            gm_err e = {0};
            ok = gm_cuda_vmm_timed(c, sizes[k], &m_ns, &u_ns, &e) == GM_OK;
            mp[i] = (double)m_ns;
            up[i] = (double)u_ns;
        }
        if (!ok) break;
        quantiles(mp, (size_t)n, &p10, &med_m, &p90);
        quantiles(up, (size_t)n, &p10, &med_u, &p90);
        json_array_append_new(rows, json_pack("{s:I,s:f,s:f}", "size_bytes", (json_int_t)sizes[k],
                                              "map_ns_median", med_m, "unmap_ns_median", med_u));
        if (log)
            fprintf(log, "  vmm %8.0f MiB: map %9.1f us, unmap %9.1f us (median)\n",
                    (double)sizes[k] / GM_MiB, med_m / 1e3, med_u / 1e3);
    }
    return json_pack("{s:b,s:I,s:s,s:o}", "supported", 1, "granularity_bytes",
                     (json_int_t)in->granularity_bytes, "method",
                     "one cuMemCreate + cuMemMap per granule, one cuMemSetAccess; unmap: "
                     "cuMemUnmap + cuMemRelease per granule",
                     "samples", rows);
}

int gm_calibrate(gm_cuda *c, int reps, FILE *log, json_t **out, gm_err *err)
{
    const gm_cuda_info *in = gm_cuda_info_get(c);
    *out = NULL;
    if (reps < 3) reps = 3;
    gm_device_profile p = {0};
    snprintf(p.device_name, sizeof p.device_name, "%s", in->name);
    p.total_bytes = in->total_bytes;
    p.granularity_bytes = in->granularity_bytes;
    p.driver_version = in->driver_version;
    p.context_overhead_bytes = in->total_bytes - in->free_at_open;
    uint64_t free_b;
    int rc = gm_cuda_mem_info(c, &free_b, NULL, err);
    if (rc) return rc;
    size_stats s[MAX_SIZES], warm;
    if ((rc = measure_size(c, 2 * GM_MiB, 3, &warm, err))) /* first calls pay lazy set-up */
        return rc;
    size_t n = 0;
    uint64_t max = free_b / 4 < GM_CALIBRATE_MAX_SIZE ? free_b / 4 : GM_CALIBRATE_MAX_SIZE;
    for (uint64_t size = 2 * GM_MiB; size <= max && n < MAX_SIZES; size *= 2) {
        if (gm_cuda_stopped(c)) return gm_errf(err, GM_EIO, "calibration interrupted");
        rc = measure_size(c, size, reps, &s[n], err);
        if (rc == GM_EOOM) break;
        if (rc) return rc;
        if (log)
            fprintf(log, "  %8.0f MiB: cuMemAlloc %9.1f us, cuMemFree %9.1f us (median of %d)\n",
                    (double)size / GM_MiB, s[n].malloc_med / 1e3, s[n].free_med / 1e3, reps);
        n++;
    }
    double r2m = 0, r2f = 0;
    if ((rc = fit(s, n, 0, &p.latency.malloc_base_ns, &p.latency.malloc_ns_per_gib, &r2m, err)) ||
        (rc = fit(s, n, 1, &p.latency.free_base_ns, &p.latency.free_ns_per_gib, &r2f, err)))
        return rc;
    json_t *root = gm_device_profile_json(&p);
    json_t *samples = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(
            samples, json_pack("{s:I,s:{s:f,s:f,s:f},s:{s:f,s:f,s:f}}", "size_bytes",
                               (json_int_t)s[i].size, "malloc_ns", "p10", s[i].malloc_p10, "median",
                               s[i].malloc_med, "p90", s[i].malloc_p90, "free_ns", "p10",
                               s[i].free_p10, "median", s[i].free_med, "p90", s[i].free_p90));
    json_object_set_new(root, "samples", samples);
    json_object_set_new(root, "fit",
                        json_pack("{s:o,s:o,s:s}", "malloc", fit_json(r2m, n), "free",
                                  fit_json(r2f, n), "method",
                                  "GSL least squares over the per-size medians; negative "
                                  "coefficients clamped to 0"));
    json_object_set_new(root, "reps", json_integer(reps));
    json_object_set_new(root, "library", json_string(in->library));
    json_object_set_new(root, "vmm", vmm_json(c, reps, log));
    if (log)
        fprintf(log,
                "  fit: malloc %llu ns + %llu ns/GiB (r2 %.3f), free %llu ns + %llu ns/GiB "
                "(r2 %.3f); context overhead %llu bytes\n",
                (unsigned long long)p.latency.malloc_base_ns,
                (unsigned long long)p.latency.malloc_ns_per_gib, r2m,
                (unsigned long long)p.latency.free_base_ns,
                (unsigned long long)p.latency.free_ns_per_gib, r2f,
                (unsigned long long)p.context_overhead_bytes);
    *out = root;
    return GM_OK;
}
