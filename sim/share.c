/*
 * share.c - tenant classes and sharing modes (engine.h; README, "Sharing a
 * GPU"): the names, and Kubernetes' rules for what a request and a limit
 * make of a tenant.
 *
 * Kubernetes (docs "Resource Management for Pods and Containers" and
 * "Configure Quality of Service for Pods"): a container that gives a limit
 * and no request gets a request equal to the limit; a pod whose requests
 * equal its limits is Guaranteed, one with any request or limit Burstable,
 * one with neither BestEffort (here: opportunistic).
 */
#include <string.h>

#include "engine.h"

static const char *const class_names[] = {"", "guaranteed", "burstable", "opportunistic"};
static const char *const share_names[] = {"auto", "none", "hard-cap", "requests"};

const char *gm_tenant_class_name(int cls)
{
    return cls > 0 && cls <= GM_CLASS_OPPORTUNISTIC ? class_names[cls] : "unset";
}

int gm_tenant_class_parse(const char *arg, int *cls, gm_err *err)
{
    for (int i = GM_CLASS_GUARANTEED; i <= GM_CLASS_OPPORTUNISTIC; i++)
        if (!strcmp(arg, class_names[i])) {
            *cls = i;
            return GM_OK;
        }
    return gm_errf(err, GM_EUSAGE, "--class takes guaranteed, burstable or opportunistic, not '%s'",
                   arg);
}

const char *gm_share_mode_name(int mode)
{
    return mode >= 0 && mode <= GM_SHARE_REQUESTS ? share_names[mode] : "?";
}

int gm_share_mode_parse(const char *arg, int *mode, gm_err *err)
{
    for (int i = GM_SHARE_NONE; i <= GM_SHARE_REQUESTS; i++)
        if (!strcmp(arg, share_names[i])) {
            *mode = i;
            return GM_OK;
        }
    return gm_errf(err, GM_EUSAGE, "--share takes none, hard-cap or requests, not '%s'", arg);
}

int gm_tenant_class_resolve(const gm_tenant_spec *t, int *cls, uint64_t *request, uint64_t *limit,
                            gm_err *err)
{
    const char *name = t->name ? t->name : t->path;
    uint64_t req = t->request_bytes, lim = t->limit_bytes;
    int c = t->cls;
    if (!req && lim && c != GM_CLASS_OPPORTUNISTIC) req = lim; /* Kubernetes' default */
    if (lim && req > lim)
        return gm_errf(err, GM_EUSAGE,
                       "%s: --request is more than --limit; a request is at most the limit", name);
    if (c == GM_CLASS_UNSET)
        c = req && req == lim ? GM_CLASS_GUARANTEED
            : req || lim      ? GM_CLASS_BURSTABLE
                              : GM_CLASS_OPPORTUNISTIC;
    if (c == GM_CLASS_GUARANTEED) {
        if (!req)
            return gm_errf(err, GM_EUSAGE,
                           "%s: a guaranteed tenant needs --request SIZE (e.g. --request 8Gi)",
                           name);
        if (!lim) lim = req;
        if (lim != req)
            return gm_errf(err, GM_EUSAGE,
                           "%s: a guaranteed tenant's --limit is its --request (Kubernetes: "
                           "requests equal limits); give one size, or --class burstable",
                           name);
    }
    if (c == GM_CLASS_OPPORTUNISTIC && req)
        return gm_errf(err, GM_EUSAGE,
                       "%s: an opportunistic tenant has no request; give --request 0 before it "
                       "(per-trace options apply to every trace after them)",
                       name);
    *cls = c;
    *request = req;
    *limit = lim;
    return GM_OK;
}
