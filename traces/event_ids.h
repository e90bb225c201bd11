/*
 * event_ids.h - dense allocation ids (FORMAT.md, column `id` of /events).
 *
 * Each allocation is given a small integer, its live slot, once, when the
 * trace is written (or, for an in-memory trace, before it is replayed), so
 * that the engine finds a live allocation by indexing an array instead of
 * hashing its address on every event. The slot follows the address exactly
 * as the engine's address map would (sim/engine.c), so a replay by id and
 * one by address make the same pairs:
 *
 *   alloc          an address not live takes a free slot (the most recently
 *                  freed one first: it is warm in the engine's caches), else
 *                  slots 1, 2, ...; an address still live keeps its slot
 *                  (a missing free: the engine repairs it or refuses it)
 *   free           the address's slot, which becomes free; 0 when it is not
 *                  live (a block from /initial_state, or a bad free: the
 *                  engine then goes by address)
 *   free_requested the address's slot, or 0
 *   anything else  0
 *
 * Seeded (FORMAT.md, id_scheme "gmsim-live-slot/2"): the blocks of
 * /initial_state, in table order, are numbered before the first event as
 * allocations would be (gm_ids_seed): slots 1..B when their addresses
 * differ, so the frees of pre-existing blocks carry their slot too and a
 * replay keeps them by id as well.
 *
 * Slots stop at 2^32 - 1 live allocations; past that an allocation gets 0
 * and is paired by address. Memory: O(live allocations).
 */
#ifndef GM_EVENT_IDS_H
#define GM_EVENT_IDS_H

#include <stddef.h>
#include <stdint.h>

#include "trace.h"
#include "base/addrmap.h"
#include "base/err.h"

typedef struct gm_ids {
    gm_addrmap live; /* address key -> slot */
    uint32_t *free;  /* freed slots, the last freed on top */
    size_t n_free, cap_free;
    uint32_t next; /* slots handed out so far */
} gm_ids;

int gm_ids_init(gm_ids *m); /* GM_OK or GM_ENOMEM */
void gm_ids_free(gm_ids *m);
/* The id of event e (the next in trace order), or -1 when out of memory. */
int64_t gm_ids_next(gm_ids *m, const gm_event *e);
/* The block rows of init (n rows of /initial_state, in order), numbered
 * before the first event as allocations at their addresses: GM_OK, or
 * GM_ENOMEM. Segment rows take no slot. */
int gm_ids_seed(gm_ids *m, const gm_init_row *init, size_t n);
/* Set the id of every event of an in-memory trace, in order. */
int gm_ids_assign(gm_event *ev, size_t n, gm_err *err);
/* The same, seeded with the block rows of init (n_init rows of
 * /initial_state, in order) as gmsim's writer seeds a trace it writes
 * with its initial state first (meta dense_ids 2). */
int gm_ids_assign_seeded(gm_event *ev, size_t n, const gm_init_row *init, size_t n_init,
                         gm_err *err);

#endif
