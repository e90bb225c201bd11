/*
 * gen_gpt.h - a synthetic GPT-2 workload (nanoGPT's / HF GPT2LMHeadModel's
 * shapes and ops) as PyTorch's CUDA caching allocator sees it, on the
 * shared autograd and training-loop model (gen_graph.h, gen_train.h).
 *
 * Parameters in registration order: wte [vocab, d], wpe [ctx, d]; per layer
 * ln_1 (w, b), c_attn (w [3d, d], b [3d]), c_proj (w [d, d], b [d]), ln_2
 * (w, b), c_fc (w [ffn, d], b [ffn]), mlp c_proj (w [d, ffn], b [d]);
 * ln_f (w, b); lm_head tied to wte (or its own [vocab, d]).
 *
 * Forward per micro-batch: token and position embeddings, their sum
 * (dropout), per layer ln_1 -> c_attn -> split q, k, v -> attention ->
 * c_proj -> + residual -> ln_2 -> c_fc -> GELU -> c_proj -> + residual;
 * ln_f, lm_head logits [batch * seq, vocab] (kept until the next forward),
 * cross entropy. traces/GENERATORS.md lists every tensor with its size.
 */
#ifndef GM_GEN_GPT_H
#define GM_GEN_GPT_H

#include <stddef.h>
#include <stdint.h>

#include "gen_common.h"
#include "gen_train.h"
#include "trace.h"

typedef struct gm_gpt_params {
    gm_train_params t; /* batch, precision, optimizer, what-ifs */
    int layers;        /* transformer blocks (12)                     */
    int d_model;       /* embedding width (768)                       */
    int heads;         /* attention heads (12); divide d_model        */
    int ffn;           /* MLP width; 0 = 4 * d_model                  */
    int vocab;         /* vocabulary (50257)                          */
    int ctx;           /* position embeddings, n_positions (1024)     */
    int seq;           /* tokens per sequence, at most ctx (1024)     */
    int impl;          /* enum gg_impl (torch): how modules are written
                          (naive: from primitives, as cs336 does)    */
    int attention;     /* enum gg_attention (sdpa)                    */
    int tied;          /* lm_head shares wte (1)                      */
    double dropout;    /* embedding / residual / attention dropout (0) */
} gm_gpt_params;

/* GPT-2 small, seq 1024, batch 8, fp32, AdamW (foreach). */
void gm_gpt_defaults(gm_gpt_params *p);
/* Shapes of a named model: gpt2 (small), gpt2-medium, gpt2-large,
 * gpt2-xl; GM_EINVAL listing them when unknown. seq becomes the model's
 * ctx. */
int gm_gpt_preset(gm_gpt_params *p, const char *name, gm_err *err);
/* "gpt2, gpt2-medium, ..." */
const char *gm_gpt_preset_names(void);
int gm_gpt_check(const gm_gpt_params *p, gm_err *err);
uint64_t gm_gpt_param_count(const gm_gpt_params *p);
void gm_gpt_describe(const gm_gpt_params *p, char *buf, size_t len);
int gm_gpt_generate(const gm_gpt_params *p, gm_gen_event_sink sink, gm_gen_marker_sink marks,
                    void *ctx, gm_gen_stats *stats, gm_err *err);
/* A trace file (source "synthetic:gpt"); no file is left at path on error. */
int gm_gpt_write_trace(const char *path, const gm_gpt_params *p, const gm_trace_write_opts *opts,
                       const char *command, gm_gen_stats *stats, gm_err *err);

#endif
