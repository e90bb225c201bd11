/* table_tune.c - `gmsim tune`'s ranking, the comparison with PyTorch's
 * defaults and the line to paste (table.h). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "table.h"
#include "base/units.h"
#include "traces/alloc_conf.h"

#define TUNE_ROWS 10 /* the best groups printed; the defaults and the recorded always */

static const char *name_of(const gm_tune_entry *e, char *buf, size_t len)
{
    if (e->is_default)
        snprintf(buf, len, "(PyTorch's defaults)%s", e->is_recorded ? " (recorded)" : "");
    else
        snprintf(buf, len, "%s%s", e->conf, e->is_recorded ? " (recorded)" : "");
    return buf;
}

static int same(const gm_tune_entry *a, const gm_tune_entry *b)
{
    return gm_tune_cmp(a, b) == 0 && a->driver_calls == b->driver_calls;
}

static void row(FILE *f, size_t rank, const gm_tune_entry *e)
{
    char b1[32], b2[32], name[400];
    fprintf(f, "%5zu  %4" PRIu64 "  %13s  %12.1f %%  %12" PRIu64 "  %11s  %s\n", rank, e->ooms,
            gm_fmt_bytes(e->peak_reserved, b1, sizeof b1), 100.0 * e->fragmentation,
            e->driver_calls, gm_fmt_ns(e->driver_ns, b2, sizeof b2), name_of(e, name, sizeof name));
}

/* "3.10 GiB less reserved, and the OOM at event 5120 is gone" */
static void against_defaults(FILE *f, const gm_tune_entry *b, const gm_tune_entry *d)
{
    char b1[32], b2[32];
    fprintf(f, "  against the defaults: ");
    if (b->peak_reserved < d->peak_reserved) {
        fprintf(f, "%s less reserved (%s instead of ",
                gm_fmt_bytes(d->peak_reserved - b->peak_reserved, b1, sizeof b1),
                gm_fmt_bytes(b->peak_reserved, b2, sizeof b2));
        fprintf(f, "%s)", gm_fmt_bytes(d->peak_reserved, b1, sizeof b1));
    } else if (b->peak_reserved > d->peak_reserved)
        fprintf(f, "%s more reserved",
                gm_fmt_bytes(b->peak_reserved - d->peak_reserved, b1, sizeof b1));
    else
        fprintf(f, "the same peak reserved");
    if (d->ooms && !b->ooms)
        fprintf(f, ", and the OOM%s at event %" PRIu64 " (%s requested)%s gone",
                d->ooms > 1 ? "s" : "", d->first_oom_index,
                gm_fmt_bytes(d->first_oom_size, b1, sizeof b1),
                d->ooms > 1 ? " and after are" : " is");
    else if (d->ooms > b->ooms)
        fprintf(f, ", and %" PRIu64 " OOMs instead of %" PRIu64, b->ooms, d->ooms);
    if (b->driver_calls != d->driver_calls)
        fprintf(f, "; %" PRIu64 " driver calls instead of %" PRIu64, b->driver_calls,
                d->driver_calls);
    fprintf(f, "\n");
}

/* What to paste: the environment line, and the Python call garbage
 * collection needs before PyTorch 2.10 (tune.h). */
static void paste(FILE *f, const gm_tune_entry *b, int torch_version)
{
    if (b->is_default) {
        fprintf(f, "\n# PyTorch's defaults are best here: leave PYTORCH_CUDA_ALLOC_CONF unset\n");
        return;
    }
    fprintf(f, "\nexport PYTORCH_CUDA_ALLOC_CONF=%s\n", b->conf);
    if (b->memory_fraction > 0 && strstr(b->conf, "garbage_collection_threshold"))
        fprintf(f,
                "# and in the program, before its first CUDA allocation (PyTorch %d.%d collects "
                "garbage only under a memory fraction):\n"
                "#   torch.cuda.set_per_process_memory_fraction(%g)\n",
                torch_version / 100, torch_version % 100, b->memory_fraction);
}

void gm_table_tune(FILE *f, const gm_sim_config *cfg, const gm_tune *t)
{
    char b1[32];
    const char *name =
        cfg->n_tenants ? (cfg->tenants[0].name ? cfg->tenants[0].name : cfg->tenants[0].path) : "?";
    fprintf(f, "gmsim tune: %s%s on %s (%s), policy %s, settings as PyTorch %d.%d reads them\n",
            name, cfg->n_tenants > 1 ? " and the other tenants" : "",
            gm_fmt_bytes(t->capacity_bytes, b1, sizeof b1), t->capacity_source, t->policy,
            t->torch_version / 100, t->torch_version % 100);
    fprintf(f, "grid: %zu settings (%s)", t->n, t->dims);
    if (t->n_skipped) fprintf(f, ", %zu of them refused by this PyTorch", t->n_skipped);
    fprintf(f, "; %zu simulations on %d thread%s in %.2f s", t->n - t->n_skipped - t->n_shared,
            t->threads, t->threads == 1 ? "" : "s", t->wall_s);
    if (t->n_shared) /* study/tune.c, shared */
        fprintf(f,
                " (%zu settings took another's run: the same with "
                "garbage_collection_threshold:0.6 that never collected, or without "
                "max_split_size_mb where no segment reached it)",
                t->n_shared);
    fprintf(f, "\n\n");
    fprintf(f, " rank  OOMs  peak reserved  fragmentation  driver calls  driver time  setting\n");
    /* settings with the same figures are one group, shown by its first
     * (simplest: grid order) setting */
    size_t groups = 0, gap = 0;
    for (size_t k = 0; k < t->n_ranked;) {
        size_t j = k + 1;
        int special = t->e[t->rank[k]].is_default || t->e[t->rank[k]].is_recorded;
        while (j < t->n_ranked && same(&t->e[t->rank[k]], &t->e[t->rank[j]])) {
            special |= t->e[t->rank[j]].is_default || t->e[t->rank[j]].is_recorded;
            j++;
        }
        if (groups < TUNE_ROWS || special) {
            if (gap) fprintf(f, "  ...\n");
            gap = 0;
            for (size_t i = k; i < j; i++) { /* the defaults / recorded by name */
                const gm_tune_entry *e = &t->e[t->rank[i]];
                if (i == k || e->is_default || e->is_recorded) row(f, i + 1, e);
            }
            if (j - k > 1) fprintf(f, "%*s+ %zu more with the same figures\n", 12, "", j - k - 1);
        } else {
            gap = 1;
        }
        groups++;
        k = j;
    }
    for (size_t i = 0; i < t->n; i++)
        if (!t->e[i].skipped && t->e[i].rc != GM_OK)
            fprintf(f, "  failed: %s: %s\n", t->e[i].conf, t->e[i].err.msg);
    if (t->best < 0) return;
    const gm_tune_entry *b = &t->e[t->best];
    const gm_tune_entry *d = t->dflt >= 0 ? &t->e[t->dflt] : NULL;
    char bn[400];
    if (b->ooms)
        fprintf(f, "\nno setting runs without OOM on %s; the fewest OOMs: %s\n",
                gm_fmt_bytes(t->capacity_bytes, b1, sizeof b1), name_of(b, bn, sizeof bn));
    else
        fprintf(f, "\nbest: %s\n", b->is_default ? "PyTorch's defaults" : b->conf);
    if (d && b != d) against_defaults(f, b, d);
    if (t->fitted) {
        fprintf(f, "  smallest card without OOM (gmsim fit, policy %s): ", t->policy);
        if (t->fit_best_found)
            fprintf(f, "%s with %s", gm_fmt_bytes(t->fit_best, b1, sizeof b1),
                    b->is_default ? "the defaults" : "it");
        else
            fprintf(f, "none up to %s with %s", gm_fmt_bytes(t->fit_max, b1, sizeof b1),
                    b->is_default ? "the defaults" : "it");
        if (!b->is_default) {
            if (t->fit_dflt_found)
                fprintf(f, ", %s with the defaults", gm_fmt_bytes(t->fit_dflt, b1, sizeof b1));
            else
                fprintf(f, ", none up to %s with the defaults",
                        gm_fmt_bytes(t->fit_max, b1, sizeof b1));
        }
        fprintf(f, "\n");
    }
    paste(f, b, t->torch_version);
}
