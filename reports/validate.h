/*
 * validate.h - a prediction (`gmsim run --json`) against a measurement
 * (`gmreplay -o`), metric by metric: `gmsim validate`.
 *
 * Both files are "gmsim-result/1". They must describe the same traces (same
 * trace hashes, in the same order), or nothing is compared. Then every row
 * carries the predicted and measured value and the relative error
 * (measured - predicted) / predicted. Rows with a tolerance are checks:
 *   - inputs:        capacity, overhead, allocator, policy, allocator
 *                    settings, memory fraction, OOM handling, per-trace
 *                    offset/repeat/quota: identical;
 *   - OOM events:    exactly the same OOMs (count, and tenant, pass, event
 *                    index and size of every recorded one), and none that
 *                    gmreplay's capacity guard refused while the driver
 *                    still had room (measured.oom.cap_refusals_driver_had_room);
 *   - peak reserved: within GM_VALIDATE_PEAK_RESERVED_TOL;
 *   - replay:        the measurement ran to the end (no signal, no driver
 *                    error, every allocation given back).
 * Everything else (peak live and allocated, fragmentation, utilization,
 * device used, driver calls and their time, tenants completed) is reported
 * beside them, without a verdict: the latency model is a model.
 */
#ifndef GM_VALIDATE_H
#define GM_VALIDATE_H

#include <jansson.h>
#include <stddef.h>

#include "base/err.h"

#define GM_VALIDATE_SCHEMA "gmsim-validate/1"
#define GM_VALIDATE_PEAK_RESERVED_TOL 0.02

typedef struct gm_vrow {
    char metric[64];
    char predicted[96], measured[96]; /* as printed                         */
    double pred, meas;                /* numeric values; NAN if not numbers  */
    double rel_err;                   /* NAN when not defined                */
    char tolerance[16];               /* "exact", "2 %", "" (reported only)  */
    int check;                        /* 1: pass/fail row                    */
    int pass;
    char note[256];
} gm_vrow;

typedef struct gm_validation {
    gm_vrow *rows;
    size_t n, cap;
    int n_checks, n_failed;
    char backend[16]; /* the measurement's backend ("cuda", or "model") */
} gm_validation;

/* Compare two parsed results. GM_EINVAL (message set, nothing compared)
 * when either is not a gmsim-result/1 or they are about different traces. */
int gm_validate(json_t *predicted, json_t *measured, gm_validation *v, gm_err *err);
/* The same from two files. */
int gm_validate_files(const char *predicted, const char *measured, gm_validation *v, gm_err *err);
void gm_validation_free(gm_validation *v);
/* {"schema", "pass", "checks", "failed", "backend", "rows": [...]} */
json_t *gm_validation_json(const gm_validation *v);
/* A row's relative error as the table shows it ("+1.23 %", "n/a", "") and
 * its verdict ("pass", "FAIL", "" for a reported-only row). */
void gm_vrow_rel_text(char *buf, size_t n, const gm_vrow *r);
const char *gm_vrow_verdict(const gm_vrow *r);
/* A row by metric name, or NULL. */
const gm_vrow *gm_validation_row(const gm_validation *v, const char *metric);

#endif
