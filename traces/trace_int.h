/*
 * trace_int.h - inside traces/ only: the in-process HDF5 reader behind the
 * public reader of trace.h, and the checks both sides of the isolated reader
 * run.
 *
 * gm_trace_open() (trace_isolate.c) runs this reader in a child process and
 * receives its events; gm_trace_open_inprocess() runs it here. Either way the
 * HDF5 work is the code below (trace_h5.c); the public reader keeps the
 * position and re-checks what the child sends, so a child that lies cannot
 * hand the simulator an out-of-range op or category.
 *
 * Adding a table (say /sites): a struct table in trace_h5.c, a read function
 * here, one request kind in trace_isolate.c (TABLE_*), and a public function
 * in trace.h.
 */
#ifndef GM_TRACE_INT_H
#define GM_TRACE_INT_H

#include <stddef.h>
#include <stdint.h>

#include "trace.h"

typedef struct gm_h5r gm_h5r; /* an open trace, read in this process */

/* Open path (or, if fd >= 0, the already open regular file fd, which is
 * then named path in messages) and check everything FORMAT.md lists under
 * "Validation" and "Limits" that can be checked before reading rows. */
int gm_h5r_open(const char *path, int fd, gm_h5r **out, gm_err *err);
/* The same; sandbox(), if given, runs right after HDF5 opened the file and
 * before it parses anything else in it (the child's seccomp filter). */
int gm_h5r_open_sandboxed(const char *path, int fd, void (*sandbox)(void), gm_h5r **out,
                          gm_err *err);
void gm_h5r_close(gm_h5r *r);
const gm_trace_meta *gm_h5r_meta(const gm_h5r *r);
uint64_t gm_h5r_nevents(const gm_h5r *r);

/* Rows first..first+n-1 of /events, checked (gm_trace_check_events) when
 * `check`; *prev_t_ns is t_ns of row first-1 (0 for row 0) on entry and of
 * the last row read on success. The sandboxed child reads unchecked: its
 * parent checks every event it takes from it (trace_isolate.c), the same
 * check with the same message, so the child's own was the same work twice. */
int gm_h5r_read_at(gm_h5r *r, uint64_t first, gm_event *buf, size_t n, uint64_t *prev_t_ns,
                   int check, gm_err *err);
int gm_h5r_read_initial(gm_h5r *r, gm_init_row **rows, size_t *n, gm_err *err);
int gm_h5r_read_markers(gm_h5r *r, gm_marker **rows, size_t *n, gm_err *err);
/* /sites as a wire blob: per row its name then its stack, each
 * NUL-terminated (gm_trace_sites_parse turns it into a gm_sites). */
int gm_h5r_read_sites(gm_h5r *r, char **blob, size_t *len, size_t *n, gm_err *err);

/* The row checks (FORMAT.md "Validation"), shared by both sides. */
int gm_trace_check_events(const char *path, int version, uint64_t n_sites, const gm_event *ev,
                          size_t n, uint64_t first, uint64_t *prev_t_ns, gm_err *err);
int gm_trace_check_initial(const char *path, int version, uint64_t n_sites, const gm_init_row *rows,
                           size_t n, gm_err *err);
/* Parse a /sites blob of n rows (taking blob: freed on error too), check
 * and clean each text (trace.h, gm_sites). */
int gm_trace_sites_parse(const char *path, char *blob, size_t len, size_t n, gm_sites *out,
                         gm_err *err);
int gm_trace_check_markers(const char *path, gm_marker *rows, size_t n, gm_err *err);

/* HDF5 errors off for the calling thread (the library never prints). */
void gm_h5_quiet(void);

/* Open path for reading, refusing what is not a regular file before
 * opening it (a FIFO would block, a device may act on open) and again on
 * the descriptor; *fd is O_CLOEXEC. */
int gm_trace_open_file(const char *path, int *fd, gm_err *err);
/* The message for open(path) failing with errnum: EMFILE says how many
 * traces this process holds open and to raise ulimit -n. */
int gm_trace_open_error(const char *path, int errnum, gm_err *err);

#endif
