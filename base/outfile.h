/*
 * outfile.h - the one way gmsim writes an output file, so that no output
 * ever destroys data.
 *
 * Where a path leads decides how it is written (gm_out_plan):
 *   - a regular file, or a name that does not exist yet: written as
 *     TARGET.tmp.<pid> beside it and renamed over TARGET when complete, so
 *     an interrupted or failed write never leaves a half file that looks
 *     whole and never truncates the old one. TARGET is the path with every
 *     symlink resolved: a symlink is followed, never replaced. The new file
 *     keeps an old file's permission bits.
 *   - "-", /dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N: the
 *     descriptor itself (standard output for "-"), written directly.
 *   - anything else that exists and is not a directory (a device node, a
 *     FIFO): opened and written directly, never removed or replaced.
 * Every write, the flush and the close are checked; a failure is an error
 * naming the path and the reason (e.g. "No space left on device"), and the
 * temporary file is removed.
 *
 * gm_out_same_file() is how a command refuses an output that is one of its
 * inputs (compared by device and inode, so other names and links count).
 */
#ifndef GM_OUTFILE_H
#define GM_OUTFILE_H

#include <stddef.h>
#include <stdio.h>

#include "err.h"

/* How an output path is written. */
typedef struct gm_out_plan {
    char *target; /* the file written (symlinks resolved); NULL when fd >= 0 */
    char *tmp;    /* target.tmp.<pid>: write here, then rename; NULL if direct */
    int fd;       /* >= 0: write to this open descriptor (1 for "-")          */
} gm_out_plan;

/* Plan writing path; err names path on failure (a directory, a dangling
 * loop of links, an unknown /dev/fd/N). gm_out_plan_free releases it. */
int gm_out_plan_make(const char *path, gm_out_plan *p, gm_err *err);
void gm_out_plan_free(gm_out_plan *p);
/* For a plan with tmp: rename tmp over target (keeping an old target's
 * mode); the error names path. */
int gm_out_plan_publish(const gm_out_plan *p, const char *path, gm_err *err);

/* An output open for writing with stdio. */
typedef struct gm_outfile {
    FILE *f;          /* write here                              */
    char *path;       /* as given, for messages                  */
    gm_out_plan plan; /* where it goes                           */
    int is_stdout;    /* f is stdout: flushed, never closed here  */
} gm_outfile;

int gm_out_open(gm_outfile *o, const char *path, gm_err *err);
/* Optional, for a program that removes its temporary files when it is
 * killed (the CLI, cli/inputs.c): fn(ctx, tmp) is told each temporary file
 * gm_out_open creates, before anything is written to it, in the thread
 * that opens the output. Set it once, before the first output. */
void gm_out_set_temp_hook(void (*fn)(void *ctx, const char *tmp), void *ctx);
/* Flush, check, close, rename into place. Releases o whatever the result. */
int gm_out_commit(gm_outfile *o, gm_err *err);
/* Close and remove the temporary file. Releases o. */
void gm_out_abort(gm_outfile *o);

/* Write len bytes of buf to path as above, in one call. */
int gm_out_write_all(const char *path, const void *buf, size_t len, gm_err *err);
/* Copy the regular file src to the output path as above. */
int gm_out_copy_file(const char *src, const char *path, gm_err *err);

/* 1 if path writes to standard output ("-", /dev/stdout, a link to it):
 * a command then prints its messages to stderr. */
int gm_out_is_stdout(const char *path);

/* 1 if a and b both exist and are the same file (device and inode, links
 * followed); 0 otherwise, "-" included. */
int gm_out_same_file(const char *a, const char *b);

#endif
