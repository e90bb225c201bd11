/*
 * html_search.c - the pages of the searches: `gmsim fit --html` (a
 * gmsim-fit/1 document: the smallest device per policy) and `gmsim tune
 * --html` (gmsim-tune/1: PyTorch's allocator settings ranked). Like the
 * run report they are made from the saved JSON only (so `gmsim report
 * fit.json` draws the same page), self-contained, under the same CSP.
 *
 * Each page: a headline that answers the question (the card to buy, the
 * line to paste), then the table every figure comes from, with an inline
 * bar per row so the ranking reads at a glance.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "html_int.h"
#include "svg.h"

static void esc(gm_strbuf *b, const char *s)
{
    gm_sb_esc(b, s ? s : "\xe2\x80\x94");
}

static const char *gib(double v, char *buf, size_t len)
{
    if (isnan(v)) return gm_fmt_num(v, 0, buf, len);
    return gm_fmt_bytes_auto(v, buf, len);
}

/* A bar in a table cell: v on the scale [lo, hi] (the floor no run goes
 * below, to the largest value in the table), so small differences show. */
static void cell_bar(gm_strbuf *b, double v, double lo, double hi)
{
    if (!(hi > lo) || isnan(v)) return;
    gm_sb_printf(b, "<span class=\"bar\"><i style=\"width:%.1f%%\"></i></span>",
                 100.0 * fmin(1.0, fmax(0.02, (v - lo) / (hi - lo))));
}

/* A device size to 1 MiB: fit's answers differ by 2 MiB steps. */
static const char *cap_s(double v, char *buf, size_t len)
{
    if (isnan(v)) return gm_fmt_num(v, 0, buf, len);
    return gm_fmt_unit(v, (gm_unit){"GiB", 1073741824.0}, 3, buf, len);
}

void rep_traces_line(gm_strbuf *b, json_t *traces)
{
    size_t i;
    json_t *t;
    json_array_foreach(traces, i, t)
    {
        const char *name = json_is_string(t) ? json_string_value(t) : rep_str(t, "trace");
        gm_sb_puts(b, i ? ", <code>" : "<code>");
        esc(b, name);
        gm_sb_puts(b, "</code>");
    }
}

static int finish(gm_strbuf *out, const char *nce, gm_err *err)
{
    rep_page_close(out, nce);
    if (out->failed) return gm_errf(err, GM_ENOMEM, "out of host memory while writing the report");
    return GM_OK;
}

/* ------------------------------------------------------------------ fit */

void rep_fit_made(gm_strbuf *b, json_t *fit)
{
    esc(b, rep_str(fit, "inputs.allocator"));
    gm_sb_puts(b, " allocator \xc2\xb7 gmsim ");
    esc(b, rep_str(fit, "gmsim_version"));
    gm_sb_puts(b, " \xc2\xb7 ");
    esc(b, rep_str(fit, "created_utc"));
    gm_sb_puts(b, "</p></header>\n");
}

int rep_fit_page(json_t *fit, gm_strbuf *out, gm_err *err)
{
    json_t *res = json_object_get(fit, "results");
    json_t *traces = json_object_get(json_object_get(fit, "inputs"), "traces");
    if (!json_is_array(res) || !json_array_size(res))
        return gm_errf(err, GM_EINVAL, "cannot make a report: a gmsim-fit/1 without results");
    const char *fmode = rep_str(fit, "mode");
    if (fmode && !strcmp(fmode, "density")) return rep_density_page(fit, out, err);
    char nce[40] = {0}, a[48], c[48], d[48];
    rep_page_open(out, "gmsim fit: the smallest device", nce, sizeof nce);
    const char *mode = rep_str(fit, "mode");
    int tenants = mode && !strcmp(mode, "tenants");
    gm_sb_puts(out, "<header><h1>");
    gm_sb_puts(out, tenants ? "How many copies fit: " : "The smallest device for ");
    rep_traces_line(out, traces);
    gm_sb_puts(out, "</h1><p class=\"sub\">");
    rep_fit_made(out, fit);

    /* the smallest realizable answer, and the smallest deployable one */
    size_t i;
    json_t *e;
    double best = NAN, dep = NAN, lo = NAN, hi = 0;
    const char *best_policy = NULL, *dep_policy = NULL;
    json_array_foreach(res, i, e)
    {
        double cap = rep_num(e, "capacity_bytes"), live = rep_num(e, "peak_live_bytes");
        int found = json_is_true(json_object_get(e, "found"));
        int real = json_is_true(json_object_get(e, "realizable"));
        int deployable = json_is_true(json_object_get(e, "deployable"));
        if (found && cap > hi) hi = cap;
        if (!isnan(live) && (isnan(lo) || live < lo)) lo = live;
        if (found && real && (isnan(best) || cap < best))
            best = cap, best_policy = rep_str(e, "policy");
        if (found && deployable && (isnan(dep) || cap < dep))
            dep = cap, dep_policy = rep_str(e, "policy");
    }
    gm_sb_printf(out, "<div class=\"verdict%s\">", best_policy ? "" : " warn");
    if (dep_policy) {
        gm_sb_printf(out, "<p><b>The smallest device that runs it as deployed today: %s</b> (",
                     cap_s(dep, a, sizeof a));
        esc(out, dep_policy);
        gm_sb_puts(out, ", PyTorch's own allocator).</p>");
    }
    if (best_policy && (!dep_policy || best < dep)) {
        gm_sb_printf(out, "<p>%s %s with a custom allocator (", dep_policy ? "" : "<b>",
                     cap_s(best, a, sizeof a));
        esc(out, best_policy);
        gm_sb_printf(out,
                     ")%s: a release policy stock PyTorch does not have (policies/README.md, "
                     "\u201cDeployable today\u201d).</p>",
                     dep_policy ? "" : "</b>");
    }
    if (!best_policy)
        gm_sb_puts(out, "<p><b>Nothing realizable fits</b> up to the largest device tried; give "
                        "<code>--max-capacity</code> a larger size.</p>");
    gm_sb_printf(out,
                 "<p class=\"note\">Found by bisection to %s; sizes include the context "
                 "overhead.</p>",
                 gib(rep_num(fit, "inputs.resolution_bytes"), c, sizeof c));
    gm_sb_puts(out, "</div>\n<h2>Per policy</h2><p class=\"al-tip\" id=\"fits-tip\" "
                    "aria-live=\"polite\">Hover a row: the policy's answer in words.</p>"
                    "<table class=\"tips\" id=\"fits\"><tr><th class=\"l\">policy</th>"
                    "<th>fits at</th><th>OOM at</th><th>peak live</th><th>peak reserved</th>"
                    "<th>simulations</th></tr>");
    json_array_foreach(res, i, e)
    {
        int found = json_is_true(json_object_get(e, "found"));
        int real = json_is_true(json_object_get(e, "realizable"));
        double cap = rep_num(e, "capacity_bytes");
        const char *pol = rep_str(e, "policy");
        int win = (best_policy && pol && !strcmp(pol, best_policy) && cap == best) ||
                  (dep_policy && pol && !strcmp(pol, dep_policy) && cap == dep);
        gm_sb_printf(out, "<tr%s data-tip=\"",
                     win    ? " class=\"win\""
                     : real ? ""
                            : " class=\"bound\"");
        esc(out, pol);
        if (found)
            gm_sb_printf(out, ": no OOM on %s; an OOM on %s; peak reserved %s",
                         cap_s(cap, a, sizeof a),
                         cap_s(rep_num(e, "oom_capacity_bytes"), c, sizeof c),
                         gib(rep_num(e, "peak_reserved_bytes"), d, sizeof d));
        else
            gm_sb_printf(out, ": an OOM on every size up to %s",
                         gib(rep_num(e, "max_capacity_tried_bytes"), a, sizeof a));
        gm_sb_puts(out, real ? "\"" : " (a bound: it knows the future)\"");
        gm_sb_puts(out, "><td class=\"l pol\">");
        esc(out, pol);
        if (!real)
            gm_sb_puts(out, "<span class=\"badge bound\">bound, not deployable</span>");
        else if (!json_is_true(json_object_get(e, "deployable")))
            gm_sb_puts(out, "<span class=\"badge bound\">custom allocator</span>");
        gm_sb_puts(out, "</td><td>");
        if (found) {
            gm_sb_puts(out, cap_s(cap, a, sizeof a));
            cell_bar(out, cap, lo, hi);
        } else {
            gm_sb_printf(out, "<span class=\"badge oom\">none up to %s</span>",
                         gib(rep_num(e, "max_capacity_tried_bytes"), a, sizeof a));
        }
        gm_sb_printf(out, "</td><td>%s</td><td>%s</td><td>%s</td><td>%.0f</td></tr>",
                     cap_s(rep_num(e, "oom_capacity_bytes"), a, sizeof a),
                     gib(rep_num(e, "peak_live_bytes"), c, sizeof c),
                     gib(rep_num(e, "peak_reserved_bytes"), d, sizeof d), rep_num(e, "runs"));
    }
    gm_sb_puts(out, "</table><p class=\"note\"><b>fits at</b>: the smallest device size (as "
                    "<code>--capacity</code> gives it) on which the run has no OOM; <b>OOM "
                    "at</b>: the largest size tried on which it has one. The bar runs from the "
                    "peak of live tensors (the floor no allocator goes below) to the largest "
                    "answer. The oracle knows the future: a bound, not a deployable "
                    "policy.</p>\n");
    return finish(out, nce, err);
}

/* ----------------------------------------------------------------- tune */

/* Peak reserved against driver time, one point per setting: the Pareto
 * front (no other setting has both less reserved and less driver time)
 * joined by a line, the best and the default marked. The y axis spans the
 * data, not 0..max: settings differ by a few percent. */
static void tune_pareto(gm_strbuf *b, json_t *set, json_t *best, json_t *dflt)
{
    size_t n = json_array_size(set), i;
    double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
    json_t *e;
    json_array_foreach(set, i, e)
    {
        double x = rep_num(e, "driver_ns"), y = rep_num(e, "peak_reserved_bytes");
        if (isnan(x) || isnan(y)) continue;
        x0 = fmin(x0, x), x1 = fmax(x1, x), y0 = fmin(y0, y), y1 = fmax(y1, y);
    }
    if (!(x1 >= x0) || n == 0) return;
    double dx = x1 > x0 ? (x1 - x0) * 0.06 : fmax(x0 * 0.05, 1.0);
    double dy = y1 > y0 ? (y1 - y0) * 0.08 : fmax(y0 * 0.01, 1.0);
    gm_scale sx = {x0 - dx, x1 + dx, REP_PX0, REP_PX1}, sy = {y0 - dy, y1 + dy, 262, 14};
    gm_unit ux = gm_unit_time(sx.d1), uy = gm_unit_bytes(sy.d1);
    double stx, sty;
    gm_nice_top(sx.d1 - sx.d0, 6, &stx);
    gm_nice_top(sy.d1 - sy.d0, 5, &sty);
    gm_sb_puts(b,
               "<h2>Peak reserved against driver time</h2><svg class=\"chart tips\" id=\"pareto\" "
               "viewBox=\"0 0 960 "
               "300\" role=\"img\" aria-label=\"peak reserved against driver time, per "
               "setting\">");
    /* grid at multiples of the step inside the span */
    for (double v = ceil(sy.d0 / sty) * sty; v <= sy.d1; v += sty) {
        char l[48];
        gm_sb_printf(b, "<line class=\"grid\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>",
                     REP_PX0, REP_PX1, gm_scale_px(&sy, v), gm_scale_px(&sy, v));
        gm_sb_printf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>", REP_PX0 - 6,
                     gm_scale_px(&sy, v) + 4, gm_fmt_unit(v, uy, 2, l, sizeof l));
    }
    for (double v = ceil(sx.d0 / stx) * stx; v <= sx.d1; v += stx) {
        char l[48];
        gm_sb_printf(b, "<text x=\"%.1f\" y=\"282\" text-anchor=\"middle\">%s</text>",
                     gm_scale_px(&sx, v), gm_fmt_unit(v, ux, 2, l, sizeof l));
    }
    gm_sb_printf(b,
                 "<text x=\"%.1f\" y=\"298\" text-anchor=\"end\">time in the driver "
                 "(cudaMalloc/cudaFree)</text>",
                 REP_PX1);
    /* the front: sorted by x, keep each point below every earlier one */
    size_t *ord = malloc(n * sizeof *ord), m = 0;
    if (ord) {
        for (i = 0; i < n; i++)
            ord[i] = i;
        for (size_t a = 1; a < n; a++) /* insertion sort by (driver time, reserved) */
            for (size_t k = a; k > 0; k--) {
                json_t *p = json_array_get(set, ord[k - 1]), *q = json_array_get(set, ord[k]);
                double px = rep_num(p, "driver_ns"), qx = rep_num(q, "driver_ns");
                if (px < qx || (px == qx && rep_num(p, "peak_reserved_bytes") <=
                                                rep_num(q, "peak_reserved_bytes")))
                    break;
                size_t t = ord[k];
                ord[k] = ord[k - 1], ord[k - 1] = t;
            }
        double low = INFINITY;
        gm_sb_puts(b, "<path class=\"s-r\" d=\"");
        for (i = 0; i < n; i++) {
            json_t *p = json_array_get(set, ord[i]);
            double y = rep_num(p, "peak_reserved_bytes"), x = rep_num(p, "driver_ns");
            if (isnan(x) || isnan(y) || !(y < low)) continue;
            low = y;
            gm_sb_printf(b, "%s%.1f %.1f", m++ ? " L" : "M", gm_scale_px(&sx, x),
                         gm_scale_px(&sy, y));
        }
        gm_sb_puts(b, "\"/>");
        free(ord);
    }
    json_array_foreach(set, i, e)
    {
        double x = rep_num(e, "driver_ns"), y = rep_num(e, "peak_reserved_bytes");
        if (isnan(x) || isnan(y)) continue;
        int oom = rep_num(e, "oom_count") > 0;
        const char *fill = e == best   ? "#2f9e4f"
                           : e == dflt ? "#1f2933"
                           : oom       ? "#c53030"
                                       : "#7aa7d9";
        char r[48], t[48];
        gm_sb_printf(b,
                     "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%s\" fill=\"%s\" fill-opacity=\"%s\">"
                     "<title>",
                     gm_scale_px(&sx, x), gm_scale_px(&sy, y), e == best || e == dflt ? "6" : "3.5",
                     fill, e == best || e == dflt ? "1" : ".65");
        const char *conf = rep_str(e, "alloc_conf");
        esc(b, conf && *conf ? conf : "(default)");
        gm_sb_printf(b, ": %s reserved, %s in the driver%s</title></circle>",
                     gm_fmt_bytes_auto(y, r, sizeof r), gm_fmt_time_auto(x, t, sizeof t),
                     oom ? ", OOM" : "");
    }
    gm_sb_puts(b, "</svg><div class=\"legend\"><span><i class=\"sw\" style=\"background:#2f9e4f\">"
                  "</i>the best</span><span><i class=\"sw\" style=\"background:#1f2933\"></i>the "
                  "default</span><span><i class=\"sw\" style=\"background:#c53030\"></i>OOMs</span>"
                  "<span><i class=\"key\" style=\"border-color:#dd6b20\"></i>Pareto front: no "
                  "setting has both less reserved and less driver time</span></div>"
                  "<p class=\"al-tip\" id=\"pareto-tip\" aria-live=\"polite\">Hover a point: "
                  "its setting, peak reserved and driver time.</p>\n");
}

int rep_tune_page(json_t *tune, gm_strbuf *out, gm_err *err)
{
    json_t *set = json_object_get(tune, "settings");
    if (!json_is_array(set) || !json_array_size(set))
        return gm_errf(err, GM_EINVAL, "cannot make a report: a gmsim-tune/1 without settings");
    char nce[40] = {0}, a[48], c[48], d[48];
    rep_page_open(out, "gmsim tune: PYTORCH_CUDA_ALLOC_CONF", nce, sizeof nce);
    gm_sb_puts(out, "<header><h1>Allocator settings for ");
    rep_traces_line(out, json_object_get(tune, "traces"));
    gm_sb_printf(out, "</h1><p class=\"sub\">%s device (",
                 gib(rep_num(tune, "capacity_bytes"), a, sizeof a));
    esc(out, rep_str(tune, "capacity_source"));
    gm_sb_puts(out, ") \xc2\xb7 policy ");
    esc(out, rep_str(tune, "policy"));
    gm_sb_puts(out, " \xc2\xb7 PyTorch ");
    esc(out, rep_str(tune, "torch_rules"));
    gm_sb_puts(out, " rules \xc2\xb7 grid ");
    esc(out, rep_str(tune, "grid"));
    gm_sb_puts(out, "</p></header>\n");

    size_t i;
    json_t *e, *best = NULL, *dflt = NULL;
    double lo = NAN, hi = 0;
    json_array_foreach(set, i, e)
    {
        if (rep_num(e, "rank") == 1 && !best) best = e;
        if (json_is_true(json_object_get(e, "default"))) dflt = e;
        double r = rep_num(e, "peak_reserved_bytes"), live = rep_num(e, "peak_live_bytes");
        if (r > hi) hi = r;
        if (!isnan(live) && (isnan(lo) || live < lo)) lo = live;
    }
    int ok = json_is_true(json_object_get(tune, "best_runs_without_oom"));
    gm_sb_printf(out, "<div class=\"verdict%s\"><p><b>", ok ? "" : " warn");
    gm_sb_puts(out, ok ? "Paste before starting the job:" : "Every setting OOMs; the least bad:");
    gm_sb_puts(out, "</b></p><pre>");
    esc(out, rep_str(tune, "paste"));
    gm_sb_puts(out, "</pre>");
    if (best && dflt && best != dflt) {
        double saved = rep_num(dflt, "peak_reserved_bytes") - rep_num(best, "peak_reserved_bytes");
        gm_sb_printf(out, "<p>Against the default: %s %s reserved at the peak",
                     gib(fabs(saved), a, sizeof a), saved >= 0 ? "less" : "more");
        double od = rep_num(dflt, "oom_count"), ob = rep_num(best, "oom_count");
        if (od > 0 && ob == 0)
            gm_sb_printf(out, ", and the default's %.0f OOM%s gone", od, od == 1 ? " is" : "s are");
        gm_sb_puts(out, ".</p>");
    }
    double fb = rep_num(tune, "fit.best_bytes"), fd = rep_num(tune, "fit.default_bytes");
    if (!isnan(fb) || !isnan(fd))
        gm_sb_printf(out,
                     "<p>Smallest device that runs it: %s with this setting, %s with the "
                     "default.</p>",
                     gib(fb, a, sizeof a), gib(fd, c, sizeof c));
    gm_sb_puts(out, "</div>\n");
    tune_pareto(out, set, best, dflt);
    gm_sb_puts(out, "<h2>Every setting tried, ranked</h2><table><tr><th>rank</th>"
                    "<th class=\"l\">PYTORCH_CUDA_ALLOC_CONF</th><th>OOMs</th>"
                    "<th>peak reserved</th><th>peak allocated</th><th>fragmentation</th>"
                    "<th>driver calls</th><th>driver time</th></tr>");
    json_array_foreach(set, i, e)
    {
        int is_default = json_is_true(json_object_get(e, "default"));
        int rec = json_is_true(json_object_get(e, "recorded"));
        gm_sb_printf(out, "<tr%s><td>%.0f</td><td class=\"l wrap\"><code>",
                     e == best    ? " class=\"win\""
                     : is_default ? " class=\"ref\""
                                  : "",
                     rep_num(e, "rank"));
        const char *conf = rep_str(e, "alloc_conf");
        esc(out, conf && *conf ? conf : "(default)");
        gm_sb_puts(out, "</code>");
        double frac = rep_num(e, "memory_fraction");
        if (frac > 0)
            gm_sb_printf(out, " with memory fraction %s", gm_fmt_num(frac, 2, a, sizeof a));
        if (is_default) gm_sb_puts(out, "<span class=\"badge bound\">default</span>");
        if (rec) gm_sb_puts(out, "<span class=\"badge bound\">as recorded</span>");
        double ooms = rep_num(e, "oom_count");
        gm_sb_puts(out, "</td><td>");
        if (ooms > 0)
            gm_sb_printf(out, "<span class=\"badge oom\">%.0f</span>", ooms);
        else
            gm_sb_puts(out, "0");
        gm_sb_printf(out, "</td><td>%s", gib(rep_num(e, "peak_reserved_bytes"), a, sizeof a));
        cell_bar(out, rep_num(e, "peak_reserved_bytes"), lo, hi);
        char t[48];
        gm_sb_printf(out, "</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>",
                     gib(rep_num(e, "peak_allocated_bytes"), c, sizeof c),
                     gm_fmt_pct(rep_num(e, "fragmentation"), d, sizeof d),
                     gm_fmt_count(rep_num(e, "driver_calls"), a, sizeof a),
                     gm_fmt_time_auto(rep_num(e, "driver_ns"), t, sizeof t));
    }
    gm_sb_puts(out, "</table><p class=\"note\">Ranked by: no OOM first, then the smallest peak "
                    "reserved, then fragmentation, then time in the driver. The bar runs from "
                    "the peak of live tensors (the floor no setting goes below) to the largest "
                    "peak reserved in the table. Every row is "
                    "one simulation of the whole trace through the model of PyTorch's caching "
                    "allocator with that setting.</p>\n");
    return finish(out, nce, err);
}
