/*
 * cmd_info.c - `gmsim info TRACE [--json FILE|-]`: one streaming pass over a trace
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
#include "study/leak.h"
#include "study/site_top.h"
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
    fprintf(f,
            "usage: gmsim info TRACE [--json FILE|-] [--iteration-marker NAME] [--capacity SIZE]\n"
            "                  [--top-sites N [--profiler]]\n"
            "\n"
            "Summarizes a trace in one streaming pass: events by op, time span, allocations,\n"
            "peak live requested bytes (including /initial_state blocks), bytes allocated,\n"
            "a size histogram, bytes by category and phase, markers and the metadata;\n"
            "for a trace with call sites (an imported snapshot), the 10 sites holding the\n"
            "most bytes at the peak.\n"
            "Then the iterations (from iteration markers, a repeated NVTX range, or the\n"
            "period of live bytes): live bytes at each iteration boundary, and whether\n"
            "they grow (a leak: bytes per iteration, fit quality, when the card runs out).\n"
            "\n"
            "options:\n"
            "      --json FILE write the summary as one JSON object to FILE (- for stdout)\n"
            "      --iteration-marker NAME  iterations start at the markers named NAME\n"
            "                  (or starting with it: \"step\" matches \"step 3\")\n"
            "      --capacity SIZE  card for the run-out estimate (default: the memory the\n"
            "                  trace records for its process or device)\n"
            "      --top-sites N  the N call sites by bytes allocated and by live bytes at the\n"
            "                  trace's peak of live bytes (no allocator: `gmsim run --top-sites`\n"
            "                  takes the simulated peak); in --json as \"top_sites\"\n"
            "      --profiler  with --top-sites (default 10): PyTorch's profiler memory table\n"
            "                  (Name, CUDA Mem, Self CUDA Mem, # of Calls), requested bytes\n"
            "  -h, --help      show this help\n");
}

static const struct option info_options[] = {
    {"json", required_argument, NULL, 'j'},
    {"iteration-marker", required_argument, NULL, 'm'},
    {"capacity", required_argument, NULL, 'c'},
    {"top-sites", required_argument, NULL, 't'},
    {"profiler", no_argument, NULL, 'p'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

typedef struct info_args {
    const char *path;
    const char *json; /* --json FILE, "-" for stdout */
    gm_leak_opts leak;
    size_t top_sites; /* --top-sites N; 0: not asked */
    int profiler;
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
        a->json = arg;
        return GM_OK;
    case 'm':
        if (!*arg || strlen(arg) >= GM_MARKER_NAME_LEN)
            return gm_errf(err, GM_EUSAGE, "--iteration-marker needs a name of 1 to %d bytes",
                           GM_MARKER_NAME_LEN - 1);
        a->leak.marker = arg;
        return GM_OK;
    case 'c':
        return gm_parse_size(arg, "--capacity", &a->leak.capacity_bytes, err) ? GM_EUSAGE : GM_OK;
    case 't':
        return gm_cli_top_sites(arg, &a->top_sites, err);
    case 'p':
        a->profiler = 1;
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
    if (!a.path)
        return gm_cmd_usage("info", "missing TRACE; usage: gmsim info TRACE [--json FILE|-]");
    gm_trace_reader *r = NULL;
    gm_trace_scan s = {0};
    const char *trace; /* a snapshot is imported for this */
    rc = gm_cli_input_trace(a.path, &trace, &err);
    if (rc == GM_OK) rc = gm_trace_open(trace, &r, &err);
    gm_leak_report lk = {0};
    if (rc == GM_OK)
        rc = gm_leak_scan_trace(r, &a.leak, &s, &lk, NULL, NULL, &err); /* one read of both */
    if (a.profiler && !a.top_sites) a.top_sites = 10;
    gm_top_sites ts = {0};
    if (rc == GM_OK && a.top_sites)
        rc = gm_top_sites_trace(r, trace != a.path ? a.path : NULL, &ts, &err);
    if (rc == GM_OK) {
        warn_anomalies(&s, a.path);
        /* the table as the other commands print it: on stdout, or on
         * stderr when stdout is the JSON document (--json -) */
        FILE *tab = a.json && !strcmp(a.json, "-") ? stderr : stdout;
        gm_table_info(tab, &s, r, trace != a.path ? a.path : NULL);
        gm_table_leak(tab, &lk);
        if (a.top_sites) gm_table_top_sites(tab, &ts, a.top_sites, a.profiler);
        if (a.json) {
            json_t *j = gm_trace_info_json(&s, r, trace != a.path ? a.path : NULL);
            if (j) json_object_set_new(j, "iterations", gm_leak_json(&lk));
            if (j && a.top_sites)
                json_object_set_new(j, "top_sites", gm_top_sites_json(&ts, a.top_sites));
            rc = j ? gm_json_write(j, a.json, &err) : gm_errf(&err, GM_ENOMEM, "out of memory");
            json_decref(j);
        }
    }
    if (rc == GM_OK && fflush(stdout) != 0) rc = gm_errf(&err, GM_EIO, "cannot write to stdout");
    if (r) gm_trace_close(r);
    gm_trace_scan_free(&s);
    gm_leak_report_free(&lk);
    gm_top_sites_free(&ts);
    return rc == GM_OK ? 0 : gm_cmd_fail("info", rc, err.msg);
}
