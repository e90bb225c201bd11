/*
 * cmd_validate.c - `gmsim validate PREDICTED MEASURED`: the simulator's
 * prediction (`gmsim run --json`) beside what `gmreplay -o` measured on a
 * GPU, per metric, with the relative error and a verdict on the checks that
 * have a tolerance (reports/validate.h). Exit 0 when every check passes, 1 when
 * one fails or the files cannot be compared, 2 on misuse.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "reports/results.h"
#include "reports/table.h"
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
    if (gm_cli_output_not_input("--json", json, files, 2, &err) ||
        gm_cli_output_not_input("--html", html, files, 2, &err))
        return gm_cmd_fail("validate", GM_EUSAGE, err.msg);
    gm_validation v;
    rc = gm_validate_files(files[0], files[1], &v, &err);
    if (rc) return gm_cmd_fail("validate", rc, err.msg);
    if (!quiet) gm_table_validate(stdout, files[0], files[1], &v);
    if (json) {
        json_t *j = gm_validation_json(&v);
        rc = gm_json_write(j, json, &err);
        json_decref(j);
    }
    if (!rc && html) rc = gm_validate_html_write(html, files[0], files[1], &v, &err);
    int failed = v.n_failed;
    if (!rc && quiet && failed) gm_table_validate_summary(stderr, &v);
    gm_validation_free(&v);
    if (rc) return gm_cmd_fail("validate", rc, err.msg);
    return failed ? 1 : 0;
}
