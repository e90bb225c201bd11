/*
 * records.c - see records.h. Two locks: `in_mu` guards the parked records
 * (taken briefly by CUPTI's buffer-completion thread), `out_mu` guards the
 * drain state (live allocations, open NVTX ranges, last written time), so a
 * slow drain never holds up CUPTI's delivery thread.
 *
 * CUPTI facts relied on (CUDA 13.0 headers, cupti_activity.h):
 * - CUpti_ActivityMemory4 (CUPTI_ACTIVITY_KIND_MEMORY2) is one record per
 *   allocation and one per release, memoryOperationType ALLOCATION / RELEASE,
 *   with address, bytes, timestamp (ns), deviceId, streamId
 *   (CUPTI_INVALID_STREAM_ID when the operation is not async).
 * - CUpti_ActivityMarker2 (CUPTI_ACTIVITY_KIND_MARKER): flags say
 *   INSTANTANEOUS / START / END; `name` is NULL for an END, which is paired to
 *   its START by `id`; timestamp 0 means "could not be timed".
 * - CUpti_ActivityMemoryPool3 (CUPTI_ACTIVITY_KIND_MEMORY_POOL): pool created /
 *   destroyed / trimmed, with size and deviceId.
 */
#include "records.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/addrmap.h"

enum { MK_START = 0, MK_INSTANT = 1, MK_END = 2 }; /* sort order at equal times */
#define NO_DEVICE UINT32_MAX

/* A memory record waiting for its drain. */
typedef struct parked_ev {
    uint64_t ts;  /* CUPTI timestamp (absolute ns) */
    uint64_t seq; /* arrival order: makes the sort stable */
    uint64_t addr;
    uint64_t bytes;
    uint64_t stream;
    uint32_t device;
    uint8_t op; /* GM_OP_ALLOC / GM_OP_FREE */
} parked_ev;

/* A marker (NVTX or memory pool) waiting for its drain. */
typedef struct parked_mk {
    uint64_t ts;
    uint64_t seq;
    uint32_t id;
    uint32_t device; /* NO_DEVICE for NVTX (host-side) markers */
    uint8_t what;    /* MK_* */
    uint8_t pool;    /* 1: a memory-pool record, never an iteration mark */
    char name[GM_MARKER_NAME_LEN];
} parked_mk;

typedef struct open_range {
    uint32_t id;
    uint8_t phase;
    char name[GM_MARKER_NAME_LEN];
} open_range;

/* A growable array of fixed-size items. */
typedef struct vec {
    void *p;
    size_t n, cap;
} vec;

/* Room for `more` items after the n already there. */
static int vec_reserve(vec *v, size_t more, size_t item)
{
    if (v->n + more <= v->cap) return GM_OK;
    size_t cap = v->cap ? v->cap : 1024;
    while (cap < v->n + more)
        cap *= 2;
    void *p = realloc(v->p, cap * item);
    if (!p) return GM_ENOMEM;
    v->p = p;
    v->cap = cap;
    return GM_OK;
}

static void *vec_push(vec *v, size_t item)
{
    if (vec_reserve(v, 1, item) != GM_OK) return NULL;
    return (char *)v->p + item * v->n++;
}

struct gmc_recorder {
    gmc_opts opts;

    pthread_mutex_t in_mu; /* ---- guarded by in_mu ---- */
    vec ev_in, mk_in;      /* parked_ev / parked_mk */
    uint64_t seq;
    gmc_stats in_st;

    pthread_mutex_t out_mu; /* ---- guarded by out_mu ---- */
    vec ev_work, mk_work;   /* the batch being drained */
    gm_addrmap live;        /* addr key -> requested bytes */
    gm_addrmap gone;        /* pre-capture addresses already freed */
    vec initial;            /* gm_init_row */
    open_range open[GMC_MAX_OPEN_RANGES];
    size_t nopen;
    uint64_t last_ev_t, last_mk_t; /* last written times (relative) */
    int device; /* device recorded: opts.device, else that of the earliest alloc, -1 */
    gmc_stats out_st;
};

/* ---------------- names ---------------- */

static const struct {
    const char *name;
    int kind;
} kind_names[] = {
    {"device", CUPTI_ACTIVITY_MEMORY_KIND_DEVICE},
    {"managed", CUPTI_ACTIVITY_MEMORY_KIND_MANAGED},
    {"pinned", CUPTI_ACTIVITY_MEMORY_KIND_PINNED},
};
#define NKINDS (sizeof kind_names / sizeof kind_names[0])

int gmc_kinds_parse(const char *list, uint32_t *mask, gm_err *err)
{
    uint32_t m = 0;
    const char *p = list ? list : "";
    while (*p) {
        size_t len = strcspn(p, ",");
        size_t k;
        for (k = 0; k < NKINDS; k++)
            if (len == strlen(kind_names[k].name) && strncasecmp(p, kind_names[k].name, len) == 0)
                break;
        if (k == NKINDS)
            return gm_errf(err, GM_EUSAGE,
                           "--kinds: unknown memory kind '%.*s'; use a comma-separated "
                           "list of device, managed, pinned",
                           (int)len, p);
        m |= GMC_KIND_BIT(kind_names[k].kind);
        p += len;
        if (*p == ',') p++;
    }
    if (!m) return gm_errf(err, GM_EUSAGE, "--kinds: empty list; use e.g. --kinds device,managed");
    *mask = m;
    return GM_OK;
}

char *gmc_kinds_format(uint32_t mask, char *buf, size_t len)
{
    size_t used = 0;
    if (len) buf[0] = '\0';
    for (size_t k = 0; k < NKINDS; k++) {
        if (!(mask & GMC_KIND_BIT(kind_names[k].kind))) continue;
        int w = snprintf(buf + used, len > used ? len - used : 0, "%s%s", used ? "," : "",
                         kind_names[k].name);
        if (w > 0) used += (size_t)w;
    }
    return buf;
}

/* Case-insensitive substring search. */
static int contains_ci(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (; *hay; hay++)
        if (strncasecmp(hay, needle, n) == 0) return 1;
    return 0;
}

int gmc_phase_of_name(const char *name)
{
    if (!name) return GM_PHASE_UNKNOWN;
    if (contains_ci(name, "forward")) return GM_PHASE_FORWARD;
    if (contains_ci(name, "backward")) return GM_PHASE_BACKWARD;
    if (contains_ci(name, "optimizer")) return GM_PHASE_OPTIMIZER;
    return GM_PHASE_UNKNOWN;
}

/* "iteration", "iteration 3", "iter_7", "step", "step:12" - a word at the start. */
int gmc_is_iteration_name(const char *name)
{
    static const char *const words[] = {"iteration", "iter", "step"};
    if (!name) return 0;
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        size_t n = strlen(words[i]);
        if (strncasecmp(name, words[i], n) == 0 && !isalpha((unsigned char)name[n])) return 1;
    }
    return 0;
}

/* ---------------- rows ---------------- */

void gmc_rows_clear(gmc_rows *rows)
{
    rows->nev = 0;
    rows->nmk = 0;
}

void gmc_rows_free(gmc_rows *rows)
{
    free(rows->ev);
    free(rows->mk);
    memset(rows, 0, sizeof *rows);
}

static gm_event *rows_ev(gmc_rows *rows)
{
    if (rows->nev == rows->cap_ev) {
        size_t cap = rows->cap_ev ? rows->cap_ev * 2 : 4096;
        gm_event *p = realloc(rows->ev, cap * sizeof *p);
        if (!p) return NULL;
        rows->ev = p;
        rows->cap_ev = cap;
    }
    return &rows->ev[rows->nev++];
}

static gm_marker *rows_mk(gmc_rows *rows)
{
    if (rows->nmk == rows->cap_mk) {
        size_t cap = rows->cap_mk ? rows->cap_mk * 2 : 256;
        gm_marker *p = realloc(rows->mk, cap * sizeof *p);
        if (!p) return NULL;
        rows->mk = p;
        rows->cap_mk = cap;
    }
    return &rows->mk[rows->nmk++];
}

/* ---------------- life cycle ---------------- */

int gmc_recorder_create(const gmc_opts *opts, gmc_recorder **out, gm_err *err)
{
    *out = NULL;
    gmc_recorder *r = calloc(1, sizeof *r);
    if (!r) return gm_errf(err, GM_ENOMEM, "gmcapture: out of host memory");
    r->opts = *opts;
    if (!r->opts.kinds) r->opts.kinds = GMC_KINDS_DEFAULT;
    r->device = opts->device < 0 ? -1 : opts->device;
    if (gm_addrmap_init(&r->live, 4096) != GM_OK || gm_addrmap_init(&r->gone, 16) != GM_OK) {
        gm_addrmap_free(&r->live);
        free(r);
        return gm_errf(err, GM_ENOMEM, "gmcapture: out of host memory");
    }
    pthread_mutex_init(&r->in_mu, NULL);
    pthread_mutex_init(&r->out_mu, NULL);
    *out = r;
    return GM_OK;
}

void gmc_recorder_free(gmc_recorder *r)
{
    if (!r) return;
    free(r->ev_in.p);
    free(r->mk_in.p);
    free(r->ev_work.p);
    free(r->mk_work.p);
    free(r->initial.p);
    gm_addrmap_free(&r->live);
    gm_addrmap_free(&r->gone);
    pthread_mutex_destroy(&r->in_mu);
    pthread_mutex_destroy(&r->out_mu);
    free(r);
}

/* ---------------- add (CUPTI's thread) ---------------- */

static void add_memory(gmc_recorder *r, const CUpti_ActivityMemory4 *m)
{
    uint8_t op;
    if (m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION)
        op = GM_OP_ALLOC;
    else if (m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE)
        op = GM_OP_FREE;
    else {
        r->in_st.ignored++;
        return;
    }
    /* A release whose kind CUPTI left unknown is kept: drain pairs it by address. */
    int kind = (int)m->memoryKind;
    int unknown_release = op == GM_OP_FREE && kind == CUPTI_ACTIVITY_MEMORY_KIND_UNKNOWN;
    if (!unknown_release && (kind < 0 || kind >= 32 || !(r->opts.kinds & GMC_KIND_BIT(kind)))) {
        r->in_st.filtered_kind++;
        return;
    }
    if (m->timestamp == 0) {
        r->in_st.untimed++;
        return;
    }
    if (op == GM_OP_ALLOC && (m->bytes == 0 || m->bytes > GM_TRACE_MAX_SIZE)) {
        r->in_st.ignored++;
        return;
    }
    parked_ev *p = vec_push(&r->ev_in, sizeof *p);
    if (!p) {
        r->in_st.parked_nomem++;
        return;
    }
    p->ts = m->timestamp;
    p->seq = r->seq++;
    p->addr = m->address;
    p->bytes = m->bytes;
    p->stream = m->streamId == CUPTI_INVALID_STREAM_ID ? 0 : m->streamId;
    p->device = m->deviceId;
    p->op = op;
    r->in_st.mem_records++;
}

static parked_mk *park_marker(gmc_recorder *r, uint64_t ts)
{
    if (ts == 0) {
        r->in_st.untimed++;
        return NULL;
    }
    parked_mk *p = vec_push(&r->mk_in, sizeof *p);
    if (!p) {
        r->in_st.parked_nomem++;
        return NULL;
    }
    memset(p, 0, sizeof *p);
    p->ts = ts;
    p->seq = r->seq++;
    p->device = NO_DEVICE;
    return p;
}

static void add_marker(gmc_recorder *r, const CUpti_ActivityMarker2 *m)
{
    uint32_t flags = (uint32_t)m->flags;
    uint8_t what;
    if (flags & CUPTI_ACTIVITY_FLAG_MARKER_START)
        what = MK_START;
    else if (flags & CUPTI_ACTIVITY_FLAG_MARKER_END)
        what = MK_END;
    else if (flags & CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS)
        what = MK_INSTANT;
    else { /* sync-object markers (acquire/release) say nothing about phases */
        r->in_st.ignored++;
        return;
    }
    parked_mk *p = park_marker(r, m->timestamp);
    if (!p) return;
    p->id = m->id;
    p->what = what;
    snprintf(p->name, sizeof p->name, "%s", m->name ? m->name : "");
    r->in_st.marker_records++;
}

static void add_pool(gmc_recorder *r, const CUpti_ActivityMemoryPool3 *m)
{
    const char *what;
    switch (m->memoryPoolOperationType) {
    case CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED:
        what = "created";
        break;
    case CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_DESTROYED:
        what = "destroyed";
        break;
    case CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_TRIMMED:
        what = "trimmed";
        break;
    default:
        r->in_st.ignored++;
        return;
    }
    parked_mk *p = park_marker(r, m->timestamp);
    if (!p) return;
    p->what = MK_INSTANT;
    p->pool = 1;
    p->device = m->deviceId;
    /* e.g. "mempool trimmed 0x7f0000000000 size=1073741824" */
    snprintf(p->name, sizeof p->name, "mempool %s 0x%llx size=%llu", what,
             (unsigned long long)m->address, (unsigned long long)m->size);
    r->in_st.pool_records++;
}

/* With in_mu held. */
static void add_locked(gmc_recorder *r, const CUpti_Activity *rec)
{
    r->in_st.records++;
    switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_MEMORY2:
        add_memory(r, (const CUpti_ActivityMemory4 *)rec);
        break;
    case CUPTI_ACTIVITY_KIND_MARKER:
        add_marker(r, (const CUpti_ActivityMarker2 *)rec);
        break;
    case CUPTI_ACTIVITY_KIND_MEMORY_POOL:
        add_pool(r, (const CUpti_ActivityMemoryPool3 *)rec);
        break;
    default:
        r->in_st.ignored++;
        break;
    }
}

void gmc_recorder_add(gmc_recorder *r, const CUpti_Activity *rec)
{
    pthread_mutex_lock(&r->in_mu);
    add_locked(r, rec);
    pthread_mutex_unlock(&r->in_mu);
}

size_t gmc_recorder_buffer(gmc_recorder *r, uint8_t *buf, size_t valid_bytes,
                           gmc_next_record_fn next)
{
    size_t n = 0;
    CUpti_Activity *rec = NULL;
    if (!buf || !valid_bytes) return 0;
    /* one lock per buffer; CUPTI: iterate until MAX_LIMIT_REACHED (the end) or
     * INVALID_KIND (an incomplete record), i.e. until any non-success */
    pthread_mutex_lock(&r->in_mu);
    while (next(buf, valid_bytes, &rec) == CUPTI_SUCCESS) {
        add_locked(r, rec);
        n++;
    }
    pthread_mutex_unlock(&r->in_mu);
    return n;
}

void gmc_recorder_add_dropped(gmc_recorder *r, uint64_t n)
{
    pthread_mutex_lock(&r->in_mu);
    r->in_st.dropped += n;
    pthread_mutex_unlock(&r->in_mu);
}

int gmc_recorder_device(gmc_recorder *r)
{
    pthread_mutex_lock(&r->out_mu);
    int d = r->device;
    pthread_mutex_unlock(&r->out_mu);
    return d;
}

/* ---------------- drain (flush thread) ---------------- */

static int cmp_ev(const void *a, const void *b)
{
    const parked_ev *x = a, *y = b;
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int cmp_mk(const void *a, const void *b)
{
    const parked_mk *x = a, *y = b;
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    if (x->what != y->what) return x->what < y->what ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Sort `in` and move its items with ts < watermark into `work` (emptied first). */
static int take_ready(vec *in, vec *work, size_t item, uint64_t watermark,
                      int (*cmp)(const void *, const void *))
{
    work->n = 0;
    if (in->n == 0) return GM_OK;
    qsort(in->p, in->n, item, cmp);
    /* first not ready: binary search on the leading uint64_t ts */
    size_t lo = 0, hi = in->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint64_t ts;
        memcpy(&ts, (char *)in->p + mid * item, sizeof ts);
        if (ts < watermark)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t k = lo;
    if (k == 0) return GM_OK;
    if (vec_reserve(work, k, item) != GM_OK) return GM_ENOMEM;
    memcpy(work->p, in->p, k * item);
    work->n = k;
    memmove(in->p, (char *)in->p + k * item, (in->n - k) * item);
    in->n -= k;
    return GM_OK;
}

/* Trace time of a CUPTI timestamp: relative to t0, never before `last`. */
static uint64_t rel_time(gmc_recorder *r, uint64_t ts, uint64_t *last)
{
    uint64_t t = ts > r->opts.t0_ns ? ts - r->opts.t0_ns : 0;
    if (t < *last) {
        r->out_st.late++;
        t = *last;
    }
    *last = t;
    return t;
}

static uint8_t current_phase(const gmc_recorder *r)
{
    for (size_t i = r->nopen; i-- > 0;)
        if (r->open[i].phase != GM_PHASE_UNKNOWN) return r->open[i].phase;
    return GM_PHASE_UNKNOWN;
}

static int emit_marker(gmc_recorder *r, gmc_rows *rows, uint64_t t, uint8_t kind, const char *name)
{
    gm_marker *m = rows_mk(rows);
    if (!m) return GM_ENOMEM;
    memset(m, 0, sizeof *m);
    m->t_ns = t;
    m->kind = kind;
    snprintf(m->name, sizeof m->name, "%s", name);
    r->out_st.markers++;
    return GM_OK;
}

static int drain_marker(gmc_recorder *r, const parked_mk *p, gmc_rows *rows)
{
    if (p->device != NO_DEVICE && r->device >= 0 && p->device != (uint32_t)r->device) {
        r->out_st.filtered_device++;
        return GM_OK;
    }
    if (p->what == MK_END) {
        size_t i = r->nopen;
        while (i > 0 && r->open[i - 1].id != p->id)
            i--;
        if (i == 0) {
            r->out_st.unmatched_pops++;
            return GM_OK;
        }
        open_range o = r->open[i - 1];
        memmove(&r->open[i - 1], &r->open[i], (r->nopen - i) * sizeof r->open[0]);
        r->nopen--;
        return emit_marker(r, rows, rel_time(r, p->ts, &r->last_mk_t), GM_MARK_RANGE_POP, o.name);
    }
    uint64_t t = rel_time(r, p->ts, &r->last_mk_t);
    int iter = !p->pool && gmc_is_iteration_name(p->name);
    if (p->what == MK_INSTANT)
        return emit_marker(r, rows, t, iter ? GM_MARK_ITERATION : GM_MARK_INSTANT, p->name);
    /* MK_START */
    if (r->nopen == GMC_MAX_OPEN_RANGES) {
        memmove(&r->open[0], &r->open[1], (r->nopen - 1) * sizeof r->open[0]);
        r->nopen--;
        r->out_st.range_overflow++;
    }
    open_range *o = &r->open[r->nopen++];
    o->id = p->id;
    o->phase = (uint8_t)gmc_phase_of_name(p->name);
    memcpy(o->name, p->name, sizeof o->name);
    if (iter && emit_marker(r, rows, t, GM_MARK_ITERATION, p->name) != GM_OK) return GM_ENOMEM;
    return emit_marker(r, rows, t, GM_MARK_RANGE_PUSH, p->name);
}

static int emit_event(gmc_recorder *r, gmc_rows *rows, uint64_t t, uint8_t op, const parked_ev *p,
                      uint64_t size)
{
    gm_event *e = rows_ev(rows);
    if (!e) return GM_ENOMEM;
    *e = (gm_event){0}; /* id and site: none (the writer numbers ids) */
    e->t_ns = t;
    e->addr = p->addr;
    e->size = size;
    e->stream = p->stream;
    e->op = op;
    e->category = GM_CAT_UNKNOWN;
    e->phase = current_phase(r);
    r->out_st.events++;
    return GM_OK;
}

/* A free of an address never allocated in this capture. */
static int drain_unknown_free(gmc_recorder *r, const parked_ev *p, uint64_t t, gmc_rows *rows)
{
    uint64_t key = gm_addrmap_key(p->addr);
    if (gm_addrmap_get(&r->gone, key) || p->bytes == 0 || p->bytes > GM_TRACE_MAX_SIZE) {
        r->out_st.double_frees++; /* freed twice, or nothing known to describe it */
        return GM_OK;
    }
    if (vec_reserve(&r->initial, 2, sizeof(gm_init_row)) != GM_OK ||
        gm_addrmap_put(&r->gone, key, p->bytes) != GM_OK)
        return GM_ENOMEM;
    gm_init_row *seg = (gm_init_row *)r->initial.p + r->initial.n, *blk = seg + 1;
    r->initial.n += 2;
    memset(seg, 0, 2 * sizeof *seg);
    seg->addr = blk->addr = p->addr;
    seg->size = blk->size = blk->block_size = p->bytes;
    seg->stream = blk->stream = p->stream;
    seg->kind = GM_INIT_SEGMENT;
    blk->kind = GM_INIT_BLOCK;
    seg->category = blk->category = GM_CAT_UNKNOWN;
    r->out_st.pre_capture_frees++;
    return emit_event(r, rows, t, GM_OP_FREE, p, p->bytes);
}

static int drain_event(gmc_recorder *r, const parked_ev *p, gmc_rows *rows)
{
    uint64_t key = gm_addrmap_key(p->addr), size;
    /* By default the device is that of the earliest allocation in time (not in
     * arrival order, which depends on how CUPTI happened to deliver buffers). */
    if (r->device < 0 && p->op == GM_OP_ALLOC) r->device = (int)p->device;
    if (r->device >= 0 && p->device != (uint32_t)r->device) {
        /* a free of a live address is ours whatever device CUPTI names */
        if (p->op != GM_OP_FREE || !gm_addrmap_get(&r->live, key)) {
            r->out_st.filtered_device++;
            return GM_OK;
        }
    }
    uint64_t t = rel_time(r, p->ts, &r->last_ev_t);
    if (p->op == GM_OP_FREE) {
        if (gm_addrmap_del(&r->live, key, &size))
            return emit_event(r, rows, t, GM_OP_FREE, p, size);
        return drain_unknown_free(r, p, t, rows);
    }
    if (gm_addrmap_del(&r->live, key, &size)) { /* its free was lost: repair */
        r->out_st.repaired_allocs++;
        if (emit_event(r, rows, t, GM_OP_FREE, p, size) != GM_OK) return GM_ENOMEM;
    }
    gm_addrmap_del(&r->gone, key, NULL);
    if (gm_addrmap_put(&r->live, key, p->bytes) != GM_OK) return GM_ENOMEM;
    return emit_event(r, rows, t, GM_OP_ALLOC, p, p->bytes);
}

int gmc_recorder_drain(gmc_recorder *r, uint64_t watermark_ns, gmc_rows *rows, gm_err *err)
{
    int rc = GM_OK;
    pthread_mutex_lock(&r->out_mu);
    pthread_mutex_lock(&r->in_mu);
    if (take_ready(&r->ev_in, &r->ev_work, sizeof(parked_ev), watermark_ns, cmp_ev) != GM_OK ||
        take_ready(&r->mk_in, &r->mk_work, sizeof(parked_mk), watermark_ns, cmp_mk) != GM_OK)
        rc = GM_ENOMEM;
    pthread_mutex_unlock(&r->in_mu);
    if (rc != GM_OK) {
        pthread_mutex_unlock(&r->out_mu);
        return gm_errf(err, rc, "gmcapture: out of host memory while sorting records");
    }

    const parked_ev *ev = r->ev_work.p;
    const parked_mk *mk = r->mk_work.p;
    size_t i = 0, j = 0, nev = r->ev_work.n, nmk = r->mk_work.n;
    while (rc == GM_OK && (i < nev || j < nmk)) {
        /* markers first at equal times: a range opened at t covers an alloc at t */
        if (j < nmk && (i == nev || mk[j].ts <= ev[i].ts))
            rc = drain_marker(r, &mk[j++], rows);
        else
            rc = drain_event(r, &ev[i++], rows);
    }
    if (rc != GM_OK) r->out_st.parked_nomem += (nev - i) + (nmk - j);
    r->out_st.live_allocs = r->live.count;
    r->ev_work.n = r->mk_work.n = 0;
    pthread_mutex_unlock(&r->out_mu);
    if (rc != GM_OK)
        return gm_errf(err, rc, "gmcapture: out of host memory while converting records");
    return GM_OK;
}

const gm_init_row *gmc_recorder_initial(gmc_recorder *r, size_t *n)
{
    pthread_mutex_lock(&r->out_mu);
    *n = r->initial.n;
    const gm_init_row *rows = r->initial.p;
    pthread_mutex_unlock(&r->out_mu);
    return rows;
}

void gmc_recorder_stats(gmc_recorder *r, gmc_stats *st)
{
    pthread_mutex_lock(&r->out_mu);
    pthread_mutex_lock(&r->in_mu);
    *st = r->in_st;
    const gmc_stats *o = &r->out_st;
    st->filtered_device += o->filtered_device;
    st->parked_nomem += o->parked_nomem;
    st->events = o->events;
    st->markers = o->markers;
    st->pre_capture_frees = o->pre_capture_frees;
    st->double_frees = o->double_frees;
    st->repaired_allocs = o->repaired_allocs;
    st->late = o->late;
    st->unmatched_pops = o->unmatched_pops;
    st->range_overflow = o->range_overflow;
    st->live_allocs = o->live_allocs;
    pthread_mutex_unlock(&r->in_mu);
    pthread_mutex_unlock(&r->out_mu);
}
