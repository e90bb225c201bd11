/*
 * unpickle.h - a safe reader for the plain-data subset of Python pickles.
 *
 * PyTorch memory snapshots (torch.cuda.memory._dump_snapshot()) are pickles
 * of dicts, lists, tuples, strings and numbers. Python's own pickle.load can
 * run arbitrary code; this reader cannot: it knows only the opcodes that build
 * plain data and refuses every opcode that would import, construct or call a
 * Python object (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ,
 * NEWOBJ_EX, EXT1/2/4, PERSID, BINPERSID) or refer to out-of-band buffers
 * (NEXT_BUFFER, READONLY_BUFFER), with a message naming the offset and the fix.
 *
 * Supported: protocols 0-5. Binary opcodes: PROTO FRAME STOP MARK POP POP_MARK
 * DUP, NONE NEWTRUE NEWFALSE, BININT BININT1 BININT2 LONG1 LONG4, BINFLOAT,
 * SHORT_BINUNICODE BINUNICODE BINUNICODE8, BINSTRING SHORT_BINSTRING,
 * SHORT_BINBYTES BINBYTES BINBYTES8 BYTEARRAY8, EMPTY_LIST APPEND APPENDS,
 * EMPTY_TUPLE TUPLE1 TUPLE2 TUPLE3, EMPTY_DICT SETITEM SETITEMS, EMPTY_SET
 * ADDITEMS FROZENSET (sets load as lists), MEMOIZE BINPUT LONG_BINPUT BINGET
 * LONG_BINGET. Text (protocol 0/1) opcodes: INT LONG FLOAT STRING UNICODE PUT
 * GET LIST TUPLE DICT.
 *
 * Untrusted input is the normal case: truncated or corrupted pickles give a
 * GM_EINVAL error "<name>: offset N: ..." and never a crash. Memory is bounded
 * (pkl_opts.max_bytes), nesting is bounded (pkl_opts.max_depth), every length
 * is checked against the bytes that remain, and work is linear in the input.
 *
 * The result is a tree of pkl_value nodes in one arena, freed at once by
 * pkl_free(). Memo references (BINGET) share nodes, and so do strs of up
 * to 32 bytes with the same text and ints of the same value (a snapshot
 * repeats its keys, actions, sizes and addresses in every entry), so the
 * tree is really a DAG: a node can be reachable from several parents, but never from itself
 * (cycles are refused), and a walker that follows every edge may visit a
 * shared node many times. Nodes are read-only once parsing is done.
 *
 * Differences from Python's pickle.load, all on inputs Python's pickler never
 * writes: dict keys must be None, bool, int, float, str or bytes (numbers
 * compare as in Python, 1 == True == 1.0, except that a bigint never equals a
 * float); a container
 * cannot be changed after it was placed in another one; PUT/BINPUT indices
 * larger than the input's offset are refused; INT/LONG text accepts decimal
 * digits only; STRING/BINSTRING must be ASCII (Python's default encoding).
 */
#ifndef GM_UNPICKLE_H
#define GM_UNPICKLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define PKL_DEFAULT_MAX_DEPTH 256u /* nesting levels; snapshots use about 10 */
#define PKL_MAX_DEPTH 4096u        /* largest max_depth accepted             */

/* What a value is. */
typedef enum pkl_kind {
    PKL_NONE = 0,
    PKL_BOOL,   /* u.i is 0 or 1                                             */
    PKL_INT,    /* u.i: any Python int that fits in int64_t                  */
    PKL_BIGINT, /* u.s: two's complement, little-endian, minimal (> 8 bytes) */
    PKL_FLOAT,  /* u.f                                                       */
    PKL_STR,    /* u.s: UTF-8 (surrogates allowed, as Python's surrogatepass),
                   NUL-terminated; may contain NUL bytes, so use u.s.len      */
    PKL_BYTES,  /* u.s: raw bytes, NUL-terminated for convenience            */
    PKL_LIST,   /* u.seq (also sets and frozensets, see flags)               */
    PKL_TUPLE,  /* u.seq                                                     */
    PKL_DICT,   /* u.map, in insertion order, keys unique                    */
    PKL_KIND_COUNT
} pkl_kind;

/* pkl_value.flags */
#define PKL_F_SET 0x01       /* PKL_LIST made from EMPTY_SET / FROZENSET     */
#define PKL_F_FROZENSET 0x02 /* ... from FROZENSET                           */
#define PKL_F_BYTEARRAY 0x04 /* PKL_BYTES made from BYTEARRAY8               */
#define PKL_F_SEALED 0x10    /* internal: placed in a container, immutable   */
#define PKL_F_HASHED 0x20    /* internal: u.s.hash is valid                  */

typedef struct pkl_value pkl_value;

/* One dict entry. */
typedef struct pkl_entry {
    const pkl_value *key;
    const pkl_value *value;
} pkl_entry;

/* A node. Read it through the helpers below or directly; never write it. */
struct pkl_value {
    uint8_t kind;   /* pkl_kind                                              */
    uint8_t flags;  /* PKL_F_*                                               */
    uint16_t depth; /* nesting levels below: 0 for scalars, 1 for [1, 2]     */
    union {
        int64_t i; /* PKL_BOOL, PKL_INT */
        double f;  /* PKL_FLOAT         */
        struct {
            const char *data; /* len bytes + a NUL                   */
            size_t len;
            uint64_t hash; /* internal: key hash (PKL_F_HASHED)     */
        } s;               /* PKL_STR, PKL_BYTES, PKL_BIGINT          */
        struct {
            const pkl_value **items;
            size_t len;
            size_t cap; /* internal */
        } seq;          /* PKL_LIST, PKL_TUPLE */
        struct {
            pkl_entry *items;
            uint32_t len;
            uint32_t cap;    /* internal                                       */
            uint32_t *index; /* internal: index[0] the slot mask, then the hash
                                slots (entry + 1); NULL: searched linearly     */
        } map;               /* PKL_DICT                                       */
    } u;
};
/* 32 bytes: a snapshot's trace is millions of small nodes (an entry: a dict
 * of six keys and its values), so the node's size is most of a loaded
 * snapshot's memory. */

/* Parse options; a NULL pkl_opts or zero fields mean the defaults. */
typedef struct pkl_opts {
    const char *name;   /* input name for messages, e.g. the file path ("pickle") */
    unsigned max_depth; /* nesting limit (PKL_DEFAULT_MAX_DEPTH, at most PKL_MAX_DEPTH) */
    size_t max_bytes;   /* memory for values, memo and stacks (64 MiB + 64 x input) */
} pkl_opts;

/* A parsed pickle: the arena that owns every node, and the root value. */
typedef struct pkl_doc pkl_doc;

/*
 * Parse len bytes at buf. On success *out is a new document (pkl_free it) and
 * GM_OK is returned; otherwise *out is NULL and err says why (GM_EINVAL for
 * bad or unsafe input, GM_ENOMEM when malloc fails). Bytes after STOP are
 * ignored, as Python does. buf need not outlive the document.
 */
int pkl_parse(const void *buf, size_t len, const pkl_opts *opts, pkl_doc **out, gm_err *err);

/* Read the file at path and parse it; opts->name defaults to path. GM_EIO if unreadable. */
int pkl_load_file(const char *path, const pkl_opts *opts, pkl_doc **out, gm_err *err);

void pkl_free(pkl_doc *doc);

const pkl_value *pkl_root(const pkl_doc *doc);
int pkl_protocol(const pkl_doc *doc);     /* PROTO argument, 0 when absent      */
size_t pkl_doc_bytes(const pkl_doc *doc); /* arena bytes held by the document */

/* "none", "bool", "int", "bigint", "float", "str", "bytes", "list", "tuple", "dict". */
const char *pkl_kind_name(pkl_kind kind);

/* Helpers: all accept NULL and values of the wrong kind, and then return NULL/false/0. */
static inline bool pkl_is(const pkl_value *v, pkl_kind kind)
{
    return v && v->kind == kind;
}
/* A list or a tuple. */
static inline bool pkl_is_seq(const pkl_value *v)
{
    return v && (v->kind == PKL_LIST || v->kind == PKL_TUPLE);
}
/* Items of a list/tuple/dict, bytes of a str/bytes; 0 otherwise. */
size_t pkl_len(const pkl_value *v);
/* Item i of a list or tuple; NULL when out of range. */
const pkl_value *pkl_item(const pkl_value *v, size_t i);
/* Entry i of a dict, in insertion order; NULL when out of range. */
const pkl_entry *pkl_dict_entry(const pkl_value *v, size_t i);
/* Value of the str key `key` in dict v; NULL when v is not a dict or lacks the key. */
const pkl_value *pkl_dict_get(const pkl_value *v, const char *key);
/* An int (or bool) that fits in int64_t. */
bool pkl_as_int(const pkl_value *v, int64_t *out);
/* A non-negative int (or bool, or bigint below 2^64). */
bool pkl_as_u64(const pkl_value *v, uint64_t *out);
/* A float, int or bool (bigints: false), as a double. */
bool pkl_as_double(const pkl_value *v, double *out);
/* A bool (or an int: nonzero is true). */
bool pkl_as_bool(const pkl_value *v, bool *out);
/* Bytes of a str (UTF-8) or bytes value and their length; NULL for other kinds. */
const char *pkl_as_str(const pkl_value *v, size_t *len);

/* Shortcuts for dict fields: false when the key is missing or of another kind. */
bool pkl_dict_int(const pkl_value *d, const char *key, int64_t *out);
bool pkl_dict_u64(const pkl_value *d, const char *key, uint64_t *out);
const char *pkl_dict_str(const pkl_value *d, const char *key);

/*
 * Python-like text of v into buf (always NUL-terminated when cap > 0):
 * None, True, 12, 1.5, 'text', b'\x00', [1, 2], (1,), {'k': v}; sets print as
 * lists. Floats print with the fewest digits that read back exactly ("1.0",
 * "0.1", "1e+300"); str bytes >= 0x80 are copied, bytes values escape them.
 * Returns true when the whole text fit; otherwise buf ends in "..." and false
 * (shared nodes may make the full text exponentially long, so cap bounds the work).
 */
bool pkl_repr(const pkl_value *v, char *buf, size_t cap);

#endif
