/* gen_common.c - see gen_common.h. */
#include "gen_common.h"
#include "base/clock.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gm_gen_init(gm_gen *g, const char *who, uint64_t stream, gm_gen_event_sink sink,
                 gm_gen_marker_sink marks, void *ctx, gm_err *err)
{
    memset(g, 0, offsetof(gm_gen, fixed));
    g->who = who;
    g->stream = stream;
    g->sink = sink;
    g->marks = marks;
    g->ctx = ctx;
    g->err = err;
    g->buf = g->fixed;
    g->cap = GM_GEN_BUF_EVENTS;
}

void gm_gen_fail(gm_gen *g, int code, const char *fmt, ...)
{
    if (g->rc != GM_OK) return;
    char msg[sizeof g->err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    g->rc = gm_errf(g->err, code, "%s: %s", g->who, msg);
}

static void send(gm_gen *g)
{
    if (g->rc == GM_OK && g->nbuf) g->rc = g->sink(g->ctx, g->buf, g->nbuf, g->err);
    g->first += g->nbuf;
    g->nbuf = 0;
}

void gm_gen_flush(gm_gen *g)
{
    if (!g->hold) send(g);
}

void gm_gen_hold(gm_gen *g, int on)
{
    g->hold = on;
    if (on) return;
    send(g);
    if (g->buf != g->fixed) {
        free(g->buf);
        g->buf = g->fixed;
        g->cap = GM_GEN_BUF_EVENTS;
    }
}

int gm_gen_finish(gm_gen *g)
{
    gm_gen_hold(g, 0);
    return g->rc;
}

/* Room for one more event: in held mode the buffer grows. */
static int room(gm_gen *g)
{
    if (g->nbuf < g->cap) return 1;
    if (!g->hold) {
        send(g);
        return 1;
    }
    size_t cap = g->cap * 2;
    gm_event *nb =
        g->buf == g->fixed ? malloc(cap * sizeof *nb) : realloc(g->buf, cap * sizeof *nb);
    if (!nb) {
        gm_gen_fail(g, GM_ENOMEM, "out of host memory");
        return 0;
    }
    if (g->buf == g->fixed) memcpy(nb, g->fixed, g->nbuf * sizeof *nb);
    g->buf = nb;
    g->cap = cap;
    return 1;
}

static void emit(gm_gen *g, uint8_t op, const gm_gen_tensor *t)
{
    if (g->rc != GM_OK || !room(g)) return;
    g->buf[g->nbuf++] = (gm_event){.t_ns = g->t_ns,
                                   .addr = t->addr,
                                   .size = t->size,
                                   .stream = g->stream,
                                   .op = op,
                                   .category = t->cat,
                                   .phase = g->phase}; /* id, site: none */
    g->st.events++;
    g->st.end_t_ns = g->t_ns;
    if (g->nbuf == GM_GEN_BUF_EVENTS && !g->hold) send(g);
}

gm_gen_tensor gm_gen_alloc_at(gm_gen *g, uint64_t bytes, uint8_t cat, uint64_t bytes_per_ns)
{
    gm_gen_tensor t = {GM_GEN_ADDR_BASE + GM_GEN_ADDR_STEP * g->nallocs++, bytes, cat,
                       g->first + g->nbuf};
    emit(g, GM_OP_ALLOC, &t);
    g->st.allocs++;
    g->live_bytes += bytes;
    if (g->live_bytes > g->st.peak_live_bytes) g->st.peak_live_bytes = g->live_bytes;
    g->t_ns += GM_GEN_OP_NS + bytes / bytes_per_ns;
    return t;
}

gm_gen_tensor gm_gen_alloc(gm_gen *g, uint64_t bytes, uint8_t cat)
{
    return gm_gen_alloc_at(g, bytes, cat, GM_GEN_KERNEL_BYTES_PER_NS);
}

void gm_gen_free(gm_gen *g, gm_gen_tensor *t)
{
    if (!t->addr) {
        /* a bug in the model code, never bad input */
        gm_gen_fail(g, GM_EINVAL, "internal error: free of a dead tensor");
        return;
    }
    emit(g, GM_OP_FREE, t);
    g->live_bytes -= t->size;
    g->t_ns += GM_GEN_FREE_NS;
    t->addr = 0;
}

void gm_gen_set_category(gm_gen *g, gm_gen_tensor *t, uint8_t cat)
{
    t->cat = cat;
    if (t->ev >= g->first && t->ev < g->first + g->nbuf) {
        gm_event *e = &g->buf[t->ev - g->first];
        if (e->op == GM_OP_ALLOC && e->addr == t->addr) e->category = cat;
    }
}

void gm_gen_tick(gm_gen *g, uint64_t bytes)
{
    g->t_ns += GM_GEN_OP_NS + bytes / GM_GEN_KERNEL_BYTES_PER_NS;
}

void gm_gen_mark_iteration(gm_gen *g, int it)
{
    if (g->rc != GM_OK || !g->marks) return;
    gm_marker m;
    memset(&m, 0, sizeof m);
    m.t_ns = g->t_ns;
    m.kind = GM_MARK_ITERATION;
    snprintf(m.name, sizeof m.name, "iteration %d", it);
    g->rc = g->marks(g->ctx, &m, 1, g->err);
    g->st.markers++;
}

/* ------------------------------------------------------------ checks */

int gm_gen_check_range(const char *who, const char *name, long long v, long long lo, long long hi,
                       gm_err *err)
{
    if (v < lo || v > hi)
        return gm_errf(err, GM_EINVAL, "%s: %s = %lld is out of range; use %lld..%lld", who, name,
                       v, lo, hi);
    return GM_OK;
}

int gm_gen_check_bytes(const char *who, const char *what, uint64_t a, uint64_t b, uint64_t c,
                       uint64_t d, uint64_t e, gm_err *err)
{
    uint64_t v = a;
    if (__builtin_mul_overflow(v, b, &v) || __builtin_mul_overflow(v, c, &v) ||
        __builtin_mul_overflow(v, d, &v) || __builtin_mul_overflow(v, e, &v) ||
        v > GM_TRACE_MAX_SIZE)
        return gm_errf(err, GM_EINVAL,
                       "%s: the %s tensor would exceed 2^48 bytes; use a smaller batch, "
                       "sequence or model size",
                       who, what);
    return GM_OK;
}

/* ------------------------------------------------------------ trace file */

static int sink_trace(void *ctx, const gm_event *ev, size_t n, gm_err *err)
{
    return gm_trace_append(ctx, ev, n, err);
}

static int sink_trace_markers(void *ctx, const gm_marker *m, size_t n, gm_err *err)
{
    return gm_trace_add_markers(ctx, m, n, err);
}

static int fill_meta(gm_trace_meta *meta, const gm_gen_file *f)
{
    char now[32];
    gm_utc_now(now, sizeof now);
    meta->device_total_bytes = f->device_total_bytes;
    int rc = gm_trace_meta_set(&meta->source, f->source);
    if (rc == GM_OK) rc = gm_trace_meta_set(&meta->device_name, "");
    if (rc == GM_OK) rc = gm_trace_meta_set(&meta->created_utc, now);
    if (rc == GM_OK) rc = gm_trace_meta_set(&meta->command, f->command ? f->command : "");
    if (rc == GM_OK) rc = gm_trace_meta_set(&meta->workload, f->workload);
    return rc;
}

int gm_gen_write_trace(const char *path, const gm_gen_file *f, const gm_trace_write_opts *opts,
                       gm_gen_fn fn, const void *params, gm_gen_stats *stats, gm_err *err)
{
    gm_trace_meta meta;
    gm_trace_meta_init(&meta);
    if (fill_meta(&meta, f) != GM_OK) {
        gm_trace_meta_free(&meta);
        return gm_errf(err, GM_ENOMEM, "%s: out of host memory", path);
    }
    gm_trace_writer *w = NULL;
    int rc = gm_trace_create(path, &meta, opts, &w, err);
    gm_trace_meta_free(&meta);
    if (rc != GM_OK) return rc;
    rc = fn(params, sink_trace, sink_trace_markers, w, stats, err);
    if (rc != GM_OK) {
        gm_trace_abort(w);
        return rc;
    }
    return gm_trace_finish(w, err);
}
