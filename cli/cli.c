/* cli.c - see cli.h. */
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/outfile.h"
#include "base/units.h"

/* getopt_long's complaint in gmsim's words (opterr is off). */
static int bad_option(int c, char **argv, gm_err *err)
{
    const char *arg = argv[optind - 1];
    if (c == ':') return gm_errf(err, GM_EUSAGE, "option '%s' needs a value", arg);
    if (!strncmp(arg, "--", 2) || !optopt)
        return gm_errf(err, GM_EUSAGE, "unknown option '%s'", arg);
    return gm_errf(err, GM_EUSAGE, "unknown option '-%c'", optopt);
}

/*
 * The value of an output option (--json, --html, -o/--output) is the file to
 * write: never an option (`--json --html r.html`); for --json and --html
 * never a trace or snapshot that exists (`gmsim run --json trace.h5` would
 * take the trace as the output and then find no trace). "-" is standard
 * output.
 */
static int check_output(const char *opt, const char *value, gm_err *err)
{
    if (!value || !strcmp(value, "-")) return GM_OK;
    if (!*value)
        return gm_errf(err, GM_EUSAGE, "%s needs a file name to write (or - for standard output)",
                       opt);
    if (value[0] == '-')
        return gm_errf(err, GM_EUSAGE,
                       "%s %s: that is an option, not a file to write; give the file first, e.g. "
                       "%s out.%s (or %s - for standard output)",
                       opt, value, opt, strcmp(opt, "--html") ? "json" : "html", opt);
    /* -o writes traces too (import, gen, scale): an old trace may be replaced */
    const char *kind = opt[1] == '-' && strcmp(opt, "--output") ? gm_cli_sniff(value) : "";
    if (!strcmp(kind, "hdf5") || !strcmp(kind, "torch") || !strcmp(kind, "rmm"))
        return gm_errf(err, GM_EUSAGE,
                       "%s %s: that is a %s, not a file to write; %s takes the output file (e.g. "
                       "%s out.%s, or %s - for standard output), and the trace goes after the "
                       "options",
                       opt, value,
                       !strcmp(kind, "hdf5")    ? "trace (an HDF5 file)"
                       : !strcmp(kind, "torch") ? "PyTorch memory snapshot"
                                                : "RMM log",
                       opt, opt, strcmp(opt, "--html") ? "json" : "html", opt);
    return GM_OK;
}

/* The output option the last getopt_long result was, or NULL. */
static const char *output_option(int c, int index, const struct option *longopts)
{
    if (c == 'o') return "-o";
    if (index < 0) return NULL;
    const char *n = longopts[index].name;
    if (longopts[index].has_arg != required_argument) return NULL;
    if (!strcmp(n, "json")) return "--json";
    if (!strcmp(n, "html")) return "--html";
    if (!strcmp(n, "output")) return "--output";
    return NULL;
}

int gm_cli_parse(int argc, char **argv, const char *shortopts, const struct option *longopts,
                 gm_cli_fn fn, void *ctx, gm_err *err)
{
    char opts[64];
    /* '-': operands in order (c == 1); ':': a missing value is ':' */
    snprintf(opts, sizeof opts, "-:%s", shortopts);
    optind = 0; /* glibc: full re-initialisation, should a process parse twice */
    opterr = 0;
    int c, rc, index = -1;
    while ((c = getopt_long(argc, argv, opts, longopts, &index)) != -1) {
        if (c == '?' || c == ':') return bad_option(c, argv, err);
        const char *out = output_option(c, index, longopts);
        index = -1;
        if (out && (rc = check_output(out, optarg, err)) != GM_OK) return rc;
        if ((rc = fn(ctx, c, optarg, err)) != GM_OK) return rc;
    }
    for (; optind < argc; optind++) /* after "--" */
        if ((rc = fn(ctx, 1, argv[optind], err)) != GM_OK) return rc;
    return GM_OK;
}

typedef struct sim_ctx {
    gm_run_opts *o;
    gm_cli_fn fn;
    void *ctx;
} sim_ctx;

enum { OPT_PROGRESS = 3000, OPT_NO_PROGRESS };

static int sim_opt(void *arg, int c, const char *value, gm_err *err)
{
    sim_ctx *s = arg;
    if (c == OPT_PROGRESS || c == OPT_NO_PROGRESS) {
        gm_cli_progress_set(c == OPT_PROGRESS);
        return GM_OK;
    }
    if (gm_run_opts_owns(c)) return gm_run_opts_parse(s->o, c, value, err);
    return s->fn(s->ctx, c, value, err);
}

int gm_cli_parse_sim(gm_run_opts *o, int argc, char **argv, const struct option *extra,
                     gm_cli_fn fn, void *ctx, gm_err *err)
{
    struct option longopts[GM_RUN_OPTS_LONGOPTS + 2];
    if (!gm_run_opts_longopts(longopts, GM_RUN_OPTS_LONGOPTS, extra))
        return gm_errf(err, GM_EUSAGE, "internal error: the option table is too small");
    size_t n = 0;
    while (longopts[n].name)
        n++;
    longopts[n++] = (struct option){"progress", no_argument, NULL, OPT_PROGRESS};
    longopts[n++] = (struct option){"no-progress", no_argument, NULL, OPT_NO_PROGRESS};
    longopts[n] = (struct option){NULL, 0, NULL, 0};
    sim_ctx s = {o, fn, ctx};
    int rc = gm_cli_parse(argc, argv, "qh", longopts, sim_opt, &s, err);
    if (rc != GM_OK) return rc;
    if (o->size_note[0]) gm_cli_note(argv[0], "--capacity %s", o->size_note);
    rc = gm_cli_resolve_tenants(o, err); /* snapshots where traces are expected */
    return rc == GM_OK ? GM_OK : GM_CLI_INPUT;
}

int gm_cli_parse_sim_exit(const char *cmd, int rc, const char *msg)
{
    return rc == GM_CLI_DONE ? 0
                             : gm_cmd_fail(cmd, rc == GM_CLI_INPUT ? GM_EINVAL : GM_EUSAGE, msg);
}

int gm_cli_outputs_not_trace(const char *json, const char *html, const gm_run_opts *o, gm_err *err)
{
    int rc = gm_cli_output_not_trace("--json", json, o, err);
    return rc ? rc : gm_cli_output_not_trace("--html", html, o, err);
}

int gm_cmd_fail(const char *cmd, int code, const char *msg)
{
    fprintf(stderr, "gmsim %s: %s\n", cmd, msg);
    if (code != GM_EUSAGE) return 1;
    fprintf(stderr, "(run 'gmsim %s --help' for the options)\n", cmd);
    return 2;
}

int gm_cmd_usage(const char *cmd, const char *fmt, ...)
{
    gm_err err;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err.msg, sizeof err.msg, fmt, ap);
    va_end(ap);
    return gm_cmd_fail(cmd, GM_EUSAGE, err.msg);
}

void gm_cli_note(const char *cmd, const char *fmt, ...)
{
    static int noted; /* once per process: the executable's own state */
    if (noted++) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "gmsim %s: note: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int gm_cli_size(const char *cmd, const char *arg, const char *what, uint64_t *out, gm_err *err)
{
    if (gm_parse_size(arg, what, out, err)) return GM_EUSAGE;
    char note[160];
    if (gm_size_decimal_note(arg, *out, note, sizeof note)) gm_cli_note(cmd, "%s %s", what, note);
    return GM_OK;
}

int gm_cli_threads(const char *arg, int *out, gm_err *err)
{
    double v;
    if (gm_parse_double(arg, "--threads", 1, 4096, &v, err)) return GM_EUSAGE;
    if (v != (double)(int)v)
        return gm_errf(err, GM_EUSAGE, "--threads takes a whole number, not '%s'", arg);
    *out = (int)v;
    return GM_OK;
}

int gm_cli_device(const char *arg, int *out, gm_err *err)
{
    char *end;
    long v = strtol(arg, &end, 10);
    if (!*arg || *end || v < 0 || v > 63)
        return gm_errf(err, GM_EUSAGE, "--device takes a CUDA device index 0..63, not '%s'", arg);
    *out = (int)v;
    return GM_OK;
}

int gm_cli_compress(const char *arg, gm_trace_write_opts *wo, gm_err *err)
{
    if (!strcmp(arg, "none"))
        wo->compress = GM_COMPRESS_NONE;
    else if (!strcmp(arg, "deflate"))
        wo->compress = GM_COMPRESS_DEFLATE;
    else
        return gm_errf(err, GM_EUSAGE, "--compress takes none or deflate, not '%s'", arg);
    return GM_OK;
}

int gm_cli_uint(const char *opt, const char *s, unsigned long long max, unsigned long long *out,
                gm_err *err)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (!*s || *end || *s == '-' || errno || v > max)
        return gm_errf(err, GM_EUSAGE,
                       "%s: '%s' is not a whole number (at most %llu); give e.g. %s 12", opt, s,
                       max, opt);
    *out = v;
    return GM_OK;
}

int gm_cli_top_sites(const char *s, size_t *out, gm_err *err)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (!*s || *end || *s == '-' || *s == '+' || errno || v < 1 || v > GM_CLI_TOP_SITES_MAX)
        return gm_errf(err, GM_EUSAGE,
                       "--top-sites: '%s' is not a number of call sites; give a whole number "
                       "from 1 to %d, e.g. --top-sites 10",
                       s, GM_CLI_TOP_SITES_MAX);
    *out = (size_t)v;
    return GM_OK;
}

int gm_cli_int(const char *opt, const char *s, int *out, gm_err *err)
{
    unsigned long long v;
    int rc = gm_cli_uint(opt, s, INT_MAX, &v, err);
    if (rc == GM_OK) *out = (int)v;
    return rc;
}

char *gm_cli_join_command(int argc, char **argv)
{
    size_t len = strlen("gmsim") + 1;
    for (int i = 0; i < argc; i++)
        len += strlen(argv[i]) + 3;
    char *s = malloc(len);
    if (!s) return NULL;
    strcpy(s, "gmsim");
    for (int i = 0; i < argc; i++) {
        int quote = argv[i][0] == '\0' || strpbrk(argv[i], " \t\"'") != NULL;
        strcat(s, quote ? " '" : " ");
        strcat(s, argv[i]);
        if (quote) strcat(s, "'");
    }
    return s;
}

int gm_cli_output_not_input(const char *opt, const char *out, const char *const *in, size_t n,
                            gm_err *err)
{
    for (size_t i = 0; out && i < n; i++)
        if (in[i] && gm_out_same_file(out, in[i]))
            return gm_errf(err, GM_EUSAGE,
                           "%s %s: that is the input %s; writing it would destroy the input — "
                           "choose another file",
                           opt, out, in[i]);
    return GM_OK;
}

FILE *gm_cli_text_out(const char *json, const char *html)
{
    return (json && gm_out_is_stdout(json)) || (html && gm_out_is_stdout(html)) ? stderr : stdout;
}

int gm_cli_output_not_trace(const char *opt, const char *out, const gm_run_opts *o, gm_err *err)
{
    for (size_t i = 0; out && i < o->n_tenants; i++) {
        /* the path, and the snapshot it was imported from (its name) */
        const char *p[2] = {o->tenants[i].path, o->tenants[i].name};
        int rc = gm_cli_output_not_input(opt, out, p, 2, err);
        if (rc) return rc;
    }
    return GM_OK;
}
