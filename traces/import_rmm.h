/*
 * import_rmm.h - RAPIDS RMM memory logs to gmsim traces.
 *
 * rmm::mr::logging_resource_adaptor (Python: rmm.mr.LoggingResourceAdaptor)
 * writes one CSV row per call of the resource it wraps:
 *
 *   Thread,Time,Action,Pointer,Size,Stream
 *   140573312345856,10:55:48.123456,allocate,0x7f8a40000000,1024,0x0
 *
 * Time is the wall-clock time of day (spdlog "%H:%M:%S.%f"; some versions
 * write ':' before the microseconds, and seconds since the epoch are also
 * accepted); Action is allocate, free or "allocate failure" (newer RMM);
 * Pointer and Stream are hexadecimal. Columns are found by name. The log is
 * one resource, so one process on one device. The mapping to events is in
 * traces/IMPORT.md.
 */
#ifndef GM_IMPORT_RMM_H
#define GM_IMPORT_RMM_H

#include <stdio.h>

#include "import_torch.h"

typedef struct gm_rmm_opts {
    const char *name;    /* input name for messages ("rmm log") */
    const char *command; /* recorded in meta.command            */
} gm_rmm_opts;

/* Import the CSV log read from f. On error *out is zeroed and err names the
 * line and what is wrong. */
int gm_rmm_import_stream(FILE *f, const gm_rmm_opts *opts, gm_import_trace *out, gm_err *err);

/* Open path and import it. */
int gm_rmm_import_file(const char *path, const gm_rmm_opts *opts, gm_import_trace *out,
                       gm_err *err);

#endif
