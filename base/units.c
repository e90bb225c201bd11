/* units.c - see units.h. */
#include "units.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct suffix {
    const char *name;
    double mult;
};

static const struct suffix suffixes[] = {
    {"", 1.0},
    {"b", 1.0},
    {"k", 1024.0},
    {"kib", 1024.0},
    {"kb", 1e3},
    {"m", 1048576.0},
    {"mib", 1048576.0},
    {"mb", 1e6},
    {"g", 1073741824.0},
    {"gib", 1073741824.0},
    {"gb", 1e9},
    {"t", 1099511627776.0},
    {"tib", 1099511627776.0},
    {"tb", 1e12},
    /* Kubernetes' binary suffixes (resource quantities: 8Gi) */
    {"ki", 1024.0},
    {"mi", 1048576.0},
    {"gi", 1073741824.0},
    {"ti", 1099511627776.0},
};

int gm_size_decimal_note(const char *s, uint64_t bytes, char *buf, size_t len)
{
    char *end;
    if (!s || strtod(s, &end) < 0 || end == s) return 0;
    while (*end == ' ')
        end++;
    static const char *const dec[] = {"kb", "mb", "gb", "tb"};
    static const char *const bin[] = {"KiB", "MiB", "GiB", "TiB"};
    for (int i = 0; i < 4; i++)
        if (strcasecmp(end, dec[i]) == 0) {
            char b[32];
            snprintf(buf, len, "%s = %s (%c%c is 10^%d bytes); did you mean %.*s%s?", s,
                     gm_fmt_bytes(bytes, b, sizeof b), toupper((unsigned char)end[0]), 'B',
                     3 * (i + 1), (int)(end - s), s, bin[i]);
            return 1;
        }
    return 0;
}

int gm_parse_size(const char *s, const char *what, uint64_t *out, gm_err *err)
{
    if (!s || !*s)
        return gm_errf(err, GM_EINVAL,
                       "%s: empty size; give a number with an optional unit, "
                       "e.g. 24GiB, 512MB, 1.5G",
                       what);
    char *end;
    double v = strtod(s, &end);
    if (end == s || !isfinite(v) || v < 0)
        return gm_errf(err, GM_EINVAL,
                       "%s: '%s' is not a size; give a number with an optional unit, "
                       "e.g. 24GiB, 512MB, 1.5G",
                       what, s);
    while (*end == ' ')
        end++;
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        if (strcasecmp(end, suffixes[i].name) == 0) {
            double bytes = v * suffixes[i].mult;
            if (bytes > 1.8e19) return gm_errf(err, GM_EINVAL, "%s: '%s' is too large", what, s);
            *out = (uint64_t)llround(bytes);
            return GM_OK;
        }
    }
    return gm_errf(err, GM_EINVAL,
                   "%s: unknown unit in '%s'; use B, KiB, MiB, GiB, TiB (or KB, MB, GB, TB, "
                   "or K, M, G, T)",
                   what, s);
}

int gm_parse_time(const char *s, const char *what, uint64_t *out_ns, gm_err *err)
{
    static const struct suffix units[] = {{"", 1e9},   {"s", 1e9},  {"ms", 1e6},
                                          {"us", 1e3}, {"ns", 1.0}, {"min", 60e9}};
    char *end;
    double v = s ? strtod(s, &end) : 0;
    if (!s || end == s || !isfinite(v) || v < 0)
        return gm_errf(err, GM_EINVAL,
                       "%s: '%s' is not a duration; give e.g. 5s, 100ms, 250us or 1000ns", what,
                       s ? s : "");
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strcasecmp(end, units[i].name) == 0) {
            double ns = v * units[i].mult;
            if (ns > 1.8e19) return gm_errf(err, GM_EINVAL, "%s: '%s' is too long", what, s);
            *out_ns = (uint64_t)llround(ns);
            return GM_OK;
        }
    return gm_errf(err, GM_EINVAL, "%s: unknown unit in '%s'; use s, ms, us or ns", what, s);
}

int gm_parse_double(const char *s, const char *what, double lo, double hi, double *out, gm_err *err)
{
    char *end;
    double v = s ? strtod(s, &end) : 0;
    if (!s || end == s || *end || !isfinite(v) || v < lo || v > hi)
        return gm_errf(err, GM_EINVAL, "%s: '%s' is not a number between %g and %g", what,
                       s ? s : "", lo, hi);
    *out = v;
    return GM_OK;
}

char *gm_fmt_bytes(uint64_t bytes, char *buf, size_t len)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%llu B", (unsigned long long)bytes);
    else
        snprintf(buf, len, "%.2f %s", v, units[u]);
    return buf;
}

char *gm_fmt_ns(uint64_t ns, char *buf, size_t len)
{
    if (ns >= 1000000000ull)
        snprintf(buf, len, "%.3f s", (double)ns / 1e9);
    else if (ns >= 1000000ull)
        snprintf(buf, len, "%.2f ms", (double)ns / 1e6);
    else if (ns >= 1000ull)
        snprintf(buf, len, "%.1f us", (double)ns / 1e3);
    else
        snprintf(buf, len, "%llu ns", (unsigned long long)ns);
    return buf;
}
