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

/* ---------------- reading the recorded side ---------------- */

typedef struct span {
    uint64_t addr, size;
} span;

typedef struct recorded {
    gm_fid_call *rec; /* segment rows, attributed to their event, in order */
    size_t n, cap;
    span *init;  /* initial classic segments, by address (restore order) */
    span *vinit; /* initial expandable segments' address ranges, by address */
    size_t ninit, nvinit;
    uint64_t n_events, max_end;
    uint64_t capacity, avail_min, avail_max;
    char capacity_source[160];
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

static void note_end(recorded *rc, uint64_t addr, uint64_t size)
{
    if (addr + size > rc->max_end) rc->max_end = addr + size;
}

/* Initial segments, sorted by address (the order pt_restore rebuilds them). */
static int read_initial(gm_trace_reader *r, recorded *rc, gm_fidelity *out, gm_err *err)
{
    gm_init_row *rows;
    size_t n;
    if (gm_trace_read_initial(r, &rows, &n, err)) return err->code;
    rc->init = malloc((n + 1) * sizeof *rc->init);
    rc->vinit = malloc((n + 1) * sizeof *rc->vinit);
    if (!rc->init || !rc->vinit) {
        free(rows);
        return gm_errf(err, GM_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        const gm_init_row *w = &rows[i];
        if (w->kind == GM_INIT_MAPPED) out->init_reserved += w->size;
        if (w->kind != GM_INIT_SEGMENT) continue;
        out->init_segments++;
        note_end(rc, w->addr, w->size);
        if (w->expandable) {
            rc->vinit[rc->nvinit++] = (span){w->addr, w->size};
            out->init_expandable++;
        } else {
            rc->init[rc->ninit++] = (span){w->addr, w->size};
            out->init_reserved += w->size;
        }
    }
    if (rc->ninit > 1) qsort(rc->init, rc->ninit, sizeof *rc->init, cmp_span);
    if (rc->nvinit > 1) qsort(rc->vinit, rc->nvinit, sizeof *rc->vinit, cmp_span);
    free(rows);
    return GM_OK;
}

/* Events that recorded segment rows belong to: the replay acts at them. */
static int is_event(int op)
{
    return op == GM_OP_ALLOC || op == GM_OP_FREE || op == GM_OP_EMPTY_CACHE || op == GM_OP_OOM;
}

/* One event of the trace: a segment row is recorded (attributed later); an
 * event is what the pending rows belong to. */
static int record_row(recorded *rc, gm_fidelity *f, const gm_event *e, uint64_t idx,
                      size_t *pending)
{
    if (e->op == GM_OP_FREE_REQUESTED) return GM_OK; /* no driver call, nothing placed */
    if (is_event(e->op)) {
        for (; *pending; (*pending)--)
            rc->rec[rc->n - *pending].event_index = idx;
        f->rec_ooms += e->op == GM_OP_OOM;
        return GM_OK;
    }
    gm_fid_call c = {.event_index = idx, .size = e->size, .addr = e->addr, .op = e->op};
    if (push_call(&rc->rec, &rc->n, &rc->cap, &c)) return GM_ENOMEM;
    (*pending)++;
    if (gm_op_grows(e->op)) note_end(rc, e->addr, e->size);
    return GM_OK;
}

static void capacity_of(const gm_trace_meta *m, recorded *rc)
{
    rc->avail_min = m->device_avail_min_bytes;
    rc->avail_max = m->device_avail_max_bytes;
    if (m->device_avail_bytes) {
        rc->capacity = m->device_avail_bytes;
        snprintf(rc->capacity_source, sizeof rc->capacity_source,
                 "the memory the recorded process had (%s)",
                 m->device_avail_source && *m->device_avail_source ? m->device_avail_source
                                                                   : "device_avail_bytes");
    } else if (m->device_total_bytes) {
        rc->capacity = m->device_total_bytes;
        snprintf(rc->capacity_source, sizeof rc->capacity_source, "the trace's device_total_bytes");
    }
}

/* Recorded segment rows, attributed to the next event. */
static int read_recorded(const char *path, recorded *rc, gm_fidelity *out, gm_err *err)
{
    gm_trace_reader *r;
    if (gm_trace_open(path, &r, err)) return err->code;
    const gm_trace_meta *m = gm_trace_meta_get(r);
    capacity_of(m, rc);
    snprintf(rc->alloc_conf, sizeof rc->alloc_conf, "%s", m->alloc_conf ? m->alloc_conf : "");
    int code = read_initial(r, rc, out, err);
    gm_event *buf = code ? NULL : malloc(GM_TRACE_CHUNK_EVENTS * sizeof *buf);
    size_t pending = 0; /* segment rows still waiting for their event */
    uint64_t idx = 0;
    int64_t got = 0;
    if (!code && !buf) code = GM_ENOMEM;
    while (!code && (got = gm_trace_read(r, buf, GM_TRACE_CHUNK_EVENTS, err)) > 0)
        for (int64_t i = 0; i < got && !code; i++, idx++) {
            code = record_row(rc, out, &buf[i], idx, &pending);
            out->empty_caches += buf[i].op == GM_OP_EMPTY_CACHE;
        }
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

/* ---------------- a simulated GPU that hands out the recorded addresses ---------------- */

typedef struct fdev {
    gm_device base;
    const recorded *rc;
    uint8_t *claimed; /* rc->rec[i] handed out already */
    size_t iq, ivq;   /* restore: next initial segment / expandable range */
    uint64_t cur;     /* event being replayed; UINT64_MAX while restoring */
    size_t cur_first; /* first rc->rec row of event `cur` or later */
    span *live;       /* ranges handed out and not freed */
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

/* Event k starts: its recorded rows are the ones to hand out now. */
static void fdev_event(fdev *f, uint64_t k)
{
    f->cur = k;
    while (f->cur_first < f->rc->n && f->rc->rec[f->cur_first].event_index < k)
        f->cur_first++;
}

/* An unclaimed recorded row of the current event with this op (and size,
 * unless size is 0) that no live range overlaps; SIZE_MAX if none. */
static size_t find_row(const fdev *f, int op, uint64_t size)
{
    for (size_t i = f->cur_first; i < f->rc->n && f->rc->rec[i].event_index == f->cur; i++) {
        const gm_fid_call *c = &f->rc->rec[i];
        if (f->claimed[i] || c->op != op || (size && c->size != size)) continue;
        if (op == GM_OP_SEGMENT_ALLOC && overlaps_live(f, c->addr, size)) continue;
        return i;
    }
    return SIZE_MAX;
}

static int add_live(fdev *f, uint64_t addr, uint64_t bytes)
{
    if (f->nlive == f->clive) {
        size_t n = f->clive ? f->clive * 2 : 256;
        span *p = realloc(f->live, n * sizeof *p);
        if (!p) return GM_ENOMEM;
        f->live = p;
        f->clive = n;
    }
    f->live[f->nlive++] = (span){addr, bytes};
    return GM_OK;
}

static int f_alloc(gm_device *d, uint64_t bytes, uint64_t *dptr, uint64_t *cost_ns)
{
    fdev *f = d->impl;
    *cost_ns = 0;
    if (gm_device_take(d, bytes) != GM_OK) return GM_EOOM;
    *dptr = 0;
    if (!f->fresh_only && f->cur == UINT64_MAX && f->iq < f->rc->ninit &&
        f->rc->init[f->iq].size == bytes && !overlaps_live(f, f->rc->init[f->iq].addr, bytes)) {
        *dptr = f->rc->init[f->iq++].addr;
    } else if (!f->fresh_only && f->cur != UINT64_MAX) {
        size_t i = find_row(f, GM_OP_SEGMENT_ALLOC, bytes);
        if (i != SIZE_MAX) {
            f->claimed[i] = 1;
            *dptr = f->rc->rec[i].addr;
        }
    }
    if (!*dptr) *dptr = fresh(f, bytes);
    if (add_live(f, *dptr, bytes)) {
        gm_device_give(d, bytes);
        return GM_EOOM;
    }
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

/* A new expandable segment's address range: the recorded base (restoring:
 * the initial ones in address order; else the first segment_map recorded
 * for this event, which PyTorch makes at a new segment's base). */
static int f_va_reserve(gm_device *d, uint64_t bytes, uint64_t *va)
{
    fdev *f = d->impl;
    *va = 0;
    if (!f->fresh_only && f->cur == UINT64_MAX && f->ivq < f->rc->nvinit) {
        *va = f->rc->vinit[f->ivq++].addr;
    } else if (!f->fresh_only && f->cur != UINT64_MAX) {
        size_t i = find_row(f, GM_OP_SEGMENT_MAP, 0);
        if (i != SIZE_MAX) *va = f->rc->rec[i].addr;
    }
    if (!*va) *va = fresh(f, bytes);
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

/* ---------------- the model side ---------------- */

typedef struct hook_state {
    gm_fidelity *f;
    fdev *dev;
    size_t cap;
    int oom;
    gm_seg_info *segs; /* scratch for locating a placement mismatch */
    size_t nsegs;
} hook_state;

static void event_hook(void *ctx, int tenant, uint64_t event_index, const gm_event *ev)
{
    hook_state *h = ctx;
    (void)tenant, (void)ev;
    fdev_event(h->dev, event_index);
}

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
    fdev dev = {.rc = rc, .cur = UINT64_MAX, .fresh_only = o && o->fresh_addresses};
    dev.claimed = calloc(rc->n + 1, 1);
    if (!dev.claimed) return gm_errf(err, GM_ENOMEM, "out of memory");
    dev.next_fresh = (rc->max_end + GM_GiB) & ~(GM_DRIVER_GRANULARITY - 1);
    if (dev.next_fresh < 0x7f0000000000ull) dev.next_fresh = 0x7f0000000000ull;
    dev.base.ops = &fdev_ops;
    dev.base.impl = &dev;
    dev.base.capacity_bytes = f->capacity_bytes;
    gm_tenant_spec spec = {.path = path, .repeat = 1};
    hook_state hs = {.f = f, .dev = &dev};
    gm_sim_config cfg = {.tenants = &spec,
                         .n_tenants = 1,
                         .allocator = "pytorch",
                         .alloc_conf = f->alloc_conf,
                         .device = &dev.base,
                         .on_oom_skip = 1,
                         .initial_state = GM_INITIAL_RECORDED,
                         .overhead_given = 1,
                         .seg_hook = seg_hook,
                         .seg_hook_ctx = &hs,
                         .event_hook = event_hook,
                         .event_hook_ctx = &hs};
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
        f->oom_fits = res->t[0].recorded_oom_fits;
        gm_sim_result_free(res);
    }
    free(dev.live);
    free(dev.claimed);
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
    return gm_op_grows(c->op) ? (int64_t)c->size : -(int64_t)c->size;
}

static int any_release(const gm_fid_call *c, size_t i0, size_t i1)
{
    for (size_t i = i0; i < i1; i++)
        if (gm_op_shrinks(c[i].op)) return 1;
    return 0;
}

/* Why event e's calls differ: a release on one side only is the device
 * being full on that side only. */
static int cause_of(const gm_fidelity *f, size_t i0, size_t i1, size_t j0, size_t j1)
{
    int rec_rel = any_release(f->rec, i0, i1), our_rel = any_release(f->ours, j0, j1);
    if (rec_rel && !our_rel) return GM_FID_CAUSE_DEVICE_FULL;
    if (our_rel && !rec_rel) return GM_FID_CAUSE_MODEL_FULL;
    return GM_FID_CAUSE_UNKNOWN;
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
            f->div_cause = cause_of(f, i, i1, j, j1);
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

/* The op and size of event `index` (for the divergence message); an
 * empty_cache or oom event names the cause itself. */
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
    if (f->div_op == GM_OP_EMPTY_CACHE) f->div_cause = GM_FID_CAUSE_EMPTY_CACHE;
    if (f->div_op == GM_OP_OOM) f->div_cause = GM_FID_CAUSE_OOM;
}

const char *gm_fid_cause_text(int cause)
{
    switch (cause) {
    case GM_FID_CAUSE_EMPTY_CACHE:
        return "empty_cache: the model released other memory at torch.cuda.empty_cache()";
    case GM_FID_CAUSE_DEVICE_FULL:
        return "device full: PyTorch released its cache and retried where the model had room "
               "(give the device size the run had with --capacity)";
    case GM_FID_CAUSE_MODEL_FULL:
        return "device full in the model only: it ran out where PyTorch had room (the capacity "
               "is below what the recorded process had)";
    case GM_FID_CAUSE_OOM:
        return "oom: at an allocation PyTorch could not make";
    default:
        return "unknown: the model chose other blocks or segments than PyTorch";
    }
}

int gm_fidelity_check(const char *path, const gm_fidelity_opts *o, gm_fidelity *f, gm_err *err)
{
    recorded rc = {0};
    memset(f, 0, sizeof *f);
    int code = read_recorded(path, &rc, f, err);
    if (code == GM_OK) {
        f->rec = rc.rec;
        f->n_rec = rc.n;
        f->n_events = rc.n_events;
        f->fresh_addresses = o && o->fresh_addresses;
        f->avail_min = rc.avail_min;
        f->avail_max = rc.avail_max;
        if (o && o->capacity_bytes) {
            f->capacity_bytes = o->capacity_bytes;
            snprintf(f->capacity_source, sizeof f->capacity_source, "--capacity");
        } else if (rc.capacity) {
            f->capacity_bytes = rc.capacity;
            snprintf(f->capacity_source, sizeof f->capacity_source, "%s", rc.capacity_source);
        } else {
            f->capacity_bytes = GM_FIDELITY_CAPACITY;
            snprintf(f->capacity_source, sizeof f->capacity_source,
                     "not recorded: large enough never to run out");
        }
        snprintf(f->alloc_conf, sizeof f->alloc_conf, "%s",
                 o && o->alloc_conf ? o->alloc_conf : rc.alloc_conf);
        code = replay(path, &rc, o, f, err);
        rc.rec = NULL;
    }
    free(rc.rec);
    free(rc.init);
    free(rc.vinit);
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
