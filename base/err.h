/*
 * err.h - the error record that travels up to main().
 *
 * Errors: library functions never print and never exit. They return GM_OK (0)
 * or a negative GM_E* code and fill a gm_err whose message names the input
 * and, where one exists, the fix. Only main() prints it.
 */
#ifndef GM_ERR_H
#define GM_ERR_H

#define GM_OK 0
#define GM_EINVAL (-1) /* bad input (file content, option value)      */
#define GM_EIO (-2)    /* cannot read/write a file                      */
#define GM_ENOMEM (-3) /* host malloc failed                            */
#define GM_EOOM (-4)   /* simulated/real device out of memory           */
#define GM_EUSAGE (-5) /* command-line misuse (exit code 2)             */

/* Error record: a single human-readable message. */
typedef struct gm_err {
    int code;
    char msg[1024];
} gm_err;

/* Format msg into err (printf-style) and set its code; err may be NULL. */
void gm_err_set(gm_err *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* gm_err_set, then the value code: `return gm_errf(err, GM_EINVAL, ...)`.
 * A macro, so that the compiler sees that the result is code: callers test
 * it (`if (parse(..., &v, err)) return err->code;` and then use v), and an
 * opaque return value would leave v "maybe uninitialized" on a path that
 * cannot happen. code is evaluated once. */
#define gm_errf(err, code, ...)                                                                    \
    __extension__({                                                                                \
        int gm_errf_code_ = (code);                                                                \
        gm_err_set((err), gm_errf_code_, __VA_ARGS__);                                             \
        gm_errf_code_;                                                                             \
    })

/* At the end of main(): whatever the program printed must have reached
 * standard output. A full disk, /dev/full or a closed descriptor is an
 * error (message on stderr naming prog, exit status 1 unless rc already
 * says failure), not a silent loss. Returns the exit status. */
int gm_close_stdout(const char *prog, int rc);

#endif
