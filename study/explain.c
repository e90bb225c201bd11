/* explain.c - see explain.h. */
#include "explain.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool.h"
#include "simulate.h"
#include "tune.h"
#include "base/addrmap.h"
#include "base/clock.h"
#include "traces/site_tally.h"
#include "traces/alloc_conf.h"

/* ---------------- the live set, from the trace ---------------- */

/* A live tensor in the map: requested bytes (< 2^48, trace.h) and category. */
#define PACK(size, cat) ((uint64_t)(size) | (uint64_t)(cat) << 56)
#define SIZE_OF(v) ((v) & ((1ull << 56) - 1))
#define CAT_OF(v) ((int)((v) >> 56))

typedef struct scan {
    gm_addrmap live;
    gm_live_set now;
    gm_sites sites;      /* the trace's /sites */
    gm_site_tally tally; /* live bytes by site, now and at the peak */
} scan;

static void add(gm_live_set *s, uint64_t size, int cat)
{
    if (cat < 0 || cat >= GM_CAT_COUNT) cat = GM_CAT_UNKNOWN;
    s->bytes[cat] += size;
    s->count[cat]++;
    s->total += size;
    s->n++;
}

static void drop(gm_live_set *s, uint64_t v)
{
    int cat = CAT_OF(v);
    if (cat < 0 || cat >= GM_CAT_COUNT) cat = GM_CAT_UNKNOWN;
    uint64_t size = SIZE_OF(v);
    s->bytes[cat] -= size;
    s->count[cat]--;
    s->total -= size;
    s->n--;
}

static int apply(scan *sc, const gm_event *e)
{
    uint64_t key = gm_addrmap_key(e->addr), old;
    if (e->op == GM_OP_ALLOC) {
        if (gm_addrmap_del(&sc->live, key, &old)) { /* --lenient realloc */
            drop(&sc->now, old);
            gm_site_tally_drop(&sc->tally, e->addr, SIZE_OF(old));
        }
        if (gm_addrmap_put(&sc->live, key, PACK(e->size, e->category)) ||
            gm_site_tally_add(&sc->tally, e->addr, e->size, e->site))
            return GM_ENOMEM;
        add(&sc->now, e->size, e->category);
    } else if (e->op == GM_OP_FREE && gm_addrmap_del(&sc->live, key, &old)) {
        drop(&sc->now, old);
        gm_site_tally_drop(&sc->tally, e->addr, SIZE_OF(old));
    }
    return GM_OK;
}

static int initial(scan *sc, gm_trace_reader *r, const gm_sim_config *cfg, gm_err *err)
{
    if (!r || cfg->initial_state == GM_INITIAL_NONE) return GM_OK;
    gm_init_row *rows = NULL;
    size_t n = 0;
    int rc = gm_trace_read_initial(r, &rows, &n, err);
    for (size_t i = 0; rc == GM_OK && i < n; i++)
        if (rows[i].kind == GM_INIT_BLOCK) {
            if (gm_addrmap_put(&sc->live, gm_addrmap_key(rows[i].addr),
                               PACK(rows[i].size, rows[i].category)) ||
                gm_site_tally_add(&sc->tally, rows[i].addr, rows[i].size, rows[i].site))
                rc = gm_errf(err, GM_ENOMEM, "out of memory");
            else
                add(&sc->now, rows[i].size, rows[i].category);
        }
    free(rows);
    return rc;
}

/* The top sites of the tally (now, or at its peak) into s. */
static void top_sites(const scan *sc, int peak, gm_live_set *s)
{
    gm_site_live top[GM_LIVE_TOP_SITES];
    s->n_trace_sites = sc->sites.n;
    s->n_sites = sc->sites.n ? gm_site_tally_top(&sc->tally, peak, top, GM_LIVE_TOP_SITES) : 0;
    for (size_t i = 0; i < s->n_sites; i++) {
        snprintf(s->sites[i].name, sizeof s->sites[i].name, "%s",
                 gm_sites_name(&sc->sites, top[i].site));
        s->sites[i].bytes = top[i].bytes;
        s->sites[i].count = top[i].count;
    }
    s->unknown_site_bytes = sc->sites.n ? (peak ? sc->tally.pbytes : sc->tally.bytes)[0] : 0;
    s->unknown_site_count = sc->sites.n ? (peak ? sc->tally.pcount : sc->tally.count)[0] : 0;
}

int gm_live_at(const gm_sim_config *cfg, int tenant, uint64_t event_index, gm_live_set *at,
               gm_live_set *peak, gm_err *err)
{
    if (tenant < 0 || (size_t)tenant >= cfg->n_tenants)
        return gm_errf(err, GM_EINVAL, "no tenant %d", tenant);
    const gm_tenant_spec *t = &cfg->tenants[tenant];
    scan sc;
    memset(&sc, 0, sizeof sc);
    memset(at, 0, sizeof *at);
    if (peak) memset(peak, 0, sizeof *peak);
    if (gm_addrmap_init(&sc.live, 1024)) return gm_errf(err, GM_ENOMEM, "out of memory");
    gm_trace_reader *r = NULL;
    gm_event *buf = NULL;
    int rc = GM_OK;
    if (!t->events) {
        rc = gm_trace_open(t->path, &r, err);
        if (rc == GM_OK && !(buf = malloc(GM_TRACE_CHUNK_EVENTS * sizeof *buf)))
            rc = gm_errf(err, GM_ENOMEM, "out of memory");
    }
    if (rc == GM_OK && r) rc = gm_trace_read_sites(r, &sc.sites, err);
    if (rc == GM_OK && gm_site_tally_init(&sc.tally, sc.sites.n))
        rc = gm_errf(err, GM_ENOMEM, "out of memory");
    if (rc == GM_OK) rc = initial(&sc, r, cfg, err);
    if (peak && rc == GM_OK) *peak = sc.now;
    gm_site_tally_peak(&sc.tally);
    uint64_t idx = 0;
    int have_at = 0;
    for (size_t pos = 0; rc == GM_OK;) {
        const gm_event *ev;
        int64_t got;
        if (t->events) {
            ev = t->events + pos;
            got = (int64_t)(t->n_events - pos);
            pos = t->n_events;
        } else {
            got = gm_trace_read(r, buf, GM_TRACE_CHUNK_EVENTS, err);
            ev = buf;
        }
        if (got < 0) rc = (int)got;
        if (got <= 0) break;
        for (int64_t i = 0; i < got && rc == GM_OK; i++, idx++) {
            if (idx == event_index) {
                *at = sc.now;
                top_sites(&sc, 0, at);
                have_at = 1;
            }
            rc = apply(&sc, &ev[i]) ? gm_errf(err, GM_ENOMEM, "out of memory") : GM_OK;
            if (peak && sc.now.total > peak->total) {
                memcpy(peak, &sc.now, offsetof(gm_live_set, n_trace_sites)); /* sites: at the end */
                peak->event_index = idx + 1;
                gm_site_tally_peak(&sc.tally);
            }
        }
    }
    if (rc == GM_OK && !have_at) { /* past the end: the state at the end */
        *at = sc.now;
        top_sites(&sc, 0, at);
    }
    if (rc == GM_OK && peak) top_sites(&sc, 1, peak);
    at->tenant = tenant;
    at->event_index = event_index;
    if (peak) peak->tenant = tenant;
    free(buf);
    gm_trace_close(r);
    gm_addrmap_free(&sc.live);
    gm_site_tally_free(&sc.tally);
    gm_sites_free(&sc.sites);
    return rc;
}

/* ---------------- single changes, re-simulated ---------------- */

typedef struct fix_ctx {
    const gm_sim_config *base;
    gm_fixes *out;
} fix_ctx;

static void fix_one(void *arg, size_t i)
{
    fix_ctx *x = arg;
    gm_fix *f = &x->out->f[i];
    gm_sim_config cfg = *x->base;
    cfg.alloc_conf = f->conf;
    cfg.memory_fraction = f->memory_fraction;
    cfg.empty_cache_at_phase = cfg.empty_cache_at_phase || f->phase_empty_cache;
    cfg.progress = NULL;
    cfg.no_device_stats = 1; /* a verdict or a row: no memory_stats() (engine.h) */
    gm_sim_result *r = NULL;
    f->rc = gm_simulate(&cfg, &r, &f->err);
    if (f->rc == GM_OK) {
        gm_alloc_counters tot = gm_sim_totals(r);
        f->ooms = r->device.n_oom;
        f->first_oom_index = r->device.n_oom_kept ? r->device.ooms[0].event_index : 0;
        f->peak_reserved = r->device.peak_r;
        f->driver_calls = tot.n_driver_alloc + tot.n_driver_free;
        f->driver_ns = gm_counters_driver_ns(&tot);
    }
    gm_sim_result_free(r);
}

static gm_fix *push(gm_fixes *out, const char *what, const char *conf, const char *piece,
                    double fraction)
{
    if (out->n == GM_FIXES_MAX) return NULL;
    gm_fix *f = &out->f[out->n++];
    snprintf(f->what, sizeof f->what, "%s", what);
    snprintf(f->conf, sizeof f->conf, "%s%s%s", conf, *conf && *piece ? "," : "", piece);
    f->memory_fraction = fraction;
    return f;
}

int gm_oom_fixes(const gm_sim_config *cfg, const gm_sim_result *r, int threads, gm_fixes *out,
                 gm_err *err)
{
    memset(out, 0, sizeof *out);
    gm_alloc_counters tot = gm_sim_totals(r);
    out->ooms = r->device.n_oom;
    out->first_oom_index = r->device.n_oom_kept ? r->device.ooms[0].event_index : 0;
    out->peak_reserved = r->device.peak_r;
    out->driver_calls = tot.n_driver_alloc + tot.n_driver_free;
    out->driver_ns = gm_counters_driver_ns(&tot);
    if (!r->n_tenants || strcmp(r->allocator, "pytorch")) return GM_OK; /* PyTorch's settings */
    /* the settings the run had (its first tenant's: --alloc-conf, else recorded) */
    const char *conf = r->t[0].alloc_conf;
    int version = r->t[0].torch_version;
    gm_pt_conf pc;
    if (gm_pt_conf_parse_for(conf, version, &pc, err) != GM_OK) return err->code;
    double fraction = cfg->memory_fraction;
    if (!pc.expandable_segments && version >= GM_TORCH_2_1)
        push(out, "expandable_segments:True", conf, "expandable_segments:True", fraction);
    if (pc.max_split_size == UINT64_MAX) {
        push(out, "max_split_size_mb:128", conf, "max_split_size_mb:128", fraction);
        push(out, "max_split_size_mb:512", conf, "max_split_size_mb:512", fraction);
    }
    if (pc.gc_threshold <= 0) {
        int key = version >= GM_TORCH_2_10 && fraction <= 0 && pc.memory_fraction <= 0;
        gm_fix *f =
            push(out, "garbage_collection_threshold:0.8", conf,
                 key ? "garbage_collection_threshold:0.8,per_process_memory_fraction:0.99"
                     : "garbage_collection_threshold:0.8",
                 fraction > 0 || key || pc.memory_fraction > 0 ? fraction : GM_TUNE_GC_FRACTION);
        (void)f;
    }
    if (!cfg->empty_cache_at_phase) {
        gm_fix *f = push(out, "empty_cache() at phase boundaries", conf, "", fraction);
        if (f) f->phase_empty_cache = 1;
    }
    out->threads = threads > 0 ? threads : gm_default_threads();
    double t0 = gm_monotonic_s();
    fix_ctx x = {cfg, out};
    gm_parallel_for(out->n, out->threads, fix_one, &x);
    out->wall_s = gm_monotonic_s() - t0;
    return GM_OK;
}
