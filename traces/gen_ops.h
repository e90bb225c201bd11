/*
 * gen_ops.h - PyTorch ops as the caching allocator sees them, on the
 * autograd model of gen_graph.h: what each allocates in forward, what it
 * saves for backward (PyTorch's tools/autograd/derivatives.yaml), and what
 * its backward allocates. Shapes are element counts; every function returns
 * a new tensor with one reference for the caller and leaves its inputs'
 * references alone. traces/GENERATORS.md lists them.
 */
#ifndef GM_GEN_OPS_H
#define GM_GEN_OPS_H

#include "gen_graph.h"

/* How attention is computed. */
enum gg_attention {
    GG_ATTN_SDPA = 0,  /* F.scaled_dot_product_attention (flash / memory-efficient):
                          no seq x seq tensor; saves q, k, v, out, logsumexp */
    GG_ATTN_EAGER = 1, /* HF eager_attention_forward: matmul, * scale, + mask,
                          softmax(fp32), .to(dtype), matmul */
    GG_ATTN_NAIVE = 2, /* written out by hand (courses, cs336): einsum, / sqrt(d),
                          where(mask), softmax as max / sub / exp / sum / div */
};
const char *gg_attention_name(int a);
int gg_attention_parse(const char *s);

/* How the modules are written (gm_gpt_params.impl, gm_llama_params.impl). */
enum gg_impl {
    GG_IMPL_TORCH = 0, /* nn.Linear, nn.GELU / nn.SiLU, F.cross_entropy          */
    GG_IMPL_NAIVE = 1, /* from primitives, as courses write them (cs336): linear as
                          einsum (the weight gradient comes out transposed and
                          AccumulateGrad copies it), SiLU as x * sigmoid(x), GELU
                          as HF's tanh formula, cross entropy as max / sub / exp /
                          sum / log / gather; attention naive unless chosen      */
};
const char *gg_impl_name(int i);
int gg_impl_parse(const char *s);

/* ---------------------------------------------------------------- dense */

/* F.linear over rows rows: in -> out features, weight w, bias b (< 0: none);
 * under autocast the input and the weight are cast (the weight once per
 * forward). Output in the compute dtype. */
gg_t gg_linear(gg *G, gg_t x, uint64_t rows, uint64_t in, uint64_t out, int w, int b);
/* Batched matmul out = a @ b (numel of the result); saves a and b; under
 * autocast fp32 operands are cast down first. */
gg_t gg_matmul(gg *G, gg_t a, gg_t b, uint64_t numel);
/* The MLP activations: fused (nn.GELU / nn.SiLU: saves the input) or, when
 * G->naive, written out (GELU: HF's NewGELUActivation tanh formula; SiLU:
 * x * sigmoid(x)). */
gg_t gg_gelu(gg *G, gg_t x);
gg_t gg_silu(gg *G, gg_t x);
/* nn.Embedding: n int64 indices -> n x dim rows of weight w (fp32). */
gg_t gg_embedding(gg *G, gg_t ids, uint64_t n, uint64_t dim, int w);

/* ---------------------------------------------------------- elementwise */

/* An op of one input with an output of numel elements of dt (0: x's). */
gg_t gg_op1(gg *G, gg_t x, uint64_t numel, uint8_t dt, int save_in, int save_out);
/* An op autocast runs in fp32 (exp, log, pow, rsqrt, sum, softmax, ...: its
 * fp32 list): a 16-bit input is cast up first; the output is fp32. */
gg_t gg_op1_fp32(gg *G, gg_t x, uint64_t numel, int save_in, int save_out);
/* An op of one input, output numel of x in dt (0: x's): save_in / save_out
 * say what backward needs (GELU, SiLU: the input; exp, sigmoid, rsqrt: the
 * result; neg, scale by a constant: nothing). */
gg_t gg_unary(gg *G, gg_t x, uint8_t dt, int save_in, int save_out);
/* a * b, output numel in dt: each saves the other (mul's backward). */
gg_t gg_mul(gg *G, gg_t a, gg_t b, uint64_t numel, uint8_t dt);
/* a + b (b may broadcast; a's shape): gradients pass through. */
gg_t gg_add(gg *G, gg_t a, gg_t b, uint64_t numel, uint8_t dt);
/* x.to(dt) / x.contiguous(): a copy; gradient passes (cast back if dt differs). */
gg_t gg_copy(gg *G, gg_t x, uint64_t numel, uint8_t dt);
/* A reduction (mean, sum, max values) of x to numel elements in dt. */
gg_t gg_reduce(gg *G, gg_t x, uint64_t numel, uint8_t dt);
/* softmax / log_softmax over the last dim, output in dt; saves its result. */
gg_t gg_softmax(gg *G, gg_t x, uint8_t dt);
/* F.dropout(p) in training: output and a bool mask (saved); p = 0 returns
 * x itself (+1 reference), as PyTorch does. */
gg_t gg_dropout(gg *G, gg_t x, double p);

/* ---------------------------------------------------------------- norms */

/* nn.LayerNorm over rows x d (weight w, bias b): output (fp32 under
 * autocast, which runs layer_norm in fp32), fp32 mean and rstd saved. */
gg_t gg_layernorm(gg *G, gg_t x, uint64_t rows, uint64_t d, int w, int b);
/* LLaMA's RMSNorm as HF writes it: x.to(fp32), pow(2).mean(-1), + eps,
 * rsqrt, x * r, weight * x.to(dtype). */
gg_t gg_rmsnorm(gg *G, gg_t x, uint64_t rows, uint64_t d, int w);

/* ------------------------------------------------------------- attention */

/* Which of q, k, v are contiguous [B,H,S,hd] tensors (the others are
 * views, e.g. of a fused qkv projection, that matmul must copy). */
#define GG_Q_CONTIG 1
#define GG_K_CONTIG 2
#define GG_V_CONTIG 4

/* Attention of q [B,H,S,hd], k and v [B,KV,S,hd] (KV divides H: grouped
 * query attention repeats k and v), causal; under autocast q, k, v are cast
 * to the compute dtype. Returns [B,S,H*hd] contiguous. mask: the eager
 * style's additive mask [B,1,S,S] (may be 0). */
gg_t gg_attention(gg *G, int style, gg_t q, gg_t k, gg_t v, uint64_t B, uint64_t H, uint64_t KV,
                  uint64_t S, uint64_t hd, gg_t mask, int contig);

/* Rotary embedding applied to x (numel n): x * cos + rotate_half(x) * sin
 * (HF apply_rotary_pos_emb); the result's dtype is the wider of x's and
 * cos's, as PyTorch promotes. */
gg_t gg_rope(gg *G, gg_t x, gg_t cos, gg_t sin, uint64_t n);

/* ------------------------------------------------------------------ loss */

/* F.cross_entropy(logits [rows, classes], targets int64): logits upcast to
 * fp32, log_softmax (saved), nll_loss. Returns the fp32 scalar loss. */
gg_t gg_cross_entropy(gg *G, gg_t logits, gg_t targets, uint64_t rows, uint64_t classes);

/* ---------------------------------------------------------------- vision */

/* nn.Conv2d without bias: output numel out_numel (compute dtype); saves the
 * input and the weight. */
gg_t gg_conv2d(gg *G, gg_t x, uint64_t out_numel, int w);
/* nn.BatchNorm2d in training over C channels: output (x's dtype), fp32
 * save_mean and save_invstd [C]; saves x, weight, mean, invstd. */
gg_t gg_batchnorm(gg *G, gg_t x, uint64_t C, int w, int b);
/* nn.ReLU(inplace=True): no allocation; saves its result (x). */
void gg_relu_(gg *G, gg_t x);
/* out += identity (in place): gradients pass to both. */
void gg_add_(gg *G, gg_t x, gg_t y);
/* nn.MaxPool2d: output and int64 indices (saved with the input). */
gg_t gg_maxpool(gg *G, gg_t x, uint64_t out_numel);

#endif
