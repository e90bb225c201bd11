/*
 * registry.h - the release policies by name: what --policy NAME[:k=v,...]
 * and --policies LIST resolve to. One line per policy in registry.c.
 */
#ifndef GM_REGISTRY_H
#define GM_REGISTRY_H

#include <stddef.h>

#include "base/err.h"
#include "sim/policy.h"

const gm_policy_ops *gm_policy_find(const char *name);
const char *gm_policy_names(void);           /* "pytorch, lru, ..." */
const gm_policy_ops *gm_policy_at(size_t i); /* i-th registered policy, NULL past the end */
/* The first gm_policy_n_default() policies are the default set (compare and
 * fit without --policies); the rest run only when named (tiered, defrag). */
size_t gm_policy_n_default(void);
const char *gm_policy_default_names(void); /* the default set: "pytorch, lru, ..." */

/* Split "NAME[:k=v,...]" into the policy's ops and its parameters (*params
 * points into spec, "" when there are none). GM_EINVAL naming the choices
 * when NAME is malformed or unknown. */
int gm_policy_lookup(const char *spec, const gm_policy_ops **ops, const char **params, gm_err *err);
/* Look up spec and create an instance (sim/policy.h: gm_policy_new). */
int gm_policy_create(const char *spec, gm_policy **out, gm_err *err);

#endif
