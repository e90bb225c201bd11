/*
 * gen_serve.h - a synthetic LLM inference service (`gmsim gen llm-serve`):
 * a decoder-only model's weights loaded once, then requests arriving as a
 * Poisson process, each with a prefill over its prompt and one decode step
 * per output token, its KV cache growing by one token per step and freed
 * when the request ends. traces/GENERATORS.md "llm-serve" lists every
 * tensor, the length distributions and the time model.
 */
#ifndef GM_GEN_SERVE_H
#define GM_GEN_SERVE_H

#include <stddef.h>
#include <stdint.h>

#include "gen_common.h"
#include "trace.h"

typedef struct gm_serve_params {
    /* the model (a LLaMA shape: gen_llama.h's presets) */
    int layers, d_model, heads, kv_heads, ffn, vocab;
    int tied;
    int dtype_bytes; /* weights, activations and KV cache (2: bf16)        */
    /* the load */
    double qps;           /* mean arrivals per second (Poisson)            */
    uint64_t duration_ns; /* arrivals up to this time (0: use requests)    */
    int requests;         /* or this many requests (when duration is 0)    */
    double prompt_mean;   /* mean prompt tokens (exponential, clamped)     */
    double output_mean;   /* mean output tokens (exponential, clamped)     */
    int prompt_max, output_max;
    int max_batch; /* requests decoded together; the rest queue     */
    uint64_t seed; /* GSL mt19937 seed                              */
    uint64_t stream;
    uint64_t device_total_bytes;
    char model[32];
} gm_serve_params;

/* llama2-7b shapes, bf16, 2 QPS for 100 requests, prompts 512 tokens and
 * outputs 128 on average (at most 4096 and 1024), batch 32, seed 1. */
void gm_serve_defaults(gm_serve_params *p);
/* Take a gen_llama preset's shapes (gm_llama_preset_names()). */
int gm_serve_model(gm_serve_params *p, const char *name, gm_err *err);
int gm_serve_check(const gm_serve_params *p, gm_err *err);
uint64_t gm_serve_param_bytes(const gm_serve_params *p);
void gm_serve_describe(const gm_serve_params *p, char *buf, size_t len);
/* What the generation did beyond gm_gen_stats. */
typedef struct gm_serve_stats {
    int requests;           /* requests generated                      */
    uint64_t tokens_out;    /* output tokens decoded                   */
    uint64_t kv_peak_bytes; /* most KV cache live at once              */
    int peak_active;        /* most requests decoding at once          */
} gm_serve_stats;
int gm_serve_generate(const gm_serve_params *p, gm_gen_event_sink sink, gm_gen_marker_sink marks,
                      void *ctx, gm_gen_stats *stats, gm_serve_stats *sst, gm_err *err);
/* A trace file (source "synthetic:llm-serve"); no file is left at path on error. */
int gm_serve_write_trace(const char *path, const gm_serve_params *p,
                         const gm_trace_write_opts *opts, const char *command, gm_gen_stats *stats,
                         gm_err *err);

#endif
