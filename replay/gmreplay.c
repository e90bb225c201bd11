/*
 * gmreplay.c - run the simulator's allocator and release policy on a real
 * GPU and measure what really happens.
 *
 *   gmreplay [options] TRACE... -o measured.json
 *   gmreplay --winner compare.json [TRACE...] -o measured.json
 *   gmreplay --calibrate -o profile.json
 *
 * The replay is gm_simulate() itself (sim/engine.h) over the CUDA backend
 * (replay/device_cuda.h): the same engine, allocator and policy code as
 * `gmsim run`, so the two results differ only where the GPU differs from
 * the model. Tenants run interleaved in global time order in one thread,
 * exactly as the simulator orders them (not one thread per tenant): that is
 * what makes "the same OOM event" a meaningful check. --pace spaces the
 * driver calls by the trace's timestamps (see pacer below).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ballast.h"
#include "calibrate.h"
#include "device_cuda.h"
#include "base/err.h"
#include "base/outfile.h"
#include "base/version.h"
#include "reports/results.h"
#include "sim/measured.h"
#include "study/run_opts.h"
#include "study/simulate.h"

static volatile sig_atomic_t g_stop; /* the signal that asked us to stop */

static void on_signal(int sig)
{
    if (g_stop) /* a second signal: the driver frees a dead process's memory */
        _exit(128 + sig);
    g_stop = sig;
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: gmreplay [options] TRACE [[per-trace options] TRACE...] -o MEASURED.json\n"
               "       gmreplay --winner COMPARE.json [TRACE...] -o MEASURED.json\n"
               "       gmreplay --calibrate -o PROFILE.json\n"
               "\n"
               "Replay allocation trace(s) on a real NVIDIA GPU with the simulator's own\n"
               "allocator and release-policy code: driver allocations are real cuMemAlloc /\n"
               "cuMemFree (cuMemCreate / cuMemMap for expandable segments). A --capacity below\n"
               "the card's is made real with ballast, so the driver itself runs out where the\n"
               "smaller card would. Writes the result schema of 'gmsim run --json', plus a\n"
               "\"measured\" object; compare the two with 'gmsim validate'.\n"
               "\n");
    gm_run_opts_help(f, 1);
    fprintf(f, "  (default --capacity: the GPU's memory; default --overhead: this process's\n"
               "   measured CUDA context)\n"
               "\n"
               "replay:\n"
               "  -o, --output FILE      where to write the measurement (required)\n"
               "  --winner FILE          take the winning policy and all its settings (and the\n"
               "                         traces, unless given) from 'gmsim compare --json'\n"
               "  --pace                 space the driver calls by the trace's timestamps\n"
               "                         (default: as fast as the driver goes)\n"
               "  --device N             GPU ordinal (default 0)\n"
               "  --calibrate            measure driver latency and context overhead and write\n"
               "                         a device profile for 'gmsim --device-profile'\n"
               "  -q, --quiet            no summary on stdout\n"
               "  -h, --help             this text\n"
               "\n"
               "environment: GMREPLAY_LIBCUDA names the driver library (default libcuda.so.1)\n"
               "\n"
               "exit status: 0 done, 1 error (no driver or GPU, driver failure), 2 usage,\n"
               "128+N interrupted by signal N (everything is freed first)\n"
               "\n"
               "example: gmreplay --policy lru --capacity 24GiB traces/bert.h5 -o measured.json\n");
}

static int fail(int code, const char *msg)
{
    fprintf(stderr, "gmreplay: %s\n", msg);
    return code == GM_EUSAGE ? 2 : 1;
}

/* ---------------- --winner ---------------- */

static json_t *jget(json_t *o, const char *k)
{
    return json_object_get(o, k);
}

static const char *winner_name(json_t *w)
{
    if (json_is_string(w)) return json_string_value(w);
    const char *n = json_string_value(jget(w, "policy"));
    return n ? n : json_string_value(jget(w, "name"));
}

/* The policy part of a spec: "lru:threshold=0.8" -> matches "lru". */
static int policy_matches(const char *spec, const char *name)
{
    size_t n = strlen(name);
    return spec && (!strcmp(spec, name) || (!strncmp(spec, name, n) && spec[n] == ':'));
}

static json_t *as_result(json_t *e)
{
    if (json_is_object(jget(e, "inputs"))) return e;
    json_t *r = jget(e, "result");
    return json_is_object(jget(r, "inputs")) ? r : NULL;
}

/* The gmsim-result/1 object of the winner in a gmsim-compare result. */
static json_t *find_winner(json_t *root, const char *path, gm_err *err)
{
    const char *schema = json_string_value(jget(root, "schema"));
    if (!schema || strncmp(schema, "gmsim-compare/", 14) != 0)
        return gm_errf(err, GM_EINVAL,
                       "--winner %s: not a 'gmsim compare --json' result (schema '%s')", path,
                       schema ? schema : "(none)"),
               NULL;
    json_t *w = jget(root, "winner");
    if (as_result(w)) return as_result(w);
    const char *name = winner_name(w);
    if (!name) return gm_errf(err, GM_EINVAL, "--winner %s: no \"winner\" in it", path), NULL;
    static const char *const lists[] = {"results", "runs", "policies"};
    for (int exact = 1; exact >= 0; exact--) /* "lru" before "lru:threshold=0.8" */
        for (size_t l = 0; l < 3; l++) {
            json_t *a = jget(root, lists[l]);
            for (size_t i = 0; i < json_array_size(a); i++) {
                json_t *e = json_array_get(a, i), *r = as_result(e);
                const char *spec =
                    r ? json_string_value(json_object_get(jget(r, "inputs"), "policy")) : NULL;
                if (spec && (exact ? !strcmp(spec, name) : policy_matches(spec, name))) return r;
            }
        }
    return gm_errf(err, GM_EINVAL,
                   "--winner %s: the winner is '%s' but the file holds no result with its "
                   "inputs; write it with 'gmsim compare --json'",
                   path, name),
           NULL;
}

typedef struct given {
    int capacity, policy, allocator, alloc_conf, fraction, on_oom, lenient, scope;
} given;

static int json_u64(json_t *o, const char *k, uint64_t *out)
{
    json_t *v = jget(o, k);
    if (!json_is_integer(v) || json_integer_value(v) < 0) return 0;
    *out = (uint64_t)json_integer_value(v);
    return 1;
}

/* Fill what the command line did not give from the winner's inputs. The
 * strings stay owned by `root`, which outlives the run. */
static int apply_winner(json_t *root, const char *path, gm_run_opts *o, const given *g,
                        uint64_t *capacity, uint64_t *overhead, gm_err *err)
{
    json_t *r = find_winner(root, path, err);
    if (!r) return err->code;
    json_t *in = jget(r, "inputs");
    if (!g->policy) o->policy = json_string_value(jget(in, "policy"));
    if (!g->allocator) o->allocator = json_string_value(jget(in, "allocator"));
    if (!g->alloc_conf && json_is_string(jget(in, "alloc_conf_given")))
        o->alloc_conf = json_string_value(jget(in, "alloc_conf_given"));
    if (!g->fraction && json_is_number(jget(in, "memory_fraction")))
        o->memory_fraction = json_number_value(jget(in, "memory_fraction"));
    const char *on_oom = json_string_value(jget(in, "on_oom"));
    if (!g->on_oom && on_oom) o->on_oom_skip = !strcmp(on_oom, "skip");
    if (!g->lenient && json_is_true(jget(in, "lenient"))) o->lenient = 1;
    const char *scope = json_string_value(jget(in, "scope"));
    if (!g->scope && scope) o->scope_device = !strcmp(scope, "device");
    if (!g->capacity) json_u64(in, "capacity_bytes", capacity);
    if (!o->overhead_given) json_u64(in, "overhead_bytes", overhead);
    if (o->n_tenants) return GM_OK; /* traces given on the command line replace the winner's */
    json_t *ts = jget(r, "tenants");
    for (size_t i = 0; i < json_array_size(ts); i++) {
        json_t *t = json_array_get(ts, i);
        const char *trace = json_string_value(jget(t, "trace"));
        uint64_t rep = 1;
        if (!trace)
            return gm_errf(err, GM_EINVAL, "--winner %s: tenant %zu has no trace path", path, i);
        o->next.offset_ns = o->next.quota_bytes = 0;
        json_u64(t, "offset_ns", &o->next.offset_ns);
        json_u64(t, "quota_bytes", &o->next.quota_bytes);
        json_u64(t, "repeat", &rep);
        o->next.repeat = rep ? (uint32_t)rep : 1;
        int rc = gm_run_opts_parse(o, 1, trace, err);
        if (rc) return rc;
    }
    if (!o->n_tenants)
        return gm_errf(err, GM_EINVAL, "--winner %s: the winner's result lists no traces", path);
    return GM_OK;
}

/* ---------------- pacing ---------------- */

/*
 * Driver calls are what touch the GPU, so --pace times those: a dry run on
 * the simulated device with the same settings records the trace time of
 * every driver call; the replay waits before its k-th call until wall time
 * since the start reaches that call's trace time. Each real call is checked
 * against the schedule (same time); once the replay takes another path than
 * the model (an OOM the model did not have), pacing stops and the result
 * says so.
 */
typedef struct pacer {
    uint64_t *t;
    size_t n, cap, next;
    uint64_t wall0;
    int diverged;
} pacer;

static void pace_record(void *ctx, int tenant, uint64_t event_index, const gm_seg_event *ev)
{
    pacer *p = ctx;
    (void)tenant, (void)event_index;
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 1024;
        uint64_t *t = realloc(p->t, cap * sizeof *t);
        if (!t) {
            p->diverged = 1;
            return;
        }
        p->t = t;
        p->cap = cap;
    }
    p->t[p->n++] = ev->t_ns;
}

static void pace_wait(void *ctx)
{
    pacer *p = ctx;
    if (p->diverged || p->next >= p->n) return;
    uint64_t due = p->wall0 + p->t[p->next];
    struct timespec ts = {(time_t)(due / 1000000000ull), (long)(due % 1000000000ull)};
    while (!g_stop && clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

static void pace_check(pacer *p, const gm_seg_event *ev)
{
    if (p->diverged) return;
    if (p->next < p->n && p->t[p->next] == ev->t_ns)
        p->next++;
    else
        p->diverged = 1;
}

static int pace_schedule(const gm_sim_config *cfg_in, pacer *p, gm_err *err)
{
    gm_sim_config cfg = *cfg_in;
    cfg.device = NULL;
    cfg.seg_hook = pace_record;
    cfg.seg_hook_ctx = p;
    cfg.progress = NULL;
    gm_sim_result *r;
    int rc = gm_simulate(&cfg, &r, err);
    if (rc == GM_OK) gm_sim_result_free(r);
    return rc;
}

/* ---------------- sampling device use ---------------- */

typedef struct replay {
    gm_cuda *cuda;
    gm_measured *m;
    pacer *pace; /* NULL without --pace */
    uint64_t capacity;
    uint64_t reserved;
    uint64_t wall0;
} replay;

static void sample(replay *rp, uint64_t t_ns)
{
    uint64_t free_b;
    gm_err e;
    if (gm_cuda_mem_info(rp->cuda, &free_b, NULL, &e) != GM_OK) return;
    gm_used_point pt = {t_ns, mono_ns() - rp->wall0,
                        rp->capacity > free_b ? rp->capacity - free_b : 0, rp->reserved};
    gm_used_add(&rp->m->used, &pt);
}

/* After every driver call that succeeded (alloc.c's hook). */
static void on_driver_call(void *ctx, int tenant, uint64_t event_index, const gm_seg_event *ev)
{
    replay *rp = ctx;
    (void)tenant, (void)event_index;
    if (gm_op_grows(ev->op))
        rp->reserved += ev->size;
    else
        rp->reserved -= ev->size;
    if (rp->pace) pace_check(rp->pace, ev);
    sample(rp, ev->t_ns);
}

/* ---------------- the run ---------------- */

typedef struct args {
    gm_run_opts o;
    given g;
    const char *out, *winner;
    int pace, calibrate, quiet, ordinal;
} args;

static int parse(int argc, char **argv, args *a, gm_err *err)
{
    enum { O_OUT = 'o', O_WINNER = 1000, O_PACE, O_CAL, O_DEVICE, O_VERSION };
    static const struct option extra[] = {
        {"output", required_argument, NULL, O_OUT},
        {"winner", required_argument, NULL, O_WINNER},
        {"pace", no_argument, NULL, O_PACE},
        {"calibrate", no_argument, NULL, O_CAL},
        {"device", required_argument, NULL, O_DEVICE},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, O_VERSION},
        {NULL, 0, NULL, 0},
    };
    struct option longopts[GM_RUN_OPTS_LONGOPTS];
    if (!gm_run_opts_longopts(longopts, GM_RUN_OPTS_LONGOPTS, extra))
        return gm_errf(err, GM_EUSAGE, "internal error: the option table is too small");
    int c, idx;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "-o:qh", longopts, (idx = -1, &idx))) != -1) {
        const char *name = idx >= 0 ? longopts[idx].name : "";
        if (c == 'h') {
            usage(stdout);
            return 1;
        } else if (c == O_VERSION) {
            printf("gmreplay %s\n", GM_VERSION);
            return 1;
        } else if (c == 'q') {
            a->quiet = 1;
        } else if (c == O_OUT) {
            a->out = optarg;
        } else if (c == O_WINNER) {
            a->winner = optarg;
        } else if (c == O_PACE) {
            a->pace = 1;
        } else if (c == O_CAL) {
            a->calibrate = 1;
        } else if (c == O_DEVICE) {
            double v;
            if (gm_parse_double(optarg, "--device", 0, 1024, &v, err)) return err->code;
            a->ordinal = (int)v;
        } else if (c == '?' || c == ':') {
            return gm_errf(err, GM_EUSAGE,
                           "unknown option or missing value near '%s'; see 'gmreplay --help'",
                           argv[optind - 1]);
        } else {
            int rc = gm_run_opts_parse(&a->o, c, optarg, err);
            if (rc) return rc;
            a->g.capacity |= !strcmp(name, "capacity");
            a->g.policy |= !strcmp(name, "policy");
            a->g.allocator |= !strcmp(name, "allocator");
            a->g.alloc_conf |= !strcmp(name, "alloc-conf");
            a->g.fraction |= !strcmp(name, "memory-fraction");
            a->g.on_oom |= !strcmp(name, "on-oom");
            a->g.lenient |= !strcmp(name, "lenient");
            a->g.scope |= !strcmp(name, "scope");
        }
    }
    if (!a->out)
        return gm_errf(err, GM_EUSAGE, "give the output file with -o, e.g. -o %s",
                       a->calibrate ? "profile.json" : "measured.json");
    if (!a->calibrate && !a->winner && a->o.n_tenants == 0)
        return gm_errf(err, GM_EUSAGE,
                       "no trace given; e.g. gmreplay traces/bert.h5 -o "
                       "measured.json (see --help)");
    /* the output must not be an input (base/outfile.h) */
    for (size_t i = 0; i <= a->o.n_tenants; i++) {
        const char *in = i < a->o.n_tenants ? a->o.tenants[i].path : a->winner;
        if (in && gm_out_same_file(a->out, in))
            return gm_errf(err, GM_EUSAGE,
                           "-o %s: that is the input %s; writing it would destroy the input — "
                           "choose another file",
                           a->out, in);
    }
    return GM_OK;
}

static int calibrate(args *a, gm_err *err)
{
    gm_cuda *c;
    int rc = gm_cuda_open(getenv("GMREPLAY_LIBCUDA"), a->ordinal, &c, err);
    if (rc) return rc;
    gm_cuda_set_stop(c, &g_stop);
    const gm_cuda_info *in = gm_cuda_info_get(c);
    if (!a->quiet)
        printf("gmreplay --calibrate: %s (device %d, %.2f GiB, driver %d, %s)\n", in->name,
               in->ordinal, (double)in->total_bytes / GM_GiB, in->driver_version, in->library);
    json_t *prof;
    rc = gm_calibrate(c, GM_CALIBRATE_REPS, a->quiet ? NULL : stdout, &prof, err);
    gm_cuda_close(c);
    if (rc == GM_OK) {
        rc = gm_json_write(prof, a->out, err);
        json_decref(prof);
        if (rc == GM_OK && !a->quiet)
            printf("wrote %s; use it with 'gmsim run --device-profile %s'\n", a->out, a->out);
    }
    return rc;
}

static void print_summary(const gm_sim_result *r, const gm_measured *m)
{
    char b1[32], b2[32], b3[32], b4[32];
    printf("gmreplay: %zu trace%s on %s, emulating %s (ballast %s; context %s measured, "
           "%s per tenant emulated)\n",
           r->n_tenants, r->n_tenants == 1 ? "" : "s", m->device_name,
           gm_fmt_bytes(r->capacity_bytes, b1, sizeof b1),
           gm_fmt_bytes(m->ballast_bytes, b2, sizeof b2),
           gm_fmt_bytes(m->context_overhead_bytes, b3, sizeof b3),
           gm_fmt_bytes(r->overhead_bytes, b4, sizeof b4));
    printf("allocator %s, policy %s\n", r->allocator, r->policy);
    const gm_metrics *d = &r->device;
    printf("  peak live %s, allocated %s, reserved %s\n", gm_fmt_bytes(d->peak_q, b1, sizeof b1),
           gm_fmt_bytes(d->peak_a, b2, sizeof b2), gm_fmt_bytes(d->peak_r, b3, sizeof b3));
    printf("  peak device used (cuMemGetInfo) %s\n",
           gm_fmt_bytes(m->used.peak.used_bytes, b1, sizeof b1));
    gm_alloc_counters tot = gm_sim_totals(r);
    printf("  driver calls: %" PRIu64 " malloc, %" PRIu64 " free, %s measured\n",
           tot.n_driver_alloc, tot.n_driver_free,
           gm_fmt_ns(gm_counters_driver_ns(&tot), b1, sizeof b1));
    printf("  OOMs %" PRIu64 " (driver refused %" PRIu64 " call(s); capacity guard %" PRIu64
           ", of which the driver had room for %" PRIu64 ")\n",
           d->n_oom, m->driver_oom_returns, m->cap_refusals, m->cap_refusals_driver_had_room);
    for (size_t i = 0; i < d->n_oom_kept && i < 5; i++)
        printf("    OOM tenant %d event %" PRIu64 ": %s requested\n", d->ooms[i].tenant,
               d->ooms[i].event_index, gm_fmt_bytes(d->ooms[i].size, b1, sizeof b1));
    printf("  tenants completed %zu of %zu; wall %.3f s%s\n", gm_sim_completed(r), r->n_tenants,
           m->wall_s,
           m->paced ? (m->pace_diverged ? " (paced until the run diverged)" : " (paced)") : "");
}

/* Overhead and capacity: command line, then --winner, then the profile,
 * then this GPU (its memory; this process's measured context). */
static int setup_device(args *a, gm_cuda *cuda, uint64_t win_cap, uint64_t win_ovh, gm_measured *m,
                        gm_err *err)
{
    const gm_cuda_info *in = gm_cuda_info_get(cuda);
    uint64_t ctx = in->total_bytes - in->free_at_open;
    uint64_t cap = a->g.capacity         ? a->o.capacity
                   : win_cap             ? win_cap
                   : a->o.device_profile ? a->o.profile_capacity
                                         : in->total_bytes;
    uint64_t ovh = a->o.overhead_given   ? a->o.overhead
                   : win_ovh             ? win_ovh
                   : a->o.device_profile ? a->o.overhead
                                         : ctx;
    a->o.capacity = cap;
    a->o.overhead = ovh;
    snprintf(m->library, sizeof m->library, "%s", in->library);
    snprintf(m->device_name, sizeof m->device_name, "%s", in->name);
    m->driver_version = in->driver_version;
    m->device_ordinal = in->ordinal;
    m->device_total_bytes = in->total_bytes;
    m->granularity_bytes = in->granularity_bytes;
    m->context_overhead_bytes = ctx;
    m->free_at_start_bytes = in->free_at_open;
    m->emulated_capacity_bytes = cap;
    uint64_t target = 0, free_b = 0;
    int rc = gm_cuda_mem_info(cuda, &free_b, NULL, err);
    if (!rc)
        rc = gm_ballast_target(cap, a->o.n_tenants, ovh, free_b, in->total_bytes, &target, err);
    if (!rc) rc = gm_cuda_ballast_hold(cuda, target, m, err);
    return rc;
}

static int replay_run(args *a, json_t *winner_root, gm_err *err)
{
    uint64_t win_cap = 0, win_ovh = 0;
    int rc = GM_OK;
    if (winner_root)
        rc = apply_winner(winner_root, a->winner, &a->o, &a->g, &win_cap, &win_ovh, err);
    if (rc) return rc;
    gm_cuda *cuda;
    if ((rc = gm_cuda_open(getenv("GMREPLAY_LIBCUDA"), a->ordinal, &cuda, err))) return rc;
    gm_cuda_set_stop(cuda, &g_stop);
    gm_measured *m = malloc(sizeof *m);
    if (!m) {
        gm_cuda_close(cuda);
        return gm_errf(err, GM_ENOMEM, "out of memory");
    }
    gm_measured_init(m);
    gm_device *dev = NULL;
    gm_sim_result *r = NULL;
    pacer pc = {0};
    replay rp = {.cuda = cuda, .m = m};
    gm_sim_config cfg;
    if (!(rc = setup_device(a, cuda, win_cap, win_ovh, m, err)))
        rc = gm_cuda_device_create(cuda, a->o.capacity, m, &g_stop, &dev, err);
    gm_run_opts_config(&a->o, &cfg);
    if (!rc && a->pace && !(rc = pace_schedule(&cfg, &pc, err))) {
        rp.pace = &pc;
        m->paced = 1;
        gm_cuda_device_set_pacer(dev, pace_wait, &pc);
    }
    if (!rc) {
        cfg.device = dev;
        cfg.seg_hook = on_driver_call;
        cfg.seg_hook_ctx = &rp;
        rp.capacity = a->o.capacity;
        rp.wall0 = pc.wall0 = mono_ns();
        sample(&rp, 0);
        rc = gm_simulate(&cfg, &r, err);
        m->wall_s = (double)(mono_ns() - rp.wall0) / 1e9;
    }
    if (dev) {
        m->leaked_bytes = gm_cuda_device_held(dev);
        m->freed_all = m->leaked_bytes == 0;
        if (gm_cuda_device_failed(dev) && rc == GM_OK)
            rc = gm_errf(err, GM_EIO,
                         "the driver failed during the replay: %s; the "
                         "measurement is not valid",
                         m->error);
        gm_device_destroy(dev); /* frees whatever is left */
    }
    m->pace_diverged = pc.diverged;
    m->interrupted_by = (int)g_stop;
    gm_cuda_close(cuda); /* ballast, context */
    if (r) {             /* written even when the driver failed: the error is in it */
        json_t *j = gm_replay_result_json(&cfg, r, m);
        int wrc = gm_json_write(j, a->out, rc ? NULL : err);
        json_decref(j);
        rc = rc ? rc : wrc;
        if (!a->quiet && rc == GM_OK) print_summary(r, m);
        gm_sim_result_free(r);
    }
    free(pc.t);
    gm_measured_free(m);
    free(m);
    return rc;
}

static int run_main(int argc, char **argv)
{
    static args a;
    gm_err err = {0};
    gm_run_opts_init(&a.o);
    int rc = parse(argc, argv, &a, &err);
    if (rc == 1) { /* --help / --version */
        gm_run_opts_free(&a.o);
        return 0;
    }
    json_t *winner = NULL;
    if (rc == GM_OK && a.winner) {
        json_error_t je;
        if (!(winner = json_load_file(a.winner, 0, &je)))
            rc = gm_errf(&err, GM_EIO, "--winner %s: %s", a.winner, je.text);
    }
    if (rc == GM_OK) {
        /* from here on a signal means: stop, free everything, then exit */
        signal(SIGINT, on_signal);
        signal(SIGTERM, on_signal);
        rc = a.calibrate ? calibrate(&a, &err) : replay_run(&a, winner, &err);
    }
    json_decref(winner);
    gm_run_opts_free(&a.o);
    if (g_stop && rc != GM_OK) {
        fprintf(stderr, "gmreplay: interrupted by signal %d (%s); every allocation was freed\n",
                (int)g_stop, err.msg);
        return 128 + (int)g_stop;
    }
    if (rc != GM_OK) return fail(rc, err.msg);
    if (g_stop) {
        fprintf(stderr,
                "gmreplay: interrupted by signal %d; every allocation was freed, the "
                "partial measurement is in %s (marked interrupted)\n",
                (int)g_stop, a.out);
        return 128 + (int)g_stop;
    }
    return 0;
}

/* Whatever was printed (--help, the summary) must reach standard output. */
int main(int argc, char **argv)
{
    return gm_close_stdout("gmreplay", run_main(argc, argv));
}
