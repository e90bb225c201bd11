/*
 * gen_loop.c - the training loop the GPT, LLaMA and ResNet-50 generators
 * share (gen_graph.h, gg_run): model.to(device), per iteration zero_grad,
 * micro-batches of forward + backward, the optimizer step with its states
 * and temporaries (one function per implementation), ZeRO's sharded states
 * and the all-gather after the step, GradScaler's scalars under fp16.
 *
 * The loop is
 *
 *     model.to(device)                                  # parameters
 *     for it in range(iterations):
 *         optimizer.zero_grad(set_to_none=True)         # frees .grad
 *         for micro in range(grad_accum):
 *             batch = next(loader).to(device)           # old batch freed first
 *             with torch.autocast(...): loss, logits = model(batch)
 *             (loss / grad_accum).backward()            # or scaler.scale(loss)
 *         optimizer.step()
 *
 * Each iteration's events are held (gm_gen_hold) so that a forward
 * tensor's category can be settled when it dies, then flushed.
 */
#include "gen_graph.h"
#include "gen_ops.h"

#include <stdlib.h>
#include <string.h>

/* One thing the optimizer updates: a parameter, or under ZeRO a unit's shard. */
typedef struct opt_item {
    uint64_t numel;
    gm_gen_tensor *s; /* its two state slots */
} opt_item;

typedef struct loop {
    gg *G;
    const gg_model *m;
    void *ctx;
    opt_item *items;
    size_t nitems;
    gg_t in[GG_MAX_INPUTS];
    int nin;
    gg_t keep;
    gm_gen_tensor scale, growth; /* GradScaler's persistent scale and growth tracker */
    int step;
} loop;

static gm_gen *O(loop *L)
{
    return &L->G->o;
}

/* ---------------------------------------------------------- parameters */

static int make_units(gg *G)
{
    int nu = 1;
    for (size_t i = 0; i < G->np; i++)
        if (G->p[i].unit + 1 > nu) nu = G->p[i].unit + 1;
    G->u = calloc((size_t)nu, sizeof *G->u);
    if (!G->u) return gm_errf(G->o.err, GM_ENOMEM, "%s: out of host memory", G->who);
    G->nu = nu;
    uint64_t world = (uint64_t)G->t->world;
    for (size_t i = 0; i < G->np; i++)
        if (!G->p[i].frozen) G->u[G->p[i].unit].numel += G->p[i].numel;
    for (int u = 0; u < nu; u++)
        G->u[u].shard = (G->u[u].numel + world - 1) / world;
    return GM_OK;
}

/* model.to(device): each parameter copied host to device, in registration
 * order; under ZeRO-3 each unit's shard instead (buffers are not sharded). */
static void load_model(loop *L)
{
    gg *G = L->G;
    O(L)->phase = GM_PHASE_UNKNOWN;
    for (size_t i = 0; i < G->np; i++) {
        gg_param *p = &G->p[i];
        if (G->t->zero == 3 && !p->frozen) continue;
        p->w = gm_gen_alloc_at(O(L), p->numel * GG_F32, GM_CAT_PARAMETER, GM_GEN_H2D_BYTES_PER_NS);
        O(L)->st.param_bytes += p->w.size;
    }
    if (G->t->zero != 3) return;
    for (int u = 0; u < G->nu; u++) {
        gg_unit *U = &G->u[u];
        if (!U->numel) continue;
        U->w = gm_gen_alloc_at(O(L), U->shard * GG_F32, GM_CAT_PARAMETER, GM_GEN_H2D_BYTES_PER_NS);
        O(L)->st.param_bytes += U->w.size;
    }
}

static int make_items(loop *L)
{
    gg *G = L->G;
    L->items = calloc(G->np + (size_t)G->nu + 1, sizeof *L->items);
    if (!L->items) return gm_errf(G->o.err, GM_ENOMEM, "%s: out of host memory", G->who);
    if (G->t->zero) {
        for (int u = 0; u < G->nu; u++)
            if (G->u[u].numel) L->items[L->nitems++] = (opt_item){G->u[u].shard, G->u[u].s};
    } else {
        for (size_t i = 0; i < G->np; i++)
            if (!G->p[i].frozen) L->items[L->nitems++] = (opt_item){G->p[i].numel, G->p[i].s};
    }
    return GM_OK;
}

static uint64_t item_bytes(const opt_item *it)
{
    return it->numel * GG_F32;
}

/* ----------------------------------------------------------- optimizer */

static int nstates(int opt)
{
    return opt == GM_OPT_SGD_PLAIN ? 0 : opt == GM_OPT_SGD ? 1 : 2;
}

/* _init_group at the first step: exp_avg / exp_avg_sq = zeros_like(p), or
 * SGD's momentum_buffer = clone(grad). */
static void init_states(loop *L, opt_item *it)
{
    for (int k = 0; k < nstates(L->G->t->optimizer); k++)
        if (!it->s[k].addr) it->s[k] = gm_gen_alloc(O(L), item_bytes(it), GM_CAT_OPTIMIZER_STATE);
}

static void tmp_free(loop *L, gm_gen_tensor *t)
{
    gm_gen_free(O(L), t);
}

static gm_gen_tensor tmp(loop *L, uint64_t bytes)
{
    return gm_gen_alloc(O(L), bytes, GM_CAT_TEMPORARY);
}

/* _multi_tensor_adam(w): lerp_, mul_, addcmul_ in place, then
 * exp_avg_sq_sqrt = _foreach_sqrt(exp_avg_sqs): one temporary per item, all
 * alive until addcdiv_ is done. */
static void adam_foreach(loop *L)
{
    uint64_t total = 0;
    for (size_t i = 0; i < L->nitems; i++) {
        init_states(L, &L->items[i]);
        total += item_bytes(&L->items[i]);
    }
    gm_gen_tick(O(L), 4 * total);
    gm_gen_tensor *sq = calloc(L->nitems ? L->nitems : 1, sizeof *sq);
    if (!sq) {
        gm_gen_fail(O(L), GM_ENOMEM, "out of host memory");
        return;
    }
    for (size_t i = 0; i < L->nitems; i++)
        sq[i] = tmp(L, item_bytes(&L->items[i]));
    gm_gen_tick(O(L), 3 * total);
    for (size_t i = 0; i < L->nitems; i++)
        tmp_free(L, &sq[i]);
    free(sq);
}

/* _single_tensor_adam(w): per item denom = (exp_avg_sq.sqrt() / bc2).add_(eps). */
static void adam_for_loop(loop *L)
{
    for (size_t i = 0; i < L->nitems; i++)
        init_states(L, &L->items[i]);
    for (size_t i = 0; i < L->nitems; i++) {
        uint64_t b = item_bytes(&L->items[i]);
        gm_gen_tick(O(L), 4 * b);
        gm_gen_tensor s = tmp(L, b), d = tmp(L, b);
        tmp_free(L, &s);
        gm_gen_tick(O(L), b);
        tmp_free(L, &d);
    }
}

/* A step written by hand, out of place (the cs336 snapshots' shape):
 *   p -= lr * wd * p; ...                      three temporaries, one at a time
 *   m = beta1 * m + (1 - beta1) * g            two temporaries, a new m
 *   v = beta2 * v + (1 - beta2) * g * g        three temporaries, a new v
 *   p -= lr_t * m / (sqrt(v) + eps)            four temporaries
 * The old m and v stay referenced by the loop's variables until the next
 * parameter's turn. */
static void adam_out_of_place(loop *L)
{
    gm_gen_tensor old[2] = {{0}, {0}};
    for (size_t i = 0; i < L->nitems; i++) {
        opt_item *it = &L->items[i];
        uint64_t b = item_bytes(it);
        init_states(L, it);
        for (int k = 0; k < 3; k++) {
            gm_gen_tensor t = tmp(L, b);
            tmp_free(L, &t);
            if (k >= 1 && old[k - 1].addr) gm_gen_free(O(L), &old[k - 1]);
        }
        gm_gen_tensor a = tmp(L, b), c = tmp(L, b);
        gm_gen_tensor m = gm_gen_alloc(O(L), b, GM_CAT_OPTIMIZER_STATE);
        tmp_free(L, &a);
        tmp_free(L, &c);
        a = tmp(L, b);
        c = tmp(L, b);
        gm_gen_tensor e = tmp(L, b);
        tmp_free(L, &c);
        gm_gen_tensor v = gm_gen_alloc(O(L), b, GM_CAT_OPTIMIZER_STATE);
        tmp_free(L, &a);
        tmp_free(L, &e);
        a = tmp(L, b);
        c = tmp(L, b);
        e = tmp(L, b);
        tmp_free(L, &c);
        gm_gen_tensor f = tmp(L, b);
        tmp_free(L, &a);
        tmp_free(L, &e);
        tmp_free(L, &f);
        old[0] = it->s[0];
        old[1] = it->s[1];
        it->s[0] = m;
        it->s[1] = v;
    }
    for (int k = 0; k < 2; k++)
        if (old[k].addr) gm_gen_free(O(L), &old[k]);
}

static void sgd_step(loop *L)
{
    uint64_t total = 0;
    for (size_t i = 0; i < L->nitems; i++) {
        init_states(L, &L->items[i]);
        total += item_bytes(&L->items[i]);
    }
    gm_gen_tick(O(L), 2 * total); /* mul_, add_ into the buffers; add_ into the params */
}

/* ZeRO 1/2: each unit's updated shard is all-gathered back into the full
 * parameters through a flat buffer. */
static void zero_allgather(loop *L)
{
    gg *G = L->G;
    if (G->t->zero != 1 && G->t->zero != 2) return;
    for (int u = 0; u < G->nu; u++) {
        if (!G->u[u].numel) continue;
        gm_gen_tensor t = tmp(L, G->u[u].numel * GG_F32);
        tmp_free(L, &t);
    }
}

static void optimizer_step(loop *L)
{
    const gm_train_params *t = L->G->t;
    O(L)->phase = GM_PHASE_OPTIMIZER;
    gm_gen_tensor found = {0}, inv = {0};
    if (t->amp == GM_AMP_FP16) { /* scaler.unscale_: found_inf, inv_scale */
        found = tmp(L, GG_F32);
        inv = tmp(L, GG_F32);
    }
    if (t->optimizer == GM_OPT_SGD || t->optimizer == GM_OPT_SGD_PLAIN)
        sgd_step(L);
    else if (t->optim_impl == GM_IMPL_FOREACH)
        adam_foreach(L);
    else if (t->optim_impl == GM_IMPL_FOR_LOOP)
        adam_for_loop(L);
    else if (t->optim_impl == GM_IMPL_OUT_OF_PLACE)
        adam_out_of_place(L);
    else { /* fused: one kernel, no temporaries */
        for (size_t i = 0; i < L->nitems; i++)
            init_states(L, &L->items[i]);
        gm_gen_tick(O(L), 0);
    }
    zero_allgather(L);
    if (found.addr) {
        tmp_free(L, &inv);
        tmp_free(L, &found);
    }
}

/* optimizer.zero_grad(): set_to_none frees every .grad (or shard). */
static void zero_grad(loop *L)
{
    gg *G = L->G;
    O(L)->phase = GM_PHASE_OPTIMIZER;
    if (!G->t->set_to_none) return; /* zeroed in place */
    for (size_t i = 0; i < G->np; i++)
        if (G->p[i].g.addr) gm_gen_free(O(L), &G->p[i].g);
    for (int u = 0; u < G->nu; u++)
        if (G->u[u].g.addr) gm_gen_free(O(L), &G->u[u].g);
}

/* ------------------------------------------------------------ the loop */

static void load_batch(loop *L)
{
    O(L)->phase = GM_PHASE_FORWARD;
    for (int i = 0; i < L->nin; i++) /* `for batch in loader` rebinds: the old one goes */
        gg_drop(L->G, L->in[i]);
    L->nin = L->m->batch(L->G, L->ctx, L->in);
}

/* What the program holds between iterations: parameters, the batch, the kept output. */
static void check_leaks(loop *L)
{
    gg *G = L->G;
    size_t live = 0;
    for (size_t h = 1; h < G->nts; h++)
        live += G->ts[h].used;
    size_t expect = G->np + (size_t)L->nin + (L->keep ? 1 : 0);
    if (live != expect)
        gm_gen_fail(&G->o, GM_EINVAL,
                    "internal error: %zu tensors alive after an iteration, %zu "
                    "expected",
                    live, expect);
}

static gg_t scale_loss(loop *L, gg_t loss)
{
    gg *G = L->G;
    const gm_train_params *t = G->t;
    if (t->grad_accum > 1) { /* loss / grad_accum */
        gg_t d = gg_unary(G, loss, 0, 0, 0);
        gg_drop(G, loss);
        loss = d;
    }
    if (t->amp == GM_AMP_FP16) { /* scaler.scale(loss) = loss * scale */
        if (!L->scale.addr) {
            L->scale = gm_gen_alloc(O(L), GG_F32, GM_CAT_OPTIMIZER_STATE);
            L->growth = gm_gen_alloc(O(L), 4, GM_CAT_OPTIMIZER_STATE);
        }
        gg_t s = gg_unary(G, loss, 0, 0, 0);
        gg_drop(G, loss);
        loss = s;
    }
    return loss;
}

static void micro_batch(loop *L)
{
    gg *G = L->G;
    load_batch(L);
    gg_t keep = 0;
    gg_t loss = L->m->forward(G, L->ctx, L->in, &keep);
    gg_autocast_exit(G);              /* the end of `with torch.autocast(...)` */
    if (L->keep) gg_drop(G, L->keep); /* `logits = model(...)` rebinds */
    L->keep = keep;
    if (G->t->mode == GM_MODE_INFER) {
        gg_drop(G, loss);
        return;
    }
    loss = scale_loss(L, loss);
    O(L)->phase = GM_PHASE_BACKWARD;
    gg_backward(G, loss);
    gg_drop(G, loss);
}

static void iteration(loop *L, int it)
{
    gg *G = L->G;
    gm_gen_hold(O(L), 1);
    O(L)->phase = GM_PHASE_FORWARD;
    gm_gen_mark_iteration(O(L), it);
    if (G->t->mode == GM_MODE_INFER) {
        micro_batch(L);
    } else {
        zero_grad(L);
        for (int k = 0; k < G->t->grad_accum && O(L)->rc == GM_OK; k++)
            micro_batch(L);
        if (O(L)->rc == GM_OK) optimizer_step(L);
    }
    if (O(L)->rc == GM_OK) check_leaks(L);
    /* what lives on (batch, outputs) gets its category before the flush */
    for (size_t h = 1; h < G->nts; h++) {
        gg_tensor *x = &G->ts[h];
        if (x->used && x->param < 0 && !x->fixed) {
            gm_gen_set_category(O(L), &x->m, x->saved ? GM_CAT_ACTIVATION : GM_CAT_TEMPORARY);
            x->fixed = 1;
        }
    }
    gm_gen_hold(O(L), 0);
}

static void free_all(gg *G, loop *L)
{
    free(L->items);
    free(G->p);
    free(G->u);
    free(G->ts);
    free(G->free_ts);
    free(G->nodes);
}

int gg_run(const char *who, const gm_train_params *t, const gg_model *m, void *ctx,
           gm_gen_event_sink sink, gm_gen_marker_sink marks, void *sink_ctx, gm_gen_stats *stats,
           gm_err *err)
{
    gg *G = calloc(1, sizeof *G);
    if (!G) return gm_errf(err, GM_ENOMEM, "%s: out of host memory", who);
    loop L;
    memset(&L, 0, sizeof L);
    L.G = G;
    L.m = m;
    L.ctx = ctx;
    gm_gen_init(&G->o, who, t->stream, sink, marks, sink_ctx, err);
    G->t = t;
    G->who = who;
    G->cdt = t->amp == GM_AMP_FP32 ? GG_F32 : GG_F16;
    G->grad_mode = t->mode == GM_MODE_TRAIN;
    G->naive = m->naive;
    G->bwd_unit = -1;
    m->build(G, ctx);
    int rc = G->o.rc;
    if (rc == GM_OK) rc = make_units(G);
    if (rc == GM_OK) rc = make_items(&L);
    if (rc == GM_OK) {
        load_model(&L);
        for (int it = 0; it < t->iterations && G->o.rc == GM_OK; it++)
            iteration(&L, it);
        rc = gm_gen_finish(&G->o);
    }
    G->o.st.end_live_bytes = G->o.live_bytes;
    if (stats) *stats = G->o.st;
    free_all(G, &L);
    free(G);
    return rc;
}
