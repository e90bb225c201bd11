/*
 * strbuf.h - a growable text buffer for writing HTML and SVG, and the one
 * HTML escaper every report string goes through.
 *
 * A failed allocation does not stop the writer: the buffer remembers it
 * (failed = 1), later writes are ignored, and the caller checks once at the
 * end. So page code stays a straight list of writes.
 *
 * Escaping: gm_sb_esc() makes any string safe as HTML text *and* as a quoted
 * attribute value (& < > " ' become entities). Control characters become
 * U+FFFD and invalid UTF-8 bytes '?', so a hostile trace can neither open an
 * element, nor close an attribute, nor smuggle bytes a browser re-decodes.
 * Nothing from a trace is ever written into <script> or <style>.
 */
#ifndef GM_STRBUF_H
#define GM_STRBUF_H

#include <stdarg.h>
#include <stddef.h>

typedef struct gm_strbuf {
    char *s;    /* NUL-terminated text (NULL until the first write) */
    size_t len; /* bytes in s, without the NUL                      */
    size_t cap; /* bytes allocated                                   */
    int failed; /* an allocation failed: contents are incomplete     */
} gm_strbuf;

void gm_sb_init(gm_strbuf *b);
void gm_sb_free(gm_strbuf *b);
/* The text so far ("" when empty); valid until the next write. */
const char *gm_sb_str(const gm_strbuf *b);

void gm_sb_putn(gm_strbuf *b, const char *s, size_t n);
void gm_sb_puts(gm_strbuf *b, const char *s);
void gm_sb_printf(gm_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void gm_sb_vprintf(gm_strbuf *b, const char *fmt, va_list ap);

/* Append s as valid UTF-8: every byte that is not part of a UTF-8
 * sequence becomes the text \xNN (Python's 'backslashreplace'), the rest
 * is copied as it is. For JSON, which holds only Unicode text. */
void gm_sb_utf8(gm_strbuf *b, const char *s);

/* Append s HTML-escaped (text and attribute safe). NULL writes nothing. */
void gm_sb_esc(gm_strbuf *b, const char *s);
/* Same, at most max_chars characters of s, then an ellipsis if cut. */
void gm_sb_esc_max(gm_strbuf *b, const char *s, size_t max_chars);

#endif
