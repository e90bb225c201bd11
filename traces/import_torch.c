/*
 * import_torch.c - PyTorch memory snapshot -> gmsim trace; see import_torch.h,
 * traces/SNAPSHOTS.md (the input) and traces/IMPORT.md (the rules).
 *
 * Per device:
 *   1. read the dump-time segments and their live blocks (checking the
 *      layout invariants of SNAPSHOTS.md §4), and the trace entries;
 *   2. undo the trace backwards from the dump state (SNAPSHOTS.md rule 3):
 *      what is left is the memory that existed before the first entry, and
 *      every alloc is paired with its free_requested / free_completed;
 *   3. give the pre-existing blocks whose size is not recorded a block size
 *      (requested rounded to 512, plus an unsplittable tail) and check that
 *      the rebuilt state is a valid carving of its segments;
 *   4. classify every entry's stack into a phase, cut the trace into phase
 *      regions, and infer each block's category from phase and lifetime;
 *   5. emit /events (alloc, free at free_completed, segment_*), /markers
 *      and /initial_state, and the metadata.
 */
#include "import_torch.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_conf.h"
#include "base/addrmap.h"
#include "base/clock.h"
#include "base/units.h"
#include "import_torch_int.h"

#define NONE GM_IMP_NONE
#define MAX_ENTRIES 0xfffffff0u
#define MAX_ADDR (UINT64_MAX - 1) /* gm_addrmap_key(UINT64_MAX) is not a valid key */

static const char *const action_names[GM_TA_COUNT] = {
    "alloc",       "free_requested", "free_completed", "segment_alloc", "segment_free",
    "segment_map", "segment_unmap",  "snapshot",       "oom",           "other"};

const char *gm_torch_action_name(int action)
{
    return action >= 0 && action < GM_TA_COUNT ? action_names[action] : "?";
}

const char *gm_imp_action_name(int action)
{
    return gm_torch_action_name(action);
}

/* ---------------- working state (import_torch_int.h) ---------------- */

typedef gm_imp_ent ent;
typedef gm_imp_seg seg;
typedef gm_imp_blk blk;
typedef gm_imp_range range;
typedef gm_imp_dev dev;

enum { HINT_PARAM = 1, HINT_COPY = 2 };

int gm_imp_grow(void *pp, size_t *cap, size_t need, size_t elem)
{
    void **p = pp;
    if (need <= *cap) return 0;
    size_t n = *cap ? *cap * 2 : 64;
    while (n < need)
        n *= 2;
    void *q = realloc(*p, n * elem);
    if (!q) return -1;
    *p = q;
    *cap = n;
    return 0;
}

#define grow gm_imp_grow

#define oom_err gm_imp_oom

static uint64_t round512(uint64_t n)
{
    return n < GM_PT_MIN_BLOCK_SIZE
               ? GM_PT_MIN_BLOCK_SIZE
               : (n + GM_PT_MIN_BLOCK_SIZE - 1) / GM_PT_MIN_BLOCK_SIZE * GM_PT_MIN_BLOCK_SIZE;
}

static void dev_free(dev *d)
{
    free(d->e);
    free(d->s);
    free(d->x);
    free(d->b);
    free(d->ranges);
    free(d->region_phase);
    gm_addrmap_free(&d->live);
    gm_addrmap_free(&d->segmap);
}

static int new_seg(dev *d, uint64_t addr, uint64_t size, uint64_t stream, int small, uint64_t pid0,
                   uint64_t pid1, uint32_t *idx, gm_err *err)
{
    if (grow(&d->s, &d->cs, d->ns + 1, sizeof *d->s)) return oom_err(err);
    d->s[d->ns] = (seg){.addr = addr,
                        .size = size,
                        .stream = stream,
                        .pid0 = pid0,
                        .pid1 = pid1,
                        .small = (uint8_t)small,
                        .live = 1};
    *idx = (uint32_t)d->ns++;
    return GM_OK;
}

static int new_blk(dev *d, uint64_t addr, uint64_t requested, uint64_t block_size, uint64_t stream,
                   uint32_t *idx, gm_err *err)
{
    if (grow(&d->b, &d->cb, d->nb + 1, sizeof *d->b)) return oom_err(err);
    d->b[d->nb] = (blk){.addr = addr,
                        .requested = requested,
                        .block_size = block_size,
                        .stream = stream,
                        .alloc_ent = NONE,
                        .freereq_ent = NONE,
                        .freecomp_ent = NONE};
    *idx = (uint32_t)d->nb++;
    return GM_OK;
}

/* ---------------- step 1: dump state ---------------- */

/* One block of a segment: its address (2.0 layout: computed), size, state. */
static int read_block(dev *d, size_t si, const pkl_value *bv, size_t bi, uint64_t *pos,
                      uint64_t end, uint64_t seg_stream, gm_err *err)
{
    uint64_t size, addr = *pos, req;
    const char *state = pkl_dict_str(bv, "state");
    if (!pkl_is(bv, PKL_DICT) || !pkl_dict_u64(bv, "size", &size) || !state)
        return gm_errf(err, GM_EINVAL,
                       "%s: segment %zu, block %zu: not a dict with 'size' and 'state'; this is "
                       "not a PyTorch memory snapshot (see traces/SNAPSHOTS.md)",
                       d->name, si, bi);
    if (pkl_dict_get(bv, "address") && (!pkl_dict_u64(bv, "address", &addr) || addr != *pos))
        return gm_errf(err, GM_EINVAL,
                       "%s: segment %zu, block %zu starts at 0x%" PRIx64 " but the blocks before "
                       "it end at 0x%" PRIx64 "; blocks must cover their segment contiguously",
                       d->name, si, bi, addr, *pos);
    if (size > end - *pos)
        return gm_errf(err, GM_EINVAL,
                       "%s: segment %zu, block %zu (%" PRIu64 " bytes) ends beyond its segment; "
                       "the snapshot is damaged",
                       d->name, si, bi, size);
    *pos += size;
    if (!strncmp(state, "inactive", 8)) return GM_OK;
    if (strncmp(state, "active", 6))
        return gm_errf(err, GM_EINVAL,
                       "%s: segment %zu, block %zu: unknown state '%s' (expected "
                       "active_allocated, active_awaiting_free or inactive)",
                       d->name, si, bi, state);
    if (!pkl_dict_u64(bv, "requested_size", &req))
        req = size; /* very old snapshots: only the block size */
    if (req > size || req == 0)
        return gm_errf(err, GM_EINVAL,
                       "%s: segment %zu, block %zu: requested_size %" PRIu64 " does not fit its "
                       "block of %" PRIu64 " bytes",
                       d->name, si, bi, req, size);
    uint32_t idx;
    if (new_blk(d, addr, req, size, seg_stream, &idx, err)) return err->code;
    d->b[idx].at_dump = 1;
    d->b[idx].frames = pkl_dict_get(bv, "frames");
    if (gm_addrmap_get(&d->live, gm_addrmap_key(addr)))
        return gm_errf(err, GM_EINVAL, "%s: two live blocks at address 0x%" PRIx64, d->name, addr);
    return gm_addrmap_put(&d->live, gm_addrmap_key(addr), idx) ? oom_err(err) : GM_OK;
}

/* segment_pool_id / pool_id: PyTorch's MempoolId_t, a pair of ints; absent
 * (PyTorch 2.0) = (0, 0), the default pools. */
static int read_pool_id(const pkl_value *v, uint64_t pid[2])
{
    pid[0] = pid[1] = 0;
    if (!v || pkl_is(v, PKL_NONE)) return GM_OK;
    if (!pkl_is_seq(v) || pkl_len(v) != 2) return GM_EINVAL;
    for (size_t i = 0; i < 2; i++) {
        int64_t x;
        if (!pkl_as_int(pkl_item(v, i), &x) || x < 0) return GM_EINVAL;
        pid[i] = (uint64_t)x;
    }
    return GM_OK;
}

static int read_segment(dev *d, const pkl_value *sv, size_t si, gm_err *err)
{
    uint64_t addr, total, stream = 0;
    const pkl_value *blocks = pkl_dict_get(sv, "blocks");
    if (!pkl_dict_u64(sv, "address", &addr) || !pkl_dict_u64(sv, "total_size", &total) ||
        !pkl_is_seq(blocks))
        return gm_errf(err, GM_EINVAL,
                       "%s: segment %zu has no 'address', 'total_size' or 'blocks'; this is not "
                       "a PyTorch memory snapshot (see traces/SNAPSHOTS.md)",
                       d->name, si);
    if (total == 0 || total > GM_TRACE_MAX_SIZE || addr > MAX_ADDR - total)
        return gm_errf(err, GM_EINVAL,
                       "%s: segment %zu: address 0x%" PRIx64 " and total_size %" PRIu64
                       " are out of range (size 1 B to 2^48, below 2^64); the snapshot is damaged",
                       d->name, si, addr, total);
    pkl_dict_u64(sv, "stream", &stream);
    const char *type = pkl_dict_str(sv, "segment_type");
    int small = type ? !strcmp(type, "small") : total <= GM_PT_SMALL_BUFFER;
    bool expandable = false;
    pkl_as_bool(pkl_dict_get(sv, "is_expandable"), &expandable);
    uint64_t pid[2] = {0, 0};
    if (read_pool_id(pkl_dict_get(sv, "segment_pool_id"), pid) != GM_OK)
        return gm_errf(err, GM_EINVAL,
                       "%s: segment %zu: segment_pool_id is not a pair of non-negative ints; "
                       "the snapshot is damaged",
                       d->name, si);
    uint64_t pos = addr;
    for (size_t i = 0; i < pkl_len(blocks); i++)
        if (read_block(d, si, pkl_item(blocks, i), i, &pos, addr + total, stream, err))
            return err->code;
    if (pos - addr != total)
        return gm_errf(err, GM_EINVAL,
                       "%s: segment %zu at 0x%" PRIx64 ": its blocks add up to %" PRIu64
                       " bytes but total_size is %" PRIu64 "; the snapshot is damaged",
                       d->name, si, addr, pos - addr, total);
    if (expandable) /* a mapped range of an expandable segment (import_xseg.c) */
        return gm_imp_xr_add_dump(d, addr, total, stream, small, pid[0], pid[1], err);
    if (gm_addrmap_get(&d->segmap, gm_addrmap_key(addr)))
        return gm_errf(err, GM_EINVAL, "%s: two segments at address 0x%" PRIx64, d->name, addr);
    uint32_t idx = 0;
    int rc = new_seg(d, addr, total, stream, small, pid[0], pid[1], &idx, err);
    if (rc) return rc;
    return gm_addrmap_put(&d->segmap, gm_addrmap_key(addr), idx) ? oom_err(err) : GM_OK;
}

static int read_segments(dev *d, const pkl_value *segs, gm_import_trace *t, gm_err *err)
{
    for (size_t i = 0; i < pkl_len(segs); i++) {
        const pkl_value *sv = pkl_item(segs, i);
        int64_t devno = 0;
        if (pkl_dict_get(sv, "device") && !pkl_dict_int(sv, "device", &devno))
            return gm_errf(err, GM_EINVAL, "%s: segment %zu: 'device' is not an int", d->name, i);
        if (devno != d->device) continue;
        uint64_t total = 0;
        pkl_dict_u64(sv, "total_size", &total);
        if (read_segment(d, sv, i, err)) return err->code;
        t->dump_segments++;
        t->dump_reserved_bytes += total;
    }
    return GM_OK;
}

/* ---------------- step 1b: trace entries ---------------- */

static int action_of(const char *s)
{
    for (int a = 0; a < GM_TA_OTHER; a++)
        if (!strcmp(s, action_names[a])) return a;
    return GM_TA_OTHER;
}

/* A trace entry's fields, found in one walk of its keys: a lookup for
 * each field walked them once per field, and the importer reads a
 * million entries and more. Keys are unique, so each field is what
 * pkl_dict_get would give. */
typedef struct entry_fields {
    const pkl_value *action, *frames, *stream, *addr, *size, *device_free, *pool_id, *time_us;
} entry_fields;

static int key_is(const pkl_value *k, const char *name, size_t n)
{
    size_t len;
    const char *s = pkl_is(k, PKL_STR) ? pkl_as_str(k, &len) : NULL;
    return s && len == n && !memcmp(s, name, n);
}

static void entry_fields_of(const pkl_value *ev, entry_fields *f)
{
    static const struct {
        const char *name;
        size_t len, off;
    } known[] = {
#define F(x) {#x, sizeof #x - 1, offsetof(entry_fields, x)}
        F(action), F(frames), F(stream), F(addr), F(size), F(device_free), F(pool_id), F(time_us),
#undef F
    };
    memset(f, 0, sizeof *f);
    size_t n = pkl_is(ev, PKL_DICT) ? pkl_len(ev) : 0;
    for (size_t i = 0; i < n; i++) {
        const pkl_entry *x = pkl_dict_entry(ev, i);
        for (size_t j = 0; j < sizeof known / sizeof known[0]; j++)
            if (key_is(x->key, known[j].name, known[j].len)) {
                memcpy((char *)f + known[j].off, &x->value, sizeof x->value);
                break;
            }
    }
}

static int read_entry(dev *d, const pkl_value *ev, size_t k, ent *e, gm_err *err)
{
    entry_fields f;
    entry_fields_of(ev, &f);
    const char *act = pkl_is(f.action, PKL_STR) ? pkl_as_str(f.action, NULL) : NULL;
    if (!act)
        return gm_errf(err, GM_EINVAL,
                       "%s: device_traces[%d][%zu] has no 'action'; this is not a PyTorch memory "
                       "snapshot trace entry (see traces/SNAPSHOTS.md)",
                       d->name, d->device, k);
    memset(e, 0, sizeof *e);
    e->action = (uint8_t)action_of(act);
    e->blk = NONE;
    e->frames = f.frames;
    pkl_as_u64(f.stream, &e->stream);
    int has_addr = pkl_as_u64(f.addr, &e->addr);
    int has_size = pkl_as_u64(f.size, &e->size);
    if (e->action == GM_TA_OOM)
        pkl_as_u64(f.device_free, &e->device_free);
    else if (e->action < GM_TA_SNAPSHOT && (!has_addr || !has_size))
        return gm_errf(err, GM_EINVAL,
                       "%s: device_traces[%d][%zu] (%s) needs a non-negative int 'addr' and "
                       "'size'; the snapshot is damaged",
                       d->name, d->device, k, act);
    /* a 0-byte segment_free/unmap would rebuild a 0-byte segment */
    int needs_size = e->action == GM_TA_ALLOC ||
                     (e->action >= GM_TA_SEGMENT_ALLOC && e->action <= GM_TA_SEGMENT_UNMAP);
    if ((needs_size && e->size == 0) || e->size > GM_TRACE_MAX_SIZE || e->addr > MAX_ADDR - e->size)
        return gm_errf(err, GM_EINVAL,
                       "%s: device_traces[%d][%zu] (%s): size %" PRIu64 " at 0x%" PRIx64
                       " is out of range (1 B to 2^48, below 2^64); the snapshot is damaged",
                       d->name, d->device, k, act, e->size, e->addr);
    uint64_t pid[2];
    if (f.pool_id) {
        if (read_pool_id(f.pool_id, pid) != GM_OK)
            return gm_errf(err, GM_EINVAL,
                           "%s: device_traces[%d][%zu]: pool_id is not a pair of non-negative "
                           "ints; the snapshot is damaged",
                           d->name, d->device, k);
        e->pid0 = pid[0];
        e->pid1 = pid[1];
        e->has_pid = 1;
    }
    int64_t t;
    if (pkl_as_int(f.time_us, &t) && t >= 0)
        e->time_us = (uint64_t)t;
    else
        d->has_time = 0;
    return GM_OK;
}

static int read_entries(dev *d, const pkl_value *list, gm_import_trace *t, gm_err *err)
{
    size_t n = pkl_len(list);
    if (n > MAX_ENTRIES)
        return gm_errf(err, GM_EINVAL, "%s: %zu trace entries is more than gmsim imports", d->name,
                       n);
    d->e = calloc(n ? n : 1, sizeof *d->e);
    if (!d->e) return oom_err(err);
    d->ne = n;
    d->has_time = n > 0;
    for (size_t k = 0; k < n; k++) {
        if (read_entry(d, pkl_item(list, k), k, &d->e[k], err)) return err->code;
        t->n_action[d->e[k].action]++;
    }
    t->n_entries = n;
    return GM_OK;
}

/* ---------------- step 2: undo the trace ---------------- */

int gm_imp_undo_err(const dev *d, size_t k, const char *what, gm_err *err)
{
    const ent *e = &d->e[k];
    return gm_errf(err, GM_EINVAL,
                   "%s: device %d, entry %zu (%s of %" PRIu64 " bytes at 0x%" PRIx64 "): %s; the "
                   "trace does not agree with the dump-time segments, so the memory that existed "
                   "before the first entry cannot be rebuilt",
                   d->name, d->device, k, action_names[e->action], e->size, e->addr, what);
}

#define undo_err gm_imp_undo_err

static int undo_block(dev *d, size_t k, gm_err *err)
{
    ent *e = &d->e[k];
    uint64_t key = gm_addrmap_key(e->addr), *p = gm_addrmap_get(&d->live, key);
    if (e->action == GM_TA_FREE_COMPLETED) {
        if (p) return undo_err(d, k, "a block at that address is still live after it", err);
        uint32_t idx;
        if (new_blk(d, e->addr, e->size, 0, e->stream, &idx, err)) return err->code;
        d->b[idx].freecomp_ent = (uint32_t)k;
        e->blk = idx;
        return gm_addrmap_put(&d->live, key, idx) ? oom_err(err) : GM_OK;
    }
    if (!p) return undo_err(d, k, "no block at that address is live after it", err);
    blk *b = &d->b[*p];
    e->blk = (uint32_t)*p;
    if (b->requested != e->size)
        return undo_err(d, k, "the block live after it has another requested size", err);
    if (e->action == GM_TA_FREE_REQUESTED) {
        b->freereq_ent = (uint32_t)k;
        return GM_OK;
    }
    b->alloc_ent = (uint32_t)k; /* GM_TA_ALLOC: the block did not exist before */
    gm_addrmap_del(&d->live, key, NULL);
    return GM_OK;
}

/* A classic segment's segment_alloc / segment_free, undone. */
static int undo_segment(dev *d, size_t k, gm_err *err)
{
    ent *e = &d->e[k];
    uint64_t key = gm_addrmap_key(e->addr), *p = gm_addrmap_get(&d->segmap, key);
    if (e->action == GM_TA_SEGMENT_ALLOC) {
        if (!p || d->s[*p].size != e->size)
            return undo_err(d, k, "no segment of that address and size exists after it", err);
        d->s[*p].live = 0;
        gm_addrmap_del(&d->segmap, key, NULL);
        return GM_OK;
    }
    if (p) return undo_err(d, k, "a segment at that address still exists after it", err);
    uint32_t idx = 0;
    /* a segment freed in the trace: its pool from its size (kSmallBuffer);
     * its private pool, if the entry recorded one */
    int rc = new_seg(d, e->addr, e->size, e->stream, e->size <= GM_PT_SMALL_BUFFER, e->pid0,
                     e->pid1, &idx, err);
    if (rc) return rc;
    return gm_addrmap_put(&d->segmap, key, idx) ? oom_err(err) : GM_OK;
}

static int undo_trace(dev *d, gm_err *err)
{
    for (size_t k = d->ne; k-- > 0;) {
        int a = d->e[k].action, rc = GM_OK;
        if (a == GM_TA_ALLOC || a == GM_TA_FREE_REQUESTED || a == GM_TA_FREE_COMPLETED)
            rc = undo_block(d, k, err);
        else if (a == GM_TA_SEGMENT_ALLOC || a == GM_TA_SEGMENT_FREE)
            rc = undo_segment(d, k, err);
        else if (a == GM_TA_SEGMENT_MAP || a == GM_TA_SEGMENT_UNMAP)
            rc = gm_imp_xr_undo(d, k, err);
        if (rc) return rc;
    }
    return GM_OK;
}

/* ---------------- step 3: pre-existing block sizes ---------------- */

typedef struct keyed {
    uint64_t addr;
    uint32_t idx;
} keyed;

static int cmp_keyed(const void *x, const void *y)
{
    uint64_t a = ((const keyed *)x)->addr, b = ((const keyed *)y)->addr;
    return a < b ? -1 : a > b;
}

/* The live entries of an address map as (addr, index) pairs sorted by address. */
static keyed *sorted_map(const gm_addrmap *m, size_t *n)
{
    keyed *k = malloc((m->count ? m->count : 1) * sizeof *k);
    size_t j = 0;
    if (!k) return NULL;
    for (size_t i = 0; i <= m->mask; i++)
        if (m->slots[i].key) k[j++] = (keyed){m->slots[i].key - 1, (uint32_t)m->slots[i].val};
    if (j > 1) qsort(k, j, sizeof *k, cmp_keyed);
    *n = j;
    return k;
}

/* Memory that existed before the first entry and can hold blocks: the
 * classic segments and the mapped ranges of expandable ones. */
typedef struct span {
    uint64_t addr, size;
    uint8_t small, expandable;
} span;

static int cmp_span(const void *x, const void *y)
{
    uint64_t a = ((const span *)x)->addr, b = ((const span *)y)->addr;
    return a < b ? -1 : a > b;
}

static span *initial_spans(const dev *d, const keyed *sg, size_t ns, size_t *n)
{
    span *v = malloc((ns + d->nx + 1) * sizeof *v);
    if (!v) return NULL;
    for (size_t i = 0; i < ns; i++) {
        const seg *s = &d->s[sg[i].idx];
        v[i] = (span){s->addr, s->size, s->small, 0};
    }
    for (size_t i = 0; i < d->nx; i++)
        v[ns + i] = (span){d->x[i].addr, d->x[i].size, d->x[i].small, 1};
    *n = ns + d->nx;
    if (*n > 1) qsort(v, *n, sizeof *v, cmp_span);
    return v;
}

static int place_err(const dev *d, const blk *b, const char *what, gm_err *err)
{
    return gm_errf(err, GM_EINVAL,
                   "%s: device %d: the block at 0x%" PRIx64 " (%" PRIu64 " bytes requested), "
                   "live before the first entry, %s; the trace does not agree with the dump-time "
                   "segments",
                   d->name, d->device, b->addr, b->requested, what);
}

/*
 * Give every pre-existing block a block size and check the rebuilt state is
 * a carving of its segments. Blocks live at dump carry theirs; blocks freed
 * in the trace but never allocated in it do not: requested rounded to 512
 * (round_size without roundup_power2_divisions), plus, in a large-pool
 * segment, a tail of <= 1 MiB up to the next block or the segment end:
 * PyTorch splits a large block only when more than 1 MiB would remain
 * (should_split: remaining > kSmallSize), so no free block that short exists
 * in the large pool and the tail is part of the block. With expandable
 * segments configured, should_split splits at >= 512 B remaining in every
 * pool (it tests the setting, not the segment), so there is no tail.
 */
static int size_blocks(dev *d, const span *sp, size_t ns, const keyed *bk, size_t nb,
                       gm_import_trace *t, gm_err *err)
{
    size_t j = 0;
    for (size_t i = 0; i < nb; i++) {
        blk *b = &d->b[bk[i].idx];
        while (j < ns && sp[j].addr + sp[j].size <= b->addr)
            j++;
        const span *s = j < ns ? &sp[j] : NULL;
        if (!s || b->addr < s->addr)
            return place_err(d, b, "lies in no segment that existed then", err);
        uint64_t next = s->addr + s->size;
        if (i + 1 < nb && d->b[bk[i + 1].idx].addr < next) next = d->b[bk[i + 1].idx].addr;
        uint64_t size = b->block_size ? b->block_size : round512(b->requested);
        if (size > next - b->addr)
            return place_err(d, b, "overlaps the next block or the segment end", err);
        if (!b->block_size) {
            uint64_t gap = next - (b->addr + size);
            if (!s->small && !s->expandable && !d->expandable_conf && gap <= GM_PT_SMALL_SIZE)
                size += gap;
            b->block_size = size;
            t->init_guessed_sizes++;
        }
    }
    return GM_OK;
}

/* The rebuilt segments and mapped ranges (sorted by address) must not
 * overlap: a segment_free or segment_unmap undone inside memory that exists
 * after it would otherwise give the replay the same memory twice. */
static int check_spans(const dev *d, const span *sp, size_t ns, gm_err *err)
{
    for (size_t i = 1; i < ns; i++) {
        const span *a = &sp[i - 1], *b = &sp[i];
        if (a->addr + a->size > b->addr)
            return gm_errf(err, GM_EINVAL,
                           "%s: device %d: the segments at 0x%" PRIx64 " (%" PRIu64
                           " bytes) and 0x%" PRIx64 " (%" PRIu64
                           " bytes), both there before the first entry, overlap; the trace does "
                           "not agree with the dump-time segments",
                           d->name, d->device, a->addr, a->size, b->addr, b->size);
    }
    return GM_OK;
}

static int by_row_addr(const void *x, const void *y)
{
    const gm_init_row *a = x, *b = y;
    return a->addr < b->addr ? -1 : a->addr > b->addr;
}

/* An expandable segment's row is its reserved range, from its lowest to its
 * highest mapped page (whole pages: import_xseg.c), which check_spans (the
 * mapped bytes) does not see: in a real snapshot PyTorch reserved those
 * addresses, so no other segment lies there, and one that does is a damaged
 * snapshot, not a second allocation of the same memory. */
static int check_segment_rows(const dev *d, const gm_init_row *rows, size_t n, gm_err *err)
{
    size_t k = 0;
    gm_init_row *v = malloc((n ? n : 1) * sizeof *v);
    if (!v) return oom_err(err);
    for (size_t i = 0; i < n; i++)
        if (rows[i].kind == GM_INIT_SEGMENT) v[k++] = rows[i];
    if (k > 1) qsort(v, k, sizeof *v, by_row_addr);
    int rc = GM_OK;
    for (size_t i = 1; i < k && rc == GM_OK; i++) {
        const gm_init_row *a = &v[i - 1], *b = &v[i];
        if (a->addr + a->size > b->addr || a->addr + a->size < a->addr)
            rc = gm_errf(err, GM_EINVAL,
                         "%s: device %d: the %ssegment at 0x%" PRIx64 " (%" PRIu64
                         " bytes%s) and the %ssegment at 0x%" PRIx64
                         " overlap before the first entry; the snapshot is damaged (dump it "
                         "again)",
                         d->name, d->device, a->expandable ? "expandable " : "", a->addr, a->size,
                         a->expandable ? ", its reserved range in whole pages" : "",
                         b->expandable ? "expandable " : "", b->addr);
    }
    free(v);
    return rc;
}

/* /initial_state: classic segments, expandable segments with their mapped
 * ranges, then blocks, each by address. Returns the bytes reserved. */
static int build_initial(dev *d, gm_import_trace *t, gm_err *err)
{
    size_t ns = 0, nb = 0, nspan = 0;
    keyed *sg = sorted_map(&d->segmap, &ns), *bk = sorted_map(&d->live, &nb);
    span *sp = sg ? initial_spans(d, sg, ns, &nspan) : NULL;
    int rc = !sg || !bk || !sp ? oom_err(err) : check_spans(d, sp, nspan, err);
    if (rc == GM_OK) rc = size_blocks(d, sp, nspan, bk, nb, t, err);
    if (rc == GM_OK && !(t->init = calloc(ns + 2 * d->nx + nb + 1, sizeof *t->init)))
        rc = oom_err(err);
    for (size_t i = 0; rc == GM_OK && i < ns; i++) {
        const seg *s = &d->s[sg[i].idx];
        t->init[t->n_init++] = (gm_init_row){.addr = s->addr,
                                             .size = s->size,
                                             .stream = s->stream,
                                             .kind = GM_INIT_SEGMENT,
                                             .pool = s->small ? GM_POOL_SMALL : GM_POOL_LARGE,
                                             .pool_id0 = s->pid0,
                                             .pool_id1 = s->pid1};
        t->init_segments++;
        t->init_segment_bytes += s->size;
        t->init_private += s->pid0 || s->pid1;
    }
    if (rc == GM_OK) gm_imp_xr_rows(d, t->init, &t->n_init, t);
    if (rc == GM_OK) rc = check_segment_rows(d, t->init, t->n_init, err);
    for (size_t i = 0; rc == GM_OK && i < nb; i++) {
        const blk *b = &d->b[bk[i].idx];
        t->init[t->n_init++] = (gm_init_row){.addr = b->addr,
                                             .size = b->requested,
                                             .block_size = b->block_size,
                                             .stream = b->stream,
                                             .kind = GM_INIT_BLOCK,
                                             .category = b->category,
                                             .site = b->site};
        t->init_blocks++;
        t->init_block_bytes += b->requested;
        t->cat_init[b->category]++;
    }
    free(sg);
    free(bk);
    free(sp);
    return rc;
}

/* ---------------- step 3b: call sites ---------------- */

/* Every entry's site, every block's (its alloc entry's, else the dump's
 * frames of a block alive before the trace), into t->sites. */
static int assign_sites(dev *d, gm_import_trace *t, gm_err *err)
{
    gm_imp_sites s;
    if (gm_imp_sites_init(&s)) return oom_err(err);
    int rc = GM_OK;
    for (size_t k = 0; k < d->ne && rc == GM_OK; k++)
        rc = gm_imp_site_of(&s, d->e[k].frames, &d->e[k].site);
    for (size_t i = 0; i < d->nb && rc == GM_OK; i++) {
        blk *b = &d->b[i];
        if (b->alloc_ent != NONE)
            b->site = d->e[b->alloc_ent].site;
        else
            rc = gm_imp_site_of(&s, b->frames, &b->site);
    }
    if (rc) {
        gm_imp_sites_free(&s);
        return oom_err(err);
    }
    t->sites = s.rows, t->n_sites = s.n; /* the strings move to t */
    s.rows = NULL, s.n = 0;
    gm_imp_sites_free(&s);
    return GM_OK;
}

/* ---------------- step 4: phases and categories ---------------- */

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !memcmp(s + n - m, suffix, m);
}

enum { FB_BWD = 1, FB_OPT = 2, FB_FWD = 4, FB_ZG = 8, FB_COPY = 16, FB_PARAM = 32 };

/* What one frame says (FB_*). Rules: IMPORT.md. */
static unsigned frame_flags(const pkl_value *f)
{
    const char *name = pkl_dict_str(f, "name"), *file = pkl_dict_str(f, "filename");
    unsigned fl = 0;
    if (!name) return 0;
    if (strstr(name, "autograd::Engine") || strstr(name, "PythonEngine") ||
        !strncmp(name, "torch::autograd::Node::operator()", 33))
        fl |= FB_BWD;
    if (strstr(name, "_to_copy")) fl |= FB_COPY;
    if (!file || !ends_with(file, ".py")) return fl;
    const char *base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
    if (!strcmp(name, "backward") &&
        (strstr(file, "torch/autograd/") || ends_with(file, "torch/_tensor.py")))
        fl |= FB_BWD;
    else if (!strcmp(name, "zero_grad"))
        fl |= FB_OPT | FB_ZG;
    else if (strstr(file, "/optim/") || (!strcmp(name, "step") && strstr(base, "optim")))
        fl |= FB_OPT;
    else if (!strcmp(name, "forward"))
        fl |= FB_FWD;
    else if (!strcmp(name, "_apply") && ends_with(file, "nn/modules/module.py"))
        fl |= FB_PARAM;
    return fl;
}

/* Phase and hints of one stack (innermost frame first), packed as
 * phase | zero_grad << 4 | hints << 8. Frame dicts are shared through the
 * pickle memo (a few hundred distinct ones for thousands of entries), so
 * their flags are computed once and kept in `seen`. */
static int classify(const pkl_value *frames, gm_addrmap *seen, unsigned *out)
{
    unsigned fl = 0;
    for (size_t i = 0; i < pkl_len(frames); i++) {
        const pkl_value *f = pkl_item(frames, i);
        uint64_t key = gm_addrmap_key((uint64_t)(uintptr_t)f), *p = gm_addrmap_get(seen, key);
        unsigned x = p ? (unsigned)*p : frame_flags(f);
        if (!p && gm_addrmap_put(seen, key, x)) return GM_ENOMEM;
        fl |= x;
    }
    unsigned phase = fl & FB_BWD   ? GM_PHASE_BACKWARD
                     : fl & FB_OPT ? GM_PHASE_OPTIMIZER
                     : fl & FB_FWD ? GM_PHASE_FORWARD
                                   : GM_PHASE_UNKNOWN;
    unsigned hint = (fl & FB_COPY ? HINT_COPY : 0) | (fl & FB_PARAM ? HINT_PARAM : 0);
    *out = phase | (fl & FB_ZG ? 1u : 0u) << 4 | hint << 8;
    return GM_OK;
}

/* external_annotations: Optimizer.step / Optimizer.zero_grad ranges of this device. */
static int read_ranges(dev *d, const pkl_value *ann, gm_err *err)
{
    uint64_t open[2] = {0, 0};
    int is_open[2] = {0, 0};
    for (size_t i = 0; i < pkl_len(ann); i++) {
        const pkl_value *a = pkl_item(ann, i);
        const char *stage = pkl_dict_str(a, "stage"), *name = pkl_dict_str(a, "name");
        int64_t devno = d->device, t;
        pkl_dict_int(a, "device", &devno);
        if (!stage || !name || devno != d->device || !pkl_dict_int(a, "time_us", &t) || t < 0)
            continue;
        int z = !strncmp(name, "Optimizer.zero_grad", 19);
        if (!z && strncmp(name, "Optimizer.step", 14)) continue;
        if (!strcmp(stage, "START")) {
            open[z] = (uint64_t)t;
            is_open[z] = 1;
        } else if (is_open[z] && (uint64_t)t >= open[z]) {
            if (grow(&d->ranges, &d->cranges, d->nranges + 1, sizeof *d->ranges))
                return oom_err(err);
            d->ranges[d->nranges++] = (range){open[z], (uint64_t)t, (uint8_t)z};
            is_open[z] = 0;
        }
    }
    return GM_OK;
}

static int cmp_range(const void *x, const void *y)
{
    uint64_t a = ((const range *)x)->start_us, b = ((const range *)y)->start_us;
    return a < b ? -1 : a > b;
}

/* Phase of every entry: from its stack (cached per shared frames list), else
 * from an Optimizer.* annotation range covering its time. */
static int entry_phases(dev *d, gm_err *err)
{
    gm_addrmap cache, seen; /* frames list -> classification; frame dict -> FB_* */
    int rc = GM_OK;
    if (gm_addrmap_init(&cache, 1024) || gm_addrmap_init(&seen, 1024)) {
        gm_addrmap_free(&cache);
        return oom_err(err);
    }
    if (d->nranges) qsort(d->ranges, d->nranges, sizeof *d->ranges, cmp_range);
    size_t r = 0;
    for (size_t k = 0; k < d->ne && rc == GM_OK; k++) {
        ent *e = &d->e[k];
        unsigned c = 0;
        if (e->frames && pkl_len(e->frames)) {
            uint64_t key = gm_addrmap_key((uint64_t)(uintptr_t)e->frames);
            uint64_t *p = gm_addrmap_get(&cache, key);
            if (p)
                c = (unsigned)*p;
            else if (classify(e->frames, &seen, &c) || gm_addrmap_put(&cache, key, c))
                rc = oom_err(err);
        }
        e->phase = c & 15;
        e->zero_grad = (c >> 4) & 1;
        e->hint = (uint8_t)(c >> 8);
        if (e->phase != GM_PHASE_UNKNOWN || !d->has_time) continue;
        while (r < d->nranges && d->ranges[r].end_us < e->time_us)
            r++;
        for (size_t q = r; q < d->nranges && d->ranges[q].start_us <= e->time_us; q++)
            if (d->ranges[q].end_us >= e->time_us) {
                e->phase = GM_PHASE_OPTIMIZER;
                e->zero_grad = d->ranges[q].zero_grad;
                break;
            }
    }
    gm_addrmap_free(&cache);
    gm_addrmap_free(&seen);
    return rc;
}

/* Regions: maximal runs of entries whose known phase is the same; entries of
 * unknown phase belong to the region they fall in. */
static int regions(dev *d, gm_err *err)
{
    uint32_t r = 0;
    uint8_t last = GM_PHASE_UNKNOWN;
    d->region_phase = malloc(d->ne + 1);
    if (!d->region_phase) return oom_err(err);
    d->region_phase[0] = GM_PHASE_UNKNOWN;
    for (size_t k = 0; k < d->ne; k++) {
        ent *e = &d->e[k];
        if (e->phase != GM_PHASE_UNKNOWN && e->phase != last) {
            if (last != GM_PHASE_UNKNOWN) r++;
            last = e->phase;
            d->region_phase[r] = last;
        }
        e->region = r;
    }
    return GM_OK;
}

/* Phase of the free of a block: its free_requested's, else its free_completed's. */
static const ent *free_entry(const dev *d, const blk *b)
{
    uint32_t k = b->freereq_ent != NONE ? b->freereq_ent : b->freecomp_ent;
    return k == NONE ? NULL : &d->e[k];
}

/* Category of a block allocated in the trace. Rules: IMPORT.md. */
static uint8_t category_allocated(const dev *d, const blk *b)
{
    const ent *a = &d->e[b->alloc_ent], *f = free_entry(d, b);
    int same_region = f && f->region == a->region;
    if (a->hint & HINT_PARAM) return GM_CAT_PARAMETER;
    switch (a->phase) {
    case GM_PHASE_OPTIMIZER:
        return same_region ? GM_CAT_TEMPORARY : GM_CAT_OPTIMIZER_STATE;
    case GM_PHASE_BACKWARD:
        return same_region ? GM_CAT_TEMPORARY : GM_CAT_GRADIENT;
    case GM_PHASE_FORWARD:
        if (same_region) return GM_CAT_TEMPORARY;
        return f && d->region_phase[f->region] == GM_PHASE_BACKWARD ? GM_CAT_ACTIVATION
                                                                    : GM_CAT_UNKNOWN;
    default:
        return a->hint & HINT_COPY ? GM_CAT_INPUT : GM_CAT_UNKNOWN;
    }
}

/* Category of a block that existed before the first entry. */
static uint8_t category_preexisting(const dev *d, const blk *b, int trace_has_blocks)
{
    const ent *f = free_entry(d, b);
    if (!trace_has_blocks) return GM_CAT_UNKNOWN; /* no trace: nothing is known about its life */
    if (!f) return GM_CAT_PARAMETER;              /* alive across the whole trace */
    uint8_t ph = f->phase != GM_PHASE_UNKNOWN ? f->phase : d->region_phase[f->region];
    if (f->zero_grad) return GM_CAT_GRADIENT;
    if (ph == GM_PHASE_OPTIMIZER) return GM_CAT_OPTIMIZER_STATE;
    return ph == GM_PHASE_BACKWARD ? GM_CAT_ACTIVATION : GM_CAT_UNKNOWN;
}

static int categorize(dev *d, const gm_import_trace *t, gm_err *err)
{
    if (entry_phases(d, err) || regions(d, err)) return err->code;
    int has_blocks = t->n_action[GM_TA_ALLOC] + t->n_action[GM_TA_FREE_COMPLETED] +
                         t->n_action[GM_TA_FREE_REQUESTED] >
                     0;
    for (size_t i = 0; i < d->nb; i++) {
        blk *b = &d->b[i];
        b->category = b->alloc_ent != NONE ? category_allocated(d, b)
                                           : category_preexisting(d, b, has_blocks);
    }
    return GM_OK;
}

/* ---------------- step 5: events, markers, metadata ---------------- */

static int add_marker(gm_import_trace *t, size_t *cap, uint64_t t_ns, int kind, const char *name,
                      gm_err *err)
{
    if (grow(&t->markers, cap, t->n_markers + 1, sizeof *t->markers)) return oom_err(err);
    gm_marker *m = &t->markers[t->n_markers++];
    memset(m, 0, sizeof *m);
    m->t_ns = t_ns;
    m->kind = (uint8_t)kind;
    snprintf(m->name, sizeof m->name, "%s", name);
    return GM_OK;
}

static int time_ns(dev *d, size_t k, uint64_t *prev_us, gm_import_trace *t, uint64_t *out,
                   gm_err *err)
{
    if (!d->has_time) {
        *out = (uint64_t)k * 1000; /* order-only time: one entry per microsecond */
        return GM_OK;
    }
    uint64_t us = d->e[k].time_us;
    if (us < *prev_us) { /* a clock step backwards: keep the order, clamp the time */
        us = *prev_us;
        t->time_repairs++;
    }
    *prev_us = us;
    if (us - d->t0_us > UINT64_MAX / 1000)
        return gm_errf(err, GM_EINVAL, "%s: entry %zu: time_us spans more than 500 years", d->name,
                       k);
    *out = (us - d->t0_us) * 1000;
    return GM_OK;
}

/* A free_requested (entry k) whose free_completed is not the next entry:
 * the block was used on other streams (record_stream) and is reused only
 * when they catch up, or never within the trace. */
static int deferred(const blk *b, size_t k)
{
    return b->freereq_ent == k && (b->freecomp_ent == NONE || b->freecomp_ent != k + 1);
}

/* One entry -> an event, a marker or nothing; the last entry of an
 * empty_cache burst is followed by an empty_cache event (import_release.c). */
static int emit_entry(dev *d, size_t k, uint64_t t_ns, gm_import_trace *t, size_t *mcap,
                      gm_err *err)
{
    const ent *e = &d->e[k];
    gm_event ev = {.t_ns = t_ns,
                   .addr = e->addr,
                   .size = e->size,
                   .stream = e->stream,
                   .phase = e->phase,
                   .site = e->blk != NONE ? d->b[e->blk].site : e->site};
    char name[GM_MARKER_NAME_LEN];
    switch (e->action) {
    case GM_TA_ALLOC:
        ev.op = GM_OP_ALLOC;
        ev.category = d->b[e->blk].category;
        t->cat_allocs[ev.category]++;
        break;
    case GM_TA_FREE_COMPLETED: {
        const blk *b = &d->b[e->blk];
        ev.op = GM_OP_FREE;
        ev.category = b->category;
        if (b->freereq_ent != NONE) ev.phase = d->e[b->freereq_ent].phase;
        break;
    }
    case GM_TA_SEGMENT_ALLOC:
    case GM_TA_SEGMENT_FREE:
    case GM_TA_SEGMENT_MAP:
    case GM_TA_SEGMENT_UNMAP:
        ev.op = e->action == GM_TA_SEGMENT_ALLOC  ? GM_OP_SEGMENT_ALLOC
                : e->action == GM_TA_SEGMENT_FREE ? GM_OP_SEGMENT_FREE
                : e->action == GM_TA_SEGMENT_MAP  ? GM_OP_SEGMENT_MAP
                                                  : GM_OP_SEGMENT_UNMAP;
        ev.phase = GM_PHASE_UNKNOWN;
        break;
    case GM_TA_SNAPSHOT:
        return add_marker(t, mcap, t_ns, GM_MARK_INSTANT, "snapshot", err);
    case GM_TA_OOM:
        /* the allocation that failed, replayed as an attempt (FORMAT.md, op oom) */
        t->events[t->n_events++] = (gm_event){.t_ns = t_ns,
                                              .op = GM_OP_OOM,
                                              .addr = e->device_free,
                                              .size = e->size ? e->size : 1,
                                              .stream = e->stream,
                                              .phase = e->phase,
                                              .site = e->site};
        snprintf(name, sizeof name, "oom: %" PRIu64 " B requested, %" PRIu64 " B free", e->size,
                 e->device_free);
        return add_marker(t, mcap, t_ns, GM_MARK_INSTANT, name, err);
    case GM_TA_OTHER:
        t->skipped++;
        return GM_OK;
    default: { /* free_requested: the program let go; the block is reusable at free_completed */
        if (!deferred(&d->b[e->blk], k)) return GM_OK;
        ev.op = GM_OP_FREE_REQUESTED;
        ev.size = d->b[e->blk].requested;
        ev.category = d->b[e->blk].category;
        t->deferred_frees++;
        break;
    }
    }
    t->events[t->n_events++] = ev;
    if (e->burst_end == GM_BURST_EMPTY_CACHE)
        t->events[t->n_events++] = (gm_event){
            .t_ns = t_ns, .op = GM_OP_EMPTY_CACHE, .size = e->burst_bytes, .phase = e->phase};
    return GM_OK;
}

static int annotation_markers(dev *d, const pkl_value *ann, gm_import_trace *t, size_t *mcap,
                              gm_err *err)
{
    for (size_t i = 0; d->has_time && i < pkl_len(ann); i++) {
        const pkl_value *a = pkl_item(ann, i);
        const char *stage = pkl_dict_str(a, "stage"), *name = pkl_dict_str(a, "name");
        int64_t devno = d->device, us;
        pkl_dict_int(a, "device", &devno);
        if (!stage || !name || devno != d->device || !pkl_dict_int(a, "time_us", &us) || us < 0)
            continue;
        uint64_t t_ns = (uint64_t)us > d->t0_us ? ((uint64_t)us - d->t0_us) * 1000 : 0;
        int push = !strcmp(stage, "START");
        if (add_marker(t, mcap, t_ns, push ? GM_MARK_RANGE_PUSH : GM_MARK_RANGE_POP,
                       push ? name : "", err))
            return err->code;
    }
    return GM_OK;
}

static int emit(dev *d, const pkl_value *ann, gm_import_trace *t, gm_err *err)
{
    size_t nev = t->n_action[GM_TA_ALLOC] + t->n_action[GM_TA_FREE_COMPLETED] +
                 t->n_action[GM_TA_OOM] + t->n_empty_cache,
           mcap = 0;
    for (int a = GM_TA_SEGMENT_ALLOC; a <= GM_TA_SEGMENT_UNMAP; a++)
        nev += t->n_action[a];
    for (size_t i = 0; i < d->nb; i++)
        nev += d->b[i].freereq_ent != NONE && deferred(&d->b[i], d->b[i].freereq_ent);
    if (!(t->events = malloc((nev ? nev : 1) * sizeof *t->events))) return oom_err(err);
    d->t0_us = d->ne ? d->e[0].time_us : 0;
    uint64_t prev = d->t0_us, t_ns = 0;
    for (size_t k = 0; k < d->ne; k++)
        if (time_ns(d, k, &prev, t, &t_ns, err) || emit_entry(d, k, t_ns, t, &mcap, err))
            return err->code;
    for (size_t i = 0; i < d->nb; i++)
        t->live_at_end += d->b[i].at_dump;
    t->order_only_time = !d->has_time && d->ne > 0;
    return annotation_markers(d, ann, t, &mcap, err);
}

/* ---------------- allocator settings ---------------- */

static void append(char *buf, size_t len, const char *sep, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void append(char *buf, size_t len, const char *sep, const char *fmt, ...)
{
    size_t n = strlen(buf);
    if (n && n < len) n += (size_t)snprintf(buf + n, len - n, "%s", sep);
    if (n >= len) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + n, len - n, fmt, ap);
    va_end(ap);
}

/* roundup_power2_divisions {'1': d0, '2': d1, ... '32768': d15} -> divs[16]. */
static int read_divisions(const pkl_value *v, uint64_t *divs, gm_err *err)
{
    for (size_t i = 0; i < pkl_len(v); i++) {
        const pkl_entry *en = pkl_dict_entry(v, i);
        int64_t key = 0, val;
        const char *ks = pkl_as_str(en->key, NULL);
        if (ks)
            key = strtoll(ks, NULL, 10);
        else
            pkl_as_int(en->key, &key);
        if (key <= 0 || (key & (key - 1)) || key >= (1 << GM_PT_ROUNDUP_INTERVALS) ||
            !pkl_as_int(en->value, &val) || val < 0)
            return gm_errf(err, GM_EINVAL,
                           "allocator_settings: roundup_power2_divisions has an entry that is "
                           "not <power of two up to 32768>: <divisions>");
        divs[63 - __builtin_clzll((uint64_t)key)] = (uint64_t)val;
    }
    return GM_OK;
}

static void format_divisions(const uint64_t *divs, char *conf, size_t len)
{
    int all_same = 1, any = 0;
    for (int i = 0; i < GM_PT_ROUNDUP_INTERVALS; i++) {
        all_same &= divs[i] == divs[0];
        any |= divs[i] != 0;
    }
    if (!any) return;
    if (all_same) {
        append(conf, len, ",", "roundup_power2_divisions:%" PRIu64, divs[0]);
        return;
    }
    /* the first listed interval also covers the ones below it; unlisted ones are 0 */
    append(conf, len, ",", "roundup_power2_divisions:[1:%" PRIu64, divs[0]);
    for (int i = 1; i < GM_PT_ROUNDUP_INTERVALS; i++)
        if (divs[i]) append(conf, len, ",", "%d:%" PRIu64, 1 << i, divs[i]);
    append(conf, len, "", "]");
}

static int setting(const char *key, const pkl_value *v, gm_pt_conf *c, uint64_t *divs,
                   char *dropped, size_t dlen, gm_err *err)
{
    /* what snapshots record that does not change device memory (ALLOC_CONF.md):
     * locking, pinned host memory (max_round_threshold and max_cached_size
     * are the pinned allocator's, 2.11), reuse during graph capture */
    static const char *const host_only[] = {"pinned_num_register_threads",
                                            "pinned_use_cuda_host_register",
                                            "pinned_use_background_threads",
                                            "release_lock_on_cudamalloc",
                                            "graph_capture_record_stream_reuse",
                                            "max_round_threshold",
                                            "max_cached_size",
                                            "pinned_use_hip_host_register",
                                            "release_lock_on_hipmalloc"};
    int64_t i;
    double f;
    bool b;
    if (!strcmp(key, "PYTORCH_CUDA_ALLOC_CONF"))
        return GM_OK; /* the raw env string; the fields below are what was in force */
    if (!strcmp(key, "max_split_size") && pkl_as_int(v, &i)) {
        if (i > 0 && (uint64_t)i < UINT64_MAX / 2) /* -1: PyTorch's SIZE_MAX, unset */
            c->max_split_size = (uint64_t)i;
    } else if (!strcmp(key, "max_non_split_rounding_size") && pkl_as_int(v, &i)) {
        if (i > 0) c->max_non_split_rounding_size = (uint64_t)i;
    } else if (!strcmp(key, "garbage_collection_threshold") && pkl_as_double(v, &f)) {
        c->gc_threshold = f;
    } else if (!strcmp(key, "expandable_segments") && pkl_as_bool(v, &b)) {
        c->expandable_segments = b;
    } else if (!strcmp(key, "roundup_power2_divisions") && pkl_is(v, PKL_DICT)) {
        return read_divisions(v, divs, err);
    } else {
        int known = 0;
        for (size_t k = 0; k < sizeof host_only / sizeof *host_only; k++)
            known |= !strcmp(key, host_only[k]);
        append(dropped, dlen, ", ", "%s%s", key, known ? "" : " (unknown to gmsim)");
    }
    return GM_OK;
}

int gm_torch_settings_conf(const pkl_value *settings, char *conf, size_t conf_len, char *dropped,
                           size_t dropped_len, gm_err *err)
{
    gm_pt_conf c, check;
    uint64_t divs[GM_PT_ROUNDUP_INTERVALS] = {0};
    gm_pt_conf_default(&c);
    conf[0] = dropped[0] = 0;
    for (size_t i = 0; i < pkl_len(settings); i++) {
        const pkl_entry *en = pkl_dict_entry(settings, i);
        const char *key = pkl_as_str(en->key, NULL);
        if (key && setting(key, en->value, &c, divs, dropped, dropped_len, err)) return err->code;
    }
    if (c.max_split_size != UINT64_MAX)
        append(conf, conf_len, ",", "max_split_size_mb:%" PRIu64,
               (uint64_t)(c.max_split_size / GM_MiB));
    if (c.max_non_split_rounding_size != GM_PT_LARGE_BUFFER)
        append(conf, conf_len, ",", "max_non_split_rounding_mb:%" PRIu64,
               (uint64_t)(c.max_non_split_rounding_size / GM_MiB));
    if (c.gc_threshold > 0)
        append(conf, conf_len, ",", "garbage_collection_threshold:%.15g", c.gc_threshold);
    format_divisions(divs, conf, conf_len);
    if (c.expandable_segments) append(conf, conf_len, ",", "expandable_segments:True");
    gm_err e2;
    if (gm_pt_conf_parse(conf, &check, &e2) != GM_OK)
        return gm_errf(err, GM_EINVAL,
                       "allocator_settings translate to '%s', which gmsim cannot use (%s); the "
                       "snapshot's settings are outside what the pytorch model supports",
                       conf, e2.msg);
    return GM_OK;
}

/* ---------------- metadata ---------------- */

typedef struct snap { /* what every device of one snapshot shares */
    const char *name, *command, *layout, *device_name;
    const char *torch_version; /* the PyTorch versions that write this layout ("" unknown) */
    uint64_t device_total;     /* --device-total / --gpu, 0 = unknown */
    const pkl_value *segments, *traces, *settings, *ann;
    char conf[256], dropped[512], env[256];
} snap;

static void fmt_mib(char *buf, size_t len, uint64_t bytes)
{
    snprintf(buf, len, "%.2f MiB", (double)bytes / (double)GM_MiB);
}

static void describe(const snap *s, const dev *d, gm_import_trace *t, char *w, size_t len)
{
    char a[32], b[32];
    const char *base = strrchr(s->name, '/') ? strrchr(s->name, '/') + 1 : s->name;
    snprintf(w, len, "PyTorch memory snapshot %s, device %d (%s layout): %" PRIu64 " entries", base,
             d->device, s->layout, t->n_entries);
    for (int k = 0; k < GM_TA_COUNT; k++)
        if (t->n_action[k])
            append(w, len, k ? ", " : " (", "%" PRIu64 " %s", t->n_action[k], action_names[k]);
    append(w, len, "", "%s; time: %s", t->n_entries ? ")" : "",
           !t->n_entries        ? "none (no trace: initial state only)"
           : t->order_only_time ? "order only (no time_us; t_ns = entry index x 1000)"
                                : "time_us, from the first entry");
    fmt_mib(a, sizeof a, t->init_segment_bytes);
    fmt_mib(b, sizeof b, t->init_block_bytes);
    append(w, len, "",
           "; before the first entry: %" PRIu64 " segments (%s), %" PRIu64
           " live blocks (%s requested)",
           t->init_segments, a, t->init_blocks, b);
    append(w, len, "", "; categories inferred from stacks and lifetimes (traces/IMPORT.md)");
    if (s->env[0]) append(w, len, "", "; recorded PYTORCH_CUDA_ALLOC_CONF='%s'", s->env);
    if (s->dropped[0])
        append(w, len, "",
               "; allocator_settings not used (no effect on the device allocator "
               "model): %s",
               s->dropped);
    if (!s->settings)
        append(w, len, "", "; no allocator_settings recorded: PyTorch defaults assumed");
    if (t->meta.device_avail_bytes)
        append(w, len, "",
               "; device memory available to the process: %" PRIu64 " B (at least %" PRIu64
               " B, %s %" PRIu64 " B), %s",
               t->meta.device_avail_bytes, t->meta.device_avail_min_bytes,
               t->meta.device_avail_max_bytes ? "less than" : "no upper bound",
               t->meta.device_avail_max_bytes, t->avail_source);
    if (t->n_empty_cache)
        append(w, len, "", "; %" PRIu64 " torch.cuda.empty_cache() calls", t->n_empty_cache);
    if (t->init_expandable)
        append(w, len, "", "; %" PRIu64 " expandable segments rebuilt from their mapped ranges",
               t->init_expandable);
    if (t->init_private)
        append(w, len, "",
               "; %" PRIu64 " segments in CUDA-graph private pools, kept apart from the default "
               "pools",
               t->init_private);
    if (t->deferred_frees)
        append(w, len, "",
               "; %" PRIu64 " frees deferred past their free_requested (record_stream), kept as "
               "free_requested events",
               t->deferred_frees);
    if (t->time_repairs)
        append(w, len, "", "; %" PRIu64 " timestamps went backwards and were clamped",
               t->time_repairs);
    if (t->skipped)
        append(w, len, "", "; %" PRIu64 " entries of unknown actions skipped", t->skipped);
}

static void summarize(gm_import_trace *t)
{
    char a[32], b[32];
    fmt_mib(a, sizeof a, t->init_segment_bytes);
    fmt_mib(b, sizeof b, t->init_block_bytes);
    if (!t->n_events) {
        snprintf(t->summary, sizeof t->summary,
                 "device %d: the snapshot has no trace of allocations (%" PRIu64 " trace entries): "
                 "initial state only, %" PRIu64 " segments (%s) holding %" PRIu64
                 " live blocks (%s requested); nothing to replay",
                 t->device, t->n_entries, t->init_segments, a, t->init_blocks, b);
        return;
    }
    snprintf(t->summary, sizeof t->summary,
             "device %d: %zu events (%" PRIu64 " alloc, %" PRIu64 " free, %" PRIu64
             " segment_alloc, %" PRIu64 " segment_free) from %" PRIu64 " entries; pre-existing: "
             "%" PRIu64 " blocks (%s requested) in %" PRIu64 " segments (%s)",
             t->device, t->n_events, t->n_action[GM_TA_ALLOC], t->n_action[GM_TA_FREE_COMPLETED],
             t->n_action[GM_TA_SEGMENT_ALLOC] + t->n_action[GM_TA_SEGMENT_MAP],
             t->n_action[GM_TA_SEGMENT_FREE] + t->n_action[GM_TA_SEGMENT_UNMAP], t->n_entries,
             t->init_blocks, b, t->init_segments, a);
    if (t->deferred_frees) {
        size_t n = strlen(t->summary);
        snprintf(t->summary + n, sizeof t->summary - n,
                 "; %" PRIu64 " frees deferred past their free_requested (record_stream)",
                 t->deferred_frees);
    }
}

static int set_meta(const snap *s, const dev *d, gm_import_trace *t, gm_err *err)
{
    char when[32], w[3072];
    gm_utc_now(when, sizeof when);
    gm_trace_meta keep = t->meta; /* the numbers found so far (device window) */
    gm_trace_meta_init(&t->meta);
    t->meta.device_total_bytes = s->device_total;
    t->meta.device_avail_bytes = keep.device_avail_bytes;
    t->meta.device_avail_min_bytes = keep.device_avail_min_bytes;
    t->meta.device_avail_max_bytes = keep.device_avail_max_bytes;
    if (s->device_name && gm_trace_meta_set(&t->meta.device_name, s->device_name))
        return oom_err(err);
    describe(s, d, t, w, sizeof w);
    if (gm_trace_meta_set(&t->meta.device_avail_source, t->avail_source) ||
        gm_trace_meta_set(&t->meta.torch_version, s->torch_version) ||
        gm_trace_meta_set(&t->meta.source, "torch-snapshot") ||
        gm_trace_meta_set(&t->meta.created_utc, when) ||
        gm_trace_meta_set(&t->meta.command, s->command ? s->command : "") ||
        gm_trace_meta_set(&t->meta.workload, w) || gm_trace_meta_set(&t->meta.alloc_conf, s->conf))
        return oom_err(err);
    summarize(t);
    return GM_OK;
}

/* ---------------- per device, per snapshot ---------------- */

static int import_device(const snap *s, int device, gm_import_trace *t, gm_err *err)
{
    dev d = {.name = s->name,
             .device = device,
             .expandable_conf = strstr(s->conf, "expandable_segments:True") != NULL,
             .gc_conf = strstr(s->conf, "garbage_collection_threshold") != NULL};
    int rc = GM_OK;
    memset(t, 0, sizeof *t);
    t->device = device;
    const pkl_value *list = pkl_item(s->traces, (size_t)device);
    if (gm_addrmap_init(&d.live, 1024) || gm_addrmap_init(&d.segmap, 256)) rc = oom_err(err);
    if (!rc && list && !pkl_is_seq(list))
        rc = gm_errf(err, GM_EINVAL, "%s: device_traces[%d] is not a list", s->name, device);
    if (!rc) rc = read_segments(&d, s->segments, t, err);
    if (!rc) rc = read_entries(&d, list, t, err);
    if (!rc) rc = read_ranges(&d, s->ann, err);
    if (!rc) rc = undo_trace(&d, err);
    if (!rc) rc = categorize(&d, t, err);
    if (!rc) rc = assign_sites(&d, t, err);
    if (!rc) rc = build_initial(&d, t, err);
    if (!rc) rc = gm_imp_bursts(&d, t->init_segment_bytes, t, err);
    if (!rc) rc = emit(&d, s->ann, t, err);
    if (!rc) rc = set_meta(s, &d, t, err);
    dev_free(&d);
    if (rc) gm_import_trace_free(t);
    return rc;
}

static const char *layout_of(const pkl_value *root, const pkl_value *segs, const pkl_value *traces)
{
    if (pkl_is_seq(root)) return "legacy list";
    for (size_t i = 0; i < pkl_len(segs); i++) {
        const pkl_value *b0 = pkl_item(pkl_dict_get(pkl_item(segs, i), "blocks"), 0);
        if (b0)
            return pkl_dict_get(b0, "address")
                       ? (pkl_dict_get(root, "allocator_settings") ? "current"
                                                                   : "older (no time_us)")
                       : "PyTorch 2.0";
    }
    for (size_t i = 0; i < pkl_len(traces); i++) {
        const pkl_value *e0 = pkl_item(pkl_item(traces, i), 0);
        if (e0) return pkl_dict_get(e0, "time_us") ? "current" : "older (no time_us)";
    }
    return pkl_dict_get(root, "allocator_settings") ? "current" : "older (no time_us)";
}

/* Which PyTorch wrote the snapshot, from what it contains (ALLOC_CONF.md,
 * "Telling versions apart"): allocator_settings appeared in 2.3, with
 * graph_capture_record_stream_reuse in 2.9, with the pinned allocator's
 * max_round_threshold / max_cached_size in 2.11; before 2.3 there are none,
 * and 2.0's blocks carry a history instead of an address. */
static const char *torch_version_of(const pkl_value *root, const pkl_value *settings,
                                    const char *layout)
{
    if (pkl_is_seq(root)) return ""; /* torch.cuda.memory_snapshot(): any version */
    if (!settings) return !strcmp(layout, "PyTorch 2.0") ? "2.0" : "2.0-2.2";
    if (pkl_dict_get(settings, "max_round_threshold") || pkl_dict_get(settings, "max_cached_size"))
        return "2.11";
    if (pkl_dict_get(settings, "graph_capture_record_stream_reuse")) return "2.9-2.10";
    return "2.3-2.8";
}

static int read_snap(const pkl_value *root, const gm_torch_opts *o, snap *s, gm_err *err)
{
    memset(s, 0, sizeof *s);
    s->name = o && o->name ? o->name : "snapshot";
    s->command = o ? o->command : NULL;
    s->device_total = o ? o->device_total_bytes : 0;
    s->device_name = o ? o->device_name : NULL;
    if (pkl_is_seq(root)) { /* torch.cuda.memory_snapshot(): segments only */
        s->segments = root;
    } else if (pkl_is(root, PKL_DICT) && pkl_is_seq(pkl_dict_get(root, "segments"))) {
        s->segments = pkl_dict_get(root, "segments");
        s->traces = pkl_dict_get(root, "device_traces");
        s->settings = pkl_dict_get(root, "allocator_settings");
        s->ann = pkl_dict_get(root, "external_annotations");
    } else {
        return gm_errf(err, GM_EINVAL,
                       "%s: not a PyTorch memory snapshot: the pickle holds a %s without "
                       "'segments' (expected what torch.cuda.memory._dump_snapshot() writes)",
                       s->name, pkl_kind_name(root ? root->kind : PKL_NONE));
    }
    if (s->traces && !pkl_is_seq(s->traces))
        return gm_errf(err, GM_EINVAL, "%s: 'device_traces' is not a list", s->name);
    if (s->settings && !pkl_is(s->settings, PKL_DICT))
        return gm_errf(err, GM_EINVAL, "%s: 'allocator_settings' is not a dict", s->name);
    s->layout = layout_of(root, s->segments, s->traces);
    s->torch_version = torch_version_of(root, s->settings, s->layout);
    const char *env = pkl_dict_str(s->settings, "PYTORCH_CUDA_ALLOC_CONF");
    snprintf(s->env, sizeof s->env, "%s", env ? env : "");
    if (s->settings && gm_torch_settings_conf(s->settings, s->conf, sizeof s->conf, s->dropped,
                                              sizeof s->dropped, err)) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        return gm_errf(err, GM_EINVAL, "%s: %s", s->name, msg);
    }
    return GM_OK;
}

/* Devices with segments or trace entries: bit set in *mask (devices 0..63). */
static int devices_of(const snap *s, uint64_t *mask, gm_err *err)
{
    *mask = 0;
    for (size_t i = 0; i < pkl_len(s->segments); i++) {
        int64_t d = 0;
        pkl_dict_int(pkl_item(s->segments, i), "device", &d);
        if (d < 0 || d > 63)
            return gm_errf(err, GM_EINVAL, "%s: segment %zu: device %" PRId64 " is not 0..63",
                           s->name, i, d);
        *mask |= 1ull << d;
    }
    for (size_t d = 0; d < pkl_len(s->traces); d++)
        if (pkl_len(pkl_item(s->traces, d))) {
            if (d > 63) return gm_errf(err, GM_EINVAL, "%s: more than 64 devices", s->name);
            *mask |= 1ull << d;
        }
    if (!*mask)
        return gm_errf(err, GM_EINVAL,
                       "%s: the snapshot holds no segments and no trace entries: there is "
                       "nothing to import (was _record_memory_history() enabled before the dump?)",
                       s->name);
    return GM_OK;
}

static void list_devices(uint64_t mask, char *buf, size_t len)
{
    buf[0] = 0;
    for (int d = 0; d < 64; d++)
        if (mask >> d & 1) append(buf, len, ", ", "%d", d);
}

int gm_torch_import_value(const pkl_value *root, const gm_torch_opts *opts, gm_torch_import **out,
                          gm_err *err)
{
    snap s;
    uint64_t mask;
    *out = NULL;
    if (read_snap(root, opts, &s, err) || devices_of(&s, &mask, err)) return err->code;
    int want = opts ? opts->device : -1;
    if (want >= 0 && (want > 63 || !(mask >> want & 1))) {
        char list[256];
        list_devices(mask, list, sizeof list);
        return gm_errf(err, GM_EINVAL,
                       "%s: --device %d: the snapshot has no data for it; it "
                       "has device(s) %s",
                       s.name, want, list);
    }
    if (want >= 0) mask = 1ull << want;
    size_t ndev = (size_t)__builtin_popcountll(mask);
    gm_torch_import *imp = calloc(1, sizeof *imp);
    if (imp) imp->dev = calloc(ndev, sizeof *imp->dev);
    if (imp) imp->failed = calloc(ndev, sizeof *imp->failed);
    if (!imp || !imp->dev || !imp->failed) {
        gm_torch_import_free(imp);
        return oom_err(err);
    }
    imp->layout = s.layout;
    gm_err first = {0};
    for (int d = 0; d < 64; d++) { /* each device on its own: one bad one stops no other */
        if (!(mask >> d & 1)) continue;
        gm_err e = {0};
        int rc = import_device(&s, d, &imp->dev[imp->n], &e);
        if (rc == GM_ENOMEM) {
            gm_torch_import_free(imp);
            *err = e;
            return rc;
        }
        if (rc == GM_OK) {
            imp->n++;
            continue;
        }
        if (!first.code) first = e;
        imp->failed[imp->n_failed].device = d;
        snprintf(imp->failed[imp->n_failed++].msg, sizeof imp->failed->msg, "%s", e.msg);
    }
    if (!imp->n) { /* nothing usable: the first device's reason */
        gm_torch_import_free(imp);
        *err = first;
        return first.code;
    }
    *out = imp;
    return GM_OK;
}

int gm_torch_import_file(const char *path, const gm_torch_opts *opts, gm_torch_import **out,
                         gm_err *err)
{
    pkl_doc *doc;
    pkl_opts po = {.name = path};
    gm_torch_opts o = opts ? *opts : (gm_torch_opts){.device = -1};
    *out = NULL;
    if (!o.name) o.name = path;
    int rc = pkl_load_file(path, &po, &doc, err);
    if (rc) return rc;
    rc = gm_torch_import_value(pkl_root(doc), &o, out, err);
    pkl_free(doc);
    return rc;
}

void gm_torch_import_free(gm_torch_import *imp)
{
    if (!imp) return;
    for (size_t i = 0; imp->dev && i < imp->n; i++)
        gm_import_trace_free(&imp->dev[i]);
    free(imp->dev);
    free(imp->failed);
    free(imp);
}

/* ---------------- the shared result ---------------- */

void gm_import_trace_free(gm_import_trace *t)
{
    if (!t) return;
    gm_trace_meta_free(&t->meta);
    free(t->events);
    free(t->init);
    free(t->markers);
    for (size_t i = 0; i < t->n_sites; i++) {
        free((char *)t->sites[i].name);
        free((char *)t->sites[i].stack);
    }
    free(t->sites);
    t->sites = NULL;
    t->n_sites = 0;
    t->events = NULL;
    t->init = NULL;
    t->markers = NULL;
    t->n_events = t->n_init = t->n_markers = 0;
}

int gm_import_trace_write(const gm_import_trace *t, const char *path,
                          const gm_trace_write_opts *opts, gm_err *err)
{
    gm_trace_writer *w;
    int rc = gm_trace_create(path, &t->meta, opts, &w, err);
    if (rc) return rc;
    /* the initial state first: its blocks then hold the first ids, and the
     * events' frees of them carry those (event_ids.h, seeded) */
    if ((t->n_init && (rc = gm_trace_write_initial(w, t->init, t->n_init, err))) ||
        (t->n_events && (rc = gm_trace_append(w, t->events, t->n_events, err))) ||
        (t->n_markers && (rc = gm_trace_add_markers(w, t->markers, t->n_markers, err))) ||
        (t->n_sites && (rc = gm_trace_write_sites(w, t->sites, t->n_sites, err)))) {
        gm_trace_abort(w);
        return rc;
    }
    return gm_trace_finish(w, err);
}
