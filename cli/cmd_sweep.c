/*
 * cmd_sweep.c - `gmsim sweep SPEC`: every case of a sweep spec (traces and
 * tenant mixes x devices x allocators x policies; study/SWEEP.md), on a
 * thread pool, and, when the same binary runs under mpirun or srun, over
 * the MPI ranks: rank r runs the pending cases r, r + size, ... on its
 * threads, rank 0 gathers every row and writes the one JSON document and
 * the one HDF5 table (reports/sweep_out.h), the same bytes whatever the
 * number of ranks or threads. MPI is optional at build time (CMake's
 * find_package(MPI), GM_HAVE_MPI), as CUDA is; its calls are in a module
 * of their own (cli/mpi.h), loaded only when a sweep runs over MPI ranks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef GM_HAVE_MPI
#include <dlfcn.h>
#endif

#include "cli.h"
#include "commands.h"
#include "mpi.h"
#include "base/clock.h"
#include "base/units.h"
#include "reports/sweep_out.h"
#include "study/pool.h"
#include "study/sweep.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gmsim sweep [options] -o PREFIX SPEC.json\n"
            "       mpirun -np N gmsim sweep [options] -o PREFIX SPEC.json\n"
            "\n"
            "Simulate every case of a sweep spec: each trace or tenant mix on each device\n"
            "(capacities, --gpu names) under each allocator (with its settings) and each\n"
            "release policy (study/SWEEP.md has the format). Cases run on a thread pool;\n"
            "under mpirun or srun the same command spreads them over the ranks and rank 0\n"
            "writes the results. The results are the same bytes whatever the number of\n"
            "threads or ranks. A case that fails is reported and the others go on.\n"
            "\n"
            "options:\n"
            "  -o, --output PREFIX    write PREFIX.json (gmsim-sweep/1) and PREFIX.h5 (the\n"
            "                         table /cases); required\n"
            "  --threads N            simulations at a time in each process (default: one\n"
            "                         per core, shared by the ranks of a node)\n"
            "  --resume               run only the cases PREFIX.json does not hold as done\n"
            "  --mpi                  start MPI even if no MPI launcher is seen (%s)\n"
            "  --list                 print the cases and exit\n"
            "  -q, --quiet            no progress on stderr\n"
            "  -h, --help             this text\n"
            "\n"
            "Exit status: 0 every case ran, 1 a case failed (the others' results are\n"
            "written) or the spec is wrong, 2 usage.\n"
            "\n"
            "examples:\n"
            "  gmsim sweep -o results/bert spec.json\n"
            "  mpirun -np 8 gmsim sweep --threads 2 -o results/bert spec.json\n",
#ifdef GM_HAVE_MPI
            "this gmsim has MPI"
#else
            "this gmsim was built without MPI"
#endif
    );
}

enum { OPT_THREADS = 1000, OPT_RESUME, OPT_MPI, OPT_LIST };

typedef struct sweep_args {
    const char *spec, *prefix;
    int threads, resume, mpi, list, quiet;
} sweep_args;

static int sweep_opt(void *ctx, int c, const char *arg, gm_err *err)
{
    sweep_args *a = ctx;
    switch (c) {
    case 'h':
        usage(stdout);
        return GM_CLI_DONE;
    case 'q':
        a->quiet = 1;
        return GM_OK;
    case 'o':
        a->prefix = arg;
        return GM_OK;
    case OPT_THREADS:
        return gm_cli_threads(arg, &a->threads, err);
    case OPT_RESUME:
        a->resume = 1;
        return GM_OK;
    case OPT_MPI:
        a->mpi = 1;
        return GM_OK;
    case OPT_LIST:
        a->list = 1;
        return GM_OK;
    case 1:
        if (a->spec) return gm_errf(err, GM_EUSAGE, "one spec at a time ('%s' too)", arg);
        a->spec = arg;
        return GM_OK;
    default:
        return gm_errf(err, GM_EUSAGE, "unexpected option");
    }
}

/* An MPI launcher's environment (Open MPI, PMIx: srun, MPICH/Hydra). */
static int launched_by_mpi(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE",
                                       NULL};
    for (int i = 0; vars[i]; i++)
        if (getenv(vars[i])) return 1;
    return 0;
}

/* The world size the launcher announces, 1 when none. */
static long launcher_size(void)
{
    const char *s = getenv("OMPI_COMM_WORLD_SIZE");
    if (!s) s = getenv("PMI_SIZE");
    if (!s) s = getenv("SLURM_NTASKS");
    return s ? strtol(s, NULL, 10) : 1;
}

typedef struct progress_ctx {
    const gm_sweep_plan *p;
    size_t done, total;
    int rank, size, quiet;
} progress_ctx;

static void progress(void *ctx, const gm_sweep_row *r, double secs)
{
    progress_ctx *x = ctx;
    x->done++;
    if (x->quiet) return;
    char key[GM_SWEEP_KEY], rk[24] = "", b[32];
    gm_sweep_case_key(x->p, r->index, key, sizeof key);
    if (x->size > 1) snprintf(rk, sizeof rk, "rank %d ", x->rank);
    if (r->status == GM_OK)
        fprintf(stderr,
                "gmsim sweep: %s[%zu/%zu] case %u %s: %llu OOM%s, peak reserved %s (%.2f s)\n", rk,
                x->done, x->total, r->index, key, (unsigned long long)r->oom_count,
                r->oom_count == 1 ? "" : "s", gm_fmt_bytes(r->peak_reserved, b, sizeof b), secs);
    else
        fprintf(stderr, "gmsim sweep: %s[%zu/%zu] case %u %s: FAILED: %s\n", rk, x->done, x->total,
                r->index, key, r->error);
}

/* Rank 0 gets every rank's rows (only the ones it ran) into rows[]. */
static int gather(const gm_mpi_ops *mpi, gm_sweep_row *rows, const size_t *mine, size_t n_mine,
                  int rank, int size)
{
    if (size < 2) return GM_OK;
    gm_sweep_row *mine_rows = malloc((n_mine ? n_mine : 1) * sizeof *mine_rows);
    for (size_t k = 0; mine_rows && k < n_mine; k++)
        mine_rows[k] = rows[mine[k]];
    void *all;
    size_t total;
    mpi->gather(mine_rows, (int)(n_mine * sizeof *rows), mine_rows != NULL, rank, size, &all,
                &total);
    const gm_sweep_row *got = all;
    for (size_t k = 0; rank == 0 && k < total / sizeof *rows; k++)
        rows[got[k].index] = got[k];
    free(all);
    free(mine_rows);
    return mine_rows ? GM_OK : GM_ENOMEM;
}

/* Threads for this process: --threads, else the node's cores shared by
 * its ranks. */
static int threads_for(int asked, const gm_mpi_ops *mpi)
{
    if (asked > 0) return asked;
    int cores = gm_default_threads(), local = mpi ? mpi->node_ranks() : 1;
    return cores / local > 0 ? cores / local : 1;
}

#ifdef GM_HAVE_MPI
/* The MPI module (cli/mpi.h): next to this executable (a build tree), or
 * in ../lib/gmsim beside its bin/ (installed); NULL with err set. */
static const gm_mpi_ops *mpi_load(gm_err *err)
{
    char exe[4096], path[4200], why[512] = "";
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash) *slash = '\0';
    static const char *const dirs[] = {"", "/../lib/gmsim"};
    for (size_t i = 0; slash && i < sizeof dirs / sizeof dirs[0]; i++) {
        snprintf(path, sizeof path, "%s%s/%s", exe, dirs[i], GM_MPI_MODULE);
        /* global: Open MPI's own components look up its symbols */
        void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
        if (!h) {
            if (!why[0]) snprintf(why, sizeof why, "%s", dlerror());
            continue;
        }
        const gm_mpi_ops *(*entry)(void);
        *(void **)&entry = dlsym(h, GM_MPI_ENTRY);
        const gm_mpi_ops *ops = entry ? entry() : NULL;
        if (ops && ops->abi == GM_MPI_ABI) return ops;
        snprintf(why, sizeof why, "%.400s is not this gmsim's module", path);
        break;
    }
    gm_errf(err, GM_EINVAL,
            "cannot load this gmsim's MPI module %s (%s); rebuild or reinstall gmsim, or run the "
            "sweep without mpirun (threads)",
            GM_MPI_MODULE, why[0] ? why : "no path to the executable");
    return NULL;
}
#endif

/* The work of every rank; returns the exit code (the same on every rank). */
static int sweep(const sweep_args *a, int rank, int size, const gm_mpi_ops *mpi)
{
    double t0 = gm_monotonic_s();
    gm_err err = {0};
    gm_sweep_plan *p = NULL;
    if (gm_sweep_plan_load(a->spec, &p, &err) != GM_OK)
        return rank == 0 ? gm_cmd_fail("sweep", err.code, err.msg) : 1;
    if (a->list) {
        if (rank == 0)
            for (size_t i = 0; i < p->n_cases; i++) {
                char key[GM_SWEEP_KEY];
                gm_sweep_case_key(p, i, key, sizeof key);
                printf("%zu\t%s\n", i, key);
            }
        gm_sweep_plan_free(p);
        return 0;
    }
    char json_path[4096], h5_path[4096];
    snprintf(json_path, sizeof json_path, "%s.json", a->prefix);
    snprintf(h5_path, sizeof h5_path, "%s.h5", a->prefix);
    gm_sweep_row *rows = calloc(p->n_cases ? p->n_cases : 1, sizeof *rows);
    unsigned char *done = calloc(p->n_cases ? p->n_cases : 1, 1);
    size_t *todo = malloc((p->n_cases ? p->n_cases : 1) * sizeof *todo);
    if (!rows || !done || !todo) {
        free(rows), free(done), free(todo);
        gm_sweep_plan_free(p);
        return gm_cmd_fail("sweep", GM_ENOMEM, "out of memory");
    }
    size_t n_done = 0, n_todo = 0, n_mine = 0;
    int rc = a->resume ? gm_sweep_read_done(p, json_path, rows, done, &n_done, &err) : GM_OK;
    if (rc != GM_OK) {
        free(rows), free(done), free(todo);
        gm_sweep_plan_free(p);
        return rank == 0 ? gm_cmd_fail("sweep", rc, err.msg) : 1;
    }
    for (size_t i = 0; i < p->n_cases; i++)
        if (!done[i]) todo[n_todo++] = i;
    /* rank r: the pending groups r, r + size, ... (a group: the cases of one
     * mix, device and allocator, consecutive in case order, which share runs
     * within a process: study/sweep.c), when there are as many groups as
     * ranks; else the pending cases r, r + size, ... */
    size_t groups = 0, np = p->n_policies ? p->n_policies : 1;
    for (size_t k = 0; k < n_todo; k++)
        groups += !k || todo[k] / np != todo[k - 1] / np;
    int by_group = groups >= (size_t)size;
    for (size_t k = 0, g = 0; k < n_todo; k++) {
        if (k && todo[k] / np != todo[k - 1] / np) g++;
        if ((int)((by_group ? g : k) % (size_t)size) == rank) todo[n_mine++] = todo[k];
    }
    int threads = threads_for(a->threads, mpi);
    if (rank == 0 && !a->quiet)
        fprintf(stderr,
                "gmsim sweep: %zu cases (%zu done before, %zu to run) on %d rank%s x %d "
                "thread%s\n",
                p->n_cases, n_done, n_todo, size, size == 1 ? "" : "s", threads,
                threads == 1 ? "" : "s");
    progress_ctx pc = {.p = p, .total = n_mine, .rank = rank, .size = size, .quiet = a->quiet};
    gm_sweep_run(p, todo, n_mine, threads, rows, progress, &pc);
    rc = gather(mpi, rows, todo, n_mine, rank, size);
    int code = 0;
    if (rank == 0) {
        size_t failed = 0;
        for (size_t i = 0; i < p->n_cases; i++)
            failed += rows[i].status != GM_OK;
        gm_sweep_rank(p, rows);
        if (rc == GM_OK) rc = gm_sweep_write_json(p, rows, json_path, &err);
        if (rc == GM_OK) rc = gm_sweep_write_h5(p, rows, h5_path, &err);
        double dt = gm_monotonic_s() - t0;
        if (rc != GM_OK) {
            code = gm_cmd_fail("sweep", rc, err.msg);
        } else {
            if (!a->quiet)
                fprintf(stderr,
                        "gmsim sweep: %zu cases, %zu failed, %zu resumed; %zu run on %d rank%s "
                        "in %.2f s (%.1f cases/s); wrote %s and %s\n",
                        p->n_cases, failed, n_done, n_todo, size, size == 1 ? "" : "s", dt,
                        dt > 0 ? (double)n_todo / dt : 0.0, json_path, h5_path);
            if (failed) {
                fprintf(stderr, "gmsim sweep: %zu of %zu cases failed (see \"error\" in %s)\n",
                        failed, p->n_cases, json_path);
                code = 1;
            }
        }
    }
    if (size > 1) mpi->bcast_int(&code);
    free(rows);
    free(done);
    free(todo);
    gm_sweep_plan_free(p);
    return code;
}

int cmd_sweep(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"output", required_argument, NULL, 'o'},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"resume", no_argument, NULL, OPT_RESUME},
        {"mpi", no_argument, NULL, OPT_MPI},
        {"list", no_argument, NULL, OPT_LIST},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    sweep_args a = {0};
    gm_err err = {0};
    int rc = gm_cli_parse(argc, argv, "o:qh", longopts, sweep_opt, &a, &err);
    if (rc != GM_OK) return rc == GM_CLI_DONE ? 0 : gm_cmd_fail("sweep", GM_EUSAGE, err.msg);
    if (!a.spec) return gm_cmd_usage("sweep", "no spec given; e.g. gmsim sweep -o out spec.json");
    if (!a.prefix && !a.list)
        return gm_cmd_usage("sweep", "no -o PREFIX: where should the results go?");
    int mpi = a.mpi || launched_by_mpi();
#ifndef GM_HAVE_MPI
    if (mpi && (a.mpi || launcher_size() > 1))
        return gm_cmd_fail("sweep", GM_EINVAL,
                           "this gmsim was built without MPI, so its ranks would each run the "
                           "whole sweep; install Open MPI (libopenmpi-dev openmpi-bin: "
                           "scripts/deps.sh) and rebuild, or run without mpirun (threads)");
    return sweep(&a, 0, 1, NULL);
#else
    (void)launcher_size;
    if (!mpi) return sweep(&a, 0, 1, NULL);
    const gm_mpi_ops *ops = mpi_load(&err);
    if (!ops) return gm_cmd_fail("sweep", err.code, err.msg);
    int rank = 0, size = 1;
    ops->init(&rank, &size);
    rc = sweep(&a, rank, size, ops);
    ops->finalize();
    return rc;
#endif
}
