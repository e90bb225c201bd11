/*
 * memviz.h - a simulated run as a PyTorch memory snapshot
 * (`gmsim export --memory-viz`): the dict torch.cuda.memory._snapshot()
 * returns, pickled, so that PyTorch's own viewer (torch.cuda._memory_viz,
 * pytorch.org/memory_viz) shows the allocator model's decisions.
 *
 * What it holds (reports/README.md, "PyTorch snapshots of a simulated run"):
 *   segments         the model's segments when the run ended (completed, or
 *                    aborted at its OOM), each cut into its blocks in
 *                    address order: active_allocated (a live tensor),
 *                    active_awaiting_free (freed by the program, waiting for
 *                    its free_completed), inactive (cached, free)
 *   device_traces    [[entry, ...]]: one device, the run's entries in the
 *                    order the model made them: alloc, free_requested,
 *                    free_completed, segment_alloc / segment_free (cudaMalloc,
 *                    cudaFree), segment_map / segment_unmap (expandable
 *                    segments' pages), oom; addresses are the model's
 *   allocator_settings  the settings the model ran with, as PyTorch records
 *                    them
 * Frames come from the trace's call sites (/sites): an entry carries the
 * stack of its event's site; the releases of an empty_cache event carry one
 * frame naming torch.cuda.empty_cache (so that `gmsim import` reads them as
 * such). Memory before the first event (the initial state the model
 * rebuilt) is in `segments` and has no entries, as in a real snapshot whose
 * recording started mid-run.
 */
#ifndef GM_MEMVIZ_H
#define GM_MEMVIZ_H

#include <stdint.h>

#include "base/err.h"
#include "sim/engine.h"

typedef struct gm_memviz_summary {
    uint64_t entries, segments, blocks, live_blocks, ooms;
    uint64_t bytes; /* the pickle's size */
    int aborted;    /* the run stopped at an OOM */
} gm_memviz_summary;

/* Simulate cfg (one trace, one pass) and write its snapshot to out_path
 * (base/outfile.h rules), as it is made. GM_EUSAGE for several traces or
 * --repeat. */
int gm_memviz_export(const gm_sim_config *cfg, const char *out_path, gm_memviz_summary *sum,
                     gm_err *err);

#endif
