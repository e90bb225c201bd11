/*
 * gen_serve.c - `gmsim gen llm-serve [options] -o OUT.h5`: an LLM inference
 * service's trace (traces/gen_serve.h, traces/GENERATORS.md "llm-serve").
 */
#include "gen_serve.h"
#include "cli.h"
#include "base/units.h"
#include "traces/gen_llama.h"
#include "traces/gen_serve.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    OPT_MODEL = 256,
    OPT_LAYERS,
    OPT_D_MODEL,
    OPT_HEADS,
    OPT_KV_HEADS,
    OPT_FFN,
    OPT_VOCAB,
    OPT_DTYPE,
    OPT_QPS,
    OPT_DURATION,
    OPT_REQUESTS,
    OPT_PROMPT_MEAN,
    OPT_PROMPT_MAX,
    OPT_OUTPUT_MEAN,
    OPT_OUTPUT_MAX,
    OPT_MAX_BATCH,
    OPT_SEED,
    OPT_STREAM,
    OPT_DEVICE_TOTAL,
    OPT_COMPRESS,
};

static const struct option longopts[] = {
    {"output", required_argument, NULL, 'o'},
    {"model", required_argument, NULL, OPT_MODEL},
    {"layers", required_argument, NULL, OPT_LAYERS},
    {"d-model", required_argument, NULL, OPT_D_MODEL},
    {"heads", required_argument, NULL, OPT_HEADS},
    {"kv-heads", required_argument, NULL, OPT_KV_HEADS},
    {"ffn", required_argument, NULL, OPT_FFN},
    {"vocab", required_argument, NULL, OPT_VOCAB},
    {"dtype", required_argument, NULL, OPT_DTYPE},
    {"qps", required_argument, NULL, OPT_QPS},
    {"duration", required_argument, NULL, OPT_DURATION},
    {"requests", required_argument, NULL, OPT_REQUESTS},
    {"prompt-mean", required_argument, NULL, OPT_PROMPT_MEAN},
    {"prompt-max", required_argument, NULL, OPT_PROMPT_MAX},
    {"output-mean", required_argument, NULL, OPT_OUTPUT_MEAN},
    {"output-max", required_argument, NULL, OPT_OUTPUT_MAX},
    {"max-batch", required_argument, NULL, OPT_MAX_BATCH},
    {"seed", required_argument, NULL, OPT_SEED},
    {"stream", required_argument, NULL, OPT_STREAM},
    {"device-total", required_argument, NULL, OPT_DEVICE_TOTAL},
    {"compress", required_argument, NULL, OPT_COMPRESS},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

typedef struct args {
    gm_serve_params p;
    gm_trace_write_opts wopts;
    const char *out, *extra;
    int saw_workload;
} args;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gmsim gen llm-serve [options] -o OUT.h5\n\n"
            "An LLM inference service: the weights, then requests arriving as a Poisson\n"
            "process, each a prefill and one decode step per output token, its KV cache\n"
            "growing a token per step and freed when it ends (traces/GENERATORS.md).\n\n"
            "  --model NAME        a LLaMA shape: %s (llama2-7b)\n"
            "  --layers N --d-model N --heads N --kv-heads N --ffn N --vocab N   refine it\n"
            "  --dtype bf16|fp16|fp32   weights, activations and KV cache (bf16)\n"
            "  --qps R             mean arrivals per second (2)\n"
            "  --requests N        this many requests (100) ...\n"
            "  --duration TIME     ... or the arrivals in this long (e.g. 60s)\n"
            "  --prompt-mean N --prompt-max N   prompt tokens: exponential, mean 512, max 4096\n"
            "  --output-mean N --output-max N   output tokens: exponential, mean 128, max 1024\n"
            "  --max-batch N       requests decoded together; later ones wait (32)\n"
            "  --seed N            GSL mt19937 seed (1): same seed, same trace\n"
            "  --stream S          stream handle of every event (0)\n"
            "  --device-total SIZE recorded device size (80GiB)\n"
            "  --compress none|deflate   /events compression (none)\n"
            "  -o OUT.h5           the trace to write\n",
            gm_llama_preset_names());
}

static int num(const char *opt, const char *arg, double lo, double hi, double *out, gm_err *err)
{
    return gm_parse_double(arg, opt, lo, hi, out, err) ? GM_EUSAGE : GM_OK;
}

static int option(void *ctx, int c, const char *arg, gm_err *err)
{
    args *a = ctx;
    gm_serve_params *p = &a->p;
    unsigned long long v;
    switch (c) {
    case 1:
        if (!a->saw_workload && !strcmp(arg, "llm-serve"))
            a->saw_workload = 1;
        else if (!a->extra)
            a->extra = arg;
        return GM_OK;
    case 'h':
        usage(stdout);
        return GM_CLI_DONE;
    case 'o':
        a->out = arg;
        return GM_OK;
    case OPT_MODEL:
        return gm_serve_model(p, arg, err) ? GM_EUSAGE : GM_OK;
    case OPT_LAYERS:
        return gm_cli_int("--layers", arg, &p->layers, err);
    case OPT_D_MODEL:
        return gm_cli_int("--d-model", arg, &p->d_model, err);
    case OPT_HEADS:
        return gm_cli_int("--heads", arg, &p->heads, err);
    case OPT_KV_HEADS:
        return gm_cli_int("--kv-heads", arg, &p->kv_heads, err);
    case OPT_FFN:
        return gm_cli_int("--ffn", arg, &p->ffn, err);
    case OPT_VOCAB:
        return gm_cli_int("--vocab", arg, &p->vocab, err);
    case OPT_DTYPE:
        if (!strcmp(arg, "bf16") || !strcmp(arg, "fp16"))
            p->dtype_bytes = 2;
        else if (!strcmp(arg, "fp32"))
            p->dtype_bytes = 4;
        else
            return gm_errf(err, GM_EUSAGE, "--dtype '%s': use bf16, fp16 or fp32", arg);
        return GM_OK;
    case OPT_QPS:
        return num("--qps", arg, 1e-9, 1e6, &p->qps, err);
    case OPT_DURATION:
        if (gm_parse_time(arg, "--duration", &p->duration_ns, err)) return GM_EUSAGE;
        if (!p->duration_ns) return gm_errf(err, GM_EUSAGE, "--duration must be more than 0");
        return GM_OK;
    case OPT_REQUESTS:
        return gm_cli_int("--requests", arg, &p->requests, err);
    case OPT_PROMPT_MEAN:
        return num("--prompt-mean", arg, 1, 1 << 22, &p->prompt_mean, err);
    case OPT_PROMPT_MAX:
        return gm_cli_int("--prompt-max", arg, &p->prompt_max, err);
    case OPT_OUTPUT_MEAN:
        return num("--output-mean", arg, 1, 1 << 22, &p->output_mean, err);
    case OPT_OUTPUT_MAX:
        return gm_cli_int("--output-max", arg, &p->output_max, err);
    case OPT_MAX_BATCH:
        return gm_cli_int("--max-batch", arg, &p->max_batch, err);
    case OPT_SEED:
        if (gm_cli_uint("--seed", arg, 0xffffffffull, &v, err)) return GM_EUSAGE;
        p->seed = v;
        return GM_OK;
    case OPT_STREAM:
        if (gm_cli_uint("--stream", arg, UINT64_MAX, &v, err)) return GM_EUSAGE;
        p->stream = v;
        return GM_OK;
    case OPT_DEVICE_TOTAL:
        return gm_cli_size("gen", arg, "--device-total", &p->device_total_bytes, err);
    case OPT_COMPRESS:
        return gm_cli_compress(arg, &a->wopts, err);
    default:
        return gm_errf(err, GM_EUSAGE, "unexpected option");
    }
}

int gm_gen_serve_cmd(int argc, char **argv, const char *command)
{
    args a;
    memset(&a, 0, sizeof a);
    gm_serve_defaults(&a.p);
    a.wopts.compress = GM_COMPRESS_NONE;     /* as the other generators */
    a.wopts.on_temp = gm_cli_remove_on_exit; /* no TARGET.tmp.<pid> left if killed */
    a.wopts.deflate_level = 4;
    a.wopts.chunk_events = GM_TRACE_CHUNK_EVENTS;
    gm_err err;
    int rc = gm_cli_parse(argc, argv, "o:h", longopts, option, &a, &err);
    if (rc != GM_OK) return rc == GM_CLI_DONE ? 0 : gm_cmd_fail("gen", GM_EUSAGE, err.msg);
    if (a.extra) return gm_cmd_usage("gen", "unexpected argument '%s' after the workload", a.extra);
    if (!a.out) return gm_cmd_usage("gen", "missing the output file; add -o OUT.h5");
    if (gm_serve_check(&a.p, &err) != GM_OK) return gm_cmd_fail("gen", GM_EUSAGE, err.msg);
    gm_gen_stats st;
    if (gm_serve_write_trace(a.out, &a.p, &a.wopts, command, &st, &err) != GM_OK)
        return gm_cmd_fail("gen", GM_EIO, err.msg);
    char peak[32], params[32], span[32];
    printf("wrote %s: %llu events, %s of weights, peak live %s, span %s\n", a.out,
           (unsigned long long)st.events, gm_fmt_bytes(st.param_bytes, params, sizeof params),
           gm_fmt_bytes(st.peak_live_bytes, peak, sizeof peak),
           gm_fmt_ns(st.end_t_ns, span, sizeof span));
    return 0;
}
