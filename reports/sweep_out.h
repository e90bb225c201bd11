/*
 * sweep_out.h - what `gmsim sweep` writes: one JSON document
 * (gmsim-sweep/1: the spec as read, then one object per case in case
 * order) and one HDF5 table (/cases, one compound row per case), both from
 * the rows alone, with nothing that depends on the machine, the time, the
 * threads or the ranks, so two sweeps of the same spec write the same bytes.
 * Both are written atomically (a temporary file renamed into place).
 *
 * And what --resume reads back: the cases of an earlier JSON document that
 * ran (status "ok"), matched to the plan by their key.
 */
#ifndef GM_SWEEP_OUT_H
#define GM_SWEEP_OUT_H

#include <stddef.h>

#include "base/err.h"
#include "study/sweep.h"

int gm_sweep_write_json(const gm_sweep_plan *p, const gm_sweep_row *rows, const char *path,
                        gm_err *err);
int gm_sweep_write_h5(const gm_sweep_plan *p, const gm_sweep_row *rows, const char *path,
                      gm_err *err);

/* Read the cases of `path` that ran and that the plan has; they fill
 * rows[i] and done[i] = 1 (*n_done counts them). A missing file is no
 * error (nothing done); a file that is not gmsim-sweep/1 is GM_EINVAL. */
int gm_sweep_read_done(const gm_sweep_plan *p, const char *path, gm_sweep_row *rows,
                       unsigned char *done, size_t *n_done, gm_err *err);

#endif
