/*
 * memory_summary.c - PyTorch's own views of a simulated run's allocator:
 * the torch.cuda.memory_summary() table (`gmsim run --summary`) and the
 * torch.cuda.memory_stats() dictionary (`run --json`, "memory_stats"), from
 * the model's DeviceStats (sim/alloc.h, gm_alloc_stats).
 *
 * The layout is memory_summary's in torch/cuda/memory.py (PyTorch 2.x):
 * 75-column lines between '|'; a title line with the device ID; "CUDA
 * OOMs" (num_ooms) and "cudaMalloc retries" (num_alloc_retries); then per
 * metric (allocated_bytes "Allocated memory", active_bytes "Active
 * memory", requested_bytes "Requested memory", reserved_bytes "GPU
 * reserved memory", inactive_split_bytes "Non-releasable memory",
 * allocation "Allocations", active "Active allocs", segment "GPU reserved
 * segments", inactive_split "Non-releasable allocs") a row for all pools
 * and rows "from large pool" and "from small pool", each with Cur Usage,
 * Peak Usage, Tot Alloc, Tot Freed (a Stat's current, peak, allocated,
 * freed); then "Oversize allocations" and "Oversize GPU segments", one row
 * each. Sizes (_format_size) go up a unit (B, KiB, MiB, GiB, TiB, PiB,
 * dividing by 1024, rounding down) while the reference value is at least
 * 768 KiB; counts (_format_count) up a unit (K, M, by 1000) while it is at
 * least 750 000. The reference value of a sub-row is its metric's "all"
 * figure in the same column, so a column of one metric shares one unit.
 * requested_bytes came with pytorch/pytorch#88575 (2022), before 2.0, the
 * oldest PyTorch whose rules gmsim models, so the row is always there.
 *
 * memory_stats' keys are PyTorch's: "METRIC.POOL.FIGURE" for the array
 * stats (POOL all, large_pool, small_pool; FIGURE current, peak,
 * allocated, freed), "oversize_*.FIGURE", and num_alloc_retries, num_ooms,
 * num_device_alloc, num_device_free, max_split_size (-1 when unset), in
 * the sorted order memory_stats() returns them. num_sync_all_streams is not
 * modelled (the model has no CUDA events to synchronize) and is left out.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "results.h"
#include "table.h"

#define WIDTH 75

typedef struct metric {
    const char *key, *name;
    size_t off; /* of the gm_stat[GM_STAT_TYPES] in gm_alloc_stats */
    int bytes;
} metric;

static const metric METRICS[] = {
    {"allocated_bytes", "Allocated memory", offsetof(gm_alloc_stats, allocated_bytes), 1},
    {"active_bytes", "Active memory", offsetof(gm_alloc_stats, active_bytes), 1},
    {"requested_bytes", "Requested memory", offsetof(gm_alloc_stats, requested_bytes), 1},
    {"reserved_bytes", "GPU reserved memory", offsetof(gm_alloc_stats, reserved_bytes), 1},
    {"inactive_split_bytes", "Non-releasable memory",
     offsetof(gm_alloc_stats, inactive_split_bytes), 1},
    {"allocation", "Allocations", offsetof(gm_alloc_stats, allocation), 0},
    {"active", "Active allocs", offsetof(gm_alloc_stats, active), 0},
    {"segment", "GPU reserved segments", offsetof(gm_alloc_stats, segment), 0},
    {"inactive_split", "Non-releasable allocs", offsetof(gm_alloc_stats, inactive_split), 0},
};
#define N_METRICS (sizeof METRICS / sizeof METRICS[0])

static const gm_stat *stat_array(const gm_alloc_stats *s, const metric *m)
{
    return (const gm_stat *)(const void *)((const char *)s + m->off);
}

/* _format_size: "%6d UNIT" (9 columns). */
static void fmt_size(char *buf, size_t len, uint64_t sz, uint64_t pref)
{
    static const char *const unit[] = {"B  ", "KiB", "MiB", "GiB", "TiB", "PiB"};
    size_t u = 0;
    double p = (double)pref;
    while (u + 1 < sizeof unit / sizeof unit[0] && p >= 768.0 * 1024) {
        u++;
        sz /= 1024;
        p /= 1024;
    }
    snprintf(buf, len, "%6llu %s", (unsigned long long)sz, unit[u]);
}

/* _format_count: "%7d UNIT " (10 columns). */
static void fmt_count(char *buf, size_t len, uint64_t n, uint64_t pref)
{
    static const char *const unit[] = {" ", "K", "M"};
    size_t u = 0;
    double p = (double)pref;
    while (u + 1 < sizeof unit / sizeof unit[0] && p >= 750.0 * 1000) {
        u++;
        n /= 1000;
        p /= 1000;
    }
    snprintf(buf, len, "%7llu %s ", (unsigned long long)n, unit[u]);
}

static void rule(FILE *f, char c)
{
    char line[WIDTH + 1];
    memset(line, c, WIDTH);
    line[WIDTH] = 0;
    fprintf(f, "|%s|\n", line);
}

/* One row: name and the four figures of x, scaled by those of ref. */
static void row(FILE *f, const char *name, const gm_stat *x, const gm_stat *ref, int bytes)
{
    const uint64_t v[4] = {x->current, x->peak, x->allocated, x->freed};
    const uint64_t r[4] = {ref->current, ref->peak, ref->allocated, ref->freed};
    char c[4][32];
    for (int i = 0; i < 4; i++)
        (bytes ? fmt_size : fmt_count)(c[i], sizeof c[i], v[i], r[i]);
    fprintf(f, "| %-21s | %s | %s | %s | %s |\n", name, c[0], c[1], c[2], c[3]);
}

void gm_table_memory_summary(FILE *f, const gm_alloc_stats *s, int device)
{
    rule(f, '=');
    fprintf(f, "| %16s PyTorch CUDA memory summary, device ID %-17d |\n", "", device);
    rule(f, '-');
    fprintf(f, "|  %9s CUDA OOMs: %-12llu | %6s cudaMalloc retries: %-8llu  |\n", "",
            (unsigned long long)s->num_ooms, "", (unsigned long long)s->num_alloc_retries);
    rule(f, '=');
    fprintf(f, "|        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |\n");
    for (size_t i = 0; i < N_METRICS; i++) {
        const metric *m = &METRICS[i];
        const gm_stat *a = stat_array(s, m);
        rule(f, '-');
        row(f, m->name, &a[GM_STAT_ALL], &a[GM_STAT_ALL], m->bytes);
        row(f, "      from large pool", &a[GM_STAT_LARGE], &a[GM_STAT_ALL], m->bytes);
        row(f, "      from small pool", &a[GM_STAT_SMALL], &a[GM_STAT_ALL], m->bytes);
    }
    rule(f, '-');
    row(f, "Oversize allocations", &s->oversize_allocations, &s->oversize_allocations, 0);
    rule(f, '-');
    row(f, "Oversize GPU segments", &s->oversize_segments, &s->oversize_segments, 0);
    rule(f, '=');
}

static void put_stat(json_t *o, const char *prefix, const gm_stat *x)
{
    static const char *const fig[] = {"allocated", "current", "freed", "peak"}; /* sorted */
    const uint64_t v[4] = {x->allocated, x->current, x->freed, x->peak};
    char k[96];
    for (int i = 0; i < 4; i++) {
        snprintf(k, sizeof k, "%s.%s", prefix, fig[i]);
        json_object_set_new(o, k, json_integer((json_int_t)v[i]));
    }
}

static int cmp_metric(const void *x, const void *y)
{
    return strcmp(((const metric *)x)->key, ((const metric *)y)->key);
}

json_t *gm_memory_stats_json(const gm_alloc_stats *s)
{
    metric sorted[N_METRICS];
    memcpy(sorted, METRICS, sizeof sorted);
    qsort(sorted, N_METRICS, sizeof sorted[0], cmp_metric);
    /* the keys in memory_stats()' sorted order: "active" < "active_bytes" <
     * "allocated_bytes" < "allocation" < "inactive_split" < ... < "max_split_size"
     * < "num_*" < "oversize_*" < "requested_bytes" < "reserved_bytes" < "segment" */
    static const char *const pool[] = {"all", "large_pool", "small_pool"};
    static const int pool_type[] = {GM_STAT_ALL, GM_STAT_LARGE, GM_STAT_SMALL};
    json_t *o = json_object();
    char p[64];
    size_t i = 0;
    for (; i < N_METRICS && strcmp(sorted[i].key, "max_split_size") < 0; i++)
        for (int j = 0; j < 3; j++) {
            snprintf(p, sizeof p, "%s.%s", sorted[i].key, pool[j]);
            put_stat(o, p, &stat_array(s, &sorted[i])[pool_type[j]]);
        }
    json_object_set_new(o, "max_split_size", json_integer((json_int_t)s->max_split_size));
    json_object_set_new(o, "num_alloc_retries", json_integer((json_int_t)s->num_alloc_retries));
    json_object_set_new(o, "num_device_alloc", json_integer((json_int_t)s->num_device_alloc));
    json_object_set_new(o, "num_device_free", json_integer((json_int_t)s->num_device_free));
    json_object_set_new(o, "num_ooms", json_integer((json_int_t)s->num_ooms));
    put_stat(o, "oversize_allocations", &s->oversize_allocations);
    put_stat(o, "oversize_segments", &s->oversize_segments);
    for (; i < N_METRICS; i++)
        for (int j = 0; j < 3; j++) {
            snprintf(p, sizeof p, "%s.%s", sorted[i].key, pool[j]);
            put_stat(o, p, &stat_array(s, &sorted[i])[pool_type[j]]);
        }
    return o;
}
