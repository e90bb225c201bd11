/* validate_html.c - `gmsim validate --html` (table.h). */
#include "table.h"

#include <stdio.h>

#include "base/err.h"
#include "base/outfile.h"

/* The text tables' strings need only these four; the page is not the full
 * report (html.c) and keeps its own small escaper. */
static void html_escape(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '<')
            fputs("&lt;", f);
        else if (*s == '>')
            fputs("&gt;", f);
        else if (*s == '&')
            fputs("&amp;", f);
        else if (*s == '"')
            fputs("&quot;", f);
        else
            fputc(*s, f);
    }
}

/* A self-contained page: one table, pass/fail coloured. */
int gm_validate_html_write(const char *path, const char *pp, const char *mp, const gm_validation *v,
                           gm_err *err)
{
    gm_outfile o;
    if (gm_out_open(&o, path, err)) return err->code;
    FILE *f = o.f;
    fprintf(f, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">\n"
               "<title>gmsim validate</title>\n<style>\n"
               "body{font-family:system-ui,sans-serif;margin:2em;color:#222}\n"
               "table{border-collapse:collapse}td,th{padding:.3em .8em;border-bottom:1px "
               "solid #ddd;text-align:left}\n"
               "td.n{text-align:right;font-variant-numeric:tabular-nums}\n"
               ".pass{color:#1a7f37;font-weight:600}.fail{color:#cf222e;font-weight:700}\n"
               ".note{color:#666;font-size:.9em}\n</style></head><body>\n");
    fprintf(f, "<section id=\"validation\">\n<h2>Prediction vs measurement: ");
    fprintf(f, "<span class=\"%s\">%s</span></h2>\n", v->n_failed ? "fail" : "pass",
            v->n_failed ? "FAIL" : "PASS");
    fprintf(f, "<p>predicted: <code>");
    html_escape(f, pp);
    fprintf(f, "</code><br>measured: <code>");
    html_escape(f, mp);
    fprintf(f, "</code> (backend ");
    html_escape(f, v->backend);
    fprintf(f,
            ")<br>%d of %d checks passed; peak reserved tolerance %g %%, OOM events "
            "exact.</p>\n",
            v->n_checks - v->n_failed, v->n_checks, GM_VALIDATE_PEAK_RESERVED_TOL * 100);
    fprintf(f, "<table>\n<tr><th>metric</th><th>predicted</th><th>measured</th><th>relative "
               "error</th><th>tolerance</th><th>result</th><th>note</th></tr>\n");
    for (size_t i = 0; i < v->n; i++) {
        const gm_vrow *r = &v->rows[i];
        char rel[32];
        gm_vrow_rel_text(rel, sizeof rel, r);
        fprintf(f, "<tr><td>");
        html_escape(f, r->metric);
        fprintf(f, "</td><td class=\"n\">");
        html_escape(f, r->predicted);
        fprintf(f, "</td><td class=\"n\">");
        html_escape(f, r->measured);
        fprintf(f,
                "</td><td class=\"n\">%s</td><td>%s</td><td class=\"%s\">%s</td>"
                "<td class=\"note\">",
                rel, r->tolerance, r->check ? (r->pass ? "pass" : "fail") : "", gm_vrow_verdict(r));
        html_escape(f, r->note);
        fprintf(f, "</td></tr>\n");
    }
    fprintf(f, "</table>\n</section>\n</body></html>\n");
    return gm_out_commit(&o, err);
}
