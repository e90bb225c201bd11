/* gmsim_main.c - the `gmsim` command table: one line per subcommand. */
#include "commands.h"
#include "base/err.h"
#include "base/outfile.h"
#include "base/version.h"
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
};

static const struct command commands[] = {
    {"run", cmd_run, "simulate trace(s) under one allocator and release policy"},
    {"info", cmd_info, "summarize a trace: events, span, peak live, sizes, categories"},
    {"gen", cmd_gen, "write a synthetic workload trace (bert, gpt, llama, resnet50)"},
    {"scale", cmd_scale, "a trace at a new batch / sequence length from 2-3 recordings"},
    {"export", cmd_export, "a simulated run as a PyTorch memory snapshot (its viewer)"},
    {"import", cmd_import, "PyTorch memory snapshot or RMM log -> trace (with initial state)"},
    {"fidelity", cmd_fidelity, "replay a snapshot in the pytorch model, compare driver calls"},
    {"compare", cmd_compare, "rank release policies on the same trace(s), in parallel"},
    {"fit", cmd_fit, "smallest device (or most tenants) each policy runs without OOM"},
    {"tune", cmd_tune, "which PYTORCH_CUDA_ALLOC_CONF: PyTorch's settings searched, ranked"},
    {"sweep", cmd_sweep, "a grid of runs from a spec, on threads or MPI ranks: JSON + HDF5"},
    {"validate", cmd_validate, "compare a prediction with a gmreplay measurement on a GPU"},
    {"report", cmd_report, "write a self-contained HTML report from saved JSON results"},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: gmsim <command> [options] [args]\n\n"
               "Replays GPU allocation traces against allocator models and release policies.\n\n"
               "commands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\n'gmsim <command> --help' describes each command.\n");
}

/* Whatever a command printed must have reached standard output: a full
 * disk, /dev/full or a closed descriptor is an error (exit 1), not a
 * silent loss. */
static int finish(const char *cmd, int rc)
{
    char prog[64];
    snprintf(prog, sizeof prog, "gmsim%s%s", cmd ? " " : "", cmd ? cmd : "");
    return gm_close_stdout(prog, rc);
}

static int dispatch(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("gmsim %s\n", GM_VERSION);
        return 0;
    }
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "gmsim: '%s' is not a command; run 'gmsim --help' for the list\n", argv[1]);
    return 2;
}

int main(int argc, char **argv)
{
    /* an output's temporary file (OUT.tmp.<pid>) is removed if gmsim is
     * killed before it is renamed into place */
    gm_out_set_temp_hook(gm_cli_remove_on_exit, NULL);
    int rc = dispatch(argc, argv);
    const char *cmd = NULL;
    for (size_t i = 0; argc >= 2 && i < NCOMMANDS; i++)
        if (!strcmp(argv[1], commands[i].name)) cmd = commands[i].name;
    return finish(cmd, rc);
}
