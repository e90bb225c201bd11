/*
 * html.h - the self-contained HTML report (`run --html`, `compare --html`,
 * `gmsim report`).
 *
 * Input is result JSON, never simulator structs, so a report can be made
 * later or elsewhere from saved results: a gmsim-result/1 (one run) or a
 * gmsim-compare/1 ({"results": [gmsim-result/1...], "ranking", "winner"}).
 * Ranking and winner are taken from the document when present (entries may
 * be result indexes, policy strings, or objects with "index"/"policy");
 * otherwise runs are ranked by OOMs, fragmentation, utilization, driver
 * time, with unrealizable policies (inputs.policy_realizable = false: the
 * oracle) shown as the bound, never the winner.
 *
 * The page has no external resources (no network, scripts, fonts or
 * images; a Content-Security-Policy forbids them) and reads without
 * JavaScript; a small inline script, allowed by nonce, adds a hover cursor
 * synchronized across every chart, drag-to-zoom on every time chart and the
 * allocation bands' read-out. All text from traces and results is
 * escaped (strbuf.h). Optional members rendered when present: a tenant's
 * "trace_stats" (trace_stats.h: size histogram, categories, trace
 * metadata, the allocations drawn as bands) and "policy_report" (any object, shown as a key/value
 * table). Size: charts use REP_NCOL columns and at most GM_TOP_ALLOCS bands per trace whatever the
 * trace length, so a page is ~150 KB plus ~65 KB per run.
 */
#ifndef GM_HTML_H
#define GM_HTML_H

#include <jansson.h>

#include "base/err.h"
#include "base/strbuf.h"

/* Append the page for result to out. GM_EINVAL when result is not gmsim
 * results; GM_ENOMEM when out failed to grow. */
int gm_html_render(json_t *result, gm_strbuf *out, gm_err *err);

/* Render and write to path atomically (temporary file + rename). */
int gm_html_write_file(json_t *result, const char *path, gm_err *err);

#endif
