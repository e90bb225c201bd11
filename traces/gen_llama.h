/*
 * gen_llama.h - a synthetic LLaMA workload (HF LlamaForCausalLM's shapes
 * and ops: RMSNorm, rotary embeddings, grouped-query attention, SwiGLU MLP,
 * untied lm_head) as PyTorch's CUDA caching allocator sees it, on the
 * shared autograd and training-loop model (gen_graph.h, gen_train.h).
 *
 * Parameters in registration order: embed_tokens [vocab, d]; per layer
 * input_layernorm [d], q_proj [heads * hd, d], k_proj and v_proj
 * [kv_heads * hd, d], o_proj [d, heads * hd], post_attention_layernorm
 * [d], gate_proj and up_proj [ffn, d], down_proj [d, ffn] (no biases);
 * norm [d]; lm_head [vocab, d] unless tied.
 *
 * Forward per micro-batch: the embedding, rotary cos/sin for the sequence,
 * per layer RMSNorm -> q/k/v projections -> rotary on q and k -> attention
 * (k and v repeated to all heads when kv_heads < heads) -> o_proj ->
 * + residual -> RMSNorm -> down(silu(gate(x)) * up(x)) -> + residual;
 * final RMSNorm, logits (kept until the next forward), cross entropy.
 * traces/GENERATORS.md lists every tensor with its size.
 */
#ifndef GM_GEN_LLAMA_H
#define GM_GEN_LLAMA_H

#include <stddef.h>
#include <stdint.h>

#include "gen_common.h"
#include "gen_train.h"
#include "trace.h"

typedef struct gm_llama_params {
    gm_train_params t; /* batch, precision, optimizer, what-ifs   */
    int layers;        /* decoder layers (32)                      */
    int d_model;       /* hidden size (4096)                       */
    int heads;         /* query heads (32); divide d_model         */
    int kv_heads;      /* key/value heads (32); divide heads (GQA) */
    int ffn;           /* intermediate size (11008)                */
    int vocab;         /* vocabulary (32000)                       */
    int ctx;           /* max_position_embeddings (4096)           */
    int seq;           /* tokens per sequence (4096); rotary embeddings
                          need no table, so seq may exceed ctx       */
    int impl;          /* enum gg_impl (torch): how modules are written
                          (naive: from primitives, as cs336 does)    */
    int attention;     /* enum gg_attention (sdpa)                 */
    int tied;          /* lm_head shares embed_tokens (0)          */
} gm_llama_params;

/* LLaMA-2 7B, seq 4096, batch 1, fp32, AdamW (foreach). */
void gm_llama_defaults(gm_llama_params *p);
/* Shapes of a named model (llama2-7b, llama2-13b, llama3-8b, llama3.2-1b,
 * tinyllama-1.1b, and the cs336 course's TransformerLM sizes cs336-small
 * ... cs336-2.7b); GM_EINVAL listing them when unknown. seq becomes the
 * model's ctx. */
int gm_llama_preset(gm_llama_params *p, const char *name, gm_err *err);
const char *gm_llama_preset_names(void);
int gm_llama_check(const gm_llama_params *p, gm_err *err);
uint64_t gm_llama_param_count(const gm_llama_params *p);
void gm_llama_describe(const gm_llama_params *p, char *buf, size_t len);
int gm_llama_generate(const gm_llama_params *p, gm_gen_event_sink sink, gm_gen_marker_sink marks,
                      void *ctx, gm_gen_stats *stats, gm_err *err);
/* A trace file (source "synthetic:llama"); no file is left at path on error. */
int gm_llama_write_trace(const char *path, const gm_llama_params *p,
                         const gm_trace_write_opts *opts, const char *command, gm_gen_stats *stats,
                         gm_err *err);

#endif
