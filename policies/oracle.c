/*
 * oracle.c - the offline bound: it reads its trace's future and releases the
 * cached segments that are reused furthest ahead (Belady's rule applied to
 * segments). UNREALIZABLE: no running program knows its future; every output
 * labels it, and `gmsim compare` shows it as the bound, never the winner.
 *
 * The future. At attach the oracle reads the whole trace once and files
 * every allocation's event index under its segment class, the segment the
 * allocator would create for it: the small pool (blocks <= 1 MiB, 2 MiB
 * segments), 20 MiB for large blocks < 10 MiB, else the block rounded up to
 * 2 MiB (PyTorch's get_allocation_size; blocks are sized with the
 * allocator's own rounding). A free segment of S bytes counts as reused by
 * the next request it would serve without splitting off a segment's worth:
 * a small-pool request for a small segment, a large request of class in
 * (S - 20 MiB, S] for a large one, any request of its pool for an
 * expandable segment (the first of every class's next requests, for a
 * large one). A small request is filed under its pool, a large one under
 * its class: what those lookups read. Streams are not distinguished.
 * Distances are counted in events, at the engine's replay position
 * (env->event_index, ->pass), so traces without timestamps work and
 * --repeat passes wrap around. The
 * lists live in a temporary file (future.h), read as the replay advances:
 * memory is a few bytes per thousand allocations, not 32 bytes each.
 *
 *  attempt 0     release releasable segments, furthest next use first
 *                (never used again first; ties: larger, then LRU), until the
 *                request fits. Retry if that was enough.
 *  attempt 1     release everything cached and retry (as PyTorch).
 *  attempt 2     out of memory.
 *  proactive=1   (default) before each grow and on a timer every
 *                sample=TIME (default 1ms), release the cached segments whose
 *                next use is more than horizon=TIME away (default 0: any
 *                later instant), so the oracle holds the least reserved
 *                memory a release policy can with this allocator, paying in
 *                driver calls; horizon=never releases only segments never
 *                used again. proactive=0: only on failure.
 *  --scope device: release furthest-next-use first for the other tenant.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "future.h"
#include "pressure.h"
#include "sim/policy.h"
#include "traces/packed.h"
#include "traces/trace.h"

/* a large segment serves requests up to this much smaller than itself
 * (PyTorch's kLargeBuffer: the biggest segment a small large-pool request gets) */
#define LARGE_BUFFER (20ull * GM_MiB)
#define NEVER UINT64_MAX

typedef struct or_key {
    uint8_t small;
    uint64_t cls; /* segment class; 0 = every request of the pool */
    long fid;     /* its list in the future store: event indices and trace times */
    uint64_t n;   /* entries */
} or_key;

typedef struct or_policy {
    uint64_t sample_ns;
    int proactive;
    int attached;
    or_key *keys; /* sorted by (small, cls) */
    size_t nkeys, capkeys;
    uint64_t memo_tag[64]; /* key_get's memo: 0 = empty, else index + 1 */
    uint32_t memo_idx[64];
    /* note_alloc's memo: a request size (0 = empty) and the index of the
     * key it is filed under; a size's key is the same for the whole of
     * attach (the model is not used in between). Cleared with key_get's
     * when a new key moves the ones above it. */
    uint64_t size_tag[64];
    uint32_t size_key[64];
    gm_future *fut;
    uint64_t read_errors;     /* lookups the temporary file could not answer */
    uint64_t n_events;        /* per pass */
    uint64_t t_first, t_last; /* trace times of the first and last events */
    uint64_t horizon_ns;      /* proactive: release what is not reused within it */
    const uint64_t *shift;
    uint32_t repeat;
    const uint64_t *event_index;
    const uint32_t *pass;
    int ticked; /* position at the last timer tick */
    uint64_t tick_index;
    uint32_t tick_pass;
    gm_seglist segs;
    gm_addr_list order;
    uint64_t fail_bytes, idle_bytes, foreign_bytes, flushes;
} or_policy;

static int create(const char *params, void **state, gm_err *err)
{
    static const char *const known[] = {"horizon", "sample", "proactive", NULL};
    if (gm_policy_check_params("oracle", params, known, err)) return err->code;
    or_policy *p = calloc(1, sizeof *p);
    if (!p) return gm_errf(err, GM_ENOMEM, "out of memory");
    p->sample_ns = 1000000;
    p->proactive = 1;
    char v[64];
    int rc = GM_OK;
    if (gm_policy_param(params, "sample", v, sizeof v))
        rc = gm_parse_time(v, "--policy oracle:sample", &p->sample_ns, err);
    if (!rc && p->sample_ns == 0)
        rc = gm_errf(err, GM_EINVAL, "--policy oracle:sample must be more than 0");
    if (!rc && gm_policy_param(params, "horizon", v, sizeof v)) {
        if (!strcmp(v, "never"))
            p->horizon_ns = NEVER;
        else
            rc = gm_parse_time(v, "--policy oracle:horizon", &p->horizon_ns, err);
    }
    double d;
    if (!rc && gm_policy_param(params, "proactive", v, sizeof v)) {
        rc = gm_parse_double(v, "--policy oracle:proactive", 0, 1, &d, err);
        p->proactive = d != 0;
    }
    if (rc) {
        free(p);
        return rc;
    }
    *state = p;
    return GM_OK;
}

static void destroy(void *state)
{
    or_policy *p = state;
    gm_future_free(p->fut);
    free(p->keys);
    gm_seglist_free(&p->segs);
    gm_addr_list_free(&p->order);
    free(p);
}

/* ---------------- the future ---------------- */

static int key_cmp(const or_key *k, int small, uint64_t cls)
{
    if (k->small != small) return k->small < small ? -1 : 1;
    return k->cls < cls ? -1 : k->cls > cls;
}

/* First key >= (small, cls). */
static size_t key_lower(const or_policy *p, int small, uint64_t cls)
{
    size_t lo = 0, hi = p->nkeys;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (key_cmp(&p->keys[mid], small, cls) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static or_key *key_get(or_policy *p, int small, uint64_t cls)
{
    /* the keys last found, by a hash of (small, cls): attach looks up two
     * keys per allocation of the trace. Classes are segment sizes or 0,
     * even, so small can be the low bit of the memo's tag. */
    uint64_t tag = cls ^ (uint64_t)small;
    size_t slot = (size_t)((tag * 0x9e3779b97f4a7c15ull) >> 58);
    if (p->memo_idx[slot] && p->memo_tag[slot] == tag) {
        or_key *k = &p->keys[p->memo_idx[slot] - 1];
        if (k->small == small && k->cls == cls) return k;
    }
    size_t i = key_lower(p, small, cls);
    if (i < p->nkeys && key_cmp(&p->keys[i], small, cls) == 0) {
        p->memo_tag[slot] = tag;
        p->memo_idx[slot] = (uint32_t)i + 1;
        return &p->keys[i];
    }
    memset(p->memo_idx, 0, sizeof p->memo_idx); /* keys above i move up */
    memset(p->size_tag, 0, sizeof p->size_tag);
    if (p->nkeys == p->capkeys) {
        size_t cap = p->capkeys ? p->capkeys * 2 : 64;
        or_key *k = realloc(p->keys, cap * sizeof *k);
        if (!k) return NULL;
        p->keys = k;
        p->capkeys = cap;
    }
    long fid = gm_future_key(p->fut);
    if (fid < 0) return NULL;
    memmove(&p->keys[i + 1], &p->keys[i], (p->nkeys - i) * sizeof *p->keys);
    p->nkeys++;
    memset(&p->keys[i], 0, sizeof p->keys[i]);
    p->keys[i].small = (uint8_t)small;
    p->keys[i].cls = cls;
    p->keys[i].fid = fid;
    return &p->keys[i];
}

static int key_add(or_policy *p, or_key *k, uint64_t index, uint64_t t, gm_err *err)
{
    k->n++;
    return gm_future_add(p->fut, k->fid, index, t, err);
}

/* A small request is filed under its pool's key, a large one under its
 * class's: next_use asks a small segment's pool, a large segment's
 * classes (an expandable one's: all of them). The other key is still
 * made (each is one of segment_classes in the report), with no entries. */
static int note_alloc(or_policy *p, gm_alloc *a, const gm_event *e, uint64_t index, gm_err *err)
{
    size_t slot = (size_t)((e->size * 0x9e3779b97f4a7c15ull) >> 58);
    if (e->size && p->size_tag[slot] == e->size) /* seen: the same key */
        return key_add(p, &p->keys[p->size_key[slot]], index, e->t_ns, err);
    int small;
    uint64_t cls = a->ops->segment_size(a, e->size, &small); /* the model's own rule */
    or_key *k = key_get(p, small, cls);
    if (k) k = key_get(p, small, 0); /* both exist now, where they stay until a new key comes */
    if (k) k = &p->keys[key_lower(p, small, small ? 0 : cls)];
    int rc = k ? key_add(p, k, index, e->t_ns, err) : GM_ENOMEM;
    if (rc == GM_OK) {
        p->size_tag[slot] = e->size;
        p->size_key[slot] = (uint32_t)(k - p->keys);
    }
    if (rc == GM_ENOMEM) gm_errf(err, rc, "oracle: out of memory reading the trace's future");
    return rc;
}

static void note_events(or_policy *p, gm_alloc *a, const gm_event *ev, size_t n, uint64_t *index,
                        int *rc, gm_err *err)
{
    for (size_t i = 0; i < n && *rc == GM_OK; i++, (*index)++) {
        if (*index == 0) p->t_first = ev[i].t_ns;
        p->t_last = ev[i].t_ns;
        if (ev[i].op == GM_OP_ALLOC) *rc = note_alloc(p, a, &ev[i], *index, err);
    }
}

/* The future of env's trace into p: its keys, their lists and the
 * trace's span (attach's, or prepare's ahead of it). */
static int build_future(or_policy *p, gm_alloc *a, const gm_policy_env *env, gm_err *err)
{
    uint64_t index = 0;
    int rc = gm_future_open(&p->fut, err);
    if (rc) return rc;
    if (env->events) {
        note_events(p, a, env->events, env->n_events, &index, &rc, err);
    } else if (env->packed) { /* kept packed (traces/packed.h): decoded a chunk at a time */
        gm_packed_cursor *c = gm_packed_cursor_new(env->packed);
        gm_event *buf = c ? malloc(GM_TRACE_CHUNK_EVENTS * sizeof *buf) : NULL;
        size_t n;
        if (!buf) rc = gm_errf(err, GM_ENOMEM, "out of memory");
        while (rc == GM_OK && buf && (n = gm_packed_read(c, buf, GM_TRACE_CHUNK_EVENTS)) > 0)
            note_events(p, a, buf, n, &index, &rc, err);
        free(buf);
        gm_packed_cursor_free(c);
    } else {
        gm_trace_reader *r;
        if ((rc = gm_trace_open(env->trace_path, &r, err))) return rc;
        gm_event *buf = malloc(GM_TRACE_CHUNK_EVENTS * sizeof *buf);
        if (!buf) {
            gm_trace_close(r);
            return gm_errf(err, GM_ENOMEM, "out of memory");
        }
        int64_t n = 0;
        while (rc == GM_OK && (n = gm_trace_read(r, buf, GM_TRACE_CHUNK_EVENTS, err)) > 0)
            note_events(p, a, buf, (size_t)n, &index, &rc, err);
        if (rc == GM_OK && n < 0) rc = (int)n;
        free(buf);
        gm_trace_close(r);
    }
    if (rc == GM_OK) rc = gm_future_seal(p->fut, err);
    p->n_events = index;
    return rc;
}

/* prepare (sim/policy.h): the future, on an instance that never runs. */
static int prepare(void *state, gm_alloc *a, const gm_policy_env *env, gm_err *err)
{
    or_policy *p = state;
    int rc = build_future(p, a, env, err);
    p->attached = rc == GM_OK;
    return rc;
}

/* What prepare built on q, moved to p: q keeps nothing of it. */
static void take_future(or_policy *p, or_policy *q)
{
    p->keys = q->keys;
    p->nkeys = q->nkeys;
    p->capkeys = q->capkeys;
    memcpy(p->memo_tag, q->memo_tag, sizeof p->memo_tag);
    memcpy(p->memo_idx, q->memo_idx, sizeof p->memo_idx);
    memcpy(p->size_tag, q->size_tag, sizeof p->size_tag);
    memcpy(p->size_key, q->size_key, sizeof p->size_key);
    p->fut = q->fut;
    p->n_events = q->n_events;
    p->t_first = q->t_first;
    p->t_last = q->t_last;
    q->keys = NULL;
    q->nkeys = q->capkeys = 0;
    q->fut = NULL;
    q->attached = 0;
}

static int attach(void *state, gm_alloc *a, const gm_policy_env *env, gm_err *err)
{
    or_policy *p = state, *q = env->prepared;
    int rc = GM_OK;
    if (q && q->attached)
        take_future(p, q);
    else
        rc = build_future(p, a, env, err);
    p->shift = env->time_shift_ns;
    p->repeat = env->repeat ? env->repeat : 1;
    p->event_index = env->event_index;
    p->pass = env->pass;
    p->attached = rc == GM_OK;
    return rc;
}

/* Distance from event `from` (pass-local), at trace time t_now, to the next
 * use of key k: in events (returned; NEVER if none) and in time (*dt). */
static uint64_t key_next(or_policy *p, const or_key *k, uint64_t from, uint64_t t_now,
                         uint32_t pass, uint64_t *dt)
{
    uint64_t idx, t;
    int r = gm_future_next(p->fut, k->fid, from, &idx, &t);
    if (r > 0) {
        *dt = t > t_now ? t - t_now : 0;
        return idx - from;
    }
    if (r < 0) p->read_errors++;
    if (k->n && pass + 1 < p->repeat && from <= p->n_events &&
        gm_future_first(p->fut, k->fid, &idx, &t)) { /* the next pass */
        *dt = (p->t_last > t_now ? p->t_last - t_now : 0) + (t - p->t_first);
        return p->n_events - from + idx;
    }
    *dt = NEVER;
    return NEVER;
}

/* Distance to the next request segment s would serve: events (returned)
 * and time (*dt). */
static uint64_t next_use(or_policy *p, const gm_seg_info *s, uint64_t from, uint64_t now,
                         uint64_t *dt)
{
    uint32_t pass = p->pass ? *p->pass : 0;
    uint64_t shift = p->shift ? *p->shift : 0;
    uint64_t t_now = now > shift ? now - shift : 0;
    uint64_t best = NEVER, d, t;
    *dt = NEVER;
    if (s->small_pool) {
        size_t i = key_lower(p, 1, 0);
        if (i < p->nkeys && p->keys[i].small && p->keys[i].cls == 0)
            best = key_next(p, &p->keys[i], from, t_now, pass, dt);
        return best;
    }
    /* the classes it would serve (every one: expandable): the first of
     * their next requests */
    uint64_t lo = s->size > LARGE_BUFFER && !s->expandable ? s->size - LARGE_BUFFER + 1 : 1;
    uint64_t hi = s->expandable ? UINT64_MAX : s->size;
    for (size_t i = key_lower(p, 0, lo); i < p->nkeys && !p->keys[i].small; i++) {
        if (p->keys[i].cls > hi) break;
        d = key_next(p, &p->keys[i], from, t_now, pass, &t);
        if (d < best) {
            best = d;
            *dt = t;
        }
    }
    return best;
}

/* ---------------- decisions ---------------- */

/* Furthest next use first (in gc_age of a private copy of the view); ties:
 * larger first, then least recently used. */
static int cmp_furthest(const void *x, const void *y)
{
    const gm_seg_info *a = x, *b = y;
    if (a->gc_age != b->gc_age) return a->gc_age > b->gc_age ? -1 : 1;
    if (a->releasable != b->releasable) return a->releasable > b->releasable ? -1 : 1;
    return gm_seg_cmp_lru(x, y);
}

/* Rank the releasable segments; from = first future event index. With
 * idle_only, keep only those not reused within the horizon. Returns the
 * count. */
static size_t rank(or_policy *p, gm_alloc *a, uint64_t from, uint64_t now, int idle_only)
{
    if (gm_seglist_fetch_releasable(&p->segs, a) != GM_OK) return 0;
    size_t j = 0;
    for (size_t i = 0; i < p->segs.n; i++) {
        gm_seg_info s = p->segs.v[i];
        uint64_t dt = 0;
        s.gc_age = p->attached ? next_use(p, &s, from, now, &dt) : 0;
        int idle = p->horizon_ns == NEVER ? s.gc_age == NEVER : dt > p->horizon_ns;
        if (!idle_only || idle) p->segs.v[j++] = s;
    }
    p->segs.n = j;
    gm_seg_sort(p->segs.v, j, cmp_furthest);
    if (gm_addr_list_from(&p->order, &p->segs) != GM_OK) return 0;
    return j;
}

static uint64_t release_furthest(or_policy *p, gm_alloc *a, uint64_t from, uint64_t need,
                                 uint64_t now)
{
    size_t n = rank(p, a, from, now, 0);
    return gm_release_in_order(a, &p->segs, p->order.v, n, need, now, NULL);
}

static void release_idle(or_policy *p, gm_alloc *a, uint64_t from, uint64_t now)
{
    if (!p->attached || !p->proactive) return;
    size_t n = rank(p, a, from, now, 1);
    if (n) p->idle_bytes += gm_release_in_order(a, &p->segs, p->order.v, n, NEVER, now, NULL);
}

/* During a malloc the current event is being served: the future starts after it. */
static uint64_t after_current(const or_policy *p)
{
    return p->event_index ? *p->event_index + 1 : 0;
}

static void before_grow(void *state, gm_alloc *a, const gm_pressure *pr)
{
    or_policy *p = state;
    release_idle(p, a, after_current(p), pr->now_ns);
}

static int on_alloc_fail(void *state, gm_alloc *a, const gm_pressure *pr)
{
    or_policy *p = state;
    if (pr->attempt == 0) {
        uint64_t need = gm_pressure_need(a, pr);
        uint64_t got = release_furthest(p, a, after_current(p), need, pr->now_ns);
        p->fail_bytes += got;
        return got >= need ? GM_POLICY_RETRY : GM_POLICY_NEXT;
    }
    if (pr->attempt == 1) {
        p->flushes++;
        gm_release_all(a, pr->now_ns);
        return GM_POLICY_RETRY;
    }
    return GM_POLICY_GIVE_UP;
}

static uint64_t timer_period_ns(void *state)
{
    or_policy *p = state;
    return p->proactive ? p->sample_ns : 0;
}

/* Timers fire before the event at *event_index is processed. */
static void on_timer(void *state, gm_alloc *a, uint64_t now)
{
    or_policy *p = state;
    uint64_t from = p->event_index ? *p->event_index : 0;
    uint32_t pass = p->pass ? *p->pass : 0;
    if (p->ticked && from == p->tick_index && pass == p->tick_pass)
        return; /* no event since the last tick: nothing changed */
    p->ticked = 1;
    p->tick_index = from;
    p->tick_pass = pass;
    release_idle(p, a, from, now);
}

static uint64_t on_foreign_pressure(void *state, gm_alloc *a, uint64_t need, uint64_t now)
{
    or_policy *p = state;
    /* the other tenant's event is being served; ours has not started */
    uint64_t got = release_furthest(p, a, p->event_index ? *p->event_index : 0, need, now);
    p->foreign_bytes += got;
    return got;
}

static void report(void *state, gm_report *o)
{
    or_policy *p = state;
    gm_report_bool(o, "realizable", 0);
    gm_report_str(
        o, "note",
        "UNREALIZABLE: reads the trace's future; a bound, not a policy a program can run");
    gm_report_bool(o, "proactive", p->proactive);
    gm_report_int(o, "segment_classes", GM_KV_PLAIN, (int64_t)p->nkeys);
    gm_report_int(o, "failure_released_bytes", GM_KV_BYTES, (int64_t)p->fail_bytes);
    gm_report_int(o, "proactive_released_bytes", GM_KV_BYTES, (int64_t)p->idle_bytes);
    gm_report_int(o, "foreign_released_bytes", GM_KV_BYTES, (int64_t)p->foreign_bytes);
    gm_report_int(o, "cache_flushes", GM_KV_PLAIN, (int64_t)p->flushes);
    if (p->read_errors) /* the temporary file failed: those lookups saw no future */
        gm_report_int(o, "future_read_errors", GM_KV_PLAIN, (int64_t)p->read_errors);
}

const gm_policy_ops gm_policy_oracle = {
    .version = GM_POLICY_VERSION,
    .name = "oracle",
    .summary = "UNREALIZABLE bound: reads the future, releases what is reused furthest ahead",
    .realizable = 0,
    .cost = 2.3,
    .create = create,
    .destroy = destroy,
    .before_grow = before_grow,
    .on_alloc_fail = on_alloc_fail,
    .timer_period_ns = timer_period_ns,
    .on_timer = on_timer,
    .report = report,
    .attach = attach,
    .prepare = prepare,
    /* attach's share of an oracle run's time: 0.0107 of 0.107 s on a 2 M-event
     * trace in memory (bench/README.md, "Twenty-sixth round") */
    .prepare_share = 0.10,
    .on_foreign_pressure = on_foreign_pressure,
};
