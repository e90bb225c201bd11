/*
 * alloc_conf.c - PYTORCH_CUDA_ALLOC_CONF as each PyTorch version parses it
 * (alloc_conf.h; the key table with its sources is traces/ALLOC_CONF.md).
 *
 * Facts, from PyTorch's CachingAllocatorConfig (2.0-2.1, in
 * c10/cuda/CUDACachingAllocator.cpp), c10/cuda/CUDAAllocatorConfig.cpp
 * (2.2-2.9: lexArgs, consumeToken, parseArgs; 2.10 on: ConfigTokenizer) and
 * c10/core/AllocatorConfig.{h,cpp} (AcceleratorAllocatorConfig). Messages
 * are PyTorch's, quoted; gmsim adds the string it was parsing.
 */
#include "alloc_conf.h"
#include "base/units.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LARGE_BUFFER_MB (GM_PT_LARGE_BUFFER / GM_MiB) /* kLargeBuffer in MiB */
/* enough for a full 16-interval roundup_power2_divisions list (4 tokens each) */
#define GM_CONF_MAX_TOKENS 256

void gm_pt_conf_default(gm_pt_conf *c)
{
    memset(c, 0, sizeof *c);
    c->max_split_size = UINT64_MAX;
    c->large_segment_size = GM_PT_LARGE_BUFFER;
    c->max_non_split_rounding_size = GM_PT_LARGE_BUFFER;
    c->torch_version = GM_TORCH_NEWEST;
}

static int is_pow2(uint64_t v)
{
    return v && !(v & (v - 1));
}

static int log2u(uint64_t v)
{
    return 63 - __builtin_clzll(v);
}

/* ---------------- the keys ---------------- */

enum vkind {
    V_SIZE_MB,   /* a whole number of MiB            */
    V_BOOL,      /* True / False                     */
    V_DIVISIONS, /* one power of two, or a list      */
    V_DOUBLE,    /* a number                         */
    V_BACKEND,   /* native / cudaMallocAsync         */
    V_COUNT,     /* a whole number                   */
    V_ANY,       /* a word (a spec PyTorch only warns about) */
    V_LIST,      /* a [name:value,...] list          */
};

enum key_id {
    K_MAX_SPLIT,
    K_ROUNDUP,
    K_GC,
    K_BACKEND,
    K_EXPANDABLE,
    K_NON_SPLIT,
    K_FRACTION,
    K_LARGE_SEGMENT,
    K_HOST, /* accepted, no effect on the device allocator model */
};

typedef struct key {
    const char *name;
    int since; /* GM_TORCH_* that added it */
    enum vkind kind;
    enum key_id id;
    const char *why; /* K_HOST: what it changes instead */
} key;

/* Every key of PyTorch 2.0 to 2.11 (ALLOC_CONF.md). */
static const key keys[] = {
    {"max_split_size_mb", GM_TORCH_2_0, V_SIZE_MB, K_MAX_SPLIT, NULL},
    {"roundup_power2_divisions", GM_TORCH_2_0, V_DIVISIONS, K_ROUNDUP, NULL},
    {"garbage_collection_threshold", GM_TORCH_2_0, V_DOUBLE, K_GC, NULL},
    {"backend", GM_TORCH_2_0, V_BACKEND, K_BACKEND, NULL},
    {"expandable_segments", GM_TORCH_2_1, V_BOOL, K_EXPANDABLE, NULL},
    {"release_lock_on_cudamalloc", GM_TORCH_2_2, V_BOOL, K_HOST, "the allocator's lock"},
    {"release_lock_on_hipmalloc", GM_TORCH_2_2, V_BOOL, K_HOST, "the allocator's lock (ROCm)"},
    {"pinned_use_cuda_host_register", GM_TORCH_2_2, V_BOOL, K_HOST, "pinned host memory"},
    {"pinned_use_hip_host_register", GM_TORCH_2_2, V_BOOL, K_HOST, "pinned host memory (ROCm)"},
    {"pinned_num_register_threads", GM_TORCH_2_2, V_COUNT, K_HOST, "pinned host memory"},
    {"max_non_split_rounding_mb", GM_TORCH_2_5, V_SIZE_MB, K_NON_SPLIT, NULL},
    {"pinned_use_background_threads", GM_TORCH_2_5, V_BOOL, K_HOST, "pinned host memory"},
    {"graph_capture_record_stream_reuse", GM_TORCH_2_9, V_BOOL, K_HOST,
     "reuse during CUDA-graph capture"},
    {"pinned_reserve_segment_size_mb", GM_TORCH_2_10, V_SIZE_MB, K_HOST, "pinned host memory"},
    {"per_process_memory_fraction", GM_TORCH_2_10, V_DOUBLE, K_FRACTION, NULL},
    {"large_segment_size_mb", GM_TORCH_2_11, V_SIZE_MB, K_LARGE_SEGMENT, NULL},
    {"pinned_max_round_threshold_mb", GM_TORCH_2_11, V_SIZE_MB, K_HOST, "pinned host memory"},
    {"pinned_max_cached_size_mb", GM_TORCH_2_11, V_SIZE_MB, K_HOST, "pinned host memory"},
    {"pinned_free_catch_all", GM_TORCH_2_11, V_BOOL, K_HOST, "pinned host memory"},
    {"throw_on_cudamalloc_oom", GM_TORCH_2_11, V_BOOL, K_HOST,
     "when an OOM is raised (not modelled)"},
    {"expandable_segments_reserve", GM_TORCH_2_11, V_ANY, K_HOST,
     "the address space an expandable segment reserves"},
    {"expandable_segments_reserve_by_class", GM_TORCH_2_11, V_LIST, K_HOST,
     "the address space an expandable segment reserves"},
};
#define NKEYS (sizeof keys / sizeof keys[0])

static const key *find_key(const char *name, int version)
{
    for (size_t i = 0; i < NKEYS; i++)
        if (!strcmp(keys[i].name, name) && keys[i].since <= version) return &keys[i];
    return NULL;
}

/* ---------------- tokens ---------------- */

typedef struct lex {
    char tok[GM_CONF_MAX_TOKENS][64];
    int n;
    const char *conf; /* the string, for messages */
    int version;
    int modern; /* the 2.10 ConfigTokenizer rules */
} lex;

/* lexArgs (2.0-2.9): ',', ':', '[', ']' are tokens and only ' ' is dropped;
 * ConfigTokenizer (2.10 on) drops every whitespace character. */
static int tokenize(lex *lx, gm_err *err)
{
    lx->n = 0;
    char cur[64];
    size_t len = 0;
    for (const char *p = lx->conf;; p++) {
        char ch = *p;
        int drop = lx->modern ? isspace((unsigned char)ch) : ch == ' ';
        if (drop) continue;
        int sep = ch == 0 || ch == ',' || ch == ':' || ch == '[' || ch == ']';
        if (!sep) {
            if (len + 1 >= sizeof cur)
                return gm_errf(err, GM_EINVAL, "alloc conf '%s': a word is too long", lx->conf);
            cur[len++] = ch;
            continue;
        }
        if (len) {
            if (lx->n >= GM_CONF_MAX_TOKENS)
                return gm_errf(err, GM_EINVAL, "alloc conf '%s': too many options", lx->conf);
            cur[len] = 0;
            memcpy(lx->tok[lx->n++], cur, len + 1);
            len = 0;
        }
        if (ch) {
            if (lx->n >= GM_CONF_MAX_TOKENS)
                return gm_errf(err, GM_EINVAL, "alloc conf '%s': too many options", lx->conf);
            lx->tok[lx->n][0] = ch;
            lx->tok[lx->n++][1] = 0;
        }
        if (ch == 0) break;
    }
    return GM_OK;
}

/* The message for a missing token: lexArgs' callers name the option;
 * ConfigTokenizer's assert does not. */
static int missing(const lex *lx, const char *key, gm_err *err)
{
    if (lx->modern)
        return gm_errf(err, GM_EINVAL,
                       "alloc conf '%s': Index out of bounds in ConfigTokenizer (the string "
                       "ends where a value was expected after '%s')",
                       lx->conf, key);
    return gm_errf(err, GM_EINVAL, "alloc conf '%s': Error, expecting %s value", lx->conf, key);
}

/* consumeToken (2.0-2.9) insists on the separator; checkToken (2.10 on)
 * only looks, so any token stands in for it. */
static int separator(const lex *lx, int i, char c, gm_err *err)
{
    if (lx->modern) return GM_OK;
    if (i >= lx->n || lx->tok[i][0] != c || lx->tok[i][1])
        return gm_errf(err, GM_EINVAL,
                       "alloc conf '%s': Error parsing CachingAllocator settings, expected %c",
                       lx->conf, c);
    return GM_OK;
}

/* stoi / stoull: the leading digits count, what follows is ignored. */
static int number(const lex *lx, int i, const char *key, uint64_t *out, gm_err *err)
{
    if (i >= lx->n) return missing(lx, key, err);
    const char *s = lx->tok[i];
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || s[0] == '-' || errno)
        return gm_errf(err, GM_EINVAL,
                       "alloc conf '%s': %s needs a whole number, not '%s' (PyTorch: stoull "
                       "fails)",
                       lx->conf, key, s);
    *out = v;
    return GM_OK;
}

static int boolean(const lex *lx, int i, const char *key, int *out, gm_err *err)
{
    if (i >= lx->n) return missing(lx, key, err);
    const char *v = lx->tok[i];
    if (!strcmp(v, "True") || !strcmp(v, "False")) {
        *out = v[0] == 'T';
        return GM_OK;
    }
    if (lx->modern)
        return gm_errf(err, GM_EINVAL,
                       "alloc conf '%s': Expected 'True' or 'False' at index %d in "
                       "ConfigTokenizer but got '%s'",
                       lx->conf, i, v);
    return gm_errf(err, GM_EINVAL, "alloc conf '%s': Expected a single True/False argument for %s",
                   lx->conf, key);
}

/* ---------------- values ---------------- */

/* roundup_power2_divisions: one power of two for every interval, or a list
 * [MB:div,...,>:div] whose keys are interval starts in MiB (powers of two). */
static int divisions(const lex *lx, int *ip, gm_pt_conf *c, gm_err *err)
{
    const char *spell = lx->version >= GM_TORCH_2_9 ? "divisions" : "divisons"; /* sic, < 2.9 */
    int i = *ip;
    if (i >= lx->n) return missing(lx, "roundup_power2_divisions", err);
    if (strcmp(lx->tok[i], "[")) {
        uint64_t v;
        if (number(lx, i, "roundup_power2_divisions", &v, err)) return GM_EINVAL;
        if (!is_pow2(v))
            return gm_errf(err, GM_EINVAL,
                           "alloc conf '%s': For roundups, the %s has to be power of 2", lx->conf,
                           spell);
        for (int k = 0; k < GM_PT_ROUNDUP_INTERVALS; k++)
            c->roundup_divisions[k] = v;
        *ip = i;
        return GM_OK;
    }
    int first = 1, last = 0, zero_ok = lx->version >= GM_TORCH_2_3;
    for (i++; i < lx->n && strcmp(lx->tok[i], "]");) {
        const char *k = lx->tok[i];
        uint64_t div;
        if (separator(lx, i + 1, ':', err)) return GM_EINVAL;
        if (number(lx, i + 2, "roundup_power2_divisions", &div, err)) return GM_EINVAL;
        if (zero_ok ? div && !is_pow2(div) : !is_pow2(div))
            return gm_errf(err, GM_EINVAL,
                           "alloc conf '%s': For roundups, the %s has to be power of 2%s", lx->conf,
                           spell, zero_ok ? " or 0 to disable roundup" : "");
        if (!strcmp(k, ">")) {
            /* lexArgs fills from the last interval given, which it overwrites;
             * AcceleratorAllocatorConfig (2.10 on) from the one after it */
            int from = lx->modern && !first ? last + 1 : last;
            for (int j = from; j < GM_PT_ROUNDUP_INTERVALS; j++)
                c->roundup_divisions[j] = div;
        } else {
            uint64_t mb;
            if (number(lx, i, "roundup_power2_divisions", &mb, err)) return GM_EINVAL;
            if (!is_pow2(mb))
                return gm_errf(err, GM_EINVAL,
                               "alloc conf '%s': For roundups, the intervals have to be power of 2",
                               lx->conf);
            int idx = log2u(mb);
            if (idx > GM_PT_ROUNDUP_INTERVALS - 1) idx = GM_PT_ROUNDUP_INTERVALS - 1;
            if (first) /* the first entry also covers every smaller interval */
                for (int j = 0; j < idx; j++)
                    c->roundup_divisions[j] = div;
            c->roundup_divisions[idx] = div;
            last = idx;
        }
        first = 0;
        i += 3;
        if (i < lx->n && strcmp(lx->tok[i], "]")) {
            if (separator(lx, i, ',', err)) return GM_EINVAL;
            i++;
        }
    }
    if (i >= lx->n)
        return gm_errf(err, GM_EINVAL, "alloc conf '%s': %s", lx->conf,
                       lx->modern ? "Expected closing bracket ']' in ConfigTokenizer but reached "
                                    "end of config"
                                  : "Error parsing roundup_power2_divisions value");
    *ip = i;
    return GM_OK;
}

/* A [name:value,...] list (expandable_segments_reserve_by_class): skipped. */
static int skip_list(const lex *lx, int *ip, const char *key, gm_err *err)
{
    int i = *ip;
    if (i >= lx->n) return missing(lx, key, err);
    if (strcmp(lx->tok[i], "[")) return GM_OK;
    while (i < lx->n && strcmp(lx->tok[i], "]"))
        i++;
    if (i >= lx->n)
        return gm_errf(err, GM_EINVAL,
                       "alloc conf '%s': Expected closing bracket ']' in ConfigTokenizer but "
                       "reached end of config",
                       lx->conf);
    *ip = i;
    return GM_OK;
}

static void note_no_effect(gm_pt_conf *c, const key *k)
{
    size_t n = strlen(c->no_effect);
    if (strstr(c->no_effect, k->name)) return;
    snprintf(c->no_effect + n, sizeof c->no_effect - n, "%s%s (%s)", n ? ", " : "", k->name,
             k->why);
}

/* A MiB size that must be above (old) or at least (new) a bound. */
static int size_at_least(const lex *lx, const char *key, uint64_t v, uint64_t bound, gm_err *err)
{
    int ok = lx->modern ? v >= bound : v > bound;
    if (ok) return GM_OK;
    return gm_errf(err, GM_EINVAL,
                   "alloc conf '%s': CachingAllocator option %s too small, must be %s %llu",
                   lx->conf, key, lx->modern ? ">=" : ">", (unsigned long long)bound);
}

static uint64_t mib(uint64_t v)
{
    return v > UINT64_MAX / GM_MiB ? UINT64_MAX : v * GM_MiB;
}

/* The value of key k at tokens[*ip]; *ip is left on its last token. */
static int value(const lex *lx, const key *k, int *ip, gm_pt_conf *c, gm_err *err)
{
    int i = *ip;
    uint64_t v = 0;
    int b = 0;
    switch (k->kind) {
    case V_DIVISIONS:
        return divisions(lx, ip, c, err);
    case V_LIST:
        return skip_list(lx, ip, k->name, err);
    case V_ANY:
        return i < lx->n ? GM_OK : missing(lx, k->name, err);
    case V_BOOL:
        if (boolean(lx, i, k->name, &b, err)) return GM_EINVAL;
        break;
    case V_BACKEND:
        if (i >= lx->n) return missing(lx, k->name, err);
        if (!strcmp(lx->tok[i], "native"))
            c->backend_async = 0;
        else if (!strcmp(lx->tok[i], "cudaMallocAsync"))
            c->backend_async = 1;
        else
            return gm_errf(err, GM_EINVAL,
                           "alloc conf '%s': Unknown allocator backend, options are native and "
                           "cudaMallocAsync",
                           lx->conf);
        return GM_OK;
    case V_DOUBLE: {
        if (i >= lx->n) return missing(lx, k->name, err);
        char *end;
        double d = strtod(lx->tok[i], &end);
        if (end == lx->tok[i])
            return gm_errf(err, GM_EINVAL, "alloc conf '%s': %s needs a number, not '%s'", lx->conf,
                           k->name, lx->tok[i]);
        if (k->id == K_GC) {
            if (!(d > 0.0) || !(d < 1.0))
                return gm_errf(err, GM_EINVAL, "alloc conf '%s': %s", lx->conf,
                               lx->modern   ? "garbage_collect_threshold is invalid, set it in "
                                              "(0.0, 1.0)"
                               : !(d > 0.0) ? "garbage_collect_threshold too small, set it "
                                              "0.0~1.0"
                                            : "garbage_collect_threshold too big, set it 0.0~1.0");
            c->gc_threshold = d;
        } else {
            if (!(d >= 0.0) || !(d <= 1.0))
                return gm_errf(err, GM_EINVAL,
                               "alloc conf '%s': per_process_memory_fraction is invalid, set it "
                               "in [0.0, 1.0]",
                               lx->conf);
            c->memory_fraction = d < 1.0 ? d : 0; /* 1.0: no limit */
        }
        return GM_OK;
    }
    case V_SIZE_MB:
    case V_COUNT:
        if (number(lx, i, k->name, &v, err)) return GM_EINVAL;
        break;
    }
    switch (k->id) {
    case K_MAX_SPLIT: {
        uint64_t bound =
            lx->version >= GM_TORCH_2_11 ? c->large_segment_size / GM_MiB : LARGE_BUFFER_MB;
        if (size_at_least(lx, k->name, v, bound, err)) return GM_EINVAL;
        c->max_split_size = mib(v);
        return GM_OK;
    }
    case K_NON_SPLIT: {
        uint64_t bound =
            lx->version >= GM_TORCH_2_11 ? c->large_segment_size / GM_MiB : LARGE_BUFFER_MB;
        if (size_at_least(lx, k->name, v, bound, err)) return GM_EINVAL;
        c->max_non_split_rounding_size = mib(v);
        return GM_OK;
    }
    case K_LARGE_SEGMENT:
        if (v <= GM_PT_MIN_LARGE_ALLOC / GM_MiB)
            return gm_errf(err, GM_EINVAL,
                           "alloc conf '%s': CachingAllocator option large_segment_size_mb must "
                           "be > 10 MB",
                           lx->conf);
        c->large_segment_size = mib(v);
        return GM_OK;
    case K_EXPANDABLE:
        c->expandable_segments = b;
        return GM_OK;
    default: /* K_HOST */
        if (!strcmp(k->name, "pinned_num_register_threads")) {
            char got[40] = ""; /* 2.10 on: the value follows */
            if (lx->modern) snprintf(got, sizeof got, ", got %llu", (unsigned long long)v);
            if (!is_pow2(v))
                return gm_errf(err, GM_EINVAL,
                               "alloc conf '%s': Number of register threads has to be power of 2%s",
                               lx->conf, got);
            if (v > 128)
                return gm_errf(err, GM_EINVAL,
                               "alloc conf '%s': Number of register threads should be less than "
                               "or equal to 128%s",
                               lx->conf, got);
        }
        if (!strcmp(k->name, "pinned_reserve_segment_size_mb") && v == 0)
            return gm_errf(err, GM_EINVAL,
                           "alloc conf '%s': Pinned reserve segment size has to be greater than 0",
                           lx->conf);
        note_no_effect(c, k);
        return GM_OK;
    }
}

static int unknown(const lex *lx, const char *name, gm_err *err)
{
    const key *later = find_key(name, GM_TORCH_NEWEST);
    char hint[160] = "";
    if (later)
        snprintf(hint, sizeof hint,
                 " (%s exists from PyTorch %d.%d on; these rules are %d.%d's: --torch-version "
                 "picks others)",
                 name, later->since / 100, later->since % 100, lx->version / 100,
                 lx->version % 100);
    if (lx->modern)
        return gm_errf(err, GM_EINVAL,
                       "alloc conf '%s': Unrecognized key '%s' in CUDA allocator config.%s",
                       lx->conf, name, hint);
    return gm_errf(err, GM_EINVAL, "alloc conf '%s': Unrecognized CachingAllocator option: %s%s",
                   lx->conf, name, hint);
}

int gm_pt_conf_parse_for(const char *s, int version, gm_pt_conf *c, gm_err *err)
{
    gm_pt_conf_default(c);
    if (version <= 0) version = GM_TORCH_NEWEST;
    c->torch_version = version;
    if (!s || !*s) return GM_OK; /* set but empty: the defaults */
    lex *lx = malloc(sizeof *lx);
    if (!lx) return gm_errf(err, GM_ENOMEM, "out of memory");
    lx->conf = s;
    lx->version = version;
    lx->modern = version >= GM_TORCH_2_10;
    int rc = tokenize(lx, err);
    /* large_segment_size_mb is read before the others (2.11): it bounds them */
    const key *large = find_key("large_segment_size_mb", version);
    for (int i = 0; rc == GM_OK && large && i + 2 < lx->n; i++)
        if (!strcmp(lx->tok[i], large->name)) {
            int j = i + 2;
            rc = value(lx, large, &j, c, err);
        }
    for (int i = 0; rc == GM_OK && i < lx->n; i++) {
        const key *k = find_key(lx->tok[i], version);
        if (!k) {
            rc = unknown(lx, lx->tok[i], err);
            break;
        }
        if ((rc = separator(lx, i + 1, ':', err))) break;
        i += 2;
        if ((rc = value(lx, k, &i, c, err))) break;
        if (i + 1 < lx->n) { /* between options: ',' (checked by lexArgs only) */
            if ((rc = separator(lx, i + 1, ',', err))) break;
            i++;
        }
    }
    if (c->max_non_split_rounding_size == GM_PT_LARGE_BUFFER)
        c->max_non_split_rounding_size = c->large_segment_size; /* its default follows */
    free(lx);
    return rc;
}

int gm_pt_conf_parse(const char *s, gm_pt_conf *c, gm_err *err)
{
    return gm_pt_conf_parse_for(s, GM_TORCH_NEWEST, c, err);
}

int gm_torch_version_parse(const char *s)
{
    if (!s || !*s) return 0;
    const char *hi = strrchr(s, '-');
    hi = hi ? hi + 1 : s;
    unsigned major, minor;
    if (sscanf(hi, "%u.%u", &major, &minor) != 2 || major != 2) return 0;
    static const int sets[] = {GM_TORCH_2_0, GM_TORCH_2_1, GM_TORCH_2_2,  GM_TORCH_2_3,
                               GM_TORCH_2_5, GM_TORCH_2_9, GM_TORCH_2_10, GM_TORCH_2_11};
    int v = 200 + (int)minor, best = GM_TORCH_2_0;
    for (size_t i = 0; i < sizeof sets / sizeof *sets; i++)
        if (sets[i] <= v) best = sets[i];
    return best;
}

const char *gm_pt_conf_env(int version, const char *cuda_conf, const char *alloc_conf,
                           const char **which)
{
    if (version <= 0) version = GM_TORCH_NEWEST;
    if (cuda_conf) {
        *which = "PYTORCH_CUDA_ALLOC_CONF";
        return cuda_conf;
    }
    if (alloc_conf && version >= GM_TORCH_2_10) {
        *which = "PYTORCH_ALLOC_CONF";
        return alloc_conf;
    }
    *which = NULL;
    return NULL;
}

int gm_pt_conf_selects_async(const char *s)
{
    if (!s || !*s) return 0;
    gm_pt_conf c;
    gm_err err = {0};
    return gm_pt_conf_parse(s, &c, &err) == GM_OK && c.backend_async; /* the last key wins */
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
    if (c->large_segment_size != GM_PT_LARGE_BUFFER)
        ADD("large_segment_size_mb:%llu", (unsigned long long)(c->large_segment_size / GM_MiB));
    if (c->max_split_size != UINT64_MAX)
        ADD("max_split_size_mb:%llu", (unsigned long long)(c->max_split_size / GM_MiB));
    if (c->max_non_split_rounding_size != c->large_segment_size)
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
    if (c->memory_fraction > 0) ADD("per_process_memory_fraction:%g", c->memory_fraction);
    if (c->backend_async) ADD("backend:cudaMallocAsync");
#undef ADD
}
