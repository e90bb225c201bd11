/*
 * gen_train.h - the training options the GPT, LLaMA and ResNet-50
 * generators share (gen_gpt.h, gen_llama.h, gen_resnet.h): batch, precision,
 * optimizer and its implementation, and the what-ifs (activation
 * checkpointing, gradient accumulation, ZeRO sharding). What each option
 * allocates is traces/GENERATORS.md; the code that allocates it is
 * gen_graph.c (autograd) and gen_loop.c (the training loop).
 */
#ifndef GM_GEN_TRAIN_H
#define GM_GEN_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

/* What the program does each iteration. */
enum gm_train_mode {
    GM_MODE_TRAIN = 0, /* forward, backward, optimizer step                       */
    GM_MODE_INFER = 1, /* forward only under torch.no_grad(): nothing is saved     */
};

/* Compute precision. Parameters (and their gradients and optimizer states)
 * are fp32 in every mode: bf16/fp16 are torch.autocast over an fp32 model
 * (the fp32 weights are the master weights). */
enum gm_amp {
    GM_AMP_FP32 = 0,
    GM_AMP_BF16 = 1, /* autocast(dtype=torch.bfloat16)                           */
    GM_AMP_FP16 = 2, /* autocast(dtype=torch.float16) + GradScaler               */
};

enum gm_optimizer {
    GM_OPT_ADAMW = 0,     /* torch.optim.AdamW: exp_avg, exp_avg_sq                   */
    GM_OPT_ADAM = 1,      /* torch.optim.Adam (weight_decay 0): same states as AdamW   */
    GM_OPT_SGD = 2,       /* torch.optim.SGD(momentum=0.9): momentum_buffer           */
    GM_OPT_SGD_PLAIN = 3, /* SGD without momentum: no state                       */
};

/* How the optimizer step is computed (its temporaries). */
enum gm_optim_impl {
    GM_IMPL_FOREACH = 0,      /* torch default on CUDA: _multi_tensor_*; Adam's
                                 foreach_sqrt makes one temporary per parameter,
                                 all alive together                              */
    GM_IMPL_FOR_LOOP = 1,     /* foreach=False: _single_tensor_*; two temporaries of
                                 one parameter at a time                          */
    GM_IMPL_FUSED = 2,        /* fused=True: no temporaries                       */
    GM_IMPL_OUT_OF_PLACE = 3, /* a hand-written step (m = b1*m + (1-b1)*g, ...): new
                                 state tensors every step, ten temporaries per
                                 parameter (the shape of the cs336 snapshots)    */
};

typedef struct gm_train_params {
    int mode;                    /* enum gm_train_mode (train)                              */
    int batch;                   /* sequences (images) per forward: the micro-batch (8)     */
    int iterations;              /* optimizer steps; forward passes when inferring (4)      */
    int amp;                     /* enum gm_amp (fp32)                                      */
    int optimizer;               /* enum gm_optimizer (adamw)                               */
    int optim_impl;              /* enum gm_optim_impl (foreach)                            */
    int set_to_none;             /* zero_grad(set_to_none=True) frees gradients (1)        */
    int checkpoint;              /* activation checkpointing: 0 off; k = chunks of k layers,
                                    each keeping only its input (torch.utils.checkpoint)    */
    int grad_accum;              /* micro-batches per optimizer step (1)                    */
    int zero;                    /* ZeRO stage 0..3 (0): 1 shards optimizer states, 2 also
                                    gradients, 3 also parameters, over `world` ranks        */
    int world;                   /* data-parallel ranks (1); the trace is rank 0's          */
    int autocast_cache;          /* autocast keeps one low-precision copy of each weight per
                                    forward (1); 0: torch.autocast(cache_enabled=False),
                                    a copy per use, freed after it                      */
    int cublas_workspace;        /* the cuBLAS workspace PyTorch allocates at the first
                                    matmul (8519680 B), kept to the end (1)            */
    uint64_t stream;             /* stream handle of every event (0)           */
    uint64_t device_total_bytes; /* recorded in the trace's meta (80 GiB)      */
} gm_train_params;

void gm_train_defaults(gm_train_params *t);
/* GM_OK, or GM_EINVAL naming who ("gpt"), the field and its range; layers
 * bounds --checkpoint. */
int gm_train_check(const char *who, const gm_train_params *t, int layers, gm_err *err);
/* "train batch=8 amp=bf16 optimizer=adamw(foreach) ..." for `workload`. */
void gm_train_describe(const gm_train_params *t, char *buf, size_t len);

/* Names for options and messages; parse returns -1 if unknown. */
const char *gm_amp_name(int amp);
int gm_amp_parse(const char *s);
const char *gm_optimizer_name(int opt);
int gm_optimizer_parse(const char *s);
const char *gm_optim_impl_name(int impl);
int gm_optim_impl_parse(const char *s);

#endif
