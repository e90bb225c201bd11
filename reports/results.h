/*
 * results.h - simulation results as JSON (schema "gmsim-result/1"), the one
 * format that `gmsim run --json`, `gmsim compare --json`, `gmreplay -o`,
 * `gmsim validate` and `gmsim report` write and read. Written with jansson.
 *
 * Every result carries the inputs that made it (traces with hashes,
 * capacity, overhead, allocator and its configuration, policy and its
 * parameters, latency model, gmsim version), so any figure can be
 * reproduced. Sizes are integers in bytes, times integers in ns, ratios
 * floats in [0, 1].
 */
#ifndef GM_RESULTS_H
#define GM_RESULTS_H

#include <jansson.h>

#include "sim/engine.h"

#define GM_RESULT_SCHEMA "gmsim-result/1"

/* The whole result of one run; cfg gives the inputs (tenant specs, latency). */
json_t *gm_result_json(const gm_sim_config *cfg, const gm_sim_result *r, const char *command);
/* Metrics of one series (tenant or device) as a JSON object. */
json_t *gm_metrics_json(const gm_metrics *m, uint64_t capacity_bytes);
/* Write to path atomically (temp file + rename). */
int gm_json_write(json_t *root, const char *path, gm_err *err);

#endif
