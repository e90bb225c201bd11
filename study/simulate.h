/*
 * simulate.h - one simulation from a configuration that names its release
 * policy (gm_sim_config.policy, "NAME[:k=v,...]", as --policy gives it):
 * the name is looked up in the policy registry, then the engine runs
 * (sim/engine.h: gm_engine_run). What every command, gmreplay, the
 * benchmarks and the tests call.
 */
#ifndef GM_SIMULATE_H
#define GM_SIMULATE_H

#include "base/err.h"
#include "sim/engine.h"

/* GM_EINVAL naming the choices when the policy is unknown; otherwise what
 * gm_engine_run returns. */
int gm_simulate(const gm_sim_config *cfg, gm_sim_result **out, gm_err *err);

#endif
