/*
 * packed.h - a trace's events kept in memory in a few bytes each, for the
 * studies that replay one trace many times (study/preload.h).
 *
 * Why. A study (fit's searches, tune's grid) replays its trace in every
 * run. A trace of up to GM_PRELOAD_MAX_EVENTS is kept as it is (48 bytes an
 * event); a larger one was read from its file again for each run: its
 * reader process decodes every event again and the run copies and checks
 * it, ~30 % of `gmsim fit`'s CPU on 5 M events. Here such a trace is kept
 * in the bytes it needs, decoded by each run as it goes (several runs at
 * once: the store is read-only, each run has its own cursor).
 *
 * The encoding (lossless; this process's own, never written to a file).
 * Per event four bytes: its length in bytes (so that finding the next event
 * waits on nothing else), the op (low 4 bits) and three flags, the lengths
 * of the four fields that follow, and the category and phase (4 bits each).
 * The fields, each in 1, 2, 4 or 8 little-endian bytes (a decoder loads 8
 * and masks: no branch per length):
 *   t_ns     the zigzagged difference from the event before's (times never
 *            go back in a checked trace; any order survives the round trip)
 *   id       as is
 *   size, addr   unless flag SAME_AS_ID: the values the last event with
 *            this id carried (a free repeats its allocation's); addr as the
 *            zigzagged difference from the last addr written out
 * then LEB128 varints for what rarely changes: the stream unless flag
 * SAME_STREAM, the site unless SAME_SITE (the event before's). A BERT trace
 * takes about 11 bytes an event, decoded in about 5 ns (`gmbench packed`).
 * Decoding is sequential from the start (a run reads in order; --repeat
 * starts again).
 */
#ifndef GM_PACKED_H
#define GM_PACKED_H

#include <stddef.h>
#include <stdint.h>

#include "trace.h"
#include "base/err.h"

typedef struct gm_packed gm_packed;

/* An empty store that refuses to grow past max_bytes of encoding. */
gm_packed *gm_packed_new(uint64_t max_bytes);
/* Append n events: GM_OK, GM_PACKED_FULL when the encoding would pass
 * max_bytes or an event has an op past the 4 bits it keeps (the store is
 * then of no use: free it), or GM_ENOMEM. */
#define GM_PACKED_FULL 1
int gm_packed_append(gm_packed *p, const gm_event *ev, size_t n);
/* Done appending: gives back the unused room. */
void gm_packed_finish(gm_packed *p);
uint64_t gm_packed_events(const gm_packed *p);
uint64_t gm_packed_bytes(const gm_packed *p); /* the encoding's, without its tables */
void gm_packed_free(gm_packed *p);

/* A reading position; one per reader, any number at once. */
typedef struct gm_packed_cursor gm_packed_cursor;
gm_packed_cursor *gm_packed_cursor_new(const gm_packed *p); /* NULL: out of memory */
/* Decode up to cap events into buf, continuing where the last call
 * stopped: how many (0 at the end). */
size_t gm_packed_read(gm_packed_cursor *c, gm_event *buf, size_t cap);
void gm_packed_rewind(gm_packed_cursor *c);
void gm_packed_cursor_free(gm_packed_cursor *c);

#endif
