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
 * When the child survived, the same file is read again without the reader's
 * child (gm_trace_open_inprocess), so libFuzzer sees the coverage of the
 * reader's checks, and the two must agree: same result, same message, same
 * events. That read runs in a fork of this process (inprocess() below), so
 * libhdf5's own memory errors cannot end the fuzzing run, while one in this
 * project's code still does.
 */
#include "traces/trace.h"
#include "counters.h"

#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static int fd = -1;
static char path[4096];
static struct shared *sh; /* with the fork of inprocess() */
static void *map_shared(void);

static void remove_file(void)
{
    unlink(path);
}

/* A broken promise: the input file goes (libFuzzer keeps the input as its
 * crash-* file; atexit handlers do not run on abort), then abort. */
static _Noreturn void fail(void)
{
    unlink(path);
    abort();
}

static void check(int cond)
{
    if (!cond) fail();
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
    sh = map_shared();
    check(sh != NULL);
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

/*
 * The read without the reader's child, in a fork of this process.
 *
 * libhdf5 1.10 is not memory-safe on damaged files, and not always the same
 * way twice: a file can read freed memory in one run and not in the next
 * (the address layout differs), so the child surviving a file does not
 * promise that this process would; and a file it fails to close keeps its
 * id with the file's memory already freed (CVE-2020-10812, fixed in HDF5
 * 1.14.1), which crashes the library's shutdown at exit. Both were found by
 * this harness. So the read runs in a fork that only reads and exits:
 *   - it hands back its outcome and its coverage counters (libFuzzer's
 *     inline 8-bit counters, counters.c, which the fork holds at the same
 *     addresses), so libFuzzer is guided as if the read had run here;
 *   - it checks that the reader closed every HDF5 object it opened;
 *   - if it dies, AddressSanitizer's report (kept by a report callback)
 *     says where: an error whose innermost frame, past the sanitizer's own
 *     and its interceptors of libc (memmove, memcpy, ...), is in libhdf5 is
 *     libhdf5's, counted and printed; anything else (a frame in this
 *     project, a failed check, a UBSan error, a hang) aborts this process,
 *     and libFuzzer keeps the input.
 */

#define REPORT_MAX 16384
struct shared {
    struct outcome o;
    int done;
    size_t report_len;
    char report[REPORT_MAX];
    uint8_t counters[]; /* n_counters of them */
};
static uint8_t *counters; /* counters.h */
static size_t n_counters;
static unsigned long hdf5_errors;

static void keep_report(const char *text)
{
    size_t n = strlen(text);
    if (n >= REPORT_MAX) n = REPORT_MAX - 1;
    memcpy(sh->report, text, n);
    sh->report[n] = 0;
    sh->report_len = n;
}

static void *map_shared(void)
{
    counters = fuzz_counters(&n_counters);
    void *p = mmap(NULL, sizeof *sh + n_counters, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* The innermost frame of report that is not a sanitizer interceptor of a
 * libc function: "    #N 0x... in FUNC (MODULE+0x...)" or, unsymbolized,
 * "    #N 0x... (MODULE+0x...)". 1 if it is in libhdf5. */
static int libhdf5s(const char *report)
{
    static const char *const libc[] = {"memmove", "memcpy",  "memset",  "memcmp", "strlen",
                                       "strnlen", "strcmp",  "strncmp", "free",   "malloc",
                                       "calloc",  "realloc", "bcmp",    NULL};
    for (const char *l = strstr(report, "    #0 "); l; l = strstr(l + 1, "\n    #")) {
        const char *end = strchr(l + 1, '\n');
        size_t len = end ? (size_t)(end - l) : strlen(l);
        char line[1024];
        snprintf(line, sizeof line, "%.*s", (int)(len < sizeof line ? len : sizeof line - 1), l);
        const char *in = strstr(line, " in ");
        int interceptor =
            in && (!strncmp(in + 4, "__sanitizer::", 13) || !strncmp(in + 4, "__asan", 6) ||
                   !strncmp(in + 4, "__interceptor_", 14));
        for (int i = 0; in && libc[i]; i++) {
            size_t k = strlen(libc[i]);
            if (!strncmp(in + 4, libc[i], k) && in[4 + k] == ' ') interceptor = 1;
        }
        if (interceptor) continue;
        return strstr(line, "libhdf5") != NULL;
    }
    return 0;
}

static int same(const struct outcome *a, const struct outcome *b)
{
    return a->rc == b->rc && !strcmp(a->msg, b->msg) && a->nevents == b->nevents &&
           a->hash == b->hash && a->ninit == b->ninit && a->nmark == b->nmark;
}

/* 1 with *local read; 0 when libhdf5 failed where the child did not */
static int inprocess(struct outcome *local)
{
    memset(sh, 0, sizeof *sh);
    fflush(NULL);
    pid_t pid = fork();
    check(pid >= 0);
    if (pid == 0) {
        /* libFuzzer's handlers would write this input out as a crash of
         * the run: whether it is one is the parent's to say */
        __sanitizer_set_death_callback(NULL);
        signal(SIGABRT, SIG_DFL);
        __asan_set_error_report_callback(keep_report);
        alarm(60); /* the child's reader took at most 5 s: this is a hang */
        read_all(0, &sh->o);
        check(H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL) == 0); /* nothing left open */
        if (n_counters) memcpy(sh->counters, counters, n_counters);
        sh->done = 1;
        _exit(0); /* no libhdf5 shutdown: nothing to flush, nothing to free */
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        check(errno == EINTR);
    if (sh->done && WIFEXITED(st) && WEXITSTATUS(st) == 0) {
        *local = sh->o;
        if (n_counters) memcpy(counters, sh->counters, n_counters);
        return 1;
    }
    if (sh->report_len && libhdf5s(sh->report)) {
        hdf5_errors++;
        fprintf(stderr,
                "fuzz_trace: libhdf5's own memory error on an in-process read (%lu so "
                "far; the isolated reader survived this file)\n",
                hdf5_errors);
        return 0;
    }
    fprintf(stderr, "fuzz_trace: the in-process read died (%s %d)%s\n%s",
            WIFSIGNALED(st) ? "signal" : "exit status",
            WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st),
            sh->report_len ? ", AddressSanitizer's report:" : "", sh->report);
    fail();
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
    if (!inprocess(&local) || same(&iso, &local)) return 0;
    /* libhdf5 reading freed memory may answer otherwise from one run to the
     * next: then the isolated reader does too, in one of three more tries */
    for (int i = 0; i < 3; i++) {
        struct outcome again;
        read_all(1, &again);
        if (!same(&iso, &again)) {
            hdf5_errors++;
            fprintf(stderr,
                    "fuzz_trace: libhdf5 read this file two ways in two runs (%lu so far)\n",
                    hdf5_errors);
            return 0;
        }
    }
    fprintf(stderr,
            "fuzz_trace: isolated and in-process reads differ: rc %d/%d, %llu/%llu events: "
            "%s / %s\n",
            iso.rc, local.rc, (unsigned long long)iso.nevents, (unsigned long long)local.nevents,
            iso.msg, local.msg);
    fail();
}
