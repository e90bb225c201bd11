/* live_slots.c - see live_slots.h. */
#include "live_slots.h"

#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/table.h"

int gm_live_init(gm_live *l, int dense_ids)
{
    memset(l, 0, sizeof *l);
    l->ids = dense_ids;
    return gm_addrmap_init(&l->addr, 4096) == GM_OK ? GM_OK : GM_ENOMEM;
}

void gm_live_free(gm_live *l)
{
    free(l->s);
    gm_addrmap_free(&l->addr);
    memset(l, 0, sizeof *l);
}

void gm_live_clear(gm_live *l)
{
    if (l->s) memset(l->s, 0, l->cap * sizeof *l->s);
    l->bound = 0;
    l->count = 0;
    l->seeded = 0;
    gm_addrmap_clear(&l->addr);
}

static int cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}

int gm_live_seeded(gm_live *l, const gm_init_row *rows, size_t n)
{
    if (l->ids != 2) return 0;
    size_t b = 0;
    for (size_t i = 0; i < n; i++)
        b += rows[i].kind == GM_INIT_BLOCK;
    if (!b || b >= UINT32_MAX) return 0;
    uint64_t *a = malloc(b * sizeof *a);
    if (!a) return 0; /* by address: the same answers */
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (rows[i].kind == GM_INIT_BLOCK) a[k++] = rows[i].addr;
    qsort(a, b, sizeof *a, cmp_u64);
    int distinct = 1;
    for (size_t i = 1; i < b && distinct; i++)
        distinct = a[i] != a[i - 1];
    free(a);
    if (distinct) l->bound += b;
    l->seeded = distinct;
    return distinct;
}

/* The slot of (id, addr) when it has one, live or not; NULL when it is
 * kept by address. */
static inline gm_live_slot *slot_of(const gm_live *l, uint32_t id)
{
    if (!l->ids || !id || id > l->bound || id >= l->cap) return NULL;
    return &l->s[id];
}

uint64_t *gm_live_get(gm_live *l, uint32_t id, uint64_t addr)
{
    gm_live_slot *s = slot_of(l, id);
    if (s && s->val && s->addr == addr) return &s->val;
    return l->addr.count ? gm_addrmap_get(&l->addr, gm_addrmap_key(addr)) : NULL;
}

int gm_live_del(gm_live *l, uint32_t id, uint64_t addr, uint64_t *val)
{
    gm_live_slot *s = slot_of(l, id);
    if (s && s->val && s->addr == addr) {
        if (val) *val = s->val;
        s->val = 0;
        l->count--;
        return 1;
    }
    if (!l->addr.count || !gm_addrmap_del(&l->addr, gm_addrmap_key(addr), val)) return 0;
    l->count--;
    return 1;
}

int gm_live_put(gm_live *l, uint32_t id, uint64_t addr, uint64_t val)
{
    if (l->ids && id && id <= l->bound) {
        /* room for it (bounded: ids past the bound go by address) */
        if (id >= l->cap && gm_table_room((void **)&l->s, &l->cap, id, sizeof *l->s))
            return GM_ENOMEM;
        gm_live_slot *s = &l->s[id];
        if (!s->val) { /* else taken for another address (a damaged id): by address */
            s->addr = addr;
            s->val = val;
            l->count++;
            return GM_OK;
        }
    }
    if (gm_addrmap_put(&l->addr, gm_addrmap_key(addr), val) != GM_OK) return GM_ENOMEM;
    l->count++;
    return GM_OK;
}
