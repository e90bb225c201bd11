/* event_ids.c - see event_ids.h. */
#include "event_ids.h"

#include <stdlib.h>

int gm_ids_init(gm_ids *m)
{
    m->free = NULL;
    m->n_free = m->cap_free = 0;
    m->next = 0;
    return gm_addrmap_init(&m->live, 1024);
}

void gm_ids_free(gm_ids *m)
{
    gm_addrmap_free(&m->live);
    free(m->free);
    m->free = NULL;
    m->n_free = m->cap_free = 0;
}

static int64_t take(gm_ids *m, uint64_t key)
{
    uint32_t slot;
    if (m->n_free)
        slot = m->free[--m->n_free];
    else if (m->next < UINT32_MAX)
        slot = ++m->next;
    else
        return 0; /* no slot left: paired by address */
    return gm_addrmap_put(&m->live, key, slot) ? -1 : (int64_t)slot;
}

static int64_t give(gm_ids *m, uint64_t key)
{
    uint64_t slot;
    if (!gm_addrmap_del(&m->live, key, &slot)) return 0;
    if (m->n_free == m->cap_free) {
        size_t cap = m->cap_free ? 2 * m->cap_free : 256;
        uint32_t *v = realloc(m->free, cap * sizeof *v);
        if (!v) return -1;
        m->free = v;
        m->cap_free = cap;
    }
    m->free[m->n_free++] = (uint32_t)slot;
    return (int64_t)slot;
}

int64_t gm_ids_next(gm_ids *m, const gm_event *e)
{
    uint64_t key = gm_addrmap_key(e->addr);
    const uint64_t *slot;
    switch (e->op) {
    case GM_OP_ALLOC:
        slot = gm_addrmap_get(&m->live, key);
        return slot ? (int64_t)*slot : take(m, key);
    case GM_OP_FREE:
        return give(m, key);
    case GM_OP_FREE_REQUESTED:
        slot = gm_addrmap_get(&m->live, key);
        return slot ? (int64_t)*slot : 0;
    default:
        return 0;
    }
}

int gm_ids_seed(gm_ids *m, const gm_init_row *init, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const gm_event e = {.op = GM_OP_ALLOC, .addr = init[i].addr};
        if (init[i].kind == GM_INIT_BLOCK && gm_ids_next(m, &e) < 0) return GM_ENOMEM;
    }
    return GM_OK;
}

int gm_ids_assign(gm_event *ev, size_t n, gm_err *err)
{
    return gm_ids_assign_seeded(ev, n, NULL, 0, err);
}

int gm_ids_assign_seeded(gm_event *ev, size_t n, const gm_init_row *init, size_t n_init,
                         gm_err *err)
{
    gm_ids m;
    if (gm_ids_init(&m)) return gm_errf(err, GM_ENOMEM, "out of memory numbering allocations");
    if (gm_ids_seed(&m, init, n_init)) {
        gm_ids_free(&m);
        return gm_errf(err, GM_ENOMEM, "out of memory numbering allocations");
    }
    for (size_t i = 0; i < n; i++) {
        int64_t id = gm_ids_next(&m, &ev[i]);
        if (id < 0) {
            gm_ids_free(&m);
            return gm_errf(err, GM_ENOMEM, "out of memory numbering allocations");
        }
        ev[i].id = (uint32_t)id;
    }
    gm_ids_free(&m);
    return GM_OK;
}
