/*
 * fuzz_trace.c - libFuzzer harness for the HDF5 trace reader (traces/trace.h,
 * see README.md).
 *
 * Each input is an HDF5 file (a temporary file, rewritten per input). It is
 * read as gmsim reads a trace: gm_trace_open (the isolated reader: libhdf5 in
 * a child process), every event, /initial_state, /markers, a rewind and the
 * first piece again. What must hold, whatever the bytes:
 *   - this process never crashes or hangs (a crash or hang of libhdf5 in the
 *     child is the documented error, "the HDF5 library failed on this file");
 *   - a failure is an error code with a message that names the file;
 *   - a success hands out exactly gm_trace_nevents() events, each valid
 *     (op, category, phase in range, time never going backwards, sizes within
 *     2^48), rows and markers valid, the same events after a rewind.
 * When the child survived, the same file is read again in this process
 * (gm_trace_open_inprocess), so libFuzzer sees the coverage of the reader's
 * checks, and the two must agree: same result, same message, same events.
 */
#include "traces/trace.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int fd = -1;
static char path[4096];

static void remove_file(void)
{
    unlink(path);
}

static void check(int cond)
{
    if (!cond) abort();
}

/* libhdf5 leaks on some error paths of a damaged file (in the in-process
 * comparison run; gmsim's child just exits): not this project's leaks. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:libhdf5_serial.so\nleak:libhdf5.so\n";
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    setenv("GMSIM_TRACE_TIMEOUT", "5", 0); /* a hang in the child ends in 5 s */
    const char *dir = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/fuzz_trace.%d.h5", dir && *dir ? dir : "/tmp", (int)getpid());
    fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    check(fd >= 0);
    atexit(remove_file);
    return 0;
}

/* Everything a reading command does, into a summary to compare. */
struct outcome {
    int rc;
    char msg[sizeof(((gm_err *)0)->msg)];
    uint64_t nevents, hash, ninit, nmark;
};

static uint64_t mix(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ c[i]) * 0x100000001b3ull;
    return h;
}

static void read_all(int isolated, struct outcome *o)
{
    gm_err err = {0};
    gm_trace_reader *r = NULL;
    memset(o, 0, sizeof *o);
    o->hash = 0xcbf29ce484222325ull;
    o->rc = isolated ? gm_trace_open(path, &r, &err) : gm_trace_open_inprocess(path, &r, &err);
    if (o->rc) {
        check(r == NULL && o->rc < 0 && strstr(err.msg, path) != NULL);
        snprintf(o->msg, sizeof o->msg, "%s", err.msg);
        return;
    }
    check(gm_trace_meta_get(r) && gm_trace_meta_get(r)->version >= GM_TRACE_MIN_VERSION);
    o->nevents = gm_trace_nevents(r);
    static gm_event buf[GM_TRACE_CHUNK_EVENTS], first[1024];
    size_t nfirst = 0;
    uint64_t got = 0, prev = 0;
    int64_t n;
    int rc = GM_OK;
    while ((n = gm_trace_read(r, buf, GM_TRACE_CHUNK_EVENTS, &err)) > 0) {
        for (int64_t i = 0; i < n; i++) {
            const gm_event *e = &buf[i];
            check(e->op < GM_OP_COUNT && e->category < GM_CAT_COUNT && e->phase < GM_PHASE_COUNT &&
                  e->t_ns >= prev && e->size <= GM_TRACE_MAX_SIZE &&
                  e->site <= gm_trace_meta_get(r)->n_sites);
            prev = e->t_ns;
        }
        o->hash = mix(o->hash, buf, (size_t)n * sizeof *buf);
        if (got == 0) {
            nfirst = n < 1024 ? (size_t)n : 1024;
            memcpy(first, buf, nfirst * sizeof *buf);
        }
        got += (uint64_t)n;
    }
    if (n < 0) rc = (int)n;
    check(rc != GM_OK || got == o->nevents);
    if (rc == GM_OK) {
        gm_init_row *ir = NULL;
        size_t ni = 0;
        rc = gm_trace_read_initial(r, &ir, &ni, &err);
        for (size_t i = 0; rc == GM_OK && i < ni; i++)
            check(ir[i].kind < GM_INIT_KIND_COUNT && ir[i].category < GM_CAT_COUNT);
        if (rc == GM_OK) o->hash = mix(o->hash, ir, ni * sizeof *ir);
        o->ninit = ni;
        free(ir);
    }
    if (rc == GM_OK) {
        gm_marker *m = NULL;
        size_t nm = 0;
        rc = gm_trace_read_markers(r, &m, &nm, &err);
        for (size_t i = 0; rc == GM_OK && i < nm; i++)
            check(m[i].kind <= GM_MARK_INSTANT && memchr(m[i].name, 0, GM_MARKER_NAME_LEN));
        if (rc == GM_OK) o->hash = mix(o->hash, m, nm * sizeof *m);
        o->nmark = nm;
        free(m);
    }
    if (rc == GM_OK) {
        gm_sites st;
        rc = gm_trace_read_sites(r, &st, &err);
        for (size_t i = 0; rc == GM_OK && i < st.n; i++) {
            size_t a = strlen(st.rows[i].name), b = strlen(st.rows[i].stack);
            check(a < GM_SITE_NAME_MAX && b < GM_SITE_STACK_MAX);
            o->hash = mix(o->hash, st.rows[i].name, a);
            o->hash = mix(o->hash, st.rows[i].stack, b);
        }
        check(rc != GM_OK || st.n == gm_trace_meta_get(r)->n_sites);
        gm_sites_free(&st);
    }
    if (rc == GM_OK && nfirst > 0) { /* a rewind reads the same first events */
        check(gm_trace_rewind(r) == GM_OK && gm_trace_position(r) == 0);
        int64_t a = gm_trace_read(r, buf, nfirst, &err);
        if (a < 0) rc = (int)a;
        if (rc == GM_OK) check(a == (int64_t)nfirst && !memcmp(first, buf, nfirst * sizeof *buf));
    }
    if (rc) {
        check(rc < 0 && strstr(err.msg, path) != NULL);
        snprintf(o->msg, sizeof o->msg, "%s", err.msg);
    }
    o->rc = rc;
    gm_trace_close(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check(ftruncate(fd, 0) == 0 && pwrite(fd, data, size, 0) == (ssize_t)size);
    struct outcome iso, local;
    read_all(1, &iso);
    if (getenv("FUZZ_TRACE_VERBOSE"))
        fprintf(stderr, "isolated: rc %d, %llu events: %s\n", iso.rc,
                (unsigned long long)iso.nevents, iso.msg);
    /* the child crashed or hung: this process must not try the file itself */
    if (strstr(iso.msg, "the HDF5 library failed on this file")) return 0;
    if (iso.nevents > (1u << 20)) return 0; /* keep a run short */
    read_all(0, &local);
    check(iso.rc == local.rc && !strcmp(iso.msg, local.msg));
    check(iso.nevents == local.nevents && iso.hash == local.hash && iso.ninit == local.ninit &&
          iso.nmark == local.nmark);
    return 0;
}
