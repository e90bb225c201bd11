/*
 * unpickle.c - see unpickle.h.
 *
 * Facts about the format come from CPython's Lib/pickletools.py (the `opcodes`
 * table: opcode bytes, argument encodings, stack effects) and Lib/pickle.py
 * (class _Unpickler: the MARK "metastack", MEMOIZE storing at len(memo),
 * INT's "00"/"01" booleans, STRING's quoting and escape_decode, UNICODE's
 * raw-unicode-escape, BINUNICODE's 'surrogatepass' UTF-8, SETITEMS pairs).
 * The 4300-digit limit on decimal ints mirrors Python's
 * sys.int_info.default_max_str_digits.
 *
 * Invariants that make untrusted input safe:
 *  - every read checks the bytes left first (need());
 *  - every allocation is charged to a budget (opts.max_bytes) first;
 *  - a list/dict is "sealed" when it is placed in another container, and a
 *    sealed container can no longer be changed. Edges therefore only ever
 *    point from an unsealed container to older, sealed values, so the graph
 *    has no cycle, and a node's depth is final when it is sealed;
 *  - a container cannot be appended to itself (the one cycle sealing misses);
 *  - work per opcode is bounded by its own bytes, except dict-key comparison
 *    of equal long keys, which has its own budget.
 */
#include "unpickle.h"
#include "base/units.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ------------------------------------------------------------------ arena */

#define ARENA_CHUNK_BYTES (64u * 1024u)
#define ARENA_BIG_BYTES (ARENA_CHUNK_BYTES / 4) /* larger requests get their own chunk */

typedef struct arena_chunk {
    struct arena_chunk *next;
    size_t used;
    size_t cap;
    size_t pad; /* keeps the data after the header 16-byte aligned */
} arena_chunk;

struct pkl_doc {
    arena_chunk *chunks; /* head: the chunk being filled       */
    size_t bytes;        /* all chunk bytes, headers included  */
    const pkl_value *root;
    int protocol;
};

/* ----------------------------------------------------------------- parser */

#define SMALL_DICT 8 /* dicts up to this many entries are searched linearly */

typedef struct parser {
    /* The input's bytes [wbase, wend) (offsets in the input) are at buf:
     * all of it for pkl_parse, a window for pkl_load_file, which reads the
     * file as the parse goes (fill) and keeps from the current opcode on. */
    const uint8_t *buf;
    size_t wbase, wend;
    FILE *f;      /* pkl_load_file's input, else NULL */
    uint8_t *own; /* the window's memory (pkl_load_file), wcap bytes */
    size_t wcap;
    size_t len;    /* input bytes in all                   */
    size_t pos;    /* next byte to read                    */
    size_t op_pos; /* offset of the opcode being decoded   */
    const char *name;
    gm_err *err;
    int rc; /* error code once failed */

    pkl_doc *doc;
    size_t used; /* bytes charged against max_bytes */
    size_t max_bytes;
    unsigned max_depth;
    uint64_t work_budget; /* dict probes + key bytes compared, left */

    pkl_value **stack;
    size_t sp, stack_cap;
    size_t *marks; /* stack positions of open MARKs */
    size_t nmarks, marks_cap;
    pkl_value **memo;
    size_t memo_cap, memo_count;
    /* short strs and ints met lately (intern_str, new_int) */
    struct intern_slot *intern_int, *intern_str;

    pkl_value *none, *true_, *false_;
} parser;

static const char *const op_names[256] = {
    ['('] = "MARK",
    ['.'] = "STOP",
    ['0'] = "POP",
    ['1'] = "POP_MARK",
    ['2'] = "DUP",
    ['F'] = "FLOAT",
    ['I'] = "INT",
    ['J'] = "BININT",
    ['K'] = "BININT1",
    ['L'] = "LONG",
    ['M'] = "BININT2",
    ['N'] = "NONE",
    ['P'] = "PERSID",
    ['Q'] = "BINPERSID",
    ['R'] = "REDUCE",
    ['S'] = "STRING",
    ['T'] = "BINSTRING",
    ['U'] = "SHORT_BINSTRING",
    ['V'] = "UNICODE",
    ['X'] = "BINUNICODE",
    ['a'] = "APPEND",
    ['b'] = "BUILD",
    ['c'] = "GLOBAL",
    ['d'] = "DICT",
    ['}'] = "EMPTY_DICT",
    ['e'] = "APPENDS",
    ['g'] = "GET",
    ['h'] = "BINGET",
    ['i'] = "INST",
    ['j'] = "LONG_BINGET",
    ['l'] = "LIST",
    [']'] = "EMPTY_LIST",
    ['o'] = "OBJ",
    ['p'] = "PUT",
    ['q'] = "BINPUT",
    ['r'] = "LONG_BINPUT",
    ['s'] = "SETITEM",
    ['t'] = "TUPLE",
    [')'] = "EMPTY_TUPLE",
    ['u'] = "SETITEMS",
    ['G'] = "BINFLOAT",
    ['B'] = "BINBYTES",
    ['C'] = "SHORT_BINBYTES",
    [0x80] = "PROTO",
    [0x81] = "NEWOBJ",
    [0x82] = "EXT1",
    [0x83] = "EXT2",
    [0x84] = "EXT4",
    [0x85] = "TUPLE1",
    [0x86] = "TUPLE2",
    [0x87] = "TUPLE3",
    [0x88] = "NEWTRUE",
    [0x89] = "NEWFALSE",
    [0x8a] = "LONG1",
    [0x8b] = "LONG4",
    [0x8c] = "SHORT_BINUNICODE",
    [0x8d] = "BINUNICODE8",
    [0x8e] = "BINBYTES8",
    [0x8f] = "EMPTY_SET",
    [0x90] = "ADDITEMS",
    [0x91] = "FROZENSET",
    [0x92] = "NEWOBJ_EX",
    [0x93] = "STACK_GLOBAL",
    [0x94] = "MEMOIZE",
    [0x95] = "FRAME",
    [0x96] = "BYTEARRAY8",
    [0x97] = "NEXT_BUFFER",
    [0x98] = "READONLY_BUFFER",
};

static const char *op_name(uint8_t op)
{
    return op_names[op] ? op_names[op] : "?";
}

static uint8_t cur_op(const parser *p)
{
    return p->op_pos < p->wend ? p->buf[p->op_pos - p->wbase] : 0;
}

/* Fail at the current opcode: "<name>: offset N: <message>". */
__attribute__((format(printf, 3, 4))) static int fail_code(parser *p, int code, const char *fmt,
                                                           ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    p->rc = gm_errf(p->err, code, "%s: offset %zu: %s", p->name, p->op_pos, msg);
    return p->rc;
}
#define fail(p, ...) fail_code((p), GM_EINVAL, __VA_ARGS__)

/* Charge n bytes against the memory budget. */
static int charge(parser *p, size_t n)
{
    if (n > p->max_bytes - p->used)
        return fail(p,
                    "loading needs more than %zu bytes of memory (the limit); the file is "
                    "corrupted or not a memory snapshot",
                    p->max_bytes);
    p->used += n;
    return GM_OK;
}

static int no_memory(parser *p)
{
    return fail_code(p, GM_ENOMEM, "out of host memory");
}

/* n bytes, 8-byte aligned, owned by the document. NULL after failing. */
static void *arena_alloc(parser *p, size_t n)
{
    pkl_doc *d = p->doc;
    if (n > SIZE_MAX - 64) {
        charge(p, SIZE_MAX);
        return NULL;
    }
    n = (n + 7) & ~(size_t)7;
    arena_chunk *c = d->chunks;
    if (c && c->cap - c->used >= n) {
        void *r = (unsigned char *)(c + 1) + c->used;
        c->used += n;
        return r;
    }
    size_t cap = n > ARENA_BIG_BYTES ? n : ARENA_CHUNK_BYTES;
    if (charge(p, sizeof *c + cap)) return NULL;
    arena_chunk *nc = malloc(sizeof *nc + cap);
    if (!nc) {
        no_memory(p);
        return NULL;
    }
    nc->used = n;
    nc->cap = cap;
    d->bytes += sizeof *nc + cap;
    if (n > ARENA_BIG_BYTES && c) { /* keep filling the current chunk */
        nc->next = c->next;
        c->next = nc;
    } else {
        nc->next = c;
        d->chunks = nc;
    }
    return nc + 1;
}

/* Grow a parser-owned array (stack, marks, memo) to hold at least `need` elements. */
static int grow_array(parser *p, void **arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return GM_OK;
    size_t ncap = *cap ? *cap : 64;
    while (ncap < need)
        ncap = ncap > SIZE_MAX / 2 ? need : ncap * 2;
    if (ncap > SIZE_MAX / elem) return charge(p, SIZE_MAX);
    if (charge(p, (ncap - *cap) * elem)) return p->rc;
    void *n = realloc(*arr, ncap * elem);
    if (!n) return no_memory(p);
    *arr = n;
    *cap = ncap;
    return GM_OK;
}

static pkl_value *new_value(parser *p, pkl_kind kind)
{
    pkl_value *v = arena_alloc(p, sizeof *v);
    if (v) {
        memset(v, 0, sizeof *v);
        v->kind = (uint8_t)kind;
    }
    return v;
}

/* ------------------------------------------------------------ input reads */

/* The byte at input offset off, which the window holds. */
static inline const uint8_t *at(const parser *p, size_t off)
{
    return p->buf + (off - p->wbase);
}

#define WINDOW_BYTES (4u << 20) /* pkl_load_file reads this much at a time, at least */

/* Read the file on until the window holds the input up to offset end
 * (end <= len), keeping what the current opcode has read: the window
 * moves past the opcodes before it and grows only for a value larger
 * than itself. */
static int fill(parser *p, size_t end)
{
    if (end <= p->wend) return GM_OK;
    if (!p->f) return fail(p, "pickle truncated (file cut short?)"); /* need() checks first */
    size_t keep = p->op_pos < p->wend ? p->op_pos : p->wend, have = p->wend - keep;
    size_t cap = end - keep > WINDOW_BYTES ? end - keep : WINDOW_BYTES;
    if (cap > p->wcap) {
        if (charge(p, cap - p->wcap)) return p->rc;
        uint8_t *w = realloc(p->own, cap);
        if (!w) return no_memory(p);
        p->own = w;
        p->wcap = cap;
    }
    memmove(p->own, p->own + (keep - p->wbase), have);
    p->buf = p->own;
    p->wbase = keep;
    while (p->wend < end) {
        size_t room = p->wcap - (p->wend - p->wbase), left = p->len - p->wend;
        size_t got = fread(p->own + (p->wend - p->wbase), 1, room < left ? room : left, p->f);
        if (!got)
            return fail_code(p, GM_EIO, "cannot read on: %s",
                             ferror(p->f) ? strerror(errno) : "the file shrank while reading");
        p->wend += got;
    }
    return GM_OK;
}

/* Make sure n more bytes follow the current position. */
static int need(parser *p, uint64_t n)
{
    size_t left = p->len - p->pos;
    if (n > left)
        return fail(p,
                    "pickle truncated: opcode %s needs %llu more bytes, only %zu left (file cut "
                    "short?)",
                    op_name(cur_op(p)), (unsigned long long)n, left);
    return fill(p, p->pos + (size_t)n);
}

static uint64_t rd_le(parser *p, unsigned n)
{
    uint64_t v = 0;
    const uint8_t *b = at(p, p->pos);
    for (unsigned i = 0; i < n; i++)
        v |= (uint64_t)b[i] << (8 * i);
    p->pos += n;
    return v;
}

/* Read n-byte little-endian unsigned argument. */
static int arg_le(parser *p, unsigned n, uint64_t *out)
{
    if (need(p, n)) return p->rc;
    *out = rd_le(p, n);
    return GM_OK;
}

/* A newline-terminated text argument (protocol 0), without the newline. */
static int arg_line(parser *p, const char **line, size_t *n)
{
    const uint8_t *s = at(p, p->pos), *nl;
    size_t seen = 0; /* bytes after pos known to hold no newline */
    while (!(nl = memchr(s + seen, '\n', p->wend - p->pos - seen))) {
        if (p->wend >= p->len)
            return fail(p, "pickle truncated: opcode %s has no end of line (file cut short?)",
                        op_name(cur_op(p)));
        seen = p->wend - p->pos;
        size_t more = p->len - p->wend < WINDOW_BYTES ? p->len - p->wend : WINDOW_BYTES;
        if (fill(p, p->wend + more)) return p->rc;
        s = at(p, p->pos);
    }
    *line = (const char *)s;
    *n = (size_t)(nl - s);
    p->pos += *n + 1;
    return GM_OK;
}

/* -------------------------------------------------------------- the stack */

static size_t frame_base(const parser *p)
{
    return p->nmarks ? p->marks[p->nmarks - 1] : 0;
}

static int push(parser *p, pkl_value *v)
{
    if (!v) return p->rc;
    if (p->sp == p->stack_cap &&
        grow_array(p, (void **)&p->stack, &p->stack_cap, p->sp + 1, sizeof *p->stack))
        return p->rc;
    p->stack[p->sp++] = v;
    return GM_OK;
}

static int underflow(parser *p)
{
    return fail(p,
                "opcode %s needs a value but the stack%s is empty; the file is corrupted or "
                "not a pickle",
                op_name(cur_op(p)), p->nmarks ? " (since the last MARK)" : "");
}

/* The top k values of the current frame (k >= 1). */
static int peek_n(parser *p, size_t k, pkl_value ***items)
{
    if (p->sp - frame_base(p) < k) return underflow(p);
    *items = p->stack + p->sp - k;
    return GM_OK;
}

static int pop(parser *p, pkl_value **v)
{
    pkl_value **it = NULL;
    if (peek_n(p, 1, &it)) return p->rc;
    *v = *it;
    p->sp--;
    return GM_OK;
}

static int top(parser *p, pkl_value **v)
{
    pkl_value **it = NULL;
    if (peek_n(p, 1, &it)) return p->rc;
    *v = *it;
    return GM_OK;
}

/* Pop everything down to the last MARK, and the MARK. The items stay readable until the next
 * push. */
static int pop_mark(parser *p, pkl_value ***items, size_t *n)
{
    if (!p->nmarks)
        return fail(p,
                    "opcode %s needs an earlier MARK, and there is none; the file is "
                    "corrupted or not a pickle",
                    op_name(cur_op(p)));
    size_t m = p->marks[--p->nmarks];
    *items = p->stack + m;
    *n = p->sp - m;
    p->sp = m;
    return GM_OK;
}

/* -------------------------------------------------------------------- memo */

static int memo_put(parser *p, uint64_t idx)
{
    pkl_value *v = NULL;
    if (top(p, &v)) return p->rc;
    if (idx >= p->len)
        return fail(p,
                    "memo index %llu is larger than a pickle of %zu bytes can use; the file is "
                    "corrupted",
                    (unsigned long long)idx, p->len);
    if (idx >= p->memo_cap) {
        size_t old = p->memo_cap;
        if (grow_array(p, (void **)&p->memo, &p->memo_cap, (size_t)idx + 1, sizeof *p->memo))
            return p->rc;
        memset(p->memo + old, 0, (p->memo_cap - old) * sizeof *p->memo);
    }
    if (!p->memo[idx]) p->memo_count++;
    p->memo[idx] = v;
    return GM_OK;
}

static int memo_get(parser *p, uint64_t idx)
{
    if (idx >= p->memo_cap || !p->memo[idx])
        return fail(p,
                    "opcode %s refers to memo entry %llu, which was never stored; the file is "
                    "corrupted",
                    op_name(cur_op(p)), (unsigned long long)idx);
    return push(p, p->memo[idx]);
}

/* ------------------------------------------------------------- containers */

/* Record that child is placed in parent: seal it, update depth, refuse cycles. */
static int adopt(parser *p, pkl_value *parent, pkl_value *child)
{
    if (child == parent)
        return fail(p,
                    "opcode %s puts a %s inside itself; gmsim does not read recursive "
                    "structures",
                    op_name(cur_op(p)), pkl_kind_name((pkl_kind)parent->kind));
    if ((unsigned)child->depth + 1 > p->max_depth)
        return fail(p,
                    "values nest deeper than %u levels; the file is corrupted or not a memory "
                    "snapshot",
                    p->max_depth);
    child->flags |= PKL_F_SEALED;
    if (child->depth + 1 > parent->depth) parent->depth = (uint16_t)(child->depth + 1);
    return GM_OK;
}

/* A list/dict the current opcode may change. */
static int mutable_target(parser *p, pkl_value *v, pkl_kind kind, bool want_set)
{
    const char *what = kind == PKL_DICT ? "dict" : want_set ? "set" : "list";
    bool is_set = v->kind == PKL_LIST && (v->flags & PKL_F_SET);
    if (v->kind != kind || (kind == PKL_LIST && is_set != want_set) || (v->flags & PKL_F_FROZENSET))
        return fail(p,
                    "opcode %s needs a %s below it on the stack, found a %s%s; the file is "
                    "corrupted",
                    op_name(cur_op(p)), what, (v->flags & PKL_F_FROZENSET) ? "frozen" : "",
                    is_set ? "set" : pkl_kind_name((pkl_kind)v->kind));
    if (v->flags & PKL_F_SEALED)
        return fail(p,
                    "opcode %s changes a %s that is already inside another container; "
                    "gmsim does not read recursive structures (or the file is corrupted)",
                    op_name(cur_op(p)), what);
    return GM_OK;
}

static int seq_reserve(parser *p, pkl_value *v, size_t extra)
{
    size_t len = v->u.seq.len;
    if (extra > SIZE_MAX / sizeof(void *) - len) return charge(p, SIZE_MAX);
    size_t need_n = len + extra;
    if (need_n <= v->u.seq.cap) return GM_OK;
    size_t cap = v->u.seq.cap * 2;
    if (cap < need_n) cap = need_n;
    if (cap < 4) cap = 4;
    if (cap > SIZE_MAX / sizeof(void *)) cap = need_n;
    const pkl_value **items = arena_alloc(p, cap * sizeof *items);
    if (!items) return p->rc;
    if (len) memcpy(items, v->u.seq.items, len * sizeof *items);
    v->u.seq.items = items;
    v->u.seq.cap = cap;
    return GM_OK;
}

static int seq_extend(parser *p, pkl_value *v, pkl_value **items, size_t n)
{
    if (seq_reserve(p, v, n)) return p->rc;
    for (size_t i = 0; i < n; i++) {
        if (adopt(p, v, items[i])) return p->rc;
        v->u.seq.items[v->u.seq.len++] = items[i];
    }
    return GM_OK;
}

static pkl_value *new_seq(parser *p, pkl_kind kind, pkl_value **items, size_t n)
{
    pkl_value *v = new_value(p, kind);
    if (!v || (n && seq_extend(p, v, items, n))) return NULL;
    return v;
}

/* --- dicts: entries in insertion order, plus a hash index once they grow --- */

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

/* Eight bytes at a time (a byte at a time, the multiplies in a chain were
 * a third of reading a short str); the last word's missing bytes are 0,
 * and the length is mixed in, so "a" and "a\0" differ. Only this
 * process reads the hash: it may differ between hosts. */
static uint64_t hash_bytes(uint8_t kind, const void *data, size_t n)
{
    const uint8_t *s = data;
    uint64_t h = 0x9e3779b97f4a7c15ull ^ ((uint64_t)kind << 56) ^ n, w;
    for (; n >= 8; s += 8, n -= 8) {
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 29;
    }
    if (n) { /* in 4, 2 and 1 byte loads: a memcpy of n bytes into w
                stalls the load of w that follows it */
        unsigned shift = 0;
        uint32_t x4;
        uint16_t x2;
        w = 0;
        if (n & 4) {
            memcpy(&x4, s, 4);
            w = x4, shift = 32, s += 4;
        }
        if (n & 2) {
            memcpy(&x2, s, 2);
            w |= (uint64_t)x2 << shift, shift += 16, s += 2;
        }
        if (n & 1) w |= (uint64_t)*s << shift;
        h = (h ^ w) * 0xff51afd7ed558ccdull;
    }
    return mix64(h);
}

static bool is_key_kind(uint8_t kind)
{
    return kind <= PKL_BYTES;
}

static bool uses_bytes(uint8_t kind)
{
    return kind == PKL_STR || kind == PKL_BYTES || kind == PKL_BIGINT;
}

/* Python's int/bool/float keys that compare equal (1 == True == 1.0) hash alike. */
static bool float_as_int(double f, int64_t *i)
{
    if (!(f >= -9223372036854775808.0 && f < 9223372036854775808.0) || f != (double)(int64_t)f)
        return false;
    *i = (int64_t)f;
    return true;
}

/* A number's hash (key_hash's, and new_int's cache slot): its bits and
 * its kind. */
static uint64_t scalar_hash(uint64_t bits, uint8_t kind)
{
    return mix64(bits * 31 + kind);
}

static uint64_t key_hash(pkl_value *k)
{
    if (uses_bytes(k->kind)) {
        if (!(k->flags & PKL_F_HASHED)) {
            k->u.s.hash = hash_bytes(k->kind, k->u.s.data, k->u.s.len);
            k->flags |= PKL_F_HASHED;
        }
        return k->u.s.hash;
    }
    uint64_t bits = 0;
    uint8_t kind = k->kind;
    int64_t i;
    if (kind == PKL_FLOAT) {
        if (float_as_int(k->u.f, &i)) {
            bits = (uint64_t)i;
            kind = PKL_INT;
        } else
            memcpy(&bits, &k->u.f, sizeof bits);
    } else if (kind == PKL_BOOL || kind == PKL_INT) {
        bits = (uint64_t)k->u.i;
        kind = PKL_INT;
    }
    return scalar_hash(bits, kind);
}

static bool is_number(uint8_t kind)
{
    return kind == PKL_BOOL || kind == PKL_INT || kind == PKL_FLOAT;
}

static int too_costly(parser *p)
{
    return fail(p, "dict keys collide or repeat too often to be a memory snapshot; the file is "
                   "corrupted or crafted");
}

/* Equal as Python dict keys: the same object, equal numbers (1 == True == 1.0), or the same
 * kind and bytes. Charges long comparisons to work_budget. */
static int key_eq(parser *p, const pkl_value *a, const pkl_value *b, bool *eq)
{
    *eq = a == b;
    if (*eq) return GM_OK;
    if (is_number(a->kind) && is_number(b->kind)) {
        if (a->kind != PKL_FLOAT && b->kind != PKL_FLOAT)
            *eq = a->u.i == b->u.i;
        else if (a->kind == PKL_FLOAT && b->kind == PKL_FLOAT)
            *eq = a->u.f == b->u.f;
        else {
            const pkl_value *f = a->kind == PKL_FLOAT ? a : b, *n = a == f ? b : a;
            int64_t i;
            *eq = float_as_int(f->u.f, &i) && i == n->u.i;
        }
        return GM_OK;
    }
    if (a->kind != b->kind) return GM_OK;
    if (a->kind == PKL_NONE) {
        *eq = true;
        return GM_OK;
    }
    if (a->u.s.len != b->u.s.len || a->u.s.hash != b->u.s.hash) return GM_OK;
    if (a->u.s.len > p->work_budget) return too_costly(p);
    p->work_budget -= a->u.s.len;
    *eq = memcmp(a->u.s.data, b->u.s.data, a->u.s.len) == 0;
    return GM_OK;
}

static int index_insert(parser *p, pkl_value *d, size_t entry, uint64_t h)
{
    size_t mask = d->u.map.index[0];
    uint32_t *slot = d->u.map.index + 1;
    size_t i = (size_t)h & mask;
    while (slot[i]) {
        if (!p->work_budget--) return too_costly(p);
        i = (i + 1) & mask;
    }
    slot[i] = (uint32_t)(entry + 1);
    return GM_OK;
}

static int index_rebuild(parser *p, pkl_value *d)
{
    size_t slots = 32;
    while (slots < 2 * d->u.map.len + 2)
        slots *= 2;
    uint32_t *idx = arena_alloc(p, (slots + 1) * sizeof *idx);
    if (!idx) return p->rc;
    memset(idx, 0, (slots + 1) * sizeof *idx);
    idx[0] = (uint32_t)(slots - 1); /* the mask, then the slots */
    d->u.map.index = idx;
    for (size_t e = 0; e < d->u.map.len; e++)
        if (index_insert(p, d, e, key_hash((pkl_value *)d->u.map.items[e].key))) return p->rc;
    return GM_OK;
}

/* Entry index of key k in d, or SIZE_MAX. */
static int dict_find(parser *p, pkl_value *d, pkl_value *k, uint64_t h, size_t *at)
{
    *at = SIZE_MAX;
    bool eq;
    if (!d->u.map.index) {
        for (size_t e = 0; e < d->u.map.len; e++) {
            pkl_value *ek = (pkl_value *)d->u.map.items[e].key;
            if (key_hash(ek) == h) {
                if (key_eq(p, ek, k, &eq)) return p->rc;
                if (eq) {
                    *at = e;
                    return GM_OK;
                }
            }
        }
        return GM_OK;
    }
    size_t mask = d->u.map.index[0];
    const uint32_t *slot = d->u.map.index + 1;
    for (size_t i = (size_t)h & mask; slot[i]; i = (i + 1) & mask) {
        size_t e = slot[i] - 1;
        if (!p->work_budget--) return too_costly(p);
        if (key_eq(p, d->u.map.items[e].key, k, &eq)) return p->rc;
        if (eq) {
            *at = e;
            return GM_OK;
        }
    }
    return GM_OK;
}

/* Room for `more` entries beyond d's (arena memory is not given back: a
 * SETITEMS says how many come, so a dict is mostly allocated once). */
static int dict_reserve(parser *p, pkl_value *d, size_t more)
{
    size_t len = d->u.map.len, cap = len + more;
    if (cap <= d->u.map.cap) return GM_OK;
    if (cap >= UINT32_MAX) cap = UINT32_MAX - 1;
    pkl_entry *items = arena_alloc(p, cap * sizeof *items);
    if (!items) return p->rc;
    if (len) memcpy(items, d->u.map.items, len * sizeof *items);
    d->u.map.items = items;
    d->u.map.cap = (uint32_t)cap;
    return GM_OK;
}

static int dict_set(parser *p, pkl_value *d, pkl_value *k, pkl_value *v)
{
    if (!is_key_kind(k->kind))
        return fail(p,
                    "opcode %s uses a %s as a dict key; gmsim reads only dicts keyed by "
                    "None, bools, numbers, strings and bytes",
                    op_name(cur_op(p)), pkl_kind_name((pkl_kind)k->kind));
    if (adopt(p, d, k) || adopt(p, d, v)) return p->rc;
    uint64_t h = key_hash(k);
    size_t at;
    if (dict_find(p, d, k, h, &at)) return p->rc;
    if (at != SIZE_MAX) { /* Python keeps the first key and position, and the last value */
        d->u.map.items[at].value = v;
        return GM_OK;
    }
    size_t len = d->u.map.len;
    if (len >= UINT32_MAX - 1) return fail(p, "dict has more than 2^32 entries");
    if (len == d->u.map.cap && dict_reserve(p, d, len ? len : 4)) return p->rc;
    d->u.map.items[len].key = k;
    d->u.map.items[len].value = v;
    d->u.map.len = len + 1;
    if (d->u.map.len > SMALL_DICT) {
        if (!d->u.map.index || 2 * (size_t)d->u.map.len + 2 > (size_t)d->u.map.index[0] + 1)
            return index_rebuild(p, d);
        return index_insert(p, d, len, h);
    }
    return GM_OK;
}

static int dict_set_pairs(parser *p, pkl_value *d, pkl_value **items, size_t n)
{
    if (n % 2)
        return fail(p,
                    "opcode %s has an odd number (%zu) of keys and values; the file is "
                    "corrupted",
                    op_name(cur_op(p)), n);
    if (n && d->u.map.cap - d->u.map.len < n / 2 && dict_reserve(p, d, n / 2)) return p->rc;
    for (size_t i = 0; i < n; i += 2)
        if (dict_set(p, d, items[i], items[i + 1])) return p->rc;
    return GM_OK;
}

/* ----------------------------------------------------------------- scalars */

/* A str/bytes/bigint node owning a copy of n bytes at s. */
static pkl_value *new_blob(parser *p, pkl_kind kind, const void *s, size_t n)
{
    pkl_value *v = new_value(p, kind);
    char *data = v ? arena_alloc(p, n + 1) : NULL;
    if (!data) return NULL;
    if (n) memcpy(data, s, n);
    data[n] = 0;
    v->u.s.data = data;
    v->u.s.len = n;
    return v;
}

static pkl_value *new_int(parser *p, int64_t i);

/* Python int from n bytes of two's complement, little-endian (LONG1/LONG4). */
static pkl_value *new_long_le(parser *p, const uint8_t *b, size_t n)
{
    while (n > 1 &&
           ((b[n - 1] == 0x00 && !(b[n - 2] & 0x80)) || (b[n - 1] == 0xff && (b[n - 2] & 0x80))))
        n--; /* drop redundant sign bytes */
    if (n <= 8) {
        uint64_t u = 0;
        for (size_t i = 0; i < n; i++)
            u |= (uint64_t)b[i] << (8 * i);
        if (n && n < 8 && (b[n - 1] & 0x80)) u |= ~(uint64_t)0 << (8 * n);
        return new_int(p, (int64_t)u);
    }
    return new_blob(p, PKL_BIGINT, b, n);
}

/* Index of the first byte that is not valid UTF-8 (surrogates allowed), or n. */
static size_t utf8_check(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t k;
        uint8_t lo = 0x80, hi = 0xbf;
        if (c >= 0xc2 && c <= 0xdf)
            k = 1;
        else if (c >= 0xe0 && c <= 0xef) {
            k = 2;
            if (c == 0xe0) lo = 0xa0;
        } else if (c >= 0xf0 && c <= 0xf4) {
            k = 3;
            if (c == 0xf0) lo = 0x90;
            if (c == 0xf4) hi = 0x8f;
        } else
            return i;
        if (n - i <= k || s[i + 1] < lo || s[i + 1] > hi) return i;
        for (size_t j = 2; j <= k; j++)
            if ((s[i + j] & 0xc0) != 0x80) return i;
        i += k + 1;
    }
    return n;
}

/* Strs of up to INTERN_MAX bytes, and ints, met lately are shared, as
 * memo references share nodes already: a snapshot repeats the same keys
 * ('action', 'addr', 'size', ...) and actions ('alloc', 'free_completed')
 * in every trace entry, and the same sizes, addresses (the caching
 * allocator reuses them) and streams, and Python's pickler writes each
 * one again unless it is the same object. Nodes are read-only once
 * placed, so sharing changes no value.
 *
 * Each kind has a direct-mapped cache of INTERN_SLOTS slots: a value's
 * slot (by its hash) holds the last value met there, with its key (an
 * int's value, a str's hash) beside the node so that a miss reads no
 * node. A new value takes the slot. One slot is read per value, so the
 * work is the same whatever the input; a value pushed out by others
 * (a snapshot's unique times) only gets a node of its own. This replaced
 * a probing table of every value, which read a node per probe and filled
 * up with values met once (bench/README, "Nineteenth round"). */
#define INTERN_MAX 32
#define INTERN_BITS 14
#define INTERN_SLOTS (1u << INTERN_BITS)

typedef struct intern_slot {
    uint64_t key; /* PKL_INT: the value; PKL_STR: its hash */
    pkl_value *v; /* NULL: empty */
} intern_slot;

/* The cache of kind (PKL_INT or PKL_STR), made on first use; NULL after
 * failing. */
static intern_slot *intern_cache(parser *p, pkl_kind kind)
{
    intern_slot **c = kind == PKL_INT ? &p->intern_int : &p->intern_str;
    if (*c) return *c;
    if (charge(p, INTERN_SLOTS * sizeof **c)) return NULL;
    *c = calloc(INTERN_SLOTS, sizeof **c);
    if (!*c) no_memory(p);
    return *c;
}

static pkl_value *intern_str(parser *p, const uint8_t *s, size_t n)
{
    if (n > INTERN_MAX) return new_blob(p, PKL_STR, s, n);
    intern_slot *c = intern_cache(p, PKL_STR);
    if (!c) return NULL;
    uint64_t h = hash_bytes(PKL_STR, s, n);
    intern_slot *e = &c[h & (INTERN_SLOTS - 1)];
    pkl_value *v = e->v;
    if (v && e->key == h && v->u.s.len == n && !memcmp(v->u.s.data, s, n)) return v;
    v = new_blob(p, PKL_STR, s, n);
    if (v) {
        v->u.s.hash = h; /* key_hash's, which then need not read the text */
        v->flags |= PKL_F_HASHED;
        e->key = h;
        e->v = v;
    }
    return v;
}

static pkl_value *new_int(parser *p, int64_t i)
{
    intern_slot *c = intern_cache(p, PKL_INT);
    if (!c) return NULL;
    /* key_hash's hash of the int, whose top bits pick the slot */
    intern_slot *e = &c[scalar_hash((uint64_t)i, PKL_INT) >> (64 - INTERN_BITS)];
    if (e->v && e->key == (uint64_t)i) return e->v;
    pkl_value *v = new_value(p, PKL_INT);
    if (v) {
        v->u.i = i;
        e->key = (uint64_t)i;
        e->v = v;
    }
    return v;
}

static int push_str(parser *p, const uint8_t *s, size_t n)
{
    size_t bad = utf8_check(s, n);
    if (bad != n)
        return fail(p,
                    "opcode %s: invalid UTF-8 at byte %zu of the string; the file is "
                    "corrupted",
                    op_name(cur_op(p)), bad);
    return push(p, intern_str(p, s, n));
}

/* Python 2 str (STRING, BINSTRING, SHORT_BINSTRING): Python 3 decodes it as ASCII. */
static int push_ascii(parser *p, const uint8_t *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] >= 0x80)
            return fail(p,
                        "opcode %s holds a non-ASCII byte (0x%02x) at byte %zu; Python 3 "
                        "refuses it too",
                        op_name(cur_op(p)), s[i], i);
    return push(p, new_blob(p, PKL_STR, s, n));
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* STRING: a quoted Python 2 repr, decoded like codecs.escape_decode. */
static int op_string(parser *p)
{
    const char *l = NULL;
    size_t n = 0;
    if (arg_line(p, &l, &n)) return p->rc;
    if (n < 2 || l[0] != l[n - 1] || (l[0] != '\'' && l[0] != '"'))
        return fail(p, "the STRING opcode argument must be quoted; the file is corrupted");
    const char *s = l + 1, *e = l + n - 1;
    uint8_t *out = arena_alloc(p, n);
    if (!out) return p->rc;
    size_t o = 0;
    while (s < e) {
        if (*s != '\\') {
            out[o++] = (uint8_t)*s++;
            continue;
        }
        if (++s == e) return fail(p, "STRING ends with a lone backslash; the file is corrupted");
        char c = *s++;
        switch (c) {
        case '\n':
            break;
        case '\\':
        case '\'':
        case '"':
            out[o++] = (uint8_t)c;
            break;
        case 'n':
            out[o++] = '\n';
            break;
        case 'r':
            out[o++] = '\r';
            break;
        case 't':
            out[o++] = '\t';
            break;
        case 'a':
            out[o++] = '\a';
            break;
        case 'b':
            out[o++] = '\b';
            break;
        case 'f':
            out[o++] = '\f';
            break;
        case 'v':
            out[o++] = '\v';
            break;
        case 'x':
            if (e - s < 2 || hexval(s[0]) < 0 || hexval(s[1]) < 0)
                return fail(p, "STRING has an invalid \\x escape; the file is corrupted");
            out[o++] = (uint8_t)(hexval(s[0]) * 16 + hexval(s[1]));
            s += 2;
            break;
        default:
            if (c >= '0' && c <= '7') {
                unsigned v = (unsigned)(c - '0');
                for (int k = 0; k < 2 && s < e && *s >= '0' && *s <= '7'; k++)
                    v = v * 8 + (unsigned)(*s++ - '0');
                out[o++] = (uint8_t)(v & 0xff);
            } else { /* unknown escapes stay as they are */
                out[o++] = '\\';
                out[o++] = (uint8_t)c;
            }
        }
    }
    return push_ascii(p, out, o);
}

static size_t utf8_put(uint8_t *o, uint32_t cp)
{
    if (cp < 0x80) {
        o[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (uint8_t)(0xc0 | cp >> 6);
        o[1] = (uint8_t)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (uint8_t)(0xe0 | cp >> 12);
        o[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
        o[2] = (uint8_t)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (uint8_t)(0xf0 | cp >> 18);
    o[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3f));
    o[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
    o[3] = (uint8_t)(0x80 | (cp & 0x3f));
    return 4;
}

/* UNICODE: raw-unicode-escape (latin-1 bytes, \uXXXX and \UXXXXXXXX after an odd number of
 * backslashes), re-encoded as UTF-8. */
static int op_unicode(parser *p)
{
    const char *l = NULL;
    size_t n = 0;
    if (arg_line(p, &l, &n)) return p->rc;
    if (n > (SIZE_MAX - 1) / 2) return charge(p, SIZE_MAX);
    uint8_t *out = arena_alloc(p, 2 * n + 1);
    if (!out) return p->rc;
    size_t o = 0, i = 0, run = 0; /* run: backslashes just before i */
    while (i < n) {
        uint8_t c = (uint8_t)l[i];
        if (run % 2 == 1 && (c == 'u' || c == 'U')) {
            size_t digits = c == 'u' ? 4 : 8;
            if (n - i - 1 < digits)
                return fail(p, "UNICODE has a truncated \\%c escape; the file is corrupted", c);
            uint32_t cp = 0;
            for (size_t k = 1; k <= digits; k++) {
                int h = hexval(l[i + k]);
                if (h < 0)
                    return fail(p, "UNICODE has an invalid \\%c escape; the file is corrupted", c);
                cp = cp * 16 + (uint32_t)h;
            }
            if (cp > 0x10ffff)
                return fail(p, "UNICODE escape \\U%08x is beyond U+10FFFF; the file is corrupted",
                            cp);
            o--; /* the backslash that started the escape */
            o += utf8_put(out + o, cp);
            i += digits + 1;
            run = 0;
            continue;
        }
        run = c == '\\' ? run + 1 : 0;
        o += utf8_put(out + o, c);
        i++;
    }
    return push(p, new_blob(p, PKL_STR, out, o));
}

#define MAX_INT_DIGITS 4300 /* sys.int_info.default_max_str_digits */

/* Decimal digits (no sign, over int64 range) to a bigint: magnitude in 32-bit limbs, 9 digits
 * at a time, then two's complement bytes. */
static pkl_value *decimal_bigint(parser *p, const char *s, size_t n, bool neg)
{
    size_t nlimbs = n / 9 + 2;
    uint32_t *limb = arena_alloc(p, nlimbs * sizeof *limb);
    if (!limb) return NULL;
    size_t used = 0;
    for (size_t i = 0; i < n;) {
        uint32_t chunk = 0, mul = 1;
        for (size_t k = 0; k < 9 && i < n; k++, i++) {
            chunk = chunk * 10 + (uint32_t)(s[i] - '0');
            mul *= 10;
        }
        uint64_t carry = chunk;
        for (size_t j = 0; j < used; j++) {
            uint64_t t = (uint64_t)limb[j] * mul + carry;
            limb[j] = (uint32_t)t;
            carry = t >> 32;
        }
        if (carry) limb[used++] = (uint32_t)carry;
    }
    size_t nb = used * 4 + 1; /* + a sign byte */
    uint8_t *b = arena_alloc(p, nb);
    if (!b) return NULL;
    for (size_t j = 0; j < used; j++)
        for (int k = 0; k < 4; k++)
            b[4 * j + (size_t)k] = (uint8_t)(limb[j] >> (8 * k));
    b[nb - 1] = 0;
    if (neg) { /* two's complement: invert and add one */
        unsigned carry = 1;
        for (size_t j = 0; j < nb; j++) {
            unsigned t = (uint8_t)~b[j] + carry;
            b[j] = (uint8_t)t;
            carry = t >> 8;
        }
    }
    return new_long_le(p, b, nb);
}

/* Decimal text (INT, LONG) to an int or bigint. */
static pkl_value *parse_decimal(parser *p, const char *s, size_t n)
{
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        n--;
    while (n && (*s == ' ' || *s == '\t')) {
        s++;
        n--;
    }
    bool neg = false;
    if (n && (*s == '-' || *s == '+')) {
        neg = *s == '-';
        s++;
        n--;
    }
    if (!n) {
        fail(p, "opcode %s has no number; the file is corrupted", op_name(cur_op(p)));
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9') {
            fail(p, "opcode %s argument is not a decimal integer; the file is corrupted",
                 op_name(cur_op(p)));
            return NULL;
        }
    if (n > MAX_INT_DIGITS) {
        fail(p, "opcode %s has an integer of %zu digits (limit %d, as in Python)",
             op_name(cur_op(p)), n, MAX_INT_DIGITS);
        return NULL;
    }
    uint64_t mag = 0;
    size_t i = 0;
    for (; i < n; i++) {
        uint64_t d = (uint64_t)(s[i] - '0');
        if (mag > (UINT64_MAX - d) / 10) break;
        mag = mag * 10 + d;
    }
    if (i == n && mag <= (neg ? (uint64_t)1 << 63 : (uint64_t)INT64_MAX))
        return new_int(p, neg ? (int64_t)(0 - mag) : (int64_t)mag);
    return decimal_bigint(p, s, n, neg);
}

/* FLOAT: Python's repr of a float. Only plain numbers, inf and nan are accepted. */
static int op_float(parser *p)
{
    const char *l = NULL;
    size_t n = 0;
    if (arg_line(p, &l, &n)) return p->rc;
    char tmp[512];
    if (n == 0 || n >= sizeof tmp)
        return fail(p, "FLOAT argument has %zu characters; the file is corrupted", n);
    for (size_t i = 0; i < n; i++) {
        char c = l[i];
        bool ok = (c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' ||
                  c == '-' || c == 'i' || c == 'n' || c == 'f' || c == 'a' || c == 't' ||
                  c == 'y' || c == 'I' || c == 'N' || c == 'F' || c == 'A' || c == 'T' || c == 'Y';
        if (!ok) return fail(p, "FLOAT argument is not a number; the file is corrupted");
    }
    memcpy(tmp, l, n);
    tmp[n] = 0;
    char *end;
    double d = strtod(tmp, &end);
    if (end != tmp + n)
        return fail(p, "FLOAT argument '%s' is not a number; the file is corrupted", tmp);
    pkl_value *v = new_value(p, PKL_FLOAT);
    if (v) v->u.f = d;
    return push(p, v);
}

/* ------------------------------------------------------------- refusals */

/* Copy a module/name for a message, printable ASCII only, at most 80 characters. */
static void sanitize(char *dst, size_t cap, const char *s, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 1 < cap && i < 80; i++)
        dst[o++] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
    dst[o] = 0;
}

/* What a refused opcode would do, for the message. */
static const char *refusal(uint8_t op, bool named)
{
    switch (op) {
    case 'c':
    case 0x93:
        return named ? "would import the Python object" : "would import a Python object";
    case 'i':
        return named ? "would create an instance of the Python class"
                     : "would create an instance of a Python class";
    case 'R':
        return "would call a Python function";
    case 'b':
        return "would set a Python object's state (calling __setstate__)";
    case 'o':
    case 0x81:
    case 0x92:
        return "would construct a Python object";
    case 0x82:
    case 0x83:
    case 0x84:
        return "would import a Python object from the copyreg registry";
    case 'P':
    case 'Q':
        return "would load an external object by persistent id";
    default: /* NEXT_BUFFER, READONLY_BUFFER */
        return "refers to an out-of-band buffer";
    }
}

/* "module.name" of a GLOBAL/INST (two text lines) or STACK_GLOBAL (two str on the stack). */
static bool refused_name(const parser *p, uint8_t op, char *buf, size_t cap)
{
    const char *mod = NULL, *nm = NULL;
    size_t modn = 0, nmn = 0;
    if (op == 'c' || op == 'i') {
        const uint8_t *s = at(p, p->pos), *end = at(p, p->wend); /* what the window holds */
        const uint8_t *nl1 = memchr(s, '\n', (size_t)(end - s));
        const uint8_t *nl2 = nl1 ? memchr(nl1 + 1, '\n', (size_t)(end - nl1 - 1)) : NULL;
        if (nl2) {
            mod = (const char *)s;
            modn = (size_t)(nl1 - s);
            nm = (const char *)nl1 + 1;
            nmn = (size_t)(nl2 - nl1 - 1);
        }
    } else if (op == 0x93 && p->sp - frame_base(p) >= 2) {
        const pkl_value *m = p->stack[p->sp - 2], *n = p->stack[p->sp - 1];
        if (m->kind == PKL_STR && n->kind == PKL_STR) {
            mod = m->u.s.data;
            modn = m->u.s.len;
            nm = n->u.s.data;
            nmn = n->u.s.len;
        }
    }
    if (!mod) return false;
    char m[96], n[96];
    sanitize(m, sizeof m, mod, modn);
    sanitize(n, sizeof n, nm, nmn);
    snprintf(buf, cap, "%s.%s", m, n);
    return true;
}

static int refuse(parser *p, uint8_t op)
{
    char name[200];
    bool named = refused_name(p, op, name, sizeof name);
    return fail(p,
                "opcode %s (0x%02x) %s%s%s; gmsim reads only plain data (dicts, lists, numbers, "
                "strings) — re-dump the snapshot with torch.cuda.memory._dump_snapshot()",
                op_name(op), op, refusal(op, named), named ? " " : "", named ? name : "");
}

/* ------------------------------------------------------------- the loop */

static int op_blob(parser *p, pkl_kind kind, unsigned lenbytes, uint8_t flags)
{
    uint64_t n = 0;
    if (arg_le(p, lenbytes, &n)) return p->rc;
    if (cur_op(p) == 'T' && (n & 0x80000000u))
        return fail(p, "BINSTRING has a negative length; the file is corrupted");
    if (need(p, n)) return p->rc;
    const uint8_t *s = at(p, p->pos);
    p->pos += (size_t)n;
    uint8_t op = cur_op(p);
    if (op == 'T' || op == 'U') return push_ascii(p, s, (size_t)n);
    if (kind == PKL_STR) return push_str(p, s, (size_t)n);
    pkl_value *v = new_blob(p, kind, s, (size_t)n);
    if (v) v->flags |= flags;
    return push(p, v);
}

static int op_long(parser *p, unsigned lenbytes)
{
    uint64_t n = 0;
    if (arg_le(p, lenbytes, &n)) return p->rc;
    if (lenbytes == 4 && (n & 0x80000000u))
        return fail(p, "LONG4 has a negative byte count; the file is corrupted");
    if (need(p, n)) return p->rc;
    const uint8_t *b = at(p, p->pos);
    p->pos += (size_t)n;
    return push(p, new_long_le(p, b, (size_t)n));
}

static int op_text_int(parser *p, bool is_long)
{
    const char *l = NULL;
    size_t n = 0;
    if (arg_line(p, &l, &n)) return p->rc;
    if (!is_long && n == 2 && l[0] == '0' && (l[1] == '0' || l[1] == '1'))
        return push(p, l[1] == '1' ? p->true_ : p->false_); /* protocol 0/1 booleans */
    if (is_long && n && l[n - 1] == 'L') n--;
    return push(p, parse_decimal(p, l, n));
}

static int op_text_memo(parser *p, bool put)
{
    const char *l = NULL;
    size_t n = 0;
    if (arg_line(p, &l, &n)) return p->rc;
    uint64_t idx = 0;
    if (n == 0 || n > 19)
        return fail(p, "opcode %s has a bad memo index; the file is corrupted", op_name(cur_op(p)));
    for (size_t i = 0; i < n; i++) {
        if (l[i] < '0' || l[i] > '9')
            return fail(p, "opcode %s has a bad memo index; the file is corrupted",
                        op_name(cur_op(p)));
        idx = idx * 10 + (uint64_t)(l[i] - '0');
    }
    return put ? memo_put(p, idx) : memo_get(p, idx);
}

static int op_mark_collect(parser *p, uint8_t op)
{
    pkl_value **items = NULL;
    size_t n = 0;
    if (pop_mark(p, &items, &n)) return p->rc;
    pkl_value *v = NULL;
    switch (op) {
    case 't':
        return push(p, new_seq(p, PKL_TUPLE, items, n));
    case 'l':
        return push(p, new_seq(p, PKL_LIST, items, n));
    case 0x91:
        v = new_seq(p, PKL_LIST, items, n);
        if (v) v->flags |= PKL_F_SET | PKL_F_FROZENSET;
        return push(p, v);
    case 'd':
        v = new_value(p, PKL_DICT);
        if (!v || dict_set_pairs(p, v, items, n)) return p->rc;
        return push(p, v);
    case 'e':
    case 0x90:
        if (top(p, &v) || mutable_target(p, v, PKL_LIST, op == 0x90)) return p->rc;
        return seq_extend(p, v, items, n);
    case 'u':
        if (top(p, &v) || mutable_target(p, v, PKL_DICT, false)) return p->rc;
        return dict_set_pairs(p, v, items, n);
    default: /* POP_MARK */
        return GM_OK;
    }
}

static int op_small_tuple(parser *p, size_t k)
{
    pkl_value **items = NULL;
    if (peek_n(p, k, &items)) return p->rc;
    p->sp -= k;
    return push(p, new_seq(p, PKL_TUPLE, items, k));
}

/* One opcode; *stop set at STOP. */
static int step(parser *p, bool *stop)
{
    uint8_t op = *at(p, p->pos++); /* run() made the window hold it */
    uint64_t a = 0;
    pkl_value *v = NULL, *k = NULL, *t = NULL;
    switch (op) {
    case 0x80: /* PROTO */
        if (arg_le(p, 1, &a)) return p->rc;
        if (a > 5)
            return fail(p, "unsupported pickle protocol %u (gmsim reads 0 to 5)", (unsigned)a);
        p->doc->protocol = (int)a;
        return GM_OK;
    case 0x95: /* FRAME: a length prefix only; opcodes are read straight through */
        if (arg_le(p, 8, &a)) return p->rc;
        if (a > p->len - p->pos)
            return fail(p,
                        "FRAME of %llu bytes is longer than the %zu bytes left (file cut "
                        "short?)",
                        (unsigned long long)a, p->len - p->pos);
        return GM_OK;
    case '.':
        if (pop(p, &v)) return p->rc;
        p->doc->root = v;
        *stop = true;
        return GM_OK;
    case '(':
        if (p->nmarks == p->marks_cap &&
            grow_array(p, (void **)&p->marks, &p->marks_cap, p->nmarks + 1, sizeof *p->marks))
            return p->rc;
        p->marks[p->nmarks++] = p->sp;
        return GM_OK;
    case '0': /* POP: Python pops a MARK when the frame is empty */
        if (p->sp > frame_base(p))
            p->sp--;
        else if (p->nmarks)
            p->nmarks--;
        else
            return underflow(p);
        return GM_OK;
    case '2':
        return top(p, &v) ? p->rc : push(p, v);
    case 'N':
        return push(p, p->none);
    case 0x88:
        return push(p, p->true_);
    case 0x89:
        return push(p, p->false_);
    case 'J':
        return arg_le(p, 4, &a) ? p->rc : push(p, new_int(p, (int32_t)(uint32_t)a));
    case 'K':
        return arg_le(p, 1, &a) ? p->rc : push(p, new_int(p, (int64_t)a));
    case 'M':
        return arg_le(p, 2, &a) ? p->rc : push(p, new_int(p, (int64_t)a));
    case 0x8a:
        return op_long(p, 1);
    case 0x8b:
        return op_long(p, 4);
    case 'I':
    case 'L':
        return op_text_int(p, op == 'L');
    case 'G': {
        if (arg_le(p, 8, &a)) return p->rc;
        uint64_t be = 0; /* big-endian IEEE 754 double */
        for (int i = 0; i < 8; i++)
            be = be << 8 | ((a >> (8 * i)) & 0xff);
        v = new_value(p, PKL_FLOAT);
        if (v) memcpy(&v->u.f, &be, sizeof be);
        return push(p, v);
    }
    case 'F':
        return op_float(p);
    case 0x8c:
        return op_blob(p, PKL_STR, 1, 0);
    case 'X':
        return op_blob(p, PKL_STR, 4, 0);
    case 0x8d:
        return op_blob(p, PKL_STR, 8, 0);
    case 'U':
        return op_blob(p, PKL_STR, 1, 0);
    case 'T':
        return op_blob(p, PKL_STR, 4, 0);
    case 'C':
        return op_blob(p, PKL_BYTES, 1, 0);
    case 'B':
        return op_blob(p, PKL_BYTES, 4, 0);
    case 0x8e:
        return op_blob(p, PKL_BYTES, 8, 0);
    case 0x96:
        return op_blob(p, PKL_BYTES, 8, PKL_F_BYTEARRAY);
    case 'S':
        return op_string(p);
    case 'V':
        return op_unicode(p);
    case ']':
        return push(p, new_value(p, PKL_LIST));
    case '}':
        return push(p, new_value(p, PKL_DICT));
    case 0x8f:
        v = new_value(p, PKL_LIST);
        if (v) v->flags |= PKL_F_SET;
        return push(p, v);
    case ')':
        return push(p, new_value(p, PKL_TUPLE));
    case 0x85:
    case 0x86:
    case 0x87:
        return op_small_tuple(p, (size_t)(op - 0x84));
    case 'a':
        if (pop(p, &v) || top(p, &t) || mutable_target(p, t, PKL_LIST, false)) return p->rc;
        return seq_extend(p, t, &v, 1);
    case 's':
        if (pop(p, &v) || pop(p, &k) || top(p, &t) || mutable_target(p, t, PKL_DICT, false))
            return p->rc;
        return dict_set(p, t, k, v);
    case 'e':
    case 'u':
    case 0x90:
    case 't':
    case 'l':
    case 'd':
    case 0x91:
    case '1':
        return op_mark_collect(p, op);
    case 0x94:
        return memo_put(p, p->memo_count);
    case 'q':
        return arg_le(p, 1, &a) ? p->rc : memo_put(p, a);
    case 'r':
        return arg_le(p, 4, &a) ? p->rc : memo_put(p, a);
    case 'h':
        return arg_le(p, 1, &a) ? p->rc : memo_get(p, a);
    case 'j':
        return arg_le(p, 4, &a) ? p->rc : memo_get(p, a);
    case 'p':
    case 'g':
        return op_text_memo(p, op == 'p');
    case 'c':
    case 0x93:
    case 'R':
    case 'b':
    case 'i':
    case 'o':
    case 0x81:
    case 0x92:
    case 0x82:
    case 0x83:
    case 0x84:
    case 'P':
    case 'Q':
    case 0x97:
    case 0x98:
        return refuse(p, op);
    default:
        return fail(p, "unknown opcode 0x%02x; the file is not a pickle or is corrupted", op);
    }
}

static int run(parser *p)
{
    p->none = new_value(p, PKL_NONE);
    p->true_ = new_value(p, PKL_BOOL);
    p->false_ = new_value(p, PKL_BOOL);
    if (!p->none || !p->true_ || !p->false_ ||
        grow_array(p, (void **)&p->stack, &p->stack_cap, 64, sizeof *p->stack))
        return p->rc;
    p->true_->u.i = 1;
    for (bool stop = false; !stop;) {
        p->op_pos = p->pos;
        if (p->pos >= p->len)
            return fail(p, "the pickle ends without a STOP opcode (file cut short?)");
        if (fill(p, p->pos + 1) || step(p, &stop)) return p->rc;
    }
    return GM_OK;
}

/* Parse len bytes: at buf, or read from f as the parse goes (buf NULL). */
static int parse_input(const void *buf, FILE *f, size_t len, const pkl_opts *opts, pkl_doc **out,
                       gm_err *err)
{
    *out = NULL;
    parser p;
    memset(&p, 0, sizeof p);
    p.buf = buf;
    p.f = f;
    p.len = buf || f ? len : 0;
    p.wend = buf ? p.len : 0;
    p.err = err;
    p.name = opts && opts->name ? opts->name : "pickle";
    p.max_depth = opts && opts->max_depth ? opts->max_depth : PKL_DEFAULT_MAX_DEPTH;
    if (p.max_depth > PKL_MAX_DEPTH) p.max_depth = PKL_MAX_DEPTH;
    if (opts && opts->max_bytes)
        p.max_bytes = opts->max_bytes;
    else
        p.max_bytes = len > (SIZE_MAX - 64 * GM_MiB) / 64 ? SIZE_MAX : 64 * GM_MiB + 64 * len;
    p.work_budget = 32 * (uint64_t)len + GM_MiB;
    p.doc = calloc(1, sizeof *p.doc);
    if (!p.doc) return gm_errf(err, GM_ENOMEM, "%s: out of host memory", p.name);
    int rc = run(&p);
    free(p.stack);
    free(p.marks);
    free(p.memo);
    free(p.intern_int);
    free(p.intern_str);
    free(p.own);
    if (rc) {
        pkl_free(p.doc);
        return rc;
    }
    *out = p.doc;
    return GM_OK;
}

int pkl_parse(const void *buf, size_t len, const pkl_opts *opts, pkl_doc **out, gm_err *err)
{
    return parse_input(buf, NULL, len, opts, out, err);
}

int pkl_load_file(const char *path, const pkl_opts *opts, pkl_doc **out, gm_err *err)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return gm_errf(err, GM_EIO, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return gm_errf(err, GM_EIO, "cannot read %s: not a regular file", path);
    }
    /* read as the parse goes (parser.buf, fill): the file is not held
     * whole beside the values it makes (a 171 MB snapshot: bench/README,
     * "Eighteenth round") */
    pkl_opts o = opts ? *opts : (pkl_opts){0};
    if (!o.name) o.name = path;
    int rc = parse_input(NULL, f, (size_t)st.st_size, &o, out, err);
    fclose(f);
    return rc;
}

void pkl_free(pkl_doc *doc)
{
    if (!doc) return;
    for (arena_chunk *c = doc->chunks, *n; c; c = n) {
        n = c->next;
        free(c);
    }
    free(doc);
}

const pkl_value *pkl_root(const pkl_doc *doc)
{
    return doc ? doc->root : NULL;
}

int pkl_protocol(const pkl_doc *doc)
{
    return doc ? doc->protocol : 0;
}

size_t pkl_doc_bytes(const pkl_doc *doc)
{
    return doc ? doc->bytes : 0;
}

/* ------------------------------------------------------------- accessors */

const char *pkl_kind_name(pkl_kind kind)
{
    static const char *const names[PKL_KIND_COUNT] = {"none", "bool",  "int",  "bigint", "float",
                                                      "str",  "bytes", "list", "tuple",  "dict"};
    return (unsigned)kind < PKL_KIND_COUNT ? names[kind] : "?";
}

size_t pkl_len(const pkl_value *v)
{
    if (!v) return 0;
    switch (v->kind) {
    case PKL_LIST:
    case PKL_TUPLE:
        return v->u.seq.len;
    case PKL_DICT:
        return v->u.map.len;
    case PKL_STR:
    case PKL_BYTES:
        return v->u.s.len;
    default:
        return 0;
    }
}

const pkl_value *pkl_item(const pkl_value *v, size_t i)
{
    return pkl_is_seq(v) && i < v->u.seq.len ? v->u.seq.items[i] : NULL;
}

const pkl_entry *pkl_dict_entry(const pkl_value *v, size_t i)
{
    return pkl_is(v, PKL_DICT) && i < v->u.map.len ? &v->u.map.items[i] : NULL;
}

const pkl_value *pkl_dict_get(const pkl_value *v, const char *key)
{
    if (!pkl_is(v, PKL_DICT) || !key) return NULL;
    size_t n = strlen(key);
    if (v->u.map.index) {
        uint64_t h = hash_bytes(PKL_STR, key, n);
        size_t mask = v->u.map.index[0];
        const uint32_t *slot = v->u.map.index + 1;
        for (size_t i = (size_t)h & mask; slot[i]; i = (i + 1) & mask) {
            const pkl_entry *e = &v->u.map.items[slot[i] - 1];
            if (e->key->kind == PKL_STR && e->key->u.s.hash == h && e->key->u.s.len == n &&
                memcmp(e->key->u.s.data, key, n) == 0)
                return e->value;
        }
        return NULL;
    }
    for (size_t i = 0; i < v->u.map.len; i++) {
        const pkl_value *k = v->u.map.items[i].key;
        /* the first byte before memcmp: a trace entry's keys 'action',
         * 'stream' and 'frames' have one length */
        if (k->kind == PKL_STR && k->u.s.len == n && (!n || k->u.s.data[0] == key[0]) &&
            memcmp(k->u.s.data, key, n) == 0)
            return v->u.map.items[i].value;
    }
    return NULL;
}

bool pkl_as_int(const pkl_value *v, int64_t *out)
{
    if (!v || (v->kind != PKL_INT && v->kind != PKL_BOOL)) return false;
    *out = v->u.i;
    return true;
}

bool pkl_as_u64(const pkl_value *v, uint64_t *out)
{
    if (!v) return false;
    if (v->kind == PKL_INT || v->kind == PKL_BOOL) {
        if (v->u.i < 0) return false;
        *out = (uint64_t)v->u.i;
        return true;
    }
    /* a minimal bigint below 2^64 is 9 bytes with a zero sign byte */
    if (v->kind == PKL_BIGINT && v->u.s.len == 9 && v->u.s.data[8] == 0) {
        uint64_t u = 0;
        for (int i = 0; i < 8; i++)
            u |= (uint64_t)(uint8_t)v->u.s.data[i] << (8 * i);
        *out = u;
        return true;
    }
    return false;
}

bool pkl_as_double(const pkl_value *v, double *out)
{
    if (!v) return false;
    if (v->kind == PKL_FLOAT) {
        *out = v->u.f;
        return true;
    }
    if (v->kind == PKL_INT || v->kind == PKL_BOOL) {
        *out = (double)v->u.i;
        return true;
    }
    return false;
}

bool pkl_as_bool(const pkl_value *v, bool *out)
{
    if (!v || (v->kind != PKL_INT && v->kind != PKL_BOOL)) return false;
    *out = v->u.i != 0;
    return true;
}

const char *pkl_as_str(const pkl_value *v, size_t *len)
{
    if (!v || (v->kind != PKL_STR && v->kind != PKL_BYTES)) return NULL;
    if (len) *len = v->u.s.len;
    return v->u.s.data;
}

bool pkl_dict_int(const pkl_value *d, const char *key, int64_t *out)
{
    return pkl_as_int(pkl_dict_get(d, key), out);
}

bool pkl_dict_u64(const pkl_value *d, const char *key, uint64_t *out)
{
    return pkl_as_u64(pkl_dict_get(d, key), out);
}

const char *pkl_dict_str(const pkl_value *d, const char *key)
{
    const pkl_value *v = pkl_dict_get(d, key);
    return pkl_is(v, PKL_STR) ? v->u.s.data : NULL;
}

/* ------------------------------------------------------------------ repr */

typedef struct writer {
    char *buf;
    size_t cap; /* usable bytes, NUL excluded */
    size_t n;
    bool full;
} writer;

static void w_put(writer *w, const char *s, size_t n)
{
    for (size_t i = 0; i < n && !w->full; i++) {
        if (w->n >= w->cap) {
            w->full = true;
            break;
        }
        w->buf[w->n++] = s[i];
    }
}

static void w_str(writer *w, const char *s)
{
    w_put(w, s, strlen(s));
}

static void repr_float(writer *w, double d)
{
    char b[40];
    if (isnan(d)) {
        w_str(w, "nan");
        return;
    }
    if (isinf(d)) {
        w_str(w, d < 0 ? "-inf" : "inf");
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(b, sizeof b, "%.*g", prec, d);
        if (strtod(b, NULL) == d) break;
    }
    w_str(w, b);
    if (strspn(b, "-0123456789") == strlen(b)) w_str(w, ".0");
}

static void repr_bigint(writer *w, const pkl_value *v)
{
    const uint8_t *b = (const uint8_t *)v->u.s.data;
    size_t n = v->u.s.len;
    char tmp[64];
    if (n > 1024) {
        snprintf(tmp, sizeof tmp, "<int of %zu bytes>", n);
        w_str(w, tmp);
        return;
    }
    bool neg = b[n - 1] & 0x80;
    uint8_t mag[1024];
    unsigned carry = 1;
    for (size_t i = 0; i < n; i++) { /* magnitude: negate negative numbers */
        if (neg) {
            unsigned t = (uint8_t)~b[i] + carry;
            mag[i] = (uint8_t)t;
            carry = t >> 8;
        } else
            mag[i] = b[i];
    }
    char digits[2600]; /* 1024 bytes < 2467 decimal digits */
    size_t nd = 0, top_ = n;
    while (top_ > 0) { /* divide by 10 until zero; digits come out last first */
        unsigned rem = 0;
        for (size_t i = top_; i-- > 0;) {
            unsigned cur = rem << 8 | mag[i];
            mag[i] = (uint8_t)(cur / 10);
            rem = cur % 10;
        }
        digits[nd++] = (char)('0' + rem);
        while (top_ > 0 && mag[top_ - 1] == 0)
            top_--;
    }
    if (neg) w_str(w, "-");
    if (!nd) w_str(w, "0");
    while (nd)
        w_put(w, &digits[--nd], 1);
}

static void repr_text(writer *w, const pkl_value *v)
{
    bool bytes = v->kind == PKL_BYTES;
    w_str(w, bytes ? "b'" : "'");
    for (size_t i = 0; i < v->u.s.len && !w->full; i++) {
        uint8_t c = (uint8_t)v->u.s.data[i];
        char e[8];
        if (c == '\\' || c == '\'') {
            e[0] = '\\';
            e[1] = (char)c;
            w_put(w, e, 2);
        } else if (c == '\n')
            w_str(w, "\\n");
        else if (c == '\r')
            w_str(w, "\\r");
        else if (c == '\t')
            w_str(w, "\\t");
        else if (c < 0x20 || c == 0x7f || (bytes && c >= 0x80)) {
            snprintf(e, sizeof e, "\\x%02x", c);
            w_str(w, e);
        } else
            w_put(w, (const char *)&c, 1);
    }
    w_str(w, "'");
}

static void repr_value(writer *w, const pkl_value *v)
{
    char tmp[32];
    if (w->full) return;
    switch (v->kind) {
    case PKL_NONE:
        w_str(w, "None");
        break;
    case PKL_BOOL:
        w_str(w, v->u.i ? "True" : "False");
        break;
    case PKL_INT:
        snprintf(tmp, sizeof tmp, "%lld", (long long)v->u.i);
        w_str(w, tmp);
        break;
    case PKL_BIGINT:
        repr_bigint(w, v);
        break;
    case PKL_FLOAT:
        repr_float(w, v->u.f);
        break;
    case PKL_STR:
    case PKL_BYTES:
        repr_text(w, v);
        break;
    case PKL_LIST:
    case PKL_TUPLE:
        w_str(w, v->kind == PKL_LIST ? "[" : "(");
        for (size_t i = 0; i < v->u.seq.len && !w->full; i++) {
            if (i) w_str(w, ", ");
            repr_value(w, v->u.seq.items[i]);
        }
        if (v->kind == PKL_TUPLE && v->u.seq.len == 1) w_str(w, ",");
        w_str(w, v->kind == PKL_LIST ? "]" : ")");
        break;
    case PKL_DICT:
        w_str(w, "{");
        for (size_t i = 0; i < v->u.map.len && !w->full; i++) {
            if (i) w_str(w, ", ");
            repr_value(w, v->u.map.items[i].key);
            w_str(w, ": ");
            repr_value(w, v->u.map.items[i].value);
        }
        w_str(w, "}");
        break;
    }
}

bool pkl_repr(const pkl_value *v, char *buf, size_t cap)
{
    if (!cap) return false;
    writer w = {buf, cap - 1, 0, false};
    if (v)
        repr_value(&w, v);
    else
        w_str(&w, "NULL");
    if (w.full) {
        size_t dots = cap - 1 < 3 ? cap - 1 : 3;
        memset(buf + (cap - 1 - dots), '.', dots);
        buf[cap - 1] = 0;
        return false;
    }
    buf[w.n] = 0;
    return true;
}
