/*
 * gen_common.h - what every synthetic workload generator shares (gen_bert,
 * gen_gpt, gen_llama, gen_resnet): the event emitter, the time model, the
 * fake addresses, the parameter checks and the trace file writer.
 *
 * A generator owns one gm_gen: it holds the clock, the allocation counter,
 * a buffer of events flushed to the caller's sink, and a sticky error: once
 * a sink call fails, every later call is a no-op and the error is returned
 * by gm_gen_flush, so model code reads like the PyTorch program it
 * imitates, without an error check per tensor.
 *
 * Addresses are fake and never reused: GM_GEN_ADDR_BASE + 512 * (allocation
 * number). Time: GM_GEN_OP_NS of launch overhead per allocating op plus the
 * bytes it writes at GM_GEN_KERNEL_BYTES_PER_NS (host-to-device copies at
 * GM_GEN_H2D_BYTES_PER_NS); a free costs GM_GEN_FREE_NS. Output is a pure
 * function of the generator's parameters.
 *
 * Held mode (gm_gen_hold): events stay in a growing buffer instead of being
 * flushed, so a generator can decide a tensor's category when it dies
 * (saved for backward = activation, else temporary) and patch the alloc
 * event it emitted earlier (gm_gen_set_category).
 */
#ifndef GM_GEN_COMMON_H
#define GM_GEN_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "trace.h"

#define GM_GEN_BUF_EVENTS 4096
/* A plausible device base, one 512-byte step (PyTorch's minimum block) per allocation. */
#define GM_GEN_ADDR_BASE 0x7f0000000000ull
#define GM_GEN_ADDR_STEP 512ull
/* Time model (ns): op launch overhead, device throughput (bytes per ns) for
 * kernels and for host-to-device copies, cost of a free. */
#define GM_GEN_OP_NS 1500ull
#define GM_GEN_KERNEL_BYTES_PER_NS 256ull
#define GM_GEN_H2D_BYTES_PER_NS 12ull
#define GM_GEN_FREE_NS 200ull

/* What a generation produced (filled by a generator when asked). */
typedef struct gm_gen_stats {
    uint64_t events;          /* rows emitted                               */
    uint64_t allocs;          /* alloc rows                                 */
    uint64_t param_bytes;     /* bytes of category parameter                */
    uint64_t peak_live_bytes; /* max over time of live requested bytes      */
    uint64_t end_live_bytes;  /* live requested bytes after the last event  */
    uint64_t end_t_ns;        /* time of the last event                     */
    uint64_t markers;         /* iteration markers emitted                  */
} gm_gen_stats;

/* Receives events in order, in batches; returns GM_OK or a GM_E* code (and
 * fills err), which stops generation and is returned by the generator. */
typedef int (*gm_gen_event_sink)(void *ctx, const gm_event *ev, size_t n, gm_err *err);
/* Receives iteration markers (one per iteration start); may be NULL. */
typedef int (*gm_gen_marker_sink)(void *ctx, const gm_marker *m, size_t n, gm_err *err);

/* A live device tensor: addr 0 = not live. ev: index of its alloc event. */
typedef struct gm_gen_tensor {
    uint64_t addr;
    uint64_t size;
    uint8_t cat;
    uint64_t ev;
} gm_gen_tensor;

typedef struct gm_gen {
    const char *who; /* "gen_bert": prefix of internal errors */
    gm_gen_event_sink sink;
    gm_gen_marker_sink marks;
    void *ctx;
    gm_err *err;
    int rc; /* sticky: first error */
    uint64_t t_ns, nallocs, live_bytes;
    uint64_t stream; /* stream handle of every event */
    uint8_t phase;   /* enum gm_phase of the events emitted now */
    gm_gen_stats st;
    int hold;       /* 1: keep events until gm_gen_hold(g, 0) */
    uint64_t first; /* global index of buf[0] */
    size_t nbuf, cap;
    gm_event *buf;
    gm_event fixed[GM_GEN_BUF_EVENTS];
} gm_gen;

/* Set up g (no allocation). err receives the first error. */
void gm_gen_init(gm_gen *g, const char *who, uint64_t stream, gm_gen_event_sink sink,
                 gm_gen_marker_sink marks, void *ctx, gm_err *err);
/* Flush what is buffered and release the held buffer; returns the sticky code. */
int gm_gen_finish(gm_gen *g);
/* Send buffered events to the sink now (a no-op in held mode). */
void gm_gen_flush(gm_gen *g);
/* Held mode on (1) or off (0: flushes). */
void gm_gen_hold(gm_gen *g, int on);
/* Record the first error: GM_E* code and printf-style message (prefixed by who). */
void gm_gen_fail(gm_gen *g, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Allocate bytes of category cat, then let the op that writes them at
 * bytes_per_ns run. */
gm_gen_tensor gm_gen_alloc_at(gm_gen *g, uint64_t bytes, uint8_t cat, uint64_t bytes_per_ns);
gm_gen_tensor gm_gen_alloc(gm_gen *g, uint64_t bytes, uint8_t cat);
/* Free t (an error if it is not live) and mark it dead. */
void gm_gen_free(gm_gen *g, gm_gen_tensor *t);
/* Change the category of t: its alloc event too, when it is still held. */
void gm_gen_set_category(gm_gen *g, gm_gen_tensor *t, uint8_t cat);
/* Time of an in-place kernel over bytes (no allocation). */
void gm_gen_tick(gm_gen *g, uint64_t bytes);
/* An iteration marker "iteration IT" at the current time. */
void gm_gen_mark_iteration(gm_gen *g, int it);

/* Parameter checks shared by the generators: GM_EINVAL naming who, the
 * field and the allowed range (the product a*b*c*d*e within one trace
 * event's size limit). */
int gm_gen_check_range(const char *who, const char *name, long long v, long long lo, long long hi,
                       gm_err *err);
int gm_gen_check_bytes(const char *who, const char *what, uint64_t a, uint64_t b, uint64_t c,
                       uint64_t d, uint64_t e, gm_err *err);

/* A generator as the trace writer calls it. */
typedef int (*gm_gen_fn)(const void *params, gm_gen_event_sink sink, gm_gen_marker_sink marks,
                         void *ctx, gm_gen_stats *stats, gm_err *err);

/* What the written trace's root attributes say. */
typedef struct gm_gen_file {
    const char *source;          /* "synthetic:bert"                     */
    const char *workload;        /* the generator's describe() line      */
    uint64_t device_total_bytes; /* recorded device size                 */
    const char *command;         /* command line (may be NULL)           */
} gm_gen_file;

/*
 * Write a complete trace file: meta from f (device_name "", created_utc
 * now), /events and /markers from fn(params). opts may be NULL. On error no
 * file is left at path.
 */
int gm_gen_write_trace(const char *path, const gm_gen_file *f, const gm_trace_write_opts *opts,
                       gm_gen_fn fn, const void *params, gm_gen_stats *stats, gm_err *err);

#endif
