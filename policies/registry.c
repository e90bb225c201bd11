/* registry.c - release policies by name, and "NAME:k=v,..." parsing. */
#include "registry.h"

#include <stdio.h>
#include <string.h>

/* One line per policy: policies/<name>.c defines gm_policy_<name>, whose
 * .name is "<name>". The first is the default. */
#define GM_POLICIES(X)                                                                             \
    X(pytorch)                                                                                     \
    X(lru)                                                                                         \
    X(priority)                                                                                    \
    X(predictive)                                                                                  \
    X(oracle)
/* Policies for one scenario, run when named (--policy, --policies), not in
 * the default set of compare and fit: tiered refuses what its tiers cannot
 * hold (inference serving), defrag answers a question of its own. */
#define GM_POLICIES_NAMED(X)                                                                       \
    X(tiered)                                                                                      \
    X(defrag)

#define DECLARE(n) extern const gm_policy_ops gm_policy_##n;
GM_POLICIES(DECLARE)
GM_POLICIES_NAMED(DECLARE)
#define ENTRY(n) &gm_policy_##n,
static const gm_policy_ops *const policies[] = {GM_POLICIES(ENTRY) GM_POLICIES_NAMED(ENTRY)};
#define COUNT(n) +1
static const size_t n_default = 0 GM_POLICIES(COUNT);
#define NAME(n) ", " #n
static const char names[] = GM_POLICIES(NAME) GM_POLICIES_NAMED(NAME); /* ", pytorch, lru, ..." */
static const char default_names[] = GM_POLICIES(NAME);
#define NPOLICIES (sizeof policies / sizeof policies[0])

const gm_policy_ops *gm_policy_find(const char *name)
{
    for (size_t i = 0; i < NPOLICIES; i++)
        if (!strcmp(policies[i]->name, name)) return policies[i];
    return NULL;
}

const char *gm_policy_names(void)
{
    return names + 2;
}

const gm_policy_ops *gm_policy_at(size_t i)
{
    return i < NPOLICIES ? policies[i] : NULL;
}

size_t gm_policy_n_default(void)
{
    return n_default;
}

const char *gm_policy_default_names(void)
{
    return default_names + 2;
}

int gm_policy_lookup(const char *spec, const gm_policy_ops **ops, const char **params, gm_err *err)
{
    char name[64];
    const char *colon = strchr(spec, ':');
    size_t len = colon ? (size_t)(colon - spec) : strlen(spec);
    if (len == 0 || len >= sizeof name)
        return gm_errf(err, GM_EINVAL, "--policy '%s': expected NAME[:key=value,...]; policies: %s",
                       spec, gm_policy_names());
    memcpy(name, spec, len);
    name[len] = 0;
    *ops = gm_policy_find(name);
    if (!*ops)
        return gm_errf(err, GM_EINVAL, "--policy '%s': unknown policy; choose one of: %s", name,
                       gm_policy_names());
    *params = colon ? colon + 1 : "";
    return GM_OK;
}

int gm_policy_create(const char *spec, gm_policy **out, gm_err *err)
{
    const gm_policy_ops *ops;
    const char *params;
    *out = NULL;
    int rc = gm_policy_lookup(spec, &ops, &params, err);
    return rc ? rc : gm_policy_new(ops, params, out, err);
}
