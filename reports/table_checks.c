/* table_checks.c - the tables of the commands that check the model:
 * fidelity and validate (table.h). */
#include "table.h"

#include <math.h>
#include <string.h>

#include "base/units.h"
#include "traces/trace.h"

/* ----------------------------------------------------------- fidelity */

static const char *call_name(int op)
{
    switch (op) {
    case GM_OP_SEGMENT_ALLOC:
        return "cudaMalloc";
    case GM_OP_SEGMENT_MAP:
        return "map";
    case GM_OP_SEGMENT_UNMAP:
        return "unmap";
    default:
        return "cudaFree";
    }
}

/* The calls of the divergence event, "cudaFree 20.00 MiB, cudaMalloc ..."; a
 * list that does not fit ends with "and N more" after the last whole call. */
static void call_text(const gm_fidelity *f, const gm_fid_call *c, size_t n, char *buf, size_t len)
{
    size_t k = 0, total = 0, shown = 0;
    for (size_t i = 0; i < n; i++)
        total += c[i].event_index == f->div_event;
    buf[0] = 0;
    for (size_t i = 0; i < n; i++) {
        if (c[i].event_index != f->div_event) continue;
        char b[32], one[64];
        int w = snprintf(one, sizeof one, "%s%s %s", k ? ", " : "", call_name(c[i].op),
                         gm_fmt_bytes(c[i].size, b, sizeof b));
        /* room for this call and a closing " and NNNNNN more" */
        if (w < 0 || k + (size_t)w + 24 >= len) break;
        memcpy(buf + k, one, (size_t)w + 1);
        k += (size_t)w;
        shown++;
    }
    if (!total)
        snprintf(buf, len, "nothing");
    else if (shown < total)
        snprintf(buf + k, len - k, "%s and %zu more", shown ? "," : "", total - shown);
}

/* "0x7f.. (segment 0x7f.. + 4096)", or the bare address outside every segment. */
static void where_text(const gm_fid_where *w, char *buf, size_t len)
{
    if (w->seg_addr)
        snprintf(buf, len, "0x%llx (segment 0x%llx + %llu)", (unsigned long long)w->addr,
                 (unsigned long long)w->seg_addr, (unsigned long long)(w->addr - w->seg_addr));
    else
        snprintf(buf, len, "0x%llx (in no segment)", (unsigned long long)w->addr);
}

void gm_table_fidelity(FILE *f, const char *name, int device, const gm_fidelity *fid)
{
    char b1[32], b2[32], ours[256], theirs[256];
    fprintf(f, "%s, device %d: %llu events replayed, alloc conf '%s', capacity %s%s\n", name,
            device, (unsigned long long)fid->n_events, fid->alloc_conf,
            gm_fmt_bytes(fid->capacity_bytes, b1, sizeof b1),
            fid->fresh_addresses ? ", fresh addresses" : "");
    fprintf(f, "  device size:     %s\n", fid->capacity_source);
    if (fid->avail_min) {
        fprintf(f, "  device window:   the process had at least %s",
                gm_fmt_bytes(fid->avail_min, b1, sizeof b1));
        if (fid->avail_max)
            fprintf(f, " and less than %s", gm_fmt_bytes(fid->avail_max, b2, sizeof b2));
        fprintf(f, "\n");
    }
    fprintf(f, "  initial state:   %llu segments (%s) rebuilt",
            (unsigned long long)fid->init_segments,
            gm_fmt_bytes(fid->init_reserved, b2, sizeof b2));
    if (fid->init_expandable)
        fprintf(f, ", %llu of them expandable", (unsigned long long)fid->init_expandable);
    fprintf(f, "\n");
    if (!fid->n_events) {
        fprintf(f, "  no trace to replay (initial state only): nothing to compare\n");
        return;
    }
    fprintf(f,
            "  segment calls:   PyTorch %zu, model %zu: %llu matched, %llu missing, %llu extra\n",
            fid->n_rec, fid->n_ours, (unsigned long long)fid->matched,
            (unsigned long long)fid->missing, (unsigned long long)fid->extra);
    fprintf(f, "  reserved bytes:  max abs error %s",
            gm_fmt_bytes(fid->max_reserved_err, b1, sizeof b1));
    if (fid->max_reserved_err)
        fprintf(f, " (at event %llu)", (unsigned long long)fid->max_err_event);
    fprintf(f, "\n");
    if (fid->empty_caches)
        fprintf(f, "  empty_cache:     %llu calls replayed\n",
                (unsigned long long)fid->empty_caches);
    if (fid->rec_ooms || fid->model_ooms)
        fprintf(f,
                "  OOMs:            PyTorch %llu, model %llu (%llu that PyTorch could not make "
                "were made by the model)\n",
                (unsigned long long)fid->rec_ooms, (unsigned long long)fid->model_ooms,
                (unsigned long long)fid->oom_fits);
    if (fid->diverged) {
        call_text(fid, fid->ours, fid->n_ours, ours, sizeof ours);
        call_text(fid, fid->rec, fid->n_rec, theirs, sizeof theirs);
        if (fid->div_event < fid->n_events)
            fprintf(f,
                    "  first divergence at event %llu (%s of %s): model did %s; PyTorch did %s\n",
                    (unsigned long long)fid->div_event, gm_op_name(fid->div_op),
                    gm_fmt_bytes(fid->div_size, b1, sizeof b1), ours, theirs);
        else
            fprintf(f, "  first divergence after the last event: model did %s; PyTorch did %s\n",
                    ours, theirs);
        fprintf(f, "  likely cause:    %s\n", gm_fid_cause_text(fid->div_cause));
    }
    if (fid->placement_checked) {
        fprintf(f, "  block placement: %llu of %llu allocations at PyTorch's address\n",
                (unsigned long long)fid->placed_same, (unsigned long long)fid->placed);
        if (fid->place_diverged) {
            char w1[96], w2[96];
            where_text(&fid->place_ours, w1, sizeof w1);
            where_text(&fid->place_theirs, w2, sizeof w2);
            fprintf(f,
                    "  first misplaced at event %llu (alloc of %s): model at %s; PyTorch at %s\n",
                    (unsigned long long)fid->place_event,
                    gm_fmt_bytes(fid->place_size, b1, sizeof b1), w1, w2);
        }
    }
    fprintf(f, "  result:          %s\n", gm_fidelity_exact(fid) ? "EXACT MATCH" : "MISMATCH");
}

/* ----------------------------------------------------------- validate */

void gm_table_validate_summary(FILE *f, const gm_validation *v)
{
    if (v->n_failed == 0) {
        fprintf(f, "validate: PASS (%d of %d checks)\n", v->n_checks, v->n_checks);
        return;
    }
    fprintf(f, "validate: FAIL (%d of %d checks failed:", v->n_failed, v->n_checks);
    for (size_t i = 0; i < v->n; i++)
        if (v->rows[i].check && !v->rows[i].pass) fprintf(f, " %s;", v->rows[i].metric);
    fprintf(f, ")\n");
}

void gm_table_validate(FILE *f, const char *pp, const char *mp, const gm_validation *v)
{
    fprintf(f, "gmsim validate: %s (predicted) vs %s (measured, backend %s)\n\n", pp, mp,
            v->backend);
    fprintf(f, "  %-32s %-24s %-24s %10s %6s %6s\n", "metric", "predicted", "measured", "rel. err",
            "tol.", "result");
    for (size_t i = 0; i < v->n; i++) {
        const gm_vrow *r = &v->rows[i];
        char rel[32];
        gm_vrow_rel_text(rel, sizeof rel, r);
        fprintf(f, "  %-32s %-24s %-24s %10s %6s %6s\n", r->metric, r->predicted, r->measured, rel,
                r->tolerance, gm_vrow_verdict(r));
        if (r->note[0] && (r->check || !strcmp(r->metric, "OOM events")))
            fprintf(f, "  %-32s   %s\n", "", r->note);
    }
    fprintf(f, "\n");
    if (strcmp(v->backend, "cuda") != 0)
        fprintf(f, "note: the measurement's backend is '%s', not a GPU\n", v->backend);
    gm_table_validate_summary(f, v);
}
