/*
 * cmd_export.c - `gmsim export --memory-viz OUT.pickle RESULT-or-TRACE`:
 * simulate one trace (or snapshot) with the simulation options of `gmsim
 * run` and write the run as a PyTorch memory snapshot (reports/memviz.h),
 * for PyTorch's own viewer. RESULT is a `gmsim run --json` result (or a
 * `gmsim compare --json` one: its winner): its inputs (policy, allocator,
 * settings, capacity, trace) are taken, and options on the command line
 * override them.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "base/units.h"
#include "reports/memviz.h"
#include "study/run_opts.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: gmsim export --memory-viz OUT.pickle [options] TRACE|RESULT.json\n"
               "\n"
               "Simulate one trace or PyTorch snapshot, as 'gmsim run' does, and write the\n"
               "run as a PyTorch memory snapshot: the segments and blocks the allocator model\n"
               "made (at the end of the run, or at its OOM), and every alloc, free and\n"
               "cudaMalloc/cudaFree (segment_map/unmap) it made, with the call sites' stacks.\n"
               "Open it in PyTorch's viewer (pytorch.org/memory_viz, or\n"
               "python -m torch.cuda._memory_viz trace_plot OUT.pickle -o out.html) to see a\n"
               "what-if in PyTorch's own view. RESULT.json: a 'gmsim run --json' result (or\n"
               "'gmsim compare --json': its winner) whose inputs are simulated again;\n"
               "options given here override them.\n"
               "\n");
    gm_run_opts_help(f, 1);
    fprintf(f, "\n"
               "output:\n"
               "  --memory-viz FILE      the snapshot (a pickle, protocol 2)\n"
               "  -q, --quiet            no summary line\n"
               "  -h, --help             this text\n"
               "\n"
               "One trace, one pass (--repeat is refused). 'gmsim import' + 'gmsim fidelity'\n"
               "of the file replay it exactly with --policy pytorch (cli/README.md).\n"
               "exit status: 0 written; 1 bad input; 2 usage\n"
               "\n"
               "example:\n"
               "  gmsim export --memory-viz what-if.pickle --alloc-conf expandable_segments:True\n"
               "      snapshot.pickle\n");
}

enum { OPT_MEMVIZ = 1000 };

typedef struct export_args {
    const char *out;
    int quiet;
} export_args;

static int export_opt(void *ctx, int c, const char *arg, gm_err *err)
{
    export_args *a = ctx;
    switch (c) {
    case 'h':
        usage(stdout);
        return GM_CLI_DONE;
    case 'q':
        a->quiet = 1;
        return GM_OK;
    case OPT_MEMVIZ:
        a->out = arg;
        return GM_OK;
    default:
        return gm_errf(err, GM_EUSAGE, "unexpected option");
    }
}

/* A file whose first non-blank byte is '{': a JSON result, not a trace. */
static int is_json(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    int c;
    while ((c = fgetc(f)) == ' ' || c == '\n' || c == '\r' || c == '\t') {
    }
    fclose(f);
    return c == '{';
}

static json_t *jget(json_t *o, const char *k)
{
    return json_object_get(o, k);
}

/* The gmsim-result/1 object in root: root itself, or a compare's winner. */
static json_t *result_of(json_t *root)
{
    if (json_is_object(jget(root, "inputs"))) return root;
    json_t *w = jget(root, "winner"), *list = jget(root, "results");
    if (json_is_object(w) && json_is_object(jget(w, "inputs"))) return w;
    const char *name = json_is_string(w)   ? json_string_value(w)
                       : json_is_object(w) ? json_string_value(jget(w, "policy"))
                                           : NULL;
    for (size_t i = 0; name && i < json_array_size(list); i++) {
        json_t *r = json_array_get(list, i);
        if (json_is_object(jget(r, "result"))) r = jget(r, "result");
        const char *p = json_string_value(jget(jget(r, "inputs"), "policy"));
        if (p && !strcmp(p, name)) return r;
    }
    return NULL;
}

/* argv for the result's inputs, then the command line's own arguments (so
 * that they override), then the result's trace. The strings belong to root
 * or to bufs. */
static int result_argv(json_t *root, const char *path, int argc, char **argv, int skip, char ***out,
                       int *outc, char bufs[4][64], gm_err *err)
{
    json_t *r = result_of(root);
    if (!r)
        return gm_errf(err, GM_EINVAL,
                       "%s: not a gmsim result (no \"inputs\"; nor a compare result with a "
                       "winner); write one with 'gmsim run --json' or 'gmsim compare --json'",
                       path);
    json_t *in = jget(r, "inputs"), *ts = jget(r, "tenants");
    if (json_array_size(ts) != 1)
        return gm_errf(err, GM_EUSAGE,
                       "%s: the result has %zu traces; a PyTorch snapshot is one process: "
                       "export one of them by giving its trace instead",
                       path, json_array_size(ts));
    const char *trace = json_string_value(jget(json_array_get(ts, 0), "trace"));
    if (!trace) return gm_errf(err, GM_EINVAL, "%s: its tenant has no trace path", path);
    char **v = calloc((size_t)argc + 24, sizeof *v);
    if (!v) return gm_errf(err, GM_ENOMEM, "out of memory");
    int n = 0;
    v[n++] = argv[0];
    const char *s;
    if ((s = json_string_value(jget(in, "policy")))) v[n++] = "--policy", v[n++] = (char *)s;
    if ((s = json_string_value(jget(in, "allocator")))) v[n++] = "--allocator", v[n++] = (char *)s;
    if ((s = json_string_value(jget(in, "alloc_conf_given"))))
        v[n++] = "--alloc-conf", v[n++] = (char *)s;
    json_t *cap = jget(in, "capacity_bytes"), *ovh = jget(in, "overhead_bytes");
    if (json_is_integer(cap) && json_integer_value(cap) > 0) {
        snprintf(bufs[0], 64, "%lld", (long long)json_integer_value(cap));
        v[n++] = "--capacity", v[n++] = bufs[0];
    }
    if (json_is_integer(ovh) && json_integer_value(ovh) >= 0) {
        snprintf(bufs[1], 64, "%lld", (long long)json_integer_value(ovh));
        v[n++] = "--overhead", v[n++] = bufs[1];
    }
    json_t *fr = jget(in, "memory_fraction");
    if (json_is_number(fr) && json_number_value(fr) > 0) {
        snprintf(bufs[2], 64, "%.17g", json_number_value(fr));
        v[n++] = "--memory-fraction", v[n++] = bufs[2];
    }
    if ((s = json_string_value(jget(in, "on_oom"))) && !strcmp(s, "skip"))
        v[n++] = "--on-oom", v[n++] = "skip";
    if (json_is_true(jget(in, "lenient"))) v[n++] = "--lenient";
    for (int i = 1; i < argc; i++)
        if (i != skip) v[n++] = argv[i];
    v[n++] = (char *)trace;
    *out = v;
    *outc = n;
    return GM_OK;
}

int cmd_export(int argc, char **argv)
{
    static const struct option extra[] = {
        {"memory-viz", required_argument, NULL, OPT_MEMVIZ},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    gm_err err = {0};
    /* a result in place of the trace: its inputs first, then this command line */
    json_t *root = NULL;
    char **v = NULL, bufs[4][64];
    int skip = 0;
    for (int i = 1; i < argc && !skip; i++) {
        if (argv[i][0] == '-') continue;
        const char *prev = argv[i - 1];
        if (!strcmp(prev, "--device-profile") || !strcmp(prev, "--memory-viz")) continue;
        if (is_json(argv[i])) skip = i;
    }
    if (skip) {
        json_error_t je;
        root = json_load_file(argv[skip], 0, &je);
        if (!root) {
            gm_errf(&err, GM_EINVAL, "%s: line %d: %s (a result from 'gmsim run --json')",
                    argv[skip], je.line, je.text);
            return gm_cmd_fail("export", GM_EINVAL, err.msg);
        }
        int vc, rc = result_argv(root, argv[skip], argc, argv, skip, &v, &vc, bufs, &err);
        if (rc != GM_OK) {
            json_decref(root);
            return gm_cmd_fail("export", rc, err.msg);
        }
        argc = vc;
        argv = v;
    }
    gm_run_opts o;
    gm_run_opts_init(&o);
    export_args args = {0};
    int rc = gm_cli_parse_sim(&o, argc, argv, extra, export_opt, &args, &err);
    int code;
    if (rc != GM_OK) {
        code = gm_cli_parse_sim_exit("export", rc, err.msg);
    } else if (!args.out) {
        code = gm_cmd_usage("export", "say where: --memory-viz OUT.pickle");
    } else if (o.n_tenants == 0) {
        code = gm_cmd_usage("export", "no trace given; e.g. gmsim export --memory-viz "
                                      "out.pickle traces/bert.h5");
    } else if (gm_cli_output_not_trace("--memory-viz", args.out, &o, &err)) {
        code = gm_cmd_fail("export", GM_EUSAGE, err.msg);
    } else {
        gm_sim_config cfg;
        gm_run_opts_config(&o, &cfg);
        gm_memviz_summary s;
        rc = gm_memviz_export(&cfg, args.out, &s, &err);
        if (rc != GM_OK) {
            code = gm_cmd_fail("export", rc, err.msg);
        } else {
            code = 0;
            if (!args.quiet) {
                char b[32];
                fprintf(stderr,
                        "gmsim export: %s: %llu entries, %llu segments holding %llu live "
                        "blocks%s, %s\n",
                        args.out, (unsigned long long)s.entries, (unsigned long long)s.segments,
                        (unsigned long long)s.live_blocks,
                        s.aborted ? " (the run stopped at its OOM)" : "",
                        gm_fmt_bytes(s.bytes, b, sizeof b));
            }
        }
    }
    gm_run_opts_free(&o);
    free(v);
    json_decref(root);
    return code;
}
