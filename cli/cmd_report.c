/*
 * cmd_report.c - `gmsim report RESULTS.json... -o REPORT.html`: the HTML
 * report from saved JSON results, so a report can be made later or on
 * another machine than the run.
 *
 * One file (gmsim-result/1 from `run --json`, or gmsim-compare/1 from
 * `compare --json`) is rendered as it is. Several gmsim-result/1 files are
 * put side by side as one comparison (e.g. the same policy under two
 * allocator settings, or two capacities), ranked like `compare` ranks.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "reports/html.h"
#include "reports/results.h"
#include "reports/trace_stats.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gmsim report [options] RESULTS.json [RESULTS.json...] -o REPORT.html\n"
            "\n"
            "Write a self-contained HTML report (inline SVG charts, no network) from saved\n"
            "results of 'gmsim run --json' or 'gmsim compare --json'. Several run results\n"
            "are compared side by side, ranked by OOMs, fragmentation, utilization and\n"
            "driver time.\n"
            "\n"
            "options:\n"
            "  -o, --output FILE      the HTML file to write (required)\n"
            "  --trace-stats          read the traces the results name (where readable) to\n"
            "                         add the allocation-size histogram and categories\n"
            "  -h, --help             this text\n"
            "\n"
            "example: gmsim run --json r.json traces/bert.h5 && gmsim report r.json -o r.html\n");
}

static json_t *load(const char *path, gm_err *err)
{
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    if (!j) gm_errf(err, GM_EINVAL, "%s:%d: cannot read the results: %s", path, je.line, je.text);
    if (j && gm_results_check(j, path, err)) {
        json_decref(j);
        return NULL;
    }
    return j;
}

/* Several run results -> one gmsim-compare/1 document. */
static json_t *combine(const char **paths, int n, gm_err *err)
{
    json_t *list = json_array();
    for (int i = 0; i < n; i++) {
        json_t *j = load(paths[i], err);
        if (!j) {
            json_decref(list);
            return NULL;
        }
        const char *s = json_string_value(json_object_get(j, "schema"));
        if (!s || strcmp(s, GM_RESULT_SCHEMA)) {
            gm_errf(err, GM_EINVAL,
                    "%s: schema '%s'; only %s files (from 'gmsim run --json') "
                    "can be combined",
                    paths[i], s ? s : "missing", GM_RESULT_SCHEMA);
            json_decref(j);
            json_decref(list);
            return NULL;
        }
        json_array_append_new(list, j);
    }
    return json_pack("{s:s,s:s,s:o}", "schema", GM_COMPARE_SCHEMA, "command", "report", "results",
                     list);
}

typedef struct report_args {
    const char *out;
    int stats;
    const char **files; /* the operands, in order (argc entries at most) */
    int n;
} report_args;

static int report_opt(void *ctx, int c, const char *arg, gm_err *err)
{
    report_args *a = ctx;
    switch (c) {
    case 1:
        a->files[a->n++] = arg;
        return GM_OK;
    case 'o':
        a->out = arg;
        return GM_OK;
    case 1000:
        a->stats = 1;
        return GM_OK;
    case 'h':
        usage(stdout);
        return GM_CLI_DONE;
    default:
        return gm_errf(err, GM_EUSAGE, "unexpected option");
    }
}

int cmd_report(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"output", required_argument, NULL, 'o'},
        {"trace-stats", no_argument, NULL, 1000},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    report_args a = {.files = calloc((size_t)argc, sizeof(const char *))};
    if (!a.files) return gm_cmd_fail("report", GM_ENOMEM, "out of host memory");
    gm_err err = {0};
    int rc = gm_cli_parse(argc, argv, "o:h", longopts, report_opt, &a, &err);
    if (rc == GM_OK && (a.n < 1 || !a.out))
        rc = gm_errf(&err, GM_EUSAGE, "%s; e.g. gmsim report r.json -o r.html",
                     a.n < 1 ? "no results file given" : "no output file given (-o FILE)");
    if (rc == GM_OK) rc = gm_cli_output_not_input("-o", a.out, a.files, (size_t)a.n, &err);
    if (rc != GM_OK) {
        free(a.files);
        return rc == GM_CLI_DONE ? 0 : gm_cmd_fail("report", GM_EUSAGE, err.msg);
    }
    int n = a.n, stats = a.stats;
    const char *out = a.out;
    json_t *j = n == 1 ? load(a.files[0], &err) : combine(a.files, n, &err);
    free(a.files);
    if (!j) return gm_cmd_fail("report", err.code, err.msg);
    if (stats && gm_trace_stats_attach(j, NULL, &err) != GM_OK)
        fprintf(stderr, "gmsim report: warning: no trace statistics: %s\n", err.msg);
    rc = gm_html_write_file(j, out, &err);
    json_decref(j);
    if (rc != GM_OK) return gm_cmd_fail("report", rc, err.msg);
    return 0;
}
