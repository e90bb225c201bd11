/* registry.c - release policies by name, and "NAME:k=v,..." parsing. */
#include "registry.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

extern const gm_policy_ops gm_policy_pytorch;
extern const gm_policy_ops gm_policy_lru;
extern const gm_policy_ops gm_policy_priority;
extern const gm_policy_ops gm_policy_predictive;
extern const gm_policy_ops gm_policy_oracle;

/* One line per policy. */
static const gm_policy_ops *const policies[] = {
    &gm_policy_pytorch,    &gm_policy_lru,    &gm_policy_priority,
    &gm_policy_predictive, &gm_policy_oracle,
};
#define NPOLICIES (sizeof policies / sizeof policies[0])

const gm_policy_ops *gm_policy_find(const char *name)
{
    for (size_t i = 0; i < NPOLICIES; i++)
        if (!strcmp(policies[i]->name, name)) return policies[i];
    return NULL;
}

/* The list is built once; pthread_once makes that safe when simulations run
 * in parallel threads (gmsim compare), and it never changes afterwards. */
static pthread_once_t names_once = PTHREAD_ONCE_INIT;
static char names_buf[256];

static void build_names(void)
{
    size_t n = 0;
    for (size_t i = 0; i < NPOLICIES && n < sizeof names_buf; i++)
        n +=
            snprintf(names_buf + n, sizeof names_buf - n, "%s%s", i ? ", " : "", policies[i]->name);
}

const char *gm_policy_names(void)
{
    pthread_once(&names_once, build_names);
    return names_buf;
}

const gm_policy_ops *gm_policy_at(size_t i)
{
    return i < NPOLICIES ? policies[i] : NULL;
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
