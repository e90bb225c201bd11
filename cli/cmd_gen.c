/*
 * cmd_gen.c - `gmsim gen bert [options] -o OUT.h5`: write a synthetic
 * workload trace (traces/gen_bert.h describes the model).
 */
#include "commands.h"
#include "base/units.h"
#include "traces/gen_bert.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void gen_usage(FILE *f)
{
    gm_bert_params d;
    gm_bert_defaults(&d);
    fprintf(f,
            "usage: gmsim gen bert [options] -o OUT.h5\n"
            "\n"
            "Writes a synthetic BERT training trace (BertForSequenceClassification, AdamW,\n"
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
            "      --compress C       none or deflate (deflate)\n"
            "  -h, --help             show this help\n"
            "\n"
            "example: gmsim gen bert --batch 16 --seq 256 --dtype bf16 -o bert-bf16.h5\n",
            d.layers, d.hidden, d.heads, d.vocab, d.max_positions, d.seq, d.batch, d.iterations,
            (unsigned long long)d.seed, (unsigned long long)d.stream);
}

/* Print "gmsim gen: <message>" and the hint to --help; returns exit code 2. */
static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "gmsim gen: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n(run 'gmsim gen --help' for the options)\n");
    va_end(ap);
    return 2;
}

/* Whole number in [0, max] from an option value, or exit code 2 with a message. */
static int parse_count(const char *opt, const char *s, unsigned long long max,
                       unsigned long long *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (!*s || *end || *s == '-' || errno || v > max)
        return usage_error("%s: '%s' is not a whole number (at most %llu); give e.g. %s 12", opt, s,
                           max, opt);
    *out = v;
    return 0;
}

static int parse_int_opt(const char *opt, const char *s, int *out)
{
    unsigned long long v;
    int rc = parse_count(opt, s, INT_MAX, &v);
    if (rc == 0) *out = (int)v;
    return rc;
}

static int parse_dtype(const char *s, int *bytes)
{
    if (!strcmp(s, "fp32") || !strcmp(s, "float32") || !strcmp(s, "float"))
        *bytes = 4;
    else if (!strcmp(s, "fp16") || !strcmp(s, "float16") || !strcmp(s, "half") ||
             !strcmp(s, "bf16") || !strcmp(s, "bfloat16"))
        *bytes = 2;
    else
        return usage_error("--dtype: unknown type '%s'; use fp32, fp16 or bf16", s);
    return 0;
}

/* The command line as one string, for the trace's `command` attribute. */
static char *join_command(int argc, char **argv)
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
    int help;
} gen_args;

/* One option into a; 0 or an exit code. */
static int gen_option(gen_args *a, int c, const char *arg, const char *opt)
{
    unsigned long long v;
    gm_err err;
    switch (c) {
    case 'o':
        a->out = arg;
        return 0;
    case 'h':
        a->help = 1;
        return 0;
    case OPT_LAYERS:
        return parse_int_opt(opt, arg, &a->p.layers);
    case OPT_HIDDEN:
        return parse_int_opt(opt, arg, &a->p.hidden);
    case OPT_HEADS:
        return parse_int_opt(opt, arg, &a->p.heads);
    case OPT_INTERMEDIATE:
        return parse_int_opt(opt, arg, &a->p.intermediate);
    case OPT_VOCAB:
        return parse_int_opt(opt, arg, &a->p.vocab);
    case OPT_SEQ:
        return parse_int_opt(opt, arg, &a->p.seq);
    case OPT_BATCH:
        return parse_int_opt(opt, arg, &a->p.batch);
    case OPT_ITERATIONS:
        return parse_int_opt(opt, arg, &a->p.iterations);
    case OPT_DTYPE:
        return parse_dtype(arg, &a->p.dtype_bytes);
    case OPT_NO_ADAM:
        a->p.adam = 0;
        return 0;
    case OPT_KEEP_GRADS:
        a->p.set_to_none = 0;
        return 0;
    case OPT_NO_JITTER:
        a->p.jitter = 0;
        return 0;
    case OPT_SEED:
        if (parse_count(opt, arg, UINT64_MAX, &v)) return 2;
        a->p.seed = v;
        return 0;
    case OPT_STREAM:
        if (parse_count(opt, arg, UINT64_MAX, &v)) return 2;
        a->p.stream = v;
        return 0;
    case OPT_DEVICE_TOTAL:
        if (gm_parse_size(arg, "--device-total", &a->p.device_total_bytes, &err) != GM_OK)
            return usage_error("%s", err.msg);
        return 0;
    case OPT_COMPRESS:
        if (!strcmp(arg, "none"))
            a->wopts.compress = GM_COMPRESS_NONE;
        else if (!strcmp(arg, "deflate"))
            a->wopts.compress = GM_COMPRESS_DEFLATE;
        else
            return usage_error("--compress: unknown method '%s'; use none or deflate", arg);
        return 0;
    default:
        return 2; /* not reached: gen_parse handles getopt errors */
    }
}

/* getopt_long's complaint, in gmsim's words (opterr is off). */
static int bad_option(int c, char **argv)
{
    const char *arg = argv[optind - 1];
    if (c == ':') return usage_error("option '%s' needs a value", arg);
    if (optopt) return usage_error("unknown option '-%c'", optopt);
    return usage_error("unknown option '%s'", arg);
}

static int gen_parse(gen_args *a, int argc, char **argv)
{
    int c, idx;
    opterr = 0;
    optind = 0; /* glibc: full re-initialisation, should a process parse twice */
    while ((c = getopt_long(argc, argv, ":o:h", gen_options, &idx)) != -1) {
        char opt[64];
        if (c == '?' || c == ':') return bad_option(c, argv);
        snprintf(opt, sizeof opt, "--%s", c == 'o' ? "output" : gen_options[idx].name);
        int rc = gen_option(a, c, optarg, opt);
        if (rc) return rc;
    }
    return 0;
}

/* Parse, check, write; returns the exit code. */
static int gen_run(gen_args *a, int argc, char **argv, const char *command)
{
    int rc = gen_parse(a, argc, argv);
    if (rc) return rc;
    if (a->help) {
        gen_usage(stdout);
        return 0;
    }
    if (optind >= argc)
        return usage_error("missing the workload; the one there is: 'bert' "
                           "(e.g. gmsim gen bert -o bert.h5)");
    if (strcmp(argv[optind], "bert"))
        return usage_error("unknown workload '%s'; the one there is: 'bert'", argv[optind]);
    if (optind + 1 < argc)
        return usage_error("unexpected argument '%s' after the workload", argv[optind + 1]);
    if (!a->out) return usage_error("missing the output file; add -o OUT.h5");

    gm_err err;
    if (gm_bert_check(&a->p, &err) != GM_OK) return usage_error("%s", err.msg);
    gm_bert_stats st;
    if (gm_bert_write_trace(a->out, &a->p, &a->wopts, command, &st, &err) != GM_OK) {
        fprintf(stderr, "gmsim gen: %s\n", err.msg);
        return 1;
    }
    char peak[32], params[32], span[32];
    printf("wrote %s: %llu events, %d iterations, %s of parameters, peak live %s, span %s\n",
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
    a.wopts.compress = GM_COMPRESS_DEFLATE;
    a.wopts.deflate_level = 4;
    a.wopts.chunk_events = GM_TRACE_CHUNK_EVENTS;
    /* joined before getopt_long permutes argv */
    char *command = join_command(argc, argv);
    if (!command) {
        fprintf(stderr, "gmsim gen: out of host memory\n");
        return 1;
    }
    int rc = gen_run(&a, argc, argv, command);
    free(command);
    return rc;
}
