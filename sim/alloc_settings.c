/* alloc_settings.c - see alloc_settings.h. */
#include "alloc_settings.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/units.h"

static void trim_copy(char *dst, size_t cap, const char *b, const char *e)
{
    while (b < e && (*b == ' ' || *b == '\t'))
        b++;
    while (e > b && (e[-1] == ' ' || e[-1] == '\t'))
        e--;
    size_t n = (size_t)(e - b);
    if (n >= cap) n = cap - 1;
    memcpy(dst, b, n);
    dst[n] = 0;
}

int gm_settings_parse(const char *model, const char *conf, gm_settings *s, gm_err *err)
{
    memset(s, 0, sizeof *s);
    s->model = model;
    s->conf = conf ? conf : "";
    const char *p = s->conf;
    while (*p) {
        /* one piece: up to a ',' outside brackets */
        const char *b = p;
        int depth = 0;
        while (*p && (depth > 0 || *p != ',')) {
            depth += *p == '[';
            depth -= *p == ']' && depth > 0;
            p++;
        }
        const char *e = p;
        if (*p == ',') p++;
        const char *colon = memchr(b, ':', (size_t)(e - b));
        char piece[320];
        trim_copy(piece, sizeof piece, b, e);
        if (!piece[0]) continue;
        if (!colon)
            return gm_errf(err, GM_EINVAL,
                           "%s: setting '%s' in '%s' has no value; write key:value (e.g. "
                           "initial_pool_size:1GiB)",
                           model, piece, s->conf);
        if (s->n == GM_SETTINGS_MAX)
            return gm_errf(err, GM_EINVAL, "%s: '%s' has more than %d settings", model, s->conf,
                           GM_SETTINGS_MAX);
        gm_setting *st = &s->v[s->n];
        trim_copy(st->key, sizeof st->key, b, colon);
        trim_copy(st->val, sizeof st->val, colon + 1, e);
        for (int i = 0; i < s->n; i++)
            if (!strcmp(s->v[i].key, st->key))
                return gm_errf(err, GM_EINVAL, "%s: setting '%s' is given twice in '%s'", model,
                               st->key, s->conf);
        s->n++;
    }
    return GM_OK;
}

const char *gm_settings_get(gm_settings *s, const char *key)
{
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->v[i].key, key)) {
            s->v[i].used = 1;
            return s->v[i].val;
        }
    return NULL;
}

/* "allocator rmm-pool, setting initial_pool_size" for the unit parsers. */
static const char *what(const gm_settings *s, const char *key, char *buf, size_t n)
{
    snprintf(buf, n, "%s: setting %s", s->model, key);
    return buf;
}

int gm_settings_size(gm_settings *s, const char *key, uint64_t *out, gm_err *err)
{
    const char *v = gm_settings_get(s, key);
    char w[160];
    if (!v) return 0;
    uint64_t x;
    if (gm_parse_size(v, what(s, key, w, sizeof w), &x, err)) return err->code;
    *out = x;
    return 1;
}

int gm_settings_time(gm_settings *s, const char *key, uint64_t *out_ns, gm_err *err)
{
    const char *v = gm_settings_get(s, key);
    char w[160];
    if (!v) return 0;
    uint64_t x;
    if (gm_parse_time(v, what(s, key, w, sizeof w), &x, err)) return err->code;
    *out_ns = x;
    return 1;
}

int gm_settings_bool(gm_settings *s, const char *key, int *out, gm_err *err)
{
    const char *v = gm_settings_get(s, key);
    if (!v) return 0;
    if (!strcmp(v, "True") || !strcmp(v, "true") || !strcmp(v, "1"))
        *out = 1;
    else if (!strcmp(v, "False") || !strcmp(v, "false") || !strcmp(v, "0"))
        *out = 0;
    else
        return gm_errf(err, GM_EINVAL, "%s: setting %s takes True or False, not '%s'", s->model,
                       key, v);
    return 1;
}

int gm_settings_double(gm_settings *s, const char *key, double lo, double hi, double *out,
                       gm_err *err)
{
    const char *v = gm_settings_get(s, key);
    char w[160];
    if (!v) return 0;
    double x;
    if (gm_parse_double(v, what(s, key, w, sizeof w), lo, hi, &x, err)) return err->code;
    *out = x;
    return 1;
}

int gm_settings_int(gm_settings *s, const char *key, long lo, long hi, long *out, gm_err *err)
{
    const char *v = gm_settings_get(s, key);
    if (!v) return 0;
    char *end;
    long x = strtol(v, &end, 10);
    if (end == v || *end || x < lo || x > hi)
        return gm_errf(err, GM_EINVAL,
                       "%s: setting %s takes a whole number in [%ld, %ld], not '%s'", s->model, key,
                       lo, hi, v);
    *out = x;
    return 1;
}

int gm_settings_check(const gm_settings *s, const char *known, gm_err *err)
{
    for (int i = 0; i < s->n; i++)
        if (!s->v[i].used)
            return gm_errf(err, GM_EINVAL, "%s: unknown setting '%s' in '%s'; known: %s", s->model,
                           s->v[i].key, s->conf, known);
    return GM_OK;
}
