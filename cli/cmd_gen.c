/*
 * cmd_gen.c - `gmsim gen WORKLOAD [options] -o OUT.h5`: write a synthetic
 * workload trace. bert is here (traces/gen_bert.h describes the model);
 * gpt, llama and resnet50 are gen_models.c (traces/GENERATORS.md).
 */
#include "cli.h"
#include "commands.h"
#include "base/outfile.h"
#include "gen_models.h"
#include "gen_serve.h"
#include "base/units.h"
#include "traces/gen_bert.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void gen_usage(FILE *f)
{
    gm_bert_params d;
    gm_bert_defaults(&d);
    fprintf(f,
            "usage: gmsim gen bert|gpt|llama|resnet50|llm-serve [options] -o OUT.h5\n"
            "\n"
            "Workloads: bert (below), gpt (GPT-2), llama (LLaMA: RMSNorm, rotary, GQA,\n"
            "SwiGLU), resnet50 and llm-serve (an inference service: weights, Poisson\n"
            "arrivals, a KV cache per request); 'gmsim gen NAME --help' gives each one's\n"
            "options, and\n"
            "traces/GENERATORS.md every tensor they make.\n"
            "\n"
            "bert writes a synthetic BERT training trace (BertForSequenceClassification, AdamW,\n"
            "zero_grad(set_to_none=True)) as PyTorch's CUDA caching allocator sees it:\n"
            "parameters at t=0, per-iteration inputs, activations saved for backward,\n"
            "temporaries, gradients and optimizer states. Deterministic for a seed.\n"
            "\n"
            "options:\n"
            "  -o, --output FILE      trace to write (required)\n"
            "      --layers N         encoder layers (%d)\n"
            "      --hidden N         hidden size (%d)\n"
            "      --heads N          attention heads, must divide hidden (%d)\n"
            "      --intermediate N   FFN width (4 * hidden)\n"
            "      --vocab N          vocabulary size (%d)\n"
            "      --seq N            sequence length, at most %d (%d)\n"
            "      --batch N          batch size (%d)\n"
            "      --dtype T          fp32, fp16 or bf16 (fp32)\n"
            "      --iterations N     training iterations (%d)\n"
            "      --no-adam          plain SGD: no optimizer states, no update temporaries\n"
            "      --keep-grads       zero_grad(set_to_none=False): gradients live throughout\n"
            "      --no-jitter        every iteration uses --seq (no dynamic padding)\n"
            "      --seed N           random seed of the sequence-length jitter (%llu)\n"
            "      --stream N         stream handle recorded on every event (%llu)\n"
            "      --device-total SIZE  device memory recorded in the trace (80GiB)\n"
            "      --compress C       none (default: read fastest) or deflate (smallest)\n"
            "  -h, --help             show this help\n"
            "\n"
            "example: gmsim gen bert --batch 16 --seq 256 --dtype bf16 -o bert-bf16.h5\n",
            d.layers, d.hidden, d.heads, d.vocab, d.max_positions, d.seq, d.batch, d.iterations,
            (unsigned long long)d.seed, (unsigned long long)d.stream);
}

static int parse_count(const char *opt, const char *s, unsigned long long max,
                       unsigned long long *out, gm_err *err)
{
    return gm_cli_uint(opt, s, max, out, err);
}

static int parse_int_opt(const char *opt, const char *s, int *out, gm_err *err)
{
    return gm_cli_int(opt, s, out, err);
}

static int parse_dtype(const char *s, int *bytes, gm_err *err)
{
    if (!strcmp(s, "fp32") || !strcmp(s, "float32") || !strcmp(s, "float"))
        *bytes = 4;
    else if (!strcmp(s, "fp16") || !strcmp(s, "float16") || !strcmp(s, "half") ||
             !strcmp(s, "bf16") || !strcmp(s, "bfloat16"))
        *bytes = 2;
    else
        return gm_errf(err, GM_EUSAGE, "--dtype: unknown type '%s'; use fp32, fp16 or bf16", s);
    return GM_OK;
}

enum {
    OPT_LAYERS = 256,
    OPT_HIDDEN,
    OPT_HEADS,
    OPT_INTERMEDIATE,
    OPT_VOCAB,
    OPT_SEQ,
    OPT_BATCH,
    OPT_DTYPE,
    OPT_ITERATIONS,
    OPT_NO_ADAM,
    OPT_KEEP_GRADS,
    OPT_NO_JITTER,
    OPT_SEED,
    OPT_STREAM,
    OPT_DEVICE_TOTAL,
    OPT_COMPRESS,
};

static const struct option gen_options[] = {
    {"output", required_argument, NULL, 'o'},
    {"layers", required_argument, NULL, OPT_LAYERS},
    {"hidden", required_argument, NULL, OPT_HIDDEN},
    {"heads", required_argument, NULL, OPT_HEADS},
    {"intermediate", required_argument, NULL, OPT_INTERMEDIATE},
    {"vocab", required_argument, NULL, OPT_VOCAB},
    {"seq", required_argument, NULL, OPT_SEQ},
    {"batch", required_argument, NULL, OPT_BATCH},
    {"dtype", required_argument, NULL, OPT_DTYPE},
    {"iterations", required_argument, NULL, OPT_ITERATIONS},
    {"no-adam", no_argument, NULL, OPT_NO_ADAM},
    {"keep-grads", no_argument, NULL, OPT_KEEP_GRADS},
    {"no-jitter", no_argument, NULL, OPT_NO_JITTER},
    {"seed", required_argument, NULL, OPT_SEED},
    {"stream", required_argument, NULL, OPT_STREAM},
    {"device-total", required_argument, NULL, OPT_DEVICE_TOTAL},
    {"compress", required_argument, NULL, OPT_COMPRESS},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

typedef struct gen_args {
    gm_bert_params p;
    gm_trace_write_opts wopts;
    const char *out;
    const char *workload, *extra; /* the operand, and the first one too many */
} gen_args;

/* "--layers" for OPT_LAYERS: option values' messages name the option. */
static const char *opt_name(int c, char *buf, size_t len)
{
    for (size_t i = 0; gen_options[i].name; i++)
        if (gen_options[i].val == c) {
            snprintf(buf, len, "--%s", gen_options[i].name);
            return buf;
        }
    return "?";
}

/* One option or operand into a. */
static int gen_option(void *ctx, int c, const char *arg, gm_err *err)
{
    gen_args *a = ctx;
    unsigned long long v;
    char opt[64];
    opt_name(c, opt, sizeof opt);
    switch (c) {
    case 1:
        if (!a->workload)
            a->workload = arg;
        else if (!a->extra)
            a->extra = arg;
        return GM_OK;
    case 'o':
        a->out = arg;
        return GM_OK;
    case 'h':
        gen_usage(stdout);
        return GM_CLI_DONE;
    case OPT_LAYERS:
        return parse_int_opt(opt, arg, &a->p.layers, err);
    case OPT_HIDDEN:
        return parse_int_opt(opt, arg, &a->p.hidden, err);
    case OPT_HEADS:
        return parse_int_opt(opt, arg, &a->p.heads, err);
    case OPT_INTERMEDIATE:
        return parse_int_opt(opt, arg, &a->p.intermediate, err);
    case OPT_VOCAB:
        return parse_int_opt(opt, arg, &a->p.vocab, err);
    case OPT_SEQ:
        return parse_int_opt(opt, arg, &a->p.seq, err);
    case OPT_BATCH:
        return parse_int_opt(opt, arg, &a->p.batch, err);
    case OPT_ITERATIONS:
        return parse_int_opt(opt, arg, &a->p.iterations, err);
    case OPT_DTYPE:
        return parse_dtype(arg, &a->p.dtype_bytes, err);
    case OPT_NO_ADAM:
        a->p.adam = 0;
        return GM_OK;
    case OPT_KEEP_GRADS:
        a->p.set_to_none = 0;
        return GM_OK;
    case OPT_NO_JITTER:
        a->p.jitter = 0;
        return GM_OK;
    case OPT_SEED:
        if (parse_count(opt, arg, UINT64_MAX, &v, err)) return GM_EUSAGE;
        a->p.seed = v;
        return GM_OK;
    case OPT_STREAM:
        if (parse_count(opt, arg, UINT64_MAX, &v, err)) return GM_EUSAGE;
        a->p.stream = v;
        return GM_OK;
    case OPT_DEVICE_TOTAL:
        if (gm_cli_size("gen", arg, "--device-total", &a->p.device_total_bytes, err))
            return GM_EUSAGE;
        return GM_OK;
    case OPT_COMPRESS:
        return gm_cli_compress(arg, &a->wopts, err);
    default:
        return gm_errf(err, GM_EUSAGE, "unexpected option");
    }
}

/* Parse, check, write; returns the exit code. */
static int gen_run(gen_args *a, int argc, char **argv, const char *command)
{
    gm_err err;
    int rc = gm_cli_parse(argc, argv, "o:h", gen_options, gen_option, a, &err);
    if (rc != GM_OK) return rc == GM_CLI_DONE ? 0 : gm_cmd_fail("gen", GM_EUSAGE, err.msg);
    if (!a->workload)
        return gm_cmd_usage("gen",
                            "missing the workload; use bert, gpt, llama, resnet50 or llm-serve "
                            "(e.g. gmsim gen bert -o bert.h5)");
    if (strcmp(a->workload, "bert"))
        return gm_cmd_usage("gen",
                            "unknown workload '%s'; use bert, gpt, llama, resnet50 or llm-serve",
                            a->workload);
    if (a->extra)
        return gm_cmd_usage("gen", "unexpected argument '%s' after the workload", a->extra);
    if (!a->out) return gm_cmd_usage("gen", "missing the output file; add -o OUT.h5");

    if (gm_bert_check(&a->p, &err) != GM_OK) return gm_cmd_fail("gen", GM_EUSAGE, err.msg);
    gm_bert_stats st;
    if (gm_bert_write_trace(a->out, &a->p, &a->wopts, command, &st, &err) != GM_OK)
        return gm_cmd_fail("gen", GM_EIO, err.msg);
    char peak[32], params[32], span[32];
    fprintf(gm_out_is_stdout(a->out) ? stderr : stdout,
            "wrote %s: %llu events, %d iterations, %s of parameters, peak live %s, span %s\n",
            a->out, (unsigned long long)st.events, a->p.iterations,
            gm_fmt_bytes(st.param_bytes, params, sizeof params),
            gm_fmt_bytes(st.peak_live_bytes, peak, sizeof peak),
            gm_fmt_ns(st.end_t_ns, span, sizeof span));
    return 0;
}

int cmd_gen(int argc, char **argv)
{
    gen_args a;
    memset(&a, 0, sizeof a);
    gm_bert_defaults(&a.p);
    a.wopts.compress = GM_COMPRESS_NONE;     /* traces/FORMAT.md: read 3x faster end to end */
    a.wopts.on_temp = gm_cli_remove_on_exit; /* no TARGET.tmp.<pid> left if killed */
    a.wopts.deflate_level = 4;
    a.wopts.chunk_events = GM_TRACE_CHUNK_EVENTS;
    char *command = gm_cli_join_command(argc, argv); /* recorded in the trace */
    if (!command) return gm_cmd_fail("gen", GM_ENOMEM, "out of host memory");
    /* the workload: the first argument (or, after options, the first that names one) */
    const char *model = NULL;
    if (argc > 1 && argv[1][0] != '-')
        model = gm_gen_model_known(argv[1]) ? argv[1] : NULL;
    else
        for (int i = 1; i < argc && !model; i++)
            if (gm_gen_model_known(argv[i])) model = argv[i];
    int serve = 0;
    for (int i = 1; i < argc && !model; i++)
        if (!strcmp(argv[i], "llm-serve")) serve = 1;
    int rc = model   ? gm_gen_model_cmd(model, argc, argv, command)
             : serve ? gm_gen_serve_cmd(argc, argv, command)
                     : gen_run(&a, argc, argv, command);
    free(command);
    return rc;
}
