/*
 * html_density.c - the page of `gmsim fit --tenants ... --html` in density
 * mode (a gmsim-fit/1 document whose mode is "density": one row per
 * scheduling mode; study/fit.h, gm_fit_density). Like the other search
 * pages it is made from the saved JSON only (`gmsim report fit.json` draws
 * the same page), self-contained, every string escaped, under the same CSP
 * (html.c's rep_page_open / rep_page_close).
 *
 * The page: the answer in one line (the densest mode and its jobs per GPU),
 * then the table every figure comes from, a bar per row for jobs per GPU.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "html_int.h"

static void esc(gm_strbuf *b, const char *s)
{
    gm_sb_esc(b, s ? s : "\xe2\x80\x94");
}

static void pct(gm_strbuf *b, double v)
{
    if (isnan(v))
        gm_sb_puts(b, "\xe2\x80\x94");
    else
        gm_sb_printf(b, "%.1f %%", 100.0 * v);
}

int rep_density_page(json_t *fit, gm_strbuf *out, gm_err *err)
{
    json_t *res = json_object_get(fit, "results");
    json_t *traces = json_object_get(json_object_get(fit, "inputs"), "traces");
    if (!json_is_array(res) || !json_array_size(res))
        return gm_errf(err, GM_EINVAL, "cannot make a report: a gmsim-fit/1 without results");
    char nce[40] = {0}, cap[48];
    rep_page_open(out, "gmsim fit: how many jobs share one GPU", nce, sizeof nce);
    gm_sb_puts(out, "<header><h1>How many jobs share one GPU: ");
    rep_traces_line(out, traces);
    double capacity = rep_num(fit, "inputs.capacity_bytes");
    gm_sb_printf(out, "</h1><p class=\"sub\">a %s device \xc2\xb7 ",
                 isnan(capacity) ? "?" : gm_fmt_bytes_auto(capacity, cap, sizeof cap));
    rep_fit_made(out, fit);

    const char *who = rep_str(fit, "protected");
    if (!who) who = "guaranteed tenants";
    double best_jobs = -1, most = 0;
    json_t *best = NULL, *e;
    size_t i;
    json_array_foreach(res, i, e)
    {
        double jobs = rep_num(e, "jobs");
        if (!isnan(jobs) && jobs > most) most = jobs;
        if (!isnan(jobs) && jobs > 0 && jobs > best_jobs) best_jobs = jobs, best = e;
    }
    gm_sb_printf(out, "<div class=\"verdict%s\"><p>", best ? "" : " warn");
    if (best) {
        gm_sb_printf(out, "<b>The densest mode: ");
        esc(out, rep_str(best, "label"));
        gm_sb_printf(out, ", %.0f job%s per GPU</b>; ", best_jobs, best_jobs == 1 ? "" : "s");
        esc(out, who);
        gm_sb_puts(out, " 0 OOMs, slowdown ");
        pct(out, rep_num(best, "slowdown"));
        gm_sb_puts(out, ".</p><p>");
        json_array_foreach(res, i, e)
        {
            if (i) gm_sb_puts(out, "; ");
            esc(out, rep_str(e, "label"));
            gm_sb_printf(out, ": %.0f per GPU", rep_num(e, "jobs"));
        }
        gm_sb_puts(out, ".");
    } else {
        gm_sb_puts(out, "<b>Not one job runs without OOM in any mode.</b>");
    }
    gm_sb_puts(out, "</p></div>\n<h2>Per scheduling mode</h2><table><tr><th class=\"l\">mode"
                    "</th><th>copies of the mix</th><th>jobs</th><th>slowdown</th>"
                    "<th>utilization</th><th>other OOMs</th><th class=\"l\">at one more copy"
                    "</th></tr>");
    json_array_foreach(res, i, e)
    {
        double jobs = rep_num(e, "jobs");
        const char *mode = rep_str(e, "mode");
        int single = mode && !strcmp(mode, "one-per-gpu");
        gm_sb_printf(out, "<tr%s><td class=\"l pol\">", e == best ? " class=\"win\"" : "");
        esc(out, rep_str(e, "label"));
        gm_sb_puts(out, "</td><td>");
        if (single)
            gm_sb_puts(out, "\xe2\x80\x94");
        else
            gm_sb_printf(out, "%.0f", rep_num(e, "copies_fit"));
        gm_sb_printf(out, "</td><td>%.0f", jobs);
        if (most > 0 && !isnan(jobs))
            gm_sb_printf(out, "<span class=\"bar\"><i style=\"width:%.1f%%\"></i></span>",
                         100.0 * fmax(0.02, jobs / most));
        gm_sb_puts(out, "</td><td>");
        if (jobs > 0) pct(out, rep_num(e, "slowdown"));
        gm_sb_puts(out, "</td><td>");
        if (jobs > 0) pct(out, rep_num(e, "utilization"));
        gm_sb_printf(out, "</td><td>%.0f</td><td class=\"l\">", rep_num(e, "other_ooms"));
        const char *more = rep_str(e, "at_one_more_copy");
        double fitc = rep_num(e, "copies_fit"), tried = rep_num(e, "copies_tried");
        if (!single && (!more || !*more) && fitc == tried)
            gm_sb_printf(out, "(not tried: --tenants %.0f reached)",
                         rep_num(fit, "inputs.max_copies"));
        else
            esc(out, more && *more ? more : "");
        gm_sb_puts(out, "</td></tr>");
    }
    gm_sb_puts(out, "</table><p class=\"note\">A copy of the mix fits when the ");
    esc(out, who);
    gm_sb_puts(out, " all complete without OOM. <b>jobs</b>: tenants on the device at that many "
                    "copies; <b>slowdown</b>: their modelled driver time (and host tier "
                    "transfers, with one) over their time on the device; <b>utilization</b>: "
                    "time-weighted allocated bytes over the device; "
                    "<b>other OOMs</b>: OOMs of the tenants that do not decide (burstable, "
                    "opportunistic). One job per GPU and hard caps run under the policy pytorch; "
                    "requests/limits and device scope under the release policy named.</p>\n");
    rep_page_close(out, nce);
    if (out->failed) return gm_errf(err, GM_ENOMEM, "out of host memory while writing the report");
    return GM_OK;
}
