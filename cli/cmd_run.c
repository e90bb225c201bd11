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
#include "sim/engine.h"
#include "reports/html.h"
#include "reports/kv.h"
#include "reports/results.h"
#include "reports/trace_stats.h"
#include "study/run_opts.h"
#include "study/simulate.h"

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
               "  -q, --quiet            no table on stdout\n"
               "  -h, --help             this text\n"
               "\n"
               "example: gmsim run --policy pytorch --capacity 24GiB traces/bert.h5\n");
}

static void pct(char *buf, size_t n, double v)
{
    snprintf(buf, n, "%.1f %%", v * 100.0);
}

static void print_series(const char *title, const gm_metrics *m)
{
    char q[32], a[32], r[32];
    printf("  %-28s %12s %12s %12s\n", title, gm_fmt_bytes(m->peak_q, q, sizeof q),
           gm_fmt_bytes(m->peak_a, a, sizeof a), gm_fmt_bytes(m->peak_r, r, sizeof r));
}

static void print_ooms(const gm_metrics *m)
{
    char b1[32], b2[32], b3[32], b4[32], b5[32], b6[32];
    size_t show = m->n_oom_kept < 5 ? m->n_oom_kept : 5;
    for (size_t i = 0; i < show; i++) {
        const gm_oom *o = &m->ooms[i];
        printf("    OOM tenant %d event %llu%s at %s: %s requested; reserved %s, allocated %s, "
               "largest free block %s, device used %s\n",
               o->tenant, (unsigned long long)o->event_index, o->pass ? " (repeat pass)" : "",
               gm_fmt_ns(o->t_ns, b5, sizeof b5), gm_fmt_bytes(o->size, b1, sizeof b1),
               gm_fmt_bytes(o->reserved, b2, sizeof b2), gm_fmt_bytes(o->allocated, b3, sizeof b3),
               gm_fmt_bytes(o->largest_free, b4, sizeof b4),
               gm_fmt_bytes(o->device_used, b6, sizeof b6));
    }
    if (m->n_oom > show)
        printf("    ... %llu more (all in --json)\n", (unsigned long long)(m->n_oom - show));
}

/* Each policy report, short (reports/kv.h); everything is in --json. */
static void print_policy_reports(const gm_sim_result *r)
{
    for (size_t i = 0; i < r->n_tenants; i++) {
        const gm_report *rep = r->t[i].policy_report;
        if (!rep || rep->n == 0) continue;
        if (r->n_tenants > 1)
            printf("\n  policy report (%s), tenant %zu\n", r->policy, i);
        else
            printf("\n  policy report (%s)\n", r->policy);
        gm_report_print(stdout, rep);
    }
}

static void print_table(const gm_sim_config *cfg, const gm_sim_result *r)
{
    char b1[32], b2[32], p[32];
    printf("gmsim run: %zu trace%s on a %s device (%s context overhead per tenant)\n", r->n_tenants,
           r->n_tenants == 1 ? "" : "s", gm_fmt_bytes(r->capacity_bytes, b1, sizeof b1),
           gm_fmt_bytes(r->overhead_bytes, b2, sizeof b2));
    printf("allocator %s, policy %s%s%s%s\n", r->allocator, r->policy,
           r->policy_realizable ? "" : " (UNREALIZABLE: uses the future; a bound)",
           r->on_oom_skip ? ", OOMs skipped" : "", cfg->scope_device ? ", scope device" : "");
    for (size_t i = 0; i < r->n_tenants; i++) {
        const gm_tenant_result *t = &r->t[i];
        printf("  [%zu] %s  (%s, %llu events, hash %s, alloc conf '%s'%s)\n", i, t->path, t->source,
               (unsigned long long)t->trace_events, t->trace_hash, t->alloc_conf,
               cfg->tenants[i].repeat > 1 ? ", repeated" : "");
    }
    printf("\n  %-28s %12s %12s %12s\n", "peak", "live (Q)", "allocated", "reserved");
    if (r->n_tenants > 1)
        for (size_t i = 0; i < r->n_tenants; i++) {
            char name[48];
            snprintf(name, sizeof name, "tenant %zu%s", i,
                     r->t[i].status == GM_TENANT_ABORTED ? " (aborted)" : "");
            print_series(name, &r->t[i].m);
        }
    print_series(r->n_tenants > 1 ? "device (all tenants)" : "", &r->device);
    const gm_metrics *d = &r->device;
    printf("\n");
    pct(p, sizeof p, gm_metrics_fragmentation(d));
    printf("  %-44s %s\n", "fragmentation (1 - peak A / peak R)", p);
    pct(p, sizeof p, gm_metrics_frag_time_weighted(d));
    printf("  %-44s %s\n", "fragmentation, time-weighted", p);
    pct(p, sizeof p, gm_metrics_utilization(d));
    printf("  %-44s %s\n", "utilization (time-weighted A / R)", p);
    char p2[32];
    pct(p, sizeof p, gm_metrics_ext_frag_mean(d));
    pct(p2, sizeof p2, d->ext_frag_max);
    printf("  %-44s %s mean, %s max\n", "external fragmentation (1 - largest free/(R-A))", p, p2);
    pct(p, sizeof p, (double)r->peak_device_used / (double)r->capacity_bytes);
    printf("  %-44s %s (%s)\n", "peak device used (R + overhead) / capacity", p,
           gm_fmt_bytes(r->peak_device_used, b1, sizeof b1));
    gm_alloc_counters tot = gm_sim_totals(r);
    printf("  %-44s %llu malloc, %llu free, %s modelled\n", "driver calls",
           (unsigned long long)tot.n_driver_alloc, (unsigned long long)tot.n_driver_free,
           gm_fmt_ns(gm_counters_driver_ns(&tot), b1, sizeof b1));
    printf("  %-44s %llu\n", "OOMs", (unsigned long long)d->n_oom);
    print_ooms(d);
    if (r->n_tenants > 1)
        printf("  %-44s %zu of %zu\n", "tenants that ran to completion", gm_sim_completed(r),
               r->n_tenants);
    if (cfg->scope_device) {
        uint64_t rel = 0, resc = 0;
        for (size_t i = 0; i < r->n_tenants; i++) {
            rel += r->t[i].scope_released_bytes;
            resc += r->t[i].scope_rescues;
        }
        printf("  %-44s %s released for others, %llu allocation(s) rescued\n",
               "scope device (tenants release for others)", gm_fmt_bytes(rel, b1, sizeof b1),
               (unsigned long long)resc);
    }
    for (size_t i = 0; i < r->n_tenants; i++) {
        const gm_tenant_result *t = &r->t[i];
        if (t->init_live_bytes)
            printf("  tenant %zu: %s alive before the first event (from /initial_state)\n", i,
                   gm_fmt_bytes(t->init_live_bytes, b1, sizeof b1));
        if (t->unknown_frees || t->live_reallocs)
            printf("  tenant %zu: repaired %llu free(s) of unknown addresses, %llu "
                   "re-allocation(s) of live addresses\n",
                   i, (unsigned long long)t->unknown_frees, (unsigned long long)t->live_reallocs);
        if (t->repeat_leftover_bytes)
            printf("  tenant %zu: %s left allocated at pass ends were freed (--repeat)\n", i,
                   gm_fmt_bytes(t->repeat_leftover_bytes, b1, sizeof b1));
    }
    print_policy_reports(r);
    double rate = r->wall_s > 0 ? (double)r->events / r->wall_s : 0;
    printf("\n  simulated %llu events in %.3f s (%.1f M events/s)\n", (unsigned long long)r->events,
           r->wall_s, rate / 1e6);
}

static void progress(void *ctx, uint64_t done)
{
    (void)ctx;
    fprintf(stderr, "\r  %llu M events...", (unsigned long long)(done >> 20));
}

enum { OPT_JSON = 1000, OPT_HTML };

typedef struct run_args {
    const char *json_path, *html_path;
    int quiet;
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
    default:
        return gm_errf(err, GM_EUSAGE, "unexpected option");
    }
}

int cmd_run(int argc, char **argv)
{
    gm_run_opts o;
    gm_run_opts_init(&o);
    static const struct option extra[] = {
        {"json", required_argument, NULL, OPT_JSON},
        {"html", required_argument, NULL, OPT_HTML},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    run_args args = {0};
    gm_err err = {0};
    int rc = gm_cli_parse_sim(&o, argc, argv, extra, run_opt, &args, &err);
    if (rc != GM_OK) {
        gm_run_opts_free(&o); /* --help, or a usage error (bad option or value): exit 2 */
        return rc == GM_CLI_DONE ? 0 : gm_cmd_fail("run", GM_EUSAGE, err.msg);
    }
    const char *json_path = args.json_path, *html_path = args.html_path;
    int quiet = args.quiet;
    if (o.n_tenants == 0) {
        gm_run_opts_free(&o);
        return gm_cmd_usage("run", "no trace given; e.g. gmsim run traces/bert.h5");
    }
    gm_sim_config cfg;
    gm_run_opts_config(&o, &cfg);
    if (!quiet && isatty(2)) {
        cfg.progress = progress;
    }
    gm_sim_result *r;
    rc = gm_simulate(&cfg, &r, &err);
    if (cfg.progress) fprintf(stderr, "\r                         \r");
    if (rc != GM_OK) {
        gm_run_opts_free(&o);
        return gm_cmd_fail("run", rc, err.msg);
    }
    if (!quiet) print_table(&cfg, r);
    if (json_path || html_path) {
        json_t *j = gm_result_json(&cfg, r, "run");
        rc = json_path ? gm_json_write(j, json_path, &err) : GM_OK;
        if (rc == GM_OK && html_path && (rc = gm_trace_stats_attach(j, &err)) == GM_OK)
            rc = gm_html_write_file(j, html_path, &err);
        json_decref(j);
        if (rc != GM_OK) {
            gm_sim_result_free(r);
            gm_run_opts_free(&o);
            return gm_cmd_fail("run", rc, err.msg);
        }
    }
    gm_sim_result_free(r);
    gm_run_opts_free(&o);
    return 0;
}
