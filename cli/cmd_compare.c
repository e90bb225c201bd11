/*
 * cmd_compare.c - `gmsim compare`: the same trace(s) under every release
 * policy, one simulation per policy in parallel threads, a table ranked by
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
#include "study/compare.h"
#include "study/policy_list.h"
#include "policies/registry.h"
#include "reports/html.h"
#include "reports/results.h"
#include "reports/trace_stats.h"
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
            "                         one's parameters); default: all of\n"
            "                         %s\n"
            "  --threads N            simulations at a time (default: one per core)\n"
            "\n",
            gm_policy_names());
    gm_run_opts_help(f, 0);
    fprintf(f, "\n"
               "output:\n"
               "  --json FILE            ranking and every policy's full result\n"
               "                         (schema gmsim-compare/1)\n"
               "  --html FILE            a self-contained HTML report: the ranking and one\n"
               "                         timeline chart per policy\n"
               "  -q, --quiet            no table on stdout\n"
               "  -h, --help             this text\n"
               "\n"
               "examples:\n"
               "  gmsim compare traces/bert.h5\n"
               "  gmsim compare --capacity 5.5GiB --policies pytorch,lru:threshold=0.9,oracle \\\n"
               "      traces/bert.h5\n"
               "  gmsim compare --capacity 16GiB --scope device a.h5 --offset 20ms b.h5 c.h5\n");
}

static void pct(char *buf, size_t n, double v)
{
    snprintf(buf, n, "%.1f %%", v * 100.0);
}

/* The first ranking criterion on which a beats b (NULL: a tie). */
static const char *criterion(const gm_sim_result *a, const gm_sim_result *b)
{
    gm_rank_key ka = gm_sim_rank_key(a), kb = gm_sim_rank_key(b);
    int by;
    gm_rank_cmp(&ka, &kb, &by);
    return gm_rank_by_name(by);
}

static void print_row(const char *label, int w, const gm_compare_entry *e)
{
    const gm_sim_result *r = e->r;
    char pr[32], fr[32], ut[32], ex[32], dt[32], calls[48];
    gm_alloc_counters tot = gm_sim_totals(r);
    snprintf(calls, sizeof calls, "%llu/%llu", (unsigned long long)tot.n_driver_alloc,
             (unsigned long long)tot.n_driver_free);
    gm_fmt_bytes(r->device.peak_r, pr, sizeof pr);
    pct(fr, sizeof fr, gm_metrics_fragmentation(&r->device));
    pct(ut, sizeof ut, gm_metrics_utilization(&r->device));
    pct(ex, sizeof ex, gm_metrics_ext_frag_mean(&r->device));
    gm_fmt_ns(gm_counters_driver_ns(&tot), dt, sizeof dt);
    printf("  %5s  %-*s %5llu  %2zu/%-2zu %13s %7s %7s %8s %13s %10s\n", label, w, e->spec,
           (unsigned long long)r->device.n_oom, gm_sim_completed(r), r->n_tenants, pr, fr, ut, ex,
           calls, dt);
}

/* Each policy's one-line summary of its own report (sim/report.h), e.g. what
 * the predictive policy learned and how well it predicted. */
static void print_notes(const gm_compare *c)
{
    for (size_t i = 0; i < c->n; i++) {
        const gm_sim_result *r = c->e[i].r;
        for (size_t t = 0; t < r->n_tenants; t++) {
            const gm_report *rep = r->t[t].policy_report;
            if (!rep || !rep->summary[0]) continue;
            char who[32] = "";
            if (r->n_tenants > 1) snprintf(who, sizeof who, " tenant %zu", t);
            printf("  %s%s: %s\n", c->e[i].spec, who, rep->summary);
        }
    }
}

static void print_table(const gm_sim_config *cfg, const gm_compare *c)
{
    const gm_sim_result *r0 = c->e[0].r;
    char b1[32], b2[32];
    printf("gmsim compare: %zu trace%s on a %s device (%s context overhead per tenant), "
           "scope %s\n",
           r0->n_tenants, r0->n_tenants == 1 ? "" : "s",
           gm_fmt_bytes(r0->capacity_bytes, b1, sizeof b1),
           gm_fmt_bytes(r0->overhead_bytes, b2, sizeof b2), cfg->scope_device ? "device" : "self");
    for (size_t i = 0; i < r0->n_tenants; i++) {
        const gm_tenant_result *t = &r0->t[i];
        printf("  [%zu] %s  (%s, %llu events, hash %s", i, t->path, t->source,
               (unsigned long long)t->trace_events, t->trace_hash);
        if (cfg->tenants[i].offset_ns)
            printf(", offset %s", gm_fmt_ns(cfg->tenants[i].offset_ns, b1, sizeof b1));
        if (cfg->tenants[i].repeat > 1) printf(", repeat %u", cfg->tenants[i].repeat);
        if (cfg->tenants[i].quota_bytes)
            printf(", quota %s", gm_fmt_bytes(cfg->tenants[i].quota_bytes, b1, sizeof b1));
        printf(")\n");
    }
    printf("allocator %s; %zu policies ranked by OOMs, then fragmentation, then utilization "
           "(higher is better), then driver time\n\n",
           r0->allocator, c->n);
    int w = 8;
    for (size_t i = 0; i < c->n; i++)
        w = (int)strlen(c->e[i].spec) > w ? (int)strlen(c->e[i].spec) : w;
    printf("  %5s  %-*s %5s  %5s %13s %7s %7s %8s %13s %10s\n", "rank", w, "policy", "OOMs", "done",
           "peak reserved", "frag", "util", "ext.frag", "malloc/free", "driver");
    for (size_t k = 0; k < c->n_ranked; k++) {
        char lab[24];
        snprintf(lab, sizeof lab, "%zu", k + 1);
        print_row(lab, w, &c->e[c->rank[k]]);
    }
    for (size_t i = 0; i < c->n; i++)
        if (!c->e[i].realizable) print_row("bound", w, &c->e[i]);
    printf("  (peak live bytes, the floor no policy beats: %s; frag = 1 - peak A / peak R; "
           "util = time-weighted A / R)\n\n",
           gm_fmt_bytes(r0->device.peak_q, b1, sizeof b1));
    if (c->winner >= 0) {
        const gm_compare_entry *w0 = &c->e[c->winner];
        printf("winner: %s", w0->spec);
        if (c->n_ranked > 1) {
            const gm_compare_entry *w1 = &c->e[c->rank[1]];
            const char *why = criterion(w0->r, w1->r);
            if (why)
                printf(" (ahead of %s on %s)", w1->spec, why);
            else
                printf(" (tied with %s on every criterion; the order given breaks ties)", w1->spec);
        }
        printf("\n");
    } else {
        printf("winner: none (no realizable policy was run)\n");
    }
    if (c->bound >= 0) {
        const gm_sim_result *b = c->e[c->bound].r;
        char f1[32], u1[32];
        pct(f1, sizeof f1, gm_metrics_fragmentation(&b->device));
        pct(u1, sizeof u1, gm_metrics_utilization(&b->device));
        printf("bound:  %s is UNREALIZABLE (it reads the trace's future): %llu OOMs, "
               "fragmentation %s, utilization %s\n",
               c->e[c->bound].spec, (unsigned long long)b->device.n_oom, f1, u1);
    }
    print_notes(c);
}

enum { OPT_JSON = 1000, OPT_POLICIES, OPT_THREADS, OPT_HTML };

typedef struct compare_args {
    const char *json_path, *html_path;
    char list[4096];
    int quiet, threads;
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
    case OPT_THREADS:
        return gm_cli_threads(arg, &a->threads, err);
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
        {"threads", required_argument, NULL, OPT_THREADS},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    compare_args args = {0};
    gm_err err = {0};
    int rc = gm_cli_parse_sim(&o, argc, argv, extra, compare_opt, &args, &err);
    if (rc != GM_OK) {
        gm_run_opts_free(&o); /* --help, or a usage error: exit 2 */
        return rc == GM_CLI_DONE ? 0 : gm_cmd_fail("compare", GM_EUSAGE, err.msg);
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
    char **specs = NULL;
    size_t n = 0;
    if ((rc = gm_policy_list_split(list, &specs, &n, &err)) != GM_OK) {
        gm_run_opts_free(&o);
        return gm_cmd_fail("compare", rc, err.msg);
    }
    gm_sim_config cfg;
    gm_run_opts_config(&o, &cfg);
    gm_compare *cmp = NULL;
    rc = gm_compare_run(&cfg, specs, n, threads, &cmp, &err);
    if (rc == GM_OK && !quiet) print_table(&cfg, cmp);
    if (rc == GM_OK && (json_path || html_path)) {
        json_t *j = gm_compare_json(&cfg, cmp);
        rc = j ? GM_OK : gm_errf(&err, GM_ENOMEM, "out of memory");
        if (rc == GM_OK && json_path) rc = gm_json_write(j, json_path, &err);
        if (rc == GM_OK && html_path && (rc = gm_trace_stats_attach(j, &err)) == GM_OK)
            rc = gm_html_write_file(j, html_path, &err);
        json_decref(j);
    }
    if (rc == GM_OK && isatty(2))
        fprintf(stderr, "gmsim compare: %zu simulations on %d thread%s in %.2f s\n", n,
                cmp->threads, cmp->threads == 1 ? "" : "s", cmp->wall_s);
    gm_compare_free(cmp);
    free(specs);
    gm_run_opts_free(&o);
    return rc == GM_OK ? 0 : gm_cmd_fail("compare", rc, err.msg);
}
