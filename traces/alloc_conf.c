/* alloc_conf.c - see alloc_conf.h for the rules and where they come from. */
#include "alloc_conf.h"
#include "base/units.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define LARGE_BUFFER_MB (GM_PT_LARGE_BUFFER / GM_MiB) /* kLargeBuffer in MiB */
/* enough for a full 16-interval roundup_power2_divisions list (4 tokens each) */
#define GM_CONF_MAX_TOKENS 256

void gm_pt_conf_default(gm_pt_conf *c)
{
    memset(c, 0, sizeof *c);
    c->max_split_size = UINT64_MAX;
    c->max_non_split_rounding_size = LARGE_BUFFER_MB * GM_MiB;
}

static int is_pow2(uint64_t v)
{
    return v && !(v & (v - 1));
}

static int log2u(uint64_t v)
{
    return 63 - __builtin_clzll(v);
}

/* Tokenizer: PyTorch's lexArgs splits on ',', ':', '[', ']' and skips spaces. */
typedef struct lex {
    char tok[GM_CONF_MAX_TOKENS][64];
    int n;
} lex;

static int tokenize(const char *s, lex *lx, gm_err *err)
{
    lx->n = 0;
    char cur[64];
    size_t len = 0;
    for (const char *p = s;; p++) {
        char ch = *p;
        int sep = ch == 0 || ch == ',' || ch == ':' || ch == '[' || ch == ']' || ch == ' ';
        if (!sep) {
            if (len + 1 >= sizeof cur)
                return gm_errf(err, GM_EINVAL, "alloc conf '%s': token too long", s);
            cur[len++] = ch;
            continue;
        }
        if (len) {
            if (lx->n >= GM_CONF_MAX_TOKENS)
                return gm_errf(err, GM_EINVAL, "alloc conf '%s': too many options", s);
            cur[len] = 0;
            memcpy(lx->tok[lx->n++], cur, len + 1);
            len = 0;
        }
        if (ch == ',' || ch == ':' || ch == '[' || ch == ']') {
            if (lx->n >= GM_CONF_MAX_TOKENS)
                return gm_errf(err, GM_EINVAL, "alloc conf '%s': too many options", s);
            lx->tok[lx->n][0] = ch;
            lx->tok[lx->n++][1] = 0;
        }
        if (ch == 0) break;
    }
    return GM_OK;
}

static int parse_u64(const char *s, const char *conf, const char *key, uint64_t *out, gm_err *err)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || *end || errno || s[0] == '-')
        return gm_errf(err, GM_EINVAL, "alloc conf '%s': %s needs a whole number, got '%s'", conf,
                       key, s);
    *out = v;
    return GM_OK;
}

static int expect(const lex *lx, int i, const char *what, const char *conf, gm_err *err)
{
    if (i >= lx->n || strcmp(lx->tok[i], what))
        return gm_errf(err, GM_EINVAL, "alloc conf '%s': expected '%s' after '%s'", conf, what,
                       i > 0 && i - 1 < lx->n ? lx->tok[i - 1] : "");
    return GM_OK;
}

static int parse_bool(const char *v, const char *conf, const char *key, int *out, gm_err *err)
{
    if (!strcmp(v, "True") || !strcmp(v, "true"))
        *out = 1;
    else if (!strcmp(v, "False") || !strcmp(v, "false"))
        *out = 0;
    else
        return gm_errf(err, GM_EINVAL, "alloc conf '%s': %s takes True or False, got '%s'", conf,
                       key, v);
    return GM_OK;
}

/* roundup_power2_divisions: one value (all intervals) or a [MB:div,...,>:div] list. */
static int parse_divisions(const lex *lx, int *ip, const char *conf, gm_pt_conf *c, gm_err *err)
{
    int i = *ip;
    if (i < lx->n && strcmp(lx->tok[i], "[")) {
        uint64_t v;
        if (parse_u64(lx->tok[i], conf, "roundup_power2_divisions", &v, err)) return err->code;
        if (!is_pow2(v))
            return gm_errf(err, GM_EINVAL,
                           "alloc conf '%s': roundup_power2_divisions must be a power of 2, "
                           "got %llu",
                           conf, (unsigned long long)v);
        for (int k = 0; k < GM_PT_ROUNDUP_INTERVALS; k++)
            c->roundup_divisions[k] = v;
        *ip = i + 1;
        return GM_OK;
    }
    i++; /* '[' */
    int first = 1, last = 0;
    while (i < lx->n && strcmp(lx->tok[i], "]")) {
        const char *k = lx->tok[i];
        if (expect(lx, i + 1, ":", conf, err) || i + 2 >= lx->n)
            return gm_errf(err, GM_EINVAL,
                           "alloc conf '%s': roundup_power2_divisions list needs SIZE_MB:DIV "
                           "pairs, e.g. [256:1,512:2,>:8]",
                           conf);
        uint64_t div;
        if (parse_u64(lx->tok[i + 2], conf, "roundup_power2_divisions", &div, err))
            return err->code;
        if (div && !is_pow2(div))
            return gm_errf(err, GM_EINVAL,
                           "alloc conf '%s': roundup_power2_divisions values must be 0 or a "
                           "power of 2, got %llu",
                           conf, (unsigned long long)div);
        if (!strcmp(k, ">")) {
            for (int j = last; j < GM_PT_ROUNDUP_INTERVALS; j++)
                c->roundup_divisions[j] = div;
        } else {
            uint64_t mb;
            if (parse_u64(k, conf, "roundup_power2_divisions", &mb, err)) return err->code;
            if (!is_pow2(mb))
                return gm_errf(err, GM_EINVAL,
                               "alloc conf '%s': roundup_power2_divisions sizes must be powers "
                               "of 2 (in MB), got %llu",
                               conf, (unsigned long long)mb);
            int idx = log2u(mb);
            if (idx > GM_PT_ROUNDUP_INTERVALS - 1) idx = GM_PT_ROUNDUP_INTERVALS - 1;
            if (first) /* the first entry also covers every smaller interval */
                for (int j = 0; j < idx; j++)
                    c->roundup_divisions[j] = div;
            first = 0;
            c->roundup_divisions[idx] = div;
            last = idx;
        }
        i += 3;
        if (i < lx->n && !strcmp(lx->tok[i], ",")) i++;
    }
    if (expect(lx, i, "]", conf, err)) return err->code;
    *ip = i + 1;
    return GM_OK;
}

int gm_pt_conf_parse(const char *s, gm_pt_conf *c, gm_err *err)
{
    gm_pt_conf_default(c);
    if (!s || !*s) return GM_OK;
    lex lx;
    if (tokenize(s, &lx, err)) return err->code;
    int i = 0;
    while (i < lx.n) {
        const char *key = lx.tok[i];
        if (!strcmp(key, ",")) {
            i++;
            continue;
        }
        if (expect(&lx, i + 1, ":", s, err) || i + 2 >= lx.n)
            return gm_errf(err, GM_EINVAL,
                           "alloc conf '%s': expected key:value after '%s' (e.g. "
                           "max_split_size_mb:128,expandable_segments:True)",
                           s, key);
        const char *val = lx.tok[i + 2];
        int next = i + 3;
        uint64_t v;
        if (!strcmp(key, "max_split_size_mb")) {
            if (parse_u64(val, s, key, &v, err)) return err->code;
            if (v <= LARGE_BUFFER_MB)
                return gm_errf(err, GM_EINVAL,
                               "alloc conf '%s': max_split_size_mb too small, must be > %llu "
                               "(PyTorch rejects it too)",
                               s, (unsigned long long)LARGE_BUFFER_MB);
            c->max_split_size = v > UINT64_MAX / GM_MiB ? UINT64_MAX : v * GM_MiB;
        } else if (!strcmp(key, "max_non_split_rounding_mb")) {
            if (parse_u64(val, s, key, &v, err)) return err->code;
            if (v < LARGE_BUFFER_MB) v = LARGE_BUFFER_MB; /* PyTorch clamps it up to kLargeBuffer */
            c->max_non_split_rounding_size = v > UINT64_MAX / GM_MiB ? UINT64_MAX : v * GM_MiB;
        } else if (!strcmp(key, "garbage_collection_threshold")) {
            char *end;
            double d = strtod(val, &end);
            if (end == val || *end || !(d > 0.0) || !(d < 1.0))
                return gm_errf(err, GM_EINVAL,
                               "alloc conf '%s': garbage_collection_threshold must be "
                               "between 0.0 and 1.0 (exclusive), got '%s'",
                               s, val);
            c->gc_threshold = d;
        } else if (!strcmp(key, "roundup_power2_divisions")) {
            int j = i + 2;
            if (parse_divisions(&lx, &j, s, c, err)) return err->code;
            next = j;
        } else if (!strcmp(key, "expandable_segments")) {
            if (parse_bool(val, s, key, &c->expandable_segments, err)) return err->code;
        } else if (!strcmp(key, "backend")) {
            if (!strcmp(val, "native"))
                c->backend_async = 0;
            else if (!strcmp(val, "cudaMallocAsync"))
                c->backend_async = 1;
            else
                return gm_errf(err, GM_EINVAL,
                               "alloc conf '%s': backend must be native or cudaMallocAsync", s);
        } else if (!strcmp(key, "release_lock_on_cudamalloc") ||
                   !strcmp(key, "pinned_use_cuda_host_register") ||
                   !strcmp(key, "pinned_use_background_threads")) {
            int b;
            if (parse_bool(val, s, key, &b, err)) /* accepted; no effect on device memory */
                return err->code;
        } else if (!strcmp(key, "pinned_num_register_threads")) {
            if (parse_u64(val, s, key, &v, err)) /* host-side only */
                return err->code;
        } else {
            return gm_errf(err, GM_EINVAL,
                           "alloc conf '%s': unrecognized option '%s'; known: "
                           "max_split_size_mb, max_non_split_rounding_mb, "
                           "garbage_collection_threshold, roundup_power2_divisions, "
                           "expandable_segments, backend, release_lock_on_cudamalloc",
                           s, key);
        }
        i = next;
    }
    return GM_OK;
}

int gm_pt_conf_selects_async(const char *s)
{
    if (!s || !*s) return 0;
    lex lx;
    gm_err err = {0};
    if (tokenize(s, &lx, &err)) return 0;
    int async = 0;
    for (int i = 0; i + 2 < lx.n; i++)
        if (!strcmp(lx.tok[i], "backend") && !strcmp(lx.tok[i + 1], ":") &&
            (i == 0 || !strcmp(lx.tok[i - 1], ",")))
            async = !strcmp(lx.tok[i + 2], "cudaMallocAsync");
    return async;
}

void gm_pt_conf_format(const gm_pt_conf *c, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = 0;
#define ADD(...)                                                                                   \
    do {                                                                                           \
        if (n < len) n += snprintf(buf + n, len - n, "%s", n ? "," : "");                          \
        if (n < len) n += snprintf(buf + n, len - n, __VA_ARGS__);                                 \
    } while (0)
    if (c->max_split_size != UINT64_MAX)
        ADD("max_split_size_mb:%llu", (unsigned long long)(c->max_split_size / GM_MiB));
    if (c->max_non_split_rounding_size != LARGE_BUFFER_MB * GM_MiB)
        ADD("max_non_split_rounding_mb:%llu",
            (unsigned long long)(c->max_non_split_rounding_size / GM_MiB));
    if (c->gc_threshold > 0) ADD("garbage_collection_threshold:%g", c->gc_threshold);
    int any = 0;
    for (int k = 0; k < GM_PT_ROUNDUP_INTERVALS; k++)
        any |= c->roundup_divisions[k] != 0;
    if (any) {
        ADD("roundup_power2_divisions:[");
        for (int k = 0; k < GM_PT_ROUNDUP_INTERVALS && n < len; k++)
            n += snprintf(buf + n, len - n, "%s%llu:%llu", k ? "," : "", 1ull << k,
                          (unsigned long long)c->roundup_divisions[k]);
        if (n < len) n += snprintf(buf + n, len - n, "]");
    }
    if (c->expandable_segments) ADD("expandable_segments:True");
    if (c->backend_async) ADD("backend:cudaMallocAsync");
#undef ADD
}
