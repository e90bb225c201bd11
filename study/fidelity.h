/*
 * fidelity.h - how faithfully the `pytorch` allocator model reproduces a real
 * PyTorch run: replay a trace's tensor events (alloc/free) through the model,
 * from its /initial_state, and compare the model's driver calls with the
 * recorded allocator's own segment_alloc / segment_free rows.
 *
 * The replay starts from the recorded initial state (--initial-state
 * recorded: the recorded allocator's cache included), on a device of the
 * memory the recorded process had (device_avail_bytes, inferred from its
 * release-and-retry bursts and oom entries), else the trace's device, else
 * 1 TiB, with no context overhead, and replays empty_cache and oom events.
 *
 * Alignment: every call is attributed to the trace event that caused it. A
 * model call is reported by the engine's seg_hook with the index of the event
 * being replayed; a recorded segment row (segment_alloc / free / map /
 * unmap) is attributed to the next alloc, free, empty_cache or oom event
 * after it (PyTorch records segment_alloc just before the alloc that needed
 * it, SNAPSHOTS.md rule 6; the importer writes empty_cache after the
 * releases it caused). Calls of the same event are matched in order by (op,
 * size); the rest are missing (PyTorch made them, the model did not) or
 * extra (the model made them, PyTorch did not). Reserved bytes over time
 * follow each side's calls from the same initial reserve. Each divergence
 * is given its likely cause (empty_cache, device full, oom, unknown).
 *
 * OOMs: an oom event is an allocation PyTorch could not make; the model
 * must fail it too, and fail nothing else.
 *
 * Addresses: PyTorch's best fit breaks size ties by address, so the check
 * runs on a simulated GPU that hands the model the recorded addresses: while
 * the initial state is rebuilt, the initial segments' (in address order, as
 * the model restores them); then, for a cudaMalloc (or a new expandable
 * segment's address range) during event k, the address of an unclaimed
 * segment_alloc (segment_map) of the same size recorded for event k, a fresh
 * one otherwise. Keyed by event, a divergence costs only the events it
 * touches: later ones still get PyTorch's addresses, so the placement figure
 * stays meaningful after one. `fresh_addresses` turns this off.
 *
 * Block placement: with the recorded addresses, a model that decides as
 * PyTorch did puts every tensor at the address PyTorch recorded for it (the
 * alloc event's addr). Each successful allocation of the replay is checked
 * (engine alloc_hook, gm_alloc_ops.block_addr); the first one elsewhere is
 * kept with the segments both addresses lie in. Not checked with
 * fresh_addresses (the addresses differ by construction).
 */
#ifndef GM_FIDELITY_H
#define GM_FIDELITY_H

#include <stddef.h>
#include <stdint.h>

#include "base/units.h"

/* Default device size: snapshots do not record it; big enough never to OOM. */
#define GM_FIDELITY_CAPACITY (1024ull * GM_GiB)

typedef struct gm_fid_call {
    uint64_t event_index; /* the trace event it is attributed to */
    uint64_t size;
    uint64_t addr;   /* recorded address, or the model's */
    uint8_t op;      /* GM_OP_SEGMENT_ALLOC / GM_OP_SEGMENT_FREE */
    uint8_t matched; /* paired with a call of the other side */
} gm_fid_call;

/* Where an address lies: the model segment containing it (seg_addr 0: none). */
typedef struct gm_fid_where {
    uint64_t addr, seg_addr, seg_size;
} gm_fid_where;

typedef struct gm_fidelity_opts {
    uint64_t capacity_bytes; /* 0: the trace's device_avail_bytes, else its device_total_bytes,
                                else GM_FIDELITY_CAPACITY */
    const char *alloc_conf;  /* NULL: the trace's recorded settings */
    int fresh_addresses;     /* 1: do not hand the model the recorded addresses */
} gm_fidelity_opts;

/* Likely cause of a divergence (gm_fidelity.div_cause). */
enum gm_fid_cause {
    GM_FID_CAUSE_UNKNOWN = 0, /* the model chose differently              */
    GM_FID_CAUSE_EMPTY_CACHE, /* at an empty_cache event                   */
    GM_FID_CAUSE_DEVICE_FULL, /* PyTorch released and retried; the model had room */
    GM_FID_CAUSE_MODEL_FULL,  /* the model released or failed; PyTorch had room */
    GM_FID_CAUSE_OOM,         /* at an allocation PyTorch could not make   */
};
const char *gm_fid_cause_text(int cause);

typedef struct gm_fidelity {
    uint64_t n_events;
    uint64_t capacity_bytes;
    char capacity_source[160];     /* where capacity_bytes came from */
    uint64_t avail_min, avail_max; /* the trace's device window (0: none) */
    char alloc_conf[256];
    int fresh_addresses;
    uint64_t init_segments, init_reserved; /* /initial_state segments (expandable: mapped) */
    uint64_t init_expandable;              /* of which expandable                 */
    uint64_t model_init_calls;             /* driver calls the model's restore made */
    gm_fid_call *rec, *ours;               /* recorded and model calls, in order */
    size_t n_rec, n_ours;
    uint64_t matched, missing, extra;
    int diverged;       /* 1: some event has an unmatched call     */
    uint64_t div_event; /* the first such event                    */
    uint8_t div_op;     /* its op and size (for the message)       */
    uint64_t div_size;
    int div_cause;             /* enum gm_fid_cause                        */
    uint64_t max_reserved_err; /* max |recorded reserved - model reserved| */
    uint64_t max_err_event;    /* where (UINT64_MAX: before event 0)       */
    uint64_t model_ooms;       /* allocations the model could not satisfy  */
    uint64_t rec_ooms;         /* oom events: allocations PyTorch could not make */
    uint64_t oom_fits;         /* ... of which the model made (a mismatch) */
    uint64_t empty_caches;     /* empty_cache events replayed              */
    /* block placement (only when placement_checked: recorded addresses) */
    int placement_checked;
    uint64_t placed;      /* allocations the model made during the replay */
    uint64_t placed_same; /* of which at PyTorch's address              */
    int place_diverged;   /* 1: some allocation landed elsewhere        */
    uint64_t place_event; /* the first such: trace event index          */
    uint64_t place_size;  /* its requested bytes                        */
    gm_fid_where place_ours, place_theirs;
} gm_fidelity;

/* Replay the trace at path and compare. out is filled (gm_fidelity_free it)
 * on GM_OK; on error err says why. */
int gm_fidelity_check(const char *path, const gm_fidelity_opts *opts, gm_fidelity *out,
                      gm_err *err);
void gm_fidelity_free(gm_fidelity *f);

/* 1 when the model made exactly PyTorch's calls and, where checked, put
 * every allocation at PyTorch's address. */
static inline int gm_fidelity_exact(const gm_fidelity *f)
{
    return f->missing == 0 && f->extra == 0 && !f->place_diverged && f->oom_fits == 0 &&
           f->model_ooms == f->rec_ooms;
}

#endif
