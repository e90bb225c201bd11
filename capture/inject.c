/*
 * inject.c - libgmcapture.so, the CUPTI injection library.
 *
 * The CUDA driver loads the library named by CUDA_INJECTION64_PATH during
 * cuInit and calls its exported InitializeInjection() (CUPTI documentation,
 * "CUPTI injection"; NVIDIA's cupti_trace_injection sample). Record layouts:
 * https://docs.nvidia.com/cupti/13.0.1/api/structCUpti__ActivityMemory4.html
 * and cupti_activity.h of the CUDA 13.0 toolkit. From there:
 *
 *   - CUPTI's Activity API only (no cuptiSubscribe, so PyTorch's profiler,
 *     which subscribes, still works): MEMORY2, MEMORY_POOL and MARKER (NVTX;
 *     CUPTI sees NVTX calls when NVTX_INJECTION64_PATH names libcupti, which
 *     the gmcapture launcher sets).
 *   - Buffers are host memory from malloc, handed to CUPTI on request and
 *     converted on return by records.c; no device memory is used.
 *   - A flush thread calls cuptiActivityFlushAll(0) every GMCAPTURE_FLUSH_MS
 *     and writes every record older than GMCAPTURE_REORDER_MS to the trace.
 *   - atexit, SIGINT and SIGTERM flush (CUPTI_ACTIVITY_FLAG_FLUSH_FORCED, as
 *     cupti_activity.h advises before the end of a session) and finish the
 *     trace, which the writer renames into place only when complete.
 *
 * Environment (set by the gmcapture launcher; see capture/README.md):
 *   GMCAPTURE_OUTPUT      trace path, %p = pid (default gmcapture-%p.h5)
 *   GMCAPTURE_CLAIM       a file the first capturing process creates; later
 *                         processes of the same run write OUT.<pid>.h5 instead
 *   GMCAPTURE_DEVICE      device ordinal to record (default: the first used)
 *   GMCAPTURE_KINDS       device,managed,pinned (default device)
 *   GMCAPTURE_NVTX        0 = do not record NVTX markers
 *   GMCAPTURE_FLUSH_MS    flush period (default 1000)
 *   GMCAPTURE_REORDER_MS  reorder window (default 2000)
 *   GMCAPTURE_QUIET       1 = print nothing unless something went wrong
 *
 * This is the one place in gmsim with process-wide state: CUPTI's callbacks
 * carry no user pointer, and there is one capture per process.
 */
#define _GNU_SOURCE /* pipe2, pthread_timedjoin_np */
#include <cuda.h>
#include <cupti.h>
#include <hdf5.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "session.h"
#include "base/clock.h"
#include "base/version.h"
#include "traces/alloc_conf.h"

#define GMC_EXPORT __attribute__((visibility("default")))
#define BUFFER_BYTES (4u << 20) /* per CUPTI buffer; ~30k memory records  */
#define SIGNAL_WAIT_MS 10000    /* how long a signal waits for the finish */
#define EXIT_JOIN_S 10          /* how long atexit waits for the flusher  */

static struct {
    atomic_int initialized;
    atomic_int finishing;
    pid_t pid; /* the capturing process: forked children must not finish its trace */
    gmc_session *session;
    char path[PATH_MAX];
    char tmp_path[PATH_MAX + 32]; /* the file the writer writes (gm_trace_writer_file) */
    /* The trace file's identity once created: a forked child finds the
     * descriptors to silence by it, even after the parent has renamed the
     * file (a child may run its fork handler only after that). */
    dev_t trace_dev;
    ino_t trace_ino;
    atomic_int trace_known;
    /* Held around every HDF5 call (the flush thread's drains, the finish),
     * and by fork() (atfork_prepare): a child must never be born while
     * another thread is inside the HDF5 library, whose global lock the child
     * would inherit taken, and then wait for forever in HDF5's exit handler. */
    pthread_mutex_t h5_mu;
    int device;
    uint32_t kinds;
    int quiet;
    unsigned flush_ms;
    uint64_t window_ns;
    pthread_t flusher;
    int flusher_started;
    int wake[2]; /* -> flush thread: 'S' = signal, finish; 'Q' = quit */
    int done[2]; /* flush thread -> signal handler: finished */
    struct sigaction old_int, old_term;
    int drain_error_reported;
} g = {.wake = {-1, -1}, .done = {-1, -1}, .h5_mu = PTHREAD_MUTEX_INITIALIZER};

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    char buf[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "gmcapture[%d]: %s\n", (int)getpid(), buf);
}

static const char *cupti_msg(CUptiResult r)
{
    const char *s = NULL;
    if (cuptiGetResultString(r, &s) != CUPTI_SUCCESS || !s) s = "unknown CUPTI error";
    return s;
}

/* ---------------- options ---------------- */

static long env_long(const char *name, long def, long lo, long hi)
{
    const char *v = getenv(name);
    char *end;
    if (!v || !*v) return def;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || *end || x < lo || x > hi) {
        say("ignoring %s=%s (want an integer in %ld..%ld)", name, v, lo, hi);
        return def;
    }
    return x;
}

/* Expand %p (pid) and %% in tmpl into out. */
static int expand_path(const char *tmpl, char *out, size_t len)
{
    size_t o = 0;
    for (const char *p = tmpl; *p; p++) {
        char num[32];
        const char *piece = num;
        if (p[0] == '%' && p[1] == 'p') {
            snprintf(num, sizeof num, "%d", (int)getpid());
            p++;
        } else if (p[0] == '%' && p[1] == '%') {
            snprintf(num, sizeof num, "%%");
            p++;
        } else {
            num[0] = *p;
            num[1] = '\0';
        }
        size_t n = strlen(piece);
        if (o + n >= len) return -1;
        memcpy(out + o, piece, n);
        o += n;
    }
    out[o] = '\0';
    return 0;
}

/* "run.h5" -> "run.<pid>.h5": a second process of one run must not overwrite the first's. */
static void insert_pid(char *path, size_t len)
{
    char tail[PATH_MAX];
    char *slash = strrchr(path, '/');
    char *dot = strrchr(path, '.');
    if (!dot || (slash && dot < slash) || dot == (slash ? slash + 1 : path))
        dot = path + strlen(path);
    snprintf(tail, sizeof tail, "%s", dot);
    snprintf(dot, len - (size_t)(dot - path), ".%d%s", (int)getpid(), tail);
}

static int setup_path(void)
{
    const char *tmpl = getenv("GMCAPTURE_OUTPUT");
    char rel[PATH_MAX];
    if (!tmpl || !*tmpl) tmpl = "gmcapture-%p.h5";
    if (expand_path(tmpl, rel, sizeof rel) != 0) {
        say("GMCAPTURE_OUTPUT is too long");
        return -1;
    }
    const char *claim = getenv("GMCAPTURE_CLAIM");
    if (!strstr(tmpl, "%p") && claim && *claim) {
        int fd = open(claim, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd >= 0)
            close(fd);
        else if (errno == EEXIST)
            insert_pid(rel, sizeof rel);
    }
    if (rel[0] == '/') {
        snprintf(g.path, sizeof g.path, "%s", rel);
        return 0;
    }
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd) ||
        (size_t)snprintf(g.path, sizeof g.path, "%s/%s", cwd, rel) >= sizeof g.path) {
        say("cannot make an absolute path of %s", rel);
        return -1;
    }
    return 0;
}

/* ---------------- trace metadata (first write, outside cuInit) ---------------- */

static char *read_cmdline(void)
{
    FILE *f = fopen("/proc/self/cmdline", "rb");
    char buf[8192];
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    while (n > 0 && buf[n - 1] == '\0')
        n--;
    for (size_t i = 0; i < n; i++)
        if (buf[i] == '\0') buf[i] = ' ';
    buf[n] = '\0';
    return strdup(buf);
}

static int open_trace(void *ctx, int device, gm_trace_writer **w, gm_err *err)
{
    (void)ctx;
    gm_trace_meta m;
    char name[256] = "", created[64], kinds[64], workload[512];
    size_t total = 0;
    int drv = 0, count = 0;
    uint32_t cupti = 0;
    CUdevice dev;
    /* cuInit is a no-op once the program has initialized CUDA (driver API docs). */
    if (cuInit(0) == CUDA_SUCCESS && cuDeviceGetCount(&count) == CUDA_SUCCESS && count > 0) {
        int ord = device >= 0 && device < count ? device : 0;
        if (cuDeviceGet(&dev, ord) == CUDA_SUCCESS) {
            if (cuDeviceGetName(name, (int)sizeof name, dev) != CUDA_SUCCESS) name[0] = '\0';
            if (cuDeviceTotalMem(&total, dev) != CUDA_SUCCESS) total = 0;
        }
    }
    cuDriverGetVersion(&drv);
    cuptiGetVersion(&cupti);
    gm_utc_now(created, sizeof created);
    const char *nocache = getenv("PYTORCH_NO_CUDA_MEMORY_CACHING");
    snprintf(workload, sizeof workload,
             "gmcapture %s: pid %d, device %d, kinds %s, CUDA driver %d.%d, CUPTI API %u%s",
             GM_VERSION, (int)getpid(), device, gmc_kinds_format(g.kinds, kinds, sizeof kinds),
             drv / 1000, (drv % 1000) / 10, cupti,
             nocache && strcmp(nocache, "0") != 0 ? ", PYTORCH_NO_CUDA_MEMORY_CACHING=1" : "");
    /* The allocator settings as the newest PyTorch reads them: the CUDA
     * variable, else PYTORCH_ALLOC_CONF (2.10 on; 2.9's CUDA allocator
     * ignores it). Which one it was goes into `workload`. */
    const char *conf_var = NULL;
    const char *conf = gm_pt_conf_env(GM_TORCH_NEWEST, getenv("PYTORCH_CUDA_ALLOC_CONF"),
                                      getenv("PYTORCH_ALLOC_CONF"), &conf_var);
    if (conf_var && strcmp(conf_var, "PYTORCH_CUDA_ALLOC_CONF")) {
        size_t n = strlen(workload);
        snprintf(workload + n, sizeof workload - n, ", settings from %s (PyTorch 2.10 on)",
                 conf_var);
    }
    char *cmd = read_cmdline();

    gm_trace_meta_init(&m);
    int rc = GM_OK;
    if (gm_trace_meta_set(&m.source, "cupti") || gm_trace_meta_set(&m.device_name, name) ||
        gm_trace_meta_set(&m.created_utc, created) ||
        gm_trace_meta_set(&m.command, cmd ? cmd : "") || gm_trace_meta_set(&m.workload, workload) ||
        gm_trace_meta_set(&m.alloc_conf, conf ? conf : ""))
        rc = gm_errf(err, GM_ENOMEM, "out of host memory");
    m.device_total_bytes = total;
    if (rc == GM_OK) rc = gm_trace_create(g.path, &m, NULL, w, err);
    if (rc == GM_OK) /* where the writer really writes (a symlink is followed) */
        snprintf(g.tmp_path, sizeof g.tmp_path, "%s", gm_trace_writer_file(*w));
    struct stat st;
    if (rc == GM_OK && stat(g.tmp_path, &st) == 0) {
        g.trace_dev = st.st_dev;
        g.trace_ino = st.st_ino;
        atomic_store(&g.trace_known, 1);
    }
    gm_trace_meta_free(&m);
    free(cmd);
    return rc;
}

/* ---------------- CUPTI buffers ---------------- */

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    void *p = NULL;
    /* records must be 8-byte aligned (ACTIVITY_RECORD_ALIGNMENT, cupti_common.h) */
    if (posix_memalign(&p, 8, BUFFER_BYTES) != 0)
        p = NULL; /* CUPTI then drops records and counts them */
    *buffer = p;
    *size = p ? BUFFER_BYTES : 0;
    *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                      size_t valid)
{
    (void)size;
    gmc_recorder *rec = gmc_session_recorder(g.session);
    gmc_recorder_buffer(rec, buffer, valid, cuptiActivityGetNextRecord);
    size_t dropped = 0;
    /* cupti_activity.h: read the dropped count in the completion callback */
    if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS && dropped)
        gmc_recorder_add_dropped(rec, dropped);
    free(buffer);
}

/* ---------------- finishing ---------------- */

static void report(int rc, const gmc_stats *st, const gm_err *e)
{
    if (rc != GM_OK) {
        say("no trace written: %s", e->msg);
        return;
    }
    if (st->dropped)
        say("warning: CUPTI dropped %llu records (recorded in the trace's dropped_records)",
            (unsigned long long)st->dropped);
    if (g.quiet) return;
    say("wrote %s: %llu events, %llu markers, %llu allocations live at exit, "
        "%llu frees of pre-capture allocations, %llu late records, %llu dropped",
        g.path, (unsigned long long)st->events, (unsigned long long)st->markers,
        (unsigned long long)st->live_allocs, (unsigned long long)st->pre_capture_frees,
        (unsigned long long)st->late, (unsigned long long)st->dropped);
}

static void finish_capture(void)
{
    if (atomic_exchange(&g.finishing, 1)) return;
    gmc_stats st;
    gm_err e = {0};
    CUptiResult cr = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    if (cr != CUPTI_SUCCESS)
        say("warning: cuptiActivityFlushAll: %s; the last records may be missing", cupti_msg(cr));
    pthread_mutex_lock(&g.h5_mu);
    int rc = gmc_session_finish(g.session, &st, &e);
    pthread_mutex_unlock(&g.h5_mu);
    report(rc, &st, &e);
}

static void tick(void)
{
    uint64_t now = 0;
    gm_err e = {0};
    if (cuptiGetTimestamp(&now) != CUPTI_SUCCESS) return;
    cuptiActivityFlushAll(0); /* completed buffers only: cheap, no sync */
    uint64_t mark = now > g.window_ns ? now - g.window_ns : 0;
    pthread_mutex_lock(&g.h5_mu);
    int rc = gmc_session_drain(g.session, mark, &e);
    pthread_mutex_unlock(&g.h5_mu);
    if (rc != GM_OK && !g.drain_error_reported) {
        g.drain_error_reported = 1;
        say("no trace will be written: %s", e.msg);
    }
}

static void *flusher_main(void *arg)
{
    (void)arg;
    for (;;) {
        struct pollfd pfd = {.fd = g.wake[0], .events = POLLIN};
        int n = poll(&pfd, 1, (int)g.flush_ms);
        if (n < 0 && errno == EINTR) continue;
        char c = 0;
        if (n > 0 && read(g.wake[0], &c, 1) == 1) {
            if (c == 'Q') return NULL;
            if (c == 'S') {
                finish_capture();
                char d = 'D';
                if (write(g.done[1], &d, 1) < 0) { /* the handler times out instead */
                }
                return NULL;
            }
        }
        if (atomic_load(&g.finishing)) return NULL;
        tick();
    }
}

static void at_exit(void)
{
    if (getpid() != g.pid || atomic_load(&g.finishing)) return;
    if (g.flusher_started) {
        char c = 'Q';
        struct timespec until;
        if (write(g.wake[1], &c, 1) == 1) {
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_sec += EXIT_JOIN_S;
            if (pthread_timedjoin_np(g.flusher, NULL, &until) != 0) {
                say("the flush thread is stuck; no trace written (a partial %s.tmp.%d remains)",
                    g.path, (int)getpid());
                return;
            }
        }
        g.flusher_started = 0;
    }
    finish_capture();
}

/*
 * SIGINT / SIGTERM, installed only where the program left the default action
 * (a program with its own handler, like Python's KeyboardInterrupt, keeps it
 * and reaches atexit on its own). Only async-signal-safe calls: write to the
 * flush thread, poll for its answer, restore the default, re-raise.
 */
static void on_signal(int sig)
{
    int saved = errno;
    if (getpid() == g.pid && g.flusher_started && !atomic_load(&g.finishing)) {
        char c = 'S';
        if (write(g.wake[1], &c, 1) == 1) {
            struct pollfd pfd = {.fd = g.done[0], .events = POLLIN};
            while (poll(&pfd, 1, SIGNAL_WAIT_MS) < 0 && errno == EINTR)
                ;
        }
    }
    sigaction(sig, sig == SIGINT ? &g.old_int : &g.old_term, NULL);
    raise(sig); /* blocked while the handler runs: delivered when it returns */
    errno = saved;
}

static void install_handler(int sig, struct sigaction *old)
{
    struct sigaction sa;
    if (sigaction(sig, NULL, old) != 0 || old->sa_handler != SIG_DFL ||
        (old->sa_flags & SA_SIGINFO))
        return;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(sig, &sa, NULL);
}

/*
 * In a forked child, HDF5's own exit handler would flush the trace file the
 * child inherited - writing the parent's stale metadata into the parent's
 * file. The child points that descriptor at /dev/null instead, finding it
 * by the file's device and inode (the parent may already have renamed the
 * file when a busy machine lets the child run this handler). Only
 * async-signal-safe calls: the parent may be multi-threaded.
 */
static void atfork_prepare(void)
{
    pthread_mutex_lock(&g.h5_mu);
}

static void atfork_parent(void)
{
    pthread_mutex_unlock(&g.h5_mu);
}

static void atfork_child(void)
{
    pthread_mutex_unlock(&g.h5_mu); /* taken by this thread in atfork_prepare */
    struct stat tmp, st;
    char buf[4096];
    ssize_t n;
    if (atomic_load(&g.trace_known)) {
        tmp.st_dev = g.trace_dev;
        tmp.st_ino = g.trace_ino;
    } else if (stat(g.tmp_path, &tmp) != 0) {
        return; /* not created yet */
    }
    int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
    int dir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    while (nul >= 0 && dir >= 0 && (n = getdents64(dir, buf, sizeof buf)) > 0) {
        for (ssize_t off = 0; off < n;) {
            const struct dirent64 *d = (const struct dirent64 *)(buf + off);
            int fd = 0;
            for (const char *c = d->d_name; *c >= '0' && *c <= '9'; c++)
                fd = fd * 10 + (*c - '0');
            if (d->d_name[0] >= '0' && d->d_name[0] <= '9' && fd != dir && fd != nul &&
                fstat(fd, &st) == 0 && st.st_dev == tmp.st_dev && st.st_ino == tmp.st_ino)
                dup2(nul, fd);
            off += d->d_reclen;
        }
    }
    if (dir >= 0) close(dir);
    if (nul >= 0) close(nul);
}

static int start_flusher(void)
{
    sigset_t block, old;
    if (pipe2(g.wake, O_CLOEXEC) != 0 || pipe2(g.done, O_CLOEXEC) != 0) return -1;
    /* the flusher must never run the signal handler: it would wait for itself */
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    int rc = pthread_create(&g.flusher, NULL, flusher_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) return -1;
    g.flusher_started = 1;
    return 0;
}

/* ---------------- entry point ---------------- */

static int enable(CUpti_ActivityKind kind, const char *what)
{
    CUptiResult r = cuptiActivityEnable(kind);
    if (r != CUPTI_SUCCESS) say("cannot record %s: cuptiActivityEnable: %s", what, cupti_msg(r));
    return r == CUPTI_SUCCESS ? 0 : -1;
}

static int setup(void)
{
    gm_err e = {0};
    uint64_t t0 = 0;
    CUptiResult r;
    const char *kinds = getenv("GMCAPTURE_KINDS");
    g.kinds = GMC_KINDS_DEFAULT;
    if (kinds && *kinds && gmc_kinds_parse(kinds, &g.kinds, &e) != GM_OK) {
        say("%s", e.msg);
        return -1;
    }
    g.device = (int)env_long("GMCAPTURE_DEVICE", -1, -1, 1 << 20);
    g.quiet = (int)env_long("GMCAPTURE_QUIET", 0, 0, 1);
    g.flush_ms = (unsigned)env_long("GMCAPTURE_FLUSH_MS", 1000, 10, 600000);
    g.window_ns = (uint64_t)env_long("GMCAPTURE_REORDER_MS", 2000, 0, 3600000) * 1000000ull;
    if (setup_path() != 0) return -1;
    snprintf(g.tmp_path, sizeof g.tmp_path, "%s.tmp.%d", g.path, (int)g.pid);
    if ((r = cuptiGetTimestamp(&t0)) != CUPTI_SUCCESS) {
        say("cuptiGetTimestamp: %s", cupti_msg(r));
        return -1;
    }
    gmc_opts opts = {.device = g.device, .kinds = g.kinds, .t0_ns = t0};
    if (gmc_session_create(&opts, open_trace, NULL, &g.session, &e) != GM_OK) {
        say("%s", e.msg);
        return -1;
    }
    if ((r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed)) != CUPTI_SUCCESS) {
        say("cuptiActivityRegisterCallbacks: %s", cupti_msg(r));
        return -1;
    }
    if (enable(CUPTI_ACTIVITY_KIND_MEMORY2, "allocations") != 0) return -1;
    enable(CUPTI_ACTIVITY_KIND_MEMORY_POOL, "memory pools");
    if (env_long("GMCAPTURE_NVTX", 1, 0, 1)) enable(CUPTI_ACTIVITY_KIND_MARKER, "NVTX markers");
    if (start_flusher() != 0) {
        say("cannot start the flush thread: %s", strerror(errno));
        return -1;
    }
    /* HDF5 registers an exit handler that closes every open file when it is
     * first initialized. Initialize it now, before ours is registered: exit
     * handlers run in reverse order, so ours finishes the trace first. */
    if (H5open() < 0) {
        say("cannot initialize the HDF5 library");
        return -1;
    }
    atexit(at_exit);
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
    install_handler(SIGINT, &g.old_int);
    install_handler(SIGTERM, &g.old_term);
    return 0;
}

GMC_EXPORT int InitializeInjection(void)
{
    if (atomic_exchange(&g.initialized, 1)) return 1;
    g.pid = getpid();
    if (setup() != 0) {
        say("capture disabled: this process runs without recording; no trace will be written");
        return 0;
    }
    return 1;
}
