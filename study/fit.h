/*
 * fit.h - `gmsim fit`: per release policy, the smallest capacity at which
 * the input runs without OOM, or the most copies of it that fit on one
 * device; the searches of the policies run in parallel threads (pool.h).
 */
#ifndef GM_FIT_H
#define GM_FIT_H

#include "base/units.h"
#include "sim/engine.h"

#define GM_FIT_STEP (2ull * GM_MiB) /* capacity resolution of fit */
/* A device no run fills (1 PiB): with no capacity given and none recorded,
 * a search starts from what the run reaches on it (peak live and cache). */
#define GM_FIT_PROBE_BYTES (1ull << 50)

typedef struct gm_fit_entry {
    char spec[320];
    int realizable;
    int deployable; /* the policy pytorch: runs on stock PyTorch (gm_policy_spec_deployable) */
    int rc;         /* GM_OK or the error of a failed simulation (err) */
    gm_err err;
    /* capacity mode */
    int found;              /* a capacity without OOM exists up to max_capacity */
    uint64_t capacity;      /* smallest capacity without OOM (multiple of 2 MiB) */
    uint64_t oom_capacity;  /* capacity - 2 MiB: simulated, has an OOM */
    uint64_t max_capacity;  /* the largest capacity tried                  */
    uint64_t peak_live;     /* device peak live bytes (run at `capacity`)   */
    uint64_t peak_reserved; /* device peak reserved at `capacity`           */
    /* tenants mode */
    uint32_t copies_fit; /* most copies that all ran without OOM         */
    uint32_t copies_tried;
    uint32_t first_fail_completed; /* tenants that completed at copies_fit + 1 */
    uint32_t runs;                 /* simulations this entry needed                */
    uint32_t shared_runs;          /* of those, another policy's run taken (study/same_run.h) */
    /* density mode (gm_fit_density): the scheduling mode of this row, its
     * label, and at copies_fit: jobs on the device, the protected tenants'
     * slowdown and the device's memory utilization, the other tenants'
     * OOMs; why one more copy did not fit */
    int mode; /* enum gm_density_mode */
    char label[96];
    uint32_t jobs;
    double slowdown, utilization;
    uint64_t other_ooms;
    char refusal[200];
    uint64_t events_simulated; /* trace events they processed (a run that hits an
                                  OOM stops there): runs in full-run equivalents
                                  = events_simulated / the trace's events      */
} gm_fit_entry;

/* The scheduling modes density compares (README, "Sharing a GPU"). */
enum gm_density_mode {
    GM_DENSITY_ONE_PER_GPU = 0, /* each trace alone on a device: 1 job per GPU */
    GM_DENSITY_HARD_CAP = 1,    /* --share hard-cap: caps at the limits, placed by the caps */
    GM_DENSITY_REQUESTS = 2,    /* --share requests with a release policy */
    GM_DENSITY_SCOPE = 3,       /* no classes, --scope device with a release policy */
};

typedef struct gm_fit {
    size_t n;
    gm_fit_entry *e;
    int tenants_mode;
    int density;         /* gm_fit_density's rows */
    int protected_class; /* density: the class whose OOMs decide (GM_CLASS_GUARANTEED), or
                            GM_CLASS_UNSET: no tenant is guaranteed, every tenant decides */
    uint32_t max_copies;
    uint64_t stagger_ns;
    uint64_t capacity_bytes; /* tenants mode: the device; capacity mode: where the search began */
    int probed;              /* capacity mode: no start was given: probed per policy */
    int threads;
    double wall_s;
} gm_fit;

/* Capacity mode: for each spec, binary search (2 MiB steps) for the
 * smallest capacity at which base runs without OOM, searching up to
 * max_capacity (0: 16 x the start). The start is base's capacity, else the
 * trace's device, else the device a probe run on GM_FIT_PROBE_BYTES used
 * (peak reserved + context): no starting point is ever asked for. Below
 * peak live + context nothing fits, so that is the search's floor. */
int gm_fit_capacity(const gm_sim_config *base, char *const *specs, size_t n, int threads,
                    uint64_t max_capacity, gm_fit **out, gm_err *err);
/* Tenants mode: for each spec, k = 1..max_copies copies of base's tenants
 * (copy i starts i * stagger_ns later) on base's capacity; the k before
 * the first k at which a tenant has an OOM or does not complete (what a
 * scan from 1 up finds; fit.c searches it with fewer runs where runs that
 * fitted show the smaller counts fit too). */
int gm_fit_tenants(const gm_sim_config *base, char *const *specs, size_t n, int threads,
                   uint32_t max_copies, uint64_t stagger_ns, gm_fit **out, gm_err *err);
/* Density (fit --tenants with classes, requests or limits): per scheduling
 * mode, the most copies of base's tenants (k = 1..max_copies, copy i
 * starting i * stagger_ns later) at which the guaranteed tenants (every
 * tenant when none is guaranteed) all complete without OOM, a run the
 * mode's admission refuses counting as not fitting; the modes: one job per
 * GPU and hard caps under the policy pytorch, requests/limits and device
 * scope under each of specs (release policies). Slowdown: the protected
 * tenants' modelled driver time, plus their host tier transfers when base
 * has a host tier or the OOM chain, over their time on the device (the
 * engine does not delay events by it); utilization: time-weighted allocated bytes
 * over the device's capacity. */
int gm_fit_density(const gm_sim_config *base, char *const *specs, size_t n, int threads,
                   uint32_t max_copies, uint64_t stagger_ns, gm_fit **out, gm_err *err);
/* 1 when a tenant of base gives a class, a request or a limit (fit
 * --tenants then answers by scheduling mode). */
int gm_fit_wants_density(const gm_sim_config *base);
void gm_fit_free(gm_fit *f);

#endif
