/* trace_info.c - `gmsim info`: a trace summary (traces/trace_scan.h) as
 * the text table and as JSON (table.h, results.h). */
#include <gsl/gsl_histogram.h>
#include <inttypes.h>
#include <string.h>

#include "results.h"
#include "table.h"
#include "base/units.h"

#define INFO_BAR_WIDTH 40

/* ------------------------------------------------------------------ text */

/* A power-of-two bin edge as "512 B", "4 KiB", "2 MiB". */
static void fmt_edge(uint64_t v, char *buf, size_t len)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int u = 0;
    while (v >= 1024 && v % 1024 == 0 && u < 5) {
        v /= 1024;
        u++;
    }
    snprintf(buf, len, "%" PRIu64 " %s", v, units[u]);
}

#define INFO_TOP_SITES 10

/* The call sites holding the most bytes at the peak (trace.h, /sites). */
static void print_sites(FILE *f, const gm_trace_scan *s)
{
    if (!s->sites.n) return;
    gm_site_live top[INFO_TOP_SITES];
    size_t n = gm_site_tally_top(&s->tally, 1, top, INFO_TOP_SITES);
    char b1[32];
    fprintf(f, "top call sites at peak (%zu sites in the trace):  live bytes  allocations\n",
            s->sites.n);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "  %-44s %12s %11" PRIu64 "\n", gm_sites_name(&s->sites, top[i].site),
                gm_fmt_bytes(top[i].bytes, b1, sizeof b1), top[i].count);
    if (s->tally.pcount[0])
        fprintf(f, "  %-44s %12s %11" PRIu64 "\n", "(no site recorded)",
                gm_fmt_bytes(s->tally.pbytes[0], b1, sizeof b1), s->tally.pcount[0]);
}

static void print_histogram(FILE *f, const gm_trace_scan *s)
{
    size_t lo = GM_SCAN_HIST_BINS, hi = 0;
    double maxc = 0;
    for (size_t i = 0; i < GM_SCAN_HIST_BINS; i++) {
        double c = gsl_histogram_get(s->h_count, i);
        if (c > 0) {
            lo = i < lo ? i : lo;
            hi = i;
        }
        maxc = c > maxc ? c : maxc;
    }
    fprintf(f, "size histogram (allocations by requested size, log2 bins):\n");
    if (lo > hi) {
        fprintf(f, "  (no allocations)\n");
        return;
    }
    for (size_t i = lo; i <= hi; i++) {
        double a, b;
        gsl_histogram_get_range(s->h_count, i, &a, &b);
        char ea[24], eb[24], label[56], bytes[32];
        fmt_edge((uint64_t)a, ea, sizeof ea);
        fmt_edge((uint64_t)b, eb, sizeof eb);
        if (i == 0)
            snprintf(label, sizeof label, "< %s", eb);
        else
            snprintf(label, sizeof label, "%s - %s", ea, eb);
        double c = gsl_histogram_get(s->h_count, i);
        int w = c > 0 ? (int)(c / maxc * INFO_BAR_WIDTH + 0.5) : 0;
        if (c > 0 && w == 0) w = 1;
        char bar[INFO_BAR_WIDTH + 1];
        memset(bar, '#', (size_t)w);
        bar[w] = '\0';
        fprintf(f, "  %-19s %9.0f %12s  %s\n", label, c,
                gm_fmt_bytes((uint64_t)gsl_histogram_get(s->h_bytes, i), bytes, sizeof bytes), bar);
    }
}

static const char *or_none(const char *s)
{
    return s && *s ? s : "(none)";
}

void gm_table_info(FILE *f, const gm_trace_scan *s, const gm_trace_reader *r, const char *name)
{
    const gm_trace_meta *m = gm_trace_meta_get(r);
    char b1[32], b2[32], b3[32];
    fprintf(f, "trace:               %s\n", name ? name : gm_trace_path(r));
    fprintf(f, "source:              %s\n", or_none(m->source));
    fprintf(f, "device:              %s, %s total\n",
            m->device_name && *m->device_name ? m->device_name : "(unknown)",
            m->device_total_bytes ? gm_fmt_bytes(m->device_total_bytes, b1, sizeof b1) : "unknown");
    fprintf(f, "created:             %s\n", or_none(m->created_utc));
    fprintf(f, "command:             %s\n", or_none(m->command));
    fprintf(f, "workload:            %s\n", or_none(m->workload));
    fprintf(f, "alloc_conf:          %s\n", or_none(m->alloc_conf));
    if (m->torch_version && *m->torch_version)
        fprintf(f, "recorded by:         PyTorch %s\n", m->torch_version);
    fprintf(f, "dropped records:     %" PRIu64 "\n", m->dropped_records);
    if (m->device_avail_bytes) {
        fprintf(f, "memory the process had: %s (at least %s",
                gm_fmt_bytes(m->device_avail_bytes, b1, sizeof b1),
                gm_fmt_bytes(m->device_avail_min_bytes, b2, sizeof b2));
        if (m->device_avail_max_bytes)
            fprintf(f, ", less than %s", gm_fmt_bytes(m->device_avail_max_bytes, b3, sizeof b3));
        fprintf(f, "): %s\n", or_none(m->device_avail_source));
    }
    fprintf(f, "events:              %" PRIu64, s->nevents);
    for (int op = 0; op < GM_OP_COUNT; op++) /* version 2 ops only when present */
        if (op < GM_OP_COUNT_V1 || s->by_op[op])
            fprintf(f, "%s%s %" PRIu64, op ? ", " : " (", gm_op_name(op), s->by_op[op]);
    fprintf(f, ")\n");
    fprintf(f, "time span:           %s (t_ns %" PRIu64 " .. %" PRIu64 ")\n",
            gm_fmt_ns(s->t_last - s->t_first, b1, sizeof b1), s->t_first, s->t_last);
    fprintf(f, "allocations:         %" PRIu64 "\n", s->by_op[GM_OP_ALLOC]);
    fprintf(f, "bytes allocated:     %s (%" PRIu64 " B), largest %s\n",
            gm_fmt_bytes(s->alloc_bytes, b1, sizeof b1), s->alloc_bytes,
            gm_fmt_bytes(s->max_size, b2, sizeof b2));
    fprintf(f, "peak live bytes:     %s (%" PRIu64 " B requested)",
            gm_fmt_bytes(s->peak_live, b1, sizeof b1), s->peak_live);
    if (s->peak_live > s->pre_bytes)
        fprintf(f, " at event %" PRIu64 ", t=%s", s->peak_index,
                gm_fmt_ns(s->peak_t, b2, sizeof b2));
    fprintf(f, "\n");
    fprintf(f,
            "pre-existing bytes:  %s (%" PRIu64 " B in %" PRIu64 " blocks; %" PRIu64
            " segments, %s)\n",
            gm_fmt_bytes(s->pre_bytes, b1, sizeof b1), s->pre_bytes, s->pre_blocks,
            s->init_segments, gm_fmt_bytes(s->init_segment_bytes, b3, sizeof b3));
    if (s->init_expandable || s->init_private)
        fprintf(f,
                "  of those segments: %" PRIu64 " expandable, %" PRIu64
                " in CUDA-graph private pools (%s, kept apart from the default pools)\n",
                s->init_expandable, s->init_private,
                gm_fmt_bytes(s->init_private_bytes, b1, sizeof b1));
    if (s->init_segments)
        fprintf(f, "  largest free block in them: %s\n",
                gm_fmt_bytes(s->init_largest_free, b1, sizeof b1));
    if (s->by_op[GM_OP_EMPTY_CACHE])
        fprintf(f, "empty_cache calls:   %" PRIu64 " (torch.cuda.empty_cache(), replayed)\n",
                s->by_op[GM_OP_EMPTY_CACHE]);
    if (s->by_op[GM_OP_OOM])
        fprintf(f,
                "recorded OOMs:       %" PRIu64 " allocation(s) failed in the recording and were "
                "survived (replayed as attempts)\n",
                s->by_op[GM_OP_OOM]);
    fprintf(f, "live at end:         %s in %zu allocations\n",
            gm_fmt_bytes(s->live_bytes, b1, sizeof b1), s->live.count);
    if (s->peak_reserved)
        fprintf(f, "recorded reserved:   peak %s (segments of the recorded allocator)\n",
                gm_fmt_bytes(s->peak_reserved, b1, sizeof b1));
    fprintf(f,
            "markers:             %" PRIu64 " (iteration %" PRIu64 ", range push %" PRIu64
            ", range pop %" PRIu64 ", instant %" PRIu64 ")\n",
            s->markers, s->marker_kinds[0], s->marker_kinds[1], s->marker_kinds[2],
            s->marker_kinds[3]);
    fprintf(f, "unknown frees:       %" PRIu64 "\n", s->unknown_frees);
    if (s->live_reallocs)
        fprintf(f, "allocs of a live address: %" PRIu64 " (first at event %" PRIu64 ")\n",
                s->live_reallocs, s->first_realloc_index);

    fprintf(f, "by category:              allocs        bytes   live at peak\n");
    for (int c = 0; c < GM_CAT_COUNT; c++)
        fprintf(f, "  %-20s %11" PRIu64 " %12s %14s\n", gm_category_name(c), s->cat_count[c],
                gm_fmt_bytes(s->cat_bytes[c], b1, sizeof b1),
                gm_fmt_bytes(s->peak_cat[c], b2, sizeof b2));
    print_sites(f, s);
    fprintf(f, "by phase:                 allocs        bytes\n");
    for (int p = 0; p < GM_PHASE_COUNT; p++)
        fprintf(f, "  %-20s %11" PRIu64 " %12s\n", gm_phase_name(p), s->phase_count[p],
                gm_fmt_bytes(s->phase_bytes[p], b1, sizeof b1));
    print_histogram(f, s);
}

/* ------------------------------------------------------------------ JSON */

static json_t *sites_json(const gm_trace_scan *s)
{
    gm_site_live top[INFO_TOP_SITES];
    size_t n = gm_site_tally_top(&s->tally, 1, top, INFO_TOP_SITES);
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(
            a, json_pack("{s:I,s:o,s:I,s:I}", "site", (json_int_t)top[i].site, "name",
                         gm_json_text(gm_sites_name(&s->sites, top[i].site)), "bytes",
                         (json_int_t)top[i].bytes, "count", (json_int_t)top[i].count));
    return a;
}

static json_t *json_u64(uint64_t v)
{
    return json_integer((json_int_t)v);
}

static json_t *json_str(const char *s)
{
    return gm_json_text(s);
}

static json_t *meta_json(const gm_trace_meta *m)
{
    json_t *o = json_object();
    json_object_set_new(o, "version", json_integer(m->version));
    json_object_set_new(o, "source", json_str(m->source));
    json_object_set_new(o, "device_name", json_str(m->device_name));
    json_object_set_new(o, "device_total_bytes", json_u64(m->device_total_bytes));
    json_object_set_new(o, "created_utc", json_str(m->created_utc));
    json_object_set_new(o, "command", json_str(m->command));
    json_object_set_new(o, "workload", json_str(m->workload));
    json_object_set_new(o, "alloc_conf", json_str(m->alloc_conf));
    json_object_set_new(o, "dropped_records", json_u64(m->dropped_records));
    json_object_set_new(o, "device_avail_bytes", json_u64(m->device_avail_bytes));
    json_object_set_new(o, "device_avail_min_bytes", json_u64(m->device_avail_min_bytes));
    json_object_set_new(o, "device_avail_max_bytes", json_u64(m->device_avail_max_bytes));
    json_object_set_new(o, "device_avail_source", json_str(m->device_avail_source));
    json_object_set_new(o, "torch_version", json_str(m->torch_version));
    return o;
}

static json_t *counts_json(const uint64_t *count, const uint64_t *bytes, int n,
                           const char *(*name)(int))
{
    json_t *o = json_object();
    for (int i = 0; i < n; i++) {
        json_t *e = json_object();
        json_object_set_new(e, "allocs", json_u64(count[i]));
        json_object_set_new(e, "bytes", json_u64(bytes[i]));
        json_object_set_new(o, name(i), e);
    }
    return o;
}

static json_t *histogram_json(const gm_trace_scan *s)
{
    json_t *a = json_array();
    for (size_t i = 0; i < GM_SCAN_HIST_BINS; i++) {
        double lo, hi, c = gsl_histogram_get(s->h_count, i);
        if (c <= 0) continue;
        gsl_histogram_get_range(s->h_count, i, &lo, &hi);
        json_t *e = json_object();
        json_object_set_new(e, "lo_bytes", json_u64((uint64_t)lo));
        json_object_set_new(e, "hi_bytes", json_u64((uint64_t)hi));
        json_object_set_new(e, "allocs", json_u64((uint64_t)c));
        json_object_set_new(e, "bytes", json_u64((uint64_t)gsl_histogram_get(s->h_bytes, i)));
        json_array_append_new(a, e);
    }
    return a;
}

json_t *gm_trace_info_json(const gm_trace_scan *s, const gm_trace_reader *r, const char *name)
{
    json_t *o = json_object();
    json_object_set_new(o, "trace", json_str(name ? name : gm_trace_path(r)));
    json_object_set_new(o, "meta", meta_json(gm_trace_meta_get(r)));
    json_object_set_new(o, "events", json_u64(s->nevents));
    json_t *ops = json_object();
    for (int op = 0; op < GM_OP_COUNT; op++)
        json_object_set_new(ops, gm_op_name(op), json_u64(s->by_op[op]));
    json_object_set_new(o, "events_by_op", ops);
    json_object_set_new(o, "t_first_ns", json_u64(s->t_first));
    json_object_set_new(o, "t_last_ns", json_u64(s->t_last));
    json_object_set_new(o, "span_ns", json_u64(s->t_last - s->t_first));
    json_object_set_new(o, "allocations", json_u64(s->by_op[GM_OP_ALLOC]));
    json_object_set_new(o, "bytes_allocated", json_u64(s->alloc_bytes));
    json_object_set_new(o, "largest_alloc_bytes", json_u64(s->max_size));
    json_object_set_new(o, "peak_live_bytes", json_u64(s->peak_live));
    json_object_set_new(o, "peak_live_event", json_u64(s->peak_index));
    json_object_set_new(o, "peak_live_t_ns", json_u64(s->peak_t));
    json_object_set_new(o, "pre_existing_bytes", json_u64(s->pre_bytes));
    json_object_set_new(o, "pre_existing_blocks", json_u64(s->pre_blocks));
    json_object_set_new(o, "initial_segments", json_u64(s->init_segments));
    json_object_set_new(o, "initial_segment_bytes", json_u64(s->init_segment_bytes));
    json_object_set_new(o, "initial_expandable_segments", json_u64(s->init_expandable));
    json_object_set_new(o, "initial_private_pool_segments", json_u64(s->init_private));
    json_object_set_new(o, "initial_private_pool_bytes", json_u64(s->init_private_bytes));
    json_object_set_new(o, "initial_largest_free_bytes", json_u64(s->init_largest_free));
    json_object_set_new(o, "live_at_end_bytes", json_u64(s->live_bytes));
    json_object_set_new(o, "live_at_end_allocations", json_u64(s->live.count));
    json_object_set_new(o, "recorded_peak_reserved_bytes", json_u64(s->peak_reserved));
    json_object_set_new(o, "markers", json_u64(s->markers));
    json_object_set_new(o, "iteration_markers", json_u64(s->marker_kinds[GM_MARK_ITERATION]));
    json_object_set_new(o, "unknown_frees", json_u64(s->unknown_frees));
    json_object_set_new(o, "allocs_of_live_address", json_u64(s->live_reallocs));
    json_object_set_new(o, "by_category",
                        counts_json(s->cat_count, s->cat_bytes, GM_CAT_COUNT, gm_category_name));
    json_object_set_new(o, "by_phase",
                        counts_json(s->phase_count, s->phase_bytes, GM_PHASE_COUNT, gm_phase_name));
    json_t *pk = json_object(); /* what the peak is made of (initial-state blocks included) */
    for (int c = 0; c < GM_CAT_COUNT; c++)
        json_object_set_new(pk, gm_category_name(c), json_u64(s->peak_cat[c]));
    json_object_set_new(o, "live_at_peak_by_category", pk);
    json_object_set_new(o, "sites", json_u64(s->sites.n));
    json_object_set_new(o, "live_at_peak_by_site", sites_json(s)); /* the top ones, largest first */
    json_object_set_new(o, "live_at_peak_unknown_site_bytes",
                        json_u64(s->tally.n ? s->tally.pbytes[0] : 0));
    json_object_set_new(o, "size_histogram", histogram_json(s));
    return o;
}
