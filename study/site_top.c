/* site_top.c - see site_top.h. */
#include "site_top.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK 65536u

/* ------------------------------------------------------------ one tenant */

static void acc_free(gm_site_acc *c)
{
    gm_sites_free(&c->sites);
    gm_site_tally_free(&c->tally);
    gm_addrmap_free(&c->req);
    gm_addrmap_free(&c->blk);
    free(c->ac);
    free(c->ab);
    free(c->fc);
    free(c->fb);
    free(c->abb);
    free(c->fbb);
    free(c->incl);
    memset(c, 0, sizeof *c);
}

/* c->sites already read. */
static int acc_init(gm_site_acc *c)
{
    size_t n;
    if (gm_site_tally_init(&c->tally, c->sites.n) != GM_OK) return GM_ENOMEM;
    n = c->tally.n;
    c->ac = calloc(n, sizeof *c->ac);
    c->ab = calloc(n, sizeof *c->ab);
    c->fc = calloc(n, sizeof *c->fc);
    c->fb = calloc(n, sizeof *c->fb);
    c->abb = calloc(n, sizeof *c->abb);
    c->fbb = calloc(n, sizeof *c->fbb);
    if (!c->ac || !c->ab || !c->fc || !c->fb || !c->abb || !c->fbb ||
        gm_addrmap_init(&c->req, 1024) || gm_addrmap_init(&c->blk, 1024))
        return GM_ENOMEM;
    return GM_OK;
}

static void acc_drop(gm_site_acc *c, uint64_t addr)
{
    uint64_t key = gm_addrmap_key(addr), size, block = 0;
    if (!gm_addrmap_del(&c->req, key, &size)) return; /* not live (or never seen) */
    gm_addrmap_del(&c->blk, key, &block);
    const uint64_t *sp = gm_addrmap_get(&c->tally.live, key);
    size_t s = sp && *sp < c->tally.n ? (size_t)*sp : 0;
    gm_site_tally_drop(&c->tally, addr, size);
    c->fc[s]++;
    c->fb[s] += size;
    c->fbb[s] += block;
}

static int acc_add(gm_site_acc *c, uint64_t addr, uint64_t size, uint64_t block, uint32_t site)
{
    acc_drop(c, addr); /* an address still live: the new allocation replaces it */
    uint64_t key = gm_addrmap_key(addr);
    size_t s = site < c->tally.n ? site : 0;
    if (gm_addrmap_put(&c->req, key, size) || gm_addrmap_put(&c->blk, key, block) ||
        gm_site_tally_add(&c->tally, addr, size, (uint32_t)s))
        return GM_ENOMEM;
    c->ac[s]++;
    c->ab[s] += size;
    c->abb[s] += block;
    return GM_OK;
}

/* ------------------------------------------------------------ the hooks */

static void new_peak(gm_top_sites *ts, uint64_t bytes, int tenant, uint64_t event)
{
    ts->peak_bytes = bytes;
    ts->peak_tenant = tenant;
    ts->peak_event = event;
    for (size_t i = 0; i < ts->n; i++)
        gm_site_tally_peak(&ts->t[i].tally);
}

/* The run's allocated bytes now; a new peak is remembered. */
static void check_peak(gm_top_sites *ts, int tenant, uint64_t event)
{
    uint64_t a = 0;
    for (size_t i = 0; i < ts->n; i++)
        if (ts->t[i].a) a += ts->t[i].a->c.allocated_bytes;
    if (a > ts->peak_bytes) new_peak(ts, a, tenant, event);
}

/* A tensor of tenant's, at addr, of `size` bytes requested, in the
 * allocator's block `handle`, from `site`: tallied, then the peak checked
 * (peak_tenant -1: the initial state's). */
static void tally_alloc(gm_top_sites *ts, int tenant, gm_alloc *a, uint64_t handle, uint64_t addr,
                        uint64_t size, uint32_t site, int peak_tenant, uint64_t event_index)
{
    gm_site_acc *c = &ts->t[tenant];
    c->a = a;
    if (acc_add(c, addr, size, gm_alloc_block_bytes(a, handle, size), site) != GM_OK)
        ts->rc = GM_ENOMEM;
    check_peak(ts, peak_tenant, event_index);
}

static void on_alloc(void *ctx, int tenant, uint64_t event_index, const gm_event *ev, gm_alloc *a,
                     uint64_t handle)
{
    tally_alloc(ctx, tenant, a, handle, ev->addr, ev->size, ev->site, tenant, event_index);
}

static void on_event(void *ctx, int tenant, uint64_t event_index, const gm_event *ev)
{
    (void)event_index;
    gm_top_sites *ts = ctx;
    if (ev->op == GM_OP_FREE) acc_drop(&ts->t[tenant], ev->addr);
}

static void on_init(void *ctx, int tenant, const gm_init_row *row, gm_alloc *a, uint64_t handle)
{
    tally_alloc(ctx, tenant, a, handle, row->addr, row->size, row->site, -1, 0);
}

static void on_end(void *ctx, int tenant, gm_alloc *a, int status)
{
    (void)a;
    (void)status;
    gm_top_sites *ts = ctx;
    ts->t[tenant].a = NULL; /* its memory goes back; the allocator is destroyed */
}

static int read_sites(const char *path, gm_sites *s, gm_err *err)
{
    gm_trace_reader *r;
    int rc = gm_trace_open(path, &r, err);
    if (rc != GM_OK) return rc;
    rc = gm_trace_read_sites(r, s, err);
    gm_trace_close(r);
    return rc;
}

static int alloc_tenants(gm_top_sites *ts, size_t n, gm_err *err)
{
    ts->n = n;
    ts->t = calloc(n ? n : 1, sizeof *ts->t);
    ts->names = calloc(n ? n : 1, sizeof *ts->names);
    ts->peak_tenant = -1;
    if (!ts->t || !ts->names) return gm_errf(err, GM_ENOMEM, "out of host memory");
    return GM_OK;
}

int gm_top_sites_hook(gm_top_sites *ts, gm_sim_config *cfg, gm_err *err)
{
    memset(ts, 0, sizeof *ts);
    ts->simulated = 1;
    int rc = alloc_tenants(ts, cfg->n_tenants, err);
    for (size_t i = 0; rc == GM_OK && i < cfg->n_tenants; i++) {
        const gm_tenant_spec *sp = &cfg->tenants[i];
        ts->names[i] = sp->name ? sp->name : sp->path;
        if (!sp->events) rc = read_sites(sp->path, &ts->t[i].sites, err); /* in memory: none */
        if (rc == GM_OK && acc_init(&ts->t[i]) != GM_OK)
            rc = gm_errf(err, GM_ENOMEM, "out of host memory");
    }
    if (rc != GM_OK) return rc;
    cfg->alloc_hook = on_alloc;
    cfg->alloc_hook_ctx = ts;
    cfg->event_hook = on_event;
    cfg->event_hook_ctx = ts;
    cfg->init_hook = on_init;
    cfg->init_hook_ctx = ts;
    cfg->end_hook = on_end;
    cfg->end_hook_ctx = ts;
    return GM_OK;
}

void gm_top_sites_unhook(gm_sim_config *cfg)
{
    cfg->alloc_hook = NULL;
    cfg->event_hook = NULL;
    cfg->init_hook = NULL;
    cfg->end_hook = NULL;
    cfg->alloc_hook_ctx = cfg->event_hook_ctx = cfg->init_hook_ctx = cfg->end_hook_ctx = NULL;
}

void gm_top_sites_free(gm_top_sites *ts)
{
    for (size_t i = 0; ts->t && i < ts->n; i++)
        acc_free(&ts->t[i]);
    free(ts->t);
    free(ts->names);
    memset(ts, 0, sizeof *ts);
}

/* ------------------------------------------------------------ a trace */

int gm_top_sites_trace(gm_trace_reader *r, const char *name, gm_top_sites *ts, gm_err *err)
{
    memset(ts, 0, sizeof *ts);
    int rc = alloc_tenants(ts, 1, err);
    gm_site_acc *c = ts->t;
    gm_init_row *init = NULL;
    size_t ninit = 0;
    gm_event *buf = NULL;
    if (rc == GM_OK) {
        ts->names[0] = name ? name : gm_trace_path(r);
        rc = gm_trace_read_sites(r, &c->sites, err);
    }
    if (rc == GM_OK && acc_init(c) != GM_OK) rc = gm_errf(err, GM_ENOMEM, "out of host memory");
    if (rc == GM_OK && gm_trace_rewind(r) != GM_OK)
        rc = gm_errf(err, GM_EIO, "%s: cannot read the trace from its start", gm_trace_path(r));
    if (rc == GM_OK) rc = gm_trace_read_initial(r, &init, &ninit, err);
    for (size_t i = 0; rc == GM_OK && i < ninit; i++) {
        if (init[i].kind != GM_INIT_BLOCK) continue;
        if (gm_addrmap_get(&c->req, gm_addrmap_key(init[i].addr))) continue; /* counted once */
        rc = acc_add(c, init[i].addr, init[i].size, init[i].size, init[i].site);
        ts->now_bytes += init[i].size;
    }
    if (rc == GM_OK && ts->now_bytes) new_peak(ts, ts->now_bytes, -1, 0);
    if (rc == GM_OK && !(buf = malloc(CHUNK * sizeof *buf))) rc = GM_ENOMEM;
    uint64_t index = 0;
    while (rc == GM_OK) {
        int64_t got = gm_trace_read(r, buf, CHUNK, err);
        if (got <= 0) {
            if (got < 0) rc = (int)got;
            break;
        }
        for (int64_t j = 0; j < got && rc == GM_OK; j++, index++) {
            const gm_event *e = &buf[j];
            const uint64_t *old = gm_addrmap_get(&c->req, gm_addrmap_key(e->addr));
            if (e->op == GM_OP_ALLOC) {
                if (old) ts->now_bytes -= *old;
                rc = acc_add(c, e->addr, e->size, e->size, e->site);
                ts->now_bytes += e->size;
                if (ts->now_bytes > ts->peak_bytes) new_peak(ts, ts->now_bytes, 0, index);
            } else if (e->op == GM_OP_FREE && old) {
                ts->now_bytes -= *old;
                acc_drop(c, e->addr);
            }
        }
    }
    free(buf);
    free(init);
    if (rc == GM_OK) rc = gm_top_sites_finish(ts);
    if (rc == GM_ENOMEM) return gm_errf(err, GM_ENOMEM, "out of host memory");
    if (rc == GM_OK && gm_trace_rewind(r) != GM_OK)
        rc = gm_errf(err, GM_EIO, "%s: cannot read the trace again", gm_trace_path(r));
    return rc;
}

/* ------------------------------------------------------------ CUDA Mem */

/* A stack line "/home/u/train.py:42 in forward" as a site's name:
 * "train.py:42 in forward". */
static void frame_name(const char *line, size_t len, char *out, size_t cap)
{
    const char *in = NULL;
    for (size_t i = 0; i + 4 <= len && !in; i++)
        if (!memcmp(line + i, " in ", 4)) in = line + i;
    const char *file_end = in ? in : line + len, *base = line;
    for (const char *p = line; p < file_end; p++)
        if (*p == '/') base = p + 1;
    snprintf(out, cap, "%.*s%.*s", (int)(file_end - base), base, (int)(line + len - file_end),
             file_end);
}

typedef struct named {
    const char *name;
    uint32_t site;
} named;

static int cmp_name(const void *x, const void *y)
{
    return strcmp(((const named *)x)->name, ((const named *)y)->name);
}

/* The site named name, 0 if none (by: the sites sorted by name). */
static uint32_t find_site(const named *by, size_t n, const char *name)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(by[mid].name, name);
        if (!c) return by[mid].site;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

static int acc_finish(gm_site_acc *c)
{
    size_t n = c->tally.n, ns = c->sites.n < n ? c->sites.n : n - 1;
    free(c->incl);
    c->incl = calloc(n, sizeof *c->incl);
    named *by = malloc((ns ? ns : 1) * sizeof *by);
    uint32_t *seen = calloc(n, sizeof *seen);
    char *name = malloc(GM_SITE_STACK_MAX);
    int rc = c->incl && by && seen && name ? GM_OK : GM_ENOMEM;
    for (uint32_t s = 1; rc == GM_OK && s <= ns; s++)
        by[s - 1] = (named){c->sites.rows[s - 1].name, s};
    if (rc == GM_OK) {
        qsort(by, ns, sizeof *by, cmp_name);
        c->incl[0] = (int64_t)c->abb[0] - (int64_t)c->fbb[0];
    }
    for (uint32_t t = 1; rc == GM_OK && t <= ns; t++) {
        int64_t self = (int64_t)c->abb[t] - (int64_t)c->fbb[t];
        c->incl[t] += self; /* its own frame, whether or not its stack shows it */
        seen[t] = t;
        for (const char *p = c->sites.rows[t - 1].stack; *p;) {
            const char *nl = strchr(p, '\n');
            size_t len = nl ? (size_t)(nl - p) : strlen(p);
            frame_name(p, len, name, GM_SITE_STACK_MAX);
            uint32_t s = find_site(by, ns, name);
            if (s && seen[s] != t) { /* a frame counts once per stack (recursion) */
                seen[s] = t;
                c->incl[s] += self;
            }
            p += len + (nl ? 1 : 0);
        }
    }
    free(by);
    free(seen);
    free(name);
    return rc;
}

int gm_top_sites_finish(gm_top_sites *ts)
{
    for (size_t i = 0; i < ts->n; i++)
        if (acc_finish(&ts->t[i]) != GM_OK) return GM_ENOMEM;
    return GM_OK;
}

/* ------------------------------------------------------------ rows */

gm_site_row gm_top_sites_row(const gm_top_sites *ts, size_t tenant, uint32_t s)
{
    const gm_site_acc *c = &ts->t[tenant];
    gm_site_row r = {.site = s};
    if (s >= c->tally.n) return r;
    r.alloc_count = c->ac[s];
    r.alloc_bytes = c->ab[s];
    r.free_count = c->fc[s];
    r.freed_bytes = c->fb[s];
    r.alloc_block_bytes = c->abb[s];
    r.freed_block_bytes = c->fbb[s];
    r.peak_bytes = c->tally.pbytes[s];
    r.peak_count = c->tally.pcount[s];
    r.cuda_mem = c->incl ? c->incl[s] : gm_site_row_self(&r);
    return r;
}

static int64_t key_of(const gm_site_row *r, int order)
{
    switch (order) {
    case GM_SITE_BY_PEAK:
        return (int64_t)r->peak_bytes;
    case GM_SITE_BY_SELF:
        return gm_site_row_self(r);
    case GM_SITE_BY_CUDA_MEM:
        return r->cuda_mem;
    default:
        return (int64_t)r->alloc_bytes;
    }
}

/* a ranks before b: larger key, then lower site. */
static int before(const gm_site_row *a, const gm_site_row *b, int order)
{
    int64_t x = key_of(a, order), y = key_of(b, order);
    return x != y ? x > y : a->site < b->site;
}

size_t gm_top_sites_rows(const gm_top_sites *ts, size_t tenant, int order, gm_site_row *out,
                         size_t k)
{
    const gm_site_acc *c = &ts->t[tenant];
    size_t m = 0;
    for (uint32_t s = 1; s < c->tally.n; s++) {
        if (!c->ac[s] && !c->tally.pcount[s]) continue;
        gm_site_row r = gm_top_sites_row(ts, tenant, s);
        if (m == k && (k == 0 || !before(&r, &out[k - 1], order))) continue;
        size_t j = m < k ? m++ : k - 1;
        while (j > 0 && before(&r, &out[j - 1], order)) { /* insertion: k is small */
            out[j] = out[j - 1];
            j--;
        }
        out[j] = r;
    }
    return m;
}
