/*
 * same_run.h - one simulation for several policies, where it is the same.
 *
 * A policy that says it is inert (sim/policy.h, gm_policy_ops.inert: it
 * acts only when asked after a driver call or the memory limit refused)
 * decides nothing until the first refusal, and where that comes depends
 * on the configuration alone, not on the policy. So a run of such a
 * policy that never asked it (gm_sim_result.policy_inert, every tenant's
 * policy_asks 0) is also the run of the same configuration under every
 * other policy inert with the same models' limits: the same events, the
 * same decisions, the same figures. Only what names the policy differs:
 * its name and parameters, whether it is realizable, and its report (a
 * fresh instance's, which is what an inert policy reports after such a
 * run). With the default policies, `pytorch`, `lru` and `priority` (no
 * threshold) make one run wherever no driver call was refused: a trace on
 * its own device, usually. compare and the pages' segment maps use it.
 */
#ifndef GM_SAME_RUN_H
#define GM_SAME_RUN_H

#include "base/err.h"
#include "sim/engine.h"

/* 1 when spec's policy may share a run: it says when it is inert
 * (gm_policy_ops.inert); the lead of a group of runs that may be one. */
int gm_same_run_may(const char *spec);

/* The leads of n entries (a comparison's, a sweep's, a page's maps):
 * lead[i] is -1 where entry i's policy (spec(ctx, i)) may not share a run
 * (gm_same_run_may), else the first entry j <= i whose policy may and that
 * has i's configuration but the policy (same_config(ctx, j, i)): the run
 * that may be i's. */
void gm_same_run_leads(size_t n, const char *(*spec)(const void *ctx, size_t i),
                       int (*same_config)(const void *ctx, size_t j, size_t i), const void *ctx,
                       long *lead);

/* 1 when r's run asked some tenant's policy (gm_tenant_result.policy_asks):
 * no other policy's run is then known to be the same. */
int gm_same_run_asked(const gm_sim_result *r);

/* 1 when policy spec inert in r's configuration and r a run that asked its
 * inert policy nothing: r is spec's run too. 0 otherwise (also for a spec
 * that does not resolve). The caller ran r with the same configuration but
 * the policy. */
int gm_same_run(const gm_sim_result *r, const char *spec);

/* A copy of r as spec's run (gm_same_run(r, spec) must hold): r's figures,
 * spec's name, parameters and realizability, and the report of a fresh
 * instance of spec for each tenant. GM_OK, or GM_ENOMEM / the policy's own
 * error in err. */
int gm_same_run_copy(const gm_sim_result *r, const char *spec, gm_sim_result **out, gm_err *err);

#endif
