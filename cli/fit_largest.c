/* fit_largest.c - see fit_largest.h. */
#include "fit_largest.h"
#include "cli.h"
#include "base/units.h"
#include "reports/results.h"
#include "study/largest.h"
#include "study/policy_list.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "23.1 GiB": b in the unit and precision that suit the usable size u. */
static void fmt(uint64_t b, uint64_t u, char *buf, size_t len)
{
    if (u >= 10 * GM_GiB)
        snprintf(buf, len, "%.1f GiB", (double)b / (double)GM_GiB);
    else if (u >= GM_GiB)
        snprintf(buf, len, "%.2f GiB", (double)b / (double)GM_GiB);
    else
        snprintf(buf, len, "%.1f MiB", (double)b / (double)GM_MiB);
}

static void print(const char *dim, const gm_largest *r, int many)
{
    char pr[32], us[32];
    fmt(r->peak_reserved, r->usable_bytes, pr, sizeof pr);
    fmt(r->usable_bytes, r->usable_bytes, us, sizeof us);
    const char *pre = many ? r->spec : "";
    const char *sep = many ? ": " : "";
    if (!r->found)
        printf("%s%sno %s fits: even 1 runs out of memory on %s usable\n", pre, sep, dim, us);
    else if (!r->first_fail)
        printf("%s%slargest %s that fits: %lld or more (peak reserved %s of %s usable; tried up "
               "to %lld)\n",
               pre, sep, dim, (long long)r->largest, pr, us, (long long)r->largest);
    else
        printf("%s%slargest %s that fits: %lld (peak reserved %s of %s usable; %lld runs out of "
               "memory)\n",
               pre, sep, dim, (long long)r->largest, pr, us, (long long)r->first_fail);
}

int gm_fit_largest_cmd(gm_run_opts *o, const char *dim, const char *policies, const char *json_path,
                       int quiet)
{
    gm_err err;
    size_t n = o->n_tenants;
    if (n < 2 || n > GM_SCALE_MAX_INPUTS)
        return gm_cmd_usage("fit",
                            "--largest %s takes two or three recordings, each with its %s "
                            "(e.g. run-b8.pickle=8 run-b16.pickle=16)",
                            dim, dim);
    char paths[GM_SCALE_MAX_INPUTS][1024];
    gm_scale_input in[GM_SCALE_MAX_INPUTS];
    for (size_t i = 0; i < n; i++) {
        if (gm_scale_input_parse(o->tenants[i].path, paths[i], sizeof paths[i], &in[i].x, &err))
            return gm_cmd_fail("fit", GM_EUSAGE, err.msg);
        in[i].path = paths[i];
    }
    char **specs = NULL;
    size_t ns = 0;
    int rc = gm_policy_list_split(*policies ? policies : "pytorch", &specs, &ns, &err);
    if (rc) return gm_cmd_fail("fit", rc, err.msg);
    gm_scale *s = NULL;
    rc = gm_scale_open(in, n, -1, &s, &err);
    gm_largest *res = rc ? NULL : calloc(ns, sizeof *res);
    if (rc == GM_OK && !res) rc = gm_errf(&err, GM_ENOMEM, "out of memory");
    gm_sim_config cfg;
    gm_run_opts_config(o, &cfg);
    if (rc == GM_OK && !cfg.capacity_bytes)
        cfg.capacity_bytes = gm_scale_meta(s, gm_scale_max_input(s))->device_total_bytes;
    if (rc == GM_OK && !cfg.capacity_bytes)
        rc = gm_errf(&err, GM_EUSAGE,
                     "the recordings do not say how much memory the device has; give "
                     "--capacity (e.g. --capacity 24GiB)");
    for (size_t i = 0; i < ns && rc == GM_OK; i++)
        rc = gm_fit_largest(&cfg, s, specs[i], GM_SCALE_MAX_X, &res[i], &err);
    if (rc == GM_OK && !quiet) {
        gm_scale_stats st;
        gm_scale_get_stats(s, &st);
        if (!st.linear && !st.quadratic)
            printf("note: no allocation changes with %s across the recordings, so every value "
                   "needs the same memory; are they really at different values of %s?\n",
                   dim, dim);
        for (size_t i = 0; i < ns; i++)
            print(dim, &res[i], ns > 1);
    }
    if (rc == GM_OK && json_path) {
        gm_scale_stats st;
        gm_scale_get_stats(s, &st);
        json_t *j = gm_largest_json(dim, in, n, &st, res, ns);
        rc = j ? gm_json_write(j, json_path, &err) : gm_errf(&err, GM_ENOMEM, "out of memory");
        json_decref(j);
    }
    free(res);
    free(specs);
    gm_scale_free(s);
    return rc == GM_OK ? 0 : gm_cmd_fail("fit", rc, err.msg);
}
