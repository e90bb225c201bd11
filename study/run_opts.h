/*
 * run_opts.h - the simulation options every simulating program shares
 * (gmsim run, compare and fit; gmreplay too), parsed one way, described one
 * way. The option loop is each program's (gmsim's: cli/cli.h).
 */
#ifndef GM_RUN_OPTS_H
#define GM_RUN_OPTS_H

#include <getopt.h>
#include <stdio.h>

#include "sim/engine.h"

typedef struct gm_run_opts {
    gm_tenant_spec *tenants;
    size_t n_tenants, cap_tenants;
    gm_tenant_spec next; /* per-trace settings for the traces that follow */
    const char *allocator, *alloc_conf, *policy;
    double memory_fraction;
    uint64_t capacity, overhead; /* --capacity (0: not given), --overhead */
    uint64_t profile_capacity;   /* --device-profile's device, below --capacity and --gpu */
    gm_latency latency;
    int on_oom_skip, lenient, empty_cache_at_phase;
    int no_fast_forward; /* --no-fast-forward (sim/ffwd.h) */
    int scope_device;    /* --scope device */
    int share, mps;      /* --share (enum gm_share_mode), --mps */
    int on_oom_chain;    /* --on-oom chain */
    int has_host_tier;   /* --host-tier given: host_tier */
    gm_host_tier host_tier;
    int overhead_given;         /* --overhead was given (a profile does not override it) */
    const char *device_profile; /* --device-profile FILE, already applied */
    const char *gpu;            /* --gpu NAME (traces/gpus.h): the capacity, unless --capacity */
    uint64_t gpu_bytes;
    char gpu_why[64], profile_why[600]; /* where the capacity came from, for people */
    char size_note[160]; /* --capacity in decimal units: the note the command prints */
    int initial_state;   /* --initial-state: enum gm_initial_mode (default live) */
    int torch_version;   /* --torch-version: GM_TORCH_* (0: the trace's, else newest) */
} gm_run_opts;

void gm_run_opts_init(gm_run_opts *o);
void gm_run_opts_free(gm_run_opts *o);
/* Room for the shared long options, a program's own and the terminator. */
#define GM_RUN_OPTS_LONGOPTS 128
/* Fill `out` (cap entries) with the shared long options followed by `extra`
 * (NULL-terminated). Shared options return values >= 2000. Returns 1, or 0
 * when they did not all fit (the table is cut short: a program's bug,
 * which it must report rather than drop options silently). */
int gm_run_opts_longopts(struct option *out, size_t cap, const struct option *extra);
/* Handle option c (from getopt_long with a leading '-' optstring: c == 1 is
 * a trace path). Returns GM_OK, or GM_EINVAL/GM_EUSAGE with err set. */
int gm_run_opts_parse(gm_run_opts *o, int c, const char *arg, gm_err *err);
/* Help text of the shared options; one_policy = 0 leaves out --policy (for
 * commands that take --policies instead). */
void gm_run_opts_help(FILE *f, int one_policy);

/* 1 when option c (from gm_run_opts_longopts's table; 1 = a trace path)
 * is one gm_run_opts_parse takes. */
int gm_run_opts_owns(int c);
/* --gpu NAME: the GPU's key and memory (traces/gpus.h), or GM_EUSAGE naming the known ones. */
int gm_run_opts_gpu(const char *arg, const char **name, uint64_t *bytes, gm_err *err);
/* --initial-state live|recorded|none <-> enum gm_initial_mode. */
int gm_initial_state_parse(const char *arg, int *mode, gm_err *err);
const char *gm_initial_state_name(int mode);
void gm_run_opts_config(const gm_run_opts *o, gm_sim_config *cfg);

#endif
