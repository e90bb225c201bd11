/*
 * gen_bert.h - a synthetic BERT training workload, built from the model's
 * shapes, as PyTorch's CUDA caching allocator would see it.
 *
 * The model is HuggingFace's BertForSequenceClassification (eager attention)
 * trained with torch.optim.AdamW (foreach implementation, the CUDA default),
 * gradient clipping (clip_grad_norm_) and zero_grad(set_to_none=True). Every
 * tensor the training loop allocates on the device becomes one alloc event
 * and, when its last reference goes, one free event:
 *
 *   t=0       model.to(device): every parameter, in registration order
 *             (category parameter, phase unknown).
 *   each iteration
 *     forward  old batch freed, new input_ids / token_type_ids /
 *              attention_mask / labels (input); extended attention mask;
 *              per layer Q,K,V, the contiguous copies bmm saves, attention
 *              scores batch*heads*seq*seq, softmax output, dropout outputs
 *              and 1-byte masks, FFN intermediate, GELU output, LayerNorm
 *              outputs and fp32 mean/rstd (activation: saved for backward;
 *              temporary: freed as soon as the next op ran); pooler,
 *              classifier, cross-entropy; last iteration's outputs freed.
 *     backward layers in reverse order: each op's input gradients
 *              (autograd_detail) are allocated and the previous ones freed,
 *              saved activations are freed as their backward node runs;
 *              parameter gradients are allocated on first accumulation
 *              (gradient) - or, with set_to_none off, computed into a
 *              temporary and added into the grad kept since iteration 0.
 *     optimizer clip_grad_norm_ (foreach_norm scalars, stack, total norm),
 *              at the first step AdamW's exp_avg / exp_avg_sq per parameter
 *              (optimizer_state, kept), then foreach_sqrt's one temporary
 *              per parameter, freed at the end of the step; next iteration's
 *              zero_grad frees the gradients.
 *
 * Sequence-length jitter models dynamic padding: each iteration's length is
 * drawn from a Gaussian (mean 3/4 seq, sigma 1/5 seq, gsl mt19937 seeded from
 * params), clipped to [seq/4, seq] and rounded up to a multiple of 8, so
 * activation shapes change from one iteration to the next - what makes a
 * caching allocator fragment.
 *
 * Addresses are fake and never reused: base + 512 * (allocation number).
 * Time: a few microseconds of launch overhead per op plus a term proportional
 * to the bytes written; frees cost a fraction of a microsecond. Output is a
 * pure function of the params (including the seed).
 */
#ifndef GM_GEN_BERT_H
#define GM_GEN_BERT_H

#include <stddef.h>
#include <stdint.h>

#include "gen_common.h"
#include "trace.h"

/* Model and run shape. gm_bert_defaults() fills BERT-base, fp32, batch 32, seq 128. */
typedef struct gm_bert_params {
    int layers;                  /* encoder layers (12)                                 */
    int hidden;                  /* hidden size (768)                                   */
    int heads;                   /* attention heads (12); must divide hidden            */
    int intermediate;            /* FFN width; 0 = 4 * hidden                           */
    int vocab;                   /* word-piece vocabulary (30522)                       */
    int max_positions;           /* position embeddings (512); seq must not exceed it   */
    int type_vocab;              /* token types (2)                                     */
    int labels;                  /* classifier outputs (2)                              */
    int seq;                     /* sequence length (maximum, when jitter is on) (128)  */
    int batch;                   /* sequences per batch (32)                            */
    int dtype_bytes;             /* 2 (fp16/bf16) or 4 (fp32): params, grads, states, activations */
    int iterations;              /* training iterations (8)                             */
    int adam;                    /* 1: AdamW states + update temporaries; 0: plain SGD  */
    int set_to_none;             /* 1: zero_grad(set_to_none=True) frees grads (default) */
    int jitter;                  /* 1: per-iteration sequence length varies (default)   */
    uint64_t seed;               /* gsl_rng mt19937 seed (1)                            */
    uint64_t stream;             /* stream handle of every event (0 = default stream)   */
    uint64_t device_total_bytes; /* recorded in the trace's meta (80 GiB)      */
} gm_bert_params;

/* What a generation produced (filled by gm_bert_generate when asked). */
typedef gm_gen_stats gm_bert_stats;

void gm_bert_defaults(gm_bert_params *p);

/* GM_OK, or GM_EINVAL naming the bad field and its allowed range. */
int gm_bert_check(const gm_bert_params *p, gm_err *err);

/* Analytic parameter count: embeddings, layers, pooler, classifier. */
uint64_t gm_bert_param_count(const gm_bert_params *p);

/* One-line description of the params for the trace's `workload` attribute. */
void gm_bert_describe(const gm_bert_params *p, char *buf, size_t len);

/* Generate the whole run into sink (and marks, if not NULL). stats may be NULL. */
int gm_bert_generate(const gm_bert_params *p, gm_gen_event_sink sink, gm_gen_marker_sink marks,
                     void *ctx, gm_bert_stats *stats, gm_err *err);

/*
 * Write a complete trace file: meta source "synthetic:bert", workload from
 * gm_bert_describe, device_name "", device_total_bytes from p, created_utc
 * now, command as given (may be NULL); /events and /markers. opts may be NULL.
 * On error no file is left at path.
 */
int gm_bert_write_trace(const char *path, const gm_bert_params *p, const gm_trace_write_opts *opts,
                        const char *command, gm_bert_stats *stats, gm_err *err);

#endif
