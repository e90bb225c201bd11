/*
 * test_event_ids.c - dense allocation ids (traces/event_ids.h, FORMAT.md
 * column `id`): the numbering rules, the column written and read back, a
 * file of the layout before ids (35-byte rows) and one whose id column
 * gmsim did not write, and the engine: a replay by id gives the same
 * result as one by address, a damaged id column is an error naming the
 * event; ids seeded with /initial_state's blocks (scheme /2) pair as the
 * addresses do and let several tenants' stretches run while those live.
 */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cu.h"
#include "base/units.h"
#include "sim/engine.h"
#include "study/simulate.h"
#include "traces/event_ids.h"
#include "traces/live_slots.h"
#include "traces/trace.h"

#define MiB GM_MiB

static gm_event ev(int op, uint64_t addr, uint64_t size)
{
    static uint64_t t;
    return (gm_event){.t_ns = t += 10, .op = (uint8_t)op, .addr = addr, .size = size};
}

/* The rules of event_ids.h, worked by hand. */
static void test_numbering(void)
{
    gm_event e[] = {
        ev(GM_OP_ALLOC, 0xa, 1),               /* 1 */
        ev(GM_OP_ALLOC, 0xb, 1),               /* 2 */
        ev(GM_OP_FREE, 0xa, 0),                /* 1, now free */
        ev(GM_OP_ALLOC, 0xc, 1),               /* 1 again: the last freed */
        ev(GM_OP_FREE_REQUESTED, 0xb, 0),      /* 2, still live */
        ev(GM_OP_ALLOC, 0xb, 1),               /* 2: live, a missing free keeps its slot */
        ev(GM_OP_FREE, 0xd, 0),                /* 0: not live (initial state, or a bad free) */
        ev(GM_OP_SEGMENT_ALLOC, 0xe, 2 * MiB), /* 0 */
        ev(GM_OP_OOM, 0xf, 1),                 /* 0 */
        ev(GM_OP_EMPTY_CACHE, 0, 0),           /* 0 */
        ev(GM_OP_FREE, 0xb, 0),                /* 2 */
        ev(GM_OP_FREE, 0xc, 0),                /* 1 */
        ev(GM_OP_ALLOC, 0xd, 1),               /* 1: freed last */
        ev(GM_OP_ALLOC, 0xe, 1),               /* 2 */
        ev(GM_OP_ALLOC, 0xf, 1),               /* 3: none free */
    };
    static const uint32_t want[] = {1, 2, 1, 1, 2, 2, 0, 0, 0, 0, 2, 1, 1, 2, 3};
    size_t n = sizeof e / sizeof e[0];
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_ids_assign(e, n, &err), GM_OK);
    for (size_t i = 0; i < n; i++)
        CU_ASSERT_EQUAL(e[i].id, want[i]);
}

static int write_trace(const char *path, const gm_event *e, size_t n)
{
    gm_err err = {0};
    gm_trace_writer *w = NULL;
    int rc = gm_trace_create(path, NULL, NULL, &w, &err);
    if (!rc) rc = gm_trace_append(w, e, n, &err);
    if (!rc) return gm_trace_finish(w, &err);
    if (w) gm_trace_abort(w);
    return rc;
}

/* Read the whole trace; *dense the reader's dense_ids. */
static gm_event *read_trace(const char *path, size_t n, int *dense)
{
    gm_trace_reader *r;
    gm_err err = {0};
    if (gm_trace_open(path, &r, &err) != GM_OK) return NULL;
    *dense = gm_trace_meta_get(r)->dense_ids;
    gm_event *buf = calloc(n + 1, sizeof *buf);
    int64_t k = gm_trace_read(r, buf, n + 1, &err);
    gm_trace_close(r);
    if (k != (int64_t)n) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* A trace of allocations and frees; the writer numbers what it writes (the
 * caller's ids are not used), and the reader hands the numbers back. */
static gm_event *churn(size_t n)
{
    gm_event *e = calloc(n, sizeof *e);
    uint64_t x = 12345, live[64] = {0}, next = 0x1000;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_t k = x % 64;
        e[i].t_ns = i;
        e[i].size = 512 + x % (16 * MiB);
        if (live[k]) {
            e[i].op = GM_OP_FREE;
            e[i].addr = live[k];
            live[k] = 0;
        } else {
            e[i].op = GM_OP_ALLOC;
            e[i].addr = live[k] = next += 4096;
        }
        e[i].id = 77; /* ignored by the writer */
    }
    return e;
}

static void test_column_round_trip(void)
{
    const char *path = gm_test_tmp("ids.h5");
    size_t n = 5000;
    gm_event *e = churn(n);
    CU_ASSERT_EQUAL_FATAL(write_trace(path, e, n), GM_OK);
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_ids_assign(e, n, &err), GM_OK);
    int dense = 0;
    gm_event *got = read_trace(path, n, &dense);
    CU_ASSERT_FATAL(got != NULL);
    CU_ASSERT_EQUAL(dense, 2); /* seeded, with no block: numbered as gm_ids_assign does */
    size_t same = 0, max = 0;
    for (size_t i = 0; i < n; i++) {
        same += got[i].id == e[i].id && got[i].addr == e[i].addr && got[i].op == e[i].op;
        max = got[i].id > max ? got[i].id : max;
    }
    CU_ASSERT_EQUAL(same, n);
    CU_ASSERT(max >= 1 && max <= 64); /* slots are reused: at most 64 live at once */
    free(got);
    free(e);
    unlink(path);
}

/* Write rows of the packed layout gmsim wrote before ids (35 bytes), or
 * that with an id column but without the attribute gmsim's writer adds. */
static void write_layout(const char *path, const gm_event *e, size_t n, int with_id)
{
    size_t row = with_id ? 39 : 35;
    unsigned char *raw = calloc(n, row);
    for (size_t i = 0; i < n; i++) {
        unsigned char *p = raw + i * row;
        memcpy(p, &e[i].t_ns, 8); /* little-endian host */
        p[8] = e[i].op;
        memcpy(p + 9, &e[i].addr, 8);
        memcpy(p + 17, &e[i].size, 8);
        memcpy(p + 25, &e[i].stream, 8);
        p[33] = e[i].category;
        p[34] = e[i].phase;
        if (with_id) {
            uint32_t bogus = 1; /* every event "slot 1": would pair wrongly if trusted */
            memcpy(p + 35, &bogus, 4);
        }
    }
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t t = H5Tcreate(H5T_COMPOUND, row);
    H5Tinsert(t, "t_ns", 0, H5T_STD_U64LE);
    H5Tinsert(t, "op", 8, H5T_STD_U8LE);
    H5Tinsert(t, "addr", 9, H5T_STD_U64LE);
    H5Tinsert(t, "size", 17, H5T_STD_U64LE);
    H5Tinsert(t, "stream", 25, H5T_STD_U64LE);
    H5Tinsert(t, "category", 33, H5T_STD_U8LE);
    H5Tinsert(t, "phase", 34, H5T_STD_U8LE);
    if (with_id) H5Tinsert(t, "id", 35, H5T_STD_U32LE);
    hsize_t dims = n, chunk = 1024, maxd = H5S_UNLIMITED;
    hid_t sp = H5Screate_simple(1, &dims, &maxd);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 1, &chunk);
    hid_t ds = H5Dcreate2(f, "events", t, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    CU_ASSERT(H5Dwrite(ds, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, raw) >= 0);
    hid_t asp = H5Screate(H5S_SCALAR);
    int version = 2;
    hid_t a = H5Acreate2(f, "gmtrace_version", H5T_STD_I32LE, asp, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_INT, &version);
    H5Aclose(a);
    H5Sclose(asp);
    H5Pclose(dcpl);
    H5Dclose(ds);
    H5Sclose(sp);
    H5Tclose(t);
    H5Fclose(f);
    free(raw);
}

/* A file of the layout before ids, and one whose id column gmsim did not
 * write (no id_scheme): both read, and by address (dense_ids 0). */
static void test_old_and_foreign_layouts(void)
{
    size_t n = 3000;
    gm_event *e = churn(n);
    const char *old = gm_test_tmp("old-layout.h5"), *untrusted = gm_test_tmp("untrusted-ids.h5");
    write_layout(old, e, n, 0);
    write_layout(untrusted, e, n, 1);
    int dense = 1;
    gm_event *got = read_trace(old, n, &dense);
    CU_ASSERT_PTR_NOT_NULL_FATAL(got);
    CU_ASSERT_EQUAL(dense, 0);
    size_t same = 0;
    for (size_t i = 0; i < n; i++)
        same += got[i].addr == e[i].addr && got[i].op == e[i].op && got[i].size == e[i].size &&
                got[i].id == 0;
    CU_ASSERT_EQUAL(same, n);
    free(got);
    got = read_trace(untrusted, n, &dense);
    CU_ASSERT_PTR_NOT_NULL_FATAL(got);
    CU_ASSERT_EQUAL(dense, 0);
    free(got);
    unlink(old);
    unlink(untrusted);
    free(e);
}

/* Simulate a trace file; its result (caller frees). */
static gm_sim_result *simulate(const char *path, const char *policy, uint32_t repeat, int skip,
                               uint64_t capacity, int *rc)
{
    static const gm_latency lat = GM_LATENCY_DEFAULT;
    gm_tenant_spec t = {.path = path, .repeat = repeat};
    gm_sim_config c = {0};
    c.tenants = &t;
    c.n_tenants = 1;
    c.capacity_bytes = capacity;
    c.latency = lat;
    c.policy = policy;
    c.on_oom_skip = skip;
    c.lenient = 1;
    gm_sim_result *r = NULL;
    gm_err err = {0};
    *rc = gm_simulate(&c, &r, &err);
    if (*rc) fprintf(stderr, "\n  %s: %s\n", path, err.msg);
    return r;
}

static int same_result(const gm_sim_result *a, const gm_sim_result *b)
{
    const gm_tenant_result *x = &a->t[0], *y = &b->t[0];
    return a->events == b->events && x->m.peak_q == y->m.peak_q && x->m.peak_a == y->m.peak_a &&
           x->m.peak_r == y->m.peak_r && x->m.int_a == y->m.int_a && x->m.int_r == y->m.int_r &&
           x->m.n_oom == y->m.n_oom && x->c.n_driver_alloc == y->c.n_driver_alloc &&
           x->c.n_driver_free == y->c.n_driver_free && x->unknown_frees == y->unknown_frees &&
           x->live_reallocs == y->live_reallocs &&
           x->repeat_leftover_bytes == y->repeat_leftover_bytes &&
           !strcmp(x->trace_hash, y->trace_hash);
}

/* The same events written by gmsim (with ids), in the old layout and with an
 * untrusted id column (both by address): every replay gives one result,
 * with --repeat, OOMs skipped, a missing free and a double free in it. */
static void test_replay_by_id_is_by_address(void)
{
    size_t n = 6000;
    gm_event *e = churn(n);
    e[100].op = GM_OP_FREE;          /* a free of an address never allocated ... */
    e[100].addr = 0xdead000;         /* (counted: --lenient) */
    for (size_t i = 200; i < n; i++) /* ... and an alloc at a live address */
        if (e[i].op == GM_OP_ALLOC) {
            for (size_t j = i + 1; j < n; j++)
                if (e[j].op == GM_OP_FREE && e[j].addr == e[i].addr) {
                    e[j].op = GM_OP_ALLOC; /* its free is missing: a live realloc */
                    break;
                }
            break;
        }
    const char *with = gm_test_tmp("with-ids.h5"), *old = gm_test_tmp("old-layout.h5"),
               *untrusted = gm_test_tmp("untrusted-ids.h5");
    CU_ASSERT_EQUAL_FATAL(write_trace(with, e, n), GM_OK);
    write_layout(old, e, n, 0);
    write_layout(untrusted, e, n, 1);
    int dense = 0;
    gm_event *got = read_trace(old, n, &dense);
    CU_ASSERT_PTR_NOT_NULL(got);
    CU_ASSERT_EQUAL(dense, 0);
    free(got);
    got = read_trace(untrusted, n, &dense);
    CU_ASSERT_PTR_NOT_NULL(got);
    CU_ASSERT_EQUAL(dense, 0);
    free(got);
    static const struct {
        const char *policy;
        uint32_t repeat;
        int skip;
        uint64_t capacity;
    } cases[] = {
        {"pytorch", 1, 0, 80ull << 30},
        {"pytorch", 3, 1, 200 * MiB},
        {"lru", 2, 1, 160 * MiB},
        {"oracle", 2, 0, 80ull << 30},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc1, rc2, rc3;
        gm_sim_result *a = simulate(with, cases[i].policy, cases[i].repeat, cases[i].skip,
                                    cases[i].capacity, &rc1);
        gm_sim_result *b =
            simulate(old, cases[i].policy, cases[i].repeat, cases[i].skip, cases[i].capacity, &rc2);
        gm_sim_result *c = simulate(untrusted, cases[i].policy, cases[i].repeat, cases[i].skip,
                                    cases[i].capacity, &rc3);
        CU_ASSERT_EQUAL_FATAL(rc1, GM_OK);
        CU_ASSERT_EQUAL_FATAL(rc2, GM_OK);
        CU_ASSERT_EQUAL_FATAL(rc3, GM_OK);
        CU_ASSERT(same_result(a, b));
        CU_ASSERT(same_result(a, c));
        CU_ASSERT(a->t[0].unknown_frees >= 1);
        CU_ASSERT(a->t[0].live_reallocs >= 1);
        if (cases[i].skip) CU_ASSERT(a->t[0].m.n_oom > 0); /* the OOM path was taken */
        gm_sim_result_free(a);
        gm_sim_result_free(b);
        gm_sim_result_free(c);
    }
    unlink(with);
    unlink(old);
    unlink(untrusted);
    free(e);
}

/* Seeded numbering (event_ids.h): the blocks of /initial_state take slots
 * 1..B in order before the first event; segment rows take none. */
static void test_seeded_numbering(void)
{
    gm_init_row init[] = {
        {.addr = 0x100, .size = 20 * MiB, .kind = GM_INIT_SEGMENT},
        {.addr = 0x100, .size = 1, .kind = GM_INIT_BLOCK}, /* slot 1 */
        {.addr = 0x200, .size = 1, .kind = GM_INIT_BLOCK}, /* slot 2 */
    };
    gm_event e[] = {
        ev(GM_OP_ALLOC, 0xa, 1),            /* 3: 1 and 2 are the blocks' */
        ev(GM_OP_FREE, 0x200, 0),           /* 2: a pre-existing block's free carries its slot */
        ev(GM_OP_FREE_REQUESTED, 0x100, 0), /* 1 */
        ev(GM_OP_ALLOC, 0xb, 1),            /* 2: freed last */
        ev(GM_OP_ALLOC, 0x100, 1),          /* 1: still live, a missing free keeps its slot */
        ev(GM_OP_FREE, 0xd, 0),             /* 0: not live */
    };
    static const uint32_t want[] = {3, 2, 1, 2, 1, 0};
    size_t n = sizeof e / sizeof e[0];
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_ids_assign_seeded(e, n, init, 3, &err), GM_OK);
    for (size_t i = 0; i < n; i++)
        CU_ASSERT_EQUAL(e[i].id, want[i]);
}

/* Initial-state blocks at 0x10000000 + i * 2 MiB in one 64 MiB segment:
 * the first `freed` of them are freed at the trace's start, the rest live
 * to its end (a snapshot's parameters). */
#define SEED_BLOCKS 24
static size_t seeded_init(gm_init_row *init)
{
    init[0] = (gm_init_row){
        .addr = 0x10000000, .size = 64 * MiB, .kind = GM_INIT_SEGMENT, .pool = GM_POOL_LARGE};
    for (size_t i = 0; i < SEED_BLOCKS; i++)
        init[1 + i] = (gm_init_row){.addr = 0x10000000 + i * 2 * MiB,
                                    .size = 2 * MiB,
                                    .block_size = 2 * MiB,
                                    .kind = GM_INIT_BLOCK};
    return 1 + SEED_BLOCKS;
}

static gm_event *seeded_events(size_t n, size_t freed)
{
    gm_event *e = churn(n);
    for (size_t i = 0; i < freed; i++) /* the first events free pre-existing blocks */
        e[10 * i] =
            (gm_event){.t_ns = e[10 * i].t_ns, .op = GM_OP_FREE, .addr = 0x10000000 + i * 2 * MiB};
    return e;
}

/* The trace of seeded_events three ways: v[0] without ids, v[1] numbered
 * from its first event (gm_ids_assign), v[2] seeded with init's blocks
 * (gm_ids_assign_seeded). */
static void seeded_three(size_t n, const gm_init_row *init, size_t ni, gm_event *v[3])
{
    v[0] = seeded_events(n, 6);
    for (int k = 1; k < 3; k++) {
        v[k] = calloc(n, sizeof *v[k]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(v[k]);
        memcpy(v[k], v[0], n * sizeof *v[0]);
    }
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_ids_assign(v[1], n, &err), GM_OK);
    CU_ASSERT_EQUAL_FATAL(gm_ids_assign_seeded(v[2], n, init, ni, &err), GM_OK);
}

static int write_with_init(const char *path, const gm_event *e, size_t n, const gm_init_row *init,
                           size_t n_init, int init_first)
{
    gm_err err = {0};
    gm_trace_writer *w = NULL;
    int rc = gm_trace_create(path, NULL, NULL, &w, &err);
    if (!rc && init_first) rc = gm_trace_write_initial(w, init, n_init, &err);
    if (!rc) rc = gm_trace_append(w, e, n, &err);
    if (!rc && !init_first) rc = gm_trace_write_initial(w, init, n_init, &err);
    if (!rc) return gm_trace_finish(w, &err);
    if (w) gm_trace_abort(w);
    return rc;
}

/* The writer seeds the ids with /initial_state's blocks when they come
 * before the first event (scheme /2, dense_ids 2) and says not when they
 * come after (/1): each file's ids are what gm_ids_assign_seeded, or
 * gm_ids_assign, gives. */
static void test_seeded_scheme_written(void)
{
    gm_init_row init[1 + SEED_BLOCKS];
    size_t ni = seeded_init(init), n = 4000;
    gm_event *v[3];
    seeded_three(n, init, ni, v);
    gm_event *e = v[0], *want1 = v[1], *want2 = v[2];
    gm_err err = {0};
    CU_ASSERT_EQUAL(want1[0].id, 0); /* a pre-existing block's free: 0 unseeded ... */
    CU_ASSERT_EQUAL(want2[0].id, 1); /* ... its slot seeded */
    const char *path = gm_test_tmp("seeded.h5");
    for (int first = 0; first < 2; first++) {
        CU_ASSERT_EQUAL_FATAL(write_with_init(path, e, n, init, ni, first), GM_OK);
        int dense = -1;
        gm_event *got = read_trace(path, n, &dense);
        CU_ASSERT_PTR_NOT_NULL_FATAL(got);
        CU_ASSERT_EQUAL(dense, first ? 2 : 1);
        const gm_event *want = first ? want2 : want1;
        size_t same = 0;
        for (size_t i = 0; i < n; i++)
            same += got[i].id == want[i].id;
        CU_ASSERT_EQUAL(same, n);
        free(got);
    }
    /* segment rows after the events number nothing: still seeded */
    gm_trace_writer *w = NULL;
    CU_ASSERT_EQUAL_FATAL(gm_trace_create(path, NULL, NULL, &w, &err), GM_OK);
    CU_ASSERT_EQUAL(gm_trace_write_initial(w, init + 1, ni - 1, &err), GM_OK);
    CU_ASSERT_EQUAL(gm_trace_append(w, e, n, &err), GM_OK);
    CU_ASSERT_EQUAL(gm_trace_write_initial(w, init, 1, &err), GM_OK);
    CU_ASSERT_EQUAL_FATAL(gm_trace_finish(w, &err), GM_OK);
    int dense = -1;
    gm_event *got = read_trace(path, n, &dense);
    CU_ASSERT_EQUAL(dense, 2);
    free(got);
    unlink(path);
    free(e);
    free(want1);
    free(want2);
}

/* Two tenants from memory, with an initial state; result (caller frees). */
static gm_sim_result *simulate_init(const gm_event *e, size_t n, int dense, const gm_init_row *init,
                                    size_t ni, const char *policy, int initial_state,
                                    uint32_t repeat, uint64_t capacity, int no_stretch)
{
    static const gm_latency lat = GM_LATENCY_DEFAULT;
    gm_trace_meta meta;
    gm_trace_meta_init(&meta);
    meta.dense_ids = dense;
    gm_tenant_spec t[2];
    for (int i = 0; i < 2; i++)
        t[i] = (gm_tenant_spec){.path = "seeded",
                                .events = e,
                                .n_events = n,
                                .meta = &meta,
                                .initial = init,
                                .n_initial = ni,
                                .repeat = repeat,
                                .offset_ns = (uint64_t)i * 777};
    gm_sim_config c = {0};
    c.tenants = t;
    c.n_tenants = 2;
    c.capacity_bytes = capacity;
    c.latency = lat;
    c.policy = policy;
    c.initial_state = initial_state;
    c.on_oom_skip = 1;
    c.lenient = 1;
    c.no_stretch = no_stretch;
    gm_sim_result *r = NULL;
    gm_err err = {0};
    int rc = gm_simulate(&c, &r, &err);
    if (rc) fprintf(stderr, "\n  seeded: %s\n", err.msg);
    gm_trace_meta_free(&meta);
    return rc ? (gm_sim_result_free(r), NULL) : r;
}

static int same_tenants(const gm_sim_result *a, const gm_sim_result *b)
{
    if (!a || !b || a->n_tenants != b->n_tenants || a->device.peak_r != b->device.peak_r ||
        a->device.int_a != b->device.int_a || a->device.n_oom != b->device.n_oom)
        return 0;
    for (size_t i = 0; i < a->n_tenants; i++) {
        const gm_tenant_result *x = &a->t[i], *y = &b->t[i];
        if (x->m.peak_q != y->m.peak_q || x->m.peak_a != y->m.peak_a ||
            x->m.peak_r != y->m.peak_r || x->m.int_a != y->m.int_a || x->m.int_r != y->m.int_r ||
            x->m.n_oom != y->m.n_oom || x->c.n_driver_alloc != y->c.n_driver_alloc ||
            x->c.n_driver_free != y->c.n_driver_free || x->unknown_frees != y->unknown_frees ||
            x->live_reallocs != y->live_reallocs || x->status != y->status ||
            x->init_skipped_blocks != y->init_skipped_blocks ||
            x->repeat_leftover_bytes != y->repeat_leftover_bytes ||
            strcmp(x->trace_hash, y->trace_hash))
            return 0;
    }
    return 1;
}

/* A seeded trace keeps its pre-existing blocks by id: the same results as
 * by address and as unseeded ids (initial state live, none and recorded,
 * --repeat, under pressure), and several tenants' stretches, which take
 * allocations by id only, run while blocks from /initial_state live, where
 * unseeded they wait for all of them to be freed (here: never). */
static void test_seeded_replay(void)
{
    gm_init_row init[1 + SEED_BLOCKS];
    size_t ni = seeded_init(init), n = 6000;
    gm_event *v[3];
    seeded_three(n, init, ni, v);
    gm_event *e0 = v[0], *e1 = v[1], *e2 = v[2];
    static const struct {
        const char *policy;
        int initial_state;
        uint32_t repeat;
        uint64_t capacity;
    } cases[] = {
        {"pytorch", GM_INITIAL_LIVE, 1, 80ull << 30},
        {"pytorch", GM_INITIAL_NONE, 1, 80ull << 30},
        {"lru", GM_INITIAL_RECORDED, 1, 80ull << 30},
        {"pytorch", GM_INITIAL_LIVE, 2, 80ull << 30},
        {"pytorch", GM_INITIAL_LIVE, 1, 1400 * MiB},
        {"predictive", GM_INITIAL_LIVE, 1, 80ull << 30},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gm_sim_result *r[4];
        r[0] = simulate_init(e0, n, 0, init, ni, cases[i].policy, cases[i].initial_state,
                             cases[i].repeat, cases[i].capacity, 1);
        r[1] = simulate_init(e1, n, 1, init, ni, cases[i].policy, cases[i].initial_state,
                             cases[i].repeat, cases[i].capacity, 0);
        r[2] = simulate_init(e2, n, 2, init, ni, cases[i].policy, cases[i].initial_state,
                             cases[i].repeat, cases[i].capacity, 0);
        r[3] = simulate_init(e2, n, 2, init, ni, cases[i].policy, cases[i].initial_state,
                             cases[i].repeat, cases[i].capacity, 1);
        for (int k = 0; k < 4; k++)
            CU_ASSERT_PTR_NOT_NULL_FATAL(r[k]);
        CU_ASSERT(same_tenants(r[0], r[1]));
        CU_ASSERT(same_tenants(r[0], r[2]));
        CU_ASSERT(same_tenants(r[0], r[3]));
        if (cases[i].capacity < (1ull << 30)) {
            CU_ASSERT(r[0]->device.n_oom > 0); /* pressed */
        }
        uint64_t st1 = r[1]->t[0].stretched_events + r[1]->t[1].stretched_events,
                 st2 = r[2]->t[0].stretched_events + r[2]->t[1].stretched_events;
        CU_ASSERT_EQUAL(st1, 0); /* unseeded: blocks from /initial_state live to the end */
        if (cases[i].repeat == 1) {
            CU_ASSERT(st2 > n / 2); /* seeded: by id from the start */
        } else {
            CU_ASSERT_EQUAL(st2, 0); /* --repeat keeps them by address (engine.c, seeded_slots) */
        }
        for (int k = 0; k < 4; k++)
            gm_sim_result_free(r[k]);
    }
    free(e0);
    free(e1);
    free(e2);
}

/* A trusted id column that names the wrong allocation: an error naming the
 * event, not a silent wrong pairing. */
static void test_damaged_ids(void)
{
    gm_event e[] = {ev(GM_OP_ALLOC, 0x1000, 4096), ev(GM_OP_ALLOC, 0x2000, 4096),
                    ev(GM_OP_FREE, 0x1000, 0)};
    gm_err err = {0};
    CU_ASSERT_EQUAL_FATAL(gm_ids_assign(e, 3, &err), GM_OK);
    e[2].id = e[1].id; /* the free of 0x1000 names 0x2000's slot */
    gm_trace_meta meta;
    gm_trace_meta_init(&meta);
    meta.dense_ids = 1;
    static const gm_latency lat = GM_LATENCY_DEFAULT;
    gm_tenant_spec t = {.path = "damaged", .events = e, .n_events = 3, .meta = &meta, .repeat = 1};
    gm_sim_config c = {0};
    c.tenants = &t;
    c.n_tenants = 1;
    c.capacity_bytes = 80ull << 30;
    c.latency = lat;
    gm_sim_result *r = NULL;
    CU_ASSERT_EQUAL(gm_simulate(&c, &r, &err), GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "damaged: event 2:"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "id column"));
    gm_sim_result_free(r);
    gm_trace_meta_free(&meta);
}

/* A reader's live table (traces/live_slots.h) against an address map, the
 * way the trace's readers use it (an alloc: replace what its address
 * holds; a free: drop it), on events with allocations at live addresses,
 * frees of what is not live and of blocks of /initial_state (some at one
 * address twice), numbered from the first event (1), seeded (2), or not
 * trusted (0), and with damaged ids (random, huge): every answer, value and
 * count the same as by address, where the ids are the writer's; with
 * damaged ones, no crash and a table no larger than the events. */
static void live_vs_addresses(const gm_event *e, size_t n, const gm_init_row *init, size_t ni,
                              int dense, int damaged)
{
    gm_live l;
    gm_addrmap ref;
    CU_ASSERT_EQUAL_FATAL(gm_live_init(&l, dense), GM_OK);
    CU_ASSERT_EQUAL_FATAL(gm_addrmap_init(&ref, 64), GM_OK);
    gm_live_seeded(&l, init, ni);
    uint32_t k = 0;
    size_t bad = 0;
    for (size_t i = 0; i < ni; i++) {
        if (init[i].kind != GM_INIT_BLOCK) continue;
        uint32_t id = gm_live_block_id(&l, &k);
        if (gm_addrmap_get(&ref, gm_addrmap_key(init[i].addr))) continue;
        bad += gm_live_get(&l, id, init[i].addr) != NULL;
        CU_ASSERT_EQUAL(gm_live_put(&l, id, init[i].addr, init[i].size), GM_OK);
        gm_addrmap_put(&ref, gm_addrmap_key(init[i].addr), init[i].size);
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t key = gm_addrmap_key(e[i].addr), a = 0, b = 0;
        if (e[i].op == GM_OP_ALLOC) gm_live_count_alloc(&l);
        int ra = gm_addrmap_del(&ref, key, &a), rb = gm_live_del(&l, e[i].id, e[i].addr, &b);
        if (!damaged) {
            bad += ra != rb || a != b;
        }
        if (e[i].op == GM_OP_ALLOC) {
            gm_addrmap_put(&ref, key, e[i].size);
            CU_ASSERT_EQUAL(gm_live_put(&l, e[i].id, e[i].addr, e[i].size), GM_OK);
            uint64_t *v = gm_live_get(&l, e[i].id, e[i].addr);
            bad += !v || *v != e[i].size;
        }
        if (!damaged) bad += ref.count != l.count;
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(l.cap <= 2 * (n + ni) + 1024); /* damaged ids take no more room than the events */
    gm_live_free(&l);
    gm_addrmap_free(&ref);
}

static void test_live_table_is_by_address(void)
{
    enum { N = 200000 };
    gm_init_row init[1 + SEED_BLOCKS + 2];
    size_t ni = seeded_init(init);
    init[ni++] = (gm_init_row){.addr = 0x10000000, .size = 1 * MiB, .kind = GM_INIT_BLOCK};
    gm_err err = {0};
    for (int dup = 0; dup < 2; dup++) { /* one block row again at an address: unseeded */
        size_t nrows = dup ? ni : ni - 1;
        gm_event *e = seeded_events(N, 8);
        for (size_t i = 0; i < N; i += 97) /* allocations at a live address, frees of none */
            if (e[i].op == GM_OP_FREE && i > 1)
                e[i] = (gm_event){.t_ns = e[i].t_ns, .op = GM_OP_FREE, .addr = 0xdead000 + i};
        for (size_t i = 50; i < N; i += 1013)
            if (e[i].op == GM_OP_ALLOC && e[i - 1].op == GM_OP_ALLOC) e[i].addr = e[i - 1].addr;
        for (int dense = 0; dense <= 2; dense++) {
            int rc = dense == 2 ? gm_ids_assign_seeded(e, N, init, nrows, &err)
                                : gm_ids_assign(e, N, &err);
            CU_ASSERT_EQUAL_FATAL(rc, GM_OK);
            live_vs_addresses(e, N, init, nrows, dense, 0);
        }
        uint64_t x = 99;
        for (size_t i = 0; i < N; i++) { /* damaged: random ids, some huge */
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            e[i].id = (uint32_t)(x % 7 == 0 ? x >> 32 : x % 64);
        }
        live_vs_addresses(e, N, init, nrows, 2, 1);
        free(e);
    }
}

int gm_test_register(void)
{
    CU_pSuite s = CU_add_suite("event_ids", NULL, NULL);
    if (!s) return CU_get_error();
    GM_ADD_TEST(s, test_numbering);
    GM_ADD_TEST(s, test_column_round_trip);
    GM_ADD_TEST(s, test_old_and_foreign_layouts);
    GM_ADD_TEST(s, test_replay_by_id_is_by_address);
    GM_ADD_TEST(s, test_damaged_ids);
    GM_ADD_TEST(s, test_seeded_numbering);
    GM_ADD_TEST(s, test_seeded_scheme_written);
    GM_ADD_TEST(s, test_seeded_replay);
    GM_ADD_TEST(s, test_live_table_is_by_address);
    return CUE_SUCCESS;
}
