/*
 * policy.h - the release-policy seam.
 *
 * A release policy decides what cached (reserved but unallocated) memory an
 * allocator gives back to the driver, and when: on allocation failure, just
 * before the allocator grows, right after it grew, and on a timer. It sees
 * segments through gm_seg_info (alloc.h) and releases them with
 * gm_alloc_release(); it never touches allocator internals.
 *
 * Adding a policy = one file policies/<name>.c defining a const
 * gm_policy_ops, plus one line in policies/registry.c, which finds policies
 * by name (policies/registry.h). The simulator itself only ever sees the
 * resolved ops: the engine makes one instance per tenant with
 * gm_policy_new().
 */
#ifndef GM_POLICY_H
#define GM_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "alloc.h"
#include "report.h"
#include "base/err.h"

/* 2: report() fills a typed gm_report (report.h); 3: prepare(),
 * gm_policy_env.prepared */
#define GM_POLICY_VERSION 3

/* What the allocator is trying to do when it asks the policy. */
typedef struct gm_pressure {
    uint64_t size;       /* rounded block size requested                 */
    uint64_t alloc_size; /* driver allocation the allocator needs         */
    uint64_t stream;
    int small_pool; /* the request's pool                             */
    int attempt;    /* 0, 1, 2... for on_alloc_fail within one malloc  */
    uint64_t now_ns;
} gm_pressure;

/* on_alloc_fail results. */
#define GM_POLICY_RETRY 1    /* released memory: retry the driver now        */
#define GM_POLICY_NEXT 0     /* nothing released at this step: ask again      */
#define GM_POLICY_GIVE_UP -1 /* nothing more to do: the allocation is an OOM  */

/* What a policy may learn about its tenant before the first event (attach).
 * Realizable policies use only the clock and what they observe; the oracle
 * reads the trace's future from trace_path and follows the replay position. */
typedef struct gm_policy_env {
    const char *trace_path;         /* the tenant's trace file ...                   */
    const gm_event *events;         /* ... or, when not NULL, its in-memory events   */
    const struct gm_packed *packed; /* ... or, when not NULL, them packed
                                       (traces/packed.h: read with a cursor) */
    size_t n_events;
    int tenant;         /* index within the run                          */
    uint64_t offset_ns; /* start time on the device                      */
    uint32_t repeat;    /* passes over the trace                         */
    /* live: the engine's position, valid while the run lasts. While the
     * policy is called, *event_index is the pass-local index of the event
     * being processed (or about to be, for timers) and *pass its pass. */
    const uint64_t *event_index;
    const uint32_t *pass;
    const uint64_t *time_shift_ns; /* live: device time = trace time + this */
    /* Not NULL: what prepare() made ahead of this run from the same
     * trace, the same model settings and the same parameters, on an
     * instance of its own (that instance's state). attach takes what it
     * needs from it instead of making it; the instance is destroyed after
     * the run. */
    void *prepared;
} gm_policy_env;

typedef struct gm_policy_ops {
    int version; /* GM_POLICY_VERSION */
    const char *name;
    const char *summary;
    int realizable; /* 0: needs the future (oracle), labelled in every output */
    /* Optional: what a simulation with this policy takes, relative to one
     * with `pytorch` (0 = the same), as bench/gmbench measured it on a
     * trace whose iterations repeat, where `pytorch`'s are fast-forwarded
     * and a policy with timer ticks is simulated event by event
     * (bench/README.md, "Thirteenth round"; predictive and oracle again
     * in the "Sixteenth"). compare and fit split their simulations
     * between threads by it (study/pool.h); nothing else reads it, and no
     * result depends on it. */
    double cost;
    /* params: "key=value,..." from --policy NAME:params, may be "". */
    int (*create)(const char *params, void **state, gm_err *err);
    void (*destroy)(void *state);
    /* No cached block fits and the allocator is about to ask the driver. */
    void (*before_grow)(void *state, gm_alloc *a, const gm_pressure *p);
    /* The driver (or the memory limit) refused; see GM_POLICY_*. Required. */
    int (*on_alloc_fail)(void *state, gm_alloc *a, const gm_pressure *p);
    /* Proactive timer: period in ns (0 = none), and what to do on each tick. */
    uint64_t (*timer_period_ns)(void *state);
    void (*on_timer)(void *state, gm_alloc *a, uint64_t now_ns);
    /* Optional: the policy's own figures, each with its unit, and a one-line
     * summary for comparison tables (report.h); called once, at the end. */
    void (*report)(void *state, gm_report *out);
    /* Optional: called once after the allocator exists, before the first
     * event (the oracle reads its trace's future here). */
    int (*attach)(void *state, gm_alloc *a, const gm_policy_env *env, gm_err *err);
    /* Optional: the part of attach that reads only the trace (the oracle's
     * future), made on an instance that will never run, with a model of
     * the run's settings that nothing else uses, from env's trace (env's
     * live pointers are NULL). A study makes it beside its other runs and
     * gives it to the run's attach (env->prepared; study/prep.h), which
     * then does not make it again. prepare_share: the part of the run's
     * time it takes (the study's plan splits the cost by it). */
    int (*prepare)(void *state, gm_alloc *a, const gm_policy_env *env, gm_err *err);
    double prepare_share;
    /* Optional, --scope device: another tenant's allocation failed even after
     * its own policy gave up. Release cached memory, at least need_bytes if
     * there is that much (the policy picks what); return the bytes released.
     * NULL: the engine empties this tenant's cache (torch.cuda.empty_cache). */
    uint64_t (*on_foreign_pressure)(void *state, gm_alloc *a, uint64_t need_bytes, uint64_t now_ns);
    /* Optional, admission control (tiered): called before each tensor
     * allocation of `size` requested bytes for a tensor of `category`
     * (traces/trace.h). 0 refuses it: the allocation is an OOM as if the
     * device had refused it (skipped with --on-oom skip), and the model is
     * not asked. NULL admits everything. */
    int (*admit)(void *state, gm_alloc *a, uint64_t size, uint8_t category, uint64_t now_ns);
    /* Optional: a tensor allocation succeeded (freed 0; `handle` is what
     * the model returned, `category` the tensor's) or a tensor is about to
     * be freed (freed 1, called before the model frees it; category
     * GM_CAT_UNKNOWN: the policy keeps what it needs by handle). Blocks rebuilt from /initial_state
     * are not announced, and their frees are (the policy skips handles it
     * never saw). */
    void (*on_tensor)(void *state, gm_alloc *a, uint64_t handle, uint8_t category, int freed,
                      uint64_t now_ns);
    /* Optional: 1 when an instance with these parameters, on a model with
     * these limits, acts only when asked (on_alloc_fail after a refusal;
     * on_foreign_pressure, or the engine's empty_cache in its place, for
     * another tenant under --scope device; both counted in gm_policy.asks):
     * its before_grow releases nothing and changes no state, it has no
     * timer, admit or on_tensor, and its report at the end of a run that
     * never asked it is a fresh instance's. Two policies that both say so
     * make the same run of a configuration until the first ask, so a run
     * with none is each one's (gm_sim_result.policy_inert,
     * study/same_run.h). NULL: not known, every run is its own. */
    int (*inert)(const char *params, const gm_alloc_limits *limits);
} gm_policy_ops;

/* An instance: ops + state + its parameter string (for reproducibility). */
typedef struct gm_policy {
    const gm_policy_ops *ops;
    void *state;
    char params[256];
    uint64_t asks; /* on_alloc_fail calls (gm_policy_ask), and the engine's asks to
                      release for another tenant (--scope device) */
} gm_policy;

/* An instance of ops with its parameters ("k=v,..." or "", copied). */
int gm_policy_new(const gm_policy_ops *ops, const char *params, gm_policy **out, gm_err *err);
void gm_policy_destroy(gm_policy *p);

/* The model's one way to call a->policy's on_alloc_fail: counted in
 * a->policy->asks, which says whether a run ever asked its policy
 * (gm_policy_ops.inert). */
int gm_policy_ask(gm_alloc *a, const gm_pressure *p);

/* What a model (sim/alloc_<name>.c) does when nothing it caches fits: tell
 * the policy (before_grow), call grow(a, ctx) (GM_OK when it got memory),
 * and while that fails ask on_alloc_fail, retrying grow after each
 * GM_POLICY_RETRY (counted in a->c.grow_retries, and in num_alloc_retries when the
 * policy flushed the whole cache first), until it succeeds
 * (GM_OK) or the policy gives up (GM_EOOM). p->attempt is advanced here. */
int gm_policy_grow(gm_alloc *a, gm_pressure *p, int (*grow)(gm_alloc *a, void *ctx), void *ctx);

/* Parameter helper: find key in "k=v,k2=v2"; copies value into buf. 1 if found. */
int gm_policy_param(const char *params, const char *key, char *buf, size_t len);
/* Reject keys not in the NULL-terminated list `known`. */
int gm_policy_check_params(const char *policy, const char *params, const char *const *known,
                           gm_err *err);

#endif
