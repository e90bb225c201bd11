/*
 * gen_llama.c - synthetic LLaMA training or inference trace; see
 * gen_llama.h for the model and traces/GENERATORS.md for every tensor.
 */
#include "gen_llama.h"
#include "gen_graph.h"
#include "gen_ops.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

enum { P_EMBED, P_EMB_COUNT };
enum { L_IN_NORM, L_Q, L_K, L_V, L_O, L_POST_NORM, L_GATE, L_UP, L_DOWN, L_COUNT };
enum { H_NORM, H_LM_HEAD, H_COUNT }; /* H_LM_HEAD only when untied */

typedef struct llama_preset {
    const char *name;
    int layers, d_model, heads, kv_heads, ffn, vocab, ctx, tied;
} llama_preset;

/* Sizes from each model's published config.json (HF hub): Llama-2-7b-hf,
 * Llama-2-13b-hf, Meta-Llama-3-8B, Llama-3.2-1B, TinyLlama-1.1B; and the
 * Stanford CS336 (2025) TransformerLM sizes of assignment 2's table
 * (d_ff = 4 d_model, vocab 10000, untied), which the shared snapshots in
 * tests/data record (SOURCES.md). */
static const llama_preset presets[] = {
    {"llama2-7b", 32, 4096, 32, 32, 11008, 32000, 4096, 0},
    {"llama2-13b", 40, 5120, 40, 40, 13824, 32000, 4096, 0},
    {"llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8192, 0},
    {"llama3.2-1b", 16, 2048, 32, 8, 8192, 128256, 131072, 1},
    {"tinyllama-1.1b", 22, 2048, 32, 4, 5632, 32000, 2048, 0},
    {"cs336-small", 12, 768, 12, 12, 3072, 10000, 256, 0},
    {"cs336-medium", 24, 1024, 16, 16, 4096, 10000, 256, 0},
    {"cs336-large", 36, 1280, 20, 20, 5120, 10000, 256, 0},
    {"cs336-xl", 48, 1600, 25, 25, 6400, 10000, 256, 0},
    {"cs336-2.7b", 32, 2560, 32, 32, 10240, 10000, 256, 0},
};
#define NPRESETS (sizeof presets / sizeof presets[0])

static void apply(gm_llama_params *p, const llama_preset *q)
{
    p->layers = q->layers;
    p->d_model = q->d_model;
    p->heads = q->heads;
    p->kv_heads = q->kv_heads;
    p->ffn = q->ffn;
    p->vocab = q->vocab;
    p->ctx = q->ctx;
    p->seq = q->ctx;
    p->tied = q->tied;
}

void gm_llama_defaults(gm_llama_params *p)
{
    memset(p, 0, sizeof *p);
    gm_train_defaults(&p->t);
    p->t.batch = 1;
    apply(p, &presets[0]);
    p->attention = GG_ATTN_SDPA;
}

const char *gm_llama_preset_names(void)
{
    return "llama2-7b, llama2-13b, llama3-8b, llama3.2-1b, tinyllama-1.1b, cs336-small, "
           "cs336-medium, cs336-large, cs336-xl, cs336-2.7b";
}

int gm_llama_preset(gm_llama_params *p, const char *name, gm_err *err)
{
    for (size_t i = 0; i < NPRESETS; i++)
        if (!strcasecmp(name, presets[i].name)) {
            apply(p, &presets[i]);
            return GM_OK;
        }
    return gm_errf(err, GM_EINVAL, "llama: unknown model '%s'; use one of %s", name,
                   gm_llama_preset_names());
}

int gm_llama_check(const gm_llama_params *p, gm_err *err)
{
    int rc;
    if ((rc = gm_gen_check_range("llama", "layers", p->layers, 1, 4096, err)) ||
        (rc = gm_gen_check_range("llama", "d_model", p->d_model, 1, 1 << 20, err)) ||
        (rc = gm_gen_check_range("llama", "heads", p->heads, 1, p->d_model, err)) ||
        (rc = gm_gen_check_range("llama", "kv_heads", p->kv_heads, 1, p->heads, err)) ||
        (rc = gm_gen_check_range("llama", "ffn", p->ffn, 1, 1 << 22, err)) ||
        (rc = gm_gen_check_range("llama", "vocab", p->vocab, 1, 1 << 26, err)) ||
        (rc = gm_gen_check_range("llama", "ctx", p->ctx, 1, 1 << 22, err)) ||
        (rc = gm_gen_check_range("llama", "seq", p->seq, 1, 1 << 22, err)) ||
        (rc = gm_gen_check_range("llama", "attention", p->attention, 0, 2, err)) ||
        (rc = gm_gen_check_range("llama", "impl", p->impl, 0, 1, err)) ||
        (rc = gm_train_check("llama", &p->t, p->layers, err)))
        return rc;
    if (p->d_model % p->heads || (p->d_model / p->heads) % 2)
        return gm_errf(err, GM_EINVAL,
                       "llama: d_model %d over heads %d must give an even head size (rotary "
                       "embeddings rotate pairs); LLaMA-2 7B: 4096 and 32",
                       p->d_model, p->heads);
    if (p->heads % p->kv_heads)
        return gm_errf(err, GM_EINVAL,
                       "llama: kv_heads %d does not divide heads %d; grouped-query attention "
                       "shares each key/value head among heads / kv_heads query heads",
                       p->kv_heads, p->heads);
    uint64_t B = (uint64_t)p->t.batch, S = (uint64_t)p->seq, D = (uint64_t)p->d_model;
    uint64_t V = (uint64_t)p->vocab, H = (uint64_t)p->heads;
    if ((rc = gm_gen_check_bytes("llama", "logits", B, S, V, 4, 1, err)) ||
        (rc = gm_gen_check_bytes("llama", "attention scores", B, H, S, S, 4, err)) ||
        (rc = gm_gen_check_bytes("llama", "MLP", B, S, (uint64_t)p->ffn, 4, 1, err)) ||
        (rc = gm_gen_check_bytes("llama", "embedding", V, D, 4, 1, 1, err)))
        return rc;
    return GM_OK;
}

uint64_t gm_llama_param_count(const gm_llama_params *p)
{
    uint64_t D = (uint64_t)p->d_model, F = (uint64_t)p->ffn, V = (uint64_t)p->vocab;
    uint64_t hd = D / (uint64_t)p->heads, KV = (uint64_t)p->kv_heads * hd;
    uint64_t layer = D + D * D + 2 * KV * D + D * D + D + 3 * F * D;
    return V * D + (uint64_t)p->layers * layer + D + (p->tied ? 0 : V * D);
}

void gm_llama_describe(const gm_llama_params *p, char *buf, size_t len)
{
    char train[512];
    gm_train_describe(&p->t, train, sizeof train);
    snprintf(buf, len,
             "LLaMA (LlamaForCausalLM: RMSNorm, rotary, GQA, SwiGLU) layers=%d d_model=%d "
             "heads=%d kv_heads=%d ffn=%d vocab=%d ctx=%d seq=%d attention=%s impl=%s tied=%s "
             "params=%llu; %s",
             p->layers, p->d_model, p->heads, p->kv_heads, p->ffn, p->vocab, p->ctx, p->seq,
             gg_attention_name(p->attention), gg_impl_name(p->impl), p->tied ? "true" : "false",
             (unsigned long long)gm_llama_param_count(p), train);
}

/* ------------------------------------------------------------- the model */

typedef struct llama {
    const gm_llama_params *p;
    uint64_t B, S, D, H, KV, hd, F, V, rows;
    int head0;
    gg_t cos, sin, mask; /* this forward's rotary tables and eager mask */
} llama;

static int lp(int l, int k)
{
    return P_EMB_COUNT + l * L_COUNT + k;
}

static void build(gg *G, void *ctx)
{
    llama *m = ctx;
    const gm_llama_params *p = m->p;
    gg_param_add(G, m->V * m->D, 0, 0);
    for (int l = 0; l < p->layers; l++) {
        const uint64_t shape[L_COUNT] = {
            [L_IN_NORM] = m->D,           [L_Q] = m->H * m->hd * m->D, [L_K] = m->KV * m->hd * m->D,
            [L_V] = m->KV * m->hd * m->D, [L_O] = m->D * m->H * m->hd, [L_POST_NORM] = m->D,
            [L_GATE] = m->F * m->D,       [L_UP] = m->F * m->D,        [L_DOWN] = m->D * m->F,
        };
        for (int k = 0; k < L_COUNT; k++)
            gg_param_add(G, shape[k], l + 1, 0);
    }
    m->head0 = lp(p->layers, 0);
    gg_param_add(G, m->D, 0, 0);
    if (!p->tied) gg_param_add(G, m->V * m->D, 0, 0);
}

static int batch(gg *G, void *ctx, gg_t *in)
{
    llama *m = ctx;
    in[0] = gg_new_fixed(G, m->B * m->S, GG_I64, GM_CAT_INPUT); /* input_ids */
    in[1] = gg_new_fixed(G, m->B * m->S, GG_I64, GM_CAT_INPUT); /* labels    */
    return 2;
}

static gg_t block(gg *G, void *ctx, int l, gg_t x)
{
    llama *m = ctx;
    uint64_t rows = m->rows, D = m->D, hd = m->hd;
    uint64_t nq = rows * m->H * hd, nkv = rows * m->KV * hd;
    gg_unit_begin(G, l + 1);
    gg_t h = gg_rmsnorm(G, x, rows, D, lp(l, L_IN_NORM));
    gg_t q = gg_linear(G, h, rows, D, m->H * hd, lp(l, L_Q), -1);
    gg_t k = gg_linear(G, h, rows, D, m->KV * hd, lp(l, L_K), -1);
    gg_t v = gg_linear(G, h, rows, D, m->KV * hd, lp(l, L_V), -1);
    gg_drop(G, h);
    gg_t qe = gg_rope(G, q, m->cos, m->sin, nq);
    gg_drop(G, q);
    gg_t ke = gg_rope(G, k, m->cos, m->sin, nkv);
    gg_drop(G, k);
    /* q, k: rotary results, contiguous; v: a transposed view of v_proj's output */
    gg_t a = gg_attention(G, m->p->attention, qe, ke, v, m->B, m->H, m->KV, m->S, hd, m->mask,
                          GG_Q_CONTIG | GG_K_CONTIG);
    gg_drop(G, qe);
    gg_drop(G, ke);
    gg_drop(G, v);
    gg_t o = gg_linear(G, a, rows, m->H * hd, D, lp(l, L_O), -1);
    gg_drop(G, a);
    gg_t x1 = gg_add(G, x, o, rows * D, gg_dt(G, x) > gg_dt(G, o) ? gg_dt(G, x) : gg_dt(G, o));
    gg_drop(G, o);
    gg_t h2 = gg_rmsnorm(G, x1, rows, D, lp(l, L_POST_NORM));
    gg_t gate = gg_linear(G, h2, rows, D, m->F, lp(l, L_GATE), -1);
    gg_t act = gg_silu(G, gate);
    gg_drop(G, gate);
    gg_t up = gg_linear(G, h2, rows, D, m->F, lp(l, L_UP), -1);
    gg_drop(G, h2);
    gg_t prod = gg_mul(G, act, up, rows * m->F, gg_dt(G, up));
    gg_drop(G, act);
    gg_drop(G, up);
    gg_t dn = gg_linear(G, prod, rows, m->F, D, lp(l, L_DOWN), -1);
    gg_drop(G, prod);
    gg_t y = gg_add(G, x1, dn, rows * D, gg_dt(G, x1) > gg_dt(G, dn) ? gg_dt(G, x1) : gg_dt(G, dn));
    gg_drop(G, dn);
    gg_drop(G, x1);
    gg_unit_end(G, l + 1);
    return y;
}

/* LlamaRotaryEmbedding.forward: position_ids as float, freqs = inv_freq @
 * positions, emb = cat(freqs, freqs), cos/sin (* attention_scaling), in the
 * hidden states' dtype (fp32: the embedding output). */
static void rotary_tables(gg *G, llama *m)
{
    uint64_t n = m->S * m->hd;
    gg_t pos = gg_new(G, m->S, GG_I64);
    gg_t posf = gg_new(G, m->S, GG_F32);
    gg_drop(G, pos);
    gg_t freqs = gg_new(G, n / 2, GG_F32);
    gg_drop(G, posf);
    gg_t emb = gg_new(G, n, GG_F32);
    gg_drop(G, freqs);
    gg_t c0 = gg_new(G, n, GG_F32);
    m->cos = gg_new(G, n, GG_F32);
    gg_drop(G, c0);
    gg_t s0 = gg_new(G, n, GG_F32);
    m->sin = gg_new(G, n, GG_F32);
    gg_drop(G, s0);
    gg_drop(G, emb);
}

static gg_t forward(gg *G, void *ctx, const gg_t *in, gg_t *keep)
{
    llama *m = ctx;
    const gm_llama_params *p = m->p;
    gg_unit_begin(G, 0);
    gg_t x = gg_embedding(G, in[0], m->rows, m->D, P_EMBED);
    rotary_tables(G, m);
    m->mask = p->attention == GG_ATTN_EAGER ? gg_new(G, m->B * m->S * m->S, G->cdt) : 0;
    G->n_ck_keep = 0;
    G->ck_keep[G->n_ck_keep++] = m->cos;
    G->ck_keep[G->n_ck_keep++] = m->sin;
    if (m->mask) G->ck_keep[G->n_ck_keep++] = m->mask;
    gg_t y = gg_layers(G, block, m, p->layers, x);
    G->n_ck_keep = 0;
    gg_drop(G, x);
    gg_drop(G, m->cos);
    gg_drop(G, m->sin);
    gg_drop(G, m->mask);
    G->unit = 0;
    gg_t h = gg_rmsnorm(G, y, m->rows, m->D, m->head0 + H_NORM);
    gg_drop(G, y);
    gg_t logits =
        gg_linear(G, h, m->rows, m->D, m->V, p->tied ? P_EMBED : m->head0 + H_LM_HEAD, -1);
    gg_drop(G, h);
    *keep = logits;
    if (p->t.mode == GM_MODE_INFER) return 0;
    gg_t loss = gg_cross_entropy(G, logits, in[1], m->rows, m->V);
    gg_unit_end(G, 0);
    return loss;
}

int gm_llama_generate(const gm_llama_params *p, gm_gen_event_sink sink, gm_gen_marker_sink marks,
                      void *ctx, gm_gen_stats *stats, gm_err *err)
{
    int rc = gm_llama_check(p, err);
    if (rc != GM_OK) return rc;
    llama m;
    memset(&m, 0, sizeof m);
    m.p = p;
    m.B = (uint64_t)p->t.batch;
    m.S = (uint64_t)p->seq;
    m.D = (uint64_t)p->d_model;
    m.H = (uint64_t)p->heads;
    m.KV = (uint64_t)p->kv_heads;
    m.hd = m.D / m.H;
    m.F = (uint64_t)p->ffn;
    m.V = (uint64_t)p->vocab;
    m.rows = m.B * m.S;
    const gg_model model = {build, batch, forward, p->impl == GG_IMPL_NAIVE};
    return gg_run("gen_llama", &p->t, &model, &m, sink, marks, ctx, stats, err);
}

static int generate_fn(const void *params, gm_gen_event_sink sink, gm_gen_marker_sink marks,
                       void *ctx, gm_gen_stats *stats, gm_err *err)
{
    return gm_llama_generate(params, sink, marks, ctx, stats, err);
}

int gm_llama_write_trace(const char *path, const gm_llama_params *p,
                         const gm_trace_write_opts *opts, const char *command, gm_gen_stats *stats,
                         gm_err *err)
{
    int rc = gm_llama_check(p, err);
    if (rc != GM_OK) return rc;
    char workload[1024];
    gm_llama_describe(p, workload, sizeof workload);
    gm_gen_file f = {"synthetic:llama", workload, p->t.device_total_bytes, command};
    return gm_gen_write_trace(path, &f, opts, generate_fn, p, stats, err);
}
