/* err.c - see err.h. */
#include "err.h"

#include <stdarg.h>
#include <stdio.h>

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
