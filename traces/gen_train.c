/* gen_train.c - see gen_train.h: the shared training options. */
#include "gen_train.h"
#include "gen_common.h"
#include "base/units.h"

#include <stdio.h>
#include <string.h>

static const char *const amp_names[] = {"fp32", "bf16", "fp16"};
static const char *const opt_names[] = {"adamw", "adam", "sgd", "sgd-plain"};
static const char *const impl_names[] = {"foreach", "for-loop", "fused", "out-of-place"};

#define N_OF(a) ((int)(sizeof a / sizeof a[0]))

static int find(const char *const *names, int n, const char *s)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(names[i], s)) return i;
    return -1;
}

const char *gm_amp_name(int amp)
{
    return amp >= 0 && amp < N_OF(amp_names) ? amp_names[amp] : "?";
}

int gm_amp_parse(const char *s)
{
    if (!strcmp(s, "float32") || !strcmp(s, "float")) return GM_AMP_FP32;
    if (!strcmp(s, "bfloat16")) return GM_AMP_BF16;
    if (!strcmp(s, "float16") || !strcmp(s, "half")) return GM_AMP_FP16;
    return find(amp_names, N_OF(amp_names), s);
}

const char *gm_optimizer_name(int opt)
{
    return opt >= 0 && opt < N_OF(opt_names) ? opt_names[opt] : "?";
}

int gm_optimizer_parse(const char *s)
{
    return find(opt_names, N_OF(opt_names), s);
}

const char *gm_optim_impl_name(int impl)
{
    return impl >= 0 && impl < N_OF(impl_names) ? impl_names[impl] : "?";
}

int gm_optim_impl_parse(const char *s)
{
    return find(impl_names, N_OF(impl_names), s);
}

void gm_train_defaults(gm_train_params *t)
{
    memset(t, 0, sizeof *t);
    t->mode = GM_MODE_TRAIN;
    t->batch = 8;
    t->iterations = 4;
    t->amp = GM_AMP_FP32;
    t->optimizer = GM_OPT_ADAMW;
    t->optim_impl = GM_IMPL_FOREACH;
    t->set_to_none = 1;
    t->grad_accum = 1;
    t->world = 1;
    t->autocast_cache = 1;
    t->cublas_workspace = 1;
    t->device_total_bytes = 80 * GM_GiB;
}

int gm_train_check(const char *who, const gm_train_params *t, int layers, gm_err *err)
{
    int rc;
    if ((rc = gm_gen_check_range(who, "batch", t->batch, 1, 1 << 24, err)) ||
        (rc = gm_gen_check_range(who, "iterations", t->iterations, 1, 1 << 20, err)) ||
        (rc = gm_gen_check_range(who, "mode", t->mode, 0, 1, err)) ||
        (rc = gm_gen_check_range(who, "amp", t->amp, 0, 2, err)) ||
        (rc = gm_gen_check_range(who, "optimizer", t->optimizer, 0, 3, err)) ||
        (rc = gm_gen_check_range(who, "optim_impl", t->optim_impl, 0, 3, err)) ||
        (rc = gm_gen_check_range(who, "checkpoint", t->checkpoint, 0, layers, err)) ||
        (rc = gm_gen_check_range(who, "grad_accum", t->grad_accum, 1, 1 << 16, err)) ||
        (rc = gm_gen_check_range(who, "zero", t->zero, 0, 3, err)) ||
        (rc = gm_gen_check_range(who, "world", t->world, 1, 1 << 20, err)))
        return rc;
    if (t->mode == GM_MODE_INFER && (t->checkpoint || t->grad_accum > 1 || t->zero))
        return gm_errf(err, GM_EINVAL,
                       "%s: checkpointing, gradient accumulation and ZeRO are training "
                       "what-ifs; drop them or use the train mode",
                       who);
    if (t->zero && t->world < 2)
        return gm_errf(err, GM_EINVAL,
                       "%s: ZeRO stage %d shards over ranks; give the number of ranks "
                       "(world 2 or more)",
                       who, t->zero);
    return GM_OK;
}

void gm_train_describe(const gm_train_params *t, char *buf, size_t len)
{
    if (t->mode == GM_MODE_INFER) {
        snprintf(buf, len,
                 "inference (no_grad) batch=%d amp=%s autocast_cache=%s iterations=%d "
                 "stream=%llu",
                 t->batch, gm_amp_name(t->amp), t->autocast_cache ? "on" : "off", t->iterations,
                 (unsigned long long)t->stream);
        return;
    }
    snprintf(buf, len,
             "train batch=%d amp=%s autocast_cache=%s optimizer=%s(%s) zero_grad_set_to_none=%s "
             "checkpoint=%d grad_accum=%d zero=%d world=%d iterations=%d stream=%llu",
             t->batch, gm_amp_name(t->amp), t->autocast_cache ? "on" : "off",
             gm_optimizer_name(t->optimizer), gm_optim_impl_name(t->optim_impl),
             t->set_to_none ? "true" : "false", t->checkpoint, t->grad_accum, t->zero, t->world,
             t->iterations, (unsigned long long)t->stream);
}
