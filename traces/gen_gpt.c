/*
 * gen_gpt.c - synthetic GPT-2 training or inference trace; see gen_gpt.h
 * for the model and traces/GENERATORS.md for every tensor it makes.
 */
#include "gen_gpt.h"
#include "gen_graph.h"
#include "gen_ops.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Parameters in registration order. */
enum { P_WTE, P_WPE, P_EMB_COUNT };
enum {
    L_LN1_W,
    L_LN1_B,
    L_ATTN_W,
    L_ATTN_B,
    L_PROJ_W,
    L_PROJ_B,
    L_LN2_W,
    L_LN2_B,
    L_FC_W,
    L_FC_B,
    L_MPROJ_W,
    L_MPROJ_B,
    L_COUNT
};
enum { H_LNF_W, H_LNF_B, H_LM_HEAD, H_COUNT }; /* H_LM_HEAD only when untied */

typedef struct gpt_preset {
    const char *name;
    int layers, d_model, heads;
} gpt_preset;

/* GPT-2 sizes (Radford et al. 2019, Table 2; HF configs gpt2*, n_ctx 1024). */
static const gpt_preset presets[] = {
    {"gpt2", 12, 768, 12},
    {"gpt2-medium", 24, 1024, 16},
    {"gpt2-large", 36, 1280, 20},
    {"gpt2-xl", 48, 1600, 25},
};
#define NPRESETS (sizeof presets / sizeof presets[0])

void gm_gpt_defaults(gm_gpt_params *p)
{
    memset(p, 0, sizeof *p);
    gm_train_defaults(&p->t);
    p->layers = 12;
    p->d_model = 768;
    p->heads = 12;
    p->ffn = 0;
    p->vocab = 50257;
    p->ctx = 1024;
    p->seq = 1024;
    p->attention = GG_ATTN_SDPA;
    p->tied = 1;
    p->dropout = 0;
}

const char *gm_gpt_preset_names(void)
{
    return "gpt2, gpt2-medium, gpt2-large, gpt2-xl";
}

int gm_gpt_preset(gm_gpt_params *p, const char *name, gm_err *err)
{
    for (size_t i = 0; i < NPRESETS; i++)
        if (!strcasecmp(name, presets[i].name)) {
            p->layers = presets[i].layers;
            p->d_model = presets[i].d_model;
            p->heads = presets[i].heads;
            p->ffn = 0;
            p->vocab = 50257;
            p->ctx = 1024;
            p->seq = 1024;
            return GM_OK;
        }
    return gm_errf(err, GM_EINVAL, "gpt: unknown model '%s'; use one of %s", name,
                   gm_gpt_preset_names());
}

static uint64_t ffn_of(const gm_gpt_params *p)
{
    return p->ffn ? (uint64_t)p->ffn : 4 * (uint64_t)p->d_model;
}

int gm_gpt_check(const gm_gpt_params *p, gm_err *err)
{
    int rc;
    if ((rc = gm_gen_check_range("gpt", "layers", p->layers, 1, 4096, err)) ||
        (rc = gm_gen_check_range("gpt", "d_model", p->d_model, 1, 1 << 20, err)) ||
        (rc = gm_gen_check_range("gpt", "heads", p->heads, 1, p->d_model, err)) ||
        (rc = gm_gen_check_range("gpt", "ffn", p->ffn, 0, 1 << 22, err)) ||
        (rc = gm_gen_check_range("gpt", "vocab", p->vocab, 1, 1 << 26, err)) ||
        (rc = gm_gen_check_range("gpt", "ctx", p->ctx, 1, 1 << 22, err)) ||
        (rc = gm_gen_check_range("gpt", "seq", p->seq, 1, p->ctx, err)) ||
        (rc = gm_gen_check_range("gpt", "attention", p->attention, 0, 2, err)) ||
        (rc = gm_gen_check_range("gpt", "impl", p->impl, 0, 1, err)) ||
        (rc = gm_train_check("gpt", &p->t, p->layers, err)))
        return rc;
    if (p->d_model % p->heads)
        return gm_errf(err, GM_EINVAL,
                       "gpt: d_model %d is not a multiple of heads %d; pick heads that divide it "
                       "(GPT-2: 768 and 12)",
                       p->d_model, p->heads);
    if (p->dropout < 0 || p->dropout >= 1)
        return gm_errf(err, GM_EINVAL, "gpt: dropout %g is out of range; use 0 <= p < 1",
                       p->dropout);
    uint64_t B = (uint64_t)p->t.batch, S = (uint64_t)p->seq, D = (uint64_t)p->d_model;
    uint64_t V = (uint64_t)p->vocab, H = (uint64_t)p->heads;
    if ((rc = gm_gen_check_bytes("gpt", "logits", B, S, V, 4, 1, err)) ||
        (rc = gm_gen_check_bytes("gpt", "attention scores", B, H, S, S, 4, err)) ||
        (rc = gm_gen_check_bytes("gpt", "MLP", B, S, ffn_of(p), 4, 1, err)) ||
        (rc = gm_gen_check_bytes("gpt", "embedding", V, D, 4, 1, 1, err)))
        return rc;
    return GM_OK;
}

uint64_t gm_gpt_param_count(const gm_gpt_params *p)
{
    uint64_t D = (uint64_t)p->d_model, F = ffn_of(p), V = (uint64_t)p->vocab;
    uint64_t layer = 2 * D + (3 * D * D + 3 * D) + (D * D + D) + 2 * D + (F * D + F) + (D * F + D);
    return V * D + (uint64_t)p->ctx * D + (uint64_t)p->layers * layer + 2 * D +
           (p->tied ? 0 : V * D);
}

void gm_gpt_describe(const gm_gpt_params *p, char *buf, size_t len)
{
    char train[512];
    gm_train_describe(&p->t, train, sizeof train);
    snprintf(buf, len,
             "GPT-2 (nanoGPT / GPT2LMHeadModel) layers=%d d_model=%d heads=%d ffn=%llu "
             "vocab=%d ctx=%d seq=%d attention=%s impl=%s tied=%s dropout=%g params=%llu; %s",
             p->layers, p->d_model, p->heads, (unsigned long long)ffn_of(p), p->vocab, p->ctx,
             p->seq, gg_attention_name(p->attention), gg_impl_name(p->impl),
             p->tied ? "true" : "false", p->dropout, (unsigned long long)gm_gpt_param_count(p),
             train);
}

/* ------------------------------------------------------------- the model */

typedef struct gpt {
    const gm_gpt_params *p;
    uint64_t B, S, D, H, hd, F, V, rows;
    int layer0, head0;
} gpt;

static int lp(const gpt *m, int l, int k)
{
    return m->layer0 + l * L_COUNT + k;
}

static void build(gg *G, void *ctx)
{
    gpt *m = ctx;
    const gm_gpt_params *p = m->p;
    gg_param_add(G, m->V * m->D, 0, 0); /* wte */
    gg_param_add(G, (uint64_t)p->ctx * m->D, 0, 0);
    m->layer0 = P_EMB_COUNT;
    for (int l = 0; l < p->layers; l++) {
        int u = l + 1;
        const uint64_t shape[L_COUNT] = {
            [L_LN1_W] = m->D,      [L_LN1_B] = m->D,          [L_ATTN_W] = 3 * m->D * m->D,
            [L_ATTN_B] = 3 * m->D, [L_PROJ_W] = m->D * m->D,  [L_PROJ_B] = m->D,
            [L_LN2_W] = m->D,      [L_LN2_B] = m->D,          [L_FC_W] = m->F * m->D,
            [L_FC_B] = m->F,       [L_MPROJ_W] = m->D * m->F, [L_MPROJ_B] = m->D,
        };
        for (int k = 0; k < L_COUNT; k++)
            gg_param_add(G, shape[k], u, 0);
    }
    m->head0 = m->layer0 + p->layers * L_COUNT;
    gg_param_add(G, m->D, 0, 0);
    gg_param_add(G, m->D, 0, 0);
    if (!p->tied) gg_param_add(G, m->V * m->D, 0, 0);
}

static int batch(gg *G, void *ctx, gg_t *in)
{
    gpt *m = ctx;
    in[0] = gg_new_fixed(G, m->B * m->S, GG_I64, GM_CAT_INPUT); /* idx     */
    in[1] = gg_new_fixed(G, m->B * m->S, GG_I64, GM_CAT_INPUT); /* targets */
    return 2;
}

static gg_t block(gg *G, gpt *m, int l, gg_t x)
{
    uint64_t rows = m->rows, D = m->D;
    double pd = m->p->dropout;
    gg_unit_begin(G, l + 1);
    gg_t h = gg_layernorm(G, x, rows, D, lp(m, l, L_LN1_W), lp(m, l, L_LN1_B));
    gg_t qkv = gg_linear(G, h, rows, D, 3 * D, lp(m, l, L_ATTN_W), lp(m, l, L_ATTN_B));
    gg_drop(G, h);
    gg_t q[3];
    gg_split(G, qkv, 3, q); /* q, k, v = qkv.split(d, dim=2): views */
    gg_drop(G, qkv);
    gg_t a =
        gg_attention(G, m->p->attention, q[0], q[1], q[2], m->B, m->H, m->H, m->S, m->hd, 0, 0);
    for (int i = 0; i < 3; i++)
        gg_drop(G, q[i]);
    gg_t o = gg_linear(G, a, rows, D, D, lp(m, l, L_PROJ_W), lp(m, l, L_PROJ_B));
    gg_drop(G, a);
    gg_t od = gg_dropout(G, o, pd);
    gg_drop(G, o);
    gg_t x1 = gg_add(G, x, od, rows * D, GG_F32);
    gg_drop(G, od);
    gg_t h2 = gg_layernorm(G, x1, rows, D, lp(m, l, L_LN2_W), lp(m, l, L_LN2_B));
    gg_t f = gg_linear(G, h2, rows, D, m->F, lp(m, l, L_FC_W), lp(m, l, L_FC_B));
    gg_drop(G, h2);
    gg_t g = gg_gelu(G, f);
    gg_drop(G, f);
    gg_t mp = gg_linear(G, g, rows, m->F, D, lp(m, l, L_MPROJ_W), lp(m, l, L_MPROJ_B));
    gg_drop(G, g);
    gg_t md = gg_dropout(G, mp, pd);
    gg_drop(G, mp);
    gg_t y = gg_add(G, x1, md, rows * D, GG_F32);
    gg_drop(G, md);
    gg_drop(G, x1);
    gg_unit_end(G, l + 1);
    return y;
}

static gg_t block_fn(gg *G, void *ctx, int l, gg_t x)
{
    return block(G, ctx, l, x);
}

static gg_t forward(gg *G, void *ctx, const gg_t *in, gg_t *keep)
{
    gpt *m = ctx;
    const gm_gpt_params *p = m->p;
    gg_unit_begin(G, 0);
    gg_t pos = gg_new(G, m->S, GG_I64); /* torch.arange(0, t, device=device) */
    gg_t tok = gg_embedding(G, in[0], m->rows, m->D, P_WTE);
    gg_t pe = gg_embedding(G, pos, m->S, m->D, P_WPE);
    gg_t x0 = gg_add(G, tok, pe, m->rows * m->D, GG_F32);
    gg_drop(G, tok);
    gg_drop(G, pe);
    gg_drop(G, pos);
    gg_t x = gg_dropout(G, x0, p->dropout);
    gg_drop(G, x0);
    gg_t y = gg_layers(G, block_fn, m, p->layers, x);
    gg_drop(G, x);
    x = y;
    G->unit = 0;
    gg_t h = gg_layernorm(G, x, m->rows, m->D, m->head0 + H_LNF_W, m->head0 + H_LNF_B);
    gg_drop(G, x);
    gg_t logits = gg_linear(G, h, m->rows, m->D, m->V, p->tied ? P_WTE : m->head0 + H_LM_HEAD, -1);
    gg_drop(G, h);
    *keep = logits;
    if (p->t.mode == GM_MODE_INFER) return 0;
    gg_t loss = gg_cross_entropy(G, logits, in[1], m->rows, m->V);
    gg_unit_end(G, 0);
    return loss;
}

int gm_gpt_generate(const gm_gpt_params *p, gm_gen_event_sink sink, gm_gen_marker_sink marks,
                    void *ctx, gm_gen_stats *stats, gm_err *err)
{
    int rc = gm_gpt_check(p, err);
    if (rc != GM_OK) return rc;
    gpt m;
    memset(&m, 0, sizeof m);
    m.p = p;
    m.B = (uint64_t)p->t.batch;
    m.S = (uint64_t)p->seq;
    m.D = (uint64_t)p->d_model;
    m.H = (uint64_t)p->heads;
    m.hd = m.D / m.H;
    m.F = ffn_of(p);
    m.V = (uint64_t)p->vocab;
    m.rows = m.B * m.S;
    const gg_model model = {build, batch, forward, p->impl == GG_IMPL_NAIVE};
    return gg_run("gen_gpt", &p->t, &model, &m, sink, marks, ctx, stats, err);
}

static int generate_fn(const void *params, gm_gen_event_sink sink, gm_gen_marker_sink marks,
                       void *ctx, gm_gen_stats *stats, gm_err *err)
{
    return gm_gpt_generate(params, sink, marks, ctx, stats, err);
}

int gm_gpt_write_trace(const char *path, const gm_gpt_params *p, const gm_trace_write_opts *opts,
                       const char *command, gm_gen_stats *stats, gm_err *err)
{
    int rc = gm_gpt_check(p, err);
    if (rc != GM_OK) return rc;
    char workload[1024];
    gm_gpt_describe(p, workload, sizeof workload);
    gm_gen_file f = {"synthetic:gpt", workload, p->t.device_total_bytes, command};
    return gm_gen_write_trace(path, &f, opts, generate_fn, p, stats, err);
}
