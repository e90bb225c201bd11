/*
 * segmap.c - the allocator's segments and blocks at chosen moments of a run
 * (segmap.h), as JSON for the page.
 *
 * Pass 1 watches the driver calls (seg_hook) and finds the event after
 * which the device's reserved memory peaked. Pass 2 keeps the live blocks
 * the model placed (alloc_hook, init_hook; a trace free removes one) and,
 * at the moments, asks each tenant's model for its segments. Observation
 * points are counted in calls of event_hook, which the engine makes in one
 * deterministic global order, so "after the event that set the peak" in
 * pass 1 is the same point in pass 2. Without the zoom pyramid (a
 * comparison's maps) pass 2 alone finds the peak as it goes and captures
 * each new one, keeping the last (capture_peak): one simulation, not two.
 */
#include "segmap.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/addrmap.h"
#include "results.h"
#include "trace_stats.h"
#include "study/policy_list.h"
#include "study/pool.h"
#include "study/same_run.h"
#include "study/simulate.h"
#include "traces/trace.h"

typedef struct sblock {
    uint64_t addr, bytes, requested;
    uint32_t site;
    uint8_t cat;
} sblock;

typedef struct ten {
    gm_alloc *a;
    sblock *b;
    size_t nb, capb;
    size_t *freel; /* free slots of b */
    size_t nfree, capf;
    gm_addrmap live; /* trace address -> slot + 1 */
    gm_sites sites;
    uint64_t offset;
    uint64_t reserved; /* its segments' bytes: obs.reserved is their sum */
} ten;

/* One level of the zoom pyramid: ZCOLS columns over [w0, w1) (ns). */
#define ZCOLS 400
#define ZMAX_LEVELS 16
#define ZMAX_OOMS 8 /* OOMs with their own windows, at most */
typedef struct zlevel {
    uint64_t w0, w1;
    int group;                         /* 0: around the peak; k: around the k-th OOM */
    double mx[3][ZCOLS], mn[3][ZCOLS]; /* requested, allocated, reserved */
    double pre[3], last[3];            /* the state before the window; the last sample's */
    int last_col;                      /* -1: no sample in the window yet */
} zlevel;

/* The peak's map's makings (snap_take). */
typedef struct peak_snap {
    gm_seg_info *segs; /* all_segments' */
    int *seg_t;
    size_t ns;
    sblock **b; /* each tenant's live blocks */
    size_t *nb;
    uint64_t t_ns; /* the map's time */
    size_t pos;    /* its place in maps */
    int taken;
} peak_snap;

typedef struct obs {
    int pass;       /* 1: find the peak, 2: capture */
    int single;     /* pass 2 finds the peak too (no pass 1: gm_segmap_json) */
    peak_snap snap; /* single: what the last peak's map is made of */
    const gm_segmap_opts *o;
    ten *t;
    size_t nt;
    uint64_t seq, reserved, peak, peak_seq; /* pass 1 sets peak and peak_seq */
    int pending, pend_tenant;
    uint64_t pend_size, pend_t, pend_stream;
    uint32_t pend_site;
    uint8_t pend_cat;
    int got_peak, got_at, failed;
    uint64_t first_t; /* pass 1: the first event's time (--segments-at counts from it) */
    int seen_first;
    uint64_t peak_t, end_t, events; /* pass 1: when the peak was set; the last event; events */
    uint64_t oom_t[ZMAX_OOMS];      /* pass 1: when the first OOMs failed */
    size_t n_oom_t;
    /* pass 2: the device's requested, allocated and reserved bytes, sampled
     * after every event into the levels of the zoom pyramid */
    double q, al;
    zlevel *z;
    size_t nz;
    uint64_t n_oom, last_t;
    uint64_t n_oom_all; /* pass 1: every OOM (ooms_total) */
    uint64_t z_end;     /* the zoom windows' last end */
    int halt;           /* the engine's gm_sim_config.halt: pass 2 has it all */
    json_t *maps;
    gm_sim_result **kept; /* NULL, or each pass's result, [pass - 1] (attach_all) */
} obs;

void gm_segmap_opts_run(gm_segmap_opts *o)
{
    *o = (gm_segmap_opts){.max_ooms = 3, .max_items = 900, .max_rows = 400, .zoom = 1};
}

void gm_segmap_opts_compare(gm_segmap_opts *o)
{
    *o = (gm_segmap_opts){.max_ooms = 1, .max_items = 300, .max_rows = 150};
}

static json_t *ju(uint64_t v)
{
    return json_integer((json_int_t)v);
}

/* ---------------------------------------------------------- live blocks */

static sblock *block_new(obs *o, ten *t, uint64_t trace_addr)
{
    size_t slot;
    if (t->nfree) {
        slot = t->freel[--t->nfree];
    } else {
        if (t->nb == t->capb) {
            size_t c = t->capb ? 2 * t->capb : 1024;
            sblock *v = realloc(t->b, c * sizeof *v);
            if (!v) {
                o->failed = 1;
                return NULL;
            }
            t->b = v;
            t->capb = c;
        }
        slot = t->nb++;
    }
    uint64_t key = gm_addrmap_key(trace_addr), *old = gm_addrmap_get(&t->live, key), prev;
    if (old) { /* --lenient: a live address allocated again: the old block goes */
        prev = *old - 1;
        *old = slot + 1;
        if (t->nfree == t->capf) {
            size_t c = t->capf ? 2 * t->capf : 256;
            size_t *v = realloc(t->freel, c * sizeof *v);
            if (!v) {
                o->failed = 1;
                return NULL;
            }
            t->freel = v;
            t->capf = c;
        }
        t->freel[t->nfree++] = prev;
        o->q -= (double)t->b[prev].requested;
        o->al -= (double)t->b[prev].bytes;
        t->b[prev].bytes = 0;
    } else if (gm_addrmap_put(&t->live, key, slot + 1)) {
        o->failed = 1;
        return NULL;
    }
    return &t->b[slot];
}

static void block_free(obs *o, ten *t, uint64_t trace_addr)
{
    uint64_t slot;
    if (!gm_addrmap_del(&t->live, gm_addrmap_key(trace_addr), &slot)) return;
    if (t->nfree == t->capf) {
        size_t c = t->capf ? 2 * t->capf : 256;
        size_t *v = realloc(t->freel, c * sizeof *v);
        if (!v) {
            o->failed = 1;
            return;
        }
        t->freel = v;
        t->capf = c;
    }
    o->q -= (double)t->b[slot - 1].requested;
    o->al -= (double)t->b[slot - 1].bytes;
    t->b[slot - 1].bytes = 0;
    t->freel[t->nfree++] = slot - 1;
}

static void place(gm_alloc *a, uint64_t handle, uint64_t requested, sblock *b)
{
    b->addr = a->ops->block_addr(a, handle);
    b->bytes = gm_alloc_block_bytes(a, handle, requested);
    b->requested = requested;
}

/* --------------------------------------------------------------- capture */

static int cmp_addr(const void *x, const void *y)
{
    const sblock *a = *(const sblock *const *)x, *b = *(const sblock *const *)y;
    return a->addr < b->addr ? -1 : a->addr > b->addr;
}

static int cmp_seg(const void *x, const void *y)
{
    const gm_seg_info *a = x, *b = y;
    return a->addr < b->addr ? -1 : a->addr > b->addr;
}

static int cmp_seg_size(const void *x, const void *y)
{
    const gm_seg_info *a = *(const gm_seg_info *const *)x, *b = *(const gm_seg_info *const *)y;
    if (a->size != b->size) return a->size > b->size ? -1 : 1;
    return a->addr < b->addr ? -1 : a->addr > b->addr;
}

typedef struct item {
    uint64_t off, size, requested, alloc; /* alloc: allocated bytes of a merged run */
    uint32_t n, site;                     /* n: blocks in it; 0 = a free gap */
    int tenant;
    uint8_t cat, merged;
} item;

#define MAP_ROWS 36 /* rows of a map, about */

typedef struct seg_row {
    const gm_seg_info *g;
    int tenant;
    uint64_t extent;
    size_t r0, r1; /* its items, raw */
    size_t m0, m1; /* ... and merged */
} seg_row;

typedef struct cap_buf {
    item *v;
    size_t n, cap;
    int failed;
} cap_buf;

static void put_item(cap_buf *c, item it)
{
    if (c->failed) return;
    if (c->n == c->cap) {
        size_t k = c->cap ? 2 * c->cap : 1024;
        item *v = realloc(c->v, k * sizeof *v);
        if (!v) {
            c->failed = 1;
            return;
        }
        c->v = v;
        c->cap = k;
    }
    c->v[c->n++] = it;
}

/* Items of one row narrower than thr bytes, next to each other, become one
 * merged run (a lone one stays itself). Appends to out. */
static void merge_row(const item *in, size_t n, uint64_t thr, cap_buf *out)
{
    item acc = {0};
    size_t nacc = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && in[i].size < thr) {
            if (!nacc) {
                acc = in[i];
            } else {
                acc.size = in[i].off + in[i].size - acc.off;
                acc.n += in[i].n;
                acc.alloc += in[i].alloc;
                acc.merged = 1;
            }
            nacc++;
            continue;
        }
        if (nacc) put_item(out, acc);
        nacc = 0;
        if (i < n) put_item(out, in[i]);
    }
}

static json_int_t site_index(json_t *sites, json_t *index, const ten *t, int tenant, uint32_t site)
{
    const char *name = site ? gm_sites_name(&t->sites, site) : NULL;
    if (!name) return 0;
    char key[32];
    snprintf(key, sizeof key, "%d:%u", tenant, site);
    json_t *k = json_object_get(index, key);
    if (k) return json_integer_value(k);
    json_int_t i = (json_int_t)json_array_size(sites) + 1;
    json_array_append_new(sites, gm_json_text(name));
    json_object_set_new(index, key, json_integer(i));
    return i;
}

/* Every tenant's segments, in address order within a tenant (*seg_t: whose). */
static size_t all_segments(obs *o, gm_seg_info **out, int **seg_t)
{
    gm_seg_info *segs = NULL;
    int *who = NULL;
    size_t ns = 0;
    for (size_t k = 0; k < o->nt; k++) {
        gm_alloc *a = o->t[k].a;
        if (!a) continue;
        size_t n = a->ops->segments(a, NULL, 0);
        gm_seg_info *v = realloc(segs, (ns + n + 1) * sizeof *v);
        if (v) segs = v;
        int *w = v ? realloc(who, (ns + n + 1) * sizeof *w) : NULL;
        if (w) who = w;
        if (!v || !w) {
            o->failed = 1;
            break;
        }
        n = a->ops->segments(a, segs + ns, n);
        qsort(segs + ns, n, sizeof *segs, cmp_seg);
        for (size_t i = 0; i < n; i++)
            who[ns + i] = (int)k;
        ns += n;
    }
    *out = segs;
    *seg_t = who;
    return o->failed ? 0 : ns;
}

/* Cut every segment of tenant k (segs[s0, s1)) into blocks and gaps, into
 * raw; the kept ones become rows. */
static void cut_tenant(obs *o, size_t k, const gm_seg_info *segs, size_t s0, size_t s1,
                       const char *keep, cap_buf *raw, seg_row *rows, size_t *nr)
{
    ten *t = &o->t[k];
    size_t nl = 0;
    const sblock **lb = malloc((t->nb + 1) * sizeof *lb);
    if (!lb) {
        o->failed = 1;
        return;
    }
    for (size_t i = 0; i < t->nb; i++)
        if (t->b[i].bytes) lb[nl++] = &t->b[i];
    qsort(lb, nl, sizeof *lb, cmp_addr);
    size_t j = 0;
    for (size_t s = s0; s < s1; s++) {
        const gm_seg_info *g = &segs[s];
        /* an expandable segment's mapped bytes need not start at its base:
         * it owns the blocks up to the next segment */
        uint64_t lim = s + 1 < s1 ? segs[s + 1].addr : UINT64_MAX,
                 end = g->expandable ? lim : g->addr + g->size;
        while (j < nl && lb[j]->addr < g->addr)
            j++;
        uint64_t at = g->addr, ext = g->size;
        size_t r0 = raw->n;
        for (; j < nl && lb[j]->addr < end; j++) {
            const sblock *b = lb[j];
            if (b->addr > at)
                put_item(raw, (item){.off = at - g->addr, .size = b->addr - at, .tenant = (int)k});
            put_item(raw, (item){.off = b->addr - g->addr,
                                 .size = b->bytes,
                                 .requested = b->requested,
                                 .alloc = b->bytes,
                                 .n = 1,
                                 .site = b->site,
                                 .tenant = (int)k,
                                 .cat = b->cat});
            at = b->addr + b->bytes;
        }
        if (at - g->addr > ext) ext = at - g->addr;
        if (g->addr + ext > at)
            put_item(raw,
                     (item){.off = at - g->addr, .size = g->addr + ext - at, .tenant = (int)k});
        if (keep[s])
            rows[(*nr)++] =
                (seg_row){.g = g, .tenant = (int)k, .extent = ext, .r0 = r0, .r1 = raw->n};
        else
            raw->n = r0;
    }
    free(lb);
}

static json_t *map_json(obs *o, const char *kind, uint64_t t_ns, const gm_seg_info *segs, size_t ns,
                        const seg_row *rows, size_t nr, const cap_buf *fin)
{
    uint64_t reserved = 0, allocated = 0, largest = 0;
    for (size_t i = 0; i < ns; i++) {
        reserved += segs[i].size;
        allocated += segs[i].allocated_bytes;
        if (segs[i].largest_free > largest) largest = segs[i].largest_free;
    }
    uint64_t hid_bytes = reserved, hid_alloc = allocated;
    json_t *sites = json_array(), *index = json_object(), *jr = json_array();
    for (size_t i = 0; i < nr; i++) {
        const seg_row *w = &rows[i];
        hid_bytes -= w->g->size;
        hid_alloc -= w->g->allocated_bytes;
        json_t *its = json_array();
        for (size_t m = w->m0; m < w->m1; m++) {
            const item *it = &fin->v[m];
            /* [offset, bytes, kind 0 gap / 1 block / 2 merged, ...] */
            json_t *a = json_array();
            json_array_append_new(a, ju(it->off));
            json_array_append_new(a, ju(it->size));
            if (!it->n) {
                json_array_append_new(a, json_integer(0));
            } else if (it->merged) { /* ..., blocks, allocated bytes */
                json_array_append_new(a, json_integer(2));
                json_array_append_new(a, ju(it->n));
                json_array_append_new(a, ju(it->alloc));
            } else { /* ..., category, site (1 + index in sites; 0: unknown), requested bytes */
                json_array_append_new(a, json_integer(1));
                json_array_append_new(a, json_integer(it->cat));
                json_array_append_new(a, json_integer(site_index(sites, index, &o->t[it->tenant],
                                                                 it->tenant, it->site)));
                json_array_append_new(a, ju(it->requested));
            }
            json_array_append_new(its, a);
        }
        json_array_append_new(jr, json_pack("{s:o,s:o,s:i,s:s,s:b,s:o,s:o,s:o,s:o}", "addr",
                                            ju(w->g->addr), "size", ju(w->g->size), "tenant",
                                            w->tenant, "pool", w->g->small_pool ? "small" : "large",
                                            "expandable", w->g->expandable, "extent", ju(w->extent),
                                            "allocated", ju(w->g->allocated_bytes), "largest_free",
                                            ju(w->g->largest_free), "items", its));
    }
    json_decref(index);
    json_t *m =
        json_pack("{s:s,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "kind", kind, "t_ns", ju(t_ns),
                  "reserved", ju(reserved), "allocated", ju(allocated), "largest_free", ju(largest),
                  "segments", ju(ns), "hidden_segments", ju(ns - nr), "hidden_bytes", ju(hid_bytes),
                  "hidden_allocated", ju(hid_alloc), "rows", jr, "sites", sites);
    return m;
}

/* The map of kind `kind` of the segments segs[ns] (all_segments: seg_t
 * their tenants; both taken) and the tenants' live blocks. */
static json_t *capture_segs(obs *o, const char *kind, uint64_t t_ns, gm_seg_info *segs, int *seg_t,
                            size_t ns)
{
    const gm_seg_info **by_size = malloc((ns + 1) * sizeof *by_size);
    seg_row *rows = malloc((ns + 1) * sizeof *rows);
    char *keep = calloc(ns + 1, 1);
    cap_buf raw = {0}, fin = {0};
    json_t *m = NULL;
    if (o->failed || !by_size || !rows || !keep) {
        o->failed = 1;
        goto out;
    }
    /* the rows drawn: the largest max_rows segments, in address order */
    for (size_t i = 0; i < ns; i++)
        by_size[i] = &segs[i];
    qsort(by_size, ns, sizeof *by_size, cmp_seg_size);
    for (size_t i = 0; i < ns && i < o->o->max_rows; i++)
        keep[by_size[i] - segs] = 1;
    size_t nr = 0;
    for (size_t s0 = 0; s0 < ns && !o->failed;) {
        size_t s1 = s0;
        while (s1 < ns && seg_t[s1] == seg_t[s0])
            s1++;
        cut_tenant(o, (size_t)seg_t[s0], segs, s0, s1, keep, &raw, rows, &nr);
        s0 = s1;
    }
    /* the map is one strip of the drawn segments' bytes in address order,
     * wrapped into rows of row_bytes (about MAP_ROWS rows; a multiple of
     * 2 MiB, PyTorch's segment granularity); what a row cannot show (under
     * 1/480 of it) is merged, coarser until the map fits its budget */
    uint64_t total = 0;
    for (size_t i = 0; i < nr; i++)
        total += rows[i].extent;
    uint64_t gran = 2ull << 20, row_bytes = (total / MAP_ROWS + gran - 1) / gran * gran;
    if (!row_bytes) row_bytes = gran;
    for (uint64_t res = 480;; res /= 2) {
        fin.n = 0;
        for (size_t i = 0; i < nr; i++) {
            rows[i].m0 = fin.n;
            merge_row(raw.v + rows[i].r0, rows[i].r1 - rows[i].r0, row_bytes / res + 1, &fin);
            rows[i].m1 = fin.n;
        }
        if (fin.n + nr <= o->o->max_items || res <= 4 || fin.failed) break;
    }
    if (raw.failed || fin.failed || o->failed) {
        o->failed = 1;
        goto out;
    }
    m = map_json(o, kind, t_ns, segs, ns, rows, nr, &fin);
    if (!m)
        o->failed = 1;
    else
        json_object_set_new(m, "row_bytes", ju(row_bytes));
out:
    free(by_size);
    free(rows);
    free(keep);
    free(raw.v);
    free(fin.v);
    free(segs);
    free(seg_t);
    return m;
}

/* The state of every tenant now, as one map of kind `kind`. */
static json_t *capture(obs *o, const char *kind, uint64_t t_ns)
{
    if (o->failed) return NULL;
    gm_seg_info *segs;
    int *seg_t;
    size_t ns = all_segments(o, &segs, &seg_t);
    return capture_segs(o, kind, t_ns, segs, seg_t, ns);
}

/* One pass (obs.single): what the peak's map is made of, kept at each new
 * peak (the segments and each tenant's live blocks: a copy costs a small
 * part of making the map, and a trace sets a new peak hundreds of times),
 * the map made once, from the last, at the end (peak_map). */
static void snap_clear(peak_snap *p, size_t nt)
{
    free(p->segs);
    free(p->seg_t);
    for (size_t k = 0; p->b && k < nt; k++)
        free(p->b[k]);
    free(p->b);
    free(p->nb);
    *p = (peak_snap){0};
}

static void snap_take(obs *o)
{
    peak_snap *p = &o->snap;
    snap_clear(p, o->nt);
    if (o->failed) return;
    p->ns = all_segments(o, &p->segs, &p->seg_t);
    p->b = calloc(o->nt, sizeof *p->b);
    p->nb = calloc(o->nt, sizeof *p->nb);
    if (o->failed || !p->b || !p->nb) {
        o->failed = 1;
        return;
    }
    for (size_t k = 0; k < o->nt; k++) {
        const ten *t = &o->t[k];
        p->b[k] = malloc((t->nb + 1) * sizeof *p->b[k]);
        if (!p->b[k]) {
            o->failed = 1;
            return;
        }
        for (size_t i = 0; i < t->nb; i++)
            if (t->b[i].bytes) p->b[k][p->nb[k]++] = t->b[i];
    }
    p->t_ns = o->last_t;
    p->pos = json_array_size(o->maps);
    p->taken = 1;
}

/* The peak's map from the last snapshot, into maps where it was taken. */
static void peak_map(obs *o)
{
    peak_snap *p = &o->snap;
    if (!p->taken || o->failed) return;
    sblock **b = malloc(o->nt * sizeof *b);
    size_t *nb = malloc(o->nt * sizeof *nb);
    json_t *m = NULL;
    if (!b || !nb) {
        o->failed = 1;
    } else {
        for (size_t k = 0; k < o->nt; k++) { /* the tenants' blocks then */
            b[k] = o->t[k].b, nb[k] = o->t[k].nb;
            o->t[k].b = p->b[k], o->t[k].nb = p->nb[k];
        }
        m = capture_segs(o, "peak", p->t_ns, p->segs, p->seg_t, p->ns);
        p->segs = NULL, p->seg_t = NULL; /* taken */
        for (size_t k = 0; k < o->nt; k++)
            o->t[k].b = b[k], o->t[k].nb = nb[k];
    }
    free(b);
    free(nb);
    if (m) {
        json_object_set_new(m, "peak_reserved", ju(o->peak));
        json_array_insert_new(o->maps, p->pos, m);
    }
}

/* ----------------------------------------------------------------- hooks */

static void add_map(obs *o, json_t *m)
{
    if (m) json_array_append_new(o->maps, m);
}

/* The map "just after the event that set the peak". With one pass, a
 * snapshot at each new peak instead, the map made from the last one at
 * the end, in its place among the others (peak_map): the map and place
 * two passes give. */
static void capture_peak(obs *o)
{
    o->got_peak = 1;
    if (o->single) { /* the last one's map is made at the end (peak_map) */
        snap_take(o);
        return;
    }
    json_t *m = capture(o, "peak", o->last_t);
    if (m) json_object_set_new(m, "peak_reserved", ju(o->peak));
    add_map(o, m);
}

static void settle_oom(obs *o)
{
    if (!o->pending) return;
    o->pending = 0;
    if (o->pass == 1) o->n_oom_all++;
    if (o->pass == 1 && o->n_oom_t < o->o->max_ooms && o->n_oom_t < ZMAX_OOMS)
        o->oom_t[o->n_oom_t++] = o->pend_t;
    if (o->pass != 2) return;
    if (o->n_oom++ >= o->o->max_ooms) return;
    json_t *m = capture(o, "oom", o->pend_t);
    if (!m) return;
    ten *t = &o->t[o->pend_tenant];
    gm_alloc *a = t->a;
    json_object_set_new(m, "tenant", json_integer(o->pend_tenant));
    json_object_set_new(m, "request", ju(o->pend_size));
    if (a) json_object_set_new(m, "request_block", ju(a->ops->block_size(a, o->pend_size)));
    json_object_set_new(m, "category", json_integer(o->pend_cat));
    const char *site = o->pend_site ? gm_sites_name(&t->sites, o->pend_site) : NULL;
    if (site) json_object_set_new(m, "site", gm_json_text(site));
    /* the failing tenant's largest gap and free bytes: in all its segments,
     * and in those the request could use (its pool, its stream) */
    uint64_t lf = 0, fr = 0, plf = 0, pfr = 0;
    int small = 0;
    if (a) {
        a->ops->segment_size(a, o->pend_size, &small);
        size_t n = a->ops->segments(a, NULL, 0);
        gm_seg_info *v = malloc((n + 1) * sizeof *v);
        if (v) {
            n = a->ops->segments(a, v, n);
            for (size_t i = 0; i < n; i++) {
                uint64_t f = v[i].size - v[i].allocated_bytes;
                if (v[i].largest_free > lf) lf = v[i].largest_free;
                fr += f;
                if (!!v[i].small_pool != !!small || v[i].stream != o->pend_stream) continue;
                if (v[i].largest_free > plf) plf = v[i].largest_free;
                pfr += f;
            }
        }
        free(v);
    }
    json_object_set_new(m, "request_pool", json_string(small ? "small" : "large"));
    json_object_set_new(m, "tenant_largest_free", ju(lf));
    json_object_set_new(m, "tenant_free", ju(fr));
    json_object_set_new(m, "pool_largest_free", ju(plf));
    json_object_set_new(m, "pool_free", ju(pfr));
    add_map(o, m);
}

static void z_put(zlevel *l, int c, const double *v)
{
    for (int k = 0; k < 3; k++) {
        if (isnan(l->mx[k][c]) || v[k] > l->mx[k][c]) l->mx[k][c] = v[k];
        if (isnan(l->mn[k][c]) || v[k] < l->mn[k][c]) l->mn[k][c] = v[k];
    }
}

/* The state v holds from t on: into every level whose window has t. A
 * column without a sample holds the state before it. */
static void z_sample(obs *o, uint64_t t)
{
    double v[3] = {o->q, o->al, (double)o->reserved};
    for (size_t i = 0; i < o->nz; i++) {
        zlevel *l = &o->z[i];
        if (t < l->w0) {
            memcpy(l->pre, v, sizeof v);
            continue;
        }
        if (t >= l->w1) continue;
        int c = (int)((double)(t - l->w0) / (double)(l->w1 - l->w0) * ZCOLS);
        if (c >= ZCOLS) c = ZCOLS - 1;
        const double *prev = l->last_col < 0 ? l->pre : l->last;
        for (int k = l->last_col + 1; k <= c; k++)
            z_put(l, k, prev); /* columns the previous state lasted through */
        z_put(l, c, v);
        l->last_col = c;
        memcpy(l->last, v, sizeof v);
    }
}

static void on_seg(void *ctx, int tenant, uint64_t event_index, const gm_seg_event *ev)
{
    obs *o = ctx;
    ten *t = &o->t[tenant];
    (void)event_index;
    if (gm_op_grows(ev->op)) {
        o->reserved += ev->size;
        t->reserved += ev->size;
        if ((o->pass == 1 || o->single) && o->reserved > o->peak) {
            o->peak = o->reserved;
            o->peak_seq = o->seq;
            o->peak_t = o->last_t;
            o->got_peak = 0; /* single: captured again, after this event */
        }
    } else {
        uint64_t b = ev->size < t->reserved ? ev->size : t->reserved;
        o->reserved -= b;
        t->reserved -= b;
    }
}

static void on_init(void *ctx, int tenant, const gm_init_row *row, gm_alloc *a, uint64_t handle)
{
    obs *o = ctx;
    ten *t = &o->t[tenant];
    t->a = a;
    if (o->pass != 2 || o->failed) return;
    sblock *b = block_new(o, t, row->addr);
    if (!b) return;
    place(a, handle, row->size, b);
    o->q += (double)row->size;
    o->al += (double)b->bytes;
    b->site = row->site;
    b->cat = row->category < GM_CAT_COUNT ? row->category : 0;
}

/* Pass 2 of two ends the replay once it has all it came for: the peak's
 * map, the OOM maps pass 1 counted (up to max_ooms), the --segments-at
 * map, and every zoom window sampled (an event at or past their ends is
 * outside them, and so is every event after it). What follows would
 * change nothing: two passes on a trace whose peak comes early cost
 * about one and a quarter. One pass ends likewise where the run's result
 * says it has seen the last peak and the last OOM (segmap.h, hinted). */
static void halt_when_done(obs *o)
{
    const gm_segmap_opts *p = o->o;
    if (o->pass == 1 && p->hinted && p->hint_span && o->peak == p->hint_peak &&
        o->n_oom_all == p->hint_ooms) {
        /* pass 1 has seen the last peak and OOM (as a one pass below); the
         * span it would have read to the end for comes from the result */
        o->end_t = p->hint_end_ns;
        o->events = p->hint_events;
        o->halt = 1; /* before the next event: nothing counts after these */
        return;
    }
    if (o->pass != 2 || !o->got_peak || (p->at_given && !o->got_at)) return;
    if (o->single) {
        /* one pass (a comparison's maps): the run's result says what the
         * peak and the OOM count will be (segmap.h, hinted); once both are
         * reached, no later peak or OOM comes, and nothing else is drawn */
        if (p->hinted && o->peak == p->hint_peak && o->n_oom == p->hint_ooms) o->halt = 1;
        return;
    }
    uint64_t want = o->n_oom_all < p->max_ooms ? o->n_oom_all : p->max_ooms;
    if (o->n_oom >= want && o->last_t >= o->z_end) o->halt = 1;
}

static void on_event(void *ctx, int tenant, uint64_t index, const gm_event *e)
{
    obs *o = ctx;
    (void)index;
    settle_oom(o); /* the previous event's allocation found no memory */
    o->seq++;
    uint64_t now = e->t_ns + o->t[tenant].offset;
    if ((o->pass == 1 || o->single) && !o->seen_first) o->seen_first = 1, o->first_t = now;
    if (o->pass == 1 || o->single) o->end_t = now, o->events++;
    if (o->pass == 2 && o->seq > 1) z_sample(o, o->last_t);
    if (o->pass == 2 && !o->failed) {
        if (!o->got_peak && o->seq == o->peak_seq + 1) capture_peak(o);
        if (o->o->at_given && !o->got_at && now >= o->first_t + o->o->at_ns) {
            o->got_at = 1;
            add_map(o, capture(o, "at", o->first_t + o->o->at_ns));
        }
    }
    o->last_t = now;
    ten *t = &o->t[tenant];
    switch (e->op) {
    case GM_OP_ALLOC:
        o->pending = 1;
        o->pend_tenant = tenant;
        o->pend_size = e->size;
        o->pend_stream = e->stream;
        o->pend_t = now;
        o->pend_site = e->site;
        o->pend_cat = e->category < GM_CAT_COUNT ? e->category : 0;
        break;
    case GM_OP_FREE:
        if (o->pass == 2) block_free(o, t, e->addr);
        break;
    default:
        break;
    }
    halt_when_done(o);
}

static void on_alloc(void *ctx, int tenant, uint64_t index, const gm_event *e, gm_alloc *a,
                     uint64_t handle)
{
    obs *o = ctx;
    (void)index;
    ten *t = &o->t[tenant];
    t->a = a;
    o->pending = 0;
    if (o->pass != 2 || o->failed) return;
    sblock *b = block_new(o, t, e->addr);
    if (!b) return;
    place(a, handle, e->size, b);
    o->q += (double)e->size;
    o->al += (double)b->bytes;
    b->site = e->site;
    b->cat = e->category < GM_CAT_COUNT ? e->category : 0;
}

static void on_end(void *ctx, int tenant, gm_alloc *a, int status)
{
    obs *o = ctx;
    (void)status;
    o->t[tenant].a = a;
    settle_oom(o);
    if (o->pass == 2) z_sample(o, o->last_t);
    if (o->pass == 2 && !o->got_peak && o->seq == o->peak_seq) capture_peak(o);
    if (o->pass == 2 && o->o->at_given && !o->got_at) { /* after the last event */
        size_t live = 0;
        for (size_t k = 0; k < o->nt; k++)
            live += o->t[k].a != NULL;
        if (live == 1) {
            o->got_at = 1;
            json_t *m = capture(o, "at", o->last_t);
            if (m) json_object_set_new(m, "after_end", json_true());
            if (m) json_object_set_new(m, "asked_ns", ju(o->first_t + o->o->at_ns));
            add_map(o, m);
        }
    }
    /* its memory goes back now (the engine retires it: no driver call or
     * free says so), as the device's series drop it */
    ten *t = &o->t[tenant];
    t->a = NULL;
    o->reserved -= t->reserved; /* o->reserved is the tenants' sum (on_seg) */
    t->reserved = 0;
    for (size_t i = 0; o->pass == 2 && i < t->nb; i++)
        if (t->b[i].bytes) {
            o->q -= (double)t->b[i].requested;
            o->al -= (double)t->b[i].bytes;
        }
}

/* ------------------------------------------------------------------ runs */

static void read_sites(const gm_tenant_spec *s, gm_sites *out)
{
    memset(out, 0, sizeof *out);
    gm_trace_reader *r;
    gm_err e;
    if (!s->path || gm_trace_open(s->path, &r, &e) != GM_OK) return; /* in memory: none */
    if (gm_trace_read_sites(r, out, &e) != GM_OK) memset(out, 0, sizeof *out);
    gm_trace_close(r);
}

/* The window of width W centred on c, inside the trace's span. */
static uint64_t z_start(const obs *o, uint64_t c, uint64_t W)
{
    uint64_t w0 = c > o->first_t + W / 2 ? c - W / 2 : o->first_t;
    if (w0 + W > o->end_t + 1) w0 = o->end_t + 1 > W ? o->end_t + 1 - W : 0;
    return w0 < o->first_t ? o->first_t : w0;
}

/* The zoom pyramid's windows: each 4x narrower than the one before, down to
 * one holding about 100 events (at the trace's mean rate) or 100 ns;
 * centred on the peak of reserved memory, then on each of the first OOMs
 * (group k: the k-th). An OOM's window is left out where one of the same
 * width already holds the middle three quarters of it (an OOM at the peak,
 * or next to an earlier one): a zoom there is served by that one. */
static int z_setup(obs *o, gm_err *err)
{
    uint64_t span = o->end_t - o->first_t + 1;
    size_t groups = 1 + o->n_oom_t;
    o->z = calloc(ZMAX_LEVELS * groups, sizeof *o->z);
    if (!o->z) return gm_errf(err, GM_ENOMEM, "out of memory");
    for (size_t g = 0; g < groups; g++) {
        uint64_t c = g ? o->oom_t[g - 1] : o->peak_t;
        double w = (double)span, ev = (double)o->events;
        for (size_t k = 0; k < ZMAX_LEVELS && ev > ZCOLS / 4.0; k++) {
            w /= 4;
            ev /= 4;
            if (w < 100) break;
            uint64_t W = (uint64_t)w, w0 = z_start(o, c, W);
            uint64_t m0 = c > W * 3 / 8 ? c - W * 3 / 8 : 0, m1 = c + W * 3 / 8;
            if (m0 < w0) m0 = w0;
            if (m1 > w0 + W) m1 = w0 + W;
            int covered = 0;
            for (size_t i = 0; i < o->nz && !covered; i++)
                covered = o->z[i].w1 - o->z[i].w0 == W && o->z[i].w0 <= m0 && o->z[i].w1 >= m1;
            if (covered) continue;
            zlevel *l = &o->z[o->nz++];
            l->w0 = w0;
            l->w1 = w0 + W;
            if (l->w1 > o->z_end) o->z_end = l->w1;
            l->group = (int)g;
            l->last_col = -1;
            for (int i = 0; i < 3; i++)
                for (int j = 0; j < ZCOLS; j++)
                    l->mx[i][j] = l->mn[i][j] = NAN;
        }
    }
    return GM_OK;
}

static json_t *z_series(const double *v)
{
    json_t *a = json_array();
    for (int j = 0; j < ZCOLS; j++)
        json_array_append_new(a, json_integer((json_int_t)v[j]));
    return a;
}

static json_t *z_json(obs *o)
{
    json_t *lv = json_array();
    for (size_t i = 0; i < o->nz; i++) {
        zlevel *l = &o->z[i];
        const double *prev = l->last_col < 0 ? l->pre : l->last;
        for (int k = l->last_col + 1; k < ZCOLS; k++)
            z_put(l, k, prev); /* the state after the window's last sample */
        json_t *j = json_pack("{s:o,s:o,s:s,s:o,s:o,s:o,s:o}", "t0", ju(l->w0), "t1", ju(l->w1),
                              "around", l->group ? "oom" : "peak", "requested", z_series(l->mx[0]),
                              "requested_min", z_series(l->mn[0]), "allocated", z_series(l->mx[1]),
                              "reserved", z_series(l->mx[2]));
        if (j && l->group) json_object_set_new(j, "oom", json_integer(l->group - 1));
        json_array_append_new(lv, j);
    }
    json_t *oo = json_array();
    for (size_t k = 0; k < o->n_oom_t; k++)
        json_array_append_new(oo, ju(o->oom_t[k]));
    return json_pack("{s:o,s:o,s:o}", "center_ns", ju(o->peak_t), "oom_ns", oo, "levels", lv);
}

static int one_pass(const gm_sim_config *cfg, obs *o, gm_err *err)
{
    gm_sim_config c = *cfg;
    c.seg_hook = on_seg;
    c.seg_hook_ctx = o;
    c.alloc_hook = on_alloc;
    c.alloc_hook_ctx = o;
    c.event_hook = on_event;
    c.event_hook_ctx = o;
    c.init_hook = on_init;
    c.init_hook_ctx = o;
    c.end_hook = on_end;
    c.end_hook_ctx = o;
    c.progress = NULL;
    c.step_done = NULL;
    c.halt = &o->halt;
    o->halt = 0;
    o->seq = o->reserved = 0;
    o->pending = 0;
    o->last_t = 0;
    for (size_t k = 0; k < o->nt; k++)
        o->t[k].a = NULL, o->t[k].reserved = 0;
    gm_sim_result *r = NULL;
    int rc = gm_simulate(&c, &r, err);
    if (o->kept && rc == GM_OK) {
        gm_sim_result_free(o->kept[o->pass - 1]);
        o->kept[o->pass - 1] = r;
    } else {
        gm_sim_result_free(r);
    }
    if (rc == GM_OK && o->failed) rc = gm_errf(err, GM_ENOMEM, "out of memory (segment maps)");
    return rc;
}

/* gm_segmap_json, and with kept (2 slots, NULL when not wanted) each
 * pass's simulation result, [pass - 1] (the caller frees them): whether
 * another policy's maps are these (attach_all). */
static int segmap_json(const gm_sim_config *cfg, const gm_segmap_opts *opts, json_t **out,
                       gm_sim_result **kept, gm_err *err)
{
    *out = NULL;
    for (size_t k = 0; k < cfg->n_tenants; k++)
        if (cfg->tenants[k].repeat > 1) {
            *out = json_pack("{s:[],s:s}", "maps", "skipped",
                             "no segment maps for --repeat (a trace's addresses repeat per pass)");
            return *out ? GM_OK : gm_errf(err, GM_ENOMEM, "out of memory");
        }
    obs o = {.o = opts, .nt = cfg->n_tenants, .kept = kept};
    o.t = calloc(o.nt ? o.nt : 1, sizeof *o.t);
    o.maps = json_array();
    if (!o.t || !o.maps) {
        free(o.t);
        json_decref(o.maps);
        return gm_errf(err, GM_ENOMEM, "out of memory");
    }
    int rc = GM_OK;
    for (size_t k = 0; k < o.nt && rc == GM_OK; k++) {
        o.t[k].offset = cfg->tenants[k].offset_ns;
        if (gm_addrmap_init(&o.t[k].live, 1024)) rc = gm_errf(err, GM_ENOMEM, "out of memory");
        read_sites(&cfg->tenants[k], &o.t[k].sites);
    }
    /* The zoom pyramid's windows are placed from pass 1 (the peak's and
     * the OOMs' times, the span). Without it one pass finds the peak and
     * captures as it goes: a map for each new peak, the last one kept
     * (capture_peak), the same maps in the same order as two passes. */
    o.single = !opts->zoom;
    o.pass = o.single ? 2 : 1;
    if (rc == GM_OK && !o.single) rc = one_pass(cfg, &o, err);
    o.pass = 2;
    if (rc == GM_OK && opts->zoom) rc = z_setup(&o, err);
    if (rc == GM_OK) rc = one_pass(cfg, &o, err);
    if (rc == GM_OK && o.single) {
        peak_map(&o);
        if (o.failed) rc = gm_errf(err, GM_ENOMEM, "out of memory (segment maps)");
    }
    snap_clear(&o.snap, o.nt);
    uint64_t peak = o.peak;
    if (rc == GM_OK) {
        *out = json_pack("{s:O,s:o,s:o}", "maps", o.maps, "ooms_total",
                         ju(o.single ? o.n_oom : o.n_oom_all), "peak_reserved_bytes", ju(peak));
        if (!*out)
            rc = gm_errf(err, GM_ENOMEM, "out of memory");
        else if (o.nz)
            json_object_set_new(*out, "zoom", z_json(&o));
    }
    free(o.z);
    json_decref(o.maps);
    for (size_t k = 0; k < o.nt; k++) {
        free(o.t[k].b);
        free(o.t[k].freel);
        gm_addrmap_free(&o.t[k].live);
        gm_sites_free(&o.t[k].sites);
    }
    free(o.t);
    return rc;
}

int gm_segmap_json(const gm_sim_config *cfg, const gm_segmap_opts *opts, json_t **out, gm_err *err)
{
    return segmap_json(cfg, opts, out, NULL, err);
}

/* One result's maps, simulated with its own policy and allocator. */
typedef struct attach_job {
    gm_sim_config c;
    gm_segmap_opts o; /* with what its result reached (hinted) */
    json_t *m;
    gm_err err;
    int rc;
    long lead;              /* -1, or the job whose maps these may be (study/same_run.h) */
    gm_sim_result *kept[2]; /* a lead's passes' results */
} attach_job;

typedef struct attach_ctx {
    attach_job *job;
    const size_t *pick; /* the jobs this round runs */
} attach_ctx;

static void attach_run(void *ctx, size_t k)
{
    attach_ctx *x = ctx;
    size_t i = x->pick[k];
    attach_job *j = &x->job[i];
    j->rc = segmap_json(&j->c, &j->o, &j->m, j->lead == (long)i ? j->kept : NULL, &j->err);
}

/* Whether job i's maps are its lead's: the lead's passes (each as far as
 * it went) are i's policy's too (study/same_run.h), made with the same
 * options (the hints of the same run's result are the same). */
static int maps_shared(const attach_job *job, size_t i)
{
    const attach_job *j = &job[i];
    if (j->lead < 0 || j->lead == (long)i) return 0;
    const attach_job *l = &job[j->lead];
    if (l->rc != GM_OK || !l->m || !l->kept[1] || memcmp(&l->o, &j->o, sizeof j->o)) return 0;
    for (int p = 0; p < 2; p++)
        if (l->kept[p] && !gm_same_run(l->kept[p], j->c.policy)) return 0;
    return 1;
}

static int same_str(const char *a, const char *b)
{
    return a == b || (a && b && !strcmp(a, b));
}

/* gm_same_run_leads' questions of the jobs: their configuration is the
 * page's but the policy, the allocator and its settings. */
static const char *job_spec(const void *ctx, size_t i)
{
    return ((const attach_job *)ctx)[i].c.policy;
}

static int job_same_config(const void *ctx, size_t j, size_t i)
{
    const attach_job *a = &((const attach_job *)ctx)[j], *b = &((const attach_job *)ctx)[i];
    return same_str(a->c.allocator, b->c.allocator) && same_str(a->c.alloc_conf, b->c.alloc_conf);
}

/* Run the jobs, the maps of a follower taken from its lead's where they
 * are the same (maps_shared): the leads and the jobs that may not share
 * first, then the followers whose lead's maps are not theirs. */
static void attach_jobs(attach_job *job, size_t n, const double *est, int threads)
{
    size_t *pick = malloc((n ? n : 1) * sizeof *pick);
    double *pc = malloc((n ? n : 1) * sizeof *pc);
    long *lead = malloc((n ? n : 1) * sizeof *lead);
    if (!pick || !pc || !lead) { /* out of memory: each its own, in order */
        for (size_t i = 0; i < n; i++)
            job[i].rc = segmap_json(&job[i].c, &job[i].o, &job[i].m, NULL, &job[i].err);
        free(pick);
        free(pc);
        free(lead);
        return;
    }
    gm_same_run_leads(n, job_spec, job_same_config, job, lead);
    for (size_t i = 0; i < n; i++)
        job[i].lead = lead[i];
    free(lead);
    attach_ctx ctx = {job, pick};
    for (int phase = 0; phase < 2; phase++) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            int follows = job[i].lead >= 0 && job[i].lead != (long)i;
            if (phase == 0 ? follows : !follows) continue;
            if (phase == 1 && maps_shared(job, i)) {
                job[i].m = json_deep_copy(job[job[i].lead].m);
                job[i].rc = job[i].m ? GM_OK : gm_errf(&job[i].err, GM_ENOMEM, "out of memory");
                continue;
            }
            pick[k] = i;
            pc[k++] = est ? est[i] : 1;
        }
        gm_parallel_for_cost(k, est ? pc : NULL, k > 1 ? threads : 1, attach_run, &ctx);
    }
    for (size_t i = 0; i < n; i++)
        for (int p = 0; p < 2; p++)
            gm_sim_result_free(job[i].kept[p]);
    free(pick);
    free(pc);
}

void gm_segmap_hint(gm_segmap_opts *o, json_t *res)
{
    json_t *dev = json_object_get(res, "device");
    json_t *peak = json_object_get(dev, "peak_reserved_bytes"),
           *ooms = json_object_get(dev, "oom_count");
    o->hinted = json_is_integer(peak) && json_is_integer(ooms) && json_integer_value(peak) >= 0 &&
                json_integer_value(ooms) >= 0;
    o->hint_peak = o->hinted ? (uint64_t)json_integer_value(peak) : 0;
    o->hint_ooms = o->hinted ? (uint64_t)json_integer_value(ooms) : 0;
    /* the span (segmap.h, hint_span): the device's last time is the last
     * event's unless a tenant without events started (at its offset) */
    json_t *last = json_object_get(dev, "t_last_ns"), *events = json_object_get(res, "events"),
           *tenants = json_object_get(res, "tenants");
    int span = o->hinted && json_is_integer(last) && json_integer_value(last) >= 0 &&
               json_is_integer(events) && json_integer_value(events) > 0 &&
               json_array_size(tenants) > 0;
    for (size_t i = 0; span && i < json_array_size(tenants); i++) {
        json_t *n = json_object_get(json_array_get(tenants, i), "trace_events");
        span = json_is_integer(n) && json_integer_value(n) > 0;
    }
    o->hint_span = span;
    o->hint_end_ns = span ? (uint64_t)json_integer_value(last) : 0;
    o->hint_events = span ? (uint64_t)json_integer_value(events) : 0;
}

/* res's "segment_maps": m, unless m's replay did not reach res's peak. */
static void attach_maps(json_t *res, json_t *m)
{
    json_t *want = json_object_get(json_object_get(res, "device"), "peak_reserved_bytes");
    json_t *got = json_object_get(m, "peak_reserved_bytes");
    if (json_is_integer(want) && json_is_integer(got) &&
        json_array_size(json_object_get(m, "maps")) &&
        json_integer_value(want) != json_integer_value(got)) {
        json_array_clear(json_object_get(m, "maps"));
        json_object_set_new(m, "skipped",
                            json_string("the replay for the segment maps did not reach this "
                                        "run's peak reserved bytes"));
    }
    json_object_set_new(res, "segment_maps", m);
}

/* The segment maps of gm_segmap_page_attach. */
static int attach_all(json_t *result, const gm_sim_config *cfg, const gm_segmap_opts *o,
                      int threads, gm_err *err)
{
    json_t *results = json_object_get(result, "results");
    size_t n = json_is_array(results) ? json_array_size(results) : 1;
    attach_job *job = calloc(n, sizeof *job);
    char **pol = calloc(n, sizeof *pol);
    if (!job || !pol) {
        free(job);
        free(pol);
        return gm_errf(err, GM_ENOMEM, "out of memory");
    }
    /* read in this thread; the jobs only simulate, each into its own m */
    int named = 1;
    for (size_t i = 0; i < n; i++) {
        json_t *res = json_is_array(results) ? json_array_get(results, i) : result;
        json_t *in = json_object_get(res, "inputs");
        const char *p = json_string_value(json_object_get(in, "policy")),
                   *al = json_string_value(json_object_get(in, "allocator"));
        job[i].c = *cfg;
        job[i].o = *o;
        gm_segmap_hint(&job[i].o, res);
        if (p) job[i].c.policy = p;
        if (al) job[i].c.allocator = al;
        pol[i] = (char *)job[i].c.policy;
        named = named && pol[i];
    }
    /* a comparison's policies cost what they cost in it (study/pool.h) */
    double *est = named ? gm_policy_spec_costs(pol, n, 1) : NULL;
    attach_jobs(job, n, est, n > 1 ? threads : 1);
    free(est);
    int rc = GM_OK;
    for (size_t i = 0; i < n; i++) {
        json_t *res = json_is_array(results) ? json_array_get(results, i) : result;
        if (rc == GM_OK && job[i].rc != GM_OK) {
            rc = job[i].rc;
            *err = job[i].err;
        }
        if (rc == GM_OK)
            attach_maps(res, job[i].m);
        else
            json_decref(job[i].m);
    }
    free(job);
    free(pol);
    return rc;
}

int gm_segmap_page_attach(json_t *result, const gm_sim_config *cfg, const gm_segmap_opts *o,
                          int threads, gm_trace_stats_bg *bg, gm_err *err)
{
    if (!bg && threads != 1 && gm_trace_stats_start(cfg, &bg) != GM_OK)
        return gm_errf(err, GM_ENOMEM, "out of memory");
    int sm = attach_all(result, cfg, o, threads, err);
    gm_err serr = {0};
    int st = gm_trace_stats_finish(bg, result, cfg, &serr);
    if (st != GM_OK) { /* the statistics' error first, as when they came first */
        *err = serr;
        return st;
    }
    return sm;
}
