/*
 * sites.c - the call-site table as the reader hands it out (trace.h,
 * gm_sites): parsed from the blob the in-process reader or the isolated
 * child produces (trace_int.h), every text checked and cleaned on the
 * caller's side, so a hostile file or child can give at worst odd text.
 */
#include "trace.h"
#include "trace_int.h"

#include <stdlib.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at s (1..4), or 0. */
static size_t utf8_seq(const unsigned char *s)
{
    unsigned c = s[0];
    size_t n = c < 0x80                 ? 1
               : c >= 0xC2 && c <= 0xDF ? 2
               : c >= 0xE0 && c <= 0xEF ? 3
               : c >= 0xF0 && c <= 0xF4 ? 4
                                        : 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    if (n == 3 && ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] > 0x9F))) return 0;
    if (n == 4 && ((c == 0xF0 && s[1] < 0x90) || (c == 0xF4 && s[1] > 0x8F))) return 0;
    return n;
}

/* Valid UTF-8, no control character (newline kept where allowed): the
 * rest becomes '?', in place. */
static void clean(char *s, int newlines)
{
    unsigned char *p = (unsigned char *)s;
    while (*p) {
        size_t n = utf8_seq(p);
        if (n == 0 || (n == 1 && (*p < 0x20 || *p == 0x7f) && !(newlines && *p == '\n'))) {
            *p++ = '?';
            continue;
        }
        p += n;
    }
}

int gm_trace_sites_parse(const char *path, char *blob, size_t len, size_t n, gm_sites *out,
                         gm_err *err)
{
    memset(out, 0, sizeof *out);
    if (n == 0) {
        free(blob);
        return GM_OK;
    }
    gm_site *rows = n <= GM_TRACE_MAX_TABLE_ROWS ? calloc(n, sizeof *rows) : NULL;
    if (!rows) {
        free(blob);
        return gm_errf(err, GM_ENOMEM, "%s: out of memory loading /sites", path);
    }
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        for (int k = 0; k < 2; k++) {
            size_t max = k ? GM_SITE_STACK_MAX : GM_SITE_NAME_MAX;
            size_t l = off < len ? strnlen(blob + off, len - off) : len;
            if (off >= len || l >= len - off || l >= max) {
                free(rows);
                free(blob);
                return gm_errf(err, GM_EINVAL,
                               "%s: /sites row %zu: a text is over its limit or cut off; the file "
                               "is damaged — re-import the trace",
                               path, i);
            }
            clean(blob + off, k);
            if (k)
                rows[i].stack = blob + off;
            else
                rows[i].name = blob + off;
            off += l + 1;
        }
    }
    if (off != len) {
        free(rows);
        free(blob);
        return gm_errf(err, GM_EINVAL, "%s: /sites: more text than rows; the file is damaged",
                       path);
    }
    out->n = n, out->rows = rows, out->text = blob;
    return GM_OK;
}

void gm_sites_free(gm_sites *s)
{
    if (!s) return;
    free(s->rows);
    free(s->text);
    memset(s, 0, sizeof *s);
}

const char *gm_sites_name(const gm_sites *s, uint32_t site)
{
    return s && site >= 1 && site <= s->n ? s->rows[site - 1].name : NULL;
}
