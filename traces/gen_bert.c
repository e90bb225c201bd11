/*
 * gen_bert.c - synthetic BERT training trace; see gen_bert.h for the model of
 * what is allocated when.
 *
 * Code layout: the generator context (struct gen) holds the model's shapes
 * and tensors beside the shared emitter (gen_common.h: clock, address
 * counter, event buffer, sticky error), so the model code below reads like
 * the PyTorch program it imitates, without an error check per tensor.
 */
#include "gen_bert.h"
#include "gen_common.h"
#include "base/clock.h"
#include "base/units.h"

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Dynamic padding: per-iteration length ~ N(mean, sigma) as fractions of seq. */
#define GEN_JITTER_MEAN 0.75
#define GEN_JITTER_SIGMA 0.20
#define GEN_LN_STAT_BYTES 4ull /* LayerNorm mean/rstd are fp32 for any dtype */
#define GEN_INDEX_BYTES 8ull   /* int64 token ids, masks, labels */

/* A live device tensor: addr 0 = not live. */
typedef gm_gen_tensor tensor;

/* Parameters in registration (module) order. */
enum { P_EMB_WORD, P_EMB_POS, P_EMB_TYPE, P_EMB_LN_W, P_EMB_LN_B, P_EMB_COUNT };
/* Per encoder layer, added to layer_base(l). */
enum {
    L_Q_W,
    L_Q_B,
    L_K_W,
    L_K_B,
    L_V_W,
    L_V_B,
    L_O_W,
    L_O_B,
    L_LN1_W,
    L_LN1_B,
    L_I_W,
    L_I_B,
    L_O2_W,
    L_O2_B,
    L_LN2_W,
    L_LN2_B,
    L_COUNT
};
enum { H_POOL_W, H_POOL_B, H_CLS_W, H_CLS_B, H_COUNT }; /* after the layers */

typedef struct param {
    uint64_t numel;
    tensor w, grad, exp_avg, exp_avg_sq;
} param;

/* What one encoder layer's forward leaves for its backward. */
typedef struct layer_saved {
    tensor x;              /* layer input: saved by the Q, K, V linears */
    tensor q_c, k_c, v_c;  /* contiguous bmm operands                   */
    tensor probs, probs_d; /* softmax output, its dropout               */
    tensor probs_mask;     /* attention-probs dropout mask (bool)       */
    tensor ctx;            /* context, input of the output dense        */
    tensor attn_mask;      /* dropout mask after the output dense       */
    tensor r, ln1_mean, ln1_rstd;
    tensor y;     /* LN1 output: FFN input and residual        */
    tensor h, gl; /* FFN intermediate, GELU output             */
    tensor ffn_mask;
    tensor r2, ln2_mean, ln2_rstd;
} layer_saved;

typedef struct gen {
    gm_gen o; /* the emitter: clock, addresses, events, sticky error */
    const gm_bert_params *p;
    gsl_rng *rng;
    /* shapes of the current iteration */
    uint64_t B, S, H, A, I, L, d;
    param *params;
    size_t nparams;
    layer_saved *layers;
    tensor *scratch; /* nparams: foreach ops' per-parameter temporaries */
    /* cross-iteration tensors */
    tensor in_ids, in_types, in_mask, in_labels, out_logits, out_loss;
    /* embeddings / head saved state of the current iteration */
    tensor emb_sum, emb_mean, emb_rstd, emb_mask, enc_out;
    tensor pool_t, pool_d, pool_mask, lsm, total_weight;
} gen;

/* ---------------------------------------------------------------- params */

void gm_bert_defaults(gm_bert_params *p)
{
    memset(p, 0, sizeof *p);
    p->layers = 12;
    p->hidden = 768;
    p->heads = 12;
    p->intermediate = 0;
    p->vocab = 30522;
    p->max_positions = 512;
    p->type_vocab = 2;
    p->labels = 2;
    p->seq = 128;
    p->batch = 32;
    p->dtype_bytes = 4;
    p->iterations = 8;
    p->adam = 1;
    p->set_to_none = 1;
    p->jitter = 1;
    p->seed = 1;
    p->stream = 0;
    p->device_total_bytes = 80 * GM_GiB;
}

static uint64_t inter_of(const gm_bert_params *p)
{
    return p->intermediate ? (uint64_t)p->intermediate : 4 * (uint64_t)p->hidden;
}

static int check_range(const char *name, long long v, long long lo, long long hi, gm_err *err)
{
    return gm_gen_check_range("bert", name, v, lo, hi, err);
}

/* a*b*c*d*e bytes must stay within one trace event's size limit. */
static int check_bytes(const char *what, uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t e,
                       gm_err *err)
{
    return gm_gen_check_bytes("bert", what, a, b, c, d, e, err);
}

int gm_bert_check(const gm_bert_params *p, gm_err *err)
{
    int rc;
    if ((rc = check_range("layers", p->layers, 1, 4096, err)) ||
        (rc = check_range("hidden", p->hidden, 1, 1 << 20, err)) ||
        (rc = check_range("heads", p->heads, 1, p->hidden, err)) ||
        (rc = check_range("intermediate", p->intermediate, 0, 1 << 22, err)) ||
        (rc = check_range("vocab", p->vocab, 1, 1 << 26, err)) ||
        (rc = check_range("max_positions", p->max_positions, 1, 1 << 22, err)) ||
        (rc = check_range("type_vocab", p->type_vocab, 1, 1 << 16, err)) ||
        (rc = check_range("labels", p->labels, 1, 1 << 24, err)) ||
        (rc = check_range("seq", p->seq, 1, p->max_positions, err)) ||
        (rc = check_range("batch", p->batch, 1, 1 << 24, err)) ||
        (rc = check_range("iterations", p->iterations, 1, 1 << 24, err)))
        return rc;
    if (p->hidden % p->heads)
        return gm_errf(err, GM_EINVAL,
                       "bert: hidden %d is not a multiple of heads %d; pick heads that divide "
                       "hidden (BERT-base: 768 and 12)",
                       p->hidden, p->heads);
    if (p->dtype_bytes != 2 && p->dtype_bytes != 4)
        return gm_errf(err, GM_EINVAL, "bert dtype_bytes = %d; use 2 (fp16/bf16) or 4 (fp32)",
                       p->dtype_bytes);
    uint64_t d = (uint64_t)p->dtype_bytes, B = (uint64_t)p->batch, S = (uint64_t)p->seq;
    uint64_t H = (uint64_t)p->hidden, A = (uint64_t)p->heads;
    if ((rc = check_bytes("attention scores", B, A, S, S, d, err)) ||
        (rc = check_bytes("FFN intermediate", B, S, inter_of(p), d, 1, err)) ||
        (rc = check_bytes("FFN weight", H, inter_of(p), d, 1, 1, err)) ||
        (rc = check_bytes("word embedding", (uint64_t)p->vocab, H, d, 1, 1, err)) ||
        (rc = check_bytes("position embedding", (uint64_t)p->max_positions, H, d, 1, 1, err)) ||
        (rc = check_bytes("classifier", (uint64_t)p->labels, H, d, B, 1, err)))
        return rc;
    return GM_OK;
}

/* Element counts of every parameter, in module registration order. */
static size_t param_shapes(const gm_bert_params *p, uint64_t *numel)
{
    uint64_t H = (uint64_t)p->hidden, I = inter_of(p), L = (uint64_t)p->labels;
    size_t n = 0;
    numel[n++] = (uint64_t)p->vocab * H;
    numel[n++] = (uint64_t)p->max_positions * H;
    numel[n++] = (uint64_t)p->type_vocab * H;
    numel[n++] = H;
    numel[n++] = H;
    for (int l = 0; l < p->layers; l++) {
        const uint64_t shape[L_COUNT] = {
            [L_Q_W] = H * H,  [L_Q_B] = H,   [L_K_W] = H * H, [L_K_B] = H,
            [L_V_W] = H * H,  [L_V_B] = H,   [L_O_W] = H * H, [L_O_B] = H,
            [L_LN1_W] = H,    [L_LN1_B] = H, [L_I_W] = H * I, [L_I_B] = I,
            [L_O2_W] = I * H, [L_O2_B] = H,  [L_LN2_W] = H,   [L_LN2_B] = H,
        };
        memcpy(numel + n, shape, sizeof shape);
        n += L_COUNT;
    }
    numel[n++] = H * H;
    numel[n++] = H;
    numel[n++] = L * H;
    numel[n++] = L;
    return n;
}

static size_t param_total(const gm_bert_params *p)
{
    return P_EMB_COUNT + (size_t)p->layers * L_COUNT + H_COUNT;
}

uint64_t gm_bert_param_count(const gm_bert_params *p)
{
    uint64_t *numel = malloc(param_total(p) * sizeof *numel);
    if (!numel) return 0;
    size_t n = param_shapes(p, numel);
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += numel[i];
    free(numel);
    return total;
}

void gm_bert_describe(const gm_bert_params *p, char *buf, size_t len)
{
    snprintf(buf, len,
             "BERT training (BertForSequenceClassification, %s, zero_grad set_to_none=%s): "
             "layers=%d hidden=%d heads=%d intermediate=%llu vocab=%d max_positions=%d "
             "labels=%d seq=%d batch=%d dtype=%s iterations=%d seq_jitter=%s seed=%llu "
             "stream=%llu params=%llu",
             p->adam ? "AdamW" : "SGD", p->set_to_none ? "true" : "false", p->layers, p->hidden,
             p->heads, (unsigned long long)inter_of(p), p->vocab, p->max_positions, p->labels,
             p->seq, p->batch, p->dtype_bytes == 2 ? "16-bit" : "fp32", p->iterations,
             p->jitter ? "on" : "off", (unsigned long long)p->seed, (unsigned long long)p->stream,
             (unsigned long long)gm_bert_param_count(p));
}

/* ------------------------------------------------------------- emission */

static tensor talloc_at(gen *g, uint64_t bytes, uint8_t cat, uint64_t bytes_per_ns)
{
    return gm_gen_alloc_at(&g->o, bytes, cat, bytes_per_ns);
}

static tensor talloc(gen *g, uint64_t bytes, uint8_t cat)
{
    return gm_gen_alloc(&g->o, bytes, cat);
}

static void tfree(gen *g, tensor *t)
{
    gm_gen_free(&g->o, t);
}

static void tick(gen *g, uint64_t bytes)
{
    gm_gen_tick(&g->o, bytes);
}

/* Shorthands for the model code: sizes in elements of the model dtype. */
#define ACT(n) talloc(g, (n)*g->d, GM_CAT_ACTIVATION)
#define TMP(n) talloc(g, (n)*g->d, GM_CAT_TEMPORARY)
#define AGD(n) talloc(g, (n)*g->d, GM_CAT_AUTOGRAD_DETAIL)
#define MASK(n) talloc(g, (n), GM_CAT_ACTIVATION) /* dropout masks: bool */
#define LNSTAT() talloc(g, g->B * g->S * GEN_LN_STAT_BYTES, GM_CAT_ACTIVATION)

/* ------------------------------------------------------------ gradients */

static size_t layer_base(int l)
{
    return P_EMB_COUNT + (size_t)l * L_COUNT;
}

static size_t head_base(const gen *g)
{
    return layer_base(g->p->layers);
}

/*
 * AccumulateGrad for parameter i: the freshly computed gradient becomes .grad
 * when there is none (set_to_none, or the first backward); otherwise it is
 * computed into a temporary that is added in place and freed.
 */
static void grad(gen *g, size_t i)
{
    param *pr = &g->params[i];
    if (!pr->grad.addr) {
        pr->grad = talloc(g, pr->numel * g->d, GM_CAT_GRADIENT);
        return;
    }
    tensor t = AGD(pr->numel);
    tick(g, pr->numel * g->d);
    tfree(g, &t);
}

/* Linear backward: input gradient (if wanted), weight and bias gradients. */
static tensor linear_bwd(gen *g, size_t w, uint64_t in_numel)
{
    tensor dx = in_numel ? AGD(in_numel) : (tensor){0, 0, 0, 0};
    grad(g, w);
    grad(g, w + 1);
    return dx;
}

/* ----------------------------------------------------------- embeddings */

static tensor embeddings_fwd(gen *g)
{
    uint64_t BSH = g->B * g->S * g->H;
    tensor we = TMP(BSH); /* word lookup */
    tensor te = TMP(BSH); /* token-type lookup */
    tensor e1 = TMP(BSH);
    tfree(g, &we);
    tfree(g, &te);
    tensor pe = TMP(g->S * g->H); /* position lookup, broadcast over batch */
    g->emb_sum = ACT(BSH);        /* LayerNorm input */
    tfree(g, &e1);
    tfree(g, &pe);
    tensor ln = TMP(BSH);
    g->emb_mean = LNSTAT();
    g->emb_rstd = LNSTAT();
    tensor x0 = ACT(BSH); /* dropout output: layer 0's input */
    g->emb_mask = MASK(BSH);
    tfree(g, &ln);
    return x0;
}

/* embedding_dense_backward: sort the indices, scatter-add into a dense grad. */
static void embedding_bwd(gen *g, size_t i, uint64_t nindices)
{
    tensor sorted = talloc(g, nindices * GEN_INDEX_BYTES, GM_CAT_TEMPORARY);
    tensor orig = talloc(g, nindices * GEN_INDEX_BYTES, GM_CAT_TEMPORARY);
    grad(g, i);
    tfree(g, &sorted);
    tfree(g, &orig);
}

static void embeddings_bwd(gen *g, tensor *gin)
{
    uint64_t BSH = g->B * g->S * g->H;
    tensor dln = AGD(BSH); /* dropout backward */
    tfree(g, gin);
    tfree(g, &g->emb_mask);
    tensor de = AGD(BSH); /* LayerNorm backward */
    grad(g, P_EMB_LN_W);
    grad(g, P_EMB_LN_B);
    tfree(g, &dln);
    tfree(g, &g->emb_sum);
    tfree(g, &g->emb_mean);
    tfree(g, &g->emb_rstd);
    tensor dpe = AGD(g->S * g->H); /* add backward: sum over the batch */
    embedding_bwd(g, P_EMB_POS, g->S);
    tfree(g, &dpe);
    embedding_bwd(g, P_EMB_TYPE, g->B * g->S);
    embedding_bwd(g, P_EMB_WORD, g->B * g->S);
    tfree(g, &de);
}

/* -------------------------------------------------------- encoder layer */

static tensor self_attention_fwd(gen *g, layer_saved *s)
{
    uint64_t BSH = g->B * g->S * g->H, BASS = g->B * g->A * g->S * g->S;
    tensor q = TMP(BSH), k = TMP(BSH), v = TMP(BSH);
    s->q_c = ACT(BSH); /* matmul's reshape of the permuted Q copies */
    s->k_c = ACT(BSH); /* ... and of K^T */
    tensor sc = TMP(BASS);
    tensor sc2 = TMP(BASS); /* / sqrt(head_dim) */
    tfree(g, &sc);
    tensor sc3 = TMP(BASS); /* + extended attention mask */
    tfree(g, &sc2);
    s->probs = ACT(BASS); /* softmax saves its output */
    tfree(g, &sc3);
    s->probs_d = ACT(BASS);
    s->probs_mask = MASK(BASS);
    s->v_c = ACT(BSH);
    tensor c = TMP(BSH); /* bmm output [B*A, S, D] */
    s->ctx = ACT(BSH);   /* permute(0, 2, 1, 3).contiguous() */
    tfree(g, &c);
    tfree(g, &q); /* locals of BertSelfAttention.forward go */
    tfree(g, &k);
    tfree(g, &v);
    return s->ctx;
}

static tensor layer_fwd(gen *g, layer_saved *s, tensor x)
{
    uint64_t BSH = g->B * g->S * g->H, BSI = g->B * g->S * g->I;
    s->x = x;
    self_attention_fwd(g, s);
    tensor o = TMP(BSH); /* attention output dense */
    tensor od = TMP(BSH);
    s->attn_mask = MASK(BSH);
    tfree(g, &o);
    s->r = ACT(BSH); /* + residual: LayerNorm input */
    tfree(g, &od);
    s->y = ACT(BSH);
    s->ln1_mean = LNSTAT();
    s->ln1_rstd = LNSTAT();
    s->h = ACT(BSI);
    s->gl = ACT(BSI); /* GELU */
    tensor o2 = TMP(BSH);
    tensor o2d = TMP(BSH);
    s->ffn_mask = MASK(BSH);
    tfree(g, &o2);
    s->r2 = ACT(BSH);
    tfree(g, &o2d);
    tensor out = ACT(BSH);
    s->ln2_mean = LNSTAT();
    s->ln2_rstd = LNSTAT();
    return out;
}

/* Attention backward from d(context) down to the Q, K, V gradients. */
static void self_attention_bwd(gen *g, layer_saved *s, tensor *dctx, tensor *dq, tensor *dk,
                               tensor *dv)
{
    uint64_t BSH = g->B * g->S * g->H, BASS = g->B * g->A * g->S * g->S;
    tensor dc = AGD(BSH); /* permute back, reshape for bmm: a copy */
    tfree(g, dctx);
    tensor dprobs_d = AGD(BASS);
    tensor dv_c = AGD(BSH);
    tfree(g, &dc);
    tfree(g, &s->probs_d);
    tfree(g, &s->v_c);
    *dv = AGD(BSH); /* V's reshape/permute backward: contiguous for the linear */
    tfree(g, &dv_c);
    tensor dprobs = AGD(BASS); /* dropout backward */
    tfree(g, &dprobs_d);
    tfree(g, &s->probs_mask);
    tensor dsc = AGD(BASS); /* softmax backward */
    tfree(g, &dprobs);
    tfree(g, &s->probs);
    tensor dsc2 = AGD(BASS); /* division backward */
    tfree(g, &dsc);
    tensor dq_c = AGD(BSH), dk_c = AGD(BSH); /* bmm backward */
    tfree(g, &dsc2);
    tfree(g, &s->q_c);
    tfree(g, &s->k_c);
    *dk = AGD(BSH);
    tfree(g, &dk_c);
    *dq = AGD(BSH);
    tfree(g, &dq_c);
}

static tensor layer_bwd(gen *g, int l, layer_saved *s, tensor gin)
{
    uint64_t BSH = g->B * g->S * g->H, BSI = g->B * g->S * g->I;
    size_t pb = layer_base(l);
    tensor dr2 = AGD(BSH); /* LN2 backward */
    grad(g, pb + L_LN2_W);
    grad(g, pb + L_LN2_B);
    tfree(g, &gin);
    tfree(g, &s->r2);
    tfree(g, &s->ln2_mean);
    tfree(g, &s->ln2_rstd);
    tensor d_o2 = AGD(BSH); /* FFN dropout backward */
    tfree(g, &s->ffn_mask);
    tensor dgl = linear_bwd(g, pb + L_O2_W, BSI);
    tfree(g, &d_o2);
    tfree(g, &s->gl);
    tensor dh = AGD(BSI); /* GELU backward */
    tfree(g, &dgl);
    tfree(g, &s->h);
    tensor dy_p = linear_bwd(g, pb + L_I_W, BSH);
    tfree(g, &dh);
    tfree(g, &s->y);
    tensor dy = AGD(BSH); /* residual: dy_p + dr2 */
    tfree(g, &dy_p);
    tfree(g, &dr2);
    tensor dr = AGD(BSH); /* LN1 backward */
    grad(g, pb + L_LN1_W);
    grad(g, pb + L_LN1_B);
    tfree(g, &dy);
    tfree(g, &s->r);
    tfree(g, &s->ln1_mean);
    tfree(g, &s->ln1_rstd);
    tensor d_o = AGD(BSH); /* attention-output dropout backward */
    tfree(g, &s->attn_mask);
    tensor dctx = linear_bwd(g, pb + L_O_W, BSH);
    tfree(g, &d_o);
    tfree(g, &s->ctx);
    tensor dq, dk, dv;
    self_attention_bwd(g, s, &dctx, &dq, &dk, &dv);
    /* V's linear runs first (highest sequence number); the input gradient
     * starts as dr + dx_v, then dx_k and dx_q are added in place. */
    tensor dxv = linear_bwd(g, pb + L_V_W, BSH);
    tfree(g, &dv);
    tensor acc = AGD(BSH);
    tfree(g, &dxv);
    tfree(g, &dr);
    tensor dxk = linear_bwd(g, pb + L_K_W, BSH);
    tfree(g, &dk);
    tick(g, BSH * g->d);
    tfree(g, &dxk);
    tensor dxq = linear_bwd(g, pb + L_Q_W, BSH);
    tfree(g, &dq);
    tick(g, BSH * g->d);
    tfree(g, &dxq);
    tfree(g, &s->x);
    return acc;
}

/* ----------------------------------------------------------------- head */

static void head_fwd(gen *g)
{
    uint64_t BH = g->B * g->H, BL = g->B * g->L;
    tensor pd = TMP(BH); /* pooler dense on the first token */
    g->pool_t = ACT(BH); /* tanh saves its output */
    tfree(g, &pd);
    g->pool_d = ACT(BH);
    g->pool_mask = MASK(BH);
    tensor logits = TMP(BL); /* returned to the user: lives until next forward */
    g->lsm = ACT(BL);        /* log_softmax saves its output */
    tensor loss = TMP(1);
    g->total_weight = ACT(1); /* nll_loss saves total_weight */
    if (g->out_logits.addr) { /* `outputs = model(...)` rebinds: last iteration's go */
        tfree(g, &g->out_logits);
        tfree(g, &g->out_loss);
    }
    g->out_logits = logits;
    g->out_loss = loss;
}

static tensor head_bwd(gen *g)
{
    uint64_t BH = g->B * g->H, BL = g->B * g->L;
    size_t hb = head_base(g);
    tensor one = AGD(1); /* loss.backward(): ones_like(loss) */
    tensor dlsm = AGD(BL);
    tfree(g, &one);
    tfree(g, &g->total_weight);
    tensor dlog = AGD(BL); /* log_softmax backward */
    tfree(g, &dlsm);
    tfree(g, &g->lsm);
    tensor dpd = linear_bwd(g, hb + H_CLS_W, BH);
    tfree(g, &dlog);
    tfree(g, &g->pool_d);
    tensor dpt = AGD(BH); /* dropout backward */
    tfree(g, &dpd);
    tfree(g, &g->pool_mask);
    tensor dtanh = AGD(BH);
    tfree(g, &dpt);
    tfree(g, &g->pool_t);
    tensor dfirst = linear_bwd(g, hb + H_POOL_W, BH);
    tfree(g, &dtanh);
    tfree(g, &g->enc_out);               /* the pooler saved a view of it */
    tensor dx = AGD(g->B * g->S * g->H); /* select backward: zeros + copy */
    tfree(g, &dfirst);
    return dx;
}

/* ------------------------------------------------------------ optimizer */

/* clip_grad_norm_(foreach): one norm per grad, stack, total, clip coef. */
static void clip_grad_norm(gen *g)
{
    size_t n = g->nparams;
    tensor *norms = g->scratch;
    for (size_t i = 0; i < n; i++)
        norms[i] = TMP(1);
    tensor stacked = TMP(n);
    tensor total = TMP(1);
    tensor denom = TMP(1); /* total_norm + 1e-6 */
    tensor coef = TMP(1);
    tfree(g, &denom);
    tensor clamped = TMP(1);
    tfree(g, &coef);
    uint64_t grad_bytes = 0;
    for (size_t i = 0; i < n; i++)
        grad_bytes += g->params[i].numel * g->d;
    tick(g, grad_bytes); /* foreach_mul_(grads, clamped) */
    for (size_t i = 0; i < n; i++)
        tfree(g, &norms[i]);
    tfree(g, &stacked);
    tfree(g, &clamped);
    tfree(g, &total);
}

/* AdamW, foreach implementation (torch.optim._multi_tensor_adamw). */
static void adamw_step(gen *g)
{
    size_t n = g->nparams;
    uint64_t bytes = 0;
    for (size_t i = 0; i < n; i++) {
        param *pr = &g->params[i];
        bytes += pr->numel * g->d;
        if (!pr->exp_avg.addr) { /* _init_group: zeros_like, first step only */
            pr->exp_avg = talloc(g, pr->numel * g->d, GM_CAT_OPTIMIZER_STATE);
            pr->exp_avg_sq = talloc(g, pr->numel * g->d, GM_CAT_OPTIMIZER_STATE);
        }
    }
    tick(g, bytes);     /* foreach_mul_(params, 1 - lr * wd) */
    tick(g, 3 * bytes); /* lerp_(exp_avgs), mul_ + addcmul_(exp_avg_sqs) */
    tensor *sq = g->scratch;
    for (size_t i = 0; i < n; i++) /* exp_avg_sq_sqrt = foreach_sqrt(exp_avg_sqs) */
        sq[i] = TMP(g->params[i].numel);
    tick(g, 3 * bytes); /* div_, add_(eps), addcdiv_(params) */
    for (size_t i = 0; i < n; i++)
        tfree(g, &sq[i]);
}

static void sgd_step(gen *g)
{
    uint64_t bytes = 0;
    for (size_t i = 0; i < g->nparams; i++)
        bytes += g->params[i].numel * g->d;
    tick(g, bytes); /* foreach_add_(params, grads, alpha=-lr): in place */
}

/* ------------------------------------------------------------ iteration */

static uint64_t iteration_seq(gen *g)
{
    const gm_bert_params *p = g->p;
    if (!p->jitter) return (uint64_t)p->seq;
    double x = GEN_JITTER_MEAN * p->seq + gsl_ran_gaussian(g->rng, GEN_JITTER_SIGMA * p->seq);
    double lo = p->seq / 4.0 < 1.0 ? 1.0 : p->seq / 4.0;
    if (x < lo) x = lo;
    if (x > p->seq) x = p->seq;
    uint64_t s = ((uint64_t)ceil(x) + 7) / 8 * 8; /* pad to a multiple of 8 */
    return s > (uint64_t)p->seq ? (uint64_t)p->seq : s;
}

static void load_batch(gen *g)
{
    uint64_t BS = g->B * g->S;
    if (g->in_ids.addr) { /* `for batch in loader` rebinds: the old batch goes */
        tfree(g, &g->in_ids);
        tfree(g, &g->in_types);
        tfree(g, &g->in_mask);
        tfree(g, &g->in_labels);
    }
    g->in_ids = talloc(g, BS * GEN_INDEX_BYTES, GM_CAT_INPUT);
    g->in_types = talloc(g, BS * GEN_INDEX_BYTES, GM_CAT_INPUT);
    g->in_mask = talloc(g, BS * GEN_INDEX_BYTES, GM_CAT_INPUT);
    g->in_labels = talloc(g, g->B * GEN_INDEX_BYTES, GM_CAT_INPUT);
}

static void zero_grad(gen *g)
{
    if (!g->p->set_to_none) return; /* grads are zeroed in place: no allocator traffic */
    g->o.phase = GM_PHASE_OPTIMIZER;
    for (size_t i = 0; i < g->nparams; i++)
        if (g->params[i].grad.addr) tfree(g, &g->params[i].grad);
}

static void iteration(gen *g, int it)
{
    g->S = iteration_seq(g);
    g->o.phase = GM_PHASE_FORWARD;
    gm_gen_mark_iteration(&g->o, it);
    load_batch(g);
    zero_grad(g);

    g->o.phase = GM_PHASE_FORWARD;
    uint64_t BS = g->B * g->S;
    tensor m1 = TMP(BS); /* extended attention mask: .to(dtype) */
    tensor m2 = TMP(BS); /* 1.0 - mask */
    tfree(g, &m1);
    tensor ext = TMP(BS); /* * finfo.min */
    tfree(g, &m2);
    tensor x = embeddings_fwd(g);
    for (int l = 0; l < g->p->layers && g->o.rc == GM_OK; l++)
        x = layer_fwd(g, &g->layers[l], x);
    g->enc_out = x;
    tfree(g, &ext);
    head_fwd(g);

    g->o.phase = GM_PHASE_BACKWARD;
    tensor gin = head_bwd(g);
    for (int l = g->p->layers - 1; l >= 0 && g->o.rc == GM_OK; l--)
        gin = layer_bwd(g, l, &g->layers[l], gin);
    embeddings_bwd(g, &gin);

    g->o.phase = GM_PHASE_OPTIMIZER;
    clip_grad_norm(g);
    if (g->p->adam)
        adamw_step(g);
    else
        sgd_step(g);
}

/* model.to(device): every parameter, copied host to device. */
static void load_model(gen *g)
{
    g->o.phase = GM_PHASE_UNKNOWN;
    for (size_t i = 0; i < g->nparams; i++) {
        param *pr = &g->params[i];
        pr->w = talloc_at(g, pr->numel * g->d, GM_CAT_PARAMETER, GM_GEN_H2D_BYTES_PER_NS);
        g->o.st.param_bytes += pr->w.size;
    }
}

static int gen_setup(gen *g, const gm_bert_params *p)
{
    g->p = p;
    g->B = (uint64_t)p->batch;
    g->H = (uint64_t)p->hidden;
    g->A = (uint64_t)p->heads;
    g->I = inter_of(p);
    g->L = (uint64_t)p->labels;
    g->d = (uint64_t)p->dtype_bytes;
    size_t n = param_total(p);
    uint64_t *numel = malloc(n * sizeof *numel);
    g->params = calloc(n, sizeof *g->params);
    g->layers = calloc((size_t)p->layers, sizeof *g->layers);
    g->scratch = calloc(n, sizeof *g->scratch);
    g->rng = gsl_rng_alloc(gsl_rng_mt19937);
    if (!numel || !g->params || !g->layers || !g->scratch || !g->rng) {
        free(numel);
        return gm_errf(g->o.err, GM_ENOMEM, "gen_bert: out of host memory");
    }
    /* mt19937 takes an unsigned long seed; fold 64 bits so none is lost */
    gsl_rng_set(g->rng, (unsigned long)(p->seed ^ (p->seed >> 32)));
    g->nparams = param_shapes(p, numel);
    for (size_t i = 0; i < g->nparams; i++)
        g->params[i].numel = numel[i];
    free(numel);
    return GM_OK;
}

int gm_bert_generate(const gm_bert_params *p, gm_gen_event_sink sink, gm_gen_marker_sink marks,
                     void *ctx, gm_bert_stats *stats, gm_err *err)
{
    int rc = gm_bert_check(p, err);
    if (rc != GM_OK) return rc;
    gen *g = calloc(1, sizeof *g);
    if (!g) return gm_errf(err, GM_ENOMEM, "gen_bert: out of host memory");
    gm_gen_init(&g->o, "gen_bert", p->stream, sink, marks, ctx, err);
    rc = gen_setup(g, p);
    if (rc == GM_OK) {
        load_model(g);
        for (int it = 0; it < p->iterations && g->o.rc == GM_OK; it++)
            iteration(g, it);
        rc = gm_gen_finish(&g->o);
    }
    g->o.st.end_live_bytes = g->o.live_bytes;
    if (stats) *stats = g->o.st;
    gsl_rng_free(g->rng);
    free(g->params);
    free(g->layers);
    free(g->scratch);
    free(g);
    return rc;
}

/* ----------------------------------------------------------- trace file */

static int generate_fn(const void *params, gm_gen_event_sink sink, gm_gen_marker_sink marks,
                       void *ctx, gm_gen_stats *stats, gm_err *err)
{
    return gm_bert_generate(params, sink, marks, ctx, stats, err);
}

int gm_bert_write_trace(const char *path, const gm_bert_params *p, const gm_trace_write_opts *opts,
                        const char *command, gm_bert_stats *stats, gm_err *err)
{
    int rc = gm_bert_check(p, err);
    if (rc != GM_OK) return rc;
    char workload[1024];
    gm_bert_describe(p, workload, sizeof workload);
    gm_gen_file f = {"synthetic:bert", workload, p->device_total_bytes, command};
    return gm_gen_write_trace(path, &f, opts, generate_fn, p, stats, err);
}
