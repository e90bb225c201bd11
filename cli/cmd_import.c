/*
 * cmd_import.c - `gmsim import INPUT -o OUT.h5`: a PyTorch memory snapshot
 * (traces/import_torch.h) or a RAPIDS RMM log (traces/import_rmm.h) to a
 * gmsim trace. The rules are traces/IMPORT.md.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "base/err.h"
#include "base/outfile.h"
#include "base/units.h"
#include "traces/gpus.h"
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
            "      --device-total SIZE  the device's memory, recorded as device_total_bytes\n"
            "                         (snapshots do not record it)\n"
            "      --gpu NAME         the same from a known GPU (traces/GPUS.md): h100-80gb,\n"
            "                         a100-40gb, a100-80gb, h200, l4, rtx4090, ...\n"
            "      --compress C       none (default) or deflate\n"
            "  -q, --quiet            print nothing on success\n"
            "  -h, --help             this text\n"
            "\n"
            "example: gmsim import snapshot.pickle -o run.h5 && gmsim fidelity snapshot.pickle\n");
}

/* "torch" or "rmm" from the first bytes (inputs.c): a CSV log starts with
 * its header; anything else is read as a pickle, whose reader says what is
 * wrong with it. */
static const char *sniff(const char *path)
{
    return strcmp(gm_cli_sniff(path), "rmm") ? "torch" : "rmm";
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
    if (!quiet)
        fprintf(gm_out_is_stdout(path) ? stderr : stdout, "wrote %s: %s\n", path, t->summary);
    return 0;
}

typedef struct import_args {
    const char *in, *out, *format, *gpu;
    int device, quiet;
    uint64_t device_total;
    gm_trace_write_opts wo;
} import_args;

static int import_torch(const import_args *a, const char *cmd)
{
    gm_err err;
    gm_torch_import *imp;
    const char *in = a->in, *out = a->out;
    const gm_trace_write_opts *wo = &a->wo;
    int quiet = a->quiet;
    gm_torch_opts o = {.name = in,
                       .command = cmd,
                       .device = a->device,
                       .device_total_bytes = a->device_total,
                       .device_name = a->gpu};
    if (gm_torch_import_file(in, &o, &imp, &err)) return gm_cmd_fail("import", err.code, err.msg);
    int rc = 0;
    for (size_t i = 0; i < imp->n && !rc; i++) {
        char path[4096];
        if (imp->n + imp->n_failed > 1) /* several devices: one file each */
            dev_path(out, imp->dev[i].device, path, sizeof path);
        else
            snprintf(path, sizeof path, "%s", out);
        if (gm_cli_output_not_input("-o", path, &in, 1, &err)) {
            rc = gm_cmd_fail("import", GM_EUSAGE, err.msg);
            break;
        }
        rc = write_one(&imp->dev[i], path, wo, quiet);
    }
    if (!rc && !quiet)
        fprintf(gm_out_is_stdout(out) ? stderr : stdout, "(PyTorch memory snapshot, %s layout%s)\n",
                imp->layout,
                imp->n + imp->n_failed > 1
                    ? "; several devices, one trace each: --device N imports one"
                    : "");
    for (size_t i = 0; i < imp->n_failed; i++) /* the others were written */
        rc = gm_cmd_fail("import", GM_EINVAL, imp->failed[i].msg);
    gm_torch_import_free(imp);
    return rc;
}

static int import_rmm(const import_args *a, const char *cmd)
{
    gm_err err;
    gm_import_trace t;
    gm_rmm_opts o = {.name = a->in, .command = cmd};
    if (gm_rmm_import_file(a->in, &o, &t, &err)) return gm_cmd_fail("import", err.code, err.msg);
    t.meta.device_total_bytes = a->device_total;
    if (a->gpu && gm_trace_meta_set(&t.meta.device_name, a->gpu))
        return gm_cmd_fail("import", GM_ENOMEM, "out of memory");
    int rc = write_one(&t, a->out, &a->wo, a->quiet);
    gm_import_trace_free(&t);
    return rc;
}

static int import_opt(void *ctx, int c, const char *arg, gm_err *err)
{
    import_args *a = ctx;
    switch (c) {
    case 1:
        if (a->in)
            return gm_errf(err, GM_EUSAGE, "give exactly one input file; '%s' is extra", arg);
        a->in = arg;
        return GM_OK;
    case 'o':
        a->out = arg;
        return GM_OK;
    case 'd':
        return gm_cli_device(arg, &a->device, err);
    case 'f':
        if (strcmp(arg, "torch") && strcmp(arg, "rmm"))
            return gm_errf(err, GM_EUSAGE, "--format takes torch or rmm, not '%s'", arg);
        a->format = arg;
        return GM_OK;
    case 'c':
        return gm_cli_compress(arg, &a->wo, err);
    case 't':
        if (gm_cli_size("import", arg, "--device-total", &a->device_total, err)) return GM_EUSAGE;
        if (!a->device_total) return gm_errf(err, GM_EUSAGE, "--device-total must be above 0");
        return GM_OK;
    case 'g': {
        uint64_t bytes;
        const char *key;
        if (gm_run_opts_gpu(arg, &key, &bytes, err)) return GM_EUSAGE;
        a->device_total = bytes;
        a->gpu = gm_gpu_find(key)->name;
        return GM_OK;
    }
    case 'q':
        a->quiet = 1;
        return GM_OK;
    case 'h':
        usage(stdout);
        return GM_CLI_DONE;
    default:
        return gm_errf(err, GM_EUSAGE, "unexpected option");
    }
}

int cmd_import(int argc, char **argv)
{
    static const struct option longopts[] = {{"output", required_argument, NULL, 'o'},
                                             {"device", required_argument, NULL, 'd'},
                                             {"format", required_argument, NULL, 'f'},
                                             {"compress", required_argument, NULL, 'c'},
                                             {"device-total", required_argument, NULL, 't'},
                                             {"gpu", required_argument, NULL, 'g'},
                                             {"quiet", no_argument, NULL, 'q'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    import_args a = {.device = -1,
                     .wo = {.compress = GM_COMPRESS_NONE, .on_temp = gm_cli_remove_on_exit}};
    char cmd[2048];
    command_line(argc, argv, cmd, sizeof cmd);
    gm_err err;
    int rc = gm_cli_parse(argc, argv, "o:qh", longopts, import_opt, &a, &err);
    if (rc != GM_OK) return rc == GM_CLI_DONE ? 0 : gm_cmd_fail("import", GM_EUSAGE, err.msg);
    if (!a.in) return gm_cmd_usage("import", "no input file given");
    if (!a.out) return gm_cmd_usage("import", "no output given; add -o OUT.h5");
    const char *kind = gm_cli_sniff(a.in);
    if (!a.format && !strcmp(kind, "hdf5")) {
        fprintf(stderr,
                "gmsim import: %s is an HDF5 file, which gmsim reads as a trace as it is: give "
                "it to gmsim run or info directly; import takes PyTorch memory snapshots "
                "(.pickle) and RMM logs (.csv)\n",
                a.in);
        return 1;
    }
    if (!a.format && !strcmp(kind, "csv")) {
        fprintf(stderr,
                "gmsim import: %s is a CSV file, but not an RMM log: RMM's log starts with the "
                "header Thread,Time,Action,Pointer,Size,Stream; if it is one, pass --format rmm\n",
                a.in);
        return 1;
    }
    if (!strcmp(kind, "special")) {
        fprintf(stderr,
                "gmsim import: %s is not a regular file (a FIFO, device or socket); the importer "
                "reads only regular files: copy it into one first\n",
                a.in);
        return 1;
    }
    if (!a.format && !strcmp(kind, "other")) {
        fprintf(stderr,
                "gmsim import: %s is neither a PyTorch memory snapshot (a pickle, as "
                "torch.cuda.memory._dump_snapshot writes) nor an RMM log (CSV); give one of those, "
                "or --format torch|rmm to read it as one\n",
                a.in);
        return 1;
    }
    if (gm_cli_output_not_input("-o", a.out, &a.in, 1, &err))
        return gm_cmd_fail("import", GM_EUSAGE, err.msg);
    const char *format = a.format ? a.format : sniff(a.in);
    if (!strcmp(format, "rmm")) {
        if (a.device >= 0)
            return gm_cmd_usage("import",
                                "--device applies to PyTorch snapshots; an RMM log is one device");
        return import_rmm(&a, cmd);
    }
    return import_torch(&a, cmd);
}
