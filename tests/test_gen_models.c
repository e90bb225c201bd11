/*
 * test_gen_models.c - the GPT, LLaMA and ResNet-50 generators and their
 * what-ifs against tensor sizes computed by hand (in the comments), and the
 * invariants every generated stream keeps (each free matches a live alloc,
 * time never goes back, nothing leaks across iterations, determinism).
 *
 * The small GPT used throughout: layers 2, d_model 64, heads 4 (head size
 * 16), vocab 128, ctx = seq = 16, batch 2 (rows = batch * seq = 32), fp32,
 * tied lm_head, sdpa attention, no dropout, no cuBLAS workspace.
 */
#include "cu.h"

#include "base/addrmap.h"
#include "traces/gen_gpt.h"
#include "traces/gen_llama.h"
#include "traces/gen_ops.h"
#include "traces/gen_resnet.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ a recorder */

typedef struct rec {
    gm_event *ev;
    size_t n, cap;
    uint64_t mark_t[64];
    size_t nmarks;
    gm_addrmap live;
    uint64_t bad_free, bad_time, last_t;
} rec;

static int rec_sink(void *ctx, const gm_event *ev, size_t n, gm_err *err)
{
    (void)err;
    rec *r = ctx;
    for (size_t i = 0; i < n; i++) {
        if (r->n == r->cap) {
            r->cap = r->cap ? r->cap * 2 : 4096;
            r->ev = realloc(r->ev, r->cap * sizeof *r->ev);
            if (!r->ev) return GM_ENOMEM;
        }
        r->ev[r->n++] = ev[i];
        if (ev[i].t_ns < r->last_t) r->bad_time++;
        r->last_t = ev[i].t_ns;
        uint64_t key = gm_addrmap_key(ev[i].addr), size;
        if (ev[i].op == GM_OP_ALLOC) {
            if (gm_addrmap_put(&r->live, key, ev[i].size) != GM_OK) return GM_ENOMEM;
        } else if (!gm_addrmap_del(&r->live, key, &size) || size != ev[i].size) {
            r->bad_free++;
        }
    }
    return GM_OK;
}

static int rec_marks(void *ctx, const gm_marker *m, size_t n, gm_err *err)
{
    (void)err;
    rec *r = ctx;
    for (size_t i = 0; i < n && r->nmarks < 64; i++)
        r->mark_t[r->nmarks++] = m[i].t_ns;
    return GM_OK;
}

static void rec_init(rec *r)
{
    memset(r, 0, sizeof *r);
    CU_ASSERT_FATAL(gm_addrmap_init(&r->live, 1024) == GM_OK);
}

static void rec_free(rec *r)
{
    free(r->ev);
    gm_addrmap_free(&r->live);
}

/* Index of the first event of iteration it (by the marker times). */
static size_t iter_start(const rec *r, size_t it)
{
    size_t i = 0;
    while (i < r->n && r->ev[i].t_ns < r->mark_t[it])
        i++;
    return i;
}

static size_t iter_end(const rec *r, size_t it)
{
    return it + 1 < r->nmarks ? iter_start(r, it + 1) : r->n;
}

/* Sum (and count) of alloc sizes in [lo, hi) of category cat (-1: any)
 * and phase ph (-1: any). */
static uint64_t sum_allocs(const rec *r, size_t lo, size_t hi, int cat, int ph, uint64_t *count)
{
    uint64_t s = 0, c = 0;
    for (size_t i = lo; i < hi; i++) {
        const gm_event *e = &r->ev[i];
        if (e->op != GM_OP_ALLOC) continue;
        if (cat >= 0 && e->category != cat) continue;
        if (ph >= 0 && e->phase != ph) continue;
        s += e->size;
        c++;
    }
    if (count) *count = c;
    return s;
}

/* Peak live bytes over [lo, hi), starting from the live bytes before lo. */
static uint64_t peak_in(const rec *r, size_t lo, size_t hi, uint64_t *live_before)
{
    gm_addrmap m;
    CU_ASSERT_FATAL(gm_addrmap_init(&m, 1024) == GM_OK);
    uint64_t live = 0, peak = 0, v;
    for (size_t i = 0; i < hi; i++) {
        const gm_event *e = &r->ev[i];
        if (i == lo) {
            if (live_before) *live_before = live;
            peak = live;
        }
        if (e->op == GM_OP_ALLOC) {
            CU_ASSERT(gm_addrmap_put(&m, gm_addrmap_key(e->addr), e->size) == GM_OK);
            live += e->size;
        } else if (gm_addrmap_del(&m, gm_addrmap_key(e->addr), &v)) {
            live -= v;
        }
        if (i >= lo && live > peak) peak = live;
    }
    gm_addrmap_free(&m);
    return peak;
}

/* The first backward event at or after event lo. */
static size_t bwd_start(const rec *r, size_t lo)
{
    size_t i = lo;
    while (i < r->n && r->ev[i].phase != GM_PHASE_BACKWARD)
        i++;
    return i;
}

/* ------------------------------------------------------------ the configs */

static void small_gpt(gm_gpt_params *p, int layers)
{
    gm_gpt_defaults(p);
    p->layers = layers;
    p->d_model = 64;
    p->heads = 4;
    p->vocab = 128;
    p->ctx = 16;
    p->seq = 16;
    p->t.batch = 2;
    p->t.iterations = 3;
    p->t.cublas_workspace = 0;
}

static int run_gpt(const gm_gpt_params *p, rec *r)
{
    gm_err err;
    rec_init(r);
    int rc = gm_gpt_generate(p, rec_sink, rec_marks, r, NULL, &err);
    if (rc != GM_OK) fprintf(stderr, "gm_gpt_generate: %s\n", err.msg);
    CU_ASSERT(r->bad_free == 0);
    CU_ASSERT(r->bad_time == 0);
    return rc;
}

/*
 * Parameters of the small GPT in registration order, bytes (fp32):
 *   wte 128 x 64 x 4 = 32768, wpe 16 x 64 x 4 = 4096;
 *   per layer: ln_1 w, b 64 x 4 = 256 each; c_attn w 192 x 64 x 4 = 49152,
 *   b 192 x 4 = 768; c_proj w 64 x 64 x 4 = 16384, b 256; ln_2 w, b 256;
 *   c_fc w 256 x 64 x 4 = 65536, b 256 x 4 = 1024; mlp c_proj w 65536, b 256;
 *   ln_f w, b 256 each. 28 tensors, 437248 bytes (109312 parameters).
 */
static const uint64_t gpt_param_bytes[28] = {
    32768, 4096,                                                            /* wte, wpe */
    256,   256,  49152, 768, 16384, 256, 256, 256, 65536, 1024, 65536, 256, /* layer 0  */
    256,   256,  49152, 768, 16384, 256, 256, 256, 65536, 1024, 65536, 256, /* layer 1  */
    256,   256,                                                             /* ln_f     */
};

static void test_gpt_parameters(void)
{
    gm_gpt_params p;
    small_gpt(&p, 2);
    CU_ASSERT_EQUAL(gm_gpt_param_count(&p), 109312);
    rec r;
    CU_ASSERT_FATAL(run_gpt(&p, &r) == GM_OK);
    uint64_t total = 0;
    for (int i = 0; i < 28; i++) {
        CU_ASSERT_EQUAL(r.ev[i].op, GM_OP_ALLOC);
        CU_ASSERT_EQUAL(r.ev[i].category, GM_CAT_PARAMETER);
        CU_ASSERT_EQUAL(r.ev[i].size, gpt_param_bytes[i]);
        total += gpt_param_bytes[i];
    }
    CU_ASSERT_EQUAL(total, 109312 * 4);
    CU_ASSERT_EQUAL(r.nmarks, 3);
    /* GPT-2 small has 124,439,808 parameters (tied lm_head; HF gpt2) */
    gm_gpt_params s;
    gm_gpt_defaults(&s);
    CU_ASSERT_EQUAL(gm_gpt_param_count(&s), 124439808);
    rec_free(&r);
}

/* Iteration 0: each parameter's gradient (its size), then AdamW's two states
 * per parameter at the first step (exp_avg, exp_avg_sq: sizes in parameter
 * order), and foreach_sqrt's 28 temporaries (the parameter sizes again), all
 * alive at once. Iteration 1: gradients again, no new state. */
static void test_gpt_gradients_and_adam(void)
{
    gm_gpt_params p;
    small_gpt(&p, 2);
    rec r;
    CU_ASSERT_FATAL(run_gpt(&p, &r) == GM_OK);
    size_t lo = iter_start(&r, 0), hi = iter_end(&r, 0);
    uint64_t n;
    CU_ASSERT_EQUAL(sum_allocs(&r, lo, hi, GM_CAT_GRADIENT, GM_PHASE_BACKWARD, &n), 437248);
    CU_ASSERT_EQUAL(n, 28);
    CU_ASSERT_EQUAL(sum_allocs(&r, lo, hi, GM_CAT_OPTIMIZER_STATE, -1, &n), 2 * 437248);
    CU_ASSERT_EQUAL(n, 56);
    size_t k = 0;
    for (size_t i = lo; i < hi; i++)
        if (r.ev[i].op == GM_OP_ALLOC && r.ev[i].category == GM_CAT_OPTIMIZER_STATE) {
            CU_ASSERT_EQUAL(r.ev[i].size, gpt_param_bytes[k / 2]);
            k++;
        }
    CU_ASSERT_EQUAL(sum_allocs(&r, lo, hi, GM_CAT_TEMPORARY, GM_PHASE_OPTIMIZER, &n), 437248);
    CU_ASSERT_EQUAL(n, 28);
    /* the step's peak: parameters + gradients + 2 states + the sqrt
     * temporaries (4 x 437248 + 437248) + what the program holds: the batch
     * (idx, targets: 2 x 32 x 8 = 512), the logits (32 x 128 x 4 = 16384)
     * and the loss (4) */
    size_t opt0 = lo;
    while (r.ev[opt0].phase != GM_PHASE_OPTIMIZER || r.ev[opt0].category != GM_CAT_OPTIMIZER_STATE)
        opt0++;
    CU_ASSERT_EQUAL(peak_in(&r, opt0, hi, NULL), 5 * 437248 + 512 + 16384);
    size_t lo1 = iter_start(&r, 1), hi1 = iter_end(&r, 1);
    CU_ASSERT_EQUAL(sum_allocs(&r, lo1, hi1, GM_CAT_GRADIENT, -1, &n), 437248);
    CU_ASSERT_EQUAL(sum_allocs(&r, lo1, hi1, GM_CAT_OPTIMIZER_STATE, -1, &n), 0);
    rec_free(&r);
}

/*
 * Activations saved in one forward (iteration 1), rows = 32, fp32:
 *   per layer: ln_1 mean and rstd 32 x 4 = 128 each, its output 32 x 64 x 4
 *   = 8192 (saved by c_attn), qkv 32 x 192 x 4 = 24576 (its views saved by
 *   sdpa), the sdpa output 2 x 4 x 16 x 16 x 4 = 8192 and its logsumexp
 *   (memory-efficient kernel, seq padded to 32) 2 x 4 x 32 x 4 = 1024, the
 *   residual x + attn 8192 (saved by ln_2), ln_2 mean, rstd 128 each, its
 *   output 8192, c_fc's output 32 x 256 x 4 = 32768 (saved by GELU), GELU's
 *   output 32768 (saved by c_proj), the layer output 8192: 132608 per layer;
 *   outside the layers: the positions 16 x 8 = 128 (saved by wpe), tok + pos
 *   8192 (layer 0's input), ln_f mean, rstd, output 128 + 128 + 8192, the
 *   log_softmax 32 x 128 x 4 = 16384 and nll_loss's total_weight 4:
 *   2 x 132608 + 128 + 8192 + 8448 + 16384 + 4 = 298372.
 */
static void test_gpt_activations(void)
{
    gm_gpt_params p;
    rec r2, r3;
    small_gpt(&p, 2);
    CU_ASSERT_FATAL(run_gpt(&p, &r2) == GM_OK);
    small_gpt(&p, 3);
    CU_ASSERT_FATAL(run_gpt(&p, &r3) == GM_OK);
    uint64_t a2 = sum_allocs(&r2, iter_start(&r2, 1), iter_end(&r2, 1), GM_CAT_ACTIVATION,
                             GM_PHASE_FORWARD, NULL);
    uint64_t a3 = sum_allocs(&r3, iter_start(&r3, 1), iter_end(&r3, 1), GM_CAT_ACTIVATION,
                             GM_PHASE_FORWARD, NULL);
    CU_ASSERT_EQUAL(a2, 298372);
    CU_ASSERT_EQUAL(a3 - a2, 132608);
    rec_free(&r2);
    rec_free(&r3);
}

/*
 * --checkpoint 1: the forward keeps only each layer's input (saved by its
 * checkpoint) and the last layer's output (saved by ln_f): 128 + 8192 (x0)
 * + 8192 (y0) + 8192 (y1) + 8448 + 16384 + 4 = 49540, one 8192 more per
 * layer; backward recomputes each layer and saves its 132608 bytes again
 * (as activations, in the backward phase). Peak live goes down.
 */
static void test_gpt_checkpoint(void)
{
    gm_gpt_params p;
    rec r2, r3, base;
    small_gpt(&p, 2);
    CU_ASSERT_FATAL(run_gpt(&p, &base) == GM_OK);
    p.t.checkpoint = 1;
    CU_ASSERT_FATAL(run_gpt(&p, &r2) == GM_OK);
    small_gpt(&p, 3);
    p.t.checkpoint = 1;
    CU_ASSERT_FATAL(run_gpt(&p, &r3) == GM_OK);
    size_t lo = iter_start(&r2, 1), hi = iter_end(&r2, 1);
    uint64_t f2 = sum_allocs(&r2, lo, hi, GM_CAT_ACTIVATION, GM_PHASE_FORWARD, NULL);
    uint64_t f3 = sum_allocs(&r3, iter_start(&r3, 1), iter_end(&r3, 1), GM_CAT_ACTIVATION,
                             GM_PHASE_FORWARD, NULL);
    CU_ASSERT_EQUAL(f2, 49540);
    CU_ASSERT_EQUAL(f3 - f2, 8192);
    /* recomputed: each layer's saved tensors but its output y (which no
     * node of the recompute saves: 8192); the input is the checkpoint's */
    CU_ASSERT_EQUAL(sum_allocs(&r2, lo, hi, GM_CAT_ACTIVATION, GM_PHASE_BACKWARD, NULL),
                    2 * (132608 - 8192));
    /* live memory when backward begins goes down by the activations the
     * checkpoints did not keep: 298372 - 49540 */
    uint64_t live_ck, live_base;
    size_t bk = bwd_start(&r2, lo), bb = bwd_start(&base, iter_start(&base, 1));
    peak_in(&r2, bk, bk + 1, &live_ck);
    peak_in(&base, bb, bb + 1, &live_base);
    CU_ASSERT_EQUAL(live_base - live_ck, 298372 - 49540);
    rec_free(&r2);
    rec_free(&r3);
    rec_free(&base);
}

/*
 * ZeRO over 4 ranks: units are the root (wte 8192 + wpe 1024 + ln_f 128 =
 * 9344 elements) and each layer (128 + 12288 + 192 + 4096 + 64 + 128 +
 * 16384 + 256 + 16384 + 64 = 49984 elements); shards ceil(n / 4) = 2336 and
 * 12496 elements, 9344 and 49984 bytes.
 *   stage 1: AdamW's states are two per unit shard: 9344 x 2, 49984 x 4.
 *   stage 2: + one gradient shard per unit per iteration (9344, 49984 x 2).
 *   stage 3: + the parameters are the three shards (9344 + 2 x 49984 bytes
 *   at load); each layer is all-gathered (49984 x 4 = 199936 bytes) in
 *   forward and again in backward, the root (37376 bytes) once.
 */
static void test_gpt_zero(void)
{
    static const uint64_t shard[3] = {9344, 49984, 49984};
    for (int stage = 1; stage <= 3; stage++) {
        gm_gpt_params p;
        small_gpt(&p, 2);
        p.t.zero = stage;
        p.t.world = 4;
        rec r;
        CU_ASSERT_FATAL(run_gpt(&p, &r) == GM_OK);
        size_t lo = iter_start(&r, 0), hi = iter_end(&r, 0);
        uint64_t n;
        CU_ASSERT_EQUAL(sum_allocs(&r, lo, hi, GM_CAT_OPTIMIZER_STATE, -1, &n),
                        2 * (9344 + 2 * 49984));
        CU_ASSERT_EQUAL(n, 6);
        uint64_t g = sum_allocs(&r, iter_start(&r, 1), iter_end(&r, 1), GM_CAT_GRADIENT, -1, &n);
        if (stage == 1) {
            CU_ASSERT_EQUAL(g, 437248); /* full gradients */
        } else {
            CU_ASSERT_EQUAL(g, 9344 + 2 * 49984);
            CU_ASSERT_EQUAL(n, 3);
        }
        uint64_t par = sum_allocs(&r, 0, lo, GM_CAT_PARAMETER, -1, &n);
        if (stage == 3) {
            CU_ASSERT_EQUAL(par, shard[0] + shard[1] + shard[2]);
            uint64_t gathered = 0, k = 0;
            for (size_t i = iter_start(&r, 1); i < iter_end(&r, 1); i++)
                if (r.ev[i].op == GM_OP_ALLOC && r.ev[i].size == 199936) k++;
            CU_ASSERT_EQUAL(k, 4); /* two layers, forward and backward */
            for (size_t i = iter_start(&r, 1); i < iter_end(&r, 1); i++)
                if (r.ev[i].op == GM_OP_ALLOC && r.ev[i].size == 37376) gathered++;
            CU_ASSERT_EQUAL(gathered, 1);
        } else {
            CU_ASSERT_EQUAL(par, 437248);
        }
        rec_free(&r);
    }
}

/* --grad-accum 2: two batches and two forwards per step, one set of
 * gradients (the second micro-batch adds into them), one optimizer step. */
static void test_gpt_grad_accum(void)
{
    gm_gpt_params p;
    small_gpt(&p, 2);
    p.t.grad_accum = 2;
    rec r;
    CU_ASSERT_FATAL(run_gpt(&p, &r) == GM_OK);
    size_t lo = iter_start(&r, 1), hi = iter_end(&r, 1);
    uint64_t n;
    CU_ASSERT_EQUAL(sum_allocs(&r, lo, hi, GM_CAT_GRADIENT, -1, &n), 437248);
    CU_ASSERT_EQUAL(n, 28);
    CU_ASSERT_EQUAL(sum_allocs(&r, lo, hi, GM_CAT_INPUT, -1, &n), 4 * 256);
    CU_ASSERT_EQUAL(n, 4);
    CU_ASSERT_EQUAL(sum_allocs(&r, lo, hi, GM_CAT_TEMPORARY, GM_PHASE_OPTIMIZER, &n), 437248);
    rec_free(&r);
}

/* bf16 autocast: parameters stay fp32 (437248 bytes), each linear's weight
 * is cast once per forward (c_attn 192 x 64 x 2 = 24576, c_proj 8192, c_fc
 * and mlp c_proj 32768, the tied lm_head 16384: 2 x 98304 + 16384 bytes of
 * casts), and a gradient flows back into the fp32 .grad (437248). */
static void test_gpt_bf16(void)
{
    gm_gpt_params p;
    small_gpt(&p, 2);
    p.t.amp = GM_AMP_BF16;
    rec r;
    CU_ASSERT_FATAL(run_gpt(&p, &r) == GM_OK);
    CU_ASSERT_EQUAL(sum_allocs(&r, 0, iter_start(&r, 0), GM_CAT_PARAMETER, -1, NULL), 437248);
    size_t lo = iter_start(&r, 1), hi = iter_end(&r, 1);
    CU_ASSERT_EQUAL(sum_allocs(&r, lo, hi, GM_CAT_GRADIENT, -1, NULL), 437248);
    static const uint64_t casts[] = {24576, 8192, 32768, 32768, 16384};
    for (size_t c = 0; c < 5; c++) {
        uint64_t k = 0;
        for (size_t i = lo; i < hi; i++)
            if (r.ev[i].op == GM_OP_ALLOC && r.ev[i].phase == GM_PHASE_FORWARD &&
                r.ev[i].size == casts[c] && r.ev[i].category == GM_CAT_ACTIVATION)
                k++;
        CU_ASSERT(k >= (c == 4 ? 1u : 2u));
    }
    rec_free(&r);
}

static void test_determinism(void)
{
    gm_gpt_params p;
    small_gpt(&p, 2);
    p.t.checkpoint = 1;
    p.t.amp = GM_AMP_FP16;
    rec a, b;
    CU_ASSERT_FATAL(run_gpt(&p, &a) == GM_OK);
    CU_ASSERT_FATAL(run_gpt(&p, &b) == GM_OK);
    CU_ASSERT_EQUAL(a.n, b.n);
    CU_ASSERT(a.n == b.n && !memcmp(a.ev, b.ev, a.n * sizeof *a.ev));
    rec_free(&a);
    rec_free(&b);
}

/* Inference: parameters, then per forward only temporaries: nothing is
 * saved, no gradient, no optimizer; live memory returns to the parameters,
 * the batch and the kept logits after each forward. */
static void test_gpt_inference(void)
{
    gm_gpt_params p;
    small_gpt(&p, 2);
    p.t.mode = GM_MODE_INFER;
    rec r;
    CU_ASSERT_FATAL(run_gpt(&p, &r) == GM_OK);
    CU_ASSERT_EQUAL(sum_allocs(&r, 0, r.n, GM_CAT_ACTIVATION, -1, NULL), 0);
    CU_ASSERT_EQUAL(sum_allocs(&r, 0, r.n, GM_CAT_GRADIENT, -1, NULL), 0);
    CU_ASSERT_EQUAL(sum_allocs(&r, 0, r.n, GM_CAT_OPTIMIZER_STATE, -1, NULL), 0);
    uint64_t before;
    peak_in(&r, r.n - 1, r.n, &before);
    gm_event last = r.ev[r.n - 1];
    uint64_t end =
        before + (last.op == GM_OP_ALLOC ? last.size : 0) - (last.op == GM_OP_FREE ? last.size : 0);
    CU_ASSERT_EQUAL(end, 437248 + 512 + 16384);
    rec_free(&r);
}

/* ------------------------------------------------------------ LLaMA */

/*
 * LLaMA with layers 2, d_model 64, heads 4 (head size 16), kv_heads 2, ffn
 * 160, vocab 128, seq 16, untied, fp32. Parameters (bytes): embed 128 x 64
 * x 4 = 32768; per layer input_layernorm 256, q_proj 64 x 64 x 4 = 16384,
 * k_proj and v_proj (2 x 16) x 64 x 4 = 8192, o_proj 16384, post norm 256,
 * gate, up 160 x 64 x 4 = 40960, down 40960; norm 256; lm_head 32768.
 */
static void test_llama_parameters(void)
{
    static const uint64_t bytes[] = {32768, 256,   16384, 8192,  8192,  16384, 256,
                                     40960, 40960, 40960, 256,   16384, 8192,  8192,
                                     16384, 256,   40960, 40960, 40960, 256,   32768};
    gm_llama_params p;
    gm_llama_defaults(&p);
    p.layers = 2;
    p.d_model = 64;
    p.heads = 4;
    p.kv_heads = 2;
    p.ffn = 160;
    p.vocab = 128;
    p.seq = 16;
    p.t.batch = 2;
    p.t.iterations = 2;
    p.t.cublas_workspace = 0;
    rec r;
    gm_err err;
    rec_init(&r);
    CU_ASSERT_FATAL(gm_llama_generate(&p, rec_sink, rec_marks, &r, NULL, &err) == GM_OK);
    CU_ASSERT(r.bad_free == 0);
    uint64_t total = 0;
    for (size_t i = 0; i < sizeof bytes / sizeof bytes[0]; i++) {
        CU_ASSERT_EQUAL(r.ev[i].size, bytes[i]);
        CU_ASSERT_EQUAL(r.ev[i].category, GM_CAT_PARAMETER);
        total += bytes[i];
    }
    CU_ASSERT_EQUAL(gm_llama_param_count(&p) * 4, total);
    /* grouped-query attention: repeat_kv copies k and v to 4 heads, 2 x 4 x
     * 16 x 16 x 4 = 8192 bytes each, saved by sdpa: per layer 2 of them */
    size_t lo = iter_start(&r, 1), hi = iter_end(&r, 1);
    uint64_t k = 0;
    for (size_t i = lo; i < hi; i++)
        if (r.ev[i].op == GM_OP_ALLOC && r.ev[i].phase == GM_PHASE_FORWARD &&
            r.ev[i].size == 8192 && r.ev[i].category == GM_CAT_ACTIVATION)
            k++;
    CU_ASSERT(k >= 4);
    /* LLaMA-2 7B: 6,738,415,616 parameters (untied) */
    gm_llama_params s;
    gm_llama_defaults(&s);
    CU_ASSERT_EQUAL(gm_llama_param_count(&s), 6738415616ull);
    /* Llama-3 8B: 8,030,261,248 */
    CU_ASSERT(gm_llama_preset(&s, "llama3-8b", &err) == GM_OK);
    CU_ASSERT_EQUAL(gm_llama_param_count(&s), 8030261248ull);
    CU_ASSERT(gm_llama_preset(&s, "llama9", &err) == GM_EINVAL);
    CU_ASSERT(strstr(err.msg, "llama2-7b") != NULL);
    rec_free(&r);
}

/* ------------------------------------------------------------ ResNet-50 */

/*
 * torchvision's resnet50 has 25,557,032 parameters; each BatchNorm adds 2 C
 * + 2 floats of buffers (running mean and var, one int64 counter): over the
 * 53 BatchNorms 2 x 26560 channels... so load-time bytes are 4 x (25557032
 * + buffers). Stem at 224 x 224, batch 2: conv1's output 2 x 64 x 112 x 112
 * x 4 = 6422528 bytes (saved by bn1), the maxpool output and its int64
 * indices 2 x 64 x 56 x 56 x (4 + 8).
 */
static void test_resnet(void)
{
    gm_resnet_params p;
    gm_resnet_defaults(&p);
    CU_ASSERT_EQUAL(gm_resnet_param_count(&p), 25557032);
    p.t.batch = 2;
    p.t.iterations = 2;
    p.t.cublas_workspace = 0;
    rec r;
    gm_err err;
    rec_init(&r);
    CU_ASSERT_FATAL(gm_resnet_generate(&p, rec_sink, rec_marks, &r, NULL, &err) == GM_OK);
    CU_ASSERT(r.bad_free == 0);
    size_t lo = iter_start(&r, 1), hi = iter_end(&r, 1);
    uint64_t trainable = sum_allocs(&r, lo, hi, GM_CAT_GRADIENT, -1, NULL);
    CU_ASSERT_EQUAL(trainable, 25557032ull * 4);
    /* the forward's first allocations: the batch (images 2 x 3 x 224 x 224 x
     * 4 = 1204224, labels 16), conv1's output, bn1's output and its two fp32
     * [64] statistics, the maxpool output and its indices */
    static const uint64_t stem[] = {1204224, 16, 6422528, 6422528, 256, 256, 1605632, 3211264};
    size_t k = 0;
    for (size_t i = lo; i < hi && k < 8; i++)
        if (r.ev[i].op == GM_OP_ALLOC) CU_ASSERT_EQUAL(r.ev[i].size, stem[k++]);
    CU_ASSERT_EQUAL(k, 8);
    /* SGD with momentum: one buffer per parameter, made at the first step */
    CU_ASSERT_EQUAL(
        sum_allocs(&r, iter_start(&r, 0), iter_end(&r, 0), GM_CAT_OPTIMIZER_STATE, -1, NULL),
        25557032ull * 4);
    rec_free(&r);

    /*
     * Activations saved by one forward at batch 1, 224 x 224, fp32 (the
     * table of GENERATORS.md), by hand from the shapes: the stem keeps
     * conv1's and bn1's outputs (64 x 112^2 each), bn1's statistics (2 x
     * 64), the maxpool output (64 x 56^2) and its int64 indices; a block
     * with planes P from h_in to h_out keeps conv1 and bn1 outputs (P x
     * h_in^2 each), conv2 and bn2 outputs (P x h_out^2 each), conv3 and bn3
     * outputs (4P x h_out^2 each), the BN statistics (2P + 2P + 8P), and
     * in a stage's first block the downsample conv output (4P x h_out^2)
     * and its statistics (8P); all fp32:
     *   stem 8831488, layer1 32123904, layer2 23310336, layer3 16539648,
     *   layer4 4706304; head: pooled 2048 x 4, log_softmax 1000 x 4,
     *   total_weight 4: 85523876 bytes.
     */
    p.t.batch = 1;
    rec_init(&r);
    CU_ASSERT_FATAL(gm_resnet_generate(&p, rec_sink, rec_marks, &r, NULL, &err) == GM_OK);
    CU_ASSERT_EQUAL(sum_allocs(&r, iter_start(&r, 1), iter_end(&r, 1), GM_CAT_ACTIVATION,
                               GM_PHASE_FORWARD, NULL),
                    8831488ull + 32123904 + 23310336 + 16539648 + 4706304 + 8192 + 4000 + 4);
    rec_free(&r);
}

/* Bad parameters are refused with the field and the fix. */
static void test_checks(void)
{
    gm_gpt_params p;
    gm_err err;
    small_gpt(&p, 2);
    p.heads = 5;
    CU_ASSERT(gm_gpt_check(&p, &err) == GM_EINVAL);
    CU_ASSERT(strstr(err.msg, "heads") != NULL);
    small_gpt(&p, 2);
    p.t.zero = 2;
    CU_ASSERT(gm_gpt_check(&p, &err) == GM_EINVAL);
    CU_ASSERT(strstr(err.msg, "world") != NULL);
    small_gpt(&p, 2);
    p.t.checkpoint = 3;
    CU_ASSERT(gm_gpt_check(&p, &err) == GM_EINVAL);
    small_gpt(&p, 2);
    p.seq = 17;
    CU_ASSERT(gm_gpt_check(&p, &err) == GM_EINVAL);
    CU_ASSERT(strstr(err.msg, "seq") != NULL);
    gm_llama_params l;
    gm_llama_defaults(&l);
    l.kv_heads = 5;
    CU_ASSERT(gm_llama_check(&l, &err) == GM_EINVAL);
    CU_ASSERT(strstr(err.msg, "kv_heads") != NULL);
}

int gm_test_register(void)
{
    CU_pSuite s = CU_add_suite("gen_models", NULL, NULL);
    if (!s) return CU_get_error();
    GM_ADD_TEST(s, test_gpt_parameters);
    GM_ADD_TEST(s, test_gpt_gradients_and_adam);
    GM_ADD_TEST(s, test_gpt_activations);
    GM_ADD_TEST(s, test_gpt_checkpoint);
    GM_ADD_TEST(s, test_gpt_zero);
    GM_ADD_TEST(s, test_gpt_grad_accum);
    GM_ADD_TEST(s, test_gpt_bf16);
    GM_ADD_TEST(s, test_determinism);
    GM_ADD_TEST(s, test_gpt_inference);
    GM_ADD_TEST(s, test_llama_parameters);
    GM_ADD_TEST(s, test_resnet);
    GM_ADD_TEST(s, test_checks);
    return CUE_SUCCESS;
}
