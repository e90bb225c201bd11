/* pressure.c - see pressure.h. */
#include "pressure.h"

#include <stdlib.h>

uint64_t gm_pressure_need(const gm_alloc *a, const gm_pressure *p)
{
    gm_device *d = a->dev;
    uint64_t cap = gm_device_capacity(d); /* (a quota's refusal is not the device's) */
    uint64_t want = gm_device_round(p->alloc_size), need = 0;
    uint64_t used = d->used_bytes + d->overhead_bytes;
    uint64_t avail = cap > used ? cap - used : 0;
    if (want > avail)
        need = want - avail;
    else
        gm_device_found_room(d); /* the device's part is 0, with any fewer tenants too */
    uint64_t lim = a->limits.memory_limit;
    if (lim && a->c.reserved_bytes + p->alloc_size > lim) {
        uint64_t over = a->c.reserved_bytes + p->alloc_size - lim;
        need = over > need ? over : need;
    }
    return need ? need : (p->alloc_size ? p->alloc_size : 1);
}

uint64_t gm_pressure_over(const gm_alloc *a, double frac, uint64_t incoming)
{
    if (frac <= 0) return 0;
    uint64_t over = 0;
    uint64_t lim = a->limits.memory_limit;
    if (lim) {
        uint64_t thr = (uint64_t)(frac * (double)lim);
        if (a->c.reserved_bytes + incoming > thr) over = a->c.reserved_bytes + incoming - thr;
    }
    gm_device *d = a->dev;
    uint64_t thr = (uint64_t)(frac * (double)gm_device_capacity(d));
    uint64_t used = d->used_bytes + d->overhead_bytes + incoming;
    if (used > thr && used - thr > over)
        over = used - thr;
    else
        gm_device_found_room(d); /* the device's part decides nothing, with fewer tenants too */
    return over;
}

int gm_threshold_inert(const char *params, const gm_alloc_limits *limits)
{
    (void)limits;
    char v[64];
    double f = 0;
    gm_err err = {0};
    if (!gm_policy_param(params, "threshold", v, sizeof v)) return 1;
    return gm_parse_double(v, "threshold", 0.0, 1.0, &f, &err) == GM_OK && f <= 0;
}

void gm_seg_sort(gm_seg_info *v, size_t n, int (*cmp)(const void *, const void *))
{
    if (n < 2) return;
    /* a view often comes in order, or in reverse (segments() lists the
     * newest first, and the simulated driver's addresses grow): O(n) then.
     * The orders policies use are total (ties go to the address), so any
     * sort gives the same result. */
    size_t i = 1;
    while (i < n && cmp(&v[i - 1], &v[i]) < 0)
        i++;
    if (i == n) return;
    if (i == 1) {
        while (i < n && cmp(&v[i - 1], &v[i]) > 0)
            i++;
        if (i == n) {
            for (size_t lo = 0, hi = n - 1; lo < hi; lo++, hi--) {
                gm_seg_info x = v[lo];
                v[lo] = v[hi];
                v[hi] = x;
            }
            return;
        }
    }
    if (n > 1) qsort(v, n, sizeof *v, cmp);
}

/* Oldest last use first; ties by address, so runs are deterministic. */
int gm_seg_cmp_lru(const void *x, const void *y)
{
    const gm_seg_info *a = x, *b = y;
    if (a->last_use_ns != b->last_use_ns) return a->last_use_ns < b->last_use_ns ? -1 : 1;
    return a->addr < b->addr ? -1 : a->addr > b->addr;
}

static int cmp_addr(const void *x, const void *y)
{
    const gm_seg_info *a = x, *b = y;
    return a->addr < b->addr ? -1 : a->addr > b->addr;
}

/* The snapshot entry for addr in l (sorted by address), or NULL. */
static const gm_seg_info *find_addr(const gm_seglist *l, uint64_t addr)
{
    size_t lo = 0, hi = l->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (l->v[mid].addr < addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < l->n && l->v[lo].addr == addr ? &l->v[lo] : NULL;
}

uint64_t gm_release_in_order(gm_alloc *a, gm_seglist *l, const uint64_t *addrs, size_t n,
                             uint64_t need, uint64_t now_ns, uint64_t *got_each)
{
    uint64_t released = 0;
    if (got_each)
        for (size_t i = 0; i < n; i++)
            got_each[i] = 0;
    /* l in the order given: the policy's ranked copy of the view */
    int ranked = l->n >= n;
    for (size_t i = 0; i < n && ranked; i++)
        ranked = l->v[i].addr == addrs[i];
    if (!ranked) {
        if (gm_seglist_fetch(l, a) != GM_OK) return 0;
        gm_seg_sort(l->v, l->n, cmp_addr);
    }
    for (size_t i = 0; i < n && released < need; i++) {
        const gm_seg_info *s = ranked ? &l->v[i] : find_addr(l, addrs[i]);
        if (!s || !s->releasable) continue;
        uint64_t got = gm_alloc_release(a, s->id, now_ns);
        if (got_each) got_each[i] = got;
        released += got;
    }
    return released;
}

uint64_t gm_release_all(gm_alloc *a, uint64_t now_ns)
{
    a->c.n_cache_flushes++;
    return a->ops->empty_cache(a, now_ns);
}

static int keep_releasable(const gm_seg_info *s, const void *ctx)
{
    (void)ctx;
    return s->releasable > 0;
}

void gm_seglist_keep_releasable(gm_seglist *l)
{
    gm_seglist_filter(l, keep_releasable, NULL);
}

int gm_addr_list_from(gm_addr_list *o, const gm_seglist *l)
{
    if (l->n > o->cap) {
        uint64_t *v = realloc(o->v, l->n * sizeof *v);
        if (!v) return GM_ENOMEM;
        o->v = v;
        o->cap = l->n;
    }
    for (size_t i = 0; i < l->n; i++)
        o->v[i] = l->v[i].addr;
    o->n = l->n;
    return GM_OK;
}

void gm_addr_list_free(gm_addr_list *o)
{
    free(o->v);
    o->v = NULL;
    o->n = o->cap = 0;
}

uint64_t gm_release_lru(gm_alloc *a, gm_seglist *l, gm_addr_list *order, uint64_t need,
                        uint64_t now_ns)
{
    if (gm_seglist_fetch_releasable(l, a) != GM_OK) return 0;
    gm_seg_sort(l->v, l->n, gm_seg_cmp_lru);
    if (gm_addr_list_from(order, l) != GM_OK) return 0;
    return gm_release_in_order(a, l, order->v, order->n, need, now_ns, NULL);
}

int gm_lru_fail_chain(gm_alloc *a, const gm_pressure *pr, gm_seglist *l, gm_addr_list *order,
                      uint64_t *fail_releases, uint64_t *fail_bytes, uint64_t *flushes)
{
    if (pr->attempt == 0) {
        uint64_t need = gm_pressure_need(a, pr);
        uint64_t got = gm_release_lru(a, l, order, need, pr->now_ns);
        if (fail_releases) *fail_releases += got > 0;
        *fail_bytes += got;
        return got >= need ? GM_POLICY_RETRY : GM_POLICY_NEXT;
    }
    if (pr->attempt == 1) {
        (*flushes)++;
        gm_release_all(a, pr->now_ns);
        return GM_POLICY_RETRY;
    }
    return GM_POLICY_GIVE_UP;
}
