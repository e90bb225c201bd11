/*
 * trace_allocs.c - the largest allocations of a trace with their lifetimes,
 * and what the rest held over time (trace_stats.h, "allocations_top").
 *
 * Two passes over the events (the reader rewinds between them):
 *  1. every allocation's lifetime (t_alloc, t_free) is known at its free
 *     (or at the end: still live); GM_TOP_ALLOCS of them are kept in
 *     min-heaps (pick, below), so memory is O(live + N);
 *  2. with the kept set known, the bytes of every other live allocation,
 *     maximum per time column, over the same columns the report draws.
 * Lifetimes are the trace's: every policy frees the same tensors at the same
 * events, so one band chart serves every run of a comparison.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trace_stats.h"
#include "base/addrmap.h"
#include "traces/live_slots.h"
#include "traces/trace.h"

#define NCOL 400          /* the report's timeline columns (html_int.h REP_NCOL) */
#define LIVE (1ull << 63) /* a live size's mark: no entry is 0 (traces/live_slots.h) */

typedef struct alloc_rec {
    uint64_t seq; /* allocation ordinal: initial blocks first, then events */
    uint64_t t0, t1;
    uint64_t size;
    uint32_t site;
    uint8_t cat;
    uint8_t freed;
    double key; /* what its heap ranks by */
} alloc_rec;

typedef struct heap {
    alloc_rec *v;
    size_t n, cap;
} heap;

static int rec_less(const alloc_rec *a, const alloc_rec *b)
{
    if (a->key != b->key) return a->key < b->key;
    return a->seq > b->seq; /* of equal sizes, the earlier one is kept */
}

static void heap_offer(heap *h, const alloc_rec *r)
{
    if (h->cap == 0) return;
    if (h->n == h->cap) {
        if (!rec_less(&h->v[0], r)) return;
        h->v[0] = *r; /* replace the smallest, sift down */
        for (size_t i = 0;;) {
            size_t l = 2 * i + 1, m = i;
            if (l < h->n && rec_less(&h->v[l], &h->v[m])) m = l;
            if (l + 1 < h->n && rec_less(&h->v[l + 1], &h->v[m])) m = l + 1;
            if (m == i) break;
            alloc_rec t = h->v[i];
            h->v[i] = h->v[m];
            h->v[m] = t;
            i = m;
        }
        return;
    }
    size_t i = h->n++;
    h->v[i] = *r;
    while (i > 0 && rec_less(&h->v[i], &h->v[(i - 1) / 2])) {
        alloc_rec t = h->v[i];
        h->v[i] = h->v[(i - 1) / 2];
        h->v[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
}

/* What is kept: half the bands for the allocations that hold the most
 * memory over time (bytes x lifetime: weights, optimizer state, long-lived
 * activations), half spread over NSLICE equal slices of the trace by
 * allocation time, the largest of each, so a long trace has bands all
 * along it, not only where its first equal-sized tensors were. */
#define NSLICE 40

typedef struct pick {
    heap all;
    heap slice[NSLICE];
    uint64_t t0, t1;
} pick;

static int pick_init(pick *k, size_t top, uint64_t t0, uint64_t t1)
{
    size_t per = top >= 4 * NSLICE ? (top / 2) / NSLICE : 0;
    memset(k, 0, sizeof *k);
    k->t0 = t0;
    k->t1 = t1 > t0 ? t1 : t0 + 1;
    k->all.cap = top - per * NSLICE;
    k->all.v = calloc(k->all.cap ? k->all.cap : 1, sizeof(alloc_rec));
    if (!k->all.v) return GM_ENOMEM;
    for (int i = 0; i < NSLICE; i++) {
        k->slice[i].cap = per;
        k->slice[i].v = calloc(per ? per : 1, sizeof(alloc_rec));
        if (!k->slice[i].v) return GM_ENOMEM;
    }
    return GM_OK;
}

static void pick_free(pick *k)
{
    free(k->all.v);
    for (int i = 0; i < NSLICE; i++)
        free(k->slice[i].v);
}

/* r's lifetime is known (t1 set). */
static void pick_offer(pick *k, const alloc_rec *r)
{
    alloc_rec a = *r;
    a.key = (double)a.size * ((double)(a.t1 > a.t0 ? a.t1 - a.t0 : 0) + 1);
    heap_offer(&k->all, &a);
    double f = (double)(a.t0 > k->t0 ? a.t0 - k->t0 : 0) / (double)(k->t1 - k->t0);
    int i = f >= 1 ? NSLICE - 1 : (int)(f * NSLICE);
    a.key = (double)a.size;
    heap_offer(&k->slice[i], &a);
}

static int cmp_rec_seq(const void *x, const void *y)
{
    const alloc_rec *a = x, *b = y;
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* Everything kept, each once, into out (room for the total capacity). */
static size_t pick_collect(const pick *k, alloc_rec *out)
{
    size_t n = 0;
    memcpy(out, k->all.v, k->all.n * sizeof *out);
    n = k->all.n;
    for (int i = 0; i < NSLICE; i++) {
        memcpy(out + n, k->slice[i].v, k->slice[i].n * sizeof *out);
        n += k->slice[i].n;
    }
    qsort(out, n, sizeof *out, cmp_rec_seq);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (!m || out[m - 1].seq != out[i].seq) out[m++] = out[i];
    return m;
}

/* Live allocations of pass 1 (traces/live_slots.h) -> index into a pool
 * of records + 1. */
typedef struct live1 {
    gm_live map;
    alloc_rec *pool;
    size_t n, cap;
    uint64_t *free_ix;
    size_t nfree, capfree;
} live1;

static int live_add(live1 *l, uint32_t id, uint64_t addr, const alloc_rec *r)
{
    size_t ix;
    if (l->nfree) {
        ix = (size_t)l->free_ix[--l->nfree];
    } else {
        if (l->n == l->cap) {
            size_t c = l->cap ? 2 * l->cap : 1024;
            alloc_rec *p = realloc(l->pool, c * sizeof *p);
            if (!p) return GM_ENOMEM;
            l->pool = p;
            l->cap = c;
        }
        ix = l->n++;
    }
    l->pool[ix] = *r;
    return gm_live_put(&l->map, id, addr, (uint64_t)ix + 1);
}

/* Remove (id, addr); 1 and its record in *out when it was live. */
static int live_take(live1 *l, uint32_t id, uint64_t addr, alloc_rec *out)
{
    uint64_t ix;
    if (!gm_live_del(&l->map, id, addr, &ix)) return 0;
    ix--;
    *out = l->pool[ix];
    l->pool[ix].seq = UINT64_MAX; /* no longer live */
    if (l->nfree == l->capfree) {
        size_t c = l->capfree ? 2 * l->capfree : 1024;
        uint64_t *p = realloc(l->free_ix, c * sizeof *p);
        if (!p) return 1; /* the slot is lost, not the record */
        l->free_ix = p;
        l->capfree = c;
    }
    l->free_ix[l->nfree++] = ix;
    return 1;
}

static int cmp_seq(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}

static int is_top(const uint64_t *seqs, size_t n, uint64_t seq)
{
    return n && bsearch(&seq, seqs, n, sizeof seq, cmp_seq) != NULL;
}

typedef struct pass2 {
    gm_live live; /* live allocations not kept (traces/live_slots.h) -> size | LIVE */
    uint64_t rest;
    double col[NCOL];
    int cur;
    uint64_t t0, t1;
} pass2;

/* Move to the column of time t: the columns passed held what was live
 * before this event. */
static void p2_advance(pass2 *p, uint64_t t)
{
    double span = (double)(p->t1 - p->t0);
    int c = span > 0 ? (int)((double)(t - p->t0) / span * NCOL) : 0;
    if (c >= NCOL) c = NCOL - 1;
    if (c < 0) c = 0;
    while (p->cur < c) {
        p->cur++;
        p->col[p->cur] = (double)p->rest;
    }
}

/* After an event: its column holds the most live at any of its events. */
static void p2_note(pass2 *p)
{
    if ((double)p->rest > p->col[p->cur]) p->col[p->cur] = (double)p->rest;
}

static int cmp_size_desc(const void *x, const void *y)
{
    const alloc_rec *a = x, *b = y;
    if (a->size != b->size) return a->size > b->size ? -1 : 1;
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static json_t *site_text(const gm_sites *s, uint32_t site)
{
    const char *n = gm_sites_name(s, site);
    json_t *j = json_string(n ? n : "");
    return j ? j : json_string("?");
}

/* The JSON object; recs sorted by size, largest first. */
static json_t *to_json(alloc_rec *recs, size_t n, uint64_t total, const pass2 *p,
                       const gm_sites *sites)
{
    json_t *rows = json_array(), *names = json_array(), *rest = json_array();
    json_t *index = json_object(); /* site -> position in names */
    for (size_t i = 0; i < n; i++) {
        const alloc_rec *r = &recs[i];
        json_int_t sx = -1;
        if (r->site && gm_sites_name(sites, r->site)) {
            char key[16];
            snprintf(key, sizeof key, "%u", r->site);
            json_t *k = json_object_get(index, key);
            if (!k) {
                k = json_integer((json_int_t)json_array_size(names));
                json_object_set_new(index, key, k);
                json_array_append_new(names, site_text(sites, r->site));
            }
            sx = json_integer_value(k);
        }
        json_array_append_new(rows, json_pack("[I,I,I,s,I]", (json_int_t)r->t0,
                                              r->freed ? (json_int_t)r->t1 : (json_int_t)-1,
                                              (json_int_t)r->size, gm_category_name(r->cat), sx));
    }
    for (int c = 0; c < NCOL; c++)
        json_array_append_new(rest, json_integer((json_int_t)p->col[c]));
    json_decref(index);
    return json_pack("{s:I,s:I,s:I,s:I,s:o,s:o,s:o}", "t0_ns", (json_int_t)p->t0, "t1_ns",
                     (json_int_t)p->t1, "allocations", (json_int_t)total, "shown", (json_int_t)n,
                     "rows", rows, "sites", names, "rest_max_bytes", rest);
}

/* The state between the two passes (trace_stats.h, gm_trace_allocs_begin). */
struct gm_trace_allocs {
    gm_sites sites;
    gm_init_row *rows;
    size_t nrows;
    heap h; /* what is drawn */
    pick k;
    int k_ok;
    live1 l;
    pass2 p;
    gm_event *buf;
    uint64_t seq, t_first, t_last, nev;
};

void gm_trace_allocs_free(gm_trace_allocs *x)
{
    if (!x) return;
    free(x->buf);
    free(x->rows);
    free(x->h.v);
    pick_free(&x->k);
    free(x->l.pool);
    free(x->l.free_ix);
    gm_live_free(&x->l.map);
    gm_live_free(&x->p.live);
    gm_sites_free(&x->sites);
    free(x);
}

int gm_trace_allocs_begin(gm_trace_reader *r, size_t top, uint64_t t_first_hint,
                          uint64_t t_last_hint, gm_trace_allocs **out, gm_err *err)
{
    *out = NULL;
    gm_trace_allocs *x = calloc(1, sizeof *x);
    if (!x) return gm_errf(err, GM_ENOMEM, "out of host memory");
    x->h = (heap){calloc(top ? top : 1, sizeof(alloc_rec)), 0, top};
    int krc = pick_init(&x->k, top, t_first_hint, t_last_hint);
    x->buf = malloc(GM_TRACE_CHUNK_EVENTS * sizeof *x->buf);
    int rc = GM_OK, ids = gm_trace_meta_get(r)->dense_ids;
    if (krc || !x->h.v || !x->buf || gm_live_init(&x->l.map, ids) || gm_live_init(&x->p.live, ids))
        rc = gm_errf(err, GM_ENOMEM, "out of host memory");
    if (rc == GM_OK) rc = gm_trace_read_sites(r, &x->sites, err);
    if (rc == GM_OK) rc = gm_trace_read_initial(r, &x->rows, &x->nrows, err);
    if (rc == GM_OK) gm_live_seeded(&x->l.map, x->rows, x->nrows);
    uint32_t k = 0;
    for (size_t i = 0; rc == GM_OK && i < x->nrows; i++) { /* pass 1 starts with them */
        const gm_init_row *w = &x->rows[i];
        if (w->kind != GM_INIT_BLOCK) continue;
        uint32_t id = gm_live_block_id(&x->l.map, &k); /* its slot, if the trace numbered it */
        if (gm_live_get(&x->l.map, id, w->addr)) continue;
        alloc_rec a = {
            x->seq++, 0, 0, w->size, w->site, w->category < GM_CAT_COUNT ? w->category : 0, 0, 0};
        if (live_add(&x->l, id, w->addr, &a)) rc = gm_errf(err, GM_ENOMEM, "out of host memory");
    }
    if (rc != GM_OK) {
        gm_trace_allocs_free(x);
        return rc;
    }
    *out = x;
    return GM_OK;
}

int gm_trace_allocs_feed(gm_trace_allocs *x, const gm_event *ev, size_t n, gm_err *err)
{
    for (size_t i = 0; i < n; i++) {
        const gm_event *e = &ev[i];
        if (x->nev++ == 0) x->t_first = e->t_ns;
        x->t_last = e->t_ns;
        alloc_rec a;
        if (e->op != GM_OP_ALLOC && e->op != GM_OP_FREE) continue;
        if (e->op == GM_OP_ALLOC) gm_live_count_alloc(&x->l.map);
        if (live_take(&x->l, e->id, e->addr, &a)) { /* a free, or an address reused live */
            a.t1 = e->t_ns;
            a.freed = 1;
            pick_offer(&x->k, &a);
        }
        if (e->op == GM_OP_ALLOC) {
            alloc_rec b = {x->seq++, e->t_ns, 0,
                           e->size,  e->site, e->category < GM_CAT_COUNT ? e->category : 0,
                           0,        0};
            if (live_add(&x->l, e->id, e->addr, &b))
                return gm_errf(err, GM_ENOMEM, "out of host memory");
        }
    }
    return GM_OK;
}

int gm_trace_allocs_finish(gm_trace_allocs *x, gm_trace_reader *r, json_t **out, gm_err *err)
{
    *out = NULL;
    heap *h = &x->h;
    pass2 *p = &x->p;
    uint64_t *seqs = NULL, seq = 0, t_first = x->t_first, t_last = x->t_last;
    int rc = GM_OK;
    for (size_t i = 0; i < x->l.n; i++) /* still live at the end */
        if (x->l.pool[i].seq != UINT64_MAX) {
            x->l.pool[i].t1 = t_last;
            pick_offer(&x->k, &x->l.pool[i]);
        }
    h->n = pick_collect(&x->k, h->v);
    for (size_t i = 0; i < h->n; i++) /* initial blocks: live from the first event */
        if (h->v[i].t0 < t_first) h->v[i].t0 = t_first;
    /* pass 2 */
    seqs = malloc((h->n ? h->n : 1) * sizeof *seqs);
    if (!seqs) return gm_errf(err, GM_ENOMEM, "out of host memory");
    for (size_t i = 0; i < h->n; i++)
        seqs[i] = h->v[i].seq;
    qsort(seqs, h->n, sizeof *seqs, cmp_seq);
    p->t0 = t_first;
    p->t1 = t_last > t_first ? t_last : t_first + 1;
    gm_live_clear(&x->l.map);
    gm_live_seeded(&p->live, x->rows, x->nrows);
    uint32_t k = 0;
    for (size_t i = 0; i < x->nrows; i++) {
        const gm_init_row *w = &x->rows[i];
        if (w->kind != GM_INIT_BLOCK) continue;
        uint32_t id = gm_live_block_id(&p->live, &k);
        /* each address once: seeded, the addresses differ; else the seen ones by address */
        if (!p->live.seeded) {
            if (gm_live_get(&x->l.map, 0, w->addr)) continue;
            gm_live_put(&x->l.map, 0, w->addr, 1);
        }
        if (!is_top(seqs, h->n, seq++)) {
            if (gm_live_put(&p->live, id, w->addr, w->size | LIVE) == GM_OK) p->rest += w->size;
        }
    }
    p->col[0] = (double)p->rest;
    if (gm_trace_rewind(r) != GM_OK) {
        rc = gm_errf(err, GM_EIO, "%s: cannot read the events again", gm_trace_path(r));
        goto done;
    }
    for (int64_t n; (n = gm_trace_read(r, x->buf, GM_TRACE_CHUNK_EVENTS, err)) != 0;) {
        if (n < 0) {
            rc = (int)n;
            goto done;
        }
        for (int64_t i = 0; i < n; i++) {
            const gm_event *e = &x->buf[i];
            uint64_t v;
            if (e->op != GM_OP_ALLOC && e->op != GM_OP_FREE) continue;
            p2_advance(p, e->t_ns);
            if (e->op == GM_OP_ALLOC) gm_live_count_alloc(&p->live);
            if (gm_live_del(&p->live, e->id, e->addr, &v)) p->rest -= v & ~LIVE;
            if (e->op == GM_OP_ALLOC && !is_top(seqs, h->n, seq++) &&
                gm_live_put(&p->live, e->id, e->addr, e->size | LIVE) == GM_OK)
                p->rest += e->size;
            p2_note(p);
        }
    }
    while (p->cur < NCOL - 1)
        p->col[++p->cur] = (double)p->rest;
    qsort(h->v, h->n, sizeof *h->v, cmp_size_desc);
    *out = to_json(h->v, h->n, seq, p, &x->sites);
    if (!*out) rc = gm_errf(err, GM_ENOMEM, "out of host memory");
done:
    free(seqs);
    return rc;
}

int gm_trace_allocs_json(gm_trace_reader *r, size_t top, uint64_t t_first_hint,
                         uint64_t t_last_hint, json_t **out, gm_err *err)
{
    *out = NULL;
    gm_trace_allocs *x = NULL;
    int rc = gm_trace_allocs_begin(r, top, t_first_hint, t_last_hint, &x, err);
    if (rc == GM_OK && gm_trace_rewind(r) != GM_OK) /* pass 1 */
        rc = gm_errf(err, GM_EIO, "%s: cannot read the events again", gm_trace_path(r));
    for (int64_t n; rc == GM_OK && (n = gm_trace_read(r, x->buf, GM_TRACE_CHUNK_EVENTS, err)) != 0;)
        rc = n < 0 ? (int)n : gm_trace_allocs_feed(x, x->buf, (size_t)n, err);
    if (rc == GM_OK) rc = gm_trace_allocs_finish(x, r, out, err);
    gm_trace_allocs_free(x);
    return rc;
}
