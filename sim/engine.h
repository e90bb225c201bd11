/*
 * engine.h - the discrete-event engine: replays one or more traces (tenants)
 * on one simulated device, in global time order, each tenant with its own
 * allocator instance and release policy.
 *
 * Events: every trace row of every tenant (shifted by the tenant's offset and
 * its --repeat pass), plus each policy's timer ticks. Ties in time go to the
 * lower tenant index, timers before trace events, so a run is deterministic.
 *
 * Memory: each tenant holds one chunk of events and a map of its live
 * allocations; nothing grows with trace length.
 */
#ifndef GM_ENGINE_H
#define GM_ENGINE_H

#include <stdint.h>

#include "alloc.h"
#include "device.h"
#include "host_tier.h"
#include "metrics.h"
#include "report.h"
#include "base/err.h"
#include "base/hash.h"
#include "traces/trace.h"

typedef struct gm_tenant_spec {
    const char *path; /* trace file; with `events`, only a name       */
    const char *name; /* what messages and results call it (NULL: path), e.g. the
                         snapshot a temporary trace was imported from */
    /* optional in-memory trace instead of a file (benchmarks, tests): the
     * events must already be valid (the file reader's checks are skipped) */
    const gm_event *events;
    /* ... or, without `events`, the same kept packed (traces/packed.h: a
     * study's preload of a larger trace, study/preload.h); meta, initial
     * and trace_hash as with `events` */
    const struct gm_packed *packed;
    size_t n_events;
    const gm_trace_meta *meta;  /* with `events`: metadata (may be NULL)  */
    const gm_init_row *initial; /* with `events`: its /initial_state rows (may be NULL) */
    size_t n_initial;
    /* with `events`: their trace hash when known (gm_trace_hash_events), so
     * that each of many runs over them (compare, tune) does not hash them
     * again; NULL: the run hashes them */
    const char *trace_hash;
    uint64_t offset_ns;   /* start time on the device                       */
    uint32_t repeat;      /* passes over the trace (>= 1)                   */
    uint64_t quota_bytes; /* cap on this tenant's reserved bytes (0 = none) */
    /* Kubernetes-style sharing (README, "Sharing a GPU"): --class, --request,
     * --limit. cls 0 = not given: derived as Kubernetes derives a pod's QoS
     * class (gm_tenant_class_resolve). Sizes are of the memory the tenant's
     * allocator holds from the driver (reserved), as --quota; 0 = none. */
    int cls; /* enum gm_tenant_class */
    uint64_t request_bytes, limit_bytes;
} gm_tenant_spec;

/* A tenant's class (--class; Kubernetes' QoS classes Guaranteed,
 * Burstable and BestEffort, the last called opportunistic here). */
enum gm_tenant_class {
    GM_CLASS_UNSET = 0,
    GM_CLASS_GUARANTEED = 1,    /* request == limit: never loses memory to others */
    GM_CLASS_BURSTABLE = 2,     /* request <= limit: above its request, what is free */
    GM_CLASS_OPPORTUNISTIC = 3, /* no request: shrunk first, the one that dies */
};

/* How tenants share the device (--share; README, "Sharing a GPU"). */
enum gm_share_mode {
    GM_SHARE_AUTO = 0,     /* requests when any tenant has a class, request or limit; else none */
    GM_SHARE_NONE = 1,     /* classes, requests and limits are not applied (--quota still is) */
    GM_SHARE_HARD_CAP = 2, /* each limit is a hard cap (HAMi, MPS); admission sums the caps */
    GM_SHARE_REQUESTS = 3, /* requests held for their tenants, limits capped, dynamic release */
};

/* The class, request and limit a spec stands for, by Kubernetes' rules: a
 * limit without a request makes the request equal to it; no class given:
 * guaranteed when request == limit > 0, burstable when either is given,
 * else opportunistic. A given class must agree (guaranteed: a request equal
 * to the limit; opportunistic: no request; burstable: request <= limit).
 * GM_EUSAGE naming the trace and the fix otherwise. */
int gm_tenant_class_resolve(const gm_tenant_spec *t, int *cls, uint64_t *request, uint64_t *limit,
                            gm_err *err);
const char *gm_tenant_class_name(int cls);
int gm_tenant_class_parse(const char *arg, int *cls, gm_err *err);
const char *gm_share_mode_name(int mode);
int gm_share_mode_parse(const char *arg, int *mode, gm_err *err);

/* What of a trace's /initial_state a replay starts from (--initial-state;
 * README, "Initial state"). */
enum gm_initial_mode {
    GM_INITIAL_LIVE = 0,     /* the live blocks, allocated through the model under test
                                (in address order), which builds its own cache; private-
                                pool segments as recorded. What-ifs: run, compare, fit */
    GM_INITIAL_RECORDED = 1, /* segments, mapped ranges and blocks exactly as recorded
                                (fidelity: the recorded allocator's cache) */
    GM_INITIAL_NONE = 2,     /* nothing: frees of pre-existing blocks are skipped */
};

typedef struct gm_sim_config {
    const gm_tenant_spec *tenants;
    size_t n_tenants;
    const char *allocator;       /* "pytorch" (default) or "direct"                 */
    const char *alloc_conf;      /* PYTORCH_CUDA_ALLOC_CONF; NULL = the trace's own */
    const char *policy;          /* "NAME[:k=v,...]", NULL = "pytorch": for gm_simulate
                                    (study/simulate.h), which resolves it; the engine
                                    takes the resolved ops                          */
    double memory_fraction;      /* 0 = unset                                        */
    uint64_t capacity_bytes;     /* 0 = the first trace's device_total_bytes, else its
                                    device_avail_bytes (then with no context overhead
                                    unless overhead_given: the window excludes it) */
    const char *capacity_source; /* what gave capacity_bytes, for people (NULL: --capacity) */
    uint64_t overhead_bytes;     /* context overhead per tenant                      */
    int overhead_given;          /* overhead_bytes is the user's, not a default      */
    int initial_state;           /* enum gm_initial_mode                             */
    int torch_version;           /* GM_TORCH_* whose PYTORCH_CUDA_ALLOC_CONF rules apply;
                                    0 = the trace's torch_version, else the newest   */
    gm_latency latency;
    /* optional: run on this backend instead of the simulated GPU (gmreplay's
     * CUDA device); capacity_bytes is then the device's. Not destroyed. */
    gm_device *device;
    int on_oom_skip;          /* 1: skip the failing allocation; 0: abort the tenant  */
    int no_hash;              /* 1: no trace hash (results' trace_hash ""): searches that
                                 keep only a verdict (fit) */
    int no_device_stats;      /* 1: no PyTorch memory_stats() in the results (has_stats 0):
                                 runs whose output shows none (a text `run`, `compare`
                                 without --json, fit, tune) let the model skip keeping
                                 them (gm_alloc.no_stats), ~15 % of a run's time */
    int no_fast_forward;      /* 1: simulate every event, also where an iteration repeats
                                 one already simulated (sim/ffwd.h); the same results,
                                 for benchmarks and tests */
    int free_at_end;          /* tests: 1: when a tenant ends, free what is live through
                                 the model also where its frees are its own business
                                 (gm_alloc_ops.free_is_local), as before they were
                                 skipped; the same results */
    int no_stretch;           /* tests, benchmarks: 1: several tenants take one event at
                                 a time in time order, also where a tenant could run a
                                 stretch of its own ahead (engine.c, stretch()); the
                                 same results */
    uint64_t ff_patience;     /* tests: events the fast-forward seeks without a cycle
                                 before it tries one part of the model, then the other,
                                 then the whole again (its first round, sim/ffwd.h; 0:
                                 GM_FF_PATIENCE) */
    int lenient;              /* count and skip frees of unknown addresses             */
    int empty_cache_at_phase; /* 1: torch.cuda.empty_cache() before the first event of each
                                 new phase (forward, backward, optimizer) */
    int scope_device;         /* --scope device: a tenant whose allocation fails may make
                                 the other tenants release cached memory (0 = self) */
    int share;                /* enum gm_share_mode (--share)                          */
    int mps;                  /* --mps: one CUDA context for all tenants (the MPS server's),
                                 each --limit a hard cap (CUDA_MPS_PINNED_DEVICE_MEM_LIMIT) */
    /* --host-tier (host_tier.h): live blocks spilled to host memory when an
     * allocation would fail; NULL = none */
    const gm_host_tier *host_tier;
    /* --on-oom chain: a failing allocation is tried again after 1) every
     * tenant's cache is released, 2) at half size for an activation, the rest
     * of the iteration degraded, 3) spilling to the host tier (pcie4 when
     * host_tier is NULL); only then it is an OOM (the tenant aborts) */
    int on_oom_chain;
    /* optional: every driver call of every tenant (fidelity, logs), with the
     * index of the trace event that caused it (UINT64_MAX while the initial
     * state is rebuilt) */
    void (*seg_hook)(void *ctx, int tenant, uint64_t event_index, const gm_seg_event *ev);
    void *seg_hook_ctx;
    /* optional: every successful tensor allocation (event ev of tenant
     * `tenant`, trace event `event_index`), with the allocator instance and
     * the handle it returned, e.g. to ask a->ops->block_addr(a, handle) where
     * the model placed it (fidelity's block placement check) */
    void (*alloc_hook)(void *ctx, int tenant, uint64_t event_index, const gm_event *ev, gm_alloc *a,
                       uint64_t handle);
    void *alloc_hook_ctx;
    /* optional: every trace event, just before it is processed (fidelity's
     * device hands out the addresses recorded for that event) */
    void (*event_hook)(void *ctx, int tenant, uint64_t event_index, const gm_event *ev);
    void *event_hook_ctx;
    /* optional: every block of the initial state the model rebuilt (row of
     * /initial_state, the allocator instance and the handle restore() gave
     * it), once, before the first event (gmsim export: where the model put
     * the pre-existing tensors) */
    void (*init_hook)(void *ctx, int tenant, const gm_init_row *row, gm_alloc *a, uint64_t handle);
    void *init_hook_ctx;
    /* optional: a tenant's last moment with its allocator, when it completed
     * or aborted, before its live blocks are freed and its segments given
     * back (gmsim export: the end state; the seg_hook calls that follow are
     * the teardown, no decision of the run) */
    void (*end_hook)(void *ctx, int tenant, gm_alloc *a, int status);
    void *end_hook_ctx;
    /* optional: called about every million events */
    void (*progress)(void *ctx, uint64_t events_done);
    void *progress_ctx;
    /* optional: a study of many runs (compare, fit, tune) says each
     * finished step in one line ("lru: done, no OOM, ..."); called from the
     * worker threads, so it must be thread-safe. The engine never calls it. */
    void (*step_done)(void *ctx, const char *line);
    void *step_ctx;
    /* optional: read before each step of the run; once nonzero (a hook
     * sets it) the run ends there, as if its traces ended (no end_hook for
     * the tenants still running): the result is of the events run so far.
     * reports/segmap.c ends a replay once it has what it came for. */
    const int *halt;
    /* optional, per tenant (entries may be NULL): what its policy makes
     * from its trace alone, made ahead (gm_engine_prepare), which its
     * attach is given instead of making it (gm_policy_env.prepared) */
    struct gm_policy_prep *const *policy_prep;
} gm_sim_config;

/* A policy's preparation for one run (gm_policy_ops.prepare), which a
 * study makes beside its other runs (study/prep.h). take(), called once
 * by the run before its policy attaches, returns the prepared instance's
 * state, or NULL (attach then makes its own); it may wait while another
 * thread makes it. */
typedef struct gm_policy_prep {
    void *(*take)(struct gm_policy_prep *self);
} gm_policy_prep;

enum gm_tenant_status { GM_TENANT_COMPLETED = 0, GM_TENANT_ABORTED = 1 };

typedef struct gm_tenant_result {
    char path[512];
    char source[64];
    char trace_hash[17];      /* 16 hex digits over metadata + events */
    char alloc_conf[256];     /* the configuration this tenant ran with */
    int torch_version;        /* the GM_TORCH_* rules it was parsed with */
    char conf_no_effect[256]; /* keys of it accepted with no effect on the model */
    uint64_t trace_events;
    uint64_t events_done;
    /* fast-forward (sim/ffwd.h), which no result depends on: events_done
     * applied from the record of an identical earlier stretch instead of
     * simulated one by one, the cycles they were, the records made, and
     * those dropped (the state did not come back in time) */
    uint64_t fast_forwarded_events, ff_cycles, ff_records, ff_records_dropped;
    /* several tenants, which no result depends on either: events_done taken
     * in stretches of this tenant's own, ahead of the others (engine.c) */
    uint64_t stretched_events;
    int status;               /* enum gm_tenant_status                   */
    uint64_t abort_t_ns;      /* when it aborted (OOM)                   */
    uint64_t init_live_bytes; /* requested bytes alive before event 0    */
    uint64_t init_reserved_bytes;
    uint64_t unknown_frees; /* --lenient repairs, and later-pass frees of pre-existing blocks */
    uint64_t live_reallocs; /* --lenient: alloc of an address still live */
    uint64_t recorded_segment_events; /* segment_* rows in the trace (not replayed) */
    uint64_t repeat_leftover_bytes;   /* freed at pass ends (allocated, never freed, in a pass) */
    uint64_t scope_released_bytes;    /* --scope device: cache given back for other tenants */
    uint64_t scope_rescues;           /* --scope device: allocations saved by others' releases */
    int cls;                          /* enum gm_tenant_class, resolved (gm_tenant_class_resolve) */
    uint64_t request_bytes, limit_bytes; /* resolved; 0 = none */
    uint64_t empty_cache_events;         /* torch.cuda.empty_cache() calls replayed */
    uint64_t empty_cache_bytes;          /* what the model released at them         */
    uint64_t phase_empty_caches;         /* --empty-cache-at-phase: calls made ...   */
    uint64_t phase_empty_cache_bytes;    /* ... and what they released              */
    uint64_t recorded_ooms;              /* oom events: allocations that failed in the recording */
    uint64_t recorded_oom_fits;          /* ... of which the model could satisfy      */
    uint64_t init_skipped_blocks;        /* --initial-state none: pre-existing blocks left out */
    int init_live_oom;                   /* 1: the live set at the start did not fit at all */
    /* The trace's free_requested events (record_stream'd blocks whose free
     * is deferred), and the peak of PyTorch's allocated_bytes: A less the
     * blocks waiting for their free. A itself is PyTorch's active_bytes. */
    uint64_t free_requested_events;
    uint64_t peak_torch_allocated_bytes;
    /* PyTorch's allocator statistics at the end of the trace (before the
     * job's memory goes back: what torch.cuda.memory_stats() says at the
     * program's last line), when the model keeps them (has_stats 1) */
    int has_stats;
    gm_alloc_stats stats;
    gm_report *policy_report; /* the policy's own figures (report.h), or NULL */
    uint64_t policy_asks;     /* its policy's on_alloc_fail calls and --scope device asks */
    gm_alloc_limits limits;   /* its model's settings, as a policy read them */
    gm_tier_stats tier;       /* --host-tier, --on-oom chain (host_tier.h)   */
    int degraded;             /* --on-oom chain halved activations: precision degraded */
    gm_metrics m;
    gm_alloc_counters c;
} gm_tenant_result;

typedef struct gm_sim_result {
    size_t n_tenants;
    gm_tenant_result *t;
    gm_metrics device; /* Q, A, R summed over tenants */
    uint64_t capacity_bytes, overhead_bytes, peak_device_used;
    char capacity_source[160]; /* where capacity_bytes came from, for people */
    int initial_state;         /* enum gm_initial_mode the run used          */
    char allocator[32];
    char policy[320];
    int policy_realizable;
    double memory_fraction;
    int on_oom_skip;
    int share; /* enum gm_share_mode the run applied (never AUTO) */
    int mps;   /* --mps: one context for all tenants */
    int on_oom_chain;
    int has_host_tier; /* host_tier is the one the run used (chain: pcie4 by default) */
    gm_host_tier host_tier;
    uint64_t events; /* trace events processed, all tenants */
    double wall_s;
    /* 1: the run's decisions depended on the device's size only through
     * whether its driver calls fitted (sim/device.h): the run is the same on
     * any simulated device from peak_device_used bytes up to capacity_bytes,
     * and above too when no call was refused (refused_calls 0) */
    int capacity_free;
    uint64_t refused_calls;
    /* 1: no driver call was refused and every read of the device's free
     * memory found room (device.h, room_reads): each tenant ran as it would
     * alone, so any subset of the tenants, on this device, runs the same */
    int independent;
    /* 1: every tenant's policy says it is inert with its model's limits
     * (sim/policy.h, gm_policy_ops.inert). With no policy_asks either, the
     * run is that of the same configuration under any policy inert there
     * (study/same_run.h) */
    int policy_inert;
} gm_sim_result;

struct gm_policy_ops;

/* Run cfg with the release policy `policy` and its parameters (params:
 * "k=v,...", "" for none): one instance per tenant. cfg->policy is not read
 * here; gm_simulate (study/simulate.h) resolves it by name and calls this. */
int gm_engine_run(const gm_sim_config *cfg, const struct gm_policy_ops *policy, const char *params,
                  gm_sim_result **out, gm_err *err);
void gm_sim_result_free(gm_sim_result *r);

struct gm_policy;
/* What policy's prepare() (sim/policy.h) makes for tenant i of a run of
 * cfg, made as the run's attach would make it: an instance of its own with
 * params, a model of the tenant's allocator and settings, the tenant's
 * in-memory trace. *out: that instance (gm_policy_destroy), or NULL when
 * there is nothing to prepare (no prepare(), a trace on disk) or it could
 * not be made (settings the run will refuse, out of memory: the run then
 * makes its own, or says why it cannot). Errors: prepare()'s own. */
int gm_engine_prepare(const gm_sim_config *cfg, const struct gm_policy_ops *policy,
                      const char *params, size_t i, struct gm_policy **out, gm_err *err);
/* 1 when gm_engine_prepare has something to make for tenant i: policy
 * prepares, the tenant's trace is in memory, the device is simulated. */
int gm_engine_prepares(const gm_sim_config *cfg, const struct gm_policy_ops *policy, size_t i);

/* The trace hash a run reports (gm_tenant_result.trace_hash) for these
 * events and metadata source (meta->source; NULL: ""): for a spec's
 * trace_hash. */
void gm_trace_hash_events(const char *source, const gm_event *ev, size_t n, char out[17]);
/* The same a chunk at a time, for events that are never all in memory at
 * once: start, then every chunk in order, each GM_TRACE_CHUNK_EVENTS events
 * but the last (the pieces a run reads), then the hex into out. */
void gm_trace_hash_start(gm_hash *h, const char *source);
void gm_trace_hash_chunk(gm_hash *h, const gm_event *ev, size_t n);
void gm_trace_hash_end(const gm_hash *h, char out[17]);
/* 1 (the default): the trace hash uses the CPU's vector instructions where
 * it has them (x86-64 with AVX-512); 0: the portable loop. The value is the
 * same either way (tests hold both to it; benchmarks compare them). */
void gm_trace_hash_simd(int allow);

/* The capacity a run gets from its first trace's metadata m when cfg gives
 * none: the card the trace records (device_total_bytes), else the memory its
 * process was seen to have (device_avail_bytes: that already excludes the
 * CUDA context and other processes, so *overhead becomes 0 unless
 * cfg->overhead_given). 0 if neither is known. why (len bytes) says which. */
uint64_t gm_engine_default_capacity(const gm_sim_config *cfg, const gm_trace_meta *m,
                                    uint64_t *overhead, char *why, size_t len);

/* What a finished run adds up to (result.c). */
/* Completed tenants. */
size_t gm_sim_completed(const gm_sim_result *r);
/* The tenants' allocator counters summed: the device's driver calls, their
 * time, retries, flushes and released bytes (and the largest segment of
 * any). */
gm_alloc_counters gm_sim_totals(const gm_sim_result *r);
/* The run's place in the ranking (metrics.h) and the order of two runs. */
gm_rank_key gm_sim_rank_key(const gm_sim_result *r);
int gm_result_rank_cmp(const gm_sim_result *a, const gm_sim_result *b);

#endif
