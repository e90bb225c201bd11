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

static void traces_line(gm_strbuf *b, json_t *traces)
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

int rep_fit_page(json_t *fit, gm_strbuf *out, gm_err *err)
{
    json_t *res = json_object_get(fit, "results");
    json_t *traces = json_object_get(json_object_get(fit, "inputs"), "traces");
    if (!json_is_array(res) || !json_array_size(res))
        return gm_errf(err, GM_EINVAL, "cannot make a report: a gmsim-fit/1 without results");
    char nce[40] = {0}, a[48], c[48], d[48];
    rep_page_open(out, "gmsim fit: the smallest device", nce, sizeof nce);
    const char *mode = rep_str(fit, "mode");
    int tenants = mode && !strcmp(mode, "tenants");
    gm_sb_puts(out, "<header><h1>");
    gm_sb_puts(out, tenants ? "How many copies fit: " : "The smallest device for ");
    traces_line(out, traces);
    gm_sb_puts(out, "</h1><p class=\"sub\">");
    esc(out, rep_str(fit, "inputs.allocator"));
    gm_sb_puts(out, " allocator \xc2\xb7 gmsim ");
    esc(out, rep_str(fit, "gmsim_version"));
    gm_sb_puts(out, " \xc2\xb7 ");
    esc(out, rep_str(fit, "created_utc"));
    gm_sb_puts(out, "</p></header>\n");

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
    gm_sb_puts(out, "</div>\n<h2>Per policy</h2><table><tr><th class=\"l\">policy</th>"
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
        gm_sb_printf(out, "<tr%s><td class=\"l pol\">",
                     win    ? " class=\"win\""
                     : real ? ""
                            : " class=\"bound\"");
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

int rep_tune_page(json_t *tune, gm_strbuf *out, gm_err *err)
{
    json_t *set = json_object_get(tune, "settings");
    if (!json_is_array(set) || !json_array_size(set))
        return gm_errf(err, GM_EINVAL, "cannot make a report: a gmsim-tune/1 without settings");
    char nce[40] = {0}, a[48], c[48], d[48];
    rep_page_open(out, "gmsim tune: PYTORCH_CUDA_ALLOC_CONF", nce, sizeof nce);
    gm_sb_puts(out, "<header><h1>Allocator settings for ");
    traces_line(out, json_object_get(tune, "traces"));
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
    gm_sb_puts(out, "</div>\n<h2>Every setting tried, ranked</h2><table><tr><th>rank</th>"
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
