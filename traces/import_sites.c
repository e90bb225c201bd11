/*
 * import_sites.c - call sites from a snapshot's frames (IMPORT.md, "Call
 * sites"): for each stack, the innermost frame of the user's own code, its
 * short text ("train.py:42 in forward") deduplicated into the trace's
 * /sites table with the whole stack of the first event that named it.
 *
 * Memory is O(distinct sites + distinct frames): the pickle memo shares
 * frame dicts (and often whole frame lists) between entries, so each
 * frame's kind and each list's site is worked out once, keyed by the
 * pkl_value's address (base/addrmap.h); texts are deduplicated through the
 * same map keyed by a 64-bit hash of the text, probing on to the next key
 * when two texts share one.
 */
#include "import_torch_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !memcmp(s + n - m, suffix, m);
}

int gm_frame_kind(const char *file)
{
    if (!file || !*file || !strcmp(file, "??")) return GM_FRAME_CPP;
    if (file[0] == '<') /* <frozen importlib._bootstrap>, <string>; <stdin>, <ipython-input-..> */
        return !strncmp(file, "<frozen", 7) || !strcmp(file, "<string>") ||
                       !strncmp(file, "<built-in", 9)
                   ? GM_FRAME_PYTHON_INTERNAL
                   : GM_FRAME_USER;
    if (!ends_with(file, ".py")) return GM_FRAME_CPP; /* .cpp, .cc, .h, .cu, a library */
    if (!strncmp(file, "torch/", 6) || strstr(file, "/torch/")) return GM_FRAME_TORCH;
    const char *base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
    int stdlib = (strstr(file, "/lib/python") || strstr(file, "\\Lib\\")) &&
                 !strstr(file, "-packages/") && !strstr(file, "-packages\\");
    if (stdlib || !strcmp(base, "threading.py") || !strcmp(base, "runpy.py"))
        return GM_FRAME_PYTHON_INTERNAL;
    return GM_FRAME_USER;
}

int gm_imp_sites_init(gm_imp_sites *s)
{
    memset(s, 0, sizeof *s);
    if (gm_addrmap_init(&s->by_list, 1024) || gm_addrmap_init(&s->by_frame, 1024) ||
        gm_addrmap_init(&s->by_text, 256)) {
        gm_imp_sites_free(s);
        return GM_ENOMEM;
    }
    return GM_OK;
}

void gm_imp_sites_free(gm_imp_sites *s)
{
    gm_addrmap_free(&s->by_list);
    gm_addrmap_free(&s->by_frame);
    gm_addrmap_free(&s->by_text);
    for (size_t i = 0; i < s->n; i++) {
        free((char *)s->rows[i].name);
        free((char *)s->rows[i].stack);
    }
    free(s->rows);
    memset(s, 0, sizeof *s);
}

static int kind_of(gm_imp_sites *s, const pkl_value *f, int *kind)
{
    uint64_t key = gm_addrmap_key((uint64_t)(uintptr_t)f), *p = gm_addrmap_get(&s->by_frame, key);
    if (p) {
        *kind = (int)*p;
        return GM_OK;
    }
    *kind = pkl_is(f, PKL_DICT) ? gm_frame_kind(pkl_dict_str(f, "filename")) : GM_FRAME_CPP;
    return gm_addrmap_put(&s->by_frame, key, (uint64_t)*kind);
}

/* Copy src into out (len bytes with the NUL), writing control characters as
 * C escapes (\n, \r, \t, \xNN): the stack column is one frame a line, so a
 * newline inside a frame's file or function name must not start a line, and
 * a report must not carry raw control bytes. Cut at a whole escape. */
static void escape_controls(const char *src, char *out, size_t len)
{
    size_t used = 0;
    for (const unsigned char *p = (const unsigned char *)src; *p; p++) {
        char esc[5];
        size_t n;
        if (*p == '\n' || *p == '\r' || *p == '\t')
            n = (size_t)snprintf(esc, sizeof esc, "\\%c",
                                 *p == '\n'   ? 'n'
                                 : *p == '\r' ? 'r'
                                              : 't');
        else if (*p < 0x20 || *p == 0x7f)
            n = (size_t)snprintf(esc, sizeof esc, "\\x%02x", *p);
        else
            esc[0] = (char)*p, esc[1] = 0, n = 1;
        if (used + n + 1 > len) break;
        memcpy(out + used, esc, n);
        used += n;
    }
    out[used] = 0;
}

/* "file:line in name" of one frame (the file's last component if short),
 * control characters escaped. */
static void frame_text(const pkl_value *f, int base_only, char *out, size_t len)
{
    const char *file = pkl_dict_str(f, "filename"), *name = pkl_dict_str(f, "name");
    int64_t line = 0;
    char raw[GM_SITE_STACK_MAX];
    pkl_dict_int(f, "line", &line);
    if (!file || !*file) file = "??";
    if (base_only && strrchr(file, '/')) file = strrchr(file, '/') + 1;
    if (line > 0)
        snprintf(raw, sizeof raw, "%s:%lld in %s", file, (long long)line, name ? name : "?");
    else
        snprintf(raw, sizeof raw, "%s in %s", file, name ? name : "?");
    escape_controls(raw, out, len);
}

/* The stack, a frame a line, innermost first, within GM_SITE_STACK_MAX. */
static char *stack_text(const pkl_value *frames)
{
    char *out = malloc(GM_SITE_STACK_MAX), line[GM_SITE_STACK_MAX];
    size_t used = 0;
    if (!out) return NULL;
    out[0] = 0;
    for (size_t i = 0; i < pkl_len(frames); i++) {
        frame_text(pkl_item(frames, i), 0, line, sizeof line);
        size_t n = strlen(line) + (used ? 1 : 0);
        if (used + n + 5 > GM_SITE_STACK_MAX) { /* room for "\n..." and the NUL */
            memcpy(out + used, used ? "\n..." : "...", used ? 5 : 4);
            return out;
        }
        used +=
            (size_t)snprintf(out + used, GM_SITE_STACK_MAX - used, "%s%s", used ? "\n" : "", line);
    }
    return out;
}

/* The site named text (adding it, with frames' stack, if new). */
static int site_of_text(gm_imp_sites *s, const char *text, const pkl_value *frames, uint32_t *site)
{
    gm_hash h;
    gm_hash_init(&h);
    gm_hash_bytes(&h, text, strlen(text));
    uint64_t key = gm_hash_final(&h);
    for (;;) {
        if (key == 0) key = 1; /* 0 is the map's empty key */
        uint64_t *p = gm_addrmap_get(&s->by_text, key);
        if (!p) break;
        if (!strcmp(s->rows[*p - 1].name, text)) {
            *site = (uint32_t)*p;
            return GM_OK;
        }
        key = key * 0x9e3779b97f4a7c15ull + 1; /* another text has this key: the next one */
    }
    if (s->n >= GM_TRACE_MAX_TABLE_ROWS) { /* more than a trace holds: unknown */
        *site = 0;
        return GM_OK;
    }
    if (gm_imp_grow(&s->rows, &s->cap, s->n + 1, sizeof *s->rows)) return GM_ENOMEM;
    char *name = strdup(text), *stack = stack_text(frames);
    if (!name || !stack || gm_addrmap_put(&s->by_text, key, s->n + 1)) {
        free(name);
        free(stack);
        return GM_ENOMEM;
    }
    s->rows[s->n++] = (gm_site){name, stack};
    *site = (uint32_t)s->n;
    return GM_OK;
}

int gm_imp_site_of(gm_imp_sites *s, const pkl_value *frames, uint32_t *site)
{
    *site = 0;
    if (!frames || !pkl_is_seq(frames) || !pkl_len(frames)) return GM_OK;
    uint64_t key = gm_addrmap_key((uint64_t)(uintptr_t)frames),
             *p = gm_addrmap_get(&s->by_list, key);
    if (p) {
        *site = (uint32_t)*p;
        return GM_OK;
    }
    const pkl_value *user = NULL, *python = NULL;
    for (size_t i = 0; i < pkl_len(frames) && !user; i++) {
        const pkl_value *f = pkl_item(frames, i);
        int kind;
        if (kind_of(s, f, &kind)) return GM_ENOMEM;
        if (kind == GM_FRAME_USER) user = f;
        if (kind != GM_FRAME_CPP && !python) python = f;
    }
    const pkl_value *pick = user ? user : python;
    if (pick) {
        char text[GM_SITE_NAME_MAX];
        frame_text(pick, 1, text, sizeof text);
        if (site_of_text(s, text, frames, site)) return GM_ENOMEM;
    }
    return gm_addrmap_put(&s->by_list, key, *site);
}
