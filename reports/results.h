/*
 * results.h - every result gmsim writes as JSON, from the typed results of
 * sim/ and study/. Above all "gmsim-result/1", the one format that
 * `gmsim run --json`, `gmsim compare --json`, `gmreplay -o`,
 * `gmsim validate` and `gmsim report` write and read; and the documents
 * built around it (compare, fit, fidelity, gmreplay's measurement).
 * Written with jansson.
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
#include "sim/measured.h"
#include "study/compare.h"
#include "study/fidelity.h"
#include "study/fit.h"
#include "study/leak.h"
#include "study/site_top.h"
#include "study/explain.h"
#include "study/largest.h"
#include "study/tune.h"
#include "traces/trace_scan.h"

#define GM_RESULT_SCHEMA "gmsim-result/1"
#define GM_COMPARE_SCHEMA "gmsim-compare/1"
#define GM_FIT_SCHEMA "gmsim-fit/1"
#define GM_TUNE_SCHEMA "gmsim-tune/1"
#define GM_LARGEST_SCHEMA "gmsim-fit-largest/1"

/* The whole result of one run; cfg gives the inputs (tenant specs, latency). */
json_t *gm_result_json(const gm_sim_config *cfg, const gm_sim_result *r, const char *command);
/* Metrics of one series (tenant or device) as a JSON object. */
json_t *gm_metrics_json(const gm_metrics *m, uint64_t capacity_bytes);
/* Write to path atomically (temp file + rename). */
int gm_json_write(json_t *root, const char *path, gm_err *err);
/* A JSON string of text from a trace, a file name or the command line:
 * never NULL and never dropped; bytes that are not UTF-8 are written as
 * \xNN (base/strbuf.h, gm_sb_utf8). NULL gives "". */
json_t *gm_json_text(const char *s);

/* results_check.c: the numbers of a results document read back (file name
 * `name`): finite, from 0 to 2^63, fractions from 0 to 1; GM_EINVAL naming
 * the first field that is not (e.g. "inputs.capacity_bytes is -1"). */
int gm_results_check(json_t *root, const char *name, gm_err *err);

/* compare_json.c: {"schema":"gmsim-compare/1","inputs":..,"ranking":[..],
 * "winner":..,"bound":..,"timing":{..},"results":[gm_result_json per policy]} */
json_t *gm_compare_json(const gm_sim_config *base, const gm_compare *c);
/* {"schema":"gmsim-fit/1","mode","inputs","results":[per policy],"timing"} */
json_t *gm_fit_json(const gm_sim_config *base, const gm_fit *f);
/* largest_json.c: `gmsim fit --largest DIM`: {"schema":"gmsim-fit-largest/1",
 * "dimension", "recordings":[{"path","value"}], "fit":{"allocations",
 * "constant","linear","quadratic"}, "results":[{"policy","found","largest",
 * "first_fail","capacity_bytes","usable_bytes","peak_reserved_bytes",
 * "peak_live_bytes","simulations"}]} */
json_t *gm_largest_json(const char *dim, const gm_scale_input *in, size_t n_in,
                        const gm_scale_stats *st, const gm_largest *r, size_t n);
/* Common "inputs" object of compare and fit: traces, device, allocator,
 * scope, policies. */
json_t *gm_compare_inputs_json(const gm_sim_config *base, char *const *specs, size_t n,
                               const gm_sim_result *any);

/* tune_json.c: {"schema":"gmsim-tune/1","traces","capacity_bytes","policy",
 * "torch_rules","grid","settings":[ranked, then refused/failed],"best",
 * "paste","fit":{best_bytes, default_bytes}} */
json_t *gm_tune_json(const gm_sim_config *cfg, const gm_tune *t);

/* memory_summary.c: torch.cuda.memory_stats() of s, a flat object with
 * PyTorch's keys ("allocated_bytes.all.current", ..., "num_ooms",
 * "max_split_size": -1 when unset) in its sorted order. */
json_t *gm_memory_stats_json(const gm_alloc_stats *s);

/* explain_json.c: {"live_at_first_oom":{by_category..},"live_at_peak","fixes":[..]} */
json_t *gm_explain_json(const gm_live_set *at, const gm_live_set *peak, const gm_fixes *fx);

/* fidelity_json.c: everything gm_fidelity holds (counts, first divergence,
 * reserved error, block placement, every call). */
json_t *gm_fidelity_json(const gm_fidelity *f);

/* trace_info.c: `gmsim info --json`, the summary of one trace scan. */
json_t *gm_trace_info_json(const gm_trace_scan *s, const gm_trace_reader *r, const char *name);
/* leak_out.c: the "iterations" object of info --json and of the report's
 * trace statistics (study/leak.h). */
json_t *gm_leak_json(const gm_leak_report *r);
/* site_top_out.c: the "top_sites" object of run --json and info --json
 * (README "Call sites"). */
json_t *gm_top_sites_json(const gm_top_sites *ts, size_t k);

/* measured_json.c: gmreplay's "measured" object (sim/measured.h has the
 * schema) and its whole result: gm_result_json(cfg, r, "replay") with
 * "backend": "cuda" and "measured". gm_lat_json is one latency kind:
 * {"calls", "total_ns", "mean_ns", "min_ns", "p50_ns", "p90_ns", "p99_ns",
 * "max_ns"}, quantiles by GSL over the sorted samples (it sorts them). */
json_t *gm_lat_json(gm_lat_samples *s);
json_t *gm_measured_json(gm_measured *m);
json_t *gm_replay_result_json(const gm_sim_config *cfg, const gm_sim_result *r, gm_measured *m);

#endif
