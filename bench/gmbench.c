/*
 * gmbench.c - throughput and memory of the simulator (DESIGN §8). Timing is
 * measured here, by hand or by bench/run.sh, never asserted by a test.
 *
 *   gmbench mem EVENTS [POLICY]   generate a synthetic BERT trace of about
 *                                 EVENTS events into memory, then simulate it
 *                                 (engine + pytorch allocator + policy +
 *                                 metrics; no file I/O): events/s
 *   gmbench fixed EVENTS [POLICY] the same with every iteration of one shape
 *                                 (`gmsim gen bert --no-jitter`: no dynamic
 *                                 padding), which repeat exactly and are
 *                                 fast-forwarded (sim/ffwd.h)
 *   gmbench file TRACE [POLICY]   simulate a trace file end to end (HDF5
 *                                 reading included): events/s and peak RSS
 *   gmbench tenants K EVENTS [POLICY]
 *                                 K copies of an in-memory BERT trace of about
 *                                 EVENTS / K events each on one device (copy i
 *                                 starts i ms later): ns per event
 *   gmbench cached N EVENTS [POLICY]
 *                                 N isolated free 512 B blocks cached in the
 *                                 small pool (2N allocations, every other one
 *                                 freed) before an in-memory BERT trace of
 *                                 about EVENTS events: ns per event
 *   gmbench compare TRACE         `gmsim compare` of the five policies on 1
 *                                 and 2 threads: wall time (best of 3), and
 *                                 what each policy's simulation takes alone
 *                                 (CPU), with the speed-up those allow
 *   gmbench fit TRACE             `gmsim fit` of the five policies: per
 *                                 policy the simulations and the events they
 *                                 processed, in full-run equivalents; the
 *                                 CPU of this process (not the trace
 *                                 reader's, GMBENCH_NO_PRELOAD=1)
 *   gmbench read TRACE            read every event and nothing else: the
 *                                 reader's own events/s
 *   gmbench packed TRACE          the trace kept packed in memory, as a
 *                                 study keeps a larger one (study/preload.h):
 *                                 bytes an event, ns an event to pack and to
 *                                 decode it
 *   gmbench unpickle SNAPSHOT     a PyTorch memory snapshot's two steps
 *                                 before a trace is written: parsing the
 *                                 pickle (traces/unpickle.h: MB/s, the
 *                                 tree's size) and importing its tree
 *                                 (traces/import_torch.h: entries/s)
 *   gmbench period CALLS          the predictive policy's period estimate
 *                                 (policies/period.h) on a full window: ns
 *                                 a call with scalar, SSE2 and AVX
 *                                 correlations (the same period each)
 *
 * The trace reader runs in its child process (traces/trace_isolate.c)
 * unless GMSIM_TRACE_INPROCESS=1: run both to see what isolation costs.
 *
 * In-memory traces get their allocation ids (traces/event_ids.h) as a
 * written trace has them; GMBENCH_BY_ADDRESS=1 leaves them out, so the
 * engine pairs allocations by hashing addresses (as for traces written
 * before ids existed).
 *
 * Runs keep no PyTorch memory_stats(), as `gmsim run` without --json,
 * --html or --summary (sim/engine.h, no_device_stats); GMBENCH_STATS=1
 * keeps them, as those do.
 *
 * Iterations that repeat one already simulated are fast-forwarded
 * (sim/ffwd.h), as in every command; the line says how many events were.
 * GMBENCH_NO_FF=1 simulates every event (the per-event cost, and what
 * traces that never repeat get).
 *
 * Each figure is the best of 3 runs of the simulating thread's CPU time
 * (CLOCK_THREAD_CPUTIME_ID): the machines are shared and noisy, and CPU
 * time does not count the time other processes take.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#include "base/clock.h"
#include "policies/period.h"
#include "sim/engine.h"
#include "study/compare.h"
#include "study/prep.h"
#include "study/same_run.h"
#include "study/fit.h"
#include "study/policy_list.h"
#include "study/pool.h"
#include "study/preload.h"
#include "study/simulate.h"
#include "traces/event_ids.h"
#include "traces/gen_bert.h"
#include "traces/import_torch.h"
#include "traces/packed.h"
#include "traces/unpickle.h"

typedef struct vec {
    gm_event *v;
    size_t n, cap;
} vec;

static int sink(void *ctx, const gm_event *ev, size_t n, gm_err *err)
{
    vec *x = ctx;
    if (x->n + n > x->cap) {
        size_t cap = (x->n + n) * 2;
        gm_event *v = realloc(x->v, cap * sizeof *v);
        if (!v) return gm_errf(err, GM_ENOMEM, "out of memory generating the benchmark trace");
        x->v = v;
        x->cap = cap;
    }
    memcpy(x->v + x->n, ev, n * sizeof *ev);
    x->n += n;
    return GM_OK;
}

static long rss_mib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024;
}

static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* GMBENCH_STATS=1: the runs keep PyTorch's memory_stats(). */
static int stats_kept(void)
{
    const char *v = getenv("GMBENCH_STATS");
    return v && *v && strcmp(v, "0");
}

/* GMBENCH_NO_FF=1: every event simulated (no fast-forward). */
static int no_ff(void)
{
    const char *v = getenv("GMBENCH_NO_FF");
    return v && *v && strcmp(v, "0");
}

/* What fast-forward did in a run, all tenants: events, cycles, records
 * made and dropped. */
static uint64_t ff_events(const gm_sim_result *r, uint64_t *cycles, uint64_t *recs,
                          uint64_t *dropped)
{
    uint64_t n = 0;
    *cycles = *recs = *dropped = 0;
    for (size_t i = 0; i < r->n_tenants; i++) {
        n += r->t[i].fast_forwarded_events;
        *cycles += r->t[i].ff_cycles;
        *recs += r->t[i].ff_records;
        *dropped += r->t[i].ff_records_dropped;
    }
    return n;
}

/* GMBENCH_NO_STRETCH=1: several tenants take one event at a time in time
 * order (gm_sim_config.no_stretch). */
static int cfg_no_stretch(void)
{
    const char *v = getenv("GMBENCH_NO_STRETCH");
    return v && *v == '1';
}

/* Best of 3: the smallest CPU time of the simulating thread. */
static int simulate(gm_tenant_spec *spec, size_t n, uint64_t capacity, const char *policy,
                    double *best_s, gm_sim_result **last)
{
    gm_sim_config cfg = {0};
    static const gm_latency lat = GM_LATENCY_DEFAULT;
    cfg.tenants = spec;
    cfg.n_tenants = n;
    cfg.policy = policy;
    cfg.capacity_bytes = capacity;
    cfg.overhead_bytes = GM_DEFAULT_OVERHEAD;
    cfg.latency = lat;
    cfg.no_device_stats = !stats_kept();
    cfg.no_fast_forward = no_ff();
    cfg.no_stretch = cfg_no_stretch();
    *best_s = 0;
    for (int i = 0; i < 3; i++) {
        gm_err err = {0};
        gm_sim_result *r;
        double t0 = thread_cpu_s();
        if (gm_simulate(&cfg, &r, &err) != GM_OK) {
            fprintf(stderr, "gmbench: %s\n", err.msg);
            return 1;
        }
        double s = thread_cpu_s() - t0;
        if (i == 0 || s < *best_s) *best_s = s;
        if (*last) gm_sim_result_free(*last);
        *last = r;
    }
    return 0;
}

/* Read every event of path, best of 3: events/s. */
static int read_only(const char *path)
{
    static gm_event buf[GM_TRACE_CHUNK_EVENTS];
    double best = 0;
    uint64_t total = 0;
    for (int i = 0; i < 3; i++) {
        gm_err err = {0};
        gm_trace_reader *r;
        double t0 = gm_monotonic_s();
        if (gm_trace_open(path, &r, &err) != GM_OK) {
            fprintf(stderr, "gmbench: %s\n", err.msg);
            return 1;
        }
        int64_t n;
        total = 0;
        while ((n = gm_trace_read(r, buf, GM_TRACE_CHUNK_EVENTS, &err)) > 0)
            total += (uint64_t)n;
        gm_trace_close(r);
        if (n < 0) {
            fprintf(stderr, "gmbench: %s\n", err.msg);
            return 1;
        }
        double rate = (double)total / (gm_monotonic_s() - t0);
        if (rate > best) best = rate;
    }
    const char *e = getenv("GMSIM_TRACE_INPROCESS");
    printf("mode read (%s reader): %llu events, best of 3: %.1f M events/s, peak RSS %ld MiB\n",
           e && !strcmp(e, "1") ? "in-process" : "isolated", (unsigned long long)total, best / 1e6,
           rss_mib());
    return 0;
}

/* 0 when GMBENCH_NO_PRELOAD is set (and not "0"): a study's runs then read
 * the trace from the file each, as before study/preload.h. */
static int preload_wanted(void)
{
    const char *np = getenv("GMBENCH_NO_PRELOAD");
    return !(np && *np && strcmp(np, "0"));
}

/* The trace kept packed (traces/packed.h, what study/preload.h keeps of a
 * larger trace): its bytes an event, and the thread's CPU per event to
 * pack it and to decode it in a run's chunks, best of 3. */
static int bench_packed(const char *path)
{
    gm_err err = {0};
    gm_trace_reader *r;
    if (gm_trace_open(path, &r, &err) != GM_OK) {
        fprintf(stderr, "gmbench: %s\n", err.msg);
        return 1;
    }
    uint64_t n = gm_trace_nevents(r), done = 0;
    gm_event *ev = malloc((n ? n : 1) * sizeof *ev);
    static gm_event buf[GM_TRACE_CHUNK_EVENTS];
    int64_t k = 1;
    while (ev && done < n && (k = gm_trace_read(r, ev + done, n - done, &err)) > 0)
        done += (uint64_t)k;
    gm_trace_close(r);
    if (!ev || k <= 0) {
        fprintf(stderr, "gmbench: %s\n", ev ? err.msg : "out of memory");
        free(ev);
        return 1;
    }
    double enc = 0, dec = 0;
    uint64_t bytes = 0, check = 0;
    for (int i = 0; i < 3; i++) {
        double t0 = thread_cpu_s();
        gm_packed *p = gm_packed_new(UINT64_MAX);
        for (uint64_t at = 0; p && at < n; at += GM_TRACE_CHUNK_EVENTS)
            if (gm_packed_append(p, ev + at,
                                 n - at < GM_TRACE_CHUNK_EVENTS ? n - at : GM_TRACE_CHUNK_EVENTS)) {
                gm_packed_free(p);
                p = NULL;
            }
        if (!p) {
            fprintf(stderr, "gmbench: out of memory\n");
            free(ev);
            return 1;
        }
        gm_packed_finish(p);
        double t1 = thread_cpu_s();
        gm_packed_cursor *c = gm_packed_cursor_new(p);
        size_t got;
        while (c && (got = gm_packed_read(c, buf, GM_TRACE_CHUNK_EVENTS)) > 0)
            check += buf[got - 1].t_ns; /* (read: the loop is not dropped) */
        double t2 = thread_cpu_s();
        gm_packed_cursor_free(c);
        bytes = gm_packed_bytes(p);
        gm_packed_free(p);
        if (!i || t1 - t0 < enc) enc = t1 - t0;
        if (!i || t2 - t1 < dec) dec = t2 - t1;
    }
    free(ev);
    printf("mode packed: %llu events, %.2f bytes an event; best of 3: packing %.1f ns an event, "
           "decoding %.1f ns an event (%llu)\n",
           (unsigned long long)n, n ? (double)bytes / (double)n : 0, n ? enc * 1e9 / (double)n : 0,
           n ? dec * 1e9 / (double)n : 0, (unsigned long long)(check % 1000));
    return 0;
}

/* A BERT trace of about `want` events, appended to ev. */
static int bert(vec *ev, double want, int fixed)
{
    gm_bert_params p;
    gm_bert_defaults(&p);
    if (fixed) p.jitter = 0;
    p.iterations = 1;
    gm_err err = {0};
    gm_bert_stats st;
    vec probe = {0};
    if (gm_bert_generate(&p, sink, NULL, &probe, &st, &err) != GM_OK) {
        fprintf(stderr, "gmbench: %s\n", err.msg);
        return 1;
    }
    free(probe.v);
    p.iterations = (int)(want / (double)st.events) + 1;
    if (gm_bert_generate(&p, sink, NULL, ev, &st, &err) != GM_OK) {
        fprintf(stderr, "gmbench: %s\n", err.msg);
        return 1;
    }
    return 0;
}

/* 2n allocations of 512 B, then every other one freed: n free blocks that
 * cannot merge (each between two live ones), all at time 0. */
static int cached_prefix(vec *ev, size_t n)
{
    const uint64_t base = 1ull << 62; /* away from the generator's addresses */
    gm_event e = {.op = GM_OP_ALLOC, .size = 512, .category = GM_CAT_TEMPORARY};
    gm_err err = {0};
    for (size_t i = 0; i < 2 * n; i++) {
        e.addr = base + 512 * i;
        if (sink(ev, &e, 1, &err)) return 1;
    }
    e.op = GM_OP_FREE;
    for (size_t i = 0; i < 2 * n; i += 2) {
        e.addr = base + 512 * i;
        if (sink(ev, &e, 1, &err)) return 1;
    }
    return 0;
}

static const char *const policies[] = {"pytorch", "lru", "priority", "predictive", "oracle"};
#define N_POLICIES 5

static void file_config(gm_sim_config *cfg, gm_tenant_spec *spec, const char *path)
{
    static const gm_latency lat = GM_LATENCY_DEFAULT;
    *spec = (gm_tenant_spec){.path = path, .repeat = 1};
    memset(cfg, 0, sizeof *cfg);
    cfg->tenants = spec;
    cfg->n_tenants = 1;
    cfg->overhead_bytes = GM_DEFAULT_OVERHEAD;
    cfg->latency = lat;
    cfg->no_device_stats = !stats_kept(); /* as the commands without --json */
    cfg->no_fast_forward = no_ff();
}

/* compare: wall time on 1 and 2 threads; each simulation's CPU time alone
 * (and its preparation's, study/prep.h), and the 2-thread wall time those
 * give as compare splits its jobs between the threads (the runs it makes,
 * not those it takes from pytorch's, and the preparations, by the
 * policies' cost estimates, study/pool.h), and with the best split of the
 * times measured. As the command
 * does, a trace of up to GM_PRELOAD_MAX_EVENTS events is read into memory
 * once (study/preload.h) and every run replays it from there;
 * GMBENCH_NO_PRELOAD=1 reads it from the file for each run. */
static int bench_compare(const char *path)
{
    gm_sim_config cfg;
    gm_tenant_spec spec;
    file_config(&cfg, &spec, path);
    cfg.capacity_bytes = 80 * GM_GiB;
    gm_preload pre = {0}; /* (all zero: nothing to free) */
    gm_err perr = {0};
    /* as gmsim compare: a larger trace stays on disk (cli/cmd_compare.c) */
    if (preload_wanted() &&
        gm_preload_config(&cfg, &pre, GM_PRELOAD_MAX_EVENTS, 0, &perr) != GM_OK) {
        fprintf(stderr, "gmbench: %s\n", perr.msg);
        return 1;
    }
    /* each run's CPU time alone, and of the part a job of its own makes
     * ahead on two threads (study/prep.h: the oracle's future), best of
     * 3; the jobs compare makes of them (a run it takes from pytorch's is
     * none), with their estimated costs (study/pool.h: a preparation its
     * share of its run's) */
    double cpu[N_POLICIES], total = 0, cj[2 * N_POLICIES], ej[2 * N_POLICIES];
    double *est = gm_policy_spec_costs((char *const *)policies, N_POLICIES, 1);
    int jobs = 0;
    gm_sim_result *lead = NULL; /* pytorch's: lru's and priority's where it is theirs */
    if (!est) return 1;
    for (int i = 0; i < N_POLICIES; i++) {
        gm_sim_result *r = NULL;
        gm_tenant_spec one = cfg.tenants[0];
        if (simulate(&one, 1, cfg.capacity_bytes, policies[i], &cpu[i], &r)) return 1;
        printf("  %-10s %.3f s CPU alone", policies[i], cpu[i]);
        if (i > 0 && lead && gm_same_run(lead, policies[i])) {
            printf(" (compare takes pytorch's run)\n");
            gm_sim_result_free(r);
            continue;
        }
        if (i == 0)
            lead = r;
        else
            gm_sim_result_free(r);
        total += cpu[i];
        gm_sim_config pc = cfg;
        pc.policy = policies[i];
        double share = 0, prep = 0;
        if (gm_prep_wanted(&pc, 0, &share)) {
            for (int rep = 0; rep < 3; rep++) {
                gm_prep *p = gm_prep_new(&pc, 0);
                if (!p) return 1;
                double t0 = thread_cpu_s();
                gm_prep_make(p);
                double sp = thread_cpu_s() - t0;
                gm_prep_free(p);
                if (!rep || sp < prep) prep = sp;
            }
            printf(", %.3f s of it its preparation", prep);
            cj[jobs] = prep;
            ej[jobs++] = est[i] * share;
        }
        printf("\n");
        cj[jobs] = cpu[i] - prep;
        ej[jobs++] = est[i] * (1 - share);
    }
    free(est);
    gm_sim_result_free(lead);
    /* compare's split of the jobs between 2 threads, planned by the
     * estimates, and the best split of the CPU times measured here: what
     * the 2-thread wall time can be */
    double busy[2] = {0, 0};
    int share[2 * N_POLICIES];
    gm_pool_plan((size_t)jobs, ej, 2, share);
    for (int k = 0; k < jobs; k++)
        busy[share[k]] += cj[k];
    double span = busy[0] > busy[1] ? busy[0] : busy[1];
    double best = gm_pool_plan((size_t)jobs, cj, 2, share);
    double wall[3] = {0, 0, 0};
    size_t shared = 0;
    for (int threads = 1; threads <= 2; threads++)
        for (int rep = 0; rep < 3; rep++) {
            gm_compare *c = NULL;
            gm_err err = {0};
            double t0 = gm_monotonic_s();
            if (gm_compare_run(&cfg, (char *const *)policies, N_POLICIES, threads, &c, &err)) {
                fprintf(stderr, "gmbench: %s\n", err.msg);
                return 1;
            }
            double w = gm_monotonic_s() - t0;
            if (!rep || w < wall[threads]) wall[threads] = w;
            shared = c->n_shared;
            gm_compare_free(c);
        }
    printf("mode compare: 5 policies, %s, %zu of them another's run; best of 3 wall: 1 thread "
           "%.3f s, 2 threads %.3f s: %.2fx; the runs it makes, from their CPU times alone: "
           "%.3f s in all, "
           "%.3f s on 2 threads as compare splits them: %.2fx (the best split: %.3f s, %.2fx)\n",
           cfg.tenants[0].events ? "from memory" : "from the file", shared, wall[1], wall[2],
           wall[1] / wall[2], total, span, total / span, best, total / best);
    gm_preload_free(&pre);
    return 0;
}

static int bench_fit(const char *path)
{
    gm_sim_config cfg;
    gm_tenant_spec spec;
    file_config(&cfg, &spec, path);
    gm_fit *f = NULL;
    gm_err err = {0};
    double t0 = thread_cpu_s();
    /* as gmsim fit: the trace in memory, packed when large (study/preload.h);
     * GMBENCH_NO_PRELOAD=1 reads it from the file for each run */
    gm_preload pre = {0};
    if (preload_wanted() &&
        gm_preload_config(&cfg, &pre, GM_PRELOAD_MAX_EVENTS, GM_PRELOAD_MAX_PACKED_BYTES, &err)) {
        fprintf(stderr, "gmbench: %s\n", err.msg);
        return 1;
    }
    if (gm_fit_capacity(&cfg, (char *const *)policies, N_POLICIES, 1, 0, &f, &err)) {
        fprintf(stderr, "gmbench: %s\n", err.msg);
        gm_preload_free(&pre);
        return 1;
    }
    double s = thread_cpu_s() - t0;
    gm_preload_free(&pre);
    gm_sim_result *r = NULL;
    double one;
    gm_tenant_spec probe = spec;
    if (simulate(&probe, 1, 80 * GM_GiB, "pytorch", &one, &r)) return 1;
    uint64_t n = r->events;
    gm_sim_result_free(r);
    printf("mode fit: %.3f s CPU for 5 policies on 1 thread (one pytorch run: %.3f s)\n", s, one);
    for (size_t i = 0; i < f->n; i++)
        printf("  %-10s %2u runs (%u another policy's), %.2f full-run equivalents simulated "
               "(%llu events), fits at %.2f GiB\n",
               f->e[i].spec, f->e[i].runs, f->e[i].shared_runs,
               (double)f->e[i].events_simulated / (double)n,
               (unsigned long long)f->e[i].events_simulated,
               (double)f->e[i].capacity / (double)GM_GiB);
    gm_fit_free(f);
    return 0;
}

/* unpickle: best of 3 (CPU time) of pkl_load_file and of
 * gm_torch_import_value on its tree, as `gmsim import` runs them. */
static int bench_unpickle(const char *path)
{
    double parse = 0, imp = 0;
    size_t tree = 0, entries = 0;
    for (int i = 0; i < 3; i++) {
        gm_err err = {0};
        pkl_doc *d = NULL;
        gm_torch_import *t = NULL;
        gm_torch_opts o = {.name = path, .command = "gmbench", .device = -1};
        double t0 = thread_cpu_s();
        if (pkl_load_file(path, NULL, &d, &err) == GM_OK) {
            double t1 = thread_cpu_s();
            if (gm_torch_import_value(pkl_root(d), &o, &t, &err) == GM_OK) {
                double t2 = thread_cpu_s();
                if (!i || t1 - t0 < parse) parse = t1 - t0;
                if (!i || t2 - t1 < imp) imp = t2 - t1;
                tree = pkl_doc_bytes(d);
                entries = 0;
                for (size_t k = 0; k < t->n; k++)
                    entries += t->dev[k].n_entries;
                gm_torch_import_free(t);
            }
        }
        pkl_free(d);
        if (err.code) {
            fprintf(stderr, "gmbench: %s\n", err.msg);
            return 1;
        }
    }
    struct stat st;
    double mb = stat(path, &st) ? 0 : (double)st.st_size / 1e6;
    printf("mode unpickle: %.1f MB, %zu trace entries, best of 3 (CPU): parse %.3f s (%.0f MB/s, "
           "tree %.1f MiB), import %.3f s (%.2f M entries/s), peak RSS %ld MiB\n",
           mb, entries, parse, mb / parse, (double)tree / (double)GM_MiB, imp,
           (double)entries / imp / 1e6, rss_mib());
    return 0;
}

static int usage(void)
{
    fprintf(stderr,
            "usage: gmbench mem|fixed EVENTS [POLICY] | gmbench file TRACE [POLICY] |\n"
            "       gmbench tenants K EVENTS [POLICY] | gmbench cached N EVENTS [POLICY] |\n"
            "       gmbench compare TRACE | gmbench fit TRACE | gmbench read TRACE |\n"
            "       gmbench packed TRACE | gmbench unpickle SNAPSHOT | gmbench period CALLS\n");
    return 2;
}

/* period: gm_period_lag (policies/period.h), as the predictive policy
 * calls it every 16 or 256 samples, on a full window of 1024 samples shaped
 * like allocated bytes (a sawtooth of 37.5 samples around 4 GB, with
 * noise): best of 3 rounds of `calls` calls, in ns a call, for each width
 * the correlations may use (gm_period_vectors); every width must find the
 * same period. */
static int bench_period(long calls)
{
    if (calls < 1) return usage();
    gm_period_work *w = malloc(sizeof *w);
    static double x[GM_PERIOD_WIN];
    if (!w) return 1;
    uint64_t seed = 42;
    for (size_t i = 0; i < GM_PERIOD_WIN; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = 4e9 + 1e9 * fmod((double)i, 37.5) / 37.5 + 1e8 * (double)(seed >> 40) / 16777216.0;
    }
    static const char *const names[] = {"scalar", "SSE2", "AVX where the CPU has it"};
    double lag0 = 0;
    int rc = 0;
    for (int vec = 0; vec <= 2; vec++) {
        gm_period_vectors(vec);
        double best = 0, conf = 0, lag = 0;
        for (int r = 0; r < 3; r++) {
            double t0 = thread_cpu_s();
            for (long c = 0; c < calls; c++)
                lag = gm_period_lag(w, x, GM_PERIOD_WIN, &conf);
            double s = thread_cpu_s() - t0;
            if (!r || s < best) best = s;
        }
        if (!vec) lag0 = lag;
        if (lag != lag0) rc = 1;
        printf("mode period, %s: %ld calls of %d samples, best of 3: %.0f ns a call (period %.3f, "
               "correlation %.3f)\n",
               names[vec], calls, GM_PERIOD_WIN, best / (double)calls * 1e9, lag, conf);
    }
    gm_period_vectors(2);
    free(w);
    if (rc) fprintf(stderr, "gmbench: the widths found different periods\n");
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 3) return usage();
    const char *mode = argv[1];
    if (!strcmp(mode, "compare")) return bench_compare(argv[2]);
    if (!strcmp(mode, "fit")) return bench_fit(argv[2]);
    if (!strcmp(mode, "read")) return read_only(argv[2]);
    if (!strcmp(mode, "packed")) return bench_packed(argv[2]);
    if (!strcmp(mode, "unpickle")) return bench_unpickle(argv[2]);
    if (!strcmp(mode, "period")) return bench_period(atol(argv[2]));
    int two = !strcmp(mode, "tenants") || !strcmp(mode, "cached");
    int fixed = !strcmp(mode, "fixed");
    if (strcmp(mode, "mem") && strcmp(mode, "file") && !fixed && !two) return usage();
    if (two && argc < 4) return usage();
    const char *policy = argc > 3 + two ? argv[3 + two] : "pytorch";
    vec ev = {0};
    gm_trace_meta meta;
    gm_trace_meta_init(&meta);
    size_t k = 1;
    uint64_t capacity = 80 * GM_GiB;
    if (!strcmp(mode, "cached") && cached_prefix(&ev, (size_t)atof(argv[2]))) return 1;
    if (!strcmp(mode, "tenants")) {
        k = (size_t)atoi(argv[2]);
        if (k < 1) return usage();
        capacity = 1ull << 50; /* every copy fits: no OOM ends a tenant early */
    }
    if (strcmp(mode, "file") && bert(&ev, atof(argv[2 + two]) / (double)k, fixed)) return 1;
    const char *by_addr = getenv("GMBENCH_BY_ADDRESS");
    if (strcmp(mode, "file") && !(by_addr && *by_addr == '1')) {
        gm_err err = {0};
        if (gm_ids_assign(ev.v, ev.n, &err)) {
            fprintf(stderr, "gmbench: %s\n", err.msg);
            return 1;
        }
        meta.dense_ids = 1;
    }
    gm_tenant_spec *spec = calloc(k, sizeof *spec);
    if (!spec) return 1;
    for (size_t i = 0; i < k; i++) {
        spec[i] = (gm_tenant_spec){.path = argv[2], .repeat = 1, .offset_ns = i * 1000000ull};
        if (strcmp(mode, "file")) {
            spec[i].path = "memory:bert";
            spec[i].events = ev.v;
            spec[i].n_events = ev.n;
            spec[i].meta = &meta;
        }
    }
    gm_sim_result *r = NULL;
    double s;
    if (simulate(spec, k, capacity, policy, &s, &r)) return 1;
    uint64_t cycles, recs, dropped, ff = ff_events(r, &cycles, &recs, &dropped);
    printf("mode %s, policy %s, %zu tenant%s: %llu events, best of 3: %.1f M events/s, %.1f ns "
           "per event (%.3f s CPU), peak reserved %.2f GiB, peak RSS %ld MiB%s%s\n",
           mode, policy, k, k == 1 ? "" : "s", (unsigned long long)r->events,
           (double)r->events / s / 1e6, s * 1e9 / (double)r->events, s,
           (double)r->device.peak_r / (double)GM_GiB, rss_mib(),
           spec[0].events ? " (includes the in-memory trace)" : "",
           stats_kept() ? ", memory_stats kept" : "");
    if (k > 1) {
        uint64_t st = 0;
        for (size_t i = 0; i < r->n_tenants; i++)
            st += r->t[i].stretched_events;
        if (cfg_no_stretch())
            printf("  stretches off (GMBENCH_NO_STRETCH)\n");
        else
            printf("  %.1f %% of the events in stretches of one tenant's own\n",
                   100.0 * (double)st / (double)(r->events ? r->events : 1));
    }
    if (no_ff())
        printf("  fast-forward off (GMBENCH_NO_FF)\n");
    else
        printf(
            "  fast-forwarded %.1f %% of the events: %llu cycles applied, %llu records made, %llu "
            "dropped\n",
            100.0 * (double)ff / (double)(r->events ? r->events : 1), (unsigned long long)cycles,
            (unsigned long long)recs, (unsigned long long)dropped);
    gm_sim_result_free(r);
    free(spec);
    free(ev.v);
    return 0;
}
