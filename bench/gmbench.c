/*
 * gmbench.c - throughput and memory of the simulator (DESIGN §8). Timing is
 * measured here, by hand or by bench/run.sh, never asserted by a test.
 *
 *   gmbench mem EVENTS [POLICY]   generate a synthetic BERT trace of about
 *                                 EVENTS events into memory, then simulate it
 *                                 (engine + pytorch allocator + policy +
 *                                 metrics; no file I/O): events/s
 *   gmbench file TRACE [POLICY]   simulate a trace file end to end (HDF5
 *                                 reading included): events/s and peak RSS
 *   gmbench read TRACE            read every event and nothing else: the
 *                                 reader's own events/s
 *
 * The trace reader runs in its child process (traces/trace_isolate.c)
 * unless GMSIM_TRACE_INPROCESS=1: run both to see what isolation costs.
 *
 * Each figure is the best of 3 runs (the machines are shared and noisy).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "base/clock.h"
#include "sim/engine.h"
#include "study/simulate.h"
#include "traces/gen_bert.h"

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

static int simulate(gm_tenant_spec *spec, const char *policy, double *best_rate,
                    gm_sim_result **last)
{
    gm_sim_config cfg = {0};
    static const gm_latency lat = GM_LATENCY_DEFAULT;
    cfg.tenants = spec;
    cfg.n_tenants = 1;
    cfg.policy = policy;
    cfg.capacity_bytes = 80 * GM_GiB;
    cfg.overhead_bytes = GM_DEFAULT_OVERHEAD;
    cfg.latency = lat;
    *best_rate = 0;
    for (int i = 0; i < 3; i++) {
        gm_err err = {0};
        gm_sim_result *r;
        if (gm_simulate(&cfg, &r, &err) != GM_OK) {
            fprintf(stderr, "gmbench: %s\n", err.msg);
            return 1;
        }
        double rate = (double)r->events / r->wall_s;
        if (rate > *best_rate) *best_rate = rate;
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

int main(int argc, char **argv)
{
    if (argc < 3 ||
        (strcmp(argv[1], "mem") && strcmp(argv[1], "file") && strcmp(argv[1], "read"))) {
        fprintf(stderr, "usage: gmbench mem EVENTS [POLICY] | gmbench file TRACE [POLICY] | "
                        "gmbench read TRACE\n");
        return 2;
    }
    if (!strcmp(argv[1], "read")) return read_only(argv[2]);
    const char *policy = argc > 3 ? argv[3] : "pytorch";
    gm_tenant_spec spec = {.path = argv[2], .repeat = 1};
    vec ev = {0};
    gm_trace_meta meta;
    gm_trace_meta_init(&meta);
    if (!strcmp(argv[1], "mem")) {
        double want = atof(argv[2]);
        gm_bert_params p;
        gm_bert_defaults(&p);
        p.iterations = 1;
        gm_err err = {0};
        gm_bert_stats st;
        if (gm_bert_generate(&p, sink, NULL, &ev, &st, &err) != GM_OK) {
            fprintf(stderr, "gmbench: %s\n", err.msg);
            return 1;
        }
        p.iterations = (int)(want / (double)st.events) + 1;
        ev.n = 0;
        if (gm_bert_generate(&p, sink, NULL, &ev, &st, &err) != GM_OK) {
            fprintf(stderr, "gmbench: %s\n", err.msg);
            return 1;
        }
        spec.path = "memory:bert";
        spec.events = ev.v;
        spec.n_events = ev.n;
        spec.meta = &meta;
    }
    gm_sim_result *r = NULL;
    double rate;
    if (simulate(&spec, policy, &rate, &r)) return 1;
    printf("mode %s, policy %s: %llu events, best of 3: %.1f M events/s (%.3f s last), "
           "peak reserved %.2f GiB, peak RSS %ld MiB%s\n",
           argv[1], policy, (unsigned long long)r->events, rate / 1e6, r->wall_s,
           (double)r->device.peak_r / (double)GM_GiB, rss_mib(),
           spec.events ? " (includes the in-memory trace)" : "");
    gm_sim_result_free(r);
    free(ev.v);
    return 0;
}
