/*
 * fake_app.c - a "CUDA program" for the injection test: it calls cuInit
 * (the fake driver then loads CUDA_INJECTION64_PATH) and makes allocations
 * through the fake CUPTI, in the scenario named by argv[1]:
 *   basic    ranges, an iteration mark, 3 allocs / 2 frees over out-of-order
 *            buffers, 3 dropped records; exits normally with one alloc live
 *   sigterm  allocates, then is killed by SIGTERM (the trace must still land)
 *   fork     a forked child exits through exit(): it must not finish the
 *            parent's trace
 *   fork-late  the same, but the child exits after the parent finished: it
 *            must not write into the finished file
 *   nocuda   never calls cuInit
 */
#include <cuda.h>
#include <cupti.h>

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

void fake_cupti_emit_mem(int alloc, uint64_t addr, uint64_t bytes, uint32_t device);
void fake_cupti_emit_marker(uint32_t flags, uint32_t id, const char *name);
void fake_cupti_cut(void);
void fake_cupti_drop(size_t n);

#define MiB (1024ull * 1024ull)

static void nap(void)
{
    struct timespec ts = {0, 30 * 1000000L}; /* a few flush periods of the test */
    nanosleep(&ts, NULL);
}

static void push(uint32_t id, const char *name)
{
    fake_cupti_emit_marker(CUPTI_ACTIVITY_FLAG_MARKER_START, id, name);
}

static void pop(uint32_t id)
{
    fake_cupti_emit_marker(CUPTI_ACTIVITY_FLAG_MARKER_END, id, NULL);
}

static int basic(void)
{
    fake_cupti_emit_marker(CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS, 1, "iteration 0");
    push(2, "forward");
    fake_cupti_emit_mem(1, 0x10000, 1 * MiB, 0);
    fake_cupti_emit_mem(1, 0x20000, 2 * MiB, 0);
    pop(2);
    fake_cupti_cut();
    nap();
    push(3, "backward");
    fake_cupti_emit_mem(0, 0x10000, 1 * MiB, 0);
    fake_cupti_emit_mem(1, 0x30000, 3 * MiB, 1); /* another device: filtered */
    pop(3);
    fake_cupti_cut();
    push(4, "optimizer");
    fake_cupti_emit_mem(1, 0x40000, 4 * MiB, 0);
    fake_cupti_emit_mem(0, 0x40000, 4 * MiB, 0);
    pop(4);
    fake_cupti_drop(3);
    nap();
    return 0; /* 0x20000 stays live */
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "basic";
    if (!strcmp(mode, "nocuda")) return 0;
    if (cuInit(0) != CUDA_SUCCESS) return 3;
    if (!strcmp(mode, "basic")) return basic();
    if (!strcmp(mode, "sigterm")) {
        fake_cupti_emit_mem(1, 0x10000, 1 * MiB, 0);
        fake_cupti_emit_mem(1, 0x20000, 1 * MiB, 0);
        nap();
        raise(SIGTERM);
        return 4; /* not reached */
    }
    if (!strcmp(mode, "fork")) {
        fake_cupti_emit_mem(1, 0x10000, 1 * MiB, 0);
        fake_cupti_cut();
        nap(); /* with a short reorder window the trace file is open by now */
        pid_t pid = fork();
        if (pid == 0) return 0; /* exit() in the child: atexit handlers (HDF5's too) run there */
        int st;
        waitpid(pid, &st, 0);
        fake_cupti_emit_mem(0, 0x10000, 1 * MiB, 0);
        fake_cupti_emit_mem(1, 0x20000, 1 * MiB, 0);
        nap();
        fake_cupti_emit_mem(0, 0x20000, 1 * MiB, 0);
        return 0;
    }
    if (!strcmp(mode, "fork-late")) { /* the child outlives the parent's finish */
        fake_cupti_emit_mem(1, 0x10000, 1 * MiB, 0);
        fake_cupti_cut();
        nap();
        pid_t child = fork();
        if (child == 0) {
            struct timespec ts = {0, 300 * 1000000L};
            nanosleep(&ts, NULL);
            return 0; /* exit(): HDF5's exit handler runs in the child */
        }
        const char *pidfile = getenv("FAKE_APP_CHILD_PID"); /* the test waits for it */
        FILE *pf = pidfile && child > 0 ? fopen(pidfile, "w") : NULL;
        if (pf) {
            fprintf(pf, "%d\n", (int)child);
            fclose(pf);
        }
        fake_cupti_emit_mem(0, 0x10000, 1 * MiB, 0);
        fake_cupti_emit_mem(1, 0x20000, 1 * MiB, 0);
        return 0;
    }
    fprintf(stderr, "fake_app: unknown mode %s\n", mode);
    return 2;
}
