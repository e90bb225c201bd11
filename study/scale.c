/*
 * scale.c - see scale.h. Loading (HDF5 trace or snapshot pickle), the
 * alignment of the recordings, the exact integer size fit, and the trace
 * at a new value.
 *
 * Aligned form of one recording: "slots" are allocations - first the
 * pre-existing blocks (those freed in the trace, by the rank of that free,
 * then the never-freed ones sorted by category, stream and size), then the
 * trace's allocations in order - and "steps" are the tensor events in
 * order, each naming its op and slot. Two recordings align when their steps
 * are equal op by op and slot by slot and their slots agree in stream and
 * category; then slot k's sizes across recordings are what is fitted.
 */
#include "scale.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/addrmap.h"

#define ADDR_BASE 0x7f0000000000ull /* fake addresses, one 512-byte step per slot */
#define ADDR_STEP 512ull

typedef struct slot {
    uint64_t size;
    uint64_t stream;
    uint8_t cat;
} slot;

typedef struct step {
    uint8_t op;    /* GM_OP_ALLOC, FREE, EMPTY_CACHE, OOM */
    uint8_t phase; /* of the nearest recording, set at evaluation */
    uint32_t pad;
    uint64_t slot; /* ALLOC / FREE / OOM; UINT64_MAX for EMPTY_CACHE */
} step;

/* One recording in aligned form. */
typedef struct rec {
    const char *path;
    int64_t x;
    gm_import_trace t; /* as loaded */
    slot *slots;
    size_t nslots, npre; /* slots [0, npre) are pre-existing blocks */
    step *steps;
    size_t nsteps;
    uint64_t *step_t;   /* each step's time */
    size_t *step_event; /* each step's index in t.events */
    uint64_t dropped;   /* segment rows */
} rec;

struct gm_scale {
    size_t n;
    rec r[GM_SCALE_MAX_INPUTS];
    gm_scale_stats st;
};

/* ------------------------------------------------------------- inputs */

int gm_scale_input_parse(const char *arg, char *path, size_t path_len, int64_t *x, gm_err *err)
{
    const char *eq = strrchr(arg, '=');
    if (!eq || eq == arg || !eq[1])
        return gm_errf(err, GM_EUSAGE,
                       "'%s' is not RECORDING=VALUE; give each recording with its value of the "
                       "dimension, e.g. run-b8.pickle=8",
                       arg);
    char *end;
    long long v = strtoll(eq + 1, &end, 10);
    if (*end || v < 1 || v > GM_SCALE_MAX_X)
        return gm_errf(err, GM_EUSAGE, "'%s': the value '%s' is not a whole number in 1..%lld", arg,
                       eq + 1, (long long)GM_SCALE_MAX_X);
    size_t len = (size_t)(eq - arg);
    if (len >= path_len) return gm_errf(err, GM_EUSAGE, "'%s': the path is too long", arg);
    memcpy(path, arg, len);
    path[len] = '\0';
    *x = v;
    return GM_OK;
}

static int is_hdf5(const char *path, gm_err *err)
{
    static const unsigned char sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    unsigned char b[8];
    FILE *f = fopen(path, "rb");
    if (!f) return gm_errf(err, GM_EIO, "%s: cannot open it; check the path", path);
    size_t n = fread(b, 1, sizeof b, f);
    fclose(f);
    return n == sizeof b && !memcmp(b, sig, sizeof b);
}

static int copy_meta(gm_trace_meta *dst, const gm_trace_meta *src)
{
    *dst = (gm_trace_meta){.version = src->version,
                           .device_total_bytes = src->device_total_bytes,
                           .dropped_records = src->dropped_records,
                           .device_avail_bytes = src->device_avail_bytes,
                           .device_avail_min_bytes = src->device_avail_min_bytes,
                           .device_avail_max_bytes = src->device_avail_max_bytes};
    char **d[] = {&dst->source,   &dst->device_name, &dst->created_utc,        &dst->command,
                  &dst->workload, &dst->alloc_conf,  &dst->device_avail_source};
    const char *s[] = {src->source,   src->device_name, src->created_utc,        src->command,
                       src->workload, src->alloc_conf,  src->device_avail_source};
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++)
        if (gm_trace_meta_set(d[i], s[i])) return GM_ENOMEM;
    return GM_OK;
}

/* Copies of n sites into *dst (owned strings, as gm_import_trace keeps them). */
static int copy_sites(const gm_site *src, size_t n, gm_site **dst, size_t *nd)
{
    *dst = NULL, *nd = 0;
    if (!n) return GM_OK;
    gm_site *d = calloc(n, sizeof *d);
    if (!d) return GM_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        d[i].name = strdup(src[i].name);
        d[i].stack = strdup(src[i].stack);
        *dst = d, *nd = i + 1; /* freed with the trace if the next fails */
        if (!d[i].name || !d[i].stack) return GM_ENOMEM;
    }
    return GM_OK;
}

/* A whole HDF5 trace into t. */
static int load_trace(const char *path, gm_import_trace *t, gm_err *err)
{
    gm_trace_reader *r;
    int rc = gm_trace_open(path, &r, err);
    if (rc) return rc;
    memset(t, 0, sizeof *t);
    if (copy_meta(&t->meta, gm_trace_meta_get(r))) rc = gm_errf(err, GM_ENOMEM, "out of memory");
    uint64_t n = gm_trace_nevents(r);
    if (rc == GM_OK && !(t->events = malloc((n ? n : 1) * sizeof *t->events)))
        rc = gm_errf(err, GM_ENOMEM, "%s: out of memory for %llu events", path,
                     (unsigned long long)n);
    while (rc == GM_OK && t->n_events < n) {
        int64_t k = gm_trace_read(r, t->events + t->n_events, (size_t)(n - t->n_events), err);
        if (k < 0) rc = (int)k;
        if (k <= 0) break;
        t->n_events += (size_t)k;
    }
    if (rc == GM_OK) rc = gm_trace_read_initial(r, &t->init, &t->n_init, err);
    if (rc == GM_OK) rc = gm_trace_read_markers(r, &t->markers, &t->n_markers, err);
    gm_sites st = {0};
    if (rc == GM_OK) rc = gm_trace_read_sites(r, &st, err);
    if (rc == GM_OK && copy_sites(st.rows, st.n, &t->sites, &t->n_sites))
        rc = gm_errf(err, GM_ENOMEM, "out of memory");
    gm_sites_free(&st);
    gm_trace_close(r);
    if (rc) gm_import_trace_free(t);
    return rc;
}

/* A snapshot pickle, imported in memory: one device. */
static int load_snapshot(const char *path, int device, gm_import_trace *t, gm_err *err)
{
    gm_torch_opts o = {.name = path, .command = "", .device = device};
    gm_torch_import *imp = NULL;
    int rc = gm_torch_import_file(path, &o, &imp, err);
    if (rc) return rc;
    if (imp->n != 1) {
        rc = gm_errf(err, GM_EINVAL,
                     "%s holds %zu devices; pick one with --device N (or gmsim import --device N)",
                     path, imp->n);
    } else {
        *t = imp->dev[0];
        memset(&imp->dev[0], 0, sizeof imp->dev[0]);
    }
    gm_torch_import_free(imp);
    return rc;
}

/* ---------------------------------------------------------- alignment */

typedef struct pre {
    gm_init_row row;
    size_t index;  /* position in /initial_state */
    int64_t freed; /* rank of the free that releases it, -1: never freed */
} pre;

static int cmp_pre(const void *a, const void *b)
{
    const pre *p = a, *q = b;
    if (p->freed >= 0 || q->freed >= 0) /* freed ones first, by the rank of their free */
        return p->freed < 0 ? 1 : q->freed < 0 ? -1 : (p->freed > q->freed) - (p->freed < q->freed);
    if (p->row.category != q->row.category) return p->row.category < q->row.category ? -1 : 1;
    if (p->row.stream != q->row.stream) return p->row.stream < q->row.stream ? -1 : 1;
    if (p->row.size != q->row.size) return p->row.size < q->row.size ? -1 : 1;
    return (p->index > q->index) - (p->index < q->index);
}

static int is_tensor_op(int op)
{
    return op == GM_OP_ALLOC || op == GM_OP_FREE || op == GM_OP_EMPTY_CACHE || op == GM_OP_OOM;
}

/* Put r in aligned form. */
static int align_one(rec *r, gm_err *err)
{
    const gm_import_trace *t = &r->t;
    size_t nblocks = 0;
    for (size_t i = 0; i < t->n_init; i++)
        nblocks += t->init[i].kind == GM_INIT_BLOCK;
    pre *pb = calloc(nblocks ? nblocks : 1, sizeof *pb);
    size_t nallocs = 0, nsteps = 0;
    for (size_t i = 0; i < t->n_events; i++) {
        nallocs += t->events[i].op == GM_OP_ALLOC || t->events[i].op == GM_OP_OOM;
        nsteps += is_tensor_op(t->events[i].op);
    }
    r->slots = calloc(nblocks + nallocs + 1, sizeof *r->slots);
    r->steps = calloc(nsteps + 1, sizeof *r->steps);
    r->step_t = calloc(nsteps + 1, sizeof *r->step_t);
    r->step_event = calloc(nsteps + 1, sizeof *r->step_event);
    gm_addrmap live; /* addr -> slot + 1, or pre index | 1 << 62 */
    int rc = gm_addrmap_init(&live, 4096);
    if (!pb || !r->slots || !r->steps || !r->step_t || !r->step_event || rc) {
        free(pb);
        if (!rc) gm_addrmap_free(&live);
        return gm_errf(err, GM_ENOMEM, "%s: out of memory", r->path);
    }
    const uint64_t PRE = 1ull << 62;
    size_t np = 0;
    for (size_t i = 0; i < t->n_init; i++) {
        if (t->init[i].kind != GM_INIT_BLOCK) continue;
        if (gm_addrmap_get(&live, gm_addrmap_key(t->init[i].addr))) continue; /* duplicate row */
        pb[np] = (pre){t->init[i], i, -1};
        gm_addrmap_put(&live, gm_addrmap_key(t->init[i].addr), PRE | np);
        np++;
    }
    /* pass 1: which pre-existing blocks are freed, in what order (a block's
     * first free is its own: it is live from the start) */
    int64_t freed = 0;
    for (size_t i = 0; i < t->n_events; i++) {
        const gm_event *e = &t->events[i];
        const uint64_t *v;
        if (e->op == GM_OP_FREE && (v = gm_addrmap_get(&live, gm_addrmap_key(e->addr))) &&
            (*v & PRE) && pb[*v & ~PRE].freed < 0)
            pb[*v & ~PRE].freed = freed++;
    }
    /* the pre-existing slots in aligned order; each block's address maps to its slot */
    if (np > 1) qsort(pb, np, sizeof *pb, cmp_pre);
    for (size_t k = 0; k < np; k++) {
        r->slots[k] = (slot){pb[k].row.size, pb[k].row.stream, pb[k].row.category};
        *gm_addrmap_get(&live, gm_addrmap_key(pb[k].row.addr)) = k + 1;
    }
    r->npre = r->nslots = np;
    /* pass 2: the steps */
    for (size_t i = 0; i < t->n_events && rc == GM_OK; i++) {
        const gm_event *e = &t->events[i];
        if (!is_tensor_op(e->op)) {
            r->dropped++;
            continue;
        }
        step *s = &r->steps[r->nsteps];
        s->op = e->op;
        s->slot = UINT64_MAX;
        if (e->op == GM_OP_ALLOC || e->op == GM_OP_OOM) {
            s->slot = r->nslots;
            r->slots[r->nslots++] = (slot){e->size, e->stream, e->category};
            if (e->op == GM_OP_ALLOC &&
                gm_addrmap_put(&live, gm_addrmap_key(e->addr), s->slot + 1) != GM_OK)
                rc = gm_errf(err, GM_ENOMEM, "%s: out of memory", r->path);
        } else if (e->op == GM_OP_FREE) {
            uint64_t v;
            if (!gm_addrmap_del(&live, gm_addrmap_key(e->addr), &v))
                rc = gm_errf(err, GM_EINVAL,
                             "%s: event %zu frees 0x%llx, which is not live; a recording to "
                             "scale must be a whole, valid trace (gmsim run --lenient shows how "
                             "many such frees it has)",
                             r->path, i, (unsigned long long)e->addr);
            else
                s->slot = v - 1;
        }
        r->step_t[r->nsteps] = e->t_ns;
        r->step_event[r->nsteps] = i;
        r->nsteps++;
    }
    free(pb);
    gm_addrmap_free(&live);
    return rc;
}

static const char *op_word(int op)
{
    return op == GM_OP_ALLOC ? "alloc" : op == GM_OP_FREE ? "free" : gm_op_name(op);
}

/* Where a and b differ, as an error; GM_OK when they align. */
static int align_check(const rec *a, const rec *b, gm_err *err)
{
    if (a->npre != b->npre)
        return gm_errf(err, GM_EINVAL,
                       "%s and %s do not align: %zu and %zu blocks exist before the first "
                       "event; record both from the same point of the program",
                       a->path, b->path, a->npre, b->npre);
    for (size_t k = 0; k < a->npre; k++)
        if (a->slots[k].cat != b->slots[k].cat || a->slots[k].stream != b->slots[k].stream)
            return gm_errf(err, GM_EINVAL,
                           "%s and %s do not align: pre-existing block %zu is %s on stream "
                           "%llu in one and %s on stream %llu in the other",
                           a->path, b->path, k, gm_category_name(a->slots[k].cat),
                           (unsigned long long)a->slots[k].stream,
                           gm_category_name(b->slots[k].cat),
                           (unsigned long long)b->slots[k].stream);
    size_t n = a->nsteps < b->nsteps ? a->nsteps : b->nsteps;
    for (size_t i = 0; i < n; i++) {
        const step *s = &a->steps[i], *u = &b->steps[i];
        size_t ea = a->step_event[i], eb = b->step_event[i];
        if (s->op != u->op)
            return gm_errf(err, GM_EINVAL,
                           "%s and %s do not align at tensor event %zu: %s (event %zu) against "
                           "%s (event %zu); they must be the same program, iteration for "
                           "iteration, differing only in the scaled dimension",
                           a->path, b->path, i, op_word(s->op), ea, op_word(u->op), eb);
        if (s->slot != u->slot)
            return gm_errf(err, GM_EINVAL,
                           "%s and %s do not align at tensor event %zu (events %zu and %zu): "
                           "the %s is of allocation %llu in one and %llu in the other",
                           a->path, b->path, i, ea, eb, op_word(s->op), (unsigned long long)s->slot,
                           (unsigned long long)u->slot);
        if (s->op != GM_OP_ALLOC && s->op != GM_OP_OOM) continue;
        const slot *x = &a->slots[s->slot], *y = &b->slots[u->slot];
        if (x->stream != y->stream)
            return gm_errf(err, GM_EINVAL,
                           "%s and %s do not align at allocation %llu (events %zu and %zu): "
                           "stream %llu against stream %llu",
                           a->path, b->path, (unsigned long long)s->slot, ea, eb,
                           (unsigned long long)x->stream, (unsigned long long)y->stream);
        if (x->cat != y->cat)
            return gm_errf(err, GM_EINVAL,
                           "%s and %s do not align at allocation %llu (events %zu and %zu): "
                           "category %s against %s",
                           a->path, b->path, (unsigned long long)s->slot, ea, eb,
                           gm_category_name(x->cat), gm_category_name(y->cat));
    }
    if (a->nsteps != b->nsteps)
        return gm_errf(err, GM_EINVAL,
                       "%s and %s do not align: %zu and %zu tensor events (%zu and %zu "
                       "allocations); the shorter ends at event %zu; record the same number of "
                       "iterations",
                       a->path, b->path, a->nsteps, b->nsteps, a->nslots - a->npre,
                       b->nslots - b->npre, n);
    return GM_OK;
}

/* ---------------------------------------------------------------- fit */

/* num / den rounded to the nearest integer, halves away from zero. */
static __int128 div_round(__int128 num, __int128 den)
{
    if (den < 0) {
        num = -num;
        den = -den;
    }
    __int128 q = num / den, r = num % den;
    if (2 * (r < 0 ? -r : r) >= den) q += num < 0 ? -1 : 1;
    return q;
}

uint64_t gm_scale_fit(const int64_t *xs, const uint64_t *ys, size_t n, int64_t x, int *clamped)
{
    *clamped = 0;
    int same = 1;
    for (size_t i = 1; i < n; i++)
        same &= ys[i] == ys[0];
    if (n == 1 || same) return ys[0];
    __int128 v;
    if (n == 2) { /* the line: (y0 (x - x1) - y1 (x - x0)) / (x0 - x1) */
        __int128 num = (__int128)ys[0] * (x - xs[1]) - (__int128)ys[1] * (x - xs[0]);
        v = div_round(num, (__int128)(xs[0] - xs[1]));
    } else { /* Lagrange over the common denominator (x0-x1)(x0-x2)(x1-x2) */
        __int128 a = (__int128)(x - xs[1]) * (x - xs[2]) * (xs[1] - xs[2]);
        __int128 b = (__int128)(x - xs[0]) * (x - xs[2]) * (xs[0] - xs[2]);
        __int128 c = (__int128)(x - xs[0]) * (x - xs[1]) * (xs[0] - xs[1]);
        __int128 num = (__int128)ys[0] * a - (__int128)ys[1] * b + (__int128)ys[2] * c;
        __int128 den = (__int128)(xs[0] - xs[1]) * (xs[0] - xs[2]) * (xs[1] - xs[2]);
        v = div_round(num, den);
    }
    if (v < 1) {
        *clamped = 1;
        return 1;
    }
    return v > (__int128)UINT64_MAX ? UINT64_MAX : (uint64_t)v;
}

/* How the sizes of a slot vary: 0 constant, 1 a line, 2 a parabola. */
static int shape(const int64_t *xs, const uint64_t *ys, size_t n)
{
    int same = 1;
    for (size_t i = 1; i < n; i++)
        same &= ys[i] == ys[0];
    if (same) return 0;
    if (n == 2) return 1;
    __int128 c = (__int128)ys[0] * (xs[1] - xs[2]) - (__int128)ys[1] * (xs[0] - xs[2]) +
                 (__int128)ys[2] * (xs[0] - xs[1]);
    return c == 0 ? 1 : 2;
}

/* ------------------------------------------------------------- the API */

void gm_scale_free(gm_scale *s)
{
    if (!s) return;
    for (size_t j = 0; j < s->n; j++) {
        rec *r = &s->r[j];
        gm_import_trace_free(&r->t);
        free(r->slots);
        free(r->steps);
        free(r->step_t);
        free(r->step_event);
    }
    free(s);
}

int gm_scale_open(const gm_scale_input *in, size_t n, int device, gm_scale **out, gm_err *err)
{
    *out = NULL;
    if (n < 2 || n > GM_SCALE_MAX_INPUTS)
        return gm_errf(err, GM_EUSAGE,
                       "scale takes two or three recordings (at two or three values of the "
                       "dimension), not %zu",
                       n);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < i; j++)
            if (in[i].x == in[j].x)
                return gm_errf(err, GM_EUSAGE,
                               "%s and %s are both at %lld; the recordings must be at "
                               "different values",
                               in[j].path, in[i].path, (long long)in[i].x);
    gm_scale *s = calloc(1, sizeof *s);
    if (!s) return gm_errf(err, GM_ENOMEM, "out of memory");
    int rc = GM_OK;
    for (size_t j = 0; j < n && rc == GM_OK; j++) {
        rec *r = &s->r[j];
        r->path = in[j].path;
        r->x = in[j].x;
        s->n++;
        int h = is_hdf5(r->path, err);
        if (h < 0)
            rc = h;
        else if (h)
            rc = load_trace(r->path, &r->t, err);
        else
            rc = load_snapshot(r->path, device, &r->t, err);
        if (rc == GM_OK) rc = align_one(r, err);
    }
    for (size_t j = 1; j < n && rc == GM_OK; j++)
        rc = align_check(&s->r[0], &s->r[j], err);
    if (rc) {
        gm_scale_free(s);
        return rc;
    }
    s->st.inputs = n;
    s->st.allocs = s->r[0].nslots;
    s->st.dropped_segment = s->r[0].dropped;
    int64_t xs[GM_SCALE_MAX_INPUTS];
    uint64_t ys[GM_SCALE_MAX_INPUTS];
    for (size_t j = 0; j < n; j++)
        xs[j] = s->r[j].x;
    for (size_t k = 0; k < s->r[0].nslots; k++) {
        for (size_t j = 0; j < n; j++)
            ys[j] = s->r[j].slots[k].size;
        int sh = shape(xs, ys, n);
        s->st.constant += sh == 0;
        s->st.linear += sh == 1;
        s->st.quadratic += sh == 2;
    }
    *out = s;
    return GM_OK;
}

void gm_scale_get_stats(const gm_scale *s, gm_scale_stats *st)
{
    *st = s->st;
}

int64_t gm_scale_max_input(const gm_scale *s)
{
    int64_t m = 0;
    for (size_t j = 0; j < s->n; j++)
        if (s->r[j].x > m) m = s->r[j].x;
    return m;
}

static void nearest(const gm_scale *s, int64_t x, size_t *a, size_t *b);

const gm_trace_meta *gm_scale_meta(const gm_scale *s, int64_t x)
{
    size_t a, b;
    nearest(s, x, &a, &b);
    return &s->r[a].t.meta;
}

/* The recording nearest x (ties: the lower value), and the second nearest. */
static void nearest(const gm_scale *s, int64_t x, size_t *a, size_t *b)
{
    size_t best = 0, second = SIZE_MAX;
    for (size_t j = 1; j < s->n; j++) {
        int64_t d = llabs(s->r[j].x - x), db = llabs(s->r[best].x - x);
        if (d < db || (d == db && s->r[j].x < s->r[best].x)) best = j;
    }
    for (size_t j = 0; j < s->n; j++) {
        if (j == best) continue;
        if (second == SIZE_MAX) {
            second = j;
            continue;
        }
        int64_t d = llabs(s->r[j].x - x), ds = llabs(s->r[second].x - x);
        if (d < ds || (d == ds && s->r[j].x < s->r[second].x)) second = j;
    }
    *a = best;
    *b = second;
}

static uint64_t slot_size(gm_scale *s, size_t k, int64_t x, gm_err *err, int *rc)
{
    int64_t xs[GM_SCALE_MAX_INPUTS];
    uint64_t ys[GM_SCALE_MAX_INPUTS];
    for (size_t j = 0; j < s->n; j++) {
        xs[j] = s->r[j].x;
        ys[j] = s->r[j].slots[k].size;
    }
    int clamped;
    uint64_t v = gm_scale_fit(xs, ys, s->n, x, &clamped);
    s->st.clamped += clamped;
    if (v > GM_TRACE_MAX_SIZE && *rc == GM_OK)
        *rc = gm_errf(err, GM_EINVAL,
                      "allocation %zu would be %llu bytes at %lld, more than a trace event can "
                      "hold (2^48); scale to a value nearer the recordings",
                      k, (unsigned long long)v, (long long)x);
    return v;
}

static uint64_t lerp_t(const rec *a, const rec *b, size_t i, int64_t x)
{
    if (a->x == x || !b) return a->step_t[i];
    __int128 ta = a->step_t[i], tb = b->step_t[i];
    __int128 v = div_round(ta * (b->x - x) + tb * (x - a->x), (__int128)(b->x - a->x));
    return v < 0 ? 0 : (uint64_t)v;
}

static int scaled_meta(gm_scale *s, size_t near, int64_t x, gm_trace_meta *m)
{
    if (copy_meta(m, &s->r[near].t.meta)) return GM_ENOMEM;
    char w[1024];
    int len = snprintf(w, sizeof w, "scaled to %lld from", (long long)x);
    for (size_t j = 0; j < s->n && len < (int)sizeof w; j++)
        len += snprintf(w + len, sizeof w - (size_t)len, "%s %s (%lld)", j ? "," : "", s->r[j].path,
                        (long long)s->r[j].x);
    if (len < (int)sizeof w)
        snprintf(w + len, sizeof w - (size_t)len,
                 ": %llu allocations, %llu constant, %llu linear, %llu quadratic; times "
                 "interpolated; nearest recording: %s",
                 (unsigned long long)s->st.allocs, (unsigned long long)s->st.constant,
                 (unsigned long long)s->st.linear, (unsigned long long)s->st.quadratic,
                 s->r[near].path);
    m->device_avail_bytes = m->device_avail_min_bytes = m->device_avail_max_bytes = 0;
    if (gm_trace_meta_set(&m->source, "scaled") || gm_trace_meta_set(&m->workload, w) ||
        gm_trace_meta_set(&m->device_avail_source, "") || gm_trace_meta_set(&m->command, ""))
        return GM_ENOMEM;
    return GM_OK;
}

int gm_scale_at(gm_scale *s, int64_t x, gm_import_trace *out, gm_err *err)
{
    memset(out, 0, sizeof *out);
    if (x < 1 || x > GM_SCALE_MAX_X)
        return gm_errf(err, GM_EUSAGE, "--to %lld is out of range; use 1..%lld", (long long)x,
                       (long long)GM_SCALE_MAX_X);
    size_t a, b;
    nearest(s, x, &a, &b);
    const rec *ra = &s->r[a], *rb = b == SIZE_MAX ? NULL : &s->r[b];
    s->st.clamped = 0;
    int rc = GM_OK;
    uint64_t *size = malloc((ra->nslots + 1) * sizeof *size);
    out->init = calloc(ra->npre + 1, sizeof *out->init);
    out->events = calloc(ra->nsteps + 1, sizeof *out->events);
    out->markers = calloc(ra->t.n_markers + 1, sizeof *out->markers);
    if (!size || !out->init || !out->events || !out->markers ||
        scaled_meta(s, a, x, &out->meta) != GM_OK) {
        free(size);
        gm_import_trace_free(out);
        return gm_errf(err, GM_ENOMEM, "out of memory");
    }
    for (size_t k = 0; k < ra->nslots; k++)
        size[k] = slot_size(s, k, x, err, &rc);
    for (size_t k = 0; k < ra->npre; k++)
        out->init[k] = (gm_init_row){.addr = ADDR_BASE + ADDR_STEP * k,
                                     .size = size[k],
                                     .stream = ra->slots[k].stream,
                                     .kind = GM_INIT_BLOCK,
                                     .category = ra->slots[k].cat};
    out->n_init = ra->npre;
    uint64_t t = 0;
    for (size_t i = 0; i < ra->nsteps; i++) {
        const step *st = &ra->steps[i];
        const gm_event *src = &ra->t.events[ra->step_event[i]];
        uint64_t ti = lerp_t(ra, rb, i, x);
        t = ti > t ? ti : t;
        gm_event *e = &out->events[i];
        *e = *src;
        e->t_ns = t;
        if (st->op == GM_OP_ALLOC || st->op == GM_OP_FREE) {
            e->addr = ADDR_BASE + ADDR_STEP * st->slot;
            e->size = size[st->slot];
        } else if (st->op == GM_OP_OOM) {
            e->size = size[st->slot];
        }
    }
    out->n_events = ra->nsteps;
    /* the events are the first recording's, so are the sites they name */
    if (copy_sites(ra->t.sites, ra->t.n_sites, &out->sites, &out->n_sites)) {
        free(size);
        gm_import_trace_free(out);
        return gm_errf(err, GM_ENOMEM, "out of memory");
    }
    /* markers: at the new time of the first event at or after theirs */
    for (size_t m = 0; m < ra->t.n_markers; m++) {
        gm_marker mk = ra->t.markers[m];
        size_t i = 0;
        while (i < ra->nsteps && ra->step_t[i] < mk.t_ns)
            i++;
        mk.t_ns = i < ra->nsteps ? out->events[i].t_ns : t;
        out->markers[out->n_markers++] = mk;
    }
    free(size);
    if (rc) gm_import_trace_free(out);
    return rc;
}

int gm_scale_events_at(gm_scale *s, int64_t x, gm_event **events, size_t *n, gm_err *err)
{
    gm_import_trace t;
    int rc = gm_scale_at(s, x, &t, err);
    if (rc) return rc;
    gm_event *ev = malloc((t.n_init + t.n_events + 1) * sizeof *ev);
    if (!ev) {
        gm_import_trace_free(&t);
        return gm_errf(err, GM_ENOMEM, "out of memory");
    }
    for (size_t k = 0; k < t.n_init; k++)
        ev[k] = (gm_event){.t_ns = 0,
                           .addr = t.init[k].addr,
                           .size = t.init[k].size,
                           .stream = t.init[k].stream,
                           .op = GM_OP_ALLOC,
                           .category = t.init[k].category,
                           .phase = GM_PHASE_UNKNOWN};
    memcpy(ev + t.n_init, t.events, t.n_events * sizeof *ev);
    *n = t.n_init + t.n_events;
    *events = ev;
    gm_import_trace_free(&t);
    return GM_OK;
}
