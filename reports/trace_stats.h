/*
 * trace_stats.h - what a report shows about a trace itself, independent of
 * the allocator and policy: its metadata, the allocation-size histogram
 * (log2 bins) and the per-category breakdown, from one streaming pass.
 *
 * The JSON object (member "trace_stats" of a tenant in gmsim-result/1):
 *   path, meta {source, device_name, device_total_bytes, created_utc,
 *               command, workload, alloc_conf}   strings as recorded
 *   events, allocations, alloc_bytes, peak_live_bytes, peak_live_t_ns
 *   size_histogram {edges_bytes[n+1], allocs[n], bytes[n]}: bin i holds
 *       requested sizes in [edges[i], edges[i+1]); empty bins at both ends
 *       are left out; the first edge is 0 when sizes under 512 B occur
 *   categories [{category, allocs, bytes, live_at_peak_bytes}]: allocations
 *       and bytes requested per category over the whole trace, and what
 *       each category held at the peak of live bytes (/initial_state
 *       blocks count as live from the start)
 *   iterations: the iteration boundaries and the leak verdict, the object
 *       `gmsim info --json` writes (leak_out.c gm_leak_json; study/leak.h):
 *       source, verdict, warmup_iterations, fit {first_iteration,
 *       iterations, slope_bytes_per_iteration, intercept_bytes, r2, ...},
 *       boundaries [{event, t_ns, live_bytes, ...}] (none: source "none")
 *   allocations_top {t0_ns, t1_ns, allocations, shown, rows, sites,
 *       rest_max_bytes}: GM_TOP_ALLOCS allocations (gm_trace_allocs_json
 *       says which; largest first) as rows [t_alloc_ns, t_free_ns (-1: still live
 *       at the end), size_bytes, category, site (index into sites, -1:
 *       unknown)]; rest_max_bytes: the bytes every other allocation held,
 *       maximum per column of 400 equal columns over [t0_ns, t1_ns] (the
 *       trace's first and last event). Initial blocks count from t0_ns.
 * Memory is O(chunk + live allocations), like every trace pass.
 */
#ifndef GM_TRACE_STATS_H
#define GM_TRACE_STATS_H

#include <jansson.h>

#include "base/err.h"
#include "sim/engine.h"

#include "traces/trace.h"

/* Allocations drawn as bands: enough for the memory a job holds at once
 * (a transformer's weights and activations), few enough for the page. */
#define GM_TOP_ALLOCS 400

/* "allocations_top" of the trace r (two passes over its events; rewinds).
 * Half of the top bands go to the allocations holding the most bytes x
 * time, half to the largest of each of 40 equal slices of [t_first,
 * t_last] (the trace's first and last event time, from a scan; a wrong
 * hint only skews the slices) by allocation time. */
int gm_trace_allocs_json(gm_trace_reader *r, size_t top, uint64_t t_first, uint64_t t_last,
                         json_t **out, gm_err *err);
/* The same in parts, for a caller that reads the events for more than this
 * (gm_trace_stats_json: the first pass rides on the leak analysis's
 * second): begin reads the call sites and the initial state, feed takes the
 * events of the first pass in order, finish makes the second pass (it
 * rewinds) and the JSON; free in every case. */
typedef struct gm_trace_allocs gm_trace_allocs;
int gm_trace_allocs_begin(gm_trace_reader *r, size_t top, uint64_t t_first, uint64_t t_last,
                          gm_trace_allocs **out, gm_err *err);
int gm_trace_allocs_feed(gm_trace_allocs *x, const gm_event *ev, size_t n, gm_err *err);
int gm_trace_allocs_finish(gm_trace_allocs *x, gm_trace_reader *r, json_t **out, gm_err *err);
void gm_trace_allocs_free(gm_trace_allocs *x);

/* Read the trace at path once; *out is a new JSON object (see above). */
int gm_trace_stats_json(const char *path, json_t **out, gm_err *err);

/*
 * Give every tenant of a result (gmsim-result/1, or each result inside a
 * gmsim-compare/1) that has none a "trace_stats" member, computed from the
 * trace file its "trace" names; each distinct path is read once. Returns
 * the first error (a trace no longer readable); tenants done before it keep
 * their statistics. cfg (may be NULL) maps a tenant's name (a snapshot) to
 * the trace it was imported into for this run.
 */
int gm_trace_stats_attach(json_t *result, const gm_sim_config *cfg, gm_err *err);

/*
 * The same in two halves, so that the reading overlaps other work (`run
 * --html` and `compare --html` read the statistics while the segment maps
 * are simulated): gm_trace_stats_start reads the statistics of cfg's
 * traces (each tenant's path, each file once) on a thread of its own;
 * gm_trace_stats_finish waits for it, then attaches as
 * gm_trace_stats_attach does, from what it read (a file it did not read is
 * read then; a file it could not read gives that error), and frees it.
 * result NULL: only wait and free (a command that fails first; err is
 * not written then, and may be NULL). *out may
 * be NULL (no thread could start): finish then reads every file itself.
 * Returns GM_ENOMEM when out of memory.
 */
typedef struct gm_trace_stats_bg gm_trace_stats_bg;
int gm_trace_stats_start(const gm_sim_config *cfg, gm_trace_stats_bg **out);
int gm_trace_stats_finish(gm_trace_stats_bg *bg, json_t *result, const gm_sim_config *cfg,
                          gm_err *err);

#endif
