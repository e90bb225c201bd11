/*
 * table.h - the text tables gmsim prints on stdout, one per command, from
 * the typed results (the JSON writers are results.h; the HTML report is
 * html.h). What a table shows is the command's documented output: the run
 * summary, the compare ranking, the fit search, the fidelity check and the
 * validation.
 */
#ifndef GM_TABLE_H
#define GM_TABLE_H

#include <stdio.h>

#include "validate.h"
#include "base/err.h"
#include "sim/engine.h"
#include "study/compare.h"
#include "study/fidelity.h"
#include "study/fit.h"
#include "study/leak.h"
#include "study/site_top.h"
#include "study/explain.h"
#include "study/tune.h"
#include "traces/trace_scan.h"

/* table_sim.c: `gmsim run` (with the policy reports, kv.h), `gmsim
 * compare` (ranked, the winner and why, the bound, each policy's summary
 * line) and `gmsim fit` (capacity or tenants mode). */
void gm_table_run(FILE *f, const gm_sim_config *cfg, const gm_sim_result *r);
/* One OOM in a sentence, with its cause from the recorded state: the
 * allocator's cache was fragmented (enough free, no block large enough), the
 * device was full, or the allocator's own limit (a pool's maximum, a memory
 * fraction, a quota) was reached. `tenant`: name the tenant. */
void gm_oom_describe(const gm_oom *o, int tenant, char *buf, size_t len);
/* Just the cause part ("fragmentation: ...", "the device is full: ..."). */
void gm_oom_cause(const gm_oom *o, char *buf, size_t len);
void gm_table_compare(FILE *f, const gm_sim_config *cfg, const gm_compare *c);
/* compare -q: one line, "fits: WINNER, peak reserved X" or "OOM: nothing
 * realizable runs on X without OOM; the smallest card that does is Y (P)". */
void gm_compare_verdict(FILE *f, const gm_compare *c);
void gm_table_fit(FILE *f, const gm_sim_config *cfg, const gm_fit *fit);
/* 1 when a realizable policy fits (a capacity up to the maximum; tenants
 * mode: at least one copy); with f, that verdict as one line (fit -q). */
int gm_fit_verdict(FILE *f, const gm_fit *fit);
/* table_tune.c: `gmsim tune`, the ranked settings (the best ten, the
 * defaults and the recorded ones), what the best saves against the
 * defaults, fit's smallest card for both, and the line to paste. */
void gm_table_tune(FILE *f, const gm_sim_config *cfg, const gm_tune *t);

/* table_explain.c: after `gmsim run`'s table when it had OOMs: the live
 * tensors at the first OOM by category, the trace's peak, and each single
 * change re-simulated (fx may be NULL). */
void gm_table_explain(FILE *f, const gm_oom *first, const gm_live_set *at, const gm_live_set *peak,
                      const gm_fixes *fx);

/* trace_info.c: `gmsim info`, a trace summary (with the metadata, the
 * size histogram as bars, bytes by category and phase). */
/* name: what to call the trace (NULL: its path), e.g. the snapshot it was imported from. */
void gm_table_info(FILE *f, const gm_trace_scan *s, const gm_trace_reader *r, const char *name);
/* leak_out.c: `gmsim info`'s iterations (boundaries, the first and last ten
 * when there are many) and the leak verdict with its evidence. */
void gm_table_leak(FILE *f, const gm_leak_report *r);
/* site_top_out.c: --top-sites N (study/site_top.h) for each tenant: the N
 * call sites by bytes allocated and by live bytes at the peak, or
 * (as_profiler) PyTorch's profiler memory table (Name, CUDA Mem, Self CUDA
 * Mem, # of Calls); a trace without call sites gets a note saying so. */
void gm_table_top_sites(FILE *f, const gm_top_sites *ts, size_t k, int as_profiler);
/* What a trace without call sites gets instead of the table. */
const char *gm_top_sites_none_note(void);

/* memory_summary.c: torch.cuda.memory_summary()'s table (PyTorch's layout,
 * every line 77 columns) of one allocator's statistics; `device`: the ID
 * its title line names. */
void gm_table_memory_summary(FILE *f, const gm_alloc_stats *s, int device);

/* table_checks.c: one device of `gmsim fidelity` (input name, CUDA device);
 * `gmsim validate`'s table, and its one-line verdict. */
void gm_table_fidelity(FILE *f, const char *name, int device, const gm_fidelity *fid);
void gm_table_validate(FILE *f, const char *predicted, const char *measured,
                       const gm_validation *v);
void gm_table_validate_summary(FILE *f, const gm_validation *v);

/* validate_html.c: `gmsim validate --html`, a self-contained page with the
 * same table, written atomically (GM_EIO naming path). */
int gm_validate_html_write(const char *path, const char *predicted, const char *measured,
                           const gm_validation *v, gm_err *err);

#endif
