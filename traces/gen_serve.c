/*
 * gen_serve.c - `gmsim gen llm-serve`: see gen_serve.h and
 * traces/GENERATORS.md, "llm-serve".
 */
#include "gen_serve.h"

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen_llama.h"

void gm_serve_defaults(gm_serve_params *p)
{
    memset(p, 0, sizeof *p);
    gm_serve_model(p, "llama2-7b", NULL);
    p->dtype_bytes = 2;
    p->qps = 2.0;
    p->requests = 100;
    p->prompt_mean = 512;
    p->output_mean = 128;
    p->prompt_max = 4096;
    p->output_max = 1024;
    p->max_batch = 32;
    p->seed = 1;
    p->device_total_bytes = 80ull << 30;
}

int gm_serve_model(gm_serve_params *p, const char *name, gm_err *err)
{
    gm_llama_params l;
    gm_err e;
    gm_llama_defaults(&l);
    if (gm_llama_preset(&l, name, err ? err : &e) != GM_OK) return GM_EINVAL;
    p->layers = l.layers;
    p->d_model = l.d_model;
    p->heads = l.heads;
    p->kv_heads = l.kv_heads;
    p->ffn = l.ffn;
    p->vocab = l.vocab;
    p->tied = l.tied;
    snprintf(p->model, sizeof p->model, "%s", name);
    return GM_OK;
}

int gm_serve_check(const gm_serve_params *p, gm_err *err)
{
    const char *w = "llm-serve";
    int rc;
    if ((rc = gm_gen_check_range(w, "layers", p->layers, 1, 4096, err)) ||
        (rc = gm_gen_check_range(w, "d_model", p->d_model, 1, 1 << 20, err)) ||
        (rc = gm_gen_check_range(w, "heads", p->heads, 1, p->d_model, err)) ||
        (rc = gm_gen_check_range(w, "kv_heads", p->kv_heads, 1, p->heads, err)) ||
        (rc = gm_gen_check_range(w, "ffn", p->ffn, 1, 1 << 22, err)) ||
        (rc = gm_gen_check_range(w, "vocab", p->vocab, 1, 1 << 26, err)) ||
        (rc = gm_gen_check_range(w, "dtype bytes", p->dtype_bytes, 1, 8, err)) ||
        (rc = gm_gen_check_range(w, "--requests", p->requests, 1, 1 << 24, err)) ||
        (rc = gm_gen_check_range(w, "--prompt-max", p->prompt_max, 1, 1 << 22, err)) ||
        (rc = gm_gen_check_range(w, "--output-max", p->output_max, 1, 1 << 22, err)) ||
        (rc = gm_gen_check_range(w, "--max-batch", p->max_batch, 1, 1 << 16, err)))
        return rc;
    if (p->d_model % p->heads || p->heads % p->kv_heads)
        return gm_errf(err, GM_EINVAL,
                       "llm-serve: heads (%d) must divide d_model (%d) and kv_heads (%d) heads",
                       p->heads, p->d_model, p->kv_heads);
    if (!(p->qps > 0 && p->qps <= 1e6))
        return gm_errf(err, GM_EINVAL, "llm-serve: --qps %g: give a rate in (0, 1e6] per second",
                       p->qps);
    if (!(p->prompt_mean >= 1 && p->prompt_mean <= p->prompt_max) ||
        !(p->output_mean >= 1 && p->output_mean <= p->output_max))
        return gm_errf(err, GM_EINVAL,
                       "llm-serve: the mean prompt (%g) and output (%g) lengths must be at least 1 "
                       "and at most their --prompt-max / --output-max",
                       p->prompt_mean, p->output_mean);
    /* the largest tensor: a KV cache of prompt_max + output_max tokens */
    uint64_t hd = (uint64_t)p->d_model / (uint64_t)p->heads;
    return gm_gen_check_bytes(w, "KV cache", (uint64_t)p->prompt_max + (uint64_t)p->output_max,
                              2 * (uint64_t)p->kv_heads, hd, (uint64_t)p->dtype_bytes, 1, err);
}

/* Weights in registration order (gen_llama.h): embed, per layer norms and
 * projections, final norm, lm_head unless tied. */
static void weights(const gm_serve_params *p, uint64_t *sizes, size_t *n)
{
    uint64_t d = (uint64_t)p->d_model, hd = d / (uint64_t)p->heads, b = (uint64_t)p->dtype_bytes;
    uint64_t kvd = (uint64_t)p->kv_heads * hd, f = (uint64_t)p->ffn;
    size_t k = 0;
    if (sizes) sizes[k] = (uint64_t)p->vocab * d * b;
    k++;
    for (int l = 0; l < p->layers; l++) {
        uint64_t layer[9] = {d * b, d * d * b, kvd * d * b, kvd * d * b, d * d * b,
                             d * b, f * d * b, f * d * b,   d * f * b};
        for (int i = 0; i < 9; i++, k++)
            if (sizes) sizes[k] = layer[i];
    }
    if (sizes) sizes[k] = d * b;
    k++;
    if (!p->tied) {
        if (sizes) sizes[k] = (uint64_t)p->vocab * d * b;
        k++;
    }
    *n = k;
}

uint64_t gm_serve_param_bytes(const gm_serve_params *p)
{
    size_t n;
    weights(p, NULL, &n);
    uint64_t *s = malloc(n * sizeof *s), sum = 0;
    if (!s) return 0;
    weights(p, s, &n);
    for (size_t i = 0; i < n; i++)
        sum += s[i];
    free(s);
    return sum;
}

void gm_serve_describe(const gm_serve_params *p, char *buf, size_t len)
{
    char load[64];
    if (p->duration_ns)
        snprintf(load, sizeof load, "for %.3g s", (double)p->duration_ns / 1e9);
    else
        snprintf(load, sizeof load, "%d requests", p->requests);
    snprintf(buf, len,
             "llm-serve: %s (layers %d, d_model %d, heads %d, kv_heads %d, ffn %d, vocab %d), "
             "%d-byte dtype; Poisson arrivals at %g QPS, %s; prompt ~ exponential mean %g (max "
             "%d), output ~ exponential mean %g (max %d); batch up to %d; seed %llu",
             p->model[0] ? p->model : "custom", p->layers, p->d_model, p->heads, p->kv_heads,
             p->ffn, p->vocab, p->dtype_bytes, p->qps, load, p->prompt_mean, p->prompt_max,
             p->output_mean, p->output_max, p->max_batch, (unsigned long long)p->seed);
}

typedef struct req {
    uint64_t arrive_ns;
    int prompt, output; /* tokens */
    int done_tokens;    /* output tokens produced so far */
    int len;            /* tokens in its KV cache */
    gm_gen_tensor ids;
    gm_gen_tensor *kv; /* one per layer: K and V of every token so far */
} req;

/* An exponential length with mean m, rounded, clamped to [1, max]. */
static int draw_len(gsl_rng *r, double m, int max)
{
    double x = floor(gsl_ran_exponential(r, m) + 0.5);
    return x < 1 ? 1 : x > max ? max : (int)x;
}

/* One forward over n tokens of request q (its prefill when n > 1): the
 * hidden state, per layer the q/k/v projection and the MLP's gate/up as
 * temporaries, and the layer's KV cache grown to q->len + n tokens as
 * torch.cat does (the new one allocated, the old one freed); the logits of
 * the last token in fp32. */
static void forward(gm_gen *g, const gm_serve_params *p, req *q, int n)
{
    uint64_t d = (uint64_t)p->d_model, hd = d / (uint64_t)p->heads, b = (uint64_t)p->dtype_bytes;
    uint64_t kvd = (uint64_t)p->kv_heads * hd, t = (uint64_t)n;
    gm_gen_tensor h = gm_gen_alloc(g, t * d * b, GM_CAT_ACTIVATION);
    for (int l = 0; l < p->layers; l++) {
        gm_gen_tensor qkv = gm_gen_alloc(g, t * (d + 2 * kvd) * b, GM_CAT_TEMPORARY);
        gm_gen_tensor kv = gm_gen_alloc(g, (uint64_t)(q->len + n) * 2 * kvd * b, GM_CAT_ACTIVATION);
        if (q->kv[l].addr) gm_gen_free(g, &q->kv[l]);
        q->kv[l] = kv;
        gm_gen_free(g, &qkv);
        gm_gen_tensor mlp = gm_gen_alloc(g, t * 2 * (uint64_t)p->ffn * b, GM_CAT_TEMPORARY);
        gm_gen_free(g, &mlp);
    }
    gm_gen_tensor logits = gm_gen_alloc(g, (uint64_t)p->vocab * 4, GM_CAT_TEMPORARY);
    gm_gen_free(g, &h);
    gm_gen_free(g, &logits);
    q->len += n;
    q->done_tokens++;
}

static void finish(gm_gen *g, const gm_serve_params *p, req *q)
{
    for (int l = 0; l < p->layers; l++)
        if (q->kv[l].addr) gm_gen_free(g, &q->kv[l]);
    gm_gen_free(g, &q->ids);
}

int gm_serve_generate(const gm_serve_params *p, gm_gen_event_sink sink, gm_gen_marker_sink marks,
                      void *ctx, gm_gen_stats *stats, gm_serve_stats *sst, gm_err *err)
{
    int rc = gm_serve_check(p, err);
    if (rc != GM_OK) return rc;
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    if (!r) return gm_errf(err, GM_ENOMEM, "out of memory");
    gsl_rng_set(r, (unsigned long)p->seed);
    /* the arrivals and lengths, in arrival order, drawn before anything runs */
    size_t n = 0, cap = 64;
    req *rq = malloc(cap * sizeof *rq);
    double t_s = 0;
    while (rq) {
        t_s += gsl_ran_exponential(r, 1.0 / p->qps);
        uint64_t at = (uint64_t)(t_s * 1e9);
        if (p->duration_ns ? at > p->duration_ns : n >= (size_t)p->requests) break;
        if (n == cap) {
            req *v = realloc(rq, 2 * cap * sizeof *rq);
            if (!v) {
                free(rq);
                rq = NULL;
                break;
            }
            rq = v;
            cap *= 2;
        }
        memset(&rq[n], 0, sizeof rq[n]);
        rq[n].arrive_ns = at;
        rq[n].prompt = draw_len(r, p->prompt_mean, p->prompt_max);
        rq[n].output = draw_len(r, p->output_mean, p->output_max);
        n++;
    }
    gsl_rng_free(r);
    size_t *act = rq ? malloc(((size_t)p->max_batch + 1) * sizeof *act) : NULL;
    gm_gen_tensor *kvs = act ? calloc(n ? n * (size_t)p->layers : 1, sizeof *kvs) : NULL;
    size_t nw;
    weights(p, NULL, &nw);
    uint64_t *ws = kvs ? malloc(nw * sizeof *ws) : NULL;
    if (!ws) {
        free(rq);
        free(act);
        free(kvs);
        return gm_errf(err, GM_ENOMEM, "out of memory");
    }
    weights(p, ws, &nw);
    uint64_t wbytes = 0;
    for (size_t i = 0; i < n; i++)
        rq[i].kv = kvs + i * (size_t)p->layers;

    gm_gen g;
    gm_gen_init(&g, "gen_serve", p->stream, sink, marks, ctx, err);
    gm_gen_tensor *wt = calloc(nw, sizeof *wt);
    if (!wt) gm_gen_fail(&g, GM_ENOMEM, "out of memory");
    for (size_t i = 0; wt && i < nw; i++) { /* model.to(device) */
        wt[i] = gm_gen_alloc_at(&g, ws[i], GM_CAT_PARAMETER, GM_GEN_H2D_BYTES_PER_NS);
        wbytes += ws[i];
    }
    size_t next = 0, na = 0;
    gm_serve_stats s = {0};
    s.requests = (int)n;
    uint64_t kv_live = 0;
    while (g.rc == GM_OK && (next < n || na > 0)) {
        if (na == 0 && rq[next].arrive_ns > g.t_ns) g.t_ns = rq[next].arrive_ns; /* idle */
        while (na < (size_t)p->max_batch && next < n && rq[next].arrive_ns <= g.t_ns) {
            req *q = &rq[next]; /* admitted: its prompt's ids, then the prefill */
            q->ids =
                gm_gen_alloc_at(&g, (uint64_t)q->prompt * 8, GM_CAT_INPUT, GM_GEN_H2D_BYTES_PER_NS);
            forward(&g, p, q, q->prompt);
            act[na++] = next++;
        }
        if ((int)na > s.peak_active) s.peak_active = (int)na;
        /* one decode step of the batch: the weights are read once */
        gm_gen_tick(&g, wbytes);
        size_t k = 0;
        for (size_t i = 0; i < na; i++) {
            req *q = &rq[act[i]];
            if (q->done_tokens < q->output) {
                forward(&g, p, q, 1);
                s.tokens_out++;
            }
            if (i == na - 1) { /* the KV cache at its fullest in this step */
                kv_live = 0;
                for (size_t j = 0; j < na; j++)
                    kv_live += (uint64_t)rq[act[j]].len * 2 * (uint64_t)p->kv_heads *
                               ((uint64_t)p->d_model / (uint64_t)p->heads) *
                               (uint64_t)p->dtype_bytes * (uint64_t)p->layers;
                if (kv_live > s.kv_peak_bytes) s.kv_peak_bytes = kv_live;
            }
        }
        for (size_t i = 0; i < na; i++) {
            req *q = &rq[act[i]];
            if (q->done_tokens >= q->output)
                finish(&g, p, q);
            else
                act[k++] = act[i];
        }
        na = k;
    }
    s.tokens_out += n; /* each prefill made the first token; the weights stay loaded */
    g.st.param_bytes = wbytes;
    rc = gm_gen_finish(&g);
    g.st.end_live_bytes = g.live_bytes;
    if (stats) *stats = g.st;
    if (sst) *sst = s;
    free(wt);
    free(ws);
    free(kvs);
    free(act);
    free(rq);
    return rc;
}

static int generate_fn(const void *params, gm_gen_event_sink sink, gm_gen_marker_sink marks,
                       void *ctx, gm_gen_stats *stats, gm_err *err)
{
    return gm_serve_generate(params, sink, marks, ctx, stats, NULL, err);
}

int gm_serve_write_trace(const char *path, const gm_serve_params *p,
                         const gm_trace_write_opts *opts, const char *command, gm_gen_stats *stats,
                         gm_err *err)
{
    int rc = gm_serve_check(p, err);
    if (rc != GM_OK) return rc;
    char workload[1024];
    gm_serve_describe(p, workload, sizeof workload);
    gm_gen_file f = {"synthetic:llm-serve", workload, p->device_total_bytes, command};
    return gm_gen_write_trace(path, &f, opts, generate_fn, p, stats, err);
}
