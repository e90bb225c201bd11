/*
 * cmd_fidelity.c - `gmsim fidelity SNAPSHOT`: import a PyTorch memory
 * snapshot (to a temporary trace), replay its tensor events through the
 * pytorch allocator model from the rebuilt initial state with the recorded
 * allocator settings, and compare the model's driver calls with PyTorch's
 * recorded segment_alloc / segment_free (study/fidelity.h); with the recorded
 * addresses, also check that every tensor lands at PyTorch's address. Exit 0
 * when both agree on every device, 1 when not, so it can gate tests.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "base/version.h"
#include "reports/results.h"
#include "reports/table.h"
#include "study/fidelity.h"
#include "traces/import_torch.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: gmsim fidelity [options] INPUT\n"
               "\n"
               "How faithfully gmsim's pytorch allocator model reproduces a real run. INPUT is a\n"
               "PyTorch memory snapshot (imported as 'gmsim import' would) or a trace with\n"
               "recorded segment events. Its alloc/free events are replayed through the model\n"
               "from the rebuilt initial state, with the recorded allocator settings, and the\n"
               "model's cudaMalloc/cudaFree calls are compared with PyTorch's recorded\n"
               "segment_alloc/segment_free: matched, missing (PyTorch only), extra (model only),\n"
               "the first divergence, and the largest error in reserved bytes over time.\n"
               "With the recorded addresses, each allocation's address in the model is also\n"
               "compared with the one PyTorch recorded (block placement).\n"
               "Exit status: 0 when the sequences are identical and every allocation is at\n"
               "PyTorch's address, 1 when not (or on error).\n"
               "\n"
               "options:\n"
               "      --device N         check only CUDA device N of a snapshot (default: all)\n"
               "      --capacity SIZE    device memory (default: the trace's, else 1TiB: a\n"
               "                         snapshot does not record it)\n"
               "      --alloc-conf STR   PYTORCH_CUDA_ALLOC_CONF for the model (default: the\n"
               "                         snapshot's allocator_settings)\n"
               "      --fresh-addresses  let the simulated GPU choose segment addresses instead\n"
               "                         of handing the model the recorded ones\n"
               "      --json FILE        write the counts, divergence and every call as JSON\n"
               "  -q, --quiet            print only errors\n"
               "  -h, --help             this text\n"
               "\n"
               "example: gmsim fidelity tests/data/small-with-segments.pickle\n");
}

static int is_hdf5(const char *path)
{
    unsigned char sig[8] = {0};
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t n = fread(sig, 1, sizeof sig, f);
    fclose(f);
    return n == 8 && !memcmp(sig, "\x89HDF\r\n\x1a\n", 8);
}

typedef struct run {
    const char *input;
    gm_fidelity_opts o;
    int quiet;
    json_t *devices;
    int all_exact;
} run;

static int check_trace(run *r, const char *path, int device, gm_err *err)
{
    gm_fidelity f;
    if (gm_fidelity_check(path, &r->o, &f, err)) return err->code;
    if (!r->quiet) gm_table_fidelity(stdout, r->input, device, &f);
    r->all_exact &= gm_fidelity_exact(&f);
    json_t *j = gm_fidelity_json(&f);
    if (j) {
        json_object_set_new(j, "device", json_integer(device));
        json_array_append_new(r->devices, j);
    }
    gm_fidelity_free(&f);
    return GM_OK;
}

/* A device whose data could not be imported: said, counted as not exact,
 * and the other devices still checked. */
static void report_failed(run *r, const gm_torch_failure *fl)
{
    fprintf(stderr, "gmsim fidelity: %s\n", fl->msg);
    if (!r->quiet)
        printf("%s, device %d: not checked: its data is damaged (above)\n", r->input, fl->device);
    r->all_exact = 0;
    json_t *j = json_pack("{s:i, s:b, s:o}", "device", fl->device, "exact", 0, "error",
                          gm_json_text(fl->msg));
    if (j) json_array_append_new(r->devices, j);
}

/* Import each device of the snapshot into a temporary trace and check it. */
static int check_snapshot(run *r, int device, gm_err *err)
{
    gm_torch_import *imp;
    gm_torch_opts to = {.name = r->input, .command = "gmsim fidelity", .device = device};
    if (gm_torch_import_file(r->input, &to, &imp, err)) return err->code;
    const char *tmp = getenv("TMPDIR");
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s/gmsim-fidelity-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    int made = mkdtemp(dir) != NULL;
    int rc = made ? GM_OK
                  : gm_errf(err, GM_EIO, "cannot create a temporary directory under %s; set TMPDIR",
                            tmp && *tmp ? tmp : "/tmp");
    size_t next_failed = 0; /* devices in order: a damaged one is reported where it is */
    for (size_t i = 0; rc == GM_OK && i <= imp->n; i++) {
        for (; next_failed < imp->n_failed &&
               (i == imp->n || imp->failed[next_failed].device < imp->dev[i].device);
             next_failed++)
            report_failed(r, &imp->failed[next_failed]);
        if (i == imp->n) break;
        snprintf(path, sizeof path, "%s/dev%d.h5", dir, imp->dev[i].device);
        rc = gm_import_trace_write(&imp->dev[i], path, NULL, err);
        if (rc == GM_OK) rc = check_trace(r, path, imp->dev[i].device, err);
        unlink(path);
    }
    if (made) rmdir(dir);
    gm_torch_import_free(imp);
    return rc;
}

enum { O_DEVICE = 1000, O_CAPACITY, O_CONF, O_FRESH, O_JSON };

typedef struct fidelity_args {
    run r;
    const char *json_path;
    int device;
} fidelity_args;

static int fidelity_opt(void *ctx, int c, const char *arg, gm_err *err)
{
    fidelity_args *a = ctx;
    switch (c) {
    case 1:
        if (a->r.input)
            return gm_errf(err, GM_EUSAGE, "give exactly one input; '%s' is extra", arg);
        a->r.input = arg;
        return GM_OK;
    case O_DEVICE:
        return gm_cli_device(arg, &a->device, err);
    case O_CAPACITY:
        if (gm_parse_size(arg, "--capacity", &a->r.o.capacity_bytes, err)) return GM_EUSAGE;
        if (!a->r.o.capacity_bytes)
            return gm_errf(err, GM_EUSAGE, "--capacity must be more than 0 bytes");
        return GM_OK;
    case O_CONF:
        a->r.o.alloc_conf = arg;
        return GM_OK;
    case O_FRESH:
        a->r.o.fresh_addresses = 1;
        return GM_OK;
    case O_JSON:
        a->json_path = arg;
        return GM_OK;
    case 'q':
        a->r.quiet = 1;
        return GM_OK;
    case 'h':
        usage(stdout);
        return GM_CLI_DONE;
    default:
        return gm_errf(err, GM_EUSAGE, "unexpected option");
    }
}

int cmd_fidelity(int argc, char **argv)
{
    static const struct option longopts[] = {{"device", required_argument, NULL, O_DEVICE},
                                             {"capacity", required_argument, NULL, O_CAPACITY},
                                             {"alloc-conf", required_argument, NULL, O_CONF},
                                             {"fresh-addresses", no_argument, NULL, O_FRESH},
                                             {"json", required_argument, NULL, O_JSON},
                                             {"quiet", no_argument, NULL, 'q'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    fidelity_args a = {.r = {.all_exact = 1}, .device = -1};
    gm_err err;
    int rc = gm_cli_parse(argc, argv, "qh", longopts, fidelity_opt, &a, &err);
    if (rc != GM_OK) return rc == GM_CLI_DONE ? 0 : gm_cmd_fail("fidelity", GM_EUSAGE, err.msg);
    if (!a.r.input)
        return gm_cmd_usage("fidelity", "no input given; e.g. gmsim fidelity snapshot.pickle");
    run *r = &a.r;
    int device = a.device;
    const char *json_path = a.json_path;
    if (gm_cli_output_not_input("--json", json_path, &r->input, 1, &err))
        return gm_cmd_fail("fidelity", GM_EUSAGE, err.msg);
    r->devices = json_array();
    rc = is_hdf5(r->input) ? check_trace(r, r->input, device < 0 ? 0 : device, &err)
                           : check_snapshot(r, device, &err);
    if (rc == GM_OK && json_path) {
        json_t *root =
            json_pack("{s:s, s:o, s:b, s:O}", "gmsim_version", GM_VERSION, "input",
                      gm_json_text(r->input), "exact", r->all_exact, "devices", r->devices);
        rc = gm_json_write(root, json_path, &err);
        json_decref(root);
    }
    json_decref(r->devices);
    if (rc != GM_OK) return gm_cmd_fail("fidelity", rc, err.msg);
    return r->all_exact ? 0 : 1;
}
