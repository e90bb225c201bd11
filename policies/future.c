/* future.c - see future.h. */
#define _GNU_SOURCE /* O_TMPFILE */
#include "future.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BLOCK 64 /* entries per block                       */
/* A block on file: a byte of widths, then its entries after the first (the
 * first is in the table) as deltas from the one before, the indices' and
 * the times' (zigzagged) each in as many bytes as the block's largest
 * needs, 1, 2, 4 or 8: loads and stores of whole words, where a varint
 * took a branch for every 7 bits (half of the oracle's lookups' time went
 * to decoding). About as small as varints: 3-6 bytes an entry. */
#define MAX_BLOCK_BYTES (1 + (BLOCK - 1) * 16)
/* The file is written and read in pieces, not a block (a few hundred
 * bytes) at a time: a system call per block cost the oracle a third of its
 * time over the pytorch policy's, in the kernel. Writes go out WBUF_BYTES
 * at a time; reads fill one of N_WIN windows of WIN_BYTES (the replay reads
 * a few regions of the file at once: the keys' blocks are entered near
 * where they were written, the rare keys' further back), the least
 * recently used one. */
#define WBUF_BYTES (256u << 10)
#define WIN_BYTES (64u << 10)
#define N_WIN 8

typedef struct fblock {
    uint64_t offset; /* in the file                               */
    uint64_t first_idx, last_idx;
    uint64_t first_t;
    uint32_t bytes, n;
} fblock;

typedef struct fkey {
    fblock *blocks;
    size_t n_blocks, cap_blocks;
    uint64_t count;
    uint64_t *idx, *t; /* build: the block being filled; read: the block loaded */
    uint32_t n_buf;
    long loaded; /* read: the block in idx/t, -1 none */
    /* read: the lookups the loaded block answers (from in ld_from..ld_last,
     * its last index), and the entry of the last answer: the replay asks
     * again at or a little past it (gm_future_next) */
    uint64_t ld_from, ld_last;
    uint32_t cur;
    /* read: the last answer (a_idx, a_t), which every from in a_lo..a_idx
     * gets (a_lo: one past the entry before it); none yet: a_lo > a_idx */
    uint64_t a_lo, a_idx, a_t;
} fkey;

/* A piece of the file in memory (reads, after the seal). */
typedef struct fwin {
    uint64_t start; /* file offset of buf[0] */
    uint32_t len;   /* bytes held (0: none) */
    uint64_t used;  /* the read count when last used (the least recent goes) */
    unsigned char *buf;
} fwin;

struct gm_future {
    int fd;
    uint64_t file_bytes; /* the blocks' bytes, written or still in wbuf */
    unsigned char *wbuf; /* build: the blocks not yet written (WBUF_BYTES) */
    uint32_t wlen;
    fwin win[N_WIN];
    uint64_t reads;
    fkey *keys;
    size_t n_keys, cap_keys;
    int sealed;
};

int gm_future_open(gm_future **out, gm_err *err)
{
    *out = NULL;
    gm_future *f = calloc(1, sizeof *f);
    if (!f) return gm_errf(err, GM_ENOMEM, "oracle: out of memory");
    const char *dir = getenv("TMPDIR");
    if (!dir || !*dir) dir = "/tmp";
    f->fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (f->fd < 0) { /* no O_TMPFILE here: a named file, unlinked at once */
        char path[4096];
        snprintf(path, sizeof path, "%s/gmsim-oracle-XXXXXX", dir);
        f->fd = mkstemp(path);
        if (f->fd >= 0) unlink(path);
    }
    if (f->fd < 0) {
        int e = errno;
        free(f);
        return gm_errf(err, GM_EIO,
                       "oracle: cannot create a temporary file in %s for the trace's future (%s); "
                       "point TMPDIR at a writable folder",
                       dir, strerror(e));
    }
    f->wbuf = malloc(WBUF_BYTES);
    if (!f->wbuf) {
        gm_future_free(f);
        return gm_errf(err, GM_ENOMEM, "oracle: out of memory");
    }
    *out = f;
    return GM_OK;
}

long gm_future_key(gm_future *f)
{
    if (f->n_keys == f->cap_keys) {
        size_t cap = f->cap_keys ? 2 * f->cap_keys : 16;
        fkey *k = realloc(f->keys, cap * sizeof *k);
        if (!k) return -1;
        f->keys = k;
        f->cap_keys = cap;
    }
    fkey *k = &f->keys[f->n_keys];
    memset(k, 0, sizeof *k);
    k->loaded = -1;
    k->a_lo = 1;
    return (long)f->n_keys++;
}

/* log2 of the bytes (1, 2, 4, 8) that hold every value whose bits are in v. */
static unsigned width_log(uint64_t v)
{
    return v >> 32 ? 3 : v >> 16 ? 2 : v >> 8 ? 1 : 0;
}

/* v[0..n) into p, each in 1 << wl bytes (the host's byte order: the file
 * is this process's own); returns the bytes written. */
static size_t pack(unsigned char *p, const uint64_t *v, uint32_t n, unsigned wl)
{
    switch (wl) {
    case 0:
        for (uint32_t i = 0; i < n; i++)
            p[i] = (unsigned char)v[i];
        break;
    case 1:
        for (uint32_t i = 0; i < n; i++) {
            uint16_t x = (uint16_t)v[i];
            memcpy(p + 2 * i, &x, 2);
        }
        break;
    case 2:
        for (uint32_t i = 0; i < n; i++) {
            uint32_t x = (uint32_t)v[i];
            memcpy(p + 4 * i, &x, 4);
        }
        break;
    default:
        memcpy(p, v, 8 * (size_t)n);
    }
    return (size_t)n << wl;
}

/* pack's inverse: n values of 1 << wl bytes from p into v. */
static void unpack(const unsigned char *p, uint64_t *v, uint32_t n, unsigned wl)
{
    switch (wl) {
    case 0:
        for (uint32_t i = 0; i < n; i++)
            v[i] = p[i];
        break;
    case 1:
        for (uint32_t i = 0; i < n; i++) {
            uint16_t x;
            memcpy(&x, p + 2 * i, 2);
            v[i] = x;
        }
        break;
    case 2:
        for (uint32_t i = 0; i < n; i++) {
            uint32_t x;
            memcpy(&x, p + 4 * i, 4);
            v[i] = x;
        }
        break;
    default:
        memcpy(v, p, 8 * (size_t)n);
    }
}

/* Times never go back in a valid trace, but a delta is stored zigzagged so
 * that any order survives the round trip. */
static uint64_t zigzag(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static int64_t unzigzag(uint64_t v)
{
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* Write the blocks in wbuf at the end of the file. */
static int write_out(gm_future *f, gm_err *err)
{
    uint64_t at = f->file_bytes - f->wlen;
    for (size_t done = 0; done < f->wlen;) {
        ssize_t w = pwrite(f->fd, f->wbuf + done, f->wlen - done, (off_t)(at + done));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0)
            return gm_errf(err, GM_EIO,
                           "oracle: cannot write the trace's future to its temporary file (%s); "
                           "free some disk space or point TMPDIR elsewhere",
                           w < 0 ? strerror(errno) : "no space");
        done += (size_t)w;
    }
    f->wlen = 0;
    return GM_OK;
}

/* Key k's buffered entries become one block at the end of the file,
 * encoded into the write buffer. */
__attribute__((noinline)) static int flush_key(gm_future *f, fkey *k, gm_err *err)
{
    if (!k->n_buf) return GM_OK;
    if (f->wlen + MAX_BLOCK_BYTES > WBUF_BYTES && write_out(f, err)) return GM_EIO;
    unsigned char *buf = f->wbuf + f->wlen;
    uint64_t di[BLOCK], dt[BLOCK], oi = 0, ot = 0;
    uint32_t m = k->n_buf - 1; /* entries after the first */
    for (uint32_t i = 0; i < m; i++) {
        di[i] = k->idx[i + 1] - k->idx[i];
        dt[i] = zigzag((int64_t)(k->t[i + 1] - k->t[i]));
        oi |= di[i];
        ot |= dt[i];
    }
    unsigned wi = width_log(oi), wt = width_log(ot);
    buf[0] = (unsigned char)(wi | wt << 2);
    size_t len = 1 + pack(buf + 1, di, m, wi);
    len += pack(buf + len, dt, m, wt);
    if (k->n_blocks == k->cap_blocks) {
        size_t cap = k->cap_blocks ? 2 * k->cap_blocks : 4;
        fblock *b = realloc(k->blocks, cap * sizeof *b);
        if (!b) return gm_errf(err, GM_ENOMEM, "oracle: out of memory filing the trace's future");
        k->blocks = b;
        k->cap_blocks = cap;
    }
    f->wlen += (uint32_t)len;
    k->blocks[k->n_blocks++] = (fblock){.offset = f->file_bytes,
                                        .first_idx = k->idx[0],
                                        .last_idx = k->idx[k->n_buf - 1],
                                        .first_t = k->t[0],
                                        .bytes = (uint32_t)len,
                                        .n = k->n_buf};
    f->file_bytes += len;
    k->n_buf = 0;
    return GM_OK;
}

static inline void put_entry(fkey *k, uint64_t idx, uint64_t t)
{
    k->idx[k->n_buf] = idx;
    k->t[k->n_buf++] = t;
    k->count++;
}

/* gm_future_add's rare cases: key k's first entry (its block buffers), or
 * the entry that fills its block. */
__attribute__((noinline)) static int add_slow(gm_future *f, fkey *k, uint64_t idx, uint64_t t,
                                              gm_err *err)
{
    if (!k->idx) {
        k->idx = malloc(BLOCK * sizeof *k->idx);
        k->t = malloc(BLOCK * sizeof *k->t);
        if (!k->idx || !k->t)
            return gm_errf(err, GM_ENOMEM, "oracle: out of memory filing the trace's future");
    }
    put_entry(k, idx, t);
    return k->n_buf == BLOCK ? flush_key(f, k, err) : GM_OK;
}

/* Called for every entry: the common case calls nothing, so it saves no
 * registers on its way in and out. */
int gm_future_add(gm_future *f, long key, uint64_t idx, uint64_t t, gm_err *err)
{
    fkey *k = &f->keys[key];
    if (__builtin_expect(!k->idx || k->n_buf + 1 == BLOCK, 0)) return add_slow(f, k, idx, t, err);
    put_entry(k, idx, t);
    return GM_OK;
}

int gm_future_seal(gm_future *f, gm_err *err)
{
    for (size_t i = 0; i < f->n_keys; i++) {
        int rc = flush_key(f, &f->keys[i], err);
        if (rc) return rc;
        f->keys[i].loaded = -1;
    }
    if (f->wlen && write_out(f, err)) return GM_EIO;
    free(f->wbuf);
    f->wbuf = NULL;
    f->sealed = 1;
    return GM_OK;
}

uint64_t gm_future_count(const gm_future *f, long key)
{
    return f->keys[key].count;
}

int gm_future_first(const gm_future *f, long key, uint64_t *idx, uint64_t *t)
{
    const fkey *k = &f->keys[key];
    if (!k->n_blocks) return 0;
    *idx = k->blocks[0].first_idx;
    *t = k->blocks[0].first_t;
    return 1;
}

/* The bytes of block bl: from a read window that holds them, else read
 * into the least recently used window from bl's offset on; NULL when the
 * file cannot be read. */
static const unsigned char *block_bytes(gm_future *f, const fblock *bl)
{
    f->reads++;
    fwin *w = &f->win[0];
    for (int i = 0; i < N_WIN; i++) {
        fwin *x = &f->win[i];
        if (x->len && bl->offset >= x->start && bl->offset + bl->bytes <= x->start + x->len) {
            x->used = f->reads;
            return x->buf + (bl->offset - x->start);
        }
        if (x->used < w->used) w = x;
    }
    if (!w->buf && !(w->buf = malloc(WIN_BYTES))) return NULL;
    uint64_t want = f->file_bytes - bl->offset; /* >= bl->bytes */
    if (want > WIN_BYTES) want = WIN_BYTES;
    w->len = 0;
    for (size_t done = 0; done < want;) {
        ssize_t r = pread(f->fd, w->buf + done, want - done, (off_t)(bl->offset + done));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return NULL;
        done += (size_t)r;
    }
    w->start = bl->offset;
    w->len = (uint32_t)want;
    w->used = f->reads;
    return w->buf;
}

/* Read and decode block b of key k into k->idx / k->t. */
static int load(gm_future *f, fkey *k, size_t b)
{
    const fblock *bl = &k->blocks[b];
    const unsigned char *buf = block_bytes(f, bl);
    if (!buf) return -1;
    uint32_t m = bl->n - 1; /* entries after the first */
    unsigned wi = buf[0] & 3, wt = buf[0] >> 2 & 3;
    if (buf[0] >> 4 || bl->bytes != 1 + ((size_t)m << wi) + ((size_t)m << wt))
        return -1; /* damaged */
    k->idx[0] = bl->first_idx;
    k->t[0] = bl->first_t;
    unpack(buf + 1, k->idx + 1, m, wi);
    unpack(buf + 1 + ((size_t)m << wi), k->t + 1, m, wt);
    for (uint32_t i = 1; i < bl->n; i++) {
        k->idx[i] += k->idx[i - 1];
        k->t[i] = k->t[i - 1] + (uint64_t)unzigzag(k->t[i]);
    }
    k->loaded = (long)b;
    k->ld_from = b ? k->blocks[b - 1].last_idx + 1 : 0;
    k->ld_last = bl->last_idx;
    k->cur = 0;
    return 0;
}

/* The first entry >= from of the loaded block, which has one (from <=
 * ld_last): from the last answer on, or, when from went back, searched. */
static inline uint32_t entry_from(fkey *k, uint64_t from)
{
    uint32_t c = k->cur;
    if (k->idx[c] < from) {
        do
            c++;
        while (k->idx[c] < from); /* stops at n - 1 at the latest */
    } else if (c && k->idx[c - 1] >= from) {
        uint32_t lo = 0, hi = c; /* idx[hi] >= from */
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (k->idx[mid] < from)
                lo = mid + 1;
            else
                hi = mid;
        }
        c = lo;
    }
    k->cur = c;
    return c;
}

/* Remember the answer (idx, t) and the froms that get it: lo..idx. */
static inline int answer(fkey *k, uint64_t lo, uint64_t idx, uint64_t t, uint64_t *oi, uint64_t *ot)
{
    k->a_lo = lo;
    k->a_idx = *oi = idx;
    k->a_t = *ot = t;
    return 1;
}

/* The answer from the loaded block, which has an entry >= from. */
static inline int answer_loaded(fkey *k, uint64_t from, uint64_t *idx, uint64_t *t)
{
    uint32_t c = entry_from(k, from);
    return answer(k, c ? k->idx[c - 1] + 1 : k->ld_from, k->idx[c], k->t[c], idx, t);
}

int gm_future_next(gm_future *f, long key, uint64_t from, uint64_t *idx, uint64_t *t)
{
    fkey *k = &f->keys[key];
    if (from >= k->a_lo && from <= k->a_idx) { /* the answer of the last lookup: most */
        *idx = k->a_idx;
        *t = k->a_t;
        return 1;
    }
    if (k->loaded >= 0 && from >= k->ld_from && from <= k->ld_last)
        return answer_loaded(k, from, idx, t); /* still in the block it last used */
    if (!k->n_blocks || from > k->blocks[k->n_blocks - 1].last_idx) return 0;
    /* the first block whose last index is >= from (not the loaded one) */
    size_t lo = 0, hi = k->n_blocks - 1;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (k->blocks[mid].last_idx < from)
            lo = mid + 1;
        else
            hi = mid;
    }
    const fblock *bl = &k->blocks[lo];
    if (from <= bl->first_idx) /* its first entry: in the table, no read */
        return answer(k, lo ? k->blocks[lo - 1].last_idx + 1 : 0, bl->first_idx, bl->first_t, idx,
                      t);
    if (load(f, k, lo)) return -1;
    return answer_loaded(k, from, idx, t);
}

uint64_t gm_future_file_bytes(const gm_future *f)
{
    return f->file_bytes;
}

uint64_t gm_future_mem_bytes(const gm_future *f)
{
    uint64_t n = sizeof *f + f->cap_keys * sizeof *f->keys;
    for (size_t i = 0; i < f->n_keys; i++) {
        const fkey *k = &f->keys[i];
        n += k->cap_blocks * sizeof *k->blocks + (k->idx ? BLOCK * 2 * sizeof(uint64_t) : 0);
    }
    if (f->wbuf) n += WBUF_BYTES;
    for (int i = 0; i < N_WIN; i++)
        if (f->win[i].buf) n += WIN_BYTES;
    return n;
}

void gm_future_free(gm_future *f)
{
    if (!f) return;
    for (size_t i = 0; i < f->n_keys; i++) {
        free(f->keys[i].blocks);
        free(f->keys[i].idx);
        free(f->keys[i].t);
    }
    free(f->keys);
    free(f->wbuf);
    for (int i = 0; i < N_WIN; i++)
        free(f->win[i].buf);
    if (f->fd >= 0) close(f->fd);
    free(f);
}
