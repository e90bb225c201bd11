/*
 * gen_graph.c - see gen_graph.h. Tensors, autograd nodes, backward,
 * checkpointing, autocast casts and ZeRO units; the optimizer and the
 * training loop are gen_loop.c.
 *
 * The backward pass visits nodes in reverse creation order, a valid
 * topological order of the graph, which is also PyTorch's (its ready queue
 * prefers the highest sequence number). For each node whose output got a
 * gradient: its backward temporaries are allocated, then each input's
 * gradient (one allocation, or the output gradient itself for pass-through
 * ops), which is added into the producer's buffer (in place when the buffer
 * is not shared) or accumulated into the parameter's .grad (the first one
 * becomes .grad; later ones are added in place and freed); then the
 * temporaries, the output gradient and the saved tensors are released
 * (retain_graph=False).
 */
#include "gen_graph.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ tensors */

static gg_tensor *T(gg *G, gg_t t)
{
    return &G->ts[t];
}

static int grow(gg *G, void **arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return 1;
    size_t nc = *cap ? *cap * 2 : 256;
    while (nc < need)
        nc *= 2;
    void *na = realloc(*arr, nc * elem);
    if (!na) {
        gm_gen_fail(&G->o, GM_ENOMEM, "out of host memory");
        return 0;
    }
    *arr = na;
    *cap = nc;
    return 1;
}

/* A fresh handle (index 0 is never used). */
static gg_t handle(gg *G)
{
    if (G->nts == 0) G->nts = 1;
    gg_t h;
    if (G->nfree_ts) {
        h = G->free_ts[--G->nfree_ts];
    } else {
        if (!grow(G, (void **)&G->ts, &G->cap_ts, G->nts + 1, sizeof *G->ts)) return 0;
        h = (gg_t)G->nts++;
    }
    memset(&G->ts[h], 0, sizeof G->ts[h]);
    G->ts[h].used = 1;
    G->ts[h].param = -1;
    return h;
}

static void release_handle(gg *G, gg_t h)
{
    G->ts[h].used = 0;
    if (grow(G, (void **)&G->free_ts, &G->cap_free_ts, G->nfree_ts + 1, sizeof *G->free_ts))
        G->free_ts[G->nfree_ts++] = h;
}

static gg_t new_tensor(gg *G, uint64_t numel, uint8_t dt, uint8_t cat, int fixed)
{
    gg_t h = handle(G);
    if (!h) return 0;
    gg_tensor *x = T(G, h);
    x->numel = numel;
    x->dt = dt;
    x->refs = 1;
    x->fixed = (uint8_t)fixed;
    x->m = gm_gen_alloc(&G->o, numel * dt, cat);
    return h;
}

gg_t gg_new(gg *G, uint64_t numel, uint8_t dt)
{
    return new_tensor(G, numel, dt, GM_CAT_TEMPORARY, 0);
}

gg_t gg_new_fixed(gg *G, uint64_t numel, uint8_t dt, uint8_t cat)
{
    return new_tensor(G, numel, dt, cat, 1);
}

/* Free t's storage, deciding its category if it was not fixed; a view
 * lets go of its base. */
static void die(gg *G, gg_t h)
{
    gg_tensor *x = T(G, h);
    if (x->base) {
        gg_t b = x->base;
        release_handle(G, h);
        gg_drop(G, b);
        return;
    }
    if (!x->fixed)
        gm_gen_set_category(&G->o, &x->m, x->saved ? GM_CAT_ACTIVATION : GM_CAT_TEMPORARY);
    gm_gen_free(&G->o, &x->m);
    release_handle(G, h);
}

gg_t gg_ref(gg *G, gg_t t)
{
    if (t && T(G, t)->param < 0) T(G, t)->refs++;
    return t;
}

void gg_drop(gg *G, gg_t t)
{
    if (!t) return;
    gg_tensor *x = T(G, t);
    if (x->param >= 0) return; /* parameters live with the model */
    if (!x->used || x->refs == 0) {
        gm_gen_fail(&G->o, GM_EINVAL, "internal error: release of a dead tensor");
        return;
    }
    if (--x->refs == 0) die(G, t);
}

uint64_t gg_numel(const gg *G, gg_t t)
{
    return G->ts[t].numel;
}

uint8_t gg_dt(const gg *G, gg_t t)
{
    return G->ts[t].dt;
}

int gg_param_add(gg *G, uint64_t numel, int unit, int frozen)
{
    if (!grow(G, (void **)&G->p, &G->cap_p, G->np + 1, sizeof *G->p)) return -1;
    gg_param *p = &G->p[G->np];
    memset(p, 0, sizeof *p);
    p->numel = numel;
    p->unit = unit;
    p->frozen = frozen;
    p->h = handle(G);
    if (!p->h) return -1;
    gg_tensor *x = T(G, p->h);
    x->numel = numel;
    /* ZeRO-3: ops use the gathered copy, in the compute dtype */
    x->dt = G->t->zero == 3 && !frozen ? G->cdt : GG_F32;
    x->param = (int32_t)G->np;
    x->refs = 1;
    return (int)G->np++;
}

/* --------------------------------------------------------------- nodes */

int gg_requires_grad(const gg *G, gg_t t)
{
    if (!t) return 0;
    const gg_tensor *x = &G->ts[t];
    if (x->param >= 0) return !G->p[x->param].frozen;
    return x->fn != 0;
}

static uint32_t new_node(gg *G)
{
    if (!grow(G, (void **)&G->nodes, &G->cap_nn, G->nn + 1, sizeof *G->nodes)) return 0;
    gg_node *n = &G->nodes[G->nn];
    memset(n, 0, sizeof *n);
    n->unit = G->unit;
    return (uint32_t)++G->nn; /* node index + 1 */
}

/* Where input t's gradient goes, in node n. */
static void add_input(gg *G, gg_node *n, gg_t t)
{
    if (n->nin == GG_MAX_IN) {
        gm_gen_fail(&G->o, GM_EINVAL, "internal error: too many node inputs");
        return;
    }
    const gg_tensor *x = T(G, t);
    int i = n->nin++;
    n->in_fn[i] = x->param >= 0 ? 0 : x->fn;
    n->in_slot[i] = x->slot;
    n->in_param[i] = x->param;
    n->in_bytes[i] = x->numel * x->dt;
}

static void add_saved(gg *G, gg_node *n, gg_t t)
{
    if (!t || T(G, t)->param >= 0) return; /* a parameter is saved by reference */
    if (n->nsaved == GG_MAX_SAVED) {
        gm_gen_fail(&G->o, GM_EINVAL, "internal error: too many saved tensors");
        return;
    }
    T(G, t)->refs++;
    T(G, t)->saved = 1;
    if (T(G, t)->base) T(G, T(G, t)->base)->saved = 1; /* a saved view keeps an activation */
    n->saved[n->nsaved++] = t;
}

void gg_record(gg *G, gg_t out, const gg_t *in, int nin, const gg_t *save, int nsave, uint64_t tmp0,
               uint64_t tmp1)
{
    const uint64_t tmp[GG_MAX_TMP] = {tmp0, tmp1, 0};
    gg_record3(G, out, in, nin, save, nsave, tmp);
}

void gg_record3(gg *G, gg_t out, const gg_t *in, int nin, const gg_t *save, int nsave,
                const uint64_t tmp[GG_MAX_TMP])
{
    if (!G->grad_mode || G->o.rc != GM_OK) return;
    int any = 0;
    for (int i = 0; i < nin; i++)
        any |= gg_requires_grad(G, in[i]);
    if (!any) return; /* nothing to differentiate: no node, nothing saved */
    uint32_t id = new_node(G);
    if (!id) return;
    gg_node *n = &G->nodes[id - 1];
    for (int i = 0; i < nin; i++)
        if (gg_requires_grad(G, in[i])) add_input(G, n, in[i]);
    for (int i = 0; i < nsave; i++)
        add_saved(G, n, save[i]);
    memcpy(n->tmp, tmp, sizeof n->tmp);
    T(G, out)->fn = id;
    T(G, out)->slot = 0;
}

void gg_split(gg *G, gg_t x, int n, gg_t *out)
{
    uint64_t part = T(G, x)->numel / (uint64_t)n;
    uint32_t id = 0;
    if (G->grad_mode && gg_requires_grad(G, x) && G->o.rc == GM_OK) {
        id = new_node(G);
        if (id) add_input(G, &G->nodes[id - 1], x);
    }
    for (int i = 0; i < n; i++) {
        gg_t h = handle(G);
        if (!h) return;
        gg_tensor *v = T(G, h);
        v->numel = part;
        v->dt = T(G, x)->dt;
        v->refs = 1;
        v->base = x;
        v->fn = id;
        v->slot = (uint8_t)i;
        T(G, x)->refs++;
        out[i] = h;
    }
}

void gg_record_inplace(gg *G, gg_t x, const gg_t *in, int nin, int save_out, int pass)
{
    if (!G->grad_mode || G->o.rc != GM_OK) return;
    int any = gg_requires_grad(G, x);
    for (int i = 0; i < nin; i++)
        any |= gg_requires_grad(G, in[i]);
    if (!any) return;
    uint32_t id = new_node(G);
    if (!id) return;
    gg_node *n = &G->nodes[id - 1];
    if (gg_requires_grad(G, x)) add_input(G, n, x);
    for (int i = 0; i < nin; i++)
        if (gg_requires_grad(G, in[i])) add_input(G, n, in[i]);
    if (save_out) add_saved(G, n, x);
    n->pass = (uint8_t)pass;
    T(G, x)->fn = id;
    T(G, x)->slot = 0;
}

void gg_workspace(gg *G, int thread)
{
    if (G->t->cublas_workspace && !G->workspace[thread].addr)
        G->workspace[thread] = gm_gen_alloc(&G->o, GG_CUBLAS_WORKSPACE_BYTES, GM_CAT_UNKNOWN);
}

/* ------------------------------------------------------------ autocast */

gg_t gg_weight(gg *G, int i)
{
    gg_param *p = &G->p[i];
    if (G->cdt == GG_F32 || G->t->zero == 3 || p->frozen) return p->h;
    if (p->cast && T(G, p->cast)->used) return gg_ref(G, p->cast);
    gg_t c = gg_new(G, p->numel, G->cdt); /* _to_copy, cached by autocast */
    gg_t in[1] = {p->h};
    gg_record(G, c, in, 1, NULL, 0, 0, 0);
    if (!G->t->autocast_cache) return c; /* the op's reference only */
    p->cast = c;                         /* the cache's reference */
    return gg_ref(G, c);
}

gg_t gg_autocast(gg *G, gg_t x)
{
    if (G->cdt == GG_F32 || T(G, x)->dt == G->cdt || T(G, x)->dt != GG_F32) return gg_ref(G, x);
    gg_t c = gg_new(G, T(G, x)->numel, G->cdt);
    gg_t in[1] = {x};
    gg_record(G, c, in, 1, NULL, 0, 0, 0);
    return c;
}

void gg_autocast_exit(gg *G)
{
    for (size_t i = 0; i < G->np; i++)
        if (G->p[i].cast) {
            gg_drop(G, G->p[i].cast);
            G->p[i].cast = 0;
        }
}

/* --------------------------------------------------------------- units */

static uint8_t gather_dt(const gg *G)
{
    return G->cdt; /* FSDP MixedPrecision(param_dtype): gathered in the compute dtype */
}

static void gather(gg *G, int u)
{
    gg_unit *U = &G->u[u];
    if (G->t->zero != 3 || U->gathered) return;
    U->gather = gm_gen_alloc(&G->o, U->numel * gather_dt(G), GM_CAT_TEMPORARY);
    U->gathered = 1;
}

static void reshard(gg *G, int u)
{
    gg_unit *U = &G->u[u];
    if (!U->gathered) return;
    gm_gen_free(&G->o, &U->gather);
    U->gathered = 0;
}

void gg_unit_begin(gg *G, int u)
{
    G->unit = u;
    gather(G, u);
}

void gg_unit_end(gg *G, int u)
{
    if (u != 0) reshard(G, u); /* the root stays gathered until backward is done */
    G->unit = 0;
}

/* ZeRO >= 2, end of unit u's backward: reduce-scatter the unsharded
 * gradients into the rank's shard (new, or added into the one kept from the
 * previous micro-batch) and free them. */
static void reduce_scatter(gg *G, int u)
{
    gg_unit *U = &G->u[u];
    int any = 0;
    for (size_t i = 0; i < G->np; i++)
        any |= G->p[i].unit == u && G->p[i].full;
    if (!any) return;
    if (!U->g.addr) {
        U->g = gm_gen_alloc(&G->o, U->shard * GG_F32, GM_CAT_GRADIENT);
    } else {
        gm_gen_tensor t = gm_gen_alloc(&G->o, U->shard * GG_F32, GM_CAT_AUTOGRAD_DETAIL);
        gm_gen_free(&G->o, &t);
    }
    for (size_t i = 0; i < G->np; i++)
        if (G->p[i].unit == u && G->p[i].full) {
            gg_drop(G, G->p[i].full);
            G->p[i].full = 0;
        }
}

/* The backward moves into the nodes of unit u. */
static void bwd_enter_unit(gg *G, int u)
{
    if (G->bwd_unit == u) return;
    if (G->bwd_unit > 0) {
        if (G->t->zero >= 2) reduce_scatter(G, G->bwd_unit);
        reshard(G, G->bwd_unit);
    }
    G->bwd_unit = u;
    gather(G, u);
}

/* ------------------------------------------------------------ backward */

/* Give gradient gr (one reference, moved in) to parameter i. */
static void accumulate_param(gg *G, int i, gg_t gr)
{
    gg_param *p = &G->p[i];
    if (p->frozen) {
        gg_drop(G, gr);
        return;
    }
    if (G->t->zero >= 2) { /* into the unsharded buffer of this backward */
        if (!p->full) {
            p->full = gr;
        } else {
            gm_gen_tick(&G->o, T(G, gr)->numel * T(G, gr)->dt);
            gg_drop(G, gr);
        }
        return;
    }
    if (!p->g.addr) {
        gg_tensor *x = T(G, gr);
        if (x->refs == 1) { /* AccumulateGrad steals it */
            gm_gen_set_category(&G->o, &x->m, GM_CAT_GRADIENT);
            p->g = x->m;
            release_handle(G, gr);
        } else { /* shared with another buffer: cloned */
            p->g = gm_gen_alloc(&G->o, x->numel * x->dt, GM_CAT_GRADIENT);
            gg_drop(G, gr);
        }
        return;
    }
    gm_gen_tick(&G->o, p->numel * GG_F32); /* .grad += new: in place */
    gg_drop(G, gr);
}

/* Add gradient gr (moved in) into output `slot` of node fn's gradient buffers. */
static void deliver(gg *G, uint32_t fn, int slot, int32_t param, gg_t gr)
{
    if (param >= 0) {
        accumulate_param(G, param, gr);
        return;
    }
    if (!fn) {
        gg_drop(G, gr);
        return;
    }
    gg_node *n = &G->nodes[fn - 1];
    if (!n->grad[slot]) {
        n->grad[slot] = gr;
        return;
    }
    gg_tensor *b = T(G, n->grad[slot]);
    if (b->refs == 1) { /* buffer += gr, in place */
        gm_gen_tick(&G->o, b->numel * b->dt);
        gg_drop(G, gr);
        return;
    }
    gg_t sum = new_tensor(G, b->numel, b->dt, GM_CAT_AUTOGRAD_DETAIL, 1);
    gg_drop(G, n->grad[slot]);
    gg_drop(G, gr);
    n->grad[slot] = sum;
}

static void run_range(gg *G, size_t lo, size_t hi);

static int has_grad(const gg_node *n)
{
    for (int i = 0; i < GG_MAX_OUT; i++)
        if (n->grad[i]) return 1;
    return 0;
}

static void drop_grads(gg *G, gg_node *n)
{
    for (int i = 0; i < GG_MAX_OUT; i++)
        if (n->grad[i]) {
            gg_drop(G, n->grad[i]);
            n->grad[i] = 0;
        }
}

static void drop_saved(gg *G, uint32_t k)
{
    gg_node *n = &G->nodes[k];
    int ns = n->nsaved;
    n->nsaved = 0;
    for (int i = 0; i < ns; i++)
        gg_drop(G, G->nodes[k].saved[i]);
}

/* Recompute checkpoint node k's chunk and run its backward. */
static void run_checkpoint(gg *G, uint32_t k)
{
    gg_node *n = &G->nodes[k];
    gg_t x = n->saved[0];
    gg_chunk_fn fn = n->ck_fn;
    void *ctx = n->ck_ctx;
    int chunk = n->chunk;
    /* x stands in for the detached input: its gradient is captured */
    uint32_t old_fn = T(G, x)->fn;
    uint8_t old_slot = T(G, x)->slot;
    uint32_t cap = new_node(G);
    if (!cap) return;
    G->nodes[cap - 1].kind = GG_NODE_CAPTURE;
    T(G, x)->fn = cap;
    T(G, x)->slot = 0;
    size_t start = G->nn;
    int old_mode = G->grad_mode, old_unit = G->unit;
    G->grad_mode = 1;
    G->recompute = 1;
    gg_t y = fn(G, ctx, chunk, x);
    gg_autocast_exit(G); /* the recompute runs in an autocast region of its own */
    G->recompute = 0;
    G->grad_mode = old_mode;
    G->unit = old_unit;
    if (G->o.rc != GM_OK) return;
    /* the chunk's output gets the checkpoint's output gradient */
    gg_t gy = G->nodes[k].grad[0];
    G->nodes[k].grad[0] = 0;
    if (T(G, y)->fn > start)
        G->nodes[T(G, y)->fn - 1].grad[T(G, y)->slot] = gy;
    else
        gg_drop(G, gy);
    gg_drop(G, y);
    run_range(G, start, G->nn);
    G->nn = start;
    gg_t dx = G->nodes[cap - 1].grad[0];
    G->nn = cap - 1; /* pop the capture node */
    T(G, x)->fn = old_fn;
    T(G, x)->slot = old_slot;
    gg_node *ck = &G->nodes[k];
    if (dx) deliver(G, ck->in_fn[0], ck->in_slot[0], ck->in_param[0], dx);
}

/* The gradient for input i of node k: the output gradient itself when the
 * op passes it through unchanged, else a new tensor of the input's size. */
static gg_t input_grad(gg *G, gg_node *n, int i)
{
    if (n->pass && n->grad[0] && n->in_bytes[i] == T(G, n->grad[0])->numel * T(G, n->grad[0])->dt)
        return gg_ref(G, n->grad[0]);
    return new_tensor(G, n->in_bytes[i], 1, GM_CAT_AUTOGRAD_DETAIL, 1);
}

/* Node k's backward. */
static void run_node(gg *G, uint32_t k)
{
    gg_node *n = &G->nodes[k];
    if (n->kind == GG_NODE_CAPTURE) return;
    if (G->t->zero >= 2) bwd_enter_unit(G, n->unit);
    if (n->kind == GG_NODE_CHECKPOINT) {
        if (has_grad(n)) run_checkpoint(G, k);
        drop_saved(G, k);
        return;
    }
    if (has_grad(n)) {
        gm_gen_tensor tmp[GG_MAX_TMP];
        memset(tmp, 0, sizeof tmp);
        for (int i = 0; i < GG_MAX_TMP; i++)
            if (n->tmp[i]) tmp[i] = gm_gen_alloc(&G->o, n->tmp[i], GM_CAT_AUTOGRAD_DETAIL);
        int nin = n->nin;
        for (int i = 0; i < nin && G->o.rc == GM_OK; i++) {
            n = &G->nodes[k];
            gg_t gr = input_grad(G, n, i);
            if (!gr) return;
            n = &G->nodes[k];
            deliver(G, n->in_fn[i], n->in_slot[i], n->in_param[i], gr);
        }
        for (int i = 0; i < GG_MAX_TMP; i++)
            if (tmp[i].addr) gm_gen_free(&G->o, &tmp[i]);
        drop_grads(G, &G->nodes[k]);
    }
    drop_saved(G, k);
}

static void run_range(gg *G, size_t lo, size_t hi)
{
    for (size_t k = hi; k > lo && G->o.rc == GM_OK; k--)
        run_node(G, (uint32_t)(k - 1));
}

void gg_backward(gg *G, gg_t loss)
{
    if (!T(G, loss)->fn) return;
    G->bwd_unit = -1;
    /* torch.ones_like(loss) */
    gg_t one = new_tensor(G, T(G, loss)->numel, T(G, loss)->dt, GM_CAT_AUTOGRAD_DETAIL, 1);
    G->nodes[T(G, loss)->fn - 1].grad[T(G, loss)->slot] = one;
    gg_workspace(G, 1); /* autograd's thread: its own cuBLAS handle */
    run_range(G, 0, G->nn);
    if (G->t->zero >= 2) {
        for (int u = G->nu - 1; u >= 0; u--)
            reduce_scatter(G, u);
    }
    for (int u = 0; u < G->nu; u++)
        reshard(G, u);
    G->bwd_unit = -1;
    G->nn = 0;
    T(G, loss)->fn = 0;
}

void gg_graph_clear(gg *G)
{
    for (size_t k = G->nn; k > 0; k--) {
        drop_grads(G, &G->nodes[k - 1]);
        drop_saved(G, (uint32_t)(k - 1));
    }
    G->nn = 0;
}

/* ---------------------------------------------------------- checkpoint */

gg_t gg_checkpoint(gg *G, gg_chunk_fn fn, void *ctx, int chunk, gg_t x)
{
    if (!G->grad_mode || G->recompute) return fn(G, ctx, chunk, x);
    G->grad_mode = 0; /* the chunk runs under no_grad */
    gg_t y = fn(G, ctx, chunk, x);
    G->grad_mode = 1;
    if (G->o.rc != GM_OK) return y;
    if (!gg_requires_grad(G, x)) return y;
    uint32_t id = new_node(G);
    if (!id) return y;
    gg_node *n = &G->nodes[id - 1];
    n->kind = GG_NODE_CHECKPOINT;
    add_input(G, n, x);
    add_saved(G, n, x);
    for (int i = 0; i < G->n_ck_keep; i++)
        add_saved(G, n, G->ck_keep[i]);
    n->ck_fn = fn;
    n->ck_ctx = ctx;
    n->chunk = chunk;
    T(G, y)->fn = id;
    return y;
}

static gg_t chunk_layers(gg *G, void *ctx, int chunk, gg_t x)
{
    (void)ctx;
    int k = G->t->checkpoint ? G->t->checkpoint : G->blk_layers;
    int lo = chunk * k, hi = lo + k < G->blk_layers ? lo + k : G->blk_layers;
    gg_t y = gg_ref(G, x);
    for (int l = lo; l < hi && G->o.rc == GM_OK; l++) {
        gg_t z = G->blk(G, G->blk_ctx, l, y);
        gg_drop(G, y);
        y = z;
    }
    return y;
}

gg_t gg_layers(gg *G, gg_block_fn block, void *ctx, int n, gg_t x)
{
    G->blk = block;
    G->blk_ctx = ctx;
    G->blk_layers = n;
    int k = G->t->checkpoint;
    if (!k) return chunk_layers(G, NULL, 0, x);
    int nchunks = (n + k - 1) / k;
    gg_t y = gg_ref(G, x);
    for (int c = 0; c < nchunks && G->o.rc == GM_OK; c++) {
        gg_t z = gg_checkpoint(G, chunk_layers, NULL, c, y);
        gg_drop(G, y);
        y = z;
    }
    return y;
}
