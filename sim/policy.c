/* policy.c - release-policy instances and the parameter helpers every policy uses. */
#include "policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int gm_policy_new(const gm_policy_ops *ops, const char *params, gm_policy **out, gm_err *err)
{
    *out = NULL;
    if (ops->version != GM_POLICY_VERSION)
        return gm_errf(err, GM_EINVAL,
                       "policy %s implements version %d of the policy interface, this gmsim "
                       "version %d; rebuild it against sim/policy.h",
                       ops->name, ops->version, GM_POLICY_VERSION);
    gm_policy *p = calloc(1, sizeof *p);
    if (!p) return gm_errf(err, GM_ENOMEM, "out of memory");
    p->ops = ops;
    snprintf(p->params, sizeof p->params, "%s", params ? params : "");
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
    if (!p) return;
    if (p->ops->destroy) p->ops->destroy(p->state);
    free(p);
}

int gm_policy_ask(gm_alloc *a, const gm_pressure *p)
{
    a->policy->asks++;
    return a->policy->ops->on_alloc_fail(a->policy->state, a, p);
}

int gm_policy_grow(gm_alloc *a, gm_pressure *p, int (*grow)(gm_alloc *a, void *ctx), void *ctx)
{
    const gm_policy_ops *po = a->policy->ops;
    if (po->before_grow) po->before_grow(a->policy->state, a, p);
    int rc = grow(a, ctx);
    while (rc != GM_OK) {
        uint64_t flushes = a->c.n_cache_flushes;
        int r = gm_policy_ask(a, p);
        if (r == GM_POLICY_GIVE_UP) return GM_EOOM;
        p->attempt++;
        if (r == GM_POLICY_RETRY) {
            a->c.grow_retries++;
            if (a->c.n_cache_flushes != flushes) a->c.num_alloc_retries++; /* PyTorch's */
            rc = grow(a, ctx);
        }
    }
    return GM_OK;
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
            if (vlen >= len) vlen = len - 1;
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
