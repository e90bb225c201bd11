/*
 * preload.h - a study that simulates the same traces many times (tune's
 * 120 settings, fit's bisection, compare's policies) reads each trace once:
 * its events and /initial_state go into memory through the (isolated,
 * checked) reader, and every run replays them from there. Their trace
 * hash is computed here once (gm_tenant_spec.trace_hash), not by each run.
 *
 * Why: each gm_trace_open starts the reader's sandboxed child process
 * (traces/FORMAT.md, "Isolation"), ~10 ms of CPU; 140 runs of a 20 k-event
 * trace spent more time opening than simulating. A trace above max_events
 * stays on disk (its runs take long enough that one open does not count,
 * and memory stays bounded: 40 B per event).
 */
#ifndef GM_PRELOAD_H
#define GM_PRELOAD_H

#include <stddef.h>

#include "sim/engine.h"

/* Events of one trace kept in memory at most (~80 MB). */
#define GM_PRELOAD_MAX_EVENTS (2u << 20)

typedef struct gm_preload {
    gm_tenant_spec *tenants; /* the config's tenants, the small ones in memory */
    size_t n;
    struct gm_preload_trace *own; /* per tenant: what it holds (NULL: on disk) */
} gm_preload;

/* Fill p from cfg's tenants and point cfg->tenants at p->tenants. A trace
 * that cannot be read is left on disk: the run then reports its error as
 * before. GM_ENOMEM only when the copies cannot be made. */
int gm_preload_config(gm_sim_config *cfg, gm_preload *p, size_t max_events, gm_err *err);
void gm_preload_free(gm_preload *p);

#endif
