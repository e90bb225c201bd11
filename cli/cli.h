/*
 * cli.h - what every `gmsim` command shares (git's parse-options habit):
 * one option loop, option values parsed one way, and one way to report a
 * failure. A command is cmd_<name>.c: its usage text, an option handler, and
 * the few calls that do the work.
 *
 * Errors look the same in every command:
 *   gmsim CMD: MESSAGE                                (exit 1: bad input)
 *   gmsim CMD: MESSAGE                                (exit 2: misuse)
 *   (run 'gmsim CMD --help' for the options)
 */
#ifndef GM_CLI_H
#define GM_CLI_H

#include <getopt.h>
#include <stdio.h>
#include <stdint.h>

#include "base/err.h"
#include "study/run_opts.h"
#include "traces/trace.h"

/* An option handler's "stop here, exit 0" (it printed --help). */
#define GM_CLI_DONE 1
/* gm_cli_parse_sim: the options were fine, an input was not (err says why;
 * exit 1, not a usage error). */
#define GM_CLI_INPUT 3

/* Called for every option (c: its short letter or its value in longopts)
 * and every operand (c == 1, arg the operand), in command-line order.
 * Returns GM_OK, GM_CLI_DONE, or an error with err set (a usage error
 * unless it says otherwise). */
typedef int (*gm_cli_fn)(void *ctx, int c, const char *arg, gm_err *err);

/* The option loop: getopt_long over argv (argv[0] is the command's name)
 * with shortopts ("qh", "o:qh", ...) and longopts. Operands, and whatever
 * follows "--", go to fn as c == 1. An unknown option or a missing value is
 * GM_EUSAGE naming it. */
int gm_cli_parse(int argc, char **argv, const char *shortopts, const struct option *longopts,
                 gm_cli_fn fn, void *ctx, gm_err *err);

/* The loop of the simulating commands (run, compare, fit): the shared
 * simulation options (study/run_opts.h) and the traces fill o; the
 * command's own options (extra, NULL-terminated, short letters "qh") go
 * to fn. */
int gm_cli_parse_sim(gm_run_opts *o, int argc, char **argv, const struct option *extra,
                     gm_cli_fn fn, void *ctx, gm_err *err);

/* Inputs (inputs.c). What a file is from its first bytes: "hdf5" (a trace),
 * "rmm" (an RMM log), "torch" (a pickle: protocol 2+, or named .pickle /
 * .pkl), "csv" (text with commas in its first line, not RMM's header),
 * "other", "missing", "special" (not a regular file: never opened, since
 * opening a FIFO blocks). */
const char *gm_cli_sniff(const char *path);
/* A trace for path: path itself when it is a trace (or cannot be opened:
 * the reader then says why); a snapshot or an RMM log is imported into a
 * temporary trace, removed at exit (also on SIGINT/SIGTERM/SIGHUP). */
int gm_cli_input_trace(const char *path, const char **trace, gm_err *err);
/* The same for every tenant of o (gm_cli_parse_sim does it): the tenant's
 * name stays the snapshot's, its path becomes the temporary trace. */
int gm_cli_resolve_tenants(gm_run_opts *o, gm_err *err);
/* Progress on stderr (progress.c): --progress (on=1) / --no-progress (0)
 * as parsed by gm_cli_parse_sim; begin() hooks cfg when progress is on
 * (a terminal and not quiet, unless set), overwrite = one line rewritten in
 * place; end() clears that line. */
void gm_cli_progress_set(int on);
int gm_cli_progress_begin(const char *cmd, int quiet, gm_sim_config *cfg, int overwrite);
void gm_cli_progress_end(void);

/* Remove path when gmsim exits or is killed by SIGINT/SIGTERM/SIGHUP (a
 * trace writer's temporary file: gm_trace_write_opts.on_temp). */
void gm_cli_remove_on_exit(void *ctx, const char *path);
/* Refuse an output that is one of the inputs (same device and inode, so
 * another name or a link counts): GM_EUSAGE naming both. out may be NULL
 * (no such output). The second form checks the traces of o. */
int gm_cli_output_not_input(const char *opt, const char *out, const char *const *in, size_t n,
                            gm_err *err);
/* Where a command's own text (table, -q verdict) goes: stdout, or stderr
 * when one of its outputs (json, html; NULL = none) is standard output, so
 * that `--json -` prints only the JSON. */
FILE *gm_cli_text_out(const char *json, const char *html);
int gm_cli_output_not_trace(const char *opt, const char *out, const gm_run_opts *o, gm_err *err);

/* Print the failure as above; returns the exit code (2 for GM_EUSAGE, else 1). */
int gm_cmd_fail(const char *cmd, int code, const char *msg);
/* The exit status of a gm_cli_parse_sim that did not return GM_OK: 0 after
 * --help (GM_CLI_DONE), 1 for an input that cannot be read (GM_CLI_INPUT),
 * else 2 (a usage error); the message goes to stderr. */
int gm_cli_parse_sim_exit(const char *cmd, int rc, const char *msg);
/* Refuse a --json or --html output (either may be NULL) that is one of o's
 * traces (gm_cli_output_not_trace, both). */
int gm_cli_outputs_not_trace(const char *json, const char *html, const gm_run_opts *o, gm_err *err);
/* A usage error in the command's words (printf-style); returns 2. */
int gm_cmd_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Option values more than one command takes. GM_EUSAGE with a message
 * naming the option on a bad value. */
int gm_cli_threads(const char *arg, int *out, gm_err *err);
/* A device size (--max-capacity, --device-total): parsed, and when it uses a
 * decimal unit (24GB = 22.35 GiB) a note on stderr, once per process. */
int gm_cli_size(const char *cmd, const char *arg, const char *what, uint64_t *out, gm_err *err);
/* "gmsim CMD: note: ..." on stderr, once per process. */
void gm_cli_note(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));                                  /* --threads 1..4096 */
int gm_cli_device(const char *arg, int *out, gm_err *err);                  /* --device 0..63 */
int gm_cli_compress(const char *arg, gm_trace_write_opts *wo, gm_err *err); /* none|deflate */
/* A whole number in [0, max] (option opt's value s). */
int gm_cli_uint(const char *opt, const char *s, unsigned long long max, unsigned long long *out,
                gm_err *err);
/* --top-sites N (run, info): a whole number from 1 to GM_CLI_TOP_SITES_MAX. */
#define GM_CLI_TOP_SITES_MAX 100000
int gm_cli_top_sites(const char *s, size_t *out, gm_err *err);
/* A whole number in [0, INT_MAX]. */
int gm_cli_int(const char *opt, const char *s, int *out, gm_err *err);
/* "gmsim ARGV..." as one string (quoted where needed), for a trace's
 * `command` attribute; malloc'd, NULL when out of memory. */
char *gm_cli_join_command(int argc, char **argv);

#endif
