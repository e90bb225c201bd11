/*
 * future.h - what the oracle knows of its trace's future, in bounded memory.
 *
 * For each key (the oracle files a small allocation under its pool, a
 * large one under its segment class), the ascending event indices and
 * trace times of the allocations filed under it. A trace of 100 M events
 * holds ~50 M allocations; kept in memory they took 16 bytes each, so the
 * store keeps them in an unlinked temporary file instead (in $TMPDIR, else
 * /tmp; gone when the process ends, however it ends), in blocks of 64
 * entries delta-encoded, each block's deltas in as many bytes as its
 * largest needs (about 3-6 bytes an entry), written 256 KiB and read 64
 * KiB at a time. Memory: a table entry per block (~0.6 bytes per
 * allocation and key), one decoded block per key, the write buffer (until
 * the seal) and eight read windows (768 KiB in all). Lookups move forward
 * with the replay (a block is read when the replay enters it), and may go
 * back: a new --repeat pass starts again at 0. A key keeps its last answer
 * and the lookups that get it (from the entry before it, exclusive, to the
 * answer): the oracle asks every tick about the same few keys, whose next
 * entry is mostly the one it found a tick before.
 */
#ifndef GM_POLICIES_FUTURE_H
#define GM_POLICIES_FUTURE_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

typedef struct gm_future gm_future;

/* An empty store with a temporary file; GM_EIO/GM_ENOMEM with a message. */
int gm_future_open(gm_future **out, gm_err *err);
/* A new key; returns its number (0, 1, ...) or -1 when out of memory. */
long gm_future_key(gm_future *f);
/* Append (idx, t) to key's list; indices must ascend per key. Build phase
 * only (before gm_future_seal). */
int gm_future_add(gm_future *f, long key, uint64_t idx, uint64_t t, gm_err *err);
/* End of the build phase: what is buffered goes to the file. */
int gm_future_seal(gm_future *f, gm_err *err);
/* Entries of key. */
uint64_t gm_future_count(const gm_future *f, long key);
/* Key's first entry (1), or 0 when it has none. */
int gm_future_first(const gm_future *f, long key, uint64_t *idx, uint64_t *t);
/* Key's first entry with index >= from (1), 0 when there is none, -1 when
 * the temporary file cannot be read. */
int gm_future_next(gm_future *f, long key, uint64_t from, uint64_t *idx, uint64_t *t);
/* Bytes of the temporary file, and of memory held (for reports and tests). */
uint64_t gm_future_file_bytes(const gm_future *f);
uint64_t gm_future_mem_bytes(const gm_future *f);
void gm_future_free(gm_future *f);

#endif
