/*
 * cmd_info.c - `gmsim info TRACE [--json]`: one streaming pass over a trace
 * (traces/trace_scan.c) and a summary of what is in it.
 *
 * info describes, it does not judge: a free of an unknown address or an
 * alloc of an address already live is counted, reported and skipped (the
 * simulator, not info, refuses such traces). Errors the reader reports (bad
 * file, invalid event) end the command with exit code 1.
 */
#include "cli.h"
#include "commands.h"
#include "base/units.h"
#include "reports/results.h"
#include "reports/table.h"
#include "traces/trace.h"
#include "traces/trace_scan.h"

#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void info_usage(FILE *f)
{
    fprintf(f, "usage: gmsim info TRACE [--json]\n"
               "\n"
               "Summarizes a trace in one streaming pass: events by op, time span, allocations,\n"
               "peak live requested bytes (including /initial_state blocks), bytes allocated,\n"
               "a size histogram, bytes by category and phase, markers and the metadata;\n"
               "for a trace with call sites (an imported snapshot), the 10 sites holding the\n"
               "most bytes at the peak.\n"
               "\n"
               "options:\n"
               "      --json      print the summary as one JSON object\n"
               "  -h, --help      show this help\n");
}

static const struct option info_options[] = {
    {"json", no_argument, NULL, 'j'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

typedef struct info_args {
    const char *path;
    int json;
} info_args;

static int info_opt(void *ctx, int c, const char *arg, gm_err *err)
{
    info_args *a = ctx;
    switch (c) {
    case 1:
        if (a->path) return gm_errf(err, GM_EUSAGE, "one trace at a time; '%s' is extra", arg);
        a->path = arg;
        return GM_OK;
    case 'j':
        a->json = 1;
        return GM_OK;
    case 'h':
        info_usage(stdout);
        return GM_CLI_DONE;
    default:
        return gm_errf(err, GM_EUSAGE, "unexpected option");
    }
}

static void warn_anomalies(const gm_trace_scan *s, const char *path)
{
    if (s->unknown_frees)
        fprintf(stderr,
                "gmsim info: warning: %s: %" PRIu64 " frees of unknown addresses (first at "
                "event %" PRIu64 ", addr 0x%" PRIx64 "); they were skipped\n",
                path, s->unknown_frees, s->first_unknown_index, s->first_unknown_addr);
    if (s->live_reallocs)
        fprintf(stderr,
                "gmsim info: warning: %s: %" PRIu64 " allocations of an address already live "
                "(first at event %" PRIu64 "); each replaced the earlier one\n",
                path, s->live_reallocs, s->first_realloc_index);
}

int cmd_info(int argc, char **argv)
{
    info_args a = {0};
    gm_err err;
    int rc = gm_cli_parse(argc, argv, "h", info_options, info_opt, &a, &err);
    if (rc != GM_OK) return rc == GM_CLI_DONE ? 0 : gm_cmd_fail("info", GM_EUSAGE, err.msg);
    if (!a.path) return gm_cmd_usage("info", "missing TRACE; usage: gmsim info TRACE [--json]");
    gm_trace_reader *r = NULL;
    gm_trace_scan s = {0};
    const char *trace; /* a snapshot is imported for this */
    rc = gm_cli_input_trace(a.path, &trace, &err);
    if (rc == GM_OK) rc = gm_trace_open(trace, &r, &err);
    if (rc == GM_OK) rc = gm_trace_scan_run(r, &s, &err);
    if (rc == GM_OK) {
        warn_anomalies(&s, a.path);
        if (a.json) {
            json_t *j = gm_trace_info_json(&s, r, trace != a.path ? a.path : NULL);
            if (!j || json_dumpf(j, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER) != 0)
                rc = gm_errf(&err, GM_EIO, "cannot write the JSON summary to stdout");
            else
                printf("\n");
            json_decref(j);
        } else {
            gm_table_info(stdout, &s, r, trace != a.path ? a.path : NULL);
        }
    }
    if (rc == GM_OK && fflush(stdout) != 0) rc = gm_errf(&err, GM_EIO, "cannot write to stdout");
    if (r) gm_trace_close(r);
    gm_trace_scan_free(&s);
    return rc == GM_OK ? 0 : gm_cmd_fail("info", rc, err.msg);
}
