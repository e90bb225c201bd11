/* same_run.c - see same_run.h. */
#include "same_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policies/registry.h"
#include "sim/policy.h"

int gm_same_run_may(const char *spec)
{
    const gm_policy_ops *ops;
    const char *params;
    gm_err err = {0};
    return spec && gm_policy_lookup(spec, &ops, &params, &err) == GM_OK && ops->inert;
}

void gm_same_run_leads(size_t n, const char *(*spec)(const void *ctx, size_t i),
                       int (*same_config)(const void *ctx, size_t j, size_t i), const void *ctx,
                       long *lead)
{
    for (size_t i = 0; i < n; i++) {
        lead[i] = -1;
        if (!gm_same_run_may(spec(ctx, i))) continue;
        for (size_t j = 0; j < i && lead[i] < 0; j++)
            if (lead[j] == (long)j && same_config(ctx, j, i)) lead[i] = (long)j;
        if (lead[i] < 0) lead[i] = (long)i;
    }
}

int gm_same_run_asked(const gm_sim_result *r)
{
    for (size_t i = 0; i < r->n_tenants; i++)
        if (r->t[i].policy_asks) return 1;
    return 0;
}

int gm_same_run(const gm_sim_result *r, const char *spec)
{
    const gm_policy_ops *ops;
    const char *params;
    gm_err err = {0};
    if (!r || !r->policy_inert || !r->n_tenants || gm_same_run_asked(r)) return 0;
    if (gm_policy_lookup(spec ? spec : "pytorch", &ops, &params, &err) != GM_OK || !ops->inert)
        return 0;
    for (size_t i = 0; i < r->n_tenants; i++)
        if (!ops->inert(params, &r->t[i].limits)) return 0;
    return 1;
}

/* What a fresh instance of ops with params reports (NULL when it reports
 * nothing), as the engine asks it at a run's end. */
static int fresh_report(const gm_policy_ops *ops, const char *params, gm_report **out, gm_err *err)
{
    *out = NULL;
    if (!ops->report) return GM_OK;
    gm_policy *p = NULL;
    int rc = gm_policy_new(ops, params, &p, err);
    if (rc != GM_OK) return rc;
    *out = gm_report_new();
    if (*out) ops->report(p->state, *out);
    gm_policy_destroy(p);
    return *out ? GM_OK : gm_errf(err, GM_ENOMEM, "out of memory");
}

int gm_same_run_copy(const gm_sim_result *r, const char *spec, gm_sim_result **out, gm_err *err)
{
    *out = NULL;
    const gm_policy_ops *ops;
    const char *params;
    int rc = gm_policy_lookup(spec ? spec : "pytorch", &ops, &params, err);
    if (rc != GM_OK) return rc;
    gm_sim_result *c = malloc(sizeof *c);
    gm_tenant_result *t = c ? calloc(r->n_tenants ? r->n_tenants : 1, sizeof *t) : NULL;
    if (!t) {
        free(c);
        return gm_errf(err, GM_ENOMEM, "out of memory");
    }
    *c = *r;
    c->t = t;
    for (size_t i = 0; i < r->n_tenants; i++) {
        t[i] = r->t[i];
        t[i].policy_report = NULL;
    }
    /* as the engine names a run's policy (engine.c) */
    char p[sizeof((gm_policy *)0)->params];
    snprintf(p, sizeof p, "%s", params);
    snprintf(c->policy, sizeof c->policy, "%s%s%s", ops->name, p[0] ? ":" : "", p);
    c->policy_realizable = ops->realizable;
    for (size_t i = 0; i < r->n_tenants && rc == GM_OK; i++)
        rc = fresh_report(ops, p, &t[i].policy_report, err);
    if (rc != GM_OK) {
        gm_sim_result_free(c);
        return rc;
    }
    *out = c;
    return GM_OK;
}
