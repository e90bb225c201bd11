/*
 * cmd_run.c - `gmsim run`: simulate trace(s) under one allocator and one
 * release policy, print a summary table, optionally write JSON.
 *
 * Per-trace options (--offset, --repeat, --quota) apply to every trace that
 * follows them on the command line, until given again:
 *   gmsim run a.h5 --offset 2s b.h5 c.h5   (b and c start at 2 s)
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "reports/html.h"
#include "reports/segmap.h"
#include "reports/results.h"
#include "reports/table.h"
#include "sim/engine.h"
#include "study/run_opts.h"
#include "study/explain.h"
#include "study/simulate.h"
#include "study/site_top.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: gmsim run [options] TRACE [[per-trace options] TRACE...]\n"
               "\n"
               "Replay allocation trace(s) on a simulated GPU and report peak live, allocated\n"
               "and reserved memory, fragmentation, utilization, driver calls and OOMs.\n"
               "Several traces share one device (multi-tenant).\n"
               "\n");
    gm_run_opts_help(f, 1);
    fprintf(f, "\n"
               "output:\n"
               "  --json FILE            write all metrics and the inputs that produced them\n"
               "  --html FILE            write a self-contained HTML report (charts, inputs)\n"
               "  --segments-at TIME     the page also maps the segments at TIME from the\n"
               "                         first event (1.5s, 200ms); always: at the peak\n"
               "                         of reserved memory and at the first OOMs\n"
               "  --summary              after the table, torch.cuda.memory_summary() of each\n"
               "                         tenant at the end of its trace, from the model's\n"
               "                         counters (allocator pytorch; others keep none)\n"
               "  --top-sites N          after the table, the N call sites of each trace by\n"
               "                         bytes allocated over the run and by live bytes at the\n"
               "                         simulated peak of allocated memory (traces with call\n"
               "                         sites: imported PyTorch snapshots); in --json as\n"
               "                         \"top_sites\"\n"
               "  --profiler             with --top-sites (default 10): the sites as PyTorch's\n"
               "                         prof.key_averages().table(sort_by=\"cuda_memory_usage\")\n"
               "                         prints memory: Name, CUDA Mem, Self CUDA Mem, # of Calls\n"
               "  --no-explain           after an OOM, skip the why (live tensors by category)\n"
               "                         and the re-simulation of each single PyTorch setting\n"
               "                         change that might avoid it\n"
               "  -q, --quiet            one line: the verdict (fits / OOM) and its figures\n"
               "      --progress, --no-progress  progress on stderr after the first second\n"
               "                         (default: when stderr is a terminal and not -q)\n"
               "\n"
               "exit status: 0 ran, no OOM; 3 ran, an OOM is predicted (the first and its\n"
               "verdict on stderr); 1 bad input; 2 usage\n"
               "  -h, --help             this text\n"
               "\n"
               "examples:\n"
               "  gmsim run --policy pytorch --capacity 24GiB traces/bert.h5\n"
               "  gmsim run --allocator rmm-pool --alloc-conf initial_pool_size:4GiB,\n"
               "      maximum_pool_size:4GiB --capacity 80GiB --repeat 3 rmm.h5\n");
}

enum { OPT_JSON = 1000, OPT_HTML, OPT_NO_EXPLAIN, OPT_SUMMARY, OPT_TOP_SITES, OPT_PROFILER };
enum { OPT_SEGMENTS_AT = 1100 };

/* --profiler without --top-sites N: as many rows as the README's example. */
#define PROFILER_ROWS 10

/* Exit status of a run that predicts an OOM (README, "Exit status"). */
#define EXIT_OOM 3

typedef struct run_args {
    const char *json_path, *html_path;
    int quiet, no_explain, summary, profiler;
    size_t top_sites;      /* 0: not asked */
    gm_segmap_opts segmap; /* --html's segment maps; --segments-at */
} run_args;

static int run_opt(void *ctx, int c, const char *arg, gm_err *err)
{
    run_args *a = ctx;
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
    case OPT_NO_EXPLAIN:
        a->no_explain = 1;
        return GM_OK;
    case OPT_SUMMARY:
        a->summary = 1;
        return GM_OK;
    case OPT_TOP_SITES:
        return gm_cli_top_sites(arg, &a->top_sites, err);
    case OPT_PROFILER:
        a->profiler = 1;
        return GM_OK;
    case OPT_SEGMENTS_AT:
        a->segmap.at_given = 1;
        return gm_parse_time(arg, "--segments-at", &a->segmap.at_ns, err);
    default:
        return gm_errf(err, GM_EUSAGE, "unexpected option");
    }
}

/* --summary: PyTorch's memory_summary() per tenant (all on the one
 * simulated device, ID 0), or why there is none. */
static void print_summaries(FILE *f, const gm_sim_result *r)
{
    for (size_t i = 0; i < r->n_tenants; i++) {
        const gm_tenant_result *t = &r->t[i];
        fprintf(f, "\ntorch.cuda.memory_summary() at the end of %s%s:\n", t->path,
                t->status == GM_TENANT_ABORTED ? " (where it stopped: OOM)" : "");
        if (!t->has_stats) {
            fprintf(f,
                    "  not available: allocator %s keeps no PyTorch statistics (only the "
                    "pytorch model does)\n",
                    r->allocator);
            continue;
        }
        gm_table_memory_summary(f, &t->stats, 0);
    }
}

int cmd_run(int argc, char **argv)
{
    gm_run_opts o;
    gm_run_opts_init(&o);
    static const struct option extra[] = {
        {"json", required_argument, NULL, OPT_JSON},
        {"html", required_argument, NULL, OPT_HTML},
        {"no-explain", no_argument, NULL, OPT_NO_EXPLAIN},
        {"summary", no_argument, NULL, OPT_SUMMARY},
        {"top-sites", required_argument, NULL, OPT_TOP_SITES},
        {"profiler", no_argument, NULL, OPT_PROFILER},
        {"segments-at", required_argument, NULL, OPT_SEGMENTS_AT},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    run_args args = {0};
    gm_segmap_opts_run(&args.segmap);
    gm_err err = {0};
    int rc = gm_cli_parse_sim(&o, argc, argv, extra, run_opt, &args, &err);
    if (rc != GM_OK) {
        gm_run_opts_free(&o); /* --help, or a usage error (bad option or value): exit 2 */
        return gm_cli_parse_sim_exit("run", rc, err.msg);
    }
    const char *json_path = args.json_path, *html_path = args.html_path;
    int quiet = args.quiet;
    FILE *text = gm_cli_text_out(json_path, html_path);
    if (o.n_tenants == 0) {
        gm_run_opts_free(&o);
        return gm_cmd_usage("run", "no trace given; e.g. gmsim run traces/bert.h5");
    }
    if (gm_cli_outputs_not_trace(json_path, html_path, &o, &err)) {
        gm_run_opts_free(&o);
        return gm_cmd_fail("run", GM_EUSAGE, err.msg);
    }
    gm_sim_config cfg;
    gm_run_opts_config(&o, &cfg);
    /* PyTorch's memory_stats() go only into the JSON (and the page's) and
     * --summary: without them the model skips keeping them (engine.h) */
    cfg.no_device_stats = !json_path && !html_path && !args.summary;
    if (args.profiler && !args.top_sites) args.top_sites = PROFILER_ROWS;
    gm_top_sites ts = {0}; /* --top-sites: filled through the engine's hooks as the run goes */
    if (args.top_sites && (rc = gm_top_sites_hook(&ts, &cfg, &err)) != GM_OK) {
        gm_top_sites_free(&ts);
        gm_run_opts_free(&o);
        return gm_cmd_fail("run", rc, err.msg);
    }
    /* the page's trace statistics are read on a thread of their own from
     * now on, beside the run (reports/segmap.h) */
    gm_trace_stats_bg *bg = NULL;
    if (html_path && gm_trace_stats_start(&cfg, &bg) != GM_OK) {
        gm_top_sites_free(&ts);
        gm_run_opts_free(&o);
        return gm_cmd_fail("run", GM_ENOMEM, "out of memory");
    }
    gm_cli_progress_begin("run", quiet, &cfg, 1);
    gm_sim_result *r;
    rc = gm_simulate(&cfg, &r, &err);
    gm_cli_progress_end();
    gm_top_sites_unhook(&cfg); /* cfg is copied into the OOM fixes' threads below */
    if (rc == GM_OK && args.top_sites && (ts.rc != GM_OK || gm_top_sites_finish(&ts) != GM_OK)) {
        gm_sim_result_free(r);
        rc = gm_errf(&err, GM_ENOMEM, "out of host memory tallying call sites");
    }
    if (rc != GM_OK) {
        gm_trace_stats_finish(bg, NULL, &cfg, NULL); /* before the paths it reads go */
        gm_top_sites_free(&ts);
        gm_run_opts_free(&o);
        return gm_cmd_fail("run", rc, err.msg);
    }
    if (!quiet) gm_table_run(text, &cfg, r);
    if (args.summary) print_summaries(text, r);
    if (args.top_sites && !quiet) gm_table_top_sites(text, &ts, args.top_sites, args.profiler);
    /* an OOM: what was live, and which single change would have avoided it */
    int explained = 0;
    gm_live_set at, peak;
    gm_fixes fixes;
    if (r->device.n_oom && r->device.n_oom_kept && !args.no_explain &&
        (!quiet || json_path || html_path)) {
        const gm_oom *first = &r->device.ooms[0];
        rc = gm_live_at(&cfg, first->tenant, first->event_index, &at, &peak, &err);
        if (rc == GM_OK) rc = gm_oom_fixes(&cfg, r, 0, &fixes, &err);
        if (rc != GM_OK) {
            gm_trace_stats_finish(bg, NULL, &cfg, NULL); /* before the paths it reads go */
            gm_top_sites_free(&ts);
            gm_sim_result_free(r);
            gm_run_opts_free(&o);
            return gm_cmd_fail("run", rc, err.msg);
        }
        explained = 1;
        if (!quiet) gm_table_explain(text, &r->device.ooms[0], &at, &peak, &fixes);
    }
    if (json_path || html_path) {
        json_t *j = gm_result_json(&cfg, r, "run");
        if (explained) json_object_set_new(j, "explain", gm_explain_json(&at, &peak, &fixes));
        if (args.top_sites)
            json_object_set_new(j, "top_sites", gm_top_sites_json(&ts, args.top_sites));
        /* the trace's statistics (iterations, allocation bands) are three
         * more passes over the trace: made for the page, and then in the
         * JSON too, so it carries everything the page draws; a plain --json
         * stays one pass (`gmsim report --trace-stats` adds them later) */
        if (html_path) rc = gm_segmap_page_attach(j, &cfg, &args.segmap, 0, bg, &err);
        bg = NULL; /* taken */
        if (rc == GM_OK && json_path) rc = gm_json_write(j, json_path, &err);
        if (rc == GM_OK && html_path) rc = gm_html_write_file(j, html_path, &err);
        json_decref(j);
        if (rc != GM_OK) {
            gm_top_sites_free(&ts);
            gm_sim_result_free(r);
            gm_run_opts_free(&o);
            return gm_cmd_fail("run", rc, err.msg);
        }
    }
    int code = 0;
    if (quiet && !r->device.n_oom) {
        char b1[32], b2[32];
        fprintf(text, "fits: no OOM; peak reserved %s on %s\n",
                gm_fmt_bytes(r->device.peak_r, b1, sizeof b1),
                gm_fmt_bytes(r->capacity_bytes, b2, sizeof b2));
    }
    if (r->device.n_oom) { /* a job that ran out of memory failed */
        char what[640];
        gm_oom_describe(&r->device.ooms[0], r->n_tenants > 1, what, sizeof what);
        fprintf(quiet ? text : stderr,
                "%s%llu OOM%s under allocator %s, policy %s; the first: %s\n",
                quiet ? "OOM: " : "gmsim run: ", (unsigned long long)r->device.n_oom,
                r->device.n_oom == 1 ? "" : "s", r->allocator, r->policy, what);
        code = EXIT_OOM;
    }
    gm_top_sites_free(&ts);
    gm_sim_result_free(r);
    gm_run_opts_free(&o);
    return code;
}
