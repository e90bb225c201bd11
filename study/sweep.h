/*
 * sweep.h - `gmsim sweep SPEC`: a grid of simulations from a small JSON
 * file (study/SWEEP.md documents it), tenant mixes x devices x allocators
 * (with settings) x policies, run on a thread pool (pool.h) and, from the
 * command, over MPI ranks (cli/cmd_sweep.c).
 *
 * The plan is a pure function of the spec: every rank expands the same
 * cases in the same order, so case i is the same simulation everywhere and
 * a result is found by its index (or, across runs, by its key). A case's
 * result is a gm_sweep_row: a plain struct of numbers and fixed strings,
 * sent between ranks as bytes, with no time or host in it, so the output is
 * the same whatever the number of threads or ranks.
 */
#ifndef GM_SWEEP_H
#define GM_SWEEP_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "alloc_list.h"
#include "base/err.h"

#define GM_SWEEP_SCHEMA "gmsim-sweep/1"

typedef struct gm_sweep_tenant {
    char trace[1024]; /* as given in the spec                  */
    char path[2048];  /* resolved against the spec's folder      */
    uint64_t offset_ns, quota_bytes;
    uint32_t repeat;
} gm_sweep_tenant;

typedef struct gm_sweep_mix {
    char name[256];
    gm_sweep_tenant *t;
    size_t n;
} gm_sweep_mix;

typedef struct gm_sweep_device {
    char label[64];    /* "24GiB", "a100-80gb", "trace" */
    uint64_t capacity; /* 0: the trace's own            */
} gm_sweep_device;

typedef struct gm_sweep_plan {
    json_t *spec; /* the file as read (owned) */
    gm_sweep_mix *mixes;
    size_t n_mixes;
    gm_sweep_device *devices;
    size_t n_devices;
    gm_alloc_choice *allocs;
    size_t n_allocs;
    char (*policies)[320];
    size_t n_policies;
    uint64_t overhead;
    int overhead_given, on_oom_skip, scope_device, lenient;
    size_t n_cases;
} gm_sweep_plan;

/* The case of index i: mix-major, then device, allocator, policy. */
typedef struct gm_sweep_case {
    size_t mix, device, alloc, policy;
} gm_sweep_case;

enum { GM_SWEEP_KEY = 1200 };

/* A case's result. status GM_OK, or the error (error names it). */
typedef struct gm_sweep_row {
    uint32_t index;
    int32_t status;
    char error[512];
    char allocator[32]; /* the model that ran (the settings may choose it) */
    char trace_hash[17];
    uint8_t realizable;
    int32_t rank; /* 1 = best of its (mix, device) group; 0 = failed or a bound */
    uint64_t capacity_bytes;
    uint32_t n_tenants, tenants_completed;
    uint64_t oom_count, peak_live, peak_allocated, peak_reserved, peak_device_used;
    double fragmentation, frag_time_weighted, utilization, ext_frag_mean;
    uint64_t driver_allocs, driver_frees, driver_ns, events;
} gm_sweep_row;

/* Read and expand a spec; GM_EINVAL naming the file and the key at fault. */
int gm_sweep_plan_load(const char *path, gm_sweep_plan **out, gm_err *err);
void gm_sweep_plan_free(gm_sweep_plan *p);

gm_sweep_case gm_sweep_case_at(const gm_sweep_plan *p, size_t i);
/* "mix | device | allocator[:settings] | policy", unique per case. */
void gm_sweep_case_key(const gm_sweep_plan *p, size_t i, char *buf, size_t len);

/* Simulate case i into *row (never fails: a failure is row->status). */
void gm_sweep_run_case(const gm_sweep_plan *p, size_t i, gm_sweep_row *row);

/* Called once per finished case, one call at a time, from any thread. */
typedef void (*gm_sweep_progress)(void *ctx, const gm_sweep_row *row, double seconds);

/* Run the cases todo[0..n) on `threads` threads (0: one per core); the
 * results land in rows[todo[k]]. */
void gm_sweep_run(const gm_sweep_plan *p, const size_t *todo, size_t n, int threads,
                  gm_sweep_row *rows, gm_sweep_progress progress, void *ctx);

/* Rank the rows of every (mix, device) group with the one ranking
 * (sim/metrics.h gm_rank_cmp): realizable cases that ran, best first, the
 * case order breaking ties; the rest get rank 0. */
void gm_sweep_rank(const gm_sweep_plan *p, gm_sweep_row *rows);

#endif
