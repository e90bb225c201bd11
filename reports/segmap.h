/*
 * segmap.h - the allocator's state as a segment map, for the page
 * (`run --html`, `compare --html`): the model's segments in address order,
 * each cut into its live blocks and free gaps, at chosen moments of a run.
 *
 * Moments (reports/README.md, "Segment maps"):
 *   peak   just after the event that took the device's reserved memory to
 *          its peak (what PyTorch users read: max_memory_reserved)
 *   oom    just after each of the first `max_ooms` failed allocations, with
 *          the failing request, its block size and pool, the largest free
 *          gap in the segments it could use (its pool and stream) and the
 *          job's free bytes; the rest counted
 *   at     the state at a time the user picked (`run --segments-at TIME`):
 *          before the first event at or after it
 * How: more simulations of the same run with the engine's observer hooks
 * (sim/engine.h), which ask the model for its segments
 * (gm_alloc_ops.segments) at the moments and place the live blocks it saw
 * allocated (block_addr, block_bytes): two with the zoom pyramid (the
 * first finds the peak and the OOMs it is centred on), else one, which
 * captures each new peak as it comes and keeps the last, and ends where
 * the run's result says the last peak and OOM are (hinted, below). A
 * tenant that ends gives its memory back: its bytes leave the device's
 * counts then, as they leave the device's series. Blocks narrower
 * than a row's resolution are merged with their neighbours into one "n
 * small blocks" item, coarser until a map has at most max_items items
 * (a segment keeps at least one, so max_rows bounds it too), whatever the
 * trace; at most max_rows segments are drawn (the largest), the others are
 * summed.
 */
#ifndef GM_SEGMAP_H
#define GM_SEGMAP_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "trace_stats.h"
#include "sim/engine.h"

typedef struct gm_segmap_opts {
    int at_given;     /* --segments-at given */
    uint64_t at_ns;   /* its time on the device timeline (trace time + offset) */
    size_t max_ooms;  /* maps at the first OOMs; 0 = none */
    size_t max_items; /* items (blocks, gaps, merged runs) per map */
    size_t max_rows;  /* segments drawn per map */
    int zoom;         /* also the zoom pyramid around the peak (below) */
    /* What the run being drawn reached, from its result (the device's peak
     * reserved bytes and OOM count), when known: a one-pass replay (no
     * zoom) ends once its peak equals hint_peak, that peak's map is taken
     * and it has counted hint_ooms OOMs. It can count no OOM the result
     * does not (an event's failed allocation is one in both; the result
     * also counts what the initial state could not hold), so nothing it
     * would have seen later is lost. 0 = not known: replay to the end. */
    int hinted;
    uint64_t hint_peak, hint_ooms;
    /* With the zoom pyramid, pass 1 (which finds the peak, the OOMs and the
     * span the windows are placed in) likewise ends at the last peak and
     * OOM when the result also gives the span: hint_end_ns, the device's
     * last time (the last event's, as the pass would find it, unless a
     * tenant without events started later: then hint_span is 0), and
     * hint_events, the events the run took (one per event the pass
     * watches). */
    int hint_span;
    uint64_t hint_end_ns, hint_events;
} gm_segmap_opts;

/* What res (a run's result, as gm_result_json makes it) says its run
 * reached, into o's hints (hinted, hint_span and theirs above); o's other
 * options are left as they are. */
void gm_segmap_hint(gm_segmap_opts *o, json_t *res);

/* The defaults for a run page (peak, 3 OOMs, 900 items, 400 segments, the
 * zoom pyramid), and the smaller ones a comparison uses per run (peak and 1
 * OOM, 300 items, 150 segments, no pyramid: it is ~15 KB a level a run). */
void gm_segmap_opts_run(gm_segmap_opts *o);
void gm_segmap_opts_compare(gm_segmap_opts *o);

/* Simulate cfg once more, twice with o->zoom (its policy: cfg->policy), and
 * return the maps as
 * {"maps": [...], "ooms_total": N, "peak_reserved_bytes": B}. A run with
 * --repeat > 1 gives {"maps": [], "skipped": "why"}.
 * With o->zoom, also "zoom": {"center_ns", "oom_ns": [...], "levels":
 * [{"t0", "t1", "around": "peak" | "oom", "oom": k (around the k-th OOM),
 * "requested", "requested_min", "allocated", "reserved"}]}: the device's
 * bytes in 400 columns (max per column; requested also its min) over
 * windows around the peak of reserved memory (center_ns) and around each of
 * the first max_ooms OOMs (oom_ns, at most 8), each 4x narrower than the
 * one before (the first a quarter of the trace's span), down to one of
 * about 100 events at the trace's mean rate, so a zoom reaches single
 * events there. An OOM's window is left out where one of the same width
 * already holds its middle three quarters (an OOM at the peak or next to
 * an earlier one). */
int gm_segmap_json(const gm_sim_config *cfg, const gm_segmap_opts *o, json_t **out, gm_err *err);

/* What a page (`run --html`, `compare --html`) adds to its result before
 * it is drawn. Every result (a gmsim-result/1, or each of a
 * gmsim-compare/1's) gets a "segment_maps" member, simulated with its own
 * inputs.policy and inputs.allocator on cfg's traces; a map whose replay
 * does not reach the result's own peak reserved bytes is left out (the
 * result came from other inputs), and says so. A comparison's results are
 * simulated on `threads` threads (0: one per core; study/pool.h, costliest
 * policy first); the maps do not depend on it. Every tenant gets its trace
 * statistics (trace_stats.h), read on a thread of their own while the maps
 * are simulated (with threads 1, one after the other): bg, when the caller
 * started that thread earlier (gm_trace_stats_start before its run, so
 * that the reading overlaps the run too; taken here: finished and freed),
 * else NULL. The statistics' error first, as when they were read first. */
int gm_segmap_page_attach(json_t *result, const gm_sim_config *cfg, const gm_segmap_opts *o,
                          int threads, gm_trace_stats_bg *bg, gm_err *err);

#endif
