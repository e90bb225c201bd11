/* ffwd.c - fast-forward through repeated iterations; see ffwd.h. */
#include "ffwd.h"

#include "base/hash.h"

#include <stdlib.h>
#include <string.h>

/* A cycle of a known state: its events as the checks need them, then what
 * applying it does besides the id slots. */
struct gm_ff_rec {
    size_t n;
    uint8_t *op, *cat;
    uint64_t *size, *stream, *ref; /* gm_ff_buf's */
    uint64_t *q, *a, *lf;
    /* The cycle's j-th allocation lives on at the address of the block
     * that lived before it and that its event i freed: the state at the
     * end is the one at the start, so the allocations that live on sit
     * exactly where the ones it freed sat, and the model, which applying
     * the cycle does not touch, still holds that block there (its handle
     * is what event i's id slot held). */
    struct gm_ff_keep {
        uint32_t j;
        size_t i;
    } * keep;
    size_t n_keep;
    struct gm_ff_touch {
        uint64_t seg;
        size_t i;     /* the last event that used seg */
        uint64_t age; /* what the cycle left in its age (ff_seg_age) */
    } * touch;
    size_t n_touch;
    uint64_t dclock[GM_FF_CLOCKS]; /* how far it moved the model's clocks (ff_clock) */
    gm_alloc_stats *dstats;        /* what it adds to the model's statistics (ff_stats), or NULL */
    uint64_t *cur;                 /* one part, statistics kept: gm_ff_buf's, else NULL */
    /* its first sig_n allocations' sizes, hashed (sig_mix): one part's
     * windows are checked in full only against the cycles they start as */
    uint64_t sig;
    uint32_t sig_n;
    uint64_t used; /* gm_ffwd.clock when last applied or made */
    /* one part: the length of its window when last walked whole (0:
     * never), and the walks stopped part-way since (run_part) */
    size_t w;
    uint32_t fails;
};

/* A state the model was in, word for word (ff_state), and its cycles. */
struct gm_ff_state {
    uint64_t key;
    uint64_t n_drv; /* the model's driver calls when it was made */
    uint64_t *w;
    size_t n;
    gm_ff_rec *recs[GM_FF_RECS];
    size_t n_recs;
    uint64_t used;
    /* what must not move during a record (set when one starts) */
    gm_alloc_counters c0;
    uint64_t dev_used0, dev_reads0, dev_refused0, oom0;
    gm_alloc_stats st0;            /* the model's statistics, when it keeps them */
    gm_ff_part p0;                 /* one part: its figures (gm_alloc.ff_part) */
    uint64_t drv0;                 /* drivers() when a record or probe started */
    uint64_t clock0[GM_FF_CLOCKS]; /* the model's clocks (ff_clock) */
    uint64_t limit;                /* a record not back by this many events is dropped */
};

/* The driver calls that may have changed the segments of the model (one
 * part: of the part; the other part's growth leaves them as they were). */
static uint64_t drivers(const gm_ffwd *f, const gm_alloc *a)
{
    return f->part < 0 ? a->c.n_driver_alloc + (a->c.n_driver_free << 32)
                       : a->ff_part[f->part].driver;
}

/* The key of the state the model (one part: the part) is in: its
 * allocated blocks (ff_live) and the driver calls (segments change only
 * with one). A proposal: the state decides. */
static uint64_t state_key(const gm_ffwd *f, const gm_alloc *a)
{
    uint64_t live = f->part < 0 ? a->ff_live : a->ff_part[f->part].live;
    uint64_t h = live ^ drivers(f, a) * 0x165667b19e3779f9ull;
    h ^= h >> 29;
    return h | 1; /* 0: an empty entry of the table */
}

/* take_state: the state has more than the words asked for */
#define TOO_LARGE (SIZE_MAX - 1)

/* The model's state (part >= 0: that part's) into *buf (grown to fit):
 * its word count; SIZE_MAX when it makes no promise or memory is short;
 * TOO_LARGE when it has more than `most` words (the model then stops
 * writing it out where it passed them: alloc.h, ff_state). */
static size_t take_state(int part, gm_alloc *a, uint64_t **buf, size_t *cap, size_t most)
{
    for (;;) {
        size_t room = *cap < most ? *cap : most;
        size_t n =
            part < 0 ? a->ops->ff_state(a, *buf, room) : a->ops->ff_part_state(a, part, *buf, room);
        if (n == SIZE_MAX || n <= room) return n;
        if (n > most || room == most) return TOO_LARGE;
        /* n may be a count the model stopped at: at least twice the room */
        size_t c = n + n / 4 + 64 > 2 * room ? n + n / 4 + 64 : 2 * room;
        uint64_t *v = realloc(*buf, c * sizeof *v);
        if (!v) return SIZE_MAX;
        *buf = v;
        *cap = c;
    }
}

/* Whether a keeps statistics that a cycle adds to (ff_stats). */
static int stats_kept(const gm_alloc *a)
{
    return a->ops->stats && !a->no_stats;
}

gm_ffwd *gm_ffwd_new(gm_alloc *a)
{
    const gm_alloc_ops *o = a->ops;
    if (!o->ff_state || !o->ff_segment || !o->ff_touch || (stats_kept(a) && !o->ff_stats) ||
        !o->ff_clock != !o->ff_advance || !o->ff_clock != !o->ff_seg_age)
        return NULL;
    gm_ffwd *f = calloc(1, sizeof *f);
    if (!f) return NULL;
    f->part = -1;
    if (take_state(-1, a, &f->scratch, &f->cap_scratch, TOO_LARGE - 1) ==
        SIZE_MAX) { /* no promise here */
        gm_ffwd_free(f);
        return NULL;
    }
    /* one part: a model that has parts, and keeps its statistics per
     * part when they are kept */
    f->parts_ok = GM_FF_PARTS == 2 && o->ff_part_state && o->ff_part_of && o->ff_part_block &&
                  o->ff_part_malloc && o->ff_part_largest_free &&
                  (!stats_kept(a) || (o->ff_part_stats_live && o->ff_part_stats)) &&
                  take_state(1, a, &f->scratch, &f->cap_scratch, TOO_LARGE - 1) != SIZE_MAX &&
                  take_state(0, a, &f->scratch, &f->cap_scratch, TOO_LARGE - 1) != SIZE_MAX;
    a->ff_on = 1;
    f->hope = UINT64_MAX; /* set by the first checkpoint */
    gm_ffwd_set_patience(f, GM_FF_PATIENCE);
    return f;
}

static void rec_free(gm_ff_rec *r)
{
    if (!r) return;
    free(r->size); /* one block for the per-event arrays (rec_make) */
    free(r->keep);
    free(r->dstats);
    free(r->cur);
    free(r);
}

static void state_free(gm_ff_state *s)
{
    if (!s) return;
    for (size_t i = 0; i < s->n_recs; i++)
        rec_free(s->recs[i]);
    free(s->w);
    free(s);
}

static void buf_free(gm_ff_buf *b)
{
    free(b->op);
    free(b->cat);
    free(b->size);
    free(b->stream);
    free(b->ref);
    free(b->q);
    free(b->a);
    free(b->lf);
    free(b->seg);
    free(b->handle);
    free(b->cur);
}

void gm_ffwd_free(gm_ffwd *f)
{
    if (!f) return;
    for (size_t i = 0; i < f->n_states; i++)
        state_free(f->states[i]);
    buf_free(&f->rec);
    free(f->local_of);
    free(f->scratch);
    free(f->ids);
    free(f->hin);
    free(f->xpos);
    free(f->loc);
    free(f);
}

/* A candidate that came to nothing (a record not back in its state in
 * time, or out of memory): the next 1, 2, 4, ... 64 candidates are passed
 * over, so a trace that never repeats makes few records (one part: 64
 * times as many, each of its events being a checkpoint, and a run under
 * pressure, whose driver calls end every record, making few). A cycle
 * applied ends it. */
static void give_up(gm_ffwd *f)
{
    if (f->mode == GM_FF_RECORD) f->recorded += f->rec.n;
    f->mode = GM_FF_SEEK;
    f->at = NULL;
    f->records_failed++;
    f->skip = f->part < 0 ? f->backoff : 64 * f->backoff;
    f->backoff = f->backoff ? (f->backoff < 64 ? 2 * f->backoff : 64) : 1;
}

/* One part: whether a new record may be made. Its candidates are many
 * (every event of the part is a checkpoint), and under pressure (driver
 * calls, OOMs) its states come back for a few iterations at a time: its
 * records are made only while the events recorded stay within GM_FF_MAX of
 * the events applied, so that a run whose records do not pay spends on
 * them no more than that (time and memory). */
static int may_record(const gm_ffwd *f)
{
    return f->part < 0 || f->recorded <= f->events_applied + GM_FF_MAX;
}

void gm_ffwd_reset(gm_ffwd *f)
{
    if (f->mode == GM_FF_OFF) return;
    if (f->mode == GM_FF_RECORD) {
        f->records_failed++;
        f->recorded += f->rec.n;
    }
    f->mode = GM_FF_SEEK;
    f->at = NULL;
}

/* ---------------- recording ---------------- */

#define GROW(p, n) ((p) = grow_or_keep((p), (n) * sizeof *(p), &ok))

static void *grow_or_keep(void *p, size_t bytes, int *ok)
{
    void *v = realloc(p, bytes ? bytes : 1);
    if (!v) {
        *ok = 0;
        return p;
    }
    return v;
}

/* Room for one more event and allocation in the record being made. */
static int buf_room(gm_ff_buf *b)
{
    int ok = 1;
    if (b->n == b->cap) {
        size_t n = b->cap ? 2 * b->cap : 4096;
        GROW(b->op, n);
        GROW(b->cat, n);
        GROW(b->size, n);
        GROW(b->stream, n);
        GROW(b->ref, n);
        GROW(b->q, n);
        GROW(b->a, n);
        GROW(b->lf, n);
        GROW(b->seg, n);
        if (ok) b->cap = n;
    }
    if (ok && b->n_alloc == b->cap_alloc) {
        size_t n = b->cap_alloc ? 2 * b->cap_alloc : 4096;
        GROW(b->handle, n);
        if (ok) b->cap_alloc = n;
    }
    if (ok && b->n_cur && b->cap_cur < b->cap) {
        GROW(b->cur, b->cap * GM_ALLOC_N_STAT_ARRAYS);
        if (ok) b->cap_cur = b->cap;
    }
    return ok;
}

/* One part with statistics kept: the model's statistics, as an array. */
static gm_stat *part_stats(gm_alloc *a)
{
    return (gm_stat *)a->ops->ff_part_stats_live(a);
}

/* Simulate from the known state s (the model is in it now), `done`
 * events into the tenant, until the model is back in it: what must not
 * move meanwhile. */
static void watch(gm_ffwd *f, gm_ff_state *s, gm_alloc *a, const gm_metrics *m, uint64_t done)
{
    s->c0 = a->c;
    s->dev_used0 = a->dev->used_bytes;
    s->dev_reads0 = a->dev->capacity_reads;
    s->dev_refused0 = a->dev->refused;
    s->oom0 = m->n_oom;
    if (f->part >= 0) s->p0 = a->ff_part[f->part];
    s->drv0 = drivers(f, a);
    if (stats_kept(a)) a->ops->stats(a, &s->st0);
    if (a->ops->ff_clock) a->ops->ff_clock(a, s->clock0);
    s->used = ++f->clock;
    f->at = s;
    f->since = done;
    f->need = 0;
}

/* ... recording the events (mode RECORD) ... */
static void record_start(gm_ffwd *f, gm_ff_state *s, gm_alloc *a, const gm_metrics *m,
                         uint64_t done)
{
    watch(f, s, a, m, done);
    f->rec.n = f->rec.n_alloc = 0;
    f->rec.n_cur = f->part >= 0 && stats_kept(a);
    f->gen++;
    f->mode = GM_FF_RECORD;
}

/* ... or not (mode PROBE). */
static void probe_start(gm_ffwd *f, gm_ff_state *s, gm_alloc *a, const gm_metrics *m, uint64_t done)
{
    watch(f, s, a, m, done);
    f->mode = GM_FF_PROBE;
}

/* The recording's allocation of id, if any: its index + 1, else 0. */
static size_t local_of(const gm_ffwd *f, uint32_t id)
{
    if (id >= f->n_local_of) return 0;
    uint64_t v = f->local_of[id];
    return (uint32_t)(v >> 32) == f->gen ? (size_t)(uint32_t)v + 1 : 0;
}

static void rec_event(gm_ff_buf *b, const gm_event *e, uint64_t ref, uint64_t seg)
{
    size_t i = b->n;
    b->op[i] = e->op;
    b->cat[i] = e->category;
    b->size[i] = e->size;
    b->stream[i] = e->stream;
    b->ref[i] = ref;
    b->seg[i] = seg;
}

void gm_ffwd_rec_alloc(gm_ffwd *f, gm_alloc *a, const gm_event *e, uint64_t handle)
{
    gm_ff_buf *b = &f->rec;
    if (handle + 1 >= GM_FF_LOCAL || !buf_room(b)) { /* a handle the slots' mark would hide */
        give_up(f);
        return;
    }
    if (e->id >= f->n_local_of) {
        size_t n = (size_t)e->id + 1 > 2 * f->n_local_of ? (size_t)e->id + 1 : 2 * f->n_local_of;
        uint64_t *v = realloc(f->local_of, n * sizeof *v);
        if (!v) {
            give_up(f);
            return;
        }
        memset(v + f->n_local_of, 0, (n - f->n_local_of) * sizeof *v);
        f->local_of = v;
        f->n_local_of = n;
    }
    size_t j = b->n_alloc++;
    f->local_of[e->id] = (uint64_t)f->gen << 32 | j;
    b->handle[j] = handle;
    rec_event(b, e, 0, a->ops->ff_segment(a, handle));
}

void gm_ffwd_rec_free(gm_ffwd *f, gm_alloc *a, const gm_event *e, uint64_t handle)
{
    gm_ff_buf *b = &f->rec;
    if (!buf_room(b)) {
        give_up(f);
        return;
    }
    size_t j = local_of(f, e->id);
    uint64_t ref;
    if (j) {
        ref = GM_FF_LOCAL | (j - 1);
        b->handle[j - 1] = 0;
        f->local_of[e->id] = 0;
    } else {
        ref = a->ops->block_addr(a, handle);
    }
    rec_event(b, e, ref, a->ops->ff_segment(a, handle));
}

static int cmp_u64_pair(const void *x, const void *y)
{
    const uint64_t *p = x, *q = y;
    return p[0] < q[0] ? -1 : p[0] > q[0];
}

/* r->keep: each allocation of the record that lives on, with the event
 * that freed the block that lived before the record at its address. 0
 * when one has none (out of memory, or a model that broke ff_state's
 * promise: the record is not kept). */
static int keep_by_address(const gm_ffwd *f, gm_alloc *a, gm_ff_rec *r)
{
    const gm_ff_buf *b = &f->rec;
    size_t m = 0;
    for (size_t i = 0; i < b->n; i++)
        m += b->op[i] == GM_OP_FREE && !(b->ref[i] & GM_FF_LOCAL);
    uint64_t(*by)[2] = malloc((m ? m : 1) * sizeof *by); /* (address, event) */
    if (!by) return 0;
    m = 0;
    for (size_t i = 0; i < b->n; i++)
        if (b->op[i] == GM_OP_FREE && !(b->ref[i] & GM_FF_LOCAL)) {
            by[m][0] = b->ref[i];
            by[m++][1] = i;
        }
    qsort(by, m, sizeof *by, cmp_u64_pair);
    int ok = 1;
    for (size_t j = 0; j < b->n_alloc && ok; j++) {
        if (!b->handle[j]) continue;
        uint64_t addr = a->ops->block_addr(a, b->handle[j]);
        size_t lo = 0, hi = m;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (by[mid][0] < addr)
                lo = mid + 1;
            else
                hi = mid;
        }
        ok = lo < m && by[lo][0] == addr;
        if (ok) r->keep[r->n_keep++] = (struct gm_ff_keep){(uint32_t)j, (size_t)by[lo][1]};
    }
    free(by);
    return ok;
}

static int cmp_touch(const void *x, const void *y)
{
    const struct gm_ff_touch *p = x, *q = y;
    if (p->seg != q->seg) return p->seg < q->seg ? -1 : 1;
    return p->i < q->i ? -1 : p->i > q->i;
}

/* A segment's first slot in last_uses' set of cap (a power of 2) slots. */
static inline size_t touch_slot(uint64_t seg, size_t cap) /* cap a power of 2 */
{
    return (size_t)((seg * 0x9e3779b97f4a7c15ull) >> 40) & (cap - 1);
}

/* Each segment of seg[0..n) once, with the last i where it is seg[i],
 * into out (room for n), in segment order; the count, or SIZE_MAX when
 * out of memory. A cycle uses a few segments over many events: one walk
 * from the end with an open-addressing set of the segments seen, then a
 * sort of those few (it was a sort of all n). */
static size_t last_uses(const uint64_t *seg, size_t n, struct gm_ff_touch *out)
{
    size_t cap = 0, k = 0, *set = NULL; /* out's index + 1; 0: empty */
    for (size_t i = n; i-- > 0;) {
        if (2 * (k + 1) > cap) { /* at most half full: grown, the seen ones filed again */
            size_t c = cap ? 2 * cap : 64;
            size_t *v = calloc(c, sizeof *v);
            if (!v) {
                free(set);
                return SIZE_MAX;
            }
            free(set);
            set = v;
            cap = c;
            for (size_t q = 0; q < k; q++) {
                size_t h = touch_slot(out[q].seg, cap);
                while (set[h])
                    h = (h + 1) & (cap - 1);
                set[h] = q + 1;
            }
        }
        size_t h = touch_slot(seg[i], cap);
        while (set[h] && out[set[h] - 1].seg != seg[i])
            h = (h + 1) & (cap - 1);
        if (set[h]) continue; /* a later use was seen */
        out[k] = (struct gm_ff_touch){seg[i], i, 0};
        set[h] = ++k;
    }
    free(set);
    qsort(out, k, sizeof *out, cmp_touch);
    return k;
}

/* One part: a cycle's first GM_FF_SIG allocations, their sizes hashed in
 * order, tell most of a state's cycles apart (the iterations' shapes:
 * their first activations' sizes) before a window is walked. */
#define GM_FF_SIG 32

static inline uint64_t sig_mix(uint64_t h, uint64_t size)
{
    gm_hash x = {h};
    gm_hash_u64(&x, size);
    return x.h;
}

/* Whether two records have the same events (their applications may differ
 * only in handles). */
static int same_events(const gm_ff_rec *r, const gm_ff_buf *b)
{
    size_t n = b->n;
    return r->n == n && !memcmp(r->op, b->op, n) && !memcmp(r->cat, b->cat, n) &&
           !memcmp(r->size, b->size, n * 8) && !memcmp(r->stream, b->stream, n * 8) &&
           !memcmp(r->ref, b->ref, n * 8);
}

/* Drop the least recently used records, of any state, until `need` more
 * events fit the budget. */
static void make_room(gm_ffwd *f, size_t need)
{
    while (f->kept_events + need > GM_FF_BUDGET) {
        gm_ff_state *bs = NULL;
        size_t bi = 0;
        for (size_t k = 0; k < f->n_states; k++) {
            gm_ff_state *s = f->states[k];
            for (size_t i = 0; i < s->n_recs; i++)
                if (!bs || s->recs[i]->used < bs->recs[bi]->used) bs = s, bi = i;
        }
        if (!bs) return;
        f->kept_events -= bs->recs[bi]->n;
        rec_free(bs->recs[bi]);
        bs->recs[bi] = bs->recs[--bs->n_recs];
    }
}

/* The record in f->rec as a cycle of its state; NULL when out of memory. */
static gm_ff_rec *rec_make(gm_ffwd *f, gm_alloc *a)
{
    const gm_ff_buf *b = &f->rec;
    size_t n = b->n;
    gm_ff_rec *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    /* one block for the per-event arrays: 6 of 8 bytes, 2 of 1 */
    uint8_t *blk = malloc(n * (6 * 8 + 2) + 16);
    size_t n_keep = 0;
    for (size_t j = 0; j < b->n_alloc; j++)
        n_keep += b->handle[j] != 0;
    r->keep = malloc((n_keep + 1) * sizeof *r->keep + n * sizeof *r->touch);
    if (!blk || !r->keep) {
        free(blk);
        free(r->keep);
        free(r);
        return NULL;
    }
    r->n = n;
    r->size = (uint64_t *)blk;
    r->stream = r->size + n;
    r->ref = r->stream + n;
    r->q = r->ref + n;
    r->a = r->q + n;
    r->lf = r->a + n;
    r->op = (uint8_t *)(r->lf + n);
    r->cat = r->op + n;
    memcpy(r->size, b->size, n * 8);
    memcpy(r->stream, b->stream, n * 8);
    memcpy(r->ref, b->ref, n * 8);
    memcpy(r->q, b->q, n * 8);
    memcpy(r->a, b->a, n * 8);
    memcpy(r->lf, b->lf, n * 8);
    memcpy(r->op, b->op, n);
    memcpy(r->cat, b->cat, n);
    if (n_keep && !keep_by_address(f, a, r)) {
        rec_free(r);
        return NULL;
    }
    /* each segment's last use: the last event that used it */
    r->touch = (struct gm_ff_touch *)(r->keep + n_keep + 1);
    size_t k = last_uses(b->seg, n, r->touch);
    if (k == SIZE_MAX) {
        rec_free(r);
        return NULL;
    }
    r->n_touch = k;
    /* only the segments' last uses stay (the record is kept for long) */
    struct gm_ff_keep *kt =
        realloc(r->keep, (n_keep + 1) * sizeof *r->keep + (k ? k : 1) * sizeof *r->touch);
    if (kt) {
        r->keep = kt;
        r->touch = (struct gm_ff_touch *)(r->keep + n_keep + 1);
    }
    if (a->ops->ff_clock) { /* the model's clocks moved on, and what ages the cycle left */
        uint64_t now[GM_FF_CLOCKS];
        a->ops->ff_clock(a, now);
        for (size_t c = 0; c < GM_FF_CLOCKS; c++) /* one part: its own clock only */
            r->dclock[c] = f->part < 0 || (size_t)f->part == c ? now[c] - f->at->clock0[c] : 0;
        for (size_t t = 0; t < k; t++)
            r->touch[t].age = a->ops->ff_seg_age(a, r->touch[t].seg, f->at->clock0);
    }
    if (stats_kept(a)) { /* the cumulative figures' growth over the cycle */
        gm_alloc_stats now;
        a->ops->stats(a, &now);
        r->dstats = calloc(1, sizeof *r->dstats);
        if (!r->dstats) {
            rec_free(r);
            return NULL;
        }
        const gm_stat *x = (const gm_stat *)&f->at->st0, *y = (const gm_stat *)&now;
        gm_stat *d = (gm_stat *)r->dstats;
        for (size_t i = 0; i < GM_ALLOC_N_STATS; i++) {
            d[i].allocated = y[i].allocated - x[i].allocated;
            d[i].freed = y[i].freed - x[i].freed;
        }
        if (f->part >= 0) a->ops->ff_part_stats(a, f->part, r->dstats); /* its share */
    }
    if (b->n_cur) {
        r->cur = malloc(n * GM_ALLOC_N_STAT_ARRAYS * sizeof *r->cur);
        if (!r->cur) {
            rec_free(r);
            return NULL;
        }
        memcpy(r->cur, b->cur, n * GM_ALLOC_N_STAT_ARRAYS * sizeof *r->cur);
    }
    r->sig = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n && r->sig_n < GM_FF_SIG; i++)
        if (r->op[i] == GM_OP_ALLOC) {
            r->sig = sig_mix(r->sig, r->size[i]);
            r->sig_n++;
        }
    r->used = ++f->clock;
    return r;
}

/* The record is back in its state: keep it as a cycle of the state. */
static void record_end(gm_ffwd *f, gm_alloc *a)
{
    gm_ff_state *s = f->at;
    gm_ff_rec *r = rec_make(f, a);
    if (!r) {
        give_up(f);
        return;
    }
    f->records_made++;
    f->recorded += f->rec.n;
    f->mode = GM_FF_AT;
    f->probed = 0;
    f->hope = f->since + r->n;
    for (size_t i = 0; i < s->n_recs; i++)
        if (same_events(s->recs[i], &f->rec)) { /* made again (a probe cut short) */
            f->kept_events -= s->recs[i]->n;
            rec_free(s->recs[i]);
            s->recs[i] = r;
            f->kept_events += r->n;
            return;
        }
    make_room(f, r->n);
    if (s->n_recs == GM_FF_RECS) { /* the least recently used goes */
        size_t lo = 0;
        for (size_t i = 1; i < s->n_recs; i++)
            if (s->recs[i]->used < s->recs[lo]->used) lo = i;
        f->kept_events -= s->recs[lo]->n;
        rec_free(s->recs[lo]);
        s->recs[lo] = s->recs[--s->n_recs];
    }
    s->recs[s->n_recs++] = r;
    f->kept_events += r->n;
}

/* Whether the model is in known state s now, word for word. */
static int in_state(gm_ffwd *f, gm_alloc *a, const gm_ff_state *s)
{
    size_t n = take_state(f->part, a, &f->scratch, &f->cap_scratch, s->n); /* no longer than s */
    return n == s->n && !memcmp(f->scratch, s->w, n * sizeof *s->w);
}

/* Whether the model called the driver since the record or probe began:
 * it cannot be back in its state (back() compares the counts), so the
 * stretch is given up now instead of at its limit (a run under pressure
 * calls the driver every iteration). */
static int drove(const gm_ffwd *f, const gm_alloc *a)
{
    return drivers(f, a) != f->at->drv0;
}

/* Whether the model is back in f->at, with nothing else moved since the
 * record or probe started: a cycle. */
static int back(gm_ffwd *f, gm_alloc *a, const gm_metrics *m)
{
    const gm_ff_state *s = f->at;
    if (state_key(f, a) != s->key) return 0;
    if (f->part >= 0) { /* the part's figures, OOMs and state; the other part's may move */
        const gm_ff_part *x = &a->ff_part[f->part];
        return x->requested == s->p0.requested && x->allocated == s->p0.allocated && !drove(f, a) &&
               s->oom0 == m->n_oom && in_state(f, a, s);
    }
    return !memcmp(&s->c0, &a->c, sizeof a->c) && s->dev_used0 == a->dev->used_bytes &&
           s->dev_reads0 == a->dev->capacity_reads && s->dev_refused0 == a->dev->refused &&
           s->oom0 == m->n_oom && in_state(f, a, s);
}

int gm_ffwd_rec_post(gm_ffwd *f, gm_alloc *a, const gm_metrics *m)
{
    if (f->mode != GM_FF_RECORD) return 1; /* given up on this event */
    gm_ff_buf *b = &f->rec;
    size_t i = b->n++;
    if (f->part < 0) {
        b->q[i] = a->c.requested_bytes;
        b->a[i] = a->c.allocated_bytes;
        b->lf[i] = a->ops->largest_free(a);
    } else { /* the part's own figures */
        b->q[i] = a->ff_part[f->part].requested;
        b->a[i] = a->ff_part[f->part].allocated;
        b->lf[i] = a->ops->ff_part_largest_free(a, f->part);
        if (b->n_cur) {
            const gm_stat *st = part_stats(a);
            for (size_t k = 0; k < GM_ALLOC_N_STAT_ARRAYS; k++)
                b->cur[i * GM_ALLOC_N_STAT_ARRAYS + k] =
                    st[k * GM_STAT_TYPES + GM_STAT_SMALL + f->part].current;
        }
    }
    if (b->n >= GM_FF_MIN && (f->part >= 0 || gm_ffwd_checkpoint(a)) && back(f, a, m)) {
        record_end(f, a);
        return 1;
    }
    if (b->n < f->at->limit && !drove(f, a)) return 0;
    give_up(f);
    return 1;
}

int gm_ffwd_probe(gm_ffwd *f, gm_alloc *a, const gm_metrics *m, uint64_t done)
{
    if (done - f->since >= GM_FF_MIN && back(f, a, m)) {
        f->mode = GM_FF_AT;
        f->probed = 1;
        return 1;
    }
    if (done - f->since < f->at->limit && !drove(f, a)) return 0;
    give_up(f);
    return 1;
}

/* ---------------- seeking ---------------- */

/* Forget the least recently used known state. */
static void drop_state(gm_ffwd *f)
{
    size_t lo = 0;
    for (size_t k = 1; k < f->n_states; k++)
        if (f->states[k]->used < f->states[lo]->used) lo = k;
    gm_ff_state *s = f->states[lo];
    for (size_t i = 0; i < s->n_recs; i++)
        f->kept_events -= s->recs[i]->n;
    state_free(s);
    f->states[lo] = f->states[--f->n_states];
}

/* A known state with this key that the model is in now, word for word,
 * with no driver call since it was made (its cycles name segments by the
 * model's handles, which a segment released and made again may change). */
static gm_ff_state *known(gm_ffwd *f, gm_alloc *a, uint64_t key)
{
    for (size_t k = 0; k < f->n_states; k++) {
        gm_ff_state *s = f->states[k];
        if (s->key == key && s->n_drv == drivers(f, a) && in_state(f, a, s)) return s;
    }
    return NULL;
}

void gm_ffwd_set_patience(gm_ffwd *f, uint64_t events)
{
    f->patience = events;
    f->patience_max = 4 * events;
}

/* Nothing came back for this round's patience: search again on the large
 * pool's part alone, then the small pool's (ffwd.h, "One part"), then the
 * whole model's in a round of twice the patience; 0 after the last round. */
static int next_part(gm_ffwd *f, uint64_t done)
{
    if (f->part < 0 && f->parts_ok) {
        f->part = 1;
    } else if (f->part == 1) {
        f->part = 0;
    } else {
        if (f->patience >= f->patience_max) return 0;
        f->patience *= 2;
        f->part = -1;
    }
    while (f->n_states)
        drop_state(f);
    memset(f->tab, 0, sizeof f->tab);
    f->hope = done;
    f->skip = f->backoff = 0;
    return 1;
}

/* The most words a known state of a period of p events may have. Each
 * time the model comes to it from elsewhere (a probe's end, a seek), it
 * is written out and compared word for word, which a cycle of about p
 * events must pay for: a state much larger than its period (a million
 * cached blocks, an iteration of a few thousand events) is not kept, the
 * model stops writing it out past this many words (take_state), and, as
 * the model's state changes slowly, no other of that part is written out
 * while the last one tried was too large (gm_ffwd.state_words). */
static size_t state_most(uint64_t p)
{
    return (size_t)(GM_FF_STATE_PER_EVENT * p + GM_FF_STATE_WORDS);
}

int gm_ffwd_seek(gm_ffwd *f, gm_alloc *a, const gm_metrics *m, uint64_t done)
{
    if (f->hope == UINT64_MAX) f->hope = done;
    if (done - f->hope > f->patience) { /* nothing came back */
        if (next_part(f, done)) return 0;
        f->mode = GM_FF_OFF; /* give up for the run */
        a->ff_on = 0;
        return 1;
    }
    uint64_t key = state_key(f, a);
    gm_ff_check *c = &f->tab[(key >> 40) & (GM_FF_TABLE - 1)];
    uint64_t p = done - c->at, last = c->period;
    if (c->key != key) {
        c->key = key;
        c->period = 0;
        c->at = done;
        return 0;
    }
    c->at = done;
    if (p < GM_FF_MIN && f->part >= 0) return 0; /* one part: too near to count as seen again */
    c->period = p;
    if (p < GM_FF_MIN) return 0;
    gm_ff_state *s = known(f, a, key);
    if (s) { /* back in a state with cycles */
        s->used = ++f->clock;
        f->at = s;
        f->probed = 1;
        f->mode = GM_FF_AT;
        return 1;
    }
    /* seen twice: a third time, as far again, makes a period (one part:
     * a third time; iterations of several lengths take it there) */
    if (f->part < 0 ? p != last : !last) return 0;
    if (!may_record(f)) return 0;
    if (f->skip) { /* recent candidates failed: pass some over */
        f->skip--;
        return 0;
    }
    size_t *words = &f->state_words[f->part + 1];
    if (*words > state_most(p)) return 0; /* as large as the last one was: too large */
    s = calloc(1, sizeof *s);
    if (!s) return 0;
    size_t cap = 0;
    s->n = take_state(f->part, a, &s->w, &cap, state_most(p));
    if (s->n == SIZE_MAX || s->n == TOO_LARGE) {
        if (s->n == TOO_LARGE) *words = s->n;
        state_free(s);
        return 0;
    }
    *words = s->n;
    s->key = key;
    s->n_drv = drivers(f, a);
    /* a cycle is about as long as the period that found it (an iteration
     * of another shape: up to a few times that) */
    s->limit = 4 * p + 64 < GM_FF_MAX ? 4 * p + 64 : GM_FF_MAX;
    if (f->n_states == GM_FF_STATES) drop_state(f);
    f->states[f->n_states++] = s;
    record_start(f, s, a, m, done);
    return 1;
}

/* ---------------- applying ---------------- */

/* Room in the replay's scratch for a cycle of n events. */
static int replay_room(gm_ffwd *f, size_t n)
{
    if (n <= f->cap_replay) return 1;
    int ok = 1;
    GROW(f->ids, n);
    GROW(f->hin, n);
    if (ok) f->cap_replay = n;
    return ok;
}

/* Whether event e, whose id slot held v (a free: the block it frees), is
 * r's k-th event: the same op, size, stream and category, and a free of
 * the same block (the cycle's j-th allocation, GM_FF_LOCAL | j, or the
 * block at the address the record names, which lived before the cycle). */
static inline int same_event(const gm_ff_rec *r, size_t k, const gm_event *e, uint64_t v,
                             gm_alloc *a)
{
    if ((e->size ^ r->size[k]) | (e->stream ^ r->stream[k]) | (uint64_t)(e->op ^ r->op[k]) |
        (uint64_t)(e->category ^ r->cat[k]))
        return 0;
    if (e->op != GM_OP_FREE) return 1;
    uint64_t ref = r->ref[k];
    return ref & GM_FF_LOCAL ? v == ref : !(v & GM_FF_LOCAL) && a->ops->block_addr(a, v - 1) == ref;
}

/* Check ev against r, keeping the id slots as the events would: 1 when
 * all of r's events match (the slots then hold the cycle's allocations
 * as GM_FF_LOCAL | j, ids[j] their ids, and hin[i], for each event i that
 * freed a block that lived before the cycle, its handle + 1); 0 when one
 * differs (the slots as they were: undone in reverse, an allocation's
 * slot to empty, a freed block's to hin[i] and its address; an empty
 * slot's address is never read). */
static int check(gm_ffwd *f, const gm_ff_rec *r, const gm_event *ev, const gm_ff_tenant *t)
{
    uint64_t *slot = t->slot, *sa = t->slot_addr, *hin = f->hin;
    const size_t n_slot = t->n_slot;
    const uint8_t *op = r->op;
    const uint64_t *refs = r->ref;
    gm_alloc *a = t->a;
    uint32_t j = 0;
    size_t i = 0;
    for (; i < r->n; i++) {
        const gm_event *e = &ev[i];
        uint32_t id = e->id;
        if (!id || id >= n_slot) goto differ;
        uint64_t v = slot[id];
        if (e->op == GM_OP_ALLOC ? v != 0                       /* still live: step()'s to judge */
                                 : v <= 1 || sa[id] != e->addr) /* none, skipped, damaged id */
            goto differ;
        if (!same_event(r, i, e, v, a)) goto differ;
        if (e->op == GM_OP_ALLOC) {
            slot[id] = GM_FF_LOCAL | j;
            sa[id] = e->addr;
            f->ids[j++] = id;
            continue;
        }
        if (!(refs[i] & GM_FF_LOCAL)) hin[i] = v;
        slot[id] = 0;
    }
    return 1;
differ:
    while (i-- > 0) {
        uint32_t id = ev[i].id;
        if (op[i] == GM_OP_ALLOC) {
            slot[id] = 0;
        } else if (!(refs[i] & GM_FF_LOCAL)) {
            /* its address as it was: the free repeated it (an allocation since may not) */
            slot[id] = hin[i];
            sa[id] = ev[i].addr;
        }
    }
    return 0;
}

/* Apply r to the events ev that check() matched. What it leaves alone
 * it may: the model (in the state before and after), the peaks that are
 * not the metrics' (the engine's peak of PyTorch's allocated bytes, the
 * device's peak use: the cycle reached the same values when it was
 * simulated, and R does not move), and the policy (never asked: no
 * driver call). */
/* What applying cycle r leaves besides its events' metrics: the id slots
 * of the allocations that live on (the block where the one event i freed
 * was), each segment's last use and age (from the clocks the cycle
 * started at), the clocks moved on (one part: its own only) and the
 * cumulative statistics (one part: its share). The cycle's event i is
 * ev[i], or ev[pos[i]] when pos (one part: the window's others between). */
static void leave(gm_ffwd *f, const gm_ff_rec *r, const gm_event *ev, const uint32_t *pos,
                  const gm_ff_tenant *t)
{
    gm_alloc *a = t->a;
    for (size_t k = 0; k < r->n_keep; k++) {
        size_t i = r->keep[k].i;
        t->slot[f->ids[r->keep[k].j]] = f->hin[pos ? pos[i] : i];
    }
    for (size_t k = 0; k < r->n_touch; k++) {
        size_t i = r->touch[k].i;
        a->ops->ff_touch(a, r->touch[k].seg, ev[pos ? pos[i] : i].t_ns + t->shift, r->touch[k].age);
    }
    if (a->ops->ff_clock) a->ops->ff_advance(a, r->dclock);
    if (r->dstats) a->ops->ff_stats(a, r->dstats);
}

static void apply(gm_ffwd *f, const gm_ff_rec *r, const gm_event *ev, const gm_ff_tenant *t)
{
    /* the metrics, event by event with these events' times (metrics.h) */
    _Static_assert(sizeof(gm_event) % sizeof(uint64_t) == 0, "events' times at a stride");
    gm_metrics_steps(t->m, &ev[0].t_ns, sizeof(gm_event) / sizeof(uint64_t), t->shift, r->q, r->a,
                     t->a->c.reserved_bytes, r->lf, r->n);
    leave(f, r, ev, NULL, t);
}

/* ---------------- one part ---------------- */

/* check_part: an id slot holding an allocation of the window that is the
 * other part's (GM_FF_LOCAL | j never has bit 62: j < 2^32) */
#define GM_FF_OTHER (GM_FF_LOCAL | 1ull << 62)

/* ff_part_of, remembered by size (a size's part is the settings'; a
 * training loop asks for a few hundred sizes over and over). */
static inline int part_of(gm_ffwd *f, gm_alloc *a, uint64_t size)
{
    size_t i = (size_t)((size * 0x9e3779b97f4a7c15ull) >> 58);
    if (f->memo_size[i] != size + 1) {
        f->memo_size[i] = size + 1;
        f->memo_part[i] = (uint8_t)a->ops->ff_part_of(a, size);
    }
    return f->memo_part[i];
}

/* Room in the scratch for a window of up to n events. */
static int window_room(gm_ffwd *f, size_t n)
{
    if (!replay_room(f, n)) return 0;
    if (n <= f->cap_window) return 1;
    int ok = 1;
    GROW(f->xpos, n);
    GROW(f->loc, n);
    if (ok) f->cap_window = n;
    return ok;
}

/* Check ev[0..n) against r, a cycle of the part, the other part's events
 * taken as they come: the window's length (its events up to r's last)
 * when r's events match the part's and the others are plain (an
 * allocation into an empty id slot, a free of a live one); 0 when one is
 * not; more than n (at least what the window needs) when it goes past
 * ev[n - 1]. The id slots are left as they were (the window's changes
 * undone in reverse). */
static size_t check_part(gm_ffwd *f, const gm_ff_rec *r, const gm_event *ev, size_t n,
                         const gm_ff_tenant *t)
{
    uint64_t *slot = t->slot, *sa = t->slot_addr, *hin = f->hin;
    const size_t n_slot = t->n_slot;
    gm_alloc *a = t->a;
    size_t i = 0, k = 0, w = 0;
    uint32_t j = 0;
    for (; k < r->n; i++) {
        if (i == n) { /* the window goes on past the events given */
            w = n + (r->n - k);
            goto undo;
        }
        const gm_event *e = &ev[i];
        uint32_t id = e->id;
        if (!id || id >= n_slot) goto undo;
        uint64_t v = slot[id];
        int mine;
        if (e->op == GM_OP_ALLOC) {
            if (v) goto undo; /* still live: step()'s to judge */
            mine = part_of(f, a, e->size) == f->part;
            slot[id] = mine ? GM_FF_LOCAL | j : GM_FF_OTHER;
            sa[id] = e->addr;
        } else if (e->op == GM_OP_FREE) {
            if (v <= 1 || sa[id] != e->addr) goto undo; /* none, skipped, or a damaged id */
            mine = v & GM_FF_LOCAL ? v != GM_FF_OTHER : gm_ffwd_part_event(f, a, v - 1);
            hin[i] = v;
            slot[id] = 0;
        } else {
            goto undo;
        }
        if (!mine) continue;
        if (!same_event(r, k, e, v, a)) {
            i++; /* its slot changed: undone too */
            goto undo;
        }
        if (e->op == GM_OP_ALLOC) j++;
        k++;
    }
    w = i;
undo:
    while (i-- > 0) {
        const gm_event *e = &ev[i];
        if (e->op == GM_OP_ALLOC) {
            slot[e->id] = 0;
        } else {
            slot[e->id] = hin[i];
            sa[e->id] = e->addr;
        }
    }
    return w;
}

/* The part's first k events of the window, simulated now: from the
 * part's state at the cycle's start they make the record's decisions
 * (the other part's events, simulated since, do not touch it), and the
 * ones still live get real handles in their slots. */
static void materialize(gm_ffwd *f, const gm_ff_rec *r, const gm_event *ev, size_t k,
                        const gm_ff_tenant *t)
{
    gm_alloc *a = t->a;
    uint32_t j = 0;
    for (size_t q = 0; q < k; q++) {
        size_t i = f->xpos[q];
        const gm_event *e = &ev[i];
        uint64_t now = e->t_ns + t->shift;
        if (e->op == GM_OP_ALLOC) {
            uint64_t h = 0;
            a->ops->malloc(a, e->size, e->stream, e->category, now, &h);
            f->loc[j] = h;
            if (t->slot[e->id] == (GM_FF_LOCAL | j)) t->slot[e->id] = h + 1;
            j++;
        } else {
            uint64_t ref = r->ref[q];
            a->ops->free(a, ref & GM_FF_LOCAL ? f->loc[ref & ~GM_FF_LOCAL] : f->hin[i] - 1, now);
        }
    }
}

/* How run_part ended. */
enum { WALK_WHOLE, WALK_GROW, WALK_DIFFER };

/* Walk the window of r, a cycle of the part, over ev[0..n): the part's
 * events taken from the record as long as they match it (check_part's
 * tests, event by event), the other part's simulated, the metrics per
 * event with the sums (engine.c, tenant_step_metrics: the part's figures
 * are the model's less the part's at the start plus the record's). Returns
 * the window's length, the model's part back in the state (*how
 * WALK_WHOLE); or the index of the first event it did not take: the other
 * part's allocation that the model cannot serve without growing
 * (WALK_GROW), or one of the part's that differs from the record, an
 * event that is not plain (step()'s to judge) or the end of ev before the
 * window's (WALK_DIFFER). Then the part's events before it are simulated
 * (materialize): from the part's state at the cycle's start they make
 * the record's decisions, so the model is where simulating every event
 * would have left it, and so are the metrics, stepped with the record's
 * figures of a prefix that matched. Nothing need be checked first: a
 * window that stops part-way costs the simulation of its part's events,
 * not a wrong answer (check_part first is for cycles that stopped
 * before). */
static size_t run_part(gm_ffwd *f, const gm_ff_rec *r, const gm_event *ev, size_t n,
                       const gm_ff_tenant *t, int *how)
{
    gm_alloc *a = t->a;
    gm_metrics *m = t->m;
    uint64_t *slot = t->slot, *sa = t->slot_addr, *hin = f->hin;
    const size_t n_slot = t->n_slot;
    const int part = f->part, other = 1 - part;
    const uint64_t shift = t->shift;
    const gm_ff_part x0 = a->ff_part[part];
    uint64_t dq = 0, da = 0, lfx = a->ops->ff_part_largest_free(a, part);
    /* statistics kept: the all-pools figures (st[k * GM_STAT_TYPES]) are
     * kept the sums, the part's (xs, from the record) and the other's */
    enum { NS = GM_ALLOC_N_STAT_ARRAYS };
    gm_stat *st = r->cur ? part_stats(a) : NULL;
    uint64_t xs0[NS], xs[NS];
    for (size_t q = 0; st && q < NS; q++)
        xs0[q] = xs[q] = st[q * GM_STAT_TYPES + GM_STAT_SMALL + part].current;
    size_t i = 0, k = 0;
    uint32_t j = 0;
    *how = WALK_DIFFER;
    for (; k < r->n; i++) {
        if (i == n) goto stop;
        const gm_event *e = &ev[i];
        const uint32_t id = e->id;
        if (!id || id >= n_slot) goto stop;
        const uint64_t now = e->t_ns + shift, v = slot[id];
        int mine;
        if (e->op == GM_OP_ALLOC) {
            if (v) goto stop; /* still live: step()'s to judge */
            mine = part_of(f, a, e->size) == part;
        } else if (e->op == GM_OP_FREE) {
            if (v <= 1 || sa[id] != e->addr) goto stop; /* none, skipped, or a damaged id */
            mine = v & GM_FF_LOCAL || gm_ffwd_part_event(f, a, v - 1);
        } else {
            goto stop;
        }
        if (mine) {
            if (!same_event(r, k, e, v, a)) goto stop;
            if (e->op == GM_OP_ALLOC) {
                slot[id] = GM_FF_LOCAL | j;
                sa[id] = e->addr;
                f->ids[j++] = id;
            } else {
                hin[i] = v;
                slot[id] = 0;
            }
            f->xpos[k] = (uint32_t)i;
            dq = r->q[k] - x0.requested; /* unsigned: wraps back when the part's fell */
            da = r->a[k] - x0.allocated;
            lfx = r->lf[k];
            for (size_t q = 0; st && q < NS; q++) {
                gm_stat *all = &st[q * GM_STAT_TYPES + GM_STAT_ALL];
                uint64_t c = r->cur[k * NS + q];
                all->current += c - xs[q];
                if (all->current > all->peak) all->peak = all->current;
                xs[q] = c;
            }
            k++;
        } else if (e->op == GM_OP_ALLOC) {
            uint64_t h;
            if (a->ops->ff_part_malloc(a, e->size, e->stream, e->category, now, &h) != GM_OK) {
                *how = WALK_GROW;
                goto stop;
            }
            slot[id] = h + 1;
            sa[id] = e->addr;
        } else {
            slot[id] = 0;
            a->ops->free(a, v - 1, now);
        }
        uint64_t A = a->c.allocated_bytes + da;
        if (A > *t->peak_allocated) *t->peak_allocated = A;
        if (gm_metrics_step(m, now, a->c.requested_bytes + dq, A, a->c.reserved_bytes)) {
            uint64_t lfo = a->ops->ff_part_largest_free(a, other);
            gm_metrics_ext_sample(m, lfx > lfo ? lfx : lfo);
        }
    }
    leave(f, r, ev, f->xpos, t);
    *how = WALK_WHOLE;
    return i;
stop:;
    /* the part's events up to here, simulated: the all-pools figures back
     * to the model's, and their peaks as the window so far left them
     * (simulated now, after the other part's events, they would count
     * those too early) */
    uint64_t peak[NS];
    for (size_t q = 0; st && q < NS; q++) {
        st[q * GM_STAT_TYPES + GM_STAT_ALL].current -= xs[q] - xs0[q];
        peak[q] = st[q * GM_STAT_TYPES + GM_STAT_ALL].peak;
    }
    materialize(f, r, ev, k, t);
    for (size_t q = 0; st && q < NS; q++)
        st[q * GM_STAT_TYPES + GM_STAT_ALL].peak = peak[q];
    return i;
}

/* gm_ffwd_apply for one part. */
static size_t apply_part(gm_ffwd *f, const gm_event *ev, size_t n, const gm_ff_tenant *t)
{
    gm_ff_state *s = f->at;
    if (!window_room(f, n)) {
        give_up(f);
        return 0;
    }
    /* the hashes of the sizes of the part's first 1, 2, ... allocations ahead */
    uint64_t sig[GM_FF_SIG + 1];
    size_t got = 0;
    sig[0] = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n && got < GM_FF_SIG; i++)
        if (ev[i].op == GM_OP_ALLOC && part_of(f, t->a, ev[i].size) == f->part) {
            sig[got + 1] = sig_mix(sig[got], ev[i].size);
            got++;
        }
    for (size_t i = 0; i < s->n_recs; i++) {
        gm_ff_rec *r = s->recs[i];
        if (r->sig_n <= got && sig[r->sig_n] != r->sig) continue; /* starts otherwise */
        /* a cycle walked whole last time is walked again at once when the
         * events given hold its window as long as then, with room (the
         * other part's events between may be more); else, or when it
         * stopped part-way since, the window is checked first */
        if (!r->w || r->fails || r->w + r->w / 8 + 64 > n) {
            size_t w = check_part(f, r, ev, n, t);
            if (!w) continue;
            if (w > n) { /* it may match: the caller gives more, or simulates */
                if (w > f->need) f->need = w;
                continue;
            }
        }
        int how;
        const gm_ff_part x0 = t->a->ff_part[f->part];
        size_t p = run_part(f, r, ev, n, t, &how);
        if (how == WALK_GROW) { /* the other part grows: the state is left, simulate on */
            f->mode = GM_FF_SEEK;
            f->at = NULL;
            return p;
        }
        if (how == WALK_DIFFER) {
            /* simulate on, as a probe from the state at the window's
             * start would (nothing a probe compares moved since, but the
             * part's figures) */
            r->fails++;
            probe_start(f, s, t->a, t->m, t->done);
            s->p0 = x0;
            return p;
        }
        r->w = p;
        r->fails = 0;
        r->used = s->used = ++f->clock;
        f->events_applied += r->n;
        f->cycles_applied++;
        f->hope = t->done + p;
        f->backoff = 0;
        return p;
    }
    return SIZE_MAX; /* none: gm_ffwd_apply's to say what next */
}

size_t gm_ffwd_apply(gm_ffwd *f, const gm_event *ev, size_t n, const gm_ff_tenant *t)
{
    gm_ff_state *s = f->at;
    f->need = 0;
    if (f->part >= 0) {
        size_t p = apply_part(f, ev, n, t);
        if (p != SIZE_MAX) return p;
        goto none;
    }
    for (size_t i = 0; i < s->n_recs; i++) {
        gm_ff_rec *r = s->recs[i];
        const gm_event *e = &ev[0];
        if (e->op != r->op[0] || e->size != r->size[0] || e->stream != r->stream[0]) continue;
        if (r->n > n) { /* it may match: the caller gives more, or simulates */
            if (r->n > f->need) f->need = r->n;
            continue;
        }
        if (!replay_room(f, r->n)) {
            give_up(f);
            return 0;
        }
        if (!check(f, r, ev, t)) continue;
        apply(f, r, ev, t);
        r->used = s->used = ++f->clock;
        f->events_applied += r->n;
        f->cycles_applied++;
        f->hope = t->done + r->n;
        f->backoff = 0;
        return r->n;
    }
none:
    if (f->need) return 0;
    /* none matches: simulate, and record once the state has come back
     * simulating (a stretch that comes back once is likely to again) */
    if (f->probed && may_record(f))
        record_start(f, s, t->a, t->m, t->done);
    else
        probe_start(f, s, t->a, t->m, t->done);
    return 0;
}

void gm_ffwd_cut(gm_ffwd *f, const gm_ff_tenant *t)
{
    probe_start(f, f->at, t->a, t->m, t->done);
}
