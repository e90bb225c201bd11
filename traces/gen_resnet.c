/*
 * gen_resnet.c - synthetic ResNet-50 training or inference trace; see
 * gen_resnet.h for the model and traces/GENERATORS.md for every tensor.
 */
#include "gen_resnet.h"
#include "gen_graph.h"
#include "gen_ops.h"

#include <stdio.h>
#include <string.h>

/* torchvision resnet50: blocks per stage and the stage widths (planes). */
static const int stage_blocks[4] = {3, 4, 6, 3};
static const int stage_planes[4] = {64, 128, 256, 512};
#define EXPANSION 4
#define NBLOCKS 16

void gm_resnet_defaults(gm_resnet_params *p)
{
    memset(p, 0, sizeof *p);
    gm_train_defaults(&p->t);
    p->t.batch = 32;
    p->t.optimizer = GM_OPT_SGD;
    p->resolution = 224;
    p->classes = 1000;
}

int gm_resnet_check(const gm_resnet_params *p, gm_err *err)
{
    int rc;
    if ((rc = gm_gen_check_range("resnet50", "resolution", p->resolution, 32, 1 << 14, err)) ||
        (rc = gm_gen_check_range("resnet50", "classes", p->classes, 1, 1 << 24, err)) ||
        (rc = gm_train_check("resnet50", &p->t, NBLOCKS, err)))
        return rc;
    uint64_t B = (uint64_t)p->t.batch, R = (uint64_t)p->resolution;
    return gm_gen_check_bytes("resnet50", "stem", B, 64, R / 2, R / 2, 8, err);
}

/* A conv's output size: (in + 2 pad - k) / stride + 1. */
static uint64_t conv_out(uint64_t in, int k, int stride, int pad)
{
    return (in + 2 * (uint64_t)pad - (uint64_t)k) / (uint64_t)stride + 1;
}

/* Parameters of one conv + BatchNorm (its two parameters, three buffers). */
static uint64_t conv_bn_params(uint64_t cin, uint64_t cout, int k)
{
    return cin * cout * (uint64_t)(k * k) + 2 * cout;
}

uint64_t gm_resnet_param_count(const gm_resnet_params *p)
{
    uint64_t n = conv_bn_params(3, 64, 7), in = 64;
    for (int s = 0; s < 4; s++) {
        uint64_t planes = (uint64_t)stage_planes[s], out = planes * EXPANSION;
        for (int b = 0; b < stage_blocks[s]; b++) {
            n += conv_bn_params(in, planes, 1) + conv_bn_params(planes, planes, 3) +
                 conv_bn_params(planes, out, 1);
            if (b == 0) n += conv_bn_params(in, out, 1);
            in = out;
        }
    }
    return n + in * (uint64_t)p->classes + (uint64_t)p->classes;
}

void gm_resnet_describe(const gm_resnet_params *p, char *buf, size_t len)
{
    char train[512];
    gm_train_describe(&p->t, train, sizeof train);
    snprintf(buf, len, "ResNet-50 (torchvision resnet50) resolution=%d classes=%d params=%llu; %s",
             p->resolution, p->classes, (unsigned long long)gm_resnet_param_count(p), train);
}

/* ------------------------------------------------------------- the model */

/* One conv + BN as registered: the conv weight, then BN weight and bias,
 * then its buffers. */
typedef struct convbn {
    int w, bn_w, bn_b;
    uint64_t cin, cout;
    int k, stride;
} convbn;

typedef struct block_def {
    convbn c1, c2, c3, ds;
    int has_ds;
    uint64_t hin, hout; /* spatial size in and out */
} block_def;

typedef struct resnet {
    const gm_resnet_params *p;
    uint64_t B, R;
    convbn stem;
    block_def blocks[NBLOCKS];
    int fc_w, fc_b;
} resnet;

static convbn add_convbn(gg *G, uint64_t cin, uint64_t cout, int k, int stride, int unit)
{
    convbn c = {0, 0, 0, cin, cout, k, stride};
    c.w = gg_param_add(G, cin * cout * (uint64_t)(k * k), unit, 0);
    c.bn_w = gg_param_add(G, cout, unit, 0);
    c.bn_b = gg_param_add(G, cout, unit, 0);
    gg_param_add(G, cout, unit, 1); /* running_mean */
    gg_param_add(G, cout, unit, 1); /* running_var */
    gg_param_add(G, 2, unit, 1);    /* num_batches_tracked: one int64 */
    return c;
}

static void build(gg *G, void *ctx)
{
    resnet *m = ctx;
    uint64_t h = conv_out(m->R, 7, 2, 3);
    m->stem = add_convbn(G, 3, 64, 7, 2, 0);
    h = conv_out(h, 3, 2, 1); /* maxpool */
    uint64_t in = 64;
    int n = 0;
    for (int s = 0; s < 4; s++) {
        uint64_t planes = (uint64_t)stage_planes[s], out = planes * EXPANSION;
        for (int b = 0; b < stage_blocks[s]; b++, n++) {
            block_def *d = &m->blocks[n];
            int stride = s > 0 && b == 0 ? 2 : 1;
            d->hin = h;
            d->hout = conv_out(h, 3, stride, 1);
            d->c1 = add_convbn(G, in, planes, 1, 1, n + 1);
            d->c2 = add_convbn(G, planes, planes, 3, stride, n + 1);
            d->c3 = add_convbn(G, planes, out, 1, 1, n + 1);
            d->has_ds = b == 0;
            if (d->has_ds) d->ds = add_convbn(G, in, out, 1, stride, n + 1);
            in = out;
            h = d->hout;
        }
    }
    m->fc_w = gg_param_add(G, in * (uint64_t)m->p->classes, 0, 0);
    m->fc_b = gg_param_add(G, (uint64_t)m->p->classes, 0, 0);
}

static int batch(gg *G, void *ctx, gg_t *in)
{
    resnet *m = ctx;
    in[0] = gg_new_fixed(G, m->B * 3 * m->R * m->R, GG_F32, GM_CAT_INPUT); /* images */
    in[1] = gg_new_fixed(G, m->B, GG_I64, GM_CAT_INPUT);                   /* labels */
    return 2;
}

/* conv -> BN: returns the BN output (the conv output is dropped). */
static gg_t conv_bn(gg *G, const resnet *m, const convbn *c, gg_t x, uint64_t hout)
{
    gg_t y = gg_conv2d(G, x, m->B * c->cout * hout * hout, c->w);
    gg_t b = gg_batchnorm(G, y, c->cout, c->bn_w, c->bn_b);
    gg_drop(G, y);
    return b;
}

static gg_t block(gg *G, void *ctx, int n, gg_t x)
{
    resnet *m = ctx;
    const block_def *d = &m->blocks[n];
    gg_unit_begin(G, n + 1);
    gg_t o1 = conv_bn(G, m, &d->c1, x, d->hin);
    gg_relu_(G, o1);
    gg_t o2 = conv_bn(G, m, &d->c2, o1, d->hout);
    gg_drop(G, o1);
    gg_relu_(G, o2);
    gg_t o3 = conv_bn(G, m, &d->c3, o2, d->hout);
    gg_drop(G, o2);
    gg_t idn = d->has_ds ? conv_bn(G, m, &d->ds, x, d->hout) : gg_ref(G, x);
    gg_add_(G, o3, idn); /* out += identity */
    gg_drop(G, idn);
    gg_relu_(G, o3);
    gg_unit_end(G, n + 1);
    return o3;
}

static gg_t forward(gg *G, void *ctx, const gg_t *in, gg_t *keep)
{
    resnet *m = ctx;
    gg_unit_begin(G, 0);
    uint64_t h = conv_out(m->R, 7, 2, 3), hp = conv_out(h, 3, 2, 1);
    gg_t s = conv_bn(G, m, &m->stem, in[0], h);
    gg_relu_(G, s);
    gg_t x = gg_maxpool(G, s, m->B * 64 * hp * hp);
    gg_drop(G, s);
    gg_t y = gg_layers(G, block, m, NBLOCKS, x);
    gg_drop(G, x);
    G->unit = 0;
    uint64_t C = (uint64_t)stage_planes[3] * EXPANSION;
    gg_t pooled = gg_reduce(G, y, m->B * C, gg_dt(G, y)); /* adaptive_avg_pool2d + flatten */
    gg_drop(G, y);
    gg_t logits = gg_linear(G, pooled, m->B, C, (uint64_t)m->p->classes, m->fc_w, m->fc_b);
    gg_drop(G, pooled);
    *keep = logits;
    if (m->p->t.mode == GM_MODE_INFER) return 0;
    gg_t loss = gg_cross_entropy(G, logits, in[1], m->B, (uint64_t)m->p->classes);
    gg_unit_end(G, 0);
    return loss;
}

int gm_resnet_generate(const gm_resnet_params *p, gm_gen_event_sink sink, gm_gen_marker_sink marks,
                       void *ctx, gm_gen_stats *stats, gm_err *err)
{
    int rc = gm_resnet_check(p, err);
    if (rc != GM_OK) return rc;
    resnet m;
    memset(&m, 0, sizeof m);
    m.p = p;
    m.B = (uint64_t)p->t.batch;
    m.R = (uint64_t)p->resolution;
    const gg_model model = {build, batch, forward, 0};
    return gg_run("gen_resnet", &p->t, &model, &m, sink, marks, ctx, stats, err);
}

static int generate_fn(const void *params, gm_gen_event_sink sink, gm_gen_marker_sink marks,
                       void *ctx, gm_gen_stats *stats, gm_err *err)
{
    return gm_resnet_generate(params, sink, marks, ctx, stats, err);
}

int gm_resnet_write_trace(const char *path, const gm_resnet_params *p,
                          const gm_trace_write_opts *opts, const char *command, gm_gen_stats *stats,
                          gm_err *err)
{
    int rc = gm_resnet_check(p, err);
    if (rc != GM_OK) return rc;
    char workload[1024];
    gm_resnet_describe(p, workload, sizeof workload);
    gm_gen_file f = {"synthetic:resnet50", workload, p->t.device_total_bytes, command};
    return gm_gen_write_trace(path, &f, opts, generate_fn, p, stats, err);
}
