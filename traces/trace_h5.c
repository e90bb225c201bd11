/*
 * trace_h5.c - reader and writer of the HDF5 trace, schema version 2; it
 * reads version 1 too (trace.h is the API, traces/FORMAT.md the schema).
 *
 * Types. Each table (/events, /initial_state, /markers) is described once,
 * by a column list below. From it come two HDF5 compound types: the file
 * type (packed, little-endian, columns in the documented order) and the
 * memory type (the struct of trace.h, built with offsetof). HDF5 converts
 * between them member by member and matches members by NAME, so a file
 * written by h5py with its columns in another order or with wider integers
 * reads the same; the reader only checks that every column exists and has
 * the right class. Columns added by a later version are optional: a file
 * without them reads them as 0 (the memory type then leaves them out, so
 * HDF5 never has to invent them). /events in gmsim's own packed layout skips HDF5's
 * conversion, which is slow (see "Packed events").
 *
 * Memory. The reader reads hyperslabs of at most GM_TRACE_CHUNK_EVENTS rows,
 * through one memory dataspace made at open, into the caller's buffer (or a
 * buffer of that many packed rows, then unpacked). Besides that there is
 * HDF5's type-conversion buffer and, for compressed files, a chunk cache
 * sized to two chunks (so reads smaller than a chunk do not inflate it
 * again each time). Nothing grows with the trace.
 *
 * Validation. Each piece is checked in one branch-free pass; only if that
 * pass finds something does a second pass name the first bad event.
 *
 * Hostile files. The reader here (gm_h5r_*, trace_int.h) is what the
 * isolated reader of trace_isolate.c runs in its child process. Before any
 * row is read it checks how each table is stored (FORMAT.md, "Limits"):
 * hard links only, no external storage or virtual dataset, only the filters
 * gmsim writes, bounded chunks, every row backed by stored bytes, bounded
 * compression; external links are refused again at H5Dopen2 (refuse_elink)
 * in case a check is ever missed.
 *
 * Errors. HDF5 prints its error stack to stderr unless told not to; the
 * library never prints, so every entry point silences it for the calling
 * thread (the stack is per thread in Debian's thread-safe HDF5).
 */
#include "event_ids.h"
#include "trace.h"
#include "trace_int.h"
#include "base/outfile.h"
#include "base/units.h"

#include <hdf5.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NOT_A_TRACE "expected a gmsim trace written by 'gmsim gen', 'gmsim import' or gmcapture"
#define REIMPORT "re-import the trace (or fix the tool that wrote it)"

typedef unsigned long long ull;

void gm_h5_quiet(void)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

static void h5_close(hid_t *id, herr_t (*fn)(hid_t))
{
    if (*id >= 0) fn(*id);
    *id = H5I_INVALID_HID;
}

/*
 * File access: no file locking. A trace is never opened for writing under
 * its final name (the writer renames a private temporary file), so locks
 * protect nothing, and on file systems without flock (NFS, Lustre) HDF5
 * would refuse to open the file at all.
 */
static hid_t make_fapl(void)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
#if H5_VERSION_GE(1, 10, 7)
    if (fapl >= 0) H5Pset_file_locking(fapl, 0, 1);
#endif
    return fapl < 0 ? H5P_DEFAULT : fapl;
}

static void free_fapl(hid_t fapl)
{
    if (fapl != H5P_DEFAULT) H5Pclose(fapl);
}

/* ---------------- tables ---------------- */

enum col_kind { COL_U64, COL_U8, COL_NAME, COL_U32 };

struct col {
    const char *name;
    size_t mem_off;
    enum col_kind kind;
    int optional; /* added in version 2: absent in older files, read as 0 */
};

struct table {
    const char *name;       /* dataset name under the root        */
    const struct col *cols; /* in file order                       */
    size_t ncols;
    size_t mem_size; /* sizeof the trace.h struct           */
    hsize_t chunk;   /* chunk rows for the small tables      */
};

/* clang-format off */
#define COL(type, field, kind) {#field, offsetof(type, field), kind, 0}
#define OPT(type, field, kind) {#field, offsetof(type, field), kind, 1}
/* clang-format on */

static const struct col event_cols[] = {
    COL(gm_event, t_ns, COL_U64), COL(gm_event, op, COL_U8),      COL(gm_event, addr, COL_U64),
    COL(gm_event, size, COL_U64), COL(gm_event, stream, COL_U64), COL(gm_event, category, COL_U8),
    COL(gm_event, phase, COL_U8), OPT(gm_event, id, COL_U32), /* FORMAT.md: optional */
    OPT(gm_event, site, COL_U32),                             /* FORMAT.md: optional */
};
/* /events@id_scheme: the id column pairs allocations as event_ids.h numbers
 * them; /2: seeded with /initial_state's blocks first (FORMAT.md, `id`) */
#define ID_SCHEME "gmsim-live-slot/1"
#define ID_SCHEME_SEEDED "gmsim-live-slot/2"
static const struct col init_cols[] = {
    COL(gm_init_row, addr, COL_U64),       COL(gm_init_row, size, COL_U64),
    COL(gm_init_row, block_size, COL_U64), COL(gm_init_row, stream, COL_U64),
    COL(gm_init_row, kind, COL_U8),        COL(gm_init_row, category, COL_U8),
    OPT(gm_init_row, pool, COL_U8),        OPT(gm_init_row, expandable, COL_U8),
    OPT(gm_init_row, pool_id0, COL_U64),   OPT(gm_init_row, pool_id1, COL_U64),
    OPT(gm_init_row, site, COL_U32),
};
static const struct col marker_cols[] = {
    COL(gm_marker, t_ns, COL_U64),
    COL(gm_marker, kind, COL_U8),
    COL(gm_marker, name, COL_NAME),
};

#define NCOLS(a) (sizeof(a) / sizeof((a)[0]))
static const struct table events_table = {"events", event_cols, NCOLS(event_cols), sizeof(gm_event),
                                          0};
static const struct table initial_table = {"initial_state", init_cols, NCOLS(init_cols),
                                           sizeof(gm_init_row), 1024};
static const struct table markers_table = {"markers", marker_cols, NCOLS(marker_cols),
                                           sizeof(gm_marker), 1024};
/* /sites: two fixed-length strings of the writer's widths (FORMAT.md); only
 * checked through this description, read and written by its own code. */
static const struct col site_cols[] = {{"name", 0, COL_NAME, 0}, {"stack", 0, COL_NAME, 0}};
static const struct table sites_table = {"sites", site_cols, NCOLS(site_cols), 0, 0};

static size_t col_bytes(enum col_kind k)
{
    return k == COL_U64 ? 8 : k == COL_U32 ? 4 : k == COL_U8 ? 1 : GM_MARKER_NAME_LEN;
}

static hid_t col_type(enum col_kind k, int file)
{
    if (k == COL_U64) return H5Tcopy(file ? H5T_STD_U64LE : H5T_NATIVE_UINT64);
    if (k == COL_U8) return H5Tcopy(file ? H5T_STD_U8LE : H5T_NATIVE_UINT8);
    if (k == COL_U32) return H5Tcopy(file ? H5T_STD_U32LE : H5T_NATIVE_UINT32);
    hid_t s = H5Tcopy(H5T_C_S1);
    if (s >= 0 && (H5Tset_size(s, GM_MARKER_NAME_LEN) < 0 ||
                   H5Tset_strpad(s, H5T_STR_NULLTERM) < 0 || H5Tset_cset(s, H5T_CSET_UTF8) < 0))
        h5_close(&s, H5Tclose);
    return s;
}

/* Whether the file type ft (a compound) has a member named name. */
static int has_member(hid_t ft, const char *name)
{
    return ft >= 0 && H5Tget_member_index(ft, name) >= 0;
}

/* Reading a name column: the memory string takes the file's character set
 * (HDF5 converts no string between ASCII and UTF-8; h5py writes numpy 'S'
 * columns as ASCII), null-padded or null-terminated alike. */
static herr_t name_cset(hid_t from, const char *name, hid_t m)
{
    int idx = H5Tget_member_index(from, name);
    hid_t ft = idx >= 0 ? H5Tget_member_type(from, (unsigned)idx) : H5I_INVALID_HID;
    H5T_cset_t cs = ft >= 0 ? H5Tget_cset(ft) : H5T_CSET_ERROR;
    h5_close(&ft, H5Tclose);
    return cs == H5T_CSET_ERROR ? 0 : H5Tset_cset(m, cs);
}

/* The compound type of a table: packed file layout (file=1) or its struct.
 * With a file type `from` (reading), optional columns it lacks are left
 * out of the struct type, so they keep the zeros of the caller's buffer
 * (and out of the packed layout, which is then the layout without them). */
static hid_t table_type_from(const struct table *t, int file, hid_t from)
{
    size_t size = t->mem_size;
    if (file) {
        size = 0;
        for (size_t i = 0; i < t->ncols; i++)
            if (from < 0 || !t->cols[i].optional || has_member(from, t->cols[i].name))
                size += col_bytes(t->cols[i].kind);
    }
    hid_t ct = H5Tcreate(H5T_COMPOUND, size);
    size_t off = 0;
    for (size_t i = 0; ct >= 0 && i < t->ncols; i++) {
        const struct col *c = &t->cols[i];
        if (from >= 0 && c->optional && !has_member(from, c->name)) {
            if (!file) off += col_bytes(c->kind);
            continue;
        }
        hid_t m = col_type(c->kind, file);
        if (m >= 0 && c->kind == COL_NAME && from >= 0 && name_cset(from, c->name, m) < 0)
            h5_close(&m, H5Tclose);
        if (m < 0 || H5Tinsert(ct, c->name, file ? off : c->mem_off, m) < 0)
            h5_close(&ct, H5Tclose);
        h5_close(&m, H5Tclose);
        off += col_bytes(c->kind);
    }
    return ct;
}

static hid_t table_type(const struct table *t, int file)
{
    return table_type_from(t, file, H5I_INVALID_HID);
}

static void col_list(const struct table *t, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = 0;
    for (size_t i = 0; i < t->ncols && used < len; i++)
        if (!t->cols[i].optional)
            used +=
                (size_t)snprintf(buf + used, len - used, "%s%s", used ? ", " : "", t->cols[i].name);
}

/* Check that ds is a compound dataset with every column of t, each an
 * integer of at most 64 bits (name: a fixed-length string). */
static int check_table(hid_t ds, const struct table *t, const char *path, gm_err *err)
{
    char cols[256];
    col_list(t, cols, sizeof cols);
    hid_t ft = H5Dget_type(ds);
    int rc = GM_OK;
    if (H5Tget_class(ft) != H5T_COMPOUND)
        rc = gm_errf(err, GM_EINVAL, "%s: /%s is not a table with named columns (%s); " REIMPORT,
                     path, t->name, cols);
    for (size_t i = 0; rc == GM_OK && i < t->ncols; i++) {
        const struct col *c = &t->cols[i];
        int idx = H5Tget_member_index(ft, c->name);
        if (idx < 0 && c->optional) continue;
        if (idx < 0) {
            rc = gm_errf(err, GM_EINVAL, "%s: /%s has no column '%s' (it needs %s); " REIMPORT,
                         path, t->name, c->name, cols);
            break;
        }
        hid_t mt = H5Tget_member_type(ft, (unsigned)idx);
        H5T_class_t want = c->kind == COL_NAME ? H5T_STRING : H5T_INTEGER;
        if (H5Tget_class(mt) != want)
            rc = gm_errf(err, GM_EINVAL, "%s: /%s column '%s' is not %s; " REIMPORT, path, t->name,
                         c->name, want == H5T_STRING ? "a string" : "an integer");
        else if (want == H5T_STRING && H5Tis_variable_str(mt) != 0)
            rc = gm_errf(err, GM_EINVAL,
                         "%s: /%s column '%s' is a variable-length string; it must be a "
                         "fixed-length one (numpy 'S64'), ASCII or UTF-8 — " REIMPORT,
                         path, t->name, c->name);
        else if (want == H5T_INTEGER && H5Tget_size(mt) > 8)
            rc = gm_errf(err, GM_EINVAL, "%s: /%s column '%s' is wider than 64 bits; " REIMPORT,
                         path, t->name, c->name);
        h5_close(&mt, H5Tclose);
    }
    h5_close(&ft, H5Tclose);
    return rc;
}

/*
 * Packed events. HDF5 converts a compound member by member, with a memmove
 * per field, which costs more than reading the bytes (about 40 M events/s
 * against 95 M here, from the page cache). So the writer packs rows itself and writes them with the
 * file type as memory type (no conversion), and the reader does the same when the file holds
 * exactly that layout; other layouts (say from h5py) go through HDF5's conversion. Byte order is
 * explicit, so this works on any host.
 */
enum { EV_PACKED = 43 }; /* bytes per packed row as gmsim writes it; offsets follow event_cols */
enum {
    EV_PACKED_BASE = 35
}; /* the required columns; then id (issue 12), then site (issue 11),
      each only if the file has it: 35, 39 or 43 bytes */

static inline uint64_t get_le64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static inline void put_le64(unsigned char *p, uint64_t v)
{
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    memcpy(p, &v, 8);
}

static inline uint32_t get_le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Rows of `row` bytes: the required columns, then id if has_id, then site
 * if has_site. */
static void unpack_events(const unsigned char *raw, size_t row, int has_id, int has_site,
                          gm_event *ev, size_t n)
{
    size_t site_off = has_id ? EV_PACKED_BASE + 4 : EV_PACKED_BASE;
    gm_event e;
    memset(&e, 0, sizeof e); /* padding stays zero, so events can be hashed */
    for (size_t i = 0; i < n; i++, raw += row) {
        e.t_ns = get_le64(raw + 0);
        e.op = raw[8];
        e.addr = get_le64(raw + 9);
        e.size = get_le64(raw + 17);
        e.stream = get_le64(raw + 25);
        e.category = raw[33];
        e.phase = raw[34];
        if (has_id) e.id = get_le32(raw + EV_PACKED_BASE);
        if (has_site) e.site = get_le32(raw + site_off);
        ev[i] = e;
    }
}

/* Pack n events, numbering their allocations on the way (event_ids.h). */
static int pack_events(gm_ids *ids, const gm_event *ev, unsigned char *raw, size_t n)
{
    for (size_t i = 0; i < n; i++, raw += EV_PACKED) {
        int64_t id = gm_ids_next(ids, &ev[i]);
        if (id < 0) return GM_ENOMEM;
        put_le64(raw + 0, ev[i].t_ns);
        raw[8] = ev[i].op;
        put_le64(raw + 9, ev[i].addr);
        put_le64(raw + 17, ev[i].size);
        put_le64(raw + 25, ev[i].stream);
        raw[33] = ev[i].category;
        raw[34] = ev[i].phase;
        for (int k = 0; k < 4; k++) {
            raw[35 + k] = (unsigned char)((uint64_t)id >> (8 * k));
            raw[39 + k] = (unsigned char)(ev[i].site >> (8 * k));
        }
    }
    return GM_OK;
}

/* ---------------- meta ---------------- */

void gm_trace_meta_init(gm_trace_meta *m)
{
    memset(m, 0, sizeof *m);
    m->version = GM_TRACE_VERSION;
    char **s[] = {&m->source,   &m->device_name, &m->created_utc,         &m->command,
                  &m->workload, &m->alloc_conf,  &m->device_avail_source, &m->torch_version};
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++)
        *s[i] = strdup(""); /* NULL if out of memory; every user accepts NULL */
}

void gm_trace_meta_free(gm_trace_meta *m)
{
    if (!m) return;
    free(m->source);
    free(m->device_name);
    free(m->created_utc);
    free(m->command);
    free(m->workload);
    free(m->alloc_conf);
    free(m->device_avail_source);
    free(m->torch_version);
    memset(m, 0, sizeof *m);
}

int gm_trace_meta_set(char **field, const char *value)
{
    char *s = strdup(value ? value : "");
    if (!s) return GM_ENOMEM;
    free(*field);
    *field = s;
    return GM_OK;
}

/* The string attributes, in the order FORMAT.md lists them. */
struct str_attr {
    const char *name;
    size_t off; /* of the char * in gm_trace_meta */
};
static const struct str_attr str_attrs[] = {
    {"source", offsetof(gm_trace_meta, source)},
    {"device_name", offsetof(gm_trace_meta, device_name)},
    {"created_utc", offsetof(gm_trace_meta, created_utc)},
    {"command", offsetof(gm_trace_meta, command)},
    {"workload", offsetof(gm_trace_meta, workload)},
    {"alloc_conf", offsetof(gm_trace_meta, alloc_conf)},
    {"device_avail_source", offsetof(gm_trace_meta, device_avail_source)},
    {"torch_version", offsetof(gm_trace_meta, torch_version)},
};

/* The unsigned 64-bit attributes, in the order FORMAT.md lists them. */
struct u64_attr {
    const char *name;
    size_t off; /* of the uint64_t in gm_trace_meta */
};
static const struct u64_attr u64_attrs[] = {
    {"device_total_bytes", offsetof(gm_trace_meta, device_total_bytes)},
    {"dropped_records", offsetof(gm_trace_meta, dropped_records)},
    {"device_avail_bytes", offsetof(gm_trace_meta, device_avail_bytes)},
    {"device_avail_min_bytes", offsetof(gm_trace_meta, device_avail_min_bytes)},
    {"device_avail_max_bytes", offsetof(gm_trace_meta, device_avail_max_bytes)},
};

static uint64_t *meta_u64(gm_trace_meta *m, const struct u64_attr *a)
{
    return (uint64_t *)((char *)m + a->off);
}

static char **meta_str(gm_trace_meta *m, const struct str_attr *a)
{
    return (char **)((char *)m + a->off);
}

/* A name from the file, fit for a message: printable ASCII, the rest '?'. */
static const char *printable(const char *s, char *out, size_t len)
{
    size_t i = 0;
    for (; s && s[i] && i + 4 < len; i++)
        out[i] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
    if (s && s[i]) memcpy(out + i, "...", 3), i += 3;
    out[i] = 0;
    return out;
}

/* Open attribute `name` of the root if it exists and holds one value of
 * class `cls` (and, for a string, fixed-length ones within the limit).
 * Returns the id, H5I_INVALID_HID if absent, or an error. */
static int open_attr(hid_t file, const char *path, const char *name, H5T_class_t cls, hid_t *out,
                     gm_err *err)
{
    *out = H5I_INVALID_HID;
    htri_t ex = H5Aexists(file, name);
    if (ex < 0)
        return gm_errf(err, GM_EIO, "%s: cannot read attribute %s; the file is damaged", path,
                       name);
    if (ex == 0) return GM_OK;
    hid_t a = H5Aopen(file, name, H5P_DEFAULT);
    hid_t t = a >= 0 ? H5Aget_type(a) : H5I_INVALID_HID;
    hid_t sp = a >= 0 ? H5Aget_space(a) : H5I_INVALID_HID;
    int ok = t >= 0 && sp >= 0 && H5Tget_class(t) == cls && H5Sget_simple_extent_npoints(sp) == 1;
    size_t size = ok ? H5Tget_size(t) : 0;
    int vlen = ok && cls == H5T_STRING ? H5Tis_variable_str(t) > 0 : 0;
    h5_close(&t, H5Tclose);
    h5_close(&sp, H5Sclose);
    const char *why = !ok                                       ? NULL
                      : cls == H5T_INTEGER && size > 8          ? "an integer wider than 64 bits"
                      : !vlen && size > GM_TRACE_MAX_ATTR_BYTES ? "a string over 1 MiB"
                                                                : "";
    if (!ok || *why) {
        h5_close(&a, H5Aclose);
        if (why)
            return gm_errf(err, GM_EINVAL,
                           "%s: attribute %s is %s (FORMAT.md, \"Limits\"); " REIMPORT, path, name,
                           why);
        return gm_errf(err, GM_EINVAL, "%s: attribute %s is not a single %s; " REIMPORT, path, name,
                       cls == H5T_STRING ? "string" : "integer");
    }
    *out = a;
    return GM_OK;
}

/* An integer attribute of any width up to 64 bits, signed or not, read
 * without clamping; absent -> 0. *neg: it is negative (*v is then its
 * two's complement). */
static int read_int_attr(hid_t file, const char *path, const char *name, uint64_t *v, int *neg,
                         gm_err *err)
{
    hid_t a;
    *v = 0;
    *neg = 0;
    int rc = open_attr(file, path, name, H5T_INTEGER, &a, err);
    if (rc || a < 0) return rc;
    hid_t ft = H5Aget_type(a);
    int is_signed = ft >= 0 && H5Tget_sign(ft) == H5T_SGN_2;
    h5_close(&ft, H5Tclose);
    long long s = 0;
    herr_t st = is_signed ? H5Aread(a, H5T_NATIVE_LLONG, &s) : H5Aread(a, H5T_NATIVE_UINT64, v);
    H5Aclose(a);
    if (st < 0)
        return gm_errf(err, GM_EIO, "%s: cannot read attribute %s; the file is damaged", path,
                       name);
    if (is_signed) {
        *v = (uint64_t)s;
        *neg = s < 0;
    }
    return GM_OK;
}

/* Read a string attribute, variable- or fixed-length (null-terminated or
 * null-padded, ASCII or UTF-8); absent -> "". */
static int read_str_attr(hid_t file, const char *path, const char *name, char **field, gm_err *err)
{
    hid_t a;
    int rc = open_attr(file, path, name, H5T_STRING, &a, err);
    if (rc) return rc;
    if (a < 0)
        return gm_trace_meta_set(field, "") ? gm_errf(err, GM_ENOMEM, "out of memory") : GM_OK;
    hid_t ft = H5Aget_type(a), mt = H5Tcopy(H5T_C_S1);
    char *val = NULL, *vlen = NULL;
    herr_t st = -1;
    if (ft >= 0 && mt >= 0 && H5Tis_variable_str(ft) > 0) {
        if (H5Tset_size(mt, H5T_VARIABLE) >= 0 && H5Tset_cset(mt, H5Tget_cset(ft)) >= 0)
            st = H5Aread(a, mt, &vlen);
        if (st >= 0 && vlen && strnlen(vlen, GM_TRACE_MAX_ATTR_BYTES + 1) > GM_TRACE_MAX_ATTR_BYTES)
            st = 1; /* over the limit */
        val = st == 0 ? strdup(vlen ? vlen : "") : NULL;
        if (vlen) H5free_memory(vlen);
    } else if (ft >= 0 && mt >= 0) {
        size_t n = H5Tget_size(ft);
        val = calloc(n + 1, 1);
        if (val && H5Tset_size(mt, n + 1) >= 0 && H5Tset_strpad(mt, H5T_STR_NULLTERM) >= 0 &&
            H5Tset_cset(mt, H5Tget_cset(ft)) >= 0)
            st = H5Aread(a, mt, val);
    }
    h5_close(&ft, H5Tclose);
    h5_close(&mt, H5Tclose);
    H5Aclose(a);
    if (st != 0) {
        free(val);
        if (st > 0)
            return gm_errf(
                err, GM_EINVAL,
                "%s: attribute %s is a string over 1 MiB (FORMAT.md, \"Limits\"); " REIMPORT, path,
                name);
        return gm_errf(err, GM_EIO, "%s: cannot read attribute %s; the file is damaged", path,
                       name);
    }
    if (!val) return gm_errf(err, GM_ENOMEM, "%s: out of memory reading attribute %s", path, name);
    free(*field);
    *field = val;
    return GM_OK;
}

/* ---------------- reader ---------------- */

struct gm_h5r {
    char *path;
    gm_trace_meta meta;
    hid_t file;
    hid_t dapl;           /* dataset access: external links refused           */
    hid_t events;         /* /events                                        */
    hid_t ev_type;        /* memory type: struct gm_event                   */
    hid_t fspace;         /* /events dataspace, re-selected for each piece  */
    hid_t mspace;         /* GM_TRACE_CHUNK_EVENTS rows, the first n selected */
    hid_t raw_type;       /* fast path: the packed file type, or invalid      */
    size_t raw_row;       /* fast path: its bytes per row (with or without id) */
    int raw_id, raw_site; /* fast path: the rows have an id, a site column */
    hid_t dxpl;           /* transfers: conversion refuses out-of-range values */
    int range_error;      /* set by conv_range_cb: the last read hit one      */
    unsigned char *raw;   /* fast path: GM_TRACE_CHUNK_EVENTS packed rows     */
    uint64_t nevents;     /* rows in /events                                */
    hsize_t file_bytes;   /* size of the file                               */
};

/* Refuse what is not a regular file, by its mode. */
static int check_mode(const char *path, mode_t mode, gm_err *err)
{
    if (S_ISDIR(mode)) return gm_errf(err, GM_EINVAL, "%s: is a directory; " NOT_A_TRACE, path);
    if (!S_ISREG(mode))
        return gm_errf(err, GM_EINVAL,
                       "%s: is not a regular file (a FIFO, device or socket); a trace is read "
                       "only from a regular file — copy it into one first",
                       path);
    return GM_OK;
}

int gm_trace_open_file(const char *path, int *fd, gm_err *err)
{
    struct stat st;
    *fd = -1;
    if (stat(path, &st) != 0) return gm_trace_open_error(path, errno, err);
    int rc = check_mode(path, st.st_mode, err);
    if (rc) return rc;
    int f = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (f < 0) return gm_trace_open_error(path, errno, err);
    if (fstat(f, &st) != 0 || (rc = check_mode(path, st.st_mode, err)) != GM_OK) {
        if (!rc) rc = gm_errf(err, GM_EIO, "%s: cannot open: %s", path, strerror(errno));
        close(f);
        return rc;
    }
    *fd = f;
    return GM_OK;
}

/*
 * The file: a regular file (gm_trace_open_file), handed to HDF5 as
 * /proc/self/fd/N, so HDF5 opens the very file that was checked even if
 * the name changes meanwhile. *fd_out is ours to close once HDF5 has it.
 */
static int check_file(const char *path, int fd, int *fd_out, char *h5path, size_t len, gm_err *err)
{
    *fd_out = -1;
    if (fd < 0) {
        int rc = gm_trace_open_file(path, &fd, err);
        if (rc) return rc;
        *fd_out = fd;
    }
    struct stat st;
    if (fstat(fd, &st) != 0)
        return gm_errf(err, GM_EIO, "%s: cannot open: %s", path, strerror(errno));
    int rc = check_mode(path, st.st_mode, err);
    if (rc) return rc;
    snprintf(h5path, len, "/proc/self/fd/%d", fd);
    if (access(h5path, R_OK) != 0) snprintf(h5path, len, "%s", path); /* no /proc */
    if (H5Fis_hdf5(h5path) <= 0)
        return gm_errf(err, GM_EINVAL, "%s: not an HDF5 file (or truncated); " NOT_A_TRACE, path);
    return GM_OK;
}

static int read_meta(gm_h5r *r, gm_err *err)
{
    const char *p = r->path;
    htri_t ex = H5Aexists(r->file, "gmtrace_version");
    if (ex <= 0)
        return gm_errf(
            err, GM_EINVAL,
            "%s: no gmtrace_version attribute, so this HDF5 file is not a gmsim trace; make "
            "traces with 'gmsim gen' or gmcapture, or convert other files with 'gmsim import'",
            p);
    uint64_t version = 0;
    int neg;
    int rc = read_int_attr(r->file, p, "gmtrace_version", &version, &neg, err);
    if (rc) return rc;
    if (neg || version < GM_TRACE_MIN_VERSION || version > GM_TRACE_VERSION) {
        char v[32];
        if (neg)
            snprintf(v, sizeof v, "%lld", (long long)version);
        else
            snprintf(v, sizeof v, "%llu", (ull)version);
        return gm_errf(err, GM_EINVAL,
                       "%s: gmtrace_version is %s but this gmsim reads versions %d to %d; "
                       "upgrade gmsim or re-import the trace",
                       p, v, GM_TRACE_MIN_VERSION, GM_TRACE_VERSION);
    }
    r->meta.version = (int)version;
    for (size_t i = 0; !rc && i < sizeof str_attrs / sizeof str_attrs[0]; i++)
        rc = read_str_attr(r->file, p, str_attrs[i].name, meta_str(&r->meta, &str_attrs[i]), err);
    for (size_t i = 0; !rc && i < sizeof u64_attrs / sizeof u64_attrs[0]; i++) {
        uint64_t *v = meta_u64(&r->meta, &u64_attrs[i]);
        rc = read_int_attr(r->file, p, u64_attrs[i].name, v, &neg, err);
        if (!rc && neg)
            rc = gm_errf(err, GM_EINVAL,
                         "%s: attribute %s is %lld; it counts bytes or records and cannot be "
                         "negative — " REIMPORT,
                         p, u64_attrs[i].name, (long long)*v);
    }
    return rc;
}

/* External links are never followed (a trace is one file): H5Dopen2 asks
 * this before it would open another file. */
static herr_t refuse_elink(const char *parent_file, const char *parent_group,
                           const char *child_file, const char *child_object, unsigned *acc_flags,
                           hid_t fapl, void *op)
{
    (void)parent_file, (void)parent_group, (void)child_file, (void)child_object;
    (void)acc_flags, (void)fapl, (void)op;
    return -1;
}

/* /name is absent (*exists = 0), or a hard link in this file. */
static int check_link(gm_h5r *r, const char *name, int *exists, gm_err *err)
{
    *exists = 0;
    htri_t ex = H5Lexists(r->file, name, H5P_DEFAULT);
    if (ex < 0)
        return gm_errf(err, GM_EIO, "%s: cannot look up /%s; the file is damaged", r->path, name);
    if (ex == 0) return GM_OK;
    H5L_info_t li;
    if (H5Lget_info(r->file, name, &li, H5P_DEFAULT) < 0)
        return gm_errf(err, GM_EIO, "%s: cannot look up /%s; the file is damaged", r->path, name);
    if (li.type == H5L_TYPE_EXTERNAL) {
        char val[512] = {0}, shown[160], obj[96];
        const char *file = NULL, *object = NULL;
        unsigned flags;
        if (li.u.val_size <= sizeof val &&
            H5Lget_val(r->file, name, val, sizeof val, H5P_DEFAULT) >= 0)
            H5Lunpack_elink_val(val, li.u.val_size, &flags, &file, &object);
        return gm_errf(err, GM_EINVAL,
                       "%s: /%s is an external link (to '%s', object '%s'); a gmsim trace keeps "
                       "its data in one file and gmsim never follows a link out of it — copy the "
                       "data in (h5copy) or re-import the trace",
                       r->path, name, printable(file, shown, sizeof shown),
                       printable(object, obj, sizeof obj));
    }
    if (li.type != H5L_TYPE_HARD)
        return gm_errf(err, GM_EINVAL,
                       "%s: /%s is a soft or user-defined link, not a dataset; a gmsim trace "
                       "holds its tables as datasets — " REIMPORT,
                       r->path, name);
    *exists = 1;
    return GM_OK;
}

/* Limits of one table (FORMAT.md, "Limits"). */
static hsize_t max_rows(const struct table *t)
{
    return t == &events_table ? GM_TRACE_MAX_EVENTS : GM_TRACE_MAX_TABLE_ROWS;
}

/*
 * Where and how the rows are stored, checked before any is read: in this
 * file (no external storage, no virtual dataset), with no filter but the
 * ones gmsim writes, in chunks of bounded size, and backed by stored bytes:
 * every row of an unfiltered dataset must be stored (otherwise HDF5 invents
 * fill values: a 6 KB file could "hold" 2^40 events), and a filtered one may
 * inflate at most GM_TRACE_MAX_INFLATE times. *chunk_bytes: 0 unless chunked
 * and filtered (the caller sizes the chunk cache from it).
 */
static int check_storage(gm_h5r *r, hid_t ds, const struct table *t, hsize_t nrows,
                         size_t row_bytes, size_t *chunk_bytes, gm_err *err)
{
    const char *p = r->path, *n = t->name;
    *chunk_bytes = 0;
    hid_t dcpl = H5Dget_create_plist(ds);
    if (dcpl < 0)
        return gm_errf(err, GM_EIO, "%s: /%s: cannot read its layout; the file is damaged", p, n);
    H5D_layout_t layout = H5Pget_layout(dcpl);
    int next = H5Pget_external_count(dcpl), nf = H5Pget_nfilters(dcpl);
    hsize_t chunk = 0;
    int chunk_rank = layout == H5D_CHUNKED ? H5Pget_chunk(dcpl, 1, &chunk) : 0;
    int rc = GM_OK;
    char shown[160];
    if (next != 0) {
        char name[256] = "";
        off_t off;
        hsize_t size;
        if (next > 0) H5Pget_external(dcpl, 0, sizeof name, name, &off, &size);
        rc = gm_errf(err, GM_EINVAL,
                     "%s: /%s is kept in external storage (other files, e.g. '%s'); a gmsim trace "
                     "keeps its data in one file and gmsim never reads another — " REIMPORT,
                     p, n, printable(name, shown, sizeof shown));
    } else if (layout == H5D_VIRTUAL) {
        rc = gm_errf(err, GM_EINVAL,
                     "%s: /%s is a virtual dataset (its rows live in other files); gmsim never "
                     "reads another file — copy the rows into the trace (h5repack) or re-import",
                     p, n);
    } else if (layout != H5D_CHUNKED && layout != H5D_CONTIGUOUS && layout != H5D_COMPACT) {
        rc = gm_errf(err, GM_EIO, "%s: /%s has an unknown storage layout; the file is damaged", p,
                     n);
    } else if (nf < 0) {
        rc = gm_errf(err, GM_EIO, "%s: /%s: cannot read its filters; the file is damaged", p, n);
    }
    for (int i = 0; rc == GM_OK && i < nf; i++) {
        unsigned flags, cfg;
        size_t nelem = 0;
        char fname[128] = "";
        H5Z_filter_t f =
            H5Pget_filter2(dcpl, (unsigned)i, &flags, &nelem, NULL, sizeof fname, fname, &cfg);
        if (f != H5Z_FILTER_SHUFFLE && f != H5Z_FILTER_DEFLATE)
            rc = gm_errf(err, GM_EINVAL,
                         "%s: /%s uses HDF5 filter %d ('%s'); gmsim reads only the storage it "
                         "writes: no filter, or shuffle + deflate — rewrite it with "
                         "'h5repack -f NONE' (or -f SHUF -f GZIP=4) or re-import the trace",
                         p, n, (int)f, printable(fname, shown, sizeof shown));
    }
    h5_close(&dcpl, H5Pclose);
    if (rc) return rc;
    if (layout == H5D_CHUNKED && (chunk_rank != 1 || chunk < 1 || chunk > GM_TRACE_MAX_CHUNK_ROWS ||
                                  chunk * row_bytes > GM_TRACE_MAX_CHUNK_BYTES))
        return gm_errf(err, GM_EINVAL,
                       "%s: /%s is stored in chunks of %llu rows (%llu bytes); gmsim reads chunks "
                       "of 1 to %u rows and at most %u MiB (FORMAT.md, \"Limits\") — rewrite it "
                       "with smaller chunks (h5repack -l CHUNK=65536) or re-import the trace",
                       p, n, (ull)chunk, (ull)(chunk * row_bytes), GM_TRACE_MAX_CHUNK_ROWS,
                       GM_TRACE_MAX_CHUNK_BYTES >> 20);
    uint64_t logical = (uint64_t)nrows * row_bytes; /* nrows <= 2^40, row_bytes <= 4096 */
    uint64_t stored = layout == H5D_COMPACT ? logical : H5Dget_storage_size(ds);
    if (nf == 0 && stored < logical)
        return gm_errf(err, GM_EINVAL,
                       "%s: /%s declares %llu rows (%llu bytes) but stores only %llu bytes; the "
                       "rest would be HDF5 fill values, not recorded rows — the file is damaged "
                       "or was never completely written: re-create it",
                       p, n, (ull)nrows, (ull)logical, (ull)stored);
    if (nf > 0 && logical / GM_TRACE_MAX_INFLATE > stored)
        return gm_errf(err, GM_EINVAL,
                       "%s: /%s declares %llu rows (%llu bytes) from %llu compressed bytes, more "
                       "than %dx; no real trace compresses that well (gmsim's own: about 6x), so "
                       "the file is damaged or hostile (FORMAT.md, \"Limits\") — re-create it",
                       p, n, (ull)nrows, (ull)logical, (ull)stored, GM_TRACE_MAX_INFLATE);
    if (layout != H5D_COMPACT && stored > r->file_bytes)
        return gm_errf(err, GM_EINVAL,
                       "%s: /%s claims %llu stored bytes but the file has %llu; it is truncated "
                       "or damaged — re-create it",
                       p, n, (ull)stored, (ull)r->file_bytes);
    if (layout == H5D_CONTIGUOUS && logical > 0) {
        haddr_t off = H5Dget_offset(ds);
        if (off == HADDR_UNDEF || off > r->file_bytes || r->file_bytes - off < logical)
            return gm_errf(err, GM_EINVAL,
                           "%s: /%s lies past the end of the file; it is truncated or damaged — "
                           "re-create it",
                           p, n);
    }
    if (layout == H5D_CHUNKED && nf > 0) *chunk_bytes = (size_t)(chunk * row_bytes);
    return GM_OK;
}

/* The rows: a 1-D dataspace within the table's limit. */
static int check_rows(gm_h5r *r, hid_t ds, const struct table *t, hsize_t *nrows, gm_err *err)
{
    hid_t sp = H5Dget_space(ds);
    hsize_t dims[H5S_MAX_RANK];
    int simple = sp >= 0 && H5Sget_simple_extent_type(sp) == H5S_SIMPLE;
    int rank = simple ? H5Sget_simple_extent_dims(sp, dims, NULL) : -1;
    h5_close(&sp, H5Sclose);
    if (rank != 1)
        return gm_errf(err, GM_EINVAL, "%s: /%s is not a 1-D table (rank %d); " REIMPORT, r->path,
                       t->name, rank);
    if (dims[0] > max_rows(t))
        return gm_errf(err, GM_EINVAL,
                       "%s: /%s has %llu rows, over the limit of %llu (FORMAT.md, \"Limits\"); the "
                       "file is damaged — " REIMPORT,
                       r->path, t->name, (ull)dims[0], (ull)max_rows(t));
    *nrows = dims[0];
    return GM_OK;
}

/*
 * Open table t, checked as above, for reading. A compressed chunk that does
 * not fit HDF5's chunk cache (1 MiB by default) is inflated again on every
 * read that touches it, so a compressed dataset gets a cache of two chunks
 * (at most 2 x GM_TRACE_MAX_CHUNK_BYTES). *ds is H5I_INVALID_HID if the
 * table is absent.
 */
static int open_table(gm_h5r *r, const struct table *t, hid_t *ds, hsize_t *nrows, gm_err *err)
{
    int exists;
    *ds = H5I_INVALID_HID;
    *nrows = 0;
    int rc = check_link(r, t->name, &exists, err);
    if (rc || !exists) return rc;
    hid_t d = H5Dopen2(r->file, t->name, r->dapl);
    if (d < 0)
        return gm_errf(err, GM_EINVAL, "%s: /%s is not a dataset; " REIMPORT, r->path, t->name);
    hid_t ft = H5Dget_type(d);
    size_t row_bytes = ft >= 0 ? H5Tget_size(ft) : 0;
    h5_close(&ft, H5Tclose);
    size_t chunk_bytes = 0;
    rc = check_table(d, t, r->path, err);
    if (!rc && (row_bytes < 1 || row_bytes > GM_TRACE_MAX_ROW_BYTES))
        rc = gm_errf(err, GM_EINVAL,
                     "%s: /%s has rows of %zu bytes; gmsim reads rows of at most %d bytes "
                     "(FORMAT.md, \"Limits\") — " REIMPORT,
                     r->path, t->name, row_bytes, GM_TRACE_MAX_ROW_BYTES);
    if (!rc) rc = check_rows(r, d, t, nrows, err);
    if (!rc) rc = check_storage(r, d, t, *nrows, row_bytes, &chunk_bytes, err);
    if (rc) {
        H5Dclose(d);
        return rc;
    }
    if (2 * chunk_bytes > GM_MiB) {
        hid_t dapl = H5Pcopy(r->dapl);
        if (dapl >= 0 && H5Pset_chunk_cache(dapl, 521, 2 * chunk_bytes, 1.0) >= 0) {
            hid_t d2 = H5Dopen2(r->file, t->name, dapl);
            if (d2 >= 0) H5Dclose(d), d = d2; /* else the default cache works, only slower */
        }
        h5_close(&dapl, H5Pclose);
    }
    *ds = d;
    return GM_OK;
}

/* The packed layout the file has, with the optional id or without it (the
 * packed type built from the file's own columns), or none. */
static void setup_fast_path(gm_h5r *r)
{
    hid_t ft = H5Dget_type(r->events), packed = table_type_from(&events_table, 1, ft);
    size_t row = packed >= 0 ? H5Tget_size(packed) : 0;
    if (ft >= 0 && row >= EV_PACKED_BASE && row <= EV_PACKED && H5Tequal(ft, packed) > 0 &&
        (r->raw = malloc((size_t)GM_TRACE_CHUNK_EVENTS * row))) {
        r->raw_type = packed;
        r->raw_row = row;
        r->raw_id = has_member(ft, "id");
        r->raw_site = has_member(ft, "site");
        packed = H5I_INVALID_HID;
    }
    h5_close(&packed, H5Tclose);
    h5_close(&ft, H5Tclose);
}

/* The id column is trusted only as gmsim's writer numbered it (FORMAT.md).
 * Its scheme (trace.h, dense_ids): 0 not trusted, 1 numbered
 * from the first event, 2 seeded with /initial_state's blocks. */
static int ids_trusted(hid_t events)
{
    char *scheme = NULL;
    gm_err ignore = {0};
    int ok = H5Aexists(events, "id_scheme") > 0 &&
             read_str_attr(events, "", "id_scheme", &scheme, &ignore) == GM_OK && scheme;
    int v = ok && !strcmp(scheme, ID_SCHEME) ? 1 : ok && !strcmp(scheme, ID_SCHEME_SEEDED) ? 2 : 0;
    free(scheme);
    return v;
}

/*
 * HDF5 converts a value that does not fit its destination (a negative int64
 * into a uint64 column, 300 into op) by clamping it, which would turn a bad
 * value into a plausible one. Make such a conversion fail instead.
 */
static H5T_conv_ret_t conv_range_cb(H5T_conv_except_t what, hid_t src, hid_t dst, void *src_buf,
                                    void *dst_buf, void *user)
{
    (void)src, (void)dst, (void)src_buf, (void)dst_buf;
    if (what != H5T_CONV_EXCEPT_RANGE_HI && what != H5T_CONV_EXCEPT_RANGE_LOW)
        return H5T_CONV_UNHANDLED;
    *(int *)user = 1;
    return H5T_CONV_ABORT;
}

/* The error for a failed H5Dread of what (rows first..last). */
static int read_failed(gm_h5r *r, const char *what, uint64_t first, uint64_t last, gm_err *err)
{
    if (r->range_error)
        return gm_errf(err, GM_EINVAL,
                       "%s: %s %llu..%llu: a value does not fit its column (negative, or too "
                       "large for a uint8/uint64 column); " REIMPORT,
                       r->path, what, (ull)first, (ull)last);
    return gm_errf(err, GM_EIO,
                   "%s: %s %llu..%llu: read failed; the file is damaged or truncated — re-create "
                   "it",
                   r->path, what, (ull)first, (ull)last);
}

static int open_events(gm_h5r *r, gm_err *err)
{
    const char *p = r->path;
    hsize_t n;
    int rc = open_table(r, &events_table, &r->events, &n, err);
    if (rc) return rc;
    if (r->events < 0)
        return gm_errf(err, GM_EINVAL,
                       "%s: no /events dataset; the trace is incomplete or not a gmsim trace — "
                       "re-create it with 'gmsim gen', 'gmsim import' or gmcapture",
                       p);
    r->nevents = n;
    hsize_t piece = GM_TRACE_CHUNK_EVENTS;
    hid_t ft = H5Dget_type(r->events);
    r->ev_type = table_type_from(&events_table, 0, ft);
    r->meta.dense_ids = has_member(ft, "id") ? ids_trusted(r->events) : 0;
    h5_close(&ft, H5Tclose);
    r->fspace = H5Dget_space(r->events);
    r->mspace = H5Screate_simple(1, &piece, NULL);
    if (r->ev_type < 0 || r->fspace < 0 || r->mspace < 0)
        return gm_errf(err, GM_EIO, "%s: cannot set up reading /events (HDF5 error)", p);
    setup_fast_path(r);
    return GM_OK;
}

/* /sites, checked as every table is, its size bounded (FORMAT.md,
 * "Limits"); absent -> no ds. *wn, *ws: the widths of its two strings. */
static int open_sites(gm_h5r *r, hid_t *ds, hsize_t *n, size_t *wn, size_t *ws, gm_err *err)
{
    int rc = open_table(r, &sites_table, ds, n, err);
    if (rc || *ds < 0) return rc;
    hid_t ft = H5Dget_type(*ds);
    size_t row = ft >= 0 ? H5Tget_size(ft) : 0;
    size_t w[2] = {0, 0};
    for (int i = 0; i < 2 && ft >= 0; i++) {
        int idx = H5Tget_member_index(ft, site_cols[i].name);
        hid_t mt = idx >= 0 ? H5Tget_member_type(ft, (unsigned)idx) : H5I_INVALID_HID;
        w[i] = mt >= 0 ? H5Tget_size(mt) : 0;
        h5_close(&mt, H5Tclose);
    }
    h5_close(&ft, H5Tclose);
    *wn = w[0], *ws = w[1];
    if (w[0] < 1 || w[1] < 1 || w[0] + w[1] > GM_TRACE_MAX_ROW_BYTES)
        rc = gm_errf(err, GM_EINVAL, "%s: /sites: cannot read the widths of its strings; " REIMPORT,
                     r->path);
    else if ((uint64_t)*n * row > GM_TRACE_MAX_SITES_BYTES)
        rc = gm_errf(err, GM_EINVAL,
                     "%s: /sites holds %llu rows of %zu bytes, over the limit of %u MiB "
                     "(FORMAT.md, \"Limits\"); the file is damaged — " REIMPORT,
                     r->path, (ull)*n, row, GM_TRACE_MAX_SITES_BYTES >> 20);
    if (rc) h5_close(ds, H5Dclose);
    return rc;
}

/* How many sites the events may name (meta n_sites). */
static int count_sites(gm_h5r *r, gm_err *err)
{
    hid_t ds;
    hsize_t n = 0;
    size_t wn, ws;
    int rc = open_sites(r, &ds, &n, &wn, &ws, err);
    h5_close(&ds, H5Dclose);
    r->meta.n_sites = rc ? 0 : n;
    return rc;
}

/* The property lists every read uses: no file locking (a trace is never
 * opened for writing under its final name, and file systems without flock
 * would refuse it), no external link followed, conversions that refuse
 * out-of-range values. */
static int make_plists(gm_h5r *r, hid_t *fapl, gm_err *err)
{
    *fapl = H5Pcreate(H5P_FILE_ACCESS);
#if H5_VERSION_GE(1, 10, 7)
    if (*fapl >= 0) H5Pset_file_locking(*fapl, 0, 1);
#endif
    r->dapl = H5Pcreate(H5P_DATASET_ACCESS);
    r->dxpl = H5Pcreate(H5P_DATASET_XFER);
    if (*fapl < 0 || r->dapl < 0 || r->dxpl < 0 ||
        H5Pset_elink_cb(r->dapl, refuse_elink, NULL) < 0 ||
        H5Pset_type_conv_cb(r->dxpl, conv_range_cb, &r->range_error) < 0)
        return gm_errf(err, GM_EIO, "%s: cannot set up HDF5 (out of memory?)", r->path);
    return GM_OK;
}

int gm_h5r_open(const char *path, int fd, gm_h5r **out, gm_err *err)
{
    return gm_h5r_open_sandboxed(path, fd, NULL, out, err);
}

int gm_h5r_open_sandboxed(const char *path, int fd, void (*sandbox)(void), gm_h5r **out,
                          gm_err *err)
{
    if (!out || !path) return gm_errf(err, GM_EINVAL, "gm_trace_open: no path");
    *out = NULL;
    gm_h5_quiet();
    char h5path[4200];
    int own_fd;
    int rc = check_file(path, fd, &own_fd, h5path, sizeof h5path, err);
    gm_h5r *r = rc ? NULL : calloc(1, sizeof *r);
    if (!rc && !r) rc = gm_errf(err, GM_ENOMEM, "%s: out of memory", path);
    if (rc) {
        if (own_fd >= 0) close(own_fd);
        return rc;
    }
    r->file = r->dapl = r->events = r->ev_type = r->fspace = r->mspace = r->raw_type = r->dxpl =
        H5I_INVALID_HID;
    gm_trace_meta_init(&r->meta);
    r->path = strdup(path);
    hid_t fapl = H5I_INVALID_HID;
    if (!r->path) rc = gm_errf(err, GM_ENOMEM, "%s: out of memory", path);
    if (!rc) rc = make_plists(r, &fapl, err);
    if (!rc) {
        r->file = H5Fopen(h5path, H5F_ACC_RDONLY, fapl);
        if (r->file < 0 || H5Fget_filesize(r->file, &r->file_bytes) < 0)
            rc = gm_errf(err, GM_EINVAL, "%s: not an HDF5 file (or truncated); " NOT_A_TRACE, path);
    }
    h5_close(&fapl, H5Pclose);
    if (own_fd >= 0) close(own_fd); /* HDF5 has its own descriptor */
    if (!rc && sandbox) sandbox();
    if (!rc) rc = read_meta(r, err);
    if (!rc) rc = open_events(r, err);
    if (!rc) rc = count_sites(r, err);
    if (rc) {
        gm_h5r_close(r);
        return rc;
    }
    *out = r;
    return GM_OK;
}

void gm_h5r_close(gm_h5r *r)
{
    if (!r) return;
    gm_h5_quiet();
    h5_close(&r->mspace, H5Sclose);
    h5_close(&r->dxpl, H5Pclose);
    h5_close(&r->dapl, H5Pclose);
    h5_close(&r->fspace, H5Sclose);
    h5_close(&r->ev_type, H5Tclose);
    h5_close(&r->raw_type, H5Tclose);
    free(r->raw);
    h5_close(&r->events, H5Dclose);
    h5_close(&r->file, H5Fclose);
    gm_trace_meta_free(&r->meta);
    free(r->path);
    free(r);
}

const gm_trace_meta *gm_h5r_meta(const gm_h5r *r)
{
    return &r->meta;
}

uint64_t gm_h5r_nevents(const gm_h5r *r)
{
    return r->nevents;
}

/* alloc, segment_alloc, segment_map and oom (ops 0, 2, 4, 7) must carry a size. */
static inline int op_allocates(unsigned op)
{
    return op == GM_OP_ALLOC || op == GM_OP_SEGMENT_ALLOC || op == GM_OP_SEGMENT_MAP ||
           op == GM_OP_OOM;
}

/* Name the first bad event of ev[0..n) (index first+i); see gm_trace_check_events. */
static int explain_bad(const char *p, unsigned op_count, uint64_t n_sites, const gm_event *ev,
                       size_t n, uint64_t first, uint64_t prev, gm_err *err)
{
    for (size_t i = 0; i < n; i++) {
        const gm_event *e = &ev[i];
        ull idx = first + i;
        if (e->op >= op_count)
            return gm_errf(
                err, GM_EINVAL,
                "%s: event %llu: op is %u, which is not an operation (0 alloc, 1 free, "
                "2 segment_alloc, 3 segment_free%s); " REIMPORT,
                p, idx, e->op,
                op_count > GM_OP_COUNT_V1
                    ? ", 4 segment_map, 5 segment_unmap, 6 empty_cache, 7 oom, 8 free_requested"
                    : "; a version 1 trace has no other");
        if (e->t_ns < prev)
            return gm_errf(err, GM_EINVAL,
                           "%s: event %llu: time goes backwards (t_ns %llu after %llu); events "
                           "must be sorted by t_ns — re-import the trace or sort /events",
                           p, idx, (ull)e->t_ns, (ull)prev);
        if (e->size == 0 && op_allocates(e->op))
            return gm_errf(err, GM_EINVAL,
                           "%s: event %llu: %s of size 0 (addr 0x%llx); an allocation must "
                           "request at least 1 byte — " REIMPORT,
                           p, idx, gm_op_name(e->op), (ull)e->addr);
        if (e->size > GM_TRACE_MAX_SIZE)
            return gm_errf(err, GM_EINVAL,
                           "%s: event %llu: size %llu is over the 2^48-byte (256 TiB) limit, so "
                           "the value is damaged — " REIMPORT,
                           p, idx, (ull)e->size);
        if (e->category >= GM_CAT_COUNT)
            return gm_errf(err, GM_EINVAL,
                           "%s: event %llu: category is %u, not one of 0..%d (unknown, "
                           "parameter, ..., autograd_detail); " REIMPORT,
                           p, idx, e->category, GM_CAT_COUNT - 1);
        if (e->phase >= GM_PHASE_COUNT)
            return gm_errf(err, GM_EINVAL,
                           "%s: event %llu: phase is %u, not one of 0..%d (unknown, forward, "
                           "backward, optimizer); " REIMPORT,
                           p, idx, e->phase, GM_PHASE_COUNT - 1);
        if (e->site > n_sites)
            return gm_errf(err, GM_EINVAL,
                           "%s: event %llu: site is %u but /sites has %llu rows (site k names "
                           "row k-1, 0 = unknown); " REIMPORT,
                           p, idx, e->site, (ull)n_sites);
        prev = e->t_ns;
    }
    return gm_errf(err, GM_EINVAL, "%s: events %llu..%llu: invalid (internal error)", p, (ull)first,
                   (ull)(first + n - 1));
}

/* Check ev[0..n), whose first index is `first`, in one branch-free pass;
 * only if it finds something does a second pass name the first bad event.
 * *prev_t_ns carries time order. */
int gm_trace_check_events(const char *p, int version, uint64_t n_sites, const gm_event *ev,
                          size_t n, uint64_t first, uint64_t *prev_t_ns, gm_err *err)
{
    unsigned op_count = version == 1 ? GM_OP_COUNT_V1 : GM_OP_COUNT;
    uint64_t prev = *prev_t_ns;
    unsigned bad = 0;
    for (size_t i = 0; i < n; i++) {
        const gm_event *e = &ev[i];
        bad |= (e->op >= op_count) | (e->category >= GM_CAT_COUNT) | (e->phase >= GM_PHASE_COUNT) |
               (e->t_ns < prev) | (e->size > GM_TRACE_MAX_SIZE) |
               ((e->size == 0) & op_allocates(e->op)) | (e->site > n_sites);
        prev = e->t_ns;
    }
    if (bad) return explain_bad(p, op_count, n_sites, ev, n, first, *prev_t_ns, err);
    *prev_t_ns = prev;
    return GM_OK;
}

/* Read rows first..first+n-1 of /events into buf (fast path: via r->raw). */
static herr_t read_rows(gm_h5r *r, uint64_t first, gm_event *buf, size_t n)
{
    hsize_t start = first, count = n, zero = 0;
    int fast = r->raw != NULL;
    r->range_error = 0;
    if (!fast) memset(buf, 0, n * sizeof *buf); /* HDF5 leaves the padding as it finds it */
    if (H5Sselect_hyperslab(r->fspace, H5S_SELECT_SET, &start, NULL, &count, NULL) < 0 ||
        H5Sselect_hyperslab(r->mspace, H5S_SELECT_SET, &zero, NULL, &count, NULL) < 0 ||
        H5Dread(r->events, fast ? r->raw_type : r->ev_type, r->mspace, r->fspace, r->dxpl,
                fast ? (void *)r->raw : (void *)buf) < 0)
        return -1;
    if (fast) unpack_events(r->raw, r->raw_row, r->raw_id, r->raw_site, buf, n);
    return 0;
}

static int read_piece(gm_h5r *r, uint64_t first, gm_event *buf, size_t n, gm_err *err)
{
    if (read_rows(r, first, buf, n) == 0) return GM_OK;
    if (!r->range_error) return read_failed(r, "events", first, first + n - 1, err);
    /* a value out of range somewhere in the piece: bisect to name its row */
    uint64_t lo = first, hi = first + n; /* [lo, hi) holds the first bad row */
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (read_rows(r, lo, buf, (size_t)(mid - lo)) < 0 && r->range_error)
            hi = mid;
        else
            lo = mid;
    }
    return gm_errf(err, GM_EINVAL,
                   "%s: event %llu: a value does not fit its column (negative, or too large for "
                   "a uint8/uint64 column); " REIMPORT,
                   r->path, (ull)lo);
}

int gm_h5r_read_at(gm_h5r *r, uint64_t first, gm_event *buf, size_t n, uint64_t *prev_t_ns,
                   int check, gm_err *err)
{
    if (!r || (!buf && n) || first > r->nevents || n > r->nevents - first)
        return gm_errf(err, GM_EINVAL, "gm_trace_read: no reader, no buffer, or past the end");
    gm_h5_quiet();
    uint64_t prev = *prev_t_ns;
    for (size_t done = 0; done < n;) {
        size_t k = n - done < GM_TRACE_CHUNK_EVENTS ? n - done : GM_TRACE_CHUNK_EVENTS;
        int rc = read_piece(r, first + done, buf + done, k, err);
        if (!rc && check)
            rc = gm_trace_check_events(r->path, r->meta.version, r->meta.n_sites, buf + done, k,
                                       first + done, &prev, err);
        if (rc) return rc;
        if (!check && k) prev = buf[done + k - 1].t_ns;
        done += k;
    }
    *prev_t_ns = prev;
    return GM_OK;
}

/* Read a whole small table into a malloc'd array; absent -> 0 rows. */
static int read_table(gm_h5r *r, const struct table *t, void **rows, size_t *n, gm_err *err)
{
    *rows = NULL;
    *n = 0;
    gm_h5_quiet();
    hid_t ds;
    hsize_t nrows = 0;
    int rc = open_table(r, t, &ds, &nrows, err);
    if (rc || ds < 0) return rc;
    void *buf = NULL;
    if (nrows > 0 && !(buf = calloc((size_t)nrows, t->mem_size)))
        rc = gm_errf(err, GM_ENOMEM, "%s: out of memory loading /%s (%llu rows)", r->path, t->name,
                     (ull)nrows);
    hid_t ft = !rc && nrows > 0 ? H5Dget_type(ds) : H5I_INVALID_HID;
    hid_t mt = !rc && nrows > 0 ? table_type_from(t, 0, ft) : H5I_INVALID_HID;
    h5_close(&ft, H5Tclose);
    r->range_error = 0;
    if (!rc && nrows > 0 && (mt < 0 || H5Dread(ds, mt, H5S_ALL, H5S_ALL, r->dxpl, buf) < 0)) {
        char what[64];
        snprintf(what, sizeof what, "/%s rows", t->name);
        rc = read_failed(r, what, 0, nrows - 1, err);
    }
    h5_close(&mt, H5Tclose);
    H5Dclose(ds);
    if (rc) {
        free(buf);
        return rc;
    }
    *rows = buf;
    *n = (size_t)nrows;
    return GM_OK;
}

int gm_trace_check_initial(const char *path, int version, uint64_t n_sites, const gm_init_row *ir,
                           size_t n, gm_err *err)
{
    unsigned kinds = version == 1 ? GM_INIT_MAPPED : GM_INIT_KIND_COUNT;
    for (size_t i = 0; i < n; i++) {
        const char *what = ir[i].kind >= kinds                    ? (kinds == GM_INIT_MAPPED
                                                                         ? "kind is not 0 (segment) or 1 (block)"
                                                                         : "kind is not 0 (segment), 1 (block) or 2 "
                                                                           "(mapped range)")
                           : ir[i].category >= GM_CAT_COUNT       ? "category is out of range"
                           : ir[i].size > GM_TRACE_MAX_SIZE       ? "size is over 2^48 bytes"
                           : ir[i].block_size > GM_TRACE_MAX_SIZE ? "block_size is over 2^48 bytes"
                           : ir[i].pool > GM_POOL_SMALL           ? "pool is not 0, 1 or 2"
                           : ir[i].expandable > 1                 ? "expandable is not 0 or 1"
                           : ir[i].site > n_sites ? "site is beyond the rows of /sites"
                           : ir[i].size == 0 && ir[i].kind != GM_INIT_BLOCK
                               ? "a segment or mapped range of size 0 (a driver allocation has "
                                 "at least one byte)"
                               : NULL;
        if (what)
            return gm_errf(err, GM_EINVAL, "%s: /initial_state row %zu: %s; " REIMPORT, path, i,
                           what);
    }
    return GM_OK;
}

int gm_h5r_read_initial(gm_h5r *r, gm_init_row **rows, size_t *n, gm_err *err)
{
    void *buf;
    int rc = read_table(r, &initial_table, &buf, n, err);
    if (!rc) rc = gm_trace_check_initial(r->path, r->meta.version, r->meta.n_sites, buf, *n, err);
    if (rc) {
        free(buf);
        *n = 0;
        *rows = NULL;
        return rc;
    }
    *rows = buf;
    return GM_OK;
}

int gm_trace_check_markers(const char *path, gm_marker *m, size_t n, gm_err *err)
{
    for (size_t i = 0; i < n; i++) {
        m[i].name[GM_MARKER_NAME_LEN - 1] = 0;
        unsigned kind = m[i].kind;
        if (kind > GM_MARK_INSTANT)
            return gm_errf(err, GM_EINVAL,
                           "%s: /markers row %zu: kind %u is not 0..3 (iteration, range_push, "
                           "range_pop, instant); " REIMPORT,
                           path, i, kind);
    }
    return GM_OK;
}

int gm_h5r_read_markers(gm_h5r *r, gm_marker **rows, size_t *n, gm_err *err)
{
    void *buf;
    int rc = read_table(r, &markers_table, &buf, n, err);
    if (!rc) rc = gm_trace_check_markers(r->path, buf, *n, err);
    if (rc) {
        free(buf);
        *n = 0;
        *rows = NULL;
        return rc;
    }
    *rows = buf;
    return GM_OK;
}

/* A fixed-length string type of len bytes (the sites' columns). */
static hid_t str_type(size_t len, H5T_str_t pad, H5T_cset_t cset)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t >= 0 &&
        (H5Tset_size(t, len) < 0 || H5Tset_strpad(t, pad) < 0 || H5Tset_cset(t, cset) < 0))
        h5_close(&t, H5Tclose);
    return t;
}

/* The compound of the two strings, name then stack. */
static hid_t sites_type(size_t wn, size_t ws, H5T_str_t pad, H5T_cset_t cn, H5T_cset_t cs)
{
    hid_t ct = H5Tcreate(H5T_COMPOUND, wn + ws);
    hid_t a = str_type(wn, pad, cn), b = str_type(ws, pad, cs);
    if (ct >= 0 &&
        (a < 0 || b < 0 || H5Tinsert(ct, "name", 0, a) < 0 || H5Tinsert(ct, "stack", wn, b) < 0))
        h5_close(&ct, H5Tclose);
    h5_close(&a, H5Tclose);
    h5_close(&b, H5Tclose);
    return ct;
}

static H5T_cset_t member_cset(hid_t ft, const char *name)
{
    int idx = H5Tget_member_index(ft, name);
    hid_t mt = idx >= 0 ? H5Tget_member_type(ft, (unsigned)idx) : H5I_INVALID_HID;
    H5T_cset_t cs = mt >= 0 ? H5Tget_cset(mt) : H5T_CSET_ASCII;
    h5_close(&mt, H5Tclose);
    return cs == H5T_CSET_ERROR ? H5T_CSET_ASCII : cs;
}

/* Append at most max-1 bytes of the string s (which has room for len
 * bytes, maybe without a NUL) and its NUL to blob. */
static size_t put_text(char *blob, const char *s, size_t len, size_t max)
{
    size_t n = strnlen(s, len < max - 1 ? len : max - 1);
    memcpy(blob, s, n);
    blob[n] = 0;
    return n + 1;
}

int gm_h5r_read_sites(gm_h5r *r, char **blob, size_t *len, size_t *n, gm_err *err)
{
    *blob = NULL, *len = 0, *n = 0;
    gm_h5_quiet();
    hid_t ds;
    hsize_t rows = 0;
    size_t wn = 0, ws = 0;
    int rc = open_sites(r, &ds, &rows, &wn, &ws, err);
    if (rc || ds < 0) return rc;
    if (rows != r->meta.n_sites) {
        H5Dclose(ds);
        return gm_errf(err, GM_EIO, "%s: /sites changed while it was read; re-create it", r->path);
    }
    /* read with a NUL after each string (wider by one), then pack */
    size_t row = wn + 1 + ws + 1;
    char *buf = rows ? calloc((size_t)rows, row) : NULL;
    char *out = rows ? malloc((size_t)rows * (row < GM_SITE_NAME_MAX + GM_SITE_STACK_MAX
                                                  ? row
                                                  : GM_SITE_NAME_MAX + GM_SITE_STACK_MAX))
                     : NULL;
    hid_t ft = H5Dget_type(ds);
    hid_t mt = ft >= 0 ? sites_type(wn + 1, ws + 1, H5T_STR_NULLTERM, member_cset(ft, "name"),
                                    member_cset(ft, "stack"))
                       : H5I_INVALID_HID;
    h5_close(&ft, H5Tclose);
    r->range_error = 0;
    if (rows && (!buf || !out))
        rc = gm_errf(err, GM_ENOMEM, "%s: out of memory loading /sites (%llu rows)", r->path,
                     (ull)rows);
    else if (rows && (mt < 0 || H5Dread(ds, mt, H5S_ALL, H5S_ALL, r->dxpl, buf) < 0))
        rc = read_failed(r, "/sites rows", 0, rows - 1, err);
    h5_close(&mt, H5Tclose);
    H5Dclose(ds);
    size_t used = 0;
    for (size_t i = 0; !rc && i < (size_t)rows; i++) {
        const char *p = buf + i * row;
        used += put_text(out + used, p, wn + 1, GM_SITE_NAME_MAX);
        used += put_text(out + used, p + wn + 1, ws + 1, GM_SITE_STACK_MAX);
    }
    free(buf);
    if (rc) {
        free(out);
        return rc;
    }
    *blob = out, *len = used, *n = (size_t)rows;
    return GM_OK;
}

/* ---------------- writer ---------------- */

struct gm_trace_writer {
    char *path;       /* final name, as given                   */
    char *tmp;        /* the file HDF5 writes (see create_file)  */
    gm_out_plan plan; /* where path leads (base/outfile.h)       */
    int created;      /* tmp exists on disk                       */
    int failed;       /* a write failed: never publish the file    */
    hid_t file;
    hid_t events, initial, markers;     /* datasets                 */
    int wrote_sites;                    /* /sites exists            */
    hid_t raw_type, init_type, mk_type; /* memory types: packed events, structs */
    unsigned char *raw;                 /* events not yet written, packed */
    size_t nbuf, chunk;
    gm_ids ids;               /* the allocations' live slots (column id) */
    int numbered;             /* an event was numbered: /initial_state's blocks no longer seed */
    int late_blocks;          /* blocks written after that: the ids are not seeded (scheme /1) */
    gm_trace_write_opts opts; /* for /events, created at the first flush */
    uint64_t nevents, ninitial, nmarkers; /* rows written           */
    uint64_t dropped;
};

static int resolve_opts(const char *path, const gm_trace_write_opts *in, gm_trace_write_opts *o,
                        gm_err *err)
{
    *o = (gm_trace_write_opts){GM_COMPRESS_NONE, 4, GM_TRACE_CHUNK_EVENTS, NULL, NULL};
    if (in) {
        o->compress = in->compress;
        o->on_temp = in->on_temp;
        o->on_temp_ctx = in->on_temp_ctx;
        if (in->deflate_level) o->deflate_level = in->deflate_level;
        if (in->chunk_events) o->chunk_events = in->chunk_events;
    }
    if (o->compress != GM_COMPRESS_NONE && o->compress != GM_COMPRESS_DEFLATE)
        return gm_errf(err, GM_EINVAL, "%s: unknown compression %d", path, (int)o->compress);
    if (o->deflate_level < 1 || o->deflate_level > 9)
        return gm_errf(err, GM_EINVAL, "%s: deflate level %d is not in 1..9", path,
                       o->deflate_level);
    if (o->chunk_events > GM_TRACE_MAX_CHUNK_ROWS) /* what the reader accepts */
        return gm_errf(err, GM_EINVAL, "%s: chunk of %zu events is too large (at most 1 Mi)", path,
                       o->chunk_events);
    if (o->compress == GM_COMPRESS_DEFLATE &&
        (H5Zfilter_avail(H5Z_FILTER_DEFLATE) <= 0 || H5Zfilter_avail(H5Z_FILTER_SHUFFLE) <= 0))
        return gm_errf(err, GM_EINVAL,
                       "%s: this HDF5 library has no deflate filter; write uncompressed", path);
    return GM_OK;
}

static int write_attr(hid_t file, const char *name, hid_t ftype, hid_t mtype, const void *v)
{
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = sp >= 0 ? H5Acreate2(file, name, ftype, sp, H5P_DEFAULT, H5P_DEFAULT) : -1;
    herr_t st = a >= 0 ? H5Awrite(a, mtype, v) : -1;
    h5_close(&a, H5Aclose);
    h5_close(&sp, H5Sclose);
    return st < 0 ? -1 : 0;
}

/* Strings are variable-length UTF-8: h5py hands them back as str. */
static int write_str_attr(hid_t file, const char *name, const char *value)
{
    const char *v = value ? value : "";
    hid_t t = H5Tcopy(H5T_C_S1);
    int rc = -1;
    if (t >= 0 && H5Tset_size(t, H5T_VARIABLE) >= 0 && H5Tset_cset(t, H5T_CSET_UTF8) >= 0)
        rc = write_attr(file, name, t, t, &v);
    h5_close(&t, H5Tclose);
    return rc;
}

static int write_meta(gm_trace_writer *w, const gm_trace_meta *m, gm_err *err)
{
    int version = GM_TRACE_VERSION; /* the writer writes the version it implements */
    int rc = write_attr(w->file, "gmtrace_version", H5T_STD_I32LE, H5T_NATIVE_INT, &version);
    for (size_t i = 0; !rc && i < sizeof str_attrs / sizeof str_attrs[0]; i++)
        rc = write_str_attr(w->file, str_attrs[i].name,
                            m ? *meta_str((gm_trace_meta *)m, &str_attrs[i]) : "");
    gm_trace_meta none;
    memset(&none, 0, sizeof none);
    w->dropped = m ? m->dropped_records : 0;
    for (size_t i = 0; !rc && i < sizeof u64_attrs / sizeof u64_attrs[0]; i++)
        rc = write_attr(w->file, u64_attrs[i].name, H5T_STD_U64LE, H5T_NATIVE_UINT64,
                        meta_u64(m ? (gm_trace_meta *)m : &none, &u64_attrs[i]));
    return rc ? gm_errf(err, GM_EIO, "%s: cannot write the root attributes", w->tmp) : GM_OK;
}

static hid_t create_table(hid_t file, const struct table *t, hsize_t chunk,
                          const gm_trace_write_opts *o)
{
    hsize_t dims = 0, maxdims = H5S_UNLIMITED;
    hid_t sp = H5Screate_simple(1, &dims, &maxdims);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    hid_t ft = table_type(t, 1);
    hid_t ds = H5I_INVALID_HID;
    int ok = sp >= 0 && dcpl >= 0 && ft >= 0 && H5Pset_chunk(dcpl, 1, &chunk) >= 0;
    if (ok && o->compress == GM_COMPRESS_DEFLATE)
        ok = H5Pset_shuffle(dcpl) >= 0 && H5Pset_deflate(dcpl, (unsigned)o->deflate_level) >= 0;
    if (ok) ds = H5Dcreate2(file, t->name, ft, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    h5_close(&ft, H5Tclose);
    h5_close(&dcpl, H5Pclose);
    h5_close(&sp, H5Sclose);
    return ds;
}

/*
 * /events is created at the first flush, not with the file: a trace that
 * ends before one chunk filled (n < chunk_events events in all) gets
 * chunks of max(n, 1) rows instead of one mostly empty 64 Ki-row chunk, so
 * a short trace is a few KiB, not 2.3 MB. Still chunked and extendible;
 * the reader reads pieces of its own size whatever the file's chunks are.
 */
static int create_events(gm_trace_writer *w, size_t chunk, gm_err *err)
{
    w->events = create_table(w->file, &events_table, chunk ? chunk : 1, &w->opts);
    if (w->events >= 0) return GM_OK;
    w->failed = 1;
    return gm_errf(err, GM_EIO, "%s: cannot create /events (HDF5 error)", w->tmp);
}

static int create_tables(gm_trace_writer *w, gm_err *err)
{
    w->initial = create_table(w->file, &initial_table, initial_table.chunk, &w->opts);
    w->markers = create_table(w->file, &markers_table, markers_table.chunk, &w->opts);
    w->raw_type = table_type(&events_table, 1);
    w->init_type = table_type(&initial_table, 0);
    w->mk_type = table_type(&markers_table, 0);
    if (w->initial < 0 || w->markers < 0 || w->raw_type < 0 || w->init_type < 0 || w->mk_type < 0)
        return gm_errf(err, GM_EIO, "%s: cannot create the datasets (HDF5 error)", w->tmp);
    return GM_OK;
}

/* Append rows (memory type mt) to the 1-D dataset ds holding *count rows. */
static int append_rows(hid_t ds, hid_t mt, const void *rows, size_t n, uint64_t *count)
{
    hsize_t start = *count, cnt = n, size = *count + n;
    if (n == 0) return 0;
    hid_t ms = H5Screate_simple(1, &cnt, NULL);
    hid_t fs = H5I_INVALID_HID;
    int ok = ms >= 0 && H5Dset_extent(ds, &size) >= 0 && (fs = H5Dget_space(ds)) >= 0 &&
             H5Sselect_hyperslab(fs, H5S_SELECT_SET, &start, NULL, &cnt, NULL) >= 0 &&
             H5Dwrite(ds, mt, ms, fs, H5P_DEFAULT, rows) >= 0;
    h5_close(&fs, H5Sclose);
    h5_close(&ms, H5Sclose);
    if (!ok) return -1;
    *count = size;
    return 0;
}

/* Close everything; -1 if closing the file (which flushes it) failed. */
static int writer_close_h5(gm_trace_writer *w)
{
    h5_close(&w->raw_type, H5Tclose);
    h5_close(&w->init_type, H5Tclose);
    h5_close(&w->mk_type, H5Tclose);
    h5_close(&w->events, H5Dclose);
    h5_close(&w->initial, H5Dclose);
    h5_close(&w->markers, H5Dclose);
    herr_t st = w->file >= 0 ? H5Fclose(w->file) : 0;
    w->file = H5I_INVALID_HID;
    return st < 0 ? -1 : 0;
}

static void writer_free(gm_trace_writer *w)
{
    gm_ids_free(&w->ids);
    free(w->raw);
    free(w->tmp);
    free(w->path);
    gm_out_plan_free(&w->plan);
    free(w);
}

/*
 * The file HDF5 writes. A regular file (or a new name) is written as
 * TARGET.tmp.<pid> beside it and renamed over it by gm_trace_finish, symlinks
 * followed (base/outfile.h). Anything else ("-", /dev/stdout, a FIFO, a
 * device) cannot take HDF5's seeks, so the trace is built in a private
 * temporary file and copied there, unchanged, when complete. open(2) first,
 * so a failure has its errno.
 */
static int create_file(gm_trace_writer *w, gm_err *err)
{
    int rc = gm_out_plan_make(w->path, &w->plan, err);
    if (rc) return rc;
    int fd;
    if (w->plan.tmp) {
        w->tmp = strdup(w->plan.tmp);
        /* told before it exists: a signal between creating and telling
         * would leave it behind */
        if (w->tmp && w->opts.on_temp) w->opts.on_temp(w->opts.on_temp_ctx, w->tmp);
        fd = w->tmp ? open(w->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666) : -1;
    } else {
        const char *dir = getenv("TMPDIR");
        size_t len = (dir && *dir ? strlen(dir) : 4) + 32;
        w->tmp = malloc(len);
        if (w->tmp) snprintf(w->tmp, len, "%s/gmsim-trace.XXXXXX", dir && *dir ? dir : "/tmp");
        fd = w->tmp ? mkstemp(w->tmp) : -1;
    }
    if (!w->tmp) return gm_errf(err, GM_ENOMEM, "%s: out of memory", w->path);
    if (fd < 0)
        return gm_errf(err, GM_EIO, "%s: cannot create %s: %s", w->path, w->tmp, strerror(errno));
    close(fd);
    w->created = 1;
    if (!w->plan.tmp && w->opts.on_temp) w->opts.on_temp(w->opts.on_temp_ctx, w->tmp);
    hid_t fapl = make_fapl();
    w->file = H5Fcreate(w->tmp, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    free_fapl(fapl);
    if (w->file < 0) return gm_errf(err, GM_EIO, "%s: cannot create HDF5 file %s", w->path, w->tmp);
    return GM_OK;
}

int gm_trace_create(const char *path, const gm_trace_meta *meta, const gm_trace_write_opts *opts,
                    gm_trace_writer **out, gm_err *err)
{
    if (!out || !path || !*path) return gm_errf(err, GM_EINVAL, "gm_trace_create: no path");
    *out = NULL;
    gm_trace_write_opts o;
    int rc = resolve_opts(path, opts, &o, err);
    if (rc) return rc;
    gm_h5_quiet();
    gm_trace_writer *w = calloc(1, sizeof *w);
    if (!w) return gm_errf(err, GM_ENOMEM, "%s: out of memory", path);
    w->file = w->events = w->initial = w->markers = H5I_INVALID_HID;
    w->raw_type = w->init_type = w->mk_type = H5I_INVALID_HID;
    w->chunk = o.chunk_events;
    w->opts = o;
    w->plan.fd = -1;
    w->path = strdup(path);
    w->raw = malloc(w->chunk * EV_PACKED);
    if (!w->path || !w->raw || gm_ids_init(&w->ids))
        rc = gm_errf(err, GM_ENOMEM, "%s: out of memory", path);
    if (!rc) rc = create_file(w, err);
    if (!rc) rc = write_meta(w, meta, err);
    if (!rc) rc = create_tables(w, err);
    if (rc) {
        gm_trace_abort(w);
        return rc;
    }
    *out = w;
    return GM_OK;
}

/* Write the w->nbuf packed events of w->raw (creating /events first). */
static int flush_events(gm_trace_writer *w, gm_err *err)
{
    uint64_t first = w->nevents;
    size_t n = w->nbuf;
    if (w->events < 0) {
        int rc = create_events(w, n < w->chunk ? n : w->chunk, err);
        if (rc) return rc;
    }
    w->nbuf = 0;
    if (append_rows(w->events, w->raw_type, w->raw, n, &w->nevents) == 0) return GM_OK;
    w->failed = 1;
    return gm_errf(err, GM_EIO, "%s: cannot write events %llu..%llu (disk full?)", w->tmp,
                   (ull)first, (ull)(first + n - 1));
}

static int check_writable(gm_trace_writer *w, const void *rows, size_t n, gm_err *err)
{
    if (!w || (!rows && n)) return gm_errf(err, GM_EINVAL, "gm_trace_append: no writer or no rows");
    if (w->failed)
        return gm_errf(err, GM_EIO, "%s: an earlier write failed; the trace will not be written",
                       w->path);
    gm_h5_quiet();
    return GM_OK;
}

int gm_trace_append(gm_trace_writer *w, const gm_event *ev, size_t n, gm_err *err)
{
    int rc = check_writable(w, ev, n, err);
    while (!rc && n > 0) {
        size_t k = w->chunk - w->nbuf < n ? w->chunk - w->nbuf : n;
        w->numbered = 1;
        if (pack_events(&w->ids, ev, w->raw + w->nbuf * EV_PACKED, k)) {
            rc = gm_errf(err, GM_ENOMEM, "%s: out of memory numbering allocations", w->path);
            break;
        }
        w->nbuf += k;
        ev += k;
        n -= k;
        if (w->nbuf == w->chunk) rc = flush_events(w, err);
    }
    return rc;
}

int gm_trace_write_initial(gm_trace_writer *w, const gm_init_row *rows, size_t n, gm_err *err)
{
    int rc = check_writable(w, rows, n, err);
    /* before the first event, the blocks take their slots first (event_ids.h, seeded) */
    for (size_t i = 0; !rc && w->numbered && i < n; i++)
        w->late_blocks |= rows[i].kind == GM_INIT_BLOCK;
    if (!rc && !w->numbered && gm_ids_seed(&w->ids, rows, n))
        rc = gm_errf(err, GM_ENOMEM, "%s: out of memory numbering allocations", w->path);
    if (!rc && append_rows(w->initial, w->init_type, rows, n, &w->ninitial) < 0) {
        w->failed = 1;
        rc = gm_errf(err, GM_EIO, "%s: cannot write /initial_state (disk full?)", w->tmp);
    }
    return rc;
}

int gm_trace_add_markers(gm_trace_writer *w, const gm_marker *m, size_t n, gm_err *err)
{
    int rc = check_writable(w, m, n, err);
    if (!rc && append_rows(w->markers, w->mk_type, m, n, &w->nmarkers) < 0) {
        w->failed = 1;
        rc = gm_errf(err, GM_EIO, "%s: cannot write /markers (disk full?)", w->tmp);
    }
    return rc;
}

/* Bytes of s to keep within max (with its NUL): cut at a line (stacks)
 * or, failing that, before a UTF-8 continuation byte. */
static size_t cut_len(const char *s, size_t max, int at_line)
{
    size_t n = strlen(s);
    if (n < max) return n;
    n = max - 1;
    if (at_line) {
        size_t k = n;
        while (k > 0 && s[k] != '\n')
            k--;
        if (k > 0) return k;
    }
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
        n--;
    return n;
}

int gm_trace_write_sites(gm_trace_writer *w, const gm_site *rows, size_t n, gm_err *err)
{
    int rc = check_writable(w, rows, n, err);
    if (rc || n == 0) return rc;
    if (w->wrote_sites) return gm_errf(err, GM_EINVAL, "%s: /sites is written once", w->path);
    if (n > GM_TRACE_MAX_TABLE_ROWS)
        return gm_errf(err, GM_EINVAL, "%s: %zu call sites is more than a trace holds", w->path, n);
    size_t wn = 1, ws = 1;
    for (size_t i = 0; i < n; i++) {
        size_t a = cut_len(rows[i].name ? rows[i].name : "", GM_SITE_NAME_MAX, 0);
        size_t b = cut_len(rows[i].stack ? rows[i].stack : "", GM_SITE_STACK_MAX, 1);
        if (a > wn) wn = a;
        if (b > ws) ws = b;
    }
    if (n * (wn + ws) > GM_TRACE_MAX_SITES_BYTES) /* what the reader accepts */
        return gm_errf(err, GM_EINVAL, "%s: the call sites' texts are over %u MiB", w->path,
                       GM_TRACE_MAX_SITES_BYTES >> 20);
    char *buf = calloc(n, wn + ws);
    hid_t t = sites_type(wn, ws, H5T_STR_NULLPAD, H5T_CSET_UTF8, H5T_CSET_UTF8);
    hsize_t dims = n;
    hid_t sp = H5Screate_simple(1, &dims, NULL);
    hid_t ds = t >= 0 && sp >= 0
                   ? H5Dcreate2(w->file, "sites", t, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)
                   : H5I_INVALID_HID;
    for (size_t i = 0; buf && i < n; i++) {
        const char *a = rows[i].name ? rows[i].name : "", *b = rows[i].stack ? rows[i].stack : "";
        memcpy(buf + i * (wn + ws), a, cut_len(a, GM_SITE_NAME_MAX, 0));
        memcpy(buf + i * (wn + ws) + wn, b, cut_len(b, GM_SITE_STACK_MAX, 1));
    }
    if (!buf)
        rc = gm_errf(err, GM_ENOMEM, "%s: out of memory writing /sites", w->path);
    else if (ds < 0 || H5Dwrite(ds, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0)
        rc = gm_errf(err, GM_EIO, "%s: cannot write /sites (disk full?)", w->tmp), w->failed = 1;
    h5_close(&ds, H5Dclose);
    h5_close(&sp, H5Sclose);
    h5_close(&t, H5Tclose);
    free(buf);
    if (!rc) w->wrote_sites = 1;
    return rc;
}

const char *gm_trace_writer_file(const gm_trace_writer *w)
{
    return w ? w->tmp : NULL;
}

void gm_trace_set_dropped(gm_trace_writer *w, uint64_t dropped)
{
    if (w) w->dropped = dropped;
}

static int update_dropped(gm_trace_writer *w, gm_err *err)
{
    hid_t a = H5Aopen(w->file, "dropped_records", H5P_DEFAULT);
    herr_t st = a >= 0 ? H5Awrite(a, H5T_NATIVE_UINT64, &w->dropped) : -1;
    h5_close(&a, H5Aclose);
    return st < 0 ? gm_errf(err, GM_EIO, "%s: cannot write dropped_records", w->tmp) : GM_OK;
}

int gm_trace_finish(gm_trace_writer *w, gm_err *err)
{
    if (!w) return gm_errf(err, GM_EINVAL, "gm_trace_finish: no writer");
    gm_h5_quiet();
    int rc = w->failed ? gm_errf(err, GM_EIO, "%s: not written: an earlier write failed", w->path)
                       : GM_OK;
    if (!rc && (w->nbuf || w->events < 0)) rc = flush_events(w, err); /* creates /events */
    /* the ids' scheme, now that whether /initial_state seeded them is known */
    if (!rc && write_str_attr(w->events, "id_scheme",
                              w->late_blocks ? ID_SCHEME : ID_SCHEME_SEEDED) != 0) {
        w->failed = 1;
        rc = gm_errf(err, GM_EIO, "%s: cannot write /events' id_scheme (HDF5 error)", w->tmp);
    }
    if (!rc) rc = update_dropped(w, err);
    /* H5Fclose flushes; only its result says whether the data reached the file */
    if (!rc && writer_close_h5(w) < 0)
        rc = gm_errf(err, GM_EIO, "%s: cannot close (disk full?)", w->tmp);
    if (!rc && w->plan.tmp)
        rc = gm_out_plan_publish(&w->plan, w->path, err);
    else if (!rc)
        rc = gm_out_copy_file(w->tmp, w->path, err), unlink(w->tmp);
    if (rc) {
        gm_trace_abort(w);
        return rc;
    }
    writer_free(w);
    return GM_OK;
}

void gm_trace_abort(gm_trace_writer *w)
{
    if (!w) return;
    gm_h5_quiet();
    writer_close_h5(w);
    if (w->created) unlink(w->tmp);
    writer_free(w);
}
