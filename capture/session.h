/*
 * session.h - a capture session: the recorder (records.h) plus the trace
 * writer it feeds, opened lazily.
 *
 * The writer is opened at the first drain that has rows to write, or at
 * finish, through a callback: by then the device being recorded is known (its
 * name and memory go into the root attributes), and inject.c's callback may
 * query the CUDA driver outside of cuInit. Tests pass a callback that writes
 * plain metadata.
 */
#ifndef GM_CAPTURE_SESSION_H
#define GM_CAPTURE_SESSION_H

#include "records.h"

/* Open the trace for `device` (-1 if no record named one). GM_OK or an error in err. */
typedef int (*gmc_open_fn)(void *ctx, int device, gm_trace_writer **w, gm_err *err);

typedef struct gmc_session gmc_session;

int gmc_session_create(const gmc_opts *opts, gmc_open_fn open, void *ctx, gmc_session **out,
                       gm_err *err);
/* Frees the session; an unfinished trace is aborted (its temporary file removed). */
void gmc_session_free(gmc_session *s);

/* The recorder CUPTI's buffer-completion callback feeds. */
gmc_recorder *gmc_session_recorder(gmc_session *s);

/*
 * Write every record older than watermark_ns (CUPTI time). After the first
 * error the session is failed: later drains discard their rows (so memory
 * stays bounded) and finish returns the first error.
 */
int gmc_session_drain(gmc_session *s, uint64_t watermark_ns, gm_err *err);

/*
 * Drain everything, write /initial_state and the dropped-record count, and
 * publish the file (gm_trace_finish renames it into place). *st (may be
 * NULL) gets the final statistics. Only the first call does anything.
 */
int gmc_session_finish(gmc_session *s, gmc_stats *st, gm_err *err);

#endif
