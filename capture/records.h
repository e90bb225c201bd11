/*
 * records.h - gmcapture's CPU side: CUPTI activity records in, trace rows out.
 *
 * CUPTI hands the injection library buffers of activity records from its own
 * worker thread, in no particular order across buffers (a buffer is delivered
 * when it is full or flushed, and several fill at once). The trace wants rows
 * in non-decreasing time, relative to the capture start. The recorder sits in
 * between:
 *
 *   gmc_recorder_buffer()  (CUPTI's thread)  convert + filter, park the rows
 *   gmc_recorder_drain()   (flush thread)    sort what is older than a
 *                                             watermark, assign phases, pair
 *                                             frees with allocs, emit rows
 *
 * Reordering: a drain with watermark W emits every parked record whose CUPTI
 * timestamp is < W, in time order, and keeps the rest parked. inject.c drains
 * every second with W = "now - reorder window" and at exit with W = infinity,
 * so memory is O(window + live allocations), never O(run length). A record
 * that arrives after rows later than it were written ("late") is clamped to
 * the last written time and counted; it is never dropped and never makes the
 * trace go backwards.
 *
 * Frees of allocations made before the capture started (a late attach, or an
 * alloc CUPTI dropped) are kept: the FREE row is written, and the allocation
 * goes into /initial_state as a GM_INIT_SEGMENT plus a GM_INIT_BLOCK of the
 * same address and size (a driver allocation is both its own segment and its
 * only block), so a reader sees memory that existed before the first event and
 * then goes away. They are counted in gmc_stats.pre_capture_frees.
 *
 * Phases come from NVTX ranges (CUPTI_ACTIVITY_KIND_MARKER): an allocation or
 * free gets the phase of the innermost range open at its time whose name
 * contains "forward", "backward" or "optimizer" (case-insensitive). The open
 * ranges are kept process-wide, not per thread: PyTorch runs backward on its
 * autograd device threads while the Python thread that pushed "backward"
 * waits, so the range and the allocations it covers are on different threads.
 *
 * Everything here is plain C over the CUPTI *headers*: no CUPTI or CUDA call,
 * so the tests feed synthetic records without a GPU.
 */
#ifndef GM_CAPTURE_RECORDS_H
#define GM_CAPTURE_RECORDS_H

#include <stddef.h>
#include <stdint.h>

#include <cupti_activity.h>

#include "traces/trace.h"

/* Memory kinds to keep: a bit mask over CUpti_ActivityMemoryKind. */
#define GMC_KIND_BIT(k) (1u << (unsigned)(k))
#define GMC_KINDS_DEFAULT GMC_KIND_BIT(CUPTI_ACTIVITY_MEMORY_KIND_DEVICE)

/* Parse "device,managed,pinned" (any subset, comma-separated) into a mask. */
int gmc_kinds_parse(const char *list, uint32_t *mask, gm_err *err);
/* Format a mask as "device,managed"; returns buf. */
char *gmc_kinds_format(uint32_t mask, char *buf, size_t len);

/* Most NVTX ranges open at once; deeper nesting drops the outermost (counted). */
#define GMC_MAX_OPEN_RANGES 256

typedef struct gmc_opts {
    int device;     /* CUDA device ordinal to keep; -1 = that of the earliest kept alloc */
    uint32_t kinds; /* GMC_KIND_BIT mask; 0 means GMC_KINDS_DEFAULT                 */
    uint64_t t0_ns; /* CUPTI timestamp of the capture start: trace t_ns = ts - t0  */
} gmc_opts;

/* What happened to the records; every record lands in exactly one of the first group. */
typedef struct gmc_stats {
    uint64_t records;         /* records handed to the recorder                      */
    uint64_t mem_records;     /* MEMORY2 records kept (alloc + free)                  */
    uint64_t marker_records;  /* MARKER records kept                                  */
    uint64_t pool_records;    /* MEMORY_POOL records kept (as instant markers)         */
    uint64_t filtered_kind;   /* memory records of a kind not asked for               */
    uint64_t filtered_device; /* records of another device                            */
    uint64_t ignored;         /* other kinds, invalid ops, size 0 or > 2^48, sync marks */
    uint64_t untimed;         /* records with timestamp 0 (CUPTI could not time them)   */
    uint64_t parked_nomem;    /* records lost because host malloc failed               */

    uint64_t events;            /* rows emitted to /events (incl. repairs)          */
    uint64_t markers;           /* rows emitted to /markers                          */
    uint64_t pre_capture_frees; /* frees of allocations made before capture start    */
    uint64_t double_frees;      /* frees that cannot be paired (already freed, or an
                                   unknown address with no size): skipped           */
    uint64_t repaired_allocs;   /* alloc at a live address: a FREE was inserted first */
    uint64_t late;              /* records older than rows already written: clamped  */
    uint64_t unmatched_pops;    /* NVTX range ends without a start: skipped          */
    uint64_t range_overflow;    /* ranges dropped because > GMC_MAX_OPEN_RANGES open */
    uint64_t dropped;           /* records CUPTI itself dropped (GetNumDroppedRecords) */
    uint64_t live_allocs;       /* allocations still live at the last drain          */
} gmc_stats;

/* Same shape as cuptiActivityGetNextRecord, so tests can iterate their own buffers. */
typedef CUptiResult (*gmc_next_record_fn)(uint8_t *buffer, size_t valid_bytes,
                                          CUpti_Activity **record);

/* Rows produced by a drain. Arrays grow as needed; gmc_rows_free releases them. */
typedef struct gmc_rows {
    gm_event *ev;
    size_t nev, cap_ev;
    gm_marker *mk;
    size_t nmk, cap_mk;
} gmc_rows;

void gmc_rows_clear(gmc_rows *rows); /* nev = nmk = 0, keep the memory */
void gmc_rows_free(gmc_rows *rows);

typedef struct gmc_recorder gmc_recorder;

int gmc_recorder_create(const gmc_opts *opts, gmc_recorder **out, gm_err *err);
void gmc_recorder_free(gmc_recorder *r);

/*
 * Convert and park one record (any kind; unknown kinds are counted and
 * ignored). Thread-safe; copies what it needs (marker names included), so the
 * buffer may be freed afterwards.
 */
void gmc_recorder_add(gmc_recorder *r, const CUpti_Activity *rec);

/*
 * The buffer-completion path: iterate a completed CUPTI buffer with `next`
 * (cuptiActivityGetNextRecord in production) and add every record. Returns the
 * number of records read; stops at the first non-success status, as CUPTI's
 * documentation says to.
 */
size_t gmc_recorder_buffer(gmc_recorder *r, uint8_t *buf, size_t valid_bytes,
                           gmc_next_record_fn next);

/* Account records CUPTI dropped (cuptiActivityGetNumDroppedRecords). Thread-safe. */
void gmc_recorder_add_dropped(gmc_recorder *r, uint64_t n);

/*
 * Emit, into rows (appended), every parked record with CUPTI timestamp <
 * watermark_ns, in time order; UINT64_MAX emits everything. Drains are
 * serialized internally. GM_ENOMEM if the rows cannot grow (the records are
 * then lost and counted in parked_nomem).
 */
int gmc_recorder_drain(gmc_recorder *r, uint64_t watermark_ns, gmc_rows *rows, gm_err *err);

/* Rows for /initial_state found so far (see the file comment). Valid until the next drain. */
const gm_init_row *gmc_recorder_initial(gmc_recorder *r, size_t *n);

/* The device being recorded: opts.device, else that of the earliest alloc drained
 * so far (earliest in time, whatever order CUPTI delivered the buffers in), else -1. */
int gmc_recorder_device(gmc_recorder *r);

void gmc_recorder_stats(gmc_recorder *r, gmc_stats *st);

/* Phase of an NVTX range name (forward/backward/optimizer, case-insensitive). */
int gmc_phase_of_name(const char *name);
/* Whether a marker name means "an iteration starts" (iteration, iter, step ...). */
int gmc_is_iteration_name(const char *name);

#endif
