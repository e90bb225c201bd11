/*
 * gen_models.c - `gmsim gen gpt|llama|resnet50 [options] -o OUT.h5`: the
 * training workloads (traces/GENERATORS.md), one option table for the
 * three: the model's shape, then the training options they share.
 */
#include "gen_models.h"
#include "cli.h"
#include "base/units.h"
#include "traces/gen_gpt.h"
#include "traces/gen_llama.h"
#include "traces/gen_ops.h"
#include "traces/gen_resnet.h"

#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { W_GPT, W_LLAMA, W_RESNET };

/* train_option's "not one of mine" (GM_OK, GM_CLI_DONE and errors are taken). */
#define NOT_MINE 2

static const char *const names[] = {"gpt", "llama", "resnet50"};

enum {
    OPT_MODEL = 256,
    OPT_LAYERS,
    OPT_D_MODEL,
    OPT_HEADS,
    OPT_KV_HEADS,
    OPT_FFN,
    OPT_VOCAB,
    OPT_CTX,
    OPT_SEQ,
    OPT_ATTENTION,
    OPT_IMPL,
    OPT_TIED,
    OPT_UNTIED,
    OPT_DROPOUT,
    OPT_RESOLUTION,
    OPT_CLASSES,
    OPT_BATCH,
    OPT_ITERATIONS,
    OPT_INFERENCE,
    OPT_DTYPE,
    OPT_OPTIMIZER,
    OPT_OPTIM_IMPL,
    OPT_KEEP_GRADS,
    OPT_CHECKPOINT,
    OPT_GRAD_ACCUM,
    OPT_ZERO,
    OPT_WORLD,
    OPT_NO_WORKSPACE,
    OPT_NO_AUTOCAST_CACHE,
    OPT_STREAM,
    OPT_DEVICE_TOTAL,
    OPT_COMPRESS,
};

/* Which workloads take an option: bit W_GPT, W_LLAMA, W_RESNET. */
#define LM ((1 << W_GPT) | (1 << W_LLAMA))
#define ALL (LM | (1 << W_RESNET))

typedef struct opt_def {
    struct option o;
    int who;
} opt_def;

static const opt_def defs[] = {
    {{"output", required_argument, NULL, 'o'}, ALL},
    {{"model", required_argument, NULL, OPT_MODEL}, LM},
    {{"layers", required_argument, NULL, OPT_LAYERS}, LM},
    {{"d-model", required_argument, NULL, OPT_D_MODEL}, LM},
    {{"heads", required_argument, NULL, OPT_HEADS}, LM},
    {{"kv-heads", required_argument, NULL, OPT_KV_HEADS}, 1 << W_LLAMA},
    {{"ffn", required_argument, NULL, OPT_FFN}, LM},
    {{"vocab", required_argument, NULL, OPT_VOCAB}, LM},
    {{"ctx", required_argument, NULL, OPT_CTX}, LM},
    {{"seq", required_argument, NULL, OPT_SEQ}, LM},
    {{"attention", required_argument, NULL, OPT_ATTENTION}, LM},
    {{"impl", required_argument, NULL, OPT_IMPL}, LM},
    {{"tied", no_argument, NULL, OPT_TIED}, LM},
    {{"untied", no_argument, NULL, OPT_UNTIED}, LM},
    {{"dropout", required_argument, NULL, OPT_DROPOUT}, 1 << W_GPT},
    {{"resolution", required_argument, NULL, OPT_RESOLUTION}, 1 << W_RESNET},
    {{"classes", required_argument, NULL, OPT_CLASSES}, 1 << W_RESNET},
    {{"batch", required_argument, NULL, OPT_BATCH}, ALL},
    {{"iterations", required_argument, NULL, OPT_ITERATIONS}, ALL},
    {{"inference", no_argument, NULL, OPT_INFERENCE}, ALL},
    {{"dtype", required_argument, NULL, OPT_DTYPE}, ALL},
    {{"optimizer", required_argument, NULL, OPT_OPTIMIZER}, ALL},
    {{"optim-impl", required_argument, NULL, OPT_OPTIM_IMPL}, ALL},
    {{"keep-grads", no_argument, NULL, OPT_KEEP_GRADS}, ALL},
    {{"checkpoint", required_argument, NULL, OPT_CHECKPOINT}, ALL},
    {{"grad-accum", required_argument, NULL, OPT_GRAD_ACCUM}, ALL},
    {{"zero", required_argument, NULL, OPT_ZERO}, ALL},
    {{"world", required_argument, NULL, OPT_WORLD}, ALL},
    {{"no-cublas-workspace", no_argument, NULL, OPT_NO_WORKSPACE}, ALL},
    {{"no-autocast-cache", no_argument, NULL, OPT_NO_AUTOCAST_CACHE}, ALL},
    {{"stream", required_argument, NULL, OPT_STREAM}, ALL},
    {{"device-total", required_argument, NULL, OPT_DEVICE_TOTAL}, ALL},
    {{"compress", required_argument, NULL, OPT_COMPRESS}, ALL},
    {{"help", no_argument, NULL, 'h'}, ALL},
};
#define NDEFS (sizeof defs / sizeof defs[0])

typedef struct args {
    int w;
    gm_gpt_params gpt;
    gm_llama_params llama;
    gm_resnet_params resnet;
    gm_train_params *t;
    gm_trace_write_opts wopts;
    const char *out, *extra;
    int saw_workload;
    int attention_given;
} args;

int gm_gen_model_known(const char *name)
{
    for (int i = 0; i < 3; i++)
        if (!strcmp(name, names[i])) return 1;
    return 0;
}

static void usage(FILE *f, int w)
{
    fprintf(f, "usage: gmsim gen %s [options] -o OUT.h5\n\n", names[w]);
    if (w == W_GPT)
        fprintf(f,
                "A GPT-2 (nanoGPT / GPT2LMHeadModel) run as PyTorch's caching allocator sees\n"
                "it. Default: GPT-2 small, seq 1024, batch 8, fp32, AdamW.\n\n"
                "model:\n"
                "      --model NAME       %s (applied first)\n",
                gm_gpt_preset_names());
    else if (w == W_LLAMA)
        fprintf(f,
                "A LLaMA (LlamaForCausalLM: RMSNorm, rotary, GQA, SwiGLU) run as PyTorch's\n"
                "caching allocator sees it. Default: LLaMA-2 7B, seq 4096, batch 1, fp32,\n"
                "AdamW.\n\n"
                "model:\n"
                "      --model NAME       %s\n"
                "                         (applied first)\n",
                gm_llama_preset_names());
    else
        fprintf(f, "A torchvision ResNet-50 run as PyTorch's caching allocator sees it.\n"
                   "Default: batch 32, 224 x 224, fp32, SGD with momentum.\n\n"
                   "model:\n"
                   "      --resolution N     image height = width (224)\n"
                   "      --classes N        fc outputs (1000)\n");
    if (w != W_RESNET)
        fprintf(f,
                "      --layers N, --d-model N, --heads N%s, --ffn N, --vocab N\n"
                "      --ctx N            position embeddings / max positions\n"
                "      --seq N            tokens per sequence (at most --ctx)\n"
                "      --attention A      sdpa (flash / memory-efficient, default), eager\n"
                "                         (HF eager: seq x seq scores, fp32 softmax) or naive\n"
                "                         (written by hand: max, exp, sum, divide)\n"
                "      --impl I           torch (nn modules, default) or naive: written from\n"
                "                         primitives as courses do (einsum linears, x*sigmoid(x),\n"
                "                         hand-written cross entropy; attention naive unless\n"
                "                         --attention says otherwise)\n"
                "      --tied, --untied   lm_head shares the token embedding (GPT default)\n"
                "                         or not (LLaMA default)\n%s",
                w == W_LLAMA ? ", --kv-heads N" : "",
                w == W_GPT ? "      --dropout P        dropout probability (0)\n" : "");
    fprintf(f, "\ntraining:\n"
               "      --batch N          sequences (images) per forward: the micro-batch\n"
               "      --iterations N     optimizer steps (forward passes with --inference) (4)\n"
               "      --inference        forward only, under torch.no_grad()\n"
               "      --dtype T          fp32, or bf16 / fp16: torch.autocast over fp32 weights\n"
               "                         (fp16 with GradScaler)\n"
               "      --no-autocast-cache  autocast(cache_enabled=False): a weight copy per use\n"
               "      --optimizer O      adamw, adam, sgd (momentum 0.9) or sgd-plain\n"
               "      --optim-impl I     foreach (PyTorch's CUDA default), for-loop, fused, or\n"
               "                         out-of-place (a hand-written step: new states each step)\n"
               "      --keep-grads       zero_grad(set_to_none=False): gradients live throughout\n"
               "what-ifs:\n"
               "      --checkpoint K     activation checkpointing: chunks of K layers keep only\n"
               "                         their input and are recomputed in backward\n"
               "      --grad-accum N     N micro-batches of --batch per optimizer step\n"
               "      --zero 1|2|3       ZeRO: shard optimizer states (1), + gradients (2),\n"
               "                         + parameters (3) over --world ranks; the trace is rank 0\n"
               "      --world N          data-parallel ranks\n"
               "output:\n"
               "  -o, --output FILE      trace to write (required)\n"
               "      --no-cublas-workspace  leave out the 8519680-byte cuBLAS workspace\n"
               "      --stream N         stream handle recorded on every event (0)\n"
               "      --device-total SIZE  device memory recorded in the trace (80GiB)\n"
               "      --compress C       none (default: read fastest) or deflate (smallest)\n"
               "  -h, --help             show this help\n\n"
               "Every tensor the generator makes is listed in traces/GENERATORS.md.\n");
}

static const char *opt_name(int c, char *buf, size_t len)
{
    for (size_t i = 0; i < NDEFS; i++)
        if (defs[i].o.val == c) {
            snprintf(buf, len, "--%s", defs[i].o.name);
            return buf;
        }
    return "?";
}

static int choice(const char *opt, const char *arg, int v, const char *valid, int *out, gm_err *err)
{
    if (v < 0) return gm_errf(err, GM_EUSAGE, "%s: unknown value '%s'; use %s", opt, arg, valid);
    *out = v;
    return GM_OK;
}

/* The shape options of the language models. */
static int lm_option(args *a, int c, const char *opt, const char *arg, gm_err *err)
{
    int is_gpt = a->w == W_GPT;
    gm_gpt_params *g = &a->gpt;
    gm_llama_params *l = &a->llama;
    switch (c) {
    case OPT_MODEL:
        return GM_OK; /* applied before the loop */
    case OPT_LAYERS:
        return gm_cli_int(opt, arg, is_gpt ? &g->layers : &l->layers, err);
    case OPT_D_MODEL:
        return gm_cli_int(opt, arg, is_gpt ? &g->d_model : &l->d_model, err);
    case OPT_HEADS:
        return gm_cli_int(opt, arg, is_gpt ? &g->heads : &l->heads, err);
    case OPT_KV_HEADS:
        return gm_cli_int(opt, arg, &l->kv_heads, err);
    case OPT_FFN:
        return gm_cli_int(opt, arg, is_gpt ? &g->ffn : &l->ffn, err);
    case OPT_VOCAB:
        return gm_cli_int(opt, arg, is_gpt ? &g->vocab : &l->vocab, err);
    case OPT_CTX:
        return gm_cli_int(opt, arg, is_gpt ? &g->ctx : &l->ctx, err);
    case OPT_SEQ:
        return gm_cli_int(opt, arg, is_gpt ? &g->seq : &l->seq, err);
    case OPT_ATTENTION:
        a->attention_given = 1;
        return choice(opt, arg, gg_attention_parse(arg), "sdpa, eager or naive",
                      is_gpt ? &g->attention : &l->attention, err);
    case OPT_IMPL:
        return choice(opt, arg, gg_impl_parse(arg), "torch or naive", is_gpt ? &g->impl : &l->impl,
                      err);
    case OPT_TIED:
    case OPT_UNTIED:
        *(is_gpt ? &g->tied : &l->tied) = c == OPT_TIED;
        return GM_OK;
    case OPT_DROPOUT:
        return gm_parse_double(arg, opt, 0, 0.999, &g->dropout, err);
    default:
        return gm_errf(err, GM_EUSAGE, "unexpected option");
    }
}

static int train_option(args *a, int c, const char *opt, const char *arg, gm_err *err)
{
    gm_train_params *t = a->t;
    unsigned long long v;
    switch (c) {
    case OPT_BATCH:
        return gm_cli_int(opt, arg, &t->batch, err);
    case OPT_ITERATIONS:
        return gm_cli_int(opt, arg, &t->iterations, err);
    case OPT_INFERENCE:
        t->mode = GM_MODE_INFER;
        return GM_OK;
    case OPT_DTYPE:
        return choice(opt, arg, gm_amp_parse(arg), "fp32, bf16 or fp16", &t->amp, err);
    case OPT_OPTIMIZER:
        return choice(opt, arg, gm_optimizer_parse(arg), "adamw, adam, sgd or sgd-plain",
                      &t->optimizer, err);
    case OPT_OPTIM_IMPL:
        return choice(opt, arg, gm_optim_impl_parse(arg),
                      "foreach, for-loop, fused or out-of-place", &t->optim_impl, err);
    case OPT_KEEP_GRADS:
        t->set_to_none = 0;
        return GM_OK;
    case OPT_CHECKPOINT:
        return gm_cli_int(opt, arg, &t->checkpoint, err);
    case OPT_GRAD_ACCUM:
        return gm_cli_int(opt, arg, &t->grad_accum, err);
    case OPT_ZERO:
        return gm_cli_int(opt, arg, &t->zero, err);
    case OPT_WORLD:
        return gm_cli_int(opt, arg, &t->world, err);
    case OPT_NO_WORKSPACE:
        t->cublas_workspace = 0;
        return GM_OK;
    case OPT_NO_AUTOCAST_CACHE:
        t->autocast_cache = 0;
        return GM_OK;
    case OPT_STREAM:
        if (gm_cli_uint(opt, arg, UINT64_MAX, &v, err)) return GM_EUSAGE;
        t->stream = v;
        return GM_OK;
    case OPT_DEVICE_TOTAL:
        return gm_cli_size("gen", arg, opt, &t->device_total_bytes, err);
    default:
        return NOT_MINE;
    }
}

static int option(void *ctx, int c, const char *arg, gm_err *err)
{
    args *a = ctx;
    char opt[64];
    opt_name(c, opt, sizeof opt);
    if (c == 1) {
        if (!a->saw_workload && !strcmp(arg, names[a->w]))
            a->saw_workload = 1;
        else if (!a->extra)
            a->extra = arg;
        return GM_OK;
    }
    if (c == 'h') {
        usage(stdout, a->w);
        return GM_CLI_DONE;
    }
    if (c == 'o') {
        a->out = arg;
        return GM_OK;
    }
    if (c == OPT_COMPRESS) return gm_cli_compress(arg, &a->wopts, err);
    for (size_t i = 0; i < NDEFS; i++)
        if (defs[i].o.val == c && !(defs[i].who & (1 << a->w)))
            return gm_errf(err, GM_EUSAGE, "%s does not apply to %s", opt, names[a->w]);
    if (c == OPT_RESOLUTION) return gm_cli_int(opt, arg, &a->resnet.resolution, err);
    if (c == OPT_CLASSES) return gm_cli_int(opt, arg, &a->resnet.classes, err);
    int rc = train_option(a, c, opt, arg, err);
    if (rc != NOT_MINE) return rc;
    return lm_option(a, c, opt, arg, err);
}

/* --model NAME first, wherever it is on the line, so other options refine it. */
static int apply_model(args *a, int argc, char **argv, gm_err *err)
{
    for (int i = 1; i < argc; i++) {
        const char *name = NULL;
        if (!strcmp(argv[i], "--model") && i + 1 < argc)
            name = argv[i + 1];
        else if (!strncmp(argv[i], "--model=", 8))
            name = argv[i] + 8;
        if (!name) continue;
        if (a->w == W_GPT && gm_gpt_preset(&a->gpt, name, err) != GM_OK) return GM_EUSAGE;
        if (a->w == W_LLAMA && gm_llama_preset(&a->llama, name, err) != GM_OK) return GM_EUSAGE;
    }
    return GM_OK;
}

static int check(args *a, gm_err *err)
{
    if (a->w == W_GPT) return gm_gpt_check(&a->gpt, err);
    if (a->w == W_LLAMA) return gm_llama_check(&a->llama, err);
    return gm_resnet_check(&a->resnet, err);
}

static int write_trace(args *a, const char *command, gm_gen_stats *st, gm_err *err)
{
    if (a->w == W_GPT) return gm_gpt_write_trace(a->out, &a->gpt, &a->wopts, command, st, err);
    if (a->w == W_LLAMA)
        return gm_llama_write_trace(a->out, &a->llama, &a->wopts, command, st, err);
    return gm_resnet_write_trace(a->out, &a->resnet, &a->wopts, command, st, err);
}

int gm_gen_model_cmd(const char *name, int argc, char **argv, const char *command)
{
    args a;
    memset(&a, 0, sizeof a);
    for (int i = 0; i < 3; i++)
        if (!strcmp(name, names[i])) a.w = i;
    gm_gpt_defaults(&a.gpt);
    gm_llama_defaults(&a.llama);
    gm_resnet_defaults(&a.resnet);
    a.t = a.w == W_GPT ? &a.gpt.t : a.w == W_LLAMA ? &a.llama.t : &a.resnet.t;
    a.wopts.compress = GM_COMPRESS_NONE;     /* as gen bert and import (traces/FORMAT.md) */
    a.wopts.on_temp = gm_cli_remove_on_exit; /* no TARGET.tmp.<pid> left if killed */
    a.wopts.deflate_level = 4;
    a.wopts.chunk_events = GM_TRACE_CHUNK_EVENTS;
    struct option longopts[NDEFS + 1];
    for (size_t i = 0; i < NDEFS; i++)
        longopts[i] = defs[i].o;
    memset(&longopts[NDEFS], 0, sizeof longopts[NDEFS]);
    gm_err err;
    int rc = apply_model(&a, argc, argv, &err);
    if (rc == GM_OK) rc = gm_cli_parse(argc, argv, "o:h", longopts, option, &a, &err);
    if (rc != GM_OK) return rc == GM_CLI_DONE ? 0 : gm_cmd_fail("gen", GM_EUSAGE, err.msg);
    if (!a.attention_given && a.gpt.impl == GG_IMPL_NAIVE) a.gpt.attention = GG_ATTN_NAIVE;
    if (!a.attention_given && a.llama.impl == GG_IMPL_NAIVE) a.llama.attention = GG_ATTN_NAIVE;
    if (a.extra) return gm_cmd_usage("gen", "unexpected argument '%s' after the workload", a.extra);
    if (!a.out) return gm_cmd_usage("gen", "missing the output file; add -o OUT.h5");
    if (check(&a, &err) != GM_OK) return gm_cmd_fail("gen", GM_EUSAGE, err.msg);
    gm_gen_stats st;
    if (write_trace(&a, command, &st, &err) != GM_OK) return gm_cmd_fail("gen", GM_EIO, err.msg);
    char peak[32], params[32], span[32];
    printf("wrote %s: %llu events, %d iterations, %s of parameters, peak live %s, span %s\n", a.out,
           (unsigned long long)st.events, a.t->iterations,
           gm_fmt_bytes(st.param_bytes, params, sizeof params),
           gm_fmt_bytes(st.peak_live_bytes, peak, sizeof peak),
           gm_fmt_ns(st.end_t_ns, span, sizeof span));
    return 0;
}
