/*
 * test_hostile.c - hostile and sloppy input (issue 18), the cases made here
 * with the HDF5 C API (tests/cli/hostile.sh runs the shared files):
 *   - what the reader refuses before reading: external links and storage
 *     (to a trace, to a FIFO that must never be opened), virtual datasets,
 *     filters gmsim does not write, oversized chunks (the 16 Mi-event deflate
 *     chunk), compression beyond the bound, rows not backed by stored bytes,
 *     zero-size segments, negative counts;
 *   - what it accepts: h5py's S64 marker names, any integer width;
 *   - the isolated reader: the same events as the in-process one, a crash
 *     and a hang of libhdf5 turned into an error;
 *   - base/outfile: regular files, symlinks, FIFOs, '-', device nodes;
 *   - JSON text that is not UTF-8, results read back, RMM line ends.
 */
#include "cu.h"
#include "base/outfile.h"
#include "base/strbuf.h"
#include "reports/results.h"
#include "traces/import_rmm.h"
#include "traces/trace.h"

#include <hdf5.h>
#include <zlib.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* ---------------- helpers ---------------- */

static void write_trace(const char *path, size_t n)
{
    gm_err err = {0};
    gm_trace_writer *w = NULL;
    gm_event *ev = calloc(n ? n : 1, sizeof *ev);
    for (size_t i = 0; i < n; i++)
        ev[i] = (gm_event){.t_ns = i, .op = i % 2, .addr = 0x1000 * (i / 2 + 1), .size = 512};
    CU_ASSERT_EQUAL_FATAL(gm_trace_create(path, NULL, NULL, &w, &err), GM_OK);
    CU_ASSERT_EQUAL(gm_trace_append(w, ev, n, &err), GM_OK);
    CU_ASSERT_EQUAL(gm_trace_finish(w, &err), GM_OK);
    free(ev);
}

/* The packed file type of /events (FORMAT.md). */
static hid_t events_type(void)
{
    hid_t t = H5Tcreate(H5T_COMPOUND, 35);
    H5Tinsert(t, "t_ns", 0, H5T_STD_U64LE);
    H5Tinsert(t, "op", 8, H5T_STD_U8LE);
    H5Tinsert(t, "addr", 9, H5T_STD_U64LE);
    H5Tinsert(t, "size", 17, H5T_STD_U64LE);
    H5Tinsert(t, "stream", 25, H5T_STD_U64LE);
    H5Tinsert(t, "category", 33, H5T_STD_U8LE);
    H5Tinsert(t, "phase", 34, H5T_STD_U8LE);
    return t;
}

/* A valid trace at path whose /events is then replaced by a dataset of
 * nrows with the creation properties dcpl (not written). */
static void replace_events(const char *path, hsize_t nrows, hsize_t maxrows, hid_t dcpl)
{
    write_trace(path, 4);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    CU_ASSERT_FATAL(f >= 0);
    H5Ldelete(f, "events", H5P_DEFAULT);
    hid_t t = events_type(), sp = H5Screate_simple(1, &nrows, &maxrows);
    hid_t ds = H5Dcreate2(f, "events", t, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    CU_ASSERT(ds >= 0);
    if (ds >= 0) H5Dclose(ds);
    H5Sclose(sp);
    H5Tclose(t);
    H5Fclose(f);
}

static void expect_refused(const char *path, const char *words)
{
    gm_err err = {0};
    gm_trace_reader *r = NULL;
    CU_ASSERT_NOT_EQUAL(gm_trace_open(path, &r, &err), GM_OK);
    CU_ASSERT_PTR_NULL(r);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, path));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, words));
    if (!strstr(err.msg, words)) fprintf(stderr, "\n  want '%s', got: %s\n", words, err.msg);
    if (r) gm_trace_close(r);
}

/* A FIFO nobody may open: a thread blocks opening it for writing, and
 * records whether anyone opened it for reading. */
struct fifo_guard {
    char path[4096];
    pthread_t th;
    volatile int opened;
};

static void *fifo_wait(void *arg)
{
    struct fifo_guard *g = arg;
    int fd = open(g->path, O_WRONLY);
    if (fd >= 0) close(fd);
    g->opened = 1;
    return NULL;
}

static void fifo_start(struct fifo_guard *g, const char *path)
{
    snprintf(g->path, sizeof g->path, "%s", path);
    g->opened = 0;
    CU_ASSERT_EQUAL_FATAL(mkfifo(path, 0600), 0);
    pthread_create(&g->th, NULL, fifo_wait, g);
    usleep(20000);
}

/* 1 if the FIFO was opened by anyone but fifo_stop itself. */
static int fifo_stop(struct fifo_guard *g)
{
    usleep(20000);
    int was = g->opened;
    int fd = open(g->path, O_RDONLY | O_NONBLOCK); /* release the writer */
    pthread_join(g->th, NULL);
    if (fd >= 0) close(fd);
    unlink(g->path);
    return was;
}

/* ---------------- links, external storage, virtual datasets ---------------- */

static void test_external_link(void)
{
    const char *other = gm_test_tmp("other.h5"), *path = gm_test_tmp("elink.h5");
    write_trace(other, 10);
    write_trace(path, 4);
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    H5Ldelete(f, "events", H5P_DEFAULT);
    CU_ASSERT(H5Lcreate_external(other, "events", f, "events", H5P_DEFAULT, H5P_DEFAULT) >= 0);
    H5Fclose(f);
    expect_refused(path, "/events is an external link (to '");
    expect_refused(path, "never follows a link out of it");
    unlink(path);

    /* the same to a FIFO: refused, and the FIFO never opened */
    struct fifo_guard g;
    const char *fifo = gm_test_tmp("elink.fifo");
    fifo_start(&g, fifo);
    write_trace(path, 4);
    f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    H5Ldelete(f, "events", H5P_DEFAULT);
    H5Lcreate_external(fifo, "events", f, "events", H5P_DEFAULT, H5P_DEFAULT);
    H5Lcreate_external(fifo, "x", f, "initial_state", H5P_DEFAULT, H5P_DEFAULT);
    H5Fclose(f);
    expect_refused(path, "external link");
    CU_ASSERT_FALSE(fifo_stop(&g));
    unlink(path);
    unlink(other);
}

static void test_external_storage_fifo(void)
{
    struct fifo_guard g;
    const char *path = gm_test_tmp("efile.h5"), *fifo = gm_test_tmp("efile.fifo");
    fifo_start(&g, fifo);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_external(dcpl, fifo, 0, 35 * 10);
    replace_events(path, 10, 10, dcpl);
    H5Pclose(dcpl);
    expect_refused(path, "/events is kept in external storage");
    CU_ASSERT_FALSE(fifo_stop(&g));
    unlink(path);
}

static void test_virtual_dataset(void)
{
    const char *src = gm_test_tmp("vsrc.h5"), *path = gm_test_tmp("vds.h5");
    write_trace(src, 10);
    hsize_t n = 10;
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE), vs = H5Screate_simple(1, &n, NULL);
    H5Pset_virtual(dcpl, vs, src, "events", vs);
    replace_events(path, 10, 10, dcpl);
    H5Sclose(vs);
    H5Pclose(dcpl);
    expect_refused(path, "/events is a virtual dataset");
    unlink(path);
    unlink(src);
}

/* ---------------- filters, chunks, compression ---------------- */

static void test_foreign_filter(void)
{
    const char *path = gm_test_tmp("fletcher.h5");
    hsize_t chunk = 4;
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 1, &chunk);
    H5Pset_fletcher32(dcpl);
    replace_events(path, 4, H5S_UNLIMITED, dcpl);
    H5Pclose(dcpl);
    expect_refused(path, "uses HDF5 filter 3 ('");
    unlink(path);
}

/* Write one chunk of `rows` all-zero events, shuffled and deflated (zeros
 * shuffle to zeros), with H5Dwrite_chunk: what a 1.7 MB file holding one
 * 587 MB chunk is. */
static void write_zero_chunk(const char *path, hsize_t rows)
{
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 1, &rows);
    H5Pset_shuffle(dcpl);
    H5Pset_deflate(dcpl, 9);
    replace_events(path, rows, H5S_UNLIMITED, dcpl);
    H5Pclose(dcpl);
    size_t total = (size_t)rows * 35, cap = total / 500 + (1 << 16), out_len = 0;
    unsigned char *out = malloc(cap), *zeros = calloc(1, 1 << 20);
    z_stream z;
    memset(&z, 0, sizeof z);
    CU_ASSERT_EQUAL_FATAL(deflateInit(&z, 9), Z_OK);
    z.next_out = out;
    z.avail_out = (uInt)cap;
    for (size_t left = total; left > 0;) {
        size_t k = left < (1u << 20) ? left : (1u << 20);
        z.next_in = zeros;
        z.avail_in = (uInt)k;
        left -= k;
        CU_ASSERT(deflate(&z, left ? Z_NO_FLUSH : Z_FINISH) != Z_STREAM_ERROR);
    }
    out_len = cap - z.avail_out;
    deflateEnd(&z);
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT), ds = H5Dopen2(f, "events", H5P_DEFAULT);
    hsize_t off = 0;
    CU_ASSERT(H5Dwrite_chunk(ds, H5P_DEFAULT, 0, &off, out_len, out) >= 0);
    H5Dclose(ds);
    H5Fclose(f);
    free(out);
    free(zeros);
}

static void test_deflate_bomb(void)
{
    const char *path = gm_test_tmp("bomb16mi.h5");
    write_zero_chunk(path, 16u << 20); /* 16 Mi events: 587 MB inflated */
    struct stat st;
    CU_ASSERT(stat(path, &st) == 0 && st.st_size < 4 * 1024 * 1024);
    expect_refused(path, "is stored in chunks of 16777216 rows (587202560 bytes); gmsim reads "
                         "chunks of 1 to 1048576 rows and at most 64 MiB");
    unlink(path);
    /* within the chunk limit, but 1 Mi zero rows compress ~1000x */
    path = gm_test_tmp("bomb1mi.h5");
    write_zero_chunk(path, 1u << 20);
    expect_refused(path, "compressed bytes, more than 256x");
    unlink(path);
}

static void test_unbacked_rows(void)
{
    const char *path = gm_test_tmp("unbacked.h5");
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_LATE);
    replace_events(path, 1000, 1000, dcpl); /* contiguous, never written */
    H5Pclose(dcpl);
    expect_refused(path, "/events declares 1000 rows (35000 bytes) but stores only 0 bytes");
    unlink(path);
}

/* ---------------- rows and attributes ---------------- */

static void test_zero_size_segment(void)
{
    const char *path = gm_test_tmp("seg0.h5");
    gm_err err = {0};
    gm_trace_writer *w = NULL;
    gm_init_row rows[2] = {{.addr = 0x1000, .size = 0, .kind = GM_INIT_SEGMENT, .pool = 1},
                           {.addr = 0x1000, .size = 512, .kind = GM_INIT_BLOCK}};
    CU_ASSERT_EQUAL_FATAL(gm_trace_create(path, NULL, NULL, &w, &err), GM_OK);
    CU_ASSERT_EQUAL(gm_trace_write_initial(w, rows, 2, &err), GM_OK);
    CU_ASSERT_EQUAL(gm_trace_finish(w, &err), GM_OK);
    gm_trace_reader *r = NULL;
    CU_ASSERT_EQUAL_FATAL(gm_trace_open(path, &r, &err), GM_OK);
    gm_init_row *got = NULL;
    size_t n = 9;
    CU_ASSERT_EQUAL(gm_trace_read_initial(r, &got, &n, &err), GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(
        strstr(err.msg, "/initial_state row 0: a segment or mapped range of size 0"));
    CU_ASSERT_EQUAL(n, 0);
    free(got);
    gm_trace_close(r);
    unlink(path);
}

/* /markers with a name column of file type st (2 rows "iter", "optimizer.step"). */
static void markers_with(const char *path, hid_t st)
{
    write_trace(path, 4);
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    H5Ldelete(f, "markers", H5P_DEFAULT);
    size_t ns = H5Tget_size(st), row = 9 + ns;
    hid_t t = H5Tcreate(H5T_COMPOUND, row);
    H5Tinsert(t, "t_ns", 0, H5T_STD_U64LE);
    H5Tinsert(t, "kind", 8, H5T_STD_U8LE);
    H5Tinsert(t, "name", 9, st);
    hsize_t n = 2;
    hid_t sp = H5Screate_simple(1, &n, NULL);
    hid_t ds = H5Dcreate2(f, "markers", t, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    unsigned char *buf = calloc(2, row);
    const char *names[2] = {"iter", "optimizer.step"};
    for (int i = 0; i < 2; i++) {
        buf[i * row] = (unsigned char)(10 * i);
        buf[i * row + 8] = (unsigned char)(i ? GM_MARK_INSTANT : GM_MARK_ITERATION);
        if (H5Tis_variable_str(st) > 0)
            memcpy(buf + i * row + 9, &names[i], sizeof(char *));
        else
            memcpy(buf + i * row + 9, names[i], strlen(names[i])); /* padded with NULs */
    }
    CU_ASSERT(H5Dwrite(ds, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0);
    free(buf);
    H5Dclose(ds);
    H5Sclose(sp);
    H5Tclose(t);
    H5Fclose(f);
}

static void expect_markers(const char *path)
{
    gm_err err = {0};
    gm_trace_reader *r = NULL;
    CU_ASSERT_EQUAL_FATAL(gm_trace_open(path, &r, &err), GM_OK);
    gm_marker *m = NULL;
    size_t n = 0;
    CU_ASSERT_EQUAL(gm_trace_read_markers(r, &m, &n, &err), GM_OK);
    if (err.msg[0]) fprintf(stderr, "\n  %s\n", err.msg);
    CU_ASSERT_EQUAL_FATAL(n, 2);
    CU_ASSERT_STRING_EQUAL(m[0].name, "iter");
    CU_ASSERT_STRING_EQUAL(m[1].name, "optimizer.step");
    CU_ASSERT_EQUAL(m[1].kind, GM_MARK_INSTANT);
    free(m);
    gm_trace_close(r);
}

static void test_marker_strings(void)
{
    const char *path = gm_test_tmp("markers.h5");
    struct {
        size_t size;
        H5T_str_t pad;
        H5T_cset_t cset;
    } kinds[] = {{64, H5T_STR_NULLPAD, H5T_CSET_ASCII},  /* h5py's numpy S64 */
                 {64, H5T_STR_NULLTERM, H5T_CSET_UTF8},  /* what gmsim writes */
                 {64, H5T_STR_NULLTERM, H5T_CSET_ASCII}, /* null-terminated ASCII */
                 {100, H5T_STR_NULLPAD, H5T_CSET_UTF8}}; /* longer: truncated to 63 */
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        hid_t st = H5Tcopy(H5T_C_S1);
        H5Tset_size(st, kinds[i].size);
        H5Tset_strpad(st, kinds[i].pad);
        H5Tset_cset(st, kinds[i].cset);
        markers_with(path, st);
        H5Tclose(st);
        expect_markers(path);
    }
    hid_t vs = H5Tcopy(H5T_C_S1);
    H5Tset_size(vs, H5T_VARIABLE);
    markers_with(path, vs);
    H5Tclose(vs);
    gm_err err = {0};
    gm_trace_reader *r = NULL;
    CU_ASSERT_EQUAL_FATAL(gm_trace_open(path, &r, &err), GM_OK);
    gm_marker *m = NULL;
    size_t n = 0;
    CU_ASSERT_EQUAL(gm_trace_read_markers(r, &m, &n, &err), GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "column 'name' is a variable-length string"));
    free(m);
    gm_trace_close(r);
    unlink(path);
}

static void set_attr(const char *path, const char *name, hid_t type, long long v)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    H5Adelete(f, name);
    hid_t sp = H5Screate(H5S_SCALAR), a = H5Acreate2(f, name, type, sp, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_LLONG, &v);
    H5Aclose(a);
    H5Sclose(sp);
    H5Fclose(f);
}

/* /sites as another tool might write it: columns in another order, ASCII
 * null-padded (h5py's numpy 'S'), a name longer than the limit (cut to 255
 * bytes), a stack with a control character ('?'); a variable-length string
 * column is refused when the trace is opened. */
static void sites_with(const char *path, hid_t name_t, hid_t stack_t, const char *name,
                       const char *stack)
{
    write_trace(path, 4);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    CU_ASSERT_FATAL(f >= 0);
    size_t ws = H5Tis_variable_str(stack_t) > 0 ? sizeof(char *) : H5Tget_size(stack_t);
    size_t wn = H5Tget_size(name_t);
    hid_t t = H5Tcreate(H5T_COMPOUND, ws + wn);
    H5Tinsert(t, "stack", 0, stack_t);
    H5Tinsert(t, "name", ws, name_t);
    char *row = calloc(1, ws + wn);
    if (H5Tis_variable_str(stack_t) > 0)
        memcpy(row, &stack, sizeof stack);
    else
        memcpy(row, stack, strlen(stack) < ws ? strlen(stack) : ws);
    memcpy(row + ws, name, strlen(name) < wn ? strlen(name) : wn);
    hsize_t one = 1;
    hid_t sp = H5Screate_simple(1, &one, NULL);
    hid_t ds = H5Dcreate2(f, "sites", t, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    CU_ASSERT(ds >= 0 && H5Dwrite(ds, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, row) >= 0);
    H5Dclose(ds);
    H5Sclose(sp);
    H5Tclose(t);
    H5Fclose(f);
    free(row);
}

static hid_t fixed_str(size_t n, H5T_cset_t cs)
{
    hid_t s = H5Tcopy(H5T_C_S1);
    H5Tset_size(s, n);
    H5Tset_strpad(s, H5T_STR_NULLPAD);
    H5Tset_cset(s, cs);
    return s;
}

static void test_sites_strings(void)
{
    const char *path = gm_test_tmp("sites.h5");
    char name[301];
    memset(name, 'n', 300);
    name[300] = 0;
    hid_t nt = fixed_str(300, H5T_CSET_ASCII), st = fixed_str(40, H5T_CSET_ASCII);
    sites_with(path, nt, st, name, "a.py:1 in f\nb\x01.py:2 in g");
    H5Tclose(nt);
    H5Tclose(st);
    for (int iso = 0; iso < 2; iso++) {
        gm_err err = {0};
        gm_trace_reader *r = NULL;
        int rc = iso ? gm_trace_open(path, &r, &err) : gm_trace_open_inprocess(path, &r, &err);
        CU_ASSERT_EQUAL_FATAL(rc, GM_OK);
        CU_ASSERT_EQUAL(gm_trace_meta_get(r)->n_sites, 1);
        gm_sites s;
        CU_ASSERT_EQUAL_FATAL(gm_trace_read_sites(r, &s, &err), GM_OK);
        CU_ASSERT_EQUAL_FATAL(s.n, 1);
        CU_ASSERT_EQUAL(strlen(s.rows[0].name), GM_SITE_NAME_MAX - 1);
        CU_ASSERT_STRING_EQUAL(s.rows[0].stack, "a.py:1 in f\nb?.py:2 in g");
        gm_sites_free(&s);
        gm_trace_close(r);
    }
    hid_t vs = H5Tcopy(H5T_C_S1);
    H5Tset_size(vs, H5T_VARIABLE);
    nt = fixed_str(8, H5T_CSET_UTF8);
    sites_with(path, nt, vs, "x.py", "x.py:1 in f");
    H5Tclose(vs);
    H5Tclose(nt);
    gm_err err = {0};
    gm_trace_reader *r = NULL;
    CU_ASSERT_EQUAL(gm_trace_open(path, &r, &err), GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "/sites column 'stack' is a variable-length string"));
    unlink(path);
}

static void test_integer_attributes(void)
{
    const char *path = gm_test_tmp("attrs.h5");
    write_trace(path, 4);
    set_attr(path, "device_total_bytes", H5T_STD_I64LE, -1);
    expect_refused(path, "attribute device_total_bytes is -1; it counts bytes or records and "
                         "cannot be negative");
    set_attr(path, "device_total_bytes", H5T_STD_I32BE, 123456);
    set_attr(path, "dropped_records", H5T_STD_U16LE, 7);
    gm_err err = {0};
    gm_trace_reader *r = NULL;
    CU_ASSERT_EQUAL_FATAL(gm_trace_open(path, &r, &err), GM_OK);
    CU_ASSERT_EQUAL(gm_trace_meta_get(r)->device_total_bytes, 123456);
    CU_ASSERT_EQUAL(gm_trace_meta_get(r)->dropped_records, 7);
    gm_trace_close(r);
    set_attr(path, "gmtrace_version", H5T_STD_I64LE, -2);
    expect_refused(path, "gmtrace_version is -2 but this gmsim reads versions 1 to 2");
    unlink(path);
}

/* ---------------- the isolated reader ---------------- */

static uint64_t hash_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ c[i]) * 0x100000001b3ull;
    return h;
}

/* Everything read from path, as one hash; reads of cap events at a time. */
static uint64_t read_hash(const char *path, int isolated, size_t cap, uint64_t *nev)
{
    gm_err err = {0};
    gm_trace_reader *r = NULL;
    int rc = isolated ? gm_trace_open(path, &r, &err) : gm_trace_open_inprocess(path, &r, &err);
    CU_ASSERT_EQUAL_FATAL(rc, GM_OK);
    uint64_t h = 0xcbf29ce484222325ull, got = 0;
    gm_event *buf = malloc(cap * sizeof *buf);
    int64_t n;
    while ((n = gm_trace_read(r, buf, cap, &err)) > 0) {
        h = hash_bytes(h, buf, (size_t)n * sizeof *buf);
        got += (uint64_t)n;
    }
    CU_ASSERT_EQUAL(n, 0);
    CU_ASSERT_EQUAL(got, gm_trace_nevents(r));
    CU_ASSERT_EQUAL(gm_trace_position(r), got);
    CU_ASSERT_EQUAL(gm_trace_rewind(r), GM_OK); /* a second pass, as --repeat does */
    CU_ASSERT_EQUAL(gm_trace_read(r, buf, cap, &err), (int64_t)(got < cap ? got : cap));
    h = hash_bytes(h, buf, (got < cap ? got : cap) * sizeof *buf);
    gm_init_row *ir = NULL;
    gm_marker *m = NULL;
    size_t ni = 0, nm = 0;
    CU_ASSERT_EQUAL(gm_trace_read_initial(r, &ir, &ni, &err), GM_OK);
    CU_ASSERT_EQUAL(gm_trace_read_markers(r, &m, &nm, &err), GM_OK);
    h = hash_bytes(h, ir, ni * sizeof *ir);
    h = hash_bytes(h, m, nm * sizeof *m);
    const gm_trace_meta *meta = gm_trace_meta_get(r);
    h = hash_bytes(h, meta->source, strlen(meta->source));
    h = hash_bytes(h, meta->command, strlen(meta->command));
    h = hash_bytes(h, &meta->device_total_bytes, 8);
    free(ir);
    free(m);
    free(buf);
    *nev = got;
    gm_trace_close(r);
    return h;
}

static void test_isolated_equals_inprocess(void)
{
    const char *files[] = {gm_test_path("traces/bert.h5"),
                           gm_test_path("tests/fuzz/trace_seeds/imp-oom.h5"),
                           gm_test_path("tests/fuzz/trace_seeds/gen-tiny-deflate.h5")};
    size_t caps[] = {1000, 65536, 70001};
    for (size_t i = 0; i < 3; i++)
        for (size_t c = 0; c < 3; c++) {
            uint64_t n1, n2;
            uint64_t a = read_hash(files[i], 1, caps[c], &n1);
            uint64_t b = read_hash(files[i], 0, caps[c], &n2);
            CU_ASSERT_EQUAL(n1, n2);
            CU_ASSERT_EQUAL(a, b);
        }
}

static void test_isolated_crash_and_hang(void)
{
    expect_refused(gm_test_path("tests/data/hostile/h5-segv-h5c-protect.h5"),
                   "the HDF5 library failed on this file (damaged or hostile); nothing was "
                   "simulated");
    setenv("GMSIM_TRACE_TIMEOUT", "1", 1);
    expect_refused(gm_test_path("tests/data/hostile/h5-hang.h5"), "did not answer within 1 s");
    unsetenv("GMSIM_TRACE_TIMEOUT");
    /* the in-process reader is not used on them: it would crash this test */
}

static void test_not_regular(void)
{
    struct fifo_guard g;
    const char *fifo = gm_test_tmp("trace.fifo");
    fifo_start(&g, fifo);
    expect_refused(fifo, "is not a regular file (a FIFO, device or socket)");
    CU_ASSERT_FALSE(fifo_stop(&g));
}

/* ---------------- outputs (base/outfile.h) ---------------- */

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *s = calloc(1, 1 << 20);
    size_t n = fread(s, 1, (1 << 20) - 1, f);
    s[n] = 0;
    fclose(f);
    return s;
}

static void test_out_plan(void)
{
    gm_out_plan p;
    gm_err err = {0};
    CU_ASSERT_EQUAL(gm_out_plan_make("-", &p, &err), GM_OK);
    CU_ASSERT_EQUAL(p.fd, 1);
    gm_out_plan_free(&p);
    CU_ASSERT_EQUAL(gm_out_plan_make("/dev/stdout", &p, &err), GM_OK);
    CU_ASSERT_EQUAL(p.fd, 1);
    gm_out_plan_free(&p);
    CU_ASSERT(gm_out_is_stdout("-") && gm_out_is_stdout("/dev/fd/1"));
    CU_ASSERT_FALSE(gm_out_is_stdout("out.json"));
    const char *dir = gm_test_tmp("outdir");
    mkdir(dir, 0755);
    CU_ASSERT_EQUAL(gm_out_plan_make(dir, &p, &err), GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "is a directory"));
    rmdir(dir);
    const char *file = gm_test_tmp("plain.json");
    CU_ASSERT_EQUAL(gm_out_plan_make(file, &p, &err), GM_OK);
    CU_ASSERT(p.fd < 0 && p.tmp && strstr(p.tmp, ".tmp.") && !strcmp(p.target, file));
    gm_out_plan_free(&p);
}

static void test_out_regular_and_symlink(void)
{
    gm_err err = {0};
    const char *file = gm_test_tmp("real.txt"), *link = gm_test_tmp("link.txt");
    CU_ASSERT_EQUAL(gm_out_write_all(file, "one\n", 4, &err), GM_OK);
    chmod(file, 0640);
    CU_ASSERT_EQUAL(symlink(file, link), 0);
    CU_ASSERT_EQUAL(gm_out_write_all(link, "two\n", 4, &err), GM_OK);
    struct stat st;
    CU_ASSERT(lstat(link, &st) == 0 && S_ISLNK(st.st_mode));        /* followed, not replaced */
    CU_ASSERT(stat(file, &st) == 0 && (st.st_mode & 0777) == 0640); /* mode kept */
    char *s = slurp(file);
    CU_ASSERT_STRING_EQUAL(s, "two\n");
    free(s);
    CU_ASSERT(gm_out_same_file(link, file));
    CU_ASSERT_FALSE(gm_out_same_file(link, "-"));
    unlink(link);
    unlink(file);
    /* a dangling link creates its target */
    CU_ASSERT_EQUAL(symlink(file, link), 0);
    CU_ASSERT_EQUAL(gm_out_write_all(link, "three\n", 6, &err), GM_OK);
    s = slurp(file);
    CU_ASSERT_STRING_EQUAL(s, "three\n");
    free(s);
    unlink(link);
    unlink(file);
    /* a missing directory: an error naming the path, nothing left */
    const char *bad = gm_test_tmp("no/such/dir/x.json");
    CU_ASSERT_EQUAL(gm_out_write_all(bad, "x", 1, &err), GM_EIO);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, bad));
}

struct fifo_reader {
    const char *path;
    char buf[1 << 16];
    size_t len;
};

static void *read_fifo(void *arg)
{
    struct fifo_reader *fr = arg;
    int fd = open(fr->path, O_RDONLY);
    ssize_t k;
    while (fd >= 0 && (k = read(fd, fr->buf + fr->len, sizeof fr->buf - 1 - fr->len)) > 0)
        fr->len += (size_t)k;
    if (fd >= 0) close(fd);
    return NULL;
}

static void test_out_fifo_and_device(void)
{
    gm_err err = {0};
    const char *fifo = gm_test_tmp("out.fifo");
    CU_ASSERT_EQUAL_FATAL(mkfifo(fifo, 0600), 0);
    struct fifo_reader fr = {.path = fifo};
    pthread_t th;
    pthread_create(&th, NULL, read_fifo, &fr);
    CU_ASSERT_EQUAL(gm_out_write_all(fifo, "through the fifo", 16, &err), GM_OK);
    pthread_join(th, NULL);
    CU_ASSERT_EQUAL(fr.len, 16);
    CU_ASSERT_EQUAL(memcmp(fr.buf, "through the fifo", 16), 0);
    struct stat st;
    CU_ASSERT(lstat(fifo, &st) == 0 && S_ISFIFO(st.st_mode));

    /* a trace into the FIFO: built aside, copied in whole, and readable */
    memset(&fr, 0, sizeof fr);
    fr.path = fifo;
    pthread_create(&th, NULL, read_fifo, &fr);
    write_trace(fifo, 6);
    pthread_join(th, NULL);
    CU_ASSERT(lstat(fifo, &st) == 0 && S_ISFIFO(st.st_mode));
    const char *copy = gm_test_tmp("from-fifo.h5");
    FILE *f = fopen(copy, "wb");
    fwrite(fr.buf, 1, fr.len, f);
    fclose(f);
    gm_trace_reader *r = NULL;
    CU_ASSERT_EQUAL(gm_trace_open(copy, &r, &err), GM_OK);
    if (r) CU_ASSERT_EQUAL(gm_trace_nevents(r), 6);
    gm_trace_close(r);
    unlink(copy);
    unlink(fifo);

    /* a device node of our own with /dev/full's numbers (needs root) */
    const char *full = gm_test_tmp("full");
    if (mknod(full, S_IFCHR | 0600, makedev(1, 7)) != 0) return; /* not allowed here */
    CU_ASSERT_EQUAL(gm_out_write_all(full, "x", 1, &err), GM_EIO);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "No space left on device"));
    CU_ASSERT(lstat(full, &st) == 0 && S_ISCHR(st.st_mode));
    gm_trace_writer *w = NULL;
    CU_ASSERT_EQUAL(gm_trace_create(full, NULL, NULL, &w, &err), GM_OK);
    if (w) CU_ASSERT_EQUAL(gm_trace_finish(w, &err), GM_EIO);
    CU_ASSERT(lstat(full, &st) == 0 && S_ISCHR(st.st_mode));
    unlink(full);
}

/* ---------------- JSON ---------------- */

static void test_json_text(void)
{
    json_t *j = gm_json_text("ok \xc3\xa9");
    CU_ASSERT_STRING_EQUAL(json_string_value(j), "ok \xc3\xa9");
    json_decref(j);
    j = gm_json_text("\xff\xfe-a\xc3");
    CU_ASSERT_STRING_EQUAL(json_string_value(j), "\\xff\\xfe-a\\xc3");
    json_decref(j);
    j = gm_json_text(NULL);
    CU_ASSERT_STRING_EQUAL(json_string_value(j), "");
    json_decref(j);
}

static int check_doc(const char *text, gm_err *err)
{
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    int rc = gm_results_check(j, "r.json", err);
    json_decref(j);
    return rc;
}

static void test_results_check(void)
{
    gm_err err = {0};
    CU_ASSERT_EQUAL(check_doc("{\"inputs\":{\"capacity_bytes\":80},\"device\":{\"fragmentation\":"
                              "0.5,\"timeline\":{\"columns\":[\"t_ns\",\"ext_frag\"],\"points\":"
                              "[[0,-1.0],[5,0.25]]}}}",
                              &err),
                    GM_OK);
    CU_ASSERT_EQUAL(check_doc("{\"inputs\":{\"capacity_bytes\":-1}}", &err), GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "r.json: inputs.capacity_bytes is -1"));
    CU_ASSERT_EQUAL(check_doc("{\"results\":[{},{\"events\":1e300}]}", &err), GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "results[1].events is 1.0000000000000001e+300"));
    CU_ASSERT_EQUAL(check_doc("{\"device\":{\"utilization\":1.5}}", &err), GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "device.utilization is 1.5; it must be from 0 to 1"));
    CU_ASSERT_EQUAL(check_doc("{\"timeline\":{\"columns\":[\"t_ns\",\"ext_frag\"],\"points\":"
                              "[[0,0.5],[-5,0.25]]}}",
                              &err),
                    GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "timeline.points[1][0] is -5"));
    CU_ASSERT_EQUAL(check_doc("{\"timeline\":{\"columns\":[\"t_ns\",\"ext_frag\"],\"points\":"
                              "[[0,-2]]}}",
                              &err),
                    GM_EINVAL);
}

/* ---------------- RMM logs ---------------- */

static int rmm(const char *text, size_t len, gm_import_trace *t, gm_err *err)
{
    FILE *f = fmemopen((void *)text, len, "r");
    gm_rmm_opts o = {.name = "log.csv"};
    int rc = gm_rmm_import_stream(f, &o, t, err);
    fclose(f);
    return rc;
}

static void test_rmm_line_ends(void)
{
    static const char *logs[] = {
        "Thread,Time,Action,Pointer,Size,Stream\n1,1.0,allocate,0x10,8,0\n1,2.0,free,0x10,8,0\n",
        "Thread,Time,Action,Pointer,Size,Stream\r\n1,1.0,allocate,0x10,8,0\r\n1,2.0,free,0x10,8,0",
        "Thread,Time,Action,Pointer,Size,Stream\r1,1.0,allocate,0x10,8,0\r1,2.0,free,0x10,8,0\r",
        "Thread,Time,Action,Pointer,Size,Stream\r\n1,1.0,allocate,0x10,8,0\r1,2.0,free,0x10,8,0\n"};
    for (size_t i = 0; i < 4; i++) {
        gm_import_trace t;
        gm_err err = {0};
        CU_ASSERT_EQUAL(rmm(logs[i], strlen(logs[i]), &t, &err), GM_OK);
        CU_ASSERT_EQUAL(t.n_events, 2);
        if (t.n_events == 2) CU_ASSERT_EQUAL(t.events[1].t_ns, 1000000000ull);
        gm_import_trace_free(&t);
    }
}

static void test_rmm_hostile(void)
{
    gm_import_trace t;
    gm_err err = {0};
    static const char nul[] = "Thread,Time,Action,Pointer,Size,Stream\n1,1.0,allo\0cate,0x10,8,0\n";
    CU_ASSERT_EQUAL(rmm(nul, sizeof nul - 1, &t, &err), GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "line 2, byte 11: a NUL byte (0x00) in field 3"));
    const char *big = "Thread,Time,Action,Pointer,Size,Stream\n"
                      "1,18446744073709.999999,allocate,0x10,8,0\n";
    CU_ASSERT_EQUAL(rmm(big, strlen(big), &t, &err), GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "line 2: Time '18446744073709.999999' is out of range"));
    const char *span = "Thread,Time,Action,Pointer,Size,Stream\n1,0,allocate,0x10,8,0\n"
                       "1,18446744073.709552,free,0x10,8,0\n"; /* 2^64 ns after the first */
    CU_ASSERT_EQUAL(rmm(span, strlen(span), &t, &err), GM_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "line 3: Time '18446744073.709552' is out of range"));
    const char *fine = "Thread,Time,Action,Pointer,Size,Stream\n1,0,allocate,0x10,8,0\n"
                       "1,18446744073.709551,free,0x10,8,0\n"; /* just fits */
    CU_ASSERT_EQUAL(rmm(fine, strlen(fine), &t, &err), GM_OK);
    if (t.n_events == 2) CU_ASSERT_EQUAL(t.events[1].t_ns, 18446744073709551000ull);
    gm_import_trace_free(&t);
}

int gm_test_register(void)
{
    CU_pSuite s = CU_add_suite("hostile", NULL, NULL);
    if (!s) return CU_get_error();
    GM_ADD_TEST(s, test_external_link);
    GM_ADD_TEST(s, test_external_storage_fifo);
    GM_ADD_TEST(s, test_virtual_dataset);
    GM_ADD_TEST(s, test_foreign_filter);
    GM_ADD_TEST(s, test_deflate_bomb);
    GM_ADD_TEST(s, test_unbacked_rows);
    GM_ADD_TEST(s, test_zero_size_segment);
    GM_ADD_TEST(s, test_marker_strings);
    GM_ADD_TEST(s, test_sites_strings);
    GM_ADD_TEST(s, test_integer_attributes);
    GM_ADD_TEST(s, test_isolated_equals_inprocess);
    GM_ADD_TEST(s, test_isolated_crash_and_hang);
    GM_ADD_TEST(s, test_not_regular);
    GM_ADD_TEST(s, test_out_plan);
    GM_ADD_TEST(s, test_out_regular_and_symlink);
    GM_ADD_TEST(s, test_out_fifo_and_device);
    GM_ADD_TEST(s, test_json_text);
    GM_ADD_TEST(s, test_results_check);
    GM_ADD_TEST(s, test_rmm_line_ends);
    GM_ADD_TEST(s, test_rmm_hostile);
    return CUE_SUCCESS;
}
