/*
 * test_gen_serve.c - `gmsim gen llm-serve` (traces/gen_serve.c) on a tiny
 * model whose every tensor is counted by hand: the weights, one request's
 * prefill and decode steps, its KV cache growing a token per step and
 * freed at its end; the same seed gives the same trace; the arrivals are a
 * Poisson process at the given rate.
 */
#include "cu.h"
#include "base/addrmap.h"
#include "traces/gen_serve.h"

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct cap {
    gm_event *v;
    size_t n, cap;
} cap;

static int sink(void *ctx, const gm_event *ev, size_t n, gm_err *err)
{
    cap *c = ctx;
    (void)err;
    if (c->n + n > c->cap) {
        c->cap = 2 * (c->n + n);
        c->v = realloc(c->v, c->cap * sizeof *c->v);
        if (!c->v) return GM_ENOMEM;
    }
    memcpy(c->v + c->n, ev, n * sizeof *ev);
    c->n += n;
    return GM_OK;
}

/* layers 2, d 8, heads 2 (head dim 4), kv_heads 1, ffn 16, vocab 10, bf16 */
static void tiny(gm_serve_params *p)
{
    gm_serve_defaults(p);
    p->layers = 2;
    p->d_model = 8;
    p->heads = 2;
    p->kv_heads = 1;
    p->ffn = 16;
    p->vocab = 10;
    p->tied = 0;
    p->model[0] = 0;
}

/* The draws gen_serve makes for request 0, in its order: interarrival, prompt, output. */
static int len_of(gsl_rng *r, double m, int max)
{
    double x = floor(gsl_ran_exponential(r, m) + 0.5);
    return x < 1 ? 1 : x > max ? max : (int)x;
}

static void test_one_request(void)
{
    gm_serve_params p;
    tiny(&p);
    p.requests = 1;
    p.seed = 7;
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 7);
    (void)gsl_ran_exponential(r, 1.0 / p.qps);
    int P = len_of(r, p.prompt_mean, p.prompt_max), O = len_of(r, p.output_mean, p.output_max);
    gsl_rng_free(r);
    cap c = {0};
    gm_gen_stats st;
    gm_serve_stats ss;
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_serve_generate(&p, sink, NULL, &c, &st, &ss, &err), GM_OK);
    const uint64_t L = 2, W = 1 + 9 * L + 1 + 1; /* embed, 9 per layer, norm, lm_head */
    /* ids; prefill h + L x (qkv, kv, qkv free, mlp, mlp free) + logits, h free, logits
     * free; O-1 decode steps, each also freeing the L old caches; L caches + ids freed */
    uint64_t want = W + 1 + (1 + 5 * L + 3) + (uint64_t)(O - 1) * (1 + 6 * L + 3) + L + 1;
    CU_ASSERT_EQUAL(c.n, want);
    CU_ASSERT_EQUAL(ss.requests, 1);
    CU_ASSERT_EQUAL(ss.tokens_out, (uint64_t)O);
    /* weights: vocab x d x 2 (embed), then the first layer's norm, q_proj ... */
    uint64_t wb = 0;
    for (size_t i = 0; i < W; i++) {
        CU_ASSERT_EQUAL(c.v[i].op, GM_OP_ALLOC);
        CU_ASSERT_EQUAL(c.v[i].category, GM_CAT_PARAMETER);
        wb += c.v[i].size;
    }
    CU_ASSERT_EQUAL(c.v[0].size, 10 * 8 * 2);
    CU_ASSERT_EQUAL(c.v[2].size, 8 * 8 * 2);
    CU_ASSERT_EQUAL(c.v[3].size, 4 * 8 * 2); /* k_proj: kv_heads x head dim x d */
    /* 2 x (8 + 8x8 + 2x32 + 64 + 8 + 3 x 128) x 2 + 160 + 16 + 160 */
    CU_ASSERT_EQUAL(wb, 2 * (8 + 64 + 32 + 32 + 64 + 8 + 128 + 128 + 128) * 2 + 160 + 16 + 160);
    CU_ASSERT_EQUAL(st.param_bytes, wb);
    CU_ASSERT_EQUAL(st.end_live_bytes, wb); /* everything of the request freed */
    /* the KV caches: K and V of 1 kv head x 4 dims in bf16 = 16 bytes a token;
     * sizes P, P+1, ... P+O-1 tokens, each layer's new one before the old one goes */
    uint64_t kv_max = 0, kv_allocs = 0;
    for (size_t i = W; i < c.n; i++)
        if (c.v[i].op == GM_OP_ALLOC && c.v[i].category == GM_CAT_ACTIVATION &&
            c.v[i].size % 16 == 0 && c.v[i].size != (uint64_t)P * 8 * 2 && c.v[i].size != 16) {
            kv_allocs++;
            if (c.v[i].size > kv_max) kv_max = c.v[i].size;
        }
    CU_ASSERT_EQUAL(kv_max, (uint64_t)(P + O - 1) * 16);
    CU_ASSERT_EQUAL(ss.kv_peak_bytes, (uint64_t)(P + O - 1) * 16 * L);
    CU_ASSERT(kv_allocs >= 1);
    free(c.v);
}

static void test_seed_and_rate(void)
{
    gm_serve_params p;
    tiny(&p);
    p.requests = 2000;
    p.qps = 50;
    p.prompt_mean = 4;
    p.prompt_max = 64;
    p.output_mean = 2;
    p.output_max = 16;
    p.max_batch = 1 << 16; /* no queue: each prefill starts at its arrival */
    cap a = {0}, b = {0}, d = {0};
    gm_gen_stats st;
    gm_serve_stats ss;
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_serve_generate(&p, sink, NULL, &a, &st, &ss, &err), GM_OK);
    CU_ASSERT_EQUAL_FATAL(gm_serve_generate(&p, sink, NULL, &b, &st, NULL, &err), GM_OK);
    CU_ASSERT_EQUAL_FATAL(a.n, b.n);
    CU_ASSERT(!memcmp(a.v, b.v, a.n * sizeof *a.v));
    p.seed = 2;
    CU_ASSERT_EQUAL_FATAL(gm_serve_generate(&p, sink, NULL, &d, &st, NULL, &err), GM_OK);
    CU_ASSERT(d.n != a.n || memcmp(d.v, a.v, a.n * sizeof *a.v));
    /* the input ids (category input) are allocated at admission; the last
     * of 2000 arrivals at 50 QPS comes near 40 s (Poisson: sd 40/sqrt(2000)
     * = 0.9 s), so within 10 % */
    uint64_t last = 0, n_in = 0;
    for (size_t i = 0; i < a.n; i++)
        if (a.v[i].op == GM_OP_ALLOC && a.v[i].category == GM_CAT_INPUT) {
            last = a.v[i].t_ns;
            n_in++;
        }
    CU_ASSERT_EQUAL(n_in, 2000);
    CU_ASSERT(fabs((double)last / 1e9 - 40.0) < 4.0);
    free(a.v);
    free(b.v);
    free(d.v);
    /* bad parameters name the fix */
    p.prompt_mean = 100;
    CU_ASSERT_NOT_EQUAL(gm_serve_check(&p, &err), GM_OK);
    CU_ASSERT(strstr(err.msg, "--prompt-max") != NULL);
}

int gm_test_register(void)
{
    CU_pSuite s = CU_add_suite("gen_serve", NULL, NULL);
    if (!s) return CU_get_error();
    GM_ADD_TEST(s, test_one_request);
    GM_ADD_TEST(s, test_seed_and_rate);
    return CUE_SUCCESS;
}
