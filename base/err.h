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

/* Format msg into err (printf-style) and return code. */
int gm_errf(gm_err *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
