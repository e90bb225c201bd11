/*
 * trace.h - the gmsim trace: one recorded process on one device.
 *
 * On disk it is HDF5 (schema version 2, see traces/FORMAT.md). In memory the
 * simulator sees a stream of gm_event read in chunks, so memory use is
 * O(chunk + live allocations), never O(trace length).
 *
 * The reader validates every event it hands out (op, size, time order,
 * category, phase) and reports the first bad one with the file name, the
 * event index and the fix. Semantic checks that need allocation state (free
 * of an unknown address, double free) belong to the engine, which has it.
 */
#ifndef GM_TRACE_H
#define GM_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

/* Schema version this gmsim writes, and the oldest it reads (FORMAT.md,
 * "Versions"): version 2 added the segment_map / segment_unmap / empty_cache /
 * oom ops, the pool columns of /initial_state and the device_avail_* attributes. */
#define GM_TRACE_VERSION 2
#define GM_TRACE_MIN_VERSION 1
/* Largest size an event may carry: 2^48 bytes (256 TiB), far above any GPU. */
#define GM_TRACE_MAX_SIZE (1ull << 48)

/* What the reader accepts (FORMAT.md, "Limits"). A file beyond one is
 * refused, with the limit named, before any row is read. */
#define GM_TRACE_MAX_EVENTS (1ull << 40)     /* rows of /events                        */
#define GM_TRACE_MAX_TABLE_ROWS (1ull << 22) /* rows of /initial_state, of /markers    */
#define GM_TRACE_MAX_CHUNK_ROWS (1u << 20)   /* rows in one HDF5 chunk                 */
#define GM_TRACE_MAX_CHUNK_BYTES (64u << 20) /* bytes in one chunk, inflated           */
#define GM_TRACE_MAX_ROW_BYTES 4096          /* bytes of one row in the file           */
#define GM_TRACE_MAX_INFLATE 256             /* rows' bytes / stored bytes, compressed  */
#define GM_TRACE_MAX_ATTR_BYTES (1u << 20)   /* bytes of one string attribute          */
#define GM_TRACE_MAX_SITES_BYTES (64u << 20) /* bytes of /sites as stored (rows x row)  */
/* A call site's texts (FORMAT.md, "/sites"), each with its NUL: longer ones
 * are cut (the writer at a frame boundary of the stack, the reader anywhere). */
#define GM_SITE_NAME_MAX 256   /* "train.py:42 in forward"                  */
#define GM_SITE_STACK_MAX 3584 /* the stack, innermost frame first, a line each */

/* The isolated reader (FORMAT.md, "Isolation"): the child that reads the
 * HDF5 file may map this much memory beyond what it starts with, use
 * GM_TRACE_CHILD_CPU_S seconds of CPU to open the file plus one per piece
 * it is asked for, and must answer each request within
 * GM_TRACE_TIMEOUT_S seconds of wall time (environment variable
 * GMSIM_TRACE_TIMEOUT, in seconds, overrides it). */
#define GM_TRACE_CHILD_MEM_BYTES (1ull << 30)
#define GM_TRACE_CHILD_CPU_S 60
#define GM_TRACE_TIMEOUT_S 10

/* Event operation (column `op`). */
enum gm_op {
    GM_OP_ALLOC = 0,         /* tensor allocation: size = bytes requested   */
    GM_OP_FREE = 1,          /* tensor free: addr of an earlier alloc       */
    GM_OP_SEGMENT_ALLOC = 2, /* recorded allocator's own driver allocation  */
    GM_OP_SEGMENT_FREE = 3,  /* recorded allocator's own driver free        */
    /* version 2: */
    GM_OP_SEGMENT_MAP = 4,    /* recorded expandable segment mapped pages     */
    GM_OP_SEGMENT_UNMAP = 5,  /* recorded expandable segment unmapped pages   */
    GM_OP_EMPTY_CACHE = 6,    /* torch.cuda.empty_cache(): replayed by every model;
                                 size = bytes the recorded allocator released */
    GM_OP_OOM = 7,            /* an allocation of `size` bytes that failed in the
                                 recording (the program survived it): replayed
                                 as an attempt, freed at once if it succeeds;
                                 addr = the device_free PyTorch recorded       */
    GM_OP_FREE_REQUESTED = 8, /* the program let go of the block at addr, but
                                 the allocator may reuse it only at its later
                                 free (record_stream: free_completed waits for
                                 the other streams). Written only for such
                                 deferred frees; PyTorch's allocated_bytes
                                 falls here, its active_bytes at the free. */
    GM_OP_COUNT
};
/* Ops a version-1 file may hold (0..3). */
#define GM_OP_COUNT_V1 4

/* Driver-level ops that add to / take from the recorded reserve. */
static inline int gm_op_grows(int op)
{
    return op == GM_OP_SEGMENT_ALLOC || op == GM_OP_SEGMENT_MAP;
}
static inline int gm_op_shrinks(int op)
{
    return op == GM_OP_SEGMENT_FREE || op == GM_OP_SEGMENT_UNMAP;
}

/* Tensor category (column `category`), as PyTorch's memory profiler names them. */
enum gm_category {
    GM_CAT_UNKNOWN = 0,
    GM_CAT_PARAMETER = 1,
    GM_CAT_OPTIMIZER_STATE = 2,
    GM_CAT_INPUT = 3,
    GM_CAT_TEMPORARY = 4,
    GM_CAT_ACTIVATION = 5,
    GM_CAT_GRADIENT = 6,
    GM_CAT_AUTOGRAD_DETAIL = 7,
    GM_CAT_COUNT
};

/* Training phase (column `phase`). */
enum gm_phase {
    GM_PHASE_UNKNOWN = 0,
    GM_PHASE_FORWARD = 1,
    GM_PHASE_BACKWARD = 2,
    GM_PHASE_OPTIMIZER = 3,
    GM_PHASE_COUNT
};

/* One row of /events. Native layout; HDF5 converts to/from the file type. */
typedef struct gm_event {
    uint64_t t_ns;    /* time since trace start, non-decreasing             */
    uint64_t addr;    /* device address as recorded (an id, not reused live) */
    uint64_t size;    /* bytes requested (unrounded); segment bytes for segment ops */
    uint64_t stream;  /* CUDA stream handle as recorded (0 = default stream)  */
    uint8_t op;       /* enum gm_op                                          */
    uint8_t category; /* enum gm_category                                    */
    uint8_t phase;    /* enum gm_phase                                       */
    uint32_t id;      /* the allocation's live slot, 0 = none (FORMAT.md, column id;
                         event_ids.h); the writer sets it, a reader passes it on */
    uint32_t site;    /* call site: 0 = unknown, k = row k-1 of /sites (FORMAT.md);
                         never changes a replay, not in the trace hash            */
} gm_event;

/* One row of /initial_state: memory that existed before the first event.
 * Two parts with different meanings (FORMAT.md): the live blocks are the
 * job's tensors; the segments (and their mapped ranges) are what the
 * recorded allocator happened to cache. */
enum gm_init_kind {
    GM_INIT_SEGMENT = 0, /* a driver segment: addr, size = segment bytes (an
                            expandable segment: its reserved address range)  */
    GM_INIT_BLOCK = 1,   /* a live tensor block inside a segment: addr, size =
                            requested bytes, block_size = bytes it occupies   */
    GM_INIT_MAPPED = 2,  /* version 2: a mapped range of an expandable segment */
    GM_INIT_KIND_COUNT
};
/* Segment pool (column `pool`): which of PyTorch's block pools it feeds. */
enum gm_init_pool {
    GM_POOL_UNKNOWN = 0, /* not recorded (version 1): inferred from its size */
    GM_POOL_LARGE = 1,
    GM_POOL_SMALL = 2,
};
typedef struct gm_init_row {
    uint64_t addr;
    uint64_t size;
    uint64_t block_size; /* GM_INIT_BLOCK: allocated block bytes (0 = unknown) */
    uint64_t stream;
    uint8_t kind;       /* enum gm_init_kind */
    uint8_t category;   /* enum gm_category (blocks) */
    uint8_t pool;       /* segments: enum gm_init_pool                        */
    uint8_t expandable; /* segments: 1 = an expandable segment (VMM pages)     */
    /* segments: PyTorch's MempoolId_t; (0, 0) = the default pools, anything
     * else a CUDA-graph / MemPool private pool ordinary allocations never use */
    uint64_t pool_id0, pool_id1;
    uint32_t site; /* blocks: call site that allocated it, as gm_event.site */
} gm_init_row;

/* Marker kinds (column `kind` of /markers). */
enum gm_marker_kind {
    GM_MARK_ITERATION = 0,  /* start of a training iteration */
    GM_MARK_RANGE_PUSH = 1, /* NVTX range start              */
    GM_MARK_RANGE_POP = 2,  /* NVTX range end                */
    GM_MARK_INSTANT = 3,    /* NVTX mark / snapshot / oom     */
};
#define GM_MARKER_NAME_LEN 64
typedef struct gm_marker {
    uint64_t t_ns;
    uint8_t kind;
    char name[GM_MARKER_NAME_LEN]; /* NUL-terminated, truncated if longer */
} gm_marker;

/* Root attributes. Strings are heap-owned; gm_trace_meta_free releases them. */
typedef struct gm_trace_meta {
    int version;                 /* gmtrace_version of the file read (1 or 2)    */
    char *source;                /* cupti | torch-snapshot | rmm-log | synthetic:<model> */
    char *device_name;           /* "NVIDIA H200", "" if unknown                 */
    uint64_t device_total_bytes; /* 0 if unknown                                */
    char *created_utc;           /* ISO-8601                                     */
    char *command;               /* command line that produced the trace         */
    char *workload;              /* free text                                    */
    char *alloc_conf; /* recorded allocator settings (PYTORCH_CUDA_ALLOC_CONF form), "" if none */
    uint64_t dropped_records; /* records the capture lost (0 if none/unknown) */
    /* version 2: device memory that was available to the process (context
     * and other processes excluded), inferred from the recording
     * (FORMAT.md, "Device memory available"). 0 = unknown. */
    uint64_t device_avail_bytes;     /* the value to replay with           */
    uint64_t device_avail_min_bytes; /* it was at least this ...           */
    uint64_t device_avail_max_bytes; /* ... and less than this (0 = no bound) */
    char *device_avail_source;       /* how it was inferred, "" if unknown  */
    char *torch_version; /* PyTorch that recorded it: "2.9", a range "2.3-2.8", "" unknown */
    /* the events' ids pair allocations and frees as their addresses do
     * (gmsim wrote the id column, or gm_ids_assign numbered them): a replay
     * may index by id instead of hashing addresses. 2: seeded, the blocks of
     * /initial_state hold slots 1..B in table order and their frees carry
     * them (event_ids.h; gm_ids_assign_seeded); 1: numbered from the first
     * event, such frees carry 0. Not an attribute. */
    int dense_ids;
    /* rows of /sites (0: none), known at open: every event's and block's
     * site is checked to be at most this. Not an attribute. */
    uint64_t n_sites;
} gm_trace_meta;

void gm_trace_meta_init(gm_trace_meta *m); /* all strings "" and numbers 0, version 2 */
void gm_trace_meta_free(gm_trace_meta *m);
int gm_trace_meta_set(char **field, const char *value); /* strdup into field; GM_ENOMEM */

/* Compression of /events on write. */
enum gm_compress {
    GM_COMPRESS_NONE = 0,    /* fastest to read; what benchmarks use        */
    GM_COMPRESS_DEFLATE = 1, /* shuffle + deflate: smallest, slower to read */
};

typedef struct gm_trace_write_opts {
    enum gm_compress compress;
    int deflate_level;   /* 1..9, default 4                   */
    size_t chunk_events; /* default GM_TRACE_CHUNK_EVENTS     */
    /* optional: told the temporary file's path just before it is created
     * (a private temporary file for "-" or a FIFO: just after), so a
     * program can remove it should it be killed before gm_trace_finish
     * (the CLI does on SIGINT, SIGTERM, SIGHUP) */
    void (*on_temp)(void *ctx, const char *tmp_path);
    void *on_temp_ctx;
} gm_trace_write_opts;

#define GM_TRACE_CHUNK_EVENTS (64u * 1024u)

/* ---------------- reader ---------------- */
typedef struct gm_trace_reader gm_trace_reader;

/* Open and check the root attributes and datasets. On error *out is NULL and
 * err names the file and what to do.
 *
 * The HDF5 library runs in a child process (trace_isolate.c): it opens and
 * checks the file under memory and CPU limits, a seccomp filter and a
 * watchdog, and streams checked events to this process, so a file that
 * crashes or hangs libhdf5 ends in an error ("the HDF5 library failed on
 * this file"), never in a crash or hang of the caller. */
int gm_trace_open(const char *path, gm_trace_reader **out, gm_err *err);
/* The same reader without the child process: for benchmarks and the fuzz
 * harness, never for a file from elsewhere. */
int gm_trace_open_inprocess(const char *path, gm_trace_reader **out, gm_err *err);
void gm_trace_close(gm_trace_reader *r);

const gm_trace_meta *gm_trace_meta_get(const gm_trace_reader *r);
const char *gm_trace_path(const gm_trace_reader *r);
uint64_t gm_trace_nevents(const gm_trace_reader *r);

/*
 * Read up to cap events into buf, continuing where the last call stopped.
 * Returns the number read (0 at the end) or a negative GM_E* code; each event
 * is validated (see the file comment), and the first invalid one makes the
 * call fail with its global index in the message. Index of buf[0] is
 * gm_trace_position() before the call.
 */
int64_t gm_trace_read(gm_trace_reader *r, gm_event *buf, size_t cap, gm_err *err);
uint64_t gm_trace_position(const gm_trace_reader *r);
int gm_trace_rewind(gm_trace_reader *r); /* back to event 0 (for --repeat) */

/* Whole (small) tables. *rows is malloc'd (free() it); *n may be 0. */
int gm_trace_read_initial(gm_trace_reader *r, gm_init_row **rows, size_t *n, gm_err *err);
int gm_trace_read_markers(gm_trace_reader *r, gm_marker **rows, size_t *n, gm_err *err);

/* Call sites (/sites, FORMAT.md): row k-1 is site k of gm_event.site. The
 * texts are checked (at most GM_SITE_*_MAX bytes with the NUL, valid UTF-8,
 * no control character but the stack's newlines: anything else is '?'). */
typedef struct gm_site {
    const char *name;  /* "train.py:42 in forward"; never NULL */
    const char *stack; /* frames innermost first, one a line ("" if none) */
} gm_site;
typedef struct gm_sites {
    size_t n;
    gm_site *rows; /* n rows, pointing into text */
    char *text;
} gm_sites;
/* The whole table (n == meta n_sites); a trace without one gives n = 0. */
int gm_trace_read_sites(gm_trace_reader *r, gm_sites *out, gm_err *err);
void gm_sites_free(gm_sites *s);
/* Site k's short text; NULL for 0 (unknown) or beyond the table. */
const char *gm_sites_name(const gm_sites *s, uint32_t site);

/* ---------------- writer ---------------- */
typedef struct gm_trace_writer gm_trace_writer;

/* Create path. A regular file (or a new name; symlinks followed) is written
 * as TARGET.tmp.<pid> beside it and renamed by gm_trace_finish, so a crash
 * never leaves a half trace that looks whole; "-", /dev/stdout, a FIFO or a
 * device is built in a private temporary file and copied there, unchanged,
 * by gm_trace_finish (base/outfile.h). opts may be NULL. */
int gm_trace_create(const char *path, const gm_trace_meta *meta, const gm_trace_write_opts *opts,
                    gm_trace_writer **out, gm_err *err);
/* The file HDF5 is writing now (the temporary file above). */
const char *gm_trace_writer_file(const gm_trace_writer *w);
int gm_trace_append(gm_trace_writer *w, const gm_event *ev, size_t n, gm_err *err);
int gm_trace_write_initial(gm_trace_writer *w, const gm_init_row *rows, size_t n, gm_err *err);
int gm_trace_add_markers(gm_trace_writer *w, const gm_marker *m, size_t n, gm_err *err);
/* The /sites table, once, before gm_trace_finish: rows[k-1] is what events
 * with site k name. Texts longer than GM_SITE_*_MAX - 1 bytes are cut (the
 * stack at a line). */
int gm_trace_write_sites(gm_trace_writer *w, const gm_site *rows, size_t n, gm_err *err);
/* Update dropped_records (capture learns it late). */
void gm_trace_set_dropped(gm_trace_writer *w, uint64_t dropped);
/* Flush, close, rename into place. Frees w whatever the result. */
int gm_trace_finish(gm_trace_writer *w, gm_err *err);
/* Close and delete the temporary file. Frees w. */
void gm_trace_abort(gm_trace_writer *w);

/* Names for printing and parsing ("activation" <-> GM_CAT_ACTIVATION). -1 if unknown. */
const char *gm_op_name(int op);
const char *gm_category_name(int cat);
const char *gm_phase_name(int phase);
int gm_category_parse(const char *s);

#endif
