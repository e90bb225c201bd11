/*
 * trace_isolate.c - the public trace reader (trace.h): HDF5 in a child
 * process.
 *
 * Why. libhdf5 trusts its file: damaged metadata makes Debian's 1.10.8
 * segfault (H5HG_read behind a string attribute, H5C_protect), overflow its
 * heap or loop forever, and no check made from outside before opening can
 * rule that out. So the library runs where its failure costs nothing: a
 * child process that opens and checks the file, then answers requests for
 * pieces of /events and for the small tables. A crash, a hang or a lie
 * there becomes one error here: "the HDF5 library failed on this file
 * (damaged or hostile); nothing was simulated".
 *
 * The child. fork() and at once execve("/proc/self/exe") with
 * GMSIM_TRACE_CHILD=1 in its environment: the new image inherits no lock
 * and no thread of this (possibly multi-threaded) process, and the
 * constructor below serves before main() runs, so every program that links
 * this file (gmsim, gmreplay, the tests, the fuzz harness) can be its own
 * reader. Before exec (no new descriptor: this process may be at its
 * limit): the socket and the trace (opened here, checked to be a regular
 * file) are kept and named in GMSIM_TRACE_CHILD, stdin is closed, stdout
 * is stderr, every other descriptor is closed, no core dumps, a CPU limit.
 * After exec they become fds 3 and 4, then: an
 * address-space limit of GM_TRACE_CHILD_MEM_BYTES above what it starts
 * with, HDF5 filter plugins off; once HDF5 has the file open, no
 * capabilities, no new privileges and a seccomp filter (Debian's
 * libseccomp) that refuses every system call that opens, creates or
 * changes a file, starts a process or thread, reaches the network or
 * another process, or changes a limit, and lets it write only to its
 * socket and stderr. So even a file that takes over the child cannot read
 * another file (FORMAT.md, "Isolation").
 *
 * The protocol. Requests and replies on a Unix stream socket, each a fixed
 * header and a payload; events go through shared memory instead (a memfd
 * of two slots of 64 Ki events, mapped read-only here): the child decodes a
 * piece into a slot and says which, the parent copies it out, checks the
 * copy, and at once asks for the next piece, which the child decodes into
 * the other slot while the caller simulates (so a read rarely waits). The
 * parent keeps the position: a read request carries (first row, t_ns
 * before it, count), so the child holds no state the parent depends on.
 * The parent checks every reply against the request and checks every
 * event, row and marker again (gm_trace_check_*), so a child that lies
 * cannot hand the simulator an out-of-range op, category or kind. Each
 * reply must arrive within the watchdog time (GM_TRACE_TIMEOUT_S) of the
 * parent starting to wait for it; the CPU limit grows by one second per
 * request (prlimit from here).
 */
#define _GNU_SOURCE /* prlimit, strsignal */
#include "trace.h"
#include "trace_int.h"

#include <hdf5.h>
#include <seccomp.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef unsigned long long ull;

#define CHILD_ENV "GMSIM_TRACE_CHILD"
#define FD_SOCK 3
#define FD_TRACE 4
#define FD_SHM 5
/* Events per read request, and the two slots of shared memory the child
 * decodes them into (2 x 2.5 MiB): the parent copies the slot of a reply
 * out, checks the copy, and at once asks for the next piece, which the
 * child decodes into the other slot while the caller simulates. */
#define PIECE GM_TRACE_CHUNK_EVENTS
#define CHECK_EVENTS 4096u /* events copied out, then checked, at a time */
#define SLOT_BYTES (PIECE * sizeof(gm_event))
#define SHM_BYTES (2 * SLOT_BYTES)
#define MAX_PATH_BYTES 4096
#define MAX_META_BYTES (8 * (size_t)GM_TRACE_MAX_ATTR_BYTES + 4096)

/* Traces open in this process, only for the "too many open files"
 * message (a count of a process-wide resource, so process-wide). */
static atomic_uint open_traces;

int gm_trace_open_error(const char *path, int errnum, gm_err *err)
{
    if (errnum == EMFILE || errnum == ENFILE) {
        struct rlimit rl = {0, 0};
        getrlimit(RLIMIT_NOFILE, &rl);
        return gm_errf(err, GM_EIO,
                       "%s: cannot open: too many open files (%u traces open in this process; "
                       "raise ulimit -n, now %llu)",
                       path, atomic_load(&open_traces), (ull)rl.rlim_cur);
    }
    return gm_errf(err, GM_EIO, "%s: cannot open: %s", path, strerror(errnum));
}

/* ------------------------------------------------------------ protocol */

enum req_kind { REQ_OPEN = 1, REQ_READ, REQ_INITIAL, REQ_MARKERS, REQ_SITES };

struct req {
    uint32_t kind;
    uint32_t len;  /* payload bytes (REQ_OPEN: the path as the user gave it) */
    uint64_t pos;  /* REQ_READ: first row                                  */
    uint64_t prev; /* REQ_READ: t_ns of row pos-1 (0 for row 0)            */
    uint64_t n;    /* REQ_READ: rows, 1..PIECE                             */
};

struct rep {
    uint32_t kind;  /* the request's                                      */
    int32_t status; /* GM_OK or a GM_E* code (payload: the message)       */
    uint64_t a;     /* OPEN: events; READ: rows; tables: rows             */
    uint64_t b;     /* READ: t_ns of the last row                         */
    uint64_t len;   /* payload bytes                                      */
    uint64_t slot;  /* READ: the shared-memory slot (0 or 1) of the rows  */
};

/* Whole buffers over a socket; MSG_NOSIGNAL: a closed peer is an error,
 * not SIGPIPE. */
static int send_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t k = send(fd, p, len, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        p += k, len -= (size_t)k;
    }
    return 0;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Receive len bytes by the deadline (< 0: none). 0, or -1 with *why set:
 * "eof" (the peer is gone), "timeout", "error". */
static int recv_all(int fd, void *buf, size_t len, double deadline, const char **why)
{
    char *p = buf;
    while (len > 0) {
        if (deadline >= 0) {
            double left = deadline - now_s();
            int ms = left <= 0 ? 0 : left > 1e6 ? 1000000000 : (int)(left * 1000) + 1;
            struct pollfd pf = {fd, POLLIN, 0};
            int k = left <= 0 ? 0 : poll(&pf, 1, ms);
            if (k < 0 && errno == EINTR) continue;
            if (k == 0) return *why = "timeout", -1;
            if (k < 0) return *why = "error", -1;
        }
        ssize_t k = recv(fd, p, len, deadline >= 0 ? MSG_DONTWAIT : 0);
        if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (k == 0) return *why = "eof", -1;
        if (k < 0) return *why = errno == ECONNRESET ? "eof" : "error", -1;
        p += k, len -= (size_t)k;
    }
    return 0;
}

/* ------------------------------------------------------------ meta on the wire */

struct wbuf {
    char *p;
    size_t len, cap;
    int failed;
};

static void wput(struct wbuf *w, const void *v, size_t n)
{
    if (w->failed) return;
    if (w->len + n > w->cap) {
        size_t cap = (w->cap ? 2 * w->cap : 4096) + n;
        char *q = realloc(w->p, cap);
        if (!q) {
            w->failed = 1;
            return;
        }
        w->p = q, w->cap = cap;
    }
    memcpy(w->p + w->len, v, n);
    w->len += n;
}

/* The strings and numbers of gm_trace_meta, in one order for both sides. */
#define META_NSTR 8
#define META_NU64 6
static char **meta_strs(gm_trace_meta *m, int i)
{
    char **s[META_NSTR] = {
        &m->source,   &m->device_name, &m->created_utc,         &m->command,
        &m->workload, &m->alloc_conf,  &m->device_avail_source, &m->torch_version};
    return s[i];
}
static uint64_t *meta_nums(gm_trace_meta *m, int i)
{
    uint64_t *v[META_NU64] = {&m->device_total_bytes,     &m->dropped_records,
                              &m->device_avail_bytes,     &m->device_avail_min_bytes,
                              &m->device_avail_max_bytes, &m->n_sites};
    return v[i];
}

static void meta_put(struct wbuf *w, const gm_trace_meta *cm)
{
    gm_trace_meta *m = (gm_trace_meta *)cm;
    int32_t version = m->version, dense = m->dense_ids;
    wput(w, &version, sizeof version);
    wput(w, &dense, sizeof dense);
    for (int i = 0; i < META_NU64; i++)
        wput(w, meta_nums(m, i), 8);
    for (int i = 0; i < META_NSTR; i++) {
        const char *s = *meta_strs(m, i) ? *meta_strs(m, i) : "";
        uint32_t n = (uint32_t)strlen(s);
        wput(w, &n, sizeof n);
        wput(w, s, n);
    }
}

/* Parse what meta_put wrote (from the child: checked like any input). */
static int meta_get(const char *p, size_t len, gm_trace_meta *m)
{
    size_t off = 0;
    int32_t version, dense;
    if (len < sizeof version + sizeof dense + 8 * META_NU64) return -1;
    memcpy(&version, p, sizeof version), off += sizeof version;
    memcpy(&dense, p + off, sizeof dense), off += sizeof dense;
    if (version < GM_TRACE_MIN_VERSION || version > GM_TRACE_VERSION || dense < 0 || dense > 2)
        return -1;
    m->version = version;
    m->dense_ids = dense; /* a hint only: the engine checks each id's address at the free */
    for (int i = 0; i < META_NU64; i++, off += 8)
        memcpy(meta_nums(m, i), p + off, 8);
    if (m->n_sites > GM_TRACE_MAX_TABLE_ROWS) return -1;
    for (int i = 0; i < META_NSTR; i++) {
        uint32_t n;
        if (len - off < sizeof n) return -1;
        memcpy(&n, p + off, sizeof n), off += sizeof n;
        if (n > GM_TRACE_MAX_ATTR_BYTES || len - off < n || memchr(p + off, 0, n)) return -1;
        char *s = malloc((size_t)n + 1);
        if (!s) return -1;
        memcpy(s, p + off, n), s[n] = 0, off += n;
        free(*meta_strs(m, i));
        *meta_strs(m, i) = s;
    }
    return off == len ? 0 : -1;
}

/* ------------------------------------------------------------ the child */

/* Close descriptors lo..hi-1 (hi < 0: all from lo); async-signal-safe. */
static void close_from(int lo, int hi)
{
    if (hi >= 0 && hi <= lo) return;
#ifdef SYS_close_range
    if (syscall(SYS_close_range, (unsigned)lo, hi < 0 ? ~0U : (unsigned)hi - 1, 0) == 0) return;
#endif
    for (int fd = lo; fd < (hi < 0 ? 65536 : hi); fd++)
        close(fd);
}

/* Address space: what the child has now plus the budget. */
static void limit_memory(void)
{
    unsigned long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%lu", &pages) != 1) pages = 0;
        fclose(f);
    }
    rlim_t lim = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + GM_TRACE_CHILD_MEM_BYTES;
    struct rlimit rl = {lim, lim};
    setrlimit(RLIMIT_AS, &rl);
}

/* Refuse system call nr (EPERM) when its first argument compares so to v. */
static int deny_if(scmp_filter_ctx ctx, int nr, enum scmp_compare op, scmp_datum_t v)
{
    struct scmp_arg_cmp c = {.arg = 0, .op = op, .datum_a = v, .datum_b = 0};
    return seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO(EPERM), nr, 1, &c) < 0;
}

/* No capabilities left (the child may run as root), no new privileges,
 * and the system-call filter of the file comment. Best effort: a kernel
 * without seccomp still gets the limits and the checks. */
static void sandbox(void)
{
    struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2];
    memset(data, 0, sizeof data);
    syscall(SYS_capset, &hdr, data);
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx) return;
    static const char *const denied[] = {
        /* files: open, create, change */
        "open", "openat", "openat2", "creat", "open_by_handle_at", "name_to_handle_at", "mknod",
        "mknodat", "link", "linkat", "symlink", "symlinkat", "unlink", "unlinkat", "rename",
        "renameat", "renameat2", "mkdir", "mkdirat", "rmdir", "truncate", "ftruncate", "chmod",
        "fchmod", "fchmodat", "chown", "fchown", "lchown", "fchownat", "utime", "utimes",
        "utimensat", "futimesat", "chdir", "fchdir", "chroot", "pivot_root", "mount", "umount2",
        "memfd_create", "pwrite64", "pwritev", "pwritev2", "sendfile", "splice", "tee",
        "copy_file_range", "fallocate", "ioctl", "inotify_init", "inotify_init1", "fanotify_init",
        "io_uring_setup", "io_uring_enter", "io_uring_register",
        /* processes, threads, other processes */
        "execve", "execveat", "fork", "vfork", "clone", "clone3", "ptrace", "process_vm_readv",
        "process_vm_writev", "pidfd_open", "pidfd_getfd", "pidfd_send_signal", "kcmp", "tkill",
        "unshare", "setns", "userfaultfd", "bpf", "perf_event_open", "keyctl", "add_key",
        "request_key",
        /* the network */
        "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4",
        /* limits, identity, the machine */
        "setrlimit", "prlimit64", "setpriority", "setuid", "setgid", "setreuid", "setregid",
        "setresuid", "setresgid", "setgroups", "setfsuid", "setfsgid", "capset", "reboot",
        "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "swapon",
        "swapoff", "sethostname", "setdomainname", "settimeofday", "clock_settime", "adjtimex",
        "clock_adjtime", "iopl", "ioperm", "quotactl", "acct", "syslog"};
    int fail = 0;
    for (size_t i = 0; i < sizeof denied / sizeof denied[0]; i++) {
        int nr = seccomp_syscall_resolve_name(denied[i]);
        if (nr != __NR_SCMP_ERROR) fail |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0) < 0;
    }
    /* writes only to stdout/stderr (1, 2: stderr) and the socket (3) */
    fail |= deny_if(ctx, SCMP_SYS(write), SCMP_CMP_GT, FD_SOCK);
    fail |= deny_if(ctx, SCMP_SYS(writev), SCMP_CMP_GT, FD_SOCK);
    fail |= deny_if(ctx, SCMP_SYS(sendto), SCMP_CMP_NE, FD_SOCK);
    fail |= deny_if(ctx, SCMP_SYS(sendmsg), SCMP_CMP_NE, FD_SOCK);
    fail |= deny_if(ctx, SCMP_SYS(sendmmsg), SCMP_CMP_NE, FD_SOCK);
    /* signals only to itself (abort() uses tgkill) */
    fail |= deny_if(ctx, SCMP_SYS(kill), SCMP_CMP_NE, (scmp_datum_t)getpid());
    fail |= deny_if(ctx, SCMP_SYS(tgkill), SCMP_CMP_NE, (scmp_datum_t)getpid());
    if (!fail) seccomp_load(ctx);
    seccomp_release(ctx);
}

static int reply_slot(uint32_t kind, int status, uint64_t a, uint64_t b, const void *p, size_t len,
                      uint64_t slot)
{
    struct rep h = {kind, status, a, b, len, slot};
    return send_all(FD_SOCK, &h, sizeof h) || (len && send_all(FD_SOCK, p, len)) ? -1 : 0;
}

static int reply(uint32_t kind, int status, uint64_t a, uint64_t b, const void *p, size_t len)
{
    return reply_slot(kind, status, a, b, p, len, 0);
}

static int reply_err(uint32_t kind, const gm_err *e)
{
    int code = e->code < 0 ? e->code : GM_EIO;
    return reply(kind, code, 0, 0, e->msg, strnlen(e->msg, sizeof e->msg));
}

/* A read request, answered into a slot of shared memory. */
struct piece {
    int rc, slot;
    uint64_t n, prev_out;
    gm_err err;
};

static void do_read(gm_h5r *r, gm_event *shm, int slot, struct piece *pc, uint64_t pos,
                    uint64_t prev, uint64_t n)
{
    gm_event *buf = shm + (size_t)slot * PIECE;
    pc->n = n, pc->slot = slot, pc->prev_out = prev;
    /* unchecked: read_remote checks the copy it takes (trace_int.h) */
    pc->rc = gm_h5r_read_at(r, pos, buf, (size_t)n, &pc->prev_out, 0, &pc->err);
}

static int serve_table(gm_h5r *r, uint32_t kind)
{
    gm_err e = {0};
    void *rows = NULL;
    size_t n = 0, size = kind == REQ_INITIAL ? sizeof(gm_init_row) : sizeof(gm_marker);
    int rc = kind == REQ_INITIAL ? gm_h5r_read_initial(r, (gm_init_row **)&rows, &n, &e)
                                 : gm_h5r_read_markers(r, (gm_marker **)&rows, &n, &e);
    int st = rc ? reply_err(kind, &e) : reply(kind, GM_OK, n, 0, rows, n * size);
    free(rows);
    return st;
}

static int serve_sites(gm_h5r *r)
{
    gm_err e = {0};
    char *blob = NULL;
    size_t len = 0, n = 0;
    int rc = gm_h5r_read_sites(r, &blob, &len, &n, &e);
    int st = rc ? reply_err(REQ_SITES, &e) : reply(REQ_SITES, GM_OK, n, 0, blob, len);
    free(blob);
    return st;
}

static void serve(gm_h5r *r, gm_event *shm)
{
    struct piece pc = {0};
    int free_slot = 0; /* the slot the parent is not reading */
    struct req q;
    const char *why;
    while (recv_all(FD_SOCK, &q, sizeof q, -1, &why) == 0 && q.len == 0) {
        int st = 0;
        if (q.kind == REQ_READ) {
            uint64_t total = gm_h5r_nevents(r);
            if (q.n < 1 || q.n > PIECE || q.pos > total || q.n > total - q.pos) break;
            do_read(r, shm, free_slot, &pc, q.pos, q.prev, q.n);
            st = pc.rc ? reply_err(REQ_READ, &pc.err)
                       : reply_slot(REQ_READ, GM_OK, pc.n, pc.prev_out, NULL, 0, (uint64_t)pc.slot);
            if (!pc.rc) free_slot ^= 1; /* the parent copies pc.slot out before it asks again */
        } else if (q.kind == REQ_INITIAL || q.kind == REQ_MARKERS) {
            st = serve_table(r, q.kind);
        } else if (q.kind == REQ_SITES) {
            st = serve_sites(r);
        } else {
            break;
        }
        if (st) break;
    }
}

/* The child's main: open the trace named by the first request, say how it
 * went, serve until the parent closes the socket. */
static void child_main(void)
{
    signal(SIGPIPE, SIG_IGN);
    gm_event *shm = mmap(NULL, SHM_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, FD_SHM, 0);
    close(FD_SHM);
    if (shm == MAP_FAILED) _exit(2);
    limit_memory();
    H5PLset_loading_state(0); /* no filter plugins: no code or file from elsewhere */
    struct req q;
    const char *why;
    char *path = NULL;
    if (recv_all(FD_SOCK, &q, sizeof q, -1, &why) || q.kind != REQ_OPEN || q.len < 1 ||
        q.len > MAX_PATH_BYTES || !(path = calloc(q.len + 1, 1)) ||
        recv_all(FD_SOCK, path, q.len, -1, &why))
        _exit(2);
    gm_err e = {0};
    gm_h5r *r = NULL;
    int rc = gm_h5r_open_sandboxed(path, FD_TRACE, sandbox, &r, &e);
    close(FD_TRACE);
    if (rc) {
        reply_err(REQ_OPEN, &e);
        _exit(0);
    }
    struct wbuf w = {0};
    meta_put(&w, gm_h5r_meta(r));
    if (w.failed) {
        gm_err oom;
        gm_err_set(&oom, GM_ENOMEM, "%s: out of memory", path);
        reply_err(REQ_OPEN, &oom);
        _exit(0);
    }
    if (reply(REQ_OPEN, GM_OK, gm_h5r_nevents(r), 0, w.p, w.len) == 0) serve(r, shm);
    _exit(0); /* no atexit handlers, no HDF5 shutdown: nothing to flush */
}

/* GMSIM_TRACE_CHILD=SOCK,TRACE,SHM: this process is a reader; its three
 * descriptors move to FD_SOCK, FD_TRACE and FD_SHM (a fresh image has few
 * open). */
__attribute__((constructor)) static void trace_child_entry(void)
{
    const char *v = getenv(CHILD_ENV);
    int s, t, m;
    char end;
    if (!v || sscanf(v, "%d,%d,%d%c", &s, &t, &m, &end) != 3 || s < 0 || t < 0 || m < 0 || s == t ||
        s == m || t == m)
        return;
    int s2 = fcntl(s, F_DUPFD, 10), t2 = fcntl(t, F_DUPFD, 10), m2 = fcntl(m, F_DUPFD, 10);
    if (s2 < 0 || t2 < 0 || m2 < 0 || dup2(s2, FD_SOCK) != FD_SOCK ||
        dup2(t2, FD_TRACE) != FD_TRACE || dup2(m2, FD_SHM) != FD_SHM)
        _exit(127);
    close_from(FD_SHM + 1, -1);
    child_main();
}

/* ------------------------------------------------------------ the parent */

struct gm_trace_reader {
    char *path;
    gm_trace_meta meta;     /* isolated: as the child sent it     */
    const gm_trace_meta *m; /* &meta, or the in-process reader's  */
    uint64_t nevents;
    uint64_t pos;       /* index of the next event to hand out */
    uint64_t prev_t_ns; /* t_ns of event pos-1 (0 at the start) */
    gm_h5r *local;      /* in-process, or NULL                  */
    pid_t pid;          /* the child, or -1                      */
    int sock;
    const gm_event *shm;                     /* the child\'s two slots, read-only here */
    uint64_t nreq;                           /* requests so far (CPU budget)        */
    int ahead;                               /* a read request is in flight: ...     */
    uint64_t ahead_pos, ahead_prev, ahead_n; /* ... for these rows */
    double timeout_s;                        /* watchdog, per reply                 */
    int dead;                                /* the child failed: every call fails  */
    gm_err dead_err;
};

static double watchdog_s(void)
{
    const char *e = getenv("GMSIM_TRACE_TIMEOUT");
    char *end;
    double v = e ? strtod(e, &end) : 0;
    return e && *e && !*end && v > 0 && v <= 86400 ? v : GM_TRACE_TIMEOUT_S;
}

/* Stop the child (whatever it does) and collect it; *status as waitpid's. */
static int stop_child(gm_trace_reader *r)
{
    int status = 0;
    if (r->sock >= 0) close(r->sock);
    r->sock = -1;
    if (r->pid > 0) {
        kill(r->pid, SIGKILL);
        while (waitpid(r->pid, &status, 0) < 0 && errno == EINTR) {
        }
    }
    r->pid = -1;
    return status;
}

/* The child failed (crashed, hung, lied): stop it and remember why. */
static int child_failed(gm_trace_reader *r, const char *why, gm_err *err)
{
    int timed_out = !strcmp(why, "timeout");
    int status = 0, reaped = 0;
    /* a crashing child: give it a moment to be reaped with its signal */
    for (int i = 0; !timed_out && r->pid > 0 && i < 100 && !reaped; i++) {
        reaped = waitpid(r->pid, &status, WNOHANG) == r->pid;
        if (!reaped) usleep(2000);
    }
    if (reaped) {
        r->pid = -1;
        if (r->sock >= 0) close(r->sock);
        r->sock = -1;
    } else {
        status = stop_child(r);
    }
    char detail[160];
    if (timed_out)
        snprintf(detail, sizeof detail, "did not answer within %g s and was stopped", r->timeout_s);
    else if (!strcmp(why, "malformed"))
        snprintf(detail, sizeof detail, "sent a malformed reply and was stopped");
    else if (WIFSIGNALED(status) && WTERMSIG(status) != SIGKILL)
        snprintf(detail, sizeof detail, "was killed by signal %d, %s", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    else if (WIFSIGNALED(status))
        snprintf(detail, sizeof detail, "was killed (out of its CPU or memory limit?)");
    else if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
        snprintf(detail, sizeof detail, "could not be started (/proc/self/exe)");
    else
        snprintf(detail, sizeof detail, "ended with status %d",
                 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    r->dead = 1;
    gm_err_set(&r->dead_err, GM_EIO,
               "%s: the HDF5 library failed on this file (damaged or hostile); nothing was "
               "simulated (the isolated reader %s)",
               r->path, detail);
    if (err) *err = r->dead_err;
    return GM_EIO;
}

/* One more request: the child's CPU allowance grows by a second. */
static void grant_cpu(gm_trace_reader *r)
{
    r->nreq++;
    if (r->nreq % 16 != 1) return;
    struct rlimit rl = {(rlim_t)(GM_TRACE_CHILD_CPU_S + r->nreq + 16), RLIM_INFINITY};
    prlimit(r->pid, RLIMIT_CPU, &rl, NULL);
}

/* Send q (the CPU allowance grows by a second). */
static int send_req(gm_trace_reader *r, const struct req *q, const void *payload, gm_err *err)
{
    if (r->dead) {
        *err = r->dead_err;
        return GM_EIO;
    }
    grant_cpu(r);
    if (send_all(r->sock, q, sizeof *q) || (q->len && send_all(r->sock, payload, q->len)))
        return child_failed(r, "eof", err);
    return GM_OK;
}

/* The reply to a request of kind, header checked; the watchdog starts now. */
static int recv_rep(gm_trace_reader *r, uint32_t kind, struct rep *h, double *deadline, gm_err *err)
{
    if (r->dead) {
        *err = r->dead_err;
        return GM_EIO;
    }
    *deadline = now_s() + r->timeout_s;
    const char *why = "eof";
    if (recv_all(r->sock, h, sizeof *h, *deadline, &why)) return child_failed(r, why, err);
    if (h->kind != kind || h->status > 0 || h->status < GM_EUSAGE)
        return child_failed(r, "malformed", err);
    return GM_OK;
}

static int recv_error(gm_trace_reader *r, const struct rep *h, double deadline, gm_err *err);

/* The read request in flight, if any, answered and dropped (a rewind, a
 * table, a read elsewhere). */
static int drop_ahead(gm_trace_reader *r, gm_err *err)
{
    if (!r->ahead) return GM_OK;
    r->ahead = 0;
    struct rep h;
    double deadline;
    gm_err ignored;
    if (recv_rep(r, REQ_READ, &h, &deadline, err)) return GM_EIO; /* the child failed */
    if (h.status) recv_error(r, &h, deadline, &ignored); /* about rows no one asks for now */
    if (!r->dead) return GM_OK;
    *err = r->dead_err;
    return GM_EIO;
}

/* Send q; receive the reply header, checked against q. */
static int transact(gm_trace_reader *r, const struct req *q, const void *payload, struct rep *h,
                    double *deadline, gm_err *err)
{
    int rc = drop_ahead(r, err);
    if (!rc) rc = send_req(r, q, payload, err);
    if (!rc) rc = recv_rep(r, q->kind, h, deadline, err);
    return rc;
}

/* An error reply's message, into err. */
static int recv_error(gm_trace_reader *r, const struct rep *h, double deadline, gm_err *err)
{
    char msg[sizeof err->msg];
    const char *why = "malformed";
    if (h->len >= sizeof msg || recv_all(r->sock, msg, (size_t)h->len, deadline, &why))
        return child_failed(r, why, err);
    msg[h->len] = 0;
    gm_err_set(err, h->status, "%s", msg);
    return h->status;
}

static void reader_free(gm_trace_reader *r)
{
    if (r->pid > 0 || r->sock >= 0) stop_child(r);
    if (r->shm) munmap((void *)r->shm, SHM_BYTES);
    gm_h5r_close(r->local);
    gm_trace_meta_free(&r->meta);
    free(r->path);
    free(r);
}

/* fork + exec of the child, with its descriptors and limits in place. */
static int start_child(gm_trace_reader *r, int trace_fd, gm_err *err)
{
    int sv[2], mfd = memfd_create("gmsim-trace-reader", MFD_CLOEXEC);
    if (mfd < 0) return gm_trace_open_error(r->path, errno, err);
    void *shm = ftruncate(mfd, SHM_BYTES) == 0
                    ? mmap(NULL, SHM_BYTES, PROT_READ, MAP_SHARED, mfd, 0)
                    : MAP_FAILED;
    if (shm == MAP_FAILED) {
        int e = errno;
        close(mfd);
        return gm_errf(err, GM_ENOMEM, "%s: cannot map the reader's shared memory: %s", r->path,
                       strerror(e));
    }
    r->shm = shm;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        int e = errno;
        close(mfd);
        return gm_trace_open_error(r->path, e, err);
    }
    int big = 8 << 20;
    setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    /* everything the child needs is made here: after fork it only makes system calls */
    extern char **environ;
    size_t nenv = 0;
    while (environ && environ[nenv])
        nenv++;
    char **envp = malloc((nenv + 2) * sizeof *envp);
    if (!envp) {
        close(sv[0]), close(sv[1]), close(mfd);
        return gm_errf(err, GM_ENOMEM, "%s: out of memory", r->path);
    }
    size_t k = 0;
    for (size_t i = 0; i < nenv; i++)
        if (strncmp(environ[i], CHILD_ENV "=", sizeof CHILD_ENV)) envp[k++] = environ[i];
    char var[64]; /* which descriptors are the socket and the trace */
    snprintf(var, sizeof var, CHILD_ENV "=%d,%d,%d", sv[1], trace_fd, mfd);
    envp[k++] = var;
    envp[k] = NULL;
    char *argv[] = {"gmsim-trace-reader", NULL};
    struct rlimit core = {0, 0}, cpu = {GM_TRACE_CHILD_CPU_S, RLIM_INFINITY};
    pid_t pid = fork();
    if (pid == 0) {
        /* no new descriptor here: the parent may be at its limit (EMFILE
         * belongs to the parent's message, not to a child that cannot start) */
        if (fcntl(sv[1], F_SETFD, 0) < 0 || fcntl(trace_fd, F_SETFD, 0) < 0 ||
            fcntl(mfd, F_SETFD, 0) < 0 || dup2(2, 1) < 0)
            _exit(127);
        close(0);
        int keep[3] = {sv[1], trace_fd, mfd};
        for (int i = 0; i < 3; i++) /* sorted */
            for (int j = i + 1; j < 3; j++)
                if (keep[j] < keep[i]) {
                    int x = keep[i];
                    keep[i] = keep[j], keep[j] = x;
                }
        close_from(3, keep[0]);
        close_from(keep[0] + 1, keep[1]);
        close_from(keep[1] + 1, keep[2]);
        close_from(keep[2] + 1, -1);
        sigset_t all;
        sigemptyset(&all);
        sigprocmask(SIG_SETMASK, &all, NULL);
        setrlimit(RLIMIT_CORE, &core);
        setrlimit(RLIMIT_CPU, &cpu);
        execve("/proc/self/exe", argv, envp);
        _exit(127);
    }
    int fork_errno = errno;
    free(envp);
    close(sv[1]);
    close(mfd); /* the mapping stays */
    if (pid < 0) {
        close(sv[0]);
        return gm_errf(err, GM_EIO, "%s: cannot start the trace reader process: %s", r->path,
                       strerror(fork_errno));
    }
    r->pid = pid;
    r->sock = sv[0];
    return GM_OK;
}

static int open_isolated(gm_trace_reader *r, gm_err *err)
{
    size_t plen = strlen(r->path);
    if (plen < 1 || plen > MAX_PATH_BYTES)
        return gm_errf(err, GM_EINVAL, "%.200s...: the path is too long", r->path);
    int fd;
    int rc = gm_trace_open_file(r->path, &fd, err);
    if (rc) return rc;
    rc = start_child(r, fd, err);
    close(fd);
    if (rc) return rc;
    struct req q = {REQ_OPEN, (uint32_t)plen, 0, 0, 0};
    struct rep h;
    double deadline;
    if ((rc = transact(r, &q, r->path, &h, &deadline, err))) return rc;
    if (h.status) return recv_error(r, &h, deadline, err);
    char *p = h.len <= MAX_META_BYTES ? malloc(h.len ? h.len : 1) : NULL;
    const char *why = "malformed";
    if (!p || recv_all(r->sock, p, (size_t)h.len, deadline, &why) ||
        meta_get(p, (size_t)h.len, &r->meta) || h.a > GM_TRACE_MAX_EVENTS) {
        free(p);
        return child_failed(r, why, err);
    }
    free(p);
    r->nevents = h.a;
    r->m = &r->meta;
    return GM_OK;
}

static int open_reader(const char *path, int isolated, gm_trace_reader **out, gm_err *err)
{
    if (!out || !path) return gm_errf(err, GM_EINVAL, "gm_trace_open: no path");
    *out = NULL;
    gm_trace_reader *r = calloc(1, sizeof *r);
    if (!r) return gm_errf(err, GM_ENOMEM, "%s: out of memory", path);
    r->pid = -1;
    r->sock = -1;
    r->timeout_s = watchdog_s();
    gm_trace_meta_init(&r->meta);
    r->path = strdup(path);
    int rc = r->path ? GM_OK : gm_errf(err, GM_ENOMEM, "%s: out of memory", path);
    if (!rc && isolated) {
        rc = open_isolated(r, err);
    } else if (!rc && (rc = gm_h5r_open(path, -1, &r->local, err)) == GM_OK) {
        r->m = gm_h5r_meta(r->local);
        r->nevents = gm_h5r_nevents(r->local);
    }
    if (rc) {
        reader_free(r);
        return rc;
    }
    atomic_fetch_add(&open_traces, 1);
    *out = r;
    return GM_OK;
}

int gm_trace_open(const char *path, gm_trace_reader **out, gm_err *err)
{
    /* GMSIM_TRACE_INPROCESS=1: no child, for benchmarks and debuggers only
     * (FORMAT.md, "Isolation") */
    const char *e = getenv("GMSIM_TRACE_INPROCESS");
    return open_reader(path, !(e && !strcmp(e, "1")), out, err);
}

int gm_trace_open_inprocess(const char *path, gm_trace_reader **out, gm_err *err)
{
    return open_reader(path, 0, out, err);
}

void gm_trace_close(gm_trace_reader *r)
{
    if (!r) return;
    atomic_fetch_sub(&open_traces, 1);
    reader_free(r);
}

const gm_trace_meta *gm_trace_meta_get(const gm_trace_reader *r)
{
    return r->m;
}

const char *gm_trace_path(const gm_trace_reader *r)
{
    return r->path;
}

uint64_t gm_trace_nevents(const gm_trace_reader *r)
{
    return r->nevents;
}

uint64_t gm_trace_position(const gm_trace_reader *r)
{
    return r->pos;
}

int gm_trace_rewind(gm_trace_reader *r)
{
    if (!r) return GM_EINVAL;
    r->pos = 0;
    r->prev_t_ns = 0;
    return GM_OK;
}

/* Ask for n rows from pos, the row before having t_ns prev. */
static int ask_read(gm_trace_reader *r, uint64_t pos, uint64_t prev, uint64_t n, gm_err *err)
{
    struct req q = {REQ_READ, 0, pos, prev, n};
    int rc = send_req(r, &q, NULL, err);
    if (rc) return rc;
    r->ahead = 1, r->ahead_pos = pos, r->ahead_prev = prev, r->ahead_n = n;
    return GM_OK;
}

/* n (<= PIECE) events from row pos into buf, from the child, checked.
 * Unless this was the last piece, the next one of the same size is asked
 * for at once, so the child decodes it while the caller simulates. */
static int read_remote(gm_trace_reader *r, uint64_t pos, uint64_t *prev, gm_event *buf, size_t n,
                       gm_err *err)
{
    int rc = GM_OK;
    if (!(r->ahead && r->ahead_pos == pos && r->ahead_prev == *prev && r->ahead_n == n)) {
        rc = drop_ahead(r, err);
        if (!rc) rc = ask_read(r, pos, *prev, n, err);
        if (rc) return rc;
    }
    r->ahead = 0;
    struct rep h;
    double deadline;
    if ((rc = recv_rep(r, REQ_READ, &h, &deadline, err))) return rc;
    if (h.status) return recv_error(r, &h, deadline, err);
    if (h.a != n || h.len != 0 || h.slot > 1) return child_failed(r, "malformed", err);
    /* copy first, then check the copy: the child cannot change what is
     * checked. A sub-piece at a time (160 KiB), so the check reads what the
     * copy just wrote while it is still in the core's cache, not the whole
     * 2.5 MiB piece again from memory. */
    const gm_event *src = r->shm + (size_t)h.slot * PIECE;
    uint64_t p = *prev;
    for (size_t i = 0; i < n; i += CHECK_EVENTS) {
        size_t k = n - i < CHECK_EVENTS ? n - i : CHECK_EVENTS;
        memcpy(buf + i, src + i, k * sizeof *buf);
        if ((rc = gm_trace_check_events(r->path, r->m->version, r->m->n_sites, buf + i, k, pos + i,
                                        &p, err)))
            return rc;
    }
    if (p != h.b) return child_failed(r, "malformed", err);
    *prev = p;
    uint64_t next = pos + n;
    gm_err later; /* a failure here is the next call's to report */
    if (next < r->nevents)
        ask_read(r, next, p, r->nevents - next < n ? r->nevents - next : n, &later);
    return GM_OK;
}

int64_t gm_trace_read(gm_trace_reader *r, gm_event *buf, size_t cap, gm_err *err)
{
    if (!r || (!buf && cap))
        return gm_errf(err, GM_EINVAL, "gm_trace_read: no reader or no buffer");
    uint64_t left = r->nevents - r->pos;
    size_t want = cap < left ? cap : (size_t)left;
    if (want > INT64_MAX) want = INT64_MAX;
    uint64_t prev = r->prev_t_ns;
    int rc = GM_OK;
    if (r->local) {
        rc = gm_h5r_read_at(r->local, r->pos, buf, want, &prev, 1, err);
    } else {
        for (size_t done = 0; !rc && done < want; done += PIECE < want - done ? PIECE : want - done)
            rc = read_remote(r, r->pos + done, &prev, buf + done,
                             want - done < PIECE ? want - done : PIECE, err);
    }
    if (rc) return rc; /* position unchanged */
    r->pos += want;
    r->prev_t_ns = prev;
    return (int64_t)want;
}

/* A whole table from the child: nrows rows of size bytes, malloc'd. */
static int read_table_remote(gm_trace_reader *r, uint32_t kind, size_t size, void **rows, size_t *n,
                             gm_err *err)
{
    *rows = NULL;
    *n = 0;
    struct req q = {kind, 0, 0, 0, 0};
    struct rep h;
    double deadline;
    int rc = transact(r, &q, NULL, &h, &deadline, err);
    if (rc) return rc;
    if (h.status) return recv_error(r, &h, deadline, err);
    if (h.a > GM_TRACE_MAX_TABLE_ROWS || h.len != h.a * size)
        return child_failed(r, "malformed", err);
    void *buf = malloc(h.len ? (size_t)h.len : 1);
    if (!buf) {
        child_failed(r, "malformed", NULL); /* its reply cannot be skipped */
        return gm_errf(err, GM_ENOMEM, "%s: out of memory loading a table (%llu rows)", r->path,
                       (ull)h.a);
    }
    const char *why = "malformed";
    if (recv_all(r->sock, buf, (size_t)h.len, deadline, &why)) {
        free(buf);
        return child_failed(r, why, err);
    }
    if (h.a == 0) free(buf), buf = NULL;
    *rows = buf;
    *n = (size_t)h.a;
    return GM_OK;
}

int gm_trace_read_initial(gm_trace_reader *r, gm_init_row **rows, size_t *n, gm_err *err)
{
    if (r->local) return gm_h5r_read_initial(r->local, rows, n, err);
    void *buf;
    int rc = read_table_remote(r, REQ_INITIAL, sizeof(gm_init_row), &buf, n, err);
    if (!rc) rc = gm_trace_check_initial(r->path, r->m->version, r->m->n_sites, buf, *n, err);
    if (rc) {
        free(buf);
        *rows = NULL, *n = 0;
        return rc;
    }
    *rows = buf;
    return GM_OK;
}

int gm_trace_read_markers(gm_trace_reader *r, gm_marker **rows, size_t *n, gm_err *err)
{
    if (r->local) return gm_h5r_read_markers(r->local, rows, n, err);
    void *buf;
    int rc = read_table_remote(r, REQ_MARKERS, sizeof(gm_marker), &buf, n, err);
    if (!rc) rc = gm_trace_check_markers(r->path, buf, *n, err);
    if (rc) {
        free(buf);
        *rows = NULL, *n = 0;
        return rc;
    }
    *rows = buf;
    return GM_OK;
}

/* The most bytes a /sites blob can hold: every text at its limit. */
#define MAX_SITES_BLOB(n) ((uint64_t)(n) * (GM_SITE_NAME_MAX + GM_SITE_STACK_MAX))

int gm_trace_read_sites(gm_trace_reader *r, gm_sites *out, gm_err *err)
{
    memset(out, 0, sizeof *out);
    char *blob = NULL;
    size_t len = 0, n = 0;
    int rc;
    if (r->local) {
        rc = gm_h5r_read_sites(r->local, &blob, &len, &n, err);
    } else {
        struct req q = {REQ_SITES, 0, 0, 0, 0};
        struct rep h;
        double deadline;
        if ((rc = transact(r, &q, NULL, &h, &deadline, err))) return rc;
        if (h.status) return recv_error(r, &h, deadline, err);
        /* as many rows as the child said at open, within the limits */
        if (h.a != r->m->n_sites || h.len > GM_TRACE_MAX_SITES_BYTES + 2 * h.a ||
            h.len > MAX_SITES_BLOB(h.a) || (h.a && h.len < 2 * h.a))
            return child_failed(r, "malformed", err);
        blob = malloc(h.len ? (size_t)h.len : 1);
        if (!blob) {
            child_failed(r, "malformed", NULL); /* its reply cannot be skipped */
            return gm_errf(err, GM_ENOMEM, "%s: out of memory loading /sites", r->path);
        }
        const char *why = "malformed";
        if (recv_all(r->sock, blob, (size_t)h.len, deadline, &why)) {
            free(blob);
            return child_failed(r, why, err);
        }
        len = (size_t)h.len, n = (size_t)h.a;
    }
    if (rc) return rc;
    if (n != r->m->n_sites) {
        free(blob);
        return gm_errf(err, GM_EIO, "%s: /sites changed while it was read", r->path);
    }
    return gm_trace_sites_parse(r->path, blob, len, n, out, err);
}
