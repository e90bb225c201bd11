/* simulate.c - see simulate.h. */
#include "simulate.h"

#include "policies/registry.h"

int gm_simulate(const gm_sim_config *cfg, gm_sim_result **out, gm_err *err)
{
    const gm_policy_ops *ops;
    const char *params;
    *out = NULL;
    int rc = gm_policy_lookup(cfg->policy ? cfg->policy : "pytorch", &ops, &params, err);
    return rc ? rc : gm_engine_run(cfg, ops, params, out, err);
}
