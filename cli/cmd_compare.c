/*
 * cmd_compare.c - `gmsim compare`: the same trace(s) under every release
 * policy (with --allocators, every allocator x policy), one simulation
 * each in parallel threads, a table ranked by
 * OOMs, then fragmentation, then utilization, then driver time, the winner
 * named and the oracle shown as the bound (never the winner).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "policies/registry.h"
#include "reports/html.h"
#include "reports/segmap.h"
#include "reports/results.h"
#include "reports/table.h"
#include "sim/alloc.h"
#include "study/alloc_list.h"
#include "study/compare.h"
#include "study/policy_list.h"
#include "study/preload.h"
#include "study/run_opts.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gmsim compare [options] TRACE [[per-trace options] TRACE...]\n"
            "\n"
            "Simulate the same trace(s) under several release policies, in parallel, and\n"
            "rank them: fewest OOMs, then lowest fragmentation (1 - peak A / peak R), then\n"
            "highest utilization (time-weighted A / R), then least driver time. The\n"
            "winner is named; the oracle (unrealizable: it reads the future) is shown as\n"
            "the bound and never wins. Results do not depend on --threads.\n"
            "\n"
            "compare:\n"
            "  --policies LIST        policies to run, comma-separated, each NAME[:k=v,...]\n"
            "                         (a piece with '=' and no ':' continues the previous\n"
            "                         one's parameters); default:\n"
            "                         %s\n"
            "  --allocators LIST      rank allocators (and their settings) too: entries\n"
            "                         NAME[:SETTINGS] separated by commas, a piece that is\n"
            "                         not a model's name continuing the settings before it,\n"
            "                         e.g. 'pytorch,pytorch:expandable_segments:True,\n"
            "                         cuda-async,rmm-pool:initial_pool_size:8GiB'; each runs\n"
            "                         with every --policies entry (default with --allocators:\n"
            "                         pytorch, each library's own behaviour); models:\n"
            "                         %s\n"
            "  --threads N            simulations at a time (default: one per core)\n"
            "\n",
            gm_policy_default_names(), gm_alloc_names());
    gm_run_opts_help(f, 0);
    fprintf(f, "\n"
               "output:\n"
               "  --json FILE            ranking and every policy's full result\n"
               "                         (schema gmsim-compare/1)\n"
               "  --html FILE            a self-contained HTML report: the ranking and one\n"
               "                         timeline chart per policy\n"
               "  --no-fit               when even the winner runs out of memory, do not search\n"
               "                         for the smallest card that runs it\n"
               "  -q, --quiet            one line: the verdict (fits / OOM) and the winner\n"
               "      --progress, --no-progress  progress on stderr after the first second\n"
               "                         (default: when stderr is a terminal and not -q)\n"
               "  -h, --help             this text\n"
               "\n"
               "exit status: 0 the winner runs without OOM; 3 nothing realizable does (only\n"
               "unrealizable policies asked, as --policies oracle: the bound, either way); 1 bad\n"
               "input; 2 usage\n"
               "\n"
               "examples:\n"
               "  gmsim compare traces/bert.h5\n"
               "  gmsim compare --capacity 5.5GiB --policies pytorch,lru:threshold=0.9,oracle \\\n"
               "      traces/bert.h5\n"
               "  gmsim compare --capacity 16GiB --scope device a.h5 --offset 20ms b.h5 c.h5\n"
               "  gmsim compare --capacity 6GiB --allocators pytorch,cuda-async,rmm-pool,tf-bfc:\n"
               "      allow_growth:True traces/bert.h5\n");
}

enum { OPT_JSON = 1000, OPT_POLICIES, OPT_THREADS, OPT_HTML, OPT_ALLOCATORS, OPT_NOFIT };

typedef struct compare_args {
    const char *json_path, *html_path;
    char list[4096];
    char allocators[4096];
    int quiet, threads, no_fit;
} compare_args;

static int compare_opt(void *ctx, int c, const char *arg, gm_err *err)
{
    compare_args *a = ctx;
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
    case OPT_ALLOCATORS: { /* given several times: one list */
        size_t n = strlen(a->allocators);
        if (n + strlen(arg) + 2 > sizeof a->allocators)
            return gm_errf(err, GM_EUSAGE, "--allocators: list too long");
        snprintf(a->allocators + n, sizeof a->allocators - n, "%s%s", n ? "," : "", arg);
        return GM_OK;
    }
    case OPT_THREADS:
        return gm_cli_threads(arg, &a->threads, err);
    case OPT_NOFIT:
        a->no_fit = 1;
        return GM_OK;
    default:
        return gm_errf(err, GM_EUSAGE, "unexpected option");
    }
}

int cmd_compare(int argc, char **argv)
{
    gm_run_opts o;
    gm_run_opts_init(&o);
    static const struct option extra[] = {
        {"json", required_argument, NULL, OPT_JSON},
        {"html", required_argument, NULL, OPT_HTML},
        {"policies", required_argument, NULL, OPT_POLICIES},
        {"allocators", required_argument, NULL, OPT_ALLOCATORS},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"no-fit", no_argument, NULL, OPT_NOFIT},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    compare_args args = {0};
    gm_err err = {0};
    int rc = gm_cli_parse_sim(&o, argc, argv, extra, compare_opt, &args, &err);
    if (rc != GM_OK) {
        gm_run_opts_free(&o); /* --help, or a usage error: exit 2 */
        return gm_cli_parse_sim_exit("compare", rc, err.msg);
    }
    const char *json_path = args.json_path, *html_path = args.html_path;
    const char *list = args.list;
    int quiet = args.quiet, threads = args.threads;
    if (o.policy) {
        gm_run_opts_free(&o);
        return gm_cmd_usage("compare",
                            "--policy picks one policy (gmsim run); use --policies LIST here");
    }
    if (o.n_tenants == 0) {
        gm_run_opts_free(&o);
        return gm_cmd_usage("compare", "no trace given; e.g. gmsim compare traces/bert.h5");
    }
    if (gm_cli_outputs_not_trace(json_path, html_path, &o, &err)) {
        gm_run_opts_free(&o);
        return gm_cmd_fail("compare", GM_EUSAGE, err.msg);
    }
    gm_alloc_choice *allocs = NULL;
    size_t n_allocs = 0;
    if (args.allocators[0]) {
        if (o.allocator) {
            gm_run_opts_free(&o);
            return gm_cmd_usage("compare", "--allocator picks one model; with --allocators list "
                                           "them all there");
        }
        if ((rc = gm_alloc_list_split(args.allocators, &allocs, &n_allocs, &err)) != GM_OK) {
            gm_run_opts_free(&o);
            return gm_cmd_fail("compare", rc, err.msg);
        }
        if (!list[0]) list = "pytorch";
    }
    char **specs = NULL;
    size_t n = 0;
    if ((rc = gm_policy_list_split(list, &specs, &n, &err)) != GM_OK) {
        free(allocs);
        gm_run_opts_free(&o);
        return gm_cmd_fail("compare", rc, err.msg);
    }
    gm_sim_config cfg;
    gm_run_opts_config(&o, &cfg);
    cfg.no_device_stats = !json_path && !html_path; /* memory_stats() only in the JSON */
    gm_compare *cmp = NULL;
    /* the page's trace statistics are read on a thread of their own from
     * now on, beside the runs (reports/segmap.h) */
    gm_trace_stats_bg *bg = NULL;
    if (html_path && threads != 1 && gm_trace_stats_start(&cfg, &bg) != GM_OK) {
        gm_run_opts_free(&o);
        return gm_cmd_fail("compare", GM_ENOMEM, "out of memory");
    }
    gm_cli_progress_begin("compare", quiet, &cfg, 0);
    /* every run replays the traces from memory (study/preload.h); a larger
     * trace stays on disk: for compare's few runs (--allocators' too,
     * measured) packing it first, a read of the file before any run starts,
     * takes as long as each run reading the file beside the others
     * (gm_compare_fit packs it for its searches' many runs) */
    gm_preload pre;
    if (gm_preload_config(&cfg, &pre, GM_PRELOAD_MAX_EVENTS, 0, &err) != GM_OK) {
        gm_trace_stats_finish(bg, NULL, &cfg, NULL);
        gm_run_opts_free(&o);
        return gm_cmd_fail("compare", GM_ENOMEM, err.msg);
    }
    rc = allocs ? gm_compare_run_allocators(&cfg, allocs, n_allocs, specs, n, threads, &cmp, &err)
                : gm_compare_run(&cfg, specs, n, threads, &cmp, &err);
    n = cmp ? cmp->n : n;
    if (rc == GM_OK && !args.no_fit) rc = gm_compare_fit(&cfg, cmp, threads, 0, &err);
    if (rc == GM_OK && !quiet) gm_table_compare(gm_cli_text_out(json_path, html_path), &cfg, cmp);
    long v = rc == GM_OK ? gm_compare_verdict_entry(cmp) : -1;
    int oom = rc == GM_OK && (v < 0 || cmp->e[v].r->device.n_oom > 0);
    if (rc == GM_OK && quiet) gm_compare_verdict(gm_cli_text_out(json_path, html_path), cmp);
    if (rc == GM_OK && (json_path || html_path)) {
        json_t *j = gm_compare_json(&cfg, cmp);
        rc = j ? GM_OK : gm_errf(&err, GM_ENOMEM, "out of memory");
        if (rc == GM_OK && json_path) rc = gm_json_write(j, json_path, &err);
        gm_segmap_opts so;
        gm_segmap_opts_compare(&so);
        if (rc == GM_OK && html_path) {
            rc = gm_segmap_page_attach(j, &cfg, &so, threads, bg, &err);
            bg = NULL; /* taken */
            if (rc == GM_OK) rc = gm_html_write_file(j, html_path, &err);
        }
        json_decref(j);
    }
    gm_trace_stats_finish(bg, NULL, &cfg, NULL); /* not taken: a run failed first */
    if (rc == GM_OK && isatty(2)) {
        fprintf(stderr, "gmsim compare: %zu simulations on %d thread%s in %.2f s",
                n - cmp->n_shared, cmp->threads, cmp->threads == 1 ? "" : "s", cmp->wall_s);
        if (cmp->n_shared) /* study/same_run.h */
            fprintf(stderr, " (%zu more entries took another policy's run)", cmp->n_shared);
        fputc('\n', stderr);
    }
    gm_compare_free(cmp);
    free(specs);
    free(allocs);
    gm_preload_free(&pre);
    gm_run_opts_free(&o);
    if (rc != GM_OK) return gm_cmd_fail("compare", rc, err.msg);
    return oom ? 3 : 0;
}
