/* compare.c - see compare.h. */
#include "compare.h"

#include <stdio.h>
#include <stdlib.h>

#include "policy_list.h"
#include "pool.h"
#include "simulate.h"
#include "base/clock.h"

typedef struct compare_ctx {
    const gm_sim_config *base;
    gm_compare *c;
} compare_ctx;

static void compare_one(void *arg, size_t i)
{
    compare_ctx *x = arg;
    gm_compare_entry *e = &x->c->e[i];
    gm_sim_config cfg = *x->base;
    cfg.policy = e->spec;
    cfg.progress = NULL;
    e->rc = gm_simulate(&cfg, &e->r, &e->err);
}

static void rank_entries(gm_compare *c)
{
    c->n_ranked = 0;
    c->winner = c->bound = -1;
    for (size_t i = 0; i < c->n; i++) {
        if (c->e[i].realizable)
            c->rank[c->n_ranked++] = i;
        else if (c->bound < 0)
            c->bound = (long)i;
    }
    /* insertion sort: qsort would need the entries in a global, and the
     * policy order breaks ties, so the ranking is the same for any --threads */
    for (size_t i = 1; i < c->n_ranked; i++) {
        size_t v = c->rank[i], j = i;
        while (j > 0) {
            size_t u = c->rank[j - 1];
            int cmp = gm_result_rank_cmp(c->e[u].r, c->e[v].r);
            if (cmp < 0 || (cmp == 0 && u < v)) break;
            c->rank[j] = u;
            j--;
        }
        c->rank[j] = v;
    }
    if (c->n_ranked) c->winner = (long)c->rank[0];
}

int gm_compare_run(const gm_sim_config *base, char *const *specs, size_t n, int threads,
                   gm_compare **out, gm_err *err)
{
    *out = NULL;
    gm_compare *c = calloc(1, sizeof *c);
    if (c) {
        c->e = calloc(n ? n : 1, sizeof *c->e);
        c->rank = calloc(n ? n : 1, sizeof *c->rank);
    }
    if (!c || !c->e || !c->rank) {
        gm_compare_free(c);
        return gm_errf(err, GM_ENOMEM, "out of memory");
    }
    c->n = n;
    c->threads = threads > 0 ? threads : gm_default_threads();
    for (size_t i = 0; i < n; i++) {
        snprintf(c->e[i].spec, sizeof c->e[i].spec, "%s", specs[i]);
        c->e[i].realizable = gm_policy_spec_realizable(specs[i]);
    }
    /* the policies with a timer (per-tick work) take longest: they start
     * first, so that none of them starts last and runs alone */
    size_t *order = malloc((n ? n : 1) * sizeof *order), k = 0;
    for (int timed = 1; order && timed >= 0; timed--)
        for (size_t i = 0; i < n; i++)
            if (gm_policy_spec_timed(specs[i]) == timed) order[k++] = i;
    double t0 = gm_monotonic_s();
    compare_ctx x = {base, c};
    gm_parallel_for_order(n, order, c->threads, compare_one, &x);
    c->wall_s = gm_monotonic_s() - t0;
    free(order);
    for (size_t i = 0; i < n; i++)
        if (c->e[i].rc != GM_OK) {
            int rc = gm_errf(err, c->e[i].rc, "policy %s: %s", c->e[i].spec, c->e[i].err.msg);
            gm_compare_free(c);
            return rc;
        }
    rank_entries(c);
    *out = c;
    return GM_OK;
}

void gm_compare_free(gm_compare *c)
{
    if (!c) return;
    for (size_t i = 0; c->e && i < c->n; i++)
        gm_sim_result_free(c->e[i].r);
    free(c->e);
    free(c->rank);
    free(c);
}
