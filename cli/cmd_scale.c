/*
 * cmd_scale.c - `gmsim scale A=8 B=16 [C=32] --to 24 -o OUT.h5`: the trace
 * of a program at a new value of one dimension (batch size, sequence
 * length) from its recordings at two or three others (study/scale.h has
 * the rules).
 */
#include "cli.h"
#include "commands.h"
#include "base/addrmap.h"
#include "base/units.h"
#include "study/scale.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: gmsim scale REC=VALUE REC=VALUE [REC=VALUE] --to VALUE -o OUT.h5\n"
               "\n"
               "Writes the trace of a program at a new value of one dimension (batch size,\n"
               "sequence length) from recordings of it at two or three other values. Each\n"
               "REC is a trace or a PyTorch memory snapshot pickle, followed by its value.\n"
               "\n"
               "The recordings are aligned allocation by allocation (same events in the same\n"
               "order, same stream and category); where they differ scale says so and stops.\n"
               "Each allocation's size is fitted to the dimension: fixed when it does not\n"
               "change, the line through two recordings, the parabola through three\n"
               "(attention grows with seq^2); rounded to whole bytes, at least 1. Times are\n"
               "interpolated between the two nearest recordings.\n"
               "\n"
               "options:\n"
               "      --to VALUE         the value to write the trace at (required)\n"
               "  -o, --output FILE      trace to write (required)\n"
               "      --device N         which device of multi-GPU snapshots\n"
               "      --compress C       none (default: read fastest) or deflate (smallest)\n"
               "  -h, --help             this text\n"
               "\n"
               "example:\n"
               "  gmsim scale run-b8.pickle=8 run-b16.pickle=16 --to 24 -o run-b24.h5\n"
               "  gmsim fit --largest batch run-b8.pickle=8 run-b16.pickle=16 --capacity 24GiB\n");
}

enum { OPT_TO = 300, OPT_DEVICE, OPT_COMPRESS };

static const struct option options[] = {
    {"to", required_argument, NULL, OPT_TO},
    {"output", required_argument, NULL, 'o'},
    {"device", required_argument, NULL, OPT_DEVICE},
    {"compress", required_argument, NULL, OPT_COMPRESS},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

typedef struct args {
    char paths[GM_SCALE_MAX_INPUTS][1024];
    gm_scale_input in[GM_SCALE_MAX_INPUTS];
    size_t n;
    int64_t to;
    int has_to, device;
    const char *out;
    gm_trace_write_opts wopts;
} args;

static int option(void *ctx, int c, const char *arg, gm_err *err)
{
    args *a = ctx;
    unsigned long long v;
    switch (c) {
    case 1:
        if (a->n == GM_SCALE_MAX_INPUTS)
            return gm_errf(err, GM_EUSAGE, "at most %d recordings; '%s' is one too many",
                           GM_SCALE_MAX_INPUTS, arg);
        if (gm_scale_input_parse(arg, a->paths[a->n], sizeof a->paths[a->n], &a->in[a->n].x, err))
            return GM_EUSAGE;
        a->in[a->n].path = a->paths[a->n];
        a->n++;
        return GM_OK;
    case OPT_TO:
        if (gm_cli_uint("--to", arg, GM_SCALE_MAX_X, &v, err)) return GM_EUSAGE;
        if (v == 0) return gm_errf(err, GM_EUSAGE, "--to must be at least 1");
        a->to = (int64_t)v;
        a->has_to = 1;
        return GM_OK;
    case 'o':
        a->out = arg;
        return GM_OK;
    case OPT_DEVICE:
        return gm_cli_device(arg, &a->device, err);
    case OPT_COMPRESS:
        return gm_cli_compress(arg, &a->wopts, err);
    case 'h':
        usage(stdout);
        return GM_CLI_DONE;
    default:
        return gm_errf(err, GM_EUSAGE, "unexpected option");
    }
}

/* Peak live requested bytes of an in-memory trace (its initial blocks live from the start). */
static uint64_t peak_live(const gm_import_trace *t)
{
    gm_addrmap m;
    if (gm_addrmap_init(&m, 4096)) return 0;
    uint64_t live = 0, peak = 0, v;
    for (size_t i = 0; i < t->n_init; i++)
        if (t->init[i].kind == GM_INIT_BLOCK &&
            gm_addrmap_put(&m, gm_addrmap_key(t->init[i].addr), t->init[i].size) == GM_OK)
            live += t->init[i].size;
    peak = live;
    for (size_t i = 0; i < t->n_events; i++) {
        const gm_event *e = &t->events[i];
        if (e->op == GM_OP_ALLOC && gm_addrmap_put(&m, gm_addrmap_key(e->addr), e->size) == GM_OK)
            live += e->size;
        else if (e->op == GM_OP_FREE && gm_addrmap_del(&m, gm_addrmap_key(e->addr), &v))
            live -= v;
        if (live > peak) peak = live;
    }
    gm_addrmap_free(&m);
    return peak;
}

static int run(args *a, const char *command, gm_err *err)
{
    gm_scale *s;
    int rc = gm_scale_open(a->in, a->n, a->device, &s, err);
    if (rc) return rc;
    gm_import_trace t;
    rc = gm_scale_at(s, a->to, &t, err);
    if (rc == GM_OK && gm_trace_meta_set(&t.meta.command, command))
        rc = gm_errf(err, GM_ENOMEM, "out of memory");
    if (rc == GM_OK) rc = gm_import_trace_write(&t, a->out, &a->wopts, err);
    if (rc == GM_OK) {
        gm_scale_stats st;
        gm_scale_get_stats(s, &st);
        char b[32];
        printf("wrote %s: at %lld, %llu allocations (%llu constant, %llu linear, %llu "
               "quadratic), peak live %s\n",
               a->out, (long long)a->to, (unsigned long long)st.allocs,
               (unsigned long long)st.constant, (unsigned long long)st.linear,
               (unsigned long long)st.quadratic, gm_fmt_bytes(peak_live(&t), b, sizeof b));
        if (st.clamped)
            printf("  %llu sizes fell below 1 byte at %lld and were set to 1: the value is far "
                   "below the recordings\n",
                   (unsigned long long)st.clamped, (long long)a->to);
        if (st.dropped_segment)
            printf("  %llu segment rows of the recorded allocator left out\n",
                   (unsigned long long)st.dropped_segment);
        for (size_t j = 0; j < a->n; j++) {
            gm_import_trace r;
            if (gm_scale_at(s, a->in[j].x, &r, err) != GM_OK) continue;
            printf("  recorded at %lld (%s): peak live %s\n", (long long)a->in[j].x, a->in[j].path,
                   gm_fmt_bytes(peak_live(&r), b, sizeof b));
            gm_import_trace_free(&r);
        }
    }
    gm_import_trace_free(&t);
    gm_scale_free(s);
    return rc;
}

int cmd_scale(int argc, char **argv)
{
    args a;
    memset(&a, 0, sizeof a);
    a.device = -1;
    a.wopts.compress = GM_COMPRESS_NONE;     /* as gen bert and import (traces/FORMAT.md) */
    a.wopts.on_temp = gm_cli_remove_on_exit; /* no TARGET.tmp.<pid> left if killed */
    a.wopts.deflate_level = 4;
    a.wopts.chunk_events = GM_TRACE_CHUNK_EVENTS;
    gm_err err;
    int rc = gm_cli_parse(argc, argv, "o:h", options, option, &a, &err);
    if (rc != GM_OK) return rc == GM_CLI_DONE ? 0 : gm_cmd_fail("scale", GM_EUSAGE, err.msg);
    if (a.n < 2)
        return gm_cmd_usage("scale", "give two or three recordings, each with its value "
                                     "(e.g. run-b8.h5=8 run-b16.h5=16)");
    if (!a.has_to) return gm_cmd_usage("scale", "missing --to VALUE: where to scale to");
    if (!a.out) return gm_cmd_usage("scale", "missing the output file; add -o OUT.h5");
    char *command = gm_cli_join_command(argc, argv);
    if (!command) return gm_cmd_fail("scale", GM_ENOMEM, "out of host memory");
    rc = run(&a, command, &err);
    free(command);
    return rc == GM_OK ? 0 : gm_cmd_fail("scale", rc, err.msg);
}
