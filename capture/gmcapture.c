/*
 * gmcapture.c - the launcher: `gmcapture [options] -- CMD ARGS...`.
 *
 * It sets the environment that makes the CUDA driver load libgmcapture.so
 * into CMD (CUDA_INJECTION64_PATH) and lets CUPTI see NVTX calls
 * (NVTX_INJECTION64_PATH = libcupti), runs CMD, forwards signals sent to the
 * launcher, and afterwards checks that a trace was written. When none was,
 * it says why (no driver, library not loadable, CMD never used CUDA or died
 * before its exit handlers) and exits non-zero: CMD's exit code when CMD
 * failed, else 1. CMD always runs, GPU or not.
 *
 * The launcher itself needs neither CUDA nor CUPTI: it probes them with
 * dlopen, so the same binary reports clearly on a machine without a GPU.
 */
#define _GNU_SOURCE /* dladdr, CLOCK_REALTIME_COARSE */
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <glob.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "records.h"
#include "base/err.h"
#include "base/version.h"

#define DEFAULT_OUTPUT "gmcapture-%p.h5"

typedef struct launch {
    const char *output; /* as given */
    char out_abs[PATH_MAX];
    int device; /* -1 = first used */
    const char *kinds;
    int per_tensor;
    int nvtx;
    int quiet;
    char lib[PATH_MAX];        /* libgmcapture.so */
    char cupti[PATH_MAX];      /* libcupti, for NVTX_INJECTION64_PATH */
    char reason[2 * PATH_MAX]; /* why capture cannot work here, "" if it can */
    char claim[PATH_MAX];
} launch;

static volatile sig_atomic_t child_pid;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gmcapture [options] [--] CMD [ARGS...]\n"
            "\n"
            "Runs CMD unmodified and records every GPU allocation and free it makes\n"
            "(CUDA driver level, via CUPTI) into a gmsim trace (HDF5).\n"
            "\n"
            "options:\n"
            "  -o, --output FILE      trace to write; %%p is replaced by the process id\n"
            "                         (default %s). A second process of the same run\n"
            "                         writes FILE with .<pid> before the extension.\n"
            "      --device N         record CUDA device N only (default: the device of\n"
            "                         the first allocation)\n"
            "      --kinds LIST       memory kinds: device, managed, pinned, comma-separated\n"
            "                         (default device)\n"
            "      --torch-per-tensor set PYTORCH_NO_CUDA_MEMORY_CACHING=1, so every PyTorch\n"
            "                         tensor is its own driver allocation (slower program,\n"
            "                         tensor-level trace)\n"
            "      --no-nvtx          do not record NVTX ranges (no phases, no markers)\n"
            "  -q, --quiet            print nothing unless something went wrong\n"
            "  -h, --help             this help\n"
            "      --version          print the version\n"
            "\n"
            "Exit status: CMD's, or 1 when CMD succeeded but no trace was written,\n"
            "2 on a usage error. Environment: GMCAPTURE_LIB overrides the injection\n"
            "library (default: libgmcapture.so next to this program), GMCAPTURE_CUPTI_LIB\n"
            "the CUPTI library used for NVTX. See capture/README.md.\n",
            DEFAULT_OUTPUT);
}

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "gmcapture: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nrun 'gmcapture --help' for usage\n");
    return 2;
}

/* ---------------- environment probes ---------------- */

static int file_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static void find_library(launch *L)
{
    const char *env = getenv("GMCAPTURE_LIB");
    char exe[PATH_MAX];
    if (env && *env) {
        snprintf(L->lib, sizeof L->lib, "%s", env);
        return;
    }
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    L->lib[0] = '\0';
    if (n <= 0) return;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash) *slash = '\0';
    static const char *const rel[] = {"libgmcapture.so", "../lib/libgmcapture.so",
                                      "../lib/gmsim/libgmcapture.so"};
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
        char cand[PATH_MAX + 64];
        snprintf(cand, sizeof cand, "%s/%s", exe, rel[i]);
        if (file_exists(cand) && realpath(cand, L->lib)) return;
    }
    L->lib[0] = '\0';
}

/* Fill L->reason when capture cannot work here; find libcupti for NVTX. */
static void probe(launch *L)
{
    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(L->reason, sizeof L->reason,
                 "the CUDA driver (libcuda.so.1) is not present on this machine (%s), so the "
                 "program ran without GPU capture",
                 e ? e : "not found");
        return;
    }
    dlclose(h);
    find_library(L);
    if (!L->lib[0]) {
        snprintf(L->reason, sizeof L->reason,
                 "the injection library libgmcapture.so was not found next to gmcapture; "
                 "set GMCAPTURE_LIB to its path");
        return;
    }
    h = dlopen(L->lib, RTLD_LAZY | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(L->reason, sizeof L->reason,
                 "cannot load %s (%s); CUPTI (libcupti.so) and the HDF5 library must be "
                 "findable, e.g. through LD_LIBRARY_PATH",
                 L->lib, e ? e : "?");
        return;
    }
    const char *env = getenv("GMCAPTURE_CUPTI_LIB");
    Dl_info info;
    void *sym = dlsym(h, "cuptiGetVersion"); /* resolved in libcupti, a dependency */
    if (env && *env)
        snprintf(L->cupti, sizeof L->cupti, "%s", env);
    else if (sym && dladdr(sym, &info) && info.dli_fname)
        snprintf(L->cupti, sizeof L->cupti, "%s", info.dli_fname);
    dlclose(h);
}

/* ---------------- output files ---------------- */

/* OUT with %p -> '*' and %% -> '%', for glob(3). */
static void out_pattern(const char *out, char *pat, size_t len)
{
    size_t o = 0;
    for (const char *p = out; *p && o + 2 < len; p++) {
        if (p[0] == '%' && (p[1] == 'p' || p[1] == '%')) {
            pat[o++] = p[1] == 'p' ? '*' : '%';
            p++;
        } else {
            pat[o++] = *p;
        }
    }
    pat[o] = '\0';
}

static int newer(const struct stat *st, const struct timespec *t0)
{
    return st->st_mtim.tv_sec > t0->tv_sec ||
           (st->st_mtim.tv_sec == t0->tv_sec && st->st_mtim.tv_nsec >= t0->tv_nsec);
}

/* Number of trace files matching `pat` written since t0; prints them unless quiet. */
static int count_written(const char *pat, const struct timespec *t0, int quiet)
{
    glob_t gl;
    int found = 0;
    if (glob(pat, 0, NULL, &gl) != 0) return 0;
    for (size_t i = 0; i < gl.gl_pathc; i++) {
        struct stat st;
        const char *p = gl.gl_pathv[i];
        if (strstr(p, ".tmp.") || stat(p, &st) != 0 || !newer(&st, t0)) continue;
        found++;
        if (!quiet) fprintf(stderr, "gmcapture: trace %s\n", p);
    }
    globfree(&gl);
    return found;
}

/* Temporary files a capture left behind: it did not finish. */
static int count_partial(const char *pat)
{
    char tmp[PATH_MAX + 16];
    glob_t gl;
    snprintf(tmp, sizeof tmp, "%s.tmp.*", pat);
    if (glob(tmp, 0, NULL, &gl) != 0) return 0;
    int n = (int)gl.gl_pathc;
    globfree(&gl);
    return n;
}

/* "dir/run.h5" -> "dir/run.*.h5": files of the run's other processes. */
static void sibling_pattern(const char *out, char *pat, size_t len)
{
    const char *slash = strrchr(out, '/');
    const char *dot = strrchr(out, '.');
    if (!dot || (slash && dot < slash) || dot == (slash ? slash + 1 : out)) dot = out + strlen(out);
    snprintf(pat, len, "%.*s.*%s", (int)(dot - out), out, dot);
}

/* ---------------- running ---------------- */

static void forward(int sig, siginfo_t *info, void *uc)
{
    (void)uc;
    /* si_code <= 0: sent by a process (kill, sigqueue). A terminal's ^C already
     * reached the child through the process group; do not send it twice. */
    if (child_pid > 0 && info && info->si_code <= 0) kill((pid_t)child_pid, sig);
}

static void install_forwarding(void)
{
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = forward;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        sigaction(sigs[i], &sa, NULL);
}

static int set_env(launch *L)
{
    char num[32];
    char kinds[64];
    uint32_t mask = GMC_KINDS_DEFAULT;
    gm_err e = {0};
    if (L->kinds && gmc_kinds_parse(L->kinds, &mask, &e) != GM_OK) return usage_error("%s", e.msg);
    int ok = setenv("GMCAPTURE_OUTPUT", L->out_abs, 1) == 0 &&
             setenv("GMCAPTURE_KINDS", gmc_kinds_format(mask, kinds, sizeof kinds), 1) == 0 &&
             setenv("GMCAPTURE_NVTX", L->nvtx ? "1" : "0", 1) == 0 &&
             setenv("GMCAPTURE_QUIET", L->quiet ? "1" : "0", 1) == 0;
    if (L->device >= 0) {
        snprintf(num, sizeof num, "%d", L->device);
        ok = ok && setenv("GMCAPTURE_DEVICE", num, 1) == 0;
    } else {
        unsetenv("GMCAPTURE_DEVICE");
    }
    if (L->per_tensor) ok = ok && setenv("PYTORCH_NO_CUDA_MEMORY_CACHING", "1", 1) == 0;
    if (!L->reason[0]) {
        const char *prev = getenv("CUDA_INJECTION64_PATH");
        if (prev && *prev && strcmp(prev, L->lib) != 0)
            fprintf(stderr,
                    "gmcapture: warning: replacing CUDA_INJECTION64_PATH=%s "
                    "(another tool cannot inject at the same time)\n",
                    prev);
        ok = ok && setenv("CUDA_INJECTION64_PATH", L->lib, 1) == 0;
        if (L->nvtx && L->cupti[0]) ok = ok && setenv("NVTX_INJECTION64_PATH", L->cupti, 1) == 0;
    }
    const char *tmpdir = getenv("TMPDIR");
    snprintf(L->claim, sizeof L->claim, "%s/gmcapture-%d.claim",
             tmpdir && *tmpdir ? tmpdir : "/tmp", (int)getpid());
    unlink(L->claim);
    ok = ok && setenv("GMCAPTURE_CLAIM", L->claim, 1) == 0;
    if (!ok) {
        fprintf(stderr, "gmcapture: cannot set the environment: %s\n", strerror(errno));
        return 1;
    }
    return 0;
}

/* Run argv; returns a shell-style status: the exit code, 128+signal, 127 if it could not run. */
static int run(char **argv)
{
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "gmcapture: cannot fork: %s\n", strerror(errno));
        return 127;
    }
    if (pid == 0) {
        execvp(argv[0], argv);
        fprintf(stderr, "gmcapture: cannot run '%s': %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    child_pid = pid;
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            fprintf(stderr, "gmcapture: waitpid: %s\n", strerror(errno));
            return 127;
        }
    }
    child_pid = 0;
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return 1;
}

static int check_output(const launch *L, int status, const struct timespec *t0)
{
    char pat[PATH_MAX], sib[PATH_MAX + 8];
    out_pattern(L->out_abs, pat, sizeof pat);
    int found = count_written(pat, t0, L->quiet);
    if (!strstr(L->out_abs, "%p")) {
        sibling_pattern(pat, sib, sizeof sib);
        found += count_written(sib, t0, L->quiet);
    }
    if (found) return status;
    if (L->reason[0]) {
        fprintf(stderr, "gmcapture: no trace was written: %s\n", L->reason);
    } else {
        int partial = count_partial(pat);
        fprintf(stderr,
                "gmcapture: no trace was written to %s: the program never initialized CUDA, "
                "or it ended without running its exit handlers (killed, crashed, or "
                "os._exit; see any gmcapture[pid] lines above)%s\n",
                L->out_abs,
                partial ? "; an unfinished capture was left as a .tmp.<pid> file next to it" : "");
    }
    if (status == 127) return 127;
    return status ? status : 1;
}

static int make_absolute(launch *L)
{
    if (L->output[0] == '/') {
        if ((size_t)snprintf(L->out_abs, sizeof L->out_abs, "%s", L->output) < sizeof L->out_abs)
            return 0;
    } else {
        char cwd[PATH_MAX];
        if (getcwd(cwd, sizeof cwd) && (size_t)snprintf(L->out_abs, sizeof L->out_abs, "%s/%s", cwd,
                                                        L->output) < sizeof L->out_abs)
            return 0;
    }
    fprintf(stderr, "gmcapture: output path too long: %s\n", L->output);
    return 1;
}

/* Fail before running CMD when the trace could never be written. */
static int check_output_dir(const launch *L)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", L->out_abs);
    char *slash = strrchr(dir, '/');
    if (slash == dir)
        slash[1] = '\0';
    else if (slash)
        *slash = '\0';
    if (access(dir, W_OK | X_OK) == 0) return 0;
    fprintf(stderr, "gmcapture: cannot write the trace into %s: %s; choose another --output\n", dir,
            strerror(errno));
    return 1;
}

static int run_main(int argc, char **argv)
{
    enum { OPT_DEVICE = 256, OPT_KINDS, OPT_PER_TENSOR, OPT_NO_NVTX, OPT_VERSION };
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'},
        {"device", required_argument, NULL, OPT_DEVICE},
        {"kinds", required_argument, NULL, OPT_KINDS},
        {"torch-per-tensor", no_argument, NULL, OPT_PER_TENSOR},
        {"no-nvtx", no_argument, NULL, OPT_NO_NVTX},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, OPT_VERSION},
        {NULL, 0, NULL, 0},
    };
    launch L;
    memset(&L, 0, sizeof L);
    L.output = DEFAULT_OUTPUT;
    L.device = -1;
    L.nvtx = 1;
    opterr = 0;
    int c;
    /* '+': stop at the first non-option, so CMD's own options stay CMD's */
    while ((c = getopt_long(argc, argv, "+:o:qh", opts, NULL)) != -1) {
        char *end;
        long v;
        switch (c) {
        case 'o':
            if (!*optarg) return usage_error("%s", "--output: empty path");
            L.output = optarg;
            break;
        case OPT_DEVICE:
            errno = 0;
            v = strtol(optarg, &end, 10);
            if (errno || *end || end == optarg || v < 0 || v > 1024)
                return usage_error("--device: '%s' is not a device number (0, 1, ...)", optarg);
            L.device = (int)v;
            break;
        case OPT_KINDS:
            L.kinds = optarg;
            break;
        case OPT_PER_TENSOR:
            L.per_tensor = 1;
            break;
        case OPT_NO_NVTX:
            L.nvtx = 0;
            break;
        case 'q':
            L.quiet = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        case OPT_VERSION:
            printf("gmcapture %s\n", GM_VERSION);
            return 0;
        case ':':
            return usage_error("option '%s' needs a value", argv[optind - 1]);
        default:
            return usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind >= argc)
        return usage_error("%s", "no command given: gmcapture [options] -- CMD [ARGS...]");
    if (make_absolute(&L) != 0 || check_output_dir(&L) != 0) return 1;
    probe(&L);
    int rc = set_env(&L);
    if (rc) return rc;
    install_forwarding();
    struct timespec t0;
    /* file times come from the kernel's coarse clock: compare like with like */
    clock_gettime(CLOCK_REALTIME_COARSE, &t0);
    int status = run(argv + optind);
    unlink(L.claim);
    return check_output(&L, status, &t0);
}

/* Whatever was printed (--help, the summary) must reach standard output. */
int main(int argc, char **argv)
{
    return gm_close_stdout("gmcapture", run_main(argc, argv));
}
