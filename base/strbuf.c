/* strbuf.c - see strbuf.h. */
#include "strbuf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gm_sb_init(gm_strbuf *b)
{
    memset(b, 0, sizeof *b);
}

void gm_sb_free(gm_strbuf *b)
{
    free(b->s);
    gm_sb_init(b);
}

const char *gm_sb_str(const gm_strbuf *b)
{
    return b->s ? b->s : "";
}

static int reserve(gm_strbuf *b, size_t extra)
{
    if (b->failed) return 0;
    if (b->len + extra + 1 <= b->cap) return 1;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra + 1)
        cap *= 2;
    char *s = realloc(b->s, cap);
    if (!s) {
        b->failed = 1;
        return 0;
    }
    b->s = s;
    b->cap = cap;
    return 1;
}

void gm_sb_putn(gm_strbuf *b, const char *s, size_t n)
{
    if (!reserve(b, n)) return;
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

void gm_sb_puts(gm_strbuf *b, const char *s)
{
    gm_sb_putn(b, s, strlen(s));
}

void gm_sb_vprintf(gm_strbuf *b, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0 || !reserve(b, (size_t)n)) return;
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
}

void gm_sb_printf(gm_strbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    gm_sb_vprintf(b, fmt, ap);
    va_end(ap);
}

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if invalid. */
static size_t utf8_len(const unsigned char *s)
{
    unsigned c = s[0];
    size_t n;
    uint32_t cp;
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
        cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0; /* overlong, out of range, or a surrogate */
    return n;
}

void gm_sb_esc_max(gm_strbuf *b, const char *s, size_t max_chars)
{
    if (!s) return;
    const unsigned char *p = (const unsigned char *)s;
    size_t chars = 0;
    while (*p) {
        if (chars++ == max_chars) {
            gm_sb_puts(b, "\xe2\x80\xa6"); /* … */
            return;
        }
        const char *rep = NULL;
        switch (*p) {
        case '&':
            rep = "&amp;";
            break;
        case '<':
            rep = "&lt;";
            break;
        case '>':
            rep = "&gt;";
            break;
        case '"':
            rep = "&quot;";
            break;
        case '\'':
            rep = "&#39;";
            break;
        case '\n':
        case '\t':
            break;
        default:
            if (*p < 0x20 || *p == 0x7f) rep = "\xef\xbf\xbd"; /* U+FFFD */
        }
        if (rep) {
            gm_sb_puts(b, rep);
            p++;
            continue;
        }
        size_t n = utf8_len(p);
        if (n == 0) {
            gm_sb_putn(b, "?", 1);
            p++;
        } else {
            gm_sb_putn(b, (const char *)p, n);
            p += n;
        }
    }
}

void gm_sb_esc(gm_strbuf *b, const char *s)
{
    gm_sb_esc_max(b, s, (size_t)-1);
}

void gm_sb_utf8(gm_strbuf *b, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; p && *p;) {
        size_t n = utf8_len(p);
        if (n == 0) {
            gm_sb_printf(b, "\\x%02x", *p++);
        } else {
            gm_sb_putn(b, (const char *)p, n);
            p += n;
        }
    }
}
