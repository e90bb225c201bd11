/* engine.c - the discrete-event engine; see engine.h. */
#include "engine.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ffwd.h"
#include "policy.h"
#include "base/addrmap.h"
#include "base/hash.h"
#include "traces/alloc_conf.h"
#include "traces/packed.h"
#include "traces/trace.h"

#define CHUNK_EVENTS GM_TRACE_CHUNK_EVENTS
#define PASS_GAP_NS 1000ull /* idle time between --repeat passes */
#define SKIPPED 0ull        /* live-map value of an allocation skipped on OOM */

typedef struct tenant {
    /* what a stretch's event reads and writes as it joins the device's
     * series (stretch_merge, device_fold, tree_update), in one line: with
     * 64 tenants the line is cold when the tenant's turn comes (a stretch
     * of another's events ran in between), and the merge had read four */
    _Alignas(64) uint64_t next_t; /* effective time of buf[pos]; UINT64_MAX: done */
    struct stretch_ent *log;      /* a stretch (stretch()): its events simulated ahead, their
                                     times and Q and A after each, log[lhead, ln) not yet in */
    uint64_t dev_q, dev_a, dev_r; /* its Q, A, R as last added into the device totals */
    uint32_t lhead, ln;
    uint32_t lfat; /* lfs[lfhead].at while lfhead < lfn, else NO_LFAT */
    int done;
    int idx;
    /* what every event reads or writes first, together (with many tenants
     * a tenant's state is cold when its turn comes: fewer lines to fetch);
     * tenants are 64-byte aligned (gm_engine_run) */
    _Alignas(64) gm_alloc *a;
    gm_tenant_result *res;
    const gm_event *buf; /* current chunk: own (file) or a window of spec->events */
    size_t nbuf, pos;
    uint64_t shift; /* added to trace time: offset + pass shift    */
    uint64_t index; /* pass-local index of buf[pos]                */
    /* the others by id (trace.h: dense_ids), not by hashing every event's
     * address: handle + 1 (0 = none) and the address its free must repeat */
    uint64_t *slot, *slot_addr;
    size_t n_slot;
    uint64_t t_last; /* last effective time processed               */
    uint64_t timer_period, next_timer;
    uint64_t pending_bytes;
    struct oomx *x;         /* --host-tier, --on-oom chain: what they keep (NULL: neither) */
    struct stretch_lf *lfs; /* a stretch's events at grid lines, lfs[lfhead, lfn) not yet in */
    uint32_t lfhead, lfn;
    int ids;
    int started; /* first event reached: initial state rebuilt */
    int hashing; /* still hashing pass 0 */
    /* in memory: an earlier tenant replays the same events from the same
     * source and hashes them for both (its index; -1: none) */
    int hash_of;
    gm_policy *pol;
    gm_ffwd *ff; /* fast-forward (ffwd.h); NULL: every event is simulated */
    int inert;   /* its policy is inert with its model's limits (policy.h), known at close */
    /* the rest */
    const gm_tenant_spec *spec;
    gm_trace_reader *r;
    gm_packed_cursor *pk; /* a packed in-memory trace's reading position (spec->packed) */
    gm_event *own;
    int own_carry;  /* own has room for GM_FF_CARRY more events (refill_keep) */
    size_t mem_pos; /* in-memory source: next event to hand out */
    uint32_t pass;
    uint64_t t_first;    /* trace time of event 0                       */
    gm_addrmap live;     /* trace address key -> allocator handle: the allocations
                            without an id (/initial_state unless seeded_slots moved
                            it, traces without ids) */
    gm_addrmap pass_new; /* addresses allocated in this pass (only with --repeat) */
    gm_addrmap pending;  /* free_requested, not yet freed: key -> block bytes */
    uint8_t last_phase;  /* --empty-cache-at-phase: the phase of the last event that had one */
    gm_hash hash;
    int restoring; /* rebuilding /initial_state */
} tenant;
_Static_assert(offsetof(tenant, a) == 64, "the merge's fields fill the tenant's first line");

/* One event of a stretch: its time, and the tenant's Q and A after it (R
 * does not move in a stretch: no driver call). */
typedef struct stretch_ent {
    uint64_t t_ns, q, a;
} stretch_ent;
/* The tenant's first event at or after a line of the device timeline's
 * grid (where a bucket may begin), log[at]: its largest free block before
 * the event and after it. Apart: they are few, and the logs are read once
 * an event, 64 tenants' at a time, where their size is cache misses. */
typedef struct stretch_lf {
    uint64_t at, before, after;
} stretch_lf;
#define NO_LF UINT64_MAX
#define NO_LFAT UINT32_MAX

/* A tenant's place in the order in which tenants run (engine.h): the
 * earliest next event, ties to the lower index, finished tenants last; as
 * one number, done, next_t and the index from the top bits down. */
__extension__ typedef unsigned __int128 run_key;

typedef struct sim {
    const gm_sim_config *cfg;
    const gm_policy_ops *pol_ops; /* each tenant's release policy, with ... */
    const char *pol_params;       /* ... its parameters                     */
    gm_device *dev;
    tenant *t;
    size_t n;
    gm_sim_result *res;
    uint64_t q, a, r;  /* device totals (several tenants) */
    uint64_t overhead; /* context overhead per tenant, resolved in setup() */
    int share;         /* enum gm_share_mode applied (setup(): never AUTO) */
    int withhold;      /* --share requests with a request somewhere: others' requests held back */
    /* 1: step() has one of its rare cases to look at (several tenants, an
     * event hook, empty_cache at phases, withheld requests): one test per
     * event instead of four */
    int rare;
    int stretch;          /* several tenants may run stretches (stretch_allowed) */
    uint32_t stretch_cap; /* the most events a stretch takes (stretch_events) */
    size_t contexts;      /* --mps: tenants alive on the one context */
    uint64_t next_progress;
    uint64_t timer_min; /* several tenants: no timer of any is due before this */
    run_key *tree;      /* several tenants: a winner tree of their run_keys (tree_update) */
    run_key second;     /* the smallest key of the tenants other than the last updated */
    size_t leaves;      /* its leaves: the tenants, padded to a power of 2 */
    gm_host_tier tier;  /* --host-tier (or --on-oom chain's pcie4), when has_tier */
    int has_tier;
    uint64_t host_bytes; /* what the tenants hold on the host tier */
} sim;

/* ---------------- tenant lifecycle ---------------- */

static void hook_trampoline(void *ctx, const gm_seg_event *ev);

typedef struct hook_ctx {
    const gm_sim_config *cfg;
    const struct tenant *t;
} hook_ctx;

static int refill(sim *s, tenant *t, gm_err *err);
static int retire(sim *s, tenant *t, uint64_t now, int status, gm_err *err);
static inline void tenant_step_metrics(tenant *t, uint64_t now);
static inline void update_device(sim *s, tenant *t, uint64_t t_ns);
static int on_oom(sim *s, tenant *t, const gm_event *e, uint64_t *slot, uint64_t now, int *abort,
                  gm_err *err);
static void set_withheld(sim *s, const tenant *t);
static void tensor_free(tenant *t, uint64_t h, uint64_t now);
static void record_oom(sim *s, tenant *t, const gm_event *e, uint64_t now);
static int x_open(sim *s, tenant *t, gm_err *err);
static void x_close(tenant *t);
static uint64_t x_size(tenant *t, const gm_event *e);
static int x_note(tenant *t, const gm_event *e, uint64_t size, uint32_t id);
static int x_rescue(sim *s, tenant *t, const gm_event *e, uint64_t *size, uint64_t now,
                    uint64_t *h);
static void x_skipped_free(sim *s, tenant *t, uint64_t key, uint64_t now);

/* The tenant's trace as people know it (spec->name, else its path): every
 * message and result names it so. */
static const char *tname(const tenant *t)
{
    return t->spec->name ? t->spec->name : t->spec->path;
}

/* ---------------- event source: a trace file, memory or packed memory ----------------
 * A file (t->r) and a packed trace (t->pk, traces/packed.h) are read a chunk
 * at a time into t->own; an in-memory trace is read where it is. */

/* The metadata of an in-memory trace given none. */
static const gm_trace_meta meta_none = {.version = GM_TRACE_VERSION, .source = "memory"};

static const gm_trace_meta *src_meta(const tenant *t)
{
    if (t->r) return gm_trace_meta_get(t->r);
    return t->spec->meta ? t->spec->meta : &meta_none;
}

/* The next chunk into t->buf, after the last `keep` events of the one
 * there now (0: none; fast-forward checks a cycle across a chunk's end,
 * refill_keep): its events from t->buf + keep on. A file's kept events
 * move to the front of t->own, which grows by GM_FF_CARRY events the
 * first time; an in-memory trace's window just widens. The chunks, and so
 * what the trace hash covers at a time, are the same either way. */
static int64_t src_read(tenant *t, size_t keep, gm_err *err)
{
    if (t->r || t->pk) {
        if (keep && !t->own_carry) {
            gm_event *v = realloc(t->own, (CHUNK_EVENTS + GM_FF_CARRY) * sizeof *v);
            if (!v) return gm_errf(err, GM_ENOMEM, "out of memory");
            t->buf = t->own = v; /* a file's chunk is always in own */
            t->own_carry = 1;
        }
        if (keep) memmove(t->own, t->buf + t->nbuf - keep, keep * sizeof *t->own);
        int64_t n = t->r ? gm_trace_read(t->r, t->own + keep, CHUNK_EVENTS, err)
                         : (int64_t)gm_packed_read(t->pk, t->own + keep, CHUNK_EVENTS);
        t->buf = t->own;
        return n;
    }
    size_t n = t->spec->n_events - t->mem_pos;
    if (n > CHUNK_EVENTS) n = CHUNK_EVENTS;
    t->buf = t->spec->events + t->mem_pos - keep;
    t->mem_pos += n;
    return (int64_t)n;
}

static int src_rewind(tenant *t)
{
    t->mem_pos = 0;
    if (t->pk) gm_packed_rewind(t->pk);
    return t->r ? gm_trace_rewind(t->r) : GM_OK;
}

static const char *conf_for(const gm_sim_config *cfg, const gm_trace_meta *meta)
{
    if (cfg->alloc_conf) return cfg->alloc_conf;
    return meta->alloc_conf ? meta->alloc_conf : "";
}

/* The allocator model a tenant gets: --allocator, else what its settings
 * choose (backend:cudaMallocAsync is cuda-async), else pytorch's; NULL
 * when --allocator names none (*name: the name looked up). */
static const gm_alloc_ops *model_ops(const gm_sim_config *cfg, const char *conf, const char **name)
{
    *name = cfg->allocator                   ? cfg->allocator
            : gm_pt_conf_selects_async(conf) ? "cuda-async"
                                             : "pytorch";
    return gm_alloc_find(*name);
}

/* The PyTorch version whose settings rules apply (0: the newest). */
static int model_torch(const gm_sim_config *cfg, const gm_trace_meta *meta)
{
    return cfg->torch_version ? cfg->torch_version : gm_torch_version_parse(meta->torch_version);
}

/* What tenant `idx` (spec ts) tells its policy before the first event
 * (attach, prepare), but the engine's live position. */
static gm_policy_env policy_env(const gm_tenant_spec *ts, int idx)
{
    return (gm_policy_env){.trace_path = ts->path,
                           .events = ts->events,
                           .packed = ts->events ? NULL : ts->packed,
                           .n_events = ts->n_events,
                           .tenant = idx,
                           .offset_ns = ts->offset_ns,
                           .repeat = ts->repeat};
}

/* The cap sharing puts on a tenant's reserved bytes: its limit under
 * --share requests; under hard-cap and --mps the one size it was given
 * (the limit, else the request: HAMi's and MPS's single figure); 0 = none. */
static uint64_t share_cap(const sim *s, const tenant *t)
{
    const gm_tenant_result *r = t->res;
    if (s->share == GM_SHARE_HARD_CAP || s->cfg->mps)
        return r->limit_bytes ? r->limit_bytes : r->request_bytes;
    return s->share == GM_SHARE_REQUESTS ? r->limit_bytes : 0;
}

/* op << 56 ^ category << 48 ^ phase << 40, the fourth lane's high bytes.
 * The three bytes are adjacent: on a little-endian machine one load and a
 * byte swap put them there (the byte after them, padding, masked off),
 * instead of three loads, shifts and xors an event. */
_Static_assert(offsetof(gm_event, category) == offsetof(gm_event, op) + 1 &&
                   offsetof(gm_event, phase) == offsetof(gm_event, op) + 2 &&
                   offsetof(gm_event, phase) + 2 <= sizeof(gm_event),
               "gm_event's op, category and phase are adjacent bytes");
static inline uint64_t hash_kind(const gm_event *e)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint32_t w;
    memcpy(&w, &e->op, sizeof w);
    return __builtin_bswap64((uint64_t)(w & 0xffffffu));
#else
    return ((uint64_t)e->op << 56) ^ ((uint64_t)e->category << 48) ^ ((uint64_t)e->phase << 40);
#endif
}

/* An event into a chunk's four lanes (one per column group). */
static inline void hash_lanes(gm_hash lane[4], const gm_event *e)
{
    gm_hash_u64(&lane[0], e->t_ns);
    gm_hash_u64(&lane[1], e->addr);
    gm_hash_u64(&lane[2], e->size);
    gm_hash_u64(&lane[3], e->stream ^ hash_kind(e));
}

/* The hash with AVX-512 (F and DQ: a 64-bit multiply per lane) where
 * the CPU has it and gm_trace_hash_simd allows: the same rounds, the
 * eight lanes of two chunks in one register, one round of each an event
 * pair (the scalar loop is bound by its ~30 instructions an event). */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HASH_AVX512 1
_Static_assert(offsetof(gm_event, t_ns) == 0 && offsetof(gm_event, addr) == 8 &&
                   offsetof(gm_event, size) == 16 && offsetof(gm_event, stream) == 24,
               "an event's first 32 bytes are the first four lanes' words, in order");

__attribute__((target("avx512f,avx512dq"))) static void
hash_pairs_avx512(gm_hash la[4], gm_hash lb[4], const gm_event *a, const gm_event *b, size_t m)
{
    __m512i s = _mm512_set_epi64((long long)lb[3].h, (long long)lb[2].h, (long long)lb[1].h,
                                 (long long)lb[0].h, (long long)la[3].h, (long long)la[2].h,
                                 (long long)la[1].h, (long long)la[0].h);
    const __m512i mul = _mm512_set1_epi64((long long)GM_HASH_MUL),
                  add = _mm512_set1_epi64((long long)GM_HASH_ADD);
    for (size_t i = 0; i < m; i++) {
        __m256i va = _mm256_loadu_si256((const void *)&a[i]);
        __m256i vb = _mm256_loadu_si256((const void *)&b[i]);
        __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(va), vb, 1);
        /* the fourth lane of each: stream ^ the kind bytes */
        __m512i k =
            _mm512_mask_set1_epi64(_mm512_maskz_set1_epi64(0x08, (long long)hash_kind(&a[i])), 0x80,
                                   (long long)hash_kind(&b[i]));
        __m512i x = _mm512_mullo_epi64(_mm512_xor_si512(s, _mm512_xor_si512(v, k)), mul);
        s = _mm512_add_epi64(_mm512_xor_si512(x, _mm512_srli_epi64(x, GM_HASH_SHIFT)), add);
    }
    uint64_t out[8];
    _mm512_storeu_si512((void *)out, s);
    for (int j = 0; j < 4; j++) {
        la[j].h = out[j];
        lb[j].h = out[4 + j];
    }
}
#endif

static _Atomic int hash_simd_allowed = 1;

void gm_trace_hash_simd(int allow)
{
    atomic_store_explicit(&hash_simd_allowed, allow, memory_order_relaxed);
}

/* Chunk a, then chunk b (nb 0: none), into the trace's hash: each chunk
 * through four lanes of its own, folded in once, so the multiplies
 * overlap; the two chunks' lanes side by side make eight chains instead
 * of four (the hash waits on their latency, not on the instructions). */
static void hash_events2(gm_hash *h, const gm_event *a, size_t na, const gm_event *b, size_t nb)
{
    gm_hash la[4], lb[4];
    for (int k = 0; k < 4; k++) {
        gm_hash_init(&la[k]);
        gm_hash_init(&lb[k]);
    }
    size_t m = na < nb ? na : nb, i = 0;
#ifdef HASH_AVX512
    if (m && atomic_load_explicit(&hash_simd_allowed, memory_order_relaxed) &&
        __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq")) {
        hash_pairs_avx512(la, lb, a, b, m);
        i = m;
    }
#endif
    for (; i < m; i++) {
        hash_lanes(la, &a[i]);
        hash_lanes(lb, &b[i]);
    }
    for (; i < na; i++)
        hash_lanes(la, &a[i]);
    for (i = m; i < nb; i++)
        hash_lanes(lb, &b[i]);
    for (int k = 0; k < 4; k++)
        gm_hash_u64(h, gm_hash_final(&la[k]));
    for (int k = 0; nb && k < 4; k++)
        gm_hash_u64(h, gm_hash_final(&lb[k]));
}

/* One chunk into the trace's hash. */
static void hash_events(gm_hash *h, const gm_event *buf, size_t n)
{
    hash_events2(h, buf, n, NULL, 0);
}

/* The chunk src_read just gave (its n events at ev) into the trace's hash.
 * An in-memory trace's chunks start at multiples of CHUNK_EVENTS: an
 * even one is hashed with the next (hash_events2, as
 * gm_trace_hash_events does), which the odd one's read then skips. The
 * hash reads the two chunks out of memory into the cache just before the
 * run steps through them, instead of the whole trace at once at open
 * (where every event then came from memory twice). */
static void hash_read(tenant *t, const gm_event *ev, size_t n)
{
    if (!t->hashing) return;
    if (t->r || t->pk) {
        hash_events(&t->hash, ev, n);
        return;
    }
    size_t at = t->mem_pos - n, next = t->mem_pos, total = t->spec->n_events;
    if ((at / CHUNK_EVENTS) & 1) return; /* hashed with the one before */
    size_t nb = total - next < CHUNK_EVENTS ? total - next : CHUNK_EVENTS;
    hash_events2(&t->hash, ev, n, t->spec->events + next, nb);
}

/* The hash starts from the metadata's source as a result keeps it
 * (gm_tenant_result.source: cut to its size), whoever computes it. */
static void hash_start(gm_hash *h, const char *source)
{
    gm_hash_init(h);
    gm_hash_bytes(h, source, strnlen(source, sizeof((gm_tenant_result *)0)->source - 1));
}

static void hash_hex(const gm_hash *h, char out[17])
{
    snprintf(out, 17, "%016" PRIx64, gm_hash_final(h));
}

void gm_trace_hash_start(gm_hash *h, const char *source)
{
    hash_start(h, source ? source : "");
}

void gm_trace_hash_chunk(gm_hash *h, const gm_event *ev, size_t n)
{
    hash_events(h, ev, n); /* as a run hashes a chunk it read (hash_read) */
}

void gm_trace_hash_end(const gm_hash *h, char out[17])
{
    hash_hex(h, out);
}

void gm_trace_hash_events(const char *source, const gm_event *ev, size_t n, char out[17])
{
    gm_hash h;
    hash_start(&h, source ? source : "");
    for (size_t i = 0; i < n;
         i += 2 * CHUNK_EVENTS) { /* the chunks src_read gives, two at a time */
        size_t na = n - i < CHUNK_EVENTS ? n - i : CHUNK_EVENTS, j = i + na;
        hash_events2(&h, ev + i, na, ev + j, n - j < CHUNK_EVENTS ? n - j : CHUNK_EVENTS);
    }
    hash_hex(&h, out);
}

static int tenant_open(sim *s, tenant *t, gm_err *err)
{
    const gm_sim_config *cfg = s->cfg;
    int rc = t->spec->events || t->spec->packed || t->r ? GM_OK
                                                        : gm_trace_open(t->spec->path, &t->r, err);
    if (rc) return rc;
    if (!t->spec->events && t->spec->packed && !t->pk &&
        !(t->pk = gm_packed_cursor_new(t->spec->packed)))
        return gm_errf(err, GM_ENOMEM, "out of memory");
    const gm_trace_meta *meta = src_meta(t);
    gm_tenant_result *res = t->res;
    snprintf(res->path, sizeof res->path, "%s", tname(t));
    snprintf(res->source, sizeof res->source, "%s", meta->source ? meta->source : "");
    res->trace_events = t->r ? gm_trace_nevents(t->r) : t->spec->n_events;
    t->ids = meta->dense_ids; /* allocations by id, not by address (trace.h) */
    hash_start(&t->hash, res->source);
    t->hashing = !cfg->no_hash;
    if (t->hashing && (t->spec->events || t->spec->packed) &&
        t->spec->trace_hash) { /* in memory, and known */
        snprintf(res->trace_hash, sizeof res->trace_hash, "%s", t->spec->trace_hash);
        t->hashing = 0;
    }
    /* copies of one trace in memory (gmsim fit --tenants, compare's
     * preload): the first hashes it, the others take its hash at the end */
    for (int j = 0; t->hashing && t->spec->events && j < t->idx; j++) {
        const tenant *u = &s->t[j];
        if (u->hashing && u->spec->events == t->spec->events &&
            u->spec->n_events == t->spec->n_events && !strcmp(u->res->source, res->source)) {
            t->hashing = 0;
            t->hash_of = j;
        }
    }
    const char *conf = conf_for(cfg, meta);
    snprintf(res->alloc_conf, sizeof res->alloc_conf, "%s", conf);

    rc = gm_policy_new(s->pol_ops, s->pol_params, &t->pol, err);
    if (rc) return rc;
    const char *name;
    const gm_alloc_ops *ops = model_ops(cfg, conf, &name);
    if (!ops)
        return gm_errf(err, GM_EINVAL, "--allocator '%s': unknown allocator; choose one of: %s",
                       name, gm_alloc_names());
    int tv = model_torch(cfg, meta);
    res->torch_version = tv ? tv : GM_TORCH_NEWEST;
    rc = gm_alloc_create_for(ops, s->dev, conf, tv, cfg->memory_fraction, t->pol, &t->a, err);
    gm_pt_conf pc; /* what of the settings the model does nothing with, for the results */
    gm_err ignore;
    if (rc == GM_OK && gm_pt_conf_parse_for(conf, tv, &pc, &ignore) == GM_OK)
        snprintf(res->conf_no_effect, sizeof res->conf_no_effect, "%s", pc.no_effect);
    if (rc) {
        if (!cfg->alloc_conf && conf[0]) { /* the trace's own settings failed */
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%s", err->msg);
            return gm_errf(err, rc,
                           "%s: its recorded allocator settings do not parse (%s); override "
                           "them with --alloc-conf ''",
                           tname(t), msg);
        }
        return rc;
    }
    if (t->spec->quota_bytes &&
        (!t->a->limits.memory_limit || t->spec->quota_bytes < t->a->limits.memory_limit))
        t->a->limits.memory_limit = t->spec->quota_bytes;
    uint64_t cap = share_cap(s, t);
    if (cap && (!t->a->limits.memory_limit || cap < t->a->limits.memory_limit))
        t->a->limits.memory_limit = cap;
    t->a->tenant = t->idx;
    t->a->no_stats = cfg->no_device_stats; /* no one reads them: the model may skip them */
    if (t->pol->ops->attach) { /* policies/policy.h: the tenant's inputs (oracle: its future) */
        gm_policy_env env = policy_env(t->spec, t->idx);
        env.event_index = &t->index;
        env.pass = &t->pass;
        env.time_shift_ns = &t->shift;
        gm_policy_prep *prep = cfg->policy_prep ? cfg->policy_prep[t->idx] : NULL;
        env.prepared = prep ? prep->take(prep) : NULL;
        if ((rc = t->pol->ops->attach(t->pol->state, t->a, &env, err))) return rc;
    }
    if (cfg->seg_hook) {
        hook_ctx *hc = malloc(sizeof *hc);
        if (!hc) return gm_errf(err, GM_ENOMEM, "out of memory");
        hc->cfg = cfg;
        hc->t = t;
        t->a->seg_hook = hook_trampoline;
        t->a->seg_hook_ctx = hc;
    }
    /* --mps: one context, the MPS server's, for every client (README, "Sharing a GPU") */
    if ((!cfg->mps || s->contexts++ == 0) && gm_device_add_context(s->dev, s->overhead) != GM_OK)
        return gm_errf(err, GM_EOOM,
                       "%s: the CUDA context overhead (%" PRIu64 " bytes per tenant) does not "
                       "fit on the device; give a larger --capacity or a smaller --overhead",
                       tname(t), s->overhead);
    if (gm_addrmap_init(&t->live, 1024) || gm_addrmap_init(&t->pass_new, 16) ||
        gm_addrmap_init(&t->pending, 16))
        return gm_errf(err, GM_ENOMEM, "out of memory");
    t->own = t->r || t->pk ? malloc(CHUNK_EVENTS * sizeof *t->own) : NULL;
    if ((t->r || t->pk) && !t->own) return gm_errf(err, GM_ENOMEM, "out of memory");
    const gm_policy_ops *po = t->pol->ops;
    t->timer_period = po->timer_period_ns ? po->timer_period_ns(t->pol->state) : 0;
    return s->has_tier || cfg->on_oom_chain ? x_open(s, t, err) : GM_OK;
}

static void hook_trampoline(void *ctx, const gm_seg_event *ev)
{
    const hook_ctx *hc = ctx;
    uint64_t idx = hc->t->restoring ? UINT64_MAX : hc->t->index;
    hc->cfg->seg_hook(hc->cfg->seg_hook_ctx, hc->t->idx, idx, ev);
}

/* Which rows of /initial_state the replay rebuilds (enum gm_initial_mode):
 * recorded: all; live: the blocks, and the segments of private pools (a
 * captured graph's memory, kept as recorded); none: nothing. Rows kept are
 * moved to the front; returns how many. */
static size_t initial_rows(int mode, gm_init_row *rows, size_t n)
{
    if (mode == GM_INITIAL_RECORDED) return n;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const gm_init_row *r = &rows[i];
        int priv = r->kind == GM_INIT_SEGMENT && (r->pool_id0 || r->pool_id1);
        if (mode == GM_INITIAL_LIVE && (r->kind == GM_INIT_BLOCK || priv)) rows[k++] = *r;
    }
    return k;
}

/* Bytes a row adds to the reserve (an expandable segment's are its mapped
 * ranges, not its address range). */
static uint64_t row_reserved(const gm_init_row *r)
{
    if (r->kind == GM_INIT_MAPPED) return r->size;
    return r->kind == GM_INIT_SEGMENT && !r->expandable ? r->size : 0;
}

/* --initial-state none: the pre-existing blocks stay out; their frees are
 * skipped (SKIPPED in the live map) as a later pass's are. */
static int skip_initial_blocks(tenant *t, const gm_init_row *rows, size_t n, gm_err *err)
{
    for (size_t i = 0; i < n; i++) {
        if (rows[i].kind != GM_INIT_BLOCK) continue;
        t->res->init_skipped_blocks++;
        if (gm_addrmap_put(&t->live, gm_addrmap_key(rows[i].addr), SKIPPED))
            return gm_errf(err, GM_ENOMEM, "out of memory");
    }
    return GM_OK;
}

static int slots_grow(tenant *t, uint32_t id, gm_err *err);

/* A seeded trace (trace.h, dense_ids 2: its writer numbered the blocks of
 * /initial_state 1..B, in order, before the first event) has its
 * pre-existing blocks moved from the address map into their id slots, as
 * if allocated by id: their frees carry those ids, and the plain loop,
 * fast-forward and stretches, which take allocations by id only (plain(),
 * stretch()), are then not held off for the whole run by blocks that live
 * to its end (a snapshot's parameters). Not with --repeat, whose later
 * passes find the blocks a pass left by address (free_leftovers), nor when
 * two blocks share an address (the writer then gave them one slot): those
 * stay by address. rows: /initial_state's n rows, or the blocks among
 * them, in order. */
static int seeded_slots(tenant *t, const gm_init_row *rows, size_t n, gm_err *err)
{
    size_t blocks = 0;
    for (size_t i = 0; i < n; i++)
        blocks += rows[i].kind == GM_INIT_BLOCK;
    if (t->ids != 2 || t->spec->repeat != 1 || !blocks || t->live.count != blocks ||
        blocks >= UINT32_MAX)
        return GM_OK;
    if (slots_grow(t, (uint32_t)blocks, err)) return GM_ENOMEM;
    uint32_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (rows[i].kind != GM_INIT_BLOCK) continue;
        const uint64_t *h = gm_addrmap_get(&t->live, gm_addrmap_key(rows[i].addr));
        k++;
        t->slot[k] = *h + 1; /* a handle, or SKIPPED (--initial-state none) */
        t->slot_addr[k] = rows[i].addr;
    }
    gm_addrmap_clear(&t->live);
    return GM_OK;
}

/* Rebuild /initial_state in the allocator and the live map. */
static int tenant_restore(sim *s, tenant *t, gm_err *err)
{
    gm_init_row *rows = NULL;
    size_t n = 0;
    int rc = GM_OK;
    if (!t->r) { /* in memory: the spec's rows, if any (copied: the model may keep them) */
        if (!t->spec->n_initial) return GM_OK;
        rows = malloc(t->spec->n_initial * sizeof *rows);
        if (!rows) return gm_errf(err, GM_ENOMEM, "out of memory");
        memcpy(rows, t->spec->initial, t->spec->n_initial * sizeof *rows);
        n = t->spec->n_initial;
    } else {
        rc = gm_trace_read_initial(t->r, &rows, &n, err);
    }
    if (rc || n == 0) {
        free(rows);
        return rc;
    }
    for (size_t i = 0; i < n; i++) {
        t->res->init_reserved_bytes += row_reserved(&rows[i]);
        if (rows[i].kind == GM_INIT_BLOCK) t->res->init_live_bytes += rows[i].size;
    }
    if (s->cfg->initial_state == GM_INITIAL_NONE) {
        rc = skip_initial_blocks(t, rows, n, err);
        if (rc == GM_OK) rc = seeded_slots(t, rows, n, err);
        free(rows);
        return rc;
    }
    n = initial_rows(s->cfg->initial_state, rows, n);
    uint64_t *handles = calloc(n ? n : 1, sizeof *handles);
    if (!handles) {
        free(rows);
        return gm_errf(err, GM_ENOMEM, "out of memory");
    }
    t->restoring = 1;
    rc = n ? t->a->ops->restore(t->a, rows, n, handles, err) : GM_OK;
    t->restoring = 0;
    for (size_t i = 0; rc == GM_OK && i < n; i++) {
        if (rows[i].kind != GM_INIT_BLOCK) continue;
        uint64_t key = gm_addrmap_key(rows[i].addr);
        if (gm_addrmap_get(&t->live, key))
            rc = gm_errf(err, GM_EINVAL,
                         "%s: /initial_state lists address 0x%" PRIx64 " twice; re-import the "
                         "trace",
                         tname(t), rows[i].addr);
        else if (gm_addrmap_put(&t->live, key, handles[i]))
            rc = gm_errf(err, GM_ENOMEM, "out of memory");
        else if (s->cfg->init_hook && handles[i] != SKIPPED)
            s->cfg->init_hook(s->cfg->init_hook_ctx, t->idx, &rows[i], t->a, handles[i]);
    }
    if (rc == GM_OK) rc = seeded_slots(t, rows, n, err);
    if (rc && rc != GM_ENOMEM && !strstr(err->msg, tname(t))) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        gm_errf(err, rc, "%s: %s", tname(t), msg);
    }
    free(handles);
    free(rows);
    return rc;
}

/* A tenant starts at its first event: its initial state appears on the
 * device then, not at time 0. An initial state that does not fit is the
 * tenant's OOM at event 0 (size = the pre-existing segment bytes). */
static int tenant_start(sim *s, tenant *t, gm_err *err)
{
    t->started = 1;
    uint64_t t0 = t->next_t == UINT64_MAX ? t->shift : t->next_t; /* no events: at its offset */
    int rc = tenant_restore(s, t, err);
    if (rc != GM_OK && rc != GM_EOOM) return rc;
    tenant_step_metrics(t, t0);
    update_device(s, t, t0);
    /* fast-forward (ffwd.h): one tenant, a policy asked only when the model
     * grows; the model says whether it can (gm_ffwd_new) */
    const gm_policy_ops *po = t->pol->ops;
    if (rc == GM_OK && !s->cfg->no_fast_forward && s->n == 1 && !t->timer_period && !po->admit &&
        !po->on_tensor)
        t->ff = gm_ffwd_new(t->a);
    if (t->ff && s->cfg->ff_patience) gm_ffwd_set_patience(t->ff, s->cfg->ff_patience);
    if (rc == GM_EOOM) {
        /* not an OOM of the trace's event 0: what existed before it does not fit */
        int live = s->cfg->initial_state == GM_INITIAL_LIVE;
        t->res->init_live_oom = 1;
        gm_event e = {.t_ns = t0,
                      .size = live ? t->res->init_live_bytes : t->res->init_reserved_bytes,
                      .op = GM_OP_ALLOC};
        int abort = 0;
        if ((rc = on_oom(s, t, &e, NULL, t0, &abort, err))) return rc;
        return retire(s, t, t0, GM_TENANT_ABORTED, err);
    }
    return GM_OK;
}

/* The block at key is freed: it is no longer waiting for its free. */
static void settle(tenant *t, uint64_t key)
{
    uint64_t bytes;
    if (t->pending_bytes && gm_addrmap_del(&t->pending, key, &bytes)) t->pending_bytes -= bytes;
}

/* Tell the policy (on_tensor, policy.h) that a tensor's block is freed;
 * with model_free, free it in the model too. */
static void tensor_free_as(tenant *t, uint64_t h, uint64_t now, int model_free)
{
    if (t->pol->ops->on_tensor)
        t->pol->ops->on_tensor(t->pol->state, t->a, h, GM_CAT_UNKNOWN, 1, now);
    if (model_free) t->a->ops->free(t->a, h, now);
}

static void tensor_free(tenant *t, uint64_t h, uint64_t now)
{
    tensor_free_as(t, h, now, 1);
}

/* The tenant ends: tell the policy of every live allocation, free it in
 * the model (in no set order: the allocator is destroyed next) unless the
 * model's frees are its own business (gm_alloc_ops.free_is_local; cfg's
 * free_at_end, for tests, frees them anyway), and forget them. */
static void free_live(tenant *t, uint64_t now, const gm_sim_config *cfg)
{
    int model_frees = !t->a->ops->free_is_local || cfg->free_at_end;
    for (size_t i = 0; i <= t->live.mask; i++) {
        uint64_t key = t->live.slots[i].key, h = t->live.slots[i].val;
        if (!key) continue;
        settle(t, key);
        if (h != SKIPPED) tensor_free_as(t, h, now, model_frees);
    }
    gm_addrmap_clear(&t->live);
    for (size_t i = 0; i < t->n_slot; i++)
        if (t->slot[i]) {
            settle(t, gm_addrmap_key(t->slot_addr[i]));
            if (t->slot[i] - 1 != SKIPPED) tensor_free_as(t, t->slot[i] - 1, now, model_frees);
            t->slot[i] = 0;
        }
}

typedef struct leftover {
    uint64_t addr, h;
} leftover;

static int cmp_leftover(const void *x, const void *y)
{
    const leftover *a = x, *b = y;
    return a->addr < b->addr ? -1 : a->addr > b->addr;
}

/* End of a --repeat pass: free what the pass allocated and did not free
 * (everything live by id, and the addresses of pass_new), in address order,
 * so the order does not depend on how they were found. */
static int free_leftovers(tenant *t, uint64_t now, gm_err *err)
{
    size_t n = t->pass_new.count, k = 0;
    for (size_t i = 0; i < t->n_slot; i++)
        n += t->slot[i] != 0;
    leftover *v = malloc((n ? n : 1) * sizeof *v);
    if (!v) return gm_errf(err, GM_ENOMEM, "out of memory");
    for (size_t i = 0; i <= t->pass_new.mask; i++) {
        uint64_t key = t->pass_new.slots[i].key, h;
        if (key && gm_addrmap_del(&t->live, key, &h)) /* else freed during the pass */
            v[k++] = (leftover){key - 1, h};
    }
    for (size_t i = 0; i < t->n_slot; i++) {
        if (!t->slot[i]) continue;
        if (t->slot[i] - 1 == SKIPPED) {
            /* a skipped allocation that was never freed stays, as it does by
             * address, but by address: the next pass numbers its slot anew */
            if (gm_addrmap_put(&t->live, gm_addrmap_key(t->slot_addr[i]), SKIPPED)) {
                free(v);
                return gm_errf(err, GM_ENOMEM, "out of memory");
            }
        } else {
            v[k++] = (leftover){t->slot_addr[i], t->slot[i] - 1};
        }
        t->slot[i] = 0;
    }
    if (k > 1) qsort(v, k, sizeof *v, cmp_leftover);
    for (size_t i = 0; i < k; i++) {
        settle(t, gm_addrmap_key(v[i].addr));
        if (v[i].h != SKIPPED) tensor_free(t, v[i].h, now);
    }
    free(v);
    gm_addrmap_clear(&t->pass_new);
    return GM_OK;
}

/* Before t's model goes (retire, tenant_close): its limits, and whether
 * its policy is inert with them (policy.h): what says whether any such
 * policy made this run (study/same_run.h). */
static void keep_limits(tenant *t)
{
    if (!t->a || !t->pol) return;
    const gm_policy_ops *po = t->pol->ops;
    t->inert = po->inert && po->inert(t->pol->params, &t->a->limits);
    if (t->res) t->res->limits = t->a->limits;
}

static void tenant_close(tenant *t, const gm_sim_config *cfg)
{
    free(t->log);
    free(t->lfs);
    t->log = NULL;
    t->lfs = NULL;
    keep_limits(t);
    if (t->a) {
        if (t->a->seg_hook_ctx) free(t->a->seg_hook_ctx);
        t->a->seg_hook = NULL;
        if (t->live.slots) free_live(t, t->t_last, cfg);
        gm_alloc_destroy(t->a);
        t->a = NULL;
    }
    if (t->pol && t->pol->ops->report && t->res && !t->res->policy_report) {
        t->res->policy_report = gm_report_new();
        if (t->res->policy_report) t->pol->ops->report(t->pol->state, t->res->policy_report);
    }
    if (t->pol && t->res) t->res->policy_asks = t->pol->asks;
    gm_policy_destroy(t->pol);
    t->pol = NULL;
    gm_trace_close(t->r);
    t->r = NULL;
    gm_packed_cursor_free(t->pk);
    t->pk = NULL;
    gm_addrmap_free(&t->live);
    gm_addrmap_free(&t->pass_new);
    free(t->slot);
    free(t->slot_addr);
    t->slot = t->slot_addr = NULL;
    t->n_slot = 0;
    gm_addrmap_free(&t->pending);
    x_close(t);
    free(t->own);
    t->own = NULL;
    t->buf = NULL;
    if (t->ff && t->res) {
        t->res->fast_forwarded_events = t->ff->events_applied;
        t->res->ff_cycles = t->ff->cycles_applied;
        t->res->ff_records = t->ff->records_made;
        t->res->ff_records_dropped = t->ff->records_failed;
    }
    gm_ffwd_free(t->ff);
    t->ff = NULL;
}

/* ---------------- event flow ---------------- */

static void finish_hash(tenant *t)
{
    if (!t->hashing) return;
    t->hashing = 0;
    hash_hex(&t->hash, t->res->trace_hash);
}

/* An aborted tenant still hashes the rest of its trace (reproducibility). */
static int drain_hash(tenant *t, gm_err *err)
{
    while (t->hashing) {
        int64_t n = src_read(t, 0, err);
        if (n < 0) return (int)n;
        if (n == 0) {
            finish_hash(t);
            break;
        }
        t->nbuf = (size_t)n;
        hash_read(t, t->buf, t->nbuf);
    }
    return GM_OK;
}

static void set_next(tenant *t)
{
    t->next_t = t->pos < t->nbuf ? t->buf[t->pos].t_ns + t->shift : UINT64_MAX;
}

/* End of a pass: start the next one, or finish. */
static int end_pass(sim *s, tenant *t, gm_err *err)
{
    finish_hash(t);
    if (!t->started) { /* a trace with no events: its initial state is all there is */
        int rc = tenant_start(s, t, err);
        if (rc || t->done) return rc;
    }
    if (t->pass + 1 >= t->spec->repeat) return retire(s, t, t->t_last, GM_TENANT_COMPLETED, err);
    if (t->ff) gm_ffwd_reset(t->ff); /* the leftovers' frees below are no event */
    /* memory this pass allocated and never freed is given back, so each pass
     * starts from the same state (see docs: --repeat) */
    uint64_t requested = t->a->c.requested_bytes;
    int rc = free_leftovers(t, t->t_last, err);
    if (rc) return rc;
    t->res->repeat_leftover_bytes += requested - t->a->c.requested_bytes;
    tenant_step_metrics(t, t->t_last);
    update_device(s, t, t->t_last);
    rc = src_rewind(t);
    if (rc) return gm_errf(err, rc, "%s: cannot rewind for --repeat", tname(t));
    t->pass++;
    t->index = 0;
    t->shift = t->t_last + PASS_GAP_NS - t->t_first;
    t->nbuf = t->pos = 0;
    return refill(s, t, err);
}

static int refill(sim *s, tenant *t, gm_err *err)
{
    int64_t n = src_read(t, 0, err);
    if (n < 0) return (int)n;
    t->nbuf = (size_t)n;
    t->pos = 0;
    if (n == 0) return end_pass(s, t, err);
    hash_read(t, t->buf, t->nbuf);
    set_next(t);
    return GM_OK;
}

/* A new bucket of the device's series samples the largest free block of
 * every tenant as it is now in the order of events: a tenant ahead in a
 * stretch gives the one its next logged event kept from before it; t, when
 * its event came from its stretch, the one after it (lf_self; NO_LF: t is
 * not ahead, its model says). Out of line: rare. */
static __attribute__((noinline)) void device_lf_sample(sim *s, const tenant *t, uint64_t lf_self)
{
    uint64_t lf = 0;
    for (size_t i = 0; i < s->n; i++) {
        const tenant *u = &s->t[i];
        if (!u->a) continue;
        uint64_t x = u == t && lf_self != NO_LF      ? lf_self
                     : u != t && u->lfat == u->lhead ? u->lfs[u->lfhead].before
                                                     : u->a->ops->largest_free(u->a);
        lf = x > lf ? x : lf;
    }
    gm_metrics_ext_sample(&s->res->device, lf);
}

/* Tenant t's Q, A and R at t_ns into the device totals, and the device's
 * series stepped with them (device_lf_sample where a bucket begins).
 * Inline: once per merged event. */
static inline void device_fold(sim *s, tenant *t, uint64_t t_ns, uint64_t q, uint64_t a, uint64_t r,
                               uint64_t lf_self)
{
    s->q += q - t->dev_q;
    s->a += a - t->dev_a;
    s->r += r - t->dev_r;
    t->dev_q = q;
    t->dev_a = a;
    t->dev_r = r;
    if (gm_metrics_step(&s->res->device, t_ns, s->q, s->a, s->r)) device_lf_sample(s, t, lf_self);
}

/* update_device with several tenants: fold t's change into the device
 * totals and step the device's series (one tenant: the device series is
 * the tenant's, copied at the end). */
static void update_device_shared(sim *s, tenant *t, uint64_t t_ns)
{
    const gm_alloc_counters *c = t->a ? &t->a->c : NULL;
    device_fold(s, t, t_ns, c ? c->requested_bytes : 0, c ? c->allocated_bytes : 0,
                c ? c->reserved_bytes : 0, NO_LF);
}

/* Tenant t's counters changed (or it retired: t->a is NULL): the device's
 * series when it has several tenants, then the device's peak use. Inline:
 * once per event. */
static inline void update_device(sim *s, tenant *t, uint64_t t_ns)
{
    if (s->n > 1) update_device_shared(s, t, t_ns);
    uint64_t used = s->dev->used_bytes + s->dev->overhead_bytes;
    if (used > s->res->peak_device_used) s->res->peak_device_used = used;
}

/* Inline: once per event. */
static inline __attribute__((always_inline)) void tenant_step_metrics(tenant *t, uint64_t now)
{
    gm_alloc *a = t->a;
    uint64_t torch_allocated = a->c.allocated_bytes - t->pending_bytes;
    if (torch_allocated > t->res->peak_torch_allocated_bytes)
        t->res->peak_torch_allocated_bytes = torch_allocated;
    if (gm_metrics_step(&t->res->m, now, a->c.requested_bytes, a->c.allocated_bytes,
                        a->c.reserved_bytes))
        gm_metrics_ext_sample(&t->res->m, a->ops->largest_free(a));
}

/* A job that ends, or dies on OOM, gives all its memory back to the device
 * (cached or not), so other tenants can use it. */
static int retire(sim *s, tenant *t, uint64_t now, int status, gm_err *err)
{
    t->res->c = t->a->c;
    if (t->a->ops->stats && !t->a->no_stats) {
        t->a->ops->stats(t->a, &t->res->stats);
        t->res->has_stats = 1;
    }
    if (s->cfg->end_hook) s->cfg->end_hook(s->cfg->end_hook_ctx, t->idx, t->a, status);
    free_live(t, now, s->cfg);
    gm_metrics_step(&t->res->m, now, 0, 0, 0);
    keep_limits(t);
    void *hc = t->a->seg_hook_ctx;
    gm_alloc_destroy(t->a);
    free(hc);
    t->a = NULL;
    if (!s->cfg->mps || --s->contexts == 0) gm_device_remove_context(s->dev, s->overhead);
    update_device(s, t, now);
    t->res->status = status;
    if (status == GM_TENANT_ABORTED) t->res->abort_t_ns = now;
    t->done = 1;
    t->next_t = UINT64_MAX;
    return drain_hash(t, err);
}

/* Count the OOM of event e with the state it happened in (e NULL: the
 * initial state, of `size` bytes, did not fit). */
static void record_oom(sim *s, tenant *t, const gm_event *e, uint64_t now)
{
    gm_alloc *a = t->a;
    gm_oom o = {
        .t_ns = now,
        .event_index = t->index,
        .pass = t->pass,
        .tenant = t->idx,
        .size = e->size,
        .reserved = a->c.reserved_bytes,
        .allocated = a->c.allocated_bytes,
        .largest_free = a->ops->largest_free(a),
        .device_used = s->dev->used_bytes + s->dev->overhead_bytes,
        .device_capacity = s->dev->capacity_bytes,
        .initial = t->started && !t->res->events_done && t->res->init_live_oom,
    };
    uint64_t own = a->c.reserved_bytes + s->overhead;
    o.others = o.device_used > own ? o.device_used - own : 0;
    o.limit = o.device_capacity > s->overhead ? o.device_capacity - s->overhead : 0;
    if (a->limits.memory_limit && a->limits.memory_limit < o.limit)
        o.limit = a->limits.memory_limit;
    int small;
    if (!o.initial) o.grow = a->ops->segment_size(a, o.size, &small);
    o.verdict = gm_oom_classify(&o);
    gm_metrics_oom(&t->res->m, &o);
    if (s->n > 1) gm_metrics_oom(&s->res->device, &o);
}

/* Record the OOM; *abort says whether the tenant must stop. A skipped
 * allocation is remembered (in its id slot, else by address) so that its
 * free is skipped too. */
static int on_oom(sim *s, tenant *t, const gm_event *e, uint64_t *slot, uint64_t now, int *abort,
                  gm_err *err)
{
    record_oom(s, t, e, now);
    if (!s->cfg->on_oom_skip) {
        *abort = 1;
        return GM_OK;
    }
    if (slot) {
        *slot = SKIPPED + 1;
        t->slot_addr[e->id] = e->addr;
        return GM_OK;
    }
    if (gm_addrmap_put(&t->live, gm_addrmap_key(e->addr), SKIPPED))
        return gm_errf(err, GM_ENOMEM, "out of memory");
    return GM_OK;
}

/* ---- --scope device (policies/README.md) ----
 * Tenant t's allocation failed after its own allocator and policy did all
 * they could. With --scope device, the other live tenants are asked in
 * tenant order (t+1, t+2, ... wrapping) to give back cached memory: first
 * about what the request lacks on the device, then, if a round did not do,
 * everything they cache. Each asks its policy (on_foreign_pressure; a policy
 * without one empties its cache, like torch.cuda.empty_cache()); after each
 * tenant that released something, t's allocation is retried. Only cached
 * (reserved, unallocated) memory moves; no live block is touched. The other
 * tenants' metrics step at `now`, which no tenant has passed: events run in
 * global time order. Returns 1 with *h set when a retry succeeded. */
/* Under --share requests, whom t may ask, in `pass` 0 (opportunistic
 * tenants) or 1 (burstable ones, only for a tenant that is not
 * opportunistic itself); guaranteed tenants are never asked. Otherwise
 * everyone, in one pass. */
static int may_ask(const sim *s, const tenant *t, const tenant *o, int pass)
{
    if (s->share != GM_SHARE_REQUESTS) return pass == 0;
    int c = o->res->cls;
    if (pass == 0) return c == GM_CLASS_OPPORTUNISTIC;
    return c == GM_CLASS_BURSTABLE && t->res->cls != GM_CLASS_OPPORTUNISTIC;
}

static int scope_rescue(sim *s, tenant *t, const gm_event *e, uint64_t now, uint64_t *h)
{
    if ((!s->cfg->scope_device && s->share != GM_SHARE_REQUESTS) || s->n < 2) return 0;
    int passes = s->share == GM_SHARE_REQUESTS ? 2 : 1;
    for (int round = 0; round < 2; round++)
        for (int pass = 0; pass < passes; pass++) {
            uint64_t need = UINT64_MAX;
            if (round == 0) {
                uint64_t want = gm_device_round(t->a->ops->block_size(t->a, e->size));
                uint64_t cap = gm_device_capacity(s->dev);
                uint64_t used =
                    s->dev->used_bytes + s->dev->overhead_bytes + s->dev->withheld_bytes;
                uint64_t avail = cap > used ? cap - used : 0;
                need = want > avail ? want - avail : want;
            }
            for (size_t k = 1; k < s->n; k++) {
                tenant *o = &s->t[((size_t)t->idx + k) % s->n];
                if (o->done || !o->a || !may_ask(s, t, o, pass)) continue;
                const gm_policy_ops *po = o->pol->ops;
                o->pol->asks++; /* what it releases is its policy's (or its lack of one) */
                uint64_t got = po->on_foreign_pressure
                                   ? po->on_foreign_pressure(o->pol->state, o->a, need, now)
                                   : o->a->ops->empty_cache(o->a, now);
                if (!got) continue;
                o->res->scope_released_bytes += got;
                tenant_step_metrics(o, now);
                update_device(s, o, now);
                if (s->withhold) set_withheld(s, t); /* o's request may hold back what it gave */
                if (t->a->ops->malloc(t->a, e->size, e->stream, e->category, now, h) == GM_OK) {
                    t->res->scope_rescues++;
                    return 1;
                }
            }
        }
    return 0;
}

/* The id slots are numbered as the trace's writer numbered them (traces/
 * event_ids.h); they grow to the largest id seen. */
static int slots_grow(tenant *t, uint32_t id, gm_err *err)
{
    size_t n = t->n_slot ? 2 * t->n_slot : 1024;
    if (n <= id) n = (size_t)id + 1;
    uint64_t *v = realloc(t->slot, n * sizeof *v);
    if (v) t->slot = v;
    uint64_t *w = v ? realloc(t->slot_addr, n * sizeof *w) : NULL;
    if (!w) return gm_errf(err, GM_ENOMEM, "out of memory");
    t->slot_addr = w;
    memset(t->slot + t->n_slot, 0, (n - t->n_slot) * sizeof *t->slot);
    t->n_slot = n;
    return GM_OK;
}

/* The live allocation of id e->id, or NULL when it has none (or the trace
 * has no ids); an id that names another address is a damaged trace. */
static uint64_t *live_slot(tenant *t, const gm_event *e, int *bad)
{
    *bad = 0;
    if (!t->ids || !e->id || e->id >= t->n_slot || !t->slot[e->id]) return NULL;
    *bad = t->slot_addr[e->id] != e->addr;
    return &t->slot[e->id];
}

static int bad_id(const tenant *t, const gm_event *e, gm_err *err)
{
    return gm_errf(err, GM_EINVAL,
                   "%s: event %" PRIu64 ": id %" PRIu32 " is the allocation at 0x%" PRIx64
                   ", not 0x%" PRIx64 ": the trace's id column is damaged; re-import or "
                   "re-generate the trace",
                   tname(t), t->index, e->id, t->slot_addr[e->id], e->addr);
}

static int do_alloc(sim *s, tenant *t, const gm_event *e, uint64_t now, int *abort, gm_err *err)
{
    uint64_t key = gm_addrmap_key(e->addr), h;
    uint64_t *slot = NULL, *old;
    int bad;
    if (t->ids && e->id) {
        if (e->id >= t->n_slot && slots_grow(t, e->id, err)) return GM_ENOMEM;
        slot = &t->slot[e->id];
    }
    if ((old = live_slot(t, e, &bad)) && bad) return bad_id(t, e, err);
    /* by id, the address map holds only what /initial_state left: rarely asked */
    if (!old && (!slot || t->live.count)) old = gm_addrmap_get(&t->live, key);
    if (old) {
        if (!s->cfg->lenient)
            return gm_errf(err, GM_EINVAL,
                           "%s: event %" PRIu64 ": allocation at address 0x%" PRIx64
                           " which is still live (its free is missing); fix the trace or pass "
                           "--lenient to free the old allocation first and count it",
                           tname(t), t->index, e->addr);
        t->res->live_reallocs++;
        if (old == slot) {
            h = *slot - 1;
            *slot = 0;
        } else {
            gm_addrmap_del(&t->live, key, &h);
        }
        settle(t, key);
        if (h != SKIPPED)
            tensor_free(t, h, now);
        else if (t->x)
            x_skipped_free(s, t, key, now);
    }
    const gm_policy_ops *po = t->pol->ops;
    if (po->admit && !po->admit(t->pol->state, t->a, e->size, e->category, now))
        return on_oom(s, t, e, slot, now, abort, err); /* refused by the policy (policy.h) */
    uint64_t size = t->x ? x_size(t, e) : e->size;     /* --on-oom chain may halve it */
    if (t->a->ops->malloc(t->a, size, e->stream, e->category, now, &h) != GM_OK &&
        !scope_rescue(s, t, e, now, &h) && !(t->x && x_rescue(s, t, e, &size, now, &h)))
        return on_oom(s, t, e, slot, now, abort, err);
    if (t->x && x_note(t, e, size, slot ? e->id : 0))
        return gm_errf(err, GM_ENOMEM, "out of memory");
    if (po->on_tensor) po->on_tensor(t->pol->state, t->a, h, e->category, 0, now);
    if (s->cfg->alloc_hook) /* optional observer: where the model put this allocation */
        s->cfg->alloc_hook(s->cfg->alloc_hook_ctx, t->idx, t->index, e, t->a, h);
    if (slot) { /* end of a pass: every live slot is the pass's (free_leftovers) */
        *slot = h + 1;
        t->slot_addr[e->id] = e->addr;
        return GM_OK;
    }
    if (gm_addrmap_put(&t->live, key, h)) return gm_errf(err, GM_ENOMEM, "out of memory");
    if (t->spec->repeat > 1 && gm_addrmap_put(&t->pass_new, key, 1))
        return gm_errf(err, GM_ENOMEM, "out of memory");
    return GM_OK;
}

/* An allocation that failed in the recording and that the program survived
 * (FORMAT.md, op oom): tried like an alloc and freed at once if it fits;
 * if it fails here too it is counted as an OOM but never stops the tenant,
 * since the program is known to have caught it. */
static int do_failed_alloc(sim *s, tenant *t, const gm_event *e, uint64_t now, gm_err *err)
{
    uint64_t h;
    t->res->recorded_ooms++;
    if (t->a->ops->malloc(t->a, e->size, e->stream, e->category, now, &h) == GM_OK ||
        scope_rescue(s, t, e, now, &h)) {
        t->res->recorded_oom_fits++;
        t->a->ops->free(t->a, h, now);
        return GM_OK;
    }
    (void)err;
    record_oom(s, t, e, now);
    return GM_OK;
}

static int do_free(sim *s, tenant *t, const gm_event *e, uint64_t now, gm_err *err)
{
    uint64_t key = gm_addrmap_key(e->addr), h;
    int bad;
    uint64_t *slot = live_slot(t, e, &bad);
    if (bad) return bad_id(t, e, err);
    if (slot) {
        h = *slot - 1;
        *slot = 0;
        settle(t, key);
        if (h != SKIPPED)
            tensor_free(t, h, now);
        else if (t->x)
            x_skipped_free(s, t, key, now);
        return GM_OK;
    }
    if (!gm_addrmap_del(&t->live, key, &h)) {
        /* in later passes, frees of blocks that existed before event 0 have
         * nothing to free: the first pass already did */
        if (!s->cfg->lenient && t->pass == 0)
            return gm_errf(err, GM_EINVAL,
                           "%s: event %" PRIu64 ": free of address 0x%" PRIx64
                           " which is not live (never allocated, or already freed: a double "
                           "free); fix the trace, or pass --lenient to skip and count such frees",
                           tname(t), t->index, e->addr);
        t->res->unknown_frees++;
        return GM_OK;
    }
    if (t->spec->repeat > 1) gm_addrmap_del(&t->pass_new, key, NULL);
    settle(t, key);
    if (h != SKIPPED)
        tensor_free(t, h, now);
    else if (t->x)
        x_skipped_free(s, t, key, now);
    return GM_OK;
}

/* The program let go of a block whose free comes later (FORMAT.md, op
 * free_requested): it stays allocated in the model until then, and is
 * counted as pending, so PyTorch's allocated_bytes (A less pending) can be
 * reported next to its active_bytes (A). */
static int do_free_requested(tenant *t, const gm_event *e, gm_err *err)
{
    uint64_t key = gm_addrmap_key(e->addr), hv;
    int bad;
    const uint64_t *slot = live_slot(t, e, &bad), *h = &hv;
    if (bad) return bad_id(t, e, err);
    if (slot)
        hv = *slot - 1;
    else
        h = gm_addrmap_get(&t->live, key);
    t->res->free_requested_events++;
    if (!h || *h == SKIPPED || gm_addrmap_get(&t->pending, key)) return GM_OK;
    const gm_alloc_ops *o = t->a->ops;
    uint64_t bytes = gm_alloc_block_bytes(t->a, *h, e->size);
    if (gm_addrmap_put(&t->pending, key, bytes)) return gm_errf(err, GM_ENOMEM, "out of memory");
    t->pending_bytes += bytes;
    if (o->free_requested) o->free_requested(t->a, *h);
    return GM_OK;
}

static void fire_timers(tenant *t, uint64_t upto)
{
    while (t->timer_period && t->next_timer <= upto) {
        t->pol->ops->on_timer(t->pol->state, t->a, t->next_timer);
        t->next_timer += t->timer_period;
    }
}

/* Several tenants: the earliest tick any live tenant has due. */
static void timer_min_update(sim *s)
{
    uint64_t m = UINT64_MAX;
    for (size_t i = 0; i < s->n; i++) {
        const tenant *o = &s->t[i];
        if (!o->done && o->a && o->timer_period && o->next_timer < m) m = o->next_timer;
    }
    s->timer_min = m;
}

/* Timer ticks are events in global time order (engine.h), so before any
 * tenant's event at `now` every other live tenant's due ticks fire too (a
 * policy that releases on a timer frees memory the others can use at once,
 * not at its own next event). Called only when s->timer_min says one is due. */
static void fire_other_timers(sim *s, const tenant *t, uint64_t now)
{
    for (size_t i = 0; i < s->n; i++) {
        tenant *o = &s->t[i];
        if (o == t || o->done || !o->a || !o->timer_period || o->next_timer > now) continue;
        fire_timers(o, now);
        tenant_step_metrics(o, now);
        update_device(s, o, now);
    }
    timer_min_update(s);
}

/* --share requests: what the other live tenants' requests hold back from
 * tenant t (each request less what its tenant holds), set on the device
 * for t's allocations. */
static void set_withheld(sim *s, const tenant *t)
{
    uint64_t w = 0;
    for (size_t i = 0; i < s->n; i++) {
        const tenant *o = &s->t[i];
        if (o == t || o->done || !o->a) continue;
        uint64_t req = o->res->request_bytes, r = o->a->c.reserved_bytes;
        w += req > r ? req - r : 0;
    }
    s->dev->withheld_bytes = w;
}

/* What step() does before an event in a rare configuration (sim.rare):
 * the other tenants' due ticks, the event hook, empty_cache at a phase. */
static void step_rare(sim *s, tenant *t, const gm_event *e, uint64_t now)
{
    if (s->n > 1 && s->timer_min <= now) fire_other_timers(s, t, now);
    if (s->cfg->event_hook) s->cfg->event_hook(s->cfg->event_hook_ctx, t->idx, t->index, e);
    if (s->cfg->empty_cache_at_phase && e->phase != GM_PHASE_UNKNOWN) {
        /* torch.cuda.empty_cache() where the program enters a new phase */
        if (t->last_phase != GM_PHASE_UNKNOWN && e->phase != t->last_phase) {
            t->res->phase_empty_caches++;
            t->res->phase_empty_cache_bytes += t->a->ops->empty_cache(t->a, now);
        }
        t->last_phase = e->phase;
    }
}

/* Whether run_plain() may take tenant t's next events: the only tenant,
 * started, none of the rare cases step() looks at per event (sim.rare,
 * which also means several tenants) and no allocation hook, allocations
 * by id, nothing from /initial_state in the
 * address map (a seeded trace's blocks are in their id slots instead:
 * seeded_slots) and nothing waiting for its free, no --host-tier or --on-oom
 * chain, no policy admit or on_tensor. None of these changes while
 * run_plain() runs (it takes no event that could). With several tenants
 * each takes one event at a time, and the checks cost what the plain path
 * saves (measured: bench/README, "Eighth round"). */
static int plain(const sim *s, const tenant *t)
{
    const gm_policy_ops *po = t->pol->ops;
    return !s->rare && !s->cfg->alloc_hook && t->started && !t->done && t->ids && !t->live.count &&
           !t->pending_bytes && !t->x && !po->admit && !po->on_tensor;
}

/* run_plain's position goes back into t: pos its next event, the events
 * from `counted` up to `upto` added to the counts that step() keeps per
 * event (nothing reads them while run_plain runs, but on_oom does). */
static void plain_sync(sim *s, tenant *t, size_t pos, size_t *counted, size_t upto, size_t *took)
{
    t->pos = pos;
    t->res->events_done += upto - *counted;
    s->res->events += upto - *counted;
    *took += upto - *counted;
    *counted = upto;
}

/* What plain_loop does besides step()'s work (ffwd.h): nothing; look
 * for a period at checkpoints; record the candidate stretch. */
enum { PLAIN_ONLY, PLAIN_SEEK, PLAIN_RECORD, PLAIN_PROBE };

/* step() for a run of plain events (plain() holds): allocations into an
 * empty id slot and frees of a live one, up to the end of the chunk, the
 * next due timer tick, the next progress report or the first event of any
 * other kind, which is left for step(). Each event does what step() does
 * for it, with the checks that plain() settles made once; *took counts
 * the events it took (0: the next one is step()'s). With fast-forward
 * (ff, a constant: one copy of the loop each) it also stops where the
 * fast-forward's mode changes: at a candidate period, at the end of a
 * record, at an OOM. */
static inline __attribute__((always_inline)) int plain_loop(sim *s, tenant *t, size_t *took,
                                                            gm_err *err, const int ff)
{
    gm_alloc *a = t->a;
    gm_ffwd *f = t->ff;
    int (*amalloc)(gm_alloc *, uint64_t, uint64_t, uint8_t, uint64_t, uint64_t *) = a->ops->malloc;
    void (*afree)(gm_alloc *, uint64_t, uint64_t) = a->ops->free;
    uint64_t *slot = t->slot, *slot_addr = t->slot_addr;
    const gm_event *buf = t->buf;
    const size_t n_slot = t->n_slot;
    const uint64_t shift = t->shift;
    uint64_t timer = t->timer_period ? t->next_timer : UINT64_MAX;
    /* to the end of the chunk, or to the next progress report (the caller's) */
    uint64_t left = s->cfg->progress ? s->next_progress - s->res->events : UINT64_MAX;
    size_t pos = t->pos, counted = pos;
    size_t end = t->nbuf - pos > left ? pos + (size_t)left : t->nbuf;
    for (; pos < end; pos++) {
        const gm_event *e = &buf[pos];
        uint64_t now = e->t_ns + shift;
        uint32_t id = e->id;
        int stop = 0; /* fast-forward: its mode changed */
        int mine = 1; /* fast-forward of one part (ffwd.h): the event is the part's */
        if (!id || id >= n_slot) break;
        if (now >= timer) {
            /* the ticks due by this event fire before it, as step() fires
             * them (a policy's tick reads the model and the tenant's
             * position, not the counts plain_sync brings up to date; one
             * tenant: no other's timer to update); a tenant with a timer is
             * never fast-forwarded (setup) */
            if (ff != PLAIN_ONLY) break;
            plain_sync(s, t, pos, &counted, pos, took);
            fire_timers(t, now);
            timer = t->next_timer;
        }
        if (e->op == GM_OP_ALLOC) {
            uint64_t h;
            if (slot[id]) break; /* still live: step() says what to do */
            /* one tenant: no other to ask (scope_rescue), no tier or chain (x_rescue) */
            if (amalloc(a, e->size, e->stream, e->category, now, &h) == GM_OK) {
                slot[id] = h + 1;
                slot_addr[id] = e->addr;
                if (ff != PLAIN_ONLY && f->part >= 0) mine = gm_ffwd_part_event(f, a, h);
                if (ff == PLAIN_RECORD && mine) gm_ffwd_rec_alloc(f, a, e, h);
            } else {
                int abort = 0, rc;
                if (ff != PLAIN_ONLY) {
                    gm_ffwd_reset(f);
                    stop = 1;
                }
                plain_sync(s, t, pos, &counted, pos, took);
                if ((rc = on_oom(s, t, e, &slot[id], now, &abort, err))) return rc;
                if (abort) { /* step()'s end of the event, then the tenant's */
                    plain_sync(s, t, pos, &counted, pos + 1, took);
                    t->t_last = now;
                    tenant_step_metrics(t, now);
                    update_device(s, t, now);
                    return retire(s, t, now, GM_TENANT_ABORTED, err);
                }
            }
        } else if (e->op == GM_OP_FREE) {
            uint64_t v = slot[id];
            if (v <= SKIPPED + 1 || slot_addr[id] != e->addr) break;
            slot[id] = 0;
            if (ff != PLAIN_ONLY && f->part >= 0) mine = gm_ffwd_part_event(f, a, v - 1);
            if (ff == PLAIN_RECORD && mine) gm_ffwd_rec_free(f, a, e, v - 1);
            afree(a, v - 1, now);
        } else {
            break;
        }
        t->t_last = now;
        tenant_step_metrics(t, now);
        update_device(s, t, now);
        t->index++;
        if ((ff == PLAIN_SEEK || ff == PLAIN_PROBE) && !stop &&
            (f->part < 0 ? gm_ffwd_checkpoint(a) : mine)) {
            uint64_t done = t->res->events_done + (pos + 1 - counted);
            stop = ff == PLAIN_SEEK ? gm_ffwd_seek(f, a, &t->res->m, done)
                                    : gm_ffwd_probe(f, a, &t->res->m, done);
        }
        if (ff == PLAIN_RECORD && !stop && mine) stop = gm_ffwd_rec_post(f, a, &t->res->m);
        if (ff != PLAIN_ONLY && stop) {
            pos++;
            break;
        }
    }
    plain_sync(s, t, pos, &counted, pos, took);
    if (pos < t->nbuf) {
        t->next_t = buf[pos].t_ns + shift;
        return GM_OK;
    }
    return refill(s, t, err);
}

/* Fast-forward at a known state: the chunk's events from t->pos on are
 * too few for a cycle that may match them. Keep them, and read the next
 * chunk after them (src_read; hashed as refill hashes it): GM_OK with more
 * events, or *none when the pass has no more (nothing changed). */
static int refill_keep(tenant *t, int *none, gm_err *err)
{
    size_t keep = t->nbuf - t->pos;
    int64_t n = src_read(t, keep, err);
    *none = 0;
    if (n < 0) return (int)n;
    t->pos = 0;
    t->nbuf = keep + (size_t)n;
    if (n == 0) {
        *none = 1;
        return GM_OK;
    }
    hash_read(t, t->buf + keep, (size_t)n);
    return GM_OK;
}

/* Fast-forward at a known state (ffwd.h): apply each cycle of the state
 * that the events ahead match whole, before the next progress report;
 * the model stays in the state. When none does, the mode says what next:
 * probe or record (simulate), or seek. */
static int ff_apply(sim *s, tenant *t, size_t *took, gm_err *err)
{
    gm_ffwd *f = t->ff;
    gm_ff_tenant ft = {.a = t->a,
                       .m = &t->res->m,
                       .shift = t->shift,
                       .peak_allocated = &t->res->peak_torch_allocated_bytes};
    uint64_t left = s->cfg->progress ? s->next_progress - s->res->events : UINT64_MAX;
    while (f->mode == GM_FF_AT) {
        if (t->pos == t->nbuf) return refill(s, t, err); /* still in the state */
        size_t n = t->nbuf - t->pos;
        if (n > left) n = (size_t)left;
        ft.slot = t->slot;
        ft.slot_addr = t->slot_addr;
        ft.n_slot = t->n_slot;
        ft.done = t->res->events_done;
        size_t p = gm_ffwd_apply(f, &t->buf[t->pos], n, &ft);
        if (!p && f->mode == GM_FF_AT) { /* a cycle may match, longer than the chunk's rest */
            int none = 1, rc;
            if (f->need <= GM_FF_CARRY && f->need <= left && n == t->nbuf - t->pos &&
                (rc = refill_keep(t, &none, err)))
                return rc;
            if (none) gm_ffwd_cut(f, &ft);
            continue;
        }
        if (!p) break;
        t->pos += p;
        t->index += p;
        t->t_last = t->buf[t->pos - 1].t_ns + t->shift;
        t->res->events_done += p;
        s->res->events += p;
        *took += p;
        left -= p;
    }
    if (t->pos < t->nbuf) t->next_t = t->buf[t->pos].t_ns + t->shift;
    return GM_OK;
}

/* The plain events from t's position (plain_loop), with fast-forward when
 * the tenant has it. */
static int run_plain(sim *s, tenant *t, size_t *took, gm_err *err)
{
    gm_ffwd *f = t->ff;
    if (!f || f->mode == GM_FF_OFF) return plain_loop(s, t, took, err, PLAIN_ONLY);
    if (f->expect != t->res->events_done) gm_ffwd_reset(f); /* step() ran between */
    int rc = GM_OK;
    if (f->mode == GM_FF_AT) rc = ff_apply(s, t, took, err);
    if (rc == GM_OK && !t->done && f->mode != GM_FF_AT && f->mode != GM_FF_OFF) {
        switch (f->mode) {
        case GM_FF_RECORD:
            rc = plain_loop(s, t, took, err, PLAIN_RECORD);
            break;
        case GM_FF_PROBE:
            rc = plain_loop(s, t, took, err, PLAIN_PROBE);
            break;
        default:
            rc = plain_loop(s, t, took, err, PLAIN_SEEK);
        }
    }
    f->expect = t->res->events_done;
    return rc;
}

/* ---- stretches: several tenants, each ahead on its own ----
 * With several tenants every event used to be taken in global time order,
 * one at a time, and each found its tenant's allocator cold in the cache
 * (64 tenants: ~130 ns an event against ~40 for one). Most events touch
 * nothing but their own tenant: a malloc that a cached block serves and a
 * free (a model whose frees are local, gm_alloc_ops.free_is_local) make no
 * driver call, so no other tenant can see them but through the device's
 * series of the tenants' sums. So the tenant whose turn it is runs a
 * stretch of such events at once, ahead of the others, its state warm;
 * each event's time and its Q and A go into the tenant's log, and the log's
 * entries join the device's series one by one in global order, as the
 * events would have (its place in the order of tenants is its log's next
 * time meanwhile). A stretch stops before anything else: an allocation
 * that would grow, any other op, an id the plain loop would not take, the
 * chunk's last event (its refill may end the pass) and a full log. A new
 * bucket of the device's timeline samples every tenant's largest free
 * block at that moment, which a tenant ahead no longer has: its first
 * event at or after each line of the timeline's grid (where a bucket may
 * begin: it only grows coarser, keeping every other line) keeps the
 * largest free block before it and after it, which is what the sample
 * takes from a tenant ahead (device_fold). A policy's timer tick is an
 * event in global order too (its releases free device memory the others
 * may take): a stretch stops before its tenant's next tick, which step()
 * fires, and a merged event first fires the others' ticks due by its time
 * (as step_rare does), when each of those tenants has merged every event
 * of its own before the tick, so the tick sees its model as it was then.
 * What one tenant's event may do to another (--scope device and --share
 * requests rescues and withheld requests, MPS contexts, host tiers,
 * hooks, a policy's admission or tensor hook) turns stretches off for the
 * run (stretch_allowed); --share hard-cap's caps, as --quota, bind only a
 * tenant's own driver calls, which a stretch never makes, and so do the
 * requests --share requests withholds while every tenant is guaranteed
 * (none is then asked to release for another). The results are
 * the same event for event: tests/test_engine.c, test_stretch_is_step,
 * against gm_sim_config.no_stretch. */
/* The most events a stretch takes, which is its log's size: with fewer
 * than STRETCH_MANY tenants 256 (their logs stay in the cache: 4096 cost
 * 5-11 % more time with 2 to 32 tenants), else 4096, and not more than
 * STRETCH_BUDGET entries for all the logs together (24 MiB, and as much
 * again for the grid lines' samples, of which few are touched): with many
 * tenants each model's blocks are cold when its turn comes, and a stretch
 * cut short at its log's end starts cold again (40 % of 64 tenants'
 * stretches stopped at 256 events, 2.6 % at 4096; 64 tenants 0.78-0.96x
 * the time by the paired medians of six sets, 128 tenants 0.73-0.85x:
 * bench/README, "Sixteenth round"). */
#define STRETCH_FEW 256u
#define STRETCH_LONG 4096u
#define STRETCH_MANY 64
#define STRETCH_BUDGET (1u << 20)

static uint32_t stretch_events(size_t n_tenants)
{
    if (n_tenants < STRETCH_MANY) return STRETCH_FEW;
    size_t cap = STRETCH_BUDGET / n_tenants;
    return cap > STRETCH_LONG ? STRETCH_LONG : cap < STRETCH_FEW ? STRETCH_FEW : (uint32_t)cap;
}

/* A stretch's look-ahead (gm_alloc_ops.prefetch_free): the free PF_FAR
 * events ahead has its block brought into the cache, the one PF_NEAR
 * ahead what freeing it reads through it, and the id slot 2 PF_FAR ahead
 * is brought in for the first. With 64 tenants each model is cold when
 * its turn comes, and a free's block and segment were ~45 % of pt_free's
 * samples (perf annotate). A slot that is live now holds a live block,
 * whatever the events between do; one that is not is left alone. The
 * distances were measured (bench/README, "Fifteenth round"). */
#define PF_FAR 12
#define PF_NEAR 5
/* With fewer tenants their models stay in the cache and the look-ahead
 * only costs: without it 2 tenants took 0.93-0.94x the time, 8 0.96-0.97x,
 * 16 about the same, 32 1.02x and 64 1.03-1.11x in six rounds of seven
 * (bench/README, "Twenty-fifth round"). */
#define PF_TENANTS 16

/* The free at e, if its id slot holds a live block now: its hint, deep or not. */
static inline void prefetch_if_free(gm_alloc *a, const gm_event *e, const uint64_t *slot,
                                    size_t n_slot, int deep)
{
    if (e->op == GM_OP_FREE && e->id < n_slot && slot[e->id] > SKIPPED + 1)
        a->ops->prefetch_free(a, slot[e->id] - 1, deep);
}

static inline void stretch_prefetch(gm_alloc *a, const gm_event *buf, size_t pos, size_t last,
                                    const uint64_t *slot, size_t n_slot)
{
    if (pos + 2 * PF_FAR < last && buf[pos + 2 * PF_FAR].id < n_slot)
        __builtin_prefetch(&slot[buf[pos + 2 * PF_FAR].id]);
    prefetch_if_free(a, &buf[pos + PF_FAR], slot, n_slot, 0);
    prefetch_if_free(a, &buf[pos + PF_NEAR], slot, n_slot, 1);
}

static int stretch_allowed(const sim *s)
{
    const gm_sim_config *cfg = s->cfg;
    if (s->n < 2 || cfg->no_stretch || cfg->event_hook || cfg->alloc_hook ||
        cfg->empty_cache_at_phase || cfg->scope_device || cfg->mps || s->has_tier ||
        cfg->on_oom_chain)
        return 0;
    for (size_t i = 0; i < s->n; i++) {
        const tenant *t = &s->t[i];
        const gm_policy_ops *po = t->pol ? t->pol->ops : NULL;
        if (!t->a || !po || po->admit || po->on_tensor || !t->a->ops->ff_part_malloc ||
            !t->a->ops->free_is_local)
            return 0;
        /* --share requests asks opportunistic and burstable tenants to
         * release for another (scope_rescue), whose models a stretch may
         * have taken past that moment; guaranteed ones are never asked,
         * and what their requests withhold binds only driver calls */
        if (s->share == GM_SHARE_REQUESTS && t->res->cls != GM_CLASS_GUARANTEED) return 0;
    }
    return 1;
}

/* A stretch of t's events from t->pos, if its next one may start one: the
 * events it took (logged; 0: none, the next is step()'s). */
static size_t stretch(sim *s, tenant *t)
{
    const gm_timeline *tl = &s->res->device.tl;
    if (!t->started || t->done || !t->ids || t->live.count || t->pending_bytes || t->nbuf < 2 ||
        !tl->n) /* !tl->n: the device's series has not begun */
        return 0;
    const uint32_t cap = s->stretch_cap;
    if (!t->log &&
        (!(t->log = malloc(cap * sizeof *t->log)) || !(t->lfs = malloc(cap * sizeof *t->lfs)))) {
        free(t->log);
        t->log = NULL;
        return 0; /* no memory for it: one event at a time */
    }
    gm_alloc *a = t->a;
    int (*amalloc)(gm_alloc *, uint64_t, uint64_t, uint8_t, uint64_t, uint64_t *) =
        a->ops->ff_part_malloc;
    void (*afree)(gm_alloc *, uint64_t, uint64_t) = a->ops->free;
    uint64_t *slot = t->slot, *slot_addr = t->slot_addr;
    const gm_event *buf = t->buf;
    const size_t n_slot = t->n_slot, last = t->nbuf - 1;
    const uint64_t shift = t->shift, t0 = tl->t0, w = tl->width_ns;
    const uint64_t timer = t->timer_period ? t->next_timer : UINT64_MAX;
    /* the first grid line after t's last event: lines t0 + k w (a coarser
     * grid later keeps every other one) */
    uint64_t line = t->t_last < t0 ? t0 : t0 + ((t->t_last - t0) / w + 1) * w;
    stretch_ent *log = t->log;
    stretch_lf *lfs = t->lfs;
    size_t pos = t->pos, n = 0, nl = 0;
    const int pf = a->ops->prefetch_free != NULL && s->n >= PF_TENANTS;
    for (; pos < last && n < cap; pos++) {
        const gm_event *e = &buf[pos];
        uint64_t now = e->t_ns + shift;
        if (pf && pos + PF_FAR < last) stretch_prefetch(a, buf, pos, last, slot, n_slot);
        uint32_t id = e->id;
        if (now >= timer || !id || id >= n_slot) break; /* its tick is step()'s */
        uint64_t lf_before = NO_LF;
        if (now >= line) lf_before = a->ops->largest_free(a);
        if (e->op == GM_OP_ALLOC) {
            uint64_t h;
            if (slot[id] || amalloc(a, e->size, e->stream, e->category, now, &h) != GM_OK) break;
            slot[id] = h + 1;
            slot_addr[id] = e->addr;
        } else if (e->op == GM_OP_FREE) {
            uint64_t v = slot[id];
            if (v <= SKIPPED + 1 || slot_addr[id] != e->addr) break;
            slot[id] = 0;
            afree(a, v - 1, now);
        } else {
            break;
        }
        t->t_last = now;
        tenant_step_metrics(t, now);
        t->index++;
        if (lf_before != NO_LF) {
            lfs[nl++] = (stretch_lf){n, lf_before, a->ops->largest_free(a)};
            line = t0 + ((now - t0) / w + 1) * w;
        }
        log[n++] = (stretch_ent){now, a->c.requested_bytes, a->c.allocated_bytes};
    }
    t->res->events_done += n;
    t->res->stretched_events += n;
    t->pos = pos;
    t->lhead = t->lfhead = 0;
    t->ln = (uint32_t)n;
    t->lfn = (uint32_t)nl;
    t->lfat = nl ? (uint32_t)lfs[0].at : NO_LFAT;
    return n; /* t->next_t is still its first event's time */
}

/* The merge reads each tenant's log in order, but 64 tenants' logs in
 * turn are more streams than the hardware's prefetcher follows, and the
 * stretches in between push them out of the cache: each entry asks for
 * the one MERGE_AHEAD on (96 bytes of 24-byte entries: the next line),
 * which arrives before the tenant's next turn (2, 8 and 16 measured no
 * better: bench/README, "Seventeenth round"). */
#define MERGE_AHEAD 4
/* The next event of t's stretch joins the device's series (step()'s
 * update_device for it, with the values it left). */
static void stretch_merge(sim *s, tenant *t)
{
    const stretch_ent *x = &t->log[t->lhead];
    if (t->lhead + MERGE_AHEAD < t->ln) __builtin_prefetch(&t->log[t->lhead + MERGE_AHEAD]);
    uint64_t lf = NO_LF;
    if (t->lfat == t->lhead) {
        lf = t->lfs[t->lfhead++].after;
        t->lfat = t->lfhead < t->lfn ? (uint32_t)t->lfs[t->lfhead].at : NO_LFAT;
    }
    t->lhead++;
    device_fold(s, t, x->t_ns, x->q, x->a, t->dev_r, lf);
    uint64_t used = s->dev->used_bytes + s->dev->overhead_bytes;
    if (used > s->res->peak_device_used) s->res->peak_device_used = used;
    s->res->events++;
    if (t->lhead < t->ln) {
        t->next_t = t->log[t->lhead].t_ns;
        return;
    }
    t->lhead = t->ln = t->lfhead = t->lfn = 0;
    t->lfat = NO_LFAT;
    t->next_t = t->buf[t->pos].t_ns + t->shift; /* a stretch leaves the chunk's last event */
}

/* Process the tenant's next event. */
static int step(sim *s, tenant *t, gm_err *err)
{
    int rc;
    if (__builtin_expect(s->rare, 0) && s->withhold) set_withheld(s, t);
    if (!t->started && ((rc = tenant_start(s, t, err)) || t->done)) return rc;
    const gm_event *e = &t->buf[t->pos];
    uint64_t now = t->next_t;
    if (t->timer_period && t->next_timer <= now) {
        fire_timers(t, now);
        if (s->n > 1) timer_min_update(s);
    }
    if (__builtin_expect(s->rare, 0)) step_rare(s, t, e, now);
    int abort = 0;
    rc = GM_OK;
    switch (e->op) {
    case GM_OP_ALLOC:
        rc = do_alloc(s, t, e, now, &abort, err);
        break;
    case GM_OP_FREE:
        rc = do_free(s, t, e, now, err);
        break;
    case GM_OP_EMPTY_CACHE: /* the program's torch.cuda.empty_cache(): every model does it */
        t->res->empty_cache_events++;
        t->res->empty_cache_bytes += t->a->ops->empty_cache(t->a, now);
        break;
    case GM_OP_OOM:
        rc = do_failed_alloc(s, t, e, now, err);
        break;
    case GM_OP_FREE_REQUESTED:
        rc = do_free_requested(t, e, err);
        break;
    default: /* the recorded allocator's own decisions: the model makes its own */
        t->res->recorded_segment_events++;
        break;
    }
    if (rc) return rc;
    t->res->events_done++;
    s->res->events++;
    t->t_last = now;
    tenant_step_metrics(t, now);
    update_device(s, t, now);
    if (abort) return retire(s, t, now, GM_TENANT_ABORTED, err);
    t->pos++;
    t->index++;
    if (t->pos < t->nbuf) {
        t->next_t = t->buf[t->pos].t_ns + t->shift;
        return GM_OK;
    }
    return refill(s, t, err);
}

static inline run_key run_key_of(const tenant *t)
{
    return (run_key)(t->done != 0) << 96 | (run_key)t->next_t << 32 | (uint32_t)t->idx;
}

/* Several tenants: which runs next, kept in a winner tree. Leaf i (at
 * tree[leaves + i]) holds tenant i's key, each node the smaller of its two
 * children, the root (tree[1]) the next tenant's. Only the tenant that
 * stepped moved, so its path to the root is replayed, the path's minimum
 * so far in hand and each sibling read: log2(leaves) compares and
 * conditional moves, no branch the times decide (a binary heap's sift
 * compared two children a level on such branches: with 64 tenants ~100
 * instructions and a mispredicted branch or two an event, which once the
 * tenants' stretches keep their models warm is much of an event's time).
 * The siblings on the path hold the minima of every other leaf between
 * them, so their minimum is the runner-up (s->second): while the tenant
 * that stepped has a key below it, it runs next whatever its leaf says
 * (tree_next). */
static void tree_update(sim *s, size_t i)
{
    run_key *w = s->tree, cur = run_key_of(&s->t[i]), other = ~(run_key)0;
    size_t k = s->leaves + i;
    w[k] = cur;
    for (; k > 1; k >>= 1) {
        run_key sib = w[k ^ 1];
        other = sib < other ? sib : other;
        cur = sib < cur ? sib : cur;
        w[k >> 1] = cur;
    }
    s->second = other;
}

/* After tenant t (the root's) stepped: the tree brought up to date, unless
 * t still has the smallest key. Its leaf then keeps the key it had, which
 * is smaller still, so the root stays t's and the others' keys stay above
 * it: the next update of t's leaf (when its key passes s->second) puts
 * the tree right. Only a tenant that steps changes its key, and only the
 * root steps. In 64 tenants' merged logs a tenant has 1.4 events in a row,
 * in 8 tenants' 2.8, in 2 tenants' 4.6 (bench/README, "Twenty-fifth
 * round"). */
static inline void tree_next(sim *s, const tenant *t)
{
    if (run_key_of(t) >= s->second) tree_update(s, (size_t)t->idx);
}

static int tree_build(sim *s)
{
    size_t leaves = 1;
    while (leaves < s->n)
        leaves *= 2;
    s->tree = malloc(2 * leaves * sizeof *s->tree);
    if (!s->tree) return GM_ENOMEM;
    s->leaves = leaves;
    for (size_t i = 0; i < leaves; i++) /* a padding leaf: after every tenant */
        s->tree[leaves + i] = i < s->n ? run_key_of(&s->t[i]) : ~(run_key)0;
    for (size_t k = leaves; k-- > 1;) {
        run_key a = s->tree[2 * k], b = s->tree[2 * k + 1];
        s->tree[k] = a < b ? a : b;
    }
    s->second = 0; /* the first tenant to step updates its leaf */
    timer_min_update(s);
    return GM_OK;
}

static tenant *next_tenant(sim *s)
{
    tenant *t = &s->t[(uint32_t)s->tree[1]];
    return t->done ? NULL : t;
}

/* ---------------- run ---------------- */

uint64_t gm_engine_default_capacity(const gm_sim_config *cfg, const gm_trace_meta *m,
                                    uint64_t *overhead, char *why, size_t len)
{
    *overhead = cfg->overhead_bytes;
    if (!m) return 0;
    if (m->device_total_bytes) {
        snprintf(why, len, "the trace's device (device_total_bytes)");
        return m->device_total_bytes;
    }
    if (!m->device_avail_bytes) return 0;
    if (!cfg->overhead_given) *overhead = 0;
    snprintf(why, len, "the memory the recorded process had (device_avail_bytes)%s",
             cfg->overhead_given ? "" : ", no context overhead");
    return m->device_avail_bytes;
}

/* Each tenant's class, request and limit (share.c), and the sharing mode
 * the run applies: --share, else requests when any tenant gives a class, a
 * request or a limit. --mps caps each client at its limit and has no
 * requests to hold. */
static int resolve_share(sim *s, gm_err *err)
{
    const gm_sim_config *cfg = s->cfg;
    int any = 0;
    for (size_t i = 0; i < s->n; i++) {
        const gm_tenant_spec *sp = &cfg->tenants[i];
        gm_tenant_result *r = &s->res->t[i];
        int rc = gm_tenant_class_resolve(sp, &r->cls, &r->request_bytes, &r->limit_bytes, err);
        if (rc) return rc;
        any |= sp->cls || sp->request_bytes || sp->limit_bytes;
    }
    s->share = cfg->share != GM_SHARE_AUTO ? cfg->share
               : any && !cfg->mps          ? GM_SHARE_REQUESTS
                                           : GM_SHARE_NONE;
    if (cfg->mps && s->share == GM_SHARE_REQUESTS)
        return gm_errf(err, GM_EUSAGE,
                       "--mps enforces each client's limit as a hard cap "
                       "(CUDA_MPS_PINNED_DEVICE_MEM_LIMIT) and holds no requests; drop --share "
                       "requests, or --mps");
    if (s->share == GM_SHARE_REQUESTS)
        for (size_t i = 0; i < s->n; i++)
            s->withhold |= s->res->t[i].request_bytes > 0 && s->n > 1;
    s->res->share = s->share;
    s->res->mps = cfg->mps;
    return GM_OK;
}

/* Admission, as a scheduler that places tenants by their memory would:
 * under hard caps the caps (a tenant without one takes the device) and
 * under requests the requests, with the contexts, must fit on the device;
 * else the tenants are not placed together (GM_EOOM, as contexts that do
 * not fit). */
static int admit(const sim *s, uint64_t cap, gm_err *err)
{
    if (s->share != GM_SHARE_HARD_CAP && s->share != GM_SHARE_REQUESTS) return GM_OK;
    uint64_t sum = s->cfg->mps ? s->overhead : s->overhead * s->n;
    for (size_t i = 0; i < s->n; i++) {
        const gm_tenant_result *r = &s->res->t[i];
        uint64_t x = s->share == GM_SHARE_REQUESTS ? r->request_bytes
                     : r->limit_bytes              ? r->limit_bytes
                     : r->request_bytes            ? r->request_bytes
                                                   : cap;
        sum = sum + x < sum ? UINT64_MAX : sum + x;
    }
    if (sum <= cap) return GM_OK;
    return gm_errf(err, GM_EOOM,
                   "the tenants' %s and contexts add up to %.2f GiB, more than the device's "
                   "%.2f GiB: a scheduler would not place them together (--share %s)",
                   s->share == GM_SHARE_REQUESTS ? "requests" : "caps", (double)sum / GM_GiB,
                   (double)cap / GM_GiB, gm_share_mode_name(s->share));
}

static int setup(sim *s, gm_err *err)
{
    const gm_sim_config *cfg = s->cfg;
    uint64_t cap = cfg->capacity_bytes;
    for (size_t i = 0; i < s->n; i++) {
        tenant *t = &s->t[i];
        t->idx = (int)i;
        t->spec = &cfg->tenants[i];
        t->res = &s->res->t[i];
    }
    /* every tenant has its result before any error: the run's end closes them all */
    for (size_t i = 0; i < s->n; i++)
        if (s->t[i].spec->repeat == 0)
            return gm_errf(err, GM_EINVAL, "%s: --repeat must be at least 1", tname(&s->t[i]));
    int rc = resolve_share(s, err);
    if (rc) return rc;
    /* the device comes first: capacity defaults to the first trace's card */
    s->overhead = cfg->overhead_bytes;
    snprintf(s->res->capacity_source, sizeof s->res->capacity_source, "%s",
             cfg->device            ? "the device"
             : cfg->capacity_source ? cfg->capacity_source
                                    : "--capacity");
    if (cfg->device) cap = cfg->device->capacity_bytes;
    const gm_tenant_spec *t0 = &cfg->tenants[0];
    if (!cap) {
        gm_trace_reader *r0 = NULL;
        if (!t0->events && (rc = gm_trace_open(t0->path, &r0, err))) return rc;
        s->t[0].r = r0; /* tenant_open reads on from it: one open per trace (each
                           starts a reader process, ~10 ms: FORMAT.md, "Isolation") */
        const gm_trace_meta *m0 = r0 ? gm_trace_meta_get(r0) : t0->meta;
        cap = gm_engine_default_capacity(cfg, m0, &s->overhead, s->res->capacity_source,
                                         sizeof s->res->capacity_source);
    }
    if (!cap)
        return gm_errf(err, GM_EINVAL,
                       "%s does not record the device's memory size; give one with "
                       "--capacity (e.g. --capacity 80GiB) or --gpu NAME",
                       cfg->tenants[0].name ? cfg->tenants[0].name : cfg->tenants[0].path);
    if (cfg->device)
        s->dev = cfg->device;
    else if ((rc = gm_device_model_create(cap, &cfg->latency, &s->dev, err)))
        return rc;
    s->res->capacity_bytes = cap;
    s->res->overhead_bytes = s->overhead;
    if ((rc = admit(s, cap, err))) return rc;
    s->res->initial_state = cfg->initial_state;
    for (size_t i = 0; i < s->n; i++) {
        tenant *t = &s->t[i];
        if ((rc = tenant_open(s, t, err))) return rc;
        gm_metrics_init(&t->res->m);
    }
    s->rare = s->n > 1 || cfg->event_hook || cfg->empty_cache_at_phase || s->withhold;
    s->stretch = stretch_allowed(s);
    s->stretch_cap = stretch_events(s->n);
    gm_policy *p0 = s->t[0].pol;
    snprintf(s->res->policy, sizeof s->res->policy, "%s%s%s", p0->ops->name,
             p0->params[0] ? ":" : "", p0->params);
    s->res->policy_realizable = p0->ops->realizable;
    snprintf(s->res->allocator, sizeof s->res->allocator, "%s", s->t[0].a->ops->name);
    for (size_t i = 0; i < s->n; i++) {
        tenant *t = &s->t[i];
        if ((rc = refill(s, t, err))) return rc;
        if (t->done) /* an empty trace */
            continue;
        t->t_first = t->nbuf ? t->buf[0].t_ns : 0;
        t->shift = t->spec->offset_ns;
        set_next(t);
        t->t_last = t->next_t;
        t->next_timer = t->next_t + t->timer_period;
    }
    return GM_OK;
}

int gm_engine_prepares(const gm_sim_config *cfg, const gm_policy_ops *policy, size_t i)
{
    const gm_tenant_spec *ts = i < cfg->n_tenants ? &cfg->tenants[i] : NULL;
    return policy->prepare && ts && (ts->events || ts->packed) && !cfg->device;
}

int gm_engine_prepare(const gm_sim_config *cfg, const gm_policy_ops *policy, const char *params,
                      size_t i, gm_policy **out, gm_err *err)
{
    *out = NULL;
    if (!gm_engine_prepares(cfg, policy, i)) return GM_OK;
    const gm_tenant_spec *ts = &cfg->tenants[i];
    const gm_trace_meta *meta = ts->meta ? ts->meta : &meta_none;
    const char *conf = conf_for(cfg, meta), *name;
    const gm_alloc_ops *ops = model_ops(cfg, conf, &name);
    uint64_t overhead = cfg->overhead_bytes, cap = cfg->capacity_bytes;
    char why[64];
    /* the run's device is the first trace's card when cfg gives none;
     * here the tenant's own (what prepare() reads does not depend on it) */
    if (!cap) cap = gm_engine_default_capacity(cfg, meta, &overhead, why, sizeof why);
    gm_device *dev = NULL;
    gm_policy *pol = NULL;
    gm_alloc *a = NULL;
    gm_err ignore; /* what the run will refuse, it says itself */
    if (!ops || !cap || gm_device_model_create(cap, &cfg->latency, &dev, &ignore) != GM_OK)
        return GM_OK;
    int rc = GM_OK;
    if (gm_policy_new(policy, params, &pol, &ignore) == GM_OK &&
        gm_alloc_create_for(ops, dev, conf, model_torch(cfg, meta), cfg->memory_fraction, pol, &a,
                            &ignore) == GM_OK) {
        gm_policy_env env = policy_env(ts, (int)i);
        rc = policy->prepare(pol->state, a, &env, err);
        gm_alloc_destroy(a);
        if (rc == GM_OK) {
            *out = pol;
            pol = NULL;
        }
    }
    gm_policy_destroy(pol);
    gm_device_destroy(dev);
    return rc;
}

int gm_engine_run(const gm_sim_config *cfg, const gm_policy_ops *policy, const char *params,
                  gm_sim_result **out, gm_err *err)
{
    *out = NULL;
    if (cfg->n_tenants == 0) return gm_errf(err, GM_EUSAGE, "no trace given");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    sim s = {.cfg = cfg, .n = cfg->n_tenants, .pol_ops = policy, .pol_params = params};
    s.res = calloc(1, sizeof *s.res);
    s.t = aligned_alloc(_Alignof(tenant), s.n * sizeof *s.t); /* see tenant; s.n > 0 */
    if (s.t) memset(s.t, 0, s.n * sizeof *s.t);
    for (size_t i = 0; s.t && i < s.n; i++) {
        s.t[i].lfat = NO_LFAT; /* no stretch logged */
        s.t[i].hash_of = -1;
    }
    if (s.res) s.res->t = calloc(s.n, sizeof *s.res->t);
    if (!s.res || !s.t || !s.res->t) {
        free(s.t);
        gm_sim_result_free(s.res);
        return gm_errf(err, GM_ENOMEM, "out of memory");
    }
    s.res->n_tenants = s.n;
    s.res->memory_fraction = cfg->memory_fraction;
    s.res->on_oom_skip = cfg->on_oom_skip;
    s.res->on_oom_chain = cfg->on_oom_chain;
    if (cfg->host_tier) {
        s.tier = *cfg->host_tier;
        s.has_tier = 1;
    } else if (cfg->on_oom_chain) { /* the chain's third step: PCIe Gen4 unless told */
        gm_host_tier_parse("pcie4", &s.tier, err);
        s.has_tier = 1;
    }
    s.res->has_host_tier = s.has_tier;
    if (s.has_tier) s.res->host_tier = s.tier;
    gm_metrics_init(&s.res->device);
    s.next_progress = 1u << 20;
    int rc = setup(&s, err);
    if (rc == GM_OK && s.n > 1 && tree_build(&s) != GM_OK)
        rc = gm_errf(err, GM_ENOMEM, "out of memory");
    /* The hot loop, once per trace event of every tenant: take the tenant
     * whose next event is earliest (ties to the lower index; with one tenant
     * there is nothing to search) and step it: its due timers, the event
     * through its allocator, the metrics. What is rare stays off this path,
     * in the functions step() reaches only now and then: tenant_start() at
     * the first event (the initial state), refill() at the end of a chunk
     * or a pass, on_oom() and retire(). */
    while (rc == GM_OK) {
        tenant *t = s.n == 1 ? (s.t[0].done ? NULL : &s.t[0]) : next_tenant(&s);
        if (!t || (cfg->halt && *cfg->halt)) break;
        size_t took = 0; /* events run_plain took; 0: the next is step()'s */
        int merged = 0;  /* a stretch's event joined the device's series */
        if (t->ln || (s.stretch && stretch(&s, t))) {
            /* the others' ticks due by this event fire first, as step_rare
             * fires them (t's own is after its stretch: it stops there) */
            if (s.timer_min <= t->log[t->lhead].t_ns)
                fire_other_timers(&s, t, t->log[t->lhead].t_ns);
            stretch_merge(&s, t);
            merged = 1;
        } else if (plain(&s, t)) {
            rc = run_plain(&s, t, &took, err);
        }
        if (rc == GM_OK && !took && !merged) rc = step(&s, t, err);
        if (s.n > 1) tree_next(&s, t);
        if (cfg->progress && s.res->events >= s.next_progress) {
            cfg->progress(cfg->progress_ctx, s.res->events);
            s.next_progress += 1u << 20;
        }
    }
    for (size_t i = 0; i < s.n; i++) {
        tenant *t = &s.t[i];
        if (t->hash_of >= 0)
            memcpy(t->res->trace_hash, s.t[t->hash_of].res->trace_hash, sizeof t->res->trace_hash);
        if (t->a) t->res->c = t->a->c;
        gm_metrics_timeline_end(&t->res->m);
        tenant_close(t, cfg);
    }
    gm_metrics_timeline_end(&s.res->device);
    s.res->policy_inert = s.n > 0;
    for (size_t i = 0; i < s.n; i++)
        s.res->policy_inert &= s.t[i].inert;
    if (s.dev && !cfg->device) {
        s.res->capacity_free = !s.dev->capacity_reads;
        s.res->refused_calls = s.dev->refused;
        s.res->independent = !s.dev->refused && s.dev->capacity_reads == s.dev->room_reads;
    }
    if (!cfg->device) gm_device_destroy(s.dev);
    if (s.n == 1) s.res->device = s.res->t[0].m;
    free(s.t);
    free(s.tree);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    s.res->wall_s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    if (rc != GM_OK) {
        gm_sim_result_free(s.res);
        return rc;
    }
    *out = s.res;
    return GM_OK;
}

/* ---------------- --host-tier and --on-oom chain (host_tier.h) ----------------
 * Off the hot path: a tenant has an oomx only when either is asked for, and
 * the engine reaches this code only through t->x, at an OOM, or at the free
 * of a block the live map holds as SKIPPED (spilled, or skipped on OOM). */

typedef struct xrec {
    uint64_t addr, born, size, stream;
    uint32_t id; /* its live slot, 0: by address */
    uint8_t cat, spilled;
} xrec;

typedef struct oomx {
    gm_addrmap map; /* address key -> index into recs */
    xrec *recs;     /* the allocations made since the start (stale ones are swept) */
    size_t n, cap, sweep_at;
    uint64_t born;       /* allocations noted so far: the age order */
    uint64_t host_bytes; /* this tenant's bytes on the host tier */
    int chain;
    int degrading;          /* --on-oom chain step 2: activations halved until the iteration ends */
    uint8_t last_phase;     /* the phase of the last allocation that had one */
    uint64_t degrade_floor; /* no phases: degrading ends once allocated bytes are down to this */
} oomx;

static int x_open(sim *s, tenant *t, gm_err *err)
{
    t->x = calloc(1, sizeof *t->x);
    if (!t->x || gm_addrmap_init(&t->x->map, 1024)) return gm_errf(err, GM_ENOMEM, "out of memory");
    t->x->chain = s->cfg->on_oom_chain;
    t->x->sweep_at = 4096;
    return GM_OK;
}

static void x_close(tenant *t)
{
    if (!t->x) return;
    gm_addrmap_free(&t->x->map);
    free(t->x->recs);
    free(t->x);
    t->x = NULL;
}

/* Where the live map holds rec's allocation (the value is its handle, + 1
 * in a slot), or NULL when rec is stale (freed, its slot or address since
 * taken by another allocation). */
static uint64_t *x_ref(tenant *t, const xrec *r, int *in_slot)
{
    *in_slot = r->id != 0;
    if (r->id)
        return r->id < t->n_slot && t->slot[r->id] && t->slot_addr[r->id] == r->addr
                   ? &t->slot[r->id]
                   : NULL;
    return gm_addrmap_get(&t->live, gm_addrmap_key(r->addr));
}

/* Drop record i; the last record moves into its place, and its map entry
 * (present: every record has one) is pointed there. Not a second put: the
 * map takes only keys it lacks (addrmap.h), and a second entry for the
 * moved record's address hid the right one from gm_addrmap_get, so a later
 * allocation at that address got a second record, and a spill freed one
 * block twice (a crash in x_spill). */
static void x_remove(oomx *x, size_t i)
{
    gm_addrmap_del(&x->map, gm_addrmap_key(x->recs[i].addr), NULL);
    if (i != --x->n) {
        x->recs[i] = x->recs[x->n];
        *gm_addrmap_get(&x->map, gm_addrmap_key(x->recs[i].addr)) = i;
    }
}

/* Drop the records of allocations that are gone (frees do not tell this
 * code: that would be the hot path). Amortized: when the records doubled. */
static void x_sweep(tenant *t)
{
    oomx *x = t->x;
    for (size_t i = x->n; i-- > 0;) {
        int in_slot;
        if (!x->recs[i].spilled && !x_ref(t, &x->recs[i], &in_slot)) x_remove(x, i);
    }
    x->sweep_at = 2 * x->n > 4096 ? 2 * x->n : 4096;
}

/* The allocation e of `size` bytes (halved if degrading) succeeded (in slot
 * id, 0: by address): remember its size and age, for a spill. */
static int x_note(tenant *t, const gm_event *e, uint64_t size, uint32_t id)
{
    oomx *x = t->x;
    uint64_t key = gm_addrmap_key(e->addr), *idx = gm_addrmap_get(&x->map, key);
    xrec r = {.addr = e->addr,
              .born = x->born++,
              .size = size,
              .stream = e->stream,
              .id = id,
              .cat = e->category};
    if (idx) { /* the address again: the earlier allocation is gone */
        x->recs[*idx] = r;
        return GM_OK;
    }
    if (x->n >= x->sweep_at) x_sweep(t);
    if (x->n == x->cap) {
        size_t cap = x->cap ? 2 * x->cap : 1024;
        xrec *v = realloc(x->recs, cap * sizeof *v);
        if (!v) return GM_ENOMEM;
        x->recs = v;
        x->cap = cap;
    }
    x->recs[x->n] = r;
    if (gm_addrmap_put(&x->map, key, x->n)) return GM_ENOMEM;
    x->n++;
    return GM_OK;
}

/* --on-oom chain step 2 (README, "Host tier and the OOM fallback chain"):
 * while degrading, activations are allocated at half their size. The
 * iteration ends where the allocations' phase comes back to forward from
 * backward or optimizer. A trace without phases (a serving trace) shows no
 * iteration boundary, so there the degradation ends when the pressure that
 * caused it has passed: the tenant's allocated bytes are back down to what
 * they were at the OOM less the request (degrade_floor), so the memory
 * freed since would hold the failed request at full size. */
static uint64_t x_size(tenant *t, const gm_event *e)
{
    oomx *x = t->x;
    if (e->phase != GM_PHASE_UNKNOWN) {
        if (x->degrading && e->phase == GM_PHASE_FORWARD && x->last_phase != GM_PHASE_FORWARD)
            x->degrading = 0;
        x->last_phase = e->phase;
    } else if (x->degrading && x->last_phase == GM_PHASE_UNKNOWN &&
               t->a->c.allocated_bytes <= x->degrade_floor) {
        x->degrading = 0;
    }
    if (!x->degrading || e->category != GM_CAT_ACTIVATION || e->size < 2) return e->size;
    t->res->tier.degraded_allocs++;
    t->res->tier.degraded_bytes += e->size - e->size / 2;
    return e->size / 2;
}

static void x_host_add(sim *s, tenant *t, uint64_t bytes)
{
    s->host_bytes += bytes;
    t->x->host_bytes += bytes;
    if (t->x->host_bytes > t->res->tier.peak_host_bytes)
        t->res->tier.peak_host_bytes = t->x->host_bytes;
}

static void x_host_sub(sim *s, tenant *t, uint64_t bytes)
{
    s->host_bytes -= bytes;
    t->x->host_bytes -= bytes;
}

static int cmp_born(const void *p, const void *q)
{
    const xrec *a = *(const xrec *const *)p, *b = *(const xrec *const *)q;
    return a->born < b->born ? -1 : a->born > b->born;
}

/* Spill live blocks of t, oldest allocated first, until an allocation of
 * `size` bytes (category, stream of e) fits; blocks waiting for a deferred
 * free (free_requested) and blocks of /initial_state are not moved, nor
 * ones the host tier has no room for. Returns 1 with *h set when it fits. */
static int x_spill(sim *s, tenant *t, const gm_event *e, uint64_t size, uint64_t now, uint64_t *h)
{
    oomx *x = t->x;
    gm_alloc *a = t->a;
    xrec **c = malloc((x->n ? x->n : 1) * sizeof *c);
    size_t nc = 0;
    if (!c) return 0;
    for (size_t i = 0; i < x->n; i++) {
        int in_slot;
        const uint64_t *v = x_ref(t, &x->recs[i], &in_slot);
        if (x->recs[i].spilled || !v || *v == (in_slot ? SKIPPED + 1 : SKIPPED)) continue;
        if (t->pending_bytes && gm_addrmap_get(&t->pending, gm_addrmap_key(x->recs[i].addr)))
            continue;
        c[nc++] = &x->recs[i];
    }
    qsort(c, nc, sizeof *c, cmp_born);
    uint64_t need = a->ops->block_size(a, size), freed = 0;
    int moved = 0, ok = 0;
    for (size_t k = 0; k < nc && !ok; k++) {
        xrec *r = c[k];
        if (s->tier.size && s->host_bytes + r->size > s->tier.size) continue;
        int in_slot;
        uint64_t *v = x_ref(t, r, &in_slot), hb = in_slot ? *v - 1 : *v;
        freed += gm_alloc_block_bytes(a, hb, r->size);
        tensor_free(t, hb, now);
        *v = in_slot ? SKIPPED + 1 : SKIPPED;
        r->spilled = 1;
        x_host_add(s, t, r->size);
        t->res->tier.spills++;
        t->res->tier.spill_bytes += r->size;
        t->res->tier.spill_ns += gm_host_tier_ns(&s->tier, r->size);
        moved = 1;
        if (freed >= need) /* enough bytes freed; fragmentation may still refuse it */
            ok = a->ops->malloc(a, size, e->stream, e->category, now, h) == GM_OK;
    }
    free(c);
    if (!ok && moved && freed < need) /* all there was: the cache may coalesce with free memory */
        ok = a->ops->malloc(a, size, e->stream, e->category, now, h) == GM_OK;
    if (ok) t->res->tier.oom_spill_resolved++;
    return ok;
}

/* The allocation e (of `size` bytes: halved if degrading) failed after the
 * policy, the allocator and --scope device did all they could. Without the
 * chain: spill to the host tier. With it: 1) every tenant's cache released
 * (this one's first; each followed by a retry), 2) an activation at half
 * its size (*size halved), the rest of the iteration degraded, 3) spill.
 * Returns 1 with *h set when one of them resolved it; the caller counts an
 * OOM otherwise. */
static int x_rescue(sim *s, tenant *t, const gm_event *e, uint64_t *sizep, uint64_t now,
                    uint64_t *h)
{
    uint64_t size = *sizep;
    oomx *x = t->x;
    gm_tier_stats *st = &t->res->tier;
    if (!x->chain) return s->has_tier && x_spill(s, t, e, size, now, h);
    st->chain_ooms++;
    for (size_t k = 0; k < s->n; k++) {
        tenant *o = &s->t[((size_t)t->idx + k) % s->n];
        if (o->done || !o->a) continue;
        uint64_t got = o->a->ops->empty_cache(o->a, now);
        if (!got) continue;
        if (o != t) {
            o->res->scope_released_bytes += got;
            tenant_step_metrics(o, now);
            update_device(s, o, now);
        }
        if (t->a->ops->malloc(t->a, size, e->stream, e->category, now, h) == GM_OK) {
            st->by_release++;
            return 1;
        }
    }
    uint64_t at_oom = t->a->c.allocated_bytes;
    if (e->category == GM_CAT_ACTIVATION && size >= 2 &&
        t->a->ops->malloc(t->a, size / 2, e->stream, e->category, now, h) == GM_OK) {
        x->degrade_floor = at_oom > size ? at_oom - size : 0;
        st->by_degrade++;
        st->degraded_allocs++;
        st->degraded_bytes += size - size / 2;
        *sizep = size / 2;
        x->degrading = 1;
        t->res->degraded = 1;
        return 1;
    }
    if (x_spill(s, t, e, size, now, h)) {
        st->by_offload++;
        return 1;
    }
    st->unresolved++;
    return 0;
}

/* The trace frees a block the live map holds as SKIPPED: if the host tier
 * holds it, fetch it back first (touch=free: the free stands for its last
 * use) or drop the host copy (touch=none). A fetch that does not fit even
 * after spilling others is counted as an OOM (fetch_ooms) and dropped. */
static void x_skipped_free(sim *s, tenant *t, uint64_t key, uint64_t now)
{
    oomx *x = t->x;
    uint64_t *idx = gm_addrmap_get(&x->map, key);
    if (!idx || !x->recs[*idx].spilled) return; /* skipped on OOM: nothing held */
    xrec r = x->recs[*idx];
    x_remove(x, *idx);
    x_host_sub(s, t, r.size);
    gm_tier_stats *st = &t->res->tier;
    if (s->tier.touch == GM_TOUCH_NONE) {
        st->drops++;
        st->drop_bytes += r.size;
        return;
    }
    gm_event e = {.t_ns = now,
                  .addr = r.addr,
                  .size = r.size,
                  .stream = r.stream,
                  .op = GM_OP_ALLOC,
                  .category = r.cat};
    uint64_t h;
    if (t->a->ops->malloc(t->a, r.size, r.stream, r.cat, now, &h) != GM_OK &&
        !x_spill(s, t, &e, r.size, now, &h)) {
        st->fetch_ooms++;
        record_oom(s, t, &e, now);
        return;
    }
    st->fetches++;
    st->fetch_bytes += r.size;
    st->fetch_ns += gm_host_tier_ns(&s->tier, r.size);
    const gm_policy_ops *po = t->pol->ops;
    if (po->on_tensor) po->on_tensor(t->pol->state, t->a, h, r.cat, 0, now);
    tensor_free(t, h, now);
}
