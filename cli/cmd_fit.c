/*
 * cmd_fit.c - `gmsim fit`: for each release policy, the smallest device
 * capacity at which the trace(s) run without OOM (binary search, 2 MiB
 * steps), beside the trace's peak live bytes; or, with --tenants N, how
 * many copies of the trace(s) fit on the given capacity (task density).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "fit_largest.h"
#include "policies/registry.h"
#include "reports/html.h"
#include "reports/results.h"
#include "reports/table.h"
#include "study/compare.h"
#include "study/fit.h"
#include "study/policy_list.h"
#include "study/preload.h"
#include "study/run_opts.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gmsim fit [options] TRACE [[per-trace options] TRACE...]\n"
            "\n"
            "Capacity mode (default): for each policy, the smallest device capacity (2 MiB\n"
            "steps, context overhead included) at which the trace(s) run without OOM, found\n"
            "by binary search, beside the peak live bytes no allocator can go below.\n"
            "Tenants mode (--tenants N): for each policy, how many copies of the trace(s)\n"
            "run together without OOM on the device (--capacity, or the trace's). With\n"
            "--class/--request/--limit on the traces, density: per scheduling mode (one\n"
            "job per GPU, hard caps, requests/limits and device scope with each release\n"
            "policy, default lru) the copies at which the guaranteed tenants run without\n"
            "OOM, their slowdown and the memory utilization.\n"
            "\n"
            "fit:\n"
            "  --policies LIST        policies, comma-separated NAME[:k=v,...] (default:\n"
            "                         %s)\n"
            "  --threads N            policies searched at a time (default: one per core)\n"
            "  --max-capacity SIZE    search no higher (default: 16 x the start capacity:\n"
            "                         --capacity or the trace's device)\n"
            "  --tenants N            tenants mode: the most copies, up to N, before the first\n"
            "                         count that has an OOM\n"
            "  --stagger TIME         tenants mode: copy i starts i * TIME later (default 0)\n"
            "  --largest DIM          the largest DIM (batch, seq, ...) that fits on the device,\n"
            "                         from recordings REC=VALUE at two or three values (see\n"
            "                         gmsim scale); policies: --policies (default pytorch)\n"
            "\n",
            gm_policy_default_names());
    gm_run_opts_help(f, 0);
    fprintf(f,
            "\n"
            "output:\n"
            "  --json FILE            results (schema gmsim-fit/1); - for standard output\n"
            "  --html FILE            the same as a self-contained HTML page\n"
            "  -q, --quiet            one line: the verdict and the best realizable answer (the\n"
            "                         bound when only unrealizable policies are asked)\n"
            "      --progress, --no-progress  progress on stderr after the first second\n"
            "                         (default: when stderr is a terminal and not -q)\n"
            "  -h, --help             this text\n"
            "\n"
            "exit status: 0 something realizable fits (only unrealizable policies asked, as\n"
            "--policies oracle: the bound fits); 3 nothing does (up to --max-capacity;\n"
            "tenants mode: not even one copy); 1 bad input; 2 usage\n"
            "\n"
            "examples:\n"
            "  gmsim fit traces/bert.h5\n"
            "  gmsim fit --tenants 8 --capacity 24GiB --stagger 20ms traces/bert.h5\n"
            "  gmsim fit --tenants 8 --capacity 80GiB --class guaranteed --request 6Gi a.h5 \\\n"
            "      --class burstable --request 2Gi --limit 8Gi b.h5\n"
            "  gmsim fit --largest batch run-b8.pickle=8 run-b16.pickle=16 --capacity 24GiB\n");
}

enum {
    OPT_JSON = 1000,
    OPT_HTML,
    OPT_POLICIES,
    OPT_THREADS,
    OPT_MAXCAP,
    OPT_TENANTS,
    OPT_STAGGER,
    OPT_LARGEST
};

typedef struct fit_args {
    const char *json_path, *html_path;
    char list[4096];
    int quiet, threads;
    uint64_t max_cap, stagger;
    uint32_t tenants;
    const char *largest; /* --largest DIM */
} fit_args;

static int fit_opt(void *ctx, int c, const char *arg, gm_err *err)
{
    fit_args *a = ctx;
    double v;
    switch (c) {
    case 'h':
        usage(stdout);
        return GM_CLI_DONE;
    case 'q':
        a->quiet = 1;
        return GM_OK;
    case OPT_JSON:
        a->json_path = arg;
        return GM_OK;
    case OPT_HTML:
        a->html_path = arg;
        return GM_OK;
    case OPT_POLICIES:
        return gm_policies_append(a->list, sizeof a->list, arg, err);
    case OPT_THREADS:
        return gm_cli_threads(arg, &a->threads, err);
    case OPT_MAXCAP:
        return gm_cli_size("fit", arg, "--max-capacity", &a->max_cap, err);
    case OPT_TENANTS:
        if (gm_parse_double(arg, "--tenants", 1, 1024, &v, err)) return err->code;
        if (v != (double)(uint32_t)v)
            return gm_errf(err, GM_EUSAGE, "--tenants takes a whole number, not '%s'", arg);
        a->tenants = (uint32_t)v;
        return GM_OK;
    case OPT_STAGGER:
        return gm_parse_time(arg, "--stagger", &a->stagger, err);
    case OPT_LARGEST:
        a->largest = arg;
        return GM_OK;
    default:
        return gm_errf(err, GM_EUSAGE, "unexpected option");
    }
}

int cmd_fit(int argc, char **argv)
{
    gm_run_opts o;
    gm_run_opts_init(&o);
    static const struct option extra[] = {
        {"json", required_argument, NULL, OPT_JSON},
        {"html", required_argument, NULL, OPT_HTML},
        {"policies", required_argument, NULL, OPT_POLICIES},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"max-capacity", required_argument, NULL, OPT_MAXCAP},
        {"tenants", required_argument, NULL, OPT_TENANTS},
        {"stagger", required_argument, NULL, OPT_STAGGER},
        {"largest", required_argument, NULL, OPT_LARGEST},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    fit_args args = {0};
    gm_err err = {0};
    int rc = gm_cli_parse_sim(&o, argc, argv, extra, fit_opt, &args, &err);
    if (rc != GM_OK) {
        gm_run_opts_free(&o); /* --help, or a usage error: exit 2 */
        return gm_cli_parse_sim_exit("fit", rc, err.msg);
    }
    const char *json_path = args.json_path, *list = args.list;
    int quiet = args.quiet, threads = args.threads;
    uint64_t max_cap = args.max_cap, stagger = args.stagger;
    uint32_t tenants = args.tenants;
    if (o.policy) {
        gm_run_opts_free(&o);
        return gm_cmd_usage("fit",
                            "--policy picks one policy (gmsim run); use --policies LIST here");
    }
    if (args.largest) { /* its own mode: fit_largest.c */
        if (tenants || max_cap) {
            gm_run_opts_free(&o);
            return gm_cmd_usage("fit", "--largest does not combine with --tenants or "
                                       "--max-capacity");
        }
        rc = gm_fit_largest_cmd(&o, args.largest, list, json_path, quiet);
        gm_run_opts_free(&o);
        return rc;
    }
    if (o.n_tenants == 0) {
        gm_run_opts_free(&o);
        return gm_cmd_usage("fit", "no trace given; e.g. gmsim fit traces/bert.h5");
    }
    if (stagger && !tenants) {
        gm_run_opts_free(&o);
        return gm_cmd_usage("fit", "--stagger only applies with --tenants N");
    }
    const char *html_path = args.html_path;
    if (gm_cli_outputs_not_trace(json_path, html_path, &o, &err)) {
        gm_run_opts_free(&o);
        return gm_cmd_fail("fit", GM_EUSAGE, err.msg);
    }
    gm_sim_config cfg;
    gm_run_opts_config(&o, &cfg);
    char **specs = NULL;
    size_t n = 0;
    if ((rc = gm_policy_list_split(list, &specs, &n, &err)) != GM_OK) {
        gm_run_opts_free(&o);
        return gm_cmd_fail("fit", rc, err.msg);
    }
    gm_fit *f = NULL;
    gm_cli_progress_begin("fit", quiet, &cfg, 0);
    gm_preload pre; /* every run replays the traces from memory (study/preload.h) */
    if (gm_preload_config(&cfg, &pre, GM_PRELOAD_MAX_EVENTS, GM_PRELOAD_MAX_PACKED_BYTES, &err) !=
        GM_OK) {
        gm_run_opts_free(&o);
        return gm_cmd_fail("fit", GM_ENOMEM, err.msg);
    }
    static char lru[] = "lru", *dflt[] = {lru};
    if (tenants && gm_fit_wants_density(&cfg)) /* classes: by scheduling mode */
        rc = gm_fit_density(&cfg, list[0] ? specs : dflt, list[0] ? n : 1, threads, tenants,
                            stagger, &f, &err);
    else if (tenants)
        rc = gm_fit_tenants(&cfg, specs, n, threads, tenants, stagger, &f, &err);
    else
        rc = gm_fit_capacity(&cfg, specs, n, threads, max_cap, &f, &err);
    FILE *text = gm_cli_text_out(json_path, html_path);
    if (rc == GM_OK && !quiet) gm_table_fit(text, &cfg, f);
    int fits = rc == GM_OK && gm_fit_verdict(quiet ? text : NULL, f);
    if (rc == GM_OK && (json_path || html_path)) {
        json_t *j = gm_fit_json(&cfg, f);
        rc = j ? GM_OK : gm_errf(&err, GM_ENOMEM, "out of memory");
        if (rc == GM_OK && json_path) rc = gm_json_write(j, json_path, &err);
        if (rc == GM_OK && html_path) rc = gm_html_write_file(j, html_path, &err);
        json_decref(j);
    }
    if (rc == GM_OK && isatty(2))
        fprintf(stderr, "gmsim fit: %d thread%s, %.2f s\n", f->threads, f->threads == 1 ? "" : "s",
                f->wall_s);
    gm_fit_free(f);
    free(specs);
    gm_preload_free(&pre);
    gm_run_opts_free(&o);
    if (rc != GM_OK) return gm_cmd_fail("fit", rc, err.msg);
    return fits ? 0 : 3;
}
