/* addrmap.c - see addrmap.h. */
#include "addrmap.h"

#include <stdlib.h>
#include <string.h>

#include "err.h"

int gm_addrmap_init(gm_addrmap *m, size_t cap)
{
    size_t n = 16;
    while (n < cap * 2)
        n <<= 1;
    m->slots = calloc(n, sizeof *m->slots);
    if (!m->slots) return GM_ENOMEM;
    m->mask = n - 1;
    m->count = 0;
    return GM_OK;
}

void gm_addrmap_free(gm_addrmap *m)
{
    free(m->slots);
    m->slots = NULL;
    m->mask = 0;
    m->count = 0;
}

void gm_addrmap_clear(gm_addrmap *m)
{
    memset(m->slots, 0, (m->mask + 1) * sizeof *m->slots);
    m->count = 0;
}

static void insert_nogrow(gm_addrmap *m, uint64_t key, uint64_t val)
{
    size_t i = gm_addrmap_hash(key) & m->mask;
    while (m->slots[i].key)
        i = (i + 1) & m->mask;
    m->slots[i].key = key;
    m->slots[i].val = val;
    m->count++;
}

static int grow(gm_addrmap *m)
{
    gm_addrmap bigger;
    size_t n = (m->mask + 1) * 2;
    bigger.slots = calloc(n, sizeof *bigger.slots);
    if (!bigger.slots) return GM_ENOMEM;
    bigger.mask = n - 1;
    bigger.count = 0;
    for (size_t i = 0; i <= m->mask; i++)
        if (m->slots[i].key) insert_nogrow(&bigger, m->slots[i].key, m->slots[i].val);
    free(m->slots);
    *m = bigger;
    return GM_OK;
}

int gm_addrmap_put(gm_addrmap *m, uint64_t key, uint64_t val)
{
    /* keep the load factor at or below 1/2: probes stay short */
    if ((m->count + 1) * 2 > m->mask + 1 && grow(m) != GM_OK) return GM_ENOMEM;
    insert_nogrow(m, key, val);
    return GM_OK;
}

int gm_addrmap_del(gm_addrmap *m, uint64_t key, uint64_t *val)
{
    size_t i = gm_addrmap_hash(key) & m->mask;
    for (;;) {
        if (m->slots[i].key == 0) return 0;
        if (m->slots[i].key == key) break;
        i = (i + 1) & m->mask;
    }
    if (val) *val = m->slots[i].val;
    /* backward-shift deletion: pull later members of the probe run into the hole */
    size_t hole = i;
    size_t j = i;
    for (;;) {
        j = (j + 1) & m->mask;
        if (m->slots[j].key == 0) break;
        size_t home = gm_addrmap_hash(m->slots[j].key) & m->mask;
        /* move j into hole if its home is not cyclically in (hole, j] */
        int in_range = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (!in_range) {
            m->slots[hole] = m->slots[j];
            hole = j;
        }
    }
    m->slots[hole].key = 0;
    m->slots[hole].val = 0;
    m->count--;
    return 1;
}
