/*
 * trace_scan.h - one streaming pass over a trace that summarizes what is in
 * it, independent of any allocator: event counts, time span, requested
 * bytes live over time (peak, and by category at the peak), the
 * allocation-size histogram (GSL, log2 bins) and per-category / per-phase
 * counts. `gmsim info` prints it; the HTML report's trace statistics
 * (reports/trace_stats.c) turn it into JSON.
 *
 * Memory is O(chunk + live allocations). /initial_state blocks count as
 * live from the start ("pre-existing bytes"), so a snapshot that starts
 * part-way through a run reports the right peak. The scan describes, it
 * does not judge: a free of an unknown address or an alloc of an address
 * already live is counted and skipped (the simulator refuses such traces).
 */
#ifndef GM_TRACE_SCAN_H
#define GM_TRACE_SCAN_H

#include <gsl/gsl_histogram.h>
#include <stdint.h>

#include "site_tally.h"
#include "live_slots.h"
#include "trace.h"
#include "base/addrmap.h"

/* Size histogram: bin 0 is [0, 512 B), bin k >= 1 is [2^(8+k), 2^(9+k)), up
 * to 2^49 so that GM_TRACE_MAX_SIZE (2^48) falls in the last bin. */
#define GM_SCAN_HIST_BINS 41

typedef struct gm_trace_scan {
    gm_live live; /* live allocations (live_slots.h) -> requested bytes | category << 56 */
    uint64_t nevents;
    uint64_t by_op[GM_OP_COUNT];
    uint64_t t_first, t_last;
    uint64_t alloc_bytes, max_size;
    uint64_t live_bytes, peak_live, peak_index, peak_t;
    uint64_t live_cat[GM_CAT_COUNT], peak_cat[GM_CAT_COUNT]; /* live bytes by category */
    uint64_t pre_bytes, pre_blocks, init_segments, init_segment_bytes;
    uint64_t init_expandable;                  /* of the segments, expandable ones */
    uint64_t init_private, init_private_bytes; /* segments of CUDA-graph private pools */
    uint64_t init_largest_free;                /* largest free gap in the recorded segments */
    uint64_t reserved, peak_reserved;          /* recorded segments, when the trace has them */
    uint64_t cat_count[GM_CAT_COUNT], cat_bytes[GM_CAT_COUNT];
    uint64_t phase_count[GM_PHASE_COUNT], phase_bytes[GM_PHASE_COUNT];
    uint64_t unknown_frees, first_unknown_index, first_unknown_addr;
    uint64_t live_reallocs, first_realloc_index;
    uint64_t markers, marker_kinds[4];
    gsl_histogram *h_count, *h_bytes; /* allocations and bytes by requested size */
    gm_sites sites;                   /* /sites (n = 0 if the trace names none) */
    gm_site_tally tally;              /* live bytes by call site, now and at the peak */
} gm_trace_scan;

/* Read the whole trace (initial state, markers, events) into s. On error s
 * holds what was read so far; gm_trace_scan_free(s) in every case. */
int gm_trace_scan_run(gm_trace_reader *r, gm_trace_scan *s, gm_err *err);
/* The same in parts, for a caller that reads the events for more than the
 * scan (study/leak.h, gm_leak_scan_trace): begin reads the initial state and
 * the markers, then feed takes the events in order, n at a time, the first
 * of them event number `first`. */
int gm_trace_scan_begin(gm_trace_reader *r, gm_trace_scan *s, gm_err *err);
int gm_trace_scan_feed(gm_trace_scan *s, const gm_event *ev, size_t n, uint64_t first, gm_err *err);
void gm_trace_scan_free(gm_trace_scan *s);

#endif
