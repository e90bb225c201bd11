/*
 * cmd_validate.c - `gmsim validate PREDICTED MEASURED`: the simulator's
 * prediction (`gmsim run --json`) beside what `gmreplay -o` measured on a
 * GPU, per metric, with the relative error and a verdict on the checks that
 * have a tolerance (sim/validate.h). Exit 0 when every check passes, 1 when
 * one fails or the files cannot be compared, 2 on misuse.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "reports/results.h"
#include "reports/validate.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gmsim validate [options] PREDICTED.json MEASURED.json\n"
            "\n"
            "Compare a prediction ('gmsim run --json') with a measurement on a real GPU\n"
            "('gmreplay -o') of the same traces and settings. Checks: identical inputs,\n"
            "exactly the same OOM events, peak reserved within %g %%, and a replay that ran\n"
            "to the end; fragmentation, utilization, device used and driver calls and time\n"
            "are reported beside them with their relative error.\n"
            "\n"
            "options:\n"
            "  --html FILE   also write the comparison as a self-contained HTML page\n"
            "  --json FILE   also write it as JSON (schema %s)\n"
            "  -q, --quiet   no table; the exit code says pass (0) or fail (1)\n"
            "  -h, --help    this text\n"
            "\n"
            "example: gmsim validate predicted.json measured.json --html validation.html\n",
            GM_VALIDATE_PEAK_RESERVED_TOL * 100, GM_VALIDATE_SCHEMA);
}

static void rel_text(char *buf, size_t n, const gm_vrow *r)
{
    if (isnan(r->rel_err))
        snprintf(buf, n, "%s", isnan(r->pred) ? "" : "n/a");
    else
        snprintf(buf, n, "%+.2f %%", r->rel_err * 100.0);
}

static const char *verdict(const gm_vrow *r)
{
    return !r->check ? "" : r->pass ? "pass" : "FAIL";
}

static void summary(FILE *f, const gm_validation *v)
{
    if (v->n_failed == 0) {
        fprintf(f, "validate: PASS (%d of %d checks)\n", v->n_checks, v->n_checks);
        return;
    }
    fprintf(f, "validate: FAIL (%d of %d checks failed:", v->n_failed, v->n_checks);
    for (size_t i = 0; i < v->n; i++)
        if (v->rows[i].check && !v->rows[i].pass) fprintf(f, " %s;", v->rows[i].metric);
    fprintf(f, ")\n");
}

static void print_table(const char *pp, const char *mp, const gm_validation *v)
{
    printf("gmsim validate: %s (predicted) vs %s (measured, backend %s)\n\n", pp, mp, v->backend);
    printf("  %-32s %-24s %-24s %10s %6s %6s\n", "metric", "predicted", "measured", "rel. err",
           "tol.", "result");
    for (size_t i = 0; i < v->n; i++) {
        const gm_vrow *r = &v->rows[i];
        char rel[32];
        rel_text(rel, sizeof rel, r);
        printf("  %-32s %-24s %-24s %10s %6s %6s\n", r->metric, r->predicted, r->measured, rel,
               r->tolerance, verdict(r));
        if (r->note[0] && (r->check || !strcmp(r->metric, "OOM events")))
            printf("  %-32s   %s\n", "", r->note);
    }
    printf("\n");
    if (strcmp(v->backend, "cuda") != 0)
        printf("note: the measurement's backend is '%s', not a GPU\n", v->backend);
    summary(stdout, v);
}

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
static int write_html(const char *path, const char *pp, const char *mp, const gm_validation *v,
                      gm_err *err)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return gm_errf(err, GM_EIO,
                       "--html %s: cannot write (directory missing or not "
                       "writable?)",
                       path);
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
        rel_text(rel, sizeof rel, r);
        fprintf(f, "<tr><td>");
        html_escape(f, r->metric);
        fprintf(f, "</td><td class=\"n\">");
        html_escape(f, r->predicted);
        fprintf(f, "</td><td class=\"n\">");
        html_escape(f, r->measured);
        fprintf(f,
                "</td><td class=\"n\">%s</td><td>%s</td><td class=\"%s\">%s</td>"
                "<td class=\"note\">",
                rel, r->tolerance, r->check ? (r->pass ? "pass" : "fail") : "", verdict(r));
        html_escape(f, r->note);
        fprintf(f, "</td></tr>\n");
    }
    fprintf(f, "</table>\n</section>\n</body></html>\n");
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        remove(tmp);
        return gm_errf(err, GM_EIO, "--html %s: cannot write", path);
    }
    return GM_OK;
}

enum { OPT_HTML = 1000, OPT_JSON };

typedef struct validate_args {
    const char *html, *json, *files[2];
    int quiet, nfiles;
} validate_args;

static int validate_opt(void *ctx, int c, const char *arg, gm_err *err)
{
    validate_args *a = ctx;
    switch (c) {
    case 1:
        if (a->nfiles == 2)
            return gm_errf(err, GM_EUSAGE,
                           "too many files ('%s'); give PREDICTED.json and MEASURED.json", arg);
        a->files[a->nfiles++] = arg;
        return GM_OK;
    case 'q':
        a->quiet = 1;
        return GM_OK;
    case OPT_HTML:
        a->html = arg;
        return GM_OK;
    case OPT_JSON:
        a->json = arg;
        return GM_OK;
    case 'h':
        usage(stdout);
        return GM_CLI_DONE;
    default:
        return gm_errf(err, GM_EUSAGE, "unexpected option");
    }
}

int cmd_validate(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"html", required_argument, NULL, OPT_HTML},
        {"json", required_argument, NULL, OPT_JSON},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    validate_args a = {0};
    gm_err err = {0};
    int rc = gm_cli_parse(argc, argv, "qh", longopts, validate_opt, &a, &err);
    if (rc == GM_OK && a.nfiles != 2)
        rc = gm_errf(&err, GM_EUSAGE,
                     "give PREDICTED.json and MEASURED.json, e.g. gmsim validate "
                     "predicted.json measured.json");
    if (rc != GM_OK) return rc == GM_CLI_DONE ? 0 : gm_cmd_fail("validate", GM_EUSAGE, err.msg);
    const char *html = a.html, *json = a.json, *const *files = a.files;
    int quiet = a.quiet;
    gm_validation v;
    rc = gm_validate_files(files[0], files[1], &v, &err);
    if (rc) return gm_cmd_fail("validate", rc, err.msg);
    if (!quiet) print_table(files[0], files[1], &v);
    if (json) {
        json_t *j = gm_validation_json(&v);
        rc = gm_json_write(j, json, &err);
        json_decref(j);
    }
    if (!rc && html) rc = write_html(html, files[0], files[1], &v, &err);
    int failed = v.n_failed;
    if (!rc && quiet && failed) summary(stderr, &v);
    gm_validation_free(&v);
    if (rc) return gm_cmd_fail("validate", rc, err.msg);
    return failed ? 1 : 0;
}
