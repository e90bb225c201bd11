/*
 * cmd_tune.c - `gmsim tune`: which PYTORCH_CUDA_ALLOC_CONF to use. A grid of
 * PyTorch's own settings simulated in parallel (study/tune.h), ranked (no
 * OOM first, then the smallest peak reserved, then fragmentation, then
 * driver time), with what the best saves against the defaults, gmsim fit's
 * smallest card for both, and the line to paste. Exit 3 when no setting
 * runs without OOM.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "reports/html.h"
#include "reports/results.h"
#include "reports/table.h"
#include "study/preload.h"
#include "study/run_opts.h"
#include "study/tune.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: gmsim tune [options] TRACE [[per-trace options] TRACE...]\n"
               "\n"
               "Search PyTorch's own allocator settings for the trace(s) on one device:\n"
               "expandable_segments, max_split_size_mb (none, 64, 128, 256, 512),\n"
               "garbage_collection_threshold (none, 0.6, 0.8; under a memory fraction, as\n"
               "PyTorch needs) and roundup_power2_divisions (none, 4, 8, per interval): 120\n"
               "settings, in parallel, as the trace's PyTorch reads them (settings it refuses\n"
               "are listed, not run). Ranked: no OOM first, then the smallest peak reserved,\n"
               "then fragmentation, then driver time. Ends with what the best saves against\n"
               "the defaults, the smallest card without OOM for both (gmsim fit), and the\n"
               "line to paste. Results do not depend on --threads.\n"
               "\n"
               "tune:\n"
               "  --threads N            simulations at a time (default: one per core)\n"
               "  --no-fit               skip the smallest-card search\n"
               "  --max-capacity SIZE    the smallest-card search goes no higher\n"
               "\n");
    gm_run_opts_help(f, 1);
    fprintf(f,
            "\n"
            "output:\n"
            "  --json FILE            every setting's figures (schema gmsim-tune/1); - for stdout\n"
            "  --html FILE            the ranked settings as a self-contained HTML page\n"
            "  -q, --quiet            one line: the verdict and the setting\n"
            "      --progress, --no-progress  progress on stderr after the first second\n"
            "                         (default: when stderr is a terminal and not -q)\n"
            "  -h, --help             this text\n"
            "\n"
            "exit status: 0 a setting runs without OOM, 3 none does, 1 bad input, 2 usage\n"
            "\n"
            "examples:\n"
            "  gmsim tune --capacity 5GiB traces/bert.h5\n"
            "  gmsim tune --gpu l4 snapshot.pickle\n");
}

enum { OPT_JSON = 1000, OPT_HTML, OPT_THREADS, OPT_NOFIT, OPT_MAXCAP };

typedef struct tune_args {
    const char *json_path, *html_path;
    int quiet, threads, no_fit;
    uint64_t max_cap;
} tune_args;

static int tune_opt(void *ctx, int c, const char *arg, gm_err *err)
{
    tune_args *a = ctx;
    switch (c) {
    case 'h':
        usage(stdout);
        return GM_CLI_DONE;
    case 'q':
        a->quiet = 1;
        return GM_OK;
    case OPT_HTML:
        a->html_path = arg;
        return GM_OK;
    case OPT_JSON:
        a->json_path = arg;
        return GM_OK;
    case OPT_THREADS:
        return gm_cli_threads(arg, &a->threads, err);
    case OPT_NOFIT:
        a->no_fit = 1;
        return GM_OK;
    case OPT_MAXCAP:
        return gm_cli_size("tune", arg, "--max-capacity", &a->max_cap, err);
    default:
        return gm_errf(err, GM_EUSAGE, "unexpected option");
    }
}

int cmd_tune(int argc, char **argv)
{
    gm_run_opts o;
    gm_run_opts_init(&o);
    static const struct option extra[] = {
        {"json", required_argument, NULL, OPT_JSON},
        {"html", required_argument, NULL, OPT_HTML},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"no-fit", no_argument, NULL, OPT_NOFIT},
        {"max-capacity", required_argument, NULL, OPT_MAXCAP},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    tune_args a = {0};
    gm_err err = {0};
    int rc = gm_cli_parse_sim(&o, argc, argv, extra, tune_opt, &a, &err);
    if (rc != GM_OK) {
        gm_run_opts_free(&o);
        return gm_cli_parse_sim_exit("tune", rc, err.msg);
    }
    if (o.alloc_conf) {
        gm_run_opts_free(&o);
        return gm_cmd_usage("tune", "tune searches the settings itself; --alloc-conf belongs to "
                                    "gmsim run (e.g. to check the setting tune found)");
    }
    if (o.n_tenants == 0) {
        gm_run_opts_free(&o);
        return gm_cmd_usage("tune", "no trace given; e.g. gmsim tune --capacity 5GiB "
                                    "traces/bert.h5");
    }
    if (gm_cli_outputs_not_trace(a.json_path, a.html_path, &o, &err)) {
        gm_run_opts_free(&o);
        return gm_cmd_fail("tune", GM_EUSAGE, err.msg);
    }
    gm_sim_config cfg;
    gm_run_opts_config(&o, &cfg);
    gm_tune *t = NULL;
    gm_cli_progress_begin("tune", a.quiet, &cfg, 1);
    gm_preload pre; /* every run replays the traces from memory (study/preload.h) */
    if (gm_preload_config(&cfg, &pre, GM_PRELOAD_MAX_EVENTS, GM_PRELOAD_MAX_PACKED_BYTES, &err) !=
        GM_OK) {
        gm_run_opts_free(&o);
        return gm_cmd_fail("tune", GM_ENOMEM, err.msg);
    }
    rc = gm_tune_run(&cfg, a.threads, &t, &err);
    if (rc == GM_OK && !a.no_fit) rc = gm_tune_fit(&cfg, t, a.threads, a.max_cap, &err);
    gm_cli_progress_end();
    if (rc == GM_OK && a.quiet && t->best >= 0) {
        const gm_tune_entry *b = &t->e[t->best];
        fprintf(gm_cli_text_out(a.json_path, a.html_path), "%s: %s\n", b->ooms ? "OOM" : "fits",
                b->is_default ? "(PyTorch's defaults)" : b->conf);
    } else if (rc == GM_OK && !a.quiet) {
        gm_table_tune(gm_cli_text_out(a.json_path, a.html_path), &cfg, t);
    }
    if (rc == GM_OK && (a.json_path || a.html_path)) {
        json_t *j = gm_tune_json(&cfg, t);
        rc = j ? GM_OK : gm_errf(&err, GM_ENOMEM, "out of memory");
        if (rc == GM_OK && a.json_path) rc = gm_json_write(j, a.json_path, &err);
        if (rc == GM_OK && a.html_path) rc = gm_html_write_file(j, a.html_path, &err);
        json_decref(j);
    }
    int oom = rc == GM_OK && (t->best < 0 || t->e[t->best].ooms > 0);
    gm_tune_free(t);
    gm_preload_free(&pre);
    gm_run_opts_free(&o);
    if (rc != GM_OK) return gm_cmd_fail("tune", rc, err.msg);
    return oom ? 3 : 0;
}
