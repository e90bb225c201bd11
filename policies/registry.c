/* registry.c - release policies by name, and "NAME:k=v,..." parsing. */
#include "policy.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const gm_policy_ops gm_policy_pytorch;
extern const gm_policy_ops gm_policy_lru;
extern const gm_policy_ops gm_policy_priority;
extern const gm_policy_ops gm_policy_predictive;
extern const gm_policy_ops gm_policy_oracle;

/* One line per policy. */
static const gm_policy_ops *const policies[] = {
    &gm_policy_pytorch,
    &gm_policy_lru,
    &gm_policy_priority,
    &gm_policy_predictive,
    &gm_policy_oracle,
};
#define NPOLICIES (sizeof policies / sizeof policies[0])

const gm_policy_ops *gm_policy_find(const char *name)
{
    for (size_t i = 0; i < NPOLICIES; i++)
        if (!strcmp(policies[i]->name, name))
            return policies[i];
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
        n += snprintf(names_buf + n, sizeof names_buf - n, "%s%s", i ? ", " : "",
                      policies[i]->name);
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

int gm_policy_create(const char *spec, gm_policy **out, gm_err *err)
{
    *out = NULL;
    char name[64];
    const char *colon = strchr(spec, ':');
    size_t len = colon ? (size_t)(colon - spec) : strlen(spec);
    if (len == 0 || len >= sizeof name)
        return gm_errf(err, GM_EINVAL, "--policy '%s': expected NAME[:key=value,...]; policies: %s",
                       spec, gm_policy_names());
    memcpy(name, spec, len);
    name[len] = 0;
    const gm_policy_ops *ops = gm_policy_find(name);
    if (!ops)
        return gm_errf(err, GM_EINVAL, "--policy '%s': unknown policy; choose one of: %s", name,
                       gm_policy_names());
    gm_policy *p = calloc(1, sizeof *p);
    if (!p)
        return gm_errf(err, GM_ENOMEM, "out of memory");
    p->ops = ops;
    snprintf(p->params, sizeof p->params, "%s", colon ? colon + 1 : "");
    int rc = ops->create(p->params, &p->state, err);
    if (rc != GM_OK) {
        free(p);
        return rc;
    }
    *out = p;
    return GM_OK;
}

void gm_policy_destroy(gm_policy *p)
{
    if (!p)
        return;
    if (p->ops->destroy)
        p->ops->destroy(p->state);
    free(p);
}

int gm_policy_param(const char *params, const char *key, char *buf, size_t len)
{
    size_t klen = strlen(key);
    const char *p = params;
    while (p && *p) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n > klen && !strncmp(p, key, klen) && p[klen] == '=') {
            size_t vlen = n - klen - 1;
            if (vlen >= len)
                vlen = len - 1;
            memcpy(buf, p + klen + 1, vlen);
            buf[vlen] = 0;
            return 1;
        }
        p = end ? end + 1 : NULL;
    }
    return 0;
}

int gm_policy_check_params(const char *policy, const char *params, const char *const *known,
                           gm_err *err)
{
    const char *p = params;
    while (p && *p) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        const char *eq = memchr(p, '=', n);
        size_t klen = eq ? (size_t)(eq - p) : n;
        int ok = 0;
        for (size_t i = 0; known[i] && !ok; i++)
            ok = strlen(known[i]) == klen && !strncmp(known[i], p, klen) && eq;
        if (!ok)
            return gm_errf(err, GM_EINVAL,
                           "--policy %s: unknown or malformed parameter '%.*s'; expected "
                           "key=value with key one of the documented ones (see "
                           "policies/README.md)",
                           policy, (int)n, p);
        p = end ? end + 1 : NULL;
    }
    return GM_OK;
}
