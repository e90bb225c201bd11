/*
 * cmd_import.c - `gmsim import INPUT -o OUT.h5`: a PyTorch memory snapshot
 * (traces/import_torch.h) or a RAPIDS RMM log (traces/import_rmm.h) to a
 * gmsim trace. The rules are traces/IMPORT.md.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "base/err.h"
#include "traces/import_rmm.h"
#include "traces/import_torch.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gmsim import [options] INPUT -o OUT.h5\n"
            "\n"
            "Turns a recorded allocation history into a gmsim trace:\n"
            "  torch  a PyTorch memory snapshot (torch.cuda.memory._dump_snapshot(), any layout\n"
            "         from PyTorch 1.13 on), read without Python and without running any code\n"
            "         from it; the memory alive before its first entry is rebuilt into\n"
            "         /initial_state, tensors get categories inferred from their stacks\n"
            "  rmm    a RAPIDS RMM logging_resource_adaptor CSV log\n"
            "The rules (time, categories, what is refused) are in traces/IMPORT.md.\n"
            "\n"
            "options:\n"
            "  -o, --output FILE      trace to write (required); a snapshot of several devices\n"
            "                         writes FILE-dev<N>.h5 per device unless --device is given\n"
            "      --device N         import only CUDA device N of a snapshot\n"
            "      --format F         torch or rmm (default: from the file's first bytes)\n"
            "      --compress C       none (default) or deflate\n"
            "  -q, --quiet            print nothing on success\n"
            "  -h, --help             this text\n"
            "\n"
            "example: gmsim import snapshot.pickle -o run.h5 && gmsim fidelity snapshot.pickle\n");
}

static int usage_error(const char *msg, const char *arg)
{
    fprintf(stderr, "gmsim import: %s%s%s\n(run 'gmsim import --help' for the options)\n", msg,
            arg ? ": " : "", arg ? arg : "");
    return 2;
}

/* "torch" or "rmm" from the first bytes: a CSV log starts with its header. */
static const char *sniff(const char *path)
{
    char buf[8] = {0};
    FILE *f = fopen(path, "rb");
    if (!f) return "torch"; /* the importer reports the open error */
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    return n >= 6 && !strncmp(buf, "Thread", 6) ? "rmm" : "torch";
}

/* OUT.h5 -> OUT-dev3.h5 (or OUT-dev3 when OUT has no extension). */
static void dev_path(const char *out, int device, char *buf, size_t len)
{
    const char *dot = strrchr(out, '.'), *slash = strrchr(out, '/');
    if (!dot || (slash && dot < slash)) dot = out + strlen(out);
    snprintf(buf, len, "%.*s-dev%d%s", (int)(dot - out), out, device, dot);
}

static void command_line(int argc, char **argv, char *buf, size_t len)
{
    size_t n = (size_t)snprintf(buf, len, "gmsim");
    for (int i = 0; i < argc && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, " %s", argv[i]);
}

static int write_one(const gm_import_trace *t, const char *path, const gm_trace_write_opts *wo,
                     int quiet)
{
    gm_err err;
    if (gm_import_trace_write(t, path, wo, &err)) return gm_cmd_fail("import", err.code, err.msg);
    if (!quiet) printf("wrote %s: %s\n", path, t->summary);
    return 0;
}

static int import_torch(const char *in, const char *out, int device, const char *cmd,
                        const gm_trace_write_opts *wo, int quiet)
{
    gm_err err;
    gm_torch_import *imp;
    gm_torch_opts o = {.name = in, .command = cmd, .device = device};
    if (gm_torch_import_file(in, &o, &imp, &err)) return gm_cmd_fail("import", err.code, err.msg);
    int rc = 0;
    for (size_t i = 0; i < imp->n && !rc; i++) {
        char path[4096];
        if (imp->n > 1)
            dev_path(out, imp->dev[i].device, path, sizeof path);
        else
            snprintf(path, sizeof path, "%s", out);
        rc = write_one(&imp->dev[i], path, wo, quiet);
    }
    if (!rc && !quiet)
        printf("(PyTorch memory snapshot, %s layout%s)\n", imp->layout,
               imp->n > 1 ? "; several devices, one trace each: --device N imports one" : "");
    gm_torch_import_free(imp);
    return rc;
}

static int import_rmm(const char *in, const char *out, const char *cmd,
                      const gm_trace_write_opts *wo, int quiet)
{
    gm_err err;
    gm_import_trace t;
    gm_rmm_opts o = {.name = in, .command = cmd};
    if (gm_rmm_import_file(in, &o, &t, &err)) return gm_cmd_fail("import", err.code, err.msg);
    int rc = write_one(&t, out, wo, quiet);
    gm_import_trace_free(&t);
    return rc;
}

int cmd_import(int argc, char **argv)
{
    static const struct option longopts[] = {{"output", required_argument, NULL, 'o'},
                                             {"device", required_argument, NULL, 'd'},
                                             {"format", required_argument, NULL, 'f'},
                                             {"compress", required_argument, NULL, 'c'},
                                             {"quiet", no_argument, NULL, 'q'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    const char *out = NULL, *format = NULL;
    int device = -1, quiet = 0, c;
    gm_trace_write_opts wo = {.compress = GM_COMPRESS_NONE};
    char cmd[2048];
    command_line(argc, argv, cmd, sizeof cmd);
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "o:qh", longopts, NULL)) != -1) {
        char *end;
        switch (c) {
        case 'o':
            out = optarg;
            break;
        case 'd':
            device = (int)strtol(optarg, &end, 10);
            if (!*optarg || *end || device < 0 || device > 63)
                return usage_error("--device takes a CUDA device index 0..63, got", optarg);
            break;
        case 'f':
            if (strcmp(optarg, "torch") && strcmp(optarg, "rmm"))
                return usage_error("--format is torch or rmm, got", optarg);
            format = optarg;
            break;
        case 'c':
            if (!strcmp(optarg, "none"))
                wo.compress = GM_COMPRESS_NONE;
            else if (!strcmp(optarg, "deflate"))
                wo.compress = GM_COMPRESS_DEFLATE;
            else
                return usage_error("--compress is none or deflate, got", optarg);
            break;
        case 'q':
            quiet = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            return usage_error("unknown option or missing value", argv[optind - 1]);
        }
    }
    if (optind != argc - 1)
        return usage_error(optind >= argc ? "no input file given" : "give exactly one input file",
                           NULL);
    if (!out) return usage_error("no output given; add -o OUT.h5", NULL);
    const char *in = argv[optind];
    if (!format) format = sniff(in);
    if (!strcmp(format, "rmm")) {
        if (device >= 0)
            return usage_error("--device applies to PyTorch snapshots; an RMM log is one device",
                               NULL);
        return import_rmm(in, out, cmd, &wo, quiet);
    }
    return import_torch(in, out, device, cmd, &wo, quiet);
}
