/*
 * test_capture_records.c - gmcapture's CPU side without a GPU: synthetic
 * CUPTI activity records (the real CUDA 13 structs) go through the
 * buffer-completion path, and the rows - and, through the session, the trace
 * file - are checked by hand.
 *
 * Synthetic buffers: records laid end to end, each 8-byte aligned like
 * CUPTI's (ACTIVITY_RECORD_ALIGNMENT), walked by test_next(), which stands in
 * for cuptiActivityGetNextRecord.
 */
#include "cu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capture/records.h"
#include "capture/session.h"

#define T0 1000000000ull /* capture start, CUPTI time */
#define MiB (1024ull * 1024ull)

/* ---------------- synthetic buffers ---------------- */

typedef struct tbuf {
    _Alignas(8) uint8_t data[16384];
    size_t used;
} tbuf;

/* A record of a kind the recorder does not handle: just the kind. */
typedef struct {
    CUpti_ActivityKind kind;
    uint32_t pad;
} other_rec;

static size_t rec_size(const CUpti_Activity *r)
{
    switch (r->kind) {
    case CUPTI_ACTIVITY_KIND_MEMORY2:
        return sizeof(CUpti_ActivityMemory4);
    case CUPTI_ACTIVITY_KIND_MARKER:
        return sizeof(CUpti_ActivityMarker2);
    case CUPTI_ACTIVITY_KIND_MEMORY_POOL:
        return sizeof(CUpti_ActivityMemoryPool3);
    default:
        return sizeof(other_rec);
    }
}

static CUptiResult test_next(uint8_t *buf, size_t valid, CUpti_Activity **rec)
{
    size_t off = *rec ? (size_t)((uint8_t *)*rec - buf) + rec_size(*rec) : 0;
    if (off >= valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
    *rec = (CUpti_Activity *)(buf + off);
    return CUPTI_SUCCESS;
}

static void put(tbuf *b, const void *rec, size_t n)
{
    size_t padded = (n + 7) & ~(size_t)7;
    CU_ASSERT_FATAL(b->used + padded <= sizeof b->data);
    memcpy(b->data + b->used, rec, n);
    b->used += padded;
}

static void put_mem(tbuf *b, int op, int kind, uint64_t addr, uint64_t bytes, uint64_t ts,
                    uint32_t dev)
{
    CUpti_ActivityMemory4 m;
    memset(&m, 0, sizeof m);
    m.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
    m.memoryOperationType = (CUpti_ActivityMemoryOperationType)op;
    m.memoryKind = (CUpti_ActivityMemoryKind)kind;
    m.address = addr;
    m.bytes = bytes;
    m.timestamp = ts;
    m.deviceId = dev;
    m.processId = 42;
    m.contextId = 1;
    m.streamId = CUPTI_INVALID_STREAM_ID;
    put(b, &m, sizeof m);
}

#define ALLOC CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION
#define RELEASE CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE
#define DEVICE CUPTI_ACTIVITY_MEMORY_KIND_DEVICE
#define MANAGED CUPTI_ACTIVITY_MEMORY_KIND_MANAGED
#define PINNED CUPTI_ACTIVITY_MEMORY_KIND_PINNED

static void alloc_at(tbuf *b, uint64_t addr, uint64_t bytes, uint64_t rel_ts)
{
    put_mem(b, ALLOC, DEVICE, addr, bytes, T0 + rel_ts, 0);
}

static void free_at(tbuf *b, uint64_t addr, uint64_t bytes, uint64_t rel_ts)
{
    put_mem(b, RELEASE, DEVICE, addr, bytes, T0 + rel_ts, 0);
}

static void put_marker(tbuf *b, uint32_t flags, uint32_t id, uint64_t rel_ts, const char *name)
{
    CUpti_ActivityMarker2 m;
    memset(&m, 0, sizeof m);
    m.kind = CUPTI_ACTIVITY_KIND_MARKER;
    m.flags = (CUpti_ActivityFlag)flags;
    m.timestamp = rel_ts ? T0 + rel_ts : 0;
    m.id = id;
    m.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
    m.name = name; /* NULL for an END, as CUPTI does */
    put(b, &m, sizeof m);
}

static void range_start(tbuf *b, uint32_t id, uint64_t rel_ts, const char *name)
{
    put_marker(b, CUPTI_ACTIVITY_FLAG_MARKER_START, id, rel_ts, name);
}

static void range_end(tbuf *b, uint32_t id, uint64_t rel_ts)
{
    put_marker(b, CUPTI_ACTIVITY_FLAG_MARKER_END, id, rel_ts, NULL);
}

static void feed(gmc_recorder *r, tbuf *b)
{
    size_t n = gmc_recorder_buffer(r, b->data, b->used, test_next);
    CU_ASSERT(n > 0);
    b->used = 0;
}

static gmc_recorder *new_recorder(int device, uint32_t kinds)
{
    gmc_opts o = {.device = device, .kinds = kinds, .t0_ns = T0};
    gmc_recorder *r = NULL;
    gm_err e;
    CU_ASSERT_FATAL(gmc_recorder_create(&o, &r, &e) == GM_OK);
    return r;
}

static void drain_all(gmc_recorder *r, gmc_rows *rows)
{
    gm_err e;
    CU_ASSERT_FATAL(gmc_recorder_drain(r, UINT64_MAX, rows, &e) == GM_OK);
}

static void check_ev(const gm_event *e, uint64_t t, int op, uint64_t addr, uint64_t size, int phase)
{
    CU_ASSERT_EQUAL(e->t_ns, t);
    CU_ASSERT_EQUAL(e->op, op);
    CU_ASSERT_EQUAL(e->addr, addr);
    CU_ASSERT_EQUAL(e->size, size);
    CU_ASSERT_EQUAL(e->phase, phase);
    CU_ASSERT_EQUAL(e->category, GM_CAT_UNKNOWN);
}

/* ---------------- names and options ---------------- */

static void test_kinds_and_names(void)
{
    uint32_t m = 0;
    char buf[64];
    gm_err e;
    CU_ASSERT_EQUAL(gmc_kinds_parse("device,managed", &m, &e), GM_OK);
    CU_ASSERT_EQUAL(m, GMC_KIND_BIT(DEVICE) | GMC_KIND_BIT(MANAGED));
    CU_ASSERT_STRING_EQUAL(gmc_kinds_format(m, buf, sizeof buf), "device,managed");
    CU_ASSERT_EQUAL(gmc_kinds_parse("Pinned", &m, &e), GM_OK);
    CU_ASSERT_EQUAL(m, GMC_KIND_BIT(PINNED));
    CU_ASSERT_EQUAL(gmc_kinds_parse("device,bogus", &m, &e), GM_EUSAGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "bogus"));
    CU_ASSERT_EQUAL(gmc_kinds_parse("", &m, &e), GM_EUSAGE);

    CU_ASSERT_EQUAL(gmc_phase_of_name("Forward"), GM_PHASE_FORWARD);
    CU_ASSERT_EQUAL(gmc_phase_of_name("model.forward_pass"), GM_PHASE_FORWARD);
    CU_ASSERT_EQUAL(gmc_phase_of_name("loss.BACKWARD"), GM_PHASE_BACKWARD);
    CU_ASSERT_EQUAL(gmc_phase_of_name("optimizer.step"), GM_PHASE_OPTIMIZER);
    CU_ASSERT_EQUAL(gmc_phase_of_name("data loading"), GM_PHASE_UNKNOWN);
    CU_ASSERT_EQUAL(gmc_phase_of_name(NULL), GM_PHASE_UNKNOWN);
    CU_ASSERT_TRUE(gmc_is_iteration_name("iteration"));
    CU_ASSERT_TRUE(gmc_is_iteration_name("Iteration 12"));
    CU_ASSERT_TRUE(gmc_is_iteration_name("step:3"));
    CU_ASSERT_TRUE(gmc_is_iteration_name("iter_7"));
    CU_ASSERT_FALSE(gmc_is_iteration_name("iterator"));
    CU_ASSERT_FALSE(gmc_is_iteration_name("optimizer.step"));
}

/* ---------------- record -> rows ---------------- */

static void test_alloc_free_pairs(void)
{
    gmc_recorder *r = new_recorder(-1, 0);
    gmc_rows rows = {0};
    tbuf b = {.used = 0};
    alloc_at(&b, 0x1000, 512, 100);
    alloc_at(&b, 0x2000, 3 * MiB, 200);
    free_at(&b, 0x1000, 512, 300);
    free_at(&b, 0x2000, 0, 400); /* size comes from the alloc, not the release record */
    feed(r, &b);
    drain_all(r, &rows);
    CU_ASSERT_EQUAL_FATAL(rows.nev, 4);
    check_ev(&rows.ev[0], 100, GM_OP_ALLOC, 0x1000, 512, GM_PHASE_UNKNOWN);
    check_ev(&rows.ev[1], 200, GM_OP_ALLOC, 0x2000, 3 * MiB, GM_PHASE_UNKNOWN);
    check_ev(&rows.ev[2], 300, GM_OP_FREE, 0x1000, 512, GM_PHASE_UNKNOWN);
    check_ev(&rows.ev[3], 400, GM_OP_FREE, 0x2000, 3 * MiB, GM_PHASE_UNKNOWN);
    CU_ASSERT_EQUAL(rows.ev[0].stream, 0); /* CUPTI_INVALID_STREAM_ID: not async */
    gmc_stats st;
    gmc_recorder_stats(r, &st);
    CU_ASSERT_EQUAL(st.records, 4);
    CU_ASSERT_EQUAL(st.mem_records, 4);
    CU_ASSERT_EQUAL(st.events, 4);
    CU_ASSERT_EQUAL(st.live_allocs, 0);
    CU_ASSERT_EQUAL(gmc_recorder_device(r), 0);
    gmc_rows_free(&rows);
    gmc_recorder_free(r);
}

static void test_out_of_order_buffers(void)
{
    gmc_recorder *r = new_recorder(-1, 0);
    gmc_rows rows = {0};
    gm_err e;
    tbuf b1 = {.used = 0}, b2 = {.used = 0};
    /* two buffers filled at once; CUPTI delivers the later one first */
    alloc_at(&b1, 0xa000, 64, 100);
    free_at(&b1, 0xa000, 64, 300);
    alloc_at(&b2, 0xb000, 128, 200);
    free_at(&b2, 0xb000, 128, 400);
    feed(r, &b2);
    feed(r, &b1);
    /* watermark: only records before t=250 are written now */
    CU_ASSERT_EQUAL(gmc_recorder_drain(r, T0 + 250, &rows, &e), GM_OK);
    CU_ASSERT_EQUAL_FATAL(rows.nev, 2);
    CU_ASSERT_EQUAL(rows.ev[0].t_ns, 100);
    CU_ASSERT_EQUAL(rows.ev[1].t_ns, 200);
    /* a straggler older than what was written: clamped, counted, kept */
    alloc_at(&b1, 0xc000, 32, 150);
    feed(r, &b1);
    drain_all(r, &rows);
    CU_ASSERT_EQUAL_FATAL(rows.nev, 5);
    uint64_t want_t[] = {100, 200, 200, 300, 400};
    uint64_t want_a[] = {0xa000, 0xb000, 0xc000, 0xa000, 0xb000};
    for (size_t i = 0; i < 5; i++) {
        CU_ASSERT_EQUAL(rows.ev[i].t_ns, want_t[i]);
        CU_ASSERT_EQUAL(rows.ev[i].addr, want_a[i]);
    }
    gmc_stats st;
    gmc_recorder_stats(r, &st);
    CU_ASSERT_EQUAL(st.late, 1);
    CU_ASSERT_EQUAL(st.live_allocs, 1); /* 0xc000 */
    gmc_rows_free(&rows);
    gmc_recorder_free(r);
}

static void test_pre_capture_free(void)
{
    gmc_recorder *r = new_recorder(-1, 0);
    gmc_rows rows = {0};
    tbuf b = {.used = 0};
    free_at(&b, 0x7000, 2 * MiB, 10);  /* allocated before the capture */
    free_at(&b, 0x7000, 2 * MiB, 20);  /* and freed again: a double free, skipped */
    free_at(&b, 0x8000, 0, 25);        /* unknown and no size: nothing to describe */
    alloc_at(&b, 0x7000, 1 * MiB, 30); /* the address comes back */
    free_at(&b, 0x7000, 1 * MiB, 40);
    feed(r, &b);
    drain_all(r, &rows);
    CU_ASSERT_EQUAL_FATAL(rows.nev, 3);
    check_ev(&rows.ev[0], 10, GM_OP_FREE, 0x7000, 2 * MiB, GM_PHASE_UNKNOWN);
    check_ev(&rows.ev[1], 30, GM_OP_ALLOC, 0x7000, 1 * MiB, GM_PHASE_UNKNOWN);
    check_ev(&rows.ev[2], 40, GM_OP_FREE, 0x7000, 1 * MiB, GM_PHASE_UNKNOWN);
    size_t n = 0;
    const gm_init_row *init = gmc_recorder_initial(r, &n);
    CU_ASSERT_EQUAL_FATAL(n, 2);
    CU_ASSERT_EQUAL(init[0].kind, GM_INIT_SEGMENT);
    CU_ASSERT_EQUAL(init[0].addr, 0x7000);
    CU_ASSERT_EQUAL(init[0].size, 2 * MiB);
    CU_ASSERT_EQUAL(init[1].kind, GM_INIT_BLOCK);
    CU_ASSERT_EQUAL(init[1].addr, 0x7000);
    CU_ASSERT_EQUAL(init[1].size, 2 * MiB);
    CU_ASSERT_EQUAL(init[1].block_size, 2 * MiB);
    gmc_stats st;
    gmc_recorder_stats(r, &st);
    CU_ASSERT_EQUAL(st.pre_capture_frees, 1);
    CU_ASSERT_EQUAL(st.double_frees, 2);
    gmc_rows_free(&rows);
    gmc_recorder_free(r);
}

static void test_repair_and_invalid(void)
{
    gmc_recorder *r = new_recorder(-1, 0);
    gmc_rows rows = {0};
    tbuf b = {.used = 0};
    other_rec k = {.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL};
    alloc_at(&b, 0x9000, 256, 10);
    alloc_at(&b, 0x9000, 512, 20);                /* its free was lost: a FREE is inserted */
    alloc_at(&b, 0xd000, 0, 30);                  /* size 0: ignored */
    put_mem(&b, ALLOC, DEVICE, 0xe000, 64, 0, 0); /* untimed: ignored */
    put(&b, &k, sizeof k);                        /* another kind: ignored */
    put_mem(&b, CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_INVALID, DEVICE, 0xf000, 64, T0 + 40, 0);
    feed(r, &b);
    drain_all(r, &rows);
    CU_ASSERT_EQUAL_FATAL(rows.nev, 3);
    check_ev(&rows.ev[0], 10, GM_OP_ALLOC, 0x9000, 256, GM_PHASE_UNKNOWN);
    check_ev(&rows.ev[1], 20, GM_OP_FREE, 0x9000, 256, GM_PHASE_UNKNOWN);
    check_ev(&rows.ev[2], 20, GM_OP_ALLOC, 0x9000, 512, GM_PHASE_UNKNOWN);
    gmc_stats st;
    gmc_recorder_stats(r, &st);
    CU_ASSERT_EQUAL(st.records, 6);
    CU_ASSERT_EQUAL(st.repaired_allocs, 1);
    CU_ASSERT_EQUAL(st.ignored, 3);
    CU_ASSERT_EQUAL(st.untimed, 1);
    gmc_rows_free(&rows);
    gmc_recorder_free(r);
}

static void test_dropped_accounting(void)
{
    gmc_recorder *r = new_recorder(-1, 0);
    gmc_stats st;
    gmc_recorder_add_dropped(r, 5);
    gmc_recorder_add_dropped(r, 2);
    gmc_recorder_stats(r, &st);
    CU_ASSERT_EQUAL(st.dropped, 7);
    gmc_recorder_free(r);
}

static void test_device_filter(void)
{
    /* explicit --device 1 */
    gmc_recorder *r = new_recorder(1, 0);
    gmc_rows rows = {0};
    tbuf b = {.used = 0};
    put_mem(&b, ALLOC, DEVICE, 0x100, 64, T0 + 1, 0);
    put_mem(&b, ALLOC, DEVICE, 0x200, 64, T0 + 2, 1);
    put_mem(&b, RELEASE, DEVICE, 0x100, 64, T0 + 3, 0);
    put_mem(&b, RELEASE, DEVICE, 0x200, 64, T0 + 4, 1);
    feed(r, &b);
    drain_all(r, &rows);
    CU_ASSERT_EQUAL_FATAL(rows.nev, 2);
    CU_ASSERT_EQUAL(rows.ev[0].addr, 0x200);
    CU_ASSERT_EQUAL(rows.ev[1].addr, 0x200);
    gmc_stats st;
    gmc_recorder_stats(r, &st);
    CU_ASSERT_EQUAL(st.filtered_device, 2);
    CU_ASSERT_EQUAL(gmc_recorder_device(r), 1);
    gmc_rows_free(&rows);
    gmc_recorder_free(r);

    /* default: the device of the earliest allocation (here 2), even when the
     * buffer holding it arrives after one with a later allocation */
    r = new_recorder(-1, 0);
    tbuf late = {.used = 0};
    put_mem(&late, ALLOC, DEVICE, 0x400, 64, T0 + 6, 0);
    put_mem(&b, ALLOC, DEVICE, 0x300, 64, T0 + 5, 2);
    feed(r, &late);
    feed(r, &b);
    CU_ASSERT_EQUAL(gmc_recorder_device(r), -1); /* decided when drained */
    drain_all(r, &rows);
    CU_ASSERT_EQUAL_FATAL(rows.nev, 1);
    CU_ASSERT_EQUAL(rows.ev[0].addr, 0x300);
    CU_ASSERT_EQUAL(gmc_recorder_device(r), 2);
    gmc_rows_free(&rows);
    gmc_recorder_free(r);
}

static void test_kind_filter(void)
{
    gmc_recorder *r = new_recorder(-1, 0); /* default: device memory only */
    gmc_rows rows = {0};
    tbuf b = {.used = 0};
    put_mem(&b, ALLOC, MANAGED, 0x100, 64, T0 + 1, 0);
    put_mem(&b, ALLOC, PINNED, 0x200, 64, T0 + 2, 0);
    put_mem(&b, ALLOC, DEVICE, 0x300, 64, T0 + 3, 0);
    feed(r, &b);
    drain_all(r, &rows);
    CU_ASSERT_EQUAL_FATAL(rows.nev, 1);
    CU_ASSERT_EQUAL(rows.ev[0].addr, 0x300);
    gmc_stats st;
    gmc_recorder_stats(r, &st);
    CU_ASSERT_EQUAL(st.filtered_kind, 2);
    gmc_rows_free(&rows);
    gmc_recorder_free(r);

    r = new_recorder(-1, GMC_KIND_BIT(DEVICE) | GMC_KIND_BIT(MANAGED));
    put_mem(&b, ALLOC, MANAGED, 0x100, 64, T0 + 1, 0);
    put_mem(&b, ALLOC, PINNED, 0x200, 64, T0 + 2, 0);
    feed(r, &b);
    drain_all(r, &rows);
    CU_ASSERT_EQUAL_FATAL(rows.nev, 1);
    CU_ASSERT_EQUAL(rows.ev[0].addr, 0x100);
    gmc_rows_free(&rows);
    gmc_recorder_free(r);
}

static void test_nvtx_phases(void)
{
    gmc_recorder *r = new_recorder(-1, 0);
    gmc_rows rows = {0};
    tbuf b1 = {.used = 0}, b2 = {.used = 0};
    put_marker(&b1, CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS, 1, 50, "iteration 0");
    range_start(&b1, 2, 100, "Forward");
    alloc_at(&b1, 0x10, 64, 150);
    range_end(&b1, 2, 200);
    /* the backward range arrives in a second buffer, delivered first */
    range_start(&b2, 3, 300, "backward");
    range_start(&b2, 4, 310, "aten::mm"); /* nested, names no phase */
    alloc_at(&b2, 0x20, 64, 320);
    range_end(&b2, 4, 330);
    range_end(&b2, 3, 400);
    range_start(&b2, 5, 500, "optimizer.step");
    free_at(&b2, 0x10, 64, 510);
    range_end(&b2, 5, 520);
    free_at(&b2, 0x20, 64, 600);
    range_end(&b2, 99, 610); /* never started */
    feed(r, &b2);
    feed(r, &b1);
    drain_all(r, &rows);
    CU_ASSERT_EQUAL_FATAL(rows.nev, 4);
    check_ev(&rows.ev[0], 150, GM_OP_ALLOC, 0x10, 64, GM_PHASE_FORWARD);
    check_ev(&rows.ev[1], 320, GM_OP_ALLOC, 0x20, 64, GM_PHASE_BACKWARD);
    check_ev(&rows.ev[2], 510, GM_OP_FREE, 0x10, 64, GM_PHASE_OPTIMIZER);
    check_ev(&rows.ev[3], 600, GM_OP_FREE, 0x20, 64, GM_PHASE_UNKNOWN);

    struct {
        uint64_t t;
        int kind;
        const char *name;
    } want[] = {
        {50, GM_MARK_ITERATION, "iteration 0"},     {100, GM_MARK_RANGE_PUSH, "Forward"},
        {200, GM_MARK_RANGE_POP, "Forward"},        {300, GM_MARK_RANGE_PUSH, "backward"},
        {310, GM_MARK_RANGE_PUSH, "aten::mm"},      {330, GM_MARK_RANGE_POP, "aten::mm"},
        {400, GM_MARK_RANGE_POP, "backward"},       {500, GM_MARK_RANGE_PUSH, "optimizer.step"},
        {520, GM_MARK_RANGE_POP, "optimizer.step"},
    };
    size_t nw = sizeof want / sizeof want[0];
    CU_ASSERT_EQUAL_FATAL(rows.nmk, nw);
    for (size_t i = 0; i < nw; i++) {
        CU_ASSERT_EQUAL(rows.mk[i].t_ns, want[i].t);
        CU_ASSERT_EQUAL(rows.mk[i].kind, want[i].kind);
        CU_ASSERT_STRING_EQUAL(rows.mk[i].name, want[i].name);
    }
    gmc_stats st;
    gmc_recorder_stats(r, &st);
    CU_ASSERT_EQUAL(st.unmatched_pops, 1);
    CU_ASSERT_EQUAL(st.marker_records, 10);
    gmc_rows_free(&rows);
    gmc_recorder_free(r);
}

static void test_long_marker_name_and_pool(void)
{
    gmc_recorder *r = new_recorder(-1, 0);
    gmc_rows rows = {0};
    tbuf b = {.used = 0};
    char longname[200];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    put_marker(&b, CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS, 1, 10, longname);
    CUpti_ActivityMemoryPool3 p;
    memset(&p, 0, sizeof p);
    p.kind = CUPTI_ACTIVITY_KIND_MEMORY_POOL;
    p.memoryPoolOperationType = CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_TRIMMED;
    p.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
    p.address = 0x7f00;
    p.size = 4096;
    p.timestamp = T0 + 20;
    put(&b, &p, sizeof p);
    feed(r, &b);
    drain_all(r, &rows);
    CU_ASSERT_EQUAL_FATAL(rows.nmk, 2);
    CU_ASSERT_EQUAL(strlen(rows.mk[0].name), GM_MARKER_NAME_LEN - 1);
    CU_ASSERT_EQUAL(rows.mk[0].kind, GM_MARK_INSTANT);
    CU_ASSERT_EQUAL(rows.mk[1].kind, GM_MARK_INSTANT);
    CU_ASSERT_PTR_NOT_NULL(strstr(rows.mk[1].name, "mempool trimmed"));
    gmc_rows_free(&rows);
    gmc_recorder_free(r);
}

/* ---------------- session: rows -> trace file ---------------- */

typedef struct open_ctx {
    const char *path;
    int calls;
    int device;
} open_ctx;

static int test_open(void *ctx, int device, gm_trace_writer **w, gm_err *err)
{
    open_ctx *c = ctx;
    gm_trace_meta m;
    gm_trace_meta_init(&m);
    gm_trace_meta_set(&m.source, "cupti");
    gm_trace_meta_set(&m.device_name, "Synthetic GPU");
    m.device_total_bytes = 80ull << 30;
    c->calls++;
    c->device = device;
    int rc = gm_trace_create(c->path, &m, NULL, w, err);
    gm_trace_meta_free(&m);
    return rc;
}

static void test_round_trip(void)
{
    const char *path = gm_test_tmp("capture.h5");
    open_ctx oc = {.path = path};
    gmc_opts o = {.device = -1, .kinds = 0, .t0_ns = T0};
    gmc_session *s = NULL;
    gm_err e;
    CU_ASSERT_FATAL(gmc_session_create(&o, test_open, &oc, &s, &e) == GM_OK);
    gmc_recorder *r = gmc_session_recorder(s);
    tbuf b1 = {.used = 0}, b2 = {.used = 0};
    free_at(&b1, 0x5000, 4096, 5); /* pre-capture */
    range_start(&b1, 1, 10, "forward");
    alloc_at(&b1, 0x1000, 1000, 20);
    range_end(&b1, 1, 30);
    range_start(&b2, 2, 40, "backward");
    alloc_at(&b2, 0x2000, 2000, 50);
    free_at(&b2, 0x1000, 1000, 60);
    range_end(&b2, 2, 70);
    feed(r, &b2);
    CU_ASSERT_EQUAL(gmc_session_drain(s, T0 + 25, &e), GM_OK); /* nothing older than 25 yet */
    CU_ASSERT_EQUAL(oc.calls, 0); /* the trace is opened at the first row */
    feed(r, &b1);                 /* b1 is older than b2 but arrives within the reorder window */
    gmc_recorder_add_dropped(r, 3);
    gmc_stats st;
    CU_ASSERT_EQUAL_FATAL(gmc_session_finish(s, &st, &e), GM_OK);
    CU_ASSERT_EQUAL(gmc_session_finish(s, NULL, &e), GM_OK); /* second call: no-op */
    gmc_session_free(s);
    CU_ASSERT_EQUAL(oc.calls, 1);
    CU_ASSERT_EQUAL(oc.device, 0);
    CU_ASSERT_EQUAL(st.dropped, 3);

    gm_trace_reader *rd = NULL;
    CU_ASSERT_FATAL(gm_trace_open(path, &rd, &e) == GM_OK);
    const gm_trace_meta *m = gm_trace_meta_get(rd);
    CU_ASSERT_STRING_EQUAL(m->source, "cupti");
    CU_ASSERT_STRING_EQUAL(m->device_name, "Synthetic GPU");
    CU_ASSERT_EQUAL(m->dropped_records, 3);
    gm_event ev[16];
    int64_t n = gm_trace_read(rd, ev, 16, &e);
    CU_ASSERT_EQUAL_FATAL(n, (int64_t)st.events);
    CU_ASSERT_EQUAL_FATAL(n, 4);
    check_ev(&ev[0], 5, GM_OP_FREE, 0x5000, 4096, GM_PHASE_UNKNOWN);
    check_ev(&ev[1], 20, GM_OP_ALLOC, 0x1000, 1000, GM_PHASE_FORWARD);
    check_ev(&ev[2], 50, GM_OP_ALLOC, 0x2000, 2000, GM_PHASE_BACKWARD);
    check_ev(&ev[3], 60, GM_OP_FREE, 0x1000, 1000, GM_PHASE_BACKWARD);
    gm_init_row *init = NULL;
    size_t ninit = 0;
    CU_ASSERT_FATAL(gm_trace_read_initial(rd, &init, &ninit, &e) == GM_OK);
    CU_ASSERT_EQUAL_FATAL(ninit, 2);
    CU_ASSERT_EQUAL(init[1].addr, 0x5000);
    CU_ASSERT_EQUAL(init[1].size, 4096);
    free(init);
    gm_marker *mk = NULL;
    size_t nmk = 0;
    CU_ASSERT_FATAL(gm_trace_read_markers(rd, &mk, &nmk, &e) == GM_OK);
    CU_ASSERT_EQUAL_FATAL(nmk, 4);
    CU_ASSERT_EQUAL(mk[0].kind, GM_MARK_RANGE_PUSH);
    CU_ASSERT_STRING_EQUAL(mk[0].name, "forward");
    CU_ASSERT_EQUAL(mk[3].kind, GM_MARK_RANGE_POP);
    CU_ASSERT_STRING_EQUAL(mk[3].name, "backward");
    free(mk);
    gm_trace_close(rd);
    unlink(path);
}

static void test_session_late_rows_stay_ordered(void)
{
    const char *path = gm_test_tmp("late.h5");
    open_ctx oc = {.path = path};
    gmc_opts o = {.device = -1, .kinds = 0, .t0_ns = T0};
    gmc_session *s = NULL;
    gm_err e;
    CU_ASSERT_FATAL(gmc_session_create(&o, test_open, &oc, &s, &e) == GM_OK);
    gmc_recorder *r = gmc_session_recorder(s);
    tbuf b = {.used = 0};
    alloc_at(&b, 0x1000, 100, 100);
    alloc_at(&b, 0x2000, 100, 300);
    feed(r, &b);
    CU_ASSERT_EQUAL(gmc_session_drain(s, T0 + 200, &e), GM_OK);
    free_at(&b, 0x1000, 100, 150); /* newer than what was written: in order */
    alloc_at(&b, 0x3000, 100, 50); /* older than t=100 already written: late, clamped */
    feed(r, &b);
    gmc_stats st;
    CU_ASSERT_EQUAL_FATAL(gmc_session_finish(s, &st, &e), GM_OK);
    gmc_session_free(s);
    CU_ASSERT_EQUAL(st.late, 1);
    gm_trace_reader *rd = NULL;
    CU_ASSERT_FATAL(gm_trace_open(path, &rd, &e) == GM_OK);
    gm_event ev[8];
    int64_t n = gm_trace_read(rd, ev, 8, &e); /* the reader rejects time going backwards */
    CU_ASSERT_EQUAL_FATAL(n, 4);
    uint64_t want[] = {100, 100, 150, 300};
    for (int i = 0; i < 4; i++)
        CU_ASSERT_EQUAL(ev[i].t_ns, want[i]);
    gm_trace_close(rd);
    unlink(path);
}

static void test_session_empty(void)
{
    const char *path = gm_test_tmp("empty.h5");
    open_ctx oc = {.path = path};
    gmc_opts o = {.device = -1, .kinds = 0, .t0_ns = T0};
    gmc_session *s = NULL;
    gm_err e;
    CU_ASSERT_FATAL(gmc_session_create(&o, test_open, &oc, &s, &e) == GM_OK);
    CU_ASSERT_EQUAL_FATAL(gmc_session_finish(s, NULL, &e), GM_OK);
    gmc_session_free(s);
    CU_ASSERT_EQUAL(oc.device, -1);
    gm_trace_reader *rd = NULL;
    CU_ASSERT_FATAL(gm_trace_open(path, &rd, &e) == GM_OK);
    CU_ASSERT_EQUAL(gm_trace_nevents(rd), 0);
    gm_trace_close(rd);
    unlink(path);
}

static void test_session_open_failure(void)
{
    open_ctx oc = {.path = "/nonexistent-dir/x.h5"};
    gmc_opts o = {.device = -1, .kinds = 0, .t0_ns = T0};
    gmc_session *s = NULL;
    gm_err e = {0};
    CU_ASSERT_FATAL(gmc_session_create(&o, test_open, &oc, &s, &e) == GM_OK);
    tbuf b = {.used = 0};
    alloc_at(&b, 0x1000, 100, 100);
    feed(gmc_session_recorder(s), &b);
    CU_ASSERT_NOT_EQUAL(gmc_session_drain(s, UINT64_MAX, &e), GM_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "nonexistent-dir"));
    alloc_at(&b, 0x2000, 100, 200); /* later rows are discarded, not kept */
    feed(gmc_session_recorder(s), &b);
    memset(&e, 0, sizeof e);
    CU_ASSERT_NOT_EQUAL(gmc_session_finish(s, NULL, &e), GM_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "nonexistent-dir"));
    gmc_session_free(s);
}

int gm_test_register(void)
{
    CU_pSuite s = CU_add_suite("capture_records", NULL, NULL);
    if (!s) return CU_get_error();
    GM_ADD_TEST(s, test_kinds_and_names);
    GM_ADD_TEST(s, test_alloc_free_pairs);
    GM_ADD_TEST(s, test_out_of_order_buffers);
    GM_ADD_TEST(s, test_pre_capture_free);
    GM_ADD_TEST(s, test_repair_and_invalid);
    GM_ADD_TEST(s, test_dropped_accounting);
    GM_ADD_TEST(s, test_device_filter);
    GM_ADD_TEST(s, test_kind_filter);
    GM_ADD_TEST(s, test_nvtx_phases);
    GM_ADD_TEST(s, test_long_marker_name_and_pool);
    GM_ADD_TEST(s, test_round_trip);
    GM_ADD_TEST(s, test_session_late_rows_stay_ordered);
    GM_ADD_TEST(s, test_session_empty);
    GM_ADD_TEST(s, test_session_open_failure);
    return CUE_SUCCESS;
}
