/* packed.c - see packed.h. */
#include "packed.h"

#include <endian.h>
#include <stdlib.h>
#include <string.h>

#include "base/table.h"

enum {
    OP_MASK = 0x0f,
    SAME_AS_ID = 0x10, /* size and addr: the last ones this id carried */
    SAME_STREAM = 0x20,
    SAME_SITE = 0x40,
};

/* The values the last event of an id carried. */
typedef struct by_id {
    uint64_t addr, size;
} by_id;

/* What encoder and decoder both keep: the event before's time, stream and
 * site, the last addr written out, and each id's last size and addr. */
typedef struct context {
    uint64_t t, stream, addr;
    uint32_t site;
    by_id *ids;
    size_t n_ids; /* room in ids */
} context;

struct gm_packed {
    unsigned char *b;
    uint64_t len, room, max_bytes;
    uint64_t n;
    uint32_t max_id;
    context enc;
};

struct gm_packed_cursor {
    const gm_packed *p;
    uint64_t pos, done;
    context dec;
};

static inline uint64_t zigzag(uint64_t d) /* d: a difference, modulo 2^64 */
{
    return d << 1 ^ (uint64_t)((int64_t)d >> 63);
}

static inline uint64_t unzigzag(uint64_t v)
{
    return v >> 1 ^ (0 - (v & 1)); /* all ones for a negative difference */
}

/* A field of 1, 2, 4 or 8 bytes (length code 0..3), little-endian: the
 * decoder loads 8 bytes and masks (the store keeps 8 bytes of slack at its
 * end), so that no field's length is a branch. */
#define FIELD_LEN(lc) (1u << (lc))

static inline unsigned len_code(uint64_t v)
{
    return v < 1u << 8 ? 0 : v < 1u << 16 ? 1 : v >> 32 ? 3 : 2;
}

static inline unsigned char *put_field(unsigned char *o, uint64_t v, unsigned lc)
{
    uint64_t le = htole64(v);
    memcpy(o, &le, 8); /* the bytes past the field are overwritten next */
    return o + FIELD_LEN(lc);
}

static inline uint64_t get_field(const unsigned char *q, unsigned lc)
{
    uint64_t v;
    memcpy(&v, q, 8);
    return le64toh(v) & ~0ull >> (64 - (8u << lc)); /* its 1 << lc bytes (no table: no load) */
}

/* stream and site, which rarely change: LEB128 varints */
static inline unsigned char *put(unsigned char *o, uint64_t v)
{
    while (v >= 0x80) {
        *o++ = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    *o++ = (unsigned char)v;
    return o;
}

static inline uint64_t get(const unsigned char **in)
{
    const unsigned char *q = *in;
    uint64_t v = 0, b;
    unsigned s = 0;
    do {
        b = *q++;
        v |= (b & 0x7f) << s;
        s += 7;
    } while (b & 0x80);
    *in = q;
    return v;
}

static void context_reset(context *c)
{
    by_id *ids = c->ids;
    size_t n = c->n_ids;
    memset(c, 0, sizeof *c);
    c->ids = ids;
    c->n_ids = n;
    if (ids) memset(ids, 0, (size_t)n * sizeof *ids);
}

/* Room in c->ids for id (the encoder's table grows with the ids it meets;
 * they are live slots: as many as the most allocations live at once). */
static int ids_room(context *c, uint32_t id)
{
    return id < c->n_ids ? GM_OK : gm_table_room((void **)&c->ids, &c->n_ids, id, sizeof *c->ids);
}

gm_packed *gm_packed_new(uint64_t max_bytes)
{
    gm_packed *p = calloc(1, sizeof *p);
    if (p) p->max_bytes = max_bytes < UINT64_MAX / 2 ? max_bytes : UINT64_MAX / 2;
    return p;
}

/* The most one event takes: its four bytes (its length, flags, fields'
 * lengths, kind), four fields of up to 8 bytes, two varints of up to 10,
 * and the 8 bytes a field's store may write past its end. */
#define MAX_EVENT_BYTES (4 + 4 * 8 + 2 * 10 + 8)

int gm_packed_append(gm_packed *p, const gm_event *ev, size_t n)
{
    context *c = &p->enc;
    for (size_t i = 0; i < n; i++) {
        const gm_event *e = &ev[i];
        if (p->len + MAX_EVENT_BYTES > p->room) { /* the bytes past max_bytes are never used */
            uint64_t room = p->room ? 2 * p->room : 1u << 16;
            if (room > p->max_bytes + MAX_EVENT_BYTES) room = p->max_bytes + MAX_EVENT_BYTES;
            if (room < p->len + MAX_EVENT_BYTES) return GM_PACKED_FULL;
            unsigned char *b = realloc(p->b, room);
            if (!b) return GM_ENOMEM;
            p->b = b;
            p->room = room;
        }
        /* ops, categories and phases of a checked trace take 4 bits each */
        if (e->op > OP_MASK || e->category > 15 || e->phase > 15) return GM_PACKED_FULL;
        if (ids_room(c, e->id) != GM_OK) return GM_ENOMEM;
        unsigned char *o = p->b + p->len;
        unsigned f = e->op;
        uint64_t dt = zigzag(e->t_ns - c->t), da = zigzag(e->addr - c->addr);
        unsigned lt = len_code(dt), li = len_code(e->id), ls = 0, la = 0;
        int same = e->id && c->ids[e->id].addr == e->addr && c->ids[e->id].size == e->size;
        if (same) {
            f |= SAME_AS_ID;
        } else {
            ls = len_code(e->size);
            la = len_code(da);
        }
        if (e->stream == c->stream) f |= SAME_STREAM;
        if (e->site == c->site) f |= SAME_SITE;
        unsigned char *start = o;
        o[1] = (unsigned char)f;
        o[2] = (unsigned char)(lt | li << 2 | ls << 4 | la << 6);
        o[3] = (unsigned char)(e->category | e->phase << 4);
        o += 4;
        o = put_field(o, dt, lt);
        o = put_field(o, e->id, li);
        if (!same) {
            o = put_field(o, e->size, ls);
            o = put_field(o, da, la);
            c->addr = e->addr;
        }
        if (!(f & SAME_STREAM)) o = put(o, e->stream);
        if (!(f & SAME_SITE)) o = put(o, e->site);
        start[0] = (unsigned char)(o - start); /* at most MAX_EVENT_BYTES - 8 */
        if ((uint64_t)(o - p->b) > p->max_bytes) return GM_PACKED_FULL;
        p->len = (uint64_t)(o - p->b);
        c->t = e->t_ns;
        c->stream = e->stream;
        c->site = e->site;
        c->ids[e->id] = (by_id){e->addr, e->size}; /* id 0's is never read */
        if (e->id > p->max_id) p->max_id = e->id;
        p->n++;
    }
    return GM_OK;
}

void gm_packed_finish(gm_packed *p)
{
    unsigned char *b = realloc(p->b, p->len + 8); /* the slack get_field's loads read */
    if (b) {
        memset(b + p->len, 0, 8);
        p->b = b;
        p->room = p->len + 8;
    }
    free(p->enc.ids); /* only the decoders' tables from now on */
    p->enc.ids = NULL;
    p->enc.n_ids = 0;
}

uint64_t gm_packed_events(const gm_packed *p)
{
    return p->n;
}

uint64_t gm_packed_bytes(const gm_packed *p)
{
    return p->len;
}

void gm_packed_free(gm_packed *p)
{
    if (!p) return;
    free(p->b);
    free(p->enc.ids);
    free(p);
}

gm_packed_cursor *gm_packed_cursor_new(const gm_packed *p)
{
    gm_packed_cursor *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->p = p;
    c->dec.n_ids = (size_t)p->max_id + 1;
    c->dec.ids = calloc(c->dec.n_ids, sizeof *c->dec.ids);
    if (!c->dec.ids) {
        free(c);
        return NULL;
    }
    return c;
}

size_t gm_packed_read(gm_packed_cursor *c, gm_event *buf, size_t cap)
{
    const gm_packed *p = c->p;
    context *x = &c->dec;
    const unsigned char *q = p->b + c->pos;
    by_id *ids = x->ids;
    /* the context in locals: buf's stores cannot change them */
    uint64_t t = x->t, last_addr = x->addr, stream = x->stream;
    uint32_t site = x->site;
    size_t k = 0, n = p->n - c->done < cap ? (size_t)(p->n - c->done) : cap;
    for (; k < n; k++) {
        const unsigned char *next = q + q[0]; /* the next event waits on nothing else */
        unsigned f = q[1], lens = q[2], kind = q[3];
        unsigned lt = lens & 3, li = lens >> 2 & 3, ls = lens >> 4 & 3, la = lens >> 6;
        const unsigned char *qi = q + 4 + FIELD_LEN(lt), *qs = qi + FIELD_LEN(li);
        t += unzigzag(get_field(q + 4, lt));
        uint32_t id = (uint32_t)get_field(qi, li);
        uint64_t size, addr;
        const unsigned char *qv;
        if (f & SAME_AS_ID) {
            size = ids[id].size;
            addr = ids[id].addr;
            qv = qs;
        } else {
            const unsigned char *qa = qs + FIELD_LEN(ls);
            size = get_field(qs, ls);
            addr = last_addr += unzigzag(get_field(qa, la));
            qv = qa + FIELD_LEN(la);
        }
        if (__builtin_expect(!(f & SAME_STREAM), 0)) stream = get(&qv);
        if (__builtin_expect(!(f & SAME_SITE), 0)) site = (uint32_t)get(&qv);
        buf[k] = (gm_event){.t_ns = t,
                            .addr = addr,
                            .size = size,
                            .stream = stream,
                            .op = (uint8_t)(f & OP_MASK),
                            .category = (uint8_t)(kind & 15),
                            .phase = (uint8_t)(kind >> 4),
                            .id = id,
                            .site = site};
        ids[id] = (by_id){addr, size};
        q = next;
    }
    x->t = t;
    x->addr = last_addr;
    x->stream = stream;
    x->site = site;
    c->done += k;
    c->pos = (uint64_t)(q - p->b);
    return k;
}

void gm_packed_rewind(gm_packed_cursor *c)
{
    c->pos = c->done = 0;
    context_reset(&c->dec);
}

void gm_packed_cursor_free(gm_packed_cursor *c)
{
    if (!c) return;
    free(c->dec.ids);
    free(c);
}
