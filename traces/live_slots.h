/*
 * live_slots.h - a trace's live allocations, found as a replay pairs them:
 * by the events' ids where the trace says its ids pair allocations as
 * their addresses do (trace.h, gm_trace_meta.dense_ids; FORMAT.md, `id`),
 * else by address. For the readers of a trace's events in order that keep
 * something per live allocation (the scan, the leak analysis, the
 * allocations chart): an array indexed by id costs a load where an address
 * map costs a hash and a probe, on every alloc and free.
 *
 * The same answers as an address map keyed by the events' addresses:
 *  - an id pairs an alloc with its free as their address does, and an
 *    alloc at an address still live keeps its slot (event_ids.h), so a
 *    slot holds what the address map would hold at that address; each slot
 *    keeps its address and is taken only for it (the reader's dense_ids is
 *    a hint: trace_isolate.c);
 *  - what has no slot is kept by address: events of id 0, the blocks of
 *    /initial_state unless the trace is seeded (dense_ids 2) with distinct
 *    block addresses (then block k of the table holds slot k, as the
 *    writer numbered it), and any id past what the events so far can have
 *    handed out (no valid one is: a slot is taken only by an allocation or
 *    a seeded block), so the table never outgrows the events read, even
 *    with damaged ids;
 *  - a look-up by id that finds no slot for the address asks the address
 *    map (a free of a block of /initial_state carries slot k, or 0).
 * Values are the caller's; 0 is not one.
 */
#ifndef GM_LIVE_SLOTS_H
#define GM_LIVE_SLOTS_H

#include <stddef.h>
#include <stdint.h>

#include "trace.h"
#include "base/addrmap.h"

typedef struct gm_live_slot {
    uint64_t addr, val; /* val 0: free */
} gm_live_slot;

typedef struct gm_live {
    int ids;         /* pair by id (a trace's dense_ids), else by address only */
    gm_live_slot *s; /* by id */
    size_t cap;
    uint64_t bound;  /* ids above it are taken by address: the most slots handed out so far */
    gm_addrmap addr; /* everything without a slot */
    size_t count;    /* live entries, by id and by address */
    int seeded;      /* gm_live_seeded: block k of /initial_state holds slot k */
} gm_live;

/* GM_OK or GM_ENOMEM. dense_ids: the trace's (0: by address). */
int gm_live_init(gm_live *l, int dense_ids);
void gm_live_free(gm_live *l);
void gm_live_clear(gm_live *l);

/* The blocks of /initial_state (its n rows, in table order) hold slots
 * 1..B when the trace is seeded and the blocks' addresses differ: 1 then
 * (l->seeded; the bound is raised by the blocks), else 0 (by address).
 * Call once, before the events. */
int gm_live_seeded(gm_live *l, const gm_init_row *rows, size_t n);

/* The id of the next block row of /initial_state, *k counting them from 0
 * (set it to 0 before the first): its slot when seeded, else 0. */
static inline uint32_t gm_live_block_id(const gm_live *l, uint32_t *k)
{
    return l->seeded ? ++*k : 0;
}

/* One more allocation read (an alloc event): raises the bound by one.
 * Call it for each alloc, before its put. */
static inline void gm_live_count_alloc(gm_live *l)
{
    l->bound++;
}

/* The value live at (id, addr), or NULL. */
uint64_t *gm_live_get(gm_live *l, uint32_t id, uint64_t addr);
/* Remove what is live at (id, addr): 1 and its value into *val (if val),
 * else 0. */
int gm_live_del(gm_live *l, uint32_t id, uint64_t addr, uint64_t *val);
/* Make (id, addr) live with val (not 0), nothing being live there:
 * GM_OK or GM_ENOMEM. */
int gm_live_put(gm_live *l, uint32_t id, uint64_t addr, uint64_t val);

#endif
