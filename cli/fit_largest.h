/*
 * fit_largest.h - `gmsim fit --largest DIM REC=VALUE REC=VALUE [REC=VALUE]`
 * (cmd_fit.c hands over to it): the largest value of the dimension that
 * fits on the device, from recordings at two or three values
 * (study/largest.h, study/scale.h).
 */
#ifndef GM_CLI_FIT_LARGEST_H
#define GM_CLI_FIT_LARGEST_H

#include "study/run_opts.h"

/* o: the parsed simulation options, whose trace operands are the
 * recordings (REC=VALUE); policies: --policies ("" = pytorch). Returns the
 * exit code. */
int gm_fit_largest_cmd(gm_run_opts *o, const char *dim, const char *policies, const char *json_path,
                       int quiet);

#endif
