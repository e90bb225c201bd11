/* fidelity.c - replay a trace through the pytorch model and compare its
 * driver calls with the recorded ones; see fidelity.h. */
#include "fidelity.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simulate.h"
#include "sim/device.h"
#include "sim/engine.h"
#include "traces/trace.h"

/* ---------------- a simulated GPU that hands out the recorded addresses ---------------- */

typedef struct span {
    uint64_t addr, size;
} span;

typedef struct fdev {
    gm_device base;
    const span *queue; /* addresses to hand out, in the order the model should ask */
    size_t nq, qpos;
    span *live; /* ranges handed out and not freed */
    size_t nlive, clive;
    uint64_t next_fresh;
    int fresh_only;
} fdev;

static int overlaps_live(const fdev *f, uint64_t addr, uint64_t size)
{
    for (size_t i = 0; i < f->nlive; i++)
        if (addr < f->live[i].addr + f->live[i].size && f->live[i].addr < addr + size) return 1;
    return 0;
}

static uint64_t fresh(fdev *f, uint64_t bytes)
{
    uint64_t va = f->next_fresh;
    f->next_fresh += gm_device_round(bytes);
    return va;
}

static int f_alloc(gm_device *d, uint64_t bytes, uint64_t *dptr, uint64_t *cost_ns)
{
    fdev *f = d->impl;
    *cost_ns = 0;
    if (gm_device_take(d, bytes) != GM_OK) return GM_EOOM;
    const span *q = f->qpos < f->nq ? &f->queue[f->qpos] : NULL;
    if (!f->fresh_only && q && q->size == bytes && !overlaps_live(f, q->addr, bytes)) {
        *dptr = q->addr;
        f->qpos++;
    } else {
        *dptr = fresh(f, bytes);
    }
    if (f->nlive == f->clive) {
        size_t n = f->clive ? f->clive * 2 : 256;
        span *p = realloc(f->live, n * sizeof *p);
        if (!p) {
            gm_device_give(d, bytes);
            return GM_EOOM;
        }
        f->live = p;
        f->clive = n;
    }
    f->live[f->nlive++] = (span){*dptr, bytes};
    return GM_OK;
}

static void f_free(gm_device *d, uint64_t dptr, uint64_t bytes, uint64_t *cost_ns)
{
    fdev *f = d->impl;
    *cost_ns = 0;
    gm_device_give(d, bytes);
    for (size_t i = 0; i < f->nlive; i++)
        if (f->live[i].addr == dptr) {
            f->live[i] = f->live[--f->nlive];
            break;
        }
}

static int f_va_reserve(gm_device *d, uint64_t bytes, uint64_t *va)
{
    *va = fresh(d->impl, bytes);
    return GM_OK;
}

static void f_va_release(gm_device *d, uint64_t va, uint64_t bytes)
{
    (void)d, (void)va, (void)bytes;
}

static int f_map(gm_device *d, uint64_t va, uint64_t bytes, uint64_t *cost_ns)
{
    (void)va;
    *cost_ns = 0;
    return gm_device_take(d, bytes);
}

static void f_unmap(gm_device *d, uint64_t va, uint64_t bytes, uint64_t *cost_ns)
{
    (void)va;
    *cost_ns = 0;
    gm_device_give(d, bytes);
}

static void f_destroy(gm_device *d)
{
    (void)d; /* owned by gm_fidelity_check */
}

static const gm_device_ops fdev_ops = {
    .name = "fidelity",
    .mem_alloc = f_alloc,
    .mem_free = f_free,
    .va_reserve = f_va_reserve,
    .va_release = f_va_release,
    .mem_map = f_map,
    .mem_unmap = f_unmap,
    .destroy = f_destroy,
};

/* ---------------- reading the recorded side ---------------- */

typedef struct recorded {
    gm_fid_call *rec;
    size_t n, cap;
    span *queue; /* initial segments by address, then recorded segment_allocs */
    size_t nq, qcap;
    uint64_t n_events, capacity, max_end;
    char alloc_conf[256];
} recorded;

static int push_call(gm_fid_call **v, size_t *n, size_t *cap, const gm_fid_call *c)
{
    if (*n == *cap) {
        size_t m = *cap ? *cap * 2 : 64;
        gm_fid_call *p = realloc(*v, m * sizeof *p);
        if (!p) return GM_ENOMEM;
        *v = p;
        *cap = m;
    }
    (*v)[(*n)++] = *c;
    return GM_OK;
}

static int cmp_span(const void *x, const void *y)
{
    uint64_t a = ((const span *)x)->addr, b = ((const span *)y)->addr;
    return a < b ? -1 : a > b;
}

/* Initial segments, sorted by address (the order pt_restore allocates them). */
static int read_initial(gm_trace_reader *r, recorded *rc, gm_fidelity *out, gm_err *err)
{
    gm_init_row *rows;
    size_t n;
    if (gm_trace_read_initial(r, &rows, &n, err)) return err->code;
    rc->qcap = n + 1;
    rc->queue = malloc(rc->qcap * sizeof *rc->queue);
    if (!rc->queue) {
        free(rows);
        return gm_errf(err, GM_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        if (rows[i].kind != GM_INIT_SEGMENT) continue;
        rc->queue[rc->nq++] = (span){rows[i].addr, rows[i].size};
        out->init_segments++;
        out->init_reserved += rows[i].size;
        if (rows[i].addr + rows[i].size > rc->max_end) rc->max_end = rows[i].addr + rows[i].size;
    }
    qsort(rc->queue, rc->nq, sizeof *rc->queue, cmp_span);
    free(rows);
    return GM_OK;
}

/* One event of the trace: a segment row is recorded (and its address queued
 * for the model); an alloc/free is the event the pending rows belong to. */
static int record_row(recorded *rc, const gm_event *e, uint64_t idx, size_t *pending)
{
    if (e->op == GM_OP_ALLOC || e->op == GM_OP_FREE) {
        for (; *pending; (*pending)--)
            rc->rec[rc->n - *pending].event_index = idx;
        return GM_OK;
    }
    gm_fid_call c = {.event_index = idx, .size = e->size, .addr = e->addr, .op = e->op};
    if (push_call(&rc->rec, &rc->n, &rc->cap, &c)) return GM_ENOMEM;
    (*pending)++;
    if (e->op != GM_OP_SEGMENT_ALLOC) return GM_OK;
    if (rc->nq == rc->qcap) {
        size_t n = rc->qcap ? rc->qcap * 2 : 64;
        span *q = realloc(rc->queue, n * sizeof *q);
        if (!q) return GM_ENOMEM;
        rc->queue = q;
        rc->qcap = n;
    }
    rc->queue[rc->nq++] = (span){e->addr, e->size};
    if (e->addr + e->size > rc->max_end) rc->max_end = e->addr + e->size;
    return GM_OK;
}

/* Recorded segment rows, attributed to the next alloc/free event. */
static int read_recorded(const char *path, recorded *rc, gm_fidelity *out, gm_err *err)
{
    gm_trace_reader *r;
    if (gm_trace_open(path, &r, err)) return err->code;
    const gm_trace_meta *m = gm_trace_meta_get(r);
    rc->capacity = m->device_total_bytes;
    snprintf(rc->alloc_conf, sizeof rc->alloc_conf, "%s", m->alloc_conf ? m->alloc_conf : "");
    int code = read_initial(r, rc, out, err);
    gm_event *buf = code ? NULL : malloc(GM_TRACE_CHUNK_EVENTS * sizeof *buf);
    size_t pending = 0; /* segment rows still waiting for their event */
    uint64_t idx = 0;
    int64_t got = 0;
    if (!code && !buf) code = GM_ENOMEM;
    while (!code && (got = gm_trace_read(r, buf, GM_TRACE_CHUNK_EVENTS, err)) > 0)
        for (int64_t i = 0; i < got && !code; i++, idx++)
            code = record_row(rc, &buf[i], idx, &pending);
    if (!code && got < 0)
        code = (int)got; /* err is set by the reader */
    else if (code == GM_ENOMEM)
        gm_errf(err, code, "out of memory reading %s", path);
    for (; pending; pending--) /* segment rows after the last event: at the end */
        rc->rec[rc->n - pending].event_index = idx;
    rc->n_events = idx;
    free(buf);
    gm_trace_close(r);
    return code;
}

/* ---------------- the model side ---------------- */

typedef struct hook_state {
    gm_fidelity *f;
    size_t cap;
    int oom;
    gm_seg_info *segs; /* scratch for locating a placement mismatch */
    size_t nsegs;
} hook_state;

static void seg_hook(void *ctx, int tenant, uint64_t event_index, const gm_seg_event *ev)
{
    hook_state *h = ctx;
    (void)tenant;
    if (event_index == UINT64_MAX) { /* rebuilding /initial_state */
        h->f->model_init_calls++;
        return;
    }
    gm_fid_call c = {
        .event_index = event_index, .size = ev->size, .addr = ev->addr, .op = (uint8_t)ev->op};
    if (push_call(&h->f->ours, &h->f->n_ours, &h->cap, &c)) h->oom = 1;
}

/* The model segment holding addr (the model's segments are PyTorch's when
 * addresses are replayed). */
static gm_fid_where where(hook_state *h, gm_alloc *a, uint64_t addr)
{
    gm_fid_where w = {.addr = addr};
    size_t n = gm_alloc_segments(a, h->segs, h->nsegs);
    if (n > h->nsegs) {
        gm_seg_info *p = realloc(h->segs, n * sizeof *p);
        if (!p) return w;
        h->segs = p;
        h->nsegs = n;
        n = gm_alloc_segments(a, h->segs, h->nsegs);
    }
    for (size_t i = 0; i < n && i < h->nsegs; i++)
        if (addr >= h->segs[i].addr && addr < h->segs[i].addr + h->segs[i].size) {
            w.seg_addr = h->segs[i].addr;
            w.seg_size = h->segs[i].size;
            break;
        }
    return w;
}

static void alloc_hook(void *ctx, int tenant, uint64_t event_index, const gm_event *ev, gm_alloc *a,
                       uint64_t handle)
{
    hook_state *h = ctx;
    gm_fidelity *f = h->f;
    (void)tenant;
    uint64_t ours = a->ops->block_addr(a, handle);
    f->placed++;
    if (ours == ev->addr) {
        f->placed_same++;
        return;
    }
    if (f->place_diverged) return;
    f->place_diverged = 1;
    f->place_event = event_index;
    f->place_size = ev->size;
    f->place_ours = where(h, a, ours);
    f->place_theirs = where(h, a, ev->addr);
}

static int replay(const char *path, const recorded *rc, const gm_fidelity_opts *o, gm_fidelity *f,
                  gm_err *err)
{
    fdev dev = {.queue = rc->queue, .nq = rc->nq, .fresh_only = o && o->fresh_addresses};
    dev.next_fresh = (rc->max_end + GM_GiB) & ~(GM_DRIVER_GRANULARITY - 1);
    if (dev.next_fresh < 0x7f0000000000ull) dev.next_fresh = 0x7f0000000000ull;
    dev.base.ops = &fdev_ops;
    dev.base.impl = &dev;
    dev.base.capacity_bytes = f->capacity_bytes;
    gm_tenant_spec spec = {.path = path, .repeat = 1};
    hook_state hs = {.f = f};
    gm_sim_config cfg = {.tenants = &spec,
                         .n_tenants = 1,
                         .allocator = "pytorch",
                         .alloc_conf = f->alloc_conf,
                         .device = &dev.base,
                         .on_oom_skip = 1,
                         .seg_hook = seg_hook,
                         .seg_hook_ctx = &hs};
    if (!dev.fresh_only) {
        f->placement_checked = 1;
        cfg.alloc_hook = alloc_hook;
        cfg.alloc_hook_ctx = &hs;
    }
    gm_latency lat = GM_LATENCY_DEFAULT;
    cfg.latency = lat;
    gm_sim_result *res = NULL;
    int code = gm_simulate(&cfg, &res, err);
    if (code == GM_OK) {
        f->model_ooms = res->t[0].m.n_oom;
        gm_sim_result_free(res);
    }
    free(dev.live);
    free(hs.segs);
    if (code == GM_OK && hs.oom) code = gm_errf(err, GM_ENOMEM, "out of memory");
    return code;
}

/* ---------------- comparison ---------------- */

static void match_group(gm_fidelity *f, size_t i0, size_t i1, size_t j0, size_t j1)
{
    for (size_t i = i0; i < i1; i++)
        for (size_t j = j0; j < j1; j++)
            if (!f->ours[j].matched && f->ours[j].op == f->rec[i].op &&
                f->ours[j].size == f->rec[i].size) {
                f->rec[i].matched = f->ours[j].matched = 1;
                f->matched++;
                break;
            }
}

static int64_t signed_size(const gm_fid_call *c)
{
    return c->op == GM_OP_SEGMENT_ALLOC ? (int64_t)c->size : -(int64_t)c->size;
}

static void compare(gm_fidelity *f)
{
    size_t i = 0, j = 0;
    int64_t r_rec = (int64_t)f->init_reserved, r_our = (int64_t)f->init_reserved;
    f->max_err_event = UINT64_MAX;
    while (i < f->n_rec || j < f->n_ours) {
        uint64_t e = UINT64_MAX;
        if (i < f->n_rec) e = f->rec[i].event_index;
        if (j < f->n_ours && f->ours[j].event_index < e) e = f->ours[j].event_index;
        size_t i1 = i, j1 = j;
        while (i1 < f->n_rec && f->rec[i1].event_index == e)
            r_rec += signed_size(&f->rec[i1++]);
        while (j1 < f->n_ours && f->ours[j1].event_index == e)
            r_our += signed_size(&f->ours[j1++]);
        uint64_t before = f->matched;
        match_group(f, i, i1, j, j1);
        uint64_t m = f->matched - before;
        f->missing += (i1 - i) - m;
        f->extra += (j1 - j) - m;
        if (!f->diverged && (m < i1 - i || m < j1 - j)) {
            f->diverged = 1;
            f->div_event = e;
        }
        uint64_t d = (uint64_t)(r_rec > r_our ? r_rec - r_our : r_our - r_rec);
        if (d > f->max_reserved_err) {
            f->max_reserved_err = d;
            f->max_err_event = e;
        }
        i = i1;
        j = j1;
    }
}

/* The op and size of event `index` (for the divergence message). */
static void divergence_event(const char *path, gm_fidelity *f)
{
    gm_trace_reader *r;
    gm_err err;
    gm_event buf[1024];
    if (!f->diverged || f->div_event >= f->n_events || gm_trace_open(path, &r, &err)) return;
    uint64_t idx = 0;
    int64_t got;
    while ((got = gm_trace_read(r, buf, 1024, &err)) > 0) {
        if (f->div_event < idx + (uint64_t)got) {
            f->div_op = buf[f->div_event - idx].op;
            f->div_size = buf[f->div_event - idx].size;
            break;
        }
        idx += (uint64_t)got;
    }
    gm_trace_close(r);
}

int gm_fidelity_check(const char *path, const gm_fidelity_opts *o, gm_fidelity *f, gm_err *err)
{
    recorded rc = {0};
    memset(f, 0, sizeof *f);
    int code = read_recorded(path, &rc, f, err);
    if (code == GM_OK) {
        f->rec = rc.rec;
        f->n_rec = rc.n;
        rc.rec = NULL;
        f->n_events = rc.n_events;
        f->fresh_addresses = o && o->fresh_addresses;
        f->capacity_bytes = o && o->capacity_bytes ? o->capacity_bytes
                            : rc.capacity          ? rc.capacity
                                                   : GM_FIDELITY_CAPACITY;
        snprintf(f->alloc_conf, sizeof f->alloc_conf, "%s",
                 o && o->alloc_conf ? o->alloc_conf : rc.alloc_conf);
        code = replay(path, &rc, o, f, err);
    }
    free(rc.rec);
    free(rc.queue);
    if (code != GM_OK) {
        gm_fidelity_free(f);
        return code;
    }
    compare(f);
    divergence_event(path, f);
    return GM_OK;
}

void gm_fidelity_free(gm_fidelity *f)
{
    free(f->rec);
    free(f->ours);
    f->rec = f->ours = NULL;
    f->n_rec = f->n_ours = 0;
}
