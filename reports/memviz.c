/*
 * memviz.c - a simulated run as a PyTorch memory snapshot (memviz.h).
 *
 * The engine's observer hooks (sim/engine.h) report every decision: seg_hook
 * the model's driver calls, alloc_hook where it placed each allocation,
 * event_hook each trace event before it is processed, init_hook the blocks
 * of the rebuilt initial state, end_hook the end of the run. This file turns
 * them into the snapshot's entries and end state; the layout is PyTorch's
 * (traces/SNAPSHOTS.md §3-§7, which the importer reads).
 */
#define _GNU_SOURCE /* memmem */
#include "memviz.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/addrmap.h"
#include "base/outfile.h"
#include "base/units.h"
#include "study/simulate.h"
#include "traces/alloc_conf.h"
#include "traces/pickle_out.h"
#include "traces/trace.h"

enum act { A_ALLOC, A_FREE_REQ, A_FREE_DONE, A_SEG_ALLOC, A_SEG_FREE, A_MAP, A_UNMAP, A_OOM };
static const char *const act_name[] = {
    "alloc",        "free_requested", "free_completed", "segment_alloc",
    "segment_free", "segment_map",    "segment_unmap",  "oom"};

#define FR_NONE 0u /* frames: [] */
#define FR_EMPTY_CACHE UINT32_MAX

typedef struct entry {
    uint64_t addr, size, stream, t_ns;
    uint32_t frames; /* site, FR_NONE or FR_EMPTY_CACHE */
    uint8_t act;
} entry;

typedef struct block {
    uint64_t addr, bytes, requested, stream;
    uint32_t site;
    uint8_t live, awaiting;
} block;

typedef struct piece { /* a segment, or a mapped range of an expandable one */
    uint64_t addr, size, stream;
    uint32_t site;
    uint8_t live, expandable;
} piece;

typedef struct seginfo {
    uint64_t addr;
    uint8_t small, expandable;
} seginfo;

typedef struct obs {
    const gm_sim_config *cfg;
    entry *e;
    size_t ne, cape;
    block *b;
    size_t nb, capb;
    piece *p;
    size_t np, capp;
    gm_addrmap by_trace; /* trace address -> block index + 1 */
    gm_addrmap by_seg;   /* classic segment address -> piece index + 1 */
    uint64_t cur_index, offset, cur_t, reserved;
    uint32_t cur_site;
    uint8_t cur_op, pending_alloc, ended, failed;
    uint64_t pending_size, pending_stream;
    seginfo *si; /* the model's segments at the end */
    size_t nsi;
    int status;
} obs;

static void *grow(void *v, size_t *cap, size_t n, size_t sz, obs *o)
{
    if (n < *cap) return v;
    size_t c = *cap ? 2 * *cap : 256;
    void *w = realloc(v, c * sz);
    if (!w) {
        o->failed = 1;
        return NULL;
    }
    *cap = c;
    return w;
}

static void add_entry(obs *o, uint8_t act, uint64_t addr, uint64_t size, uint64_t stream,
                      uint64_t t_ns, uint32_t frames)
{
    entry *v = grow(o->e, &o->cape, o->ne, sizeof *v, o);
    if (!v) return;
    o->e = v;
    o->e[o->ne++] = (entry){addr, size, stream, t_ns, frames, act};
}

/* The allocation of the last event found no memory: PyTorch's oom entry. */
static void settle_pending(obs *o)
{
    if (!o->pending_alloc) return;
    o->pending_alloc = 0;
    add_entry(o, A_OOM, 0, o->pending_size, o->pending_stream, o->cur_t, o->cur_site);
}

static void on_seg(void *ctx, int tenant, uint64_t event_index, const gm_seg_event *ev)
{
    obs *o = ctx;
    (void)tenant;
    if (o->ended || o->failed) return; /* the teardown after the run, or out of memory */
    int alloc = gm_op_grows(ev->op),
        exp = ev->op == GM_OP_SEGMENT_MAP || ev->op == GM_OP_SEGMENT_UNMAP;
    if (alloc) {
        piece *v = grow(o->p, &o->capp, o->np, sizeof *v, o);
        if (!v) return;
        o->p = v;
        uint32_t site = event_index == o->cur_index ? o->cur_site : 0;
        o->p[o->np] = (piece){ev->addr, ev->size, ev->stream, site, 1, (uint8_t)exp};
        if (!exp && gm_addrmap_put(&o->by_seg, gm_addrmap_key(ev->addr), o->np + 1)) o->failed = 1;
        o->np++;
        o->reserved += ev->size;
    } else if (!exp) {
        uint64_t i;
        if (gm_addrmap_del(&o->by_seg, gm_addrmap_key(ev->addr), &i)) o->p[i - 1].live = 0;
        o->reserved -= ev->size;
    } else { /* unmap [addr, addr + size) from the mapped ranges, splitting them */
        uint64_t lo = ev->addr, hi = ev->addr + ev->size;
        for (size_t i = 0, n = o->np; i < n; i++) {
            piece *q = &o->p[i];
            if (!q->live || !q->expandable || q->addr >= hi || q->addr + q->size <= lo) continue;
            uint64_t qlo = q->addr, qhi = q->addr + q->size;
            q->live = 0;
            piece left = *q, right = *q;
            left.size = lo - qlo;
            right.addr = hi;
            right.size = qhi - hi;
            for (int k = 0; k < 2; k++) {
                piece nw = k ? right : left;
                if ((k ? qhi <= hi : qlo >= lo)) continue;
                piece *v = grow(o->p, &o->capp, o->np, sizeof *v, o);
                if (!v) return;
                o->p = v;
                nw.live = 1;
                o->p[o->np++] = nw;
                q = &o->p[i];
            }
        }
        o->reserved -= ev->size;
    }
    if (event_index == UINT64_MAX) return; /* the initial state: no entry, as before recording */
    static const uint8_t acts[] = {[GM_OP_SEGMENT_ALLOC] = A_SEG_ALLOC,
                                   [GM_OP_SEGMENT_FREE] = A_SEG_FREE,
                                   [GM_OP_SEGMENT_MAP] = A_MAP,
                                   [GM_OP_SEGMENT_UNMAP] = A_UNMAP};
    uint32_t frames = event_index != o->cur_index      ? FR_NONE /* a policy's timer */
                      : o->cur_op == GM_OP_EMPTY_CACHE ? FR_EMPTY_CACHE
                                                       : o->cur_site;
    add_entry(o, acts[ev->op], ev->addr, ev->size, ev->stream, ev->t_ns, frames);
}

static block *new_block(obs *o, uint64_t trace_addr)
{
    block *v = grow(o->b, &o->capb, o->nb, sizeof *v, o);
    if (!v) return NULL;
    o->b = v;
    uint64_t key = gm_addrmap_key(trace_addr), *old = gm_addrmap_get(&o->by_trace, key);
    if (old) {
        *old = o->nb + 1;
    } else if (gm_addrmap_put(&o->by_trace, key, o->nb + 1)) {
        o->failed = 1;
        return NULL;
    }
    block *b = &o->b[o->nb++];
    memset(b, 0, sizeof *b);
    b->live = 1;
    return b;
}

static void place(gm_alloc *a, uint64_t handle, uint64_t requested, block *b)
{
    b->addr = a->ops->block_addr(a, handle);
    b->bytes = gm_alloc_block_bytes(a, handle, requested);
    b->requested = requested;
}

static void on_init(void *ctx, int tenant, const gm_init_row *row, gm_alloc *a, uint64_t handle)
{
    obs *o = ctx;
    (void)tenant;
    block *b = o->failed ? NULL : new_block(o, row->addr);
    if (!b) return;
    place(a, handle, row->size, b);
    b->stream = row->stream;
    b->site = row->site;
}

static void free_entries(obs *o, block *b, int completed_only)
{
    if (!completed_only)
        add_entry(o, A_FREE_REQ, b->addr, b->requested, b->stream, o->cur_t, b->site);
    add_entry(o, A_FREE_DONE, b->addr, b->requested, b->stream, o->cur_t, b->site);
    b->live = 0;
}

static block *live_block(obs *o, uint64_t trace_addr)
{
    uint64_t *i = gm_addrmap_get(&o->by_trace, gm_addrmap_key(trace_addr));
    return i && o->b[*i - 1].live ? &o->b[*i - 1] : NULL;
}

static void on_event(void *ctx, int tenant, uint64_t index, const gm_event *e)
{
    obs *o = ctx;
    (void)tenant;
    if (o->failed) return;
    settle_pending(o);
    o->cur_index = index;
    o->cur_op = e->op;
    o->cur_site = e->site;
    o->cur_t = e->t_ns + o->offset;
    block *b;
    switch (e->op) {
    case GM_OP_ALLOC:
        o->pending_alloc = 1;
        o->pending_size = e->size;
        o->pending_stream = e->stream;
        break;
    case GM_OP_FREE: /* the block is freed by the model right after this */
        if ((b = live_block(o, e->addr))) free_entries(o, b, b->awaiting);
        break;
    case GM_OP_FREE_REQUESTED:
        if ((b = live_block(o, e->addr)) && !b->awaiting) {
            b->awaiting = 1;
            add_entry(o, A_FREE_REQ, b->addr, b->requested, b->stream, o->cur_t, b->site);
        }
        break;
    default:
        break;
    }
}

static void on_alloc(void *ctx, int tenant, uint64_t index, const gm_event *e, gm_alloc *a,
                     uint64_t handle)
{
    obs *o = ctx;
    (void)tenant;
    (void)index;
    if (o->failed) return;
    o->pending_alloc = 0;
    block *old = live_block(o, e->addr); /* --lenient: a live address allocated again */
    if (old) free_entries(o, old, old->awaiting);
    block *b = new_block(o, e->addr);
    if (!b) return;
    place(a, handle, e->size, b);
    b->stream = e->stream;
    b->site = e->site;
    add_entry(o, A_ALLOC, b->addr, b->requested, b->stream, o->cur_t, b->site);
}

static void on_end(void *ctx, int tenant, gm_alloc *a, int status)
{
    obs *o = ctx;
    (void)tenant;
    settle_pending(o);
    o->ended = 1;
    o->status = status;
    size_t n = a->ops->segments(a, NULL, 0);
    gm_seg_info *v = n ? malloc(n * sizeof *v) : NULL;
    o->si = n ? malloc(n * sizeof *o->si) : NULL;
    if (n && (!v || !o->si)) {
        free(v);
        o->failed = 1;
        return;
    }
    n = a->ops->segments(a, v, n);
    for (size_t i = 0; i < n; i++)
        o->si[i] = (seginfo){v[i].addr, v[i].small_pool, v[i].expandable};
    o->nsi = n;
    free(v);
}

/* ---------------- the pickle ---------------- */

typedef struct writer {
    gm_pko k;
    const gm_init_row *pools; /* the trace's private-pool segments (CUDA graphs, MemPool) */
    size_t npools;
    const gm_sites *sites;
    uint32_t *memo; /* site -> memo index + 1 of its frame list */
    uint32_t memo_empty, memo_ec;
} writer;

static void frame(gm_pko *k, const char *name, const char *file, int64_t line)
{
    gm_pko_dict(k);
    gm_pko_str(k, "name");
    gm_pko_str(k, name);
    gm_pko_str(k, "filename");
    gm_pko_str(k, file);
    gm_pko_str(k, "line");
    gm_pko_int(k, line);
    gm_pko_dict_end(k);
}

/* One "FILE:LINE in NAME" (or "FILE in NAME") line of a site's text. */
static void frame_text(gm_pko *k, const char *s, size_t n)
{
    char buf[4096];
    if (n >= sizeof buf) n = sizeof buf - 1;
    memcpy(buf, s, n);
    buf[n] = 0;
    char *in = strstr(buf, " in ");
    const char *name = "";
    int64_t line = 0;
    if (in) {
        *in = 0;
        name = in + 4;
        char *colon = strrchr(buf, ':');
        if (colon && colon[1] && strspn(colon + 1, "0123456789") == strlen(colon + 1)) {
            line = strtoll(colon + 1, NULL, 10);
            *colon = 0;
        }
    }
    frame(k, name, buf, line);
}

static void frames(writer *w, uint32_t f)
{
    gm_pko *k = &w->k;
    if (f == FR_EMPTY_CACHE) {
        if (w->memo_ec) {
            gm_pko_get(k, w->memo_ec - 1);
            return;
        }
        gm_pko_list(k); /* torch.cuda.empty_cache(), as import_release.c recognises it */
        frame(k, "empty_cache", "torch/cuda/memory.py", 0);
        gm_pko_list_end(k);
        w->memo_ec = gm_pko_put(k) + 1;
        return;
    }
    const char *name = f ? gm_sites_name(w->sites, f) : NULL;
    if (!name) {
        if (w->memo_empty) {
            gm_pko_get(k, w->memo_empty - 1);
            return;
        }
        gm_pko_list(k);
        gm_pko_list_end(k);
        w->memo_empty = gm_pko_put(k) + 1;
        return;
    }
    if (w->memo[f]) {
        gm_pko_get(k, w->memo[f] - 1);
        return;
    }
    const char *stack = w->sites->rows[f - 1].stack;
    gm_pko_list(k);
    if (!stack || !*stack) {
        frame_text(k, name, strlen(name));
    } else {
        /* one frame a line; a line without " in " continues the name before
         * it (a name with a newline in a trace imported before control
         * characters were escaped in /sites: joined with '?', as the reader
         * shows a control character in the short text) */
        gm_strbuf fr;
        gm_sb_init(&fr);
        for (const char *s = stack; *s;) {
            const char *nl = strchr(s, '\n');
            size_t n = nl ? (size_t)(nl - s) : strlen(s);
            int cont = fr.len && !memmem(s, n, " in ", 4);
            if (!cont && fr.len) {
                frame_text(k, fr.s, fr.len);
                fr.len = 0;
            }
            if (n && !(n == 3 && !memcmp(s, "...", 3))) {
                if (cont) gm_sb_putn(&fr, "?", 1);
                gm_sb_putn(&fr, s, n);
            }
            s += n + (nl != NULL);
        }
        if (fr.len) frame_text(k, fr.s, fr.len);
        if (fr.failed) k->b.failed = 1;
        gm_sb_free(&fr);
    }
    gm_pko_list_end(k);
    w->memo[f] = gm_pko_put(k) + 1;
}

static void kv_int(gm_pko *k, const char *key, int64_t v)
{
    gm_pko_str(k, key);
    gm_pko_int(k, v);
}

static void kv_u(gm_pko *k, const char *key, uint64_t v)
{
    gm_pko_str(k, key);
    gm_pko_uint(k, v);
}

static void kv_str(gm_pko *k, const char *key, const char *v)
{
    gm_pko_str(k, key);
    gm_pko_str(k, v);
}

static int cmp_block(const void *x, const void *y)
{
    const block *a = *(const block *const *)x, *b = *(const block *const *)y;
    return a->addr < b->addr ? -1 : a->addr > b->addr;
}

static int cmp_piece(const void *x, const void *y)
{
    const piece *a = x, *b = y;
    return a->addr < b->addr ? -1 : a->addr > b->addr;
}

/* The pool of an end-state segment starting at addr: the model's own view
 * (an expandable segment's view starts at its base, below its mapped
 * ranges), else PyTorch's rule that only the small pool has 2 MiB segments. */
static int is_small(const obs *o, const piece *s)
{
    const seginfo *best = NULL;
    for (size_t i = 0; i < o->nsi; i++) {
        const seginfo *g = &o->si[i];
        if (g->expandable != s->expandable) continue;
        if (g->addr == s->addr) return g->small;
        if (s->expandable && g->addr <= s->addr && (!best || g->addr > best->addr)) best = g;
    }
    if (best) return best->small;
    return !s->expandable && s->size == 2 * GM_MiB;
}

static void write_block(writer *w, const block *b, uint64_t addr, uint64_t size, const char *state)
{
    gm_pko *k = &w->k;
    gm_pko_dict(k);
    kv_u(k, "address", addr);
    kv_u(k, "size", size);
    kv_u(k, "requested_size", b ? b->requested : 0);
    kv_str(k, "state", state);
    gm_pko_str(k, "frames");
    frames(w, b ? b->site : FR_NONE);
    gm_pko_dict_end(k);
}

/* The end state: segments (expandable ones as their contiguous mapped
 * ranges, as PyTorch's snapshot() lists them), each cut into its blocks. */
static void write_segments(writer *w, obs *o, gm_memviz_summary *sum)
{
    gm_pko *k = &w->k;
    size_t ns = 0, nl = 0;
    for (size_t i = 0; i < o->np; i++)
        ns += o->p[i].live;
    for (size_t i = 0; i < o->nb; i++)
        nl += o->b[i].live;
    piece *s = malloc((ns ? ns : 1) * sizeof *s);
    const block **lb = malloc((nl ? nl : 1) * sizeof *lb);
    if (!s || !lb) {
        free(s);
        free(lb);
        o->failed = 1;
        return;
    }
    ns = nl = 0;
    for (size_t i = 0; i < o->np; i++)
        if (o->p[i].live) s[ns++] = o->p[i];
    for (size_t i = 0; i < o->nb; i++)
        if (o->b[i].live) lb[nl++] = &o->b[i];
    qsort(s, ns, sizeof *s, cmp_piece);
    qsort(lb, nl, sizeof *lb, cmp_block);
    size_t m = 0; /* merge adjacent mapped ranges of one expandable segment */
    for (size_t i = 0; i < ns; i++) {
        if (m && s[i].expandable && s[m - 1].expandable && s[m - 1].stream == s[i].stream &&
            s[m - 1].addr + s[m - 1].size == s[i].addr &&
            is_small(o, &s[m - 1]) == is_small(o, &s[i]))
            s[m - 1].size += s[i].size;
        else
            s[m++] = s[i];
    }
    ns = m;
    sum->segments = ns;
    sum->live_blocks = nl;
    gm_pko_list(k);
    size_t j = 0;
    for (size_t i = 0; i < ns; i++) {
        const piece *g = &s[i];
        uint64_t end = g->addr + g->size, alloc = 0, active = 0, req = 0;
        while (j < nl && lb[j]->addr < g->addr)
            j++; /* outside every segment: not shown */
        size_t j0 = j;
        for (; j < nl && lb[j]->addr < end; j++) {
            active += lb[j]->bytes;
            req += lb[j]->requested;
            if (!lb[j]->awaiting) alloc += lb[j]->bytes;
        }
        gm_pko_dict(k);
        kv_int(k, "device", 0);
        kv_u(k, "address", g->addr);
        kv_u(k, "total_size", g->size);
        kv_u(k, "allocated_size", alloc);
        kv_u(k, "active_size", active);
        kv_u(k, "requested_size", req);
        kv_u(k, "stream", g->stream);
        kv_str(k, "segment_type", is_small(o, g) ? "small" : "large");
        uint64_t id0 = 0, id1 = 0; /* a private pool keeps the id the trace gave it */
        for (size_t q = 0; q < w->npools; q++)
            if (w->pools[q].addr == g->addr) id0 = w->pools[q].pool_id0, id1 = w->pools[q].pool_id1;
        gm_pko_str(k, "segment_pool_id");
        gm_pko_tuple(k);
        gm_pko_uint(k, id0);
        gm_pko_uint(k, id1);
        gm_pko_tuple_end(k);
        gm_pko_str(k, "is_expandable");
        gm_pko_bool(k, g->expandable);
        gm_pko_str(k, "frames");
        frames(w, g->site);
        gm_pko_str(k, "blocks");
        gm_pko_list(k);
        uint64_t at = g->addr;
        for (size_t q = j0; q < j; q++) {
            const block *b = lb[q];
            if (b->addr > at) {
                write_block(w, NULL, at, b->addr - at, "inactive");
                sum->blocks++;
            }
            write_block(w, b, b->addr, b->bytes,
                        b->awaiting ? "active_awaiting_free" : "active_allocated");
            sum->blocks++;
            at = b->addr + b->bytes;
        }
        if (at < end) {
            write_block(w, NULL, at, end - at, "inactive");
            sum->blocks++;
        }
        gm_pko_list_end(k);
        gm_pko_dict_end(k);
    }
    gm_pko_list_end(k);
    free(s);
    free(lb);
}

static void write_entries(writer *w, const obs *o)
{
    gm_pko *k = &w->k;
    gm_pko_list(k);
    gm_pko_list(k);
    for (size_t i = 0; i < o->ne; i++) {
        const entry *e = &o->e[i];
        gm_pko_dict(k);
        kv_str(k, "action", act_name[e->act]);
        if (e->act == A_OOM) /* cudaMemGetInfo's free bytes then */
            kv_u(k, "device_free", e->addr);
        else
            kv_u(k, "addr", e->addr);
        kv_u(k, "size", e->size);
        kv_u(k, "stream", e->stream);
        kv_u(k, "time_us", e->t_ns / 1000);
        gm_pko_str(k, "frames");
        frames(w, e->frames);
        gm_pko_dict_end(k);
    }
    gm_pko_list_end(k);
    gm_pko_list_end(k);
}

/* allocator_settings as PyTorch's snapshot records them (SNAPSHOTS.md §7);
 * a model other than pytorch: PyTorch's defaults, its settings verbatim. */
static void write_settings(writer *w, const gm_sim_result *r)
{
    gm_pko *k = &w->k;
    const char *conf = r->t[0].alloc_conf;
    gm_pt_conf c;
    gm_err e;
    if (strcmp(r->allocator, "pytorch") ||
        gm_pt_conf_parse_for(conf, r->t[0].torch_version, &c, &e) != GM_OK)
        gm_pt_conf_default(&c);
    gm_pko_dict(k);
    kv_str(k, "PYTORCH_CUDA_ALLOC_CONF", conf);
    kv_int(k, "max_split_size", c.max_split_size == UINT64_MAX ? -1 : (int64_t)c.max_split_size);
    kv_u(k, "max_non_split_rounding_size", c.max_non_split_rounding_size);
    gm_pko_str(k, "garbage_collection_threshold");
    gm_pko_float(k, c.gc_threshold);
    gm_pko_str(k, "expandable_segments");
    gm_pko_bool(k, c.expandable_segments);
    gm_pko_str(k, "roundup_power2_divisions");
    gm_pko_dict(k);
    for (int i = 0; i < GM_PT_ROUNDUP_INTERVALS; i++) {
        char key[16];
        snprintf(key, sizeof key, "%d", 1 << i);
        kv_u(k, key, c.roundup_divisions[i]);
    }
    gm_pko_dict_end(k);
    gm_pko_dict_end(k);
}

/* The trace's call sites, and its private-pool segments (*pools, *np). */
static int read_sites(const gm_sim_config *cfg, gm_sites *s, gm_init_row **pools, size_t *np,
                      gm_err *err)
{
    memset(s, 0, sizeof *s);
    *pools = NULL;
    *np = 0;
    const gm_tenant_spec *t = &cfg->tenants[0];
    if (t->events) return GM_OK; /* in memory: no /sites */
    gm_trace_reader *r;
    gm_init_row *rows = NULL;
    size_t n = 0;
    int rc = gm_trace_open(t->path, &r, err);
    if (rc == GM_OK) {
        rc = gm_trace_read_sites(r, s, err);
        if (rc == GM_OK) rc = gm_trace_read_initial(r, &rows, &n, err);
        gm_trace_close(r);
    }
    for (size_t i = 0; i < n; i++)
        if (rows[i].kind == GM_INIT_SEGMENT && (rows[i].pool_id0 || rows[i].pool_id1))
            rows[(*np)++] = rows[i];
    *pools = rows;
    return rc;
}

int gm_memviz_export(const gm_sim_config *cfg, const char *out_path, gm_memviz_summary *sum,
                     gm_err *err)
{
    memset(sum, 0, sizeof *sum);
    if (cfg->n_tenants != 1)
        return gm_errf(err, GM_EUSAGE,
                       "a PyTorch snapshot is one process: give one trace (got %zu)",
                       cfg->n_tenants);
    if (cfg->tenants[0].repeat > 1)
        return gm_errf(err, GM_EUSAGE,
                       "--repeat is not exported: a snapshot records one pass; leave it out");
    obs o = {.cfg = cfg, .offset = cfg->tenants[0].offset_ns, .cur_index = UINT64_MAX - 1};
    if (gm_addrmap_init(&o.by_trace, 1024) || gm_addrmap_init(&o.by_seg, 256)) {
        gm_addrmap_free(&o.by_trace);
        return gm_errf(err, GM_ENOMEM, "out of memory");
    }
    gm_sim_config c = *cfg;
    c.seg_hook = on_seg;
    c.seg_hook_ctx = &o;
    c.alloc_hook = on_alloc;
    c.alloc_hook_ctx = &o;
    c.event_hook = on_event;
    c.event_hook_ctx = &o;
    c.init_hook = on_init;
    c.init_hook_ctx = &o;
    c.end_hook = on_end;
    c.end_hook_ctx = &o;
    gm_sim_result *r = NULL;
    gm_sites sites;
    gm_init_row *pools;
    size_t npools;
    int rc = read_sites(cfg, &sites, &pools, &npools, err);
    if (rc == GM_OK) rc = gm_simulate(&c, &r, err);
    if (rc == GM_OK && o.failed) rc = gm_errf(err, GM_ENOMEM, "out of memory");
    writer w = {.sites = &sites, .pools = pools, .npools = npools};
    if (rc == GM_OK && !(w.memo = calloc(sites.n + 1, sizeof *w.memo)))
        rc = gm_errf(err, GM_ENOMEM, "out of memory");
    gm_outfile out;
    if (rc == GM_OK && (rc = gm_out_open(&out, out_path, err)) == GM_OK) {
        gm_pko_init(&w.k);
        gm_pko *k = &w.k;
        gm_pko_sink(k, out.f); /* written as it is made, not held whole */
        gm_pko_dict(k);
        gm_pko_str(k, "segments");
        write_segments(&w, &o, sum);
        gm_pko_str(k, "device_traces");
        write_entries(&w, &o);
        gm_pko_str(k, "allocator_settings");
        write_settings(&w, r);
        gm_pko_dict_end(k);
        gm_pko_finish(k);
        if ((k->b.failed && !k->io_failed) || o.failed) {
            gm_out_abort(&out);
            rc = gm_errf(err, GM_ENOMEM, "out of memory");
        } else { /* a failed write: the commit reports it (the stream's error) */
            rc = gm_out_commit(&out, err);
        }
        sum->bytes = k->written;
        gm_pko_free(k);
    }
    sum->entries = o.ne;
    for (size_t i = 0; i < o.ne; i++)
        sum->ooms += o.e[i].act == A_OOM;
    sum->aborted = o.status == GM_TENANT_ABORTED;
    free(w.memo);
    free(pools);
    gm_sites_free(&sites);
    gm_sim_result_free(r);
    free(o.e);
    free(o.b);
    free(o.p);
    free(o.si);
    gm_addrmap_free(&o.by_trace);
    gm_addrmap_free(&o.by_seg);
    return rc;
}
