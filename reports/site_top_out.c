/* site_top_out.c - `--top-sites N` (study/site_top.h) as text, as PyTorch's
 * profiler memory table (`--profiler`), and as JSON. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "results.h"
#include "table.h"
#include "base/units.h"

#define NO_SITE "(no site recorded)"

const char *gm_top_sites_none_note(void)
{
    return "this trace has no call sites (no /sites table): only an imported PyTorch memory "
           "snapshot recorded with stacks (torch.cuda.memory._record_memory_history(stacks="
           "\"python\" or \"all\")) names them; gmsim gen and gmcapture traces do not";
}

static const char *site_name(const gm_site_acc *c, uint32_t s)
{
    const char *n = s ? gm_sites_name(&c->sites, s) : NULL;
    return n ? n : NO_SITE;
}

static void peak_words(FILE *f, const gm_top_sites *ts)
{
    char b1[32];
    fprintf(f, "%s: %s",
            ts->simulated ? "the simulated peak of allocated memory" : "the peak of live bytes",
            gm_fmt_bytes(ts->peak_bytes, b1, sizeof b1));
    if (ts->peak_tenant < 0)
        fprintf(f, ", in the initial state");
    else if (ts->n > 1)
        fprintf(f, ", after event %" PRIu64 " of %s", ts->peak_event, ts->names[ts->peak_tenant]);
    else
        fprintf(f, ", after event %" PRIu64, ts->peak_event);
}

/* ------------------------------------------------------------ text */

static void plain(FILE *f, const gm_top_sites *ts, size_t t, const gm_site_row *rows, size_t n,
                  int by_peak)
{
    char b1[32], b2[32];
    const gm_site_acc *c = &ts->t[t];
    if (by_peak)
        fprintf(f, "  %-46s %12s %8s %16s\n", "by live bytes at the peak:", "live at peak",
                "tensors", "bytes allocated");
    else
        fprintf(f, "  %-46s %12s %16s %13s\n", "by bytes allocated over the run:", "allocations",
                "bytes allocated", "live at peak");
    gm_site_row none = gm_top_sites_row(ts, t, 0);
    for (size_t i = 0; i <= n; i++) {
        const gm_site_row *r = i < n ? &rows[i] : &none;
        if (i == n && !(by_peak ? r->peak_count : r->alloc_count)) break;
        if (by_peak)
            fprintf(f, "    %-44s %12s %8" PRIu64 " %16s\n", site_name(c, r->site),
                    gm_fmt_bytes(r->peak_bytes, b1, sizeof b1), r->peak_count,
                    gm_fmt_bytes(r->alloc_bytes, b2, sizeof b2));
        else
            fprintf(f, "    %-44s %12" PRIu64 " %16s %13s\n", site_name(c, r->site), r->alloc_count,
                    gm_fmt_bytes(r->alloc_bytes, b1, sizeof b1),
                    gm_fmt_bytes(r->peak_bytes, b2, sizeof b2));
    }
}

/* PyTorch's _format_memory (torch/autograd/profiler_util.py): 1024-based,
 * two decimals, "Gb", "Mb", "Kb", else "N b"; negative amounts keep their sign. */
static char *torch_mem(int64_t v, char *buf, size_t len)
{
    double a = (double)(v < 0 ? -v : v), x = (double)v;
    if (a >= 1073741824.0)
        snprintf(buf, len, "%.2f Gb", x / 1073741824.0);
    else if (a >= 1048576.0)
        snprintf(buf, len, "%.2f Mb", x / 1048576.0);
    else if (a >= 1024.0)
        snprintf(buf, len, "%.2f Kb", x / 1024.0);
    else
        snprintf(buf, len, "%" PRId64 " b", v);
    return buf;
}

#define PROF_COL 12      /* profiler_util.py: DEFAULT_COLUMN_WIDTH */
#define PROF_NAME_MAX 55 /* its max_name_column_width */

static void dashes(FILE *f, int name_w)
{
    fprintf(f, "%.*s", name_w, "-------------------------------------------------------");
    for (int i = 0; i < 3; i++)
        fprintf(f, "  %.*s", PROF_COL, "------------");
    fprintf(f, "\n");
}

/* The profiler's memory columns, one row per call site, sorted as
 * sort_by="cuda_memory_usage" sorts (largest first), row_limit = n. */
static void profiler(FILE *f, const gm_top_sites *ts, size_t t, const gm_site_row *rows, size_t n)
{
    const gm_site_acc *c = &ts->t[t];
    gm_site_row none = gm_top_sites_row(ts, t, 0);
    size_t all = n + (none.alloc_count ? 1 : 0);
    int w = 4; /* "Name" */
    for (size_t i = 0; i < all; i++) {
        int l = (int)strlen(site_name(c, i < n ? rows[i].site : 0)) + 4;
        w = l > w ? l : w;
    }
    w = w < PROF_NAME_MAX ? w : PROF_NAME_MAX;
    dashes(f, w);
    fprintf(f, "%-*s  %*s  %*s  %*s\n", w, "Name", PROF_COL, "CUDA Mem", PROF_COL, "Self CUDA Mem",
            PROF_COL, "# of Calls");
    dashes(f, w);
    for (size_t i = 0; i < all; i++) {
        const gm_site_row *r = i < n ? &rows[i] : &none;
        const char *name = site_name(c, r->site);
        char cut[PROF_NAME_MAX + 1], m1[32];
        if ((int)strlen(name) >= PROF_NAME_MAX - 3) { /* as the profiler cuts a long name */
            snprintf(cut, sizeof cut, "%.*s...", PROF_NAME_MAX - 3, name);
            name = cut;
        }
        char m2[32];
        torch_mem(r->cuda_mem, m1, sizeof m1);
        torch_mem(gm_site_row_self(r), m2, sizeof m2);
        fprintf(f, "%-*s  %*s  %*s  %*" PRIu64 "\n", w, name, PROF_COL, m1, PROF_COL, m2, PROF_COL,
                r->alloc_count);
    }
    dashes(f, w);
    fprintf(f, "Self CUDA Mem: block bytes the site allocated less those of them freed; CUDA "
               "Mem: with the sites called from its frame (their stacks hold it)\n");
}

void gm_table_top_sites(FILE *f, const gm_top_sites *ts, size_t k, int as_profiler)
{
    gm_site_row *rows = calloc(k ? k : 1, sizeof *rows);
    for (size_t t = 0; t < ts->n; t++) {
        const gm_site_acc *c = &ts->t[t];
        fprintf(f, "\ntop %zu call sites of %s", k, ts->names[t]);
        if (!c->sites.n) {
            fprintf(f, ": %s\n", gm_top_sites_none_note());
            continue;
        }
        if (!rows) {
            fprintf(f, ": out of host memory\n");
            continue;
        }
        fprintf(f, " (%zu sites in the trace), ", c->sites.n);
        if (as_profiler) {
            fprintf(f,
                    "as prof.key_averages().table(sort_by=\"cuda_memory_usage\", row_limit=%zu) "
                    "prints them:\n",
                    k);
            profiler(f, ts, t, rows, gm_top_sites_rows(ts, t, GM_SITE_BY_CUDA_MEM, rows, k));
            continue;
        }
        fprintf(f, "live bytes at ");
        peak_words(f, ts);
        fprintf(f, "\n");
        plain(f, ts, t, rows, gm_top_sites_rows(ts, t, GM_SITE_BY_ALLOC, rows, k), 0);
        plain(f, ts, t, rows, gm_top_sites_rows(ts, t, GM_SITE_BY_PEAK, rows, k), 1);
    }
    free(rows);
}

/* ------------------------------------------------------------ JSON */

static json_t *row_json(const gm_site_acc *c, const gm_site_row *r)
{
    json_t *o = json_object();
    json_object_set_new(o, "site", json_integer(r->site));
    json_object_set_new(o, "name", gm_json_text(site_name(c, r->site)));
    json_object_set_new(o, "allocations", json_integer((json_int_t)r->alloc_count));
    json_object_set_new(o, "bytes_allocated", json_integer((json_int_t)r->alloc_bytes));
    json_object_set_new(o, "frees", json_integer((json_int_t)r->free_count));
    json_object_set_new(o, "bytes_freed", json_integer((json_int_t)r->freed_bytes));
    json_object_set_new(o, "block_bytes_allocated", json_integer((json_int_t)r->alloc_block_bytes));
    json_object_set_new(o, "block_bytes_freed", json_integer((json_int_t)r->freed_block_bytes));
    json_object_set_new(o, "self_cuda_mem_bytes", json_integer((json_int_t)gm_site_row_self(r)));
    json_object_set_new(o, "cuda_mem_bytes", json_integer((json_int_t)r->cuda_mem));
    json_object_set_new(o, "peak_live_bytes", json_integer((json_int_t)r->peak_bytes));
    json_object_set_new(o, "peak_live_allocations", json_integer((json_int_t)r->peak_count));
    return o;
}

static json_t *list_json(const gm_top_sites *ts, size_t t, int order, gm_site_row *rows, size_t k)
{
    json_t *a = json_array();
    size_t n = rows ? gm_top_sites_rows(ts, t, order, rows, k) : 0;
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, row_json(&ts->t[t], &rows[i]));
    return a;
}

json_t *gm_top_sites_json(const gm_top_sites *ts, size_t k)
{
    json_t *o = json_object();
    gm_site_row *rows = calloc(k ? k : 1, sizeof *rows);
    json_object_set_new(o, "n", json_integer((json_int_t)k));
    json_object_set_new(
        o, "peak",
        json_string(ts->simulated ? "simulated allocated bytes" : "live requested bytes"));
    json_object_set_new(o, "peak_bytes", json_integer((json_int_t)ts->peak_bytes));
    json_object_set_new(o, "peak_tenant", json_integer(ts->peak_tenant));
    json_object_set_new(o, "peak_event",
                        ts->peak_tenant < 0 ? json_null()
                                            : json_integer((json_int_t)ts->peak_event));
    json_t *a = json_array();
    for (size_t t = 0; t < ts->n; t++) {
        const gm_site_acc *c = &ts->t[t];
        json_t *e = json_object();
        json_object_set_new(e, "trace", gm_json_text(ts->names[t]));
        json_object_set_new(e, "sites", json_integer((json_int_t)c->sites.n));
        json_object_set_new(e, "note",
                            c->sites.n ? json_null() : json_string(gm_top_sites_none_note()));
        json_object_set_new(e, "by_bytes_allocated", list_json(ts, t, GM_SITE_BY_ALLOC, rows, k));
        json_object_set_new(e, "by_peak_live", list_json(ts, t, GM_SITE_BY_PEAK, rows, k));
        json_object_set_new(e, "by_cuda_mem", list_json(ts, t, GM_SITE_BY_CUDA_MEM, rows, k));
        gm_site_row none = gm_top_sites_row(ts, t, 0);
        json_object_set_new(e, "no_site", row_json(c, &none));
        json_array_append_new(a, e);
    }
    json_object_set_new(o, "tenants", a);
    free(rows);
    return o;
}
