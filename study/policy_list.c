/* policy_list.c - see policy_list.h. */
#include "policy_list.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policies/registry.h"

static int check_spec(const char *spec, gm_err *err)
{
    char name[64];
    const char *colon = strchr(spec, ':');
    size_t len = colon ? (size_t)(colon - spec) : strlen(spec);
    if (len == 0 || len >= sizeof name)
        return gm_errf(err, GM_EUSAGE,
                       "--policies: empty or malformed entry '%s'; expected "
                       "NAME[:key=value,...] separated by commas",
                       spec);
    memcpy(name, spec, len);
    name[len] = 0;
    if (!gm_policy_find(name))
        return gm_errf(err, GM_EINVAL, "--policies: unknown policy '%s'; choose from: %s", name,
                       gm_policy_names());
    return GM_OK;
}

int gm_policy_list_split(const char *list, char ***specs, size_t *n, gm_err *err)
{
    *specs = NULL;
    *n = 0;
    char buf[4096];
    if (!list || !*list) {
        size_t k = 0, len = 0;
        for (; k < gm_policy_n_default(); k++)
            len += strlen(gm_policy_at(k)->name) + 1;
        char **v = malloc(k * sizeof *v + len);
        if (!v) return gm_errf(err, GM_ENOMEM, "out of memory");
        char *p = (char *)(v + k);
        for (size_t i = 0; i < k; i++) {
            v[i] = p;
            p += sprintf(p, "%s", gm_policy_at(i)->name) + 1;
        }
        *specs = v;
        *n = k;
        return GM_OK;
    }
    if (strlen(list) >= sizeof buf) return gm_errf(err, GM_EUSAGE, "--policies: list too long");
    /* pieces, then glue parameter continuations onto their spec */
    size_t cnt = 1;
    for (const char *q = list; *q; q++)
        cnt += *q == ',';
    char **v = malloc(cnt * sizeof *v + strlen(list) + 1);
    if (!v) return gm_errf(err, GM_ENOMEM, "out of memory");
    char *store = (char *)(v + cnt);
    strcpy(store, list);
    size_t k = 0;
    char *save = NULL;
    for (char *piece = strtok_r(store, ",", &save); piece; piece = strtok_r(NULL, ",", &save)) {
        if (k > 0 && strchr(piece, '=') && !strchr(piece, ':')) {
            piece[-1] = ','; /* rejoin with the previous spec */
            continue;
        }
        v[k++] = piece;
    }
    for (size_t i = 0; i < k; i++) {
        int rc = check_spec(v[i], err);
        if (rc) {
            free(v);
            return rc;
        }
        for (size_t j = 0; j < i; j++)
            if (!strcmp(v[i], v[j])) {
                gm_errf(err, GM_EUSAGE, "--policies: '%s' is listed twice", v[i]);
                free(v);
                return GM_EUSAGE;
            }
    }
    if (k == 0) {
        free(v);
        return gm_errf(err, GM_EUSAGE, "--policies: no policy given");
    }
    *specs = v;
    *n = k;
    return GM_OK;
}

static const gm_policy_ops *spec_ops(const char *spec)
{
    char name[64];
    const char *colon = strchr(spec, ':');
    size_t len = colon ? (size_t)(colon - spec) : strlen(spec);
    if (len >= sizeof name) return NULL;
    memcpy(name, spec, len);
    name[len] = 0;
    return gm_policy_find(name);
}

int gm_policy_spec_realizable(const char *spec)
{
    const gm_policy_ops *o = spec_ops(spec);
    return o ? o->realizable : 1;
}

double gm_policy_spec_cost(const char *spec)
{
    const gm_policy_ops *o = spec_ops(spec);
    return o && o->cost > 0 ? o->cost : 1;
}

double *gm_policy_spec_costs(char *const *specs, size_t n, size_t times)
{
    size_t m = n * times;
    double *c = malloc((m ? m : 1) * sizeof *c);
    for (size_t k = 0; c && k < m; k++)
        c[k] = gm_policy_spec_cost(specs[k % n]);
    return c;
}

int gm_policy_spec_deployable(const char *spec)
{
    return !strncmp(spec, "pytorch", 7) && (spec[7] == 0 || spec[7] == ':');
}

int gm_policies_append(char *buf, size_t cap, const char *arg, gm_err *err)
{
    size_t n = strlen(buf);
    if (n + strlen(arg) + 2 > cap) return gm_errf(err, GM_EUSAGE, "--policies: list too long");
    snprintf(buf + n, cap - n, "%s%s", n ? "," : "", arg);
    return GM_OK;
}
