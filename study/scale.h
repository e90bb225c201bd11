/*
 * scale.h - `gmsim scale`: from recordings of the same program at two or
 * three values of one dimension (batch size, sequence length), the trace
 * at another value. README "Scaling recordings" describes the rules; in
 * short:
 *
 *   Alignment. The recordings are aligned allocation by allocation: the
 *   same sequence of allocs, frees and empty_cache calls (each free freeing
 *   the allocation of the same rank), the same stream and category for each
 *   allocation (the format records no call sites; stream, category and
 *   order stand in for them), and the same pre-existing blocks (those a
 *   free of the trace releases, by the rank of that free; the others by
 *   category and size). The first difference is an error that names both
 *   recordings, the event and what differs.
 *
 *   Sizes. Each aligned allocation's size is fitted as a function of the
 *   dimension, exactly, in integers: equal sizes stay fixed; from two
 *   recordings the line through them; from three the parabola through them
 *   (attention scores grow with seq^2). The size at the new value is
 *   rounded to the nearest byte, at least 1 (clamps are counted).
 *
 *   Times. Each event's time is interpolated (extrapolated) on the line
 *   through the two recordings nearest the new value, kept non-decreasing
 *   and non-negative. Stream, category, phase and markers are the nearest
 *   recording's. Segment rows (the recorded allocator's own driver calls,
 *   meaningless at another size) are dropped; /initial_state keeps blocks
 *   only.
 */
#ifndef GM_SCALE_H
#define GM_SCALE_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "traces/import_torch.h"
#include "traces/trace.h"

#define GM_SCALE_MAX_INPUTS 3
#define GM_SCALE_MAX_X (1ll << 24) /* largest value of the dimension */

/* One recording: a trace or a snapshot pickle, and its value of the dimension. */
typedef struct gm_scale_input {
    const char *path;
    int64_t x;
} gm_scale_input;

/* "A.pickle=8" -> path "A.pickle", x 8 (the value follows the last '=');
 * GM_EUSAGE naming the argument and the fix. The path points into arg. */
int gm_scale_input_parse(const char *arg, char *path, size_t path_len, int64_t *x, gm_err *err);

/* The aligned recordings, ready to be evaluated at any value. */
typedef struct gm_scale gm_scale;

/* Load (traces read from HDF5, anything else imported as a PyTorch
 * snapshot in memory; device: the snapshot's device, -1 = its only one)
 * and align n (2 or 3) recordings with distinct values. */
int gm_scale_open(const gm_scale_input *in, size_t n, int device, gm_scale **out, gm_err *err);
void gm_scale_free(gm_scale *s);

/* What the fit found. */
typedef struct gm_scale_stats {
    size_t inputs;
    uint64_t allocs;          /* aligned allocations (pre-existing blocks included) */
    uint64_t constant;        /* of which the same size in every recording */
    uint64_t linear;          /* ... a line                                  */
    uint64_t quadratic;       /* ... a parabola (three recordings)            */
    uint64_t clamped;         /* sizes at the last evaluation that fell below 1 B */
    uint64_t dropped_segment; /* segment rows left out                        */
} gm_scale_stats;
void gm_scale_get_stats(const gm_scale *s, gm_scale_stats *st);
/* The largest recorded value. */
int64_t gm_scale_max_input(const gm_scale *s);
/* The nearest recording's metadata (allocator settings, device size). */
const gm_trace_meta *gm_scale_meta(const gm_scale *s, int64_t x);

/* The trace at value x, in memory (gm_import_trace_free it). */
int gm_scale_at(gm_scale *s, int64_t x, gm_import_trace *out, gm_err *err);

/* The same trace as the engine's in-memory tenant wants it: the
 * pre-existing blocks become allocations at t = 0 (what --initial-state
 * live does with them), so *events holds everything; free() it. */
int gm_scale_events_at(gm_scale *s, int64_t x, gm_event **events, size_t *n, gm_err *err);

/* The size fit itself, exposed for tests: the size at x of an allocation
 * whose sizes at xs[0..n) are ys (n = 1, 2 or 3), rounded to the nearest
 * byte; *clamped is set when the value fell below 1 (the result is 1). */
uint64_t gm_scale_fit(const int64_t *xs, const uint64_t *ys, size_t n, int64_t x, int *clamped);

#endif
