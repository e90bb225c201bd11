/*
 * preload.h - a study that simulates the same traces many times (tune's
 * 120 settings, fit's bisection, compare's policies) reads each trace once:
 * its events and /initial_state go into memory through the (isolated,
 * checked) reader, and every run replays them from there. Their trace
 * hash is computed here once (gm_tenant_spec.trace_hash), not by each run.
 *
 * Why: each gm_trace_open starts the reader's sandboxed child process
 * (traces/FORMAT.md, "Isolation"), ~10 ms of CPU; 140 runs of a 20 k-event
 * trace spent more time opening than simulating.
 *
 * A trace above max_events (48 B an event as they are) is kept packed
 * (traces/packed.h: ~11 B an event, each run decoding it in ~5 ns an
 * event) when that fits in max_packed_bytes: read from the file, each of
 * its runs cost the reader process ~15-18 ns an event of decoding and this
 * one ~5 of copying and checking: ~30 % of `gmsim fit`'s CPU on 5 M
 * events (bench/README.md, "Twenty-third round"). A larger one stays on
 * disk: memory stays bounded (DESIGN §8: 256 MiB at 100 M events).
 */
#ifndef GM_PRELOAD_H
#define GM_PRELOAD_H

#include <stddef.h>

#include "sim/engine.h"

/* Events of one trace kept in memory as they are at most (96 MiB), and the
 * bytes a larger one may take packed (~9 M events of a BERT trace). */
#define GM_PRELOAD_MAX_EVENTS (2u << 20)
#define GM_PRELOAD_MAX_PACKED_BYTES (96ull << 20)

typedef struct gm_preload {
    gm_tenant_spec *tenants; /* the config's tenants, the small ones in memory */
    size_t n;
    struct gm_preload_trace *own; /* per tenant: what it holds (NULL: on disk) */
} gm_preload;

/* Fill p from cfg's tenants and point cfg->tenants at p->tenants: a
 * trace of up to max_events as it is, a larger one packed when that takes
 * at most max_packed_bytes (0: never); a path given again shares what the
 * first of its tenants holds. A trace that cannot be read is left
 * on disk: the run then reports its error as before. GM_ENOMEM only when
 * the copies cannot be made. */
int gm_preload_config(gm_sim_config *cfg, gm_preload *p, size_t max_events,
                      uint64_t max_packed_bytes, gm_err *err);
void gm_preload_free(gm_preload *p);

#endif
