/*
 * pickle_out.h - a writer of plain-data pickles (protocol 2): dicts, lists,
 * tuples, str, int, float, bool, None, and the memo (one object written once
 * and referenced again). What `gmsim export --memory-viz` writes; its reader
 * is unpickle.h.
 *
 * The opcodes are Python's (Lib/pickletools.py documents each): PROTO 0x80
 * (one byte, the protocol), EMPTY_DICT '}', EMPTY_LIST ']', MARK '(',
 * SETITEMS 'u' and APPENDS 'e' (the items since the mark into the dict or
 * list below it), TUPLE 't' (the items since the mark), BINUNICODE 'X'
 * (4-byte little-endian length, UTF-8 bytes), BININT 'J' (4-byte
 * little-endian signed), LONG1 0x8a (1-byte length, little-endian two's
 * complement), BINFLOAT 'G' (8-byte big-endian IEEE 754 double), NEWTRUE
 * 0x88, NEWFALSE 0x89, NONE 'N', LONG_BINPUT 'r' / LONG_BINGET 'j' (4-byte
 * little-endian memo index), STOP '.'.
 *
 * Strings are written as given, after the UTF-8 check of gm_pko_str: any
 * byte sequence that is not valid UTF-8 is replaced by '?' (Python would
 * refuse to load it). Quotes, newlines and other characters need no
 * escaping: a BINUNICODE string is length-prefixed.
 *
 * Like gm_strbuf, a failed allocation is remembered (failed = 1) and later
 * writes are ignored; the caller checks once at the end.
 *
 * The bytes stay in memory (b), or with a sink (gm_pko_sink) go to a file
 * as they come, GM_PKO_SPILL bytes at a time: a snapshot of a million
 * entries is some 170 MB, which then need not be held whole.
 */
#ifndef GM_PICKLE_OUT_H
#define GM_PICKLE_OUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/strbuf.h"

#define GM_PKO_SPILL (1u << 20)

typedef struct gm_pko {
    gm_strbuf b;      /* the bytes so far (with a sink: not yet written) */
    uint32_t memo;    /* next memo index  */
    FILE *sink;       /* NULL: every byte stays in b                  */
    uint64_t written; /* bytes written to the sink                    */
    int io_failed;    /* a write to the sink failed (b.failed too)    */
} gm_pko;

void gm_pko_init(gm_pko *p); /* writes PROTO 2 */
/* From now on the bytes go to f (open for writing; the caller closes it):
 * b is written out once it holds GM_PKO_SPILL bytes, and at the finish. A
 * write that fails sets io_failed, and b.failed, as a failed allocation
 * does; the stream's error says why (ferror). */
void gm_pko_sink(gm_pko *p, FILE *f);
void gm_pko_free(gm_pko *p);
/* STOP; then p->b.s / p->b.len hold the pickle (p->b.failed: incomplete),
 * or with a sink, it is all written (p->written bytes). */
void gm_pko_finish(gm_pko *p);

void gm_pko_dict(gm_pko *p);     /* a dict opens: key, value, key, value, ... */
void gm_pko_dict_end(gm_pko *p); /* ... closes it */
void gm_pko_list(gm_pko *p);
void gm_pko_list_end(gm_pko *p);
void gm_pko_tuple(gm_pko *p);
void gm_pko_tuple_end(gm_pko *p);
void gm_pko_str(gm_pko *p, const char *s);
void gm_pko_strn(gm_pko *p, const char *s, size_t n);
void gm_pko_int(gm_pko *p, int64_t v);
void gm_pko_uint(gm_pko *p, uint64_t v);
void gm_pko_float(gm_pko *p, double v);
void gm_pko_bool(gm_pko *p, int v);
void gm_pko_none(gm_pko *p);
/* Remember the object just written (the top of the stack); its index for gm_pko_get. */
uint32_t gm_pko_put(gm_pko *p);
/* The object remembered as index i, again. */
void gm_pko_get(gm_pko *p, uint32_t i);

#endif
