/*
 * import_torch.h - PyTorch memory snapshots (torch.cuda.memory._dump_snapshot)
 * to gmsim traces, with no Python: the pickle is read by the safe unpickler
 * (unpickle.h), which refuses anything but plain data.
 *
 * What the snapshot files contain is traces/SNAPSHOTS.md; what the importer
 * makes of them (event mapping, time, initial-state reconstruction,
 * categories, allocator settings, what is refused) is traces/IMPORT.md.
 *
 * The importer works in memory: a snapshot is at most a few million entries,
 * and the reconstruction of the memory that existed before the first entry
 * walks the trace backwards from the dump-time state, so the whole trace is
 * needed anyway. The result is one gm_import_trace per CUDA device, ready for
 * gm_import_trace_write(). import_rmm.h produces the same struct.
 */
#ifndef GM_IMPORT_TORCH_H
#define GM_IMPORT_TORCH_H

#include <stddef.h>
#include <stdint.h>

#include "trace.h"
#include "unpickle.h"

/* Snapshot trace actions (SNAPSHOTS.md §6), in this order in the counts below. */
enum gm_torch_action {
    GM_TA_ALLOC = 0,
    GM_TA_FREE_REQUESTED,
    GM_TA_FREE_COMPLETED,
    GM_TA_SEGMENT_ALLOC,
    GM_TA_SEGMENT_FREE,
    GM_TA_SEGMENT_MAP,
    GM_TA_SEGMENT_UNMAP,
    GM_TA_SNAPSHOT,
    GM_TA_OOM,
    GM_TA_OTHER, /* an action this gmsim does not know: skipped and counted */
    GM_TA_COUNT
};

/* Name of a gm_torch_action ("alloc", ..., "other"). */
const char *gm_torch_action_name(int action);

/* One imported trace: one process on one device, as gm_trace_create wants it. */
typedef struct gm_import_trace {
    int device;         /* CUDA device index (RMM: 0)                         */
    gm_trace_meta meta; /* owned strings                                      */
    gm_event *events;   /* n_events rows of /events, in order                 */
    size_t n_events;
    gm_init_row *init; /* /initial_state: segments first, then blocks         */
    size_t n_init;
    gm_marker *markers; /* /markers                                           */
    size_t n_markers;
    gm_site *sites; /* /sites: rows[k-1] is site k of events and blocks; owned strings */
    size_t n_sites;

    /* What the import found, for messages, `gmsim fidelity` and tests. */
    uint64_t n_entries;             /* source records (trace entries, CSV rows) */
    uint64_t n_action[GM_TA_COUNT]; /* per action (torch); RMM uses alloc, free_completed, oom */
    uint64_t dump_segments;         /* segments at dump time (torch)     */
    uint64_t dump_reserved_bytes;   /* their bytes                        */
    uint64_t init_segments;         /* /initial_state segment rows        */
    uint64_t init_segment_bytes;
    uint64_t init_blocks;              /* /initial_state block rows          */
    uint64_t init_block_bytes;         /* their requested bytes ("pre-existing bytes") */
    uint64_t init_guessed_sizes;       /* blocks whose block size was inferred (IMPORT.md) */
    uint64_t live_at_end;              /* blocks live after the last event   */
    uint64_t cat_allocs[GM_CAT_COUNT]; /* trace allocations per category     */
    uint64_t cat_init[GM_CAT_COUNT];   /* initial-state blocks per category  */
    uint64_t time_repairs;             /* timestamps that went backwards (clamped) */
    uint64_t skipped;                  /* records skipped (unknown actions, 0-byte allocations) */
    uint64_t init_expandable;          /* expandable segments rebuilt from mapped ranges */
    uint64_t init_private;             /* segments of CUDA-graph / MemPool private pools */
    uint64_t n_empty_cache;            /* torch.cuda.empty_cache() bursts (events emitted) */
    uint64_t n_release_bursts;         /* release-and-retry (device full) bursts  */
    uint64_t deferred_frees;           /* free_requested events written (record_stream) */
    int order_only_time;               /* 1: no timestamps, t_ns = index * 1000 */
    char avail_source[384];            /* how the device window was inferred ("" if not) */
    char summary[512];                 /* one line: what is in it (printed by gmsim import) */
} gm_import_trace;

void gm_import_trace_free(gm_import_trace *t); /* frees contents, not t itself */

/* Write t as a trace file at path (opts may be NULL: uncompressed). */
int gm_import_trace_write(const gm_import_trace *t, const char *path,
                          const gm_trace_write_opts *opts, gm_err *err);

/* What a snapshot frame's filename says it is (IMPORT.md, "Call sites"):
 * the site of a stack is its innermost GM_FRAME_USER frame, else its
 * innermost Python frame (any kind but C++), else unknown. */
enum gm_frame_kind {
    GM_FRAME_USER = 0,        /* the program's own Python (and other libraries') */
    GM_FRAME_TORCH,           /* .../torch/...py                                  */
    GM_FRAME_PYTHON_INTERNAL, /* <frozen ...>, <string>, the stdlib, threading, runpy */
    GM_FRAME_CPP,             /* C++ (.cpp, .h, .cc, "??", no file)                */
};
int gm_frame_kind(const char *filename);

/* Options of the snapshot importer. */
typedef struct gm_torch_opts {
    const char *name;            /* input name for messages and `workload` ("snapshot") */
    const char *command;         /* recorded in meta.command ("" when NULL)             */
    int device;                  /* import only this device; -1 = every device with data */
    uint64_t device_total_bytes; /* --device-total / --gpu: the card's memory (0 = unknown) */
    const char *device_name;     /* --gpu: its name (NULL = unknown)                     */
} gm_torch_opts;

/* A device whose data could not be imported (the others still are). */
typedef struct gm_torch_failure {
    int device;
    char msg[sizeof(((gm_err *)0)->msg)];
} gm_torch_failure;

/* A whole snapshot: one trace per device that has segments or trace entries. */
typedef struct gm_torch_import {
    const char *layout; /* "current", "older (no time_us)", "PyTorch 2.0", "legacy list" */
    size_t n;
    gm_import_trace *dev; /* n traces, by ascending device index */
    size_t n_failed;
    gm_torch_failure *failed; /* devices that failed, by ascending index */
} gm_torch_import;

/* Import a parsed snapshot, every device on its own: a device whose data is
 * damaged is listed in `failed` and the others are imported. On error (the
 * snapshot as a whole is unusable, or every device failed: err then holds
 * the first failure) *out is NULL and err names the input, the entry or
 * segment, and what is wrong. */
int gm_torch_import_value(const pkl_value *root, const gm_torch_opts *opts, gm_torch_import **out,
                          gm_err *err);

/* Read, parse (safely) and import the snapshot at path. */
int gm_torch_import_file(const char *path, const gm_torch_opts *opts, gm_torch_import **out,
                         gm_err *err);

void gm_torch_import_free(gm_torch_import *imp);

/*
 * Translate a snapshot's `allocator_settings` dict into PYTORCH_CUDA_ALLOC_CONF
 * form (what traces/alloc_conf.c parses): settings at their defaults are left
 * out, so PyTorch's defaults give "". Fields with no effect on the device
 * allocator, or unknown to gmsim, are listed in `dropped` (", "-separated).
 */
int gm_torch_settings_conf(const pkl_value *settings, char *conf, size_t conf_len, char *dropped,
                           size_t dropped_len, gm_err *err);

#endif
