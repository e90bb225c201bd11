/* err.c - see err.h. */
#include "err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void gm_err_set(gm_err *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->code = code;
    }
}

int gm_close_stdout(const char *prog, int rc)
{
    if (fflush(stdout) != 0 || ferror(stdout) || fclose(stdout) != 0) {
        fprintf(stderr, "%s: cannot write standard output: %s\n", prog,
                strerror(errno ? errno : EIO));
        return rc ? rc : 1;
    }
    return rc;
}
