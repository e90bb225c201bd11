/*
 * same_run.h - whether two runs' metrics are the same, figure by figure,
 * bucket by bucket and OOM by OOM, and their policies' reports item by
 * item: for the tests that hold two ways of simulating to one result
 * (test_engine: the plain path and stretches against step(); test_ffwd:
 * fast-forward against every event simulated; test_policies: predictive
 * with the model's counts against views). Header-only.
 */
#ifndef GM_TESTS_SAME_RUN_H
#define GM_TESTS_SAME_RUN_H

#include <string.h>

#include "sim/metrics.h"
#include "sim/report.h"

static inline int same_metrics(const gm_metrics *a, const gm_metrics *b)
{
    if (a->peak_q != b->peak_q || a->peak_a != b->peak_a || a->peak_r != b->peak_r ||
        a->peak_q_t != b->peak_q_t || a->peak_r_t != b->peak_r_t || a->int_a != b->int_a ||
        a->int_r != b->int_r || a->n_events != b->n_events || a->n_oom != b->n_oom ||
        a->ext_frag_n != b->ext_frag_n || a->ext_frag_sum != b->ext_frag_sum ||
        a->ext_frag_max != b->ext_frag_max || a->tl.n != b->tl.n ||
        a->tl.width_ns != b->tl.width_ns || a->tl.t0 != b->tl.t0 || a->t_last != b->t_last ||
        a->t_first != b->t_first || a->q != b->q || a->a != b->a || a->r != b->r ||
        a->n_oom_kept != b->n_oom_kept)
        return 0;
    if (memcmp(a->tl.p, b->tl.p, a->tl.n * sizeof a->tl.p[0])) return 0;
    for (size_t i = 0; i < a->n_oom_kept; i++)
        if (memcmp(&a->ooms[i], &b->ooms[i], sizeof a->ooms[i])) return 0;
    return 1;
}

/* Two runs' policy reports (predictive's predictions and their truth,
 * what each policy released and why), item by item: the same keys, types
 * and units in the same order, and equal values (reals equal and the same
 * bits: neither NaN nor a zero of the other sign passes). */
static inline int same_report(const gm_report *a, const gm_report *b)
{
    if (!a || !b) return a == b;
    if (a->n != b->n || strcmp(a->summary, b->summary)) return 0;
    for (size_t i = 0; i < a->n; i++) {
        const gm_kv *x = &a->items[i], *y = &b->items[i];
        if (strcmp(x->key, y->key) || x->type != y->type || x->unit != y->unit) return 0;
        if ((x->type == GM_KV_INT && x->v.i != y->v.i) ||
            (x->type == GM_KV_REAL &&
             (!(x->v.d == y->v.d) || memcmp(&x->v.d, &y->v.d, sizeof x->v.d))) ||
            (x->type == GM_KV_BOOL && x->v.b != y->v.b) ||
            ((x->type == GM_KV_STR || x->type == GM_KV_RAW) && strcmp(x->s, y->s)))
            return 0;
    }
    return 1;
}

#endif
