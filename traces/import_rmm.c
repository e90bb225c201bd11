/* import_rmm.c - RMM logging_resource_adaptor CSV -> gmsim trace; see import_rmm.h. */
#include "import_rmm.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/addrmap.h"
#include "base/clock.h"

#define US_PER_DAY (86400ull * 1000000ull)

enum { COL_TIME, COL_ACTION, COL_POINTER, COL_SIZE, COL_STREAM, NCOLS };
static const char *const col_names[NCOLS] = {"Time", "Action", "Pointer", "Size", "Stream"};

typedef struct rmm {
    const char *name;
    gm_import_trace *t;
    size_t ecap, icap, mcap;
    int col[NCOLS], ncols;
    gm_addrmap live; /* pointer -> requested size of live allocations */
    gm_addrmap seen; /* pointers allocated at some point in the log   */
    uint64_t t0_us, prev_us, day_us;
    int have_t0, time_of_day;
    size_t line;
} rmm;

static int grow(void *pp, size_t *cap, size_t need, size_t elem)
{
    void **p = pp;
    if (need <= *cap) return 0;
    size_t n = *cap ? *cap * 2 : 256;
    while (n < need)
        n *= 2;
    void *q = realloc(*p, n * elem);
    if (!q) return -1;
    *p = q;
    *cap = n;
    return 0;
}

static int line_err(const rmm *r, gm_err *err, const char *what, const char *field)
{
    return gm_errf(err, GM_EINVAL,
                   "%s: line %zu: %s '%s'; expected an RMM logging_resource_adaptor "
                   "row (Thread,Time,Action,Pointer,Size,Stream)",
                   r->name, r->line, what, field);
}

/* Split line in place at ','; returns the number of fields (at most cap). */
static int split(char *line, char **f, int cap)
{
    int n = 0;
    for (char *p = line; n < cap;) {
        f[n++] = p;
        p = strchr(p, ',');
        if (!p) break;
        *p++ = 0;
    }
    for (int i = 0; i < n; i++) { /* trim spaces */
        while (isspace((unsigned char)*f[i]))
            f[i]++;
        size_t len = strlen(f[i]);
        while (len && isspace((unsigned char)f[i][len - 1]))
            f[i][--len] = 0;
    }
    return n;
}

static int header(rmm *r, char *line, gm_err *err)
{
    char *f[32];
    int n = split(line, f, 32);
    for (int c = 0; c < NCOLS; c++) {
        r->col[c] = -1;
        for (int i = 0; i < n; i++)
            if (!strcmp(f[i], col_names[c])) r->col[c] = i;
        if (r->col[c] < 0)
            return gm_errf(err, GM_EINVAL,
                           "%s: line 1 is not an RMM log header: no column '%s' (expected "
                           "Thread,Time,Action,Pointer,Size,Stream, as rmm's "
                           "logging_resource_adaptor writes)",
                           r->name, col_names[c]);
        if (r->col[c] + 1 > r->ncols) r->ncols = r->col[c] + 1;
    }
    return GM_OK;
}

/* 0x-hex, decimal, or a null pointer spelling. */
static int parse_u64(const char *s, int hex_default, uint64_t *out)
{
    if (!strcmp(s, "(nil)") || !strcmp(s, "nullptr") || !strcmp(s, "NULL")) {
        *out = 0;
        return 0;
    }
    int base = 10;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
        base = 16;
    else if (hex_default && strspn(s, "0123456789abcdefABCDEF") == strlen(s))
        base = 16;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, base);
    if (!*s || *end || errno || s[0] == '-') return -1;
    *out = v;
    return 0;
}

/* "HH:MM:SS.ffffff" / "HH:MM:SS:ffffff" (time of day) or "1634567890.123456" (epoch s). */
static int parse_time(rmm *r, const char *s, uint64_t *us)
{
    unsigned h, m, sec;
    int consumed = 0;
    const char *frac = NULL;
    uint64_t whole;
    if (sscanf(s, "%u:%u:%u%n", &h, &m, &sec, &consumed) == 3 && h < 24 && m < 60 && sec < 61) {
        r->time_of_day = 1;
        whole = ((uint64_t)h * 3600 + m * 60 + sec) * 1000000;
        if (s[consumed] == '.' || s[consumed] == ':')
            frac = s + consumed + 1;
        else if (s[consumed])
            return -1;
    } else {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);
        if (end == s || errno || (*end && *end != '.') || v > UINT64_MAX / 1000000) return -1;
        whole = (uint64_t)v * 1000000;
        frac = *end ? end + 1 : NULL;
    }
    uint64_t f = 0, scale = 100000;
    for (const char *p = frac; p && *p; p++) {
        if (!isdigit((unsigned char)*p)) return -1;
        f += (uint64_t)(*p - '0') * scale;
        scale /= 10;
    }
    if (f > UINT64_MAX - whole) return -2; /* microseconds overflow 64 bits */
    *us = whole + f;
    return 0;
}

/* Event time in ns since the first row: time-of-day logs wrap at midnight;
 * small steps back (threads) are clamped. -1 if a step overflows 64 bits. */
static int event_ns(rmm *r, uint64_t us, uint64_t *t_ns)
{
    if (us > UINT64_MAX - r->day_us) return -1;
    us += r->day_us;
    if (!r->have_t0) {
        r->have_t0 = 1;
        r->t0_us = r->prev_us = us;
    }
    if (r->time_of_day && us < UINT64_MAX - US_PER_DAY && us + US_PER_DAY / 2 < r->prev_us) {
        r->day_us += US_PER_DAY;
        us += US_PER_DAY;
    }
    if (us < r->prev_us) {
        us = r->prev_us;
        r->t->time_repairs++;
    }
    if (us - r->t0_us > UINT64_MAX / 1000) return -1;
    r->prev_us = us;
    *t_ns = (us - r->t0_us) * 1000;
    return 0;
}

static int push_event(rmm *r, const gm_event *ev, gm_err *err)
{
    gm_import_trace *t = r->t;
    if (grow(&t->events, &r->ecap, t->n_events + 1, sizeof *t->events))
        return gm_errf(err, GM_ENOMEM, "out of host memory importing %s", r->name);
    t->events[t->n_events++] = *ev;
    return GM_OK;
}

/* A free of a pointer never allocated in the log: allocated before logging started. */
static int preexisting(rmm *r, uint64_t ptr, uint64_t size, uint64_t stream, gm_err *err)
{
    gm_import_trace *t = r->t;
    if (grow(&t->init, &r->icap, t->n_init + 1, sizeof *t->init))
        return gm_errf(err, GM_ENOMEM, "out of host memory importing %s", r->name);
    t->init[t->n_init++] =
        (gm_init_row){.addr = ptr, .size = size, .stream = stream, .kind = GM_INIT_BLOCK};
    t->init_blocks++;
    t->init_block_bytes += size;
    return gm_addrmap_put(&r->seen, gm_addrmap_key(ptr), 1)
               ? gm_errf(err, GM_ENOMEM, "out of host memory importing %s", r->name)
               : GM_OK;
}

static int do_alloc(rmm *r, gm_event *ev, gm_err *err)
{
    uint64_t key = gm_addrmap_key(ev->addr);
    if (gm_addrmap_get(&r->live, key)) {
        char p[32];
        snprintf(p, sizeof p, "0x%" PRIx64, ev->addr);
        return line_err(r, err,
                        "allocate returned a pointer that is still live (its free is "
                        "missing from the log):",
                        p);
    }
    if (!gm_addrmap_get(&r->seen, key) && gm_addrmap_put(&r->seen, key, 1))
        return gm_errf(err, GM_ENOMEM, "out of host memory importing %s", r->name);
    if (gm_addrmap_put(&r->live, key, ev->size))
        return gm_errf(err, GM_ENOMEM, "out of host memory importing %s", r->name);
    r->t->n_action[GM_TA_ALLOC]++;
    return push_event(r, ev, err);
}

static int do_free(rmm *r, gm_event *ev, gm_err *err)
{
    uint64_t key = gm_addrmap_key(ev->addr), size;
    if (!gm_addrmap_del(&r->live, key, &size)) {
        if (gm_addrmap_get(&r->seen, key)) {
            char p[32];
            snprintf(p, sizeof p, "0x%" PRIx64, ev->addr);
            return line_err(r, err, "free of a pointer that is not live (a double free):", p);
        }
        if (preexisting(r, ev->addr, ev->size, ev->stream, err)) return err->code;
    }
    r->t->n_action[GM_TA_FREE_COMPLETED]++;
    return push_event(r, ev, err);
}

static int failure(rmm *r, uint64_t t_ns, uint64_t size, gm_err *err)
{
    gm_import_trace *t = r->t;
    if (grow(&t->markers, &r->mcap, t->n_markers + 1, sizeof *t->markers))
        return gm_errf(err, GM_ENOMEM, "out of host memory importing %s", r->name);
    gm_marker *m = &t->markers[t->n_markers++];
    memset(m, 0, sizeof *m);
    m->t_ns = t_ns;
    m->kind = GM_MARK_INSTANT;
    snprintf(m->name, sizeof m->name, "allocate failure: %" PRIu64 " B", size);
    t->n_action[GM_TA_OOM]++;
    return GM_OK;
}

static int row(rmm *r, char *line, gm_err *err)
{
    char *f[32];
    if (!line[strspn(line, " \t")]) return GM_OK; /* blank line */
    int n = split(line, f, 32);
    if (n < r->ncols) return line_err(r, err, "too few columns in", f[0]);
    const char *act = f[r->col[COL_ACTION]];
    uint64_t us, ptr, size, stream, t_ns;
    int trc = parse_time(r, f[r->col[COL_TIME]], &us);
    if (trc == -2 || (trc == 0 && event_ns(r, us, &t_ns)))
        return gm_errf(err, GM_EINVAL,
                       "%s: line %zu: Time '%s' is out of range: in nanoseconds since the log's "
                       "first row it does not fit 64 bits (584 years); fix or drop the row",
                       r->name, r->line, f[r->col[COL_TIME]]);
    if (trc) return line_err(r, err, "bad Time", f[r->col[COL_TIME]]);
    if (parse_u64(f[r->col[COL_POINTER]], 1, &ptr))
        return line_err(r, err, "bad Pointer", f[r->col[COL_POINTER]]);
    if (parse_u64(f[r->col[COL_SIZE]], 0, &size) || size > GM_TRACE_MAX_SIZE)
        return line_err(r, err, "bad Size", f[r->col[COL_SIZE]]);
    if (parse_u64(f[r->col[COL_STREAM]], 1, &stream))
        return line_err(r, err, "bad Stream", f[r->col[COL_STREAM]]);
    r->t->n_entries++;
    gm_event ev = {.t_ns = t_ns, .addr = ptr, .size = size, .stream = stream};
    if (!strcmp(act, "allocate failure") || !strcmp(act, "allocate_failure"))
        return failure(r, ev.t_ns, size, err);
    int is_alloc = !strcmp(act, "allocate");
    if (!is_alloc && strcmp(act, "free") && strcmp(act, "deallocate"))
        return line_err(r, err, "unknown Action (expected allocate, free or allocate failure)",
                        act);
    if (size == 0 || ptr == 0) { /* a 0-byte allocation: nothing to replay */
        r->t->skipped++;
        return GM_OK;
    }
    ev.op = is_alloc ? GM_OP_ALLOC : GM_OP_FREE;
    return is_alloc ? do_alloc(r, &ev, err) : do_free(r, &ev, err);
}

static int finish_meta(rmm *r, const gm_rmm_opts *o, gm_err *err)
{
    gm_import_trace *t = r->t;
    char when[32], w[1024];
    const char *base = strrchr(r->name, '/') ? strrchr(r->name, '/') + 1 : r->name;
    gm_utc_now(when, sizeof when);
    t->live_at_end = r->live.count;
    snprintf(w, sizeof w,
             "RAPIDS RMM log %s: %" PRIu64 " rows (%" PRIu64 " allocate, %" PRIu64 " free, %" PRIu64
             " allocate failure, %" PRIu64 " zero-byte skipped); %" PRIu64
             " frees of pointers allocated before logging started are /initial_state blocks "
             "(RMM logs no segments); %" PRIu64 " allocations live at the end; categories "
             "unknown%s",
             base, t->n_entries, t->n_action[GM_TA_ALLOC], t->n_action[GM_TA_FREE_COMPLETED],
             t->n_action[GM_TA_OOM], t->skipped, t->init_blocks, t->live_at_end,
             t->time_repairs ? "; timestamps that went backwards were clamped" : "");
    gm_trace_meta_init(&t->meta);
    if (gm_trace_meta_set(&t->meta.source, "rmm-log") ||
        gm_trace_meta_set(&t->meta.created_utc, when) ||
        gm_trace_meta_set(&t->meta.command, o && o->command ? o->command : "") ||
        gm_trace_meta_set(&t->meta.workload, w))
        return gm_errf(err, GM_ENOMEM, "out of host memory importing %s", r->name);
    snprintf(t->summary, sizeof t->summary,
             "%zu events (%" PRIu64 " alloc, %" PRIu64 " free), %" PRIu64
             " allocate failures as markers; pre-existing: %" PRIu64 " blocks (%" PRIu64
             " B requested)",
             t->n_events, t->n_action[GM_TA_ALLOC], t->n_action[GM_TA_FREE_COMPLETED],
             t->n_action[GM_TA_OOM], t->init_blocks, t->init_block_bytes);
    return GM_OK;
}

/*
 * One line, whatever its end: LF (Unix), CR LF (Windows) or a lone CR (classic
 * Mac OS, some loggers), without the end. *len counts every byte, so a NUL
 * inside the line is seen. -1 at the end of the file, -2 out of memory.
 */
static int read_line(FILE *f, char **buf, size_t *cap, size_t *len)
{
    size_t n = 0;
    int c = EOF;
    while ((c = getc_unlocked(f)) != EOF && c != '\n' && c != '\r') {
        if (n + 2 > *cap) {
            size_t ncap = *cap ? 2 * *cap : 256;
            char *q = realloc(*buf, ncap);
            if (!q) return -2;
            *buf = q, *cap = ncap;
        }
        (*buf)[n++] = (char)c;
    }
    if (c == EOF && n == 0) return -1;
    if (c == '\r') {
        int d = getc_unlocked(f);
        if (d != '\n' && d != EOF) ungetc(d, f);
    }
    if (!*buf && !(*buf = malloc(*cap = 256))) return -2;
    (*buf)[n] = 0;
    *len = n;
    return 0;
}

/* A NUL byte cuts a C string short: name it (its column and field) rather
 * than let the row look short of columns. */
static int nul_byte(const rmm *r, const char *line, size_t len, gm_err *err)
{
    const char *z = memchr(line, 0, len);
    if (!z) return GM_OK;
    int field = 1;
    for (const char *p = line; p < z; p++)
        field += *p == ',';
    return gm_errf(err, GM_EINVAL,
                   "%s: line %zu, byte %zu: a NUL byte (0x00) in field %d; an RMM log is text — "
                   "the file is damaged or not a log (remove the byte or re-export the log)",
                   r->name, r->line, (size_t)(z - line) + 1, field);
}

int gm_rmm_import_stream(FILE *f, const gm_rmm_opts *o, gm_import_trace *out, gm_err *err)
{
    rmm r = {.name = o && o->name ? o->name : "rmm log", .t = out};
    char *line = NULL;
    size_t cap = 0, len;
    int rc = GM_OK, got;
    memset(out, 0, sizeof *out);
    if (gm_addrmap_init(&r.live, 1024) || gm_addrmap_init(&r.seen, 1024))
        rc = gm_errf(err, GM_ENOMEM, "out of host memory importing %s", r.name);
    while (rc == GM_OK && (got = read_line(f, &line, &cap, &len)) == 0) {
        r.line++;
        rc = nul_byte(&r, line, len, err);
        if (!rc) rc = r.line == 1 ? header(&r, line, err) : row(&r, line, err);
    }
    if (rc == GM_OK && got == -2)
        rc = gm_errf(err, GM_ENOMEM, "out of host memory importing %s", r.name);
    if (rc == GM_OK && r.line == 0)
        rc = gm_errf(err, GM_EINVAL, "%s: empty file; expected an RMM log CSV", r.name);
    if (rc == GM_OK && ferror(f)) rc = gm_errf(err, GM_EIO, "%s: read error", r.name);
    if (rc == GM_OK) rc = finish_meta(&r, o, err);
    free(line);
    gm_addrmap_free(&r.live);
    gm_addrmap_free(&r.seen);
    if (rc) gm_import_trace_free(out);
    return rc;
}

int gm_rmm_import_file(const char *path, const gm_rmm_opts *o, gm_import_trace *out, gm_err *err)
{
    gm_rmm_opts opts = o ? *o : (gm_rmm_opts){0};
    if (!opts.name) opts.name = path;
    FILE *f = fopen(path, "r");
    if (!f) {
        memset(out, 0, sizeof *out);
        return gm_errf(err, GM_EIO, "%s: cannot open: %s", path, strerror(errno));
    }
    int rc = gm_rmm_import_stream(f, &opts, out, err);
    fclose(f);
    return rc;
}
