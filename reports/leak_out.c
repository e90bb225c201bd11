/* leak_out.c - iterations and leaks (study/leak.h) as `gmsim info`'s text
 * and as JSON (info --json, the report's trace statistics). */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "results.h"
#include "table.h"
#include "base/units.h"

/* A signed byte amount: "+8.00 MiB", "-512 B", "0 B". */
static char *fmt_signed(double v, char *buf, size_t len)
{
    char b[24];
    double a = fabs(v);
    gm_fmt_bytes(a >= 9.2e18 ? UINT64_MAX : (uint64_t)(a + 0.5), b, sizeof b);
    snprintf(buf, len, "%s%s", v >= 0.5 ? "+" : v <= -0.5 ? "-" : "", b);
    return buf;
}

static void describe_source(FILE *f, const gm_leak_report *r)
{
    fprintf(f, "iterations:          %zu boundaries, from %s", r->n,
            gm_iter_source_name(r->source));
    if (r->source == GM_ITER_PERIOD)
        fprintf(f, " (%.1f events per iteration, autocorrelation %.2f)", r->period_events,
                r->period_r);
    else if (r->marker[0])
        fprintf(f, " '%s'", r->marker);
    if (r->n > r->warmup && r->warmup)
        fprintf(f, "; warm-up: iteration%s 0%s", r->warmup > 1 ? "s" : "",
                r->warmup > 1 ? "-1" : "");
    fprintf(f, "\n");
}

static void describe_fit(FILE *f, const gm_leak_fit *fit)
{
    char b1[40], b2[40];
    fprintf(f, "%s per iteration over iterations %zu-%zu (R^2 %.3f, standard error %s",
            fmt_signed(fit->slope, b1, sizeof b1), fit->first, fit->first + fit->n - 1, fit->r2,
            gm_fmt_bytes((uint64_t)(fit->slope_se + 0.5), b2, sizeof b2));
    if (isinf(fit->t))
        fprintf(f, ", an exact line)");
    else
        fprintf(f, ", t %.1f)", fit->t);
}

#define LEAK_SHOWN_GROUPS 10 /* growing groups the text names */

/* The growing groups, steepest first (ties: lower group); *order is
 * malloc'd (NULL when none or out of memory). */
static size_t growing_order(const gm_leak_report *r, size_t **order)
{
    size_t n = 0;
    *order = NULL;
    if (!r->group_fit || r->verdict == GM_LEAK_STEADY || r->verdict == GM_LEAK_UNKNOWN) return 0;
    for (size_t g = 0; g < r->ngroups; g++)
        n += r->group_fit[g].growing != 0;
    if (!n || !(*order = malloc(n * sizeof **order))) return 0;
    size_t m = 0;
    for (size_t g = 0; g < r->ngroups; g++) {
        if (!r->group_fit[g].growing) continue;
        size_t j = m++;
        while (j > 0 && r->group_fit[(*order)[j - 1]].slope < r->group_fit[g].slope) {
            (*order)[j] = (*order)[j - 1];
            j--;
        }
        (*order)[j] = g;
    }
    return n;
}

void gm_table_leak(FILE *f, const gm_leak_report *r)
{
    char b1[40], b2[40], b3[40], b4[40];
    if (r->source == GM_ITER_NONE || !r->n) {
        fprintf(f, "iterations:          none found (no iteration or NVTX markers, no period in "
                   "live bytes; --iteration-marker NAME names them)\n");
        return;
    }
    describe_source(f, r);
    fprintf(f, "  iter        event         live      carried   carried#         peak\n");
    size_t shown = 0;
    for (size_t k = 0; k < r->n; k++) {
        if (r->n > 24 && k >= 10 && k + 10 < r->n) { /* the first and last ten */
            if (!shown++) fprintf(f, "  ... %zu more\n", r->n - 20);
            continue;
        }
        const gm_iter_point *p = &r->pt[k];
        fprintf(f, "  %4zu %12" PRIu64 " %12s %12s %10" PRIu64 " %12s%s\n", k, p->event_index,
                gm_fmt_bytes(p->live_bytes, b1, sizeof b1),
                gm_fmt_bytes(p->carried_bytes, b2, sizeof b2), p->carried_count,
                gm_fmt_bytes(p->peak_bytes, b3, sizeof b3), k < r->warmup ? "  (warm-up)" : "");
    }
    fprintf(f, "leak:                %s", gm_leak_verdict_name(r->verdict));
    if (r->verdict == GM_LEAK_UNKNOWN) {
        fprintf(f, " (%d boundaries after warm-up are needed)\n", GM_LEAK_MIN_POINTS);
        return;
    }
    fprintf(f, ": ");
    describe_fit(f, &r->fit);
    fprintf(f, "\n");
    if (r->verdict == GM_LEAK_STOPPED)
        fprintf(f, "  growth ended at iteration %zu; live bytes are flat from there on (%s)\n",
                r->growth_end, gm_fmt_bytes(r->pt[r->growth_end].live_bytes, b1, sizeof b1));
    if (r->verdict == GM_LEAK_GROWING || r->verdict == GM_LEAK_STOPPED) {
        size_t *order = NULL, n = growing_order(r, &order);
        for (size_t i = 0; i < n && i < LEAK_SHOWN_GROUPS; i++) {
            const gm_leak_fit *gf = &r->group_fit[order[i]];
            fprintf(f, "  growing %s: %s %s per iteration (R^2 %.3f)\n",
                    r->by_site ? "call site" : "category", gm_leak_group_name(r, order[i]),
                    fmt_signed(gf->slope, b1, sizeof b1), gf->r2);
        }
        if (n > LEAK_SHOWN_GROUPS)
            fprintf(f, "  ... and %zu more growing %s (--json lists them all)\n",
                    n - LEAK_SHOWN_GROUPS, r->by_site ? "call sites" : "categories");
        if (!n && r->by_site)
            fprintf(f, "  no single call site grows steadily enough to name (the growth is "
                       "spread over several)\n");
        free(order);
    }
    if (r->verdict == GM_LEAK_GROWING && r->capacity_bytes) {
        if (r->runout_iteration >= 0)
            fprintf(f,
                    "  at %s per iteration, a %s card runs out at iteration %" PRId64
                    " (boundary live bytes projected, plus the %s one iteration rises above "
                    "them)\n",
                    fmt_signed(r->fit.slope, b1, sizeof b1),
                    gm_fmt_bytes(r->capacity_bytes, b2, sizeof b2), r->runout_iteration,
                    gm_fmt_bytes(r->rise_bytes, b4, sizeof b4));
    }
    (void)b4;
}

/* ------------------------------------------------------------------ JSON */

static json_t *fit_json(const gm_leak_fit *fit)
{
    json_t *o = json_object();
    json_object_set_new(o, "first_iteration", json_integer((json_int_t)fit->first));
    json_object_set_new(o, "iterations", json_integer((json_int_t)fit->n));
    json_object_set_new(o, "slope_bytes_per_iteration", json_real(fit->slope));
    json_object_set_new(o, "intercept_bytes", json_real(fit->intercept));
    json_object_set_new(o, "slope_stderr_bytes", json_real(fit->slope_se));
    json_object_set_new(o, "r2", json_real(fit->r2));
    json_object_set_new(o, "t", isinf(fit->t) ? json_null() : json_real(fit->t));
    json_object_set_new(o, "growing", json_boolean(fit->growing));
    return o;
}

json_t *gm_leak_json(const gm_leak_report *r)
{
    json_t *o = json_object();
    static const char *const src[] = {"none", "user-marker", "iteration-markers", "nvtx-range",
                                      "period"};
    json_object_set_new(o, "source", json_string(src[r->source <= GM_ITER_PERIOD ? r->source : 0]));
    json_object_set_new(o, "marker", gm_json_text(r->marker));
    json_object_set_new(o, "period_events",
                        r->source == GM_ITER_PERIOD ? json_real(r->period_events) : json_null());
    json_object_set_new(o, "period_autocorrelation",
                        r->source == GM_ITER_PERIOD ? json_real(r->period_r) : json_null());
    json_object_set_new(o, "warmup_iterations", json_integer((json_int_t)r->warmup));
    static const char *const verdict[] = {"unknown", "steady", "growing", "stopped"};
    json_object_set_new(o, "verdict", json_string(verdict[r->verdict <= 3 ? r->verdict : 0]));
    json_object_set_new(o, "fit",
                        r->n && r->verdict != GM_LEAK_UNKNOWN ? fit_json(&r->fit) : json_null());
    json_object_set_new(o, "growth_end_iteration",
                        r->verdict == GM_LEAK_STOPPED ? json_integer((json_int_t)r->growth_end)
                                                      : json_null());
    json_object_set_new(o, "capacity_bytes", json_integer((json_int_t)r->capacity_bytes));
    json_object_set_new(o, "rise_bytes", json_integer((json_int_t)r->rise_bytes));
    json_object_set_new(o, "runout_iteration",
                        r->runout_iteration >= 0 ? json_integer(r->runout_iteration) : json_null());
    json_object_set_new(o, "group_kind", json_string(gm_leak_group_kind(r)));
    json_t *growing = json_object(), *list = json_array();
    size_t *order = NULL, ng = growing_order(r, &order);
    for (size_t i = 0; i < ng; i++) { /* steepest first */
        const gm_leak_fit *gf = &r->group_fit[order[i]];
        json_object_set_new(growing, gm_leak_group_name(r, order[i]), json_real(gf->slope));
        json_array_append_new(list,
                              json_pack("{s:I,s:o,s:f,s:f}", "group", (json_int_t)order[i], "name",
                                        gm_json_text(gm_leak_group_name(r, order[i])),
                                        "slope_bytes_per_iteration", gf->slope, "r2", gf->r2));
    }
    free(order);
    json_object_set_new(o, "growing", list);
    json_object_set_new(o, "growing_groups", growing);
    json_t *a = json_array();
    for (size_t k = 0; k < r->n; k++) {
        const gm_iter_point *p = &r->pt[k];
        json_t *e = json_object();
        json_object_set_new(e, "event", json_integer((json_int_t)p->event_index));
        json_object_set_new(e, "t_ns", json_integer((json_int_t)p->t_ns));
        json_object_set_new(e, "live_bytes", json_integer((json_int_t)p->live_bytes));
        json_object_set_new(e, "carried_bytes", json_integer((json_int_t)p->carried_bytes));
        json_object_set_new(e, "carried_allocations", json_integer((json_int_t)p->carried_count));
        json_object_set_new(e, "peak_bytes", json_integer((json_int_t)p->peak_bytes));
        json_t *g = json_object();
        for (size_t i = 0; i < r->ngroups; i++) /* sites: only those with live bytes */
            if (!r->by_site || r->group_bytes[k * r->ngroups + i])
                json_object_set_new(g, gm_leak_group_name(r, i),
                                    json_integer((json_int_t)r->group_bytes[k * r->ngroups + i]));
        json_object_set_new(e, "by_group", g);
        json_array_append_new(a, e);
    }
    json_object_set_new(o, "boundaries", a);
    return o;
}
