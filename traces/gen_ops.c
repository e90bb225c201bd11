/*
 * gen_ops.c - see gen_ops.h. Each op: the allocations of its forward in
 * PyTorch's order, then gg_record with what its backward formula saves
 * (tools/autograd/derivatives.yaml) and any backward temporaries.
 */
#include "gen_ops.h"

#include <string.h>

static const char *const attn_names[] = {"sdpa", "eager", "naive"};
static const char *const impl_names[] = {"torch", "naive"};

const char *gg_impl_name(int i)
{
    return i >= 0 && i < 2 ? impl_names[i] : "?";
}

int gg_impl_parse(const char *s)
{
    for (int i = 0; i < 2; i++)
        if (!strcmp(s, impl_names[i])) return i;
    return -1;
}

const char *gg_attention_name(int a)
{
    return a >= 0 && a < 3 ? attn_names[a] : "?";
}

int gg_attention_parse(const char *s)
{
    for (int i = 0; i < 3; i++)
        if (!strcmp(s, attn_names[i])) return i;
    return -1;
}

static void workspace(gg *G)
{
    gg_workspace(G, 0);
}

/* The node that made y (after gg_record), or NULL when none was recorded. */
static gg_node *node_of(gg *G, gg_t y)
{
    uint32_t fn = G->ts[y].fn;
    return fn ? &G->nodes[fn - 1] : NULL;
}

static void set_pass(gg *G, gg_t y)
{
    gg_node *n = node_of(G, y);
    if (n) n->pass = 1;
}

/* ---------------------------------------------------------------- dense */

gg_t gg_linear(gg *G, gg_t x, uint64_t rows, uint64_t in, uint64_t out, int w, int b)
{
    workspace(G);
    gg_t xc = gg_autocast(G, x);
    gg_t W = gg_weight(G, w);
    gg_t Bv = b >= 0 ? gg_weight(G, b) : 0;
    gg_t y = gg_new(G, rows * out, G->cdt);
    gg_t ins[3] = {xc, W, Bv}, sv[2] = {xc, W};
    /* einsum's weight gradient is a transposed temporary AccumulateGrad copies */
    uint64_t wt = G->naive ? in * out * gg_dt(G, W) : 0;
    gg_record(G, y, ins, b >= 0 ? 3 : 2, sv, 2, wt, 0);
    gg_drop(G, xc);
    gg_drop(G, W);
    gg_drop(G, Bv);
    return y;
}

gg_t gg_matmul(gg *G, gg_t a, gg_t b, uint64_t numel)
{
    workspace(G);
    gg_t ac = gg_autocast(G, a), bc = gg_autocast(G, b);
    gg_t y = gg_new(G, numel, gg_dt(G, ac));
    gg_t ins[2] = {ac, bc};
    gg_record(G, y, ins, 2, ins, 2, 0, 0);
    gg_drop(G, ac);
    gg_drop(G, bc);
    return y;
}

gg_t gg_silu(gg *G, gg_t x)
{
    if (!G->naive) return gg_unary(G, x, 0, 1, 0); /* SiLU saves its input */
    gg_t sg = gg_unary(G, x, 0, 0, 1);             /* sigmoid saves its result */
    gg_t y = gg_mul(G, x, sg, gg_numel(G, x), gg_dt(G, x));
    gg_drop(G, sg);
    return y;
}

gg_t gg_gelu(gg *G, gg_t x)
{
    if (!G->naive) return gg_unary(G, x, 0, 1, 0); /* GELU saves its input */
    /* 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))), left to right */
    uint64_t n = gg_numel(G, x);
    uint8_t dt = gg_dt(G, x);
    gg_t half = gg_unary(G, x, 0, 0, 0);
    gg_t cube = gg_unary(G, x, 0, 1, 0); /* pow(x, 3) saves x */
    gg_t c1 = gg_unary(G, cube, 0, 0, 0);
    gg_drop(G, cube);
    gg_t s = gg_add(G, x, c1, n, dt);
    gg_drop(G, c1);
    gg_t c2 = gg_unary(G, s, 0, 0, 0);
    gg_drop(G, s);
    gg_t th = gg_unary(G, c2, 0, 0, 1); /* tanh saves its result */
    gg_drop(G, c2);
    gg_t one = gg_unary(G, th, 0, 0, 0); /* 1.0 + tanh */
    gg_drop(G, th);
    gg_t y = gg_mul(G, half, one, n, dt);
    gg_drop(G, half);
    gg_drop(G, one);
    return y;
}

gg_t gg_embedding(gg *G, gg_t ids, uint64_t n, uint64_t dim, int w)
{
    /* not autocast: the weight's dtype (fp32; ZeRO-3: the gathered copy's) */
    gg_t y = gg_new(G, n * dim, gg_dt(G, G->p[w].h));
    gg_t ins[1] = {G->p[w].h}, sv[1] = {ids};
    /* embedding_dense_backward sorts the indices: sorted and original order */
    gg_record(G, y, ins, 1, sv, 1, n * GG_I64, n * GG_I64);
    return y;
}

/* ---------------------------------------------------------- elementwise */

gg_t gg_unary(gg *G, gg_t x, uint8_t dt, int save_in, int save_out)
{
    return gg_op1(G, x, gg_numel(G, x), dt, save_in, save_out);
}

gg_t gg_op1(gg *G, gg_t x, uint64_t numel, uint8_t dt, int save_in, int save_out)
{
    gg_t y = gg_new(G, numel, dt ? dt : gg_dt(G, x));
    gg_t ins[1] = {x}, sv[2];
    int ns = 0;
    if (save_in) sv[ns++] = x;
    if (save_out) sv[ns++] = y;
    gg_record(G, y, ins, 1, sv, ns, 0, 0);
    return y;
}

gg_t gg_op1_fp32(gg *G, gg_t x, uint64_t numel, int save_in, int save_out)
{
    gg_t xin = G->cdt != GG_F32 && gg_dt(G, x) != GG_F32 ? gg_copy(G, x, gg_numel(G, x), GG_F32)
                                                         : gg_ref(G, x);
    gg_t y = gg_op1(G, xin, numel, GG_F32, save_in, save_out);
    gg_drop(G, xin);
    return y;
}

gg_t gg_mul(gg *G, gg_t a, gg_t b, uint64_t numel, uint8_t dt)
{
    gg_t y = gg_new(G, numel, dt);
    gg_t ins[2] = {a, b}, sv[2];
    int ns = 0;
    if (gg_requires_grad(G, a)) sv[ns++] = b; /* d(a*b)/da needs b */
    if (gg_requires_grad(G, b)) sv[ns++] = a;
    /* a broadcast operand's gradient is the full product, summed down */
    int bcast = (gg_numel(G, a) != numel && gg_requires_grad(G, a)) ||
                (gg_numel(G, b) != numel && gg_requires_grad(G, b));
    gg_record(G, y, ins, 2, sv, ns, bcast ? numel * dt : 0, 0);
    return y;
}

gg_t gg_add(gg *G, gg_t a, gg_t b, uint64_t numel, uint8_t dt)
{
    gg_t y = gg_new(G, numel, dt);
    gg_t ins[2] = {a, b};
    gg_record(G, y, ins, 2, NULL, 0, 0, 0);
    set_pass(G, y);
    return y;
}

gg_t gg_copy(gg *G, gg_t x, uint64_t numel, uint8_t dt)
{
    gg_t y = gg_new(G, numel, dt);
    gg_t ins[1] = {x};
    gg_record(G, y, ins, 1, NULL, 0, 0, 0);
    set_pass(G, y);
    return y;
}

gg_t gg_reduce(gg *G, gg_t x, uint64_t numel, uint8_t dt)
{
    gg_t y = gg_new(G, numel, dt);
    gg_t ins[1] = {x};
    gg_record(G, y, ins, 1, NULL, 0, 0, 0);
    return y;
}

gg_t gg_softmax(gg *G, gg_t x, uint8_t dt)
{
    return gg_unary(G, x, dt, 0, 1);
}

gg_t gg_dropout(gg *G, gg_t x, double p)
{
    if (p <= 0 || G->t->mode != GM_MODE_TRAIN) return gg_ref(G, x);
    gg_t y = gg_new(G, gg_numel(G, x), gg_dt(G, x));
    gg_t mask = gg_new(G, gg_numel(G, x), GG_BOOL);
    gg_t ins[1] = {x}, sv[1] = {mask};
    gg_record(G, y, ins, 1, sv, 1, 0, 0);
    gg_drop(G, mask);
    return y;
}

/* ---------------------------------------------------------------- norms */

gg_t gg_layernorm(gg *G, gg_t x, uint64_t rows, uint64_t d, int w, int b)
{
    /* autocast runs layer_norm in fp32: a 16-bit input is cast up */
    gg_t xin =
        G->cdt != GG_F32 && gg_dt(G, x) != GG_F32 ? gg_copy(G, x, rows * d, GG_F32) : gg_ref(G, x);
    gg_t y = gg_new(G, rows * d, gg_dt(G, xin));
    gg_t mean = gg_new(G, rows, GG_F32), rstd = gg_new(G, rows, GG_F32);
    gg_t ins[3] = {xin, G->p[w].h, G->p[b].h}, sv[3] = {xin, mean, rstd};
    gg_record(G, y, ins, 3, sv, 3, 0, 0);
    gg_drop(G, mean);
    gg_drop(G, rstd);
    gg_drop(G, xin);
    return y;
}

gg_t gg_rmsnorm(gg *G, gg_t x, uint64_t rows, uint64_t d, int w)
{
    uint64_t n = rows * d;
    uint8_t in_dt = gg_dt(G, x);
    gg_t hs = in_dt == GG_F32 ? gg_ref(G, x) : gg_copy(G, x, n, GG_F32);
    gg_t p2 = gg_unary(G, hs, GG_F32, 1, 0);   /* pow(2) */
    gg_t var = gg_reduce(G, p2, rows, GG_F32); /* mean(-1, keepdim=True) */
    gg_drop(G, p2);
    gg_t ve = gg_unary(G, var, GG_F32, 0, 0); /* + eps */
    gg_drop(G, var);
    gg_t r = gg_unary(G, ve, GG_F32, 0, 1); /* rsqrt */
    gg_drop(G, ve);
    gg_t hn = gg_mul(G, hs, r, n, GG_F32);
    gg_drop(G, r);
    gg_drop(G, hs);
    gg_t hc = in_dt == GG_F32 ? gg_ref(G, hn) : gg_copy(G, hn, n, in_dt); /* .to(input_dtype) */
    gg_drop(G, hn);
    gg_t y = gg_mul(G, G->p[w].h, hc, n, GG_F32); /* fp32 weight: fp32 result */
    gg_drop(G, hc);
    return y;
}

/* ------------------------------------------------------------- attention */

static gg_t attn_sdpa(gg *G, gg_t q, gg_t k, gg_t v, uint64_t B, uint64_t H, uint64_t S,
                      uint64_t hd)
{
    uint8_t dt = gg_dt(G, q);
    /* flash (16-bit) keeps logsumexp [B,H,S]; memory-efficient (fp32) pads S to 32 */
    uint64_t Sl = dt == GG_F32 ? (S + 31) / 32 * 32 : S;
    gg_t out = gg_new(G, B * H * S * hd, dt); /* laid out [B,S,H,hd]: already contiguous */
    gg_t lse = gg_new(G, B * H * Sl, GG_F32);
    gg_t ins[3] = {q, k, v}, sv[5] = {q, k, v, out, lse};
    /* backward: flash accumulates dq in fp32, and both keep softmax_d [B,H,S] */
    uint64_t dq_accum = dt == GG_F32 ? 0 : B * S * H * hd * GG_F32;
    gg_record(G, out, ins, 3, sv, 5, dq_accum, B * H * Sl * GG_F32);
    gg_drop(G, lse);
    return out;
}

/* matmul's operand: a view that cannot be reshaped for bmm is copied. */
static gg_t operand(gg *G, gg_t x, int contiguous)
{
    return contiguous ? gg_ref(G, x) : gg_copy(G, x, gg_numel(G, x), gg_dt(G, x));
}

static gg_t attn_eager(gg *G, gg_t q, gg_t k, gg_t v, uint64_t B, uint64_t H, uint64_t S,
                       uint64_t hd, gg_t mask, int contig)
{
    uint8_t dt = gg_dt(G, q);
    uint64_t SS = B * H * S * S;
    gg_t qc = operand(G, q, contig & GG_Q_CONTIG), kc = operand(G, k, contig & GG_K_CONTIG);
    gg_t sc = gg_matmul(G, qc, kc, SS);
    gg_drop(G, qc);
    gg_drop(G, kc);
    gg_t s2 = gg_unary(G, sc, 0, 0, 0); /* * scaling */
    gg_drop(G, sc);
    gg_t s3 = mask ? gg_add(G, s2, mask, SS, dt) : gg_ref(G, s2);
    gg_drop(G, s2);
    gg_t pr = gg_softmax(G, s3, GG_F32); /* softmax(dim=-1, dtype=torch.float32) */
    gg_drop(G, s3);
    gg_t pc = dt == GG_F32 ? gg_ref(G, pr) : gg_copy(G, pr, SS, dt); /* .to(query.dtype) */
    gg_drop(G, pr);
    gg_t vc = operand(G, v, contig & GG_V_CONTIG);
    gg_t o = gg_matmul(G, pc, vc, B * H * S * hd);
    gg_drop(G, vc);
    gg_drop(G, pc);
    gg_t r = gg_copy(G, o, B * H * S * hd, dt); /* transpose(1, 2).contiguous() */
    gg_drop(G, o);
    return r;
}

static gg_t attn_naive(gg *G, gg_t q, gg_t k, gg_t v, uint64_t B, uint64_t H, uint64_t S,
                       uint64_t hd, int contig)
{
    uint8_t dt = gg_dt(G, q);
    uint64_t SS = B * H * S * S, BHS = B * H * S;
    gg_t qc = operand(G, q, contig & GG_Q_CONTIG), kc = operand(G, k, contig & GG_K_CONTIG);
    gg_t sc = gg_matmul(G, qc, kc, SS); /* einsum q . k */
    gg_drop(G, qc);
    gg_drop(G, kc);
    gg_t s2 = gg_unary(G, sc, 0, 0, 0); /* / sqrt(d_k) */
    gg_drop(G, sc);
    gg_t causal = gg_new(G, S * S, GG_BOOL); /* triu(ones(S, S)) */
    gg_t s3 = gg_new(G, SS, dt);             /* where(mask, scores, -inf) */
    gg_t in1[1] = {s2}, sv1[1] = {causal};
    gg_record(G, s3, in1, 1, sv1, 1, 0, 0);
    gg_drop(G, s2);
    gg_drop(G, causal);
    gg_t mx = gg_new(G, BHS, dt), idx = gg_new(G, BHS, GG_I64); /* max(-1, keepdim) */
    gg_t in2[1] = {s3}, sv2[1] = {idx};
    gg_record(G, mx, in2, 1, sv2, 1, 0, 0);
    gg_drop(G, idx);
    gg_t sub = gg_add(G, s3, mx, SS, dt); /* x - max */
    gg_drop(G, s3);
    gg_drop(G, mx);
    gg_t ex = gg_op1_fp32(G, sub, SS, 0, 1); /* exp (autocast: in fp32) */
    gg_drop(G, sub);
    gg_t sm = gg_op1_fp32(G, ex, BHS, 0, 0); /* sum(-1, keepdim) */
    gg_t pr = gg_new(G, SS, gg_dt(G, ex));   /* exp / sum */
    gg_t in3[2] = {ex, sm};
    gg_record(G, pr, in3, 2, in3, 2, SS * gg_dt(G, ex), 0);
    gg_drop(G, ex);
    gg_drop(G, sm);
    gg_t vc = operand(G, v, contig & GG_V_CONTIG);
    gg_t o = gg_matmul(G, pr, vc, B * H * S * hd); /* einsum probs . v */
    gg_drop(G, vc);
    gg_drop(G, pr);
    gg_t r = gg_copy(G, o, B * H * S * hd, dt); /* rearrange to [B, S, H * hd] */
    gg_drop(G, o);
    return r;
}

gg_t gg_attention(gg *G, int style, gg_t q, gg_t k, gg_t v, uint64_t B, uint64_t H, uint64_t KV,
                  uint64_t S, uint64_t hd, gg_t mask, int contig)
{
    uint64_t full = B * H * S * hd;
    gg_t qa = gg_autocast(G, q), ka = gg_autocast(G, k), va = gg_autocast(G, v);
    if (qa != q) contig |= GG_Q_CONTIG; /* a cast makes a contiguous copy */
    if (ka != k) contig |= GG_K_CONTIG;
    if (va != v) contig |= GG_V_CONTIG;
    /* repeat_kv: expand + reshape copies k and v to H heads */
    gg_t kr = KV < H ? gg_copy(G, ka, full, gg_dt(G, ka)) : gg_ref(G, ka);
    gg_t vr = KV < H ? gg_copy(G, va, full, gg_dt(G, va)) : gg_ref(G, va);
    if (KV < H) contig |= GG_K_CONTIG | GG_V_CONTIG;
    gg_drop(G, ka);
    gg_drop(G, va);
    gg_t r;
    if (style == GG_ATTN_SDPA)
        r = attn_sdpa(G, qa, kr, vr, B, H, S, hd);
    else if (style == GG_ATTN_EAGER)
        r = attn_eager(G, qa, kr, vr, B, H, S, hd, mask, contig);
    else
        r = attn_naive(G, qa, kr, vr, B, H, S, hd, contig);
    gg_drop(G, qa);
    gg_drop(G, kr);
    gg_drop(G, vr);
    return r;
}

gg_t gg_rope(gg *G, gg_t x, gg_t cos, gg_t sin, uint64_t n)
{
    uint8_t dt = gg_dt(G, x) > gg_dt(G, cos) ? gg_dt(G, x) : gg_dt(G, cos);
    gg_t xc = gg_mul(G, x, cos, n, dt);
    gg_t neg = gg_op1(G, x, n / 2, 0, 0, 0); /* -x2 */
    gg_t rot = gg_new(G, n, gg_dt(G, x));    /* cat((-x2, x1), dim=-1) */
    gg_t in[2] = {neg, x};
    gg_record(G, rot, in, 2, NULL, 0, 0, 0);
    gg_drop(G, neg);
    gg_t rs = gg_mul(G, rot, sin, n, dt);
    gg_drop(G, rot);
    gg_t y = gg_add(G, xc, rs, n, dt);
    gg_drop(G, xc);
    gg_drop(G, rs);
    return y;
}

/* ------------------------------------------------------------------ loss */

/* cross entropy written out: logsumexp via max, subtract, exp, sum, log;
 * the target logits gathered; the mean of their difference. */
static gg_t cross_entropy_naive(gg *G, gg_t logits, gg_t targets, uint64_t rows, uint64_t n)
{
    uint8_t dt = gg_dt(G, logits);
    gg_t mx = gg_new(G, rows, dt), idx = gg_new(G, rows, GG_I64);
    gg_t in1[1] = {logits}, sv1[1] = {idx};
    gg_record(G, mx, in1, 1, sv1, 1, 0, 0);
    gg_drop(G, idx);
    gg_t sub = gg_add(G, logits, mx, n, dt);
    gg_drop(G, mx);
    gg_t ex = gg_op1_fp32(G, sub, n, 0, 1); /* exp, sum, log: fp32 under autocast */
    gg_t sm = gg_op1_fp32(G, ex, rows, 0, 0);
    gg_drop(G, ex);
    gg_t lg = gg_op1_fp32(G, sm, rows, 1, 0); /* log saves its input */
    gg_drop(G, sm);
    gg_t tg = gg_new(G, rows, dt); /* gather(sub, targets) */
    gg_t in2[1] = {sub}, sv2[1] = {targets};
    gg_record(G, tg, in2, 1, sv2, 1, 0, 0);
    gg_drop(G, sub);
    gg_t d = gg_add(G, lg, tg, rows, GG_F32);
    gg_drop(G, lg);
    gg_drop(G, tg);
    gg_t loss = gg_reduce(G, d, 1, GG_F32); /* mean */
    gg_drop(G, d);
    return loss;
}

gg_t gg_cross_entropy(gg *G, gg_t logits, gg_t targets, uint64_t rows, uint64_t classes)
{
    uint64_t n = rows * classes;
    if (G->naive) return cross_entropy_naive(G, logits, targets, rows, n);
    gg_t lf = gg_dt(G, logits) == GG_F32 ? gg_ref(G, logits) : gg_copy(G, logits, n, GG_F32);
    gg_t ls = gg_softmax(G, lf, GG_F32); /* log_softmax */
    gg_drop(G, lf);
    gg_t loss = gg_new(G, 1, GG_F32), tw = gg_new(G, 1, GG_F32); /* nll_loss, total_weight */
    gg_t ins[1] = {ls}, sv[2] = {targets, tw};
    gg_record(G, loss, ins, 1, sv, 2, 0, 0);
    gg_drop(G, tw);
    gg_drop(G, ls);
    return loss;
}

/* ---------------------------------------------------------------- vision */

gg_t gg_conv2d(gg *G, gg_t x, uint64_t out_numel, int w)
{
    gg_t xc = gg_autocast(G, x);
    gg_t W = gg_weight(G, w);
    gg_t y = gg_new(G, out_numel, G->cdt);
    gg_t ins[2] = {xc, W};
    gg_record(G, y, ins, 2, ins, 2, 0, 0);
    gg_drop(G, xc);
    gg_drop(G, W);
    return y;
}

gg_t gg_batchnorm(gg *G, gg_t x, uint64_t C, int w, int b)
{
    gg_t y = gg_new(G, gg_numel(G, x), gg_dt(G, x));
    if (G->t->mode != GM_MODE_TRAIN) return y; /* eval: running statistics, nothing saved */
    gg_t mean = gg_new(G, C, GG_F32), invstd = gg_new(G, C, GG_F32);
    gg_t ins[3] = {x, G->p[w].h, G->p[b].h}, sv[3] = {x, mean, invstd};
    gg_record(G, y, ins, 3, sv, 3, 0, 0);
    gg_drop(G, mean);
    gg_drop(G, invstd);
    return y;
}

void gg_relu_(gg *G, gg_t x)
{
    gg_record_inplace(G, x, NULL, 0, 1, 0);
}

void gg_add_(gg *G, gg_t x, gg_t y)
{
    gg_t in[1] = {y};
    gg_record_inplace(G, x, in, 1, 0, 1);
}

gg_t gg_maxpool(gg *G, gg_t x, uint64_t out_numel)
{
    gg_t y = gg_new(G, out_numel, gg_dt(G, x));
    gg_t idx = gg_new(G, out_numel, GG_I64);
    gg_t ins[1] = {x}, sv[2] = {x, idx};
    gg_record(G, y, ins, 1, sv, 2, 0, 0);
    gg_drop(G, idx);
    return y;
}
