/*
 * gen_graph.h - a small model of what PyTorch eager mode allocates, shared
 * by the GPT, LLaMA and ResNet-50 generators: tensors that die when their
 * last reference goes, autograd nodes that keep the tensors they save for
 * backward, a backward pass that allocates each input gradient and
 * accumulates parameter gradients, autocast's cached weight casts,
 * activation checkpointing (recompute in backward) and the ZeRO units
 * whose parameters are gathered and whose gradients are reduce-scattered.
 * The training loop around it (parameters, optimizer, zero_grad) is
 * gen_loop.c. traces/GENERATORS.md documents every tensor.
 *
 * Model code (gen_gpt.c, ...) reads like the PyTorch module it imitates:
 *
 *     gg_t h = gg_linear(G, x, rows, d, 4 * d, P_FC_W, P_FC_B);
 *     gg_t a = gg_gelu(G, h);
 *     gg_drop(G, h);                       // the Python variable goes
 *
 * Each gg_t carries one reference for its Python variable; gg_drop
 * releases it, and the tensor is freed when nothing else (a node that
 * saved it) holds it. A forward tensor's category is decided when it dies:
 * activation if a node ever saved it, else temporary; gradients of
 * non-parameters are autograd_detail; parameter gradients gradient.
 */
#ifndef GM_GEN_GRAPH_H
#define GM_GEN_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "gen_common.h"
#include "gen_train.h"

typedef uint32_t gg_t; /* tensor handle; 0 = none */
typedef struct gg gg;

/* A checkpointed chunk: layers of one chunk, from input x (which it must not
 * drop) to its output. */
typedef gg_t (*gg_chunk_fn)(gg *G, void *ctx, int chunk, gg_t x);
/* One layer of a model: its output from input x (which it must not drop). */
typedef gg_t (*gg_block_fn)(gg *G, void *ctx, int layer, gg_t x);

/* Element sizes. */
#define GG_F32 4
#define GG_F16 2 /* bf16 and fp16 */
#define GG_I64 8
#define GG_BOOL 1

#define GG_MAX_IN 4
#define GG_MAX_SAVED 6
#define GG_MAX_OUT 3 /* outputs of one node (split) */
#define GG_MAX_TMP 3 /* backward temporaries of one node */

/* A parameter (or buffer) of the model, in registration order. */
typedef struct gg_param {
    uint64_t numel;
    int unit;           /* ZeRO / FSDP unit: 0 = the root (embeddings, head) */
    int frozen;         /* a buffer (BatchNorm running stats): no grad, no state */
    gg_t h;             /* the handle model code passes to ops */
    gm_gen_tensor w;    /* its storage (ZeRO-3: not used, the unit holds the shard) */
    gm_gen_tensor g;    /* .grad (ZeRO >= 2: not used, the unit holds the shard) */
    gm_gen_tensor s[2]; /* optimizer states (ZeRO >= 1: per unit instead) */
    gg_t cast;          /* autocast's cached low-precision copy in this forward */
    gg_t full;          /* ZeRO >= 2: the unsharded gradient of this backward */
} gg_param;

/* A ZeRO unit: a flat group of parameters sharded over the ranks. */
typedef struct gg_unit {
    uint64_t numel;       /* all its parameters                       */
    uint64_t shard;       /* ceil(numel / world): this rank's part     */
    gm_gen_tensor w;      /* ZeRO-3: the parameter shard               */
    gm_gen_tensor g;      /* ZeRO >= 2: the gradient shard             */
    gm_gen_tensor s[2];   /* ZeRO >= 1: optimizer state shards         */
    gm_gen_tensor gather; /* ZeRO-3: the all-gathered parameters now   */
    int gathered;
} gg_unit;

typedef struct gg_tensor {
    gm_gen_tensor m; /* storage; addr 0 once freed                     */
    uint64_t numel;
    uint32_t refs; /* Python references + nodes that saved it          */
    uint32_t fn;   /* producing node + 1; 0: no gradient flows into it */
    int32_t param; /* >= 0: stands for that parameter (not refcounted) */
    gg_t base;     /* a view: the tensor whose storage it shares (held) */
    uint8_t slot;  /* which output of its node                          */
    uint8_t dt;    /* bytes per element                                */
    uint8_t saved; /* some node saved it: an activation                */
    uint8_t fixed; /* category fixed at allocation (inputs, gradients) */
    uint8_t used;  /* the handle is in use                             */
} gg_tensor;

enum { GG_NODE_OP = 0, GG_NODE_CHECKPOINT = 1, GG_NODE_CAPTURE = 2 };

typedef struct gg_node {
    uint32_t in_fn[GG_MAX_IN];   /* where each input's gradient goes: a node + 1 */
    uint8_t in_slot[GG_MAX_IN];  /* ... its output slot                         */
    int32_t in_param[GG_MAX_IN]; /* ... or a parameter (>= 0)                    */
    uint64_t in_bytes[GG_MAX_IN];
    uint8_t nin, nsaved, kind, pass; /* pass: input grads are the output grad (add) */
    gg_t saved[GG_MAX_SAVED];
    uint64_t tmp[GG_MAX_TMP]; /* backward temporaries: allocated before, freed after the
                                 input grads */
    gg_t grad[GG_MAX_OUT];    /* the gradient of each output, accumulated */
    int unit;
    /* checkpoint: the chunk to recompute */
    gg_chunk_fn ck_fn;
    void *ck_ctx;
    int chunk;
} gg_node;

struct gg {
    gm_gen o;                 /* emitter */
    const gm_train_params *t; /* training options */
    const char *who;
    uint8_t cdt;   /* compute element size: 4, or 2 under autocast */
    int naive;     /* modules written from primitives (gen_ops.h, GG_IMPL_NAIVE) */
    int grad_mode; /* record nodes (training, outside no_grad)     */
    int recompute; /* inside a checkpoint's recompute               */
    int unit;      /* current ZeRO unit                             */
    int bwd_unit;  /* unit whose backward runs (-1 none)            */
    gg_param *p;
    size_t np, cap_p;
    gg_unit *u;
    int nu;
    gg_tensor *ts;
    size_t nts, cap_ts;
    uint32_t *free_ts;
    size_t nfree_ts, cap_free_ts;
    gg_node *nodes;
    size_t nn, cap_nn;
    gm_gen_tensor workspace[2]; /* cuBLAS workspaces: forward thread, autograd's thread */
    /* gg_layers: the layer function checkpointed chunks call */
    gg_block_fn blk;
    void *blk_ctx;
    int blk_layers;
    /* tensors every layer reads besides its input (rotary tables, a mask):
     * a checkpoint keeps them for the recompute, as torch.utils.checkpoint
     * keeps every argument */
    gg_t ck_keep[GG_MAX_SAVED - 1];
    int n_ck_keep;
};

/* --------------------------------------------------------------- setup */

/* Add a parameter of numel elements to unit (frozen: a buffer); returns its
 * index (or -1 with the sticky error set). Call before gg_load. */
int gg_param_add(gg *G, uint64_t numel, int unit, int frozen);

/* ------------------------------------------------------------ tensors */

/* A new tensor of numel elements of dt bytes, one Python reference. */
gg_t gg_new(gg *G, uint64_t numel, uint8_t dt);
/* A tensor whose category is fixed now (inputs: GM_CAT_INPUT). */
gg_t gg_new_fixed(gg *G, uint64_t numel, uint8_t dt, uint8_t cat);
/* Another Python reference to t; returns t. */
gg_t gg_ref(gg *G, gg_t t);
/* The Python variable goes. */
void gg_drop(gg *G, gg_t t);
uint64_t gg_numel(const gg *G, gg_t t);
uint8_t gg_dt(const gg *G, gg_t t);

/* --------------------------------------------------------------- nodes */

/* Record that `out` was computed from in[0..nin) (gradients flow back to
 * each that needs one) saving save[0..nsave) for backward. Nothing happens
 * outside grad mode. tmp0/tmp1: bytes of backward temporaries. */
void gg_record(gg *G, gg_t out, const gg_t *in, int nin, const gg_t *save, int nsave, uint64_t tmp0,
               uint64_t tmp1);
/* Like gg_record, with a third backward temporary. */
void gg_record3(gg *G, gg_t out, const gg_t *in, int nin, const gg_t *save, int nsave,
                const uint64_t tmp[GG_MAX_TMP]);
/* x.split(n) along its last dim: n views sharing x's storage (each holds
 * it), out[i] of numel(x) / n elements; backward concatenates their
 * gradients into one of x's size. */
void gg_split(gg *G, gg_t x, int n, gg_t *out);
/* An in-place op on x (relu_, add_): x now comes from a node whose inputs
 * are x's old producer and in[]; it saves x itself when save_out. Gradients
 * pass through unchanged when pass (add_). */
void gg_record_inplace(gg *G, gg_t x, const gg_t *in, int nin, int save_out, int pass);
/* 1 when gradients flow into t (it comes from a parameter). */
int gg_requires_grad(const gg *G, gg_t t);

/* ------------------------------------------------------------ autocast */

/* The weight of parameter i as an op uses it: the parameter itself in fp32,
 * autocast's cached bf16/fp16 copy (made on first use in this forward), or
 * under ZeRO-3 the gathered copy. One reference for the caller. */
gg_t gg_weight(gg *G, int i);
/* x as a low-precision op takes it: x itself (+1 reference) or a copy in
 * the compute dtype (autocast casts fp32 inputs of matmuls and convs). */
gg_t gg_autocast(gg *G, gg_t x);
/* The end of the autocast region: cached weight copies are released. */
void gg_autocast_exit(gg *G);

/* cuBLAS workspace: PyTorch's default CUBLAS_WORKSPACE_CONFIG ":4096:2:16:8"
 * (CublasHandlePool.cpp: 2 x 4096 KiB + 8 x 16 KiB) is allocated through
 * the caching allocator by the first matmul of each thread's cuBLAS handle:
 * the program's (thread 0) and autograd's device thread that runs backward
 * (thread 1). 8519680 bytes, once in the inference snapshots of tests/data
 * and twice in the training one. Kept to the end. */
#define GG_CUBLAS_WORKSPACE_BYTES (2ull * 4096 * 1024 + 8ull * 16 * 1024)
void gg_workspace(gg *G, int thread);

/* --------------------------------------------------------------- units */

/* Forward (or recompute) of ZeRO unit u begins / ends: under ZeRO-3 its
 * parameters are all-gathered, and freed again at the end (unit 0 stays
 * gathered until the backward is over). */
void gg_unit_begin(gg *G, int u);
void gg_unit_end(gg *G, int u);

/* ---------------------------------------------------------- checkpoint */

/* y = torch.utils.checkpoint(chunk_fn, x): in grad mode the chunk runs
 * without saving anything and its input is kept; backward recomputes it
 * and runs its backward at once. Outside grad mode it just runs. */
gg_t gg_checkpoint(gg *G, gg_chunk_fn fn, void *ctx, int chunk, gg_t x);

/* The model's layers 0..n-1 from x (not dropped): block after block, or
 * with --checkpoint k in checkpointed chunks of k layers. */
gg_t gg_layers(gg *G, gg_block_fn block, void *ctx, int n, gg_t x);

/* ------------------------------------------------------------ backward */

/* loss.backward(): the gradient of `loss` (a scalar of dt bytes) is ones;
 * every node runs in reverse order; the graph is freed; the loss keeps its
 * Python reference. */
void gg_backward(gg *G, gg_t loss);
/* Forget the graph without a backward (inference, or a dropped output). */
void gg_graph_clear(gg *G);

/* ------------------------------------------- training loop (gen_loop.c) */

#define GG_MAX_INPUTS 4

/* A model as the training loop drives it. */
typedef struct gg_model {
    /* gg_param_add every parameter and buffer, in registration order */
    void (*build)(gg *G, void *ctx);
    /* the next batch's device tensors (gg_new_fixed, GM_CAT_INPUT); returns how many */
    int (*batch)(gg *G, void *ctx, gg_t *in);
    /* forward over one micro-batch: returns the loss (training) or the output
     * (inference); *keep: what the program keeps until the next forward
     * (the logits it returned), or 0 */
    gg_t (*forward)(gg *G, void *ctx, const gg_t *in, gg_t *keep);
    int naive; /* ops written from primitives: gen_ops.h, GG_IMPL_NAIVE */
} gg_model;

/*
 * The whole run: model.to(device) (every parameter, or under ZeRO-3 each
 * unit's shard), then per iteration an iteration marker, zero_grad, for
 * each micro-batch a new batch, forward (under autocast) and backward, and
 * the optimizer step (gen_loop.c). Inference: the batch and a forward
 * under no_grad. Returns GM_OK or the first error.
 */
int gg_run(const char *who, const gm_train_params *t, const gg_model *m, void *ctx,
           gm_gen_event_sink sink, gm_gen_marker_sink marks, void *sink_ctx, gm_gen_stats *stats,
           gm_err *err);

#endif
