/*
 * pickle_out.c - plain-data pickles, protocol 2 (pickle_out.h; the opcode
 * facts are from Python's Lib/pickletools.py).
 */
#include "pickle_out.h"

#include <string.h>

/* With a sink, b out to it: all of it (at the finish), or once it holds
 * GM_PKO_SPILL bytes (at an opcode: any byte boundary would do). */
static void spill(gm_pko *p, size_t at_least)
{
    if (!p->sink || p->b.len < at_least || !p->b.len) return;
    if (!p->b.failed && fwrite(p->b.s, 1, p->b.len, p->sink) != p->b.len)
        p->io_failed = p->b.failed = 1;
    p->written += p->b.len;
    p->b.len = 0;
}

static void op(gm_pko *p, unsigned char c)
{
    spill(p, GM_PKO_SPILL);
    gm_sb_putn(&p->b, (const char *)&c, 1);
}

static void le32(gm_pko *p, uint32_t v)
{
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    gm_sb_putn(&p->b, (const char *)b, 4);
}

void gm_pko_init(gm_pko *p)
{
    gm_sb_init(&p->b);
    p->memo = 0;
    p->sink = NULL;
    p->written = 0;
    p->io_failed = 0;
    op(p, 0x80); /* PROTO */
    op(p, 2);
}

void gm_pko_sink(gm_pko *p, FILE *f)
{
    p->sink = f;
}

void gm_pko_free(gm_pko *p)
{
    gm_sb_free(&p->b);
}

void gm_pko_finish(gm_pko *p)
{
    op(p, '.');
    spill(p, 0);
}

void gm_pko_dict(gm_pko *p)
{
    op(p, '}');
    op(p, '(');
}

void gm_pko_dict_end(gm_pko *p)
{
    op(p, 'u');
}

void gm_pko_list(gm_pko *p)
{
    op(p, ']');
    op(p, '(');
}

void gm_pko_list_end(gm_pko *p)
{
    op(p, 'e');
}

void gm_pko_tuple(gm_pko *p)
{
    op(p, '(');
}

void gm_pko_tuple_end(gm_pko *p)
{
    op(p, 't');
}

/* Length of the valid UTF-8 sequence at s (at most n bytes), 0 if none. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    size_t k;
    uint32_t cp;
    if (s[0] < 0x80) return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf) {
        k = 2;
        cp = s[0] & 0x1f;
    } else if (s[0] >= 0xe0 && s[0] <= 0xef) {
        k = 3;
        cp = s[0] & 0x0f;
    } else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
        k = 4;
        cp = s[0] & 0x07;
    } else {
        return 0;
    }
    if (k > n) return 0;
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    /* overlong forms, surrogates (Python's UTF-8 codec refuses them) and beyond U+10FFFF */
    if ((k == 3 && cp < 0x800) || (k == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return k;
}

void gm_pko_strn(gm_pko *p, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    int clean = 1;
    for (size_t i = 0; i < n;) {
        size_t k = utf8_len(u + i, n - i);
        if (!k) {
            clean = 0;
            break;
        }
        i += k;
    }
    op(p, 'X'); /* BINUNICODE */
    if (clean) {
        le32(p, (uint32_t)n);
        gm_sb_putn(&p->b, s, n);
        return;
    }
    gm_strbuf t;
    gm_sb_init(&t);
    for (size_t i = 0; i < n;) {
        size_t k = utf8_len(u + i, n - i);
        gm_sb_putn(&t, k ? s + i : "?", k ? k : 1);
        i += k ? k : 1;
    }
    if (t.failed) p->b.failed = 1;
    le32(p, (uint32_t)t.len);
    gm_sb_putn(&p->b, t.s ? t.s : "", t.len);
    gm_sb_free(&t);
}

void gm_pko_str(gm_pko *p, const char *s)
{
    gm_pko_strn(p, s ? s : "", s ? strlen(s) : 0);
}

void gm_pko_int(gm_pko *p, int64_t v)
{
    if (v >= INT32_MIN && v <= INT32_MAX) {
        op(p, 'J'); /* BININT */
        le32(p, (uint32_t)(int32_t)v);
        return;
    }
    unsigned char b[8];
    uint64_t u = (uint64_t)v;
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(u >> (8 * i));
    int n = 8; /* the shortest two's complement that keeps the sign */
    while (n > 1 &&
           ((b[n - 1] == 0 && !(b[n - 2] & 0x80)) || (b[n - 1] == 0xff && (b[n - 2] & 0x80))))
        n--;
    op(p, 0x8a); /* LONG1 */
    op(p, (unsigned char)n);
    gm_sb_putn(&p->b, (const char *)b, (size_t)n);
}

void gm_pko_uint(gm_pko *p, uint64_t v)
{
    if (v <= INT64_MAX) {
        gm_pko_int(p, (int64_t)v);
        return;
    }
    unsigned char b[9]; /* above 2^63: a ninth byte 0 keeps it positive */
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(v >> (8 * i));
    b[8] = 0;
    op(p, 0x8a);
    op(p, 9);
    gm_sb_putn(&p->b, (const char *)b, 9);
}

void gm_pko_float(gm_pko *p, double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    unsigned char b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(u >> (56 - 8 * i));
    op(p, 'G'); /* BINFLOAT, big-endian */
    gm_sb_putn(&p->b, (const char *)b, 8);
}

void gm_pko_bool(gm_pko *p, int v)
{
    op(p, v ? 0x88 : 0x89);
}

void gm_pko_none(gm_pko *p)
{
    op(p, 'N');
}

uint32_t gm_pko_put(gm_pko *p)
{
    op(p, 'r'); /* LONG_BINPUT */
    le32(p, p->memo);
    return p->memo++;
}

void gm_pko_get(gm_pko *p, uint32_t i)
{
    op(p, 'j'); /* LONG_BINGET */
    le32(p, i);
}
