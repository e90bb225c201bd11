/* table_explain.c - why the first OOM happened and what would have avoided
 * it (study/explain.h), after `gmsim run`'s table (table.h). */
#include <inttypes.h>
#include <stdio.h>

#include "table.h"
#include "base/units.h"

/* Categories by bytes, largest first, into order (returns how many hold any). */
static int by_bytes(const gm_live_set *s, int order[GM_CAT_COUNT])
{
    int n = 0;
    for (int c = 0; c < GM_CAT_COUNT; c++)
        if (s->bytes[c]) order[n++] = c;
    for (int i = 1; i < n; i++) /* insertion sort: 8 entries */
        for (int j = i; j > 0 && s->bytes[order[j]] > s->bytes[order[j - 1]]; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    return n;
}

static void live(FILE *f, const char *title, const gm_live_set *s)
{
    char b1[32];
    int order[GM_CAT_COUNT], n = by_bytes(s, order);
    fprintf(f, "  %s: %s in %" PRIu64 " tensors", title, gm_fmt_bytes(s->total, b1, sizeof b1),
            s->n);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s%s %s (%" PRIu64 ")", i ? ", " : ": ", gm_category_name(order[i]),
                gm_fmt_bytes(s->bytes[order[i]], b1, sizeof b1), s->count[order[i]]);
    fprintf(f, "\n");
    if (!s->n_trace_sites) return;
    for (size_t i = 0; i < s->n_sites; i++)
        fprintf(f, "    %-44s %10s in %" PRIu64 " tensor%s\n", s->sites[i].name,
                gm_fmt_bytes(s->sites[i].bytes, b1, sizeof b1), s->sites[i].count,
                s->sites[i].count == 1 ? "" : "s");
    if (s->unknown_site_count)
        fprintf(f, "    %-44s %10s in %" PRIu64 " tensor%s\n", "(no site recorded)",
                gm_fmt_bytes(s->unknown_site_bytes, b1, sizeof b1), s->unknown_site_count,
                s->unknown_site_count == 1 ? "" : "s");
}

static void signed_bytes(FILE *f, uint64_t now, uint64_t was)
{
    char b[32];
    if (now == was)
        fprintf(f, "the same");
    else if (now > was)
        fprintf(f, "+%s", gm_fmt_bytes(now - was, b, sizeof b));
    else
        fprintf(f, "-%s", gm_fmt_bytes(was - now, b, sizeof b));
}

void gm_table_explain(FILE *f, const gm_oom *first, const gm_live_set *at, const gm_live_set *peak,
                      const gm_fixes *fx)
{
    char b1[32], b2[32];
    fprintf(f, "\nwhy the first OOM (tenant %d, event %" PRIu64 ", %s):\n", at->tenant,
            at->event_index, gm_oom_verdict_name(first->verdict));
    live(f, "live then", at);
    if (peak && peak->n_trace_sites) live(f, "live at the peak", peak);
    if (peak && peak->total > first->limit)
        fprintf(f,
                "  and later more: the live tensors peak at %s (event %" PRIu64 "), above the %s "
                "this job may hold; no allocator setting avoids an OOM here\n",
                gm_fmt_bytes(peak->total, b1, sizeof b1), peak->event_index,
                gm_fmt_bytes(first->limit, b2, sizeof b2));
    else if (peak)
        fprintf(f,
                "  the live tensors peak at %s (event %" PRIu64
                "), within the %s this job may hold\n",
                gm_fmt_bytes(peak->total, b1, sizeof b1), peak->event_index,
                gm_fmt_bytes(first->limit, b2, sizeof b2));
    if (!fx || !fx->n) return;
    fprintf(f, "what would have avoided it (each change alone, re-simulated):\n");
    for (size_t i = 0; i < fx->n; i++) {
        const gm_fix *x = &fx->f[i];
        fprintf(f, "  %-36s ", x->what);
        if (x->rc != GM_OK) {
            fprintf(f, "failed: %s\n", x->err.msg);
            continue;
        }
        if (x->ooms)
            fprintf(f, "still %" PRIu64 " OOM%s (first at event %" PRIu64 ")", x->ooms,
                    x->ooms == 1 ? "" : "s", x->first_oom_index);
        else
            fprintf(f, "no OOM");
        fprintf(f, "; peak reserved %s (", gm_fmt_bytes(x->peak_reserved, b1, sizeof b1));
        signed_bytes(f, x->peak_reserved, fx->peak_reserved);
        fprintf(f, "), %" PRIu64 " driver calls, %s\n", x->driver_calls,
                gm_fmt_ns(x->driver_ns, b2, sizeof b2));
    }
}
