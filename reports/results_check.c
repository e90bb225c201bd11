/*
 * results_check.c - the numbers of a results file read back (`gmsim report`)
 * are checked before anything is drawn from them: a file edited by hand or
 * by an attacker must end in an error naming the field, never in a float
 * converted to an integer it does not fit (undefined behaviour in C).
 *
 * What gmsim writes: every number is finite, at least 0 and below 2^63; the
 * fractions (fragmentation, utilization, precision, ...) lie in [0, 1]; the
 * exceptions are the timeline's ext_frag column, -1 where a bucket had no
 * free memory to measure, and memory_stats' max_split_size, -1 when unset
 * (as PyTorch writes it), and the leak fit's slope, intercept and t
 * statistic (and the period's autocorrelation), which may be negative, and
 * -1 in allocations_top rows (a free time or site that does not exist).
 */
#include "results.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define LIMIT 9223372036854775808.0 /* 2^63 */

static int is_fraction(const char *key)
{
    static const char *const names[] = {"fragmentation",
                                        "fragmentation_time_weighted",
                                        "utilization",
                                        "device_utilization",
                                        "external_fragmentation_mean",
                                        "external_fragmentation_max",
                                        "memory_fraction",
                                        "precision",
                                        "recall",
                                        "accuracy",
                                        "period_confidence"};
    for (size_t i = 0; key && i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(key, names[i])) return 1;
    return 0;
}

/* The leak fit's figures (trace_stats.iterations.fit): a line may fall. */
static int is_signed(const char *key)
{
    static const char *const names[] = {"slope_bytes_per_iteration", "intercept_bytes", "t",
                                        "period_autocorrelation"};
    for (size_t i = 0; key && i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(key, names[i])) return 1;
    return 0;
}

static int bad(const char *name, const char *path, double v, const char *want, gm_err *err)
{
    return gm_errf(err, GM_EINVAL,
                   "%s: %s is %.17g; it must be %s — the results file is damaged or was edited; "
                   "re-run gmsim to make it again",
                   name, path, v, want);
}

/* Check v (at path, under key; in a timeline row, column col). */
static int walk(json_t *v, const char *key, const char *col, char *path, size_t len, size_t used,
                const char *name, gm_err *err)
{
    if (json_is_number(v)) {
        double x = json_number_value(v);
        int frag = col && !strcmp(col, "ext_frag");
        if (!isfinite(x)) return bad(name, path, x, "a finite number", err);
        if (frag && (x < -1 || x > 1)) return bad(name, path, x, "-1 (none) or from 0 to 1", err);
        if (!col && key && !strcmp(key, "max_split_size") && x == -1) return GM_OK;
        /* trace_stats.allocations_top rows: -1 = still live at the end / no site */
        if (!col && key && !strcmp(key, "rows") && x == -1) return GM_OK;
        if (!col && is_signed(key)) return GM_OK; /* finite is all they need */
        if (!frag && (x < 0 || x >= LIMIT))
            return bad(name, path, x, "a number from 0 to 2^63", err);
        if (!col && is_fraction(key) && x > 1) return bad(name, path, x, "from 0 to 1", err);
        return GM_OK;
    }
    if (json_is_object(v)) {
        json_t *cols = json_object_get(v, "columns");
        const char *k;
        json_t *c;
        json_object_foreach(v, k, c)
        {
            int n = snprintf(path + used, len - used, "%s%s", used ? "." : "", k);
            size_t u = n < 0 || (size_t)n >= len - used ? len - 1 : used + (size_t)n;
            /* a timeline: "points" rows, named by "columns" */
            int rc = !strcmp(k, "points") && json_is_array(cols)
                         ? GM_OK
                         : walk(c, k, NULL, path, len, u, name, err);
            for (size_t i = 0; rc == GM_OK && !strcmp(k, "points") && json_is_array(cols) &&
                               i < json_array_size(c);
                 i++) {
                json_t *row = json_array_get(c, i);
                for (size_t j = 0; rc == GM_OK && j < json_array_size(row); j++) {
                    int m = snprintf(path + u, len - u, "[%zu][%zu]", i, j);
                    size_t u2 = m < 0 || (size_t)m >= len - u ? len - 1 : u + (size_t)m;
                    const char *cn = json_string_value(json_array_get(cols, j));
                    rc = walk(json_array_get(row, j), k, cn ? cn : "", path, len, u2, name, err);
                }
            }
            path[used] = 0;
            if (rc) return rc;
        }
        return GM_OK;
    }
    if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++) {
            int n = snprintf(path + used, len - used, "[%zu]", i);
            size_t u = n < 0 || (size_t)n >= len - used ? len - 1 : used + (size_t)n;
            int rc = walk(json_array_get(v, i), key, col, path, len, u, name, err);
            path[used] = 0;
            if (rc) return rc;
        }
    }
    return GM_OK;
}

int gm_results_check(json_t *root, const char *name, gm_err *err)
{
    char path[512] = "";
    return walk(root, NULL, NULL, path, sizeof path, 0, name, err);
}
