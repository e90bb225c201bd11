/* site_tally.c - see site_tally.h. */
#include "site_tally.h"

#include <stdlib.h>
#include <string.h>

int gm_site_tally_init(gm_site_tally *t, uint64_t n_sites)
{
    memset(t, 0, sizeof *t);
    if (n_sites > GM_TRACE_MAX_TABLE_ROWS) n_sites = GM_TRACE_MAX_TABLE_ROWS;
    t->n = (size_t)n_sites + 1;
    t->bytes = calloc(t->n, sizeof *t->bytes);
    t->count = calloc(t->n, sizeof *t->count);
    t->pbytes = calloc(t->n, sizeof *t->pbytes);
    t->pcount = calloc(t->n, sizeof *t->pcount);
    t->dirty = calloc(t->n, sizeof *t->dirty);
    t->is_dirty = calloc(t->n, 1);
    if (!t->bytes || !t->count || !t->pbytes || !t->pcount || !t->dirty || !t->is_dirty ||
        gm_addrmap_init(&t->live, 1024)) {
        gm_site_tally_free(t);
        return GM_ENOMEM;
    }
    return GM_OK;
}

void gm_site_tally_free(gm_site_tally *t)
{
    free(t->bytes);
    free(t->count);
    free(t->pbytes);
    free(t->pcount);
    free(t->dirty);
    free(t->is_dirty);
    gm_addrmap_free(&t->live);
    memset(t, 0, sizeof *t);
}

static void touch(gm_site_tally *t, uint32_t s)
{
    if (t->is_dirty[s]) return;
    t->is_dirty[s] = 1;
    t->dirty[t->ndirty++] = s;
}

int gm_site_tally_add(gm_site_tally *t, uint64_t addr, uint64_t size, uint32_t site)
{
    if (site >= t->n) site = 0;
    uint64_t key = gm_addrmap_key(addr);
    if (t->live.count) /* (empty in a trace without sites: nothing to look up) */
        gm_addrmap_del(&t->live, key, NULL); /* callers drop a live address first; never twice */
    if (site && gm_addrmap_put(&t->live, key, site)) return GM_ENOMEM;
    touch(t, site);
    t->bytes[site] += size;
    t->count[site]++;
    return GM_OK;
}

void gm_site_tally_drop(gm_site_tally *t, uint64_t addr, uint64_t size)
{
    uint64_t s = 0;
    if (t->live.count) gm_addrmap_del(&t->live, gm_addrmap_key(addr), &s);
    if (s >= t->n) s = 0;
    touch(t, (uint32_t)s);
    t->bytes[s] -= size < t->bytes[s] ? size : t->bytes[s];
    t->count[s] -= t->count[s] ? 1 : 0;
}

void gm_site_tally_peak(gm_site_tally *t)
{
    for (size_t i = 0; i < t->ndirty; i++) {
        uint32_t s = t->dirty[i];
        t->pbytes[s] = t->bytes[s];
        t->pcount[s] = t->count[s];
        t->is_dirty[s] = 0;
    }
    t->ndirty = 0;
}

size_t gm_site_tally_top(const gm_site_tally *t, int peak, gm_site_live *out, size_t k)
{
    const uint64_t *b = peak ? t->pbytes : t->bytes, *c = peak ? t->pcount : t->count;
    size_t m = 0;
    for (size_t s = 1; s < t->n; s++) {
        if (!c[s]) continue;
        size_t j = m < k ? m++ : k;
        if (j == k && (k == 0 || b[s] <= out[k - 1].bytes)) continue;
        if (j == k) j = k - 1;
        while (j > 0 && out[j - 1].bytes < b[s]) { /* insertion: k is small */
            out[j] = out[j - 1];
            j--;
        }
        out[j] = (gm_site_live){(uint32_t)s, b[s], c[s]};
    }
    return m;
}
